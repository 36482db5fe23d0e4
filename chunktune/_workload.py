"""The Workload protocol and the arithmetic of the pool's chunking."""

from __future__ import annotations

import contextlib
import math
import numbers
from collections.abc import Mapping
from typing import Protocol, runtime_checkable

import numpy as np

from ._errors import InvalidArgumentError, WorkloadError

__all__ = [
    "SignatureValue",
    "Workload",
    "check_chunk_size",
    "check_seconds",
    "check_workload",
    "native_chunk",
    "upper_chunk",
]

SignatureValue = str | int | float | bool


@runtime_checkable
class Workload(Protocol):
    """One representative batched pool call that chunktune can time.

    ``num_envs`` is the batch size N, ``nthread`` the pool's worker count T.
    ``signature()`` returns everything besides N and T that changes the cost of
    a step; it goes into the cache key. ``run(chunk_size)`` performs one
    blocking pool call with that chunk size (``None`` = the pool's native
    default) and returns the seconds it took; the sweep trusts that figure.
    """

    num_envs: int
    nthread: int

    def signature(self) -> Mapping[str, SignatureValue]: ...

    def run(self, chunk_size: int | None) -> float: ...


def native_chunk(num_envs: int, nthread: int) -> int:
    """The chunk MuJoCo's pool uses for ``chunk_size=None``: ``max(1, N // (10*T))``."""
    return max(1, num_envs // (10 * max(1, nthread)))


def upper_chunk(num_envs: int, nthread: int) -> int:
    """The largest useful chunk, ``ceil(N/T)``: any larger leaves a worker idle."""
    return max(1, math.ceil(num_envs / max(1, nthread)))


def _check_count(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise InvalidArgumentError(
            f"{name} must be an integer >= 1, got {value!r} ({type(value).__name__})"
        )
    if value < 1:
        raise InvalidArgumentError(f"{name} must be an integer >= 1, got {value!r}")
    return int(value)


def check_chunk_size(value: object, *, what: str = "chunk_size") -> int:
    """Return ``value`` as an int chunk size, or raise InvalidArgumentError.

    Raises:
        InvalidArgumentError: ``value`` is not an integer, or is below 1.
    """
    return _check_count(what, value)


def check_seconds(value: object, chunk: int | None) -> float:
    """Return what ``run(chunk)`` reported as positive, finite float seconds.

    Any real number will do (a Python float, ``numpy.float32``, a 0-d array);
    booleans, text, NaN, infinities and values <= 0 will not.

    Raises:
        WorkloadError: ``value`` is not a positive, finite real number.
    """
    seconds = math.nan
    if not isinstance(value, bool | np.bool_ | str | bytes):
        with contextlib.suppress(TypeError, ValueError):
            seconds = float(value) if np.ndim(value) == 0 else math.nan  # type: ignore[arg-type]
    if not (math.isfinite(seconds) and seconds > 0):
        raise WorkloadError(
            f"run({chunk!r}) returned {value!r}; expected a positive number of seconds"
        )
    return seconds


def check_workload(workload: object) -> tuple[int, int]:
    """Validate a workload and return its ``(num_envs, nthread)``.

    Raises:
        WorkloadError: the object lacks ``num_envs``, ``nthread``, ``signature`` or ``run``.
        InvalidArgumentError: ``num_envs`` or ``nthread`` is not an integer >= 1.
    """
    if not isinstance(workload, Workload):
        missing = [
            name
            for name in ("num_envs", "nthread", "signature", "run")
            if not hasattr(workload, name)
        ]
        raise WorkloadError(
            f"{type(workload).__name__!s} object is not a chunktune.Workload: it lacks "
            f"{', '.join(missing)} (a workload needs num_envs, nthread, signature() and run())"
        )
    return (
        _check_count("num_envs", workload.num_envs),
        _check_count("nthread", workload.nthread),
    )
