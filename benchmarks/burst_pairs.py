"""Does a size win the typical pair and lose the unlucky ones? Live paired rounds, judged four ways.

    python benchmarks/burst_pairs.py [--case uniform-air-256] [--sizes 4 43 64] [--rounds 150]
                                     [--hog-duty 0.0] [--hog-burst-s 0.03] [--trials 400]

Native and ``--sizes`` in ``--rounds`` paired rounds (each in a fresh random order), on a
real batch of ``cases.py``, optionally beside a process that spins in random bursts
(``--hog-duty`` of the time, bursts of ``--hog-burst-s`` on average). Each size's gain
over native four ways: the trimmed mean of its per-round log ratios (what a sweep
judges by), their plain mean, their median, and ``1 - sum(its seconds) / sum(native's)``
(what a trainer pays). A size whose chunks cannot be rebalanced (a few per thread) loses
much in the calls a burst hits: its log ratios are skewed, and the trimmed mean and the
median, which drop those calls, say "faster" where the sums say "slower".

Then each size's rounds are resampled into ``--trials`` confirmations as ``balanced``
runs them (its looks and bounds, the pairs drawn with replacement, the race's noise
figure from 12 more): how often the trimmed mean's test alone would confirm the size,
and how often the confirmation does, which also asks the plain mean to clear the margin.
Not a test: it prints figures.
"""

from __future__ import annotations

import argparse
import math
import os
import subprocess
import sys
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
from cases import REAL_CASES

import chunktune
from chunktune._confirm import FUTILITY_Z, judge, look_points, plan_bounds
from chunktune._margin import least_gain
from chunktune._paired import paired_rounds
from chunktune._stats import estimate, pooled_sigma

__all__ = ["gains", "main", "resampled"]

Array = npt.NDArray[np.float64]

_HOG = """
import random, time
end = time.monotonic() + 3600
while time.monotonic() < end:
    t = time.monotonic() + random.expovariate(1 / {burst})
    while time.monotonic() < t:
        pass
    time.sleep(random.expovariate(1 / ({burst} * (1 - {duty}) / {duty})))
"""


def gains(native: Array, size: Array) -> dict[str, float]:
    """One size's gain over native from paired rounds (seconds, round by round), four ways."""
    logs = np.log(size / native)
    return {
        "trimmed": -math.expm1(estimate(list(logs), "trimmed_mean", trim=0.2)),
        "mean": -math.expm1(float(logs.mean())),
        "median": -math.expm1(float(np.median(logs))),
        "paid": 1.0 - float(size.sum() / native.sum()),
    }


def resampled(
    native: Array, size: Array, *, trials: int, policy: chunktune.Policy, seed: int = 0
) -> tuple[float, float]:
    """Shares of ``trials`` resampled confirmations: (trimmed test alone, the confirmation)."""
    rng = np.random.default_rng(seed)
    d_all = np.log(native / size)  # positive: the size is faster
    plan = policy.confirm_max_pairs
    bounds = plan_bounds(policy.confirm_alpha, policy.confirm_min_pairs, plan)
    need = least_gain(policy.margin)
    alone = confirmed = 0
    for _ in range(trials):
        d = list(rng.choice(d_all, plan))
        prior = pooled_sigma([list(rng.choice(d_all, 12))])
        alone_done = False
        for k in look_points(policy.confirm_min_pairs, plan):
            v = judge(
                d[:k],
                prior_sigma=prior[0],
                prior_dof=prior[1],
                margin=policy.margin,
                bounds=bounds,
                z_futility=FUTILITY_Z,
                min_pairs=policy.confirm_min_pairs,
                max_pairs=plan,
                estimator=policy.estimator,
                trim=policy.trim,
            )
            # the trimmed mean's test alone confirms where its interval clears 0 and its
            # estimate the margin (an unconfirmed verdict's figures are the raw ones); it
            # rejects where the confirmation does (a pass never rejects)
            passes = v.outcome == "confirmed" or (v.ci[0] > 0 and -math.log1p(-v.gain) >= need)
            if not alone_done and (passes or v.outcome == "rejected"):
                alone += passes
                alone_done = True
            if v.outcome is not None:
                confirmed += v.outcome == "confirmed"
                break
    return alone / trials, confirmed / trials


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", default="uniform-air-256")
    parser.add_argument("--sizes", type=int, nargs="+", default=[4, 43, 64])
    parser.add_argument("--rounds", type=int, default=150)
    parser.add_argument("--nthread", type=int, default=2)
    parser.add_argument("--hog-duty", type=float, default=0.0)
    parser.add_argument("--hog-burst-s", type=float, default=0.03)
    parser.add_argument("--trials", type=int, default=400)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    cases = {c.name: c for c in REAL_CASES}
    if args.case not in cases:
        parser.error(f"--case {args.case}: expected one of {', '.join(sorted(cases))}")
    if args.rounds < 4 or args.trials < 1 or not 0.0 <= args.hog_duty < 1.0:
        parser.error("expected --rounds >= 4, --trials >= 1 and --hog-duty in [0, 1)")
    workload = cases[args.case].build(args.nthread)
    hog = None
    if args.hog_duty > 0:
        code = _HOG.format(burst=args.hog_burst_s, duty=args.hog_duty)
        hog = subprocess.Popen([sys.executable, "-c", code])
    try:
        before = os.getloadavg()[0]
        got = paired_rounds(
            lambda c: float(workload.run(c)),
            [None, *sorted(set(args.sizes))],
            min_rounds=args.rounds,
            order=np.random.default_rng(args.seed).permutation,
        )
    finally:
        if hog is not None:
            hog.kill()
            hog.wait()
        close = getattr(workload, "close", None)
        if close is not None:
            close()
    print(
        f"{args.case}, {args.rounds} rounds in {got.elapsed_s:.0f} s, load "
        f"{before:.1f} -> {os.getloadavg()[0]:.1f}, hog duty {args.hog_duty:.0%}"
    )
    policy = chunktune.load_settings(None).get_policy("balanced")
    native = np.asarray(got.of(None))
    for c in got.sizes[1:]:
        size = np.asarray(got.of(c))
        g = gains(native, size)
        alone, confirmed = resampled(native, size, trials=args.trials, policy=policy)
        cells = "  ".join(f"{k} {v:+.2%}" for k, v in g.items())
        print(
            f"{c:5d}: {cells}  | resampled confirmations: trimmed test alone {alone:.0%}, "
            f"the confirmation {confirmed:.0%}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
