"""``chunktune check``: re-measure a cached size against native over a longer span of time,
and go back to native unless the size is still measurably faster.

Opt-in and paid: a resolve never runs it. It keys the workload as ``tune`` does (the
same options, defaults and key), so ``check`` with ``tune``'s arguments checks that
tune's entry; the measuring is ``_recheck``'s, the statistics ``_spans``'.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shlex

from .._cache import DecisionCache
from .._cache_entry import CacheEntry
from .._config import load_settings
from .._decision import Decision
from .._errors import CacheError, ConfigError, InvalidArgumentError
from .._failures import blames_workload
from .._here import in_memory, new_request
from .._keys import cache_for, identify_and_look, look
from .._named import named
from .._recheck import MIN_ROUNDS, Rechecked, recheck
from .._request import Request, ask, cache_entry
from .._settings import Settings
from .._shown import shown_path, spelled
from .._workload import Workload
from . import _tune_cmd
from ._args import add_workload_options, mujoco_warnings_told, pool_threads
from ._common import (
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USAGE,
    EXIT_WORKLOAD_FAILED,
    error,
    help_formatter,
    named_policy,
    say,
)
from ._machine import machine_to_ourselves

__all__ = ["add_parser"]

DEFAULT_SECONDS = 60.0
# how long to wait for another sweep under a policy without hard_limit_s: a resolve would
# wait on, but a check someone started by hand must not hang for good behind a stuck one
LOCK_WAIT_S = 600.0
_LINE_EVERY_S = 5.0  # a progress line at most this often, as tune's plain lines
_WARNED_THEN = "the re-check timed the model as it behaves, warnings and all"

HOLDS, DOES_NOT_HOLD = "holds", "does not hold"

_CHECK_EPILOG = f"""\
examples:
  chunktune check                                  re-check the demo's cached size, 60 s
  chunktune check robot.xml --num-envs 1024 --nthread 8 --seconds 300
  chunktune check --dry-run --json                 say what would be written; write nothing

Takes tune's arguments and checks the entry that tune with them stored. A cached size
other than native is timed against native in paired rounds, each in a fresh random
order, for at least --seconds and at least {MIN_ROUNDS} rounds, holding the machine-wide
sweep lock. It holds if the 95% interval of its gain over native lies above 0; the
entry is then kept. Otherwise native replaces it in the cache (unless --dry-run; and
only if no other process changed the entry meanwhile); a stronger policy's entry that
answered is left as it is, native cached for this policy alone. Some sizes' gain follows the
machine's state for seconds to minutes, which a sweep of seconds cannot tell (README,
the humanoid's 22): run check now and then, or after a tune on a busy machine.

