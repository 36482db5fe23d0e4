"""Lock files on disk: how they are made, where the machine-wide sweep lock lives, and the
files locks leave.

Every lock file is made through :func:`file_lock`, with the permissions a file chunktune
writes gets, and taken through :func:`take`, which keeps it open to its owner (in a folder
:func:`make_folder` made, which its owner can write). Two sweeps at once on one machine
ruin each other's timings, so a sweep holds the sweep lock (``$CHUNKTUNE_SWEEP_LOCK``,
else ``chunktune-sweep-<machine>.lock`` in the user cache root). A holder killed while
holding a lock leaves its file, and its note; :func:`remove_idle` clears the files no
process holds, and :func:`holds_file_at` tells a holder whether the file it locked is
still the one at its path.
"""

from __future__ import annotations

import errno
import logging
import os
import re
import socket
import stat
import weakref
from collections.abc import Iterable
from contextlib import suppress
from pathlib import Path

import filelock
import platformdirs

from ._atomic import umask
from ._lock_note import note_path, read_note
from ._paths import kernel_folder_problem, user_path
from ._shown import shown_file, shown_path

__all__ = [
    "SWEEP_LOCK_ENV",
    "default_sweep_lock_path",
    "file_lock",
    "held_fd",
    "holds_file_at",
    "make_folder",
    "named_sweep_lock",
    "remove_idle",
    "sweep_lock_litter",
    "sweep_lock_path",
    "take",
    "this_machine",
]

SWEEP_LOCK_ENV = "CHUNKTUNE_SWEEP_LOCK"

logger = logging.getLogger("chunktune")

# $CHUNKTUNE_SWEEP_LOCK values already warned about (two threads at once warn twice at most)
_warned_values: set[str] = set()

# filelock 3.24 and later make a lock file as open() would (0o666 less the umask, or what
# a folder's default ACL gives) and leave an existing one's mode alone; given a mode, they
# would chmod the file to it, past a default ACL. The earlier releases the dependency
# floor allows make every one 0o644 whatever the umask, so on a folder a team shares
# through its group no one else could open it to take the lock.
_UMASK_HONOURED = hasattr(filelock.BaseFileLock, "has_explicit_mode")


def file_lock(path: Path) -> filelock.BaseFileLock:
    """A cross-process lock on the file ``path`` (not thread-local: any thread may release).

    The lock file it makes gets what ``open()`` would give it, as a file chunktune
    writes does: ``0o666`` less the umask (``0o664`` under umask ``002``, so that the
    others of a group sharing the folder can take the lock too); its group and others
    never get more than the umask allows.
    """
    if _UMASK_HONOURED:
        return filelock.FileLock(path, thread_local=False)
    # these releases chmod the file to the mode whenever a process of its owner opens it
    # (to take it, or only to try), and pass over a refusal (EPERM): :func:`take` fits the
    # mode to the file before each try; this one serves a lock taken without it, and keeps
    # the owner's read and write whatever the umask, as 0o644 gave it
    return filelock.FileLock(path, mode=_OWNER_RW | (0o666 & ~umask()), thread_local=False)


_OWNER_RW = stat.S_IRUSR | stat.S_IWUSR


def take(lock: filelock.BaseFileLock, *, timeout: float) -> None:
    """``lock.acquire(timeout=timeout)`` on a lock from :func:`file_lock`, keeping its file
    open to its owner, and a file already there as it is.

    A umask that takes the owner's write (``277``) makes a lock file its owner cannot open
    again (filelock 3.24+ makes it as ``open()`` would: ``0o400``), so another process of
    the same user, or the next holder of a file that stays, would be refused it. The file
    taken is given its owner's read and write, and one of this user's found without them
    (made by a holder that had not yet given them, or by an older chunktune) is given them
    and tried again; another user's stays as it is. Below filelock 3.24, which set the file
    to the taker's mode, a file already there keeps its mode (a shared lock file made
    ``0o664`` stays the group's after its owner took it under umask ``022``), and one made
    anew gets what ``open()`` gives it (a folder's default ACL too), as with 3.24+.

    Raises:
        filelock.Timeout: another process held it for ``timeout`` seconds.
        OSError: the file cannot be made or opened.
    """
    path = Path(lock.lock_file)
    _fit_mode(lock, path)
    try:
        _acquire(lock, timeout)
    except PermissionError:
        if not _open_to_owner(path, _OWNER_RW):
            raise
        _fit_mode(lock, path)
        _acquire(lock, timeout)
    try:
        fd = held_fd(lock)
        _open_to_owner(path if fd is None else fd, _OWNER_RW)
        if fd is not None:
            _note_taken(lock, fd)
    except BaseException:
        # a MemoryError as the lock is noted, say: raised with the lock held, no caller
        # knew to let it go, and the machine's next sweep (this process's too) waited
        # for it for good
        lock.release()
        raise


