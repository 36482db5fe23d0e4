"""The orchestrator: ``await resolve(workload)`` from a decision request to a stored Decision.

manual? -> disabled? -> trivial? -> cache hit? -> this process's flight for the key ->
the key's cross-process lock -> cache hit now? -> the machine-wide sweep lock ->
sweep in a thread of its own -> select -> store. Every blocking step (file I/O, lock
waits, the sweep) runs off the event loop, and none holds a thread while it waits
(see ``_threads`` and ``_flights``); the sweep checks for a stop before every probe.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import math
import sys
import threading
from collections.abc import Mapping
from importlib import metadata
from pathlib import Path
from typing import Any

import anyio
import anyio.from_thread
import anyio.lowlevel
import attrs

from . import _flights
from ._cache import CacheEntry, DecisionCache, default_cache_path
from ._cache_layers import system_lookup
from ._candidates import candidate_list
from ._config import load_settings
from ._decision import Decision, timings_to_ms
from ._errors import ChunktuneError, ConfigError, UsageError
from ._events import ProgressCallback, ProgressEvent
from ._fingerprint import device_fingerprint, mujoco_version
from ._locks import acquire, hold, key_lock, sweep_lock, sweep_lock_path
from ._settings import Policy, Settings
from ._sweep import SweepResult, sweep
from ._threads import call_soon, hop, in_own_thread, loop_running_here
from ._workload import (
    Workload,
    check_chunk_size,
    check_signature,
    check_workload,
    native_chunk,
    upper_chunk,
)

__all__ = ["cache_for", "cache_key", "resolve", "resolve_sync", "sweep_lock_path"]

logger = logging.getLogger("chunktune")


def _version() -> str:
    try:
        return metadata.version("chunktune")
    except metadata.PackageNotFoundError:
        return "0+unknown"


def cache_key(
    signature: Mapping[str, Any],
    *,
    num_envs: int,
    nthread: int,
    device: Mapping[str, Any],
    policy_hash: str,
) -> str:
    """The cache key, ``"<job>.<policy>"``.

    ``<job>`` hashes the workload's signature, N, T and the machine's fingerprint;
    ``<policy>`` is the policy's fingerprint, so each policy keeps its own entry and
    a stronger policy's entry can be found under the same ``<job>``.
    """
    payload = {
        "workload": dict(signature),
        "num_envs": num_envs,
        "nthread": nthread,
        "device": dict(device),
    }
    blob = json.dumps(payload, sort_keys=True, separators=(",", ":"), default=str)
    return f"{hashlib.sha256(blob.encode()).hexdigest()[:32]}.{policy_hash}"


_caches: dict[tuple[Path, str], DecisionCache] = {}
_caches_lock = threading.Lock()


def cache_for(settings: Settings) -> DecisionCache | None:
    """The cache the settings name, or None when caching is disabled.

    One DecisionCache per file and format per process, so a hit re-parses the file
    only when it changed, and an unusable location is warned about once.
    """
    if not settings.cache.enabled:
        return None
    path = Path(settings.cache.path).expanduser() if settings.cache.path else default_cache_path()
    key = (path.absolute(), settings.cache.format)
    with _caches_lock:
        cache = _caches.get(key)
        if cache is None:
            cache = _caches[key] = DecisionCache(path, format=settings.cache.format)
        return cache


# ---------------------------------------------------------------- reporting


def _report(decision: Decision, settings: Settings) -> None:
    timings = ", ".join(f"{k}={v:.3g}ms" for k, v in timings_to_ms(decision.timings).items())
    chosen = "native" if decision.chunk_size is None else str(decision.chunk_size)
    line = (
        f"chunk_size={chosen} (native={decision.native_chunk}, {decision.source}): "
        f"{decision.reason}"
    )
    if timings:
        line += f" | {timings}"
    mode = settings.log.stderr
    if mode == "always" or (mode == "auto" and not logger.isEnabledFor(logging.INFO)):
        # collectors in spawned subprocesses have no logging configured: say it anyway
        print(f"[chunktune] {line}", file=sys.stderr, flush=True)
    if mode != "always":
        logger.info(line)


# ---------------------------------------------------------------- the flow


def _entry_decision(entry: CacheEntry, key: str, native: int) -> Decision:
    return Decision(
        chunk_size=entry.chunk_size,
        native_chunk=native,
        source="cache",
        reason=f"cached {entry.policy or 'earlier'} decision: {entry.reason}",
        key=key,
        timings=entry.timings,
        samples=entry.samples,
        raced_out=entry.raced_out,
        probe_seconds=0.0,
        partial=entry.partial,
        policy=entry.policy,
        gain=entry.gain,
        gain_ci=entry.gain_ci,
    )


@attrs.frozen
class _Request:
    workload: Workload
    num_envs: int
    nthread: int
    native: int
    policy: Policy
    policy_name: str
    settings: Settings
    refresh: bool
    on_progress: ProgressCallback | None
    signature: dict[str, Any] = attrs.field(factory=dict)
    device: dict[str, Any] = attrs.field(factory=dict)


def _decide(req: _Request, result: SweepResult, key: str) -> Decision:
    reason = result.choice.reason
    if result.partial:
        reason += f" (partial: the {req.policy.time_budget_s:g} s budget ended the sweep)"
    return Decision(
        chunk_size=result.choice.chunk_size,
        native_chunk=req.native,
        source="benchmark",
        reason=reason,
        key=key,
        timings=result.estimates,
        samples=result.counts(),
        raced_out=tuple(sorted(c for c in result.raced_out if c is not None)),
        probe_seconds=result.probe_seconds,
        partial=result.partial,
        policy=req.policy_name,
        gain=result.gain,
        gain_ci=result.gain_ci,
    )


def _fallback(req: _Request, key: str, exc: BaseException, probe_seconds: float = 0.0) -> Decision:
    return Decision(
        chunk_size=None,
        native_chunk=req.native,
        source="fallback",
        reason=f"kept the native chunk {req.native}: the workload failed while measuring "
        f"({type(exc).__name__}: {exc})",
        key=key,
        probe_seconds=probe_seconds,
        policy=req.policy_name,
    )


class _Stopped(Exception):
    """The task awaiting the sweep is gone; the worker stops at the next probe."""


async def _measure(
    req: _Request, key: str, cache: DecisionCache | None, watch: _flights.Watch
) -> Decision:
    """Sweep under the machine-wide lock, select, store."""
    sizes = candidate_list(req.policy.candidates, req.num_envs, req.nthread)
    probe_total = 0.0
    token = anyio.lowlevel.current_token()
    stop = threading.Event()

    def on_event(event: ProgressEvent) -> None:
        nonlocal probe_total
        if event.seconds is not None:
            probe_total += event.seconds
        if req.on_progress is not None:
            # never block the sweep on the loop: the awaiting task may be gone
            call_soon(token, functools.partial(_flights.deliver, req.on_progress, event))

    def check_cancelled() -> None:
        if stop.is_set():
            raise _Stopped

    def run_sweep() -> SweepResult:
        return sweep(
            req.workload, sizes, req.policy, check_cancelled=check_cancelled, on_event=on_event
        )

    lock = sweep_lock()
    await acquire(lock, on_wait=watch.waiting("sweep", lock))
    watch.waiting_for, watch.sweeping = None, True
    try:
        # The sweep's own thread releases the lock when it ends: a sweep the caller
        # left (cancelled, or past hard_limit_s) keeps the machine until its probe in
        # flight returns, so no later sweep, here or in another process, overlaps it.
        result = await in_own_thread(run_sweep, finally_=lock.release)
    except BaseException as exc:
        stop.set()  # the worker stops at its next probe boundary
        if isinstance(exc, Exception):
            # a failing workload must never crash the trainer
            logger.warning("chunktune: workload failed while measuring: %r", exc)
            return _fallback(req, key, exc, probe_total)
        raise
    watch.sweeping = False
    decision = _decide(req, result, key)
    if cache is not None:
        await hop(_store, cache, key, req, decision, result)
    return decision


def _store(
    cache: DecisionCache, key: str, req: _Request, decision: Decision, result: SweepResult
) -> None:
    """Blocking: write the decision and its evidence to the cache."""
    cache.put(
        key,
        CacheEntry(
            chunk_size=decision.chunk_size,
            native_chunk=req.native,
            reason=decision.reason,
            timings=result.estimates,
            samples=result.counts(),
            raced_out=decision.raced_out,
            policy=req.policy_name,
            policy_hash=_identity(req.policy)[0],
            policy_rule=_identity(req.policy)[1],
            policy_effort=_identity(req.policy)[2],
            probe_seconds=result.probe_seconds,
            partial=result.partial,
            num_envs=req.num_envs,
            nthread=req.nthread,
            signature=req.signature,
            device=req.device,
            chunktune_version=_version(),
            mujoco_version=mujoco_version(),
            model_file=getattr(req.workload, "model_file", None),
            gain=decision.gain,
            gain_ci=decision.gain_ci,
        ),
    )


@functools.lru_cache(maxsize=64)
def _identity(policy: Policy) -> tuple[str, str, int]:
    """A policy's fingerprint, rule and effort: computed once per policy, not per hit."""
    return policy.fingerprint(), policy.rule(), policy.effort()


