"""Holder notes: a stale note is written over whole, and what is no regular file is replaced."""

from __future__ import annotations

import errno
import json
import os
import stat
from pathlib import Path

import pytest

import chunktune
from chunktune import _lock_note
from chunktune._lock_note import note_path, read_note, write_note
from chunktune._locks import Lock, key_lock
from chunktune.sim import Noise, SimulatedWorkload


def test_a_shorter_note_written_over_a_longer_one_is_read_whole(tmp_path: Path) -> None:
    """A killed holder's longer note is written over: the new holder's note reads back."""
    path = tmp_path / "k.lock.holder"
    path.write_text(json.dumps({"pid": 1, "since": 0.0, "host": "a-long-host-name-" * 20}))
    write_note(path)
    holder = read_note(path)
    assert holder is not None and holder.pid == os.getpid()


def test_a_named_pipe_that_someone_reads_is_replaced_by_the_note(tmp_path: Path) -> None:
    """A named pipe at the note that a reader holds open: replaced by a regular file naming us."""
    path = tmp_path / "k.lock.holder"
    os.mkfifo(path)
    reader = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # so opening it to write succeeds
    try:
        write_note(path)
    finally:
        os.close(reader)
    assert stat.S_ISREG(path.stat().st_mode)
    holder = read_note(path)
    assert holder is not None and holder.pid == os.getpid()


def test_a_note_gets_what_open_would_give_it_under_the_umask(tmp_path: Path) -> None:
    """A note is made as ``open()`` makes a file: 0o666 less the umask (group-readable)."""
    path = tmp_path / "k.lock.holder"
    old = os.umask(0o002)
    try:
        write_note(path)
    finally:
        os.umask(old)
    assert stat.S_IMODE(path.stat().st_mode) == 0o664


@pytest.mark.parametrize(
    "note",
    [
        pytest.param({"pid": None, "since": 0.0}, id="pid-null"),
        pytest.param({"pid": [4242], "since": 0.0}, id="pid-list"),
        pytest.param({"pid": 4242, "since": {}}, id="since-table"),
    ],
)
def test_a_note_whose_fields_are_of_the_wrong_type_names_no_holder(
    tmp_path: Path, note: dict[str, object]
) -> None:
    """A note whose pid or since is no number (a TypeError to convert) reads as no holder."""
    path = tmp_path / "k.lock.holder"
    path.write_text(json.dumps(note))
    assert read_note(path) is None


def test_a_note_longer_than_a_note_can_be_names_no_holder(tmp_path: Path) -> None:
    """A note past 4096 bytes, valid JSON though it is, is no note: read_note gives None."""
    path = tmp_path / "k.lock.holder"
    path.write_text(json.dumps({"pid": 4242, "since": 0.0, "host": "h" * 5000}))
    assert read_note(path) is None


def test_a_named_pipe_at_the_note_is_read_as_no_note_whatever_it_holds(tmp_path: Path) -> None:
    """A named pipe where the note goes names no holder, even one fed a valid note."""
    path = tmp_path / "k.lock.holder"
    os.mkfifo(path)
    feeder = os.open(path, os.O_RDWR | os.O_NONBLOCK)  # a writer, so a read finds bytes
    try:
        os.write(feeder, json.dumps({"pid": 4242, "since": 0.0, "host": "h"}).encode())
        assert read_note(path) is None
    finally:
        os.close(feeder)


def test_a_lock_whose_note_is_a_folder_is_held_and_let_go_unnamed(tmp_path: Path) -> None:
    """A folder where the note goes: the lock is still taken, names no holder, and let go."""
    lock = key_lock(tmp_path / "k.lock")
    lock.holder_path.mkdir()
    assert lock.try_acquire()
    try:
        assert lock.holder() is None
        assert not key_lock(tmp_path / "k.lock").try_acquire()
    finally:
        lock.release()
    again = key_lock(tmp_path / "k.lock")
    assert again.try_acquire()
    again.release()


def test_a_note_this_process_may_not_write_over_is_replaced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A note that refuses this process's write (another user's) is removed and written anew."""
    path = tmp_path / "k.lock.holder"
    path.write_text(json.dumps({"pid": 1, "since": 0.0}))
    real = _lock_note._write
    refused: list[Path] = []

    def refusing(at: Path, text: str) -> None:
        if not refused:
            refused.append(at)
            raise PermissionError(errno.EACCES, "Permission denied", str(at))
        real(at, text)

    monkeypatch.setattr(_lock_note, "_write", refusing)
    write_note(path)
    holder = read_note(path)
    assert refused and holder is not None and holder.pid == os.getpid()


@pytest.mark.parametrize("how", ["folder", "refused"])
def test_a_sweep_whose_notes_cannot_be_written_still_answers_and_stores(
    isolated: Path, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    """With no lock note writable a miss is still measured and stored, its locks let go."""
    sweep = isolated / "sweep.lock"
    if how == "folder":
        note_path(sweep).mkdir()
    else:

        def refused(at: Path, text: str) -> None:
            raise PermissionError(errno.EACCES, "Permission denied", str(at))

        monkeypatch.setattr(_lock_note, "_write", refused)
    costs = SimulatedWorkload.from_layout("blocked", num_envs=256, nthread=4).costs
    workload = SimulatedWorkload(costs, nthread=4, noise=Noise(sigma=0.01))
    first = chunktune.resolve_sync(workload)
    assert first.source == "benchmark"
    assert chunktune.resolve_sync(workload).source == "cache"
    after = Lock(sweep, what="the sweep lock", degrade="none")
    assert after.try_acquire()
    after.release()
