"""Candidate strategies: which chunk sizes each one proposes."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from _untyped import untyped

from chunktune import (
    BalancedCandidates,
    ConfigError,
    ExhaustiveCandidates,
    ExplicitCandidates,
    GeometricCandidates,
    Policy,
    SeedCandidates,
    dump_policy,
    native_chunk,
    upper_chunk,
)
from chunktune._candidates import (
    CandidateStrategy,
    _spread_over_range,
    candidate_list,
    largest_chunk,
    thin_log,
)

# Worked out by hand from the older tuner's documented grid: a band of
# round(heur * {0.5, 1, 1.5, 2, 3}) (each at least 1) around heur = round(N / 10T) (at
# least 1), a x1.8 geometric sweep from 1, ceil(N/T), and past 16 sizes the 15 smallest
# plus the largest.
SEED_GRIDS = [
    pytest.param(256, 2, [1, 2, 4, 6, 7, 13, 20, 23, 26, 39, 41, 74, 128], id="256x2"),
    pytest.param(1000, 8, [1, 2, 4, 6, 7, 12, 13, 18, 23, 24, 36, 41, 74, 125], id="1000x8"),
    pytest.param(100, 7, [1, 2, 3, 4, 7, 13, 15], id="100x7"),
    pytest.param(3, 2, [1, 2], id="3x2"),
    pytest.param(2, 2, [1], id="2x2-one-chunk-a-thread"),
    pytest.param(9, 2, [1, 2, 3, 4, 5], id="9x2-heur-rounds-to-0-taken-as-1"),
    pytest.param(20, 1, [1, 2, 3, 4, 6, 7, 13, 20], id="20x1-upper-is-the-whole-batch"),
    pytest.param(
        100000,
        4,
        [1, 2, 4, 7, 13, 23, 41, 74, 133, 239, 430, 774, 1250, 1393, 2500, 25000],
        id="100000x4-capped",
    ),
    pytest.param(
        65536,
        2,
        [1, 2, 4, 7, 13, 23, 41, 74, 133, 239, 430, 774, 1393, 1638, 2507, 32768],
        id="65536x2-capped",
    ),
]


@pytest.mark.parametrize(("n", "t", "expected"), SEED_GRIDS)
def test_seed_grid_matches_the_older_tuner(n: int, t: int, expected: list[int]) -> None:
    """The seed strategy proposes exactly the older tuner's filtered grid."""
    assert SeedCandidates().propose(n, t) == expected


CASES = [(256, 2), (1000, 8), (32768, 128), (4096, 16), (300, 7), (17, 16), (8, 8)]


@pytest.mark.parametrize(("n", "t"), CASES)
def test_balanced_sizes_cut_whole_rounds(n: int, t: int) -> None:
    """Every balanced size is ceil(N/(k*T)) for some k, so at most k chunks go to each worker."""
    sizes = BalancedCandidates().propose(n, t)
    upper = upper_chunk(n, t)
    for c in sizes:
        assert any(c == min(upper, math.ceil(n / (k * t))) for k in range(1, n + 1))


@pytest.mark.parametrize(("n", "t"), CASES)
def test_balanced_includes_a_size_the_seed_grid_misses(n: int, t: int) -> None:
    """Balanced sizes are not a subset of the seed grid when there is room to differ."""
    balanced = set(BalancedCandidates().propose(n, t))
    if upper_chunk(n, t) >= 64:
        assert balanced - set(SeedCandidates().propose(n, t))


@pytest.mark.parametrize(
    "strategy",
    [
        pytest.param(BalancedCandidates(), id="balanced"),
        pytest.param(GeometricCandidates(), id="geometric"),
        pytest.param(ExhaustiveCandidates(), id="exhaustive"),
        pytest.param(ExplicitCandidates(sizes=(1, 3, 7, 11, 100_000)), id="explicit"),
        pytest.param(SeedCandidates(), id="seed"),
    ],
)
@pytest.mark.parametrize(("n", "t"), CASES)
def test_every_strategy_clamps_and_keeps_native(strategy: object, n: int, t: int) -> None:
    """Sizes lie in [1, ceil(N/T)], are sorted and unique, and the list starts with native."""
    listed = candidate_list(strategy, n, t)  # type: ignore[arg-type]
    assert listed[0] is None
    sizes = [c for c in listed[1:] if c is not None]
    assert sizes == sorted(set(sizes))
    assert all(1 <= c <= upper_chunk(n, t) for c in sizes)


