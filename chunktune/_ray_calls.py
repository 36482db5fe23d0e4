"""Calls to the registry actor from a worker, each bounded in time, and the registry gone.

One concern: reaching the registry actor (``_ray_registry``) at all. A call is waited
for in a worker thread, for at most :data:`CALL_TIMEOUT_S` seconds or until the
resolve's hard limit; a call nobody waits for is sent and forgotten; the actor's handle
is looked up (anew, after a failed call). A registry that cannot be reached (killed, of
an earlier Ray session, Ray shut down meanwhile) is raised as :class:`RegistryGone`, one
that had not answered by the hard limit as :class:`OutOfTime`, and one whose own code
(chunktune's) raised in the actor as :class:`RegistryBug`, and chunktune's own code
raising while it looked the actor up as :class:`LookupBug`; what a worker does then is
``_ray_claim``'s. Nothing here ever starts Ray.
"""

from __future__ import annotations

import functools
import logging
import math
import threading
import time
from collections.abc import Callable
from typing import Any

import anyio

from ._failures import raised_by_chunktune
from ._named import named
from ._ray_registry import registry_handle
from ._threads import wait_in_thread

__all__ = [
    "CALL_TIMEOUT_S",
    "LookupBug",
    "OutOfTime",
    "RegistryBug",
    "RegistryGone",
    "call",
    "look_up",
    "raised_in_actor",
    "tell",
]

logger = logging.getLogger("chunktune")

CALL_TIMEOUT_S = 60.0  # one registry call that is not a wait: slower counts as unreachable
# A call's thread asks Ray for the answer in slices this long, so one whose caller left
# (cancelled) ends within a slice rather than when the call would have: a registry wait
# lasts up to a lease (30 s by default), and a stalled registry's call CALL_TIMEOUT_S
POLL_S = 0.25


class RegistryGone(Exception):
    """The registry actor could not be reached; the caller resolves on its host alone."""


class OutOfTime(RegistryGone):
    """The registry had not answered when the policy's ``hard_limit_s`` ran out."""


class RegistryBug(Exception):
    """The registry's own code (chunktune's) raised inside the actor: a bug, not Ray failing.

    ``raised`` is that exception as the actor raised it (Ray's ``RayTaskError``'s
    ``cause``); the ``RayTaskError`` itself, which carries the actor's traceback, is the
    ``__cause__``.
    """

    def __init__(self, raised: Exception) -> None:
        super().__init__(f"{type(raised).__name__}: {raised}")
        self.raised = raised


class LookupBug(Exception):
    """chunktune's own code raised while it looked the registry actor up (in
    :func:`~chunktune._ray_registry.registry_handle`): a bug, not Ray failing to reach it.

    ``raised`` is that exception (also the ``__cause__``), its traceback chunktune's.
    """

    def __init__(self, raised: Exception) -> None:
        super().__init__(f"{type(raised).__name__}: {raised}")
        self.raised = raised


def raised_in_actor(ray: Any, exc: BaseException) -> Exception | None:
    """What the registry actor's own code raised, if ``exc`` is Ray handing that on; None
    for Ray's own failures (the actor died, the cluster is gone, a timeout)."""
    # Ray wraps an exception raised in an actor's method in a RayTaskError, ``cause`` the
    # original; a cause that is itself Ray's error is Ray failing, not the method
    errors = getattr(ray, "exceptions", None)  # a stand-in Ray may have none
    task_error = getattr(errors, "RayTaskError", None)
    if task_error is None or not isinstance(exc, task_error):
        return None
    cause = getattr(exc, "cause", None)
    ray_error = getattr(errors, "RayError", ())
    if not isinstance(cause, Exception) or isinstance(cause, ray_error):
        return None
    return cause


def _get(ray: Any, ref: Any, timeout_s: float, gone: threading.Event) -> Any:
    """Blocking: ``ray.get(ref)`` within ``timeout_s`` seconds, asked in slices of
    :data:`POLL_S`; once ``gone`` is set (its caller was cancelled) it gives up at the end
    of the slice, so no thread of chunktune's waits on for a caller that has gone.

    Raises:
        TimeoutError: no answer within ``timeout_s`` (Ray's ``GetTimeoutError`` is one),
            or the caller left.
        what ``ray.get`` raised.
    """
    end = time.monotonic() + timeout_s
    while True:
        try:
            return ray.get(ref, timeout=max(0.0, min(POLL_S, end - time.monotonic())))
        except TimeoutError as exc:
            # Ray's GetTimeoutError is one; so is the registry's own TimeoutError, handed on
            if raised_in_actor(ray, exc) is not None or gone.is_set() or time.monotonic() >= end:
                raise


