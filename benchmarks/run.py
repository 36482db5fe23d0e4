"""chunktune benchmarks: does a policy pick well, and how much does picking cost?

    python benchmarks/run.py --quick                  # < 5 min on 2 cores
    python benchmarks/run.py --json out.json --plot regret.png

Two kinds of rows:

- ``simulated``: :class:`chunktune.sim.SimulatedWorkload` landscapes from 8 to 128
  threads and 256 to 32768 envs, five cost layouts, 1-8% noise with rare spikes and
  drift. Each case's cost vector is fixed; every (case, policy, noise seed) runs the
  policy through ``chunktune.resolve_sync`` (cache disabled), with the policy's own
  ``seed`` set to the noise seed so the probe order differs too. The sweep sees noisy
  ``run()`` figures; the row is scored on the model's exact times: ``regret`` =
  true_time(chosen) / best chunk in [1, ceil(N/T)] - 1, ``vs_native`` =
  true_time(chosen) / true_time(native) - 1. ``probe_seconds`` are modeled seconds.
- ``mujoco``: real ``mujoco.rollout`` batches of the demo scene on this machine's usable
  cores. After each policy has decided (cache disabled), the chosen chunk, the native
  chunk and ``mujoco.batch.Batch`` on the same states are re-measured interleaved:
  ``--reps`` rounds (15 by default), each running the three in a fresh random order,
  after one warm-up call of each. ``step_seconds``, ``native_seconds`` and
  ``batch_seconds`` are the medians over the rounds (the ``*_min`` fields hold the
  minima). ``bound_seconds`` is the balance bound ``sum(per-env single-thread cost) / T``
  (each env timed alone, the minimum of 3 passes).

The summary per policy gives median, p90 and worst regret (worst = the worst case's
mean over its noise seeds), the worst single-run ``vs_native``, total probe seconds
relative to the ``seed`` policy (the older tuner) over all simulated runs, and for real
rows the tuned step over native, over Batch and over the bound. Then each target of
issues A and F is checked for the ``balanced`` policy, with the cases that miss it.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import attrs
import numpy as np

import chunktune
from chunktune import Policy, Settings
from chunktune._fingerprint import cpu_model, usable_cpus
from chunktune.sim import Noise, SimulatedWorkload, env_costs

Row = dict[str, Any]
Shape = tuple[tuple[str, float | int | str], ...]

QUICK_POLICIES = ("balanced", "seed")
FULL_POLICIES = ("balanced", "quick", "thorough", "seed")
# thorough's 60 s budget on every real case would double the full run; simulated rows cost
# no wall time, so it is benchmarked there
FULL_REAL_POLICIES = ("balanced", "quick", "seed")
QUICK_SEEDS = 3
FULL_SEEDS = 5

# Issue A / F targets for the balanced policy (fractions).
TARGET_MEDIAN_REGRET = 0.005
TARGET_WORST_REGRET = 0.04
TARGET_VS_NATIVE = 0.01
TARGET_PROBE_RATIO = 0.35
TARGET_UNEVEN_GAIN = 0.04
TARGET_UNIFORM_LOSS = 0.02
TARGET_VS_BATCH = 0.03
TARGET_VS_BOUND = 0.05
TARGET_POLICY = "balanced"


# ------------------------------------------------------------------------ the cases


@attrs.frozen(kw_only=True)
class SimCase:
    """One simulated landscape: a fixed cost vector, a pool size and a noise model."""

    layout: str
    num_envs: int
    nthread: int
    sigma: float
    spike_prob: float = 0.02
    drift: float = 0.02
    mean_s: float = 1e-3
    dispatch_s: float = 5e-7
    shape: Shape = ()
    tag: str = ""
    quick: bool = False

    @property
    def name(self) -> str:
        suffix = f"-{self.tag}" if self.tag else ""
        return f"{self.layout}{suffix}-{self.num_envs}x{self.nthread}"

    def noise(self) -> Noise:
        """Log-normal jitter ``sigma``, spikes up to +50%, a slow drift of ``drift``."""
        return Noise(
            sigma=self.sigma,
            spike_prob=self.spike_prob,
            spike_scale=0.5,
            drift=self.drift,
            drift_period=97.0,
        )

    def costs(self, index: int) -> np.ndarray[Any, np.dtype[np.float64]]:
        """The case's per-env costs in seconds; fixed per case, not per noise seed."""
        return env_costs(
            self.layout, self.num_envs, mean_s=self.mean_s, seed=1000 + index, **dict(self.shape)
        )


def _sim(layout: str, n: int, t: int, noise: float, *, quick: bool = False, **kw: Any) -> SimCase:
    shape = tuple(sorted((k, v) for k, v in kw.items() if k not in _CASE_KEYS))
    rest = {k: v for k, v in kw.items() if k in _CASE_KEYS}
    return SimCase(
        layout=layout, num_envs=n, nthread=t, sigma=noise, shape=shape, quick=quick, **rest
    )


