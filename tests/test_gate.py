"""The confirmation's claim on the race's budget (chunktune._gate.NoiseGate.reserve)."""

from __future__ import annotations

import math

import attrs
import pytest

import chunktune
from chunktune._confirm import pairs_needed, plan_bounds
from chunktune._evidence import Comparison
from chunktune._gate import LAST_TRY_Z, NoiseGate


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


class Race:
    """A race as the noise gate reads it: a leader ``gain`` ahead of native, ``sigma`` a pair."""

    def __init__(self, gain: float, sigma: float, **policy: object) -> None:
        self.p = attrs.evolve(chunktune.load_settings().get_policy("balanced"), **policy)  # type: ignore[arg-type]
        self.need = -math.log1p(-self.p.margin)
        self.live = [4]
        self.diff, self.sigma = math.log1p(-gain), sigma
        self.ev = self

    def front(self) -> int | None:
        return 4

    def compare(self, a: int | None, b: int | None) -> Comparison:
        return Comparison(diff=self.diff, se=0.01, n=6)

    def pair_sigma(self) -> tuple[float, int]:
        return self.sigma, 10


class Budget:
    """What is left of the budget: ``pairs`` confirmation pairs."""

    def __init__(self, pairs: int) -> None:
        self.pairs = pairs

    def affordable_pairs(self, cap: int) -> int:
        return min(cap, self.pairs)


def too_noisy(race: Race, pairs: int) -> str | None:
    gate = NoiseGate(race, Budget(pairs), stretch=None)  # type: ignore[arg-type]
    return gate.too_noisy(final=True)


def test_a_leader_short_of_the_margin_is_gated_as_if_at_the_margin() -> None:
    """At the race's end a 0.5% leader is gated as if at the 1% margin: the margin keeps native."""
    assert too_noisy(Race(0.005, 0.03), 64) is None
    assert too_noisy(Race(0.01, 0.08), 64) is not None  # the gate still stops real noise


def test_the_race_end_tries_a_fair_chance_and_the_race_asks_for_even_odds() -> None:
    """The race's end tries a confirmation with one chance in three; mid-race asks even odds."""
    # a 5% gain at sigma 0.3: even odds take 99 pairs, one chance in three 49
    assert too_noisy(Race(0.05, 0.3), 64) is None
    assert too_noisy(Race(0.05, 0.35), 64) is not None  # one chance in three takes 67
    # mid-race the most it may gain (7.1%) at sigma 0.4: even odds take 91 pairs
    mid = NoiseGate(Race(0.05, 0.4), Budget(64), stretch=None)  # type: ignore[arg-type]
    assert mid.too_noisy(final=False) is not None
    assert NoiseGate(Race(0.05, 0.3), Budget(64), stretch=None).too_noisy(final=False) is None  # type: ignore[arg-type]


def test_a_budget_short_of_the_first_look_still_pays_for_its_pairs() -> None:
    """The confirmation runs its first look's pairs whatever is left: three needed are no gamble."""
    assert too_noisy(Race(0.05, 0.054), 2) is None
    assert too_noisy(Race(0.05, 0.1), 2) is not None


def test_an_undecided_race_is_one_whose_leader_clears_the_margin() -> None:
    """A leader within the noise but only 0.5% ahead of a 1% margin asks for no more rounds."""
    ahead = NoiseGate(Race(0.015, 0.05, confidence_z=2.0), Budget(64), stretch=None)  # type: ignore[arg-type]
    short = NoiseGate(Race(0.005, 0.05, confidence_z=2.0), Budget(64), stretch=None)  # type: ignore[arg-type]
    assert ahead.undecided() == pytest.approx((4, 0.015))
    assert short.undecided() is None


def test_an_extending_policy_holds_no_pairs_back_from_the_race() -> None:
    """patient stretches its budget for the confirmation's pairs, so its race reserves none."""
    field, pace = Field(), Pace()
    field.p = chunktune.load_settings().get_policy("patient")
    NoiseGate(field, pace, stretch=None).reserve()  # type: ignore[arg-type]
    assert pace.reserved == []


