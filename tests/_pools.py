"""Simulated pools and recorded-looking traces shared by several test modules."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from chunktune._trace import Trace
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


def remembering(rho: float, spreads: dict[int, float] | None = None, *, seed: int = 4) -> Trace:
    """Calls in random orders whose noise is the machine's AR(1) state (lag-k correlation rho**k).

    ``spreads`` scales the state for some sizes (default 0.1): a size that syncs more
    feels the same burst more.
    """
    rng = np.random.default_rng(seed)
    sizes = list(range(1, 17))
    samples: dict[int, list[float]] = {c: [] for c in sizes}
    order = []
    for _ in range(60):
        calls = [int(c) for c in rng.permutation(sizes)]
        state = rng.normal()
        for c in calls:
            scale = (spreads or {}).get(c, 0.1)
            samples[c].append(0.05 * math.exp(scale * state))
            state = rho * state + math.sqrt(1 - rho**2) * rng.normal()
        order.append(tuple(calls))
    return Trace(
        num_envs=64, nthread=4, rounds=60, samples={c: tuple(v) for c, v in samples.items()},
        order=tuple(order),
    )  # fmt: skip
