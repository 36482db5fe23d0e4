"""Candidate strategies: which chunk sizes a sweep measures.

Each strategy is a frozen attrs record that a policy names with
``[policies.NAME.candidates] strategy = "..."``. ``refinable`` says whether a
sweep may add schedules of its own next to the contenders (``refine_steps``):
``explicit`` and ``seed`` measure exactly their list. ``propose(num_envs, nthread)``
returns sorted chunk sizes clamped to ``[1, ceil(N/T)]``; the sweep always adds
the native default (``None``) on top, and every strategy but ``seed`` leaves out
the integer equal to the native chunk so it is not measured twice.
"""

from __future__ import annotations

import bisect
import functools
import math
import numbers
from typing import ClassVar

import attrs
import numpy as np

from ._counts import native_chunk, upper_chunk
from ._errors import ConfigError
from ._shown import spelled
from ._validators import integer, number, plain_numbers, positive_sizes

__all__ = [
    "STRATEGIES",
    "BalancedCandidates",
    "CandidateStrategy",
    "ExhaustiveCandidates",
    "ExplicitCandidates",
    "GeometricCandidates",
    "SeedCandidates",
    "candidate_list",
    "largest_chunk",
    "only_native",
    "thin_log",
]


def _targets(first: int, last: int, cap: int) -> list[float]:
    """``cap`` points spread evenly in log scale from ``first`` to ``last``."""
    return [float(t) for t in np.linspace(math.log(first), math.log(last), cap)]


def _distance(size: int, target: float) -> float:
    """How far ``size`` lies from ``target`` in log scale.

    The standard library's ``log``, not numpy's: numpy's vectorised ``log`` differs in the
    last bits between versions and CPUs, and a size as near as its neighbour (650 = 25 *
    26 around sqrt(650)) is told from it by those bits alone.
    """
    return abs(math.log(size) - target)


def thin_log(sizes: list[int], cap: int) -> list[int]:
    """Keep at most ``cap`` of ``sizes`` (sorted), spread evenly in log scale, ends kept.

    Each target takes the nearest size not yet kept (so thinning never returns fewer
    than ``cap``), the smaller of two as near.
    """
    if len(sizes) <= cap:
        return sizes
    logs = [math.log(c) for c in sizes]
    keep: set[int] = set()
    for t in _targets(sizes[0], sizes[-1], cap):
        hi = bisect.bisect_left(logs, t)
        lo = hi - 1
        while lo >= 0 and sizes[lo] in keep:
            lo -= 1
        while hi < len(sizes) and sizes[hi] in keep:
            hi += 1
        if lo >= 0 and (hi == len(sizes) or _distance(sizes[lo], t) <= _distance(sizes[hi], t)):
            keep.add(sizes[lo])
        else:
            keep.add(sizes[hi])
    return sorted(keep)


@attrs.frozen(kw_only=True, field_transformer=plain_numbers)
class SeedCandidates:
    """The older tuner's grid: a band around N/(10T), a x1.8 geometric sweep, capped at 16.

    When the grid exceeds ``max_candidates`` it keeps the smallest sizes and the
    largest one, as the older tuner did.
    """

    strategy: ClassVar[str] = "seed"
    refinable: ClassVar[bool] = False
    _invalid_as: ClassVar[str] = "candidates"
    max_candidates: int = attrs.field(default=16, validator=integer(2, 4096))

    def propose(self, num_envs: int, nthread: int) -> list[int]:
        """Chunk sizes to measure, sorted (may include the native chunk)."""
        upper = upper_chunk(num_envs, nthread)
        if upper == 1:
            return [1]
        heur = min(upper, max(1, round(num_envs / (10 * nthread))))
        grid = {1, upper, heur}
        grid.update(min(upper, max(1, round(heur * m))) for m in (0.5, 1.5, 2.0, 3.0))
        c = 1
        while c < upper:
            grid.add(c)
            c = max(c + 1, round(c * 1.8))
        valid = sorted(s for s in grid if 1 <= s <= num_envs)
        if len(valid) <= self.max_candidates:
            return valid
        return sorted({*valid[: self.max_candidates - 1], valid[-1]})


