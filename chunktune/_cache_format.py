"""The cache file's format: one parser and one encoder for its JSON and TOML documents.

A document is ``{"schema": 1, "checksums": "sha256", "entries": {key: table}}``; each
table is read and written by :mod:`chunktune._cache_entry`, every field checked, and an
entry that fails is skipped and named, never served. Each table also carries a
checksum of its key and content (:mod:`chunktune._cache_checksums`): an entry whose
checksum fails was edited or damaged, and is :attr:`ParsedCache.altered`. ``checksums``
declares them, ahead of every entry, so no cut of the file can lose it; files written
before checksums (no declaration) are read as they are, every entry served. A document
that does not decode, ends inside a line (TOML cut short), or is of the wrong shape (not
a table, no schema, a newer schema, ``entries`` not a table), is :class:`UnusableCache`;
the caller moves it aside or reports it, except a newer schema's (:class:`NewerCache`),
which another chunktune still uses. The older tuner's flat JSON cache (schema 0) goes
through the same validation. JSON is decoded an entry at a time
(:mod:`chunktune._cache_json`).
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal, cast

import attrs
import tomli_w

from ._cache_checksums import CHECKSUM_FIELD, CHECKSUMS, Known, altered, stored_tables
from ._cache_entry import NATIVE, BadEntry, CacheEntry, entry_from_table
from ._cache_json import json_by_entry
from ._errors import CacheError
from ._reading import MAX_NESTING, nests_deeper
from ._shown import shown

__all__ = [
    "LEGACY_PREFIX",
    "SCHEMA",
    "CacheFormat",
    "NewerCache",
    "ParsedCache",
    "UnusableCache",
    "cache_format",
    "decode",
    "encode",
    "encode_tables",
    "parse_cache",
    "suffix_format",
]

SCHEMA = 1
LEGACY_PREFIX = "legacy-"  # keys of entries migrated from the older tuner's flat cache

CacheFormat = Literal["json", "toml"]


class UnusableCache(Exception):
    """A document that cannot be read as a whole; the message completes "the file ..."."""


class NewerCache(UnusableCache):
    """A document of a newer schema: another chunktune's cache, to be left as it is."""


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

    @property
    def kind(self) -> str:
        """``"chunktune cache"`` or ``"older tuner's cache"``."""
        return "older tuner's cache" if self.legacy else "chunktune cache"


# ---------------------------------------------------------------- the format decision


_SUFFIXES: dict[str, CacheFormat] = {".json": "json", ".toml": "toml"}


def suffix_format(path: Path) -> CacheFormat | None:
    """The format a file name asks for: ``.json`` or ``.toml``; None for any other suffix."""
    return _SUFFIXES.get(path.suffix.lower())


def cache_format(path: Path, format: str = "auto") -> CacheFormat:
    """``format`` itself, or for ``"auto"`` the suffix's (``.toml`` is TOML, anything else JSON).

    Raises:
        CacheError: ``format`` is not ``"auto"``, ``"json"`` or ``"toml"``.
    """
    if format == "auto":
        return suffix_format(path) or "json"
    if format in _SUFFIXES.values():
        return cast(CacheFormat, format)
    raise CacheError(f'cache format {format!r} is not valid; expected "auto", "json" or "toml"')


# ---------------------------------------------------------------- documents


def decode(raw: bytes, fmt: CacheFormat) -> Any:
    """The document in ``raw``.

    Raises:
        UnusableCache: it is not UTF-8 (TOML) or not valid JSON/TOML, nests too deeply,
            or (TOML) does not end with a line break.
    """
    try:
        doc = tomllib.loads(raw.decode()) if fmt == "toml" else json_by_entry(raw)
    except RecursionError:
        raise UnusableCache(_too_deep(fmt)) from None
    except ValueError as exc:  # JSONDecodeError, TOMLDecodeError and UnicodeDecodeError
        raise UnusableCache(f"does not parse as {fmt.upper()}: {exc}") from None
    if fmt == "toml" and raw and not raw.endswith(b"\n"):
        # TOML closes nothing at its end: a copy cut short mid-line still parses, its last
        # value cut ("chunk_size = 1" of 16). Every file chunktune writes ends in a newline.
        raise UnusableCache("ends inside a line, as a file cut short does")
    return doc


def _too_deep(fmt: CacheFormat) -> str:
    return f"is nested too deeply to parse as {fmt.upper()}"


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


def encode(entries: Mapping[str, CacheEntry], fmt: CacheFormat) -> bytes:
    """The document for ``entries``, keys sorted, each entry with its checksum.

    The declaration comes before the entries in both formats (JSON sorts it first), so a
    file cut anywhere that still holds an entry still declares them checksummed.
    """
    return encode_tables(stored_tables(entries), fmt)