def _acquire(lock: filelock.BaseFileLock, timeout: float) -> None:
    """``lock.acquire(timeout=timeout)``, a file system without ``flock`` an OSError.

    Where ``flock`` fails with ENOSYS (some network and FUSE file systems), older filelock
    (the floor, 3.12) raises NotImplementedError, which no caller took for a lock that
    cannot be had: every resolve whose cache or locks lay there fell back to native, a bug
    reported each time. Newer filelock falls back to a lock by the file's existence itself.
    As an OSError it is a refused lock like any other: a key lock goes on without, a
    write's decision is kept in this process.
    """
    try:
        lock.acquire(timeout=timeout)
    except NotImplementedError as exc:
        raise OSError(errno.ENOSYS, "the file system does not support flock") from exc


# The locks this process took, by id: a weak reference and the file each locked (device
# and inode), so that a forked child can close its copies of their descriptors.
_taken: dict[int, tuple[weakref.ref[filelock.BaseFileLock], tuple[int, int]]] = {}


def _note_taken(lock: filelock.BaseFileLock, fd: int) -> None:
    key = id(lock)

    def gone(ref: weakref.ref[filelock.BaseFileLock]) -> None:
        if _taken.get(key, (None,))[0] is ref:  # not a later lock given the same id
            _taken.pop(key, None)

    with suppress(OSError):
        found = os.fstat(fd)
        _taken[key] = (weakref.ref(lock, gone), (found.st_dev, found.st_ino))


def _close_in_child() -> None:
    """In a forked child: close its copies of the descriptors of the locks held at the fork.

    A lock file is locked with ``flock``, whose lock belongs to the open file, which a fork
    shares: the child's copy kept it locked after the parent let go or died. A trainer
    killed mid-sweep (the OOM killer) whose data loader's workers lived on left the
    machine's sweep lock and its key's lock held for as long as they did, and every other
    trainer on the machine waited. Closing a copy releases nothing of the parent's, which
    keeps its own. filelock 4 closes them itself (then the descriptor is gone or names
    another file, and is left alone); the 3.x releases the dependency floor allows do not.
    No thread of the child holds these locks, so their objects are marked free as well.
    """
    taken = list(_taken.values())
    _taken.clear()
    for ref, identity in taken:
        lock = ref()
        fd = None if lock is None or not lock.is_locked else held_fd(lock)
        if fd is None:
            continue
        with suppress(OSError):
            found = os.fstat(fd)
            if (found.st_dev, found.st_ino) == identity:
                os.close(fd)
                context = getattr(lock, "_context", None)
                with suppress(AttributeError):
                    context.lock_file_fd = None  # type: ignore[union-attr]
                    context.lock_counter = 0  # type: ignore[union-attr]


os.register_at_fork(after_in_child=_close_in_child)


def _fit_mode(lock: filelock.BaseFileLock, path: Path) -> None:
    """Below filelock 3.24, which sets the file to the mode it was given whenever a process
    of its owner (or root) opens it: that mode becomes the file's own, the file made first
    where none is, as ``open()`` makes it (a folder's default ACL, else the umask), so that
    opening it changes nothing else; the owner's read and write are added to this user's
    file only (root taking another user's file leaves its mode as it is)."""
    if _UMASK_HONOURED:
        return
    context = getattr(lock, "_context", None)  # 3.12 to 3.23 keep the mode there
    if context is None or not hasattr(context, "mode"):
        return
    with suppress(OSError):
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
    with suppress(OSError):
        found = os.stat(path)
        own = not hasattr(os, "geteuid") or found.st_uid == os.geteuid()
        context.mode = stat.S_IMODE(found.st_mode) & 0o777 | (_OWNER_RW if own else 0)


