"""The rounds schedule: race in paired rounds, refine in chunk-count space, confirm against native.

1. **Race.** The opening field is what one stage of successive halving can judge in
   the race's share of the budget (:meth:`_Rounds.open_field`: a slow pool opens with
   a spread of fewer candidates, or measures nothing when not even one can be judged
   and confirmed). Each round measures native and every live candidate once, in a
   fresh random order (:class:`chunktune._evidence.Evidence` judges each call against
   native's in the same round). A candidate that took twice native's time in its
   first round is dropped at once. After ``min_rounds``, a candidate is dropped
   when, on the rounds it shares with the leader, it is clearly (``race_z``
   standard errors) outside the tie band of the leader, or clearly short of the
   margin over native; and every other round the field is halved. So clearly
   worse candidates take few probes and the contenders many. The field and these
   moves are :class:`chunktune._field.Field`'s.
2. **Refine.** Every other round from ``min_rounds`` on (``refine_steps`` times),
   the best few of the field send probes to the schedules halfway to their
   nearest measured neighbours in chunk count, and a list-scheduling model fit
   to the estimates so far proposes its own best (:mod:`chunktune._refine`), as many
   as can still be judged (:class:`chunktune._refining.Refiner`). Several survivors
   are refined at once: the landscape is a sawtooth, not one valley.
3. **Settle.** Measuring stops when the leader is, with confidence, within
   ``tie_tol`` of every other contender (``tie_z``), when nothing is left that
   could clear the margin, at ``max_rounds``, between rounds when the race's share
   of the budget cannot pay for another (:mod:`chunktune._pacing`; first the field
   is cut to its best), or when the noise gate finds that no gain still plausible
   could be confirmed within what is left of the budget. The race's share is at
   most ``1 - confirm_share``: less when confirming its leader takes more pairs
   (:meth:`chunktune._gate.NoiseGate.reserve`).
4. **Choose by evidence.** The measured best, unless native is within the noise
   of it (``confidence_z``), it is short of the margin, or confirming its gain
   would take more pairs than the budget allows: then native
   (:func:`chunktune._choosing.choose`).
5. **Confirm.** The choice meets native again on fresh ABBA pairs, as many as the
   rest of the budget pays for (:mod:`chunktune._ending`); native stays unless the
   gain is confirmed.

With ``extend_budget``, each place where the budget would end an open question
asks :class:`chunktune._stretch.Stretch` to stretch it instead.
"""

from __future__ import annotations

import numpy as np

from ._ending import finish, result
from ._field import Field
from ._gate import NoiseGate
from ._pacing import Pace, first_calls
from ._probe import Chunk, Probe, StopReason, SweepResult
from ._reasons import too_slow
from ._refining import Refiner
from ._select import Choice
from ._shown import plural
from ._stretch import Stretch

__all__ = ["run_rounds"]

# rounds between refinements, and between halvings: new schedules need rounds to be
# judged, and a field halved every round would drop sizes on a round or two of evidence
_EVERY = 2


