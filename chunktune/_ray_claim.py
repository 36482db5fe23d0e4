"""What a Ray worker does with the registry on a miss: claim the job, or wait for its answer.

One concern: the protocol a worker runs against the registry actor (``_ray_registry``)
once its host's caches had no answer. It asks for the claim; the claimant resolves on
its own host, renewing its lease with heartbeats, then publishes what it stored (or
the failure, or gives the claim back); a waiter waits in bounded slices, telling the
wait as a plain resolve does, and stores the answer it is given in its host's cache.
Every registry call goes through ``_ray_calls`` (bounded in time; a failed one counts
as the registry being gone): the registry is looked up anew once, then
:func:`coordinated` says so and the caller (``_ray_resolve``) resolves on its host alone.
A call that the registry's own code failed (chunktune's bug inside the actor) is no
registry gone: the worker keeps the native chunk, the bug's traceback logged.
"""

from __future__ import annotations

import functools
import logging
import math
import os
import time
import uuid
from collections.abc import Callable
from typing import Any

import anyio
import attrs

from . import _lock_wait
from ._cache_entry import CacheEntry
from ._decision import Decision
from ._events import ProgressCallback, ProgressEvent
from ._failures import bug_reason, log_bug, spent
from ._policy import Policy
from ._ray_calls import (
    CALL_TIMEOUT_S,
    LookupBug,
    OutOfTime,
    RegistryBug,
    RegistryGone,
    call,
    look_up,
    tell,
)
from ._ray_job import Job, entry_of, native_decision, report, report_decision, store
from ._relay import Guarded
from ._request import decision_entry, entry_decision, worth_storing
from ._resolve import resolve_since
from ._threads import KEYING_THREAD, in_own_thread, wait_in_thread

__all__ = ["coordinated", "deadline"]

logger = logging.getLogger("chunktune")


@attrs.define
class _Waiting:
    """A worker's wait for other workers' sweeps, told as a plain resolve tells its waits.

    Once the wait has lasted :data:`_lock_wait.REPORT_AFTER_S` seconds, each claimant it is
    for is told once (a takeover brings a new one): a ``"waiting"`` progress event,
    ``elapsed_s`` the seconds waited so far, and an INFO line.
    """

    node_type: str
    on_progress: ProgressCallback | None
    started: float | None = None  # the loop's clock at the first "busy" reply
    told: str | None = None  # the claimant last told

    def busy(self, holder: str, held_s: float | None) -> float:
        """Note that ``holder`` sweeps (its claim ``held_s`` seconds old, None: unknown),
        telling it if due; the seconds until a report is due (``inf``: none is)."""
        now = anyio.current_time()
        if self.started is None:
            self.started = now
        waited = now - self.started
        if holder == self.told:
            return math.inf
        if waited < _lock_wait.REPORT_AFTER_S:
            return _lock_wait.REPORT_AFTER_S - waited
        self.told = holder
        # a registry of an older chunktune does not say how old the claim is
        since = time.time() - (waited if held_s is None else held_s)
        message = (
            f"waiting for another worker's sweep of node type {self.node_type} "
            f"({holder}, since {time.strftime('%H:%M:%S', time.localtime(since))})"
        )
        logger.info("chunktune: %s", message)
        if self.on_progress is not None:
            self.on_progress(ProgressEvent(kind="waiting", elapsed_s=waited, message=message))
        return math.inf


def deadline(policy: Policy, started: float) -> float:
    """Where the policy's ``hard_limit_s``, counted from ``started``, ends (inf without one)."""
    return math.inf if policy.hard_limit_s is None else started + policy.hard_limit_s


async def _adopt(job: Job, entry: CacheEntry, by: str, until: float) -> Decision:
    """Another worker's answer: stored here, and returned by ``until`` (``hard_limit_s``).

    A write stuck behind another process's lock on this host's cache goes on in the
    background past it (it is atomic), so the answer is not held up.
    """
    key = job.local_key(entry.policy_hash)
    decision = attrs.evolve(
        entry_decision(entry, key, job.native),
        reason=f"node type {job.node_type}'s answer, measured on {entry.host}, shared by "
        f"{by}: {entry.reason}",
    )
    with anyio.CancelScope(deadline=until):
        await wait_in_thread(store, job, key, entry, decision, abandon_on_cancel=True)
    return report_decision(decision, job.settings)


