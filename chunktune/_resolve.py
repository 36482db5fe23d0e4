"""The orchestrator: ``await resolve(workload)`` from a decision request to a stored Decision.

manual? -> disabled? -> trivial? -> cache hit? -> this process's flight for the key ->
the key's cross-process lock -> cache hit now? -> the machine-wide sweep lock ->
sweep in a thread of its own -> store. Every blocking step (file I/O, lock waits, the
sweep) runs off the event loop, and none holds a thread while it waits (see
``_threads`` and ``_flights``); the sweep checks for a stop before every probe.
This module holds the entry points; what is answered on the calling thread, with no
loop (a manual size, a repeat, a hit keyed there), is ``_here``; a settings file read
under a given Policy's limit, ``_settings_read``; a miss, shared or owned, ``_miss``;
its sweep and store, ``_measure``; a failure's native chunk, ``_fallback``. Keying and
looking up a request is ``_keys``; the decisions it yields, ``_request``; a key measured
but not stored (a cache that cannot be written), remembered in the process, ``_unstored``.
"""

from __future__ import annotations

import time

import anyio

from ._backends import loop_running_here
from ._decision import Decision
from ._events import ProgressCallback
from ._failures import spent_cause
from ._fallback import at_shutdown, fallback_of, without
from ._here import decide_here, in_memory, manual_decision, new_request, settle
from ._miss import answer, resolve_key
from ._policy import Policy
from ._report import report
from ._request import Ask, ask
from ._settings import Settings
from ._settings_read import given_limit, settings_at_hand, with_settings
from ._threads import hop, run_blocking
from ._workload import Workload

__all__ = ["resolve", "resolve_since", "resolve_sync"]


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
    cached entry. A decision the cache could not store (an unwritable location, a full
    disk) is remembered in this process by its cache key: a later call for that key
    measures nothing (``source == "cache"``, the reason starting ``remembered in this
    process``), unless ``refresh`` or the settings disable the cache.
    ``on_progress`` receives :class:`ProgressEvent` s on the event loop; a call that
    shares another task's sweep of its key (see ``_flights``) receives that sweep's, on
    its own loop, from when it joins until it returns.
    Every keyword is checked, whether or not the call comes to use it; a settings file
    (for ``settings=None``) is read, and a policy's name looked up, only where a policy
    is used: not under ``manual``.

    Waiting (for another task's or process's sweep of the same key, or for the
    machine-wide sweep lock) holds no thread. The policy's ``hard_limit_s`` bounds
    the whole call, waits included: past it, ``resolve`` returns the native chunk
    (``source == "fallback"``, the reason says where it stood) even while a ``run()``
    is still blocked. That sweep is abandoned, not killed: its thread finishes the
    ``run()`` in flight on its own, measures nothing more, caches nothing, and keeps
    the sweep lock until it returns, so no later sweep overlaps its probes.
    Cancelling the awaiting task raises its cancellation at once (asyncio's
    ``CancelledError``, trio's ``Cancelled``), the sweep stops at its next probe boundary,
    and nothing is cached (a cancel that arrives once the sweep has finished, while its
    entry is being written, lets that whole entry land, and the key stays locked until it
    has, so whoever waits for the key reads that entry). Tasks of this process sharing the
    cancelled task's sweep are not cancelled with it: one of them measures the key anew,
    the others sharing that sweep. A cancelled task that was sharing another's sweep
    leaves it running for the rest.
    A workload that steps its caller's pool (``settle_on_cancel`` True, as
    :class:`~chunktune.RolloutWorkload` given ``rollout=`` and ``compat``'s ``pool.step``)
    is not left mid-call: cancelled (or past the limit), ``resolve`` raises (or returns)
    once the ``run()`` in flight has (up to one ``run()`` late) and starts no other, so the
    pool is the caller's again.
    A ``signature()`` that blocks is left behind at the limit, as a ``run()`` is; a
    decision measured in time is returned at the limit even while its entry still waits
    for the cache's write lock (it is written once that lock is free, or given up with a
    warning if the lock's holder changes nothing for
    :data:`chunktune._cache_lock.WRITE_STALL_S` seconds and a second per MB of the file,
    or up to :data:`~chunktune._cache_lock.WRITE_BUSY_TIMES` of that while it is working).

    With ``settings=None`` the settings file is read before a policy named (or the
    file's active one) is known, so its ``hard_limit_s`` cannot bound that read: a file
    that does not answer (a stalled file system, a named pipe nobody writes) holds the
    call, and a cancel waits for the read. A :class:`Policy` object given with
    ``hard_limit_s`` does bound it (all but a stat of the file, which a stalled file
    system can hold; a repeat, the file unchanged, is answered by that stat alone, no
    thread started): past the limit the read is left behind in a daemon
    thread and the native chunk is returned (``source == "fallback"``, the reason says the
    settings file had not answered; logged as a warning, no settings saying how else to
    report it). Settings loaded once and passed as ``settings=`` keep the read out of
    every call.

    What fails at run time is not raised: a ``run()`` or ``signature()`` that raises
    (whatever it raises), chunktune's own code failing (its traceback logged as a
    warning), or a process out of threads or file descriptors (a settings file unread for
    want of one too) gives the native chunk, ``source == "fallback"``, the reason naming
    the culprit, and nothing is cached (:mod:`chunktune._failures`). What the trainer's own
    signal handler raises (on the main thread, wherever the call stood) is raised.
    Called while Python shuts down (``sys.is_finalizing()``: from a ``__del__`` or a weakref
    callback as modules are torn down), it returns the native chunk at once (a manual size:
    that size), ``source == "fallback"``, the reason saying so: nothing is measured,
    imported, logged or started in a thread.

    Raises:
        WorkloadError: ``workload`` does not implement :class:`chunktune.Workload`, a
            member of it raised as it was read (a property: without its counts there is
            no native chunk to fall back on), or its ``signature()`` holds a value that
            is not a str, int (of at most :func:`~chunktune._returned.max_int_digits`
            digits), finite float or bool (numpy scalars are taken as the numbers they
            hold).
        InvalidArgumentError: bad ``num_envs`` or ``nthread``; ``settings`` not a
            Settings; ``policy`` neither a name nor a Policy; ``manual`` not an integer
            from 1 to ``num_envs``; ``refresh`` not a bool; ``on_progress`` not callable,
            or async.
        ConfigError: invalid settings or an unknown policy name (not under ``manual``);
            not a settings file that could not be opened for want of a file descriptor.
        KeyboardInterrupt, SystemExit, GeneratorExit: raised by ``on_progress`` (any
            other error it raises is logged, never raised); raised once this call's
            sweep has stopped as a cancel stops it, nothing cached. In a task sharing
            another's sweep, raised at once, that sweep going on.
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
    try:
        # anyio may import its backend's module at its first current_time(): guarded too
        started = anyio.current_time()
    except (RuntimeError, OSError) as exc:
        cause = spent_cause(exc)
        if cause is None:
            raise  # no event loop here: the caller's mistake, not chunktune's bug
        return without(asked, cause)
    return await resolve_since(started, asked)


