"""Values handed over untyped, as a TOML table or a caller without type hints hands them."""

from __future__ import annotations

from typing import Any


def untyped(value: object) -> Any:
    """``value`` itself, typed as ``Any``: for a test that gives a wrong type on purpose to
    check the run-time check that refuses it, which a type checker would otherwise reject."""
    return value
