"""Policies under machine noise the simulator never modeled: steps, bursts, trends, cycles.

    python benchmarks/adversary.py [--cases 150] [--seeds 3] [--base 901]
                                   [--policies balanced,patient,quick,thorough,seed]
                                   [--kinds step,markov,...] [--diagnose]

``chunktune.sim.Noise`` perturbs calls with lognormal jitter, spikes, a sinusoidal drift
and an AR(1) memory, each the same for every chunk size. A shared, noisy machine does
worse. Here every call of a noiseless landscape is multiplied by 1-5% lognormal jitter
and by an adversarial machine factor of one kind (``KINDS``):

- ``calm``: nothing more (the control);
- ``step``: the machine slows by 20-60% at a random call of the sweep (a CPU hog
  arriving) and stays slow, or, half the time, recovers 5 to K/2 calls later;
- ``markov``: a two-state machine, calm or busy (+30-80%), mean dwell 3-30 calls each;
- ``trend``: the machine slows or speeds steadily by 20-50% over K calls;
- ``sizenoise``: small chunks (many dispatches) have 2-3x the call-to-call sigma of
  the largest (1-4%), lognormal with mean 1, so every size's mean is its truth;
- ``tail``: a third of the sizes have a Pareto tail (alpha 1.5-3, 5-20% of calls),
  scaled to mean 1;
- ``periodic``: a load of +20-60% on D of every P calls (P 2-16), at a random phase,
  in and out of step with the confirmation's 8-call N W W N / W N N W cycle;
- ``bimodal``: on 30-60% of the sizes each call is 15-40% slow with probability
  0.2-0.5, scaled to mean 1.

K is the calls a 10 s budget buys at native's time. The factors of size-dependent
kinds have mean 1 for every size, so the exact model is what a trainer pays on
average (a median-like estimator sees a size with a tail as faster than it is).

The landscapes come in three families, a third of ``--cases`` each: ``random`` (the
random landscapes of ``unseen.py`` drawn from ``--base``, noiseless), ``native``
(every size 0.6-6% slower than native: any leave is harm) and ``hard`` (a band of
sizes 1-3% faster than native, the rest 0.6-6% slower). Each case runs ``--seeds``
machines, the same machine (its factor by call number) for every policy, except under
``sizenoise`` and ``tail``, whose extra draws follow the sizes called (those two are
not paired across policies: unbiased, noisier). Scored by
the exact model: regret, harm (chosen over native, minus 1; a run more than 0.5%
slower counts) and the share of the gain on offer captured. ``--diagnose`` prints,
for each harmful run of a confirming policy, where it got through: what the race
chose, and the confirmation's pairs split into the landscape's part and the
machine's (a machine part biased the same way in every block is one no paired test
survives; an unbiased one means the test itself let it through).
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import NamedTuple

import attrs
import numpy as np
from measure import bench_settings, own_sweep_lock, policies_named, scored
from unseen import HARM, SUMMARY_HEAD, draw_cases, summarize, summary_line

import chunktune
from chunktune import Policy, ProgressEvent, Settings
from chunktune._events import CALLS
from chunktune._stats import estimate
from chunktune._workload import native_chunk, upper_chunk
from chunktune.sim import ModeledTime

BUDGET_S = 10.0  # the budget K is priced by: balanced's
KINDS = ("calm", "step", "markov", "trend", "sizenoise", "tail", "periodic", "bimodal")
FAMILIES = ("random", "native", "hard")
_CASE, _MACHINE = 3, 4  # what a seed is for (never a trailing zero)


def _seed(*parts: int) -> int:
    return int(np.random.SeedSequence(parts).generate_state(1)[0])


class Truth:
    """A landscape's exact seconds per chunk size (``None`` = native)."""

    num_envs: int
    nthread: int

    def true_time(self, chunk_size: int | None) -> float:
        raise NotImplementedError


class SimTruth(Truth):
    """A noiseless ``SimulatedWorkload`` of ``unseen.py``'s random cases."""

    def __init__(self, workload: chunktune.sim.SimulatedWorkload) -> None:
        self.workload = workload
        self.num_envs, self.nthread = workload.num_envs, workload.nthread

    def true_time(self, chunk_size: int | None) -> float:
        return self.workload.true_time(chunk_size)


