"""A trace's recorded seconds: checked at C speed, each once, every bad one named as before."""

from __future__ import annotations

import decimal
import fractions
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from test_trace import synthetic, write

from chunktune import TraceError, _trace
from chunktune._returned import as_seconds
from chunktune._trace import Trace, dump_trace, load_trace, trace_from_dict
from chunktune.sim import ReplayWorkload

_HUGE = "1000000000000000000000000000...0000000000000000000000000000"

# each bad value a trace file can hold, and how the message shows it
_BAD = [
    pytest.param(True, "true", id="true"),
    pytest.param(False, "false", id="false"),
    pytest.param(None, "null", id="null"),
    pytest.param("0.5", '"0.5"', id="string-of-a-number"),
    pytest.param("1", '"1"', id="string-of-an-int"),
    pytest.param("NaN", '"NaN"', id="string-nan"),
    pytest.param("", '""', id="empty-string"),
    pytest.param([0.1], "[0.1]", id="list"),
    pytest.param([[0.1]], "[[0.1]]", id="nested-list"),
    pytest.param({"s": 0.1}, '{"s": 0.1}', id="object"),
    pytest.param(10**400, _HUGE, id="int-past-float"),
    pytest.param(-(10**400), "-" + _HUGE[:27] + _HUGE[28:], id="negative-int-past-float"),
    pytest.param(10**4000, _HUGE, id="int-of-4001-digits"),
    pytest.param(0, "0", id="int-zero"),
    pytest.param(-1, "-1", id="negative-int"),
    pytest.param(2_000_000, "2000000", id="int-past-max"),
    pytest.param(0.0, "0.0", id="zero"),
    pytest.param(-0.0, "-0.0", id="negative-zero"),
    pytest.param(-1.0, "-1.0", id="negative"),
    pytest.param(math.nan, "NaN", id="nan"),
    pytest.param(math.inf, "Infinity", id="infinity"),
    pytest.param(-math.inf, "-Infinity", id="negative-infinity"),
    pytest.param(1e308, "1e+308", id="absurd"),
    pytest.param(2e6, "2000000.0", id="past-max"),
    pytest.param(1e-10, "1e-10", id="below-min"),
    pytest.param(1e-310, "1e-310", id="subnormal"),
]


@pytest.mark.parametrize(("value", "shown"), _BAD)
@pytest.mark.parametrize("at", [0, 5, 11], ids=["first", "middle", "last"])
def test_a_bad_second_anywhere_in_a_row_is_named_as_before(
    tmp_path: Path, value: Any, shown: str, at: int
) -> None:
    """A bad second first, mid-row or last: the TraceError names file, size, round and value."""
    doc = json.loads(dump_trace(synthetic()))
    doc["samples"]["2"][at] = value
    path = write(tmp_path, doc)
    with pytest.raises(TraceError) as info:
        load_trace(path)
    assert str(info.value) == (
        f'{path}: samples["2"][{at}] is {shown}; expected seconds from 1e-09 to 1e+06'
    )


def test_of_several_bad_seconds_the_first_in_the_file_is_named(tmp_path: Path) -> None:
    """Bad seconds in two rows, two in one of them: the first row's first bad one is named."""
    doc = json.loads(dump_trace(synthetic()))
    doc["samples"]["3"][0] = -1.0
    doc["samples"]["2"][7] = True
    doc["samples"]["2"][9] = math.nan
    with pytest.raises(TraceError, match=r'samples\["2"\]\[7\] is true; expected'):
        load_trace(write(tmp_path, doc))


def test_seconds_written_as_ints_or_mixed_with_them_load_as_floats(tmp_path: Path) -> None:
    """Whole seconds written as ints (by hand) load as those floats, beside the floats kept."""
    doc = json.loads(dump_trace(synthetic()))
    doc["samples"]["2"] = [1, 0.5, 2, *doc["samples"]["2"][3:]]
    doc["samples"]["3"] = [3] * 12
    trace = load_trace(write(tmp_path, doc))
    assert trace.samples[2][:3] == (1.0, 0.5, 2.0)
    assert trace.samples[3] == (3.0,) * 12
    assert {type(s) for row in trace.samples.values() for s in row} == {float}


