"""``chunktune check`` whose native entry cannot be written: the verdict is told all the same."""

from __future__ import annotations

import json
from pathlib import Path
from typing import NoReturn

import pytest
from test_cli_check import QUICK, SHAPE, _Modeled, _serve, _tuned, env

from chunktune._cache import DecisionCache
from chunktune._cli import main
from chunktune._errors import CacheError

__all__ = ["env"]  # the fixture, used by name


def _disk_full(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every swap fails as a full disk makes it fail."""

    def swap(self: DecisionCache, *args: object, **kwargs: object) -> NoReturn:
        raise CacheError(f"cannot write the cache {self.path}: No space left on device")

    monkeypatch.setattr(DecisionCache, "swap", swap)


def test_a_verdict_that_cannot_be_written_is_told_then_exit_2(
    env: dict[str, Path], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Native unwritable: the report, "does not hold", why nothing was written (stderr too); 2."""
    _tuned(env, monkeypatch, capsys)
    before = env["cache"].read_bytes()
    _serve(monkeypatch, _Modeled(-0.01))
    _disk_full(monkeypatch)
    assert main(["check", *SHAPE, *QUICK]) == 2
    out, err = capsys.readouterr()
    assert err.splitlines()[-1].startswith("chunktune: error: not written: cannot write the cache")
    assert "does not hold: not measurably faster than native" in out.splitlines()
    last = out.splitlines()[-1]
    assert last.startswith("not written: cannot write the cache ")
    assert last.endswith(": No space left on device")
    assert env["cache"].read_bytes() == before


def test_json_prints_a_verdict_that_cannot_be_written_and_says_why_on_stderr(
    env: dict[str, Path], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """--json: the object (written false) on stdout, the write's failure on stderr; exit 2."""
    decision = _tuned(env, monkeypatch, capsys)
    _serve(monkeypatch, _Modeled(-0.01))
    _disk_full(monkeypatch)
    assert main(["check", *SHAPE, *QUICK, "--json"]) == 2
    out, err = capsys.readouterr()
    result = json.loads(out)
    assert (result["verdict"], result["written"]) == ("does not hold", False)
    assert result["key"] == decision["key"]
    assert len(err.splitlines()) == 1
    assert "not written: cannot write the cache" in err and "No space left on device" in err
