"""Loading, merging and dumping settings: TOML in, validated records out.

One cattrs converter, configured to forbid unknown keys and to accept no
silent coercion (``"3"`` is not an int, ``true`` is not a number), structures
every table; each field's own attrs validator runs as it is structured, so a
file's problems are all reported at once, each with its dotted TOML path.
"""

from __future__ import annotations

import codecs
import copy
import difflib
import functools
import os
import tomllib
from collections.abc import Mapping
from importlib import resources
from pathlib import Path
from typing import Any, Literal, get_origin

import attrs
import cattrs
import tomli_w
from cattrs.gen import make_dict_structure_fn, make_dict_unstructure_fn, override

from ._candidates import STRATEGIES, CandidateStrategy, ExplicitCandidates
from ._errors import ConfigError
from ._extends import resolve_tables
from ._reading import MAX_SETTINGS_BYTES, TooLarge, read_capped
from ._settings import (
    DEFAULT_POLICY,
    CacheSettings,
    LogSettings,
    Policy,
    RaySettings,
    Settings,
    unknown_policy,
)
from ._validators import is_path, shown, spelled

__all__ = [
    "CACHE_ENV",
    "CONFIG_ENV",
    "SYSTEM_CACHE_ENV",
    "VARIABLES",
    "discover_config",
    "dump_policy",
    "dump_settings",
    "find_config",
    "load_discovered",
    "load_settings",
    "preset_names",
    "settings_from_dict",
    "unstructure_policy",
]

CONFIG_ENV = "CHUNKTUNE_CONFIG"
CACHE_ENV = "CHUNKTUNE_CACHE"
SYSTEM_CACHE_ENV = "CHUNKTUNE_SYSTEM_CACHE"
VARIABLES = (CONFIG_ENV, CACHE_ENV, SYSTEM_CACHE_ENV)  # every variable that settings heed
TOP_LEVEL_KEYS = ("policy", "cache", "log", "ray", "policies")
# [policies.NAME.candidates] sizes = [...] nests 4 deep; anything far deeper is no
# setting, and refusing it up front keeps every later step clear of recursion limits
MAX_DEPTH = 8


# ---------------------------------------------------------------- the converter


def _strict_float(value: Any, _t: type) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{spelled(value)} is not a number")
    try:
        return float(value)
    except OverflowError:  # an integer of hundreds of digits
        raise ValueError(f"{spelled(value)} is not a finite number") from None


def _strict_int(value: Any, _t: type) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{spelled(value)} is not an integer")
    return value


def _strict_str(value: Any, _t: type) -> str:
    if not isinstance(value, str):
        raise ValueError(f"{spelled(value)} is not a string")
    return value


def _strict_bool(value: Any, _t: type) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"{spelled(value)} is not true or false")
    return value


def _tables_only(structure_fn: Any) -> Any:
    """``structure_fn`` of a settings table, refusing a value that is no table first."""

    def structure(value: Any, cls: type) -> Any:
        if not isinstance(value, Mapping):
            raise ValueError(f"{spelled(value)} is not a table")
        return structure_fn(value, cls)

    return structure


