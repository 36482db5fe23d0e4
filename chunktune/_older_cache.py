"""The older tuner's cache variables, which chunktune heeds neither to read nor to write.

A job that moved the older tuner's cache with ``$UNISIM_CHUNK_SIZE_CACHE`` (or
``$UNILAB_CHUNK_SIZE_CACHE``), onto a volume that outlives its container say, would find
chunktune caching in the user cache folder instead, and measuring again in every fresh
container, without a word. The older entries cannot answer chunktune's requests (their
keys hashed too little), so the file is not read, and an older tuner still using it keeps
it as it was. The compat drop-in says so, once a process, where one of the variables is
set, the settings choose no file of chunktune's and their active policy measures (one
that never does, ``off``, never reaches the cache). Off an event loop it goes by the
settings its resolve discovered, where a stat still vouches for them: a settings file
changed within the last few seconds leaves the warning to a later call.
"""

from __future__ import annotations

import logging
import os
import threading

from ._cache_paths import default_cache_path
from ._settings import Settings
from ._shown import shown_file

__all__ = ["OLDER_CACHE_VARIABLES", "warn_of_older_cache"]

OLDER_CACHE_VARIABLES = ("UNISIM_CHUNK_SIZE_CACHE", "UNILAB_CHUNK_SIZE_CACHE")
"""The variables that named the older tuner's cache file, in the order it read them."""

logger = logging.getLogger("chunktune")
_warned = False
_lock = threading.Lock()


def warn_of_older_cache(settings: Settings | None) -> None:
    """Warn, once a process, where a variable names the older tuner's cache file while
    ``settings`` (the resolve's; None where unknown: nothing is said this time) cache in
    chunktune's default file: neither ``$CHUNKTUNE_CACHE`` nor ``[cache] path`` is set, and
    the active policy measures (a disabled one, ``off``, never reaches the cache).
    """
    global _warned
    if _warned or settings is None or not settings.cache.enabled or settings.cache.path:
        return
    if not settings.active.enabled:
        return
    named = [(name, os.environ.get(name)) for name in OLDER_CACHE_VARIABLES]
    found = next(((name, value) for name, value in named if value), None)
    if found is None:
        return
    with _lock:
        if _warned:
            return
        _warned = True
    name, value = found
    logger.warning(
        "chunktune: $%s names the older tuner's cache %s, which chunktune neither reads nor "
        "writes: it caches in %s; set $CHUNKTUNE_CACHE (or [cache] path) to choose its "
        "file, and `chunktune cache import %s` keeps the older entries' measurements (they "
        "answer no request: their keys held too little)",
        name,
        shown_file(value),
        shown_file(default_cache_path()),
        shown_file(value),
    )
