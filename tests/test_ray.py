"""chunktune.ray on a real local Ray cluster: one sweep per node type, shared, taken over.

One cluster serves the whole module (Ray starts slowly): a CPU-less head, two nodes
labelled ``a``, one ``b``, and one ``broken`` whose settings file is missing. Every
node has its own cache file and sweep lock, as separate hosts would.
"""

from __future__ import annotations

import ctypes
import functools
import logging
import os
import re
import sys
import tempfile
import time
import traceback
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import attrs
import pytest

import chunktune
import chunktune.ray
from chunktune._keys import cache_key
from chunktune._modeled import ModeledTime
from chunktune._ray_job import identify
from chunktune._ray_registry import registry_handle
from chunktune._request import ask
from chunktune.sim import SimulatedWorkload, env_costs

ray = pytest.importorskip("ray")
cluster_utils = pytest.importorskip("ray.cluster_utils")
strategies = pytest.importorskip("ray.util.scheduling_strategies")

pytestmark = [
    pytest.mark.ray,
    pytest.mark.slow,
    # Ray 2.49's Cluster leaks its own /dev/null handles (2.60's does not): not ours to fail on
    pytest.mark.filterwarnings(
        r"ignore:(?s)Exception ignored in. <_io\.\w+ .*name='/dev/null'"
        ":pytest.PytestUnraisableExceptionWarning"
    ),
]

POLICY = "quick"
WAIT_S = 120  # no ray.get in these tests may hang longer


class Sleepy(ModeledTime):
    """The simulated workload's modeled seconds, plus a real sleep per call so sweeps take time.

    Its sweep's budget runs on those modeled seconds, not the wall clock: a sweep measures
    the same calls, and stores its answer, however slowly a loaded machine runs them (on
    the wall clock a call of 0.15 s took 0.6 s under load, the sweep kept native as too slow
    to judge, stored nothing, and the workers waiting for it swept after all). The hard
    limit is still the wall clock's. Records when its first and last probe ran (wall-clock
    seconds), so a test can see which worker swept and when.
    """

    def __init__(
        self, job: str, sleep_s: float = 0.01, *, fail: bool = False, gate: str | None = None
    ) -> None:
        self.fail = fail
        self.gate = gate
        self.inner = SimulatedWorkload(env_costs("blocked", 64), nthread=2, name=job)
        self.num_envs = self.inner.num_envs
        self.nthread = self.inner.nthread
        self.sleep_s = sleep_s
        self.calls = 0
        self.first: float | None = None
        self.last: float | None = None

    def signature(self) -> dict[str, Any]:
        return dict(self.inner.signature())

    def clock(self) -> float:
        return self.inner.clock()

    def run(self, chunk_size: int | None) -> float:
        if self.first is None:
            self.first = time.time()
        opened_by = time.monotonic() + WAIT_S  # a hang guard: the test opens the gate
        while self.gate is not None and not os.path.exists(self.gate):
            assert time.monotonic() < opened_by, f"the gate {self.gate} never opened"
            time.sleep(0.01)
        time.sleep(self.sleep_s)
        if self.fail:
            raise RuntimeError("the simulator broke")
        self.calls += 1
        self.last = time.time()
        return self.inner.run(chunk_size)


def node_settings(**ray_options: Any) -> chunktune.Settings:
    """This node's settings (its own cache file), with [ray] options changed."""
    settings = chunktune.load_settings()
    return attrs.evolve(settings, ray=attrs.evolve(settings.ray, **ray_options))


def outcome(decision: chunktune.Decision, workload: Sleepy) -> dict[str, Any]:
    return {
        "source": decision.source,
        "chunk": decision.chunk_size,
        "reason": decision.reason,
        "key": decision.key,
        "calls": workload.calls,
        "first": workload.first,
        "last": workload.last,
        "node": ray.get_runtime_context().get_node_id(),
        "cache": os.environ["CHUNKTUNE_CACHE"],
        "pid": os.getpid(),
    }


# one free box under a gravity no step survives: MuJoCo warns and resets it every step
UNSTABLE_XML = (
    '<mujoco><option timestep="0.5" gravity="0 0 -1e12"/><worldbody><body><freejoint/>'
    '<geom type="box" size=".05 .05 .05"/></body></worldbody></mujoco>'
)


