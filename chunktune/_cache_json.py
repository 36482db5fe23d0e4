"""The cache document's JSON, decoded one entry at a time so that other threads run between.

The C parser holds the GIL for a whole document (about 13 ms a MB here): read in a
worker thread, a large cache would still stall the event loop that long. This module
hands it the top-level object and its ``entries`` one member at a time; what a document
decodes to does not change, only how long the GIL is held at once.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any, cast

__all__ = ["Spans", "json_by_entry"]

Spans = dict[str, tuple[int, int]]
"""Where the value of each member of ``entries`` stands in the decoded text (its start and
end; of a repeated key, the last one's, the one read), however it is laid out. A rewrite of
an entry left as it was encodes the table found there again instead of converting the entry."""

_WS = re.compile(r"[ \t\n\r]*")
# the C parser of one JSON value at an index: what json.loads runs on the whole text
_SCAN = cast("Callable[[str, int], tuple[Any, int]]", vars(json.JSONDecoder())["scan_once"])


def _skip(text: str, at: int) -> int:
    """Past the whitespace at ``at``."""
    return cast("re.Match[str]", _WS.match(text, at)).end()


def json_by_entry(raw: bytes, spans: Spans | None = None) -> Any:
    """``json.loads(raw)``, the top-level object and its ``entries`` one member at a time.

    One call per entry lets the loop's thread run between them. Anything this does not
    follow (another top level, odd bytes) goes to ``json.loads``, which parses it or
    says why not. ``spans``, if given, is filled with :data:`Spans` of ``raw.decode()``
    (left empty where ``json.loads`` parsed the document).

    Raises:
        ValueError: (``json.JSONDecodeError`` or ``UnicodeDecodeError``) as ``json.loads``.
        RecursionError: as ``json.loads``, on a document nested too deeply.
    """
    try:
        text = raw.decode()
        start = _skip(text, 0)
        if text[start] != "{":
            raise ValueError("not an object")
        doc, end = _json_object(text, start, nested="entries", spans=spans)
        if _skip(text, end) != len(text):
            raise ValueError("extra data")
        return doc
    except (ValueError, IndexError, StopIteration):
        if spans is not None:
            spans.clear()
        return json.loads(raw)


def _json_object(
    text: str, at: int, *, nested: str | None, spans: Spans | None = None
) -> tuple[dict[str, Any], int]:
    """The object at ``text[at] == "{"`` and where it ends; member ``nested`` member by member
    (``spans``, if given: where the value of each of those members stands)."""
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
            out[key], at = _json_object(text, at, nested=None, spans=spans)
        else:
            begin = at
            out[key], at = scan(text, at)
            if spans is not None and nested is None:  # a member of ``entries``
                spans[key] = (begin, at)  # a repeated key: the last one counts, as read
        at = _skip(text, at)
        if text[at] == "}":
            return out, at + 1
        if text[at] != ",":
            raise ValueError("expected ','")
        at = _skip(text, at + 1)
