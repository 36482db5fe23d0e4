"""The sweep: measure candidate chunk sizes on a workload. Blocking; runs in a worker thread.

Rounds measure every live candidate once, in a fresh seeded random order, so
drift and background load hit all of them alike. After ``min_rounds`` the sweep
races: a candidate whose estimate is clearly (``race_z`` standard errors) outside
the tie band of the best is measured no more. It stops early once no candidate
can clear the margin over native (a flat landscape), or once one clearly has and
the remaining candidates are ties; and it stops at the
wall-clock budget with what it has (native is always measured first, so it is
never missing).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence

import attrs
import numpy as np

from ._events import ProgressCallback, ProgressEvent
from ._settings import Policy
from ._stats import estimate, pooled_log_sigma, standard_error
from ._workload import Workload, check_seconds

__all__ = ["SweepResult", "sweep"]


def _no_check() -> None:
    return None


@attrs.frozen(kw_only=True)
class SweepResult:
    """What a sweep measured. Times in seconds; ``errors`` in log-seconds."""

    samples: dict[int | None, tuple[float, ...]]
    estimates: dict[int | None, float]
    errors: dict[int | None, float]
    raced_out: dict[int | None, int]
    rounds: int
    probe_seconds: float
    elapsed_s: float
    partial: bool
    stop: str
    sigma: float

    def counts(self) -> dict[int | None, int]:
        """Samples taken per candidate."""
        return {k: len(v) for k, v in self.samples.items()}


class _Sweep:
    def __init__(
        self,
        workload: Workload,
        candidates: Sequence[int | None],
        policy: Policy,
        check_cancelled: Callable[[], None],
        on_event: ProgressCallback | None,
        clock: Callable[[], float],
    ) -> None:
        if None not in candidates:
            candidates = [None, *candidates]
        self.workload = workload
        self.candidates: list[int | None] = list(dict.fromkeys(candidates))
        self.policy = policy
        self.check_cancelled = check_cancelled
        self.on_event = on_event
        self.clock = clock
        self.start = clock()
        self.samples: dict[int | None, list[float]] = {c: [] for c in self.candidates}
        self.round_of: dict[int | None, list[int]] = {c: [] for c in self.candidates}
        self.raced_out: dict[int | None, int] = {}
        self.probe_seconds = 0.0
        self.rounds = 0
        self.rng = np.random.default_rng(policy.seed)

    # -- plumbing -----------------------------------------------------------------

    def emit(self, **fields: object) -> None:
        if self.on_event is not None:
            self.on_event(ProgressEvent(elapsed_s=self.clock() - self.start, **fields))  # type: ignore[arg-type]

    def over_budget(self) -> bool:
        return self.clock() - self.start >= self.policy.time_budget_s

    def probe(self, chunk: int | None, *, keep: bool) -> None:
        self.check_cancelled()
        seconds = check_seconds(self.workload.run(chunk), chunk)
        self.probe_seconds += seconds
        if keep:
            self.samples[chunk].append(seconds)
            self.round_of[chunk].append(self.rounds)
        self.emit(
            kind="probe" if keep else "warmup", chunk_size=chunk, seconds=seconds, round=self.rounds
        )

    # -- statistics ---------------------------------------------------------------

    def blocked(self, measured: dict[int | None, list[float]]) -> dict[int | None, list[float]]:
        """Each sample over its round's median (a ratio): what the machine did that round cancels.

        Every live candidate is measured once per round, so a slow or fast stretch of
        the machine that spans a round moves all of that round's samples alike.
        """
        by_round: dict[int, list[float]] = {}
        for c, samples in measured.items():
            for r, t in zip(self.round_of[c], samples, strict=True):
                by_round.setdefault(r, []).append(math.log(t))
        ref = {r: float(np.median(v)) for r, v in by_round.items()}
        return {
            c: [math.exp(math.log(t) - ref[r]) for r, t in zip(self.round_of[c], s, strict=True)]
            for c, s in measured.items()
        }

    def stats(self) -> tuple[dict[int | None, float], dict[int | None, float], float]:
        measured = {c: s for c, s in self.samples.items() if s}
        how, trim = self.policy.estimator, self.policy.trim
        if self.policy.paired and self.policy.interleave and None in measured:
            relative = self.blocked(measured)
            sigma = pooled_log_sigma(relative.values())
            rel = {c: estimate(s, how, trim=trim) for c, s in relative.items()}
            # report seconds: native's own estimate sets the scale of the ratios
            scale = estimate(measured[None], how, trim=trim) / rel[None]
            est = {c: r * scale for c, r in rel.items()}
        else:
            sigma = pooled_log_sigma(measured.values())
            est = {c: estimate(s, how, trim=trim) for c, s in measured.items()}
        err = {c: standard_error(sigma, len(s), how) for c, s in measured.items()}
        return est, err, sigma

    def live(self) -> list[int | None]:
        return [c for c in self.candidates if c not in self.raced_out]

    def race_and_settle(self) -> bool:
        """Drop candidates clearly outside the tie band; True when nothing is left to learn."""
        p = self.policy
        est, err, _sigma = self.stats()
        live_ints = [c for c in self.live() if c is not None and c in est]
        if not live_ints:
            return True
        best = min(live_ints, key=lambda c: est[c])
        band_edge = math.log1p(p.tie_tol)
        if p.race:
            for c in live_ints:
                if c == best:
                    continue
                gap = math.log(est[c] / est[best])
                if gap - p.race_z * math.hypot(err[c], err[best]) > band_edge:
                    self.raced_out[c] = self.rounds
                    self.emit(kind="raced_out", chunk_size=c, round=self.rounds)
            live_ints = [c for c in live_ints if c not in self.raced_out]
        if not p.early_stop or None not in est:
            return False
        # Settled when native clearly stays (no candidate can clear the margin: the
        # landscape is flat), or clearly goes and the survivors are ties of the best.
        gain = math.log(est[None] / est[best])
        needed = -math.log1p(-p.margin)
        doubt = p.confidence_z * math.hypot(err[None], err[best])
        if gain + doubt < needed:
            return True
        # ties as the choice defines them: within tie_tol plus tie_z standard errors
        ties = all(
            math.log(est[c] / est[best]) <= band_edge + p.tie_z * math.hypot(err[c], err[best])
            for c in live_ints
        )
        return ties and gain - doubt >= needed

    # -- the two schedules ----------------------------------------------------------

    def run_interleaved(self) -> str:
        p = self.policy
        for _ in range(p.warmup):
            for c in self.rng.permutation(len(self.candidates)):
                self.probe(self.candidates[int(c)], keep=False)
                if self.over_budget():
                    return "budget"
        for r in range(1, p.max_rounds + 1):
            self.rounds = r
            live = self.live()
            order = self.rng.permutation(len(live))
            if r == 1:
                # native first: a budget cut in round one still leaves the anchor measured
                order = np.concatenate(([0], self.rng.permutation(np.arange(1, len(live)))))
            for i in order:
                self.probe(live[int(i)], keep=True)
                if self.over_budget():
                    return "budget"
            if r >= p.min_rounds and len(live) > 1 and self.race_and_settle():
                return "settled"
            if len(self.live()) == 1:
                return "single"
        return "max_rounds"

    def run_sequential(self) -> str:
        # the older tuner's schedule: each candidate's warm-ups and repetitions in a row
        p = self.policy
        for c in self.candidates:
            for _ in range(p.warmup):
                self.probe(c, keep=False)
            for r in range(1, p.max_rounds + 1):
                self.rounds = max(self.rounds, r)
                self.probe(c, keep=True)
                if self.over_budget():
                    return "budget"
        return "max_rounds"

    def run(self) -> SweepResult:
        self.emit(kind="candidates", candidates=tuple(self.candidates))
        for _ in range(self.policy.prime):
            self.probe(None, keep=False)
        stop = self.run_interleaved() if self.policy.interleave else self.run_sequential()
        est, err, sigma = self.stats()
        elapsed = self.clock() - self.start
        partial = stop == "budget"
        self.emit(kind="done", round=self.rounds, message=stop)
        return SweepResult(
            samples={c: tuple(s) for c, s in self.samples.items() if s},
            estimates=est,
            errors=err,
            raced_out=dict(self.raced_out),
            rounds=self.rounds,
            probe_seconds=self.probe_seconds,
            elapsed_s=elapsed,
            partial=partial,
            stop=stop,
            sigma=sigma,
        )


def sweep(
    workload: Workload,
    candidates: Sequence[int | None],
    policy: Policy,
    *,
    check_cancelled: Callable[[], None] = _no_check,
    on_event: ProgressCallback | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> SweepResult:
    """Measure ``candidates`` (``None`` = native, always included) on ``workload``.

    Blocking: call it from a worker thread. ``check_cancelled`` runs before every
    probe and may raise to abandon the sweep. The wall-clock budget is checked
    after every probe.

    Raises:
        WorkloadError: ``run()`` returned something other than positive seconds.
        Exception: whatever ``run()`` or ``check_cancelled()`` raised.
    """
    return _Sweep(workload, candidates, policy, check_cancelled, on_event, clock).run()
