"""Progress events a resolve reports while it waits and measures."""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

import attrs

__all__ = ["CALLS", "EventKind", "ProgressCallback", "ProgressEvent"]

EventKind = Literal[
    "waiting",
    "candidates",
    "extended",
    "warmup",
    "probe",
    "raced_out",
    "refined",
    "confirm",
    "done",
]

CALLS: frozenset[EventKind] = frozenset({"warmup", "probe", "confirm"})
"""The kinds of event each of which is one ``run()`` the sweep made (``seconds`` its time)."""


@attrs.frozen(kw_only=True)
class ProgressEvent:
    """One step of a sweep.

    ``waiting``: another sweep holds the machine, or another process measures this
    workload (under ``chunktune.ray.resolve``, another worker measures its node type);
    ``message`` says whom it waits for and since when, told a second into the wait and
    again whenever another process takes the lock over (under ``chunktune.ray.resolve``,
    once per sweeping worker); ``elapsed_s`` is how long that wait has lasted so far (a
    resolve that waits for another process's key, then for the sweep lock, counts each
    wait from its start). A task that shares the sweep of another task of this process
    (of the same key) is told so once, as it joins (``elapsed_s`` 0, ``message``
    :data:`chunktune._flights.SHARING`; not where its ``on_progress`` already gets that
    sweep's events, passed by the task measuring or by another still sharing); that task's
    events follow, its waits among them.
    ``candidates``: the sizes about to be measured (``None`` = native). Sent again,
    with a ``message`` saying why, when a slow pool's budget cuts the opening field.
    ``extended``: a policy with ``extend_budget`` stretched its budget to ``seconds``;
    ``message`` says why (a call too slow to judge one candidate, a race's leader still
    within the noise, a plausible gain or the confirmation's plan more than it pays for).
    ``warmup`` / ``probe``: one ``run()`` with ``chunk_size`` took ``seconds``.
    ``raced_out``: ``chunk_size`` is measured no more; ``message`` says why (clearly
    behind the leader or short of the margin, twice native's time in its first round, or
    cut when the field was halved or cut to the best the budget pays for).
    ``refined``: ``candidates`` join the race (schedules next to the contenders).
    ``confirm``: one ``run()`` of the confirmation against native (``round`` is its block).
    ``done``: the sweep stopped; ``message`` says why.
    """

    kind: EventKind
    chunk_size: int | None = None
    seconds: float | None = None
    round: int = 0
    candidates: tuple[int | None, ...] = ()
    elapsed_s: float = 0.0
    message: str = ""


ProgressCallback = Callable[[ProgressEvent], None]
