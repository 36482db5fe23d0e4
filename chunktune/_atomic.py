"""Replacing a file atomically, and clearing what writers killed mid-write leave behind.

A write goes to a temporary file in the same directory, is fsynced, and renamed
over the target: readers see the old file or the new one, never half of either.
A writer killed with SIGKILL leaves its ``.<name>.<random>.tmp``; the next writer
(or ``chunktune cache clear``) deletes them, holding the lock that every writer of the
file holds while it writes: a file's age alone cannot prove its writer dead, since the
wall clock may step forward mid-write.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import stat
import tempfile
import time
from pathlib import Path
from typing import BinaryIO

__all__ = [
    "STALE_TEMP_S",
    "check_writable",
    "open_fd",
    "remove_stale_temps",
    "umask",
    "write_atomic",
]

STALE_TEMP_S = 300.0  # a temporary file this old was left by a writer that died mid-write

# a temporary's name: ``.<name>.<random>.tmp`` beside the file it replaces
_SUFFIX = ".tmp"


def _prefix(path: Path) -> str:
    """A temporary's name for ``path`` before its random part: ``.<name>.``."""
    return f".{path.name}."


def write_atomic(path: Path, data: bytes) -> None:
    """Temporary file in the same directory, fsync, rename: readers see old or new, never half.

    A symbolic link is written through to its target (a file linked onto another volume
    stays there), and a file that is there but no regular file (``/dev/stdout``, a FIFO)
    is written into, never replaced by one. The new file has the permissions of the one
    it replaces, or, where there was none, those ``open()`` would give it (``0o666``
    less the umask), never the temporary file's own ``0o600``: a cache or a trace that
    others may read stays readable to them.
    """
    mode: int | None = None
    with contextlib.suppress(FileNotFoundError):
        # by the name given: /dev/stdout onto a pipe has a real path of pipe:[N], no file
        found = os.stat(path)
        if not stat.S_ISREG(found.st_mode):
            with open(path, "wb") as f:
                f.write(data)
            return
        mode = stat.S_IMODE(found.st_mode) & 0o777
    path = Path(os.path.realpath(path))
    fd, tmp = tempfile.mkstemp(prefix=_prefix(path), suffix=_SUFFIX, dir=path.parent)
    try:
        with open_fd(fd) as f:
            with contextlib.suppress(OSError):  # a file system without modes (vfat, some FUSE)
                os.chmod(tmp, (0o666 & ~umask()) if mode is None else mode)
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    with contextlib.suppress(OSError):
        dir_fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)


def open_fd(fd: int) -> BinaryIO:
    """``fd`` as a file written in binary; closed if it cannot be made one (an EIO or
    ENOMEM of the fstat that ``open`` makes), so a trainer that stores many decisions on
    a failing disk does not run out of descriptors."""
    try:
        return os.fdopen(fd, "wb")
    except BaseException:
        os.close(fd)
        raise


def umask() -> int:
    """The process's umask, read without changing it where the system tells it (Linux 4.7+).

    Elsewhere it is set and put back at once; for that instant a file another thread
    makes gets fewer permissions than it asked for, never more.
    """
    with (
        contextlib.suppress(OSError, ValueError, IndexError),
        open("/proc/self/status", encoding="ascii", errors="replace") as status,
    ):
        for line in status:
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    mask = os.umask(0o077)
    os.umask(mask)
    return mask


def check_writable(path: Path) -> None:
    """Make and remove the temporary file a :func:`write_atomic` of ``path`` would make.

    A command that works for minutes before it writes calls this first, so that a
    place it cannot write is said before the work, not after it. Where the system can
    (Linux's ``O_TMPFILE``), the file has no name: it goes with its descriptor, so a
    failing unlink (an EIO) cannot leave an empty temporary beside the output, which no
    later run could tell from a live writer's.

    Raises:
        OSError: the file cannot be made (a read-only or forbidden directory, a name whose
            temporary's is too long for the file system).
    """
    with contextlib.suppress(FileNotFoundError):
        if not stat.S_ISREG(os.stat(path).st_mode):
            return  # written into, not replaced; opening a FIFO now would block
    path = Path(os.path.realpath(path))
    if _unnamed_writable(path.parent):
        # an unnamed file has no name to be too long: a name of 242 to 255 bytes is
        # valid, its temporary's is not, and the write would fail after the work
        with contextlib.suppress(FileNotFoundError):
            os.lstat(path.parent / f"{_prefix(path)}{'x' * _RANDOM_CHARS}{_SUFFIX}")
        return
    fd, tmp = tempfile.mkstemp(prefix=_prefix(path), suffix=_SUFFIX, dir=path.parent)
    try:
        os.close(fd)
    finally:
        os.unlink(tmp)


# the random part of a mkstemp name (tempfile's _RandomNameSequence): 8 characters
_RANDOM_CHARS = 8

# what O_TMPFILE raises where the file system (or a kernel before 3.11) has none: then a
# named temporary is made instead
_NO_TMPFILE = frozenset({errno.EOPNOTSUPP, errno.EISDIR, errno.EINVAL, errno.ENOSYS})


def _unnamed_writable(folder: Path) -> bool:
    """Whether an unnamed file could be made in ``folder`` (False: the system has none).

    Raises:
        OSError: it cannot be made there (read-only, forbidden, full).
    """
    flag = getattr(os, "O_TMPFILE", None)
    if flag is None:
        return False
    try:
        fd = os.open(folder, flag | os.O_WRONLY, 0o600)
    except OSError as exc:
        if exc.errno in _NO_TMPFILE:
            return False
        raise
    os.close(fd)
    return True


def remove_stale_temps(
    path: Path, *, also: tuple[Path, ...] = (), older_than_s: float = STALE_TEMP_S
) -> int:
    """Delete what writers killed mid-write left: ``.<name>.<random>.tmp`` older than the limit.

    Only names :func:`write_atomic` makes for ``path``, or for the files of ``also`` (in
    the same folder: one scan serves them all), match; returns how many went. The caller
    holds the lock that every writer of these files holds while it writes (the cache's
    write lock): then none is a live writer's, whatever the clock did. The age (by the
    wall clock, against the file's time) only spares those of writers that ignore it.
    """
    pattern = re.compile(
        "|".join(
            re.escape(_prefix(p)) + r"[A-Za-z0-9_]+" + re.escape(_SUFFIX) for p in (path, *also)
        )
    )
    cutoff = time.time() - older_than_s
    removed = 0
    with contextlib.suppress(OSError), os.scandir(path.parent) as found:
        for item in found:
            with contextlib.suppress(OSError):
                if (
                    pattern.fullmatch(item.name)
                    and item.is_file(follow_symlinks=False)
                    and item.stat(follow_symlinks=False).st_mtime < cutoff
                ):
                    os.unlink(item.path)
                    removed += 1
    return removed
