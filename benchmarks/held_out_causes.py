"""Where a policy's held-out capture falls short of the ceiling's, by phase of the sweep.

    python benchmarks/held_out_causes.py --traces benchmarks/traces/manycore [--draws 20] [-v]

``held_out.py --ceiling`` says how much a policy leaves against the known-best
confirmation on rounds it never saw; ``regret_causes.py --traces`` says where it loses
in sample. This joins the two: each draw splits a trace's rounds as ``held_out.py``
does, the policy replays half A (its progress events followed), the ceiling confirms
A's best size on the same replay, and both choices are scored on half B. A draw's
loss is the ceiling's gain less the policy's (negative where the policy did better),
sorted by what the sweep did:

- ``chose A's best``: the size confirmed is A's best;
- ``chose another, best measured`` / ``..., best never measured``: a weaker (or luckier)
  size confirmed, A's best raced out or never proposed;
- ``not confirmed`` / ``rejected``: the confirmation kept native, split by whether the
  size it held was A's best, another with A's best measured, or another with A's best
  never measured;
- ``noise gate``, and ``native, other`` (within the noise, under the margin, too slow).

Per cause: the draws and the points lost (summed over draws, divided by ``--draws``, so
the causes add up to the ceiling's lead in ``held_out.py``'s table). Not a test.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

import attrs

sys.path.insert(0, str(Path(__file__).resolve().parent))

from cases import at_least_one, trace_files, trace_name
from ceiling import confirm_known_best
from held_out import split
from measure import bench_settings, own_sweep_lock, policies_or_exit
from regret_causes import _Sweep

import chunktune
from chunktune._events import ProgressEvent
from chunktune._trace import load_trace
from chunktune.sim import ReplayWorkload


@attrs.frozen(kw_only=True)
class HeldOutLoss:
    """One draw: the policy's and the ceiling's choices, scored on half B, and the cause."""

    trace: str
    draw: int
    best: int  # A's best size
    ceiling_gain: float  # the ceiling's gain by half B (0.0: it kept native)
    chosen: int | None
    gain: float  # the policy's gain by half B
    held: int | None  # the size the confirmation held against native (None: none ran)
    stop: str
    cause: str

    @property
    def lost(self) -> float:
        """The ceiling's gain less the policy's."""
        return self.ceiling_gain - self.gain


def cause_of(chosen: int | None, reason: str, held: int | None, best: int, measured: bool) -> str:
    """The phase a draw's decision came from: the categories of the module's docstring.

    ``measured``: A's best size was probed in the race.
    """
    where = "best measured" if measured else "best never measured"
    if chosen is not None:
        return "chose A's best" if chosen == best else f"chose another, {where}"
    if "too noisy to confirm" in reason:
        return "noise gate"
    if held is None:
        return "native, other"
    verdict = "not confirmed" if "could not confirm" in reason else "rejected"
    return f"{verdict}, {'best held' if held == best else f'another held, {where}'}"


def held_out_causes(policy_name: str, draws: int, directory: Path) -> list[HeldOutLoss]:
    """Every draw of ``policy_name`` on the traces under ``directory``, with its cause."""
    settings = bench_settings()
    policy = settings.get_policy(policy_name)
    rows: list[HeldOutLoss] = []
    for path in trace_files(directory):
        name = trace_name(path, directory)
        trace = load_trace(path)
        for d in range(draws):
            seen, _, _, best = part = split(trace, d)
            ok = best != trace.native and confirm_known_best(
                ReplayWorkload(seen, seed=d, name=name), best, policy, policy.time_budget_s
            )
            events: list[ProgressEvent] = []
            decision = chunktune.resolve_sync(
                ReplayWorkload(seen, seed=d, name=name),
                settings=settings,
                policy=attrs.evolve(policy, seed=d),
                on_progress=events.append,
            )
            sweep = _Sweep.read(events)
            chosen = decision.chunk_size
            rows.append(
                HeldOutLoss(
                    trace=name,
                    draw=d,
                    best=best,
                    ceiling_gain=part.gain(best) if ok else 0.0,
                    chosen=chosen,
                    gain=part.gain(chosen),
                    held=sweep.held,
                    stop=sweep.stop,
                    cause=cause_of(
                        chosen, decision.reason, sweep.held, best, best in sweep.measured
                    ),
                )
            )
    return rows


def report(rows: Sequence[HeldOutLoss], draws: int, *, verbose: bool = False) -> str:
    """Per cause, most points lost first; with ``verbose``, one line per draw before."""
    lines: list[str] = []
    if verbose:
        for r in rows:
            lines.append(
                f"{r.trace:32s} {r.draw:3d}  A best {r.best:>5}  ceiling {r.ceiling_gain:+.2%}"
                f"  chose {r.chosen!s:>5} {r.gain:+.2%}  held {r.held!s:>5}  "
                f"stop {r.stop:11s} {r.cause}"
            )
        lines.append("")
    by: dict[str, list[HeldOutLoss]] = {}
    for r in rows:
        by.setdefault(r.cause, []).append(r)
    lines.append(f"{'cause':50s} {'draws':>5s} {'points lost':>12s}")
    for cause, mine in sorted(by.items(), key=lambda kv: -sum(r.lost for r in kv[1])):
        lines.append(f"{cause:50s} {len(mine):5d} {100 * sum(r.lost for r in mine) / draws:+12.2f}")
    total = 100 * sum(r.lost for r in rows) / draws
    lines.append(f"{'all: the ceiling less the policy':50s} {len(rows):5d} {total:+12.2f}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--traces", type=Path, required=True, help="a folder of traces")
    parser.add_argument("--draws", type=at_least_one, default=20, help="random splits per trace")
    parser.add_argument("--policy", default="balanced")
    parser.add_argument("-v", "--verbose", action="store_true", help="one line per draw")
    args = parser.parse_args(argv)
    if not trace_files(args.traces):
        print(f"held_out_causes: no traces under {args.traces}", file=sys.stderr)
        return 2
    policies_or_exit(parser, bench_settings(), [args.policy], "--policy")
    own_sweep_lock()
    rows = held_out_causes(args.policy, args.draws, args.traces)
    print(report(rows, args.draws, verbose=args.verbose))
    return 0


if __name__ == "__main__":
    sys.exit(main())
