"""The cache file's reading, rewriting and checksums where mutation round 78 found no test.

Each test pins a behaviour that a plausible one-line bug in ``_cache_file``,
``_cache_rewrite``, ``_cache_parsed``, ``_cache_checksums`` or ``_cache_lookup`` broke
while every earlier test still passed. Real files throughout.
"""

from __future__ import annotations

import errno
import json
import logging
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from _cache_cli import entry
from test_cache_salvage import several

from chunktune import CacheEntry, DecisionCache, _cache_file
from chunktune._cache_file import CacheFile, same_file
from chunktune._cache_format import UnusableCache
from chunktune._cache_lookup import JobIndex
from chunktune._cache_rewrite import digest as real_digest
from chunktune._cache_salvage import salvage
from chunktune._settled import identity

FORMATS = [pytest.param(".json", id="json"), pytest.param(".toml", id="toml")]


def test_two_files_alike_but_for_their_inode_are_two_files(tmp_path: Path) -> None:
    """same_file tells apart files of one size, mtime and device that are two inodes."""
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text("{}")
    b.write_text("{}")
    stamp = a.stat().st_mtime_ns
    os.utime(b, ns=(stamp, stamp))
    one, other = identity(a.stat()), identity(b.stat())
    assert one[:2] == other[:2] and one[4] == other[4] and one[2] != other[2]
    assert not same_file(one, other)
    assert same_file(one, identity(a.stat()))


_COPY_IN_PLACE = "import sys; open(sys.argv[1], 'r+b').write(open(sys.argv[2], 'rb').read())"


@pytest.mark.parametrize("suffix", FORMATS)
def test_a_put_reads_the_bytes_of_a_file_settled_in_its_memo_whatever_its_stat(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, suffix: str
) -> None:
    """A settled memo (stat alone tells readers) is not trusted under the lock: no entry lost."""
    path, other = tmp_path / f"c{suffix}", tmp_path / f"other{suffix}"
    cache = DecisionCache(path)
    assert cache.put("k.p", entry(4, created=1_700_000_000.0))
    DecisionCache(other).put("k.p", entry(5, created=1_700_000_000.0))
    written, now = cache._file.stat(), time.time_ns()
    assert written is not None and other.stat().st_size == written[1]
    # a stat that lags behind another host's write (NFS), looked at once the file settled
    monkeypatch.setattr(cache._file, "stat", lambda: written)
    monkeypatch.setattr(_cache_file, "time_ns", lambda: now + 4 * 10**9)
    hit = cache.get("k.p")  # settled since the write: from now on the stat alone tells readers
    assert hit is not None and hit.chunk_size == 4
    subprocess.run(
        [sys.executable, "-c", _COPY_IN_PLACE, str(path), str(other)], check=True, timeout=120
    )
    assert cache.put("new.p", entry(6))
    kept = DecisionCache(path).entries()
    assert kept["k.p"].chunk_size == 5 and kept["new.p"].chunk_size == 6