_CASE_KEYS = frozenset({"spike_prob", "drift", "mean_s", "dispatch_s", "tag"})

# Every layout at several N and T; the quick subset (13 cases) still spans 8..128 threads,
# 256..32768 envs, every layout and 1-8% noise.
SIM_CASES: tuple[SimCase, ...] = (
    _sim("uniform", 256, 8, 0.01, quick=True, spike_prob=0.01, drift=0.01),
    _sim("uniform", 1000, 24, 0.05, tag="odd"),
    _sim("uniform", 4096, 64, 0.03, quick=True),
    _sim("uniform", 16384, 128, 0.03, tag="cheap", mean_s=2e-5, dispatch_s=5e-6),
    _sim("uniform", 32768, 128, 0.02, quick=True, mean_s=5e-5),
    _sim("lognormal", 768, 12, 0.08, quick=True, spike_prob=0.03),
    _sim("lognormal", 1024, 16, 0.03),
    _sim("lognormal", 2048, 128, 0.04, quick=True),
    _sim("lognormal", 8192, 32, 0.05, sigma=1.0),
    _sim("lognormal", 32768, 128, 0.02, quick=True),
    _sim("blocked", 256, 8, 0.02, quick=True, heavy_factor=4.5),
    _sim("blocked", 1024, 8, 0.08, tag="start", position="start"),
    _sim("blocked", 2048, 16, 0.04),
    _sim("blocked", 4096, 32, 0.02, tag="middle", position="middle"),
    _sim("blocked", 6000, 48, 0.02, heavy_fraction=0.3, heavy_factor=3.0),
    _sim("blocked", 8192, 64, 0.03, quick=True, heavy_fraction=0.1, heavy_factor=8.0),
    _sim("blocked", 32768, 128, 0.05, quick=True, spike_prob=0.01),
    _sim("variants", 512, 8, 0.03, quick=True),
    _sim("variants", 4096, 32, 0.02, n_variants=8),
    _sim("variants", 16384, 128, 0.06, quick=True, drift=0.03),
    _sim("variants", 20000, 96, 0.04),
    _sim("interleaved", 256, 16, 0.01, quick=True),
    _sim("interleaved", 4096, 64, 0.03, period=7),
    _sim("interleaved", 32768, 32, 0.08, quick=True, period=3, spike_prob=0.03),
)


@attrs.frozen(kw_only=True)
class RealCase:
    """A real rollout batch of the demo scene; ``build(nthread)`` makes its workload."""

    name: str
    description: str
    build: Callable[[int], Any]
    uneven: bool
    quick: bool = False


def _demo_states(num_envs: int, nthread: int, *, heavy: bool) -> Any:
    """Initial states of one kind from the demo batch: all in the pile, or all flying."""
    from chunktune._mujoco import demo_workload

    with demo_workload(num_envs=max(4 * num_envs, 8), nthread=nthread) as demo:
        states = np.asarray(demo.initial_state)
        n_heavy = states.shape[0] // 4
        pool = states[-n_heavy:] if heavy else states[:-n_heavy]
        return np.ascontiguousarray(pool[:num_envs]), demo.models[0]


def _uniform(num_envs: int, *, heavy: bool, nstep: int = 20) -> Callable[[int], Any]:
    def build(nthread: int) -> Any:
        from chunktune._mujoco import RolloutWorkload, demo_model_path

        states, model = _demo_states(num_envs, nthread, heavy=heavy)
        return RolloutWorkload(
            model,
            num_envs=num_envs,
            nthread=nthread,
            nstep=nstep,
            initial_state=states,
            model_file=demo_model_path(),
        )

    return build


def _uneven(num_envs: int, *, nstep: int = 20, n_variants: int = 1) -> Callable[[int], Any]:
    def build(nthread: int) -> Any:
        from chunktune._mujoco import RolloutWorkload, demo_model_path, demo_workload

        demo = demo_workload(num_envs=num_envs, nthread=nthread, nstep=nstep)
        if n_variants == 1:
            return demo
        states = np.array(demo.initial_state)
        demo.close()
        return RolloutWorkload.from_xml(
            demo_model_path(),
            num_envs=num_envs,
            nthread=nthread,
            nstep=nstep,
            n_variants=n_variants,
            initial_state=states,
        )

    return build


