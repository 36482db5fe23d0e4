"""The sequential confirmation against native: its bounds, and its three outcomes."""

from __future__ import annotations

import math
from typing import Any

import attrs
import numpy as np
import pytest

from chunktune import load_settings
from chunktune._candidates import candidate_list
from chunktune._confirm import (
    FUTILITY_Z,
    Confirmation,
    futility_bound,
    judge,
    look_points,
    looks_of,
    pair_gains,
    pairs_needed,
    plan_bounds,
    reach_floor,
)
from chunktune._confirming import run_confirmation
from chunktune._events import ProgressEvent
from chunktune._margin import least_gain
from chunktune._modeled import ModeledTime
from chunktune._reasons import kept
from chunktune._sequential import Design, adjusted, more_extreme
from chunktune._spending import SPENDING_RHO, spending_bounds
from chunktune._stats import estimate, normal_quantile, pooled_sigma, standard_error
from chunktune._sweep import sweep
from chunktune.sim import Noise, SimulatedWorkload


def verdict(d: list[float], *, final: bool = False, sigma: float = 0.05) -> str | None:
    return judge(
        d,
        prior_sigma=sigma,
        prior_dof=40,
        margin=0.01,
        bounds=plan_bounds(0.05, 4, 32),
        z_futility=1.645,
        min_pairs=4,
        max_pairs=32,
        final=final,
    ).outcome


def test_bounds_keep_the_false_confirmation_rate_at_alpha() -> None:
    """Over a 64-pair plan's looks, a walk with no gain crosses some bound alpha of the time."""
    ns = np.array(look_points(4, 64))
    z = np.array(plan_bounds(0.05, 4, 64).all_z(list(ns[:-1]), int(ns[-1]), last=True))
    rng = np.random.default_rng(0)
    steps = rng.standard_normal((200_000, len(ns))) * np.sqrt(np.diff(ns, prepend=0))
    crossed = (np.cumsum(steps, axis=1) / np.sqrt(ns) > z).any(axis=1).mean()
    assert crossed == pytest.approx(0.05, abs=0.002)  # 3.5 standard errors of the sample


def test_each_look_spends_its_share_of_alpha_and_no_more() -> None:
    """A look at n of N pairs crosses, with no gain, by alpha * (n/N)**2 in all, exactly."""
    ns = look_points(4, 64)
    z = plan_bounds(0.05, 4, 64).all_z(ns[:-1], ns[-1], last=True)
    for k, n in enumerate(ns):
        se = tuple(1.0 / math.sqrt(m) for m in ns[: k + 1])
        design = Design(se, tuple(b * s for b, s in zip(z, se[:-1], strict=False)),
                        (-math.inf,) * k)  # fmt: skip
        spent = more_extreme(0.0, design, z[k] * se[-1])
        assert spent == pytest.approx(0.05 * (n / 64) ** SPENDING_RHO, rel=1e-4)
    assert z == pytest.approx((3.546, 3.225, 2.799, 2.306, 1.704), abs=1e-3)


def test_a_single_look_is_a_plain_one_sided_test_at_alpha() -> None:
    """A plan of one look spends all of alpha there: its bound is the one-sided z of alpha."""
    assert plan_bounds(0.05, 4, 4).final == pytest.approx(normal_quantile(0.95))
    assert plan_bounds(0.05, 4, 4).z([], 4, last=False) == pytest.approx(normal_quantile(0.95))


def test_a_look_the_budget_makes_last_spends_what_is_left() -> None:
    """Cut short at 16 of 64 pairs, the look spends the rest of alpha: a lower bound."""
    bounds = plan_bounds(0.05, 4, 64)
    as_planned = bounds.z([4, 8], 16, last=False)
    cut = bounds.z([4, 8], 16, last=True)
    assert cut < as_planned
    z = bounds.all_z([4, 8], 16, last=True)
    se = (1 / 2, 1 / math.sqrt(8), 1 / 4)
    design = Design(se, (z[0] * se[0], z[1] * se[1]), (-math.inf, -math.inf))
    assert more_extreme(0.0, design, cut * se[2]) == pytest.approx(0.05, rel=1e-4)


def test_a_look_s_bound_follows_the_looks_taken_before_it() -> None:
    """A look taken a pair late (blocks of two) is judged after the looks really taken."""
    bounds = plan_bounds(0.05, 3, 24)
    assert bounds.z([4], 6, last=False) == spending_bounds(0.05, (4, 6), 24, last=False)[-1]
    assert bounds.z([4], 6, last=False) != bounds.z([3], 6, last=False)


def test_a_look_past_its_plan_spends_all_of_alpha_and_no_more() -> None:
    """A look at 6 pairs of a 5-pair plan (a block's second pair) spends alpha, as a last look."""
    past = spending_bounds(0.05, (4, 6), 5, last=False)
    assert past == spending_bounds(0.05, (4, 6), 5, last=True)
    se = (1 / 2, 1 / math.sqrt(6))
    design = Design(se, (past[0] * se[0],), (-math.inf,))
    assert more_extreme(0.0, design, past[1] * se[1]) == pytest.approx(0.05, rel=1e-4)


def test_a_large_alpha_s_last_bound_may_fall_under_half_a_standard_error() -> None:
    """alpha 0.45 over looks at 4 and 8 of 8 pairs: the last bound is z = 0.149, spending it all."""
    z = spending_bounds(0.45, (4, 8), 8, last=True)
    assert z == pytest.approx((normal_quantile(1 - 0.45 / 4), 0.1491), abs=1e-4)
    se = (1 / 2, 1 / math.sqrt(8))
    design = Design(se, (z[0] * se[0],), (-math.inf,))
    assert more_extreme(0.0, design, z[1] * se[1]) == pytest.approx(0.45, rel=1e-6)


