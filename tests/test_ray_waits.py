"""A Ray worker's waits on the registry: bounded by its hard limit, told, keyed as resolve's."""

from __future__ import annotations

import functools
import logging
import re
import sys
import threading
import time
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import attrs
import pytest
from _clock import jump_when
from _discoveries import silent_settings_file
from _holders import holding_async
from _registry_ray import RegistryRay, registry_loop

import chunktune
import chunktune.ray
from chunktune import _lock_wait, _ray_calls, _ray_claim, _ray_resolve
from chunktune._cache import DecisionCache
from chunktune._cache_lock import lock_path
from chunktune._events import ProgressEvent
from chunktune._ray_api import ray_module
from chunktune._ray_job import Job, identify
from chunktune._request import ask
from chunktune.sim import SimulatedWorkload, env_costs


def a_job(*, hard_limit_s: float | None = None, **keywords: Any) -> Job:
    """A worker's job on node type "a" (its hard limit as given), as the Ray resolve builds it."""
    settings = chunktune.load_settings()
    w = SimulatedWorkload(env_costs("blocked", 64), nthread=2, name="waits")
    policy = settings.active
    if hard_limit_s is not None:
        policy = attrs.evolve(policy, time_budget_s=hard_limit_s, hard_limit_s=hard_limit_s)
    asked = ask(w, settings=settings, policy=None, manual=None, refresh=False, on_progress=None)
    return Job(
        asked=attrs.evolve(asked, **keywords), settings=settings, policy=policy,
        policy_name="balanced", signature=dict(w.signature()), device={}, key="k.p",
        node_id="n" * 16, node_type="a", registry_key="r",
    )  # fmt: skip


def up() -> Any:
    return types.SimpleNamespace(is_initialized=lambda: True)


def busy_registry(
    sent: list[str], wait: Callable[[str, float], Callable[[], None]]
) -> types.SimpleNamespace:
    """A registry whose key w1 sweeps for ever (its claim an hour old)."""

    def method(name: str, reply: Callable[..., Any]) -> types.SimpleNamespace:
        def remote(*a: Any, **k: Any) -> Any:
            sent.append(name)
            return reply(*a, **k)

        return types.SimpleNamespace(remote=remote)

    busy = {"state": "busy", "since": 0.0, "holder": "w1", "held_s": 3600.0}
    return types.SimpleNamespace(
        claim=method("claim", lambda *_, **__: lambda: busy),
        wait=method("wait", wait),
        abandon=method("abandon", lambda *_: None),
    )


