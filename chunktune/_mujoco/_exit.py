"""Python's exit waits for the pool calls still in flight in other threads.

A cancelled resolve (Ctrl-C, a deadline), or one that ``hard_limit_s`` ended, returns
while the probe in flight on a workload's own pool finishes in the sweep's daemon
thread. A trainer that exits then tears the interpreter down under that call, and when
the call returns into a finalizing Python the process dies of a segmentation fault
instead of exiting with the trainer's status (measured: 5 runs in 6 with the demo batch
at 256 envs, Ctrl-C caught and ``sys.exit(130)``). So at exit, once the program's own
threads have ended, each live workload's call lock is taken and kept: the call in flight
returns first, and none starts after. A call that does not return within ``EXIT_WAIT_S``
(a stuck pool) is given up on, with a warning: a process held for good would be worse,
and a call that never returns never returns into the finalizing interpreter either.
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
import time
import weakref

__all__ = ["EXIT_NOTICE_S", "EXIT_WAIT_S", "hold_at_exit"]

EXIT_NOTICE_S = 1.0
"""Seconds an exit waits for pool calls in flight before it says so."""
EXIT_WAIT_S = 10.0
"""Seconds an exit waits for pool calls in flight, all of them together, at most."""

_logger = logging.getLogger("chunktune")
_locks: weakref.WeakSet[threading.Lock] = weakref.WeakSet()


def hold_at_exit(lock: threading.Lock) -> None:
    """Have Python's exit take ``lock`` (a workload's one-call-at-a-time lock) and keep it.

    Weakly held: a workload collected needs no wait.
    """
    _locks.add(lock)


def _hold_all() -> None:
    start = time.monotonic()
    told = False
    for lock in list(_locks):
        if lock.acquire(timeout=max(0.0, start + EXIT_NOTICE_S - time.monotonic())):
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


def _forget_in_child() -> None:
    # a lock copied held from a thread of the parent would never be let go in the child
    _locks.clear()


atexit.register(_hold_all)
os.register_at_fork(after_in_child=_forget_in_child)
