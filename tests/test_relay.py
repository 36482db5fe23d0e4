"""What a caller's on_progress raises during a sweep: the resolve goes on, or the caller gets it."""

from __future__ import annotations

import asyncio
import json
import logging
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import cast

import anyio
import anyio.lowlevel
import pytest
import trio

import chunktune
from chunktune import Decision, ProgressEvent
from chunktune._backends import call_soon
from chunktune._events import ProgressCallback
from chunktune._relay import Relay, same_callback
from chunktune.sim import SimulatedWorkload

CALLERS = ["sync", "asyncio", "trio"]


class _Flag(BaseException):
    """A trainer's own BaseException that is no Exception (an early-stop signal, say)."""


def workload() -> SimulatedWorkload:
    return SimulatedWorkload.from_layout("blocked", num_envs=512, nthread=8)


def resolved(caller: str, on_progress: Callable[[ProgressEvent], None]) -> Decision:
    """A resolve of :func:`workload` by ``resolve_sync``, or by ``resolve`` on asyncio or trio;
    a hang fails the test."""
    if caller == "sync":
        return chunktune.resolve_sync(workload(), policy="quick", on_progress=on_progress)

    async def main() -> Decision:
        with anyio.fail_after(60):
            return await chunktune.resolve(workload(), policy="quick", on_progress=on_progress)

    return asyncio.run(main()) if caller == "asyncio" else trio.run(main)


def raising_at(n: int, exc: BaseException) -> Callable[[ProgressEvent], None]:
    """An on_progress that raises ``exc`` at its ``n``-th sweep event (a probe's, say)."""
    seen = [0]

    def on_progress(event: ProgressEvent) -> None:
        if event.kind == "waiting":
            return
        seen[0] += 1
        if seen[0] == n:
            raise exc

    return on_progress


def entries(tmp: Path) -> dict[str, object]:
    path = tmp / "cache.json"
    return dict(json.loads(path.read_text())["entries"]) if path.exists() else {}


@pytest.mark.parametrize("caller", CALLERS)
def test_an_exit_raised_by_on_progress_mid_sweep_reaches_the_caller(
    caller: str, isolated: Path
) -> None:
    """A callback's SystemExit mid-sweep is raised as itself (trio too); the key stays free."""
    # before, trio ended the trainer's whole run with TrioInternalError
    with pytest.raises(SystemExit) as raised:
        resolved(caller, raising_at(4, SystemExit(3)))
    assert raised.value.code == 3
    assert entries(isolated) == {}
    again = resolved(caller, lambda event: None)
    assert again.source == "benchmark" and list(entries(isolated)) == [again.key]


