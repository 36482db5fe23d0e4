"""Decisions measured but not stored, by cache key: a cache that cannot be written costs one sweep.

A sweep's decision that the cache would have kept (``_request.worth_storing``) but could
not (an unwritable or uncreatable location, a full disk, a file that cannot be replaced)
is kept here instead, under its whole cache key (model, machine, run parameters, policy
identity), so that a trainer resolving per env build pays one sweep per key and process,
not one per call. A later resolve of that key, once the cache has no entry for it,
answers from here: ``source == "cache"`` (no call measured; ``probe_seconds`` 0.0), the
reason saying it was remembered in this process and why the cache could not keep it.

What is never kept: a fallback (a failing workload, ``hard_limit_s``, a cancel), a
decision that timed native alone, one of a cache disabled on purpose (``[cache] enabled =
false``: benchmarks rely on measuring every time). ``refresh`` measures again and its
decision replaces the one kept (or, stored, drops it). A decision measured while the
machine was busy answers only as its cache entry would: not once the machine is calm.

At most ``MAX_ENTRIES`` are kept, the least recently used let go first. A fork child
keeps its parent's: they were measured on this machine under the same keys, and its
keys are its own (a child pinned to other CPUs keys differently), so they are as good
as an entry the child would read from the cache; from the fork on, each process keeps
its own.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import TYPE_CHECKING

import attrs

from ._cache_entry import BadEntry, CacheEntry, check_entry
from ._decision import Decision

if TYPE_CHECKING:
    from ._cache import DecisionCache

__all__ = ["MAX_ENTRIES", "clear", "drop", "holds", "keep", "put", "recall", "unstorable", "why"]

MAX_ENTRIES = 256  # far more than the (model, shape, policy) keys of one trainer


@attrs.frozen
class _Kept:
    decision: Decision
    why: str  # what kept the cache from storing it


_kept: OrderedDict[str, _Kept] = OrderedDict()  # least recently used first
_lock = threading.Lock()


def _reset_in_child() -> None:
    global _lock  # a parent's thread may have held it at the fork
    _lock = threading.Lock()


os.register_at_fork(after_in_child=_reset_in_child)


def keep(key: str, decision: Decision, why: str) -> None:
    """Remember ``decision``, measured for ``key`` and not stored because of ``why``."""
    kept = _Kept(attrs.evolve(decision), why)  # a copy: the caller may edit its timings
    with _lock:
        _kept[key] = kept
        _kept.move_to_end(key)
        while len(_kept) > MAX_ENTRIES:
            _kept.popitem(last=False)


def unstorable(cache: DecisionCache | None) -> str:
    """Why ``cache`` did not store an entry, for the reason of a decision remembered instead."""
    if cache is None:  # not reached: a cache disabled on purpose remembers nothing
        return "no cache"
    cause = cache.unavailable_cause or "it cannot be written"
    return f"the cache {cache.path} is unavailable: {cause}"


def put(
    key: str, decision: Decision, cache: DecisionCache, entry: CacheEntry, *, kept_as: str = ""
) -> None:
    """Blocking: store ``entry`` under ``key``; an entry the cache could not write (not one it
    refused as invalid) leaves ``decision`` remembered in this process instead, under
    ``kept_as`` (the key a resolve looks it up by; ``key`` if not given)."""
    kept_as = kept_as or key
    if cache.put(key, entry):
        drop(kept_as)  # stored (a refresh, a location writable again): the cache answers
        return
    try:
        check_entry(entry)
    except BadEntry:
        return  # refused, with a warning, as the cache would refuse to read it
    keep(kept_as, decision, unstorable(cache))


def drop(key: str) -> None:
    """The cache now holds ``key``'s entry: it answers from there."""
    with _lock:
        _kept.pop(key, None)


def holds(key: str) -> bool:
    """Whether a decision is kept for ``key``, whatever the machine's load now."""
    with _lock:
        return key in _kept


def why(key: str) -> str | None:
    """Why the decision kept for ``key`` was not stored (:func:`unstorable`); None if none is."""
    with _lock:
        kept = _kept.get(key)
    return None if kept is None else kept.why


def clear() -> None:
    """Forget every decision kept (tests)."""
    with _lock:
        _kept.clear()


def recall(key: str, serves: Callable[[Decision], bool]) -> Decision | None:
    """The decision kept for ``key``, as the answer of a resolve that measures nothing, if
    ``serves`` (the cache's test of a busy machine's entry) lets it answer now."""
    with _lock:
        kept = _kept.get(key)
        if kept is not None:
            _kept.move_to_end(key)
    if kept is None or not serves(kept.decision):
        return None
    said = kept.decision
    return attrs.evolve(
        said,
        source="cache",
        probe_seconds=0.0,
        reason=f"remembered in this process, measured earlier but not cached ({kept.why}): "
        f"{said.reason}",
    )
