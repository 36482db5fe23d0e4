"""Reading a file a user names, whole but bounded.

A settings file, a trace or a cache to import may be a pipe (``--config <(...)``,
``/dev/stdin``), so its size is not known before it is read; a device such as
``/dev/zero`` never ends. Each kind has a cap far above any real file of it, and a
read stops one chunk past the cap instead of taking every byte of memory.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import BinaryIO

__all__ = [
    "MAX_CACHE_BYTES",
    "MAX_NESTING",
    "MAX_SETTINGS_BYTES",
    "MAX_TRACE_BYTES",
    "TooLarge",
    "nests_deeper",
    "read_capped",
    "read_capped_from",
]

# a settings file is a few KB, a recorded trace at most a few hundred KB, and a cache
# about 1.6 KB an entry (8 MB for 5000): the caps leave room for hundreds of times that
MAX_SETTINGS_BYTES = 16 * 2**20
MAX_TRACE_BYTES = 256 * 2**20
MAX_CACHE_BYTES = 256 * 2**20

_CHUNK = 2**20

# Far deeper than any cache or trace (a cache entry's timings sit 4 levels down, a
# trace's calls 3), so a damaged cache entry nested a few hundred levels is still one
# skipped entry, and within what Python 3.11's json follows (about 1000 levels, less
# the caller's stack); 3.12's follows about 1500 and 3.13's about 10000. Past it a
# document is too deep on every version, not a parse error on one and a wrong field on
# another. (tomllib follows under 500 levels on all of them.)
MAX_NESTING = 500


class TooLarge(ValueError):
    """A file holds more bytes than its cap allows; ``limit`` says the cap as ``"16 MiB"``."""

    def __init__(self, path: Path, cap: int) -> None:
        self.path = path
        self.cap = cap
        self.limit = f"{cap // 2**20} MiB"
        super().__init__(f"{path} holds more than {self.limit}")


def read_capped(path: Path, cap: int) -> bytes:
    """The bytes of the file at ``path`` (a pipe or device too), at most ``cap`` of them.

    Raises:
        OSError: the file cannot be opened or read.
        TooLarge: it holds more than ``cap`` bytes (a regular file is judged by its size
            before anything is read).
    """
    with path.open("rb") as file:
        return read_capped_from(file, cap, path)


def read_capped_from(file: BinaryIO, cap: int, path: Path) -> bytes:
    """The bytes left in ``file``, opened already (stdin), at most ``cap`` of them;
    ``path`` names it in :class:`TooLarge`.

    Raises:
        OSError: it cannot be read.
        TooLarge: it holds more than ``cap`` bytes (a regular file is judged by its size
            before anything is read).
    """
    try:
        info: os.stat_result | None = os.fstat(file.fileno())
    except (OSError, ValueError):  # no descriptor (an in-memory stream): read it to see
        info = None
    if info is not None and stat.S_ISREG(info.st_mode) and info.st_size > cap:
        raise TooLarge(path, cap)
    chunks: list[bytes] = []
    size = 0
    while chunk := file.read(_CHUNK):
        size += len(chunk)
        if size > cap:
            raise TooLarge(path, cap)
        chunks.append(chunk)
    return b"".join(chunks)


def nests_deeper(doc: object, limit: int) -> bool:
    """Whether ``doc`` holds a list or table more than ``limit`` levels down (no recursion)."""
    level, depth = [doc], 0
    while level:
        if depth > limit:
            return True
        deeper: list[object] = []
        for node in level:
            values = node.values() if type(node) is dict else node if type(node) is list else ()
            deeper.extend(v for v in values if type(v) is dict or type(v) is list)
        level, depth = deeper, depth + 1
    return False
