"""The race's field: its live candidates, the evidence on them, and the moves that drop them.

Each round's calls go to :class:`chunktune._evidence.Evidence`, which judges every
call against native's in the same round. :class:`Field` reads it to name the leader
and to tell when the race has settled, and drops: the hopeless after their first
round (:meth:`Field.screen`), the clearly worse by racing (:meth:`Field.race`), the
worse half by successive halving (:meth:`Field.halve`), and the slower ones when the
budget cannot pay for the whole field (:meth:`Field.keep_best`).
"""

from __future__ import annotations

import math

from ._candidates import thin_log
from ._decision import size_name
from ._evidence import Evidence
from ._margin import least_gain
from ._probe import Chunk, Probe

__all__ = ["Field"]

# A candidate that took more than this many times native's time in the same round is
# dropped after one round: no machine noise explains a factor of 2 on a candidate that is
# any good.
_HOPELESS = math.log(2.0)


class Field:
    """The candidates of one race (native aside) and their evidence, in log-seconds."""

    def __init__(self, probe: Probe, candidates: list[Chunk]) -> None:
        self.probe = probe
        self.p = p = probe.policy
        self.ev = Evidence(paired=p.paired, estimator=p.estimator, trim=p.trim)
        self.live: list[int] = [c for c in candidates if c is not None]
        self.measured: set[int] = set(self.live)
        self.dropped: dict[Chunk, int] = {}
        self.round = 0  # the round measured last
        self.band = math.log1p(p.tie_tol)
        self.need = least_gain(p.margin)  # a size exactly the margin faster clears it

    # -- judging ------------------------------------------------------------------

    def judged(self) -> list[Chunk]:
        """Native and the live candidates with enough rounds to be compared."""
        return [None, *(c for c in self.live if self.ev.rounds(c) >= self.p.min_rounds)]

    def leader(self) -> Chunk:
        return min(self.judged(), key=lambda c: (self.ev.location(c), c is not None, c or 0))

    def front(self) -> int | None:
        """The best live candidate with the rounds to be judged (native aside), or None."""
        judged = [c for c in self.live if self.ev.rounds(c) >= self.p.min_rounds]
        return min(judged, key=lambda c: (self.ev.location(c), c)) if judged else None

    def settled(self) -> bool:
        """No contender is left, or the leader is, with confidence, within tie_tol of each."""
        if not self.live:
            return True
        if any(self.ev.rounds(c) < self.p.min_rounds for c in self.live):
            return False
        lead = self.leader()
        return all(
            -self.ev.compare(c, lead).lower(self.p.tie_z) <= self.band
            for c in self.judged()
            if c != lead
        )

    # -- changing the field ---------------------------------------------------------

    def drop(self, c: int, why: str) -> None:
        self.live.remove(c)
        self.dropped[c] = self.round
        self.probe.emit("raced_out", chunk_size=c, round=self.round, message=why)

    def thin(self, room: int) -> None:
        """Keep ``room`` of the opening candidates, spread in log scale (before any round)."""
        self.live = thin_log(sorted(self.live), room)
        self.measured = set(self.live)

    def join(self, added: list[int]) -> None:
        """Add new candidates to the race from this round on."""
        self.measured.update(added)
        self.live.extend(added)
        if added:
            self.probe.emit("refined", candidates=tuple(added), round=self.round)

    def keep_best(self, room: int) -> None:
        """Drop all but the ``room`` best live candidates."""
        ranked = sorted(self.live, key=lambda c: (self.ev.location(c), c))
        for c in ranked[room:]:
            self.drop(c, f"the field cut to its {room} best")

    def screen(self) -> None:
        """Drop the hopeless after their first round: twice native's time in the same round."""
        for c in list(self.live):
            values = self.ev.values(c)
            if self.ev.paired and len(values) == 1 and next(iter(values.values())) > _HOPELESS:
                self.drop(c, "twice native's time")

    def race(self) -> None:
        """Drop who is clearly (``race_z``) outside the leader's tie band or short of the margin."""
        z = self.p.race_z
        lead = self.leader()
        for c in list(self.live):
            if c == lead:
                continue
            behind = self.ev.compare(c, lead)
            vs_native = self.ev.compare(c, None)
            if behind.n >= self.p.min_rounds and behind.lower(z) > self.band:
                self.drop(c, f"clearly behind {size_name(lead)}")
            elif vs_native.n >= self.p.min_rounds and vs_native.lower(z) > -self.need:
                self.drop(c, "clearly short of the margin over native")

    def halve(self) -> None:
        """Successive halving: drop the worse half of the judged contenders (at least top + 1
        stay), but none the leader has not beaten on the rounds they share.

        Racing drops only what is clearly behind; under heavy noise that is slow, and
        every round pays for every live candidate. Halving spends the rounds on the
        contenders, and refinement then looks around the best of them. The halves are
        ranked by each size's own rounds, and a size that joined late has fewer: it is
        dropped only where the leader is ahead of it by ``tie_z`` standard errors on their
        common rounds, so a size the evidence cannot yet tell from the leader races on.
        """
        ranked = sorted(
            (c for c in self.live if self.ev.rounds(c) >= self.p.min_rounds),
            key=lambda c: (self.ev.location(c), c),
        )
        keep = max(self.p.refine_top + 1, math.ceil(len(ranked) / 2))
        lead = self.leader()
        for c in ranked[keep:]:
            if c != lead and self.ev.compare(c, lead).lower(self.p.tie_z) > 0:
                self.drop(c, f"the field halved, behind {size_name(lead)}")
