"""What the budget pays for: rounds of the race, candidates that can still join, pairs.

A sweep's calls are priced at the mean call so far plus a sixth for calls that run
slower (the machine drifts), so a round or a confirmation planned on the price ends
by its plan rather than being cut by the budget. The race spends its share,
``time_budget_s * (1 - confirm_share)``; the confirmation what is left, and more
when its leader's gain needs more pairs than that pays for (:meth:`Pace.reserve`).

A policy with ``extend_budget`` may stretch the budget, up to nine tenths of its
``hard_limit_s``, where the budget is too short to judge even one candidate
(:meth:`Pace.extend_to`) or to confirm a gain still plausible (:meth:`Pace.extend_for`):
only as far as that takes, and never past the limit that ends the flight regardless.
"""

from __future__ import annotations

import math

from ._policy import EXTEND_SHARE, Policy
from ._probe import Probe

__all__ = ["NOISE_ROUNDS", "SLACK", "Pace", "first_calls", "least_budget"]

SLACK = 7.0 / 6.0
"""A call's price over the mean call so far: calls that run slower must still fit."""

NOISE_ROUNDS = 3
"""The fewest rounds of one candidate and native that give a noise figure: their values'
three differences (:func:`chunktune._stats.pooled_sigma`). Without one, a leader is
never chosen, however fast it looked."""


def first_calls(p: Policy) -> tuple[int, int]:
    """The fewest calls that judge one candidate and confirm it: ``(race, confirmation)``.

    Native and the candidate through the warm-up and ``min_rounds`` rounds, at least
    the rounds that give a noise figure, then the confirmation's first pairs (none when
    the policy does not confirm).
    """
    rounds = p.warmup + max(p.min_rounds, NOISE_ROUNDS)
    return 2 * rounds, (2 * p.confirm_min_pairs if p.confirm else 0)


def least_budget(p: Policy, mean_call_s: float) -> float:
    """The least ``time_budget_s`` that judges one candidate and confirms it, in seconds.

    The priming calls and the one that checks them, then native and the candidate
    through their rounds within the race's share, then the confirmation's first pairs.
    """
    race_calls, pair_calls = first_calls(p)
    need = (p.prime + 1) * mean_call_s + SLACK * race_calls * mean_call_s
    if p.confirm:
        need = max(need / (1.0 - p.confirm_share), need + SLACK * pair_calls * mean_call_s)
    return need


