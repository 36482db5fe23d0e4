"""Holder notes: a stale note is written over whole, and what is no regular file is replaced."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from chunktune._lock_note import read_note, write_note


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
