"""MuJoCo's warnings while chunktune's own commands measure: counted, not printed.

MuJoCo's default handler prints every warning and appends it to a ``MUJOCO_LOG.TXT``
in the current folder. An unstable model warns once per env per call, so a sweep of
it printed thousands of lines and grew that file in whatever folder the command ran
from; counted, they become one line the command says once it is done.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

import mujoco  # untyped: its objects are Any

from ._models import warning_hook

__all__ = ["WarningTally", "warnings_counted"]


class WarningTally:
    """How many warnings MuJoCo gave, and the first of them on one line.

    Called by MuJoCo from the pool's worker threads, so it counts under a lock.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.count = 0
        self.first: str | None = None

    def __call__(self, text: str) -> None:
        with self._lock:
            self.count += 1
            if self.first is None:
                self.first = " ".join(str(text).split())


@contextlib.contextmanager
def warnings_counted() -> Iterator[WarningTally | None]:
    """MuJoCo's warnings counted in the block instead of printed and logged to a file.

    Yields None, and counts nothing, where the program set a warning handler of its
    own: that handler gets them as before. MuJoCo's own handler is back afterwards.
    """
    with warning_hook:  # the hook is process-wide: never swapped while a load swaps it
        if mujoco.get_mju_user_warning() is not None:
            tally = None
        else:
            tally = WarningTally()
            mujoco.set_mju_user_warning(tally)
    try:
        yield tally
    finally:
        if tally is not None:
            with warning_hook:
                if mujoco.get_mju_user_warning() == tally:
                    mujoco.set_mju_user_warning(None)
