"""A cancelled resolve of a workload that settles on cancel waits for its run() in flight.

The workload's optional ``settle_on_cancel`` (True where ``run()`` steps a pool its caller
owns); simulated workloads whose one call holds until the test lets it go, on asyncio
and trio.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from typing import Any

import anyio
import anyio.to_thread
import attrs
import numpy as np
import pytest
from _clock import jump_own_loop_when, jump_when

import chunktune
from chunktune import WorkloadError, _flights, _threads
from chunktune._threads import wait_for_sweeps
from chunktune.sim import Noise, SimulatedWorkload

pytestmark = pytest.mark.anyio

HOLD_S = 60.0  # a held call's bound: a test that fails lets it go in its finally


class Held(SimulatedWorkload):
    """A simulated pool whose first call holds until ``release`` is set: a long probe.

    ``in_run`` counts the calls in progress, as a pool that records who is inside it.
    """

    def __init__(self, *args: Any, settle: object, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.settle_on_cancel = settle
        self.entered = threading.Event()
        self.release = threading.Event()
        self.in_run = 0

    def clock(self) -> float:  # it holds in real time: the budget runs on the wall clock
        return time.monotonic()

    def run(self, chunk_size: int | None) -> float:
        self.in_run += 1
        try:
            if not self.entered.is_set():
                self.entered.set()
                self.release.wait(HOLD_S)
            return super().run(chunk_size)
        finally:
            self.in_run -= 1


def held(*, settle: object) -> Held:
    costs = SimulatedWorkload.from_layout("blocked", num_envs=512, nthread=8).costs
    return Held(costs, nthread=8, noise=Noise(sigma=0.01), settle=settle)


class _ReleaseOnSettling(logging.Handler):
    """Lets the held call go once chunktune warns that a cancel waits for it."""

    def __init__(self, workload: Held) -> None:
        super().__init__()
        self.workload = workload
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if "waited" in record.getMessage():
            self.messages.append(record.getMessage())
            self.workload.release.set()


@pytest.fixture
def settling_told(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[_ReleaseOnSettling]]:
    """Warnings of a settling wait come at once; a handler added to the list hears them."""
    monkeypatch.setattr(_threads, "SETTLE_WARN_S", 0.05, raising=False)
    handlers: list[_ReleaseOnSettling] = []
    logger = logging.getLogger("chunktune")
    yield handlers
    for handler in handlers:
        logger.removeHandler(handler)


def _listen(handlers: list[_ReleaseOnSettling], workload: Held) -> _ReleaseOnSettling:
    handler = _ReleaseOnSettling(workload)
    logging.getLogger("chunktune").addHandler(handler)
    handlers.append(handler)
    return handler


async def _cancel_in_first_call(workload: Held) -> None:
    """Resolve ``workload`` and cancel the resolve while its first call is in progress."""
    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: chunktune.resolve(workload))
        await anyio.to_thread.run_sync(workload.entered.wait, HOLD_S)
        tg.cancel_scope.cancel()


async def test_a_cancel_returns_only_once_the_run_in_flight_of_a_settling_workload_ended(
    settling_told: list[_ReleaseOnSettling],
) -> None:
    """settle_on_cancel=True: the cancel returns after run() ended, and no call starts after."""
    w = held(settle=True)
    told = _listen(settling_told, w)
    try:
        await _cancel_in_first_call(w)
        in_run, calls = w.in_run, w.calls
    finally:
        w.release.set()
    assert (in_run, calls) == (0, 1)
    assert told.messages and "settle_on_cancel" in told.messages[0]
    assert await anyio.to_thread.run_sync(wait_for_sweeps, 30.0)
    assert w.calls == 1


async def test_a_cancel_of_a_workload_that_does_not_settle_returns_at_once() -> None:
    """Without settle_on_cancel (or False) the cancel returns while run() is still in progress."""
    w = held(settle=False)
    try:
        await _cancel_in_first_call(w)
        in_run = w.in_run
    finally:
        w.release.set()
    assert in_run == 1
    assert await anyio.to_thread.run_sync(wait_for_sweeps, 30.0)
    assert w.calls == 1  # the sweep stopped at its next probe all the same


def _limited() -> chunktune.Policy:
    balanced = chunktune.load_settings().get_policy("balanced")
    # the hard limit must fall in the first run(), which waits for it, however slowly a busy
    # machine reaches that run (0.1 s failed once under coverage tracing; 1 s leaves room at
    # a load of 10 on 2 cores)
    return attrs.evolve(balanced, time_budget_s=0.05, hard_limit_s=1.0)


@pytest.mark.jumps
async def test_hard_limit_waits_for_the_run_in_flight_of_a_settling_workload(
    settling_told: list[_ReleaseOnSettling],
) -> None:
    """Past hard_limit_s a settling workload's resolve returns native once run() has ended."""
    w = held(settle=True)
    _listen(settling_told, w)
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(jump_when, w.entered, 1.0)  # the limit: in the first run()
            d = await chunktune.resolve(w, policy=_limited())
        in_run = w.in_run
    finally:
        w.release.set()
    assert (d.source, d.chunk_size, in_run, w.calls) == ("fallback", None, 0, 1)
    assert "hard limit" in d.reason
    assert "stopped once its run() in flight had ended" in d.reason, d.reason
    assert "finishes on its own" not in d.reason


