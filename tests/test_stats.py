"""Estimators and the pooled noise figure the racing relies on."""

from __future__ import annotations

import math

import numpy as np
import pytest

from chunktune import Policy
from chunktune._stats import (
    ESTIMATOR_EFFICIENCY,
    estimate,
    normal_cdf,
    normal_quantile,
    pooled_log_sigma,
    pooled_sigma,
    standard_error,
)


@pytest.mark.parametrize("n", [2, 3, 5, 16])
def test_pooled_sigma_is_unbiased_for_small_samples(n: int) -> None:
    """With few samples per candidate the pooled noise is still about the true sigma."""
    rng = np.random.default_rng(n)
    sets = [list(np.exp(rng.normal(0.0, 0.03, n)) * (1 + k)) for k in range(40)]
    assert pooled_log_sigma(sets) == pytest.approx(0.03, rel=0.2)


def test_pooled_sigma_ignores_the_candidates_own_level() -> None:
    """Candidates of very different speeds pool their noise, not their differences."""
    sets = [[1.0, 1.0, 1.0], [5.0, 5.0, 5.0], [0.1, 0.1, 0.1]]
    assert pooled_log_sigma(sets) == 0.0


def test_pooled_sigma_resists_spikes() -> None:
    """A few huge spikes barely move the figure."""
    rng = np.random.default_rng(1)
    sets = [list(np.exp(rng.normal(0.0, 0.02, 8))) for _ in range(10)]
    calm = pooled_log_sigma(sets)
    sets[0][0] *= 3.0
    sets[3][5] *= 5.0
    assert pooled_log_sigma(sets) == pytest.approx(calm, rel=0.15)


def test_each_series_gives_one_degree_of_freedom_fewer_than_its_values() -> None:
    """Series of 3, 2, 1 and 0 values give 2 + 1 + 0 + 0 degrees of freedom to the pooled figure."""
    sigma, dof = pooled_sigma([[1.0, 1.1, 0.9], [2.0, 2.2], [5.0], []])
    assert sigma > 0 and dof == 3


def test_three_differences_are_enough_for_a_noise_figure() -> None:
    """One series of three values gives three differences: a noise figure with 2 dof."""
    sigma, dof = pooled_sigma([[0.0, 1.0, 3.0]])
    assert dof == 2
    assert sigma == pytest.approx(1.4826 * 2.0 / np.sqrt(2.0))  # median |difference| is 2


def test_two_differences_are_not_yet_a_noise_figure() -> None:
    """Two series of two values give only two differences: no noise figure, no dof."""
    assert pooled_sigma([[0.0, 1.0], [5.0, 7.0]]) == (0.0, 0)


def test_too_few_samples_give_zero() -> None:
    """No candidate with two samples means no noise figure yet."""
    assert pooled_log_sigma([[1.0], [2.0]]) == 0.0


@pytest.mark.parametrize(
    ("how", "expected"),
    [
        pytest.param("min", 1.0, id="min"),
        pytest.param("median", 3.0, id="median"),
        pytest.param("trimmed_mean", 3.0, id="trimmed_mean"),
        pytest.param("lower_mean", 2.0, id="lower_mean"),
    ],
)
def test_estimators(how: str, expected: float) -> None:
    """min, median, a 20% trimmed mean and the fast half's mean, with a spike at 100."""
    assert estimate([1.0, 2.0, 3.0, 4.0, 100.0], how, trim=0.2) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("how", "expected"),
    [
        pytest.param("median", 3.0, id="median"),
        pytest.param("lower_mean", 1.5, id="lower_mean"),
    ],
)
def test_of_an_even_count_the_median_and_the_fast_half_split_it_in_two(
    how: str, expected: float
) -> None:
    """Of four values the median is the middle two's mean, and the fast half is exactly two."""
    assert estimate([4.0, 1.0, 100.0, 2.0], how) == pytest.approx(expected)


def test_a_trimmed_mean_that_keeps_three_values_averages_them() -> None:
    """Of seven values a 20% trim drops two at each end and averages the middle three."""
    assert estimate([100.0, 0.0, 6.0, 2.0, 0.0, 100.0, 1.0], "trimmed_mean", trim=0.2) == 3.0


def test_a_trimmed_mean_without_a_trim_cuts_the_policies_default_fifth() -> None:
    """estimate()'s trim left out is a policy's default (0.2): two of ten values at each end go."""
    values = [0.0, 1.0, 2.0, 3.0, 4.0, 10.0, 11.0, 102.0, 200.0, 300.0]
    assert Policy().trim == 0.2  # the median would give 7, the mean 63.3
    assert estimate(values, "trimmed_mean") == estimate(values, "trimmed_mean", trim=0.2) == 22.0


