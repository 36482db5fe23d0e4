"""The demo's sizes against native, live, in blocks alternating with and without CPU hogs.

    python benchmarks/hog_blocks.py [--blocks 8] [--rounds 50] [--hogs 2] [--sizes 1 2 4 8]

Each block measures native and ``--sizes`` in ``--rounds`` paired rounds (each round in a
fresh random order, each size judged by its log ratio to native within the round:
``measure.remeasure``); even blocks run beside ``--hogs`` CPU-bound processes, odd ones
without. Per block it prints the load before and after and each size's gain (95% CI);
last, each size's gain pooled over the blocks of each kind by inverse variance. What a
size measured beside other work gains, against what it gains without it, on one machine
in one stretch. Not a test: it prints figures.
"""

from __future__ import annotations

import argparse
import math
import os
import subprocess
import sys
import time
from collections.abc import Sequence

from measure import Measured, remeasure

import chunktune

__all__ = ["main", "pooled"]

_HOG = "import time\nend = time.monotonic() + 3600\nwhile time.monotonic() < end: pass\n"


def pooled(measured: Sequence[Measured]) -> tuple[float, float, float]:
    """Several blocks' gains pooled by inverse variance, on the log ratio they were
    measured as, with the 95% interval: gain, low, high."""
    weighted = []
    for m in measured:
        # gain = -expm1(diff); low/high are diff +/- a half-width, read here as 1.96 se
        # (remeasure's is wider where Student's t or the stretches' spread make it so)
        diff = math.log1p(-m.gain)
        se = (math.log1p(-m.low) - math.log1p(-m.high)) / 3.92
        weighted.append((diff, se**-2))
    total = sum(w for _, w in weighted)
    diff = sum(d * w for d, w in weighted) / total
    half = 1.96 / math.sqrt(total)
    return -math.expm1(diff), -math.expm1(diff + half), -math.expm1(diff - half)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--blocks", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=50)
    parser.add_argument("--hogs", type=int, default=2)
    parser.add_argument("--sizes", type=int, nargs="+", default=[1, 2, 4, 8])
    parser.add_argument("--num-envs", type=int, default=256)
    parser.add_argument("--nthread", type=int, default=2)
    args = parser.parse_args(argv)
    for name in ("blocks", "rounds", "hogs"):
        # remeasure's interval needs two rounds
        least = 2 if name == "rounds" else 1
        if getattr(args, name) < least:
            parser.error(f"--{name} {getattr(args, name)}: expected at least {least}")
    workload = chunktune.demo_workload(num_envs=args.num_envs, nthread=args.nthread)
    by_kind: dict[bool, list[dict[int | None, Measured]]] = {True: [], False: []}
    try:
        for block in range(args.blocks):
            hog = block % 2 == 0
            procs = [
                subprocess.Popen([sys.executable, "-c", _HOG])
                for _ in range(args.hogs if hog else 0)
            ]
            try:
                if procs:
                    time.sleep(2)  # the hogs running before the first round
                before = os.getloadavg()[0]
                measured = remeasure(workload, args.sizes, args.rounds, seed=block)
            finally:
                for proc in procs:
                    proc.kill()
                    proc.wait()
            by_kind[hog].append(measured)
            cells = ", ".join(
                f"{c} {measured[c].gain:+.2%} ({measured[c].low:+.2%}..{measured[c].high:+.2%})"
                for c in args.sizes
            )
            print(
                f"block {block} {'with' if hog else 'without'} hogs, load {before:.1f} -> "
                f"{os.getloadavg()[0]:.1f}: {cells}",
                flush=True,
            )
    finally:
        workload.close()
    for hog, blocks in by_kind.items():
        if not blocks:
            continue
        pooled_cells = []
        for c in args.sizes:
            mean, low, high = pooled([b[c] for b in blocks])
            pooled_cells.append(f"{c} {mean:+.2%} ({low:+.2%}..{high:+.2%})")
        kind = "with" if hog else "without"
        print(f"pooled, {kind} hogs ({len(blocks)} blocks): {', '.join(pooled_cells)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
