"""A live A/A test: how often a policy leaves native for a gain that does not exist.

    python benchmarks/aa_live.py [--tunes 60] [--minutes 15] [--twins 1,4]
                                 [--cases tail,uniform] [--policies balanced] [--json OUT]

Each candidate the policy is offered is a twin of native (:class:`TwinWorkload`): asked
for a twin size, the real MuJoCo pool runs native's chunk (``chunk_size=None``). Every
twin IS native, so any decision that leaves native is a false confirmation, made on
this machine's real noise (drift, bursts, heavy tails) and not a simulator's. The
policy gets an explicit list of K twins (K = 1: the confirmation alone; K = 4: the
race's winner's curse, then the confirmation). The tunes run round-robin over the
settings (case x K x policy), so a spell of load falls on every setting alike, until
``--tunes`` each or ``--minutes`` in all. Every wrapper has a signature of its own and
the cache is off, so each tune measures.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
import numpy as np
from cases import live_cases
from measure import bench_settings, own_sweep_lock, scored

import chunktune
from chunktune import Policy
from chunktune._candidates import ExplicitCandidates
from chunktune._confirm import pair_gains
from chunktune._errors import InvalidArgumentError
from chunktune._events import ProgressEvent
from chunktune._stats import estimate, pooled_sigma, standard_error
from chunktune._workload import SignatureValue, native_chunk, upper_chunk

__all__ = [
    "TWIN_SIZES",
    "AARow",
    "TwinWorkload",
    "clopper_pearson",
    "kind_of",
    "main",
    "null_z",
    "tune_once",
]

TWIN_SIZES: tuple[int, ...] = (3, 5, 7, 9)
"""The sizes offered as twins, K of them from the first: none is native's at 256 x 2 (12)."""


class TwinWorkload:
    """A workload whose sizes in ``twins`` are native: asked for one, it runs ``None``.

    A twin above ``ceil(N/T)`` is asked for as ``ceil(N/T)``, as the explicit candidates
    clamp it, so that size is the twin. Any other size runs as itself. ``tune`` goes into
    the signature, so no two tunes share a cache entry or a remembered answer. ``calls``
    records every call as ``(asked, ran, seconds)``.

    Raises:
        InvalidArgumentError: ``twins`` is empty, or holds a size that is no integer
            >= 1 or is the inner workload's native chunk (the explicit candidates drop it).
    """

    def __init__(self, inner: chunktune.Workload, twins: Iterable[int], *, tune: int = 0) -> None:
        sizes = tuple(twins)
        native = native_chunk(inner.num_envs, inner.nthread)
        upper = upper_chunk(inner.num_envs, inner.nthread)
        bad = [s for s in sizes if not isinstance(s, int) or isinstance(s, bool) or s < 1]
        if not sizes or bad or native in {min(upper, s) for s in sizes}:
            raise InvalidArgumentError(
                f"twins {sizes!r}: expected one or more chunk sizes (integers >= 1) other "
                f"than the native chunk {native} (sizes above {upper} count as {upper})"
            )
        self.inner = inner
        self.twins = frozenset(min(upper, s) for s in sizes)
        self.tune = tune
        self.calls: list[tuple[int | None, int | None, float]] = []

    @property
    def num_envs(self) -> int:
        return self.inner.num_envs

    @property
    def nthread(self) -> int:
        return self.inner.nthread

    @property
    def settle_on_cancel(self) -> bool:
        return bool(getattr(self.inner, "settle_on_cancel", False))

    def signature(self) -> Mapping[str, SignatureValue]:
        twins = ",".join(str(s) for s in sorted(self.twins))
        return {**self.inner.signature(), "aa_twins": twins, "aa_tune": self.tune}

    def run(self, chunk_size: int | None) -> float:
        ran = None if chunk_size is None or chunk_size in self.twins else chunk_size
        seconds = self.inner.run(ran)
        self.calls.append((chunk_size, ran, seconds))
        return seconds


@attrs.frozen(kw_only=True)
class AARow:
    """One tune on twins: what it decided, why (``kind``), and its confirmation's pairs.

    ``pairs`` are the confirmation's log gains ``log(t_native / t_twin)`` in call order;
    ``block_drift`` per ABBA block the log ratio of its second native call to its first;
    ``call_log`` every call in order as ``(size asked, seconds)``.
    """

    case: str
    policy: str
    k: int
    tune: int
    chunk_size: int | None
    kind: str
    reason: str
    gain: float
    gain_ci: tuple[float, float] | None
    partial: bool
    probe_seconds: float
    calls: int
    pairs: tuple[float, ...]
    block_drift: tuple[float, ...]
    load: float
    call_log: tuple[tuple[int | None, float], ...] = ()


