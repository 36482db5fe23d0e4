"""Decisions made from a request: what is worth caching, and what is said of them."""

from __future__ import annotations

import uuid

import attrs
import pytest

from chunktune import Decision, load_settings
from chunktune._request import report, worth_storing


def test_a_decision_that_timed_native_alone_is_not_worth_storing() -> None:
    """Only a decision that timed a candidate is evidence to cache; native's time alone is not."""
    alone = Decision(
        chunk_size=None, native_chunk=12, source="benchmark", reason="r", timings={None: 0.1}
    )
    assert not worth_storing(alone)
    assert worth_storing(attrs.evolve(alone, timings={None: 0.1, 8: 0.09}))


def test_auto_says_a_key_s_cached_decision_on_stderr_once(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Under stderr "auto" a key's first cache hit is written to stderr, its later ones not."""
    settings = load_settings()
    assert settings.log.stderr == "auto"
    hit = Decision(
        chunk_size=8, native_chunk=12, source="cache", reason="cached", key=uuid.uuid4().hex
    )
    for _ in range(3):
        report(hit, settings)
    assert capsys.readouterr().err.count("[chunktune] chunk_size=8") == 1
