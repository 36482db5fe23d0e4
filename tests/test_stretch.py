"""Budget stretches of an extend_budget sweep: when they are told."""

from __future__ import annotations

from typing import Any

import attrs

import chunktune
from chunktune._stretch import Stretch


class Told:
    """The probe's side of a stretch: its policy and the events it emits."""

    def __init__(self) -> None:
        balanced = chunktune.load_settings().get_policy("balanced")
        self.policy = attrs.evolve(balanced, extend_budget=True, hard_limit_s=40.0)
        self.events: list[tuple[str, Any]] = []

    def emit(self, kind: str, **fields: Any) -> None:
        self.events.append((kind, fields.get("seconds")))


class Pace:
    budget_s = 10.0


def test_the_first_stretch_is_told_however_small_and_later_ones_by_a_tenth() -> None:
    """10 -> 10.3 s is an `extended` event; 10.5 s is not news; 11.4 s is."""
    probe, pace = Told(), Pace()
    stretch = Stretch(probe, pace)  # type: ignore[arg-type]
    for budget in (10.3, 10.5, 11.4):
        pace.budget_s = budget
        stretch.announce_if_news("a reason")
    assert probe.events == [("extended", 10.3), ("extended", 11.4)]
