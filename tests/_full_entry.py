"""A stored decision with every field set, shared by the tests of the live cache and of
whole cache files."""

from __future__ import annotations

from typing import Any

from chunktune import CacheEntry


def entry(chunk: int | None = 8, **kw: Any) -> CacheEntry:
    fields: dict[str, Any] = {
        "chunk_size": chunk,
        "native_chunk": 12,
        "reason": "because",
        "timings": {None: 0.0125, 4: 0.0101, 8: 0.0100},
        "samples": {None: 9, 4: 3, 8: 9},
        "raced_out": (4,),
        "policy": "balanced",
        "policy_hash": "abc",
        "policy_rule": "margin=0.03",
        "policy_effort": 208,
        "probe_seconds": 1.5,
        "partial": True,
        "created": 1_700_000_000.0,
        "num_envs": 256,
        "nthread": 2,
        "signature": {"kind": "sim", "nstep": 3, "flag": True, "x": 0.5},
        "device": {"cpu": "test"},
        "chunktune_version": "0.1",
        "mujoco_version": "4.0.0",
        "host": "h",
        "model_file": "m.xml",
    }
    fields.update(kw)
    return CacheEntry(**fields)
