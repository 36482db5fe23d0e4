"""One cache file shared by machines that run other chunktunes, or read it in another format.

A newer chunktune of the same schema is simulated by hand: the tables it would write,
with fields and top-level keys this one does not know, each checksummed as chunktune
checksums a table (a newer one's are made the same way: another way needs a new schema).
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
import tomli_w
from _full_entry import entry
from _newer import newer_table, unreadable_table
from _users import child_env

from chunktune import (
    CacheEntry,
    DecisionCache,
    _cache_checksums,
    _cache_format,
    _tracebacks,
)
from chunktune._cache_checksums import CHECKSUM_FIELD, stored_tables
from chunktune._cache_format import CacheFormat
from chunktune._cache_layers import SystemCache
from chunktune._load import MachineLoad

FORMATS = [pytest.param("json", id="json"), pytest.param("toml", id="toml")]
# a file written in one format, read by a process whose settings ask for the other
OTHER_FORMATS = [
    pytest.param("toml", "json", id="toml-read-as-json"),
    pytest.param("json", "toml", id="json-read-as-toml"),
]


def _write(path: Path, doc: dict[str, Any]) -> None:
    fmt = path.suffix[1:]
    path.write_text(json.dumps(doc, indent=1) + "\n" if fmt == "json" else tomli_w.dumps(doc))


def _read(path: Path) -> dict[str, Any]:
    text = path.read_text()
    doc: dict[str, Any] = json.loads(text) if path.suffix == ".json" else tomllib.loads(text)
    return doc


def _read_as(path: Path, fmt: str) -> dict[str, Any]:
    doc: dict[str, Any] = (
        json.loads(path.read_text()) if fmt == "json" else tomllib.loads(path.read_text())
    )
    return doc


def _newer_file(path: Path, **top: Any) -> dict[str, Any]:
    """A newer chunktune's file at ``path`` (its suffix its format): one entry of its own
    with fields this chunktune does not know, and ``top`` beside ``entries``."""
    newer = newer_table("future.abc", batch_ms=93.6, rule_version=3, notes={"by": "v2"})
    doc = {"schema": 1, "checksums": "sha256", "entries": {"future.abc": newer}, **top}
    _write(path, doc)
    return newer


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_newer_chunktunes_entry_keeps_its_unknown_fields(tmp_path: Path, fmt: str) -> None:
    """A write here keeps every field of a newer chunktune's entry, checksum and all."""
    path = tmp_path / f"cache.{fmt}"
    newer = _newer_file(path)
    cache = DecisionCache(path)
    assert cache.get("future.abc") == entry()  # served: its fields are today's and more
    assert cache.put("mine.abc", entry(4))
    assert _read(path)["entries"]["future.abc"] == newer
    assert DecisionCache(path).put("again.abc", entry(4))  # a fresh process's write too
    assert _read(path)["entries"]["future.abc"] == newer


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_newer_chunktunes_top_level_keys_survive_a_write(tmp_path: Path, fmt: str) -> None:
    """A write here keeps a newer chunktune's keys beside ``entries``, values and all."""
    path = tmp_path / f"cache.{fmt}"
    top = {"written_by": "chunktune 2.0", "fleet": {"owner": "lab", "hosts": [1, 2]}}
    _newer_file(path, **top)
    cache = DecisionCache(path)
    assert cache.put("mine.abc", entry(4))
    assert cache.put("more.abc", entry(8))  # the writer's second write, from its memo
    doc = _read(path)
    assert {k: doc[k] for k in top} == top
    assert set(doc["entries"]) == {"future.abc", "mine.abc", "more.abc"}
    assert set(DecisionCache(path).entries()) == {"future.abc", "mine.abc", "more.abc"}


