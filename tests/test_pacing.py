"""What the budget pays for, and how far it stretches: the pace of one sweep."""

from __future__ import annotations

import attrs
import pytest

import chunktune
from chunktune._pacing import NOISE_ROUNDS, SLACK, Pace, first_calls, least_budget


class Calls:
    """The probe's side of a pace: its policy, its calls and the seconds they took."""

    def __init__(
        self,
        calls: int,
        elapsed_s: float,
        hard_limit_s: float = 40.0,
        limit_s: float | None = None,
    ) -> None:
        balanced = chunktune.load_settings().get_policy("balanced")
        self.policy = attrs.evolve(balanced, extend_budget=True, hard_limit_s=hard_limit_s)
        self.limit_s = limit_s  # what the resolve's hard limit leaves (None: it did not wait)
        self.calls, self.elapsed_s = calls, elapsed_s

    def elapsed(self) -> float:
        return self.elapsed_s


def test_a_stretch_to_less_than_the_budget_never_shrinks_it() -> None:
    """Asked to stretch 10 s to 5 s, the budget and the race's share stay as they were."""
    pace = Pace(Calls(4, 2.0))  # type: ignore[arg-type]
    race_limit = pace.race_limit
    assert pace.extend_to(5.0)
    assert pace.budget_s == 10.0 and pace.race_limit == race_limit


def test_pairs_after_the_race_never_stretch_past_the_cap() -> None:
    """At 30 s spent, 10 more pairs would end past the 36 s cap: refused, the budget unchanged."""
    pace = Pace(Calls(30, 30.0))  # type: ignore[arg-type]
    assert pace.cap_s == 36.0
    assert pace.cap_s < 30.0 + 2 * 10 * SLACK
    assert not pace.extend_for(10, racing=False)
    assert pace.budget_s == 10.0
    assert pace.extend_for(2, racing=False) and pace.budget_s == 30.0 + 2 * 2 * SLACK


def test_pairs_during_the_race_stretch_to_what_is_spent_plus_the_pairs() -> None:
    """9 s spent: 2 pairs stretch to 9 s plus their price, past twice their price (the share)."""
    pace = Pace(Calls(9, 9.0))  # type: ignore[arg-type]
    pair_s = 2 * 2 * SLACK
    assert 9.0 + pair_s > pair_s / 0.5 > 0 and 9.0 + pair_s > 10.0
    assert pace.extend_for(2, racing=True)
    assert pace.budget_s == 9.0 + pair_s


def test_the_cap_pays_the_race_its_share_and_the_confirmation_what_is_left() -> None:
    """During the race the cap's pairs are its confirmation share's; after it, what is left."""
    pace = Pace(Calls(9, 9.0))  # type: ignore[arg-type]
    per_pair = 2 * SLACK
    assert pace.pairs_at_cap(64, racing=True) == int(36.0 * 0.5 / per_pair)
    assert pace.pairs_at_cap(64, racing=False) == int((36.0 - 9.0) / per_pair)


def test_a_stretch_to_exactly_the_cap_is_allowed() -> None:
    """The cap is the most the budget may reach: stretching to exactly 36 s of 36 s succeeds."""
    pace = Pace(Calls(4, 2.0))  # type: ignore[arg-type]
    assert pace.extend_to(pace.cap_s)
    assert pace.budget_s == pace.cap_s == 36.0


def test_pairs_after_the_race_that_end_exactly_at_the_cap_are_allowed() -> None:
    """6 s spent at 1 s a call: 15 pairs end at exactly the 36 s cap, and are paid for."""
    pace = Pace(Calls(7, 6.0))  # type: ignore[arg-type]
    assert pace.per_call() == 1.0 and pace.cap_s == 6.0 + 2 * 15 * 1.0
    assert pace.extend_for(15, racing=False)
    assert pace.budget_s == 36.0


def test_a_resolve_that_waited_past_the_stretch_keeps_its_whole_budget() -> None:
    """A hard limit leaving less than the budget caps no stretch below it: the cap is the budget."""
    pace = Pace(Calls(4, 2.0, limit_s=8.0))  # type: ignore[arg-type]
    assert pace.cap_s == pace.budget_s == 10.0
    assert pace.extend_to(10.0)


