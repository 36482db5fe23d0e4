"""Trace loading where mutation round 78 found no test: what a plausible one-line bug in
``_trace`` broke while every earlier test still passed."""

from __future__ import annotations

from pathlib import Path

import attrs
import pytest
from test_trace import synthetic

from chunktune import TraceError
from chunktune._reading import MAX_NESTING
from chunktune._trace import dump_trace, load_trace, trace_from_dict


def test_an_order_listing_a_size_twice_is_refused() -> None:
    """A round's order that lists a size twice (every size still among its calls): TraceError."""
    doc = synthetic(rounds=2).to_dict()
    sizes = list(range(1, 17))
    doc["order"] = [sizes, [1, 1, *sizes[1:]]]  # 17 calls, every size among them
    with pytest.raises(TraceError, match=r"order\[1\] is \[1, 1, 2,.*each once"):
        trace_from_dict(doc)
    doc["order"] = [sizes, sizes[::-1]]
    assert trace_from_dict(doc).order[1] == tuple(sizes[::-1])


@pytest.mark.parametrize(("levels", "refused"), [(MAX_NESTING, False), (MAX_NESTING + 1, True)])
def test_a_trace_nested_one_level_past_the_cap_is_refused_and_at_it_read(
    tmp_path: Path, levels: int, refused: bool
) -> None:
    """A field nested MAX_NESTING levels below the trace reads; one level more is a TraceError."""
    text = dump_trace(synthetic(rounds=2))
    path = tmp_path / "t.json"
    path.write_text(text[: text.rindex("}")] + ', "x": ' + "[" * levels + "]" * levels + "}\n")
    if refused:
        with pytest.raises(TraceError, match=f"nested more than {MAX_NESTING} levels deep"):
            load_trace(path)
    else:
        assert load_trace(path).rounds == 2


def test_selecting_rounds_of_a_trace_whose_order_misses_rounds_drops_the_order() -> None:
    """A Trace built in code with an order of fewer rounds: select_rounds keeps no order."""
    whole = synthetic(rounds=4)
    partial = attrs.evolve(whole, order=(tuple(range(1, 17)),))  # one round's order of four
    picked = partial.select_rounds([0, 3])
    assert picked.order == () and picked.samples[4] == (whole.samples[4][0], whole.samples[4][3])
