"""What the command line draws from stored entries: dates, ages and what was measured."""

from __future__ import annotations

import time

import pytest

from chunktune import CacheEntry
from chunktune._cli._render import entry_age, format_created, model_summary, signature_summary


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


@pytest.mark.parametrize(
    ("signature", "model_file", "summary"),
    [
        pytest.param(
            {"kind": "mujoco.rollout", "model_sha": "0123456789abcdef", "states": "demo"},
            "/x/scene.xml",
            "mujoco.rollout scene.xml (demo)",
            id="mujoco-file",
        ),
        pytest.param(
            {"kind": "mujoco.rollout", "model_sha": "0123456789abcdef"},
            None,
            "mujoco.rollout 0123456789ab",
            id="mujoco-hash",
        ),
        pytest.param(
            {"kind": "simulated", "costs_sha": "0123456789abcdef", "dispatch_s": 5e-7},
            None,
            "simulated costs_sha=0123456789a… dispatch_s=5e-07",
            id="kind-first",
        ),
        pytest.param(
            {"a": 1, "b": True, "c": 0.25, "d": "x"}, None, "a=1 b=True c=0.25 …", id="more"
        ),
        pytest.param({}, None, "?", id="empty"),
    ],
)
def test_model_summary_names_the_model_or_the_signature(
    signature: dict[str, object], model_file: str | None, summary: str
) -> None:
    """A known model shows its file or hash; any other workload its first signature items."""
    entry = CacheEntry(
        chunk_size=None, native_chunk=1, reason="", signature=signature, model_file=model_file
    )
    assert model_summary(entry) == summary
    if "model_sha" not in signature:
        assert signature_summary(signature) == summary
