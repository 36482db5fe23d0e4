"""attrs validators whose messages say what was expected and what was given.

They guard the settings classes, so a bad value raises :class:`~chunktune.ConfigError`
(a ``ValueError``) whether it came from a file or from a constructor call.
"""

from __future__ import annotations

import datetime
import json
import math
import numbers
import os
import re
import reprlib
from collections.abc import Callable, Collection, Mapping, Sequence
from itertools import islice
from pathlib import Path
from typing import Any

import attrs

from ._errors import ConfigError

__all__ = [
    "boolean",
    "bound",
    "choice",
    "integer",
    "is_path",
    "jsoned",
    "model_file_problem",
    "number",
    "path_text",
    "plain_numbers",
    "positive_sizes",
    "record",
    "shown",
    "shown_some",
    "spelled",
    "text",
    "user_path",
]

Validator = Callable[[Any, "attrs.Attribute[Any]", Any], None]

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


class _Repr(reprlib.Repr):
    """``reprlib``'s bounds, but a long string or object is cut between escapes, not in one."""

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


def _toml_char(c: str) -> str:
    return f"\\u{ord(c):04X}" if ord(c) < 0x20 or ord(c) == 0x7F else c


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
        return _toml_string(x[:head])[:-1] + self.fillvalue + _toml_string(x[len(x) - tail :])[1:]

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
        if isinstance(key, str) and _BARE_KEY.fullmatch(key):
            return key
        return self.repr1(key, level)

    def repr_date(self, x: datetime.date | datetime.time, level: int) -> str:
        return x.isoformat()  # a TOML date, time or date-time is written in ISO 8601

    repr_datetime = repr_time = repr_date


_toml = _TomlRepr()
_toml.maxstring = _toml.maxother = 60


def spelled(value: object) -> str:
    """``value`` for a message as a TOML file spells it (``true``, ``"0.03"``, ``[1, "x"]``).

    Bounded in length and depth as :func:`shown` is. Settings values, policy names and
    the command line's words are shown this way; a repr is kept for what only Python
    code can pass (an object where a path belongs).
    """
    return _toml.repr(value)


def shown_some(values: Sequence[object], limit: int) -> str:
    """The first ``limit`` of ``values`` for a message, the rest counted: ``'a' and 3 more``."""
    listed = ", ".join(shown(value) for value in values[:limit])
    return listed + (f" and {len(values) - limit} more" if len(values) > limit else "")


def _plain_number(value: object) -> object:
    """numpy's numbers (any ``numbers.Integral`` or ``Real``) as the int or float they hold.

    A settings object is fingerprinted and written as TOML, which know plain numbers
    only; a bool, and anything that is no number, is left for the validator to judge.
    (``object``, not ``Any``: attrs copies this annotation into the ``__init__`` of every
    class that uses it, where a string ``"Any"`` names nothing, and
    ``inspect.signature(..., eval_str=True)`` failed on them.)
    """
    if isinstance(value, bool) or type(value) in (int, float):
        return value
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        return float(value)
    return value


def _plain_float(value: object) -> object:
    """:func:`_plain_number` for a float field: an integer becomes the float it is.

    ``Policy(tie_z=1)`` equals ``Policy(tie_z=1.0)``, and the TOML loader gives 1.0 for
    ``tie_z = 1``; kept an int, the fingerprint (exact JSON) told them apart, and a
    policy built in code missed the cache entries of the same policy read from a file.
    An integer too large for a float is left for the validator to refuse.
    """
    value = _plain_number(value)
    if type(value) is int:
        try:
            return float(value)
        except OverflowError:
            return value
    return value


def _is_float_field(field: attrs.Attribute[Any]) -> bool:
    return field.type in (float, "float", "float | None")


def plain_numbers(_cls: type, fields: list[attrs.Attribute[Any]]) -> list[attrs.Attribute[Any]]:
    """An attrs ``field_transformer``: every field without a converter takes numpy's
    numbers, and a float field's integer becomes a float."""
    return [
        f
        if f.converter is not None
        else f.evolve(converter=_plain_float if _is_float_field(f) else _plain_number)
        for f in fields
    ]


def bound(x: float) -> str:
    """A limit for a message, exactly: ``9223372036854775807``, ``0.1``, ``1`` for 1.0.

    ``%g`` printed the largest seed as ``9.22337e+18``, a number no one can type back.
    """
    if isinstance(x, int):
        return str(x)
    if x.is_integer() and abs(x) < 1e16:
        return str(int(x))
    return spelled(x)


def _interval(lo: float | None, hi: float | None, lo_open: bool, hi_open: bool) -> str:
    if lo is not None and hi is not None:
        return f"in {'(' if lo_open else '['}{bound(lo)}, {bound(hi)}{')' if hi_open else ']'}"
    if lo is not None:
        return f"{'>' if lo_open else '>='} {bound(lo)}"
    if hi is not None:
        return f"{'<' if hi_open else '<='} {bound(hi)}"
    return "finite"