def test_looks_that_do_not_rise_are_refused() -> None:
    """Bounds for looks out of order, repeated or at no pairs are a ValueError, not a number."""
    for looks in [(8, 4), (4, 4), (0, 4), ()]:
        with pytest.raises(ValueError, match="rising pair counts"):
            spending_bounds(0.05, looks, 16, last=True)


def test_a_plans_bounds_for_a_look_not_before_the_last_are_refused() -> None:
    """A look of before at or past n: a ValueError, never dropped (each bound pairs with a look)."""
    bounds = plan_bounds(0.05, 4, 64)
    assert len(bounds.all_z([4, 8], 16, last=True)) == 3
    for before in ([4, 16], [4, 32], [8, 4]):
        with pytest.raises(ValueError, match="rising pair counts"):
            bounds.all_z(before, 16, last=True)


def test_a_first_look_at_a_single_pair_is_allowed() -> None:
    """Looks from one pair are rising pair counts: a plan looking at 1 and 4 pairs has bounds."""
    z = spending_bounds(0.05, (1, 4), 4, last=True)
    assert z[0] == pytest.approx(normal_quantile(1 - 0.05 / 16)) and z[1] < z[0]


def test_looks_start_at_the_minimum_and_double_up_to_the_plan() -> None:
    """Looks fall at min_pairs, twice that, four times, ... and the plan's last pair."""
    assert look_points(4, 4) == (4,)
    assert look_points(4, 22) == (4, 8, 16, 22)
    assert look_points(4, 32) == (4, 8, 16, 32)
    assert look_points(5, 40) == (5, 10, 20, 40)
    assert looks_of(4, 64) == 5


def test_a_long_plan_keeps_nearly_all_of_alpha_for_its_last_look() -> None:
    """A 64-pair plan's last bound is close to a single test's: its first looks spend little."""
    single = normal_quantile(0.95)
    assert single < plan_bounds(0.05, 4, 64).final < single + 0.1


def test_a_gain_clear_at_half_its_plan_stops_there() -> None:
    """2.5 standard errors over 0 at 32 of 64 pairs is confirmed there, not run to 64."""
    spread = [0.02, -0.02] * 16
    sigma = pooled_sigma([spread])[0]
    se = standard_error(sigma, 32, "trimmed_mean")
    d = [x + 2.5 * se for x in spread]
    v = judge(d, prior_sigma=sigma, prior_dof=40, margin=0.0, bounds=plan_bounds(0.05, 4, 64),
              z_futility=FUTILITY_Z, min_pairs=4, max_pairs=64)  # fmt: skip
    assert (v.outcome, v.pairs) == ("confirmed", 32)
    assert 0.0 < v.ci[0] < v.gain  # adjusted for stopping there, its interval still above 0


def test_a_first_look_needs_more_than_z_3() -> None:
    """At 4 of 64 pairs, 3.2 standard errors over 0 is not yet enough: that look spends little."""
    spread = [0.02, -0.02] * 2
    sigma = pooled_sigma([spread])[0]
    d = [x + 3.2 * standard_error(sigma, 4, "trimmed_mean") for x in spread]
    v = judge(d, prior_sigma=sigma, prior_dof=40, margin=0.0, bounds=plan_bounds(0.05, 4, 64),
              z_futility=FUTILITY_Z, min_pairs=4, max_pairs=64)  # fmt: skip
    assert v.outcome is None


def test_a_clear_gain_is_confirmed_at_the_first_look() -> None:
    """Four pairs showing a 15% gain at 5% noise confirm at once, with a CI around it."""
    rng = np.random.default_rng(0)
    d = list(np.log(1 / 0.85) + rng.normal(0, 0.05, 4))
    result = judge(d, prior_sigma=0.05, prior_dof=40, margin=0.01, bounds=plan_bounds(0.05, 4, 32),
                   z_futility=1.645, min_pairs=4, max_pairs=32)  # fmt: skip
    assert result.outcome == "confirmed"
    assert result.ci[0] < result.gain < result.ci[1]
    assert result.ci[0] > 0.0


def test_no_gain_is_rejected_and_a_small_one_inconclusive() -> None:
    """Pairs around 0 are rejected once there are enough; a 1.5% gain at 5% noise stays open."""
    rng = np.random.default_rng(1)
    flat = list(rng.normal(-0.005, 0.01, 8))
    assert verdict(flat[:4], sigma=0.01) is None  # futility waits for twice min_pairs
    assert verdict(flat, sigma=0.01) == "rejected"
    small = list(math.log(1 / 0.985) + rng.normal(0.0, 0.05, 8))
    assert verdict(small) is None
    assert verdict(small, final=True) == "inconclusive"


def test_one_spike_among_few_pairs_does_not_decide() -> None:
    """A single +60% call in four pairs is trimmed, not averaged in."""
    d = [0.10, 0.09, 0.11, -0.47]  # a real 10% gain and one spiked winner call
    result = judge(d, prior_sigma=0.03, prior_dof=40, margin=0.01, bounds=plan_bounds(0.05, 4, 32),
                   z_futility=1.645, min_pairs=4, max_pairs=32)  # fmt: skip
    assert result.gain > 0.05


def test_pairs_needed_grows_with_noise_over_gain_squared() -> None:
    """Twice the noise needs four times the pairs; no gain needs infinitely many."""
    assert pairs_needed(0.02, 0.10, 2.0) == pytest.approx(4 * pairs_needed(0.02, 0.05, 2.0))
    assert pairs_needed(0.0, 0.05, 2.0) == math.inf


