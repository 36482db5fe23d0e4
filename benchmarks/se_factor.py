"""Can one sweep tell the noise's shape well enough to size the trimmed mean's standard error?

    python benchmarks/se_factor.py [--draws 2000]

The race and the confirmation price a trimmed mean of ``n`` values at
``1.1 * sigma / sqrt(n)``, ``sigma`` the pooled robust (MAD) noise figure. The true
factor depends on the noise's shape and on ``n`` (the code cuts ``ceil(0.2 n)`` at
each end): about 1.07-1.09 for normal noise, 0.97-1.01 for heavy tails such as the
recorded calls'. Part one prints it by simulation. Part two asks whether a sweep
could estimate it from its own data: the Tukey-McLaughlin figure (the winsorized
standard deviation over ``1 - 2 * 0.2``, against the MAD sigma) pooled over a few
series of per-round values, as a race holds them. If its spread from sweep to
sweep is as wide as the gap between shapes, a per-sweep factor buys no power that
a constant would not, and costs false confirmations where it comes out low.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable, Sequence

import numpy as np
import numpy.typing as npt

Array = npt.NDArray[np.float64]
Draw = Callable[[np.random.Generator, tuple[int, ...]], Array]
_MAD_TO_SIGMA = 1.4826
_TRIM = 0.2

SHAPES: dict[str, Draw] = {
    "normal": lambda rng, s: rng.normal(size=s),
    "t5": lambda rng, s: rng.standard_t(5, size=s),
    "t3": lambda rng, s: rng.standard_t(3, size=s),
    "laplace": lambda rng, s: rng.laplace(size=s),
    "spiky": lambda rng, s: rng.normal(size=s) + (rng.random(s) < 0.05) * rng.exponential(5, s),
}


def mad_sigma(series: Sequence[Array]) -> float:
    """The code's pooled noise figure: the MAD of within-series differences, over sqrt 2."""
    diffs = [s[:, None] - s[None, :] for s in series]
    flat = np.concatenate([d[np.triu_indices(d.shape[0], 1)] for d in diffs])
    return float(_MAD_TO_SIGMA * np.median(np.abs(flat)) / math.sqrt(2.0))


def true_factor(rng: np.random.Generator, draw: Draw, n: int, draws: int) -> float:
    """The trimmed mean's spread times sqrt(n), over the MAD sigma (the code's trimming)."""
    x = np.sort(draw(rng, (draws, n)), axis=1)
    cut = math.ceil(_TRIM * n - 1e-9)
    spread = float(x[:, cut : n - cut].mean(axis=1).std()) * math.sqrt(n)
    return spread / mad_sigma(list(draw(rng, (2000, 40))))


def estimated_factor(series: Sequence[Array]) -> float:
    """The Tukey-McLaughlin factor pooled over ``series`` (residuals about each median)."""
    residuals = np.concatenate([s - np.median(s) for s in series])
    low, high = np.quantile(residuals, [_TRIM, 1.0 - _TRIM])
    w = np.clip(residuals, low, high)
    dof = sum(s.size - 1 for s in series)
    sw = math.sqrt(float(((w - w.mean()) ** 2).sum()) / dof)
    return sw / (1.0 - 2.0 * _TRIM) / mad_sigma(series)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--draws", type=int, default=2000, help="simulated sweeps per cell")
    args = parser.parse_args(argv)
    if args.draws < 1:
        parser.error(f"--draws {args.draws}: expected at least 1")
    rng = np.random.default_rng(1)
    sizes = (4, 6, 8, 16, 32, 64)
    print("true factor by n (the code uses 1.1 at every n):")
    print(f"{'shape':8s} " + " ".join(f"{'n=' + str(n):>7s}" for n in sizes))
    for name, draw in SHAPES.items():
        row = [true_factor(rng, draw, n, 10 * args.draws) for n in sizes]
        print(f"{name:8s} " + " ".join(f"{f:7.3f}" for f in row))
    print("\nestimated from one sweep's series (series x values): mean, sd, 10th percentile")
    layouts = ((3, 10), (6, 12), (4, 30))
    print(f"{'shape':8s} " + " ".join(f"{f'{k}x{v}':>22s}" for k, v in layouts))
    for name, draw in SHAPES.items():
        cells = []
        for k, v in layouts:
            est = [estimated_factor([draw(rng, (v,)) for _ in range(k)]) for _ in range(args.draws)]
            cells.append(f"{np.mean(est):.3f} {np.std(est):.3f} {np.quantile(est, 0.1):.3f}")
        print(f"{name:8s} " + " ".join(f"{c:>22s}" for c in cells))


if __name__ == "__main__":
    main()
