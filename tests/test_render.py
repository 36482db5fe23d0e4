"""What the command line draws from stored entries: dates and ages of any finite value."""

from __future__ import annotations

import time

import pytest

from chunktune import CacheEntry
from chunktune._cli._render import entry_age, format_created


@pytest.mark.parametrize(
    "created",
    [
        pytest.param(1e300, id="far-future"),
        pytest.param(-1e300, id="far-past"),
        pytest.param(0.0, id="unknown"),
        pytest.param(float("inf"), id="inf"),
        pytest.param(float("nan"), id="nan"),
        pytest.param(2.0**63, id="beyond-time_t"),
    ],
)
def test_dates_no_clock_can_show_are_unknown(created: float) -> None:
    """A date the platform cannot represent renders as unknown and an age of '?', never raises."""
    assert format_created(created) == "unknown"
    entry = CacheEntry(chunk_size=None, native_chunk=1, reason="", created=created)
    assert entry_age(entry) == "?"


def test_a_real_date_shows_when_and_how_long_ago() -> None:
    """A normal date shows local time and the age; one ahead of the clock says so."""
    now = time.time()
    assert format_created(now - 7200, now).endswith("(2h ago)")
    assert format_created(now + 7200, now).endswith("(in the future)")