def test_a_locked_read_finding_no_file_leaves_the_write_nothing_of_an_earlier_read(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """An older tuner's file read under the lock, then deleted: the next write backs nothing up."""
    path = tmp_path / "c.json"
    path.write_text(json.dumps({"0123abcd": {"chunk_size": 8, "per_candidate_ms": {"None": 3.0}}}))
    file = CacheFile(path, "json")
    assert set(file.load(fresh=True)) == {"legacy-0123abcd"}  # read, and not written back
    path.unlink()
    assert file.load(fresh=True) == {}
    with caplog.at_level(logging.WARNING, logger="chunktune"):
        file.write({"new.p": entry(4)})
    assert not file.backup_path.exists() and "migrated" not in caplog.text
    assert set(DecisionCache(path).entries()) == {"new.p"}


def test_a_file_of_exactly_the_cap_is_read_and_one_byte_more_is_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file of MAX_CACHE_BYTES is read; one a byte over is refused unread (EFBIG)."""
    path = tmp_path / "c.json"
    DecisionCache(path).put("k.p", entry(4))
    size = path.stat().st_size
    monkeypatch.setattr(_cache_file, "MAX_CACHE_BYTES", size)
    assert set(CacheFile(path, "json").load(fresh=False)) == {"k.p"}
    monkeypatch.setattr(_cache_file, "MAX_CACHE_BYTES", size - 1)
    with pytest.raises(OSError, match=r"it holds more than") as raised:
        CacheFile(path, "json").load(fresh=False)
    assert raised.value.errno == errno.EFBIG


def test_a_file_whose_mtime_was_set_back_is_not_settled_while_its_ctime_is_recent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """mtime set back an hour, ctime now: a same-stat rewrite is still read, not a stale hit."""
    path, other = tmp_path / "c.json", tmp_path / "other.json"
    DecisionCache(path).put("k.p", entry(4, created=1_700_000_000.0))
    DecisionCache(other).put("k.p", entry(5, created=1_700_000_000.0))
    hour_ago = time.time_ns() - 3600 * 10**9
    os.utime(path, ns=(hour_ago, hour_ago))  # as cp -p or rsync -t leave a copy
    reader = DecisionCache(path)
    pinned = reader._file.stat()
    assert pinned is not None and other.stat().st_size == pinned[1]
    monkeypatch.setattr(reader._file, "stat", lambda: pinned)  # a rewrite within the tick
    hit = reader.get("k.p")
    assert hit is not None and hit.chunk_size == 4
    subprocess.run(
        [sys.executable, "-c", _COPY_IN_PLACE, str(path), str(other)], check=True, timeout=120
    )
    again = reader.get("k.p")
    assert again is not None and again.chunk_size == 5


def test_a_file_gone_between_its_stat_and_its_read_reads_as_empty(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file deleted after its stat was taken (a lagging stat) reads as no entries, no error."""
    path = tmp_path / "c.json"
    DecisionCache(path).put("k.p", entry(4))
    file = CacheFile(path, "json")
    pinned = file.stat()
    monkeypatch.setattr(file, "stat", lambda: pinned)
    path.unlink()
    assert file.load(fresh=False) == {}
    assert file.load(fresh=True) == {}


def _unusable(valid: bytes, why: str) -> bytes:
    """``valid``'s bytes made a newer chunktune's (schema 9) or broken, at the same size."""
    made = valid.replace(b'"schema": 1', b'"schema": 9') if why == "newer" else b"x" + valid[1:]
    assert made != valid and len(made) == len(valid)
    return made


@pytest.mark.parametrize("why", ["newer", "broken"])
def test_an_unusable_file_looked_at_twice_within_the_tick_is_read_again_once_settled(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, why: str
) -> None:
    """A file found unusable twice within the tick, then fixed at one stat, reads as fixed later."""
    path = tmp_path / "c.json"
    DecisionCache(path).put("k.p", entry(4))
    valid = path.read_bytes()
    path.write_bytes(_unusable(valid, why))
    file = CacheFile(path, "json")
    pinned, now = file.stat(), time.time_ns()
    monkeypatch.setattr(file, "stat", lambda: pinned)  # every rewrite keeps the stat
    monkeypatch.setattr(_cache_file, "time_ns", lambda: now)
    for _ in range(2):  # within the tick of its change: the bytes tell, each time
        with pytest.raises(OSError if why == "newer" else UnusableCache):
            file.load(fresh=False)
    with path.open("r+b") as f:
        f.write(valid)
    monkeypatch.setattr(_cache_file, "time_ns", lambda: now + 4 * 10**9)
    assert set(file.load(fresh=False)) == {"k.p"}


def test_a_locked_read_within_the_tick_leaves_the_bytes_to_tell_the_next_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A write's own bytes found again under the lock within the tick: a later rewrite is read."""
    path, other = tmp_path / "c.json", tmp_path / "other.json"
    DecisionCache(other).put("k.p", entry(5, created=1_700_000_000.0))
    file = CacheFile(path, "json")
    file.write({"k.p": entry(4, created=1_700_000_000.0)})
    pinned = file.stat()
    assert pinned is not None and other.stat().st_size == pinned[1]
    monkeypatch.setattr(file, "stat", lambda: pinned)  # every rewrite within the tick
    assert file.load(fresh=True)["k.p"].chunk_size == 4  # the memo's bytes: parsed not again
    subprocess.run(
        [sys.executable, "-c", _COPY_IN_PLACE, str(path), str(other)], check=True, timeout=120
    )
    assert file.load(fresh=False)["k.p"].chunk_size == 5


def test_a_locked_read_serves_the_one_write_that_follows_it(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """An older tuner's file read under the lock is backed up by the next write, never again."""
    path = tmp_path / "c.json"
    path.write_text(json.dumps({"0123abcd": {"chunk_size": 8, "per_candidate_ms": {"None": 3.0}}}))
    file = CacheFile(path, "json")
    read = dict(file.load(fresh=True))
    file.write({**read, "new.p": entry(4)})
    assert file.backup_path.exists()
    file.backup_path.unlink()  # the user deletes the backup
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="chunktune"):
        file.write({**read, "newer.p": entry(5)})
    assert not file.backup_path.exists() and "migrated" not in caplog.text


@pytest.mark.parametrize("suffix", FORMATS)
def test_a_put_into_a_chunktune_file_keeps_no_backup_and_says_no_migration(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, suffix: str
) -> None:
    """Only an older tuner's file is backed up: a put into chunktune's own writes no .schema0."""
    path = tmp_path / f"c{suffix}"
    DecisionCache(path).put("k.p", entry(4))
    with caplog.at_level(logging.WARNING, logger="chunktune"):
        assert DecisionCache(path).put("new.p", entry(5))
    assert not CacheFile(path, "json").backup_path.exists() and "migrated" not in caplog.text


def test_an_entry_replaced_by_the_very_object_read_is_converted_afresh(tmp_path: Path) -> None:
    """update() of an entry with the object read: its table made anew (a float), not as read."""
    path = tmp_path / "c.json"
    # an int where the entry read holds a float: the table as stored differs from a fresh one
    DecisionCache(path).update({"a.p": entry(3, created=1_700_000_000), "b.p": entry(5)})
    assert json.loads(path.read_bytes())["entries"]["a.p"]["created"] == 1_700_000_000
    cache = DecisionCache(path)
    read = cache.entries()
    assert cache.update({"a.p": read["a.p"]})  # the very object the read made
    stored = json.loads(path.read_bytes())["entries"]["a.p"]["created"]
    assert type(stored) is float and DecisionCache(path).entries() == read


def test_a_same_stat_rewrite_past_the_first_4_kib_is_read_by_the_next_put(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The locked read compares every byte: a change only in the file's last entry is kept."""
    path, other = tmp_path / "c.json", tmp_path / "other.json"
    same = {f"k{i:02}.p": entry(i % 8 + 1, created=1_700_000_000.0) for i in range(30)}
    cache = DecisionCache(path)
    assert cache.update({**same, "z.p": entry(4, created=1_700_000_000.0)})
    DecisionCache(other).update({**same, "z.p": entry(5, created=1_700_000_000.0)})
    mine, theirs = path.read_bytes(), other.read_bytes()
    assert len(mine) == len(theirs) > 8192 and mine[:8192] == theirs[:8192]
    written = cache._file.stat()
    monkeypatch.setattr(cache._file, "stat", lambda: written)  # every stat field kept
    subprocess.run(
        [sys.executable, "-c", _COPY_IN_PLACE, str(path), str(other)], check=True, timeout=120
    )
    assert cache.put("new.p", entry(6))
    kept = DecisionCache(path).entries()
    assert kept["z.p"].chunk_size == 5 and kept["new.p"].chunk_size == 6


@pytest.mark.parametrize("suffix", FORMATS)
def test_a_writer_writes_an_int_it_stored_as_a_fresh_reader_of_its_file_writes_it(
    tmp_path: Path, suffix: str
) -> None:
    """An int stored where the entry read holds a float: the writer's next put, a fresh one's."""
    path, copy = tmp_path / f"c{suffix}", tmp_path / f"copy{suffix}"
    writer = DecisionCache(path)
    assert writer.update({"a.p": entry(3, created=1_700_000_000), "b.p": entry(5)})
    copy.write_bytes(path.read_bytes())
    assert writer.put("new.p", entry(4, created=1_700_000_000.0))
    assert DecisionCache(copy).put("new.p", entry(4, created=1_700_000_000.0))
    assert path.read_bytes() == copy.read_bytes()


@pytest.mark.parametrize(
    ("altered", "said"),
    [
        pytest.param(1, "holds 1 entry ('k0.p') whose checksum does not match: edited or "
                     "damaged after chunktune wrote it,", id="one"),
        pytest.param(6, "holds 6 entries ('k0.p', 'k1.p', 'k2.p', 'k3.p', 'k4.p' and 1 more) "
                     "whose checksum does not match: edited or damaged after chunktune wrote "
                     "them,", id="six"),
    ],
)  # fmt: skip
def test_a_file_of_altered_entries_is_refused_naming_them_and_counting_right(
    tmp_path: Path, altered: int, said: str
) -> None:
    """An entry changed after it was written refuses the file: the message counts and names them."""
    path = tmp_path / "c.json"
    DecisionCache(path).update({f"k{i}.p": entry(4) for i in range(7)})
    lines = path.read_text().splitlines(keepends=True)
    for i in range(altered):  # a changed digit: the file still parses, each checksum fails
        at = next(n for n, line in enumerate(lines) if line.startswith(f'  "k{i}.p"'))
        lines[at] = lines[at].replace('"chunk_size": 4', '"chunk_size": 6')
    path.write_text("".join(lines))
    with pytest.raises(UnusableCache) as raised:
        CacheFile(path, "json").load(fresh=False)
    assert said in str(raised.value)


@pytest.mark.parametrize(("bad", "more"), [(5, None), (6, 1), (8, 3)])
def test_skipped_entries_are_warned_of_five_by_name_and_the_rest_counted(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, bad: int, more: int | None
) -> None:
    """Invalid entries of a file without checksums: the first five named, the others counted."""
    path = tmp_path / "c.json"
    tables = {f"bad{i}": {"chunk_size": "eight"} for i in range(bad)}
    path.write_text(json.dumps({"schema": 1, "entries": tables}))
    with caplog.at_level(logging.WARNING, logger="chunktune"):
        assert CacheFile(path, "json").load(fresh=False) == {}
    named = [r for r in caplog.records if "skipping cache entry" in r.getMessage()]
    counted = [r.getMessage() for r in caplog.records if "more invalid" in r.getMessage()]
    assert [r.getMessage().split()[4] for r in named] == [f"'bad{i}'" for i in range(5)]
    said = f"chunktune: skipping {more} more invalid cache entries in {path}"
    assert counted == ([] if more is None else [said])


def test_a_job_index_asked_of_another_mapping_indexes_that_mapping() -> None:
    """JobIndex.keys_of a second mapping gives its keys, not those of the mapping indexed first."""
    index = JobIndex()
    first = {"job.a": entry(4)}
    second = {"job.a": entry(4), "job.b": entry(8)}
    assert index.keys_of(first, "job") == ("job.a",)
    assert index.keys_of(second, "job") == ("job.a", "job.b")


def test_an_own_entry_refused_is_passed_over_and_asked_of_once(tmp_path: Path) -> None:
    """serves refusing the own policy's entry: a stronger one answers; the own is asked once."""
    cache = DecisionCache(tmp_path / "c.json")
    own = entry(4, policy_rule="r", policy_effort=10)
    assert cache.update({"k.mine": own, "k.strong": entry(8, policy_rule="r", policy_effort=20)})
    asked: list[int | None] = []

    def serves(e: CacheEntry) -> bool:
        asked.append(e.chunk_size)
        return e.chunk_size != 4

    found = cache.lookup("k", policy_hash="mine", rule="r", effort=10, serves=serves)
    assert found is not None and found[0] == "k.strong" and asked == [4, 8]
    assert cache.update({"k.strong": None})
    del asked[:]
    assert cache.lookup("k", policy_hash="mine", rule="r", effort=10, serves=serves) is None
    assert asked == [4]


def test_another_policys_entry_of_another_rule_never_answers(tmp_path: Path) -> None:
    """An entry made by another rule, however much effort it spent, answers no request."""
    cache = DecisionCache(tmp_path / "c.json")
    assert cache.update({"k.other": entry(8, policy_rule="other", policy_effort=99)})
    assert cache.lookup("k", policy_hash="mine", rule="r", effort=10) is None
    found = cache.lookup("k", policy_hash="mine", rule="other", effort=10)
    assert found is not None and found[0] == "k.other"


def test_a_locked_read_between_a_readers_parse_and_its_content_parses_what_it_found(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A reader parked between keeping its parse and its content: the writer's read is its own."""
    path, other = tmp_path / "c.json", tmp_path / "other.json"
    assert DecisionCache(path).put("a.p", entry(4, created=1_700_000_000.0))
    assert DecisionCache(other).put("b.p", entry(4, created=1_700_000_000.0))
    first, second = path.read_bytes(), other.read_bytes()
    assert len(first) == len(second)
    file = CacheFile(path, "json")
    assert set(file.load(fresh=False)) == {"a.p"}
    pinned = file.stat()
    monkeypatch.setattr(file, "stat", lambda: pinned)  # every rewrite within the tick
    parked, release = threading.Event(), threading.Event()
    reader: list[threading.Thread] = []

    def digest(raw: bytes) -> bytes:
        if threading.current_thread() in reader:  # its parse kept, its content not yet
            parked.set()
            assert release.wait(60)
        return real_digest(raw)

    monkeypatch.setattr(_cache_file, "digest", digest)
    path.write_bytes(second)
    read: list[object] = []
    thread = threading.Thread(target=lambda: read.append(file.load(fresh=False)), daemon=True)
    reader.append(thread)
    thread.start()
    assert parked.wait(60)
    path.write_bytes(first)  # back as the memo's content was made of
    try:
        assert set(file.load(fresh=True)) == {"a.p"}
    finally:
        release.set()
        thread.join(60)
    assert [set(r) for r in read if isinstance(r, dict)] == [{"b.p"}]


@pytest.mark.parametrize("suffix", FORMATS)
def test_a_salvage_keeps_an_entry_whose_text_holds_a_header_mid_line(
    tmp_path: Path, suffix: str
) -> None:
    """A reason quoting '[entries.' mid-line starts no block: that entry is salvaged whole."""
    path = tmp_path / f"c{suffix}"
    quoting = entry(5, reason='see [entries."a.p"] and [entries.b]', created=1_700_000_000.0)
    made = {"a.p": entry(4), "m.p": quoting, "z.p": entry(6)}
    assert DecisionCache(path).update(made)
    raw = path.read_bytes()
    broken = raw.replace(b"chunk_size = 4", b"chunk_size = [4").replace(b'"chunk_size": 4', b"[4")
    assert broken != raw
    path.write_bytes(broken)
    kept = DecisionCache(path).entries()
    assert kept["m.p"] == quoting and "a.p" not in kept


def test_a_toml_header_naming_no_entry_costs_its_neighbours_without_checksums() -> None:
    """'[entries.]' names no entry: in a file without checksums the blocks beside it are suspect."""
    raw, entries = several("toml", 6, checksums=False)
    broken = raw.replace(b'[entries."0003.key"]\n', b"[entries.]\n", 1)
    assert broken != raw
    kept = salvage(broken, "toml")
    assert set(kept) == set(entries) - {"0002.key", "0003.key", max(entries)}