class _Rounds:
    """One race: its field, its budget, and the calls that measure it."""

    def __init__(self, probe: Probe, candidates: list[Chunk]) -> None:
        self.probe = probe
        self.p = p = probe.policy
        self.field = Field(probe, candidates)
        self.rng = np.random.default_rng(p.seed)
        self.pace = Pace(probe)
        self.stretch = Stretch(probe, self.pace)
        self.gate = NoiseGate(self.field, self.pace, self.stretch)
        self.refiner = Refiner(self.field, self.pace)
        self.cut = False  # the budget cut a round short of its plan

    def open_field(self) -> bool:
        """Cut the opening field to what the race's share can judge; False if nothing fits.

        The priming calls price a call before the first round: every opening candidate
        must be able to get its ``min_rounds`` rounds within the part of the race's
        share that successive halving gives its first stage (:meth:`Pace.opening_room
        <chunktune._pacing.Pace.opening_room>`), so a slow pool measures a few
        candidates spread over the range (in log scale, the ends kept) rather than
        starting many that the budget cannot judge, halve, and confirm. When not even
        one candidate and the confirmation's first pairs fit in the budget, nothing is
        measured at all. One call is a thin price (a burst may have slowed it), so
        before cutting on it native is timed once more and the faster of the two counts.
        """
        p, field = self.p, self.field
        if not self.probe.calls or not field.live:  # nothing primed: no price yet
            return True
        rounds = p.warmup + p.min_rounds  # warm-up rounds measure the whole field too
        least, size = sum(first_calls(p)), len(field.live)

        def room_at(call_s: float) -> int:
            return self.pace.opening_room(call_s, rounds, least, size)

        call_s = self.pace.mean_call()
        room = room_at(call_s)
        if room >= size:
            return True
        if self.probe.elapsed() + call_s > self.pace.cap_s:  # the budget, or its stretch's cap
            return False  # timing native again would overrun all the sweep may spend
        start = self.probe.elapsed()
        self.probe(None, kind="warmup")
        call_s = min(call_s, self.probe.elapsed() - start)
        room = room_at(call_s)
        if room < 1 and self.stretch.slow_pool(call_s):
            room = room_at(call_s)
        if room < 1:
            return False
        if room < size:
            field.thin(room)
            self.probe.emit(
                "candidates",
                candidates=(None, *field.live),
                message=(
                    f"one call takes about {call_s:.2g} s, so the budget can judge "
                    f"{plural(room, 'candidate')} in {plural(p.min_rounds, 'round')} "
                    "and still halve them"
                ),
            )
        return True

    def warm_up(self) -> bool:
        """Measure the whole field ``warmup`` times, unrecorded; False if the budget ran out."""
        entrants: list[Chunk] = [None, *self.field.live]
        for _ in range(self.p.warmup):
            for i in self.rng.permutation(len(entrants)):
                self.probe(entrants[int(i)], kind="warmup")
                if self.probe.over(self.pace.race_limit):
                    return False
        return True

    def fit_round(self) -> bool:
        """Make one more round fit in the race's share of the budget; False if none can.

        Calls are priced like the confirmation's. When the whole live field does not
        fit, it is cut to the best that do (successive halving paced by the budget,
        not by the round count), so a slow pool still gives its contenders the rounds
        to be judged; when not even one candidate fits, the race ends between rounds,
        every round whole, rather than cut in the middle of one.
        """
        room = self.pace.round_room(len(self.field.live))
        if room >= len(self.field.live):
            return True
        if room < 1:
            return False
        self.field.keep_best(room)
        return True

    def measure_round(self) -> bool:
        """Measure native and every live candidate once; False if the budget cut it short."""
        r = self.field.round
        entrants: list[Chunk] = [None, *self.field.live]
        order = [int(i) for i in self.rng.permutation(len(entrants))]
        if r == 1:
            # native first: a budget cut in round one still leaves the anchor measured
            order = [0, *(1 + int(i) for i in self.rng.permutation(len(entrants) - 1))]
        for i in order:
            c = entrants[i]
            self.field.ev.add(c, r, self.probe(c, round_=r))
            if self.probe.over(self.pace.race_limit):
                return False
        return True

    def race(self) -> tuple[StopReason, str | None]:
        """Measure rounds until the race ends: why it ended, and the noise gate's reason."""
        p, field, refiner = self.p, self.field, self.refiner
        if not self.warm_up():
            self.cut = True
            return "budget", None
        for r in range(1, p.max_rounds + 1):
            fits = r == 1 or self.fit_round() or (self.gate.extend_race() and self.fit_round())
            if not fits:
                # the race's share is spent, or what confirming its leader takes
                # begins: a planned end either way
                return ("confirming" if self.pace.holding() else "budget"), None
            field.round = r
            if not self.measure_round():
                self.cut = True
                return "budget", None
            if p.race:
                field.screen()
            if r < p.min_rounds:
                continue
            if p.race:
                field.race()
            self.gate.reserve()
            noisy = self.gate.too_noisy(final=False)
            if noisy is not None:
                return "noisy", noisy
            due = (r - p.min_rounds) % _EVERY == 0
            if due and p.race:
                field.halve()
            if refiner.left > 0 and due and refiner.refine():
                continue
            if p.early_stop and field.settled():
                if refiner.left > 0 and field.live and refiner.refine():
                    continue
                return "settled", None
        return "max_rounds", None

    def run(self) -> SweepResult:
        if self.open_field():
            stop, noisy = self.race()
            done = finish(self.field, self.gate, stop, noisy, cut=self.cut)
        else:
            why = too_slow(
                self.p, mean_call_s=self.pace.mean_call(), extended_to=self.stretch.cap()
            )
            choice = Choice(None, None, (), f"kept the native chunk {self.probe.native}: {why}")
            done = result(self.field, self.pace, "too_slow", choice, partial=False)
        self.probe.emit("done", round=self.field.round, message=done.stop)
        return done


def run_rounds(probe: Probe, candidates: list[Chunk]) -> SweepResult:
    """Race, refine, choose and confirm ``candidates`` (native included) with ``probe``."""
    return _Rounds(probe, candidates).run()
