"""Running policies on the cases: one attrs row per decision, scored against the truth.

Every decision goes through ``chunktune.resolve_sync``, the path a trainer uses, with
the cache disabled. Simulated and replayed rows are scored on their workload's exact
truth; live rows on a paired re-measurement against native.
"""

from __future__ import annotations

import argparse
import math
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import attrs
import numpy as np
from cases import RealCase, SimCase, trace_name

import chunktune
from chunktune import Policy, Settings
from chunktune._paired import paired_rounds
from chunktune._replay import sizes_text
from chunktune._spans import BATCHES, means_half_width, span_gain, stretch_half_width, t95
from chunktune.sim import ReplayWorkload, SimulatedWorkload

__all__ = [
    "BATCHES",
    "BenchmarkError",
    "LiveRow",
    "SimRow",
    "TraceRow",
    "bench_settings",
    "check_replayable",
    "live_rows",
    "means_half_width",
    "own_sweep_lock",
    "policies_named",
    "policies_or_exit",
    "remeasure",
    "scored",
    "sim_rows",
    "stretch_half_width",
    "t95",
    "trace_rows",
]


_LOCK_HOME: list[tempfile.TemporaryDirectory[str]] = []  # kept for the process's life


def own_sweep_lock() -> None:
    """Give this process a sweep lock of its own (``$CHUNKTUNE_SWEEP_LOCK`` in a
    temporary folder), once: a benchmark's sweeps must neither wait on a trainer's
    sweep on this machine nor make one wait. For a script's ``main``."""
    if not _LOCK_HOME:
        _LOCK_HOME.append(tempfile.TemporaryDirectory(prefix="chunktune-bench-"))
        os.environ["CHUNKTUNE_SWEEP_LOCK"] = str(Path(_LOCK_HOME[0].name) / "sweep.lock")


def bench_settings() -> Settings:
    """The discovered settings with the cache disabled and the stderr report silenced."""
    settings = chunktune.load_settings()
    return attrs.evolve(
        settings,
        cache=attrs.evolve(settings.cache, enabled=False),
        log=attrs.evolve(settings.log, stderr="never"),
    )


def policies_named(settings: Settings, names: Sequence[str]) -> dict[str, Policy]:
    """The named policies of ``settings``."""
    return {name: settings.get_policy(name) for name in names}


def policies_or_exit(
    parser: argparse.ArgumentParser, settings: Settings, names: Sequence[str], option: str
) -> dict[str, Policy]:
    """:func:`policies_named`, or ``parser.error`` naming ``option`` and the unknown
    policy (exit 2, one line): a misspelt name was a ``ConfigError`` traceback."""
    try:
        return policies_named(settings, names)
    except chunktune.ConfigError as exc:
        parser.error(f"{option}: {exc}")


class BenchmarkError(RuntimeError):
    """A run that cannot be scored: its workload failed, so the policy chose nothing."""


def scored(decision: chunktune.Decision, where: str) -> chunktune.Decision:
    """``decision``, unless it is a fallback: a failed run is no choice of native to score.

    A workload that fails while measuring (a replayed size the trace never recorded,
    say) leaves the trainer on native, as it should; scored, it would enter the totals
    as a policy that kept native, and hide the failure.

    Raises:
        BenchmarkError: the decision fell back to native; the message names ``where``.
    """
    if decision.source == "fallback":
        raise BenchmarkError(
            f"{where}: the run failed, so it cannot be scored (expected a measured "
            f"decision, got a fallback to native): {decision.reason}"
        )
    return decision


def _runs(
    policies: Mapping[str, Policy],
    draws: int,
    workload: Callable[[int], SimulatedWorkload | ReplayWorkload],
    where: Callable[[str, int], str],
    settings: Settings,
) -> Iterator[tuple[str, int, chunktune.Decision, int]]:
    """Every policy on ``draws`` fresh workloads, policy by policy: ``(name, draw,
    decision, probes)``, ``probes`` being the calls the workload counted.

    Draw ``d`` seeds both the policy and the workload (``workload(d)``); ``where(name,
    d)`` names the run if it fails (:func:`scored`).
    """
    for name, policy in policies.items():
        for d in range(draws):
            w = workload(d)
            decision = chunktune.resolve_sync(
                w, settings=settings, policy=attrs.evolve(policy, seed=d)
            )
            yield name, d, scored(decision, where(name, d)), w.calls


def _scored_fields(
    decision: chunktune.Decision, probes: int, chosen_s: float, oracle_s: float, native_s: float
) -> dict[str, Any]:
    """The fields a simulated or replayed row takes from its decision, scored by the truth.

    ``chosen_s``, ``oracle_s`` and ``native_s`` are the truth's seconds of the chosen
    size, of the best size and of native.
    """
    return {
        "chunk_size": decision.chunk_size,
        "native_chunk": decision.native_chunk,
        "regret": chosen_s / oracle_s - 1.0,
        "vs_native": chosen_s / native_s - 1.0,
        "probe_seconds": decision.probe_seconds,
        "probes": probes,
        "partial": decision.partial,
        "confirmed": decision.gain_ci is not None,
        "claimed_gain": decision.gain,
        "claimed_ci": decision.gain_ci,
    }


