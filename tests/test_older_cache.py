"""The older tuner's cache variables: warned of once a process, from the process's start."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

import chunktune
from chunktune import _older_cache
from chunktune._older_cache import OLDER_CACHE_VARIABLES

# a fresh process: what it says depends on no state an earlier test left in this one
_WARN_TWICE = """
import logging
import chunktune
from chunktune._older_cache import warn_of_older_cache
logging.basicConfig(format="%(message)s")
settings = chunktune.load_settings()
warn_of_older_cache(settings)
warn_of_older_cache(settings)
"""


def _run(isolated: Path, variables: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """_WARN_TWICE in a new process caching in its default file, with ``variables`` set."""
    env = {
        k: v for k, v in os.environ.items() if k not in {"CHUNKTUNE_CACHE", *OLDER_CACHE_VARIABLES}
    }
    env |= {
        **variables,
        "HOME": str(isolated / "home"),
        "XDG_CACHE_HOME": str(isolated / "xdg"),
        "XDG_CONFIG_HOME": str(isolated / "config"),
    }
    return subprocess.run(
        [sys.executable, "-c", _WARN_TWICE],
        cwd=isolated,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.mark.parametrize("variable", OLDER_CACHE_VARIABLES)
def test_a_fresh_process_warns_of_the_older_variable_once(isolated: Path, variable: str) -> None:
    """A new process whose settings cache in the default file warns at its first call, once."""
    older = isolated / "unisim" / "chunk_size.json"
    done = _run(isolated, {variable: str(older)})
    assert done.returncode == 0, done.stderr
    said = [line for line in done.stderr.splitlines() if "older tuner's cache" in line]
    assert len(said) == 1, done.stderr
    assert f"${variable}" in said[0] and str(older) in said[0]
    assert str(isolated / "xdg" / "chunktune" / "cache.json") in said[0]


def test_a_process_without_the_older_variables_says_nothing_of_them(isolated: Path) -> None:
    """Neither variable set (or one set empty): the check says nothing and raises nothing."""
    done = _run(isolated, {OLDER_CACHE_VARIABLES[1]: ""})
    assert done.returncode == 0 and done.stderr == ""


class _CountedLock:
    """A real lock that counts the threads that have come to take it."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.arrived = threading.Semaphore(0)

    def __enter__(self) -> bool:
        self.arrived.release()
        return self.lock.acquire()

    def __exit__(self, *exc: object) -> None:
        self.lock.release()


def test_two_threads_that_both_find_nothing_warned_yet_warn_once(
    isolated: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Two threads past the first look at once: the one that takes the lock second says nothing."""
    monkeypatch.delenv("CHUNKTUNE_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(isolated / "xdg"))
    monkeypatch.setenv(OLDER_CACHE_VARIABLES[0], str(isolated / "older.json"))
    monkeypatch.setattr(_older_cache, "_warned", False)
    counted = _CountedLock()
    monkeypatch.setattr(_older_cache, "_lock", counted)
    settings = chunktune.load_settings()
    threads = [
        threading.Thread(target=_older_cache.warn_of_older_cache, args=(settings,))
        for _ in range(2)
    ]
    with caplog.at_level(logging.WARNING, logger="chunktune"):
        with counted.lock:  # both threads come to the lock while it is held
            for thread in threads:
                thread.start()
            for _ in threads:
                assert counted.arrived.acquire(timeout=30)
        for thread in threads:
            thread.join(timeout=30)
    said = [r for r in caplog.records if "older tuner's cache" in r.getMessage()]
    assert len(said) == 1 and not any(thread.is_alive() for thread in threads)


def test_the_older_variables_value_is_warned_of_on_one_escaped_line(
    isolated: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A value holding a newline and an ANSI escape is named escaped, on one line, both times."""
    monkeypatch.delenv("CHUNKTUNE_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(isolated / "xdg"))
    monkeypatch.setenv(OLDER_CACHE_VARIABLES[0], "/old/a\n\x1b[31mred.json")
    monkeypatch.setattr(_older_cache, "_warned", False)
    with caplog.at_level(logging.WARNING, logger="chunktune"):
        _older_cache.warn_of_older_cache(chunktune.load_settings())
    (said,) = [r.getMessage() for r in caplog.records if "older tuner's cache" in r.getMessage()]
    assert "\n" not in said and "\x1b" not in said, said
    assert said.count('"/old/a\\n\\u001B[31mred.json"') == 2, said
