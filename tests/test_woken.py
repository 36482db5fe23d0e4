"""A cancel that a SIGINT handler queues on the loop without waking it, as the Jupyter
kernel's does, reaches a resolve while its sweep still runs."""

from __future__ import annotations

import asyncio
import os
import signal
import threading
from types import FrameType

import pytest
from _small_sweeps import small_policy

import chunktune
from chunktune import _flights
from chunktune.sim import Noise, SimulatedWorkload

# not a speed limit: how long the sweep is held for the cancel to land before the test
# lets it go and fails; a loop that naps sees the cancel within a nap
LAND_GUARD_S = 10.0


class Blocking(SimulatedWorkload):
    """Its third call blocks until released: a sweep caught in the middle."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.blocked, self.release = threading.Event(), threading.Event()

    def run(self, chunk_size: int | None) -> float:
        if self.calls == 2:
            self.blocked.set()
            self.release.wait(LAND_GUARD_S * 2)
        return super().run(chunk_size)


def _blocking(name: str) -> Blocking:
    costs = SimulatedWorkload.from_layout("blocked", num_envs=512, nthread=8).costs
    return Blocking(costs, nthread=8, noise=Noise(sigma=0.01), name=name)


async def _sharing() -> None:
    """Return once a task waits on another task's sweep."""
    while not any(f.waiters for f in list(_flights._flights.values())):  # noqa: ASYNC110 -- joining signals nothing
        await asyncio.sleep(0.005)


@pytest.mark.parametrize(
    "role", [pytest.param("owner", id="owner"), pytest.param("sharer", id="sharer")]
)
def test_a_cancel_queued_without_a_wakeup_lands_mid_sweep(role: str) -> None:
    """A cancel queued unwoken, as a notebook's interrupt, lands while the sweep is held."""
    # ipykernel's interrupt cancels the cell's task from a SIGINT handler with a plain
    # call_soon on the loop's thread, which wakes nothing: the resolve must wake the loop
    w, pol = _blocking(f"woken-{role}"), small_policy()
    idle, landed = threading.Event(), threading.Event()
    landed_in_time: list[bool] = []

    def interrupt() -> None:
        # while the loop sleeps in its selector, as a notebook's interrupt finds it: a
        # signal that came while it ran Python would be queued before it went to sleep
        idle.wait(LAND_GUARD_S)
        os.kill(os.getpid(), signal.SIGINT)
        landed_in_time.append(landed.wait(LAND_GUARD_S))
        w.release.set()

    async def main() -> chunktune.Decision | None:
        loop = asyncio.get_running_loop()
        owner = asyncio.ensure_future(chunktune.resolve(w, policy=pol))
        await asyncio.to_thread(w.blocked.wait, LAND_GUARD_S)
        cell = owner
        if role == "sharer":
            cell = asyncio.ensure_future(chunktune.resolve(w, policy=pol))
            await _sharing()

        def on_sigint(signum: int, frame: FrameType | None) -> None:
            loop.call_soon(cell.cancel)  # as tornado's add_callback on its own loop's thread

        selector = loop._selector  # type: ignore[attr-defined]
        select = selector.select

        def watched(timeout: float | None = None) -> object:
            if timeout is None or timeout > 0:
                idle.set()  # the loop has nothing to do but wait
            return select(timeout)

        selector.select = watched
        previous = signal.signal(signal.SIGINT, on_sigint)
        sender = threading.Thread(target=interrupt)
        try:
            sender.start()
            with pytest.raises(asyncio.CancelledError) as caught:
                await cell
            assert caught.value.args == ()  # the canceller's own, not a timer's scope's
            landed.set()
        finally:
            signal.signal(signal.SIGINT, previous)
            selector.select = select
            w.release.set()
            await asyncio.to_thread(sender.join, LAND_GUARD_S * 2)
        return None if owner is cell else await owner

    shared = asyncio.run(main())
    assert landed_in_time == [True]
    if role == "sharer":
        assert shared is not None and shared.source == "benchmark"  # the owner went on
