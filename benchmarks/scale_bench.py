"""A fleet's cache: 1k to 50k realistic entries, every path that reads or writes it.

    python benchmarks/scale_bench.py [--sizes 1000,10000,50000] [--formats json,toml]
        [--repeats 3] [--hits 200] [--no-cli] [--merge-files 10] [--writers 0] [--per-writer 200]
        [--writers-base 10000] [--no-tables] [--compare OLD_TREE [--one-child]]

For each format and size, a cache of that many entries is written by the package's own
writer (``DecisionCache.update``), each entry a real sweep's (``balanced`` on a simulated
tail-heavy batch: every size's timings and samples, the machine, the load, the reason)
varied as a fleet's are (model, N, T, host, mujoco version, age). Then, each a median of
``--repeats`` (hits: of ``--hits`` calls, a tenth of them for another policy's):

- ``build``: the one write of the whole cache; ``read``: a process's first read of it;
- ``hit sync``/``hit async``: ``resolve_sync`` and ``await resolve`` (asyncio) hits, the
  same workload object again and a new equal one each time, the file settled;
- ``hit other policy``: a ``quick`` request answered by the ``balanced`` entry;
- ``reread``: the first hit after another process's write (one more entry);
- ``write``: one sweep's store (``put`` of one new key: read, merge, whole-file rewrite);
  ``hit after write``: the writer's own next hit;
- the CLI, each in a child process (its wall time, and its peak RSS: ``VmHWM``):
  ``cache list``, ``list --json``, ``show KEY``, ``export`` (.json and .toml),
  ``import`` (a file of 10% of the entries, half of them new), and ``merge`` of the cache
  split into ``--merge-files`` files into a new ``-o`` file;
- ``rss read``: the peak RSS of a child that reads the cache, less that of one that
  reads an empty cache.

Each row ends with the growth of its figure per entry from the size before (1.0:
linear; n log n stays near 1; n^2 is the tenfold at each tenfold); a hit's row (us), with
its plain ratio (1.0: constant). ``--writers W`` then has W processes each resolve
``--per-writer`` distinct keys (``resolve_sync``, a simulated workload of its own name)
into a cache of ``--writers-base`` entries at once, counts the entries kept, checks the
file parses, and prints the time per resolve and the write lock's waits and holds
(``--no-tables``: only that). ``--compare OLD_TREE`` races OLD_TREE's chunktune (a
checkout: ``git archive REV chunktune policies | tar -x -C OLD_TREE``) against this one's
in alternating child processes: ``cache merge`` of each size cut into ``--merge-files``
files, lookups of the user and the system cache (own policy, and another's answered by
it), two stores of a new key each followed by the writer's next hit, and ``cache list``
into a pipe; medians and their ratio (``--one-child``: the four in one child of each tree a
repeat, merge and list timed inside it, without a process's start). Not a test: it prints
figures. Runs in a fresh temporary directory; ``chunktune._settled.SETTLED_S`` is 0 (files
as a trainer finds them).
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import itertools
import json
import multiprocessing
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import attrs
from cases import at_least_one

import chunktune
from chunktune import _cache, _settled
from chunktune._cache import DecisionCache
from chunktune._cache_entry import CacheEntry
from chunktune._keys import cache_for
from chunktune._shown import plural
from chunktune.sim import SimulatedWorkload, env_costs


def _env(tmp: Path, cache: Path) -> None:
    os.environ["CHUNKTUNE_CACHE"] = str(cache)
    os.environ["CHUNKTUNE_SWEEP_LOCK"] = str(tmp / "sweep.lock")
    os.environ["CHUNKTUNE_CONFIG"] = ""


def _settings(cache: Path, policy: str = "balanced") -> chunktune.Settings:
    s = chunktune.load_settings()
    return attrs.evolve(
        s,
        policy=policy,
        log=attrs.evolve(s.log, stderr="never"),
        cache=attrs.evolve(s.cache, path=str(cache)),
    )


def _workload(name: str = "blocked") -> SimulatedWorkload:
    return SimulatedWorkload(env_costs("blocked", 256), nthread=8, name=name)


def real_entry(tmp: Path) -> tuple[str, CacheEntry]:
    """A real ``balanced`` sweep's key and entry (simulated tail-heavy batch, 256 x 8)."""
    seed = tmp / "seed.json"
    d = chunktune.resolve_sync(_workload(), settings=_settings(seed))
    return d.key, DecisionCache(seed).entries()[d.key]