def test_pairs_noisier_than_the_race_are_judged_by_their_own_noise() -> None:
    """A load arriving after a calm race: the pairs' own spread, not the race's, sets the bar."""
    hogged = [0.50, 0.00, 0.45, 0.02]  # +24% in the middle, but pairs apart by 30%
    assert verdict(hogged, sigma=0.01) is None  # not confirmed on the calm race's noise
    calm = [0.24, 0.23, 0.25, 0.24]  # the same gain, as steady as the race was
    assert verdict(calm, sigma=0.01) == "confirmed"


def test_three_pairs_noisier_than_the_race_are_judged_by_their_own_noise() -> None:
    """Three pairs already give a noise figure: a spread of 50% is not judged at the race's 1%."""
    d = [0.5, 0.0, 0.45]
    v = judge(d, prior_sigma=0.01, prior_dof=40, margin=0.01, bounds=plan_bounds(0.05, 3, 32),
              z_futility=FUTILITY_Z, min_pairs=3, max_pairs=32)  # fmt: skip
    assert v.outcome is None
    assert v.sigma > 0.3


def test_a_gain_of_exactly_the_margin_is_confirmed() -> None:
    """An estimate exactly on the margin, clear of 0, is confirmed: the margin is the least gain."""
    need = -math.log1p(-0.02)
    d = [need] * 4
    assert estimate(d, "trimmed_mean") == need  # the estimate sits exactly on the margin
    v = judge(d, prior_sigma=0.001, prior_dof=40, margin=0.02, bounds=plan_bounds(0.05, 4, 32),
              z_futility=FUTILITY_Z, min_pairs=4, max_pairs=32)  # fmt: skip
    assert v.outcome == "confirmed"


# (0.1 s, 19%): the largest rounding of the grid 1..30% by 0.013..3 s seen, 1.1 units in the
# last place under the margin's log
@pytest.mark.parametrize("margin", [0.01, 0.03, 0.05, 0.19])
@pytest.mark.parametrize("native_s", [0.02, 0.013, 1.0, 0.1])
def test_timings_exactly_the_margin_apart_are_confirmed(native_s: float, margin: float) -> None:
    """Pairs timed exactly the margin apart clear it, whatever their logs' rounding."""
    winner_s = native_s * (1.0 - margin)
    d = pair_gains([None, 8, 8, None], [native_s, winner_s, winner_s, native_s]) * 4
    v = judge(d, prior_sigma=0.001, prior_dof=40, margin=margin, bounds=plan_bounds(0.05, 4, 8),
              z_futility=FUTILITY_Z, min_pairs=4, max_pairs=8)  # fmt: skip
    assert v.outcome == "confirmed"


@pytest.mark.parametrize("margin", [0.01, 0.02])
def test_the_least_gain_is_confirmed_and_a_gain_a_hair_under_the_margin_is_not(
    margin: float,
) -> None:
    """A steady gain of least_gain(margin) is confirmed; one 1e-12 under the margin's is not."""
    # 1e-12 is far past any rounding of a log gain, far under what a timing shows
    kw: dict[str, Any] = {"prior_sigma": 0.001, "prior_dof": 40, "margin": margin,
          "bounds": plan_bounds(0.05, 4, 32), "z_futility": FUTILITY_Z, "min_pairs": 4,
          "max_pairs": 32}  # fmt: skip
    need = least_gain(margin)
    assert estimate([need] * 4, "trimmed_mean") == need  # the estimate sits exactly on it
    assert judge([need] * 4, **kw).outcome == "confirmed"
    short = -math.log1p(-margin) - 1e-12
    assert judge([short] * 4, **kw).outcome != "confirmed"


class ExactlyTheMargin:
    """Native takes 20 ms a call, size 6 exactly 1% less, every other size 5% more; no noise."""

    num_envs = 256
    nthread = 2

    def __init__(self) -> None:
        self.seconds = 0.0

    def signature(self) -> dict[str, str]:
        return {"kind": "exactly-the-margin"}

    def run(self, chunk_size: int | None) -> float:
        native = 0.02
        seconds = native * (0.99 if chunk_size == 6 else 1.05 if chunk_size else 1.0)
        self.seconds += seconds
        return seconds

    def clock(self) -> float:
        return self.seconds


def test_a_size_exactly_the_margin_faster_leaves_native() -> None:
    """balanced (margin 1%) chooses a size whose every call is exactly 1% under native's."""
    pol = load_settings().get_policy("balanced")
    assert pol.margin == 0.01
    sizes = candidate_list(pol.candidates, 256, 2)
    assert 6 in sizes
    result = sweep(ExactlyTheMargin(), sizes, pol)
    assert result.choice.chunk_size == 6, result.choice.reason


@pytest.mark.parametrize("center", [-0.03, -0.01, 0.0, 0.005, 0.01, 0.02])
def test_the_futility_bound_is_what_a_rejection_judged(center: float) -> None:
    """futility_bound is under the margin exactly when judge rejects (past the first look)."""
    rng = np.random.default_rng(7)
    d = list(center + rng.normal(0.0, 0.02, 16))
    v = judge(
        d,
        prior_sigma=0.02,
        prior_dof=40,
        margin=0.01,
        bounds=plan_bounds(0.05, 4, 64),
        z_futility=FUTILITY_Z,
        min_pairs=4,
        max_pairs=64,
    )
    rejected = futility_bound(v, "trimmed_mean") < 0.01
    assert (v.outcome == "rejected") == (rejected and v.outcome != "confirmed")


