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
   worse candidates take few probes and the contenders many.
2. **Refine.** Every other round from ``min_rounds`` on (``refine_steps`` times),
   the best few of the field send probes to the schedules halfway to their
   nearest measured neighbours in chunk count, and a list-scheduling model fit
   to the estimates so far proposes its own best (:mod:`chunktune._refine`), as many
   as can still be judged. Several survivors are refined at once: the landscape is
   a sawtooth, not one valley.
3. **Settle.** Measuring stops when the leader is, with confidence, within
   ``tie_tol`` of every other contender (``tie_z``), when nothing is left that
   could clear the margin, at ``max_rounds``, between rounds when the race's share
   of the budget cannot pay for another (:mod:`chunktune._pacing`; first the field
   is cut to its best), or when the noise gate finds that no gain still plausible
   could be confirmed within what is left of the budget. The race's share is at
   most ``1 - confirm_share``: less when confirming its leader takes more pairs
   (:meth:`_Rounds.reserve`).
4. **Choose by evidence.** The measured best, unless native is within the noise
   of it (``confidence_z``), it is short of the margin, or confirming its gain
   would take more pairs than the budget allows: then native.
5. **Confirm.** The choice meets native again on fresh ABBA pairs, as many as the
   rest of the budget pays for (:mod:`chunktune._confirming`, its test in
   :mod:`chunktune._confirm`); native stays unless the gain is confirmed. The
   reasons are worded in :mod:`chunktune._reasons`.