def fleet_entries(key: str, entry: CacheEntry, n: int) -> dict[str, CacheEntry]:
    """``n`` entries: ``entry`` under ``key``, and n - 1 variations as a fleet's differ."""
    policy = key.rpartition(".")[2]
    out = {key: entry}
    for i in range(n - 1):
        tag = hashlib.sha256(f"{i}".encode()).hexdigest()
        device = {**entry.device, "mujoco": ("3.3.7", "4.0.0", "4.0.1")[i % 3]}
        out[f"{tag[:32]}.{policy}"] = attrs.evolve(
            entry,
            num_envs=64 << (i % 7),
            nthread=2 << (i % 6),
            host=f"node{i % 97}.cluster.example",
            device=device,
            mujoco_version=device["mujoco"],
            signature={**entry.signature, "name": f"model{i % 501}", "costs_sha": tag[32:48]},
            created=entry.created - 60.0 * i,
            timings={k: v * (1 + (i % 13) / 100) for k, v in entry.timings.items()},
        )
    return out


def _median(f: Callable[[], Any], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        f()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def _hits(call: Callable[[], chunktune.Decision], n: int) -> float:
    def hit() -> None:
        d = call()
        assert d.source == "cache", d.reason

    return _median(hit, n)


async def _async_hits(
    make: Callable[[], SimulatedWorkload], s: chunktune.Settings, n: int
) -> float:
    times = []
    for _ in range(n):
        w = make()
        t = time.perf_counter()
        d = await chunktune.resolve(w, settings=s)
        times.append(time.perf_counter() - t)
        assert d.source == "cache", d.reason
    return statistics.median(times)


def _put_one(path: str, key: str) -> None:
    """Another process's write: one entry more."""
    cache = DecisionCache(path)
    some = next(iter(cache.entries().values()))
    cache.put(key, some)


# a child reports its own peak RSS (VmHWM: wait4's ru_maxrss counts the parent's pages
# at the fork), then runs the CLI or reads the cache
_WRAP = """
import atexit, os, sys
def hwm():
    with open("/proc/self/status") as f:
        kb = next(line.split()[1] for line in f if line.startswith("VmHWM"))
    with open(os.environ["SCALE_BENCH_HWM"], "w") as f:
        f.write(kb)
atexit.register(hwm)
def lookups(path, base, rule, policy, hits):  # user, system cache; own, another policy: us
    import statistics, time
    from chunktune import _settled
    from chunktune._cache import DecisionCache
    from chunktune._cache_layers import SystemCache
    _settled.SETTLED_S = 0.0
    user, system = DecisionCache(path), SystemCache(path)
    medians = []
    for cache in (user, system):
        for asked in (policy, "quick"):
            times = []
            for _ in range(int(hits)):
                t = time.perf_counter()
                assert cache.lookup(base, policy_hash=asked, rule=rule, effort=0) is not None
                times.append(time.perf_counter() - t)
            medians.append(statistics.median(times[1:]) * 1e6)
    return medians
def writes(path):  # seconds of a sweep's store and the writer's next hit, twice
    import time
    from chunktune import _settled
    from chunktune._cache import DecisionCache
    _settled.SETTLED_S = 0.0
    cache = DecisionCache(path)
    entry = next(iter(cache.entries().values()))  # a trainer's first read, not timed
    times = []
    for i in (1, 2):
        key = f"{i:032x}.mine"
        t = time.perf_counter()
        cache.put(key, entry)
        times.append(time.perf_counter() - t)
        t = time.perf_counter()
        assert cache.get(key) == entry
        times.append(time.perf_counter() - t)
    return times
if sys.argv[1] == "read":
    from chunktune._cache import DecisionCache
    DecisionCache(sys.argv[2]).entries()
elif sys.argv[1] == "lookups":
    for median in lookups(*sys.argv[2:]):
        print(median)
elif sys.argv[1] == "writes":
    print(*writes(sys.argv[2]))
elif sys.argv[1] == "race":  # --one-child: merge, list, lookups and stores in this process
    import contextlib, json, time
    from chunktune._cli import main
    plan = json.loads(sys.argv[2])
    def timed_cli(argv):
        t = time.perf_counter()
        with open(os.devnull, "w") as null, contextlib.redirect_stdout(null):
            assert main(argv) == 0, argv
        return time.perf_counter() - t
    said = {"merge": timed_cli(plan["merge"])}
    os.environ["CHUNKTUNE_CACHE"] = plan["listed"]
    said["list"] = timed_cli(["cache", "list"])  # before the lookups read the file
    said["lookups"] = lookups(*plan["lookups"])
    said["writes"] = writes(plan["written"])
    print(json.dumps(said))
else:
    from chunktune._cli import main
    sys.exit(main(sys.argv[1:]))
"""


def _child(argv: list[str], env: dict[str, str], cwd: Path | None = None) -> tuple[float, float]:
    """Wall seconds and peak RSS (MB) of one child process (``read FILE`` or the CLI's
    arguments), which must exit 0."""
    hwm = Path(env["SCALE_BENCH_HWM"])
    t = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", _WRAP, *argv],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        check=False,
        cwd=cwd,
    )
    wall = time.perf_counter() - t
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} exited {done.returncode}: {done.stderr[-500:]!r}")
    return wall, int(hwm.read_text()) / 1e3


