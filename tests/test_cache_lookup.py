"""Which cached entry answers a request, where several other policies' entries could."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import attrs
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


class _Counted(dict):  # type: ignore[type-arg]
    """A parse's entries that count every walk over them (a scan, or a copy of them all)."""

    walks = 0

    def __iter__(self):  # type: ignore[no-untyped-def]
        _Counted.walks += 1
        return super().__iter__()

    def keys(self):  # type: ignore[no-untyped-def]
        _Counted.walks += 1
        return super().keys()

    def items(self):  # type: ignore[no-untyped-def]
        _Counted.walks += 1
        return super().items()

    def values(self):  # type: ignore[no-untyped-def]
        _Counted.walks += 1
        return super().values()


def _fleet() -> dict[str, Any]:
    """One job's entry under a stronger policy, among 50 other jobs' entries."""
    made = {f"{i:032x}.strong": entry(2, policy_rule="r", policy_effort=10) for i in range(50)}
    made["job.strong"] = entry(8, policy_rule="r", policy_effort=10)
    return made


def _wrapped(real: Any, wrap: Any) -> Any:
    """``CacheFile.parse`` with the entries it returns wrapped in ``wrap``, the rest kept."""

    def parse(self: Any, raw: bytes, *, mtime: float) -> Any:
        parsed = real(self, raw, mtime=mtime)
        return attrs.evolve(parsed, entries=wrap(parsed.entries))

    return parse


def test_lookups_of_an_unchanged_cache_walk_its_entries_once_not_per_hit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another policy's entry answers 5 hits; the parse's entries are walked once, not 5 times."""
    from chunktune import _settled
    from chunktune._cache_file import CacheFile

    monkeypatch.setattr(_settled, "SETTLED_S", 0.0)  # the file settled: its stat vouches
    real = CacheFile.parse
    monkeypatch.setattr(CacheFile, "parse", _wrapped(real, _Counted))
    # written by another object: this one parses the file (a writer keeps what it wrote)
    assert DecisionCache(tmp_path / "cache.json").update(_fleet())
    cache = DecisionCache(tmp_path / "cache.json")
    _Counted.walks = 0
    for _ in range(5):
        found = cache.lookup("job", policy_hash="quick", rule="r", effort=1)
        assert found is not None and found[0] == "job.strong"
    assert _Counted.walks == 1


def test_system_cache_lookups_of_an_unchanged_file_copy_and_walk_nothing_per_hit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """5 hits (own policy and another's) on a settled system cache: one walk, to index it."""
    from chunktune import _cache_layers, _settled
    from chunktune._cache_layers import SystemCache

    monkeypatch.setattr(_settled, "SETTLED_S", 0.0)
    real = getattr(_cache_layers, "parse_cache")  # noqa: B009 (imported there, not exported)

    def counted(*args: Any, **kwargs: Any) -> Any:
        parsed = real(*args, **kwargs)
        return attrs.evolve(parsed, entries=_Counted(parsed.entries))

    monkeypatch.setattr(_cache_layers, "parse_cache", counted)
    path = tmp_path / "system.json"
    assert DecisionCache(path).update(_fleet())
    system = SystemCache(path)
    _Counted.walks = 0
    for policy in ("strong", "quick", "strong", "quick", "quick"):
        found = system.lookup("job", policy_hash=policy, rule="r", effort=1)
        assert found is not None and found[0] == "job.strong"
    assert _Counted.walks == 1
    assert len(system.entries()) == 51  # entries() still hands out a copy of its own


@pytest.mark.parametrize(
    ("base", "wanted"),
    [
        pytest.param("job", "job.b", id="plain"),
        pytest.param("a.b", "a.b.c", id="dotted-base"),
        pytest.param("legacy-k", None, id="no-other-policy"),
        pytest.param("jo", None, id="a-prefix-is-no-job"),
    ],
)
def test_an_index_finds_what_a_walk_over_every_key_finds(base: str, wanted: str | None) -> None:
    """best_entry with a JobIndex answers as without one, dotted keys and prefixes included."""
    from chunktune._cache_lookup import JobIndex, best_entry

    made = {
        key: entry(4, policy_rule="r", policy_effort=effort)
        for key, effort in (("job.a", 5), ("job.b", 9), ("a.b.c", 7), ("a.bc", 8), ("legacy-k", 3))
    }
    index = JobIndex()
    for _ in range(2):  # made, then reused
        with_index = best_entry(made, base, policy_hash="x", rule="r", effort=1, index=index)
        assert with_index == best_entry(made, base, policy_hash="x", rule="r", effort=1)
        assert (with_index[0] if with_index else None) == wanted


class _Parse(dict):  # type: ignore[type-arg]
    """A parse's entries that a weak reference can follow (a plain dict's cannot)."""


def test_a_hit_lets_go_of_an_index_made_for_an_older_parse(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A write, then own-policy hits: the parse indexed before the write is freed, not kept."""
    import gc
    import weakref

    from chunktune import _settled
    from chunktune._cache_file import CacheFile

    monkeypatch.setattr(_settled, "SETTLED_S", 0.0)
    real = CacheFile.parse
    monkeypatch.setattr(CacheFile, "parse", _wrapped(real, _Parse))
    # written by another object: this one parses the file (a writer keeps what it wrote)
    assert DecisionCache(tmp_path / "cache.json").update(_fleet())
    cache = DecisionCache(tmp_path / "cache.json")
    found = cache.lookup("job", policy_hash="quick", rule="r", effort=1)  # indexes the parse
    assert found is not None and found[0] == "job.strong"
    indexed = weakref.ref(cache._load(fresh=False))
    assert cache.put("job.quick", entry(4, policy_rule="r", policy_effort=1))
    for _ in range(2):
        found = cache.lookup("job", policy_hash="quick", rule="r", effort=1)
        assert found is not None and found[0] == "job.quick"
    gc.collect()
    assert indexed() is None
