"""Holder notes: a stale note is written over whole, and what is no regular file is replaced."""

from __future__ import annotations

import errno
import json
import os
import socket
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import attrs
import pytest

import chunktune
from chunktune import (
    _lock_note,
    _lock_wait,
)
from chunktune._lock_note import Holder, note_path, noted_as, read_note, this_program, write_note
from chunktune._locks import Lock, key_lock
from chunktune.sim import Noise, SimulatedWorkload


def test_a_shorter_note_written_over_a_longer_one_is_read_whole(tmp_path: Path) -> None:
    """A killed holder's longer note is written over: the new holder's note reads back."""
    path = tmp_path / "k.lock.holder"
    path.write_text(json.dumps({"pid": 1, "since": 0.0, "host": "a-long-host-name-" * 20}))
    write_note(path)
    holder = read_note(path)
    assert holder is not None and holder.pid == os.getpid()


def test_a_note_is_written_where_python_gives_no_native_thread_id(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where threading has no get_native_id (not every system), the note names no thread."""
    # an AttributeError there raised out of every write lock's and key lock's taking
    monkeypatch.delattr(threading, "get_native_id")
    write_note(tmp_path / "k.lock.holder")
    holder = read_note(tmp_path / "k.lock.holder")
    assert holder is not None and (holder.pid, holder.thread) == (os.getpid(), 0)


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


def test_a_note_names_the_program_that_noted_as_gives(tmp_path: Path) -> None:
    """A note written inside ``noted_as`` names that program; read back, so does its holder."""
    path = tmp_path / "k.lock.holder"
    with noted_as("chunktune check"):
        write_note(path)
    holder = read_note(path)
    assert holder is not None and holder.program == "chunktune check"
    assert json.loads(path.read_text())["program"] == "chunktune check"


def test_noted_as_gives_the_earlier_name_back_after_its_block(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Nested ``noted_as`` blocks name the innermost; each block's end restores the one before."""
    monkeypatch.setattr(sys, "argv", ["/srv/train.py"])
    with noted_as("outer"):
        with noted_as("inner"):
            assert this_program() == "inner"
        assert this_program() == "outer"
    assert this_program() == "train.py"


def test_noted_as_blocks_of_two_threads_may_end_in_either_order(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Blocks of two threads ended out of order: the open one names it, then neither does."""
    monkeypatch.setattr(sys, "argv", ["/srv/train.py"])
    first, second = noted_as("chunktune tune"), noted_as("chunktune check")
    first.__enter__()  # one thread's block
    second.__enter__()  # another's, begun while the first runs
    first.__exit__(None, None, None)  # the first thread ends first
    assert this_program() == "chunktune check"
    second.__exit__(None, None, None)
    assert this_program() == "train.py"


@pytest.mark.parametrize(
    ("argv", "program"),
    [
        pytest.param(["/srv/jobs/train.py", "--lr", "3e-4"], "train.py", id="script"),
        pytest.param(["/srv/trainer/__main__.py"], "trainer", id="dash-m"),
        pytest.param(["-c"], "", id="dash-c"),
        pytest.param([""], "", id="interactive"),
        pytest.param([], "", id="no-argv"),
    ],
)
def test_a_note_names_the_script_python_runs_where_nothing_named_it(
    monkeypatch: pytest.MonkeyPatch, argv: list[str], program: str
) -> None:
    """Outside ``noted_as`` the program is the script's name (a ``-m`` package's), or none."""
    monkeypatch.setattr(sys, "argv", argv)
    assert this_program() == program


def test_a_holder_of_another_process_is_described_with_its_program() -> None:
    """Another process's holder reads "program, pid N, since"; on another host, "pid N on host"."""
    here = socket.gethostname()
    assert (
        Holder(4242, 0.0, here, program="train.py")
        .describe()
        .startswith("train.py, pid 4242, since ")
    )
    assert (
        Holder(4242, 0.0, "node17", program="chunktune check")
        .describe()
        .startswith("chunktune check, pid 4242 on node17, since ")
    )
    assert Holder(4242, 0.0, here).describe().startswith("pid 4242, since ")


def test_a_noted_host_is_described_printable() -> None:
    """A note's host holding a newline and an ANSI escape is described on one printable line."""
    said = Holder(4242, 0.0, "node\n\x1b[2J17", program="train.py").describe()
    assert said.startswith("train.py, pid 4242 on node??[2J17, since "), said


def test_this_process_as_holder_is_described_without_its_program() -> None:
    """This process's own holder reads "this process, pid N": its program would say nothing new."""
    mine = Holder(os.getpid(), 0.0, program="train.py").describe()
    assert mine.startswith(f"this process, pid {os.getpid()}, since ") and "train" not in mine


@pytest.mark.parametrize(
    ("written", "shown"),
    [
        pytest.param("chunk\x1b[2Jtune\nx", "chunk?[2Jtune?x", id="control-characters"),
        pytest.param("p" * 60, "p" * 39 + "…", id="long"),
        pytest.param(17, "17", id="number"),
        pytest.param(None, "", id="null"),
    ],
)
def test_a_noted_program_is_shown_printable_and_short(
    tmp_path: Path, written: object, shown: str
) -> None:
    """Any process writes notes: its program is read as printable text of 40 characters at most."""
    path = tmp_path / "k.lock.holder"
    path.write_text(json.dumps({"pid": 4242, "since": 0.0, "program": written}))
    holder = read_note(path)
    assert holder is not None and holder.program == shown


def test_a_note_written_before_programs_were_names_none(tmp_path: Path) -> None:
    """A note with no program (an older chunktune's) still names its holder, without one."""
    path = tmp_path / "k.lock.holder"
    path.write_text(json.dumps({"pid": 4242, "since": 0.0, "host": socket.gethostname()}))
    holder = read_note(path)
    assert holder is not None and holder.program == ""
    assert holder.describe().startswith("pid 4242, since ")


def test_a_resolve_waiting_for_a_chunktune_command_is_told_which_it_is(
    isolated: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A trainer waiting for a real ``chunktune record`` is told "chunktune record, pid N"."""
    # the CLI names itself in its notes, so that an operator can tell a check or a
    # recording (stop it) from another trainer's first resolve (wait for it)
    monkeypatch.setattr(_lock_wait, "REPORT_AFTER_S", 0.0)
    model = str(chunktune.demo_model_path())
    out = isolated / "t.json"
    command = [sys.executable, "-m", "chunktune", "record", model, "--num-envs", "64"]
    with subprocess.Popen(
        [*command, "--nthread", "2", "--nstep", "20", "--rounds", "100000", "-q", "-o", str(out)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    ) as recorder:
        try:
            note = note_path(isolated / "sweep.lock")
            for _ in range(600):  # a loaded machine starts Python and MuJoCo slowly
                if (holder := read_note(note)) is not None:
                    break
                time.sleep(0.1)
            else:
                pytest.fail("the recording never took the sweep lock")
            assert (holder.pid, holder.program) == (recorder.pid, "chunktune record")
            pol = attrs.evolve(
                chunktune.load_settings().get_policy("balanced"),
                time_budget_s=0.05,
                hard_limit_s=1.0,
            )
            events: list[chunktune.ProgressEvent] = []
            w = SimulatedWorkload.from_layout("uniform", num_envs=64, nthread=2)
            d = chunktune.resolve_sync(w, policy=pol, on_progress=events.append)
        finally:
            recorder.kill()
    said = f"chunktune record, pid {recorder.pid}, since "
    assert [e.kind for e in events] == ["waiting"] and said in events[0].message
    assert d.source == "fallback" and said in d.reason
    assert not out.exists()


def test_a_program_name_of_exactly_the_limit_is_shown_whole() -> None:
    """A 40-character program is shown as it is; one of 41 is cut to 39 and an ellipsis."""
    assert Holder(1, 0.0, program="p" * 40).program == "p" * 40
    assert Holder(1, 0.0, program="p" * 41).program == "p" * 39 + "…"


def test_a_holder_on_another_host_with_this_pid_is_not_this_process() -> None:
    """Another node's process that has this pid is described by its host, not as this one."""
    text = Holder(os.getpid(), 0.0, "node17.elsewhere", program="train.py").describe()
    assert text.startswith(f"train.py, pid {os.getpid()} on node17.elsewhere, since ")


def test_a_script_read_from_stdin_names_no_program(monkeypatch: pytest.MonkeyPatch) -> None:
    """``python - < train.py`` (argv[0] "-") names no program, as ``-c`` does."""
    monkeypatch.setattr(sys, "argv", ["-"])
    assert this_program() == ""


def test_overlapping_blocks_of_one_name_give_back_the_one_still_open(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Blocks "a", "b", "a" (threads): the last "a" ending leaves "b" named, not the first "a"."""
    monkeypatch.setattr(sys, "argv", ["train.py"])
    first, middle, last = noted_as("a"), noted_as("b"), noted_as("a")
    first.__enter__()
    middle.__enter__()
    last.__enter__()
    last.__exit__(None, None, None)
    assert this_program() == "b"
    middle.__exit__(None, None, None)
    first.__exit__(None, None, None)
    assert this_program() == "train.py"


def test_a_block_ended_by_an_exception_gives_its_name_back(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A command that raises inside ``noted_as`` leaves notes naming the script again."""
    monkeypatch.setattr(sys, "argv", ["train.py"])
    with pytest.raises(RuntimeError), noted_as("chunktune tune"):
        raise RuntimeError("the command failed")
    assert this_program() == "train.py"


def test_a_named_pipe_nobody_reads_is_replaced_by_the_note(tmp_path: Path) -> None:
    """A named pipe at the note with no reader (ENXIO at once): replaced by a file naming us."""
    path = tmp_path / "k.lock.holder"
    os.mkfifo(path)
    write_note(path)
    assert stat.S_ISREG(path.stat().st_mode)
    holder = read_note(path)
    assert holder is not None and holder.pid == os.getpid()
