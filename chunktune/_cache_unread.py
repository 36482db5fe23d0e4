"""What a cache file holds that a newer chunktune of the same schema wrote and this one
cannot read: kept, never dropped, by every write here.

A newer chunktune may add fields to an entry (the entry is served; its table is written
back whole, :func:`has_newer_fields`), keys beside ``entries`` (:attr:`Unread.top`), or
write an entry in a form this one cannot read (a candidate it does not know): whole, its
checksum matching, yet invalid here (:attr:`Unread.entries`), never served. Dropping any
of them would take them from the machines already upgraded that share the file.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

import attrs

from ._cache_checksums import CHECKSUM_FIELD
from ._cache_entry import STORED_FIELDS

__all__ = ["NOTHING_UNREAD", "Unread", "has_newer_fields"]

_OWN_FIELDS = STORED_FIELDS | {CHECKSUM_FIELD}  # an entry's table, as this chunktune writes it


@attrs.frozen
class Unread:
    """What a document holds that this chunktune cannot read, yet a chunktune wrote: a
    newer one's, written back as it was read by every write here."""

    top: Mapping[str, Any] = attrs.field(factory=dict)
    """Keys beside ``entries`` that are not a cache's own (nor an older tuner's entries)."""
    entries: Mapping[str, Any] = attrs.field(factory=dict)
    """Entry tables, by key, whose checksum matches but whose fields this chunktune cannot
    read (a value of a newer form): never served here."""

    def __bool__(self) -> bool:
        return bool(self.top or self.entries)

    def without(self, keys: Collection[str]) -> Unread:
        """These, less the entries under ``keys``: a decision stored here under one of them
        replaces it for good (it must not come back once that decision is deleted)."""
        if not any(key in keys for key in self.entries):
            return self
        return attrs.evolve(self, entries={k: t for k, t in self.entries.items() if k not in keys})


NOTHING_UNREAD = Unread()


def has_newer_fields(table: Mapping[str, Any]) -> bool:
    """Whether a stored entry's ``table`` holds fields this chunktune does not write."""
    return not table.keys() <= _OWN_FIELDS
