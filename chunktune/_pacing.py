"""What the budget pays for: rounds of the race, candidates that can still join, pairs.

A sweep's calls are priced at the mean call so far plus a sixth for calls that run
slower (the machine drifts), so a round or a confirmation planned on the price ends
by its plan rather than being cut by the budget. The race spends its share,
``time_budget_s * (1 - confirm_share)``; the confirmation what is left.
"""

from __future__ import annotations

import math

from ._probe import Probe
from ._settings import Policy

__all__ = ["SLACK", "Pace", "first_calls"]

SLACK = 7.0 / 6.0
"""A call's price over the mean call so far: calls that run slower must still fit."""


def first_calls(p: Policy) -> tuple[int, int]:
    """The fewest calls that judge one candidate and confirm it: ``(race, confirmation)``.

    Native and the candidate through the warm-up and ``min_rounds`` rounds, then the
    confirmation's first pairs (none when the policy does not confirm).
    """
    return 2 * (p.warmup + p.min_rounds), (2 * p.confirm_min_pairs if p.confirm else 0)


class Pace:
    """The budget of one sweep, read off its probe's clock and calls."""

    def __init__(self, probe: Probe) -> None:
        p = probe.policy
        self.probe = probe
        self.budget_s = p.time_budget_s
        share = p.confirm_share if p.confirm else 0.0
        self.race_limit = p.time_budget_s * (1.0 - share)

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

    def opening_room(self, call_s: float, rounds: int, least_calls: int) -> int:
        """Candidates (besides native) that can get ``rounds`` rounds at ``call_s`` a call.

        Priced with the same slack as every other call; 0 when not even ``least_calls``
        calls fit in what is left of the whole budget.
        """
        price = SLACK * call_s
        if price <= 0:
            return 1 << 30
        if (self.budget_s - self.probe.elapsed()) / price < least_calls:
            return 0
        return max(0, self._judgeable(price, rounds))

    def affordable_pairs(self, cap: int) -> int:
        """Confirmation pairs the rest of the budget pays for, at most ``cap``."""
        per_call = self.per_call()
        left = self.budget_s - self.probe.elapsed()
        by_time = math.inf if per_call <= 0 else left / (2.0 * per_call)
        return int(max(0.0, min(cap, by_time)))
