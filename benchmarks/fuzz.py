"""Fuzz the settings loader and the cache reader with generated hostile files.

    python benchmarks/fuzz.py [--settings 10000] [--caches 10000] [--seed 0]

Settings files (mutations of a valid one: random bytes, truncation, flipped bytes,
deep nesting, wrong types, bad and huge values, odd unicode, bad cache paths, long
extends chains and cycles) go through ``load_settings`` and ``chunktune cache path
--config FILE``. Cache documents (valid caches with some entries damaged, and
documents of every wrong shape, in JSON and TOML) go through ``DecisionCache``
reads, lookups and a write, ``read_cache_file`` (what ``cache import`` uses) and
``chunktune cache list`` (in-process, output captured). Every outcome is counted;
any exception other than a ChunktuneError, any valid entry lost, any bad entry
served, any quarantine that does not keep the bytes, and any newer schema's file
not left as it is, is a failure. Prints the counts, the slowest case of each kind
and the wall time; exits 1 on any failure.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import logging
import math
import os
import random
import sys
import tempfile
import time
import traceback
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, NamedTuple

import attrs
import tomli_w

from chunktune import CacheEntry, ChunktuneError, ConfigError, DecisionCache, load_settings
from chunktune._cache_entry import check_entry, entry_to_table
from chunktune._cache_format import (
    CacheFormat,
    LeftAlone,
    NewerCache,
    UnusableCache,
    cache_format,
    encode,
)
from chunktune._cache_parse import parse_cache
from chunktune._cache_transfer import read_cache_file
from chunktune._cli import main

N = 256  # num_envs of every generated entry
SETTINGS_KINDS = (
    "valid",
    "random-bytes",
    "truncate",
    "flip-bytes",
    "wrong-type",
    "bad-value",
    "huge-number",
    "unicode",
    "deep-array",
    "deep-table",
    "deep-dotted",
    "extends-chain",
    "extends-cycle",
    "cache-path",
    "unknown-key",
)
CACHE_KINDS = (
    "valid",
    "edited",
    "damaged-entries",
    "random-bytes",
    "truncate",
    "flip-bytes",
    "deep-nesting",
    "wrong-shape",
    "wrong-schema",
    "huge-number",
    "unicode-keys",
    "legacy",
    "empty",
)
VALID_SETTINGS: dict[str, Any] = {
    "policy": "mine",
    "cache": {"path": "fuzz-cache.json", "format": "auto", "enabled": True},
    "log": {"stderr": "never"},
    "policies": {
        "mine": {
            "extends": "quick",
            "margin": 0.03,
            "tie_tol": 0.02,
            "time_budget_s": 10.0,
            "max_rounds": 8,
            "candidates": {"strategy": "explicit", "sizes": [3, 7, 11]},
        },
        "other": {"extends": "balanced", "hard_limit_s": 30.0},
    },
}
_HUGE = "huge-number-placeholder"
ODD_TEXT = ["", "\x00", "\u202e", "\U0001f600", "é" * 50, "\ud7ff", "a" * 5000, "\n\t\r", "~"]


@attrs.define
class Tally:
    """Outcome counts per kind, the slowest case of each kind, and the first failures."""

    counts: dict[str, Counter[str]] = attrs.field(factory=lambda: defaultdict(Counter))
    slowest: dict[str, float] = attrs.field(factory=lambda: defaultdict(float))
    failures: list[str] = attrs.field(factory=list)

    def add(self, kind: str, outcome: str, seconds: float, detail: str = "") -> None:
        self.counts[kind][outcome] += 1
        self.slowest[kind] = max(self.slowest[kind], seconds)
        if outcome.startswith("FAIL") and len(self.failures) < 20:
            self.failures.append(f"{kind}: {outcome}: {detail}")

    def total(self) -> Counter[str]:
        return sum(self.counts.values(), Counter())


# ---------------------------------------------------------------- generators


def random_value(rng: random.Random, depth: int = 0) -> Any:
    """Any JSON-ish value: scalars of every type, odd text, huge and non-finite numbers."""
    choice = rng.randrange(11 if depth < 3 else 8)
    if choice == 0:
        return rng.choice([True, False])
    if choice == 1:
        return rng.randint(-(10**6), 10**6)
    if choice == 2:
        return rng.choice([0, -1, -5, 10**9, 2**31, 2**63, 10**40])
    if choice == 3:
        return rng.uniform(-1e6, 1e6)
    if choice == 4:
        return rng.choice([0.0, -0.0, 1e300, -1e300, 5e-324, math.inf, -math.inf, math.nan])
    if choice == 5:
        return rng.choice(ODD_TEXT)
    if choice == 6:
        return rng.choice(["native", "5", "2.7", "true", "none", "None"])
    if choice == 7:
        return None
    if choice in (8, 9):
        return [random_value(rng, depth + 1) for _ in range(rng.randrange(4))]
    return {rng.choice([*ODD_TEXT[:6], "k", "x"]): random_value(rng, depth + 1) for _ in range(3)}


def nested(depth: int, fmt: str, leaf: str = "1") -> str:
    if fmt == "table":
        return "{a = " * depth + leaf + "}" * depth
    return "[" * depth + leaf + "]" * depth


def toml_safe(value: Any) -> Any:
    """``value`` with what TOML cannot carry (null, NaN, odd keys aside) replaced."""
    if value is None:
        return "null"
    if isinstance(value, list):
        return [toml_safe(v) for v in value]
    if isinstance(value, dict):
        return {str(k): toml_safe(v) for k, v in value.items()}
    return value


def _leaves(doc: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    if isinstance(doc, dict):
        return [p for k, v in doc.items() for p in _leaves(v, (*path, k))] or [path]
    return [path]


def _set(doc: Any, path: tuple[Any, ...], value: Any) -> None:
    for part in path[:-1]:
        doc = doc[part]
    doc[path[-1]] = value


def settings_file(rng: random.Random, kind: str) -> bytes:
    """One hostile settings file of ``kind``."""
    doc = json.loads(json.dumps(VALID_SETTINGS))
    valid = tomli_w.dumps(doc).encode()
    if kind == "random-bytes":
        return rng.randbytes(rng.randrange(1, 400))
    if kind == "truncate":
        return valid[: rng.randrange(len(valid))]
    if kind == "flip-bytes":
        raw = bytearray(valid)
        for _ in range(rng.randint(1, 5)):
            raw[rng.randrange(len(raw))] = rng.randrange(256)
        return bytes(raw)
    if kind in ("deep-array", "deep-table"):
        depth = rng.choice([5, 9, 50, 500, 990, 1000, 2000, 5000])
        where = rng.choice(["policy", "x", "policies.mine.candidates.sizes", "cache.path"])
        key, _, rest = where.rpartition(".")
        head = f"[{key}]\n" if key else ""
        return f"{head}{rest} = {nested(depth, kind[5:])}\n".encode()
    if kind == "deep-dotted":
        depth = rng.choice([9, 100, 1000, 3000])
        return ("[" + ".".join(["t"] * depth) + "]\nx = 1\n").encode()
    if kind == "extends-chain":
        n = rng.choice([2, 10, 100, 1000, 2000])
        lines = [f'policy = "p{n - 1}"', '[policies.p0]\nextends = "quick"']
        lines += [f'[policies.p{i}]\nextends = "p{i - 1}"' for i in range(1, n)]
        return "\n".join(lines).encode()
    if kind == "extends-cycle":
        n = rng.choice([1, 2, 3, 10, 500])
        lines = ['policy = "p0"'] + [
            f'[policies.p{i}]\nextends = "p{(i + 1) % n}"' for i in range(n)
        ]
        return "\n".join(lines).encode()
    if kind == "cache-path":
        bad = rng.choice(["", "\x00x.json", "~nosuchuser-fuzz/c.json", "a" * 5000, "/proc/x/c"])
        doc["cache"]["path"] = bad
    elif kind == "unknown-key":
        _set(doc, (*rng.choice(_leaves(doc))[:-1], "margn"), 0.1)
    elif kind in ("wrong-type", "bad-value", "huge-number", "unicode"):
        for _ in range(rng.randint(1, 3)):
            path = rng.choice(_leaves(doc))
            if kind == "wrong-type":
                value = random_value(rng)
            elif kind == "bad-value":
                value = rng.choice([-1, 0, 1.5, -0.1, 1e308, 2**63, "", "nope"])
            elif kind == "huge-number":
                value = rng.choice([_HUGE, 1e308, -1e308, 2**64])
            else:
                value = rng.choice(ODD_TEXT)
            _set(doc, path, value)
    text = tomli_w.dumps(toml_safe(doc))
    # Python will not even print an int of more than 4300 digits: write it as text
    return text.replace(f'"{_HUGE}"', "9" * rng.choice([20, 400, 4300, 5000, 20000])).encode()


def valid_entry(rng: random.Random) -> CacheEntry:
    sizes = rng.sample(range(1, N + 1), rng.randint(0, 5))
    entry = CacheEntry(
        chunk_size=rng.choice([None, *sizes]) if sizes else None,
        native_chunk=rng.randint(1, N),
        reason=rng.choice(["kept native", "chunk 8 is 4% faster", "é\U0001f600"]),
        timings={c: rng.uniform(1e-4, 1.0) for c in [None, *sizes]},
        samples={c: rng.randint(0, 50) for c in [None, *sizes]},
        raced_out=tuple(sizes[:1]),
        policy=rng.choice(["balanced", "quick", "thorough"]),
        policy_hash=f"{rng.getrandbits(48):012x}",
        policy_rule="margin=0.03;tie_break=center;z=1.5",
        policy_effort=rng.randint(0, 5000),
        probe_seconds=rng.uniform(0, 60),
        partial=rng.random() < 0.2,
        created=rng.uniform(1.6e9, 1.8e9),
        num_envs=N,
        nthread=rng.randint(1, 64),
        signature={"kind": "simulated", "name": f"w{rng.randrange(99)}", "x": rng.random()},
        device={"cpu": "fuzz", "logical_cpus": 2},
        host="fuzz",
        model_file=rng.choice([None, "/m/robot.xml"]),
    )
    check_entry(entry)  # the generator itself must make valid entries
    return entry


def damage(rng: random.Random, table: dict[str, Any], fmt: str) -> Any:
    """A stored table with one field broken: wrong type, bad value, missing, deep, or no table."""
    how = rng.randrange(6)
    name = rng.choice(sorted(table))
    table = dict(table)
    if how == 0:
        return random_value(rng)
    if how == 1:
        del table[name]
    elif how == 2:
        table["chunk_size"] = rng.choice([0, -5, 2.7, "5", 10**9, True, math.inf, 8.0, [8]])
    elif how == 3:
        table[name] = rng.choice([math.nan, -1, 1e300, -(10**30), "", None, {}, []])
    elif how == 4:
        depth = rng.choice([10, 300 if fmt == "json" else 100])  # tomli_w recurses 3 frames a level
        table["signature"] = {"deep": json.loads(nested(depth, "array"))}
    else:
        table[name] = random_value(rng)
    return table


def as_damaged(rng: random.Random, raw: bytes) -> bytes:
    """A file as chunktune wrote it, cut at a line's end or one digit or letter changed."""
    if rng.random() < 0.5:
        ends = [i + 1 for i, byte in enumerate(raw) if byte == ord("\n")]
        return raw[: rng.choice(ends[1:-1] or ends)]
    spots = [i for i, byte in enumerate(raw) if chr(byte).isalnum()]
    at = rng.choice(spots)
    old = chr(raw[at])
    new = rng.choice([c for c in "0123456789abcdefxyz" if c != old])
    return raw[:at] + new.encode() + raw[at + 1 :]


