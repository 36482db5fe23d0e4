"""Run ``python -m chunktune`` as from a shell on a terminal: stderr (and stdin, if asked)
on a pseudo-terminal, stdout on a pipe, as ``chunktune ... > out`` typed at a prompt."""

from __future__ import annotations

import fcntl
import os
import selectors
import signal
import struct
import subprocess
import sys
import termios
import threading

import attrs

# what rich reads besides TERM to decide on a terminal, its colours and its width
_RICH_VARIABLES = (
    "COLUMNS",
    "LINES",
    "NO_COLOR",
    "FORCE_COLOR",
    "FORCE_TERMINAL",
    "TTY_COMPATIBLE",
    "TTY_INTERACTIVE",
    "JUPYTER_COLUMNS",
    "JUPYTER_LINES",
)


@attrs.frozen
class OnTerminal:
    """What a command run on a terminal left: its status, its stdout, and the screen."""

    returncode: int
    stdout: str
    screen: str  # everything written to the terminal: stderr, and typed input's echo


def run_on_terminal(
    *args: str,
    term: str,
    columns: int = 100,
    stdin_tty: bool = False,
    typed: bytes = b"",
    typed_after: str = "",
    interrupt_after: str = "",
    timeout: float = 60,
) -> OnTerminal:
    """``python -m chunktune ARGS`` with stderr on a terminal of ``columns`` named ``term``.

    ``stdin_tty``: stdin is that terminal too, and ``typed`` is typed on it once the
    screen shows ``typed_after`` (at once if empty: the terminal holds it until the
    command reads a line); else stdin is /dev/null. ``interrupt_after``: the command gets
    SIGINT (Ctrl-C) once the screen shows it. A command silent for ``timeout`` seconds
    is killed.
    """
    env = {k: v for k, v in os.environ.items() if k not in _RICH_VARIABLES}
    env["TERM"] = term
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, columns, 0, 0))
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "chunktune", *args],
            stdin=slave if stdin_tty else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=slave,
            env=env,
            # a shell may start background jobs with SIGINT ignored; Ctrl-C must reach it
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )
    finally:
        os.close(slave)
    out = bytearray()
    assert proc.stdout is not None
    stdout = proc.stdout
    reader = threading.Thread(target=lambda: out.extend(stdout.read()), daemon=True)
    reader.start()
    screen = bytearray()
    pending = typed
    try:
        with selectors.DefaultSelector() as selector:
            selector.register(master, selectors.EVENT_READ)
            if pending and not typed_after:
                os.write(master, pending)
                pending = b""
            while selector.select(timeout):
                try:
                    chunk = os.read(master, 65536)
                except OSError:  # EIO: every holder of the terminal's other end closed it
                    break
                if not chunk:
                    break
                screen.extend(chunk)
                if pending and typed_after.encode() in screen:
                    os.write(master, pending)
                    pending = b""
                if interrupt_after and interrupt_after.encode() in screen:
                    proc.send_signal(signal.SIGINT)
                    interrupt_after = ""
            else:
                proc.kill()
        proc.wait(timeout)
        reader.join(timeout)
    finally:
        os.close(master)
        proc.stdout.close()
    return OnTerminal(
        proc.returncode,
        out.decode(errors="replace"),
        screen.decode(errors="replace").replace("\r\n", "\n"),
    )
