"""The command line: ``chunktune tune|check|record|cache|policy``.

``main(argv) -> int`` never raises for a problem a person can fix: a
:class:`ChunktuneError` becomes ``chunktune: error: <message>`` on stderr and exit
code 2 (so does a failed write of the results to stdout: a full disk, ``>&-``),
Ctrl-C exit code 130 (from the moment chunktune's code runs: see ``_sigint``), SIGTERM
what Ctrl-C does but exit code 143 (while ``main`` runs), a reader
that closes stdout early (``| head -1``) exit code 141, as for a process killed
by SIGPIPE, all without a traceback. A reader that closes stderr (``2>&1 | head -0``)
only silences what follows there: the exit code is the command's own. Results go to
stdout, progress and warnings to stderr, so ``chunktune tune --json`` prints nothing
but the decision.

This module builds the parser and maps errors to exit codes; each command lives in
its own module (``_tune_cmd`` with ``_tune_interrupted``, ``_check_cmd``, ``_record_cmd``,
``_cache_cmd`` with ``_list_cmd``, ``_merge_cmd`` and ``_entry_keys``, ``_policy_cmd``); what
they share is in ``_common`` (exit codes, consoles, file names), ``_args`` (the workload
named on the command line), ``_progress`` (a sweep as it runs) and ``_render`` (tables and
plots).
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import difflib
import logging
import os
import re
import sys
from collections.abc import Callable, Iterator, Sequence
from typing import Any, NoReturn, cast

from .. import _sigint
from .._errors import ChunktuneError
from .._failures import WORKLOAD_TRACEBACK
from .._fingerprint import chunktune_version, mujoco_version
from .._lock_note import noted_as
from .._shown import spelled
from . import _cache_cmd, _check_cmd, _policy_cmd, _record_cmd, _tune_cmd
from ._common import (
    EXIT_INTERRUPTED,
    EXIT_PIPE,
    EXIT_TERMINATED,
    EXIT_USAGE,
    EXIT_WORKLOAD_FAILED,
    error,
    help_formatter,
    say,
)
from ._streams import Stderr, Stdout, StdoutFailed

__all__ = ["build_parser", "main"]

logger = logging.getLogger("chunktune")

_MAIN_EPILOG = """\
examples:
  chunktune tune                      tune the bundled demo on this machine
  chunktune tune robot.xml --num-envs 1024 --nthread 8
  chunktune tune --json               the decision as one JSON object
  chunktune check --seconds 120       re-time tune's cached size against native for 2 min;
                                      native replaces it unless it is still faster
  chunktune cache list                what has been decided on this machine
  chunktune policy show quick         a policy, fully resolved, as TOML
  chunktune record -o demo.json       every chunk size of the demo, as a trace

in a trainer: decision = chunktune.resolve_sync(workload), or await
chunktune.resolve(workload); then pass chunk_size=decision.chunk_size to each
pool.rollout(...) call; None keeps the native chunk (README: "Using it from Python").

exit status: 0 ok; 1 no measured decision, the native chunk is reported (the
workload failed while measuring or in signature(), chunktune's own code failed, the
process ran out of threads or file descriptors, hard_limit_s ran out, or, for check,
nothing cached to check or another sweep held the machine past the wait); 2 a usage,
settings or file error, or results that cannot be written to stdout; 130
interrupted; 141 stdout was closed before all was written (as by `| head`); 143
terminated (SIGTERM, which is handled as Ctrl-C is).