def number(
    lo: float | None = None,
    hi: float | None = None,
    *,
    lo_open: bool = False,
    hi_open: bool = False,
    optional: bool = False,
) -> Validator:
    """A real number (not a bool) within the given interval."""
    expected = f"a number {_interval(lo, hi, lo_open, hi_open)}"
    if optional:
        expected += " (or leave it unset)"

    def check(_inst: Any, attr: attrs.Attribute[Any], value: Any) -> None:
        if value is None and optional:
            return
        ok = isinstance(value, int | float) and not isinstance(value, bool)
        if ok:
            try:
                x = float(value)
            except OverflowError:  # an int past any float (a TOML integer of 400 digits)
                x = math.inf
            ok = (
                math.isfinite(x)
                and (lo is None or (x > lo if lo_open else x >= lo))
                and (hi is None or (x < hi if hi_open else x <= hi))
            )
        if not ok:
            raise ConfigError(f"{spelled(value)} is not valid for {attr.name}; expected {expected}")

    return check


def integer(lo: int | None = None, hi: int | None = None) -> Validator:
    """An int (not a bool) within ``[lo, hi]``."""
    expected = f"an integer {_interval(lo, hi, False, False)}"

    def check(_inst: Any, attr: attrs.Attribute[Any], value: Any) -> None:
        ok = (
            isinstance(value, int)
            and not isinstance(value, bool)
            and (lo is None or value >= lo)
            and (hi is None or value <= hi)
        )
        if not ok:
            raise ConfigError(f"{spelled(value)} is not valid for {attr.name}; expected {expected}")

    return check


def boolean() -> Validator:
    """True or false (not 1, 0 or "yes")."""

    def check(_inst: Any, attr: attrs.Attribute[Any], value: Any) -> None:
        if not isinstance(value, bool):
            raise ConfigError(
                f"{spelled(value)} is not valid for {attr.name}; expected true or false"
            )

    return check


def choice(options: Collection[str]) -> Validator:
    """One of a fixed set of strings."""
    listed = ", ".join(spelled(o) for o in options)

    def check(_inst: Any, attr: attrs.Attribute[Any], value: Any) -> None:
        if value not in options:
            raise ConfigError(
                f"{spelled(value)} is not valid for {attr.name}; expected one of {listed}"
            )

    return check


def record(cls: type) -> Validator:
    """An instance of the settings record ``cls`` (in a file, the table that builds one)."""

    def check(_inst: Any, attr: attrs.Attribute[Any], value: Any) -> None:
        if not isinstance(value, cls):
            raise ConfigError(
                f"{spelled(value)} is not valid for {attr.name}; expected a {cls.__name__}"
            )

    return check


def text() -> Validator:
    """A string."""

    def check(_inst: Any, attr: attrs.Attribute[Any], value: Any) -> None:
        if not isinstance(value, str):
            raise ConfigError(f"{spelled(value)} is not valid for {attr.name}; expected a string")

    return check


def positive_sizes(*, min_len: int = 1) -> Validator:
    """A tuple of ints >= 1, at least ``min_len`` long."""

    def check(_inst: Any, attr: attrs.Attribute[Any], value: Any) -> None:
        bad = [
            v for v in value if isinstance(v, bool) or not isinstance(v, numbers.Integral) or v < 1
        ]
        if bad or len(value) < min_len:
            raise ConfigError(
                f"{spelled(list(value))} is not valid for {attr.name}; expected a list of at "
                f"least {min_len} integer chunk size(s) >= 1"
                + (f" (bad: {', '.join(spelled(b) for b in bad)})" if bad else "")
            )

    return check


def is_path(value: object) -> bool:
    """Whether ``value`` can name a file: a ``str`` or an ``os.PathLike`` of one."""
    return isinstance(value, str | os.PathLike)


def model_file_problem(file: Path) -> str:
    """Why ``file``, which is no regular file, cannot be a model: missing, or what it is."""
    if not file.exists():
        return f"model file not found: {file}"
    kind = "a directory" if file.is_dir() else "not a regular file"
    return f"model file {file} is {kind}; expected an MJCF (.xml) or .mjb file"


def user_path(value: str) -> Path:
    """``value`` as a path with ``~`` expanded.

    Raises:
        ValueError: it is empty, holds a NUL byte, or starts with the home of a user
            that does not exist (``~nosuchuser/x``).
    """
    if not value:
        raise ValueError('"" is not a path; expected a file name')
    if "\0" in value:
        raise ValueError(f"{spelled(value)} holds a NUL byte, which no path can")
    try:
        return Path(value).expanduser()
    except RuntimeError:  # pathlib cannot find that user's home (or any home)
        head = value.split("/", 1)[0]
        raise ValueError(
            f"{spelled(value)} starts with {spelled(head)}, but no such home directory exists"
        ) from None


def path_text(*, optional: bool = False) -> Validator:
    """A string that names a path (see :func:`user_path`), or None when ``optional``."""

    def check(_inst: Any, attr: attrs.Attribute[Any], value: Any) -> None:
        if value is None and optional:
            return
        if not isinstance(value, str):
            raise ConfigError(
                f"{spelled(value)} is not valid for {attr.name}; expected a path (a string)"
            )
        try:
            user_path(value)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None

    return check
