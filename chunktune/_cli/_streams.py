"""stdout and stderr while a ``chunktune`` command runs: a failed write to stdout is an
error, stderr that no one reads any more is dropped, and what an encoding cannot hold is
written escaped (chunktune's own punctuation in ASCII)."""

from __future__ import annotations

import codecs
import os
from typing import IO, Any, TextIO

from .._errors import OutputError

__all__ = ["Stderr", "Stdout", "StdoutFailed", "escaped"]


class StdoutFailed(OutputError):
    """The results could not be written to stdout (a full disk, a closed descriptor)."""


class Stdout:
    """``sys.stdout`` while a command runs: a failed write is a :class:`StdoutFailed`.

    A full disk or a descriptor that was never open (``>&-``) would otherwise end a
    command in a traceback, or drop its results without a word. A closed pipe stays a
    ``BrokenPipeError`` (exit 141, as for ``| head``).
    """

    def __init__(self, stream: TextIO | None) -> None:
        self.closed_at_start = stream is None
        self._stream: TextIO = open(os.devnull, "w") if stream is None else stream  # noqa: SIM115
        # kept: argparse swallows what --help raises (a closed pipe too: then 141, not 0)
        self.failure: StdoutFailed | BrokenPipeError | None = None

    def _failed(self, why: str) -> StdoutFailed:
        self.failure = StdoutFailed(f"cannot write the results to stdout: {why}")
        return self.failure

    def write(self, text: str) -> int:
        if self.closed_at_start:
            raise self._failed("it is closed")
        try:
            try:
                return self._stream.write(text)
            except UnicodeEncodeError:
                # a name this encoding cannot hold (a file name of bytes that are no UTF-8
                # under en_US.UTF-8, a Chinese one on a cp1252 console) ended the command
                # in a traceback: it is written escaped, as Python writes it to stderr
                self._stream.write(escaped(text, self._stream))
                return len(text)
        except BrokenPipeError as exc:
            self.failure = exc
            raise
        except OSError as exc:
            raise self._failed(exc.strerror or str(exc)) from None

    def flush(self) -> None:
        try:
            self._stream.flush()
        except BrokenPipeError:
            raise
        except OSError as exc:
            raise self._failed(exc.strerror or str(exc)) from None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


class Stderr:
    """``sys.stderr`` while a command runs: a reader that closed it drops what follows.

    ``chunktune tune --policy nosuch 2>&1 | head -0``: the error line met a closed pipe,
    and the ``BrokenPipeError`` it raised, taken for stdout's, made the exit code 141
    instead of 2. Progress, warnings and errors are for a person; once no one reads them
    they go nowhere, as with stderr closed at start (``2>&-``), and the command goes on
    to the exit code of what it did. So do they once they cannot be written (``2>log``
    on a full disk): the first line of progress failed, and ``record`` ended, exit 1,
    before measuring anything. The descriptor itself is pointed at /dev/null, so
    what is still buffered, and a child process that inherits it, meet no closed pipe.
    """

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self.dropped = False

    def _drop(self) -> None:
        self.dropped = True
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, self._stream.fileno())
            os.close(devnull)
        except (OSError, ValueError):  # no real descriptor (captured, say): nothing to move
            pass

    def write(self, text: str) -> int:
        if not self.dropped:
            try:
                return self._stream.write(text)
            except OSError:  # a closed pipe, a full disk (2>log on it), an I/O error
                self._drop()
        return len(text)

    def flush(self) -> None:
        if not self.dropped:
            try:
                self._stream.flush()
            except OSError:
                self._drop()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


# chunktune's own punctuation, in ASCII where stdout cannot hold it (LC_ALL=C with
# PYTHONUTF8=0, a cp1252 console): `cache key` lines read "1.48 s \xb7 load ..." and
# cut names "node7.clust\u2026", as escapes of what was never a name
_ASCII_PUNCTUATION = {"·": "|", "…": "...", "±": "+/-"}
_ERRORS = "chunktune-ascii-punctuation"


def _punctuation_in_ascii(exc: UnicodeError) -> tuple[str | bytes, int]:
    """A codec error handler: chunktune's punctuation in ASCII, anything else escaped."""
    if not isinstance(exc, UnicodeEncodeError):
        raise exc
    plain = _ASCII_PUNCTUATION.get(exc.object[exc.start])
    if plain is None:
        return codecs.backslashreplace_errors(exc)
    return plain, exc.start + 1


codecs.register_error(_ERRORS, _punctuation_in_ascii)


def escaped(text: str, stream: IO[str]) -> str:
    """``text`` with what ``stream``'s encoding cannot hold as backslash escapes, except
    chunktune's own punctuation (``·``, ``…``, ``±``), which is written in ASCII."""
    encoding = getattr(stream, "encoding", None) or "utf-8"
    return text.encode(encoding, _ERRORS).decode(encoding)
