"""Paired evidence: per-round ratios to native, comparisons on common rounds only."""

from __future__ import annotations

import math

import pytest

from chunktune._evidence import Evidence
from chunktune._stats import standard_error


def evidence(table: dict[int | None, list[float | None]], *, paired: bool = True) -> Evidence:
    ev = Evidence(paired=paired, estimator="trimmed_mean", trim=0.2)
    for chunk, row in table.items():
        for r, seconds in enumerate(row):
            if seconds is not None:
                ev.add(chunk, r, seconds)
    return ev


def test_paired_values_cancel_what_each_round_did() -> None:
    """A machine twice as slow in one round moves native and candidate alike: ratios stay."""
    ev = evidence({None: [1.0, 2.0, 1.0], 4: [0.9, 1.8, 0.9]})
    assert list(ev.values(4).values()) == pytest.approx([math.log(0.9)] * 3)
    assert ev.compare(4, None).diff == pytest.approx(math.log(0.9))
    assert ev.estimates([None, 4]) == pytest.approx({None: 1.0, 4: 0.9})


def test_comparisons_use_only_the_rounds_both_were_measured_in() -> None:
    """A candidate that joined late is compared on its own rounds, never on ones it missed."""
    # rounds 0-2: a slow machine (all 2x) where only 4 ran; rounds 3-4: both ran
    ev = evidence(
        {None: [2.0, 2.0, 2.0, 1.0, 1.0], 4: [1.8, 1.8, 1.8, 0.9, 0.9],
         8: [None, None, None, 0.8, 0.8]}
    )  # fmt: skip
    cmp = ev.compare(8, 4)
    assert cmp.n == 2
    assert cmp.diff == pytest.approx(math.log(0.8 / 0.9))
    assert ev.count(8) == 2 and ev.count(4) == 5


def test_noise_is_pooled_over_candidates_and_shrinks_the_error_with_rounds() -> None:
    """The standard error of a comparison falls as 1/sqrt(rounds) at a pooled noise figure."""
    rows: dict[int | None, list[float | None]] = {
        None: [1.0] * 16,
        4: [0.9 * (1.05 if r % 2 else 0.95) for r in range(16)],
    }
    few = evidence({c: v[:4] for c, v in rows.items()}).compare(4, None)
    many = evidence(rows).compare(4, None)
    assert many.se < few.se
    assert many.se == pytest.approx(few.se / 2, rel=0.35)
    assert few.lower(2.0) < few.diff < few.upper(2.0)


def test_a_chunk_without_a_native_partner_has_no_estimate() -> None:
    """A size measured only in a round that native never reached gets no (infinite) estimate."""
    ev = evidence({None: [1.0, 1.0], 4: [0.9, 0.9], 8: [None, None]})
    ev.add(8, 2, 0.8)  # round 2: the budget ended before native's turn
    assert ev.estimates([None, 4, 8]) == pytest.approx({None: 1.0, 4: 0.9})
    assert ev.compare(8, None).n == 0


def test_unpaired_evidence_compares_raw_times() -> None:
    """paired = false judges log seconds, and reports each chunk's own estimate in seconds."""
    ev = evidence({None: [1.0, 2.0, 1.0, 1.0], 4: [0.9, 1.8, 0.9, 0.9]}, paired=False)
    assert ev.estimates([None, 4]) == pytest.approx({None: 1.0, 4: 0.9})
    paired = evidence({None: [1.0, 2.0, 1.0, 1.0], 4: [0.9, 1.8, 0.9, 0.9]})
    assert ev.compare(4, None).se > paired.compare(4, None).se


@pytest.mark.parametrize("paired", [True, False])
def test_a_pair_s_noise_is_that_of_a_call_against_its_native_partner(paired: bool) -> None:
    """Unpaired values are single calls: a pair's log ratio has sqrt(2) times their noise."""
    table: dict[int | None, list[float | None]] = {
        None: [1.0, 1.1, 0.95, 1.05, 1.0, 0.9],
        4: [0.9, 1.0, 0.97, 0.92, 0.88, 0.95],
    }
    ev = evidence(table, paired=paired)
    sigma, dof = ev.sigma()
    assert ev.pair_sigma() == pytest.approx((sigma if paired else math.sqrt(2.0) * sigma, dof))


