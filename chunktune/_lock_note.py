"""Who holds a lock: the note its holder writes beside it, and reading that note back.

Whoever holds a lock writes its pid, host and since when into ``<lock>.holder``, so that a
waiter can say whom it waits for. The note is a courtesy: one that cannot be written or
read costs a waiter's message its holder, never a lock.
"""

from __future__ import annotations

import errno
import json
import os
import socket
import stat
import time
from contextlib import suppress
from pathlib import Path

import attrs

__all__ = ["Holder", "note_path", "read_note", "write_note"]


@attrs.frozen
class Holder:
    """Who holds a lock: a process id, since when (Unix seconds), and on which host
    (a key lock beside a cache on a shared home may be held by another node's process)."""

    pid: int
    since: float
    host: str = attrs.field(factory=socket.gethostname)

    def describe(self) -> str:
        """``"pid 4242, since 14:03:07"`` (local time), ``"pid 4242 on node17, ..."`` when
        the holder is another host's process, ``"this process, pid 4242, ..."`` when it is
        this one (another task's or thread's sweep: a pid alone reads as another program)."""
        here = self.host == socket.gethostname()
        where = "" if here else f" on {self.host}"
        mine = "this process, " if here and self.pid == os.getpid() else ""
        at = time.strftime("%H:%M:%S", time.localtime(self.since))
        return f"{mine}pid {self.pid}{where}, since {at}"


def note_path(lock: Path) -> Path:
    """Where the holder of the lock file ``lock`` notes its pid, host and start time."""
    return lock.with_name(lock.name + ".holder")


def read_note(path: Path) -> Holder | None:
    """The holder a note at ``path`` names, or None without a readable note.

    A note written before hosts were noted is this host's (it was then the sweep
    lock's, which never left the host, or a key lock's on a local disk). Something there
    that is no regular file (a named pipe) is no note: it is never waited on.
    """
    try:
        note = json.loads(_read(path))
        host = str(note.get("host") or socket.gethostname())
        return Holder(pid=int(note["pid"]), since=float(note["since"]), host=host)
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return None


_MAX_NOTE_BYTES = 4096  # a note is a line of JSON; more is no note


def _read(path: Path) -> bytes:
    """The bytes of the regular file at ``path``, opened without waiting (a named pipe with
    no writer would hold ``open`` and ``read`` for good).

    Raises:
        OSError: it cannot be read, or is no regular file.
    """
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file", str(path))
        return os.read(fd, _MAX_NOTE_BYTES)
    finally:
        os.close(fd)


def _write(path: Path, text: str) -> None:
    """Write ``text`` as the regular file at ``path`` (made as ``open()`` would), without
    waiting on a named pipe there.

    Raises:
        OSError: it cannot be written; ``ENXIO`` or ``EINVAL`` when it is no regular file.
    """
    flags = os.O_WRONLY | os.O_CREAT | getattr(os, "O_NONBLOCK", 0)
    fd = os.open(path, flags, 0o666)  # a named pipe nobody reads: ENXIO, at once
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file", str(path))
        os.ftruncate(fd, 0)
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def write_note(path: Path) -> None:
    """Note this process, on this host, from now, as the holder at ``path``; best effort.

    A note there is a killed holder's (each removes its own as it lets go); one this
    process may not write over (made under a umask that took its owner's write, ``277``,
    or another user's in a folder they share), or something there that is no regular file
    (a named pipe, which would hold the writer for good), is replaced, lest it name the
    dead holder.
    """
    with suppress(OSError):  # only a waiter's message loses the pid
        note = json.dumps({"pid": os.getpid(), "since": time.time(), "host": socket.gethostname()})
        try:
            _write(path, note)
        except OSError as exc:
            no_file = exc.errno in (errno.ENXIO, errno.EINVAL)
            if not (isinstance(exc, PermissionError) or no_file):
                raise
            path.unlink()
            _write(path, note)