settings (tune, check, cache, policy; record reads them only for the cache's name):
--config F, else $CHUNKTUNE_CONFIG, else ./chunktune.toml, else defaults;
$CHUNKTUNE_CACHE names the cache file (a name ending in .toml is stored as TOML,
any other as JSON; [cache] format can say which).
"""


# argparse's refusal of a value given to an option that takes none (--json=1), its repr
_VALUE_TO_A_FLAG = re.compile(r"argument (\S+): ignored explicit argument ('.*'|\".*\")", re.S)


class _Parser(argparse.ArgumentParser):
    """argparse's parser, with an unknown command or verb, and a value given to an option
    that takes none, quoted as settings values are ("frob", not 'frob'), and a near miss
    named; its subcommands' parsers are of this class."""

    def error(self, message: str) -> NoReturn:
        flag = _VALUE_TO_A_FLAG.fullmatch(message)
        if flag:  # "ignored" it was not: the command is refused
            value = ast.literal_eval(flag.group(2))
            message = f"argument {flag.group(1)}: takes no value, got {spelled(value)}"
        super().error(message)

    def _check_value(self, action: argparse.Action, value: Any) -> None:
        choices = action.choices
        if choices is None or value in choices:
            return
        names = [str(c) for c in choices]
        close = difflib.get_close_matches(str(value), names, n=1)
        hint = f"; did you mean {close[0]}?" if close else ""
        raise argparse.ArgumentError(
            action, f"{spelled(value)} is not one of {', '.join(names)}{hint}"
        )


class _Version(argparse.Action):
    """``--version``, its versions read only when it is given: reading installed
    distributions' metadata would cost every other command, ``--help`` included."""

    def __init__(self, option_strings: list[str], dest: str = argparse.SUPPRESS) -> None:
        super().__init__(
            option_strings,
            dest,
            default=argparse.SUPPRESS,
            nargs=0,
            help="show program's version number and exit",
        )

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        """Print the versions on stdout and exit 0, as argparse's own version action does."""
        print(f"chunktune {chunktune_version()} (mujoco {mujoco_version()})")
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    """The ``chunktune`` argument parser."""
    parser = _Parser(
        prog="chunktune",
        description="Pick the chunk_size of MuJoCo's rollout thread pool by measurement,\n"
        "once per job and machine, and remember the answer.",
        epilog=_MAIN_EPILOG,
        formatter_class=help_formatter,
    )
    parser.add_argument("--version", action=_Version)
    # the subcommands' parsers are _Parser too (argparse makes them of the parser's class)
    commands = cast(
        "argparse._SubParsersAction[argparse.ArgumentParser]",
        parser.add_subparsers(dest="command", metavar="COMMAND"),
    )

    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--config",
        metavar="FILE",
        help="settings file (default: $CHUNKTUNE_CONFIG, else ./chunktune.toml)",
    )
    _tune_cmd.add_parser(commands, common)
    _check_cmd.add_parser(commands, common)
    _record_cmd.add_parser(commands)  # it reads no settings: no --config
    _cache_cmd.add_parser(commands, common)
    _policy_cmd.add_parser(commands, common)
    return parser


class _Lines(logging.Formatter):
    """A record as its message; a traceback only where it is chunktune's own, for a bug
    report: a workload's failure is its line, and the reason says the rest (README: exit
    status 1)."""

    def format(self, record: logging.LogRecord) -> str:
        if getattr(record, WORKLOAD_TRACEBACK, False):
            record = logging.makeLogRecord({**record.__dict__, "exc_info": None, "exc_text": None})
        return super().format(record)


@contextlib.contextmanager
def _log_to_stderr() -> Iterator[None]:
    """Show chunktune's warnings (cache moved aside, ...) as plain lines on stderr.

    The logger is set to INFO so that ``resolve`` sees logging configured and does
    not print its own one-line report: the CLI draws the decision itself.
    """
    handler = logging.StreamHandler(sys.stderr)
    handler.setLevel(logging.WARNING)
    handler.setFormatter(_Lines("%(message)s"))
    old_level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(old_level)


def _quiet_stdout() -> None:
    """Point stdout at /dev/null: the final flush at exit must not fail on the closed pipe."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):  # stdout is no real file (captured, say): nothing to flush
        pass


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit code.

    0 ok, 1 no measured decision (workload failed or hard limit), 2 error, 130
    interrupted, 141 stdout closed early, 143 terminated (SIGTERM, handled as Ctrl-C is:
    a sweep stops and caches nothing, a recording writes nothing, and it is said).
    """
    with _sigint.terminated_as_interrupted() as termination:
        code = _run(argv)
    return EXIT_TERMINATED if code == EXIT_INTERRUPTED and termination.came else code


