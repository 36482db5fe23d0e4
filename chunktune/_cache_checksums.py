"""The checksum each cache entry's table carries: how it is made, checked and reused.

Each stored table carries a ``checksum`` of its key and content (:func:`checksum`):
damage that leaves a table valid (a TOML file cut at a line's end, a digit changed) or
a hand edit fails it (:func:`altered`). A :class:`Known` entry remembers a checksum that
matched, so the next read of the same table, and the next write of the same entry, skip
the conversion and the hashing. The document that declares the checksums is
:mod:`chunktune._cache_format`'s.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

import attrs

from ._cache_entry import CacheEntry, entry_to_table
from ._shown import shown

__all__ = [
    "CHECKSUMS",
    "CHECKSUM_FIELD",
    "Known",
    "altered",
    "checksum",
    "stored_tables",
]

# The declaration that every entry carries a checksum, and how it is made. Older
# chunktunes of the same schema ignore both (they serve the entries and, writing, drop
# the checksums: the file reads as one written before checksums). Another way of making
# them would need a new schema, since this one could not tell it from damage.
CHECKSUMS = "sha256"
CHECKSUM_FIELD = "checksum"  # the field of an entry's table that holds its own


@attrs.frozen
class Known:
    """An entry read from a table whose checksum matched, and the table written for it.

    A table with the same checksum (and key) reads as this very entry, so a later read
    reuses it instead of converting the table again; ``stored`` is what
    :func:`stored_tables` made of ``entry`` itself, so a write of this very object
    reuses it instead of converting and hashing it again.
    """

    checksum: str
    entry: CacheEntry
    stored: dict[str, Any] | None = None


# one encoder for every entry (json.dumps with options builds one a call: a third of the
# cost); default=repr: a hand-edited TOML date; NaN allowed: a damaged number. A decoded
# table cannot refer to itself, so no check for cycles.
_CANONICAL = json.JSONEncoder(
    sort_keys=True, separators=(",", ":"), default=repr, check_circular=False
)


def checksum(key: str, table: Mapping[str, Any]) -> str:
    """16 hex digits of the SHA-256 of ``key`` and ``table`` (its own checksum left out).

    Over the table as stored, not the entry read from it (which fills in missing fields
    and converts milliseconds), in a canonical JSON: keys sorted, numbers as Python
    writes them, which both formats read back to the same values.
    """
    if CHECKSUM_FIELD in table:
        table = {name: value for name, value in table.items() if name != CHECKSUM_FIELD}
    return hashlib.sha256(_CANONICAL.encode([key, table]).encode()).hexdigest()[:16]


def _stored(key: str, entry: CacheEntry) -> dict[str, Any]:
    table = entry_to_table(entry)
    return {CHECKSUM_FIELD: checksum(key, table), **table}


def stored_tables(
    entries: Mapping[str, CacheEntry], known: Mapping[str, Known] | None = None
) -> dict[str, dict[str, Any]]:
    """The table written for each entry, with its checksum, keys sorted.

    Where ``known[key]`` was made from the very object ``entries[key]`` (identity, not
    equality: an entry that merely compares equal may convert to other bytes, an int
    where a float was), its ``stored`` table is reused, not made and hashed again.
    """
    known = known or {}
    tables = {}
    for key, entry in sorted(entries.items()):
        seen = known.get(key)
        if seen is not None and seen.entry is entry and seen.stored is not None:
            tables[key] = seen.stored
        else:
            tables[key] = _stored(key, entry)
    return tables


def altered(key: str, table: object, *, declared: bool) -> str | None:
    """Why the stored ``table`` of ``key`` is not as chunktune wrote it, or None.

    A table without a checksum is taken as written only where the file declares none.
    """
    if not isinstance(table, dict):
        return None  # not an entry at all: its validation says so
    stored = table.get(CHECKSUM_FIELD)
    if stored is None:
        if not declared:
            return None
        return (
            f"{CHECKSUM_FIELD}: missing, where every entry of the file has one: "
            "it was cut or edited"
        )
    try:
        matches = stored == checksum(key, table)
    except RecursionError:  # nested past what json.dumps follows: damage too
        matches = False
    if not matches:
        return (
            f"{CHECKSUM_FIELD}: {shown(stored)} does not match the entry: it was edited or "
            "damaged after chunktune wrote it"
        )
    return None
