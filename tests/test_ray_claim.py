"""chunktune.ray's resolve against the real registry, run in this process (no Ray cluster).

Each test's "hosts" are settings that name their own cache file; the registry is the
real :class:`Registry` on a loop thread of its own, as the cluster's actor would be.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import math
import re
import sys
import threading
import time
import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import attrs
import numpy as np
import pytest
from _clock import jump_own_loop_when
from _registry_ray import RegistryRay, registry_loop

import chunktune
import chunktune.ray
from chunktune import _failures, _lock_wait, _ray_calls, _ray_claim, _ray_cluster, _ray_registry
from chunktune._ray_job import entry_of, identify, local_hit, native_decision
from chunktune._request import ask
from chunktune.sim import SimulatedWorkload, env_costs


class Slow:
    """The simulated workload's modeled seconds, plus a real sleep per call; may fail."""

    def __init__(self, name: str, sleep_s: float = 0.0, *, fail: bool = False) -> None:
        self.inner = SimulatedWorkload(env_costs("blocked", 64), nthread=2, name=name)
        self.num_envs, self.nthread = self.inner.num_envs, self.inner.nthread
        self.sleep_s, self.fail = sleep_s, fail
        self.calls = 0

    def signature(self) -> dict[str, Any]:
        return dict(self.inner.signature())

    def run(self, chunk_size: int | None) -> float:
        time.sleep(self.sleep_s)
        if self.fail:
            raise RuntimeError("the simulator broke")
        self.calls += 1
        return self.inner.run(chunk_size)


