"""The sweep's progress events, from its thread to the caller's ``on_progress`` on the loop.

The callback runs as a plain callback of the caller's loop (:func:`_backends.call_soon`),
never in its task, and there what it raises must not escape: trio takes an exception out
of such a callback for its own bug and ends the trainer's whole run with
``TrioInternalError``, and asyncio leaves Ctrl-C to unwind its loop from outside any task.
:class:`Guarded` keeps what a failing callback raises; what it lets
through (``KeyboardInterrupt``, ``SystemExit``, ``GeneratorExit``: the caller's to have)
is kept here, the sweep is stopped, and the task awaiting the sweep raises it as a
cancel would return (a workload that settles on cancel is waited for as then).

A task that shares another task's sweep of its key has a relay of its own, to its own
loop (:meth:`~chunktune._flights.Flight.wait`): its ``stop`` silences that relay alone,
and what its callback lets through ends that task's wait, never the owner's sweep. Its
events come through the :class:`~chunktune._channel.Channel` of its function, which
hands what it had yet to deliver to the next task that passed the same function.
"""

from __future__ import annotations

import functools
import logging
import threading
from types import BuiltinMethodType, MethodType

import anyio
import attrs

from ._backends import call_soon
from ._events import ProgressCallback, ProgressEvent

__all__ = ["Guarded", "Relay", "as_passed", "same_callback"]

logger = logging.getLogger("chunktune")


@attrs.define
class Guarded:
    """A caller's ``on_progress`` for one resolve: one that raises never breaks it.

    The first error is logged with its traceback, later ones at DEBUG: a callback that
    fails on every event would otherwise log dozens of tracebacks per sweep. A
    ``BaseException`` that is no ``Exception`` is such an error too (as a workload's is its
    failure), but for ``KeyboardInterrupt``, ``SystemExit`` and ``GeneratorExit``: those
    are the caller's, raised on (out of a sweep's event: :class:`Relay`).
    """

    callback: ProgressCallback
    failed: bool = False

    def __call__(self, event: ProgressEvent) -> None:
        try:
            self.callback(event)
        except (KeyboardInterrupt, SystemExit, GeneratorExit):
            raise
        except BaseException:
            if self.failed:
                logger.debug("chunktune: on_progress raised again", exc_info=True)
                return
            self.failed = True
            logger.exception(
                "chunktune: on_progress raised; continuing (its later errors in this "
                "resolve are logged at DEBUG)"
            )


def as_passed(callback: ProgressCallback) -> ProgressCallback:
    """The function the caller passed, under its :class:`Guarded` (each resolve wraps its own)."""
    return callback.callback if isinstance(callback, Guarded) else callback


def same_callback(a: ProgressCallback | None, b: ProgressCallback | None) -> bool:
    """Whether two callbacks are one function: the same object, or the same method of the
    same object (``bar.update`` makes a new bound method each time it is read)."""
    if a is b:
        return a is not None
    if isinstance(a, MethodType) and isinstance(b, MethodType):
        return a.__self__ is b.__self__ and a.__func__ is b.__func__
    if isinstance(a, BuiltinMethodType) and isinstance(b, BuiltinMethodType):  # list.append
        # the same C function and the same self, by identity: no __eq__ of the caller's runs
        # (a name is not enough: C static methods have no self, bytes' and str's maketrans)
        return a == b
    return False


class Relay:
    """One sweep's events to ``callback`` on the loop of ``token``; once ``stop`` is set, none.

    ``stop`` is the sweep's own for its owner (set, it stops the sweep too), a relay's own
    for a task sharing the sweep. The awaiting task waits inside :attr:`scope`, then calls
    :meth:`close`, which raises what the callback raised meanwhile.
    """

    def __init__(self, callback: ProgressCallback, token: object, stop: threading.Event) -> None:
        self.callback = callback
        self.token = token
        self.stop = stop
        self.scope = anyio.CancelScope()
        self.raised: BaseException | None = None
        self.closed = False

    def post(self, event: ProgressEvent) -> bool:
        """Send ``event`` to the callback on the loop (from any thread), without waiting:
        the awaiting task may be gone. False: the loop has ended (nobody listens)."""
        return call_soon(self.token, functools.partial(self.deliver, event))

    def deliver(self, event: ProgressEvent) -> None:
        """Call the callback with ``event``; on the loop, whatever it raises kept."""
        if self.stop.is_set():
            # the resolve has left (cancelled, past its limit: it sets ``stop`` on the loop
            # as it leaves) or the callback raised: events the sweep sent meanwhile (the
            # probe in flight, the race's steps up to the next probe) reach nobody here
            return
        try:
            self.callback(event)
        except BaseException as exc:
            if self.closed:
                # an event handled after a resolve that returned with no stop set (the
                # events of a finished sweep come before its answer; this is a guard):
                # nobody is left to raise it to, and raising into the loop would break it
                logger.warning(
                    "chunktune: on_progress raised %r after its resolve had returned; ignored",
                    exc,
                )
                return
            if self.raised is None:
                self.raised = exc
            self.stop.set()
            self.scope.cancel()

    def close(self) -> None:
        """The sweep is awaited no more: raise what the callback raised while it was.

        Raises:
            BaseException: what the callback raised (the first, where it raised again).
        """
        self.closed = True
        raised, self.raised = self.raised, None
        if raised is not None:
            raise raised
