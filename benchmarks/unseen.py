"""Policies on landscapes drawn at random: shapes, sizes and noise the suite never named.

    python benchmarks/unseen.py [--cases 300] [--seeds 3] [--base 777] [--policies balanced,patient]
                                [--memory LOW,HIGH] [--noise LOW,HIGH] [--spikes MAX]

The simulated suite (``cases.py``) is a fixed list, and a policy tuned on it may fit
it. Here every case is drawn from ``--base``: a layout (any of ``chunktune.sim``'s),
4-128 threads, 8-256 envs a thread (plus a remainder), a native call of 20-500 ms,
a contended queue or none, and noise of 1-10% per call with 0-6% spikes and a 0-15%
drift. Each case runs ``--seeds`` noise draws per policy, in simulated seconds, and is
scored by its exact model: regret (chosen over the best size, minus 1), harm (chosen
over native, minus 1; a run more than 0.5% slower counts) and the share of the gain
on offer (native against the best size) captured, summed over every run. Different
``--base`` values give independent sets: a change that helps on one and not another
is fitting, not a method. ``--memory LOW,HIGH`` gives each case's noise a memory drawn
from that range (``Noise.memory``: the correlation of neighbouring calls' noise; the
recorded 2-core VM has about 0.5) from a generator of its own, so the landscapes stay
those of the same base without it. ``--noise LOW,HIGH`` and ``--spikes MAX`` widen (or
narrow) the range each case's noise and share of spiked calls are drawn from (this
project's 2-core VM varies 10-14% a call); at their defaults the draws are the ones
every earlier figure of a base was made on.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping, Sequence
from typing import NamedTuple, Protocol

import attrs
import numpy as np
import numpy.typing as npt
from cases import at_least_one
from measure import bench_settings, own_sweep_lock, policies_named, scored

import chunktune
from chunktune import Policy, Settings
from chunktune.sim import LAYOUTS, Noise, SimulatedWorkload, env_costs

HARM = 0.005  # a run more than this slower than native is a harmful one

FloatArray = npt.NDArray[np.float64]


class NoiseRanges(NamedTuple):
    """The ranges each drawn case's noise comes from: its noise a call (``sigma``), the
    most of its calls spiked (``spikes``) and the memory of neighbouring calls."""

    sigma: tuple[float, float] = (0.01, 0.10)
    spikes: float = 0.06
    memory: tuple[float, float] = (0.0, 0.0)

    def note(self) -> str:
        """What a headline says of these ranges: nothing of those at their defaults."""
        default = NoiseRanges()
        parts = []
        if self.sigma != default.sigma:
            parts.append(f", noise {self.sigma[0]:.0%}-{self.sigma[1]:.0%} a call")
        if self.spikes != default.spikes:
            parts.append(f", spikes up to {self.spikes:.0%} of calls")
        if self.memory[1] > 0:
            parts.append(f", noise memory {self.memory[0]:g}-{self.memory[1]:g}")
        return "".join(parts)


DEFAULT_RANGES = NoiseRanges()


class UnseenCase(NamedTuple):
    """One random landscape: the pool's costs and how its calls stray from them."""

    layout: str
    num_envs: int
    nthread: int
    mean_s: float
    queue_s: float
    noise: Noise
    number: int  # its place in the draw (not `index`: that is tuple's method)
    base: int

    @property
    def name(self) -> str:
        return f"{self.layout}-{self.num_envs}x{self.nthread}"

    @property
    def costs_seed(self) -> int:
        """The seed of this case's env costs."""
        return _seed(self.base, self.number, _COSTS)

    def costs(self) -> FloatArray:
        """The per-env costs in seconds: the layout's, of mean ``mean_s``."""
        return env_costs(self.layout, self.num_envs, mean_s=self.mean_s, seed=self.costs_seed)

    def workload(self, seed: int | None = None) -> SimulatedWorkload:
        """The pool: noiseless (the truth) when ``seed`` is None, else with its noise."""
        return SimulatedWorkload(
            self.costs(),
            nthread=self.nthread,
            queue_s=self.queue_s,
            noise=Noise() if seed is None else self.noise,
            seed=0 if seed is None else _seed(self.base, self.number, _NOISE, seed),
            name=self.layout,
        )


_COSTS, _NOISE = 1, 2  # what a seed is for: never a trailing zero (SeedSequence drops it)