def test_a_comparison_counts_the_common_rounds_whichever_side_joined_late() -> None:
    """The early size against the late one: the count and error of their common rounds only."""
    ev = evidence(
        {None: [2.0, 2.0, 2.0, 1.0, 1.0], 4: [1.8, 1.9, 1.7, 0.9, 0.95],
         8: [None, None, None, 0.8, 0.85]}
    )  # fmt: skip
    early, late = ev.compare(4, 8), ev.compare(8, 4)
    assert early.n == late.n == 2
    assert early.se == pytest.approx(late.se)
    assert early.diff == pytest.approx(-late.diff)


def test_an_unpaired_comparison_has_the_noise_of_a_pair() -> None:
    """Unpaired, the difference of two estimates carries a pair's noise: sqrt(2) times a call's."""
    ev = evidence({None: [1.0, 1.1, 0.95, 1.05], 4: [0.9, 1.0, 0.97, 0.92]}, paired=False)
    cmp = ev.compare(4, None)
    assert cmp.se == pytest.approx(standard_error(ev.pair_sigma()[0], 4, "trimmed_mean"))


def test_one_common_round_is_compared_at_the_pooled_noise() -> None:
    """A size that joined in the last round is compared on that round, with the pooled error."""
    ev = evidence(
        {None: [1.0, 1.0, 1.0, 1.0], 4: [0.9, 0.95, 0.9, 0.95], 8: [None, None, None, 0.8]}
    )
    cmp = ev.compare(8, None)
    assert cmp.n == 1 and cmp.diff == pytest.approx(math.log(0.8))
    assert cmp.se == pytest.approx(standard_error(ev.sigma()[0], 1, "trimmed_mean"))


def test_unpaired_estimates_skip_a_size_not_yet_measured() -> None:
    """Unpaired, a size with no call yet has no estimate (and asking for one raises nothing)."""
    ev = evidence({None: [1.0, 1.0], 4: [0.9, 0.9]}, paired=False)
    assert ev.estimates([None, 4, 8]) == pytest.approx({None: 1.0, 4: 0.9})


def test_an_unmeasured_size_is_located_behind_every_measured_one() -> None:
    """A size with no round yet has an infinite location, so ranking puts it last."""
    ev = evidence({None: [1.0, 1.0], 4: [1.5, 1.5]})
    assert ev.location(8) == math.inf > ev.location(4)


def test_an_unpaired_comparison_is_the_difference_of_the_two_estimates() -> None:
    """Unpaired, a chunk 10% faster than native in every round compares at log(0.9), not its sum."""
    ev = evidence({None: [2.0, 4.0, 2.0, 2.0], 4: [1.8, 3.6, 1.8, 1.8]}, paired=False)
    assert ev.compare(4, None).diff == pytest.approx(math.log(0.9))


def test_sizes_with_no_round_in_common_are_no_evidence_either_way() -> None:
    """Two sizes never measured in one round compare as level, with an infinite error."""
    ev = evidence({None: [1.0, 1.0, 1.0], 4: [0.9, 0.9, None], 8: [None, None, 0.8]})
    cmp = ev.compare(8, 4)
    assert (cmp.diff, cmp.se, cmp.n) == (0.0, math.inf, 0)


def test_before_any_noise_figure_no_comparison_is_clear() -> None:
    """Too few rounds for a noise figure: a comparison's error is infinite, not zero."""
    ev = evidence({None: [1.0, 1.0], 4: [0.9, 0.9]})
    assert ev.sigma() == (0.0, 0)
    cmp = ev.compare(4, None)
    assert cmp.diff == pytest.approx(math.log(0.9)) and cmp.se == math.inf


def test_a_size_counts_a_call_in_a_round_cut_before_native_s() -> None:
    """count() is the rounds a size was measured in, one that native never reached included."""
    ev = evidence({None: [1.0, 1.0, None], 4: [0.9, 0.9, 0.9]})
    assert ev.count(4) == 3
    assert len(ev.values(4)) == 2


