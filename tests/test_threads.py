"""A worker thread reaches the event loop on asyncio and trio, with any anyio's token."""

from __future__ import annotations

import threading

import anyio
import anyio.lowlevel
import anyio.to_thread
import pytest

from chunktune._threads import call_soon


@pytest.mark.anyio
@pytest.mark.parametrize("raw", [False, True], ids=["token", "raw-token"])
async def test_call_soon_runs_on_the_loop_thread(raw: bool) -> None:
    """A callback scheduled from a worker runs on the loop's thread, whatever token form."""
    token: object = anyio.lowlevel.current_token()
    if raw:  # what anyio before 4.11 returned: the backend's own token
        token = getattr(token, "native_token", token)
    loop_thread = threading.get_ident()
    ran = anyio.Event()
    seen: list[int] = []

    def deliver() -> None:
        seen.append(threading.get_ident())
        ran.set()

    assert await anyio.to_thread.run_sync(call_soon, token, deliver)
    with anyio.fail_after(10):
        await ran.wait()
    assert seen == [loop_thread]


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_call_soon_after_the_loop_closed_reports_false(backend: str) -> None:
    """Scheduling on a loop that has finished returns False instead of raising."""

    async def grab() -> object:
        return anyio.lowlevel.current_token()

    token = anyio.run(grab, backend=backend)
    assert call_soon(token, lambda: None) is False