def encode_tables(tables: Mapping[str, Mapping[str, Any]], fmt: CacheFormat) -> bytes:
    """The document for the tables :func:`stored_tables` made, as :func:`encode` writes it."""
    doc = {"schema": SCHEMA, "checksums": CHECKSUMS, "entries": tables}
    if fmt == "toml":
        return tomli_w.dumps(doc).encode()
    return (json.dumps(doc, indent=1, sort_keys=True) + "\n").encode()


def _is_legacy(doc: Mapping[str, Any]) -> bool:
    return (
        "schema" not in doc
        and bool(doc)
        and all(isinstance(v, dict) and "chunk_size" in v for v in doc.values())
    )


def _legacy_table(value: dict[str, Any], *, created: float, source: str) -> dict[str, Any]:
    """An older tuner's ``{"chunk_size", "per_candidate_ms", ...}`` in today's form."""
    per_ms = value.get("per_candidate_ms") or {}
    if not isinstance(per_ms, dict):
        raise BadEntry([f"per_candidate_ms: {shown(per_ms)} is not a table"])
    chunk = value["chunk_size"]
    table = {
        "chunk_size": NATIVE if chunk is None else chunk,
        "native_chunk": 0,  # not stored by the older tuner
        "reason": f"migrated from the older tuner's cache {source}",
        "timings_ms": {(NATIVE if k == "None" else k): ms for k, ms in per_ms.items()},
        "policy": "legacy",
        "created": created,
        "signature": {"kind": "legacy"},
        "host": value.get("hostname") or "",
    }
    if value.get("model_file") is not None:
        table["model_file"] = value["model_file"]
    return table


def parse_cache(
    raw: bytes,
    fmt: CacheFormat,
    *,
    mtime: float,
    source: str,
    known: Mapping[str, Known] | None = None,
) -> ParsedCache:
    """Parse a chunktune cache, or an older tuner's flat JSON cache, every entry validated.

    ``mtime`` (Unix seconds) dates the older tuner's entries, which carry no date;
    ``source`` names the file in their reason. Keys of the older tuner's entries
    become ``legacy-<key>``: they hashed too little to be trusted for a hit, but the
    evidence is kept, listed and exported. Every checksum is checked; a table whose
    checksum matched and equals ``known[key].checksum`` reads as ``known[key].entry``.

    Raises:
        UnusableCache: the document does not decode, is of the wrong shape, or nests
            deeper than :data:`~chunktune._reading.MAX_NESTING` levels.
        NewerCache: (an UnusableCache) the document has a newer schema.
    """
    doc = decode(raw, fmt)
    schema = doc.get("schema") if isinstance(doc, dict) else None
    newer = type(schema) is int and schema > SCHEMA  # a newer chunktune's file: left alone
    if not newer and nests_deeper(doc, MAX_NESTING):
        raise UnusableCache(_too_deep(fmt))
    if not isinstance(doc, dict):
        raise UnusableCache("is not a cache: its top level is not a table")
    entries: dict[str, CacheEntry] = {}
    skipped: list[tuple[str, str]] = []
    changed: list[str] = []
    before = known or {}
    seen: dict[str, Known] = {}
    legacy = _is_legacy(doc)
    declared = False
    if legacy:
        tables = doc.items()
    else:
        schema = doc.get("schema")
        if type(schema) is not int or schema < 1:  # chunktune's schemas count from 1
            has = "no schema" if "schema" not in doc else f"schema {shown(schema)}"
            raise UnusableCache(
                f"is neither a chunktune cache nor an older tuner's JSON cache ({has})"
            )
        if schema > SCHEMA:
            raise NewerCache(
                f"has cache schema {schema}, newer than this chunktune's {SCHEMA}; "
                "upgrade chunktune to read it"
            )
        declared = _declares_checksums(doc)
        table = doc.get("entries", {})
        if not isinstance(table, dict):
            raise UnusableCache(f"is not a cache: its entries, {shown(table)}, are not a table")
        tables = table.items()
    for key, value in tables:
        name = f"{LEGACY_PREFIX}{key}" if legacy else key
        why = None if legacy else altered(key, value, declared=declared)
        if why is not None:
            skipped.append((name, why))
            changed.append(name)
            continue
        # a checksum here matched its table: the same checksum, the same table
        stored = value.get(CHECKSUM_FIELD) if not legacy and isinstance(value, dict) else None
        if stored is not None:
            earlier = before.get(key)
            if earlier is not None and earlier.checksum == stored:
                entries[key] = earlier.entry
                seen[key] = earlier
                continue
        try:
            if legacy:
                value = _legacy_table(value, created=mtime, source=source)
            entries[name] = entry_from_table(value)
        except BadEntry as exc:
            skipped.append((name, str(exc)))
            continue
        if stored is not None:
            seen[key] = Known(stored, entries[key])
    return ParsedCache(entries, tuple(skipped), legacy, tuple(changed), seen)