REAL_CASES: tuple[RealCase, ...] = (
    RealCase(
        name="uneven-demo-256",
        description="demo_workload(256): last quarter in a contact pile (issue A's batch)",
        build=_uneven(256),
        uneven=True,
        quick=True,
    ),
    RealCase(
        name="uniform-air-256",
        description="256 envs, every body flying (no contact)",
        build=_uniform(256, heavy=False),
        uneven=False,
        quick=True,
    ),
    RealCase(
        name="uniform-pile-128",
        description="128 envs, every env with the settled pile (all in contact)",
        build=_uniform(128, heavy=True),
        uneven=False,
    ),
    RealCase(
        name="uneven-variants-256",
        description="the demo batch's states over 4 model variants (mass, friction +-10%)",
        build=_uneven(256, n_variants=4),
        uneven=True,
    ),
    RealCase(
        name="uneven-demo-128-nstep60",
        description="demo_workload(128, nstep=60): longer rollouts",
        build=_uneven(128, nstep=60),
        uneven=True,
    ),
)


# ------------------------------------------------------------------------ settings


def bench_settings() -> Settings:
    """The discovered settings with the cache disabled and the stderr report silenced."""
    settings = chunktune.load_settings()
    return attrs.evolve(
        settings,
        cache=attrs.evolve(settings.cache, enabled=False),
        log=attrs.evolve(settings.log, stderr="never"),
    )


def _policies(settings: Settings, names: Sequence[str]) -> dict[str, Policy]:
    return {name: settings.get_policy(name) for name in names}


# ------------------------------------------------------------------------ simulated rows


def simulated_rows(
    case: SimCase,
    policies: Mapping[str, Policy],
    seeds: int,
    settings: Settings,
    *,
    index: int = 0,
) -> list[Row]:
    """Run every policy on ``case`` under ``seeds`` noise draws; one row per run.

    ``index`` (the case's place in the suite) seeds the layout and the noise, so two
    cases of one layout differ.
    """
    costs = case.costs(index)
    truth = SimulatedWorkload(costs, nthread=case.nthread, dispatch_s=case.dispatch_s)
    oracle_chunk, oracle_s = truth.oracle()
    native_s = truth.true_time(None)
    rows: list[Row] = []
    for name, policy in policies.items():
        for s in range(seeds):
            workload = SimulatedWorkload(
                costs,
                nthread=case.nthread,
                dispatch_s=case.dispatch_s,
                noise=case.noise(),
                seed=1000 * index + s,
                name=case.layout,
            )
            decision = chunktune.resolve_sync(
                workload, settings=settings, policy=attrs.evolve(policy, seed=s)
            )
            chosen_s = truth.true_time(decision.chunk_size)
            rows.append(
                {
                    "kind": "simulated",
                    "case": case.name,
                    "nthread": case.nthread,
                    "num_envs": case.num_envs,
                    "layout": case.layout,
                    "noise_sigma": case.sigma,
                    "spike_prob": case.spike_prob,
                    "drift": case.drift,
                    "policy": name,
                    "seed": s,
                    "source": decision.source,
                    "chunk_size": decision.chunk_size,
                    "native_chunk": decision.native_chunk,
                    "oracle_chunk": oracle_chunk,
                    "oracle_gain": 1.0 - oracle_s / native_s,
                    "regret": chosen_s / oracle_s - 1.0,
                    "vs_native": chosen_s / native_s - 1.0,
                    "probe_seconds": decision.probe_seconds,
                    "probes": workload.calls,
                    "partial": decision.partial,
                }
            )
    return rows


# ------------------------------------------------------------------------ real rows


def _paired(a: Sequence[float], b: Sequence[float]) -> float:
    """Median over rounds of ``a[i] / b[i]``, minus 1."""
    return statistics.median(x / y for x, y in zip(a, b, strict=True)) - 1.0


def remeasure(
    workload: Any, chunk: int | None, native: int, reps: int, *, seed: int = 0
) -> dict[str, float | None]:
    """Interleave the chosen chunk, native and Batch for ``reps`` rounds (seconds, ratios).

    Each round runs the three once, in a fresh random order. ``*_seconds`` are medians
    over the rounds and ``*_min`` minima; ``vs_native`` and ``vs_batch`` are medians of
    the per-round ratios, so load that comes and goes between rounds cancels out. A
    chosen chunk equal to native is native: it is not run twice, and ``vs_native`` is 0.
    """
    rng = np.random.default_rng(seed)
    has_batch = True
    try:
        workload.batch_seconds()
    except chunktune.UsageError:
        has_batch = False
    runs: dict[str, Callable[[], float]] = {"native": lambda: float(workload.run(None))}
    same = chunk is None or chunk == native
    if not same:
        runs["step"] = lambda: float(workload.run(chunk))
    if has_batch:
        runs["batch"] = lambda: float(workload.batch_seconds())
    names = list(runs)
    for key in names:  # warm-up: caches, the pool's threads, Batch's buffers
        runs[key]()
    seen: dict[str, list[float]] = {k: [] for k in names}
    for _ in range(reps):
        for i in rng.permutation(len(names)):
            seen[names[int(i)]].append(runs[names[int(i)]]())
    if same:
        seen["step"] = seen["native"]
    out: dict[str, float | None] = {}
    for key in ("step", "native", "batch"):
        values = seen.get(key)
        out[f"{key}_seconds"] = statistics.median(values) if values else None
        out[f"{key}_min"] = min(values) if values else None
    step = seen["step"]
    out["vs_native"] = _paired(step, seen["native"])
    batch = seen.get("batch")
    out["vs_batch"] = _paired(step, batch) if batch else None
    # how far the typical native call sits above the fastest: a busy machine shows here
    out["native_spread"] = statistics.median(seen["native"]) / min(seen["native"]) - 1.0
    return out


