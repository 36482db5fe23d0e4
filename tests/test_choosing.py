"""Choosing at the race's end (chunktune._choosing.choose): the candidate to confirm, or native."""

from __future__ import annotations

import math

import attrs
from _fields import WOBBLE, balanced
from _fields import field as race_of

from chunktune import Policy
from chunktune._choosing import choose
from chunktune._field import Field
from chunktune._reasons import pct


def field(pol: Policy, levels: dict[int, float], *, wobble: tuple[float, ...] = WOBBLE) -> Field:
    """A race of six paired rounds: native at 1 s, each size at its level (native 12, upper 128)."""
    return race_of(pol, {c: (level,) for c, level in levels.items()}, wobble=wobble)


class Gate:
    """The noise gate as choose asks it: a fixed answer."""

    def __init__(self, noisy: str | None = None) -> None:
        self.noisy = noisy

    def too_noisy(self, *, final: bool) -> str | None:
        return self.noisy


def chosen(f: Field, gate: Gate | None = None) -> tuple[int | None, str, bool]:
    size, choice, gated = choose(f, gate or Gate())  # type: ignore[arg-type]
    return size, choice.reason, gated


def test_a_tie_short_of_the_margin_is_never_the_one_chosen() -> None:
    """toward_upper takes no tie of the best that is itself under the margin over native."""
    pol = balanced(tie_break="toward_upper", tie_z=0.0, tie_tol=0.02, margin=0.03)
    # 16 is within 2% of 8, but only 2.5% faster than native
    size, reason, _ = chosen(field(pol, {8: 0.96, 16: 0.975}))
    assert (size, reason) == (8, "the best candidate, 8, looked 4.0% faster than native")


def test_a_tie_within_the_noise_of_the_best_joins_the_band() -> None:
    """With tie_z, a size outside tie_tol but within the noise of the best is a tie."""
    noisy = (0.97, 1.03, 0.97, 1.03, 0.97, 1.03)
    pol = balanced(tie_break="toward_upper")  # tie_tol 1%, tie_z 1
    assert chosen(field(pol, {8: 0.94, 16: 0.96}, wobble=noisy))[0] == 16
    assert chosen(field(attrs.evolve(pol, tie_z=0.0), {8: 0.94, 16: 0.96}, wobble=noisy))[0] == 8


def test_a_best_clearly_faster_but_under_the_margin_keeps_native() -> None:
    """A 1.5% gain clear of the noise is still under a 3% margin: native, and the reason says so."""
    size, reason, gated = chosen(field(balanced(margin=0.03), {8: 0.985}))
    assert size is None and not gated
    assert reason == (
        "kept the native chunk 12: the best candidate, 8, looked 1.5% faster than native, "
        "under the 3.0% margin"
    )


def test_a_race_whose_every_candidate_was_dropped_says_so() -> None:
    """Candidates raced out leave native with that reason, not 'no size but native's'."""
    f = field(balanced(), {8: 1.3, 16: 2.5})
    for c in (8, 16):
        f.drop(c, "dropped by the test")
    size, reason, _ = chosen(f)
    assert size is None
    assert reason == (
        "kept the native chunk 12: every candidate fell clearly behind native or short of the "
        "margin"
    )


def test_an_extending_policy_asks_the_noise_gate_after_the_margin() -> None:
    """With extend_budget, a gain the stretched budget cannot confirm keeps native, gated."""
    pol = balanced(extend_budget=True, hard_limit_s=60.0)
    f = field(pol, {8: 0.9})
    assert chosen(f) == (8, "the best candidate, 8, looked 10.0% faster than native", False)
    size, reason, gated = chosen(f, Gate("too noisy to confirm"))
    assert (size, reason, gated) == (None, "kept the native chunk 12: too noisy to confirm", True)


def test_a_best_measured_in_one_round_keeps_native_for_want_of_a_noise_figure() -> None:
    """One round gives no noise estimate: native, and the reason says the rounds were too few."""
    size, reason, gated = chosen(field(balanced(min_rounds=1), {8: 0.9}, wobble=(1.0,)))
    assert size is None and not gated
    assert reason == (
        "kept the native chunk 12: the best candidate, 8, looked 10.0% faster than native, "
        "in too few rounds to know the noise"
    )


class Pace:
    """The pace as choose asks it: a call's price."""

    def mean_call(self) -> float:
        return 0.5


