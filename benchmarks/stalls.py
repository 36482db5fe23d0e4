"""Calm decisions served beside load that comes and goes: choices scored on stalling workers.

    python benchmarks/stalls.py [--policies balanced] [--seeds 3] [--busy 0.05 0.25]
                                [--burst 0.5] [--speed 0.5] [--draws 200] [--only NAME ...]
    python benchmarks/stalls.py --calibrate

A sweep measures the pool as it is while it runs, usually calm, as a trainer starts;
the trainer then runs for days beside whatever else the machine does. Live on the
2-core VM, load that comes and goes (test suites starting, a process spinning in
bursts) cost sizes of two to four chunks per worker 1-27% by the seconds summed, while
sizes finer than native held or gained and two processes spinning without pause moved
nothing (benchmarks/RESULTS.md, sessions 52-53). The simulated pools of ``run.py``
never slow, so they cannot see that.

Here each policy tunes every case of the simulated suite (``cases.SIM_CASES``, the
noise draws ``run.py`` uses) and each choice is scored twice: by the calm model's exact
time, and by the same pool whose every worker spends a share ``--busy`` of the time in
bursts (exponential lengths of ``--burst`` times native's calm call on average) in which
it runs at ``--speed`` of its speed, as when another process takes half its core. A
call's expected seconds under bursts come from ``--draws`` simulated calls of list
scheduling, with the same bursts for every size of a case (common random numbers), so
the sizes' differences are not drowned by the bursts' own spread. ``--calibrate``
prints the model's figures for the live ``burst_pairs.py --hog-duty 0.5`` run instead.
Not a test: it prints figures.
"""

from __future__ import annotations

import argparse
import heapq
import math
import time
from collections.abc import Sequence

import attrs
import numpy as np
from cases import SIM_CASES
from measure import bench_settings, own_sweep_lock, policies_or_exit

import chunktune
from chunktune._workload import native_chunk
from chunktune.sim import SimulatedWorkload

__all__ = ["Bursts", "Stalls", "burst_makespan", "expected_seconds", "main"]

SLOWER = -0.005


@attrs.frozen
class Stalls:
    """Bursts on every worker: a share ``busy`` of the time, ``burst`` times native's call
    long on average, run at ``speed`` of the worker's speed."""

    busy: float
    burst: float = 0.5
    speed: float = 0.5


class Bursts:
    """One worker's time, alternating free spells and bursts of exponential lengths.

    Starts in its stationary state (in a burst with probability ``on_s / (on_s +
    off_s)``); :meth:`finish` must be asked in order of start time, as list scheduling
    asks it.
    """

    def __init__(self, rng: np.random.Generator, on_s: float, off_s: float, speed: float):
        self._rng, self._on_s, self._off_s, self._speed = rng, on_s, off_s, speed
        self._on = bool(rng.random() < on_s / (on_s + off_s))
        self._end = float(rng.exponential(on_s if self._on else off_s))

    def finish(self, start: float, work: float) -> float:
        """When ``work`` seconds at full speed, begun at ``start``, are done."""
        t = start
        while True:
            while self._end <= t:
                self._on = not self._on
                self._end += float(self._rng.exponential(self._on_s if self._on else self._off_s))
            speed = self._speed if self._on else 1.0
            if speed > 0 and t + work / speed <= self._end:
                return t + work / speed
            work -= (self._end - t) * speed
            t = self._end


def burst_makespan(
    workload: SimulatedWorkload, chunk: int, stalls: Stalls, rng: np.random.Generator
) -> float:
    """One call's seconds at ``chunk`` on ``workload``'s pool with bursts on its workers.

    The calm model's list scheduling (chunks in index order, each to the worker that
    frees first, a take holding the queue's mutex ``queue_s``), each worker's chunk
    stretched by the bursts it meets. With ``stalls.busy`` 0 it is the calm model's time.
    """
    return _scheduled(workload, _chunk_seconds(workload, chunk), stalls, rng)


def _chunk_seconds(workload: SimulatedWorkload, chunk: int) -> list[float]:
    """Each chunk's calm seconds at ``chunk``, in queue order: its envs' costs and a dispatch."""
    costs = np.asarray(workload.costs, dtype=float)
    n = len(costs)
    prefix = np.concatenate(([0.0], np.cumsum(costs)))
    bounds = np.arange(0, n + chunk, chunk)
    bounds[-1] = n
    seconds: list[float] = (np.diff(prefix[bounds]) + workload.dispatch_s).tolist()
    return seconds


def _scheduled(
    workload: SimulatedWorkload, chunks: list[float], stalls: Stalls, rng: np.random.Generator
) -> float:
    """One call's makespan of ``chunks`` (seconds each) on the pool's workers, bursts drawn."""
    if stalls.busy <= 0.0:
        workers = None
    else:
        on_s = stalls.burst * workload.true_time(None)
        off_s = on_s * (1.0 - stalls.busy) / stalls.busy
        workers = [Bursts(rng, on_s, off_s, stalls.speed) for _ in range(workload.nthread)]
    free = [(0.0, w) for w in range(workload.nthread)]
    lock = end = 0.0
    for cost in chunks:
        t, w = heapq.heappop(free)
        if workload.queue_s > 0:
            lock = max(t, lock) + workload.queue_s
            t = lock
        done = t + cost if workers is None else workers[w].finish(t, cost)
        end = max(end, done)
        heapq.heappush(free, (done, w))
    return end