def resolve_unstable(model: str, folder: str, *, handler: bool) -> dict[str, Any]:
    """A Ray task: resolve an unstable model from ``folder``, with its own MuJoCo warning
    handler or MuJoCo's, and say what the resolve printed (fds 1 and 2) and left there."""
    import mujoco

    heard: list[str] = []
    if handler:
        mujoco.set_mju_user_warning(heard.append)
    os.chdir(folder)
    workload = chunktune.RolloutWorkload.from_xml(model, num_envs=16, nthread=2, nstep=2)
    with tempfile.TemporaryFile("w+") as printed:
        saved = [os.dup(1), os.dup(2)]
        for fd in (1, 2):
            os.dup2(printed.fileno(), fd)
        try:
            decision = chunktune.ray.resolve_sync(
                workload, settings=node_settings(), policy=POLICY, refresh=True
            )
        finally:
            sys.stdout.flush()
            ctypes.CDLL(None).fflush(None)
            for fd, copy in zip((1, 2), saved, strict=True):
                os.dup2(copy, fd)
                os.close(copy)
        printed.seek(0)
        text = printed.read()
    return {
        "source": decision.source,
        "reason": decision.reason,
        "printed": text,
        "heard": len(heard),
        "handler_kept": mujoco.get_mju_user_warning() == heard.append if handler else None,
        "log_file": os.path.exists("MUJOCO_LOG.TXT"),
    }


class Worker:
    """An env worker as a sync Ray actor."""

    def pid(self) -> int:
        return os.getpid()

    def resolve(
        self,
        job: str,
        sleep_s: float,
        *,
        fail: bool = False,
        hard_limit_s: float | None = None,
        budget_s: float | None = None,
        gate: str | None = None,
        told: str | None = None,
        **ray_options: Any,
    ) -> dict[str, Any]:
        """Resolve ``job``. With a ``gate`` (a file), each call waits for that file first:
        the sweep stays under way until the test makes it. The file ``told`` is made once
        the resolve is told it waits for another worker's sweep."""
        workload = Sleepy(job, sleep_s, fail=fail, gate=gate)
        settings = node_settings(**ray_options)
        policy: str | chunktune.Policy = POLICY
        if hard_limit_s is not None:
            policy = attrs.evolve(
                settings.get_policy(POLICY),
                time_budget_s=hard_limit_s if budget_s is None else budget_s,
                hard_limit_s=hard_limit_s,
            )
        events: list[chunktune.ProgressEvent] = []

        def on_progress(event: chunktune.ProgressEvent) -> None:
            events.append(event)
            if told is not None and event.kind == "waiting":
                Path(told).touch()

        decision = chunktune.ray.resolve_sync(
            workload, settings=settings, policy=policy, on_progress=on_progress
        )
        return {**outcome(decision, workload), "waits": [e for e in events if e.kind == "waiting"]}


def resolve_at_load(worker: Worker, job: str, average: float) -> dict[str, Any]:
    """``worker.resolve(job, 0.0)`` with the machine's load read as ``average`` on 2 CPUs."""
    real = os.getloadavg, os.cpu_count
    os.getloadavg, os.cpu_count = (lambda: (average, 0.0, 0.0)), (lambda: 2)
    try:
        return worker.resolve(job, 0.0)
    finally:
        os.getloadavg, os.cpu_count = real


class LoadedWorker(Worker):
    """A worker that can resolve as if the machine's load were a given figure."""

    def resolve_at(self, job: str, average: float) -> dict[str, Any]:
        return resolve_at_load(self, job, average)


class AsyncWorker:
    """An env worker as an async Ray actor: it awaits on Ray's own event loop."""

    async def resolve(self, job: str, sleep_s: float, **ray_options: Any) -> dict[str, Any]:
        workload = Sleepy(job, sleep_s)
        decision = await chunktune.ray.resolve(
            workload, settings=node_settings(**ray_options), policy=POLICY
        )
        return outcome(decision, workload)


