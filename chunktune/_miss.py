"""What a resolve does once no answer is at hand: a cache miss shared or measured.

The request is keyed off the loop (a ``signature()`` that blocks is left behind at
``hard_limit_s``), then this process's flight for the key is shared, or owned: the
key's cross-process lock taken, the cache looked at again, and the key measured
(``_measure``). ``hard_limit_s`` bounds every wait, a shared sweep's included.
"""

from __future__ import annotations

import functools
import math
from pathlib import Path

import anyio
import attrs

from . import _flights, _giving_up, _unstored
from ._cache import DecisionCache
from ._decision import Decision
from ._here import key_here
from ._keys import lookup, remembered
from ._lock_wait import hold
from ._locks import key_lock
from ._measure import measure
from ._request import Request
from ._threads import KEYING_THREAD, hop, in_own_thread

__all__ = ["answer", "resolve_key"]


def _left(deadline: float | None) -> float:
    """Seconds until ``deadline`` (``inf`` when there is none)."""
    return math.inf if deadline is None else deadline - anyio.current_time()


async def resolve_key(req: Request, key: str, cache: DecisionCache | None) -> Decision:
    """A cache miss: share this process's flight for the key, or own it and measure.

    ``hard_limit_s`` bounds both: a task that shares another's sweep (the limit is no
    part of the key, so a ``patient`` task may share a sweep with no limit) gives up
    waiting for it at its own limit.
    """
    limit, deadline = req.policy.hard_limit_s, req.deadline
    while True:
        flight, owner = _flights.board(key, req.on_progress)
        if owner:
            break
        # another task of this process is deciding this key: share its answer (and events)
        with anyio.move_on_after(_left(deadline)) as scope:
            shared = await flight.wait(req.on_progress)
        if scope.cancelled_caught:
            assert limit is not None
            return _giving_up.gave_up_sharing(key, limit, req.native, req.policy_name)
        if shared is not None:
            return attrs.evolve(
                shared,
                source="cache" if shared.source == "benchmark" else shared.source,
                probe_seconds=0.0,
                reason=f"shared a concurrent sweep: {shared.reason}",
            )
        # the owner was cancelled or failed before deciding: try to become the owner

    for_sharers: Decision | None = None
    try:
        decision, for_sharers = await _owned_within_limit(req, key, cache, flight)
        return decision
    finally:
        _flights.land(flight, for_sharers)


async def _owned_within_limit(
    req: Request, key: str, cache: DecisionCache | None, flight: _flights.Flight
) -> tuple[Decision, Decision | None]:
    """Own the key's flight until it is decided or ``hard_limit_s`` (by its deadline) runs out.

    Returns this task's decision and what the tasks sharing the flight get: the same,
    but None where this task's own limit ran out (the limit is no part of the key, so a
    sharer with none, or a later one, waits on by its own and may measure the key itself).
    A decision made before the limit is the answer even while it is still being stored.
    """
    watch = _giving_up.Watch(
        req.on_progress, native=req.native, policy_name=req.policy_name, flight=flight
    )
    with anyio.move_on_after(_left(req.deadline)):
        decision = await _owned(req, key, cache, watch, flight)
        return decision, decision
    if watch.decided is not None:
        return watch.decided, watch.decided
    limit = req.policy.hard_limit_s
    assert limit is not None
    return await watch.gave_up(key, limit), None


async def _owned(
    req: Request,
    key: str,
    cache: DecisionCache | None,
    watch: _giving_up.Watch,
    flight: _flights.Flight,
) -> Decision:
    """This task owns the key's flight: lock, re-check, measure."""
    # a flight that landed since this task keyed may have remembered a decision it could
    # not store: that one is the answer, as a cache entry stored meanwhile would be (a
    # thread hop only then: it reads the machine's load for one measured busy)
    if _unstored.holds(key):
        kept = await hop(remembered, req, key, abandon_on_cancel=True)
        if kept is not None:
            return kept
    if cache is None:
        return await measure(req, key, None, watch, flight)
    lock = key_lock(Path(cache.key_lock(key).lock_file))
    # claimed by the flight as it is taken: released for this task if its loop is closed
    waiting = watch.waiting("key", lock)
    async with hold(lock, on_wait=waiting, claim=flight.claim, unclaim=flight.unclaim):
        watch.waiting_for = None
        if not req.refresh:
            hit = await hop(lookup, req, key, cache, abandon_on_cancel=True)
            if hit is not None:
                return hit
        return await measure(req, key, cache, watch, flight, lock)


async def answer(req: Request) -> Decision:
    """Key ``req`` in a worker thread, then answer it from the cache or by measuring."""
    keyed = None
    with anyio.move_on_after(_left(req.deadline)):
        if req.deadline is None:
            keyed = await hop(key_here, req)
        else:
            # signature() is the workload's own code: one that blocks is left behind
            # at the limit, in a daemon thread that never holds up the process's exit
            keyed = await in_own_thread(functools.partial(key_here, req), name=KEYING_THREAD)
    if keyed is None:
        assert req.policy.hard_limit_s is not None
        return _giving_up.gave_up_keying(req.policy.hard_limit_s, req.native, req.policy_name)
    return keyed if isinstance(keyed, Decision) else await resolve_key(*keyed)
