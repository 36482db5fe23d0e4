"""The cache file as last read or written: what a writer keeps of its own write, and reuses."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from _cache_cli import entry

from chunktune import CacheEntry, DecisionCache, _cache_file
from chunktune._cache_file import CacheFile
from chunktune._cache_parsed import Parsed

FORMATS = [pytest.param(".json", id="json"), pytest.param(".toml", id="toml")]


@pytest.fixture
def parses(monkeypatch: pytest.MonkeyPatch) -> list[bytes]:
    """Every document CacheFile parses, as its bytes, in order."""
    seen: list[bytes] = []
    real = CacheFile.parse

    def counted(self: CacheFile, raw: bytes, *, mtime: float) -> Parsed:
        seen.append(raw)
        return real(self, raw, mtime=mtime)

    monkeypatch.setattr(CacheFile, "parse", counted)
    return seen


@pytest.mark.parametrize("suffix", FORMATS)
def test_a_writers_next_hit_parses_nothing_and_reads_what_a_fresh_reader_reads(
    tmp_path: Path, parses: list[bytes], suffix: str
) -> None:
    """A put, then hits: no parse; the entries equal, type for type, a fresh object's read."""
    path = tmp_path / f"c{suffix}"
    DecisionCache(path).update({f"k{i}.p": entry(i + 1) for i in range(5)})
    cache = DecisionCache(path)
    assert cache.get("k0.p") is not None  # parsed once, as a trainer's first hit does
    # an int where the file stores a float: the memo holds the entry as read back
    assert cache.put("new.p", entry(7, created=1_700_000_000))
    del parses[:]
    for _ in range(3):
        found = cache.lookup("new", policy_hash="p", rule="", effort=0)
        assert found is not None and found[0] == "new.p"
    assert parses == []
    mine = cache.entries()
    theirs = DecisionCache(path).entries()
    assert mine == theirs and list(mine) == list(theirs)
    assert type(mine["new.p"].created) is type(theirs["new.p"].created) is float


def test_a_file_replaced_behind_the_writer_is_parsed_not_taken_for_its_write(
    tmp_path: Path, parses: list[bytes]
) -> None:
    """Another program's file put in place of the one just written is read as it is."""
    path = tmp_path / "c.json"
    cache = DecisionCache(path)
    assert cache.put("mine.p", entry(4))
    other = tmp_path / "other.json"
    DecisionCache(other).put("theirs.p", entry(4))
    os.replace(other, path)  # no lock taken: as a copy or a hand edit does
    del parses[:]
    assert set(cache.entries()) == {"theirs.p"} and len(parses) == 1


