"""Policies on landscapes of cost shapes that no layout of ``chunktune.sim`` names.

    python benchmarks/novel.py [--cases 300] [--seeds 3] [--base 777] [--policies balanced,seed]
                               [--memory LOW,HIGH] [--noise LOW,HIGH]
                               [--spikes MAX] [--worst 5]

``unseen.py`` draws its pools at random, but their per-env costs come from the six
layouts ``chunktune.sim.env_costs`` knows, the shapes the policies were looked at on.
Here each case is ``unseen.py``'s case of the same ``--base`` and number (threads,
envs, native call, queue, noise and its memory), but its costs are of a shape built
here from numpy, one of ``FAMILIES`` (each family's builder says what it models),
dealt evenly over the cases in an order drawn from the base:

- ``ramp``: cost rising or falling along the batch, linearly or exponentially, the
  last env 1.5-10x the first;
- ``pareto``: independent Pareto costs (alpha 1.2-2.5, capped at 100x the least);
- ``clusters``: 10-60 small clusters of 1-8 neighbouring envs, 3-10x the rest;
- ``bimodal``: 5-60% of the envs, at random places, 2-8x the rest;
- ``cycle``: costs repeating every 3, 5 or 7 envs, a period that does not divide the
  threads, each place in the cycle its own lognormal level (log-spread 0.3-1);
- ``stragglers``: 1-4 envs at random places, 20-100x the rest;
- ``smooth``: log-cost a stationary AR(1) field along the batch (log-spread 0.3-0.8,
  correlation length 2-20% of the batch).

Every shape is scaled to the case's mean cost, so native's call is what the pool drew.
Each case runs ``--seeds`` noise draws per policy in simulated seconds and is scored by
its exact model as in ``unseen.py``: one table over every case, one per family, then,
per policy, its worst runs (up to ``--worst``) more than 0.5% slower than native, each
with its case and the decision's reason. A base's table here and ``unseen.py``'s differ
by the costs' shapes alone.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable, Sequence

import numpy as np
from unseen import (
    DEFAULT_RANGES,
    HARM,
    SUMMARY_HEAD,
    FloatArray,
    NoiseRanges,
    UnseenCase,
    UnseenRow,
    case_options,
    case_setup,
    draw_cases,
    report,
    summarize,
    summary_line,
    unseen_rows,
)

from chunktune import Policy, Settings
from chunktune._workload import native_chunk

_DEAL, _SHAPE = 2, 3  # what a seed is for, beside unseen.py's (never a trailing zero)


def _ramp(n: int, nthread: int, rng: np.random.Generator) -> FloatArray:
    """A curriculum that hands later envs harder terrain: cost grows (or falls) with the index."""
    ratio = math.exp(rng.uniform(math.log(1.5), math.log(10.0)))
    exponential, falling = rng.random() < 0.5, rng.random() < 0.5
    along = np.linspace(0.0, 1.0, n)
    costs = ratio**along if exponential else 1.0 + (ratio - 1.0) * along
    return costs[::-1] if falling else costs


def _pareto(n: int, nthread: int, rng: np.random.Generator) -> FloatArray:
    """Contacts that pile up in a few envs: independent heavy-tailed (Pareto) costs."""
    return np.minimum(1.0 + rng.pareto(rng.uniform(1.2, 2.5), n), 100.0)


def _clusters(n: int, nthread: int, rng: np.random.Generator) -> FloatArray:
    """Bursty contact among envs reset together: many small heavy runs of neighbours."""
    count = min(int(rng.integers(10, 61)), max(1, n // 16))  # small batches stay mostly light
    starts, widths = rng.integers(0, n, count), rng.integers(1, 9, count)
    factor = rng.uniform(3.0, 10.0)
    costs = np.ones(n)
    for start, width in zip(starts.tolist(), widths.tolist(), strict=True):
        costs[start : start + width] = factor
    return costs


def _bimodal(n: int, nthread: int, rng: np.random.Generator) -> FloatArray:
    """Randomized initial states, some in contact and some free: two levels at random places."""
    fraction, factor = rng.uniform(0.05, 0.60), rng.uniform(2.0, 8.0)
    costs = np.ones(n)
    costs[rng.permutation(n)[: max(1, round(fraction * n))]] = factor
    return costs


def _cycle(n: int, nthread: int, rng: np.random.Generator) -> FloatArray:
    """Robot or terrain variants dealt round-robin, in a period that does not divide the threads."""
    # 11 only where the threads are a multiple of 105, which no drawn pool is
    period = int(rng.choice([p for p in (3, 5, 7) if nthread % p] or [11]))
    levels = rng.lognormal(0.0, rng.uniform(0.3, 1.0), period)
    return levels[np.arange(n) % period]


def _stragglers(n: int, nthread: int, rng: np.random.Generator) -> FloatArray:
    """A few envs stuck deep in penetration, the solver at its iteration cap: extreme stragglers."""
    count = min(int(rng.integers(1, 5)), n)
    costs = np.ones(n)
    costs[rng.choice(n, count, replace=False)] = rng.uniform(20.0, 100.0, count)
    return costs


def _smooth(n: int, nthread: int, rng: np.random.Generator) -> FloatArray:
    """Neighbouring envs share a terrain patch: cost drifts smoothly along the batch."""
    rho = math.exp(-1.0 / (rng.uniform(0.02, 0.20) * n))
    sigma = rng.uniform(0.3, 0.8)
    shocks = rng.standard_normal(n) * math.sqrt(1.0 - rho**2)
    field = np.empty(n)
    field[0] = shocks[0] / math.sqrt(1.0 - rho**2)  # stationary from the first env
    for k in range(1, n):
        field[k] = rho * field[k - 1] + shocks[k]
    return np.exp(sigma * field)


FAMILIES: dict[str, Callable[[int, int, np.random.Generator], FloatArray]] = {
    "ramp": _ramp,
    "pareto": _pareto,
    "clusters": _clusters,
    "bimodal": _bimodal,
    "cycle": _cycle,
    "stragglers": _stragglers,
    "smooth": _smooth,
}


class NovelCase(UnseenCase):
    """``unseen.py``'s case with the costs of a family here; ``layout`` names the family."""

    __slots__ = ()

    @property
    def costs_seed(self) -> int:
        """The seed of this case's env costs (none of ``unseen.py``'s)."""
        return int(np.random.SeedSequence((self.base, self.number, _SHAPE)).generate_state(1)[0])

    def costs(self) -> FloatArray:
        """The per-env costs in seconds: the family's shape, of mean ``mean_s``."""
        rng = np.random.default_rng(self.costs_seed)
        shape = FAMILIES[self.layout](self.num_envs, self.nthread, rng)
        return shape * (self.mean_s / float(np.mean(shape)))


