"""A decision measured busy, served calm: batches recorded both ways, choices scored by both truths.

    python benchmarks/cross_regime.py [--draws 10] [--policy balanced] [--only NAME ...]
                                      [--pair BUSY_DIR CALM_DIR ...]

For every trace in ``benchmarks/traces/busy/`` (recorded beside other work) and its calm
twin of the same name in ``benchmarks/traces/`` (or in each ``--pair`` of folders
instead, such as ``traces-later/2026-12-04-busy`` and ``traces-later/2026-12-04-calm``,
the same batches an hour apart), the policy runs on ``--draws`` replays
of each, and every choice is scored by the calm truth and by the busy truth: the gain
over native that the chosen size gives, summed over batches. "busy on calm" is what a
decision measured while the machine was busy is worth once it is calm, the case in
which chunktune measures again (``chunktune._load``); "calm on calm" what measuring
again there gives. The other two columns are the reverse. Runs more than 0.5% slower
than native by the truth they are scored on are counted. Not a test: it prints figures.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

import attrs
import numpy as np
from measure import bench_settings, own_sweep_lock, policies_or_exit

import chunktune
from chunktune import Policy, Settings
from chunktune.sim import ReplayWorkload

__all__ = ["Crossed", "cross", "main"]

TRACES = Path(__file__).parent / "traces"
SLOWER = -0.005


@attrs.frozen(kw_only=True)
class Crossed:
    """One batch: the gain on offer by each truth, and each regime's choices scored by each."""

    name: str
    offer: dict[str, float]
    # gains[measured_on][scored_on]: the mean over draws of the choice's gain over native
    gains: dict[str, dict[str, float]]
    slower: dict[str, dict[str, int]]
    chosen: dict[str, tuple[int | None, ...]]


def _gain(truth: ReplayWorkload, chunk: int | None) -> float:
    return 1.0 - truth.true_time(chunk) / truth.true_time(None)


def cross(busy: Path, calm: Path, policy: Policy, draws: int, settings: Settings) -> Crossed:
    """``policy`` on ``draws`` replays of each trace, every choice scored by both truths."""
    paths = {"busy": busy, "calm": calm}
    truths = {k: ReplayWorkload.from_file(p) for k, p in paths.items()}
    chosen: dict[str, tuple[int | None, ...]] = {}
    for k, path in paths.items():
        chosen[k] = tuple(
            chunktune.resolve_sync(
                ReplayWorkload.from_file(path, seed=d), settings=settings, policy=policy
            ).chunk_size
            for d in range(draws)
        )
    gains = {
        m: {s: float(np.mean([_gain(truths[s], c) for c in chosen[m]])) for s in truths}
        for m in chosen
    }
    slower = {
        m: {s: sum(_gain(truths[s], c) < SLOWER for c in chosen[m]) for s in truths} for m in chosen
    }
    offer = {k: _gain(t, t.oracle()[0]) for k, t in truths.items()}
    return Crossed(name=busy.stem, offer=offer, gains=gains, slower=slower, chosen=chosen)


def _cell(row: Crossed, measured: str, scored: str) -> str:
    return f"{row.gains[measured][scored]:+.2%} ({row.slower[measured][scored]})"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--draws", type=int, default=10)
    parser.add_argument("--policy", default="balanced")
    parser.add_argument("--only", nargs="*", default=None, help="trace names (stems) to run")
    parser.add_argument(
        "--pair",
        nargs=2,
        action="append",
        type=Path,
        metavar=("BUSY_DIR", "CALM_DIR"),
        help="folders of twins to cross (repeatable; default traces/busy traces)",
    )
    args = parser.parse_args(argv)
    if args.draws < 1:
        parser.error(f"--draws {args.draws}: expected at least 1")
    pairs = args.pair or [(TRACES / "busy", TRACES)]
    twins = [(b, calm / b.name) for busy, calm in pairs for b in sorted(busy.glob("*.json"))]
    if args.only:
        twins = [(b, c) for b, c in twins if b.stem in args.only]
    if not twins:
        parser.error(f"no busy trace to cross{' of those names' if args.only else ''}")
    if missing := [str(c) for _, c in twins if not c.is_file()]:
        parser.error(f"no calm twin: {', '.join(missing)}")
    own_sweep_lock()
    settings = bench_settings()
    (policy,) = policies_or_exit(parser, settings, [args.policy], "--policy").values()
    print(
        "| batch | offer calm | busy choice on calm truth | calm choice on calm truth "
        "| offer busy | busy choice on busy truth | calm choice on busy truth |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- |")
    rows = []
    for busy, calm in twins:
        row = cross(busy, calm, policy, args.draws, settings)
        if len(pairs) > 1:  # one batch recorded on several days keeps a row each
            row = attrs.evolve(row, name=f"{busy.parent.name}/{row.name}")
        rows.append(row)
        print(
            f"| {row.name} | {row.offer['calm']:+.2%} | {_cell(row, 'busy', 'calm')} "
            f"| {_cell(row, 'calm', 'calm')} | {row.offer['busy']:+.2%} "
            f"| {_cell(row, 'busy', 'busy')} | {_cell(row, 'calm', 'busy')} |",
            flush=True,
        )

    def total(measured: str, scored: str) -> str:
        gain = sum(r.gains[measured][scored] for r in rows)
        return f"{gain:+.2%} ({sum(r.slower[measured][scored] for r in rows)})"

    print(
        f"| sum | {sum(r.offer['calm'] for r in rows):+.2%} | {total('busy', 'calm')} "
        f"| {total('calm', 'calm')} | {sum(r.offer['busy'] for r in rows):+.2%} "
        f"| {total('busy', 'busy')} | {total('calm', 'busy')} |"
    )
    print(f"({args.draws} draws a trace; in brackets, runs > 0.5% slower than native)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
