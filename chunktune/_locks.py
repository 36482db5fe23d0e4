"""The cross-process locks a resolve takes: the machine's sweep lock and a cache key's lock.

Two sweeps at once on one machine ruin each other's timings, so a sweep holds the
sweep lock (where it lives: ``_lock_files``); a process that measures one cache key
holds that key's lock, so other processes wait for its answer instead of measuring
again (waiting for either: ``_lock_wait``).

A lock whose file cannot be created (a read-only or missing directory, a home that
is not a directory) degrades instead of failing the resolve, with one warning per
path (for key locks, per directory): the sweep lock to a lock of this process, a key
lock to none (this process's flight still makes its tasks share one sweep). Whoever
holds a lock notes who it is beside it (``_lock_note``).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from contextlib import suppress
from pathlib import Path
from typing import Literal

import filelock

from ._lock_files import (
    default_sweep_lock_path,
    file_lock,
    held_fd,
    holds_file_at,
    make_folder,
    named_sweep_lock,
    remove_idle,
    take,
)
from ._lock_note import Holder, note_path, read_note, write_note
from ._shown import shown_file

__all__ = ["Lock", "key_lock", "sweep_lock"]

logger = logging.getLogger("chunktune")

# tries in a row that find no lock file before the file is made here, to tell a `cache
# clear` racing the tries from a file that cannot be made
_VANISHED_TRIES = 4


_warned: set[tuple[Path, str]] = set()
_local: dict[Path, tuple[threading.Lock, list[Holder]]] = {}  # degraded sweep locks
_state_lock = threading.Lock()


def _reset_in_child() -> None:
    """In a forked child no parent's thread holds a degraded lock, or ever will release one."""
    global _state_lock
    _state_lock = threading.Lock()
    _local.clear()


os.register_at_fork(after_in_child=_reset_in_child)


def _warn_once(path: Path, what: str, instead: str, exc: OSError) -> None:
    with _state_lock:
        if (path, what) in _warned:
            return
        _warned.add((path, what))
    logger.warning(
        "chunktune: cannot use %s %s (%s); %s", what, shown_file(path), exc.strerror or exc, instead
    )