@pytest.mark.anyio
@pytest.mark.jumps
async def test_a_wait_is_told_with_when_the_claim_began_and_logged(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The 'waiting' event says when the claimant began (an hour ago), and an INFO line says it."""
    monkeypatch.setattr(_lock_wait, "REPORT_AFTER_S", 0.05)
    events: list[ProgressEvent] = []
    told = threading.Event()

    def on_progress(event: ProgressEvent) -> None:
        events.append(event)
        if event.kind == "waiting":
            told.set()

    registry = busy_registry([], lambda key, timeout_s: lambda: time.sleep(min(timeout_s, 0.01)))
    monkeypatch.setattr(_ray_calls, "registry_handle", lambda ray, fresh: registry)
    ray = up()
    ray.get = lambda ref, timeout: ref()
    job = a_job(hard_limit_s=1.0, on_progress=on_progress)  # room to report the wait
    with caplog.at_level(logging.INFO, logger="chunktune"), anyio.fail_after(60):
        async with anyio.create_task_group() as tg:
            tg.start_soon(jump_when, told, 1.0)  # the limit, once the wait is told
            await _ray_claim.coordinated(ray, job, anyio.current_time())
    [event] = [e for e in events if e.kind == "waiting"]
    since = re.search(r"since (\d\d:\d\d:\d\d)\)", event.message)
    assert since is not None
    an_hour_ago = {
        time.strftime("%H:%M:%S", time.localtime(time.time() - 3600 - d)) for d in (0, 1, 2)
    }
    assert since.group(1) in an_hour_ago
    assert event.message in caplog.text


@pytest.mark.anyio
async def test_a_stuck_registry_wait_never_holds_a_worker_past_its_hard_limit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The registry's wait() not returning: the worker keeps native at its hard limit."""
    released = threading.Event()
    returned: list[bool] = []

    def stuck(key: str, timeout_s: float) -> Callable[[], None]:
        return lambda: returned.append(released.wait(10))  # a hang guard, not a timing

    registry = busy_registry([], stuck)
    monkeypatch.setattr(_ray_calls, "registry_handle", lambda ray, fresh: registry)
    ray = up()
    ray.get = lambda ref, timeout: _bounded(ref, timeout)
    job = a_job(hard_limit_s=1.0)  # room for the claim's busy reply to come first
    try:
        d = await _ray_claim.coordinated(ray, job, anyio.current_time())
        assert returned == []  # it left the stuck wait behind
    finally:
        released.set()
    assert d is not None and (d.source, d.chunk_size) == ("fallback", None)
    assert "for w1's sweep" in d.reason


def _bounded(ref: Callable[[], Any], timeout: float) -> Any:
    """ray.get(ref, timeout): the call's result, or GetTimeoutError after ``timeout`` seconds."""
    done: list[Any] = []
    worker = threading.Thread(target=lambda: done.append(ref()), daemon=True)
    worker.start()
    worker.join(timeout)
    if not done:
        raise TimeoutError("GetTimeoutError")
    return done[0]


@pytest.mark.anyio
async def test_a_claim_unanswered_at_the_hard_limit_is_abandoned(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A registry that has not answered the claim by the hard limit: native, and abandon follows."""
    sent: list[str] = []
    registry = busy_registry(sent, lambda key, timeout_s: lambda: None)

    def remote_claim(*a: Any, **k: Any) -> Callable[[], None]:
        sent.append("claim")
        return lambda: time.sleep(5)

    registry.claim = types.SimpleNamespace(remote=remote_claim)
    monkeypatch.setattr(_ray_calls, "registry_handle", lambda ray, fresh: registry)
    ray = up()
    ray.get = _bounded
    d = await _ray_claim.coordinated(ray, a_job(hard_limit_s=0.3), anyio.current_time())
    assert d is not None and (d.source, d.chunk_size) == ("fallback", None)
    assert sent == ["claim", "abandon"]


@pytest.mark.anyio
async def test_an_async_waiter_is_told_and_keyed_as_a_plain_resolve(
    isolated: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    """chunktune.ray.resolve tells on_progress of its wait; its native answer has the host's key."""
    monkeypatch.setattr(_lock_wait, "REPORT_AFTER_S", 0.05)
    settings = chunktune.load_settings()
    w = SimulatedWorkload(env_costs("blocked", 64), nthread=2, name="async-wait")
    # 1 s: room for a loaded machine to reach the wait and report it before the limit
    policy = attrs.evolve(settings.get_policy("quick"), time_budget_s=0.5, hard_limit_s=1.0)
    with registry_loop() as loop:
        ray = RegistryRay(loop)
        monkeypatch.setitem(sys.modules, "ray", ray)
        monkeypatch.setattr(_ray_calls, "registry_handle", lambda ray_, fresh: ray.handle)
        asked = ask(
            w, settings=settings, policy=policy, manual=None, refresh=False, on_progress=None
        )
        job = identify(ray, asked, settings)
        ray.run(ray.registry.claim(job.registry_key, "w1", since=None, refresh=False, lease_s=60.0))
        events: list[ProgressEvent] = []
        d = await chunktune.ray.resolve(
            w, settings=settings, policy=policy, on_progress=events.append
        )
    assert (d.source, d.chunk_size, w.calls) == ("fallback", None, 0)
    assert [e.kind for e in events if e.kind == "waiting"] == ["waiting"]
    assert d.key == job.key


def _ray_with_registry(monkeypatch: pytest.MonkeyPatch, loop: Any) -> RegistryRay:
    """A RegistryRay standing in for ``ray`` in this process, its registry the one looked up."""
    ray = RegistryRay(loop)
    monkeypatch.setitem(sys.modules, "ray", ray)
    monkeypatch.setattr(_ray_calls, "registry_handle", lambda ray_, fresh: ray.handle)
    return ray


@pytest.mark.anyio
async def test_a_host_cache_that_stalls_never_holds_a_ray_worker_past_its_hard_limit(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A host's cache lookup that does not return: native at the hard limit, as resolve says it."""
    released = threading.Event()
    returned: list[bool] = []
    real = DecisionCache.lookup

    def stalled(self: DecisionCache, *args: Any, **kwargs: Any) -> Any:
        returned.append(released.wait(10))  # a hang guard, not a timing
        return real(self, *args, **kwargs)

    monkeypatch.setattr(DecisionCache, "lookup", stalled)
    settings = chunktune.load_settings()
    w = SimulatedWorkload(env_costs("blocked", 64), nthread=2, name="stalled-cache")
    policy = attrs.evolve(settings.get_policy("quick"), time_budget_s=0.3, hard_limit_s=0.3)
    try:
        with registry_loop() as loop:
            ray = _ray_with_registry(monkeypatch, loop)
            with caplog.at_level(logging.INFO, logger="chunktune"):
                d = await chunktune.ray.resolve(w, settings=settings, policy=policy)
            assert returned == []  # it left the stalled lookup behind
            job = identify(ray, ask(w, settings=settings, policy=policy, manual=None,
                                    refresh=False, on_progress=None), settings)  # fmt: skip
    finally:
        released.set()
    assert (d.source, d.chunk_size, w.calls) == ("fallback", None, 0)
    assert "signature() (or the cache file) had not answered" in d.reason
    assert ray.sent == [] and d.key == job.key
    assert (d.native_chunk, d.policy) == (job.native, job.policy_name)
    assert f"chunk_size=native (native={job.native}, fallback): {d.reason}" in caplog.text


@pytest.mark.anyio
async def test_a_broken_host_cache_locked_by_a_stuck_process_is_given_up_at_the_hard_limit(
    isolated: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A damaged host cache whose write lock a stopped process holds: native at the hard limit."""
    # the lookup waits (WRITE_STALL_S) for the lock's holder to move the file aside
    cache = isolated / "cache.json"
    cache.write_text("{not json")
    settings = chunktune.load_settings()
    w = SimulatedWorkload(env_costs("blocked", 64), nthread=2, name="locked-cache")
    policy = attrs.evolve(settings.get_policy("quick"), time_budget_s=0.3, hard_limit_s=0.3)
    async with holding_async(lock_path(cache)):
        with registry_loop() as loop:
            ray = _ray_with_registry(monkeypatch, loop)
            d = await chunktune.ray.resolve(w, settings=settings, policy=policy)
    assert (d.source, d.chunk_size, w.calls) == ("fallback", None, 0)
    assert "signature() (or the cache file) had not answered" in d.reason
    assert ray.sent == []


def test_a_ray_workers_settings_file_that_never_answers_is_given_up_at_a_given_limit(
    isolated: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """chunktune.ray.resolve, settings=None and a settings read that blocks: native at the limit."""
    quick = chunktune.load_settings().get_policy("quick")
    policy = attrs.evolve(quick, time_budget_s=0.3, hard_limit_s=0.3)
    w = SimulatedWorkload(env_costs("blocked", 64), nthread=2, name="silent-settings")
    answers: list[chunktune.Decision] = []
    with registry_loop() as loop, silent_settings_file(isolated, monkeypatch):
        ray = _ray_with_registry(monkeypatch, loop)
        resolving = functools.partial(chunktune.ray.resolve, w, policy=policy)
        caller = threading.Thread(target=lambda: answers.append(anyio.run(resolving)), daemon=True)
        caller.start()
        caller.join(30)  # a hang guard, not a timing
        assert answers, "the Ray resolve was still reading the settings file"
    [d] = answers
    assert (d.source, d.chunk_size, w.calls, ray.sent) == ("fallback", None, 0, [])
    assert "while the settings file had not answered" in d.reason


def test_the_time_ray_took_to_import_counts_against_a_given_settings_read_limit(
    isolated: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """hard_limit_s counts from the call: spent importing Ray, the settings read gives up."""
    quick = chunktune.load_settings().get_policy("quick")
    policy = attrs.evolve(quick, time_budget_s=0.2, hard_limit_s=0.2)
    real = ray_module

    def slow_import() -> Any:
        time.sleep(0.4)  # importing Ray outlasts the whole limit
        return real()

    monkeypatch.setattr(_ray_resolve, "ray_module", slow_import)
    w = SimulatedWorkload(env_costs("blocked", 64), nthread=2, name="slow-import")
    with registry_loop() as loop:
        ray = _ray_with_registry(monkeypatch, loop)
        d = anyio.run(functools.partial(chunktune.ray.resolve, w, policy=policy))
    assert (d.source, d.chunk_size, w.calls, ray.sent) == ("fallback", None, 0, [])
    assert "while the settings file had not answered" in d.reason
