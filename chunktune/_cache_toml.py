"""The cache document's TOML decoded around the entries this process wrote, where their text
stands in it as written: those are not parsed again.

TOML decodes slowly (10k entries, 17.6 MB: several seconds here, against a fraction of one
as JSON), and a writer that shares the cache with another process parses the whole file
under the write lock before each put, since the other one wrote it last. Almost all of it
is text this writer wrote itself, each entry's as
:func:`~chunktune._cache_format.encode_members` made it: an entry whose text stands in the
document exactly as written is the entry this process holds for it, and only the rest is
decoded, each such entry's text replaced by its header line alone.

Why the rest decodes to what the whole document decodes to, but for those entries' tables:
with no multi-line string in the document (none is written; a document holding one is
decoded whole), no line break falls inside a string, and a line that starts with
``[entries.`` inside an array fails to decode either way. So an entry's text that starts a
line is the whole of that entry's table and sub-tables as the decoder reads them, except
what follows it or is written elsewhere for them; its header line stays where it was, and
what is left is decoded: anything else under that entry (a line after its text, a sub-table
later, the entry twice, ``entries`` defined some other way) is there refused as the whole
document is, or shows up under its header, which must hold nothing, else the document is
decoded whole.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Mapping
from typing import Any

from ._cache_checksums import CHECKSUM_FIELD, Known

__all__ = ["Written", "toml_reusing", "written_texts"]

Written = Mapping[str, tuple[str, Known]]
"""Each entry's text as this process last wrote it, and the known entry it was written for
(that the text decodes to a table of that checksum), by key."""

# a line that may be an entry's header; what follows "entries." is matched as a whole line
_HEADER = re.compile(r"^\[entries\.[^\n]*\n", re.MULTILINE)


def written_texts(members: Mapping[str, tuple[object, str]], known: Mapping[str, Known]) -> Written:
    """The entries of ``members`` (the texts of the file last written) whose text was made
    of the very table ``known`` holds for the key, of that known checksum: a parse of that
    text reads ``known``'s entry for it (:func:`~chunktune._cache_parse.parse_cache` reuses
    a known entry for a table of its checksum)."""
    out: dict[str, tuple[str, Known]] = {}
    for key, (made_of, text) in members.items():
        seen = known.get(key)
        if (
            seen is not None
            and seen.stored is not None
            and seen.stored is made_of
            and seen.stored.get(CHECKSUM_FIELD) == seen.checksum
        ):
            out[key] = (text, seen)
    return out


def toml_reusing(raw: bytes, written: Written) -> tuple[Any, dict[str, Known]] | None:
    """What ``raw`` decodes to as TOML, but each entry of ``written`` whose text stands in
    it as written an empty table, with those entries by key; None where none does, or
    where the document is not one this reads so (not UTF-8, not ending in a line break,
    holding a multi-line string, or what is left not decoding as it must): the caller
    decodes it whole, which says what is wrong with it."""
    if not written or not raw.endswith(b"\n"):
        return None
    try:
        text = raw.decode()
    except UnicodeDecodeError:
        return None
    if '"""' in text or "'''" in text:
        return None
    heads = {member[: member.index("\n") + 1]: key for key, (member, _) in written.items()}
    places = []
    for match in _HEADER.finditer(text):
        key = heads.get(match.group())
        if key is not None and text.startswith(written[key][0], match.start()):
            places.append((match.start(), match.start() + len(written[key][0]), key))
    if not places:
        return None
    pieces, last = [], 0
    for at, end, key in places:
        head = len(written[key][0].partition("\n")[0]) + 1
        pieces += [text[last:at], text[at : at + head]]
        last = end
    pieces.append(text[last:])
    try:
        doc = tomllib.loads("".join(pieces))
    except (ValueError, RecursionError):
        return None
    tables = doc["entries"]  # each place left its header: a table, or an array's ([[entries]])
    if type(tables) is not dict:
        return None
    reused = {key: written[key][1] for _, _, key in places}
    for key in reused:
        table = tables.get(key)
        if type(table) is not dict or table:
            return None  # defined again elsewhere, or not where it was: decode it whole
    return doc, reused
