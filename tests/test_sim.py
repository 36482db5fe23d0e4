"""Tests of the simulated many-core workload (chunktune.sim)."""

from __future__ import annotations

import itertools
import math
import statistics
from typing import Any

import numpy as np
import pytest
from _untyped import untyped

from chunktune._errors import InvalidArgumentError
from chunktune._workload import Workload, check_workload, native_chunk, upper_chunk
from chunktune.sim import LAYOUTS, Noise, SimulatedWorkload, compare, env_costs


def reference_makespan(costs: list[float], chunk: int, nthread: int, dispatch_s: float) -> float:
    """Plain list scheduling: each chunk, in index order, goes to the earliest-free worker."""
    free = [0.0] * nthread
    for start in range(0, len(costs), chunk):
        worker = free.index(min(free))
        free[worker] += sum(costs[start : start + chunk]) + dispatch_s
    return max(free)


# ------------------------------------------------------------------------- env_costs


@pytest.mark.parametrize("layout", LAYOUTS)
def test_env_costs_have_the_requested_mean_and_are_positive(layout: str) -> None:
    """Every layout yields num_envs positive, finite costs whose mean is mean_s."""
    costs = env_costs(layout, 1000, mean_s=2e-3, seed=3)
    assert costs.shape == (1000,)
    assert costs.dtype == np.float64
    assert np.all(np.isfinite(costs)) and np.all(costs > 0)
    assert float(costs.mean()) == pytest.approx(2e-3, rel=1e-12)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_env_costs_are_seeded(layout: str) -> None:
    """The same seed gives the same costs."""
    np.testing.assert_array_equal(env_costs(layout, 64, seed=7), env_costs(layout, 64, seed=7))


def test_random_layouts_differ_between_seeds() -> None:
    """A different seed gives different lognormal costs."""
    assert not np.array_equal(env_costs("lognormal", 64, seed=1), env_costs("lognormal", 64))


def test_uniform_costs_are_all_equal() -> None:
    """The uniform layout gives every env the mean cost."""
    np.testing.assert_allclose(env_costs("uniform", 10, mean_s=0.5), np.full(10, 0.5))


@pytest.mark.parametrize(
    ("position", "heavy"),
    [
        pytest.param("end", slice(75, 100), id="end"),
        pytest.param("start", slice(0, 25), id="start"),
        pytest.param("middle", slice(37, 62), id="middle"),
    ],
)
def test_blocked_layout_puts_one_heavy_block_where_asked(position: str, heavy: slice) -> None:
    """The blocked layout makes heavy_fraction of the envs heavy_factor times costlier, in place."""
    costs = env_costs("blocked", 100, position=position)
    light = np.ones(100, dtype=bool)
    light[heavy] = False
    assert np.allclose(costs[heavy], 4.0 * costs[light][0])
    assert np.allclose(costs[light], costs[light][0])


def test_variants_layout_is_contiguous_blocks_with_jitter() -> None:
    """Variants form equal contiguous blocks whose means differ; envs jitter around them."""
    costs = env_costs("variants", 400, n_variants=4, jitter=0.01, seed=2)
    means = [float(block.mean()) for block in np.split(costs, 4)]
    assert len({round(m, 6) for m in means}) == 4
    for block, mean in zip(np.split(costs, 4), means, strict=True):
        assert np.allclose(block, mean, rtol=0.06)
    assert len(set(costs.tolist())) > 4


def test_interleaved_layout_spreads_heavy_envs_periodically() -> None:
    """Every period-th env, starting at env 0, is heavy."""
    costs = env_costs("interleaved", 12, period=3, heavy_factor=5.0)
    heavy = costs > costs.min()
    assert heavy.tolist() == [i % 3 == 0 for i in range(12)]
    assert costs.max() / costs.min() == pytest.approx(5.0)


