"""Cache hits right after a write and long after it, two chunktune trees side by side.

    python benchmarks/racy_bench.py OLD_TREE NEW_TREE [--rounds 5] [--calls 2000]
        [--hit-rounds 3]

Each figure comes from child processes run with ``PYTHONPATH`` set to one tree, the
trees alternating (ABBA by round), so both see the same machine at the same times:

- ``DecisionCache.lookup`` hits, ``--calls`` of them, on a cache of 1 and of 1000 entries:
  long after the file's last write (outside the clock tick a same-size rewrite could hide
  in: ``chunktune._settled.SETTLED_S``, 3 s), and right after another writer's change
  (inside it; the first hit, which parses the changed file, is reported on its own).
- ``benchmarks/hit_bench.py --entries 1`` and ``--entries 1000``: it runs within 3 s of
  writing its cache, so all its hits are inside that window.

Medians over the rounds of each child's median; ratio = new / old. Not a test: it prints
figures.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

_SETTLE_S = 3.5  # past SETTLED_S: the stat alone tells the file again
_HERE = Path(__file__).resolve().parent


def _child(entries: int, calls: int) -> dict[str, float]:
    """Per-hit medians (seconds) of one tree's lookups outside and inside the window."""
    from chunktune._cache import DecisionCache
    from chunktune._cache_entry import CacheEntry

    def filler(i: int) -> tuple[str, CacheEntry]:
        key = f"{i:032x}.{'0' * 12}"
        return key, CacheEntry(
            chunk_size=4, native_chunk=12, reason="filler", num_envs=256, nthread=2
        )

    def hits(cache: DecisionCache, base: str) -> list[float]:
        out = []
        for _ in range(calls):
            start = time.perf_counter()
            found = cache.lookup(base, policy_hash="0" * 12, rule="", effort=0)
            out.append(time.perf_counter() - start)
            assert found is not None
        return out

    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "cache.json"
        writer = DecisionCache(path)
        writer.update(dict(filler(i) for i in range(entries)))
        reader = DecisionCache(path)
        base = f"{0:032x}"
        assert reader.lookup(base, policy_hash="0" * 12, rule="", effort=0) is not None
        time.sleep(_SETTLE_S)
        outside = hits(reader, base)
        key, entry = filler(entries)
        writer.put(key, entry)  # another writer's change: the reader's parse is stale
        written = time.time()
        start = time.perf_counter()
        reader.lookup(base, policy_hash="0" * 12, rule="", effort=0)
        first = time.perf_counter() - start
        inside = hits(reader, base)
        if time.time() - written >= 3.0:
            raise SystemExit("the inside loop ran past the window: lower --calls")
    return {
        "outside": statistics.median(outside),
        "first": first,
        "inside": statistics.median(inside),
    }


_MEDIAN = re.compile(r"^(?P<what>.*?): median (?P<ms>[0-9.]+) ms")
_STALL = re.compile(r"^(?P<what>.*?): the loop stalled at most (?P<ms>[0-9.]+) ms")


def _hit_bench(tree: Path, entries: int) -> dict[str, float]:
    """The figures (ms) of one ``hit_bench.py`` run over ``tree``."""
    out = subprocess.run(
        [sys.executable, str(_HERE / "hit_bench.py"), "--entries", str(entries)],
        env={**os.environ, "PYTHONPATH": str(tree)},
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    figures = {}
    for line in out.splitlines():
        line = re.sub(r"\([0-9.]+ MB, ", "(", line)  # the file's size differs by tree
        found = _MEDIAN.match(line) or _STALL.match(line)
        if found:
            figures[found["what"]] = float(found["ms"])
    return figures


def _run_child(tree: Path, entries: int, calls: int) -> dict[str, float]:
    out = subprocess.run(
        [sys.executable, __file__, "--child", str(entries), "--calls", str(calls)],
        env={**os.environ, "PYTHONPATH": str(tree)},
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    result: dict[str, float] = json.loads(out)
    return result


def _row(what: str, old: list[float], new: list[float], scale: float, unit: str) -> str:
    a, b = statistics.median(old) * scale, statistics.median(new) * scale
    return f"| {what} | {a:.4g} {unit} | {b:.4g} {unit} | {b / a:.2f}x |"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("trees", nargs="*", type=Path)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--hit-rounds", type=int, default=3)
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--child", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child is not None:
        print(json.dumps(_child(args.child, args.calls)))
        return 0
    if len(args.trees) != 2:
        parser.error("name two trees: OLD NEW")
    trees = [tree.resolve() for tree in args.trees]
    # a tree without the package would time whatever chunktune the children find instead
    if missing := [str(t) for t in trees if not (t / "chunktune" / "__init__.py").is_file()]:
        parser.error(f"expected a source tree holding chunktune/: {', '.join(missing)}")
    if min(args.rounds, args.hit_rounds, args.calls) < 1:
        parser.error(
            f"--rounds {args.rounds}, --hit-rounds {args.hit_rounds}, --calls {args.calls}: "
            "expected each at least 1"
        )
    sizes = (1, 1000)
    loops: dict[tuple[int, int], list[dict[str, float]]] = {}
    benches: dict[tuple[int, int], list[dict[str, float]]] = {}
    for round_ in range(args.rounds):
        for entries in sizes:
            for t in (0, 1) if round_ % 2 == 0 else (1, 0):
                loops.setdefault((t, entries), []).append(_run_child(trees[t], entries, args.calls))
    for round_ in range(args.hit_rounds):
        for entries in sizes:
            for t in (0, 1) if round_ % 2 == 0 else (1, 0):
                benches.setdefault((t, entries), []).append(_hit_bench(trees[t], entries))
    print(f"old: {trees[0]}\nnew: {trees[1]}\n")
    print("| figure | old | new | new/old |")
    print("|---|---|---|---|")
    labels = {
        "outside": "lookup hit, long after the last write (outside the window)",
        "inside": "lookup hit, right after another writer's change (inside the window)",
        "first": "first lookup after that change (parses the file)",
    }
    for entries in sizes:
        for field, label in labels.items():
            scale, unit = (1e6, "us") if field != "first" else (1e3, "ms")
            old = [r[field] for r in loops[(0, entries)]]
            new = [r[field] for r in loops[(1, entries)]]
            print(_row(f"{label}, {entries} entries", old, new, scale, unit))
    for entries in sizes:
        for what in benches[(0, entries)][0]:
            old = [r[what] for r in benches[(0, entries)]]
            new = [r[what] for r in benches[(1, entries)]]
            print(_row(f"hit_bench: {what}", old, new, 1.0, "ms"))
    print(f"\n({args.rounds} rounds of the lookup loops, {args.hit_rounds} of hit_bench.py)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