def _open_to_owner(file: Path | int, bits: int) -> bool:
    """Add ``bits`` (of the owner's) to the file or folder at ``file`` (a path or a
    descriptor) if this user owns it and it lacks some; whether they were added."""
    if not hasattr(os, "geteuid"):  # Windows: no modes to mend
        return False
    with suppress(OSError):
        found = os.stat(file)
        mode = stat.S_IMODE(found.st_mode)
        if found.st_uid == os.geteuid() and mode & bits != bits:
            os.chmod(file, mode | bits)
            return True
    return False


def make_folder(folder: Path) -> None:
    """``folder.mkdir(parents=True, exist_ok=True)``, where each folder made lets its owner
    read, write and enter it whatever the umask (as ``mkdir -p`` lets the folders above the
    last): one made ``0o500`` under umask ``277`` would refuse its owner's lock files.

    Raises:
        OSError: as ``mkdir`` (no permission); NotADirectoryError: something that is no
            folder stands where one goes.
    """
    _make_folder(folder, parents=True)


def _make_folder(folder: Path, *, parents: bool) -> None:
    # pathlib's own steps, each folder mended as it is made
    try:
        folder.mkdir()
    except FileNotFoundError:
        if not parents or folder.parent == folder:
            raise
        _make_folder(folder.parent, parents=True)
        _make_folder(folder, parents=False)
        return
    except FileExistsError as exc:
        if folder.is_dir():
            return
        # something that is no folder is in the way: "File exists" would read as if the
        # file being written were there; say what reading the path says
        raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), str(folder)) from exc
    except OSError:
        if not folder.is_dir():
            raise
        return
    _open_to_owner(folder, stat.S_IRWXU)


def sweep_lock_path() -> Path:
    """The machine-wide (per user) lock that keeps two sweeps from measuring at once.

    The file ``$CHUNKTUNE_SWEEP_LOCK`` names (:func:`named_sweep_lock`), else
    ``chunktune-sweep-<machine>.lock`` in the user cache root, named for this machine
    (:func:`this_machine`): a cluster's nodes often share the home directory, and one
    lock there would make every node's sweep wait for every other's.
    """
    named = named_sweep_lock()
    return default_sweep_lock_path() if named is None else named


def named_sweep_lock() -> Path | None:
    """The file ``$CHUNKTUNE_SWEEP_LOCK`` names, ``~`` expanded (as in ``$CHUNKTUNE_CACHE``);
    None when it is unset or empty, or names no path, or one in ``/proc`` or ``/sys``.

    A value no shell expanded must not name a ``~`` folder in each process's working
    directory, where processes started in different ones would not exclude each other.
    It is read in the middle of a resolve, where an error must not crash a trainer: a
    value that names no path (``~nosuchuser/lock``, the home of a user that does not
    exist) is warned about once per value, and the default lock stands in, as if the
    variable were unset (its file removed by each holder as it lets go). So is one in
    ``/proc`` or ``/sys`` (:func:`~chunktune._paths.kernel_folder_problem`), where no
    file can be made (``/proc/x/lock``) or one of ``/proc/self`` would exclude no other
    process.
    """
    env = os.environ.get(SWEEP_LOCK_ENV)
    if not env:
        return None
    try:
        path = user_path(env)
    except ValueError as exc:
        problem = str(exc)
    else:
        # in /proc (or /sys) no lock file can be made, or /proc/self's excludes no other
        # process: warned about, as a value that names no path is
        refused = kernel_folder_problem(path)
        if refused is None:
            return path
        problem = f"{shown_path(env)} {refused}"
    if env not in _warned_values:
        _warned_values.add(env)
        logger.warning(
            "chunktune: $%s: %s; the default sweep lock %s is used instead",
            SWEEP_LOCK_ENV,
            problem,
            shown_file(default_sweep_lock_path()),
        )
    return None


