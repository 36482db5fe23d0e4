"""Ctrl-C while the ``chunktune`` command is still starting: exit 130, no traceback.

Importing chunktune (numpy, anyio, rich, ...) takes a few tenths of a second before
``main`` can catch ``KeyboardInterrupt``. In the command's own process, and only
there, :func:`guard` makes SIGINT end the process at once with status 130 until
:func:`release` (called by ``main``) restores Python's default. A library import
never changes the handler: a trainer's Ctrl-C stays its own.

Importing this module guards, and ``chunktune/__init__.py`` imports it first.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from types import FrameType

__all__ = ["guard", "release"]

_COMMAND = "chunktune"
_EXIT_INTERRUPTED = 130


def _is_the_command() -> bool:
    """Whether this process is ``chunktune ...`` or ``python -m chunktune ...``."""
    argv0 = os.path.basename(sys.argv[0]) if sys.argv else ""
    if argv0 in (_COMMAND, f"{_COMMAND}.exe", f"{_COMMAND}-script.py"):
        return True
    orig = list(getattr(sys, "orig_argv", ()))
    if f"-m{_COMMAND}" in orig:
        return True
    return "-m" in orig and orig[orig.index("-m") + 1 :][:1] == [_COMMAND]


def _exit_interrupted(signum: int, frame: FrameType | None) -> None:
    # nothing is written yet and nothing needs cleaning up: leave at once
    os._exit(_EXIT_INTERRUPTED)


def guard() -> None:
    """In the command's process, make Ctrl-C exit 130 quietly until :func:`release`."""
    if (
        threading.current_thread() is threading.main_thread()
        and signal.getsignal(signal.SIGINT) is signal.default_int_handler
        and _is_the_command()
    ):
        signal.signal(signal.SIGINT, _exit_interrupted)


def release() -> None:
    """Restore Python's default SIGINT handling (``KeyboardInterrupt``) if :func:`guard` set it."""
    if (
        threading.current_thread() is threading.main_thread()
        and signal.getsignal(signal.SIGINT) is _exit_interrupted
    ):
        signal.signal(signal.SIGINT, signal.default_int_handler)


guard()  # on import: before the rest of the package has started to load
