"""attrs validators whose messages say what was expected and what was given.

They guard the settings classes, so a bad value raises :class:`~chunktune.ConfigError`
(a ``ValueError``) whether it came from a file or from a constructor call. How a
value is shown in those messages is ``_shown``'s. Built in code, a record says what is
invalid by its class's ``_invalid_as`` (``"policy"``, ``"candidates"``; else
``"settings"``); read from a file, the loader names the file and the key instead.
"""

from __future__ import annotations

import difflib
import math
import numbers
from collections.abc import Callable, Collection
from typing import Any

import attrs

from ._errors import ConfigError
from ._paths import user_path
from ._shown import bound, shown_some, spelled

__all__ = [
    "boolean",
    "choice",
    "integer",
    "number",
    "one_of",
    "path_text",
    "percent_of",
    "plain_numbers",
    "positive_sizes",
    "record",
    "refused",
    "text",
]

Validator = Callable[[Any, "attrs.Attribute[Any]", Any], None]


def refused(inst: object, message: str) -> ConfigError:
    """The error for a bad value of a field of ``inst`` (None: no record yet, as the
    loader checks a file's values): ``invalid policy: ...`` for a Policy built in code,
    ``invalid settings: ...`` for a settings record."""
    return ConfigError(message, subject=getattr(type(inst), "_invalid_as", "settings"))


def _plain_number(value: object) -> object:
    """numpy's numbers (any ``numbers.Integral`` or ``Real``) as the int or float they hold.

    A settings object is fingerprinted and written as TOML, which know plain numbers
    only; a bool, and anything that is no number, is left for the validator to judge.
    (:func:`plain_numbers` gives each field's copy of it the field's own type.)
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


def _typed(convert: Callable[[object], object], hint: object) -> Callable[[object], object]:
    """``convert``, its parameter annotated ``hint``: attrs copies a converter's parameter
    annotation into ``__init__``, which help() and ``inspect.signature`` then show, so
    ``Policy(margin: float = 0.01)`` reads as the field is typed, not ``margin: object``.
    A string ``hint`` evaluates where the record was written, as its fields' own do."""

    def plain(value: object) -> object:
        return convert(value)

    plain.__doc__ = convert.__doc__
    plain.__annotations__ = {"value": hint, "return": hint}
    return plain


def plain_numbers(_cls: type, fields: list[attrs.Attribute[Any]]) -> list[attrs.Attribute[Any]]:
    """An attrs ``field_transformer``: every field without a converter takes numpy's
    numbers, and a float field's integer becomes a float."""
    return [
        f
        if f.converter is not None
        else f.evolve(
            converter=_typed(_plain_float if _is_float_field(f) else _plain_number, f.type)
        )
        for f in fields
    ]


def _interval(lo: float | None, hi: float | None, lo_open: bool, hi_open: bool) -> str:
    """``" in [0, 1)"``, ``" >= 2"``, or ``""`` for no bound: what follows "a number"."""
    if lo is not None and hi is not None:
        return f" in {'(' if lo_open else '['}{bound(lo)}, {bound(hi)}{')' if hi_open else ']'}"
    if lo is not None:
        return f" {'>' if lo_open else '>='} {bound(lo)}"
    if hi is not None:
        return f" {'<' if hi_open else '<='} {bound(hi)}"
    return ""


def number(
    lo: float | None = None,
    hi: float | None = None,
    *,
    lo_open: bool = False,
    hi_open: bool = False,
    optional: bool = False,
    fraction: bool = False,
    unlimited: bool = False,
) -> Validator:
    """A real number (not a bool) within the given interval.

    ``unlimited``: ``inf`` is valid too (a limit's "no limit", which TOML, without a null,
    can write where a preset set one).

    ``fraction``: the number is a fraction (0.03 = 3%), and the message says so; a value
    that reads as a percent (3 for 3%) is told the fraction it meant, where that fraction
    is within the interval (else only the unit: 95 for a fraction up to 0.9 is not told
    0.95, which is refused too).
    """
    interval = _interval(lo, hi, lo_open, hi_open)
    kind = "a fraction" if fraction else "a number"
    expected = f"{kind}{interval}" if interval else "a finite number"
    if unlimited:
        expected += " (or inf, or leave it unset: no limit)" if optional else " (or inf: no limit)"
    elif optional:
        expected += " (or leave it unset)"

    def inside(x: float) -> bool:
        return (
            math.isfinite(x)
            and (lo is None or (x > lo if lo_open else x >= lo))
            and (hi is None or (x < hi if hi_open else x <= hi))
        )

    def check(inst: Any, attr: attrs.Attribute[Any], value: Any) -> None:
        if value is None and optional:
            return
        ok = isinstance(value, int | float) and not isinstance(value, bool)
        if ok:
            try:
                x = float(value)
            except OverflowError:  # an int past any float (a TOML integer of 400 digits)
                x = math.inf
            # a float inf only: an integer of 400 digits is no one's way to write "no limit"
            ok = inside(x) or (unlimited and type(value) is float and value == math.inf)
        if not ok:
            raise refused(
                inst,
                f"{spelled(value)} is not valid for {attr.name}; expected {expected}"
                + (_as_fraction(value, inside) if fraction else ""),
            )

    return check