async def resolve_since(started: float, asked: Ask) -> Decision:
    """:func:`resolve` of what ``asked`` holds, its ``hard_limit_s`` counted from ``started``
    (the loop's clock).

    For a caller that spent part of the limit before handing over (a Ray worker that
    waited for the registry).
    """
    try:
        return await _resolve_since(started, asked)
    except Exception as exc:
        fallback = fallback_of(asked, exc)
        if fallback is None:
            raise
        return fallback


async def _resolve_since(started: float, asked: Ask) -> Decision:
    """:func:`resolve_since`, but a thread that cannot start raises."""
    if asked.manual is not None:
        return manual_decision(asked)
    if asked.settings is None and given_limit(asked) is not None:
        found_in_time = await with_settings(asked, started)
        if isinstance(found_in_time, Decision):
            return found_in_time
        asked = found_in_time
    if asked.settings is None:
        # one hop discovers the settings (the same object while the file is unchanged, so
        # a repeat is answered from memory) and, where it can, keys and looks up too
        asked, found = await hop(decide_here, asked)
        if isinstance(found, Decision):
            return found
        if found is not None:
            req, key, cache = found
            return settle(req, await resolve_key(req, key, cache))
    settings = asked.settings
    assert settings is not None
    decision = in_memory(asked, settings)
    if decision is None:
        req = new_request(asked, settings, started)
        return settle(req, await answer(req))
    report(decision, settings)
    return decision


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
    anyio loop it runs on that loop. An answer that needs neither a thread nor the cache
    file (``manual``, a policy that never measures, a trivial batch, a repeat of the same
    question within ``_recent.TTL_S``) is given on the calling thread, with no loop; so,
    under a policy without ``hard_limit_s``, is a cache hit (``signature()`` and the
    cache file are read on the calling thread; a miss then sweeps on a loop).
    ``hard_limit_s`` counts from the call. With ``settings=None`` and a :class:`Policy`
    given with ``hard_limit_s``, a settings file that must be read is read on the loop,
    bounded as :func:`resolve` bounds it; a repeat, the file unchanged, is a stat here.

    Raises:
        UsageError: called on an event loop's own thread, in a task or in a plain
            callback such as ``loop.call_soon`` (``await chunktune.resolve(...)`` there
            instead; blocking would deadlock the loop). No coroutine is created.
        KeyboardInterrupt: Ctrl-C (on the main thread, SIGINT at Python's default), once
            its own loop is closed: the sweep stopped at its next probe, nothing cached.
            One that came as that loop was made or closed was held until then, so
            nothing is left unclosed or unawaited (see :class:`~chunktune._sigint.LoopHold`).
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
    began = time.monotonic()  # hard_limit_s counts from here, as resolve's from its start
    try:
        return _resolved_here(asked, began)
    except Exception as exc:
        fallback = fallback_of(asked, exc)
        if fallback is None:
            raise
        return fallback


def _resolved_here(asked: Ask, began: float) -> Decision:
    """:func:`resolve_sync` of what ``asked`` holds, ``hard_limit_s`` counted from ``began``
    (``time.monotonic()``); a thread or file descriptor it cannot have raises."""
    # there run_blocking raises, whatever the answer
    here = None if loop_running_here() else settings_at_hand(asked)
    if here is not None:
        # an answer from memory or a hit starts no event loop and no worker thread
        asked, found = decide_here(here)
        if isinstance(found, Decision):
            return found
        if found is not None:
            req, key, cache = found

            async def miss() -> Decision:
                return settle(req, await resolve_key(req, key, cache))

            return run_blocking(
                miss, instead="await chunktune.resolve(...)", where=" (resolve_sync)"
            )

    async def call() -> Decision:
        # a settings file still to read is read here, bounded as resolve bounds it
        return await resolve_since(anyio.current_time() - (time.monotonic() - began), asked)

    return run_blocking(call, instead="await chunktune.resolve(...)", where=" (resolve_sync)")
