"""Confirmation against native: a sequential test on fresh, paired samples. Pure numbers.

The winner of a race looks better than it is: of a dozen candidates measured
with noise, the one that came out fastest was, more often than not, also lucky.
So before leaving native, the winner ``W`` and native ``N`` are measured again,
alternating in ABBA blocks (``N W W N``, then ``W N N W``), so a machine that
speeds up or slows down during a block hits both alike. Each adjacent pair gives
``d = log(t_N / t_W)`` (positive: the winner is faster).

The test looks at the pairs so far after ``min_pairs`` of them, then each time
their number doubles, and at the end of its plan (:func:`look_points`):

- **confirmed** when the lower confidence bound of ``d`` is above 0 (the winner
  is faster, not by luck) and its estimate clears the policy's margin, and so does
  the plain mean of ``d`` (see below);
- **rejected** when even the upper bound is below the margin (the gain, if any,
  is too small to be worth leaving native for);
- **inconclusive** before the end of its plan when the plan is out of reach: even a
  gain at that upper bound would give the pairs left under a 5% chance of a
  confirmation at the last look (:func:`reach_floor`), so they would be spent on a
  verdict already known;
- otherwise it measures another block, up to ``max_pairs``: then it is
  **inconclusive**, and native stays.

Looking more than once must not inflate the false-confirmation rate above
``alpha``: the looks spend it by an alpha-spending function (:class:`Bounds`,
:mod:`chunktune._spending`), little at the first looks and the rest at the last;
with looks spaced by doubling, a plan of 64 pairs has 5 looks, with bounds from
z = 3.55 at the first to 2.31 at half the plan and 1.70 at the last. The noise is
pooled with the race's own noise figure, so the first looks do not trust a standard
deviation from four numbers.

The estimate is the policy's robust one (a trimmed mean), which keeps a spike on
either side from deciding. It estimates the plain mean only while the winner's noise
is native's: then ``d`` is symmetric. A winner that suffers more than native from
other work on the machine is not: a size of a few chunks per thread on a uniform
batch wins most pairs by 2-3% and loses the ones a neighbour's burst hits by 10-40%,
because its chunks cannot be rebalanced. Trimming drops those pairs, but a trainer
pays every call; so the gain must clear the margin by the plain mean of ``d`` as
well (benchmarks/RESULTS.md, session 51).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal

import attrs

from ._margin import least_gain
from ._sequential import Design, adjusted
from ._spending import spending_bounds
from ._stats import estimate, normal_quantile, pooled_sigma, standard_error

__all__ = [
    "FUTILITY_Z",
    "Bounds",
    "Confirmation",
    "Looks",
    "Outcome",
    "abba_order",
    "futility_bound",
    "judge",
    "look_points",
    "looks_of",
    "pair_gains",
    "pairs_needed",
    "plan_bounds",
    "reach_floor",
]

Outcome = Literal["confirmed", "rejected", "inconclusive"]


@attrs.frozen
class Confirmation:
    """The state of a confirmation after some pairs.

    ``outcome`` is None while undecided. ``gain`` is ``1 - t_W/t_N`` from the
    estimate of ``d``; ``ci`` its confidence interval at the test's level. A confirmed
    gain and its interval allow for when the test stopped (:mod:`chunktune._sequential`).
    ``mean_gain`` is the gain by the plain mean of ``d``, every pair counted (None
    before any pair). ``out_of_reach``: inconclusive before the end of its plan, because
    no gain still plausible could have been confirmed by it (:func:`reach_floor`).
    """

    outcome: Outcome | None
    pairs: int
    gain: float
    ci: tuple[float, float]
    sigma: float
    mean_gain: float | None = None
    out_of_reach: bool = False


FUTILITY_Z = normal_quantile(0.95)
"""How clearly the gain must fall short of the margin for the test to give up early."""


def abba_order(block: int, winner: int) -> list[int | None]:
    """The calls of block ``block``: N W W N, then W N N W (native is None).

    A drift across a block hits both sides alike.
    """
    return [None, winner, winner, None] if block % 2 == 0 else [winner, None, None, winner]


def pair_gains(order: Sequence[int | None], seconds: Sequence[float]) -> list[float]:
    """A whole block's two pairs: each native call against the winner's call next to it."""
    nat = [t for t, c in zip(seconds, order, strict=True) if c is None]
    win = [t for t, c in zip(seconds, order, strict=True) if c is not None]
    return [math.log(nat[0] / win[0]), math.log(nat[1] / win[1])]


class Looks:
    """The looks still due of a confirmation from ``min_pairs`` to ``max_pairs``."""

    def __init__(self, min_pairs: int, max_pairs: int) -> None:
        self._due = list(look_points(min_pairs, max_pairs))

    def due(self, pairs: int) -> bool:
        """Whether a look falls due at ``pairs`` pairs; the looks it passes are spent."""
        if self._due and pairs < self._due[0]:
            return False
        self._due = [n for n in self._due if n > pairs]
        return True


def look_points(min_pairs: int, max_pairs: int) -> tuple[int, ...]:
    """The pair counts a confirmation looks at: ``min_pairs``, doubling, and ``max_pairs``.

    Few looks, spaced geometrically: a clear gain still stops at the first, and
    the last keeps nearly all of ``alpha`` however long the plan (a look after
    every block would give each look less to spend).
    """
    points = [min_pairs]
    while points[-1] * 2 < max_pairs:
        points.append(points[-1] * 2)
    if max_pairs > points[-1]:
        points.append(max_pairs)
    return tuple(points)


def looks_of(min_pairs: int, max_pairs: int) -> int:
    """The looks of a confirmation from ``min_pairs`` to ``max_pairs``."""
    return len(look_points(min_pairs, max_pairs))


@attrs.frozen
class Bounds:
    """The success bounds of a plan of ``max_pairs`` pairs that spends ``alpha`` over its looks.

    A look's bound depends on the looks taken before it (:func:`spending_bounds`):
    pairs come two to a block, and the budget can end a plan early.
    """

    alpha: float
    min_pairs: int
    max_pairs: int

    def z(self, before: Sequence[int], n: int, *, last: bool) -> float:
        """The bound at ``n`` pairs, after looks at ``before``; ``last`` spends what is left."""
        return self.all_z(before, n, last=last)[-1]

    def all_z(self, before: Sequence[int], n: int, *, last: bool) -> tuple[float, ...]:
        """The bounds of the looks at ``before`` and of the one at ``n`` pairs, one each.

        Raises:
            ValueError: the looks do not rise to ``n``: a look of ``before`` dropped here
                would leave a caller pairing each bound with its look (:func:`_design`)
                one look out (callers pass the looks taken before ``n``).
        """
        return spending_bounds(self.alpha, (*before, n), self.max_pairs, last=last)

    @property
    def final(self) -> float:
        """The bound of the plan's last look, its looks taken as planned (:func:`look_points`)."""
        *before, n = look_points(self.min_pairs, self.max_pairs)
        return self.z(before, n, last=True)


