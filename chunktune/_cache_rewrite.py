"""What a rewrite of the cache file writes, and what the file written reads as: no I/O.

:class:`~chunktune._cache_file.CacheFile` reads the file under the write lock
(:class:`Locked`), then writes it whole. Here, from what that read and the last write
left: each entry's text (:func:`rewrite`), reusing the text or table of every entry read
and written back unchanged instead of converting and hashing it again; and the entries a
parse of the file written would read (:func:`read_back_written`), so the writer's next
read parses nothing. :class:`Content` says what the memo's entries were read from, so
that a locked read finding those very bytes parses nothing either.
"""

from __future__ import annotations

import hashlib
from collections.abc import Collection, Mapping
from typing import Any

import attrs

from ._cache_checksums import CHECKSUM_FIELD, Known, stored_tables
from ._cache_entry import CacheEntry
from ._cache_format import CacheFormat, Members, encode_members, member_as_read
from ._cache_json import Spans
from ._cache_parse import read_back
from ._cache_unread import NOTHING_UNREAD, Unread

__all__ = [
    "READ_BACK_MAX",
    "Content",
    "Locked",
    "Rewrite",
    "digest",
    "read_back_written",
    "rewrite",
]

# new entries a write reads back from their own text to keep as the memo: a sweep's few; past
# these (a merge, an import, a rebuild) the next read, if any, parses the file
READ_BACK_MAX = 64


@attrs.frozen(eq=False)
class Locked:
    """The document read under the write lock, for the one write that follows it.

    Made by that read alone, and set on the writer's ``CacheFile`` under the lock, which
    orders every read that sets it (each first drops the one before) and every write that
    takes it: a reader thread's parse meanwhile never changes it.
    """

    raw: bytes
    spans: Spans
    """Where each entry stands in the text of ``raw`` (JSON; none for TOML, nor when the
    read found the memo's bytes, whose texts the last write kept)."""
    known: Mapping[str, Known]
    """The entries read from checksummed tables, as the read returned them."""
    legacy: bool = False
    """An older tuner's file, migrated by this write: ``raw`` is kept as its backup."""
    unread: Unread = NOTHING_UNREAD
    """What a newer chunktune wrote that this one cannot read: written back as it is."""


@attrs.frozen(eq=False)
class Content:
    """What the memo's entries (the very dict) were read from or written as: the SHA-256
    of those bytes (:func:`digest`), where each entry stands in their text, and the known
    entries among them. A write whose locked read finds these bytes parses nothing."""

    entries: dict[str, CacheEntry]
    digest: bytes
    spans: Spans
    known: Mapping[str, Known]
    unread: Unread = NOTHING_UNREAD


def digest(raw: bytes) -> bytes:
    """The SHA-256 of a document's bytes (11 ms for 15 MB here, a parse of them 1 s)."""
    return hashlib.sha256(raw).digest()


@attrs.frozen(eq=False)
class Rewrite:
    """A rewrite of the file: every entry's text, the tables made afresh, and the known
    entries the file written holds (each with the table written for it)."""

    members: Members
    tables: dict[str, dict[str, Any]]
    known: dict[str, Known]


def rewrite(
    entries: Mapping[str, CacheEntry],
    known: Mapping[str, Known],
    *,
    replaced: Collection[str],
    members: Members,
    locked: Locked | None,
    fmt: CacheFormat,
) -> Rewrite:
    """The file of ``entries``: an entry of ``known`` (not ``replaced``) written back as
    that very object reuses its text in ``members`` (the file last written), or (JSON) its
    table in ``locked``'s document encoded again, or the table made of it before; the
    others are converted, hashed and encoded afresh."""
    known = {k: seen for k, seen in known.items() if k not in replaced}
    as_read = _as_read(entries, known, members, locked)
    tables = stored_tables({k: e for k, e in entries.items() if k not in as_read}, known)
    made = dict(sorted({**encode_members(tables, fmt, members), **as_read}.items()))
    after = {
        k: seen
        if seen.stored is not None or k in as_read
        else Known(seen.checksum, seen.entry, tables[k])
        for k, seen in known.items()
        if k in entries and entries[k] is seen.entry
    }
    return Rewrite(made, tables, after)


def _as_read(
    entries: Mapping[str, CacheEntry],
    known: Mapping[str, Known],
    members: Members,
    locked: Locked | None,
) -> Members:
    """The entries of ``entries`` read from the file, unchanged, that no table was made
    for, each with its text: the one in ``members`` (the file last written), or that of its
    very table in the document read under the lock (``locked``), encoded again.
    Neither costs a conversion or a hash (the first write of a process that read a large
    cache: 1.1 s at 10k), and the bytes are those any process writes for that table.
    """
    kept: Members = {}
    text: str | None = None
    for key, entry in entries.items():
        seen = known.get(key)
        if seen is None or seen.entry is not entry or seen.stored is not None:
            continue
        earlier = members.get(key)
        if earlier is not None and earlier[0] is seen:
            kept[key] = earlier
            continue
        if locked is None or key not in locked.spans:
            continue
        if text is None:
            text = locked.raw.decode()  # spans are of a document that decoded
        member = member_as_read(text, locked.spans[key], key, seen.checksum)
        if member is not None:
            kept[key] = (seen, member)
    return kept


def read_back_written(
    made: Rewrite, data: bytes, fmt: CacheFormat, unread: Unread
) -> Content | None:
    """What a read of the file written as ``made`` (``data``, with what a newer chunktune
    wrote, ``unread``) parses to: the entries it knew, and the others (at most
    :data:`READ_BACK_MAX`) read back from their text as a parse reads them; None past
    that, or if one does not read back as written."""
    known = dict(made.known)
    tables = made.tables
    # a parse reuses a known entry for a table of its checksum, and reads the others;
    # an entry written as it was read (no table made) is known by that very text
    fresh = {
        k: m
        for k, m in made.members.items()
        if k in tables and (k not in known or known[k].checksum != tables[k][CHECKSUM_FIELD])
    }
    if len(fresh) > READ_BACK_MAX:
        return None  # a merge, an import: read back, they would cost what a parse costs
    parsed = read_back(fresh, fmt) if fresh else None
    if parsed is not None and (parsed.skipped or parsed.altered):
        return None  # not as written: the next read parses the file
    entries: dict[str, CacheEntry] = {}
    for key in made.members:
        if key in fresh:
            assert parsed is not None
            seen, table = parsed.known[key], tables[key]
            # written again as a fresh reader of the file writes it, so the bytes do not
            # depend on which process writes: JSON, the text it read (the table given,
            # an int where the entry read back holds a float); TOML, the entry read back
            # converted anew (reused only if that makes the same table)
            same = fmt == "json" or (
                stored_tables({key: seen.entry})[key][CHECKSUM_FIELD] == table[CHECKSUM_FIELD]
            )
            known[key] = attrs.evolve(seen, stored=table) if same else seen
        entries[key] = known[key].entry
    # no spans: every entry's text is in made.members, which the next write reuses
    return Content(entries, digest(data), {}, known, unread)
