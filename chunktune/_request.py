"""A decision request, and the Decisions and cache entries made from what it found.

Pure construction over numbers and records: nothing here measures, waits or reads
a file. ``_keys`` finds a request's answer in the caches; ``_resolve`` runs the flow.
"""

from __future__ import annotations

import functools
import inspect
from typing import Any, cast

import attrs

from ._cache_entry import CacheEntry, writable_path, writable_signature
from ._counts import check_chunk_size
from ._decision import Decision
from ._errors import InvalidArgumentError
from ._events import ProgressCallback
from ._failures import bug_reason
from ._fingerprint import chunktune_version, mujoco_version
from ._load import MachineLoad
from ._named import named
from ._policy import Policy
from ._probe import SweepResult, run_failure
from ._settings import Settings
from ._shown import plural, shown_one, spelled, type_named
from ._workload import Workload, WorkloadRaised, read_workload

__all__ = [
    "Ask",
    "Request",
    "ask",
    "broken_decision",
    "cache_entry",
    "check_policy",
    "check_settings",
    "decision_entry",
    "entry_decision",
    "exit_decision",
    "failed_decision",
    "measured_decision",
    "nothing_to_measure",
    "pick_policy",
    "policy_identity",
    "workload_failure",
    "worth_storing",
]


@attrs.frozen
class Ask:
    """What one call of ``resolve`` (plain or Ray) asked for, each keyword checked: see :func:`ask`.

    ``settings`` None means discovered ones (:func:`chunktune.load_settings`);
    ``settles`` is the workload's ``settle_on_cancel``, as it was read once.
    """

    workload: Workload
    num_envs: int
    nthread: int
    settles: bool
    settings: Settings | None
    policy: str | Policy | None
    manual: int | None
    refresh: bool
    on_progress: ProgressCallback | None


def _is_async(callback: object) -> bool:
    """Whether calling ``callback`` makes a coroutine or an async generator, not a result."""
    for f in (callback, inspect.getattr_static(type(callback), "__call__", None)):
        if inspect.iscoroutinefunction(f) or inspect.isasyncgenfunction(f):
            return True
    return False


def ask(
    workload: object,
    *,
    settings: object,
    policy: object,
    manual: object,
    refresh: object,
    on_progress: object,
) -> Ask:
    """The keywords of ``chunktune.resolve`` and ``chunktune.ray.resolve``, checked once.

    Every keyword is checked whether or not the call comes to use it (a manual chunk
    size uses no policy): a call that works only while ``manual`` is set is no call.
    A policy's name is only checked to be a str here: whether the settings know it is
    for :func:`pick_policy` to say, where a policy is used.

    Raises:
        WorkloadError: ``workload`` does not implement :class:`chunktune.Workload`, or a
            member of it raised as it was read.
        InvalidArgumentError: bad ``num_envs`` or ``nthread``; ``settings`` not a
            Settings; ``policy`` neither a name nor a Policy; ``manual`` not an integer
            from 1 to ``num_envs``; ``refresh`` not a bool; ``on_progress`` not callable,
            or async.
    """
    num_envs, nthread, settles = read_workload(workload)
    checked_settings = check_settings(settings)
    checked_policy = check_policy(policy)
    if manual is not None:
        manual = check_chunk_size(manual, what="manual chunk size", num_envs=num_envs)
    if not isinstance(refresh, bool):
        # "no", or an environment variable's "0", would replace the cached answer
        raise InvalidArgumentError(
            f"refresh must be True or False, got {shown_one(refresh)} ({type_named(refresh)})"
        )
    if on_progress is not None and not callable(on_progress):
        raise InvalidArgumentError(
            "on_progress must be a callable that takes a chunktune.ProgressEvent, got "
            f"{shown_one(on_progress)} ({type_named(on_progress)})"
        )
    if on_progress is not None and _is_async(on_progress):
        # called on the loop and never awaited, it would see no event at all, and each
        # call would leave a "coroutine was never awaited" warning behind
        raise InvalidArgumentError(
            f"on_progress {shown_one(on_progress)} is async: resolve calls it on the event loop "
            "and never awaits it; make it a plain function (def, not async def)"
        )
    return Ask(
        workload=cast(Workload, workload),  # read_workload found its members
        num_envs=num_envs,
        nthread=nthread,
        settles=settles,
        settings=checked_settings,
        policy=checked_policy,
        manual=manual,
        refresh=refresh,
        on_progress=on_progress,
    )


