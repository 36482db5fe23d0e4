"""A gain measured over a span of time: paired rounds' log ratios, and an interval that
holds when the gain itself moves between stretches. Pure functions over numbers.

On a shared machine some sizes' gain over native follows the machine's state for
seconds to minutes (humanoid-128's 22: ``benchmarks/stretch_gains.py``). Rounds of one
stretch are then not independent draws of the gain: the interval is the wider of the
pooled one (Student's t over the rounds) and one from the means of :data:`BATCHES`
consecutive equal stretches (Student's t over those means). ``chunktune check`` and the
benchmarks' re-measures use these.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

import attrs

__all__ = ["BATCHES", "SpanGain", "means_half_width", "span_gain", "stretch_half_width", "t95"]

BATCHES = 8
"""Consecutive stretches a span's rounds are cut into for its interval."""

# Student's t, two-sided 95%, by degrees of freedom 1-30 (no scipy here)
_T95 = (
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
    2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
    2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
)  # fmt: skip


def t95(dof: int) -> float:
    """Student's t quantile for a two-sided 95% interval with ``dof`` degrees of freedom
    (>= 1; past 30, two Cornish-Fisher terms off the normal's 1.96, within 0.001).

    Raises:
        ValueError: ``dof`` under 1.
    """
    if dof < 1:
        raise ValueError(f"t95: {dof} degrees of freedom, expected 1 or more")
    if dof <= len(_T95):
        return _T95[dof - 1]
    z = 1.959964
    return z + (z**3 + z) / (4 * dof) + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * dof**2)


def means_half_width(means: Sequence[float]) -> float:
    """The 95% half-width of the mean of ``means``, each one stretch's (Student's t at their
    count; NaN under two)."""
    if len(means) < 2:
        return math.nan
    return t95(len(means) - 1) * statistics.stdev(means) / math.sqrt(len(means))


def stretch_half_width(logs: Sequence[float]) -> float:
    """The 95% half-width of the mean of ``logs`` (in round order) by batch means: the
    spread of the means of :data:`BATCHES` consecutive stretches (0 with fewer than two
    rounds a stretch; the rounds past the last whole stretch are left out)."""
    size = len(logs) // BATCHES
    if size < 2:
        return 0.0
    return means_half_width(
        [statistics.fmean(logs[k * size : (k + 1) * size]) for k in range(BATCHES)]
    )


@attrs.frozen
class SpanGain:
    """A size's gain over native from paired rounds, as :attr:`chunktune.Decision.gain`
    reads: the fraction by which it beats native (negative: slower), with its 95%
    interval ``(low, high)``."""

    gain: float
    low: float
    high: float
    rounds: int

    @property
    def holds(self) -> bool:
        """Whether the size is still measurably faster: the interval's low end above 0."""
        return self.low > 0.0


def span_gain(logs: Sequence[float]) -> SpanGain:
    """The gain of ``logs``, each round's ``log(t_size / t_native)`` in round order.

    Gain ``-expm1(mean)``; the interval's half-width on the log scale is the wider of
    the pooled one (``t95(n - 1) * sd / sqrt(n)``) and :func:`stretch_half_width`.

    Raises:
        ValueError: fewer than two rounds, or a log ratio that is not finite.
    """
    if len(logs) < 2:
        raise ValueError(f"span_gain: {len(logs)} rounds, expected 2 or more")
    if not all(math.isfinite(x) for x in logs):
        raise ValueError("span_gain: a log ratio is not finite")
    mean = statistics.fmean(logs)
    pooled = t95(len(logs) - 1) * statistics.stdev(logs) / math.sqrt(len(logs))
    half = max(pooled, stretch_half_width(logs))
    return SpanGain(
        gain=-math.expm1(mean),
        low=-math.expm1(mean + half),
        high=-math.expm1(mean - half),
        rounds=len(logs),
    )
