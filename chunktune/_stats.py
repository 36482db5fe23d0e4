"""Estimators and noise figures over repeated timings: pure functions over numbers."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence

import numpy as np
import numpy.typing as npt

__all__ = ["ESTIMATOR_EFFICIENCY", "estimate", "pooled_log_sigma", "standard_error"]

# standard error of the estimator relative to the mean's, for normal-ish noise
ESTIMATOR_EFFICIENCY = {"min": 1.25, "median": 1.25, "trimmed_mean": 1.1, "lower_mean": 1.2}
_MAD_TO_SIGMA = 1.4826


def estimate(samples: Sequence[float], estimator: str, *, trim: float = 0.2) -> float:
    """Reduce repeated timings (seconds) to one estimate (seconds).

    ``min`` suits machines where load only ever adds time; ``median`` and
    ``trimmed_mean`` (dropping ``trim`` of the samples at each end) are robust to
    symmetric noise and rare spikes alike.

    Raises:
        ValueError: no samples, or an unknown estimator.
    """
    if not samples:
        raise ValueError("cannot estimate from zero samples")
    data = np.sort(np.asarray(samples, dtype=float))
    if estimator == "min":
        return float(data[0])
    if estimator == "median":
        return float(np.median(data))
    if estimator == "lower_mean":
        # the faster half: load and preemption only ever add time, so the slow half
        # holds the interference; averaging the fast half keeps min's robustness to it
        # without min's bias toward whoever was sampled most
        return float(data[: max(1, (data.size + 1) // 2)].mean())
    if estimator == "trimmed_mean":
        cut = math.floor(trim * data.size)
        kept = data[cut : data.size - cut] if data.size - 2 * cut > 0 else data
        return float(kept.mean())
    raise ValueError(f"unknown estimator {estimator!r}")


def pooled_log_sigma(sample_sets: Iterable[Sequence[float]]) -> float:
    """Robust per-sample noise, as a standard deviation of log-seconds, pooled over candidates.

    Uses the differences between every two samples of the same candidate: each
    is the difference of two noise draws (variance 2 sigma^2), whatever the
    candidate's true time, and their median absolute value is robust to spikes.
    Residuals around a candidate's own median would not do: with three samples
    one of them is always exactly zero, and sigma would come out far too small.
    Returns 0.0 when fewer than three differences exist.
    """
    diffs: list[npt.NDArray[np.float64]] = []
    for samples in sample_sets:
        if len(samples) < 2:
            continue
        logs = np.log(np.asarray(samples, dtype=float))
        i, j = np.triu_indices(logs.size, k=1)
        diffs.append(logs[i] - logs[j])
    if not diffs:
        return 0.0
    pooled = np.concatenate(diffs)
    if pooled.size < 3:
        return 0.0
    return float(_MAD_TO_SIGMA * np.median(np.abs(pooled)) / math.sqrt(2.0))


def standard_error(sigma: float, n: int, estimator: str) -> float:
    """Standard error (log-seconds) of an estimate from ``n`` samples of noise ``sigma``."""
    if n <= 0:
        return math.inf
    return ESTIMATOR_EFFICIENCY.get(estimator, 1.25) * sigma / math.sqrt(n)


def relative(times: Mapping[int | None, float], base: float) -> dict[int | None, float]:
    """Each time as a ratio to ``base``."""
    return {k: v / base for k, v in times.items()}