def test_unknown_estimator_and_empty_samples_raise() -> None:
    """An unknown estimator or no samples is a ValueError."""
    with pytest.raises(ValueError, match="unknown estimator"):
        estimate([1.0], "mode")
    with pytest.raises(ValueError, match="zero samples"):
        estimate([], "min")


def test_standard_error_shrinks_with_samples() -> None:
    """Four times the samples halve the standard error; none gives infinity."""
    four = standard_error(0.04, 4, "median")
    assert standard_error(0.04, 16, "median") == pytest.approx(four / 2)
    assert standard_error(0.04, 0, "median") == float("inf")


def test_the_fast_half_of_two_values_is_the_faster_one() -> None:
    """lower_mean of two values is the faster alone (a half of one), not their mean."""
    assert estimate([3.0, 1.0], "lower_mean") == 1.0


def test_a_trim_that_leaves_a_third_averages_that_third() -> None:
    """Of nine values a 30% trim cuts three at each end and averages the middle three."""
    values = [0.0, 0.0, 0.0, 1.0, 2.0, 6.0, 50.0, 50.0, 50.0]
    assert estimate(values, "trimmed_mean", trim=0.3) == 3.0  # the median would give 2


def test_one_value_has_a_finite_standard_error() -> None:
    """One value's standard error is sigma times the estimator's efficiency; only none's is inf."""
    # the confirmation prices the spread of its pairs from one pair's standard error
    assert standard_error(0.04, 1, "median") == pytest.approx(0.05)
    assert standard_error(0.04, 1, "min") == pytest.approx(0.04)


def test_series_of_one_value_each_give_no_noise_figure_and_no_dof() -> None:
    """pooled_sigma of series of one value each is (0.0, 0): nothing to difference."""
    assert pooled_sigma([[1.0], [2.0], [3.0]]) == (0.0, 0)


@pytest.mark.parametrize("trim", [0.2, 0.3, 0.34, 0.45, 0.4999])
@pytest.mark.parametrize("n", [3, 4, 5])
def test_a_deeper_trim_is_never_less_robust_than_the_median(trim: float, n: int) -> None:
    """One spike among n samples: a trimmed mean at any trim ignores it (never the plain mean)."""
    samples = [0.0] * (n - 1) + [1.0]
    assert estimate(samples, "trimmed_mean", trim=trim) == 0.0


@pytest.mark.parametrize("how", ["median", "trimmed_mean", "lower_mean", "mean"])
def test_an_estimator_s_efficiency_is_its_spread_on_normal_noise(how: str) -> None:
    """The efficiency table is each estimator's spread over the mean's (its own: 1), within 8%."""
    draws = np.random.default_rng(0).normal(0.0, 1.0, (4000, 20))
    spread = np.std([estimate(d, how, trim=0.2) for d in draws]) / np.std(draws.mean(axis=1))
    assert ESTIMATOR_EFFICIENCY[how] == pytest.approx(spread, rel=0.08)


@pytest.mark.parametrize(
    ("n", "spread"),
    [
        (2, math.sqrt(1 - 1 / math.pi)),
        (3, math.sqrt(1 + math.sqrt(3) / (2 * math.pi) - 9 / (4 * math.pi))),
    ],
)
def test_the_standard_error_of_a_min_of_two_or_three_is_the_exact_spread(
    n: int, spread: float
) -> None:
    """min's standard error at 2 and 3 draws is the least draw's spread in closed form, to 7e-5."""
    # the Monte Carlo check below holds to 4%; an unnormalised density is 2e-4 off here
    assert standard_error(1.0, n, "min") == pytest.approx(spread, abs=7e-5)


@pytest.mark.parametrize("n", [2, 4, 8, 20])
def test_the_standard_error_of_a_min_is_its_spread_on_normal_noise(n: int) -> None:
    """min's standard error is its spread at each n (1.17x the mean's at 2, 2.35x at 20)."""
    draws = np.random.default_rng(n).normal(0.0, 1.0, (20000, n))
    spread = float(np.std(draws.min(axis=1)))
    assert standard_error(1.0, n, "min") == pytest.approx(spread, rel=0.04)


def test_a_trim_that_is_a_whole_count_of_samples_cuts_exactly_that_many() -> None:
    """28% of 25 samples is 7 at each end, though 0.28 * 25 is 7.000000000000001 in floats."""
    # sorted, the 18th value is the last one kept by a cut of 7 and dropped by a cut of 8
    assert estimate([0.0] * 17 + [11.0] * 8, "trimmed_mean", trim=0.28) == pytest.approx(1.0)


def test_the_normal_quantile_and_distribution_function_are_the_upper_tail_s() -> None:
    """normal_quantile(0.975) is 1.96 and normal_cdf(1.96) is 0.975: each undoes the other."""
    assert normal_quantile(0.975) == pytest.approx(1.959964, abs=1e-6)
    assert normal_cdf(1.959964) == pytest.approx(0.975, abs=1e-6)
