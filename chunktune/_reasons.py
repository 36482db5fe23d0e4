"""The sentences a rounds sweep gives for its choice: what was measured, and why."""

from __future__ import annotations

import math

from ._confirm import FUTILITY_Z, Confirmation, futility_bound
from ._pacing import NOISE_ROUNDS, least_budget
from ._policy import Policy
from ._shown import plural
from ._stats import normal_cdf

__all__ = ["confirmed", "kept", "pct", "too_noisy", "too_short", "too_slow", "unbeaten"]


def pct(fraction: float) -> str:
    """A fraction as a percentage with one decimal: ``0.034`` is ``"3.4%"`` (never ``-0.0%``)."""
    text = f"{fraction:.1%}"
    return "0.0%" if text == "-0.0%" else text


def too_short(p: Policy, *, mean_call_s: float, field: int) -> str:
    """Why nothing was judged when the budget ended first, with the budget that would do."""
    # the whole field's min_rounds, in the race's share of the budget
    race_s = (p.prime + field * p.min_rounds) * mean_call_s
    need = race_s / (1.0 - (p.confirm_share if p.confirm else 0.0))
    return (
        f"the budget ended before any candidate had enough rounds: one call takes about "
        f"{mean_call_s:.2g} s, and a time_budget_s of about {math.ceil(need)} s would give "
        f"the field its {plural(p.min_rounds, 'round')}"
    )


def too_slow(p: Policy, *, mean_call_s: float, extended_to: float | None = None) -> str:
    """Why nothing was measured: the budget cannot judge and confirm even one candidate.

    ``extended_to``: the most an ``extend_budget`` policy could stretch its budget to.
    """
    need = least_budget(p, mean_call_s)
    budget = (
        "the budget"
        if extended_to is None
        else f"the budget, even extended to {extended_to:.3g} s,"
    )
    return (
        f"one call takes about {mean_call_s:.2g} s, too long for {budget} to judge "
        f"even one candidate against native in {max(p.min_rounds, NOISE_ROUNDS)} rounds"
        + (f" and confirm it on {p.confirm_min_pairs} pairs" if p.confirm else "")
        + f"; that takes a time_budget_s of at least {math.ceil(need)} s"
    )


def too_noisy(
    *,
    sigma: float,
    gain: float,
    needed: float,
    afford: int,
    extended_to: float | None = None,
    lead: tuple[int, float] | None = None,
    capped: bool = False,
) -> str:
    """The noise gate's reason: the per-call noise, the gain at stake, the pairs it takes.

    ``extended_to``: the most an ``extend_budget`` policy could stretch its budget to
    (``afford`` is then what that would pay for). ``capped``: ``afford`` is the policy's
    ``confirm_max_pairs``, and the budget would pay for more (short calls): the sentence
    names the cap, not the budget, as what stands in the way. ``lead``: at the race's end, its best
    and the log gain it measured; the gain at stake is that, or the margin where it
    measured less, and the sentence says which.
    """
    budget = "the budget" if extended_to is None else f"the budget extended to {extended_to:.3g} s"
    at_stake = f"a {pct(1.0 - math.exp(-gain))} gain"
    if lead is not None:
        best, measured = lead
        if measured >= gain:
            at_stake = f"the {pct(1.0 - math.exp(-measured))} gain of the race's best, {best},"
        else:  # a lead under the margin: the least gain worth leaving native for is at stake
            # a best that measured slower than native (a live one, within the noise) is said
            # so: "-0.4% faster" reads as a typo
            looked = (
                f"{pct(1.0 - math.exp(-measured))} faster"
                if measured >= 0.0
                else f"{pct(math.exp(-measured) - 1.0)} slower"
            )
            at_stake = (
                f"the {pct(1.0 - math.exp(-gain))} margin (the race's best, {best}, looked "
                f"{looked})"
            )
    within, allows = "within the budget", f"{budget} allows {afford}"
    if capped:
        within = "in the pairs the policy allows"
        allows = f"confirm_max_pairs allows {afford} (what is left of {budget} would pay for more)"
    return (
        f"the machine is too noisy to confirm a gain {within}: one call varies "
        f"by {pct(sigma / math.sqrt(2.0))} against its native partner; confirming "
        f"{at_stake} would take about {math.ceil(needed)} pairs of calls, and {allows}"
    )