def test_a_racing_leader_that_cannot_reach_the_margin_is_not_called_too_noisy() -> None:
    """Mid-race, a size that can at best gain 0.5%, under the 1% margin, is not called too noisy."""
    behind = NoiseGate(Race(-0.015, 0.3), Budget(4), stretch=None)  # type: ignore[arg-type]
    assert behind.too_noisy(final=False) is None
    level = NoiseGate(Race(0.0, 0.3), Budget(4), stretch=None)  # type: ignore[arg-type]
    assert level.too_noisy(final=False) is not None  # plausibly past the margin: too noisy


class NoisyEvidence(Evidence):
    """The same 10% leader, at 20% noise a pair: confirming it takes more than the first look."""

    def pair_sigma(self) -> tuple[float, int]:
        return 0.2, 10


class ShortEvidence(Evidence):
    """A leader 0.5% ahead of native: one standard error below that, under the 1% margin."""

    def compare(self, a: int | None, b: int | None) -> Comparison:
        return Comparison(diff=math.log(0.995), se=0.01, n=6)


def test_the_reserve_is_the_pairs_for_80_percent_power_at_the_plan_s_last_bound() -> None:
    """The leader's gain less a standard error, at the whole plan's last bound, sets the pairs."""
    field, pace = Field(), Pace()
    field.ev = NoisyEvidence()
    NoiseGate(field, pace, stretch=None).reserve()  # type: ignore[arg-type]
    p = field.p
    gain = -math.log(0.9) - 0.01
    bound = plan_bounds(p.confirm_alpha, p.confirm_min_pairs, p.confirm_max_pairs).final
    assert pace.reserved == [math.ceil(pairs_needed(gain, 0.2, bound))]
    assert p.confirm_min_pairs < pace.reserved[0] < p.confirm_max_pairs


def test_a_leader_that_may_not_clear_the_margin_holds_nothing_back() -> None:
    """One standard error below its estimate a leader misses the margin: the race keeps it all."""
    field, pace = Field(), Pace()
    field.ev = ShortEvidence()
    NoiseGate(field, pace, stretch=None).reserve()  # type: ignore[arg-type]
    assert pace.reserved == [0]


def test_a_policy_without_the_noise_gate_is_never_too_noisy() -> None:
    """noise_gate = false measures on whatever the noise: sigma 0.35 no longer stops the race."""
    assert too_noisy(Race(0.05, 0.35), 64) is not None
    assert too_noisy(Race(0.05, 0.35, noise_gate=False), 64) is None


def test_a_level_leader_at_margin_0_is_not_called_too_noisy() -> None:
    """With margin 0 and nothing faster than native, there is no gain the noise could hide."""
    assert too_noisy(Race(0.0, 0.3, margin=0.0), 64) is None


def test_a_budget_short_of_the_first_look_pays_for_the_first_look_s_pairs() -> None:
    """Two pairs left, but a confirmation runs its first four: three needed are no gamble."""
    assert too_noisy(Race(0.05, 0.08), 2) is None


class Stretcher:
    """A stretch that records what it is asked and never stretches for pairs."""

    def __init__(self) -> None:
        self.asked: list[tuple[str, bool]] = []
        self.raced: list[tuple[int, float]] = []

    def pairs(self, gain: float, sigma: float, bound: object, *, racing: bool) -> bool:
        self.asked.append(("pairs", racing))
        return False

    def cap(self) -> float | None:
        return 50.0

    def race(self, lead: int, gain: float) -> bool:
        self.raced.append((lead, gain))
        return True


class Capped(Budget):
    """A budget that records whether its cap was asked for during the race."""

    def __init__(self, pairs: int, stretch: Stretcher) -> None:
        super().__init__(pairs)
        self.stretch = stretch

    def pairs_at_cap(self, cap: int, *, racing: bool) -> int:
        self.stretch.asked.append(("cap", racing))
        return min(cap, self.pairs)


@pytest.mark.parametrize("final", [pytest.param(False, id="racing"), pytest.param(True, id="end")])
def test_an_extending_gate_asks_the_stretch_as_racing_exactly_while_the_race_runs(
    final: bool,
) -> None:
    """Mid-race the stretch and the cap are asked for a race's pairs; at its end, for the plan's."""
    stretch = Stretcher()
    race = Race(0.05, 0.45, extend_budget=True, hard_limit_s=60.0)
    gate = NoiseGate(race, Capped(64, stretch), stretch)  # type: ignore[arg-type]
    assert gate.too_noisy(final=final) is not None
    assert stretch.asked == [("pairs", not final), ("cap", not final)]


