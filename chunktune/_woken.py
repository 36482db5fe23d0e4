"""A resolve's waits on the event loop, the loop woken on a timer meanwhile, so that a
callback queued there without waking it runs.

The Jupyter kernel (ipykernel 7.4, on tornado) turns a notebook's interrupt into a cancel
of the cell's task from its SIGINT handler, queued with a plain ``call_soon`` on the loop's
own thread: that wakes nothing, and the selector, retried after the signal, sleeps on until
something else wakes the loop. A resolve waiting for its sweep's thread, or for another
task's sweep of its key, has nothing else to wake it until that sweep ends (its
``time_budget_s``, or longer), so the interrupt would land only then. Woken every
:data:`WAKE_S` (:func:`~chunktune._backends.waking`), it lands within that, and the sweep
stops at its next probe as a cancel stops it.

Every wait of a resolve is so woken: these two; each thread hop and long wait
(:func:`~chunktune._threads.hop`, :func:`~chunktune._threads.wait_in_thread`: a damaged
cache's read waiting for its write lock, a Ray registry's wait for another worker's
sweep); and a lock wait polls at least as often (``_lock_wait._POLL_MAX_S``).
"""

from __future__ import annotations

import anyio

from ._backends import waking

__all__ = ["WAKE_S", "wait_woken"]

WAKE_S = 0.25
"""Seconds between the loop's wake-ups while a resolve waits: a notebook's interrupt lands
within this; four wake-ups a second cost the loop nothing it would notice."""


async def wait_woken(event: anyio.Event) -> None:
    """``await event.wait()``, the loop woken every :data:`WAKE_S` seconds meanwhile (a
    timer that cancels nothing: a cancel that lands is the canceller's, with its message)."""
    with waking(WAKE_S):
        await event.wait()
