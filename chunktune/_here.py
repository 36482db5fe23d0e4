"""What a resolve decides on the calling thread, with no event loop: the answers at hand.

A manual size, a policy that never measures, a trivial batch, a repeat of the same
question (``_recent``) and, keyed on this thread, a cache hit: ``resolve_sync`` gives
these without starting a loop or a thread, and ``resolve`` on the loop or in the one
hop that discovers its settings. This module imports no anyio: the flow that waits,
leaves the loop and sweeps is ``_resolve``'s (``_miss``, ``_measure``).
"""

from __future__ import annotations

import attrs

from ._cache import DecisionCache
from ._candidates import only_native
from ._counts import native_chunk, upper_chunk
from ._decision import Decision
from ._discovered import discovered_settings
from ._errors import ChunktuneError, WorkloadError
from ._failures import blames_workload, by_signal_handler, log_bug, spent
from ._keys import cache_for, identify_and_look
from ._recent import recall, remember
from ._relay import Guarded
from ._report import report
from ._request import (
    Ask,
    Request,
    broken_decision,
    failed_decision,
    nothing_to_measure,
    pick_policy,
)
from ._settings import Settings
from ._shown import plural, spelled

__all__ = [
    "Keyed",
    "decide_here",
    "in_memory",
    "key_here",
    "manual_decision",
    "new_request",
    "settle",
]


def manual_decision(asked: Ask, *, reported: bool = True) -> Decision:
    """The decision of a manual chunk size (``asked.manual`` is set), reported under the
    settings given (none are looked for: a manual size uses no policy) unless not
    ``reported``."""
    assert asked.manual is not None
    decision = Decision(
        chunk_size=asked.manual,
        native_chunk=native_chunk(asked.num_envs, asked.nthread),
        source="manual",
        reason=f"manual override: chunk_size={asked.manual}",
    )
    if reported and asked.settings is not None:
        report(decision, asked.settings)
    return decision


def in_memory(asked: Ask, settings: Settings) -> Decision | None:
    """What ``asked`` is answered without a thread, a file or a wait: a disabled policy, a
    trivial batch, the same question a moment ago (``_recent``), or nothing to measure.

    None: the cache, or a sweep, must answer it.

    Raises:
        ConfigError: an unknown policy name.
    """
    num_envs, nthread = asked.num_envs, asked.nthread
    native = native_chunk(num_envs, nthread)
    name, pol = pick_policy(settings, asked.policy)
    if not pol.enabled:
        return Decision(
            chunk_size=None,
            native_chunk=native,
            source="disabled",
            reason=f"policy {spelled(name)} never measures; using the native chunk {native}",
            policy=name,
        )
    if upper_chunk(num_envs, nthread) <= 1:
        return Decision(
            chunk_size=None,
            native_chunk=native,
            source="trivial",
            reason=f"{plural(num_envs, 'env')} on {plural(nthread, 'thread')}: at most one "
            "chunk per thread, so chunk size cannot matter",
            policy=name,
        )
    if not asked.refresh and settings.cache.enabled:
        try:
            recent = recall(asked.workload, settings, pol, (num_envs, nthread))
        except Exception as exc:
            if by_signal_handler(exc):
                raise
            # memory is a shortcut: the cache, or a sweep, still answers
            log_bug(exc, "recalling a recent decision (answered without it)")
            recent = None
        if recent is not None:
            return recent  # the same question a moment ago: no thread, no file
    if only_native(pol.candidates, num_envs, nthread):
        # a sweep would time native against nothing, and such a result is never
        # stored: every resolve would take the machine and spend those calls again
        return nothing_to_measure(name, native, num_envs, nthread)
    return None


Keyed = tuple[Request, str, DecisionCache | None]


def decide_here(asked: Ask) -> tuple[Ask, Decision | Keyed | None]:
    """Blocking: what can be decided on this thread, with no event loop.

    Settings are discovered for ``settings=None``; an answer from memory
    (:func:`in_memory`) or, under a policy without ``hard_limit_s`` (no limit to leave
    a blocking ``signature()`` behind at), a cache hit is returned reported. Returns
    ``asked`` with its settings, and that decision, else the keyed request of a miss,
    its key and its cache, else None (a policy with a limit: keyed on the loop).
    """
    if asked.manual is not None:
        return asked, manual_decision(asked)
    if asked.settings is None:
        asked = attrs.evolve(asked, settings=discovered_settings())
    settings = asked.settings
    assert settings is not None
    decision = in_memory(asked, settings)
    if decision is not None:
        report(decision, settings)
        return asked, decision
    if pick_policy(settings, asked.policy)[1].hard_limit_s is not None:
        return asked, None
    unkeyed = new_request(asked, settings, None)
    found = key_here(unkeyed)
    return asked, settle(unkeyed, found) if isinstance(found, Decision) else found


def new_request(asked: Ask, settings: Settings, started: float | None) -> Request:
    """The request the cache, or a sweep, answers; its deadline ``hard_limit_s`` after
    ``started`` (the loop's clock; None: the policy must have no limit)."""
    name, pol = pick_policy(settings, asked.policy)
    limit = pol.hard_limit_s
    assert started is not None or limit is None
    on_progress = asked.on_progress
    return Request(
        workload=asked.workload,
        num_envs=asked.num_envs,
        nthread=asked.nthread,
        native=native_chunk(asked.num_envs, asked.nthread),
        policy=pol,
        policy_name=name,
        settings=settings,
        refresh=asked.refresh,
        on_progress=None if on_progress is None else Guarded(on_progress),
        settles=asked.settles,
        deadline=None if limit is None or started is None else started + limit,
    )


def settle(req: Request, decision: Decision) -> Decision:
    """``decision`` reported (and, a hit, remembered for a repeat of ``req``)."""
    if decision.source == "cache":
        shape = (req.num_envs, req.nthread)
        try:
            remember(req.workload, req.settings, req.policy, shape, decision)
        except Exception as exc:
            if by_signal_handler(exc):
                raise
            # the decision stands: a repeat only reads the cache again
            log_bug(exc, "remembering a decision (the decision stands)")
    report(decision, req.settings)
    return decision


def key_here(req: Request) -> Decision | Keyed:
    """Blocking, on the calling thread: key ``req`` and look it up.

    Returns the hit (or the fallback of a failing ``signature()``, or of chunktune's own
    code failing), else the keyed request, its key and the cache to store in.
    """
    try:
        req, key, hit, cache = identify_and_look(req, cache_for(req.settings))
    except WorkloadError:
        raise  # a signature that cannot be keyed: the caller's to fix, before anything runs
    except Exception as exc:
        if by_signal_handler(exc):
            raise  # the trainer's own, wherever its signal handler found the main thread
        # a workload whose signature() fails is a failing workload, as one whose run() does,
        # whatever it raised (one of chunktune's own errors too)
        if blames_workload(exc):
            return failed_decision(req, "", exc, keying=True)
        # chunktune's deliberate errors; the process's threads or file descriptors spent
        if isinstance(exc, ChunktuneError) or spent(exc):
            raise
        # chunktune's own bug (a cache lookup, the machine's fingerprint): not the workload's
        log_bug(exc, "keying the workload")
        return broken_decision(req, "", exc, keying=True)
    return hit if hit is not None else (req, key, cache)
