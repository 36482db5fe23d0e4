"""Chunktune's own modeled workloads: the calls they count and the clock they keep."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from _pools import remembering

from chunktune.sim import Noise, ReplayWorkload, SimulatedWorkload


@pytest.mark.parametrize(
    "make",
    [
        pytest.param(
            lambda: SimulatedWorkload.from_layout(
                "lognormal", num_envs=64, nthread=4, noise=Noise(sigma=0.05)
            ),
            id="simulated",
        ),
        pytest.param(lambda: ReplayWorkload(remembering(rho=0.5)), id="replay"),
    ],
)
def test_modeled_workloads_count_their_calls_into_their_clock(
    make: Callable[[], SimulatedWorkload | ReplayWorkload],
) -> None:
    """Simulated and replayed pools alike: calls, history and clock() tally run(); reset forgets."""
    workload = make()
    seconds = [workload.run(c) for c in (1, None, 2, 1)]
    assert workload.calls == 4
    assert workload.history == list(zip((1, None, 2, 1), seconds, strict=True))
    assert workload.clock() == workload.elapsed_s
    # a running total: Python 3.12's sum() of floats is compensated, a last bit apart
    assert workload.elapsed_s == pytest.approx(sum(seconds), rel=1e-12, abs=0.0)
    workload.reset()
    assert (workload.calls, workload.history, workload.clock()) == (0, [], 0.0)