@pytest.mark.parametrize("min_pairs", [pytest.param(3, id="3"), pytest.param(5, id="5")])
def test_a_first_look_due_at_an_odd_count_reports_its_estimate(min_pairs: int) -> None:
    """Pairs come two to a block: a first look due at an odd count is the first look made."""
    pol = attrs.evolve(load_settings().get_policy("balanced"), confirm_min_pairs=min_pairs)
    w = SimulatedWorkload.from_layout(
        "blocked", num_envs=2048, nthread=16, noise=Noise(sigma=0.03), seed=0
    )
    events: list[ProgressEvent] = []
    r = sweep(w, candidate_list(pol.candidates, 2048, 16), pol, on_event=events.append)
    calls = [e for e in events if e.kind == "confirm"]
    d: list[float] = []
    for k in range(0, len(calls), 4):
        block = calls[k : k + 4]
        d += pair_gains([e.chunk_size for e in block], [e.seconds or 0.0 for e in block])
    assert r.gain_ci is not None and r.confirm_pairs == min_pairs + 1
    assert r.gain == pytest.approx(-math.expm1(-estimate(d, "trimmed_mean")))


def test_a_gain_clear_of_zero_but_under_the_margin_is_rejected() -> None:
    """A steady 0.5% gain, surely above 0, is under the 1% margin: rejected, never confirmed."""
    d = [math.log(1 / 0.995) + 0.001 * (-1) ** k for k in range(16)]
    assert verdict(d, sigma=0.001) == "rejected"


def test_a_gain_that_missed_the_margin_at_its_first_look_is_reported_as_measured() -> None:
    """An earlier look could stop only past the margin: a 10% gain confirmed later is not shrunk."""
    need = -math.log1p(-0.1)
    d = list(need * 1.02 + 0.02 * np.tile([1.0, -1.0], 4))  # 10.2% over 8 pairs, sigma ~2%
    v = judge(
        d,
        prior_sigma=0.02,
        prior_dof=10,
        margin=0.1,
        bounds=plan_bounds(0.05, 4, 16),
        z_futility=FUTILITY_Z,
        min_pairs=4,
        max_pairs=16,
        earlier=[4],  # its first look, 3 standard errors clear of 0 but under the margin
    )
    assert v.outcome == "confirmed" and v.pairs == 8
    assert v.ci[0] < 1.0 - math.exp(-need * 1.02) < v.ci[1]
    assert v.gain > 0.09


class ScriptedProbe:
    """Native takes 1 s a call, the winner its scripted seconds in turn; the budget ends after
    ``budget_calls`` calls (never when None)."""

    def __init__(self, winner_s: list[float], budget_calls: int | None = None) -> None:
        self.policy = load_settings().get_policy("balanced")
        self.winner_s = winner_s
        self.budget_calls = budget_calls
        self.calls = 0
        self.winner_calls = 0

    def __call__(self, chunk: int | None, *, kind: str, round_: int) -> float:
        self.calls += 1
        if chunk is None:
            return 1.0
        self.winner_calls += 1
        return self.winner_s[(self.winner_calls - 1) % len(self.winner_s)]

    def over(self, limit: float) -> bool:
        return self.budget_calls is not None and self.calls >= self.budget_calls


class Budget:
    budget_s = 1.0


def confirm(probe: ScriptedProbe, plan: int = 16) -> tuple[Confirmation, bool]:
    return run_confirmation(probe, Budget(), 8, plan=plan, sigma=0.05, dof=10)  # type: ignore[arg-type]


def test_a_confirmation_past_its_first_look_is_adjusted_for_the_look_it_took() -> None:
    """Not clear at 4 of 32 pairs (its bound is 3.16), confirmed at 8: adjusted for a look at 4."""
    pol = load_settings().get_policy("balanced")
    probe = ScriptedProbe([0.9, 0.95, 0.85, 0.92, 0.97, 0.88])
    verdict, cut = confirm(probe, plan=32)
    d: list[float] = []
    for block in range(4):  # the winner's calls come two to a block, in script order
        a, b = probe.winner_s[2 * block % 6], probe.winner_s[(2 * block + 1) % 6]
        if block % 2 == 0:
            d += pair_gains([None, 8, 8, None], [1.0, a, b, 1.0])
        else:
            d += pair_gains([8, None, None, 8], [a, 1.0, 1.0, b])
    expected = judge(
        d, prior_sigma=0.05, prior_dof=10, margin=pol.margin,
        bounds=plan_bounds(pol.confirm_alpha, 4, 32), z_futility=FUTILITY_Z, min_pairs=4,
        max_pairs=32, estimator=pol.estimator, trim=pol.trim, earlier=[4],
    )  # fmt: skip
    assert (verdict, cut) == (expected, False)
    assert expected.outcome == "confirmed" and expected.pairs == 8


def test_a_plan_completed_as_the_budget_ends_is_not_cut_short() -> None:
    """The budget running out on the plan's very last call leaves the confirmation whole."""
    probe = ScriptedProbe([0.97, 1.0, 0.95, 0.99, 0.96], budget_calls=32)
    verdict, cut = confirm(probe)
    assert verdict.pairs == 16 and not cut


def test_a_plan_short_of_the_first_look_measures_nothing_and_says_why() -> None:
    """A plan under confirm_min_pairs steps nothing; the reason blames the budget, not the gain."""
    probe = ScriptedProbe([0.9])
    verdict, cut = confirm(probe, plan=3)
    assert (verdict.outcome, verdict.pairs, cut, probe.calls) == ("inconclusive", 0, False, 0)
    assert kept(8, 12, verdict, probe.policy) == (
        "kept the native chunk 12: the race's best, 8, looked faster, but what was left of the "
        "budget paid for fewer than the 4 pairs of calls needed to confirm it against native"
    )


