"""``chunktune.ray.resolve``: one sweep per (job, node type) across a Ray cluster.

A worker looks in its own host's caches first (the user's, then the system layer).
On a miss it asks the registry actor (``_ray_registry``): the first worker of a node
type to ask claims the job and resolves it as :func:`chunktune.resolve` does, on its
own host, under that host's locks, renewing its claim with heartbeats; then it
publishes what it stored. The other workers of that type, whatever host they run
on, wait for that answer without blocking their event loops (or, with ``[ray]
while_sweeping = "native"``, use the native chunk meanwhile), store it in their own
host's cache, and return it. A claimant that dies stops renewing its lease and the
next worker of its type takes over; every wait is bounded (``[ray] wait_timeout_s``),
and a registry that cannot be reached degrades to a plain per-host resolve.
"""

from __future__ import annotations

import functools
import logging
import os
import sys
import uuid
from importlib import metadata
from typing import Any

import anyio
import anyio.from_thread
import anyio.to_thread
import attrs

from ._cache import CacheEntry
from ._cache_layers import system_cache_for, system_lookup
from ._config import load_settings
from ._decision import Decision
from ._errors import ConfigError, UsageError
from ._events import ProgressCallback
from ._fingerprint import device_fingerprint, mujoco_version
from ._ray_api import connected_ray, node_labels, node_type, ray_module
from ._ray_registry import registry_handle
from ._resolve import cache_for, cache_key
from ._resolve import resolve as core_resolve
from ._settings import Policy, Settings
from ._workload import Workload, check_workload, native_chunk, upper_chunk

__all__ = ["entry_of", "pick_policy", "report", "resolve", "resolve_sync"]

logger = logging.getLogger("chunktune")

_CALL_TIMEOUT_S = 60.0  # one registry call that is not a wait: slower counts as unreachable


def _version() -> str:
    try:
        return metadata.version("chunktune")
    except metadata.PackageNotFoundError:
        return "0+unknown"


class _RegistryGone(Exception):
    """The registry actor could not be reached; the caller resolves on its host alone."""


def pick_policy(settings: Settings, policy: str | Policy | None) -> tuple[str, Policy]:
    """The policy's name and object, as :func:`chunktune.resolve` picks them.

    Raises:
        ConfigError: an unknown policy name, or neither a name nor a Policy.
    """
    if isinstance(policy, Policy):
        return "custom", policy
    if policy is not None and not isinstance(policy, str):
        raise ConfigError(f"policy: {policy!r} is not a policy name or a chunktune.Policy")
    name = settings.policy if policy is None else policy
    return name, settings.get_policy(name)


def report(line: str, settings: Settings) -> None:
    """Say one line the way resolve reports decisions (``[log] stderr``, and logging)."""
    mode = settings.log.stderr
    if mode == "always" or (mode == "auto" and not logger.isEnabledFor(logging.INFO)):
        print(f"[chunktune] {line}", file=sys.stderr, flush=True)
    if mode != "always":
        logger.info(line)


def _report_decision(decision: Decision, settings: Settings) -> Decision:
    chosen = "native" if decision.chunk_size is None else str(decision.chunk_size)
    report(
        f"chunk_size={chosen} (native={decision.native_chunk}, {decision.source}): "
        f"{decision.reason}",
        settings,
    )
    return decision


@attrs.frozen
class _Job:
    """One request, keyed for this host's cache and for the cluster's registry."""

    workload: Workload
    settings: Settings
    policy: Policy
    policy_name: str
    policy_arg: str | Policy | None
    refresh: bool
    on_progress: ProgressCallback | None
    num_envs: int
    nthread: int
    signature: dict[str, Any]
    device: dict[str, Any]
    key: str  # this host's cache key
    node_id: str
    node_type: str
    registry_key: str

    @property
    def native(self) -> int:
        return native_chunk(self.num_envs, self.nthread)

    def local_key(self, policy_hash: str) -> str:
        """This host's cache key for an answer made under ``policy_hash``."""
        return f"{self.key.rpartition('.')[0]}.{policy_hash or self.policy.fingerprint()}"


