"""Where the cache lives: the default file, and a path a user names checked as one."""

from __future__ import annotations

import os
from pathlib import Path

import platformdirs

from ._errors import CacheError
from ._paths import is_path, user_path
from ._shown import shown_one

__all__ = ["checked_cache_path", "default_cache_path"]


def default_cache_path() -> Path:
    """``<user cache dir>/chunktune/cache.json`` (platformdirs)."""
    return platformdirs.user_cache_path("chunktune", appauthor=False) / "cache.json"


def checked_cache_path(path: str | os.PathLike[str]) -> Path:
    """``path`` as the cache file it names, ``~`` expanded.

    Raises:
        CacheError: ``path`` is no str or os.PathLike, is empty or only blank space,
            holds a NUL byte, or starts with a home that does not exist.
    """
    if not is_path(path):
        raise CacheError(f"cache path: {shown_one(path)} is not a str or os.PathLike")
    try:
        return user_path(os.fspath(path))
    except ValueError as exc:
        raise CacheError(f"cache path: {exc}") from None
