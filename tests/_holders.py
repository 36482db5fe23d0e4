"""Another process holding a file lock and changing nothing: a stopped or stuck writer."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import anyio
import anyio.abc
import filelock

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
    with subprocess.Popen(
        [sys.executable, "-c", _HOLD, str(lock)], stdout=subprocess.PIPE, text=True
    ) as holder:
        try:
            assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
            yield holder
        finally:
            holder.kill()


@contextlib.asynccontextmanager
async def holding_async(lock: Path) -> AsyncIterator[anyio.abc.Process]:
    """:func:`holding` for async tests: the loop is not blocked while the holder starts."""
    async with await anyio.open_process([sys.executable, "-c", _HOLD, str(lock)]) as holder:
        try:
            assert holder.stdout is not None
            assert (await holder.stdout.receive()).strip() == b"held"
            yield holder
        finally:
            holder.kill()


def cached_eventually(cache_file: Path, key: str, *, within_s: float = 60.0) -> bool:
    """Whether ``key`` shows up in the JSON cache file within ``within_s`` (a write left
    to finish in the background); blocking, so async tests run it in a thread."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        if cache_file.exists() and key in json.loads(cache_file.read_text())["entries"]:
            return True
        time.sleep(0.05)
    return False
