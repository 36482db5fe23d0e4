"""One good size among equals: can a policy find a needle, and does it ever pay for one?

    python benchmarks/needle.py [--draws 20] [--gain 0.06] [--policies balanced]

A landscape where every candidate of the policy's list is exactly as fast as native
but one, ``--gain`` faster, under lognormal noise of 3%, 6% and 10% a call (50 ms
calls, 4096 envs on 16 threads). Each candidate in turn (every third of the list)
is the needle. No model of the pool, no valley, no neighbour to lean on: the race
must find it among look-alikes, and any size it confirms that is not the needle is
a false confirmation (they are all exactly native). Prints, per noise level and
needle, the share of the gain captured and how often the needle was found, and the
false confirmations over everything.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Sequence
from typing import NamedTuple

import attrs
import numpy as np
from cases import at_least_one
from measure import bench_settings, own_sweep_lock, policies_or_exit, scored

import chunktune
from chunktune import Policy, Settings
from chunktune._candidates import candidate_list
from chunktune.sim import ModeledTime

NUM_ENVS, NTHREAD, CALL_S = 4096, 16, 0.05


class Needle(ModeledTime):
    """A workload whose sizes all take native's time but ``good``, ``gain`` faster."""

    def __init__(self, good: int, gain: float, sigma: float, seed: int) -> None:
        self.num_envs, self.nthread = NUM_ENVS, NTHREAD
        self.good, self.gain, self.sigma = good, gain, sigma
        self.rng = np.random.default_rng(seed)
        self.elapsed_s = 0.0

    def signature(self) -> dict[str, str]:
        return {"kind": "needle"}

    def true_time(self, chunk_size: int | None) -> float:
        return CALL_S * (1.0 - self.gain if chunk_size == self.good else 1.0)

    def run(self, chunk_size: int | None) -> float:
        seconds = self.true_time(chunk_size) * math.exp(self.sigma * self.rng.standard_normal())
        self.elapsed_s += seconds
        return seconds

    def clock(self) -> float:
        """Simulated seconds, so the budget binds as on a real pool."""
        return self.elapsed_s


class NeedleRow(NamedTuple):
    policy: str
    sigma: float
    needle: int
    draw: int
    chunk_size: int | None
    captured: float  # 1 - chosen / native


def needle_rows(
    policies: dict[str, Policy],
    draws: int,
    gain: float,
    sigmas: Sequence[float],
    settings: Settings,
) -> list[NeedleRow]:
    rows = []
    for name, policy in policies.items():
        candidates = candidate_list(policy.candidates, NUM_ENVS, NTHREAD)
        needles = [c for c in candidates if c is not None][::3]
        for sigma in sigmas:
            for k, good in enumerate(needles):
                for draw in range(draws):
                    w = Needle(good, gain, sigma, seed=100 * draw + k)
                    pol = attrs.evolve(policy, seed=draw)
                    decision = chunktune.resolve_sync(w, settings=settings, policy=pol)
                    where = f"{name} on needle {good} at {sigma:.0%} draw {draw}"
                    chosen = scored(decision, where).chunk_size
                    captured = 1.0 - w.true_time(chosen) / w.true_time(None)
                    rows.append(NeedleRow(name, sigma, good, draw, chosen, captured))
    return rows


def report(rows: Sequence[NeedleRow], gain: float) -> str:
    lines = [f"{'policy':10s} {'noise':>6s} {'needle':>7s} {'captured':>9s} {'found':>7s}"]
    for key in dict.fromkeys((r.policy, r.sigma, r.needle) for r in rows):
        mine = [r for r in rows if (r.policy, r.sigma, r.needle) == key]
        found = sum(r.chunk_size == r.needle for r in mine)
        captured = float(np.mean([r.captured for r in mine]))
        lines.append(
            f"{key[0]:10s} {key[1]:6.0%} {key[2]:7d} {captured / gain:9.0%} "
            f"{found:3d}/{len(mine):<3d}"
        )
    for name in dict.fromkeys(r.policy for r in rows):
        mine = [r for r in rows if r.policy == name]
        false = sum(r.chunk_size is not None and r.chunk_size != r.needle for r in mine)
        share = sum(r.captured for r in mine) / (gain * len(mine))
        lines.append(
            f"{name}: {share:.1%} of the gain captured over {len(mine)} runs; "
            f"{false} false confirmations (a size no faster than native)"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--draws", type=at_least_one, default=20, help="noise draws per needle")
    parser.add_argument("--gain", type=float, default=0.06, help="how much faster the needle is")
    parser.add_argument("--policies", default="balanced", help="comma-separated names")
    args = parser.parse_args(argv)
    if not 0.0 < args.gain < 1.0:
        parser.error(f"--gain {args.gain:g}: expected a share faster than native, 0 < GAIN < 1")
    own_sweep_lock()
    settings = bench_settings()
    policies = policies_or_exit(parser, settings, args.policies.split(","), "--policies")
    rows = needle_rows(policies, args.draws, args.gain, (0.03, 0.06, 0.10), settings)
    print(report(rows, args.gain))
    return 0


if __name__ == "__main__":
    sys.exit(main())
