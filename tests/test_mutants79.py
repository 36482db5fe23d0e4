"""Session 78's new code where mutation round 79 found no test.

Each test pins a behaviour that a plausible one-line bug in ``_tracebacks``,
``_cache_parse``, ``_cache_unread``, ``_locks``, ``_config``, ``_atomic`` or
``_cache`` broke while every earlier test still passed. Real files and processes.
"""

from __future__ import annotations

import errno
import json
import logging
import os
import stat
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path
from typing import Any

import pytest
import tomli_w
from _forking import run_forked
from _full_entry import entry
from _newer import newer_table
from test_cache_versions import FORMATS, _read, _unreadable_file
from test_locks import _TRY_FLOCK

import chunktune
from chunktune import (
    CacheEntry,
    ConfigError,
    DecisionCache,
    _cache_checksums,
    _cache_format,
    _config,
    _locks,
    _tracebacks,
    load_settings,
)
from chunktune._cache_checksums import CHECKSUM_FIELD, stored_tables
from chunktune._cache_format import CacheFormat
from chunktune._cli import _record_cmd
from chunktune._lock_note import read_note, write_note
from chunktune._locks import key_lock
from chunktune._policy import Policy


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork")
def test_a_fork_child_remembers_failures_though_a_parent_thread_held_the_lock() -> None:
    """A child forked while the lock was held (another thread's) still tells first from repeat."""
    failure = RuntimeError("broken")

    def child() -> None:  # exits 0 where the child's own lock let it through twice
        first = _tracebacks.first("key", failure)
        sys.exit(0 if first and not _tracebacks.first("key", failure) else 3)

    with _tracebacks._lock:  # as a parent's thread logging at the fork holds it
        status = run_forked(child, hang_guard_s=10)
    assert status == 0


def _same_name_elsewhere() -> type[Exception]:
    """An exception class named as RuntimeError, of another module."""
    kind = type("RuntimeError", (Exception,), {})
    kind.__module__ = "someones.workload"
    return kind


def test_an_exception_of_another_module_with_the_same_name_is_another_failure() -> None:
    """A workload's own RuntimeError class is not the built-in: its traceback is logged too."""
    assert _tracebacks.first("key", RuntimeError("diverged"))
    assert _tracebacks.first("key", _same_name_elsewhere()("diverged"))


@pytest.mark.parametrize("raised", [RuntimeError, KeyError, AttributeError])
def test_a_message_that_raises_any_error_is_one_failure(raised: type[Exception]) -> None:
    """An exception whose __str__ raises any Exception is remembered; its repeat is a repeat."""

    class Unreadable(Exception):
        def __str__(self) -> str:
            raise raised("no message")

    assert _tracebacks.first("key", Unreadable())
    assert not _tracebacks.first("key", Unreadable())


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


def test_each_cause_of_a_working_directory_not_looked_in_is_warned_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A removed working directory, then an EIO: one warning each, by its reason alone."""
    monkeypatch.setattr(_config, "_looked", set())  # warned once per process
    gone = tmp_path / "gone"
    gone.mkdir()
    monkeypatch.chdir(gone)
    gone.rmdir()
    with caplog.at_level(logging.WARNING, logger="chunktune"):
        assert load_settings() == load_settings()
        monkeypatch.chdir(tmp_path)
        real_stat = os.stat

        def stat(path: object, *args: object, **kwargs: object) -> os.stat_result:
            if str(path).endswith("chunktune.toml"):
                raise OSError(errno.EIO, "Input/output error", str(path))
            return real_stat(path, *args, **kwargs)  # type: ignore[arg-type]

        monkeypatch.setattr(os, "stat", stat)
        assert load_settings() == load_settings()
    warnings = [r.getMessage() for r in caplog.records if "cannot look for" in r.getMessage()]
    assert [w.split("(")[1].split(")")[0] for w in warnings] == [
        "No such file or directory",
        "Input/output error",
    ]


def test_a_recording_kept_elsewhere_closes_a_descriptor_that_cannot_become_a_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """record's fallback copy: a failed fdopen of its temporary closes it and leaves none."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    made: list[int] = []
    real_mkstemp = tempfile.mkstemp

    def mkstemp(*args: object, **kwargs: object) -> tuple[int, str]:
        fd, name = real_mkstemp(*args, **kwargs)  # type: ignore[call-overload]
        made.append(fd)
        return fd, name

    def fdopen(fd: int, *args: object, **kwargs: object) -> None:
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(tempfile, "mkstemp", mkstemp)
    monkeypatch.setattr(os, "fdopen", fdopen)
    assert _record_cmd._keep_elsewhere(b"{}") is None
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(OSError, match="Bad file descriptor"):  # closed, not left open
        os.fstat(made[0])


def test_an_interrupt_writing_the_holder_note_lets_the_lock_go(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Ctrl-C as the holder's note is written is raised with the file lock released."""

    def interrupted(path: Path) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(_locks, "write_note", interrupted)
    lock = key_lock(tmp_path / "locks" / "k.lock")
    with pytest.raises(KeyboardInterrupt):
        lock.try_acquire()
    other = subprocess.run([sys.executable, "-c", _TRY_FLOCK, str(lock.path)], check=False)
    assert other.returncode == 0  # another process takes it: not held by nobody


def test_a_toml_entry_laid_out_by_hand_is_written_back_as_chunktune_lays_it_out(
    tmp_path: Path,
) -> None:
    """An entry's fields reordered by hand (its checksum still matches) read as chunktune's."""
    fresh, path = tmp_path / "fresh.toml", tmp_path / "cache.toml"
    assert DecisionCache(fresh).update({"old.abc": entry(8), "mine.abc": entry(4)})
    assert DecisionCache(path).put("old.abc", entry(8))
    doc = tomllib.loads(path.read_text())
    doc["entries"]["old.abc"] = dict(reversed(doc["entries"]["old.abc"].items()))
    path.write_text(tomli_w.dumps(doc))
    assert DecisionCache(path).put("mine.abc", entry(4))
    assert path.read_bytes() == fresh.read_bytes()  # not as the hand laid it out


def test_an_unknown_policy_among_thousands_is_matched_past_the_names_listed() -> None:
    """The hint for a misspelt policy looks among every name, not only the 20 listed."""
    policies = {f"p{i:04d}": Policy() for i in range(1000)}
    with pytest.raises(ConfigError, match=r"did you mean p0917\? known policies: p0000, "):
        chunktune.Settings(policies=policies, policy="p0917x")


def test_a_whole_entry_under_a_key_no_format_can_hold_is_skipped(tmp_path: Path) -> None:
    """A checksummed entry under a lone-surrogate key (JSON escapes it) is skipped, not served."""
    path = tmp_path / "cache.json"
    bad = "k\ud800.abc"  # TOML cannot hold it: served, every TOML write of it would fail
    entries = {bad: newer_table(bad), **stored_tables({"good.abc": entry(4)})}
    path.write_text(json.dumps({"schema": 1, "checksums": "sha256", "entries": entries}))
    assert DecisionCache(path).entries() == {"good.abc": entry(4)}


def test_a_named_pipe_nobody_reads_is_replaced_by_the_note(tmp_path: Path) -> None:
    """A named pipe at the note with no reader (ENXIO at once): replaced by a file naming us."""
    path = tmp_path / "k.lock.holder"
    os.mkfifo(path)
    write_note(path)
    assert stat.S_ISREG(path.stat().st_mode)
    holder = read_note(path)
    assert holder is not None and holder.pid == os.getpid()


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
