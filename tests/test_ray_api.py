"""chunktune.ray without a cluster: the missing extra, an unconnected Ray, node types, settings."""

from __future__ import annotations

import math
import re
import subprocess
import sys
import threading
import time
import types
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from _discoveries import counted_loads

import chunktune
import chunktune.ray
from chunktune._ray_api import NODE_TYPE_LABEL, connected_ray, fingerprint_type, node_type
from chunktune._ray_job import Job
from chunktune._request import Ask, ask
from chunktune._shown import unprinted
from chunktune.sim import SimulatedWorkload, env_costs


def workload() -> SimulatedWorkload:
    return SimulatedWorkload(env_costs("blocked", 64), nthread=2, name="api")


def asked(w: SimulatedWorkload, settings: chunktune.Settings) -> Ask:
    """What a plain ``resolve(w, settings=settings)`` asks."""
    return ask(w, settings=settings, policy=None, manual=None, refresh=False, on_progress=None)


def a_job() -> Job:
    """A worker's job on node type "a", as the Ray resolve builds it."""
    settings = chunktune.load_settings()
    w = workload()
    return Job(
        asked=asked(w, settings), settings=settings, policy=settings.active,
        policy_name="balanced", signature=dict(w.signature()), device={}, key="k.p",
        node_id="n" * 16, node_type="a", registry_key="r",
    )  # fmt: skip


def test_plain_import_never_imports_ray() -> None:
    """`import chunktune` and `import chunktune.ray` leave Ray unimported."""
    code = "import sys, chunktune, chunktune.ray; print('ray' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


@pytest.mark.parametrize(
    "call",
    [
        pytest.param(lambda: chunktune.ray.resolve_sync(workload()), id="resolve_sync"),
        pytest.param(lambda: chunktune.ray.tune_cluster(workload), id="tune_cluster"),
    ],
)
def test_missing_ray_names_the_extra(monkeypatch: pytest.MonkeyPatch, call: object) -> None:
    """Without Ray, chunktune.ray raises a ChunktuneError (and ImportError) naming the extra."""
    monkeypatch.setitem(sys.modules, "ray", None)  # what an absent package looks like
    with pytest.raises(chunktune.ray.MissingExtraError, match=r"chunktune\[ray\]") as info:
        call()  # type: ignore[operator]
    assert isinstance(info.value, chunktune.ChunktuneError)
    assert isinstance(info.value, ImportError)


def fake_ray(initialised: bool) -> types.SimpleNamespace:
    calls: list[str] = []
    return types.SimpleNamespace(
        is_initialized=lambda: initialised or "init" in calls,
        init=lambda: calls.append("init"),
        calls=calls,
    )


def test_unconnected_ray_says_how_to_connect(monkeypatch: pytest.MonkeyPatch) -> None:
    """Ray installed but not initialised: a UsageError that names ray.init() and init_local."""
    monkeypatch.setitem(sys.modules, "ray", fake_ray(initialised=False))
    with pytest.raises(chunktune.UsageError, match=r"ray\.init\(\).*init_local"):
        chunktune.ray.tune_cluster(workload)


def test_init_local_starts_ray_when_allowed(monkeypatch: pytest.MonkeyPatch) -> None:
    """With [ray] init_local = true, an unconnected process starts a local Ray itself."""
    fake = fake_ray(initialised=False)
    monkeypatch.setitem(sys.modules, "ray", fake)
    settings = chunktune.load_settings()
    allowed = chunktune.Settings(
        policies=settings.policies,
        ray=chunktune.RaySettings(init_local=True),
    )
    assert connected_ray(allowed) is fake
    assert fake.calls == ["init"]