def unbeaten(chosen: int, best: int | None, tie_break: str = "evidence") -> str | None:
    """Why ``chosen`` went to confirmation and not ``best``, the race's best; None if it was.

    With tie-break ``evidence``, the race's best may hand over to a size measured on more
    rounds that it has not beaten (:func:`chunktune._choosing.choose`); with any other,
    the tie-break may pick another size among the best's ties, and the sentence says so
    rather than call that size the race's leader.
    """
    if best is None or best == chosen:
        return None
    if tie_break != "evidence":
        return (
            f"picked by tie-break {tie_break.replace('_', ' ')} from the ties of the "
            f"race's best, {best}"
        )
    return f"on more rounds than the race's best, {best}, and not clear of it"


def confirmed(
    chosen: int,
    native: int,
    v: Confirmation,
    *,
    best: int | None = None,
    tie_break: str = "evidence",
) -> str:
    """The reason for leaving native on a confirmed gain (``best``, ``tie_break``: see
    :func:`unbeaten`)."""
    why = unbeaten(chosen, best, tie_break)
    race = "after leading the race" if why is None else f"after the race ({why})"
    return (
        f"chose {chosen}: {pct(v.gain)} faster than the native chunk {native} "
        f"({pct(v.ci[0])} to {pct(v.ci[1])}), confirmed on {v.pairs} fresh pairs of "
        f"calls against native {race}"
    )


def _typical_only(v: Confirmation, p: Policy) -> bool:
    """Whether ``v`` passed on its robust estimate and failed only on the plain mean's gain.

    On enough pairs to decide, its interval clear of 0 and its estimate past the margin
    would have confirmed it, but the mean of every pair fell short: the pairs the
    trimming drops went against it.
    """
    if v.mean_gain is None or v.pairs < p.confirm_min_pairs:
        return False
    return v.mean_gain < p.margin <= v.gain and v.ci[0] > 0


def kept(chosen: int, native: int, v: Confirmation, p: Policy, *, best: int | None = None) -> str:
    """The reason for keeping native when the race's pick was not confirmed (``best``, with
    ``p.tie_break``: see :func:`unbeaten`)."""
    why = unbeaten(chosen, best, p.tie_break)
    who = f"the race's best, {chosen}," if why is None else f"{chosen} ({why})"
    measured = f"{pct(v.gain)} ({pct(v.ci[0])} to {pct(v.ci[1])})"
    if v.outcome == "rejected":
        # the bound the test rejected on, not v.ci: at an interim look that interval is
        # wider and may reach past the margin, which would read as a contradiction
        level = f"{normal_cdf(FUTILITY_Z):.0%}"
        why = (
            f"measured {pct(v.gain)}, at most {pct(futility_bound(v, p.estimator))} "
            f"({level} upper bound): short of the {pct(p.margin)} margin"
        )
    elif v.pairs == 0:
        return (
            f"kept the native chunk {native}: {who} looked faster, "
            f"but what was left of the budget paid for fewer than the "
            f"{p.confirm_min_pairs} pairs of calls needed to confirm it against native"
        )
    elif _typical_only(v, p):
        why = (
            f"measured {measured} in the typical pair but {pct(v.mean_gain or 0.0)} on "
            f"average, short of the {pct(p.margin)} margin: its slowest calls lose more "
            "than native's"
        )
    elif v.out_of_reach:
        why = (
            f"could not confirm a gain: {measured}; they stopped early, as the pairs left "
            "could hardly have confirmed one"
        )
    else:
        why = f"could not confirm a gain: {measured}"
    # short calls reach the policy's cap long before the budget: say it was the cap
    cap = (
        " (confirm_max_pairs, the most the policy allows)" if v.pairs >= p.confirm_max_pairs else ""
    )
    return (
        f"kept the native chunk {native}: {who} looked faster, but "
        f"{v.pairs} fresh pairs of calls{cap} against native {why}"
    )
