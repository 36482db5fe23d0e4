"""Whether a lock's holder is working: its noted thread's CPU time, where that thread is known."""

from __future__ import annotations

import json
import os
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from chunktune._holder_cpu import HolderWatch
from chunktune._lock_note import note_path, pid_space

pytestmark = pytest.mark.skipif(not pid_space(), reason="reads /proc")


@pytest.fixture
def busy_thread() -> Iterator[int]:
    """A thread of this process that computes until the test ends; its native id."""
    stop = threading.Event()
    started: list[int] = []
    ready = threading.Event()

    def spin() -> None:
        started.append(threading.get_native_id())
        ready.set()
        while not stop.is_set():
            sum(range(1000))

    thread = threading.Thread(target=spin, daemon=True)
    thread.start()
    ready.wait()
    try:
        yield started[0]
    finally:
        stop.set()
        thread.join()


def _noted(lock: Path, thread: int, space: str) -> HolderWatch:
    """A watch on ``lock``, whose note names ``thread`` of this process in ``space``."""
    note = {"pid": os.getpid(), "since": time.time(), "host": socket.gethostname()}
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


def test_a_holder_noted_without_a_thread_is_not_taken_as_working(tmp_path: Path) -> None:
    """An older chunktune's note (no thread, no namespace) tells nothing: wall time rules."""
    watch = _noted(tmp_path / "k.lock", 0, "")
    assert not watch.working() and not watch.working()
