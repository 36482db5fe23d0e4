"""Values in messages: bounded in length, and a shortened one never cuts an escape in half."""

from __future__ import annotations

import ast
import datetime
import json
import re
import tomllib
from collections.abc import Callable
from pathlib import Path

import pytest

from chunktune._shown import (
    LINE_CHARS,
    _cut,
    bound,
    escaped_toml,
    jsoned,
    plural,
    shown,
    shown_one,
    shown_some,
    spelled,
    type_named,
    unprinted,
)

# a cut 28 characters in and 28 from the end falls inside an escape at both ends
HEAD_AND_TAIL = [
    pytest.param("a" * 26 + '"' + "b" * 40 + "\n" + "c" * 26, id="quote-and-newline"),
    pytest.param("a" * 25 + "\x01" + "b" * 40 + "\x1f" + "c" * 24, id="u-escapes"),
    pytest.param("a" * 26 + "\\" + "b" * 40 + "\t" + "c" * 26, id="backslash-and-tab"),
    pytest.param("a" * 20 + "\U000e0001" * 30 + "b" * 20, id="U-escapes"),  # unprintable
]


def _halves(text: str) -> tuple[str, str]:
    head, tail = text.split("...")
    return head, tail


@pytest.mark.parametrize("value", HEAD_AND_TAIL)
def test_jsoned_shortens_a_string_between_escapes(value: str) -> None:
    """Both ends of a shortened JSON string read back as the value's own start and end."""
    head, tail = _halves(jsoned(value))
    start, end = json.loads(head + '"'), json.loads('"' + tail)
    assert value.startswith(start) and value.endswith(end)
    assert len(start) >= 20 and len(end) >= 20  # shortened by a unit at most, not emptied


@pytest.mark.parametrize("value", HEAD_AND_TAIL)
@pytest.mark.parametrize("wrap", [str, lambda v: v.encode(), Path], ids=["str", "bytes", "path"])
def test_shown_shortens_a_repr_between_escapes(value: str, wrap: object) -> None:
    """Both ends of a shortened repr (of a str, or of an object: bytes) keep every escape whole."""
    wrapped = wrap(value)  # type: ignore[operator]
    for text in (shown(wrapped), spelled(wrapped)):
        head, tail = _halves(text)
        quote = "'" if "'" in head else '"'
        start = head[head.index(quote) :] + quote
        end = quote + tail[: tail.rindex(quote) + 1]
        for piece in (start, end):
            ast.literal_eval(("b" if isinstance(wrapped, bytes) else "") + piece)
        assert len(text) < 100  # TOML escapes the kept characters after the cut


def test_a_cut_keeps_a_surrogate_pairs_two_escapes_together() -> None:
    """A JSON text of astral characters (ensure_ascii) is never cut between a pair's halves."""
    text = json.dumps("a" * 14 + "\U0001f600" * 10)  # each a 12-character pair
    head, tail = _halves(_cut(text, 28, 28))
    assert json.loads(head + '"') == "a" * 14 + "\U0001f600"
    assert json.loads('"' + tail) == "\U0001f600" * 2


def test_a_cut_keeps_a_surrogate_pair_whole_where_only_half_would_fit() -> None:
    """Where a pair's first escape fits before the cut and its second does not, both go."""
    text = json.dumps("a" * 18 + "\U0001f600" * 10 + "b" * 4)  # cuts 6 into a pair at both ends
    head, tail = _halves(_cut(text, 28, 28))
    assert head == '"' + "a" * 18
    assert json.loads('"' + tail) == "\U0001f600bbbb"


class _Lines:
    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return self.text


LINES = "line\n" * 30


@pytest.mark.parametrize(
    ("show", "value", "expected"),
    [
        pytest.param(jsoned, "a" * 100, '"' + "a" * 27 + "..." + "a" * 27 + '"', id="json"),
        pytest.param(jsoned, "a" * 40 + "\n" + "b" * 26, '"' + "a" * 27 + "..." + "b" * 26 + '"',
                     id="json-escape-past-the-tail"),
        pytest.param(jsoned, "a" * 26 + "\n" + "b" * 40, '"' + "a" * 26 + "..." + "b" * 27 + '"',
                     id="json-escape-past-the-head"),
        pytest.param(jsoned, "a" * 58, '"' + "a" * 58 + '"', id="json-of-60-whole"),
        pytest.param(shown, "a" * 100, "'" + "a" * 27 + "..." + "a" * 28 + "'", id="repr"),
        pytest.param(shown, "a" * 58, "'" + "a" * 58 + "'", id="repr-of-60-whole"),
        pytest.param(shown, _Lines(LINES), LINES[:28] + "..." + LINES[-29:], id="lines"),
        pytest.param(shown, _Lines("x" * 60), "x" * 60, id="object-of-60-whole"),
    ],
)  # fmt: skip
def test_a_cut_without_an_escape_in_the_way_keeps_the_whole_room(
    show: Callable[[object], str], value: object, expected: str
) -> None:
    """A shortened value keeps as many characters as its bounds allow, line breaks too."""
    assert show(value) == expected


