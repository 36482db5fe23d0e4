"""The read-only system cache: answers an image ships for its node types.

``[cache] system_path`` (or ``$CHUNKTUNE_SYSTEM_CACHE``) names a cache file that a
lookup consults after the user's own cache, with the same rules (its own policy's
entry, else a stronger policy's). It is never written: a resolve that sweeps stores
its answer in the user's cache, and a system file that is missing, unreadable or
malformed is warned about once, never moved aside or repaired, since it may sit on a
read-only image that other users share. A damaged file still serves its whole entries
(those a move aside would keep, checksums matching); one that does not parse at all, or
that a newer chunktune wrote, is ignored. As the user's cache does, it is parsed again only
when it changed: its stat tells, except within the clock tick of its last change
(:mod:`chunktune._settled`), where its bytes are compared with those last parsed.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from pathlib import Path
from time import time_ns

from ._cache_entry import CacheEntry
from ._cache_format import NewerCache, UnusableCache, cache_format
from ._cache_lookup import JobIndex, best_entry
from ._cache_parse import parse_cache
from ._cache_salvage import salvage
from ._errors import CacheError
from ._paths import user_path
from ._reading import MAX_CACHE_BYTES, TooLarge, read_capped
from ._settings import Settings
from ._settled import LastParse, changed_lately, identity
from ._shown import shown_file

__all__ = ["SystemCache", "system_cache_for", "system_lookup"]

logger = logging.getLogger("chunktune")


class SystemCache:
    """A cache file read, never written. Safe to share between threads.

    Raises:
        CacheError: the path is empty, holds a NUL byte or names a home that does
            not exist, or ``format`` is unknown.
    """

    def __init__(self, path: str | os.PathLike[str], *, format: str = "auto") -> None:
        try:
            self.path = user_path(os.fspath(path))
        except ValueError as exc:
            raise CacheError(f"system cache path: {exc}") from None
        self.format = cache_format(self.path, format)
        # the file's stat, and its bytes where it was read within the tick of its change
        self._memo: LastParse[dict[str, CacheEntry]] = LastParse()
        self._warned: set[str] = set()
        self._lock = threading.Lock()
        self._jobs = JobIndex()  # another policy's entry: among its job's keys only

    def _warn_once(self, why: str) -> None:
        with self._lock:
            if why in self._warned:
                return
            self._warned.add(why)
        logger.warning("chunktune: system cache %s %s", shown_file(self.path), why)

    def entries(self) -> dict[str, CacheEntry]:
        """Every valid entry, by key; a damaged file, its whole entries (warned once)."""
        return dict(self._read())

    def get(self, key: str) -> CacheEntry | None:
        """The entry stored under ``key``, or None; read from the parse memo, copying no
        other entry (:meth:`entries` copies them all)."""
        return self._read().get(key)

    def _read(self) -> dict[str, CacheEntry]:
        """:meth:`entries`, shared with the memo: never changed in place (a lookup of an
        unchanged file copies nothing)."""
        now = time_ns()  # before the stat: a change after it is stamped later than this
        try:
            st = self.path.stat()
        except OSError as exc:
            self._warn_once(f"is unavailable ({exc.strerror or exc}); continuing without it")
            return {}
        stat = identity(st)
        last = self._memo.by_stat(stat)
        if last is not None:
            return last
        settled = not changed_lately(st.st_mtime_ns, st.st_ctime_ns, now)
        try:
            raw = read_capped(self.path, MAX_CACHE_BYTES)  # /dev/zero would never end
            last = self._memo.by_bytes(stat, raw, settled=settled)
            if last is not None:
                return last
            parsed = parse_cache(raw, self.format, mtime=st.st_mtime, source=str(self.path))
        except OSError as exc:
            self._warn_once(f"is unavailable ({exc.strerror or exc}); continuing without it")
            return {}
        except TooLarge as exc:
            self._warn_once(f"holds more than {exc.limit}, no cache does; continuing without it")
            return {}
        except NewerCache as exc:
            self._warn_once(f"{exc}; ignoring it (it is read-only to chunktune, so left as is)")
            entries: dict[str, CacheEntry] = {}
        except UnusableCache as exc:
            entries = salvage(raw, exc.found_in(self.format), exc.decoded)
            self._warn_once(
                f"{exc}; serving the {len(entries)} of its entries that are whole "
                "(it is read-only to chunktune, so left as is)"
            )
        else:
            entries = parsed.entries
            if parsed.skipped:
                keys = ", ".join(key for key, _ in parsed.skipped[:5])
                self._warn_once(
                    f"holds {len(parsed.skipped)} invalid entries ({keys}); they are never served"
                )
        self._memo.keep((stat, None if settled else raw), entries)
        return entries

    def lookup(
        self,
        base_key: str,
        *,
        policy_hash: str,
        rule: str,
        effort: int,
        serves: Callable[[CacheEntry], bool] | None = None,
    ) -> tuple[str, CacheEntry] | None:
        """The entry that answers a request, by the rules of :meth:`DecisionCache.lookup`
        (``serves`` None, the default, refuses none)."""
        return best_entry(
            self._read(),
            base_key,
            policy_hash=policy_hash,
            rule=rule,
            effort=effort,
            serves=serves,
            index=self._jobs,
        )


_systems: dict[Path, SystemCache] = {}
_systems_lock = threading.Lock()


def _reset_in_child() -> None:
    """A parent's thread may have held these locks (or one of a cache's) at the fork."""
    global _systems_lock
    _systems_lock = threading.Lock()
    _systems.clear()


os.register_at_fork(after_in_child=_reset_in_child)


def system_cache_for(settings: Settings) -> SystemCache | None:
    """The system cache the settings name, or None (none named, or caching disabled).

    One object per file per process, so a lookup re-parses the file only
    when it changed, and a problem with it is warned about once.
    """
    if not settings.cache.enabled or not settings.cache.system_path:
        return None
    path = Path(settings.cache.system_path).expanduser().absolute()
    with _systems_lock:
        system = _systems.get(path)
        if system is None:
            # by suffix: ``[cache] format`` is the user's file's, not the image's
            system = _systems[path] = SystemCache(path)
        return system


def system_lookup(
    settings: Settings,
    base_key: str,
    *,
    policy_hash: str,
    rule: str,
    effort: int,
    serves: Callable[[CacheEntry], bool] | None = None,
) -> tuple[str, CacheEntry] | None:
    """Blocking: the system cache's answer to a request the user's cache did not answer
    (``serves`` as :meth:`SystemCache.lookup` takes it)."""
    system = system_cache_for(settings)
    if system is None:
        return None
    return system.lookup(base_key, policy_hash=policy_hash, rule=rule, effort=effort, serves=serves)
