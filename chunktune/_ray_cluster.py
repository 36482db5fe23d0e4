"""``chunktune.ray.tune_cluster``: one sweep per node type, its answer stored on every node.

From a Ray driver: list the live nodes; probe each with a zero-CPU task pinned to it
(its device fingerprint, its ``chunktune.io/node-type`` label, and whether its
settings load); group nodes by node type; sweep each type on one of its nodes in a
task that reserves all that node's CPUs, so no other Ray task shares them while it
measures; then store the answer in the cache of every other node of the type, with
a zero-CPU task pinned to each, and in the driver's. A node that fails its probe is
reported and skipped; so is a type whose sweep task fails. Each sweep runs through
:func:`chunktune.ray.resolve`, so workers resolving the same job meanwhile wait for
it instead of measuring too.
"""

from __future__ import annotations

import importlib
import time
from collections.abc import Callable, Mapping
from typing import Any

import attrs

from ._cache_entry import CacheEntry
from ._config import load_settings
from ._decision import Decision, headline
from ._errors import CacheError, ChunktuneError, InvalidArgumentError, UsageError
from ._fingerprint import device_fingerprint
from ._keys import cache_for, cache_key
from ._named import named
from ._policy import Policy
from ._ray_api import connected_ray, node_labels, node_type, ray_module
from ._ray_job import entry_of, report
from ._ray_resolve import resolve_sync
from ._request import check_policy, check_settings, pick_policy, worth_storing
from ._returned import check_signature
from ._settings import Settings
from ._shown import shown_line, shown_one, type_named
from ._workload import Workload, check_workload

__all__ = ["tune_cluster"]

_PROBE_TIMEOUT_S = 60.0  # a node's zero-CPU probe, worker start-up included
_STORE_TIMEOUT_S = 60.0


@attrs.frozen
class _Node:
    node_id: str
    cpus: float
    node_type: str


@attrs.frozen
class _Swept:
    """What a sweep task sends back: the decision, and what other nodes need to store it."""

    decision: Decision
    entry: CacheEntry | None
    signature: dict[str, Any]
    num_envs: int
    nthread: int
    policy_hash: str  # the sweeping node's policy's, for an entry that lacks one


# ---------------------------------------------------------------- tasks (run on the nodes)


def _probe_node(settings: Settings | None) -> tuple[dict[str, Any], dict[str, str]]:
    """On a node: its fingerprint and labels; its settings must load, or it cannot be tuned."""
    if settings is None:
        load_settings()
    return device_fingerprint(), node_labels(ray_module())


def _sweep_on_node(
    make_workload: Callable[[], Workload],
    policy: str | Policy | None,
    settings: Settings | None,
) -> _Swept:
    """On a node, with all its CPUs: resolve the job through the registry."""
    here = settings if settings is not None else load_settings()
    workload = make_workload()
    num_envs, nthread = check_workload(workload)
    _, pol = pick_policy(here, policy)
    decision = resolve_sync(workload, settings=here, policy=policy)
    signature = check_signature(workload.signature())  # keyed as the node's resolves key it
    device = device_fingerprint()
    entry = None
    # as a local sweep: one that timed native alone is no evidence to hand to other hosts
    if decision.source == "cache" or (decision.source == "benchmark" and worth_storing(decision)):
        entry = entry_of(
            decision,
            settings=here,
            policy=pol,
            signature=signature,
            device=device,
            num_envs=num_envs,
            nthread=nthread,
            model_file=getattr(workload, "model_file", None),
        )
    return _Swept(
        decision=decision,
        entry=entry,
        signature=signature,
        num_envs=num_envs,
        nthread=nthread,
        policy_hash=pol.fingerprint(),
    )


def _store_here(settings: Settings | None, swept: _Swept, key: str | None = None) -> str:
    """Store a sweep's answer in this host's cache; returns the path.

    ``key`` None stores it under this host's key (a node of the swept type); the
    driver passes the sweeping node's own key, since its machine may be of no type.

    Raises:
        CacheError: the cache is disabled or could not be written.
    """
    here = settings if settings is not None else load_settings()
    cache = cache_for(here)
    if cache is None:
        raise CacheError("the cache is disabled ([cache] enabled = false)")
    assert swept.entry is not None
    if key is None:
        key = cache_key(
            swept.signature,
            num_envs=swept.num_envs,
            nthread=swept.nthread,
            device=device_fingerprint(),
            policy_hash=swept.entry.policy_hash or swept.policy_hash,
        )
    if not cache.put(key, swept.entry):
        raise CacheError(f"could not write {cache.path}")
    return str(cache.path)


