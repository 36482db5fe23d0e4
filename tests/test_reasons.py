"""The sentences a rounds sweep gives for its choice."""

from __future__ import annotations

import re

from chunktune._confirm import Confirmation
from chunktune._policy import Policy
from chunktune._reasons import confirmed, kept, pct


def test_a_rejection_gives_the_bound_it_was_rejected_on() -> None:
    """A rejected gain's reason shows an upper bound under the margin, not the wider interval."""
    # as measured: rejected at an interim look whose z = 3 interval reaches past the margin
    v = Confirmation("rejected", 16, gain=-0.013, ci=(-0.052, 0.024), sigma=0.04)
    reason = kept(30, 12, v, Policy(margin=0.01))
    bound = re.search(r"at most (-?[\d.]+)% \(95% upper bound\): short of the 1\.0% margin", reason)
    assert bound, reason
    assert float(bound.group(1)) < 1.0
    assert pct(v.ci[1]) not in reason  # 2.4%: above the margin, it would contradict "short of"


def test_an_inconclusive_confirmation_gives_its_interval() -> None:
    """An inconclusive confirmation's reason gives the gain and the test's interval."""
    v = Confirmation("inconclusive", 10, gain=0.025, ci=(-0.075, 0.116), sigma=0.1)
    reason = kept(4, 12, v, Policy())
    assert reason.endswith(
        "10 fresh pairs of calls against native could not confirm a gain: 2.5% (-7.5% to 11.6%)"
    )


def test_a_handed_over_size_is_not_said_to_have_led_the_race() -> None:
    """A size confirmed or not in the race's best's place names that best and why."""
    won = Confirmation("confirmed", 20, gain=0.04, ci=(0.01, 0.07), sigma=0.05)
    lost = Confirmation("inconclusive", 10, gain=0.025, ci=(-0.075, 0.116), sigma=0.1)
    why = "(on more rounds than the race's best, 8, and not clear of it)"
    assert confirmed(16, 12, won, best=8).endswith(f"against native after the race {why}")
    assert kept(16, 12, lost, Policy(), best=8).startswith(f"kept the native chunk 12: 16 {why}")
    # the best itself, or no best given: it led the race
    for best in (16, None):
        assert confirmed(16, 12, won, best=best).endswith("after leading the race")
        assert kept(16, 12, lost, Policy(), best=best).startswith(
            "kept the native chunk 12: the race's best, 16, looked faster"
        )
