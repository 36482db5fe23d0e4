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

A decision kept is written to the file later, as soon as the cause may have passed (a
write lock given up at its stall limit, EAGAIN, a disk full for a moment): the next
write this process makes to that file, of any key, writes with it every decision kept
for that file whose key the file does not hold (:func:`pending`, :func:`settle`: an
entry another process stored meanwhile wins, and the kept one goes); and a later resolve
that answers from here starts that write in a thread of its own (:func:`recall`), so its
answer waits for no file, nor does an event loop. Those tries come at most once per
``RETRY_S`` a cache file, from its last failed write: a cache that stays unwritable
(a read-only home) is not rewritten on every call. A write refused again keeps the
decisions kept. None of this touches a cache hit: only a miss reaches here.
"""

from __future__ import annotations

import math
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import attrs

from ._cache_entry import BadEntry, CacheEntry, check_entry
from ._decision import Decision
from ._failures import log_bug
from ._shown import shown_file
from ._threads import STORE_THREAD

if TYPE_CHECKING:
    from ._cache import DecisionCache

__all__ = [
    "MAX_ENTRIES",
    "RETRY_S",
    "Pending",
    "clear",
    "drop",
    "holds",
    "keep",
    "pending",
    "put",
    "recall",
    "settle",
    "unstorable",
    "why",
]

MAX_ENTRIES = 256  # far more than the (model, shape, policy) keys of one trainer

RETRY_S = 60.0
"""Seconds between a cache file's failed write and a resolve's next try at writing the
decisions kept for it (a write of another key tries at once: it writes anyway)."""


@attrs.frozen
class _Kept:
    decision: Decision
    why: str  # what kept the cache from storing it
    # where and what to write once the cache takes it; None: nowhere (no entry was made)
    cache: DecisionCache | None = None
    entry: CacheEntry | None = None
    stored_as: str = ""  # its key in the file (a Ray job's answer is kept by the job's key)

    def kept_for(self, path: Path) -> bool:
        """Whether it is to be written to the cache file at ``path``."""
        return self.cache is not None and self.cache.path == path


_kept: OrderedDict[str, _Kept] = OrderedDict()  # least recently used first
_lock = threading.Lock()
_tried: dict[Path, float] = {}  # a cache file's last failed write, time.monotonic()
_retrying: set[Path] = set()  # files a retry's thread is writing now


def _reset_in_child() -> None:
    global _lock  # a parent's thread may have held it at the fork
    _lock = threading.Lock()
    _retrying.clear()  # those threads were the parent's: none runs in the child


os.register_at_fork(after_in_child=_reset_in_child)


def keep(
    key: str,
    decision: Decision,
    why: str,
    *,
    cache: DecisionCache | None = None,
    entry: CacheEntry | None = None,
    stored_as: str = "",
) -> None:
    """Remember ``decision``, measured for ``key`` and not stored because of ``why``; with
    ``cache`` and ``entry``, written there later under ``stored_as`` (``key`` if not given)."""
    # a copy: the caller may edit its timings
    kept = _Kept(attrs.evolve(decision), why, cache, entry, stored_as or key)
    with _lock:
        _kept[key] = kept
        _kept.move_to_end(key)
        while len(_kept) > MAX_ENTRIES:
            _kept.popitem(last=False)
        if cache is not None:
            _tried[cache.path] = time.monotonic()


def unstorable(cache: DecisionCache | None) -> str:
    """Why ``cache`` did not store an entry, for the reason of a decision remembered instead."""
    if cache is None:  # not reached: a cache disabled on purpose remembers nothing
        return "no cache"
    cause = cache.unavailable_cause or "it cannot be written"
    # shown in tune's last line and a remembered decision's reason: a name's newline or
    # escape sequence must neither split that line nor act on the terminal
    return f"the cache {shown_file(cache.path)} is unavailable: {cause}"


def put(
    key: str, decision: Decision, cache: DecisionCache, entry: CacheEntry, *, kept_as: str = ""
) -> None:
    """Blocking: store ``entry`` under ``key``; an entry the cache could not write (not one it
    refused as invalid) leaves ``decision`` remembered in this process instead, under
    ``kept_as`` (the key a resolve looks it up by; ``key`` if not given), and ``entry``
    with it, for a later write of ``cache`` to store under ``key``."""
    kept_as = kept_as or key
    if cache.put(key, entry):
        drop(kept_as)  # stored (a refresh, a location writable again): the cache answers
        return
    try:
        check_entry(entry)
    except BadEntry:
        return  # refused, with a warning, as the cache would refuse to read it
    keep(kept_as, decision, unstorable(cache), cache=cache, entry=entry, stored_as=key)


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
    """Forget every decision kept, and when writes were tried (tests)."""
    with _lock:
        _kept.clear()
        _tried.clear()


def recall(key: str, serves: Callable[[Decision], bool]) -> Decision | None:
    """The decision kept for ``key``, as the answer of a resolve that measures nothing, if
    ``serves`` (the cache's test of a busy machine's entry) lets it answer now; its cache's
    kept decisions are then written in a thread of their own, once ``RETRY_S`` has passed
    since that file's last failed write."""
    with _lock:
        kept = _kept.get(key)
        if kept is not None:
            _kept.move_to_end(key)
    if kept is None or not serves(kept.decision):
        return None
    _retry(kept)
    said = kept.decision
    return attrs.evolve(
        said,
        source="cache",
        probe_seconds=0.0,
        reason=f"remembered in this process, measured earlier but not cached ({kept.why}): "
        f"{said.reason}",
    )


