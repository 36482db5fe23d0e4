"""Atomic replacement: links written through, FIFOs written into, permissions kept,
temporaries cleaned up."""

from __future__ import annotations

import errno
import os
import stat
import subprocess
import sys
import tempfile
import time
import types
from pathlib import Path
from typing import Any

import pytest

import chunktune._atomic
from chunktune._atomic import (
    STALE_TEMP_S,
    check_writable,
    remove_stale_temps,
    umask,
    write_atomic,
)


def test_a_write_through_a_symlink_replaces_the_target_and_keeps_the_link(tmp_path: Path) -> None:
    """write_atomic of a symlink writes its target (on another volume, say); the link stays."""
    volume = tmp_path / "volume"
    volume.mkdir()
    target = volume / "trace.json"
    target.write_bytes(b"old")
    link = tmp_path / "trace.json"
    link.symlink_to(target)
    write_atomic(link, b"new")
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert target.read_bytes() == b"new"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["trace.json", "volume"]


def test_checking_a_fifo_makes_no_temporary_file_beside_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """check_writable of a FIFO makes no temporary: a FIFO is written into, in any folder."""
    fifo = tmp_path / "pipe.json"
    os.mkfifo(fifo)

    def no_temporaries(*args: object, **kwargs: object) -> tuple[int, str]:
        raise PermissionError(13, "Permission denied", str(tmp_path))

    monkeypatch.setattr(tempfile, "mkstemp", no_temporaries)
    check_writable(fifo)
    assert [p.name for p in tmp_path.iterdir()] == ["pipe.json"]


def test_only_whole_temporary_names_count_as_stale(tmp_path: Path) -> None:
    """remove_stale_temps deletes ``.<name>.<random>.tmp`` exactly, not names that only start so."""
    path = tmp_path / "c.json"
    old = time.time() - STALE_TEMP_S - 60
    stale = tmp_path / ".c.json.ab12cd34.tmp"
    kept = [tmp_path / ".c.json.ab12cd34.tmp.bak", tmp_path / ".c.json.ab12cd34.tmpx"]
    for file in (stale, *kept):
        file.write_text("half a write")
        os.utime(file, (old, old))
    assert remove_stale_temps(path) == 1
    assert not stale.exists() and all(file.exists() for file in kept)


