"""A worker thread reaches the event loop on asyncio and trio, with any anyio's token."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Coroutine, Iterator
from types import FrameType
from typing import Any

import anyio
import anyio.lowlevel
import anyio.to_thread
import pytest
import trio
import trio.lowlevel
import trio.testing
from _forking import run_forked

import chunktune
import chunktune._threads
from chunktune._backends import call_soon, loop_running_here
from chunktune._threads import (
    SWEEP_THREAD,
    hop,
    in_own_thread,
    run_beside,
    run_blocking,
    run_held,
    wait_for_sweeps,
    wait_in_thread,
)
from chunktune.sim import SimulatedWorkload


@pytest.mark.anyio
@pytest.mark.parametrize("raw", [False, True], ids=["token", "raw-token"])
async def test_call_soon_runs_on_the_loop_thread(raw: bool) -> None:
    """A callback scheduled from a worker runs on the loop's thread, whatever token form."""
    token: object = anyio.lowlevel.current_token()
    if raw:  # what anyio before 4.11 returned: the backend's own token
        token = getattr(token, "native_token", token)
    loop_thread = threading.get_ident()
    ran = anyio.Event()
    seen: list[int] = []

    def deliver() -> None:
        seen.append(threading.get_ident())
        ran.set()

    assert await anyio.to_thread.run_sync(call_soon, token, deliver)
    with anyio.fail_after(10):
        await ran.wait()
    assert seen == [loop_thread]


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_call_soon_after_the_loop_closed_reports_false(backend: str) -> None:
    """Scheduling on a loop that has finished returns False instead of raising."""

    async def grab() -> object:
        return anyio.lowlevel.current_token()

    token = anyio.run(grab, backend=backend)
    assert call_soon(token, lambda: None) is False


class _Interrupted(Exception):
    """Stands for KeyboardInterrupt, which pytest would take for the user's own."""


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise _Interrupted


def test_an_interrupted_wait_beside_cancels_the_call() -> None:
    """A signal that interrupts run_beside's wait cancels the call on the loop beside."""
    cancelled = threading.Event()

    async def forever() -> None:
        try:
            os.kill(os.getpid(), signal.SIGUSR1)  # to the main thread, in or about to wait
            await anyio.sleep_forever()
        except anyio.get_cancelled_exc_class():
            cancelled.set()
            raise

    previous = signal.signal(signal.SIGUSR1, _interrupt)
    try:
        with pytest.raises(_Interrupted):
            run_beside(forever, timeout_s=60, name="chunktune test beside")
    finally:
        signal.signal(signal.SIGUSR1, previous)
    assert cancelled.wait(30)