# ---------------------------------------------------------------- the driver


def _pinned(node_id: str) -> Any:
    strategies = importlib.import_module("ray.util.scheduling_strategies")
    return strategies.NodeAffinitySchedulingStrategy(node_id=node_id, soft=False)


def _short(node_id: str) -> str:
    return node_id[:8]


def _why(exc: BaseException) -> str:
    cause = getattr(exc, "cause", None)  # RayTaskError: the task's own exception
    error = cause if isinstance(cause, BaseException) else exc
    text = str(error).strip().splitlines()
    # the task's exception is the workload's (its run() raised on that node): anyone's text
    return f"{type_named(error)}: {shown_line(text[-1]) if text else ''}".rstrip(": ")


def _probe(
    ray: Any, nodes: list[Mapping[str, Any]], settings: Settings | None, here: Settings
) -> list[_Node]:
    """Probe every node at once; report and drop those whose probe fails or does not answer."""
    _up(ray)
    task = ray.remote(_probe_node)
    refs = {
        str(n["NodeID"]): task.options(
            num_cpus=0, max_retries=0, scheduling_strategy=_pinned(str(n["NodeID"]))
        ).remote(settings)
        for n in nodes
    }
    ready, _ = ray.wait(list(refs.values()), num_returns=len(refs), timeout=_PROBE_TIMEOUT_S)
    done = set(ready)
    cpus = {str(n["NodeID"]): float(n.get("Resources", {}).get("CPU", 0.0)) for n in nodes}
    found: list[_Node] = []
    for node_id, ref in refs.items():
        if ref not in done:
            ray.cancel(ref, force=True)
            report(
                f"node {_short(node_id)}: skipped: its probe did not answer within "
                f"{_PROBE_TIMEOUT_S:g} s",
                here,
            )
            continue
        try:
            device, labels = ray.get(ref)
        except Exception as exc:
            report(f"node {_short(node_id)}: skipped: its probe failed ({_why(exc)})", here)
            continue
        found.append(_Node(node_id, cpus[node_id], node_type(labels, device)))
    return found


def _sweep_limit_s(here: Settings, policy: str | Policy | None) -> float:
    _, pol = pick_policy(here, policy)
    return here.ray.wait_timeout_s + (pol.hard_limit_s or pol.time_budget_s)


def tune_cluster(
    make_workload: Callable[[], Workload],
    *,
    policy: str | Policy | None = None,
    settings: Settings | None = None,
) -> dict[str, Decision]:
    """Sweep once per node type of the connected Ray cluster; store each answer everywhere.

    ``make_workload()`` builds the job's workload; it runs on one node of each type,
    so it must be picklable (a module-level function or class, or a closure
    cloudpickle can ship). ``settings=None`` lets every node load its own settings
    (so each node writes its own cache file); the driver loads its own too.
    A sweep task waits until it can reserve all its node's CPUs: run this on an idle
    cluster, before the workers start. Prints one line per node type as it finishes.

    Returns ``{node_type: Decision}`` for every type that was resolved; a type is the
    node's ``chunktune.io/node-type`` label, else ``"fp-"`` and a hash of its fingerprint.

    Raises:
        MissingExtraError: Ray is not installed.
        UsageError: Ray is not initialised and ``[ray] init_local`` is off, or the
            ``ray.init()`` it calls had not returned within ``START_TIMEOUT_S`` seconds
            (a stale ``RAY_ADDRESS``: the message names it), or this process's start
            failed or was overdue before (a failed one is not repeated while
            ``RAY_ADDRESS`` is unchanged), or the cluster has no live node, or this
            process's Ray was shut down while it ran (another thread's
            ``ray.shutdown()``): the types tuned by then are stored on their nodes.
        InvalidArgumentError: ``make_workload`` is not callable, or does not pickle;
            ``settings`` is not a Settings; ``policy`` is neither a name nor a Policy.
        ConfigError: invalid settings or an unknown policy name.
    """
    if not callable(make_workload):
        raise InvalidArgumentError(
            "make_workload must be a callable that returns a Workload, got "
            f"{shown_one(make_workload)}"
        )
    check_settings(settings)  # before it is read: a path or a dict is no Settings
    check_policy(policy)  # before the settings load: a bad keyword is the caller's first error
    here = settings if settings is not None else load_settings()
    pick_policy(here, policy)
    ray = connected_ray(here)
    try:
        return _tune(ray, make_workload, policy, settings, here)
    except (SystemExit, Exception) as exc:
        if ray.is_initialized() or isinstance(exc, ChunktuneError):
            raise
        # Ray shut down under it: a ray.wait or ray.get under way raises SystemExit(0),
        # which would end the caller's process as if it had succeeded
        raise UsageError(_SHUT_DOWN) from exc


