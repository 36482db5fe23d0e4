"""A damaged cache file's fresh copy keeps what a newer chunktune of the schema wrote.

A file shared by machines on different chunktune versions holds entries this one cannot
read (never served, written back as read) and entries with fields it does not know; the
salvage of a damaged one carries them into the fresh file as a usable file's write does,
by every path: the file decoding whole (an altered entry), entry by entry (cut short, a
key TOML quotes with escapes), and in the other format's layout.
"""

from __future__ import annotations

import errno
import json
import os
import tomllib
from pathlib import Path
from typing import Any

import pytest
import tomli_w
from _full_entry import entry
from _newer import newer_table, unreadable_table

from chunktune import DecisionCache
from chunktune._cache_checksums import CHECKSUM_FIELD, stored_tables
from chunktune._cache_layers import SystemCache
from chunktune._cache_salvage import salvaged

FORMATS = [pytest.param("json", id="json"), pytest.param("toml", id="toml")]
# a plain key, and one TOML quotes with escapes (its header is parsed alone, not by regex)
KEYS = [pytest.param("batch.abc", id="plain-key"), pytest.param('batch "q".abc', id="escaped-key")]


def _doc(raw: bytes, fmt: str) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(raw) if fmt == "json" else tomllib.loads(raw.decode())
    return doc


def _shared_file(path: Path, fmt: str, key: str) -> dict[str, dict[str, Any]]:
    """A file as this chunktune writes it after reading a newer one's: that one's entry it
    cannot read under ``key``, one with fields it does not know, a key beside ``entries``,
    and three entries of its own (``zz.abc`` last). Returns the newer one's two tables."""
    newer = {key: unreadable_table(key), "future.abc": newer_table("future.abc", batch_ms=93.6)}
    doc = {"schema": 1, "checksums": "sha256", "entries": newer, "written_by": "chunktune 2.0"}
    path.write_text(json.dumps(doc) if fmt == "json" else tomli_w.dumps(doc))
    cache = DecisionCache(path, format=fmt)
    for name, chunk in [("hit.abc", 4), ("old.abc", 8), ("zz.abc", 6)]:
        assert cache.put(name, entry(chunk))
    return newer


def _damaged(raw: bytes, damage: str) -> bytes:
    """``raw`` with its last entry, ``zz.abc``, altered (the file still decodes) or cut."""
    at = raw.index(b"zz.abc")
    if damage == "altered":
        reason = raw.index(b"because", at)
        return raw[:reason] + b"becauze" + raw[reason + len(b"because") :]
    return raw[: at + 40]  # inside the last entry: the file decodes in neither format


def _fresh(tmp_path: Path, path: Path, fmt: str, damaged: bytes) -> dict[str, Any]:
    """The fresh file's document, after checking the copy aside holds ``damaged``."""
    assert [p.read_bytes() for p in tmp_path.iterdir() if ".corrupt-" in p.name] == [damaged]
    return _doc(path.read_bytes(), fmt)


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("key", KEYS)
@pytest.mark.parametrize("damage", ["altered", "cut"])
def test_a_damaged_files_fresh_copy_keeps_a_newer_chunktunes_entries(
    tmp_path: Path, fmt: str, key: str, damage: str
) -> None:
    """The fresh copy keeps a newer one's unreadable entry and its fields, once; others served."""
    path = tmp_path / f"cache.{fmt}"
    newer = _shared_file(path, fmt, key)
    damaged = _damaged(path.read_bytes(), damage)
    path.write_bytes(damaged)
    assert set(DecisionCache(path, format=fmt).entries()) == {"future.abc", "hit.abc", "old.abc"}
    fresh = _fresh(tmp_path, path, fmt, damaged)
    assert fresh["entries"][key] == newer[key]
    assert fresh["entries"]["future.abc"] == newer["future.abc"]  # its fields kept
    assert set(fresh["entries"]) == {key, "future.abc", "hit.abc", "old.abc"}
    raw = path.read_bytes()
    assert raw.count(newer[key][CHECKSUM_FIELD].encode()) == 1  # written once
    if damage == "altered":  # decoded whole: the keys beside the entries are as read
        assert fresh["written_by"] == "chunktune 2.0"
    assert set(DecisionCache(path, format=fmt).entries()) == {"future.abc", "hit.abc", "old.abc"}


