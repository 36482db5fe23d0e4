"""What a workload's methods return, checked: ``signature()``'s table, ``run()``'s seconds."""

from __future__ import annotations

import decimal
import math
import numbers
import sys
from collections.abc import Mapping
from typing import Any

from ._errors import WorkloadError
from ._shown import digits, shown, shown_line, shown_one, type_named

__all__ = [
    "MAX_SECONDS",
    "MIN_SECONDS",
    "SignatureValue",
    "as_seconds",
    "check_seconds",
    "check_signature",
    "max_int_digits",
    "plain_scalar",
]

SignatureValue = str | int | float | bool

MAX_SECONDS = 1e6
"""The longest call a sweep takes as measured (11.6 days): a ``run()`` that says more
is broken, and its seconds (1e308, say) would overflow the statistics."""

MIN_SECONDS = 1e-9
"""The shortest call a sweep takes as measured (a nanosecond, less than one chunk's
dispatch): a ``run()`` that says less is broken, and its seconds (1e-310, say) would
overflow the budget's arithmetic."""


def plain_scalar(value: Any) -> Any:
    """A numpy scalar or 0-d array as the Python number it holds; anything else as it is."""
    item = getattr(value, "item", None)
    if callable(item) and getattr(value, "shape", None) == ():
        return item()
    return value


def check_signature(signature: object) -> dict[str, SignatureValue]:
    """A workload's ``signature()`` as a plain ``{str: str | int | float | bool}`` dict.

    numpy scalars and 0-d arrays become the Python numbers they hold; plain values
    are kept as they are, so the cache keys of valid signatures never change.

    Raises:
        WorkloadError: ``signature`` is not a mapping, a key is not a string, or a
            value is none of str, int (of at most :func:`max_int_digits` digits), float
            (finite) and bool.
    """
    if not isinstance(signature, Mapping):
        raise WorkloadError(
            f"signature() returned {type_named(signature)} {shown_one(signature)}; expected a "
            "mapping of str to str, int, float or bool"
        )
    plain: dict[str, SignatureValue] = {}
    for key, raw in signature.items():
        if not isinstance(key, str):
            raise WorkloadError(
                f"signature() key {shown_one(key)} is of type {type_named(key)}; keys must be "
                "strings"
            )
        value = plain_scalar(raw)
        if isinstance(value, bool | str):
            # exactly str or bool, whatever subclass (an enum, say) carried it
            plain[key] = bool(value) if isinstance(value, bool) else str.__str__(value)
        elif isinstance(value, numbers.Integral):
            plain[key] = _keyable_int(key, int(value))
        elif isinstance(value, numbers.Real) and _finite(value):
            plain[key] = float(value)
        else:
            raise WorkloadError(
                f"signature()[{_key(key)}] is {shown_one(raw)} ({type_named(raw)}); expected a "
                "str, int, finite float or bool"
            )
    return plain


def max_int_digits() -> int:
    """The most decimal digits a signature's int may have.

    Python's int-to-str limit (``sys.get_int_max_str_digits()``, lowered or lifted by
    the program), but never past its default: a cache key and a cache file write the
    int out in decimal, and every process that reads the file back must be able to.
    """
    default = sys.int_info.default_max_str_digits
    now = sys.get_int_max_str_digits()
    return min(now, default) if now > 0 else default


def _keyable_int(key: str, value: int) -> int:
    """``value``, unless it has more digits than a cache key may write out.

    Raises:
        WorkloadError: ``value`` has more than :func:`max_int_digits` digits.
    """
    limit = max_int_digits()
    # under 3 bits a digit it is short enough: only a long one pays for counting
    if value.bit_length() > 3 * limit and (count := digits(value)) > limit:
        raise WorkloadError(
            f"signature()[{_key(key)}] is an int of {count} digits ({shown(value)}); expected a "
            f"str, an int of at most {limit} digits, a finite float or a bool: the cache key "
            "and file write ints out in decimal, which Python refuses past "
            "sys.get_int_max_str_digits() (a hash of the number, as a str, keys it)"
        )
    return value


def _key(key: str) -> str:
    """A signature's key for a message, as its repr (printable: Python escapes what is
    not), bounded: a key of 10k characters would fill a message's line."""
    return shown_line(repr(key))


def _finite(value: numbers.Real) -> bool:
    """Whether ``value`` is a finite float: not inf or nan, nor too large for a float."""
    try:
        return math.isfinite(value)
    except OverflowError:  # a Fraction past float's range
        return False


def check_seconds(value: object, chunk: int | None) -> float:
    """What ``run(chunk)`` returned, as a float of seconds.

    Any real number counts (numpy scalars and 0-d arrays, a ``Fraction``, a ``Decimal``),
    but not a bool.

    Raises:
        WorkloadError: ``value`` is not a real number in [:data:`MIN_SECONDS`,
            :data:`MAX_SECONDS`].
    """
    seconds = as_seconds(value)
    if seconds is None:
        raise WorkloadError(
            f"run({chunk!r}) returned {shown_one(value)}; expected a positive number of seconds "
            f"from {MIN_SECONDS:g} to {MAX_SECONDS:g}"
        )
    return seconds


def as_seconds(value: object) -> float | None:
    """``value`` as float seconds in [:data:`MIN_SECONDS`, :data:`MAX_SECONDS`] (numpy
    scalars and ``Decimal`` too), else None."""
    plain = plain_scalar(value)
    # a Decimal holds a real number, but is no numbers.Real (it will not mix with floats)
    if isinstance(plain, bool) or not isinstance(plain, numbers.Real | decimal.Decimal):
        return None
    try:
        seconds = float(plain)
    # an integer past any float (JSON and Python allow one), a signaling NaN Decimal
    except (OverflowError, ValueError):
        return None
    return seconds if math.isfinite(seconds) and MIN_SECONDS <= seconds <= MAX_SECONDS else None