exit status: 0 checked (whatever the verdict), or nothing to check (native, a disabled
policy or one that proposes only native, a trivial batch); 1 nothing cached for these
arguments, the workload failed, or another sweep held the machine past the wait; 2 a
usage, settings or file error (a cache that cannot be read too, or native that cannot be
written once the verdict is told); 130 interrupted (nothing written). With --json, exit
0 and 1 print the one object (verdict null where nothing was measured), and so does a
verdict that could not be written.
"""


def add_parser(
    commands: argparse._SubParsersAction[argparse.ArgumentParser],
    common: argparse.ArgumentParser,
) -> None:
    """Add ``check`` to ``commands``; ``common`` holds the options every command takes."""
    check = commands.add_parser(
        "check",
        parents=[common],
        help="re-measure a cached size over a longer span; native unless it still wins",
        description="Re-measure a cached chunk size against native over a longer span of\n"
        "time, and go back to native unless it is still measurably faster.",
        epilog=_CHECK_EPILOG,
        formatter_class=help_formatter,
    )
    add_workload_options(check)
    check.add_argument(
        "--policy",
        type=_tune_cmd.policy_option,
        metavar="P",
        help="the policy whose entry to check (default: the active policy)",
    )
    check.add_argument(
        "--seconds",
        metavar="S",
        default=str(DEFAULT_SECONDS),
        help=f"least seconds to measure (default: {DEFAULT_SECONDS:g})",
    )
    check.add_argument("--dry-run", action="store_true", help="measure, but write nothing")
    check.add_argument("--json", action="store_true", help="print only the result as JSON")
    check.add_argument("-q", "--quiet", action="store_true", help="no progress on stderr")
    check.set_defaults(handler=_cmd_check)


def _seconds(text: str) -> float:
    """``--seconds``, parsed here so that a bad one is one line, not argparse's usage too.

    Raises:
        InvalidArgumentError: not a finite number > 0.
    """
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise InvalidArgumentError(
            f"--seconds {spelled(text)}: expected a finite number of seconds > 0"
        )
    return value


def _cmd_check(args: argparse.Namespace) -> int:
    seconds = _seconds(args.seconds)
    settings = load_settings(args.config)
    policy_name, policy = named_policy(settings, args.policy, "--policy")
    nthread = pool_threads(args.nthread)
    workload, what = _tune_cmd.tune_workload(args, nthread)
    wait_s = LOCK_WAIT_S if policy.hard_limit_s is None else policy.hard_limit_s
    try:
        return _check(args, settings, policy_name, workload, what, seconds, wait_s)
    finally:
        close = getattr(workload, "close", None)
        if callable(close):
            close()


def _check(
    args: argparse.Namespace,
    settings: Settings,
    policy_name: str,
    workload: Workload,
    what: str,
    seconds: float,
    wait_s: float,
) -> int:
    # refresh: a decision this process remembers is not what the cache holds, and the
    # entry is looked up below, where the lookup says which cache answered
    asked = ask(
        workload,
        settings=settings,
        policy=policy_name,
        manual=None,
        refresh=True,
        on_progress=None,
    )
    answered = in_memory(asked, settings)
    if answered is not None:  # a disabled policy, a trivial batch, nothing but native
        say(f"nothing to check: {answered.reason}")
        _print_json(args, None, None, answered.native_chunk)  # such a decision has no key
        return EXIT_OK
    cache = cache_for(settings)
    if cache is None:
        where = f" in {shown_path(settings.source)}" if settings.source else ""
        raise ConfigError(
            f"the cache is disabled ([cache] enabled = false{where}); nothing to check",
            asked=True,
        )
    # one that cannot be read is a file error, as for `cache list`, not "nothing cached"
    # (a resolve reads it as empty, with a warning): a tune would not help
    cache.entries(strict=True)
    # keyed as a resolve keys it; 0.0: keying needs no deadline, whatever hard_limit_s says
    unkeyed = new_request(asked, settings, 0.0)
    try:
        req, key, _, _ = identify_and_look(unkeyed, cache)  # keyed only: refresh
    except Exception as exc:
        if not blames_workload(exc):
            raise
        error(f"the workload's signature() failed ({named(exc)}); nothing was checked")
        _print_json(args, None, None, unkeyed.native)
        return EXIT_WORKLOAD_FAILED
    looked = look(req, key, cache)
    if looked is None:
        error(
            f"nothing cached for {what}, policy {policy_name} (key {key}); "
            f"`{_tune_command(args)}` tunes it"
        )
        _print_json(args, key, None, req.native)
        return EXIT_WORKLOAD_FAILED
    hit, system = looked
    chunk = hit.chunk_size
    if chunk is None or chunk == hit.native_chunk:
        say(f"cached: the native chunk {hit.native_chunk} (key {hit.key}); nothing to check")
        _print_json(args, hit.key, None, hit.native_chunk)
        return EXIT_OK
    # what a write may replace: this request's own key, and the entry that answered it
    # (a stronger policy's, perhaps); a process that changes either meanwhile wins
    expected: dict[str, CacheEntry | None] = {key: cache.get(key), hit.key: cache.get(hit.key)}
    if not args.quiet:
        say(
            f"re-checking chunk {chunk} against native {hit.native_chunk}: paired rounds "
            f"for at least {seconds:g} s and {MIN_ROUNDS} rounds"
        )
    measured = _measured(workload, chunk, seconds, wait_s, quiet=args.quiet)
    if isinstance(measured, int):
        if measured == EXIT_WORKLOAD_FAILED:  # a Ctrl-C prints nothing, as tune's does
            _print_json(args, hit.key, chunk, hit.native_chunk)
        return measured
    span = measured.span
    written, note, status = False, "kept: the entry is unchanged", EXIT_OK
    if not span.holds:
        try:
            written, note = _replace(args, cache, req, key, expected, measured, hit, system=system)
        except _Unwritten as exc:
            note, status = str(exc), EXIT_USAGE  # a file error, told after the verdict
    if args.json:
        print(json.dumps(_result(hit.key, chunk, hit.native_chunk, measured, written)), flush=True)
    else:
        verdict = (
            f"{HOLDS}: still measurably faster than native"
            if span.holds
            else f"{DOES_NOT_HOLD}: not measurably faster than native"
        )
        print(f"{what}; policy {policy_name}")
        where = " (the read-only system cache's entry)" if system else ""
        print(f"cached: chunk {chunk} (native {hit.native_chunk}); cache key {hit.key}{where}")
        print(measured.summary())
        print(verdict)
        print(note, flush=True)
    if status != EXIT_OK:  # on stderr too, as every exit 2 says why
        error(note)
    return status


class _Unwritten(Exception):
    """Native could not be written in place of a size that did not hold: the line says why."""


def _replace(
    args: argparse.Namespace,
    cache: DecisionCache,
    req: Request,
    key: str,
    expected: dict[str, CacheEntry | None],
    measured: Rechecked,
    hit: Decision,
    *,
    system: bool,
) -> tuple[bool, str]:
    """Native in place of the size that did not hold (``hit``, the entry that answered,
    from the read-only system cache where ``system``), unless ``--dry-run`` or the entry
    changed meanwhile: whether it was written, and the line that says what became of it."""
    if args.dry_run:
        if system:  # the system file is never written: the user's cache answers before it
            return False, (
                "dry run: nothing written (native would be cached in "
                f"{shown_path(str(cache.path))}, which answers before the read-only system cache)"
            )
        return False, "dry run: nothing written (native would replace the entry)"
    native = Decision(
        chunk_size=None,
        native_chunk=req.native,
        source="benchmark",
        reason=f"{measured.summary()}, not measurably faster; native kept",
        key=key,
        timings=measured.timings(),
        samples={None: measured.rounds, measured.chunk_size: measured.rounds},
        probe_seconds=measured.probe_seconds,
        policy=req.policy_name,
    )
    try:
        swapped = cache.swap(key, cache_entry(req, native), expected=expected)
    except CacheError as exc:
        # the verdict took the whole span to measure: it is told all the same
        raise _Unwritten(f"not written: {exc}") from exc
    if not swapped:
        return False, (
            "not written: the entry changed while it was checked (another process re-tuned "
            "it?); it is left as it is"
        )
    if system:
        return True, (
            f"written: the native chunk {req.native} is cached for policy {req.policy_name} in "
            f"{shown_path(str(cache.path))} (key {key}), which answers before the read-only system "
            "cache; the system cache's entry is left as it is"
        )
    if hit.key != key:
        # the entry that answered was another policy's: it is left to answer that
        # policy's own requests, and "replaces it" would say otherwise
        return True, (
            f"written: the native chunk {req.native} is cached for policy "
            f"{req.policy_name} (key {key}); the entry of policy {hit.policy} "
            f"({hit.key}) is left as it is"
        )
    return True, f"written: the native chunk {req.native} replaces it in the cache"


def _measured(
    workload: Workload, chunk: int, seconds: float, wait_s: float, *, quiet: bool
) -> Rechecked | int:
    """The paired rounds, under the sweep lock; else the exit code of what stopped them
    (said in one line: nothing is written then)."""
    progress = None if quiet else _Progress(seconds)
    try:
        with machine_to_ourselves(wait_s) as held:
            if not held:
                error(
                    f"another sweep held the machine for {wait_s:g} s; nothing was checked "
                    "(try again when it is done)"
                )
                return EXIT_WORKLOAD_FAILED
            with mujoco_warnings_told("re-checking", _WARNED_THEN):
                return recheck(workload, chunk, seconds=seconds, on_round=progress)
    except KeyboardInterrupt:
        say("interrupted: the re-check stopped and nothing was written")
        return EXIT_INTERRUPTED
    except Exception as exc:
        if not blames_workload(exc):
            raise
        error(f"the workload failed while re-checking ({named(exc)}); nothing was written")
        return EXIT_WORKLOAD_FAILED


class _Progress:
    """A re-check's progress on stderr: a line at most every :data:`_LINE_EVERY_S`."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.said_s = 0.0

    def __call__(self, rounds: int, elapsed_s: float) -> None:
        if elapsed_s - self.said_s >= _LINE_EVERY_S:
            self.said_s = elapsed_s
            say(f"round {rounds}: {elapsed_s:.0f} s of {self.seconds:g} s")