_SHUT_DOWN = (
    "Ray was shut down in this process while tune_cluster ran (ray.shutdown() from "
    "another thread?); the node types tuned by then are stored on their nodes, the rest "
    "were not tuned: call tune_cluster again once Ray is up"
)


def _up(ray: Any) -> None:
    """Raise UsageError once this process's Ray is shut down: Ray's own calls would
    start a local Ray of their own then (its auto-init), and tune that instead."""
    if not ray.is_initialized():
        raise UsageError(_SHUT_DOWN)


def _tune(
    ray: Any,
    make_workload: Callable[[], Workload],
    policy: str | Policy | None,
    settings: Settings | None,
    here: Settings,
) -> dict[str, Decision]:
    """:func:`tune_cluster` on the connected ``ray``: probe, sweep, store."""
    _check_picklable(ray, make_workload)
    alive = _live_nodes(ray, here)
    probing = time.monotonic()
    nodes = _probe(ray, alive, settings, here)
    groups = _by_type(nodes)
    report(
        f"tuning {len(groups)} node type(s) on {len(nodes)} of {len(alive)} live node(s) "
        f"(probed in {time.monotonic() - probing:.1f} s)",
        here,
    )
    started = time.monotonic()
    _up(ray)
    sweep = ray.remote(_sweep_on_node)
    pending: dict[Any, str] = {}
    for kind, members in groups.items():
        chosen = members[0]
        ref = sweep.options(
            num_cpus=chosen.cpus, max_retries=0, scheduling_strategy=_pinned(chosen.node_id)
        ).remote(make_workload, policy, settings)
        pending[ref] = kind
    return _collect(ray, pending, groups, started, _sweep_limit_s(here, policy), settings, here)


def _check_picklable(ray: Any, make_workload: Callable[[], Workload]) -> None:
    """Raise InvalidArgumentError unless ``make_workload`` pickles for the cluster's nodes."""
    try:  # what every sweep task would fail on, after all the nodes were probed
        ray.cloudpickle.dumps(make_workload)
    except Exception as exc:
        raise InvalidArgumentError(
            f"make_workload {shown_one(make_workload)} cannot be sent to the cluster's nodes: "
            f"it does not pickle ({named(exc)}); use a module-level function "
            "or a closure over picklable values"
        ) from None


def _live_nodes(ray: Any, here: Settings) -> list[Mapping[str, Any]]:
    """The live nodes that offer Ray CPUs; reports those that offer none.

    Raises:
        UsageError: the cluster has no live node.
    """
    alive = [n for n in ray.nodes() if n.get("Alive")]
    if not alive:
        raise UsageError("the Ray cluster has no live node to tune")
    for node in alive:
        if not node.get("Resources", {}).get("CPU"):
            # a head started with num_cpus=0, say: no worker of a job ever runs there
            report(f"node {_short(str(node['NodeID']))}: skipped: it offers Ray no CPUs", here)
    return [n for n in alive if n.get("Resources", {}).get("CPU")]


def _by_type(nodes: list[_Node]) -> dict[str, list[_Node]]:
    """The probed nodes by node type, each type's most CPUs first (its first node sweeps)."""
    groups: dict[str, list[_Node]] = {}
    for node in sorted(nodes, key=lambda n: (-n.cpus, n.node_id)):
        groups.setdefault(node.node_type, []).append(node)
    return groups