class Pace:
    """The budget of one sweep, read off its probe's clock and calls."""

    def __init__(self, probe: Probe) -> None:
        p = probe.policy
        self.probe = probe
        self.budget_s = p.time_budget_s
        self.share = p.confirm_share if p.confirm else 0.0
        self.held_s = 0.0  # what the confirmation holds back from the race, beyond its share
        self.race_limit = p.time_budget_s * (1.0 - self.share)
        self.cap_s = p.time_budget_s  # the most the budget may be stretched to
        if p.extend_budget and p.hard_limit_s is not None:
            cap = EXTEND_SHARE * p.hard_limit_s
            if probe.limit_s is not None:  # the resolve waited: the same headroom from its end
                cap = min(cap, probe.limit_s - (1.0 - EXTEND_SHARE) * p.hard_limit_s)
            self.cap_s = max(p.time_budget_s, cap)

    def extend_to(self, budget_s: float) -> bool:
        """Stretch the budget, the race's share with it, to ``budget_s``; False past the cap."""
        if budget_s > self.cap_s:
            return False
        self.budget_s = max(self.budget_s, budget_s)
        self._limit_race()
        return True

    def reserve(self, pairs: int) -> None:
        """Hold back from the race what ``pairs`` confirmation pairs cost, at today's price.

        The confirmation's share is a floor: when confirming the race's leader takes
        more pairs than the share pays for, the race ends earlier, since a leader that
        cannot be confirmed is worth nothing. Each call replaces the last reserve.
        """
        self.held_s = 2.0 * pairs * self.per_call()
        self._limit_race()

    def holding(self) -> bool:
        """Whether the confirmation holds back more than its share, so the race ends sooner."""
        return self.held_s > self.budget_s * self.share

    def _limit_race(self) -> None:
        self.race_limit = self.budget_s - max(self.budget_s * self.share, self.held_s)

    def extend_for(self, pairs: int, *, racing: bool) -> bool:
        """Stretch the budget so ``pairs`` confirmation pairs fit; False if the cap is too short.

        While ``racing``, the whole budget is scaled so that the confirmation's share
        pays for the pairs, the race's share growing with it (the race must find the
        gain before anything confirms it); after the race, only the pairs are added
        to what was spent. The budget never shrinks; nothing changes on False.
        """
        pair_s = 2.0 * pairs * self.per_call()
        if racing and self.share > 0:
            return self.extend_to(max(self.probe.elapsed() + pair_s, pair_s / self.share))
        want = self.probe.elapsed() + pair_s
        if want > self.cap_s:
            return False
        self.budget_s = max(self.budget_s, want)
        return True

    def pairs_at_cap(self, cap: int, *, racing: bool) -> int:
        """Confirmation pairs the cap would pay for (``extend_for``'s rule), at most ``cap``."""
        per_call = self.per_call()
        if per_call <= 0:
            return cap
        if racing and self.share > 0:
            left = self.cap_s * self.share
        else:
            left = self.cap_s - self.probe.elapsed()
        return int(max(0.0, min(cap, left / (2.0 * per_call))))

    def per_call(self) -> float:
        """The price of one call: the mean so far, plus a sixth for calls that run slower."""
        return SLACK * self.probe.elapsed() / max(1, self.probe.calls)

    def mean_call(self) -> float:
        """The mean call so far, in seconds."""
        return self.probe.elapsed() / max(1, self.probe.calls)

    def round_room(self, field: int) -> int:
        """How many candidates one more round can measure (besides native), at most ``field``."""
        per_call = self.per_call()
        if per_call <= 0:
            return field
        left = self.race_limit - self.probe.elapsed()
        return min(field, int(left / per_call) - 1)

    def _judgeable(self, price: float, rounds: int) -> int:
        """Candidates (besides native) the rest of the race's share gives ``rounds`` rounds."""
        return int((self.race_limit - self.probe.elapsed()) / (price * rounds)) - 1

    def room_for_new(self, live: int, rounds: int) -> int:
        """How many candidates can join ``live`` others and still get ``rounds`` rounds."""
        per_call = self.per_call()
        if per_call <= 0:
            return 1 << 30  # nothing measured yet: no price
        return max(0, self._judgeable(per_call, rounds) - live)

    def opening_room(self, call_s: float, rounds: int, least_calls: int, field: int) -> int:
        """Candidates (besides native; ``field`` at most) the opening can give ``rounds`` rounds.

        The opening is the first stage of successive halving and gets what each stage
        gets, an equal part of the race's share: a field of m (native included) is
        halved ``ceil(log2 m)`` times before one is left, so it opens only as wide as
        that part pays for. The survivors then have rounds left to be told apart, and
        the confirmation its share, where a field that took the whole share in its
        opening rounds would leave neither. Priced with the same slack as every other
        call (``call_s`` a call); 0 when not even ``least_calls`` calls fit in what is left
        of the budget.
        """
        price = SLACK * call_s
        if price <= 0:
            return field
        if (self.budget_s - self.probe.elapsed()) / price < least_calls:
            return 0
        fits = self._judgeable(price, rounds) + 1  # the field the whole share would open
        m = min(fits, field + 1)
        while m > 2 and m * math.ceil(math.log2(m)) > fits:
            m -= 1
        return max(0, m - 1)

    def affordable_pairs(self, cap: int) -> int:
        """Confirmation pairs the rest of the budget pays for, at most ``cap``."""
        per_call = self.per_call()
        left = self.budget_s - self.probe.elapsed()
        by_time = math.inf if per_call <= 0 else left / (2.0 * per_call)
        return int(max(0.0, min(cap, by_time)))