def _tune_command(args: argparse.Namespace) -> str:
    """The ``chunktune tune`` command line that stores the entry these arguments check."""
    words = ["chunktune", "tune"]
    # argparse reads a word that starts with a dash as an option: such a model goes last,
    # after "--", and such a value joins its flag with "="
    dashed = args.model is not None and args.model.startswith("-")
    if args.model is not None and not dashed:
        words.append(args.model)
    for flag, value in (
        ("--num-envs", args.num_envs),
        ("--nthread", args.nthread),
        ("--nstep", args.nstep),
        ("--n-variants", args.n_variants),
        ("--model-label", args.model_label),
        ("--policy", args.policy),
        ("--config", args.config),
    ):
        if value is not None:
            text = str(value)
            words += [f"{flag}={text}"] if text.startswith("-") else [flag, text]
    if dashed:
        words += ["--", args.model]
    return " ".join(map(_shell_word, words))


def _shell_word(word: str) -> str:
    """``word`` for a command line to paste: as ``shlex`` quotes it, or, where it holds a
    character a terminal would not print as written (a file named with a newline or an
    escape) or a byte that is no UTF-8 (a file name's, as Python decodes it), in bash's
    ``$'...'`` with that character as its bytes, so the line stays one line, acts on no
    terminal, and pastes back as the same word."""
    if word.isprintable():  # no control, format, separator, surrogate (a byte), unassigned
        return shlex.quote(word)
    return "$'" + "".join(map(_ansi_c, word)) + "'"