@pytest.mark.parametrize(
    ("args", "kwargs", "shown"),
    [
        pytest.param(("zigzag", 8), {}, "'zigzag'", id="unknown-layout"),
        pytest.param(("uniform", 0), {}, "0", id="zero-envs"),
        pytest.param(("uniform", 8.0), {}, "8.0", id="float-envs"),
        pytest.param(("uniform", True), {}, "True", id="bool-envs"),
        pytest.param(("uniform", 8), {"mean_s": 0.0}, "0.0", id="zero-mean"),
        pytest.param(("uniform", 8), {"mean_s": math.inf}, "inf", id="inf-mean"),
        pytest.param(("uniform", 8), {"seed": -1}, "-1", id="negative-seed"),
        pytest.param(("uniform", 8), {"sigma": 0.5}, "'sigma'", id="uniform-has-no-shape"),
        pytest.param(("lognormal", 8), {"sigma": -0.1}, "-0.1", id="negative-sigma"),
        pytest.param(("lognormal", 8), {"sigma": "wide"}, "'wide'", id="string-sigma"),
        pytest.param(("blocked", 8), {"heavy_fraction": 1.5}, "1.5", id="fraction-over-1"),
        pytest.param(("blocked", 8), {"heavy_factor": 0}, "0", id="zero-factor"),
        pytest.param(("blocked", 8), {"position": "left"}, "'left'", id="bad-position"),
        pytest.param(("variants", 8), {"n_variants": 0}, "0", id="zero-variants"),
        pytest.param(("interleaved", 8), {"period": 2.5}, "2.5", id="float-period"),
    ],
)
def test_env_costs_rejects_bad_arguments_naming_the_value(
    args: tuple[object, ...], kwargs: dict[str, object], shown: str
) -> None:
    """A bad layout, count or shape parameter raises InvalidArgumentError naming the value."""
    with pytest.raises(InvalidArgumentError) as info:
        env_costs(*args, **kwargs)  # type: ignore[arg-type]
    assert shown in str(info.value)


def test_unknown_layout_error_lists_the_layouts() -> None:
    """The unknown-layout message names every valid layout."""
    with pytest.raises(InvalidArgumentError) as info:
        env_costs("zigzag", 8)
    assert all(name in str(info.value) for name in LAYOUTS)


# ---------------------------------------------------------------------- the pool model


def test_simulated_workload_is_a_workload() -> None:
    """SimulatedWorkload satisfies the Workload protocol and check_workload."""
    workload = SimulatedWorkload.from_layout("uniform", num_envs=64, nthread=4)
    assert isinstance(workload, Workload)
    assert check_workload(workload) == (64, 4)


@pytest.mark.parametrize(
    ("num_envs", "nthread", "chunk"),
    [
        pytest.param(256, 4, 8, id="8-chunks-per-worker"),
        pytest.param(256, 4, 64, id="1-chunk-per-worker"),
        pytest.param(1024, 16, 1, id="chunk-1"),
        pytest.param(960, 8, 40, id="3-chunks-per-worker"),
    ],
)
def test_uniform_time_is_work_per_worker_plus_dispatch(
    num_envs: int, nthread: int, chunk: int
) -> None:
    """Uniform costs in a multiple of T chunks take N/T*cost + chunks_per_worker*dispatch."""
    workload = SimulatedWorkload.from_layout(
        "uniform", num_envs=num_envs, nthread=nthread, mean_s=1e-3, dispatch_s=5e-7
    )
    per_worker = num_envs // chunk // nthread
    expected = num_envs / nthread * 1e-3 + per_worker * 5e-7
    assert workload.true_time(chunk) == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("chunk", [1, 3, 7, 16, 50, 100])
def test_makespan_matches_plain_list_scheduling(layout: str, chunk: int) -> None:
    """The heap model agrees with a plain earliest-free-worker simulation."""
    costs = env_costs(layout, 100, seed=5)
    workload = SimulatedWorkload(costs, nthread=3, dispatch_s=1e-5)
    expected = reference_makespan(costs.tolist(), chunk, 3, 1e-5)
    assert workload.true_time(chunk) == pytest.approx(expected, rel=1e-12)


def test_one_chunk_per_worker_loses_on_an_end_heavy_batch() -> None:
    """End-heavy N=256, T=2: c=128 is over 1.3x c=8, and c=8 is within 2% of the bound."""
    workload = SimulatedWorkload.from_layout("blocked", num_envs=256, nthread=2)
    assert workload.true_time(128) > 1.3 * workload.true_time(8)
    assert workload.true_time(8) <= 1.02 * workload.bound()


