"""What settings discovery parses, counted, for the tests of settings kept between resolves;
and a settings file whose read never ends."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

import chunktune
from chunktune import _discovered


def counted_loads(monkeypatch: pytest.MonkeyPatch) -> list[chunktune.Settings]:
    """Every Settings that discovery parses from now on, in order."""
    parsed: list[chunktune.Settings] = []
    real = _discovered.load_discovered

    def counting(file: Path | None, variables: Mapping[str, str | None]) -> chunktune.Settings:
        parsed.append(real(file, variables))
        return parsed[-1]

    monkeypatch.setattr(_discovered, "load_discovered", counting)
    return parsed


@contextlib.contextmanager
def silent_settings_file(folder: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """``$CHUNKTUNE_CONFIG`` names a named pipe nobody writes: reading it blocks, as a
    settings file on a stalled file system does. At the end a reader left waiting is let
    go (it reads an empty file), so no thread of this process waits on it for ever."""
    fifo = folder / "silent.toml"
    os.mkfifo(fifo)
    monkeypatch.setenv("CHUNKTUNE_CONFIG", str(fifo))
    try:
        yield fifo
    finally:
        with contextlib.suppress(OSError):  # ENXIO: no reader is waiting
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
