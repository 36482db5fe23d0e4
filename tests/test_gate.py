"""The confirmation's claim on the race's budget (chunktune._gate.NoiseGate.reserve)."""

from __future__ import annotations

import math

import chunktune
from chunktune._evidence import Comparison
from chunktune._gate import NoiseGate


class Evidence:
    """A leader 10% ahead of native in 6 rounds, at 5% noise a pair."""

    def compare(self, a: int | None, b: int | None) -> Comparison:
        return Comparison(diff=math.log(0.9), se=0.01, n=6)

    def pair_sigma(self) -> tuple[float, int]:
        return 0.05, 10


class Field:
    """The race's field as the gate reads it: a leader, until it is gone."""

    def __init__(self) -> None:
        self.p = chunktune.load_settings().get_policy("balanced")
        self.ev = Evidence()
        self.need = -math.log1p(-self.p.margin)
        self.leader: int | None = 4

    def front(self) -> int | None:
        return self.leader


class Pace:
    """Records each reserve, in pairs."""

    def __init__(self) -> None:
        self.reserved: list[int] = []

    def reserve(self, pairs: int) -> None:
        self.reserved.append(pairs)


def test_a_reserve_held_for_a_leader_that_is_gone_is_released() -> None:
    """Pairs held back for a leader are given back to the race once no judged leader is left."""
    field, pace = Field(), Pace()
    gate = NoiseGate(field, pace, stretch=None)  # type: ignore[arg-type]
    gate.reserve()
    assert pace.reserved and pace.reserved[-1] >= field.p.confirm_min_pairs
    field.leader = None  # raced out; only fresh refinements, not yet judged, are live
    gate.reserve()
    assert pace.reserved[-1] == 0
