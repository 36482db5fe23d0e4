"""The cluster-wide registry: one sweep per (job, node type), its answer kept for every worker.

One named, detached Ray actor per cluster (``chunktune-registry`` in namespace
``chunktune``), created by whichever worker needs it first (``get_if_exists``). It
holds, per registry key, the answer (a :class:`CacheEntry`) once one worker has
measured it, or the claim of the worker measuring it now. A claim is a lease: the
claimant renews it with heartbeats, and a claim whose lease ran out (the worker
was killed, its node died) goes to the next worker that asks, so nothing waits on
a dead sweep for longer than one lease. All times are the actor's monotonic
seconds; callers only ever hand back what it gave them.

It runs on the head node (whose loss ends the cluster), not on a worker node an
autoscaler may remove once idle. Ray restarts it when its process dies
(``max_restarts=-1``), with its state lost and a monotonic clock of another origin. Each start
is an incarnation with its own id, and the ``since`` and claim tokens it hands out
carry that id: one handed back to a later incarnation is never read on its clock.
Such a caller asked before that incarnation began, so every answer and failure the
new one holds came after its question (a ``refresh`` takes them, a waiter's wait
ends on them), and no claim the new one granted can be ended or renewed with a token
of the old one.

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
import uuid
from collections import deque
from typing import Any

import attrs

from ._cache_entry import CacheEntry

__all__ = ["REGISTRY_NAME", "REGISTRY_NAMESPACE", "Registry", "Since", "Token", "registry_handle"]

REGISTRY_NAME = "chunktune-registry"
REGISTRY_NAMESPACE = "chunktune"
_EVENTS_KEPT = 10_000
HEAD_NODE_RESOURCE = "node:__internal_head__"  # Ray gives the head node one of it

Since = tuple[str, float]  # (the incarnation that handed it out, its monotonic seconds)
Token = tuple[str, int]  # (the incarnation that granted the claim, the key's claim count)


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
        self._incarnation = uuid.uuid4().hex
        self._started = time.monotonic()

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

    def _since(self, since: object, now: float) -> float:
        """A caller's ``since`` on this incarnation's clock (None: ``now``).

        One of an earlier incarnation (or an older chunktune's bare number) is no reading
        of this clock: its caller asked before this incarnation started.
        """
        if since is None:
            return now
        if (
            isinstance(since, tuple)
            and len(since) == 2
            and since[0] == self._incarnation
            and isinstance(since[1], float)
        ):
            return since[1]
        return self._started

    def _token(self, slot: _Slot) -> Token:
        return (self._incarnation, slot.token)

    def _holds(self, slot: _Slot, token: object) -> bool:
        """Whether ``token`` is the key's live claim (never one of an earlier incarnation)."""
        return slot.holder is not None and token == self._token(slot)

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
        self, key: str, holder: str, *, since: object, refresh: bool, lease_s: float
    ) -> dict[str, Any]:
        """Answer, or claim the sweep, or say who is sweeping.

        ``since`` is None on a caller's first call and the ``since`` returned before
        (a :data:`Since`, opaque to callers) on every later one: a failure after it ends
        the caller's wait, and with ``refresh`` only an answer published after it counts.
        A ``since`` from before a restart counts as this incarnation's start.

        Returns a dict with ``state`` (``"answer"``, ``"claimed"``, ``"busy"`` or
        ``"failed"``) and ``since``; with ``entry`` and ``by`` for an answer, ``token``
        (and ``took_over``) for a claim, ``holder``, ``held_s`` (seconds its claim has
        been held) and ``lease_left_s`` when busy, ``reason`` and ``by`` for a failure.
        """
        now = time.monotonic()
        at = self._since(since, now)
        mine: Since = (self._incarnation, at)
        slot = self._slot(key)
        if slot.answer is not None and (not refresh or slot.answered_at >= at):
            return {"state": "answer", "since": mine, "entry": slot.answer, "by": slot.answered_by}
        if slot.failed_at >= at:
            return {"state": "failed", "since": mine, "reason": slot.failure, "by": slot.failed_by}
        previous = slot.holder
        self._expire(key, slot, now)
        if slot.holder is not None:
            return {
                "state": "busy",
                "since": mine,
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
        return {
            "state": "claimed",
            "since": mine,
            "token": self._token(slot),
            "took_over": took_over,
        }

    async def heartbeat(self, key: str, token: Token, lease_s: float) -> bool:
        """Renew a claim's lease; False if the claim is no longer this token's."""
        slot = self._slot(key)
        if not self._holds(slot, token):
            return False
        slot.lease_until = time.monotonic() + lease_s
        return True

    async def publish(self, key: str, token: Token, entry: CacheEntry, by: str) -> None:
        """Store the answer (whoever measured it) and end the claim if it is ``token``'s."""
        slot = self._slot(key)
        slot.answer = entry
        slot.answered_at = time.monotonic()
        slot.answered_by = by
        if self._holds(slot, token):
            slot.holder = None
        self._note(key, "publish", by, chunk_size=entry.chunk_size)
        self._changed(slot)

    async def fail(self, key: str, token: Token, reason: str, by: str) -> None:
        """The claimant's sweep failed: its waiters fall back; later callers may claim again."""
        slot = self._slot(key)
        if not self._holds(slot, token):
            return
        slot.holder = None
        slot.failed_at = time.monotonic()
        slot.failure = reason
        slot.failed_by = by
        self._note(key, "fail", by, reason=reason)
        self._changed(slot)

    async def release(self, key: str, token: Token) -> None:
        """Give a claim up without an answer (cancelled): the next caller claims."""
        slot = self._slot(key)
        if not self._holds(slot, token):
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
                # on the head node, as Ray Train's state actor, and outside any placement
                # group of the caller's (where the head's resource is not to be had)
                resources={HEAD_NODE_RESOURCE: 0.001},
                scheduling_strategy="DEFAULT",
                max_restarts=-1,
                max_concurrency=10_000,
            )
            .remote()
        )
        _handles[job] = handle
        return handle