def test_init_local_starts_ray_on_a_thread_that_outlives_the_call(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Ray's processes die with the thread that started them: it must not be a passing one."""
    import threading

    fake = fake_ray(initialised=False)
    starters: list[threading.Thread] = []

    def init() -> None:
        starters.append(threading.current_thread())
        fake.calls.append("init")

    fake.init = init
    monkeypatch.setitem(sys.modules, "ray", fake)
    allowed = chunktune.Settings(
        policies=chunktune.load_settings().policies, ray=chunktune.RaySettings(init_local=True)
    )
    done = threading.Thread(target=connected_ray, args=(allowed,))  # as a loop's worker thread
    done.start()
    done.join(60)
    assert not done.is_alive() and fake.calls == ["init"]
    assert starters[0] is not done and starters[0].is_alive() and starters[0].daemon


def test_a_make_workload_that_does_not_pickle_is_refused_before_any_node_is_asked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """tune_cluster(closure over a lock): InvalidArgumentError naming it, no node probed."""
    import pickle
    import threading

    ray = fake_ray(initialised=True)
    ray.cloudpickle = types.SimpleNamespace(dumps=pickle.dumps)  # no nodes(): never asked
    monkeypatch.setitem(sys.modules, "ray", ray)
    lock = threading.Lock()
    with pytest.raises(chunktune.InvalidArgumentError, match="does not pickle"):
        chunktune.ray.tune_cluster(lambda: lock and workload())


def ray_resolve(**keywords: Any) -> object:
    return chunktune.ray.resolve_sync(workload(), **keywords)


def tune_cluster(**keywords: Any) -> object:
    return chunktune.ray.tune_cluster(workload, **keywords)


@pytest.mark.parametrize(
    ("entry", "keywords"),
    [
        pytest.param(ray_resolve, {"settings": {"policy": "quick"}}, id="resolve-settings-dict"),
        pytest.param(ray_resolve, {"settings": "chunktune.toml"}, id="resolve-settings-path"),
        pytest.param(ray_resolve, {"policy": 3}, id="resolve-policy-int"),
        pytest.param(ray_resolve, {"policy": "off", "refresh": "no"}, id="resolve-refresh-text"),
        pytest.param(ray_resolve, {"manual": 4, "on_progress": "print"}, id="resolve-progress"),
        pytest.param(tune_cluster, {"settings": {"policy": "quick"}}, id="cluster-settings-dict"),
        pytest.param(tune_cluster, {"policy": 3}, id="cluster-policy-int"),
    ],
)
def test_the_ray_entry_points_reject_a_bad_keyword_as_resolve_does(
    monkeypatch: pytest.MonkeyPatch, entry: Callable[..., object], keywords: dict[str, object]
) -> None:
    """chunktune.ray's resolve_sync and tune_cluster raise resolve's error, word for word."""
    monkeypatch.setitem(sys.modules, "ray", fake_ray(initialised=False))
    with pytest.raises(chunktune.InvalidArgumentError) as plain:
        chunktune.resolve_sync(workload(), **keywords)  # type: ignore[arg-type]
    with pytest.raises(chunktune.InvalidArgumentError) as on_ray:
        entry(**keywords)
    assert str(on_ray.value) == str(plain.value)


@pytest.mark.parametrize(
    "entry", [pytest.param(ray_resolve, id="resolve"), pytest.param(tune_cluster, id="cluster")]
)
def test_a_bad_policy_keyword_is_reported_before_broken_settings(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, entry: Callable[..., object]
) -> None:
    """policy=3 with a broken settings file: the keyword's error, as chunktune.resolve says it."""
    broken = tmp_path / "broken.toml"
    broken.write_text("policy = [\n")
    monkeypatch.setenv("CHUNKTUNE_CONFIG", str(broken))
    monkeypatch.setitem(sys.modules, "ray", fake_ray(initialised=False))
    with pytest.raises(chunktune.InvalidArgumentError) as plain:
        chunktune.resolve_sync(workload(), policy=3)  # type: ignore[arg-type]
    with pytest.raises(chunktune.InvalidArgumentError) as on_ray:
        entry(policy=3)
    assert str(on_ray.value) == str(plain.value)


def test_node_types_of_one_fingerprint_are_told_they_share_a_cache_key(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Two node types whose answers carry one cache key: tune_cluster says which one stays."""
    import attrs

    from chunktune._ray_cluster import _say_if_shared

    here = chunktune.load_settings()
    here = attrs.evolve(here, log=attrs.evolve(here.log, stderr="always"))
    a = chunktune.Decision(chunk_size=8, native_chunk=3, source="benchmark", reason="", key="k.p")
    b = attrs.evolve(a, chunk_size=32)
    _say_if_shared("b", b, {"a": a, "b": b}, here)
    assert "node types a and b share one machine fingerprint" in capsys.readouterr().err
    _say_if_shared("b", attrs.evolve(b, key="other.p"), {"a": a}, here)
    assert capsys.readouterr().err == ""


def test_label_overrides_the_fingerprint() -> None:
    """A node's chunktune.io/node-type label is its type; without one, its fingerprint's hash."""
    device = {"cpu": "x", "logical_cpus": 2}
    assert node_type({NODE_TYPE_LABEL: "gpu-a"}, device) == "gpu-a"
    assert node_type({}, device) == fingerprint_type(device)
    assert node_type({}, {"cpu": "y", "logical_cpus": 2}) != node_type({}, device)
    assert fingerprint_type(device).startswith("fp-")


def test_ray_settings_load_and_validate(tmp_path: Path) -> None:
    """[ray] loads from TOML, and a bad value is a ConfigError naming its path."""
    good = tmp_path / "good.toml"
    good.write_text('[ray]\ninit_local = true\nwhile_sweeping = "native"\nlease_s = 5\n')
    loaded = chunktune.load_settings(good).ray
    assert (loaded.init_local, loaded.while_sweeping, loaded.lease_s) == (True, "native", 5.0)
    bad = tmp_path / "bad.toml"
    bad.write_text('[ray]\nwhile_sweeping = "spin"\nwait_timeout_s = -1\n')
    with pytest.raises(chunktune.ConfigError) as info:
        chunktune.load_settings(bad)
    assert any(p.startswith("ray.while_sweeping") for p in info.value.problems)
    assert any(p.startswith("ray.wait_timeout_s") for p in info.value.problems)


@pytest.mark.anyio
async def test_a_registry_call_never_starts_ray_or_escapes_raw() -> None:
    """Ray shut down, or a handle of an earlier session: the registry counts as gone."""
    from chunktune import _ray_calls

    sent: list[str] = []

    def stale() -> None:
        raise Exception("Can't find actor ... from a different cluster")  # as Ray says it

    down = fake_ray(initialised=False)
    with pytest.raises(_ray_calls.RegistryGone, match="not initialised"):
        await _ray_calls.call(down, lambda: sent.append("claim"))
    _ray_calls.tell(down, lambda: sent.append("heartbeat"))
    assert sent == [] and down.calls == []  # nothing submitted, no Ray started
    up = fake_ray(initialised=True)
    up.get = lambda ref, timeout: ref
    with pytest.raises(_ray_calls.RegistryGone, match="different cluster"):
        await _ray_calls.call(up, stale)
    _ray_calls.tell(up, stale)  # a lost heartbeat is what a lapsed lease handles


@pytest.mark.anyio
async def test_a_registry_call_under_a_shutdown_or_past_the_limit_ends_in_time() -> None:
    """ray.get's SystemExit of a Ray shut down meanwhile, or a registry past hard_limit_s."""
    import anyio

    from chunktune import _ray_calls

    state = {"up": True}
    ray = types.SimpleNamespace(is_initialized=lambda: state["up"])

    def shut_down(ref: object, timeout: float) -> object:
        state["up"] = False  # another thread called ray.shutdown() while this one waited
        raise SystemExit(0)  # what ray.get raises then

    ray.get = shut_down
    with pytest.raises(_ray_calls.RegistryGone, match="shut down"):
        await _ray_calls.call(ray, lambda: "ref")

    def exiting(ref: object, timeout: float) -> object:
        raise SystemExit(0)  # a worker that Ray is ending (Ray still up): its exit goes on

    state["up"], ray.get = True, exiting
    with pytest.raises(SystemExit):
        await _ray_calls.call(ray, lambda: "ref")

    asked: list[float] = []

    def stuck(ref: object, timeout: float) -> object:
        asked.append(timeout)
        time.sleep(timeout)
        raise TimeoutError("GetTimeoutError")  # what ray.get says once its timeout passed

    ray.get = stuck
    until = anyio.current_time() + 0.5
    with pytest.raises(_ray_calls.OutOfTime):
        await _ray_calls.call(ray, lambda: "ref", until=until)
    # the wait asked of Ray ends at the hard limit, not after a whole call's allowance
    assert asked and asked[0] <= 0.5 < _ray_calls.CALL_TIMEOUT_S


@pytest.mark.anyio
async def test_a_registry_call_whose_hard_limit_has_come_is_never_sent() -> None:
    """A call made at its hard limit (or past it): OutOfTime, and nothing is submitted."""
    import anyio

    from chunktune import _ray_calls

    sent: list[str] = []
    ray = fake_ray(initialised=True)
    ray.get = lambda ref, timeout: ref
    with pytest.raises(_ray_calls.OutOfTime):
        await _ray_calls.call(ray, lambda: sent.append("claim"), until=anyio.current_time())
    assert sent == []


@pytest.mark.anyio
async def test_a_registry_lookup_never_starts_ray_and_names_what_failed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """look_up with Ray down asks nothing; a lookup that fails is RegistryGone, not OutOfTime."""
    from chunktune import _ray_calls

    looked: list[bool] = []

    def failing(ray: object, fresh: bool) -> object:
        looked.append(fresh)
        raise ConnectionError("no head node")

    monkeypatch.setattr(_ray_calls, "registry_handle", failing)
    down = fake_ray(initialised=False)
    with pytest.raises(_ray_calls.RegistryGone, match="not initialised"):
        await _ray_calls.look_up(down, fresh=True, until=math.inf)
    assert looked == [] and down.calls == []
    with pytest.raises(_ray_calls.RegistryGone, match="ConnectionError: no head node") as gone:
        await _ray_calls.look_up(fake_ray(initialised=True), fresh=True, until=math.inf)
    assert type(gone.value) is _ray_calls.RegistryGone  # the caller may look it up anew
    assert looked == [True]


# what Ray's RayActorError says: several lines, a tab-indented field on each
_ACTOR_DIED = "The actor died unexpectedly before finishing this task.\n\tclass_name: Registry"


@pytest.mark.anyio
async def test_a_registry_that_failed_in_many_lines_is_named_on_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A call's or a lookup's multi-line Ray error makes a RegistryGone of one escaped line."""
    from chunktune import _ray_calls

    def died(*args: object, **kwargs: object) -> object:
        raise RuntimeError(_ACTOR_DIED)

    up = fake_ray(initialised=True)
    up.get = died
    monkeypatch.setattr(_ray_calls, "registry_handle", died)
    failing: list[Callable[[], Awaitable[object]]] = [
        lambda: _ray_calls.call(up, lambda: "ref"),
        lambda: _ray_calls.look_up(up, fresh=True, until=math.inf),
    ]
    for gone in failing:
        with pytest.raises(_ray_calls.RegistryGone) as info:
            await gone()
        assert unprinted(str(info.value)) is None, str(info.value)
        assert str(info.value).startswith('RuntimeError: "The actor died unexpectedly')


@pytest.mark.anyio
async def test_a_registry_lookup_past_the_hard_limit_is_out_of_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A lookup that has not returned by the hard limit ends there, as OutOfTime."""
    import threading

    import anyio

    from chunktune import _ray_calls

    answered = threading.Event()

    def stuck(ray: object, fresh: bool) -> object:
        answered.wait(30)  # a hang guard: the lookup is left behind at the limit
        return "handle"

    monkeypatch.setattr(_ray_calls, "registry_handle", stuck)
    ray = fake_ray(initialised=True)
    try:
        with anyio.fail_after(30), pytest.raises(_ray_calls.OutOfTime):  # a hang detector
            await _ray_calls.look_up(ray, fresh=False, until=anyio.current_time() + 0.2)
    finally:
        answered.set()
    monkeypatch.setattr(_ray_calls, "registry_handle", lambda ray, fresh: "handle")
    assert await _ray_calls.look_up(ray, fresh=False, until=anyio.current_time() + 60) == "handle"


@pytest.mark.anyio
async def test_adopting_an_answer_is_not_held_up_by_a_stuck_cache_writer(
    isolated: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another worker's answer returns by the deadline while the cache is locked; stored later."""
    # it is written once the lock is free
    import anyio
    import anyio.to_thread
    from _holders import cached_eventually, holding_async

    from chunktune import _cache_lock
    from chunktune._ray_claim import _adopt

    monkeypatch.setattr(_cache_lock, "WRITE_STALL_S", 600.0)  # a stall this write waits out
    settings = chunktune.load_settings()
    workload = SimulatedWorkload(env_costs("blocked", 64), nthread=2, name="adopted")
    job = Job(
        asked=asked(workload, settings),
        settings=settings,
        policy=settings.get_policy("balanced"),
        policy_name="balanced",
        signature=dict(workload.signature()),
        device={"node_type": "a"},
        key="0" * 32 + ".abc",
        node_id="n" * 16,
        node_type="a",
        registry_key="r",
    )
    answer = chunktune.CacheEntry(
        chunk_size=4, native_chunk=3, reason="measured", policy_hash="abc"
    )
    lock = chunktune.DecisionCache(isolated / "cache.json").lock_path
    async with holding_async(lock) as holder:
        with anyio.fail_after(60):  # a hang detector, not a timing
            decision = await _adopt(job, answer, "a worker", anyio.current_time() + 0.2)
        assert holder.returncode is None  # returned while the lock was still held
    assert (decision.chunk_size, decision.key) == (4, job.key)
    # the abandoned write goes on once the lock is free
    assert await anyio.to_thread.run_sync(cached_eventually, isolated / "cache.json", job.key)


@pytest.mark.anyio
async def test_a_resolve_cancelled_while_claiming_gives_the_claim_up(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Cancelled while its claim is in flight: abandon follows, so no one waits out a lease."""
    import threading

    import anyio

    from chunktune import _ray_calls, _ray_claim

    sent: list[tuple[str, tuple[object, ...]]] = []
    replied = threading.Event()  # the registry answers only once the caller has gone

    def method(name: str) -> types.SimpleNamespace:
        def remote(*args: object, **_: object) -> str:
            sent.append((name, args))
            return name

        return types.SimpleNamespace(remote=remote)

    registry = types.SimpleNamespace(claim=method("claim"), abandon=method("abandon"))
    monkeypatch.setattr(_ray_calls, "registry_handle", lambda ray, fresh: registry)
    returned: list[bool] = []

    def get(ref: object, timeout: float) -> object:
        answered = replied.wait(min(timeout, 5.0))  # a hang guard, not a timing
        returned.append(answered)
        return answered and {"state": "claimed", "token": 1}

    ray = fake_ray(initialised=True)
    ray.get = get
    job = a_job()
    try:
        with anyio.move_on_after(0.2):  # a trainer's own timeout around the resolve
            await _ray_claim._coordinate(ray, job, fresh=False, started=anyio.current_time())
        assert returned == []  # the resolve left the registry's reply behind
    finally:
        replied.set()
    assert [name for name, _ in sent] == ["claim", "abandon"]
    assert sent[1][1] == ("r", sent[0][1][1])  # the key and the holder of that claim


@pytest.mark.anyio
async def test_an_answer_a_claimant_found_in_its_hosts_cache_is_not_said_to_be_its_measure(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A claimant that publishes a hit of its host's cache is named as sharing, not measuring."""
    from chunktune import _ray_claim

    published: list[tuple[object, ...]] = []
    registry = types.SimpleNamespace(
        heartbeat=types.SimpleNamespace(remote=lambda *_: None),
        publish=types.SimpleNamespace(remote=lambda *args: published.append(args)),
    )
    hit = chunktune.Decision(
        chunk_size=8, native_chunk=3, source="cache", reason="cached", key="k.p",
        timings={None: 0.01, 8: 0.009},
    )  # fmt: skip
    entry = chunktune.CacheEntry(chunk_size=8, native_chunk=3, reason="chose 8", host="vm")

    async def found(started: float, asked: Ask) -> chunktune.Decision:
        return hit  # another process of this host stored it after the local check

    monkeypatch.setattr(_ray_claim, "resolve_since", found)
    monkeypatch.setattr(_ray_claim, "entry_of", lambda *_, **__: entry)
    job = a_job()
    ray = fake_ray(initialised=True)
    ray.get = lambda ref, timeout: None
    await _ray_claim._sweep(ray, registry, job, "w1", {"state": "claimed", "token": 1}, 0.0)
    by = published[0][3]
    assert by == "w1 (from its host's cache)"
    adopted = await _ray_claim._adopt(job, entry, str(by), math.inf)
    assert "measured by w1" not in adopted.reason
    assert "measured on vm, shared by w1 (from its host's cache)" in adopted.reason


def test_an_answer_shared_without_a_local_entry_keeps_its_gain() -> None:
    """entry_of built from a decision (no cache here) carries gain and its interval."""
    import attrs

    from chunktune._ray_job import entry_of

    here = chunktune.load_settings()
    here = attrs.evolve(here, cache=attrs.evolve(here.cache, enabled=False))
    d = chunktune.Decision(
        chunk_size=2, native_chunk=3, source="benchmark", reason="confirmed", key="k.p",
        timings={None: 0.01, 2: 0.009}, gain=0.079, gain_ci=(0.015, 0.14),
    )  # fmt: skip
    entry = entry_of(
        d, settings=here, policy=here.active, signature={"kind": "x"}, device={"cpu": "y"},
        num_envs=64, nthread=2,
    )  # fmt: skip
    assert (entry.gain, entry.gain_ci) == (0.079, (0.015, 0.14))


def test_a_batch_with_no_candidate_but_native_never_asks_ray(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """12 envs on 8 threads leave balanced nothing to measure: answered here, as a trivial one."""
    # nothing would be published, so a claim would only queue the node type's workers
    monkeypatch.setitem(sys.modules, "ray", fake_ray(initialised=False))
    w = SimulatedWorkload(env_costs("uniform", 12), nthread=8, name="api")
    d = chunktune.ray.resolve_sync(w, policy="balanced")
    assert (d.chunk_size, d.source, w.calls) == (None, "trivial", 0)


def test_a_node_sweep_that_timed_native_alone_hands_no_entry_to_other_hosts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """tune_cluster's node sweep stores, like a local one, only evidence that timed a candidate."""
    from chunktune import _ray_cluster

    # the node's resolve goes through the registry; here the plain one stands in for it
    monkeypatch.setattr(_ray_cluster, "resolve_sync", chunktune.resolve_sync)
    monkeypatch.setenv("CHUNKTUNE_CACHE", str(tmp_path / "cache.json"))
    monkeypatch.setenv("CHUNKTUNE_SWEEP_LOCK", str(tmp_path / "sweep.lock"))
    slow = SimulatedWorkload([0.5] * 64, nthread=2, name="slow")  # a call past the budget
    swept = _ray_cluster._sweep_on_node(lambda: slow, "balanced", None)
    assert swept.decision.source == "benchmark"
    assert all(c is None for c in swept.decision.timings)  # no candidate timed
    assert swept.entry is None


def test_the_driver_keeps_each_node_types_answer_under_the_key_it_was_measured_for(
    isolated: Path,
) -> None:
    """tune_cluster stores two machines' answers on the driver apart, never under its own key."""
    from chunktune._keys import cache_key
    from chunktune._ray_cluster import _distribute, _Node, _Swept
    from chunktune._request import decision_entry

    here = chunktune.load_settings()
    signature = {"name": "driver"}
    swept: list[_Swept] = []
    for chunk, machine in ((2, "c7i"), (8, "m5")):
        device = {"cpu": machine}
        key = cache_key(
            signature, num_envs=64, nthread=2, device=device, policy_hash=here.active.fingerprint()
        )
        d = chunktune.Decision(
            chunk_size=chunk, native_chunk=3, source="benchmark", reason="", key=key,
            timings={None: 0.01, chunk: 0.009},
        )  # fmt: skip
        entry = decision_entry(
            d, policy=here.active, num_envs=64, nthread=2, signature=signature, device=device
        )
        swept.append(_Swept(d, entry, signature, 64, 2, here.active.fingerprint()))
    # one node per type: nothing is sent to other nodes, so no Ray is asked
    no_ray = types.SimpleNamespace(is_initialized=lambda: True, remote=lambda f: f)
    for answer in swept:
        _distribute(no_ray, answer, [_Node("n", 1.0, "t")], None, here)
    stored = chunktune.DecisionCache(isolated / "cache.json").entries()
    assert {k: e.chunk_size for k, e in stored.items()} == {
        s.decision.key: s.decision.chunk_size for s in swept
    }


@pytest.mark.anyio
async def test_a_wait_for_another_workers_sweep_is_told_once_per_claimant(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A waiter sends one 'waiting' event per claimant once the wait has lasted; none more."""
    # a callback that raises is logged and the wait goes on, as in a plain resolve
    import anyio
    import attrs

    from chunktune import _lock_wait, _ray_calls, _ray_claim
    from chunktune._events import ProgressEvent

    monkeypatch.setattr(_lock_wait, "REPORT_AFTER_S", 0.05)
    events: list[ProgressEvent] = []
    told_w1: list[bool] = []

    def on_progress(event: ProgressEvent) -> None:
        events.append(event)
        raise RuntimeError("a broken progress bar")

    def claim(*_: object, **__: object) -> Callable[[], dict[str, Any]]:
        # w1 sweeps until the waiter has told of it, and for three replies more; then w2
        # takes over; then it fails
        w1 = {"state": "busy", "since": 0.0, "holder": "w1", "held_s": 3600.0}
        if not events:
            return lambda: w1
        if len(events) == 1:
            told_w1.append(True)
            if len(told_w1) <= 3:
                return lambda: w1
            return lambda: {"state": "busy", "since": 0.0, "holder": "w2", "held_s": 0.0}
        return lambda: {"state": "failed", "since": 0.0, "reason": "broke", "by": "w2"}

    def wait(key: str, timeout_s: float) -> Callable[[], None]:
        return lambda: time.sleep(min(timeout_s, 0.01))

    registry = types.SimpleNamespace(
        claim=types.SimpleNamespace(remote=claim), wait=types.SimpleNamespace(remote=wait)
    )
    monkeypatch.setattr(_ray_calls, "registry_handle", lambda ray, fresh: registry)
    ray = fake_ray(initialised=True)
    ray.get = lambda ref, timeout: ref()
    job = a_job()
    job = attrs.evolve(job, asked=attrs.evolve(job.asked, on_progress=on_progress))
    with anyio.fail_after(60):  # a hang detector, not a timing
        d = await _ray_claim._coordinate(ray, job, fresh=False, started=anyio.current_time())
    assert (d.source, d.chunk_size) == ("fallback", None)
    assert [e.kind for e in events] == ["waiting", "waiting"]
    first, second = (e.message for e in events)
    assert first.startswith("waiting for another worker's sweep of node type a (w1, since ")
    assert second.startswith("waiting for another worker's sweep of node type a (w2, since ")
    assert all(e.elapsed_s >= _lock_wait.REPORT_AFTER_S for e in events)


def test_ray_resolve_parses_an_unchanged_settings_file_once(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """chunktune.ray.resolve(settings=None) reads the file as resolve does: once while unchanged."""
    from chunktune import _settled

    file = tmp_path / "settings.toml"
    file.write_text('policy = "quick"\n[log]\nstderr = "never"\n')
    monkeypatch.setenv("CHUNKTUNE_CONFIG", str(file))
    parsed = counted_loads(monkeypatch)
    monkeypatch.setattr(_settled, "SETTLED_S", 0.0)  # trusted as soon as written
    monkeypatch.setitem(sys.modules, "ray", fake_ray(initialised=False))
    w = SimulatedWorkload(env_costs("uniform", 12), nthread=8, name="api")
    first = chunktune.ray.resolve_sync(w)
    again = chunktune.ray.resolve_sync(w)
    assert (first.source, first.policy, again.source) == ("trivial", "quick", "trivial")
    assert len(parsed) == 1
    file.write_text('policy = "balanced"\n[log]\nstderr = "never"\n# changed\n')
    assert chunktune.ray.resolve_sync(w).policy == "balanced" and len(parsed) == 2


def test_init_local_raises_what_ray_init_raised(monkeypatch: pytest.MonkeyPatch) -> None:
    """A local Ray that fails to start: connected_ray raises ray.init()'s own error."""
    fake = fake_ray(initialised=False)

    def refuse() -> None:
        raise RuntimeError("no room for Ray's object store")

    fake.init = refuse
    monkeypatch.setitem(sys.modules, "ray", fake)
    allowed = chunktune.Settings(
        policies=chunktune.load_settings().policies, ray=chunktune.RaySettings(init_local=True)
    )
    with pytest.raises(RuntimeError, match="object store"):
        connected_ray(allowed)


def test_two_threads_connecting_at_once_start_one_local_ray(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Two callers that both found Ray down start it once: the second finds it started."""
    import threading

    checks: list[bool] = []
    both_checked = threading.Event()
    fake = fake_ray(initialised=False)
    up = fake.is_initialized

    def is_initialized() -> bool:
        checks.append(up())
        if len(checks) >= 3:  # both callers' first check, and the first one's under the lock
            both_checked.set()
        return checks[-1]

    def init() -> None:
        both_checked.wait(5)  # a hang guard: the second caller checks while this one starts
        fake.calls.append("init")

    fake.is_initialized, fake.init = is_initialized, init
    monkeypatch.setitem(sys.modules, "ray", fake)
    allowed = chunktune.Settings(
        policies=chunktune.load_settings().policies, ray=chunktune.RaySettings(init_local=True)
    )
    callers = [threading.Thread(target=connected_ray, args=(allowed,)) for _ in range(2)]
    for caller in callers:
        caller.start()
    for caller in callers:
        caller.join(60)
    assert fake.calls == ["init"]


def test_node_labels_of_a_ray_that_reports_none_are_empty() -> None:
    """A runtime context whose get_node_labels() answers None: no labels, not a crash."""
    from chunktune._ray_api import node_labels

    ray = types.SimpleNamespace(
        get_runtime_context=lambda: types.SimpleNamespace(get_node_labels=lambda: None)
    )
    assert node_labels(ray) == {}


def test_node_labels_of_a_ray_without_them_are_empty() -> None:
    """A runtime context that has no get_node_labels at all (an older Ray): no labels."""
    from chunktune._ray_api import node_labels

    ray = types.SimpleNamespace(get_runtime_context=types.SimpleNamespace)
    assert node_labels(ray) == {}


def test_a_fingerprints_type_is_fp_and_twelve_hex_digits() -> None:
    """A node type made of a device fingerprint reads 'fp-' and 12 hex digits of its hash."""
    assert re.fullmatch(r"fp-[0-9a-f]{12}", fingerprint_type({"cpu": "x", "logical_cpus": 2}))


def test_a_fingerprints_type_does_not_depend_on_its_key_order() -> None:
    """One device fingerprint, its keys in another order: the same node type."""
    device = {"cpu": "x", "logical_cpus": 2, "boot": "b"}
    reordered = dict(reversed(list(device.items())))
    assert node_type({}, reordered) == node_type({}, device)


def test_an_empty_node_type_label_counts_as_no_label() -> None:
    """A node labelled with an empty type is typed by its fingerprint, not as ''."""
    device = {"cpu": "x", "logical_cpus": 2}
    assert node_type({NODE_TYPE_LABEL: ""}, device) == fingerprint_type(device)


@pytest.mark.anyio
@pytest.mark.jumps
async def test_a_waiter_whose_hard_limit_comes_between_two_questions_says_whom_it_waited_for(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A registry that answered busy every time is never said to have not answered."""
    import anyio
    import attrs
    from _clock import jump_when

    from chunktune import _ray_calls, _ray_claim

    waiting, jumped = threading.Event(), threading.Event()

    def claim(*_: object, **__: object) -> Callable[[], dict[str, Any]]:
        return lambda: {"state": "busy", "since": 0.0, "holder": "w1", "held_s": 0.0}

    def a_while(timeout_s: float) -> None:
        time.sleep(min(timeout_s, 0.01))  # a registry that wakes often
        waiting.set()
        # the limit comes during this wait: the next question finds it past
        jumped.wait(60)  # a hang guard, not a timing

    def wait(key: str, timeout_s: float) -> Callable[[], None]:
        return lambda: a_while(timeout_s)

    async def limit_during_a_wait() -> None:
        await jump_when(waiting, 1.0)
        jumped.set()

    registry = types.SimpleNamespace(
        claim=types.SimpleNamespace(remote=claim),
        wait=types.SimpleNamespace(remote=wait),
        abandon=types.SimpleNamespace(remote=lambda *_: None),
    )
    monkeypatch.setattr(_ray_calls, "registry_handle", lambda ray, fresh: registry)
    ray = fake_ray(initialised=True)
    ray.get = lambda ref, timeout: ref()
    job = a_job()
    # 1 s: room for a loaded machine to have the registry's busy reply before the limit
    job = attrs.evolve(job, policy=attrs.evolve(job.policy, time_budget_s=0.3, hard_limit_s=1.0))
    with anyio.fail_after(60):  # a hang detector, not a timing
        async with anyio.create_task_group() as tg:
            tg.start_soon(limit_during_a_wait)
            d = await _ray_claim.coordinated(ray, job, anyio.current_time())
    assert d is not None and (d.source, d.chunk_size) == ("fallback", None)
    assert "waited until the hard limit of 1 s (hard_limit_s) for w1's sweep" in d.reason
    assert "had not answered" not in d.reason


@pytest.mark.parametrize(
    "where",
    [
        pytest.param("chunktune._ray_job.node_type", id="node-type"),
        pytest.param("chunktune._ray_resolve.local_hit", id="hosts-lookup"),
    ],
)
def test_a_bug_while_keying_for_the_cluster_keeps_native_and_blames_chunktune(
    isolated: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, where: str
) -> None:
    """The Ray keying's own code raising: native, chunktune named, its traceback logged."""
    # a bug naming the node type measured on this host, unshared and unlogged, as if no
    # cluster were there; one in the host's lookup was raised out of resolve
    import logging

    ray = fake_ray(initialised=True)
    ray.get_runtime_context = lambda: types.SimpleNamespace(get_node_id=lambda: "n" * 16)
    monkeypatch.setitem(sys.modules, "ray", ray)
    bug = TypeError("unhashable type: 'dict'")

    def raising(*args: object, **kwargs: object) -> object:
        raise bug

    def never(*args: object, **kwargs: object) -> object:
        raise AssertionError("the registry was asked")

    monkeypatch.setattr(where, raising)
    monkeypatch.setattr("chunktune._ray_resolve.coordinated", never)
    w = workload()
    with caplog.at_level(logging.WARNING, logger="chunktune"):
        d = chunktune.ray.resolve_sync(w)
    assert (d.chunk_size, d.source, w.calls) == (None, "fallback", 0)
    assert "chunktune failed while keying the workload (TypeError: unhashable" in d.reason
    assert "signature()" not in d.reason
    assert [r.exc_info[1] for r in caplog.records if r.exc_info] == [bug]
    assert not (isolated / "cache.json").exists()


def test_a_failing_signature_under_ray_is_the_workloads_failure(
    isolated: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What signature() returned failing to read, under Ray: native, naming signature()."""
    monkeypatch.setitem(sys.modules, "ray", fake_ray(initialised=True))

    class Items(dict[str, Any]):
        def items(self) -> Any:
            raise KeyError("gone")

    class Failing(SimulatedWorkload):
        def signature(self) -> Any:
            return Items(kind="x")

    w = Failing(env_costs("blocked", 64), nthread=2, name="api")
    d = chunktune.ray.resolve_sync(w)
    assert (d.chunk_size, d.source, w.calls) == (None, "fallback", 0)
    assert "the workload's signature() failed (KeyError: 'gone')" in d.reason


def _ray_keying_raises(monkeypatch: pytest.MonkeyPatch, exc: BaseException) -> None:
    """A connected stand-in for Ray whose host lookup raises ``exc``; the registry never asked."""
    ray = fake_ray(initialised=True)
    ray.get_runtime_context = lambda: types.SimpleNamespace(get_node_id=lambda: "n" * 16)
    monkeypatch.setitem(sys.modules, "ray", ray)

    def raising(*args: object, **kwargs: object) -> object:
        raise exc

    def never(*args: object, **kwargs: object) -> object:
        raise AssertionError("the registry was asked")

    monkeypatch.setattr("chunktune._ray_resolve.local_hit", raising)
    monkeypatch.setattr("chunktune._ray_resolve.coordinated", never)


@pytest.mark.parametrize(
    "exc",
    [
        pytest.param(RuntimeError("can't start new thread"), id="no-thread"),
        pytest.param(chunktune.CacheError("cache gone"), id="deliberate"),
    ],
)
def test_spent_threads_or_a_deliberate_error_while_keying_for_the_cluster_key_plainly(
    isolated: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    exc: Exception,
) -> None:
    """The Ray keying out of threads, or raising a ChunktuneError: the plain resolve, no bug."""
    import logging

    _ray_keying_raises(monkeypatch, exc)
    with caplog.at_level(logging.WARNING, logger="chunktune"):
        d = chunktune.ray.resolve_sync(workload())
    assert d.source == "benchmark", d.reason  # the plain keying and lookup answered
    assert [r.exc_info for r in caplog.records if r.exc_info] == []


def test_a_bug_in_the_hosts_lookup_for_the_cluster_keeps_the_key_and_is_reported(
    isolated: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A bug after the Ray keying made the key: the fallback has it and is reported."""
    import logging

    _ray_keying_raises(monkeypatch, TypeError("unhashable type: 'dict'"))
    with caplog.at_level(logging.INFO, logger="chunktune"):
        d = chunktune.ray.resolve_sync(workload())
    assert (d.source, d.chunk_size) == ("fallback", None)
    assert any(d.reason in r.getMessage() for r in caplog.records)  # its report line
    assert d.key and d.key == chunktune.resolve_sync(workload()).key
