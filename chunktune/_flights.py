"""This process's flights: one sweep per cache key at a time, its answer shared with all.

The first task to miss the cache for a key owns the key's flight and measures; every
other task of the process that misses the same key meanwhile waits for the owner's
decision. A waiter holds no thread: it awaits an event of its own loop, which the
owner sets through that loop's token, since the owner may run on another thread's
loop (``resolve_sync`` callers in different threads each run their own). A waiter with
an ``on_progress`` gets the owner's events meanwhile, on its own loop, through a
:class:`~chunktune._relay.Relay` of its own, fed by the :class:`~chunktune._channel.Channel`
of its function (:meth:`Flight.wait`, :meth:`Flight.tell`).

What the owner says if ``hard_limit_s`` ends the flight (its watch over what it waits
for) is ``_giving_up``'s.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from contextlib import nullcontext

import anyio
import anyio.lowlevel
import attrs

from ._backends import call_soon, loop_closed_probe, never
from ._channel import Channel
from ._decision import Decision
from ._events import ProgressCallback, ProgressEvent
from ._failures import log_bug
from ._locks import Lock
from ._relay import Relay, as_passed, same_callback
from ._woken import wait_woken

__all__ = [
    "SHARING",
    "Flight",
    "abandon",
    "board",
    "land",
]

logger = logging.getLogger("chunktune")

_lock = threading.Lock()  # guards _flights and every flight's waiters, channels, outcome

SHARING = "waiting for another task of this process measuring this workload (sharing its sweep)"
"""The message of the ``waiting`` event a task's ``on_progress`` gets as it joins a flight."""


OWNER_CHECK_S = 1.0
"""How often the janitor looks whether flights' owners can still land them (loops closed)."""


@attrs.define(eq=False)
class Flight:
    """One owner's attempt at deciding one key; ``decision`` is None until it lands.

    ``owner_gone`` tells that the owner's loop was closed with the owner still pending;
    ``held`` are the locks the owner holds (its key's; the machine's until its sweep's
    thread takes it over), released for it then. ``channels`` carry the owner's events to
    the waiters that have an ``on_progress``, each to its own loop through a relay of its
    own: one channel per distinct function among them (all but the owner's), whose ordered
    queue one of its relays delivers at a time; ``owner_progress`` is the owner's own (as
    the caller passed it), which its sweep tells already.
    """

    key: str
    decision: Decision | None = None
    landed: bool = False
    waiters: list[tuple[object, anyio.Event]] = attrs.field(factory=list)  # (loop token, event)
    owner_gone: Callable[[], bool] = never
    held: list[Lock] = attrs.field(factory=list)
    owner_progress: ProgressCallback | None = None
    channels: list[Channel] = attrs.field(factory=list)

    def claim(self, lock: Lock) -> bool:
        """Record a lock the owner just took (in the taking thread); False: it was abandoned."""
        with _lock:
            if self.landed:
                return False
            self.held.append(lock)
            return True

    def unclaim(self, lock: Lock) -> bool:
        """Forget a lock the owner releases or hands over; False: it was released for it."""
        with _lock:
            if any(held is lock for held in self.held):
                self.held.remove(lock)
                return True
            return False

    async def wait(self, on_progress: ProgressCallback | None = None) -> Decision | None:
        """The owner's decision, or None when it was cancelled or failed before deciding
        (or its loop was closed with it still pending: see :func:`abandon`).

        ``on_progress`` (a :class:`~._relay.Guarded` one) gets, on this task's loop, a ``waiting``
        event (:data:`SHARING`) as the wait begins, then the owner's events (:meth:`tell`)
        until the wait ends, and none after: not one the owner sent before. A function
        that the owner or another waiter passed too gets each event once, not once per
        task (nor the ``waiting`` event): the old advice, one function passed to several
        tasks, reads as before; the events this task was to carry for it and had not when
        this wait ended go to the next waiter that passed it, ahead of later ones, so the
        function sees every event once and in the sweep's order. What it lets through
        (``KeyboardInterrupt``, ``SystemExit``, ``GeneratorExit``) ends this wait and is
        raised here, as the owner's relay raises it to the owner; the owner's sweep and the
        other waiters go on.
        """
        token = anyio.lowlevel.current_token()
        waiter = (token, anyio.Event())
        relay = None if on_progress is None else Relay(on_progress, token, threading.Event())
        with _lock:
            if self.landed:
                return self.decision
            self.waiters.append(waiter)
            channel, told = None, True
            if relay is not None:
                channel = self._channel(as_passed(relay.callback))
                told = channel is None or not channel.join(relay)
        try:
            with nullcontext() if relay is None else relay.scope:
                if relay is not None and not told:
                    # in this task, before any event posted to this loop: told first
                    relay.deliver(ProgressEvent(kind="waiting", message=SHARING))
                await wait_woken(waiter[1])  # a notebook's interrupt lands here too
        finally:
            if relay is not None:
                relay.stop.set()  # on this loop: an event already posted reaches nobody
            if channel is not None and relay is not None:
                channel.leave(relay)  # what it had yet to deliver, the next one delivers
            with _lock:
                if any(w is waiter for w in self.waiters):
                    self.waiters.remove(waiter)
                if channel is not None and not channel.relays:
                    # none of its tasks waits (a join is under _lock): kept, it would hold
                    # their function, and what that holds, till the sweep ends
                    self._drop(channel)
            if relay is not None:
                relay.close()  # what on_progress let through is this task's, whatever else
        return self.decision

    def _channel(self, callback: ProgressCallback) -> Channel | None:
        """The channel of ``callback`` (as passed), made if new; None: the owner's (_lock held)."""
        if same_callback(callback, self.owner_progress):
            return None
        for channel in self.channels:
            if same_callback(channel.function, callback):
                return channel
        channel = Channel(callback, self.key[:12])
        self.channels.append(channel)
        return channel

    def _drop(self, channel: Channel) -> None:
        """Forget ``channel`` (_lock held); the next task to pass its function makes a new one."""
        if any(c is channel for c in self.channels):
            self.channels.remove(channel)

    def tell(self, event: ProgressEvent) -> None:
        """Send the owner's ``event`` to every waiter's ``on_progress``, each on its own loop.

        From any thread (the sweep's, the owner's loop); never waits, and never calls a
        callback here, nor with a lock held. A function the owner passed too is skipped,
        and one that several waiters passed gets the event once, through its channel, in
        the order told. A waiter whose relay fails to post is logged as chunktune's bug
        and, like one whose loop has ended, sent nothing more: neither breaks the owner's
        sweep nor keeps the event from the next waiter with its function, or the others.
        """
        with _lock:
            channels = list(self.channels)
        for channel in channels:
            channel.send(event)


