"""Which cached entry answers a request, where several other policies' entries could."""

from __future__ import annotations

from pathlib import Path

import pytest
from _cache_cli import entry

from chunktune import DecisionCache


@pytest.mark.parametrize("order", [["a", "b"], ["b", "a"]], ids=["a-first", "b-first"])
def test_other_policies_of_equal_effort_answer_by_their_key_however_stored(
    tmp_path: Path, order: list[str]
) -> None:
    """Two other policies' entries of the same rule and effort: the greater key answers, always."""
    cache = DecisionCache(tmp_path / "cache.json")
    made = {
        "a": entry(4, policy_hash="a", policy_rule="r", policy_effort=10),
        "b": entry(8, policy_hash="b", policy_rule="r", policy_effort=10),
    }
    assert cache.update({f"k.{name}": made[name] for name in order})
    found = cache.lookup("k", policy_hash="mine", rule="r", effort=10)
    assert found is not None and found[0] == "k.b" and found[1].chunk_size == 8
    refused = cache.lookup(
        "k", policy_hash="mine", rule="r", effort=10, serves=lambda e: e is not found[1]
    )
    assert refused is not None and refused[0] == "k.a"  # the next that may answer
