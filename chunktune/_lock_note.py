"""Who holds a lock: the note its holder writes beside it, and reading that note back.

Whoever holds a lock writes its pid, host and since when into ``<lock>.holder``, so that a
waiter can say whom it waits for. The note is a courtesy: one that cannot be written or
read costs a waiter's message its holder, never a lock.
"""

from __future__ import annotations

import json
import os
import socket
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
        the holder is another host's process."""
        where = "" if self.host == socket.gethostname() else f" on {self.host}"
        at = time.strftime("%H:%M:%S", time.localtime(self.since))
        return f"pid {self.pid}{where}, since {at}"


def note_path(lock: Path) -> Path:
    """Where the holder of the lock file ``lock`` notes its pid, host and start time."""
    return lock.with_name(lock.name + ".holder")


def read_note(path: Path) -> Holder | None:
    """The holder a note at ``path`` names, or None without a readable note.

    A note written before hosts were noted is this host's (it was then the sweep
    lock's, which never left the host, or a key lock's on a local disk).
    """
    try:
        note = json.loads(path.read_text())
        host = str(note.get("host") or socket.gethostname())
        return Holder(pid=int(note["pid"]), since=float(note["since"]), host=host)
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return None


def write_note(path: Path) -> None:
    """Note this process, on this host, from now, as the holder at ``path``; best effort.

    A note there is a killed holder's (each removes its own as it lets go); one this
    process may not write over (made under a umask that took its owner's write, ``277``,
    or another user's in a folder they share) is replaced, lest it name the dead holder.
    """
    with suppress(OSError):  # only a waiter's message loses the pid
        note = json.dumps({"pid": os.getpid(), "since": time.time(), "host": socket.gethostname()})
        try:
            path.write_text(note)
        except PermissionError:
            path.unlink()
            path.write_text(note)
