"""The whole entries of a cache file that no longer parses as a whole.

chunktune replaces its cache file atomically, so a broken file is damage from
outside: a disk that filled under another writer, a copy cut short, a hand edit.
Most of such a file is usually intact. Both formats as :func:`chunktune._cache_format.encode`
writes them put each entry in a block of its own: in JSON a member of ``entries``
on a line indented by two spaces, in TOML the ``[entries."key"]`` header and the
sub-tables under the same key. Each block is parsed alone, strictly (UTF-8 and all),
validated like any entry, and its checksum checked, so a block the damage touched is
dropped and the others are kept; none is repaired or guessed at. A block runs on to the
next block found: where damage hid that one's start (its line break, its header), the
lines of the block before it are read up to the first that does not read, and kept where
their checksum says they are whole. A file written before
checksums has none to check: there TOML's last entry is dropped too (a cut at a line's
end leaves it parsing, shorter), and so are the neighbours of a block whose header
broke. A file that parses as a whole and holds checksums (one altered entry made it
unusable) keeps each entry whose checksum matches, however it is laid out (by hand,
``jq .``). A file that decodes in neither format is read in the layout of the format
asked for, else (nothing found) of the other one: machines whose settings disagree
share a file. Any other file laid out otherwise yields what it yields, possibly nothing;
the caller keeps the original bytes either way.

What a newer chunktune of this schema wrote is carried as a usable file's read carries it
(:mod:`chunktune._cache_unread`): a whole entry this one cannot read (its checksum
matches), never served, is :attr:`Salvaged.unread`; an entry's fields this one does not
know, its table as read (:attr:`Salvaged.known`); keys beside ``entries`` only from a file
that decodes whole, since no checksum vouches for them in damaged bytes (a flipped byte
in ``schema`` would be kept for good as a key of its own).
"""

from __future__ import annotations

import json
import re
import tomllib
from collections.abc import Iterator, Mapping
from typing import Any

import attrs

from ._cache_checksums import CHECKSUM_FIELD, Known, altered
from ._cache_entry import BadEntry, CacheEntry
from ._cache_format import SCHEMA, CacheFormat, Decoded, UnusableCache, decode
from ._cache_parse import NewerTable, read_table, unread_top
from ._cache_unread import NOTHING_UNREAD, Unread

__all__ = ["Salvaged", "salvage", "salvaged"]

_JSON_MEMBER = re.compile(rb'^  "', re.M)
_JSON_SCHEMA = re.compile(rb'^ "schema": *(\d+)', re.M)
_JSON_CHECKSUMS = re.compile(rb'^ "checksums": ', re.M)
_TOML_HEADER = re.compile(rb"^\[entries\.", re.M)
# a header line as tomli_w writes it, whose entry a match names as TOML would read it: a
# bare key or a basic string without escapes or controls, plain sub-table names; any
# other line (a literal string, an escape, a comment, CRLF) is left to tomllib, since
# parsing each of some 30,000 header lines with it cost seconds
_PLAIN_HEADER = re.compile(
    rb'\[entries\.(?:"([^"\\\x00-\x1f\x7f]*)"|([A-Za-z0-9_-]+))(?:\.[A-Za-z0-9_-]+)*\]'
)
_DECODER = json.JSONDecoder()
_AT_LINE = re.compile(r"\(at line (\d+), column \d+\)$")  # where tomllib found a line broken


@attrs.frozen
class Salvaged:
    """What a damaged file's bytes hold whole, for its fresh copy."""

    entries: dict[str, CacheEntry]
    """The entries served, by key."""
    known: Mapping[str, Known] = attrs.field(factory=dict)
    """The served entries whose checksum matched, by key: a write of them keeps the table
    as read where a newer chunktune added fields to it."""
    unread: Unread = NOTHING_UNREAD
    """What a newer chunktune wrote that this one cannot read: the write keeps it."""


