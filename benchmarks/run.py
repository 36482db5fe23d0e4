"""Benchmark chunktune's policies: simulated landscapes, replayed real traces, live tunes.

    python benchmarks/run.py --quick                  simulated (quick suite) + traces
    python benchmarks/run.py --json full.json         the full simulated suite + traces
    python benchmarks/run.py --no-sim --no-traces --live [--hog]   real tunes, re-measured
    python benchmarks/run.py --unbounded          the search alone: no budget (not live)

Prints tables, a summary per policy and the quality targets; ``--json`` writes every row.
Not a test: it never fails on a figure. The cases are in ``cases.py``, running them in
``measure.py``, summaries and tables in ``report.py``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import sys
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

import attrs

sys.path.insert(0, str(Path(__file__).resolve().parent))

from cases import SIM_CASES, at_least_one, live_cases, trace_files, trace_name, traces_folder
from measure import (
    BenchmarkError,
    LiveRow,
    SimRow,
    TraceRow,
    bench_settings,
    check_replayable,
    live_rows,
    own_sweep_lock,
    policies_named,
    policies_or_exit,
    sim_rows,
    trace_rows,
)
from report import (
    TARGET_POLICY,
    check_targets,
    claims_table,
    live_reasons,
    live_table,
    plot,
    sim_case_table,
    sim_summary_table,
    summarize_sim,
    summarize_traces,
    targets_table,
    trace_case_table,
    trace_summary_table,
)

from chunktune import ChunktuneError
from chunktune._fingerprint import cpu_model, usable_cpus
from chunktune._policy import MAX_LIMIT_S

QUICK_POLICIES = ("balanced", "seed")
FULL_POLICIES = ("balanced", "quick", "thorough", "seed")


_UNBOUNDED_S = MAX_LIMIT_S  # a budget no simulated or replayed sweep reaches


def _names(text: str) -> list[str]:
    return [n.strip() for n in text.split(",") if n.strip()]


def _loadavg() -> list[float]:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return []


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="the quick suite, fewer draws")
    parser.add_argument("--json", type=Path, metavar="OUT", help="write rows and summaries")
    parser.add_argument("--policies", type=_names, help="comma-separated policy names")
    parser.add_argument("--seeds", type=at_least_one, help="noise seeds per simulated case (3/5)")
    parser.add_argument("--draws", type=at_least_one, help="replays per trace (5 quick, 10 full)")
    parser.add_argument("--no-sim", action="store_true", help="skip the simulated suite")
    parser.add_argument("--no-traces", action="store_true", help="skip the replayed traces")
    parser.add_argument(
        "--traces", type=traces_folder, help="directory of traces (default: traces/)"
    )
    parser.add_argument("--live", action="store_true", help="real tunes, re-measured")
    parser.add_argument("--hog", action="store_true", help="live: a CPU hog halfway through")
    parser.add_argument("--tunes", type=at_least_one, default=3, help="live: tunes per policy")
    parser.add_argument(
        "--rounds", type=at_least_one, default=40, help="live: re-measurement rounds"
    )
    parser.add_argument(
        "--remeasure-s",
        type=float,
        default=0.0,
        help="live: re-measure for at least this many seconds (a size's gain moves between "
        "stretches of a noisy machine: stretch_gains.py)",
    )
    parser.add_argument(
        "--nthread", type=at_least_one, help="live: pool size (default: the usable CPUs)"
    )
    parser.add_argument(
        "--cases",
        type=_names,
        help="only cases whose name has one of these (the robots' live cases run only when named)",
    )
    parser.add_argument("--plot", type=Path, metavar="OUT.png", help="regret vs probe cost")
    parser.add_argument(
        "--unbounded",
        action="store_true",
        help="simulated and replayed: no time budget, so the search and the rule are judged "
        "apart from whether the budget pays for them",
    )
    args = parser.parse_args(argv)
    if args.rounds < 2:
        parser.error(f"--rounds {args.rounds}: expected at least 2 (an interval needs two)")
    if not 0 <= args.remeasure_s < math.inf:
        parser.error(f"--remeasure-s {args.remeasure_s}: expected a finite number of seconds >= 0")
    if args.policies is not None:
        policies_or_exit(parser, bench_settings(), args.policies, "--policies")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    start = time.perf_counter()
    own_sweep_lock()
    settings = bench_settings()
    names = args.policies or list(QUICK_POLICIES if args.quick else FULL_POLICIES)
    policies = live_policies = policies_named(settings, names)
    if args.unbounded:
        # no budget to stretch either: an extend_budget policy needs a hard limit to stretch to
        policies = {
            name: attrs.evolve(
                p, time_budget_s=_UNBOUNDED_S, hard_limit_s=None, extend_budget=False
            )
            for name, p in policies.items()
        }

    def wanted(name: str) -> bool:
        return not args.cases or any(c in name for c in args.cases)

    files: list[Path] = []
    if not args.no_traces:
        found = trace_files(*([args.traces] if args.traces else []))
        # the name the rows print (trace_rows'), so --cases picks what the tables show
        files = [f for f in found if wanted(trace_name(f))]
        try:  # now, not after the simulated suite: a partial recording is refused at once
            check_replayable(files, policies)
        except (BenchmarkError, ChunktuneError) as exc:  # a TraceError: a file not a trace
            print(f"run.py: error: {exc}", file=sys.stderr)
            return 2
    # the index seeds a case's landscape: it stays the suite's, whatever is picked
    cases = [
        (i, c)
        for i, c in enumerate(SIM_CASES)
        if (c.quick or not args.quick) and wanted(c.name) and not args.no_sim
    ]
    reals = live_cases(args.cases) if args.live else []
    if args.cases and not (cases or files or reals):
        print(
            f"run.py: error: --cases {','.join(args.cases)}: no case of the suites asked for "
            "has one of these in its name",
            file=sys.stderr,
        )
        return 2
    sim: list[SimRow] = []
    traces: list[TraceRow] = []
    live: list[LiveRow] = []
    if not args.no_sim:
        seeds = args.seeds or (3 if args.quick else 5)
        t0 = time.perf_counter()
        for i, case in cases:
            sim += sim_rows(case, i, policies, seeds, settings)
        print(f"simulated: {len(cases)} cases x {len(policies)} policies x {seeds} seeds "
              f"in {time.perf_counter() - t0:.1f} s\n")  # fmt: skip
        print(sim_case_table(sim, names) + "\n")
        print("simulated summary per policy (regret = chosen/oracle - 1):")
        print(sim_summary_table(summarize_sim(sim)) + "\n")
        print("simulated, confirmed leaves (gain claimed against the truth):")
        print(claims_table(sim) + "\n")
    if not args.no_traces:
        draws = args.draws or (5 if args.quick else 10)
        t0 = time.perf_counter()
        for f in files:
            traces += trace_rows(f, policies, draws, settings)
        if files:
            print(f"traces: {len(files)} recorded landscapes x {len(policies)} policies x "
                  f"{draws} replays in {time.perf_counter() - t0:.1f} s\n")  # fmt: skip
            print(trace_case_table(traces, names) + "\n")
            print("replayed traces per policy (gain = 1 - chosen/native by the trace's truth):")
            print(trace_summary_table(summarize_traces(traces)) + "\n")
            print("replayed, confirmed leaves (gain claimed against the trace's truth):")
            print(claims_table(traces) + "\n")
    load: dict[str, list[float]] = {}
    if args.live:
        nthread = args.nthread or usable_cpus()
        load["before_live"] = _loadavg()
        print(f"load average before the live rows: {load['before_live']}", flush=True)
        for real in reals:
            t0 = time.perf_counter()
            live += live_rows(real, live_policies, settings, nthread=nthread, tunes=args.tunes,
                              rounds=args.rounds, hog=args.hog,
                              remeasure_s=args.remeasure_s)  # fmt: skip
            print(f"live {real.name}: {time.perf_counter() - t0:.1f} s", flush=True)
        load["after_live"] = _loadavg()
        print(f"load average after the live rows: {load['after_live']}\n")
        print(live_table(live) + "\n")
        print("why each tune chose what it did:")
        print(live_reasons(live) + "\n")
    checks = check_targets(sim, traces, live)
    if checks:
        print(f"targets ({TARGET_POLICY}):")
        print(targets_table(checks) + "\n")
    elapsed = time.perf_counter() - start
    print(f"total {elapsed:.1f} s")
    if args.json:
        meta = {
            "command": " ".join(["benchmarks/run.py", *(sys.argv[1:] if argv is None else argv)]),
            "date": datetime.now(UTC).isoformat(timespec="seconds"),
            "machine": {"cpu": cpu_model(), "usable_cpus": usable_cpus(),
                        "platform": platform.platform(), "python": platform.python_version()},
            "elapsed_s": elapsed,
            "loadavg": load,
        }  # fmt: skip
        rows: list[SimRow | TraceRow | LiveRow] = [*sim, *traces, *live]
        payload = {
            "meta": meta,
            "rows": [attrs.asdict(r) for r in rows],
            "summary": {
                "simulated": summarize_sim(sim) if sim else {},
                "traces": summarize_traces(traces) if traces else {},
                "targets": [attrs.asdict(c) for c in checks],
            },
        }
        args.json.write_text(json.dumps(payload, indent=1, default=str) + "\n")
        print(f"wrote {args.json}")
    if args.plot:
        print(f"wrote {args.plot}" if plot(sim, args.plot) else "no matplotlib: no plot")
    return 0


if __name__ == "__main__":
    sys.exit(main())