def _identify(req: _Request) -> tuple[dict[str, Any], dict[str, Any], str]:
    """Blocking: the workload's signature, this machine's fingerprint, and the cache key.

    Raises:
        WorkloadError: the signature holds a value that cannot be keyed (checked
            before anything is measured).
        Exception: whatever the workload's ``signature()`` raised.
    """
    signature = check_signature(req.workload.signature())
    device = device_fingerprint()
    key = cache_key(
        signature,
        num_envs=req.num_envs,
        nthread=req.nthread,
        device=device,
        policy_hash=_identity(req.policy)[0],
    )
    return signature, device, key


def _lookup(req: _Request, key: str, cache: DecisionCache) -> Decision | None:
    """Blocking: the cached decision that answers this request, if any."""
    base, _, own = key.rpartition(".")
    _, rule, effort = _identity(req.policy)
    found = cache.lookup(base, policy_hash=own, rule=rule, effort=effort)
    if found is None:  # then the read-only system layer an image may ship
        found = system_lookup(req.settings, base, policy_hash=own, rule=rule, effort=effort)
    if found is None:
        return None
    return _entry_decision(found[1], found[0], req.native)


def _identify_and_look(
    req: _Request, cache: DecisionCache | None
) -> tuple[_Request, str, Decision | None]:
    """Blocking: key the request and, unless refreshing, look it up: one thread hop for a hit.

    Raises:
        Exception: whatever the workload's ``signature()`` raised.
    """
    signature, device, key = _identify(req)
    req = attrs.evolve(req, signature=signature, device=device)
    hit = _lookup(req, key, cache) if cache is not None and not req.refresh else None
    return req, key, hit


