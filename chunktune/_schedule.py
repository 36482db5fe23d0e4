"""The pool's schedules in chunk-count space, and a cheap model of their cost. Pure numbers.

A chunk size ``c`` cuts N envs into ``m = ceil(N/c)`` chunks. Sizes with the same
chunk count share the number of waves, and the smallest of them,
``ceil(N/m)``, has the most even chunks; so the distinct schedules worth
measuring are ``c = ceil(N/m)`` for chunk counts ``m >= T`` (fewer chunks than
workers leave a worker idle). Below about ``sqrt(N)`` every size is such a
schedule, above it they thin out: :func:`schedules` lists them, and neighbours in
that list are neighbours in ``m``. With even envs the sawtooth's low points are the
:func:`teeth`, chunk counts that are multiples of T; an uneven batch has low points of
its own, and :func:`half_teeth` (half a wave past a multiple) names where one block of
heavy envs puts many of them.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Mapping, Sequence
from collections.abc import Set as AbstractSet

import numpy as np

from ._counts import upper_chunk

__all__ = [
    "between",
    "chunk_count",
    "fit_uniform_model",
    "half_teeth",
    "nearest_index",
    "representative",
    "schedules",
    "teeth",
    "uniform_makespan",
]


def chunk_count(num_envs: int, chunk: int) -> int:
    """How many chunks a size cuts the batch into, ``ceil(N/c)``."""
    return -(-num_envs // chunk)


def representative(num_envs: int, chunk: int) -> int:
    """The smallest size with the same chunk count as ``chunk``: its most even schedule."""
    return -(-num_envs // chunk_count(num_envs, chunk))


def schedules(num_envs: int, nthread: int) -> list[int]:
    """Every distinct schedule ``ceil(N/m)`` in ``[1, ceil(N/T)]``, ascending.

    Built in O(sqrt(N)): every size up to ``sqrt(N)`` is a schedule of its own, and
    above it only ``ceil(N/m)`` for the few small ``m``.
    """
    upper = upper_chunk(num_envs, nthread)
    root = math.isqrt(num_envs)
    found = {c for c in range(1, min(root, upper) + 1)}
    found.update(-(-num_envs // m) for m in range(1, root + 2))
    return sorted(c for c in found if c <= upper and representative(num_envs, c) == c)


def nearest_index(sizes: Sequence[int], chunk: int) -> int:
    """The index in the ascending ``sizes`` of the schedule ``chunk`` runs as (or next to)."""
    i = bisect.bisect_left(sizes, chunk)
    return min(i, len(sizes) - 1)


def teeth(num_envs: int, nthread: int) -> set[int]:
    """The sizes ``ceil(N/(k*T))``: chunk counts that are multiples of T (and the last below).

    With even envs these are the sawtooth's lowest points: the next larger size
    adds a wave of chunks and leaves workers idle at the end.
    """
    return _past_waves(num_envs, nthread, 0)


def half_teeth(num_envs: int, nthread: int) -> set[int]:
    """The sizes ``ceil(N/m)`` for chunk counts ``m`` half a wave past a multiple of T.

    That is ``m = k*T + T/2`` for ``k >= 1`` (``ceil(N/((k + 1/2)*T))``); with odd T,
    where half a wave is no whole count, both counts beside it, ``k*T + (T - 1)/2`` and
    ``k*T + (T + 1)/2``. With even envs these are no low points, but an uneven batch
    has teeth of its own: where the chunks of a block of heavy envs come to a multiple
    of T, each worker ends on one heavy chunk. A heavy block of 40% of the envs does so
    at 2.5 chunks a worker (137 of 32768 envs on 96 threads), which no ``ceil(N/(k*T))``
    names. Every size is a schedule (:func:`schedules`).
    """
    halves = {nthread // 2, (nthread + 1) // 2}
    return set().union(*(_past_waves(num_envs, nthread, r) for r in halves))


def _past_waves(num_envs: int, nthread: int, extra: int) -> set[int]:
    """The sizes ``ceil(N/(k*T + extra))`` for ``k >= 1``, down to 1.

    Built in O(sqrt(N/T)) steps: each jumps to the next ``k`` whose size differs.
    """
    found: set[int] = set()
    m = nthread + extra  # k = 1
    while True:
        size = -(-num_envs // m)
        found.add(size)
        if size == 1:
            return found
        # the smallest count giving a smaller size is ceil(N/(size - 1)), above m;
        # the next k*T + extra at or past it
        least = -(-num_envs // (size - 1))
        m = extra + nthread * -(-(least - extra) // nthread)


def between(
    sizes: Sequence[int],
    preferred: AbstractSet[int],
    i: int,
    j: int,
    *,
    then: AbstractSet[int] = frozenset(),
) -> int | None:
    """A schedule strictly between ``sizes[i]`` and ``sizes[j]``, halfway in log scale.

    Prefers the ``preferred`` sizes (the teeth) when one lies between, so the
    search halves the sawtooth's low points first and looks between two adjacent
    teeth only when there is no tooth left between; there it prefers the ``then``
    sizes (the half-teeth) when one lies between. None when no schedule lies
    strictly between.
    """
    lo, hi = min(i, j), max(i, j)
    if hi - lo < 2:
        return None
    target = math.log(sizes[lo] * sizes[hi]) / 2
    inside = range(lo + 1, hi)
    pool = (
        [m for m in inside if sizes[m] in preferred]
        or [m for m in inside if sizes[m] in then]
        or list(inside)
    )
    return sizes[min(pool, key=lambda m: (abs(math.log(sizes[m]) - target), m))]


def uniform_makespan(num_envs: int, nthread: int, chunk: int) -> tuple[float, int]:
    """Makespan in env-costs, and the busiest worker's chunk count, if every env costs 1.

    With equal chunks the FIFO queue deals them round-robin: the busiest worker
    takes ``q = ceil(m/T)`` of them; when it alone has ``q``, its last one is the
    batch's short remainder.
    """
    m = chunk_count(num_envs, chunk)
    q = -(-m // nthread)
    last = num_envs - (m - 1) * chunk
    with_q = m - (q - 1) * nthread
    span = q * chunk if with_q >= 2 else (q - 1) * chunk + last
    return float(span), q


def fit_uniform_model(
    num_envs: int, nthread: int, measured: Mapping[int, float], sizes: Sequence[int]
) -> dict[int, float] | None:
    """Fit ``t(c) = a*span(c) + b*q(c) + g`` to measured seconds; predict every size.

    ``span`` and ``q`` come from :func:`uniform_makespan`: the work on the busiest
    worker and its chunk count (each chunk pays the queue's dispatch). Returns
    None with fewer than four measured sizes or a degenerate fit. The model
    knows nothing of uneven envs; it only proposes where to look next.
    """
    if len(measured) < 4:
        return None
    feats = {c: uniform_makespan(num_envs, nthread, c) for c in {*measured, *sizes}}
    x = np.array([[feats[c][0], feats[c][1], 1.0] for c in measured])
    y = np.array(list(measured.values()))
    coef, _res, rank, _sv = np.linalg.lstsq(x, y, rcond=None)
    if rank < 3 or coef[0] <= 0:
        return None
    return {c: float(coef[0] * feats[c][0] + coef[1] * feats[c][1] + coef[2]) for c in sizes}
