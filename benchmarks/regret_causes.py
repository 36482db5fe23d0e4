"""Why `balanced` lost where it lost: every simulated run above a regret, with its cause.

    python benchmarks/regret_causes.py                   5 seeds, runs above 1%
    python benchmarks/regret_causes.py --seeds 15 --above 0.01
    python benchmarks/regret_causes.py --cases lognormal-768x12 --above -1   every run
    python benchmarks/regret_causes.py --traces benchmarks/traces     replayed traces

Runs the simulated suite of ``run.py`` (same cases, same seeds) under one policy, follows
each sweep's progress events, and sorts every run whose regret exceeds ``--above`` by
where the loss happened:

- ``never proposed``: no size within ``--above`` of the best was ever measured;
- ``out-raced``: one was measured, and the policy chose another size;
- ``confirm inconclusive``: the race's choice was confirmed against native and failed,
  split by whether the size held against native was itself within ``--above`` of the best
  (``good size held``) or not (``weaker size held``);
- ``noise gate``: the gate kept native (the margin could not be confirmed in the budget);
- ``budget``: the budget ended the race before a candidate could be judged;
- ``kept at race end``: the race ended with native chosen (within the noise, under the
  margin, no candidate faster);
- ``chose the best``: nothing lost (only with ``--above`` below 0, which lists every run;
  a size is then "within" it when it is the best itself).

Prints one line per run and the categories with their summed regret.

``--traces DIR`` replays every trace under ``DIR`` instead, ``--draws`` times each with
the draws of ``run.py``'s trace table (draw ``d`` seeds the replay and the policy), scores
each choice by the trace's truth, and sorts every draw that captured less than half its
trace's held-out offer (``ReplayWorkload.offered_gain``: the best size picked on half the
rounds, scored on the other half) by the same causes, a size being "good" when its true
gain is at least that half. A draw's lost points are the held-out offer less its gain;
per trace they are averaged over draws (so they add up as the trace table's gains do).
Per cause it also says what the budget paid for: the race's calls and the confirmation's
pairs. Not a test.
"""

from __future__ import annotations

import argparse
import functools
import sys
from collections import defaultdict
from collections.abc import Collection
from pathlib import Path

import attrs

sys.path.insert(0, str(Path(__file__).resolve().parent))

from cases import SIM_CASES, at_least_one, trace_files, trace_name, traces_folder
from measure import bench_settings, own_sweep_lock, policies_or_exit

import chunktune
from chunktune._events import ProgressEvent
from chunktune.sim import ReplayWorkload, SimulatedWorkload


@attrs.frozen(kw_only=True)
class Cause:
    """One lost run: where, what it chose, what it measured, and the cause."""

    case: str
    seed: int
    regret: float
    chosen: int | None
    native: int
    oracle: int
    offered: float  # the best size's true gain over native
    measured: tuple[int, ...]
    best_measured: int
    best_measured_regret: float
    stop: str
    confirmed: bool
    cause: str
    held: int | None  # the size held against native in the confirmation (None: none)
    held_gain: float  # its true gain over native
    pairs: int  # the confirmation's calls, halved
    probe_s: float  # the sweep's probe seconds


def _cause(
    chosen: int | None,
    near_measured: bool,
    held_good: bool | None,
    stop: str,
    partial: bool,
) -> str:
    """Where a lost run lost: the categories of the module's docstring.

    ``near_measured``: a size within the threshold of the best was measured;
    ``held_good``: whether the size confirmed against native was one (None: no
    confirmation ran).
    """
    if chosen is not None:
        return "out-raced" if near_measured else "never proposed"
    if held_good is not None:
        return f"confirm inconclusive, {'good' if held_good else 'weaker'} size held"
    if stop == "noisy":
        return "noise gate"
    if partial or stop in ("budget", "too_slow"):
        return "budget"
    return "kept at race end"


@attrs.frozen
class _Sweep:
    """What one sweep's progress events say it did."""

    measured: tuple[int, ...]  # the sizes probed in the race, native left out
    stop: str  # the ``done`` event's message
    held: int | None  # the size held against native in the confirmation (None: none)
    calls: int  # the race's calls (probes, native's included)
    pairs: int  # the confirmation's calls, halved

    @classmethod
    def read(cls, events: list[ProgressEvent]) -> _Sweep:
        """The sweep that sent ``events``."""
        probes = [e.chunk_size for e in events if e.kind == "probe"]
        confirms = [e.chunk_size for e in events if e.kind == "confirm"]
        return cls(
            measured=tuple(sorted({c for c in probes if c is not None})),
            stop=next((e.message for e in reversed(events) if e.kind == "done"), ""),
            held=next((c for c in confirms if c is not None), None),
            calls=len(probes),
            pairs=len(confirms) // 2,
        )