def test_a_plan_short_of_the_first_look_claims_no_gain_and_bounds_nothing() -> None:
    """A plan under confirm_min_pairs: a gain of 0 within (-inf, inf), the race's noise, no mean."""
    verdict, _ = confirm(ScriptedProbe([0.9]), plan=3)
    assert verdict == Confirmation("inconclusive", 0, 0.0, (-math.inf, math.inf), 0.05)
    assert verdict.mean_gain is None and not verdict.out_of_reach


def test_a_winner_slower_than_native_is_rejected_at_twice_the_first_look() -> None:
    """2% slower than native: the futility bound (z 1.645) gives up at 8 pairs, 16 calls."""
    probe = ScriptedProbe([1.02])
    verdict, cut = confirm(probe)
    assert (verdict.outcome, verdict.pairs, cut, probe.calls) == ("rejected", 8, False, 16)


def test_a_one_look_confirmation_reports_the_plain_one_sided_interval() -> None:
    """A plan of one look spends all of alpha there: the interval is center -/+ z(alpha) errors."""
    v = judge(
        [0.05, 0.04, 0.06, 0.05], prior_sigma=0.02, prior_dof=10, margin=0.01,
        bounds=plan_bounds(0.05, 4, 4), z_futility=FUTILITY_Z, min_pairs=4, max_pairs=4,
    )  # fmt: skip
    assert v.outcome == "confirmed"
    center = -math.log1p(-v.gain)
    half = normal_quantile(0.95) * standard_error(v.sigma, 4, "trimmed_mean")
    assert v.ci == pytest.approx((1.0 - math.exp(half - center), 1.0 - math.exp(-half - center)))


def test_a_first_look_that_cannot_reject_leaves_the_adjustment_alone() -> None:
    """Confirmed at 8 pairs after a look at 4, where no rejection was possible: any z_futility."""
    d = [0.03, 0.01, 0.05, 0.0, 0.04, 0.02, 0.035, 0.025]

    def judged(z_futility: float) -> Confirmation:
        return judge(
            d, prior_sigma=0.02, prior_dof=10, margin=0.01, bounds=plan_bounds(0.05, 4, 16),
            z_futility=z_futility, min_pairs=4, max_pairs=16, earlier=[4],
        )  # fmt: skip

    assert judged(FUTILITY_Z).outcome == "confirmed"
    assert judged(FUTILITY_Z) == judged(0.0)


def test_pairs_without_any_noise_figure_give_an_interval_of_everything() -> None:
    """Two pairs and no prior noise: no standard error, so the interval is (-inf, inf)."""
    v = judge(
        [0.05, 0.04], prior_sigma=0.0, prior_dof=0, margin=0.01, bounds=plan_bounds(0.05, 2, 8),
        z_futility=FUTILITY_Z, min_pairs=2, max_pairs=8,
    )  # fmt: skip
    assert v.outcome is None and v.ci == (-math.inf, math.inf)


def test_a_winner_that_loses_its_unlucky_pairs_by_much_is_not_confirmed() -> None:
    """A 3% typical gain, every fifth pair losing 30%: the trimmed mean passes, the mean fails."""
    typical = math.log(1 / 0.97)
    tail = math.log(1 / 1.3)
    d = [tail if i % 5 == 4 else typical + 0.002 * (-1) ** i for i in range(16)]
    assert estimate(d, "trimmed_mean") > typical - 0.01  # the robust estimate drops the tail
    v = judge(d, prior_sigma=0.01, prior_dof=40, margin=0.01, bounds=plan_bounds(0.05, 4, 16),
              z_futility=FUTILITY_Z, min_pairs=4, max_pairs=16)  # fmt: skip
    assert v.outcome == "inconclusive"
    assert v.ci[0] > 0 and v.gain > 0.02  # what would have confirmed it alone
    assert v.mean_gain == pytest.approx(1 - math.exp(-float(np.mean(d))))
    assert v.mean_gain is not None and v.mean_gain < 0
    steady = [x for x in d if x > 0]  # the same typical pairs without the unlucky ones
    w = judge(steady, prior_sigma=0.01, prior_dof=40, margin=0.01, bounds=plan_bounds(0.05, 4, 16),
              z_futility=FUTILITY_Z, min_pairs=4, max_pairs=16)  # fmt: skip
    assert w.outcome == "confirmed"


def test_a_mean_gain_under_the_margin_keeps_native_even_when_above_zero() -> None:
    """The margin applies to the mean too: a 3% typical gain that averages 0.5% is no gain."""
    typical = math.log(1 / 0.97)
    d = [typical] * 13 + [math.log(1 / 1.12)] * 3  # mean about +0.3%, trimmed 3%
    v = judge(d, prior_sigma=0.01, prior_dof=40, margin=0.01, bounds=plan_bounds(0.05, 4, 16),
              z_futility=FUTILITY_Z, min_pairs=4, max_pairs=16)  # fmt: skip
    assert v.mean_gain is not None and 0 < v.mean_gain < 0.01
    assert v.outcome == "inconclusive"


