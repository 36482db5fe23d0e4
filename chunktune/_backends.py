"""Reaching the event loop from a worker thread, on asyncio and trio alike.

The one place that knows what ``anyio.lowlevel.current_token()`` returns: from anyio
4.11 an ``EventLoopToken`` wrapping the backend's own token in ``native_token``,
before that the backend's token itself. Under asyncio that token is the running
loop; under trio a ``TrioToken``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["call_soon_threadsafe"]


def call_soon_threadsafe(token: object, fn: Callable[[], object]) -> bool:
    """Schedule ``fn()`` on the event loop of ``token`` without waiting for it.

    ``token`` is what ``anyio.lowlevel.current_token()`` returned on that loop, on
    any supported anyio version. Safe to call from any thread; never blocks.

    Returns:
        False when the loop has closed (nobody is listening any more), else True.
    """
    native: Any = getattr(token, "native_token", token)
    try:
        if hasattr(native, "call_soon_threadsafe"):  # asyncio's loop
            native.call_soon_threadsafe(fn)
        else:  # trio's TrioToken
            native.run_sync_soon(fn)
    except RuntimeError:  # asyncio: the loop is closed; trio: RunFinishedError
        return False
    return True