class Document(NamedTuple):
    """A generated cache file: its bytes, the entries it must keep, and (for ``edited``)
    the entries chunktune wrote, the only ones it may serve and only as written."""

    raw: bytes
    promise: dict[str, CacheEntry]
    originals: dict[str, CacheEntry] | None = None


def cache_document(rng: random.Random, kind: str, fmt: CacheFormat) -> Document:
    """One cache document of ``kind`` and the valid entries it must keep (empty: no promise)."""
    good = {f"{rng.getrandbits(64):016x}.{i}": valid_entry(rng) for i in range(rng.randint(1, 8))}
    if kind == "edited":
        return Document(as_damaged(rng, encode(good, fmt)), {}, good)
    tables: dict[str, Any] = {k: entry_to_table(e) for k, e in good.items()}
    promise = dict(good)
    if kind == "damaged-entries":
        for i in range(rng.randint(1, 4)):
            victim = rng.choice(list(good))
            tables[f"bad{i}"] = damage(rng, tables[victim], fmt)
    elif kind == "unicode-keys":
        tables = {f"{k}{rng.choice(ODD_TEXT[1:6])}": t for k, t in tables.items()}
        promise = {f"{k}": e for k, e in zip(tables, good.values(), strict=True)}
    doc: Any = {"schema": 1, "entries": tables}
    if kind == "wrong-shape":
        doc = rng.choice(
            [
                {"schema": 1, "entries": random_value(rng)},
                [doc],
                random_value(rng),
                {"schema": 1, "entries": {"k": random_value(rng)}, "x": 1},
            ]
        )
        promise = {}
    elif kind == "wrong-schema":
        doc["schema"] = rng.choice([2, 99, "1", 1.0, None, True, -(10**30), [1]])
        promise = {}
    elif kind == "legacy":
        doc = {
            f"{i:08x}": {
                "chunk_size": rng.choice([None, 8, 0, -5, "8"]),
                "per_candidate_ms": rng.choice([{"None": 1.0, "8": 0.9}, {"x": 1}, None, [1]]),
                "hostname": rng.choice(["h", None, 5]),
            }
            for i in range(rng.randint(1, 5))
        }
        promise = {}
    if fmt == "toml":
        if not isinstance(doc, dict):
            doc = {"value": doc}
        raw = tomli_w.dumps(toml_safe(doc)).encode()
    else:
        raw = json.dumps(doc).encode()
    if kind in ("random-bytes", "truncate", "flip-bytes", "deep-nesting", "huge-number", "empty"):
        promise = {}
        if kind == "random-bytes":
            raw = rng.randbytes(rng.randrange(1, 500))
        elif kind == "truncate":
            raw = raw[: rng.randrange(len(raw))]
        elif kind == "flip-bytes":
            edited = bytearray(raw)
            for _ in range(rng.randint(1, 5)):
                edited[rng.randrange(len(edited))] = rng.randrange(256)
            raw = bytes(edited)
        elif kind == "deep-nesting":
            depth = rng.choice([50, 900, 1000, 5000, 20000])
            raw = (b"a = " if fmt == "toml" else b"") + nested(depth, "array").encode()
        elif kind == "huge-number":
            digits = rng.choice([30, 400, 4300, 5000])
            at = raw.find(b"1")
            raw = raw[:at] + b"9" * digits + raw[at + 1 :]
        else:
            raw = b""
    return Document(raw, promise)


