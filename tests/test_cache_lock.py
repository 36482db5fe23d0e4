"""The cache's write lock: a wait given up names what it saw, a lock file removed or held."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import filelock
import pytest
from _holders import (
    FLOCK_REFUSAL_RAISES,
    busy_thread,
    changed_at_each_look,
    held_by,
    refuse_flock_once,
    working_at_each_look,
)

from chunktune import _cache_lock
from chunktune._cache_file import CacheFile
from chunktune._cache_lock import lock_path, write_lock
from chunktune._lock_files import holds_file_at, take
from chunktune._lock_note import note_path, pid_space, read_note


def _cache_file(tmp_path: Path) -> CacheFile:
    """A cache file that is there (its content does not matter to its lock)."""
    path = tmp_path / "cache.json"
    path.write_text("{}")
    return CacheFile(path, "json")


def _removed_at_tries(
    monkeypatch: pytest.MonkeyPatch,
    path: Path,
    *,
    times: int | None = None,
    then: Callable[[], None] = lambda: None,
) -> list[int]:
    """The first ``times`` tries (None: every try) that take ``path``'s lock find its file
    removed under them (a `cache clear` in a loop), after which ``then()`` runs; returns
    the list of such tries."""
    removed: list[int] = []

    class Flapping(filelock.FileLock):
        def acquire(self, *args: Any, **kwargs: Any) -> Any:
            got = super().acquire(*args, **kwargs)
            if Path(self.lock_file) == path and self.is_locked and len(removed) != times:
                path.unlink()  # removed after this writer opened it
                removed.append(1)
                then()
            return got

    monkeypatch.setattr("chunktune._cache_lock.filelock.FileLock", Flapping)
    return removed


def test_a_write_lock_removed_at_every_try_says_so_as_it_gives_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A lock file removed under the writer at each try: the stall says it was removed."""
    monkeypatch.setattr(_cache_lock, "WRITE_STALL_S", 0.2)
    file = _cache_file(tmp_path)
    removed = _removed_at_tries(monkeypatch, lock_path(file.path))
    with (
        pytest.raises(TimeoutError, match="was removed under this writer at each try"),
        write_lock(file),
    ):
        pass
    assert removed  # the file was taken, and removed under it, at least once