def test_sizes_measured_exactly_alike_are_ties_even_at_tie_tol_zero() -> None:
    """tie_tol 0 still counts an exact tie of the best: toward_upper takes the larger."""
    pol = balanced(tie_break="toward_upper", tie_tol=0.0, tie_z=0.0)
    assert chosen(field(pol, {8: 0.9, 16: 0.9}))[0] == 16


def test_a_gain_within_the_noise_says_how_wide_the_noise_is() -> None:
    """Native kept within the noise: the reason gives the noise as a positive figure."""
    noisy = (0.97, 1.03, 0.97, 1.03, 0.97, 1.03)
    f = field(balanced(confidence_z=2.0), {8: 0.99}, wobble=noisy)
    doubt = 1.0 - math.exp(-2.0 * f.ev.compare(8, None).se)
    assert chosen(f) == (
        None,
        "kept the native chunk 12: the best candidate, 8, looked 1.0% faster than native, "
        f"within the noise (±{pct(doubt)})",
        False,
    )
    assert doubt > 0


def test_a_gain_of_exactly_the_margin_is_chosen() -> None:
    """A best measured exactly the margin faster than native clears it."""
    f = field(balanced(margin=0.5), {8: 0.5}, wobble=(1.0,) * 6)
    assert chosen(f) == (8, "the best candidate, 8, looked 50.0% faster than native", False)


def test_a_gain_under_the_margin_by_its_own_ratio_keeps_native() -> None:
    """The margin is a fraction of native's time: 9.5% faster is under a 10% margin."""
    assert chosen(field(balanced(margin=0.1), {8: 0.905})) == (
        None,
        "kept the native chunk 12: the best candidate, 8, looked 9.5% faster than native, "
        "under the 10.0% margin",
        False,
    )


def test_the_reason_gives_the_gain_of_the_size_the_tie_break_took() -> None:
    """toward_upper takes 16 from the band: the reason's gain is 16's, and 8 is named the best."""
    pol = balanced(tie_break="toward_upper", tie_tol=0.02)
    assert chosen(field(pol, {8: 0.94, 16: 0.95}))[:2] == (
        16,
        "16 (picked by tie-break toward upper from the ties of the race's best, 8) looked "
        "5.0% faster than native",
    )


def test_the_band_of_ties_is_ascending() -> None:
    """The choice's band lists its ties in ascending size, whatever their order in a set."""
    pol = balanced(tie_break="toward_upper", tie_tol=0.02)
    _, choice, _ = choose(field(pol, {4: 0.94, 9: 0.941}), Gate())  # type: ignore[arg-type]
    assert choice.band == (4, 9)


def test_a_race_too_short_to_judge_prices_the_whole_field_with_native() -> None:
    """The budget the reason asks for gives native and every candidate, dropped too, its rounds."""
    f = field(balanced(min_rounds=8), {8: 0.9, 16: 0.95})
    f.drop(16, "dropped by the test")
    gate = Gate()
    gate.pace = Pace()  # type: ignore[attr-defined]
    assert chosen(f, gate) == (
        None,
        "kept the native chunk 12: the budget ended before any candidate had enough rounds: "
        "one call takes about 0.5 s, and a time_budget_s of about 25 s would give the field "
        "its 8 rounds",
        False,
    )


def test_a_race_too_short_without_confirmation_asks_for_the_races_budget_alone() -> None:
    """A policy that does not confirm gives the whole budget to the race: 12.5 s asked as 13 s."""
    f = field(balanced(min_rounds=8, confirm=False), {8: 0.9, 16: 0.95})
    f.drop(16, "dropped by the test")
    gate = Gate()
    gate.pace = Pace()  # type: ignore[attr-defined]
    assert chosen(f, gate)[1].endswith(
        "one call takes about 0.5 s, and a time_budget_s of about 13 s would give the field "
        "its 8 rounds"
    )


def test_a_tie_exactly_at_the_margin_joins_the_band() -> None:
    """A tie of the best measured exactly the margin faster than native clears the margin."""
    pol = balanced(margin=0.5, tie_break="toward_upper", tie_tol=0.2, tie_z=0.0)
    f = field(pol, {8: 0.45, 16: 0.5}, wobble=(1.0,) * 6)
    assert chosen(f) == (
        16,
        "16 (picked by tie-break toward upper from the ties of the race's best, 8) looked "
        "50.0% faster than native",
        False,
    )


