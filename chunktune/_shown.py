"""How values are shown in messages: a bounded repr, or as a JSON or TOML file spells them.

Every message that quotes a value a user gave (a setting, a path, a trace's field, a
command-line word) shows it through here, bounded in length and depth whatever the
value, and never cut inside an escape.
"""

from __future__ import annotations

import datetime
import json
import math
import os
import re
import reprlib
import unicodedata
from collections.abc import Callable, Mapping, Sequence
from itertools import islice
from typing import TypeGuard

__all__ = [
    "bound",
    "digits",
    "escaped_toml",
    "first_units",
    "jsoned",
    "plural",
    "shown",
    "shown_file",
    "shown_line",
    "shown_one",
    "shown_path",
    "shown_some",
    "spelled",
    "toml_key",
    "type_named",
    "unprinted",
]


# one unit of a JSON or Python repr text: an escape whole (a JSON surrogate pair's two
# together), else one character; read from the start, so `\\u0041` is `\\` then `u0041`
_UNIT = re.compile(
    r"\\u[dD][89abAB][0-9a-fA-F]{2}\\u[dD][c-fC-F][0-9a-fA-F]{2}"
    r"|\\(?:x[0-9a-fA-F]{2}|u[0-9a-fA-F]{4}|U[0-9a-fA-F]{8}|.)|.",
    re.DOTALL,
)


def _cut(text: str, head: int, tail: int, fill: str = "...") -> str:
    """``text``'s first ``head`` and last ``tail`` characters around ``fill``, fewer where
    a cut would split an escape (``\\u00e9``, ``\\"``, ``\\x00``): half of one reads as
    another character, or as a broken string."""
    units = _UNIT.findall(text)
    front, size = 0, 0
    while front < len(units) and size + len(units[front]) <= head:
        size += len(units[front])
        front += 1
    back, size = len(units), 0
    while back > front and size + len(units[back - 1]) <= tail:
        back -= 1
        size += len(units[back])
    return "".join(units[:front]) + fill + "".join(units[back:])


def digits(x: int) -> int:
    """How many decimal digits ``x`` has (its sign not counted), found without writing it out.

    Python refuses to write an int of more than ``sys.get_int_max_str_digits()`` digits
    (ValueError); this is arithmetic only, exact at any size.
    """
    a = abs(x)
    count = max(1, int(a.bit_length() * 0.30102999566398120))  # log10(2): off by one at most
    while a >= 10**count:
        count += 1
    while count > 1 and a < 10 ** (count - 1):
        count -= 1
    return count


