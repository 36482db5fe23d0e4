"""Python's exit waits for the workload calls still in flight in other threads, and starts none.

A cancelled resolve (Ctrl-C, a deadline), or one that ``hard_limit_s`` ended, returns
while the probe in flight finishes in the sweep's daemon thread; so does a resolve left
running in a daemon thread of the trainer's. A trainer that exits then tears the
interpreter down under that call, and when a MuJoCo pool call returns into a finalizing
Python the process dies of a segmentation fault instead of exiting with the trainer's
status (measured: 5 runs in 6 with the demo batch at 256 envs and a RolloutWorkload; 7
in 26 with a trainer's own Workload over its own ``mujoco.rollout.Rollout``, a 0.4 s
call, past ``hard_limit_s``: a crash needs the call to return while Python finalizes,
not after the process is gone). Whatever the workload, then, the exit (an ``atexit``
handler, registered when the first probe or call lock needs it, so it runs before the
program's own handlers registered earlier) first stops every probe from starting
(:func:`call_in_flight` refuses once :func:`exiting`), then waits for the probes in
flight in any sweep thread and for each call lock registered with :func:`wait_at_exit`
(a RolloutWorkload's, which run() holds outside a sweep too): the calls in flight return
first. The locks are let go again: a program's own exit handler that runs after this one
may still ``close()`` its workloads (holding them would deadlock it). The same wait is
registered once more when this module is imported, as a backstop that runs after the
program's own handlers: a first probe that a program's exit handler starts (in a daemon
thread of its own, say) arms the wait too late, while Python runs its handlers, and
Python 3.11 runs none registered then; the backstop waits for that probe, or refuses it.
Whichever wait runs first does the work, and a later one returns at once (so a handler
registered before this module was imported runs after a wait, and starts no probe). This
module first imported by an exit handler registers both too late to be run: nothing waits
then. Threads that are no daemons were joined before any ``atexit`` handler runs, so only
daemon threads' calls are left to wait for. A call that does not return within
``EXIT_WAIT_S``, all waits together (a stuck pool), is given up on, with a warning: a
process held for good would be worse, and a call that never returns never returns into
the finalizing interpreter either. Where a counted call has taken longer than half of
that (a batch whose every call takes 8 s is not stuck at 10 s), the wait is twice the
longest such call instead, up to ``EXIT_WAIT_CAP_S``: giving up on a call that is merely
slow is the crash the wait is there to prevent.
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from ._errors import UsageError

__all__ = [
    "EXIT_NOTICE_S",
    "EXIT_WAIT_CAP_S",
    "EXIT_WAIT_S",
    "call_in_flight",
    "exit_wait_s",
    "exiting",
    "wait_at_exit",
]

EXIT_NOTICE_S = 1.0
"""Seconds an exit waits for calls in flight before it says so."""
EXIT_WAIT_S = 10.0
"""Seconds an exit waits for calls in flight, all of them together, at most, unless the
calls counted so far took longer (:func:`exit_wait_s`)."""
EXIT_WAIT_CAP_S = 120.0
"""Seconds an exit waits at most, however long the calls counted so far took."""

EXITING = (
    "Python is exiting: the sweep starts no probe any more (a MuJoCo call that returns "
    "into an interpreter shutting down crashes the process)"
)
"""What a probe refused at exit raises: a resolve's fallback reason quotes it."""

_logger = logging.getLogger("chunktune")
_locks: weakref.WeakSet[threading.Lock] = weakref.WeakSet()
_guard = threading.Condition()  # over _calls and _exiting: a call counted, or refused
_calls = 0
_exiting = False
_armed = False
_longest_s = 0.0  # the longest call counted so far, by _clock
_clock = time.monotonic  # the calls' and the exit's deadlines: one clock


def _arm() -> None:
    """Register the exit's wait, once, when the first call or lock needs it."""
    global _armed
    if _armed:
        return
    with _guard:
        if not _armed:
            _armed = True
            atexit.register(_wait_all)


def wait_at_exit(lock: threading.Lock) -> None:
    """Have Python's exit wait for ``lock`` (a workload's one-call-at-a-time lock) to be free.

    Weakly held: a workload collected needs no wait.
    """
    _arm()
    _locks.add(lock)


def exiting() -> bool:
    """True once Python's exit has begun to wait for the calls in flight: none may start."""
    return _exiting


@contextmanager
def call_in_flight() -> Iterator[None]:
    """Count a workload call (a probe) as in flight while the block runs: the exit waits for it.

    Raises:
        UsageError: Python's exit has begun, so the call must not start (:data:`EXITING`).
    """
    global _calls, _longest_s
    _arm()
    with _guard:
        if _exiting:
            raise UsageError(EXITING)
        _calls += 1
    start = _clock()
    try:
        yield
    finally:
        took = _clock() - start
        with _guard:
            _calls -= 1
            _longest_s = max(_longest_s, took)
            _guard.notify_all()


def exit_wait_s() -> float:
    """Seconds the exit waits for calls in flight, all together: :data:`EXIT_WAIT_S`, or
    twice the longest call counted so far where that is longer, at most
    :data:`EXIT_WAIT_CAP_S`."""
    return min(EXIT_WAIT_CAP_S, max(EXIT_WAIT_S, 2.0 * _longest_s))


def _lock_free(lock: threading.Lock) -> Callable[[float], bool]:
    def wait(timeout_s: float) -> bool:
        if not lock.acquire(timeout=timeout_s):
            return False
        lock.release()
        return True

    return wait


def _no_calls(timeout_s: float) -> bool:
    with _guard:
        return _guard.wait_for(lambda: _calls == 0, timeout_s)


def _wait_all() -> None:
    global _exiting
    # first: a call that would start after this sees it and starts nothing
    with _guard:
        if _exiting:  # an earlier wait ran: no call started since, its calls waited or given up on
            return
        _exiting = True
    start = _clock()
    limit = exit_wait_s()
    told = False
    for wait in [_no_calls, *map(_lock_free, list(_locks))]:
        if wait(max(0.0, start + EXIT_NOTICE_S - _clock())):
            continue
        if not told:
            told = True
            _logger.warning(
                "chunktune: Python's exit is waiting, up to %.3g s, for a MuJoCo pool call "
                "still in flight in a sweep's thread (exiting under it would crash the process)",
                limit,
            )
        if not wait(max(0.0, start + limit - _clock())):
            _logger.warning(
                "chunktune: a MuJoCo pool call in flight did not return within %.3g s; "
                "Python exits without waiting for it",
                limit,
            )
            return


def _forget_in_child() -> None:
    global _calls, _exiting, _guard
    # a lock or count copied from a thread of the parent would never be let go in the
    # child (nor a guard copied held), and the child's own exit is yet to come
    _guard = threading.Condition()
    _locks.clear()
    _calls = 0
    _exiting = False


os.register_at_fork(after_in_child=_forget_in_child)
atexit.register(_wait_all)  # the backstop: after the program's handlers (module docstring)
