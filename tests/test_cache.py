"""The decision cache: formats, corruption, and concurrent processes."""

from __future__ import annotations

import contextlib
import errno
import functools
import json
import logging
import multiprocessing
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import MappingProxyType, ModuleType
from typing import Any

import filelock
import platformdirs
import pytest
from _full_entry import entry
from _holders import changed_at_each_look, holding
from _users import child_env, unprivileged

import chunktune
from chunktune import (
    CacheEntry,
    CacheError,
    DecisionCache,
    InvalidArgumentError,
    _cache_file,
    _cache_lock,
    _cache_quarantine,
    _recent,
)
from chunktune._cache import default_cache_path
from chunktune._cache_format import SCHEMA, UnusableCache, cache_format
from chunktune._cache_lock import write_lock
from chunktune._cache_parse import parse_cache
from chunktune._cache_parsed import Parsed
from chunktune._cache_salvage import salvage
from chunktune._cache_transfer import write_cache_file
from chunktune._settled import Stat
from chunktune._shown import unprinted

DATA = Path(__file__).parent / "data"


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


@pytest.mark.parametrize("suffix", [".json", ".toml"])
def test_what_no_key_or_file_can_hold_is_refused_and_sizes_read_back_in_order(
    tmp_path: Path, suffix: str
) -> None:
    """A NaN or a lone surrogate in an entry is not written (warned); sizes come back sorted."""
    cache = DecisionCache(tmp_path / f"c{suffix}")
    assert not cache.put("nan", entry(signature={"x": float("nan")}))
    assert not cache.put("bytes", entry(host=os.fsdecode(b"h\xe8st")))
    assert cache.put("k", entry(timings={13: 0.01, None: 0.0125, 2: 0.011}))
    assert set(cache.entries()) == {"k"}
    got = DecisionCache(cache.path).get("k")
    assert got is not None and list(got.timings) == [None, 2, 13]


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


def test_files_broken_in_one_second_are_each_moved_aside_intact(tmp_path: Path) -> None:
    """Three broken files moved aside by one process within a second each keep their bytes."""
    # the aside name is stamped to the second: a later move must not replace an earlier one
    path = tmp_path / "c.json"
    cache = DecisionCache(path)
    for i in range(3):
        path.write_bytes(b"{broken %d" % i)
        assert cache.entries() == {}
    aside = sorted(p.read_bytes() for p in tmp_path.iterdir() if ".corrupt-" in p.name)
    assert aside == [b"{broken 0", b"{broken 1", b"{broken 2"]


@pytest.mark.parametrize("suffix", [".json", ".toml"])
def test_a_newer_chunktunes_cache_is_left_as_it_is(tmp_path: Path, suffix: str) -> None:
    """A newer schema's file is neither moved aside nor written: its chunktune keeps its answers."""
    import tomli_w

    path = tmp_path / f"c{suffix}"
    doc = {"schema": SCHEMA + 1, "entries": {"x": {"chunk_size": 8}}}
    raw = tomli_w.dumps(doc).encode() if suffix == ".toml" else json.dumps(doc).encode()
    path.write_bytes(raw)
    cache = DecisionCache(path)
    assert cache.entries() == {} and cache.lookup("x", policy_hash="", rule="", effort=0) is None
    assert cache.put("k", entry()) is False
    with pytest.raises(CacheError, match="newer than this chunktune"):
        cache.entries(strict=True)
    with pytest.raises(CacheError, match="newer than this chunktune"):
        cache.clear()
    assert path.read_bytes() == raw
    assert not [p for p in tmp_path.iterdir() if ".corrupt-" in p.name]