def test_dev_stdout_onto_a_pipe_is_checked_and_written_into() -> None:
    """/dev/stdout that is a pipe (its real path, pipe:[N], is no file) is written into."""
    code = (
        "from pathlib import Path\n"
        "from chunktune._atomic import check_writable, write_atomic\n"
        "check_writable(Path('/dev/stdout'))\n"
        "write_atomic(Path('/dev/stdout'), b'written')\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, check=False)
    assert (done.returncode, done.stdout, done.stderr) == (0, b"written", b"")


_WRITE_WITH_UMASK = """
import os, stat, sys
from pathlib import Path
os.umask(int(sys.argv[2], 8))
from chunktune._atomic import umask, write_atomic
write_atomic(Path(sys.argv[1]), b"new")
print(stat.S_IMODE(os.stat(sys.argv[1]).st_mode), umask(), os.umask(0))
"""


@pytest.mark.parametrize(
    ("mask", "mode"), [(0o022, 0o644), (0o027, 0o640), (0o002, 0o664)], ids=oct
)
def test_a_new_file_gets_the_permissions_open_would_give_it(
    tmp_path: Path, mask: int, mode: int
) -> None:
    """A file that was not there is made 0o666 less the umask, not mkstemp's private 0o600."""
    target = tmp_path / "cache.json"
    out = subprocess.run(
        [sys.executable, "-c", _WRITE_WITH_UMASK, str(target), oct(mask)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert [int(n) for n in out] == [mode, mask, mask]  # and reading the umask left it as it was
    assert target.read_bytes() == b"new"


@pytest.mark.parametrize("mode", [0o640, 0o604, 0o444], ids=oct)
def test_a_replaced_file_keeps_its_permissions(tmp_path: Path, mode: int) -> None:
    """A file written over keeps the permissions it had, through a link to it as well."""
    target = tmp_path / "trace.json"
    target.write_bytes(b"old")
    target.chmod(mode)
    link = tmp_path / "link.json"
    link.symlink_to(target)
    write_atomic(target, b"new")
    assert stat.S_IMODE(target.stat().st_mode) == mode
    write_atomic(link, b"newer")
    assert stat.S_IMODE(target.stat().st_mode) == mode
    assert target.read_bytes() == b"newer"


@pytest.mark.parametrize("mode", [0o4755, 0o2755, 0o1644], ids=oct)
def test_a_replaced_file_passes_on_no_setuid_setgid_or_sticky_bit(
    tmp_path: Path, mode: int
) -> None:
    """A file written over keeps its read, write and execute bits only, as a write would."""
    target = tmp_path / "trace.json"
    target.write_bytes(b"old")
    target.chmod(mode)
    if stat.S_IMODE(target.stat().st_mode) != mode:
        pytest.skip(f"this file system does not keep mode {mode:#o}")
    write_atomic(target, b"new")
    assert stat.S_IMODE(target.stat().st_mode) == mode & 0o777


def test_the_umask_is_told_where_the_system_does_not_say_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Without /proc the umask is set and put back: the same figure, and left as it was."""
    told = umask()

    def no_proc(*args: object, **kwargs: object) -> None:
        raise FileNotFoundError(2, "No such file or directory", "/proc/self/status")

    monkeypatch.setattr(chunktune._atomic, "open", no_proc, raising=False)
    assert umask() == told
    assert umask() == told


def test_a_file_system_that_refuses_modes_still_gets_the_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where chmod is refused (vfat, some FUSE mounts) the write lands all the same."""

    def refused(*args: object, **kwargs: object) -> None:
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(os, "chmod", refused)  # the os module chunktune._atomic uses
    target = tmp_path / "cache.json"
    write_atomic(target, b"new")
    assert target.read_bytes() == b"new"


def test_a_symlink_loop_is_refused_and_left_as_it_is(tmp_path: Path) -> None:
    """write_atomic of a link that loops raises OSError and leaves the link, no temporary."""
    loop = tmp_path / "c.json"
    loop.symlink_to(loop)
    with pytest.raises(OSError):
        write_atomic(loop, b"new")
    assert loop.is_symlink() and [p.name for p in tmp_path.iterdir()] == ["c.json"]


def test_the_data_is_synced_before_the_file_is_replaced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """write_atomic fsyncs the temporary file before it renames it over the target."""
    calls: list[str] = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd: int) -> None:
        calls.append("fsync-file" if stat.S_ISREG(os.fstat(fd).st_mode) else "fsync-folder")
        real_fsync(fd)

    def replace(src: str, dst: Path) -> None:
        calls.append("replace")
        real_replace(src, dst)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    write_atomic(tmp_path / "c.json", b"new")
    assert calls[:2] == ["fsync-file", "replace"]
    assert (tmp_path / "c.json").read_bytes() == b"new"


@pytest.mark.parametrize("error", [OSError(28, "No space left"), KeyboardInterrupt()])
def test_a_write_stopped_midway_leaves_the_old_file_and_no_temporary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, error: BaseException
) -> None:
    """An error or a Ctrl-C during the write raises, keeps the old file, removes the temporary."""
    path = tmp_path / "c.json"
    path.write_bytes(b"old")

    def failing(fd: int) -> None:
        raise error

    monkeypatch.setattr(os, "fsync", failing)
    with pytest.raises(type(error)):
        write_atomic(path, b"new")
    assert path.read_bytes() == b"old" and [p.name for p in tmp_path.iterdir()] == ["c.json"]


def test_checking_a_link_into_a_folder_that_is_gone_fails_as_the_write_would(
    tmp_path: Path,
) -> None:
    """check_writable of a link whose target's folder is gone raises, as write_atomic does."""
    link = tmp_path / "c.json"
    link.symlink_to(tmp_path / "gone" / "c.json")
    with pytest.raises(OSError):
        write_atomic(link, b"new")
    with pytest.raises(OSError):
        check_writable(link)


def test_checking_a_place_leaves_nothing_there(tmp_path: Path) -> None:
    """check_writable makes its temporary file and removes it: the folder is as it was."""
    (tmp_path / "c.json").write_bytes(b"old")
    check_writable(tmp_path / "c.json")
    check_writable(tmp_path / "new.json")
    assert [p.name for p in tmp_path.iterdir()] == ["c.json"]


def _unlink_fails(*args: object, **kwargs: object) -> None:
    raise OSError(errno.EIO, os.strerror(errno.EIO))


def test_a_check_whose_unlink_fails_leaves_no_empty_temporary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """check_writable's probe has no name to unlink: an EIO there leaves no empty .tmp."""
    monkeypatch.setattr(os, "unlink", _unlink_fails)
    check_writable(tmp_path / "trace.json")
    monkeypatch.undo()
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "without",
    [
        pytest.param(None, id="no-O_TMPFILE"),
        pytest.param(errno.EOPNOTSUPP, id="file-system-has-none"),
        pytest.param(errno.EISDIR, id="kernel-before-3.11"),
        pytest.param(errno.EINVAL, id="flag-not-understood"),
        pytest.param(errno.ENOSYS, id="not-implemented"),
    ],
)
def test_a_check_without_unnamed_files_makes_and_removes_a_named_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, without: int | None
) -> None:
    """Where O_TMPFILE is missing or refused, check_writable falls back to a named temporary."""
    made: list[str] = []
    real_mkstemp = tempfile.mkstemp

    def mkstemp(*args: Any, **kwargs: Any) -> tuple[int, str]:
        fd, name = real_mkstemp(*args, **kwargs)
        made.append(name)
        return fd, name

    monkeypatch.setattr(tempfile, "mkstemp", mkstemp)
    if without is None:
        monkeypatch.delattr(os, "O_TMPFILE", raising=False)
    else:
        real_open = os.open

        def refusing(path: Any, flags: int, *args: Any, **kwargs: Any) -> int:
            if flags & os.O_TMPFILE == os.O_TMPFILE:
                raise OSError(without, os.strerror(without))
            return real_open(path, flags, *args, **kwargs)

        monkeypatch.setattr(os, "open", refusing)
    check_writable(tmp_path / "trace.json")
    assert len(made) == 1 and list(tmp_path.iterdir()) == []


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="reads /proc")
def test_a_check_leaves_no_descriptor_open(tmp_path: Path) -> None:
    """check_writable's unnamed probe is closed: a check per command leaks no descriptor."""
    before = sorted(os.listdir("/proc/self/fd"))
    for _ in range(3):
        check_writable(tmp_path / "trace.json")
    assert sorted(os.listdir("/proc/self/fd")) == before