With ``extend_budget``, each place where the budget would end an open question
asks :class:`chunktune._stretch.Stretch` to stretch it instead.
"""

from __future__ import annotations

import math

import numpy as np

from ._confirm import Confirmation
from ._confirming import run_confirmation
from ._field import Field
from ._gate import NoiseGate
from ._pacing import Pace, first_calls
from ._probe import Chunk, Probe, StopReason, SweepResult
from ._reasons import confirmed, kept, pct, too_short, too_slow
from ._refining import Refiner
from ._select import Choice, pick
from ._stretch import Stretch

__all__ = ["run_rounds"]

_REFINE_EVERY = 2  # rounds between refinements: new schedules need rounds to be judged


class _Rounds:
    def __init__(self, probe: Probe, candidates: list[Chunk]) -> None:
        self.probe = probe
        self.p = p = probe.policy
        self.field = Field(probe, candidates)
        self.rng = np.random.default_rng(p.seed)
        self.cut = False  # the budget cut a round or the confirmation short of its plan
        self.pace = Pace(probe)
        self.stretch = Stretch(probe, self.pace)
        self.gate = NoiseGate(self.field, self.pace, self.stretch)
        self.refiner = Refiner(self.field, self.pace)

    # -- measuring ----------------------------------------------------------------

    def warm_up(self) -> bool:
        field: list[Chunk] = [None, *self.field.live]
        for _ in range(self.p.warmup):
            for i in self.rng.permutation(len(field)):
                self.probe(field[int(i)], kind="warmup")
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
        field: list[Chunk] = [None, *self.field.live]
        order = [int(i) for i in self.rng.permutation(len(field))]
        if self.field.round == 1:
            # native first: a budget cut in round one still leaves the anchor measured
            order = [0, *(1 + int(i) for i in self.rng.permutation(len(field) - 1))]
        for i in order:
            c = field[i]
            self.field.ev.add(c, self.field.round, self.probe(c, round_=self.field.round))
            if self.probe.over(self.pace.race_limit):
                return False
        return True

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
        p = self.p
        if not self.probe.calls or not self.field.live:  # nothing primed: no price yet
            return True
        rounds = p.warmup + p.min_rounds  # warm-up rounds measure the whole field too
        least, field = sum(first_calls(p)), len(self.field.live)

        def room_at(call_s: float) -> int:
            return self.pace.opening_room(call_s, rounds, least, field)

        call_s = self.pace.mean_call()
        room = room_at(call_s)
        if room >= field:
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
        if room < field:
            self.field.thin(room)
            self.probe.emit(
                "candidates",
                candidates=(None, *self.field.live),
                message=(
                    f"one call takes about {call_s:.2g} s, so the budget can judge "
                    f"{room} candidates in {p.min_rounds} rounds and still halve them"
                ),
            )
        return True

    # -- choosing and confirming ------------------------------------------------------

    def choose(self) -> tuple[int | None, Choice, bool]:
        """The candidate to confirm (None: keep native), the choice that explains it, and
        whether the noise gate kept native (too noisy to confirm a gain in the budget)."""
        p, native = self.p, self.probe.native
        eligible = [c for c in self.field.live if self.field.ev.count(c) >= p.min_rounds]
        if not eligible:
            what = "every candidate fell clearly behind native or short of the margin"
            if not self.field.live and not self.field.dropped:
                what = "the candidate list holds no size but native's; nothing to compare"
            elif self.field.live:  # candidates left, none with the rounds to be judged
                what = too_short(
                    p,
                    mean_call_s=self.pace.mean_call(),
                    field=1 + len(self.field.live) + len(self.field.dropped),
                )
            return None, Choice(None, None, (), f"kept the native chunk {native}: {what}"), False
        best = min(eligible, key=lambda c: (self.field.ev.location(c), c))
        band: tuple[int, ...] = (best,)
        chosen = best
        if p.tie_break != "evidence":
            ties = [
                c
                for c in eligible
                if (cmp := self.field.ev.compare(c, best)).diff
                <= self.field.band + p.tie_z * cmp.se
                and -self.field.ev.compare(c, None).diff >= self.field.need
            ]
            band = tuple(sorted({best, *ties}))
            chosen = pick(list(band), p.tie_break, native=native, upper=self.probe.upper)
        vs = self.field.ev.compare(chosen, None)
        gain = 1.0 - math.exp(vs.diff)
        doubt = 1.0 - math.exp(-p.confidence_z * vs.se)
        lead = f"the best candidate, {chosen}, looked {pct(gain)} faster than native"
        if gain <= 0:
            # a size raced out early may have looked faster than native then: the
            # sentence speaks of those that stayed, whose figures are the final ones
            who = "no candidate left in the race" if self.field.dropped else "no candidate"
            reason = (
                f"kept the native chunk {native}: {who} measured faster than native "
                f"(the best, {chosen}, was {pct(-gain)} slower)"
            )
            return None, Choice(None, best, band, reason), False
        # an extending policy asks the gate last: it may stretch the budget for the pairs
        noisy = None if p.extend_budget else self.gate.too_noisy(final=True)
        if noisy is not None:
            return None, Choice(None, best, band, f"kept the native chunk {native}: {noisy}"), True
        if not math.isfinite(vs.se):
            reason = f"kept the native chunk {native}: {lead}, in too few rounds to know the noise"
            return None, Choice(None, best, band, reason), False
        if vs.upper(p.confidence_z) >= 0:
            reason = f"kept the native chunk {native}: {lead}, within the noise (±{pct(doubt)})"
            return None, Choice(None, best, band, reason), False
        if -vs.diff < self.field.need:
            reason = f"kept the native chunk {native}: {lead}, under the {pct(p.margin)} margin"
            return None, Choice(None, best, band, reason), False
        noisy = self.gate.too_noisy(final=True) if p.extend_budget else None
        if noisy is not None:
            return None, Choice(None, best, band, f"kept the native chunk {native}: {noisy}"), True
        return chosen, Choice(chosen, best, band, lead), False

    def confirm(self, chosen: int) -> Confirmation:
        """Fresh ABBA/BAAB pairs against native, to a plan of as many as the budget pays for."""
        sigma, dof = self.field.ev.pair_sigma()
        # pairs come two to a block: an odd confirm_max_pairs rounds up (3..3 would
        # otherwise plan 2 pairs, below its own minimum, and never confirm anything)
        cap = -(-self.p.confirm_max_pairs // 2) * 2
        plan = self.pace.affordable_pairs(cap) // 2 * 2
        verdict, cut = run_confirmation(
            self.probe, self.pace, chosen, plan=plan, sigma=sigma, dof=dof
        )
        self.cut = self.cut or cut
        return verdict

    # -- the whole schedule ---------------------------------------------------------

    def run(self) -> SweepResult:
        p = self.p
        stop: StopReason = "max_rounds"
        noisy: str | None = None
        self.cut = False
        if not self.open_field():
            why = too_slow(p, mean_call_s=self.pace.mean_call(), extended_to=self.stretch.cap())
            choice = Choice(None, None, (), f"kept the native chunk {self.probe.native}: {why}")
            result = self.result("too_slow", choice, partial=False)
            self.probe.emit("done", round=0, message=result.stop)
            return result
        if not self.warm_up():
            stop, self.cut = "budget", True
        else:
            for r in range(1, p.max_rounds + 1):
                fits = r == 1 or self.fit_round() or (self.gate.extend_race() and self.fit_round())
                if not fits:
                    # the race's share is spent, or what confirming its leader takes
                    # begins: a planned end either way
                    stop = "confirming" if self.pace.holding() else "budget"
                    break
                self.field.round = r
                if not self.measure_round():
                    stop, self.cut = "budget", True
                    break
                if p.race:
                    self.field.screen()
                if r < p.min_rounds:
                    continue
                if p.race:
                    self.field.race()
                self.gate.reserve()
                noisy = self.gate.too_noisy(final=False)
                if noisy is not None:
                    stop = "noisy"
                    break
                due = (r - p.min_rounds) % _REFINE_EVERY == 0
                if due and p.race:
                    self.field.halve()
                if self.refiner.left > 0 and due and self.refiner.refine():
                    continue
                if p.early_stop and self.field.settled():
                    if self.refiner.left > 0 and self.field.live and self.refiner.refine():
                        continue
                    stop = "settled"
                    break
        result = self.finish(stop, noisy)
        self.probe.emit("done", round=self.field.round, message=result.stop)
        return result

    def finish(self, stop: StopReason, noisy: str | None) -> SweepResult:
        native = self.probe.native
        chosen: int | None = None
        verdict: Confirmation | None = None
        if noisy is None:
            chosen, choice, gated = self.choose()
            if gated:
                stop = "noisy"
        else:
            choice = Choice(None, None, (), f"kept the native chunk {native}: {noisy}")
        gain, gain_ci = 0.0, None
        if chosen is not None and self.p.confirm:
            self.stretch.plan(self.gate.affordable_pairs())
            verdict = self.confirm(chosen)
            if verdict.outcome == "confirmed":
                gain, gain_ci = verdict.gain, verdict.ci
                why = confirmed(chosen, native, verdict)
                choice = Choice(chosen, choice.best, choice.band, why)
            else:
                choice = Choice(
                    None, choice.best, choice.band, kept(chosen, native, verdict, self.p)
                )
        elif chosen is not None:
            gain = 1.0 - math.exp(self.field.ev.compare(chosen, None).diff)
            choice = Choice(chosen, choice.best, choice.band, f"chose {chosen}: {choice.reason}")
        if note := self.stretch.spent():
            choice = Choice(choice.chunk_size, choice.best, choice.band, choice.reason + note)
        # partial: cut short mid-plan, or no candidate had the rounds to be judged
        partial = self.cut or (stop == "budget" and self.field.round < self.p.min_rounds)
        return self.result(
            stop,
            choice,
            partial=partial,
            gain=gain,
            gain_ci=gain_ci,
            pairs=0 if verdict is None else verdict.pairs,
        )

    def result(
        self,
        stop: StopReason,
        choice: Choice,
        *,
        partial: bool,
        gain: float = 0.0,
        gain_ci: tuple[float, float] | None = None,
        pairs: int = 0,
    ) -> SweepResult:
        """The sweep's result: what was measured, the choice, and how it ended."""
        chunks: list[Chunk] = [None, *sorted(self.field.measured)]
        samples = {
            c: tuple(self.field.ev.seconds[c].values()) for c in chunks if self.field.ev.count(c)
        }
        return SweepResult(
            samples=samples,
            estimates=self.field.ev.estimates(samples),
            errors={c: self.field.ev.compare(c, None).se for c in samples},
            raced_out=self.field.dropped,
            rounds=self.field.round,
            probe_seconds=self.probe.probe_seconds,
            elapsed_s=self.probe.elapsed(),
            partial=partial,
            stop=stop,
            sigma=self.field.ev.sigma()[0],
            choice=choice,
            gain=gain,
            gain_ci=gain_ci,
            confirm_pairs=pairs,
            budget_s=self.pace.budget_s,
        )


def run_rounds(probe: Probe, candidates: list[Chunk]) -> SweepResult:
    """Race, refine, choose and confirm ``candidates`` (native included) with ``probe``."""
    return _Rounds(probe, candidates).run()
