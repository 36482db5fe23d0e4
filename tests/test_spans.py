"""The statistics of a gain measured over a span of time (``chunktune check``'s)."""

from __future__ import annotations

import math
import statistics

import pytest

from chunktune._spans import BATCHES, means_half_width, span_gain, stretch_half_width, t95


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
    "logs",
    [pytest.param([0.1], id="one-round"), pytest.param([0.1, math.nan], id="nan")],
)
def test_span_gain_refuses_what_gives_no_interval(logs: list[float]) -> None:
    """span_gain: under two rounds, or a log ratio that is no number, is a ValueError."""
    with pytest.raises(ValueError, match="span_gain"):
        span_gain(logs)