def default_sweep_lock_path() -> Path:
    """``chunktune-sweep-<machine>.lock`` in the user cache root (:func:`this_machine`)."""
    root = platformdirs.user_cache_path(appauthor=False)
    return root / f"chunktune-sweep-{this_machine()}.lock"


def sweep_lock_litter() -> list[Path]:
    """This host's default sweep-lock files in the user cache root, of every boot (none
    while ``$CHUNKTUNE_SWEEP_LOCK`` names the lock instead: :func:`named_sweep_lock`).

    Each holder removes its file as it lets go; one killed while holding it leaves it,
    and its note, and a new boot never opens it again (:func:`remove_idle` clears
    those). Only this host's files are listed: the one named for this machine now,
    whatever its note (none, or one cut short, where its holder was killed while
    writing or removing it), and any other whose note names this host. On a home that
    the nodes of a cluster share, a mount whose locks do not reach across hosts would
    let this host take, and delete, a file another host's sweeper holds; so a file of
    another boot without a readable note, which could be any host's, stays.
    """
    if named_sweep_lock() is not None:
        return []
    root = platformdirs.user_cache_path(appauthor=False)
    here, own = socket.gethostname(), default_sweep_lock_path()
    with suppress(OSError):
        files = sorted(root.glob("chunktune-sweep-*.lock"))
        noted = [(f, read_note(note_path(f))) for f in files]
        return [f for f, n in noted if f == own or (n is not None and n.host == here)]
    return []


def remove_idle(files: Iterable[Path]) -> int:
    """Delete the lock files among ``files`` that no process holds now; returns how many went.

    Each is taken without waiting and unlinked while held, with the holder's note
    a killed holder left beside it: a process that opened the old file meanwhile
    finds it unlinked once it gets the lock, and retries on a fresh file
    (:func:`holds_file_at`). One that is held stays, and so does its note.
    """
    removed = 0
    for file in files:
        lock = file_lock(file)
        try:
            take(lock, timeout=0)
        except (filelock.Timeout, OSError):
            continue
        try:
            # another `clear` may have put a new, held file where this one was
            if holds_file_at(lock, file):
                # a note beside an idle lock is a holder's that was killed
                note_path(file).unlink(missing_ok=True)
                file.unlink()
                removed += 1
        except OSError:
            pass
        finally:
            lock.release()
    return removed


_BOOT_ID = Path("/proc/sys/kernel/random/boot_id")


def this_machine() -> str:
    """A name for the machine whose cores a sweep measures, fit for a file name.

    Linux's boot id (12 hex digits of it): one per running kernel, so the containers of
    one host, which share its cores, share it, and the hosts of a cluster differ. Else
    the host name, else ``"local"``.
    """
    try:
        name = _BOOT_ID.read_text().strip().replace("-", "")[:12]
    except (OSError, UnicodeDecodeError):
        name = ""
    name = name or socket.gethostname() or "local"
    return re.sub(r"[^A-Za-z0-9._-]", "_", name)


def holds_file_at(lock: filelock.BaseFileLock, path: Path) -> bool:
    """Whether ``path`` still names the file that ``lock`` (held) has locked.

    A lock file removed (by ``cache clear``) after a waiter opened it is locked by that
    waiter to no effect: whoever opens the path next gets another file. filelock 4
    retries such a file itself; the 3.x releases the dependency floor allows do not.
    """
    fd = held_fd(lock)
    if fd is None:  # a filelock that keeps no descriptor: trust it
        return True
    try:
        return os.path.samestat(os.fstat(fd), os.stat(path))
    except OSError:
        return False


def held_fd(lock: filelock.BaseFileLock) -> int | None:
    """The descriptor of the file ``lock`` holds, where filelock tells it."""
    fd = getattr(getattr(lock, "_context", None), "lock_file_fd", None)
    return fd if isinstance(fd, int) else None
