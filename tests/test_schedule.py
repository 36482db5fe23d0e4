"""Chunk-count space: distinct schedules, the sawtooth's teeth, halving between them, the model."""

from __future__ import annotations

import math

import pytest

from chunktune._schedule import (
    between,
    chunk_count,
    fit_uniform_model,
    half_teeth,
    nearest_index,
    representative,
    schedules,
    teeth,
    uniform_makespan,
)


@pytest.mark.parametrize(
    ("n", "t"),
    [pytest.param(256, 2, id="256x2"), pytest.param(1000, 24, id="1000x24"),
     pytest.param(32768, 96, id="32768x96"), pytest.param(7, 8, id="fewer-envs-than-threads"),
     pytest.param(10, 1, id="one-thread")],
)  # fmt: skip
def test_schedules_are_exactly_the_distinct_chunk_counts(n: int, t: int) -> None:
    """schedules() lists ceil(N/m) for every chunk count m >= T, each once, ascending."""
    upper = math.ceil(n / t)
    brute = sorted({math.ceil(n / m) for m in range(1, n + 1)} & set(range(1, upper + 1)))
    assert schedules(n, t) == brute
    for c in range(1, upper + 1):
        assert chunk_count(n, representative(n, c)) == chunk_count(n, c)
        assert representative(n, c) <= c


def test_teeth_are_the_sizes_whose_chunk_counts_fill_whole_waves() -> None:
    """Every tooth ceil(N/(kT)) cuts at most k*T chunks, and one size smaller cuts more."""
    n, t = 32768, 96
    for c in teeth(n, t):
        k = math.ceil(chunk_count(n, c) / t)
        assert c == math.ceil(n / (k * t))
    assert {57, 69, 86, 114, 171, 342} <= teeth(n, t)


@pytest.mark.parametrize("t", [1, 2, 3, 7, 16, 96])
def test_teeth_are_every_size_of_a_whole_number_of_waves(t: int) -> None:
    """teeth(N, T) is exactly {ceil(N/(kT)) for k = 1..ceil(N/T)}, small N and large."""
    for n in [*range(1, 200), 1000, 4099, 32768, 65537, 123457]:
        brute = {math.ceil(n / (k * t)) for k in range(1, math.ceil(n / t) + 1)}
        assert teeth(n, t) == brute, (n, t)


def test_teeth_of_the_largest_batch_take_square_root_steps() -> None:
    """The largest batch a pool can have (2**31 - 1 envs, one thread) has its teeth at once."""
    found = teeth(2**31 - 1, 1)
    assert 1 in found and 2**31 - 1 in found
    assert len(found) <= 2 * math.isqrt(2**31 - 1) + 2  # ceil(N/k) takes at most 2 sqrt(N) values


def test_between_halves_in_log_scale_and_prefers_teeth() -> None:
    """Halfway between two sizes is a tooth when one lies between, else the log midpoint."""
    sizes = schedules(32768, 96)
    tee = teeth(32768, 96)
    i, j = sizes.index(14), sizes.index(171)
    assert between(sizes, tee, i, j) == 49  # sqrt(14 * 171) = 49, a tooth (k = 7)
    assert between(sizes, tee, sizes.index(86), sizes.index(114)) == 99  # no tooth between
    assert between(sizes, tee, sizes.index(86), sizes.index(87)) is None
    assert between(sizes, set(), 0, 3) == 2


