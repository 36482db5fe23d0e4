"""The cache file's format: which one a file is in, and the bytes of its JSON and TOML
documents; what a parse of them reads is :mod:`chunktune._cache_parse`'s.

A document is ``{"schema": 1, "checksums": "sha256", "entries": {key: table}}``; each table
carries a checksum of its key and content (:mod:`chunktune._cache_checksums`).
``checksums`` declares them, ahead of every entry, so no cut of the file can lose it. What
cannot be read as a whole is :class:`UnusableCache`, which carries what its parse decoded
(:class:`Decoded`) for the salvage that follows; a newer schema's (:class:`NewerCache`) and
some other program's table (:class:`ForeignDocument`) are :class:`LeftAlone`. What a newer
chunktune of this schema added that this one cannot read is written back by
:func:`document` (:mod:`chunktune._cache_unread`). JSON is decoded an entry at a time
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

from ._cache_checksums import CHECKSUM_FIELD, CHECKSUMS, Known, stored_tables
from ._cache_entry import CacheEntry
from ._cache_json import Spans, json_by_entry
from ._cache_toml_text import entry_text
from ._cache_unread import NOTHING_UNREAD, Unread
from ._errors import CacheError
from ._shown import escaped_toml

__all__ = [
    "SCHEMA",
    "CacheFormat",
    "Decoded",
    "ForeignDocument",
    "LeftAlone",
    "Members",
    "NewerCache",
    "UnusableCache",
    "cache_format",
    "decode",
    "document",
    "encode",
    "encode_members",
    "encode_tables",
    "member_as_read",
    "suffix_format",
    "too_deep",
]

SCHEMA = 1

CacheFormat = Literal["json", "toml"]


class UnusableCache(Exception):
    """A document that cannot be read as a whole; the message completes "the file ..."."""

    decoded: Decoded | None = None
    """What :func:`~chunktune._cache_parse.parse_cache` made of the bytes it raised this
    for, for their salvage (None where no parse raised it: a read that found the same bytes
    again)."""

    def found_in(self, asked: CacheFormat) -> CacheFormat:
        """The format the bytes decoded in, the one to salvage them in: the other one where
        a machine whose settings disagree wrote them (in ``asked`` they are no table)."""
        decoded = self.decoded
        return decoded.fmt if decoded is not None and decoded.whole else asked


class LeftAlone(UnusableCache):
    """A document to be left as it is, neither read nor written nor moved aside."""


class NewerCache(LeftAlone):
    """A document of a newer schema: another chunktune's cache, to be left as it is."""


class ForeignDocument(LeftAlone):
    """A table with none of a cache's keys: some other program's file, named by mistake."""


@attrs.frozen(eq=False)
class Decoded:
    """What a parse made of bytes it found unusable, for the salvage of those bytes.

    A cache file that cannot be used as it is goes aside, or is served read-only, with the
    entries :func:`chunktune._cache_salvage.salvage` finds whole in the same bytes, right
    after the read that found it unusable. Salvage starts from the document as a whole (a
    file that decodes keeps every entry whose checksum matches), and TOML decodes slowly
    (1.5 s for 8.6 MiB, against 33 ms as JSON): so the read hands on what it decoded, or
    that the bytes did not decode, and the salvage of equal bytes takes it instead of
    decoding them again; with it, the entries the read built of the tables whose checksum
    matched (0.85 s for 8 MiB of TOML), which the salvage takes for tables of those very
    checksums. Carried by the read's own result (:attr:`UnusableCache.decoded`,
    :attr:`~chunktune._cache_parse.ParsedCache.decoded`, then the file's
    :class:`~chunktune._cache_parsed.Broken`), never by the process: another thread's read
    of other bytes cannot replace it.
    """

    raw: bytes
    fmt: CacheFormat
    whole: bool
    """Whether ``raw`` decoded as ``fmt`` (:func:`decode` raised UnusableCache if not)."""
    document: Any = None
    """What ``raw`` decoded to (None if it did not)."""
    built: Mapping[str, Known] = attrs.field(factory=dict)
    """The entries read of its tables whose checksum matched, by key."""

    def of(self, raw: bytes, fmt: CacheFormat) -> bool:
        """Whether these are ``raw``'s decoding as ``fmt``: equal bytes decode alike (a move
        aside reads them again, from the name aside)."""
        return self.fmt == fmt and (self.raw is raw or self.raw == raw)


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


def decode(raw: bytes, fmt: CacheFormat, *, spans: Spans | None = None) -> Any:
    """The document in ``raw`` (JSON: ``spans`` filled as :func:`json_by_entry` fills it).

    Raises:
        UnusableCache: it is not UTF-8 (TOML) or not valid JSON/TOML, nests too deeply,
            or (TOML) does not end with a line break.
    """
    try:
        doc = tomllib.loads(raw.decode()) if fmt == "toml" else json_by_entry(raw, spans)
    except RecursionError:
        raise UnusableCache(too_deep(fmt)) from None
    except ValueError as exc:  # JSONDecodeError, TOMLDecodeError and UnicodeDecodeError
        raise UnusableCache(f"does not parse as {fmt.upper()}: {exc}") from None
    if fmt == "toml" and raw and not raw.endswith(b"\n"):
        # TOML closes nothing at its end: a copy cut short mid-line still parses, its last
        # value cut ("chunk_size = 1" of 16). Every file chunktune writes ends in a newline.
        raise UnusableCache("ends inside a line, as a file cut short does")
    return doc


