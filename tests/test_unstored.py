"""A decision the cache could not store is remembered in the process: one sweep per key."""

from __future__ import annotations

import errno
import json
import logging
import math
import os
import subprocess
import sys
import threading
import types
from collections.abc import Mapping
from pathlib import Path

import anyio
import anyio.to_thread
import attrs
import pytest
from _forking import run_forked
from _full_entry import entry
from _holders import holding, holding_async

import chunktune
from chunktune import _cache_lock, _keys, _threads, _unstored
from chunktune._cache import DecisionCache
from chunktune._cache_entry import CacheEntry
from chunktune._cache_file import CacheFile
from chunktune._decision import Decision
from chunktune._load import MachineLoad
from chunktune.sim import Noise, SimulatedWorkload

pytestmark = pytest.mark.anyio


class Counted(SimulatedWorkload):
    """A simulated pool that counts its run() calls: what a resolve measured."""

    def __init__(self, num_envs: int = 256, costs: list[float] | None = None) -> None:
        if costs is None:
            costs = list(
                SimulatedWorkload.from_layout("blocked", num_envs=num_envs, nthread=4).costs
            )
        super().__init__(costs, nthread=4, noise=Noise(sigma=0.01))
        self.runs = 0

    def run(self, chunk_size: int | None) -> float:
        self.runs += 1
        return super().run(chunk_size)