@pytest.mark.parametrize(
    ("n", "t"),
    [pytest.param(256, 2, id="256x2"), pytest.param(1000, 24, id="1000x24"),
     pytest.param(32768, 96, id="32768x96"), pytest.param(7, 8, id="fewer-envs-than-threads"),
     pytest.param(10, 1, id="one-thread"), pytest.param(1, 1, id="one-env"),
     pytest.param(1000, 5, id="odd-threads"), pytest.param(32768, 3, id="three-threads")],
)  # fmt: skip
def test_half_teeth_are_exactly_the_half_multiples(n: int, t: int) -> None:
    """half_teeth(N, T) is ceil(N/m) for the counts m = kT + T/2 (both sides with odd T), k >= 1."""
    counts = {k * t + r for k in range(1, n + 2) for r in {t // 2, (t + 1) // 2}}
    assert half_teeth(n, t) == {math.ceil(n / m) for m in counts}
    if t % 2 == 0:  # the same as ceil(N/((k + 1/2)T))
        assert half_teeth(n, t) == {math.ceil(2 * n / ((2 * k + 1) * t)) for k in range(1, n + 2)}
    assert half_teeth(n, t) <= set(schedules(n, t)) | {1}


def test_half_teeth_of_the_largest_batch_come_at_once() -> None:
    """The largest batch (2**31 - 1 envs, one thread) has its half-teeth without listing every k."""
    for t, first in (
        (1, 2**31 - 1),
        (2, math.ceil((2**31 - 1) / 3)),
        (3, math.ceil((2**31 - 1) / 4)),
    ):
        found = half_teeth(2**31 - 1, t)
        assert 1 in found and first in found and max(found) == first
        assert len(found) <= 4 * math.isqrt(2**31 - 1) + 4


def test_between_prefers_half_teeth_only_where_no_tooth_lies_between() -> None:
    """Teeth first; with none between, a half-tooth; with neither, the log midpoint."""
    sizes = schedules(32768, 96)
    tee, half = teeth(32768, 96), half_teeth(32768, 96)
    assert 137 in half and 140 not in half
    assert between(sizes, tee, sizes.index(114), sizes.index(171), then=half) == 137
    assert between(sizes, tee, sizes.index(114), sizes.index(171)) == 140
    assert between(sizes, tee, sizes.index(14), sizes.index(171), then=half) == 49  # a tooth
    # 86..114: the half-tooth 98 (k = 3.5) rather than the log midpoint 99
    assert between(sizes, tee, sizes.index(86), sizes.index(114), then=half) == 98
    assert between(sizes, tee, sizes.index(137), sizes.index(140), then=half) == 138


def test_with_odd_threads_a_half_tooth_is_a_schedule_the_search_prefers() -> None:
    """With 15 threads the counts 22 and 23 (1.5 waves) give half-teeth that between() prefers."""
    sizes = schedules(1000, 15)
    tee, half = teeth(1000, 15), half_teeth(1000, 15)
    assert {46, 44} <= half  # ceil(1000/22), ceil(1000/23); ceil(1000/22.5) = 45 is no schedule
    # 67 (15 chunks, one wave) and 34 (30 chunks, two) are adjacent teeth; the log midpoint is 48
    assert between(sizes, tee, sizes.index(34), sizes.index(67)) == 48
    assert between(sizes, tee, sizes.index(34), sizes.index(67), then=half) == 46


def test_between_two_sizes_one_apart_in_the_list_is_the_one_between() -> None:
    """Two schedules with exactly one between them: between() names it, preferred or not."""
    sizes = schedules(4096, 16)
    assert between(sizes, set(), sizes.index(4), sizes.index(6)) == 5


def test_between_breaks_an_exact_log_tie_toward_the_smaller_size() -> None:
    """Two preferred sizes exactly as far from the log midpoint (6 * 24 = 4 * 36): the smaller."""
    sizes = schedules(4096, 16)
    assert between(sizes, {6, 24}, sizes.index(4), sizes.index(36)) == 6
    assert between(sizes, {6, 24}, sizes.index(36), sizes.index(4)) == 6


def test_uniform_makespan_counts_waves_and_the_short_last_chunk() -> None:
    """With even envs a size costs its busiest worker's chunks; a lone short chunk counts short."""
    assert uniform_makespan(16, 2, 4) == (8.0, 2)  # 4 chunks, 2 per worker
    assert uniform_makespan(16, 2, 5) == (10.0, 2)  # 5,5,5,1: worker 0 takes 5 and 5
    assert uniform_makespan(14, 3, 4) == (6.0, 2)  # 4,4,4,2: the lone second one is short
    assert uniform_makespan(16, 2, 6) == (10.0, 2)  # 6,6,4: worker 0 takes 6 and 4


def test_model_fit_proposes_a_tooth_on_even_envs() -> None:
    """Fit to a few exact even-env times, the model's best is one of the lowest teeth."""
    n, t = 4096, 16
    sizes = schedules(n, t)
    truth = {c: 1e-3 * uniform_makespan(n, t, c)[0] + 2e-6 * uniform_makespan(n, t, c)[1]
             for c in sizes}  # fmt: skip
    measured = {c: truth[c] for c in (3, 17, 40, 100, 256)}
    model = fit_uniform_model(n, t, measured, sizes)
    assert model is not None
    best = min(model, key=lambda c: model[c])
    assert truth[best] == pytest.approx(min(truth.values()), rel=1e-6)
    assert fit_uniform_model(n, t, {3: 1.0, 17: 1.0}, sizes) is None  # too few points


def _exact(work_s: float, chunk_s: float) -> tuple[dict[int, float], list[int]]:
    """Times of 4096 even envs on 16 threads: ``work_s`` an env-cost, ``chunk_s`` a chunk, +1 s."""
    n, t = 4096, 16
    sizes = schedules(n, t)
    return {c: 1.0 + work_s * uniform_makespan(n, t, c)[0] + chunk_s * uniform_makespan(n, t, c)[1]
            for c in sizes}, sizes  # fmt: skip


def test_an_exact_fit_predicts_every_size_s_time() -> None:
    """Five exact points of the model: it predicts each size's time, work and chunks apart."""
    truth, sizes = _exact(1e-3, 2e-2)
    model = fit_uniform_model(4096, 16, {c: truth[c] for c in (3, 17, 40, 100, 256)}, sizes)
    assert model is not None and model == pytest.approx(truth, rel=1e-9)


def test_a_fit_whose_time_falls_with_the_work_is_no_model_and_a_cheap_chunk_is() -> None:
    """Times falling as the busiest worker's work grows fit no model; a negative chunk cost does."""
    points = (3, 17, 40, 100, 256)
    falling, sizes = _exact(-1e-3, 2e-2)
    assert fit_uniform_model(4096, 16, {c: falling[c] for c in points}, sizes) is None
    cheap, _ = _exact(1e-3, -2e-4)
    assert fit_uniform_model(4096, 16, {c: cheap[c] for c in points}, sizes) is not None


def test_three_points_fit_no_model() -> None:
    """Three measured sizes fit a three-term model exactly, which says nothing: no model."""
    n, t = 4096, 16
    sizes = schedules(n, t)
    times = {c: 1e-3 * uniform_makespan(n, t, c)[0] for c in (3, 17, 100)}
    assert fit_uniform_model(n, t, times, sizes) is None
    assert fit_uniform_model(n, t, {**times, 40: 1e-3 * uniform_makespan(n, t, 40)[0]}, sizes)


def test_sizes_of_one_makespan_fit_no_model() -> None:
    """Sizes of one makespan (a rank-2 fit: work and constant are one column) fit no model."""
    sizes = [1, 2, 4, 8]
    assert {uniform_makespan(16, 2, c)[0] for c in sizes} == {8.0}
    times = {c: 1.0 + 0.1 * uniform_makespan(16, 2, c)[1] for c in sizes}
    assert fit_uniform_model(16, 2, times, sizes) is None


def test_nearest_index_of_the_largest_schedule_and_beyond_is_the_last() -> None:
    """The largest schedule, or a size past it (native above ceil(N/T)), runs as the last index."""
    sizes = schedules(1000, 8)
    last = len(sizes) - 1
    assert nearest_index(sizes, sizes[-1]) == nearest_index(sizes, 10 * sizes[-1]) == last
    assert nearest_index(sizes, sizes[-2]) == last - 1
