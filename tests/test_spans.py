"""The statistics of a gain measured over a span of time (``chunktune check``'s)."""

from __future__ import annotations

import math
import re
import statistics

import pytest

from chunktune._spans import (
    BATCHES,
    SpanGain,
    means_half_width,
    span_gain,
    stretch_half_width,
    t95,
)


def test_t95_is_students_t_for_every_count_of_degrees_of_freedom() -> None:
    """t95: the table's quantiles to 30 dof, Cornish-Fisher past it, 1.96 in the limit."""
    assert (t95(1), t95(7), t95(30)) == (12.706, 2.365, 2.042)
    assert t95(40) == pytest.approx(2.0211, abs=0.001)
    assert t95(10**6) == pytest.approx(1.95996, abs=1e-4)
    with pytest.raises(ValueError, match="0 degrees of freedom"):
        t95(0)


def test_means_half_width_is_t_at_the_means_count_times_their_standard_error() -> None:
    """means_half_width: NaN under two means, else t95(k - 1) * sd / sqrt(k)."""
    assert math.isnan(means_half_width([0.1]))
    means = [0.01, 0.03, -0.02, 0.0]
    assert means_half_width(means) == pytest.approx(3.182 * statistics.stdev(means) / 2)


def test_steady_rounds_get_the_pooled_interval() -> None:
    """Rounds whose stretches agree: the gain is -expm1(mean), the interval the pooled t one."""
    logs = [-0.05, -0.03] * 16  # every stretch's mean is -0.04: no stretch spread
    assert stretch_half_width(logs) == 0.0
    got = span_gain(logs)
    half = t95(31) * statistics.stdev(logs) / math.sqrt(32)
    assert got.rounds == 32
    assert got.gain == pytest.approx(-math.expm1(-0.04))
    assert (got.low, got.high) == pytest.approx(
        (-math.expm1(-0.04 + half), -math.expm1(-0.04 - half))
    )
    assert got.holds


def test_a_gain_that_moves_between_stretches_gets_the_wider_stretch_interval() -> None:
    """A gain moving between stretches: their means set a wider interval; +2% no longer holds."""
    per = 8
    stretch_means = [-0.08, 0.04, -0.07, 0.05, -0.06, 0.03, -0.05, -0.02]  # mean -0.02
    logs = [m + d for m in stretch_means for d in (0.001, -0.001) * (per // 2)]
    pooled = t95(len(logs) - 1) * statistics.stdev(logs) / math.sqrt(len(logs))
    wide = stretch_half_width(logs)
    assert wide == pytest.approx(means_half_width(stretch_means))
    assert wide > pooled
    got = span_gain(logs)
    assert got.gain == pytest.approx(-math.expm1(-0.02))
    assert got.low == pytest.approx(-math.expm1(-0.02 + wide))
    assert got.gain > 0 and not got.holds


def test_rounds_past_the_last_whole_stretch_are_left_out_of_the_stretch_means() -> None:
    """stretch_half_width cuts len // BATCHES rounds a stretch; the rest does not move it."""
    logs = [0.01 * (k % 3) for k in range(2 * BATCHES)]
    assert stretch_half_width([*logs, 5.0]) == stretch_half_width(logs)
    assert stretch_half_width(logs[: 2 * BATCHES - 1]) == 0.0  # under two rounds a stretch


@pytest.mark.parametrize(
    ("logs", "said"),
    [
        pytest.param([0.1], "span_gain: 1 rounds, expected 2 or more", id="one-round"),
        pytest.param([0.1, math.nan], "span_gain: a log ratio is not finite", id="nan"),
    ],
)
def test_span_gain_refuses_what_gives_no_interval(logs: list[float], said: str) -> None:
    """span_gain: under two rounds (their count named), or a log ratio that is no number."""
    with pytest.raises(ValueError, match=f"^{re.escape(said)}$"):
        span_gain(logs)


@pytest.mark.parametrize(
    ("dof", "quantile"),
    [
        pytest.param(31, 2.0395, id="31"),
        pytest.param(32, 2.0369, id="32"),
        pytest.param(35, 2.0301, id="35"),
        pytest.param(40, 2.0211, id="40"),
        pytest.param(50, 2.0086, id="50"),
        pytest.param(60, 2.0003, id="60"),
        pytest.param(80, 1.9901, id="80"),
        pytest.param(100, 1.9840, id="100"),
        pytest.param(120, 1.9799, id="120"),
    ],
)
def test_t95_past_the_table_is_within_a_thousandth_of_students_t(dof: int, quantile: float) -> None:
    """t95 past 30 dof: within 0.001 of Student's 97.5% quantile (a printed table's, 4 places)."""
    assert t95(dof) == pytest.approx(quantile, abs=0.001)


def test_two_means_give_a_half_width_at_one_degree_of_freedom() -> None:
    """means_half_width: two means are enough, at t95(1) = 12.706 (NaN is for one)."""
    assert means_half_width([0.01, 0.03]) == pytest.approx(12.706 * 0.01)


def test_two_rounds_a_stretch_are_enough_for_the_stretch_interval() -> None:
    """stretch_half_width: 2 * BATCHES rounds (two a stretch) give the stretch means' width."""
    stretch_means = [0.01 * k for k in range(BATCHES)]
    logs = [m for m in stretch_means for _ in range(2)]
    assert stretch_half_width(logs) == pytest.approx(means_half_width(stretch_means))
    assert stretch_half_width(logs) > 0.0


def test_two_rounds_give_a_gain_and_its_interval() -> None:
    """span_gain: two rounds are enough, the pooled interval at t95(1)."""
    got = span_gain([-0.01, -0.03])
    half = 12.706 * statistics.stdev([-0.01, -0.03]) / math.sqrt(2)
    assert got.rounds == 2
    assert got.gain == pytest.approx(-math.expm1(-0.02))
    assert (got.low, got.high) == pytest.approx(
        (-math.expm1(-0.02 + half), -math.expm1(-0.02 - half))
    )


def test_an_interval_that_reaches_zero_does_not_hold() -> None:
    """SpanGain.holds: the low end must be above 0; an interval ending at 0 does not hold."""
    assert not SpanGain(gain=0.01, low=0.0, high=0.02, rounds=16).holds
    assert SpanGain(gain=0.01, low=1e-9, high=0.02, rounds=16).holds
