"""Ctrl-C where Python's own handling would not do: the command starting, a blocked loop,
and SIGTERM in the command, which ends it as Ctrl-C does.

Importing chunktune (numpy, anyio, rich, ...) takes a few tenths of a second before
``main`` can catch ``KeyboardInterrupt``. In the command's own process, and only
there, :func:`guard` makes SIGINT end the process at once with status 130 until
:func:`release` (called by ``main``) restores Python's default. A library import
never changes the handler: a trainer's Ctrl-C stays its own.

Importing this module guards, and ``chunktune/__init__.py`` imports it first.

:func:`interruptible` is for a synchronous wait on the thread of ``asyncio.run``'s
loop, whose handler only cancels a task that cannot run until the wait ends.

:class:`ClosingHold` is for a blocking call's own ``asyncio.run`` loop as it closes: a
Ctrl-C there would raise inside the loop's ``close()``, leave the loop half closed and
Python printing its ``__del__``'s error; held, it is raised once the loop is closed.

:func:`terminated_as_interrupted` is for the command's run: SIGTERM (a scheduler's time
limit, ``kill``) would end the process at once and in silence; taken as Ctrl-C, the
command stops its sweep or recording the way it does for one, says so, and exits 143.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

__all__ = [
    "EXIT_INTERRUPTED",
    "EXIT_TERMINATED",
    "ClosingHold",
    "Termination",
    "guard",
    "interruptible",
    "release",
    "terminated_as_interrupted",
]

_COMMAND = "chunktune"
# the command's exit codes for the signals, here (the first module imported) so that the
# handlers that end it while it starts and the CLI that ends it later say the same
EXIT_INTERRUPTED = 130  # Ctrl-C: what a process SIGINT killed reports
EXIT_TERMINATED = 143  # SIGTERM, handled as Ctrl-C is: what a process it killed reports


def _is_the_command() -> bool:
    """Whether this process is ``chunktune ...`` or ``python -m chunktune ...``."""
    argv0 = os.path.basename(sys.argv[0]) if sys.argv else ""
    if argv0 in (_COMMAND, f"{_COMMAND}.exe", f"{_COMMAND}-script.py"):
        return True
    return _module_run(list(getattr(sys, "orig_argv", ()))[1:]) == _COMMAND


def _module_run(options: list[str]) -> str | None:
    """The module ``python OPTIONS`` runs with ``-m``, read from the interpreter's own options
    only: a script's arguments (``python train.py -m chunktune``) name no module run."""
    args = iter(options)
    for arg in args:
        if arg in ("-", "--") or not arg.startswith("-") or arg.startswith("--"):
            return None  # the script, stdin, or a long option (none of Python's takes -m)
        for i, flag in enumerate(arg[1:], start=1):
            if flag == "m":
                return arg[i + 1 :] or next(args, None)
            if flag == "c":
                return None
            if flag in "WX":  # its value joined (-Wignore) or next: not options
                if not arg[i + 1 :]:
                    next(args, None)
                break
    return None


def _exit_interrupted(signum: int, frame: FrameType | None) -> None:
    # nothing is written yet and nothing needs cleaning up: leave at once
    os._exit(EXIT_INTERRUPTED)


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


def _asyncio_runners(handler: Callable[..., Any] | int | None) -> bool:
    """Whether ``handler`` is the one ``asyncio.Runner.run`` (``asyncio.run``) installed."""
    runner = getattr(sys.modules.get("asyncio"), "Runner", None)
    on_sigint = getattr(handler, "func", None)  # partial(runner._on_sigint, main_task=...)
    return runner is not None and isinstance(getattr(on_sigint, "__self__", None), runner)


