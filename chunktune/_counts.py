"""Counts a pool is given (envs, threads, a chunk size, a seed), checked, and the
arithmetic of its chunking: what ``chunk_size=None`` means, and the largest useful chunk."""

from __future__ import annotations

import numbers

from ._errors import InvalidArgumentError
from ._shown import shown_one, type_named

__all__ = [
    "MAX_COUNT",
    "check_chunk_size",
    "check_count",
    "check_seed",
    "native_chunk",
    "upper_chunk",
]


def native_chunk(num_envs: int, nthread: int) -> int:
    """The chunk MuJoCo's pool uses for ``chunk_size=None``: ``max(1, N // (10*T))``.

    Raises:
        InvalidArgumentError: ``num_envs`` or ``nthread`` is not an integer >= 1.
    """
    n = check_count(num_envs, what="num_envs")
    return max(1, n // (10 * check_count(nthread, what="nthread")))


def upper_chunk(num_envs: int, nthread: int) -> int:
    """The largest useful chunk, ``ceil(N/T)``: any larger leaves a worker idle.

    Raises:
        InvalidArgumentError: ``num_envs`` or ``nthread`` is not an integer >= 1.
    """
    n = check_count(num_envs, what="num_envs")
    return -(-n // check_count(nthread, what="nthread"))


MAX_COUNT = 2**31 - 1
"""The most envs or threads a pool can have: MuJoCo counts them in a C ``int``."""


def check_count(value: object, *, what: str, high: int = MAX_COUNT) -> int:
    """Return ``value`` as an int count from 1 to ``high`` (envs, threads, steps, a chunk size).

    Raises:
        InvalidArgumentError: ``value`` is not an integer, or is outside ``[1, high]``;
            the message names ``what``.
    """
    # a workload's count may be any object, whose repr and type name are anyone's text: on
    # one line, escaped (shown() keeps an object's own line breaks)
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise InvalidArgumentError(
            f"{what} must be an integer >= 1, got {shown_one(value)} ({type_named(value)})"
        )
    count = int(value)
    if count < 1:
        raise InvalidArgumentError(f"{what} must be an integer >= 1, got {shown_one(value)}")
    if count > high:
        raise InvalidArgumentError(
            f"{what} must be an integer from 1 to {high}, got {shown_one(value)}"
        )
    return count


def check_seed(value: object) -> int:
    """Return ``value`` as an int seed for numpy's generators.

    Raises:
        InvalidArgumentError: ``value`` is not an integer >= 0.
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 0:
        raise InvalidArgumentError(f"seed must be an integer >= 0, got {shown_one(value)}")
    return int(value)


def check_chunk_size(value: object, *, what: str = "chunk_size", num_envs: int = MAX_COUNT) -> int:
    """Return ``value`` as an int chunk size, or raise InvalidArgumentError.

    Raises:
        InvalidArgumentError: ``value`` is not an integer, or is outside ``[1, num_envs]``
            (a chunk of more envs than the batch holds is no chunk of it).
    """
    return check_count(value, what=what, high=num_envs)
