"""The sweep: measure candidate chunk sizes and choose. Blocking; runs in a worker thread.

Two schedules, picked by the policy's ``interleave``:

- rounds (:mod:`chunktune._rounds`): every live candidate and native once per round
  in a fresh random order, judged by paired log ratios to native, raced,
  refined in chunk-count space, and the winner confirmed against native;
- sequential (below): the older tuner's schedule, each candidate's warm-ups
  and repetitions in a row, then :func:`chunktune._select.select` on the
  estimates. The ``seed`` policy uses it to behave exactly like that tuner.

Both stop at the wall-clock budget with what they have (native is measured
first, so it is never missing), and check for cancellation before every probe.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

import attrs

from ._events import EventKind, ProgressCallback, ProgressEvent
from ._select import Choice, select
from ._settings import Policy
from ._stats import estimate, pooled_log_sigma, standard_error
from ._workload import Workload, check_seconds, native_chunk, upper_chunk

__all__ = ["Chunk", "Probe", "SweepResult", "sweep"]

Chunk = int | None


def _no_check() -> None:
    return None


@attrs.frozen(kw_only=True)
class SweepResult:
    """What a sweep measured and chose. Times in seconds; ``errors`` and ``sigma`` in log-seconds.

    ``gain`` is the estimated fraction by which the choice beats native (0.0 when
    native is kept); ``gain_ci`` its confidence interval when a confirmation ran.
    ``stop`` says why measuring ended: ``"settled"``, ``"max_rounds"``,
    ``"budget"``, ``"single"`` or ``"noisy"``.
    """

    samples: dict[Chunk, tuple[float, ...]]
    estimates: dict[Chunk, float]
    errors: dict[Chunk, float]
    raced_out: dict[Chunk, int]
    rounds: int
    probe_seconds: float
    elapsed_s: float
    partial: bool
    stop: str
    sigma: float
    choice: Choice
    gain: float = 0.0
    gain_ci: tuple[float, float] | None = None
    confirm_pairs: int = 0

    def counts(self) -> dict[Chunk, int]:
        """Samples taken per candidate (rounds; confirmation pairs not included)."""
        return {k: len(v) for k, v in self.samples.items()}


class Probe:
    """Times ``run()`` calls for a sweep: cancellation, validation, events, the budget."""

    def __init__(
        self,
        workload: Workload,
        policy: Policy,
        check_cancelled: Callable[[], None],
        on_event: ProgressCallback | None,
        clock: Callable[[], float],
    ) -> None:
        self.workload = workload
        self.policy = policy
        self.check_cancelled = check_cancelled
        self.on_event = on_event
        self.clock = clock
        self.start = clock()
        self.probe_seconds = 0.0
        self.calls = 0
        self.native = native_chunk(workload.num_envs, workload.nthread)
        self.upper = upper_chunk(workload.num_envs, workload.nthread)

    def emit(self, kind: EventKind, **fields: object) -> None:
        if self.on_event is not None:
            self.on_event(
                ProgressEvent(kind=kind, elapsed_s=self.elapsed(), **fields)  # type: ignore[arg-type]
            )

    def elapsed(self) -> float:
        return self.clock() - self.start

    def over(self, limit_s: float) -> bool:
        return self.elapsed() >= limit_s

    def __call__(self, chunk: Chunk, *, kind: EventKind = "probe", round_: int = 0) -> float:
        """One ``run(chunk)``: its seconds, checked, counted and reported."""
        self.check_cancelled()
        seconds = check_seconds(self.workload.run(chunk), chunk)
        self.probe_seconds += seconds
        self.calls += 1
        self.emit(kind, chunk_size=chunk, seconds=seconds, round=round_)
        return seconds


def _sequential(probe: Probe, candidates: Sequence[Chunk]) -> SweepResult:
    """The older tuner's schedule: each candidate's warm-ups and repetitions in a row."""
    p = probe.policy
    samples: dict[Chunk, list[float]] = {c: [] for c in candidates}
    stop, rounds = "max_rounds", 0
    for c in candidates:
        for _ in range(p.warmup):
            probe(c, kind="warmup")
        for r in range(1, p.max_rounds + 1):
            rounds = max(rounds, r)
            samples[c].append(probe(c, round_=r))
            if probe.over(p.time_budget_s):
                stop = "budget"
                break
        if stop == "budget":
            break
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
    if choice.chunk_size is not None and None in est:
        gain = 1.0 - est[choice.chunk_size] / est[None]
    probe.emit("done", round=rounds, message=stop)
    return SweepResult(
        samples={c: tuple(s) for c, s in measured.items()},
        estimates=est,
        errors=err,
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


def sweep(
    workload: Workload,
    candidates: Sequence[Chunk],
    policy: Policy,
    *,
    check_cancelled: Callable[[], None] = _no_check,
    on_event: ProgressCallback | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> SweepResult:
    """Measure ``candidates`` (``None`` = native, always included) on ``workload`` and choose.

    Blocking: call it from a worker thread. ``check_cancelled`` runs before every
    probe and may raise to abandon the sweep. The wall-clock budget is checked
    after every probe.

    Raises:
        WorkloadError: ``run()`` returned something other than positive seconds.
        Exception: whatever ``run()`` or ``check_cancelled()`` raised.
    """
    from ._rounds import run_rounds

    ordered: list[Chunk] = list(dict.fromkeys([None, *candidates]))
    probe = Probe(workload, policy, check_cancelled, on_event, clock)
    probe.emit("candidates", candidates=tuple(ordered))
    for _ in range(policy.prime):
        probe(None, kind="warmup")
    if policy.interleave:
        return run_rounds(probe, ordered)
    return _sequential(probe, ordered)

