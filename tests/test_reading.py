"""Files a user names are read whole but bounded: pipes are fine, endless devices are refused."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from chunktune._reading import TooLarge, read_capped

MIB = 2**20


@contextmanager
def piped(data: bytes) -> Iterator[Path]:
    """A pipe carrying ``data`` (as `<(...)` gives), named by its /dev/fd path."""
    read, write = os.pipe()

    def feed() -> None:
        try:
            with os.fdopen(write, "wb") as pipe:
                pipe.write(data)
        except BrokenPipeError:  # the reader stopped at the cap and let go of the pipe
            pass

    feeder = threading.Thread(target=feed)
    feeder.start()
    try:
        yield Path(f"/dev/fd/{read}")
    finally:
        os.close(read)
        feeder.join(10)


def test_a_pipe_under_the_cap_is_read_whole() -> None:
    """A pipe's bytes (no size known before reading) come back whole."""
    with piped(b'policy = "quick"\n') as path:
        assert read_capped(path, MIB) == b'policy = "quick"\n'


def test_a_pipe_past_the_cap_is_refused() -> None:
    """A pipe that carries more than the cap is refused, naming the path and the cap."""
    with piped(b" " * (2 * MIB)) as path, pytest.raises(TooLarge) as info:
        read_capped(path, MIB)
    assert str(info.value) == f"{path} holds more than 1 MiB"


def test_an_endless_device_is_refused_at_the_cap() -> None:
    """/dev/zero is read up to the cap and a chunk, not until memory runs out."""
    with pytest.raises(TooLarge, match="/dev/zero holds more than 1 MiB"):
        read_capped(Path("/dev/zero"), MIB)


def test_a_regular_file_past_the_cap_is_refused_by_its_size(tmp_path: Path) -> None:
    """A regular file larger than the cap is refused before a byte of it is read."""
    huge = tmp_path / "huge.json"
    with huge.open("wb") as f:
        f.truncate(64 * 2**30)  # sparse: 64 GiB that no disk holds, nor memory would
    with pytest.raises(TooLarge, match="holds more than 1 MiB"):
        read_capped(huge, MIB)