def _seed(*parts: int) -> int:
    """A seed of its own for each (base, case[, draw]): no two bases share a case's costs
    or noise (``base + index`` made bases 777 and 778 share 299 of 300 cost seeds)."""
    return int(np.random.SeedSequence(parts).generate_state(1)[0])


def draw_cases(count: int, base: int, ranges: NoiseRanges = DEFAULT_RANGES) -> list[UnseenCase]:
    """``count`` random landscapes, the same for the same ``base``; their noise from ``ranges``."""
    rng = np.random.default_rng(base)
    remembers = np.random.default_rng([base, 1])
    cases = []
    for index in range(count):
        layout = str(rng.choice(LAYOUTS))
        nthread = int(rng.choice([4, 8, 12, 16, 24, 32, 48, 64, 96, 128]))
        num_envs = int(
            nthread * rng.choice([8, 16, 24, 32, 64, 128, 256]) + rng.integers(0, nthread)
        )
        call_s = float(np.exp(rng.uniform(np.log(0.02), np.log(0.5))))
        queue_s = float(rng.choice([0.0, 0.0, 1e-6, 5e-6, 2e-5]))
        noise = Noise(
            sigma=float(rng.uniform(*ranges.sigma)),
            spike_prob=float(rng.uniform(0.0, ranges.spikes)),
            spike_scale=0.5,
            drift=float(rng.uniform(0.0, 0.15)),
            drift_period=97.0,
            memory=float(remembers.uniform(*ranges.memory)) if ranges.memory[1] > 0 else 0.0,
        )
        mean_s = call_s * nthread / num_envs
        cases.append(UnseenCase(layout, num_envs, nthread, mean_s, queue_s, noise, index, base))
    return cases


class UnseenRow(NamedTuple):
    """One policy's sweep of one noise draw of one case, scored by the exact model."""

    case: str
    policy: str
    seed: int
    chunk_size: int | None
    regret: float
    vs_native: float  # chosen / native - 1: above 0 is slower than native
    offered: float  # 1 - best / native
    probe_seconds: float
    reason: str  # the decision's reason

    @classmethod
    def of(
        cls,
        case: str,
        policy: str,
        seed: int,
        decision: chunktune.Decision,
        *,
        chosen: float,
        best: float,
        native: float,
    ) -> UnseenRow:
        """The row of ``decision``, given the true seconds of its size, the best and native."""
        return cls(
            case,
            policy,
            seed,
            decision.chunk_size,
            chosen / best - 1.0,
            chosen / native - 1.0,
            1.0 - best / native,
            decision.probe_seconds,
            decision.reason,
        )


def unseen_rows(
    cases: Sequence[UnseenCase], policies: Mapping[str, Policy], seeds: int, settings: Settings
) -> list[UnseenRow]:
    rows = []
    for case in cases:
        truth = case.workload()
        native = truth.true_time(None)
        _, best = truth.oracle()
        for name, policy in policies.items():
            for seed in range(seeds):
                decision = scored(
                    chunktune.resolve_sync(
                        case.workload(seed),
                        settings=settings,
                        policy=attrs.evolve(policy, seed=seed),
                    ),
                    f"{name} on case {case.number} ({case.name}) seed {seed}",
                )
                chosen = truth.true_time(decision.chunk_size)
                rows.append(
                    UnseenRow.of(
                        case.name, name, seed, decision, chosen=chosen, best=best, native=native
                    )
                )
    return rows


class Summary(NamedTuple):
    runs: int
    median: float
    p90: float
    harmful: int
    worst: float  # the largest chosen / native - 1
    offered: float  # summed over runs
    captured: float  # summed over runs
    probe_s: float  # mean per run


class Scored(Protocol):
    """A run scored by the exact model: :class:`UnseenRow`, or ``adversary.py``'s rows."""

    @property
    def policy(self) -> str: ...
    @property
    def regret(self) -> float: ...
    @property
    def vs_native(self) -> float: ...
    @property
    def offered(self) -> float: ...
    @property
    def probe_seconds(self) -> float: ...


def summarize(rows: Sequence[Scored]) -> dict[str, Summary]:
    out = {}
    for name in dict.fromkeys(r.policy for r in rows):
        mine = [r for r in rows if r.policy == name]
        regret = np.array([r.regret for r in mine])
        harm = np.array([r.vs_native for r in mine])
        out[name] = Summary(
            runs=len(mine),
            median=float(np.median(regret)),
            p90=float(np.percentile(regret, 90)),
            harmful=int(np.sum(harm > HARM)),
            worst=float(harm.max()),
            offered=float(sum(r.offered for r in mine)),
            captured=float(-harm.sum()),
            probe_s=float(np.mean([r.probe_seconds for r in mine])),
        )
    return out


