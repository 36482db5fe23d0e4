"""The decision cache: formats, corruption, and concurrent processes."""

from __future__ import annotations

import json
import logging
import multiprocessing
import os
from pathlib import Path
from typing import Any

import pytest

from chunktune import CacheEntry, DecisionCache
from chunktune._cache import SCHEMA


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


@pytest.mark.parametrize("suffix", [".json", ".toml"])
@pytest.mark.parametrize("chunk", [pytest.param(8, id="int"), pytest.param(None, id="native")])
def test_both_formats_round_trip_every_field(
    tmp_path: Path, suffix: str, chunk: int | None
) -> None:
    """An entry written as JSON or TOML reads back equal, native included."""
    path = tmp_path / f"c{suffix}"
    DecisionCache(path).put("k", entry(chunk))
    got = DecisionCache(path).get("k")
    assert got is not None
    want = entry(chunk)
    for field in (
        "chunk_size",
        "native_chunk",
        "reason",
        "samples",
        "raced_out",
        "policy",
        "policy_hash",
        "policy_rule",
        "policy_effort",
        "probe_seconds",
        "partial",
        "created",
        "num_envs",
        "nthread",
        "signature",
        "device",
        "chunktune_version",
        "mujoco_version",
        "host",
        "model_file",
    ):
        assert getattr(got, field) == getattr(want, field), field
    assert got.timings == pytest.approx(want.timings)


def test_writers_of_different_keys_all_survive(tmp_path: Path) -> None:
    """Two cache objects on one file each add a key; both keys remain."""
    path = tmp_path / "c.json"
    a, b = DecisionCache(path), DecisionCache(path)
    a.put("a", entry())
    b.put("b", entry())
    assert set(DecisionCache(path).entries()) == {"a", "b"}


