"""The selection rule on hand-made timing tables."""

from __future__ import annotations

import math

import pytest

from chunktune._select import Choice, _ms, pick, select

PLATEAU = {None: 1.00, 1: 0.905, 2: 0.90, 4: 0.90, 8: 0.902, 16: 0.904, 32: 0.95, 64: 1.5}


def test_keeps_native_when_best_is_within_margin() -> None:
    """A best candidate only 2% faster does not beat a 3% margin."""
    choice = select({None: 1.0, 4: 0.98, 8: 0.99}, native=12, upper=128, margin=0.03, tie_tol=0.02)
    assert choice.chunk_size is None
    assert "margin" in choice.reason and "12" in choice.reason


@pytest.mark.parametrize("tie_break", ["toward_upper", "evidence", "center"])
def test_at_margin_zero_a_size_only_as_fast_as_native_is_no_gain(tie_break: str) -> None:
    """margin 0: the best measured exactly as fast as native keeps native (true ties)."""
    choice = select(
        {None: 1.0, 4: 1.0, 8: 1.0}, native=12, upper=128, margin=0.0, tie_tol=0.02,
        tie_break=tie_break,
    )  # fmt: skip
    assert choice.chunk_size is None


def test_leaves_native_when_best_clears_margin() -> None:
    """A best candidate 10% faster is chosen."""
    choice = select({None: 1.0, 4: 0.90}, native=12, upper=128, margin=0.03, tie_tol=0.02)
    assert choice.chunk_size == 4
    assert "10.0% faster" in choice.reason


def test_center_picks_the_middle_of_the_plateau() -> None:
    """Among ties the center tie-break takes the middle, away from the cliff."""
    choice = select(PLATEAU, native=12, upper=128, margin=0.03, tie_tol=0.01, tie_break="center")
    assert choice.band == (1, 2, 4, 8, 16)
    assert choice.chunk_size == 4


def test_toward_upper_picks_the_largest_tie_like_the_older_tuner() -> None:
    """The older rule picks the tie nearest ceil(N/T), the plateau's edge."""
    choice = select(
        PLATEAU, native=12, upper=128, margin=0.03, tie_tol=0.01, tie_break="toward_upper"
    )
    assert choice.chunk_size == 16


@pytest.mark.parametrize(
    ("tie_break", "expected"),
    [
        pytest.param("smallest", 1, id="smallest"),
        pytest.param("toward_native", 16, id="toward_native"),
    ],
)
def test_other_tie_breaks(tie_break: str, expected: int) -> None:
    """smallest takes the smallest tie; toward_native the tie nearest the native chunk."""
    choice = select(PLATEAU, native=12, upper=128, margin=0.03, tie_tol=0.01, tie_break=tie_break)
    assert choice.chunk_size == expected


def test_tie_tolerance_widens_the_band() -> None:
    """A 6% tolerance lets 32 into the band."""
    choice = select(PLATEAU, native=12, upper=128, margin=0.03, tie_tol=0.06)
    assert 32 in choice.band and 64 not in choice.band


def test_noisy_win_is_not_taken_with_confidence() -> None:
    """A 5% lead inside large standard errors keeps native when confidence is required."""
    table = {None: 1.0, 4: 0.95}
    errors = {None: 0.03, 4: 0.03}
    sure = select(table, native=12, upper=128, margin=0.03, tie_tol=0.01)
    doubtful = select(
        table, native=12, upper=128, margin=0.03, tie_tol=0.01, errors=errors, confidence_z=2.0
    )
    assert sure.chunk_size == 4
    assert doubtful.chunk_size is None
    assert "noisy" in doubtful.reason


def test_no_candidates_keeps_native() -> None:
    """With only native measured there is nothing to choose."""
    assert select({None: 1.0}, native=3, upper=8, margin=0.03, tie_tol=0.02).chunk_size is None


def test_native_size_measured_as_integer_can_win_like_the_older_tuner() -> None:
    """The older rule compares integers to None, so the native size itself may be returned."""
    table = {None: 1.0, 4: 0.90, 8: 0.90, 12: 0.8999}
    choice = select(table, native=12, upper=16, margin=0.03, tie_tol=0.02, tie_break="toward_upper")
    assert choice.chunk_size == 12


