"""A resolve made while Python shuts down: native at once, nothing measured, nothing raised."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from _teardown import at_teardown, run_at_teardown

# Resolves from where argv[1] says (see _teardown), writing each decision (or what it
# raised) as a JSON line to fd 1 with os.write: print() and logging may be gone by then.
_AT_EXIT = at_teardown(
    """\
import atexit, json, os, sys, weakref
import chunktune

class Counted:
    num_envs, nthread = 64, 2
    calls = 0
    def signature(self):
        return {"test": "shutdown"}
    def run(self, chunk_size):
        Counted.calls += 1
        return 0.001

def resolve(**kw):
    w = Counted()
    try:
        d = chunktune.resolve_sync(w, policy="quick", **kw)
        said = {"source": d.source, "chunk": d.chunk_size, "reason": d.reason,
                "calls": w.calls, "finalizing": sys.is_finalizing()}
    except BaseException as exc:
        said = {"raised": type(exc).__name__ + ": " + str(exc)}
    os.write(1, (json.dumps(said) + "\\n").encode())
""",
    "manual",
)


def _resolved_at_exit(tmp_path: Path, where: str) -> tuple[dict[str, object], str]:
    """The decision the _AT_EXIT script printed for ``where``, and its stderr."""
    env = {**os.environ, "CHUNKTUNE_CACHE": str(tmp_path / "c.json")}
    return run_at_teardown(_AT_EXIT, where, env)


@pytest.mark.parametrize(
    "where",
    [pytest.param("del", id="__del__"), pytest.param("weakref", id="weakref-callback")],
)
def test_a_resolve_while_python_shuts_down_gives_native_at_once_and_says_why(
    tmp_path: Path, where: str
) -> None:
    """Resolving as modules are torn down: native, no run(), 'Python is shutting down', no log."""
    # it once blamed "a bug in chunktune" for the import system being gone, and logged a
    # traceback (3.11), or raised that ImportError into the trainer (3.13)
    said, stderr = _resolved_at_exit(tmp_path, where)
    assert said == {
        "source": "fallback",
        "chunk": None,
        "reason": "kept the native chunk 3: Python is shutting down, so nothing was "
        "measured; nothing was cached",
        "calls": 0,
        "finalizing": True,
    }
    assert stderr == ""
    assert not (tmp_path / "c.json").exists()


def test_a_manual_size_asked_for_while_python_shuts_down_is_answered() -> None:
    """A manual size asked for as modules are torn down is that size, unreported."""
    said, stderr = _resolved_at_exit(Path.cwd(), "manual")
    assert (said["source"], said["chunk"], said["calls"]) == ("manual", 5, 0)
    assert stderr == ""


def test_a_resolve_in_an_atexit_handler_still_measures(tmp_path: Path) -> None:
    """An atexit handler runs before Python finalizes: its resolve measures as ever."""
    said, _ = _resolved_at_exit(tmp_path, "atexit")
    assert said["source"] == "benchmark" and said["finalizing"] is False
    assert isinstance(said["calls"], int) and said["calls"] > 0


# A resolve in an exit handler that runs after chunktune's (registered before the process's
# first sweep, so run after it): chunktune's has waited for the probes in flight, and no
# probe starts after it.
_LATE_AT_EXIT = """
import atexit, json, os
import chunktune

class Modeled:
    num_envs, nthread = 64, 2
    def signature(self):
        return {"test": "late at exit"}
    def run(self, chunk_size):
        return 0.001

def late():
    d = chunktune.resolve_sync(Modeled(), policy="quick", refresh=True)
    os.write(1, (json.dumps([d.source, d.reason]) + "\\n").encode())

atexit.register(late)
chunktune.resolve_sync(Modeled(), policy="quick")
"""


def test_a_resolve_in_an_exit_handler_run_after_chunktunes_measures_nothing(
    tmp_path: Path,
) -> None:
    """An exit handler run after chunktune's gets native, the reason naming Python's exit."""
    env = {**os.environ, "CHUNKTUNE_CACHE": str(tmp_path / "c.json")}
    done = subprocess.run(  # the timeout is a hang guard, not a timing
        [sys.executable, "-c", _LATE_AT_EXIT], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    source, reason = json.loads(done.stdout)
    assert source == "fallback"
    assert "Python is exiting: the sweep starts no probe any more" in reason