def salvage(raw: bytes, fmt: CacheFormat, decoded: Decoded | None = None) -> dict[str, CacheEntry]:
    """The entries of ``raw`` whose own block parses, validates and matches its checksum
    (:attr:`Salvaged.entries` of :func:`salvaged`). Never raises."""
    return salvaged(raw, fmt, decoded).entries


def salvaged(raw: bytes, fmt: CacheFormat, decoded: Decoded | None = None) -> Salvaged:
    """What ``raw`` holds whole: the entries whose own block parses, validates and matches
    its checksum, and what a newer chunktune wrote that this one cannot read.

    Checksums are required where the file declares them, or (its declaration damaged)
    where any block holds one, as every entry of a file chunktune wrote does. ``decoded``:
    what the read that found these bytes unusable made of them, taken instead of decoding
    them again where it is of bytes equal to ``raw`` (else ignored). Never raises.
    """
    whole = _checked_whole(raw, fmt, _reusable(decoded, raw, fmt))
    built: Mapping[str, Known] = {}
    top: Mapping[str, Any] = {}
    if whole is not None:
        (blocks, built, top), declared = whole, True
    else:
        blocks, declared = _blocks(raw, fmt)
        if not blocks:
            # laid out in the other format: a file a machine whose settings disagree wrote,
            # then cut short, decodes in neither (chunktune._cache_parse reads it whole)
            blocks, declared = _blocks(raw, "json" if fmt == "toml" else "toml")
    declared = declared or any(isinstance(t, dict) and "checksum" in t for _, t in blocks)
    kept: dict[str, CacheEntry] = {}
    known: dict[str, Known] = {}
    unread: dict[str, Any] = {}
    for key, table in blocks:
        if altered(key, table, declared=declared) is not None:
            continue
        try:
            read = read_table(key, table, built.get(key))
        except BadEntry:
            continue
        # a key met again (a block duplicated by hand) is what its last whole block holds
        for each in (kept, known, unread):
            each.pop(key, None)
        if isinstance(read, NewerTable):
            unread[key] = read.table
        elif isinstance(read, Known):
            kept[key], known[key] = read.entry, read
        else:
            kept[key] = read
    found = Unread(top, unread) if top or unread else NOTHING_UNREAD
    return Salvaged(kept, known, found)


def _blocks(raw: bytes, fmt: CacheFormat) -> tuple[list[tuple[str, Any]], bool]:
    """Each entry's block that parses alone, as laid out in ``fmt``, and whether the file
    declares checksums."""
    return _toml_blocks(raw) if fmt == "toml" else _json_blocks(raw)


def _reusable(decoded: Decoded | None, raw: bytes, fmt: CacheFormat) -> Decoded | None:
    """``decoded``, if it is what ``raw`` decodes to as ``fmt``; else None."""
    return decoded if decoded is not None and decoded.of(raw, fmt) else None


def _checked_whole(
    raw: bytes, fmt: CacheFormat, kept: Decoded | None
) -> tuple[list[tuple[str, Any]], Mapping[str, Known], Mapping[str, Any]] | None:
    """Every ``entries`` member of a file that parses as a whole and holds checksums, the
    entries the read that found it unusable built of its checksummed tables (``kept``,
    what that read decoded of these bytes, if any), and a newer chunktune's keys beside
    ``entries``; or None.

    Such a file is unusable only for an altered entry, and each other entry's checksum
    vouches for it wherever it sits: laid out anew (by hand, ``jq .``, on one line), its
    blocks are not where :func:`_json_blocks` looks. Without checksums, the layout's rules
    stand (a TOML file cut at a line's end parses as a whole).
    """
    built: Mapping[str, Known] = {}
    if kept is None:
        try:
            document = decode(raw, fmt)  # as a read of the cache parses it
        except UnusableCache:
            return None
    elif not kept.whole:
        return None
    else:
        document, built = kept.document, kept.built
    if not isinstance(document, dict) or not isinstance(document.get("entries"), dict):
        return None
    schema = document.get("schema")
    if type(schema) is int and schema > SCHEMA:
        return [], {}, {}
    tables = [(k, t) for k, t in document["entries"].items() if isinstance(t, dict)]
    if "checksums" not in document and not any("checksum" in t for _, t in tables):
        return None
    return tables, built, unread_top(document)