def check_settings(settings: object) -> Settings | None:
    """``settings=`` as a resolve takes it: a :class:`chunktune.Settings`, or None.

    Raises:
        InvalidArgumentError: anything else (a path, a dict), named.
    """
    if settings is not None and not isinstance(settings, Settings):
        raise InvalidArgumentError(
            f"settings {shown_one(settings)} is not a chunktune.Settings; "
            "load one with chunktune.load_settings(path)"
        )
    return settings


def check_policy(policy: object) -> str | Policy | None:
    """``policy=`` as a resolve takes it: a policy's name, a :class:`chunktune.Policy`, or None.

    Whether a name is known is for the settings to say (:func:`pick_policy`).

    Raises:
        InvalidArgumentError: anything else, named.
    """
    if policy is not None and not isinstance(policy, str | Policy):
        raise InvalidArgumentError(
            f"policy must be a policy name or a chunktune.Policy, got {shown_one(policy)} "
            f"({type_named(policy)})"
        )
    return policy


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
    # the workload's settle_on_cancel as the request read it: a property read again at
    # the sweep could answer otherwise, or raise where nothing turns it into a fallback
    settles: bool
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
        load=entry.load,
    )


def measured_decision(
    req: Request, result: SweepResult, key: str, load: MachineLoad | None = None
) -> Decision:
    """The decision a finished sweep made, ``load`` the machine's as it began."""
    reason = result.choice.reason
    budget = req.policy.time_budget_s
    if result.partial and result.elapsed_s < budget:
        # the race's share of the budget cut a round, and the sweep then ended for
        # another reason (too noisy to confirm): the budget itself was not spent
        reason += (
            f" (partial: the race's share of the {budget:g} s budget cut its last round short)"
        )
    elif result.partial and result.budget_s > budget:
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
        load=load,
    )


def failed_decision(
    req: Request, key: str, exc: BaseException, probe_seconds: float = 0.0, *, keying: bool = False
) -> Decision:
    """Native, because the workload raised ``exc`` while it was being keyed (its
    ``signature()``, with ``keying``) or measured."""
    # a signature() that raised measured nothing: saying so points at the right method
    what = "the workload's signature() failed" if keying else "the workload failed while measuring"
    return _kept_native(req, key, f"{what} ({workload_failure(exc)})", probe_seconds)


def workload_failure(exc: BaseException) -> str:
    """The workload's failure ``exc`` in a few words, for its reason and its log line: the
    call to ``run()`` it came out of and what that did (:func:`~chunktune._probe.run_failure`),
    else what it raised."""
    failure = run_failure(exc)
    if failure is not None:
        return failure
    return named(exc.original if isinstance(exc, WorkloadRaised) else exc)


def broken_decision(
    req: Request, key: str, exc: BaseException, probe_seconds: float = 0.0, *, keying: bool = False
) -> Decision:
    """Native, because chunktune's own code raised ``exc`` (a bug, or memory it could not
    have) while keying the request (``keying``) or measuring it: not the workload's failure."""
    what = "keying the workload" if keying else "measuring"
    return _kept_native(req, key, f"{bug_reason(exc, what)}; nothing was cached", probe_seconds)


def exit_decision(req: Request, key: str, exc: BaseException, probe_seconds: float) -> Decision:
    """Native, because Python's exit began during the sweep and ``exc`` stopped its next probe."""
    return _kept_native(req, key, f"{exc}; nothing was cached", probe_seconds)


def _kept_native(req: Request, key: str, why: str, probe_seconds: float) -> Decision:
    """The fallback decision for ``req``: the native chunk, kept because ``why``."""
    return Decision(
        chunk_size=None,
        native_chunk=req.native,
        source="fallback",
        reason=f"kept the native chunk {req.native}: {why}",
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
        reason=f"policy {spelled(policy_name)} has no candidate but the native chunk "
        f"{native} for {plural(num_envs, 'env')} on {plural(nthread, 'thread')}; "
        "nothing to measure",
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
        load=decision.load,
    )


def pick_policy(settings: Settings, policy: str | Policy | None) -> tuple[str, Policy]:
    """The policy's name and object, as :func:`chunktune.resolve` picks them.

    Raises:
        ConfigError: an unknown policy name.
        InvalidArgumentError: neither a name nor a Policy (see :func:`check_policy`).
    """
    if isinstance(policy, Policy):
        return "custom", policy
    check_policy(policy)
    name = settings.policy if policy is None else policy
    return name, settings.get_policy(name)