class TableTruth(Truth):
    """Native at ``native_s``; each other size slower by 0.6-6%, or in ``good`` faster by 1-3%."""

    def __init__(
        self, num_envs: int, nthread: int, native_s: float, good: tuple[int, int], seed: int
    ) -> None:
        self.num_envs, self.nthread = num_envs, nthread
        self.native = native_chunk(num_envs, nthread)
        self.native_s, self.good, self.seed = native_s, good, seed
        self._times: dict[int, float] = {}

    def true_time(self, chunk_size: int | None) -> float:
        c = self.native if chunk_size is None else min(chunk_size, self.num_envs)
        if c == self.native:
            return self.native_s
        if c not in self._times:
            rng = np.random.default_rng([self.seed, c])
            if self.good[0] <= c <= self.good[1]:
                factor = 1.0 - rng.uniform(0.01, 0.03)
            else:  # a third are near-ties that noise can flip
                factor = 1.0 + (
                    rng.uniform(0.006, 0.015) if rng.random() < 1 / 3 else rng.uniform(0.015, 0.06)
                )
            self._times[c] = self.native_s * factor
        return self._times[c]


class Case(NamedTuple):
    family: str
    number: int  # its place among its family's cases (not `index`: tuple's method)
    base: int
    truth: Truth

    @property
    def name(self) -> str:
        return f"{self.family}-{self.truth.num_envs}x{self.truth.nthread}"