# Re-measured native above this multiple of the bound, or a median this far above the
# minimum, means another process shared the cores: the row's figures are not the pool's.
_BUSY_VS_BOUND = 1.4
_BUSY_SPREAD = 0.10


def _busy(m: Mapping[str, float | None], bound_s: float) -> bool:
    native, spread = m["native_seconds"], m["native_spread"]
    assert native is not None and spread is not None
    return native > _BUSY_VS_BOUND * bound_s or spread > _BUSY_SPREAD


def real_rows(
    case: RealCase,
    policies: Mapping[str, Policy],
    settings: Settings,
    *,
    nthread: int,
    reps: int,
) -> list[Row]:
    """Tune ``case`` with every policy on ``nthread`` workers and re-measure; one row each."""
    workload = case.build(nthread)
    try:
        workload.run(None)  # the first call pays for thread start-up and page faults
        bound_s = float(np.sum(workload.per_env_costs(repeats=3))) / nthread
        rows: list[Row] = []
        for name, policy in policies.items():
            start = time.perf_counter()
            decision = chunktune.resolve_sync(workload, settings=settings, policy=policy)
            sweep_wall = time.perf_counter() - start
            m = remeasure(
                workload, decision.chunk_size, decision.native_chunk, reps, seed=len(rows)
            )
            step = m["step_seconds"]
            assert step is not None
            rows.append(
                {
                    "kind": "mujoco",
                    "case": case.name,
                    "uneven": case.uneven,
                    "nthread": nthread,
                    "num_envs": workload.num_envs,
                    "nstep": workload.nstep,
                    "n_variants": workload.n_variants,
                    "policy": name,
                    "seed": policy.seed,
                    "source": decision.source,
                    "chunk_size": decision.chunk_size,
                    "native_chunk": decision.native_chunk,
                    "probe_seconds": decision.probe_seconds,
                    "sweep_wall_s": sweep_wall,
                    "partial": decision.partial,
                    "reps": reps,
                    **m,
                    "bound_seconds": bound_s,
                    "vs_bound": step / bound_s - 1.0,
                    "busy": _busy(m, bound_s),
                    "reason": decision.reason,
                }
            )
        return rows
    finally:
        workload.close()


# ------------------------------------------------------------------------ summaries


def _pct(values: Sequence[float], q: float) -> float:
    return float(np.percentile(np.asarray(values, dtype=float), q))


def case_means(rows: Iterable[Row], field: str) -> dict[tuple[str, str], float]:
    """Mean of ``field`` over noise seeds, per (policy, case)."""
    groups: dict[tuple[str, str], list[float]] = defaultdict(list)
    for r in rows:
        groups[r["policy"], r["case"]].append(float(r[field]))
    return {k: statistics.fmean(v) for k, v in groups.items()}


def summarize_sim(rows: Sequence[Row]) -> dict[str, dict[str, Any]]:
    """Per policy: regret statistics, worst vs native and probe cost relative to seed."""
    sim = [r for r in rows if r["kind"] == "simulated"]
    by_policy: dict[str, list[Row]] = defaultdict(list)
    for r in sim:
        by_policy[r["policy"]].append(r)
    means = case_means(sim, "regret")
    probe_case = case_means(sim, "probe_seconds")
    seed_probe = sum(r["probe_seconds"] for r in by_policy.get("seed", []))
    out: dict[str, dict[str, Any]] = {}
    for name, prs in by_policy.items():
        regrets = [r["regret"] for r in prs]
        worst_case = max((c for (p, c) in means if p == name), key=lambda c: means[name, c])
        worst_vs = max(prs, key=lambda r: r["vs_native"])
        probe = sum(r["probe_seconds"] for r in prs)
        per_case_ratio = [
            probe_case[name, c] / probe_case["seed", c]
            for (p, c) in probe_case
            if p == name and ("seed", c) in probe_case
        ]
        out[name] = {
            "runs": len(prs),
            "cases": len({r["case"] for r in prs}),
            "median_regret": _pct(regrets, 50),
            "p90_regret": _pct(regrets, 90),
            "worst_regret": means[name, worst_case],
            "worst_regret_case": worst_case,
            "max_single_regret": max(regrets),
            "worst_vs_native": worst_vs["vs_native"],
            "worst_vs_native_run": f"{worst_vs['case']} seed {worst_vs['seed']}",
            "runs_over_1pct_slower": sum(r["vs_native"] > TARGET_VS_NATIVE for r in prs),
            "kept_native_share": sum(r["chunk_size"] is None for r in prs) / len(prs),
            "probe_seconds": probe,
            "probe_vs_seed": probe / seed_probe if seed_probe else None,
            "median_case_probe_vs_seed": statistics.median(per_case_ratio)
            if per_case_ratio
            else None,
            "mean_probes": statistics.fmean(r["probes"] for r in prs),
        }
    return out


