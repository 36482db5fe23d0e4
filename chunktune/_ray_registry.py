"""The cluster-wide registry: one sweep per (job, node type), its answer kept for every worker.

One named, detached Ray actor per cluster (``chunktune-registry`` in namespace
``chunktune``), created by whichever worker needs it first (``get_if_exists``). It
holds, per registry key, the answer (a :class:`CacheEntry`) once one worker has
measured it, or the claim of the worker measuring it now. A claim is a lease: the
claimant renews it with heartbeats, and a claim whose lease ran out (the worker
was killed, its node died) goes to the next worker that asks, so nothing waits on
a dead sweep for longer than one lease. All times are the actor's monotonic
seconds; callers only ever hand back what it gave them.

Its methods are coroutines, so Ray runs it as an async actor: a waiting worker's
``wait`` call parks on the actor's event loop without holding a thread, and
thousands of workers can wait at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import threading
import time
from collections import deque
from typing import Any

import attrs

from ._cache_entry import CacheEntry

__all__ = ["REGISTRY_NAME", "REGISTRY_NAMESPACE", "Registry", "registry_handle"]

REGISTRY_NAME = "chunktune-registry"
REGISTRY_NAMESPACE = "chunktune"
_EVENTS_KEPT = 10_000


@attrs.define
class _Slot:
    answer: CacheEntry | None = None
    answered_at: float = -math.inf
    answered_by: str = ""
    holder: str | None = None
    claimed_at: float = 0.0
    token: int = 0
    lease_until: float = 0.0
    failed_at: float = -math.inf
    failure: str = ""
    failed_by: str = ""
    changed: asyncio.Event | None = None


class Registry:
    """The registry's state and methods; :func:`registry_handle` runs it as a Ray actor."""

    def __init__(self) -> None:
        self._slots: dict[str, _Slot] = {}
        self._events: deque[dict[str, Any]] = deque(maxlen=_EVENTS_KEPT)

    # -- helpers ------------------------------------------------------------------

    def _slot(self, key: str) -> _Slot:
        slot = self._slots.get(key)
        if slot is None:
            slot = self._slots[key] = _Slot()
        return slot

    def _note(self, key: str, event: str, holder: str | None, **extra: Any) -> None:
        self._events.append(
            {"t": time.time(), "key": key, "event": event, "holder": holder, **extra}
        )

    @staticmethod
    def _changed(slot: _Slot) -> None:
        if slot.changed is not None:
            slot.changed.set()
            slot.changed = None

    def _expire(self, key: str, slot: _Slot, now: float) -> None:
        if slot.holder is not None and slot.lease_until <= now:
            self._note(key, "expired", slot.holder)
            slot.holder = None
            self._changed(slot)

    # -- the protocol ---------------------------------------------------------------

    async def now(self) -> float:
        """The registry's clock, in seconds."""
        return time.monotonic()

    async def claim(
        self, key: str, holder: str, *, since: float | None, refresh: bool, lease_s: float
    ) -> dict[str, Any]:
        """Answer, or claim the sweep, or say who is sweeping.

        ``since`` is None on a caller's first call and the ``since`` returned before
        on every later one: a failure after it ends the caller's wait, and with
        ``refresh`` only an answer published after it counts.

        Returns a dict with ``state`` (``"answer"``, ``"claimed"``, ``"busy"`` or
        ``"failed"``) and ``since``; with ``entry`` and ``by`` for an answer, ``token``
        (and ``took_over``) for a claim, ``holder``, ``held_s`` (seconds its claim has
        been held) and ``lease_left_s`` when busy, ``reason`` and ``by`` for a failure.
        """
        now = time.monotonic()
        since = now if since is None else since
        slot = self._slot(key)
        if slot.answer is not None and (not refresh or slot.answered_at >= since):
            return {"state": "answer", "since": since, "entry": slot.answer, "by": slot.answered_by}
        if slot.failed_at >= since:
            return {"state": "failed", "since": since, "reason": slot.failure, "by": slot.failed_by}
        previous = slot.holder
        self._expire(key, slot, now)
        if slot.holder is not None:
            return {
                "state": "busy",
                "since": since,
                "holder": slot.holder,
                "held_s": now - slot.claimed_at,
                "lease_left_s": slot.lease_until - now,
            }
        slot.holder = holder
        slot.claimed_at = now
        slot.token += 1
        slot.lease_until = now + lease_s
        took_over = previous if previous is not None and previous != holder else None
        self._note(key, "takeover" if took_over else "claim", holder, previous=took_over)
        self._changed(slot)
        return {"state": "claimed", "since": since, "token": slot.token, "took_over": took_over}

    async def heartbeat(self, key: str, token: int, lease_s: float) -> bool:
        """Renew a claim's lease; False if the claim is no longer this token's."""
        slot = self._slot(key)
        if slot.holder is None or slot.token != token:
            return False
        slot.lease_until = time.monotonic() + lease_s
        return True

    async def publish(self, key: str, token: int, entry: CacheEntry, by: str) -> None:
        """Store the answer (whoever measured it) and end the claim if it is ``token``'s."""
        slot = self._slot(key)
        slot.answer = entry
        slot.answered_at = time.monotonic()
        slot.answered_by = by
        if slot.token == token:
            slot.holder = None
        self._note(key, "publish", by, chunk_size=entry.chunk_size)
        self._changed(slot)

    async def fail(self, key: str, token: int, reason: str, by: str) -> None:
        """The claimant's sweep failed: its waiters fall back; later callers may claim again."""
        slot = self._slot(key)
        if slot.token != token or slot.holder is None:
            return
        slot.holder = None
        slot.failed_at = time.monotonic()
        slot.failure = reason
        slot.failed_by = by
        self._note(key, "fail", by, reason=reason)
        self._changed(slot)

    async def release(self, key: str, token: int) -> None:
        """Give a claim up without an answer (cancelled): the next caller claims."""
        slot = self._slot(key)
        if slot.token != token or slot.holder is None:
            return
        self._note(key, "release", slot.holder)
        slot.holder = None
        self._changed(slot)

    async def abandon(self, key: str, holder: str) -> None:
        """Give up a claim whose reply its caller stopped waiting for (its hard limit).

        Submitted after the claim, so it runs after it: a claim granted too late is
        released at once instead of holding the key until its lease ends.
        """
        slot = self._slot(key)
        if slot.holder != holder:
            return
        self._note(key, "release", slot.holder)
        slot.holder = None
        self._changed(slot)

    async def wait(self, key: str, timeout_s: float) -> None:
        """Return when the key's state changes or its claim's lease ends; at most ``timeout_s``."""
        slot = self._slot(key)
        if slot.holder is None:
            return
        if slot.changed is None:
            slot.changed = asyncio.Event()
        changed = slot.changed
        lease_left = slot.lease_until - time.monotonic()
        # a little past the lease, so the caller's next claim finds it expired
        limit = max(0.0, min(timeout_s, lease_left + 0.05))
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(changed.wait(), timeout=limit)

    async def events(self, key: str | None = None) -> list[dict[str, Any]]:
        """What happened (claims, takeovers, expiries, answers), oldest first."""
        return [e for e in self._events if key is None or e["key"] == key]


_handles: dict[str, Any] = {}  # by Ray job: a handle dies with its session
_handle_lock = threading.Lock()


def _reset_in_child() -> None:
    global _handle_lock  # a parent's thread may have held it at the fork
    _handle_lock = threading.Lock()


os.register_at_fork(after_in_child=_reset_in_child)


def registry_handle(ray: Any, *, fresh: bool = False) -> Any:
    """Blocking: the cluster's registry actor, created on first use (detached: it outlives jobs).

    ``fresh`` looks it up again (after a call to the old handle failed).
    """
    job = str(ray.get_runtime_context().get_job_id())
    with _handle_lock:
        if job in _handles and not fresh:
            return _handles[job]
        handle = (
            ray.remote(Registry)
            .options(
                name=REGISTRY_NAME,
                namespace=REGISTRY_NAMESPACE,
                lifetime="detached",
                get_if_exists=True,
                num_cpus=0,
                max_restarts=-1,
                max_concurrency=10_000,
            )
            .remote()
        )
        _handles[job] = handle
        return handle
