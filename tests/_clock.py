"""A loop clock that a test moves on: a hard limit runs out the moment the test says so.

A test that waited out a real ``hard_limit_s`` spent the whole limit asleep, and a limit
short enough to be cheap leaves a loaded machine no room to reach the point the test
means the limit to end at. Marked ``@pytest.mark.jumps``, a test runs on a loop whose
clock reads real time plus what the test jumped: it waits (on an event, not a time) until
the resolve is stuck where it should be, then jumps the clock past the limit. Every
deadline is still the loop's own timer, counted as before; only the wait is skipped.

``resolve_sync`` runs its own loop (``anyio.run``), which no marker reaches: a test of it
calls :func:`jump_own_loop_when`, which makes every loop ``anyio.run`` starts for the rest
of the test such a loop, and jumps the one running once the call is stuck.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from typing import Any

import anyio
import anyio.lowlevel
import pytest
import trio
import trio.testing

__all__ = ["backend_options", "jump", "jump_own_loop_when", "jump_when"]


class _JumpingLoop(asyncio.SelectorEventLoop):
    """The default loop (on Linux) whose clock is ahead of real time by what was jumped."""

    def __init__(self) -> None:
        super().__init__()
        self.ahead = 0.0

    def time(self) -> float:
        return super().time() + self.ahead


def backend_options(backend: str) -> tuple[str, dict[str, Any]]:
    """anyio's backend with a clock a test can jump: a fresh loop or MockClock per test."""
    if backend == "asyncio":
        return backend, {"loop_factory": _JumpingLoop}
    # rate 1: the clock runs at real time until a jump; no autojump, which would move it
    # on whenever every task waits, as the tests' tasks do for worker threads
    return backend, {"clock": trio.testing.MockClock(rate=1.0)}


async def jump(seconds: float) -> None:
    """Move the running loop's clock ``seconds`` on; timers now due fire at once."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:  # not asyncio: trio
        clock = trio.lowlevel.current_clock()
        assert isinstance(clock, trio.testing.MockClock), "mark the test @pytest.mark.jumps"
        clock.jump(seconds)
    else:
        assert isinstance(loop, _JumpingLoop), "mark the test @pytest.mark.jumps"
        loop.ahead += seconds
    await (
        anyio.lowlevel.checkpoint()
    )  # one pass of the loop: it looks at its timers with the clock moved


async def jump_when(stuck: threading.Event, seconds: float) -> None:
    """Once ``stuck`` is set (a call in a worker thread reached the point the test means a
    limit to run out at), jump the loop's clock ``seconds`` on."""
    # a hang guard, not a timing: a resolve that never gets stuck fails the test here
    assert await anyio.to_thread.run_sync(stuck.wait, 60.0, abandon_on_cancel=True), "not stuck"
    await jump(seconds)


def jump_own_loop_when(
    monkeypatch: pytest.MonkeyPatch, stuck: threading.Event, seconds: float
) -> None:
    """Run the loops ``anyio.run`` starts (``resolve_sync``'s own) on a clock ahead of real
    time by what was jumped; once ``stuck`` is set, jump the newest ``seconds`` on.

    The jump is made from a thread of its own, on the loop's thread
    (``call_soon_threadsafe``), which wakes the loop to look at its timers.
    """
    loops: list[_JumpingLoop] = []

    def made() -> _JumpingLoop:
        loop = _JumpingLoop()
        loops.append(loop)
        return loop

    # asyncio.Runner makes its loop by events.new_event_loop() where no loop_factory is
    # given: anyio.run gives none, and anyio 4.1 (the floor) ignores a loop_factory option
    monkeypatch.setattr(asyncio.events, "new_event_loop", made)

    def move_on(loop: _JumpingLoop) -> None:
        loop.ahead += seconds

    def jump_once_stuck() -> None:
        # a hang guard, not a timing: a call that never gets stuck is left to its limit
        # a loaded machine may have let the limit run out in real time first: the loop it
        # would have jumped is closed, and a raise here would fail some later test
        if stuck.wait(60):
            with contextlib.suppress(RuntimeError):  # "Event loop is closed"
                loops[-1].call_soon_threadsafe(move_on, loops[-1])

    threading.Thread(target=jump_once_stuck, name="jump once stuck", daemon=True).start()