def test_at_margin_zero_a_tie_only_as_fast_as_native_is_not_chosen() -> None:
    """margin 0: a tie of the best that merely equals native stays out of the band, as in select."""
    pol = balanced(margin=0.0, tie_break="toward_upper", tie_tol=0.02, tie_z=0.0)
    f = field(pol, {8: 0.99, 16: 1.0}, wobble=(1.0,) * 6)
    _, choice, _ = choose(f, Gate())  # type: ignore[arg-type]
    assert (choice.chunk_size, choice.band) == (8, (8,))
    assert choice.reason == "the best candidate, 8, looked 1.0% faster than native"


# a size that joined the race for its last two rounds, against one measured in all six
NOISY = (0.95, 1.05, 0.95, 1.05, 0.95, 1.05)


def test_an_unbeaten_size_measured_on_more_rounds_goes_to_confirmation() -> None:
    """The best on two rounds, not clear of one on six by tie_z: the six-round size is confirmed."""
    f = race_of(balanced(), {8: (None, None, None, None, 0.92), 16: (0.94,)}, wobble=NOISY)
    size, choice, _ = choose(f, Gate())  # type: ignore[arg-type]
    assert (size, choice.best) == (16, 8)
    assert choice.reason == (
        "16 (on more rounds than the race's best, 8, and not clear of it) looked 6.1% faster "
        "than native"
    )


def test_a_size_the_best_beat_by_tie_z_is_not_confirmed_for_its_rounds() -> None:
    """Clear of the best on their common rounds, the size measured longer is not the one chosen."""
    f = race_of(balanced(), {8: (None, None, None, None, 0.92), 16: (0.94,)})
    assert chosen(f)[0] == 8


def test_a_longer_measured_size_short_of_the_margin_is_not_confirmed_for_its_rounds() -> None:
    """A size under the margin over native is never taken over the best for its rounds."""
    f = race_of(
        balanced(margin=0.03), {8: (None, None, None, None, 0.95), 16: (0.98,)}, wobble=NOISY
    )
    size, choice, _ = choose(f, Gate())  # type: ignore[arg-type]
    assert (size, choice.best) == (8, 8)


def test_the_best_of_sizes_measured_exactly_alike_is_the_smaller() -> None:
    """Two sizes measured exactly alike: the choice names the smaller as the race's best."""
    _, choice, _ = choose(field(balanced(), {8: 0.9, 16: 0.9}), Gate())  # type: ignore[arg-type]
    assert (choice.chunk_size, choice.best) == (8, 8)


def test_a_gain_of_exactly_confidence_z_errors_is_within_the_noise() -> None:
    """A best whose upper bound at confidence_z is exactly native's time keeps native."""
    vs = field(balanced(), {8: 0.95}, wobble=NOISY).ev.compare(8, None)
    z = -vs.diff / vs.se
    for _ in range(64):  # settle z on the float that puts the bound exactly at 0
        if (upper := vs.upper(z)) == 0.0:
            break
        z = math.nextafter(z, math.inf if upper < 0 else -math.inf)
    assert vs.upper(z) == 0.0
    size, reason, _ = chosen(field(balanced(confidence_z=z), {8: 0.95}, wobble=NOISY))
    assert size is None and "within the noise" in reason


def test_an_extending_policy_under_the_margin_keeps_native_for_the_margin() -> None:
    """With extend_budget a gain under the margin is kept for the margin; the gate is not asked."""
    pol = balanced(extend_budget=True, hard_limit_s=60.0, margin=0.03)
    size, reason, gated = chosen(field(pol, {8: 0.985}), Gate("too noisy to confirm"))
    assert (size, gated) == (None, False)
    assert reason.endswith("looked 1.5% faster than native, under the 3.0% margin")


def test_a_size_exactly_as_fast_as_the_best_on_their_rounds_is_unbeaten() -> None:
    """A size measured longer that the best has not beaten at all (to the last bit) is confirmed."""
    f = race_of(balanced(), {8: (None, None, None, None, 0.92), 16: (0.92,)}, wobble=(1.0,) * 6)
    assert f.ev.compare(16, 8).lower(f.p.tie_z) == 0.0
    size, choice, _ = choose(f, Gate())  # type: ignore[arg-type]
    assert (size, choice.best) == (16, 8)