def kind_of(decision: chunktune.Decision) -> str:
    """Why a decision ended where it did: ``left`` native (a false confirmation here), or
    kept it by the ``gate`` (too noisy), the ``confirm``-ation, the ``budget``, or the
    ``race`` (no twin clear of native)."""
    if decision.chunk_size is not None:
        return "left"
    reason = decision.reason
    if "too noisy to confirm" in reason:
        return "gate"
    if "fresh pairs of calls against native" in reason:
        return "confirm"
    if "too long for" in reason or "budget ended before" in reason:
        return "budget"
    return "race"


def _confirmation(events: Sequence[ProgressEvent]) -> tuple[list[float], list[float]]:
    """The confirmation's pair log gains and each whole block's native drift."""
    blocks: dict[int, list[tuple[int | None, float]]] = {}
    for e in events:
        if e.kind == "confirm" and e.seconds is not None:
            blocks.setdefault(e.round, []).append((e.chunk_size, e.seconds))
    pairs: list[float] = []
    drift: list[float] = []
    for _, calls in sorted(blocks.items()):
        if len(calls) != 4:  # a block the budget cut: the sweep judged no pair of it
            continue
        order, seconds = [c for c, _ in calls], [s for _, s in calls]
        pairs += pair_gains(order, seconds)
        nat = [s for c, s in calls if c is None]
        drift.append(math.log(nat[1] / nat[0]))
    return pairs, drift


def tune_once(
    inner: chunktune.Workload,
    *,
    case: str,
    name: str,
    policy: Policy,
    k: int,
    tune: int,
    settings: chunktune.Settings,
) -> AARow:
    """One tune of ``policy`` on the first ``k`` twins over ``inner``, seeded by ``tune``."""
    twins = TWIN_SIZES[:k]
    workload = TwinWorkload(inner, twins, tune=tune)
    events: list[ProgressEvent] = []
    load = os.getloadavg()[0]
    decision = scored(
        chunktune.resolve_sync(
            workload,
            settings=settings,
            policy=attrs.evolve(policy, candidates=ExplicitCandidates(sizes=twins), seed=tune),
            on_progress=events.append,
        ),
        f"{name} on {case} twins {k} tune {tune}",
    )
    pairs, drift = _confirmation(events)
    return AARow(
        case=case,
        policy=name,
        k=k,
        tune=tune,
        chunk_size=decision.chunk_size,
        kind=kind_of(decision),
        reason=decision.reason,
        gain=decision.gain,
        gain_ci=decision.gain_ci,
        partial=decision.partial,
        probe_seconds=decision.probe_seconds,
        calls=len(workload.calls),
        pairs=tuple(pairs),
        block_drift=tuple(drift),
        load=load,
        call_log=tuple((asked, seconds) for asked, _, seconds in workload.calls),
    )


def _binom_cdf(k: int, n: int, p: float) -> float:
    return math.fsum(math.comb(n, i) * p**i * (1.0 - p) ** (n - i) for i in range(k + 1))


def clopper_pearson(k: int, n: int, level: float = 0.95) -> tuple[float, float]:
    """The exact (Clopper-Pearson) interval of a rate from ``k`` of ``n``, by bisection."""
    if n <= 0:
        return 0.0, 1.0
    tail = (1.0 - level) / 2.0

    def solve(target: float, kk: int) -> float:
        # the p at which P(X <= kk) = target; the cdf falls as p rises
        lo, hi = 0.0, 1.0
        for _ in range(60):
            mid = (lo + hi) / 2.0
            lo, hi = (mid, hi) if _binom_cdf(kk, n, mid) > target else (lo, mid)
        return (lo + hi) / 2.0

    low = 0.0 if k == 0 else solve(1.0 - tail, k - 1)
    high = 1.0 if k == n else solve(tail, k)
    return low, high


def table(rows: Sequence[AARow]) -> str:
    """Per setting: tunes, how each ended, the false-confirmation rate and its 95% interval."""
    head = (
        f"{'case':>16s} {'policy':>8s} {'K':>2s} {'tunes':>5s} {'left':>4s} {'gate':>4s} "
        f"{'race':>4s} {'conf':>4s} {'budg':>4s} {'tried':>5s} {'part':>4s} "
        f"{'probe s':>7s} {'load':>4s}  false-confirmation rate (95% CI)"
    )
    lines = [head]
    keys = sorted({(r.case, r.policy, r.k) for r in rows})
    for key in [*keys, None]:
        mine = [r for r in rows if key is None or (r.case, r.policy, r.k) == key]
        if not mine:
            continue
        case, name, k = key if key is not None else ("all", "", 0)
        count = {kind: sum(r.kind == kind for r in mine) for kind in ("left", "gate", "race")}
        count |= {kind: sum(r.kind == kind for r in mine) for kind in ("confirm", "budget")}
        tried = sum(bool(r.pairs) or r.kind == "left" for r in mine)
        low, high = clopper_pearson(count["left"], len(mine))
        probe = sum(r.probe_seconds for r in mine) / len(mine)
        load = sum(r.load for r in mine) / len(mine)
        lines.append(
            f"{case:>16s} {name:>8s} {k or '':>2} {len(mine):5d} {count['left']:4d} "
            f"{count['gate']:4d} {count['race']:4d} {count['confirm']:4d} {count['budget']:4d} "
            f"{tried:5d} {sum(r.partial for r in mine):4d} {probe:7.2f} {load:4.1f}  "
            f"{count['left'] / len(mine):5.1%} ({low:.1%} to {high:.1%})"
        )
    return "\n".join(lines)