def _long_int(x: int, size: int) -> str:
    """``x`` as reprlib cuts a long int (head, ``...``, tail: ``size`` characters), without
    writing all of it: an int past Python's int-to-str limit has no repr at all."""
    head = max(0, (size - 3) // 2)
    tail = max(0, size - 3 - head)
    a, sign = abs(x), "-" if x < 0 else ""
    lead = a // 10 ** (digits(a) - (head - len(sign)))
    return f"{sign}{lead}...{a % 10**tail:0{tail}d}"


class _Repr(reprlib.Repr):
    """``reprlib``'s bounds, but a long string or object is cut between escapes, not in one,
    and an int too long for Python to write out is cut too, not an error."""

    def repr_int(self, x: int, level: int) -> str:
        try:
            return super().repr_int(x, level)
        except ValueError:  # past sys.get_int_max_str_digits(): repr(x) itself refuses
            return _long_int(x, self.maxlong)

    def repr_str(self, x: str, level: int) -> str:
        text = repr(x[: self.maxstring])
        if len(text) <= self.maxstring:
            return text
        head = max(0, (self.maxstring - 3) // 2)
        tail = max(0, self.maxstring - 3 - head)
        return _cut(repr(x[:head] + x[len(x) - tail :]), head, tail, self.fillvalue)

    def repr_instance(self, x: object, level: int) -> str:
        try:
            text = repr(x)
        except Exception:  # a broken __repr__: reprlib's stand-in, as before
            return super().repr_instance(x, level)
        if len(text) <= self.maxother:
            return text
        head = max(0, (self.maxother - 3) // 2)
        return _cut(text, head, max(0, self.maxother - 3 - head), self.fillvalue)


_repr = _Repr()
_repr.maxstring = _repr.maxother = 60


def shown(value: object) -> str:
    """A repr for messages, bounded in length and depth whatever the value (deep, huge)."""
    return _repr.repr(value)


def jsoned(value: object) -> str:
    """``value`` for a message as a JSON file spells it (``true``, ``"8"``, ``null``).

    Bounded in length as :func:`shown` is; what JSON cannot spell (or a document too
    deep to write) falls back to :func:`shown`. A trace file's values are shown this way.
    """
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError, RecursionError):
        return shown(value)
    return text if len(text) <= 60 else _cut(text, 28, 28)


_TOML_ESCAPES = {"\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r"}
_TOML_ESCAPES.update({'"': '\\"', "\\": "\\\\"})
_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")


def _toml_string(text: str) -> str:
    """``text`` as a TOML basic string: double quotes, control characters escaped."""
    return '"' + "".join(_TOML_ESCAPES.get(c) or _toml_char(c) for c in text) + '"'


# control (C0, DEL, C1), format (a bidi override) and line or paragraph separators: written
# raw, they break a message's line or reorder what follows it on a terminal
_UNPRINTED = frozenset({"Cc", "Cf", "Zl", "Zp"})


def _toml_char(c: str) -> str:
    if unicodedata.category(c) not in _UNPRINTED:
        return c
    return f"\\u{ord(c):04X}" if ord(c) <= 0xFFFF else f"\\U{ord(c):08X}"


def escaped_toml(document: str) -> str:
    """A TOML document for a terminal, reading back the same: each character inside its
    strings that would not print as written (a bidi override, which TOML writers leave raw)
    escaped as TOML escapes it. Its lines' own newlines stay."""
    # a TOML cache file is written through here whole: a line str.isprintable() passes
    # (it fails every control, format and separator character) needs no look at each one,
    # nor a document whose lines all pass, as nearly all do
    if document.replace("\n", "").isprintable():
        return document
    return "\n".join(
        line if line.isprintable() else "".join(map(_toml_char, line))
        for line in document.split("\n")
    )


def unprinted(text: str) -> str | None:
    """The first character of ``text`` that a terminal would not print as written (a
    control, format or line-separator character: a newline, an escape, a bidi override),
    as ``U+000A``; None when every character prints."""
    for c in text:
        if unicodedata.category(c) in _UNPRINTED:
            return f"U+{ord(c):04X}"
    return None


def shown_path(text: str) -> str:
    """A path (or any outside text a line shows: a custom signature's names and values, an
    imported entry's host) for a message, whole: as written where every character prints,
    else as TOML spells it (quoted, each control character escaped: ``"a\\u0000b.toml"``),
    so that a NUL, a newline or an escape sequence in a name neither cuts the message's line
    nor acts on the terminal. Already shown, it stays as it is."""
    return text if unprinted(text) is None else _toml_string(text)


def shown_file(path: str | os.PathLike[str]) -> str:
    """A file's path (the cache, a lock, a variable's value) for a logged line:
    :func:`shown_path` of it, a name's bytes that are no UTF-8 as their escapes, so that a
    log handler writing UTF-8 strictly (a JSON log file) can write it."""
    return shown_path(os.fspath(path).encode("utf-8", "backslashreplace").decode("utf-8"))


LINE_CHARS = 200
"""The most characters of outside text (an exception's message) that one line shows."""


def first_units(text: str, limit: int) -> str:
    """Escaped ``text``'s first ``limit`` characters, fewer where the cut would split an
    escape (``\\u001b`` cut to ``\\u``): for a column that ends a long value in ``…``."""
    return _cut(text, limit, 0, fill="")


def shown_line(text: str, limit: int = LINE_CHARS) -> str:
    """Outside text (a workload's exception's message) for a one-line message: escaped as
    :func:`shown_path` escapes it, so that a newline cannot split the line nor an escape
    sequence act on the terminal, and cut to its first and last characters around ``...``
    where longer than ``limit``, never inside an escape (a traceback logged holds it whole)."""
    line = shown_path(text)
    if len(line) <= limit:
        return line
    head = max(0, (limit - 3) * 2 // 3)
    return _cut(line, head, max(0, limit - 3 - head))


def shown_one(value: object) -> str:
    """:func:`shown` on one line: a repr of an object's own (anyone's text: a newline, an
    escape sequence) escaped and bounded as :func:`shown_line` shows it; a repr that prints
    as written (every plain value's) exactly as :func:`shown` writes it, not cut again."""
    text = shown(value)
    # shown() bounds a plain value's repr already (a list of six long strings runs past
    # shown_line's limit, and a message naming it read the same before)
    return text if unprinted(text) is None else shown_line(text)


def type_named(value: object) -> str:
    """The name of ``value``'s type for a message, escaped and bounded as :func:`shown_line`
    shows it: a class's name is anyone's text (``type("a\\nb", (), {})``)."""
    return shown_line(type(value).__name__)


class _TomlRepr(_Repr):
    """``reprlib``'s bounds on length and depth, with values spelled as TOML spells them.

    A settings file's user wrote ``true`` and ``"0.03"``; Python's ``True`` and ``'0.03'``
    would send them looking for something they never wrote. What TOML cannot hold (None,
    an object from a constructor call) keeps its repr.
    """

    def repr_bool(self, x: bool, level: int) -> str:
        return "true" if x else "false"

    def repr_float(self, x: float, level: int) -> str:
        if math.isnan(x):
            return "nan"
        return repr(x) if math.isfinite(x) else ("inf" if x > 0 else "-inf")

    def repr_str(self, x: str, level: int) -> str:
        if len(x) <= self.maxstring:
            return _toml_string(x)
        head = max(0, (self.maxstring - 3) // 2)
        tail = max(0, self.maxstring - 3 - head)
        # cut after escaping, each escape whole: an escaped character is up to 10 long
        return _cut(_toml_string(x[:head] + x[len(x) - tail :]), head + 1, tail + 1, self.fillvalue)

    def repr_tuple(self, x: tuple[object, ...], level: int) -> str:
        # a TOML array; one past maxlist keeps the "..." that says more were left out
        return self.repr_list(list(islice(x, self.maxlist + 1)), level)

    def repr_dict(self, x: Mapping[object, object], level: int) -> str:
        if not x:
            return "{}"
        if level <= 0:
            return "{" + self.fillvalue + "}"
        pieces = [
            f"{self._key(key, level - 1)} = {self.repr1(value, level - 1)}"
            for key, value in islice(x.items(), self.maxdict)
        ]
        if len(x) > self.maxdict:
            pieces.append(self.fillvalue)
        return "{" + ", ".join(pieces) + "}"

    def _key(self, key: object, level: int) -> str:
        return key if _bare(key, self.maxstring) else self.repr1(key, level)

    def repr_instance(self, x: object, level: int) -> str:
        # what TOML cannot hold keeps its repr: an object code handed in, whose repr is
        # anyone's text (a newline, an escape sequence), escaped and bounded as shown_one's
        text = super().repr_instance(x, level)
        return text if unprinted(text) is None else shown_line(text, self.maxother)

    def repr_date(self, x: datetime.date | datetime.time, level: int) -> str:
        return x.isoformat()  # a TOML date, time or date-time is written in ISO 8601

    repr_datetime = repr_time = repr_date


_toml = _TomlRepr()
_toml.maxstring = _toml.maxother = 60


def _bare(key: object, limit: int) -> TypeGuard[str]:
    """Whether ``key`` is shown bare: a TOML bare key (ASCII letters, digits, ``_`` and
    ``-``) of at most ``limit`` characters. A longer one is cut as a long string is, quoted:
    a bare key holds no ``...``, and ``a...b`` would read as a dotted path."""
    return isinstance(key, str) and len(key) <= limit and _BARE_KEY.fullmatch(key) is not None


def plural(count: int, word: str, many: str | None = None) -> str:
    """``1 env``, ``2 envs``: a count and its noun, singular for one; ``many`` is the
    plural where it is not the noun and an ``s`` (``1 process``, ``2 processes``)."""
    if count == 1:
        return f"{count} {word}"
    return f"{count} {word}s" if many is None else f"{count} {many}"


def spelled(value: object) -> str:
    """``value`` for a message as a TOML file spells it (``true``, ``"0.03"``, ``[1, "x"]``).

    Bounded in length and depth as :func:`shown` is. Settings values, policy names and
    the command line's words are shown this way; a repr is kept for what only Python
    code can pass (an object where a path belongs), escaped where it would not print as
    written (a newline, an escape sequence) as :func:`shown_line` escapes outside text.
    """
    return _toml.repr(value)


def toml_key(key: object) -> str:
    """One key of a TOML path (``policies.mine.margin``) as TOML spells it, for a problem's
    path that a user can paste: bare where TOML allows it bare (``margin``), else quoted
    with TOML's escapes (``"a.b"``, ``""``, ``"a\\u001Bb"``); one of more than 60 characters
    cut to its first and last characters around ``...`` as :func:`spelled` cuts a string.

    Anything but a string (a list's index, a key given in code) is :func:`spelled`.
    """
    return key if _bare(key, _toml.maxstring) else spelled(key)


def shown_some(
    values: Sequence[object], limit: int, *, show: Callable[[object], str] = shown
) -> str:
    """The first ``limit`` of ``values`` for a message, the rest counted: ``'a' and 3 more``;
    each as ``show`` shows it (:func:`spelled` for a setting's values)."""
    listed = ", ".join(show(value) for value in values[:limit])
    return listed + (f" and {len(values) - limit} more" if len(values) > limit else "")


def bound(x: float) -> str:
    """A limit for a message, exactly: ``9223372036854775807``, ``0.1``, ``1`` for 1.0.

    ``%g`` printed the largest seed as ``9.22337e+18``, a number no one can type back.
    """
    if isinstance(x, int):
        return str(x)
    if x.is_integer() and abs(x) < 1e16:
        return str(int(x))
    return spelled(x)