def test_a_write_lock_held_after_a_removed_try_says_it_was_held(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A lock file removed once, then held by another writer that stalls: the stall says held."""
    monkeypatch.setattr(_cache_lock, "WRITE_STALL_S", 0.2)
    file = _cache_file(tmp_path)
    path = lock_path(file.path)
    fds: list[int] = []

    def taken_by_another() -> None:
        if not fds:  # the next file there is another writer's, which it holds and stalls
            fds.append(os.open(path, os.O_RDWR | os.O_CREAT))
            fcntl.flock(fds[0], fcntl.LOCK_EX | fcntl.LOCK_NB)

    removed = _removed_at_tries(monkeypatch, path, times=1, then=taken_by_another)
    try:
        with (
            pytest.raises(TimeoutError, match="was held by another process that changed"),
            write_lock(file),
        ):
            pass
    finally:
        for fd in fds:
            os.close(fd)
    assert removed == [1]


def test_a_write_lock_removed_once_is_taken_anew_and_held(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A lock file removed under the writer once: it takes the new one, excluding others."""
    monkeypatch.setattr(_cache_lock, "WRITE_STALL_S", 60.0)  # a hang guard, not a timing
    file = _cache_file(tmp_path)
    path = lock_path(file.path)
    removed = _removed_at_tries(monkeypatch, path, times=1)
    with write_lock(file):
        fd = os.open(path, os.O_RDWR)
        try:  # another writer cannot take the file at the path: this one holds it
            with pytest.raises(BlockingIOError):
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        finally:
            os.close(fd)
    assert removed == [1]


@pytest.mark.parametrize("failing", [1, 2], ids=["once-taken", "on-the-way-out"])
def test_a_write_lock_whose_file_check_raises_lets_go(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, failing: int
) -> None:
    """A MemoryError checking the write lock's file, just taken or on the way out, frees it."""
    file = _cache_file(tmp_path)
    checks: list[Path] = []

    def no_memory(lock: filelock.BaseFileLock, path: Path) -> bool:
        checks.append(path)
        if len(checks) == failing:  # 1: the check as it takes the lock; 2: as it lets go
            raise MemoryError
        return holds_file_at(lock, path)

    monkeypatch.setattr(_cache_lock, "holds_file_at", no_memory)
    with pytest.raises(MemoryError) as raised, write_lock(file):
        pass
    assert raised.traceback  # the failed writer's frames, its lock among them, still live
    other = filelock.FileLock(lock_path(file.path))
    other.acquire(timeout=0)
    other.release()


@pytest.mark.skipif(
    not FLOCK_REFUSAL_RAISES, reason="filelock before 3.21 retries a refused flock as a held one"
)
def test_a_refused_lock_leaves_a_holders_file_where_it_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A write lock flock refuses (EIO) tidies only an idle file: another holder's stays held."""
    file = _cache_file(tmp_path)
    path = lock_path(file.path)
    holder = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    fcntl.flock(holder, fcntl.LOCK_EX | fcntl.LOCK_NB)
    real_flock = fcntl.flock
    refused: list[int] = []

    def flock(fd: int, operation: int) -> None:
        if fd != holder and operation & fcntl.LOCK_EX and not refused:
            refused.append(fd)
            raise OSError(errno.EIO, os.strerror(errno.EIO))
        real_flock(fd, operation)

    monkeypatch.setattr(fcntl, "flock", flock)
    try:
        with pytest.raises(OSError, match="Input/output error"), write_lock(file):
            pass
        assert refused and os.path.samestat(os.fstat(holder), os.stat(path))
    finally:
        os.close(holder)


# holds the write lock of the cache file argv[1] as chunktune does (noting its thread), for
# argv[3] seconds, computing ("busy") or sleeping ("idle"), changing nothing; then it
# makes argv[1] + ".done" and lets go
_HOLDER = (
    "import sys, time\n"
    "from pathlib import Path\n"
    "from chunktune._cache_file import CacheFile\n"
    "from chunktune._cache_lock import write_lock\n"
    "with write_lock(CacheFile(Path(sys.argv[1]), 'json')):\n"
    "    print('held', flush=True)\n"
    "    end = time.monotonic() + float(sys.argv[3])\n"
    "    while time.monotonic() < end:\n"
    "        if sys.argv[2] == 'idle':\n"
    "            time.sleep(0.01)\n"
    "    Path(sys.argv[1] + '.done').touch()\n"
)


@contextlib.contextmanager
def _held_by(file: CacheFile, how: str, seconds: float) -> Iterator[subprocess.Popen[str]]:
    """Another process holding ``file``'s write lock, ``how`` (busy or idle), ``seconds``."""
    with held_by(_HOLDER, str(file.path), how, str(seconds)) as holder:
        yield holder


def _taken_past_a_busy_holder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> CacheFile:
    """Take a cache file's write lock that another process holds 3 s computing, past a 1 s
    stall limit; the file. Checks the lock was taken once the holder let go, not given up."""
    monkeypatch.setattr(_cache_lock, "WRITE_STALL_S", 1.0)
    monkeypatch.setattr(_cache_lock, "WRITE_BUSY_TIMES", 200.0)  # a hang guard, not a timing
    # its thread read from /proc, and charged CPU time at each look: a loaded machine gave
    # it no clock tick for a whole stall limit at times, and the wait rightly gave up
    working_at_each_look(monkeypatch)
    file = _cache_file(tmp_path)
    with _held_by(file, "busy", 3.0), write_lock(file):
        assert Path(f"{file.path}.done").exists()  # taken once the holder let go, not given up
    return file


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="reads /proc")
def test_a_write_waits_for_a_holder_that_keeps_working_past_the_stall_limit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A holder computing (a slow put on a busy machine) past the stall limit is waited for."""
    file = _taken_past_a_busy_holder(tmp_path, monkeypatch)
    assert not note_path(lock_path(file.path)).exists()  # each holder removes its note


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="reads /proc")
def test_a_waiter_descheduled_before_its_first_look_still_waits_for_a_working_holder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past the stall limit at its first look, a waiter counts the holder's work since it began."""
    # CI under load: the waiter got no CPU for the whole 1 s limit before it first looked,
    # and gave up on a holder that had computed all along
    late: list[int] = []

    def descheduled(lock: filelock.BaseFileLock, *, timeout: float) -> None:
        if not late:
            late.append(1)
            time.sleep(1.5)  # this waiter has no CPU past the stall limit; the holder computes
            raise filelock.Timeout(str(lock.lock_file))
        take(lock, timeout=timeout)

    monkeypatch.setattr(_cache_lock, "take", descheduled)
    _taken_past_a_busy_holder(tmp_path, monkeypatch)
    assert late