class Table:
    """Rows of figures by size, printed with the per-entry growth from the size before."""

    def __init__(self, sizes: list[int]) -> None:
        self.sizes = sizes
        self.rows: dict[str, dict[int, float]] = {}

    def add(self, name: str, n: int, value: float) -> None:
        self.rows.setdefault(name, {})[n] = value

    def print(self, title: str) -> None:
        print(f"\n{title}")
        head = "".join(f"{n:>12}" for n in self.sizes)
        grow = "".join(
            f"{f'x/n {a // 1000}k>{b // 1000}k':>14}" for a, b in itertools.pairwise(self.sizes)
        )
        print(f"{'':<28}{head}{grow}")
        for name, by in self.rows.items():
            unit = name.rpartition(" ")[2].strip("()")
            cells = "".join(f"{by[n]:>12.4g}" if n in by else f"{'-':>12}" for n in self.sizes)
            ratios = ""
            for a, b in itertools.pairwise(self.sizes):
                if a in by and b in by and by[a] > 0:
                    # a hit should not grow at all: its plain ratio; the rest, per entry
                    per = 1 if unit == "us" else b / a
                    ratios += f"{by[b] / by[a] / per:>14.2f}"
                else:
                    ratios += f"{'-':>14}"
            print(f"{name:<28}{cells}{ratios}")


