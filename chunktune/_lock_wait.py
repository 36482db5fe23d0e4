"""Waiting for a lock: from async code without blocking the event loop, or blocking.

A :class:`~chunktune._locks.Lock` attempt never blocks, so a waiter tries again after a
pause that grows from :data:`_POLL_S` to :data:`_POLL_MAX_S`. An async wait makes each
attempt in a worker thread and can be cancelled between them; one that lasts is
reported with whom it waits for, read from the holder's note.
"""

from __future__ import annotations

import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager

import anyio

from ._lock_note import Holder
from ._locks import Lock
from ._threads import hop

__all__ = [
    "NOTE_GRACE_S",
    "RELOOK_S",
    "REPORT_AFTER_S",
    "acquire",
    "hold",
    "hold_blocking",
    "noted_holder",
]

_POLL_S = 0.02  # first pause between attempts; it grows to _POLL_MAX_S
# also how late a notebook's interrupt, queued on the loop unwoken, lands in a lock wait:
# no more than _woken.WAKE_S, as in a resolve's other waits
_POLL_MAX_S = 0.25
REPORT_AFTER_S = 1.0  # a wait longer than this is reported
RELOOK_S = 2.0  # then who holds the lock is read again this often: reported if it changed
# A holder writes its note just after taking the lock: a first look that finds none looks
# again on each attempt for this long before it reports the holder unknown.
NOTE_GRACE_S = 1.0


async def acquire(
    lock: Lock,
    *,
    on_wait: Callable[[Holder | None], None] | None = None,
    claim: Callable[[Lock], bool] | None = None,
    unclaim: Callable[[Lock], bool] | None = None,
) -> None:
    """Wait for ``lock`` without blocking the event loop; cancellable at any moment.

    ``on_wait(holder)`` is called on the loop when the wait has lasted
    :data:`REPORT_AFTER_S` seconds (``None`` for a holder whose note is still missing
    :data:`NOTE_GRACE_S` later), and again whenever another process is found holding
    the lock (read every :data:`RELOOK_S`: the first was killed, and another, perhaps
    on another host of a shared cache, took over). ``claim(lock)``, if given, runs in
    the thread that took the lock, before the caller resumes: it records the lock where
    it can be released should the caller never resume (its loop closed); False gives it
    back. A try (or a look at the holder's note) that a stalled file system holds is
    left behind by a cancel (``hard_limit_s``): a lock it takes once the caller has left
    is released there, ``unclaim(lock)`` first, and ``lock.trying_since`` says meanwhile
    when the try in flight began; ``lock.refused``, whether a try found the lock held.
    """
    start = anyio.current_time()
    pause = _POLL_S
    look_at = start + REPORT_AFTER_S  # when to read who holds the lock next
    reported: list[Holder | None] = []  # the holder reported last, once reported
    unknown_after = start + REPORT_AFTER_S + NOTE_GRACE_S

    while True:
        # A blocking acquire in a worker thread could not be cancelled without leaking a
        # thread that may take the lock later; non-blocking tries between sleeps can.
        if await _try(lock, claim, unclaim):
            return
        lock.refused = True  # held by another (or its file removed at this try)
        if on_wait is not None and anyio.current_time() >= look_at:
            # a read, whole wherever it stops: a cancel leaves a note that does not answer
            holder = await hop(lock.holder, abandon_on_cancel=True)
            # no note on a first look: the lock was taken a moment ago and its note is not
            # yet written, so look again at the next attempt (up to NOTE_GRACE_S)
            if holder is not None or reported or anyio.current_time() >= unknown_after:
                look_at = anyio.current_time() + RELOOK_S
                # a note missing between two holders is no news: only a holder is reported
                if not reported or (holder is not None and holder != reported[-1]):
                    reported.append(holder)
                    on_wait(holder)
        await anyio.sleep(pause)
        pause = min(pause * 1.5, _POLL_MAX_S)


async def _try(
    lock: Lock,
    claim: Callable[[Lock], bool] | None,
    unclaim: Callable[[Lock], bool] | None,
) -> bool:
    """One try at ``lock`` in a worker thread; a cancel leaves it behind (a try that a stalled
    file system holds must not hold its caller past ``hard_limit_s``).

    A lock taken reaches the caller, or is released: by the thread, when the caller had left
    before it took it, else by the caller as it leaves (in a thread of its own: the file
    system may still be stalled).
    """
    guard = threading.Lock()
    left, taken = [False], [False]

    def attempt() -> bool:
        try:
            got = lock.try_acquire()
        finally:
            lock.trying_since = None
        with guard:
            try:
                kept = got and not left[0] and (claim is None or claim(lock))
            except BaseException:
                lock.release()  # a claim that failed records nobody to hold it
                raise
            if got and not kept:
                lock.release()  # nobody is left to hold it
                return False
            taken[0] = got
        return got

    # until the try returns: one a cancel leaves may still be stuck
    lock.trying_since = time.monotonic()
    try:
        return await hop(attempt, abandon_on_cancel=True)
    except BaseException:
        with guard:
            left[0] = True
            owned = taken[0] and (unclaim is None or unclaim(lock))
        if owned:
            threading.Thread(target=lock.release, name="chunktune release", daemon=True).start()
        raise


@asynccontextmanager
async def hold(
    lock: Lock,
    *,
    on_wait: Callable[[Holder | None], None] | None = None,
    claim: Callable[[Lock], bool] | None = None,
    unclaim: Callable[[Lock], bool] | None = None,
) -> AsyncIterator[None]:
    """Hold ``lock`` for the block (see :func:`acquire`).

    With ``claim``, ``unclaim(lock)`` says at the end whether the lock is still this
    block's to release (False: it was released for it, its loop having been closed).
    """
    await acquire(lock, on_wait=on_wait, claim=claim, unclaim=unclaim)
    try:
        yield
    finally:
        if unclaim is None or unclaim(lock):
            lock.release()


def noted_holder(lock: Lock) -> Holder | None:
    """Blocking: who holds ``lock``, read again for up to :data:`NOTE_GRACE_S` while its
    note is missing (a holder writes it just after taking the lock)."""
    deadline = time.monotonic() + NOTE_GRACE_S
    while (holder := lock.holder()) is None and time.monotonic() < deadline:
        time.sleep(_POLL_S)
    return holder


@contextmanager
def hold_blocking(lock: Lock, *, timeout_s: float) -> Iterator[bool]:
    """Blocking: hold ``lock`` for the block, waiting up to ``timeout_s``; yields whether it did."""
    deadline = time.monotonic() + timeout_s
    pause = _POLL_S
    while not (got := lock.try_acquire()) and time.monotonic() < deadline:
        time.sleep(pause)
        pause = min(pause * 1.5, _POLL_MAX_S)
    try:
        yield got
    finally:
        if got:
            lock.release()