def test_the_opening_runs_when_what_is_left_pays_for_exactly_the_least_calls() -> None:
    """8 s left at 0.5 s a call pays for exactly 16 calls: an opening that needs 16 opens."""
    pace = Pace(Calls(4, 2.0))  # type: ignore[arg-type]
    call_s = 0.5 / SLACK
    assert (pace.budget_s - 2.0) / (SLACK * call_s) == 16
    assert pace.opening_room(call_s, 3, 16, 10) == 1
    assert pace.opening_room(call_s, 3, 17, 10) == 0


def test_the_least_budget_pays_the_confirmation_s_first_pairs_even_past_its_share() -> None:
    """A small confirm_share: the least budget is the race's calls plus the first pairs' price."""
    balanced = chunktune.load_settings().get_policy("balanced")
    race_calls, pair_calls = first_calls(balanced)
    need = (balanced.prime + 1) + SLACK * race_calls  # the race's calls at 1 s each
    small = attrs.evolve(balanced, confirm_share=0.1)
    assert need / 0.9 < need + SLACK * pair_calls
    assert least_budget(small, 1.0) == pytest.approx(need + SLACK * pair_calls)
    large = attrs.evolve(balanced, confirm_share=0.9)
    assert least_budget(large, 1.0) == pytest.approx(need / 0.1)


def test_a_reserve_holds_back_both_calls_of_each_pair() -> None:
    """3 pairs at 1 s a call hold back 6 calls: past the share, the race ends sooner."""
    pace = Pace(Calls(6, 6.0 / SLACK))  # type: ignore[arg-type]
    assert pace.per_call() == pytest.approx(1.0)
    pace.reserve(3)
    assert pace.held_s == pytest.approx(6.0) and pace.holding()
    assert pace.race_limit == pytest.approx(pace.budget_s - 6.0)
    pace.reserve(2)  # 4 s: under the 5 s share, which is the floor again
    assert not pace.holding() and pace.race_limit == pytest.approx(5.0)


def test_pairs_after_the_race_that_the_budget_already_pays_for_never_shrink_it() -> None:
    """2 s spent and 1 pair (about 2.3 s) well within 10 s: allowed, the budget stays 10 s."""
    pace = Pace(Calls(2, 2.0))  # type: ignore[arg-type]
    assert pace.extend_for(1, racing=False)
    assert pace.budget_s == 10.0


def test_with_no_price_yet_the_budget_pays_for_every_pair_asked() -> None:
    """Calls that took no time give no price: affordable_pairs and pairs_at_cap give the cap."""
    pace = Pace(Calls(0, 0.0))  # type: ignore[arg-type]
    assert pace.per_call() == 0.0
    assert pace.affordable_pairs(8) == 8
    assert pace.pairs_at_cap(8, racing=False) == 8


def test_a_policy_that_does_not_confirm_needs_no_confirmation_calls() -> None:
    """confirm false: the fewest calls are the race's alone, not one for a confirmation."""
    balanced = chunktune.load_settings().get_policy("balanced")
    rounds = balanced.warmup + max(balanced.min_rounds, NOISE_ROUNDS)
    assert first_calls(attrs.evolve(balanced, confirm=False)) == (2 * rounds, 0)


def test_the_least_budget_scales_with_the_mean_call() -> None:
    """At 0.5 s a call, every part of the least budget (the first pairs too) costs half."""
    balanced = chunktune.load_settings().get_policy("balanced")
    small = attrs.evolve(balanced, confirm_share=0.1)
    assert least_budget(small, 0.5) == pytest.approx(least_budget(small, 1.0) / 2)
    large = attrs.evolve(balanced, confirm_share=0.9)
    assert least_budget(large, 0.5) == pytest.approx(least_budget(large, 1.0) / 2)


def test_a_policy_that_may_not_stretch_is_capped_at_its_budget() -> None:
    """extend_budget false, a hard limit set: the cap is the 10 s budget, and 11 s is refused."""
    calls = Calls(4, 2.0)
    calls.policy = attrs.evolve(calls.policy, extend_budget=False)
    pace = Pace(calls)  # type: ignore[arg-type]
    assert pace.cap_s == pace.budget_s == 10.0
    assert not pace.extend_to(11.0)