def test_a_newer_chunktunes_cache_still_gets_a_measured_decision(
    isolated: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """resolve over a newer chunktune's cache measures once, warns once, leaves the file alone."""
    import chunktune
    from chunktune.sim import SimulatedWorkload, env_costs

    path = isolated / "cache.json"
    path.write_text(json.dumps({"schema": SCHEMA + 1, "entries": {}}))
    before = path.read_bytes()
    caplog.set_level(logging.WARNING, logger="chunktune")
    sources = []
    for _ in range(2):
        w = SimulatedWorkload(env_costs("blocked", 64), nthread=2, name="newer")
        decision = chunktune.resolve_sync(w, policy="quick")
        sources.append(decision.source)
    assert sources == ["benchmark", "cache"]
    assert decision.reason.startswith("remembered in this process"), decision.reason
    assert path.read_bytes() == before
    assert caplog.text.count("newer than this chunktune") == 1


@pytest.mark.parametrize(
    ("name", "raw"),
    [
        pytest.param(
            "chunktune.toml", b'policy = "off"\n[cache]\npath = "c.json"\n', id="settings"
        ),
        pytest.param("package.json", b'{"name": "x", "version": "1.0"}', id="other-json"),
    ],
)
def test_some_other_programs_file_named_as_the_cache_is_left_as_it_is(
    tmp_path: Path, name: str, raw: bytes
) -> None:
    """A table with none of a cache's keys (a settings file named by mistake) is never moved."""
    path = tmp_path / name
    path.write_bytes(raw)
    cache = DecisionCache(path)
    assert cache.entries() == {} and cache.put("k", entry()) is False
    with pytest.raises(CacheError, match=r"neither a chunktune cache .* leaves it as it is"):
        cache.entries(strict=True)
    with pytest.raises(CacheError, match="leaves it as it is"):
        cache.clear()
    assert path.read_bytes() == raw
    assert [p.name for p in tmp_path.iterdir()] == [name]


@pytest.mark.parametrize(
    ("name", "raw"),
    [
        pytest.param("package.json", b'{"name": "x", "version": "1.0"}', id="other-json"),
        pytest.param("cache.json", None, id="folder"),
    ],
)
def test_the_warning_of_a_cache_left_alone_names_it_once_and_why_without_an_errno(
    isolated: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    name: str,
    raw: bytes | None,
) -> None:
    """A resolve beside another program's file or a folder warns once: the path once, no [Errno]."""
    from chunktune.sim import SimulatedWorkload, env_costs

    path = isolated / name
    path.write_bytes(raw) if raw is not None else path.mkdir()
    monkeypatch.setenv("CHUNKTUNE_CACHE", str(path))
    caplog.set_level(logging.WARNING, logger="chunktune")
    w = SimulatedWorkload(env_costs("blocked", 64), nthread=2, name="alone")
    assert chunktune.resolve_sync(w, policy="quick").source == "benchmark"
    (said,) = [r.getMessage() for r in caplog.records if "is unavailable" in r.getMessage()]
    assert said.startswith(f"chunktune: cache {path} is unavailable (it ")
    assert said.count(str(path)) == 1 and "Errno" not in said


@pytest.mark.parametrize("refresh", [False, True], ids=["lookup", "refresh"])
@pytest.mark.parametrize(
    ("name", "raw"),
    [
        pytest.param("cache.json", b'{"schema": 99, "entries": {}}', id="newer"),
        pytest.param("chunktune.toml", b'policy = "off"\n', id="settings"),
        pytest.param("cache.json", None, id="past-the-cap"),
    ],
)
def test_a_sweep_beside_a_file_it_leaves_alone_makes_no_lock_folder(
    isolated: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    name: str,
    raw: bytes | None,
    refresh: bool,
) -> None:
    """A cache file never written (newer, another program's, too large) gets no locks/ beside it."""
    from chunktune.sim import SimulatedWorkload, env_costs

    folder = isolated / "here"
    folder.mkdir()
    path = folder / name
    if raw is None:
        with path.open("wb") as file:
            file.truncate(257 * 2**20)  # a hole: no disk is used
    else:
        path.write_bytes(raw)
    monkeypatch.setenv("CHUNKTUNE_CACHE", str(path))
    caplog.set_level(logging.WARNING, logger="chunktune")
    w = SimulatedWorkload(env_costs("blocked", 64), nthread=2, name="alone")
    assert chunktune.resolve_sync(w, policy="quick", refresh=refresh).source == "benchmark"
    assert [p.name for p in folder.iterdir()] == [name]
    assert caplog.text.count("is unavailable") == 1


def test_each_cause_that_makes_the_cache_unavailable_is_warned_about_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A second cause of an unusable cache is said too; a cause said before is not said again."""
    parent = tmp_path / "x"
    cache = DecisionCache(parent / "cache.json")
    caplog.set_level(logging.WARNING, logger="chunktune")
    parent.write_text("")  # a file where the cache's folder should be
    for _ in range(2):
        assert cache.entries() == {} and not cache.put("k", entry())
    parent.unlink()
    (parent / "cache.json").mkdir(parents=True)  # then a folder where the file should be
    for _ in range(2):
        assert cache.entries() == {} and not cache.put("k", entry())
    shutil.rmtree(parent)
    parent.write_text("")  # the first cause again
    assert cache.entries() == {}
    said = [r.getMessage() for r in caplog.records if "is unavailable" in r.getMessage()]
    assert len(said) == 2 and said[0] != said[1]
    assert all(s.count(str(parent / "cache.json")) == 1 for s in said)


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


LEGACY: dict[str, dict[str, Any]] = {  # an older tuner's JSON document
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


def test_an_older_file_migrated_again_keeps_the_first_backup(tmp_path: Path) -> None:
    """The older tuner writing its file over a migrated cache again keeps the first backup."""
    path = tmp_path / "c.json"
    original = json.dumps(LEGACY).encode()
    path.write_bytes(original)
    DecisionCache(path).put("new", entry())
    path.write_bytes(json.dumps({"89abcdef": LEGACY["0123abcd"]}).encode())  # written again
    DecisionCache(path).put("newer", entry())
    assert set(DecisionCache(path).entries()) == {"legacy-89abcdef", "newer"}
    assert (tmp_path / "c.json.schema0").read_bytes() == original


def _older_tuner_stores(path: Path, key: str, value: dict[str, Any]) -> None:
    """Store as the older tuner does: load the whole document, set one top-level key, dump."""
    doc = json.loads(path.read_text())
    doc[key] = value
    path.write_text(json.dumps(doc, indent=2, sort_keys=True))


def test_an_older_tuner_still_writing_to_a_migrated_cache_loses_no_entry(tmp_path: Path) -> None:
    """An older tuner's entry written beside a migrated cache's entries is read and kept."""
    path = tmp_path / "c.json"
    path.write_text(json.dumps(LEGACY))
    DecisionCache(path).put("new", entry())  # migrated: a chunktune document now
    _older_tuner_stores(path, "89abcdef", LEGACY["0123abcd"])
    assert DecisionCache(path).entries()["legacy-89abcdef"].chunk_size == 8
    DecisionCache(path).put("newer", entry())
    entries = DecisionCache(path).entries()
    assert set(entries) == {"legacy-0123abcd", "legacy-4567ef01", "legacy-89abcdef", "new", "newer"}
    assert "89abcdef" not in json.loads(path.read_text())  # now among the entries, checksummed
    assert not any(k for k, _ in parse_cache(path.read_bytes(), "json", mtime=0, source="").skipped)


def test_a_migrated_cache_removed_with_its_backup_gets_no_backup_again(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Cache and backup deleted after a migration: the next write backs nothing up again."""
    path = tmp_path / "c.json"
    path.write_bytes(json.dumps(LEGACY).encode())
    cache = DecisionCache(path)
    cache.put("new", entry())
    backup = tmp_path / "c.json.schema0"
    assert backup.exists()
    path.unlink()
    backup.unlink()
    caplog.clear()
    cache.put("newer", entry())  # the same object: no file to read, so nothing was re-parsed
    assert not backup.exists() and "migrated" not in caplog.text
    assert set(DecisionCache(path).entries()) == {"newer"}


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


def _resolve_shared(cache: str, lock: str, log: str) -> None:
    os.environ["CHUNKTUNE_CACHE"] = cache
    os.environ["CHUNKTUNE_SWEEP_LOCK"] = lock
    import chunktune
    from chunktune.sim import SimulatedWorkload, env_costs

    def on_progress(event: chunktune.ProgressEvent) -> None:
        if event.kind == "done":  # one per sweep, however its field opened
            with open(log, "a") as f:
                f.write("sweep\n")

    w = SimulatedWorkload(env_costs("blocked", 512), nthread=8, name="shared")
    decision = chunktune.resolve_sync(w, policy="quick", on_progress=on_progress)
    with open(log, "a") as f:
        f.write(f"{decision.source} {decision.chunk_size}\n")


@pytest.mark.slow
def test_processes_resolving_one_cold_key_sweep_once(tmp_path: Path) -> None:
    """Four processes resolving the same cold key run one sweep; the rest read its answer."""
    # each lets go of the key's lock file by removing it: none is left behind
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
    assert not list((tmp_path / "locks").glob("*"))


# ---------------------------------------------------------------- hostile files


def _write_doc(path: Path, entries: dict[str, Any]) -> None:
    path.write_text(json.dumps({"schema": SCHEMA, "entries": entries}))


def _table(chunk: Any = 8, **fields: Any) -> dict[str, Any]:
    from chunktune._cache_entry import entry_to_table

    return {**entry_to_table(entry()), "chunk_size": chunk, **fields}


@pytest.mark.parametrize(
    ("bad", "field"),
    [
        pytest.param(_table(-5), "chunk_size", id="negative"),
        pytest.param(_table(0), "chunk_size", id="zero"),
        pytest.param(_table(2.7), "chunk_size", id="float"),
        pytest.param(_table("5"), "chunk_size", id="string"),
        pytest.param(_table(10**9), "chunk_size", id="huge"),
        pytest.param(_table(True), "chunk_size", id="bool"),
        pytest.param(_table(8, created=float("inf")), "created", id="created-inf"),
        pytest.param(_table(8, timings_ms={"native": -1}), "timings_ms", id="timing"),
    ],
)
def test_a_bad_entry_is_never_served_and_the_next_write_drops_it(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, bad: dict[str, Any], field: str
) -> None:
    """A bad entry is skipped with a warning naming key and field; the good ones survive a write."""
    path = tmp_path / "c.json"
    from chunktune._cache_entry import entry_to_table

    _write_doc(path, {"good": entry_to_table(entry()), "bad": bad})
    cache = DecisionCache(path)
    with caplog.at_level(logging.WARNING, logger="chunktune"):
        assert cache.get("bad") is None
        assert set(cache.entries()) == {"good"}
    assert "'bad'" in caplog.text and f"{field}:" in caplog.text
    assert cache.put("new", entry())
    assert set(json.loads(path.read_text())["entries"]) == {"good", "new"}
    assert not [p for p in tmp_path.iterdir() if ".corrupt-" in p.name]


@pytest.mark.parametrize(
    "content",
    [
        pytest.param('{"schema": 1, "entries": "x"}', id="entries-string"),
        pytest.param('{"schema": 1, "entries": null}', id="entries-null"),
        pytest.param('{"schema": 1, "entries": [1, 2]}', id="entries-list"),
        pytest.param("[1, 2]", id="top-list"),
        pytest.param("[" * 5000 + "]" * 5000, id="deep"),
        pytest.param('{"schema": "one"}', id="schema-string"),
    ],
)
def test_a_cache_of_the_wrong_shape_is_moved_aside_intact(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, content: str
) -> None:
    """A wrong shape is treated like a parse error: moved aside, bytes intact, warned, fresh."""
    path = tmp_path / "c.json"
    path.write_text(content)
    cache = DecisionCache(path)
    with caplog.at_level(logging.WARNING, logger="chunktune"):
        assert cache.entries() == {}
    (aside,) = [p for p in tmp_path.iterdir() if p.name.startswith("c.json.corrupt-")]
    assert aside.read_text() == content
    assert str(path) in caplog.text and str(aside) in caplog.text
    assert cache.put("k", entry()) and set(DecisionCache(path).entries()) == {"k"}


def test_an_entry_nested_thousands_deep_moves_the_file_aside_on_every_python(
    tmp_path: Path,
) -> None:
    """An entry nested 5000 deep (which 3.13's json reads) moves the file aside, whole ones kept."""
    path = tmp_path / "c.json"
    assert DecisionCache(path).put("good", entry())
    doc = json.loads(path.read_text())
    doc["entries"]["deep"] = "@"
    raw = json.dumps(doc, indent=1, sort_keys=True).replace('"@"', "[" * 5000 + "]" * 5000)
    path.write_text(raw)
    assert set(DecisionCache(path).entries()) == {"good"}
    (aside,) = [p for p in tmp_path.iterdir() if p.name.startswith("c.json.corrupt-")]
    assert aside.read_text() == raw


def test_a_wrong_shape_does_not_make_resolve_fall_back(isolated: Path) -> None:
    """resolve over a cache of the wrong shape moves it aside and measures (no fallback)."""
    import chunktune
    from chunktune.sim import SimulatedWorkload, env_costs

    (isolated / "cache.json").write_text('{"schema": 1, "entries": null}')
    w = SimulatedWorkload(env_costs("blocked", 64), nthread=2, name="shape")
    assert chunktune.resolve_sync(w, policy="quick").source == "benchmark"
    assert chunktune.resolve_sync(w, policy="quick").source == "cache"


def test_a_bad_stored_chunk_size_is_never_returned(isolated: Path) -> None:
    """A stored entry whose chunk_size was damaged to -5 is skipped; resolve measures again."""
    import chunktune
    from chunktune.sim import SimulatedWorkload, env_costs

    w = SimulatedWorkload(env_costs("blocked", 64), nthread=2, name="damaged")
    first = chunktune.resolve_sync(w, policy="quick")
    path = isolated / "cache.json"
    doc = json.loads(path.read_text())
    doc["entries"][first.key]["chunk_size"] = -5
    path.write_text(json.dumps(doc))
    again = chunktune.resolve_sync(w, policy="quick")
    assert again.source == "benchmark" and again.chunk_size != -5


@pytest.mark.parametrize("suffix", [".json", ".toml"])
def test_a_hand_edited_entry_is_not_served_and_the_warning_says_so(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, suffix: str
) -> None:
    """An entry edited by hand (still valid) is not served; the warning names it, the rest stay."""
    path = tmp_path / f"c{suffix}"
    DecisionCache(path).update({"edited": entry(8), "other": entry(4)})
    text = path.read_text()
    field = '"chunk_size": 8' if suffix == ".json" else "chunk_size = 8"
    assert text.count(field) == 1
    edited = text.replace(field, field.replace("8", "2"))
    path.write_text(edited)
    with caplog.at_level(logging.WARNING, logger="chunktune"):
        assert DecisionCache(path).get("edited") is None
    assert "'edited'" in caplog.text and "edited or damaged" in caplog.text
    assert "never served" in caplog.text and "manual=" in caplog.text
    (aside,) = [p for p in tmp_path.iterdir() if ".corrupt-" in p.name]
    assert str(aside) in caplog.text and aside.read_text() == edited
    assert DecisionCache(path).entries() == {"other": entry(4)}


def test_a_hand_edited_chunk_size_is_never_returned(isolated: Path) -> None:
    """A stored chunk_size edited to another valid size is not served; resolve measures again."""
    import chunktune
    from chunktune.sim import SimulatedWorkload, env_costs

    w = SimulatedWorkload(env_costs("blocked", 64), nthread=2, name="edited")
    first = chunktune.resolve_sync(w, policy="quick")
    path = isolated / "cache.json"
    doc = json.loads(path.read_text())
    edited = 3 if first.chunk_size != 3 else 5
    doc["entries"][first.key]["chunk_size"] = edited
    path.write_text(json.dumps(doc))
    again = chunktune.resolve_sync(w, policy="quick")
    assert again.source == "benchmark"


@pytest.mark.parametrize("suffix", [".json", ".toml"])
def test_a_file_written_before_checksums_is_served_whole_and_upgraded_by_the_next_write(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, suffix: str
) -> None:
    """A file without checksums serves every entry, unwarned; the next write adds them."""
    import shutil

    from chunktune._cache_transfer import read_cache_file

    path = tmp_path / f"c{suffix}"
    shutil.copy(DATA / f"cache_v1{suffix}", path)
    with caplog.at_level(logging.WARNING, logger="chunktune"):
        before = DecisionCache(path).entries()
    assert len(before) == 3 and not caplog.text
    assert DecisionCache(path).put("new", entry())
    raw = path.read_bytes()
    assert raw.count(b"checksum") == 1 + 4  # the declaration, and one per entry
    assert read_cache_file(path).entries == {**before, "new": entry()}
    assert not [p for p in tmp_path.iterdir() if ".corrupt-" in p.name]


BEFORE_CHECKSUMS = "f648ed0d81880b45d3d5988802d4b635ba920880"  # main, the last without them


@pytest.mark.parametrize("suffix", [".json", ".toml"])
def test_the_chunktune_before_checksums_serves_a_checksummed_file(
    tmp_path: Path, suffix: str
) -> None:
    """chunktune before checksums serves a file written now whole; its write is read whole here."""
    import io
    import zipfile

    from chunktune._cache_transfer import read_cache_file

    root = Path(__file__).parent.parent
    try:
        archive = subprocess.run(
            ["git", "-C", str(root), "archive", "--format=zip", BEFORE_CHECKSUMS, "chunktune"],
            capture_output=True,
            check=True,
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip(f"needs git and commit {BEFORE_CHECKSUMS[:7]} of this repository")
    with zipfile.ZipFile(io.BytesIO(archive)) as files:
        files.extractall(tmp_path / "old")
    path = tmp_path / f"c{suffix}"
    written = {"a": entry(8), "b": entry(None), "c": entry(4, reason="\u00e9t\u00e9")}
    DecisionCache(path).update(written)
    script = (
        "import json, sys, chunktune\n"
        "from chunktune import CacheEntry, DecisionCache\n"
        "assert chunktune.__file__.startswith(sys.argv[2]), chunktune.__file__\n"
        "cache = DecisionCache(sys.argv[1])\n"
        "print(json.dumps({k: e.chunk_size for k, e in cache.entries().items()}))\n"
        "assert cache.put('old', CacheEntry(chunk_size=2, native_chunk=1, reason='old'))\n"
    )
    old = subprocess.run(
        [sys.executable, "-c", script, str(path), str(tmp_path / "old")],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(tmp_path / "old")},
        cwd=tmp_path,
        check=True,
    )
    assert json.loads(old.stdout) == {"a": 8, "b": None, "c": 4} and not old.stderr
    assert b"checksum" not in path.read_bytes()  # the older one's write
    assert set(read_cache_file(path).entries) == {"a", "b", "c", "old"}
    assert DecisionCache(path).put("new", entry())
    parsed = read_cache_file(path)
    assert parsed.altered == () and {k: parsed.entries[k] for k in written} == written
    assert not [p for p in tmp_path.iterdir() if ".corrupt-" in p.name]


def test_an_invalid_entry_is_refused_on_write(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """put() of an entry that would not read back valid warns, returns False and writes nothing."""
    import numpy as np

    cache = DecisionCache(tmp_path / "c.json")
    assert cache.put("good", entry())
    with caplog.at_level(logging.WARNING, logger="chunktune"):
        assert not cache.put("neg", entry(-5))
        assert not cache.put("np", entry(signature={"n": np.int64(5)}))
    assert "neg" in caplog.text and "np" in caplog.text
    assert set(DecisionCache(tmp_path / "c.json").entries()) == {"good"}


def test_an_update_with_a_refused_entry_stores_the_others_and_returns_false(tmp_path: Path) -> None:
    """update() writes the valid entries of a batch but returns False when it refused one."""
    cache = DecisionCache(tmp_path / "c.json")
    assert not cache.update({"good": entry(), "neg": entry(-5)})
    assert set(DecisionCache(tmp_path / "c.json").entries()) == {"good"}


@pytest.mark.parametrize(
    ("path", "message"),
    [
        pytest.param("~nosuchuser-chunktune/c.json", "no such home", id="unknown-user"),
        pytest.param("a\0b.json", "NUL", id="nul"),
        pytest.param("", "not a path", id="empty"),
    ],
)
def test_an_impossible_path_is_a_cache_error(path: str, message: str) -> None:
    """A path no file can have is a CacheError naming it, not a traceback later."""
    from chunktune import CacheError

    with pytest.raises(CacheError, match=message):
        DecisionCache(path)


def test_a_strict_read_of_an_unreadable_cache_raises(tmp_path: Path) -> None:
    """entries(strict=True) says why a cache cannot be read; the lenient read is empty."""
    from chunktune import CacheError

    (tmp_path / "c.json").mkdir()
    cache = DecisionCache(tmp_path / "c.json")
    assert cache.entries() == {}
    with pytest.raises(CacheError, match="cannot read the cache"):
        cache.entries(strict=True)


def test_a_strict_read_names_the_cache_and_says_why_in_words(tmp_path: Path) -> None:
    """A strict read of a folder names the cache and the reason, without an errno or path again."""
    path = tmp_path / "c.json"
    path.mkdir()
    with pytest.raises(CacheError) as raised:
        DecisionCache(path).entries(strict=True)
    assert str(raised.value) == (
        f"cannot read the cache {path}: it is no regular file (a directory, device, FIFO or socket)"
    )


# ---------------------------------------------------------------- debris


def test_stale_temporary_files_are_removed_on_write(tmp_path: Path) -> None:
    """A write deletes dead writers' temporaries (the backup's too) older than STALE_TEMP_S only."""
    from chunktune._atomic import STALE_TEMP_S

    # the migration's backup (c.json.schema0) is written the same way, so a writer
    # killed while writing it leaves a temporary of its own

    path = tmp_path / "c.json"
    old = time.time() - STALE_TEMP_S - 60
    stale = [tmp_path / ".c.json.ab12cd_9.tmp", tmp_path / ".c.json.schema0.ab12cd34.tmp"]
    fresh = tmp_path / ".c.json.zz99yy88.tmp"
    others = [tmp_path / ".other.json.ab12cd34.tmp", tmp_path / ".c.json.bak.ab12cd34.tmp"]
    for file in (*stale, fresh, *others):
        file.write_text("half a write")
    for file in (*stale, *others):
        os.utime(file, (old, old))
    assert DecisionCache(path).put("k", entry())
    assert not any(file.exists() for file in stale)
    assert fresh.exists() and all(file.exists() for file in others)


# A writer of the cache at argv[1], mid-write: it holds the write lock and its temporary
# file, made as write_atomic makes it, is an hour old by the file's time (the wall clock
# stepped forward an hour since it began). It prints that file's path, then holds on
# until its stdin closes, then lets go of both, as a write that failed would.
_MID_WRITE = """
import os, sys, tempfile, time
from pathlib import Path
from chunktune._cache_file import CacheFile
from chunktune._cache_lock import write_lock
path = Path(sys.argv[1])
with write_lock(CacheFile(path, "json")):
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.write(fd, b'{"half a wr')
    an_hour_ago = time.time() - 3600
    os.utime(tmp, (an_hour_ago, an_hour_ago))
    print(tmp, flush=True)
    sys.stdin.read()
    os.close(fd)
    os.unlink(tmp)
"""


def _mid_write(path: Path) -> tuple[subprocess.Popen[str], Path]:
    """A writer of the cache ``path`` in another process, mid-write (:data:`_MID_WRITE`), and
    the path of its temporary file."""
    writer = subprocess.Popen(
        [sys.executable, "-c", _MID_WRITE, str(path)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert writer.stdout is not None
    tmp = Path(writer.stdout.readline().strip())
    assert tmp.name.startswith(f".{path.name}.") and tmp.exists()
    return writer, tmp


def test_clear_keeps_a_live_writer_s_temporary_however_old_its_time_says_it_is(
    tmp_path: Path,
) -> None:
    """`clear` spares the temporary of a writer mid-write (an hour old by a stepped clock)."""
    # it once deleted it, outside the write lock, for its age alone; the writer's own write
    # then failed. Once that writer is gone (killed mid-write), its file goes.
    cache = DecisionCache(tmp_path / "c.json")
    writer, tmp = _mid_write(cache.path)
    try:
        assert cache.clear() == 0
        assert tmp.exists()
    finally:
        writer.kill()
        writer.communicate(timeout=60)  # a hang guard
    assert cache.clear() == 0
    assert not tmp.exists()


@pytest.mark.parametrize(
    "call",
    [
        pytest.param(lambda cache: cache.clear(), id="clear"),
        pytest.param(lambda cache: cache.remove(["k"]), id="clear-KEY"),
        pytest.param(lambda cache: cache.remove(["gone"]), id="clear-KEY-already-gone"),
    ],
)
def test_a_writer_that_takes_the_lock_as_clear_lets_go_keeps_its_temporary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, call: Callable[[DecisionCache], object]
) -> None:
    """A writer mid-write just after `clear` let go of the write lock keeps its temporary."""
    from chunktune import _cache

    cache = DecisionCache(tmp_path / "c.json")
    assert cache.put("k", entry())
    writers: list[tuple[subprocess.Popen[str], Path]] = []
    real = write_lock

    @contextlib.contextmanager
    def then_another_writer(*args: Any, **kwargs: Any) -> Iterator[None]:
        with real(*args, **kwargs):
            yield
        if not writers:  # another process takes the lock at once, and writes
            writers.append(_mid_write(cache.path))

    monkeypatch.setattr(_cache, "write_lock", then_another_writer)
    try:
        call(cache)
        assert len(writers) == 1
        assert writers[0][1].exists()
    finally:
        for writer, _ in writers:
            writer.communicate("", timeout=60)  # it finishes; a hang guard
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []


_HOLD = """
import sys, time, filelock
lock = filelock.FileLock(sys.argv[1], thread_local=False)
lock.acquire()
print("held", flush=True)
time.sleep(60)
"""


def test_clear_removes_idle_key_locks_but_not_held_ones(tmp_path: Path) -> None:
    """`clear` deletes lock files no process holds and killed holders' notes; held ones stay."""
    import subprocess
    import sys

    cache = DecisionCache(tmp_path / "c.json")
    cache.put("k", entry())
    locks = tmp_path / "locks"
    locks.mkdir()
    idle, held = locks / "idle.lock", locks / "held.lock"
    idle.touch()
    dead_note = locks / "idle.lock.holder"  # its holder was killed while holding it
    dead_note.write_text('{"pid": 1, "since": 0}')
    held_note = locks / "held.lock.holder"
    cmd = [sys.executable, "-c", _HOLD, str(held)]
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True) as holder:
        try:
            assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
            held_note.write_text('{"pid": 2, "since": 0}')
            assert cache.clear() == 1
            assert not idle.exists() and held.exists()
            assert not dead_note.exists() and held_note.exists()
        finally:
            holder.kill()
    cache.clear()
    assert not held.exists()


def test_clear_removes_this_hosts_idle_sweep_lock_files_but_not_a_held_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`clear` deletes the sweep-lock files this host's killed sweepers left; held ones stay."""
    monkeypatch.delenv("CHUNKTUNE_SWEEP_LOCK")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    root = tmp_path / "xdg"
    root.mkdir()
    here = socket.gethostname()
    old_boot, held = root / "chunktune-sweep-0123456789ab.lock", root / "chunktune-sweep-b2.lock"
    elsewhere = root / "chunktune-sweep-n2.lock"  # another node's, on a shared home
    for file, host in ((old_boot, here), (held, here), (elsewhere, "node2")):
        file.touch()
        note = {"pid": 1, "since": 0, "host": host}
        file.with_name(file.name + ".holder").write_text(json.dumps(note))
    unrelated = root / "other-tool.lock"
    unrelated.touch()
    cache = DecisionCache(tmp_path / "c.json")
    with holding(held):  # a sweep running on this host
        cache.clear()
    left = sorted(p.name for p in root.iterdir() if not p.name.endswith(".holder"))
    assert left == [held.name, elsewhere.name, unrelated.name]
    cache.clear()
    left = sorted(p.name for p in root.iterdir() if not p.name.endswith(".holder"))
    assert left == [elsewhere.name, unrelated.name]  # only node2 may tell whether it is idle


def test_clear_never_removes_a_lock_file_put_in_place_while_it_looked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`clear` unlinks only the idle lock file it locked, never one put at that path meanwhile."""
    # (by another `clear` and a holder)
    import filelock

    cache = DecisionCache(tmp_path / "c.json")
    locks = tmp_path / "locks"
    locks.mkdir()
    path = locks / "k.lock"
    path.touch()

    class Swapped(filelock.FileLock):
        def acquire(self, *args: Any, **kwargs: Any) -> Any:
            got = super().acquire(*args, **kwargs)
            fresh = locks / "fresh"
            fresh.touch()
            os.replace(fresh, path)  # another clear removed it; a resolver made it anew
            return got

    monkeypatch.setattr("chunktune._cache_lock.filelock.FileLock", Swapped)
    cache.clear()
    assert path.exists()


def test_default_cache_path_is_in_the_user_cache_dir() -> None:
    """Without settings, the cache lives in platformdirs' user cache dir, under chunktune/."""
    path = default_cache_path()
    assert path.parent == platformdirs.user_cache_path("chunktune", appauthor=False)
    assert path.name == "cache.json"


@pytest.mark.parametrize("path", [3, None, b"c.json"])
def test_a_cache_path_that_is_no_path_is_a_cache_error(path: object) -> None:
    """DecisionCache(3), a bytes name and the like: CacheError naming the value, no TypeError."""
    with pytest.raises(CacheError, match=r"is not a str or os\.PathLike"):
        DecisionCache(path)  # type: ignore[arg-type]


@pytest.fixture
def stalling(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> DecisionCache:
    """A cache holding one entry (key ``"a" * 32``) whose writes give up after a 0.2 s stall."""
    from chunktune import _cache_lock

    monkeypatch.setattr(_cache_lock, "WRITE_STALL_S", 0.2)
    cache = DecisionCache(tmp_path / "cache.json")
    assert cache.update({"a" * 32: entry(4)})
    return cache


def test_a_writer_stuck_holding_the_write_lock_is_waited_for_a_bounded_time(
    tmp_path: Path, stalling: DecisionCache, caplog: pytest.LogCaptureFixture
) -> None:
    """Another process holding the write lock, changing nothing: update gives up with a warning."""
    cache = stalling
    with holding(cache.lock_path), caplog.at_level(logging.WARNING, logger="chunktune"):
        assert not cache.update({"b" * 32: entry(8)})
    assert "held by another process" in caplog.text
    # no lasting state: it says the next write tries again, not that the cache is gone
    assert "not written this time; later writes try again" in caplog.text
    assert "continuing without a cache" not in caplog.text
    assert set(DecisionCache(tmp_path / "cache.json").entries()) == {"a" * 32}
    assert cache.update({"b" * 32: entry(8)})  # free again: written
    assert set(DecisionCache(tmp_path / "cache.json").entries()) == {"a" * 32, "b" * 32}


def _lock_by_hand(path: Path) -> int:
    """Open and flock ``path`` as another writer would; returns the descriptor to close."""
    import fcntl

    fd = os.open(path, os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    return fd


def _the_file_at_the_path_is_the_one_locked(path: Path, fds: list[int]) -> bool:
    """Whether ``path`` is there and is the file the one descriptor of ``fds`` locks (closed)."""
    (fd,) = fds
    try:
        return path.exists() and os.path.samestat(os.fstat(fd), os.stat(path))
    finally:
        os.close(fd)


def test_a_write_removes_its_lock_file_as_it_lets_go(tmp_path: Path) -> None:
    """Writes and merges leave no cache.json.lock: its holder removes it, as a key lock's."""
    cache = DecisionCache(tmp_path / "cache.json")
    assert cache.update({"a" * 32: entry(4)})
    cache.merge({"b" * 32: entry(8)})
    assert cache.clear() == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cache.json"]


def test_a_writer_that_locked_a_removed_lock_file_locks_the_one_in_its_place(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A lock file removed after the writer opened it excludes nobody: it locks a fresh one."""
    import fcntl

    cache = DecisionCache(tmp_path / "cache.json")
    lock_path = cache.lock_path

    class RemovedMeanwhile(filelock.FileLock):
        removed = False

        def acquire(self, *args: Any, **kwargs: Any) -> Any:
            got = super().acquire(*args, **kwargs)
            if not RemovedMeanwhile.removed:  # the writer ahead let go of it by removing it
                RemovedMeanwhile.removed = True
                lock_path.unlink()
            return got

    excluded: list[bool] = []
    current = DecisionCache._current

    def looking(self: DecisionCache) -> dict[str, CacheEntry]:
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT)  # as another writer would, now
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            excluded.append(False)
        except BlockingIOError:
            excluded.append(True)
        finally:
            os.close(fd)
        return current(self)

    monkeypatch.setattr("chunktune._cache_lock.filelock.FileLock", RemovedMeanwhile)
    monkeypatch.setattr(DecisionCache, "_current", looking)
    assert cache.update({"a" * 32: entry(4)})
    assert RemovedMeanwhile.removed and excluded == [True]
    assert not lock_path.exists()


def test_the_next_writer_keeps_the_lock_file_it_takes_as_one_lets_go(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The holder removes its lock file before letting go, never the file the next one took."""
    cache = DecisionCache(tmp_path / "cache.json")
    lock_path = cache.lock_path
    taken: list[int] = []

    class NextWriterAtOnce(filelock.FileLock):
        def release(self, *args: Any, **kwargs: Any) -> None:
            super().release(*args, **kwargs)
            if Path(self.lock_file) == lock_path and not taken:  # opens the path, locks it
                taken.append(_lock_by_hand(lock_path))

    monkeypatch.setattr("chunktune._cache_lock.filelock.FileLock", NextWriterAtOnce)
    assert cache.update({"a" * 32: entry(4)})
    assert _the_file_at_the_path_is_the_one_locked(lock_path, taken)


def test_a_writer_whose_lock_file_was_replaced_leaves_the_new_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A write lock file removed under its holder and made anew by another stays for that one."""
    cache = DecisionCache(tmp_path / "cache.json")
    lock_path = cache.lock_path
    other: list[int] = []
    current = DecisionCache._current

    def replaced(self: DecisionCache) -> dict[str, CacheEntry]:
        if not other:  # removed by hand mid-write; another writer makes and locks a fresh one
            lock_path.unlink()
            other.append(_lock_by_hand(lock_path))
        return current(self)

    monkeypatch.setattr(DecisionCache, "_current", replaced)
    assert cache.update({"a" * 32: entry(4)})
    assert _the_file_at_the_path_is_the_one_locked(lock_path, other)


def test_a_write_lock_file_removed_at_every_try_is_given_up_as_a_stall(
    tmp_path: Path, stalling: DecisionCache, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A write lock file removed under the writer at each try: update gives up, entries kept."""
    # a `cache clear` in a loop, or a flapping file: the stall limit bounds it too, so a
    # sweep's store (a thread the process's exit waits for) cannot loop for good
    cache, lock_path, flapping = stalling, stalling.lock_path, threading.Event()
    flapping.set()

    class Flapping(filelock.FileLock):
        def acquire(self, *args: Any, **kwargs: Any) -> Any:
            got = super().acquire(*args, **kwargs)
            if flapping.is_set() and Path(self.lock_file) == lock_path:
                lock_path.unlink()  # removed after this writer opened it
            return got

    monkeypatch.setattr("chunktune._cache_lock.filelock.FileLock", Flapping)
    stored: list[bool] = []
    writer = threading.Thread(target=lambda: stored.append(cache.update({"b" * 32: entry(8)})))
    writer.start()
    writer.join(60)  # a hang guard, not a timing
    flapping.clear()  # lets a writer that looped for good end
    writer.join(60)
    assert stored == [False]
    assert set(DecisionCache(tmp_path / "cache.json").entries()) == {"a" * 32}


def test_a_write_lock_file_that_cannot_be_removed_is_left_and_let_go(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where its holder cannot remove the lock file (Windows: an open file), the write stands."""
    cache = DecisionCache(tmp_path / "cache.json")
    lock_path = cache.lock_path
    unlink = Path.unlink

    def kept_open(self: Path, missing_ok: bool = False) -> None:
        if self == lock_path:
            raise PermissionError(errno.EACCES, "Permission denied", str(self))
        unlink(self, missing_ok=missing_ok)

    monkeypatch.setattr(Path, "unlink", kept_open)
    assert cache.update({"a" * 32: entry(4)})
    assert set(DecisionCache(tmp_path / "cache.json").entries()) == {"a" * 32}
    assert lock_path.exists()
    after = filelock.FileLock(lock_path, thread_local=False)
    after.acquire(timeout=0)  # let go: another writer takes it at once
    after.release()


def test_a_write_waits_on_while_the_writers_ahead_keep_changing_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A holder that rewrites the cache as it goes is waited for, past the stall limit."""
    from chunktune import _cache_lock

    monkeypatch.setattr(_cache_lock, "WRITE_STALL_S", 1.0)
    cache = DecisionCache(tmp_path / "cache.json")
    assert cache.update({"a" * 32: entry(4)})
    # another process holds the lock for twice the stall limit, while the file changes at
    # each of this writer's looks (a holder that changed it on its own clock could get no
    # CPU for a whole stall limit on a loaded machine: CI's flake)
    with holding(cache.lock_path) as holder:

        def let_go() -> None:
            holder.kill()
            holder.wait()  # its lock is free once it is gone

        changed_at_each_look(monkeypatch, cache._file, for_s=2.0, then=let_go)
        assert cache.update({"b" * 32: entry(8)})  # waited out the busy holder
    assert set(DecisionCache(tmp_path / "cache.json").entries()) == {"a" * 32, "b" * 32}


_ONE_RESOLVE = (
    "import chunktune\n"
    "from chunktune.sim import SimulatedWorkload, env_costs\n"
    "w = SimulatedWorkload(env_costs('blocked', 64), nthread=2, name='odd-path')\n"
    "d = chunktune.resolve_sync(w, policy='quick')\n"
    "print(d.source)\n"
)


@pytest.mark.parametrize("kind", ["fifo", "directory"])
def test_a_cache_path_that_is_no_regular_file_is_never_read_moved_or_replaced(
    tmp_path: Path, kind: str
) -> None:
    """A FIFO or a folder at the cache path is never read, moved or replaced; the CLI exits 2."""
    # reading a FIFO would block for good: a warning, a decision, the path left as it was,
    # no lock made, and the CLI says why
    path = tmp_path / "cache.json"
    os.mkfifo(path) if kind == "fifo" else path.mkdir()
    env = {**os.environ, "CHUNKTUNE_CACHE": str(path), "CHUNKTUNE_SWEEP_LOCK": str(tmp_path / "s")}
    done = subprocess.run(
        [sys.executable, "-c", _ONE_RESOLVE], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.stdout.strip() == "benchmark", done.stderr
    assert "is unavailable" in done.stderr and "no regular file" in done.stderr
    assert path.is_fifo() if kind == "fifo" else path.is_dir()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cache.json", "s"]
    listed = subprocess.run(
        [sys.executable, "-m", "chunktune", "cache", "list"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert listed.returncode == 2 and "no regular file" in listed.stderr
    assert "Traceback" not in listed.stderr


def test_a_linked_cache_is_written_through_the_link(tmp_path: Path) -> None:
    """A cache path that is a symlink: its target gets every write and the lock; the link stays."""
    # a link onto a volume that persists, say
    volume = tmp_path / "volume"
    link = tmp_path / "cache.json"
    link.symlink_to(volume / "chunktune" / "cache.json")  # dangling until the first write
    cache = DecisionCache(link)
    assert cache.update({"a" * 32: entry(4)})
    assert cache.update({"b" * 32: entry(8)})
    assert link.is_symlink()
    assert set(DecisionCache(volume / "chunktune" / "cache.json").entries()) == {"a" * 32, "b" * 32}
    assert sorted(p.name for p in (volume / "chunktune").iterdir()) == ["cache.json"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cache.json", "volume"]


def test_a_large_file_gives_its_writer_longer_before_the_wait_gives_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The stall allowance grows with the file: a healthy writer of a big cache takes longer."""
    from chunktune import _cache_lock

    cache = DecisionCache(tmp_path / "cache.json")
    assert cache.update({"a" * 32: entry(4)})
    size = cache.path.stat().st_size
    monkeypatch.setattr(_cache_lock, "WRITE_STALL_S", 0.1)
    monkeypatch.setattr(_cache_lock, "WRITE_BYTES_PER_S", size / 0.4)  # this file: 0.4 s more
    with holding(cache.lock_path), caplog.at_level(logging.WARNING, logger="chunktune"):
        assert not cache.update({"b" * 32: entry(8)})
    assert "changed nothing for 0.5 s" in caplog.text


def test_clear_that_cannot_write_says_why_once(
    tmp_path: Path, stalling: DecisionCache, caplog: pytest.LogCaptureFixture
) -> None:
    """clear() against a stuck writer: one CacheError with the reason, no warning besides."""
    cache = stalling
    with (
        holding(cache.lock_path),
        caplog.at_level(logging.WARNING, logger="chunktune"),
        pytest.raises(CacheError, match=r"held by another process.*nothing was deleted"),
    ):
        cache.clear()
    assert caplog.text == ""
    assert set(DecisionCache(tmp_path / "cache.json").entries()) == {"a" * 32}


def test_a_cache_whose_folder_is_a_file_says_so(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The cache's folder is a file: the warning says "Not a directory", not "File exists"."""
    (tmp_path / "taken").write_text("not a folder")
    cache = DecisionCache(tmp_path / "taken" / "cache.json")
    with caplog.at_level(logging.WARNING, logger="chunktune"):
        assert not cache.update({"a" * 32: entry(4)})
    assert "Not a directory" in caplog.text and "File exists" not in caplog.text


def _written(path: Path) -> dict[str, CacheEntry]:
    """The file's entries as a fresh reader finds them: nothing altered, nothing skipped."""
    parsed = parse_cache(path.read_bytes(), cache_format(path), mtime=0.0, source="x")
    assert parsed.altered == () and parsed.skipped == ()
    return parsed.entries


@pytest.mark.parametrize("suffix", [".json", ".toml"])
def test_a_rewrite_reusing_tables_writes_what_fresh_cache_objects_write(
    tmp_path: Path, suffix: str
) -> None:
    """One cache object, reusing what it read and wrote, writes the bytes fresh objects write."""
    path, fresh = tmp_path / f"c{suffix}", tmp_path / f"fresh{suffix}"
    cache = DecisionCache(path)
    # an int where a float is stored: written as given; then JSON writes back the text it
    # read (the int), TOML the entry as it reads back (a float)
    first = {"a": entry(created=1_700_000_000), "b": entry(4)}
    cache.update(first)
    DecisionCache(fresh).update(first)
    for key in "cde":  # each write re-reads the file, and reuses what it wrote before
        cache.put(key, entry(created=1_700_000_001))
        DecisionCache(fresh).put(key, entry(created=1_700_000_001))
        assert path.read_bytes() == fresh.read_bytes()
        assert _written(path).keys() == {*first, *"cde"[: "cde".index(key) + 1]}
    assert cache.get("a") is cache.get("a")


def test_a_put_of_a_read_entry_changed_in_place_is_hashed_afresh(tmp_path: Path) -> None:
    """An entry put back after its timings changed in place is written as it is now."""
    path = tmp_path / "c.json"
    cache = DecisionCache(path)
    cache.update({"a": entry(), "b": entry(4)})
    cache.put("c", entry())  # writes "a" as read: its table is known now
    read = cache.get("a")
    assert read is not None
    read.timings[8] = 0.0099
    cache.put("a", read)
    assert _written(path)["a"].timings[8] == pytest.approx(0.0099)


def test_a_key_another_writer_changed_is_written_as_it_left_it(tmp_path: Path) -> None:
    """A table reused on write is the one read now, never the one this cache wrote before."""
    path = tmp_path / "c.toml"
    mine, other = DecisionCache(path), DecisionCache(path)
    mine.update({"a": entry(), "b": entry(4)})
    mine.put("c", entry())  # "a" and "b" as read and written: known to `mine`
    other.put("a", entry(16, reason="other"))
    mine.put("d", entry())
    assert _written(path)["a"].chunk_size == 16
    assert mine.get("a") == _written(path)["a"]


# ---------------------------------------------------------------- damaged, and not to be moved

DAMAGED_KEYS = [f"job{i}.abc" for i in range(4)]


def _damaged_cache(path: Path, damage: str) -> tuple[bytes, str]:
    """Four entries as chunktune writes them, then damaged by hand: ``"digit"`` changes a
    digit of one entry's reason, ``"cut"`` ends the file inside the last entry's reason.
    Returns the damaged bytes and the key of the entry the damage touched."""
    DecisionCache(path).update(
        {key: entry(i + 1, reason=f"entry {i}") for i, key in enumerate(DAMAGED_KEYS)}
    )
    raw = path.read_bytes()
    if damage == "digit":
        damaged, lost = raw.replace(b"entry 2", b"entry 7"), DAMAGED_KEYS[2]
    else:
        damaged, lost = raw[: raw.rindex(b"entry 3") + 3], DAMAGED_KEYS[3]
    assert damaged != raw
    path.write_bytes(damaged)
    return damaged, lost


def _lock_that_cannot_be_taken(path: Path) -> None:
    """A folder where the cache's write lock goes: taking it fails (EISDIR), root or not."""
    lock = path.with_name(path.name + ".lock")
    lock.unlink(missing_ok=True)
    lock.mkdir()


def _refused(code: int, src: Any, dst: Any, **_kwargs: object) -> None:
    """An ``os.link`` that the file system refuses with ``code``."""
    raise OSError(code, os.strerror(code), str(src))


def _counted(monkeypatch: pytest.MonkeyPatch, module: ModuleType, name: str) -> list[int]:
    """Count the calls of ``<module>.<name>``."""
    calls: list[int] = []
    real: Callable[..., Any] = getattr(module, name)

    def counting(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, counting)
    return calls


DAMAGES = [pytest.param("digit", id="digit-changed"), pytest.param("cut", id="cut-mid-entry")]


@pytest.mark.parametrize("damage", DAMAGES)
@pytest.mark.parametrize("fmt", ["json", "toml"])
def test_a_damaged_cache_whose_lock_cannot_be_taken_serves_its_whole_entries(
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
    fmt: str,
    damage: str,
) -> None:
    """A damaged file that cannot go aside serves its whole entries, warned once, read once."""
    path = tmp_path / f"c.{fmt}"
    damaged, lost = _damaged_cache(path, damage)
    _lock_that_cannot_be_taken(path)
    parses = _counted(monkeypatch, _cache_file, "parse_cache")
    salvages = _counted(monkeypatch, _cache_quarantine, "salvage")
    cache = DecisionCache(path)
    whole = set(DAMAGED_KEYS) - {lost}
    with caplog.at_level(logging.WARNING, logger="chunktune"):
        for _ in range(3):
            assert set(cache.entries()) == whole
            assert set(cache.entries(strict=True)) == whole
            for i, key in enumerate(DAMAGED_KEYS):
                got = cache.get(key)
                found = cache.lookup(key.partition(".")[0], policy_hash="abc", rule="", effort=0)
                if key == lost:
                    assert got is None and found is None
                else:
                    assert got == entry(i + 1, reason=f"entry {i}")
                    assert found == (key, got)
        assert cache.put("new", entry()) is False  # nothing is written, and said already
    assert (len(parses), len(salvages)) == (1, 1)
    (warning,) = [r.getMessage() for r in caplog.records]
    assert str(path) in warning and "could not move it aside" in warning
    assert "Is a directory" in warning and "serving the 3 of its entries" in warning
    assert ("checksum does not match" if damage == "digit" else "does not parse") in warning
    assert path.read_bytes() == damaged
    assert not [p for p in tmp_path.iterdir() if ".corrupt-" in p.name]


def test_threads_racing_on_a_damaged_cache_that_cannot_go_aside_warn_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Eight threads reading one damaged, unmovable cache at once: one warning, whole entries."""
    path = tmp_path / "c.json"
    _, lost = _damaged_cache(path, "digit")
    _lock_that_cannot_be_taken(path)
    real_salvage = salvage
    gate = threading.Barrier(8)

    def slow_salvage(*args: Any) -> Any:
        gate.wait(timeout=60)  # a hang guard: every thread is salvaging before any has warned
        return real_salvage(*args)

    monkeypatch.setattr(_cache_quarantine, "salvage", slow_salvage)
    cache = DecisionCache(path)
    seen: list[set[str]] = []
    with caplog.at_level(logging.WARNING, logger="chunktune"):
        threads = [threading.Thread(target=lambda: seen.append(set(cache.entries())))
                   for _ in range(8)]  # fmt: skip
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=30)
        assert cache.put("new", entry()) is False
    assert seen == [set(DAMAGED_KEYS) - {lost}] * 8
    assert len(caplog.records) == 1


@pytest.mark.parametrize("damage", DAMAGES)
def test_a_damaged_cache_on_a_full_disk_stays_in_place_and_serves_its_whole_entries(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch, damage: str
) -> None:
    """A fresh file that does not fit puts the damaged one back: served read-only, then kept."""
    path = tmp_path / "c.json"
    damaged, lost = _damaged_cache(path, damage)
    whole = set(DAMAGED_KEYS) - {lost}

    def full(_fd: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    cache = DecisionCache(path)
    with monkeypatch.context() as disk, caplog.at_level(logging.WARNING, logger="chunktune"):
        disk.setattr(os, "fsync", full)
        assert set(cache.entries()) == whole
        assert cache.put("new", entry()) is False
        assert set(DecisionCache(path).entries()) == whole  # another process's read
    assert path.read_bytes() == damaged
    assert [p.name for p in tmp_path.iterdir() if ".corrupt-" in p.name or p.suffix == ".tmp"] == []
    assert "No space left on device" in caplog.text and "read-only" in caplog.text
    assert cache.put("new", entry())  # space again: the file goes aside, its entries stay
    assert set(DecisionCache(path).entries()) == whole | {"new"}


def test_a_damaged_cache_on_a_full_disk_without_hard_links_is_served_once_moved_back(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Renamed aside and back (no hard links), a damaged file on a full disk serves its entries."""
    path = tmp_path / "c.json"
    damaged, lost = _damaged_cache(path, "digit")

    def full(_fd: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    def no_hard_links(*_args: object, **_kwargs: object) -> None:
        raise OSError(errno.EPERM, "Operation not permitted")  # the file is renamed aside

    cache = DecisionCache(path)
    with monkeypatch.context() as disk, caplog.at_level(logging.WARNING, logger="chunktune"):
        disk.setattr(os, "fsync", full)
        disk.setattr(os, "link", no_hard_links)
        # the move back changed the file's ctime, not its bytes: still the file found damaged
        for _ in range(3):
            assert set(cache.entries()) == set(DAMAGED_KEYS) - {lost}
    assert path.read_bytes() == damaged
    assert caplog.text.count("read-only") == 1


_QUARANTINE_THEN_HANG = (  # reads the damaged cache; the fresh file's fsync never returns
    "import os, sys, time\n"
    "def hang(fd):\n"
    "    print('writing', flush=True)\n"
    "    time.sleep(600)\n"
    "os.fsync = hang\n"
    "from chunktune import DecisionCache\n"
    "DecisionCache(sys.argv[1]).entries()\n"
)


@pytest.mark.parametrize("damage", ["digit", "cut"])
def test_a_process_killed_moving_a_damaged_cache_aside_loses_none_of_its_whole_entries(
    tmp_path: Path, damage: str
) -> None:
    """SIGKILL while a damaged cache's fresh file is written: the next reader gets its entries."""
    path = tmp_path / "c.json"
    damaged, lost = _damaged_cache(path, damage)
    with subprocess.Popen(
        [sys.executable, "-c", _QUARANTINE_THEN_HANG, str(path)], stdout=subprocess.PIPE, text=True
    ) as mover:
        assert mover.stdout is not None and mover.stdout.readline().strip() == "writing"
        mover.kill()
    assert path.read_bytes() == damaged  # still there, whole entries and all
    assert set(DecisionCache(path).entries()) == set(DAMAGED_KEYS) - {lost}
    assert set(DecisionCache(path).entries()) == set(DAMAGED_KEYS) - {lost}  # the fresh file's
    asides = [p.read_bytes() for p in tmp_path.iterdir() if ".corrupt-" in p.name]
    assert asides and all(raw == damaged for raw in asides)


def test_a_move_aside_a_killed_mover_began_keeps_its_name(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A damaged file already linked aside by a mover killed mid-move gets no second name."""
    path = tmp_path / "c.json"
    damaged, lost = _damaged_cache(path, "digit")
    earlier = tmp_path / "c.json.corrupt-20261201T000000-1"
    os.link(path, earlier)  # what the killed mover left: the file under both names
    with caplog.at_level(logging.WARNING, logger="chunktune"):
        assert set(DecisionCache(path).entries()) == set(DAMAGED_KEYS) - {lost}
    asides = [p for p in tmp_path.iterdir() if ".corrupt-" in p.name]
    assert asides == [earlier] and earlier.read_bytes() == damaged
    assert path.read_bytes() != damaged and str(earlier) in caplog.text


def test_a_damaged_file_with_no_whole_entry_a_killed_mover_linked_aside_is_gone_after_a_read(
    tmp_path: Path,
) -> None:
    """A killed mover's link of a file with no whole entry: the next read leaves it only aside."""
    path = tmp_path / "c.json"
    path.write_bytes(b"{not json")
    earlier = tmp_path / "c.json.corrupt-20261201T000000-1"
    os.link(path, earlier)  # what the killed mover left: the file under both names
    assert DecisionCache(path).entries() == {}
    assert not path.exists()  # not left in place, to be moved aside again at every read
    assert [p for p in tmp_path.iterdir() if ".corrupt-" in p.name] == [earlier]
    assert earlier.read_bytes() == b"{not json"


def test_the_warning_of_a_move_aside_counts_the_whole_entries_kept(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A damaged file moved aside with three whole entries: the warning says three were kept."""
    path = tmp_path / "c.json"
    _damaged_cache(path, "digit")
    with caplog.at_level(logging.WARNING, logger="chunktune"):
        assert len(DecisionCache(path).entries()) == 3
    assert "keeping the 3 of its entries that were whole" in caplog.text


def test_the_warning_of_a_move_aside_says_one_whole_entry_in_the_singular(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A damaged file moved aside with one whole entry: 'the 1 ... that was whole'."""
    path = tmp_path / "c.json"
    DecisionCache(path).update(
        {key: entry(i + 1, reason=f"entry {i}") for i, key in enumerate(DAMAGED_KEYS[:2])}
    )
    raw = path.read_bytes()
    path.write_bytes(raw.replace(b"entry 1", b"entry 7"))
    with caplog.at_level(logging.WARNING, logger="chunktune"):
        assert len(DecisionCache(path).entries()) == 1
    assert "keeping the 1 of its entries that was whole" in caplog.text


def test_a_damaged_cache_renamed_aside_for_good_says_where_it_went(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Renamed aside (no hard links), not written afresh nor moved back: the warning names it."""
    path = tmp_path / "c.json"
    damaged, _ = _damaged_cache(path, "digit")
    real_replace = os.replace

    def full(_fd: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    def no_way_back(src: Any, dst: Any) -> None:
        if Path(dst) == path:  # the move back: refused
            raise OSError(errno.EIO, "Input/output error", str(src))
        real_replace(src, dst)

    with monkeypatch.context() as disk, caplog.at_level(logging.WARNING, logger="chunktune"):
        disk.setattr(os, "fsync", full)
        disk.setattr(os, "link", functools.partial(_refused, errno.EPERM))
        disk.setattr(os, "replace", no_way_back)
        DecisionCache(path).entries()
    (aside,) = [p for p in tmp_path.iterdir() if ".corrupt-" in p.name]
    assert aside.read_bytes() == damaged  # its entries are there, and the warning says so
    assert f"moved it to {aside}, but could not write the 3 of its entries" in caplog.text


def test_another_damaged_file_in_place_of_one_served_read_only_waits_the_stall_and_warns(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A new damaged file after one served read-only: its own stall and warning, its entries."""
    path = tmp_path / "c.json"
    _, lost = _damaged_cache(path, "digit")
    other = tmp_path / "other" / "c.json"
    other.parent.mkdir()
    _, other_lost = _damaged_cache(other, "cut")
    cache = DecisionCache(path)
    served: list[set[str]] = []
    with holding(cache.lock_path), caplog.at_level(logging.WARNING, logger="chunktune"):
        monkeypatch.setattr(_cache_lock, "WRITE_STALL_S", 0.2)
        assert set(cache.entries()) == set(DAMAGED_KEYS) - {lost}
        os.replace(other, path)  # another file, damaged too: not the one served read-only
        # its holder gets the stall, not the look given a live holder of the file served
        monkeypatch.setattr(_cache_lock, "WRITE_LOOK_S", 3600.0)
        reader = threading.Thread(target=lambda: served.append(set(cache.entries())), daemon=True)
        reader.start()
        reader.join(timeout=120)  # a hang guard, not a timing
    assert served == [set(DAMAGED_KEYS) - {other_lost}]
    assert caplog.text.count("could not move it aside") == 2


def test_a_damaged_cache_that_cannot_be_renamed_serves_its_whole_entries(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The move aside failing (a read-only mount) serves the whole entries and forgets no answer."""
    path = tmp_path / "c.json"
    damaged, lost = _damaged_cache(path, "digit")
    real_replace = os.replace

    def read_only_mount(src: Any, dst: Any) -> None:
        if Path(src) == path:
            raise OSError(errno.EROFS, "Read-only file system", str(src))
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", read_only_mount)
    monkeypatch.setattr(os, "link", functools.partial(_refused, errno.EROFS))  # links too
    cache = DecisionCache(path)
    changes = _recent.changes()
    with caplog.at_level(logging.WARNING, logger="chunktune"):
        for _ in range(3):
            assert set(cache.entries()) == set(DAMAGED_KEYS) - {lost}
    # nothing changed, so what resolve remembers for a second still holds
    assert _recent.changes() == changes
    assert caplog.text.count("Read-only file system") == 1
    assert path.read_bytes() == damaged


@pytest.mark.parametrize("fmt", ["json", "toml"])
def test_a_damaged_cache_that_could_not_go_aside_goes_once_it_can(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, fmt: str
) -> None:
    """Served read-only while its lock cannot be taken, the same cache moves it aside after."""
    path = tmp_path / f"c.{fmt}"
    damaged, lost = _damaged_cache(path, "digit")
    _lock_that_cannot_be_taken(path)
    cache = DecisionCache(path)
    whole = set(DAMAGED_KEYS) - {lost}
    assert set(cache.entries()) == whole
    path.with_name(path.name + ".lock").rmdir()
    with caplog.at_level(logging.WARNING, logger="chunktune"):
        assert set(cache.entries()) == whole
    (aside,) = [p for p in tmp_path.iterdir() if ".corrupt-" in p.name]
    assert aside.read_bytes() == damaged and str(aside) in caplog.text
    assert set(DecisionCache(path).entries()) == whole  # the fresh file holds them


def test_a_damaged_cache_whose_lock_a_stuck_writer_holds_waits_out_the_stall_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stuck write-lock holder: only the first read waits the stall, no later read or write."""
    path = tmp_path / "c.json"
    damaged, lost = _damaged_cache(path, "digit")
    whole = set(DAMAGED_KEYS) - {lost}
    cache = DecisionCache(path)
    served: list[set[str]] = []

    def read_again() -> None:
        served.append(set(cache.entries()))
        served.append({k for k in DAMAGED_KEYS if cache.get(k) is not None})
        served.append({"written"} if cache.put("new", entry()) else set())

    with holding(cache.lock_path), caplog.at_level(logging.WARNING, logger="chunktune"):
        monkeypatch.setattr(_cache_lock, "WRITE_STALL_S", 0.2)
        assert set(cache.entries()) == whole  # waited the stall, then served read-only
        # a stall no later read may wait out: each must look at the lock and go on
        monkeypatch.setattr(_cache_lock, "WRITE_STALL_S", 3600.0)
        # each look is as brief as the holder's stuck either way (0.25 s each: 1.5 s here)
        monkeypatch.setattr(_cache_lock, "WRITE_LOOK_S", 0.02)
        reader = threading.Thread(target=read_again, daemon=True)
        reader.start()
        reader.join(timeout=120)  # a hang guard, not a timing: the old code waits an hour
        assert served == [whole, whole, set()]  # nothing written: the file is read-only
    assert caplog.text.count("could not move it aside") == 1
    assert path.read_bytes() == damaged
    # the holder gone, the next read takes the lock at once and moves the file aside
    assert set(cache.entries()) == whole
    (aside,) = [p for p in tmp_path.iterdir() if ".corrupt-" in p.name]
    assert aside.read_bytes() == damaged


def test_a_write_failing_for_the_stuck_lock_a_read_only_cache_was_served_for_says_nothing(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The stuck lock that served it read-only is one cause: a write's briefer wait is no second."""
    path = tmp_path / "c.json"
    _damaged_cache(path, "digit")
    cache = DecisionCache(path)
    monkeypatch.setattr(_cache_lock, "WRITE_STALL_S", 0.2)
    monkeypatch.setattr(_cache_lock, "WRITE_LOOK_S", 0.02)  # the write's wait: other figures
    with holding(cache.lock_path), caplog.at_level(logging.WARNING, logger="chunktune"):
        assert cache.entries()  # served read-only, with its one warning
        assert not cache.put("new", entry()) and not cache.put("other", entry())
    said = [r.getMessage() for r in caplog.records]
    assert len(said) == 1 and "could not move it aside (its write lock" in said[0]


def test_a_write_to_a_damaged_cache_served_read_only_waits_for_a_live_lock_holder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Served read-only past a stuck holder, a write waits for a live holder moving the file."""
    path = tmp_path / "c.json"
    _, lost = _damaged_cache(path, "digit")
    whole = set(DAMAGED_KEYS) - {lost}
    cache = DecisionCache(path)
    monkeypatch.setattr(_cache_lock, "WRITE_STALL_S", 0.2)
    with holding(cache.lock_path):
        assert set(cache.entries()) == whole  # the stuck holder: served read-only
    # a look no write may give up early (the old code gave it up at once)
    monkeypatch.setattr(_cache_lock, "WRITE_LOOK_S", 3600.0, raising=False)
    monkeypatch.setattr(_cache_lock, "WRITE_STALL_S", 3600.0)
    # another writer took the lock since: it moves the damaged file aside, as a live one does
    live = filelock.FileLock(cache.lock_path, thread_local=False)
    live.acquire()
    stored: list[bool] = []
    writer = threading.Thread(target=lambda: stored.append(cache.put("new", entry())), daemon=True)
    writer.start()
    time.sleep(0.3)  # the write looks at the lock while the file is still the damaged one
    path.rename(path.with_name("c.json.corrupt-live"))
    write_cache_file(path, {k: entry() for k in whole})
    live.release()
    writer.join(timeout=120)  # a hang guard, not a timing
    assert stored == [True]
    assert set(DecisionCache(path).entries()) == whole | {"new"}


def test_a_brief_wait_that_sees_the_file_change_waits_as_for_any_writer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A brief wait whose holder changes the file is a queue that moves: the full stall, then."""
    path = tmp_path / "c.json"
    write_cache_file(path, {"a": entry()})
    cache = DecisionCache(path)
    # a look of 0.1 s held five times over: a machine too loaded to look again meanwhile
    # lets a broken wait pass, never fails a sound one (the change is seen at the first look)
    monkeypatch.setattr(_cache_lock, "WRITE_LOOK_S", 0.1)
    monkeypatch.setattr(_cache_lock, "WRITE_STALL_S", 3600.0)
    looked = threading.Event()
    first_look = cache._file.stat

    def stat_then_say() -> Stat | None:
        seen = first_look()
        if not looked.is_set():
            # the holder writes right after the wait's first look (here, so that a loaded
            # machine cannot put the write after the brief look's end): progress
            write_cache_file(path, {"a": entry(), "b": entry()})
            looked.set()
        return seen

    monkeypatch.setattr(cache._file, "stat", stat_then_say)
    live = filelock.FileLock(cache.lock_path, thread_local=False)
    live.acquire()
    held: list[bool] = []

    def wait_briefly() -> None:
        with write_lock(cache._file, brief=True):
            held.append(True)

    waiter = threading.Thread(target=wait_briefly, daemon=True)
    waiter.start()
    assert looked.wait(timeout=120)  # a hang guard: the wait has seen the file as it was
    time.sleep(5 * 0.1)  # the holder holds on, past the brief look but far inside the stall
    live.release()
    waiter.join(timeout=120)
    assert held == [True]


def test_resolve_over_a_damaged_cache_it_cannot_move_aside_hits_its_whole_entries(
    isolated: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """resolve answers intact keys of a damaged, unmovable cache and measures the altered one."""
    from chunktune.sim import SimulatedWorkload, env_costs

    def workload(i: int) -> SimulatedWorkload:
        return SimulatedWorkload(env_costs("blocked", 64), nthread=2, name=f"w{i}")

    keys = [chunktune.resolve_sync(workload(i), policy="quick").key for i in range(3)]
    path = isolated / "cache.json"
    raw = path.read_bytes()
    # a digit of the second entry's probe seconds, changed by hand
    at = re.compile(rb'"probe_seconds": \d').search(raw, raw.index(json.dumps(keys[1]).encode()))
    assert at is not None
    digit = at.end() - 1
    damaged = raw[:digit] + str((raw[digit] - ord("0") + 1) % 10).encode() + raw[digit + 1 :]
    path.write_bytes(damaged)
    _lock_that_cannot_be_taken(path)
    with caplog.at_level(logging.WARNING, logger="chunktune"):
        sources = [chunktune.resolve_sync(workload(i), policy="quick").source for i in range(3)]
    assert sources == ["cache", "benchmark", "cache"]
    (warning,) = [r.getMessage() for r in caplog.records]
    assert "could not move it aside" in warning and "serving the 2 of its entries" in warning
    assert path.read_bytes() == damaged


@pytest.fixture
def shared_dir() -> Iterator[Path]:
    """A folder another user may enter (pytest's own are the owner's alone)."""
    folder = Path(tempfile.mkdtemp(prefix="chunktune-shared-"))
    folder.chmod(0o755)
    try:
        yield folder
    finally:
        for sub in folder.iterdir():
            sub.chmod(0o755)
        shutil.rmtree(folder)


_READER = """
import json, logging, sys
from chunktune import DecisionCache

warned = []
class Keep(logging.Handler):
    def emit(self, record):
        warned.append(record.getMessage())

logging.getLogger("chunktune").addHandler(Keep(logging.WARNING))
cache = DecisionCache(sys.argv[1])
seen = [sorted(cache.entries()) for _ in range(3)]
got = {key: cache.get(key) is not None for key in sys.argv[2:]}
put = cache.put("new", cache.get(sys.argv[2]))
print(json.dumps({"seen": seen, "got": got, "put": put, "warned": warned}))
"""


_PUTTER = """
import json, sys
from chunktune import DecisionCache
entry = DecisionCache(sys.argv[1]).get("k")
print(json.dumps([entry is not None, DecisionCache(sys.argv[2]).put("k", entry)]))
"""


@pytest.mark.parametrize("fmt", ["json", "toml"])
def test_a_cache_file_keeps_the_permissions_it_was_given(tmp_path: Path, fmt: str) -> None:
    """A cache file made readable to a group stays so through later writes and a clear."""
    path = tmp_path / f"cache.{fmt}"
    cache = DecisionCache(path)
    assert cache.put("a", entry())
    path.chmod(0o640)
    assert cache.put("b", entry(4))
    assert path.stat().st_mode & 0o777 == 0o640
    cache.clear()
    assert cache.put("c", entry(2))
    assert path.stat().st_mode & 0o777 == 0o640
    assert DecisionCache(path).get("c") is not None


def test_read_only_directory_degrades_to_no_cache(shared_dir: Path) -> None:
    """An unwritable cache directory makes put() return False instead of raising."""
    prefix, why_not = unprivileged()
    if why_not:
        pytest.skip(why_not)
    source = shared_dir / "source.json"
    assert DecisionCache(source).put("k", entry())
    source.chmod(0o644)
    ro = shared_dir / "ro"
    ro.mkdir()
    ro.chmod(0o555)  # root ignores it: the put runs as another user when the suite is root
    putter = subprocess.run(
        [*prefix, sys.executable, "-c", _PUTTER, str(source), str(ro / "c.json")],
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert putter.returncode == 0, putter.stderr
    assert json.loads(putter.stdout) == [True, False]
    assert list(ro.iterdir()) == []


@pytest.mark.parametrize(
    ("fmt", "damage", "lock"),
    [
        pytest.param("json", "digit", "absent", id="json-digit-changed"),
        pytest.param("toml", "digit", "absent", id="toml-digit-changed"),
        pytest.param("json", "cut", "absent", id="json-cut-mid-entry"),
        pytest.param("toml", "cut", "absent", id="toml-cut-mid-entry"),
        pytest.param("json", "digit", "writable", id="json-lock-taken-move-refused"),
        pytest.param("toml", "cut", "writable", id="toml-lock-taken-move-refused"),
    ],
)
def test_a_damaged_cache_in_a_read_only_folder_serves_its_whole_entries(
    shared_dir: Path, fmt: str, damage: str, lock: str
) -> None:
    """Another process that may only read the folder gets the whole entries and one warning."""
    prefix, why_not = unprivileged()
    if why_not:
        pytest.skip(why_not)
    folder = shared_dir / "ro"
    folder.mkdir()
    path = folder / f"c.{fmt}"
    damaged, lost = _damaged_cache(path, damage)
    lock_file = path.with_name(path.name + ".lock")
    if lock == "absent":  # as in an image: taking the lock would create it
        assert not lock_file.exists()  # its writer removed it as it let go
    else:  # the lock is taken; moving the file aside is what fails
        lock_file.touch(0o666)
        lock_file.chmod(0o666)
    path.chmod(0o444)
    folder.chmod(0o555)
    listed = sorted(p.name for p in folder.iterdir())
    reader = subprocess.run(
        [*prefix, sys.executable, "-c", _READER, str(path), *DAMAGED_KEYS],
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert reader.returncode == 0, reader.stderr
    said = json.loads(reader.stdout)
    whole = sorted(set(DAMAGED_KEYS) - {lost})
    assert said["seen"] == [whole] * 3
    assert said["got"] == {key: key != lost for key in DAMAGED_KEYS}
    assert said["put"] is False
    (warning,) = said["warned"]
    assert str(path) in warning and "could not move it aside" in warning
    assert "Permission denied" in warning and "serving the 3 of its entries" in warning
    assert path.read_bytes() == damaged
    assert sorted(p.name for p in folder.iterdir()) == listed


def test_another_policy_of_the_same_rule_and_effort_answers_a_lookup(tmp_path: Path) -> None:
    """An entry of the same rule and as much effort answers; the most effort wins; less does not."""
    cache = DecisionCache(tmp_path / "cache.json")
    assert cache.update(
        {
            "k.same": entry(policy_hash="same", policy_effort=208),
            "k.more": entry(16, policy_hash="more", policy_effort=300),
        }
    )
    found = cache.lookup("k", policy_hash="mine", rule="margin=0.03", effort=208)
    assert found is not None and found[0] == "k.more"
    assert cache.update({"k.more": None})
    found = cache.lookup("k", policy_hash="mine", rule="margin=0.03", effort=208)
    assert found is not None and found[0] == "k.same"
    assert cache.lookup("k", policy_hash="mine", rule="margin=0.03", effort=209) is None
    own = cache.lookup("k", policy_hash="same", rule="other", effort=10_000)
    assert own is not None and own[0] == "k.same"  # its own entry, whatever else


def test_merge_keeps_the_local_entry_on_a_tie_of_dates(tmp_path: Path) -> None:
    """An incoming entry as old as the local one, but different, leaves the local one."""
    cache = DecisionCache(tmp_path / "c.json")
    assert cache.put("a", entry(8, created=5.0))
    report = cache.merge({"a": entry(16, created=5.0)})
    assert (report.replaced, report.kept) == ((), ("a",))
    assert DecisionCache(tmp_path / "c.json").entries()["a"].chunk_size == 8


def test_a_merge_that_only_replaces_entries_writes_them(tmp_path: Path) -> None:
    """A merge bringing only newer versions of local entries stores them."""
    cache = DecisionCache(tmp_path / "c.json")
    assert cache.put("a", entry(8, created=1.0))
    report = cache.merge({"a": entry(16, created=2.0)})
    assert (report.added, report.replaced) == ((), ("a",))
    assert DecisionCache(tmp_path / "c.json").entries()["a"].chunk_size == 16


def test_an_unknown_format_names_every_format_there_is(tmp_path: Path) -> None:
    """DecisionCache(format="yaml") is a CacheError listing auto too, as its docstring does."""
    with pytest.raises(CacheError, match=r"'yaml'.*expected \"auto\", \"json\" or \"toml\""):
        DecisionCache(tmp_path / "c.json", format="yaml")


# ---------------------------------------------------------------- a coarse clock

_REWRITE_IN_PLACE = """
import os, sys
path, new, atime, mtime = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
data = open(new, "rb").read()
with open(path, "r+b") as f:
    f.write(data)
os.utime(path, ns=(atime, mtime))
"""


def _within_one_tick(
    monkeypatch: pytest.MonkeyPatch, cache: DecisionCache, *, after_s: float
) -> Callable[[float], None]:
    """Every stat of ``cache``'s file from now on is this one (a clock tick that never ends,
    the inode reused), looked at ``after_s`` seconds after it; the setter returned moves
    the looking time."""
    first = cache._file.stat()
    now = time.time_ns()  # after the write: the file's stamps are no later than this

    def look_at(seconds: float) -> None:
        monkeypatch.setattr(_cache_file, "time_ns", lambda: now + int(seconds * 1e9))

    monkeypatch.setattr(cache._file, "stat", lambda: first)
    look_at(after_s)
    return look_at


def _written_within_one_tick(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    entries: dict[str, CacheEntry],
    *,
    after_s: float,
) -> tuple[Path, DecisionCache]:
    """A cache file of ``entries`` and a cache over it, looked at ``after_s`` seconds into a
    tick that never ends (:func:`_within_one_tick`)."""
    path = tmp_path / "c.json"
    write_cache_file(path, entries)
    cache = DecisionCache(path)
    _within_one_tick(monkeypatch, cache, after_s=after_s)
    return path, cache


def _counted_reads(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """Every path ``Path.read_bytes`` reads from now on, in order."""
    read: list[Path] = []
    read_bytes = Path.read_bytes

    def counted_read(self: Path) -> bytes:
        read.append(self)
        return read_bytes(self)

    monkeypatch.setattr(Path, "read_bytes", counted_read)
    return read


def _newer_file_within_one_tick(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[Path, DecisionCache, Callable[[float], None]]:
    """A newer chunktune's empty cache file and a cache over it, looked at within the tick
    (:func:`_within_one_tick`)."""
    path = tmp_path / "c.json"
    path.write_text(json.dumps({"schema": SCHEMA + 1, "entries": {}}))
    cache = DecisionCache(path)
    return path, cache, _within_one_tick(monkeypatch, cache, after_s=0.1)


def test_a_same_size_rewrite_that_keeps_the_mtime_is_read_afresh(tmp_path: Path) -> None:
    """A same-size in-place rewrite by another process, its mtime set back, is read."""
    path, new = tmp_path / "c.json", tmp_path / "new.json"
    write_cache_file(path, {"k": entry(4)})
    write_cache_file(new, {"k": entry(8)})
    assert new.stat().st_size == path.stat().st_size
    cache = DecisionCache(path)
    first = cache.get("k")
    assert first is not None and first.chunk_size == 4
    st = path.stat()
    times = [str(st.st_atime_ns), str(st.st_mtime_ns)]
    subprocess.run(
        [sys.executable, "-c", _REWRITE_IN_PLACE, str(path), str(new), *times],
        check=True,
        timeout=120,
    )
    after = path.stat()
    assert (after.st_mtime_ns, after.st_size, after.st_ino) == (
        st.st_mtime_ns,
        st.st_size,
        st.st_ino,
    )
    again = cache.get("k")
    assert again is not None and again.chunk_size == 8


def test_a_rewrite_within_one_clock_tick_is_never_served_stale(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file replaced within its stamp's tick, every field of its stat kept, is read afresh."""
    path, cache = _written_within_one_tick(tmp_path, monkeypatch, {"k.abc": entry(4)}, after_s=0.1)
    found = cache.lookup("k", policy_hash="abc", rule="margin=0.03", effort=208)
    assert found is not None and found[1].chunk_size == 4
    write_cache_file(path, {"k.abc": entry(8)})  # another writer, the same size
    found = cache.lookup("k", policy_hash="abc", rule="margin=0.03", effort=208)
    assert found is not None and found[1].chunk_size == 8  # no stale hit
    DecisionCache(path).put("j.abc", entry(16))  # another writer adds a key
    found = cache.lookup("j", policy_hash="abc", rule="margin=0.03", effort=208)
    assert found is not None and found[1].chunk_size == 16  # the key is seen
    assert set(cache.entries()) == {"k.abc", "j.abc"}


def test_a_newer_chunktunes_file_replaced_within_one_tick_is_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A newer chunktune's file that a current one replaced within the tick is read, not skipped."""
    path, cache, _ = _newer_file_within_one_tick(tmp_path, monkeypatch)
    assert cache.entries() == {}
    write_cache_file(path, {"k": entry(8)})
    assert set(cache.entries()) == {"k"}


def test_a_newer_chunktunes_file_once_settled_is_told_by_its_stat(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A newer chunktune's file first read within the tick is, once settled, not read again."""
    _, cache, look_at = _newer_file_within_one_tick(tmp_path, monkeypatch)
    read = _counted_reads(monkeypatch)
    for _ in range(3):
        assert cache.entries() == {}
    assert len(read) == 3  # within the tick the bytes tell
    look_at(4.0)  # settled: one look at the bytes, then the stat alone tells
    for _ in range(3):
        assert cache.entries() == {}
    assert len(read) == 4


def _unmovable_damaged_file_within_one_tick(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[DecisionCache, str, Callable[[float], None]]:
    """A damaged cache file whose write lock cannot be taken (so it cannot go aside), the
    key of its entry that is lost, and a cache over it looked at within the tick
    (:func:`_within_one_tick`)."""
    path = tmp_path / "c.json"
    _, lost = _damaged_cache(path, "cut")
    _lock_that_cannot_be_taken(path)
    cache = DecisionCache(path)
    return cache, lost, _within_one_tick(monkeypatch, cache, after_s=0.1)


def test_a_damaged_file_that_cannot_go_aside_once_settled_is_told_by_its_stat(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A damaged, unmovable file first read within the tick is, once settled, not read again."""
    cache, lost, look_at = _unmovable_damaged_file_within_one_tick(tmp_path, monkeypatch)
    whole = set(DAMAGED_KEYS) - {lost}
    salvages = _counted(monkeypatch, _cache_quarantine, "salvage")
    with pytest.raises(UnusableCache) as first:
        cache._file.load(fresh=False)
    why = str(first.value)

    def served_as_before() -> None:
        assert set(cache.entries()) == whole
        assert cache.get(lost) is None and cache.get(DAMAGED_KEYS[0]) is not None
        with pytest.raises(UnusableCache) as again:
            cache._file.load(fresh=False)
        assert type(again.value) is UnusableCache and str(again.value) == why
        assert cache._quarantine.served_read_only()  # a stuck lock holder gets the brief look

    read = _counted_reads(monkeypatch)
    with caplog.at_level(logging.WARNING, logger="chunktune"):
        for _ in range(3):
            served_as_before()
        assert len(read) >= 3  # within the tick the bytes tell, at every look
        look_at(4.0)  # settled: one look at the bytes, then the stat alone tells
        read.clear()
        served_as_before()
        assert len(read) == 1
        for _ in range(3):
            served_as_before()
        assert len(read) == 1
    assert len(salvages) == 1  # the whole entries follow the file's memo: salvaged once
    assert caplog.text.count("could not move it aside") == 1


def test_hits_within_one_tick_parse_the_file_only_when_its_bytes_change(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Within the tick a hit reads the file, parsing it only when changed; once settled, a stat."""
    path = tmp_path / "c.json"
    write_cache_file(path, {"k": entry(4)})
    cache = DecisionCache(path)
    look_at = _within_one_tick(monkeypatch, cache, after_s=0.1)
    parsed = []
    parse = cache._file.parse

    def counted_parse(raw: bytes, *, mtime: float) -> Parsed:
        parsed.append(raw)
        return parse(raw, mtime=mtime)

    monkeypatch.setattr(cache._file, "parse", counted_parse)
    read = _counted_reads(monkeypatch)
    for _ in range(5):
        assert cache.get("k") is not None
    assert (len(parsed), len(read)) == (1, 5)  # each hit compares the bytes; one parse
    write_cache_file(path, {"k": entry(8)})
    for _ in range(5):
        got = cache.get("k")
        assert got is not None and got.chunk_size == 8
    assert (len(parsed), len(read)) == (2, 10)
    look_at(4.0)  # settled: one look at the bytes, then the stat alone tells
    for _ in range(5):
        got = cache.get("k")
        assert got is not None and got.chunk_size == 8
    assert (len(parsed), len(read)) == (2, 11)


def test_an_mtime_set_back_leaves_a_same_stat_rewrite_told_by_its_bytes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file whose mtime was set back an hour is recent by its ctime: a rewrite is read."""
    path = tmp_path / "c.json"
    write_cache_file(path, {"k": entry(4)})
    hour_ago = path.stat().st_mtime_ns - 3600 * 10**9
    os.utime(path, ns=(hour_ago, hour_ago))  # the ctime moves to now, as on any change
    cache = DecisionCache(path)
    _within_one_tick(monkeypatch, cache, after_s=0.1)
    first = cache.get("k")
    assert first is not None and first.chunk_size == 4
    write_cache_file(path, {"k": entry(8)})  # the same size; the stat stays as it was
    again = cache.get("k")
    assert again is not None and again.chunk_size == 8


def test_a_file_settled_when_first_read_is_told_by_its_stat_from_then_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cache file already settled at its first read is read once; each later hit takes a stat."""
    path, cache = _written_within_one_tick(tmp_path, monkeypatch, {"k": entry(4)}, after_s=4.0)
    read = _counted_reads(monkeypatch)
    for _ in range(5):
        assert cache.get("k") is not None
    assert read == [path]


def test_a_stat_that_lags_loses_no_writers_entry_and_hides_no_own_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stat that never moves (an attribute cache): a write reads the file, then it is read."""
    # settled, and its stat says so for good
    path, cache = _written_within_one_tick(tmp_path, monkeypatch, {"a.abc": entry(4)}, after_s=4.0)
    assert set(cache.entries()) == {"a.abc"}
    DecisionCache(path).put("b.abc", entry(8))  # another writer: this cache's stat stays
    assert cache.put("c.abc", entry(16))
    assert set(DecisionCache(path).entries()) == {"a.abc", "b.abc", "c.abc"}
    assert set(cache.entries()) == {"a.abc", "b.abc", "c.abc"}


def test_an_older_tuners_file_touched_again_is_dated_by_its_new_mtime(tmp_path: Path) -> None:
    """The older tuner's entries take the file's mtime: the same bytes touched read as touched."""
    path = tmp_path / "c.json"
    path.write_bytes(json.dumps(LEGACY).encode())
    cache = DecisionCache(path)
    written = path.stat().st_mtime_ns
    assert cache.entries()["legacy-0123abcd"].created == pytest.approx(written / 1e9)
    hour_ago = written - 3600 * 10**9
    os.utime(path, ns=(hour_ago, hour_ago))  # within the tick: the bytes are compared
    assert cache.entries()["legacy-0123abcd"].created == pytest.approx(hour_ago / 1e9)


@pytest.mark.parametrize("damage", DAMAGES)
def test_a_damaged_cache_served_read_only_once_settled_is_told_by_its_stat(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, damage: str
) -> None:
    """A damaged file that cannot go aside, settled when read, is parsed once and not re-read."""
    path = tmp_path / "c.json"
    _damaged_cache(path, damage)
    _lock_that_cannot_be_taken(path)
    cache = DecisionCache(path)
    _within_one_tick(monkeypatch, cache, after_s=4.0)
    parses = _counted(monkeypatch, _cache_file, "parse_cache")
    for _ in range(3):
        assert len(cache.entries()) == 3
    assert len(parses) == 1


def test_a_cache_file_of_exactly_the_size_cap_is_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cache file whose size is the cap itself is read; one byte over the cap, it is not."""
    path = tmp_path / "cache.json"
    DecisionCache(path).put("k", entry())
    size = path.stat().st_size
    monkeypatch.setattr(_cache_file, "MAX_CACHE_BYTES", size)
    assert set(DecisionCache(path).entries()) == {"k"}
    monkeypatch.setattr(_cache_file, "MAX_CACHE_BYTES", size - 1)
    with pytest.raises(CacheError, match="holds more than"):
        DecisionCache(path).entries(strict=True)


def test_a_cache_file_past_the_size_cap_is_left_alone_and_unread(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A 257 MiB cache file (sparse) is unavailable, one warning: not read, moved or written."""
    path = tmp_path / "cache.json"
    with path.open("wb") as file:
        file.truncate(257 * 2**20)  # a hole: no disk is used
    cache = DecisionCache(path)
    with caplog.at_level(logging.WARNING, logger="chunktune"):
        assert cache.entries() == {} and cache.get("k") is None
    said = [r.getMessage() for r in caplog.records]
    assert len(said) == 1 and "holds more than 256 MiB" in said[0]
    with pytest.raises(CacheError, match="holds more than 256 MiB; expected a chunktune cache"):
        cache.entries(strict=True)
    assert not cache.put("k", entry())
    assert path.stat().st_size == 257 * 2**20 and sorted(tmp_path.iterdir()) == [path]


def test_a_move_aside_of_a_file_already_gone_keeps_nothing_and_raises_nothing(
    tmp_path: Path,
) -> None:
    """A broken file that vanished before its move aside (another process moved it): no entries."""
    from chunktune._cache_file import CacheFile
    from chunktune._cache_quarantine import Quarantine

    path = tmp_path / "c.json"
    assert Quarantine(CacheFile(path, "json")).move_aside("does not parse") == {}
    assert list(tmp_path.iterdir()) == []


# what taking the lock of _lock_that_cannot_be_taken raises
_EISDIR = OSError(errno.EISDIR, "Is a directory")


def _looked_at(monkeypatch: pytest.MonkeyPatch, path: Path, *, after_s: float) -> None:
    """Every read of a cache file looks at it ``after_s`` seconds after ``path``'s last
    change (within the tick below 3 s, settled past it); its stat is left real."""
    st = path.stat()
    now = max(st.st_mtime_ns, st.st_ctime_ns) + int(after_s * 1e9)
    monkeypatch.setattr(_cache_file, "time_ns", lambda: now)


def _changed_right_after(
    monkeypatch: pytest.MonkeyPatch, owner: Any, name: str, path: Path, then: str
) -> None:
    """The next call of ``owner.<name>`` (a stat or a read) is followed at once by ``path``
    replaced on disk by a whole file of one entry (``then="replaced"``), or removed."""
    real: Callable[..., Any] = getattr(owner, name)
    armed = [True]

    def and_then(*args: Any) -> Any:
        seen = real(*args)
        if armed and (not args or args[0] == path):
            armed.clear()
            if then == "replaced":
                write_cache_file(path, {"new.abc": entry()})
            else:
                path.unlink()
        return seen

    monkeypatch.setattr(owner, name, and_then)


@pytest.mark.parametrize("then", ["replaced", "removed"])
def test_a_damaged_file_replaced_between_the_stat_and_the_read_is_no_longer_served_read_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, then: str
) -> None:
    """Replaced (or removed) right after the stat, the bytes tell it is not the damaged file."""
    path = tmp_path / "c.json"
    _damaged_cache(path, "digit")
    _lock_that_cannot_be_taken(path)
    _looked_at(monkeypatch, path, after_s=0.1)  # within the tick: the bytes are kept
    cache = DecisionCache(path)
    assert len(cache.entries()) == 3  # the whole entries, read-only
    assert cache._quarantine.served_read_only()
    _changed_right_after(monkeypatch, cache._file, "stat", path, then)
    # not the damaged file: a writer waits for a live lock holder in full, and the newer
    # file's entries are read, not the damaged one's salvaged
    assert not cache._quarantine.served_read_only()
    assert cache._quarantine.read_only(_EISDIR) is None
    assert set(cache.entries()) == ({"new.abc"} if then == "replaced" else set())
    assert not [p for p in tmp_path.iterdir() if ".corrupt-" in p.name]


def test_a_settled_damaged_file_replaced_after_it_was_read_is_not_taken_for_the_damaged_one(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Replaced after a settled read found it damaged: its new stat tells; no move-aside warning."""
    path = tmp_path / "c.json"
    _damaged_cache(path, "digit")
    _lock_that_cannot_be_taken(path)
    _looked_at(monkeypatch, path, after_s=4.0)  # settled: the stat alone tells
    cache = DecisionCache(path)
    _changed_right_after(monkeypatch, Path, "read_bytes", path, "replaced")
    with caplog.at_level(logging.WARNING, logger="chunktune"):
        cache.entries()  # read damaged, then replaced before the quarantine looks
        assert not cache._quarantine.served_read_only()
        assert set(cache.entries()) == {"new.abc"}
    said = caplog.text
    assert "could not move it aside" not in said and "does not match" not in said


def test_a_settled_damaged_file_removed_after_its_stat_serves_nothing_read_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Settled (no bytes kept), removed right after the stat: nothing is salvaged from it."""
    path = tmp_path / "c.json"
    _damaged_cache(path, "digit")
    _looked_at(monkeypatch, path, after_s=4.0)
    cache = DecisionCache(path)
    with pytest.raises(UnusableCache):
        cache._file.load(fresh=False)
    _changed_right_after(monkeypatch, cache._file, "stat", path, "removed")
    assert cache._quarantine.read_only(_EISDIR) is None  # then: unavailable, or strict's error


def test_a_damaged_file_replaced_after_its_bytes_were_compared_salvages_those_bytes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Read-only serves the whole entries of the very bytes found damaged, not a newer file's."""
    path = tmp_path / "c.json"
    _, lost = _damaged_cache(path, "digit")
    _looked_at(monkeypatch, path, after_s=0.1)
    cache = DecisionCache(path)
    with pytest.raises(UnusableCache):
        cache._file.load(fresh=False)
    _changed_right_after(monkeypatch, Path, "read_bytes", path, "replaced")
    kept = cache._quarantine.read_only(_EISDIR)  # compares the bytes: then the file is replaced
    assert kept is not None and set(kept) == set(DAMAGED_KEYS) - {lost}
    assert set(cache.entries()) == {"new.abc"}  # the newer file, read as it is


@pytest.mark.parametrize(
    ("path", "why"),
    [
        pytest.param("", 'cache path: "" is not a path', id="empty"),
        pytest.param("a\0b", 'cache path: "a\\u0000b" holds a NUL byte', id="nul"),
        pytest.param(
            "~no_such_user_x/c.json", 'cache path: "~no_such_user_x/c.json" starts', id="home"
        ),
    ],
)
def test_a_cache_path_that_names_no_file_is_a_cache_error_saying_so(path: str, why: str) -> None:
    """A DecisionCache of a path that can name no file: a CacheError that says it is the path."""
    with pytest.raises(CacheError) as raised:
        DecisionCache(path)
    assert str(raised.value).startswith(why)


def test_five_hand_edited_entries_are_each_named(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The warning for five altered entries names all five, none merely counted."""
    path = tmp_path / "c.json"
    DecisionCache(path).update({k: entry(8) for k in "abcde"})
    path.write_text(path.read_text().replace('"chunk_size": 8', '"chunk_size": 2'))
    with caplog.at_level(logging.WARNING, logger="chunktune"):
        assert DecisionCache(path).get("a") is None
    assert "holds 5 entries ('a', 'b', 'c', 'd', 'e') whose checksum does not match" in (
        caplog.text
    )


def test_an_entry_read_again_unchanged_is_the_one_read_before(tmp_path: Path) -> None:
    """A file re-read after another writer's put hands back its unchanged entry as read before."""
    path = tmp_path / "c.json"
    DecisionCache(path).put("a", entry(8))
    mine = DecisionCache(path)._file
    first = mine.load(fresh=True)["a"]
    DecisionCache(path).put("b", entry(4))
    again = mine.load(fresh=True)
    assert set(again) == {"a", "b"} and again["a"] is first


def test_one_hand_edited_entry_is_told_in_the_singular(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The warning for one altered entry reads 'holds 1 entry (...)' and 'wrote it'."""
    path = tmp_path / "c.json"
    DecisionCache(path).update({"edited": entry(8), "other": entry(4)})
    path.write_text(path.read_text().replace('"chunk_size": 8', '"chunk_size": 2'))
    with caplog.at_level(logging.WARNING, logger="chunktune"):
        assert DecisionCache(path).get("edited") is None
    assert "holds 1 entry ('edited') whose checksum does not match" in caplog.text
    assert "damaged after chunktune wrote it, so never served" in caplog.text


@pytest.mark.parametrize(("bad", "more"), [(5, None), (6, 1), (9, 4)])
def test_skipped_entries_are_named_up_to_five_and_the_rest_counted(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, bad: int, more: int | None
) -> None:
    """Five invalid entries are each named; past five, one more warning counts the rest."""
    from chunktune._cache_entry import entry_to_table

    path = tmp_path / "c.json"
    tables = {f"bad{n}": _table(-5) for n in range(bad)}
    _write_doc(path, {"good": entry_to_table(entry()), **tables})
    with caplog.at_level(logging.WARNING, logger="chunktune"):
        assert set(DecisionCache(path).entries()) == {"good"}
    named = [r for r in caplog.records if "skipping cache entry" in r.getMessage()]
    counted = [r.getMessage() for r in caplog.records if "more invalid" in r.getMessage()]
    rest = f"chunktune: skipping {more} more invalid cache entries in {path}"
    assert len(named) == 5
    assert counted == ([] if more is None else [rest])


def test_a_lookup_never_takes_another_job_whose_key_starts_alike(tmp_path: Path) -> None:
    """A stronger entry answers only its own job: base key 'ab' is not served job 'abc''s entry."""
    cache = DecisionCache(tmp_path / "c.json")
    strong = entry(4)
    assert cache.put("abc.other", strong)
    rule, effort = strong.policy_rule, strong.policy_effort
    assert cache.lookup("ab", policy_hash="mine", rule=rule, effort=effort) is None
    found = cache.lookup("abc", policy_hash="mine", rule=rule, effort=effort)
    assert found == ("abc.other", strong)


def test_a_merge_into_a_cache_that_cannot_be_written_is_a_cache_error(tmp_path: Path) -> None:
    """Merging where the cache's folder is a file raises CacheError, never a quiet empty report."""
    folder = tmp_path / "folder"
    folder.write_text("a file, not a folder")
    cache = DecisionCache(folder / "c.json")
    with pytest.raises(CacheError, match=f"cannot write the cache {folder / 'c.json'}: "):
        cache.merge({"a" * 32: entry(4)})
    assert folder.read_text() == "a file, not a folder"


@pytest.mark.parametrize(
    "act",
    [
        pytest.param(lambda cache: cache.entries(strict=True), id="strict-read"),
        pytest.param(lambda cache: cache.merge({"a" * 32: entry(4)}), id="merge"),
        pytest.param(lambda cache: cache.remove(["a" * 32]), id="remove"),
        pytest.param(lambda cache: cache.clear(), id="clear"),
    ],
)
def test_a_cache_error_names_a_path_of_hostile_name_on_one_escaped_line(
    tmp_path: Path, act: Callable[[DecisionCache], object]
) -> None:
    """A cache in a folder named with a newline and an ANSI escape is named escaped, on one line."""
    folder = tmp_path / "d\n\x1b[31m"
    folder.mkdir()
    (folder / "file").write_text("a file, not a folder")
    with pytest.raises(CacheError) as raised:
        act(DecisionCache(folder / "file" / "c.json"))
    assert unprinted(str(raised.value)) is None, str(raised.value)
    assert '/d\\n\\u001B[31m/file/c.json"' in str(raised.value)


@pytest.mark.parametrize("key", [pytest.param(3, id="int"), pytest.param(None, id="None")])
def test_an_entry_under_a_key_that_is_no_str_is_refused_and_the_file_kept(
    tmp_path: Path, key: object, caplog: pytest.LogCaptureFixture
) -> None:
    """put() under a non-str key refuses it with a warning; the other entries stay served."""
    cache = DecisionCache(tmp_path / "c.json")
    assert cache.put("mine", entry())
    assert cache.put(key, entry(4)) is False  # type: ignore[arg-type]
    assert "a cache key is a str" in caplog.text
    assert list(DecisionCache(tmp_path / "c.json").entries()) == ["mine"]
    assert [p.name for p in tmp_path.iterdir() if "corrupt" in p.name] == []


@pytest.mark.parametrize("method", ["update", "merge"])
def test_changes_that_are_no_mapping_are_an_invalid_argument_naming_them(
    tmp_path: Path, method: str
) -> None:
    """update() / merge() of a list raise InvalidArgumentError naming it, not AttributeError."""
    cache = DecisionCache(tmp_path / "c.json")
    with pytest.raises(InvalidArgumentError, match=r"expected a mapping .* got \[.*\] \(list\)"):
        getattr(cache, method)([("k", entry())])


def test_changes_in_any_mapping_are_stored(tmp_path: Path) -> None:
    """update() takes any Mapping (a read-only MappingProxyType too), not only a dict."""
    cache = DecisionCache(tmp_path / "c.json")
    assert cache.update(MappingProxyType({"mine": entry()}))
    assert list(DecisionCache(tmp_path / "c.json").entries()) == ["mine"]


def test_a_parse_by_another_thread_during_a_locked_read_leaves_the_write_as_a_fresh_process_s(
    tmp_path: Path,
) -> None:
    """A reader thread's parse in the midst of a writer's locked read changes no written byte."""
    from chunktune._settled import LastParse

    path, copy = tmp_path / "c.json", tmp_path / "copy.json"
    # an int where the entry read holds a float: a table converted afresh is other bytes
    assert DecisionCache(path).update({"a.p": entry(3, created=1_700_000_000), "b.p": entry(5)})
    copy.write_bytes(path.read_bytes())
    writer = DecisionCache(path)
    file = writer._file

    class Interleaved(LastParse[dict[str, CacheEntry]]):
        """Another thread reads the file (its own bytes object) as the writer keeps its parse."""

        done = False

        def keep(self, version: Any, parsed: dict[str, CacheEntry]) -> None:
            if not Interleaved.done:
                Interleaved.done = True
                raw = path.read_bytes()
                reader = threading.Thread(target=file.parse, args=(raw,), kwargs={"mtime": 0.0})
                reader.start()
                reader.join()
            super().keep(version, parsed)

    file._memo = Interleaved()
    assert writer.put("new.p", entry(4, created=1_700_000_000.0))
    assert Interleaved.done
    assert DecisionCache(copy).put("new.p", entry(4, created=1_700_000_000.0))
    assert path.read_bytes() == copy.read_bytes()