# ---------------------------------------------------------------- running


def cli(*argv: str) -> tuple[int, str]:
    """``chunktune ARGV`` in this process; returns the exit code and what it printed."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue() + err.getvalue()


def run_settings(rng: random.Random, kind: str, workdir: Path, tally: Tally) -> None:
    path = workdir / "s.toml"
    path.write_bytes(settings_file(rng, kind))
    start = time.perf_counter()
    try:
        try:
            load_settings(path)
            outcome = "loaded ok"
        except ConfigError:
            outcome = "ConfigError"
        code, text = cli("cache", "path", "--config", str(path))
        if code != (0 if outcome == "loaded ok" else 2) or "Traceback" in text:
            outcome = f"FAIL cli exit {code}"
    except Exception:
        tally.add(kind, "FAIL exception", time.perf_counter() - start, traceback.format_exc(-3))
        return
    tally.add(kind, outcome, time.perf_counter() - start, path.read_bytes()[:80].hex())


def _same(a: CacheEntry, b: CacheEntry) -> bool:
    keys = a.timings.keys() == b.timings.keys()
    close = keys and all(math.isclose(a.timings[k], b.timings[k]) for k in a.timings)
    return close and attrs.evolve(a, timings={}) == attrs.evolve(b, timings={})


def _safe(entry: CacheEntry) -> bool:
    c = entry.chunk_size
    return (c is None or (type(c) is int and 1 <= c <= (entry.num_envs or 2**31))) and all(
        math.isfinite(s) and s > 0 for s in entry.timings.values()
    )


def _left_alone(raw: bytes, path: Path) -> str | None:
    """Why chunktune leaves a cache file holding ``raw`` as it is, or None if it does not."""
    try:
        parse_cache(raw, cache_format(path), mtime=0.0, source="")
    except NewerCache:
        return "newer schema"
    except LeftAlone:
        return "another program's"
    except UnusableCache:
        pass
    return None


def check_cache(doc: Document, path: Path) -> str:
    """Read, look up and write a cache file holding ``doc``; the outcome, or a FAIL line."""
    raw, promise, originals = doc
    path.write_bytes(raw)
    left = None
    try:
        imported = read_cache_file(path)
    except ChunktuneError:
        imported = None
        left = _left_alone(raw, path)
    cache = DecisionCache(path)
    served = cache.entries()
    aside = sorted(path.parent.glob(f"{path.name}.corrupt-*"))
    if left is not None:  # another chunktune's or program's file: not served, moved, written
        extra = CacheEntry(chunk_size=2, native_chunk=1, reason="fuzz", num_envs=N)
        if served or aside or cache.put("fuzz-new", extra) or path.read_bytes() != raw:
            return f"FAIL a file to leave alone ({left}) was not left alone"
        return f"left alone ({left})"
    if aside:
        # a file import refuses goes aside; so does one import reads with an altered entry
        # skipped (the other entries are imported, none of them altered, as the cache keeps)
        agrees = imported is None or bool(imported.altered)
        if aside[0].read_bytes() != raw or not agrees:
            return "FAIL quarantine changed the bytes or disagreed with import"
        outcome = "quarantined"
    elif imported is None or set(imported.entries) != set(served):
        return "FAIL import and read disagree"
    else:
        outcome = "loaded, bad entries skipped" if imported.skipped else "loaded ok"
    if not all(_safe(e) for e in served.values()):
        return "FAIL bad entry served"
    if originals is not None and any(
        key not in originals or not _same(entry, originals[key]) for key, entry in served.items()
    ):
        return "FAIL an edited or cut entry was served"
    for key, want in promise.items():
        if key not in served or not _same(served[key], want):
            return f"FAIL valid entry lost on read: {key!r}"
        base, _, own = key.rpartition(".")
        rule, effort = want.policy_rule, want.policy_effort
        found = cache.lookup(base, policy_hash=own, rule=rule, effort=effort)
        if found is None or not _same(found[1], want):
            return f"FAIL lookup missed {key!r}"
    extra = CacheEntry(chunk_size=2, native_chunk=1, reason="fuzz", num_envs=N)
    if not cache.put("fuzz-new", extra):
        return "FAIL write refused"
    again = DecisionCache(path).entries()
    if set(again) != set(served) | {"fuzz-new"}:
        return "FAIL entries lost on write"
    return outcome


def run_cache(rng: random.Random, kind: str, workdir: Path, tally: Tally) -> None:
    fmt: CacheFormat = rng.choice(["json", "toml"])
    doc = cache_document(rng, kind, fmt)
    raw = doc.raw
    label = f"{kind} ({fmt})"
    start = time.perf_counter()
    case = workdir / f"case-{kind}"
    case.mkdir()
    try:
        outcome = check_cache(doc, case / f"cache.{fmt}")
        listed = case / f"listed.{fmt}"
        listed.write_bytes(raw)
        os.environ["CHUNKTUNE_CACHE"] = str(listed)
        code, text = cli("cache", "list")
        newer = outcome.startswith("left alone")  # list says it cannot read it, exit 2
        if code != (2 if newer else 0) or "Traceback" in text:
            outcome = f"FAIL cache list exit {code}"
    except Exception:
        tally.add(label, "FAIL exception", time.perf_counter() - start, traceback.format_exc(-3))
        return
    finally:
        for file in case.iterdir():
            file.unlink()
        case.rmdir()
    tally.add(label, outcome, time.perf_counter() - start, raw[:80].hex())


def report(title: str, tally: Tally, seconds: float) -> None:
    print(f"\n{title}: {sum(tally.total().values())} cases in {seconds:.1f} s")
    if not tally.counts:  # none asked for (--settings 0)
        return
    outcomes = sorted(tally.total())
    width = max(len(k) for k in tally.counts)
    header = f"{'kind':<{width}}  " + "  ".join(f"{o:>{max(len(o), 5)}}" for o in outcomes)
    print(header + "  slowest ms")
    print("-" * (len(header) + 12))
    for kind in sorted(tally.counts):
        cells = "  ".join(f"{tally.counts[kind][o]:>{max(len(o), 5)}}" for o in outcomes)
        print(f"{kind:<{width}}  {cells}  {tally.slowest[kind] * 1e3:>10.1f}")
    total = tally.total()
    cells = "  ".join(f"{total[o]:>{max(len(o), 5)}}" for o in outcomes)
    print(f"{'total':<{width}}  {cells}")
    for line in tally.failures:
        print(f"  {line}")


def loop(
    count: int, kinds: tuple[str, ...], step: Callable[..., None], rng: random.Random
) -> Tally:
    tally = Tally()
    with tempfile.TemporaryDirectory(dir="/dev/shm" if os.path.isdir("/dev/shm") else None) as tmp:
        for i in range(count):
            step(rng, kinds[i % len(kinds)], Path(tmp), tally)
    return tally


@contextlib.contextmanager
def sandbox() -> Iterator[Path]:
    """A temporary home: cwd, cache and sweep lock in it, chunktune's log quiet; all restored."""
    names = ("CHUNKTUNE_CONFIG", "CHUNKTUNE_CACHE", "CHUNKTUNE_SWEEP_LOCK")
    saved_env = {name: os.environ.get(name) for name in names}
    log = logging.getLogger("chunktune")
    saved_log = (log.handlers[:], log.propagate)
    cwd = os.getcwd()
    with tempfile.TemporaryDirectory() as home:
        os.chdir(home)  # no ./chunktune.toml of the caller's
        os.environ.pop("CHUNKTUNE_CONFIG", None)
        os.environ["CHUNKTUNE_CACHE"] = str(Path(home) / "cache.json")
        os.environ["CHUNKTUNE_SWEEP_LOCK"] = str(Path(home) / "sweep.lock")
        log.handlers, log.propagate = [logging.NullHandler()], False
        try:
            yield Path(home)
        finally:
            os.chdir(cwd)
            log.handlers, log.propagate = saved_log
            for name, value in saved_env.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value


