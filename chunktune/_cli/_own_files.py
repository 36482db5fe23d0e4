"""The files chunktune keeps (the cache, its locks, the sweep lock), refused as a command's output.

A trace, a plot or an export written over one of them would not be a write beside
chunktune's own: it would replace the live cache with a trace (every entry gone), or a
held lock's file with a new one (which the next sweep locks while the old one is still
held, so two sweeps measure at once). A merged cache may go into a cache, under its
lock, but not over a lock. Such a name is said before the command works.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from .._cache_lock import lock_path
from .._cache_paths import default_cache_path
from .._config import CACHE_ENV, SYSTEM_CACHE_ENV, load_cache_settings
from .._errors import ConfigError, OutputError
from .._lock_files import sweep_lock_path
from .._lock_note import note_path
from .._paths import user_path
from .._settings import CacheSettings
from .._shown import shown_file

__all__ = ["not_own_file"]


def not_own_file(
    path: Path,
    what: str,
    config: str | None = None,
    *,
    caches_too: bool = True,
    unknown_refused: bool = False,
) -> None:
    """Refuse ``path`` as the ``what`` (``"trace"``, ``"plot"``) when chunktune keeps that file.

    ``caches_too=False`` (a merge, which writes a cache as a cache is written) refuses
    only the locks and their notes: the cache file and the system cache may be written.

    The settings' ``[cache]`` table (``config``, else the discovered file's) names the
    cache and the system cache, read where the rest of the file is broken (a misspelled
    policy key). Where that table cannot be read (a file that is not TOML, a broken
    ``[cache]``), ``$CHUNKTUNE_CACHE`` (else the default cache) and
    ``$CHUNKTUNE_SYSTEM_CACHE`` are guarded; with ``unknown_refused`` (``record``, which
    uses no other setting and so would say nothing else), ``path`` is refused too, unless
    both variables name the caches, which then win over any the settings name.

    Raises:
        OutputError: ``path`` is the cache file, its write lock, a cache key's lock, the
            system cache or the machine's sweep lock (or a lock's holder note).
        ConfigError: ``unknown_refused``, and the settings cannot tell which caches to
            keep: one line, naming the file and its (first) problem.
    """
    kept, unknown = _kept(config)
    kind = _own_file(path, kept, caches_too=caches_too)
    if kind is not None:
        raise OutputError(
            f"cannot write the {what} {shown_file(path)}: it is {kind}, which chunktune keeps; "
            "expected the name of another file"
        )
    named = all(_path(os.environ.get(env)) for env in (CACHE_ENV, SYSTEM_CACHE_ENV))
    if unknown_refused and unknown is not None and not named:
        more = len(unknown.problems) - 1
        first = unknown.problems[0] + (f" (and {more} more)" if more else "")
        raise ConfigError(
            f"{first}; the {what} {shown_file(path)} is not written: it may be the cache "
            "these settings name (fix them, or name both caches with "
            f"${CACHE_ENV} and ${SYSTEM_CACHE_ENV})",
            source=unknown.source,
            unread=unknown.unread,
        )


def _own_file(path: Path, kept: list[tuple[str, Path]], *, caches_too: bool = True) -> str | None:
    """What chunktune keeps in ``path`` (``"the cache file /x/cache.json"``), or None."""
    target = _real(path)
    if target is None:
        return None
    for kind, file in kept:
        if (caches_too or kind not in _CACHES) and _real(file) == target:
            return f"{kind} {shown_file(file)}"
    locks = _real(kept[0][1].parent / "locks")
    if target.parent == locks and target.name.endswith((".lock", ".lock.holder")):
        return f"a cache key's lock in {shown_file(locks)}"
    return None


def _real(path: Path) -> Path | None:
    """``path`` with links and ``..`` resolved, as far as it exists; None where that
    cannot be told (a name too long, a link loop: writing it will say so)."""
    try:
        return Path(os.path.realpath(path))
    except (OSError, ValueError, RuntimeError):
        return None


_CACHE_FILE, _SYSTEM_CACHE = "the cache file", "the system cache"
_CACHES = (_CACHE_FILE, _SYSTEM_CACHE)


def _kept(config: str | None) -> tuple[list[tuple[str, Path]], ConfigError | None]:
    """The files chunktune keeps, each with what it is, the cache file first; and the
    settings' problem where they could not name the caches (None where they did)."""
    cache_settings: CacheSettings | None = None
    unknown: ConfigError | None = None
    try:
        cache_settings = load_cache_settings(config)
    except ConfigError as exc:
        unknown = exc
    if cache_settings is not None:
        named, system = cache_settings.path, cache_settings.system_path
    else:  # as the settings would have read them: the variables name the caches
        named, system = os.environ.get(CACHE_ENV), os.environ.get(SYSTEM_CACHE_ENV)
    cache = _path(named) or default_cache_path()
    kept = [(_CACHE_FILE, cache)]
    locks = ((lock_path(cache), "the cache's write lock"), (sweep_lock_path(), "the sweep lock"))
    for lock, name in locks:
        kept += [(name, lock), (f"the holder note of {name}", note_path(lock))]
    system_cache = _path(system)
    if system_cache is not None:
        kept.append((_SYSTEM_CACHE, system_cache))
    return kept, unknown


def _path(named: str | None) -> Path | None:
    """The file a setting or variable names, ``~`` expanded; None where it names none."""
    if named:
        with contextlib.suppress(ValueError):
            return user_path(named)
    return None