_flights: dict[str, Flight] = {}


_janitor_running = False  # guarded by _lock
# set (under _lock) when the last flight the janitor watches lands: it ends at once rather
# than up to OWNER_CHECK_S later, so a program that forks right after resolve_sync
# forks no thread of ours (Python 3.12+ warns of a fork in a multi-threaded process)
_idle = threading.Event()


def board(key: str, on_progress: ProgressCallback | None = None) -> tuple[Flight, bool]:
    """The key's flight in this process, and whether the caller now owns it (it was none).

    ``on_progress`` is the caller's, kept as the owner's when it owns the flight.
    """
    global _janitor_running
    with _lock:
        flight = _flights.get(key)
        if flight is not None:
            return flight, False
        flight = _flights[key] = Flight(
            key,
            owner_gone=loop_closed_probe(),
            owner_progress=None if on_progress is None else as_passed(on_progress),
        )
        if flight.owner_gone is not never and not _janitor_running:
            try:
                _janitor_running = _start_janitor()
            except BaseException:
                # a MemoryError from Thread.start, say: unboarded, or every later resolve
                # of the key in this process would wait for a flight nobody owns
                del _flights[key]
                raise
        return flight, True


def _start_janitor() -> bool:
    """Start the janitor's thread (call with _lock held); False where none could start.

    A process out of threads (``ulimit -u``, memory for a stack) still resolves: only a
    loop closed under a pending owner goes unwatched, and the next flight tries again.
    Raising here would leave the flight just boarded without an owner to land it, and
    every later resolve of its key in this process waiting for it for good.
    """
    try:
        threading.Thread(target=_janitor, name="chunktune-flights", daemon=True).start()
    except RuntimeError as exc:  # "can't start new thread"
        logger.debug("chunktune: cannot start the flights' janitor (%s)", exc)
        return False
    return True


