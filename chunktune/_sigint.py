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

:class:`LoopHold` is for a blocking call's own ``asyncio.run`` loop as it opens and as it
closes: a Ctrl-C there would raise inside the loop's making or its ``close()``, leave a
loop half made or half closed (or its main task never run) and Python printing what it
cannot raise; held, it is raised once the loop is closed. Between the two, Ctrl-C cancels
the loop's main task, as ``asyncio.run``'s own handler does.

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
from contextlib import contextmanager, suppress
from types import FrameType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import asyncio

__all__ = [
    "EXIT_INTERRUPTED",
    "EXIT_TERMINATED",
    "LoopHold",
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


def _cancels_main_task(handler: Callable[..., Any] | int | None) -> bool:
    """Whether ``handler`` cancels an asyncio loop's main task: ``asyncio.run``'s own, or
    :class:`LoopHold`'s in its stead."""
    return isinstance(handler, _Cancelling) or _asyncio_runners(handler)


@contextmanager
def interruptible() -> Iterator[None]:
    """Make Ctrl-C raise ``KeyboardInterrupt`` in a synchronous wait on an ``asyncio.run`` loop.

    ``asyncio.run`` (``asyncio.Runner``) sets SIGINT, only where it was Python's default,
    to cancel its main task; a task cannot take a cancel while its loop's thread waits
    in synchronous code, so Ctrl-C would end nothing until the wait did. For the block
    the handler is Python's default again, which raises here, as it would in a plain
    script; afterwards asyncio's own handler (or :class:`LoopHold`'s, which stands in for
    it on a blocking call's own loop), the very object, is put back, so the
    loop's later Ctrl-C cancels its task as before and ``asyncio.run`` still
    recognises its handler when it restores the default. A handler the program set
    meanwhile (from another signal's handler) is kept. Any other handler (trio's,
    which already raises in such code, or the program's own) is left alone, and so
    is every thread but the main one, which alone sets handlers and receives SIGINT.
    """
    handler = signal.getsignal(signal.SIGINT)
    on_main = threading.current_thread() is threading.main_thread()
    if not (on_main and _cancels_main_task(handler)):
        yield
        return
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
            signal.signal(signal.SIGINT, handler)


class _Held:
    """SIGINT's handler while a loop opens or closes: the first Ctrl-C is noted, a second
    raises."""

    def __init__(self) -> None:
        self.came = False

    def __call__(self, signum: int, frame: FrameType | None) -> None:
        if self.came:  # a close that hangs still gives way to a second Ctrl-C
            raise KeyboardInterrupt
        self.came = True


def _nothing() -> None:
    """A callback that only wakes the loop it is scheduled on."""


class _Cancelling:
    """SIGINT's handler while a blocking call's loop runs its main task: what
    ``asyncio.run``'s own does, which :class:`LoopHold` kept from being set.

    The first Ctrl-C cancels the main task and wakes the loop (a select may be waiting
    long); a second, or one once the task is done, raises ``KeyboardInterrupt`` there.
    """

    def __init__(self, task: asyncio.Task[Any], loop: asyncio.AbstractEventLoop) -> None:
        self.came = 0
        self._task = task
        self._loop = loop

    def __call__(self, signum: int, frame: FrameType | None) -> None:
        self.came += 1
        if self.came == 1 and not self._task.done():
            self._task.cancel()
            with suppress(RuntimeError):  # a loop closed meanwhile needs no waking
                self._loop.call_soon_threadsafe(_nothing)
            return
        raise KeyboardInterrupt


class LoopHold:
    """Ctrl-C around the ``asyncio.run`` loop of a blocking call: held while the loop opens
    and while it closes, raised once it is closed; between, it cancels the main task.

    A Ctrl-C while ``asyncio.run`` makes its loop and main task raises wherever that
    stands: it can leave a loop unclosed (its selector and sockets open), a main task
    never run, or one run by the loop's shutdown after all, and Python printing what its
    ``__del__`` meets ("Exception ignored ..., unclosed event loop", "coroutine ... was
    never awaited", "Task was destroyed but it is pending"). ``asyncio.run`` puts Python's
    default handler back before it closes its loop, so a Ctrl-C then raises inside
    ``loop.close()`` as well, leaving the loop half closed.

    Only on the main thread where SIGINT has Python's default handler (where
    ``asyncio.run`` would set its own; a program's, trio's or an ignored SIGINT is left
    alone): :meth:`opening`, before the run, holds a Ctrl-C; :meth:`opened`, the main
    task's first step, sets in asyncio's stead a handler that does what its own does
    (asyncio sets none over another), or says that a Ctrl-C came, for the task to end
    at once; :meth:`closing`, its last step, holds a Ctrl-C again; after the run,
    :meth:`end` puts Python's default back and raises the one held, on a loop closed whole.
    """

    def __init__(self) -> None:
        self._held: _Held | None = None
        self._cancelling: _Cancelling | None = None

    def opening(self) -> None:
        """Hold Ctrl-C from here (before the loop is made) until :meth:`opened`."""
        on_main = threading.current_thread() is threading.main_thread()
        if on_main and signal.getsignal(signal.SIGINT) is signal.default_int_handler:
            held = _Held()
            try:
                signal.signal(signal.SIGINT, held)
            except ValueError:
                # an embedding whose thread Python takes for its main one refuses handlers
                # (gh-91880): nothing held, as asyncio.run then sets none of its own
                return
            self._held = held

    def opened(self) -> bool:
        """In the main task's first step: Ctrl-C cancels this task from here, as asyncio's
        handler would. False if a Ctrl-C came while the loop opened (it is held until
        :meth:`end`: the task should return at once, starting nothing)."""
        held = self._held
        if held is None or not _is_set(held):
            return True  # none held, or a handler the program set meanwhile
        import asyncio  # loaded by now; this module loads before everything else

        try:
            task = asyncio.current_task()
        except RuntimeError:  # no asyncio loop (a trio run): none to cancel
            task = None
        if task is None:
            if held.came:
                return False
            self._held = None
            signal.signal(signal.SIGINT, signal.default_int_handler)
            return True
        self._cancelling = _Cancelling(task, task.get_loop())
        signal.signal(signal.SIGINT, self._cancelling)
        if held.came:  # looked at once the handler is changed, so that no Ctrl-C is lost
            signal.signal(signal.SIGINT, held)
            return False
        self._held = None
        return True

    def closing(self) -> None:
        """Hold Ctrl-C from here (the main task's last step) until :meth:`end`."""
        handler = signal.getsignal(signal.SIGINT)
        if self._held is not None and handler is self._held:
            return  # held since the loop opened
        if threading.current_thread() is threading.main_thread() and _cancels_main_task(handler):
            self._held = _Held()
            # asyncio.run then leaves it, as a handler not its own, to end() to undo
            signal.signal(signal.SIGINT, self._held)

    def end(self, raised: BaseException | None = None) -> None:
        """After the run: Python's default handler back (asyncio's own is set only over it).

        ``raised`` is what the run raised, if it did: a ``KeyboardInterrupt`` is enough,
        and nothing more is raised; the ``CancelledError`` of the main task that a Ctrl-C
        cancelled is raised as the ``KeyboardInterrupt`` that ``asyncio.run`` makes of it,
        and so is a Ctrl-C that cancelled a run that returned all the same (asyncio.run
        would return, the Ctrl-C lost).

        Raises:
            KeyboardInterrupt: a Ctrl-C came while the loop opened or closed, or cancelled
                the main task.
        """
        held, self._held = self._held, None
        cancelling, self._cancelling = self._cancelling, None
        handler = signal.getsignal(signal.SIGINT)
        ours = [h for h in (held, cancelling) if h is not None]
        if any(handler is h for h in ours):  # not one a program set meanwhile
            signal.signal(signal.SIGINT, signal.default_int_handler)
        if isinstance(raised, KeyboardInterrupt):
            return
        cancelled = cancelling is not None and cancelling.came > 0
        # its CancelledError, or a run that ended as if none came (a task that took the
        # cancel for its own): the Ctrl-C is raised all the same, never lost
        if cancelled and (raised is None or _is_cancelled_error(raised)):
            raise KeyboardInterrupt from None
        if held is not None and held.came:
            raise KeyboardInterrupt


def _is_set(handler: object) -> bool:
    """Whether ``handler`` is SIGINT's handler now."""
    return signal.getsignal(signal.SIGINT) is handler


def _is_cancelled_error(exc: BaseException) -> bool:
    """Whether ``exc`` is asyncio's ``CancelledError`` (asyncio is loaded where it can be)."""
    cancelled = getattr(sys.modules.get("asyncio"), "CancelledError", None)
    return cancelled is not None and isinstance(exc, cancelled)


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
