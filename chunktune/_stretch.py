"""Stretching a sweep's budget where the evidence is still open (``extend_budget``).

A policy with ``extend_budget`` may run past ``time_budget_s`` at four places where
the budget would otherwise end an open question, and only as far as each takes:

- a pool too slow to judge one candidate: the least budget that judges and confirms one;
- a race whose share ends with a leader at least the margin ahead of native, but
  within ``confidence_z`` standard errors of it: the budget doubles (with
  ``confidence_z`` at 0 no leader is held back so, and the confirmation decides);
- a gain still plausible that the rest cannot confirm: what 80% power takes (during
  the race, the whole budget scaled so the confirmation's share pays for it);
- a confirmation whose whole plan (``confirm_max_pairs``) does not fit: the plan,
  since the sequential test stops as soon as it can.

Never past the cap, :attr:`chunktune._pacing.Pace.cap_s` (nine tenths of
``hard_limit_s``, less what the resolve spent waiting). Each stretch that is news is
an ``extended`` progress event. The rounds schedule decides when to ask: for a slow
pool as it opens the field (:mod:`chunktune._rounds`), for an open leader and a
plausible gain through its noise gate (:class:`chunktune._gate.NoiseGate`, during the
race and at the choice), and for the confirmation's plan at the end
(:mod:`chunktune._ending`).
"""

from __future__ import annotations

import math
from collections.abc import Callable

from ._confirm import pairs_needed
from ._pacing import Pace, least_budget
from ._probe import Probe
from ._reasons import pct

__all__ = ["Stretch"]

_NEWS = 1.1  # a stretch is announced when it passes the last announced budget by a tenth


class Stretch:
    """The budget stretches of one sweep; every method is a no-op without ``extend_budget``."""

    def __init__(self, probe: Probe, pace: Pace) -> None:
        self.probe = probe
        self.pace = pace
        self.p = probe.policy
        self.on = self.p.extend_budget
        self.announced_s = self.p.time_budget_s

    def cap(self) -> float | None:
        """The most the budget could stretch to, for a reason; None where it cannot stretch."""
        return self.pace.cap_s if self.on and self.pace.cap_s > self.p.time_budget_s else None

    def slow_pool(self, call_s: float) -> bool:
        """Stretch to what judging and confirming one candidate takes; False if the cap cannot."""
        need = least_budget(self.p, call_s)
        if not self.on or need > self.pace.cap_s or self.pace.cap_s <= self.pace.budget_s:
            return False  # beyond the cap, or no room to stretch at all
        self.pace.extend_to(min(self.pace.cap_s, 1.1 * need))  # a tenth over: rounding, drift
        self.announce(
            f"one call takes about {call_s:.2g} s, too long for {self.p.time_budget_s:g} s "
            "to judge and confirm even one candidate"
        )
        return True

    def race(self, lead: int, gain: float) -> bool:
        """Double the budget for a race that ended undecided; False at the cap."""
        if not self.on or self.pace.budget_s >= self.pace.cap_s:
            return False
        self.pace.extend_to(min(self.pace.cap_s, 2.0 * self.pace.budget_s))
        self.announce(
            f"the race's share ended with {lead} looking {pct(gain)} faster than native, "
            "within the noise"
        )
        return True

    def pairs(
        self, gain: float, sigma: float, bound: Callable[[int], float], *, racing: bool
    ) -> bool:
        """Stretch so a plausible log-gain ``gain`` can be confirmed; False if the cap cannot.

        The cap must pay for the pairs with which the confirmation succeeds as often
        as it fails (the noise gate's own test, ``bound(plan)`` the test's last bound
        for a plan of that many pairs). During the race the budget then buys 80% power;
        after it, the whole plan the cap allows (a race's leader is rarely as fast as
        it looked, and the test stops early when it can).
        """
        p = self.p
        at_cap = self.pace.pairs_at_cap(p.confirm_max_pairs, racing=racing)
        if not self.on or at_cap < p.confirm_min_pairs:
            return False
        z = bound(at_cap)
        if pairs_needed(gain, sigma, z, power_z=0.0) > at_cap:
            return False
        power = math.ceil(pairs_needed(gain, sigma, z)) if racing else at_cap
        want = max(p.confirm_min_pairs, min(at_cap, power))
        if not self.pace.extend_for(want, racing=racing):
            return False
        self.announce_if_news(
            f"confirming a {pct(1.0 - math.exp(-gain))} gain at this noise takes about "
            f"{want} pairs of calls, more than {p.time_budget_s:g} s pays for"
        )
        return True

    def plan(self, afford: int) -> None:
        """Stretch to the confirmation's whole plan when ``afford`` pairs fall short of it."""
        if not self.on:
            return
        plan = self.pace.pairs_at_cap(self.p.confirm_max_pairs, racing=False)
        if plan > afford and self.pace.extend_for(plan, racing=False):
            self.announce_if_news(
                f"the confirmation's plan of {plan} pairs of calls is more than "
                f"{self.p.time_budget_s:g} s pays for"
            )

    def spent(self) -> str:
        """The reason's note when the sweep stretched past ``time_budget_s``, else ''."""
        stretched = self.pace.budget_s > self.p.time_budget_s
        if not self.on or not stretched or self.probe.elapsed() <= self.p.time_budget_s:
            return ""
        return f"; the budget was extended to {self.pace.budget_s:.3g} s"

    def announce_if_news(self, why: str) -> None:
        first = self.announced_s <= self.p.time_budget_s < self.pace.budget_s
        if first or self.pace.budget_s > _NEWS * self.announced_s:  # not every round's nudge
            self.announce(why)

    def announce(self, why: str) -> None:
        budget = self.announced_s = self.pace.budget_s
        self.probe.emit(
            "extended",
            seconds=budget,
            message=f"{why}: the budget is extended to {budget:.3g} s "
            f"(extend_budget; hard_limit_s {self.p.hard_limit_s:g} s)",
        )
