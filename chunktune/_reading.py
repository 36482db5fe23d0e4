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

__all__ = ["MAX_CACHE_BYTES", "MAX_SETTINGS_BYTES", "MAX_TRACE_BYTES", "TooLarge", "read_capped"]

# a settings file is a few KB, a recorded trace at most a few hundred KB, and a cache
# about 1.6 KB an entry (8 MB for 5000): the caps leave room for hundreds of times that
MAX_SETTINGS_BYTES = 16 * 2**20
MAX_TRACE_BYTES = 256 * 2**20
MAX_CACHE_BYTES = 256 * 2**20

_CHUNK = 2**20


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
        info = os.fstat(file.fileno())
        if stat.S_ISREG(info.st_mode) and info.st_size > cap:
            raise TooLarge(path, cap)
        chunks: list[bytes] = []
        size = 0
        while chunk := file.read(_CHUNK):
            size += len(chunk)
            if size > cap:
                raise TooLarge(path, cap)
            chunks.append(chunk)
    return b"".join(chunks)
