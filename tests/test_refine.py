"""Refinement proposals: halfway to the measured neighbours, teeth first, the model's pick first."""

from __future__ import annotations

import pytest

from chunktune import _refine
from chunktune._refine import proposals
from chunktune._schedule import half_teeth, schedules, teeth, uniform_makespan

N, T = 32768, 96
SIZES = schedules(N, T)
TEETH = teeth(N, T)


def test_each_contender_proposes_halfway_to_its_measured_neighbours() -> None:
    """Around a contender, the proposals are the teeth halfway to the nearest measured sizes."""
    measured = [14, 86, 342]
    got = proposals(N, T, SIZES, TEETH, measured=measured, top=[86], estimates=None)
    # 14..86: sqrt(14 * 86) = 34.7, the tooth 35 (k = 10); 86..342: the tooth 171 (k = 2)
    assert got == [35, 171]


def test_several_contenders_are_refined_at_once_without_repeats() -> None:
    """Two contenders each add their own halfway points; a point two of them share comes once."""
    measured = [14, 49, 171, 342]
    got = proposals(N, T, SIZES, TEETH, measured=measured, top=[49, 171], estimates=None)
    assert got == [27, 86, 241]  # 49 -> 27 and 86; 171 -> 86 (again) and 241
    assert len(got) == len(set(got))


def test_a_contender_at_the_end_of_the_range_looks_toward_the_end() -> None:
    """With no measured size below it, the contender halves toward the smallest schedule."""
    got = proposals(N, T, SIZES, TEETH, measured=[8, 64], top=[8], estimates=None)
    assert got == [3, 23]  # sqrt(1 * 8) = 2.8 toward the end; the tooth 23 (k = 15) toward 64


def test_a_contender_at_the_top_of_the_range_looks_toward_the_largest_schedule() -> None:
    """With no measured size above it, the contender halves toward ceil(N/T) itself."""
    got = proposals(N, T, SIZES, TEETH, measured=[86, 171], top=[171], estimates=None)
    assert SIZES[-1] == 342
    assert got == [114, 241]  # the tooth 114 (k = 3) toward 86; sqrt(171 * 342) = 241.8


def test_measured_sizes_are_never_proposed() -> None:
    """Neighbours already measured leave nothing between them to propose."""
    measured = list(range(40, 60))
    got = proposals(N, T, SIZES, TEETH, measured=measured, top=[50], estimates=None)
    assert not set(got) & set(measured)
    assert proposals(N, T, [], set(), measured=[1], top=[1], estimates=None) == []


def test_the_models_pick_comes_first() -> None:
    """Given estimates with the even-env shape, the model's best (a low tooth) leads the list."""
    n, t = 4096, 16
    sizes = schedules(n, t)

    def cost(c: int) -> float:
        span, q = uniform_makespan(n, t, c)
        return 1e-3 * span + 2e-6 * q

    estimates = {c: cost(c) for c in (3, 17, 40, 100, 128)}
    got = proposals(n, t, sizes, teeth(n, t), measured=estimates, top=[17], estimates=estimates)
    assert got[0] == min(sizes, key=cost) == 256  # one chunk per thread, never measured
    without = proposals(n, t, sizes, teeth(n, t), measured=estimates, top=[17], estimates=None)
    assert got[1:] == [c for c in without if c != got[0]]


def test_a_tie_in_the_model_is_broken_toward_the_smaller_schedule(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Two schedules the model predicts alike: the smaller is its pick, whatever the dict order."""
    monkeypatch.setattr(_refine, "fit_uniform_model", lambda *args: {241: 1.0, 114: 1.0, 171: 2.0})
    got = proposals(N, T, SIZES, TEETH, measured=[14, 86], top=[86], estimates={86: 1.0})
    assert got == [114, 35, 171]  # then the halfway points around 86, as without a model


def test_a_pool_with_no_schedule_to_refine_into_proposes_nothing_even_with_a_model() -> None:
    """No sizes: no proposals, though the estimates fit a model (it predicts no size to pick)."""
    n, t = 4096, 16
    estimates = {c: 1e-3 * uniform_makespan(n, t, c)[0] + 2e-6 * uniform_makespan(n, t, c)[1]
                 for c in (3, 17, 40, 100, 128)}  # fmt: skip
    got = proposals(n, t, [], set(), measured=estimates, top=[17], estimates=estimates)
    assert got == []


def test_measured_sizes_given_once_as_an_iterator_count_as_neighbours() -> None:
    """``measured`` read once (a generator) gives the same proposals as the list itself."""
    measured = [14, 86, 342]
    once = proposals(N, T, SIZES, TEETH, measured=iter(measured), top=[86], estimates=None)
    assert once == proposals(N, T, SIZES, TEETH, measured=measured, top=[86], estimates=None)
    assert once == [35, 171]


def test_where_no_tooth_lies_between_the_half_tooth_is_proposed() -> None:
    """114 and 171 are adjacent teeth: halfway between is the half-tooth 137 (k = 2.5), not 140."""
    # above 171 no tooth lies before the list's end 342 (k = 1) either: the half-tooth 228
    got = proposals(
        N, T, SIZES, TEETH, halves=half_teeth(N, T), measured=[69, 114, 171], top=[171],
        estimates=None,
    )  # fmt: skip
    assert got == [137, 228]
    # a tooth between still comes first: 69..171 holds 86 and 114 (sqrt(69 * 171) = 108.6)
    got = proposals(
        N, T, SIZES, TEETH, halves=half_teeth(N, T), measured=[69, 171], top=[171],
        estimates=None,
    )  # fmt: skip
    assert got == [114, 228]