def test_a_rewrite_converts_only_the_entries_it_changed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A second put by the same object encodes one entry's text, not every entry's again."""
    from chunktune import _cache_format

    path = tmp_path / "c.json"
    cache = DecisionCache(path)
    assert cache.update({f"k{i}.p": entry(i + 1) for i in range(20)})
    encoded: list[str] = []
    real = _cache_format._member

    def counted(key: str, table: object, fmt: str) -> str:
        encoded.append(key)
        return real(key, table, fmt)  # type: ignore[arg-type]

    monkeypatch.setattr(_cache_format, "_member", counted)
    assert cache.put("k3.p", entry(9))
    assert encoded == ["k3.p"]
    assert path.read_bytes() == _cache_format.encode(DecisionCache(path).entries(), "json")


# another program writes the file in place, as an editor that keeps the inode does
_COPY_IN_PLACE = "import sys; open(sys.argv[1], 'r+b').write(open(sys.argv[2], 'rb').read())"
# when the writer looks again: still within the tick, or once the file has settled
LOOKS = [pytest.param(0.1, id="within"), pytest.param(4.0, id="settled")]


@pytest.mark.parametrize("suffix", FORMATS)
@pytest.mark.parametrize("after_s", LOOKS)
def test_a_same_size_rewrite_within_the_tick_of_the_writers_own_write_is_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, suffix: str, after_s: float
) -> None:
    """Another process's same-size rewrite that leaves the stat of the writer's write is read."""
    path, other = tmp_path / f"c{suffix}", tmp_path / f"other{suffix}"
    cache = DecisionCache(path)
    assert cache.put("k.p", entry(4, created=1_700_000_000.0))
    DecisionCache(other).put("k.p", entry(5, created=1_700_000_000.0))
    assert other.stat().st_size == path.stat().st_size
    # a file system of 1 s stamps (ext2's 128-byte inodes, FAT, HFS+): a rewrite within the
    # second keeps every field of the stat the writer saw as it wrote; looked at from then on
    first, now = cache._file.stat(), time.time_ns()
    monkeypatch.setattr(cache._file, "stat", lambda: first)
    monkeypatch.setattr(_cache_file, "time_ns", lambda: now + int(0.1 * 1e9))
    hit = cache.get("k.p")  # the writer's own write, as its memo holds it
    assert hit is not None and hit.chunk_size == 4
    subprocess.run(
        [sys.executable, "-c", _COPY_IN_PLACE, str(path), str(other)], check=True, timeout=120
    )
    monkeypatch.setattr(_cache_file, "time_ns", lambda: now + int(after_s * 1e9))
    again = cache.get("k.p")
    assert again is not None and again.chunk_size == 5


def test_a_same_stat_rewrite_after_the_writers_own_write_is_read_as_it_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Within the tick (every stat the same, the inode reused) a rewrite after a put is read."""
    path = tmp_path / "c.json"
    cache = DecisionCache(path)
    assert cache.put("k.p", entry(4))
    written = cache._file.stat()
    monkeypatch.setattr(cache._file, "stat", lambda: written)  # a same-size, same-tick rewrite
    other = tmp_path / "other.json"
    DecisionCache(other).put("k.p", entry(8))
    os.replace(other, path)
    found = cache.get("k.p")
    assert found is not None and found.chunk_size == 8


@pytest.mark.parametrize(("new", "parsed"), [(64, 0), (65, 1)])
def test_a_write_keeps_up_to_64_new_entries_as_its_memo_and_past_that_parses_once(
    tmp_path: Path, parses: list[bytes], new: int, parsed: int
) -> None:
    """A sweep's few new entries are read back from their text; past 64 the next read parses."""
    path = tmp_path / "c.json"
    cache = DecisionCache(path)
    assert cache.update({f"k{i:03}.p": entry(i % 64 + 1) for i in range(new)})
    del parses[:]
    assert cache.entries() == DecisionCache(path).entries()
    assert len(parses) == parsed + 1  # the fresh object's own parse, and the writer's if any


def test_a_put_into_a_cache_of_a_hundred_read_entries_reads_back_only_the_new_one(
    tmp_path: Path, parses: list[bytes]
) -> None:
    """The entries the writer read are its memo as they are: a put past 64 entries parses none."""
    path = tmp_path / "c.json"
    DecisionCache(path).update({f"k{i:03}.p": entry(i % 64 + 1) for i in range(100)})
    cache = DecisionCache(path)
    assert len(cache.entries()) == 100
    assert cache.put("new.p", entry(4))
    del parses[:]
    assert len(cache.entries()) == 101 and parses == []


@pytest.mark.parametrize("suffix", FORMATS)
def test_writes_into_a_file_unchanged_since_read_or_written_parse_nothing_under_the_lock(
    tmp_path: Path, parses: list[bytes], suffix: str
) -> None:
    """Puts, an update and a remove after a read re-read the file but parse none of it."""
    path = tmp_path / f"c{suffix}"
    DecisionCache(path).update({f"k{i}.p": entry(i % 8 + 1) for i in range(30)})
    cache = DecisionCache(path)
    assert len(cache.entries()) == 30
    del parses[:]
    assert cache.put("new.p", entry(4))
    assert cache.put("new2.p", entry(5))
    assert cache.update({"k3.p": entry(6), "k4.p": None})
    assert cache.remove(["k5.p"]) == {"k5.p"}
    assert parses == []
    assert cache.entries() == DecisionCache(path).entries()
    assert set(cache.entries()) == {f"k{i}.p" for i in range(30)} - {"k4.p", "k5.p"} | {
        "new.p",
        "new2.p",
    }


