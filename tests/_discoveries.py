"""What settings discovery parses, counted, for the tests of settings kept between resolves."""

from __future__ import annotations

from collections.abc import Mapping
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
