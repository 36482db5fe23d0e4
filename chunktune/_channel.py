"""One function's share of a sweep's events: the tasks sharing the sweep that passed it.

A function passed by several tasks that share one sweep (the same function, or
``bar.update`` of one object) is called once per event, on the loop of one of them at a
time: the carrier, the first of them still waiting. The events wait in one queue, in the
order the sweep told them, and only the carrier's loop takes them out, one at a time. When
the carrier leaves (its resolve returns, is cancelled or gives up, its callback lets
Ctrl-C through, or its loop has ended), the rest of the queue is the next carrier's, ahead
of every event told after: on one loop or across threads, the function sees each event
once and in order, and none is lost while one of those tasks still waits. A carrier whose
asyncio loop is stopped (not closed) waits on, but the queue is another's whose loop runs.

Nothing here runs a callback under a lock, and telling never waits: it queues the event and
posts a drain to the carrier's loop.
"""

from __future__ import annotations

import functools
import os
import threading
import weakref
from collections import deque

from ._backends import call_soon, loop_stopped
from ._events import ProgressCallback, ProgressEvent
from ._failures import log_bug
from ._relay import Relay

__all__ = ["Channel"]


class Channel:
    """The events for ``function`` (as the caller passed it) among the relays that passed it.

    ``what`` names the sweep in a log line, should posting to a loop fail (a bug).
    """

    def __init__(self, function: ProgressCallback, what: str) -> None:
        self.function = function
        self.what = what
        self.relays: list[Relay] = []  # in the order they joined; the carrier is one of them
        self._carrier: Relay | None = None
        self._queue: deque[ProgressEvent] = deque()  # told, not yet delivered
        self._lock = threading.Lock()  # guards the three above; never held round a callback
        _channels.add(self)

    def join(self, relay: Relay) -> bool:
        """Add a relay that passed :attr:`function`; True: it carries (none else was waiting)."""
        with self._lock:
            self.relays.append(relay)
            if self._carrier is None:
                self._carrier = relay
                return True
            return False

    def send(self, event: ProgressEvent) -> None:
        """Queue ``event`` behind those told before, and have the carrier's loop deliver it.

        From any thread; never waits. With nobody waiting, the event reaches nobody.
        """
        with self._lock:
            carrier = self._carrier
            if carrier is None:
                return
            self._queue.append(event)
        self._wake(carrier)

    def leave(self, relay: Relay) -> None:
        """Take ``relay`` out, its ``stop`` set (on its loop, as its wait ends): what it was
        to deliver and had not is the next carrier's, first."""
        with self._lock:
            if any(r is relay for r in self.relays):
                self.relays.remove(relay)
            heir = self._succeed(relay)
        self._wake(heir)

    def _succeed(self, relay: Relay) -> Relay | None:
        """Make the next relay still waiting the carrier in place of ``relay`` (``_lock``
        held); the one whose loop must now drain the queue, if any (None: ``relay`` did
        not carry, or nothing is queued, or none waits, and then nothing is kept)."""
        if self._carrier is not relay:
            return None
        self._carrier = next(
            (r for r in self.relays if r is not relay and not r.stop.is_set()), None
        )
        if self._carrier is None:
            self._queue.clear()
        return self._carrier if self._queue else None

    def _wake(self, carrier: Relay | None) -> None:
        """Post a drain to the carrier's loop; where that fails, to the next carrier's.

        A carrier whose loop has ended, or whose post raised (logged as chunktune's bug), is
        sent nothing more; its queue is not lost with it. One whose loop is stopped (not
        closed) leaves the queue to one whose loop runs, if another waits, and waits on.
        """
        while carrier is not None:
            if loop_stopped(carrier.token):
                carrier = self._pass_on(carrier)
                if carrier is None:
                    return
            try:
                if call_soon(carrier.token, functools.partial(self._drain, carrier)):
                    return
            except Exception as exc:
                log_bug(exc, f"telling a task sharing {self.what} of the sweep's progress")
            with self._lock:
                if any(r is carrier for r in self.relays):
                    self.relays.remove(carrier)
                carrier = self._succeed(carrier)

    def _pass_on(self, stopped: Relay) -> Relay | None:
        """The carrier in place of ``stopped``, whose loop is stopped: the first other relay
        still waiting whose loop runs, else ``stopped`` itself (its loop may run again); None
        where ``stopped`` carries no more (whoever took over was woken)."""
        with self._lock:
            if self._carrier is not stopped:
                return None
            heir = next(
                (
                    r
                    for r in self.relays
                    if r is not stopped and not r.stop.is_set() and not loop_stopped(r.token)
                ),
                stopped,
            )
            self._carrier = heir
            return heir

    def _drain(self, relay: Relay) -> None:
        """On the loop of ``relay``: deliver the queue in order while it carries.

        A drain posted to a carrier since replaced does nothing: its heir's loop drains.
        """
        while True:
            with self._lock:
                if self._carrier is not relay:
                    return
                if relay.stop.is_set():  # its callback let Ctrl-C through: the rest is the next's
                    heir = self._succeed(relay)
                    break
                if not self._queue:
                    return
                event = self._queue.popleft()
            relay.deliver(event)
        self._wake(heir)


_channels: weakref.WeakSet[Channel] = weakref.WeakSet()  # every channel alive, for a fork


def _forget_in_child() -> None:
    """In a forked child: no channel's lock has a holder.

    A parent's thread telling or delivering at the fork (the sweep's, another loop's) held
    it, and never releases it here; a task of the forking thread's trio run that was
    sharing a sweep, carried on in the child, would hang as it leaves.
    """
    for channel in list(_channels):
        channel._lock = threading.Lock()


os.register_at_fork(after_in_child=_forget_in_child)