@pytest.fixture
def ray(isolated: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[RegistryRay]:
    """Ray, connected, on node type "a", whose registry is this process's own."""
    with registry_loop() as loop:
        fake = RegistryRay(loop)
        monkeypatch.setitem(sys.modules, "ray", fake)
        monkeypatch.setattr(_ray_calls, "registry_handle", lambda ray, fresh: fake.handle)
        yield fake


def host(name: str, tmp: Path, policy: str | chunktune.Policy = "quick", **ray: Any) -> Any:
    """The settings of host ``name``: its own cache file; [ray] options as given."""
    settings = chunktune.load_settings()
    return attrs.evolve(
        settings,
        cache=attrs.evolve(settings.cache, path=str(tmp / name / "cache.json")),
        ray=attrs.evolve(settings.ray, **ray),
        policy=policy if isinstance(policy, str) else settings.policy,
    )


def events(ray: RegistryRay) -> list[str]:
    return [e["event"] for e in ray.run(ray.registry.events())]


def registry_key(ray: RegistryRay, workload: Slow, settings: chunktune.Settings) -> str:
    asked = ask(
        workload, settings=settings, policy=None, manual=None, refresh=False, on_progress=None
    )
    return identify(ray, asked, settings).registry_key


def in_background(call: Any) -> tuple[threading.Thread, list[Any]]:
    """Run ``call()`` on a thread; its result lands in the list."""
    out: list[Any] = []
    thread = threading.Thread(target=lambda: out.append(call()), daemon=True)
    thread.start()
    return thread, out


def wait_for(ray: RegistryRay, event: str) -> None:
    """Return once the registry has recorded ``event`` (a hang guard of 60 s)."""
    deadline = time.monotonic() + 60
    while event not in events(ray):
        assert time.monotonic() < deadline
        time.sleep(0.01)


def test_a_hit_in_the_hosts_cache_never_asks_the_registry(ray: RegistryRay, isolated: Path) -> None:
    """A job this host's cache answers is answered there: no registry call at all."""
    here = host("h1", isolated)
    first = chunktune.ray.resolve_sync(Slow("hit"), settings=here)
    assert first.source == "benchmark" and events(ray) == ["claim", "publish"]
    sent = list(ray.sent)
    again = chunktune.ray.resolve_sync(Slow("hit"), settings=here)
    assert (again.source, again.chunk_size) == ("cache", first.chunk_size)
    assert "node type" not in again.reason  # the host's own entry, not the registry's
    assert ray.sent == sent


def test_a_hit_in_the_system_layer_never_asks_the_registry(
    ray: RegistryRay, isolated: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A job only the read-only system cache answers is answered there, not shared again."""
    chunktune.resolve_sync(Slow("layer"), settings=host("image", isolated))
    monkeypatch.setenv("CHUNKTUNE_SYSTEM_CACHE", str(isolated / "image" / "cache.json"))
    here = host("h1", isolated)
    decision = chunktune.ray.resolve_sync(Slow("layer"), settings=here)
    assert decision.source == "cache" and ray.sent == []


def test_a_host_without_a_cache_still_shares_one_sweep(ray: RegistryRay, isolated: Path) -> None:
    """Caching off on a host: its resolve goes to the registry, and adopts the type's answer."""
    swept = chunktune.ray.resolve_sync(Slow("nocache"), settings=host("h1", isolated))
    off = host("h2", isolated)
    off = attrs.evolve(off, cache=attrs.evolve(off.cache, enabled=False))
    workload = Slow("nocache")
    adopted = chunktune.ray.resolve_sync(workload, settings=off)
    assert (adopted.chunk_size, workload.calls) == (swept.chunk_size, 0)
    assert "node type a's answer" in adopted.reason


@pytest.mark.anyio
async def test_refresh_through_ray_sweeps_again_past_both_caches(
    ray: RegistryRay, isolated: Path
) -> None:
    """refresh=True (sync and async) ignores the host's entry and the registry's answer."""
    here = host("h1", isolated)
    await chunktune.ray.resolve(Slow("fresh"), settings=here)
    again = Slow("fresh")
    refreshed = await chunktune.ray.resolve(again, settings=here, refresh=True)
    assert refreshed.source == "benchmark" and again.calls > 0
    synced = Slow("fresh")
    blocking = await anyio.to_thread.run_sync(
        lambda: chunktune.ray.resolve_sync(synced, settings=here, refresh=True)
    )
    assert blocking.source == "benchmark" and synced.calls > 0
    assert events(ray) == ["claim", "publish"] * 3


def test_another_hosts_worker_adopts_the_answer_and_it_is_reported(
    ray: RegistryRay, isolated: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A worker on another host stores the type's answer and reports it as a resolve does."""
    swept = chunktune.ray.resolve_sync(Slow("shared"), settings=host("h1", isolated))
    other = host("h2", isolated)
    workload = Slow("shared")
    with caplog.at_level(logging.INFO, logger="chunktune"):
        adopted = chunktune.ray.resolve_sync(workload, settings=other)
    assert (adopted.source, adopted.chunk_size, workload.calls) == ("cache", swept.chunk_size, 0)
    assert adopted.native_chunk == swept.native_chunk
    assert adopted.reason in caplog.text
    assert chunktune.DecisionCache(isolated / "h2" / "cache.json").get(adopted.key) is not None


class NumpySigned(Slow):
    """A workload whose signature holds numpy numbers, as resolve takes them."""

    def signature(self) -> dict[str, Any]:
        return {**self.inner.signature(), "nstep": np.int64(8), "contact": np.bool_(True)}


def test_a_signature_of_numpy_numbers_keys_a_ray_resolve_as_a_plain_one(
    ray: RegistryRay, isolated: Path
) -> None:
    """numpy numbers in signature(): an answer adopted on a host is its resolves' hit later."""
    swept = chunktune.ray.resolve_sync(NumpySigned("np"), settings=host("h1", isolated))
    adopted = chunktune.ray.resolve_sync(NumpySigned("np"), settings=host("h2", isolated))
    again, plain = NumpySigned("np"), NumpySigned("np")
    later = chunktune.ray.resolve_sync(again, settings=host("h2", isolated))
    local = chunktune.resolve_sync(plain, settings=host("h2", isolated))
    assert (adopted.source, later.source, local.source) == ("cache", "cache", "cache")
    assert (again.calls, plain.calls) == (0, 0)
    assert adopted.key == swept.key == later.key == local.key  # one machine: one key


def test_a_cluster_sweep_of_numpy_numbers_is_stored_where_other_nodes_look(
    ray: RegistryRay, isolated: Path
) -> None:
    """tune_cluster's answer for a numpy-signed workload is a plain resolve's hit on other nodes."""
    swept = _ray_cluster._sweep_on_node(lambda: NumpySigned("np"), None, host("h1", isolated))
    assert swept.entry is not None
    _ray_cluster._store_here(host("h2", isolated), swept)
    plain = NumpySigned("np")
    local = chunktune.resolve_sync(plain, settings=host("h2", isolated))
    assert (local.source, plain.calls, local.key) == ("cache", 0, swept.decision.key)


@pytest.mark.parametrize(
    "keywords",
    [
        pytest.param({"manual": 4}, id="manual"),
        pytest.param({"policy": "off"}, id="disabled"),
        pytest.param({"manual": 4, "settings": "loaded"}, id="manual-with-settings"),
    ],
)
def test_a_resolve_with_nothing_to_ask_never_needs_ray_up(
    monkeypatch: pytest.MonkeyPatch, keywords: dict[str, Any]
) -> None:
    """A manual size or the off policy is answered without Ray connected, as resolve answers."""
    down = type("Down", (), {"is_initialized": staticmethod(lambda: False)})()
    monkeypatch.setitem(sys.modules, "ray", down)
    if keywords.get("settings") == "loaded":
        keywords = {**keywords, "settings": chunktune.load_settings()}
    workload = Slow("nothing")
    plain = chunktune.resolve_sync(workload, **keywords)
    on_ray = chunktune.ray.resolve_sync(workload, **keywords)
    assert (on_ray.source, on_ray.chunk_size) == (plain.source, plain.chunk_size)
    assert workload.calls == 0


def test_a_manual_size_on_ray_never_reads_the_settings_file(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A manual size is answered on Ray with the settings file broken, as resolve answers it."""
    down = type("Down", (), {"is_initialized": staticmethod(lambda: False)})()
    monkeypatch.setitem(sys.modules, "ray", down)
    broken = tmp_path / "chunktune.toml"
    broken.write_text("[policy\n")
    monkeypatch.setenv("CHUNKTUNE_CONFIG", str(broken))
    workload = Slow("manual-broken-settings")
    plain = chunktune.resolve_sync(workload, manual=4)
    on_ray = chunktune.ray.resolve_sync(workload, manual=4)
    assert (on_ray.source, on_ray.chunk_size) == (plain.source, plain.chunk_size) == ("manual", 4)


def test_a_worker_given_no_settings_reads_them_and_claims_through_the_registry(
    ray: RegistryRay, isolated: Path
) -> None:
    """settings=None on Ray: the settings discovered, the sweep claimed through the registry."""
    decision = chunktune.ray.resolve_sync(Slow("no-settings"), policy="quick")
    assert decision.source == "benchmark" and "claim" in ray.sent


def test_a_failing_signature_falls_back_without_asking_the_registry(
    ray: RegistryRay, isolated: Path
) -> None:
    """signature() raising: native, the error in the reason, and no claim anyone waits on."""

    class Broken(Slow):
        def signature(self) -> dict[str, Any]:
            raise ValueError("no signature today")

    decision = chunktune.ray.resolve_sync(Broken("broken"), settings=host("h1", isolated))
    assert (decision.source, decision.chunk_size) == ("fallback", None)
    assert "no signature today" in decision.reason
    assert ray.sent == []


def test_a_signature_slower_than_the_hard_limit_asks_no_registry(
    ray: RegistryRay, isolated: Path
) -> None:
    """Keying past hard_limit_s: the plain resolve's fallback, and no claim made."""

    class SlowKey(Slow):
        keyed = 0

        def signature(self) -> dict[str, Any]:
            SlowKey.keyed += 1
            if SlowKey.keyed == 1:
                time.sleep(0.6)  # the first keying, the Ray one, outlasts the limit
            return super().signature()

    here = host("h1", isolated)
    limited = attrs.evolve(here.get_policy("quick"), hard_limit_s=0.3, time_budget_s=0.3)
    decision = chunktune.ray.resolve_sync(SlowKey("slowkey"), settings=here, policy=limited)
    assert (decision.source, decision.chunk_size) == ("fallback", None)
    assert ray.sent == []


def test_a_ray_resolve_falls_back_at_the_hard_limit_while_signature_still_blocks(
    ray: RegistryRay, isolated: Path
) -> None:
    """signature() blocking past hard_limit_s: the Ray resolve falls back without waiting for it."""
    release = threading.Event()
    returned: list[bool] = []

    class Blocking(Slow):
        keyed = 0

        def signature(self) -> dict[str, Any]:
            Blocking.keyed += 1
            if Blocking.keyed == 1:  # the Ray keying: blocks until the test lets it go
                release.wait(10.0)  # not a speed limit: the resolve must not wait this out
                returned.append(True)
            return super().signature()

    here = host("h1", isolated)
    limited = attrs.evolve(here.get_policy("quick"), hard_limit_s=0.3, time_budget_s=0.3)
    try:
        decision = chunktune.ray.resolve_sync(Blocking("blocking"), settings=here, policy=limited)
        assert returned == []
    finally:
        release.set()
    assert (decision.source, decision.chunk_size) == ("fallback", None)


def test_a_wait_is_due_for_a_report_counting_from_its_first_busy_reply(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """busy() says a report is due REPORT_AFTER_S after the first busy reply, not after each."""
    clock = [100.0]
    monkeypatch.setattr(anyio, "current_time", lambda: clock[0])
    monkeypatch.setattr(_lock_wait, "REPORT_AFTER_S", 2.0)
    waiting = _ray_claim._Waiting("t", None)
    assert waiting.busy("w1", None) == 2.0
    clock[0] = 101.5
    assert waiting.busy("w1", None) == 0.5


def test_an_unreachable_registry_leaves_a_resolve_on_the_host_alone(
    ray: RegistryRay,
    isolated: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """No registry to be had: a warning, then the host measures and caches for itself."""

    def gone(ray: object, fresh: bool) -> object:
        raise ConnectionError("no head node")

    monkeypatch.setattr(_ray_calls, "registry_handle", gone)
    with caplog.at_level(logging.WARNING, logger="chunktune"):
        decision = chunktune.ray.resolve_sync(Slow("alone"), settings=host("h1", isolated))
    assert decision.source == "benchmark"
    assert "registry is unreachable" in caplog.text


def test_a_bug_while_looking_the_registry_up_resolves_on_the_host_and_blames_chunktune(
    ray: RegistryRay,
    isolated: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A bug in registry_handle: logged as chunktune's (not "unreachable"); the host resolves."""
    monkeypatch.setattr(_ray_calls, "registry_handle", _ray_registry.registry_handle)
    monkeypatch.setattr(_ray_registry, "_handles", None)  # `job in None`: a TypeError in it
    with caplog.at_level(logging.WARNING, logger="chunktune"):
        decision = chunktune.ray.resolve_sync(Slow("alone"), settings=host("h1", isolated))
    assert decision.source == "benchmark"
    [logged] = _bugs(caplog)
    assert isinstance(logged, TypeError)
    assert (
        "chunktune failed while looking up the Ray registry (TypeError), a bug in chunktune"
        in caplog.text
    )
    assert "resolving on this host alone, without the Ray registry" in caplog.text
    assert "unreachable" not in caplog.text
    assert ray.sent == []  # no registry call was made


def test_only_what_chunktunes_own_code_raised_is_blamed_on_chunktune() -> None:
    """An exception raised in a chunktune module is chunktune's; one raised elsewhere is not."""

    def elsewhere() -> None:
        raise ConnectionError("no head node")

    with pytest.raises(AttributeError) as ours:
        _ray_registry.registry_handle(None)
    with pytest.raises(ConnectionError) as theirs:
        elsewhere()
    assert _failures.raised_by_chunktune(ours.value)
    assert not _failures.raised_by_chunktune(theirs.value)
    assert not _failures.raised_by_chunktune(TypeError("never raised"))


@pytest.mark.anyio
async def test_a_sweep_cancelled_midway_gives_its_claim_back(
    ray: RegistryRay, isolated: Path
) -> None:
    """A trainer's timeout around the claimant's resolve: the claim is released at once."""
    with anyio.move_on_after(0.5):
        await chunktune.ray.resolve(Slow("cancelled", 0.05), settings=host("h1", isolated))
    await anyio.to_thread.run_sync(wait_for, ray, "release")
    assert events(ray) == ["claim", "release"]


def parked(ray: RegistryRay) -> tuple[int, int]:
    """How many threads wait in ``ray.get`` here, and how many waits the registry runs."""
    getting = sum(
        any(f.f_code is RegistryRay.get.__code__ for f, _ in traceback.walk_stack(frame))
        for frame in sys._current_frames().values()
    )

    async def waits() -> int:
        return sum(
            getattr(t.get_coro(), "__qualname__", "") == "Registry.wait"
            for t in asyncio.all_tasks()
        )

    return getting, ray.run(waits())


def settle(ray: RegistryRay, want: tuple[int, int]) -> None:
    """Return once :func:`parked` says ``want`` (a hang guard of 30 s)."""
    deadline = time.monotonic() + 30
    while (now := parked(ray)) != want:
        assert time.monotonic() < deadline, f"still parked: {now}"
        time.sleep(0.01)


@pytest.mark.anyio
async def test_a_waiter_cancelled_mid_wait_leaves_no_thread_or_registry_wait_behind(
    ray: RegistryRay, isolated: Path
) -> None:
    """A waiter cancelled in an hour-long wait slice: its thread and its registry wait both end."""
    here = host("h2", isolated, lease_s=3600.0)
    workload = Slow("parked")
    key = registry_key(ray, workload, here)
    ray.run(ray.registry.claim(key, "w1", since=None, refresh=False, lease_s=3600.0))
    told = anyio.Event()
    async with anyio.create_task_group() as tg:
        tg.start_soon(
            functools.partial(
                chunktune.ray.resolve, workload, settings=here, on_progress=lambda e: told.set()
            )
        )
        await told.wait()  # told once, its next slice is a lease long
        await anyio.to_thread.run_sync(settle, ray, (1, 1))
        tg.cancel_scope.cancel()
    # the slice it left lasts an hour
    await anyio.to_thread.run_sync(settle, ray, (0, 0))
    assert workload.calls == 0


@pytest.mark.anyio
async def test_a_claimant_whose_resolve_raises_gives_the_claim_back(
    ray: RegistryRay, isolated: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The claimant's own resolve raising: the error propagates and the claim is released."""

    async def broken(started: float, asked: object) -> chunktune.Decision:
        raise chunktune.ConfigError("the settings changed under it")

    monkeypatch.setattr(_ray_claim, "resolve_since", broken)
    with pytest.raises(chunktune.ConfigError):
        await chunktune.ray.resolve(Slow("raises"), settings=host("h1", isolated))
    await anyio.to_thread.run_sync(wait_for, ray, "release")
    assert events(ray) == ["claim", "release"]


def test_a_sweep_longer_than_its_lease_keeps_its_claim(ray: RegistryRay, isolated: Path) -> None:
    """Heartbeats renew the lease: a claim older than several leases is still busy."""
    here = host("h1", isolated, lease_s=0.2)
    workload = Slow("long", 0.05)
    sweeper, done = in_background(lambda: chunktune.ray.resolve_sync(workload, settings=here))
    wait_for(ray, "claim")
    time.sleep(1.0)  # five leases
    key = registry_key(ray, workload, here)
    reply = ray.run(ray.registry.claim(key, "w2", since=None, refresh=False, lease_s=0.2))
    sweeper.join(120)
    assert reply["state"] == "busy"
    assert done[0].source == "benchmark" and "expired" not in events(ray)


def test_a_failed_sweep_is_told_to_its_waiters_with_who_failed_and_why(
    ray: RegistryRay, isolated: Path
) -> None:
    """A waiter of a sweep that fails keeps native; its reason names the claimant and the error."""
    workload = Slow("fails", 0.3, fail=True)
    sweeper, _ = in_background(
        lambda: chunktune.ray.resolve_sync(workload, settings=host("h1", isolated))
    )
    wait_for(ray, "claim")
    waiter = chunktune.ray.resolve_sync(Slow("fails"), settings=host("h2", isolated))
    sweeper.join(120)
    holder = ray.run(ray.registry.events())[0]["holder"]
    assert (waiter.source, waiter.chunk_size) == ("fallback", None)
    assert re.search(
        rf"sweep by {re.escape(holder)} failed \(.*the simulator broke.*\)", waiter.reason
    ), waiter.reason


def test_a_sweep_that_timed_only_native_gives_its_claim_back(
    ray: RegistryRay, isolated: Path
) -> None:
    """A claimant whose budget timed native alone shares nothing: the next worker claims."""
    slow = SimulatedWorkload([0.5] * 64, nthread=2, name="native-only")  # a call past the budget
    here = host("h1", isolated, policy="balanced")
    decision = chunktune.ray.resolve_sync(slow, settings=here)
    assert all(c is None for c in decision.timings)
    assert events(ray) == ["claim", "release"]


def test_a_claimant_stopped_by_its_own_hard_limit_gives_the_claim_back(
    ray: RegistryRay, isolated: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its hard_limit_s, not the workload, ended the sweep: released, never failed for all."""
    stalled, release = threading.Event(), threading.Event()

    class Stalls(Slow):
        def run(self, chunk_size: int | None) -> float:
            if self.calls == 0:
                # the first call outlasts the hard limit: a later one could come after the
                # budget, which a busy machine spends on the first calls alone
                stalled.set()
                release.wait(60)  # a hang guard, not a timing
            return super().run(chunk_size)

    here = host("h1", isolated)
    # 1 s: a loaded machine may take longer than 0.3 s to claim before the first call
    limited = attrs.evolve(here.get_policy("quick"), hard_limit_s=1.0, time_budget_s=0.05)
    jump_own_loop_when(monkeypatch, stalled, 1.0)  # the limit: in the first call
    try:
        decision = chunktune.ray.resolve_sync(Stalls("limited"), settings=here, policy=limited)
    finally:
        release.set()
    assert (decision.source, decision.chunk_size) == ("fallback", None)
    assert events(ray) == ["claim", "release"]


def test_a_takeover_is_reported(
    ray: RegistryRay, isolated: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A worker that takes a lapsed claim over says whose it was, and the lease it lapsed after."""
    here = host("h1", isolated, lease_s=0.1)
    key = registry_key(ray, Slow("taken"), here)
    ray.run(ray.registry.claim(key, "dead-worker", since=None, refresh=False, lease_s=0.1))
    time.sleep(0.2)  # its lease lapses
    with caplog.at_level(logging.INFO, logger="chunktune"):
        decision = chunktune.ray.resolve_sync(Slow("taken"), settings=here)
    assert decision.source == "benchmark"
    assert "took over the sweep from dead-worker" in caplog.text
    assert "(its claim lapsed: no heartbeat for 0.1 s)" in caplog.text


def test_a_waiter_at_its_hard_limit_says_whose_sweep_it_waited_for(
    ray: RegistryRay, isolated: Path
) -> None:
    """A waiter out of time keeps native, naming the sweep it waited for and its hard limit."""
    here = host("h1", isolated)
    key = registry_key(ray, Slow("waited"), here)
    ray.run(ray.registry.claim(key, "w1", since=None, refresh=False, lease_s=60.0))
    # 1 s: room for a loaded machine to have the registry's busy reply before the limit
    limited = attrs.evolve(here.get_policy("quick"), hard_limit_s=1.0, time_budget_s=0.3)
    decision = chunktune.ray.resolve_sync(Slow("waited"), settings=here, policy=limited)
    assert (decision.source, decision.chunk_size) == ("fallback", None)
    assert "waited until the hard limit of 1 s (hard_limit_s) for w1's sweep" in decision.reason


@pytest.mark.anyio
async def test_a_registry_that_cannot_take_the_answer_leaves_the_decision_standing(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Publishing past the hard limit or to a registry gone: no error; only a gone one warned of."""
    up = type("Up", (), {"is_initialized": staticmethod(lambda: True)})()

    def stuck(ref: object, timeout: float) -> object:
        time.sleep(timeout)
        raise TimeoutError("GetTimeoutError")

    def broken(ref: object, timeout: float) -> object:
        raise ConnectionError("the registry died")

    up.get = stuck
    with caplog.at_level(logging.WARNING, logger="chunktune"):
        await _ray_claim._publish(up, lambda: "ref", anyio.current_time() + 0.2)
    assert caplog.text == ""  # sent before the limit: Ray delivers it, nothing went wrong
    up.get = broken
    with caplog.at_level(logging.WARNING, logger="chunktune"):
        await _ray_claim._publish(up, lambda: "ref", anyio.current_time() + 60)
    assert "could not publish to the registry (ConnectionError: the registry died)" in caplog.text


def test_a_claim_lapses_after_the_settings_lease_even_before_a_heartbeat(
    ray: RegistryRay, isolated: Path
) -> None:
    """A claimant's claim is granted for its [ray] lease_s: one killed at once frees it by then."""
    here = host("h1", isolated, lease_s=5.0)
    workload = Slow("leased", 0.05)
    sweeper, _ = in_background(lambda: chunktune.ray.resolve_sync(workload, settings=here))
    wait_for(ray, "claim")
    key = registry_key(ray, workload, here)
    reply = ray.run(ray.registry.claim(key, "w2", since=None, refresh=False, lease_s=5.0))
    sweeper.join(120)
    assert reply["state"] == "busy" and reply["lease_left_s"] <= 5.0


def _job(ray: RegistryRay, isolated: Path) -> Any:
    settings = host("h2", isolated)
    asked = ask(
        Slow("shared"), settings=settings, policy=None, manual=None, refresh=False, on_progress=None
    )
    return identify(ray, asked, settings)


@pytest.mark.parametrize(
    ("policy_hash", "suffix"),
    [pytest.param("stronger", "stronger", id="another-policy"),
     pytest.param("", None, id="no-policy-named")],
)  # fmt: skip
def test_a_shared_answer_is_stored_under_the_key_of_the_policy_it_names(
    ray: RegistryRay, isolated: Path, policy_hash: str, suffix: str | None
) -> None:
    """An adopted answer is stored under its entry's policy's key (none named: this worker's)."""
    job = _job(ray, isolated)
    entry = chunktune.CacheEntry(
        chunk_size=8, native_chunk=job.native, reason="measured", policy_hash=policy_hash
    )
    decision = anyio.run(_ray_claim._adopt, job, entry, "w1", math.inf)
    key = job.key if suffix is None else f"{job.key.rpartition('.')[0]}.{suffix}"
    assert decision.key == key
    assert chunktune.DecisionCache(isolated / "h2" / "cache.json").get(key) is not None


def test_a_native_fallback_of_the_registry_protocol_names_the_policy(
    ray: RegistryRay, isolated: Path
) -> None:
    """A worker's native fallback (a wait given up, a failed sweep) names its policy."""
    decision = native_decision(_job(ray, isolated), "why")
    assert (decision.source, decision.policy) == ("fallback", "quick")


def test_a_native_fallback_of_the_registry_protocol_says_it_kept_native(
    ray: RegistryRay, isolated: Path
) -> None:
    """A worker's native fallback reads 'kept the native chunk N: ' and then why."""
    job = _job(ray, isolated)
    decision = native_decision(job, "why")
    assert decision.reason == f"kept the native chunk {job.native}: why"


def test_a_claimants_read_back_that_does_not_answer_publishes_at_its_hard_limit(
    ray: RegistryRay, isolated: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A read-back of the stored entry that never answers: published at the limit, all the same."""
    # a stalled file system under the host's cache: the entry built from the decision goes
    reading, release, freed = threading.Event(), threading.Event(), []
    read_back = entry_of

    def stalled(*args: Any, **kwargs: Any) -> Any:
        reading.set()
        freed.append(release.wait(60))  # a hang guard, not a timing
        return read_back(*args, **kwargs)

    monkeypatch.setattr(_ray_claim, "entry_of", stalled)
    here = host("h1", isolated)
    # a 1 s budget of modeled seconds still times candidates (worth publishing): its sweep
    # takes about 0.05 s, so a limit of 1 s (the least that budget allows) leaves it near
    # 1 s of slack on a busy machine, and the stuck read-back is waited out for 1 s, not 3
    limited = attrs.evolve(here.get_policy("quick"), time_budget_s=1.0, hard_limit_s=1.0)
    jump_own_loop_when(monkeypatch, reading, 1.0)  # the limit: in the read-back
    try:
        swept = chunktune.ray.resolve_sync(Slow("stalled"), settings=here, policy=limited)
        assert freed == []  # returned while the read-back was still stuck
    finally:
        release.set()
    assert swept.source == "benchmark" and events(ray) == ["claim", "publish"]
    workload = Slow("stalled")  # another host's worker adopts what was published
    adopted = chunktune.ray.resolve_sync(workload, settings=host("h2", isolated), policy=limited)
    assert (adopted.source, adopted.chunk_size, workload.calls) == ("cache", swept.chunk_size, 0)


def test_an_entry_published_past_a_stuck_read_back_describes_the_workload_as_stored(
    ray: RegistryRay, isolated: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The entry built from the decision at the limit says what the host's own entry says."""
    reading, release, read_back = threading.Event(), threading.Event(), entry_of

    def stalled(*args: Any, **kwargs: Any) -> Any:
        reading.set()
        release.wait(60)  # a hang guard, not a timing
        return read_back(*args, **kwargs)

    monkeypatch.setattr(_ray_claim, "entry_of", stalled)
    here = host("h1", isolated)
    # a 1 s budget of modeled seconds still times candidates (worth publishing): its sweep
    # takes about 0.05 s, so a limit of 1 s (the least that budget allows) leaves it near
    # 1 s of slack on a busy machine, and the stuck read-back is waited out for 1 s, not 3
    limited = attrs.evolve(here.get_policy("quick"), time_budget_s=1.0, hard_limit_s=1.0)
    scene = isolated / "scene.xml"
    scene.write_text("<mujoco/>")
    workload = Slow("described")
    workload.model_file = str(scene)  # type: ignore[attr-defined]
    jump_own_loop_when(monkeypatch, reading, 1.0)  # the limit: in the read-back
    try:
        chunktune.ray.resolve_sync(workload, settings=here, policy=limited)
    finally:
        release.set()
    other = Slow("described")
    other.model_file = str(scene)  # type: ignore[attr-defined]
    adopted = chunktune.ray.resolve_sync(other, settings=host("h2", isolated), policy=limited)
    assert adopted.source == "cache" and other.calls == 0
    (stored,) = chunktune.DecisionCache(isolated / "h1" / "cache.json").entries().values()
    (shared,) = chunktune.DecisionCache(isolated / "h2" / "cache.json").entries().values()
    fields = ("chunk_size", "num_envs", "nthread", "signature", "device", "model_file")
    assert [getattr(shared, f) for f in fields] == [getattr(stored, f) for f in fields]
    assert (stored.num_envs, stored.nthread) == (workload.num_envs, workload.nthread)


def test_a_claimant_that_finds_its_hosts_cache_answered_publishes_the_entry_stored_there(
    ray: RegistryRay, isolated: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A claimant whose host's cache answered since its look publishes that entry as stored."""
    from chunktune import _ray_resolve

    here = host("h1", isolated)
    chunktune.resolve_sync(Slow("raced"), settings=here)  # another process of h1 measured it
    mine = chunktune.DecisionCache(isolated / "h1" / "cache.json")
    ((key, entry),) = mine.entries().items()
    measured = attrs.evolve(entry, host="vm", created=entry.created - 3600.0)
    assert mine.put(key, measured)
    # ...after this worker looked in h1's cache and before it claimed the job
    looked = local_hit
    missed: list[Any] = []  # the job this worker looked for

    def stale(job: Any) -> bool:
        if not missed:  # this worker's look only; h2's looks in its own cache as usual
            missed.append(job)
            return False
        return bool(looked(job))

    monkeypatch.setattr(_ray_resolve, "local_hit", stale)
    workload = Slow("raced")
    claimed = chunktune.ray.resolve_sync(workload, settings=here)
    assert (claimed.source, workload.calls) == ("cache", 0)
    assert events(ray) == ["claim", "publish"]
    adopted = chunktune.ray.resolve_sync(Slow("raced"), settings=host("h2", isolated))
    assert adopted.source == "cache" and "measured on vm" in adopted.reason
    (shared,) = chunktune.DecisionCache(isolated / "h2" / "cache.json").entries().values()
    assert (shared.host, shared.created) == ("vm", measured.created)


def _bugs(caplog: pytest.LogCaptureFixture) -> list[BaseException | None]:
    """The exceptions logged with a traceback (chunktune's bugs, via log_bug)."""
    return [r.exc_info[1] for r in caplog.records if r.exc_info]


def test_a_bug_while_publishing_keeps_the_claimants_decision_and_gives_the_claim_back(
    ray: RegistryRay,
    isolated: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The claimant's read-back raising: its decision and entry stand, the claim is released."""
    bug = TypeError("a bug reading the entry back")

    def raising(*args: object, **kwargs: object) -> object:
        raise bug

    monkeypatch.setattr(_ray_claim, "entry_of", raising)
    with caplog.at_level(logging.WARNING, logger="chunktune"):
        decision = chunktune.ray.resolve_sync(Slow("unpublished"), settings=host("h1", isolated))
    assert decision.source == "benchmark" and _bugs(caplog) == [bug]
    assert chunktune.DecisionCache(isolated / "h1" / "cache.json").get(decision.key) is not None
    wait_for(ray, "release")
    assert events(ray) == ["claim", "release"]
    # the type's next worker claims at once (no lease to wait out) and measures
    other = Slow("unpublished")
    assert chunktune.ray.resolve_sync(other, settings=host("h2", isolated)).source == "benchmark"


@pytest.mark.parametrize(
    "where",
    [
        pytest.param("chunktune._ray_claim.entry_decision", id="adopting"),
        pytest.param("chunktune._ray_resolve.only_native", id="policy-checks"),
    ],
)
def test_a_bug_in_a_ray_resolve_outside_keying_keeps_native_and_blames_chunktune(
    ray: RegistryRay,
    isolated: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    where: str,
) -> None:
    """chunktune's own code raising around the registry: native, the bug's traceback logged."""
    chunktune.ray.resolve_sync(Slow("buggy"), settings=host("h1", isolated))
    bug = TypeError("a bug in chunktune")

    def raising(*args: object, **kwargs: object) -> object:
        raise bug

    monkeypatch.setattr(where, raising)
    workload = Slow("buggy")
    with caplog.at_level(logging.WARNING, logger="chunktune"):
        decision = chunktune.ray.resolve_sync(workload, settings=host("h2", isolated))
    assert (decision.source, decision.chunk_size, workload.calls) == ("fallback", None, 0)
    assert "chunktune failed while resolving (TypeError: a bug in chunktune" in decision.reason
    assert _bugs(caplog) == [bug]


def test_a_ray_resolve_whose_ray_fails_to_start_keeps_native_with_rays_error(
    isolated: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Ray's own start-up failure under init_local: native, its error in the reason, no bug."""
    import types

    def refuse() -> None:
        raise RuntimeError("no room for Ray's object store")

    fake = types.SimpleNamespace(is_initialized=lambda: False, init=refuse)
    monkeypatch.setitem(sys.modules, "ray", fake)
    workload = Slow("no-ray")
    with caplog.at_level(logging.WARNING, logger="chunktune"):
        decision = chunktune.ray.resolve_sync(
            workload, settings=host("h1", isolated, init_local=True)
        )
    assert (decision.source, decision.chunk_size, workload.calls) == ("fallback", None, 0)
    assert "failed (RuntimeError: no room for Ray's object store)" in decision.reason
    assert _bugs(caplog) == []


@pytest.mark.anyio
async def test_a_deliberate_error_in_a_ray_resolve_is_still_raised(
    ray: RegistryRay, isolated: Path
) -> None:
    """An unknown policy's name given to chunktune.ray.resolve is the caller's error, raised."""
    with pytest.raises(chunktune.ConfigError, match="nosuch"):
        await chunktune.ray.resolve(Slow("unknown"), settings=host("h1", isolated), policy="nosuch")


def test_a_bug_inside_the_registry_keeps_native_and_blames_chunktune(
    ray: RegistryRay,
    isolated: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The actor's own code raising in a claim: native, the bug logged, never "unreachable"."""
    bug = TypeError("a bug in the registry")
    noted = ray.registry._note

    def note(key: str, event: str, holder: str | None, **extra: Any) -> None:
        if event == "claim":
            raise bug  # after the claim was granted: the slot is held
        noted(key, event, holder, **extra)

    monkeypatch.setattr(ray.registry, "_note", note)
    here = host("h1", isolated)
    workload = Slow("inside")
    with caplog.at_level(logging.WARNING, logger="chunktune"):
        decision = chunktune.ray.resolve_sync(workload, settings=here)
    assert (decision.source, decision.chunk_size, workload.calls) == ("fallback", None, 0)
    assert (
        "chunktune failed while asking the Ray registry (TypeError: a bug in the registry; "
        "a bug in chunktune, its traceback logged); nothing was cached" in decision.reason
    )
    [logged] = _bugs(caplog)
    assert isinstance(logged, _ray_calls.RegistryBug) and logged.raised is bug
    assert "unreachable" not in caplog.text
    # the claim granted before the bug was abandoned: the type's next worker claims at once
    monkeypatch.setattr(ray.registry, "_note", noted)
    key = registry_key(ray, Slow("inside"), here)
    reply = ray.run(ray.registry.claim(key, "w2", since=None, refresh=False, lease_s=60.0))
    assert reply["state"] == "claimed"


def test_rays_wrapping_of_an_actors_exception_is_told_from_rays_own_failures() -> None:
    """A RayTaskError's cause is the actor's own exception; a dead actor or a timeout is Ray's."""
    ray_ = pytest.importorskip("ray")
    errors = ray_.exceptions
    bug = TypeError("a bug")
    wrapped = errors.RayTaskError("claim", "Traceback ...", bug, proctitle="p", pid=1, ip="ip")
    assert _ray_calls.raised_in_actor(ray_, wrapped.as_instanceof_cause()) is bug
    assert _ray_calls.raised_in_actor(ray_, wrapped) is bug
    rays_own = errors.RayTaskError("claim", "tb", errors.RaySystemError("x"), "p", 1, "ip")
    assert _ray_calls.raised_in_actor(ray_, rays_own) is None
    assert _ray_calls.raised_in_actor(ray_, errors.ActorDiedError()) is None
    assert _ray_calls.raised_in_actor(ray_, errors.GetTimeoutError("late")) is None
    assert _ray_calls.raised_in_actor(object(), TypeError("no Ray exceptions here")) is None


def test_a_bug_telling_a_takeover_gives_the_claim_back(
    ray: RegistryRay,
    isolated: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Reporting the takeover raising: native, the bug logged, the claim released at once."""
    here = host("h1", isolated, lease_s=0.1)
    key = registry_key(ray, Slow("retold"), here)
    ray.run(ray.registry.claim(key, "dead-worker", since=None, refresh=False, lease_s=0.1))
    time.sleep(0.2)  # its lease lapses
    bug = TypeError("a bug telling the takeover")

    def raising(*args: object, **kwargs: object) -> None:
        raise bug

    monkeypatch.setattr(_ray_claim, "report", raising)
    slow = attrs.evolve(here, ray=attrs.evolve(here.ray, lease_s=600.0))
    workload = Slow("retold")
    with caplog.at_level(logging.WARNING, logger="chunktune"):
        decision = chunktune.ray.resolve_sync(workload, settings=slow)
    assert (decision.source, decision.chunk_size, workload.calls) == ("fallback", None, 0)
    assert _bugs(caplog) == [bug]
    wait_for(ray, "release")
    assert events(ray) == ["claim", "expired", "takeover", "release"]


def test_a_ray_resolve_still_raises_what_importing_ray_raised(
    isolated: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Ray's own import failing (not for want of it) is raised as it is, not taken for a bug."""
    broken = RuntimeError("ray's own import failed")

    def importing() -> None:
        raise broken

    monkeypatch.setattr("chunktune._ray_resolve.ray_module", importing)
    with (
        caplog.at_level(logging.WARNING, logger="chunktune"),
        pytest.raises(RuntimeError) as caught,
    ):
        chunktune.ray.resolve_sync(Slow("broken-ray"), settings=host("h1", isolated))
    assert caught.value is broken and _bugs(caplog) == []


def test_a_ray_resolve_out_of_threads_while_connecting_keeps_native(
    isolated: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Connecting Ray failing for want of a thread: native, chunktune's reason, no raise."""

    def connecting(settings: chunktune.Settings) -> None:
        raise RuntimeError("can't start new thread")

    monkeypatch.setattr("chunktune._ray_resolve.started_ray", connecting)
    workload = Slow("no-thread")
    with caplog.at_level(logging.WARNING, logger="chunktune"):
        decision = chunktune.ray.resolve_sync(workload, settings=host("h1", isolated))
    assert (decision.source, decision.chunk_size, workload.calls) == ("fallback", None, 0)
    assert "chunktune could not start a thread (can't start new thread" in decision.reason
    assert _bugs(caplog) == []


class _Stop(BaseException):
    """A stand-in for an interrupt: a BaseException that is no Exception."""


def test_an_interrupt_in_a_ray_resolve_is_raised_not_taken_for_a_bug(
    isolated: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A BaseException (an interrupt) in a Ray resolve's checks reaches the caller as itself."""
    stop = _Stop()

    def interrupted(*args: object, **kwargs: object) -> bool:
        raise stop

    monkeypatch.setattr("chunktune._ray_resolve.only_native", interrupted)
    with caplog.at_level(logging.WARNING, logger="chunktune"), pytest.raises(_Stop) as caught:
        chunktune.ray.resolve_sync(Slow("interrupted"), settings=host("h1", isolated))
    assert caught.value is stop and _bugs(caplog) == []


def test_a_claimant_out_of_threads_while_publishing_warns_and_keeps_its_decision(
    ray: RegistryRay,
    isolated: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The read-back failing for want of a thread: the decision stands, a warning, no bug."""

    def no_thread(*args: object, **kwargs: object) -> object:
        raise RuntimeError("can't start new thread")

    monkeypatch.setattr(_ray_claim, "entry_of", no_thread)
    with caplog.at_level(logging.WARNING, logger="chunktune"):
        decision = chunktune.ray.resolve_sync(Slow("unthreaded"), settings=host("h1", isolated))
    assert decision.source == "benchmark" and _bugs(caplog) == []
    said = "chunktune: could not publish to the registry (can't start new thread)"
    assert said in [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    wait_for(ray, "release")


def test_an_interrupt_while_publishing_is_raised_not_taken_for_a_bug(
    ray: RegistryRay,
    isolated: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A BaseException (an interrupt) as the claimant publishes reaches the caller as itself."""
    stop = _Stop()

    def interrupted(*args: object, **kwargs: object) -> object:
        raise stop

    monkeypatch.setattr(_ray_claim, "entry_of", interrupted)
    with caplog.at_level(logging.WARNING, logger="chunktune"), pytest.raises(_Stop) as caught:
        chunktune.ray.resolve_sync(Slow("interrupted"), settings=host("h1", isolated))
    assert caught.value is stop and _bugs(caplog) == []


def test_an_answer_an_unwritable_cache_cannot_keep_is_remembered_without_the_registry(
    ray: RegistryRay, isolated: Path
) -> None:
    """An adopted answer an uncreatable cache cannot keep is remembered: no registry, no sweep."""
    chunktune.ray.resolve_sync(Slow("ro"), settings=host("h1", isolated))
    (isolated / "afile").write_text("a file, not a folder")
    stuck = host("afile", isolated)  # its cache would be afile/cache.json: uncreatable
    adopted = chunktune.ray.resolve_sync(Slow("ro"), settings=stuck)
    assert adopted.source == "cache" and "node type a's answer" in adopted.reason
    ray.restart()  # its process died: Ray restarts it empty
    sent = list(ray.sent)
    workload = Slow("ro")
    again = chunktune.ray.resolve_sync(workload, settings=stuck)
    assert (again.source, again.chunk_size, workload.calls) == ("cache", adopted.chunk_size, 0)
    assert again.reason.startswith("remembered in this process")
    assert "node type a's answer" in again.reason and ray.sent == sent


def test_a_claimants_unstored_decision_answers_its_next_resolve_without_the_registry(
    ray: RegistryRay, isolated: Path
) -> None:
    """The worker that measured, its cache unwritable, answers its next resolve from memory."""
    (isolated / "afile").write_text("a file, not a folder")
    stuck = host("afile", isolated)
    first = chunktune.ray.resolve_sync(Slow("ro2"), settings=stuck)
    assert first.source == "benchmark"
    sent = list(ray.sent)
    again = chunktune.ray.resolve_sync(Slow("ro2"), settings=stuck)
    assert (again.source, again.chunk_size) == ("cache", first.chunk_size)
    assert again.reason.startswith("remembered in this process") and ray.sent == sent
    fresh = chunktune.ray.resolve_sync(Slow("ro2"), settings=stuck, refresh=True)
    assert fresh.source == "benchmark" and ray.sent[len(sent)] == "claim"
