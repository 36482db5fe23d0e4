"""The older tuner's cache variables: warned of once a process, from the process's start."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

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
