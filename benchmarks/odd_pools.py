"""Policies on pools and machines no other generator models: unequal workers, cold chunks, stalls.

    python benchmarks/odd_pools.py [--cases 150] [--seeds 3] [--base 6421]
                                   [--policies balanced,seed] [--kinds unequal,...] [--worst 5]
                                   [--causes REGRET]

``unseen.py`` and ``novel.py`` vary the envs' costs; ``adversary.py`` the machine's noise;
all of them keep the pool's workers equal, its per-chunk cost a constant and its calls
within +50% of their truth. Each case here is ``unseen.py``'s case of the same ``--base``
and number (layout, threads, envs, native call, queue, noise), changed by one ``KINDS``:

- ``unequal``: 1 to T/2 of the T workers, at random places, run at 0.5-0.8 of full
  speed (SMT siblings sharing a core, efficiency cores, a core another process holds);
  list scheduling as the pool does it, worker ``i`` taking chunk ``i`` first, each
  later chunk going to the worker that frees first, a chunk lasting its cost over
  its worker's speed;
- ``coldchunks``: every chunk pays a cold start (caches and TLB warmed on a new range of
  envs) of 2-20% of a mean env's cost, times ``1 + T/64`` (memory bandwidth shared by
  more workers), and a chunk size that is not a multiple of A (2, 4 or 8) pays false
  sharing of its boundary's output lines, 1-10% of a mean env's cost times ``T/16``:
  a per-chunk overhead that grows with T and is not monotone in the size;
- ``stalls``: the landscape and noise as drawn, and each call, with probability
  0.2-3%, stalls 2-5x (a page-fault storm, a preempted worker the whole call waits
  for, the trainer's garbage collector), the same for every size;
- ``fewenvs``: 2-6 envs a thread (plus a remainder) instead of 8-256, the native call
  kept: native is chunk 1 and every size is a coarse schedule of a few chunks.

The stalls of a (case, seed) are drawn by call number from a generator of their own, the
same for every policy. Scored by each case's exact model (stalls left out: they slow
every size alike): regret, harm (chosen over native, minus 1; a run more than 0.5%
slower counts) and the share of the gain on offer captured, one table per kind; then,
per policy and kind, its worst runs more than 0.5% slower than native (up to
``--worst``), each with what its sweep did: the sizes the race measured, the size held
against native in the confirmation and its pairs, and the decision's reason. ``--causes
REGRET`` adds, per policy and kind, its runs above that regret sorted by where they lost
(``regret_causes.py``'s categories: never proposed, out-raced, confirm inconclusive,
noise gate, budget, kept at race end), each with its count and summed regret.
"""

from __future__ import annotations

import argparse
import heapq
import math
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import NamedTuple

import attrs
import numpy as np
from measure import scored
from regret_causes import _cause, _Sweep
from unseen import (
    HARM,
    SUMMARY_HEAD,
    FloatArray,
    UnseenCase,
    UnseenRow,
    case_setup,
    draw_cases,
    summarize,
    summary_line,
)

import chunktune
from chunktune import Policy, Settings
from chunktune._events import ProgressEvent
from chunktune._simpool import _makespan
from chunktune._workload import native_chunk, upper_chunk
from chunktune.sim import ModeledTime, Noise, SimulatedWorkload, env_costs

KINDS = ("unequal", "coldchunks", "stalls", "fewenvs")
_KIND, _STALL = 5, 6  # what a seed is for, beside unseen.py's (never a trailing zero)


def _seed(*parts: int) -> int:
    return int(np.random.SeedSequence(parts).generate_state(1)[0])