async def _measure(ray: Any, registry: Any, job: Job, token: object, started: float) -> Decision:
    """The claimant's own resolve, its lease renewed meanwhile; on failure the claim goes back.

    Raises:
        whatever :func:`resolve_since` raised, and a cancellation: the claim is
        released first, so no worker of the type waits out the lease.
    """
    lease_s = job.settings.ray.lease_s

    async def heartbeat() -> None:
        while True:
            await anyio.sleep(lease_s / 4)
            tell(ray, lambda: registry.heartbeat.remote(job.registry_key, token, lease_s))

    failure: Exception | None = None
    decision: Decision | None = None
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(heartbeat)
            try:
                decision = await resolve_since(started, job.asked)
            except Exception as exc:  # re-raised below, outside the task group
                failure = exc
            finally:
                tg.cancel_scope.cancel()
    except BaseException:
        # cancelled: give the claim up now rather than after a lease
        tell(ray, lambda: registry.release.remote(job.registry_key, token))
        raise
    if failure is not None:
        tell(ray, lambda: registry.release.remote(job.registry_key, token))
        raise failure
    assert decision is not None
    return decision


async def _outcome(
    registry: Any, job: Job, token: object, holder: str, decision: Decision, until: float
) -> Callable[[], Any]:
    """The registry call that tells the claimant's ``decision``: its failure, or its entry.

    The entry is read back as stored in this host's cache, by ``until`` (``hard_limit_s``):
    a read that has not answered by then (a stalled file system) is left behind in a daemon
    thread, and the entry built from the decision, as for a cache that could not store it,
    is published instead.
    """
    if decision.source == "fallback":
        reason = decision.reason
        return functools.partial(registry.fail.remote, job.registry_key, token, reason, holder)
    made: dict[str, Any] = {
        "policy": job.policy,
        "signature": job.signature,
        "device": job.device,
        "num_envs": job.asked.num_envs,
        "nthread": job.asked.nthread,
        "model_file": getattr(job.asked.workload, "model_file", None),
    }
    entry: CacheEntry | None = None
    with anyio.move_on_after(until - anyio.current_time()):
        read_back = functools.partial(entry_of, decision, settings=job.settings, **made)
        # a daemon thread: one left behind never holds up the process's exit
        entry = await in_own_thread(read_back, name=KEYING_THREAD)
    if entry is None:
        entry = decision_entry(decision, **made)
    # a claimant whose host's cache held the answer by now measured nothing itself
    by = holder if decision.source == "benchmark" else f"{holder} (from its host's cache)"
    return functools.partial(registry.publish.remote, job.registry_key, token, entry, by)


async def _publish(ray: Any, send: Callable[[], Any], until: float) -> None:
    """Send the claimant's outcome; waited for until ``until`` (``hard_limit_s``), not past it.

    A registry gone by now is logged as a warning: the decision stands all the same.
    """
    try:
        if anyio.current_time() >= until:
            tell(ray, send)  # past hard_limit_s: sent, not waited for
        else:
            await call(ray, send, until=until)
    except OutOfTime:
        pass  # submitted before the limit came: Ray delivers it; nobody waits for it
    except RegistryGone as exc:
        logger.warning("chunktune: could not publish to the registry (%s)", exc)


async def _sweep(
    ray: Any, registry: Any, job: Job, holder: str, reply: dict[str, Any], started: float
) -> Decision:
    """This worker holds the claim: resolve here, renewing the lease, then publish.

    ``hard_limit_s`` counts from ``started``, the resolve's start: the wait for the
    claim spent part of it.
    """
    token: object = reply["token"]  # opaque: handed back to the registry as given
    try:
        if reply.get("took_over"):
            report(
                f"node type {job.node_type}: took over the sweep from {reply['took_over']} "
                f"(its claim lapsed: no heartbeat for {job.settings.ray.lease_s:g} s)",
                job.settings,
            )
    except BaseException:
        # telling the takeover failed (a bug, an interrupt): the claim goes back now, so
        # the type's next worker claims rather than waiting out a lease nobody renews
        tell(ray, lambda: registry.release.remote(job.registry_key, token))
        raise
    decision = await _measure(ray, registry, job, token, started)
    try:
        await _share(ray, registry, job, holder, token, decision, started)
    except Exception as exc:
        # the decision stands, stored in this host's cache: only sharing it failed; the
        # claim goes back, so the type's next worker claims rather than waiting out a lease
        tell(ray, lambda: registry.release.remote(job.registry_key, token))
        if spent(exc):
            logger.warning("chunktune: could not publish to the registry (%s)", exc)
        else:
            log_bug(exc, f"publishing node type {job.node_type}'s answer (the decision stands)")
    return decision


