"""Property tests: any cache document gives valid entries or a quarantine, never a crash.

Valid caches with some entries damaged keep every valid entry, through a read and
through the next write; documents of any other shape are moved aside intact. Only
ChunktuneErrors ever leave the cache's API.
"""

from __future__ import annotations

import json
import math
import tempfile
from pathlib import Path
from typing import Any

import attrs
import tomli_w
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chunktune import CacheEntry, CacheError, DecisionCache
from chunktune._cache_entry import entry_to_table
from chunktune._cache_format import LeftAlone, UnusableCache, decode
from chunktune._cache_parse import parse_cache
from chunktune._cache_transfer import read_cache_file

N = 256
chunks = st.integers(1, N)
scalars = st.one_of(
    st.text(max_size=8),
    st.integers(-(2**40), 2**40),
    st.floats(allow_nan=False, allow_infinity=False),  # what a key can hold
    st.booleans(),
)
entries = st.builds(
    CacheEntry,
    chunk_size=st.none() | chunks,
    native_chunk=st.integers(0, N),
    reason=st.text(max_size=20),
    timings=st.dictionaries(st.none() | chunks, st.floats(1e-6, 10.0), max_size=4),
    samples=st.dictionaries(st.none() | chunks, st.integers(0, 100), max_size=4),
    raced_out=st.lists(chunks, max_size=3).map(tuple),
    policy=st.text(max_size=8),
    policy_effort=st.integers(0, 10_000),
    probe_seconds=st.floats(0.0, 1e6),
    partial=st.booleans(),
    created=st.floats(0.0, 4e9),
    num_envs=st.just(N),
    nthread=st.integers(0, 64),
    signature=st.dictionaries(st.text(max_size=6), scalars, max_size=4),
    device=st.dictionaries(st.text(max_size=6), scalars, max_size=3),
    host=st.text(max_size=8),
    model_file=st.none() | st.text(max_size=10),
)


def values(fmt: str) -> st.SearchStrategy[Any]:
    """Arbitrary JSON (with null and non-finite numbers) or TOML values."""
    leaves = st.one_of(
        st.booleans(),
        st.integers(-(2**70), 2**70),
        st.floats(allow_nan=fmt == "json"),
        st.text(max_size=6),
        *([st.none()] if fmt == "json" else []),
    )
    return st.recursive(
        leaves,
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner),
        max_leaves=6,
    )


@st.composite
def damaged(draw: st.DrawFn, fmt: str) -> Any:
    """A valid entry's table with one field replaced, deleted or added, or no table at all."""
    table = entry_to_table(draw(entries))
    how = draw(st.sampled_from(["replace", "delete", "add", "whole"]))
    if how == "whole":
        return draw(values(fmt))
    name = draw(st.sampled_from(sorted(table)))
    if how == "replace":
        table[name] = draw(values(fmt))
    elif how == "delete":
        del table[name]
    else:
        table[draw(st.text(min_size=1, max_size=6))] = draw(values(fmt))
    return table


def encode(doc: Any, fmt: str) -> bytes:
    if fmt == "toml":
        return tomli_w.dumps(doc).encode()
    return json.dumps(doc).encode()


def served_safely(entry: CacheEntry) -> bool:
    """What resolve would hand a trainer: a chunk size rollout accepts, finite evidence."""
    chunk = entry.chunk_size
    ok_chunk = chunk is None or (type(chunk) is int and 1 <= chunk <= (entry.num_envs or 2**31))
    return ok_chunk and all(math.isfinite(s) and s > 0 for s in entry.timings.values())


def same(a: CacheEntry, b: CacheEntry) -> bool:
    """Equal, timings to rounding (they are stored in milliseconds)."""
    times_equal = a.timings.keys() == b.timings.keys() and all(
        math.isclose(a.timings[k], b.timings[k], rel_tol=1e-12) for k in a.timings
    )
    return times_equal and attrs.evolve(a, timings={}) == attrs.evolve(b, timings={})


