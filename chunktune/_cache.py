"""The decision cache: one file (JSON or TOML) of entries keyed by workload, machine and policy.

Writes take a cross-process lock on the file, re-read it, merge, and replace it
atomically (temporary file, fsync, ``os.replace``), so concurrent writers of
different keys all survive and a crash leaves either the old or the new file.
A file that does not parse or is of the wrong shape is moved aside with its bytes
intact, never overwritten. A file written by a newer chunktune is left as it is, neither
read nor written: that chunktune still uses it, and moving it aside on every run of this
one would throw away its answers each time. So is a table with none of a cache's keys,
some other program's file named as the cache by mistake. An entry that
fails validation is skipped with a warning, never served, and dropped by the next
write. An entry whose checksum fails (a file cut at a line's end, a changed digit, a hand
edit) makes the file go aside as a broken one does, its whole entries kept. Such a file
that cannot be moved aside (a read-only directory or mount, a write lock that cannot be
taken, a disk too full for the fresh file) serves those whole entries read-only, with one
warning, and goes aside once it can (a write lock that a stuck process holds is waited
for once, :data:`~chunktune._cache_lock.WRITE_STALL_S`; later reads and writes of that
file wait only :data:`~chunktune._cache_lock.WRITE_LOOK_S` for its holder to move it, as
a live one does, and go on). Reads re-parse only when the file changed.

Here: :class:`DecisionCache`, the API over :mod:`chunktune._cache_file` (what was last
read of the file, and writing it back), :mod:`chunktune._cache_lock` (its write lock and
key locks) and :mod:`chunktune._cache_quarantine` (an unusable file moved aside or served
read-only). Which entry answers a request is ``_cache_lookup``'s; which changes may be
stored, and what a merge does with them, ``_cache_changes``'; the document format,
``_cache_format``'s; whole files read and written as they are (export, import, merge),
``_cache_transfer``'s.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from pathlib import Path

import filelock

from . import _unstored
from ._cache_changes import MergeReport as MergeReport
from ._cache_changes import merge_into, storable
from ._cache_entry import CacheEntry
from ._cache_file import CacheFile
from ._cache_format import (
    UnusableCache,
    cache_format,
)
from ._cache_lock import key_lock, lock_path, remove_idle_key_locks, write_lock
from ._cache_lookup import JobIndex
from ._cache_lookup import best_entry as best_entry
from ._cache_lookup import serves_any as serves_any
from ._cache_paths import checked_cache_path
from ._cache_paths import default_cache_path as default_cache_path
from ._cache_quarantine import Quarantine
from ._errors import CacheError
from ._lock_files import remove_idle, sweep_lock_litter
from ._paths import kernel_folder_problem
from ._shown import shown_file

# MergeReport, best_entry, serves_any and default_cache_path, once defined here, are
# re-exported (``X as X``): tests and older callers import them from here
__all__ = ["DecisionCache"]


# ---------------------------------------------------------------- the cache


class DecisionCache:
    """A cache file. Safe to share between threads and processes.

    ``format`` is ``"json"``, ``"toml"`` or ``"auto"`` (by suffix: ``.toml`` is
    TOML, anything else JSON).

    Raises:
        CacheError: the path is empty, holds a NUL byte or names a home that does not
            exist, or ``format`` is unknown.
    """

    def __init__(self, path: str | os.PathLike[str], *, format: str = "auto") -> None:
        named = checked_cache_path(path)
        # in /proc or /sys: refused (no file can be kept there), named as the user wrote it
        # (/proc/self, not the pid it stands for in this process)
        refused = kernel_folder_problem(named)
        # a link is followed: the file it names is the cache (its writes and locks stay
        # beside it), not a new file put in the link's place
        self.path = named.absolute() if refused else Path(os.path.realpath(named))
        self.format = cache_format(self.path, format)
        self._file = CacheFile(self.path, self.format, refused=refused)
        # bound once: a hit makes the one call it made before CacheFile took the reading
        # over, with no attribute hop on the way
        self._load = self._file.load
        self._quarantine = Quarantine(self._file)
        # another policy's entry is looked for among its job's keys, not all of a fleet's
        self._jobs = JobIndex()
        # the last OSError that kept the file from use, as said: a decision this cache
        # could not store is remembered in its process (``_unstored``) under this reason
        self.unavailable_cause: str | None = None

    # -- locks ---------------------------------------------------------------------

    @property
    def lock_path(self) -> Path:
        """The file lock that serializes writers of this cache (each holder removes it as
        it lets go)."""
        return lock_path(self.path)

    def key_lock(self, key: str) -> filelock.BaseFileLock:
        """A cross-process lock for sweeping one key (not thread-local: any thread may release)."""
        return key_lock(self.path, key)

    # -- reading -------------------------------------------------------------------

    def usable(self) -> bool:
        """False when nothing will be stored in the file, so that nothing is locked beside
        it either (no ``locks/`` folder made next to it): the path names something that is
        no regular file or cannot be looked at, or the file is one this chunktune leaves as
        it is (a newer chunktune's, another program's) or cannot read (unreadable, over
        :data:`~chunktune._reading.MAX_CACHE_BYTES`); said in one warning. A broken file is
        usable: a write moves it aside.

        Blocking: reads the file unless its last reading still holds (a miss just made).
        """
        try:
            self._load(fresh=False)
        except UnusableCache:
            return True
        except OSError as exc:
            self.unavailable_cause = exc.strerror or str(exc)
            self._quarantine.unavailable(exc, strict=False)
            return False
        return True

    def entries(self, *, strict: bool = False) -> dict[str, CacheEntry]:
        """Every valid entry, by key. An unusable file is moved aside, keeping its whole
        entries; one that cannot be moved aside serves them read-only (one warning).

        Raises:
            CacheError: only when ``strict``: the file cannot be read (or, unusable, was
                moved aside but its whole entries could not be written back). Otherwise
                that reads as empty, with one warning.
        """
        try:
            return dict(self._load(fresh=False))
        except UnusableCache:
            try:
                with write_lock(self._file, brief=self._quarantine.served_read_only()):
                    try:
                        return dict(self._load(fresh=True))
                    except UnusableCache as exc:
                        return dict(self._quarantine.move_aside(str(exc)))
            except OSError as os_exc:
                kept = self._quarantine.read_only(os_exc)
                if kept is None:
                    kept = self._read_again(os_exc)
                if kept is not None:
                    return dict(kept)
                return self._quarantine.unavailable(os_exc, strict=strict)
        except OSError as exc:
            return self._quarantine.unavailable(exc, strict=strict)

    def _read_again(self, exc: OSError) -> dict[str, CacheEntry] | None:
        """What the file there now serves, once: the unusable file that could not be moved
        aside (``exc``) was replaced meanwhile, by another process that could (a repair, a
        fresh cache, damage anew). Its own entries, or if unusable its whole ones read-only;
        None if it cannot be read either, or is gone (moved aside for good: a full disk kept
        its entries from a fresh file, and ``exc`` says so)."""
        try:
            if self._file.stat() is None:
                return None
            return self._load(fresh=False)
        except UnusableCache:
            return self._quarantine.read_only(exc)
        except OSError:
            return None

    def get(self, key: str) -> CacheEntry | None:
        """The entry stored under ``key``, or None."""
        try:
            return self._load(fresh=False).get(key)
        except (UnusableCache, OSError):
            return self.entries().get(key)

    def lookup(
        self,
        base_key: str,
        *,
        policy_hash: str,
        rule: str,
        effort: int,
        serves: Callable[[CacheEntry], bool] | None = None,
    ) -> tuple[str, CacheEntry] | None:
        """The entry that answers a request: its own policy's, else a stronger one's.

        Entries live under ``"<base_key>.<policy_hash>"``. A result made under
        another policy serves the request when that policy picks by the same rule
        (``Policy.rule()``: margin, ties, estimator, confirmation, the sizes searched)
        and may spend at least as many probes: a ``balanced`` result serves ``quick``
        requests, never the reverse. Among several, the one with the most effort wins. An entry
        ``serves`` refuses answers nothing (one measured on a busy machine, now calm:
        :func:`chunktune._load.serves_now`); ``None``, the default, refuses none.
        """
        try:
            entries = self._load(fresh=False)  # read-only here: no copy on the hit path
        except (UnusableCache, OSError):
            entries = self.entries()  # moves an unusable file aside, or warns once
        return best_entry(
            entries,
            base_key,
            policy_hash=policy_hash,
            rule=rule,
            effort=effort,
            serves=serves,
            index=self._jobs,
        )

    # -- writing -------------------------------------------------------------------

    def _current(self) -> dict[str, CacheEntry]:
        """The file's entries as of now (caller holds the write lock); unusable: moved aside."""
        try:
            return dict(self._load(fresh=True))
        except UnusableCache as exc:
            return self._quarantine.move_aside(str(exc))

    def update(self, changes: Mapping[str, CacheEntry | None]) -> bool:
        """Merge ``changes`` (None deletes) into the file under the lock.

        An entry that would not read back valid, or whose key is no str, is refused with
        a warning, never written. Returns False if the cache is unwritable or an entry was
        refused.

        Raises:
            InvalidArgumentError: ``changes`` is not a mapping.
        """
        kept = storable(changes)
        if not kept:
            return not changes
        if not self._write_or_warn(kept):
            return False
        return len(kept) == len(changes)

    def store_kept(self) -> bool:
        """Blocking: write the decisions this process measured for this file but could not
        store (``_unstored``), those whose keys the file does not hold; nothing is written
        where there are none. False if the cache cannot be written (they stay kept)."""
        return self._write_or_warn({})

    def _write_or_warn(self, changes: Mapping[str, CacheEntry | None]) -> bool:
        """:meth:`_store` ``changes``; False, with one warning a cause, where it cannot."""
        try:
            self._store(changes, with_kept=True)
        except OSError as exc:
            self.unavailable_cause = exc.strerror or str(exc)
            self._quarantine.unavailable(exc, strict=False)
            return False
        return True

    def _store(
        self,
        changes: Mapping[str, CacheEntry | None],
        *,
        expected: Mapping[str, CacheEntry | None] | None = None,
        dropped: Collection[str] = (),
        with_kept: bool = False,
    ) -> bool:
        """Apply ``changes`` (None deletes) to the file under the write lock, unless a key
        of ``expected`` no longer holds what it maps to (None: no entry): then nothing is
        written and False returned. ``dropped``: keys of a newer chunktune's entries that
        this one cannot read, deleted too. ``with_kept``: the decisions this process could
        not store in this file before (``_unstored.pending``) are written too, where the
        file holds no entry of their keys (the file's, another process's, wins), and are
        let go once written; with no change and none of them, nothing is written.

        Raises:
            OSError: the cache cannot be written.
        """
        with write_lock(self._file, brief=self._quarantine.served_read_only()):
            current = self._current()
            if expected and any(current.get(k) != was for k, was in expected.items()):
                self._file.forget()
                return False
            for key, entry in changes.items():
                if entry is None:
                    current.pop(key, None)
                else:
                    current[key] = entry
            kept = _unstored.pending(self.path) if with_kept else None
            added = [] if kept is None else kept.add_to(current)
            if with_kept and not changes and not added:
                # nothing to write: the file holds every kept key already (another process
                # stored them), and those are let go below as after a write, or a later
                # write would bring one back that a `cache remove` took out
                self._file.forget()
            else:
                # the writer's next read parses nothing: CacheFile keeps what it wrote
                replaced = {*changes, *added} if added else changes.keys()
                self._file.write(current, replaced=replaced, dropped=dropped)
        if kept is not None:
            _unstored.settle(kept, current)
        return True

    def merge(self, incoming: Mapping[str, CacheEntry]) -> MergeReport:
        """Merge another cache's entries under the write lock; on a conflict the newer wins.

        An entry that would not read back valid, or whose key is no str, is refused with a
        warning.

        Raises:
            CacheError: the cache cannot be written.
            InvalidArgumentError: ``incoming`` is not a mapping.
        """
        return self.merge_many([incoming])[0]

    def merge_many(self, inputs: Sequence[Mapping[str, CacheEntry]]) -> tuple[MergeReport, ...]:
        """:meth:`merge` each of ``inputs`` in order, under one hold of the write lock and in
        one write (or none, where nothing changes); a report for each.

        A write rewrites the whole file, so a fleet's k files merged one write each would
        rewrite it k times (each time larger). A write that fails merges none of them.

        Raises:
            CacheError: the cache cannot be written (nothing was merged).
            InvalidArgumentError: an input is not a mapping.
        """
        kept = [{k: e for k, e in storable(each).items() if e is not None} for each in inputs]
        try:
            with write_lock(self._file):
                current = self._current()
                reports = tuple(merge_into(current, each) for each in kept)
                if any(report.added or report.replaced for report in reports):
                    self._file.write(current, replaced={key for each in kept for key in each})
                else:
                    self._file.forget()
        except OSError as exc:
            raise CacheError(
                f"cannot write the cache {shown_file(self.path)}: {exc.strerror or exc}"
            ) from exc
        return reports

    def swap(
        self, key: str, entry: CacheEntry, *, expected: Mapping[str, CacheEntry | None]
    ) -> bool:
        """Store ``entry`` under ``key`` only while each key of ``expected`` still holds what
        it maps to (None: no entry), judged and written under the write lock, other keys
        untouched; False, nothing written, where one changed (another process re-tuned it).

        Raises:
            CacheError: the entry would not read back valid, or the cache cannot be written.
        """
        if not storable({key: entry}):
            raise CacheError(
                f"cannot store {key[:12]} in the cache {shown_file(self.path)}: invalid entry"
            )
        try:
            return self._store({key: entry}, expected=expected, with_kept=True)
        except OSError as exc:
            raise CacheError(
                f"cannot write the cache {shown_file(self.path)}: {exc.strerror or exc}"
            ) from exc

    def put(self, key: str, entry: CacheEntry) -> bool:
        """Store one entry (other keys untouched). False if unwritable, or the entry or its
        key (no str) is invalid."""
        return self.update({key: entry})

    def remove(self, keys: Iterable[str]) -> frozenset[str]:
        """Delete the entries under ``keys`` that are there now, and the debris of those
        keys; returns the keys deleted.

        Done under the write lock on the file as it is then, as every write is: an entry
        another process stores meanwhile, under any other key, stays. Debris, as
        :meth:`clear` removes it for every key: the lock files of ``keys`` (deleted or
        already gone) that no process holds, with the notes of holders killed while
        holding them, and the temporary files of writers that died mid-write. Other
        keys' lock files and the sweep lock's are left to :meth:`clear`.

        Raises:
            CacheError: the cache cannot be read or written (nothing was deleted).
        """
        wanted = set(keys)
        try:
            with write_lock(self._file, brief=self._quarantine.served_read_only()):
                current = self._current()
                gone = frozenset(wanted & current.keys())
                if gone:
                    for key in gone:
                        del current[key]
                    self._file.write(current, replaced=gone)  # the temporaries go too
                else:
                    self._file.remove_stale_temps()
                    self._file.forget()
        except OSError as exc:
            raise CacheError(
                f"cannot write the cache {shown_file(self.path)}: {exc.strerror or exc}; "
                "nothing was deleted"
            ) from exc
        remove_idle_key_locks(self.path, wanted)
        return gone

    def _remove_stale_temps(self) -> None:
        """Delete dead writers' temporary files, holding the write lock: whoever holds it may
        be mid-write, whatever the files' times say (a clock stepped forward), and is waited
        for as a writer waits for a stuck one, but briefly (``WRITE_LOOK_S``); one that does
        not let go leaves them to a later write. A folder that is not there has none, and is
        not made."""
        with contextlib.suppress(OSError):
            if self.path.parent.is_dir():
                with write_lock(self._file, brief=True):
                    self._file.remove_stale_temps()

    def unreadable(self) -> frozenset[str]:
        """The keys of the entries a newer chunktune wrote in the file that this one cannot
        read (whole, their checksum matching): never served, listed or exported here, and
        kept by every write but :meth:`clear`'s (a decision stored under one's key replaces
        it)."""
        self.entries()
        return self._file.unread_keys()

    def clear(self) -> int:
        """Delete every entry present now, and the debris of earlier runs; returns how many
        of the entries :meth:`entries` lists it deleted. The entries a newer chunktune wrote
        that this one cannot read (:meth:`unreadable`) go too: the cache is emptied.

        Debris: key-lock files no process holds (and the notes of holders killed
        while holding them), this host's default sweep-lock files that none holds (one
        per boot, left by a sweeper killed while holding it;
        :func:`chunktune._lock_files.sweep_lock_litter`), and temporary files of writers
        that died mid-write (older than ``_atomic.STALE_TEMP_S``, five minutes, and deleted
        holding the write lock, so that no live writer's is taken for one).

        Raises:
            CacheError: the cache cannot be read or written (nothing was deleted).
        """
        keys = list(self.entries(strict=True))
        newer = self._file.unread_keys()
        try:
            if keys or newer or self._quarantine.still_broken() is not None:
                # its write deletes the temporaries too
                self._store(dict.fromkeys(keys), dropped=newer)
            else:
                self._remove_stale_temps()
        except OSError as exc:
            raise CacheError(
                f"cannot write the cache {shown_file(self.path)}: {exc.strerror or exc}; "
                "nothing was deleted"
            ) from exc
        remove_idle_key_locks(self.path)
        remove_idle(sweep_lock_litter())
        return len(keys)