def _make_converter() -> cattrs.Converter:
    # what cattrs.preconf.tomllib configures that settings use (tuples out as arrays),
    # on a plain Converter: that preconf exists only from cattrs 26.1
    conv = cattrs.Converter(forbid_extra_keys=True, unstruct_collection_overrides={tuple: list})
    conv.register_structure_hook(float, _strict_float)
    conv.register_structure_hook(int, _strict_int)
    conv.register_structure_hook(str, _strict_str)
    conv.register_structure_hook(bool, _strict_bool)
    conv.register_structure_hook(float | None, lambda v, _t: _strict_float(v, float))
    conv.register_structure_hook(str | None, lambda v, _t: _strict_str(v, str))

    def _validated(cls: type, field: attrs.Attribute[Any]) -> Any:
        structure_type: Any = field.type
        if cls is Policy and field.name == "candidates":
            structure_type = CandidateStrategy
        elif cls is ExplicitCandidates and field.name == "sizes":
            structure_type = Any  # its validator names every bad size, not the first
        elif get_origin(structure_type) is Literal:
            structure_type = str  # the field's choice() validator names the options

        def hook(value: Any, _t: Any) -> Any:
            result = conv.structure(value, structure_type)
            if field.converter is not None and callable(field.converter):
                result = field.converter(result)
            if field.validator is not None:
                try:
                    field.validator(None, field, result)
                except ConfigError:
                    if type(value) is int and type(result) is float:
                        # the message spells the number as the file does: 0, not 0.0
                        field.validator(None, field, value)
                    raise
            return result

        return hook

    for cls in (Policy, CacheSettings, LogSettings, RaySettings, *STRATEGIES.values()):
        attrs.resolve_types(cls)
        fields = attrs.fields(cls)
        overrides = {f.name: override(struct_hook=_validated(cls, f)) for f in fields}
        structure_fn: Any = make_dict_structure_fn(
            cls,
            conv,
            _cattrs_forbid_extra_keys=True,
            **overrides,  # type: ignore[arg-type]
        )
        conv.register_structure_hook(cls, _tables_only(structure_fn))

    def _structure_strategy(value: Any, _t: Any) -> CandidateStrategy:
        if not isinstance(value, Mapping):
            raise ValueError(f"{spelled(value)} is not a table with a strategy key")
        name = value.get("strategy")
        known = ", ".join(spelled(s) for s in STRATEGIES)
        if name is None:
            # without extends there is no strategy to keep: a bare cap would read as None
            raise ValueError(
                f"missing required key strategy; expected one of {known} (a policy that "
                "extends another keeps its strategy, and may then leave it out)"
            )
        if not isinstance(name, str) or name not in STRATEGIES:  # a list is not hashable
            raise ValueError(f"strategy {spelled(name)} is not known; expected one of {known}")
        rest = {k: v for k, v in value.items() if k != "strategy"}
        return conv.structure(rest, STRATEGIES[name])

    def _tagged(cls: type[Any]) -> Any:
        plain = make_dict_unstructure_fn(cls, conv)
        return lambda value: {"strategy": cls.strategy, **plain(value)}

    conv.register_structure_hook(CandidateStrategy, _structure_strategy)
    for strategy_cls in STRATEGIES.values():
        conv.register_unstructure_hook(strategy_cls, _tagged(strategy_cls))
    return conv


_CONVERTER = _make_converter()

# ---------------------------------------------------------------- errors


def _suggest(key: str, valid: list[str]) -> str:
    close = difflib.get_close_matches(key, valid, n=1)
    if close:
        return f"did you mean {close[0]}?"
    return f"expected one of {', '.join(valid)}"


def _join(path: str, part: object) -> str:
    return f"{path}.{part}" if path else str(part)


def _problems(exc: BaseException, path: str) -> list[str]:
    """Flatten a cattrs validation error tree into ``"dotted.path: message"`` lines."""
    if isinstance(exc, cattrs.ForbiddenExtraKeysError):
        valid = [f.name for f in attrs.fields(exc.cl)] if exc.cl is not None else []
        unknown = "unknown key"
        strategy = getattr(exc.cl, "strategy", None)
        if isinstance(strategy, str):  # a [candidates] table, its strategy key taken out
            valid.insert(0, "strategy")
            unknown = f"unknown key for strategy {spelled(strategy)}"
        return [
            f"{_join(path, key)}: {unknown}; {_suggest(key, valid)}"
            for key in sorted(exc.extra_fields)
        ]
    if isinstance(exc, cattrs.ClassValidationError | cattrs.IterableValidationError):
        found: list[str] = []
        with_notes, without_notes = exc.group_exceptions()
        for sub, note in with_notes:
            part = getattr(note, "name", None)
            if part is None:
                part = getattr(note, "index", "?")
            found.extend(_problems(sub, _join(path, part)))
        for sub in without_notes:
            found.extend(_problems(sub, path))
        return found
    if isinstance(exc, KeyError):
        return [f"{path}: missing required key {exc.args[0]!s}"]
    if isinstance(exc, ConfigError):  # a validator's: its own lines, not its rendering
        return [f"{path}: {p}" if path else p for p in exc.problems]
    message = str(exc) or type(exc).__name__
    return [f"{path}: {message}" if path else message]


def _user_parent(name: str, user: Mapping[str, Any]) -> str | None:
    """The user policy that policy ``name`` extends, if it extends one (not a preset)."""
    table = user.get(name)
    parent = table.get("extends") if isinstance(table, Mapping) else None
    return parent if isinstance(parent, str) and parent != name and parent in user else None


