"""Re-checking a cached size against native over a span of time (``chunktune check``).

A sweep of seconds sees one stretch of the machine, and some sizes' gain follows the
machine's state for seconds to minutes (``_spans``): a sweep can confirm such a size in a
good stretch, and the cache then serves it for days. A re-check pays for paired rounds
over a longer span and keeps the size only if it is still measurably faster.

Blocking, on the calling thread; the caller holds the machine-wide sweep lock.
"""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Callable

import attrs

from ._modeled import clock_of
from ._paired import paired_rounds, reshuffled
from ._reasons import pct
from ._returned import check_seconds
from ._spans import SpanGain, span_gain
from ._workload import Workload, call_workload

__all__ = ["MIN_ROUNDS", "Rechecked", "recheck"]

MIN_ROUNDS = 16  # two rounds a stretch at least: the stretch interval needs them


@attrs.frozen
class Rechecked:
    """What a re-check of ``chunk_size`` measured: each round's seconds of native and of
    the size, in round order, over ``elapsed_s`` seconds of the span's clock."""

    chunk_size: int
    native_s: tuple[float, ...]
    chunk_s: tuple[float, ...]
    elapsed_s: float

    @property
    def rounds(self) -> int:
        return len(self.native_s)

    @property
    def logs(self) -> list[float]:
        """Each round's ``log(t_size / t_native)``."""
        return [math.log(c / n) for c, n in zip(self.chunk_s, self.native_s, strict=True)]

    @property
    def span(self) -> SpanGain:
        return span_gain(self.logs)

    @property
    def probe_seconds(self) -> float:
        """The seconds the rounds' calls reported, both sizes (warm-ups not counted)."""
        return math.fsum(self.native_s) + math.fsum(self.chunk_s)

    def timings(self) -> dict[int | None, float]:
        """Each size's median call, in seconds, as a sweep's table gives its estimates."""
        return {
            None: statistics.median(self.native_s),
            self.chunk_size: statistics.median(self.chunk_s),
        }

    def summary(self) -> str:
        """``"re-checked over 61 s (412 paired rounds): chunk 22 measured -0.8% (-2.1%..+0.5%)
        against native"``."""
        span = self.span
        return (
            f"re-checked over {_seconds(self.elapsed_s)} s ({self.rounds} paired rounds): chunk "
            f"{self.chunk_size} measured {_signed(span.gain)} ({_signed(span.low)}.."
            f"{_signed(span.high)}) against native"
        )


def _seconds(seconds: float) -> str:
    """``"61"``, or two figures under 10 s (``"0.46"``): a short check is no "0 s"."""
    return f"{seconds:.0f}" if seconds >= 10 else f"{seconds:.2g}"


def _signed(fraction: float) -> str:
    text = pct(fraction)
    return text if text.startswith("-") else f"+{text}"


def _timed(workload: Workload, chunk: int | None) -> float:
    """One call of ``workload.run(chunk)``, its seconds checked.

    Raises:
        WorkloadError: ``run`` returned no usable seconds.
        Exception: whatever ``run``, or reading what it returned (its number's
            ``__float__``), raised (through ``call_workload``: the workload's).
    """
    # as a probe calls it: reading the value runs the workload's code too
    return call_workload(lambda: check_seconds(workload.run(chunk), chunk))


def recheck(
    workload: Workload,
    chunk_size: int,
    *,
    seconds: float,
    min_rounds: int = MIN_ROUNDS,
    rng: random.Random | None = None,
    on_round: Callable[[int, float], None] | None = None,
) -> Rechecked:
    """Paired rounds of native and ``chunk_size`` for at least ``seconds`` (the workload's
    clock: wall time, or a modeled workload's) and at least ``min_rounds`` rounds, each
    round in a fresh random order, after one warm-up call of each (not counted).

    ``on_round(rounds, elapsed_s)`` is called after each round. A Ctrl-C is raised at
    once, between two calls or in one.

    Raises:
        InvalidArgumentError: ``seconds`` negative or not finite, or ``min_rounds`` under 0.
        WorkloadError: ``run`` returned no usable seconds.
        Exception: whatever the workload's ``run`` raised.
    """
    rng = random.Random() if rng is None else rng
    got = paired_rounds(
        lambda chunk: _timed(workload, chunk),
        [None, chunk_size],
        min_rounds=min_rounds,
        seconds=seconds,
        order=reshuffled(rng),
        clock=clock_of(workload),
        on_round=on_round,
    )
    return Rechecked(chunk_size, got.of(None), got.of(chunk_size), got.elapsed_s)