def test_a_confirmation_whose_winner_a_burst_slows_keeps_native_and_says_so() -> None:
    """Every fifth winner call 30% slower: inconclusive at the plan, the reason names the mean."""
    probe = ScriptedProbe([0.97, 0.97, 0.97, 0.97, 1.3])
    verdict, cut = confirm(probe)
    assert (verdict.outcome, verdict.pairs, cut) == ("inconclusive", 16, False)
    reason = kept(8, 12, verdict, probe.policy)
    assert reason.startswith(
        "kept the native chunk 12: the race's best, 8, looked faster, but 16 fresh pairs of "
        "calls against native measured "
    )
    assert "in the typical pair but " in reason
    assert reason.endswith(
        " on average, short of the 1.0% margin: its slowest calls lose more than native's"
    )
    steady, _ = confirm(ScriptedProbe([0.97]))
    assert steady.outcome == "confirmed"


class BurstHit(ModeledTime):
    """A uniform batch beside a neighbour's bursts: sizes of few chunks per thread are 3%
    faster between bursts and 40% slower in one call of five (their chunks cannot be
    rebalanced); every other size is native's, each call with 2% noise."""

    num_envs, nthread = 256, 2

    def __init__(self, *, bursts: bool, seed: int = 0) -> None:
        self.bursts = bursts
        self.rng = np.random.default_rng(seed)
        self.seconds = 0.0

    def signature(self) -> dict[str, str]:
        return {"kind": "burst-hit"}

    def run(self, chunk_size: int | None) -> float:
        noise = float(np.exp(self.rng.normal(0.0, 0.02)))
        coarse = chunk_size is not None and chunk_size >= 43
        hit = self.bursts and coarse and self.rng.random() < 0.2
        seconds = 0.02 * noise * (1.4 if hit else 0.97 if coarse else 1.0)
        self.seconds += seconds
        return seconds

    def clock(self) -> float:
        return self.seconds


@pytest.mark.parametrize("seed", [0, 4, 6])
def test_a_coarse_size_that_bursts_slow_is_not_chosen_and_a_steady_one_is(seed: int) -> None:
    """balanced keeps native for a size that wins typical calls but loses 40% in one of five."""
    pol = load_settings().get_policy("balanced")
    sizes = candidate_list(pol.candidates, 256, 2)
    assert any(c is not None and c >= 43 for c in sizes)
    hit = sweep(BurstHit(bursts=True, seed=seed), sizes, pol)
    assert hit.choice.chunk_size is None or hit.choice.chunk_size < 43
    steady = sweep(BurstHit(bursts=False, seed=seed), sizes, pol)
    assert steady.choice.chunk_size is not None and steady.choice.chunk_size >= 43


def test_a_confirmation_on_no_pairs_has_no_mean_gain() -> None:
    """mean_gain is None before any pair: judged on none, or a plan too short to measure."""
    v = judge([], prior_sigma=0.01, prior_dof=40, margin=0.01, bounds=plan_bounds(0.05, 4, 16),
              z_futility=FUTILITY_Z, min_pairs=4, max_pairs=16, final=True)  # fmt: skip
    assert (v.outcome, v.pairs, v.mean_gain) == ("inconclusive", 0, None)
    short, cut = confirm(ScriptedProbe([0.97]), plan=2)
    assert (short.outcome, short.pairs, short.mean_gain, cut) == ("inconclusive", 0, None, False)


def test_a_plan_out_of_reach_ends_inconclusive_at_its_look_and_says_so() -> None:
    """Half a percent slower at 5% noise: at 32 of 64 pairs the plan is out of reach; it stops."""
    probe = ScriptedProbe([0.95, 1.06, 1.0, 1.01])
    verdict, cut = confirm(probe, plan=64)
    assert (verdict.outcome, verdict.pairs, cut, probe.calls) == ("inconclusive", 32, False, 64)
    assert verdict.out_of_reach
    # not a rejection: a gain at the margin was still within its upper bound
    se = standard_error(verdict.sigma, 32, probe.policy.estimator)
    assert -math.log1p(-verdict.gain) + FUTILITY_Z * se >= least_gain(probe.policy.margin)
    assert kept(8, 12, verdict, probe.policy).endswith(
        "32 fresh pairs of calls against native could not confirm a gain: -0.5% (-2.9% to 1.9%); "
        "they stopped early, as the pairs left could hardly have confirmed one"
    )