def test_a_resolve_that_waited_stretches_only_to_the_headroom_its_limit_leaves() -> None:
    """30 s of a 40 s limit left: the cap keeps the limit's last tenth (4 s) free, 26 s."""
    pace = Pace(Calls(4, 2.0, limit_s=30.0))  # type: ignore[arg-type]
    assert pace.cap_s == pytest.approx(26.0)


def test_a_stretch_past_the_cap_is_refused_and_changes_nothing() -> None:
    """Asked for 37 s past the 36 s cap: False, the budget and the race's share as they were."""
    pace = Pace(Calls(4, 2.0))  # type: ignore[arg-type]
    race_limit = pace.race_limit
    assert not pace.extend_to(37.0)
    assert pace.budget_s == 10.0 and pace.race_limit == race_limit


def test_pairs_during_the_race_stretch_the_whole_budget_so_its_share_pays_for_them() -> None:
    """2 s spent, 10 pairs: the budget doubles their price (a 50% share), the race's half too."""
    pace = Pace(Calls(4, 2.0))  # type: ignore[arg-type]
    pair_s = 2 * 10 * pace.per_call()
    assert pair_s / 0.5 > 2.0 + pair_s
    assert pace.extend_for(10, racing=True)
    assert pace.budget_s == pytest.approx(pair_s / 0.5)
    assert pace.race_limit == pytest.approx(pair_s)


def test_pairs_during_a_race_without_a_confirmation_share_are_added_to_what_is_spent() -> None:
    """confirm false (no share): racing, pairs are added to the 2 s spent, as after the race."""
    calls = Calls(4, 2.0)
    calls.policy = attrs.evolve(calls.policy, confirm=False)
    pace = Pace(calls)  # type: ignore[arg-type]
    pair_s = 2 * 10 * pace.per_call()
    assert pace.extend_for(10, racing=True)
    assert pace.budget_s == pytest.approx(2.0 + pair_s)
    # and the cap pays for the pairs that fit in what is left of it, as after the race
    assert pace.pairs_at_cap(64, racing=True) == int((36.0 - 2.0) / (2 * pace.per_call()))


def test_before_any_call_the_mean_call_is_zero_and_a_round_holds_the_whole_field() -> None:
    """No call yet, no price: the mean call is 0 s and one more round measures every candidate."""
    pace = Pace(Calls(0, 0.0))  # type: ignore[arg-type]
    assert pace.mean_call() == 0.0
    assert pace.round_room(5) == 5


def test_one_call_is_priced_at_its_own_time() -> None:
    """After one call of 1 s, a call costs that second plus a sixth."""
    assert Pace(Calls(1, 1.0)).per_call() == SLACK  # type: ignore[arg-type]


def test_a_race_past_its_share_has_room_for_no_new_candidate() -> None:
    """10 s spent of a 5 s race share: room for none, never a negative count."""
    pace = Pace(Calls(10, 10.0))  # type: ignore[arg-type]
    assert pace.room_for_new(3, 3) == 0


def test_an_opening_with_no_price_yet_opens_the_whole_field() -> None:
    """Calls that took no time: the opening gives every candidate of the field its rounds."""
    assert Pace(Calls(4, 2.0)).opening_room(0.0, 3, 16, 10) == 10  # type: ignore[arg-type]


def test_an_opening_the_budget_pays_many_times_over_opens_no_wider_than_the_field() -> None:
    """At 1 ms a call the share would open hundreds: the opening is the field's 3, no more."""
    pace = Pace(Calls(4, 2.0))  # type: ignore[arg-type]
    assert pace.opening_room(0.001, 3, 16, 3) == 3


def test_an_opening_after_the_race_s_share_is_spent_opens_nothing() -> None:
    """6 s spent of a 5 s race share, budget left for the least calls: the opening is 0."""
    pace = Pace(Calls(6, 6.0))  # type: ignore[arg-type]
    call_s = 0.1 / SLACK
    assert (pace.budget_s - 6.0) / (SLACK * call_s) >= 16
    assert pace.opening_room(call_s, 3, 16, 10) == 0
