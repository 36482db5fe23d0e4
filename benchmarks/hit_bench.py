"""What a trainer pays for a cache hit: the whole call, as a caller sees it.

    python benchmarks/hit_bench.py [--entries 1000] [--calls 2000] [--backend trio] [--just-written]

- ``await chunktune.resolve(w, settings=s)`` in a running loop, answered from a cache
  of ``--entries`` entries: median, p90 and min over ``--calls`` calls of the same
  workload object (answered on the loop within a second of the last hit), and over
  ``--calls / 4`` new but equal objects (each through a worker thread).
- ``chunktune.resolve_sync(w, settings=s)`` the same way: the same object again, and
  a new object each time (a hit is keyed and read on the calling thread, with no loop).
- The event loop's stall while 50 resolves of one workload object no resolve has seen
  start at once (a trainer's runners starting together): a ticker on the loop reports
  its largest lateness.
- The stall of the process's first read of a cache of ``--entries`` entries the size
  of a real sweep's (timings and samples of every size measured): the file is parsed
  in a worker thread, but the parser holds the GIL while it reads the JSON.
- Last, hits with ``settings=None`` (the README's way: settings discovered from a file
  named by ``$CHUNKTUNE_CONFIG``, parsed again only when it changes).

The workload is simulated (its ``signature()`` is a small dict, as a trainer's would
be); the cache file is real. Its files are written just before the hits, but a trainer's
were written long before: they are taken as settled (``_settled.SETTLED_S`` 0, so a stat
vouches for them). ``--just-written`` keeps the 3 s rule: within it every hit compares
the cache file's bytes, and settings are parsed on every call. Not a test: it prints
figures.
"""

from __future__ import annotations

import argparse
import functools
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import anyio
import attrs

import chunktune
from chunktune import _settled
from chunktune._cache import DecisionCache
from chunktune._cache_entry import CacheEntry
from chunktune.sim import SimulatedWorkload


def _fill(path: Path, entries: int) -> None:
    cache = DecisionCache(path)
    cache.update(
        {
            f"{i:032x}.{'0' * 12}": CacheEntry(
                chunk_size=4, native_chunk=12, reason="filler", num_envs=256, nthread=2
            )
            for i in range(entries)
        }
    )


def _workload() -> SimulatedWorkload:
    return SimulatedWorkload.from_layout("blocked", num_envs=256, nthread=8)


def _stats(samples: list[float]) -> str:
    samples = sorted(samples)
    p90 = samples[int(0.9 * (len(samples) - 1))]
    return (
        f"median {statistics.median(samples) * 1e3:.3f} ms, p90 {p90 * 1e3:.3f} ms, "
        f"min {samples[0] * 1e3:.3f} ms"
    )


async def _async_hits(
    w: SimulatedWorkload, settings: chunktune.Settings | None, n: int
) -> list[float]:
    out = []
    for _ in range(n):
        start = time.perf_counter()
        d = await chunktune.resolve(w, settings=settings)
        out.append(time.perf_counter() - start)
        assert d.source == "cache"
    return out


async def _first_hits(
    ws: list[SimulatedWorkload], settings: chunktune.Settings | None
) -> list[float]:
    """One hit each of distinct but equal workload objects: every one crosses a thread."""
    out = []
    for w in ws:
        start = time.perf_counter()
        d = await chunktune.resolve(w, settings=settings)
        out.append(time.perf_counter() - start)
        assert d.source == "cache"
    return out


def _fill_like(path: Path, entry: CacheEntry, key: str, entries: int) -> int:
    """``entries`` copies of a real sweep's ``entry`` (``key`` among them); the file's bytes."""
    policy = key.rpartition(".")[2]
    copies = {f"{i:032x}.{policy}": entry for i in range(entries - 1)}
    DecisionCache(path).update({**copies, key: entry})
    return path.stat().st_size