def test_an_interrupt_while_the_thread_starts_cancels_the_call(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Ctrl-C arriving while run_beside starts its thread, before the wait, cancels the call."""
    cancelled = threading.Event()

    async def forever() -> None:
        try:
            await anyio.sleep_forever()
        except anyio.get_cancelled_exc_class():
            cancelled.set()
            raise

    class InterruptedStart(threading.Thread):
        def start(self) -> None:
            super().start()
            if self.name == "chunktune test start":
                raise _Interrupted

    monkeypatch.setattr(threading, "Thread", InterruptedStart)  # the module _threads uses
    with pytest.raises(_Interrupted):
        run_beside(forever, timeout_s=60, name="chunktune test start")
    assert cancelled.wait(30)


def _own_ctrl_c(signum: int, frame: FrameType | None) -> None:
    pass


def _set_own_ctrl_c(signum: int, frame: FrameType | None) -> None:
    signal.signal(signal.SIGINT, _own_ctrl_c)


def test_a_ctrl_c_handler_set_during_a_wait_under_asyncio_run_is_kept() -> None:
    """A SIGINT handler the program sets while run_beside waits on asyncio.run's loop stays."""
    seen: list[object] = []

    async def changes_ctrl_c() -> None:
        # the wait sets Python's default for itself: signal only then, or the handler
        # would run before the wait began and the test would hold whatever the wait did
        default = signal.default_int_handler
        with anyio.fail_after(30):  # a hang detector, not a timing
            while signal.getsignal(signal.SIGINT) is not default:  # noqa: ASYNC110 -- no event
                await anyio.sleep(0.001)
        signal.pthread_kill(threading.main_thread().ident or 0, signal.SIGUSR1)  # in the wait

    async def main() -> None:
        run_beside(changes_ctrl_c, timeout_s=60, name="chunktune test beside")
        seen.append(signal.getsignal(signal.SIGINT))

    # asyncio.run sets its handler only over Python's default, which a shell's background
    # job (SIGINT ignored) does not have
    ctrl_c = signal.signal(signal.SIGINT, signal.default_int_handler)
    previous = signal.signal(signal.SIGUSR1, _set_own_ctrl_c)
    try:
        asyncio.run(main())
    finally:
        signal.signal(signal.SIGUSR1, previous)
        signal.signal(signal.SIGINT, ctrl_c)
    assert seen == [_own_ctrl_c]


def _resolve_in_child() -> None:
    workload = SimulatedWorkload.from_layout("blocked", num_envs=64, nthread=4)
    decision = chunktune.resolve_sync(workload, policy="quick")
    raise SystemExit(0 if decision.source == "benchmark" else 1)


def _fork_and_resolve() -> int | None:
    # None: still waiting after 20 s, for good, on a loop that stayed in the parent
    return run_forked(_resolve_in_child, hang_guard_s=20)


@pytest.mark.anyio
@pytest.mark.parametrize("where", ["task", "worker-thread"])
@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")
async def test_a_child_forked_on_a_loop_resolves_on_a_loop_of_its_own(where: str) -> None:
    """A process forked in a task or a worker thread of a loop can resolve_sync there."""
    if where == "task":
        exitcode = _fork_and_resolve()
    else:
        exitcode = await anyio.to_thread.run_sync(_fork_and_resolve)
    assert exitcode == 0


class _Alarm(Exception):
    """What a trainer's signal handler raises (a watchdog's alarm)."""


def _broken_condition() -> RuntimeError:
    """CPython's Condition broken by a handler raising as it took its lock back: its
    ``RuntimeError`` raised over the handler's exception."""
    try:
        try:
            raise _Alarm("signal 10")
        finally:
            raise RuntimeError("release unlocked lock")
    except RuntimeError as exc:
        return exc


@pytest.mark.anyio
@pytest.mark.parametrize(
    "raised",
    [
        pytest.param(_broken_condition, id="over-a-broken-condition"),
        pytest.param(lambda: _Alarm("signal 10"), id="as-raised"),
    ],
)
async def test_a_handler_raising_while_the_thread_starts_reaches_the_caller_once_let_go(
    monkeypatch: pytest.MonkeyPatch, raised: Callable[[], BaseException]
) -> None:
    """start() interrupted once its thread runs: the handler's exception raised, finally_ once."""
    ran: list[str] = []
    running = threading.Event()
    go_on = threading.Event()
    real_start = threading.Thread.start
    started: list[threading.Thread] = []

    def interrupted(self: threading.Thread) -> None:
        started.append(self)
        real_start(self)
        running.wait()
        raise raised()

    def func() -> None:
        running.set()
        go_on.wait()
        ran.append("func")

    monkeypatch.setattr(threading.Thread, "start", interrupted)
    with pytest.raises(_Alarm, match="signal 10"):
        await in_own_thread(func, finally_=lambda: ran.append("finally"))
    assert ran == []  # neither yet: the thread runs on, and it lets go, not the caller
    go_on.set()
    started[0].join()
    assert ran == ["func", "finally"]


@pytest.mark.anyio
async def test_a_thread_that_cannot_start_still_runs_finally(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """in_own_thread with no thread to be had: finally_ runs here and the error is raised."""
    ran: list[str] = []

    def refuse(self: threading.Thread) -> None:
        raise RuntimeError("can't start new thread")

    monkeypatch.setattr(threading.Thread, "start", refuse)
    with pytest.raises(RuntimeError, match="can't start"):
        await in_own_thread(lambda: ran.append("func"), finally_=lambda: ran.append("finally"))
    assert ran == ["finally"]


def test_an_interrupt_before_the_loop_beside_starts_cancels_the_call(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A wait interrupted before run_beside's own loop has started: the call never goes on."""
    interrupted = threading.Event()
    went_on = threading.Event()
    real_run = anyio.run

    def late_run(*args: object, **kwargs: object) -> object:
        interrupted.wait(5)  # the loop beside starts only once the wait was interrupted
        return real_run(*args, **kwargs)  # type: ignore[arg-type]

    @contextlib.contextmanager
    def interrupt_at_once() -> Iterator[None]:
        raise _Interrupted
        yield

    async def step() -> None:
        await anyio.lowlevel.checkpoint()
        went_on.set()

    monkeypatch.setattr(anyio, "run", late_run)
    monkeypatch.setattr(chunktune._threads, "interruptible", interrupt_at_once)
    with pytest.raises(_Interrupted):
        run_beside(step, timeout_s=60, name="chunktune test beside")
    interrupted.set()
    for thread in threading.enumerate():
        if thread.name == "chunktune test beside":
            thread.join(10)  # a hang guard, not a timing
    assert not went_on.is_set()


def test_wait_for_sweeps_reports_a_sweep_still_running() -> None:
    """wait_for_sweeps gives False while a sweep thread outlives its timeout, True once it ended."""
    release = threading.Event()
    thread = threading.Thread(target=release.wait, args=(30,), name=SWEEP_THREAD, daemon=True)
    thread.start()
    try:
        assert wait_for_sweeps(timeout_s=0.01) is False
    finally:
        release.set()
    assert wait_for_sweeps(timeout_s=30) is True


def test_run_beside_raises_what_the_call_raised() -> None:
    """An exception the call beside raises comes out of run_beside, not as its result."""

    async def fails() -> None:
        raise LookupError("no such key")

    with pytest.raises(LookupError, match="no such key"):
        run_beside(fails, timeout_s=60, name="chunktune test beside")


@pytest.mark.anyio
@pytest.mark.parametrize("error", [MemoryError, KeyboardInterrupt])
async def test_a_finally_that_raises_still_hands_back_the_outcome(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, error: type[BaseException]
) -> None:
    """in_own_thread whose finally_ raises: the outcome stands, the error is a logged bug report."""
    hooked: list[threading.ExceptHookArgs] = []
    monkeypatch.setattr(threading, "excepthook", hooked.append)

    def cleanup() -> None:
        raise error

    name = "chunktune test finally"
    with anyio.fail_after(30):  # a hang detector, not a timing
        assert await in_own_thread(lambda: 5, name=name, finally_=cleanup) == 5
    for thread in threading.enumerate():
        if thread.name == name:
            thread.join(30)  # its error was met there, within this test
    assert not hooked
    assert any("please report it" in r.getMessage() and r.exc_info for r in caplog.records)


@pytest.mark.anyio
async def test_in_own_thread_raises_what_its_function_raised() -> None:
    """A function that raises in its own thread: the awaiting task gets that very exception."""
    failure = ValueError("the sweep broke")

    def fails() -> int:
        raise failure

    with anyio.fail_after(30), pytest.raises(ValueError) as raised:  # a hang detector
        await in_own_thread(fails, name="chunktune test raises")
    assert raised.value is failure


@pytest.mark.anyio
async def test_a_cancelled_wait_for_an_own_thread_leaves_it_running_on() -> None:
    """Cancelled with no settle: the task leaves at once; the thread runs on, finally_ after."""
    release = threading.Event()
    ended: list[str] = []
    name = "chunktune test abandoned"
    with anyio.CancelScope() as scope:
        scope.cancel()
        await in_own_thread(
            functools.partial(release.wait, 30), name=name, finally_=lambda: ended.append("f")
        )
    assert scope.cancelled_caught and ended == []
    release.set()
    for thread in threading.enumerate():
        if thread.name == name:
            thread.join(30)
    assert ended == ["f"]


@pytest.mark.anyio
async def test_hops_borrow_from_one_limiter_of_two_threads_per_loop() -> None:
    """Every hop on a loop takes a thread of one limiter of its own, two threads wide."""
    limiter = chunktune._threads._own_limiter(chunktune._threads._hops, 2)
    assert chunktune._threads._own_limiter(chunktune._threads._hops, 2) is limiter
    borrowed = await hop(lambda: limiter.borrowed_tokens)
    assert (limiter.total_tokens, borrowed, limiter.borrowed_tokens) == (2, 1, 0)


def test_run_blocking_in_a_cancelled_worker_thread_runs_on_its_loop() -> None:
    """A worker thread whose task was cancelled is still its loop's: the call runs there."""
    started, cancelled = threading.Event(), threading.Event()
    ran_on: list[int] = []

    async def where() -> None:
        ran_on.append(threading.get_ident())

    def worker() -> None:
        started.set()
        cancelled.wait(30)  # a hang guard
        run_blocking(where, instead="await where()")

    async def main() -> int:
        async with anyio.create_task_group() as tg:
            tg.start_soon(functools.partial(anyio.to_thread.run_sync, worker))
            await anyio.to_thread.run_sync(started.wait, 30)
            tg.cancel_scope.cancel()
            cancelled.set()
        return threading.get_ident()

    for backend in ("asyncio", "trio"):
        ran_on.clear()
        started.clear()
        cancelled.clear()
        assert ran_on == [] and anyio.run(main, backend=backend) == threading.get_ident()
        assert ran_on == [threading.get_ident()], backend


def _loop_state_in_child() -> None:
    # the loop stayed in the parent: this thread runs none; a loop started on a fresh
    # thread is a loop like any other, where blocking is refused
    refused: list[bool] = []

    async def block() -> None:
        workload = SimulatedWorkload.from_layout("blocked", num_envs=4, nthread=4)
        try:
            chunktune.resolve_sync(workload)
        except chunktune.UsageError:
            refused.append(True)

    fresh = threading.Thread(target=anyio.run, args=(block,), kwargs={"backend": "trio"})
    fresh.start()
    fresh.join(20)
    raise SystemExit(0 if (loop_running_here(), refused) == (False, [True]) else 1)


@pytest.mark.anyio
@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")
async def test_a_child_forked_in_a_task_is_on_no_loop_until_it_starts_one() -> None:
    """Forked in a task: the child's thread runs no loop; a trio loop on a fresh thread does."""
    assert run_forked(_loop_state_in_child, hang_guard_s=20) == 0


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("run", "count"),
    [pytest.param(hop, 2, id="two hops"), pytest.param(wait_in_thread, 8, id="eight waits")],
)
async def test_steps_in_threads_run_side_by_side(
    run: Callable[..., Coroutine[Any, Any, object]], count: int
) -> None:
    """Hops (an fsync, say) and waits in threads are not queued behind each other."""
    all_in = threading.Barrier(count, timeout=30)  # a hang guard, not a timing
    async with anyio.create_task_group() as tg:
        for _ in range(count):
            tg.start_soon(run, all_in.wait)
    assert not all_in.broken


@pytest.mark.anyio
@pytest.mark.parametrize("run", [hop, wait_in_thread], ids=["hop", "wait_in_thread"])
async def test_a_step_that_may_be_abandoned_leaves_its_cancelled_caller_at_once(
    run: Callable[..., Coroutine[Any, Any, object]],
) -> None:
    """With abandon_on_cancel the caller returns on cancellation while the step runs on."""
    release, finished = threading.Event(), threading.Event()

    def step() -> None:
        release.wait(30)  # a hang guard
        finished.set()

    with anyio.fail_after(30):  # a hang detector: a step kept would never return
        with anyio.CancelScope() as scope:
            async with anyio.create_task_group() as tg:
                tg.start_soon(functools.partial(run, step, abandon_on_cancel=True))
                await anyio.wait_all_tasks_blocked()
                scope.cancel()
    assert scope.cancelled_caught and not finished.is_set()
    release.set()
    assert finished.wait(30)


@pytest.mark.anyio
async def test_long_waits_in_threads_leave_the_hops_their_threads() -> None:
    """Waits that hold threads for long never take the hops' two: a hop still runs."""
    release = threading.Event()
    try:
        async with anyio.create_task_group() as tg:
            for _ in range(3):
                tg.start_soon(wait_in_thread, release.wait, 60)
            await anyio.wait_all_tasks_blocked()
            with anyio.fail_after(30):  # a hang detector, not a timing
                assert await hop(lambda: 7) == 7
            release.set()
    finally:
        release.set()


def test_wait_for_sweeps_without_a_timeout_waits_for_the_sweep_to_end() -> None:
    """With no timeout, wait_for_sweeps returns only once every sweep thread has ended."""
    release = threading.Event()
    thread = threading.Thread(target=release.wait, args=(30,), name=SWEEP_THREAD, daemon=True)
    thread.start()
    timer = threading.Timer(0.2, release.set)  # ends the sweep while it is waited for
    timer.start()
    try:
        assert wait_for_sweeps() is True
        assert not thread.is_alive()
    finally:
        release.set()
        timer.cancel()


def _told_on_trio() -> tuple[bool, bool]:
    """Whether loop_running_here() holds in a trio run's task and in a plain thread beside it."""

    async def main() -> tuple[bool, bool]:
        beside = await anyio.to_thread.run_sync(loop_running_here)
        return loop_running_here(), beside

    return trio.run(main)


def test_a_trio_run_is_told_with_and_without_trio_s_in_trio_run(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A trio run's own thread is told, a thread beside it not, before trio 0.26 as after."""
    assert _told_on_trio() == (True, False)
    # trio before 0.26 has none (the floor pass of CI runs one): the fallback either way
    monkeypatch.delattr(trio.lowlevel, "in_trio_run", raising=False)
    assert _told_on_trio() == (True, False)
    assert loop_running_here() is False


def _python(script: str) -> subprocess.CompletedProcess[str]:
    """``script`` run by this Python in a fresh process (a minute at most), its output kept."""
    return subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False
    )


def _python_with_ctrl_c(script: str) -> subprocess.CompletedProcess[str]:
    """:func:`_python` with SIGINT at its default in the child, which a shell may start
    ignored in a background job: the child must see the Ctrl-C it sends itself."""
    return subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )


# Ctrl-C just as resolve_sync's own asyncio loop closes (sent from inside close(), once
# its self-pipe is shut): raised there, it left the loop half closed and Python printing
# the error its __del__ met when collected.
CTRL_C_AS_THE_LOOP_CLOSES = """
import asyncio.selector_events as selector_events
import gc, os, signal
import chunktune
from chunktune.sim import SimulatedWorkload

closing = selector_events.BaseSelectorEventLoop._close_self_pipe
loops = []

def close_self_pipe(self):
    loops.append(self)
    closing(self)
    os.kill(os.getpid(), signal.SIGINT)

selector_events.BaseSelectorEventLoop._close_self_pipe = close_self_pipe
workload = SimulatedWorkload.from_layout("blocked", num_envs=64, nthread=4)
try:
    chunktune.resolve_sync(workload, policy="quick")
    print("returned")
except KeyboardInterrupt:
    print("KeyboardInterrupt")
print("closed", [loop.is_closed() for loop in loops])
loops.clear()
gc.collect()
"""


def test_ctrl_c_as_resolve_syncs_loop_closes_is_raised_once_it_is_closed() -> None:
    """Ctrl-C in resolve_sync's loop teardown: KeyboardInterrupt, the loop closed, no noise."""
    done = _python_with_ctrl_c(CTRL_C_AS_THE_LOOP_CLOSES)
    assert done.stdout.split("\n")[:2] == ["KeyboardInterrupt", "closed [True]"], done.stderr
    assert "Exception ignored" not in done.stderr, done.stderr


# The same Ctrl-C as a run that raises closes its loop: the error must not stand in for it
# (resolve_sync turns an error into a fallback decision, and the Ctrl-C would be lost).
CTRL_C_AS_A_FAILING_RUNS_LOOP_CLOSES = """
import asyncio.selector_events as selector_events
import os, signal
from chunktune._threads import run_blocking

closing = selector_events.BaseSelectorEventLoop._close_self_pipe

def close_self_pipe(self):
    closing(self)
    os.kill(os.getpid(), signal.SIGINT)

selector_events.BaseSelectorEventLoop._close_self_pipe = close_self_pipe

async def failing():
    raise ValueError("the run's own error")

try:
    run_blocking(failing, instead="await failing()")
except KeyboardInterrupt as exc:
    print("KeyboardInterrupt after", type(exc.__context__).__name__)
except ValueError:
    print("ValueError")
"""


def test_ctrl_c_as_a_failing_runs_loop_closes_is_raised_not_the_error() -> None:
    """A Ctrl-C held as a failing run's loop closed raises, with the run's error as context."""
    done = _python_with_ctrl_c(CTRL_C_AS_A_FAILING_RUNS_LOOP_CLOSES)
    assert done.stdout.strip() == "KeyboardInterrupt after ValueError", done.stderr


def test_a_process_that_never_imported_trio_or_sniffio_is_on_no_loop() -> None:
    """Without trio or sniffio imported, a plain thread and a child it forks are on no loop."""
    script = (
        "import os, sys, chunktune._backends as b\n"
        "assert 'trio' not in sys.modules, 'trio was imported'\n"
        "print(b.loop_running_here(), b.in_worker_thread(), b.inherited())\n"
        "sys.modules.pop('sniffio', None)  # as if no library had imported it\n"
        "pid = os.fork()\n"
        "if pid == 0:\n"
        "    os._exit(1 if b.inherited() else 0)\n"
        "print(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))\n"
    )
    done = _python(script)
    assert done.stdout.split() == ["False", "False", "False", "0"], done.stderr[-2000:]
    assert done.stderr == ""  # the fork's hook raised nothing ("Exception ignored in ...")


def test_a_child_forked_on_no_loop_tells_a_trio_run_it_starts_on_that_thread() -> None:
    """Forked from a thread on no loop: a trio run on the child's own thread is told as a loop."""
    # a fresh process forks: one that ran trio before (pytest's) hands an older trio's
    # child a cache of worker threads the fork did not copy, and its first run hangs
    script = (
        "import functools, os, sniffio, trio, anyio, anyio.to_thread\n"
        "from chunktune._backends import loop_running_here\n"
        "async def here():\n"
        "    return loop_running_here()\n"
        "pid = os.fork()\n"
        "if pid == 0:\n"
        "    told = trio.run(functools.partial(anyio.to_thread.run_sync, loop_running_here))\n"
        "    seen = (told, trio.run(here), loop_running_here())\n"
        "    os._exit(0 if seen == (False, True, False) else 1)\n"
        "print(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))\n"
    )
    done = _python(script)
    assert done.stdout.split() == ["0"], done.stderr[-2000:]


class _OnWarning(logging.Handler):
    """Keeps the chunktune logger's warnings and sets ``then`` at the ``after``-th one."""

    def __init__(self, then: threading.Event | None = None, after: int = 1) -> None:
        super().__init__(logging.WARNING)
        self.then, self.after = then, after
        self.messages: list[str] = []
        self.waited: list[object] = []  # each warning's first argument: the seconds waited

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())
        self.waited.append(record.args[0] if isinstance(record.args, tuple) else None)
        if self.then is not None and len(self.messages) >= self.after:
            self.then.set()


