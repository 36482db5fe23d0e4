"""Simulated pools shared by several test modules."""

from __future__ import annotations

from typing import Any

from chunktune.sim import Noise, SimulatedWorkload, env_costs


class SlowsAfter(SimulatedWorkload):
    """Every call after the first ``after`` runs five times slower (a neighbour's job arrived)."""

    def __init__(self, *args: Any, after: int, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.after = after

    def run(self, chunk_size: int | None) -> float:
        seconds = super().run(chunk_size)
        if self.calls > self.after:
            self.elapsed_s += 4 * seconds
            return 5 * seconds
        return seconds


def lognormal_32(seed: int, *, slow_after: int | None = None) -> SimulatedWorkload:
    """8192 envs on 32 threads, 0.28 s a call at 5% noise with spikes: 3 is 5% faster.

    With ``slow_after``, every call after that many runs five times slower.
    """
    costs = env_costs("lognormal", 8192, mean_s=1e-3, seed=7, sigma=1.0)
    noise = Noise(sigma=0.05, spike_prob=0.02, spike_scale=0.5, drift=0.02, drift_period=97.0)
    if slow_after is None:
        return SimulatedWorkload(costs, nthread=32, noise=noise, seed=seed)
    return SlowsAfter(costs, nthread=32, noise=noise, seed=seed, after=slow_after)