def test_tie_z_counts_noise_as_a_tie() -> None:
    """With tie_z, candidates within the noise of the best join the band; the center moves."""
    table = {None: 1.0, 2: 0.90, 4: 0.904, 8: 0.91, 16: 0.915, 64: 1.4}
    errors = dict.fromkeys(table, 0.01)
    plain = select(table, native=12, upper=128, margin=0.03, tie_tol=0.005, errors=errors)
    noisy = select(
        table, native=12, upper=128, margin=0.03, tie_tol=0.005, errors=errors, tie_z=1.0
    )
    assert plain.band == (2, 4)
    assert noisy.band == (2, 4, 8, 16)
    assert (plain.chunk_size, noisy.chunk_size) == (2, 4)
    assert "or the noise" in noisy.reason


def test_every_tie_chosen_clears_the_margin() -> None:
    """A noisy tie of the best that is not itself margin-faster than native is not chosen."""
    table = {None: 1.0, 1: 0.975, 6: 0.95}
    errors = dict.fromkeys(table, 0.02)
    choice = select(
        table, native=12, upper=128, margin=0.03, tie_tol=0.005, errors=errors, tie_z=1.0
    )
    assert choice.band == (6,)
    assert choice.chunk_size == 6


def test_evidence_takes_the_measured_best_among_ties() -> None:
    """tie_break evidence takes the measured best, not the smallest size of the band."""
    choice = select(PLATEAU, native=12, upper=128, margin=0.03, tie_tol=0.01, tie_break="evidence")
    assert choice.band[0] == 1
    assert choice.chunk_size == choice.best == 2


def test_toward_native_breaks_an_even_distance_toward_the_smaller_size() -> None:
    """8 and 18 lie equally far from native 12 in log scale: toward_native takes 8."""
    table = {None: 1.0, 8: 0.9, 18: 0.9}
    choice = select(
        table, native=12, upper=128, margin=0.03, tie_tol=0.01, tie_break="toward_native"
    )
    assert choice.band == (8, 18)
    assert choice.chunk_size == 8


def test_at_margin_zero_a_tie_only_as_fast_as_native_is_not_chosen() -> None:
    """margin 0: a tie of the best that merely equals native stays out of the band."""
    table = {None: 1.0, 4: 0.99, 16: 1.0}
    choice = select(table, native=12, upper=16, margin=0.0, tie_tol=0.02, tie_break="toward_upper")
    assert choice.band == (4,)
    assert choice.chunk_size == 4


def test_milliseconds_keep_about_four_significant_digits() -> None:
    """Reasons print times with four significant digits, whatever their magnitude."""
    assert (_ms(0.1076), _ms(0.0985), _ms(0.0013)) == ("107.6 ms", "98.50 ms", "1.300 ms")


def test_a_best_exactly_at_the_margin_is_chosen() -> None:
    """A gain of exactly the margin clears it: the size is chosen, and it is its own band."""
    choice = select({None: 1.0, 8: 0.75}, native=12, upper=128, margin=0.25, tie_tol=0.01)
    assert (choice.chunk_size, choice.band) == (8, (8,))


def test_a_best_exactly_as_fast_as_native_is_reported_as_no_faster() -> None:
    """An exact tie with native keeps native, and the reason calls it 0.0% faster, not slower."""
    choice = select({None: 1.0, 4: 1.0}, native=12, upper=128, margin=0.03, tie_tol=0.01)
    assert choice.reason == (
        "kept the native chunk 12: the best candidate, 4 at 1000.0 ms, was 0.0% faster than "
        "native (1000.0 ms), under the 3.0% margin"
    )


def test_a_best_slower_than_native_is_reported_as_slower_with_no_margin_to_fall_under() -> None:
    """A best slower than native keeps native, and the reason says slower, naming no margin."""
    choice = select({None: 1.0, 4: 1.125}, native=12, upper=128, margin=0.0, tie_tol=0.01)
    assert choice.reason == (
        "kept the native chunk 12: the best candidate, 4 at 1125.0 ms, was 12.5% slower than "
        "native (1000.0 ms)"
    )


def test_a_gain_of_exactly_confidence_z_errors_is_within_the_noise() -> None:
    """The best must beat native by more than confidence_z errors: exactly that keeps native."""
    errors = {None: 0.0, 8: math.log(1.0 / 0.5)}
    choice = select(
        {None: 1.0, 8: 0.5}, native=12, upper=128, margin=0.03, tie_tol=0.01, errors=errors,
        confidence_z=1.0,
    )  # fmt: skip
    assert choice.chunk_size is None and "too noisy" in choice.reason


