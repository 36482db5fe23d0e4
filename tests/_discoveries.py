"""What settings discovery parses, counted, for the tests of settings kept between resolves;
and settings files whose read never ends, or ends late."""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

import pytest

import chunktune
from chunktune import _discovered

Load = Callable[[Path | None, Mapping[str, str | None]], chunktune.Settings]


def discovery_loads() -> Load:
    """What discovery calls now to parse a settings file: ``load_discovered``, or the
    wrapper a test has put in its place (which a further wrapper must call in turn)."""
    load: Load = vars(_discovered)["load_discovered"]  # _discovered's own, not _config's
    return load


def counted_loads(monkeypatch: pytest.MonkeyPatch) -> list[chunktune.Settings]:
    """Every Settings that discovery parses from now on, in order."""
    parsed: list[chunktune.Settings] = []
    real = discovery_loads()

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


@contextlib.contextmanager
def late_settings_file(
    folder: Path, monkeypatch: pytest.MonkeyPatch, late_s: float
) -> Iterator[None]:
    """``$CHUNKTUNE_CONFIG`` names a named pipe that answers ``late_s`` seconds after it is
    opened for reading: a settings file on a slow file system."""
    fifo = folder / "late.toml"
    os.mkfifo(fifo)
    monkeypatch.setenv("CHUNKTUNE_CONFIG", str(fifo))

    def answer() -> None:
        with contextlib.suppress(OSError), open(fifo, "w") as out:  # a reader opened it
            time.sleep(late_s)
            out.write('policy = "quick"\n[log]\nstderr = "never"\n')

    writer = threading.Thread(target=answer, daemon=True)
    writer.start()
    try:
        yield
    finally:
        with contextlib.suppress(OSError):  # a writer still waiting for a reader is let go
            os.close(os.open(fifo, os.O_RDONLY | os.O_NONBLOCK))
        writer.join(30)  # a hang guard, not a timing