def plan_bounds(alpha: float, min_pairs: int, max_pairs: int) -> Bounds:
    """The bounds of a plan from ``min_pairs`` to ``max_pairs`` pairs, spending ``alpha``.

    Its last look is the test's final one.
    """
    return Bounds(alpha, min_pairs, max_pairs)


def pairs_needed(gain: float, sigma: float, z: float, *, power_z: float = 0.84) -> float:
    """Pairs a true log-gain ``gain`` needs to clear a ``z`` bound (with 80% power).

    Counted for a plain mean of the pairs, ``sigma`` one pair's noise. The test judges
    the policy's estimator, whose standard error is larger (1.1x for the trimmed mean),
    so at this count its power is about 72%, and at ``power_z=0`` it succeeds about 44%
    of the time, not half. Counting for the estimator's own standard error reserved
    more pairs, ended races sooner and captured less (session 32, benchmarks/RESULTS.md).
    """
    if gain <= 0:
        return math.inf
    return ((z + power_z) * sigma / gain) ** 2


def reach_floor(
    n: int,
    se: float,
    sigma: float,
    *,
    need: float,
    z_final: float,
    z_futility: float,
    max_pairs: int,
    estimator: str,
) -> float:
    """The log-gain estimate at ``n`` pairs under which a plan of ``max_pairs`` is out of reach.

    Below it, even if the pairs left gained the estimate's upper bound (``z_futility``
    standard errors ``se`` above it), the final estimate would have under a
    ``1 - Phi(z_futility)`` chance (5%) of clearing both the margin (``need``) and the
    last look's bound ``z_final``: the pairs left would buy a verdict already known.
    The final estimate weighs the ``n`` pairs and the rest by their counts, and the
    rest's noise (``sigma`` one pair's) is its spread. ``-inf`` with no pair left.
    """
    left = max_pairs - n
    if left <= 0 or not math.isfinite(se):
        return -math.inf
    bar = max(need, z_final * standard_error(sigma, max_pairs, estimator))
    # the final estimate, given the gain of the rest at the upper bound: its mean lies
    # left/max_pairs of the way from the estimate to that bound, its spread the rest's noise
    spread = math.sqrt(left) * standard_error(sigma, 1, estimator) / max_pairs
    return bar - z_futility * (left / max_pairs * se + spread)


def _gain(log_gain: float) -> float:
    return 1.0 - math.exp(-log_gain)


def futility_bound(v: Confirmation, estimator: str) -> float:
    """The upper bound on the gain that a rejection judged against the margin (a fraction).

    :func:`judge` rejects once this bound, at :data:`FUTILITY_Z`, is under the margin;
    ``v.ci`` is the test's success interval, wider at an interim look, so it can
    reach past the margin of a gain that was rightly rejected.
    """
    center = -math.log1p(-v.gain)
    return _gain(center + FUTILITY_Z * standard_error(v.sigma, v.pairs, estimator))