def test_the_first_put_after_a_read_converts_only_the_new_entry(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A process's first put converts only the new entry, re-encodes those read; canonical file."""
    from chunktune import _cache_checksums, _cache_format
    from chunktune._cache_entry import entry_to_table as to_table

    path = tmp_path / "c.json"
    DecisionCache(path).update({f"k{i}.p": entry(i % 8 + 1) for i in range(20)})
    cache = DecisionCache(path)
    assert len(cache.entries()) == 20
    encoded: list[str] = []
    converted: list[object] = []
    member = _cache_format._member

    def counted_member(key: str, table: object, fmt: str) -> str:
        encoded.append(key)
        return member(key, table, fmt)  # type: ignore[arg-type]

    def counted_table(e: CacheEntry) -> dict[str, object]:
        converted.append(e)
        return to_table(e)

    monkeypatch.setattr(_cache_format, "_member", counted_member)
    monkeypatch.setattr(_cache_checksums, "entry_to_table", counted_table)
    assert cache.put("new.p", entry(4))
    # the tables read are encoded again as they stood; only the new entry is converted
    assert sorted(encoded) == sorted([*(f"k{i}.p" for i in range(20)), "new.p"])
    assert len(converted) == 1
    assert path.read_bytes() == _cache_format.encode(DecisionCache(path).entries(), "json")


def test_an_entry_laid_out_otherwise_is_encoded_afresh_by_the_first_put(tmp_path: Path) -> None:
    """Entries on lines of their own, keys unsorted (checksums matching), are made canonical."""
    from chunktune._cache_format import encode

    path = tmp_path / "c.json"
    DecisionCache(path).update({f"k{i}.p": entry(i % 8 + 1) for i in range(5)})
    doc = json.loads(path.read_bytes())
    lines = [
        f"  {json.dumps(k)}: {json.dumps(dict(reversed(t.items())))}"
        for k, t in doc["entries"].items()
    ]
    body = ",\n".join(lines)
    path.write_text(
        f'{{\n "checksums": "sha256",\n "entries": {{\n{body}\n }},\n "schema": 1\n}}\n'
    )
    cache = DecisionCache(path)
    assert len(cache.entries()) == 5  # every checksum matches: the file is whole
    assert cache.put("new.p", entry(4))
    assert path.read_bytes() == encode(DecisionCache(path).entries(), "json")


def _json_cache(members: list[tuple[str, dict[str, object], str]]) -> str:
    """A JSON cache whose entries are laid out by hand: (key, table, layout) each, in order."""

    def text(key: str, table: dict[str, object], layout: str) -> str:
        tail = {k: v for k, v in table.items() if k != "checksum"}
        # every layout but "fields" keeps the line's head as chunktune writes it
        head = f'  {json.dumps(key)}: {{"checksum": "{table["checksum"]}", '
        if layout == "fields":  # one field a line, as `jq .` writes it
            return f"  {json.dumps(key)}: {json.dumps(table, indent=2)}"
        if layout == "tail-unsorted":
            return head + json.dumps(dict(reversed(tail.items())))[1:]
        sorted_tail = json.dumps(dict(sorted(tail.items())), ensure_ascii=layout != "escapes")
        if layout == "escapes":  # raw non-ASCII, an escaped slash, an upper-case escape
            sorted_tail = sorted_tail.replace("/", "\\/").replace("\u00e9", "\\u00E9")
        elif layout == "number":
            sorted_tail = sorted_tail.replace("1700000000.0", "1.7e9")
        return head + sorted_tail[1:]

    body = ",\n".join(text(*m) for m in members)
    return f'{{\n "checksums": "sha256",\n "entries": {{\n{body}\n }},\n "schema": 1\n}}\n'


@pytest.mark.parametrize(
    "layout",
    [
        pytest.param("tail-unsorted", id="keys-unsorted-after-the-checksum"),
        pytest.param("escapes", id="other-escapes"),
        pytest.param("number", id="a-number-spelled-otherwise"),
    ],
)
@pytest.mark.parametrize("repeated", [False, True], ids=["once", "after-an-older-one"])
def test_an_entry_read_is_written_back_canonical_however_its_line_was_laid_out(
    tmp_path: Path, layout: str, repeated: bool
) -> None:
    """An entry read (the last of a repeated key) is written as a fresh encode writes it."""
    from chunktune._cache_format import encode

    path, older = tmp_path / "c.json", tmp_path / "older.json"
    reason = "a/b \u00e9 \u2603 \U0001f600"
    made = {f"k{n}.p": entry(n, reason=reason, created=1_700_000_000.0) for n in (1, 2)}
    DecisionCache(path).update(made)
    DecisionCache(older).update({"k2.p": entry(7, created=1_700_000_000.0)})
    tables = json.loads(path.read_bytes())["entries"]
    members = [("k1.p", tables["k1.p"], "fields"), ("k2.p", tables["k2.p"], layout)]
    if repeated:  # its checksum valid too; JSON reads the last occurrence
        members.insert(0, ("k2.p", json.loads(older.read_bytes())["entries"]["k2.p"], "canon"))
    path.write_text(_json_cache(members))
    cache = DecisionCache(path)
    assert cache.entries(strict=True) == made
    assert cache.put("new.p", entry(4))
    kept = DecisionCache(path).entries(strict=True)
    assert path.read_bytes() == encode(kept, "json")
    assert kept == {**made, "new.p": kept["new.p"]}


@pytest.mark.parametrize("layout", ["tail-unsorted", "fields"])
def test_a_writer_and_a_fresh_process_write_the_same_bytes_after_a_reformat(
    tmp_path: Path, layout: str
) -> None:
    """A file reformatted, checksums kept: its entries' writer writes what a fresh reader writes."""
    path, copy = tmp_path / "c.json", tmp_path / "copy.json"
    writer = DecisionCache(path)
    # an int where the entry read holds a float: JSON keeps the table as stored
    assert writer.update({"a.p": entry(3, created=1_700_000_000), "b.p": entry(5)})
    tables = json.loads(path.read_bytes())["entries"]
    path.write_text(_json_cache([(k, t, layout) for k, t in tables.items()]))
    copy.write_bytes(path.read_bytes())
    assert len(writer.entries()) == 2
    assert writer.put("new.p", entry(4, created=1_700_000_000.0))
    fresh = DecisionCache(copy)
    assert len(fresh.entries()) == 2
    assert fresh.put("new.p", entry(4, created=1_700_000_000.0))
    assert path.read_bytes() == copy.read_bytes()


@pytest.mark.parametrize("suffix", FORMATS)
def test_a_same_stat_rewrite_by_another_process_is_read_by_the_next_put(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, suffix: str
) -> None:
    """Under the lock the bytes are compared, not the stat: another process's entry is kept."""
    path, other = tmp_path / f"c{suffix}", tmp_path / f"other{suffix}"
    cache = DecisionCache(path)
    assert cache.put("k.p", entry(4, created=1_700_000_000.0))
    DecisionCache(other).put("k.p", entry(5, created=1_700_000_000.0))
    assert other.stat().st_size == path.stat().st_size
    # a file system of 1 s stamps: the in-place rewrite keeps every field of the stat
    written = cache._file.stat()
    monkeypatch.setattr(cache._file, "stat", lambda: written)
    subprocess.run(
        [sys.executable, "-c", _COPY_IN_PLACE, str(path), str(other)], check=True, timeout=120
    )
    assert cache.put("new.p", entry(6))
    kept = DecisionCache(path).entries()
    assert kept["k.p"].chunk_size == 5 and kept["new.p"].chunk_size == 6


_REPLACE_IN_PLACE = (
    "import sys; f = open(sys.argv[1], 'r+b'); f.write(open(sys.argv[2], 'rb').read()); "
    "f.truncate()"
)


@pytest.mark.parametrize("suffix", FORMATS)
@pytest.mark.parametrize("change", ["a-key-removed", "a-key-added"])
def test_a_file_cut_or_grown_behind_a_pinned_stat_is_read_by_the_next_put(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, suffix: str, change: str
) -> None:
    """Another process's shorter or longer file, every stat field kept: the next put keeps it."""
    path, other = tmp_path / f"c{suffix}", tmp_path / f"other{suffix}"
    made = {f"k{n}.p": entry(n, created=1_700_000_000.0) for n in range(1, 7)}
    cache = DecisionCache(path)
    assert cache.update(made) and len(cache.entries()) == 6
    theirs = dict(made)
    if change == "a-key-removed":
        del theirs["k3.p"]
    else:
        theirs["x.p"] = entry(8, created=1_700_000_000.0)
    assert DecisionCache(other).update(theirs)
    # a stat that lags behind the other process's write (NFS), or a clock tick that kept it
    written = cache._file.stat()
    monkeypatch.setattr(cache._file, "stat", lambda: written)
    subprocess.run(
        [sys.executable, "-c", _REPLACE_IN_PLACE, str(path), str(other)], check=True, timeout=120
    )
    assert cache.put("new.p", entry(7, created=1_700_000_000.0))
    assert DecisionCache(path).entries(strict=True) == {
        **theirs,
        "new.p": entry(7, created=1_700_000_000.0),
    }


# ---------------------------------------------------------------- threads sharing one file
#
# A reader thread parses without the write lock while a writer thread holds it; what a
# parse produces must reach the caller of that parse, never the other thread. Each test
# parks one thread inside a hooked call (events, no sleeps) while the other goes on.

_WAIT_S = 60.0  # only a hang would take this long: each wait is released by the other thread


def _started(target: Callable[[], object]) -> tuple[threading.Thread, list[object]]:
    """``target`` run in a started thread, and the list its result (or exception) lands in."""
    out: list[object] = []

    def run() -> None:
        try:
            out.append(target())
        except BaseException as exc:  # told to the test, which asserts on the result
            out.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, out


def _parked_reader(
    monkeypatch: pytest.MonkeyPatch, read: Callable[[], object]
) -> tuple[threading.Thread, list[object], threading.Event, threading.Event]:
    """A thread doing ``read``, parked inside its parse of the file (its bytes read) until
    released; the events: it is parked, and its release."""
    parked, release = threading.Event(), threading.Event()
    real = getattr(_cache_file, "parse_cache")  # noqa: B009 (imported there, not exported)
    readers: list[threading.Thread] = []

    def parse_cache(*args: Any, **kwargs: Any) -> Any:
        parsed = real(*args, **kwargs)
        if threading.current_thread() in readers:
            parked.set()
            assert release.wait(_WAIT_S)
        return parsed

    monkeypatch.setattr(_cache_file, "parse_cache", parse_cache)

    def reading() -> object:
        readers.append(threading.current_thread())
        return read()

    thread, out = _started(reading)
    assert parked.wait(_WAIT_S)
    return thread, out, parked, release


def _reader_ends_before_write(
    monkeypatch: pytest.MonkeyPatch, reader: threading.Thread, release: threading.Event
) -> list[Any]:
    """Hook :meth:`CacheFile.write` so that the reader ends its parse after the writer's
    locked read and before its write; the list gets each entry the write converts."""
    from chunktune import _cache_checksums
    from chunktune._cache_entry import entry_to_table as to_table

    converted: list[Any] = []
    write = CacheFile.write

    def counted(e: CacheEntry) -> dict[str, Any]:
        converted.append(e)
        return to_table(e)

    def hooked(self: CacheFile, entries: Any, **kwargs: Any) -> None:
        release.set()
        reader.join(_WAIT_S)
        assert not reader.is_alive()
        del converted[:]
        write(self, entries, **kwargs)

    monkeypatch.setattr(_cache_checksums, "entry_to_table", counted)
    monkeypatch.setattr(CacheFile, "write", hooked)
    return converted


@pytest.mark.parametrize("locked_read", ["parsed", "unchanged-since-read"])
def test_a_readers_parse_ending_inside_a_put_leaves_the_put_what_it_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, locked_read: str
) -> None:
    """A reader thread's parse ending between a put's locked read and write: one entry converted."""
    path = tmp_path / "c.json"
    made = {f"k{i}.p": entry(i % 8 + 1) for i in range(20)}
    DecisionCache(path).update(made)
    cache = DecisionCache(path)
    reader, out, _, release = _parked_reader(monkeypatch, cache.entries)
    if locked_read == "unchanged-since-read":
        assert cache.entries() == made  # this thread's parse: the put finds the file unchanged
    converted = _reader_ends_before_write(monkeypatch, reader, release)
    new = entry(4)
    assert cache.put("new.p", new)
    assert out == [made]
    assert converted == [new]  # the new entry alone: those read are written as read
    assert DecisionCache(path).entries() == {**made, "new.p": new}


