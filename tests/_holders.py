"""Another process holding a file lock and changing nothing: a stopped or stuck writer."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import itertools
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import anyio
import anyio.abc
import filelock
import pytest

from chunktune import _holder_cpu
from chunktune._cache_file import CacheFile
from chunktune._lock_note import Holder
from chunktune._settled import Stat

# filelock before 3.21 takes a refused flock (EIO, ENOLCK) for another holder's and retries
# it until its timeout: chunktune never learns of the refusal (CI's floors pass runs 3.12)
FLOCK_REFUSAL_RAISES = tuple(map(int, filelock.__version__.split(".")[:2])) >= (3, 21)

_HOLD = (
    "import fcntl, os, sys, time\n"
    "fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT)\n"
    "fcntl.flock(fd, fcntl.LOCK_EX)\n"
    "print('held', flush=True)\n"
    "time.sleep(120)\n"
)


@contextlib.contextmanager
def holding(lock: Path) -> Iterator[subprocess.Popen[str]]:
    """A process holds ``lock`` (flock) for the block, then is killed."""
    with held_by(_HOLD, str(lock)) as holder:
        yield holder


@contextlib.contextmanager
def held_by(script: str, *args: str) -> Iterator[subprocess.Popen[str]]:
    """A process running ``script`` with ``args``, from the line "held" it prints on (its
    lock taken) to the block's end, then killed."""
    with subprocess.Popen(
        [sys.executable, "-c", script, *args], stdout=subprocess.PIPE, text=True
    ) as holder:
        try:
            assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
            yield holder
        finally:
            holder.kill()


@contextlib.asynccontextmanager
async def holding_async(lock: Path) -> AsyncIterator[anyio.abc.Process]:
    """:func:`holding` for async tests: the loop is not blocked while the holder starts."""
    async with held_by_async(_HOLD, str(lock)) as holder:
        yield holder


@contextlib.asynccontextmanager
async def held_by_async(script: str, *args: str) -> AsyncIterator[anyio.abc.Process]:
    """:func:`held_by` for async tests. After the kill its output is read to the end: anyio
    before 4.4 ends the stream at once on close, and bytes still on their way to it then
    fail asyncio's reader ("feed_data after feed_eof", an error of the test's loop)."""
    async with await anyio.open_process([sys.executable, "-c", script, *args]) as holder:
        assert holder.stdout is not None
        try:
            assert (await holder.stdout.receive()).startswith(b"held")
            yield holder
        finally:
            holder.kill()
            with contextlib.suppress(anyio.EndOfStream, anyio.ClosedResourceError):
                while await holder.stdout.receive():
                    pass


def cached_eventually(cache_file: Path, key: str, *, within_s: float = 60.0) -> bool:
    """Whether ``key`` shows up in the JSON cache file within ``within_s`` (a write left
    to finish in the background); blocking, so async tests run it in a thread."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        if cache_file.exists() and key in json.loads(cache_file.read_text())["entries"]:
            return True
        time.sleep(0.05)
    return False


@contextlib.contextmanager
def busy_thread() -> Iterator[int]:
    """A thread of this process that computes until the block ends; its native id (a
    holder's thread whose CPU time grows)."""
    stop, ready = threading.Event(), threading.Event()
    started: list[int] = []

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


def refuse_flock_once(
    monkeypatch: pytest.MonkeyPatch, lock: str | os.PathLike[str], error: int = errno.EIO
) -> list[int]:
    """The first exclusive ``flock`` of the file at ``lock`` fails with ``error`` (the file
    system refuses it); later ones, a tidying's try among them, lock. The list the refused
    descriptor is added to."""
    real_flock = fcntl.flock
    refused: list[int] = []

    def flock(fd: int, operation: int) -> None:
        taking = operation & fcntl.LOCK_EX and not refused
        if taking and os.path.samestat(os.fstat(fd), os.stat(lock)):
            refused.append(fd)
            raise OSError(error, os.strerror(error))
        real_flock(fd, operation)

    monkeypatch.setattr(fcntl, "flock", flock)
    return refused


def changed_at_each_look(
    monkeypatch: pytest.MonkeyPatch, file: CacheFile, *, for_s: float, then: Callable[[], object]
) -> None:
    """A queue of writers ahead of a waiter for ``file``'s write lock: each look at the file
    finds it changed since the last (one byte longer: a size never repeats, where a stamp or
    an inode may); at the first look ``for_s`` seconds or more after the first, ``then()``
    lets the lock go. A holder changing the file on its own clock, in another process or
    thread, can get no CPU for a whole stall limit on a loaded machine (its waiter then
    rightly gives up); here each look sees progress, however the looks are scheduled."""
    real_stat = file.stat
    changes: list[float] = []
    done: list[object] = []  # what then() returned, once it ran

    def stat_after_a_change() -> Stat | None:
        if not done:
            with file.path.open("a") as f:
                f.write(" ")  # trailing whitespace: the same JSON for any reader
            changes.append(time.monotonic())
            if changes[-1] - changes[0] >= for_s:
                # the last writer lets go as it changes the file: a look long after the one
                # before (the waiter descheduled) sees progress, and tries the lock again
                done.append(then())
        return real_stat()

    monkeypatch.setattr(file, "stat", stat_after_a_change)


def working_at_each_look(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each look at a lock's holder whose thread's CPU time can be read (its note names a
    thread of this host and PID namespace) finds that the thread used CPU time since the
    last look. A busy holder on a loaded machine can get no clock tick within a stall limit
    (its waiter then rightly gave up); here it is working at every look."""
    real_ticks, looks = _holder_cpu._cpu_ticks, itertools.count()

    def ticks(holder: Holder) -> int | None:
        seen = real_ticks(holder)
        return None if seen is None else seen + next(looks)

    monkeypatch.setattr(_holder_cpu, "_cpu_ticks", ticks)