# ------------------------------------------------------------------------ simulated


@attrs.frozen(kw_only=True)
class SimRow:
    """One policy's decision on one simulated landscape under one noise draw."""

    case: str
    layout: str
    nthread: int
    num_envs: int
    noise_sigma: float
    policy: str
    seed: int
    chunk_size: int | None
    native_chunk: int
    oracle_chunk: int
    oracle_gain: float
    regret: float
    vs_native: float
    probe_seconds: float
    probes: int
    partial: bool
    confirmed: bool
    claimed_gain: float = 0.0
    claimed_ci: tuple[float, float] | None = None
    kind: str = "simulated"


def sim_rows(
    case: SimCase, index: int, policies: Mapping[str, Policy], seeds: int, settings: Settings
) -> list[SimRow]:
    """Every policy on ``case`` under ``seeds`` noise draws; one row per run.

    ``index`` (the case's place in the suite) seeds the layout and the noise, so two
    cases of one layout differ.
    """
    truth = case.workload(index)
    oracle_chunk, oracle_s = truth.oracle()
    native_s = truth.true_time(None)
    runs = _runs(
        policies,
        seeds,
        lambda s: case.workload(index, seed=1000 * index + s),
        lambda name, s: f"{name} on {case.name} seed {s}",
        settings,
    )
    return [
        SimRow(
            case=case.name,
            layout=case.layout,
            nthread=case.nthread,
            num_envs=case.num_envs,
            noise_sigma=case.sigma,
            policy=name,
            seed=s,
            oracle_chunk=oracle_chunk,
            oracle_gain=1.0 - oracle_s / native_s,
            **_scored_fields(
                decision, probes, truth.true_time(decision.chunk_size), oracle_s, native_s
            ),
        )
        for name, s, decision, probes in runs
    ]


# ------------------------------------------------------------------------ traces


@attrs.frozen(kw_only=True)
class TraceRow:
    """One policy's decision on one replay draw of a recorded trace, scored by its truth.

    ``offered`` is the gain of the trace's best size over native by the truth;
    ``offered_held_out`` the same with the best picked on half of the rounds and
    scored on the other half (what is left once the truth's own noise is taken out).
    ``gain`` is what the choice gives over native by the truth; ``truth_error`` the
    standard error of that truth itself (from the recorded rounds), so a choice scored
    a little slower than native can be told from one within the truth's own noise.
    """

    trace: str
    num_envs: int
    nthread: int
    policy: str
    draw: int
    chunk_size: int | None
    native_chunk: int
    oracle_chunk: int
    offered: float
    offered_held_out: float
    gain: float
    regret: float
    vs_native: float
    truth_error: float
    probe_seconds: float
    probes: int
    partial: bool
    confirmed: bool
    claimed_gain: float = 0.0
    claimed_ci: tuple[float, float] | None = None
    kind: str = "trace"


def check_replayable(paths: Sequence[Path], policies: Mapping[str, Policy]) -> None:
    """Refuse traces that lack sizes a policy may probe, before any is replayed.

    A trace recorded with ``chunktune record --sizes`` holds only those sizes; a
    policy that probes another fails mid-sweep and keeps native, which is no choice
    to score (:func:`scored`). Every such trace and policy is named at once, with the
    sizes missing, so one re-recording (or an explicit policy) settles them all.

    Raises:
        BenchmarkError: some trace does not hold every size some policy may probe.
    """
    problems = []
    for path in paths:
        replay = ReplayWorkload.from_file(path)
        missing = {name: replay.unrecorded(policy) for name, policy in policies.items()}
        short = [f"{name} may probe {sizes_text(m)}" for name, m in missing.items() if m]
        if short:
            every = {*replay.sizes, *(c for m in missing.values() for c in m)}
            needed = ",".join(str(c) for c in sorted(every))
            problems.append(
                f"  {trace_name(path)} (recorded: {sizes_text(replay.sizes)}): "
                f"{'; '.join(short)}\n    to replay them, record --sizes {needed}"
            )
    if problems:
        raise BenchmarkError(
            "these traces do not hold every chunk size these policies may probe, so their "
            "replays cannot be scored; record those sizes too, or replay a policy that probes "
            'recorded sizes alone (strategy "explicit"):\n' + "\n".join(problems)
        )