def test_a_chunk_above_ceil_n_over_t_leaves_workers_idle() -> None:
    """A chunk larger than ceil(N/T) takes at least chunk*cost: some worker sits idle."""
    workload = SimulatedWorkload.from_layout("uniform", num_envs=100, nthread=4, mean_s=1e-3)
    assert upper_chunk(100, 4) == 25
    assert workload.true_time(40) >= 40 * 1e-3
    assert workload.true_time(40) > workload.true_time(25)


def test_chunks_above_num_envs_make_one_chunk() -> None:
    """Any chunk size of at least N runs the whole batch as one chunk."""
    workload = SimulatedWorkload.from_layout("lognormal", num_envs=50, nthread=4, dispatch_s=0.0)
    total = float(workload.costs.sum())
    assert workload.true_time(50) == pytest.approx(total)
    assert workload.true_time(10_000) == workload.true_time(50)


def test_single_thread_time_is_total_work_plus_dispatch() -> None:
    """With T=1 a call takes every env's cost plus one dispatch per chunk."""
    workload = SimulatedWorkload([1.0, 2.0, 3.0, 4.0, 5.0], nthread=1, dispatch_s=0.25)
    assert workload.true_time(2) == pytest.approx(15.0 + 3 * 0.25)


def test_bound_is_a_floor_for_every_chunk() -> None:
    """No chunk size beats the balance bound, which is max(sum/T, max cost)."""
    workload = SimulatedWorkload.from_layout("variants", num_envs=300, nthread=7, seed=4)
    costs = workload.costs
    assert workload.bound() == pytest.approx(max(costs.sum() / 7, costs.max()))
    assert min(workload.landscape().values()) >= workload.bound()
    assert SimulatedWorkload([1.0, 9.0], nthread=4).bound() == 9.0


# ------------------------------------------------------------------- oracle and regret


@pytest.mark.parametrize("layout", LAYOUTS)
def test_oracle_is_the_minimum_of_the_landscape(layout: str) -> None:
    """oracle() is the smallest chunk at the landscape's minimum time; its regret is 0."""
    workload = SimulatedWorkload.from_layout(layout, num_envs=500, nthread=6, seed=1)
    landscape = workload.landscape()
    assert sorted(landscape) == list(range(1, upper_chunk(500, 6) + 1))
    chunk, seconds = workload.oracle()
    fastest = min(landscape.values())
    assert seconds == landscape[chunk] == pytest.approx(fastest, rel=1e-12)
    assert all(landscape[c] > fastest * (1 + 1e-12) for c in range(1, chunk))
    assert workload.regret(chunk) == 0.0
    assert all(workload.regret(c) >= 0.0 for c in landscape)


def test_oracle_breaks_ties_toward_the_smallest_chunk() -> None:
    """With free dispatch and uniform costs, every chunk dividing the work evenly ties; c=1 wins."""
    workload = SimulatedWorkload.from_layout("uniform", num_envs=64, nthread=4, dispatch_s=0.0)
    assert workload.oracle()[0] == 1


def test_regret_measures_the_slowdown_against_the_oracle() -> None:
    """regret(c) is true_time(c) / oracle time - 1."""
    workload = SimulatedWorkload.from_layout("blocked", num_envs=256, nthread=2)
    best = workload.oracle()[1]
    assert workload.regret(128) == pytest.approx(workload.true_time(128) / best - 1.0)
    assert workload.regret(128) > 0.3


def test_oracle_handles_a_large_many_core_batch() -> None:
    """The oracle sweeps every chunk of N=32768 on T=128 (checked for a sane answer only)."""
    workload = SimulatedWorkload.from_layout("lognormal", num_envs=32768, nthread=128)
    chunk, seconds = workload.oracle()
    assert 1 <= chunk <= 256
    assert workload.bound() <= seconds <= workload.true_time(256)


# --------------------------------------------------------------------------- run/noise


def test_silent_runs_report_the_true_time_and_are_recorded() -> None:
    """Without noise run() returns true_time(); calls and history record each call."""
    workload = SimulatedWorkload.from_layout("lognormal", num_envs=128, nthread=4)
    assert workload.run(8) == workload.true_time(8)
    assert workload.run(None) == workload.true_time(None)
    assert workload.calls == 2
    assert workload.history == [(8, workload.true_time(8)), (None, workload.true_time(None))]


