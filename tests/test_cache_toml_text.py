"""An entry's TOML text made without tomli_w is tomli_w's, byte for byte, or is left to it."""

from __future__ import annotations

import datetime
import enum
import math
import sys
from pathlib import Path
from typing import Any

import pytest
import tomli_w
from _cache_cli import entry
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chunktune import CacheEntry, DecisionCache
from chunktune._cache_checksums import stored_tables
from chunktune._cache_format import encode_members
from chunktune._cache_toml_text import entry_text
from chunktune._shown import escaped_toml

# text a TOML writer must quote or escape, and text that looks like TOML's own
ODD_TEXTS = [
    "",
    "plain",
    "a.b.c",
    'q"uote',
    "back\\slash",
    "tab\there",
    "line\nbreak\r\n",
    "nul\x00byte",
    "del\x7f and \x1b[31mred",
    "bs\b ff\f",
    "bidi\u202eover\u200bzero\ufeffbom",
    "sep\u2028\u2029",
    "ünïcode é",
    "emoji \U0001f600 \U0001f1fa\U0001f1f8",
    "[entries.k]\nx = 1",
    "'''lit''' \"\"\"bas\"\"\"",
    "x" * 5000,
    "\\u0041 not an escape",
    "-_bare-Key_09",
]
ODD_NUMBERS = [0, -1, 2**63, -(2**70), 1e-300, 5e-324, 1.7e308, -0.0, 0.1, 1700000000.0, 1e16]


def _tomli_w(key: str, table: dict[str, Any]) -> str:
    return tomli_w.dumps({"entries": {key: table}})


def _as_before(key: str, table: dict[str, Any]) -> None:
    """``table``'s text in a file is tomli_w's, escaped as ever; or both raise alike (a
    tomli_w before 1.0 writes no tuple)."""
    try:
        expected = escaped_toml(_tomli_w(key, table))
    except TypeError:
        with pytest.raises(TypeError):
            encode_members({key: table}, "toml")
        return
    assert encode_members({key: table}, "toml")[key][1] == expected


def _cases() -> list[Any]:
    cases = [pytest.param(t, {"reason": t}, id=f"text-{i}") for i, t in enumerate(ODD_TEXTS)]
    cases += [pytest.param("k", {t: 1}, id=f"field-{i}") for i, t in enumerate(ODD_TEXTS)]
    cases += [
        pytest.param("k", {"n": n, "l": [n, n]}, id=f"number-{i}")
        for i, n in enumerate(ODD_NUMBERS)
    ]
    cases += [
        pytest.param("k", {}, id="empty table"),
        pytest.param("k", {"sub": {}}, id="only an empty sub-table"),
        pytest.param("k", {"sub": {"a": 1}, "x": 2}, id="a sub-table before a value"),
        pytest.param("k", {"a": {"b": {"c": [1, [2, [3]]]}}, "d": {}}, id="nested"),
        pytest.param("k", {"flags": [True, False], "none": []}, id="booleans, empty list"),
        pytest.param("k", {"mixed": [1, "two", 3.0, [], ["x\n"]]}, id="mixed arrays"),
        pytest.param("k", {"f": math.inf, "g": -math.inf, "h": math.nan}, id="inf and nan"),
        pytest.param(
            "e\u202e.p",
            {"signature": {t: t for t in ODD_TEXTS}, "device": {"x": 1.5, "": ""}},
            id="odd signature",
        ),
    ]
    return cases


@pytest.mark.parametrize(("key", "table"), _cases())
def test_an_odd_table_is_written_as_tomli_w_writes_it(key: str, table: dict[str, Any]) -> None:
    """Odd keys, labels, numbers and nesting of the entry's shape give tomli_w's very text."""
    assert entry_text(key, table) == _tomli_w(key, table)


def test_every_odd_entry_stored_is_written_as_tomli_w_writes_it() -> None:
    """The tables real entries are stored as (odd keys and fields) give tomli_w's text."""
    odd = {
        t: entry(4, reason=t, host=t, signature={t: t, "n": -3, "x": 1e-300}, model_file=t)
        for t in ODD_TEXTS
    }
    odd["full.p"] = entry(
        8, raced_out=(1, 2), gain=0.05, gain_ci=(0.01, 0.09), samples={None: 2, 8: 3}
    )
    for key, table in stored_tables(odd).items():
        assert entry_text(key, table) == _tomli_w(key, table)


class _Level(enum.IntEnum):
    HIGH = 3


@pytest.mark.parametrize(
    "value",
    [
        pytest.param([{"a": 1}], id="a table in an array"),
        pytest.param([1, {"a": 1}], id="a table among values"),
        pytest.param((1, 2), id="a tuple"),
        pytest.param(datetime.date(2026, 12, 7), id="a date"),
        pytest.param(_Level.HIGH, id="an int subclass"),
        pytest.param({"deep": [{"x": 1}]}, id="a table in an array in a table"),
    ],
)
def test_a_value_outside_the_entrys_shape_is_left_to_tomli_w(value: object) -> None:
    """A value an entry never holds gets no text here, and the file holds tomli_w's."""
    table = {"checksum": "0", "x": value}
    assert entry_text("k", table) is None
    _as_before("k", table)