def judge(
    d: Sequence[float],
    *,
    prior_sigma: float,
    prior_dof: int,
    margin: float,
    bounds: Bounds,
    z_futility: float,
    min_pairs: int,
    max_pairs: int,
    estimator: str = "trimmed_mean",
    trim: float = 0.2,
    final: bool = False,
    earlier: Sequence[int] | None = None,
) -> Confirmation:
    """Judge the paired log gains ``d`` collected so far.

    ``bounds``: the test's (:func:`plan_bounds`), over its looks. ``final`` marks
    the last look (the budget ran out); reaching ``max_pairs`` makes a look final too,
    and an undecided final look is inconclusive. ``earlier``: the pair counts at which
    the test looked before (None: at the plan's :func:`look_points` under ``len(d)``);
    a confirmed gain is adjusted for those looks.
    """
    n = len(d)
    last = final or n >= max_pairs
    if earlier is None:
        earlier = look_points(min_pairs, max_pairs)
    before = [k for k in earlier if k < n]
    sigma = _noise(d, prior_sigma, prior_dof)
    center = estimate(list(d), estimator, trim=trim) if n else 0.0
    se = standard_error(sigma, n, estimator)
    z = bounds.z(before, n, last=last) if n else math.inf
    low, high = center - z * se, center + z * se
    ci = (_gain(low), _gain(high)) if math.isfinite(se) else (-math.inf, math.inf)
    need = least_gain(margin)  # a gain exactly the margin clears it, its log's rounding aside
    # what a trainer pays: every pair, the ones a burst of other work hit included
    mean = math.fsum(d) / n if n else 0.0
    outcome: Outcome | None = None
    if n >= min_pairs and low > 0 and center >= need and mean >= need:
        outcome = "confirmed"
    elif n >= 2 * min_pairs and center + z_futility * se < need:
        # giving up is decided on twice the pairs: a spike among the first few must not
        # cost a real gain its confirmation
        outcome = "rejected"
    out_of_reach = False
    if outcome is None and n >= 2 * min_pairs and not last:
        floor = reach_floor(
            n,
            se,
            sigma,
            need=need,
            z_final=bounds.final,
            z_futility=z_futility,
            max_pairs=max_pairs,
            estimator=estimator,
        )
        # even a gain at its upper bound would leave the plan's last look out of reach
        out_of_reach = center < floor
        if out_of_reach:
            outcome = "inconclusive"
    if outcome is None and last:
        outcome = "inconclusive"
    if outcome == "confirmed" and 0 < se < math.inf:
        # stopped because its estimate came out high enough: report what that says
        # of the gain, given when it stopped (median-unbiased), not the estimate itself
        design = _design(
            n,
            before=before,
            sigma=sigma,
            estimator=estimator,
            need=need,
            bounds=bounds,
            z_futility=z_futility,
            min_pairs=min_pairs,
            max_pairs=max_pairs,
        )
        # its interval at the whole test's level: every earlier look could also have
        # confirmed a gain of 0, so at the last look's level alone a gain confirmed
        # just past its bound got an interval reaching below 0
        center, (low, high) = adjusted(design, center, bounds.alpha)
        ci = (_gain(low), _gain(high))
    mean_gain = _gain(mean) if n else None
    return Confirmation(outcome, n, _gain(center), ci, sigma, mean_gain, out_of_reach)


def _noise(d: Sequence[float], prior_sigma: float, prior_dof: int) -> float:
    """One pair's noise (the spread of a log gain): the race's ``prior_sigma``, of
    ``prior_dof`` degrees of freedom, pooled with the pairs' own, and never under theirs."""
    own_sigma, own_dof = pooled_sigma([list(d)]) if len(d) >= 3 else (0.0, 0)
    dof = prior_dof + own_dof
    # no noise estimate at all (a race of two rounds, two pairs): no gain can be clear
    sigma = (
        math.sqrt((prior_dof * prior_sigma**2 + own_dof * own_sigma**2) / dof)
        if dof > 0
        else math.inf
    )
    # the race's noise pooled in only holds if the machine is as calm now as then: when
    # the pairs themselves are noisier (a neighbour's load arrived), theirs is the noise
    return max(sigma, own_sigma)


def _design(
    n: int,
    *,
    before: Sequence[int],
    sigma: float,
    estimator: str,
    need: float,
    bounds: Bounds,
    z_futility: float,
    min_pairs: int,
    max_pairs: int,
) -> Design:
    """The looks a confirmation that stopped at ``n`` pairs made, as :class:`Design`.

    ``before``: the pair counts of the looks before the last, where the test took
    them. A look confirmed above its bound (and the margin); one from twice
    ``min_pairs`` on stopped below the futility bound or the plan's
    :func:`reach_floor`, the higher.
    """
    se = [standard_error(sigma, k, estimator) for k in (*before, n)]
    z = bounds.all_z(before, n, last=True)
    return Design(
        se=tuple(se),
        upper=tuple(max(z_k * s, need) for z_k, s in zip(z, se[:-1], strict=False)),
        lower=tuple(
            max(
                need - z_futility * s,
                reach_floor(
                    k,
                    s,
                    sigma,
                    need=need,
                    z_final=bounds.final,
                    z_futility=z_futility,
                    max_pairs=max_pairs,
                    estimator=estimator,
                ),
            )
            if k >= 2 * min_pairs
            else -math.inf
            for k, s in zip(before, se, strict=False)
        ),
    )