def test_none_means_the_native_chunk() -> None:
    """run(None) and true_time(None) use native_chunk(N, T)."""
    workload = SimulatedWorkload.from_layout("blocked", num_envs=256, nthread=2)
    assert native_chunk(256, 2) == 12
    assert workload.true_time(None) == workload.true_time(12)
    assert workload.run(None) == workload.true_time(12)


def test_noisy_runs_are_seeded() -> None:
    """The same seed gives the same run() sequence; another seed gives another."""
    noise = Noise(sigma=0.05, spike_prob=0.1, drift=0.02)

    def runs(seed: int) -> list[float]:
        workload = SimulatedWorkload.from_layout(
            "lognormal", num_envs=64, nthread=4, noise=noise, seed=seed
        )
        return [workload.run(c) for c in (1, 2, 4, None) * 5]

    assert runs(3) == runs(3)
    assert runs(3) != runs(4)


def test_reset_restarts_the_noise_sequence() -> None:
    """reset() clears calls and history and replays the same noise."""
    workload = SimulatedWorkload.from_layout(
        "uniform", num_envs=64, nthread=4, noise=Noise(sigma=0.1)
    )
    first = [workload.run(4) for _ in range(5)]
    workload.reset()
    assert workload.calls == 0 and workload.history == []
    assert [workload.run(4) for _ in range(5)] == first


def test_jitter_median_is_the_true_time() -> None:
    """With sigma=3% the runs spread out but their median stays within 1% of true_time."""
    workload = SimulatedWorkload.from_layout(
        "lognormal", num_envs=256, nthread=8, noise=Noise(sigma=0.03), seed=11
    )
    runs = [workload.run(8) for _ in range(401)]
    assert len(set(runs)) == len(runs)
    assert statistics.median(runs) == pytest.approx(workload.true_time(8), rel=0.01)


def test_spikes_only_inflate() -> None:
    """Spikes never make a call faster than the model, and inflate by at most spike_scale."""
    noise = Noise(spike_prob=0.5, spike_scale=0.4)
    workload = SimulatedWorkload.from_layout("uniform", num_envs=64, nthread=4, noise=noise)
    truth = workload.true_time(4)
    runs = [workload.run(4) for _ in range(200)]
    assert all(truth <= r <= 1.4 * truth for r in runs)
    assert 40 < sum(r > truth for r in runs) < 160


def test_drift_swings_slowly_within_its_amplitude() -> None:
    """Drift moves the time by at most its amplitude and changes little from call to call."""
    noise = Noise(drift=0.1, drift_period=100.0)
    workload = SimulatedWorkload.from_layout("uniform", num_envs=64, nthread=4, noise=noise)
    truth = workload.true_time(4)
    ratios = [workload.run(4) / truth for _ in range(200)]
    assert all(0.9 - 1e-12 <= r <= 1.1 + 1e-12 for r in ratios)
    assert max(ratios) - min(ratios) > 0.15
    assert max(abs(b - a) for a, b in itertools.pairwise(ratios)) < 0.01


def test_memory_makes_neighbouring_calls_share_their_noise_and_keeps_its_spread() -> None:
    """With memory 0.5 neighbouring calls correlate about 0.5 and 0.125 three calls apart."""
    runs = {}
    for memory in (0.0, 0.5):
        noise = Noise(sigma=0.05, memory=memory)
        workload = SimulatedWorkload.from_layout(
            "uniform", num_envs=64, nthread=4, noise=noise, seed=3
        )
        truth = workload.true_time(4)
        runs[memory] = np.log([workload.run(4) / truth for _ in range(4000)])
    x = runs[0.5]
    assert np.corrcoef(x[:-1], x[1:])[0, 1] == pytest.approx(0.5, abs=0.06)
    assert np.corrcoef(x[:-3], x[3:])[0, 1] == pytest.approx(0.125, abs=0.06)
    assert np.std(x) == pytest.approx(0.05, rel=0.1)  # the same spread per call
    assert abs(np.corrcoef(runs[0.0][:-1], runs[0.0][1:])[0, 1]) < 0.06
    # memory 0 is the independent noise every seed gave before
    assert runs[0.0][0] == np.log(
        SimulatedWorkload.from_layout(
            "uniform", num_envs=64, nthread=4, noise=Noise(sigma=0.05), seed=3
        ).run(4)
        / SimulatedWorkload.from_layout("uniform", num_envs=64, nthread=4).true_time(4)
    )


