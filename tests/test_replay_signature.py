"""A replay's signature: the hash of its trace's seconds, made once while they stay the same."""

from __future__ import annotations

import hashlib
import types
from typing import Any

import pytest
from test_trace import synthetic

from chunktune import _replay
from chunktune.sim import ReplayWorkload


def reference(samples: dict[int, Any]) -> str:
    """The trace's hash as signature() has always made it (a cache key's part: never changes)."""
    return hashlib.sha256(repr(sorted(samples.items())).encode()).hexdigest()[:16]


def _counted(monkeypatch: pytest.MonkeyPatch) -> list[bytes]:
    """The texts _replay hashes from now on."""
    hashed: list[bytes] = []

    def sha256(data: bytes) -> Any:
        hashed.append(data)
        return hashlib.sha256(data)

    monkeypatch.setattr(_replay, "hashlib", types.SimpleNamespace(sha256=sha256))
    return hashed


def test_a_replays_signature_hashes_its_trace_once_however_often_it_is_asked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Asked four times (a resolve asks once), the trace's text is built and hashed once."""
    replay = ReplayWorkload(synthetic())
    hashed = _counted(monkeypatch)
    signatures = [replay.signature() for _ in range(4)]
    assert len(hashed) == 1
    assert signatures == [{"kind": "replay", "trace_sha": reference(replay.trace.samples)}] * 4


def test_a_replays_signature_follows_its_trace_changed_in_place(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Seconds set anew (a tuple, a list changed later, a size added or removed) hash anew."""
    replay = ReplayWorkload(synthetic())
    samples = replay.trace.samples
    first = replay.signature()
    hashed = _counted(monkeypatch)
    samples[2] = tuple(list(samples[2]))  # the same seconds, another tuple: the same key
    assert replay.signature() == first and len(hashed) == 1
    samples[2] = (1.0, *samples[2][1:])
    changed = replay.signature()
    assert changed != first and changed["trace_sha"] == reference(samples)
    seconds = list(samples[3])
    samples[3] = seconds  # type: ignore[assignment]  # a list: it may change in place
    assert replay.signature()["trace_sha"] == reference(samples)
    seconds[0] = 2.0
    assert replay.signature()["trace_sha"] == reference(samples)
    samples[99] = samples.pop(3)
    assert replay.signature()["trace_sha"] == reference(samples)
    del samples[99]
    assert replay.signature()["trace_sha"] == reference(samples)
    assert replay.signature() != changed