def draw(count: int, base: int) -> list[Case]:
    """``count`` landscapes of ``base``, a third of each family (random first)."""
    per = [count // 3 + (k < count % 3) for k in range(3)]
    cases = [
        Case("random", u.number, base, SimTruth(u.workload())) for u in draw_cases(per[0], base)
    ]
    rng = np.random.default_rng([base, _CASE])
    for family, n in zip(FAMILIES[1:], per[1:], strict=True):
        for index in range(n):
            nthread = int(rng.choice([4, 8, 16, 32, 64, 128]))
            num_envs = int(nthread * rng.choice([16, 32, 64, 128, 256]) + rng.integers(0, nthread))
            native_s = float(np.exp(rng.uniform(np.log(0.02), np.log(0.5))))
            good = (0, -1)
            if family == "hard":  # a band around a chunk away from native, +-20% wide
                upper = upper_chunk(num_envs, nthread)
                native = native_chunk(num_envs, nthread)
                while True:
                    center = float(np.exp(rng.uniform(0.0, np.log(upper))))
                    good = (max(1, int(center * 0.8)), max(1, math.ceil(center * 1.2)))
                    if not good[0] <= native <= good[1]:
                        break
            seed = _seed(base, _CASE, index, FAMILIES.index(family))
            truth = TableTruth(num_envs, nthread, native_s, good, seed)
            cases.append(Case(family, index, base, truth))
    return cases


class Machine:
    """The adversary: one factor per call of one kind, by call number and chunk size."""

    def __init__(self, kind: str, calls: float, upper: int, seed: int) -> None:
        self.kind, self.upper = kind, upper
        self.params = np.random.default_rng([seed, 1])
        self.rng = np.random.default_rng([seed, 2])
        self.sigma = float(self.params.uniform(0.01, 0.05))  # the base jitter
        k = max(8.0, calls)
        u = self.params.uniform
        self.at = int(u(0.0, k))  # step
        self.until = self.at + int(u(5, max(6.0, k / 2))) if u() < 0.5 else math.inf
        self.slow = u(0.2, 0.6) if kind == "step" else u(0.3, 0.8)
        self.dwell = (u(3, 30), u(3, 30))  # markov: calm, busy
        self.busy = u() < 0.5
        self.slope = math.log1p(u(0.2, 0.5)) * (1 if u() < 0.5 else -1) / k  # trend
        self.ratio, self.large = u(2.0, 3.0), u(0.01, 0.04)  # sizenoise
        self.alpha, self.hit, self.scale = u(1.5, 3.0), u(0.05, 0.2), u(0.1, 0.5)  # tail
        self.period = int(self.params.integers(2, 17))  # periodic
        self.duty = int(self.params.integers(1, max(1, self.period // 2) + 1))
        self.phase, self.load = int(self.params.integers(0, self.period)), u(0.2, 0.6)
        self.share, self.jump, self.often = u(0.3, 0.6), u(0.15, 0.4), u(0.2, 0.5)  # bimodal
        self.salt = int(self.params.integers(0, 2**31))
        self._draws: dict[int, float] = {}

    def _chosen(self, chunk: int, share: float) -> bool:
        """Whether ``chunk`` is one of the sizes (a ``share`` of them) a size-kind hits."""
        # the draw depends on the size alone: a generator made per call cost more than the
        # rest of a call's factor together (most of a 40,000-call run)
        if (draw := self._draws.get(chunk)) is None:
            draw = self._draws[chunk] = float(np.random.default_rng([self.salt, chunk]).random())
        return draw < share

    def factor(self, call: int, chunk: int) -> float:
        """The machine's factor on call number ``call`` (from 0) of ``chunk``."""
        rng, kind = self.rng, self.kind
        z, v, w = rng.standard_normal(), rng.random(), rng.random()  # the same draws every kind
        f = math.exp(self.sigma * z)
        if kind == "step":
            f *= 1.0 + self.slow if self.at <= call < self.until else 1.0
        elif kind == "markov":
            if v < 1.0 / self.dwell[int(self.busy)]:
                self.busy = not self.busy
            f *= 1.0 + self.slow if self.busy else 1.0
        elif kind == "trend":
            f *= math.exp(self.slope * call)
        elif kind == "sizenoise":
            share = math.log(self.upper / min(chunk, self.upper)) / math.log(max(2, self.upper))
            s = self.large * (1.0 + (self.ratio - 1.0) * share)
            f *= math.exp(s * float(rng.standard_normal()) - s * s / 2)  # mean 1
        elif kind == "tail" and self._chosen(chunk, 1 / 3):
            mean = 1.0 + self.hit * self.scale / (self.alpha - 1.0)
            f *= (1.0 + (self.scale * rng.pareto(self.alpha) if v < self.hit else 0.0)) / mean
        elif kind == "periodic":
            f *= 1.0 + self.load if (call + self.phase) % self.period < self.duty else 1.0
        elif kind == "bimodal" and self._chosen(chunk, self.share):
            f *= (1.0 + (self.jump if w < self.often else 0.0)) / (1.0 + self.often * self.jump)
        return f


class Adversarial(ModeledTime):
    """A workload: each call is the truth times the machine's factor, in simulated seconds."""

    def __init__(self, truth: Truth, machine: Machine, name: str) -> None:
        self.truth, self.machine, self.name = truth, machine, name
        self.num_envs, self.nthread = truth.num_envs, truth.nthread
        self.native = native_chunk(self.num_envs, self.nthread)
        self.calls, self.elapsed_s = 0, 0.0
        self.factors: list[float] = []

    def signature(self) -> dict[str, str]:
        return {"kind": "adversary", "name": self.name}

    def run(self, chunk_size: int | None) -> float:
        chunk = self.native if chunk_size is None else chunk_size
        factor = self.machine.factor(self.calls, chunk)
        seconds = self.truth.true_time(chunk_size) * factor
        self.factors.append(factor)
        self.calls += 1
        self.elapsed_s += seconds
        return seconds

    def clock(self) -> float:
        """Simulated seconds, so the budget binds as on a real pool."""
        return self.elapsed_s


def machine_for(case: Case, kind: str, seed: int) -> Machine:
    """The machine of one (case, kind, seed): the same for every policy."""
    t = case.truth
    calls = BUDGET_S / t.true_time(None)
    upper = upper_chunk(t.num_envs, t.nthread)
    ident = _seed(case.base, _MACHINE, FAMILIES.index(case.family), case.number, KINDS.index(kind))
    return Machine(kind, calls, upper, _seed(ident, seed + 1))


class Row(NamedTuple):
    """One policy's sweep of one machine on one case, scored by the exact model."""

    kind: str
    family: str
    case: str
    policy: str
    seed: int
    chunk_size: int | None
    regret: float
    vs_native: float  # chosen / native - 1: above 0 is slower than native
    offered: float  # 1 - best / native
    probe_seconds: float
    diagnosis: str


def _best(truth: Truth) -> float:
    upper = upper_chunk(truth.num_envs, truth.nthread)
    return min(truth.true_time(c) for c in range(1, upper + 1))


def diagnose(
    events: Sequence[ProgressEvent], factors: Sequence[float], truth: Truth, chunk: int
) -> str:
    """Where a harmful choice got through: the race's pick and its confirmation's pairs.

    Each confirmation pair's log gain is split into the landscape's part (the same in
    every pair) and the machine's (the factors of its two calls).
    """
    calls = [e for e in events if e.kind in CALLS]
    confirm = [(i, e) for i, e in enumerate(calls) if e.kind == "confirm"]
    true_d = math.log(truth.true_time(None) / truth.true_time(chunk))
    if not confirm:
        return f"unconfirmed: the race chose {chunk} (true gain {true_d:+.2%})"
    blocks: dict[int, list[tuple[int, ProgressEvent]]] = {}
    for i, e in confirm:
        blocks.setdefault(e.round, []).append((i, e))
    machine: list[float] = []
    for block in blocks.values():
        if len(block) < 4:
            continue
        nat = [i for i, e in block if e.chunk_size is None]
        win = [i for i, e in block if e.chunk_size is not None]
        machine += [math.log(factors[n] / factors[w]) for n, w in zip(nat, win, strict=True)]
    m = np.array(machine)
    owned = [
        float(np.median([math.log(factors[i]) for i, e in enumerate(calls) if e.chunk_size == c]))
        for c in (None, chunk)
    ]
    return (
        f"race chose {chunk} (true gain {true_d:+.2%}); {len(m)} pairs: machine part "
        f"trimmed {estimate(list(m), 'trimmed_mean') if len(m) else 0.0:+.2%}, mean "
        f"{m.mean() if len(m) else 0.0:+.2%}; native's typical call over the winner's, "
        f"whole sweep {owned[0] - owned[1]:+.2%}"
    )


def adversary_rows(
    cases: Sequence[Case],
    kinds: Sequence[str],
    policies: Mapping[str, Policy],
    seeds: int,
    settings: Settings,
    progress: Callable[[str], None] | None = None,
) -> list[Row]:
    rows = []
    for kind in kinds:
        for case in cases:
            truth = case.truth
            native, best = truth.true_time(None), _best(truth)
            for seed in range(seeds):
                for name, policy in policies.items():
                    w = Adversarial(truth, machine_for(case, kind, seed), case.name)
                    events: list[ProgressEvent] = []
                    decision = scored(
                        chunktune.resolve_sync(
                            w,
                            settings=settings,
                            policy=attrs.evolve(policy, seed=seed),
                            on_progress=events.append,
                        ),
                        f"{name} on {kind} case {case.family} {case.number} seed {seed}",
                    )
                    chosen = truth.true_time(decision.chunk_size)
                    harm = chosen / native - 1.0
                    why = ""
                    if harm > HARM and decision.chunk_size is not None:
                        why = diagnose(events, w.factors, truth, decision.chunk_size)
                    rows.append(
                        Row(
                            kind,
                            case.family,
                            case.name,
                            name,
                            seed,
                            decision.chunk_size,
                            chosen / best - 1.0,
                            harm,
                            1.0 - best / native,
                            decision.probe_seconds,
                            why,
                        )
                    )
        if progress is not None:
            progress(kind)
    return rows


def table(rows: Sequence[Row]) -> str:
    head = f"{SUMMARY_HEAD} {'harmful native/hard/random':>27s}"
    lines = [head, "-" * len(head)]
    for name, s in summarize(rows).items():
        by = "/".join(
            str(sum(r.vs_native > HARM for r in rows if r.policy == name and r.family == f))
            for f in ("native", "hard", "random")
        )
        lines.append(f"{summary_line(name, s)} {by:>27s}")
    return "\n".join(lines)


def report(rows: Sequence[Row], diagnose_harm: bool = False) -> str:
    """A table per noise kind; with ``diagnose_harm``, each harmful run of a confirming one."""
    parts = []
    for kind in dict.fromkeys(r.kind for r in rows):
        mine = [r for r in rows if r.kind == kind]
        parts.append(f"== {kind}\n{table(mine)}")
        if diagnose_harm:
            for r in mine:
                if r.diagnosis and r.policy != "seed":
                    parts.append(
                        f"  {r.policy} {r.case} seed {r.seed}: chose {r.chunk_size}, "
                        f"{r.vs_native:+.2%} vs native; {r.diagnosis}"
                    )
    return "\n".join(parts)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=150, help="landscapes, a third a family")
    parser.add_argument("--seeds", type=int, default=3, help="machines per case, kind and policy")
    parser.add_argument("--base", type=int, default=901, help="the seed the cases are drawn from")
    parser.add_argument(
        "--policies", default="balanced,patient,quick,thorough,seed", help="comma-separated names"
    )
    parser.add_argument("--kinds", default=",".join(KINDS), help="comma-separated noise kinds")
    parser.add_argument(
        "--diagnose", action="store_true", help="say where each harmful run got through"
    )
    args = parser.parse_args(argv)
    own_sweep_lock()
    kinds = args.kinds.split(",")
    if unknown := [k for k in kinds if k not in KINDS]:
        parser.error(f"--kinds: unknown {', '.join(unknown)}; known: {', '.join(KINDS)}")
    if args.cases < 1 or args.seeds < 1:
        parser.error(f"--cases and --seeds must be at least 1, got {args.cases} and {args.seeds}")
    settings = bench_settings()
    try:
        policies = policies_named(settings, args.policies.split(","))
    except chunktune.ConfigError as exc:
        parser.error(f"--policies: {exc}")
    cases = draw(args.cases, args.base)
    print(
        f"{args.cases} landscapes (base {args.base}: native-best, hard and random thirds) x "
        f"{args.seeds} machines per noise kind; captured and offered are means per run of "
        "1 - chosen/native and 1 - best/native\n"
    )
    for kind in kinds:
        rows = adversary_rows(cases, [kind], policies, args.seeds, settings)
        print(report(rows, args.diagnose), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
