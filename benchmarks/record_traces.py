"""Record the real landscapes under ``traces/``: chunk sizes in interleaved rounds.

    python benchmarks/record_traces.py                 all of them (about 20 min on 2 cores)
    python benchmarks/record_traces.py --only humanoid-128 --rounds 30
    python benchmarks/record_traces.py --all-sizes --rounds 30 --out benchmarks/traces/full

By default a trace holds the sizes a policy can probe: every distinct schedule
``ceil(N/m)`` (``balanced``, ``quick`` and ``thorough`` measure only those), the
``seed`` policy's grid and native, so the rounds go where they are replayed and
the truth of each size is tight. ``--all-sizes`` records every size in
``1..ceil(N/T)``: the whole landscape, with fewer rounds in the same time.

Each trace is one batch on this machine's usable CPUs. The demo scene gives the
uneven batches (heavy contact at the tail, at the head, scattered) and a uniform
one; three dm_control models (shipped with the dm_control package, copied under
``models/``) give real robots at other batch sizes. Run it on a quiet machine:
the recording holds the machine-wide sweep lock, but other programs still share
the cores. The round orders are seeded, so a re-recording measures in the same order.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from cases import at_least_one, robot

from chunktune._atomic import write_atomic
from chunktune._candidates import SeedCandidates
from chunktune._fingerprint import usable_cpus
from chunktune._record import record
from chunktune._schedule import schedules
from chunktune._trace import dump_trace
from chunktune._workload import native_chunk

HERE = Path(__file__).resolve().parent


def _demo(order: str, num_envs: int) -> Callable[[int], Any]:
    """The demo batch with its heavy quarter at the tail, the head, or scattered."""

    def build(nthread: int) -> Any:
        from chunktune._mujoco import RolloutWorkload, demo_model_path, demo_workload

        demo = demo_workload(num_envs=num_envs, nthread=nthread)
        states = np.array(demo.initial_state)
        model = demo.models[0]
        demo.close()
        heavy = num_envs // 4
        if order == "head":
            states = np.concatenate([states[-heavy:], states[:-heavy]])
        elif order == "scattered":
            states = states[np.random.default_rng(7).permutation(num_envs)]
        elif order == "uniform":
            states = np.repeat(states[:1], num_envs, axis=0)  # every env flying alike
        return RolloutWorkload(
            model, num_envs=num_envs, nthread=nthread, nstep=20, initial_state=states,
            model_file=demo_model_path(),
        )  # fmt: skip

    return build


TRACES: dict[str, tuple[str, Callable[[int], Any]]] = {
    "demo-tail-256": ("demo, the heavy quarter at the tail of the batch", _demo("tail", 256)),
    "demo-head-256": ("demo, the heavy quarter at the head of the batch", _demo("head", 256)),
    "demo-scattered-256": ("demo, the heavy quarter scattered", _demo("scattered", 256)),
    "demo-uniform-192": ("demo, every env flying alike", _demo("uniform", 192)),
    "humanoid-128": ("dm_control humanoid, 128 envs, 10 steps", robot("humanoid", 128, 10)),
    "cheetah-384": ("dm_control cheetah, 384 envs, 20 steps", robot("cheetah", 384, 20)),
    "quadruped-128": ("dm_control quadruped, 128 envs, 10 steps", robot("quadruped", 128, 10)),
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--only", help="comma-separated trace names (default: all)")
    parser.add_argument("--rounds", type=at_least_one, default=90)
    parser.add_argument("--all-sizes", action="store_true", help="every size, not the schedules")
    parser.add_argument("--nthread", type=int, default=usable_cpus())
    parser.add_argument("--out", type=Path, default=HERE / "traces")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    names = args.only.split(",") if args.only else list(TRACES)
    unknown = [n for n in names if n not in TRACES]
    if unknown:
        parser.error(f"--only: unknown trace(s) {', '.join(unknown)}; known: {', '.join(TRACES)}")
    for name in names:
        description, build = TRACES[name]
        workload = build(args.nthread)
        n, t = workload.num_envs, workload.nthread
        sizes = (
            None
            if args.all_sizes
            else sorted({*schedules(n, t), *SeedCandidates().propose(n, t), native_chunk(n, t)})
        )
        start = time.perf_counter()
        try:
            trace = record(workload, rounds=args.rounds, sizes=sizes, description=description)
        finally:
            workload.close()
        write_atomic(args.out / f"{name}.json", dump_trace(trace).encode())
        load = trace.machine.get("loadavg_start"), trace.machine.get("loadavg_end")
        took = time.perf_counter() - start
        print(f"{name}: {len(trace.samples)} sizes x {args.rounds} rounds in {took:.0f} s "
              f"(load {load[0]} -> {load[1]})", flush=True)  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
