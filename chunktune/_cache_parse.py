"""Reading a cache document: what its bytes hold, entry by entry (the encoding and the
document's layout are :mod:`chunktune._cache_format`'s).

Each table is read by :mod:`chunktune._cache_entry`, every field checked, and an entry that
fails is skipped and named, never served. Each table also carries a checksum of its key and
content (:mod:`chunktune._cache_checksums`): an entry whose checksum fails was edited or
damaged, and is :attr:`ParsedCache.altered`. ``checksums`` declares them; files written
before checksums (no declaration) are read as they are, every entry served. A document that
does not decode, ends inside a line (TOML cut short), or is of the wrong shape (not a table,
no schema, a newer schema, ``entries`` not a table), is
:class:`~chunktune._cache_format.UnusableCache`; the caller moves it aside or reports it,
except a newer schema's (:class:`~chunktune._cache_format.NewerCache`), which another
chunktune still uses, and a table with none of a cache's keys
(:class:`~chunktune._cache_format.ForeignDocument`), some other program's file: both are
:class:`~chunktune._cache_format.LeftAlone`. The older tuner's flat JSON cache (schema 0,
:mod:`chunktune._cache_legacy`) goes through the same validation, as do the entries an
older tuner still pointed at a migrated cache stores beside its ``entries``. What a newer
chunktune of this schema added that this one cannot read is :attr:`ParsedCache.unread`,
written back by :func:`~chunktune._cache_format.document` (:mod:`chunktune._cache_unread`).
A document in the other format than the one asked for (machines whose settings disagree) is
read in its own (:attr:`ParsedCache.found_as`), never taken for a damaged one.
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Mapping
from typing import Any

import attrs

from ._cache_checksums import CHECKSUM_FIELD, CHECKSUMS, Known, altered
from ._cache_entry import BadEntry, CacheEntry, check_key, entry_from_table
from ._cache_format import (
    SCHEMA,
    CacheFormat,
    Decoded,
    ForeignDocument,
    LeftAlone,
    Members,
    NewerCache,
    UnusableCache,
    decode,
    too_deep,
)
from ._cache_json import Spans
from ._cache_legacy import is_legacy, legacy_entries, stray_legacy
from ._cache_toml import Written, toml_reusing
from ._cache_unread import NOTHING_UNREAD, Unread, has_newer_fields
from ._reading import MAX_NESTING, nests_deeper
from ._shown import shown

__all__ = ["NewerTable", "ParsedCache", "parse_cache", "read_back", "read_table", "unread_top"]

_DOCUMENT_KEYS = ("schema", "checksums", "entries")  # a document's own top-level keys


@attrs.frozen
class ParsedCache:
    """What a document holds: the valid entries, and ``(key, why)`` for each one skipped."""

    entries: dict[str, CacheEntry]
    skipped: tuple[tuple[str, str], ...] = ()
    legacy: bool = False
    altered: tuple[str, ...] = ()
    """The skipped keys whose checksum fails or is missing: edited or damaged since written."""
    known: dict[str, Known] = attrs.field(factory=dict)
    """The served entries read from a checksummed table, by key: for the next parse and write."""
    decoded: Decoded | None = attrs.field(default=None, eq=False, repr=False)
    """Where :attr:`altered` makes the file unusable: what its bytes decoded to, for their
    salvage (:class:`Decoded`)."""
    unread: Unread = NOTHING_UNREAD
    """What a newer chunktune wrote that this one cannot read: kept by the next write."""
    found_as: CacheFormat | None = None
    """The other format, where the document was not in the one asked for (a machine whose
    settings say TOML wrote the file another's read as JSON): it is read, and written, so."""

    @property
    def kind(self) -> str:
        """``"chunktune cache"`` or ``"older tuner's cache"``."""
        return "older tuner's cache" if self.legacy else "chunktune cache"


def parse_cache(
    raw: bytes,
    fmt: CacheFormat,
    *,
    mtime: float,
    source: str,
    known: Mapping[str, Known] | None = None,
    spans: Spans | None = None,
    written: Written | None = None,
) -> ParsedCache:
    """Parse a chunktune cache, or an older tuner's flat JSON cache, every entry validated.

    ``mtime`` (Unix seconds) dates the older tuner's entries, which carry no date;
    ``source`` names the file in their reason. Keys of the older tuner's entries
    become ``legacy-<key>``: they hashed too little to be trusted for a hit, but the
    evidence is kept, listed and exported; so are those an older tuner stored at the top
    level of a chunktune document. Every checksum is checked; a table whose
    checksum matched and equals ``known[key].checksum`` reads as ``known[key].entry``.
    ``spans``, if given, is filled as :func:`chunktune._cache_json.json_by_entry` fills it.
    What an unusable document (or one holding an altered entry) decoded to, or that ``raw``
    did not decode, goes with the exception raised (or the altered reading returned), for
    the salvage of these bytes that follows (:class:`Decoded`). ``written`` (TOML): the texts
    this process last wrote, each of a table of ``known``'s checksum; where one stands in
    ``raw`` as written it is not decoded again (:mod:`chunktune._cache_toml`), and what is
    read is what a decoding of the whole reads.

    Raises:
        UnusableCache: the document does not decode, is of the wrong shape, or nests
            deeper than :data:`~chunktune._reading.MAX_NESTING` levels.
        NewerCache: (an UnusableCache) the document has a newer schema.
        ForeignDocument: (an UnusableCache) the document is some other program's table.
    """
    asked = fmt
    reusing = toml_reusing(raw, written) if fmt == "toml" and written else None
    if reusing is not None:
        doc, reused = reusing
        try:
            parsed = _parse_document(
                doc, fmt, mtime=mtime, source=source, known=known, reused=reused
            )
        except UnusableCache:
            parsed = None
        # what is wrong with a document, and what its salvage starts from, is the whole's
        if parsed is not None and not parsed.altered:
            return parsed
        return parse_cache(raw, fmt, mtime=mtime, source=source, known=known, spans=spans)
    try:
        doc = decode(raw, fmt, spans=spans)
    except UnusableCache as exc:
        other = _as_other_format(raw, fmt, spans)
        if other is None:
            exc.decoded = Decoded(raw, fmt, False)
            raise
        fmt, doc = other
    try:
        parsed = _parse_document(doc, fmt, mtime=mtime, source=source, known=known)
    except UnusableCache as exc:
        if not isinstance(exc, LeftAlone):  # that is never moved aside nor salvaged
            exc.decoded = Decoded(raw, fmt, True, doc)
        raise
    # an altered entry makes the file unusable (chunktune._cache_parsed): salvage follows
    if parsed.altered:
        parsed = attrs.evolve(parsed, decoded=Decoded(raw, fmt, True, doc, parsed.known))
    return parsed if fmt == asked else attrs.evolve(parsed, found_as=fmt)


def _as_other_format(
    raw: bytes, fmt: CacheFormat, spans: Spans | None
) -> tuple[CacheFormat, Any] | None:
    """The other format and the table ``raw`` decodes to in it, where ``raw`` does not
    decode as ``fmt``; None if it decodes to no table (or an empty one) there either.

    Machines sharing one file may disagree on its format (``[cache] format = "toml"`` on
    one, the ``.json`` suffix on another): each would take the other's file for a damaged
    one and move it aside with every entry. A table in the other format is what it is.
    """
    other: CacheFormat = "json" if fmt == "toml" else "toml"
    # a JSON document starts with "{", which no TOML document can: a file of the format
    # asked for, damaged, is not decoded again (TOML decodes 8.6 MiB in 1.5 s)
    if raw.lstrip()[:1] == b"{" if fmt == "json" else raw.lstrip()[:1] != b"{":
        return None
    found: Spans = {}
    try:
        doc = decode(raw, other, spans=found)
    except UnusableCache:
        return None
    if not isinstance(doc, dict) or not doc:
        return None
    if spans is not None:
        spans.clear()
        spans.update(found)
    return other, doc


def read_back(members: Members, fmt: CacheFormat) -> ParsedCache:
    """What a parse of a file written with ``members``
    (:func:`~chunktune._cache_format.encode_tables`'s memo, or a part of it) reads for their
    entries: their texts decoded and every entry read and checked as :func:`parse_cache`
    reads it, without the rest of the file."""
    texts = [text for _, text in members.values()]
    if fmt == "toml":
        tables = tomllib.loads("\n".join(texts)).get("entries", {})
    else:
        tables = json.loads("{" + ",".join(texts) + "}")
    return _read_entries(tables, declared=True, known={})


def _parse_document(
    doc: Any,
    fmt: CacheFormat,
    *,
    mtime: float,
    source: str,
    known: Mapping[str, Known] | None,
    reused: Mapping[str, Known] | None = None,
) -> ParsedCache:
    """:func:`parse_cache` of the document ``doc`` its bytes decoded to (as ``fmt``); each
    key of ``reused`` reads as that known entry (its table left undecoded)."""
    doc = _top_table(doc, fmt)
    if is_legacy(doc):
        entries, skipped = legacy_entries(doc, mtime=mtime, source=source)
        return ParsedCache(entries, tuple(skipped), legacy=True)
    tables, declared = _entry_tables(doc)
    parsed = _read_entries(tables, declared=declared, known=known or {}, reused=reused or {})
    strays = stray_legacy(doc, own=_DOCUMENT_KEYS)
    top = unread_top(doc, strays)
    if top:
        parsed = attrs.evolve(parsed, unread=attrs.evolve(parsed.unread, top=top))
    if not strays:
        return parsed
    # written after chunktune's last write, which moves them among the entries: newer
    extra, skipped = legacy_entries(strays, mtime=mtime, source=source)
    return attrs.evolve(
        parsed,
        entries={**parsed.entries, **extra},
        skipped=(*parsed.skipped, *skipped),
        known={k: v for k, v in parsed.known.items() if k not in extra},
    )


def unread_top(doc: Mapping[str, Any], strays: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A chunktune document's keys beside its own that a newer chunktune wrote: not the
    older tuner's entries (``strays``, :func:`~chunktune._cache_legacy.stray_legacy`'s)."""
    if strays is None:
        strays = stray_legacy(doc, own=_DOCUMENT_KEYS)
    return {k: v for k, v in doc.items() if k not in _DOCUMENT_KEYS and k not in strays}


def _top_table(doc: Any, fmt: CacheFormat) -> dict[str, Any]:
    """The decoded document ``doc``, a table no deeper than a cache's (unless of a newer
    schema).

    Raises:
        UnusableCache: it nests too deeply, or is not a table.
    """
    schema = doc.get("schema") if isinstance(doc, dict) else None
    newer = type(schema) is int and schema > SCHEMA  # a newer chunktune's file: left alone
    if not newer and nests_deeper(doc, MAX_NESTING):
        raise UnusableCache(too_deep(fmt))
    if not isinstance(doc, dict):
        raise UnusableCache("is not a cache: its top level is not a table")
    return doc


# what every trace `chunktune record` writes holds, and no cache does
_TRACE_KEYS = frozenset({"num_envs", "nthread", "native", "rounds", "samples"})


def _entry_tables(doc: Mapping[str, Any]) -> tuple[dict[str, Any], bool]:
    """A chunktune document's ``entries`` table, and whether it declares checksums.

    Raises:
        UnusableCache: no schema or not one of chunktune's, checksums made some other
            way, or ``entries`` not a table.
        NewerCache: (an UnusableCache) a newer schema.
        ForeignDocument: (an UnusableCache) a table, not empty, with none of a cache's keys.
    """
    schema = doc.get("schema")
    if type(schema) is not int or schema < 1:  # chunktune's schemas count from 1
        has = "no schema" if "schema" not in doc else f"schema {shown(schema)}"
        why = f"is neither a chunktune cache nor an older tuner's JSON cache ({has})"
        if doc.keys() >= _TRACE_KEYS:
            # a recording and a cache are both JSON files a user keeps side by side
            why += (
                "; it is a trace written by `chunktune record`: replay it with "
                "chunktune.sim.ReplayWorkload.from_file"
            )
        if doc and not any(key in doc for key in _DOCUMENT_KEYS):
            # no damage leaves a table that parses and holds none of them: a settings file
            # or some other program's, named as the cache by mistake; moving it aside would
            # take it from that program (a chunktune.toml would stop being found)
            raise ForeignDocument(why)
        raise UnusableCache(why)
    if schema > SCHEMA:
        raise NewerCache(
            f"has cache schema {schema}, newer than this chunktune's {SCHEMA}; "
            "upgrade chunktune to read it"
        )
    declared = _declares_checksums(doc)
    table = doc.get("entries", {})
    if not isinstance(table, dict):
        raise UnusableCache(f"is not a cache: its entries, {shown(table)}, are not a table")
    return table, declared


def _declares_checksums(doc: Mapping[str, Any]) -> bool:
    """Whether a document declares checksummed entries.

    Raises:
        UnusableCache: it declares checksums made some other way (or damaged).
    """
    declared = doc.get("checksums")
    if declared is None:
        return False
    if declared != CHECKSUMS:
        raise UnusableCache(f"declares entry checksums {shown(declared)}, not {CHECKSUMS!r}")
    return True


@attrs.frozen
class NewerTable:
    """A whole table (its checksum matched) that a newer chunktune wrote in a form this one
    cannot read: never served, written back as read."""

    table: Mapping[str, Any]
    why: str
    """Why this one cannot read it (the entry's problem)."""


def read_table(key: str, table: Any, earlier: Known | None) -> CacheEntry | Known | NewerTable:
    """What an entry's whole ``table`` (one :func:`altered` passed) reads as, for a parse and
    a salvage alike: ``earlier``, the known entry built of a table of this checksum (the same
    checksum, the same table); else its entry, a ``Known`` where it has a checksum (keeping
    the fields a newer chunktune added: its data, not damage); or a newer chunktune's table
    this one cannot read, where a checksum vouches for it.

    Raises:
        BadEntry: a key no format can hold, or an invalid table no checksum vouches for.
    """
    stored = table.get(CHECKSUM_FIELD) if isinstance(table, dict) else None
    if earlier is not None and stored == earlier.checksum:
        return earlier
    check_key(key)
    try:
        entry = entry_from_table(table)
    except BadEntry as exc:
        if stored is None:
            raise
        return NewerTable(table, str(exc))
    if stored is None:
        return entry
    return Known(stored, entry, table if has_newer_fields(table) else None)


def _read_entries(
    tables: Mapping[str, Any],
    *,
    declared: bool,
    known: Mapping[str, Known],
    reused: Mapping[str, Known] | None = None,
) -> ParsedCache:
    """Each table's entry: skipped if altered or invalid, reused from ``known``, or read;
    ``reused``'s, left undecoded, as the known entry a decoding of them reads."""
    reused = reused or {}
    entries: dict[str, CacheEntry] = {}
    skipped: list[tuple[str, str]] = []
    changed: list[str] = []
    seen: dict[str, Known] = {}
    unread: dict[str, Any] = {}
    for key, value in tables.items():
        if key in reused:  # its text as written: a table of this known checksum
            entries[key] = reused[key].entry
            seen[key] = reused[key]
            continue
        why = altered(key, value, declared=declared)
        if why is not None:
            skipped.append((key, why))
            changed.append(key)
            continue
        try:
            read = read_table(key, value, known.get(key))
        except BadEntry as exc:
            skipped.append((key, str(exc)))
            continue
        if isinstance(read, NewerTable):
            # a newer chunktune's, whose data a write here must not drop
            skipped.append((key, read.why))
            unread[key] = read.table
        elif isinstance(read, Known):
            entries[key], seen[key] = read.entry, read
        else:
            entries[key] = read
    parsed = ParsedCache(entries, tuple(skipped), False, tuple(changed), seen)
    return attrs.evolve(parsed, unread=Unread(entries=unread)) if unread else parsed