def summarize_real(rows: Sequence[Row]) -> dict[str, dict[str, Any]]:
    """Per policy: the tuned step over native, Batch and the bound, worst over cases."""
    real = [r for r in rows if r["kind"] == "mujoco"]
    by_policy: dict[str, list[Row]] = defaultdict(list)
    for r in real:
        by_policy[r["policy"]].append(r)
    out: dict[str, dict[str, Any]] = {}
    for name, prs in by_policy.items():
        batch = [r["vs_batch"] for r in prs if r["vs_batch"] is not None]
        out[name] = {
            "cases": len(prs),
            "median_vs_native": statistics.median(r["vs_native"] for r in prs),
            "worst_vs_native": max(r["vs_native"] for r in prs),
            "worst_uneven_vs_native": max(
                (r["vs_native"] for r in prs if r["uneven"]), default=None
            ),
            "worst_vs_batch": max(batch) if batch else None,
            "worst_vs_bound": max(r["vs_bound"] for r in prs),
            "probe_seconds": sum(r["probe_seconds"] for r in prs),
            "sweep_wall_s": sum(r["sweep_wall_s"] for r in prs),
            "busy_rows": sum(r["busy"] for r in prs),
        }
    return out


def check_targets(rows: Sequence[Row], policy: str = TARGET_POLICY) -> list[dict[str, Any]]:
    """Each issue A/F target for ``policy``: the figure, the limit, met or not, the evidence."""
    sim = [r for r in rows if r["kind"] == "simulated" and r["policy"] == policy]
    real = [r for r in rows if r["kind"] == "mujoco" and r["policy"] == policy]
    checks: list[dict[str, Any]] = []

    def add(target: str, value: float | None, limit: float, ok: bool, evidence: str) -> None:
        checks.append(
            {"target": target, "value": value, "limit": limit, "met": ok, "evidence": evidence}
        )

    if sim:
        summary = summarize_sim([r for r in rows if r["kind"] == "simulated"])[policy]
        means = {c: v for (p, c), v in case_means(sim, "regret").items() if p == policy}
        worst = sorted(means.items(), key=lambda kv: -kv[1])
        med = summary["median_regret"]
        add(
            "median regret <= 0.5%",
            med,
            TARGET_MEDIAN_REGRET,
            med <= TARGET_MEDIAN_REGRET,
            "highest case means: " + ", ".join(f"{c} {v:.2%}" for c, v in worst[:3]),
        )
        over = [(c, v) for c, v in worst if v > TARGET_WORST_REGRET]
        add(
            "worst case (mean over seeds) regret <= 4%",
            summary["worst_regret"],
            TARGET_WORST_REGRET,
            not over,
            ", ".join(f"{c} {v:.2%}" for c, v in over) or f"worst {worst[0][0]} {worst[0][1]:.2%}",
        )
        slow = sorted((r for r in sim if r["vs_native"] > TARGET_VS_NATIVE),
                      key=lambda r: -r["vs_native"])  # fmt: skip
        add(
            "never > 1% slower than native (single run)",
            summary["worst_vs_native"],
            TARGET_VS_NATIVE,
            not slow,
            "; ".join(
                f"{r['case']} seed {r['seed']}: chunk {r['chunk_size']} vs native "
                f"{r['native_chunk']} {r['vs_native']:+.2%}"
                for r in slow[:6]
            )
            + (f" (+{len(slow) - 6} more)" if len(slow) > 6 else "")
            or f"worst {summary['worst_vs_native_run']} {summary['worst_vs_native']:+.2%}",
        )
        ratio = summary["probe_vs_seed"]
        if ratio is not None:
            add(
                "probe seconds <= 35% of seed",
                ratio,
                TARGET_PROBE_RATIO,
                ratio <= TARGET_PROBE_RATIO,
                f"{summary['probe_seconds']:.1f} s modeled; median per-case ratio "
                f"{summary['median_case_probe_vs_seed']:.1%}",
            )
    for r in real:
        label = f"{r['case']} T={r['nthread']}"
        busy = " [machine busy: unreliable]" if r["busy"] else ""
        got = (
            f"chunk {r['chunk_size'] or 'native'} (native {r['native_chunk']}): "
            f"{r['step_seconds'] * 1e3:.2f} ms vs native {r['native_seconds'] * 1e3:.2f} ms{busy}"
        )
        if r["uneven"]:
            add(
                f"{label}: tuned >= 4% faster than native",
                r["vs_native"],
                -TARGET_UNEVEN_GAIN,
                r["vs_native"] <= -TARGET_UNEVEN_GAIN,
                got,
            )
            if r["vs_batch"] is not None:
                add(
                    f"{label}: tuned within 3% of Batch",
                    r["vs_batch"],
                    TARGET_VS_BATCH,
                    r["vs_batch"] <= TARGET_VS_BATCH,
                    f"{r['step_seconds'] * 1e3:.2f} ms vs Batch "
                    f"{r['batch_seconds'] * 1e3:.2f} ms{busy}",
                )
            add(
                f"{label}: tuned within 5% of the bound",
                r["vs_bound"],
                TARGET_VS_BOUND,
                r["vs_bound"] <= TARGET_VS_BOUND,
                f"{r['step_seconds'] * 1e3:.2f} ms vs bound "
                f"{r['bound_seconds'] * 1e3:.2f} ms{busy}",
            )
        else:
            add(
                f"{label}: tuned no more than 2% slower than native",
                r["vs_native"],
                TARGET_UNIFORM_LOSS,
                r["vs_native"] <= TARGET_UNIFORM_LOSS,
                got,
            )
    return checks


