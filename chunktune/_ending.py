"""Ending a race: choose, confirm the choice against native, and build the sweep's result.

The choice is :func:`chunktune._choosing.choose`'s. It meets native again on fresh
ABBA pairs, as many as the rest of the budget pays for (:mod:`chunktune._confirming`,
its test in :mod:`chunktune._confirm`); native stays unless the gain is confirmed.
The reasons are worded in :mod:`chunktune._reasons`.
"""

from __future__ import annotations

import math

from ._choosing import choose
from ._confirm import Confirmation
from ._confirming import run_confirmation
from ._field import Field
from ._gate import NoiseGate
from ._pacing import Pace
from ._probe import Chunk, StopReason, SweepResult
from ._reasons import confirmed, kept
from ._select import Choice

__all__ = ["finish", "result"]


def finish(
    field: Field, gate: NoiseGate, stop: StopReason, noisy: str | None, *, cut: bool
) -> SweepResult:
    """Choose and confirm after a race that ended for ``stop``.

    ``noisy`` is the noise gate's reason when it ended the race (native is kept without
    choosing); ``cut`` whether the budget cut a round short of its plan.
    """
    p, native = field.p, field.probe.native
    chosen: int | None = None
    verdict: Confirmation | None = None
    if noisy is None:
        chosen, choice, gated = choose(field, gate)
        if gated:
            stop = "noisy"
    else:
        choice = Choice(None, None, (), f"kept the native chunk {native}: {noisy}")
    gain, gain_ci = 0.0, None
    if chosen is not None and p.confirm:
        gate.stretch.plan(gate.affordable_pairs())
        verdict, confirm_cut = _confirm(field, gate.pace, chosen)
        cut = cut or confirm_cut
        # the reason names the race's best when the size confirmed is another: a handover
        # (evidence) or a tie-break's pick among the best's ties
        if verdict.outcome == "confirmed":
            gain, gain_ci = verdict.gain, verdict.ci
            why = confirmed(chosen, native, verdict, best=choice.best, tie_break=p.tie_break)
            choice = Choice(chosen, choice.best, choice.band, why)
        else:
            why = kept(chosen, native, verdict, p, best=choice.best)
            choice = Choice(None, choice.best, choice.band, why)
    elif chosen is not None:
        gain = 1.0 - math.exp(field.ev.compare(chosen, None).diff)
        choice = Choice(chosen, choice.best, choice.band, f"chose {chosen}: {choice.reason}")
    if note := gate.stretch.spent():
        choice = Choice(choice.chunk_size, choice.best, choice.band, choice.reason + note)
    # partial: cut short mid-plan, or no candidate had the rounds to be judged
    partial = cut or (stop == "budget" and field.round < p.min_rounds)
    return result(
        field,
        gate.pace,
        stop,
        choice,
        partial=partial,
        gain=gain,
        gain_ci=gain_ci,
        pairs=0 if verdict is None else verdict.pairs,
    )


def _confirm(field: Field, pace: Pace, chosen: int) -> tuple[Confirmation, bool]:
    """Fresh ABBA/BAAB pairs against native, to a plan of as many as the budget pays for.

    Returns the verdict and whether the budget cut the confirmation short of its plan.
    """
    sigma, dof = field.ev.pair_sigma()
    # pairs come two to a block: an odd confirm_max_pairs rounds up (3..3 would
    # otherwise plan 2 pairs, below its own minimum, and never confirm anything)
    cap = -(-field.p.confirm_max_pairs // 2) * 2
    plan = pace.affordable_pairs(cap) // 2 * 2
    return run_confirmation(field.probe, pace, chosen, plan=plan, sigma=sigma, dof=dof)


def result(
    field: Field,
    pace: Pace,
    stop: StopReason,
    choice: Choice,
    *,
    partial: bool,
    gain: float = 0.0,
    gain_ci: tuple[float, float] | None = None,
    pairs: int = 0,
) -> SweepResult:
    """The sweep's result: what was measured, the choice, and how it ended.

    Its samples are the calls each estimate rests on: a candidate's call in a round the
    budget cut before native's is left out (it judged nothing), so a reported count of
    samples is never more than the estimate beside it had.
    """
    ev = field.ev
    chunks: list[Chunk] = [None, *sorted(field.measured)]
    judged = {c: ev.judged(c) for c in chunks}
    samples = {c: tuple(s.values()) for c, s in judged.items() if s}
    return SweepResult(
        samples=samples,
        estimates=ev.estimates(samples),
        raced_out=field.dropped,
        rounds=field.round,
        probe_seconds=field.probe.probe_seconds,
        elapsed_s=field.probe.elapsed(),
        partial=partial,
        stop=stop,
        sigma=ev.sigma()[0],
        choice=choice,
        gain=gain,
        gain_ci=gain_ci,
        confirm_pairs=pairs,
        budget_s=pace.budget_s,
    )