def draw(count: int, base: int, ranges: NoiseRanges = DEFAULT_RANGES) -> list[NovelCase]:
    """``count`` cases of ``base``: ``unseen.py``'s pools, the families dealt evenly over them."""
    names = list(FAMILIES)
    deal = np.random.default_rng([base, _DEAL]).permutation(np.resize(range(len(names)), count))
    return [
        NovelCase(*pool._replace(layout=names[family]))
        for pool, family in zip(draw_cases(count, base, ranges), deal.tolist(), strict=True)
    ]


Run = tuple[NovelCase, UnseenRow]


def novel_runs(
    cases: Sequence[NovelCase], policies: dict[str, Policy], seeds: int, settings: Settings
) -> list[Run]:
    """Every policy on every case under ``seeds`` noise draws, each row beside its case."""
    return [(case, row) for case in cases for row in unseen_rows([case], policies, seeds, settings)]


def _by_family(runs: Sequence[Run]) -> str:
    head = f"{'family':11s} {'cases':>5s} {SUMMARY_HEAD}"
    lines = [head, "-" * len(head)]
    for family in FAMILIES:
        rows = [row for case, row in runs if case.layout == family]
        count = len({case.number for case, _ in runs if case.layout == family})
        lines += [
            f"{family:11s} {count:5d} {summary_line(name, s)}"
            for name, s in summarize(rows).items()
        ]
    return "\n".join(lines)


def _where(case: NovelCase) -> str:
    """A case's pool and noise in one line."""
    noise = case.noise
    call = case.workload().true_time(None)
    return (
        f"{case.layout} case {case.number}: {case.num_envs} envs x {case.nthread} threads, "
        f"native call {call * 1e3:.0f} ms, queue {case.queue_s * 1e6:g} us, noise "
        f"{noise.sigma:.1%} (spikes {noise.spike_prob:.1%}, drift {noise.drift:.1%}, "
        f"memory {noise.memory:.2f})"
    )


def _harmful(runs: Sequence[Run], worst: int) -> str:
    lines = [f"runs more than {HARM:.1%} slower than native (the worst {worst} a policy):"]
    for name in dict.fromkeys(row.policy for _, row in runs):
        harmful = sorted(
            ((case, row) for case, row in runs if row.policy == name and row.vs_native > HARM),
            key=lambda run: -run[1].vs_native,
        )
        lines.append(f"{name}: {len(harmful)} of {sum(r.policy == name for _, r in runs)}")
        for case, row in harmful[:worst]:
            best = case.workload().oracle()[0]
            lines += [
                f"  {_where(case)}",
                f"    seed {row.seed}: chunk {row.chunk_size} (best {best}, native "
                f"{native_chunk(case.num_envs, case.nthread)}), "
                f"{row.vs_native:+.2%} vs native, regret {row.regret:.2%}",
                f"    reason: {row.reason}",
            ]
    return "\n".join(lines)


def tables(runs: Sequence[Run], worst: int = 5) -> str:
    """The summary over every case, one per family, and each policy's worst harmful runs."""
    rows = [row for _, row in runs]
    return "\n\n".join([report(rows), _by_family(runs), _harmful(runs, worst)])


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    case_options(parser, policies="balanced,seed")
    parser.add_argument("--worst", type=int, default=5, help="harmful runs shown a policy")
    args = parser.parse_args(argv)
    if args.worst < 0:
        parser.error(f"--worst {args.worst}: expected 0 or more runs")
    ranges, settings, policies = case_setup(parser, args)
    cases = draw(args.cases, args.base, ranges)
    runs = novel_runs(cases, policies, args.seeds, settings)
    print(
        f"{args.cases} landscapes of {len(FAMILIES)} cost shapes no layout names "
        f"(base {args.base}{ranges.note()}) x {args.seeds} noise draws; "
        "captured and offered are means per run of 1 - chosen/native and 1 - best/native\n"
    )
    print(tables(runs, args.worst))
    return 0


if __name__ == "__main__":
    sys.exit(main())