def test_an_undecided_race_is_extended_only_by_an_extending_policy() -> None:
    """A leader ahead but within the noise gets another round only where the budget may stretch."""
    stretch = Stretcher()
    race = Race(0.015, 0.05, confidence_z=2.0, extend_budget=True, hard_limit_s=60.0)
    assert NoiseGate(race, Budget(64), stretch).extend_race()  # type: ignore[arg-type]
    [(lead, gain)] = stretch.raced
    assert lead == 4 and gain == pytest.approx(0.015)
    fixed = Race(0.015, 0.05, confidence_z=2.0)
    assert not NoiseGate(fixed, Budget(64), stretch).extend_race()  # type: ignore[arg-type]
    assert len(stretch.raced) == 1


class ExactEvidence(Evidence):
    """A leader exactly the 1% margin ahead of native, with no standard error."""

    def compare(self, a: int | None, b: int | None) -> Comparison:
        return Comparison(diff=math.log1p(-0.01), se=0.0, n=6)


def test_a_leader_exactly_at_the_margin_holds_its_pairs_back() -> None:
    """A leader whose gain less a standard error is exactly the margin still reserves its pairs."""
    field, pace = Field(), Pace()
    field.ev = ExactEvidence()
    NoiseGate(field, pace, stretch=None).reserve()  # type: ignore[arg-type]
    assert pace.reserved and pace.reserved[0] >= field.p.confirm_min_pairs


class LevelEvidence(Evidence):
    """A leader 1% ahead, one standard error (1%) of it: a gain of exactly 0 one error below."""

    def compare(self, a: int | None, b: int | None) -> Comparison:
        return Comparison(diff=-0.01, se=0.01, n=6)


def test_a_gain_of_exactly_0_at_margin_0_reserves_every_pair() -> None:
    """At margin 0 a leader whose gain less its error is 0 needs every pair: confirm_max_pairs."""
    field, pace = Field(), Pace()
    field.p = attrs.evolve(field.p, margin=0.0)
    field.need = 0.0
    field.ev = LevelEvidence()
    NoiseGate(field, pace, stretch=None).reserve()  # type: ignore[arg-type]
    assert pace.reserved == [field.p.confirm_max_pairs]


def test_a_leader_half_the_margin_ahead_is_priced_at_the_margin() -> None:
    """A 0.5% leader at sigma 0.05 is priced as a 1% gain (about 36 pairs), not 0.5% (144)."""
    assert too_noisy(Race(0.005, 0.05), 64) is None


def test_an_extending_policy_asks_even_odds_at_the_race_end_too() -> None:
    """A budget that may stretch asks the race's end for even odds, not one chance in three."""
    stretch = Stretcher()
    race = Race(0.05, 0.3, extend_budget=True, hard_limit_s=60.0)  # even odds: 99 pairs
    gate = NoiseGate(race, Capped(64, stretch), stretch)  # type: ignore[arg-type]
    assert gate.too_noisy(final=True) is not None
    assert stretch.asked == [("pairs", False), ("cap", False)]


def test_a_leader_exactly_the_margin_ahead_within_the_noise_is_undecided() -> None:
    """A leader exactly 1% ahead of the 1% margin, within the noise, asks for another round."""
    gate = NoiseGate(Race(0.01, 0.05, confidence_z=2.0), Budget(64), stretch=None)  # type: ignore[arg-type]
    assert gate.undecided() == pytest.approx((4, 0.01))


def test_a_policy_that_does_not_confirm_is_never_too_noisy() -> None:
    """confirm = false has no confirmation to price: sigma 0.35 does not stop it."""
    assert too_noisy(Race(0.05, 0.35, confirm=False), 64) is None


class ShortCap(Capped):
    """A budget that pays 16 pairs as it stands and 48 at its stretched cap."""

    def affordable_pairs(self, cap: int) -> int:
        return 16

    def pairs_at_cap(self, cap: int, *, racing: bool) -> int:
        return 48