# ------------------------------------------------------------------------ printing


def table(
    headers: Sequence[str], body: Iterable[Sequence[object]], *, left: Sequence[int] = (0,)
) -> str:
    """A plain-text table: columns right-aligned but those in ``left``."""
    cells = [[str(h) for h in headers], *([str(c) for c in row] for row in body)]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]

    def line(row: Sequence[str]) -> str:
        padded = (
            cell.ljust(w) if i in left else cell.rjust(w)
            for i, (cell, w) in enumerate(zip(row, widths, strict=True))
        )
        return "  ".join(padded).rstrip()

    rule = "  ".join("-" * w for w in widths)
    return "\n".join([line(cells[0]), rule, *(line(r) for r in cells[1:])])


def _p(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:+.{digits}%}"


def _u(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}%}"


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value * 1e3:.2f}"


def _chunk(value: int | None) -> str:
    return "native" if value is None else str(value)


def sim_case_table(rows: Sequence[Row], policies: Sequence[str]) -> str:
    """Per case: its landscape, then each policy's mean regret and worst vs native."""
    sim = [r for r in rows if r["kind"] == "simulated"]
    means = case_means(sim, "regret")
    first: dict[str, Row] = {}
    worst_vs: dict[tuple[str, str], float] = defaultdict(lambda: -math.inf)
    for r in sim:
        first.setdefault(r["case"], r)
        key = (r["policy"], r["case"])
        worst_vs[key] = max(worst_vs[key], r["vs_native"])
    headers = ["case", "noise", "native", "oracle", "gain"]
    for p in policies:
        headers += [f"{p} regret", f"{p} vs nat"]
    body = []
    for case, r in first.items():
        line: list[object] = [
            case,
            f"{r['noise_sigma']:.0%}",
            r["native_chunk"],
            r["oracle_chunk"],
            _u(r["oracle_gain"], 1),
        ]
        for p in policies:
            line += [_u(means.get((p, case))), _p(worst_vs.get((p, case)))]
        body.append(line)
    return table(headers, body)


def sim_summary_table(summary: Mapping[str, Mapping[str, Any]]) -> str:
    headers = ["policy", "runs", "median", "p90", "worst(mean)", "worst case", "max single",
               "worst vs nat", ">1% slower", "kept native", "probe s", "probe/seed",
               "med case probe/seed"]  # fmt: skip
    body = [
        [
            name,
            s["runs"],
            _u(s["median_regret"]),
            _u(s["p90_regret"]),
            _u(s["worst_regret"]),
            s["worst_regret_case"],
            _u(s["max_single_regret"]),
            _p(s["worst_vs_native"]),
            s["runs_over_1pct_slower"],
            _u(s["kept_native_share"], 0),
            f"{s['probe_seconds']:.1f}",
            _u(s["probe_vs_seed"], 1),
            _u(s["median_case_probe_vs_seed"], 1),
        ]
        for name, s in summary.items()
    ]
    return table(headers, body)