def _run(argv: Sequence[str] | None) -> int:
    """:func:`main`, SIGTERM aside."""
    real, out = sys.stdout, Stdout(sys.stdout)
    sys.stdout = out
    real_err = sys.stderr
    if real_err is None:
        # stderr closed at start (`2>&-`, a daemon's): print(file=None) and rich write to
        # stdout instead, so progress would corrupt `--json`, and an error line would fail
        # on a closed stdout and end in a traceback; what goes to stderr goes nowhere
        # escaping as Python's own stderr does: an error naming a file of bytes that are no
        # UTF-8 failed to encode, and ended the command in exit 1, not 2
        sys.stderr = open(os.devnull, "w", errors="backslashreplace")  # noqa: SIM115
        if sys.stderr.fileno() == 2:
            # in stderr's own place, so child processes inherit it: one started with no
            # stderr fails where it loads a library (older mujoco's glfw checks itself in
            # a child on import: no mujoco at all)
            os.set_inheritable(2, True)
    else:
        sys.stderr = Stderr(real_err)
    try:
        _sigint.release()  # from here on Ctrl-C is a KeyboardInterrupt, handled below
        code = _main(argv)
        sys.stdout.flush()  # a small result still in the buffer fails here, not at exit
        if out.failure is not None:  # --help and --version write through argparse, which
            raise out.failure  # swallows a failed write (a closed pipe's too)
        return code
    except StdoutFailed as exc:
        error(str(exc))
        _quiet_stdout()
        return EXIT_USAGE
    except KeyboardInterrupt:
        say("interrupted")
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        _quiet_stdout()
        return EXIT_PIPE
    except MemoryError:
        # the machine's memory, spent outside a resolve (which says so in its reason): one
        # line and exit 1, as for spent threads; Python's traceback named only where an
        # allocation happened to fail (a stat of the settings, an import of mujoco)
        error("chunktune ran out of memory (MemoryError)")
        return EXIT_WORKLOAD_FAILED
    except Exception as exc:
        if not _interrupted(exc):
            raise
        say("interrupted")
        return EXIT_INTERRUPTED
    finally:
        sys.stdout = real
        if real_err is None:
            sys.stderr.close()
        sys.stderr = real_err


def _interrupted(exc: BaseException) -> bool:
    """Whether ``exc`` stands for a Ctrl-C: a KeyboardInterrupt among its causes.

    An extension module being imported when Ctrl-C arrives (mujoco, loaded on first
    use) fails its initialization with an ImportError raised from the interrupt.
    """
    seen: set[int] = set()
    cause: BaseException | None = exc
    while cause is not None and id(cause) not in seen:
        if isinstance(cause, KeyboardInterrupt):
            return True
        seen.add(id(cause))
        cause = cause.__cause__ or cause.__context__
    return False


def _owner(parser: argparse.ArgumentParser, args: argparse.Namespace) -> argparse.ArgumentParser:
    """The (sub)command's parser that ``args`` reached: ``chunktune cache clear``'s for it."""
    while True:
        subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        name = getattr(args, subs[0].dest, None) if subs else None
        if not subs or name not in subs[0].choices:
            return parser
        parser = subs[0].choices[name]


def _parsed(parser: argparse.ArgumentParser, argv: Sequence[str] | None) -> argparse.Namespace:
    """``parser.parse_args(argv)``, with an unknown option told by the command it was given
    to, and a near miss of that command's options named (``--polcy``: ``--policy``)."""
    args, extras = parser.parse_known_args(argv)
    if extras:
        owner = _owner(parser, args)
        options = [o for a in owner._actions for o in a.option_strings]
        flag = next((e.split("=", 1)[0] for e in extras if e.startswith("-")), None)
        close = difflib.get_close_matches(flag, options, n=1) if flag else []
        hint = f"; did you mean {close[0]}?" if close else ""
        owner.error(f"unrecognized arguments: {' '.join(extras)}{hint}")
    return args


def _main(argv: Sequence[str] | None) -> int:
    parser = build_parser()
    try:
        args = _parsed(parser, argv)
    except SystemExit as exc:  # --help, --version and usage errors
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else EXIT_USAGE)
    handler: Callable[[argparse.Namespace], int] | None = getattr(args, "handler", None)
    if handler is None:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    # a trainer waiting for this command's sweep is told what holds the machine
    words = (args.command, getattr(args, "verb", None))
    with _log_to_stderr(), noted_as(" ".join(["chunktune", *filter(None, words)])):
        try:
            return handler(args)
        except StdoutFailed:
            raise
        except ChunktuneError as exc:
            error(str(exc).strip())
            return EXIT_USAGE
