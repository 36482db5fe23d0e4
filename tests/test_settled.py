"""A file's stat vouches for its bytes only once its last change is SETTLED_S old."""

from __future__ import annotations

import os
import time
from pathlib import Path

from chunktune._cache_file import same_file
from chunktune._settled import SETTLED_S, changed_lately, identity


def _with_device(st: os.stat_result, device: int) -> os.stat_result:
    """``st`` as another mount would give it: only the device differs."""
    fields: list[float] = list(st)
    fields[2] = device  # st_dev, in the order os.stat_result's sequence gives
    times = (st.st_atime, st.st_mtime, st.st_ctime, st.st_atime_ns, st.st_mtime_ns, st.st_ctime_ns)
    return os.stat_result([*fields, *times])


def test_a_file_of_one_inode_on_another_device_is_another_file(tmp_path: Path) -> None:
    """same_file tells apart stats that differ only by device, but not ones differing by ctime."""
    path = tmp_path / "cache.json"
    path.write_text("{}")
    st = os.stat(path)
    here = identity(st)
    assert not same_file(here, identity(_with_device(st, st.st_dev + 1)))
    assert same_file(here, (*here[:3], here[3] + 1, here[4]))


def test_a_change_exactly_settled_s_ago_has_settled() -> None:
    """A change less than SETTLED_S before the look is recent; one SETTLED_S before is not."""
    settled_ns = int(SETTLED_S * 1e9)
    assert changed_lately(0, 0, settled_ns - 1)
    assert not changed_lately(0, 0, settled_ns)


def test_the_later_of_mtime_and_ctime_dates_the_last_change(tmp_path: Path) -> None:
    """An mtime set back an hour (os.utime) leaves the file changed lately: its ctime is now."""
    file = tmp_path / "f"
    file.write_bytes(b"x")
    hour_ago = time.time_ns() - 3600 * 10**9
    os.utime(file, ns=(hour_ago, hour_ago))
    now = time.time_ns()
    st = file.stat()
    assert st.st_mtime_ns == hour_ago
    assert changed_lately(st.st_mtime_ns, st.st_ctime_ns, now)
    assert changed_lately(0, now, now) and changed_lately(now, 0, now)


def test_files_on_two_devices_sharing_an_inode_and_stamps_are_told_apart(tmp_path: Path) -> None:
    """identity holds the device: the same inode, size and stamps on another mount differ."""
    file = tmp_path / "f"
    file.write_bytes(b"x")
    st = file.stat()
    other = _with_device(st, st.st_dev + 1)
    assert (other.st_ino, other.st_size, other.st_mtime_ns) == (st.st_ino, 1, st.st_mtime_ns)
    assert identity(st) == identity(file.stat())
    assert identity(other) != identity(st)
