"""One cache entry's TOML text, as ``tomli_w`` writes it, made without ``tomli_w``.

A process's first write of a TOML cache it read encodes every entry (the last write's
texts are reused after that): ``tomli_w`` takes about 0.6 ms an entry, 6 of a 10k-entry
cache's 7.5 s, most of it in a generator per table and a loop over every character of
every string. An entry's table has a narrow shape: numbers, booleans, strings, arrays of
those, and tables of those (``timings_ms``, ``signature``). For that shape
:func:`entry_text` writes what ``tomli_w.dumps({"entries": {key: table}})`` writes, byte
for byte, with one regular expression a string and plain formatting; for anything else (a
newer chunktune's field holding a table in an array, a date, a subclass of ``int``, whose
``str`` may differ) it answers None and the caller asks ``tomli_w``. Every ``tomli_w`` from
0.1 (the declared floor) to 1.2 writes that shape alike: arrays one item a line, indented
by four spaces a level, with a trailing comma; a table's plain values before its
sub-tables, each sub-table after a blank line under its dotted header; strings in double
quotes, ``"``, ``\\`` and the control characters but tab escaped (``\\b \\n \\f \\r`` by
name, the others as ``\\u`` and four lowercase hex digits); keys bare where they are only
ASCII letters, digits, ``-`` and ``_``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

__all__ = ["entry_text"]

_ILLEGAL = re.compile(r'[\x00-\x08\x0a-\x1f\x7f"\\]')
_NAMED = {"\b": "\\b", "\n": "\\n", "\f": "\\f", "\r": "\\r", '"': '\\"', "\\": "\\\\"}
_BARE = re.compile(r"[A-Za-z0-9_-]+")
_INDENT = "    "


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    return _NAMED.get(char) or f"\\u{ord(char):04x}"


def _string(text: str) -> str:
    return '"' + _ILLEGAL.sub(_escape, text) + '"'


# the few names every entry repeats (its fields, ``native``, its chunk sizes), as written
_KEYS: dict[str, str] = {}


def _key(key: str) -> str:
    text = _KEYS.get(key)
    if text is None:
        text = key if _BARE.fullmatch(key) else _string(key)
        if len(_KEYS) < 4096:  # a fleet's hosts and models as keys would not repeat as often
            _KEYS[key] = text
    return text


def _literal(value: object, level: int) -> str | None:
    """``value`` as ``tomli_w`` writes a plain value, or None outside the narrow shape."""
    kind = type(value)
    if kind is str:
        return _string(value)  # type: ignore[arg-type]
    if kind is bool:
        return "true" if value else "false"
    if kind is int or kind is float:
        return str(value)
    if kind is list:
        if not value:
            return "[]"
        items = []
        for item in value:  # type: ignore[attr-defined]
            text = _literal(item, level + 1)
            if text is None:
                return None
            items.append(text)
        indent = _INDENT * (level + 1)
        return "[\n" + "".join(f"{indent}{text},\n" for text in items) + _INDENT * level + "]"
    return None  # a table in an array, a tuple, a date, a subclass: tomli_w's to write


def _table(table: Mapping[str, Any], name: str, out: list[str]) -> bool:
    """Append ``table``'s lines under the header ``name`` to ``out`` as ``tomli_w``'s
    ``gen_table_chunks`` yields them; False outside the narrow shape."""
    plain, tables = [], []
    for key, value in table.items():
        if type(key) is not str:
            return False
        if type(value) is dict:
            tables.append((key, value))
            continue
        kind = type(value)
        # the common cases first, inline: a call a value is a third of the time
        if kind is str:
            text: str | None = '"' + _ILLEGAL.sub(_escape, value) + '"'
        elif kind is int or kind is float:
            text = str(value)
        else:
            text = _literal(value, 0)
            if text is None:
                return False
        plain.append(f"{_key(key)} = {text}\n")
    said = bool(plain or not tables)
    if said:
        out.append(f"[{name}]\n")
        out += plain
    for key, value in tables:
        if said:
            out.append("\n")
        said = True
        if not _table(value, f"{name}.{_key(key)}", out):
            return False
    return True


def entry_text(key: str, table: Mapping[str, Any]) -> str | None:
    """``tomli_w.dumps({"entries": {key: table}})``, or None where ``table`` is not of the
    narrow shape (the caller then asks ``tomli_w``, which also raises what it raises)."""
    if type(key) is not str or type(table) is not dict:
        return None
    out: list[str] = []
    try:
        if not _table(table, f"entries.{_key(key)}", out):
            return None
    except (ValueError, RecursionError):  # an int too long for str(), too deep: as tomli_w
        return None
    return "".join(out)
