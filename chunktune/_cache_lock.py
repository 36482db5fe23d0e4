"""The locks beside a cache file: its write lock, waited for while its holders make progress.

One writer at a time holds ``<cache>.lock`` for one read-modify-write of the file; a
waiter goes on waiting as long as the file keeps changing (writers queued ahead finish),
and gives up once a holder changed nothing for :data:`WRITE_STALL_S`. Key locks, one per
cache key under ``locks/`` beside the file, keep two processes from sweeping one key.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterable, Iterator
from pathlib import Path

import filelock

from ._cache_file import CacheFile
from ._holder_cpu import HolderWatch
from ._lock_files import file_lock, holds_file_at, make_folder, remove_idle, take
from ._lock_note import note_path, write_note
from ._shown import shown_file

__all__ = [
    "WRITE_BUSY_TIMES",
    "WRITE_BYTES_PER_S",
    "WRITE_LOOK_S",
    "WRITE_STALL_S",
    "key_lock",
    "key_lock_path",
    "lock_path",
    "remove_idle_key_locks",
    "write_lock",
]

WRITE_STALL_S = 5.0
"""How long a wait for the cache's write lock may see no writer make progress, plus a
second per :data:`WRITE_BYTES_PER_S` of the file. Writers hold the lock for one
read-modify-write of the file (0.6 s for 5000 entries, 4.7 MB, here), so while others
queue ahead the file keeps changing and the wait goes on; a holder that changes nothing
for this long is stopped or stuck, and waiting on would hang its waiter past
``hard_limit_s``, cancellation and Ctrl-C alike. Then the write (or the moving aside of
a broken file) is given up, as for an unwritable cache."""

WRITE_BUSY_TIMES = 4.0
"""How many times the stall limit a wait goes on, since the file last changed, while the
lock's holder keeps using CPU time (:mod:`chunktune._holder_cpu`): a live holder slowed by
a busy machine is waited for, a stopped or stuck one is not, and a holder that computes
without end still cannot hold its waiters for good."""

WRITE_BYTES_PER_S = 1e6
"""The slowest rate at which a healthy writer reads, updates and rewrites the cache
file (7.6 MB/s measured on a 2-core VM): a holder of a large file gets that much longer."""

WRITE_LOOK_S = 0.25
"""How long a read or write of a damaged file already served read-only (its write lock's
holder stalled once) waits for the lock's holder to change the file, plus a second per
:data:`WRITE_BYTES_PER_S`: a stuck holder never does, but a live one that took the lock
since (another process, or thread, writing) moves it aside first, and the wait then goes
on as for any writer."""

_WRITE_POLL_S = 0.05


def lock_path(cache: Path) -> Path:
    """The file lock that serializes writers of the cache file ``cache``."""
    return cache.with_name(cache.name + ".lock")


def key_lock_path(cache: Path, key: str) -> Path:
    """The lock file for sweeping ``key`` of the cache file ``cache``."""
    return cache.parent / "locks" / f"{key}.lock"


def key_lock(cache: Path, key: str) -> filelock.BaseFileLock:
    """A cross-process lock for sweeping one key (not thread-local: any thread may release)."""
    return file_lock(key_lock_path(cache, key))


def remove_idle_key_locks(cache: Path, keys: Iterable[str] | None = None) -> int:
    """Delete the key-lock files no process holds now (:func:`_lock_files.remove_idle`):
    every key's, or only those of ``keys``."""
    with contextlib.suppress(OSError):
        if keys is None:
            return remove_idle(sorted((cache.parent / "locks").glob("*.lock")))
        folder = cache.parent / "locks"
        files = [key_lock_path(cache, key) for key in sorted(set(keys)) if "\0" not in key]
        # a key read from a file may hold a "/": only a file of the locks folder is its lock
        return remove_idle(f for f in files if f.parent == folder and f.exists())
    return 0