@pytest.mark.parametrize(
    "strategy",
    [
        pytest.param(BalancedCandidates(), id="balanced"),
        pytest.param(GeometricCandidates(), id="geometric"),
        pytest.param(ExhaustiveCandidates(), id="exhaustive"),
    ],
)
@pytest.mark.parametrize(
    ("n", "t"),
    [
        pytest.param(1000, 8, id="1000x8"),
        pytest.param(90, 2, id="90x2-native-is-a-balanced-size"),  # ceil(90 / (12 * 2)) == 4
    ],
)
def test_non_seed_strategies_do_not_measure_native_twice(strategy: object, n: int, t: int) -> None:
    """The integer equal to the native chunk is left to the None entry."""
    assert native_chunk(n, t) not in strategy.propose(n, t)  # type: ignore[attr-defined]


def test_exhaustive_lists_every_size_when_few() -> None:
    """Below the cap exhaustive is every size but native."""
    assert ExhaustiveCandidates().propose(40, 2) == [c for c in range(1, 21) if c != 2]


def test_exhaustive_thins_in_log_scale_keeping_the_ends() -> None:
    """Above the cap exhaustive keeps exactly max_candidates sizes, 1 and ceil(N/T) among them."""
    sizes = ExhaustiveCandidates(max_candidates=10).propose(32768, 8)
    assert len(sizes) == 10
    assert sizes[0] == 1 and sizes[-1] == 4096


def test_geometric_follows_its_ratio() -> None:
    """Geometric sizes grow by the ratio and end at ceil(N/T)."""
    assert GeometricCandidates(ratio=2.0).propose(1024, 4) == [1, 2, 4, 8, 16, 32, 64, 128, 256]


def test_explicit_clamps_oversized_entries() -> None:
    """Explicit sizes above ceil(N/T) are measured as ceil(N/T)."""
    assert ExplicitCandidates(sizes=(3, 7, 500)).propose(256, 2) == [3, 7, 128]


@pytest.mark.parametrize(
    "sizes",
    [
        pytest.param([0, 3], id="zero"),
        pytest.param([2.5], id="float"),
        pytest.param([True], id="bool"),
        pytest.param([], id="empty"),
    ],
)
def test_explicit_rejects_bad_sizes(sizes: list[object]) -> None:
    """A size below 1, a non-integer or an empty list cannot make an explicit strategy."""
    with pytest.raises(ValueError, match="sizes"):
        ExplicitCandidates(sizes=untyped(sizes))


def test_explicit_sizes_of_numpy_integers_are_plain_ints() -> None:
    """Explicit sizes given as numpy integers are stored as ints: the policy hashes and dumps."""
    # numpy's integers are no int to a type checker (as for every int field): untyped here
    strategy = ExplicitCandidates(sizes=untyped([np.int64(3), np.int32(7)]))
    assert strategy.sizes == (3, 7) and all(type(s) is int for s in strategy.sizes)
    policy = Policy(candidates=strategy)
    assert policy.fingerprint() == Policy(candidates=ExplicitCandidates(sizes=(3, 7))).fingerprint()
    assert "sizes = [" in dump_policy(policy)


def test_balanced_parameters_shape_the_list() -> None:
    """min_chunks_per_thread sets the largest size; a larger k_ratio proposes fewer sizes."""
    n, t = 4096, 8
    assert max(BalancedCandidates(min_chunks_per_thread=4).propose(n, t)) == math.ceil(n / (4 * t))
    assert max(BalancedCandidates().propose(n, t)) == math.ceil(n / (2 * t))  # the default
    assert max(BalancedCandidates(min_chunks_per_thread=1).propose(n, t)) == math.ceil(n / t)
    dense = BalancedCandidates(k_ratio=1.2, max_candidates=100).propose(n, t)
    sparse = BalancedCandidates(k_ratio=3.0, max_candidates=100).propose(n, t)
    assert len(sparse) < len(dense)


def test_max_candidates_caps_every_capped_strategy() -> None:
    """max_candidates bounds the list of balanced, geometric and exhaustive alike."""
    for strategy in (
        BalancedCandidates(max_candidates=4),
        GeometricCandidates(ratio=1.1, max_candidates=4),
        ExhaustiveCandidates(max_candidates=4),
    ):
        assert len(strategy.propose(32768, 8)) == 4


def test_geometric_ratio_changes_the_grid() -> None:
    """A ratio of 4 proposes every other size of a ratio of 2."""
    assert GeometricCandidates(ratio=4.0).propose(1024, 4) == [1, 4, 16, 64, 256]


@pytest.mark.parametrize(
    ("upper", "cap", "skip"),
    [
        (100, 10, 3),
        (5000, 64, 1),
        (777, 16, 777),
        # 650 = 25 * 26: the middle target lies as near 25 as 26, and the smaller is taken
        (650, 3, 216),
        # a target at e (2.72) that rounds to the skipped 3: the 2 below is nearer than 4
        (20, 4, 3),
        # the middle target lies exactly on the skipped 3: the 4 above is nearer than 2
        (9, 3, 3),
    ],
)
def test_a_range_is_spread_as_thin_log_spreads_its_list(upper: int, cap: int, skip: int) -> None:
    """The listless spread of 1..upper picks exactly what thin_log picks from the list."""
    every = [c for c in range(1, upper + 1) if c != skip]
    assert _spread_over_range(upper, cap, skip=skip) == thin_log(every, cap)