def test_a_stretched_budget_too_short_names_what_its_cap_allows() -> None:
    """The extending gate's reason gives the pairs the budget stretched to its cap would pay."""
    stretch = Stretcher()
    race = Race(0.05, 0.45, extend_budget=True, hard_limit_s=60.0)
    reason = NoiseGate(race, ShortCap(64, stretch), stretch).too_noisy(final=True)  # type: ignore[arg-type]
    assert reason is not None and reason.endswith("the budget extended to 50 s allows 48")


class AtMargin(Race):
    """A race whose one live size may plausibly gain exactly the margin (no standard error)."""

    def compare(self, a: int | None, b: int | None) -> Comparison:
        return Comparison(diff=-self.need, se=0.0, n=6)


def test_a_racing_size_that_may_gain_exactly_the_margin_is_still_gated() -> None:
    """Mid-race, a size whose best plausible gain is exactly the margin is priced, not let go."""
    race = AtMargin(0.0, 0.3)
    assert -race.compare(4, None).lower(race.p.race_z) == race.need
    assert NoiseGate(race, Budget(4), stretch=None).too_noisy(final=False) is not None  # type: ignore[arg-type]


def _sigma_for(pairs: int, gain: float, bound: float, z: float) -> float:
    """The pair noise at which a ``gain`` takes exactly ``pairs`` pairs at odds ``z``."""
    sigma = math.sqrt(pairs) * gain / (bound + z)
    for _ in range(64):
        got = pairs_needed(gain, sigma, bound, power_z=z)
        if got == pairs:
            return sigma
        sigma = math.nextafter(sigma, 0.0 if got > pairs else math.inf)
    raise AssertionError(f"no sigma gives exactly {pairs} pairs")


def test_a_confirmation_that_takes_exactly_the_pairs_left_is_tried() -> None:
    """At the race's end, a fair chance needing exactly the 64 pairs left is no gamble."""
    p = Race(0.05, 0.3).p
    gain = -math.log1p(-0.05)
    bound = plan_bounds(p.confirm_alpha, p.confirm_min_pairs, 64).final
    sigma = _sigma_for(64, gain, bound, LAST_TRY_Z)
    assert too_noisy(Race(0.05, sigma), 64) is None
    assert too_noisy(Race(0.05, math.nextafter(sigma, math.inf) * 1.01), 64) is not None


def test_the_gate_at_the_race_s_end_says_what_its_best_measured() -> None:
    """The end's reason names the race's best: its own gain at stake, or the margin it missed."""
    ahead = too_noisy(Race(0.05, 0.4), 64)
    assert ahead is not None and "confirming the 5.0% gain of the race's best, 4, would" in ahead
    under = too_noisy(Race(0.005, 0.2), 64)
    assert under is not None
    assert "confirming the 1.0% margin (the race's best, 4, looked 0.5% faster) would" in under
    racing = NoiseGate(Race(0.05, 0.4), Budget(64), stretch=None).too_noisy(final=False)  # type: ignore[arg-type]
    assert racing is not None and "race's best" not in racing  # mid-race: no best yet


class EvenEvidence(Race):
    """A leader 2% ahead, one standard error of 1%: at z 2 its upper bound is exactly 0."""

    def compare(self, a: int | None, b: int | None) -> Comparison:
        return Comparison(diff=-0.02, se=0.01, n=6)


def test_a_leader_whose_upper_bound_is_exactly_level_is_undecided() -> None:
    """A leader ahead whose upper confidence bound is exactly 0 is within the noise: undecided."""
    race = EvenEvidence(0.0, 0.05, confidence_z=2.0)
    assert race.compare(4, None).upper(2.0) == 0.0
    lead = NoiseGate(race, Budget(64), stretch=None).undecided()  # type: ignore[arg-type]
    assert lead is not None
    assert lead[0] == 4
    assert lead[1] == pytest.approx(1.0 - math.exp(-0.02))