def too_deep(fmt: CacheFormat) -> str:
    """What a document nested too deeply to parse is (completing "the file ...")."""
    return f"is nested too deeply to parse as {fmt.upper()}"


def encode(entries: Mapping[str, CacheEntry], fmt: CacheFormat) -> bytes:
    """The document for ``entries``, keys sorted, each entry with its checksum.

    The declaration comes before the entries in both formats (JSON sorts it first), so a
    file cut anywhere that still holds an entry still declares them checksummed.
    """
    return encode_tables(stored_tables(entries), fmt)


Members = dict[str, tuple[object, str]]
"""Each key's text in a document, by key, and what it was made of: the table
:func:`encode_members` encoded, or whatever stands for an entry's text kept as it was read
(:func:`member_as_read`)."""

# JSON: the C encoder (json.dumps with an indent runs the pure-Python one, about 0.1 ms an
# entry), ASCII only as json.dumps writes it, keys sorted
_JSON_ENTRY = json.JSONEncoder(sort_keys=True, separators=(", ", ": "))


def _member(key: str, table: Mapping[str, Any], fmt: CacheFormat) -> str:
    """One entry's text in the document: a JSON member on a line of its own, or a TOML
    entry's header and sub-tables."""
    if fmt == "toml":
        # tomli_w leaves a bidi override or a zero-width space raw in outside text (a
        # signature, a host): escaped as JSON escapes it, the file reads back the same
        # and a terminal or editor shows it as written
        text = entry_text(key, table)  # tomli_w's very bytes, a tenth of its time
        return escaped_toml(tomli_w.dumps({"entries": {key: table}}) if text is None else text)
    return f"  {_JSON_ENTRY.encode(key)}: {_JSON_ENTRY.encode(table)}"


def encode_tables(tables: Mapping[str, Mapping[str, Any]], fmt: CacheFormat) -> bytes:
    """The document for the tables :func:`stored_tables` made, as :func:`encode` writes it."""
    return document(encode_members(tables, fmt), fmt)


def encode_members(
    tables: Mapping[str, Mapping[str, Any]], fmt: CacheFormat, earlier: Members | None = None
) -> Members:
    """Each entry's text in the document, keys sorted; a key whose table is the very object
    of ``earlier`` (an earlier call's) reuses its text, so a rewrite of a large cache
    converts only the tables made afresh."""
    earlier = earlier or {}
    texts: Members = {}
    for key, table in sorted(tables.items()):
        seen = earlier.get(key)
        texts[key] = (table, seen[1] if seen and seen[0] is table else _member(key, table, fmt))
    return texts


def member_as_read(text: str, span: tuple[int, int], key: str, checksum: str) -> str | None:
    """The text of ``key``'s entry in a rewritten JSON document, made of the table at
    ``span`` (:data:`chunktune._cache_json.Spans`) of a document's ``text``, if that table
    carries ``checksum``; else None.

    The table's checksum matched when the document was parsed, so it is the entry read:
    encoded again it needs no conversion or hashing. It is encoded, not copied as it
    stands: the same checksum is the same canonical table, so its text depends on neither
    how the file laid it out (keys unsorted, other escapes, ``1.7e9`` for ``1700000000.0``,
    one field a line) nor which process writes it (one that wrote the entry writes the
    table it made, which encodes to these very bytes).
    """
    table = json.loads(text[span[0] : span[1]])
    if not isinstance(table, dict) or table.get(CHECKSUM_FIELD) != checksum:
        return None
    return _member(key, table, "json")


def document(members: Members, fmt: CacheFormat, unread: Unread = NOTHING_UNREAD) -> bytes:
    """The document of :func:`encode_members`' texts, and of what ``unread`` holds (a newer
    chunktune's top-level keys, and its entries under keys ``members`` does not hold),
    written as it was read; keys sorted.

    JSON: each entry on one line, indented by two spaces, its table compact (salvage finds
    entries by that indent: :mod:`chunktune._cache_salvage`), the rest as
    ``json.dumps(indent=1)`` lays it out; TOML as ``tomli_w`` writes the whole document.
    """
    kept = {k: t for k, t in unread.entries.items() if k not in members}
    if kept:
        members = dict(sorted({**members, **encode_members(kept, fmt)}.items()))
    texts = [text for _, text in members.values()]
    if fmt == "toml":
        head = f'schema = {SCHEMA}\nchecksums = "{CHECKSUMS}"\n'
        if unread.top:  # tomli_w puts plain values first, as they must come before a table
            head += escaped_toml(tomli_w.dumps(dict(unread.top)))
        return (head + "\n" + ("\n".join(texts) if texts else "[entries]\n")).encode()
    body = "{\n" + ",\n".join(texts) + "\n }" if texts else "{}"
    top = "".join(
        f" {_JSON_ENTRY.encode(k)}: {_JSON_ENTRY.encode(v)},\n"
        for k, v in sorted(unread.top.items())
    )
    # "checksums" sorts ahead of "entries", as the declaration must come (see encode)
    return (
        f'{{\n "checksums": "{CHECKSUMS}",\n "entries": {body},\n{top} "schema": {SCHEMA}\n}}\n'
    ).encode()
