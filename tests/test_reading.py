"""Files a user names are read whole but bounded: pipes are fine, endless devices are refused."""

from __future__ import annotations

import contextlib
import io
import os
import threading
import tracemalloc
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from chunktune import CacheError, ConfigError, TraceError, load_settings
from chunktune._cache_transfer import read_cache_file
from chunktune._reading import TooLarge, read_capped, read_capped_from
from chunktune._trace import load_trace

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


@pytest.mark.parametrize("kind", ["regular", "pipe"])
def test_a_file_of_exactly_the_cap_is_read_whole(tmp_path: Path, kind: str) -> None:
    """A file holding the cap's bytes, no more, is within the cap: it reads back whole."""
    data = b"x" * MIB
    if kind == "regular":
        (tmp_path / "full.json").write_bytes(data)
        assert read_capped(tmp_path / "full.json", MIB) == data
    else:
        with piped(data) as path:
            assert read_capped(path, MIB) == data


def _peak_bytes(read: Callable[[], object]) -> int:
    """The most memory Python held at once while ``read`` ran (an allocation count, not a time)."""
    tracemalloc.start()
    try:
        with contextlib.suppress(TooLarge):
            read()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_a_regular_file_past_the_cap_is_refused_before_it_is_read(tmp_path: Path) -> None:
    """Its size refuses a regular file past the cap: not a chunk of it is read into memory."""
    large = tmp_path / "large.json"
    large.write_bytes(b" " * (2 * MIB))
    assert _peak_bytes(lambda: read_capped(large, MIB)) < MIB // 4


def test_an_endless_device_costs_the_cap_and_a_chunk_of_memory() -> None:
    """Reading /dev/zero stops a chunk past the cap: memory holds about that much, not more."""
    assert _peak_bytes(lambda: read_capped(Path("/dev/zero"), MIB)) < 4 * MIB


@pytest.mark.parametrize(
    ("read", "error", "cap"),
    [
        pytest.param(load_settings, ConfigError, "16 MiB", id="settings"),
        pytest.param(load_trace, TraceError, "256 MiB", id="trace"),
        pytest.param(read_cache_file, CacheError, "256 MiB", id="cache"),
    ],
)
def test_each_kind_is_refused_one_byte_past_its_own_cap(
    tmp_path: Path, read: Callable[[Path], object], error: type[Exception], cap: str
) -> None:
    """Settings stop at 16 MiB, traces and caches at 256 MiB (a sparse file: nothing is read)."""
    size = int(cap.split()[0]) * MIB
    path = tmp_path / ("big.toml" if read is load_settings else "big.json")
    with path.open("wb") as f:
        f.truncate(size + 1)
    with pytest.raises(error, match=f"holds more than {cap}"):
        read(path)


@pytest.mark.parametrize("kind", ["regular", "pipe"])
def test_a_file_of_many_chunks_under_the_cap_is_read_whole_in_order(
    tmp_path: Path, kind: str
) -> None:
    """Bytes past the first chunk read come back too, each where it stood."""
    data = b"".join(bytes([n]) * MIB for n in range(3)) + b"tail"
    if kind == "regular":
        (tmp_path / "long.json").write_bytes(data)
        assert read_capped(tmp_path / "long.json", 4 * MIB) == data
    else:
        with piped(data) as path:
            assert read_capped(path, 4 * MIB) == data


def test_a_stream_without_a_descriptor_is_read_and_capped_as_a_pipe() -> None:
    """An in-memory stream (no descriptor) is read whole, or refused past the cap by its path."""
    assert read_capped_from(io.BytesIO(b"x" * MIB), MIB, Path("mem")) == b"x" * MIB
    with pytest.raises(TooLarge, match=r"^mem holds more than 1 MiB$"):
        read_capped_from(io.BytesIO(b"x" * (MIB + 1)), MIB, Path("mem"))
