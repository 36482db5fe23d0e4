"""File locks held from async code, and where the machine-wide sweep lock lives."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import anyio.to_thread
import filelock
import platformdirs

__all__ = ["SWEEP_LOCK_ENV", "hold", "sweep_lock", "sweep_lock_path"]

SWEEP_LOCK_ENV = "CHUNKTUNE_SWEEP_LOCK"
_POLL_S = 0.02


def sweep_lock_path() -> Path:
    """The machine-wide (per user) lock that keeps two sweeps from measuring at once.

    ``$CHUNKTUNE_SWEEP_LOCK``, else ``chunktune-sweep.lock`` in the user cache root.
    """
    env = os.environ.get(SWEEP_LOCK_ENV)
    if env:
        return Path(env)
    return platformdirs.user_cache_path(appauthor=False) / "chunktune-sweep.lock"


def sweep_lock() -> filelock.BaseFileLock:
    """The sweep lock, releasable from any thread."""
    return filelock.FileLock(sweep_lock_path(), thread_local=False)


@asynccontextmanager
async def hold(lock: filelock.BaseFileLock) -> AsyncIterator[None]:
    """Hold a file lock, waiting for it without blocking the event loop (cancellable)."""

    def attempt() -> bool:
        Path(lock.lock_file).parent.mkdir(parents=True, exist_ok=True)
        try:
            lock.acquire(timeout=0)
        except filelock.Timeout:
            return False
        return True

    # A blocking acquire in a worker thread could not be cancelled without leaking a
    # thread that may take the lock later; non-blocking attempts between sleeps can.
    while not await anyio.to_thread.run_sync(attempt):  # noqa: ASYNC110
        await anyio.sleep(_POLL_S)
    try:
        yield
    finally:
        lock.release()