def _janitor() -> None:
    """Every :data:`OWNER_CHECK_S`, abandon the flights whose owners' loops were closed.

    Such an owner never runs again, whatever it was doing: waiting for the machine,
    sweeping, storing. Ends when no flight's owner is on an asyncio loop; ``board``
    starts it again with the next one.
    """
    global _janitor_running
    while True:
        _idle.wait(OWNER_CHECK_S)
        with _lock:
            _idle.clear()
            watched = _watched()
            if not watched:
                _janitor_running = False
                return
        for flight in watched:
            try:
                gone = flight.owner_gone()
            except Exception as exc:  # a janitor that died would watch no loop again
                log_bug(exc, f"checking the loop of the task measuring {flight.key[:12]}")
                continue
            if gone:
                abandon(flight)


def _watched() -> list[Flight]:
    """The flights whose owners' loops the janitor watches (call with _lock held)."""
    return [f for f in _flights.values() if f.owner_gone is not never]


def land(flight: Flight, decision: Decision | None) -> None:
    """End an owned flight with its decision (None: none was made) and wake every waiter.

    Nothing here leaves the flight boarded or a waiter asleep: what can fail (the waiters'
    copy of the decision, waking one waiter) is done apart from taking the flight off the
    board, and fails alone, logged as chunktune's bug. A waiter whose copy failed is woken
    with no decision and tries to own the key itself (finding the owner's entry cached).
    Ctrl-C (or the trainer's signal handler) raising in the copy, or as a waiter is woken,
    is raised on once the flight has landed (with no decision, where it was the copy's)
    and every other waiter is woken.
    """
    try:
        # the waiters' own copy: the owner's caller may edit its timings before they wake
        shared = None if decision is None else attrs.evolve(decision)
    except Exception as exc:
        log_bug(exc, f"sharing the decision on {flight.key[:12]} with the tasks waiting for it")
        shared = None
    except BaseException:
        # left boarded, the key's flight would keep every later resolve of it in this
        # process (a notebook's, after its interrupt) waiting for good
        land(flight, None)
        raise
    with _lock:
        if _flights.get(flight.key) is flight:
            del _flights[flight.key]
        if _janitor_running and not _watched():
            _idle.set()
        flight.decision = shared
        flight.landed = True
        waiters, flight.waiters = flight.waiters, []
        flight.channels = []  # an abandoned sweep's later events reach no waiter
    _wake(waiters, flight.key)


def _wake(waiters: list[tuple[object, anyio.Event]], key: str) -> None:
    """Set each waiter's event on its own loop; one that fails is logged as chunktune's bug.

    Ctrl-C (or the trainer's signal handler) raising as one is woken is raised on once
    the others are: taken off the flight, a waiter not woken would sleep for good.
    """
    for n, (token, event) in enumerate(waiters):
        try:
            call_soon(token, event.set)  # a waiter whose loop has ended is listening no more
        except Exception as exc:
            log_bug(exc, f"waking a task waiting for {key[:12]}")
        except BaseException:
            _wake(waiters[n + 1 :], key)
            raise


def abandon(flight: Flight) -> None:
    """Land the flight of an owner whose loop was closed, and release its key lock.

    The owner never runs again: nothing else would free the key for this process's
    tasks, or its lock for other processes. A flight that landed (its owner gave up at
    ``hard_limit_s``, and its loop ended before the abandoned sweep did) is left alone.
    A lock whose release fails is logged as chunktune's bug: the flight lands all the same.
    """
    with _lock:
        if flight.landed:
            return
        held, flight.held = flight.held, []
    try:
        for lock in held:
            try:
                lock.release()
            except Exception as exc:
                log_bug(exc, f"releasing a lock of the task measuring {flight.key[:12]}")
        logger.warning(
            "chunktune: the task measuring %s was left pending on an event loop that was "
            "closed; its key is free again (nothing of its sweep was cached)",
            flight.key[:12],
        )
    finally:
        land(flight, None)


def _forget_in_child() -> None:
    """In a forked child: no flight of the parent's has an owner here, no lock a holder.

    Threads do not survive a fork, so a flight owned by one of the parent's tasks would
    never land in the child, and a lock held by a parent's thread never be released.
    The child starts afresh: its tasks miss, wait on the cross-process key lock (the
    parent's sweep still holds it) and then read the parent's answer from the cache.
    """
    global _lock, _janitor_running, _idle
    _lock = threading.Lock()
    _flights.clear()
    _janitor_running = False
    _idle = threading.Event()


os.register_at_fork(after_in_child=_forget_in_child)
