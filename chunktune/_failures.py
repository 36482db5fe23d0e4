"""Who a failure during a resolve is blamed on: the workload, the process, or chunktune.

A resolve never raises what it meets at run time into the trainer; it keeps the native
chunk and says why. Saying why right needs the culprit: the workload's own code (its
``run()``, its ``signature()``, what they returned), a process whose threads or file
descriptors are spent, or chunktune's own code (a bug, or memory it could not have), whose
traceback is logged so that a trainer can report it. Pure functions over exceptions:
nothing here imports anyio.
"""

from __future__ import annotations

import errno
import functools
import logging
import os
import signal
from types import CodeType

from ._errors import ConfigError, WorkloadError
from ._named import named
from ._shown import type_named
from ._tracebacks import warn_once
from ._workload import WorkloadRaised, raised_by_workload

__all__ = [
    "WORKLOAD_TRACEBACK",
    "blames_workload",
    "bug_reason",
    "by_signal_handler",
    "log_bug",
    "no_thread",
    "raised_by_chunktune",
    "spent",
    "spent_cause",
]

logger = logging.getLogger("chunktune")

WORKLOAD_TRACEBACK = "chunktune_workload_traceback"
"""A log record's attribute, True where its traceback is the workload's own code's: the
CLI's stderr shows such a record's line alone (its workloads are chunktune's, the failure
its reason), where a bug's traceback is shown for the report."""


def no_thread(exc: BaseException) -> bool:
    """Whether ``exc`` is what Python raises when no thread can start: the process's
    thread limit (``ulimit -u``) reached, or no memory left for a thread's stack."""
    return isinstance(exc, RuntimeError) and str(exc) == "can't start new thread"


def spent(exc: BaseException) -> bool:
    """Whether ``exc`` says the process can start no thread or open no file descriptor
    (a settings file unread for want of one too: see :func:`spent_cause`)."""
    return spent_cause(exc) is not None


def spent_cause(exc: BaseException) -> BaseException | None:
    """What in ``exc`` says the process can start no thread or open no file descriptor:
    ``exc`` itself, or the ``OSError`` behind a :class:`~chunktune.ConfigError` of a
    settings file that could not be opened for want of one; None if nothing does."""
    if isinstance(exc, ConfigError) and exc.__cause__ is not None:
        exc = exc.__cause__
    if no_thread(exc) or (isinstance(exc, OSError) and exc.errno in (errno.EMFILE, errno.ENFILE)):
        return exc
    return None


def blames_workload(exc: BaseException) -> bool:
    """Whether ``exc`` is the workload's failure: raised by its own code (through
    :func:`~chunktune._workload.call_workload`), or chunktune's verdict on what it
    returned (a :class:`~chunktune.WorkloadError`)."""
    return isinstance(exc, WorkloadError | WorkloadRaised) or raised_by_workload(exc)


def by_signal_handler(exc: BaseException) -> bool:
    """Whether ``exc`` was raised by one of the process's Python signal handlers (a
    trainer's watchdog alarm, say), wherever its main thread stood: the trainer's own
    exception, raised on as Ctrl-C's ``KeyboardInterrupt`` is, never taken for a failure
    of chunktune's or of the workload's."""
    codes = _handler_codes()
    tb = exc.__traceback__
    while tb is not None and codes:
        if tb.tb_frame.f_code in codes:
            return True
        tb = tb.tb_next
    return False


def _handler_codes() -> set[CodeType]:
    """The code of every Python function installed now as a signal's handler."""
    codes: set[CodeType] = set()
    for sig in signal.valid_signals():
        try:
            handler: object = signal.getsignal(sig)
        except (OSError, ValueError):  # a number this platform lists but will not look up
            continue
        while isinstance(handler, functools.partial):
            handler = handler.func
        function = getattr(handler, "__func__", handler)  # a bound method's function
        code = getattr(function, "__code__", None)
        if isinstance(code, CodeType):
            codes.add(code)
    return codes


_PACKAGE = os.path.dirname(os.path.abspath(__file__)) + os.sep


def raised_by_chunktune(exc: BaseException) -> bool:
    """Whether chunktune's own code raised ``exc``: the innermost frame of its traceback
    (where it was raised) is in one of chunktune's modules, not in a library chunktune
    called (Ray failing to reach its cluster raises inside Ray)."""
    tb = exc.__traceback__
    if tb is None:
        return False
    while tb.tb_next is not None:
        tb = tb.tb_next
    return os.path.abspath(tb.tb_frame.f_code.co_filename).startswith(_PACKAGE)


def bug_reason(exc: BaseException, doing: str) -> str:
    """Why a decision kept native when chunktune's own code raised ``exc`` while ``doing``."""
    return (
        f"chunktune failed while {doing} ({named(exc)}; a bug in chunktune, its traceback logged)"
    )


def log_bug(exc: BaseException, doing: str) -> None:
    """Log ``exc``, raised by chunktune's own code while ``doing``, with its traceback: at
    WARNING the first time this process meets it while ``doing``, a repeat's line at WARNING
    and its traceback at DEBUG (:func:`~chunktune._tracebacks.warn_once`)."""
    # a bug met on every resolve is one report: its traceback once, as a workload's failure
    warn_once(
        f"bug: {doing}",
        exc,
        "chunktune: chunktune failed while %s (%s), a bug in chunktune: please report it "
        "with its traceback",
        doing,
        type_named(exc),
    )
