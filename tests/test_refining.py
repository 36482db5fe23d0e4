"""Refining a race: the schedules it may add, and how often it adds them."""

from __future__ import annotations

import attrs
import pytest

from chunktune import Policy, load_settings
from chunktune._candidates import candidate_list, largest_chunk
from chunktune._events import ProgressEvent
from chunktune._refining import refine_space
from chunktune._sweep import sweep
from chunktune.sim import Noise, SimulatedWorkload, env_costs


def balanced(**changes: object) -> Policy:
    return attrs.evolve(load_settings().get_policy("balanced"), **changes)  # type: ignore[arg-type]


def test_the_refine_space_reaches_the_strategy_s_largest_size() -> None:
    """A balanced race may refine up to ceil(N / 2T) itself, the largest size it measures."""
    space = refine_space(balanced(), 1000, 8)
    assert space[-1] == largest_chunk(balanced().candidates, 1000, 8) == 63


@pytest.mark.parametrize("steps", [1, 2])
def test_a_race_refines_no_more_than_refine_steps_times(steps: int) -> None:
    """Each refinement is one of refine_steps: a race with budget to spare refines that often."""
    costs = env_costs("blocked", 4096, mean_s=5e-5, heavy_fraction=0.4)
    w = SimulatedWorkload(costs, nthread=16, queue_s=2e-5, noise=Noise(sigma=0.01), seed=0)
    pol = balanced(refine_steps=steps)
    events: list[ProgressEvent] = []
    sweep(w, candidate_list(pol.candidates, w.num_envs, w.nthread), pol, on_event=events.append)
    assert sum(e.kind == "refined" for e in events) == steps
