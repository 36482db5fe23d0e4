"""Paths a user names: what can name a file, the path it names, and why it is no model.

A user names files as ``str`` or ``os.PathLike`` values (arguments, settings, environment
variables; a workload's informal ``model_file`` may also be ``bytes``); this module says
whether a value can name one, gives its text, turns that text into a ``Path`` with ``~``
expanded (refusing what no path can be), and words why a named model file cannot be
read, or why a folder the kernel makes up cannot hold a file chunktune keeps. The attrs
validator over these names is ``_validators``'s.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from ._shown import shown_path, spelled

__all__ = ["fspath_text", "is_path", "kernel_folder_problem", "model_file_problem", "user_path"]


def is_path(value: object) -> bool:
    """Whether ``value`` can name a file: a ``str`` or an ``os.PathLike`` of one."""
    return isinstance(value, str | os.PathLike)


def fspath_text(value: object) -> str | None:
    """The text of a str, bytes or ``os.PathLike`` path; None for anything else."""
    if not isinstance(value, str | bytes | os.PathLike):
        return None
    try:
        return os.fsdecode(value)
    except TypeError:  # a PathLike whose __fspath__ returns neither str nor bytes
        return None


# what Path.exists() reads as "no such file" (pathlib's own list): a missing folder on
# the way, a symlink loop
_NOT_FOUND = (errno.ENOENT, errno.ENOTDIR, errno.EBADF, errno.ELOOP)


def model_file_problem(file: Path) -> str | None:
    """Why ``file`` cannot be a model (missing, what it is, or a name the system refuses),
    or None for a regular file.

    ``Path.is_file()`` raises, rather than says False, for a name the system refuses to
    look up (longer than NAME_MAX, a folder on the way it may not search): that is told
    here too, with the system's words, instead of escaping as an ``OSError``.
    """
    try:
        mode = file.stat().st_mode
    except OSError as exc:
        if exc.errno in _NOT_FOUND:
            return f"model file not found: {shown_path(str(file))}"
        return (
            f"cannot read model file {shown_path(str(file))}: {exc.strerror or exc}; "
            "expected an MJCF (.xml) or .mjb file"
        )
    except ValueError:  # a NUL byte: no file is named so, as is_file() and exists() say
        return f"model file not found: {shown_path(str(file))}"
    if stat.S_ISREG(mode):
        return None
    kind = "a directory" if stat.S_ISDIR(mode) else "not a regular file"
    return f"model file {shown_path(str(file))} is {kind}; expected an MJCF (.xml) or .mjb file"


def user_path(value: str) -> Path:
    """``value`` as a path with ``~`` expanded.

    Raises:
        ValueError: it is empty or only blank space (a template's unfilled variable;
            such a name would make a file named by spaces in the current folder), holds
            a NUL byte, or starts with the home of a user that does not exist
            (``~nosuchuser/x``).
    """
    if not value:
        raise ValueError('"" is not a path; expected a file name')
    if value.isspace():
        raise ValueError(f"{spelled(value)} is only blank space; expected a file name")
    if "\0" in value:
        raise ValueError(f"{spelled(value)} holds a NUL byte, which no path can")
    try:
        return Path(value).expanduser()
    except RuntimeError:  # pathlib cannot find that user's home (or any home)
        head = value.split("/", 1)[0]
        raise ValueError(
            f"{spelled(value)} starts with {spelled(head)}, but no such home directory exists"
        ) from None


# folders whose files the kernel makes up as they are read: none can be made there, and
# what /proc/self names differs from one process to the next
_KERNEL_FOLDERS = {
    "/proc": "the kernel's view of its processes",
    "/sys": "the kernel's view of its devices",
}


def kernel_folder_problem(path: Path) -> str | None:
    """Why ``path`` can hold no file chunktune keeps (a lock, a cache), completing "it ...";
    None where it can.

    One in ``/proc`` or ``/sys`` (the nearest folder of it that exists is on that file
    system, links followed: ``/proc/self/cwd/x`` is the working folder's) cannot be made,
    or is no file of one's own: a lock there would exclude no other process. Blocking:
    a few ``stat`` calls.
    """
    path = Path(os.path.abspath(path))
    try:
        root_dev = os.stat("/").st_dev
        found = next(p for p in (path, *path.parents) if os.path.exists(p))
        dev = os.stat(found).st_dev
    except (OSError, ValueError, StopIteration):
        return None
    for folder, what in _KERNEL_FOLDERS.items():
        try:
            kernel_dev = os.stat(folder).st_dev
        except OSError:
            continue
        if kernel_dev == dev and kernel_dev != root_dev:
            return (
                f"is in {folder}, {what}, where no file of one's own can be kept; "
                "expected a path on a disk"
            )
    return None