def causes(policy_name: str, seeds: int, above: float, cases: Collection[str] = ()) -> list[Cause]:
    """Every run of ``policy_name`` on the simulated suite whose regret exceeds ``above``.

    ``cases``: the case names to run (empty: all); each keeps its index in the suite, so
    its landscape and noise are ``run.py``'s.
    """
    settings = bench_settings()
    policy = settings.get_policy(policy_name)
    lost: list[Cause] = []
    for index, case in enumerate(SIM_CASES):
        if cases and case.name not in cases:
            continue
        truth = case.workload(index)
        oracle, _ = truth.oracle()
        native_s = truth.true_time(None)
        for s in range(seeds):
            events: list[ProgressEvent] = []
            decision = chunktune.resolve_sync(
                case.workload(index, seed=1000 * index + s),
                settings=settings,
                policy=attrs.evolve(policy, seed=s),
                on_progress=events.append,
            )
            regret = truth.regret(decision.chunk_size)
            if regret <= above:
                continue
            sweep = _Sweep.read(events)
            best = min(sweep.measured, key=truth.regret, default=decision.native_chunk)
            held = sweep.held
            # a negative --above lists every run; no size is within it of the best, so
            # each would read "never proposed", the best chosen or measured included
            near = max(above, 0.0)
            lost.append(
                Cause(
                    case=case.name,
                    seed=s,
                    regret=regret,
                    chosen=decision.chunk_size,
                    native=decision.native_chunk,
                    oracle=oracle,
                    offered=_true_gain(truth, native_s, oracle),
                    measured=sweep.measured,
                    best_measured=best,
                    best_measured_regret=truth.regret(best),
                    stop=sweep.stop,
                    confirmed=decision.gain_ci is not None,
                    cause="chose the best"
                    if regret <= 0.0
                    else _cause(
                        decision.chunk_size,
                        truth.regret(best) <= near,
                        None if held is None else truth.regret(held) <= near,
                        sweep.stop,
                        decision.partial,
                    ),
                    held=held,
                    held_gain=0.0 if held is None else _true_gain(truth, native_s, held),
                    pairs=sweep.pairs,
                    probe_s=decision.probe_seconds,
                )
            )
    return lost


def _true_gain(
    truth: SimulatedWorkload | ReplayWorkload, native_s: float, size: int | None
) -> float:
    """``size``'s gain over native (``native_s`` seconds) by the landscape's truth."""
    return 1.0 - truth.true_time(size) / native_s


@attrs.frozen(kw_only=True)
class TraceLoss:
    """One replayed draw that captured less than half its trace's held-out offer."""

    trace: str
    draw: int
    gain: float  # the chosen size's true gain over native (the trace's truth)
    held_out: float  # the trace's held-out offer
    chosen: int | None
    native: int
    oracle: int
    best_measured: int | None  # the measured size of the best true gain (None: none)
    best_measured_gain: float
    stop: str
    cause: str
    held: int | None  # the size held against native in the confirmation (None: none)
    held_gain: float  # its true gain over native
    calls: int  # the race's calls (probes, native's included)
    pairs: int  # the confirmation's calls, halved
    probe_s: float
    measured: tuple[int, ...]

    @property
    def lost(self) -> float:
        """The held-out offer less the gain this draw captured."""
        return self.held_out - self.gain


def trace_causes(
    policy_name: str, draws: int, directory: Path
) -> tuple[list[TraceLoss], dict[str, float]]:
    """Every draw of ``policy_name`` on the traces under ``directory`` that captured less
    than half its trace's held-out offer, and each trace's held-out offer by name.

    Draw ``d`` seeds the replay and the policy, as ``run.py``'s trace table does.
    """
    settings = bench_settings()
    policy = settings.get_policy(policy_name)
    lost: list[TraceLoss] = []
    offers: dict[str, float] = {}
    for path in trace_files(directory):
        name = trace_name(path, directory)
        truth = ReplayWorkload.from_file(path)
        oracle, _ = truth.oracle()
        native_s = truth.true_time(None)
        held_out = truth.offered_gain()[1]
        offers[name] = held_out

        gain = functools.partial(_true_gain, truth, native_s)
        for d in range(draws):
            events: list[ProgressEvent] = []
            decision = chunktune.resolve_sync(
                ReplayWorkload.from_file(path, seed=d),
                settings=settings,
                policy=attrs.evolve(policy, seed=d),
                on_progress=events.append,
            )
            got = gain(decision.chunk_size)
            if not got < held_out / 2:
                continue
            sweep = _Sweep.read(events)
            best = max(sweep.measured, key=gain, default=None)
            held = sweep.held
            good = held_out / 2
            lost.append(
                TraceLoss(
                    trace=name,
                    draw=d,
                    gain=got,
                    held_out=held_out,
                    chosen=decision.chunk_size,
                    native=decision.native_chunk,
                    oracle=oracle,
                    best_measured=best,
                    best_measured_gain=0.0 if best is None else gain(best),
                    stop=sweep.stop,
                    cause=_cause(
                        decision.chunk_size,
                        best is not None and gain(best) >= good,
                        None if held is None else gain(held) >= good,
                        sweep.stop,
                        decision.partial,
                    ),
                    held=held,
                    held_gain=0.0 if held is None else gain(held),
                    calls=sweep.calls,
                    pairs=sweep.pairs,
                    probe_s=decision.probe_seconds,
                    measured=sweep.measured,
                )
            )
    return lost, offers