def test_resolve_sync_under_hard_limit_waits_for_a_settling_workload(
    settling_told: list[_ReleaseOnSettling], monkeypatch: pytest.MonkeyPatch
) -> None:
    """resolve_sync past hard_limit_s also returns only once the settling run() has ended."""
    w = held(settle=True)
    _listen(settling_told, w)
    jump_own_loop_when(monkeypatch, w.entered, 1.0)  # the limit: in the first run()
    try:
        d = chunktune.resolve_sync(w, policy=_limited())
        in_run = w.in_run
    finally:
        w.release.set()
    assert (d.source, in_run, w.calls) == ("fallback", 0, 1)


async def test_a_settling_workload_resolved_in_time_measures_as_before() -> None:
    """settle_on_cancel changes nothing for a resolve that nobody cancels."""
    w = held(settle=np.bool_(True))  # numpy's bools count as Python's
    w.release.set()
    d = await chunktune.resolve(w)
    assert d.source == "benchmark"
    assert d.probe_seconds > 0


@pytest.mark.parametrize(
    "value",
    [pytest.param("yes", id="str"), pytest.param(1, id="int"), pytest.param(None, id="None")],
)
async def test_a_settle_on_cancel_that_is_no_bool_is_rejected_naming_it(value: object) -> None:
    """A settle_on_cancel neither True nor False is a WorkloadError before anything is measured."""
    w = held(settle=value)
    w.release.set()
    with pytest.raises(WorkloadError, match=r"Held\.settle_on_cancel\) is .*expected True"):
        await chunktune.resolve(w)
    assert w.calls == 0


async def test_cancelling_a_settling_owner_and_its_sharer_together_leaves_no_call_running(
    settling_told: list[_ReleaseOnSettling],
) -> None:
    """A group cancelled while one task sweeps and one shares it exits once run() has ended."""
    owner, sharer = held(settle=True), held(settle=True)  # two objects, one key
    _listen(settling_told, owner)
    try:
        with anyio.fail_after(HOLD_S):
            async with anyio.create_task_group() as tg:
                tg.start_soon(lambda: chunktune.resolve(owner))
                await anyio.to_thread.run_sync(owner.entered.wait, HOLD_S)
                tg.start_soon(lambda: chunktune.resolve(sharer))
                # until the sharer waits on the owner's flight
                while not any(f.waiters for f in _flights._flights.values()):  # noqa: ASYNC110
                    await anyio.sleep(0.001)
                tg.cancel_scope.cancel()
        in_run = owner.in_run
    finally:
        owner.release.set()
    assert (in_run, owner.calls, sharer.calls) == (0, 1, 0)
    sharer.release.set()
    assert (await chunktune.resolve(sharer)).source == "benchmark"  # the key is free
