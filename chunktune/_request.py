"""A decision request, and the Decisions and cache entries made from what it found.

Pure construction over numbers and records: nothing here measures, waits or reads
a file. ``_keys`` finds a request's answer in the caches; ``_resolve`` runs the flow.
"""

from __future__ import annotations

import functools
import logging
import sys
from typing import Any

import attrs

from ._cache_entry import CacheEntry, writable_path, writable_signature
from ._decision import Decision, timings_to_ms
from ._errors import ConfigError
from ._events import ProgressCallback
from ._fingerprint import chunktune_version, mujoco_version
from ._probe import SweepResult
from ._settings import Policy, Settings
from ._workload import Workload, WorkloadRaised

__all__ = [
    "Request",
    "cache_entry",
    "decision_entry",
    "entry_decision",
    "failed_decision",
    "measured_decision",
    "nothing_to_measure",
    "pick_policy",
    "policy_identity",
    "report",
    "say",
    "worth_storing",
]

logger = logging.getLogger("chunktune")


@attrs.frozen
class Request:
    """One call of ``resolve``: the workload, the policy, and what keying it found."""

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
    # the loop's clock time by which resolve answers: hard_limit_s from its start
    deadline: float | None = None


@functools.lru_cache(maxsize=64)
def policy_identity(policy: Policy) -> tuple[str, str, int]:
    """A policy's fingerprint, rule and effort: computed once per policy, not per hit."""
    return policy.fingerprint(), policy.rule(), policy.effort()


def entry_decision(entry: CacheEntry, key: str, native: int) -> Decision:
    """A stored entry as the decision of a cache hit."""
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


def measured_decision(req: Request, result: SweepResult, key: str) -> Decision:
    """The decision a finished sweep made."""
    reason = result.choice.reason
    budget = req.policy.time_budget_s
    if result.partial and result.budget_s > budget:
        reason += " (partial: the stretched budget ended the sweep)"
    elif result.partial:
        reason += f" (partial: the {budget:g} s budget ended the sweep)"
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


def failed_decision(
    req: Request, key: str, exc: BaseException, probe_seconds: float = 0.0
) -> Decision:
    """Native, because the workload raised ``exc`` while it was being keyed or measured."""
    if isinstance(exc, WorkloadRaised):
        exc = exc.original
    return Decision(
        chunk_size=None,
        native_chunk=req.native,
        source="fallback",
        reason=f"kept the native chunk {req.native}: the workload failed while measuring "
        f"({type(exc).__name__}{f': {exc}' if str(exc) else ''})",
        key=key,
        probe_seconds=probe_seconds,
        policy=req.policy_name,
    )


def nothing_to_measure(policy_name: str, native: int, num_envs: int, nthread: int) -> Decision:
    """Native, because the policy's candidate list holds no size but native's for this batch."""
    return Decision(
        chunk_size=None,
        native_chunk=native,
        source="trivial",
        reason=f"policy {policy_name!r} has no candidate but the native chunk "
        f"{native} for {num_envs} envs on {nthread} threads; nothing to measure",
        policy=policy_name,
    )


def worth_storing(decision: Decision) -> bool:
    """Whether a measured decision is evidence to remember: it timed a candidate.

    One that timed native alone (a call too slow for the budget, say) would answer the
    next request whatever its budget, telling it to raise a budget it already raised.
    """
    return any(chunk is not None for chunk in decision.timings)


def cache_entry(req: Request, decision: Decision) -> CacheEntry:
    """The cache entry that stores the decision this request's sweep made."""
    return decision_entry(
        decision,
        policy=req.policy,
        num_envs=req.num_envs,
        nthread=req.nthread,
        signature=req.signature,
        device=req.device,
        model_file=getattr(req.workload, "model_file", None),
    )


def decision_entry(
    decision: Decision,
    *,
    policy: Policy,
    num_envs: int,
    nthread: int,
    signature: dict[str, Any],
    device: dict[str, Any],
    model_file: object = None,
) -> CacheEntry:
    """The cache entry that stores ``decision``, made by ``policy`` for this workload."""
    policy_hash, rule, effort = policy_identity(policy)
    return CacheEntry(
        chunk_size=decision.chunk_size,
        native_chunk=decision.native_chunk,
        reason=decision.reason,
        timings=decision.timings,
        samples=decision.samples,
        raced_out=decision.raced_out,
        policy=decision.policy,
        policy_hash=policy_hash,
        policy_rule=rule,
        policy_effort=effort,
        probe_seconds=decision.probe_seconds,
        partial=decision.partial,
        num_envs=num_envs,
        nthread=nthread,
        signature=writable_signature(signature),
        device=device,
        chunktune_version=chunktune_version(),
        mujoco_version=mujoco_version(),
        model_file=writable_path(model_file),
        gain=decision.gain,
        gain_ci=decision.gain_ci,
    )


# keys whose decision this process has written to stderr under "auto": a trainer that
# resolves once per env runner hears each cached answer once, not once per runner
_TOLD: set[str] = set()


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


def say(line: str, settings: Settings, *, to_stderr: bool = True) -> None:
    """One line to the ``chunktune`` logger and, as ``[log] stderr`` says, to stderr.

    ``to_stderr`` False keeps an ``"auto"`` line off stderr (it was said there before).
    """
    mode = settings.log.stderr
    # collectors in spawned subprocesses have no logging configured: say it anyway
    if mode == "always" or (mode == "auto" and to_stderr and not logger.isEnabledFor(logging.INFO)):
        print(f"[chunktune] {line}", file=sys.stderr, flush=True)
    if mode != "always":
        logger.info(line)


def report(decision: Decision, settings: Settings) -> None:
    """The one-line report of a decision: the ``chunktune`` logger, and stderr as set.

    Under ``[log] stderr = "auto"`` a key's cached decision is written to stderr once
    per process (a new sweep's always is); ``"always"`` writes every one.
    """
    mode = settings.log.stderr
    logging_on = logger.isEnabledFor(logging.INFO)
    quiet = mode == "auto" and decision.source == "cache" and decision.key in _TOLD
    if mode != "always" and (quiet or mode == "never") and not logging_on:
        return  # a hit nobody will read costs no formatting
    timings = ", ".join(f"{k}={v:.3g}ms" for k, v in timings_to_ms(decision.timings).items())
    chosen = "native" if decision.chunk_size is None else str(decision.chunk_size)
    line = (
        f"chunk_size={chosen} (native={decision.native_chunk}, {decision.source}): "
        f"{decision.reason}"
    )
    if timings:
        line += f" | {timings}"
    if mode == "auto" and decision.key and not logging_on:
        _TOLD.add(decision.key)
    say(line, settings, to_stderr=not quiet)