def real_table(rows: Sequence[Row]) -> str:
    headers = ["case", "T", "policy", "chunk", "native", "tuned ms", "native ms", "batch ms",
               "bound ms", "tuned/native", "tuned/Batch", "tuned/bound", "spread", "probe s",
               "sweep s"]  # fmt: skip
    body = [
        [
            r["case"],
            r["nthread"],
            r["policy"],
            _chunk(r["chunk_size"]),
            r["native_chunk"],
            _ms(r["step_seconds"]),
            _ms(r["native_seconds"]),
            _ms(r["batch_seconds"]),
            _ms(r["bound_seconds"]),
            _p(r["vs_native"]),
            _p(r["vs_batch"]),
            _p(r["vs_bound"]),
            _u(r["native_spread"], 0) + (" busy" if r["busy"] else ""),
            f"{r['probe_seconds']:.2f}",
            f"{r['sweep_wall_s']:.2f}",
        ]
        for r in rows
        if r["kind"] == "mujoco"
    ]
    return table(headers, body)


def real_summary_table(summary: Mapping[str, Mapping[str, Any]]) -> str:
    headers = ["policy", "cases", "median tuned/native", "worst tuned/native",
               "worst uneven tuned/native", "worst tuned/Batch", "worst tuned/bound",
               "probe s", "sweep s", "busy rows"]  # fmt: skip
    body = [
        [
            name,
            s["cases"],
            _p(s["median_vs_native"]),
            _p(s["worst_vs_native"]),
            _p(s["worst_uneven_vs_native"]),
            _p(s["worst_vs_batch"]),
            _p(s["worst_vs_bound"]),
            f"{s['probe_seconds']:.2f}",
            f"{s['sweep_wall_s']:.2f}",
            s["busy_rows"],
        ]
        for name, s in summary.items()
    ]
    return table(headers, body)


def targets_table(checks: Sequence[Mapping[str, Any]]) -> str:
    body = [
        [
            c["target"],
            _p(c["value"]),
            _p(c["limit"]),
            "met" if c["met"] else "MISSED",
            c["evidence"],
        ]
        for c in checks
    ]
    return table(["target", "value", "limit", "", "evidence"], body, left=(0, 4))


# ------------------------------------------------------------------------ plot