def trace_rows(
    path: Path, policies: Mapping[str, Policy], draws: int, settings: Settings
) -> list[TraceRow]:
    """Every policy on ``draws`` replays of the trace in ``path``; one row per replay.

    Raises:
        BenchmarkError: the trace lacks sizes a policy may probe (:func:`check_replayable`),
            or a replay failed.
    """
    check_replayable([path], policies)
    truth = ReplayWorkload.from_file(path)
    oracle_chunk, oracle_s = truth.oracle()
    native_s = truth.true_time(None)
    offered, held_out = truth.offered_gain()
    rows: list[TraceRow] = []
    runs = _runs(
        policies,
        draws,
        lambda d: ReplayWorkload.from_file(path, seed=d),
        lambda name, d: f"{name} on {trace_name(path)} draw {d}",
        settings,
    )
    for name, d, decision, probes in runs:
        chosen_s = truth.true_time(decision.chunk_size)
        rows.append(
            TraceRow(
                trace=trace_name(path),
                num_envs=truth.num_envs,
                nthread=truth.nthread,
                policy=name,
                draw=d,
                oracle_chunk=oracle_chunk,
                offered=offered,
                offered_held_out=held_out,
                gain=1.0 - chosen_s / native_s,
                truth_error=truth.truth_error(decision.chunk_size),
                **_scored_fields(decision, probes, chosen_s, oracle_s, native_s),
            )
        )
    return rows


# ------------------------------------------------------------------------ live


@attrs.frozen(kw_only=True)
class Measured:
    """A size re-measured in paired rounds: its gain over native and that gain's CI (95%).

    ``gain``, ``low`` and ``high`` are ``chunktune check``'s (:func:`span_gain` of the
    size's log ratios to native: their plain mean, the wider of the pooled and the
    stretch-means half-widths at Student's t); ``paid`` is ``1 - sum(size's seconds) /
    sum(native's)`` over the same rounds, what a trainer pays, every call counted (a size
    that loses the calls a burst of other work hits by much can measure a gain by a
    robust estimate and a loss by the sums).
    """

    gain: float
    low: float
    high: float
    rounds: int
    paid: float = math.nan


def remeasure(
    workload: Any,
    sizes: Sequence[int],
    rounds: int,
    *,
    seed: int = 0,
    min_seconds: float = 0.0,
) -> dict[int | None, Measured]:
    """Native and ``sizes`` in ``rounds`` rounds (more, until ``min_seconds`` have passed),
    each in a fresh random order (:func:`chunktune._paired.paired_rounds`).

    Each size is judged as ``chunktune check`` judges one, by :func:`span_gain` of its log
    ratios to native within the rounds (so what the machine did during a round cancels):
    the plain mean, with the wider of the rounds' pooled interval and the spread of the
    means of :data:`BATCHES` consecutive stretches of rounds (:func:`stretch_half_width`),
    each at Student's t: on this machine a size's gain itself can move from one stretch
    to the next (``stretch_gains.py``), and rounds of one stretch are not independent
    draws of it. Native's row is 0 with a 0-wide interval.

    Raises:
        ValueError: ``rounds`` under 2 (an interval needs two), or a call of 0 seconds
            (or fewer): it has no log ratio to native.
    """
    if rounds < 2:
        raise ValueError(f"remeasure: {rounds} rounds, expected 2 or more")
    rng = np.random.default_rng(seed)
    got = paired_rounds(
        lambda c: float(workload.run(c)),
        [None, *sorted(set(sizes))],
        min_rounds=rounds,
        seconds=min_seconds,
        order=rng.permutation,
        clock=time.perf_counter,
    )
    for c, calls in zip(got.sizes, got.seconds, strict=True):
        # a log ratio needs both calls above 0 (native's 0 would divide by zero)
        bad = [s for s in calls if not s > 0]  # NaN too
        if bad:
            what = "native" if c is None else f"chunk {c}"
            raise ValueError(f"remeasure: a call of {what} took {bad[0]} s, expected seconds > 0")
    native = got.of(None)
    paid_native = sum(native)  # every round's call, paid
    out: dict[int | None, Measured] = {
        None: Measured(gain=0.0, low=0.0, high=0.0, rounds=got.rounds, paid=0.0)
    }
    for c in got.sizes[1:]:
        seconds = got.of(c)
        span = span_gain([math.log(s / n) for s, n in zip(seconds, native, strict=True)])
        out[c] = Measured(
            gain=span.gain,
            low=span.low,
            high=span.high,
            rounds=got.rounds,
            paid=1.0 - sum(seconds) / paid_native,
        )
    return out


