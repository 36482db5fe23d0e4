"""A folder no file can be made in, for tests of outputs that are checked before work."""

from __future__ import annotations

import os
from pathlib import Path

import pytest


def unwritable_folder(tmp_path: Path) -> Path:
    """A folder under ``tmp_path`` that refuses new files, or ``/proc`` where the user is
    root (who writes anywhere the mode says not to); the test is skipped if neither is."""
    place = tmp_path / "read-only"
    place.mkdir(mode=0o500)
    if os.access(place, os.W_OK):  # root writes anywhere it may; /proc takes no new file
        place = Path("/proc")
        if not place.is_dir():
            pytest.skip("no directory here refuses new files to this user")
    return place