def test_a_best_without_an_error_is_too_noisy_to_be_sure_of() -> None:
    """With confidence_z, a best with no standard error given counts as infinitely noisy."""
    choice = select(
        {None: 1.0, 8: 0.5}, native=12, upper=128, margin=0.03, tie_tol=0.01,
        errors={None: 0.01}, confidence_z=2.0,
    )  # fmt: skip
    assert choice.chunk_size is None and "too noisy" in choice.reason


def test_at_tie_tol_zero_the_best_is_its_own_band() -> None:
    """tie_tol 0: the best still ties itself, so it is chosen alone."""
    choice = select({None: 1.0, 4: 0.9, 8: 0.95}, native=12, upper=128, margin=0.03, tie_tol=0.0)
    assert (choice.chunk_size, choice.band) == (4, (4,))


def test_tie_z_zero_ignores_errors_even_infinite_ones() -> None:
    """tie_z 0 adds no slack, so infinite errors (one sample each) leave the band to tie_tol."""
    inf = math.inf
    choice = select(
        {None: 1.0, 4: 0.9, 8: 0.905}, native=12, upper=128, margin=0.03, tie_tol=0.01,
        errors={None: inf, 4: inf, 8: inf},
    )  # fmt: skip
    assert (choice.chunk_size, choice.band) == (4, (4, 8))


def test_an_exact_tie_of_the_best_goes_to_the_smaller_size() -> None:
    """Two sizes measured exactly alike: the best is the smaller, whatever the table's order."""
    choice = select(
        {None: 1.0, 8: 0.9, 4: 0.9}, native=12, upper=128, margin=0.03, tie_tol=0.01,
        tie_break="evidence",
    )  # fmt: skip
    assert (choice.best, choice.chunk_size) == (4, 4)


def test_a_band_of_two_names_both_and_the_tie_break() -> None:
    """A band of two ties says which two and how one was taken."""
    choice = select(
        {None: 1.0, 4: 0.9, 8: 0.9}, native=12, upper=128, margin=0.03, tie_tol=0.01,
        tie_break="smallest",
    )  # fmt: skip
    assert choice.reason.endswith(
        "2 candidates (4, 8) were within 1.0% of the best; tie-break smallest"
    )


def test_evidence_without_a_best_in_the_band_takes_its_first_size() -> None:
    """pick's evidence tie-break falls back to the band's smallest size."""
    assert pick([4, 8, 16], "evidence", native=12, upper=128) == 4
    assert pick([4, 8, 16], "evidence", native=12, upper=128, best=32) == 4


def test_toward_upper_breaks_an_even_distance_toward_the_smaller_size() -> None:
    """Two ties equally far from ceil(N/T), one on each side: toward_upper takes the smaller."""
    assert pick([10, 14], "toward_upper", native=12, upper=12) == 10


def test_a_native_without_an_error_is_too_noisy_to_be_sure_of() -> None:
    """With confidence_z, native with no standard error given counts as infinitely noisy."""
    choice = select(
        {None: 1.0, 8: 0.5}, native=12, upper=128, margin=0.03, tie_tol=0.01,
        errors={8: 0.01}, confidence_z=2.0,
    )  # fmt: skip
    assert choice.chunk_size is None and "too noisy" in choice.reason


def test_an_empty_table_of_errors_is_too_noisy_to_be_sure_of() -> None:
    """With confidence_z, errors given as an empty table know no size's noise: native stays."""
    choice = select(
        {None: 1.0, 8: 0.5}, native=12, upper=128, margin=0.03, tie_tol=0.01,
        errors={}, confidence_z=2.0,
    )  # fmt: skip
    assert choice.chunk_size is None and "too noisy" in choice.reason


def test_tie_z_without_errors_names_tie_tol_alone() -> None:
    """The reason says 'or the noise' only when tie_z has errors to count."""
    table = {None: 1.0, 4: 0.9, 8: 0.95}
    bare = select(table, native=12, upper=128, margin=0.03, tie_tol=0.01, tie_z=1.0)
    assert bare.reason.endswith("; no other candidate came within 1.0% of it")
    noisy = select(
        table, native=12, upper=128, margin=0.03, tie_tol=0.01, tie_z=1.0,
        errors={None: 0.001, 4: 0.001, 8: 0.001},
    )  # fmt: skip
    assert noisy.reason.endswith("; no other candidate came within 1.0% or the noise of it")