SUMMARY_HEAD = (
    f"{'policy':10s} {'runs':>5s} {'median':>7s} {'p90':>7s} {'>0.5% slower':>13s} "
    f"{'worst vs nat':>13s} {'captured':>9s} {'of offered':>11s} {'share':>6s} "
    f"{'probe s/run':>12s}"
)


def summary_line(name: str, s: Summary) -> str:
    """``name``'s row under :data:`SUMMARY_HEAD`."""
    share = s.captured / s.offered if s.offered > 0 else 0.0
    return (
        f"{name:10s} {s.runs:5d} {s.median:7.2%} {s.p90:7.2%} {s.harmful:13d} "
        f"{s.worst:+13.2%} {s.captured / s.runs:9.2%} {s.offered / s.runs:11.2%} "
        f"{share:6.1%} {s.probe_s:12.1f}"
    )


def report(rows: Sequence[UnseenRow]) -> str:
    lines = [SUMMARY_HEAD, "-" * len(SUMMARY_HEAD)]
    lines += [summary_line(name, s) for name, s in summarize(rows).items()]
    return "\n".join(lines)


def case_options(parser: argparse.ArgumentParser, *, policies: str) -> None:
    """Add the options of a judge of drawn cases: ``--cases``, ``--seeds``, ``--base``,
    ``--policies`` (``policies`` by default), ``--memory``, ``--noise`` and ``--spikes``."""
    parser.add_argument("--cases", type=at_least_one, default=300, help="random landscapes to draw")
    parser.add_argument(
        "--seeds", type=at_least_one, default=3, help="noise draws per case and policy"
    )
    parser.add_argument("--base", type=int, default=777, help="the seed the cases are drawn from")
    parser.add_argument("--policies", default=policies, help="comma-separated names")
    parser.add_argument(
        "--memory", default="0,0", help="LOW,HIGH: the range of each case's noise memory"
    )
    parser.add_argument(
        "--noise", default="0.01,0.10", help="LOW,HIGH: the range of each case's noise a call"
    )
    parser.add_argument(
        "--spikes", type=float, default=0.06, help="MAX: the most of a case's calls spiked"
    )


def _pair(
    parser: argparse.ArgumentParser, option: str, text: str, high: float
) -> tuple[float, float]:
    """``LOW,HIGH`` of ``option``: two numbers, 0 <= LOW <= HIGH <= ``high``, else
    ``parser.error``."""
    try:
        low, up = (float(x) for x in text.split(","))
    except ValueError:
        parser.error(f"{option} {text}: expected LOW,HIGH (two numbers, as 0.2,0.6)")
    if not 0.0 <= low <= up <= high:
        parser.error(f"{option} {text}: expected 0 <= LOW <= HIGH <= {high:g}")
    return low, up


def case_setup(
    parser: argparse.ArgumentParser, args: argparse.Namespace
) -> tuple[NoiseRanges, Settings, dict[str, Policy]]:
    """The noise ranges, the settings and the policies :func:`case_options` named, with
    a sweep lock of this process's own; a bad option exits through ``parser.error``."""
    own_sweep_lock()
    memory = _pair(parser, "--memory", args.memory, 0.99)
    sigma = _pair(parser, "--noise", args.noise, 2.0)
    if not 0.0 <= args.spikes <= 1.0:
        parser.error(f"--spikes {args.spikes:g}: expected a share of calls from 0 to 1")
    settings = bench_settings()
    try:
        policies = policies_named(settings, args.policies.split(","))
    except chunktune.ConfigError as exc:
        parser.error(f"--policies: {exc}")
    return NoiseRanges(sigma, args.spikes, memory), settings, policies


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    case_options(parser, policies="balanced,patient")
    args = parser.parse_args(argv)
    ranges, settings, policies = case_setup(parser, args)
    cases = draw_cases(args.cases, args.base, ranges)
    rows = unseen_rows(cases, policies, args.seeds, settings)
    print(
        f"{args.cases} random landscapes (base {args.base}{ranges.note()}) x "
        f"{args.seeds} noise draws; "
        "captured and offered are means per run of 1 - chosen/native and 1 - best/native\n"
    )
    print(report(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