async def _resolve_key(req: _Request, key: str, cache: DecisionCache | None) -> Decision:
    """A cache miss: share this process's flight for the key, or own it and measure."""
    while True:
        flight, owner = _flights.board(key)
        if owner:
            break
        # another task of this process is deciding this key: share its answer
        shared = await flight.wait()
        if shared is not None:
            return attrs.evolve(
                shared,
                source="cache" if shared.source == "benchmark" else shared.source,
                probe_seconds=0.0,
                reason=f"shared a concurrent sweep: {shared.reason}",
            )
        # the owner was cancelled or failed before deciding: try to become the owner

    decision: Decision | None = None
    try:
        decision = await _owned_within_limit(req, key, cache)
        return decision
    finally:
        _flights.land(flight, decision)


async def _owned_within_limit(req: _Request, key: str, cache: DecisionCache | None) -> Decision:
    """Own the key's flight until it is decided or ``hard_limit_s`` runs out."""
    limit = req.policy.hard_limit_s
    watch = _flights.Watch(req.on_progress, native=req.native, policy_name=req.policy_name)
    with anyio.move_on_after(math.inf if limit is None else limit):
        return await _owned(req, key, cache, watch)
    assert limit is not None
    return await watch.gave_up(key, limit)


async def _owned(
    req: _Request, key: str, cache: DecisionCache | None, watch: _flights.Watch
) -> Decision:
    """This task owns the key's flight: lock, re-check, measure."""
    if cache is None:
        return await _measure(req, key, None, watch)
    lock = key_lock(Path(cache.key_lock(key).lock_file))
    async with hold(lock, on_wait=watch.waiting("key", lock)):
        watch.waiting_for = None
        if not req.refresh:
            hit = await hop(_lookup, req, key, cache)
            if hit is not None:
                return hit
        return await _measure(req, key, cache, watch)


def _pick_policy(settings: Settings, policy: str | Policy | None) -> tuple[str, Policy]:
    if isinstance(policy, Policy):
        return "custom", policy
    if policy is not None and not isinstance(policy, str):
        raise ConfigError(f"policy: {policy!r} is not a policy name or a chunktune.Policy")
    name = settings.policy if policy is None else policy
    return name, settings.get_policy(name)