@pytest.mark.parametrize(
    ("written", "asked"),
    [
        pytest.param("toml", "json", id="toml-read-as-json"),
        pytest.param("json", "toml", id="json-read-as-toml"),
    ],
)
def test_a_cache_in_the_other_format_cut_short_keeps_a_newer_chunktunes_entry(
    tmp_path: Path, written: str, asked: str
) -> None:
    """Cut short in the other format's layout, its fresh copy keeps a newer one's entry."""
    path = tmp_path / "cache.json"
    newer = _shared_file(path, written, "batch.abc")
    damaged = _damaged(path.read_bytes(), "cut")
    path.write_bytes(damaged)
    served = DecisionCache(path, format=asked).entries()
    assert set(served) == {"future.abc", "hit.abc", "old.abc"}
    # decoding in neither format, the fresh file is written in the one asked for
    fresh = _fresh(tmp_path, path, asked, damaged)
    assert fresh["entries"]["batch.abc"] == newer["batch.abc"]
    assert fresh["entries"]["future.abc"] == newer["future.abc"]


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_salvaged_unreadable_entry_is_replaced_for_good_by_a_decision_stored_over_it(
    tmp_path: Path, fmt: str
) -> None:
    """A salvaged newer entry is kept; one stored over it replaces it; a delete never revives it."""
    path = tmp_path / f"cache.{fmt}"
    _shared_file(path, fmt, "batch.abc")
    path.write_bytes(_damaged(path.read_bytes(), "cut"))
    cache = DecisionCache(path, format=fmt)
    assert "batch.abc" not in cache.entries()  # salvaged: never served, yet kept
    assert _doc(path.read_bytes(), fmt)["entries"]["batch.abc"] == unreadable_table("batch.abc")
    assert cache.put("batch.abc", entry(4))
    stored = _doc(path.read_bytes(), fmt)["entries"]["batch.abc"]
    assert stored == stored_tables({"batch.abc": entry(4)})["batch.abc"]
    assert cache.remove(["batch.abc"]) == {"batch.abc"}
    assert "batch.abc" not in _doc(path.read_bytes(), fmt)["entries"]