def _identify(
    ray: Any,
    workload: Workload,
    settings: Settings,
    policy_arg: str | Policy | None,
    refresh: bool,
    on_progress: ProgressCallback | None,
) -> _Job:
    """Blocking: key the request for this host and for the registry.

    Raises:
        Exception: whatever the workload's ``signature()`` raised.
    """
    num_envs, nthread = check_workload(workload)
    name, pol = pick_policy(settings, policy_arg)
    signature = dict(workload.signature())
    device = device_fingerprint()
    kind = node_type(node_labels(ray), device)

    def key_on(dev: dict[str, Any]) -> str:
        return cache_key(
            signature, num_envs=num_envs, nthread=nthread, device=dev, policy_hash=pol.fingerprint()
        )

    return _Job(
        workload=workload,
        settings=settings,
        policy=pol,
        policy_name=name,
        policy_arg=policy_arg,
        refresh=refresh,
        on_progress=on_progress,
        num_envs=num_envs,
        nthread=nthread,
        signature=signature,
        device=device,
        key=key_on(device),
        node_id=str(ray.get_runtime_context().get_node_id()),
        node_type=kind,
        # the node type stands in for the machine: a label may group several fingerprints
        registry_key=f"{kind}/{key_on({'node_type': kind})}",
    )


def _local_hit(job: _Job) -> bool:
    """Blocking: whether this host's caches (user, then system) already answer the job."""
    cache = cache_for(job.settings)
    if cache is None:
        return False
    base, _, own = job.key.rpartition(".")
    rule, effort = job.policy.rule(), job.policy.effort()
    found = cache.lookup(base, policy_hash=own, rule=rule, effort=effort) or system_lookup(
        job.settings, base, policy_hash=own, rule=rule, effort=effort
    )
    return found is not None


def entry_of(
    decision: Decision,
    *,
    settings: Settings,
    policy: Policy,
    signature: dict[str, Any],
    device: dict[str, Any],
    num_envs: int,
    nthread: int,
    model_file: str | None = None,
) -> CacheEntry:
    """Blocking: the cache entry behind ``decision``: as stored, or built from it."""
    cache = cache_for(settings)
    stored = cache.get(decision.key) if cache is not None else None
    if stored is None:
        system = system_cache_for(settings)
        stored = system.entries().get(decision.key) if system is not None else None
    if stored is not None:
        return stored
    return CacheEntry(
        chunk_size=decision.chunk_size,
        native_chunk=decision.native_chunk,
        reason=decision.reason,
        timings=decision.timings,
        samples=decision.samples,
        raced_out=decision.raced_out,
        policy=decision.policy,
        policy_hash=policy.fingerprint(),
        policy_rule=policy.rule(),
        policy_effort=policy.effort(),
        probe_seconds=decision.probe_seconds,
        partial=decision.partial,
        num_envs=num_envs,
        nthread=nthread,
        signature=signature,
        device=device,
        chunktune_version=_version(),
        mujoco_version=mujoco_version(),
        model_file=model_file,
    )


def _store(job: _Job, entry: CacheEntry) -> str:
    """Blocking: keep another worker's answer in this host's cache; returns its key here."""
    key = job.local_key(entry.policy_hash)
    cache = cache_for(job.settings)
    if cache is not None:
        cache.put(key, entry)
    return key


def _native(job: _Job, why: str) -> Decision:
    return Decision(
        chunk_size=None,
        native_chunk=job.native,
        source="fallback",
        reason=f"kept the native chunk {job.native}: {why}",
        key=job.key,
        policy=job.policy_name,
    )


async def _call(ray: Any, ref: Any, limit_s: float = _CALL_TIMEOUT_S) -> Any:
    """The result of a registry call, waited for in a worker thread (any event loop).

    Raises:
        _RegistryGone: the call failed or took longer than ``limit_s`` seconds.
    """
    get = functools.partial(ray.get, ref, timeout=limit_s)
    try:
        return await anyio.to_thread.run_sync(get, abandon_on_cancel=True)
    except Exception as exc:
        raise _RegistryGone(f"{type(exc).__name__}: {exc}") from exc


async def _plain(job: _Job) -> Decision:
    return await core_resolve(
        job.workload,
        settings=job.settings,
        policy=job.policy_arg,
        refresh=job.refresh,
        on_progress=job.on_progress,
    )


