"""Whole cache files read and written as they are (export, import, merge): formats, FIFOs,
links, and the errors that name the file."""

from __future__ import annotations

import errno
import io
import json
import os
import re
import time
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO

import pytest
from _full_entry import entry

from chunktune import CacheError, DecisionCache, _cache_transfer
from chunktune._cache_transfer import read_cache_stream, write_cache_file


@pytest.mark.parametrize(
    ("content", "message"),
    [
        pytest.param(b"{", "does not parse", id="garbage"),
        pytest.param(b'{"schema": 99, "entries": {}}', "newer", id="newer"),
        pytest.param(b'{"hello": 1}', "neither", id="foreign"),
    ],
)
def test_read_cache_file_rejects_what_it_cannot_import(
    tmp_path: Path, content: bytes, message: str
) -> None:
    """Importing a file that is not a cache says why, as a CacheError."""
    from chunktune import CacheError
    from chunktune._cache_transfer import read_cache_file

    path = tmp_path / "x.json"
    path.write_bytes(content)
    with pytest.raises(CacheError, match=message):
        read_cache_file(path)


def test_write_then_read_cache_file_round_trips(tmp_path: Path) -> None:
    """write_cache_file and read_cache_file agree in both formats."""
    from chunktune._cache_transfer import read_cache_file, write_cache_file

    for name in ("x.json", "x.toml"):
        write_cache_file(tmp_path / name, {"k": entry()})
        got = read_cache_file(tmp_path / name)
        assert (set(got.entries), got.skipped, got.kind) == ({"k"}, (), "chunktune cache")


def test_export_into_a_fifo_writes_into_it(tmp_path: Path) -> None:
    """Writing a cache file to a FIFO (or /dev/stdout) writes into it, never replaces it."""
    import threading

    from chunktune._cache_transfer import write_cache_file

    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()))
    reader.start()
    write_cache_file(fifo, {"a" * 32: entry(4)}, format="json")
    reader.join(60)
    assert fifo.is_fifo()
    assert list(json.loads(got[0])["entries"]) == ["a" * 32]


def test_reading_a_cache_file_that_fails_names_the_file_and_why(tmp_path: Path) -> None:
    """A missing file says the OS's reason; a file that does not parse is named before its fault."""
    from chunktune._cache_transfer import read_cache_file

    missing = tmp_path / "missing.json"
    with pytest.raises(CacheError) as info:
        read_cache_file(missing)
    assert str(info.value) == f"cannot read {missing}: No such file or directory"
    garbage = tmp_path / "garbage.json"
    garbage.write_text("{not json")
    with pytest.raises(CacheError) as info:
        read_cache_file(garbage)
    assert str(info.value).startswith(f"{garbage} does not parse")


def test_writing_an_entry_toml_cannot_encode_is_a_cache_error(tmp_path: Path) -> None:
    """A reason holding a lone surrogate (an undecodable path) cannot be TOML: a CacheError."""
    path = tmp_path / "out.toml"
    with pytest.raises(CacheError, match=f"cannot write {path}: .*surrogates not allowed"):
        write_cache_file(path, {"a" * 32: entry(4, reason="bad \udc80 path")})
    assert not path.exists()


def test_writing_a_cache_file_in_the_format_asked_whatever_its_suffix(tmp_path: Path) -> None:
    """format= wins over the suffix: a .dat file asked as TOML is TOML, as JSON is JSON."""
    for fmt in ("toml", "json"):
        path = tmp_path / f"{fmt}.dat"
        write_cache_file(path, {"a" * 32: entry(4)}, format=fmt)
        cache = DecisionCache(path, format=fmt)
        assert cache.format == fmt and cache.entries() == {"a" * 32: entry(4)}
    assert tomllib.loads((tmp_path / "toml.dat").read_text())["entries"]


def test_writing_a_cache_file_through_a_link_writes_its_target(tmp_path: Path) -> None:
    """An export onto a symlink writes the file it names (folders made), and the link stays."""
    target = tmp_path / "volume" / "out.json"
    link = tmp_path / "out.json"
    link.symlink_to(target)  # dangling until written
    write_cache_file(link, {"a" * 32: entry(4)})
    assert link.is_symlink() and link.resolve() == target
    assert DecisionCache(target).entries() == {"a" * 32: entry(4)}


class _Unreadable(io.RawIOBase):
    """A stream whose every read fails as a broken device's does."""

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        raise OSError(errno.EIO, os.strerror(errno.EIO))


@pytest.mark.parametrize(
    ("stream", "said"),
    [
        pytest.param(lambda: io.BytesIO(b"{"), "the pipe from node7 does not parse as JSON: ",
                     id="no-json"),
        pytest.param(lambda: io.BytesIO(b'{"hello": 1}'),
                     "the pipe from node7 is neither a chunktune cache nor ", id="foreign"),
        pytest.param(_Unreadable, "cannot read the pipe from node7: Input/output error",
                     id="unreadable"),
        pytest.param(lambda: io.BytesIO(b" " * (2**20 + 1)),
                     "cannot read the pipe from node7: it holds more than 1 MiB; expected a ",
                     id="past-the-cap"),
    ],
)  # fmt: skip
def test_reading_a_cache_stream_that_fails_names_it_by_the_name_given(
    monkeypatch: pytest.MonkeyPatch, stream: Callable[[], BinaryIO], said: str
) -> None:
    """A stream that cannot be read, or holds no cache, is a CacheError naming its name=."""
    monkeypatch.setattr(_cache_transfer, "MAX_CACHE_BYTES", 2**20)  # 256 MiB of spaces, spared
    with pytest.raises(CacheError) as info:
        read_cache_stream(stream(), name="the pipe from node7")
    assert str(info.value).startswith(said), str(info.value)


def test_a_cache_stream_is_read_as_json_and_its_entries_dated_as_they_are_read() -> None:
    """A stream holds JSON whatever its name; an older tuner's entries are dated when read."""
    older = json.dumps({"k": {"chunk_size": 4, "native_chunk": 3}}).encode()
    before = time.time()
    parsed = read_cache_stream(io.BytesIO(older), name="x.toml")
    assert (parsed.kind, set(parsed.entries)) == ("older tuner's cache", {"legacy-k"})
    assert before <= parsed.entries["legacy-k"].created <= time.time()


def test_writing_a_cache_file_where_its_folder_cannot_be_made_is_a_cache_error(
    tmp_path: Path,
) -> None:
    """A file where the cache file's folder goes: a CacheError naming it, 'Not a directory'."""
    in_the_way = tmp_path / "volume"
    in_the_way.write_text("a file, not a folder")
    for path in (in_the_way / "out.json", in_the_way / "deeper" / "out.json"):
        # "File exists" would read as if the file being written were there
        with pytest.raises(CacheError, match=f"^cannot write {re.escape(str(path))}: Not a dir"):
            write_cache_file(path, {"a" * 32: entry(4)})
    assert in_the_way.read_text() == "a file, not a folder"