def _forget(ray: Any, ref: Any) -> None:
    """Cancel the registry call behind ``ref`` (a wait nobody waits for any more), so it
    does not stay parked on the actor until it would have returned; best effort."""
    if not ray.is_initialized():
        return  # shut down meanwhile: its calls ended with it
    try:
        ray.cancel(ref)
    except Exception as exc:  # a stand-in Ray, or a Ray shut down meanwhile: it ends on its own
        logger.debug("chunktune: registry call not cancelled (%r)", exc)


async def call(
    ray: Any,
    submit: Callable[[], Any],
    limit_s: float = CALL_TIMEOUT_S,
    until: float = math.inf,
    *,
    cancel_unanswered: bool = False,
) -> Any:
    """The result of the registry call ``submit()`` makes, waited for in a worker thread.

    Submitting is inside the guard too: a handle from an earlier Ray session (``ray.init``
    again in this process) fails there, and so does a Ray shut down meanwhile, which is
    never started again on the caller's behalf. The wait ends after ``limit_s`` seconds,
    or at ``until`` (the loop's clock: the resolve's hard limit), whichever comes first.

    Cancelled, it returns at once, and the thread that waited ends within
    :data:`POLL_S` seconds. ``cancel_unanswered`` cancels the call in the actor too
    wherever it returns without the answer (cancelled, out of time): for a wait, which
    would stay parked there for up to its timeout; a claim or an answer, once sent, is
    delivered.

    Raises:
        OutOfTime: ``until`` came before the answer.
        RegistryBug: the registry's own code raised inside the actor.
        RegistryGone: Ray is not initialised any more (shut down meanwhile, too), or
            the call failed or took longer than ``limit_s`` seconds.
    """
    if not ray.is_initialized():
        raise RegistryGone("Ray is not initialised in this process any more")
    left = until - anyio.current_time()
    if left <= 0:
        raise OutOfTime("the hard limit ran out first")
    ref = None
    gone = threading.Event()  # set once this caller no longer waits for the thread
    answered = False
    try:
        ref = submit()
        get = functools.partial(_get, ray, ref, min(limit_s, left), gone)
        result = await wait_in_thread(get, abandon_on_cancel=True)
        answered = True
        return result
    except SystemExit as exc:
        # what a ray.get raises when this process's Ray is shut down under it; in a
        # worker that Ray is ending, Ray is still up here and the exit goes on
        if ray.is_initialized():
            raise
        raise RegistryGone("Ray was shut down in this process meanwhile") from exc
    except Exception as exc:
        raised = raised_in_actor(ray, exc)
        if raised is not None:
            raise RegistryBug(raised) from exc
        if anyio.current_time() >= until:
            raise OutOfTime("the hard limit ran out first") from exc
        raise RegistryGone(named(exc)) from exc
    finally:
        gone.set()  # a no-op for a thread that already returned or raised
        if cancel_unanswered and not answered and ref is not None:
            _forget(ray, ref)  # a no-op for a call that already ended (it raised)


def tell(ray: Any, submit: Callable[[], Any]) -> None:
    """Send a registry call whose answer nobody waits for (a heartbeat, a release)."""
    if not ray.is_initialized():
        return  # shut down meanwhile: a call would start a Ray of its own
    try:
        submit()
    except Exception as exc:  # a lapsed lease does what this call would have
        logger.debug("chunktune: registry call not sent (%r)", exc)


async def look_up(ray: Any, *, fresh: bool, until: float) -> Any:
    """The registry actor's handle (``fresh``: looked up anew, not this process's), by ``until``.

    Raises:
        OutOfTime: the hard limit ran out during the lookup.
        LookupBug: chunktune's own code raised during the lookup.
        RegistryGone: Ray is not initialised any more, or the lookup failed in Ray.
    """
    if not ray.is_initialized():  # shut down meanwhile: a lookup would start a Ray
        raise RegistryGone("Ray is not initialised in this process any more")
    with anyio.CancelScope(deadline=until) as scope:
        try:
            registry = await wait_in_thread(
                functools.partial(registry_handle, ray, fresh=fresh), abandon_on_cancel=True
            )
        except Exception as exc:
            if raised_by_chunktune(exc):
                raise LookupBug(exc) from exc
            raise RegistryGone(named(exc)) from exc
    if scope.cancelled_caught:
        raise OutOfTime("the hard limit ran out while the registry was looked up")
    return registry