@contextmanager
def interruptible() -> Iterator[None]:
    """Make Ctrl-C raise ``KeyboardInterrupt`` in a synchronous wait on an ``asyncio.run`` loop.

    ``asyncio.run`` (``asyncio.Runner``) sets SIGINT, only where it was Python's default,
    to cancel its main task; a task cannot take a cancel while its loop's thread waits
    in synchronous code, so Ctrl-C would end nothing until the wait did. For the block
    the handler is Python's default again, which raises here, as it would in a plain
    script; afterwards asyncio's own handler, the very object, is put back, so the
    loop's later Ctrl-C cancels its task as before and ``asyncio.run`` still
    recognises its handler when it restores the default. A handler the program set
    meanwhile (from another signal's handler) is kept. Any other handler (trio's,
    which already raises in such code, or the program's own) is left alone, and so
    is every thread but the main one, which alone sets handlers and receives SIGINT.
    """
    handler = signal.getsignal(signal.SIGINT)
    on_main = threading.current_thread() is threading.main_thread()
    if not (on_main and _asyncio_runners(handler)):
        yield
        return
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
            signal.signal(signal.SIGINT, handler)


class _Held:
    """SIGINT's handler while a loop closes: the first Ctrl-C is noted, a second raises."""

    def __init__(self) -> None:
        self.came = False

    def __call__(self, signum: int, frame: FrameType | None) -> None:
        if self.came:  # a close that hangs still gives way to a second Ctrl-C
            raise KeyboardInterrupt
        self.came = True


class ClosingHold:
    """Ctrl-C while the ``asyncio.run`` loop of a blocking call closes: held, then raised.

    ``asyncio.run`` puts Python's default handler back before it closes its loop, so a
    Ctrl-C then raises wherever the close stands: inside ``loop.close()`` it leaves the
    loop half closed (its selector open) and, when it is collected, Python prints the
    error its ``__del__`` meets ("Exception ignored in BaseEventLoop.__del__"). On the
    main thread, where asyncio's own handler is set (no other: a program's or trio's is
    left alone), :meth:`begin`, at the end of the loop's main task, holds a Ctrl-C; after
    the run, :meth:`end` puts Python's default back and raises the one held, on a loop
    closed whole.
    """

    def __init__(self) -> None:
        self._held: _Held | None = None

    def begin(self) -> None:
        """Hold Ctrl-C from here (the main task's last step) until :meth:`end`."""
        handler = signal.getsignal(signal.SIGINT)
        if threading.current_thread() is threading.main_thread() and _asyncio_runners(handler):
            self._held = _Held()
            # asyncio.run then leaves it, as a handler not its own, to end() to undo
            signal.signal(signal.SIGINT, self._held)

    def end(self, *, raise_held: bool = True) -> None:
        """Python's default handler back (asyncio's was set only over it); raise the Ctrl-C
        held unless ``raise_held`` is False (the run already raises: one interrupt is enough).

        Raises:
            KeyboardInterrupt: a Ctrl-C came while the loop closed.
        """
        held, self._held = self._held, None
        if held is None:
            return
        came = held.came
        if signal.getsignal(signal.SIGINT) is held:  # not one a program set meanwhile
            signal.signal(signal.SIGINT, signal.default_int_handler)
        if came and raise_held:
            raise KeyboardInterrupt


class Termination:
    """Whether a SIGTERM came while :func:`terminated_as_interrupted` held it."""

    def __init__(self) -> None:
        self.came = False

    def __call__(self, signum: int, frame: FrameType | None) -> None:
        """SIGTERM's handler: do what Ctrl-C does now (SIGINT's handler, whichever it is)."""
        self.came = True
        handler = signal.getsignal(signal.SIGINT)
        if handler is _exit_interrupted:  # the command still starting: nothing to stop
            os._exit(EXIT_TERMINATED)
        if callable(handler):
            # Python's KeyboardInterrupt, or asyncio.run's cancel of its main task
            handler(signal.SIGINT, frame)
        else:  # SIGINT ignored (a shell's background job): SIGTERM must still end it
            raise KeyboardInterrupt


@contextmanager
def terminated_as_interrupted() -> Iterator[Termination]:
    """For the block, on the main thread, SIGTERM does what Ctrl-C does (see
    :class:`Termination`); a handler the process already had for it is left alone."""
    termination = Termination()
    on_main = threading.current_thread() is threading.main_thread()
    if not (on_main and signal.getsignal(signal.SIGTERM) is signal.SIG_DFL):
        yield termination
        return
    signal.signal(signal.SIGTERM, termination)
    try:
        yield termination
    finally:
        if signal.getsignal(signal.SIGTERM) is termination:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)


guard()  # on import: before the rest of the package has started to load
