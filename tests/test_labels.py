"""check_label: a name given in a signature's place (model_label, states_label)."""

from __future__ import annotations

import pytest

from chunktune import InvalidArgumentError
from chunktune._labels import MAX_LABEL_CHARS, check_label


@pytest.mark.parametrize("label", [" arm ", "a", "x" * MAX_LABEL_CHARS, "bras-\u00e9"])
def test_a_name_is_returned_as_given(label: str) -> None:
    """A printable label of 1 to MAX_LABEL_CHARS characters comes back unchanged, spaces kept."""
    assert check_label(label, what="model_label", names="the model") == label


@pytest.mark.parametrize(
    ("label", "problem"),
    [
        pytest.param("", r"is not a name for the model \(a non-empty string\)$", id="empty"),
        pytest.param(7, r"is not a name for the model \(a non-empty string\)$", id="int"),
        pytest.param("\x1barm", r"holds a control character \(U\+001B\)", id="leading-escape"),
        pytest.param("ar\u202em", r"holds a control character \(U\+202E\)", id="bidi"),
        pytest.param(" \t", "it is only whitespace", id="blank"),
    ],
)
def test_what_is_no_name_is_refused_saying_why(label: object, problem: str) -> None:
    """An empty, non-str, blank or unprintable label: InvalidArgumentError naming the problem."""
    with pytest.raises(InvalidArgumentError, match=problem) as caught:
        check_label(label, what="model_label", names="the model")
    assert str(caught.value).startswith(f"model_label {label!r} is not a name")


def test_a_long_label_with_a_control_character_is_named_by_its_ends() -> None:
    """A 10k-character label holding an ESC is refused on a bounded line, not written whole."""
    label = "a" * 5_000 + "\x1b" + "z" * 5_000
    with pytest.raises(InvalidArgumentError, match=r"\(U\+001B\)") as caught:
        check_label(label, what="model_label", names="the model")
    assert len(str(caught.value)) < 300