def measure(tmp: Path, fmt: str, n: int, key: str, entry: CacheEntry, args: Any, t: Table) -> None:
    """One size of one format: every figure of the module's docstring into ``t``."""
    folder = tmp / f"{fmt}-{n}"
    folder.mkdir()
    path = folder / f"cache.{fmt}"
    _env(folder, path)
    entries = fleet_entries(key, entry, n)
    start = time.perf_counter()
    DecisionCache(path).update(entries)
    t.add("build (s)", n, time.perf_counter() - start)
    t.add("file (MB)", n, path.stat().st_size / 1e6)
    t.add("read (s)", n, _median(lambda: DecisionCache(path).entries(), args.repeats))
    s = _settings(path)
    w = _workload()
    t.add(
        "hit sync same (us)",
        n,
        1e6 * _hits(lambda: chunktune.resolve_sync(w, settings=s), args.hits),
    )
    t.add(
        "hit sync new (us)",
        n,
        1e6 * _hits(lambda: chunktune.resolve_sync(_workload(), settings=s), args.hits),
    )
    t.add("hit async same (us)", n, 1e6 * anyio.run(_async_hits, lambda: w, s, args.hits))
    t.add("hit async new (us)", n, 1e6 * anyio.run(_async_hits, _workload, s, args.hits))
    quick = _settings(path, "quick")
    t.add(
        "hit other policy (us)",
        n,
        1e6
        * _hits(lambda: chunktune.resolve_sync(_workload(), settings=quick), args.hits // 10 + 1),
    )
    ctx = multiprocessing.get_context("fork")  # a writer, quick to start: only its write counts
    rereads, writes, after = [], [], []
    for r in range(args.repeats):
        p = ctx.Process(target=_put_one, args=(str(path), f"{r:032x}.other"))
        p.start()
        p.join()
        start = time.perf_counter()
        chunktune.resolve_sync(_workload(), settings=s)
        rereads.append(time.perf_counter() - start)
        cache = _cache_of(s)
        start = time.perf_counter()
        cache.put(f"{r:032x}.mine", entry)
        writes.append(time.perf_counter() - start)
        start = time.perf_counter()
        chunktune.resolve_sync(_workload(), settings=s)
        after.append(time.perf_counter() - start)
    t.add("reread (s)", n, statistics.median(rereads))
    t.add("write (s)", n, statistics.median(writes))
    t.add("hit after write (s)", n, statistics.median(after))
    if args.no_cli:
        return
    env = {**os.environ, "CHUNKTUNE_CACHE": str(path), "COLUMNS": "200"}
    env["SCALE_BENCH_HWM"] = str(folder / "hwm")
    cli = ["cache"]
    runs: dict[str, list[tuple[float, float]]] = {}

    def run(name: str, argv: list[str], before: Callable[[], object] | None = None) -> None:
        for _ in range(args.repeats):
            if before is not None:
                before()
            runs.setdefault(name, []).append(_child(argv, env))

    empty = folder / "empty.json"
    run("rss empty", ["read", str(empty)])
    run("rss read", ["read", str(path)])
    run("list", [*cli, "list"])
    run("list --json", [*cli, "list", "--json"])
    run("show", [*cli, "show", key[:12]])
    for out_fmt in ("json", "toml"):
        out = folder / f"export.{out_fmt}"
        run(f"export {out_fmt}", [*cli, "export", str(out), "--force"])
    some = dict(list(fleet_entries(key, entry, n + n // 20).items())[n - n // 20 :])
    incoming = folder / f"incoming.{fmt}"
    DecisionCache(incoming).update(some)
    copy = folder / f"copy.{fmt}"
    raw = path.read_bytes()
    run(
        "import",
        [*cli, "import", str(incoming)],
        before=lambda: (copy.write_bytes(raw), env.update(CHUNKTUNE_CACHE=str(copy))),
    )
    env["CHUNKTUNE_CACHE"] = str(path)
    parts = split(path, folder, args.merge_files)
    merged = folder / f"merged.{fmt}"
    run(
        f"merge {args.merge_files} files",
        [*cli, "merge", *map(str, parts), "-o", str(merged)],
        before=lambda: merged.unlink(missing_ok=True),
    )
    empty_rss = statistics.median(r for _, r in runs.pop("rss empty"))
    t.add("rss read (MB)", n, statistics.median(r for _, r in runs.pop("rss read")) - empty_rss)
    for name, figures in runs.items():
        t.add(f"cli {name} (s)", n, statistics.median(w for w, _ in figures))
    for name, figures in runs.items():
        t.add(f"cli {name} rss (MB)", n, statistics.median(r for _, r in figures))


def _cache_of(s: chunktune.Settings) -> DecisionCache:
    """The process's own cache object for ``s`` (the one its resolves read and write)."""
    cache = cache_for(s)
    assert cache is not None
    return cache


def split(path: Path, folder: Path, parts: int) -> list[Path]:
    """The cache at ``path`` cut into ``parts`` files of about equal size (a fleet's nodes)."""
    entries = sorted(DecisionCache(path).entries().items())
    out = []
    for i in range(parts):
        part = folder / f"node{i}{path.suffix}"
        part.unlink(missing_ok=True)
        DecisionCache(part).update(dict(entries[i::parts]))
        out.append(part)
    return out


_LOOKUPS = ("user own", "user other policy", "system own", "system other policy")
_WRITES = ("first put", "its next hit", "second put", "its next hit")


def compare(tmp: Path, key: str, entry: CacheEntry, args: Any) -> None:
    """``--compare OLD_TREE``: OLD_TREE's chunktune against this one's, in alternating child
    processes, ``--repeats`` each: ``cache merge`` of each size cut into ``--merge-files``
    files, a lookup (median of ``--hits``) of the user cache and of the same file as
    the system cache, for the entry's own policy and for another answered by it, two
    sweeps' stores into a copy of the cache (``put`` of a new key after the process's first
    read, then the writer's next hit, twice), and ``cache list`` into a pipe. Every file is
    written by this tree's chunktune (the older reads it: the layouts are one JSON)."""
    here = Path(__file__).resolve().parent.parent
    trees = {"old": Path(args.compare).resolve(), "new": here}
    base, _, policy = key.rpartition(".")
    for n in args.sizes:
        folder = tmp / f"compare-{n}"
        folder.mkdir()
        whole = folder / "whole.json"
        DecisionCache(whole).update(fleet_entries(key, entry, n))
        parts = split(whole, folder, args.merge_files)
        out = folder / "merged.json"
        merge = ["cache", "merge", *map(str, parts), "-o", str(out)]
        looks = ["lookups", str(whole), base, entry.policy_rule, policy, str(args.hits + 1)]
        merges: dict[str, list[float]] = {"old": [], "new": []}
        lists: dict[str, list[float]] = {"old": [], "new": []}
        lookups: dict[str, list[list[float]]] = {"old": [], "new": []}
        writes: dict[str, list[list[float]]] = {"old": [], "new": []}
        written = folder / "written.json"
        for r in range(args.repeats):
            for name in ("old", "new") if r % 2 == 0 else ("new", "old"):
                out.unlink(missing_ok=True)
                env = {**os.environ, "PYTHONPATH": str(trees[name])}
                env["SCALE_BENCH_HWM"] = str(folder / "hwm")
                shutil.copyfile(whole, written)
                if args.one_child:
                    plan = {"merge": merge, "listed": str(whole), "lookups": looks[1:]}
                    plan["written"] = str(written)
                    said = json.loads(_child_out(["race", json.dumps(plan)], env, folder))
                    merges[name].append(said["merge"])
                    lists[name].append(said["list"])
                    lookups[name].append(said["lookups"])
                    writes[name].append(said["writes"])
                else:
                    merges[name].append(_child(merge, env, cwd=folder)[0])
                    said = _child_out(looks, env, folder)
                    lookups[name].append([float(x) for x in said.split()])
                    said = _child_out(["writes", str(written)], env, folder)
                    writes[name].append([float(x) for x in said.split()])
                    listed = {**env, "CHUNKTUNE_CACHE": str(whole)}
                    lists[name].append(_child(["cache", "list"], listed, cwd=folder)[0])
                assert len(DecisionCache(out).entries()) == n
                assert len(DecisionCache(written).entries()) == n + 2
        old, new = (statistics.median(merges[k]) for k in ("old", "new"))
        # one child a tree and repeat: merge's and list's figures hold no process start
        how = " in one child each" if args.one_child else ""
        print(
            f"{n} entries, median of {args.repeats} alternating{how}, old / new / old:new: "
            f"cache merge of {args.merge_files} files {old:.2f} s / {new:.2f} s / "
            f"{old / new:.2f}x"
        )
        for i, what in enumerate(_LOOKUPS):
            old, new = (statistics.median(x[i] for x in lookups[k]) for k in ("old", "new"))
            print(f"{n} entries, lookup {what}: {old:.1f} us / {new:.1f} us / {old / new:.2f}x")
        for i, what in enumerate(_WRITES):
            old, new = (statistics.median(x[i] for x in writes[k]) * 1e3 for k in ("old", "new"))
            print(f"{n} entries, {what}: {old:.1f} ms / {new:.1f} ms / {old / new:.2f}x")
        old, new = (statistics.median(lists[k]) for k in ("old", "new"))
        print(f"{n} entries, cache list into a pipe: {old:.2f} s / {new:.2f} s / {old / new:.2f}x")


def _child_out(argv: list[str], env: dict[str, str], cwd: Path) -> str:
    """What one child (``_WRAP``'s ``lookups``) prints; it must exit 0."""
    done = subprocess.run(
        [sys.executable, "-c", _WRAP, *argv], env=env, capture_output=True, check=False, cwd=cwd
    )
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} exited {done.returncode}: {done.stderr[-500:]!r}")
    return done.stdout.decode()


# ---------------------------------------------------------------- writers at once


@contextlib.contextmanager
def _timed_lock(real: Any, log: list[tuple[float, float]], *a: Any, **kw: Any) -> Iterator[None]:
    asked = time.perf_counter()
    with real(*a, **kw):
        got = time.perf_counter()
        try:
            yield
        finally:
            log.append((got - asked, time.perf_counter() - got))


def _writer(tmp: str, cache: str, worker: int, count: int, out: str) -> None:
    _env(Path(tmp), Path(cache))
    s = _settings(Path(cache), "quick")
    log: list[tuple[float, float]] = []
    real = getattr(_cache, "write_lock")  # noqa: B009 (not re-exported: mypy's attr check)
    setattr(_cache, "write_lock", lambda *a, **kw: _timed_lock(real, log, *a, **kw))  # noqa: B010
    calls = []
    for i in range(count):
        w = _workload(f"writer{worker}-{i}")
        start = time.perf_counter()
        d = chunktune.resolve_sync(w, settings=s)
        calls.append(time.perf_counter() - start)
        assert d.source == "benchmark", d.reason
    Path(out).write_text(json.dumps({"calls": calls, "locks": log}))


def writers_at_once(tmp: Path, key: str, entry: CacheEntry, args: Any) -> None:
    folder = tmp / "writers"
    folder.mkdir()
    path = folder / "cache.json"
    _env(folder, path)
    DecisionCache(path).update(fleet_entries(key, entry, args.writers_base))
    ctx = multiprocessing.get_context("fork")  # importable as the smoke test imports it
    outs = [folder / f"w{i}.json" for i in range(args.writers)]
    start = time.perf_counter()
    ps = [
        ctx.Process(target=_writer, args=(str(folder), str(path), i, args.per_writer, str(outs[i])))
        for i in range(args.writers)
    ]
    for p in ps:
        p.start()
    for p in ps:
        p.join()
        if p.exitcode != 0:
            raise SystemExit(f"a writer failed with exit code {p.exitcode}")
    wall = time.perf_counter() - start
    json.loads(path.read_bytes())  # the file parses
    kept = DecisionCache(path).entries()
    wanted = args.writers_base + args.writers * args.per_writer
    calls = [c for o in outs for c in json.loads(o.read_text())["calls"]]
    locks = [lk for o in outs for lk in json.loads(o.read_text())["locks"]]
    waits = sorted(w for w, _ in locks)
    holds = [h for _, h in locks]
    print(
        f"\n{plural(args.writers, 'process', 'processes')} x "
        f"{plural(args.per_writer, 'new key')} into "
        f"{plural(args.writers_base, 'entry', 'entries')} (JSON): {len(kept)}/{wanted} "
        f"entries kept, file parses; {wall:.0f} s; "
        f"resolve median {statistics.median(calls):.2f} s (max {max(calls):.2f}); write lock "
        f"held median {statistics.median(holds):.2f} s, waited median "
        f"{statistics.median(waits):.2f} s, p90 {waits[int(0.9 * (len(waits) - 1))]:.2f} s, "
        f"max {waits[-1]:.2f} s over {len(locks)} writes"
    )


def _counts(text: str) -> list[int]:
    try:
        sizes = [int(x) for x in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a comma-separated list") from None
    if not sizes or min(sizes) < 2:
        raise argparse.ArgumentTypeError(f"{text!r}: expected counts >= 2")
    return sizes


def _formats(text: str) -> list[str]:
    formats = text.split(",")
    if not set(formats) <= {"json", "toml"}:
        raise argparse.ArgumentTypeError(f"{text!r}: expected json, toml or json,toml")
    return formats


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--sizes", type=_counts, default=[1000, 10000, 50000])
    parser.add_argument("--formats", type=_formats, default=["json", "toml"])
    parser.add_argument("--repeats", type=at_least_one, default=3)
    parser.add_argument("--hits", type=at_least_one, default=200, help="calls per hit figure")
    parser.add_argument("--no-cli", action="store_true", help="skip the CLI's child processes")
    parser.add_argument("--no-tables", action="store_true", help="only the writers at once")
    parser.add_argument("--compare", metavar="OLD_TREE", help="a source tree to race")
    parser.add_argument(
        "--one-child",
        action="store_true",
        help="--compare: each repeat's merge, list, lookups and stores in one child a tree "
        "(no process start in merge's and list's figures; a quick check, 2 children a repeat "
        "instead of 8)",
    )
    parser.add_argument("--merge-files", type=at_least_one, default=10)
    parser.add_argument("--writers", type=int, default=0, help="processes writing at once")
    parser.add_argument("--per-writer", type=at_least_one, default=200)
    parser.add_argument("--writers-base", type=at_least_one, default=10000)
    args = parser.parse_args(argv)
    if args.writers < 0:
        parser.error(f"--writers {args.writers}: expected >= 0")
    settled, _settled.SETTLED_S = _settled.SETTLED_S, 0.0  # as a trainer finds files: settled
    environ = dict(os.environ)
    try:
        with tempfile.TemporaryDirectory() as d:
            tmp = Path(d)
            _env(tmp, tmp / "seed.json")
            key, entry = real_entry(tmp)
            for fmt in [] if args.no_tables else args.formats:
                t = Table(args.sizes)
                for n in args.sizes:
                    measure(tmp, fmt, n, key, entry, args, t)
                t.print(
                    f"{fmt.upper()} cache, median of {args.repeats} (hits: of {args.hits} calls)"
                )
                sys.stdout.flush()
            if args.compare:
                compare(tmp, key, entry, args)
            if args.writers:
                writers_at_once(tmp, key, entry, args)
    finally:  # an importer (the smoke test) gets its own back
        _settled.SETTLED_S = settled
        os.environ.clear()
        os.environ.update(environ)
    return 0


if __name__ == "__main__":
    sys.exit(main())
