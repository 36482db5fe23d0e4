"""Choosing by evidence at the race's end: the candidate to confirm, or native.

The measured best, or (``tie_break = "evidence"``) the size measured on the most rounds
among those the best has not beaten by ``tie_z`` standard errors on their common rounds
and that clear the margin themselves: the best of a noisy field was also its luckiest,
the more so on fewer rounds. Native instead when that size is within the noise of it
(``confidence_z``), short of the margin, or when confirming the race's gain would take
more pairs than the budget allows (the noise gate, :class:`chunktune._gate.NoiseGate`,
which prices the best's estimate, the gain on offer). Among ties (``tie_break`` other
than ``"evidence"``), :func:`chunktune._select.pick` picks.
"""

from __future__ import annotations

import math

from ._field import Field
from ._gate import NoiseGate
from ._reasons import pct, too_short, unbeaten
from ._select import Choice, pick

__all__ = ["choose"]


def choose(field: Field, gate: NoiseGate) -> tuple[int | None, Choice, bool]:
    """The candidate to confirm (None: keep native), the choice that explains it, and
    whether the noise gate kept native (too noisy to confirm a gain in the budget)."""
    p, native, ev = field.p, field.probe.native, field.ev
    eligible = [c for c in field.live if ev.rounds(c) >= p.min_rounds]
    if not eligible:
        return None, _none_eligible(field, gate), False
    best = min(eligible, key=lambda c: (ev.location(c), c))
    chosen, band, handover = _contender(field, eligible, best)
    vs = ev.compare(chosen, None)
    gain = 1.0 - math.exp(vs.diff)
    doubt = 1.0 - math.exp(-p.confidence_z * vs.se)
    who = f"the best candidate, {chosen}," if handover is None else f"{chosen} ({handover})"
    lead = f"{who} looked {pct(gain)} faster than native"
    if gain <= 0:
        # a size raced out early may have looked faster than native then: the
        # sentence speaks of those that stayed, whose figures are the final ones
        who = "no candidate left in the race" if field.dropped else "no candidate"
        reason = (
            f"kept the native chunk {native}: {who} measured faster than native "
            f"(the best, {chosen}, was {pct(-gain)} slower)"
        )
        return None, Choice(None, best, band, reason), False
    # an extending policy asks the gate last: it may stretch the budget for the pairs
    noisy = None if p.extend_budget else gate.too_noisy(final=True)
    if noisy is not None:
        return None, Choice(None, best, band, f"kept the native chunk {native}: {noisy}"), True
    if not math.isfinite(vs.se):
        reason = f"kept the native chunk {native}: {lead}, in too few rounds to know the noise"
        return None, Choice(None, best, band, reason), False
    if vs.upper(p.confidence_z) >= 0:
        reason = f"kept the native chunk {native}: {lead}, within the noise (±{pct(doubt)})"
        return None, Choice(None, best, band, reason), False
    if -vs.diff < field.need:
        reason = f"kept the native chunk {native}: {lead}, under the {pct(p.margin)} margin"
        return None, Choice(None, best, band, reason), False
    noisy = gate.too_noisy(final=True) if p.extend_budget else None
    if noisy is not None:
        return None, Choice(None, best, band, f"kept the native chunk {native}: {noisy}"), True
    return chosen, Choice(chosen, best, band, lead), False


def _none_eligible(field: Field, gate: NoiseGate) -> Choice:
    """Native kept when no candidate has the rounds to be judged, and why."""
    what = "every candidate fell clearly behind native or short of the margin"
    if not field.live and not field.dropped:
        what = "the candidate list holds no size but native's; nothing to compare"
    elif field.live:  # candidates left, none with the rounds to be judged
        what = too_short(
            field.p,
            mean_call_s=gate.pace.mean_call(),
            field=1 + len(field.live) + len(field.dropped),
        )
    return Choice(None, None, (), f"kept the native chunk {field.probe.native}: {what}")


def _contender(
    field: Field, eligible: list[int], best: int
) -> tuple[int, tuple[int, ...], str | None]:
    """The size to hold against native, the band of ties it came from, and why it is not
    the race's best (None: it is)."""
    p, ev = field.p, field.ev

    def worth_confirming(c: int) -> bool:
        # at least the margin over native; at margin 0 a size only as fast as native is
        # no gain (as in select), so it must be faster than native
        ahead = -ev.compare(c, None).diff
        return ahead >= field.need and ahead > 0

    if p.tie_break == "evidence":
        # the race's best was also its luckiest: among the sizes it has not beaten by
        # tie_z on their common rounds that look a gain worth confirming themselves,
        # the one measured on the most rounds carries the least of that luck
        contenders = [
            c
            for c in eligible
            if c == best or (ev.compare(c, best).lower(p.tie_z) <= 0 and worth_confirming(c))
        ]
        chosen = min(contenders, key=lambda c: (-ev.rounds(c), ev.location(c), c))
        return chosen, (best,), unbeaten(chosen, best)
    # a tie joins only if it, too, is a gain worth confirming
    ties = [
        c
        for c in eligible
        if (cmp := ev.compare(c, best)).diff <= field.band + p.tie_z * cmp.se
        and worth_confirming(c)
    ]
    band = tuple(sorted({best, *ties}))
    chosen = pick(list(band), p.tie_break, native=field.probe.native, upper=field.probe.upper)
    return chosen, band, unbeaten(chosen, best, p.tie_break)