NEW = CacheEntry(chunk_size=2, native_chunk=1, reason="new")


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), fmt=st.sampled_from(["json", "toml"]))
def test_valid_entries_survive_damaged_neighbours(data: st.DataObject, fmt: str) -> None:
    """In a cache with damaged entries every valid one is served and survives the next write."""
    good = data.draw(st.dictionaries(st.text(min_size=1, max_size=8), entries, max_size=4))
    bad = data.draw(st.dictionaries(st.text(min_size=1, max_size=8), damaged(fmt), max_size=4))
    bad = {f"x{k}": v for k, v in bad.items() if f"x{k}" not in good}
    doc = {"schema": 1, "entries": {**{k: entry_to_table(e) for k, e in good.items()}, **bad}}
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"cache.{fmt}"
        path.write_bytes(encode(doc, fmt))
        cache = DecisionCache(path)
        served = cache.entries()
        assert not list(Path(tmp).glob("*.corrupt-*"))
        assert all(same(served[k], e) for k, e in good.items())
        assert all(served_safely(e) for e in served.values())
        assert cache.put("new", NEW)
        again = DecisionCache(path).entries()
        assert set(again) == set(served) | {"new"}
        assert all(same(again[k], e) for k, e in good.items() if k != "new")
        parsed = read_cache_file(path)
        assert parsed.skipped == () and set(parsed.entries) == set(again)


@st.composite
def hostile_bytes(draw: st.DrawFn, fmt: str) -> bytes:
    """A document of any shape, a valid one cut short or with bytes changed, or random bytes."""
    valid = {"schema": 1, "entries": {"k": entry_to_table(draw(entries))}}
    kind = draw(st.sampled_from(["any", "entries", "schema", "cut", "flip", "bytes", "deep"]))
    if kind == "any":
        doc = draw(values(fmt))
        if fmt == "toml" and not isinstance(doc, dict):
            doc = {"value": doc}
        return encode(doc, fmt)
    if kind in ("entries", "schema"):
        return encode({**valid, kind: draw(values(fmt))}, fmt)
    raw = encode(valid, fmt)
    if kind == "cut":
        return raw[: draw(st.integers(0, len(raw) - 1))]
    if kind == "flip":
        at = draw(st.integers(0, len(raw) - 1))
        return raw[:at] + bytes([draw(st.integers(0, 255))]) + raw[at + 1 :]
    if kind == "deep":
        depth = draw(st.integers(900, 6000))
        return (b"a = " if fmt == "toml" else b"") + b"[" * depth + b"]" * depth
    return draw(st.binary(max_size=200))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), fmt=st.sampled_from(["json", "toml"]))
def test_any_bytes_as_the_cache_give_entries_or_a_quarantine(data: st.DataObject, fmt: str) -> None:
    """Any bytes as the cache give valid entries, a quarantine or no write at all; never a crash."""
    # no write: a newer chunktune's schema, or another program's table, left as it is
    raw = data.draw(hostile_bytes(fmt))
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"cache.{fmt}"
        path.write_bytes(raw)
        left = False
        try:
            parsed = read_cache_file(path)
        except CacheError:
            parsed = None
            try:
                parse_cache(raw, fmt, mtime=0.0, source="")  # type: ignore[arg-type]
            except LeftAlone:
                left = True
            except UnusableCache:
                pass
        served = DecisionCache(path).entries()
        if left:
            assert served == {} and not DecisionCache(path).put("new", NEW)
            assert path.read_bytes() == raw and not list(Path(tmp).glob("*.corrupt-*"))
            return
        aside = list(Path(tmp).glob("*.corrupt-*"))
        if aside:
            assert parsed is None and served == {}
            assert aside[0].read_bytes() == raw and not path.exists()
        else:
            assert path.read_bytes() == raw
            assert all(served_safely(e) for e in served.values())
            if parsed is not None:
                assert set(parsed.entries) == set(served)
        assert DecisionCache(path).put("new", NEW)
        assert "new" in DecisionCache(path).entries()


def _loads(raw: bytes) -> Any:
    try:
        return json.loads(raw)
    except (ValueError, RecursionError) as exc:
        return type(exc)


@given(
    doc=st.dictionaries(
        st.sampled_from(["entries", "schema", "x"]) | st.text(max_size=4),
        values("json") | st.dictionaries(st.text(max_size=4), values("json")),
        max_size=4,
    ),
    indent=st.sampled_from([None, 0, 1, 2]),
    cut=st.none() | st.integers(0, 200),
)
def test_the_json_reader_reads_as_json_loads(doc: Any, indent: int | None, cut: int | None) -> None:
    """The cache's JSON reader (an entry at a time) gives json.loads's document or refusal."""
    raw = json.dumps(doc, indent=indent).encode()
    if cut is not None:  # a torn or damaged file
        raw = raw[:cut] + raw[cut + 1 :]
    expected = _loads(raw)
    try:
        got = decode(raw, "json")
    except UnusableCache:
        assert isinstance(expected, type)
    else:
        # NaN is not equal to itself: compare the documents' canonical text
        assert json.dumps(got, sort_keys=True) == json.dumps(expected, sort_keys=True)
