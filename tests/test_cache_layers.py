"""The read-only system cache: consulted after the user's cache, never written or moved."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

import attrs
import pytest
from _forking import run_forked

import chunktune
from chunktune import _cache_layers
from chunktune._cache_entry import CacheEntry, entry_to_table
from chunktune._cache_format import SCHEMA
from chunktune._cache_layers import SystemCache, system_cache_for
from chunktune._reading import read_capped
from chunktune.sim import SimulatedWorkload, env_costs


def workload(name: str = "layered") -> SimulatedWorkload:
    return SimulatedWorkload(env_costs("blocked", 64), nthread=2, name=name)


def ship(isolated: Path, monkeypatch: pytest.MonkeyPatch, *, env: bool = True) -> Path:
    """Resolve once into a cache, make that file the system layer, start a fresh user cache."""
    first = chunktune.resolve_sync(workload(), policy="quick")
    assert first.source == "benchmark"
    system = isolated / "image" / "system.json"
    system.parent.mkdir()
    (isolated / "cache.json").rename(system)
    monkeypatch.setenv("CHUNKTUNE_CACHE", str(isolated / "user.json"))
    if env:
        monkeypatch.setenv("CHUNKTUNE_SYSTEM_CACHE", str(system))
    return system


def snapshot(path: Path) -> tuple[bytes, int]:
    return path.read_bytes(), path.stat().st_mtime_ns


def test_the_system_cache_answers_a_miss_in_the_user_cache(
    isolated: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A key only the system file holds is served from it, without a sweep or a write."""
    system = ship(isolated, monkeypatch)
    before = snapshot(system)
    decision = chunktune.resolve_sync(workload(), policy="quick")
    assert decision.source == "cache"
    assert decision.probe_seconds == 0.0
    assert snapshot(system) == before
    assert not (isolated / "user.json").exists()