@contextlib.contextmanager
def _warnings_heard(then: threading.Event | None = None, after: int = 1) -> Iterator[_OnWarning]:
    handler = _OnWarning(then, after)
    logger = logging.getLogger("chunktune")
    logger.addHandler(handler)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)


def test_a_settling_wait_warns_every_ten_seconds_it_goes_on() -> None:
    """A cancelled task waiting 25 s for a settling thread warns at 10 s and at 20 s, saying so."""

    async def main() -> float:
        done = anyio.Event()
        async with anyio.create_task_group() as tg:
            tg.start_soon(chunktune._threads._settled, done, "chunktune test settle")
            await trio.sleep(25)
            done.set()
        return trio.current_time()

    with _warnings_heard() as heard:  # a clock that jumps to each deadline: no real waiting
        ended = trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    assert ended == 25
    said = [m.split(" for the call in flight")[0] for m in heard.messages]
    assert said == [
        "chunktune: a cancelled resolve has waited 10 s",
        "chunktune: a cancelled resolve has waited 20 s",
    ]
    assert all("'chunktune test settle'" in m for m in heard.messages)


def test_a_call_beside_that_outlives_its_cancel_is_waited_for_with_a_warning(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """run_beside past its time waits, warning, for a call deaf to a cancel: (False, None)."""
    monkeypatch.setattr(chunktune._threads, "SETTLE_WARN_S", 0.05)
    release, ended = threading.Event(), threading.Event()

    async def stubborn() -> int:
        with anyio.CancelScope(shield=True):  # deaf to the cancel until released
            await anyio.to_thread.run_sync(release.wait, 30)  # a hang guard
        ended.set()
        return 1

    with _warnings_heard(then=release, after=2) as heard:  # the second warning lets it end
        outcome = run_beside(stubborn, timeout_s=0.01, name="chunktune test stubborn")
    assert outcome == (False, None)
    assert ended.is_set()  # it returned only once the call had ended
    assert heard.waited[:2] == pytest.approx([0.05, 0.1])  # the wait so far, at each warning
    assert heard.messages[0].startswith("chunktune: a cancelled call has waited 0 s for ")
    assert "'chunktune test stubborn' to end" in heard.messages[0]


_JOINS = ("join", "_wait_for_tstate_lock")  # Thread.join's own frames (3.11 to 3.13)


async def _main_thread_joining() -> None:
    """Return once the main thread waits inside a Thread.join (a hang guard of 30 s)."""
    main = threading.main_thread().ident
    with anyio.fail_after(30):
        while True:
            frame = sys._current_frames().get(main or 0)
            code = None if frame is None else frame.f_code
            if code and code.co_filename == threading.__file__ and code.co_name in _JOINS:
                return
            await anyio.sleep(0.001)


def test_an_interrupted_wait_beside_raises_once_the_cancelled_call_has_ended(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A signal that interrupts run_beside's join is raised only once the cancelled call ended."""
    # on CPython 3.11 and 3.12 such a join marks the thread stopped while it still runs
    monkeypatch.setattr(chunktune._threads, "SETTLE_WARN_S", 0.05)
    release, ended = threading.Event(), threading.Event()

    async def slow_to_end() -> None:
        try:
            await _main_thread_joining()
            os.kill(os.getpid(), signal.SIGUSR1)  # interrupts that join
            await anyio.sleep_forever()
        finally:
            with anyio.CancelScope(shield=True):  # ends only once released
                await anyio.to_thread.run_sync(release.wait, 30)  # a hang guard
            ended.set()

    previous = signal.signal(signal.SIGUSR1, _interrupt)
    try:
        with _warnings_heard(then=release), pytest.raises(_Interrupted):
            run_beside(slow_to_end, timeout_s=60, name="chunktune test slow to end")
        assert ended.is_set()
    finally:
        signal.signal(signal.SIGUSR1, previous)
        release.set()


@pytest.mark.anyio
@pytest.mark.parametrize("run", [hop, wait_in_thread], ids=["hop", "wait_in_thread"])
async def test_a_cancelled_step_waits_for_its_thread_by_default(
    run: Callable[..., Coroutine[Any, Any, object]],
) -> None:
    """Without abandon_on_cancel a cancelled caller stays until its step has returned."""
    entered, release, finished = threading.Event(), threading.Event(), threading.Event()
    returned: list[bool] = []

    def step() -> None:
        entered.set()
        release.wait(30)  # a hang guard
        finished.set()

    async def caller(scope: anyio.CancelScope) -> None:
        with scope:
            await run(step)
        returned.append(True)

    scope = anyio.CancelScope()
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(caller, scope)
            await anyio.to_thread.run_sync(entered.wait, 30)
            scope.cancel()
            await anyio.wait_all_tasks_blocked()
            assert returned == []  # the cancel waits on the step in its thread
            release.set()
    finally:
        release.set()
    assert returned == [True] and finished.is_set()


@pytest.mark.anyio
async def test_256_long_waits_hold_threads_at_once_and_a_257th_waits_its_turn() -> None:
    """wait_in_thread's own threads are 256: as many waits run at once, one more queues."""
    release, all_in = threading.Event(), threading.Event()
    lock = threading.Lock()
    inside = [0]

    def waiting() -> None:
        with lock:
            inside[0] += 1
            if inside[0] == 256:
                all_in.set()
        release.wait(30)  # a hang guard

    try:
        async with anyio.create_task_group() as tg:
            for _ in range(257):
                tg.start_soon(wait_in_thread, waiting)
            assert await anyio.to_thread.run_sync(all_in.wait, 30)  # a hang guard
            await anyio.wait_all_tasks_blocked()
            limiter = chunktune._threads._waits.get()
            held = (limiter.borrowed_tokens, limiter.statistics().tasks_waiting)
            release.set()
    finally:
        release.set()
    assert held == (256, 1)
    assert inside[0] == 257  # the one that queued ran once a thread was free


@pytest.mark.anyio
async def test_own_threads_are_daemons_unless_told_otherwise() -> None:
    """in_own_thread's thread does not hold the process open at exit, unless daemon=False."""

    def daemonic() -> bool:
        return threading.current_thread().daemon

    assert await in_own_thread(daemonic, name="chunktune test daemon") is True
    assert await in_own_thread(daemonic, name="chunktune test kept", daemon=False) is False


def test_the_loop_beside_runs_in_a_daemon_thread() -> None:
    """run_beside's own thread does not hold the process open at exit."""

    async def daemonic() -> bool:
        return threading.current_thread().daemon

    assert run_beside(daemonic, timeout_s=60, name="chunktune test daemon beside") == (True, True)


def test_a_call_beside_past_its_time_is_cancelled(monkeypatch: pytest.MonkeyPatch) -> None:
    """run_beside past timeout_s cancels the call it gave up on and gives (False, None)."""
    monkeypatch.setattr(chunktune._threads, "SETTLE_WARN_S", 0.05)
    release, cancelled = threading.Event(), threading.Event()

    async def waits() -> int:
        try:  # ends at once if cancelled; else only once a warning releases it
            await anyio.to_thread.run_sync(release.wait, 30, abandon_on_cancel=True)
        except anyio.get_cancelled_exc_class():
            cancelled.set()
            raise
        return 1

    with _warnings_heard(then=release):
        outcome = run_beside(waits, timeout_s=0.01, name="chunktune test past its time")
    release.set()
    assert outcome == (False, None) and cancelled.is_set()


def test_a_call_beside_whose_thread_cannot_start_raises_why(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """run_beside with no thread to be had raises the start's own error, the call never made."""
    made: list[bool] = []

    async def call() -> None:
        made.append(True)

    def refuse(self: threading.Thread) -> None:
        raise RuntimeError("can't start new thread")

    monkeypatch.setattr(threading.Thread, "start", refuse)
    with pytest.raises(RuntimeError, match="can't start new thread"):
        run_beside(call, timeout_s=60, name="chunktune test no thread")
    assert made == []


def test_run_held_without_returned_gives_the_calls_result() -> None:
    """run_held(call) with no ``returned`` (as run_blocking calls it): call()'s result."""

    async def seven() -> int:
        await anyio.lowlevel.checkpoint()
        return 7

    assert run_held(seven) == 7
