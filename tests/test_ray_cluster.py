"""tune_cluster's driver and node tasks, without a cluster: nodes, groups, answers, stores."""

from __future__ import annotations

import sys
import types
from pathlib import Path
from typing import Any

import attrs
import pytest

import chunktune
import chunktune.ray
from chunktune import _ray_cluster
from chunktune._ray_cluster import _by_type, _collect, _distribute, _live_nodes, _Node, _Swept
from chunktune.sim import SimulatedWorkload, env_costs


def workload(name: str = "cluster") -> SimulatedWorkload:
    return SimulatedWorkload(env_costs("blocked", 64), nthread=2, name=name)


def loud() -> chunktune.Settings:
    """Settings that print every report line to stderr."""
    here = chunktune.load_settings()
    return attrs.evolve(here, log=attrs.evolve(here.log, stderr="always"))


def node(node_id: str, cpus: float | None, *, alive: bool = True) -> dict[str, Any]:
    resources = {} if cpus is None else {"CPU": cpus}
    return {"NodeID": node_id, "Alive": alive, "Resources": resources}


def test_only_live_nodes_with_cpus_are_tuned(capsys: pytest.CaptureFixture[str]) -> None:
    """A dead node is left out silently; a live one that offers no CPUs is reported and left out."""
    ray = types.SimpleNamespace(
        nodes=lambda: [node("dead0000", 4, alive=False), node("head0000", 0), node("w0000000", 2)]
    )
    assert [n["NodeID"] for n in _live_nodes(ray, loud())] == ["w0000000"]
    err = capsys.readouterr().err
    assert "node head0000: skipped: it offers Ray no CPUs" in err
    assert "dead0000" not in err


def test_a_cluster_without_a_live_node_is_a_usage_error() -> None:
    """tune_cluster on a cluster whose nodes are all dead says so, naming no live node."""
    ray = types.SimpleNamespace(nodes=lambda: [node("dead0000", 4, alive=False)])
    with pytest.raises(chunktune.UsageError, match="no live node"):
        _live_nodes(ray, loud())