class _Broken:
    def __repr__(self) -> str:
        raise RuntimeError("no repr")


def test_an_object_whose_repr_fails_is_shown_by_reprlibs_stand_in() -> None:
    """A __repr__ that raises does not escape a message: the class and address stand in."""
    for show in (shown, spelled):
        assert re.fullmatch(r"<_Broken instance at 0x[0-9a-f]+>", show(_Broken()))


def _nested(depth: int) -> object:
    value: object = 1
    for _ in range(depth):
        value = {"k": value}
    return value


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        pytest.param({"a": 1, "b": 2, "c": 3, "d": 4}, "{a = 1, b = 2, c = 3, d = 4}",
                     id="four-keys-whole"),
        pytest.param({"a": 1, "b": 2, "c": 3, "d": 4, "e": 5}, "{a = 1, b = 2, c = 3, d = 4, ...}",
                     id="five-keys-cut"),
        pytest.param({"time-budget_s": 1, "a b": 2, "x.y": 3}, '{time-budget_s = 1, "a b" = 2, '
                     '"x.y" = 3}', id="bare-and-quoted-keys"),
        pytest.param(_nested(6), "{k = {k = {k = {k = {k = {k = 1}}}}}}", id="six-deep-whole"),
        pytest.param(_nested(7), "{k = {k = {k = {k = {k = {k = {...}}}}}}}", id="seven-deep-cut"),
        pytest.param("x" * 60, '"' + "x" * 60 + '"', id="string-of-60-whole"),
        pytest.param("x" * 61, '"' + "x" * 28 + "..." + "x" * 29 + '"', id="string-of-61-cut"),
        pytest.param({"k" * 60: 1}, "{" + "k" * 60 + " = 1}", id="bare-key-of-60-whole"),
        pytest.param({"k" * 61: 1}, '{"' + "k" * 28 + "..." + "k" * 29 + '" = 1}',
                     id="bare-key-of-61-cut"),
    ],
)  # fmt: skip
def test_spelled_writes_tables_and_strings_as_toml_does_within_reprs_bounds(
    value: object, expected: str
) -> None:
    """Tables: bare keys where TOML allows, cut past 4 keys or 6 levels; strings, keys past 60."""
    assert spelled(value) == expected


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        pytest.param([], "", id="none"),
        pytest.param(["a", "b", "c"], "'a', 'b', 'c'", id="at-the-limit"),
        pytest.param(["a", "b", "c", "d", "e"], "'a', 'b', 'c' and 2 more", id="past-it"),
    ],
)
def test_shown_some_lists_up_to_its_limit_and_counts_the_rest(
    values: list[str], expected: str
) -> None:
    """shown_some shows up to ``limit`` values and counts only those left out."""
    assert shown_some(values, 3) == expected


@pytest.mark.parametrize(
    ("x", "expected"),
    [
        pytest.param(9.9e15, "9900000000000000", id="integral-float-in-digits"),
        pytest.param(1e16, "1e+16", id="past-1e16"),
        pytest.param(1e300, "1e+300", id="huge"),
        pytest.param(2.5, "2.5", id="fraction"),
    ],
)
def test_a_bound_is_exact_and_short(x: float, expected: str) -> None:
    """A float bound prints its digits while they are few, else as TOML writes it: never 300."""
    assert bound(x) == expected


def test_a_value_too_deep_for_json_is_shown_bounded() -> None:
    """jsoned of a list nested past the recursion limit falls back to the bounded repr."""
    deep: list[object] = []
    inner = deep
    for _ in range(100_000):
        inner.append([])
        inner = inner[0]  # type: ignore[assignment]
    assert jsoned(deep) == "[[[[[[[...]]]]]]]"


@pytest.mark.parametrize(
    ("value", "written"),
    [
        pytest.param("a\x85b", r'"a\u0085b"', id="c1-next-line"),
        pytest.param("a\u2028b", r'"a\u2028b"', id="line-separator"),
        pytest.param("a\u2029b", r'"a\u2029b"', id="paragraph-separator"),
        pytest.param("a\u202eb", r'"a\u202Eb"', id="bidi-override"),
        pytest.param("a\U000e0001b", r'"a\U000E0001b"', id="astral-format"),
        pytest.param("é 快", '"é 快"', id="printable-kept"),
    ],
)
def test_spelled_escapes_every_character_a_terminal_would_not_print(
    value: str, written: str
) -> None:
    """C1 controls, line separators and bidi overrides are TOML escapes, as C0 ones are."""
    assert spelled(value) == written
    assert tomllib.loads(f"x = {written}")["x"] == value


