"""The tests' lock holders in other processes: started, killed and read to the end cleanly."""

from __future__ import annotations

import fcntl
import os
import time
from pathlib import Path

import pytest
from _holders import held_by_async, holding_async

pytestmark = pytest.mark.anyio

# prints "held", then writes for as long as it lives: bytes are on their way at the kill
# (a line a millisecond: too little to fill the reader's buffer and pause its reading)
_CHATTY = (
    "import os, time\n"
    "os.write(1, b'held\\n')\n"
    "while True:\n"
    "    os.write(1, b'x\\n')\n"
    "    time.sleep(0.001)\n"
)


def _free(lock: Path) -> bool:
    """Whether this process gets ``lock`` at once (then lets it go)."""
    fd = os.open(lock, os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    finally:
        os.close(fd)
    return True


async def test_a_holder_still_writing_at_its_kill_leaves_the_loop_without_an_error() -> None:
    """The output a killed holder had on its way is read, not fed to a closed asyncio reader."""
    for _ in range(3):  # each close had bytes on their way: one would have failed the loop
        async with held_by_async(_CHATTY) as holder:
            assert holder.returncode is None
            time.sleep(0.05)  # noqa: ASYNC251 (the loop blocked, as by a sweep: lines wait unread)
        assert holder.returncode is not None


async def test_an_async_holder_holds_its_lock_until_the_block_ends(tmp_path: Path) -> None:
    """While the block runs the lock is another process's; once it ends, the lock is free."""
    lock = tmp_path / "held.lock"
    async with holding_async(lock):
        assert not _free(lock)
    assert _free(lock)  # the holder was reaped: its files are closed
