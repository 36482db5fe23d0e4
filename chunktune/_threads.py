"""How chunktune leaves the event loop for blocking work, and how results come back to it.

Short blocking steps (file I/O, one non-blocking lock attempt, ``signature()``) hop
to a worker thread through chunktune's own capacity limiter, one per event loop, so
a trainer that keeps anyio's default limiter busy cannot starve them. The sweep runs
in a thread of its own that no worker thread waits on: the awaiting task may leave
it (cancelled, or past ``hard_limit_s``) and the thread finishes on its own. Results
come back onto the loop with :func:`~chunktune._backends.call_soon`, which never
blocks, since the loop may be gone. The code that branches on asyncio versus trio, and
tells where the calling thread stands among loops, is ``_backends``'s.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar, TypeVarTuple, Unpack, cast

import anyio
import anyio.from_thread
import anyio.lowlevel
import anyio.to_thread

from ._backends import call_soon, in_worker_thread, inherited, loop_running_here, waking
from ._errors import UsageError
from ._failures import log_bug
from ._sigint import LoopHold, interruptible
from ._woken import WAKE_S, wait_woken

__all__ = [
    "KEYING_THREAD",
    "SETTLE_WARN_S",
    "STORE_THREAD",
    "SWEEP_THREAD",
    "hop",
    "in_own_thread",
    "run_beside",
    "run_blocking",
    "run_held",
    "sweeping",
    "wait_for_stores",
    "wait_for_sweeps",
    "wait_in_thread",
]

T = TypeVar("T")
Ts = TypeVarTuple("Ts")

logger = logging.getLogger("chunktune")

SWEEP_THREAD = "chunktune sweep"
KEYING_THREAD = "chunktune keying"  # a signature() under a hard limit, which it may outlive
STORE_THREAD = "chunktune store"  # a sweep's cache write, which its caller may leave

# A hop never waits on another hop, so a few threads serve any number of resolves; and
# hops are GIL-bound Python, so more threads only make them fight the event loop for
# the GIL (50 hits at once stalled the loop 15-30 ms on 8 threads, 5-14 ms on 2).
# Two, not one: a hop that writes the cache may wait on fsync.
_HOP_THREADS = 2
_hops: anyio.lowlevel.RunVar[anyio.CapacityLimiter] = anyio.lowlevel.RunVar("chunktune_limiter")
# Waits that hold a thread for long (a Ray worker waiting on the registry for up to a
# lease) take threads apart from the hops, so no number of them can starve a hop.
_WAIT_THREADS = 256
_waits: anyio.lowlevel.RunVar[anyio.CapacityLimiter] = anyio.lowlevel.RunVar("chunktune_waits")


def _own_limiter(
    var: anyio.lowlevel.RunVar[anyio.CapacityLimiter], threads: int
) -> anyio.CapacityLimiter:
    """This event loop's limiter kept in ``var`` (a limiter belongs to one loop)."""
    try:
        return var.get()
    except LookupError:
        limiter = anyio.CapacityLimiter(threads)
        var.set(limiter)
        return limiter


async def hop(func: Callable[[Unpack[Ts]], T], *args: *Ts, abandon_on_cancel: bool = False) -> T:
    """Run a short blocking ``func(*args)`` in a worker thread of chunktune's own limiter.

    An anyio cancel (a cancel scope, ``hard_limit_s``) waits for ``func`` to return, so
    a hop never leaks a half-done step; with ``abandon_on_cancel`` the caller returns at
    once and ``func`` finishes on its own (for a step that is whole wherever it stops: a
    read, an atomic write, user code that may block), its outcome dropped, its place in
    the limiter given back. An asyncio task's own cancel (a Ctrl-C under ``asyncio.run``,
    a notebook's interrupt) leaves at once either way, as with ``abandon_on_cancel``: it
    goes through anyio's shield. The hops that do not abandon only read.

    The loop is woken every :data:`~chunktune._woken.WAKE_S` meanwhile: a short step may
    wait long (a damaged cache's read waits for its write lock's holder, up to
    ``WRITE_STALL_S``; a stalled file system), and a notebook's interrupt, queued unwoken,
    must land within that as ``asyncio.run``'s Ctrl-C does.
    """
    with waking(WAKE_S):
        return await anyio.to_thread.run_sync(
            func,
            *args,
            limiter=_own_limiter(_hops, _HOP_THREADS),
            abandon_on_cancel=abandon_on_cancel,
        )


