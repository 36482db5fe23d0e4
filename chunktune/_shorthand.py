"""A policy's ``candidates`` written as a value: the table each shorthand stands for.

``candidates = [3, 7, 11]`` is the ``explicit`` strategy with those sizes, and
``candidates = "geometric"`` that strategy with its defaults, as a user writes them who
has not met the ``[policies.NAME.candidates]`` table. Each becomes that table before
anything else reads the file, so the Policy, its cache key, its problems (a bad size in
the list is told as in the table) and the warnings about idle keys are the table's. A
value that stands for no table (a number, a misspelled name) is left for the converter
to refuse (``_converter``), saying what was meant.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import attrs

from ._candidates import STRATEGIES

if TYPE_CHECKING:  # attrs has it from 22.2; the floor is 21.3
    from attrs import AttrsInstance

__all__ = ["expand_candidates"]


def _table(value: object) -> object:
    """The ``[candidates]`` table a shorthand stands for, or ``value`` itself."""
    if isinstance(value, list):
        return {"strategy": "explicit", "sizes": value}
    if isinstance(value, str) and value in STRATEGIES and value != "explicit":
        # every default spelled out: the shorthand replaces an inherited table of the same
        # strategy whole ("that strategy, as shipped"), where a table would change only
        # the keys it gives (shared's min_chunks_per_thread kept under "balanced")
        shipped: Callable[[], AttrsInstance] = STRATEGIES[value]  # not explicit: no sizes needed
        return {"strategy": value, **attrs.asdict(shipped(), recurse=False)}
    return value


def expand_candidates(user: Mapping[str, Any]) -> dict[str, Any]:
    """The user's policy tables with each ``candidates`` shorthand written as its table."""
    expanded: dict[str, Any] = {}
    for name, table in user.items():
        if isinstance(table, Mapping) and "candidates" in table:
            table = {**table, "candidates": _table(table["candidates"])}
        expanded[name] = table
    return expanded
