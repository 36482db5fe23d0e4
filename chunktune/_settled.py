"""Whether a file's stat can vouch for its bytes: not within the clock tick of its last change.

A file system stamps changes from a coarse clock (1-2 s on HFS+, FAT and some NFS servers;
a few ms, the kernel's tick, on Linux before 6.13), so a rewrite of the same size within
one tick keeps the mtime, the ctime and the size, and an atomic replace alternates between
two inode numbers: every field of the stat may repeat. As git does for "racily clean"
files, a file whose last change is less than :data:`SETTLED_S` older than the moment it
was looked at is not told from another by its stat; once it is older, no later write can
carry its stamps. :class:`LastParse` reuses a file's last parse by that rule: while its
stat is unchanged once settled, and while its bytes are unchanged within the tick.
"""

from __future__ import annotations

import os
from typing import Generic, TypeVar

__all__ = ["SETTLED_S", "LastParse", "Stat", "Version", "changed_lately", "identity"]

SETTLED_S = 3.0  # past FAT's 2 s time stamps and a coarse clock's lag behind time_ns()


Stat = tuple[int, int, int, int, int]
"""A file's identity on disk: mtime_ns, size, inode, ctime_ns and device."""

Version = tuple[Stat, bytes | None]
"""What was read: the file's stat and, when it was looked at within the clock tick of its
last change (:func:`changed_lately`), the bytes read, since there the stat alone cannot
tell that file from a same-size rewrite."""

_T = TypeVar("_T")


def identity(st: os.stat_result) -> Stat:
    """``st`` as a :data:`Stat`: the ctime too (``os.utime`` sets the mtime back, never the
    ctime), and the device (inodes repeat across mounts)."""
    return (st.st_mtime_ns, st.st_size, st.st_ino, st.st_ctime_ns, st.st_dev)


def changed_lately(mtime_ns: int, ctime_ns: int, now_ns: int) -> bool:
    """Whether a file stamped ``mtime_ns`` and ``ctime_ns`` changed less than
    :data:`SETTLED_S` before ``now_ns`` (``time.time_ns()``, taken before the stat)."""
    return now_ns - max(mtime_ns, ctime_ns) < SETTLED_S * 1e9


class LastParse(Generic[_T]):
    """What a file's bytes last parsed to (never None), by the :data:`Version` read.

    Shared between threads: the pair is replaced whole, never changed in place.
    """

    __slots__ = ("_last",)

    def __init__(self) -> None:
        self._last: tuple[Version, _T] | None = None

    def by_stat(self, stat: Stat) -> _T | None:
        """The parse of a file settled when parsed whose stat is still ``stat``, else None
        (settled then, so settled now: the stat alone tells)."""
        last = self._last
        if last is not None and last[0][1] is None and last[0][0] == stat:
            return last[1]
        return None

    def by_bytes(self, stat: Stat, raw: bytes, *, settled: bool) -> _T | None:
        """The parse of ``raw`` read with ``stat`` (a same-size rewrite keeps the stat), else
        None; ``settled``: the file has settled since, so from now on the stat alone tells."""
        last = self._last
        if last is not None and last[0] == (stat, raw):
            if settled:
                self._last = ((stat, None), last[1])
            return last[1]
        return None

    def last(self) -> tuple[Version, _T] | None:
        """The :data:`Version` last read (or its promotion to the stat alone) and what it
        parsed to, as one pair; None if nothing is remembered."""
        return self._last

    def keep(self, version: Version, parsed: _T) -> None:
        """Remember ``parsed``, what the file read as ``version`` parses to."""
        self._last = (version, parsed)

    def forget(self) -> None:
        """Remember nothing: the next read parses the file whatever its stat says."""
        self._last = None