async def wait_in_thread(
    func: Callable[[Unpack[Ts]], T], *args: *Ts, abandon_on_cancel: bool = False
) -> T:
    """Run a blocking ``func(*args)`` that may wait long, on threads apart from the hops'.

    Neither the caller's default limiter, which its own work may fill, nor the hops
    share these threads. With ``abandon_on_cancel`` a cancelled caller leaves ``func``
    running (for a call whose outcome may be dropped). The loop is woken every
    :data:`~chunktune._woken.WAKE_S` meanwhile, as for a hop: a notebook's interrupt lands
    mid-wait (a Ray registry's wait for another worker's sweep, Ray's start).
    """
    limiter = _own_limiter(_waits, _WAIT_THREADS)
    with waking(WAKE_S):
        return await anyio.to_thread.run_sync(
            func, *args, limiter=limiter, abandon_on_cancel=abandon_on_cancel
        )


def run_blocking(call: Callable[[], Coroutine[Any, Any, T]], *, instead: str, where: str = "") -> T:
    """``await call()`` from synchronous code: on the loop of the worker thread it runs in,
    else on a loop of its own (in a thread of its own where a fork left a loop's state
    behind on this one). A Ctrl-C while that loop of its own opens or closes is held until
    it is closed (see :class:`~chunktune._sigint.LoopHold`).

    Raises:
        UsageError: on an event loop's own thread, in a task or in a plain callback,
            where blocking would stall the loop: the message says to use ``instead``
            (and ``where``, a hint of how the caller may have got there). Checked
            before ``call()`` is made, so no coroutine is left unawaited.
        KeyboardInterrupt: Ctrl-C, also one that came as its own loop opened or closed, once
            closed.
    """
    if inherited():
        # a fresh thread carries none of the parent's loop state that this one does
        return cast(T, run_beside(call, timeout_s=None, name="chunktune forked")[1])
    if in_worker_thread():
        return anyio.from_thread.run(call)
    if loop_running_here():
        raise UsageError(
            f"a blocking call was made on a running event loop's thread{where}, where "
            f"blocking would stall it; use `{instead}` there instead"
        )
    return run_held(call)


def run_held(
    call: Callable[[], Coroutine[Any, Any, T]], *, returned: Callable[[T], object] | None = None
) -> T:
    """``anyio.run(call)`` on a new loop of this thread, a Ctrl-C while that loop opens or
    closes held until it is closed (see :class:`~chunktune._sigint.LoopHold`): one that
    came as it opened makes no ``call()`` at all.

    ``returned(result)``, if given, is called the moment ``call()`` returns, still in the
    loop's main task: a Ctrl-C from then on raises all the same (cancelling a task on its
    last step discards its result; held, it is raised after the close), so the caller
    learns what ``call()`` gave before it was lost (a ``chunktune tune`` whose decision is
    already cached must not say the Ctrl-C stopped its sweep).

    Raises:
        KeyboardInterrupt: Ctrl-C, also one that came as the loop opened or closed, once
            closed.
        BaseException: what ``call()`` raised.
    """
    hold = LoopHold()

    async def held_as_it_ends() -> T | None:
        try:
            if not hold.opened():
                return None  # a Ctrl-C came as the loop opened: end() raises it
            result = await call()
            if returned is not None:
                returned(result)
            return result
        finally:
            hold.closing()  # what is left is closing the loop: a Ctrl-C waits for that

    hold.opening()  # a Ctrl-C as the loop and its main task are made waits for them
    try:
        result = anyio.run(held_as_it_ends)
    except BaseException as exc:
        # a Ctrl-C held as a failing run's loop closed still ends the call: dropped, the
        # error could become resolve_sync's fallback and the Ctrl-C be lost (one is enough)
        hold.end(exc)
        raise
    hold.end()
    return cast(T, result)