# ----------------------------------------------------------------- signature and errors


def test_signature_identifies_the_cost_vector() -> None:
    """The signature names the kind and the costs' digest, which changes with the costs."""
    one = SimulatedWorkload.from_layout("lognormal", num_envs=64, nthread=4, seed=1)
    same = SimulatedWorkload.from_layout("lognormal", num_envs=64, nthread=4, seed=1)
    other = SimulatedWorkload.from_layout("lognormal", num_envs=64, nthread=4, seed=2)
    signature = one.signature()
    assert signature["kind"] == "simulated"
    assert signature["name"] == "lognormal"
    assert signature["dispatch_s"] == 5e-7
    assert isinstance(signature["costs_sha"], str) and len(signature["costs_sha"]) == 16
    assert same.signature() == signature
    assert other.signature()["costs_sha"] != signature["costs_sha"]


def test_costs_are_read_only() -> None:
    """The workload keeps its own read-only copy of the costs."""
    source = np.ones(8)
    workload = SimulatedWorkload(source, nthread=2)
    source[0] = 100.0
    assert workload.costs[0] == 1.0
    with pytest.raises(ValueError):
        workload.costs[0] = 5.0


@pytest.mark.parametrize(
    ("chunk", "shown"),
    [
        pytest.param(0, "0", id="zero"),
        pytest.param(-3, "-3", id="negative"),
        pytest.param(2.0, "2.0", id="float"),
        pytest.param(True, "True", id="bool"),
        pytest.param("8", "'8'", id="string"),
    ],
)
def test_bad_chunk_sizes_are_rejected_naming_the_value(chunk: object, shown: str) -> None:
    """run(), true_time() and regret() reject a chunk that is not an int >= 1 or None."""
    workload = SimulatedWorkload.from_layout("uniform", num_envs=16, nthread=2)
    for method in (workload.run, workload.true_time, workload.regret):
        with pytest.raises(InvalidArgumentError) as info:
            method(chunk)  # type: ignore[arg-type]
        assert shown in str(info.value)
    assert workload.calls == 0


@pytest.mark.parametrize(
    ("costs", "kwargs", "shown"),
    [
        pytest.param([], {}, "(0,)", id="empty"),
        pytest.param([[1.0, 2.0]], {}, "(1, 2)", id="2-d"),
        pytest.param([1.0, 0.0], {}, "0.0", id="zero-cost"),
        pytest.param([1.0, -2.0], {}, "-2.0", id="negative-cost"),
        pytest.param([1.0, math.nan], {}, "nan", id="nan-cost"),
        pytest.param([1.0, math.inf], {}, "inf", id="inf-cost"),
        pytest.param(["fast"], {}, "'fast'", id="text-cost"),
        pytest.param([1.0], {"nthread": 0}, "0", id="zero-threads"),
        pytest.param([1.0], {"nthread": False}, "False", id="bool-threads"),
        pytest.param([1.0], {"dispatch_s": -1e-6}, "-1e-06", id="negative-dispatch"),
        pytest.param([1.0], {"seed": -5}, "-5", id="negative-seed"),
        pytest.param([1.0], {"noise": 0.03}, "0.03", id="noise-not-a-Noise"),
    ],
)
def test_bad_workload_arguments_are_rejected_naming_the_value(
    costs: object, kwargs: dict[str, object], shown: str
) -> None:
    """Bad costs, nthread, dispatch_s, seed or noise raise InvalidArgumentError with the value."""
    arguments: dict[str, object] = {"nthread": 2, **kwargs}
    with pytest.raises(InvalidArgumentError) as info:
        SimulatedWorkload(costs, **arguments)  # type: ignore[arg-type]
    assert shown in str(info.value)


