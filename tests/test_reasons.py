"""The sentences a rounds sweep gives for its choice."""

from __future__ import annotations

import math
import re
from typing import Any

import attrs
import pytest

from chunktune._confirm import Confirmation
from chunktune._policy import Policy
from chunktune._reasons import confirmed, kept, pct, too_noisy, too_short


def test_a_rejection_gives_the_bound_it_was_rejected_on() -> None:
    """A rejected gain's reason shows an upper bound under the margin, not the wider interval."""
    # as measured: rejected at an interim look whose z = 3 interval reaches past the margin
    v = Confirmation("rejected", 16, gain=-0.013, ci=(-0.052, 0.024), sigma=0.04)
    reason = kept(30, 12, v, Policy(margin=0.01))
    bound = re.search(r"at most (-?[\d.]+)% \(95% upper bound\): short of the 1\.0% margin", reason)
    assert bound, reason
    assert float(bound.group(1)) < 1.0
    assert pct(v.ci[1]) not in reason  # 2.4%: above the margin, it would contradict "short of"


def test_an_inconclusive_confirmation_gives_its_interval() -> None:
    """An inconclusive confirmation's reason gives the gain and the test's interval."""
    v = Confirmation("inconclusive", 10, gain=0.025, ci=(-0.075, 0.116), sigma=0.1)
    reason = kept(4, 12, v, Policy())
    assert reason.endswith(
        "10 fresh pairs of calls against native could not confirm a gain: 2.5% (-7.5% to 11.6%)"
    )


def test_a_handed_over_size_is_not_said_to_have_led_the_race() -> None:
    """A size confirmed or not in the race's best's place names that best and why."""
    won = Confirmation("confirmed", 20, gain=0.04, ci=(0.01, 0.07), sigma=0.05)
    lost = Confirmation("inconclusive", 10, gain=0.025, ci=(-0.075, 0.116), sigma=0.1)
    why = "(on more rounds than the race's best, 8, and not clear of it)"
    assert confirmed(16, 12, won, best=8).endswith(f"against native after the race {why}")
    assert kept(16, 12, lost, Policy(), best=8).startswith(f"kept the native chunk 12: 16 {why}")
    # the best itself, or no best given: it led the race
    for best in (16, None):
        assert confirmed(16, 12, won, best=best).endswith("after leading the race")
        assert kept(16, 12, lost, Policy(), best=best).startswith(
            "kept the native chunk 12: the race's best, 16, looked faster"
        )


def test_a_tie_break_pick_is_named_as_one_not_as_the_races_leader() -> None:
    """A size a tie-break took over the race's best says so, confirmed or kept; the best led."""
    won = Confirmation("confirmed", 20, gain=0.04, ci=(0.01, 0.07), sigma=0.05)
    lost = Confirmation("inconclusive", 10, gain=0.025, ci=(-0.075, 0.116), sigma=0.1)
    why = "(picked by tie-break smallest from the ties of the race's best, 8)"
    assert confirmed(4, 12, won, best=8, tie_break="smallest").endswith(
        f"against native after the race {why}"
    )
    smallest = Policy(tie_break="smallest")
    assert kept(4, 12, lost, smallest, best=8).startswith(f"kept the native chunk 12: 4 {why}")
    assert confirmed(8, 12, won, best=8, tie_break="smallest").endswith("after leading the race")


def test_a_gain_that_rounds_to_nothing_reads_zero_never_minus_zero() -> None:
    """A measured gain a hair under 0 reads 0.0% in a reason, not -0.0%; -0.1% stays negative."""
    assert (pct(-0.0004), pct(-0.0006), pct(0.0)) == ("0.0%", "-0.1%", "0.0%")
    v = Confirmation("inconclusive", 10, gain=-0.0004, ci=(-0.05, 0.049), sigma=0.1)
    assert kept(4, 12, v, Policy()).endswith("could not confirm a gain: 0.0% (-5.0% to 4.9%)")


def test_a_confirmed_gain_gives_its_interval_from_low_to_high() -> None:
    """A confirmed gain's reason gives its interval low end first."""
    won = Confirmation("confirmed", 20, gain=0.04, ci=(0.01, 0.07), sigma=0.05)
    assert confirmed(16, 12, won) == (
        "chose 16: 4.0% faster than the native chunk 12 (1.0% to 7.0%), confirmed on 20 fresh "
        "pairs of calls against native after leading the race"
    )


def test_the_noise_gate_gives_the_gain_at_stake_as_a_fraction_of_natives_time() -> None:
    """The gate's gain is a log ratio: a size taking 0.9 of native's time is 10.0% faster."""
    reason = too_noisy(sigma=0.1, gain=math.log(1 / 0.9), needed=40.2, afford=12)
    assert "confirming a 10.0% gain would take about 41 pairs of calls" in reason