def _segments(raw: bytes, starts: list[int]) -> Iterator[bytes]:
    """The bytes from each start to the next."""
    if not starts:
        return
    for begin, end in zip(starts, [*starts[1:], len(raw)], strict=True):
        yield raw[begin:end]


def _text(segment: bytes) -> str | None:
    """``segment`` as UTF-8, or None."""
    try:
        return segment.decode()
    except UnicodeDecodeError:
        return None


def _utf8_head(segment: bytes) -> str:
    """``segment`` up to its first byte that is not UTF-8, as text."""
    try:
        return segment.decode()
    except UnicodeDecodeError as exc:
        return segment[: exc.start].decode()


def _json_blocks(raw: bytes) -> tuple[list[tuple[str, Any]], bool]:
    """Each ``"key": {...}`` member of ``entries`` that parses on its own, and whether
    the file declares checksums."""
    if any(int(m.group(1)) > SCHEMA for m in _JSON_SCHEMA.finditer(raw)):
        return [], False
    blocks = []
    for segment in _segments(raw, [m.start() for m in _JSON_MEMBER.finditer(raw)]):
        # up to a byte that is not UTF-8: a member runs on to the next one found, and damage
        # past its table (the next one's line break gone) leaves it whole
        text = _utf8_head(segment)
        try:
            key, at = _DECODER.raw_decode(text, 2)
            rest = text[at:].lstrip()
            value = rest[1:].lstrip()
            table, _ = _DECODER.raw_decode(value)
        except (ValueError, RecursionError):  # nested past Python's limit: damage too
            continue
        if rest.startswith(":") and isinstance(key, str) and isinstance(table, dict):
            blocks.append((key, table))
    return blocks, _JSON_CHECKSUMS.search(raw) is not None


def _toml_blocks(raw: bytes) -> tuple[list[tuple[str, Any]], bool]:
    """Each entry's tables, header and sub-tables, where all of them parse, and whether
    the file declares checksums.

    TOML reads a table cut short at a line's end, or missing a sub-table, as whole, and
    an entry with fields missing still validates (they read as unknown). An entry's
    checksum tells; in a file without checksums an entry is kept only if none of its
    blocks is damaged, no block next to one of its own lost its header (it may have
    been one of its sub-tables), and it is not the last in the file (where a cut would
    leave no trace).
    """
    # a file cut short ends inside a line: that line is lost either way, and left on the
    # last block it would make it parse as nothing (a cut header) or fail (a cut value)
    raw = raw[: raw.rfind(b"\n") + 1]
    starts = [m.start() for m in _TOML_HEADER.finditer(raw)]
    if not starts:
        return [], False
    preamble = _toml_table(raw[: starts[0]])
    schema = preamble.get("schema") if preamble is not None else None
    if type(schema) is int and schema > SCHEMA:
        return [], False
    declared = preamble is not None and "checksums" in preamble
    segments = list(_segments(raw, starts))
    keys = [_toml_key(segment) for segment in segments]
    groups: dict[str, list[bytes]] = {}
    for key, segment in zip(keys, segments, strict=True):
        if key is not None:
            groups.setdefault(key, []).append(segment)
    tables: dict[str, Any] = {}
    for key, parts in groups.items():
        table = _entry_table(key, parts)
        if table is None:
            # a header broken past this entry's last line (its next one's) runs that entry's
            # lines on into this one's last block: each block up to the first line that does
            # not read; only a checksum can tell the table whole then
            table = _entry_table(key, [_readable_head(part) for part in parts])
            if table is None or CHECKSUM_FIELD not in table:
                continue
        tables[key] = table
    if not (declared or any("checksum" in table for table in tables.values())):
        blocks = [(key, _text(segment)) for key, segment in zip(keys, segments, strict=True)]
        suspect = _suspect(blocks, preamble_broke=preamble is None)
        tables = {key: table for key, table in tables.items() if key not in suspect}
    return list(tables.items()), declared