@contextlib.contextmanager
def write_lock(file: CacheFile, *, brief: bool = False) -> Iterator[None]:
    """Hold ``file``'s write lock, waiting as long as its holders keep changing the file.

    ``brief`` (a file served read-only): the holder has :data:`WRITE_LOOK_S`, not
    :data:`WRITE_STALL_S`, to change the file before the wait is given up.

    Raises:
        TimeoutError: (an OSError) the file did not change for :data:`WRITE_STALL_S`
            (longer for a large file: :data:`WRITE_BYTES_PER_S`)
            while another process held the lock, or while its lock file was removed
            under this writer at each try.
        OSError: the cache path names something that is no regular file (then nothing is
            made), or its folder cannot be made.
    """
    path = lock_path(file.path)
    # first: no regular file there (or a folder that is a file: "Not a directory",
    # where mkdir would say "File exists"), and nothing is made
    seen, since = file.stat(), time.monotonic()
    changed = since  # when the file last changed: a busy holder is waited for only so long
    holder = HolderWatch(path)  # from now: the wait's first look at the holder
    make_folder(file.path.parent)
    lock = file_lock(path)
    removed = False  # the last file taken was removed under this writer (not held)
    while True:
        try:
            take(lock, timeout=_WRITE_POLL_S)
        except filelock.Timeout:
            removed = False
        except OSError:
            # the file was opened (made, where none was) but not locked: flock refused
            # (ENOLCK, EIO). No lock file outlives its writers, beside the cache or the one
            # file `merge -o` was asked for; only one no process holds goes, taken first
            # (:func:`remove_idle`), for a holder's would then let two writers in at once
            remove_idle([path])
            raise
        else:
            try:
                held = holds_file_at(lock, path)
            except BaseException:
                # a MemoryError, say: raised with the lock held, this process's next
                # store waited out the stall limit for it and was not written
                lock.release()
                raise
            if held:
                break
            # its holder removed it as it let go, after this process opened it: whoever
            # opens the path now gets another file, so holding this one excludes nobody.
            # The stall limit holds here too: a file removed at every try (a `cache clear`
            # or a writer in a loop that changes nothing) must not keep this one forever.
            lock.release()
            removed = True
        now, moment = file.stat(), time.monotonic()
        if now != seen:  # a writer ahead of this one finished: the queue moves
            seen, since, changed, brief = now, moment, moment, False
        elif not removed and holder.working():  # alive, slowed by a busy machine: no stall
            since = moment
        # a healthy holder of a large file takes longer to change it
        stall = WRITE_LOOK_S if brief else WRITE_STALL_S
        allowed = stall + (0 if seen is None else seen[1] / WRITE_BYTES_PER_S)
        if moment - since >= allowed:
            why = (
                "was removed under this writer at each try, while the file"
                if removed
                else "was held by another process that"
            )
            raise TimeoutError(
                f"its write lock {shown_file(path)} {why} changed nothing for {allowed:.3g} s"
            )
        if moment - changed >= allowed * WRITE_BUSY_TIMES:
            raise TimeoutError(
                f"its write lock {shown_file(path)} was held by another process that kept "
                f"working but changed nothing for {allowed * WRITE_BUSY_TIMES:.3g} s"
            )
    try:
        # whose thread's CPU time tells waiters this holder is working, not stuck
        write_note(note_path(path))
        yield
    finally:
        try:
            # removed while still held, as a key lock's file is: no lock file outlives its
            # writers beside the cache (or beside the one file `merge -o` was asked for),
            # nor its note (one at a path this writer no longer holds is another's)
            if holds_file_at(lock, path):
                with contextlib.suppress(OSError):
                    note_path(path).unlink()
                with contextlib.suppress(OSError):  # Windows: an open file stays
                    path.unlink()
        finally:
            # let go whatever that raised (a MemoryError, say): skipped, the lock was
            # held until the collector found it, and other writers waited for it
            lock.release()