def run_beside(
    call: Callable[[], Coroutine[Any, Any, T]], *, timeout_s: float | None, name: str
) -> tuple[bool, T | None]:
    """``await call()`` on an event loop of its own, in a daemon thread; wait ``timeout_s``
    (None: until it ends).

    For synchronous code on a loop's thread that must block as an older API did (the
    caller's loop waits), without deadlocking on a task of that loop. Returns
    ``(True, result)``, or ``(False, None)`` when the time ran out first: then the call
    is cancelled, as is one whose wait is interrupted (Ctrl-C: ``KeyboardInterrupt``,
    also on the thread of ``asyncio.run``'s loop, whose own handler is set aside for the
    wait: see :func:`~chunktune._sigint.interruptible`), which raises. Either way the
    caller leaves once the cancelled call has ended, and what it gave up on must not go
    on (a sweep would step a pool the caller has back, and cache what nobody waited
    for). That is at once, unless the call is a resolve whose workload settles on cancel
    (its ``run()`` in flight is waited for: one call past ``timeout_s``); a Ctrl-C during
    that wait leaves it at once.

    Raises:
        BaseException: what ``call()`` raised, or what interrupted the wait.
    """
    outcome: list[tuple[bool, Any]] = []
    interrupted = threading.Event()
    ended = threading.Event()  # not thread.is_alive(): a join a signal interrupted (Ctrl-C)
    # marks the thread stopped while it runs on (CPython 3.11 and 3.12), and no later join waits
    scopes: list[tuple[object, anyio.CancelScope]] = []

    async def cancellable() -> T | None:
        with anyio.CancelScope() as scope:
            scopes.append((anyio.lowlevel.current_token(), scope))
            if interrupted.is_set():  # interrupted before this loop had started
                scope.cancel()
            return await call()
        return None  # cancelled: nobody waits for the outcome

    def main() -> None:
        try:
            outcome.append((True, anyio.run(cancellable)))
        except BaseException as exc:
            outcome.append((False, exc))
        finally:
            ended.set()

    def cancel() -> None:
        interrupted.set()
        for token, scope in scopes:
            call_soon(token, scope.cancel)

    thread = threading.Thread(target=main, name=name, daemon=True)
    try:  # Ctrl-C may come while the thread starts, before the wait: cancel that call too
        thread.start()
        with interruptible():
            thread.join(timeout_s)
    except BaseException:
        cancel()
        _join_cancelled(thread, ended)
        raise
    if not outcome:
        cancel()
        _join_cancelled(thread, ended)
        return False, None
    ok, value = outcome[0]
    if not ok:
        raise value
    return True, value


def _join_cancelled(thread: threading.Thread, ended: threading.Event) -> None:
    """Wait for the thread of a call just cancelled to set ``ended`` (at once, unless the call
    settles a probe in flight: see :func:`in_own_thread`), warning every :data:`SETTLE_WARN_S`
    seconds; a Ctrl-C leaves the wait at once."""
    if thread.ident is None:  # it never started
        return
    waited = 0.0
    with interruptible():
        while not ended.wait(SETTLE_WARN_S):
            waited += SETTLE_WARN_S
            logger.warning(
                "chunktune: a cancelled call has waited %.0f s for %r to end (a resolve whose "
                "workload settles on cancel waits for its run() in flight); Ctrl-C leaves",
                waited,
                thread.name,
            )


