"""``chunktune check`` of an entry the read-only system cache answered.

The system file is never written: native goes to the user's cache, which answers before
it, and the lines say so rather than "replaces it in the cache".
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import attrs
import pytest
from test_cli_check import QUICK, SHAPE, _Modeled, _serve, _tuned, env

from chunktune._cache import DecisionCache
from chunktune._cli import main
from chunktune._load import MachineLoad

__all__ = ["env"]  # the fixture, used by name


def _system(env: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The tuned cache moved to be the system cache: the user's cache is then empty."""
    system = tmp_path / "system" / "decisions.json"
    system.parent.mkdir()
    shutil.move(env["cache"], system)
    monkeypatch.setenv("CHUNKTUNE_SYSTEM_CACHE", str(system))
    return system


def test_a_system_entry_that_does_not_hold_gets_native_in_the_users_cache(
    env: dict[str, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A system entry that does not hold: native in the user's cache, the system file as it was."""
    # the lines name the system cache's entry and where native went; later runs get native
    decision = _tuned(env, monkeypatch, capsys)
    system = _system(env, tmp_path, monkeypatch)
    before = system.read_bytes()
    _serve(monkeypatch, _Modeled(-0.01))
    assert main(["check", *SHAPE, *QUICK]) == 0
    out = capsys.readouterr().out
    assert f"cache key {decision['key']} (the read-only system cache's entry)" in out
    assert "does not hold: not measurably faster than native" in out
    assert "which answers before the read-only system cache" in out
    assert "the system cache's entry is left as it is" in out
    assert "replaces it" not in out
    assert system.read_bytes() == before
    native = DecisionCache(env["cache"]).entries()[decision["key"]]
    assert native.chunk_size is None
    assert main(["tune", *SHAPE, "--json", "-q"]) == 0
    again = json.loads(capsys.readouterr().out)
    assert (again["source"], again["chunk_size"]) == ("cache", None)


def test_a_dry_run_of_a_system_entry_says_where_native_would_go(
    env: dict[str, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """--dry-run over a system entry: nothing written; native would go to the user's cache."""
    # the line says so, not that native would replace the entry
    _tuned(env, monkeypatch, capsys)
    system = _system(env, tmp_path, monkeypatch)
    before = system.read_bytes()
    _serve(monkeypatch, _Modeled(-0.01))
    assert main(["check", *SHAPE, *QUICK, "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "dry run: nothing written (native would be cached in" in out
    assert "which answers before the read-only system cache)" in out
    assert system.read_bytes() == before
    assert not env["cache"].exists() or not DecisionCache(env["cache"]).entries()


def test_a_system_entry_that_holds_is_kept_and_nothing_is_written(
    env: dict[str, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A system entry that still beats native: "holds", nothing written to either cache."""
    _tuned(env, monkeypatch, capsys)
    system = _system(env, tmp_path, monkeypatch)
    before = system.read_bytes()
    _serve(monkeypatch, _Modeled(0.2))
    assert main(["check", *SHAPE, *QUICK]) == 0
    out = capsys.readouterr().out
    assert "holds: still measurably faster than native" in out.splitlines()
    assert system.read_bytes() == before
    assert not env["cache"].exists() or not DecisionCache(env["cache"]).entries()


def test_a_system_entry_answering_past_a_users_busy_one_is_named_the_systems(
    env: dict[str, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The user's entry under the key measured busy, the machine calm: the system's answers."""
    # the user's entry is there but serves nothing now, so the lines name the system
    # cache's entry as what was checked and say where native went
    decision = _tuned(env, monkeypatch, capsys)
    system = _system(env, tmp_path, monkeypatch)
    ((key, entry),) = DecisionCache(system).entries().items()
    # the system's measured at no recorded load (the tune's own may have been busy): it serves
    assert DecisionCache(system).update({key: attrs.evolve(entry, load=None)})
    busy = attrs.evolve(entry, chunk_size=4, load=MachineLoad(average=4.0, cpus=2))
    assert DecisionCache(env["cache"]).update({key: busy})
    monkeypatch.setattr(os, "getloadavg", lambda: (0.0, 0.0, 0.0))  # calm now
    _serve(monkeypatch, _Modeled(-0.01))
    assert main(["check", *SHAPE, *QUICK]) == 0
    out = capsys.readouterr().out
    chunk = decision["chunk_size"]
    assert f"cached: chunk {chunk} (native 3); cache key {key} (the read-only system " in out
    assert "which answers before the read-only system cache" in out
    assert "replaces it" not in out
    assert DecisionCache(env["cache"]).entries()[key].chunk_size is None
