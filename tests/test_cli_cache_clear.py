"""`chunktune cache clear KEY...`: only the entries named go, over real files and processes."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from _cache_cli import entry, one_error

from chunktune import DecisionCache
from chunktune._cli import main

JOB_A = "a" * 32
JOB_B = "b" * 32
KEYS = {
    f"{JOB_A}.111111aaaaaa": "aaaaaaaaaaaa.111111",
    f"{JOB_A}.222222bbbbbb": "aaaaaaaaaaaa.222222",
    f"{JOB_B}.333333cccccc": "bbbbbbbbbbbb",
}


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.fixture
def cache(isolated: Path) -> DecisionCache:
    """The user's cache with one job under two policies and another job under one."""
    cache = DecisionCache(isolated / "cache.json")
    assert cache.update({key: entry(age_s=i + 1) for i, key in enumerate(KEYS)})
    return cache


@pytest.mark.parametrize(
    ("name", "key"),
    [
        pytest.param("bbbbbbbbbbbb", f"{JOB_B}.333333cccccc", id="as-listed"),
        pytest.param("aaaaaaaaaaaa.222222", f"{JOB_A}.222222bbbbbb", id="as-listed-with-policy"),
        pytest.param(f"{JOB_A}.111111aaaaaa", f"{JOB_A}.111111aaaaaa", id="whole-key"),
        pytest.param("bbbbbbbb", f"{JOB_B}.333333cccccc", id="eight-characters"),
        pytest.param("aaaaaaa.111", f"{JOB_A}.111111aaaaaa", id="eight-with-policy"),
    ],
)
def test_clear_key_deletes_only_the_entry_named(
    cache: DecisionCache, capsys: pytest.CaptureFixture[str], name: str, key: str
) -> None:
    """`cache clear KEY --yes` deletes the one entry KEY names, says which, and keeps the rest."""
    assert main(["cache", "clear", name, "--yes"]) == 0
    assert capsys.readouterr().out == (f"deleted {KEYS[key]}\ndeleted 1 entry from {cache.path}\n")
    assert set(cache.entries()) == set(KEYS) - {key}


def test_clear_of_several_keys_deletes_each_once(
    cache: DecisionCache, capsys: pytest.CaptureFixture[str]
) -> None:
    """Two names of one entry and a name of another: both entries go, each named once."""
    names = ["bbbbbbbbbbbb", "aaaaaaaaaaaa.111111", f"{JOB_B}.333333cccccc"]
    assert main(["cache", "clear", "--yes", *names]) == 0
    assert capsys.readouterr().out == (
        f"deleted bbbbbbbbbbbb\ndeleted aaaaaaaaaaaa.111111\ndeleted 2 entries from {cache.path}\n"
    )
    assert set(cache.entries()) == {f"{JOB_A}.222222bbbbbb"}


@pytest.mark.parametrize(
    ("name", "message"),
    [
        pytest.param(
            "bbbbbbb",
            'key "bbbbbbb" is too short; expected a key as `chunktune cache list` shows it, '
            "or its first 8 or more characters",
            id="seven-characters",
        ),
        pytest.param("", 'key "" is too short', id="empty"),
        pytest.param(
            "cccccccccccc",
            'no cache entry\'s key starts with "cccccccccccc"; expected a key as '
            "`chunktune cache list` shows it",
            id="unknown",
        ),
        pytest.param(
            "aaaaaaaaaaaa",
            '"aaaaaaaaaaaa" matches 2 entries (aaaaaaaaaaaa.111111, aaaaaaaaaaaa.222222); '
            "expected one entry's key: give more characters",
            id="ambiguous",
        ),
    ],
)
def test_clear_of_a_name_that_names_no_one_entry_deletes_nothing(
    cache: DecisionCache, capsys: pytest.CaptureFixture[str], name: str, message: str
) -> None:
    """A name too short, unknown or ambiguous, after a good one: exit 2, naming it, file kept."""
    before = cache.path.read_bytes()
    assert main(["cache", "clear", "--yes", "bbbbbbbbbbbb", name]) == 2
    out, err = capsys.readouterr()
    assert out == "" and message in one_error(err)
    assert cache.path.read_bytes() == before