async def _adopt(job: _Job, entry: CacheEntry, by: str) -> Decision:
    key = await anyio.to_thread.run_sync(_store, job, entry)
    decision = Decision(
        chunk_size=entry.chunk_size,
        native_chunk=job.native,
        source="cache",
        reason=f"node type {job.node_type}'s answer, measured by {by} on {entry.host}: "
        f"{entry.reason}",
        key=key,
        timings=entry.timings,
        samples=entry.samples,
        raced_out=entry.raced_out,
        partial=entry.partial,
        policy=entry.policy,
    )
    return _report_decision(decision, job.settings)


async def _sweep(
    ray: Any, registry: Any, job: _Job, holder: str, reply: dict[str, Any]
) -> Decision:
    """This worker holds the claim: resolve here, renewing the lease, then publish."""
    token: int = reply["token"]
    lease_s = job.settings.ray.lease_s
    if reply.get("took_over"):
        report(
            f"node type {job.node_type}: took over the sweep from {reply['took_over']} "
            f"(its claim lapsed: no heartbeat for {lease_s:g} s)",
            job.settings,
        )

    async def heartbeat() -> None:
        while True:
            await anyio.sleep(lease_s / 4)
            registry.heartbeat.remote(job.registry_key, token, lease_s)

    failure: Exception | None = None
    decision: Decision | None = None
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(heartbeat)
            try:
                decision = await _plain(job)
            except Exception as exc:  # re-raised below, outside the task group
                failure = exc
            finally:
                tg.cancel_scope.cancel()
    except BaseException:
        # cancelled: give the claim up now rather than after a lease
        registry.release.remote(job.registry_key, token)
        raise
    if failure is not None:
        registry.release.remote(job.registry_key, token)
        raise failure
    assert decision is not None
    try:
        if decision.source == "fallback":
            await _call(ray, registry.fail.remote(job.registry_key, token, decision.reason, holder))
        else:
            entry = await anyio.to_thread.run_sync(
                functools.partial(
                    entry_of,
                    decision,
                    settings=job.settings,
                    policy=job.policy,
                    signature=job.signature,
                    device=job.device,
                    num_envs=job.num_envs,
                    nthread=job.nthread,
                    model_file=getattr(job.workload, "model_file", None),
                )
            )
            await _call(ray, registry.publish.remote(job.registry_key, token, entry, holder))
    except _RegistryGone as exc:
        logger.warning("chunktune: could not publish to the registry (%s)", exc)
    return decision


async def _coordinate(ray: Any, job: _Job, *, fresh: bool) -> Decision:
    """Ask the registry until this worker has an answer, the claim, or must fall back.

    ``fresh`` looks the registry up again instead of using this process's handle.
    """
    try:
        registry = await anyio.to_thread.run_sync(
            functools.partial(registry_handle, ray, fresh=fresh)
        )
    except Exception as exc:
        raise _RegistryGone(f"{type(exc).__name__}: {exc}") from exc
    holder = f"{job.node_id[:8]}/pid{os.getpid()}/{uuid.uuid4().hex[:6]}"
    options = job.settings.ray
    deadline = anyio.current_time() + options.wait_timeout_s
    since: float | None = None
    while True:
        reply = await _call(
            ray,
            registry.claim.remote(
                job.registry_key, holder, since=since, refresh=job.refresh, lease_s=options.lease_s
            ),
        )
        since = reply["since"]
        state = reply["state"]
        if state == "answer":
            return await _adopt(job, reply["entry"], reply["by"])
        if state == "claimed":
            return await _sweep(ray, registry, job, holder, reply)
        if state == "failed":
            why = f"node type {job.node_type}'s sweep by {reply['by']} failed ({reply['reason']})"
            return _report_decision(_native(job, why), job.settings)
        if options.while_sweeping == "native":
            why = (
                f"{reply['holder']} is measuring node type {job.node_type} now "
                '([ray] while_sweeping = "native"); a later resolve picks its answer up'
            )
            return _report_decision(_native(job, why), job.settings)
        left = deadline - anyio.current_time()
        if left <= 0:
            why = (
                f"waited {options.wait_timeout_s:g} s ([ray] wait_timeout_s) for "
                f"{reply['holder']}'s sweep of node type {job.node_type}; nothing was cached"
            )
            return _report_decision(_native(job, why), job.settings)
        slice_s = min(left, options.lease_s)
        await _call(
            ray,
            registry.wait.remote(job.registry_key, slice_s),
            limit_s=slice_s + _CALL_TIMEOUT_S,
        )