def main_fuzz(argv: list[str] | None = None) -> int:
    """Run the fuzz; returns 1 if anything failed, else 0."""
    parser = argparse.ArgumentParser(description="Fuzz settings files and cache documents.")
    parser.add_argument("--settings", type=int, default=10_000, help="settings files to try")
    parser.add_argument("--caches", type=int, default=10_000, help="cache documents to try")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if args.settings < 0 or args.caches < 0:
        parser.error(f"--settings {args.settings}, --caches {args.caches}: expected 0 or more")
    wall = time.perf_counter()
    with sandbox():
        start = time.perf_counter()
        settings = loop(args.settings, SETTINGS_KINDS, run_settings, random.Random(args.seed))
        settings_s = time.perf_counter() - start
        start = time.perf_counter()
        caches = loop(args.caches, CACHE_KINDS, run_cache, random.Random(args.seed + 1))
        caches_s = time.perf_counter() - start
    report("settings files (load_settings, `cache path --config`)", settings, settings_s)
    report("cache documents (read, lookup, write, import, `cache list`)", caches, caches_s)
    failed = sum(n for t in (settings, caches) for o, n in t.total().items() if o.startswith("F"))
    print(f"\nfailures: {failed}; wall time {time.perf_counter() - wall:.1f} s")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main_fuzz())