def test_corrupt_file_is_moved_aside_intact(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """An unparsable file is renamed with its bytes intact; the warning names both paths."""
    path = tmp_path / "c.json"
    path.write_bytes(b"{not json")
    cache = DecisionCache(path)
    with caplog.at_level(logging.WARNING, logger="chunktune"):
        assert cache.entries() == {}
    aside = [p for p in tmp_path.iterdir() if p.name.startswith("c.json.corrupt-")]
    assert len(aside) == 1 and aside[0].read_bytes() == b"{not json"
    assert str(path) in caplog.text and str(aside[0]) in caplog.text
    cache.put("k", entry())
    assert DecisionCache(path).get("k") is not None


def test_newer_schema_is_kept_not_overwritten(tmp_path: Path) -> None:
    """A file from a newer chunktune is moved aside before anything is written."""
    path = tmp_path / "c.json"
    doc = json.dumps({"schema": SCHEMA + 1, "entries": {"x": {}}})
    path.write_text(doc)
    DecisionCache(path).put("k", entry())
    aside = [p for p in tmp_path.iterdir() if ".corrupt-" in p.name]
    assert aside and aside[0].read_text() == doc
    assert set(DecisionCache(path).entries()) == {"k"}


@pytest.mark.skipif(os.geteuid() == 0, reason="root ignores directory permissions")
def test_read_only_directory_degrades_to_no_cache(tmp_path: Path) -> None:
    """An unwritable cache directory makes put() return False instead of raising."""
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    try:
        assert DecisionCache(ro / "c.json").put("k", entry()) is False
    finally:
        ro.chmod(0o700)


def test_missing_parent_is_created(tmp_path: Path) -> None:
    """A cache path in a directory that does not exist yet works."""
    path = tmp_path / "a" / "b" / "c.json"
    assert DecisionCache(path).put("k", entry())
    assert DecisionCache(path).get("k") is not None


def test_unwritable_path_degrades(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A cache whose directory is a file logs one warning and keeps working as no cache."""
    blocker = tmp_path / "file"
    blocker.write_text("x")
    cache = DecisionCache(blocker / "c.json")
    with caplog.at_level(logging.WARNING, logger="chunktune"):
        assert cache.put("k", entry()) is False
        assert cache.put("k", entry()) is False
        assert cache.get("k") is None
    assert caplog.text.count("continuing without a cache") == 1


def _writer(path: str, worker: int, count: int) -> None:
    cache = DecisionCache(path)
    for i in range(count):
        cache.put(f"w{worker}-{i}", entry(i + 1))


@pytest.mark.slow
def test_processes_writing_distinct_keys_lose_nothing(tmp_path: Path) -> None:
    """Four processes writing 10 keys each into one file leave all 40 entries."""
    path = str(tmp_path / "c.json")
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_writer, args=(path, w, 10)) for w in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    assert len(DecisionCache(path).entries()) == 40


LEGACY = {
    "0123abcd": {
        "chunk_size": 8,
        "per_candidate_ms": {"None": 10.5, "4": 9.0, "8": 8.9},
        "model_file": "robot.xml",
        "hostname": "old-box",
    },
    "4567ef01": {"chunk_size": None, "per_candidate_ms": {"None": 3.0}},
}


def test_older_tuner_file_is_migrated_with_a_backup(tmp_path: Path) -> None:
    """A schema-0 (older tuner) file reads as legacy- entries; the first write keeps a backup."""
    path = tmp_path / "c.json"
    original = json.dumps(LEGACY).encode()
    path.write_bytes(original)
    cache = DecisionCache(path)
    entries = cache.entries()
    assert set(entries) == {"legacy-0123abcd", "legacy-4567ef01"}
    assert entries["legacy-0123abcd"].timings[None] == pytest.approx(0.0105)
    assert entries["legacy-4567ef01"].chunk_size is None
    cache.put("new", entry())
    assert set(DecisionCache(path).entries()) == {"legacy-0123abcd", "legacy-4567ef01", "new"}
    assert (tmp_path / "c.json.schema0").read_bytes() == original


def test_merge_keeps_the_newer_entry(tmp_path: Path) -> None:
    """merge adds new keys, replaces older entries, keeps newer local ones and skips equal ones."""
    import attrs

    cache = DecisionCache(tmp_path / "c.toml")
    old, new = entry(created=1.0), entry(created=2.0)
    cache.update({"a": old, "b": new, "c": old})
    report = cache.merge({"a": new, "b": old, "c": old, "d": new})
    assert (report.added, report.replaced, report.kept, report.same) == (
        ("d",),
        ("a",),
        ("b",),
        ("c",),
    )
    got = DecisionCache(tmp_path / "c.toml").entries()
    assert got["a"].created == 2.0 and got["b"].created == 2.0
    assert attrs.evolve(got["d"], timings={}) == attrs.evolve(new, timings={})


@pytest.mark.parametrize(
    ("content", "message"),
    [
        pytest.param(b"{", "does not parse", id="garbage"),
        pytest.param(b'{"schema": 99, "entries": {}}', "newer", id="newer"),
        pytest.param(b'{"hello": 1}', "neither", id="foreign"),
    ],
)
def test_read_cache_file_rejects_what_it_cannot_import(
    tmp_path: Path, content: bytes, message: str
) -> None:
    """Importing a file that is not a cache says why, as a CacheError."""
    from chunktune import CacheError
    from chunktune._cache import read_cache_file

    path = tmp_path / "x.json"
    path.write_bytes(content)
    with pytest.raises(CacheError, match=message):
        read_cache_file(path)


def test_write_then_read_cache_file_round_trips(tmp_path: Path) -> None:
    """write_cache_file and read_cache_file agree in both formats."""
    from chunktune._cache import read_cache_file, write_cache_file

    for name in ("x.json", "x.toml"):
        write_cache_file(tmp_path / name, {"k": entry()})
        got, bad, kind = read_cache_file(tmp_path / name)
        assert (set(got), bad, kind) == ({"k"}, 0, "chunktune cache")


def _resolve_shared(cache: str, lock: str, log: str) -> None:
    os.environ["CHUNKTUNE_CACHE"] = cache
    os.environ["CHUNKTUNE_SWEEP_LOCK"] = lock
    import chunktune
    from chunktune.sim import SimulatedWorkload, env_costs

    def on_progress(event: chunktune.ProgressEvent) -> None:
        if event.kind == "candidates":
            with open(log, "a") as f:
                f.write("sweep\n")

    w = SimulatedWorkload(env_costs("blocked", 512), nthread=8, name="shared")
    decision = chunktune.resolve_sync(w, policy="quick", on_progress=on_progress)
    with open(log, "a") as f:
        f.write(f"{decision.source} {decision.chunk_size}\n")


@pytest.mark.slow
def test_processes_resolving_one_cold_key_sweep_once(tmp_path: Path) -> None:
    """Four processes resolving the same cold key run one sweep; the rest read its answer."""
    log = tmp_path / "log"
    args = (str(tmp_path / "cache.json"), str(tmp_path / "sweep.lock"), str(log))
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_resolve_shared, args=args) for _ in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    lines = log.read_text().splitlines()
    assert lines.count("sweep") == 1
    results = [line.split() for line in lines if line != "sweep"]
    assert sorted(source for source, _ in results) == ["benchmark", "cache", "cache", "cache"]
    assert len({chunk for _, chunk in results}) == 1
