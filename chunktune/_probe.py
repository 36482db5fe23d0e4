"""What a sweep is made of: the probe that times each ``run()`` call, and the result.

Shared by both schedules (:mod:`chunktune._rounds` and the sequential one in
:mod:`chunktune._sweep`), so neither imports the other's module to get them.
"""

from __future__ import annotations

from collections.abc import Callable
from types import CodeType, TracebackType
from typing import Literal

import attrs

from ._counts import native_chunk, upper_chunk
from ._errors import WorkloadError
from ._events import EventKind, ProgressCallback, ProgressEvent
from ._exiting import call_in_flight
from ._failures import raised_by_chunktune
from ._named import named
from ._policy import Policy
from ._returned import check_seconds
from ._select import Choice
from ._shown import shown_line
from ._workload import Workload, WorkloadRaised, call_workload

__all__ = ["Chunk", "Probe", "StopReason", "SweepResult", "run_failure"]

Chunk = int | None
StopReason = Literal["settled", "max_rounds", "budget", "confirming", "noisy", "too_slow"]


@attrs.frozen(kw_only=True)
class SweepResult:
    """What a sweep measured and chose. Times in seconds; ``sigma`` in log-seconds.

    ``samples`` holds the calls each candidate's estimate rests on, in the order taken
    (a paired race's call in a round cut before native's is not among them).

    ``gain`` is the estimated fraction by which the choice beats native (0.0 when
    native is kept); ``gain_ci`` its confidence interval when a confirmation confirmed it.
    ``stop`` says why measuring ended: ``"settled"``, ``"max_rounds"``,
    ``"budget"`` (the budget, or the race's share of it, was spent), ``"confirming"``
    (the race ended early to leave its leader's confirmation the pairs it needs),
    ``"noisy"`` or ``"too_slow"``.
    """

    samples: dict[Chunk, tuple[float, ...]]
    estimates: dict[Chunk, float]
    raced_out: dict[Chunk, int]
    rounds: int
    probe_seconds: float
    elapsed_s: float
    partial: bool
    stop: StopReason
    sigma: float
    choice: Choice
    gain: float = 0.0
    gain_ci: tuple[float, float] | None = None
    confirm_pairs: int = 0
    budget_s: float = 0.0  # the budget it ended with: above time_budget_s if it stretched

    def counts(self) -> dict[Chunk, int]:
        """Samples per candidate that its estimate rests on (rounds; confirmation pairs not
        included): what ``Decision.samples`` and ``tune``'s table report."""
        return {k: len(v) for k, v in self.samples.items()}


class Probe:
    """Times ``run()`` calls for a sweep: cancellation, validation, events, the budget.

    ``shape``: the workload's ``(num_envs, nthread)`` as read once by the caller (None:
    read here).
    """

    def __init__(
        self,
        workload: Workload,
        policy: Policy,
        check_cancelled: Callable[[], None],
        on_event: ProgressCallback | None,
        clock: Callable[[], float],
        limit_s: float | None = None,
        shape: tuple[int, int] | None = None,
    ) -> None:
        self.workload = workload
        # the counts the resolve read once, as it was called: a property that says
        # otherwise later must not change the native chunk or the schedules mid-sweep
        self.num_envs, self.nthread = (
            (workload.num_envs, workload.nthread) if shape is None else shape
        )
        self.limit_s = limit_s  # what the caller's hard limit leaves, from the start on
        self.policy = policy
        self.check_cancelled = check_cancelled
        self.on_event = on_event
        self.clock = clock
        self.start = clock()
        self.probe_seconds = 0.0
        self.calls = 0
        self.native = native_chunk(self.num_envs, self.nthread)
        self.upper = upper_chunk(self.num_envs, self.nthread)

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
        """One ``run(chunk)``: its seconds, checked, counted and reported.

        Raises:
            UsageError: Python's exit has begun: no probe starts any more.
        """
        self.check_cancelled()
        # whatever the workload, Python's exit waits for this call and starts none after
        # it: a pool call that returns into a finalizing interpreter crashes the process
        with call_in_flight():
            # reading what run() returned runs the workload's code too (its number's
            # __float__): one call_workload around both keeps either failure the workload's
            seconds = call_workload(lambda: check_seconds(self.workload.run(chunk), chunk))
        self.probe_seconds += seconds
        self.calls += 1
        self.emit(kind, chunk_size=chunk, seconds=seconds, round=round_)
        return seconds


def run_failure(exc: BaseException) -> str | None:
    """Which call to ``run()`` a probe made that ``exc`` came out of, and how, as the
    workload's author reads it: ``run(7) raised KeyError: 'env'``, ``run(None) returned nan;
    expected ...`` (None: native), ``reading what run(7) returned raised ...``; None where
    ``exc`` came out of no probe's call (a ``signature()``, chunktune's own code).

    A trainer reads which chunk size failed, the author which call to reproduce.
    """
    tb = exc.__traceback__
    while tb is not None and tb.tb_frame.f_code is not Probe.__call__.__code__:
        tb = tb.tb_next
    if tb is None:
        return None
    call = f"run({tb.tb_frame.f_locals.get('chunk')!r})"
    # a StopIteration or a cancel that the number's __float__ raised is wrapped where
    # call_workload caught it: check_seconds is on the way in the original's traceback
    inner = exc.original.__traceback__ if isinstance(exc, WorkloadRaised) else None
    reading = _through(tb, check_seconds.__code__) or _through(inner, check_seconds.__code__)
    if isinstance(exc, WorkloadError) and reading and raised_by_chunktune(exc):
        return shown_line(str(exc))  # chunktune's verdict on the value, naming the call
    raised = named(exc.original if isinstance(exc, WorkloadRaised) else exc)
    return f"reading what {call} returned raised {raised}" if reading else f"{call} raised {raised}"


def _through(tb: TracebackType | None, code: CodeType) -> bool:
    """Whether the traceback ``tb`` passes through a frame of ``code``."""
    while tb is not None:
        if tb.tb_frame.f_code is code:
            return True
        tb = tb.tb_next
    return False