@attrs.frozen
class Fleet:
    root: Path
    node_ids: dict[str, str]  # our name -> Ray node id
    workers: dict[str, list[Any]]  # our node name -> actors pinned there

    def spawn(self, node: str, cls: type = Worker) -> Any:
        pinned = strategies.NodeAffinitySchedulingStrategy(self.node_ids[node], soft=False)
        return ray.remote(num_cpus=0)(cls).options(scheduling_strategy=pinned).remote()

    def cache(self, node: str) -> chunktune.DecisionCache:
        return chunktune.DecisionCache(self.root / node / "cache.json")

    def entries(self, node: str, job: str) -> list[chunktune.CacheEntry]:
        """The entries a node's cache holds for ``job``."""
        found = self.cache(node).entries().values()
        return [e for e in found if e.signature.get("name") == job]


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleet]:
    """A local cluster of simulated hosts, each with its own cache and sweep lock."""
    root = tmp_path_factory.mktemp("fleet")

    def env(name: str) -> dict[str, str]:
        return {
            "CHUNKTUNE_CACHE": str(root / name / "cache.json"),
            "CHUNKTUNE_SWEEP_LOCK": str(root / name / "sweep.lock"),
            "CHUNKTUNE_CONFIG": "",
        }

    # workers cannot import this test module: ship its classes by value
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    label = chunktune.ray.NODE_TYPE_LABEL
    cluster = cluster_utils.Cluster(
        initialize_head=True, head_node_args={"num_cpus": 0, "env_vars": env("head")}
    )
    try:
        nodes = {
            name: cluster.add_node(num_cpus=1, labels={label: kind}, env_vars=env(name))
            for name, kind in (("a1", "a"), ("a2", "a"), ("b1", "b"))
        }
        broken = {**env("broken"), "CHUNKTUNE_CONFIG": str(root / "missing.toml")}
        cluster.add_node(num_cpus=1, labels={label: "broken"}, env_vars=broken)
        cluster.wait_for_nodes()
        ray.init(address=cluster.address, log_to_driver=False)
        ids = {name: node.node_id for name, node in nodes.items()}
        made = Fleet(root=root, node_ids=ids, workers={})
        made.workers.update(
            {
                "a1": [made.spawn("a1", LoadedWorker), made.spawn("a1")],
                "a2": [made.spawn("a2", LoadedWorker), made.spawn("a2")],
                "b1": [made.spawn("b1", AsyncWorker), made.spawn("b1", AsyncWorker)],
            }
        )
        yield made
    finally:
        ray.shutdown()
        cluster.shutdown()


def registry_events(kind: str, job: str) -> list[dict[str, Any]]:
    """What the cluster's registry recorded for ``job`` on node type ``kind``."""
    workload = Sleepy(job)
    policy = chunktune.load_settings().get_policy(POLICY)
    key = cache_key(
        workload.signature(),
        num_envs=workload.num_envs,
        nthread=workload.nthread,
        device={"node_type": kind},
        policy_hash=policy.fingerprint(),
    )
    try:
        registry = ray.get_actor(
            chunktune.ray.REGISTRY_NAME, namespace=chunktune.ray.REGISTRY_NAMESPACE
        )
    except ValueError:  # no worker has asked it anything yet
        return []
    events: list[dict[str, Any]] = ray.get(registry.events.remote(f"{kind}/{key}"), timeout=WAIT_S)
    return events


def wait_for_claim(kind: str, job: str) -> None:
    """Return once a worker of node type ``kind`` has claimed ``job``'s sweep."""
    deadline = time.monotonic() + WAIT_S
    while not registry_events(kind, job):
        assert time.monotonic() < deadline
        time.sleep(0.05)


def new_job() -> str:
    return f"job-{uuid.uuid4().hex[:8]}"