def test_the_reach_floor_stops_only_where_the_upper_bound_cannot_make_the_last_look() -> None:
    """Just under the floor the plan ends inconclusive; just over it, the test measures on."""
    n, plan, need = 32, 64, least_gain(0.01)
    bounds = plan_bounds(0.05, 4, plan)

    def judged(center: float) -> Confirmation:
        d = [center + 0.05, center - 0.05] * (n // 2)
        return judge(d, prior_sigma=0.05, prior_dof=1000, margin=0.01, bounds=bounds,
                     z_futility=FUTILITY_Z, min_pairs=4, max_pairs=plan,
                     estimator="mean")  # fmt: skip

    sigma = judged(0.0).sigma  # the noise the test judges by (it does not move with the center)
    se = standard_error(sigma, n, "mean")
    floor = reach_floor(n, se, sigma, need=need, z_final=bounds.final, z_futility=FUTILITY_Z,
                        max_pairs=plan, estimator="mean")  # fmt: skip
    # at the floor, the final estimate's mean, the rest gaining the upper bound, sits
    # FUTILITY_Z of its spread under what the last look needs
    bar = max(need, bounds.final * standard_error(sigma, plan, "mean"))
    mean = floor + (plan - n) / plan * FUTILITY_Z * se
    assert mean + FUTILITY_Z * math.sqrt(plan - n) * sigma / plan == pytest.approx(bar)
    assert floor + FUTILITY_Z * se >= need  # a floor above what the futility bound rejects
    below, above = judged(floor - 1e-4), judged(floor + 1e-4)
    assert (below.outcome, below.out_of_reach) == ("inconclusive", True)
    assert (above.outcome, above.out_of_reach) == (None, False)
    assert reach_floor(plan, se, sigma, need=need, z_final=bounds.final, z_futility=FUTILITY_Z,
                       max_pairs=plan, estimator="mean") == -math.inf  # fmt: skip


class OrderedProbe(ScriptedProbe):
    """A ScriptedProbe that keeps the chunk of each call, native as None."""

    def __init__(self, winner_s: list[float]) -> None:
        super().__init__(winner_s)
        self.order: list[int | None] = []

    def __call__(self, chunk: int | None, *, kind: str, round_: int) -> float:
        self.order.append(chunk)
        return super().__call__(chunk, kind=kind, round_=round_)


def test_a_confirmation_alternates_native_winner_winner_native_and_its_mirror() -> None:
    """Blocks go N W W N, W N N W, N W W N, ... for as long as the confirmation measures."""
    probe = OrderedProbe([0.97, 1.0, 0.95, 0.99, 0.96])
    verdict, _ = confirm(probe)
    assert verdict.pairs == 16
    n_w_w_n, w_n_n_w = [None, 8, 8, None], [8, None, None, 8]
    assert probe.order == (n_w_w_n + w_n_n_w) * 4


def _judged(d: list[float], **given: Any) -> Confirmation:
    settings: dict[str, Any] = {
        "prior_sigma": 0.02, "prior_dof": 10, "margin": 0.01, "bounds": plan_bounds(0.05, 4, 16),
        "z_futility": FUTILITY_Z, "min_pairs": 4, "max_pairs": 16,
    }  # fmt: skip
    return judge(d, **{**settings, **given})


def test_only_an_inconclusive_stop_before_the_plan_s_end_is_out_of_reach() -> None:
    """A confirmed, a rejected, an open and a final inconclusive verdict are not out of reach."""
    confirmed = _judged([0.05, 0.04, 0.06, 0.05])
    rejected = _judged([-0.02, -0.03, -0.01, -0.02] * 2)
    open_ = _judged([0.012, 0.008, 0.011, 0.009])
    final = _judged([0.012, 0.008, 0.011, 0.009] * 2, final=True)
    outcomes = [v.outcome for v in (confirmed, rejected, open_, final)]
    assert outcomes == ["confirmed", "rejected", None, "inconclusive"]
    assert not any(v.out_of_reach for v in (confirmed, rejected, open_, final))


def test_a_plan_can_be_out_of_reach_at_twice_the_first_look() -> None:
    """At 8 (twice min_pairs) of 16 pairs, between futility bound and reach floor: inconclusive."""
    n, plan, need = 8, 16, least_gain(0.01)
    bounds = plan_bounds(0.05, 4, plan)

    def judged(center: float) -> Confirmation:
        return _judged([center + 0.05, center - 0.05] * (n // 2), prior_sigma=0.1,
                       prior_dof=1000, bounds=bounds, estimator="mean")  # fmt: skip

    sigma = judged(0.0).sigma  # the noise the test judges by (it does not move with the center)
    se = standard_error(sigma, n, "mean")
    floor = reach_floor(n, se, sigma, need=need, z_final=bounds.final, z_futility=FUTILITY_Z,
                        max_pairs=plan, estimator="mean")  # fmt: skip
    rejects_under = need - FUTILITY_Z * se
    assert rejects_under < floor  # a band the futility bound leaves open and the floor closes
    v = judged((rejects_under + floor) / 2)
    assert (v.outcome, v.pairs, v.out_of_reach) == ("inconclusive", n, True)


def test_judging_no_pairs_claims_no_gain_within_everything() -> None:
    """A final look at no pairs: inconclusive, a gain of 0 within (-inf, inf), no mean gain."""
    v = _judged([], final=True)
    assert v == Confirmation("inconclusive", 0, 0.0, (-math.inf, math.inf), 0.02)


def test_judge_s_default_estimator_is_the_default_policy_s_trimmed_mean() -> None:
    """Left out, judge's estimator and trim are the balanced policy's (trimmed mean, 0.2)."""
    pol = load_settings().get_policy("balanced")
    d = [0.05, 0.04, 0.3, 0.05, -0.2, 0.045, 0.05, 0.055]  # a spike on each side
    given = _judged(d, estimator=pol.estimator, trim=pol.trim)
    assert (pol.estimator, pol.trim) == ("trimmed_mean", 0.2)
    assert _judged(d) == given


def test_two_pairs_are_judged_by_the_race_s_noise_alone() -> None:
    """Under three pairs their spread is not counted: the noise is the race's, even of one dof."""
    for prior_dof in (1, 10):
        v = _judged([0.05, -0.01], prior_sigma=0.02, prior_dof=prior_dof, min_pairs=2)
        assert v.sigma == pytest.approx(0.02, rel=1e-12)


def test_a_first_look_never_ends_a_plan_as_out_of_reach() -> None:
    """At min_pairs of 64 pairs, an estimate under the plan's reach floor still measures on."""
    bounds = plan_bounds(0.05, 4, 64)

    def judged(center: float) -> Confirmation:
        return _judged([center + 0.05, center - 0.05] * 2, prior_sigma=0.05, prior_dof=1000,
                       bounds=bounds, max_pairs=64, estimator="mean")  # fmt: skip

    sigma = judged(0.0).sigma
    floor = reach_floor(4, standard_error(sigma, 4, "mean"), sigma, need=least_gain(0.01),
                        z_final=bounds.final, z_futility=FUTILITY_Z, max_pairs=64,
                        estimator="mean")  # fmt: skip
    v = judged(floor - 0.01)  # out of reach, were it judged so at this look
    assert (v.outcome, v.pairs, v.out_of_reach) == (None, 4, False)


def test_a_plan_one_pair_short_of_its_end_can_be_out_of_reach() -> None:
    """At 12 of 13 pairs, between futility bound and reach floor: inconclusive, a pair unspent."""
    n, plan, need = 12, 13, least_gain(0.01)
    bounds = plan_bounds(0.05, 3, plan)

    def judged(center: float) -> Confirmation:
        return _judged([center + 0.05, center - 0.05] * (n // 2), prior_sigma=0.05,
                       prior_dof=1000, bounds=bounds, min_pairs=3, max_pairs=plan,
                       estimator="mean")  # fmt: skip

    sigma = judged(0.0).sigma
    se = standard_error(sigma, n, "mean")
    floor = reach_floor(n, se, sigma, need=need, z_final=bounds.final, z_futility=FUTILITY_Z,
                        max_pairs=plan, estimator="mean")  # fmt: skip
    rejects_under = need - FUTILITY_Z * se
    assert rejects_under < floor
    v = judged((rejects_under + floor) / 2)
    assert (v.outcome, v.pairs, v.out_of_reach) == ("inconclusive", n, True)


def test_pairs_calmer_than_the_race_pool_their_noise_with_its_by_degrees_of_freedom() -> None:
    """The race's 5% of 10 dof and the pairs' own spread pool as a dof-weighted variance."""
    d = [0.03, 0.032, 0.029, 0.031, 0.030, 0.028, 0.033, 0.030]
    own, own_dof = pooled_sigma([d])
    v = _judged(d, prior_sigma=0.05, prior_dof=10)
    assert 0 < own < 0.05 and own_dof == 7
    assert v.sigma == pytest.approx(math.sqrt((10 * 0.05**2 + 7 * own**2) / 17), rel=1e-12)


def test_a_winner_exactly_as_fast_as_native_without_noise_is_never_confirmed() -> None:
    """No noise, margin 0, every pair level: a lower bound of exactly 0 is not above 0."""
    for n, final in [(8, False), (16, True)]:
        v = _judged([0.0] * n, prior_sigma=0.0, prior_dof=40, margin=0.0, final=final)
        assert (v.sigma, v.outcome) == (0.0, "inconclusive" if final else None)


def test_a_budget_cut_at_an_interim_look_is_not_told_as_out_of_reach() -> None:
    """Half a percent slower, the budget ending at 32 of 64 pairs: cut short, not out of reach."""
    probe = ScriptedProbe([0.95, 1.06, 1.0, 1.01], budget_calls=64)
    verdict, cut = confirm(probe, plan=64)
    assert (verdict.outcome, verdict.pairs, cut) == ("inconclusive", 32, True)
    assert not verdict.out_of_reach
    assert "stopped early" not in kept(8, 12, verdict, probe.policy)


def test_a_confirmation_is_adjusted_for_where_an_earlier_look_would_have_given_up() -> None:
    """Confirmed at 16 of 64 pairs: adjusted for where judge itself gives up at its look at 8."""
    plan, need = 64, least_gain(0.05)
    bounds = plan_bounds(0.05, 4, plan)
    spread = [0.002, -0.002, 0.001, -0.001] * 4  # the pairs' noise, of mean 0 at 8 and 16

    def judged(center: float, n: int, earlier: list[int]) -> Confirmation:
        # the race's noise, of many degrees of freedom, is each look's: calmer pairs pool in
        return _judged([center + e for e in spread[:n]], prior_sigma=0.04, prior_dof=10**9,
                       margin=0.05, bounds=bounds, max_pairs=plan, estimator="mean",
                       earlier=earlier)  # fmt: skip

    v = judged(0.052, 16, [4, 8])  # just over the margin's 0.0513
    assert v.outcome == "confirmed"
    # where the look at 8 stops (rejected or out of reach), by bisection: not at 0.045, under
    # the margin yet within its noise, where it measures on
    stops, goes_on = 0.0, 0.045
    assert judged(stops, 8, [4]).outcome is not None and judged(goes_on, 8, [4]).outcome is None
    for _ in range(50):
        mid = (stops + goes_on) / 2
        stops, goes_on = (mid, goes_on) if judged(mid, 8, [4]).outcome else (stops, mid)
    se = tuple(standard_error(v.sigma, k, "mean") for k in (4, 8, 16))
    z = bounds.all_z([4, 8], 16, last=True)
    upper = (max(z[0] * se[0], need), max(z[1] * se[1], need))
    center, _ = adjusted(Design(se, upper, (-math.inf, goes_on)), 0.052, 0.05)
    assert v.gain == pytest.approx(1.0 - math.exp(-center), rel=1e-6)
    # the floor alone, under that stop, would report another gain
    floor = reach_floor(8, se[1], v.sigma, need=need, z_final=bounds.final, z_futility=FUTILITY_Z,
                        max_pairs=plan, estimator="mean")  # fmt: skip
    assert floor < goes_on
    other, _ = adjusted(Design(se, upper, (-math.inf, floor)), 0.052, 0.05)
    assert v.gain != pytest.approx(1.0 - math.exp(-other), rel=1e-5)


def test_a_look_after_alpha_is_all_spent_has_no_bound_to_cross() -> None:
    """Looks at 4 and 8 of a 4-pair plan, the second not last: the first spent alpha, so inf."""
    first, second = spending_bounds(0.05, (4, 8), 4, last=False)
    assert first == pytest.approx(normal_quantile(0.95)) and second == math.inf
