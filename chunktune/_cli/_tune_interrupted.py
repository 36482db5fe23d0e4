"""What an interrupted ``chunktune tune`` says it leaves behind.

A Ctrl-C stops the sweep and caches nothing only while the sweep runs. One that comes
as the decision is stored (the write finishes on its own) or after ``resolve`` returned
(as its loop closes, as the progress display ends) leaves a decision made, and perhaps
cached: the line says which, as the cache itself tells it.
"""

from __future__ import annotations

from .._cache_entry import CacheEntry
from .._decision import Decision
from .._errors import ChunktuneError
from .._here import in_memory
from .._keys import cache_for, job_key
from .._policy import Policy
from .._request import ask, worth_storing
from .._settings import Settings
from .._workload import Workload
from ._render import chunk_size_line

__all__ = [
    "NOTHING_DECIDED",
    "NOTHING_MEASURED",
    "SWEEP_STOPPED",
    "described",
    "interrupted_line",
]

SWEEP_STOPPED = "interrupted: the sweep stopped and nothing was cached"
# Ctrl-C before the sweep began: while it waited for another process's sweep of this
# key or of the machine, say
NOTHING_MEASURED = "interrupted before anything was measured; nothing was cached"
# a policy that never measures, a batch whose chunk size cannot matter, a policy that
# proposes nothing but native for it: no sweep to stop
NOTHING_DECIDED = "interrupted before a decision was made; nothing was measured or cached"

_WHERE = {
    "benchmark": "measured now",
    "cache": "from the cache",
    "manual": "manual",
    "disabled": "policy disabled",
    "trivial": "nothing to tune",
    "fallback": "not measured to the end",
}


def described(decision: Decision) -> str:
    """``"chunk_size=8 (native would be 12); measured now"``: the choice and where it came from."""
    chosen = chunk_size_line(decision.chunk_size, decision.native_chunk)
    return f"{chosen}; {_WHERE[decision.source]}"


def interrupted_line(
    decision: Decision | None,
    *,
    workload: Workload,
    settings: Settings,
    policy: Policy,
    since: float,
    measured: bool,
) -> str:
    """The line a ``tune`` that Ctrl-C ended says: ``decision`` is what ``resolve`` returned
    before it (None if it had not), ``since`` the time (``time.time()``) the resolve began,
    ``measured`` whether its sweep had begun (held the machine: its first call made or
    about to be; an entry written since by another process, whose sweep of the key this
    one waited for, is not this one's where it had not).

    Blocking: it reads the cache, and keys ``workload`` where there is no decision (this
    run's cache writes must have ended: :func:`~chunktune._threads.wait_for_stores`).
    """
    if decision is None:
        return _undecided(workload, settings, policy, since, measured=measured)
    made = f"interrupted after the decision was made: {described(decision)}"
    if decision.source == "cache":
        return f"{made} (cache key {decision.key})"
    if decision.source == "fallback":
        return f"{made}; not cached, as a fallback never is"
    if decision.source != "benchmark":
        return f"{made}; nothing to cache"
    if not worth_storing(decision):
        return f"{made}; not cached: nothing but native was timed"
    cache = cache_for(settings)
    if cache is None:
        return f"{made}; not cached: the cache is disabled"
    try:
        entry = cache.get(decision.key)
    except (ChunktuneError, OSError) as exc:
        return f"{made}; whether it was cached could not be told ({exc})"
    # the entry is this decision's if it is as measured (another process's `--refresh`
    # may have written over it since); a failed write was warned of as it failed
    ours = _ours(entry, since, decision)
    return f"{made} and cached (cache key {decision.key})" if ours else f"{made}; not cached"


def _undecided(
    workload: Workload, settings: Settings, policy: Policy, since: float, *, measured: bool
) -> str:
    """:func:`interrupted_line` where ``resolve`` had not returned: the sweep stopped, or
    it had ended and its decision was being stored, a write that finishes on its own.
    Neither where the policy never measures, the batch is trivial or the policy proposes
    nothing but native for it: no sweep ran. Nor where the sweep had not begun: it may
    have waited for another process, whose entry is then told as that process's."""
    if _measureless(workload, settings, policy):
        return NOTHING_DECIDED
    cache = cache_for(settings)
    if cache is None:
        return SWEEP_STOPPED if measured else NOTHING_MEASURED
    try:
        key = job_key(workload, policy)
        entry = cache.get(key)
    except Exception as exc:  # signature() is the workload's code: the line is said anyway
        return (
            f"interrupted: the sweep stopped; whether anything was cached could not be told ({exc})"
        )
    if entry is None or not _ours(entry, since):
        return SWEEP_STOPPED if measured else NOTHING_MEASURED
    chosen = chunk_size_line(entry.chunk_size, entry.native_chunk)
    if not measured:
        return (
            f"interrupted before anything was measured; nothing was cached by this tune "
            f"(another process has cached {chosen} for this workload since: cache key {key})"
        )
    return (
        f"interrupted as the sweep's decision was stored: {chosen}; measured now and "
        f"cached (cache key {key})"
    )


def _measureless(workload: Workload, settings: Settings, policy: Policy) -> bool:
    """Whether a resolve answers ``workload`` under ``policy`` with no sweep, as
    :func:`chunktune._here.in_memory` answers a refresh (a disabled policy, a trivial
    batch, nothing but native proposed); False where the resolve would have refused it."""
    try:
        asked = ask(
            workload, settings=settings, policy=policy, manual=None, refresh=True, on_progress=None
        )
    except ChunktuneError:
        return False
    return in_memory(asked, settings) is not None


def _ours(entry: CacheEntry | None, since: float, decision: Decision | None = None) -> bool:
    """Whether ``entry`` was written by the resolve that began at ``since``: an older one
    under its key (replaced by ``--refresh`` only once the sweep is done) is not, nor one
    other than ``decision`` as measured, where it is known."""
    if entry is None or entry.created < since:
        return False
    return decision is None or (entry.chunk_size, entry.probe_seconds) == (
        decision.chunk_size,
        decision.probe_seconds,
    )
