"""Keying a request and finding its answer: the cache key, the cache, the lookup. Blocking.

These run in a worker thread (``_threads.hop``): the workload's ``signature()``, the
machine's fingerprint and the cache file may each take a moment.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs

from . import _unstored
from ._cache import DecisionCache
from ._cache_layers import system_lookup
from ._cache_paths import default_cache_path
from ._decision import Decision
from ._fingerprint import device_fingerprint
from ._load import serves_now
from ._policy import Policy
from ._request import Request, entry_decision, policy_identity
from ._returned import check_signature
from ._settings import Settings
from ._workload import Workload, call_workload, check_workload

__all__ = [
    "cache_for",
    "cache_key",
    "identify_and_look",
    "job_key",
    "look",
    "lookup",
    "remembered",
]


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


def _reset_in_child() -> None:
    global _caches_lock  # a parent's thread may have held it at the fork
    _caches_lock = threading.Lock()


os.register_at_fork(after_in_child=_reset_in_child)


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


def _identify(req: Request) -> tuple[dict[str, Any], dict[str, Any], str]:
    """Blocking: the workload's signature, this machine's fingerprint, and the cache key.

    Raises:
        WorkloadError: the signature holds a value that cannot be keyed (checked
            before anything is measured).
        Exception: whatever the workload's ``signature()`` raised.
    """
    # reading what signature() returned runs the workload's code too (its mapping's items())
    signature = call_workload(lambda: check_signature(req.workload.signature()))
    device = device_fingerprint()
    return signature, device, _key(signature, req.num_envs, req.nthread, device, req.policy)


def _key(
    signature: dict[str, Any], num_envs: int, nthread: int, device: dict[str, Any], policy: Policy
) -> str:
    """The cache key of a workload's shape on a device under a policy: one formula for a
    resolve and for :func:`job_key`, which must find what a resolve stored."""
    return cache_key(
        signature,
        num_envs=num_envs,
        nthread=nthread,
        device=device,
        policy_hash=policy_identity(policy)[0],
    )


def job_key(workload: Workload, policy: Policy) -> str:
    """Blocking: the key under which a resolve of ``workload`` under ``policy`` on this
    machine stores its decision, for one who has no decision to read it from (a ``tune``
    that a Ctrl-C ended as the decision was being stored).

    Raises:
        WorkloadError: the signature holds a value that cannot be keyed, or the object is
            no workload.
        InvalidArgumentError: ``num_envs`` or ``nthread`` is not an integer >= 1.
        Exception: whatever the workload's ``signature()`` raised.
    """
    num_envs, nthread = check_workload(workload)  # as a request reads them
    signature = check_signature(workload.signature())
    return _key(signature, num_envs, nthread, device_fingerprint(), policy)


def lookup(req: Request, key: str, cache: DecisionCache) -> Decision | None:
    """Blocking: the cached decision that answers this request, if any.

    Not one measured while the machine was busy, now that it is calm
    (:func:`chunktune._load.serves_now`): unless another entry answers, this request
    then measures again.
    """
    looked = look(req, key, cache)
    return None if looked is None else looked[0]


def look(req: Request, key: str, cache: DecisionCache) -> tuple[Decision, bool] | None:
    """Blocking: :func:`lookup`'s answer, and whether the read-only system cache gave it
    (the user's cache held no entry that serves this request now)."""
    base, _, own = key.rpartition(".")
    _, rule, effort = policy_identity(req.policy)
    serves = serves_now()
    found = cache.lookup(base, policy_hash=own, rule=rule, effort=effort, serves=serves)
    system = found is None
    if system:  # then the read-only system layer an image may ship
        found = system_lookup(
            req.settings, base, policy_hash=own, rule=rule, effort=effort, serves=serves
        )
    if found is None:
        return None
    return entry_decision(found[1], found[0], req.native), system


def remembered(req: Request, key: str) -> Decision | None:
    """Blocking (a busy entry reads the machine's load): the decision this process measured
    for ``key`` but could not store (``_unstored``); None when refreshing, or when the
    cache is disabled on purpose (then every resolve measures, as benchmarks rely on)."""
    if req.refresh or not req.settings.cache.enabled:
        return None
    return _unstored.recall(key, serves_now())


def identify_and_look(
    req: Request, cache: DecisionCache | None
) -> tuple[Request, str, Decision | None, DecisionCache | None]:
    """Blocking: key the request and, unless refreshing, look it up: one thread hop for a hit.

    A key that the cache does not hold is answered by what this process measured for it
    but could not store (:func:`remembered`).

    Returns the keyed request, its key, the hit (or None), and the cache to store in:
    None when there is none, or when nothing will be stored in it
    (:meth:`DecisionCache.usable`: no regular file, or one left as it is): a sweep then
    takes no key lock beside it either.

    Raises:
        Exception: whatever the workload's ``signature()`` raised.
    """
    signature, device, key = _identify(req)
    req = attrs.evolve(req, signature=signature, device=device)
    hit = lookup(req, key, cache) if cache is not None and not req.refresh else None
    if hit is None and cache is not None:
        hit = remembered(req, key)
    if hit is not None:  # the file answered: it is usable, and the hit path stays one read
        return req, key, hit, cache
    return req, key, None, cache if cache is not None and cache.usable() else None
