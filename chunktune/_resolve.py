"""The orchestrator: ``await resolve(workload)`` from a decision request to a stored Decision.

manual? -> disabled? -> trivial? -> cache hit? -> this process's flight for the key ->
the key's cross-process lock -> cache hit now? -> the machine-wide sweep lock ->
sweep in one worker thread -> select -> store. Every blocking step (file I/O, lock
waits, the sweep) runs off the event loop; the sweep checks for cancellation
before every probe.
"""

from __future__ import annotations

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
import anyio.to_thread
import attrs

from ._cache import CacheEntry, DecisionCache, default_cache_path
from ._cache_layers import system_lookup
from ._candidates import candidate_list
from ._config import load_settings
from ._decision import Decision, timings_to_ms
from ._errors import ConfigError, UsageError
from ._events import ProgressCallback
from ._fingerprint import device_fingerprint, mujoco_version
from ._locks import hold, sweep_lock, sweep_lock_path
from ._settings import Policy, Settings
from ._sweep import SweepResult, sweep
from ._workload import Workload, check_chunk_size, check_workload, native_chunk, upper_chunk

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


# ---------------------------------------------------------------- locks and flights


@attrs.define
class _Flight:
    done: threading.Event = attrs.field(factory=threading.Event)
    decision: Decision | None = None


_flights: dict[str, _Flight] = {}
_flights_lock = threading.Lock()


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


def _soon(token: anyio.lowlevel.EventLoopToken, callback: ProgressCallback, event: Any) -> None:
    """Schedule ``callback(event)`` on the event loop without waiting for it.

    The worker must never block on the loop: if the awaiting task was cancelled
    natively (asyncio's ``task.cancel()``, or Ctrl-C under ``asyncio.run``) the
    loop may be gone, and a blocking call would hang the thread for good.
    """

    def deliver() -> None:
        try:
            callback(event)
        except Exception:  # a broken progress callback must not break the sweep
            logger.exception("chunktune: on_progress raised; continuing")

    native: Any = token.native_token
    try:
        if hasattr(native, "call_soon_threadsafe"):  # asyncio's loop
            native.call_soon_threadsafe(deliver)
        else:  # trio's TrioToken
            native.run_sync_soon(deliver)
    except RuntimeError:  # the loop has closed: nobody is listening any more
        pass


async def _measure(req: _Request, key: str, cache: DecisionCache | None) -> Decision:
    """Sweep under the machine-wide lock, select, store."""
    sizes = candidate_list(req.policy.candidates, req.num_envs, req.nthread)
    probe_total = 0.0
    token = anyio.lowlevel.current_token()
    stop = threading.Event()

    def on_event(event: Any) -> None:
        nonlocal probe_total
        if event.seconds is not None:
            probe_total += event.seconds
        if req.on_progress is not None:
            _soon(token, req.on_progress, event)

    def check_cancelled() -> None:
        if stop.is_set():
            raise _Stopped
        anyio.from_thread.check_cancelled()

    def run_sweep() -> SweepResult:
        return sweep(
            req.workload, sizes, req.policy, check_cancelled=check_cancelled, on_event=on_event
        )

    async with hold(sweep_lock()):
        try:
            result = await anyio.to_thread.run_sync(run_sweep)
        except BaseException as exc:
            # an anyio cancellation has stopped the worker already; a native one
            # (asyncio's task.cancel(), Ctrl-C under asyncio) has not: tell it to stop
            stop.set()
            if isinstance(exc, Exception) and not isinstance(exc, anyio.get_cancelled_exc_class()):
                # a failing workload must never crash the trainer
                logger.warning("chunktune: workload failed while measuring: %r", exc)
                return _fallback(req, key, exc, probe_total)
            raise
    decision = _decide(req, result, key)
    if cache is not None:
        await anyio.to_thread.run_sync(_store, cache, key, req, decision, result)
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
            policy_hash=req.policy.fingerprint(),
            policy_rule=req.policy.rule(),
            policy_effort=req.policy.effort(),
            probe_seconds=result.probe_seconds,
            partial=result.partial,
            num_envs=req.num_envs,
            nthread=req.nthread,
            signature=req.signature,
            device=req.device,
            chunktune_version=_version(),
            mujoco_version=mujoco_version(),
            model_file=getattr(req.workload, "model_file", None),
        ),
    )


