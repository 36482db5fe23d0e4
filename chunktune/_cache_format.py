"""The cache file's format: one parser and one encoder for its JSON and TOML documents.

A document is ``{"schema": 1, "entries": {key: table}}``; each table is read and
written by :mod:`chunktune._cache_entry`, every field checked, and an entry that
fails is skipped and named, never served. A document that does not decode, ends inside
a line (TOML cut short), or is of the wrong shape (not a table, no schema, a newer schema,
``entries`` not a table), is :class:`UnusableCache`; the caller moves it aside or reports
it, except a newer schema's (:class:`NewerCache`), which another chunktune still uses.
The older tuner's flat JSON cache (schema 0) goes through the same validation.
"""

from __future__ import annotations

import json
import re
import tomllib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Literal, cast

import attrs
import tomli_w

from ._cache_entry import (
    NATIVE,
    BadEntry,
    CacheEntry,
    entry_from_table,
    entry_to_table,
)
from ._errors import CacheError
from ._validators import shown

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
    raise CacheError(f"cache format {format!r} is not json or toml")


# ---------------------------------------------------------------- documents


_WS = re.compile(r"[ \t\n\r]*")
# the C parser of one JSON value at an index: what json.loads runs on the whole text
_SCAN = cast("Callable[[str, int], tuple[Any, int]]", vars(json.JSONDecoder())["scan_once"])


def _skip(text: str, at: int) -> int:
    """Past the whitespace at ``at``."""
    return cast("re.Match[str]", _WS.match(text, at)).end()


def _json_by_entry(raw: bytes) -> Any:
    """``json.loads(raw)``, the top-level object and its ``entries`` one member at a time.

    The C parser holds the GIL for a whole document (about 13 ms a MB here): read in a
    worker thread, a large cache would still stall the event loop that long. One call
    per entry lets the loop's thread run between them. Anything this does not follow
    (another top level, odd bytes) goes to ``json.loads``, which parses it or says why not.
    """
    try:
        text = raw.decode()
        start = _skip(text, 0)
        if text[start] != "{":
            raise ValueError("not an object")
        doc, end = _json_object(text, start, nested="entries")
        if _skip(text, end) != len(text):
            raise ValueError("extra data")
        return doc
    except (ValueError, IndexError, StopIteration):
        return json.loads(raw)


def _json_object(text: str, at: int, *, nested: str | None) -> tuple[dict[str, Any], int]:
    """The object at ``text[at] == "{"`` and where it ends; member ``nested`` member by member."""
    scan = _SCAN
    out: dict[str, Any] = {}
    at = _skip(text, at + 1)
    if text[at] == "}":
        return out, at + 1
    while True:
        if text[at] != '"':
            raise ValueError("expected a name")
        key, at = scan(text, at)
        at = _skip(text, at)
        if text[at] != ":":
            raise ValueError("expected ':'")
        at = _skip(text, at + 1)
        if key == nested and text[at] == "{":
            out[key], at = _json_object(text, at, nested=None)
        else:
            out[key], at = scan(text, at)
        at = _skip(text, at)
        if text[at] == "}":
            return out, at + 1
        if text[at] != ",":
            raise ValueError("expected ','")
        at = _skip(text, at + 1)


def decode(raw: bytes, fmt: CacheFormat) -> Any:
    """The document in ``raw``.

    Raises:
        UnusableCache: it is not UTF-8 (TOML) or not valid JSON/TOML, nests too deeply,
            or (TOML) does not end with a line break.
    """
    try:
        doc = tomllib.loads(raw.decode()) if fmt == "toml" else _json_by_entry(raw)
    except RecursionError:
        raise UnusableCache(f"is nested too deeply to parse as {fmt.upper()}") from None
    except ValueError as exc:  # JSONDecodeError, TOMLDecodeError and UnicodeDecodeError
        raise UnusableCache(f"does not parse as {fmt.upper()}: {exc}") from None
    if fmt == "toml" and raw and not raw.endswith(b"\n"):
        # TOML closes nothing at its end: a copy cut short mid-line still parses, its last
        # value cut ("chunk_size = 1" of 16). Every file chunktune writes ends in a newline.
        raise UnusableCache("ends inside a line, as a file cut short does")
    return doc


def encode(entries: Mapping[str, CacheEntry], fmt: CacheFormat) -> bytes:
    """The document for ``entries``, keys sorted."""
    doc = {"schema": SCHEMA, "entries": {k: entry_to_table(e) for k, e in sorted(entries.items())}}
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


def parse_cache(raw: bytes, fmt: CacheFormat, *, mtime: float, source: str) -> ParsedCache:
    """Parse a chunktune cache, or an older tuner's flat JSON cache, every entry validated.

    ``mtime`` (Unix seconds) dates the older tuner's entries, which carry no date;
    ``source`` names the file in their reason. Keys of the older tuner's entries
    become ``legacy-<key>``: they hashed too little to be trusted for a hit, but the
    evidence is kept, listed and exported.

    Raises:
        UnusableCache: the document does not decode or is of the wrong shape.
        NewerCache: (an UnusableCache) the document has a newer schema.
    """
    doc = decode(raw, fmt)
    if not isinstance(doc, dict):
        raise UnusableCache("is not a cache: its top level is not a table")
    entries: dict[str, CacheEntry] = {}
    skipped: list[tuple[str, str]] = []
    legacy = _is_legacy(doc)
    if legacy:
        tables = doc.items()
    else:
        schema = doc.get("schema")
        if type(schema) is not int or schema < 1:  # chunktune's schemas count from 1
            raise UnusableCache(
                "is neither a chunktune cache nor an older tuner's JSON cache "
                f"(schema {shown(schema)})"
            )
        if schema > SCHEMA:
            raise NewerCache(
                f"has cache schema {schema}, newer than this chunktune's {SCHEMA}; "
                "upgrade chunktune to read it"
            )
        table = doc.get("entries", {})
        if not isinstance(table, dict):
            raise UnusableCache(f"is not a cache: its entries, {shown(table)}, are not a table")
        tables = table.items()
    for key, value in tables:
        name = f"{LEGACY_PREFIX}{key}" if legacy else key
        try:
            if legacy:
                value = _legacy_table(value, created=mtime, source=source)
            entries[name] = entry_from_table(value)
        except BadEntry as exc:
            skipped.append((name, str(exc)))
    return ParsedCache(entries, tuple(skipped), legacy)