async def _share(
    ray: Any,
    registry: Any,
    job: Job,
    holder: str,
    token: object,
    decision: Decision,
    started: float,
) -> None:
    """Publish the claimant's ``decision`` (or its failure), or give the claim back."""
    until = deadline(job.policy, started)
    if decision.source == "fallback" and anyio.current_time() >= until:
        # its own hard_limit_s ended it, not the workload: a worker with more time may
        # measure, so the claim goes back instead of failing the node type for everyone
        tell(ray, lambda: registry.release.remote(job.registry_key, token))
        return
    if decision.source != "fallback" and not worth_storing(decision):
        # nothing but native timed (too slow for this worker's budget): nothing to share;
        # the claim goes back, and the next worker of the type measures for itself
        tell(ray, lambda: registry.release.remote(job.registry_key, token))
        return
    send = await _outcome(registry, job, token, holder, decision, until)
    await _publish(ray, send, until)


async def _claim(
    ray: Any, registry: Any, job: Job, holder: str, since: object, until: float
) -> dict[str, Any]:
    """The registry's reply to ``holder``'s claim: an answer, the claim, a failure, or busy.

    Raises:
        OutOfTime, RegistryBug, RegistryGone: as :func:`call` does; and a cancellation.
            Past the hard limit, cancelled or failed by the registry's own code, the
            claim is abandoned first.
    """
    try:
        reply: dict[str, Any] = await call(
            ray,
            functools.partial(
                registry.claim.remote,
                job.registry_key,
                holder,
                since=since,
                refresh=job.asked.refresh,
                lease_s=job.settings.ray.lease_s,
            ),
            until=until,
        )
    except (OutOfTime, RegistryBug, anyio.get_cancelled_exc_class()):
        # the claim may yet be granted, or have been before the registry's code raised, to
        # nobody who waits (past the hard limit, cancelled, a bug): give it up after it, or
        # the type's workers wait out its lease
        tell(ray, lambda: registry.abandon.remote(job.registry_key, holder))
        raise
    return reply


def _waited(job: Job, reply: dict[str, Any], wait_until: float, limit_until: float) -> str:
    """Why a worker that waited for the sweep a busy ``reply`` named keeps the native chunk."""
    limit = job.policy.hard_limit_s
    waited = (
        f"until the hard limit of {limit:g} s (hard_limit_s)"
        if limit is not None and limit_until <= wait_until
        else f"{job.settings.ray.wait_timeout_s:g} s ([ray] wait_timeout_s)"
    )
    return (
        f"waited {waited} for {reply['holder']}'s sweep of node type "
        f"{job.node_type}; nothing was cached"
    )


async def _wait(
    ray: Any,
    registry: Any,
    job: Job,
    reply: dict[str, Any],
    waiting: _Waiting,
    wait_until: float,
    limit_until: float,
) -> Decision | None:
    """Wait a slice for the sweep a busy ``reply`` names: None to ask again, or native at the end.

    The wait ends at ``wait_until`` (``[ray] wait_timeout_s``) or at ``limit_until``
    (``hard_limit_s``), whichever is first; then this worker keeps the native chunk.
    """
    options = job.settings.ray
    why = _waited(job, reply, wait_until, limit_until)
    report_in = waiting.busy(reply["holder"], reply.get("held_s"))
    left = min(wait_until, limit_until) - anyio.current_time()
    if left <= 0:
        return report_decision(native_decision(job, why), job.settings)
    # a wait still to be told wakes when it is due (the registry is asked again then)
    slice_s = min(left, options.lease_s, report_in)
    try:
        await call(
            ray,
            functools.partial(registry.wait.remote, job.registry_key, slice_s),
            limit_s=slice_s + CALL_TIMEOUT_S,
            until=limit_until,
            cancel_unanswered=True,  # a waiter that leaves leaves nothing parked on the actor
        )
    except OutOfTime:  # the wait ran to the limit (its reply just after): say so
        return report_decision(native_decision(job, why), job.settings)
    return None


