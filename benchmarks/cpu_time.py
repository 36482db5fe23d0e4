"""Could the process's CPU time take noise out of paired calls? Measured, per size.

    python benchmarks/cpu_time.py                       sizes 1 4 8 16 32 64 128, 100 rounds
    python benchmarks/cpu_time.py --sizes 8 13 --rounds 200

The demo batch (256 envs, the usable CPUs) measured as a confirmation measures it:
each round one native call and one call of the size, in alternating order, each
timed by the wall clock and by the process's CPU time. For each size: the wall
gain over native and its per-pair noise; the same for CPU time; how closely the
two move together; and how much of the wall's pair variance a regression on the
CPU difference would remove (CUPED). That regression is only an unbiased test if
the size does not change the CPU time itself; the CPU gain column says whether it
does (an idle worker blocks and uses none; many small chunks cost dispatch).
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections.abc import Callable, Sequence

import attrs
import numpy as np
import numpy.typing as npt
from cases import at_least_one

from chunktune._fingerprint import usable_cpus

_Array = npt.NDArray[np.float64]


@attrs.frozen
class Covariate:
    """Paired log gains over native of one size, by wall clock and by CPU time."""

    size: int
    pairs: int
    wall_gain: float  # mean of log(native / size), wall clock
    wall_sd: float
    cpu_gain: float
    cpu_sd: float
    corr: float
    slope: float  # of the wall difference on the CPU difference
    kept: float  # share of the wall's pair variance left after the regression


def timed(run: Callable[[int | None], object], chunk: int | None) -> tuple[float, float]:
    """One call's ``(wall, cpu)`` seconds."""
    cpu, wall = time.process_time(), time.perf_counter()
    run(chunk)
    return time.perf_counter() - wall, time.process_time() - cpu


def measure(run: Callable[[int | None], object], size: int, rounds: int) -> _Array:
    """``rounds x 2 x 2`` seconds: ``[r, 0]`` native's call, ``[r, 1]`` the size's, each
    ``(wall, cpu)``; native runs first in even rounds, second in odd ones."""
    out = np.empty((rounds, 2, 2))
    for r in range(rounds):
        order: list[int | None] = [None, size] if r % 2 == 0 else [size, None]
        for chunk in order:
            out[r, 0 if chunk is None else 1] = timed(run, chunk)
    return out


def summarize(size: int, seconds: _Array) -> Covariate:
    """What ``seconds`` (as :func:`measure` returns) say of the CPU time as a covariate."""
    dw = np.log(seconds[:, 0, 0] / seconds[:, 1, 0])
    dc = np.log(seconds[:, 0, 1] / seconds[:, 1, 1])
    corr = slope = kept = math.nan
    if dw.size > 2:
        corr = float(np.corrcoef(dw, dc)[0, 1])
        slope = float(np.cov(dw, dc)[0, 1] / dc.var(ddof=1))
        kept = float((dw - slope * dc).var(ddof=1) / dw.var(ddof=1))

    def sd(a: _Array) -> float:
        return float(a.std(ddof=1)) if a.size > 1 else math.nan

    return Covariate(
        size, int(dw.size), float(dw.mean()), sd(dw), float(dc.mean()), sd(dc), corr, slope, kept
    )


HEADER = (
    f"{'size':>5} {'pairs':>6} {'wall gain (±se)':>16} {'pair sd':>7} "
    f"{'cpu gain (±se)':>16} {'pair sd':>7} {'corr':>5} {'slope':>5} {'kept':>5}"
)


def row(c: Covariate) -> str:
    """One size's line under :data:`HEADER`."""
    se = 1.0 / math.sqrt(c.pairs)
    wall = f"{c.wall_gain:+.2%} ±{c.wall_sd * se:.2%}"
    cpu = f"{c.cpu_gain:+.2%} ±{c.cpu_sd * se:.2%}"
    return (
        f"{c.size:>5} {c.pairs:>6} {wall:>16} {c.wall_sd:>7.2%} {cpu:>16} {c.cpu_sd:>7.2%} "
        f"{c.corr:>5.2f} {c.slope:>5.2f} {c.kept:>5.2f}"
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--sizes", type=at_least_one, nargs="+", default=[1, 4, 8, 16, 32, 64, 128])
    parser.add_argument("--rounds", type=at_least_one, default=100)
    parser.add_argument("--num-envs", type=at_least_one, default=256)
    args = parser.parse_args(argv)
    from chunktune._mujoco import demo_workload

    with demo_workload(num_envs=args.num_envs, nthread=usable_cpus()) as demo:
        demo.run(None)  # the pool's first call builds its threads
        print(HEADER)
        for size in args.sizes:
            print(row(summarize(size, measure(demo.run, size, args.rounds))), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