def test_a_far_last_size_taken_early_leaves_the_last_target_the_next_size_below() -> None:
    """thin_log keeps cap sizes though an earlier target took the far last one: 12 is left out."""
    sizes = [*range(1, 31), 1000]
    assert thin_log(sizes, 30) == [s for s in sizes if s != 12]


def test_balanced_uncapped_lists_each_k_of_its_rounded_ratio_down_to_size_one() -> None:
    """256 envs, 2 threads: k = 2, 3, 4, 5, 7, 9, 12, 16, 22, 30, 40, 54, 73, 99, 134."""
    # each next k is round(k * 1.35), at least k + 1; sizes ceil(128 / k), native 12 left out
    sizes = BalancedCandidates(max_candidates=4096).propose(256, 2)
    assert sizes == [1, 2, 3, 4, 5, 6, 8, 11, 15, 19, 26, 32, 43, 64]


def test_geometric_rounds_each_power_of_a_fractional_ratio() -> None:
    """A ratio of 1.5 takes each step's size rounded (4.5 to 4, 6.75 to 7), then ceil(N/T)."""
    sizes = GeometricCandidates(ratio=1.5, max_candidates=4096).propose(256, 2)
    assert sizes == [1, 2, 3, 4, 7, 10, 15, 23, 34, 51, 77, 115, 128]


def test_exhaustive_over_the_largest_batch_lists_no_range() -> None:
    """2**31 - 1 envs on one thread: 64 sizes in range, from the ends, without a huge list."""
    sizes = ExhaustiveCandidates().propose(2**31 - 1, 1)
    assert len(sizes) == 64 and sizes[0] == 1 and sizes[-1] == 2**31 - 1
    assert native_chunk(2**31 - 1, 1) not in sizes


@pytest.mark.parametrize(("n", "t"), [(1000, 8), (4096, 16), (90, 2), (7, 4)])
def test_balanced_refines_no_higher_than_its_own_largest_size(n: int, t: int) -> None:
    """The largest size a balanced sweep may reach is ceil(N / (2T)): its own largest proposal."""
    b = BalancedCandidates()
    largest = largest_chunk(b, n, t)
    assert largest == min(upper_chunk(n, t), max(1, math.ceil(n / (2 * t))))
    assert largest == max([*b.propose(n, t), native_chunk(n, t)])


@pytest.mark.parametrize(
    "strategy",
    [SeedCandidates, BalancedCandidates, GeometricCandidates, ExhaustiveCandidates],
    ids=lambda cls: cls.strategy,
)
def test_a_cap_of_one_candidate_is_refused(strategy: type[CandidateStrategy]) -> None:
    """max_candidates = 1 is refused by every capped strategy: it leaves nothing to compare."""
    with pytest.raises(
        ConfigError, match=r"1 is not valid for max_candidates; expected an integer in \[2, "
    ):
        strategy(max_candidates=1)  # type: ignore[call-arg]


@pytest.mark.parametrize("nudge", [-1.0, 1.0])
def test_which_of_two_sizes_as_near_a_target_is_kept_does_not_turn_on_numpys_log(
    monkeypatch: pytest.MonkeyPatch, nudge: float
) -> None:
    """A near tie in log distance (136 * 147 = 4 * 4998) keeps what it kept, numpy's log nudged."""
    sizes = [4, 136, 147, 4998]
    kept = thin_log(sizes, 3)
    real_log = np.log

    def nudged(x: Any) -> Any:
        values = real_log(x)
        odd = np.asarray(x) % 2 == 1
        return np.where(odd, np.nextafter(values, nudge * np.inf), values)

    monkeypatch.setattr(np, "log", nudged)
    assert thin_log(sizes, 3) == kept


@pytest.mark.parametrize(
    ("strategy", "cap"),
    [
        pytest.param(BalancedCandidates(k_ratio=1.01), 10, id="balanced"),
        pytest.param(SeedCandidates(), 16, id="seed"),
        pytest.param(GeometricCandidates(ratio=1.1), 16, id="geometric"),
        pytest.param(ExhaustiveCandidates(), 64, id="exhaustive"),
    ],
)
def test_each_strategy_s_default_cap_is_the_one_the_readme_gives(
    strategy: CandidateStrategy, cap: int
) -> None:
    """Without max_candidates a strategy keeps 10 (balanced), 16 (seed, geometric) or 64 sizes."""
    assert len(strategy.propose(100_000, 1)) == cap