def _sets(table: Any, problem: str) -> bool:
    """Whether a policy's own table sets the key a problem (its path past the policy's) is at.

    A problem at a key the policy only inherits is its parent's, reported there: the
    key is nowhere under this policy's name in the file.
    """
    if not problem.startswith("."):
        return False  # a rule between fields: its parent breaks it too, and says so
    for key in problem[1:].split(":", 1)[0].split("."):
        if not isinstance(table, Mapping) or key not in table:
            return False
        table = table[key]
    return True


def _structure(data: Any, cls: type[Any], path: str, problems: list[str]) -> Any:
    try:
        return _CONVERTER.structure(data, cls)
    except Exception as exc:  # cattrs wraps every failure; we report, never re-raise here
        problems.extend(_problems(exc, path))
        return None


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
        raise ConfigError(f"settings file not found: {path}", source=str(path)) from None
    except TooLarge as exc:
        raise ConfigError(
            f"settings file {path} holds more than {exc.limit}; expected a TOML settings "
            "file (a few KB)",
            source=str(path),
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
            f"settings file {path} is a directory; expected a TOML file", source=str(path)
        ) from None
    except OSError as exc:  # the path again, and Python's [Errno N], said nothing more
        why = exc.strerror or type(exc).__name__
        raise ConfigError(f"cannot read settings file {path}: {why}", source=str(path)) from None
    except ValueError as exc:  # a NUL byte in the name
        raise ConfigError(f"cannot read settings file: {exc}", source=str(path)) from None


@functools.cache
def _parsed_presets() -> dict[str, dict[str, Any]]:
    # installed files: read once per process, not on every resolve
    return {file.stem: _read_toml(file) for file in sorted(_preset_dir().glob("*.toml"))}


def _preset_tables() -> dict[str, dict[str, Any]]:
    return copy.deepcopy(_parsed_presets())


def preset_names() -> list[str]:
    """The names of the shipped presets (``quick``, ``balanced``, ...)."""
    return sorted(_preset_tables())


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
                stack.append((item, _join(path, key), depth + 1))
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
            raise ConfigError(f"{shown(path)} is not a settings file's path (a str or os.PathLike)")
        if not os.fspath(path):  # Path("") is ".", a directory: name what was given
            raise ConfigError('"" is not a settings file\'s path; expected a file name')
        return Path(path)
    return discover_config(os.environ.get(CONFIG_ENV))


def discover_config(env: str | None) -> Path | None:
    """The settings file discovery names where ``$CHUNKTUNE_CONFIG`` holds ``env``: that
    file, else ``./chunktune.toml`` if there is one, else None (built-in defaults)."""
    if env:
        try:  # ~ expanded, as in $CHUNKTUNE_CACHE: a service's or container's value no shell saw
            return Path(env).expanduser()
        except RuntimeError:  # no such user's home: the path as written, reported missing
            return Path(env)
    local = Path.cwd() / "chunktune.toml"
    return local if local.is_file() else None