async def _stall(ws: list[SimulatedWorkload], settings: chunktune.Settings) -> float:
    worst = 0.0
    done = anyio.Event()

    async def ticker() -> None:
        nonlocal worst
        while not done.is_set():
            start = time.perf_counter()
            await anyio.sleep(0.001)
            worst = max(worst, time.perf_counter() - start - 0.001)

    async with anyio.create_task_group() as tg:
        tg.start_soon(ticker)
        await anyio.sleep(0.05)
        async with anyio.create_task_group() as burst:
            for w in ws:
                burst.start_soon(functools.partial(chunktune.resolve, w, settings=settings))
        done.set()
    return worst


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--entries", type=int, default=1000)
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--backend", default="asyncio", choices=("asyncio", "trio"))
    parser.add_argument("--just-written", action="store_true", help="files as just written")
    args = parser.parse_args(argv)
    if args.calls < 1 or args.entries < 0:
        parser.error(f"--calls {args.calls}, --entries {args.entries}: expected >= 1 and >= 0")
    if not args.just_written:
        _settled.SETTLED_S = 0.0  # the files as a trainer finds them: written long before
    with tempfile.TemporaryDirectory() as d:
        os.environ["CHUNKTUNE_SWEEP_LOCK"] = str(Path(d) / "sweep.lock")
        path = Path(d) / "cache.json"
        _fill(path, args.entries)
        os.environ["CHUNKTUNE_CACHE"] = str(path)
        settings = chunktune.load_settings()
        settings = attrs.evolve(settings, log=attrs.evolve(settings.log, stderr="never"))
        w = _workload()
        first = chunktune.resolve_sync(w, settings=settings, policy="quick")
        settings = attrs.evolve(settings, policy="quick")
        assert chunktune.resolve_sync(w, settings=settings).source == "cache", first
        hits = anyio.run(_async_hits, w, settings, args.calls, backend=args.backend)
        print(
            f"await resolve() hit, {args.entries} entries ({args.backend}), the same workload "
            f"object again (a trainer's env runners): {_stats(hits)}"
        )
        fresh = [_workload() for _ in range(max(1, args.calls // 4))]
        fresh_hits = anyio.run(_first_hits, fresh, settings, backend=args.backend)
        print(
            f"await resolve() hit, {args.entries} entries ({args.backend}), a new workload "
            f"object each time (signature() and the file's stat in a worker thread): "
            f"{_stats(fresh_hits)}"
        )
        sync = []
        for _ in range(max(1, args.calls // 4)):
            start = time.perf_counter()
            chunktune.resolve_sync(w, settings=settings)
            sync.append(time.perf_counter() - start)
        print(f"resolve_sync() hit, {args.entries} entries: {_stats(sync)}")
        sync = []
        for x in [_workload() for _ in range(max(1, args.calls // 4))]:
            start = time.perf_counter()
            chunktune.resolve_sync(x, settings=settings)
            sync.append(time.perf_counter() - start)
        print(
            f"resolve_sync() hit, {args.entries} entries, a new workload object each time: "
            f"{_stats(sync)}"
        )
        # one object no resolve has seen: 50 env runners starting together, nothing remembered
        burst = [_workload()] * 50
        stall = anyio.run(_stall, burst, settings, backend=args.backend)
        print(f"50 concurrent first hits: the loop stalled at most {stall * 1e3:.2f} ms")
        # a cache this process has not read yet, its entries as large as a real sweep's
        first = chunktune.resolve_sync(w, settings=settings, refresh=True)
        real = DecisionCache(path).entries()[first.key]
        cold = Path(d) / "cold.json"
        size = _fill_like(cold, real, first.key, args.entries)
        settings = attrs.evolve(settings, cache=attrs.evolve(settings.cache, path=str(cold)))
        stall = anyio.run(_stall, [_workload()], settings, backend=args.backend)
        print(
            f"the process's first read of a {args.entries}-entry cache ({size / 1e6:.2f} MB, "
            f"entries as large as a real sweep's): the loop stalled at most {stall * 1e3:.2f} ms"
        )
        # last, so that what it leaves in memory moves no figure above
        # settings=None, as the README calls it: discovered from a settings file
        config = Path(d) / "chunktune.toml"
        config.write_text('policy = "quick"\n[log]\nstderr = "never"\n')
        os.environ["CHUNKTUNE_CONFIG"] = str(config)
        found = anyio.run(_async_hits, w, None, args.calls, backend=args.backend)
        print(
            f"await resolve() hit, settings=None ({args.backend}), the same workload object "
            f"again: {_stats(found)}"
        )
        found = anyio.run(_first_hits, [_workload() for _ in fresh], None, backend=args.backend)
        print(
            f"await resolve() hit, settings=None ({args.backend}), a new workload object each "
            f"time: {_stats(found)}"
        )
        sync = []
        for x in [_workload() for _ in range(max(1, args.calls // 4))]:
            start = time.perf_counter()
            chunktune.resolve_sync(x)
            sync.append(time.perf_counter() - start)
        print(f"resolve_sync() hit, settings=None, a new workload object each time: {_stats(sync)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
