"""The base of chunktune's own workloads whose seconds are modeled, not timed.

The simulated pool and the replayed trace never sleep: a sweep's budget runs on the
modeled seconds they count (``clock()``), which ``_sweep`` recognizes by this base.
"""

from __future__ import annotations

import time
from collections.abc import Callable

__all__ = ["CountedCalls", "ModeledTime", "clock_of"]


class ModeledTime:
    """Base of chunktune's own workloads whose seconds are modeled (simulated, replayed).

    Their calls never sleep, so a sweep's budget runs on their ``clock()``, the modeled
    seconds so far, not on the wall clock. Nominal on purpose: a ``clock`` attribute of
    a user's workload (a simulation's own time, say) never replaces the wall clock.
    """

    __slots__ = ()

    def clock(self) -> float:
        """Modeled seconds so far."""
        raise NotImplementedError


class CountedCalls(ModeledTime):
    """A modeled workload that counts its own calls (the simulated pool, the replay).

    ``calls`` is how many ``run()`` calls there were, ``history`` each one's
    ``(chunk_size, seconds)`` and ``elapsed_s`` their seconds summed, which
    :meth:`clock` reports. A subclass calls :meth:`_forget_calls` when it resets and
    returns :meth:`_counted` from ``run()``.
    """

    __slots__ = ("calls", "elapsed_s", "history")

    calls: int
    elapsed_s: float
    history: list[tuple[int | None, float]]

    def _forget_calls(self) -> None:
        self.calls = 0
        self.history = []
        self.elapsed_s = 0.0  # the simulated seconds of every call so far

    def _counted(self, chunk_size: int | None, seconds: float) -> float:
        """``seconds``, once the call that took them is counted."""
        self.calls += 1
        self.elapsed_s += seconds
        self.history.append((chunk_size, seconds))
        return seconds

    def clock(self) -> float:
        """Simulated seconds: the sum of every call so far. A sweep's budget runs on it.

        The calls never sleep, so on the wall clock a budget would never bind; counted
        here, it ends a sweep of this workload where it would end one of the real pool.
        """
        return self.elapsed_s


def clock_of(workload: object) -> Callable[[], float]:
    """A simulated or replayed workload's ``clock()`` (:class:`ModeledTime`), else wall time."""
    return workload.clock if isinstance(workload, ModeledTime) else time.monotonic