def test_a_write_gives_up_on_a_holder_that_sleeps_with_the_lock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A holder that uses no CPU time (stopped, blocked) is given up on at the stall limit."""
    monkeypatch.setattr(_cache_lock, "WRITE_STALL_S", 0.3)
    monkeypatch.setattr(_cache_lock, "WRITE_BUSY_TIMES", 200.0)
    file = _cache_file(tmp_path)
    with (
        _held_by(file, "idle", 60.0),
        pytest.raises(TimeoutError, match="was held by another process that changed nothing"),
        write_lock(file),
    ):
        pass


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="reads /proc")
def test_a_write_gives_up_on_a_working_holder_that_never_changes_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A holder computing without end is waited for a bounded number of stall limits, no more."""
    monkeypatch.setattr(_cache_lock, "WRITE_STALL_S", 0.2)
    monkeypatch.setattr(_cache_lock, "WRITE_BUSY_TIMES", 3.0)
    # charged CPU time at each look: under load a busy holder went a stall limit without a
    # clock tick at times (about once in 100 at 0.2 s), and was given up on as stuck
    working_at_each_look(monkeypatch)
    file = _cache_file(tmp_path)
    with (
        _held_by(file, "busy", 60.0),
        pytest.raises(TimeoutError, match=r"kept working but changed nothing for 0\.6 s"),
        write_lock(file),
    ):
        pass


def test_the_write_locks_holder_notes_its_thread_while_it_holds(tmp_path: Path) -> None:
    """The write lock's holder notes its pid and thread beside the lock, and removes the note."""
    file = _cache_file(tmp_path)
    note = note_path(lock_path(file.path))
    with write_lock(file):
        holder = read_note(note)
        assert holder is not None
        assert (holder.pid, holder.thread) == (os.getpid(), threading.get_native_id())
    assert not note.exists()


@pytest.mark.skipif(
    not FLOCK_REFUSAL_RAISES, reason="filelock before 3.21 retries a refused flock as a held one"
)
def test_a_refused_lock_no_one_holds_leaves_no_lock_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A write lock flock refuses (EIO) with no holder raises, its lock file removed, not left."""
    file = _cache_file(tmp_path)
    path = lock_path(file.path)
    refused = refuse_flock_once(monkeypatch, path)
    with pytest.raises(OSError, match="Input/output error"), write_lock(file):
        pass
    assert refused and not path.exists()


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="reads /proc")
def test_a_lock_removed_at_every_try_is_not_waited_for_as_a_working_holder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A note naming a busy thread beside a lock file removed at each try: no working holder."""
    # this writer took the lock at each try: whatever the note says, no one holds it
    monkeypatch.setattr(_cache_lock, "WRITE_STALL_S", 0.2)
    monkeypatch.setattr(_cache_lock, "WRITE_BUSY_TIMES", 5.0)
    file = _cache_file(tmp_path)
    path = lock_path(file.path)
    removed = _removed_at_tries(monkeypatch, path)
    with busy_thread() as busy:
        note = {"pid": os.getpid(), "since": time.time(), "host": socket.gethostname()}
        note_path(path).write_text(json.dumps({**note, "thread": busy, "pid_space": pid_space()}))
        with (
            pytest.raises(TimeoutError, match="was removed under this writer at each try"),
            write_lock(file),
        ):
            pass
    assert removed


def test_a_holder_that_keeps_changing_the_file_is_waited_for_past_the_busy_bound(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The bound on a working holder counts from the file's last change, not the wait's start."""
    monkeypatch.setattr(_cache_lock, "WRITE_STALL_S", 1.0)
    monkeypatch.setattr(_cache_lock, "WRITE_BUSY_TIMES", 1.0)
    file = _cache_file(tmp_path)
    path = lock_path(file.path)
    held = [os.open(path, os.O_RDWR | os.O_CREAT, 0o644)]  # another writer's, in this process
    fcntl.flock(held[0], fcntl.LOCK_EX | fcntl.LOCK_NB)
    try:
        # a queue of writers ahead: the file changes at each look, for 2.5 times the bound
        # (a thread changing it on its own clock could miss a whole bound under load)
        changed_at_each_look(monkeypatch, file, for_s=2.5, then=lambda: os.close(held.pop()))
        with write_lock(file):
            pass  # taken once the holder let go, not given up at the bound
    finally:
        for fd in held:  # still open where the wait ended before the holder let go
            os.close(fd)