def test_tune_cluster_sweeps_once_per_node_type(
    fleet: Fleet, isolated: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """One sweep per labelled type; every node of the type and the driver hold the answer."""
    job = new_job()
    with caplog.at_level(logging.INFO, logger="chunktune"):
        answers = chunktune.ray.tune_cluster(functools.partial(Sleepy, job, 0.0), policy=POLICY)
    err = caplog.text
    assert set(answers) == {"a", "b"}
    assert all(d.source == "benchmark" for d in answers.values())
    assert "skipped: its probe failed (ConfigError" in err  # the broken node, reported
    assert "offers Ray no CPUs" in err  # the CPU-less head
    assert "node type a (2 node(s))" in err
    for kind, names in (("a", ["a1", "a2"]), ("b", ["b1"])):
        assert [e["event"] for e in registry_events(kind, job)] == ["claim", "publish"]
        stored = [fleet.entries(name, job) for name in names]
        assert all(len(entries) == 1 for entries in stored)
        assert {e.chunk_size for s in stored for e in s} == {answers[kind].chunk_size}
        # the other node got the sweeping node's entry, not a sweep of its own
        assert len({e.created for s in stored for e in s}) == 1
    driver = chunktune.DecisionCache(isolated / "cache.json").entries()
    assert {e.chunk_size for e in driver.values()} <= {d.chunk_size for d in answers.values()}
    assert driver
    assert "swept on node" in err
    probed = f"benchmark, {answers['a'].probe_seconds:.2f} s of probes) swept on node"
    assert probed in err  # a swept type's line says what its sweep cost
    caplog.clear()  # again: every type's node has its answer now, and says so
    with caplog.at_level(logging.INFO, logger="chunktune"):
        again = chunktune.ray.tune_cluster(functools.partial(Sleepy, job, 0.0), policy=POLICY)
    assert all(d.source == "cache" for d in again.values())
    assert "answered on node" in caplog.text and "swept on node" not in caplog.text


def test_workers_share_one_sweep_per_node_type(fleet: Fleet) -> None:
    """Six workers (sync and async actors) on three hosts of two types: two sweeps, shared."""
    job = new_job()
    calls = [
        (name, actor.resolve.remote(job, 0.01))
        for name, actors in fleet.workers.items()
        for actor in actors
    ]
    results = ray.get([ref for _, ref in calls], timeout=WAIT_S)
    by_type: dict[str, list[dict[str, Any]]] = {"a": [], "b": []}
    for (name, _), result in zip(calls, results, strict=True):
        by_type[name[0]].append(result)
        # every worker keeps its type's answer in its own host's cache
        entry = fleet.cache(name).get(result["key"])
        assert entry is not None and entry.chunk_size == result["chunk"]
    for kind, found in by_type.items():
        swept = [r for r in found if r["calls"]]
        assert len(swept) == 1, kind
        assert swept[0]["source"] == "benchmark"
        assert {r["source"] for r in found if not r["calls"]} == {"cache"}
        assert len({r["chunk"] for r in found}) == 1
        assert [e["event"] for e in registry_events(kind, job)] == ["claim", "publish"]


def test_native_while_another_worker_sweeps(fleet: Fleet) -> None:
    """With while_sweeping = "native", a worker uses native at once, then the answer later."""
    job, gate = new_job(), fleet.root / f"{uuid.uuid4().hex}.gate"
    # a1's sweep stays under way until a2 has answered: under load a2's call came after it
    slow = fleet.workers["a1"][0].resolve.remote(job, 0.06, gate=str(gate))
    wait_for_claim("a", job)
    meanwhile = ray.get(
        fleet.workers["a2"][0].resolve.remote(job, 0.0, while_sweeping="native"), timeout=WAIT_S
    )
    gate.touch()
    assert meanwhile["source"] == "fallback" and meanwhile["chunk"] is None
    assert "while_sweeping" in meanwhile["reason"]
    assert meanwhile["calls"] == 0
    answer = ray.get(slow, timeout=WAIT_S)
    later = ray.get(
        fleet.workers["a2"][0].resolve.remote(job, 0.0, while_sweeping="native"), timeout=WAIT_S
    )
    assert later["source"] == "cache" and later["chunk"] == answer["chunk"]
    assert later["calls"] == 0


def test_a_worker_waiting_for_another_workers_sweep_says_so(fleet: Fleet) -> None:
    """A waiter gets one 'waiting' event naming the sweeping worker, a second or more in."""
    # as a plain resolve tells a wait for another process's sweep; its answer is then shared
    job, name = new_job(), uuid.uuid4().hex
    gate, told = fleet.root / f"{name}.gate", fleet.root / f"{name}.told"
    # one policy for both (one registry key). a1's sweep stays under way until a2 is told it
    # waits: under load a2's call came after a sweep of some 3-4 s
    limits = {"hard_limit_s": 60.0, "budget_s": 4.0}
    slow = fleet.workers["a1"][0].resolve.remote(job, 0.01, gate=str(gate), **limits)
    wait_for_claim("a", job)
    asked = fleet.workers["a2"][0].resolve.remote(job, 0.0, told=str(told), **limits)
    told_by = time.monotonic() + WAIT_S  # a hang guard, not a timing
    while not told.exists():
        assert time.monotonic() < told_by, "the waiter was never told it waits"
        time.sleep(0.05)
    gate.touch()
    waiter, swept = ray.get([asked, slow], timeout=WAIT_S)
    holder = registry_events("a", job)[0]["holder"]
    assert [re.sub(r"\d\d:\d\d:\d\d", "T", e.message) for e in waiter["waits"]] == [
        f"waiting for another worker's sweep of node type a ({holder}, since T)"
    ]
    assert waiter["waits"][0].elapsed_s >= 1.0  # told once it has lasted, as a plain wait
    assert swept["waits"] == []  # the sweeper waited for nobody
    assert (waiter["source"], waiter["chunk"], waiter["calls"]) == ("cache", swept["chunk"], 0)


def test_a_waiter_gives_up_at_its_own_hard_limit(fleet: Fleet) -> None:
    """A worker waiting for another's sweep returns native at its hard_limit_s, not later."""
    job = new_job()
    slow = fleet.workers["a1"][0].resolve.remote(job, 0.06)
    wait_for_claim("a", job)
    limited = ray.get(
        fleet.workers["a2"][0].resolve.remote(job, 0.0, hard_limit_s=0.3), timeout=WAIT_S
    )
    assert (limited["source"], limited["chunk"], limited["calls"]) == ("fallback", None, 0)
    assert "hard_limit_s" in limited["reason"]
    assert ray.get(slow, timeout=WAIT_S)["source"] == "benchmark"


def test_a_worker_that_takes_a_sweep_over_has_what_its_hard_limit_left(fleet: Fleet) -> None:
    """The hard limit counts from the resolve's start: a takeover after waiting sweeps less."""
    job, name = new_job(), uuid.uuid4().hex
    held, told = fleet.root / f"{name}.victim.gate", fleet.root / f"{name}.told"
    gate = fleet.root / f"{name}.gate"
    victim, waiter = fleet.spawn("a1"), fleet.spawn("a2")
    ray.get([victim.pid.remote(), waiter.pid.remote()], timeout=WAIT_S)
    # the victim's sweep stays under way (its gate never opens) until it is killed; a lease
    # of 3 s, so a victim a loaded machine descheduled for a second or two keeps its claim
    victim.resolve.remote(job, 0.0, gate=str(held), hard_limit_s=60.0, lease_s=3.0)
    wait_for_claim("a", job)
    # the waiter's own lease outlives any deschedule: nobody takes its sweep over in turn
    limited = waiter.resolve.remote(
        job, 0.01, gate=str(gate), told=str(told), hard_limit_s=15.0, lease_s=60.0
    )
    told_by = time.monotonic() + WAIT_S  # a hang guard, not a timing
    while not told.exists():
        assert time.monotonic() < told_by, "the waiter was never told it waits"
        time.sleep(0.05)
    started_by = time.time()  # the waiter's resolve began before it was told it waits
    ray.kill(victim)
    # the waiter takes over once the victim's lease lapses, and its sweep's first call then
    # waits at the gate. Opened 15 s after the waiter's start, but before 15 s from the
    # takeover: a limit counted from the takeover would let the sweep finish (16 short
    # calls) and store an answer; counted from the resolve's start, the sweep is given up
    took_by = time.monotonic() + WAIT_S
    while "takeover" not in [e["event"] for e in registry_events("a", job)]:
        assert time.monotonic() < took_by, "the victim's sweep was never taken over"
        time.sleep(0.05)
    takeover = next(e["t"] for e in registry_events("a", job) if e["event"] == "takeover")
    assert takeover > started_by  # the lease lapsed after the kill, as the window needs
    time.sleep(max(0.0, started_by + 15.0 + 0.2 - time.time()))
    gate.touch()
    result = ray.get(limited, timeout=WAIT_S)
    assert [e["event"] for e in registry_events("a", job)][:3] == ["claim", "expired", "takeover"]
    assert result["first"] is not None and result["first"] >= takeover  # it took the sweep over
    assert (result["source"], result["chunk"]) == ("fallback", None), result
    assert "hard limit of 15 s" in result["reason"]
    assert "before the sweep finished" in result["reason"]
    assert fleet.entries("a2", job) == []  # given up: nothing stored


@pytest.mark.anyio
async def test_the_driver_resolves_through_the_registry(fleet: Fleet) -> None:
    """`await chunktune.ray.resolve` works on the driver's loop (asyncio and trio); then a hit."""
    job = new_job()
    first = await chunktune.ray.resolve(Sleepy(job, 0.0), policy=POLICY)
    again = await chunktune.ray.resolve(Sleepy(job, 0.0), policy=POLICY)
    assert first.source == "benchmark"
    assert again.source == "cache" and again.chunk_size == first.chunk_size


def threads_in_ray_get() -> int:
    """How many threads of this process wait in ``ray.get`` now."""
    return sum(
        any(
            f.f_code.co_name == "get" and f.f_code.co_filename.endswith("_private/worker.py")
            for f, _ in traceback.walk_stack(frame)
        )
        for frame in sys._current_frames().values()
    )


def until_gets(waiting: bool) -> None:
    """Return once a thread here waits in ``ray.get`` (``waiting``) or none does."""
    deadline = time.monotonic() + WAIT_S
    while bool(threads_in_ray_get()) != waiting:
        assert time.monotonic() < deadline
        time.sleep(0.01)


@pytest.mark.anyio
async def test_a_driver_cancelled_mid_wait_leaves_no_thread_in_ray_get(
    fleet: Fleet, isolated: Path
) -> None:
    """The driver cancelled in an hour-long wait for another's sweep: its thread in ray.get ends."""
    workload = Sleepy(new_job(), 0.0)
    settings = node_settings(lease_s=3600.0)
    asked = ask(workload, settings=settings, policy=POLICY, manual=None, refresh=False,
                on_progress=None)  # fmt: skip
    key = identify(ray, asked, settings).registry_key
    registry = registry_handle(ray)
    claim = registry.claim.remote(key, "elsewhere", since=None, refresh=False, lease_s=3600.0)
    assert ray.get(claim, timeout=WAIT_S)["state"] == "claimed"
    told = anyio.Event()
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(
                functools.partial(
                    chunktune.ray.resolve,
                    workload,
                    settings=settings,
                    policy=POLICY,
                    on_progress=lambda event: told.set(),
                )
            )
            await told.wait()  # told once, its next wait slice is a lease (an hour) long
            await anyio.to_thread.run_sync(until_gets, True)
            tg.cancel_scope.cancel()
        await anyio.to_thread.run_sync(until_gets, False)  # far inside the hour
        assert workload.calls == 0
    finally:
        ray.get(registry.abandon.remote(key, "elsewhere"), timeout=WAIT_S)


def test_a_failing_workload_fails_once_and_every_worker_falls_back(fleet: Fleet) -> None:
    """One worker's sweep fails: it and the workers waiting for it keep native; none hangs."""
    job = new_job()
    workers = fleet.workers["a1"] + fleet.workers["a2"]
    # the failure comes 0.5 s in, long after every worker has asked the registry
    results = ray.get([a.resolve.remote(job, 0.5, fail=True) for a in workers], timeout=WAIT_S)
    assert {(r["source"], r["chunk"]) for r in results} == {("fallback", None)}
    assert sum(1 for r in results if r["first"] is not None) == 1  # one worker measured
    assert [e["event"] for e in registry_events("a", job)] == ["claim", "fail"]
    assert all("the simulator broke" in r["reason"] for r in results)


def test_a_killed_registry_is_made_anew(fleet: Fleet) -> None:
    """Workers whose registry handle died get a new registry, and still sweep once per type."""
    ray.kill(ray.get_actor(chunktune.ray.REGISTRY_NAME, namespace=chunktune.ray.REGISTRY_NAMESPACE))
    job = new_job()
    refs = [actor.resolve.remote(job, 0.0) for actor in fleet.workers["a1"] + fleet.workers["a2"]]
    results = ray.get(refs, timeout=WAIT_S)
    assert sum(1 for r in results if r["calls"]) == 1
    assert [e["event"] for e in registry_events("a", job)] == ["claim", "publish"]


def test_killed_sweeper_is_taken_over(fleet: Fleet) -> None:
    """Killing the sweeping worker mid-sweep: another of its type takes over; all finish."""
    job, gate = new_job(), fleet.root / f"{uuid.uuid4().hex}.gate"
    victim, *others = [fleet.spawn("a1"), fleet.spawn("a2"), fleet.spawn("a2")]
    ray.get([w.pid.remote() for w in (victim, *others)], timeout=WAIT_S)
    # the victim claims first and its sweep stays under way (its gate never opens) until
    # it is killed. The survivors' leases outlive any deschedule of a loaded machine: with
    # 2 s, the taker-over's own claim lapsed too, and a second takeover followed
    doomed = victim.resolve.remote(job, 0.0, gate=str(gate), lease_s=2.0)
    wait_for_claim("a", job)
    survivors = [w.resolve.remote(job, 0.05, lease_s=60.0) for w in others]
    ray.kill(victim)
    results = ray.get(survivors, timeout=WAIT_S)
    swept = [r for r in results if r["calls"]]
    assert len(swept) == 1 and swept[0]["source"] == "benchmark"
    assert len({r["chunk"] for r in results}) == 1
    kinds = [e["event"] for e in registry_events("a", job)]
    assert kinds == ["claim", "expired", "takeover", "publish"]
    with pytest.raises(ray.exceptions.RayActorError):
        ray.get(doomed, timeout=WAIT_S)


@pytest.mark.mujoco
@pytest.mark.parametrize("handler", [False, True], ids=["mujocos-handler", "own-handler"])
def test_mujocos_warnings_in_a_ray_sweep_go_where_the_workers_handler_sends_them(
    fleet: Fleet, tmp_path: Path, handler: bool
) -> None:
    """A Ray sweep's MuJoCo warnings reach the worker's handler or MuJoCo's; chunktune adds none."""
    model = tmp_path / "unstable.xml"
    model.write_text(UNSTABLE_XML)
    pinned = strategies.NodeAffinitySchedulingStrategy(fleet.node_ids["b1"], soft=False)
    # a worker process of its own: a handler it sets stays set in a process Ray reuses
    task = ray.remote(num_cpus=0, max_calls=1)(resolve_unstable)
    ref = task.options(scheduling_strategy=pinned).remote(
        str(model), str(tmp_path), handler=handler
    )
    result = ray.get(ref, timeout=WAIT_S)
    assert result["source"] == "benchmark", result["reason"]
    assert "MuJoCo" not in result["reason"] and "warn" not in result["reason"]
    lines = [line for line in result["printed"].splitlines() if line.strip()]
    ours = [line for line in lines if line.startswith("[chunktune] ")]
    assert len(ours) == 1  # the decision's report, as a plain resolve makes it
    raw = [line for line in lines if line not in ours]
    if handler:
        assert result["heard"] > 0 and result["handler_kept"]
        assert raw == [] and not result["log_file"]
    else:
        # MuJoCo's pool threads print at once: a line may hold a fragment of another's
        assert any("The simulation is unstable" in line for line in raw), raw[:3]
        assert all("WARNING" in line or "unstable" in line for line in raw), raw[:3]
        assert result["log_file"]


def test_a_hosts_entry_measured_busy_is_measured_again_there_once_calm(fleet: Fleet) -> None:
    """Calm, a host passes over its busy entry and sweeps itself; another host adopts, then does."""
    job = new_job()
    a1, a2 = fleet.workers["a1"][0], fleet.workers["a2"][0]
    busy = ray.get(a1.resolve_at.remote(job, 100.0), timeout=WAIT_S)
    assert busy["source"] == "benchmark"
    [entry] = fleet.entries("a1", job)
    assert entry.load == chunktune.MachineLoad(100.0, 2)

    calm = ray.get(a1.resolve_at.remote(job, 0.0), timeout=WAIT_S)
    assert calm["source"] == "benchmark" and calm["calls"] > 0  # on its host, not adopted
    [entry] = fleet.entries("a1", job)
    assert entry.load == chunktune.MachineLoad(0.0, 2)
    assert ray.get(a1.resolve_at.remote(job, 0.0), timeout=WAIT_S)["source"] == "cache"

    # a2 had nothing: it adopts the node type's answer as published (measured busy) ...
    adopted = ray.get(a2.resolve_at.remote(job, 0.0), timeout=WAIT_S)
    assert adopted["source"] == "cache" and "node type a's answer" in adopted["reason"]
    assert [e.load for e in fleet.entries("a2", job)] == [chunktune.MachineLoad(100.0, 2)]
    # ... and, calm, measures it again on its own host at its next resolve
    again = ray.get(a2.resolve_at.remote(job, 0.0), timeout=WAIT_S)
    assert again["source"] == "benchmark" and again["calls"] > 0
    assert [e.load for e in fleet.entries("a2", job)] == [chunktune.MachineLoad(0.0, 2)]
