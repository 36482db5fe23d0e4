"""A cancel that a SIGINT handler queues on the loop without waking it, as the Jupyter
kernel's does, reaches a resolve in each of its waits: its sweep, another task's sweep, a
thread hop held up (a damaged cache's write lock), a lock wait, a Ray registry call."""

from __future__ import annotations

import asyncio
import fcntl
import functools
import os
import threading
import types
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import attrs
import pytest
from _small_sweeps import Blocking, small_policy, workload
from _unwoken import LAND_GUARD_S, interrupt_unwoken

import chunktune
from chunktune import _cache_lock, _flights, _miss, _ray_calls, _woken
from chunktune._here import key_here
from chunktune._lock_files import take
from chunktune.sim import Noise, SimulatedWorkload


def _blocking(name: str) -> Blocking:
    costs = SimulatedWorkload.from_layout("blocked", num_envs=512, nthread=8).costs
    w = Blocking(costs, nthread=8, noise=Noise(sigma=0.01), name=name)
    w.hold_s = LAND_GUARD_S * 2
    return w


async def _sharing() -> None:
    """Return once a task waits on another task's sweep."""
    while not any(f.waiters for f in list(_flights._flights.values())):  # noqa: ASYNC110 -- joining signals nothing
        await asyncio.sleep(0.005)


@pytest.mark.parametrize(
    "role", [pytest.param("owner", id="owner"), pytest.param("sharer", id="sharer")]
)
def test_a_cancel_queued_without_a_wakeup_lands_mid_sweep(role: str) -> None:
    """A cancel queued unwoken, as a notebook's interrupt, lands while the sweep is held."""
    # ipykernel's interrupt cancels the cell's task from a SIGINT handler with a plain
    # call_soon on the loop's thread, which wakes nothing: the resolve must wake the loop
    w, pol = _blocking(f"woken-{role}"), small_policy()

    async def main() -> tuple[bool, chunktune.Decision | None]:
        owner = asyncio.ensure_future(chunktune.resolve(w, policy=pol))
        await asyncio.to_thread(w.blocked.wait, LAND_GUARD_S)
        cell = owner
        if role == "sharer":
            cell = asyncio.ensure_future(chunktune.resolve(w, policy=pol))
            await _sharing()
        landed = await interrupt_unwoken(cell, w.release.set)
        return landed, None if owner is cell else await owner

    landed, shared = asyncio.run(main())
    assert landed
    if role == "sharer":
        assert shared is not None and shared.source == "benchmark"  # the owner went on


@pytest.fixture
def flocked() -> Iterator[Callable[[Path], Callable[[], None]]]:
    """Flock a path as another process's holder does; what it gives lets the path go
    (once, whoever calls it first); every path is let go at the end."""
    fds: list[int] = []
    guard = threading.Lock()

    def hold(path: Path) -> Callable[[], None]:
        fd = os.open(path, os.O_RDWR | os.O_CREAT)
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # another open file: it excludes us
        fds.append(fd)

        def let_go() -> None:
            with guard:
                if fd in fds:
                    fds.remove(fd)
                    os.close(fd)

        return let_go

    yield hold
    for fd in list(fds):
        os.close(fd)


def test_a_cancel_queued_unwoken_lands_while_a_hop_waits_on_a_damaged_caches_write_lock(
    isolated: Path,
    monkeypatch: pytest.MonkeyPatch,
    flocked: Callable[[Path], Callable[[], None]],
) -> None:
    """A notebook's interrupt lands while a hop's read waits for a held write lock."""
    # a damaged file is moved aside under its write lock, waited for while its holder may
    # still change it (WRITE_STALL_S, 5 s): a hop that waits so must wake the loop too
    monkeypatch.setattr(_cache_lock, "WRITE_STALL_S", LAND_GUARD_S * 6)  # not what ends it
    cache_file = isolated / "cache.json"
    cache_file.write_text("{ a damaged cache")
    trying, left = threading.Event(), threading.Event()

    def taking(lock: Any, timeout: float) -> None:
        trying.set()
        take(lock, timeout=timeout)

    def keying(req: Any) -> Any:
        try:
            return key_here(req)
        finally:
            left.set()

    monkeypatch.setattr(_cache_lock, "take", taking)
    monkeypatch.setattr(_miss, "key_here", keying)
    # no hard limit: the request is keyed (and the cache read) in a hop
    pol = attrs.evolve(small_policy(), hard_limit_s=None)
    settings = chunktune.load_settings()
    let_go = flocked(_cache_lock.lock_path(cache_file))

    async def main() -> bool:
        w = workload("woken-hop")
        cell = asyncio.ensure_future(chunktune.resolve(w, settings=settings, policy=pol))
        await asyncio.to_thread(trying.wait, LAND_GUARD_S)
        landed = await interrupt_unwoken(cell, let_go)
        await asyncio.to_thread(left.wait, LAND_GUARD_S * 2)  # the hop left behind ends here
        return landed

    assert asyncio.run(main())