def _collect(
    ray: Any,
    pending: dict[Any, str],
    groups: Mapping[str, list[_Node]],
    started: float,
    limit: float,
    settings: Settings | None,
    here: Settings,
) -> dict[str, Decision]:
    """Each type's decision as its sweep finishes, stored on its nodes; late ones cancelled.

    ``pending`` maps each sweep task to its node type and is emptied as they answer;
    ``limit`` is the seconds from ``started`` (``time.monotonic``) the sweeps may take.
    """
    results: dict[str, Decision] = {}
    while pending:
        _up(ray)  # a store on the driver (below) may have outlasted Ray
        left = limit - (time.monotonic() - started)
        ready, _ = ray.wait(list(pending), num_returns=1, timeout=max(0.0, left))
        if not ready:
            for ref, kind in pending.items():
                ray.cancel(ref)
                report(f"node type {kind}: skipped: no answer within {limit:g} s", here)
            break
        ref = ready[0]
        kind = pending.pop(ref)
        try:
            swept: _Swept = ray.get(ref)
        except Exception as exc:
            report(f"node type {kind}: skipped: its sweep failed ({_why(exc)})", here)
            continue
        results[kind] = swept.decision
        _say_if_shared(kind, swept.decision, results, here)
        stored = _distribute(ray, swept, groups[kind], settings, here)
        # a node whose cache (or another worker of its type) already had the answer swept
        # nothing: say where the answer was had, not that it was swept there
        how = "swept on" if swept.decision.source == "benchmark" else "answered on"
        said = headline(swept.decision, probes=True)
        report(
            f"node type {kind} ({len(groups[kind])} node(s)): {said} "
            f"{how} node {_short(groups[kind][0].node_id)} after "
            f"{time.monotonic() - started:.1f} s; {stored}",
            here,
        )
    return results


def _say_if_shared(
    kind: str, decision: Decision, results: Mapping[str, Decision], here: Settings
) -> None:
    """Say so when another node type's answer has this one's cache key (one fingerprint).

    A cache key holds the machine's fingerprint, not the node type: two types of one
    fingerprint (labels on alike machines) share a key, and a cache holding both keeps
    the answer stored last.
    """
    for other, earlier in results.items():
        if other != kind and earlier.key == decision.key and decision.key:
            report(
                f"node types {other} and {kind} share one machine fingerprint, so one cache "
                f"key: a cache that holds both (the driver's) keeps {kind}'s answer",
                here,
            )


def _distribute(
    ray: Any, swept: _Swept, members: list[_Node], settings: Settings | None, here: Settings
) -> str:
    """Store a type's answer on its other nodes and on the driver; says how that went."""
    if swept.entry is None:
        return "nothing to store"
    _up(ray)
    store = ray.remote(_store_here)
    refs = {
        store.options(num_cpus=0, max_retries=0, scheduling_strategy=_pinned(node.node_id)).remote(
            settings, swept
        ): node
        for node in members[1:]
    }
    failures: list[str] = []
    pending: list[str] = []
    if refs:
        ready, late = ray.wait(list(refs), num_returns=len(refs), timeout=_STORE_TIMEOUT_S)
        # A late store is left to finish, unlike a late probe (whose node is skipped) or
        # sweep (which holds all its node's CPUs): it reserves no CPU, so it keeps no other
        # task from its node; its own wait is bounded (the cache's write lock is given up
        # once its holder changes nothing for 5 s); and when a slow node does run it (a
        # worker slow to start), it stores there the answer it was sent to store.
        pending = [_short(refs[ref].node_id) for ref in late]
        for ref in ready:
            try:
                ray.get(ref)
            except Exception as exc:
                failures.append(f"{_short(refs[ref].node_id)}: {_why(exc)}")
    try:
        # under the key it was measured for: the driver's machine (a CPU-less head, a
        # laptop) was not measured, and types of other machines would share its one key
        _store_here(here, swept, swept.decision.key)
        driver = "and the driver"
    except CacheError as exc:
        driver = f"not on the driver ({exc})"
    stored = len(members) - len(failures) - len(pending)
    line = f"stored on {stored} of {len(members)} node(s) {driver}"
    if failures:
        line += f"; failed on {', '.join(failures)}"
    if pending:
        line += (
            f"; no answer within {_STORE_TIMEOUT_S:g} s from {', '.join(pending)} "
            "(left to store it when it runs)"
        )
    return line
