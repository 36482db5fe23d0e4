"""The host side of ``chunktune.ray.resolve``: a request keyed for this host and the registry.

Blocking helpers, each run in a worker thread by ``_ray_resolve`` or ``_ray_claim``:
the request's keys (this host's cache key, and the registry's key, where the node
type stands in for the machine), this host's caches (the user's, then the system
layer), the entry behind a decision, and the lines a decision is reported with.
"""

from __future__ import annotations

import logging
from typing import Any

import attrs

from . import _unstored
from ._cache_entry import CacheEntry
from ._cache_layers import system_cache_for, system_lookup
from ._counts import native_chunk
from ._decision import Decision
from ._fingerprint import device_fingerprint
from ._keys import cache_for, cache_key
from ._policy import Policy
from ._ray_api import node_labels, node_type
from ._report import report as report_request
from ._report import say
from ._request import Ask, decision_entry, pick_policy
from ._returned import check_signature
from ._settings import Settings
from ._workload import call_workload

__all__ = [
    "Job",
    "entry_of",
    "identify",
    "local_hit",
    "native_decision",
    "report",
    "report_decision",
    "store",
]

logger = logging.getLogger("chunktune")


def report(line: str, settings: Settings) -> None:
    """Say one line the way resolve reports decisions (``[log] stderr``, and logging)."""
    say(line, settings)


def report_decision(decision: Decision, settings: Settings) -> Decision:
    """Report a decision made here (not by :func:`chunktune.resolve`) and return it."""
    report_request(decision, settings)
    return decision


@attrs.frozen
class Job:
    """One request, keyed for this host's cache and for the cluster's registry."""

    asked: Ask  # with the settings below: loaded where the caller gave none
    settings: Settings
    policy: Policy
    policy_name: str
    signature: dict[str, Any]
    device: dict[str, Any]
    key: str  # this host's cache key
    node_id: str
    node_type: str
    registry_key: str

    @property
    def native(self) -> int:
        return native_chunk(self.asked.num_envs, self.asked.nthread)

    def local_key(self, policy_hash: str) -> str:
        """This host's cache key for an answer made under ``policy_hash``."""
        return f"{self.key.rpartition('.')[0]}.{policy_hash or self.policy.fingerprint()}"


def identify(ray: Any, asked: Ask, settings: Settings) -> Job:
    """Blocking: key the request for this host and for the registry.

    ``settings`` are ``asked.settings``, loaded where the caller gave none.

    Raises:
        WorkloadError: the signature holds a value that cannot be keyed.
        Exception: whatever the workload's ``signature()`` raised.
    """
    num_envs, nthread = asked.num_envs, asked.nthread
    name, pol = pick_policy(settings, asked.policy)
    # as resolve keys it (numpy numbers as the Python ones they hold): this host's key is
    # the one its plain resolves store and read
    signature = call_workload(lambda: check_signature(asked.workload.signature()))
    device = device_fingerprint()
    kind = node_type(node_labels(ray), device)

    def key_on(dev: dict[str, Any]) -> str:
        return cache_key(
            signature, num_envs=num_envs, nthread=nthread, device=dev, policy_hash=pol.fingerprint()
        )

    return Job(
        asked=asked,
        settings=settings,
        policy=pol,
        policy_name=name,
        signature=signature,
        device=device,
        key=key_on(device),
        node_id=str(ray.get_runtime_context().get_node_id()),
        node_type=kind,
        # the node type stands in for the machine: a label may group several fingerprints
        registry_key=f"{kind}/{key_on({'node_type': kind})}",
    )


def local_hit(job: Job) -> bool:
    """Blocking: whether this host's caches (user, then system), or a decision this process
    could not store in the first (``_unstored``), already answer the job.

    An entry measured while the machine was busy counts, whatever the load now: where the
    machine is calm, the plain resolve that a hit leads to passes over it and measures
    again on this host (:func:`chunktune._load.serves_now`). Through the registry it would
    be the node type's published answer again, adopted and stored on every resolve.
    """
    cache = cache_for(job.settings)
    if cache is None:
        return False
    base, _, own = job.key.rpartition(".")
    rule, effort = job.policy.rule(), job.policy.effort()
    found = cache.lookup(base, policy_hash=own, rule=rule, effort=effort) or system_lookup(
        job.settings, base, policy_hash=own, rule=rule, effort=effort
    )
    # a decision this process measured or adopted but its cache could not store (``_unstored``)
    # answers as an entry would: asking the registry again would cost a round trip per
    # resolve, and a sweep once it restarted empty
    return found is not None or (not job.asked.refresh and _unstored.holds(job.key))


def entry_of(
    decision: Decision,
    *,
    settings: Settings,
    policy: Policy,
    signature: dict[str, Any],
    device: dict[str, Any],
    num_envs: int,
    nthread: int,
    model_file: object = None,
) -> CacheEntry:
    """Blocking: the cache entry behind ``decision``: as stored, or built from it."""
    cache = cache_for(settings)
    stored = cache.get(decision.key) if cache is not None else None
    if stored is None:
        system = system_cache_for(settings)
        stored = system.get(decision.key) if system is not None else None
    if stored is not None:
        return stored
    return decision_entry(
        decision,
        policy=policy,
        num_envs=num_envs,
        nthread=nthread,
        signature=signature,
        device=device,
        model_file=model_file,
    )


def store(job: Job, key: str, entry: CacheEntry, decision: Decision) -> None:
    """Blocking: keep another worker's answer in this host's cache, under ``key``; where the
    cache cannot be written, ``decision`` (the answer adopted) is remembered in this process
    instead (``_unstored``), under the job's key, for its later resolves."""
    cache = cache_for(job.settings)
    if cache is not None:
        _unstored.put(key, decision, cache, entry, kept_as=job.key)


def native_decision(job: Job, why: str) -> Decision:
    return Decision(
        chunk_size=None,
        native_chunk=job.native,
        source="fallback",
        reason=f"kept the native chunk {job.native}: {why}",
        key=job.key,
        policy=job.policy_name,
    )