def _as_fraction(value: object, inside: Callable[[float], bool]) -> str:
    """What a fraction field's refused value meant, where it reads as a percent (3 or
    ``"3%"`` for 3%) of a fraction ``inside`` the field's interval: ``": 3% is 0.03"``;
    else the unit, ``" (0.03 is 3%)"``."""
    percent = percent_of(value)
    if percent is None and isinstance(value, int | float) and not isinstance(value, bool):
        percent = float(value) if 1 <= value < 100 else None
    if percent is not None and inside(meant := round(percent / 100, 12)):
        return f": {bound(percent)}% is {bound(meant)}"
    return " (0.03 is 3%)"


def percent_of(value: object) -> float | None:
    """The percent a string such as ``"3%"`` or ``"2.5 %"`` writes (0 to under 100), else None."""
    if not isinstance(value, str) or not value.rstrip().endswith("%"):
        return None
    try:
        percent = float(value.rstrip()[:-1])
    except ValueError:
        return None
    return percent if 0 <= percent < 100 else None


def integer(lo: int | None = None, hi: int | None = None) -> Validator:
    """An int (not a bool) within ``[lo, hi]``."""
    expected = f"an integer{_interval(lo, hi, False, False)}"

    def check(inst: Any, attr: attrs.Attribute[Any], value: Any) -> None:
        ok = (
            isinstance(value, int)
            and not isinstance(value, bool)
            and (lo is None or value >= lo)
            and (hi is None or value <= hi)
        )
        if not ok:
            raise refused(
                inst, f"{spelled(value)} is not valid for {attr.name}; expected {expected}"
            )

    return check


def boolean() -> Validator:
    """True or false (not 1, 0 or "yes")."""

    def check(inst: Any, attr: attrs.Attribute[Any], value: Any) -> None:
        if not isinstance(value, bool):
            raise refused(
                inst, f"{spelled(value)} is not valid for {attr.name}; expected true or false"
            )

    return check


def one_of(value: object, options: Collection[str]) -> str:
    """What ``value`` should have been: ``did you mean "geometric"? expected one of ...``
    (the nearest of ``options`` where one is near, for a misspelled name)."""
    listed = ", ".join(spelled(o) for o in options)
    close = difflib.get_close_matches(value, list(options), n=1) if isinstance(value, str) else []
    hint = f"did you mean {spelled(close[0])}? " if close else ""
    return f"{hint}expected one of {listed}"


def choice(options: Collection[str]) -> Validator:
    """One of a fixed set of strings."""

    def check(inst: Any, attr: attrs.Attribute[Any], value: Any) -> None:
        if value not in options:
            raise refused(
                inst, f"{spelled(value)} is not valid for {attr.name}; {one_of(value, options)}"
            )

    return check


def record(cls: type) -> Validator:
    """An instance of the settings record ``cls`` (in a file, the table that builds one)."""

    def check(inst: Any, attr: attrs.Attribute[Any], value: Any) -> None:
        if not isinstance(value, cls):
            raise refused(
                inst, f"{spelled(value)} is not valid for {attr.name}; expected a {cls.__name__}"
            )

    return check


def text() -> Validator:
    """A string."""

    def check(inst: Any, attr: attrs.Attribute[Any], value: Any) -> None:
        if not isinstance(value, str):
            raise refused(inst, f"{spelled(value)} is not valid for {attr.name}; expected a string")

    return check


# bad sizes a message spells before it only counts the rest: a list of a million bad sizes
# would otherwise spell every one, a message of megabytes
_BAD_SHOWN = 8


def positive_sizes(*, min_len: int = 1) -> Validator:
    """A tuple of ints >= 1, at least ``min_len`` long."""

    def check(inst: Any, attr: attrs.Attribute[Any], value: Any) -> None:
        bad = [
            v for v in value if isinstance(v, bool) or not isinstance(v, numbers.Integral) or v < 1
        ]
        if bad or len(value) < min_len:
            raise refused(
                inst,
                f"{spelled(list(value))} is not valid for {attr.name}; expected a list of at "
                f"least {min_len} integer chunk size(s) >= 1"
                + (f" (bad: {shown_some(bad, _BAD_SHOWN, show=spelled)})" if bad else ""),
            )

    return check


def path_text(*, optional: bool = False) -> Validator:
    """A string that names a path (see :func:`user_path`), or None when ``optional``."""

    def check(inst: Any, attr: attrs.Attribute[Any], value: Any) -> None:
        if value is None and optional:
            return
        if not isinstance(value, str):
            raise refused(
                inst, f"{spelled(value)} is not valid for {attr.name}; expected a path (a string)"
            )
        try:
            user_path(value)
        except ValueError as exc:
            raise refused(inst, str(exc)) from None

    return check