@pytest.mark.parametrize("reader_saw", ["a-chunktune-file", "another-older-file"])
def test_a_readers_parse_ending_inside_a_migration_leaves_it_the_bytes_it_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, reader_saw: str
) -> None:
    """The put migrating an older tuner's file backs up what it read, whatever a reader parsed."""
    path, older = tmp_path / "c.json", tmp_path / "older.json"
    if reader_saw == "a-chunktune-file":
        DecisionCache(path).put("k.p", entry(4))
    else:
        path.write_text(json.dumps({"89abcdef": {"chunk_size": 4, "per_candidate_ms": {}}}))
    cache = DecisionCache(path)
    reader, _, _, release = _parked_reader(monkeypatch, cache.entries)
    original = json.dumps(
        {"0123abcd": {"chunk_size": 8, "per_candidate_ms": {"None": 10.5, "8": 8.9}}}
    ).encode()
    older.write_bytes(original)
    os.replace(older, path)  # the older tuner's file put back, its bytes read by the put
    _reader_ends_before_write(monkeypatch, reader, release)
    assert cache.put("new.p", entry(4))
    assert (tmp_path / "c.json.schema0").read_bytes() == original
    assert set(DecisionCache(path).entries()) == {"legacy-0123abcd", "new.p"}


def test_a_readers_parse_dates_an_older_tuners_entries_by_the_file_it_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two threads parse an older tuner's file touched between: each dates it by its own stat."""
    path = tmp_path / "c.json"
    path.write_text(json.dumps({"0123abcd": {"chunk_size": 8, "per_candidate_ms": {}}}))
    hour_ago = time.time_ns() - 3600 * 10**9
    os.utime(path, ns=(hour_ago, hour_ago))
    cache = DecisionCache(path)
    parked, release = threading.Event(), threading.Event()
    parse = CacheFile.parse
    readers: list[threading.Thread] = []

    def hooked(self: CacheFile, raw: bytes, *args: Any, **kwargs: Any) -> Any:
        if threading.current_thread() in readers:  # parked between its stat and its parse
            parked.set()
            assert release.wait(_WAIT_S)
        return parse(self, raw, *args, **kwargs)

    monkeypatch.setattr(CacheFile, "parse", hooked)

    def reading() -> object:
        readers.append(threading.current_thread())
        return cache.entries()

    reader, out = _started(reading)
    assert parked.wait(_WAIT_S)
    two_hours_ago = hour_ago - 3600 * 10**9
    os.utime(path, ns=(two_hours_ago, two_hours_ago))  # touched: this thread parses it again
    mine = cache.entries()
    release.set()
    reader.join(_WAIT_S)
    assert mine["legacy-0123abcd"].created == pytest.approx(two_hours_ago / 1e9, abs=1e-3)
    theirs = out[0]
    assert isinstance(theirs, dict)
    assert theirs["legacy-0123abcd"].created == pytest.approx(hour_ago / 1e9, abs=1e-3)


