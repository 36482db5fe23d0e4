"""What every ``chunktune`` command shares: exit codes, consoles, stderr lines, file names,
the user's cache. (``_streams`` holds what becomes of stdout and stderr while one runs.)"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from .._atomic import check_writable
from .._cache import DecisionCache
from .._cache_legacy import LEGACY_PREFIX
from .._cache_parse import ParsedCache
from .._cache_transfer import read_cache_stream
from .._config import load_settings
from .._errors import CacheError, ConfigError, InvalidArgumentError, OutputError
from .._keys import cache_for
from .._paths import user_path
from .._policy import Policy
from .._settings import Settings, unknown_policy
from .._shown import shown, shown_file, shown_path
from .._sigint import EXIT_INTERRUPTED, EXIT_TERMINATED

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table

__all__ = [
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_PIPE",
    "EXIT_TERMINATED",
    "EXIT_USAGE",
    "EXIT_WORKLOAD_FAILED",
    "STDIN",
    "STDIN_NAME",
    "console_on",
    "entries_of",
    "error",
    "exists",
    "file_arg",
    "help_formatter",
    "live_terminal",
    "named_policy",
    "newer_skipped",
    "open_cache",
    "output_file",
    "output_writable",
    "read_stdin_cache",
    "same_file",
    "say",
    "short_keys",
    "table_console",
    "warn",
    "warn_skipped",
]

EXIT_OK = 0
EXIT_WORKLOAD_FAILED = 1  # any fallback (hard_limit_s, chunktune's bug, spent threads) too
EXIT_USAGE = 2
EXIT_PIPE = 141  # stdout closed early (`| head`): what a process killed by SIGPIPE reports

STDIN = "-"  # a cache file to read, as `tar -f -` reads stdin (JSON, as /dev/stdin is read)
STDIN_NAME = "stdin"  # what messages call it

_SHOW_SKIPPED = 5  # skipped entries named one by one on import and merge; the rest are counted


def help_formatter(prog: str) -> argparse.HelpFormatter:
    """Keeps the hand-laid epilogs as written; help columns start at 30 at most."""
    return argparse.RawDescriptionHelpFormatter(prog, max_help_position=30)


def console_on(file: TextIO) -> Console:
    """A console on ``file``; off a terminal, no colour and no wrapping of long lines.

    A closed pipe raises BrokenPipeError, which ``main`` turns into exit code 141.
    """
    from ._console import PipeConsole  # rich loads here, not for --help or a usage error

    console = PipeConsole(file=file, highlight=False, markup=False, emoji=False)
    if not console.is_terminal:
        # soft_wrap: a reason longer than the width stays one line, for grep and diff
        console = PipeConsole(
            file=file,
            highlight=False,
            markup=False,
            emoji=False,
            width=160,
            no_color=True,
            soft_wrap=True,
        )
    return console


def table_console(table: Table) -> Console:
    """A console on stdout to print ``table`` on; piped, as wide as the table needs.

    Piped (to grep, a file), no cell is cut short or wrapped: each row stays one line.
    """
    console = console_on(sys.stdout)
    if not console.is_terminal:
        unbounded = console.options.update_width(1 << 20)
        console.width = max(console.width, console.measure(table, options=unbounded).maximum)
    return console


def live_terminal(console: Console) -> bool:
    """Whether ``console`` can redraw a live bar in place: a terminal, not a dumb one.

    On a dumb terminal (``TERM=dumb``: an editor's shell buffer) rich draws no live
    display at all, so progress there goes out as plain lines, as to a log.
    """
    return console.is_terminal and not console.is_dumb_terminal


def say(message: str) -> None:
    """One line of progress or information on stderr."""
    print(f"chunktune: {message}", file=sys.stderr, flush=True)


def warn(message: str) -> None:
    print(f"chunktune: warning: {message}", file=sys.stderr, flush=True)


def error(message: str) -> None:
    print(f"chunktune: error: {message}", file=sys.stderr, flush=True)


def newer_skipped(parsed: ParsedCache) -> int:
    """How many of the entries ``parsed`` skipped a newer chunktune wrote whole (their
    checksum matches): not malformed, only of a form this one cannot read."""
    return sum(1 for key, _ in parsed.skipped if key in parsed.unread.entries)


def warn_skipped(parsed: ParsedCache, source: object) -> None:
    """Warn of the entries of ``source`` (a file) that were skipped, if any: as malformed,
    or as a newer chunktune's, which that chunktune moves."""
    newer = [(k, why) for k, why in parsed.skipped if k in parsed.unread.entries]
    malformed = [(k, why) for k, why in parsed.skipped if k not in parsed.unread.entries]
    for skipped, is_newer in ((malformed, False), (newer, True)):
        if not skipped:
            continue
        count = len(skipped)
        noun = "entry" if count == 1 else "entries"
        if is_newer:
            what = f"{noun} in {source} that a newer chunktune wrote, which this one cannot read"
        else:
            what = f"malformed {noun} in {source}"
        warn(f"skipped {count} {what}:")
        for key, why in skipped[:_SHOW_SKIPPED]:
            warn(f"  {shown(key)}: {why}")
        if count > _SHOW_SKIPPED:
            warn(f"  and {count - _SHOW_SKIPPED} more")


def open_cache(config: str | None, *, instead: str = "") -> DecisionCache:
    """The user's cache, as the settings (``--config``, else discovered) name it.

    Raises:
        ConfigError: the settings are invalid, or disable the cache (the message ends
            with ``instead``, what to do about it, if given).
    """
    settings = load_settings(config)
    cache = cache_for(settings)
    if cache is None:
        where = f" in {shown_path(settings.source)}" if settings.source else ""
        # the settings are valid, so the message is not "invalid settings: ..."
        raise ConfigError(
            f"the cache is disabled ([cache] enabled = false{where}){instead}", asked=True
        )
    return cache


def named_policy(settings: Settings, name: str | None, what: str) -> tuple[str, Policy]:
    """The policy a command line names (``what``: its flag), else the active one.

    Raises:
        InvalidArgumentError: no policy has that name (the file is not to blame).
    """
    if name is None:
        return settings.policy, settings.active
    if name not in settings.policies:
        raise InvalidArgumentError(f"{what}: {unknown_policy(name, settings.policies)}")
    return name, settings.policies[name]


def entries_of(count: int) -> str:
    """``"1 entry"``, ``"3 entries"``."""
    return f"{count} entr{'y' if count == 1 else 'ies'}"


def file_arg(what: str, value: str) -> Path:
    """A command-line file name as a path; ``what`` names the argument in the error.

    Raises:
        InvalidArgumentError: the name is empty, holds a NUL byte or names an unknown home.
    """
    try:
        path = user_path(value)
    except ValueError as exc:
        raise InvalidArgumentError(f"{what}: {exc}") from None
    if str(path) == STDIN:  # `./-`, a file named "-": messages must not read as stdin
        try:
            return path.absolute()
        except OSError:  # the working directory is gone: the name as given
            return path
    return path


def output_file(what: str, value: str) -> Path:
    """A file to write, named on the command line: :func:`file_arg`, in a directory that exists.

    Raises:
        InvalidArgumentError: the name is empty, holds a NUL byte or names an unknown home.
        OutputError: its directory does not exist (nothing is created on a typo's say-so),
            it names a directory, or a name in it is too long: said before a command
            measures for minutes, not after.
    """
    path = file_arg(what, value)
    if not _is_dir(what, path.parent):
        raise OutputError(
            f"{what} {shown_file(path)}: the directory {shown_file(path.parent)} does not exist"
        )
    if _is_dir(what, path):
        raise OutputError(f"{what} {shown_file(path)} is a directory; expected a file's name")
    return path


def output_writable(path: Path, what: str) -> None:
    """Said before a command works for minutes: the file ``path`` (the ``what``: ``"plot"``,
    ``"trace"``) can be written, as the write after the work would make it.

    Raises:
        OutputError: it cannot (a read-only or forbidden directory), naming the file and why.
    """
    try:
        check_writable(path)
    except OSError as exc:
        raise OutputError(
            f"cannot write the {what} {shown_file(path)}: {exc.strerror or exc}"
        ) from exc


def _is_dir(what: str, path: Path) -> bool:
    try:
        return path.is_dir()
    except OSError as exc:  # a name too long, say
        raise OutputError(f"{what} {shown_file(path)}: {exc.strerror or exc}") from None


def read_stdin_cache(verb: str) -> ParsedCache:
    """The cache file piped to stdin (:data:`STDIN` on the command line), read as JSON.

    ``verb`` (``import``, ``merge``) is the ``chunktune cache`` verb reading it, which a
    terminal's refusal shows piped to.

    Raises:
        CacheError: stdin is closed, a terminal or cannot be read, or holds no cache
            (:func:`read_cache_stream`).
    """
    if sys.stdin is None:  # closed at start (<&-)
        raise CacheError(f"cannot read {STDIN_NAME}: it is closed; expected a JSON cache piped in")
    if sys.stdin.isatty():  # as tar refuses to: `import -` typed alone would wait for Ctrl-D
        raise CacheError(
            f"cannot read {STDIN_NAME}: it is a terminal; expected a JSON cache piped in "
            f"(chunktune cache export - | chunktune cache {verb} -)"
        )
    return read_cache_stream(sys.stdin.buffer, name=STDIN_NAME)


def same_file(a: Path, b: Path) -> bool:
    """Whether ``a`` and ``b`` name one file (False where that cannot be told)."""
    try:
        return a.resolve() == b.resolve()
    except (OSError, RuntimeError):  # a name too long, a symlink loop: using it will say so
        return False


def exists(path: Path) -> bool:
    """``path.exists()``, False where that cannot be told (using the path will say why)."""
    try:
        return path.exists()
    except OSError:  # a name too long, say
        return False


def short_keys(keys: Iterable[str]) -> dict[str, str]:
    """Each key as ``cache list`` shows it: 12 characters, and where one workload has
    entries under several policies, a dot and the start of each's policy hash too."""
    keys = list(keys)
    heads = Counter(k[:12] for k in keys if not k.startswith(LEGACY_PREFIX))
    short = {}
    for key in keys:
        if key.startswith(LEGACY_PREFIX):
            short[key] = key[: len(LEGACY_PREFIX) + 12]
        elif heads[key[:12]] > 1:
            base, _, policy = key.rpartition(".")
            short[key] = f"{base[:12]}.{policy[:6]}"
        else:
            short[key] = key[:12]
    return short
