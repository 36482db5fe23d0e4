"""Where the calling thread stands among event loops (``_backends``), whatever lands there."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from pathlib import Path

import anyio
import anyio.from_thread
import anyio.to_thread
import pytest

import chunktune
from chunktune._backends import in_worker_thread
from chunktune.sim import SimulatedWorkload


@pytest.fixture
def ctrl_c() -> Iterator[None]:
    """SIGINT's handler Python's default for the test, then put back."""
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, before)


@pytest.mark.usefixtures("ctrl_c")
def test_a_ctrl_c_as_resolve_sync_asks_where_it_stands_is_raised(
    isolated: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Ctrl-C inside the worker-thread check raises; taken for a cancel it became a fallback."""
    checking = anyio.from_thread.check_cancelled
    came: list[bool] = []

    def ctrl_c_there() -> None:
        if not came:
            came.append(True)
            signal.raise_signal(signal.SIGINT)  # handled here, in the check
        checking()

    monkeypatch.setattr(anyio.from_thread, "check_cancelled", ctrl_c_there)
    workload = SimulatedWorkload([1e-3] * 64, nthread=4)
    with pytest.raises(KeyboardInterrupt):
        chunktune.resolve_sync(workload, policy="quick")
    assert came == [True]
    assert chunktune.resolve_sync(workload, policy="quick").source == "benchmark"


@pytest.mark.anyio
async def test_a_cancelled_worker_thread_is_still_a_worker_thread() -> None:
    """A worker thread whose host scope is cancelled is told as one, on asyncio and trio."""
    told: list[bool] = []
    with anyio.CancelScope() as scope:

        def work() -> None:
            anyio.from_thread.run_sync(scope.cancel)
            told.append(in_worker_thread())

        await anyio.to_thread.run_sync(work)
    assert told == [True]
