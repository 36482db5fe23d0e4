"""Atomic replacement: links written through, FIFOs written into, permissions kept,
temporaries cleaned up."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path

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

    monkeypatch.setattr(chunktune._atomic.os, "chmod", refused)
    target = tmp_path / "cache.json"
    write_atomic(target, b"new")
    assert target.read_bytes() == b"new"