@pytest.mark.parametrize(
    ("kwargs", "shown"),
    [
        pytest.param({"sigma": -0.1}, "-0.1", id="negative-sigma"),
        pytest.param({"spike_prob": 1.5}, "1.5", id="probability-over-1"),
        pytest.param({"spike_scale": math.nan}, "nan", id="nan-scale"),
        pytest.param({"drift": 1.0}, "1.0", id="drift-of-1"),
        pytest.param({"drift_period": 0.0}, "0.0", id="zero-period"),
        pytest.param({"memory": 1.0}, "1.0", id="memory-of-1"),
        pytest.param({"memory": -0.2}, "-0.2", id="negative-memory"),
        pytest.param({"sigma": "3%"}, "'3%'", id="text-sigma"),
        pytest.param({"sigma": True}, "True", id="bool-sigma"),
    ],
)
def test_bad_noise_is_rejected_naming_the_value(kwargs: dict[str, object], shown: str) -> None:
    """Noise validates its fields at construction and names the bad value."""
    with pytest.raises(InvalidArgumentError) as info:
        Noise(**kwargs)  # type: ignore[arg-type]
    assert shown in str(info.value)


def test_compare_times_each_chunk_on_a_layout() -> None:
    """compare() maps each chunk size (None = native) to its exact seconds on the layout."""
    table = compare("blocked", num_envs=256, nthread=2, chunks=[8, 128, None])
    workload = SimulatedWorkload.from_layout("blocked", num_envs=256, nthread=2)
    assert table == {c: workload.true_time(c) for c in (8, 128, None)}


@pytest.mark.parametrize(
    ("n", "t", "field"),
    [(0, 2, "num_envs"), (8, 0, "nthread"), (-1, 2, "num_envs"), ("8", 2, "num_envs")],
)
def test_pool_arithmetic_rejects_what_no_pool_has(n: object, t: object, field: str) -> None:
    """native_chunk and upper_chunk raise on a count below 1 or not an integer, naming it."""
    for f in (native_chunk, upper_chunk):
        with pytest.raises(InvalidArgumentError, match=field):
            f(n, t)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "build",
    [
        pytest.param(lambda: SimulatedWorkload("x" * 100_000, nthread=2), id="costs"),
        pytest.param(
            lambda: SimulatedWorkload([1e-3] * 8, nthread=2, seed=untyped([1] * 100_000)), id="seed"
        ),
        pytest.param(lambda: env_costs("blocked", 64, position="x" * 100_000), id="position"),
    ],
)
def test_a_huge_bad_argument_is_shown_shortened_in_its_message(build: Any) -> None:
    """A bad value of any size gets a message of a few lines, not its whole repr."""
    with pytest.raises(InvalidArgumentError) as info:
        build()
    assert len(str(info.value)) < 300


# ------------------------------------------------------------- queue, noise and seeds


def test_takes_from_the_queue_are_serialized() -> None:
    """queue_s 0.5 on 2 workers, four 1 s envs in chunks of 1: takes end at 0.5, 1, 2, 2.5."""
    workload = SimulatedWorkload([1.0] * 4, nthread=2, dispatch_s=0.0, queue_s=0.5)
    # the fourth take waits for the second worker (free at 2) and ends at 2.5; runs to 3.5
    assert workload.true_time(1) == 3.5


def test_compare_models_the_queues_lock_as_the_workload_does() -> None:
    """compare() with queue_s gives what a workload of that layout and queue_s gives."""
    timed = compare("uniform", num_envs=256, nthread=8, chunks=[1, 4], queue_s=1e-4)
    workload = SimulatedWorkload.from_layout("uniform", num_envs=256, nthread=8, queue_s=1e-4)
    assert timed == {1: workload.true_time(1), 4: workload.true_time(4)}
    assert timed[1] > compare("uniform", num_envs=256, nthread=8, chunks=[1])[1]


def test_the_signature_names_queue_s_only_when_it_is_set() -> None:
    """A workload without a queue cost keeps the signature (and cache key) it had before queue_s."""
    costs = env_costs("uniform", 16)
    assert "queue_s" not in SimulatedWorkload(costs, nthread=2).signature()
    assert SimulatedWorkload(costs, nthread=2, queue_s=1e-6).signature()["queue_s"] == 1e-6


def test_noise_with_drift_alone_is_not_silent() -> None:
    """silent means every call reports the model's time: drift alone breaks it."""
    assert Noise().silent
    assert not Noise(drift=0.1).silent
    assert not Noise(sigma=0.01).silent and not Noise(spike_prob=0.1).silent