def test_clear_key_refuses_without_a_terminal_or_yes(
    cache: DecisionCache, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Off a terminal and without --yes, `cache clear KEY` refuses with exit 2, deleting nothing."""
    monkeypatch.setattr(sys, "stdin", io.StringIO("y\n"))
    assert main(["cache", "clear", "bbbbbbbbbbbb"]) == 2
    assert one_error(capsys.readouterr().err) == (
        f"chunktune: error: refusing to delete 1 entry (bbbbbbbbbbbb) from {cache.path} "
        "without --yes (stdin is not a terminal, so there is no one to ask)"
    )
    assert set(cache.entries()) == set(KEYS)


@pytest.mark.parametrize(("answer", "left"), [("y\n", 2), ("n\n", 3), ("", 3)])
def test_clear_key_asks_on_a_terminal_naming_the_entries(
    cache: DecisionCache,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    answer: str,
    left: int,
) -> None:
    """On a terminal `cache clear KEY` asks on stderr, naming the entry, and deletes on yes only."""
    monkeypatch.setattr(sys, "stdin", _Terminal(answer))
    assert main(["cache", "clear", "bbbbbbbbbbbb"]) == 0
    out, err = capsys.readouterr()
    assert err.startswith(f"Delete 1 entry (bbbbbbbbbbbb) from {cache.path}? [y/N] ")
    assert ("nothing deleted" in out) == (left == 3)
    assert len(cache.entries()) == left


def test_clear_key_of_a_damaged_cache_that_cannot_go_aside_deletes_nothing(
    isolated: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A damaged cache whose write lock cannot be taken: `clear KEY --yes` exits 2, file kept."""
    path = isolated / "cache.json"
    DecisionCache(path).update({JOB_A: entry(4, reason="test 1"), JOB_B: entry(8, reason="test 2")})
    damaged = path.read_bytes().replace(b"test 2", b"test 3")
    path.write_bytes(damaged)
    (isolated / "cache.json.lock").mkdir()  # the write lock cannot be taken
    assert main(["cache", "clear", "--yes", "aaaaaaaa"]) == 2
    assert "nothing was deleted" in one_error(capsys.readouterr().err)
    assert path.read_bytes() == damaged


WRITE_KEYS = """
import sys
sys.path.insert(0, sys.argv[3])
from _cache_cli import entry
from chunktune import DecisionCache
cache, worker = DecisionCache(sys.argv[1]), sys.argv[2]
for i in range(25):
    assert cache.put(f"writer{worker}-{i:02}", entry(age_s=i + 1))
"""

CLEAR_KEYS_ONE_BY_ONE = """
import sys
from chunktune._cli import main
for i in range(25):
    assert main(["cache", "clear", "--yes", f"victim-{i:02}"]) == 0
print("cleared", flush=True)
"""


def test_clear_key_beside_writing_processes_loses_none_of_their_entries(isolated: Path) -> None:
    """Two processes store 25 keys each while a third clears 25 others one by one: all 50 stay."""
    cache = DecisionCache(isolated / "cache.json")
    assert cache.update({f"victim-{i:02}": entry(age_s=i + 1) for i in range(25)})
    tests = str(Path(__file__).parent)
    procs: list[subprocess.Popen[Any]] = [  # bytes from the writers, text from the clear
        subprocess.Popen([sys.executable, "-c", WRITE_KEYS, str(cache.path), str(w), tests])
        for w in range(2)
    ]
    procs.append(
        subprocess.Popen(
            [sys.executable, "-c", CLEAR_KEYS_ONE_BY_ONE],
            stdout=subprocess.PIPE,
            text=True,
        )
    )
    for proc in procs:
        assert proc.wait(timeout=240) == 0  # a hang guard, not a timing
    assert procs[-1].stdout is not None and procs[-1].stdout.read().endswith("cleared\n")
    procs[-1].stdout.close()
    kept = set(json.loads(cache.path.read_text())["entries"])
    assert kept == {f"writer{w}-{i:02}" for w in range(2) for i in range(25)}


def test_clear_key_names_an_entry_deleted_while_it_asked_as_already_gone(
    cache: DecisionCache, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """An entry deleted elsewhere while `clear KEY` asks is 'already gone'; a new one stays."""
    from chunktune._cli import _cache_cmd

    def answer_after_another_clear(question: str) -> str:
        other = DecisionCache(cache.path)  # another process, meanwhile
        assert other.remove([f"{JOB_B}.333333cccccc"]) == {f"{JOB_B}.333333cccccc"}
        assert other.put("c" * 32, entry())
        return "y\n"

    monkeypatch.setattr(sys, "stdin", _Terminal(""))  # a terminal: it asks
    monkeypatch.setattr(_cache_cmd, "_ask", answer_after_another_clear)
    assert main(["cache", "clear", "bbbbbbbbbbbb", "aaaaaaaaaaaa.111"]) == 0
    assert capsys.readouterr().out == (
        "bbbbbbbbbbbb was already gone\ndeleted aaaaaaaaaaaa.111111\n"
        f"deleted 1 entry from {cache.path}\n"
    )
    assert set(cache.entries()) == {f"{JOB_A}.222222bbbbbb", "c" * 32}


def test_clear_key_tidies_the_named_keys_idle_lock_files_and_dead_writers_temporaries(
    cache: DecisionCache, capsys: pytest.CaptureFixture[str]
) -> None:
    """`clear KEY` deletes its keys' idle lock files, their notes and dead temporaries; no more."""
    import fcntl
    import os
    import time

    from chunktune._atomic import STALE_TEMP_S
    from chunktune._lock_note import note_path

    named, held, other = f"{JOB_A}.111111aaaaaa", f"{JOB_A}.222222bbbbbb", f"{JOB_B}.333333cccccc"
    locks = cache.path.parent / "locks"
    locks.mkdir()
    for key in (named, held, other):
        (locks / f"{key}.lock").touch()
    note_path(locks / f"{named}.lock").write_text("a holder killed while holding it")
    temp = cache.path.with_name(f".{cache.path.name}.dead1234.tmp")
    temp.write_text("{")
    old = time.time() - STALE_TEMP_S - 60
    os.utime(temp, (old, old))
    fd = os.open(locks / f"{held}.lock", os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # another sweeper holds it
        assert main(["cache", "clear", "aaaaaaaaaaaa.111111", "aaaaaaaaaaaa.222222", "--yes"]) == 0
    finally:
        os.close(fd)
    assert "deleted 2 entries" in capsys.readouterr().out
    assert sorted(p.name for p in locks.iterdir()) == [f"{held}.lock", f"{other}.lock"]
    assert not temp.exists()
    assert set(cache.entries()) == {other}


def test_clear_key_already_gone_still_tidies_its_idle_lock_file(
    cache: DecisionCache, capsys: pytest.CaptureFixture[str]
) -> None:
    """A key deleted by another process meanwhile: its idle lock file goes all the same."""
    key = f"{JOB_B}.333333cccccc"
    lock = cache.path.parent / "locks" / f"{key}.lock"
    lock.parent.mkdir()
    lock.touch()
    assert cache.remove([key]) == {key}
    lock.touch()  # a sweeper killed since, while holding it
    assert cache.remove([key]) == frozenset()
    assert not lock.exists()


def _newer_only(path: Path, *keys: str) -> None:
    """A cache at ``path`` holding only a newer chunktune's entries this one cannot read."""
    from _newer import unreadable_table

    tables = {key: unreadable_table(key) for key in keys}
    path.write_text(json.dumps({"schema": 1, "checksums": "sha256", "entries": tables}))


def test_clear_counts_the_newer_ones_entries_as_they_stand_when_it_deletes(
    isolated: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Asked of a newer one's one entry, another written meanwhile: 'the 1' asked, both counted."""
    from chunktune._cli import _cache_cmd

    path = isolated / "cache.json"
    _newer_only(path, "n1.abc")
    asked = []

    def answer_after_another_store(question: str) -> str:
        asked.append(question)
        _newer_only(path, "n1.abc", "n2.abc")  # a newer chunktune's put, meanwhile
        return "y\n"

    monkeypatch.setattr(sys, "stdin", _Terminal(""))  # a terminal: it asks
    monkeypatch.setattr(_cache_cmd, "_ask", answer_after_another_store)
    assert main(["cache", "clear"]) == 0
    assert asked == [
        f"Delete the 1 entry from {path} "
        "(among them 1 a newer chunktune wrote, which this one cannot read)? [y/N] "
    ]
    assert capsys.readouterr().out == (
        f"deleted 2 entries from {path} "
        "(among them 2 a newer chunktune wrote, which this one cannot read)\n"
    )
    assert json.loads(path.read_text()).get("entries", {}) == {}


def test_clear_of_entries_this_one_reads_says_nothing_of_newer_ones(
    cache: DecisionCache, capsys: pytest.CaptureFixture[str]
) -> None:
    """No newer one's entry in the cache: `clear --yes` says how many it deleted, and no more."""
    assert main(["cache", "clear", "--yes"]) == 0
    assert capsys.readouterr().out == f"deleted 3 entries from {cache.path}\n"
    assert cache.entries() == {}


@pytest.mark.parametrize(
    "argv",
    [
        pytest.param(["clear", "newer0001.abcdef", "--yes"], id="clear-whole-key"),
        pytest.param(["clear", "newer000", "--yes"], id="clear-start"),
        pytest.param(["show", "newer"], id="show"),
    ],
)
def test_a_name_of_a_newer_ones_entry_says_so_and_deletes_nothing(
    isolated: Path, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    """clear KEY or show KEY naming a newer chunktune's entry: exit 2 saying so, not 'no entry'."""
    # the warning just named the key, then the error said no entry's key starts with it
    path = isolated / "cache.json"
    _newer_only(path, "newer0001.abcdef")
    before = path.read_bytes()
    assert main(["cache", *argv]) == 2
    line = one_error(capsys.readouterr().err)
    assert "names an entry a newer chunktune wrote, which this one cannot read" in line
    assert "`chunktune cache clear` deletes every entry" in line
    assert path.read_bytes() == before