def test_a_parse_reusing_another_threads_known_entries_reads_what_a_fresh_reader_reads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A reader thread's known entries of an older file, reused by the next parse, change none."""
    path = tmp_path / "c.json"
    made = {f"k{i}.p": entry(i % 8 + 1, created=1_700_000_000.0) for i in range(6)}
    DecisionCache(path).update(made)
    cache = DecisionCache(path)
    reader, out, _, release = _parked_reader(monkeypatch, cache.entries)
    release.set()
    reader.join(_WAIT_S)
    theirs = out[0]
    assert isinstance(theirs, dict) and theirs == made
    changed = entry(7, created=1_700_000_000.0)
    assert DecisionCache(path).put("k3.p", changed)  # k3's table and checksum change
    mine = cache.entries()  # parsed with the reader's known entries as its hint
    assert mine == DecisionCache(path).entries() == {**made, "k3.p": changed}
    assert mine["k0.p"] is theirs["k0.p"]  # the hint served: an unchanged table not read again


@pytest.mark.parametrize("suffix", FORMATS)
def test_threads_putting_and_reading_through_two_objects_keep_and_see_every_entry(
    tmp_path: Path, suffix: str
) -> None:
    """Threads put and list via two objects of one file: each put kept and seen, file canonical."""
    from chunktune._cache_format import encode

    path = tmp_path / f"c{suffix}"
    objects = [DecisionCache(path), DecisionCache(path)]  # the second writes as another process
    stored: dict[str, int] = {}  # each key's chunk last confirmed stored: it only grows
    problems: list[object] = []
    writing = threading.Event()

    def write(w: int) -> None:
        for n in range(1, 7):
            key = f"w{w}-{n % 3}.p"
            cache = objects[n % 2]
            assert cache.put(key, entry(n, created=1_700_000_000.0 + n))
            stored[key] = n
            got = cache.get(key)
            assert got is not None and got.chunk_size == n, (key, n, got)

    def read(r: int) -> None:
        cache = objects[r % 2]
        while writing.is_set():
            wanted = dict(stored)  # confirmed before this read began: it must see them
            listed = cache.entries(strict=True)
            for key, n in wanted.items():
                found = cache.lookup(key[:-2], policy_hash="p", rule="", effort=0)
                chunk = listed[key].chunk_size if key in listed else None
                assert found is not None and chunk is not None, (key, n)
                assert min(chunk, found[1].chunk_size or 0) >= n, (key, n)

    def guarded(target: Callable[[int], None], i: int) -> threading.Thread:
        def run() -> None:
            try:
                target(i)
            except BaseException as exc:  # told to the test below
                problems.append(exc)

        return threading.Thread(target=run, daemon=True)

    writing.set()
    readers = [guarded(read, r) for r in range(2)]
    writers = [guarded(write, w) for w in range(4)]
    for thread in readers + writers:
        thread.start()
    for thread in writers:
        thread.join(_WAIT_S)
    writing.clear()
    for thread in readers:
        thread.join(_WAIT_S)
    assert problems == []
    fresh = DecisionCache(path).entries(strict=True)
    assert {key: e.chunk_size for key, e in fresh.items()} == stored
    assert path.read_bytes() == encode(fresh, "json" if suffix == ".json" else "toml")
