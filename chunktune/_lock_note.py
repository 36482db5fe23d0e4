"""Who holds a lock: the note its holder writes beside it, and reading that note back.

Whoever holds a lock writes its pid, host, program and since when into ``<lock>.holder``,
so that a waiter can say whom it waits for: "chunktune check, pid 4242, since 14:03:07"
tells an operator whether to wait for a trainer's first resolve or to stop a check. The
note is a courtesy: one that cannot be written or read costs a waiter's message its
holder, never a lock.
"""

from __future__ import annotations

import errno
import json
import os
import socket
import stat
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

import attrs

__all__ = [
    "Holder",
    "note_path",
    "noted_as",
    "pid_space",
    "read_note",
    "this_program",
    "write_note",
]

_PROGRAM_CHARS = 40  # a program named in a waiter's line: its start, if longer
# what noted_as names this process: one entry per open block, the latest last (a block
# that ends takes out its own entry, so blocks of two threads may end in any order)
_program: list[tuple[object, str]] = []


def _printable(text: str) -> str:
    """``text`` fit for a waiter's line: control characters as ``?`` (a note is any
    process's file), cut to its first :data:`_PROGRAM_CHARS` characters."""
    shown = "".join(ch if ch.isprintable() else "?" for ch in text)
    return shown if len(shown) <= _PROGRAM_CHARS else shown[: _PROGRAM_CHARS - 1] + "…"


@attrs.frozen
class Holder:
    """Who holds a lock: a process id, since when (Unix seconds), on which host (a key
    lock beside a cache on a shared home may be held by another node's process), and what
    program it is, where told (``""`` where not: a note written before programs were)."""

    pid: int
    since: float
    host: str = attrs.field(factory=socket.gethostname)
    program: str = attrs.field(default="", kw_only=True, converter=_printable)
    thread: int = attrs.field(default=0, kw_only=True)
    """The holding thread's native id (0 where not noted): whose CPU time says whether the
    holder is working (:mod:`chunktune._holder_cpu`)."""
    pid_space: str = attrs.field(default="", kw_only=True)
    """The holder's PID namespace (:func:`pid_space`; ``""`` where not noted): its pid and
    thread name another process in a container of the same host name."""

    def describe(self) -> str:
        """``"train.py, pid 4242, since 14:03:07"`` (local time; no program where it is not
        known), ``"..., pid 4242 on node17, ..."`` when the holder is another host's
        process, ``"this process, pid 4242, ..."`` when it is this one (another task's or
        thread's sweep: a pid alone reads as another program)."""
        here = self.host == socket.gethostname()
        # a note is any process's file: its host is shown as its program is (a hostname
        # compared raw, to tell this host's holders, is kept raw)
        where = "" if here else f" on {_printable(self.host)}"
        if here and self.pid == os.getpid():
            who = "this process, "
        else:
            who = f"{self.program}, " if self.program else ""
        at = time.strftime("%H:%M:%S", time.localtime(self.since))
        return f"{who}pid {self.pid}{where}, since {at}"


@contextmanager
def noted_as(program: str) -> Iterator[None]:
    """Within the block, name this process ``program`` in the lock notes it writes (the
    CLI names itself ``"chunktune check"``, ``"chunktune tune"``...); outside any such
    block, a note names the script Python runs (:func:`this_program`). Blocks may
    overlap (two threads each running the CLI's ``main``): the latest still open names
    it, and the end of one never brings back the name of one that has ended."""
    entry = (object(), program)
    _program.append(entry)
    try:
        yield
    finally:
        _program.remove(entry)


def this_program() -> str:
    """What this process's notes call it: the name :func:`noted_as` gives, else the script
    Python runs (``train.py``; a package run with ``-m``: its name), else ``""`` (``-c``,
    an interactive or embedded interpreter)."""
    named = _program[-1:]  # one read: another thread's block may end meanwhile
    if named:
        return named[0][1]
    argv = getattr(sys, "argv", None) or [""]
    script = Path(str(argv[0]))
    if script.name == "__main__.py":
        return script.parent.name
    return "" if script.name in ("", "-c", "-") else script.name


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
        program = str(note.get("program") or "")
        thread = int(note.get("thread") or 0)
        space = str(note.get("pid_space") or "")
        return Holder(
            int(note["pid"]),
            float(note["since"]),
            host,
            program=program,
            thread=thread,
            pid_space=space,
        )
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


def pid_space() -> str:
    """This process's PID namespace as Linux names it (``"pid:[4026531836]"``); ``""``
    where unknown (no ``/proc``). Two containers of one host name (host networking) each
    count pids from 1: a pid is only a process's within its namespace."""
    try:
        return os.readlink("/proc/self/ns/pid")
    except OSError:
        return ""


def _native_thread() -> int:
    """This thread's native id, 0 where Python has none to give (not every system it runs
    on has ``threading.get_native_id``): the note is still written, with no thread."""
    native_id = getattr(threading, "get_native_id", None)
    return native_id() if native_id is not None else 0


def write_note(path: Path) -> None:
    """Note this process (its pid, this thread and :func:`this_program`), on this host, from
    now, as the holder at ``path``; best effort.

    A note there is a killed holder's (each removes its own as it lets go); one this
    process may not write over (made under a umask that took its owner's write, ``277``,
    or another user's in a folder they share), or something there that is no regular file
    (a named pipe, which would hold the writer for good), is replaced, lest it name the
    dead holder.
    """
    with suppress(OSError):  # only a waiter's message loses the pid
        mine = {"pid": os.getpid(), "since": time.time(), "host": socket.gethostname()}
        ours = {"thread": _native_thread(), "pid_space": pid_space()}
        note = json.dumps({**mine, **ours, "program": this_program()})
        try:
            _write(path, note)
        except OSError as exc:
            no_file = exc.errno in (errno.ENXIO, errno.EINVAL)
            if not (isinstance(exc, PermissionError) or no_file):
                raise
            path.unlink()
            _write(path, note)