async def resolve(
    workload: Workload,
    *,
    settings: Settings | None = None,
    policy: str | Policy | None = None,
    manual: int | None = None,
    refresh: bool = False,
    on_progress: ProgressCallback | None = None,
) -> Decision:
    """Decide the chunk size for ``workload``, measuring it only on a cache miss.

    ``settings`` defaults to :func:`chunktune.load_settings` (discovery order
    applies); ``policy`` overrides the active policy by name or object;
    ``manual`` short-cuts everything; ``refresh`` ignores (and replaces) a
    cached entry. ``on_progress`` receives :class:`ProgressEvent` s on the event loop.

    Waiting (for another task's or process's sweep of the same key, or for the
    machine-wide sweep lock) holds no thread. The policy's ``hard_limit_s`` bounds
    the whole call, waits included: past it, ``resolve`` returns the native chunk
    (``source == "fallback"``, the reason says where it stood) even while a ``run()``
    is still blocked. That sweep is abandoned, not killed: its thread finishes the
    ``run()`` in flight on its own, measures nothing more, caches nothing, and keeps
    the sweep lock until it returns, so no later sweep overlaps its probes.
    Cancelling the awaiting task does the same: it returns at once, the sweep stops
    at its next probe boundary, and nothing is cached.

    Raises:
        WorkloadError: ``workload`` does not implement :class:`chunktune.Workload`, or
            its ``signature()`` holds a value that is not a str, int, finite float or
            bool (numpy scalars are taken as the numbers they hold).
        InvalidArgumentError: bad ``num_envs``, ``nthread`` or ``manual``.
        ConfigError: invalid settings or an unknown policy.
    """
    num_envs, nthread = check_workload(workload)
    native = native_chunk(num_envs, nthread)
    if manual is not None:
        chunk = check_chunk_size(manual, what="manual chunk size")
        decision = Decision(
            chunk_size=chunk,
            native_chunk=native,
            source="manual",
            reason=f"manual override: chunk_size={chunk}",
        )
        if settings is not None:
            _report(decision, settings)
        return decision
    if settings is None:
        settings = await hop(load_settings)
    name, pol = _pick_policy(settings, policy)
    req = _Request(
        workload=workload,
        num_envs=num_envs,
        nthread=nthread,
        native=native,
        policy=pol,
        policy_name=name,
        settings=settings,
        refresh=refresh,
        on_progress=on_progress,
    )
    if not pol.enabled:
        decision = Decision(
            chunk_size=None,
            native_chunk=native,
            source="disabled",
            reason=f"policy {name!r} never measures; using the native chunk {native}",
            policy=name,
        )
    elif upper_chunk(num_envs, nthread) <= 1:
        decision = Decision(
            chunk_size=None,
            native_chunk=native,
            source="trivial",
            reason=f"{num_envs} envs on {nthread} threads make at most one chunk per "
            "thread; chunk size cannot matter",
            policy=name,
        )
    else:
        cache = cache_for(settings)
        try:
            req, key, hit = await hop(_identify_and_look, req, cache)
        except ChunktuneError:
            raise
        except Exception as exc:  # a workload whose signature() fails is a failing workload
            decision = _fallback(req, "", exc)
        else:
            decision = hit if hit is not None else await _resolve_key(req, key, cache)
    _report(decision, settings)
    return decision


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
    """Blocking :func:`resolve` for synchronous callers.

    From plain code it runs its own event loop; from a worker thread of a running
    anyio loop it runs on that loop.

    Raises:
        UsageError: called on an event loop's own thread, in a task or in a plain
            callback such as ``loop.call_soon`` (``await chunktune.resolve(...)`` there
            instead; blocking would deadlock the loop). No coroutine is created.
        the errors of :func:`resolve`.
    """
    kwargs: dict[str, Any] = {
        "settings": settings,
        "policy": policy,
        "manual": manual,
        "refresh": refresh,
        "on_progress": on_progress,
    }

    async def call() -> Decision:
        return await resolve(workload, **kwargs)

    if _in_worker_thread():
        return anyio.from_thread.run(call)
    # checked before any coroutine exists: in a plain callback of a running loop too
    if loop_running_here():
        raise UsageError(
            "resolve_sync() was called on a running event loop's thread, where blocking "
            "would stall it; use `await chunktune.resolve(...)` there instead"
        )
    return anyio.run(call)