def _nested(depth: int) -> list[Any]:
    """Arrays ``depth`` deep, built without recursion."""
    deep: list[Any] = []
    for _ in range(depth):
        deep = [deep]
    return deep


@pytest.mark.parametrize(
    ("key", "table"),
    [
        pytest.param(1, {"a": 1}, id="an entry key not a string"),
        pytest.param("k", {1: "x"}, id="a field not a string"),
        pytest.param("k", {"sub": {2: "x"}}, id="a sub-table's field not a string"),
        pytest.param("k", {"n": 10**5000}, id="an int too long for str"),
        pytest.param("k", {"deep": _nested(sys.getrecursionlimit() + 100)}, id="too deep"),
    ],
)
def test_a_table_no_text_can_be_made_for_is_left_to_tomli_w(key: Any, table: Any) -> None:
    """A key not a string, an int str() refuses, or nesting past the recursion limit: None."""
    assert entry_text(key, table) is None


def test_a_toml_put_writes_its_entries_without_tomli_w(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A first put after a read encodes the cache's entries without calling tomli_w at all."""
    path = tmp_path / "cache.toml"
    assert DecisionCache(path).update({f"k{i}.p": entry(i + 1, reason="ü\u202e") for i in range(5)})
    before = path.read_bytes()

    def refused(*args: object, **kw: object) -> str:
        raise AssertionError("tomli_w called")

    monkeypatch.setattr(tomli_w, "dumps", refused)
    reader = DecisionCache(path)
    assert len(reader.entries()) == 5
    assert reader.put("k9.p", entry(9))
    written = path.read_bytes()
    assert written.startswith(before[: before.index(b"[entries.")])
    assert len(DecisionCache(path).entries()) == 6


def test_an_entry_holding_nan_is_refused_not_written(tmp_path: Path) -> None:
    """A NaN timing is refused by the put (it would not read back), and nothing is written."""
    path = tmp_path / "cache.toml"
    cache = DecisionCache(path)
    assert cache.put("ok.p", entry(4))
    before = path.read_bytes()
    bad = entry(4, timings={None: math.nan, 4: 0.009})
    assert not cache.put("nan.p", bad)
    assert path.read_bytes() == before


# ------------------------------------------------------------------- seeded fuzz

_keys = st.text(max_size=12) | st.sampled_from(ODD_TEXTS)
_scalars = st.one_of(
    st.text(max_size=30),
    st.sampled_from(ODD_TEXTS),
    st.integers(),
    st.floats(),  # NaN and the infinities too: both writers write str()
    st.booleans(),
)
_arrays = st.recursive(st.lists(_scalars, max_size=4), lambda inner: st.lists(inner, max_size=3))
_tables = st.recursive(
    st.dictionaries(_keys, _scalars | _arrays, max_size=6),
    lambda inner: st.dictionaries(_keys, _scalars | _arrays | inner, max_size=4),
    max_leaves=25,
)


@settings(max_examples=400, deadline=None, derandomize=True)
@given(key=_keys, table=_tables)
def test_any_table_of_the_entrys_shape_is_written_as_tomli_w_writes_it(
    key: str, table: dict[str, Any]
) -> None:
    """Fuzz (seeded): any table of values, arrays and sub-tables gives tomli_w's very text."""
    assert entry_text(key, table) == _tomli_w(key, table)


_anything = st.recursive(
    _scalars | st.dates() | st.tuples(st.integers()),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_keys, inner, max_size=3),
    max_leaves=15,
)


@settings(
    max_examples=200,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(key=_keys, table=st.dictionaries(_keys, _anything, max_size=5))
def test_any_table_is_written_as_before(key: str, table: dict[str, Any]) -> None:
    """Fuzz (seeded): whatever a table holds, its text in the file is the one tomli_w made."""
    _as_before(key, table)


def test_stored_entries_fuzzed_are_written_as_tomli_w_writes_them() -> None:
    """A hundred varied real entries' stored tables give tomli_w's text (no hypothesis shrink)."""
    entries = {
        f"{i}.p{ODD_TEXTS[i % len(ODD_TEXTS)]}": CacheEntry(
            chunk_size=None if i % 3 == 0 else i % 64 + 1,
            native_chunk=3,
            reason=ODD_TEXTS[i % len(ODD_TEXTS)] * (i % 4),
            timings={None: 0.01 + i / 7, **{c: 0.009 + c / 1e4 for c in range(1, i % 9 + 2)}},
            created=1.7e9 + i / 3,
            num_envs=64,
            nthread=2,
            signature={"name": ODD_TEXTS[(i * 7) % len(ODD_TEXTS)], "n": i, "f": i / 9},
        )
        for i in range(100)
    }
    for key, table in stored_tables(entries).items():
        assert entry_text(key, table) == _tomli_w(key, table)