def test_unpaired_noise_pools_native_s_own_calls_too() -> None:
    """Unpaired, native's calls are a series like any size's: their spread is noise."""
    ev = evidence({None: [1.0, 1.2, 0.9, 1.1], 4: [0.9]}, paired=False)
    sigma, dof = ev.sigma()
    assert dof == 3 and sigma > 0.0


def test_paired_estimates_scale_by_native_s_estimate_under_the_evidence_s_estimator() -> None:
    """Paired, native's seconds are read by the evidence's own estimator (a mean here)."""
    ev = Evidence(paired=True, estimator="mean", trim=0.2)
    for r, (native, four) in enumerate([(1.0, 0.9), (1.0, 0.9), (4.0, 3.6)]):
        ev.add(None, r, native)
        ev.add(4, r, four)
    assert ev.native_seconds() == pytest.approx(2.0)
    assert ev.estimates([None, 4]) == pytest.approx({None: 2.0, 4: 1.8})


def test_unpaired_estimates_trim_as_the_evidence_says() -> None:
    """Unpaired, each size's seconds are reduced with the evidence's own trim (none here)."""
    ev = Evidence(paired=False, estimator="trimmed_mean", trim=0.0)
    for r, seconds in enumerate([1.0, 1.0, 1.0, 1.0, 5.0]):
        ev.add(None, r, 1.0)
        ev.add(4, r, seconds)
    assert ev.estimates([None, 4]) == pytest.approx({None: 1.0, 4: 1.8})


def test_unpaired_a_candidates_every_call_is_a_round_it_rests_on() -> None:
    """Unpaired, a size's call in a round native missed still counts: rounds == count."""
    ev = evidence({None: [1.0, 1.0], 8: [0.9, 0.9, 0.9]}, paired=False)
    assert (ev.count(8), ev.rounds(8), sorted(ev.judged(8))) == (3, 3, [0, 1, 2])
    paired = evidence({None: [1.0, 1.0], 8: [0.9, 0.9, 0.9]})
    assert (paired.count(8), paired.rounds(8)) == (3, 2)


@pytest.mark.parametrize("paired", [True, False])
def test_locations_comparisons_and_native_s_seconds_trim_as_the_evidence_says(
    paired: bool,
) -> None:
    """With trim 0 a trimmed mean keeps every round's value: one fast round moves each figure."""
    ev = Evidence(paired=paired, estimator="trimmed_mean", trim=0.0)
    for r, (native, ratio) in enumerate([(1.0, 1.0)] * 4 + [(6.0, math.exp(-0.5))]):
        ev.add(None, r, native)
        ev.add(4, r, native * ratio)
    # 4's log ratios to native are [0, 0, 0, 0, -0.5]: their mean is -0.1 (trimmed, 0)
    cmp = ev.compare(4, None)
    assert cmp.diff == pytest.approx(-0.1)
    assert ev.native_seconds() == pytest.approx(2.0)  # the mean of 1, 1, 1, 1, 6 (trimmed, 1)
    if paired:
        assert ev.location(4) == pytest.approx(-0.1)
        assert ev.estimates([4]) == pytest.approx({4: 2.0 * math.exp(-0.1)})


@pytest.mark.parametrize("paired", [True, False])
def test_without_a_native_call_there_are_no_estimates(paired: bool) -> None:
    """Before native's first call nothing has a scale: no estimates, and no error."""
    ev = evidence({4: [0.9, 0.9, 0.9]}, paired=paired)
    assert ev.estimates([None, 4]) == {}


def test_an_unpaired_comparison_uses_only_the_rounds_both_have_either_way() -> None:
    """Unpaired, a late joiner is compared on its own rounds: slow rounds it missed count not."""
    ev = evidence(
        {None: [2.0, 2.0, 1.0, 1.0], 4: [2.0, 2.0, 1.0, 1.0], 8: [None, None, 0.9, 0.9]},
        paired=False,
    )
    assert ev.compare(8, 4).diff == pytest.approx(math.log(0.9))
    assert ev.compare(4, 8).diff == pytest.approx(-math.log(0.9))