@pytest.fixture
def uncreatable(isolated: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A cache path in a folder under a regular file: nothing can be made there (as root too)."""
    (isolated / "plain").write_text("a file, not a folder")
    path = isolated / "plain" / "cache.json"
    monkeypatch.setenv("CHUNKTUNE_CACHE", str(path))
    return path


@pytest.fixture
def full_disk(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Every write of the cache file fails as on a full disk; the list counts the tries."""
    tries: list[int] = []

    def write(self: CacheFile, entries: Mapping[str, object], **written: object) -> None:
        tries.append(1)
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(CacheFile, "write", write)
    return tries


async def test_an_uncreatable_cache_measures_a_key_once(uncreatable: Path) -> None:
    """After a sweep the cache could not keep, the same key is answered with no call measured."""
    w = Counted()
    first = await chunktune.resolve(w, policy="quick")
    assert first.source == "benchmark" and w.runs > 0
    runs = w.runs
    again = await chunktune.resolve(w, policy="quick")
    other_object = await chunktune.resolve(Counted(), policy="quick")  # keyed alike
    assert w.runs == runs
    for second in (again, other_object):
        assert second.source == "cache" and second.probe_seconds == 0.0
        assert second.chunk_size == first.chunk_size and second.key == first.key
        assert second.timings == first.timings
        assert second.reason.startswith("remembered in this process, measured earlier but not")
        assert str(uncreatable) in second.reason and "Not a directory" in second.reason
        assert second.reason.endswith(first.reason)


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into a read-only folder")
def test_a_read_only_folder_measures_a_key_once(
    isolated: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cache in a folder without write permission: the key is measured once per process."""
    folder = isolated / "ro"
    folder.mkdir()
    folder.chmod(0o555)
    monkeypatch.setenv("CHUNKTUNE_CACHE", str(folder / "cache.json"))
    try:
        w = Counted()
        assert chunktune.resolve_sync(w, policy="quick").source == "benchmark"
        runs = w.runs
        second = chunktune.resolve_sync(w, policy="quick")
        assert second.source == "cache" and "Permission denied" in second.reason
        assert w.runs == runs
    finally:
        folder.chmod(0o755)


def test_threads_with_loops_of_their_own_share_what_was_remembered(uncreatable: Path) -> None:
    """resolve_sync from several threads (each its own loop) after the sweep measures nothing."""
    w = Counted()
    chunktune.resolve_sync(w, policy="quick")
    runs = w.runs
    sources: list[str] = []

    def again() -> None:
        sources.append(chunktune.resolve_sync(Counted(), policy="quick").source)

    threads = [threading.Thread(target=again) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sources == ["cache"] * 4 and w.runs == runs


def test_resolve_sync_answers_a_remembered_key_without_measuring(uncreatable: Path) -> None:
    """resolve_sync (what compat calls) answers a remembered key on its thread, no call made."""
    w = Counted()
    assert chunktune.resolve_sync(w, policy="quick").source == "benchmark"
    runs = w.runs
    assert chunktune.resolve_sync(w, policy="quick").source == "cache"
    assert w.runs == runs


async def test_a_store_that_fails_is_remembered_until_the_cache_can_be_written(
    isolated: Path, full_disk: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A full disk: the key is remembered until a refresh stores it; then the file answers."""
    w = Counted()
    first = await chunktune.resolve(w, policy="quick")
    assert first.source == "benchmark" and full_disk
    runs, tries = w.runs, len(full_disk)
    second = await chunktune.resolve(w, policy="quick")
    assert (w.runs, len(full_disk)) == (runs, tries)  # nothing measured, nothing written
    assert second.source == "cache" and "No space left on device" in second.reason
    monkeypatch.undo()  # the disk has room again, and the cache is where conftest put it
    monkeypatch.setenv("CHUNKTUNE_CACHE", str(isolated / "cache.json"))
    assert (await chunktune.resolve(w, policy="quick")).reason.startswith("remembered")
    refreshed = await chunktune.resolve(w, policy="quick", refresh=True)
    assert refreshed.source == "benchmark" and w.runs > runs
    runs = w.runs
    hit = await chunktune.resolve(w, policy="quick")
    assert hit.source == "cache" and hit.reason.startswith("cached") and w.runs == runs
    assert _unstored.recall(first.key, lambda _: True) is None  # the file holds it now


@pytest.mark.parametrize(
    ("change", "kw"),
    [
        pytest.param("num_envs", {}, id="another-key"),
        pytest.param("policy", {"policy": "balanced"}, id="another-policy"),
        pytest.param("refresh", {"refresh": True}, id="refresh"),
    ],
)
async def test_another_key_or_a_refresh_measures_again(
    uncreatable: Path, change: str, kw: dict[str, object]
) -> None:
    """Only the whole key is remembered, and refresh measures it again (and remembers that)."""
    w = Counted()
    await chunktune.resolve(w, policy="quick")
    runs = w.runs
    asked = {"policy": "quick", **kw}
    other = Counted(num_envs=192) if change == "num_envs" else w
    decision = await chunktune.resolve(other, **asked)  # type: ignore[arg-type]
    assert decision.source == "benchmark" and other.runs > (0 if other is not w else runs)
    if change == "refresh":
        runs = w.runs
        assert (await chunktune.resolve(w, policy="quick")).source == "cache"
        assert w.runs == runs


async def test_a_cache_disabled_in_settings_measures_every_time(isolated: Path) -> None:
    """``[cache] enabled = false`` (benchmarks rely on it) measures each resolve: no memory."""
    (isolated / "off.toml").write_text("[cache]\nenabled = false\n")
    settings = chunktune.load_settings(isolated / "off.toml")
    w = Counted()
    for _ in range(2):
        runs = w.runs
        assert (await chunktune.resolve(w, settings=settings, policy="quick")).source == (
            "benchmark"
        )
        assert w.runs > runs


async def test_a_fallback_is_not_remembered(uncreatable: Path) -> None:
    """A failing workload's native fallback is never remembered: the next resolve tries again."""

    class Failing(Counted):
        def run(self, chunk_size: int | None) -> float:
            super().run(chunk_size)
            raise RuntimeError("pool died")

    w = Failing()
    for _ in range(2):
        runs = w.runs
        decision = await chunktune.resolve(w, policy="quick")
        assert decision.source == "fallback" and w.runs == runs + 1


def test_a_decision_of_native_alone_is_not_remembered(uncreatable: Path) -> None:
    """One that timed native alone (a call too slow for the budget) is not stored, nor kept."""
    w = Counted(costs=[0.5] * 64)  # a modeled call of 8 s, past the budget
    decision = chunktune.resolve_sync(w, policy="quick")
    assert decision.source == "benchmark" and w.runs > 0
    assert all(chunk is None for chunk in decision.timings)
    runs = w.runs
    assert chunktune.resolve_sync(w, policy="quick").source == "benchmark"
    assert w.runs > runs


def _decision(reason: str = "chose 8", load: MachineLoad | None = None) -> Decision:
    return Decision(
        chunk_size=8, native_chunk=6, source="benchmark", reason=reason, key="k", load=load
    )


def test_the_memory_is_bounded_least_recently_used_first() -> None:
    """Past MAX_ENTRIES the least recently used key is let go; a recalled one is kept."""
    for i in range(_unstored.MAX_ENTRIES):
        _unstored.keep(f"k{i}", _decision(), "full")
    assert _unstored.recall("k0", lambda _: True) is not None  # now the most recent
    _unstored.keep("new", _decision(), "full")
    assert _unstored.recall("k1", lambda _: True) is None
    assert _unstored.recall("k0", lambda _: True) is not None
    assert _unstored.recall("new", lambda _: True) is not None


def test_a_busy_decision_answers_only_while_the_cache_entry_would() -> None:
    """``serves`` (the cache's busy-machine test) decides whether a kept decision answers."""
    busy = MachineLoad(9.0, 2)
    _unstored.keep("k", _decision(load=busy), "full")
    assert _unstored.recall("k", lambda d: d.load is None or not d.load.busy) is None
    assert _unstored.recall("k", lambda _: True) is not None


def test_a_kept_decision_is_a_copy_the_caller_cannot_change() -> None:
    """Editing a returned decision's timings changes neither what is kept nor later answers."""
    _unstored.keep("k", attrs.evolve(_decision(), timings={None: 1.0, 8: 0.9}), "full")
    first = _unstored.recall("k", lambda _: True)
    assert first is not None
    first.timings[8] = 5.0
    again = _unstored.recall("k", lambda _: True)
    assert again is not None and again.timings[8] == 0.9


def test_threads_keeping_and_recalling_at_once_lose_nothing() -> None:
    """Keys kept from several threads at once are all there afterwards."""

    def keep(n: int) -> None:
        for i in range(50):
            _unstored.keep(f"{n}-{i}", _decision(), "full")
            _unstored.recall(f"{n}-{i // 2}", lambda _: True)

    threads = [threading.Thread(target=keep, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(_unstored.recall(f"{n}-49", lambda _: True) for n in range(4))


def test_a_fork_child_answers_from_its_parents_memory(uncreatable: Path) -> None:
    """A child forked after a sweep answers the key without measuring (same machine, same key)."""
    w = Counted()
    chunktune.resolve_sync(w, policy="quick")
    runs = w.runs

    def child() -> None:
        logging.disable(logging.CRITICAL)  # the child's warnings are not this test's
        decision = chunktune.resolve_sync(w, policy="quick")
        raise SystemExit(0 if decision.source == "cache" and w.runs == runs else 3)

    assert run_forked(child, hang_guard_s=60.0) == 0


def test_a_key_kept_again_becomes_the_most_recent() -> None:
    """Keeping a key anew (a refresh the cache could not store) makes it the last let go."""
    for i in range(_unstored.MAX_ENTRIES):
        _unstored.keep(f"k{i}", _decision(), "full")
    _unstored.keep("k0", _decision("chose 8 again"), "full")
    _unstored.keep("new", _decision(), "full")
    assert _unstored.recall("k1", lambda _: True) is None
    kept = _unstored.recall("k0", lambda _: True)
    assert kept is not None and kept.reason.endswith("chose 8 again")


def test_as_many_keys_as_readme_gives_are_all_remembered() -> None:
    """README promises 256 keys: the 256th kept leaves the first still there."""
    for i in range(256):
        _unstored.keep(f"k{i}", _decision(), "full")
    assert all(_unstored.recall(f"k{i}", lambda _: True) is not None for i in range(256))


def test_a_decision_edited_after_it_was_kept_leaves_the_memory_as_it_was() -> None:
    """The caller editing the decision it handed to keep changes no later answer."""
    handed = attrs.evolve(_decision(), timings={None: 1.0, 8: 0.9})
    _unstored.keep("k", handed, "full")
    handed.timings[8] = 5.0
    kept = _unstored.recall("k", lambda _: True)
    assert kept is not None and kept.timings[8] == 0.9


def test_put_remembers_under_the_key_a_resolve_looks_up(uncreatable: Path) -> None:
    """An entry stored under one key and looked up by another (kept_as) is kept by the latter."""
    _unstored.put(
        "job.theirs", _decision(), DecisionCache(uncreatable), entry(), kept_as="job.ours"
    )
    assert _unstored.holds("job.ours") and not _unstored.holds("job.theirs")


def test_put_that_stores_forgets_what_was_kept_under_the_lookup_key(isolated: Path) -> None:
    """Once the cache stores the entry, the decision remembered under kept_as is let go."""
    _unstored.keep("job.ours", _decision(), "full")
    cache = DecisionCache(isolated / "cache.json")
    _unstored.put("job.theirs", _decision(), cache, entry(), kept_as="job.ours")
    assert not _unstored.holds("job.ours")


def test_an_entry_the_cache_refuses_as_invalid_is_not_remembered(uncreatable: Path) -> None:
    """A store that fails because the entry would not read back (a NaN timing) keeps nothing."""
    bad = entry(timings={None: math.nan})
    _unstored.put("k", _decision(), DecisionCache(uncreatable), bad)
    assert not _unstored.holds("k")


def test_a_fork_child_can_keep_while_the_parent_held_the_memory_at_the_fork() -> None:
    """A child forked while a parent's thread held the memory's lock does not deadlock on it."""

    def child() -> None:
        _unstored.keep("child", _decision(), "full")
        raise SystemExit(0 if _unstored.holds("child") else 3)

    with _unstored._lock:
        status = run_forked(child, hang_guard_s=10.0)
    assert status == 0


def test_a_decision_remembered_after_the_request_was_keyed_still_answers_it(
    uncreatable: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A flight that landed (remembered) between this resolve's keying and its owning answers it."""
    monkeypatch.setattr(os, "getloadavg", lambda: (0.1, 0.1, 0.1))  # calm: the decision serves
    first = chunktune.resolve_sync(Counted(), policy="quick")
    assert first.source == "benchmark"
    # as if keyed before that flight landed: the keying's look finds nothing remembered
    monkeypatch.setattr(_keys, "remembered", lambda req, key: None)
    late = Counted()
    again = chunktune.resolve_sync(late, policy="quick")
    assert (again.source, again.chunk_size, late.runs) == ("cache", first.chunk_size, 0)


# ---------------------------------------------------------------- written later


@pytest.fixture
def stalled(isolated: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The cache file, whose writes give up after a 0.2 s stall of the write lock's holder."""
    monkeypatch.setattr(_cache_lock, "WRITE_STALL_S", 0.2)
    return isolated / "cache.json"


def _file_holds(cache_file: Path) -> dict[str, object]:
    """The JSON cache file's entries as written, by key (none if there is no file)."""
    if not cache_file.exists():
        return {}
    entries: dict[str, object] = json.loads(cache_file.read_text())["entries"]
    return entries


def _refused(cache_file: Path, workload: Counted) -> Decision:
    """A resolve whose put another process's idle hold of the write lock makes give up."""
    with holding(DecisionCache(cache_file).lock_path):
        decision = chunktune.resolve_sync(workload, policy="quick")
    assert decision.source == "benchmark" and _unstored.holds(decision.key)
    assert decision.key not in _file_holds(cache_file)
    return decision


def test_a_put_given_up_at_the_stall_limit_is_written_by_the_next_write(stalled: Path) -> None:
    """A decision whose put was given up goes into the file with this process's next write."""
    first = _refused(stalled, Counted())
    other = chunktune.resolve_sync(Counted(num_envs=192), policy="quick")
    assert other.source == "benchmark"
    assert {first.key, other.key} <= _file_holds(stalled).keys()
    assert not _unstored.holds(first.key)  # the file answers it now
    w = Counted()
    hit = chunktune.resolve_sync(w, policy="quick")
    assert (hit.source, hit.chunk_size, w.runs) == ("cache", first.chunk_size, 0)
    assert hit.reason.startswith("cached")


_STORE = (  # another process storing an entry of its own under a key
    "import sys\n"
    "sys.path.insert(0, sys.argv[3])\n"
    "from _full_entry import entry\n"
    "from chunktune._cache import DecisionCache\n"
    "assert DecisionCache(sys.argv[1]).put(sys.argv[2], entry(3))\n"
)


def test_an_entry_another_process_stored_meanwhile_is_not_overwritten(stalled: Path) -> None:
    """A key another process stored after this one's put gave up keeps that process's entry."""
    first = _refused(stalled, Counted())
    tests = str(Path(__file__).parent)
    subprocess.run([sys.executable, "-c", _STORE, str(stalled), first.key, tests], check=True)
    theirs = _file_holds(stalled)[first.key]
    chunktune.resolve_sync(Counted(num_envs=192), policy="quick")  # this process writes
    assert _file_holds(stalled)[first.key] == theirs
    assert not _unstored.holds(first.key)  # the file's entry answers


def test_a_retry_that_finds_every_kept_key_stored_lets_them_go(stalled: Path) -> None:
    """A retry with nothing to write (another process stored the keys) forgets what it kept."""
    first = _refused(stalled, Counted())
    tests = str(Path(__file__).parent)
    subprocess.run([sys.executable, "-c", _STORE, str(stalled), first.key, tests], check=True)
    assert DecisionCache(stalled).store_kept()  # what a resolve's retry thread calls
    assert not _unstored.holds(first.key)
    DecisionCache(stalled).remove([first.key])  # `chunktune cache remove`
    chunktune.resolve_sync(Counted(num_envs=192), policy="quick")  # this process writes
    assert first.key not in _file_holds(stalled)  # not brought back from memory


async def test_a_later_resolve_writes_the_kept_decision_off_the_loop(
    stalled: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A resolve answered from memory starts the write in a thread; the answer waits for no lock."""
    first = await anyio.to_thread.run_sync(_refused, stalled, Counted())
    monkeypatch.setattr(_unstored, "RETRY_S", 0.0)
    monkeypatch.setattr(_cache_lock, "WRITE_STALL_S", 30.0)  # the retry waits for the holder
    writers: list[str] = []
    store_kept = DecisionCache.store_kept

    def recorded(self: DecisionCache) -> bool:
        writers.append(threading.current_thread().name)
        return store_kept(self)

    monkeypatch.setattr(DecisionCache, "store_kept", recorded)
    async with holding_async(DecisionCache(stalled).lock_path):
        again = await chunktune.resolve(Counted(), policy="quick")
        assert again.source == "cache" and again.reason.startswith("remembered")
        assert first.key not in _file_holds(stalled)  # its write waits for the lock's holder
    await anyio.to_thread.run_sync(_threads.wait_for_stores)
    assert writers == [_threads.STORE_THREAD]  # not the loop's thread, nor a worker's
    assert first.key in _file_holds(stalled) and not _unstored.holds(first.key)
    hit = await chunktune.resolve(Counted(), policy="quick")
    assert hit.reason.startswith("cached") and hit.chunk_size == first.chunk_size


def test_an_unwritable_cache_is_not_tried_again_within_the_backoff(
    uncreatable: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Resolves of a key kept for an uncreatable cache retry its write at most once per RETRY_S."""
    tries: list[int] = []
    store_kept = DecisionCache.store_kept

    def counted(self: DecisionCache) -> bool:
        tries.append(1)
        return store_kept(self)

    monkeypatch.setattr(DecisionCache, "store_kept", counted)
    assert chunktune.resolve_sync(Counted(), policy="quick").source == "benchmark"
    for _ in range(3):  # a workload object of its own each: no answer of a moment ago (_recent)
        assert chunktune.resolve_sync(Counted(), policy="quick").source == "cache"
    _threads.wait_for_stores()
    assert tries == []  # the failed put was under RETRY_S ago
    monkeypatch.setattr(_unstored, "RETRY_S", 0.0)
    again = chunktune.resolve_sync(Counted(), policy="quick")
    _threads.wait_for_stores()
    assert tries == [1] and again.source == "cache"
    assert _unstored.holds(again.key) and not uncreatable.exists()  # refused again: still kept
    monkeypatch.setattr(_unstored, "RETRY_S", 3600.0)
    chunktune.resolve_sync(Counted(), policy="quick")
    _threads.wait_for_stores()
    assert tries == [1]  # that retry's failure starts the wait afresh


def test_a_cache_hit_starts_no_retry(stalled: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An entry read from the file answers with no write tried, whatever is kept for other keys."""
    chunktune.resolve_sync(Counted(num_envs=192), policy="quick")  # stored: hits from now on
    _refused(stalled, Counted())
    _threads.wait_for_stores()  # a store thread of those resolves may be ending even now
    monkeypatch.setattr(_unstored, "RETRY_S", 0.0)
    monkeypatch.setattr(DecisionCache, "store_kept", lambda self: pytest.fail("a write tried"))
    for _ in range(3):
        hit = chunktune.resolve_sync(Counted(num_envs=192), policy="quick")
        assert hit.reason.startswith("cached")
    assert not [t for t in threading.enumerate() if t.name == _threads.STORE_THREAD]


def test_an_interrupt_in_a_retry_thread_leaves_no_bare_traceback(
    stalled: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A KeyboardInterrupt in a retry's thread is logged as a bug; the decision stays kept."""
    first = _refused(stalled, Counted())
    monkeypatch.setattr(_unstored, "RETRY_S", 0.0)
    hooked: list[threading.ExceptHookArgs] = []
    monkeypatch.setattr(threading, "excepthook", hooked.append)
    store_kept = DecisionCache.store_kept

    def failing(self: DecisionCache) -> bool:
        raise KeyboardInterrupt  # sent to the thread (PyThreadState_SetAsyncExc, a debugger)

    monkeypatch.setattr(DecisionCache, "store_kept", failing)
    assert chunktune.resolve_sync(Counted(), policy="quick").source == "cache"
    _threads.wait_for_stores()
    assert hooked == [] and _unstored.holds(first.key)
    monkeypatch.setattr(DecisionCache, "store_kept", store_kept)
    chunktune.resolve_sync(Counted(), policy="quick")  # no retry left marked as in flight
    _threads.wait_for_stores()
    assert first.key in _file_holds(stalled) and not _unstored.holds(first.key)


def test_a_retry_failing_during_another_write_does_not_keep_what_it_wrote(
    stalled: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A retry thread refused while another thread's write takes the kept entry: it is let go."""
    first = _refused(stalled, Counted())
    write = CacheFile.write
    raced: list[int] = []

    def racing(self: CacheFile, entries: Mapping[str, CacheEntry], **written: object) -> None:
        if not raced:  # a retry thread refused meanwhile (ENOSPC) notes the cause anew
            raced.append(1)
            with monkeypatch.context() as m:
                m.setattr(DecisionCache, "store_kept", lambda cache: False)
                _unstored._write(DecisionCache(stalled))
        write(self, entries, **written)  # type: ignore[arg-type]

    monkeypatch.setattr(CacheFile, "write", racing)
    chunktune.resolve_sync(Counted(num_envs=192), policy="quick")  # writes the kept one too
    assert raced and first.key in _file_holds(stalled)
    assert not _unstored.holds(first.key)  # the file answers it


def test_a_decision_kept_anew_while_its_write_ran_stays_kept(isolated: Path) -> None:
    """A write lets go only the decisions it wrote: one kept anew meanwhile (a refresh) stays."""
    cache = DecisionCache(isolated / "cache.json")
    _unstored.keep("k", _decision(), "full", cache=cache, entry=entry(8))
    written = _unstored.pending(cache.path)
    assert written is not None
    _unstored.keep("k", _decision("chose 8 again"), "full", cache=cache, entry=entry(8))
    _unstored.settle(written, {"k": entry(8)})
    kept = _unstored.recall("k", lambda _: True)
    assert kept is not None and kept.reason.endswith("chose 8 again")


def test_one_retry_at_a_time_writes_a_file_and_the_exit_waits_for_it(
    stalled: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While a retry's thread writes a file no other starts (nor cut off at exit: no daemon)."""
    _refused(stalled, Counted())
    monkeypatch.setattr(_unstored, "RETRY_S", 0.0)
    go = threading.Event()
    writers: list[threading.Thread] = []

    def blocked(self: DecisionCache) -> bool:
        writers.append(threading.current_thread())
        go.wait(60.0)  # a hang guard: the test lets it go
        return False

    monkeypatch.setattr(DecisionCache, "store_kept", blocked)
    try:
        for _ in range(3):
            assert chunktune.resolve_sync(Counted(), policy="quick").source == "cache"
    finally:
        go.set()
        _threads.wait_for_stores()
    assert len(writers) == 1 and not writers[0].daemon
    chunktune.resolve_sync(Counted(), policy="quick")  # that retry has ended: the next may
    _threads.wait_for_stores()
    assert len(writers) == 2


def test_a_fork_child_retries_a_write_its_parents_thread_was_making(
    stalled: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A child forked while a parent's retry thread wrote a file starts that write itself."""
    first = _refused(stalled, Counted())
    monkeypatch.setattr(_unstored, "RETRY_S", 0.0)

    def child() -> None:
        logging.disable(logging.CRITICAL)  # the child's warnings are not this test's
        chunktune.resolve_sync(Counted(), policy="quick")
        _threads.wait_for_stores()
        raise SystemExit(3 if _unstored.holds(first.key) else 0)

    # as if the parent's retry thread were writing at the fork (a fork beside a live thread
    # warns on Python 3.12+); that thread is not the child's
    path = DecisionCache(stalled).path
    _unstored._retrying.add(path)
    try:
        status = run_forked(child, hang_guard_s=60.0)
    finally:
        _unstored._retrying.discard(path)
    assert status == 0


def test_a_write_takes_only_the_decisions_kept_for_its_own_file(isolated: Path) -> None:
    """A write of one cache file writes the decisions kept for it, under their stored keys."""
    a, b = DecisionCache(isolated / "a.json"), DecisionCache(isolated / "b.json")
    _unstored.keep("job", _decision(), "full", cache=a, entry=entry(8), stored_as="ka.p")
    _unstored.keep("kb.p", _decision(), "full", cache=b, entry=entry(8))
    assert a.put("other.p", entry(4))
    assert set(_file_holds(a.path)) == {"other.p", "ka.p"}  # not the lookup key "job"
    assert not _unstored.holds("job") and _unstored.holds("kb.p") and not b.path.exists()


def test_a_put_kept_under_a_lookup_key_is_written_under_its_own_key(
    isolated: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A failed put kept by a lookup key (a Ray job's) is written later under the key it had."""
    cache = DecisionCache(isolated / "cache.json")
    real_write = CacheFile.write

    def full(self: CacheFile, entries: Mapping[str, object], **written: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(CacheFile, "write", full)
    _unstored.put("stored.p", _decision(), cache, entry(8), kept_as="job")
    assert _unstored.holds("job")
    monkeypatch.setattr(CacheFile, "write", real_write)
    assert cache.put("other.p", entry(4))
    assert set(_file_holds(cache.path)) == {"other.p", "stored.p"}
    assert not _unstored.holds("job")


def test_a_retry_refused_again_names_the_cause_now(
    isolated: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A kept decision whose retry fails anew is remembered with that failure's cause."""
    (isolated / "plain").write_text("a file, not a folder")
    cache = DecisionCache(isolated / "plain" / "cache.json")
    _unstored.keep("k", _decision(), "an earlier cause", cache=cache, entry=entry(8))
    monkeypatch.setattr(_unstored, "RETRY_S", 0.0)
    assert _unstored.recall("k", lambda _: True) is not None  # starts the retry
    _threads.wait_for_stores()
    why = _unstored.why("k")
    assert why is not None and why.startswith("the cache ") and "earlier" not in why


def test_a_swap_writes_the_decisions_kept_for_its_file_too(isolated: Path) -> None:
    """A swap (check's re-tune of a key) writes the decisions kept for its file, as a put does."""
    cache = DecisionCache(isolated / "cache.json")
    _unstored.keep("ka.p", _decision(), "full", cache=cache, entry=entry(8))
    assert cache.swap("other.p", entry(4), expected={"other.p": None})
    assert set(_file_holds(cache.path)) == {"other.p", "ka.p"}
    assert not _unstored.holds("ka.p")


def test_a_retrys_backoff_counts_from_a_slow_failures_end_or_a_bugs_start(
    isolated: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The next retry waits RETRY_S from when the last one failed, or began where it broke."""
    clock = [0.0]  # time.monotonic() as _unstored sees it: no test waits a minute
    monkeypatch.setattr(_unstored, "time", types.SimpleNamespace(monotonic=lambda: clock[0]))
    cache = DecisionCache(isolated / "cache.json")
    _unstored.keep("k", _decision(), "full", cache=cache, entry=entry(8))
    tries: list[float] = []

    def slow_failure(self: DecisionCache) -> bool:
        tries.append(clock[0])
        clock[0] += 50.0  # given up late, at the write lock's stall limit
        return False

    def bug(self: DecisionCache) -> bool:
        tries.append(clock[0])
        raise RuntimeError("a bug")

    for store_kept, at in [
        (slow_failure, 100.0),
        (slow_failure, 200.0),
        (bug, 300.0),
        (bug, 330.0),
    ]:
        monkeypatch.setattr(DecisionCache, "store_kept", store_kept)
        clock[0] = at
        assert _unstored.recall("k", lambda _: True) is not None
        _threads.wait_for_stores()
    # 200: 50 s after the try of 100 failed; 330: 30 s after the try of 300 began and broke
    assert tries == [100.0, 300.0]
    assert "a bug in chunktune" in caplog.text