async def in_own_thread(
    func: Callable[[], T],
    *,
    name: str = SWEEP_THREAD,
    finally_: Callable[[], None] | None = None,
    daemon: bool = True,
    settle: Callable[[], None] | None = None,
) -> T:
    """Run ``func()`` in a new thread (a daemon unless ``daemon`` is False); await what it
    returns or raises.

    The wait holds no worker thread. ``finally_()``, if given, runs after ``func`` in that
    thread, however it ends, or here if the thread cannot start. If the awaiting task
    is cancelled the thread is abandoned: it runs on, ``finally_`` still runs when it
    ends, and its outcome is dropped (the caller makes ``func`` stop by its own means).

    With ``settle``, a cancel is not left at once: ``settle()`` is called (it tells
    ``func`` to stop) and the cancelled task waits, shielded, until the thread has ended
    (``finally_`` included), logging a warning every :data:`SETTLE_WARN_S` seconds of
    waiting; then the cancel goes on. anyio's own ``to_thread.run_sync`` waits so too.
    """
    token = anyio.lowlevel.current_token()
    done = anyio.Event()
    outcome: list[tuple[bool, Any]] = []
    # who runs finally_: this thread, once main() begins, or the starter, where start()
    # raised before it did; settled once, under the lock, by whichever comes first
    gate = threading.Lock()
    runner: list[str] = []

    def main() -> None:
        with gate:
            if runner:  # the starter's: start() raised before this thread ran
                return
            runner.append("thread")
        try:
            outcome.append((True, func()))
        except BaseException as exc:
            outcome.append((False, exc))
        finally:
            try:
                if finally_ is not None:
                    finally_()
            except BaseException as exc:
                # the outcome stands; what the tidying raised (a MemoryError letting a lock
                # go) is a bug report in chunktune's log, not a bare traceback from the
                # thread's excepthook on a trainer's stderr
                log_bug(exc, f"tidying up after {name!r}")
            finally:
                call_soon(token, done.set)

    thread = threading.Thread(target=main, name=name, daemon=daemon)
    interrupt: BaseException | None = None
    try:
        thread.start()
    except BaseException as exc:
        with gate:
            if not runner:
                runner.append("starter")
        if runner[0] == "starter":  # no thread to be had, or not yet running: it never will
            if finally_ is not None:
                finally_()
            raise
        # it runs (func, then finally_, there; not here too: a lock let go twice), and
        # start()'s own wait for it was interrupted: as an interrupt of the wait below
        interrupt = _raised_in_start(exc)
    try:
        if interrupt is not None:
            raise interrupt
        await wait_woken(done)  # a notebook's interrupt, queued unwoken, lands mid-sweep
    except BaseException:
        if settle is None:
            raise
        settle()
        with anyio.CancelScope(shield=True):
            await _settled(done, name)
        raise
    ok, value = outcome[0]
    if ok:
        return value  # type: ignore[no-any-return]
    raise value


def _raised_in_start(exc: BaseException) -> BaseException:
    """What a signal handler (a trainer's watchdog, Ctrl-C) raised while ``Thread.start()``
    waited for its thread to run: ``exc``, or where the handler raised as CPython's
    Condition took its lock back, the Condition's own ``RuntimeError: release unlocked
    lock`` raised over it, the handler's exception then its context (chunktune's bug
    report instead of the trainer's exception, and the sweep lock let go twice)."""
    context = exc.__context__
    if isinstance(exc, RuntimeError) and context is not None:
        return context
    return exc


SETTLE_WARN_S = 10.0
"""How long a cancelled task waits for a settling thread before each warning that it does."""


async def _settled(done: anyio.Event, name: str) -> None:
    """Wait for ``done``, warning every :data:`SETTLE_WARN_S` seconds that the wait goes on.

    What the thread waits on (a workload's ``run()``) may never return: the caller, whose
    own next call would hang the same way, is told why it waits.
    """
    waited = 0.0
    while True:
        with anyio.move_on_after(SETTLE_WARN_S):
            await done.wait()
            return
        waited += SETTLE_WARN_S
        logger.warning(
            "chunktune: a cancelled resolve has waited %.0f s for the call in flight in "
            "%r to return (the workload's settle_on_cancel is True: its pool is handed "
            "back only once that call is over); a run() that never returns holds it for good",
            waited,
            name,
        )


def sweeping() -> bool:
    """Whether a sweep thread of this process is still running (an abandoned one, say)."""
    return any(t.name == SWEEP_THREAD for t in threading.enumerate())


def wait_for_sweeps(timeout_s: float | None = None) -> bool:
    """Block until this process's sweep threads have ended; False if ``timeout_s`` ran out."""
    return _wait_for(SWEEP_THREAD, timeout_s)


def wait_for_stores() -> None:
    """Block until this process's cache writes have ended: a resolve cancelled as it stored
    its decision leaves the write to finish on its own (bounded by
    :data:`~chunktune._cache_lock.WRITE_STALL_S` of a stalled lock's holder)."""
    _wait_for(STORE_THREAD, None)


def _wait_for(name: str, timeout_s: float | None) -> bool:
    """Block until this process's threads called ``name`` have ended; False if ``timeout_s``
    ran out first."""
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    for thread in [t for t in threading.enumerate() if t.name == name]:
        thread.join(None if deadline is None else max(0.0, deadline - time.monotonic()))
    return not any(t.name == name for t in threading.enumerate())