@pytest.mark.parametrize(
    "value",
    [
        pytest.param(np.float64(0.25), id="numpy-float64"),
        pytest.param(np.float32(0.25), id="numpy-float32"),
        pytest.param(decimal.Decimal("0.25"), id="decimal"),
        pytest.param(fractions.Fraction(1, 4), id="fraction"),
    ],
)
def test_seconds_of_other_real_types_in_a_dict_are_read_as_floats(value: object) -> None:
    """A document built in code may give seconds as numpy scalars, Decimals or Fractions."""
    doc = json.loads(dump_trace(synthetic()))
    doc["samples"]["2"][4] = value
    trace = trace_from_dict(doc)
    assert trace.samples[2][4] == 0.25 and type(trace.samples[2][4]) is float


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        pytest.param(np.float64("nan"), "NaN", id="numpy-nan"),
        pytest.param(np.float64(-1.0), "-1.0", id="numpy-negative"),
        pytest.param(np.float64(1e-310), "1e-310", id="numpy-subnormal"),
    ],
)
def test_a_bad_second_of_a_float_subclass_is_named_as_before(value: object, shown: str) -> None:
    """numpy's NaN, a negative or a subnormal float64 in a document built in code: named."""
    doc = json.loads(dump_trace(synthetic()))
    doc["samples"]["2"][4] = value
    with pytest.raises(TraceError) as info:
        trace_from_dict(doc, where="mine")
    assert str(info.value) == (
        f'mine: samples["2"][4] is {shown}; expected seconds from 1e-09 to 1e+06'
    )


def _counted_rows(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The length of each row of seconds ``_trace._samples`` checks from now on."""
    checked: list[int] = []
    real = _trace._samples

    def counted(doc: Any, *args: Any) -> dict[int, tuple[float, ...]]:
        checked.extend(len(row) for row in doc["samples"].values())
        return real(doc, *args)

    monkeypatch.setattr(_trace, "_samples", counted)
    return checked


def test_from_file_checks_each_recorded_second_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ReplayWorkload.from_file checks each second once: the loader's, not again by the replay."""
    path = write(tmp_path, json.loads(dump_trace(synthetic())))
    checked = _counted_rows(monkeypatch)
    ReplayWorkload.from_file(path)
    assert sum(checked) == 16 * 12


def test_from_file_checks_each_second_the_fast_path_refuses_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Seconds written as ints are checked one by one, and each once by from_file."""
    doc = json.loads(dump_trace(synthetic()))
    doc["samples"]["2"] = [1] * 12
    path = write(tmp_path, doc)
    calls: list[object] = []

    def counted(value: object) -> float | None:
        calls.append(value)
        return as_seconds(value)

    monkeypatch.setattr(_trace, "as_seconds", counted)
    replay = ReplayWorkload.from_file(path)
    assert calls == [1] * 12
    assert replay.true_time(2) == pytest.approx(1.0)


def test_a_loaded_trace_changed_in_place_is_checked_by_the_replay(tmp_path: Path) -> None:
    """A trace from_file loaded, then given a bad second, is checked when replayed again."""
    replay = ReplayWorkload.from_file(write(tmp_path, json.loads(dump_trace(synthetic()))))
    replay.trace.samples[2] = (-1.0,) * 12
    with pytest.raises(TraceError, match=r'samples\["2"\]\[0\] is -1.0'):
        ReplayWorkload(replay.trace)
    loaded = load_trace(tmp_path / "t.json")
    loaded.samples[3] = (math.nan,) * 12
    with pytest.raises(TraceError, match=r'samples\["3"\]\[0\] is NaN'):
        ReplayWorkload(loaded)


def test_a_subclass_from_file_replays_the_trace_checked_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A subclass's own __init__ runs under from_file, which still checks each second once."""

    class Named(ReplayWorkload):
        def __init__(self, trace: Trace, *, seed: int = 0, name: str = "") -> None:
            super().__init__(trace, seed=seed, name=f"mine-{name}")

    path = write(tmp_path, json.loads(dump_trace(synthetic())))
    checked = _counted_rows(monkeypatch)
    replay = Named.from_file(path)
    assert replay.name == "mine-t.json" and sum(checked) == 16 * 12
    assert replay.landscape() == ReplayWorkload(synthetic()).landscape()
