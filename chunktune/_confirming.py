"""Running a confirmation on the probe: ABBA blocks against native, judged at the test's looks.

The numbers (the block order, the pairs' log gains, the looks and their bounds, the
verdict) are :mod:`chunktune._confirm`'s; this module spends the calls. The plan is
fixed before the first pair (its last look is the test's final one), so a
confirmation that ends by its plan is complete; only calls that turn out slower than
priced can make the budget cut it short.
"""

from __future__ import annotations

import math

from ._confirm import (
    FUTILITY_Z,
    Confirmation,
    Looks,
    abba_order,
    judge,
    pair_gains,
    plan_bounds,
)
from ._pacing import Pace
from ._probe import Probe

__all__ = ["run_confirmation"]


def run_confirmation(
    probe: Probe, pace: Pace, chosen: int, *, plan: int, sigma: float, dof: int
) -> tuple[Confirmation, bool]:
    """Measure ``chosen`` against native on fresh ABBA/BAAB pairs, to a plan of ``plan`` pairs.

    ``sigma`` and ``dof`` are the race's noise figure, pooled into the test's. Returns
    the verdict and whether the budget (``pace.budget_s``) cut it short of its plan.
    A plan under the policy's ``confirm_min_pairs`` decides nothing and measures nothing:
    inconclusive on no pairs.
    """
    p = probe.policy
    min_pairs = p.confirm_min_pairs
    if plan < min_pairs:
        return Confirmation("inconclusive", 0, 0.0, (-math.inf, math.inf), sigma), False
    bounds = plan_bounds(p.confirm_alpha, min_pairs, plan)
    looks = Looks(min_pairs, plan)
    d: list[float] = []
    # pairs come two to a block, so a look due at an odd count is taken one pair later:
    # the verdict is adjusted for the looks where they were taken
    looked: list[int] = []
    block = 0
    while True:
        order = abba_order(block, chosen)
        times: list[float] = []
        for c in order:
            times.append(probe(c, kind="confirm", round_=block + 1))
            if probe.over(pace.budget_s) and len(times) < len(order):
                break
        cut = len(times) < len(order)
        if not cut:
            d += pair_gains(order, times)
        final = cut or probe.over(pace.budget_s)
        if not (final or looks.due(len(d))):
            block += 1
            continue
        verdict = judge(
            d,
            prior_sigma=sigma,
            prior_dof=dof,
            margin=p.margin,
            bounds=bounds,
            z_futility=FUTILITY_Z,
            min_pairs=min_pairs,
            max_pairs=plan,
            estimator=p.estimator,
            trim=p.trim,
            final=final,
            earlier=looked,
        )
        if verdict.outcome is not None:
            # cut: the budget ended it before its plan (calls ran slower than priced)
            return verdict, final and len(d) < plan
        looked.append(len(d))
        block += 1
