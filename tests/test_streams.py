"""stdout and stderr while a command runs (`_cli._streams`): a stderr no one reads is dropped."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys

from chunktune._cli._streams import Stderr


def test_a_dropped_stderr_is_dev_null_to_a_child_that_inherits_its_descriptor() -> None:
    """Once stderr's reader is gone, its descriptor is /dev/null: a child writing there succeeds."""
    read, write = os.pipe()
    os.close(read)  # the reader is gone (`2>&1 | head -0`): every write gets EPIPE
    stream = open(write, "w")  # noqa: SIM115
    try:
        dropped = Stderr(stream)
        dropped.write("chunktune: a line no one reads\n")
        dropped.flush()  # fails on the closed pipe: what follows is dropped
        child = subprocess.run(
            [sys.executable, "-c", "import os; os.write(2, b'x')"], stderr=write, timeout=60
        )
    finally:
        with contextlib.suppress(OSError):  # still the pipe, had it not been dropped
            stream.close()
    assert dropped.dropped
    assert child.returncode == 0  # 1 (BrokenPipeError) had descriptor 2 stayed the pipe
