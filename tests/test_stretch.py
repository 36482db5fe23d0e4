"""Budget stretches of an extend_budget sweep: when they are told."""

from __future__ import annotations

from typing import Any

import attrs

import chunktune
from chunktune._pacing import least_budget
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


class Room:
    """A pace whose cap pays for ``at_cap`` confirmation pairs; it records what is asked of it."""

    def __init__(self, at_cap: int = 40, *, cap_s: float = 36.0) -> None:
        self.budget_s, self.cap_s, self.at_cap = 10.0, cap_s, at_cap
        self.asked: list[int] = []

    def pairs_at_cap(self, cap: int, *, racing: bool) -> int:
        return min(cap, self.at_cap)

    def extend_for(self, pairs: int, *, racing: bool) -> bool:
        self.asked.append(pairs)
        self.budget_s = 20.0
        return True

    def extend_to(self, budget_s: float) -> bool:
        self.budget_s = max(self.budget_s, budget_s)
        return True


def two(pairs: int) -> float:
    """A confirmation's last bound, whatever its plan: z = 2."""
    return 2.0


def test_a_gain_the_cap_cannot_confirm_half_the_time_is_no_reason_to_stretch() -> None:
    """400 pairs for even odds against a cap of 40: no stretch is asked for, none is told."""
    probe, pace = Told(), Room(40)
    stretch = Stretch(probe, pace)  # type: ignore[arg-type]
    assert not stretch.pairs(0.01, 0.1, two, racing=True)
    assert pace.asked == [] and probe.events == []


def test_after_the_race_the_stretch_is_for_the_whole_plan_the_cap_allows() -> None:
    """After the race the stretch asks for the cap's 40 pairs, not the 9 that 80% power takes."""
    pace = Room(40)
    assert Stretch(Told(), pace).pairs(0.05, 0.05, two, racing=False)  # type: ignore[arg-type]
    assert pace.asked == [40]


def test_during_the_race_the_stretch_is_for_80_percent_power_and_at_least_the_first_look() -> None:
    """A 5% gain at 5% noise asks for 9 pairs; one needing a single pair asks for min_pairs."""
    pace = Room(40)
    stretch = Stretch(Told(), pace)  # type: ignore[arg-type]
    assert stretch.pairs(0.05, 0.05, two, racing=True)
    assert stretch.pairs(0.5, 0.05, two, racing=True)
    assert pace.asked == [9, Told().policy.confirm_min_pairs]


def test_a_slow_pool_with_no_room_above_the_budget_is_not_stretched() -> None:
    """A cap no higher than the budget leaves a slow pool unstretched, and nothing is told."""
    probe, pace = Told(), Room(cap_s=10.0)
    assert not Stretch(probe, pace).slow_pool(0.1)  # type: ignore[arg-type]
    assert pace.budget_s == 10.0 and probe.events == []


class Spent(Told):
    """A probe whose sweep has spent ``elapsed_s`` seconds so far."""

    def __init__(self, elapsed_s: float) -> None:
        super().__init__()
        self.elapsed_s = elapsed_s

    def elapsed(self) -> float:
        return self.elapsed_s


def test_a_stretch_the_sweep_did_not_use_adds_no_note_to_the_reason() -> None:
    """Stretched to 20 s but done in 8 s: no note; done in 12 s: the note names the budget."""
    pace = Pace()
    pace.budget_s = 20.0
    assert Stretch(Spent(8.0), pace).spent() == ""  # type: ignore[arg-type]
    assert Stretch(Spent(12.0), pace).spent() == "; the budget was extended to 20 s"  # type: ignore[arg-type]


def test_a_race_whose_budget_is_at_its_cap_is_not_stretched() -> None:
    """An undecided race with the budget already at the cap gets no stretch and no event."""
    probe, pace = Told(), Room(cap_s=10.0)
    assert not Stretch(probe, pace).race(3, 0.05)  # type: ignore[arg-type]
    assert pace.budget_s == 10.0 and probe.events == []


def test_a_cap_short_of_the_first_look_is_no_reason_to_stretch() -> None:
    """A cap paying for 2 pairs, under min_pairs 4, is not stretched to, however clear the gain."""
    pace = Room(2)
    assert not Stretch(Told(), pace).pairs(0.5, 0.05, two, racing=True)  # type: ignore[arg-type]
    assert pace.asked == []


