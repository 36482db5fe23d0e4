"""Python's exit waits for the pool calls still in flight in other threads.

A cancelled resolve (Ctrl-C, a deadline), or one that ``hard_limit_s`` ended, returns
while the probe in flight on a workload's own pool finishes in the sweep's daemon
thread. A trainer that exits then tears the interpreter down under that call, and when
the call returns into a finalizing Python the process dies of a segmentation fault
instead of exiting with the trainer's status (measured: 5 runs in 6 with the demo batch
at 256 envs, Ctrl-C caught and ``sys.exit(130)``). So at exit, once the program's own
threads have ended, no pool call starts any more (:func:`exiting`) and each live
workload's call lock is waited for: the call in flight returns first. The locks are let
go again: a program's own exit handler that runs after this one may still ``close()``
its workloads (holding them would deadlock it). A call that does not return within
``EXIT_WAIT_S`` (a stuck pool) is given up on, with a warning: a process held for good
would be worse, and a call that never returns never returns into the finalizing
interpreter either.
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
import time
import weakref

__all__ = ["EXIT_NOTICE_S", "EXIT_WAIT_S", "exiting", "wait_at_exit"]

EXIT_NOTICE_S = 1.0
"""Seconds an exit waits for pool calls in flight before it says so."""
EXIT_WAIT_S = 10.0
"""Seconds an exit waits for pool calls in flight, all of them together, at most."""

_logger = logging.getLogger("chunktune")
_locks: weakref.WeakSet[threading.Lock] = weakref.WeakSet()
_exiting = False


def wait_at_exit(lock: threading.Lock) -> None:
    """Have Python's exit wait for ``lock`` (a workload's one-call-at-a-time lock) to be free.

    Weakly held: a workload collected needs no wait.
    """
    _locks.add(lock)


def exiting() -> bool:
    """True once Python's exit has begun to wait for the calls in flight: none may start."""
    return _exiting


def _wait_all() -> None:
    global _exiting
    # first: a call that takes its lock after this sees it and starts no pool call
    _exiting = True
    start = time.monotonic()
    told = False
    for lock in list(_locks):
        if lock.acquire(timeout=max(0.0, start + EXIT_NOTICE_S - time.monotonic())):
            lock.release()
            continue
        if not told:
            told = True
            _logger.warning(
                "chunktune: Python's exit is waiting, up to %g s, for a MuJoCo pool call "
                "still in flight in a sweep's thread (exiting under it would crash the process)",
                EXIT_WAIT_S,
            )
        if not lock.acquire(timeout=max(0.0, start + EXIT_WAIT_S - time.monotonic())):
            _logger.warning(
                "chunktune: a MuJoCo pool call in flight did not return within %g s; "
                "Python exits without waiting for it",
                EXIT_WAIT_S,
            )
            return
        lock.release()


def _forget_in_child() -> None:
    global _exiting
    # a lock copied held from a thread of the parent would never be let go in the child,
    # and the child's own exit is yet to come
    _locks.clear()
    _exiting = False


atexit.register(_wait_all)
os.register_at_fork(after_in_child=_forget_in_child)
