"""Flights: concurrent resolves share one sweep per key, and no waiter holds a worker thread."""

from __future__ import annotations

import threading
from collections import Counter

import anyio
import anyio.to_thread
import attrs
import pytest

import chunktune
from chunktune import Decision, ProgressEvent
from chunktune.sim import Noise, SimulatedWorkload

pytestmark = pytest.mark.anyio

MANY = 64  # more concurrent resolves than anyio's 40 default worker threads
HANG_GUARD_S = 60.0  # not a speed limit: a hang fails the test instead of the suite


def small_policy() -> chunktune.Policy:
    """A real sweep of a few probes, so dozens of them stay cheap."""
    return attrs.evolve(
        chunktune.load_settings().get_policy("balanced"),
        candidates=chunktune.ExplicitCandidates(sizes=(2, 8)),
        prime=0,
        min_rounds=1,
        max_rounds=2,
    )


def workload(name: str) -> SimulatedWorkload:
    """One key per name."""
    costs = SimulatedWorkload.from_layout("blocked", num_envs=512, nthread=8).costs
    return SimulatedWorkload(costs, nthread=8, noise=Noise(sigma=0.01), name=name)


async def resolve_all(workloads: list[SimulatedWorkload]) -> tuple[list[Decision], Counter[str]]:
    """Resolve every workload concurrently; the decisions and the sweeps started per key."""
    pol = small_policy()
    decisions: list[Decision] = []
    sweeps: Counter[str] = Counter()

    async def one(w: SimulatedWorkload) -> None:
        def on_progress(event: ProgressEvent) -> None:
            if event.kind == "done":  # one per sweep
                sweeps[w.name] += 1

        decisions.append(await chunktune.resolve(w, policy=pol, on_progress=on_progress))

    with anyio.fail_after(HANG_GUARD_S):
        async with anyio.create_task_group() as tg:
            for w in workloads:
                tg.start_soon(one, w)
    return decisions, sweeps


async def test_more_resolves_of_one_key_than_worker_threads_share_one_sweep() -> None:
    """64 concurrent resolves of one cold key all return, after exactly one sweep."""
    w = workload("only")
    decisions, sweeps = await resolve_all([w] * MANY)
    assert len(decisions) == MANY
    assert sweeps == {"only": 1}
    assert Counter(d.source for d in decisions) == {"benchmark": 1, "cache": MANY - 1}
    assert len({d.chunk_size for d in decisions}) == 1


async def test_more_resolves_than_worker_threads_over_many_keys() -> None:
    """64 concurrent resolves over 8 cold keys all return, after one sweep per key."""
    keys = [workload(f"k{i}") for i in range(8)]
    decisions, sweeps = await resolve_all(keys * (MANY // len(keys)))
    assert len(decisions) == MANY
    assert sweeps == {w.name: 1 for w in keys}
    assert Counter(d.source for d in decisions) == {"benchmark": 8, "cache": MANY - 8}


async def test_a_saturated_default_thread_limiter_does_not_starve_resolve() -> None:
    """A trainer holding every token of anyio's default limiter still gets its decision."""
    limiter = anyio.to_thread.current_default_thread_limiter()
    limiter.total_tokens = 1
    gate = threading.Event()
    try:
        with anyio.fail_after(HANG_GUARD_S):
            async with anyio.create_task_group() as tg:
                tg.start_soon(anyio.to_thread.run_sync, gate.wait)
                await anyio.wait_all_tasks_blocked()
                assert limiter.borrowed_tokens == 1
                d = await chunktune.resolve(workload("w"), policy=small_policy())
                assert d.source == "benchmark"
                gate.set()
    finally:
        gate.set()


def test_resolve_sync_from_many_threads_shares_one_sweep_across_loops() -> None:
    """Threads that each run their own loop share one flight: one sweep, the same answer."""
    w = workload("shared")
    pol = small_policy()
    sweeps: list[ProgressEvent] = []
    decisions: list[Decision] = []
    start = threading.Barrier(8)

    def on_progress(event: ProgressEvent) -> None:
        if event.kind == "done":  # one per sweep
            sweeps.append(event)

    def one() -> None:
        start.wait()
        decisions.append(chunktune.resolve_sync(w, policy=pol, on_progress=on_progress))

    threads = [threading.Thread(target=one) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(HANG_GUARD_S)
    assert len(decisions) == 8
    assert len(sweeps) == 1
    assert len({d.chunk_size for d in decisions}) == 1