@attrs.frozen(kw_only=True, field_transformer=plain_numbers)
class BalancedCandidates:
    """Sizes ``ceil(N/(k*T))`` that cut the batch into at most k chunks per worker.

    With chunk counts a multiple of T no worker idles through a short last round,
    which the geometric grids miss. ``k`` runs geometrically from ``min_chunks_per_thread``
    (each next ``k`` is ``k * k_ratio`` rounded, and at least ``k + 1``) until chunks
    reach size 1; at most ``max_candidates`` sizes, thinned in log scale.

    ``min_chunks_per_thread`` is 2: one chunk per worker is a static split, which a
    worker slowed for a while (a neighbour on its core) stretches whole. On every one
    of 30 recorded real landscapes it was slower than native, and live on a shared
    2-core VM it measured 3% faster in one run and 1-7% slower half an hour later
    (``benchmarks/RESULTS.md``, session 26); the simulated pools, whose workers never
    slow, are the only place it wins.
    """

    strategy: ClassVar[str] = "balanced"
    refinable: ClassVar[bool] = True
    _invalid_as: ClassVar[str] = "candidates"
    max_candidates: int = attrs.field(default=10, validator=integer(2, 4096))
    min_chunks_per_thread: int = attrs.field(default=2, validator=integer(1, 1_000_000))
    k_ratio: float = attrs.field(default=1.35, validator=number(1.0, 16.0, lo_open=True))

    def propose(self, num_envs: int, nthread: int) -> list[int]:
        """Chunk sizes to measure, sorted, native excluded."""
        upper = upper_chunk(num_envs, nthread)
        found: set[int] = set()
        k = self.min_chunks_per_thread
        while True:
            c = min(upper, max(1, math.ceil(num_envs / (k * nthread))))
            found.add(c)
            if c == 1:
                break
            k = max(k + 1, round(k * self.k_ratio))
        found.discard(native_chunk(num_envs, nthread))
        return thin_log(sorted(found), self.max_candidates)


@attrs.frozen(kw_only=True, field_transformer=plain_numbers)
class GeometricCandidates:
    """Sizes 1, r, r^2, ... up to ``ceil(N/T)`` (which is always included)."""

    strategy: ClassVar[str] = "geometric"
    refinable: ClassVar[bool] = True
    _invalid_as: ClassVar[str] = "candidates"
    ratio: float = attrs.field(default=2.0, validator=number(1.0, 64.0, lo_open=True))
    max_candidates: int = attrs.field(default=16, validator=integer(2, 4096))

    def propose(self, num_envs: int, nthread: int) -> list[int]:
        """Chunk sizes to measure, sorted, native excluded."""
        upper = upper_chunk(num_envs, nthread)
        found = {upper}
        c = 1.0
        while c < upper:
            found.add(round(c))
            c = max(c + 1.0, c * self.ratio)
        found.discard(native_chunk(num_envs, nthread))
        return thin_log(sorted(found), self.max_candidates)


@attrs.frozen(kw_only=True, field_transformer=plain_numbers)
class ExhaustiveCandidates:
    """Every size in ``[1, ceil(N/T)]``, thinned in log scale beyond ``max_candidates``."""

    strategy: ClassVar[str] = "exhaustive"
    refinable: ClassVar[bool] = True
    _invalid_as: ClassVar[str] = "candidates"
    max_candidates: int = attrs.field(default=64, validator=integer(2, 4096))

    def propose(self, num_envs: int, nthread: int) -> list[int]:
        """Chunk sizes to measure, sorted, native excluded."""
        native = native_chunk(num_envs, nthread)
        upper = upper_chunk(num_envs, nthread)
        if upper > _LISTABLE:  # every size of a huge batch would not fit in memory
            return _spread_over_range(upper, self.max_candidates, skip=native)
        every = [c for c in range(1, upper + 1) if c != native]
        return thin_log(every, self.max_candidates)


_LISTABLE = 1 << 20
"""Beyond this many sizes, :class:`ExhaustiveCandidates` spreads its picks without a list."""