def _entry_table(key: str, parts: list[bytes]) -> dict[str, Any] | None:
    """The table of ``key`` that its blocks ``parts``, parsed together, make; None if they
    are not UTF-8 or do not parse (or make none)."""
    text = _text(b"".join(parts))
    try:
        table = tomllib.loads(text)["entries"][key] if text is not None else None
    except (ValueError, RecursionError, KeyError):
        return None
    return table if isinstance(table, dict) else None


def _readable_head(segment: bytes) -> bytes:
    """``segment``'s lines before the first one that is not UTF-8 or does not parse."""
    segment = segment[: segment.rfind(b"\n", 0, len(_utf8_head(segment).encode())) + 1]
    try:
        tomllib.loads(segment.decode())
    except tomllib.TOMLDecodeError as exc:
        line = _error_line(exc)
        if line is None:
            return b""
        end = -1
        for _ in range(line - 1):
            end = segment.find(b"\n", end + 1)
            if end < 0:
                return b""
        return segment[: end + 1]
    except RecursionError:
        return b""
    return segment


def _error_line(exc: tomllib.TOMLDecodeError) -> int | None:
    """The line (from 1) where ``exc`` found the document broken, or None if it names none."""
    line = getattr(exc, "lineno", None)  # Python 3.14 on
    if isinstance(line, int):
        return line
    found = _AT_LINE.search(str(exc))
    return int(found.group(1)) if found is not None else None


def _suspect(
    blocks: list[tuple[str | None, str | None]], *, preamble_broke: bool
) -> set[str | None]:
    """The entries of a file without checksums that damage may have shortened unseen."""
    damaged = {key for key, text in blocks if text is None}
    # the first entry's header may be what broke the preamble: then the first block is one
    # of its sub-tables; a first block that opens with its own header is all of its entry
    if preamble_broke and not _opens_own_entry(blocks[0][1]):
        damaged.add(blocks[0][0])
    for i, (key, _) in enumerate(blocks):
        if key is None:
            damaged.update(blocks[j][0] for j in (i - 1, i + 1) if 0 <= j < len(blocks))
    damaged.add(blocks[-1][0])
    return damaged


def _opens_own_entry(text: str | None) -> bool:
    """Whether a block's ``text`` opens with its entry's own ``[entries."key"]`` header, not
    with a sub-table's (``[entries."key".timings_ms]``)."""
    names = _header_entries(text.encode()) if text is not None else None
    return names is not None and list(names.values()) == [{}]


def _toml_key(segment: bytes) -> str | None:
    """The entry a block's ``[entries."key"...]`` header names, or None if it does not parse."""
    plain = _PLAIN_HEADER.fullmatch(segment, 0, _line_end(segment))
    if plain is not None:
        return _text(plain.group(1) if plain.group(1) is not None else plain.group(2))
    names = _header_entries(segment)
    return next(iter(names), None) if names is not None and len(names) == 1 else None


def _line_end(segment: bytes) -> int:
    """Where ``segment``'s first line ends, its newline left out."""
    end = segment.find(b"\n")
    return len(segment) if end < 0 else end


def _header_entries(segment: bytes) -> dict[str, Any] | None:
    """The ``entries`` table that a block's first line, its header, makes; None if none."""
    names = (_toml_table(segment.partition(b"\n")[0]) or {}).get("entries")
    return names if isinstance(names, dict) else None


def _toml_table(segment: bytes) -> dict[str, Any] | None:
    """``segment`` parsed as TOML, or None."""
    text = _text(segment)
    try:
        return tomllib.loads(text) if text is not None else None
    except (ValueError, RecursionError):
        return None
