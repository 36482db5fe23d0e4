"""Python's exit waits for the pool calls still in flight in other threads.

A cancelled resolve (Ctrl-C, a deadline), or one that ``hard_limit_s`` ended, returns
while the probe in flight on a workload's own pool finishes in the sweep's daemon
thread. A trainer that exits then tears the interpreter down under that call, and when
the call returns into a finalizing Python the process dies of a segmentation fault
instead of exiting with the trainer's status (measured: 5 runs in 6 with the demo batch
at 256 envs, Ctrl-C caught and ``sys.exit(130)``). So at exit, once the program's own
threads have ended, each live workload's call lock is taken and kept: the call in flight
returns first, and none starts after.
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
import weakref

__all__ = ["EXIT_NOTICE_S", "hold_at_exit"]

EXIT_NOTICE_S = 10.0
"""Seconds between the warnings of an exit held by a pool call that does not return."""

_logger = logging.getLogger("chunktune")
_locks: weakref.WeakSet[threading.Lock] = weakref.WeakSet()


def hold_at_exit(lock: threading.Lock) -> None:
    """Have Python's exit take ``lock`` (a workload's one-call-at-a-time lock) and keep it.

    Weakly held: a workload collected needs no wait.
    """
    _locks.add(lock)


def _hold_all() -> None:
    for lock in list(_locks):
        # a stuck pool would hold the exit for good: say so, as a stuck cancel does; a
        # second Ctrl-C ends this wait (Python reports it and goes on exiting)
        while not lock.acquire(timeout=EXIT_NOTICE_S):
            _logger.warning(
                "chunktune: Python's exit is waiting for a MuJoCo pool call still in "
                "flight in a sweep's thread (exiting under it would crash the process); "
                "press Ctrl-C again to exit at once"
            )


def _forget_in_child() -> None:
    # a lock copied held from a thread of the parent would never be let go in the child
    _locks.clear()


atexit.register(_hold_all)
os.register_at_fork(after_in_child=_forget_in_child)
