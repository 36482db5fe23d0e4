"""Finding and reading settings files: discovery, presets, ``extends``, validated Settings.

Turning each table into a record, and a record back into TOML, is ``_converter``'s;
this module decides which file is read, reads it within its limits, flattens policy
chains and reports every problem of the file at once (at the policy each is of:
``_policy_problems``).
"""

from __future__ import annotations

import codecs
import copy
import errno
import functools
import logging
import os
import tomllib
from collections.abc import Mapping
from importlib import resources
from pathlib import Path
from typing import Any

import attrs

from ._converter import join_path, structure, suggest
from ._errors import ConfigError
from ._extends import resolve_tables
from ._idle_keys import warn_idle
from ._paths import is_path, user_path
from ._policy_problems import POLICY_KEYS, policies_of
from ._reading import MAX_SETTINGS_BYTES, TooLarge, read_capped
from ._settings import (
    DEFAULT_POLICY,
    CacheSettings,
    LogSettings,
    RaySettings,
    Settings,
    policy_name_problem,
    unknown_policy,
)
from ._shorthand import expand_candidates
from ._shown import shown_one, shown_path, spelled, type_named

__all__ = [
    "CACHE_ENV",
    "CONFIG_ENV",
    "SYSTEM_CACHE_ENV",
    "VARIABLES",
    "discover_config",
    "find_config",
    "load_cache_settings",
    "load_discovered",
    "load_settings",
    "preset_names",
    "preset_tables",
    "settings_from_dict",
]

logger = logging.getLogger("chunktune")

CONFIG_ENV = "CHUNKTUNE_CONFIG"
CACHE_ENV = "CHUNKTUNE_CACHE"
SYSTEM_CACHE_ENV = "CHUNKTUNE_SYSTEM_CACHE"
VARIABLES = (CONFIG_ENV, CACHE_ENV, SYSTEM_CACHE_ENV)  # every variable that settings heed
TOP_LEVEL_KEYS = ("policy", "cache", "log", "ray", "policies")
# [policies.NAME.candidates] sizes = [...] nests 4 deep; anything far deeper is no
# setting, and refusing it up front keeps every later step clear of recursion limits
MAX_DEPTH = 8

# ---------------------------------------------------------------- presets


def _preset_dir() -> Path:
    packaged = resources.files("chunktune").joinpath("_presets")
    if packaged.is_dir():
        return Path(str(packaged))
    return Path(__file__).resolve().parent.parent / "policies"


def _read_toml(path: Path) -> dict[str, Any]:
    """The parsed file.

    Raises:
        ConfigError: it is missing or unreadable, holds more than
            :data:`~chunktune._reading.MAX_SETTINGS_BYTES` (16 MiB), is not UTF-8, not
            TOML, or nested beyond what the parser can follow.
    """
    try:
        raw = read_capped(path, MAX_SETTINGS_BYTES)  # `--config <(...)` has no size to check
        return tomllib.loads(raw.decode())
    except FileNotFoundError:
        if path.is_symlink():  # "not found" of a name that ls lists misled
            raise ConfigError(
                f"it is a link to {os.readlink(path)}, which does not exist; expected a TOML file",
                source=str(path),
                unread=True,
            ) from None
        raise ConfigError("it does not exist", source=str(path), unread=True) from None
    except TooLarge as exc:
        raise ConfigError(
            f"it holds more than {exc.limit}; expected a TOML settings file (a few KB)",
            source=str(path),
            unread=True,
        ) from None
    except tomllib.TOMLDecodeError as exc:
        if raw.startswith(codecs.BOM_UTF8):  # some Windows editors write one; TOML has none
            raise ConfigError(
                "TOML syntax error: the file starts with a UTF-8 byte-order mark (BOM); "
                "expected plain UTF-8 (save it without the BOM)",
                source=str(path),
            ) from None
        raise ConfigError(f"TOML syntax error: {exc}", source=str(path)) from None
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"not UTF-8 text (byte {exc.start}: {exc.reason}); a settings file is TOML",
            source=str(path),
        ) from None
    except RecursionError:
        raise ConfigError(
            f"nested too deeply to parse; no setting nests more than {MAX_DEPTH} levels",
            source=str(path),
        ) from None
    except IsADirectoryError:
        raise ConfigError(
            "it is a directory; expected a TOML file", source=str(path), unread=True
        ) from None
    except OSError as exc:  # the path again, and Python's [Errno N], said nothing more
        why = exc.strerror or type_named(exc)
        error = ConfigError(f"cannot read it: {why}", source=str(path), unread=True)
        if exc.errno in (errno.EMFILE, errno.ENFILE):
            # the process's file descriptors, not the file, are at fault: a resolve finds
            # the cause (chunktune._failures.spent) and keeps the native chunk
            raise error from exc
        raise error from None
    except ValueError as exc:  # a NUL byte in the name
        why = "its name holds a NUL byte, which no path can" if "\0" in str(path) else str(exc)
        raise ConfigError(
            f"cannot read it: {why}; expected a file name", source=str(path), unread=True
        ) from None