@pytest.mark.parametrize(("written", "asked"), OTHER_FORMATS)
def test_a_cache_in_the_other_format_is_read_and_written_in_it(
    tmp_path: Path, written: str, asked: str
) -> None:
    """A file another machine's settings wrote in the other format is served and kept so."""
    path = tmp_path / "cache.json"
    assert DecisionCache(path, format=written).put("theirs.abc", entry(8))
    mine = DecisionCache(path, format=asked)
    assert mine.get("theirs.abc") == entry(8)
    assert mine.put("mine.abc", entry(4))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cache.json"]  # nothing moved aside
    theirs = DecisionCache(path, format=written)
    assert theirs.entries() == {"theirs.abc": entry(8), "mine.abc": entry(4)}
    assert (path.read_bytes().startswith(b"{")) == (written == "json")


@pytest.mark.parametrize(("written", "asked"), OTHER_FORMATS)
def test_a_cache_in_the_other_format_is_warned_about_once_naming_both_formats(
    tmp_path: Path, written: str, asked: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Reads and writes of a file in the other format warn once, naming both formats."""
    path = tmp_path / "cache.json"
    assert DecisionCache(path, format=written).put("theirs.abc", entry(8))
    mine = DecisionCache(path, format=asked)
    with caplog.at_level(logging.WARNING, logger="chunktune"):
        assert mine.get("theirs.abc") == entry(8)
        assert mine.put("mine.abc", entry(4))
        assert len(mine.entries()) == 2
    (warning,) = [r.getMessage() for r in caplog.records if "these settings ask" in r.getMessage()]
    assert f"holds {written.upper()}, not the {asked.upper()} these settings ask for" in warning
    assert f"it is read and written as {written.upper()}" in warning


def _unusable_header(raw: bytes) -> bytes:
    """``raw``, a cache's document in either format, with its schema spelled as a string."""
    damaged = raw.replace(b"schema = 1", b'schema = "1"').replace(b'"schema": 1', b'"schema": "1"')
    assert damaged != raw
    return damaged


@pytest.mark.parametrize(("written", "asked"), OTHER_FORMATS)
@pytest.mark.parametrize("way", ["moved-aside", "system"])
def test_an_unusable_cache_in_the_other_format_is_salvaged_in_its_own(
    tmp_path: Path, written: str, asked: str, way: str
) -> None:
    """A file in the other format, decoded but unusable, keeps its whole entries, in its format."""
    path = tmp_path / "cache.json"
    theirs = DecisionCache(path, format=written)
    assert theirs.put("a.abc", entry(8)) and theirs.put("b.abc", entry(4))
    broken = _unusable_header(path.read_bytes())
    path.write_bytes(broken)
    mine = (
        DecisionCache(path, format=asked)
        if way == "moved-aside"
        else SystemCache(path, format=asked)
    )
    assert mine.entries() == {"a.abc": entry(8), "b.abc": entry(4)}
    if way == "system":
        assert path.read_bytes() == broken  # read-only: left as it is
        return
    aside = [p for p in tmp_path.iterdir() if ".corrupt-" in p.name]
    assert [p.read_bytes() for p in aside] == [broken]
    assert path.read_bytes().startswith(b"{") == (written == "json")  # its own format still
    assert DecisionCache(path, format=written).entries() == {"a.abc": entry(8), "b.abc": entry(4)}


@pytest.mark.parametrize(("written", "asked"), OTHER_FORMATS)
def test_a_cache_in_the_other_format_cut_short_keeps_its_whole_entries(
    tmp_path: Path, written: str, asked: str
) -> None:
    """A file in the other format cut short mid-line (it decodes in neither) keeps whole entries."""
    path = tmp_path / "cache.json"
    theirs = DecisionCache(path, format=written)
    for n in range(4):
        assert theirs.put(f"k{n}.abc", entry(4 + n))
    raw = path.read_bytes()
    cut = raw[: raw.index(b"k3.abc")]  # inside the last entry's first line
    path.write_bytes(cut)
    kept = DecisionCache(path, format=asked).entries()
    assert kept == {f"k{n}.abc": entry(4 + n) for n in range(3)}
    assert [p.read_bytes() for p in tmp_path.iterdir() if ".corrupt-" in p.name] == [cut]
    assert DecisionCache(path, format=written).entries() == kept


def test_a_process_whose_settings_say_toml_lists_a_json_cache(tmp_path: Path) -> None:
    """`cache list` under `format = "toml"` lists a JSON file at its path, leaving it as it is."""
    path = tmp_path / "cache.json"
    assert DecisionCache(path).put("theirs.abcdef12", entry(8))
    before = path.read_bytes()
    settings = tmp_path / "chunktune.toml"
    settings.write_text('[cache]\npath = "cache.json"\nformat = "toml"\n')
    env = {**child_env(), "CHUNKTUNE_CONFIG": str(settings)}
    env.pop("CHUNKTUNE_CACHE", None)  # the settings' path, and their format
    listed = subprocess.run(
        [sys.executable, "-m", "chunktune", "cache", "list", "--json"],
        env=env,
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=60,
    )
    assert listed.returncode == 0, listed.stderr
    assert [e["key"] for e in json.loads(listed.stdout)] == ["theirs.abcdef12"]
    assert "holds JSON, not the TOML" in listed.stderr
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cache.json", "chunktune.toml"]


def _unreadable_file(path: Path) -> dict[str, Any]:
    """A newer chunktune's file at ``path``: one entry this chunktune reads, one whose
    timings name a candidate it does not know (whole: its checksum matches)."""
    newer = unreadable_table("batch.abc")
    doc = {
        "schema": 1,
        "checksums": "sha256",
        "entries": {"batch.abc": newer, **stored_tables({"old.abc": entry()})},
    }
    _write(path, doc)
    return newer


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_newer_chunktunes_entry_this_one_cannot_read_is_kept(
    tmp_path: Path, fmt: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A whole entry in a form this chunktune cannot read is never served, and kept by writes."""
    path = tmp_path / f"cache.{fmt}"
    newer = _unreadable_file(path)
    cache = DecisionCache(path)
    assert set(cache.entries()) == {"old.abc"}
    assert cache.put("mine.abc", entry(4))
    assert cache.put("more.abc", entry(8))  # the writer's second write, from its memo
    assert _read(path)["entries"]["batch.abc"] == newer
    assert set(DecisionCache(path).entries()) == {"old.abc", "mine.abc", "more.abc"}
    assert "'batch.abc'" in caplog.text and "every write but `cache clear` keeps it" in caplog.text
    # and why this one cannot read it: the entry's problem
    assert "(timings_ms: key 'batch' is not 'native' or a chunk size)" in caplog.text
    assert "next write drops it" not in caplog.text


def _clear(path: Path) -> subprocess.CompletedProcess[str]:
    """``chunktune cache clear --yes`` of the cache at ``path``, in a child process."""
    return subprocess.run(
        [sys.executable, "-m", "chunktune", "cache", "clear", "--yes"],
        env={**child_env(), "CHUNKTUNE_CACHE": str(path)},
        capture_output=True,
        text=True,
        cwd=path.parent,
        timeout=60,
    )


def test_cache_clear_deletes_an_entry_it_cannot_read_and_says_so(tmp_path: Path) -> None:
    """`cache clear --yes` deletes a newer one's unreadable entry too, said apart; top keys stay."""
    path = tmp_path / "cache.json"
    _unreadable_file(path)
    doc = _read(path)
    _write(path, {**doc, "written_by": "chunktune 2.0"})
    cleared = _clear(path)
    assert cleared.returncode == 0, cleared.stderr
    assert cleared.stdout == (
        f"deleted 2 entries from {path} "
        "(among them 1 a newer chunktune wrote, which this one cannot read)\n"
    )
    assert _read(path)["entries"] == {}
    assert _read(path)["written_by"] == "chunktune 2.0"  # no entry: not the cache's to clear


def test_cache_clear_of_only_entries_it_cannot_read_empties_the_cache(tmp_path: Path) -> None:
    """A cache holding only a newer one's unreadable entries is not "nothing to clear"."""
    path = tmp_path / "cache.toml"
    newer = unreadable_table("batch.abc")
    _write(path, {"schema": 1, "checksums": "sha256", "entries": {"batch.abc": newer}})
    cleared = _clear(path)
    assert cleared.returncode == 0, cleared.stderr
    assert cleared.stdout.startswith(f"deleted 1 entry from {path} (among them 1 a newer")
    assert _read(path).get("entries", {}) == {}


@pytest.mark.parametrize("fmt", FORMATS)
def test_clear_deletes_the_entries_a_newer_chunktune_wrote_that_this_one_cannot_read(
    tmp_path: Path, fmt: str
) -> None:
    """`DecisionCache.unreadable` names a newer one's unreadable entries; `clear` deletes them."""
    path = tmp_path / f"cache.{fmt}"
    _unreadable_file(path)
    cache = DecisionCache(path)
    assert cache.unreadable() == {"batch.abc"}
    assert cache.clear() == 1  # the entries `entries` lists
    assert cache.unreadable() == frozenset()
    assert _read(path).get("entries", {}) == {}
    assert DecisionCache(path).unreadable() == frozenset()


def test_a_newer_chunktunes_unreadable_entry_is_warned_about_once_a_process(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Parsed again and again (other cache objects, the file changed), it is warned about once."""
    path = tmp_path / "cache.json"
    _unreadable_file(path)
    with caplog.at_level(logging.WARNING, logger="chunktune"):
        assert set(DecisionCache(path).entries()) == {"old.abc"}
        assert DecisionCache(path).put("mine.abc", entry(4))
        assert set(DecisionCache(path).entries()) == {"old.abc", "mine.abc"}
    warned = [r.getMessage() for r in caplog.records if "a newer chunktune's" in r.getMessage()]
    assert len(warned) == 1
    assert "'batch.abc'" in warned[0] and "every write but `cache clear` keeps it" in warned[0]


def test_each_newer_unreadable_entry_of_each_file_is_warned_about_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Another file's entry of the same key, and another key added later, each get their warning."""
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    first, second = tmp_path / "a" / "cache.json", tmp_path / "b" / "cache.json"
    _unreadable_file(first)
    _unreadable_file(second)
    with caplog.at_level(logging.WARNING, logger="chunktune"):
        DecisionCache(first).entries()
        DecisionCache(second).entries()
        doc = _read(first)
        doc["entries"]["more.abc"] = unreadable_table("more.abc")
        _write(first, doc)
        DecisionCache(first).entries()
    warned = [r.getMessage() for r in caplog.records if "a newer chunktune's" in r.getMessage()]
    assert len(warned) == 3
    assert f"'batch.abc' in {first}" in warned[0] and f"'batch.abc' in {second}" in warned[1]
    assert "entry 'more.abc' in" in warned[2]


def test_thousands_of_newer_entries_are_warned_about_once_and_forget_no_failure(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past a sixteenth of the memory, a file's newer entries are said once, not on each parse."""
    monkeypatch.setattr(_tracebacks, "MAX_FAILURES", 32)  # as 4096 is to a fleet's 10k entries
    path = tmp_path / "cache.json"
    _unreadable_file(path)
    doc = _read(path)
    doc["entries"].update({f"k{n}.abc": unreadable_table(f"k{n}.abc") for n in range(40)})
    _write(path, doc)
    failure = RuntimeError("a workload's")
    assert _tracebacks.first("key", failure)
    with caplog.at_level(logging.WARNING, logger="chunktune"):
        for n in range(3):  # parsed again: the file changed (another writer's put)
            assert DecisionCache(path).put(f"mine{n}.abc", entry(4))
    warned = [r.getMessage() for r in caplog.records if "a newer chunktune's" in r.getMessage()]
    assert len(warned) == 1 and "41 cache entries 'batch.abc'" in warned[0]
    assert not _tracebacks.first("key", failure)  # still remembered: its repeat is one line


def _holding(path: Path, keys: list[str]) -> None:
    """A newer chunktune's file at ``path`` whose entries, under ``keys``, this one cannot read."""
    tables = {key: unreadable_table(key) for key in keys}
    _write(path, {"schema": 1, "checksums": "sha256", "entries": tables})


def test_newer_entries_said_as_a_set_are_said_again_for_another_set_file_or_fewer(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file's set of newer entries is said once; another set, another file's, or fewer: again."""
    monkeypatch.setattr(_tracebacks, "MAX_FAILURES", 32)  # past 2 keys, said as a set
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    first, second = tmp_path / "a" / "cache.json", tmp_path / "b" / "cache.json"
    said = []
    for path, keys in [
        (first, ["a.abc", "b.abc", "c.abc"]),
        (second, ["a.abc", "b.abc", "c.abc"]),  # the same set, of another file
        (first, ["a.abc", "b.abc", "d.abc"]),  # another set of the same size
        (first, ["a.abc", "b.abc"]),  # 2: said key by key, none of them said so before
        (first, ["a.abc"]),  # said before, key by key
        (first, ["a.abc", "b.abc", "c.abc"]),  # the set said before
    ]:
        _holding(path, keys)
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="chunktune"):
            assert DecisionCache(path).entries() == {}
        said.append(sum("a newer chunktune's" in r.getMessage() for r in caplog.records))
    assert said == [1, 1, 1, 1, 0, 0]


def test_cache_merge_into_a_newer_chunktunes_file_keeps_what_that_one_wrote(
    tmp_path: Path,
) -> None:
    """`cache merge -o` into a newer chunktune's file keeps its fields, top keys and entries."""
    out = tmp_path / "fleet.toml"
    unreadable = _unreadable_file(out)
    doc = _read(out)
    future = newer_table("future.abc", batch_ms=93.6)
    doc["entries"]["future.abc"] = future
    doc["written_by"] = "chunktune 2.0"
    _write(out, doc)
    other = tmp_path / "node7.json"
    DecisionCache(other).put("node7.abc", entry(4))
    merged = subprocess.run(
        [sys.executable, "-m", "chunktune", "cache", "merge", str(other), "-o", str(out)],
        env=child_env(),
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=60,
    )
    assert merged.returncode == 0, merged.stderr
    after = _read(out)
    assert after["written_by"] == "chunktune 2.0"
    assert after["entries"]["future.abc"] == future
    assert after["entries"]["batch.abc"] == unreadable
    assert set(after["entries"]) == {"batch.abc", "future.abc", "node7.abc", "old.abc"}


def test_a_decision_stored_over_an_unreadable_entry_replaces_it_for_good(tmp_path: Path) -> None:
    """Storing under a newer one's unreadable key replaces it; deleting that does not revive it."""
    path = tmp_path / "cache.json"
    _unreadable_file(path)
    cache = DecisionCache(path)
    assert cache.put("batch.abc", entry(4))
    assert (
        _read(path)["entries"]["batch.abc"][CHECKSUM_FIELD]
        == (stored_tables({"batch.abc": entry(4)})["batch.abc"][CHECKSUM_FIELD])
    )
    assert cache.remove(["batch.abc"]) == {"batch.abc"}
    assert set(_read(path)["entries"]) == {"old.abc"}


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_broken_files_fresh_copy_holds_its_own_unreadable_entry_not_an_earlier_one(
    tmp_path: Path, fmt: str
) -> None:
    """A broken file's fresh copy holds the newer one's entry of its bytes, not one read before."""
    path = tmp_path / f"cache.{fmt}"
    _unreadable_file(path)
    cache = DecisionCache(path)
    assert set(cache.entries()) == {"old.abc"}  # reads batch.abc, unreadable here
    # the newer chunktune replaces its entry; then another entry is damaged
    newer = unreadable_table("batch.abc", batch_ms=7.7)
    tables = stored_tables({"old.abc": entry(), "hit.abc": entry(4)})
    tables["hit.abc"]["host"] = "edited"  # its checksum no longer matches
    broken = {"schema": 1, "checksums": "sha256", "entries": {"batch.abc": newer, **tables}}
    _write(path, broken)
    assert set(cache.entries()) == {"old.abc"}  # moved aside, its whole entries kept
    # these bytes' own batch.abc, not the one read before
    assert _read(path)["entries"] == {"batch.abc": newer, "old.abc": tables["old.abc"]}
    (aside,) = (p for p in tmp_path.iterdir() if ".corrupt-" in p.name)
    assert _read_as(aside, fmt)["entries"]["batch.abc"] == newer


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_cache_removed_after_a_read_gets_no_earlier_unreadable_entry_back(
    tmp_path: Path, fmt: str
) -> None:
    """A cache file removed after a read is made anew without the newer entry read before."""
    path = tmp_path / f"cache.{fmt}"
    _unreadable_file(path)
    cache = DecisionCache(path)
    assert set(cache.entries()) == {"old.abc"}
    path.unlink()  # the user's rm: what the newer chunktune wrote went with it
    assert cache.put("mine.abc", entry(4))
    assert set(_read(path)["entries"]) == {"mine.abc"}


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_cache_removed_between_its_stat_and_its_read_gets_no_unreadable_entry_back(
    tmp_path: Path, fmt: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cache file gone between the stat and the read is made anew without the newer entry."""
    path = tmp_path / f"cache.{fmt}"
    _unreadable_file(path)
    cache = DecisionCache(path)
    assert set(cache.entries()) == {"old.abc"}
    read_bytes = Path.read_bytes

    pending = [path]  # removed by another process right after the put's stat, once

    def removed_first(self: Path) -> bytes:
        if self in pending:
            pending.remove(self)
            self.unlink()
        return read_bytes(self)

    monkeypatch.setattr(Path, "read_bytes", removed_first)
    assert cache.put("mine.abc", entry(4))
    assert not pending
    assert set(_read(path)["entries"]) == {"mine.abc"}


def test_a_json_cache_after_a_blank_line_is_read_as_json_where_toml_is_asked(
    tmp_path: Path,
) -> None:
    """A JSON cache that starts with white space (reformatted by hand) is JSON, not damage."""
    path = tmp_path / "cache.json"
    assert DecisionCache(path, format="json").put("theirs.abc", entry(8))
    path.write_bytes(b"\n  " + path.read_bytes())
    mine = DecisionCache(path, format="toml")
    assert mine.get("theirs.abc") == entry(8)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cache.json"]  # nothing moved aside


@pytest.mark.parametrize("blank", [b"", b"\n", b"# nothing\n"], ids=["empty", "newline", "comment"])
def test_a_blank_json_cache_stays_json(tmp_path: Path, blank: bytes) -> None:
    """A .json cache left blank (a crash, a hand edit) is no TOML table: written back as JSON."""
    path = tmp_path / "cache.json"
    path.write_bytes(blank)
    cache = DecisionCache(path)
    assert cache.put("mine.abc", entry(4))
    assert json.loads(path.read_bytes())["entries"].keys() == {"mine.abc"}
    assert DecisionCache(path).entries() == {"mine.abc": entry(4)}


@pytest.mark.parametrize("asked", ["json", "toml"])
def test_a_json_cache_read_under_either_setting_converts_only_the_new_entry(
    tmp_path: Path, asked: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A write into a JSON cache re-encodes its entries as read, under TOML settings too."""
    path = tmp_path / "cache.json"
    theirs = {f"theirs{n}.abc": entry(n + 1) for n in range(3)}
    assert DecisionCache(path, format="json").update(theirs)
    made: list[str] = []
    stored = _cache_checksums._stored

    def counted(key: str, found: CacheEntry) -> dict[str, Any]:
        made.append(key)
        return stored(key, found)

    monkeypatch.setattr(_cache_checksums, "_stored", counted)
    mine = DecisionCache(path, format=asked)
    assert mine.put("mine.abc", entry(4))
    assert made == ["mine.abc"]  # its spans found the others' tables: none made again
    assert DecisionCache(path).entries() == {**theirs, "mine.abc": entry(4)}


@pytest.mark.parametrize(
    "fields",
    [
        pytest.param({}, id="some-fields"),
        # a table with every field this chunktune writes, and none it does not
        pytest.param(
            {"gain": 0.12, "gain_ci": (0.1, 0.14), "load": MachineLoad(0.5, 2)}, id="every-field"
        ),
    ],
)
def test_a_toml_entry_laid_out_by_hand_is_written_back_as_chunktune_lays_it_out(
    tmp_path: Path, fields: dict[str, Any]
) -> None:
    """An entry's fields reordered by hand (its checksum still matches) read as chunktune's."""
    fresh, path = tmp_path / "fresh.toml", tmp_path / "cache.toml"
    old = entry(8, **fields)
    assert DecisionCache(fresh).update({"old.abc": old, "mine.abc": entry(4)})
    assert DecisionCache(path).put("old.abc", old)
    doc = tomllib.loads(path.read_text())
    doc["entries"]["old.abc"] = dict(reversed(doc["entries"]["old.abc"].items()))
    path.write_text(tomli_w.dumps(doc))
    assert DecisionCache(path).put("mine.abc", entry(4))
    assert path.read_bytes() == fresh.read_bytes()  # not as the hand laid it out


def test_a_whole_entry_under_a_key_no_format_can_hold_is_skipped(tmp_path: Path) -> None:
    """A checksummed entry under a lone-surrogate key (JSON escapes it) is skipped, not served."""
    path = tmp_path / "cache.json"
    bad = "k\ud800.abc"  # TOML cannot hold it: served, every TOML write of it would fail
    entries = {bad: newer_table(bad), **stored_tables({"good.abc": entry(4)})}
    path.write_text(json.dumps({"schema": 1, "checksums": "sha256", "entries": entries}))
    assert DecisionCache(path).entries() == {"good.abc": entry(4)}


def test_an_altered_entry_in_the_other_format_is_decoded_once_to_read_and_salvage_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A TOML file read under JSON settings, one entry edited: TOML-decoded once, not twice."""
    path = tmp_path / "cache.json"
    assert DecisionCache(path, format="toml").update({f"e{n}.abc": entry(n + 1) for n in range(3)})
    doc = tomllib.loads(path.read_text())
    table = doc["entries"]["e0.abc"]
    field = next(k for k, v in table.items() if isinstance(v, str) and k != CHECKSUM_FIELD)
    table[field] += " edited"  # its checksum no longer matches
    path.write_text(tomli_w.dumps(doc))
    decoded: list[str] = []
    real_decode = _cache_format.decode

    def counted(raw: bytes, fmt: CacheFormat, **kwargs: Any) -> Any:
        decoded.append(fmt)
        return real_decode(raw, fmt, **kwargs)

    monkeypatch.setattr("chunktune._cache_parse.decode", counted)
    monkeypatch.setattr("chunktune._cache_salvage.decode", counted)
    assert set(DecisionCache(path).entries()) == {"e1.abc", "e2.abc"}
    assert decoded.count("toml") == 1  # the salvage took what the read decoded


def test_a_newer_chunktunes_top_level_keys_are_written_sorted_in_json(tmp_path: Path) -> None:
    """Keys a newer one wrote beside `entries`, read out of order, are written back sorted."""
    path = tmp_path / "cache.json"
    path.write_text(
        json.dumps({"schema": 1, "checksums": "sha256", "entries": {}, "zeta": 1, "alpha": 2})
    )
    assert DecisionCache(path).put("k.abc", entry(4))
    raw = path.read_bytes()
    assert raw.index(b'"alpha"') < raw.index(b'"zeta"')
    assert json.loads(raw)["zeta"] == 1
