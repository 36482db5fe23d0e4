"""How often a policy leaves native for one size, by that size's true gain, on real noise.

    python benchmarks/calibration.py [--draws 5] [--policy balanced] [--worst -0.03]

Each recorded size of each trace is offered to the policy alone (an explicit list of
that one size: the race, the noise gate, the choice and the confirmation all run as
usual) on ``--draws`` replays, and the runs are binned by the size's gain over native
by the trace's truth. For sizes no faster than native the share that left native is
the rate of false confirmations under this machine's noise (the policy's
``confirm_alpha`` is the bound the test is built for); for faster sizes it is the
power to find a gain of that size in the budget. Sizes more than ``--worst`` slower
than native are left out: nothing mistakes them for a gain.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

import attrs
from cases import at_least_one, trace_files, trace_name, traces_folder
from measure import bench_settings, own_sweep_lock, policies_or_exit, scored

import chunktune
from chunktune import Policy, Settings
from chunktune._candidates import ExplicitCandidates
from chunktune.sim import ReplayWorkload

BINS: tuple[tuple[float, float], ...] = (
    (-1.0, 0.0),
    (0.0, 0.01),
    (0.01, 0.03),
    (0.03, 0.06),
    (0.06, 1.0),
)
"""Bins of true gain over native, ``(low, high]``; the first holds the sizes no faster."""


class CalibrationRow(NamedTuple):
    """One replay of one size offered alone: its true gain, and whether native was left."""

    trace: str
    chunk_size: int
    gain: float
    draw: int
    left_native: bool


def calibration_rows(
    path: Path, policy: Policy, draws: int, settings: Settings, *, worst: float = -0.03
) -> list[CalibrationRow]:
    """Every size of the trace in ``path`` at least ``worst`` against native, ``draws`` times."""
    truth = ReplayWorkload.from_file(path)
    native_s = truth.true_time(None)
    rows: list[CalibrationRow] = []
    for size in truth.sizes:
        if size == truth.trace.native:
            continue
        gain = 1.0 - truth.true_time(size) / native_s
        if gain < worst:
            continue
        alone = attrs.evolve(policy, candidates=ExplicitCandidates(sizes=(size,)))
        for d in range(draws):
            # a seed of its own for every size: a replay's noise follows its seed, not the
            # size, so sizes sharing seeds would share one stretch of luck
            seed = size * draws + d
            workload = ReplayWorkload.from_file(path, seed=seed)
            decision = scored(
                chunktune.resolve_sync(
                    workload, settings=settings, policy=attrs.evolve(alone, seed=seed)
                ),
                f"size {size} alone on {trace_name(path)} draw {d}",
            )
            left = decision.chunk_size is not None
            rows.append(CalibrationRow(trace_name(path), size, gain, d, left))
    return rows


def summarize(rows: Sequence[CalibrationRow]) -> list[tuple[tuple[float, float], int, int]]:
    """Per bin of true gain: the runs, and how many left native."""
    out = []
    for low, high in BINS:
        mine = [r for r in rows if low < r.gain <= high]
        out.append(((low, high), len(mine), sum(r.left_native for r in mine)))
    return out


def report(rows: Sequence[CalibrationRow], worst: float) -> str:
    """The table: runs and the share that left native, per bin of true gain."""
    lines = [f"{'true gain over native':>24s} {'runs':>6s} {'left native':>12s}"]
    for (low, high), runs, left in summarize(rows):
        if not runs:
            continue
        span = f"{max(low, worst):+.0%} to {high:+.0%}" if high < 1 else f"over {low:+.0%}"
        lines.append(f"{span:>24s} {runs:6d} {left:6d} ({left / runs:5.1%})")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--draws", type=at_least_one, default=5, help="replays per size")
    parser.add_argument("--policy", default="balanced")
    parser.add_argument("--worst", type=float, default=-0.03, help="slowest gain offered")
    parser.add_argument(
        "--traces", type=traces_folder, help="directory of traces (default: traces/)"
    )
    args = parser.parse_args(argv)
    own_sweep_lock()
    settings = bench_settings()
    (policy,) = policies_or_exit(parser, settings, [args.policy], "--policy").values()
    rows: list[CalibrationRow] = []
    for path in trace_files(*([args.traces] if args.traces else [])):
        rows += calibration_rows(path, policy, args.draws, settings, worst=args.worst)
    print(
        f"{args.policy} offered one size at a time, {args.draws} replays each "
        f"(alpha {policy.confirm_alpha:g}, margin {policy.margin:.1%}, "
        f"budget {policy.time_budget_s:g} s)\n"
    )
    print(report(rows, args.worst))
    return 0


if __name__ == "__main__":
    sys.exit(main())
