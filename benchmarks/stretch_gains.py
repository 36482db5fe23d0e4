"""Does a size's gain over native itself move from one stretch of the machine to the next?

    python benchmarks/stretch_gains.py [--case humanoid-128] [--sizes 4 13 22]
                                       [--seconds 120] [--bins 1 4 16] [--nthread 2]
                                       [--seed 0] [--save rounds.npz]

Native and ``--sizes`` in paired rounds (each in a fresh random order) on a real batch of
``cases.py`` for ``--seconds`` of wall time, each round stamped with when it ran. The
rounds are then cut into consecutive stretches of each ``--bins`` width (seconds), and for
each size:

- its gain over the whole run, by the mean log ratio and by what a trainer pays (the
  sums of seconds), with a 95% interval from the spread of its 16-second stretches'
  means (Student's t; rounds within a stretch are not independent draws of the machine);
- at each bin width, how far the stretches' mean gains spread beyond what their rounds'
  own noise explains (``between``: the standard deviation of a stretch's true gain, by
  the method of moments; 0 when the rounds' noise explains it all), and the share of
  stretches whose mean gain lies on the other side of 0 from the whole run's.

A sweep judges a size on a few seconds of one stretch. Where ``between`` at a sweep's
own width is comparable to the gains on offer, one stretch's evidence, however many
pairs, cannot tell a trainer what the size pays over days. Not a test: it prints figures.
"""

from __future__ import annotations

import argparse
import math
import os
import time
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
from cases import REAL_CASES, at_least_one, positive_seconds
from measure import means_half_width

from chunktune._paired import paired_rounds

__all__ = ["between_sd", "main", "stretch_means"]

Array = npt.NDArray[np.float64]


def stretch_means(stamps: Array, logs: Array, width: float) -> tuple[Array, Array, float]:
    """The mean log ratio of each stretch ``width`` seconds long, its round count, and the
    rounds' pooled variance within stretches (stretches of fewer than 2 rounds dropped)."""
    bins = np.floor((stamps - stamps[0]) / width).astype(int)
    means, counts, ss, dof = [], [], 0.0, 0
    for b in np.unique(bins):
        x = logs[bins == b]
        if len(x) < 2:
            continue
        means.append(float(x.mean()))
        counts.append(len(x))
        ss += float(((x - x.mean()) ** 2).sum())
        dof += len(x) - 1
    return np.asarray(means), np.asarray(counts, dtype=float), ss / max(dof, 1)


def between_sd(means: Array, counts: Array, within: float) -> float:
    """The standard deviation of the stretches' true means beyond their rounds' noise."""
    if len(means) < 2:
        return math.nan
    spread = float(means.var(ddof=1))
    return math.sqrt(max(0.0, spread - float(np.mean(within / counts))))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", default="humanoid-128")
    parser.add_argument("--sizes", type=at_least_one, nargs="+", default=[4, 13, 22])
    parser.add_argument("--seconds", type=positive_seconds, default=120.0)
    parser.add_argument("--bins", type=positive_seconds, nargs="+", default=[1.0, 4.0, 16.0])
    parser.add_argument("--nthread", type=at_least_one, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--save", help="write the rounds' stamps and seconds here (.npz)")
    args = parser.parse_args(argv)
    cases = {c.name: c for c in REAL_CASES}
    if args.case not in cases:
        parser.error(f"--case {args.case}: expected one of {', '.join(sorted(cases))}")
    workload = cases[args.case].build(args.nthread)
    try:
        before = os.getloadavg()[0]
        got = paired_rounds(
            lambda c: float(workload.run(c)),
            [None, *sorted(set(args.sizes))],
            min_rounds=0,
            seconds=args.seconds,
            order=np.random.default_rng(args.seed).permutation,
            clock=time.monotonic,
        )
    finally:
        close = getattr(workload, "close", None)
        if close is not None:
            close()
    t = np.asarray(got.started)
    if args.save:
        # typed loosely: numpy's stubs type savez's keywords as its allow_pickle flag
        arrays: dict[str, Any] = {
            f"s{c or 0}": np.asarray(v) for c, v in zip(got.sizes, got.seconds, strict=True)
        }
        np.savez(args.save, stamps=t, **arrays)
    print(
        f"{args.case}, T={args.nthread}: {len(t)} rounds in {got.elapsed_s:.0f} s, "
        f"load {before:.1f} -> {os.getloadavg()[0]:.1f}; native "
        f"{1e3 * float(np.median(got.of(None))):.1f} ms a call"
    )
    native = np.asarray(got.of(None))
    head = "  ".join(f"between@{w:g}s  flip@{w:g}s" for w in args.bins)
    print(f"{'size':>5}  {'mean log gain (95% CI, 16 s stretches)':>40}  {'paid':>7}  {head}")
    for c in got.sizes[1:]:
        size = np.asarray(got.of(c))
        logs = np.log(native / size)  # positive: the size is faster
        whole = float(logs.mean())
        m16, _, _ = stretch_means(t, logs, 16.0)
        # few stretches: the normal's 1.96 would be far too narrow (2 stretches need 12.7)
        half = means_half_width(m16.tolist())
        ci = f"{-math.expm1(-whole):+.2%} ({-math.expm1(-(whole - half)):+.2%}.."
        ci += f"{-math.expm1(-(whole + half)):+.2%})"
        paid = 1.0 - float(size.sum() / native.sum())
        cells = []
        for w in args.bins:
            means, counts, within = stretch_means(t, logs, w)
            flip = float(np.mean(np.sign(means) != np.sign(whole))) if len(means) else math.nan
            cells.append(f"{between_sd(means, counts, within):>10.2%}  {flip:>7.0%}")
        print(f"{c:>5}  {ci:>40}  {paid:>+7.2%}  " + "  ".join(cells))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