def _unequal_makespan(
    costs: FloatArray, chunk: int, speeds: Sequence[float], queue_s: float, dispatch_s: float
) -> float:
    """Seconds of list-scheduling ``chunk``-sized chunks on workers of these ``speeds``
    (``dispatch_s`` a chunk, at full speed; ``queue_s`` a take of the queue's mutex)."""
    n = len(costs)
    prefix = np.concatenate([[0.0], np.cumsum(costs)])
    bounds = np.arange(0, n + chunk, chunk)
    bounds[-1] = n
    work = (np.diff(prefix[bounds]) + dispatch_s).tolist()
    free = [(0.0, worker) for worker in range(len(speeds))]  # worker i takes chunk i first
    lock, end = 0.0, 0.0
    for cost in work:
        at, worker = heapq.heappop(free)
        lock = max(at, lock) + queue_s
        done = lock + cost / speeds[worker]
        end = max(end, done)
        heapq.heappush(free, (done, worker))
    return end


class Odd(NamedTuple):
    """One case: ``unseen.py``'s pool changed by one kind, with its exact model."""

    kind: str
    case: UnseenCase
    num_envs: int
    nthread: int
    truth: Callable[[int], float]  # exact seconds of a chunk size (an int)
    stall: tuple[float, float, float]  # probability a call stalls, its factor's range

    @property
    def name(self) -> str:
        return f"{self.kind}-{self.case.layout}-{self.num_envs}x{self.nthread}"

    def true_time(self, chunk_size: int | None) -> float:
        chunk = native_chunk(self.num_envs, self.nthread) if chunk_size is None else chunk_size
        return self.truth(min(chunk, self.num_envs))

    def best(self) -> float:
        upper = upper_chunk(self.num_envs, self.nthread)
        return min(self.truth(c) for c in range(1, upper + 1))


def _cached(f: Callable[[int], float]) -> Callable[[int], float]:
    seen: dict[int, float] = {}

    def truth(chunk: int) -> float:
        if chunk not in seen:
            seen[chunk] = f(chunk)
        return seen[chunk]

    return truth


