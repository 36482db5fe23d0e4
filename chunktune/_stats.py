"""Estimators and noise figures over repeated timings: pure functions over numbers."""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable, Sequence
from statistics import NormalDist

import numpy as np
import numpy.typing as npt

__all__ = [
    "ESTIMATOR_EFFICIENCY",
    "estimate",
    "normal_cdf",
    "normal_quantile",
    "pooled_log_sigma",
    "pooled_sigma",
    "standard_error",
]

# standard error of the estimator relative to the mean's, for normal-ish noise (min's
# depends on how many values it is given: _min_efficiency)
ESTIMATOR_EFFICIENCY = {
    "median": 1.25,
    "trimmed_mean": 1.1,
    "lower_mean": 1.2,
    "mean": 1.0,
}
_MAD_TO_SIGMA = 1.4826


def estimate(samples: Sequence[float], estimator: str, *, trim: float = 0.2) -> float:
    """Reduce repeated values (seconds, or log ratios) to one estimate of their location.

    ``min`` suits machines where load only ever adds time; ``median`` and
    ``trimmed_mean`` (dropping ``trim`` of the samples at each end, rounded up, so
    that of as few as three samples the outer ones go; a cut that would leave nothing
    leaves the median) are robust to symmetric noise and rare spikes alike; ``mean``
    is neither.

    Raises:
        ValueError: no samples, or an unknown estimator.
    """
    if not len(samples):
        raise ValueError("cannot estimate from zero samples")
    data = np.sort(np.asarray(samples, dtype=float))
    if estimator == "min":
        return float(data[0])
    if estimator == "median":
        return float(np.median(data))
    if estimator == "mean":
        return float(data.mean())
    if estimator == "lower_mean":
        # the faster half: load and preemption only ever add time, so the slow half
        # holds the interference; averaging the fast half keeps min's robustness to it
        # without min's bias toward whoever was sampled most
        return float(data[: max(1, (data.size + 1) // 2)].mean())
    if estimator == "trimmed_mean":
        # rounding the cut up keeps a few samples robust: of 4, one spike is dropped
        cut = math.ceil(trim * data.size - 1e-9) if trim > 0 else 0
        if data.size - 2 * cut <= 0:  # a cut that leaves nothing leaves the middle: the median
            return float(np.median(data))
        return float(data[cut : data.size - cut].mean())
    raise ValueError(f"unknown estimator {estimator!r}")


def pooled_sigma(series: Iterable[Sequence[float]]) -> tuple[float, int]:
    """Robust per-value noise (a standard deviation) pooled over several series.

    Uses the differences between every two values of the same series: each is the
    difference of two noise draws (variance 2 sigma^2), whatever the series' own
    location, and their median absolute value is robust to spikes. Residuals
    around a series' own median would not do: with three values one of them is
    always exactly zero, and sigma would come out far too small. Returns
    ``(sigma, degrees of freedom)``; ``(0.0, 0)`` when fewer than three
    differences exist.
    """
    diffs: list[npt.NDArray[np.float64]] = []
    dof = 0
    for values in series:
        if len(values) < 2:
            continue
        data = np.asarray(values, dtype=float)
        i, j = np.triu_indices(data.size, k=1)
        diffs.append(data[i] - data[j])
        dof += data.size - 1
    if not diffs:
        return 0.0, 0
    pooled = np.concatenate(diffs)
    if pooled.size < 3:
        return 0.0, 0
    return float(_MAD_TO_SIGMA * np.median(np.abs(pooled)) / math.sqrt(2.0)), dof


def pooled_log_sigma(sample_sets: Iterable[Sequence[float]]) -> float:
    """:func:`pooled_sigma` of the log-seconds of each set of timings (seconds)."""
    return pooled_sigma(np.log(np.asarray(s, dtype=float)) for s in sample_sets)[0]


def standard_error(sigma: float, n: int, estimator: str) -> float:
    """Standard error of an estimate from ``n`` values of noise ``sigma`` (same units)."""
    if n <= 0:
        return math.inf
    if estimator == "min":
        return _min_efficiency(n) * sigma / math.sqrt(n)
    return ESTIMATOR_EFFICIENCY[estimator] * sigma / math.sqrt(n)


@functools.lru_cache(maxsize=256)
def _min_efficiency(n: int) -> float:
    """The spread of the least of ``n`` normal draws over the spread of their mean.

    Unlike the other estimators', it grows with ``n`` (1.17 at 2, 1.73 at 8, 2.35 at 20):
    the least value narrows only slowly as more are drawn. From the least draw's
    density, ``n phi(x) (1 - Phi(x))^(n-1)``, on a fine grid.
    """
    x = np.linspace(-12.0, 12.0, 24001)
    dx = x[1] - x[0]
    phi = np.exp(-0.5 * x * x) / math.sqrt(2.0 * math.pi)
    survival = np.clip(1.0 - np.cumsum(phi) * dx, 0.0, 1.0)
    density = n * phi * survival ** (n - 1)
    density /= density.sum() * dx
    mean = float((x * density).sum() * dx)
    spread = math.sqrt(float(((x - mean) ** 2 * density).sum() * dx))
    return spread * math.sqrt(n)


def normal_quantile(p: float) -> float:
    """The standard normal quantile: ``normal_quantile(0.975)`` is about 1.96."""
    return NormalDist().inv_cdf(p)


def normal_cdf(z: float) -> float:
    """The standard normal distribution function: ``normal_cdf(1.96)`` is about 0.975."""
    return NormalDist().cdf(z)
