"""The machine to one command: the sweep lock held for its measurements, and its wait said."""

from __future__ import annotations

from pathlib import Path

import pytest
from _holders import holding

from chunktune._cli._machine import machine_to_ourselves
from chunktune._shown import shown_file, unprinted


def test_the_wait_for_another_sweep_names_an_odd_lock_file_escaped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The line saying whom a command waits for quotes the lock's newline and escape sequence."""
    lock = tmp_path / "sweep\n\x1b[31m.lock"
    monkeypatch.setenv("CHUNKTUNE_SWEEP_LOCK", str(lock))
    with holding(lock), machine_to_ourselves(wait_s=0.0) as held:
        assert not held
    err = capsys.readouterr().err
    assert unprinted(err.rstrip("\n")) is None, err
    assert f"; lock {shown_file(lock)})" in err