def test_a_cap_of_exactly_the_first_look_is_stretched_to() -> None:
    """A cap paying for exactly min_pairs pairs is enough: a clear gain stretches to them."""
    least = Told().policy.confirm_min_pairs
    pace = Room(least)
    assert Stretch(Told(), pace).pairs(0.5, 0.05, two, racing=True)  # type: ignore[arg-type]
    assert pace.asked == [least]


def test_a_gain_the_cap_confirms_as_often_as_not_is_stretched_for() -> None:
    """Even odds at the cap (25 of its 40 pairs), short of 80% power (50): still stretched to 40."""
    for racing in (True, False):
        pace = Room(40)
        assert Stretch(Told(), pace).pairs(0.02, 0.05, two, racing=racing)  # type: ignore[arg-type]
        assert pace.asked == [40]


class RaceShare(Room):
    """A pace whose race-scaled cap pays for 10 pairs, the cap after the race for 40."""

    def pairs_at_cap(self, cap: int, *, racing: bool) -> int:
        return min(cap, 10 if racing else 40)


def test_during_the_race_the_stretch_stays_within_what_the_race_scaled_cap_pays() -> None:
    """80% power takes 13 pairs, the race-scaled cap pays 10: the race stretches for 10."""
    pace = RaceShare()
    assert Stretch(Told(), pace).pairs(0.04, 0.05, two, racing=True)  # type: ignore[arg-type]
    assert pace.asked == [10]


def widening(pairs: int) -> float:
    """A test's last bound that grows with its plan: 2.1 at the first look's 4 pairs, 3 at 40."""
    return 2.0 + pairs / 40


def test_even_odds_are_judged_at_the_last_bound_of_the_plan_the_cap_pays() -> None:
    """At the cap's 40 pairs (z = 3) a 2% gain needs 56 for even odds: no stretch (at z 2.1, 28)."""
    pace = Room(40)
    assert not Stretch(Told(), pace).pairs(0.02, 0.05, widening, racing=False)  # type: ignore[arg-type]
    assert pace.asked == []


def test_the_cap_a_reason_names_is_there_only_above_the_budget_and_with_extend_budget() -> None:
    """cap(): the cap when above time_budget_s; None at exactly the budget or without extending."""
    probe = Told()
    budget = probe.policy.time_budget_s
    assert Stretch(probe, Room(cap_s=36.0)).cap() == 36.0  # type: ignore[arg-type]
    assert Stretch(probe, Room(cap_s=budget)).cap() is None  # type: ignore[arg-type]
    probe.policy = attrs.evolve(probe.policy, extend_budget=False)
    assert Stretch(probe, Room(cap_s=36.0)).cap() is None  # type: ignore[arg-type]


def test_a_slow_pool_whose_need_is_exactly_the_cap_is_stretched_to_the_cap() -> None:
    """Judging one candidate needs exactly the cap's seconds: the budget stretches to the cap."""
    probe = Told()
    pace = Room(cap_s=least_budget(probe.policy, 2.0))
    assert Stretch(probe, pace).slow_pool(2.0)  # type: ignore[arg-type]
    assert pace.budget_s == pace.cap_s and [k for k, _ in probe.events] == ["extended"]


def test_without_extend_budget_no_stretch_is_made() -> None:
    """extend_budget off: no slow pool, race, gain or plan stretches the budget or is told."""
    probe = Told()
    probe.policy = attrs.evolve(probe.policy, extend_budget=False)
    pace = Room(cap_s=36.0)
    stretch = Stretch(probe, pace)  # type: ignore[arg-type]
    assert not stretch.slow_pool(0.1) and not stretch.race(3, 0.05)
    assert not stretch.pairs(0.05, 0.05, two, racing=True)
    stretch.plan(1)
    assert pace.budget_s == 10.0 and pace.asked == [] and probe.events == []


def test_a_slow_pool_needing_more_than_the_cap_is_not_stretched() -> None:
    """Judging one candidate needs a hair more than the cap: no stretch, nothing told."""
    probe = Told()
    pace = Room(cap_s=least_budget(probe.policy, 2.0) * (1 - 1e-9))
    assert not Stretch(probe, pace).slow_pool(2.0)  # type: ignore[arg-type]
    assert pace.budget_s == 10.0 and probe.events == []


def test_a_slow_pool_is_stretched_a_tenth_past_what_it_needs() -> None:
    """With room under the cap, a slow pool's budget becomes 1.1 times the least that judges one."""
    probe = Told()
    pace = Room(cap_s=1000.0)
    assert Stretch(probe, pace).slow_pool(2.0)  # type: ignore[arg-type]
    assert pace.budget_s == 1.1 * least_budget(probe.policy, 2.0)