def false_confirmations(rows: Sequence[AARow]) -> str:
    """Each decision that left native: its claim, and what its pairs looked like."""
    lines = []
    for r in rows:
        if r.kind != "left":
            continue
        ci = "" if r.gain_ci is None else f" ({r.gain_ci[0]:.1%} to {r.gain_ci[1]:.1%})"
        d = list(r.pairs)
        mean = math.fsum(d) / len(d) if d else 0.0
        trimmed = estimate(d, "trimmed_mean", trim=0.2) if d else 0.0
        drift = max((abs(x) for x in r.block_drift), default=0.0)
        lines.append(
            f"{r.case} {r.policy} K={r.k} tune {r.tune}: chose {r.chunk_size}, claimed "
            f"{r.gain:.1%}{ci} on {len(d)} pairs (mean d {mean:+.2%}, trimmed {trimmed:+.2%}, "
            f"largest |d| {max((abs(x) for x in d), default=0.0):.1%}, largest block drift "
            f"{drift:.1%}), load {r.load:.1f}"
        )
    return "\n".join(lines) if lines else "no false confirmations"


def null_z(rows: Sequence[AARow], least_pairs: int = 8) -> str:
    """How the test's statistic behaves on this null: each confirmation's trimmed-mean z on
    its own pairs (``least_pairs`` or more), whose sd should be about 1 and share over 1.96
    about 2.5% if the noise figure prices the live noise right."""
    zs = []
    for r in rows:
        if len(r.pairs) < least_pairs:
            continue
        sigma, _ = pooled_sigma([list(r.pairs)])
        se = standard_error(sigma, len(r.pairs), "trimmed_mean")
        if 0 < se < math.inf:
            zs.append(estimate(list(r.pairs), "trimmed_mean", trim=0.2) / se)
    if len(zs) < 2:
        return f"fewer than 2 confirmations with {least_pairs}+ pairs: no z figure"
    z = np.asarray(zs)
    return (
        f"{len(z)} confirmations with {least_pairs}+ pairs: trimmed-mean z on their own pairs "
        f"mean {z.mean():+.2f}, sd {z.std(ddof=1):.2f}, over 1.96 {np.mean(z > 1.96):.1%}"
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tunes", type=int, default=60, help="tunes per setting, at most")
    parser.add_argument("--first", type=int, default=0, help="the first tune's index (its seed)")
    parser.add_argument("--minutes", type=float, default=15.0, help="wall-clock cap, in all")
    parser.add_argument("--twins", default="1,4", help="the Ks: twins offered per tune")
    parser.add_argument("--cases", default="", help="live cases by name (default: the two)")
    parser.add_argument("--policies", default="balanced")
    parser.add_argument("--nthread", type=int, default=2)
    parser.add_argument("--json", type=Path, help="write every row here")
    args = parser.parse_args(argv)
    ks = [int(k) for k in args.twins.split(",")]
    if any(not 1 <= k <= len(TWIN_SIZES) for k in ks):
        parser.error(f"--twins {args.twins}: expected each K from 1 to {len(TWIN_SIZES)}")
    own_sweep_lock()
    settings = bench_settings()
    names = [n for n in args.policies.split(",") if n]
    policies = {n: settings.get_policy(n) for n in names}
    cases = live_cases([c for c in args.cases.split(",") if c] or None)
    inners = {c.name: c.build(args.nthread) for c in cases}
    before = os.getloadavg()
    start = time.monotonic()
    rows: list[AARow] = []
    try:
        for t in range(args.first, args.first + args.tunes):
            for case in cases:
                for k in ks:
                    for name, policy in policies.items():
                        if time.monotonic() - start > 60.0 * args.minutes:
                            break
                        rows.append(
                            tune_once(
                                inners[case.name],
                                case=case.name,
                                name=name,
                                policy=policy,
                                k=k,
                                tune=t,
                                settings=settings,
                            )
                        )
    finally:
        for inner in inners.values():
            inner.close()
    after = os.getloadavg()
    print(
        f"A/A on twins of native, {len(rows)} tunes in {time.monotonic() - start:.0f} s "
        f"(load {before[0]:.2f} {before[1]:.2f} {before[2]:.2f} -> "
        f"{after[0]:.2f} {after[1]:.2f} {after[2]:.2f})\n"
    )
    print(table(rows))
    print()
    print(false_confirmations(rows))
    print(null_z(rows))
    if args.json:
        payload: dict[str, Any] = {
            "load_before": list(before),
            "load_after": list(after),
            "rows": [attrs.asdict(r) for r in rows],
        }
        args.json.write_text(json.dumps(payload, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