@pytest.mark.parametrize("fmt", FORMATS)
def test_the_move_aside_warning_counts_the_newer_chunktunes_entries_kept(
    tmp_path: Path, fmt: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The move aside's warning says it kept the entries this one reads and the newer one's."""
    path = tmp_path / f"cache.{fmt}"
    _shared_file(path, fmt, "batch.abc")
    path.write_bytes(_damaged(path.read_bytes(), "cut"))
    DecisionCache(path, format=fmt).entries()
    (moved,) = [r.getMessage() for r in caplog.records if "moved it to" in r.getMessage()]
    assert moved.endswith(
        "keeping the 3 of its entries that were whole "
        "and the 1 a newer chunktune wrote that this one cannot read"
    )


@pytest.mark.parametrize("fmt", FORMATS)
def test_the_system_cache_serves_a_damaged_files_whole_entries_and_no_newer_one(
    tmp_path: Path, fmt: str
) -> None:
    """The read-only system cache serves the whole entries of a damaged file, not a newer one's."""
    path = tmp_path / f"cache.{fmt}"
    _shared_file(path, fmt, "batch.abc")
    damaged = _damaged(path.read_bytes(), "cut")
    path.write_bytes(damaged)
    assert set(SystemCache(path, format=fmt).entries()) == {"future.abc", "hit.abc", "old.abc"}
    assert path.read_bytes() == damaged


def test_a_fresh_copy_that_cannot_be_written_names_the_newer_entries_left_aside(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Renamed aside for good (disk full, no way back): the warning counts the newer one's too."""
    path = tmp_path / "cache.json"
    _shared_file(path, "json", "batch.abc")
    path.write_bytes(_damaged(path.read_bytes(), "cut"))
    real_replace = os.replace

    def full(_fd: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    def no_link(src: object, dst: object, **_kwargs: object) -> None:
        raise OSError(errno.EPERM, "Operation not permitted", str(src))

    def no_way_back(src: str, dst: str) -> None:
        if Path(dst) == path:  # the move back: refused
            raise OSError(errno.EIO, "Input/output error", str(src))
        real_replace(src, dst)

    with monkeypatch.context() as disk:
        disk.setattr(os, "fsync", full)
        disk.setattr(os, "link", no_link)
        disk.setattr(os, "replace", no_way_back)
        DecisionCache(path).entries()
    assert (
        "but could not write the 3 of its entries that were whole and the 1 a newer "
        "chunktune wrote that this one cannot read to a fresh cache"
    ) in caplog.text


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_damaged_file_whose_only_whole_entry_is_a_newer_ones_keeps_it(
    tmp_path: Path, fmt: str, caplog: pytest.LogCaptureFixture
) -> None:
    """No entry this one reads is whole, a newer one's is: the fresh copy still keeps that one."""
    path = tmp_path / f"cache.{fmt}"
    doc = {
        "schema": 1,
        "checksums": "sha256",
        "entries": {"batch.abc": unreadable_table("batch.abc")},
    }
    path.write_text(json.dumps(doc) if fmt == "json" else tomli_w.dumps(doc))
    assert DecisionCache(path, format=fmt).put("zz.abc", entry(6))
    damaged = _damaged(path.read_bytes(), "cut")
    path.write_bytes(damaged)
    assert DecisionCache(path, format=fmt).entries() == {}
    fresh = _fresh(tmp_path, path, fmt, damaged)
    assert fresh["entries"] == {"batch.abc": unreadable_table("batch.abc")}
    (moved,) = [r.getMessage() for r in caplog.records if "moved it to" in r.getMessage()]
    assert moved.endswith(", keeping the 1 a newer chunktune wrote that this one cannot read")


def _cut_json(members: list[tuple[str, dict[str, Any]]], *, checksums: bool = True) -> bytes:
    """A JSON cache laid out as chunktune writes it, holding ``members`` (a key may repeat),
    cut short inside the member after them: it decodes no more, each block is read alone."""
    lines = [f"  {json.dumps(key)}: {json.dumps(table)}," for key, table in members]
    head = '{\n "checksums": "sha256",\n' if checksums else "{\n"
    return (head + ' "entries": {\n' + "\n".join(lines) + '\n  "zz.abc": {"ch').encode()


@pytest.mark.parametrize(
    "unreadable_first", [True, False], ids=["unreadable-first", "readable-first"]
)
def test_a_key_met_twice_in_a_damaged_file_is_what_its_last_whole_block_holds(
    unreadable_first: bool,
) -> None:
    """A block duplicated by hand: the last whole one stands alone, not also the earlier one."""
    readable = stored_tables({"batch.abc": entry(4)})["batch.abc"]
    tables = [unreadable_table("batch.abc"), readable]
    if not unreadable_first:
        tables.reverse()
    found = salvaged(_cut_json([("batch.abc", table) for table in tables]), "json")
    if unreadable_first:
        assert set(found.entries) == {"batch.abc"} and found.unread.entries == {}
    else:
        assert found.entries == {} and found.known == {}
        assert found.unread.entries == {"batch.abc": unreadable_table("batch.abc")}


def test_a_whole_entry_under_a_key_no_format_can_hold_is_not_salvaged() -> None:
    """A checksummed block under a lone-surrogate key is neither served nor carried, as read."""
    bad = "k\ud800.abc"
    good = stored_tables({"good.abc": entry(4)})["good.abc"]
    found = salvaged(_cut_json([(bad, newer_table(bad)), ("good.abc", good)]), "json")
    assert found.entries == {"good.abc": entry(4)} and found.unread.entries == {}


def test_an_invalid_entry_of_a_file_without_checksums_is_not_carried_as_a_newer_ones() -> None:
    """No checksum vouches for an invalid block of a file without checksums: it is dropped."""
    good = dict(stored_tables({"good.abc": entry(4)})["good.abc"])
    del good[CHECKSUM_FIELD]
    bad = {**good, "chunk_size": "four"}
    found = salvaged(_cut_json([("bad.abc", bad), ("good.abc", good)], checksums=False), "json")
    assert set(found.entries) == {"good.abc"} and found.unread.entries == {}


@pytest.mark.parametrize("fmt", FORMATS)
def test_an_altered_files_only_whole_part_a_newer_ones_top_key_is_kept(
    tmp_path: Path, fmt: str
) -> None:
    """Its one entry altered, the file decoding whole: its fresh copy keeps the newer one's key."""
    path = tmp_path / f"cache.{fmt}"
    doc = {"schema": 1, "checksums": "sha256", "written_by": "chunktune 2.0"}
    path.write_text(json.dumps(doc) if fmt == "json" else tomli_w.dumps(doc))
    assert DecisionCache(path, format=fmt).put("zz.abc", entry(6))
    damaged = _damaged(path.read_bytes(), "altered")
    path.write_bytes(damaged)
    assert DecisionCache(path, format=fmt).entries() == {}
    fresh = _fresh(tmp_path, path, fmt, damaged)
    assert fresh["written_by"] == "chunktune 2.0" and fresh["entries"] == {}