def settings_from_dict(
    data: Mapping[str, Any],
    *,
    source: str | None = None,
    environ: Mapping[str, str | None] | None = None,
) -> Settings:
    """Build validated Settings from a parsed TOML document.

    ``environ``: the values of :data:`VARIABLES` to apply (None: the environment's now).

    Raises:
        ConfigError: listing every problem found, each with its dotted TOML path.
    """
    deep = _too_deep(data)
    if deep is not None:
        raise ConfigError(
            f"{deep}: nested more than {MAX_DEPTH} levels deep; no setting nests that deep",
            source=source,
        )
    problems: list[str] = []
    for key in data:
        if key not in TOP_LEVEL_KEYS:
            problems.append(f"{key}: unknown key; {_suggest(key, list(TOP_LEVEL_KEYS))}")

    presets = _preset_tables()
    user = data.get("policies", {})
    if not isinstance(user, Mapping):
        problems.append(f"policies: {spelled(user)} is not a table of policies")
        user = {}
    tables = resolve_tables(presets, user, problems)
    policies: dict[str, Policy] = {}
    found: dict[str, list[str]] = {}  # each policy's problems, past its own path
    for name, table in tables.items():
        layer = "policies" if name in user else "presets"
        own: list[str] = []
        pol = _structure(table, Policy, f"{layer}.{name}", own)
        found[name] = [p[len(f"{layer}.{name}") :] for p in own]
        if pol is not None:
            policies[name] = pol
    for name in tables:
        layer = "policies" if name in user else "presets"
        inherited = set(found.get(_user_parent(name, user) or "", ()))
        problems.extend(
            f"{layer}.{name}{p}"
            for p in found[name]
            if p not in inherited or _sets(user.get(name), p)
        )

    cache = _structure(data.get("cache", {}), CacheSettings, "cache", problems)
    log = _structure(data.get("log", {}), LogSettings, "log", problems)
    ray = _structure(data.get("ray", {}), RaySettings, "ray", problems)

    variables: list[str] = []  # problems of the environment, not of the file
    for env, field in ((CACHE_ENV, "path"), (SYSTEM_CACHE_ENV, "system_path")):
        value = (os.environ if environ is None else environ).get(env)
        if value and cache is not None:
            try:
                cache = attrs.evolve(cache, **{field: value})
            except ConfigError as exc:
                variables.extend(f"${env}: {p}" for p in exc.problems)

    active = data.get("policy", DEFAULT_POLICY)
    if not isinstance(active, str):
        problems.append(f"policy: {spelled(active)} is not valid; expected a policy name")
    elif active not in tables and active not in user:  # a broken one's problem is listed
        problems.append(f"policy: {unknown_policy(active, set(tables) | set(user))}")

    if problems or variables:
        # a variable's problem alone is no fault of the file it was read beside
        raise ConfigError([*problems, *variables], source=source if problems else None)
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
    variable counts as unset).

    Raises:
        ConfigError: the file is missing (when named explicitly), unreadable, not
            UTF-8, not valid TOML (file and line given), nested deeper than any
            setting (``MAX_DEPTH``), or holds invalid settings (every problem listed
            with its TOML path; an empty ``[cache] path``, or a cache path there or
            in ``$CHUNKTUNE_CACHE`` that holds a NUL byte or names an unknown ``~user``).
    """
    if path is None:
        variables = {name: os.environ.get(name) for name in VARIABLES}
        return load_discovered(discover_config(variables[CONFIG_ENV]), variables)
    file = find_config(path)
    assert file is not None  # an explicit path
    return settings_from_dict(_read_toml(file), source=str(file))


def load_discovered(file: Path | None, variables: Mapping[str, str | None]) -> Settings:
    """``load_settings()`` of what discovery found: ``file`` (None: built-in defaults), under
    ``variables`` (the values of :data:`VARIABLES` that found it), read as they were then.

    Raises:
        ConfigError: as :func:`load_settings`.
    """
    if file is None:
        return settings_from_dict({}, source=None, environ=variables)
    try:
        return settings_from_dict(_read_toml(file), source=str(file), environ=variables)
    except ConfigError as exc:
        if not variables.get(CONFIG_ENV) or exc.source != str(file):
            raise
        # a variable set long ago (a shell profile, a job script) names a file the
        # command never mentioned: say where that name came from
        raise ConfigError(exc.problems, source=f"{file} (named by ${CONFIG_ENV})") from None


# ---------------------------------------------------------------- dumping


def _drop_none(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _drop_none(v) for k, v in value.items() if v is not None}
    if isinstance(value, list | tuple):
        return [_drop_none(v) for v in value]
    return value


def unstructure_policy(policy: Policy) -> dict[str, Any]:
    """A policy as a TOML-ready table (unset optional fields left out)."""
    data: dict[str, Any] = _drop_none(_CONVERTER.unstructure(policy))
    return data


def dump_policy(policy: Policy) -> str:
    """A policy as a standalone TOML table (the format of the files in ``policies/``)."""
    return tomli_w.dumps(unstructure_policy(policy))


def dump_settings(settings: Settings) -> str:
    """Effective settings as a TOML document: every policy in full, the presets included.

    ``load_settings`` reads the document of loaded settings back equal. Settings built
    in code without every preset read back with the missing presets added.
    """
    doc: dict[str, Any] = {
        "policy": settings.policy,
        "cache": _drop_none(_CONVERTER.unstructure(settings.cache)),
        "log": _CONVERTER.unstructure(settings.log),
        "ray": _CONVERTER.unstructure(settings.ray),
        "policies": {name: unstructure_policy(p) for name, p in settings.policies.items()},
    }
    return tomli_w.dumps(doc)
