"""Cheap real sweeps shared by the tests of flights and of giving up: a small policy, and a
simulated workload of one key per name."""

from __future__ import annotations

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