def expected_seconds(
    workload: SimulatedWorkload, chunk: int, stalls: Stalls, *, draws: int, seed: int = 0
) -> float:
    """The mean of ``draws`` calls under ``stalls``; a ``seed`` gives every size the same bursts."""
    rng = np.random.default_rng(seed)
    chunks = _chunk_seconds(workload, chunk)  # the same every draw
    return float(np.mean([_scheduled(workload, chunks, stalls, rng) for _ in range(draws)]))


class _Expected:
    """A case's expected seconds under bursts, each size and load computed once (a size of
    more than 3000 chunks with a fifth of the draws: its calls are long to simulate)."""

    def __init__(self, truth: SimulatedWorkload, draws: int) -> None:
        self._truth, self._draws = truth, draws
        self._memo: dict[tuple[int, Stalls], float] = {}

    def __call__(self, chunk: int, stalls: Stalls) -> float:
        if (chunk, stalls) not in self._memo:
            many = math.ceil(self._truth.num_envs / chunk) > 3000
            draws = max(1, self._draws // 5) if many else self._draws
            self._memo[chunk, stalls] = expected_seconds(self._truth, chunk, stalls, draws=draws)
        return self._memo[chunk, stalls]


def _calibrate(stalls: Stalls, draws: int) -> None:
    """The model on the live batch of ``burst_pairs.py``: 256 uniform envs on 2 workers."""
    pool = SimulatedWorkload(np.full(256, 40e-3 * 2 / 256), nthread=2, dispatch_s=5e-6)
    native = expected_seconds(pool, native_chunk(256, 2), stalls, draws=draws)
    cells = []
    for size in (4, 8, 16, 32, 43, 64, 128):
        gain = 1.0 - expected_seconds(pool, size, stalls, draws=draws) / native
        cells.append(f"{size} {gain:+.2%}")
    print(f"uniform 256 envs x 2 workers, native 12, {stalls}: " + ", ".join(cells))
    print(
        "live, uniform-air-256 beside a process spinning half the time in bursts of 30 ms "
        "(session 53, paid): 8 -0.28%, 16 -1.05%, 32 -1.27%, 43 -6.33%, 64 -6.70%"
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--policies", default="balanced", help="comma-separated names")
    parser.add_argument("--seeds", type=int, default=3, help="noise draws per case")
    parser.add_argument("--busy", type=float, nargs="+", default=[0.05, 0.25])
    parser.add_argument("--burst", type=float, default=0.5)
    parser.add_argument("--speed", type=float, default=0.5)
    parser.add_argument("--draws", type=int, default=200, help="calls per expected time")
    parser.add_argument("--only", nargs="*", default=None, help="case names to run")
    parser.add_argument("--calibrate", action="store_true")
    args = parser.parse_args(argv)
    if args.seeds < 1 or args.draws < 1:
        parser.error("--seeds and --draws: expected at least 1")
    if not all(0.0 < b < 1.0 for b in args.busy) or args.burst <= 0 or not 0 <= args.speed < 1:
        parser.error("expected 0 < --busy < 1, --burst > 0 and 0 <= --speed < 1")
    levels = [Stalls(b, args.burst, args.speed) for b in args.busy]
    if args.calibrate:
        for stalls in levels:
            _calibrate(stalls, args.draws)
        return 0
    own_sweep_lock()
    settings = bench_settings()
    names = [p for p in args.policies.split(",") if p]
    policies = policies_or_exit(parser, settings, names, "--policies")
    cases = [(i, c) for i, c in enumerate(SIM_CASES) if not args.only or c.name in args.only]
    if not cases:
        parser.error(f"--only {' '.join(args.only or [])}: no simulated case of that name")
    calm: dict[str, list[float]] = {name: [] for name in policies}
    busy: dict[str, list[list[float]]] = {name: [[] for _ in levels] for name in policies}
    t0 = time.perf_counter()
    for index, case in cases:
        truth = case.workload(index)
        native = native_chunk(case.num_envs, case.nthread)
        seconds = _Expected(truth, args.draws)

        cells = []
        for name, policy in policies.items():
            chosen = []
            for s in range(args.seeds):
                decision = chunktune.resolve_sync(
                    case.workload(index, seed=1000 * index + s),
                    settings=settings,
                    policy=attrs.evolve(policy, seed=s),
                )
                chunk = native if decision.chunk_size is None else decision.chunk_size
                chosen.append(chunk)
                calm[name].append(1.0 - truth.true_time(chunk) / truth.true_time(None))
                for k, stalls in enumerate(levels):
                    busy[name][k].append(1.0 - seconds(chunk, stalls) / seconds(native, stalls))
            cells.append(f"{name} {' '.join(map(str, chosen))}")
        print(f"{case.name:<26} native {native:<4} " + "; ".join(cells), flush=True)
    print(f"\n{len(cases)} cases x {args.seeds} draws in {time.perf_counter() - t0:.0f} s; "
          f"gain = 1 - chosen/native, mean over runs (runs > 0.5% slower than native)")  # fmt: skip
    head = "".join(f"  {'busy ' + format(s.busy, 'g'):>18}" for s in levels)
    print(f"{'policy':<12} {'calm':>14}{head}")
    for name in policies:
        row = f"{name:<12} {np.mean(calm[name]):+7.2%} ({sum(g < SLOWER for g in calm[name]):>3})"
        for gains in busy[name]:
            row += f"  {np.mean(gains):+11.2%} ({sum(g < SLOWER for g in gains):>3})"
        print(row)
    print(f"bursts {args.burst:g} x native's call on average, at speed {args.speed:g}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
