"""The validator factories: the bounds they state in their messages and the values they refuse."""

from __future__ import annotations

import math
from typing import Any

import attrs
import pytest

from chunktune import ConfigError
from chunktune._validators import Validator, integer, number


def _checked(validator: Validator, value: Any) -> None:
    """Build a one-field record ``x`` guarded by ``validator`` from ``value``."""
    attrs.make_class("Box", {"x": attrs.field(validator=validator)})(value)


@pytest.mark.parametrize(
    ("validator", "value", "expected"),
    [
        pytest.param(number(0.0, lo_open=True), 0, "a number > 0", id="open-below"),
        pytest.param(number(0.0), -1, "a number >= 0", id="closed-below"),
        pytest.param(number(hi=1.0, hi_open=True), 1, "a number < 1", id="open-above"),
        pytest.param(number(hi=1.0), 2, "a number <= 1", id="closed-above"),
        pytest.param(number(), math.inf, "a finite number", id="unbounded-inf"),
        pytest.param(number(), math.nan, "a finite number", id="unbounded-nan"),
        pytest.param(integer(1), 0, "an integer >= 1", id="integer-below"),
        pytest.param(integer(hi=3), 4, "an integer <= 3", id="integer-above"),
    ],
)
def test_a_one_sided_or_unbounded_validator_names_its_bound(
    validator: Validator, value: Any, expected: str
) -> None:
    """number()/integer() with one bound or none refuse past it (and inf, nan) and say so."""
    with pytest.raises(ConfigError, match=rf"is not valid for x; expected {expected}$"):
        _checked(validator, value)


@pytest.mark.parametrize(
    ("validator", "value"),
    [
        pytest.param(number(0.0, lo_open=True), 1e300, id="open-below"),
        pytest.param(number(hi=1.0), -1e300, id="closed-above"),
        pytest.param(number(), -1e300, id="unbounded"),
        pytest.param(integer(1), 10**30, id="integer-below"),
    ],
)
def test_a_one_sided_or_unbounded_validator_takes_any_finite_value_on_its_side(
    validator: Validator, value: Any
) -> None:
    """A bound left out bounds nothing: a huge finite value on the open side is accepted."""
    _checked(validator, value)


def test_a_number_field_s_converter_keeps_the_docstring_of_what_it_wraps() -> None:
    """help() on a field's converter says what it converts: a float's, or any number's."""
    from chunktune import Policy
    from chunktune._validators import _plain_float, _plain_number

    fields = attrs.fields(Policy)
    assert fields.margin.converter.__doc__ == _plain_float.__doc__
    assert fields.max_rounds.converter.__doc__ == _plain_number.__doc__