def test_the_noise_gate_at_the_race_s_end_names_its_best_and_what_is_at_stake() -> None:
    """A best ahead of the margin prices its own gain; one under it, the margin, with its figure."""
    ahead = too_noisy(
        sigma=0.1, gain=math.log(1 / 0.9), needed=40.2, afford=12, lead=(8, math.log(1 / 0.9))
    )
    assert "confirming the 10.0% gain of the race's best, 8, would take about 41 pairs" in ahead
    under = too_noisy(sigma=0.1, gain=math.log(1 / 0.99), needed=400, afford=12, lead=(8, 0.002))
    assert "confirming the 1.0% margin (the race's best, 8, looked 0.2% faster) would take" in under


def test_the_noise_gate_says_a_best_that_measured_slower_than_native_looked_slower() -> None:
    """A live race's best measured 2% slower than native: 'slower', never '-2.0% faster'."""
    said = too_noisy(sigma=0.1, gain=math.log(1 / 0.99), needed=400, afford=12, lead=(8, -0.02))
    assert "(the race's best, 8, looked 2.0% slower) would take" in said and "-2" not in said


def test_a_typical_gain_the_mean_held_back_is_named_only_on_enough_pairs() -> None:
    """'in the typical pair but ... on average' needs confirm_min_pairs pairs; fewer, no."""
    held = Confirmation("inconclusive", 16, 0.03, (0.01, 0.05), 0.03, mean_gain=-0.02)
    assert kept(43, 12, held, Policy()).endswith(
        "16 fresh pairs of calls against native measured 3.0% (1.0% to 5.0%) in the typical "
        "pair but -2.0% on average, short of the 1.0% margin: its slowest calls lose more "
        "than native's"
    )
    cut = attrs.evolve(held, pairs=2)  # the budget ended it before the first look
    assert kept(43, 12, cut, Policy()).endswith(
        "2 fresh pairs of calls against native could not confirm a gain: 3.0% (1.0% to 5.0%)"
    )
    steady = attrs.evolve(held, mean_gain=0.02)  # the mean clears the margin: not this
    assert "typical pair" not in kept(43, 12, steady, Policy())


_HELD = Confirmation("inconclusive", 16, 0.03, (0.01, 0.05), 0.03, mean_gain=-0.02)


@pytest.mark.parametrize(
    ("changes", "policy", "typical"),
    [
        pytest.param({}, Policy(), True, id="held-back"),
        pytest.param({"mean_gain": 0.01}, Policy(), False, id="mean-at-the-margin"),
        pytest.param({"gain": 0.01}, Policy(), True, id="trimmed-at-the-margin"),
        pytest.param({"gain": 0.005, "ci": (0.001, 0.01)}, Policy(), False, id="trimmed-short"),
        pytest.param({"ci": (0.0, 0.05)}, Policy(), False, id="interval-at-0"),
        pytest.param({"ci": (-0.01, 0.05)}, Policy(), False, id="interval-across-0"),
        pytest.param({"pairs": 4}, Policy(), True, id="at-min-pairs"),
        pytest.param({"mean_gain": 0.015}, Policy(margin=0.02), True, id="policy-margin"),
        pytest.param({"mean_gain": 0.025}, Policy(margin=0.02), False, id="mean-past-its-margin"),
    ],
)  # fmt: skip
def test_the_typical_pair_reason_needs_every_test_passed_but_the_mean(
    changes: dict[str, Any], policy: Policy, typical: bool
) -> None:
    """'in the typical pair' only where the interval clears 0 and the trimmed gain the margin."""
    reason = kept(43, 12, attrs.evolve(_HELD, **changes), policy)
    assert ("in the typical pair but " in reason) is typical
    if typical:
        assert reason.endswith(
            f"on average, short of the {pct(policy.margin)} margin: its slowest calls lose "
            "more than native's"
        )


def test_a_confirmation_that_reached_confirm_max_pairs_says_the_cap_ended_it() -> None:
    """Kept after confirm_max_pairs pairs, the reason names the cap (short calls reach it first)."""
    v = Confirmation("inconclusive", 64, gain=0.025, ci=(-0.02, 0.07), sigma=0.1)
    assert "64 fresh pairs of calls (confirm_max_pairs, the most the policy allows) against" in (
        kept(4, 12, v, Policy(confirm_max_pairs=64))
    )


@pytest.mark.parametrize(("min_rounds", "said"), [(1, "its 1 round"), (3, "its 3 rounds")])
def test_a_budget_too_short_for_the_field_counts_its_rounds_in_words(
    min_rounds: int, said: str
) -> None:
    """A budget that ended before the field's rounds names them, singular for one round."""
    reason = too_short(Policy(min_rounds=min_rounds), mean_call_s=0.5, field=4)
    assert reason.endswith(f"would give the field {said}")
