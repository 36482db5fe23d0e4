"""Refining a race: new schedules join the field, as many as the budget can still judge.

What to measure next is :func:`chunktune._refine.proposals`' (pure numbers); this
module feeds it the race's evidence and adds what the race's share of the budget can
still give its ``min_rounds`` rounds (:meth:`chunktune._pacing.Pace.room_for_new`).
"""

from __future__ import annotations

from ._candidates import largest_chunk
from ._field import Field
from ._pacing import Pace
from ._policy import Policy
from ._refine import proposals
from ._schedule import half_teeth, representative, schedules, teeth

__all__ = ["Refiner", "refine_space"]


def refine_space(policy: Policy, num_envs: int, nthread: int) -> list[int]:
    """The schedules a race under ``policy`` may refine into, ascending; none if it never does."""
    if not (policy.refine_steps and policy.candidates.refinable):
        return []
    largest = largest_chunk(policy.candidates, num_envs, nthread)
    return [c for c in schedules(num_envs, nthread) if c <= largest]


class Refiner:
    """The ``refine_steps`` refinements of one race; none when the candidates are not refinable."""

    def __init__(self, field: Field, pace: Pace) -> None:
        self.field = field
        self.pace = pace
        p = field.p
        self.n = n = field.probe.num_envs
        self.t = t = field.probe.nthread
        refines = p.refine_steps if p.candidates.refinable else 0
        self.sizes = refine_space(p, n, t)
        self.teeth = teeth(n, t) if refines else set()
        self.halves = half_teeth(n, t) if refines else set()
        self.left = refines

    def refine(self) -> list[int]:
        """Add schedules halfway to the top contenders' measured neighbours, and the model's."""
        self.left -= 1
        if not self.sizes:
            return []
        field, ev = self.field, self.field.ev
        native_c = representative(self.n, field.probe.native)
        top = sorted(field.judged(), key=ev.location)[: field.p.refine_top]
        estimates = ev.estimates([None, *field.measured])
        native_s = estimates.pop(None, None)
        model_input: dict[int, float] | None = None
        if native_s is not None:
            model_input = {c: s for c, s in estimates.items() if c is not None}
            model_input[native_c] = native_s
        fresh = proposals(
            self.n,
            self.t,
            self.sizes,
            self.teeth,
            halves=self.halves,
            measured=(*field.measured, native_c),
            top=[native_c if c is None else c for c in top],
            estimates=model_input,
        )
        # only as many as can still get their min_rounds in the race's share of the budget
        added = sorted(fresh[: self.pace.room_for_new(len(field.live), field.p.min_rounds)])
        field.join(added)
        return added
