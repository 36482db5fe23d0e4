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

This module holds the entry points: what a worker answers on its own (Ray missing,
a manual size, nothing to measure, a hit in its host's caches) and the job's keys.
What it does with the registry on a miss, claiming or waiting, is ``_ray_claim``'s.
"""

from __future__ import annotations

import functools
import os
from typing import Any

import anyio
import attrs

from ._candidates import only_native
from ._counts import native_chunk, upper_chunk
from ._decision import Decision
from ._errors import ChunktuneError
from ._events import ProgressCallback
from ._failures import blames_workload, log_bug, spent
from ._fallback import at_shutdown, fallback_of
from ._giving_up import gave_up_keying
from ._here import new_request
from ._policy import Policy
from ._ray_api import RAY_ADDRESS, StartRefused, ray_module, started_ray
from ._ray_claim import coordinated, deadline
from ._ray_job import Job, identify, local_hit, report_decision
from ._request import Ask, ask, broken_decision, pick_policy
from ._resolve import resolve_since
from ._settings import Settings
from ._settings_read import with_settings
from ._threads import KEYING_THREAD, in_own_thread, run_blocking, wait_in_thread
from ._workload import Workload

__all__ = ["resolve", "resolve_sync"]


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
    wait_timeout_s``; ``[ray] while_sweeping = "native"`` returns native at once). A wait
    for another worker is told to ``on_progress`` as a plain resolve tells its waits: a
    ``"waiting"`` event a second into it, once per worker it waits for.
    ``refresh`` ignores answers older than the call, in the registry and in caches.
    Cancelled while sweeping, or while its claim is asked for, it gives the claim up
    and caches nothing; cancelled while waiting for another worker's sweep, it cancels its
    wait on the registry, and its thread in ``ray.get`` ends within
    :data:`~chunktune._ray_calls.POLL_S` seconds.

    The policy's ``hard_limit_s``, counted from the call, bounds the workload's
    ``signature()`` and the lookup in this host's caches (a stalled file system, or a
    damaged cache file whose write lock a stuck process holds, is left behind in a daemon
    thread, and the plain resolve's fallback says the cache file had not answered; the
    registry is not asked), every registry call and wait, this worker's own sweep, and
    the wait for Ray's start where ``[ray] init_local`` calls ``ray.init()`` (native,
    said so; the start goes on in its thread, for a later call to find). It does not
    bound two steps: importing Ray; and, for ``settings=None``, reading the settings
    file, which names the policy and so its limit (a :class:`~chunktune.Policy` object
    given with ``hard_limit_s`` bounds that read too, as in :func:`chunktune.resolve`).
    Ray's start is bounded on its own too, hard limit or not: a ``ray.init()`` not done
    within :data:`~chunktune._ray_api.START_TIMEOUT_S` seconds of its start (a stale
    ``RAY_ADDRESS``, whose cluster is gone), or one that failed, keeps native, the
    reason saying why and what to do; that start is never repeated in the process, so
    every later call keeps native at once with that reason (and uses Ray once it is up).
    A claimant reads back the
    entry it stored to publish it, after its sweep, within the limit too: a read that has
    not answered by then is left behind, and the entry built from its decision is
    published instead.

    Raises:
        MissingExtraError: Ray is not installed.
        UsageError: Ray is not initialised here and ``[ray] init_local`` is off.
        the errors of :func:`chunktune.resolve`.
    """
    asked = ask(
        workload,
        settings=settings,
        policy=policy,
        manual=manual,
        refresh=refresh,
        on_progress=on_progress,
    )
    if (ending := at_shutdown(asked)) is not None:
        return ending
    return await _resolve(asked)


async def _resolve(asked: Ask) -> Decision:
    """:func:`resolve` of what ``asked`` holds.

    What fails at run time falls back as the plain resolve's failures do
    (:func:`~chunktune._fallback.fallback_of`): chunktune's own bug anywhere here (the
    settings' checks, the registry's protocol, adopting another worker's answer) keeps
    native, its traceback logged. Ray's own failures keep theirs: Ray that cannot be
    imported raises (:class:`MissingExtraError`), Ray that cannot be started keeps native
    (:func:`_native_without_ray`), and a registry that cannot be reached is resolved around
    (:func:`coordinated`).
    """
    in_ray = True  # importing or connecting Ray: its errors are Ray's, raised as they are
    try:
        started = anyio.current_time()
        # Ray missing: say so now, whatever this call turns out to need (importing it is slow)
        await wait_in_thread(ray_module)
        in_ray = False
        if asked.settings is None and asked.manual is None:
            found = await with_settings(asked, started)
            if isinstance(found, Decision):
                return found
            asked = found
        plain = functools.partial(resolve_since, started, asked)
        settings = asked.settings
        if asked.manual is not None or settings is None:
            return await plain()
        _, pol = pick_policy(settings, asked.policy)
        num_envs, nthread = asked.num_envs, asked.nthread
        if (
            not pol.enabled
            or upper_chunk(num_envs, nthread) <= 1
            or only_native(pol.candidates, num_envs, nthread)
        ):
            # disabled, or nothing to measure: nothing is ever published, so a claim would
            # only queue the node type's workers (or tell them, under "native", that one is)
            return await plain()
        in_ray = True
        # a start of Ray's (init_local) is bounded on its own too (START_TIMEOUT_S); one
        # the hard limit leaves behind goes on in its thread, for a later call to find
        with anyio.CancelScope(deadline=deadline(pol, started)) as scope:
            ray = await wait_in_thread(started_ray, settings, abandon_on_cancel=True)
        in_ray = False
        if scope.cancelled_caught:
            return _start_gave_up(asked, settings, pol)
        if isinstance(ray, StartRefused):  # it failed, or was overdue, now or before
            return _native_without_ray(asked, settings, ray.why)
        return await _on_ray(ray, asked, settings, pol, started)
    except Exception as exc:
        if in_ray and not spent(exc):
            raise
        fallback = fallback_of(asked, exc)
        if fallback is None:
            raise
        return fallback


async def _on_ray(
    ray: Any, asked: Ask, settings: Settings, pol: Policy, started: float
) -> Decision:
    """Key the request, look in this host's caches, then ask the registry (connected Ray)."""
    plain = functools.partial(resolve_since, started, asked)
    job = None
    hit: bool | None = None
    # signature() is the workload's own code, and the host's cache file may not answer (a
    # stalled file system, a broken file whose write lock a stuck process holds): past
    # hard_limit_s the plain resolve's fallback says so, as it does for its own lookup
    with anyio.CancelScope(deadline=deadline(pol, started)):
        keying = functools.partial(identify, ray, asked, settings)
        try:
            # a daemon thread: one left behind never holds up the process's exit
            job = await in_own_thread(keying, name=KEYING_THREAD)
            looking = functools.partial(local_hit, job)
            hit = False if asked.refresh else await in_own_thread(looking, name=KEYING_THREAD)
        except Exception as exc:
            # a failing signature(), a signature no key can hold, a deliberate error, or a
            # process out of threads: the plain resolve keys again, and falls back, raises
            # or says so as it does for its own keying
            if blames_workload(exc) or isinstance(exc, ChunktuneError) or spent(exc):
                return await plain()
            # chunktune's own bug (the node type, the host's lookup): as the plain keying's
            log_bug(exc, "keying the workload for the cluster")
            req = new_request(asked, settings, started)
            key = "" if job is None else job.key
            return report_decision(broken_decision(req, key, exc, keying=True), settings)
    if job is None:
        return await plain()
    if hit is None:
        return _lookup_gave_up(job)
    if hit:
        return await plain()
    decision = await coordinated(ray, job, started)
    return await plain() if decision is None else decision


def _start_gave_up(asked: Ask, settings: Settings, pol: Policy) -> Decision:
    """The fallback once ``hard_limit_s`` ran out while Ray was starting (``[ray]
    init_local``): native, nothing measured, the registry not asked; reported."""
    address = os.environ.get(RAY_ADDRESS)
    joining = f", joining RAY_ADDRESS={address!r}" if address else ""
    assert pol.hard_limit_s is not None
    why = (
        f"gave up after the hard limit of {pol.hard_limit_s:g} s (hard_limit_s) while Ray "
        f"was starting (ray.init() under [ray] init_local{joining})"
    )
    return _native_without_ray(asked, settings, why)


def _native_without_ray(asked: Ask, settings: Settings, why: str) -> Decision:
    """Native for ``asked``, kept because ``why`` (Ray is not up), nothing measured; reported."""
    name, _ = pick_policy(settings, asked.policy)
    native = native_chunk(asked.num_envs, asked.nthread)
    decision = Decision(
        chunk_size=None,
        native_chunk=native,
        source="fallback",
        reason=f"kept the native chunk {native}: {why}; nothing was measured",
        key="",
        policy=name,
    )
    return report_decision(decision, settings)


def _lookup_gave_up(job: Job) -> Decision:
    """The plain resolve's fallback once ``hard_limit_s`` ran out before the host's caches
    answered (nothing was measured, the registry was not asked), reported."""
    limit = job.policy.hard_limit_s
    assert limit is not None
    decision = gave_up_keying(limit, job.native, job.policy_name)
    return report_decision(attrs.evolve(decision, key=job.key), job.settings)


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
    asked = ask(
        workload,
        settings=settings,
        policy=policy,
        manual=manual,
        refresh=refresh,
        on_progress=on_progress,
    )
    if (ending := at_shutdown(asked)) is not None:
        return ending  # a __del__ at exit: no import, thread or log works by then

    async def call() -> Decision:
        return await _resolve(asked)

    return run_blocking(
        call,
        instead="await chunktune.ray.resolve(...)",
        where=" (chunktune.ray.resolve_sync, in an async actor's method?)",
    )
