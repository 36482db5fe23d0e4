"""Whether a lock's holder is working: its noted thread's CPU time, where that thread is known."""

from __future__ import annotations

import ctypes
import json
import os
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import attrs
import pytest
from _holders import busy_thread

from chunktune._holder_cpu import HolderWatch, _cpu_ticks
from chunktune._lock_note import Holder, note_path, pid_space, read_note

pytestmark = pytest.mark.skipif(not pid_space(), reason="reads /proc")


@pytest.fixture(name="busy_thread")
def _busy_thread() -> Iterator[int]:
    """A thread of this process that computes until the test ends; its native id."""
    with busy_thread() as thread:
        yield thread


def _noted(
    lock: Path, thread: int, space: str, *, host: str = "", since: float = 0.0
) -> HolderWatch:
    """A watch on ``lock``, whose note names ``thread`` of this process in ``space`` (on
    ``host``, from ``since``: this host, now, where not given)."""
    host, since = host or socket.gethostname(), since or time.time()
    note = {"pid": os.getpid(), "since": since, "host": host}
    note_path(lock).write_text(json.dumps({**note, "thread": thread, "pid_space": space}))
    return HolderWatch(lock)


def test_a_holder_noted_in_another_pid_namespace_is_not_taken_as_working(
    tmp_path: Path, busy_thread: int
) -> None:
    """A note from another PID namespace names no thread here, though one here is busy."""
    # a container of the same host name counts its own pids: its holder's pid and thread
    # named whatever busy process of this namespace had them, and a stuck holder was waited
    # for WRITE_BUSY_TIMES stall limits
    here = _noted(tmp_path / "here.lock", busy_thread, pid_space())
    there = _noted(tmp_path / "there.lock", busy_thread, "pid:[1]")
    said_there = False
    deadline = time.monotonic() + 60.0  # a hang guard: the busy thread shows CPU time far sooner
    while not here.working():
        said_there = said_there or there.working()
        assert time.monotonic() < deadline, "the busy thread never used CPU time"
        time.sleep(0.05)
    assert not said_there and not there.working()


def test_a_watch_counts_a_holders_cpu_time_from_its_start(tmp_path: Path, busy_thread: int) -> None:
    """The watch's first look is as it begins: time used before a waiter's first call counts."""
    # a waiter descheduled past the stall limit before it first asked gave up on a holder
    # that computed all along (CI under load: a 1 s limit passed before the first look)
    lock = tmp_path / "k.lock"
    watch = _noted(lock, busy_thread, pid_space())
    holder = read_note(note_path(lock))
    assert holder is not None
    _ticks_growing(holder)
    assert watch.working()


def test_a_holder_noted_without_a_thread_is_not_taken_as_working(tmp_path: Path) -> None:
    """An older chunktune's note (no thread, no namespace) tells nothing: wall time rules."""
    watch = _noted(tmp_path / "k.lock", 0, "")
    assert not watch.working() and not watch.working()


def _ticks_growing(holder: Holder) -> None:
    """Wait until ``holder``'s thread has used CPU time since this call began."""
    first = _cpu_ticks(holder)
    deadline = time.monotonic() + 60.0  # a hang guard: a busy thread shows CPU time far sooner
    while _cpu_ticks(holder) == first:
        assert time.monotonic() < deadline, "the busy thread never used CPU time"
        time.sleep(0.05)


def test_a_holder_noted_on_another_host_is_not_taken_as_working(
    tmp_path: Path, busy_thread: int
) -> None:
    """A note from another host names no thread here, though this pid's thread is busy."""
    lock = tmp_path / "k.lock"
    there = _noted(lock, busy_thread, pid_space(), host=f"not-{socket.gethostname()}")
    holder = read_note(note_path(lock))
    assert holder is not None and not there.working()
    _ticks_growing(attrs.evolve(holder, host=socket.gethostname()))
    assert not there.working()


def test_a_new_holder_is_not_taken_as_working_at_its_first_look(
    tmp_path: Path, busy_thread: int
) -> None:
    """CPU time counts only since a look at the same holder: not a new note, nor after none."""
    lock = tmp_path / "k.lock"
    watch = HolderWatch(lock)  # begun with no holder known
    _noted(lock, busy_thread, pid_space())
    holder = read_note(note_path(lock))
    assert holder is not None
    _ticks_growing(holder)
    assert not watch.working()  # the first look at this holder
    _noted(lock, busy_thread, pid_space(), since=holder.since - 1.0)  # another holder's note
    _ticks_growing(holder)
    assert not watch.working()  # the new holder's first look
    note_path(lock).unlink()
    assert not watch.working()  # no holder known
    _noted(lock, busy_thread, pid_space(), since=holder.since - 1.0)
    _ticks_growing(holder)
    assert not watch.working()  # the first look since none was known


def test_a_threads_cpu_time_counts_system_time_past_an_odd_name(tmp_path: Path) -> None:
    """Ticks are user plus system time, read past a thread name holding spaces and ")"."""
    # the name pushes six more words before the state if the stat line is cut at its first
    # ")"; reading /dev/zero spends the thread's time in the kernel, system time
    prctl = ctypes.CDLL(None, use_errno=True).prctl
    said: list[tuple[int | None, float]] = []

    def read_zeros() -> None:
        prctl(15, b") 1 2 3 4 5 6 7", 0, 0, 0)  # PR_SET_NAME: this thread's, 15 bytes at most
        me = Holder(os.getpid(), 0.0, thread=threading.get_native_id(), pid_space=pid_space())
        with open("/dev/zero", "rb", buffering=0) as zeros:
            while time.thread_time() < 0.3:
                zeros.read(1 << 20)
        said.append((_cpu_ticks(me), time.thread_time()))

    thread = threading.Thread(target=read_zeros)
    thread.start()
    thread.join()
    ticks, cpu_s = said[0]
    per_s = os.sysconf("SC_CLK_TCK")
    assert ticks is not None and abs(ticks - cpu_s * per_s) <= 3 + cpu_s * per_s / 10