async def _coordinate(ray: Any, job: Job, *, fresh: bool, started: float) -> Decision:
    """Ask the registry until this worker has an answer, the claim, or must fall back.

    ``fresh`` looks the registry up again instead of using this process's handle. The
    wait for another worker's sweep ends at ``[ray] wait_timeout_s``, or at the policy's
    ``hard_limit_s`` counted from ``started`` (the resolve's start), whichever is first.
    """
    limit_until = deadline(job.policy, started)
    registry = await look_up(ray, fresh=fresh, until=limit_until)
    holder = f"{job.node_id[:8]}/pid{os.getpid()}/{uuid.uuid4().hex[:6]}"
    options = job.settings.ray
    wait_until = anyio.current_time() + options.wait_timeout_s
    since: object = None  # the registry's own (of its incarnation), handed back as given
    on_progress = job.asked.on_progress
    waiting = _Waiting(job.node_type, None if on_progress is None else Guarded(on_progress))
    busy: dict[str, Any] | None = None  # the last reply that named another worker's sweep
    while True:
        try:
            reply = await _claim(ray, registry, job, holder, since, limit_until)
        except OutOfTime:
            if busy is None:
                raise
            # the limit came between two of the wait's questions: the registry did answer
            why = _waited(job, busy, wait_until, limit_until)
            return report_decision(native_decision(job, why), job.settings)
        since = reply["since"]
        state = reply["state"]
        if state == "answer":
            return await _adopt(job, reply["entry"], reply["by"], limit_until)
        if state == "claimed":
            return await _sweep(ray, registry, job, holder, reply, started)
        if state == "failed":
            why = f"node type {job.node_type}'s sweep by {reply['by']} failed ({reply['reason']})"
            return report_decision(native_decision(job, why), job.settings)
        if options.while_sweeping == "native":
            why = (
                f"{reply['holder']} is measuring node type {job.node_type} now "
                '([ray] while_sweeping = "native"); a later resolve picks its answer up'
            )
            return report_decision(native_decision(job, why), job.settings)
        busy = reply
        gave_up = await _wait(ray, registry, job, reply, waiting, wait_until, limit_until)
        if gave_up is not None:
            return gave_up


async def coordinated(ray: Any, job: Job, started: float) -> Decision | None:
    """The job's answer as the registry shares it across the cluster; None: it is unreachable.

    ``hard_limit_s`` counts from ``started`` (the resolve's start): a registry that has
    not answered by then leaves the native chunk, and nothing measured. A registry whose
    own code raised in the actor (chunktune's bug) leaves the native chunk too, the bug's
    traceback logged. A registry that cannot be reached, with this process's handle or
    one looked up anew, is said in a warning; the caller then resolves on its host alone,
    as it does when chunktune's own code raised while looking the registry up (the bug's
    traceback logged, never said to be the registry unreachable).
    """
    # a killed registry, or one of an earlier Ray session, is looked up anew
    for fresh in (False, True):
        try:
            return await _coordinate(ray, job, fresh=fresh, started=started)
        except OutOfTime:
            why = (
                f"gave up after the hard limit of {job.policy.hard_limit_s:g} s (hard_limit_s) "
                "while the Ray registry had not answered; nothing was measured"
            )
            return report_decision(native_decision(job, why), job.settings)
        except RegistryBug as exc:
            doing = "asking the Ray registry"
            # logged with the RayTaskError behind it, which carries the actor's traceback
            log_bug(exc, doing)
            why = f"{bug_reason(exc.raised, doing)}; nothing was cached"
            return report_decision(native_decision(job, why), job.settings)
        except LookupBug as exc:
            # chunktune failing, not the registry gone: said as such, with its traceback
            log_bug(exc.raised, "looking up the Ray registry")
            logger.warning("chunktune: resolving on this host alone, without the Ray registry")
            return None
        except RegistryGone as exc:
            gone = exc
    logger.warning(
        "chunktune: the Ray registry is unreachable (%s); resolving on this host alone", gone
    )
    return None