def test_a_size_handed_over_to_keeps_the_races_best_as_its_band() -> None:
    """With tie-break evidence the band the chosen size came from is the race's best alone."""
    f = race_of(balanced(), {8: (None, None, None, None, 0.92), 16: (0.94,)}, wobble=NOISY)
    _, choice, _ = choose(f, Gate())  # type: ignore[arg-type]
    assert (choice.chunk_size, choice.band) == (16, (8,))


def test_a_size_short_of_min_rounds_but_for_a_call_cut_from_native_is_not_chosen() -> None:
    """A call in a round cut before native's is no round: under min_rounds, nothing to choose."""
    f = field(balanced(min_rounds=2), {8: 0.8}, wobble=(1.0,))
    f.ev.add(8, 1, 0.8)  # the budget cut round 1 after 8's call, before native's
    f.round = 1
    gate = Gate()
    gate.pace = Pace()  # type: ignore[attr-defined]
    size, reason, _ = chosen(f, gate)
    assert size is None
    assert reason.startswith(
        "kept the native chunk 12: the budget ended before any candidate had enough rounds"
    )


def test_a_call_cut_from_native_s_round_does_not_make_a_size_the_longest_measured() -> None:
    """Sizes on equal paired rounds: a call whose round lost native's does not win the tie-break."""
    rows = {8: (None, None, 0.92), 16: (None, None, 0.94)}
    f = race_of(balanced(), rows, wobble=NOISY)
    f.ev.add(16, 6, 0.94)  # the budget cut round 6 after 16's call, before native's
    f.round = 6
    size, choice, _ = choose(f, Gate())  # type: ignore[arg-type]
    assert (size, choice.best) == (8, 8)


class AskedGate(Gate):
    """The fixed-answer gate, noting the ``final`` of each question."""

    def __init__(self, noisy: str | None = None) -> None:
        super().__init__(noisy)
        self.asked: list[bool] = []

    def too_noisy(self, *, final: bool) -> str | None:
        self.asked.append(final)
        return self.noisy


def test_a_best_slower_than_native_keeps_native_and_says_how_much_slower() -> None:
    """A best 10% slower than native: native, not gated, the reason giving 10.0% slower."""
    assert chosen(field(balanced(), {8: 1.1})) == (
        None,
        "kept the native chunk 12: no candidate measured faster than native "
        "(the best, 8, was 10.0% slower)",
        False,
    )


def test_a_policy_that_cannot_stretch_asks_the_noise_gate_at_the_race_s_end() -> None:
    """Without extend_budget a gain the gate finds too noisy keeps native, gated, asked as final."""
    gate = AskedGate("too noisy to confirm")
    size, choice, gated = choose(field(balanced(), {8: 0.9}), gate)  # type: ignore[arg-type]
    assert (size, choice.reason, gated) == (
        None,
        "kept the native chunk 12: too noisy to confirm",
        True,
    )
    assert gate.asked == [True]


def test_an_extending_policy_asks_the_noise_gate_as_the_race_s_end() -> None:
    """With extend_budget the gate is asked once, after the margin, as the race's end (final)."""
    gate = AskedGate()
    pol = balanced(extend_budget=True, hard_limit_s=60.0)
    assert choose(field(pol, {8: 0.9}), gate)[0] == 8  # type: ignore[arg-type]
    assert gate.asked == [True]


def test_a_field_of_native_alone_says_there_is_nothing_to_compare() -> None:
    """No candidate but native: native kept, and the reason says there was nothing to compare."""
    assert chosen(field(balanced(), {})) == (
        None,
        "kept the native chunk 12: the candidate list holds no size but native's; "
        "nothing to compare",
        False,
    )


def test_a_gain_of_exactly_the_least_gain_is_chosen() -> None:
    """A best whose log gain is exactly the field's least gain (need) clears the margin."""
    f = field(balanced(), {8: 0.9})
    f.need = -f.ev.compare(8, None).diff
    assert chosen(f) == (8, "the best candidate, 8, looked 10.0% faster than native", False)


def test_a_size_measured_longer_gaining_exactly_the_least_gain_is_handed_over_to() -> None:
    """Tie-break evidence: a size on more rounds gaining exactly the least gain is confirmed."""
    f = race_of(balanced(), {8: (None, None, None, None, 0.92), 16: (0.94,)}, wobble=NOISY)
    f.need = -f.ev.compare(16, None).diff
    size, choice, _ = choose(f, Gate())  # type: ignore[arg-type]
    assert (size, choice.best) == (16, 8)