def test_a_cancel_queued_unwoken_lands_while_the_sweep_lock_is_waited_for(
    isolated: Path, flocked: Callable[[Path], Callable[[], None]]
) -> None:
    """A notebook's interrupt lands while another process holds the machine's sweep lock."""
    # the wait polls (each pause at most _lock_wait._POLL_MAX_S, a timer): nothing to add
    let_go = flocked(isolated / "sweep.lock")
    waiting = threading.Event()

    def told(event: chunktune.ProgressEvent) -> None:
        if event.kind == "waiting":
            waiting.set()

    async def main() -> bool:
        w = workload("woken-sweep-lock")
        cell = asyncio.ensure_future(chunktune.resolve(w, policy=small_policy(), on_progress=told))
        await asyncio.to_thread(waiting.wait, LAND_GUARD_S)
        return await interrupt_unwoken(cell, let_go)

    assert asyncio.run(main())


def test_a_cancel_queued_unwoken_lands_while_a_ray_registry_call_waits() -> None:
    """A notebook's interrupt lands while ray.get waits on the registry (another's sweep)."""
    # chunktune.ray.resolve's claims, waits and publishing all wait in ray.get in a thread
    asked, released, ended = threading.Event(), threading.Event(), threading.Event()

    def get(ref: str, timeout: float) -> str:
        asked.set()
        try:
            released.wait(LAND_GUARD_S * 2)
            return ref
        finally:
            ended.set()

    ray = types.SimpleNamespace(is_initialized=lambda: True, get=get)

    async def main() -> bool:
        cell = asyncio.ensure_future(_ray_calls.call(ray, functools.partial(str, "wait")))
        await asyncio.to_thread(asked.wait, LAND_GUARD_S)
        landed = await interrupt_unwoken(cell, released.set)
        await asyncio.to_thread(ended.wait, LAND_GUARD_S * 2)  # the call left behind ends here
        return landed

    assert asyncio.run(main())


@pytest.mark.parametrize(
    "end", [pytest.param("set", id="event-set"), pytest.param("cancel", id="cancelled")]
)
def test_a_woken_wait_that_ends_leaves_no_wakeup_behind(
    end: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A wait that ends (its event set, or its task cancelled) leaves no wake-up scheduled."""
    monkeypatch.setattr(_woken, "WAKE_S", 0.001)  # a few ticks without waiting long

    async def main() -> tuple[list[asyncio.TimerHandle], int]:
        loop = asyncio.get_running_loop()
        handles: list[asyncio.TimerHandle] = []
        renewed = asyncio.Event()  # ticked, and ticked again: the timer renews itself
        real = loop.call_later

        def recorded(
            delay: float, callback: Callable[..., object], *args: object
        ) -> asyncio.TimerHandle:
            handle = real(delay, callback, *args)
            if not args:  # the wake-up's tick; asyncio.sleep's timers pass their future
                handles.append(handle)
                if len(handles) == 3:
                    renewed.set()
            return handle

        monkeypatch.setattr(loop, "call_later", recorded)
        event = anyio.Event()
        waiting = asyncio.ensure_future(_woken.wait_woken(event))
        await renewed.wait()
        if end == "set":
            event.set()
            await waiting
        else:
            waiting.cancel()
            with pytest.raises(asyncio.CancelledError):
                await waiting
        ticks = len(handles)
        for _ in range(3):
            await asyncio.sleep(0.002)  # a tick left scheduled would be due and renew itself
        return handles, ticks

    handles, ticks = asyncio.run(main())
    assert handles[-1].cancelled() and len(handles) == ticks
