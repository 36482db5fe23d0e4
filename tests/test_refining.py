"""Refining a race: the schedules it may add, and how often it adds them."""

from __future__ import annotations

import attrs
import pytest

from chunktune import Policy, load_settings
from chunktune._candidates import ExplicitCandidates, candidate_list, largest_chunk
from chunktune._events import ProgressEvent
from chunktune._field import Field
from chunktune._pacing import Pace
from chunktune._probe import Probe
from chunktune._refining import Refiner, refine_space
from chunktune._schedule import representative
from chunktune._sweep import may_probe, sweep
from chunktune._workload import native_chunk
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


def test_native_is_refined_around_as_the_schedule_it_runs_as() -> None:
    """Native 51 of 1030 envs runs as 50: the refiner looks halfway from 50, not from 51."""
    w = SimulatedWorkload.from_layout("uniform", num_envs=1030, nthread=2)
    probe = Probe(w, balanced(), check_cancelled=lambda: None, on_event=None, clock=lambda: 0.0)
    assert (probe.native, representative(1030, probe.native)) == (51, 50)
    f = Field(probe, [None, 10, 20, 100, 200])
    for r in range(4):  # native leads, 100 next: the two refined around
        f.ev.add(None, r, 1.0)
        for c, level in ((10, 1.2), (20, 1.1), (100, 1.05), (200, 1.3)):
            f.ev.add(c, r, level * (1.0 + 0.001 * (r % 2)))
    f.round = 3
    # 31: halfway from 50 down to 20 in log scale (sqrt(20 * 50) = 31.6)
    assert Refiner(f, Pace(probe)).refine() == [31, 74, 129, 258]


def modeled_field() -> Field:
    """1030 envs on 2 threads, four sizes and native measured: the model's pick is 258."""
    w = SimulatedWorkload.from_layout("uniform", num_envs=1030, nthread=2)
    probe = Probe(w, balanced(), check_cancelled=lambda: None, on_event=None, clock=lambda: 0.0)
    levels = {20: 1.267, 23: 0.979, 32: 1.086, 74: 0.961}
    f = Field(probe, [None, *levels])
    for r in range(4):
        f.ev.add(None, r, 1.097)
        for c, seconds in levels.items():
            f.ev.add(c, r, seconds)
    f.round = 3
    return f


def test_the_model_fits_native_at_the_schedule_it_runs_as() -> None:
    """Native 51 of 1030 envs runs as 50: the model's fit puts native's time there."""
    f = modeled_field()
    # 258 is the model's pick with native's point at 50; placed at 51, the fit picks otherwise
    assert Refiner(f, Pace(f.probe)).refine() == [21, 28, 58, 129, 258]


class RoomForOne(Pace):
    """A race's share that can still judge one new candidate, whatever the field."""

    def room_for_new(self, live: int, rounds: int) -> int:
        return 1


def test_room_for_one_new_schedule_takes_the_most_promising_proposal() -> None:
    """With room for one, the refiner adds the model's pick (proposed first), not the smallest."""
    f = modeled_field()
    assert Refiner(f, RoomForOne(f.probe)).refine() == [258]
    assert f.live[-1] == 258 and 21 not in f.measured


def test_a_race_that_never_refines_has_no_refine_space() -> None:
    """refine_steps 0, or candidates not refinable: no refine space, and may_probe adds none."""
    assert refine_space(balanced(refine_steps=0), 1000, 8) == []
    explicit = balanced(candidates=ExplicitCandidates(sizes=(4, 8)))
    assert refine_space(explicit, 1000, 8) == []
    assert may_probe(balanced(refine_steps=0), 1000, 8) == sorted(
        {native_chunk(1000, 8), *balanced().candidates.propose(1000, 8)}
    )


def test_a_blocked_batch_is_refined_onto_its_heavy_block_s_tooth() -> None:
    """Between the teeth 114 and 171 (32768 envs, 96 threads) the refiner tries 137, not 140."""
    # 40% heavy envs at the end: at 137 the heavy chunks come to 96, one a worker (240
    # chunks, 2.5 a worker), the batch's fastest size; no ceil(N/(kT)) lies between
    costs = env_costs("blocked", 32768, mean_s=5e-5, heavy_fraction=0.4)
    w = SimulatedWorkload(costs, nthread=96, queue_s=2e-5, noise=Noise(), seed=0)
    assert w.oracle()[0] == 137
    probe = Probe(w, balanced(), check_cancelled=lambda: None, on_event=None, clock=lambda: 0.0)
    sizes = (69, 86, 114, 171)
    f = Field(probe, [None, *sizes])
    for r in range(4):
        f.ev.add(None, r, w.true_time(None))
        for c in sizes:
            f.ev.add(c, r, w.true_time(c) * (1.0 + 0.001 * (r % 2)))
    f.round = 3
    added = Refiner(f, Pace(probe)).refine()
    assert 137 in added and 140 not in added