def odd_case(kind: str, case: UnseenCase) -> Odd:
    """``case`` changed by ``kind``; its parameters drawn from (base, number, kind)."""
    rng = np.random.default_rng(_seed(case.base, case.number, _KIND, KINDS.index(kind) + 1))
    n, t = case.num_envs, case.nthread
    costs = case.costs()
    no_stall = (0.0, 1.0, 1.0)
    if kind == "unequal":
        speeds = np.ones(t)
        slow = rng.choice(t, int(rng.integers(1, max(1, t // 2) + 1)), replace=False)
        speeds[slow] = rng.uniform(0.5, 0.8)
        speed_list = speeds.tolist()
        dispatch = case.workload().dispatch_s
        truth = _cached(lambda c: _unequal_makespan(costs, c, speed_list, case.queue_s, dispatch))
        return Odd(kind, case, n, t, truth, no_stall)
    if kind == "coldchunks":
        prefix = np.concatenate([[0.0], np.cumsum(costs)])
        cold = rng.uniform(0.02, 0.20) * (1.0 + t / 64) * case.mean_s
        align = int(rng.choice([2, 4, 8]))
        shared = rng.uniform(0.01, 0.10) * (t / 16) * case.mean_s

        def cold_time(c: int) -> float:
            per_chunk = cold + (shared if c % align else 0.0)
            return _makespan(prefix, c, t, per_chunk, case.queue_s)

        return Odd(kind, case, n, t, _cached(cold_time), no_stall)
    if kind == "stalls":
        pool = case.workload()
        stall = (float(rng.uniform(0.002, 0.03)), 2.0, 5.0)
        return Odd(kind, case, n, t, _cached(pool.true_time), stall)
    if kind == "fewenvs":
        few = t * int(rng.integers(2, 7)) + int(rng.integers(0, t))
        call = case.mean_s * n / t
        mean_s = call * t / few
        costs = env_costs(case.layout, few, mean_s=mean_s, seed=case.costs_seed)
        pool = SimulatedWorkload(costs, nthread=t, queue_s=case.queue_s, name=case.layout)
        smaller = case._replace(num_envs=few, mean_s=mean_s)
        return Odd(kind, smaller, few, t, _cached(pool.true_time), no_stall)
    raise ValueError(f"unknown kind {kind!r}; known: {', '.join(KINDS)}")


class OddPool(ModeledTime):
    """A workload: the case's exact seconds times its noise (and stalls), simulated."""

    def __init__(self, odd: Odd, seed: int) -> None:
        self.odd, self.noise = odd, odd.case.noise
        self.num_envs, self.nthread = odd.num_envs, odd.nthread
        ident = _seed(odd.case.base, odd.case.number, _STALL, KINDS.index(odd.kind) + 1, seed + 1)
        self.rng = np.random.default_rng([ident, 1])
        self.stalls = np.random.default_rng([ident, 2])  # by call number, whatever was called
        self.phase = float(self.rng.uniform(0.0, 2.0 * math.pi))
        self.calls, self.elapsed_s, self.jitter = 0, 0.0, 0.0
        self.factors: list[float] = []  # each call's noise and stall, to trace a run by
        self.called: list[int | None] = []  # each call's chunk size, beside its factor

    def signature(self) -> dict[str, str]:
        return {"kind": "odd_pools", "name": self.odd.name}

    def _factor(self) -> float:
        noise: Noise = self.noise
        z, hit, size = self.rng.standard_normal(), self.rng.random(), self.rng.random()
        z = noise.memory * self.jitter + math.sqrt(1.0 - noise.memory**2) * float(z)
        self.jitter = z
        f = math.exp(noise.sigma * z)
        if hit < noise.spike_prob:
            f *= 1.0 + noise.spike_scale * float(size)
        if noise.drift:
            angle = 2.0 * math.pi * self.calls / noise.drift_period + self.phase
            f *= 1.0 + noise.drift * math.sin(angle)
        prob, low, high = self.odd.stall
        stalled, by = self.stalls.random(), self.stalls.uniform(low, high)
        return f * (by if stalled < prob else 1.0)

    def run(self, chunk_size: int | None) -> float:
        factor = self._factor()
        self.factors.append(factor)
        self.called.append(chunk_size)
        seconds = self.odd.true_time(chunk_size) * factor
        self.calls += 1
        self.elapsed_s += seconds
        return seconds

    def clock(self) -> float:
        """Simulated seconds, so the budget binds as on a real pool."""
        return self.elapsed_s


class OddRun(NamedTuple):
    odd: Odd
    row: UnseenRow
    sweep: _Sweep
    partial: bool  # the budget ended the sweep


def odd_runs(
    odds: Sequence[Odd], policies: Mapping[str, Policy], seeds: int, settings: Settings
) -> list[OddRun]:
    """Every policy on every case under ``seeds`` noise (and stall) draws, scored exactly."""
    runs = []
    for odd in odds:
        native, best = odd.true_time(None), odd.best()
        for name, policy in policies.items():
            for seed in range(seeds):
                events: list[ProgressEvent] = []
                decision = scored(
                    chunktune.resolve_sync(
                        OddPool(odd, seed),
                        settings=settings,
                        policy=attrs.evolve(policy, seed=seed),
                        on_progress=events.append,
                    ),
                    f"{name} on {odd.kind} case {odd.case.number} seed {seed}",
                )
                chosen = odd.true_time(decision.chunk_size)
                row = UnseenRow.of(
                    odd.name, name, seed, decision, chosen=chosen, best=best, native=native
                )
                runs.append(OddRun(odd, row, _Sweep.read(events), decision.partial))
    return runs


def _harmful(runs: Sequence[OddRun], worst: int) -> list[str]:
    lines = []
    for name in dict.fromkeys(r.row.policy for r in runs):
        mine = sorted(
            (r for r in runs if r.row.policy == name and r.row.vs_native > HARM),
            key=lambda r: -r.row.vs_native,
        )
        if not mine:
            continue
        lines.append(f"  {name}: {len(mine)} runs more than {HARM:.1%} slower than native")
        for r in mine[:worst]:
            o, s = r.odd, r.sweep
            lines += [
                f"    case {o.case.number} {o.name}, seed {r.row.seed}: chunk {r.row.chunk_size} "
                f"(native {native_chunk(o.num_envs, o.nthread)}), {r.row.vs_native:+.2%} vs "
                f"native, regret {r.row.regret:.2%}; race measured {len(s.measured)} sizes, "
                f"held {s.held} for {s.pairs} pairs",
                f"      reason: {r.row.reason}",
            ]
    return lines


def cause(run: OddRun, above: float) -> str:
    """Where a run that lost more than ``above`` lost, in ``regret_causes.py``'s categories."""
    odd, sweep = run.odd, run.sweep
    best = odd.best()
    near = any(odd.true_time(c) / best - 1.0 <= above for c in (None, *sweep.measured))
    held = None if sweep.held is None else odd.true_time(sweep.held) / best - 1.0 <= above
    return _cause(run.row.chunk_size, near, held, sweep.stop, run.partial)


def causes(runs: Sequence[OddRun], above: float) -> list[str]:
    """Per policy, its runs of regret above ``above`` by cause: count and regret summed."""
    lines = []
    for name in dict.fromkeys(r.row.policy for r in runs):
        lost: dict[str, list[float]] = {}
        for r in runs:
            if r.row.policy == name and r.row.regret > above:
                lost.setdefault(cause(r, above), []).append(r.row.regret)
        parts = [f"{c} {len(v)} ({sum(v):.1%})" for c, v in sorted(lost.items())]
        lines.append(f"  {name} runs above {above:.0%} regret: {'; '.join(parts) or 'none'}")
    return lines


def tables(runs: Sequence[OddRun], worst: int = 5, above: float | None = None) -> str:
    """One summary table per kind, each followed by its policies' worst harmful runs (and,
    with ``above``, their runs above that regret by cause)."""
    parts = []
    for kind in dict.fromkeys(r.odd.kind for r in runs):
        mine = [r for r in runs if r.odd.kind == kind]
        cases = len({r.odd.case.number for r in mine})
        lines = [f"== {kind} ({cases} cases)", SUMMARY_HEAD, "-" * len(SUMMARY_HEAD)]
        lines += [summary_line(n, s) for n, s in summarize([r.row for r in mine]).items()]
        lines += [] if above is None else causes(mine, above)
        parts.append("\n".join(lines + _harmful(mine, worst)))
    return "\n\n".join(parts)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=150, help="unseen.py's cases a kind")
    parser.add_argument("--seeds", type=int, default=3, help="noise draws per case and policy")
    parser.add_argument("--base", type=int, default=6421, help="the seed the cases are drawn from")
    parser.add_argument("--policies", default="balanced,seed", help="comma-separated names")
    parser.add_argument("--kinds", default=",".join(KINDS), help="comma-separated kinds")
    parser.add_argument("--worst", type=int, default=5, help="harmful runs shown a policy")
    parser.add_argument(
        "--causes", type=float, default=None, help="REGRET: sort runs above it by cause"
    )
    args = parser.parse_args(argv)
    kinds = args.kinds.split(",")
    if unknown := [k for k in kinds if k not in KINDS]:
        parser.error(f"--kinds: unknown {', '.join(unknown)}; known: {', '.join(KINDS)}")
    if args.cases < 1 or args.seeds < 1:
        parser.error(f"--cases and --seeds must be at least 1, got {args.cases} and {args.seeds}")
    # unseen.py's option parsing gives the settings, the policies and a sweep lock of our own
    defaults = argparse.Namespace(memory="0,0", noise="0.01,0.10", spikes=0.06)
    _, settings, policies = case_setup(parser, argparse.Namespace(**vars(defaults), **vars(args)))
    cases = draw_cases(args.cases, args.base)
    print(
        f"{args.cases} of unseen.py's landscapes (base {args.base}) a kind x {args.seeds} noise "
        "draws; captured and offered are means per run of 1 - chosen/native and 1 - best/native\n"
    )
    for kind in kinds:
        odds = [odd_case(kind, case) for case in cases]
        odds = [o for o in odds if upper_chunk(o.num_envs, o.nthread) > 1]
        runs = odd_runs(odds, policies, args.seeds, settings)
        print(tables(runs, args.worst, args.causes), flush=True)
        print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