@functools.cache
def _parsed_presets() -> dict[str, dict[str, Any]]:
    # installed files: read once per process, not on every resolve. Listed by iterdir, which
    # raises what the listing meets (descriptors spent, say), where Python 3.13's glob
    # swallows it: no presets at all would read "no policies are defined"
    files = sorted(f for f in _preset_dir().iterdir() if f.suffix == ".toml")
    return {file.stem: _read_toml(file) for file in files}


def preset_tables() -> dict[str, dict[str, Any]]:
    """Each shipped preset's table as its file in ``policies/`` writes it, by name: a copy
    of its own, for the caller to change."""
    return copy.deepcopy(_parsed_presets())


def preset_names() -> list[str]:
    """The names of the shipped presets (``quick``, ``balanced``, ...)."""
    return sorted(preset_tables())


def _too_deep(data: Mapping[str, Any]) -> str | None:
    """The path of a value nested deeper than any setting (walked without recursion), or None."""
    stack: list[tuple[Any, str, int]] = [(data, "", 0)]
    while stack:
        value, path, depth = stack.pop()
        if depth > MAX_DEPTH:
            return path
        items = value.items() if isinstance(value, Mapping) else enumerate(value)
        for key, item in items:
            if isinstance(item, dict | list):
                stack.append((item, join_path(path, key), depth + 1))
    return None


# ---------------------------------------------------------------- loading


def find_config(path: str | os.PathLike[str] | None = None) -> Path | None:
    """The settings file to read: ``path``, then ``$CHUNKTUNE_CONFIG``, then ``./chunktune.toml``.

    Returns None when none applies (built-in defaults). An explicit path or
    environment variable naming a missing file is an error, not a fallback.

    Raises:
        ConfigError: ``path`` is not a str or ``os.PathLike``, or is empty.
    """
    if path is not None:
        if not is_path(path):
            raise ConfigError(
                f"{shown_one(path)} is not a settings file's path (a str or os.PathLike)"
            )
        if not os.fspath(path):  # Path("") is ".", a directory: name what was given
            raise ConfigError('"" is not a settings file\'s path; expected a file name')
        return Path(path)
    return discover_config(os.environ.get(CONFIG_ENV))


def discover_config(env: str | None) -> Path | None:
    """The settings file discovery names where ``$CHUNKTUNE_CONFIG`` holds ``env``: that
    file, else ``./chunktune.toml`` if there is one (a folder or a link to nothing by that
    name too, for reading to refuse), else None (built-in defaults).

    Raises:
        ConfigError: ``env`` names the home of a user that does not exist
            (``~nosuchuser/x.toml``), or holds a NUL byte, as ``$CHUNKTUNE_CACHE`` would.
    """
    if env:
        try:  # ~ expanded, as in $CHUNKTUNE_CACHE: a service's or container's value no shell saw
            return user_path(env)
        except ValueError as exc:  # read as written, it would name a ./~nosuchuser folder
            raise ConfigError(f"${CONFIG_ENV}: {exc}") from None
    try:
        local = Path.cwd() / "chunktune.toml"
        # a folder or a link to nothing by that name is read, to say so: skipped, it left
        # the user's settings silently the defaults (a pipe is still skipped: reading one
        # blocks)
        dangling = local.is_symlink() and not local.exists()
        found = local.is_file() or local.is_dir() or dangling
    except OSError as exc:
        # a working directory removed under the process, or one that cannot be searched
        # (EACCES, EIO): no file can be read there, and raising from here failed every
        # resolve as a bug, so the defaults stand, said once per cause
        _cannot_look(exc)
        return None
    return local if found else None


_looked: set[tuple[int | None, str]] = set()


def _cannot_look(exc: OSError) -> None:
    cause = (exc.errno, exc.strerror or str(exc))
    if cause in _looked:
        return
    _looked.add(cause)
    logger.warning(
        "chunktune: cannot look for chunktune.toml in the working directory (%s); "
        "using the built-in settings",
        cause[1],
    )