def test_a_sweep_writes_the_user_cache_only(
    isolated: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A job the system file does not answer is measured and stored in the user's cache."""
    system = ship(isolated, monkeypatch)
    before = snapshot(system)
    decision = chunktune.resolve_sync(workload("other"), policy="quick")
    assert decision.source == "benchmark"
    assert snapshot(system) == before
    assert decision.key in chunktune.DecisionCache(isolated / "user.json").entries()


def test_the_user_cache_wins_over_the_system_cache(
    isolated: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where both hold the key, the user's own entry is served."""
    system = ship(isolated, monkeypatch)
    key, shipped = next(iter(chunktune.DecisionCache(system).entries().items()))
    mine = 1 if shipped.chunk_size != 1 else 2
    chunktune.DecisionCache(isolated / "user.json").put(key, attrs.evolve(shipped, chunk_size=mine))
    assert chunktune.resolve_sync(workload(), policy="quick").chunk_size == mine


def test_settings_name_the_system_cache_and_the_variable_wins(
    isolated: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """[cache] system_path names the layer; $CHUNKTUNE_SYSTEM_CACHE overrides it."""
    system = ship(isolated, monkeypatch, env=False)
    config = isolated / "chunktune.toml"
    config.write_text(f'[cache]\nsystem_path = "{system}"\n')
    assert chunktune.load_settings(config).cache.system_path == str(system)
    assert chunktune.resolve_sync(workload(), policy="quick").source == "cache"
    monkeypatch.setenv("CHUNKTUNE_SYSTEM_CACHE", str(isolated / "elsewhere.json"))
    assert chunktune.load_settings(config).cache.system_path == str(isolated / "elsewhere.json")


@pytest.mark.parametrize(
    "content",
    [
        pytest.param(b"\x00not json", id="garbage"),
        pytest.param(b'{"schema": 99, "entries": {}}', id="newer-schema"),
    ],
)
def test_an_unusable_system_cache_is_ignored_and_left_alone(
    isolated: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    content: bytes,
) -> None:
    """A broken system file is warned about once and ignored, never moved aside or rewritten."""
    system = isolated / "system.json"
    system.write_bytes(content)
    monkeypatch.setenv("CHUNKTUNE_SYSTEM_CACHE", str(system))
    with caplog.at_level(logging.WARNING, logger="chunktune"):
        assert chunktune.resolve_sync(workload(), policy="quick").source == "benchmark"
        assert chunktune.resolve_sync(workload("other"), policy="quick").source == "benchmark"
    assert system.read_bytes() == content
    assert os.listdir(isolated).count("system.json") == 1
    assert not [n for n in os.listdir(isolated) if n.startswith("system.json.")]
    assert sum("system cache" in r.getMessage() for r in caplog.records) == 1


def test_a_system_cache_that_never_ends_is_ignored_at_its_cap(
    isolated: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """$CHUNKTUNE_SYSTEM_CACHE=/dev/zero is read to the cap, warned about once and ignored."""
    from chunktune import _cache_layers

    monkeypatch.setattr(_cache_layers, "MAX_CACHE_BYTES", 2**20)  # 256 MiB of zeros, spared
    monkeypatch.setenv("CHUNKTUNE_SYSTEM_CACHE", "/dev/zero")
    with caplog.at_level(logging.WARNING, logger="chunktune"):
        assert chunktune.resolve_sync(workload(), policy="quick").source == "benchmark"
    (warning,) = [r.getMessage() for r in caplog.records if "system cache" in r.getMessage()]
    assert warning == (
        "chunktune: system cache /dev/zero holds more than 1 MiB, no cache does; "
        "continuing without it"
    )


def test_a_damaged_system_cache_serves_its_whole_entries(
    isolated: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A system file cut inside its last entry still answers the keys of its whole entries."""
    keys = {n: chunktune.resolve_sync(workload(n), policy="quick").key for n in ("a", "b")}
    system = ship(isolated, monkeypatch)  # and ship's own entry
    (keys["layered"],) = set(chunktune.DecisionCache(system).entries()) - set(keys.values())
    raw = system.read_bytes()
    names = sorted(keys, key=lambda n: raw.index(f'"{keys[n]}"'.encode()))
    start = raw.index(f'"{keys[names[-1]]}"'.encode())
    system.write_bytes(raw[: start + (len(raw) - start) // 2])  # the last entry cut
    cut = snapshot(system)
    with caplog.at_level(logging.WARNING, logger="chunktune"):
        sources = [chunktune.resolve_sync(workload(n), policy="quick").source for n in names]
    assert sources == ["cache", "cache", "benchmark"]
    assert snapshot(system) == cut
    (said,) = [r.getMessage() for r in caplog.records if "system cache" in r.getMessage()]
    assert "serving the 2 of its entries that are whole" in said


def test_a_missing_system_cache_is_not_an_error(
    isolated: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A system path that does not exist (an image without answers) just finds nothing."""
    monkeypatch.setenv("CHUNKTUNE_SYSTEM_CACHE", str(isolated / "absent.json"))
    assert chunktune.resolve_sync(workload(), policy="quick").source == "benchmark"
    assert not (isolated / "absent.json").exists()


def _entry(chunk: int) -> CacheEntry:
    return CacheEntry(chunk_size=chunk, native_chunk=1, reason="measured")


def test_a_replaced_system_file_is_read_again(tmp_path: Path) -> None:
    """A system file changed under a running process (an image update) serves its new entries."""
    path = tmp_path / "system.json"
    assert chunktune.DecisionCache(path).put("a" * 32, _entry(4))
    system = SystemCache(path)
    assert set(system.entries()) == {"a" * 32}
    assert chunktune.DecisionCache(path).put("b" * 32, _entry(8))
    assert set(system.entries()) == {"a" * 32, "b" * 32}


def test_a_disabled_cache_consults_no_system_cache(tmp_path: Path) -> None:
    """[cache] enabled = false turns the system layer off too: nothing is served from it."""
    settings = chunktune.load_settings()
    on = attrs.evolve(settings.cache, system_path=str(tmp_path / "system.json"))
    assert system_cache_for(attrs.evolve(settings, cache=on)) is not None
    off = attrs.evolve(on, enabled=False)
    assert system_cache_for(attrs.evolve(settings, cache=off)) is None


def test_invalid_entries_of_a_system_file_are_named_in_one_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A system file's invalid entries are skipped, and one warning names them."""
    path = tmp_path / "system.json"
    good = entry_to_table(_entry(4))
    doc = {"schema": SCHEMA, "entries": {"good": good, "bad": {**good, "chunk_size": -1}}}
    path.write_text(json.dumps(doc))
    system = SystemCache(path)
    with caplog.at_level(logging.WARNING, logger="chunktune"):
        assert set(system.entries()) == {"good"}
        assert set(system.entries()) == {"good"}
    (said,) = [r.getMessage() for r in caplog.records]
    assert "holds 1 invalid entries (bad)" in said and str(path) in said


def test_a_missing_system_file_is_warned_about_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Every lookup of a system file that is not there finds nothing; the warning comes once."""
    system = SystemCache(tmp_path / "absent.json")
    with caplog.at_level(logging.WARNING, logger="chunktune"):
        for _ in range(3):
            assert system.lookup("a" * 32, policy_hash="p", rule="", effort=0) is None
    assert len(caplog.records) == 1 and "is unavailable" in caplog.records[0].getMessage()


def test_a_system_file_rewritten_within_one_clock_tick_is_read_afresh(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A system file replaced within its stamp's tick, every field of its stat kept, is read."""
    from chunktune import _cache_layers
    from chunktune._cache_transfer import write_cache_file

    def shipped(chunk: int) -> dict[str, CacheEntry]:
        made = CacheEntry(chunk_size=chunk, native_chunk=12, reason="x", num_envs=64, nthread=2)
        return {"k.abc": made}

    path = tmp_path / "system.json"
    write_cache_file(path, shipped(4))
    first, real_stat = path.stat(), Path.stat

    def one_tick(self: Path, *, follow_symlinks: bool = True) -> os.stat_result:
        # a clock tick that never ends, the inode reused: every stat of the file is this one
        return first if self == path else real_stat(self, follow_symlinks=follow_symlinks)

    monkeypatch.setattr(Path, "stat", one_tick)
    looked = max(first.st_mtime_ns, first.st_ctime_ns) + 10**8  # 0.1 s after its stamp
    monkeypatch.setattr(_cache_layers, "time_ns", lambda: looked, raising=False)
    system = SystemCache(path)
    assert system.entries()["k.abc"].chunk_size == 4
    write_cache_file(path, shipped(8))  # the image's file replaced within the tick
    assert system.entries()["k.abc"].chunk_size == 8


def test_a_system_file_with_many_invalid_entries_names_the_first_five(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Of six invalid entries of a system file, the one warning counts six and names five."""
    path = tmp_path / "system.json"
    good = entry_to_table(_entry(4))
    bad = {f"bad{i}": {**good, "chunk_size": -1} for i in range(1, 7)}
    path.write_text(json.dumps({"schema": SCHEMA, "entries": {"good": good, **bad}}))
    with caplog.at_level(logging.WARNING, logger="chunktune"):
        assert set(SystemCache(path).entries()) == {"good"}
    (said,) = [r.getMessage() for r in caplog.records]
    assert "holds 6 invalid entries (bad1, bad2, bad3, bad4, bad5);" in said


def test_a_newer_system_file_serves_nothing_however_it_is_laid_out(tmp_path: Path) -> None:
    """A system file of a newer schema is ignored whole, even laid out where its entries salvage."""
    path = tmp_path / "system.json"
    assert chunktune.DecisionCache(path).put("a" * 32, _entry(4))
    raw = path.read_bytes()
    assert raw.count(b'\n "schema": 1\n') == 1
    # a newer chunktune's own layout: its schema line is not where this one writes it
    path.write_bytes(raw.replace(b'\n "schema": 1\n', b'\n "schema" : 2\n'))
    assert SystemCache(path).entries() == {}


def _settled_after(path: Path, lag_ns: int) -> int:
    st = path.stat()
    return max(st.st_mtime_ns, st.st_ctime_ns) + lag_ns


def test_a_settled_system_file_is_not_read_again_while_its_stat_holds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Lookups of a system file settled past its stamp's tick, its stat unchanged, read it once."""
    path = tmp_path / "system.json"
    assert chunktune.DecisionCache(path).put("a" * 32, _entry(4))
    looked = _settled_after(path, 10**10)  # 10 s after its stamp
    monkeypatch.setattr(_cache_layers, "time_ns", lambda: looked)
    reads: list[Path] = []
    real = read_capped

    def counted(file: Path, cap: int) -> bytes:
        reads.append(file)
        return real(file, cap)

    monkeypatch.setattr(_cache_layers, "read_capped", counted)
    system = SystemCache(path)
    for _ in range(3):
        assert set(system.entries()) == {"a" * 32}
    assert reads == [path]


@pytest.mark.parametrize(
    "lag_ns", [pytest.param(10**8, id="within-its-tick"), pytest.param(10**10, id="settled")]
)
def test_each_read_of_a_system_file_hands_out_entries_of_its_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, lag_ns: int
) -> None:
    """A caller emptying what entries() gave it takes nothing from the next read's answer."""
    path = tmp_path / "system.json"
    assert chunktune.DecisionCache(path).put("a" * 32, _entry(4))
    looked = _settled_after(path, lag_ns)
    monkeypatch.setattr(_cache_layers, "time_ns", lambda: looked)
    system = SystemCache(path)
    for _ in range(3):
        got = system.entries()
        assert set(got) == {"a" * 32}
        got.clear()


def test_a_child_forked_while_the_systems_lock_is_held_finds_its_system_cache(
    tmp_path: Path,
) -> None:
    """A fork while the system caches' lock is held leaves the child a free lock of its own."""
    settings = chunktune.load_settings()
    on = attrs.evolve(settings.cache, system_path=str(tmp_path / "system.json"))
    named = attrs.evolve(settings, cache=on)

    def child() -> None:
        assert system_cache_for(named) is not None

    with _cache_layers._systems_lock:
        status = run_forked(child, hang_guard_s=20)
    assert status == 0


def test_the_entry_behind_a_shared_decision_is_read_from_the_system_file_without_a_copy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """entry_of reads one key of the system layer: the stored entry, and entries() never called."""
    from chunktune._ray_job import entry_of

    system = tmp_path / "system.json"
    stored = CacheEntry(chunk_size=4, native_chunk=3, reason="measured on the image")
    assert chunktune.DecisionCache(system).put("a" * 32, stored)
    assert chunktune.DecisionCache(system).put("b" * 32, _entry(8))
    here = chunktune.load_settings()
    cache = attrs.evolve(here.cache, path=str(tmp_path / "user.json"), system_path=str(system))
    here = attrs.evolve(here, cache=cache)
    copies: list[int] = []
    whole = SystemCache.entries

    def counted(self: SystemCache) -> dict[str, CacheEntry]:
        copies.append(1)
        return whole(self)

    monkeypatch.setattr(SystemCache, "entries", counted)
    decision = chunktune.Decision(
        chunk_size=4, native_chunk=3, source="cache", reason="cached", key="a" * 32
    )
    entry = entry_of(
        decision, settings=here, policy=here.active, signature={"kind": "x"},
        device={"cpu": "y"}, num_envs=64, nthread=2,
    )  # fmt: skip
    assert (entry, copies) == (stored, [])
    system_cache = system_cache_for(here)
    assert system_cache is not None
    assert [system_cache.get(k) for k in ("a" * 32, "c" * 32)] == [stored, None]
    assert copies == []


def test_the_system_layer_takes_serves_none_as_the_users_cache_does(tmp_path: Path) -> None:
    """serves=None (the default) refuses no entry in SystemCache.lookup, as in DecisionCache's."""
    import inspect

    from chunktune._cache_layers import system_lookup

    path = tmp_path / "system.json"
    key = "a" * 32 + ".p"
    stored = _entry(4)
    assert chunktune.DecisionCache(path).put(key, stored)
    ask: dict[str, Any] = {"policy_hash": "p", "rule": "r", "effort": 1, "serves": None}
    users = chunktune.DecisionCache(path).lookup("a" * 32, **ask)
    assert SystemCache(path).lookup("a" * 32, **ask) == users == (key, stored)
    here = chunktune.load_settings()
    here = attrs.evolve(here, cache=attrs.evolve(here.cache, system_path=str(path)))
    assert system_lookup(here, "a" * 32, **ask) == users
    defaults = {
        inspect.signature(f).parameters["serves"].default
        for f in (chunktune.DecisionCache.lookup, SystemCache.lookup, system_lookup)
    }
    assert defaults == {None}