class Lock:
    """A cross-process file lock that degrades; attempts never block, any thread may release.

    ``degrade`` says what stands in when the file cannot be made: ``"local"`` a lock
    of this process (one per path), ``"none"`` no lock at all. ``what`` names the
    lock in the one warning given per ``warn_path`` (default: the lock's path).
    Every method but :meth:`release` does file I/O: call them in a worker thread.
    With ``remove_on_release``, the file is unlinked while still held, so files named
    by keys do not pile up: a waiter that opened it meanwhile finds it unlinked once it
    gets the lock, and tries again on a fresh file (:func:`holds_file_at`).
    """

    def __init__(
        self,
        path: Path,
        *,
        what: str,
        degrade: Literal["local", "none"],
        warn_path: Path | None = None,
        remove_on_release: bool = False,
    ) -> None:
        self.path = path
        self.what = what
        self.degrade = degrade
        self.remove_on_release = remove_on_release
        self.warn_path = path if warn_path is None else warn_path
        self.mode: Literal["file", "local", "none"] = "file"
        # set by a waiter: when the try in flight began (time.monotonic()), and whether a
        # try of its wait found the lock held. What the fallback's reason names at
        # hard_limit_s: a try long unanswered (a stalled file system?), one only slow to
        # answer, or another holder
        self.trying_since: float | None = None
        self.refused = False
        self._file = file_lock(path)

    @property
    def trying(self) -> bool:
        """Whether a waiter's try at the lock is in flight (see :attr:`trying_since`)."""
        return self.trying_since is not None

    def in_flight_s(self) -> float | None:
        """How long the try in flight has gone unanswered, in seconds; None if none is."""
        since = self.trying_since
        return None if since is None else max(0.0, time.monotonic() - since)

    @property
    def holder_path(self) -> Path:
        """Where the holder's pid, host and start time are written."""
        return note_path(self.path)

    def _fall_back(self, exc: OSError) -> None:
        self.mode = self.degrade
        instead = (
            "sweeps of this process still take turns, other processes are not excluded"
            if self.degrade == "local"
            else "this process's tasks still share one sweep per key, other processes may "
            "measure the same key"
        )
        _warn_once(self.warn_path, self.what, instead, exc)

    def try_acquire(self) -> bool:
        """Take the lock if it is free; False if another holds it (or `cache clear` kept
        removing its file at each try: the caller's wait tries again)."""
        if self.mode == "file":
            try:
                got = self._try_file()
            except OSError as exc:
                if self.remove_on_release:
                    # a file opened (made) but refused its flock (ENOLCK, EIO) has no
                    # holder to remove it as it lets go; only one no process holds goes,
                    # taken first, for a holder's would then let two sweeps of a key in
                    remove_idle([self.path])
                self._fall_back(exc)
            else:
                if got:
                    try:
                        write_note(self.holder_path)
                    except BaseException:
                        # a MemoryError as the note is made, say: let go before it is
                        # raised, or the lock stays held with nobody to release it, and
                        # the next resolve of its key waits for it for good
                        self._release_file()
                        raise
                return got
        if self.mode == "local":
            lock, holders = self._local()
            if not lock.acquire(blocking=False):
                return False
            holders[:] = [Holder(os.getpid(), time.time())]
        return True

    def _try_file(self) -> bool:
        """One try at the file lock: True if taken, False if another process holds it.

        Raises:
            OSError: the lock file cannot be made (after tries that each found no file
                there, making it failed).
        """
        make_folder(self.path.parent)  # a file where it goes: "Not a directory"
        for _ in range(_VANISHED_TRIES):
            try:
                take(self._file, timeout=0)
            except filelock.Timeout:
                if self.path.exists():
                    return False
                # removed between filelock's create and open (`cache clear` deletes idle
                # lock files): the next try makes a fresh one; this is no reason to degrade
                continue
            try:
                held = holds_file_at(self._file, self.path)
            except BaseException:  # a MemoryError, say: taken, it stayed held for good
                self._release_file()
                raise
            if held:
                return True
            # removed (by `cache clear`) after this process opened it: whoever opens
            # the path now gets another file, so holding this one excludes nobody
            self._file.release()
            return False
        # No file after every try: `cache clear` (which holds each idle file as it removes
        # it) won every race, or the file cannot be made. Making it says which: one that
        # can be made is busy, not broken, and the caller's wait tries again within its
        # own bound (hard_limit_s, a timeout, a cancel); going on without the lock would
        # let two processes sweep one key at once.
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT, 0o666)  # OSError: cannot be made
        os.close(fd)
        return False

    def release(self) -> None:
        """Release the lock (from any thread)."""
        if self.mode == "file":
            try:
                # remove the note while still holding: a later holder's note must survive
                with suppress(OSError):
                    self.holder_path.unlink(missing_ok=True)
                if self.remove_on_release and holds_file_at(self._file, self.path):
                    with suppress(OSError):  # Windows: an open file stays; clear removes it
                        self.path.unlink()
            finally:
                # let go whatever the tidying raised (a MemoryError, say): skipped, the
                # lock stayed held for the process's life, and every other process's
                # sweep waited for it
                self._release_file()
        elif self.mode == "local":
            lock, holders = self._local()
            holders.clear()
            lock.release()

    def _release_file(self) -> None:
        """Unlock the file; an unlock the file system refuses (EIO on a network mount) is
        tried once more, then said in a warning, never raised: raised, it escaped the
        sweep's thread as a traceback, and the lock stayed held for the life of the
        process, so every other process's sweep waited for it until its hard limit.

        filelock 4 keeps the descriptor whose unlock failed, and a second release tries
        it again; filelock 3 lets go of it first, leaking it locked: closing it is what
        unlocks it then (a lock made by flock goes with the last descriptor of its file).
        """
        fd = held_fd(self._file)
        try:
            self._file.release()
        except OSError:
            try:
                if self._file.is_locked:
                    self._file.release()
                elif fd is not None and os.path.samestat(os.fstat(fd), os.stat(self.path)):
                    os.close(fd)  # still the lock file's: not a number another open took
            except OSError as exc:
                logger.warning(
                    "chunktune: cannot release %s %s (%s); other processes may wait for it",
                    self.what,
                    shown_file(self.path),
                    exc.strerror or exc,
                )

    def holder(self) -> Holder | None:
        """Who holds the lock now, when it can be told."""
        if self.mode == "local":
            holders = self._local()[1]
            return holders[0] if holders else None
        return read_note(self.holder_path)

    def _local(self) -> tuple[threading.Lock, list[Holder]]:
        with _state_lock:
            return _local.setdefault(self.path.absolute(), (threading.Lock(), []))


def sweep_lock() -> Lock:
    """The machine-wide sweep lock (degrades to a lock of this process).

    The default one's file is removed by each holder as it lets go: named for the
    machine, and so anew each boot, such files would pile up in a home that a cluster's
    nodes share. A file that ``$CHUNKTUNE_SWEEP_LOCK`` names is the user's, and stays
    (a value that names no path is warned about, and the default stands in).
    """
    named = named_sweep_lock()
    return Lock(
        default_sweep_lock_path() if named is None else named,
        what="the sweep lock",
        degrade="local",
        remove_on_release=named is None,
    )


def key_lock(path: Path) -> Lock:
    """A cache key's lock at ``path`` (degrades to none: the flight still holds), its
    file removed by each holder as it lets go.

    An unusable directory of key locks is warned about once, not once per key.
    """
    return Lock(
        path,
        what="the cache key locks in",
        degrade="none",
        warn_path=path.parent,
        remove_on_release=True,
    )
