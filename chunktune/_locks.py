"""Cross-process locks held from async code: the machine's sweep lock and a cache key's lock.

Two sweeps at once on one machine ruin each other's timings, so a sweep holds the
sweep lock (where it lives: ``_lock_files``); a process that measures one cache key
holds that key's lock, so other processes wait for its answer instead of measuring
again.

A lock whose file cannot be created (a read-only or missing directory, a home that
is not a directory) degrades instead of failing the resolve, with one warning per
path (for key locks, per directory): the sweep lock to a lock of this process, a key
lock to none (this process's flight still makes its tasks share one sweep). Whoever
holds a lock notes who it is beside it (``_lock_note``).
"""

from __future__ import annotations

import errno
import logging
import os
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager, suppress
from pathlib import Path
from typing import Literal

import anyio
import filelock

from ._lock_files import SWEEP_LOCK_ENV, holds_file_at, sweep_lock_path
from ._lock_note import Holder, note_path, read_note, write_note
from ._threads import hop

__all__ = [
    "Lock",
    "acquire",
    "hold",
    "hold_blocking",
    "key_lock",
    "noted_holder",
    "sweep_lock",
]

logger = logging.getLogger("chunktune")

_POLL_S = 0.02  # first pause between attempts; it grows to _POLL_MAX_S
_POLL_MAX_S = 0.25
REPORT_AFTER_S = 1.0  # a wait longer than this is reported
RELOOK_S = 2.0  # then who holds the lock is read again this often: reported if it changed
# A holder writes its note just after taking the lock: a first look that finds none looks
# again on each attempt for this long before it reports the holder unknown.
NOTE_GRACE_S = 1.0
_VANISHED_TRIES = 4  # tries in a row that find no lock file before it is deemed unmakeable


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
    logger.warning("chunktune: cannot use %s %s (%s); %s", what, path, exc.strerror or exc, instead)


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
        self._file = filelock.FileLock(path, thread_local=False)

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
        """Take the lock if it is free; False if another holds it."""
        if self.mode == "file":
            try:
                got = self._try_file()
            except OSError as exc:
                self._fall_back(exc)
            else:
                if got:
                    write_note(self.holder_path)
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
            OSError: the lock file cannot be made (a timeout with no file there, again
                and again: a holder would have created it).
        """
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except FileExistsError:
            # a file where the folder goes: "File exists" would speak of a lock file that is
            # not there
            raise OSError(
                errno.ENOTDIR, os.strerror(errno.ENOTDIR), str(self.path.parent)
            ) from None
        for _ in range(_VANISHED_TRIES):
            try:
                self._file.acquire(timeout=0)
            except filelock.Timeout:
                if self.path.exists():
                    return False
                # removed between filelock's create and open (`cache clear` deletes idle
                # lock files): the next try makes a fresh one; this is no reason to degrade
                continue
            if holds_file_at(self._file, self.path):
                return True
            # removed (by `cache clear`) after this process opened it: whoever opens
            # the path now gets another file, so holding this one excludes nobody
            self._file.release()
            return False
        raise OSError(errno.ENOENT, "the lock file cannot be created", str(self.path))

    def release(self) -> None:
        """Release the lock (from any thread)."""
        if self.mode == "file":
            # remove the note while still holding: a later holder's note must survive
            with suppress(OSError):
                self.holder_path.unlink(missing_ok=True)
            if self.remove_on_release and holds_file_at(self._file, self.path):
                with suppress(OSError):  # Windows: an open file stays; clear removes it
                    self.path.unlink()
            self._file.release()
        elif self.mode == "local":
            lock, holders = self._local()
            holders.clear()
            lock.release()

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
    nodes share. A file that ``$CHUNKTUNE_SWEEP_LOCK`` names is the user's, and stays.
    """
    return Lock(
        sweep_lock_path(),
        what="the sweep lock",
        degrade="local",
        remove_on_release=not os.environ.get(SWEEP_LOCK_ENV),
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


async def acquire(
    lock: Lock,
    *,
    on_wait: Callable[[Holder | None], None] | None = None,
    claim: Callable[[Lock], bool] | None = None,
) -> None:
    """Wait for ``lock`` without blocking the event loop; cancellable between attempts.

    ``on_wait(holder)`` is called on the loop when the wait has lasted
    :data:`REPORT_AFTER_S` seconds (``None`` for a holder whose note is still missing
    :data:`NOTE_GRACE_S` later), and again whenever another process is found holding
    the lock (read every :data:`RELOOK_S`: the first was killed, and another, perhaps
    on another host of a shared cache, took over). ``claim(lock)``, if given, runs in
    the thread that took the lock, before the caller resumes: it records the lock where
    it can be released should the caller never resume (its loop closed); False gives it
    back.
    """
    start = anyio.current_time()
    pause = _POLL_S
    look_at = start + REPORT_AFTER_S  # when to read who holds the lock next
    reported: list[Holder | None] = []  # the holder reported last, once reported
    unknown_after = start + REPORT_AFTER_S + NOTE_GRACE_S

    def attempt() -> bool:
        if not lock.try_acquire():
            return False
        if claim is not None and not claim(lock):
            lock.release()  # nobody is left to hold it
            return False
        return True

    while True:
        # A blocking acquire in a worker thread could not be cancelled without leaking a
        # thread that may take the lock later; non-blocking attempts between sleeps can.
        # Shielded: a lock taken in the thread must reach the caller, who releases it.
        with anyio.CancelScope(shield=True):
            if await hop(attempt):
                return
        if on_wait is not None and anyio.current_time() >= look_at:
            holder = await hop(lock.holder)
            # no note on a first look: the lock was taken a moment ago and its note is not
            # yet written, so look again at the next attempt (up to NOTE_GRACE_S)
            if holder is not None or reported or anyio.current_time() >= unknown_after:
                look_at = anyio.current_time() + RELOOK_S
                # a note missing between two holders is no news: only a holder is reported
                if not reported or (holder is not None and holder != reported[-1]):
                    reported.append(holder)
                    on_wait(holder)
        await anyio.sleep(pause)
        pause = min(pause * 1.5, _POLL_MAX_S)


@asynccontextmanager
async def hold(
    lock: Lock,
    *,
    on_wait: Callable[[Holder | None], None] | None = None,
    claim: Callable[[Lock], bool] | None = None,
    unclaim: Callable[[Lock], bool] | None = None,
) -> AsyncIterator[None]:
    """Hold ``lock`` for the block (see :func:`acquire`).

    With ``claim``, ``unclaim(lock)`` says at the end whether the lock is still this
    block's to release (False: it was released for it, its loop having been closed).
    """
    await acquire(lock, on_wait=on_wait, claim=claim)
    try:
        yield
    finally:
        if unclaim is None or unclaim(lock):
            lock.release()


def noted_holder(lock: Lock) -> Holder | None:
    """Blocking: who holds ``lock``, read again for up to :data:`NOTE_GRACE_S` while its
    note is missing (a holder writes it just after taking the lock)."""
    deadline = time.monotonic() + NOTE_GRACE_S
    while (holder := lock.holder()) is None and time.monotonic() < deadline:
        time.sleep(_POLL_S)
    return holder


@contextmanager
def hold_blocking(lock: Lock, *, timeout_s: float) -> Iterator[bool]:
    """Blocking: hold ``lock`` for the block, waiting up to ``timeout_s``; yields whether it did."""
    deadline = time.monotonic() + timeout_s
    pause = _POLL_S
    while not (got := lock.try_acquire()) and time.monotonic() < deadline:
        time.sleep(pause)
        pause = min(pause * 1.5, _POLL_MAX_S)
    try:
        yield got
    finally:
        if got:
            lock.release()