def _ansi_c(c: str) -> str:
    """One character inside bash's ``$'...'``: one that would not print as written as its
    bytes (``\\x1b``; ``\\xe2\\x80\\xae`` for a bidi override: bash's ``\\U`` depends on
    its locale, and a C locale's bash writes it back as text), a quote or backslash
    escaped."""
    if c in "\\'":
        return "\\" + c
    if c.isprintable():
        return c
    return "".join(f"\\x{byte:02x}" for byte in os.fsencode(c))


def _result(
    key: str | None, chunk: int | None, native: int, measured: Rechecked | None, written: bool
) -> dict[str, object]:
    """The JSON object ``check --json`` prints: where nothing was measured (``measured``
    None), the same keys, no rounds and no verdict; ``key`` null where none was made."""
    if measured is None:
        rounds, seconds, gain, gain_ci, verdict = 0, 0.0, 0.0, None, None
    else:
        span = measured.span
        rounds, seconds, gain = measured.rounds, measured.elapsed_s, span.gain
        gain_ci, verdict = [span.low, span.high], HOLDS if span.holds else DOES_NOT_HOLD
    return {
        "key": key,
        "chunk_size": chunk,
        "native_chunk": native,
        "rounds": rounds,
        "seconds": seconds,
        "gain": gain,
        "gain_ci": gain_ci,
        "verdict": verdict,
        "written": written,
    }


def _print_json(args: argparse.Namespace, key: str | None, chunk: int | None, native: int) -> None:
    """``--json`` where nothing was measured: exit 0 or 1 prints the object, as tune's
    ``--json`` prints its decision then, so that a script can parse stdout whatever the
    outcome (``key`` None, JSON null, where none was made)."""
    if args.json:
        print(json.dumps(_result(key, chunk, native, None, False)), flush=True)
