"""Where a race looks next: refinement proposals in chunk-count space. Pure numbers.

The landscape over chunk counts is a sawtooth, not one valley, so a race refines
around several of its best contenders at once. For each, it proposes the schedules
halfway (in log scale, teeth first, then half-teeth: :func:`chunktune._schedule.between`)
to its nearest measured neighbours below and above; a list-scheduling model fit to the estimates so
far (:func:`chunktune._schedule.fit_uniform_model`) proposes its own best first. The
rounds schedule's refiner (:mod:`chunktune._refining`) decides how many of them the
budget can still judge.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet

from ._schedule import between, fit_uniform_model, nearest_index

__all__ = ["proposals"]


def proposals(
    num_envs: int,
    nthread: int,
    sizes: Sequence[int],
    teeth: AbstractSet[int],
    *,
    halves: AbstractSet[int] = frozenset(),
    measured: Iterable[int],
    top: Sequence[int],
    estimates: Mapping[int, float] | None,
) -> list[int]:
    """New schedules to measure, most promising first: the model's pick, then the halfway points.

    ``sizes`` are the pool's schedules (:func:`chunktune._schedule.schedules`) and
    ``teeth`` the ones preferred between two points, ``halves`` the ones preferred where
    no tooth lies between (:func:`chunktune._schedule.half_teeth`); ``measured`` every
    size measured so far (native as the schedule it runs as); ``top`` the contenders to
    refine around, best first; ``estimates`` seconds by size for the model, None when
    native has no estimate yet. Sizes already measured are never proposed.
    """
    if not sizes:
        return []
    seen = set(measured)
    points = {nearest_index(sizes, c) for c in seen}
    new: list[int] = []
    if estimates is not None:
        model = fit_uniform_model(num_envs, nthread, estimates, sizes)
        if model is not None:
            new.append(min(model, key=lambda c: (model[c], c)))
    for c in top:
        i = nearest_index(sizes, c)
        below = [j for j in points if j < i]
        above = [j for j in points if j > i]
        # halfway in log scale toward the nearest measured schedule (or the end)
        for j in (max(below) if below else 0, min(above) if above else len(sizes) - 1):
            mid = between(sizes, teeth, i, j, then=halves)
            if mid is not None:
                new.append(mid)
    return [c for c in dict.fromkeys(new) if c not in seen]
