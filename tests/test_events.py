"""Progress events a resolve reports while it waits and measures."""

from __future__ import annotations

import pytest

import chunktune
from chunktune.sim import SimulatedWorkload


@pytest.mark.anyio
async def test_events_before_the_first_round_say_round_zero() -> None:
    """The candidates and warmup events come before any round: their round is 0, not 1."""
    events: list[chunktune.ProgressEvent] = []
    workload = SimulatedWorkload.from_layout("blocked", num_envs=256, nthread=4)
    await chunktune.resolve(workload, policy="quick", on_progress=events.append)
    early = [e for e in events if e.kind in ("candidates", "warmup")]
    assert early and {e.round for e in early} == {0}
    assert min(e.round for e in events if e.kind == "probe") == 1


def test_an_event_given_only_its_kind_has_empty_fields() -> None:
    """ProgressEvent(kind=...) names no chunk, time, round, candidates or message."""
    event = chunktune.ProgressEvent(kind="done")
    assert event.chunk_size is None and event.seconds is None
    assert (event.round, event.candidates, event.elapsed_s, event.message) == (0, (), 0.0, "")


def test_an_event_is_built_by_keyword_only() -> None:
    """ProgressEvent's fields are given by name: ProgressEvent("probe") is a TypeError."""
    with pytest.raises(TypeError, match="positional"):
        chunktune.ProgressEvent("probe")  # type: ignore[call-arg]


def test_an_event_cannot_be_changed_by_the_callback_it_reaches() -> None:
    """A ProgressEvent is frozen: a callback that sets a field gets an error, the event stays."""
    import attrs

    event = chunktune.ProgressEvent(kind="probe", chunk_size=8, seconds=0.5)
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        event.seconds = 0.0  # type: ignore[misc]
    assert event.seconds == 0.5