@attrs.frozen(kw_only=True)
class LiveRow:
    """One real tune, and what a paired re-measurement says of its choice.

    ``measured_gain`` (with its 95% CI) is the choice's gain over native in the
    re-measurement, ``measured_paid`` its gain by the seconds summed (:class:`Measured`);
    ``best_known`` / ``best_known_gain`` (and its 95% CI) the best
    of the case's known-good sizes in the same rounds. ``hog`` marks a tune with a CPU hog
    started halfway through its budget. ``events`` are the tune's progress events (kind,
    chunk size, seconds, round, candidates, message and ``elapsed_s``: seconds into the
    sweep, or into the wait for a ``waiting`` one; ``run.py --json`` writes them), so that
    a live miss can be read back call by call: which sizes the race dropped, when, on
    what times.
    """

    case: str
    nthread: int
    num_envs: int
    policy: str
    tune: int
    chunk_size: int | None
    native_chunk: int
    claimed_gain: float
    claimed_ci: tuple[float, float] | None
    partial: bool
    probe_seconds: float
    sweep_wall_s: float
    reason: str
    measured_gain: float
    measured_low: float
    measured_high: float
    best_known: int
    best_known_gain: float
    best_known_ci: tuple[float, float]
    rounds: int
    hog: bool
    uneven: bool
    kind: str = "live"
    measured_paid: float = math.nan
    events: tuple[dict[str, object], ...] = ()


def event_record(event: chunktune.ProgressEvent) -> dict[str, object]:
    """A progress event as a JSON object: the fields a live miss is read back by."""
    return {
        "kind": event.kind,
        "chunk_size": event.chunk_size,
        "seconds": event.seconds,
        "round": event.round,
        "candidates": list(event.candidates),
        "elapsed_s": event.elapsed_s,  # when: what a drop or a stretch is read against
        "message": event.message,
    }


_HOG = "import time\nend = time.monotonic() + {seconds}\nwhile time.monotonic() < end: pass\n"


class _Hog:
    """A CPU-bound process started after ``delay_s``, for at most ``seconds``."""

    def __init__(self, delay_s: float, seconds: float) -> None:
        self.proc: subprocess.Popen[bytes] | None = None
        self.timer = threading.Timer(delay_s, self._start, args=(seconds,))

    def _start(self, seconds: float) -> None:
        code = _HOG.format(seconds=seconds)
        self.proc = subprocess.Popen([sys.executable, "-c", code])

    def __enter__(self) -> _Hog:
        self.timer.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.timer.cancel()
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()


def live_rows(
    case: RealCase,
    policies: Mapping[str, Policy],
    settings: Settings,
    *,
    nthread: int,
    tunes: int,
    rounds: int,
    hog: bool = False,
    remeasure_s: float = 0.0,
) -> list[LiveRow]:
    """``tunes`` independent tunes per policy, then one paired re-measurement of every choice
    (``rounds`` rounds, more until ``remeasure_s`` have passed: :func:`remeasure`).

    With ``hog``, each tune gets a CPU-bound process started halfway through its
    budget (and stopped when it returns); the re-measurement runs without it.
    """
    workload = case.build(nthread)
    try:
        workload.run(None)  # the first call pays for thread start-up and page faults
        tuned: list[tuple[str, int, chunktune.Decision, float, list[chunktune.ProgressEvent]]] = []
        for name, policy in policies.items():
            for k in range(tunes):
                pol = attrs.evolve(policy, seed=k)
                events: list[chunktune.ProgressEvent] = []
                start = time.perf_counter()
                with _Hog(pol.time_budget_s / 2, pol.time_budget_s) if hog else nullcontext():
                    decision = chunktune.resolve_sync(
                        workload, settings=settings, policy=pol, on_progress=events.append
                    )
                tuned.append((name, k, decision, time.perf_counter() - start, events))
        chosen = {d.chunk_size for _, _, d, _, _ in tuned if d.chunk_size is not None}
        measured = remeasure(workload, [*chosen, *case.known_good], rounds, min_seconds=remeasure_s)
        best = max(case.known_good, key=lambda c: measured[c].gain)
        rows = []
        for name, k, d, wall, events in tuned:
            m = measured[d.chunk_size]
            rows.append(
                LiveRow(
                    case=case.name,
                    nthread=nthread,
                    num_envs=workload.num_envs,
                    policy=name,
                    tune=k,
                    chunk_size=d.chunk_size,
                    native_chunk=d.native_chunk,
                    claimed_gain=d.gain,
                    claimed_ci=d.gain_ci,
                    partial=d.partial,
                    probe_seconds=d.probe_seconds,
                    sweep_wall_s=wall,
                    reason=d.reason,
                    measured_gain=m.gain,
                    measured_low=m.low,
                    measured_high=m.high,
                    measured_paid=m.paid,
                    best_known=best,
                    best_known_gain=measured[best].gain,
                    best_known_ci=(measured[best].low, measured[best].high),
                    rounds=m.rounds,
                    hog=hog,
                    uneven=case.uneven,
                    events=tuple(map(event_record, events)),
                )
            )
        return rows
    finally:
        workload.close()
