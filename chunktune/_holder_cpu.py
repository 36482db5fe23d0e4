"""Whether a lock's holder is working: the CPU time its thread has used, as Linux counts it.

A waiter for the cache's write lock gives up on a holder that changes nothing for a while
(:mod:`chunktune._cache_lock`). Wall time alone cannot tell a stopped or stuck holder from
a live one slowed by a busy machine: a process that did not write a 10k-entry TOML cache
last parses it whole and writes it back under the lock, seconds on a calm machine and
several times that on a loaded one, and writers queued behind it were given up.
A holder's thread whose CPU time grows is working; one stopped (Ctrl-Z), blocked (a hung
file system) or dead uses none. Read from ``/proc/<pid>/task/<tid>/stat`` for a holder
on this host, in this process's PID namespace, whose note names its thread; anywhere else
(another host, a container of the same host name that counts its own pids, another
system, an older chunktune's note) nothing is known and wall time alone rules.
"""

from __future__ import annotations

import socket
from pathlib import Path

from ._lock_note import Holder, note_path, pid_space, read_note

__all__ = ["HolderWatch"]


def _cpu_ticks(holder: Holder) -> int | None:
    """The user and system clock ticks ``holder``'s thread has used; None where unknown."""
    if holder.thread <= 0 or holder.host != socket.gethostname():
        return None
    if not holder.pid_space or holder.pid_space != pid_space():
        return None  # its pid would be another process's here, perhaps a busy one
    try:
        with open(f"/proc/{holder.pid}/task/{holder.thread}/stat", "rb") as f:
            text = f.read()
        # after the command's name, which may hold spaces and parentheses: the state, then
        # fields 4-13, then utime and stime (fields 14 and 15 of proc(5))
        fields = text[text.rindex(b")") + 2 :].split()
        return int(fields[11]) + int(fields[12])
    except (OSError, ValueError, IndexError):
        return None


class HolderWatch:
    """Looks, each time asked, whether the holder noted beside a lock file used CPU time
    since the last look."""

    def __init__(self, lock: Path) -> None:
        self._note = note_path(lock)
        # the first look, as the wait begins: a waiter descheduled past the stall limit
        # before its next look (a loaded machine) still sees the holder's time since then
        self._seen = self._look()

    def _look(self) -> tuple[Holder, int] | None:
        """The holder noted now and its thread's clock ticks; None where either is unknown."""
        holder = read_note(self._note)
        ticks = None if holder is None else _cpu_ticks(holder)
        return None if holder is None or ticks is None else (holder, ticks)

    def working(self) -> bool:
        """Whether the lock's holder (the same one as at the last look, or as the watch
        began) used CPU time since that look; False where the holder or its time is
        unknown, or the holder is new since the last look."""
        seen = self._seen
        now = self._seen = self._look()
        return seen is not None and now is not None and seen[0] == now[0] and now[1] > seen[1]
