"""The one-line report of a decision: the ``chunktune`` logger, and stderr as set.

A report never fails a resolve: a stderr no one reads, or closed, or a bug in the
formatting, leaves the decision it reports standing.
"""

from __future__ import annotations

import contextlib
import logging
import sys

from ._decision import Decision, headline, timings_to_ms
from ._failures import by_signal_handler, log_bug
from ._settings import Settings, StderrMode

__all__ = ["report", "say"]

logger = logging.getLogger("chunktune")

# keys whose decision this process has written to stderr under "auto", and logged at
# INFO: a trainer that resolves once per env runner hears each cached answer once, not
# once per runner, on stderr or in its log (a hit logged alone is still news to stderr,
# should the logger stop listening)
_TOLD: set[str] = set()
_LOGGED: set[str] = set()


def say(
    line: str, settings: Settings, *, to_stderr: bool = True, level: int = logging.INFO
) -> None:
    """One line to the ``chunktune`` logger at ``level`` and, as ``[log] stderr`` says, to
    stderr.

    ``to_stderr`` False keeps an ``"auto"`` line off stderr (it was said there before).
    """
    mode = settings.log.stderr
    told = _writes_stderr(mode, to_stderr=to_stderr)
    # no stderr at all (`2>&-`, pythonw): print(file=None) would write into the trainer's stdout
    if told and sys.stderr is not None:
        # a stderr whose reader has gone (a collector's log pipe) or that the program
        # closed: the line is a report, and the decision it reports is still returned
        with contextlib.suppress(OSError, ValueError):
            print(f"[chunktune] {line}", file=sys.stderr, flush=True)
    if mode != "always":
        logger.log(level, line)


def _writes_stderr(mode: StderrMode, *, to_stderr: bool) -> bool:
    """Whether :func:`say` writes its line to stderr under ``[log] stderr = mode``."""
    # collectors in spawned subprocesses have no logging configured: say it anyway
    return mode == "always" or (
        mode == "auto" and to_stderr and not logger.isEnabledFor(logging.INFO)
    )


def report(decision: Decision, settings: Settings) -> None:
    """The one-line report of a decision, naming its policy: the ``chunktune`` logger, and
    stderr as set.

    Under ``[log] stderr = "auto"`` a key's cached decision is written to stderr, or
    logged at INFO, once per process (a new sweep's always is), its repeats logged at
    DEBUG; ``"always"`` writes every one to stderr.
    """
    try:
        _report(decision, settings)
    except Exception as exc:
        if by_signal_handler(exc):
            raise
        # a report is a line: the decision it reports is still returned
        log_bug(exc, "reporting a decision (the decision stands)")


def _report(decision: Decision, settings: Settings) -> None:
    """:func:`report`, whose own failure raises."""
    mode = settings.log.stderr
    hit = decision.source == "cache"
    quiet = mode == "auto" and hit and decision.key in _TOLD
    level = logging.DEBUG if hit and decision.key in _LOGGED else logging.INFO
    logged = mode != "always" and logger.isEnabledFor(level)
    written = _writes_stderr(mode, to_stderr=not quiet)
    if not (logged or written):
        return  # a hit nobody will read costs no formatting
    timings = ", ".join(f"{k}={v:.3g}ms" for k, v in timings_to_ms(decision.timings).items())
    line = f"{headline(decision)}: {decision.reason}"
    if decision.policy:
        line += f" | policy {decision.policy}"
    if timings:
        line += f" | {timings}"
    if decision.key and mode == "auto" and written:
        _TOLD.add(decision.key)
    if decision.key and logged and level == logging.INFO:
        _LOGGED.add(decision.key)
    say(line, settings, to_stderr=not quiet, level=level)
