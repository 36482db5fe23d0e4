"""Policies scored on truth they never saw: replay half of each trace's rounds, score on the rest.

    python benchmarks/held_out.py [--draws 20] [--policies balanced,seed] [--ceiling]

The trace report (``run.py``) scores a choice by the trace's truth, the mean over
all its rounds: the same recorded calls the replay draws from, and the same truth
that names the best size. The gain "on offer" there is the best size by that
truth, and part of it is luck: of 24-192 sizes each known to a few percent, the
one that came out best mostly also came out lucky (``offered_gain``'s held-out
figure measures how much).

Here every draw splits the trace's rounds into two random halves. The policy
replays half A only; its choice is scored on half B. The reference is what an
exhaustive, unbudgeted measurement of half A picks (A's best size), scored on B.
Both choose on A alone and both are scored on B, so neither score carries the
luck that made a size look best, and the ratio of their sums is a share of a gain
that is really there. Half B's own noise stays in both scores (it averages out
over draws, not within one): a draw scored slower than native is counted, and
counted again only when it is slower by more than twice B's truth error.

``--ceiling`` adds ``ceiling.py``'s known-best confirmation as one more row: A's best
size, confirmed against native on a replay of A with the first policy's test and
budget, scored on B. What a policy that searched perfectly would capture at that budget.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping, Sequence
from typing import NamedTuple

import attrs
import numpy as np
from cases import at_least_one, trace_files, trace_name, traces_folder
from ceiling import confirm_known_best
from measure import (
    BenchmarkError,
    bench_settings,
    check_replayable,
    own_sweep_lock,
    policies_or_exit,
    scored,
)

import chunktune
from chunktune import ChunktuneError, Policy, Settings
from chunktune._trace import Trace, load_trace
from chunktune.sim import ReplayWorkload

HARM = 0.005  # a draw scored more than this slower than native is a harmful one


class HeldOutRow(NamedTuple):
    """One policy's choice on one draw: replayed on half A, scored on half B."""

    trace: str
    policy: str
    draw: int
    chunk_size: int | None
    gain: float  # 1 - chosen / native, by half B
    best_gain: float  # the same for half A's best size
    truth_error: float  # half B's standard error of the chosen size against native
    probe_seconds: float
    reason: str = ""  # the decision's reason (the ceiling's rows: none)


