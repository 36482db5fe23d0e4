"""The machine to one command's measurements: the machine-wide sweep lock, as a sweep holds it."""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator

from .._lock_wait import hold_blocking, noted_holder
from .._locks import sweep_lock
from .._shown import shown_file
from ._common import say

__all__ = ["machine_to_ourselves"]


@contextlib.contextmanager
def machine_to_ourselves(wait_s: float = math.inf) -> Iterator[bool]:
    """Hold the machine-wide sweep lock for the block: a sweep running alongside would skew
    both measurements. Waits up to ``wait_s`` seconds (without end by default), saying whom
    for; yields whether it got the lock.

    As a sweep does, the holder notes its pid beside the lock, so a ``tune`` that waits
    says whom it waits for; a lock that cannot be made degrades (with a warning).
    """
    lock = sweep_lock()
    if lock.try_acquire():
        try:
            yield True
        finally:
            lock.release()
        return
    holder = noted_holder(lock)
    who = holder.describe() if holder is not None else "holder unknown"
    up_to = "" if math.isinf(wait_s) else f" up to {wait_s:g} s"
    # $CHUNKTUNE_SWEEP_LOCK's name: its newline or escape sequence must not act on the terminal
    say(f"waiting{up_to} for another sweep to finish ({who}; lock {shown_file(lock.path)})")
    with hold_blocking(lock, timeout_s=wait_s) as held:
        yield held
