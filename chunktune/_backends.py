"""Where the calling thread stands among event loops, and calls onto a loop from any thread.

The only code that branches on asyncio versus trio lives here: a loop's own thread
told (in a task, or a plain callback), a worker thread of a running anyio loop told,
a loop closed under a pending task told, a callback scheduled through either's token, an
asyncio loop woken on a timer; and, in a forked child, the loop state that came along from
the parent told apart.
"""

from __future__ import annotations

import asyncio
import os
import sys
import threading
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

import anyio
import anyio.from_thread

__all__ = [
    "call_soon",
    "in_worker_thread",
    "inherited",
    "loop_closed_probe",
    "loop_running_here",
    "loop_stopped",
    "never",
    "waking",
]


def call_soon(token: object, callback: Callable[[], None]) -> bool:
    """Schedule ``callback()`` on the token's event loop from any thread, without waiting.

    ``token`` is what ``anyio.lowlevel.current_token()`` returned on that loop: from
    anyio 4.11 an ``EventLoopToken`` wrapping the backend's own token, before that
    the backend's token itself (asyncio's running loop, or trio's ``TrioToken``).
    Returns False when the loop has ended (nobody is listening any more). Never
    blocks: a thread that waited on a loop which is gone would hang for good.
    """
    native: Any = getattr(token, "native_token", token)
    try:
        if hasattr(native, "call_soon_threadsafe"):  # asyncio's loop
            native.call_soon_threadsafe(callback)
        else:  # trio's TrioToken
            native.run_sync_soon(callback)
    except RuntimeError:  # a closed asyncio loop; trio's RunFinishedError
        return False
    return True


class _Waking:
    """:func:`waking`'s context: a class, not a generator, as it wraps every thread hop
    (3 us a wait, against 7 us as a ``contextmanager``)."""

    __slots__ = ("_every_s", "_handle", "_loop")

    def __init__(self, every_s: float) -> None:
        self._every_s = every_s
        self._loop: asyncio.AbstractEventLoop | None = None
        self._handle: asyncio.TimerHandle | None = None

    def __enter__(self) -> None:
        try:
            self._loop = asyncio.get_running_loop()
        except RuntimeError:  # trio's run wakes itself for its signals: nothing there
            return
        self._tick()

    def _tick(self) -> None:
        assert self._loop is not None
        self._handle = self._loop.call_later(self._every_s, self._tick)

    def __exit__(self, *exc: object) -> None:
        if self._handle is not None:
            self._handle.cancel()


def waking(every_s: float) -> AbstractContextManager[None]:
    """Wake the calling task's asyncio loop every ``every_s`` seconds while inside.

    A timer that does nothing: what was queued on the loop without waking it (a signal
    handler's plain ``call_soon``, as the Jupyter kernel's SIGINT handler does) runs at the
    next tick. It cancels nothing, so a cancel that lands is the canceller's own. A trio run
    wakes itself for its signals: nothing there.
    """
    return _Waking(every_s)


def loop_stopped(token: object) -> bool:
    """Whether the token's loop is stopped but not closed: an asyncio loop whose
    ``run_until_complete`` returned with a task of it still pending. What is scheduled
    there waits till it runs again, if ever; a trio run cannot stop and go on."""
    native: Any = getattr(token, "native_token", token)
    if not hasattr(native, "is_running"):  # trio's TrioToken
        return False
    return not native.is_running() and not native.is_closed()


def never() -> bool:
    """A loop-closed probe for a loop that cannot be closed under a pending task (trio's)."""
    return False


def loop_closed_probe() -> Callable[[], bool]:
    """Whether the calling task's loop has since been closed, as a later check can tell.

    An asyncio loop closed with this task still pending (``loop.close()`` where
    ``asyncio.run`` would have cancelled it) never runs the task again. A trio run
    leaves no task behind: :func:`never`.
    """
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return never
    return loop.is_closed


def loop_running_here() -> bool:
    """True on an event loop's own thread: in a task, or in a plain callback of the loop."""
    try:
        asyncio.get_running_loop()  # a loop of a parent process is told apart by its pid
    except RuntimeError:
        pass
    else:
        return True
    return _in_trio_run() and not inherited()


def _in_trio_run() -> bool:
    """True where trio's state says a run is on this thread (see :func:`inherited`)."""
    lowlevel = getattr(sys.modules.get("trio"), "lowlevel", None)
    if lowlevel is None:
        return False
    in_trio_run: Callable[[], bool] | None = getattr(lowlevel, "in_trio_run", None)
    if in_trio_run is not None:
        return in_trio_run()
    try:  # trio before 0.26 has no in_trio_run
        lowlevel.current_trio_token()
    except RuntimeError:
        return False
    return True


def in_worker_thread() -> bool:
    """True in a worker thread of a running anyio loop (``to_thread.run_sync``)."""
    return _in_anyio_worker() and not inherited()


def _in_anyio_worker() -> bool:
    """True where anyio's state says this is a loop's worker thread (see :func:`inherited`)."""
    try:
        anyio.from_thread.check_cancelled()
    except RuntimeError:
        return False
    except BaseException as exc:
        if _cancelled(exc):  # still that loop's worker thread
            return True
        raise  # a Ctrl-C (or the program's own signal handler) landing here: not an answer
    return True


def _cancelled(exc: BaseException) -> bool:
    """Whether ``exc`` is a backend's cancellation: asyncio's ``CancelledError``, trio's
    ``Cancelled``."""
    if isinstance(exc, asyncio.CancelledError):
        return True
    trio_cancelled = getattr(sys.modules.get("trio"), "Cancelled", None)
    return trio_cancelled is not None and isinstance(exc, trio_cancelled)


def _library_named() -> bool:
    """True where sniffio names an async library for this thread (``anyio.run`` sets one)."""
    sniffio = sys.modules.get("sniffio")
    if sniffio is None:  # nothing imported it, so nothing has named a library
        return False
    try:
        sniffio.current_async_library()
    except sniffio.AsyncLibraryNotFoundError:
        return False
    return True


_forked_in_loop: int | None = None
"""In a forked child: the thread that forked, if it did so in a loop's task or worker thread."""


def _note_fork() -> None:
    global _forked_in_loop
    in_loop = _in_trio_run() or _in_anyio_worker() or _library_named()
    _forked_in_loop = threading.get_ident() if in_loop else None


os.register_at_fork(after_in_child=_note_fork)


def inherited() -> bool:
    """True in a forked child's thread that forked in a task or a worker thread of a loop.

    Trio's run, anyio's worker threads and sniffio keep their state per thread (and
    per context), and it came along: the thread still says it runs in that loop, which
    stayed in the parent and never runs here, so a blocking call sent to it would wait
    for good; and no loop can start on this thread (trio refuses a run inside a run,
    anyio one where a library is named). asyncio's own running loop is told apart by
    its pid.
    """
    return _forked_in_loop is not None and threading.get_ident() == _forked_in_loop