def test_a_check_refused_by_the_file_system_raises(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An O_TMPFILE refused for want of room (ENOSPC) is the check's failure, not a fallback."""
    real_open = os.open

    def full(path: Any, flags: int, *args: Any, **kwargs: Any) -> int:
        if flags & os.O_TMPFILE == os.O_TMPFILE:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", full)
    with pytest.raises(OSError, match="No space left"):
        check_writable(tmp_path / "trace.json")
    assert list(tmp_path.iterdir()) == []


def test_what_only_looks_like_a_stale_temporary_is_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No random part, a symbolic link, or exactly the limit's age: not a dead writer's."""
    path = tmp_path / "c.json"
    now = 1_000_000_000.0
    bare = tmp_path / ".c.json..tmp"
    link = tmp_path / ".c.json.ab12cd34.tmp"
    edge = tmp_path / ".c.json.ef56gh78.tmp"
    target = tmp_path / "target"
    for file in (bare, target):
        file.write_text("kept")
        os.utime(file, (now - 1000, now - 1000))
    link.symlink_to(target)
    os.utime(link, (now - 1000, now - 1000), follow_symlinks=False)
    edge.write_text("just now")
    os.utime(edge, (now - 300, now - 300))
    monkeypatch.setattr(chunktune._atomic, "time", types.SimpleNamespace(time=lambda: now))
    assert remove_stale_temps(path, older_than_s=300) == 0
    assert bare.exists() and link.is_symlink() and target.exists() and edge.exists()


def test_a_folder_that_is_gone_has_no_stale_temporaries(tmp_path: Path) -> None:
    """remove_stale_temps beside a path whose folder does not exist removes none, raises nothing."""
    assert remove_stale_temps(tmp_path / "gone" / "c.json") == 0


@pytest.mark.parametrize(
    "error", [OSError(5, "Input/output error"), KeyboardInterrupt()], ids=["eio", "ctrl-c"]
)
def test_a_descriptor_that_cannot_become_a_file_is_closed_and_no_temporary_left(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, error: BaseException
) -> None:
    """A failed fdopen of the temporary (EIO, a Ctrl-C) closes its descriptor, keeps the old."""
    path = tmp_path / "c.json"
    path.write_bytes(b"old")
    made: list[int] = []
    real_mkstemp = tempfile.mkstemp

    def mkstemp(*args: object, **kwargs: object) -> tuple[int, str]:
        fd, name = real_mkstemp(*args, **kwargs)  # type: ignore[call-overload]
        made.append(fd)
        return fd, name

    def fdopen(fd: int, *args: object, **kwargs: object) -> None:
        raise error

    monkeypatch.setattr(tempfile, "mkstemp", mkstemp)
    monkeypatch.setattr(os, "fdopen", fdopen)
    with pytest.raises(type(error)):
        write_atomic(path, b"new")
    assert path.read_bytes() == b"old" and [p.name for p in tmp_path.iterdir()] == ["c.json"]
    with pytest.raises(OSError):  # EBADF: closed, not left open for the life of the process
        os.fstat(made[0])


@pytest.mark.parametrize(
    ("spare", "fits"),
    [
        pytest.param(0, False, id="at-name-max"),
        pytest.param(13, False, id="temporary-one-too-long"),
        pytest.param(14, True, id="temporary-fits"),
    ],
)
def test_a_check_agrees_with_the_write_on_a_long_name(
    tmp_path: Path, spare: int, fits: bool
) -> None:
    """A name whose temporary is too long fails the check, as the write; one that fits passes."""
    # a name of 242 to 255 bytes is valid, its ".<name>.<8 random>.tmp" is not: the check
    # made an unnamed file and passed, and the write failed after the work
    name = "t" * (os.pathconf(tmp_path, "PC_NAME_MAX") - spare - 5) + ".json"
    if fits:
        check_writable(tmp_path / name)
        write_atomic(tmp_path / name, b"{}")
        assert [p.name for p in tmp_path.iterdir()] == [name]
        return
    with pytest.raises(OSError, match="too long") as checked:
        check_writable(tmp_path / name)
    with pytest.raises(OSError, match="too long") as written:
        write_atomic(tmp_path / name, b"{}")
    assert checked.value.errno == written.value.errno == errno.ENAMETOOLONG
    assert list(tmp_path.iterdir()) == []