def test_a_node_whose_probe_does_not_answer_is_cancelled_and_left_out(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A probe still running at the probe timeout: cancelled, reported, and its node not tuned."""
    cancelled: list[str] = []
    ray = types.SimpleNamespace(
        is_initialized=lambda: True,
        remote=lambda f: types.SimpleNamespace(
            options=lambda **kw: types.SimpleNamespace(remote=lambda *a: kw["scheduling_strategy"])
        ),
        wait=lambda refs, num_returns, timeout: (refs[:1], refs[1:]),
        get=lambda ref: ({"cpu": "x"}, {}),
        cancel=lambda ref, force: cancelled.append(ref),
    )
    monkeypatch.setattr(_ray_cluster, "_pinned", lambda node_id: node_id)
    found = _ray_cluster._probe(ray, [node("n1000000", 2), node("n2000000", 2)], None, loud())
    assert [n.node_id for n in found] == ["n1000000"]
    assert cancelled == ["n2000000"]
    assert "node n2000000: skipped: its probe did not answer within" in capsys.readouterr().err


def test_each_type_is_swept_on_its_node_with_the_most_cpus() -> None:
    """Nodes grouped by type; within a type, the node with most CPUs comes first (it sweeps)."""
    nodes = [
        _Node("n1", 2.0, "a"),
        _Node("n2", 8.0, "a"),
        _Node("n3", 4.0, "b"),
        _Node("n0", 8.0, "a"),
    ]
    groups = _by_type(nodes)
    assert {k: [n.node_id for n in v] for k, v in groups.items()} == {
        "a": ["n0", "n2", "n1"],
        "b": ["n3"],
    }


def test_an_unknown_policy_name_is_refused_before_ray_is_asked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """tune_cluster(policy='nope'): the ConfigError resolve gives, before any Ray call."""
    down = types.SimpleNamespace(is_initialized=lambda: False)
    monkeypatch.setitem(sys.modules, "ray", down)
    with pytest.raises(chunktune.ConfigError, match='unknown policy "nope"'):
        chunktune.ray.tune_cluster(workload, policy="nope")


def test_a_make_workload_that_is_not_callable_is_refused() -> None:
    """tune_cluster(a workload instead of a factory): InvalidArgumentError saying what it needs."""
    with pytest.raises(chunktune.InvalidArgumentError, match="make_workload must be a callable"):
        chunktune.ray.tune_cluster(workload())  # type: ignore[arg-type]


def test_a_task_error_is_told_by_its_own_last_line() -> None:
    """A failed task is reported by the task's exception, or by its traceback's last line."""
    from chunktune._ray_cluster import _why

    class RayTaskError(Exception):
        def __init__(self, text: str, cause: BaseException | None = None) -> None:
            super().__init__(text)
            self.cause = cause

    traceback = 'Traceback (most recent call last):\n  File "x.py", line 1\nValueError: boom'
    assert _why(RayTaskError(traceback)) == "RayTaskError: ValueError: boom"
    assert _why(RayTaskError(traceback, KeyError("bad toml"))) == ("KeyError: 'bad toml'")


def test_a_task_error_without_words_is_told_by_its_type_alone() -> None:
    """A failed task whose exception says nothing is reported by its type, no colon after it."""
    from chunktune._ray_cluster import _why

    assert _why(RuntimeError()) == "RuntimeError"


def test_an_answer_that_cost_no_probe_is_described_without_probe_seconds() -> None:
    """A type answered from a cache (no probe seconds) is described without a probes figure."""
    from chunktune._decision import headline

    hit = attrs.evolve(swept().decision, source="cache", probe_seconds=0.0)
    assert headline(hit, probes=True) == "chunk_size=8 (native=3, cache)"
    measured = attrs.evolve(hit, source="benchmark", probe_seconds=1.5)
    assert headline(measured, probes=True) == "chunk_size=8 (native=3, benchmark, 1.50 s of probes)"
    assert headline(measured) == "chunk_size=8 (native=3, benchmark)"  # resolve's report


def swept(decision_key: str = "k.p", *, entry: bool = True) -> _Swept:
    here = chunktune.load_settings()
    d = chunktune.Decision(
        chunk_size=8, native_chunk=3, source="benchmark", reason="", key=decision_key,
        timings={None: 0.01, 8: 0.009},
    )  # fmt: skip
    made = chunktune.CacheEntry(chunk_size=8, native_chunk=3, reason="chose 8") if entry else None
    return _Swept(d, made, {"name": "c"}, 64, 2, here.active.fingerprint())


def test_an_answer_with_nothing_to_store_is_not_stored(isolated: Path) -> None:
    """A type whose sweep handed no entry says so, and the driver's cache stays empty."""
    no_ray = types.SimpleNamespace(remote=lambda f: f)
    said = _distribute(no_ray, swept(entry=False), [_Node("n", 1.0, "t")], None, loud())
    assert said == "nothing to store"
    assert chunktune.DecisionCache(isolated / "cache.json").entries() == {}


def test_an_entry_of_another_policy_is_stored_under_that_policys_key(isolated: Path) -> None:
    """An answer whose entry names a policy is stored under that policy's key, not the sweeper's."""
    s = swept()
    assert s.entry is not None
    s = attrs.evolve(s, entry=attrs.evolve(s.entry, policy_hash="stronger"))
    _ray_cluster._store_here(None, s)
    keys = chunktune.DecisionCache(isolated / "cache.json").entries()
    assert [k.rpartition(".")[2] for k in keys] == ["stronger"]


def test_a_cache_that_refuses_the_answer_is_a_cache_error(
    isolated: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Storing an answer the cache does not take raises CacheError naming the cache file."""
    monkeypatch.setattr(chunktune.DecisionCache, "put", lambda self, key, entry: False)
    with pytest.raises(chunktune.CacheError, match=r"could not write .*cache\.json"):
        _ray_cluster._store_here(None, swept())


def test_a_driver_without_a_cache_says_the_answer_is_not_on_it() -> None:
    """The driver's caching is off: the answer's line says it is not on the driver, and why."""
    here = chunktune.load_settings()
    here = attrs.evolve(here, cache=attrs.evolve(here.cache, enabled=False))
    no_ray = types.SimpleNamespace(is_initialized=lambda: True, remote=lambda f: f)
    said = _distribute(no_ray, swept(), [_Node("n", 1.0, "t")], None, here)
    assert said.startswith("stored on 1 of 1 node(s) not on the driver (")
    assert "enabled = false" in said


def test_a_node_that_failed_to_store_the_answer_is_not_counted_as_storing_it(
    isolated: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One of a type's other nodes failing to store its answer: stored on all nodes but that one."""

    def get(ref: str) -> None:
        if ref == "n2000000":
            raise RuntimeError("disk full")

    ray = types.SimpleNamespace(
        is_initialized=lambda: True,
        remote=lambda f: types.SimpleNamespace(
            options=lambda **kw: types.SimpleNamespace(remote=lambda *a: kw["scheduling_strategy"])
        ),
        wait=lambda refs, num_returns, timeout: (refs, []),
        get=get,
    )
    monkeypatch.setattr(_ray_cluster, "_pinned", lambda node_id: node_id)
    members = [_Node(f"n{i}000000", 1.0, "t") for i in (1, 2, 3)]
    said = _distribute(ray, swept(), members, None, loud())
    assert said.startswith("stored on 2 of 3 node(s) and the driver; failed on n2000000")


def test_a_type_whose_sweep_failed_leaves_the_others_answered(
    isolated: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """One type's sweep task fails: it is reported, and the other types' answers still come."""
    refs = ["a-ref", "b-ref", "c-ref"]

    def get(ref: str) -> _Swept:
        if ref == "a-ref":
            raise RuntimeError("the node went away")
        return swept(f"{ref}.p", entry=False)

    ray = types.SimpleNamespace(
        is_initialized=lambda: True,
        wait=lambda pending, num_returns, timeout: ([pending[0]], pending[1:]),
        get=get,
        remote=lambda f: f,
    )
    groups = {kind: [_Node(f"{kind}-node", 1.0, kind)] for kind in "abc"}
    pending = dict(zip(refs, "abc", strict=True))
    answers = _collect(ray, pending, groups, 0.0, 1e9, None, loud())
    assert set(answers) == {"b", "c"}
    assert "node type a: skipped: its sweep failed (RuntimeError: the node went away)" in (
        capsys.readouterr().err
    )


def test_a_node_whose_cache_had_the_answer_hands_it_to_the_others(
    isolated: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """tune_cluster again after a node joined: a sweeping node's cache hit is still shared."""
    monkeypatch.setattr(_ray_cluster, "resolve_sync", chunktune.resolve_sync)
    first = _ray_cluster._sweep_on_node(workload, "quick", None)
    again = _ray_cluster._sweep_on_node(workload, "quick", None)
    assert (first.decision.source, again.decision.source) == ("benchmark", "cache")
    stored = chunktune.DecisionCache(isolated / "cache.json").get(again.decision.key)
    assert again.entry is not None and again.entry == stored


def test_a_node_answered_by_its_system_layer_hands_that_entry_on(
    isolated: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A node whose read-only system cache answers shares the shipped entry, as measured."""
    monkeypatch.setattr(_ray_cluster, "resolve_sync", chunktune.resolve_sync)
    first = chunktune.resolve_sync(workload(), policy="quick")
    system = isolated / "system.json"
    (isolated / "cache.json").rename(system)
    monkeypatch.setenv("CHUNKTUNE_SYSTEM_CACHE", str(system))
    shipped = chunktune.DecisionCache(system).get(first.key)
    answered = _ray_cluster._sweep_on_node(workload, "quick", None)
    assert answered.decision.source == "cache"
    assert answered.entry == shipped


def test_types_whose_answers_have_no_cache_key_are_never_told_they_share_one(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Two types answered without a cache key (both empty) are not said to share a key."""
    from chunktune._ray_cluster import _say_if_shared

    a = attrs.evolve(swept().decision, key="")
    _say_if_shared("b", a, {"a": a}, loud())
    assert capsys.readouterr().err == ""


def test_the_driver_waits_for_a_sweep_its_hard_limit_and_a_claim_s_wait() -> None:
    """A type's sweep is waited for ray.wait_timeout_s plus its policy's hard limit (or budget)."""
    from chunktune._ray_cluster import _sweep_limit_s

    here = chunktune.load_settings()
    pol = attrs.evolve(here.get_policy("quick"), time_budget_s=2.0, hard_limit_s=7.0)
    assert _sweep_limit_s(here, pol) == here.ray.wait_timeout_s + 7.0
    unlimited = attrs.evolve(pol, hard_limit_s=None)
    assert _sweep_limit_s(here, unlimited) == here.ray.wait_timeout_s + 2.0


def test_each_type_s_sweep_asks_ray_for_its_node_s_cpus(monkeypatch: pytest.MonkeyPatch) -> None:
    """The sweep task of a type asks Ray for as many CPUs as its chosen node offers."""
    asked: list[dict[str, Any]] = []

    def options(**kwargs: Any) -> Any:
        asked.append(kwargs)
        return types.SimpleNamespace(remote=lambda *args: "ref")

    ray = types.SimpleNamespace(
        is_initialized=lambda: True,
        cloudpickle=types.SimpleNamespace(dumps=lambda f: b""),
        nodes=lambda: [node("n4000000", 4)],
        remote=lambda f: types.SimpleNamespace(options=options),
    )
    monkeypatch.setattr(_ray_cluster, "connected_ray", lambda here: ray)
    monkeypatch.setattr(_ray_cluster, "_probe", lambda *a: [_Node("n4000000", 4.0, "t")])
    monkeypatch.setattr(_ray_cluster, "_pinned", lambda node_id: node_id)
    monkeypatch.setattr(_ray_cluster, "_collect", lambda *a: {})
    assert chunktune.ray.tune_cluster(workload, settings=loud()) == {}
    assert [(o["num_cpus"], o["scheduling_strategy"]) for o in asked] == [(4.0, "n4000000")]


class ShutDownRay:
    """Ray that another thread shuts down: at ``ray.wait``, or as ``shut_down()`` says.

    What Ray does then: a wait under way raises ``SystemExit(0)``; a later call of
    Ray's API starts a local Ray of its own (its auto-init), recorded in ``calls``.
    """

    def __init__(self) -> None:
        self.up = True
        self.calls: list[str] = []
        self.cloudpickle = types.SimpleNamespace(dumps=lambda f: b"")

    def is_initialized(self) -> bool:
        return self.up

    def shut_down(self) -> None:
        self.up = False

    def nodes(self) -> list[dict[str, Any]]:
        return [node("n4000000", 4)]

    def remote(self, f: Any) -> Any:
        def submit(*args: Any) -> str:
            self.calls.append("remote" if self.up else "remote after the shutdown")
            return "ref"

        return types.SimpleNamespace(options=lambda **kw: types.SimpleNamespace(remote=submit))

    def wait(self, refs: list[Any], **kwargs: Any) -> Any:
        self.calls.append("wait" if self.up else "wait after the shutdown")
        self.up = False
        raise SystemExit(0)


def test_ray_shut_down_during_tune_cluster_is_a_usage_error_not_an_exit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """ray.shutdown() from another thread mid-sweep: UsageError saying so, never SystemExit(0)."""
    ray = ShutDownRay()
    monkeypatch.setattr(_ray_cluster, "connected_ray", lambda here: ray)
    monkeypatch.setattr(_ray_cluster, "_probe", lambda *a: [_Node("n4000000", 4.0, "t")])
    monkeypatch.setattr(_ray_cluster, "_pinned", lambda node_id: node_id)
    with pytest.raises(chunktune.UsageError, match="Ray was shut down in this process while"):
        chunktune.ray.tune_cluster(workload, settings=loud())
    assert ray.calls == ["remote", "wait"]


def test_ray_shut_down_between_tune_clusters_steps_starts_no_ray_of_its_own(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Ray shut down as the probes end: no sweep is submitted (Ray would start a local Ray)."""
    ray = ShutDownRay()

    def probed(*args: Any) -> list[_Node]:
        ray.shut_down()
        return [_Node("n4000000", 4.0, "t")]

    monkeypatch.setattr(_ray_cluster, "connected_ray", lambda here: ray)
    monkeypatch.setattr(_ray_cluster, "_probe", probed)
    monkeypatch.setattr(_ray_cluster, "_pinned", lambda node_id: node_id)
    with pytest.raises(chunktune.UsageError, match="Ray was shut down in this process while"):
        chunktune.ray.tune_cluster(workload, settings=loud())
    assert ray.calls == []


def test_a_type_alone_is_never_told_it_shares_a_cache_key(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The first type answered (itself among the results) shares its key with nobody."""
    from chunktune._ray_cluster import _say_if_shared

    a = swept().decision
    _say_if_shared("a", a, {"a": a}, loud())
    assert capsys.readouterr().err == ""


def test_a_store_that_does_not_answer_in_time_is_left_to_finish_and_said_so(
    isolated: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A late store task (zero CPUs, bounded) is not cancelled; its node is named as pending."""
    monkeypatch.setattr(_ray_cluster, "_pinned", lambda node_id: node_id)
    cancelled: list[object] = []
    sent: list[str] = []

    class Task:
        def options(self, **options: Any) -> Task:
            self.node = options["scheduling_strategy"]
            return self

        def remote(self, settings: object, answer: _Swept) -> str:
            sent.append(self.node)
            return f"store-{self.node}"

    ray = types.SimpleNamespace(
        is_initialized=lambda: True,
        remote=lambda f: Task(),
        wait=lambda refs, num_returns, timeout: ([refs[0]], refs[1:]),
        get=lambda ref: "stored",
        cancel=lambda ref, **kw: cancelled.append(ref),
    )
    members = [_Node(f"node{i}-id", 1.0, "t") for i in range(3)]
    said = _distribute(ray, swept(), members, None, loud())
    assert sent == ["node1-id", "node2-id"] and cancelled == []
    assert said == (
        "stored on 2 of 3 node(s) and the driver; no answer within 60 s from node2-id "
        "(left to store it when it runs)"
    )
