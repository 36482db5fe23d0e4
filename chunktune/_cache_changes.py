"""Changes on their way into the cache: which may be stored, and what a merge does with them."""

from __future__ import annotations

import logging
from collections.abc import Mapping

import attrs

from ._cache_entry import BadEntry, CacheEntry, check_entry
from ._errors import InvalidArgumentError
from ._shown import shown_one, type_named

__all__ = ["MergeReport", "merge_into", "storable"]

logger = logging.getLogger("chunktune")


@attrs.frozen
class MergeReport:
    """What a merge did, by key."""

    added: tuple[str, ...] = ()
    replaced: tuple[str, ...] = ()
    kept: tuple[str, ...] = ()
    same: tuple[str, ...] = ()


def storable(changes: Mapping[str, CacheEntry | None]) -> dict[str, CacheEntry | None]:
    """``changes`` without entries that would not read back valid (each refused with a warning).

    Raises:
        InvalidArgumentError: ``changes`` is not a mapping.
    """
    if not isinstance(changes, Mapping):
        raise InvalidArgumentError(
            f"expected a mapping of cache keys to CacheEntry, got {shown_one(changes)} "
            f"({type_named(changes)})"
        )
    kept: dict[str, CacheEntry | None] = {}
    for key, entry in changes.items():
        if not isinstance(key, str):
            # written as its str but checksummed as itself, it would read back as damaged,
            # and the whole file be moved aside with every other entry in it
            logger.warning(
                "chunktune: not caching entry %s: a cache key is a str, not %s",
                shown_one(key),
                type_named(key),
            )
            continue
        if entry is not None:
            try:
                check_entry(entry)
            except BadEntry as exc:
                logger.warning("chunktune: not caching entry %s: %s", shown_one(key), exc)
                continue
        kept[key] = entry
    return kept


def merge_into(current: dict[str, CacheEntry], incoming: Mapping[str, CacheEntry]) -> MergeReport:
    """Put each entry of ``incoming`` into ``current`` where its key is new there or it is
    the newer (by ``created``) of two that differ; says what became of each key."""
    added: list[str] = []
    replaced: list[str] = []
    kept: list[str] = []
    same: list[str] = []
    for key, entry in sorted(incoming.items()):
        mine = current.get(key)
        if mine is None:
            added.append(key)
        elif mine == entry:
            same.append(key)
            continue
        elif entry.created > mine.created:
            replaced.append(key)
        else:
            kept.append(key)
            continue
        current[key] = entry
    return MergeReport(tuple(added), tuple(replaced), tuple(kept), tuple(same))