def test_tie_z_counts_the_noise_of_both_the_tie_and_the_best() -> None:
    """A tie's slack is tie_z times the combined error of the size and the best."""
    # 8 is 5.4% behind 4: within 1% plus hypot(0.03, 0.04) = 5%, not 1% plus hypot(0.03, 0.03)
    choice = select(
        {None: 1.0, 4: 0.9, 8: 0.95}, native=12, upper=128, margin=0.03, tie_tol=0.01,
        errors={None: 0.01, 4: 0.04, 8: 0.03}, tie_z=1.0, tie_break="smallest",
    )  # fmt: skip
    assert choice.band == (4, 8)


def test_milliseconds_under_one_keep_four_significant_digits() -> None:
    """Under a millisecond the digits grow to four significant ones; exactly 1 ms has three."""
    assert (_ms(0.001), _ms(0.0005), _ms(0.00005)) == ("1.000 ms", "0.5000 ms", "0.0500 ms")


def test_a_time_of_zero_prints_with_four_decimals() -> None:
    """Zero seconds, which has no magnitude to take digits from, prints as 0.0000 ms."""
    assert _ms(0.0) == "0.0000 ms"


def at_1pct(
    table: dict[int | None, float],
    *,
    errors: dict[int | None, float] | None = None,
    confidence_z: float = 0.0,
    tie_z: float = 0.0,
) -> Choice:
    """select with native 12, upper 16, margin and tie_tol 1% (native at 2 s in most tables,
    so that a ratio to native and a product with it differ)."""
    return select(
        table,
        native=12,
        upper=16,
        margin=0.01,
        tie_tol=0.01,
        errors=errors,
        confidence_z=confidence_z,
        tie_z=tie_z,
    )


def test_errors_without_tie_z_name_tie_tol_alone() -> None:
    """Errors given but tie_z 0: the noise widened nothing, and the reason says tie_tol alone."""
    errors = {None: 0.01, 8: 0.01, 16: 0.01}
    choice = at_1pct({None: 2.0, 8: 1.8, 16: 1.9}, errors=errors, tie_z=0.0)
    assert choice.reason == (
        "chose 8: 10.0% faster than the native chunk 12 (1800.0 ms vs 2000.0 ms); "
        "no other candidate came within 1.0% of it"
    )


def test_native_kept_under_the_margin_gives_the_gain_as_a_ratio_to_native() -> None:
    """1.99 s against native's 2 s is 0.5% faster; 2.2 s is 10.0% slower."""
    assert at_1pct({None: 2.0, 8: 1.99}).reason == (
        "kept the native chunk 12: the best candidate, 8 at 1990.0 ms, was 0.5% faster than "
        "native (2000.0 ms), under the 1.0% margin"
    )
    assert at_1pct({None: 2.0, 8: 2.2}).reason == (
        "kept the native chunk 12: the best candidate, 8 at 2200.0 ms, was 10.0% slower than "
        "native (2000.0 ms)"
    )


def test_confidence_z_without_errors_asks_for_no_noise_figure() -> None:
    """confidence_z but no errors table: the noise is not judged, and the best is chosen."""
    choice = at_1pct({None: 2.0, 8: 1.8}, confidence_z=2.0)
    assert choice.chunk_size == 8


def test_a_gain_clear_of_the_noise_is_judged_on_the_ratio_to_native() -> None:
    """A 10% gain (log 0.105) clears 2 x 0.042 of noise whatever the scale of the times."""
    errors = {None: 0.03, 8: 0.03}
    choice = at_1pct({None: 0.2, 8: 0.18}, confidence_z=2.0, errors=errors)
    assert choice.chunk_size == 8


def test_a_gain_within_the_noise_says_how_wide_the_noise_is() -> None:
    """Native kept within the noise: the reason's figure is confidence_z times the noise."""
    errors = {None: 0.05, 8: 0.05}
    choice = at_1pct({None: 2.0, 8: 1.8}, confidence_z=2.0, errors=errors)
    assert choice.reason == (
        "kept the native chunk 12: the best candidate, 8, looked 10.0% faster but the "
        "measurements are too noisy to be sure (±14.1%)"
    )


def test_without_native_measured_the_band_and_reason_stand_alone() -> None:
    """No native time: ties need no ceiling, and the reason says native was not measured."""
    choice = at_1pct({8: 0.9, 16: 0.905})
    assert (choice.chunk_size, choice.band) == (8, (8, 16))
    assert choice.reason == (
        "chose 8 at 900.0 ms (native was not measured); 2 candidates (8, 16) were within "
        "1.0% of the best; took the middle of that plateau, away from the large-chunk cliff"
    )