def _identify(req: _Request) -> tuple[dict[str, Any], dict[str, Any], str]:
    """Blocking: the workload's signature, this machine's fingerprint, and the cache key."""
    signature = dict(req.workload.signature())
    device = device_fingerprint()
    key = cache_key(
        signature,
        num_envs=req.num_envs,
        nthread=req.nthread,
        device=device,
        policy_hash=req.policy.fingerprint(),
    )
    return signature, device, key


def _lookup(req: _Request, key: str, cache: DecisionCache) -> Decision | None:
    """Blocking: the cached decision that answers this request, if any."""
    base, _, own = key.rpartition(".")
    rule, effort = req.policy.rule(), req.policy.effort()
    found = cache.lookup(base, policy_hash=own, rule=rule, effort=effort)
    if found is None:  # then the read-only system layer (issue J)
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
        with _flights_lock:
            flight = _flights.get(key)
            owner = flight is None
            if owner:
                flight = _flights[key] = _Flight()
        assert flight is not None
        if owner:
            break
        # another task of this process is sweeping this key: share its answer
        # a threading.Event, not an anyio one: the owner may run on another thread's loop
        await anyio.to_thread.run_sync(flight.done.wait, abandon_on_cancel=True)
        if flight.decision is not None:
            shared = flight.decision
            return attrs.evolve(
                shared,
                source="cache" if shared.source == "benchmark" else shared.source,
                probe_seconds=0.0,
                reason=f"shared a concurrent sweep: {shared.reason}",
            )
        # the owner was cancelled or failed before deciding: try to become the owner

    decision: Decision | None = None
    limit = req.policy.hard_limit_s
    try:
        with anyio.move_on_after(math.inf if limit is None else limit) as scope:
            decision = await _owned(req, key, cache)
        if decision is None and scope.cancelled_caught:
            decision = Decision(
                chunk_size=None,
                native_chunk=req.native,
                source="fallback",
                reason=f"kept the native chunk {req.native}: gave up after the hard limit of "
                f"{limit:g} s (hard_limit_s) before the sweep finished; nothing was cached",
                key=key,
                policy=req.policy_name,
            )
        assert decision is not None
        return decision
    finally:
        with _flights_lock:
            _flights.pop(key, None)
        flight.decision = decision
        flight.done.set()


async def _owned(req: _Request, key: str, cache: DecisionCache | None) -> Decision:
    """This task owns the key's flight: lock, re-check, measure."""
    if cache is None:
        return await _measure(req, key, None)
    async with hold(cache.key_lock(key)):
        if not req.refresh:
            hit = await anyio.to_thread.run_sync(_lookup, req, key, cache)
            if hit is not None:
                return hit
        return await _measure(req, key, cache)


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

    Raises:
        WorkloadError: ``workload`` does not implement :class:`chunktune.Workload`.
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
        settings = await anyio.to_thread.run_sync(load_settings)
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
            req, key, hit = await anyio.to_thread.run_sync(_identify_and_look, req, cache)
        except Exception as exc:  # a workload whose signature() fails is a failing workload
            decision = _fallback(req, "", exc)
        else:
            decision = hit if hit is not None else await _resolve_key(req, key, cache)
    _report(decision, settings)
    return decision


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
    """Blocking :func:`resolve` for synchronous callers.

    From plain code it runs its own event loop; from a worker thread of a running
    anyio loop it runs on that loop.

    Raises:
        UsageError: called on an event loop's own thread (``await chunktune.resolve(...)``
            there instead; blocking would deadlock the loop).
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
    if _on_event_loop():
        raise UsageError(
            "resolve_sync() was called on a running event loop's thread, where blocking "
            "would stall it; use `await chunktune.resolve(...)` there instead"
        )
    return anyio.run(call)
