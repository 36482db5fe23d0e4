"""The cache under load: lost updates, single sweeps, crashes mid-write, hit latency.

    python benchmarks/cache_bench.py [--quick]

Prints one line per target with the measured figure. Everything runs in a fresh
temporary directory; real processes (spawn) share one cache file.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import random
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path

import attrs

import chunktune
from chunktune import CacheEntry, DecisionCache, _settled
from chunktune.sim import SimulatedWorkload, env_costs


def _env(tmp: Path) -> None:
    os.environ["CHUNKTUNE_CACHE"] = str(tmp / "cache.json")
    os.environ["CHUNKTUNE_SWEEP_LOCK"] = str(tmp / "sweep.lock")
    os.environ.pop("CHUNKTUNE_CONFIG", None)


def _quiet_settings() -> chunktune.Settings:
    s = chunktune.load_settings()
    return attrs.evolve(s, log=chunktune.LogSettings(stderr="never"))


def _distinct_keys(tmp: str, worker: int, count: int) -> None:
    _env(Path(tmp))
    settings = _quiet_settings()
    for i in range(count):
        w = SimulatedWorkload(env_costs("blocked", 256), nthread=4, name=f"w{worker}-{i}")
        chunktune.resolve_sync(w, settings=settings, policy="quick")


def lost_updates(tmp: Path, procs: int, per: int) -> tuple[int, int]:
    ctx = multiprocessing.get_context("spawn")
    ps = [ctx.Process(target=_distinct_keys, args=(str(tmp), w, per)) for w in range(procs)]
    for p in ps:
        p.start()
    for p in ps:
        p.join()
        if p.exitcode != 0:
            raise SystemExit(f"a writer failed with exit code {p.exitcode}")
    found = len(DecisionCache(tmp / "cache.json").entries())
    return procs * per, found


def _one_key(tmp: str, log: str) -> None:
    _env(Path(tmp))
    settings = _quiet_settings()
    w = SimulatedWorkload(env_costs("blocked", 1024), nthread=8, name="shared")

    def on_progress(event: chunktune.ProgressEvent) -> None:
        if event.kind == "done":  # one per sweep ("candidates" may come twice)
            with open(log, "a") as f:
                f.write(f"{os.getpid()}\n")

    d = chunktune.resolve_sync(w, settings=settings, on_progress=on_progress)
    with open(log, "a") as f:
        f.write(f"source {d.source}\n")


def single_sweep(tmp: Path, procs: int) -> tuple[int, list[str]]:
    log = tmp / "sweeps.log"
    ctx = multiprocessing.get_context("spawn")
    ps = [ctx.Process(target=_one_key, args=(str(tmp), str(log))) for _ in range(procs)]
    for p in ps:
        p.start()
    for p in ps:
        p.join()
    lines = log.read_text().splitlines()
    sweeps = sum(1 for line in lines if not line.startswith("source"))
    sources = sorted(line.split()[1] for line in lines if line.startswith("source"))
    return sweeps, sources


def _entry(i: int) -> CacheEntry:
    return CacheEntry(
        chunk_size=i % 50 + 1,
        native_chunk=12,
        reason="bench",
        timings={None: 0.01, 4: 0.009},
        samples={None: 5, 4: 5},
        signature={"kind": "bench", "i": i},
    )


def _writer_forever(path: str) -> None:
    cache = DecisionCache(path)
    i = 0
    while True:
        cache.put(f"k{os.getpid()}-{i}", _entry(i))
        i += 1


def killed_writers(tmp: Path, rounds: int) -> tuple[int, int, int]:
    """SIGKILL a writer at random moments; count files that did not parse afterwards."""
    path = tmp / "killed.json"
    ctx = multiprocessing.get_context("fork")
    unreadable = 0
    rng = random.Random(0)
    for _ in range(rounds):
        p = ctx.Process(target=_writer_forever, args=(str(path),))
        p.start()
        time.sleep(rng.uniform(0.0, 0.03))
        os.kill(p.pid or 0, signal.SIGKILL)
        p.join()
        if path.exists():
            try:
                doc = json.loads(path.read_bytes())
                assert doc["schema"] == 1
            except (ValueError, KeyError, AssertionError):
                unreadable += 1
    entries = len(DecisionCache(path).entries())
    aside = sum(1 for p in tmp.iterdir() if ".corrupt-" in p.name)
    return unreadable, entries, aside


def _hot(reader: DecisionCache, key: str) -> float:
    """Median seconds of 2000 lookups of ``key``, answered from the reader's parse."""
    times = []
    for _ in range(2000):
        t = time.perf_counter()
        reader.lookup(key, policy_hash="p", rule="", effort=0)
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def hit_latency(tmp: Path, n: int) -> tuple[float, float, float]:
    """Median seconds of a lookup in a cache of n entries: steady state (the file settled),
    within ``SETTLED_S`` of its last write (its bytes compared), and a cold re-read."""
    path = tmp / "big.json"
    cache = DecisionCache(path)
    cache.update({f"{i:032x}.p": _entry(i) for i in range(n)})
    reader = DecisionCache(path)
    reader.entries()  # first read parses
    base = f"{n // 2:032x}"
    fresh = _hot(reader, base)  # the file was just written
    settled_s, _settled.SETTLED_S = _settled.SETTLED_S, 0.0  # as if written long ago
    try:
        reader.entries()
        steady = _hot(reader, base)
    finally:
        _settled.SETTLED_S = settled_s
    cold = []
    for _ in range(20):
        t = time.perf_counter()
        DecisionCache(path).get(f"{base}.p")
        cold.append(time.perf_counter() - t)
    return steady, fresh, statistics.median(cold)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="smaller counts")
    args = parser.parse_args()
    procs, per, killers, racers = (4, 10, 40, 4) if args.quick else (16, 50, 200, 8)
    print(f"chunktune cache benchmark ({'quick' if args.quick else 'full'})")
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        _env(tmp)
        t = time.perf_counter()
        wrote, found = lost_updates(tmp, procs, per)
        print(
            f"lost updates: {procs} processes x {per} resolves of distinct keys: "
            f"{found}/{wrote} entries kept, {wrote - found} lost "
            f"({time.perf_counter() - t:.1f} s)"
        )
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        _env(tmp)
        sweeps, sources = single_sweep(tmp, racers)
        print(
            f"single sweep: {racers} processes resolving one cold key ran {sweeps} sweep(s); "
            f"sources {sources}"
        )
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        unreadable, entries, aside = killed_writers(tmp, killers)
        print(
            f"crashes: {killers} writers SIGKILLed mid-write: {unreadable} unreadable files, "
            f"{aside} moved aside, {entries} entries readable at the end"
        )
    with tempfile.TemporaryDirectory() as d:
        steady, fresh, cold = hit_latency(Path(d), 1000)
        print(
            f"hit latency, 1000 entries: steady state median {steady * 1e6:.1f} us "
            f"({fresh * 1e6:.1f} us within {_settled.SETTLED_S:g} s of a write); "
            f"first read of the file {cold * 1e3:.2f} ms"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
