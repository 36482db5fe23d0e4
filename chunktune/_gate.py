"""What confirming the race's leader takes, asked while the race runs.

- :meth:`NoiseGate.reserve`: the confirmation's claim on the budget, the pairs that
  confirming the leader takes, held back from the race.
- :meth:`NoiseGate.too_noisy`: the noise gate; when no gain still plausible could be
  confirmed within what is left of the budget, measuring on would be a gamble.
- :meth:`NoiseGate.extend_race`: with ``extend_budget``, another round for a race whose
  share ended with its leader ahead but within the noise.

The test's numbers are :mod:`chunktune._confirm`'s; the budget's, :mod:`chunktune._pacing`'s.
"""

from __future__ import annotations

import math

from ._confirm import Bounds, pairs_needed, plan_bounds
from ._field import Field
from ._pacing import Pace
from ._reasons import too_noisy
from ._stretch import Stretch

__all__ = ["LAST_TRY_Z", "NoiseGate"]

LAST_TRY_Z = -0.5
"""How far below even odds (0) the race's end still tries a confirmation, as a z: Phi(-0.5),
about one chance in three. What is left of a budget that cannot stretch buys nothing else,
and ``confirm_alpha`` bounds each try's false confirmations."""


class NoiseGate:
    """The confirmation's claim on one race's budget, and whether the noise leaves it a chance."""

    def __init__(self, field: Field, pace: Pace, stretch: Stretch) -> None:
        self.field = field
        self.pace = pace
        self.stretch = stretch
        self.p = field.p

    def affordable_pairs(self) -> int:
        """Confirmation pairs the rest of the budget pays for (capped by confirm_max_pairs)."""
        return self.pace.affordable_pairs(self.p.confirm_max_pairs)

    def bounds(self, max_pairs: int) -> Bounds:
        """The test's bounds when its last look is at ``max_pairs`` (looks by doubling)."""
        return plan_bounds(self.p.confirm_alpha, self.p.confirm_min_pairs, max_pairs)

    def last_bound(self, max_pairs: int) -> float:
        """The test's last success bound for a plan of ``max_pairs`` (at least its first look)."""
        return self.bounds(max(max_pairs, self.p.confirm_min_pairs)).final

    def reserve(self) -> None:
        """Hold back from the race the pairs that confirming its leader takes (80% power).

        The leader's gain is taken one standard error below the race's estimate (the
        best of a field measured with noise was also lucky), and only when that still
        clears the margin does it hold anything back: the race may yet find a larger
        gain. When the pairs cost more than is left, the race ends now and the
        confirmation gets all of it: every further round would take pairs from a
        leader worth leaving native for. A policy that may stretch its budget
        stretches it for the pairs instead (:meth:`chunktune._stretch.Stretch.pairs`).
        """
        p, field = self.p, self.field
        if not p.confirm or p.extend_budget:
            return
        lead = field.front()
        if lead is None:  # the leader it was held for is gone, none judged in its place
            self.pace.reserve(0)
            return
        vs = field.ev.compare(lead, None)
        gain = -vs.diff - vs.se
        if not (math.isfinite(gain) and gain >= field.need):
            self.pace.reserve(0)
            return
        sigma = field.ev.pair_sigma()[0]
        needed = pairs_needed(gain, sigma, self.last_bound(p.confirm_max_pairs))
        # a gain of exactly 0 (possible at margin 0) would need every pair there is
        pairs = math.ceil(needed) if math.isfinite(needed) else p.confirm_max_pairs
        self.pace.reserve(max(p.confirm_min_pairs, min(p.confirm_max_pairs, pairs)))

    def too_noisy(self, *, final: bool) -> str | None:
        """Why no gain on offer can be confirmed in what is left of the budget, or None.

        During the race (``final`` False) only the most any live candidate may
        plausibly gain counts, its upper bound, so a good candidate is never given
        up on after a few unlucky rounds; the pairs asked for give a confirmation even
        odds. At the race's end, the leader's estimate (and no less than the margin):
        the gain a confirmation would have to show; a budget that cannot stretch then
        asks only for a fair chance (:data:`LAST_TRY_Z`).
        """
        p, field = self.p, self.field
        if not (p.noise_gate and p.confirm and field.live):
            return None
        sigma = field.ev.pair_sigma()[0]
        told: tuple[int, float] | None = None  # the race's end: its best, and what it measured
        if final:
            lead = field.front()
            if lead is None:
                return None
            told = (lead, -field.ev.compare(lead, None).diff)
            gain = max(told[1], field.need)
        else:
            gain = max(-field.ev.compare(c, None).lower(p.race_z) for c in field.live)
            if gain < field.need:
                return None  # the race drops them; that is not the noise's doing
        if gain <= 0:
            return None  # nothing faster to confirm (margin 0): no noise stands in the way
        # the pairs with which a confirmation of that gain succeeds as often as it fails
        # (the reason says them): mid-race, beyond the budget, racing on is a gamble; at
        # the race's end, with a budget that cannot stretch, what is left is spent on a
        # confirmation with a fair chance (LAST_TRY_Z)
        # with short calls the policy's cap, not the budget, sets the pairs: asked for one
        # more than the cap, the budget pays for it
        cap = p.confirm_max_pairs
        room = self.pace.affordable_pairs(cap + 1)
        afford = min(room, cap)
        bound = self.bounds(afford).final
        needed = pairs_needed(gain, sigma, bound, power_z=0.0)
        chance_z = LAST_TRY_Z if final and not p.extend_budget else 0.0
        if pairs_needed(gain, sigma, bound, power_z=chance_z) <= max(afford, p.confirm_min_pairs):
            return None
        if not p.extend_budget:
            return too_noisy(
                sigma=sigma, gain=gain, needed=needed, afford=afford, lead=told, capped=room > cap
            )
        if self.stretch.pairs(gain, sigma, self.last_bound, racing=not final):
            return None
        room = self.pace.pairs_at_cap(cap + 1, racing=not final)
        at_cap = min(room, cap)
        needed = pairs_needed(gain, sigma, self.last_bound(at_cap), power_z=0.0)
        return too_noisy(
            sigma=sigma,
            gain=gain,
            needed=needed,
            afford=at_cap,
            extended_to=self.stretch.cap(),
            lead=told,
            capped=room > cap,
        )

    def undecided(self) -> tuple[int, float] | None:
        """The leader and its gain when it looks at least the margin ahead but within the noise.

        A leader measured in too few rounds to know the noise at all is within it too:
        one more round gives the figure that choosing it needs.
        """
        field = self.field
        lead = field.front()
        if lead is None:
            return None
        vs = field.ev.compare(lead, None)
        if -vs.diff < field.need:
            return None
        if math.isfinite(vs.se) and vs.upper(self.p.confidence_z) < 0:
            return None
        return lead, 1.0 - math.exp(vs.diff)

    def extend_race(self) -> bool:
        """Stretch the budget for another round when the race's share ended undecided."""
        open_question = self.undecided() if self.p.extend_budget else None
        return open_question is not None and self.stretch.race(*open_question)