@pytest.mark.parametrize("caller", CALLERS)
def test_a_base_exception_of_the_trainer_s_raised_by_on_progress_is_logged_and_the_sweep_goes_on(
    caller: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A callback's own BaseException (no Exception) is logged once; the decision is made."""
    with caplog.at_level(logging.WARNING, logger="chunktune"):
        decision = resolved(caller, raising_at(4, _Flag("stop the progress bar")))
    assert decision.source == "benchmark"
    logged = [r for r in caplog.records if "on_progress raised" in r.getMessage()]
    assert len(logged) == 1 and logged[0].exc_info is not None
    assert isinstance(logged[0].exc_info[1], _Flag)


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_ctrl_c_raised_by_on_progress_mid_sweep_reaches_the_caller(
    backend: str, isolated: Path
) -> None:
    """Ctrl-C raised in the callback mid-sweep ends anyio.run as KeyboardInterrupt (trio too)."""
    script = textwrap.dedent(
        f"""
        import anyio, chunktune
        from chunktune.sim import SimulatedWorkload
        seen = [0]
        def on_progress(event):
            seen[0] += 1
            if seen[0] == 4:
                raise KeyboardInterrupt
        async def main():
            w = SimulatedWorkload.from_layout("blocked", num_envs=512, nthread=8)
            await chunktune.resolve(w, policy="quick", on_progress=on_progress)
        try:
            anyio.run(main, backend={backend!r})
        except KeyboardInterrupt:
            print("KeyboardInterrupt")
        except BaseException as exc:
            print(type(exc).__name__)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.stdout.strip() == "KeyboardInterrupt", done.stderr[-2000:]
    assert entries(isolated) == {}


class _Settling(SimulatedWorkload):
    """A simulated pool that settles on cancel and notes whether one of its calls is running."""

    settle_on_cancel = True

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.running = 0

    def run(self, chunk_size: int | None) -> float:
        self.running += 1
        try:
            time.sleep(0.01)  # long enough for the event of the call before to arrive mid-call
            return super().run(chunk_size)
        finally:
            self.running -= 1


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_an_exit_raised_by_on_progress_waits_for_a_settling_workload_s_call(backend: str) -> None:
    """A callback's SystemExit leaves a workload that settles on cancel with no call running."""
    pool = _Settling.from_layout("blocked", num_envs=512, nthread=8)

    async def main() -> None:
        with anyio.fail_after(60):
            await chunktune.resolve(pool, policy="quick", on_progress=raising_at(4, SystemExit(3)))

    with pytest.raises(SystemExit):
        anyio.run(main, backend=backend)
    assert pool.running == 0


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_an_exit_raised_by_on_progress_as_the_caller_cancels_the_resolve_reaches_the_caller(
    backend: str, isolated: Path
) -> None:
    """A callback's SystemExit raised while the caller cancels the resolve is raised, not lost."""
    # the cancel reaches past the relay's own scope to the sweep's except branch, whose
    # close() alone raises the exit: without it the caller saw a plain, quiet cancel
    left: list[bool] = []

    async def main() -> None:
        with anyio.fail_after(60), anyio.CancelScope() as caller:

            def on_progress(event: ProgressEvent) -> None:
                if event.kind != "waiting":
                    caller.cancel()  # the trainer leaves the resolve (its own deadline, say)
                    raise SystemExit(3)

            await chunktune.resolve(workload(), policy="quick", on_progress=on_progress)
        left.append(True)

    with pytest.raises(SystemExit) as raised:
        anyio.run(main, backend=backend)
    assert raised.value.code == 3 and left == []
    assert entries(isolated) == {}


async def _handled(relay: Relay) -> None:
    """Wait until the loop has handled every event posted to ``relay`` so far (FIFO)."""
    done = anyio.Event()
    call_soon(relay.token, done.set)
    await done.wait()


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_the_relay_keeps_the_first_exit_stops_the_sweep_and_tells_nothing_after_it(
    backend: str,
) -> None:
    """Exits on the loop: the first is close()'s, stop set, scope cancelled; no event after."""
    exits: list[BaseException] = [SystemExit(1), SystemExit(2)]
    told: list[ProgressEvent] = []

    def callback(event: ProgressEvent) -> None:
        told.append(event)
        raise exits.pop(0)

    async def main() -> tuple[Relay, int | str | None]:
        relay = Relay(callback, anyio.lowlevel.current_token(), threading.Event())
        with anyio.fail_after(10):
            with relay.scope:
                relay.post(ProgressEvent(kind="probe"))
                relay.post(ProgressEvent(kind="raced_out"))
                await anyio.sleep_forever()
            await _handled(relay)
        first: int | str | None = None
        try:
            relay.close()
        except SystemExit as exc:
            first = exc.code
        return relay, first

    relay, first = anyio.run(main, backend=backend)
    assert first == 1 and [e.kind for e in told] == ["probe"] and len(exits) == 1
    assert relay.stop.is_set() and relay.scope.cancel_called


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_an_exit_raised_after_a_finished_resolve_closed_its_relay_is_logged_never_raised(
    backend: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A late event after close() (no stop set) whose callback exits is logged, never raised."""

    def callback(event: ProgressEvent) -> None:
        raise SystemExit(3)

    async def main() -> Relay:
        relay = Relay(callback, anyio.lowlevel.current_token(), threading.Event())
        relay.close()  # the resolve returned: nothing was raised meanwhile
        relay.post(ProgressEvent(kind="probe"))
        with anyio.fail_after(10):
            await _handled(relay)
        relay.close()  # nothing left to raise: the late exit was logged
        return relay

    with caplog.at_level(logging.WARNING, logger="chunktune"):
        relay = anyio.run(main, backend=backend)
    assert not relay.stop.is_set()
    late = [r.getMessage() for r in caplog.records if "after its resolve" in r.getMessage()]
    assert late == [
        "chunktune: on_progress raised SystemExit(3) after its resolve had returned; ignored"
    ]


def test_built_in_functions_of_one_name_on_one_object_are_two_callbacks() -> None:
    """Two built-in functions that share a name and ``__self__`` are not taken for one."""
    # C-level static methods have no self (None): the same name in two types must not match
    one, other = (cast(ProgressCallback, f) for f in (bytes.maketrans, str.maketrans))
    assert one.__self__ is None and other.__self__ is None  # type: ignore[attr-defined]
    assert not same_callback(one, other)
    events: list[ProgressEvent] = []
    assert same_callback(events.append, events.append)
    others: list[ProgressEvent] = []
    assert not same_callback(events.append, others.append)


class _Bar:
    """A progress bar whose methods a trainer passes as ``on_progress``."""

    def update(self, event: ProgressEvent) -> None:
        """Take one event."""

    def close_on(self, event: ProgressEvent) -> None:
        """Take one event another way."""


def _plain(event: ProgressEvent) -> None:
    """A plain function, no method of anything."""


def test_a_method_read_twice_off_one_object_is_one_callback_and_no_other_is() -> None:
    """``bar.update`` read twice is one callback; another bar's, or another method, is not."""
    bar, other = _Bar(), _Bar()
    assert bar.update is not bar.update  # a new bound method each time it is read
    assert same_callback(bar.update, bar.update)
    assert not same_callback(bar.update, other.update)
    assert not same_callback(bar.update, bar.close_on)
    assert not same_callback(bar.update, other.close_on)
    assert not same_callback(bar.update, _plain) and not same_callback(_plain, bar.update)


class _EqualsAnything:
    """A caller's callable whose ``==`` says yes to anything (a test double's, say)."""

    def __call__(self, event: ProgressEvent) -> None:
        """Take one event."""

    def __eq__(self, other: object) -> bool:
        return True

    def __hash__(self) -> int:
        return 0


def test_a_built_in_method_and_an_object_that_equals_all_are_two_callbacks() -> None:
    """A built-in method beside a caller's object: the object's ``__eq__`` never decides."""
    events: list[ProgressEvent] = []
    anything = _EqualsAnything()
    assert anything == events.append  # what a comparison by == would take for one callback
    assert not same_callback(events.append, anything)
    assert not same_callback(anything, events.append)
