"""The most a confirmed decision can capture within the budget: the best size known in advance.

    python benchmarks/ceiling.py [--draws 10] [--budget 10] [--policy balanced]

A policy that leaves native only on a confirmed gain can never capture more than
one that is *told* the best size and spends the whole budget confirming it: ABBA
pairs against native, run and judged by the sweep's own confirmation (the policy's
alpha, margin, estimator and looks), its plan the pairs the budget pays for. No
search, no race, no refinement: every second goes to the one comparison that
decides. Its regret (simulated suite) and its captured gain (replayed traces) are a
bound on what any search-then-confirm policy at that budget and alpha can reach on
these landscapes, whatever its search.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

import attrs
import numpy as np
from cases import SIM_CASES, at_least_one, trace_files, trace_name, traces_folder
from measure import bench_settings, policies_or_exit
from report import signed_pct

from chunktune import Policy
from chunktune._confirming import run_confirmation
from chunktune._pacing import Pace
from chunktune._probe import Probe
from chunktune.sim import ReplayWorkload


class TraceCeiling(NamedTuple):
    """One trace: the best size's gain as recorded and held out, and the mean captured."""

    name: str
    apparent: float
    held_out: float
    captured: float


def confirm_known_best(workload: Any, best: int, policy: Policy, budget_s: float) -> bool:
    """True when ``best`` is confirmed against native on ABBA pairs within ``budget_s``.

    ``workload`` is a simulated or replayed workload (it has ``clock()``); the plan
    is the pairs the budget pays for at the two sizes' true cost, run and judged by
    the sweep's own confirmation (:func:`chunktune._confirming.run_confirmation`)
    with no race before it, so no noise figure but its own pairs'. Its first look
    trusts the noise of 4 pairs at the test's normal bounds, which lets about 6% of
    null confirmations through where ``confirm_alpha`` is 5% (measured, session 32):
    a slightly lenient test, so the ceiling is, if anything, high.
    """
    per_pair = workload.true_time(None) + workload.true_time(best)
    plan = int(budget_s / per_pair) // 2 * 2
    if plan < policy.confirm_min_pairs:
        return False
    policy = attrs.evolve(policy, time_budget_s=budget_s, extend_budget=False)
    probe = Probe(workload, policy, lambda: None, None, workload.clock)
    verdict, _ = run_confirmation(probe, Pace(probe), best, plan=plan, sigma=0.0, dof=0)
    return verdict.outcome == "confirmed"


def sim_ceiling(policy: Policy, draws: int, budget_s: float) -> list[float]:
    """Regret of the known-best confirmation, one per case and draw."""
    regrets: list[float] = []
    for i, case in enumerate(SIM_CASES):
        truth = case.workload(i)
        best, best_s = truth.oracle()
        for s in range(draws):
            workload = case.workload(i, seed=1000 * i + s)
            ok = best is not None and confirm_known_best(workload, best, policy, budget_s)
            regrets.append(truth.true_time(best if ok else None) / best_s - 1.0)
    return regrets


def trace_ceiling(
    policy: Policy, draws: int, budget_s: float, directory: Path | None = None
) -> list[TraceCeiling]:
    """The known-best confirmation on every recorded trace, ``draws`` replays each."""
    out: list[TraceCeiling] = []
    for path in trace_files(*([directory] if directory else [])):
        truth = ReplayWorkload.from_file(path, seed=0)
        best, best_s = truth.oracle()
        native_s = truth.true_time(None)
        offered, held_out = truth.offered_gain()
        captured = []
        for d in range(draws):
            workload = ReplayWorkload.from_file(path, seed=d)
            ok = best is not None and confirm_known_best(workload, best, policy, budget_s)
            captured.append(1.0 - best_s / native_s if ok else 0.0)
        out.append(TraceCeiling(trace_name(path), offered, held_out, float(np.mean(captured))))
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--draws", type=at_least_one, default=10, help="noise draws per case and trace"
    )
    parser.add_argument("--budget", type=float, help="seconds (default: the policy's budget)")
    parser.add_argument("--policy", default="balanced")
    parser.add_argument(
        "--traces", type=traces_folder, help="directory of traces (default: traces/)"
    )
    parser.add_argument("--no-sim", action="store_true", help="the traces only")
    args = parser.parse_args(argv)
    (policy,) = policies_or_exit(parser, bench_settings(), [args.policy], "--policy").values()
    if args.budget is not None and not args.budget > 0:
        parser.error(f"--budget {args.budget:g}: expected seconds > 0")
    budget = args.budget if args.budget is not None else policy.time_budget_s
    print(
        f"best size known in advance, confirmed with {args.policy}'s test "
        f"(alpha {policy.confirm_alpha:g}, margin {policy.margin:.1%}) in {budget:g} s"
    )
    if not args.no_sim:
        regrets = np.array(sim_ceiling(policy, args.draws, budget))
        per_case = regrets.reshape(len(SIM_CASES), args.draws).mean(axis=1)
        print(
            f"simulated ({len(SIM_CASES)} cases x {args.draws} draws): regret median "
            f"{np.median(regrets):.2%}, p90 {np.percentile(regrets, 90):.2%}, worst case "
            f"{per_case.max():.2%} ({SIM_CASES[int(per_case.argmax())].name})"
        )
    rows = trace_ceiling(policy, args.draws, budget, args.traces)
    for r in rows:
        print(
            f"  {r.name:28s} apparent {r.apparent:6.2%} held-out {signed_pct(r.held_out):>6s} "
            f"captured {r.captured:6.2%}"
        )
    total = sum(r.captured for r in rows)
    apparent = sum(r.apparent for r in rows)
    share = f"{total / apparent:.0%}" if apparent > 0 else "-"  # native best everywhere, or none
    print(
        f"traces ({len(rows)} x {args.draws} draws): captured {total:.2%} of the "
        f"{apparent:.2%} on offer ({share})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
