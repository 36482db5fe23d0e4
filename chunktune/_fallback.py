"""The native chunk a resolve falls back to when it fails at run time, and why.

What ended the resolve decides: the process's threads or file descriptors spent, or
chunktune's own bug anywhere in the flow, gives the native chunk (``source ==
"fallback"``), logged, nothing cached; chunktune's deliberate errors and the trainer's own
signal handler's are raised on (:mod:`chunktune._failures` says who a failure is blamed on).
A resolve made while Python shuts down is answered before it could fail: native, at once.
"""

from __future__ import annotations

import logging
import sys

from ._counts import native_chunk
from ._decision import Decision
from ._errors import ChunktuneError
from ._failures import bug_reason, by_signal_handler, log_bug, no_thread, spent_cause
from ._here import manual_decision
from ._policy import Policy
from ._request import Ask

__all__ = ["at_shutdown", "fallback_of", "without"]

logger = logging.getLogger("chunktune")


def fallback_of(asked: Ask, exc: Exception) -> Decision | None:
    """The native fallback of a resolve that ``exc`` ended; None where ``exc`` is to be
    raised: one of chunktune's deliberate errors (bad arguments or settings, a misuse), or
    the trainer's own, raised by its signal handler (:func:`_failures.by_signal_handler`).

    The process's threads or file descriptors spent (:func:`without`), or chunktune's own
    code raising anywhere in the flow (its locks, the flights' bookkeeping, a lookup, the
    settings' discovery): a bug must not crash a trainer that the native chunk serves. Its
    traceback is logged for the trainer to report; nothing was cached.
    """
    if by_signal_handler(exc):
        return None
    cause = spent_cause(exc)
    if cause is not None:
        return without(asked, cause)
    if isinstance(exc, ChunktuneError):
        return None
    log_bug(exc, "resolving")
    return _native(asked, bug_reason(exc, "resolving"))


def at_shutdown(asked: Ask) -> Decision | None:
    """The native chunk for a resolve made while Python shuts down (``sys.is_finalizing()``:
    a ``__del__`` or a weakref callback run as the interpreter tears its modules down); None
    at any other time.

    Given at once: nothing is measured, imported, logged or started in a thread, since the
    import system, logging's handlers and new threads are going or gone by then. A manual
    size is the caller's own: it is answered, unreported.
    """
    if not sys.is_finalizing():
        return None
    if asked.manual is not None:
        return manual_decision(asked, reported=False)
    return _native(asked, "Python is shutting down, so nothing was measured")


def _native(asked: Ask, why: str) -> Decision:
    """The native chunk for ``asked``, kept because ``why``; nothing was cached."""
    native = native_chunk(asked.num_envs, asked.nthread)
    return Decision(
        chunk_size=None,
        native_chunk=native,
        source="fallback",
        reason=f"kept the native chunk {native}: {why}; nothing was cached",
        policy="custom" if isinstance(asked.policy, Policy) else asked.policy or "",
    )


def without(asked: Ask, exc: BaseException) -> Decision:
    """The fallback of a resolve that could not start a thread (``ulimit -u`` reached, or no
    memory for a stack) or open a file descriptor (``ulimit -n``) it needed, logged as a
    warning: a trainer near such a limit gets the native chunk, not chunktune's exception."""
    if no_thread(exc):
        why = (
            f"chunktune could not start a thread ({exc}: the process's thread limit, or "
            "memory for a stack, is spent)"
        )
    else:
        why = f"chunktune could not open a file ({exc}: the process's file descriptors are spent)"
    decision = _native(asked, why)
    logger.warning("chunktune: %s", decision.reason)
    return decision