def test_an_undecided_race_doubles_the_budget_up_to_the_cap() -> None:
    """An undecided race: 10 s becomes 20 s under a 36 s cap, and 15 s under a 15 s cap, told."""
    for cap_s, doubled in ((36.0, 20.0), (15.0, 15.0)):
        probe, pace = Told(), Room(cap_s=cap_s)
        assert Stretch(probe, pace).race(3, 0.05)  # type: ignore[arg-type]
        assert pace.budget_s == doubled and probe.events == [("extended", doubled)]


def test_even_odds_are_judged_with_no_power_to_spare() -> None:
    """A 2% gain at 5% noise needs 25 pairs for even odds: a cap of 30 stretches (39 would not)."""
    pace = Room(30)
    assert Stretch(Told(), pace).pairs(0.02, 0.05, two, racing=False)  # type: ignore[arg-type]
    assert pace.asked == [30]


def test_a_cap_paying_exactly_the_pairs_for_even_odds_is_stretched_to() -> None:
    """A 5% gain at 5% noise needs exactly 4 pairs for even odds: a cap of 4 pairs stretches."""
    pace = Room(4)
    assert Stretch(Told(), pace).pairs(0.05, 0.05, two, racing=False)  # type: ignore[arg-type]
    assert pace.asked == [4]


class Refusing(Room):
    """A pace that records each stretch asked of it, with its ``racing``, and grants none."""

    def __init__(self, at_cap: int = 40) -> None:
        super().__init__(at_cap)
        self.racing: list[bool] = []

    def extend_for(self, pairs: int, *, racing: bool) -> bool:
        self.asked.append(pairs)
        self.racing.append(racing)
        return False


def test_a_stretch_the_pace_refuses_is_no_stretch_and_is_not_told() -> None:
    """The pace refuses to extend for the pairs: pairs() is False, plan() tells nothing."""
    probe, pace = Told(), Refusing()
    stretch = Stretch(probe, pace)  # type: ignore[arg-type]
    assert not stretch.pairs(0.05, 0.05, two, racing=False)
    stretch.plan(1)
    assert pace.asked == [40, 40] and pace.racing == [False, False] and probe.events == []


def test_the_plan_stretches_only_when_what_is_affordable_falls_short_of_it() -> None:
    """plan(): 40 affordable of a 40-pair plan asks nothing; 39 asks for 40 pairs and is told."""
    probe, pace = Told(), Room(40)
    stretch = Stretch(probe, pace)  # type: ignore[arg-type]
    stretch.plan(40)
    assert pace.asked == [] and probe.events == []
    stretch.plan(39)
    assert pace.asked == [40] and probe.events == [("extended", 20.0)]


def test_the_plan_is_priced_as_after_the_race() -> None:
    """plan() asks for the cap's pairs after the race (40), not the race-scaled cap's (10)."""
    pace = RaceShare()
    Stretch(Told(), pace).plan(5)  # type: ignore[arg-type]
    assert pace.asked == [40]


def test_a_budget_not_stretched_or_not_outrun_adds_no_note_to_the_reason() -> None:
    """No note at a budget of exactly time_budget_s, at exactly that elapsed, or when off."""
    pace = Pace()
    pace.budget_s = 10.0
    assert Stretch(Spent(12.0), pace).spent() == ""  # type: ignore[arg-type]
    pace.budget_s = 20.0
    assert Stretch(Spent(10.0), pace).spent() == ""  # type: ignore[arg-type]
    off = Spent(12.0)
    off.policy = attrs.evolve(off.policy, extend_budget=False)
    assert Stretch(off, pace).spent() == ""  # type: ignore[arg-type]


def test_a_budget_of_exactly_time_budget_s_is_no_news() -> None:
    """announce_if_news at a budget still exactly time_budget_s tells nothing."""
    probe, pace = Told(), Pace()
    Stretch(probe, pace).announce_if_news("a reason")  # type: ignore[arg-type]
    assert probe.events == []


def test_a_stretch_of_exactly_a_tenth_past_the_last_told_is_not_news() -> None:
    """Told at 10.3 s, a budget of exactly 1.1 times that is no news; a hair more is."""
    probe, pace = Told(), Pace()
    stretch = Stretch(probe, pace)  # type: ignore[arg-type]
    for budget in (10.3, 1.1 * 10.3, 1.1 * 10.3 + 1e-9):
        pace.budget_s = budget
        stretch.announce_if_news("a reason")
    assert probe.events == [("extended", 10.3), ("extended", 1.1 * 10.3 + 1e-9)]
