"""A notebook's interrupt, as the Jupyter kernel sends it: a real SIGINT whose handler
queues the cell's cancel on the asyncio loop with a plain ``call_soon``, which wakes
nothing. Shared by the tests of a resolve's waits (``test_woken``)."""

from __future__ import annotations

import asyncio
import os
import signal
import threading
from collections.abc import Callable
from types import FrameType
from typing import Any

import pytest

# not a speed limit: how long a wait is held for the cancel to land before the test lets
# it go and fails; a loop that is woken sees the cancel within a wake-up
LAND_GUARD_S = 10.0


async def interrupt_unwoken(cell: asyncio.Future[Any], release: Callable[[], None]) -> bool:
    """Interrupt ``cell`` as a notebook does, once the loop sleeps; whether its cancel
    landed within :data:`LAND_GUARD_S`. ``release()`` then lets the held wait go (it is
    called either way, from another thread).

    The cell must raise the canceller's own CancelledError, with no message (a timer's
    cancel scope would add one).
    """
    loop = asyncio.get_running_loop()
    idle, landed = threading.Event(), threading.Event()
    landed_in_time: list[bool] = []

    def interrupt() -> None:
        # while the loop sleeps in its selector, as a notebook's interrupt finds it: a
        # signal that came while it ran Python would be queued before it went to sleep
        idle.wait(LAND_GUARD_S)
        os.kill(os.getpid(), signal.SIGINT)
        landed_in_time.append(landed.wait(LAND_GUARD_S))
        release()

    def on_sigint(signum: int, frame: FrameType | None) -> None:
        loop.call_soon(cell.cancel)  # as tornado's add_callback on its own loop's thread

    selector = loop._selector  # type: ignore[attr-defined]
    select = selector.select

    def watched(timeout: float | None = None) -> object:
        if timeout is None or timeout > 0:
            idle.set()  # the loop has nothing to do but wait
        return select(timeout)

    selector.select = watched
    previous = signal.signal(signal.SIGINT, on_sigint)
    sender = threading.Thread(target=interrupt)
    try:
        sender.start()
        with pytest.raises(asyncio.CancelledError) as caught:
            await cell
        assert caught.value.args == ()  # the canceller's own, not a timer's scope's
        landed.set()
    finally:
        signal.signal(signal.SIGINT, previous)
        selector.select = select
        release()
        await asyncio.to_thread(sender.join, LAND_GUARD_S * 2)
    return landed_in_time == [True]