@pytest.mark.parametrize(
    "value",
    [
        pytest.param(10**5000, id="past-the-limit"),
        pytest.param(-(10**5000) + 7, id="negative"),
        pytest.param(10**300, id="long-but-writable"),
    ],
)
def test_an_int_of_any_length_is_shown_cut_as_reprlib_cuts_a_long_one(value: int) -> None:
    """An int past Python's int-to-str limit is shown head...tail like a long one, not an error."""
    import reprlib
    import sys

    text = shown(value)
    assert len(text) == 40 and "..." in text
    assert text == spelled(value)
    if abs(value) >= 10**4300:  # JSON cannot write it out either: shown as above
        assert jsoned(value) == text
    with_limit = sys.get_int_max_str_digits()
    sys.set_int_max_str_digits(0)  # only to write the whole number for the comparison
    try:
        whole = reprlib.repr(value)
    finally:
        sys.set_int_max_str_digits(with_limit)
    assert text == whole


def test_digits_counts_an_int_past_the_limit_exactly() -> None:
    """digits() gives an int's decimal digits, sign aside, at every size and at each power of 10."""
    from chunktune._shown import digits

    for n in (1, 2, 17, 4300, 4301, 20000):
        assert (digits(10 ** (n - 1)), digits(10**n - 1), digits(-(10**n))) == (n, n, n + 1)
    assert digits(0) == 1


def test_jsoned_shows_a_character_outside_ascii_as_written() -> None:
    """jsoned spells é and 快 as a JSON file holds them, not as \\u escapes."""
    assert jsoned(["é", "快"]) == '["é", "快"]'


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        pytest.param("a\\b", r'"a\\b"', id="backslash"),
        pytest.param(False, "false", id="false"),
        pytest.param(True, "true", id="true"),
        pytest.param(float("-inf"), "-inf", id="minus-inf"),
        pytest.param(float("inf"), "inf", id="inf"),
        pytest.param(tuple(range(10)), "[0, 1, 2, 3, 4, 5, ...]", id="long-tuple"),
        pytest.param((1, 2), "[1, 2]", id="short-tuple"),
        pytest.param(datetime.time(7, 30), "07:30:00", id="time"),
        pytest.param(datetime.date(2026, 12, 4), "2026-12-04", id="date"),
    ],
)
def test_spelled_writes_scalars_and_arrays_as_toml_does(value: object, expected: str) -> None:
    """spelled writes backslashes, booleans, infinities, tuples and times as TOML spells them."""
    assert spelled(value) == expected


def test_escaped_toml_escapes_what_a_terminal_would_not_print_on_any_line_and_reads_back() -> None:
    """escaped_toml: each Cc/Cf/Zl/Zp character is \\u-escaped, line by line; others kept."""
    import tomli_w

    special = "\x00\x7f\x85\u00a0\u00ad\u200b\u2028\u2029\u202e\ue000\u0378\U000e0001é\\"
    values = {f"k{i}": f"a{c}b" for i, c in enumerate(special)}
    text = escaped_toml(tomli_w.dumps(values))
    assert tomllib.loads(text) == values
    assert unprinted(text.replace("\n", "")) is None
    # what prints stays as written: a no-break space, a private-use and an unassigned one
    assert all(f'"a{c}b"' in text for c in "\u00a0\ue000\u0378é")
    assert 'k13 = "a\\\\b"' in text  # a backslash escaped once, by the TOML writer


@pytest.mark.parametrize(
    ("count", "words", "expected"),
    [
        pytest.param(1, ("env",), "1 env", id="one"),
        pytest.param(2, ("env",), "2 envs", id="an-s"),
        pytest.param(1, ("process", "processes"), "1 process", id="one-of-its-own"),
        pytest.param(0, ("process", "processes"), "0 processes", id="its-own-plural"),
        pytest.param(3, ("entry", "entries"), "3 entries", id="entries"),
    ],
)
def test_a_count_in_words_takes_a_plural_of_its_own(
    count: int, words: tuple[str, ...], expected: str
) -> None:
    """plural() names one in the singular, more (or none) in the plural given, else with an s."""
    assert plural(count, *words) == expected


def test_shown_one_keeps_a_plain_values_repr_as_shown_writes_it() -> None:
    """A plain list's repr past one line's 200 characters is not cut again: shown() bounds it."""
    value = ["a" * 58] * 6
    assert len(shown(value)) > 200 and shown_one(value) == shown(value)


class _Repr:
    """An object whose repr is the text given."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return self.text


def test_shown_one_cuts_a_repr_its_escapes_lengthen_past_one_line() -> None:
    """A repr of 60 ESCs (in shown()'s bound) escapes to 362 characters: cut to one line's 200."""
    text = shown_one(_Repr("\x1b" * 60))
    assert unprinted(text) is None and len(text) <= LINE_CHARS
    assert text.startswith('"\\u001B') and "..." in text


def test_type_named_keeps_a_printable_name_of_one_lines_length_whole() -> None:
    """A class's name that prints is named whole up to one line's 200 characters, then cut."""
    assert type_named(type("N" * LINE_CHARS, (), {})()) == "N" * LINE_CHARS
    cut = type_named(type("N" * (LINE_CHARS + 1), (), {})())
    assert len(cut) == LINE_CHARS and "..." in cut
