"""Paired rounds: native and some sizes, each round in a fresh random order, until enough
rounds and enough seconds have passed. The loop ``chunktune check`` re-checks a size
with, and the benchmarks' live re-measures run.

A round holds one call of every size, so what the machine did during the round cancels
from their ratios; a fresh order each round keeps a size from always meeting what one
other size left behind (warm caches, a thread pool just woken).
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable, Iterable, Sequence

import attrs

from ._errors import InvalidArgumentError

__all__ = ["Order", "PairedRounds", "paired_rounds", "reshuffled"]

Order = Callable[[int], Iterable[int]]
"""A round's order: given the count of sizes ``n``, a permutation of ``range(n)``."""


@attrs.frozen
class PairedRounds:
    """What paired rounds measured: ``seconds[i][r]`` is the call of ``sizes[i]`` (None:
    native) in round ``r``; ``started[r]`` the clock's reading as round ``r`` began, and
    ``elapsed_s`` the clock's seconds from the first round's start to the last's end."""

    sizes: tuple[int | None, ...]
    seconds: tuple[tuple[float, ...], ...]
    started: tuple[float, ...]
    elapsed_s: float

    @property
    def rounds(self) -> int:
        return len(self.started)

    def of(self, size: int | None) -> tuple[float, ...]:
        """Each round's seconds of ``size``, in round order.

        Raises:
            KeyError: ``size`` was not measured.
        """
        try:
            return self.seconds[self.sizes.index(size)]
        except ValueError:
            raise KeyError(size) from None


def reshuffled(rng: random.Random) -> Order:
    """An order that shuffles one list in place each round (``rng.shuffle``), so a round's
    order is the last round's, shuffled: the draws ``chunktune check`` has always made."""
    positions: list[int] = []

    def order(n: int) -> list[int]:
        if len(positions) != n:
            positions[:] = range(n)
        rng.shuffle(positions)
        return positions

    return order


def paired_rounds(
    call: Callable[[int | None], float],
    sizes: Sequence[int | None],
    *,
    min_rounds: int,
    seconds: float = 0.0,
    order: Order | None = None,
    clock: Callable[[], float] = time.monotonic,
    on_round: Callable[[int, float], None] | None = None,
) -> PairedRounds:
    """One warm-up ``call`` of each of ``sizes`` in their order (not counted), then rounds
    of one call each in ``order`` (default: a fresh random one), until at least
    ``min_rounds`` rounds and at least ``seconds`` of ``clock`` have passed.

    ``call(size)`` makes one call and returns its seconds; whatever it raises (a Ctrl-C
    included) ends the rounds at once. ``on_round(rounds, elapsed_s)`` is called after
    each round.

    Raises:
        InvalidArgumentError: ``sizes`` empty or repeated, ``min_rounds`` under 0, or
            ``seconds`` negative or not finite (which would never end).
        Exception: whatever ``call`` raised.
    """
    field = tuple(sizes)
    if not field or len(set(field)) != len(field):
        raise InvalidArgumentError(f"paired rounds of {list(field)}: expected distinct sizes")
    if min_rounds < 0:
        raise InvalidArgumentError(f"paired rounds: min_rounds {min_rounds}, expected >= 0")
    if not 0.0 <= seconds < math.inf:
        raise InvalidArgumentError(
            f"paired rounds: seconds {seconds}, expected a finite number >= 0"
        )
    order = reshuffled(random.Random()) if order is None else order
    for size in field:
        call(size)  # the first call of a size pays for what later calls reuse
    got: list[list[float]] = [[] for _ in field]
    started: list[float] = []
    start = clock()
    elapsed = 0.0
    while len(started) < min_rounds or elapsed < seconds:
        started.append(clock())
        for i in order(len(field)):
            got[int(i)].append(call(field[int(i)]))
        elapsed = clock() - start
        if on_round is not None:
            on_round(len(started), elapsed)
    return PairedRounds(field, tuple(map(tuple, got)), tuple(started), elapsed)