# ---------------------------------------------------------------- written later


@attrs.frozen
class Pending:
    """The decisions kept for one cache file, as a write of that file found them."""

    path: Path
    kept: tuple[tuple[str, _Kept], ...]  # (the key a resolve looks up, what is kept)

    def add_to(self, current: dict[str, CacheEntry]) -> list[str]:
        """Put each kept entry whose key ``current`` (the file's entries, under the write
        lock) lacks into it; the keys added. One the file holds is left as the file has
        it: another process stored it meanwhile (or this write did)."""
        added = []
        for _, kept in self.kept:
            if kept.entry is not None and kept.stored_as not in current:
                current[kept.stored_as] = kept.entry
                added.append(kept.stored_as)
        return added


def pending(path: Path) -> Pending | None:
    """The decisions kept for the cache file at ``path`` (a :class:`DecisionCache`'s), for
    its writer to write too; None if there are none."""
    if not _kept:  # the usual process: nothing kept, no lock taken
        return None
    with _lock:
        found = tuple(
            (key, kept)
            for key, kept in _kept.items()
            if kept.entry is not None and kept.kept_for(path)
        )
    return Pending(path, found) if found else None


def settle(written: Pending, entries: Mapping[str, CacheEntry]) -> None:
    """The file now holds ``entries``: each decision of ``written`` whose key is among them
    is let go (the file answers it), unless kept anew meanwhile (a refresh)."""
    with _lock:
        for key, kept in written.kept:
            now = _kept.get(key)
            # kept anew is another entry; the same one with its cause noted anew (a retry
            # refused meanwhile: :func:`_write`) is what this write took
            if kept.stored_as in entries and now is not None and now.entry is kept.entry:
                del _kept[key]
        _tried.pop(written.path, None)  # written: a later failure starts the wait afresh


def _retry(kept: _Kept) -> None:
    """Start writing the decisions kept for ``kept``'s cache, in a thread of its own, unless
    one is writing them now or that file's last failed write is under ``RETRY_S`` old."""
    cache = kept.cache
    if cache is None or kept.entry is None:
        return
    path = cache.path
    with _lock:
        if path in _retrying or time.monotonic() - _tried.get(path, -math.inf) < RETRY_S:
            return
        _tried[path] = time.monotonic()  # a try that stalls holds off the next ones too
        _retrying.add(path)
    # no daemon, as a sweep's store: the process's exit waits for the write (bounded by
    # the write lock's stall limit), never leaving it half done
    thread = threading.Thread(target=_write, args=(cache,), name=STORE_THREAD, daemon=False)
    try:
        thread.start()
    except RuntimeError:  # no thread now (the interpreter exiting): a later resolve tries
        with _lock:
            _retrying.discard(path)


def _write(cache: DecisionCache) -> None:
    """A retry's thread: write ``cache``'s kept decisions; each one refused again stays
    kept, its reason naming the cause now."""
    try:
        if not cache.store_kept():
            why = unstorable(cache)
            with _lock:
                for key, kept in list(_kept.items()):
                    if kept.kept_for(cache.path):
                        _kept[key] = attrs.evolve(kept, why=why)
                _tried[cache.path] = time.monotonic()
    except BaseException as exc:
        # no one awaits this thread: what it raised (a MemoryError, an interrupt sent to
        # it) is a bug report in chunktune's log, not a bare traceback from the thread's
        # excepthook on a trainer's stderr; the decisions stay kept for a later write
        log_bug(exc, f"writing the decisions kept for the cache {shown_file(cache.path)}")
    finally:
        with _lock:
            _retrying.discard(cache.path)