def _with_variables(
    cache: CacheSettings, environ: Mapping[str, str | None]
) -> tuple[CacheSettings, list[str]]:
    """``cache`` with ``$CHUNKTUNE_CACHE`` and ``$CHUNKTUNE_SYSTEM_CACHE`` applied (an empty
    one counts as unset), and the problems of their values: the environment's, not the
    file's."""
    variables: list[str] = []
    for env in (CACHE_ENV, SYSTEM_CACHE_ENV):
        value = environ.get(env)
        if not value:
            continue
        try:
            if env == CACHE_ENV:
                cache = attrs.evolve(cache, path=value)
            else:
                cache = attrs.evolve(cache, system_path=value)
        except ConfigError as exc:
            variables.extend(f"${env}: {p}" for p in exc.problems)
    return cache, variables


def _top_level_hint(key: str, value: object) -> str:
    """What an unknown top-level ``key`` may have meant: a policy's own key belongs under a
    policy's table (a policy as ``policy show`` prints it, pasted whole, has them all at
    the top), else the nearest top-level key."""
    if key == "candidates" and isinstance(value, Mapping):  # a shorthand is a policy's field
        return "a policy's table: expected it as [policies.NAME.candidates]"
    if key in POLICY_KEYS:
        return "a policy's field: expected it under [policies.NAME]"
    return suggest(key, list(TOP_LEVEL_KEYS))


def _anchored(cache: CacheSettings, folder: Path) -> CacheSettings:
    """``cache`` with a relative ``path`` or ``system_path`` read from ``folder``: a settings
    file names its cache the same whichever folder a trainer starts in."""

    def anchored(value: str | None) -> str | None:
        if value is None or Path(value).expanduser().is_absolute():
            return value
        return str(folder / value)

    return attrs.evolve(cache, path=anchored(cache.path), system_path=anchored(cache.system_path))


def settings_from_dict(
    data: Mapping[str, Any],
    *,
    source: str | None = None,
    environ: Mapping[str, str | None] | None = None,
    folder: Path | None = None,
) -> Settings:
    """Build validated Settings from a parsed TOML document.

    ``environ``: the values of :data:`VARIABLES` to apply (None: the environment's now).
    ``folder``: where a relative ``[cache] path`` or ``system_path`` is read from (the
    settings file's folder; None: the current one, when the cache is opened).

    Raises:
        ConfigError: listing every problem found, each with its dotted TOML path.
    """
    deep = _too_deep(data)
    if deep is not None:
        raise ConfigError(
            f"{deep}: nested more than {MAX_DEPTH} levels deep; no setting nests that deep",
            source=source,
        )
    problems: list[str] = [
        f"{join_path('', key)}: unknown key; {_top_level_hint(key, value)}"
        for key, value in data.items()
        if key not in TOP_LEVEL_KEYS
    ]

    presets = preset_tables()
    user = data.get("policies", {})
    if not isinstance(user, Mapping):
        problems.append(f"policies: {spelled(user)} is not a table of policies")
        user = {}
    refused = {n: policy_name_problem(n) for n in user if isinstance(n, str)}
    for name, problem in refused.items():
        if problem is not None:  # its one problem: its own keys' paths would print it raw
            problems.append(f"{join_path('policies', name)}: {problem}")
            user = {**user, name: {}}  # what extends it or makes it active finds it
    user = expand_candidates(user)  # candidates = [3, 7] or "geometric": their tables
    tables = resolve_tables(presets, user, problems)
    policies = policies_of(tables, user, presets, problems)

    cache = structure(data.get("cache", {}), CacheSettings, "cache", problems)
    log = structure(data.get("log", {}), LogSettings, "log", problems)
    ray = structure(data.get("ray", {}), RaySettings, "ray", problems)
    variables: list[str] = []
    if cache is not None:  # None: a broken [cache] table, its problems listed above
        if folder is not None:
            cache = _anchored(cache, folder)
        cache, variables = _with_variables(cache, os.environ if environ is None else environ)

    active = data.get("policy", DEFAULT_POLICY)
    if not isinstance(active, str):
        problems.append(f"policy: {spelled(active)} is not valid; expected a policy name")
    elif active not in tables and active not in user:  # a broken one's problem is listed
        problems.append(f"policy: {unknown_policy(active, set(tables) | set(user))}")

    if problems or variables:
        # a variable's problem alone is no fault of the file it was read beside
        raise ConfigError([*problems, *variables], source=source if problems else None)
    warn_idle(policies, user, presets, source)
    return Settings(
        policy=active,
        policies=policies,
        cache=cache,
        log=log,
        ray=ray,
        source=source,
        user_policies=frozenset(user),
    )