def test_reset_replays_noise_with_memory() -> None:
    """reset() forgets the last call's jitter too, so correlated noise replays from the start."""
    workload = SimulatedWorkload.from_layout(
        "uniform", num_envs=64, nthread=4, noise=Noise(sigma=0.1, memory=0.5)
    )
    first = [workload.run(4) for _ in range(5)]
    workload.reset()
    assert [workload.run(4) for _ in range(5)] == first


def test_oracle_counts_a_rounding_error_as_a_tie() -> None:
    """49 uniform envs on 4 threads: chunk 12 is faster than 1 only by float rounding; 1 wins."""
    workload = SimulatedWorkload.from_layout(
        "uniform", num_envs=49, nthread=4, dispatch_s=0.0, mean_s=0.1
    )
    assert workload.true_time(12) < workload.true_time(1)  # by a rounding error alone
    assert workload.true_time(1) == pytest.approx(workload.true_time(12), rel=1e-12)
    assert workload.oracle()[0] == 1


def test_a_bad_cost_is_named_with_its_env() -> None:
    """The error names the first bad cost's env index (counted from 0)."""
    with pytest.raises(InvalidArgumentError, match=r"got -2\.0 at env 2$"):
        SimulatedWorkload([1.0, 1.0, -2.0, 0.0], nthread=2)


# ------------------------------------------------------------------- layouts' details


def test_values_at_the_top_of_their_range_are_taken() -> None:
    """Upper bounds are inclusive: spike_prob 1, drift and memory 0.99, heavy_fraction 1."""
    Noise(spike_prob=1.0, drift=0.99, memory=0.99)
    assert len(set(env_costs("blocked", 8, heavy_fraction=1.0).tolist())) == 1


@pytest.mark.parametrize(
    ("call", "message"),
    [
        pytest.param(
            lambda: env_costs("uniform", 8, mean_s=0.0),
            "mean_s must be a finite number > 0.0, got 0.0",
            id="open-bound",
        ),
        pytest.param(
            lambda: Noise(sigma=-0.1),
            "Noise.sigma must be a finite number >= 0.0, got -0.1",
            id="closed-bound",
        ),
        pytest.param(
            lambda: env_costs("lognormal", 8, sigma=-1.0),
            "lognormal sigma must be a finite number >= 0.0, got -1.0",
            id="layout-named",
        ),
        pytest.param(
            lambda: env_costs("uniform", 8, sigma=0.5),
            "layout 'uniform' has no shape parameter 'sigma'; its parameters are: none",
            id="no-parameters",
        ),
        pytest.param(
            lambda: env_costs(["uniform"], 8),  # type: ignore[arg-type]
            "unknown layout ['uniform']",
            id="unhashable-layout",
        ),
    ],
)
def test_range_errors_say_the_rule_and_the_name(call: Any, message: str) -> None:
    """Errors say whether the bound is open or closed, and which layout's parameter broke it."""
    with pytest.raises(InvalidArgumentError) as info:
        call()
    assert str(info.value).startswith(message)


def heavy(costs: np.ndarray[Any, Any]) -> int:
    """How many envs cost more than the lightest."""
    return int((costs > costs.min() * 1.5).sum())


def test_heavy_counts_round_to_the_nearest_env() -> None:
    """0.3 of 16 envs is 5 heavy (4.8 rounded); blocks of 0.25 * 20 / 3 are 2 envs each."""
    assert heavy(env_costs("blocked", 16, heavy_fraction=0.3)) == 5
    assert heavy(env_costs("blocks", 20, n_blocks=3, heavy_fraction=0.25)) == 6


def test_blocks_may_fill_the_whole_batch() -> None:
    """Four blocks of 2 envs in 8 envs fit exactly: every env is heavy, all cost the same."""
    assert len(set(env_costs("blocks", 8, n_blocks=4, heavy_fraction=1.0).tolist())) == 1


def test_blocks_never_overlap_and_reach_both_ends() -> None:
    """Every seed places all the heavy envs; over seeds, a block starts at env 0 and ends last."""
    first, last = set(), set()
    for seed in range(40):
        costs = env_costs("blocks", 24, n_blocks=2, heavy_fraction=0.5, seed=seed)
        assert heavy(costs) == 12
        first.add(bool(costs[0] > costs.min()))
        last.add(bool(costs[-1] > costs.min()))
    assert first == {True, False} and last == {True, False}
