"""Shared fixtures: every test gets its own cache, sweep lock and working directory."""

from __future__ import annotations

import compileall
import importlib.util
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _clock import backend_options

from chunktune import _ray_api, _tracebacks, _unstored


def pytest_sessionstart(session: pytest.Session) -> None:
    """Write chunktune's bytecode once, before any test starts a child process.

    Hundreds of tests run ``python -c ...`` or ``python -m chunktune``, and each child
    imports the package. An editable install ships no bytecode, and where
    PYTHONDONTWRITEBYTECODE is set (as on the machines CI runs on) no import writes it, so
    every child compiled every module anew. Children still read bytecode that is there, and
    Python checks each file against its source, so what a test sees is unchanged. A tree
    that cannot be written is left as it is (compileall then reports failure, ignored).
    """
    spec = importlib.util.find_spec("chunktune")  # where it lies, without importing it
    for folder in (spec.submodule_search_locations or []) if spec else []:
        compileall.compile_dir(folder, quiet=2)


@pytest.fixture(autouse=True)
def isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Point the cache and the sweep lock into tmp_path and hide any chunktune.toml; no
    start of Ray's (init_local) that an earlier test failed is remembered, nor a decision
    an earlier test could not store (``_unstored``), nor a failure whose traceback an
    earlier test logged (``_tracebacks``)."""
    monkeypatch.setattr(_ray_api, "_start", None)
    _unstored.clear()
    _tracebacks.forget()
    monkeypatch.setenv("CHUNKTUNE_CACHE", str(tmp_path / "cache.json"))
    monkeypatch.setenv("CHUNKTUNE_SWEEP_LOCK", str(tmp_path / "sweep.lock"))
    monkeypatch.delenv("CHUNKTUNE_CONFIG", raising=False)
    monkeypatch.chdir(tmp_path)
    yield tmp_path


@pytest.fixture
def unusable_home(isolated: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """HOME and XDG_CACHE_HOME inside a regular file; no CHUNKTUNE_CACHE or _SWEEP_LOCK.

    Request it after any fixture that sets those two variables, so it has the last word.
    """
    home = isolated / "home"
    home.write_text("a file, not a directory")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CACHE_HOME", str(home / ".cache"))
    monkeypatch.delenv("CHUNKTUNE_CACHE")
    monkeypatch.delenv("CHUNKTUNE_SWEEP_LOCK")
    return home


@pytest.fixture(params=[pytest.param("asyncio", id="asyncio"), pytest.param("trio", id="trio")])
def anyio_backend(request: pytest.FixtureRequest) -> str | tuple[str, dict[str, Any]]:
    """Run every anyio test on asyncio and on trio; a test marked ``jumps`` on a loop whose
    clock it can move on (``_clock.jump``)."""
    if request.node.get_closest_marker("jumps") is not None:
        return backend_options(str(request.param))
    return str(request.param)
