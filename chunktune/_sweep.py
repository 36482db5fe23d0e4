"""The sweep: measure candidate chunk sizes and choose. Blocking; runs in a worker thread.

Two schedules, picked by the policy's ``interleave``:

- rounds (:mod:`chunktune._rounds`): every live candidate and native once per round
  in a fresh random order, judged by paired log ratios to native, raced,
  refined in chunk-count space, and the winner confirmed against native;
- sequential (below): the older tuner's schedule, each candidate's warm-ups
  and repetitions in a row, then :func:`chunktune._select.select` on the
  estimates. The ``seed`` policy uses it to behave exactly like that tuner.

Both stop at the wall-clock budget with what they have (native is measured
first, so it is never missing), and check for cancellation before every probe. Once
Python's exit has begun no probe starts, and the exit waits for the one in flight
(:mod:`chunktune._exiting`), whatever the workload.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import attrs

from ._counts import native_chunk
from ._events import ProgressCallback
from ._modeled import clock_of
from ._policy import Policy
from ._probe import Chunk, Probe, StopReason, SweepResult
from ._refining import refine_space
from ._rounds import run_rounds
from ._select import select
from ._stats import estimate, pooled_log_sigma, standard_error
from ._workload import Workload

__all__ = ["may_probe", "sweep"]


def _no_check() -> None:
    return None


def _in_a_row(
    probe: Probe, candidates: Sequence[Chunk]
) -> tuple[dict[Chunk, list[float]], int, StopReason]:
    """Each candidate's warm-ups and repetitions in a row, until the budget runs out.

    Returns every candidate's samples (empty for those never reached), the most
    repetitions any candidate had, and why it stopped.
    """
    p = probe.policy
    samples: dict[Chunk, list[float]] = {c: [] for c in candidates}
    stop: StopReason = "max_rounds"
    rounds = 0
    for c in candidates:
        for _ in range(p.warmup):
            probe(c, kind="warmup")
            # native always gets its first sample: a decision needs something to keep
            if samples[None] and probe.over(p.time_budget_s):
                stop = "budget"
                break
        for r in range(1, p.max_rounds + 1):
            if stop == "budget":
                break
            rounds = max(rounds, r)
            samples[c].append(probe(c, round_=r))
            if probe.over(p.time_budget_s):
                stop = "budget"
        if stop == "budget":
            break
    return samples, rounds, stop


def _sequential(probe: Probe, candidates: Sequence[Chunk]) -> SweepResult:
    """The older tuner's schedule: each candidate's warm-ups and repetitions in a row."""
    p = probe.policy
    samples, rounds, stop = _in_a_row(probe, candidates)
    measured = {c: s for c, s in samples.items() if s}
    sigma = pooled_log_sigma(measured.values())
    est = {c: estimate(s, p.estimator, trim=p.trim) for c, s in measured.items()}
    err = {c: standard_error(sigma, len(s), p.estimator) for c, s in measured.items()}
    choice = select(
        est,
        native=probe.native,
        upper=probe.upper,
        margin=p.margin,
        tie_tol=p.tie_tol,
        tie_break=p.tie_break,
        errors=err,
        confidence_z=p.confidence_z,
        tie_z=p.tie_z,
    )
    gain = 0.0
    if choice.chunk_size == probe.native:
        # the older tuner's grid holds native's own size: chosen, it is native's schedule,
        # whatever its samples said (the choice is kept: that tuner made it too)
        choice = attrs.evolve(
            choice,
            reason=f"chose {probe.native}, the native chunk's own size measured as a "
            "candidate: its schedule is native's, so no gain (the older tuner's choice)",
        )
    elif choice.chunk_size is not None and None in est:
        gain = 1.0 - est[choice.chunk_size] / est[None]
    probe.emit("done", round=rounds, message=stop)
    return SweepResult(
        samples={c: tuple(s) for c, s in measured.items()},
        estimates=est,
        raced_out={},
        rounds=rounds,
        probe_seconds=probe.probe_seconds,
        elapsed_s=probe.elapsed(),
        partial=stop == "budget",
        stop=stop,
        sigma=sigma,
        choice=choice,
        gain=gain,
    )


def may_probe(policy: Policy, num_envs: int, nthread: int) -> list[int]:
    """Every chunk size a sweep under ``policy`` may run for this batch, ascending.

    The native chunk (what ``None`` runs as), the strategy's proposals and, for a
    policy that races in rounds and refines, every schedule it may refine into. Empty
    for a policy that never measures. A replay (:meth:`chunktune.sim.ReplayWorkload.
    unrecorded`) must hold them all to replay the policy.
    """
    if not policy.enabled:
        return []
    refined = refine_space(policy, num_envs, nthread) if policy.interleave else []
    proposed = policy.candidates.propose(num_envs, nthread)
    return sorted({native_chunk(num_envs, nthread), *proposed, *refined})


def sweep(
    workload: Workload,
    candidates: Sequence[Chunk],
    policy: Policy,
    *,
    check_cancelled: Callable[[], None] = _no_check,
    on_event: ProgressCallback | None = None,
    clock: Callable[[], float] | None = None,
    limit_s: float | None = None,
    shape: tuple[int, int] | None = None,
) -> SweepResult:
    """Measure ``candidates`` (``None`` = native, always included) on ``workload`` and choose.

    Blocking: call it from a worker thread. ``check_cancelled`` runs before every
    probe and may raise to abandon the sweep. The budget is checked after every
    probe, on ``clock``: by default a simulated or replayed workload's own ``clock()``
    (:class:`~chunktune._modeled.ModeledTime`: its modeled seconds), else the wall clock.
    ``limit_s``: the seconds the caller's ``hard_limit_s`` still leaves (after its
    waits); an ``extend_budget`` policy's stretched budget stays inside it too.
    ``shape``: ``(num_envs, nthread)`` as the caller read them (None: read here, once).

    Raises:
        WorkloadError: ``run()`` returned something other than positive seconds.
        UsageError: Python's exit has begun: the sweep starts no probe any more.
        Exception: whatever ``run()`` or ``check_cancelled()`` raised.
    """
    if clock is None:
        clock = clock_of(workload)
    ordered: list[Chunk] = list(dict.fromkeys([None, *candidates]))
    probe = Probe(workload, policy, check_cancelled, on_event, clock, limit_s, shape)
    probe.emit("candidates", candidates=tuple(ordered))
    for _ in range(policy.prime):
        probe(None, kind="warmup")
        if probe.over(policy.time_budget_s):
            break  # one call is the price: more priming would only overrun the budget
    if policy.interleave:
        return run_rounds(probe, ordered)
    return _sequential(probe, ordered)