def plot(rows: Sequence[Row], path: Path) -> bool:
    """Plot regret against probe cost relative to seed; False when matplotlib is missing."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    sim = [r for r in rows if r["kind"] == "simulated"]
    regret = case_means(sim, "regret")
    probe = case_means(sim, "probe_seconds")
    summary = summarize_sim(sim)
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(12, 5))
    for name in summary:
        pts = [
            (probe[p, c] / probe["seed", c], max(regret[p, c], 1e-5))
            for (p, c) in regret
            if p == name and ("seed", c) in probe
        ]
        if pts:
            xs, ys = zip(*pts, strict=True)
            ax.scatter(xs, ys, label=name, alpha=0.7)
        s = summary[name]
        if s["probe_vs_seed"] is not None:
            ax2.errorbar(
                [s["probe_vs_seed"]],
                [max(s["median_regret"], 1e-5)],
                yerr=[[0.0], [max(s["p90_regret"] - s["median_regret"], 0.0)]],
                fmt="o",
                capsize=4,
                label=f"{name} (median, bar to p90)",
            )
            ax2.scatter([s["probe_vs_seed"]], [max(s["worst_regret"], 1e-5)], marker="x")
    for a in (ax, ax2):
        a.set_xscale("log")
        a.set_yscale("log")
        a.set_xlabel("probe seconds / seed policy's")
        a.axhline(TARGET_WORST_REGRET, ls=":", c="grey")
        a.axhline(TARGET_MEDIAN_REGRET, ls="--", c="grey")
        a.axvline(TARGET_PROBE_RATIO, ls=":", c="grey")
        a.legend(fontsize=8)
    ax.set_ylabel("regret (case mean over seeds; floor 1e-5)")
    ax.set_title("per simulated case")
    ax2.set_title("per policy: median, p90 bar, worst case (x)")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return True


# ------------------------------------------------------------------------ main


def _loadavg() -> tuple[float, ...]:
    try:
        return tuple(round(x, 2) for x in os.getloadavg())
    except OSError:  # not every platform has one
        return ()


def _fmt_load(load: Sequence[float]) -> str:
    return " ".join(f"{x:.2f}" for x in load) + f" (1/5/15 min; {usable_cpus()} usable CPUs)"


def _names(text: str) -> list[str]:
    return [n.strip() for n in text.split(",") if n.strip()]


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="the quick suite (< 5 min, 2 cores)")
    parser.add_argument("--json", type=Path, metavar="OUT", help="write rows and summary here")
    parser.add_argument("--policies", type=_names, help="comma-separated policy names")
    parser.add_argument(
        "--real-policies", type=_names, help="policies for the real rows (default: --policies)"
    )
    parser.add_argument(
        "--seeds", type=int, help="noise seeds per simulated case (3 quick, 5 full)"
    )
    parser.add_argument("--plot", type=Path, metavar="OUT.png", help="regret vs probe cost plot")
    parser.add_argument("--no-mujoco", action="store_true", help="simulated rows only")
    parser.add_argument("--no-sim", action="store_true", help="real rows only")
    parser.add_argument(
        "--nthread",
        type=lambda s: [int(x) for x in _names(s)],
        help="pool sizes for the real rows, comma-separated (default: usable CPUs)",
    )
    parser.add_argument("--reps", type=int, default=15, help="re-measurement rounds (real rows)")
    parser.add_argument("--cases", type=_names, help="only cases whose name contains one of these")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    start = time.perf_counter()
    # our own sweep lock: a benchmark must not wait on, or block, a trainer's sweep
    lock_dir = tempfile.TemporaryDirectory(prefix="chunktune-bench-")
    os.environ["CHUNKTUNE_SWEEP_LOCK"] = str(Path(lock_dir.name) / "sweep.lock")
    settings = bench_settings()
    names = args.policies or list(QUICK_POLICIES if args.quick else FULL_POLICIES)
    real_names = (
        args.real_policies
        or args.policies
        or list(QUICK_POLICIES if args.quick else FULL_REAL_POLICIES)
    )
    seeds = args.seeds or (QUICK_SEEDS if args.quick else FULL_SEEDS)
    policies = _policies(settings, names)
    real_policies = _policies(settings, real_names)

    def wanted(name: str) -> bool:
        return not args.cases or any(c in name for c in args.cases)

    rows: list[Row] = []
    if not args.no_sim:
        sim_cases = [
            (i, c)
            for i, c in enumerate(SIM_CASES)
            if (c.quick or not args.quick) and wanted(c.name)
        ]
        t0 = time.perf_counter()
        for i, sim_case in sim_cases:
            rows += simulated_rows(sim_case, policies, seeds, settings, index=i)
        print(
            f"simulated: {len(sim_cases)} cases x {len(policies)} policies x {seeds} seeds "
            f"in {time.perf_counter() - t0:.1f} s\n"
        )
        print(sim_case_table(rows, list(policies)) + "\n")
    nthreads = args.nthread or [usable_cpus()]
    load: dict[str, tuple[float, ...]] = {}
    if not args.no_mujoco:
        real_cases = [c for c in REAL_CASES if (c.quick or not args.quick) and wanted(c.name)]
        # other processes on these cores skew every real figure: say how busy the machine was
        load["before_real"] = _loadavg()
        print(f"load average before the real rows: {_fmt_load(load['before_real'])}")
        for case in real_cases:
            for nthread in nthreads:
                t0 = time.perf_counter()
                rows += real_rows(case, real_policies, settings, nthread=nthread, reps=args.reps)
                print(f"real {case.name} T={nthread}: {time.perf_counter() - t0:.1f} s", flush=True)
        load["after_real"] = _loadavg()
        print(f"load average after the real rows: {_fmt_load(load['after_real'])}")
        if real_cases:
            print("\nreal rollouts (medians of interleaved re-measurement):")
            print(real_table(rows) + "\n")

    sim_summary = summarize_sim(rows)
    real_summary = summarize_real(rows)
    if sim_summary:
        print("simulated summary per policy (regret = chosen/oracle - 1):")
        print(sim_summary_table(sim_summary) + "\n")
    if real_summary:
        print("real summary per policy (tuned step relative to native, Batch, bound):")
        print(real_summary_table(real_summary) + "\n")
    checks = (
        check_targets(rows) if TARGET_POLICY in policies or TARGET_POLICY in real_policies else []
    )
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
            "quick": args.quick,
            "seeds": seeds,
            "reps": args.reps,
            "elapsed_s": elapsed,
            "loadavg": load,
        }  # fmt: skip
        if not args.no_mujoco:
            import mujoco

            meta["mujoco"] = mujoco.__version__
        payload = {
            "meta": meta,
            "rows": rows,
            "summary": {"simulated": sim_summary, "mujoco": real_summary, "targets": checks},
        }
        args.json.write_text(json.dumps(payload, indent=1, default=str) + "\n")
        print(f"wrote {args.json}")
    if args.plot:
        if plot(rows, args.plot):
            print(f"wrote {args.plot}")
        else:
            print("no matplotlib: skipped the plot (pip install 'chunktune[plot]')")
    lock_dir.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
