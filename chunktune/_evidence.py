"""Paired evidence: a sweep's timings by round, and the comparisons they support. Pure numbers.

A round measures native and every live candidate once, in a fresh random order.
With ``paired`` on, a candidate's value in a round is the log of its time over
native's time in that round: what the machine did during the round (a slow
stretch, a neighbour's burst) moves both and cancels. Two candidates are only
ever compared on the rounds both were measured in, so a candidate that joined
late is judged on as many rounds as it has, never against samples it missed.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import attrs

from ._stats import estimate, pooled_sigma, standard_error

__all__ = ["Comparison", "Evidence"]

Chunk = int | None


@attrs.frozen
class Comparison:
    """``a`` against ``b`` on their common rounds, in log-seconds (positive: ``a`` slower)."""

    diff: float
    se: float
    n: int

    def upper(self, z: float) -> float:
        """Upper confidence bound of the difference."""
        return self.diff + z * self.se

    def lower(self, z: float) -> float:
        """Lower confidence bound of the difference."""
        return self.diff - z * self.se


class Evidence:
    """Timings (seconds) by chunk and round; native is ``None``.

    ``estimator`` and ``trim`` reduce a series of per-round values to one
    location (:func:`chunktune._stats.estimate`); the noise is pooled over
    every candidate's series, so early comparisons lean on all the rounds
    measured, not on the few samples of one pair.
    """

    def __init__(self, *, paired: bool, estimator: str, trim: float) -> None:
        self.paired = paired
        self.estimator = estimator
        self.trim = trim
        self.seconds: dict[Chunk, dict[int, float]] = {}
        self._sigma: tuple[float, int] | None = None

    def add(self, chunk: Chunk, round_: int, seconds: float) -> None:
        """Record one timed call of ``chunk`` in round ``round_``."""
        self.seconds.setdefault(chunk, {})[round_] = seconds
        self._sigma = None

    def count(self, chunk: Chunk) -> int:
        """Rounds in which ``chunk`` was measured: its calls recorded, one a round.

        A round the budget cut after ``chunk``'s call but before native's counts too,
        though no comparison uses that call when paired (they pair on the rounds both
        have). What a sweep judges and reports by is :meth:`rounds`, not this count.
        """
        return len(self.seconds.get(chunk, {}))

    def rounds(self, chunk: Chunk) -> int:
        """How many rounds ``chunk``'s estimate rests on: :meth:`judged`'s, what a size
        needs ``min_rounds`` of to be judged and what a sweep reports as its samples."""
        return len(self.judged(chunk))

    def judged(self, chunk: Chunk) -> dict[int, float]:
        """The seconds, by round, that ``chunk``'s estimate rests on.

        Paired, a candidate's rounds that native was measured in too (a call in a round
        cut before native's has no partner); unpaired, and native's own, every call.
        """
        own = self.seconds.get(chunk, {})
        if not self.paired or chunk is None:
            return dict(own)
        native = self.seconds.get(None, {})
        return {r: t for r, t in own.items() if r in native}

    def values(self, chunk: Chunk) -> dict[int, float]:
        """Per-round values: log ratio to native in that round (paired), else log seconds."""
        own = self.seconds.get(chunk, {})
        if not self.paired:
            return {r: math.log(t) for r, t in own.items()}
        native = self.seconds.get(None, {})
        return {r: math.log(t / native[r]) for r, t in own.items() if r in native}

    def sigma(self) -> tuple[float, int]:
        """The pooled noise of one per-round value (log-seconds) and its degrees of freedom."""
        if self._sigma is None:
            series = [
                list(self.values(c).values())
                for c in self.seconds
                if not (self.paired and c is None)
            ]
            self._sigma = pooled_sigma(series)
        return self._sigma

    def pair_sigma(self) -> tuple[float, int]:
        """The noise of one pair's log ratio (a call against its native partner) and its dof.

        Paired, that is one per-round value; unpaired, a value is one call's log-seconds,
        and a pair's difference of two such has sqrt(2) times its noise.
        """
        sigma, dof = self.sigma()
        return (sigma if self.paired else math.sqrt(2.0) * sigma), dof

    def location(self, chunk: Chunk) -> float:
        """The chunk's estimated value (0 for native when paired); inf when unmeasured."""
        vals = list(self.values(chunk).values())
        return estimate(vals, self.estimator, trim=self.trim) if vals else math.inf

    def compare(self, a: Chunk, b: Chunk) -> Comparison:
        """``a`` minus ``b`` on the rounds both have (native cancels when paired)."""
        va, vb = self.values(a), self.values(b)
        common = sorted(va.keys() & vb.keys())
        n = len(common)
        if n == 0:
            return Comparison(0.0, math.inf, 0)
        sigma, dof = self.sigma()
        if dof == 0:  # no noise estimate yet: nothing is known to be clear of anything
            sigma = math.inf
        if self.paired:
            # both values are ratios to the same native call: their difference is
            # log t_a - log t_b within the round, with the noise of one value
            diff = estimate([va[r] - vb[r] for r in common], self.estimator, trim=self.trim)
            return Comparison(diff, standard_error(sigma, n, self.estimator), n)
        diff = estimate([va[r] for r in common], self.estimator, trim=self.trim) - estimate(
            [vb[r] for r in common], self.estimator, trim=self.trim
        )
        return Comparison(diff, math.sqrt(2.0) * standard_error(sigma, n, self.estimator), n)

    def native_seconds(self) -> float:
        """Native's own estimate in seconds, the scale of every reported estimate."""
        return estimate(list(self.seconds[None].values()), self.estimator, trim=self.trim)

    def estimates(self, chunks: Iterable[Chunk]) -> dict[Chunk, float]:
        """Estimated seconds per measured chunk.

        Paired: native's own estimate times each chunk's estimated ratio to native.
        Unpaired: each chunk's estimator over its own seconds.
        """
        out: dict[Chunk, float] = {}
        if None not in self.seconds:
            return out
        scale = self.native_seconds()
        for c in chunks:
            if self.count(c) == 0:
                continue
            if self.paired:
                if not self.values(c):
                    continue  # measured only in a round that native did not reach
                out[c] = scale * math.exp(self.location(c))
            else:
                out[c] = estimate(list(self.seconds[c].values()), self.estimator, trim=self.trim)
        return out