def trace_report(lost: list[TraceLoss], offers: dict[str, float], draws: int) -> str:
    """One line per lost draw, then the lost points by cause and by trace."""
    lines = [
        "trace draw gain held-out-offer chosen native oracle best-measured(gain) stop cause "
        "held(true gain, pairs) calls probe-s measured"
    ]
    for x in lost:
        chosen = "native" if x.chosen is None else str(x.chosen)
        lines.append(
            f"{x.trace} {x.draw} {x.gain:+.2%} {x.held_out:+.2%} {chosen} {x.native} {x.oracle} "
            f"{x.best_measured}({x.best_measured_gain:+.2%}) {x.stop} {x.cause} "
            f"{x.held}({x.held_gain:+.2%}, {x.pairs}) {x.calls} {x.probe_s:.2f} "
            f"{','.join(map(str, x.measured))}"
        )
    offered = sum(max(0.0, h) for h in offers.values())
    lines.append(
        f"\n{len(lost)} of {draws * len(offers)} draws captured under half their trace's "
        f"held-out offer (summed over traces: {offered:.2%}); points lost per trace are "
        "averaged over its draws"
    )
    lines.append("\nby cause: draws, points lost, mean race calls, mean confirmation pairs")
    by_cause: dict[str, list[TraceLoss]] = defaultdict(list)
    for x in lost:
        by_cause[x.cause].append(x)
    for cause, mine in sorted(by_cause.items(), key=lambda kv: -sum(x.lost for x in kv[1])):
        lines.append(
            f"  {cause}: {len(mine)}, {sum(x.lost for x in mine) / draws:.2%}, "
            f"{sum(x.calls for x in mine) / len(mine):.1f}, "
            f"{sum(x.pairs for x in mine) / len(mine):.1f}"
        )
    lines.append(f"  all: {len(lost)}, {sum(x.lost for x in lost) / draws:.2%}")
    lines.append("\nby trace: held-out offer, draws lost, points lost")
    for name, offer in offers.items():
        mine = [x for x in lost if x.trace == name]
        if mine:
            lines.append(
                f"  {name}: {offer:+.2%}, {len(mine)}, {sum(x.lost for x in mine) / draws:.2%}"
            )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=at_least_one, default=5)
    parser.add_argument("--above", type=float, default=0.01, help="regret threshold (0.01 = 1%%)")
    parser.add_argument("--policy", default="balanced")
    parser.add_argument("--cases", default="", help="comma-separated case names (all)")
    parser.add_argument(
        "--traces", type=traces_folder, help="replay the traces in DIR instead (run.py's draws)"
    )
    parser.add_argument(
        "--draws", type=at_least_one, default=10, help="--traces: replays per trace"
    )
    args = parser.parse_args()
    policies_or_exit(parser, bench_settings(), [args.policy], "--policy")
    own_sweep_lock()
    if args.traces is not None:
        print(trace_report(*trace_causes(args.policy, args.draws, args.traces), args.draws))
        return
    names = [n.strip() for n in args.cases.split(",") if n.strip()]
    unknown = sorted(set(names) - {c.name for c in SIM_CASES})
    if unknown:
        parser.error(f"--cases names no simulated case: {', '.join(unknown)}")
    lost = causes(args.policy, args.seeds, args.above, names)
    print(
        "case seed regret chosen native oracle(offered) best-measured(regret) stop cause "
        "held(true gain, pairs) probe-s measured"
    )
    for c in lost:
        chosen = "native" if c.chosen is None else str(c.chosen)
        print(
            f"{c.case} {c.seed} {c.regret:.2%} {chosen} {c.native} {c.oracle}({c.offered:.2%}) "
            f"{c.best_measured}({c.best_measured_regret:.2%}) {c.stop} {c.cause} "
            f"{c.held}({c.held_gain:.2%}, {c.pairs}) {c.probe_s:.2f} "
            f"{','.join(map(str, c.measured))}"
        )
    total: dict[str, list[float]] = defaultdict(list)
    for c in lost:
        total[c.cause].append(c.regret)
    small = {c.cause: 0 for c in lost}
    for c in lost:
        small[c.cause] += c.offered < 2 * args.above
    print(f"\n{len(lost)} runs above {args.above:.2%}, by cause:")
    print("  cause: runs, summed regret, runs whose best offers under twice --above")
    for cause, regrets in sorted(total.items(), key=lambda kv: -sum(kv[1])):
        print(f"  {cause}: {len(regrets)}, {sum(regrets):.2%}, {small[cause]}")


if __name__ == "__main__":
    main()