async def resolve(
    workload: Workload,
    *,
    settings: Settings | None = None,
    policy: str | Policy | None = None,
    manual: int | None = None,
    refresh: bool = False,
    on_progress: ProgressCallback | None = None,
) -> Decision:
    """:func:`chunktune.resolve` for Ray tasks and actors: one sweep per (job, node type).

    Same arguments and result as :func:`chunktune.resolve`. A cache hit on this host
    costs what it costs there; a miss costs one registry round trip, and then either
    this worker's sweep or a wait for another worker's (bounded by ``[ray]
    wait_timeout_s``; ``[ray] while_sweeping = "native"`` returns native at once).
    ``refresh`` ignores answers older than the call, in the registry and in caches.
    Cancelled while sweeping, it gives its claim up and caches nothing.

    Raises:
        MissingExtraError: Ray is not installed.
        UsageError: Ray is not initialised here and ``[ray] init_local`` is off.
        the errors of :func:`chunktune.resolve`.
    """
    num_envs, nthread = check_workload(workload)
    # Ray missing: say so now, whatever this call turns out to need (importing it is slow)
    await anyio.to_thread.run_sync(ray_module)
    if settings is None and manual is None:
        settings = await anyio.to_thread.run_sync(load_settings)
    plain = functools.partial(
        core_resolve,
        workload,
        settings=settings,
        policy=policy,
        manual=manual,
        refresh=refresh,
        on_progress=on_progress,
    )
    if manual is not None or settings is None:
        return await plain()
    _, pol = pick_policy(settings, policy)
    if not pol.enabled or upper_chunk(num_envs, nthread) <= 1:
        return await plain()  # disabled or trivial: nothing to share
    ray = await anyio.to_thread.run_sync(connected_ray, settings)
    try:
        job = await anyio.to_thread.run_sync(
            _identify, ray, workload, settings, policy, refresh, on_progress
        )
    except Exception:  # a failing signature(): the plain resolve falls back and says why
        return await plain()
    if not refresh and await anyio.to_thread.run_sync(_local_hit, job):
        return await plain()
    for fresh in (False, True):  # a killed registry is made anew, under a new handle
        try:
            return await _coordinate(ray, job, fresh=fresh)
        except _RegistryGone as exc:
            gone = exc
    logger.warning(
        "chunktune: the Ray registry is unreachable (%s); resolving on this host alone", gone
    )
    return await plain()


def _on_event_loop() -> bool:
    try:
        anyio.get_current_task()
    except RuntimeError:
        return False
    return True


def _in_worker_thread() -> bool:
    try:
        anyio.from_thread.check_cancelled()
    except RuntimeError:
        return False
    except BaseException:
        return True
    return True


def resolve_sync(
    workload: Workload,
    *,
    settings: Settings | None = None,
    policy: str | Policy | None = None,
    manual: int | None = None,
    refresh: bool = False,
    on_progress: ProgressCallback | None = None,
) -> Decision:
    """Blocking :func:`resolve`, for synchronous Ray tasks and actors.

    Raises:
        UsageError: called on an event loop's own thread (an async actor's method:
            ``await chunktune.ray.resolve(...)`` there instead).
        the errors of :func:`resolve`.
    """

    async def call() -> Decision:
        return await resolve(
            workload,
            settings=settings,
            policy=policy,
            manual=manual,
            refresh=refresh,
            on_progress=on_progress,
        )

    if _in_worker_thread():
        return anyio.from_thread.run(call)
    if _on_event_loop():
        raise UsageError(
            "chunktune.ray.resolve_sync() was called on a running event loop's thread (an "
            "async actor's method?), where blocking would stall it; use "
            "`await chunktune.ray.resolve(...)` there instead"
        )
    return anyio.run(call)
