"""Cheap real sweeps shared by the tests of flights, giving up and wake-ups: a small policy, a
simulated workload of one key per name, and one whose sweep is caught in the middle."""

from __future__ import annotations

import threading

import attrs

import chunktune
from chunktune.sim import Noise, SimulatedWorkload


def small_policy() -> chunktune.Policy:
    """A real sweep of a few probes, so dozens of them stay cheap."""
    return attrs.evolve(
        chunktune.load_settings().get_policy("balanced"),
        candidates=chunktune.ExplicitCandidates(sizes=(2, 8)),
        prime=0,
        min_rounds=1,
        max_rounds=2,
    )


def workload(name: str) -> SimulatedWorkload:
    """One key per name."""
    costs = SimulatedWorkload.from_layout("blocked", num_envs=512, nthread=8).costs
    return SimulatedWorkload(costs, nthread=8, noise=Noise(sigma=0.01), name=name)


class Blocking(SimulatedWorkload):
    """Its third call blocks until released: a sweep caught in the middle."""

    hold_s = 60.0  # not a speed limit: how long the third call waits to be released at most

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.blocked, self.release = threading.Event(), threading.Event()

    def run(self, chunk_size: int | None) -> float:
        if self.calls == 2:
            self.blocked.set()
            self.release.wait(self.hold_s)
        return super().run(chunk_size)
