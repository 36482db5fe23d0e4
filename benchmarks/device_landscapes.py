"""Record real many-core landscapes (4, 8 and 16 threads) inside one deadline, then tune live.

    python benchmarks/device_landscapes.py --out DIR --deadline 400
    python benchmarks/device_landscapes.py --plan later --out DIR --deadline 450
    python benchmarks/device_landscapes.py --plan third --out DIR --deadline 300

Written for a borrowed 16-core machine with minutes to spend: every trace is
sized to its share of the deadline (one timed warm-up round through its sizes
prices a round), written as soon as it is done and bundled into
``DIR/traces.tar.gz``, so a run cut short still returns what it finished. The
first four traces go first, then live ``balanced`` tunes of two of those batches,
each re-measured in paired rounds beside the trace's best sizes, then the rest.
``--plan later`` and ``--plan third`` record shapes the earlier plans have not, for a
later day. Replay the traces here with ``benchmarks/run.py --no-sim --traces DIR/traces``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tarfile
import time
from collections.abc import Callable
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import attrs
import numpy as np
import record_traces as rt
from cases import robot
from measure import _Hog, bench_settings, own_sweep_lock, remeasure

import chunktune
from chunktune._candidates import SeedCandidates
from chunktune._fingerprint import cpu_quota, usable_cpus
from chunktune._record import record
from chunktune._schedule import schedules
from chunktune._trace import Trace, dump_trace, load_trace
from chunktune._workload import native_chunk
from chunktune.sim import ReplayWorkload

# name, builder, nthread, share of the recording time
PLAN: list[tuple[str, Callable[[int], Any], int, float]] = [
    ("demo-tail-1024", rt._demo("tail", 1024), 16, 1.3),
    ("cheetah-2048", robot("cheetah", 2048, 20), 16, 1.2),
    ("humanoid-1024", robot("humanoid", 1024, 10), 16, 1.0),
    ("demo-uniform-768", rt._demo("uniform", 768), 16, 0.9),
    ("demo-tail-512", rt._demo("tail", 512), 8, 1.0),
    ("humanoid-512", robot("humanoid", 512, 10), 8, 0.8),
    ("demo-tail-256", rt._demo("tail", 256), 4, 0.9),
    ("cheetah-768", robot("cheetah", 768, 20), 4, 0.8),
]
# A later day's plan: shapes the first plan has not (the heavy quarter at the head or
# scattered, quadruped, cheetah on 8 threads, humanoid on 4) and one it has
# (demo-tail-1024 on 16, to see a landscape's drift from one day to another).
LATER: list[tuple[str, Callable[[int], Any], int, float]] = [
    ("demo-head-1024", rt._demo("head", 1024), 16, 1.0),
    ("quadruped-1024", robot("quadruped", 1024, 10), 16, 1.0),
    ("demo-scattered-512", rt._demo("scattered", 512), 8, 1.0),
    ("cheetah-1024", robot("cheetah", 1024, 20), 8, 0.9),
    ("humanoid-256", robot("humanoid", 256, 10), 4, 0.8),
    ("demo-tail-1024", rt._demo("tail", 1024), 16, 0.9),
    ("quadruped-256", robot("quadruped", 256, 10), 16, 0.9),
]
# A third day's plan: shapes neither earlier plan has (the heavy quarter scattered on 16
# threads and at the head on 4, a uniform batch on 8, humanoid on 8, cheetah at 1536 on
# 16), then the one recorded on both earlier days (demo-tail-1024 on 16: its drift).
THIRD: list[tuple[str, Callable[[int], Any], int, float]] = [
    ("demo-scattered-1024", rt._demo("scattered", 1024), 16, 1.0),
    ("humanoid-1024", robot("humanoid", 1024, 10), 8, 1.0),
    ("demo-head-256", rt._demo("head", 256), 4, 0.9),
    ("demo-uniform-1024", rt._demo("uniform", 1024), 8, 0.9),
    ("cheetah-1536", robot("cheetah", 1536, 20), 16, 1.0),
    ("demo-tail-1024", rt._demo("tail", 1024), 16, 0.9),
]
PLANS = {"first": PLAN, "later": LATER, "third": THIRD}
LIVE_AFTER = 4  # the live tunes run after this many traces
LIVE = {
    "first": "demo-tail-1024,cheetah-2048",
    "later": "demo-head-1024,demo-scattered-512",
    "third": "demo-scattered-1024,humanoid-1024",
}


class _Deadline(Exception):
    pass


def facts() -> dict[str, Any]:
    """What the machine is: CPUs, quota, model, load, versions."""
    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    import mujoco

    return {
        "cpu_count": os.cpu_count(),
        "usable_cpus": usable_cpus(),
        "cpu_quota": cpu_quota(),
        "cpu_model": model,
        "loadavg": list(os.getloadavg()),
        "python": platform.python_version(),
        "mujoco": mujoco.__version__,
        "numpy": np.__version__,
    }


def sizes_for(n: int, t: int) -> list[int]:
    """The sizes a policy can probe: every distinct schedule, the seed grid, native."""
    return sorted({*schedules(n, t), *SeedCandidates().propose(n, t), native_chunk(n, t)})


def best_sizes(trace: Trace, k: int) -> list[int]:
    """The ``k`` sizes fastest by the trace's truth (the replay's, machine state removed)."""
    truth = ReplayWorkload(trace).landscape()
    return sorted(truth, key=truth.__getitem__)[:k]


def bundle(traces: Path, out: Path) -> None:
    """Every trace written so far, in one archive (replaced atomically)."""
    tmp = out / "traces.tar.gz.tmp"
    with tarfile.open(tmp, "w:gz") as tar:
        for p in sorted(traces.glob("*.json")):
            tar.add(p, arcname=p.name)
    os.replace(tmp, out / "traces.tar.gz")


def record_one(
    name: str, build: Callable[[int], Any], t: int, seconds: float, end: float, traces: Path
) -> Trace | None:
    """One trace with as many rounds as ``seconds`` buys (at least 6), None past the deadline."""
    workload = build(t)
    try:
        n = workload.num_envs
        sizes = sizes_for(n, t)
        workload.run(None)
        start = time.monotonic()
        for c in sizes:
            workload.run(c)
        round_s = time.monotonic() - start
        left = end - time.monotonic()
        rounds = int(min(seconds, left - 2 * round_s) / round_s)
        rounds = min(rounds, 80)
        if rounds < 6:
            print(f"{name} T={t}: a round takes {round_s:.2f} s; {left:.0f} s left: skipped")
            return None

        def check() -> None:
            if time.monotonic() > end:
                raise _Deadline

        trace = record(
            workload, rounds=rounds, sizes=sizes, check_cancelled=check,
            description=f"{name} on {t} threads (device machine, {os.cpu_count()} CPUs)",
        )  # fmt: skip
    except _Deadline:
        print(f"{name} T={t}: cut by the deadline")
        return None
    finally:
        workload.close()
    path = traces / f"{name}-t{t}.json"
    path.write_text(dump_trace(trace))
    took = time.monotonic() - start
    print(
        f"{name} T={t}: {len(sizes)} sizes x {rounds} rounds in {took:.0f} s "
        f"(round {round_s:.2f} s; native {native_chunk(n, t)}; best {best_sizes(trace, 4)}; "
        f"load {trace.machine.get('loadavg_start')} -> {trace.machine.get('loadavg_end')})",
        flush=True,
    )
    return trace


def live(
    name: str,
    build: Callable[[int], Any],
    trace: Trace,
    tunes: int,
    end: float,
    *,
    hog: bool = False,
) -> list[dict[str, Any]]:
    """``tunes`` fresh ``balanced`` tunes, then the choices and the trace's best re-measured.

    With ``hog``, each tune gets a CPU-bound process started halfway through its
    budget (stopped when the tune returns); the re-measurement runs without it.
    """
    settings = bench_settings()
    policy = settings.get_policy("balanced")
    workload = build(trace.nthread)
    rows: list[dict[str, Any]] = []
    try:
        workload.run(None)
        decisions = []
        for k in range(tunes):
            if time.monotonic() + policy.time_budget_s * 1.5 > end:
                break
            start = time.monotonic()
            budget = policy.time_budget_s
            with _Hog(budget / 2, budget) if hog else nullcontext():
                d = chunktune.resolve_sync(
                    workload, settings=settings, policy=attrs.evolve(policy, seed=k)
                )
            decisions.append((k, d, time.monotonic() - start))
        known = best_sizes(trace, 3)
        chosen = {d.chunk_size for _, d, _ in decisions if d.chunk_size is not None}
        field = sorted({*chosen, *known})
        start = time.monotonic()
        for c in [None, *field]:
            workload.run(c)
        per_round = (time.monotonic() - start) or 1e-3
        rounds = max(10, min(150, int((end - time.monotonic() - 5) / per_round)))
        measured = remeasure(workload, field, rounds, seed=1)
        for k, d, wall in decisions:
            m = measured[d.chunk_size]
            rows.append(
                {
                    "case": name,
                    "nthread": trace.nthread,
                    "num_envs": trace.num_envs,
                    "tune": k,
                    "chunk_size": d.chunk_size,
                    "native_chunk": d.native_chunk,
                    "claimed_gain": d.gain,
                    "claimed_ci": d.gain_ci,
                    "partial": d.partial,
                    "probe_seconds": d.probe_seconds,
                    "wall_s": wall,
                    "reason": d.reason,
                    "measured_gain": m.gain,
                    "measured_ci": [m.low, m.high],
                    "measured_paid": m.paid,
                    "rounds": rounds,
                    "hog": hog,
                    "known": {
                        str(c): [measured[c].gain, measured[c].low, measured[c].high] for c in known
                    },
                }
            )
            print(
                f"live{' (hog)' if hog else ''} {name} T={trace.nthread} tune {k}: "
                f"chose {d.chunk_size} (native {d.native_chunk}) claimed {d.gain:+.2%}, "
                f"re-measured {m.gain:+.2%} "
                f"({m.low:+.2%}..{m.high:+.2%}), paid {m.paid:+.2%}, "
                f"over {rounds} rounds; best known "
                + ", ".join(f"{c}: {measured[c].gain:+.2%}" for c in known)
                + f"; partial={d.partial}; {d.reason}",
                flush=True,
            )
    finally:
        workload.close()
    return rows


def _trace_file(directory: Path, stem: str) -> Path:
    """``STEM.json``, else the one ``STEM-tT.json`` (a name as the recording gives it)."""
    exact = directory / f"{stem}.json"
    if exact.exists():
        return exact
    found = sorted(directory.glob(f"{stem}-t*.json"))
    if len(found) != 1:
        raise SystemExit(
            f"--live {stem}: expected {exact} or one {stem}-tT.json in {directory}, "
            f"found {len(found)}"
        )
    return found[0]


def live_only(args: argparse.Namespace) -> int:
    """Live tunes of recorded traces, each case an equal share of the deadline."""
    end = time.monotonic() + args.deadline
    args.out.mkdir(parents=True, exist_ok=True)
    print("machine:", json.dumps(facts()), flush=True)
    builders = {name: build for name, build, _, _ in [*PLAN, *LATER, *THIRD]}
    cases = args.live.split(",")
    rows: list[dict[str, Any]] = []
    for j, case in enumerate(cases):
        stem, hog = case.removesuffix("+hog"), case.endswith("+hog")
        path = _trace_file(args.live_from, stem)
        trace = load_trace(path)
        name = path.stem.rsplit("-t", 1)[0]
        share_end = time.monotonic() + (end - time.monotonic()) / (len(cases) - j)
        try:
            rows += live(name, builders[name], trace, args.tunes, share_end, hog=hog)
        except Exception as exc:  # one case's failure must not lose the others
            print(f"live {case}: failed: {exc!r}", flush=True)
        (args.out / "live.json").write_text(json.dumps(rows, indent=1))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--deadline", type=float, default=400.0, help="seconds for everything")
    parser.add_argument("--live-s", type=float, default=70.0, help="seconds for the live tunes")
    parser.add_argument("--tunes", type=int, default=2)
    parser.add_argument("--plan", choices=sorted(PLANS), default="first", help="what to record")
    parser.add_argument("--live", help="comma-separated traces to tune live (default: the plan's)")
    parser.add_argument("--traces-dir", type=Path, help="where the traces go (default: OUT/traces)")
    parser.add_argument("--only", help="comma-separated names from the plan (default: all)")
    parser.add_argument("--nthread", type=int, help="record every trace on this many threads")
    parser.add_argument(
        "--live-from",
        type=Path,
        help="record nothing: tune live the --live traces found in this directory "
        "(NAME-tT.json; a trailing '+hog' on a name adds a CPU hog halfway through each tune)",
    )
    args = parser.parse_args(argv)
    own_sweep_lock()
    args.live = args.live or LIVE[args.plan]
    if args.live_from:
        return live_only(args)
    t0 = time.monotonic()
    end = t0 + args.deadline
    out: Path = args.out
    traces = args.traces_dir or out / "traces"
    traces.mkdir(parents=True, exist_ok=True)
    out.mkdir(parents=True, exist_ok=True)
    info = facts()
    print("machine:", json.dumps(info), flush=True)
    (out / "machine.json").write_text(json.dumps(info, indent=1))
    plan = [p for p in PLANS[args.plan] if not args.only or p[0] in args.only.split(",")]
    if args.nthread:
        plan = [(n, b, args.nthread, s) for n, b, _, s in plan]
    weight = sum(s for *_, s in plan)
    recording_s = max(args.deadline - args.live_s, 0.0)
    done: dict[str, tuple[Callable[[int], Any], Trace]] = {}
    rows: list[dict[str, Any]] = []
    for i, (name, build, t, share) in enumerate(plan):
        if time.monotonic() > end:
            break
        seconds = recording_s * share / weight
        stop = end - (args.live_s if i < LIVE_AFTER else 0)
        trace = record_one(name, build, t, seconds, stop, traces)
        if trace is not None:
            done[name] = (build, trace)
            bundle(traces, out)
        if i == LIVE_AFTER - 1 or (i == len(plan) - 1 and not rows):
            live_end = min(end, time.monotonic() + args.live_s)
            cases = [c for c in args.live.split(",") if c in done]
            for j, case in enumerate(cases):
                share_end = time.monotonic() + (live_end - time.monotonic()) / (len(cases) - j)
                try:
                    rows += live(case, done[case][0], done[case][1], args.tunes, share_end)
                except Exception as exc:  # a live run's failure must not lose the traces
                    print(f"live {case}: failed: {exc!r}", flush=True)
                (out / "live.json").write_text(json.dumps(rows, indent=1))
    print(f"done in {time.monotonic() - t0:.0f} s: {len(done)} traces, {len(rows)} live tunes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