def halves(rounds: int, draw: int) -> tuple[list[int], list[int]]:
    """Draw ``draw``'s split of ``rounds`` rounds: (replayed, scoring), disjoint, all rounds."""
    perm = [int(r) for r in np.random.default_rng(draw).permutation(rounds)]
    return sorted(perm[: rounds // 2]), sorted(perm[rounds // 2 :])


class Split(NamedTuple):
    """One draw's split of a trace: half A to replay, half B's truth to score on."""

    seen: Trace  # half A
    judge: ReplayWorkload  # half B
    native_s: float  # native's time by half B
    best: int  # A's best size

    def gain(self, chunk_size: int | None) -> float:
        """``chunk_size``'s gain over native by half B's truth."""
        return 1.0 - self.judge.true_time(chunk_size) / self.native_s


def split(trace: Trace, draw: int) -> Split:
    """Draw ``draw``'s split of ``trace`` (:func:`halves`), judged and with A's best."""
    replayed, scoring = halves(trace.rounds, draw)
    seen = trace.select_rounds(replayed)
    judge = ReplayWorkload(trace.select_rounds(scoring))
    return Split(seen, judge, judge.true_time(None), ReplayWorkload(seen).oracle()[0])


def held_out_rows(
    trace: Trace,
    name: str,
    policies: Mapping[str, Policy],
    draws: int,
    settings: Settings,
    *,
    ceiling: Policy | None = None,
) -> list[HeldOutRow]:
    """Every policy on ``draws`` splits of ``trace``; one row per policy and draw.

    With ``ceiling``, one more row per draw (policy ``"ceiling"``): A's best size
    confirmed against native with that policy's test and budget, or native.
    """
    rows: list[HeldOutRow] = []
    for d in range(draws):
        seen, judge, _, best = part = split(trace, d)
        best_gain = part.gain(best)
        if ceiling is not None:
            replay = ReplayWorkload(seen, seed=d, name=name)
            ok = best != trace.native and confirm_known_best(
                replay, best, ceiling, ceiling.time_budget_s
            )
            chosen = best if ok else None
            rows.append(
                HeldOutRow(
                    trace=name,
                    policy="ceiling",
                    draw=d,
                    chunk_size=chosen,
                    gain=part.gain(chosen),
                    best_gain=best_gain,
                    truth_error=judge.truth_error(chosen),
                    probe_seconds=replay.clock(),
                )
            )
        for policy_name, policy in policies.items():
            workload = ReplayWorkload(seen, seed=d, name=name)
            decision = scored(
                chunktune.resolve_sync(
                    workload, settings=settings, policy=attrs.evolve(policy, seed=d)
                ),
                f"{policy_name} on {name} draw {d}",
            )
            rows.append(
                HeldOutRow(
                    trace=name,
                    policy=policy_name,
                    draw=d,
                    chunk_size=decision.chunk_size,
                    gain=part.gain(decision.chunk_size),
                    best_gain=best_gain,
                    truth_error=judge.truth_error(decision.chunk_size),
                    probe_seconds=decision.probe_seconds,
                    reason=decision.reason,
                )
            )
    return rows


class Summary(NamedTuple):
    """One policy over every trace and draw."""

    draws: int
    captured: float  # sum over traces of the mean held-out gain
    best: float  # sum over traces of the (positive) mean held-out gain of A's best size
    slower: int  # draws scored more than HARM slower than native
    beyond_noise: int  # ... and by more than twice the scoring half's truth error
    probe_seconds: float


def summarize(rows: Sequence[HeldOutRow]) -> dict[str, Summary]:
    """Per policy: what it captured against what A's best size gives, and its harmful draws."""
    out: dict[str, Summary] = {}
    for policy in dict.fromkeys(r.policy for r in rows):
        mine = [r for r in rows if r.policy == policy]
        traces = dict.fromkeys(r.trace for r in mine)
        captured = sum(float(np.mean([r.gain for r in mine if r.trace == t])) for t in traces)
        best = sum(
            max(0.0, float(np.mean([r.best_gain for r in mine if r.trace == t]))) for t in traces
        )
        out[policy] = Summary(
            draws=len(mine),
            captured=captured,
            best=best,
            slower=sum(r.gain < -HARM for r in mine),
            beyond_noise=sum(r.gain < -max(HARM, 2.0 * r.truth_error) for r in mine),
            probe_seconds=sum(r.probe_seconds for r in mine),
        )
    return out


# what each kind of decision's reason says, first match wins; a size chosen is "left native"
REASON_KINDS: tuple[tuple[str, str], ...] = (
    ("could not confirm", "not confirmed"),
    ("too noisy to confirm", "noise gate"),
    ("upper bound): short of the", "rejected"),
    ("too long for the budget", "pool too slow"),
    ("measured faster than native", "nothing faster"),
    ("within the noise", "within the noise"),
    ("margin", "under the margin"),
)


def reason_kind(chunk_size: int | None, reason: str) -> str:
    """The kind of a decision, for the loss by reason (``--reasons``)."""
    if chunk_size is not None:
        return "left native"
    return next((kind for phrase, kind in REASON_KINDS if phrase in reason), "other")


def reasons_report(rows: Sequence[HeldOutRow]) -> str:
    """Per policy and kind of decision: the draws, A's best scored on B, what was captured.

    Summed over draws (not averaged per trace as the main table is), so a kind's loss is
    the gain the draws of that kind left: where a policy's held-out loss goes.
    """
    lines = [
        f"{'policy':10s} {'decision':18s} {'draws':>5s} {'A best':>8s} {'captured':>9s} "
        f"{'loss':>8s}"
    ]
    for policy in dict.fromkeys(r.policy for r in rows if r.policy != "ceiling"):
        kinds: dict[str, list[HeldOutRow]] = {}
        for r in rows:
            if r.policy == policy:
                kinds.setdefault(reason_kind(r.chunk_size, r.reason), []).append(r)
        by_loss = sorted(kinds.items(), key=lambda kv: -sum(r.best_gain - r.gain for r in kv[1]))
        for kind, mine in by_loss:
            best, got = sum(r.best_gain for r in mine), sum(r.gain for r in mine)
            lines.append(
                f"{policy:10s} {kind:18s} {len(mine):5d} {best:+8.1%} {got:+9.1%} "
                f"{best - got:+8.1%}"
            )
    return "\n".join(lines)


def report(rows: Sequence[HeldOutRow]) -> str:
    """Per trace, then per policy."""
    policies = list(dict.fromkeys(r.policy for r in rows))
    lines = [f"{'trace':28s} {'A best':>8s} " + " ".join(f"{p:>9s}" for p in policies)]
    for t in dict.fromkeys(r.trace for r in rows):
        mine = [r for r in rows if r.trace == t]
        best = float(np.mean([r.best_gain for r in mine]))  # every policy sees every draw
        gains = [[r.gain for r in mine if r.policy == p] for p in policies]
        cells = [f"{float(np.mean(g)):+9.2%}" if g else f"{'-':>9s}" for g in gains]
        lines.append(f"{t:28s} {best:+8.2%} " + " ".join(cells))
    lines.append("")
    lines.append(
        f"{'policy':10s} {'draws':>5s} {'A best':>8s} {'captured':>9s} {'share':>6s} "
        f"{'>0.5% slower':>12s} {'beyond 2 err':>12s} {'probe s':>8s}"
    )
    for policy, s in summarize(rows).items():
        share = f"{s.captured / s.best:.0%}" if s.best > 0 else "-"
        lines.append(
            f"{policy:10s} {s.draws:5d} {s.best:8.2%} {s.captured:+9.2%} {share:>6s} "
            f"{s.slower:12d} {s.beyond_noise:12d} {s.probe_seconds:8.1f}"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--draws", type=at_least_one, default=20, help="random splits per trace")
    parser.add_argument("--policies", default="balanced,seed", help="comma-separated names")
    parser.add_argument(
        "--traces", type=traces_folder, help="directory of traces (default: traces/)"
    )
    parser.add_argument(
        "--ceiling", action="store_true", help="add the known-best confirmation (ceiling.py)"
    )
    parser.add_argument(
        "--reasons", action="store_true", help="also the loss by kind of decision, per policy"
    )
    args = parser.parse_args(argv)
    own_sweep_lock()
    settings = bench_settings()
    policies = policies_or_exit(parser, settings, args.policies.split(","), "--policies")
    ceiling = next(iter(policies.values())) if args.ceiling else None
    files = trace_files(*([args.traces] if args.traces else []))
    try:  # a trace of some sizes (record --sizes) is refused before anything runs
        check_replayable(files, policies)
    except (BenchmarkError, ChunktuneError) as exc:  # a TraceError: a file not a trace
        print(f"held_out.py: error: {exc}", file=sys.stderr)
        return 2
    rows: list[HeldOutRow] = []
    for path in files:
        trace = load_trace(path)
        rows += held_out_rows(
            trace, trace_name(path), policies, args.draws, settings, ceiling=ceiling
        )
    print(
        "replayed on half of each trace's rounds, scored on the other half "
        "(gain = 1 - chosen/native by the scoring half)\n"
    )
    print(report(rows))
    if args.reasons:
        print("\nwhere the held-out gain went, summed over draws, by kind of decision:\n")
        print(reasons_report(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
