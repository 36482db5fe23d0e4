"""A confirmation's success bounds, from an alpha-spending function. Pure numbers.

A test that looks at its pairs several times may spend its false-confirmation level
``alpha`` across the looks (Lan and DeMets 1983): by a look at ``n`` of a plan's
``N`` pairs, at most ``alpha * (n / N) ** SPENDING_RHO`` in all (the power family,
Kim and DeMets 1987, at ``rho = 2``). Each look's bound is the z at which the chance,
with no gain, of a first crossing there is the share its spending allows, given the
looks and bounds before it (:func:`chunktune._sequential.more_extreme` at a gain of
0); the last look spends exactly what is left. The bounds ignore the stops for
futility, which can only lower the chance of a false confirmation.

Against z = 3 at every look but the last (Haybittle-Peto, the rest of ``alpha`` to the
last by Bonferroni), a 64-pair plan looking at 4, 8, 16, 32 and 64 pairs gets the
bounds 3.55, 3.22, 2.80, 2.31 and 1.70: a gain that is clear at half its plan stops
there, and the last look's bound is unchanged (benchmarks/RESULTS.md, session 57).
"""

from __future__ import annotations

import functools
import itertools
import math

from ._sequential import Design, at_last, before_last
from ._stats import normal_quantile

__all__ = ["SPENDING_RHO", "spending_bounds"]

SPENDING_RHO = 2.0
"""The power of the spending function ``alpha * t**rho``: 1 spends early, 3 late."""

_BISECTIONS = 50  # halvings of [0, _Z_MAX]: far finer than the crossing chances' accuracy
_Z_MAX = 12.0


def _spent(alpha: float, fraction: float) -> float:
    """The share of ``alpha`` a look at ``fraction`` of the plan may have spent, in all."""
    return alpha * math.pow(min(1.0, fraction), SPENDING_RHO)


def _design(looks: tuple[int, ...], bounds: tuple[float, ...]) -> Design:
    """The looks' design at no gain: ``bounds`` are the z of the looks before the last, a
    look's estimate has the standard error of a mean of its pairs (only ratios matter)."""
    se = tuple(1.0 / math.sqrt(n) for n in looks)
    return Design(
        se=se,
        upper=tuple(z * s for z, s in zip(bounds, se, strict=False)),
        lower=(-math.inf,) * len(bounds),
    )


def _bound(looks: tuple[int, ...], bounds: tuple[float, ...], target: float) -> float:
    """The last look's z at which the chance, with no gain, of a crossing by then is ``target``."""
    if not bounds:
        return normal_quantile(1.0 - target)
    design = _design(looks, bounds)
    # the walk up to the look before the last is the same for every z of the last
    reach = before_last(0.0, design)
    last_se = design.se[-1]

    def crossed(z_last: float) -> float:
        return at_last(0.0, design, reach, z_last * last_se)

    lo, hi = 0.0, _Z_MAX
    if crossed(hi) >= target:  # the looks before spent it all
        return math.inf
    for _ in range(_BISECTIONS):
        mid = (lo + hi) / 2
        if crossed(mid) > target:
            lo = mid
        else:
            hi = mid
    return hi


@functools.lru_cache(maxsize=256)
def spending_bounds(
    alpha: float, looks: tuple[int, ...], plan: int, *, last: bool
) -> tuple[float, ...]:
    """The success z of each look, at ``looks`` pairs, of a plan of ``plan`` pairs.

    ``looks`` rise; ``last``: the final one ends the test (its plan, or the budget),
    so it spends what is left of ``alpha``. A look before the last spends to its
    share of the plan.
    """
    if not looks or any(b <= a for a, b in itertools.pairwise(looks)) or looks[0] < 1:
        raise ValueError(f"looks must be rising pair counts of 1 or more, not {looks}")
    bounds: list[float] = []
    for k, n in enumerate(looks):
        final = last and k == len(looks) - 1
        target = alpha if final else _spent(alpha, n / plan)
        bounds.append(_bound(looks[: k + 1], tuple(bounds), target))
    return tuple(bounds)
