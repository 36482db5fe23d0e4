"""The async orchestrator under a real MuJoCo sweep: loop latency, cancellation, budget, flights.

    python benchmarks/async_bench.py [--backend asyncio|trio]

Prints one line per target with the measured figure.
"""

from __future__ import annotations

import argparse
import itertools
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import attrs

import chunktune
from chunktune._mujoco import demo_workload
from chunktune.sim import SimulatedWorkload, env_costs


def settings(**policy: Any) -> tuple[chunktune.Settings, chunktune.Policy]:
    s = chunktune.load_settings()
    s = attrs.evolve(
        s, log=chunktune.LogSettings(stderr="never"), cache=attrs.evolve(s.cache, enabled=False)
    )
    return s, attrs.evolve(s.get_policy("balanced"), **policy)


async def _tick_while(work: Callable[[], Awaitable[object]]) -> list[float]:
    """Lateness (seconds) of every 1 ms tick on the loop while ``work`` runs."""
    late: list[float] = []
    done = anyio.Event()

    async def tick() -> None:
        while not done.is_set():
            t = time.perf_counter()
            await anyio.sleep(0.001)
            late.append(time.perf_counter() - t - 0.001)

    async with anyio.create_task_group() as tg:
        tg.start_soon(tick)
        await work()
        done.set()
    return late


def _lateness(late: list[float]) -> str:
    q = statistics.quantiles(late, n=1000)
    return (
        f"p50 {statistics.median(late) * 1e3:.2f} ms, p99 {q[989] * 1e3:.2f} ms, "
        f"p99.9 {q[998] * 1e3:.2f} ms, max {max(late) * 1e3:.2f} ms ({len(late)} ticks)"
    )


async def ticker_during_sweep() -> tuple[list[float], list[float], list[float], float]:
    """Tick lateness: idle loop, the same rollouts in a plain thread, and a chunktune sweep."""
    s, pol = settings(time_budget_s=3.0)
    w = demo_workload(num_envs=256, nthread=2)
    idle = await _tick_while(lambda: anyio.sleep(2.0))

    def plain_rollouts() -> None:
        end = time.perf_counter() + 2.0
        while time.perf_counter() < end:
            w.run(None)

    plain = await _tick_while(lambda: anyio.to_thread.run_sync(plain_rollouts))
    probe = 0.0

    async def tune() -> None:
        nonlocal probe
        probe = (await chunktune.resolve(w, settings=s, policy=pol)).probe_seconds

    swept = await _tick_while(tune)
    w.close()
    return idle, plain, swept, probe


async def cancel_latency() -> tuple[float, float]:
    """Seconds from cancel to resolve returning, and the longest probe seen."""
    s, pol = settings(time_budget_s=30.0, early_stop=False, race=False)
    w = demo_workload(num_envs=256, nthread=2)
    probes: list[float] = []
    returned = 0.0
    cancelled_at = 0.0

    def on_progress(e: chunktune.ProgressEvent) -> None:
        if e.seconds is not None:
            probes.append(e.seconds)

    async with anyio.create_task_group() as tg:

        async def run() -> None:
            nonlocal returned
            try:
                await chunktune.resolve(w, settings=s, policy=pol, on_progress=on_progress)
            finally:
                returned = time.perf_counter()

        tg.start_soon(run)
        await anyio.sleep(0.7)
        cancelled_at = time.perf_counter()
        tg.cancel_scope.cancel()
    w.close()
    return returned - cancelled_at, max(probes)


class Sleeper(SimulatedWorkload):
    """Every probe really takes `probe_s` seconds, and the budget runs on the wall clock."""

    probe_s = 0.05

    def clock(self) -> float:
        return time.monotonic()  # not the modeled seconds: this pool really sleeps

    def run(self, chunk_size: int | None) -> float:
        t = time.perf_counter()
        time.sleep(self.probe_s)
        super().run(chunk_size)
        return time.perf_counter() - t


async def budget() -> float:
    # nothing ends the rounds but the budget: no race, no early stop, no confirmation
    s, pol = settings(
        time_budget_s=1.0, early_stop=False, race=False, max_rounds=1000, confirm=False
    )
    w = Sleeper(env_costs("blocked", 1024), nthread=8)
    t = time.perf_counter()
    await chunktune.resolve(w, settings=s, policy=pol)
    return time.perf_counter() - t


async def flights() -> tuple[int, int, bool]:
    """Five resolves of one key (cache on) and two keys at once: sweeps run, probes overlap?"""
    s = chunktune.load_settings()
    s = attrs.evolve(s, log=chunktune.LogSettings(stderr="never"))
    spans: list[tuple[float, float, str]] = []
    sweeps = 0

    class Spanned(SimulatedWorkload):
        def run(self, chunk_size: int | None) -> float:
            t = time.perf_counter()
            time.sleep(0.002)
            seconds = super().run(chunk_size)
            spans.append((t, time.perf_counter(), self.name))
            return seconds

    def count(e: chunktune.ProgressEvent) -> None:
        nonlocal sweeps
        if e.kind == "done":  # one per sweep ("candidates" may come twice)
            sweeps += 1

    one = Spanned(env_costs("blocked", 512), nthread=8, name="one")
    async with anyio.create_task_group() as tg:
        for _ in range(5):
            tg.start_soon(
                lambda: chunktune.resolve(one, settings=s, policy="quick", on_progress=count)
            )
    five = sweeps
    sweeps = 0
    spans.clear()
    a = Spanned(env_costs("blocked", 640), nthread=8, name="a")
    b = Spanned(env_costs("lognormal", 640), nthread=8, name="b")
    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: chunktune.resolve(a, settings=s, policy="quick", on_progress=count))
        tg.start_soon(lambda: chunktune.resolve(b, settings=s, policy="quick", on_progress=count))
    spans.sort()
    overlap = any(p[1] > n[0] for p, n in itertools.pairwise(spans))
    return five, sweeps, overlap


async def main_async() -> None:
    idle, plain, swept, probe = await ticker_during_sweep()
    print("loop latency of a 1 ms ticker (target: max <= 10 ms during a sweep)")
    print(f"  idle loop, nothing else running:        {_lateness(idle)}")
    print(f"  the same rollouts in a plain thread:    {_lateness(plain)}")
    print(f"  a chunktune sweep ({probe:.2f} s of probes): {_lateness(swept)}")
    lat, longest = await cancel_latency()
    print(
        f"cancellation: returned {lat * 1e3:.1f} ms after the cancel; longest probe "
        f"{longest * 1e3:.1f} ms (target <= one probe + 20 ms = {(longest + 0.02) * 1e3:.1f} ms)"
    )
    took = await budget()
    print(f"budget: 1 s budget with 50 ms probes returned after {took:.3f} s (target <= 1.1 s)")
    five, two, overlap = await flights()
    print(
        f"single flight: 5 concurrent resolves of one key ran {five} sweep(s); two keys ran "
        f"{two} sweeps and their probes {'OVERLAPPED' if overlap else 'never overlapped'}"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--backend", default="asyncio", choices=["asyncio", "trio"])
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as d:
        os.environ["CHUNKTUNE_CACHE"] = str(Path(d) / "cache.json")
        os.environ["CHUNKTUNE_SWEEP_LOCK"] = str(Path(d) / "sweep.lock")
        print(f"chunktune async benchmark on {args.backend}")
        anyio.run(main_async, backend=args.backend)
    return 0


if __name__ == "__main__":
    sys.exit(main())
