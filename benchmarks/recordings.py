"""One row per recording of later days: what was on offer, and what each policy took.

    python benchmarks/recordings.py                                 balanced and seed
    python benchmarks/recordings.py --policies balanced,shared --draws 20
    python benchmarks/recordings.py --traces benchmarks/traces/manycore

A recording is a folder of traces made in one sitting (the traces directly in
``--traces`` are one more). Each trace is replayed ``--draws`` times per policy, as
``run.py --no-sim --traces FOLDER`` replays it, and each folder is summed as ``run.py``
sums its traces: the gain on offer (native against the trace's best size, as it
appears, and held out: the best of half of the rounds scored on the other half), the
gain each policy captured, and its draws more than 0.5% slower than native by the
trace's truth. "a call" is how much one call differs from the next once the round's
level is taken out (robust sigma, the range over the folder's traces): the machine's
noise that day. Prints a Markdown table, oldest recording first; the README's table
of later days is this script's output.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from cases import trace_files, traces_folder
from measure import (
    BenchmarkError,
    TraceRow,
    bench_settings,
    check_replayable,
    own_sweep_lock,
    policies_named,
    trace_rows,
)
from report import summarize_traces
from trace_stats import stats

from chunktune import ChunktuneError
from chunktune._trace import load_trace

HERE = Path(__file__).resolve().parent


def recordings(folder: Path) -> dict[Path, list[Path]]:
    """The traces under ``folder``, by the folder that holds them, oldest recording first."""
    found: dict[Path, list[Path]] = {}
    for path in trace_files(folder):
        found.setdefault(path.parent, []).append(path)
    return dict(sorted(found.items(), key=lambda item: _recorded(item[1])))


def _recorded(paths: Sequence[Path]) -> str:
    return min(load_trace(p).recorded for p in paths)


def _share(captured: float, offered: float) -> str:
    return f"{captured:+.2%} ({captured / offered:.0%})" if offered > 0 else f"{captured:+.2%}"


def _span(low: float, high: float) -> str:
    return f"{low:.0%}" if f"{low:.0%}" == f"{high:.0%}" else f"{low:.0%}-{high:.0%}"


def _summed(rows: Sequence[TraceRow], policies: Sequence[str]) -> list[str]:
    """The cells of ``rows`` summed: the gain offered (held out), then each policy's
    capture and its draws slower than native."""
    summary = summarize_traces(rows)
    offered = summary[policies[0]]  # what was on offer: the same under every policy
    cells = [f"{offered['offered']:.2%} ({offered['offered_held_out']:.2%})"]
    for policy in policies:
        took = summary[policy]
        cells += [_share(took["captured"], offered["offered"]), str(took["draws_slower"])]
    return cells


def _markdown(cells: Sequence[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def row(name: str, paths: Sequence[Path], rows: Sequence[TraceRow], policies: Sequence[str]) -> str:
    """One recording's Markdown row (``rows``: its traces' replays, every policy's)."""
    sigmas = [stats(p)["sigma"] for p in paths]
    return _markdown(
        [
            f"`{name}`",
            _recorded(paths)[:10],
            ", ".join(p.stem for p in paths),
            _span(min(sigmas), max(sigmas)),
            *_summed(rows, policies),
        ]
    )


def table(
    folder: Path, policies: Mapping[str, object], draws: int, runs: Mapping[Path, list[TraceRow]]
) -> str:
    """The Markdown table: a header, one row per recording, and every recording summed."""
    names = list(policies)
    head = ["recording", "recorded", "batches", "a call", "offered (held out)"]
    for name in names:
        head += [name, "slower"]
    lines = [_markdown(head), "|" + " --- |" * len(head)]
    groups = recordings(folder)
    for parent, paths in groups.items():
        name = str(parent.relative_to(folder)) if parent != folder else "./"
        lines.append(row(name, paths, [r for p in paths for r in runs[p]], names))
    everything = [r for rows in runs.values() for r in rows]
    totals = [f"all ({len(groups)})", "", f"{len(runs)} traces, {draws} draws each", ""]
    lines.append(_markdown([*totals, *_summed(everything, names)]))
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--traces", type=traces_folder, default=HERE / "traces-later",
                        help="a folder of recordings (default: traces-later)")  # fmt: skip
    parser.add_argument("--policies", default="balanced,seed", help="comma-separated")
    parser.add_argument("--draws", type=int, default=10, help="replays per trace and policy")
    args = parser.parse_args(argv)
    if args.draws < 1:
        parser.error(f"--draws {args.draws}: expected at least 1")
    own_sweep_lock()
    try:
        settings = bench_settings()
        policies = policies_named(settings, [p for p in args.policies.split(",") if p])
    except ChunktuneError as exc:
        parser.error(str(exc))
    if not policies:
        parser.error(f"--policies {args.policies!r}: expected at least one policy name")
    paths = trace_files(args.traces)
    try:  # a trace of some sizes (record --sizes), or a file not a trace, before any replay
        check_replayable(paths, policies)
    except (BenchmarkError, ChunktuneError) as exc:
        print(f"recordings.py: error: {exc}", file=sys.stderr)
        return 2
    runs = {p: trace_rows(p, policies, args.draws, settings) for p in paths}
    print(table(args.traces, policies, args.draws, runs))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