def _spread_over_range(upper: int, cap: int, *, skip: int) -> list[int]:
    """:func:`thin_log` of ``1..upper`` without ``skip``, never listing the range.

    Each target in log scale takes the nearest size (in log distance) not yet taken.
    """
    first, last = (2 if skip == 1 else 1), (upper - 1 if skip == upper else upper)
    keep: set[int] = set()
    for t in _targets(first, last, cap):
        lo = min(last, max(first, math.floor(math.exp(t))))
        hi = lo + 1
        while True:  # walk outward from the target to the nearest free size
            below = lo >= first and lo not in keep and lo != skip
            above = hi <= last and hi not in keep and hi != skip
            if below and (not above or _distance(lo, t) <= _distance(hi, t)):
                keep.add(lo)
                break
            if above:
                keep.add(hi)
                break
            lo, hi = lo - 1, hi + 1
    return sorted(keep)


def _as_size_tuple(value: list[int] | tuple[int, ...]) -> tuple[int, ...]:
    # typed as what it takes (attrs shows it in __init__, to help() and a type checker);
    # anything else, from a TOML table or an untyped caller, is refused below
    if isinstance(value, list | tuple):
        # numpy's integers as the ints they hold: a policy's identity and its TOML form
        # know plain ints only (anything else is left for the validator to name)
        return tuple(
            int(v) if isinstance(v, numbers.Integral) and not isinstance(v, bool) else v
            for v in value
        )
    raise ConfigError(
        f"{spelled(value)} is not valid for sizes; expected a list of chunk sizes",
        subject="candidates",
    )


@attrs.frozen(kw_only=True, field_transformer=plain_numbers)
class ExplicitCandidates:
    """Exactly the listed sizes; those above ``ceil(N/T)`` are measured as ``ceil(N/T)``."""

    strategy: ClassVar[str] = "explicit"
    refinable: ClassVar[bool] = False
    _invalid_as: ClassVar[str] = "candidates"
    sizes: tuple[int, ...] = attrs.field(converter=_as_size_tuple, validator=positive_sizes())

    def propose(self, num_envs: int, nthread: int) -> list[int]:
        """Chunk sizes to measure, sorted, clamped, native excluded."""
        upper = upper_chunk(num_envs, nthread)
        native = native_chunk(num_envs, nthread)
        return sorted({min(upper, s) for s in self.sizes} - {native})


CandidateStrategy = (
    SeedCandidates
    | BalancedCandidates
    | GeometricCandidates
    | ExhaustiveCandidates
    | ExplicitCandidates
)

STRATEGIES: dict[str, type[CandidateStrategy]] = {
    cls.strategy: cls
    for cls in (
        SeedCandidates,
        BalancedCandidates,
        GeometricCandidates,
        ExhaustiveCandidates,
        ExplicitCandidates,
    )
}


def largest_chunk(strategy: CandidateStrategy, num_envs: int, nthread: int) -> int:
    """The largest size a sweep with ``strategy`` may measure, refinements included.

    ``balanced`` keeps at least ``min_chunks_per_thread`` chunks per worker there too;
    the others go up to ``ceil(N/T)``.
    """
    upper = upper_chunk(num_envs, nthread)
    if isinstance(strategy, BalancedCandidates):
        fewest = strategy.min_chunks_per_thread * nthread
        return min(upper, max(1, math.ceil(num_envs / fewest)))
    return upper


def candidate_list(strategy: CandidateStrategy, num_envs: int, nthread: int) -> list[int | None]:
    """What a sweep measures: native (``None``) first, then the strategy's sizes."""
    return [None, *strategy.propose(num_envs, nthread)]


@functools.lru_cache(maxsize=256)
def only_native(strategy: CandidateStrategy, num_envs: int, nthread: int) -> bool:
    """Whether the strategy proposes no size but native's for this batch: nothing to measure.

    Asked on every resolve that is not a repeat of the last moment's, so kept per
    (strategy, batch): a strategy is a frozen, hashable record.
    """
    return candidate_list(strategy, num_envs, nthread) == [None]
