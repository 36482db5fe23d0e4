"""A flight owner's measure: the sweep under the machine-wide lock, and its entry stored.

The sweep runs in a thread of its own, which takes the sweep lock over from the flight
and lets go of it when the sweep ends, so that a sweep the caller left keeps the machine
until its probe in flight returns. The entry is written in a thread of its own too, which
lets go of the key's lock once it is written. A sweep that fails gives the native chunk
(the workload's failure or chunktune's own bug), never a crash.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable
from contextlib import nullcontext

import anyio
import anyio.lowlevel

from . import _flights, _giving_up, _unstored
from ._cache import DecisionCache
from ._cache_entry import BadEntry, CacheEntry, check_entry
from ._candidates import candidate_list
from ._decision import Decision
from ._errors import UsageError, WorkloadError
from ._events import CALLS, ProgressEvent
from ._exiting import exiting
from ._failures import (
    WORKLOAD_TRACEBACK,
    blames_workload,
    by_signal_handler,
    log_bug,
    no_thread,
    raised_by_chunktune,
    spent,
)
from ._keys import cache_for
from ._load import MachineLoad, machine_load
from ._lock_wait import acquire
from ._locks import Lock, sweep_lock
from ._probe import SweepResult
from ._relay import Relay
from ._request import (
    Request,
    broken_decision,
    cache_entry,
    exit_decision,
    failed_decision,
    measured_decision,
    workload_failure,
    worth_storing,
)
from ._sweep import sweep
from ._threads import STORE_THREAD, in_own_thread
from ._tracebacks import warn_once

__all__ = ["measure"]

logger = logging.getLogger("chunktune")


class _Stopped(Exception):
    """The task awaiting the sweep is gone; the worker stops at the next probe."""


def _sweeper(
    req: Request,
    sizes: list[int | None],
    watch: _giving_up.Watch,
    relay: Relay | None,
    flight: _flights.Flight,
    stop: threading.Event,
    limit_s: float | None,
) -> Callable[[], tuple[SweepResult, MachineLoad | None]]:
    """The sweep for its thread: it tells ``watch``, ``relay`` (the caller's on_progress) and
    the tasks sharing ``flight``, and stops once ``stop`` is set.

    It returns the machine's load as it began too: read in the thread, once the sweep
    lock is held (another sweep's calls are over), before its own calls add to it.
    """

    def on_event(event: ProgressEvent) -> None:
        # an ``extended`` event's seconds are the stretched budget, not a call's
        if event.kind in CALLS and event.seconds is not None:
            watch.probe_seconds += event.seconds  # read back only if the sweep fails
        if relay is not None:
            relay.post(event)  # never blocks the sweep on the loop: the task may be gone
        flight.tell(event)  # nor on the sharers' loops

    def check_cancelled() -> None:
        if stop.is_set():
            raise _Stopped

    def run_sweep() -> tuple[SweepResult, MachineLoad | None]:
        load = machine_load()
        result = sweep(
            req.workload,
            sizes,
            req.policy,
            check_cancelled=check_cancelled,
            on_event=on_event,
            limit_s=limit_s,
            shape=(req.num_envs, req.nthread),
        )
        return result, load

    return run_sweep


async def measure(
    req: Request,
    key: str,
    cache: DecisionCache | None,
    watch: _giving_up.Watch,
    flight: _flights.Flight,
    key_lock: Lock | None = None,
) -> Decision:
    """Sweep under the machine-wide lock, select, store.

    ``key_lock``, held by the flight, is handed to the thread that stores the entry.
    """
    sizes = candidate_list(req.policy.candidates, req.num_envs, req.nthread)
    stop = threading.Event()
    callback = req.on_progress
    token = anyio.lowlevel.current_token()
    relay = None if callback is None else Relay(callback, token, stop)
    lock = sweep_lock()
    # the flight holds the machine until the sweep's thread takes it over
    await acquire(
        lock, on_wait=watch.waiting("sweep", lock), claim=flight.claim, unclaim=flight.unclaim
    )
    try:
        watch.waiting_for, watch.sweeping = None, True
        # what hard_limit_s leaves after the waits: a stretched budget must end inside it
        limit_s = None if req.deadline is None else req.deadline - anyio.current_time()
        run_sweep = _sweeper(req, sizes, watch, relay, flight, stop, limit_s)
        # a caller's pool must be the caller's again when a cancel (or the limit) returns:
        # MuJoCo's pool crashes the process when two threads step it at once
        settle = stop.set if req.settles else None
        watch.settles = settle is not None
    except BaseException:
        # no thread took the machine over: a lock kept here would stop every later sweep
        if flight.unclaim(lock):
            lock.release()
        raise
    flight.unclaim(lock)
    try:
        # The sweep's own thread releases the lock when it ends: a sweep the caller
        # left (cancelled, or past hard_limit_s) keeps the machine until its probe in
        # flight returns, so no later sweep, here or in another process, overlaps it.
        # A workload that settles on cancel is not left: the cancel waits for that probe.
        with nullcontext() if relay is None else relay.scope:
            result, load = await in_own_thread(run_sweep, finally_=lock.release, settle=settle)
        if relay is not None:
            relay.close()  # Ctrl-C or SystemExit that on_progress raised: the scope ended it
        watch.sweeping = False
        decision = watch.decided = measured_decision(req, result, key, load)
    except BaseException as exc:
        stop.set()  # the worker stops at its next probe boundary
        if relay is not None:
            relay.close()  # what on_progress raised is the caller's, whatever else ended it
        fallback = _unmeasured(req, key, exc, watch.probe_seconds)
        if fallback is None:
            raise
        return fallback
    if worth_storing(decision):
        if cache is not None:
            await _store(req, key, decision, cache, flight, key_lock)
        elif req.settings.cache.enabled:
            # a location nothing can be stored in (said in its warning): remembered here,
            # so that the next resolve of the key in this process measures nothing
            _keep_unstored(req, key, decision)
    return decision


def _keep_unstored(req: Request, key: str, decision: Decision) -> None:
    """Remember ``decision`` in this process, with its entry for a later write of the cache
    (the location may be made, or freed, meanwhile); one that would not read back is
    remembered only, as :func:`_unstored.put` would not store it either."""
    cache = cache_for(req.settings)
    made = cache_entry(req, decision)
    entry: CacheEntry | None = made
    try:
        check_entry(made)
    except BadEntry:
        entry = None
    _unstored.keep(key, decision, _unstored.unstorable(cache), cache=cache, entry=entry)


def _unmeasured(
    req: Request, key: str, exc: BaseException, probe_seconds: float
) -> Decision | None:
    """The fallback of a sweep that ``exc`` ended, ``probe_seconds`` into its calls; None
    where ``exc`` is to be raised (a cancel, the trainer's signal handler, the process's
    threads or file descriptors spent)."""
    if not isinstance(exc, Exception) or by_signal_handler(exc):
        return None
    if isinstance(exc, UsageError) and exiting():
        # the sweep stopped because Python is exiting (a resolve left running in a daemon
        # thread): no bug of chunktune's, and a traceback logged at exit is noise
        return exit_decision(req, key, exc, probe_seconds)
    if blames_workload(exc):
        # a failing workload must never crash the trainer
        # the reason names the call and what it raised; the traceback, where in the
        # author's code (and in the sweep: a warm-up, the race, a confirmation). chunktune's
        # verdict on what run() returned has none worth reading: its message says it all
        verdict = isinstance(exc, WorkloadError) and raised_by_chunktune(exc)
        if verdict:
            logger.warning("chunktune: workload failed while measuring: %s", workload_failure(exc))
        else:
            # a trainer resolving per epoch with a workload broken for the run: the same
            # traceback once at WARNING, not once per resolve (_tracebacks)
            warn_once(
                key,
                exc,
                "chunktune: workload failed while measuring: %s",
                workload_failure(exc),
                extra={WORKLOAD_TRACEBACK: True},
            )
        return failed_decision(req, key, exc, probe_seconds)
    # threads or file descriptors spent outside the workload's own code (the sweep's
    # thread, a module the sweep imports) are the process's: resolve says so
    if spent(exc):
        return None
    # nor may chunktune's own bug crash it: native, the bug named and its traceback
    # logged for the trainer to report; not cached, as a failing workload's is not
    log_bug(exc, "measuring")
    return broken_decision(req, key, exc, probe_seconds)


async def _store(
    req: Request,
    key: str,
    decision: Decision,
    cache: DecisionCache,
    flight: _flights.Flight,
    key_lock: Lock | None,
) -> None:
    """Write ``decision``'s entry in a thread of its own, which lets go of ``key_lock`` (held
    by the flight) once the entry is written; a failure to store is logged, never raised.

    A write stuck behind another process's lock must not hold the answer past
    ``hard_limit_s``, nor a cancelled caller: the write is atomic, so it may finish on its
    own. The key stays locked until it has: a task or process that waits for the key then
    reads this entry instead of measuring the key again. An exception the trainer's own
    signal handler raised is raised on.
    """
    try:
        store = functools.partial(_unstored.put, key, decision, cache, cache_entry(req, decision))
        release = None
        if key_lock is not None and flight.unclaim(key_lock):
            release = key_lock.release
        # no daemon: the process's exit waits for the write (bounded by WRITE_STALL_S,
        # WRITE_BUSY_TIMES of it for a holder still working)
        await in_own_thread(store, name=STORE_THREAD, finally_=release, daemon=False)
    except Exception as exc:
        # the decision stands: only its entry is lost (the key's lock let go, or still
        # the flight's where building the entry failed)
        if by_signal_handler(exc):
            raise
        if no_thread(exc):
            logger.warning("chunktune: cannot store %s in the cache (%s)", key[:12], exc)
        else:
            log_bug(exc, f"storing {key[:12]} in the cache (the decision stands, uncached)")
