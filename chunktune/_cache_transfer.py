"""Whole cache files read and written as they are: what ``cache export``, ``import`` and
``merge`` move, a chunktune cache (JSON or TOML) or an older tuner's JSON cache.

The live cache a resolve reads and writes, under its locks, is ``_cache``'s
:class:`~chunktune._cache.DecisionCache`.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import BinaryIO

from ._atomic import write_atomic
from ._cache_entry import CacheEntry
from ._cache_format import CacheFormat, UnusableCache, cache_format, encode
from ._cache_parse import ParsedCache, parse_cache
from ._cache_paths import checked_cache_path
from ._errors import CacheError
from ._lock_files import make_folder
from ._reading import MAX_CACHE_BYTES, TooLarge, read_capped, read_capped_from
from ._shown import shown_file

__all__ = ["read_cache_file", "read_cache_stream", "write_cache_file"]


def read_cache_file(path: str | os.PathLike[str]) -> ParsedCache:
    """Read a chunktune cache (JSON or TOML, by suffix) or an older tuner's JSON cache.

    Returns its valid entries, the ``(key, why)`` of each entry skipped, and what
    the file was (``ParsedCache.kind``).

    Raises:
        CacheError: the file cannot be read, holds more than
            :data:`~chunktune._reading.MAX_CACHE_BYTES` (256 MiB), does not parse, is of
            the wrong shape, has a newer schema, or is neither kind of cache.
    """
    file = checked_cache_path(path)
    try:
        raw = read_capped(file, MAX_CACHE_BYTES)  # a pipe has no size to check first
        mtime = file.stat().st_mtime
    except OSError as exc:
        raise CacheError(f"cannot read {shown_file(file)}: {exc.strerror or exc}") from exc
    except TooLarge as exc:
        raise _too_large(str(file), exc) from None
    return _parsed(raw, cache_format(file), mtime=mtime, name=str(file))


def read_cache_stream(stream: BinaryIO, *, name: str) -> ParsedCache:
    """Read a JSON cache (chunktune's or the older tuner's) from ``stream``, open already.

    ``name`` says where it came from in messages (``"stdin"``). Its entries are dated,
    where the older tuner's carry no date, by the time it was read.

    Raises:
        CacheError: as :func:`read_cache_file`'s.
    """
    try:
        raw = read_capped_from(stream, MAX_CACHE_BYTES, Path(name))
    except OSError as exc:
        raise CacheError(f"cannot read {shown_file(name)}: {exc.strerror or exc}") from exc
    except TooLarge as exc:
        raise _too_large(name, exc) from None
    return _parsed(raw, "json", mtime=time.time(), name=name)


def _too_large(name: str, exc: TooLarge) -> CacheError:
    return CacheError(
        f"cannot read {shown_file(name)}: it holds more than {exc.limit}; expected a chunktune "
        "cache (about 1.6 KB an entry)"
    )


def _parsed(raw: bytes, fmt: CacheFormat, *, mtime: float, name: str) -> ParsedCache:
    try:
        return parse_cache(raw, fmt, mtime=mtime, source=name)
    except UnusableCache as exc:
        raise CacheError(f"{shown_file(name)} {exc}") from None


def write_cache_file(
    path: str | os.PathLike[str], entries: Mapping[str, CacheEntry], *, format: str = "auto"
) -> None:
    """Write ``entries`` as a cache file (format by suffix unless given), atomically.

    Raises:
        CacheError: the file cannot be written, or an entry cannot be encoded.
    """
    file = checked_cache_path(path)
    try:
        data = encode(entries, cache_format(file, format))
    except (TypeError, ValueError) as exc:
        raise CacheError(f"cannot write {shown_file(file)}: {exc}") from exc
    try:
        target = Path(os.path.realpath(file))  # a link is written through to its target
        make_folder(target.parent)  # its owner's to write, whatever the umask
        write_atomic(target, data)
    except OSError as exc:
        # named as given: /proc/self/x, not the pid it stands for; a link, not its target
        raise CacheError(f"cannot write {shown_file(file)}: {exc.strerror or exc}") from exc
