"""A child process forked with os.fork, for the tests of what a fork leaves a child.

Not multiprocessing's fork context: on Python 3.13 its child bootstrap crashes (SIGSEGV,
before the target runs) once a Ray cluster has run and shut down in the parent, as the
suite's Ray tests leave it; a plain os.fork child of the same parent runs.
"""

from __future__ import annotations

import os
import signal
import sys
import time
import traceback
from collections.abc import Callable


def run_forked(target: Callable[[], object], *, hang_guard_s: float) -> int | None:
    """Run ``target`` in a forked child: its exit status (negative: the signal that ended it),
    or None when it was still running after ``hang_guard_s`` (then it is killed).

    The child exits 0 when ``target`` returns, with the code of a ``SystemExit`` it raises,
    or 1 on any other exception (printed to stderr); it never returns into the caller.
    """
    return run_forked_all([target], hang_guard_s=hang_guard_s)[0]


def run_forked_all(targets: list[Callable[[], object]], *, hang_guard_s: float) -> list[int | None]:
    """Run each of ``targets`` in a forked child of its own, all at once: each one's exit
    status as :func:`run_forked` gives it, in order (the guard counts from the first fork)."""
    deadline = time.monotonic() + hang_guard_s
    return [_wait(pid, deadline) for pid in [_fork(target) for target in targets]]


def _fork(target: Callable[[], object]) -> int:
    """A forked child running ``target``: its pid."""
    pid = os.fork()
    if pid == 0:  # the child: never back into pytest
        code = 1
        try:
            target()
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        except BaseException:
            traceback.print_exc()
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    return pid


def _wait(pid: int, deadline: float) -> int | None:
    """``pid``'s exit status, or None when it still ran at ``deadline`` (then it is killed)."""
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            return None
        time.sleep(0.01)