def test_a_stretched_budget_too_short_prices_the_pairs_at_its_cap_s_plan() -> None:
    """The extending gate's reason counts the pairs for the plan its cap pays (48), not 16's."""
    stretch = Stretcher()
    race = Race(0.05, 0.45, extend_budget=True, hard_limit_s=60.0)
    gate = NoiseGate(race, ShortCap(64, stretch), stretch)  # type: ignore[arg-type]
    reason = gate.too_noisy(final=True)
    gain = -math.log1p(-0.05)
    needed = math.ceil(pairs_needed(gain, 0.45, gate.last_bound(48), power_z=0.0))
    assert needed != math.ceil(pairs_needed(gain, 0.45, gate.bounds(16).final, power_z=0.0))
    assert reason is not None and f"would take about {needed} pairs" in reason


class Leaderless(Race):
    """A race whose leader is gone (raced out), its gain still on the books."""

    def front(self) -> int | None:
        return None


def test_a_race_without_a_leader_is_neither_too_noisy_at_its_end_nor_undecided() -> None:
    """No judged leader: nothing to confirm at the race's end, and no round to extend for."""
    stretch = Stretcher()
    race = Leaderless(0.015, 0.05, confidence_z=2.0, extend_budget=True, hard_limit_s=60.0)
    assert too_noisy(Race(0.05, 0.35), 64) is not None  # with its leader: too noisy
    assert too_noisy(Leaderless(0.05, 0.35), 64) is None
    gate = NoiseGate(race, Budget(64), stretch)  # type: ignore[arg-type]
    assert gate.undecided() is None and not gate.extend_race()
    assert stretch.raced == []


def test_a_leader_clear_of_the_noise_is_decided() -> None:
    """A leader 5% ahead whose upper bound is below level asks for no more rounds."""
    gate = NoiseGate(Race(0.05, 0.05, confidence_z=2.0), Budget(64), stretch=None)  # type: ignore[arg-type]
    assert gate.undecided() is None


def test_the_race_end_s_fair_chance_is_a_z_of_minus_one_half() -> None:
    """The race's end tries a confirmation at odds Phi(-0.5): 64 pairs at that z are tried."""
    p = Race(0.05, 0.3).p
    gain = -math.log1p(-0.05)
    bound = plan_bounds(p.confirm_alpha, p.confirm_min_pairs, 64).final
    # the noise at which z = -0.5 takes exactly the 64 pairs left (a z nearer even odds,
    # -0.4, would take 76 and call it too noisy)
    sigma = _sigma_for(64, gain, bound, -0.5)
    assert too_noisy(Race(0.05, sigma), 64) is None
    assert pairs_needed(gain, sigma, bound, power_z=-0.4) > 64


def test_the_race_end_s_reason_counts_the_pairs_for_even_odds() -> None:
    """The gate's reason gives the pairs with which a confirmation succeeds as often as it fails."""
    race = Race(0.05, 0.4)
    gate = NoiseGate(race, Budget(64), stretch=None)  # type: ignore[arg-type]
    reason = gate.too_noisy(final=True)
    gain = -math.log1p(-0.05)
    needed = math.ceil(pairs_needed(gain, 0.4, gate.bounds(64).final, power_z=0.0))
    assert needed != math.ceil(pairs_needed(gain, 0.4, gate.bounds(64).final))  # 80% power's
    assert reason is not None and f"would take about {needed} pairs" in reason


def test_a_stretched_budget_too_short_names_the_race_s_best_at_its_end() -> None:
    """The extending gate's reason at the race's end names the race's best and its gain."""
    stretch = Stretcher()
    race = Race(0.05, 0.45, extend_budget=True, hard_limit_s=60.0)
    reason = NoiseGate(race, ShortCap(64, stretch), stretch).too_noisy(final=True)  # type: ignore[arg-type]
    assert reason is not None and "confirming the 5.0% gain of the race's best, 4, would" in reason


def test_short_calls_name_confirm_max_pairs_not_the_budget_as_what_stands_in_the_way() -> None:
    """A budget paying for more pairs than confirm_max_pairs: the reason names that cap."""
    reason = too_noisy(Race(0.01, 0.08), 5000)
    assert reason is not None
    assert "in the pairs the policy allows" in reason
    assert reason.endswith(
        "confirm_max_pairs allows 64 (what is left of the budget would pay for more)"
    )
    # where the budget, not the cap, sets the pairs, it is the budget that allows them
    spent = too_noisy(Race(0.01, 0.08), 40)
    assert spent is not None and spent.endswith("and the budget allows 40")
    assert "within the budget" in spent