def load_settings(path: str | os.PathLike[str] | None = None) -> Settings:
    """Load the effective settings.

    Discovery order: ``path``, then ``$CHUNKTUNE_CONFIG`` (``~`` expanded; its errors
    say that the variable named the file), then ``./chunktune.toml``, then built-in
    defaults (the ``balanced`` policy). ``$CHUNKTUNE_CACHE`` overrides
    ``[cache] path`` and ``$CHUNKTUNE_SYSTEM_CACHE`` ``[cache] system_path`` (an empty
    variable counts as unset). The variables are read once, as the call begins: the file
    and caches they name then are the ones used, and a variable another thread changes
    meanwhile is the next call's.

    Raises:
        ConfigError: the file is missing (when named explicitly), unreadable, not
            UTF-8, not valid TOML (file and line given), nested deeper than any
            setting (``MAX_DEPTH``), or holds invalid settings (every problem listed
            with its TOML path; an empty ``[cache] path``, or a cache path there or
            in ``$CHUNKTUNE_CACHE`` that holds a NUL byte or names an unknown ``~user``),
            or ``$CHUNKTUNE_CONFIG`` names an unknown ``~user``.
    """
    if path is None:
        variables = {name: os.environ.get(name) for name in VARIABLES}
        return load_discovered(discover_config(variables[CONFIG_ENV]), variables)
    file = find_config(path)
    assert file is not None  # an explicit path
    return settings_from_dict(_read_toml(file), source=str(file), folder=_folder_of(file))


def load_cache_settings(path: str | os.PathLike[str] | None = None) -> CacheSettings:
    """The ``[cache]`` settings alone, found as :func:`load_settings` finds the file, and
    read whatever else the file holds: a command that keeps the cache from being written
    over needs its name where a policy's problem would refuse the whole file.

    Raises:
        ConfigError: the file cannot be read or is not TOML (as :func:`load_settings`
            says), its ``[cache]`` table is invalid, or a variable that names a cache is.
    """
    variables = {name: os.environ.get(name) for name in VARIABLES}
    file = discover_config(variables[CONFIG_ENV]) if path is None else find_config(path)
    if file is None:
        return settings_from_dict({}, environ=variables).cache
    try:
        data = _read_toml(file)
    except ConfigError as exc:
        if path is None:
            raise _named_by_variable(exc, file, variables) from exc.__cause__
        raise
    problems: list[str] = []
    cache = structure(data.get("cache", {}), CacheSettings, "cache", problems)
    if cache is None:
        error = ConfigError(problems, source=str(file))
        raise error if path is not None else _named_by_variable(error, file, variables)
    cache, bad = _with_variables(_anchored(cache, _folder_of(file)), variables)
    if bad:
        raise ConfigError(bad)
    return cache


def _folder_of(file: Path) -> Path:
    """The folder of a settings file, whole: what its relative cache paths are read from."""
    return Path(os.path.abspath(file)).parent


def load_discovered(file: Path | None, variables: Mapping[str, str | None]) -> Settings:
    """``load_settings()`` of what discovery found: ``file`` (None: built-in defaults), under
    ``variables`` (the values of :data:`VARIABLES` that found it), read as they were then.

    Raises:
        ConfigError: as :func:`load_settings`.
    """
    if file is None:
        return settings_from_dict({}, source=None, environ=variables)
    try:
        return settings_from_dict(
            _read_toml(file), source=str(file), environ=variables, folder=_folder_of(file)
        )
    except ConfigError as exc:
        # from the cause: None, or the spent descriptors a resolve looks for
        raise _named_by_variable(exc, file, variables) from exc.__cause__


def _named_by_variable(
    exc: ConfigError, file: Path, variables: Mapping[str, str | None]
) -> ConfigError:
    """``exc``, the problem of discovered ``file``, saying that ``$CHUNKTUNE_CONFIG`` named
    the file where it did: a variable set long ago (a shell profile, a job script) names a
    file the command never mentioned."""
    if not variables.get(CONFIG_ENV) or exc.source != str(file):
        return exc
    return ConfigError(
        exc.problems,
        source=f"{shown_path(str(file))} (named by ${CONFIG_ENV})",
        unread=exc.unread,
    )
