"""Stored decisions and error lines shared by the tests of ``chunktune cache`` and its verbs."""

from __future__ import annotations

import time
from typing import Any

from chunktune import CacheEntry


def entry(chunk: int | None = 4, *, age_s: float = 60.0, **fields: Any) -> CacheEntry:
    """A small stored decision, created ``age_s`` seconds ago; ``fields`` override any field."""
    values: dict[str, Any] = {
        "chunk_size": chunk,
        "native_chunk": 3,
        "reason": "test",
        "timings": {None: 0.010, 4: 0.009},
        "policy": "balanced",
        "created": time.time() - age_s,
        "num_envs": 64,
        "nthread": 2,
    }
    values.update(fields)
    return CacheEntry(**values)


def one_error(err: str) -> str:
    """The single error line a failing command printed (and no traceback)."""
    assert "Traceback" not in err
    lines = [ln for ln in err.splitlines() if ln.startswith("chunktune: error:")]
    assert len(lines) == 1, err
    return lines[0]
