"""The settings a resolve discovers (``settings=None``), parsed again only when they change.

:func:`chunktune.load_settings` reads and validates the settings file and every policy on
each call (about 0.4 ms here), and a new Settings object is never the one a moment ago,
so a trainer that resolves with ``settings=None`` paid that on every cache hit and never
had a repeat answered from memory (``_recent`` keys on the settings object). A resolve
now gets the same Settings object while the file discovery names, its identity on disk
and the variables that discovery heeds are unchanged: a changed or replaced file, or a
new ``$CHUNKTUNE_CONFIG``, ``$CHUNKTUNE_CACHE`` or ``$CHUNKTUNE_SYSTEM_CACHE``, is read
afresh on the next resolve. A file changed less than :data:`~chunktune._settled.SETTLED_S`
before it was looked at is parsed on every call until it has settled: a file system
stamps changes from a coarse clock (:mod:`chunktune._settled`), so a rewrite of the same
size within one tick keeps every field of its stat. Blocking (a stat): call it off the
event loop.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from time import time_ns

from ._config import CONFIG_ENV, VARIABLES, discover_config, load_discovered
from ._settings import Settings
from ._settled import changed_lately, identity

__all__ = ["SETTINGS_THREAD", "discovered_settings", "remembered_settings"]

SETTINGS_THREAD = "chunktune settings"  # a settings file read under a given Policy's limit

_Identity = tuple[object, ...]
_seen: tuple[_Identity, Settings] | None = None
_lock = threading.Lock()


def _reset_in_child() -> None:
    global _lock  # a parent's thread may have held it at the fork
    _lock = threading.Lock()


os.register_at_fork(after_in_child=_reset_in_child)


def _identity(file: Path | None, variables: _Identity) -> _Identity | None:
    """What discovery found: ``file`` (absolute, or None) and the ``variables`` it was found
    by; None where only reading the file can say (an error) or where a change within the
    file system's clock tick could keep its identity (changed lately).
    """
    now = time_ns()  # before the stat: a change after it is stamped later than this tick
    if file is None:
        return (None, variables)
    try:
        st = Path(file).stat()
    except (OSError, ValueError):
        return None  # missing or unreadable: load_settings says how, every time
    if changed_lately(st.st_mtime_ns, st.st_ctime_ns, now):
        return None  # racy (as git calls it): a same-size rewrite now may keep the stamps
    return (str(file), identity(st), variables)


def _discovery() -> tuple[Path | None, dict[str, str | None], _Identity | None]:
    """The file discovery names, the variables it heeds, and their identity (a stat)."""
    # one look at the variables and the working directory: the file and values read are
    # the ones identified, whatever another thread sets (and sets back) meanwhile
    variables = {name: os.environ.get(name) for name in VARIABLES}
    file = discover_config(variables[CONFIG_ENV])
    file = None if file is None else file.absolute()
    return file, variables, _identity(file, tuple(variables.values()))


def _remembered(ident: _Identity | None) -> Settings | None:
    """The Settings last read under ``ident``, if any."""
    seen = _seen
    return seen[1] if ident is not None and seen is not None and seen[0] == ident else None


def remembered_settings() -> Settings | None:
    """What :func:`discovered_settings` would return without reading a file (its file and
    the variables unchanged since it was last read); None where it would read one.

    Blocking (a stat, never an open): a settings file that does not answer when read (a
    named pipe) answers this at once.

    Raises:
        ConfigError: ``$CHUNKTUNE_CONFIG`` names the home of a user that does not exist.
    """
    return _remembered(_discovery()[2])


def discovered_settings() -> Settings:
    """``load_settings()``, the same object while its file and variables are unchanged.

    Raises:
        ConfigError: as :func:`chunktune.load_settings` (a bad file is read, and
            reported, on every call).
    """
    global _seen
    file, variables, ident = _discovery()
    known = _remembered(ident)
    if known is not None:
        return known
    settings = load_discovered(file, variables)
    if ident is not None and ident == _identity(file, tuple(variables.values())):
        # not changed while it was read
        with _lock:
            _seen = (ident, settings)
    return settings
