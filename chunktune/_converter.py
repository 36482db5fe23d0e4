"""Settings records to and from TOML tables: one strict converter, its failures as paths.

One cattrs converter, configured to forbid unknown keys and to accept no
silent coercion (``"3"`` is not an int, ``true`` is not a number), structures
every table; each field's own attrs validator runs as it is structured, so a
file's problems are all reported at once, each with its dotted TOML path.
Finding, reading and merging the files is ``_config``'s.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping
from typing import Any, Literal, get_origin

import attrs
import cattrs
import tomli_w
from cattrs.gen import make_dict_structure_fn, make_dict_unstructure_fn, override

from ._candidates import STRATEGIES, CandidateStrategy, ExplicitCandidates
from ._errors import ConfigError, InvalidArgumentError
from ._named import UNREAD, told
from ._policy import Policy, given_policy
from ._settings import CacheSettings, LogSettings, RaySettings, Settings
from ._shown import shown_one, spelled, toml_key, type_named
from ._validators import one_of, percent_of

__all__ = [
    "Problem",
    "dump_policy",
    "dump_settings",
    "join_path",
    "problem_line",
    "structure",
    "structure_problems",
    "suggest",
    "unstructure_policy",
]


# ---------------------------------------------------------------- the converter


class _Refused(ValueError):
    """A value a hook of this module's refused: its message is chunktune's own, each value
    in it spelled (escaped, bounded) already, and a problem line keeps it whole."""


class _AtKey(_Refused):
    """A problem at ``key`` of the table being structured: its path names the key."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(message)
        self.key = key


def _strict_float(value: object, _t: type) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _Refused(f"{spelled(value)} is not a number")
    try:
        return float(value)
    except OverflowError:  # an integer of hundreds of digits
        raise _Refused(f"{spelled(value)} is not a finite number") from None


def _strict_int(value: object, _t: type) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise _Refused(f"{spelled(value)} is not an integer")
    return value


def _strict_str(value: object, _t: type) -> str:
    if not isinstance(value, str):
        raise _Refused(f"{spelled(value)} is not a string")
    return value


def _strict_bool(value: object, _t: type) -> bool:
    if not isinstance(value, bool):
        raise _Refused(f"{spelled(value)} is not true or false")
    return value


def _tables_only(
    structure_fn: Callable[[Mapping[str, Any], type], object],
) -> Callable[[object, type], object]:
    """``structure_fn`` of a settings table, refusing a value that is no table first."""

    def structure(value: object, cls: type) -> object:
        if not isinstance(value, Mapping):
            raise _Refused(f"{spelled(value)} is not a table")
        return structure_fn(value, cls)

    return structure


def _field_hook(
    conv: cattrs.Converter, cls: type, field: attrs.Attribute[Any]
) -> Callable[[Any, Any], Any]:
    """Structure one field of ``cls`` and run its own converter and validator on the result."""
    structure_type: Any = field.type
    if cls is Policy and field.name == "candidates":
        structure_type = CandidateStrategy
    elif cls is ExplicitCandidates and field.name == "sizes":
        structure_type = Any  # its validator names every bad size, not the first
    elif get_origin(structure_type) is Literal:
        structure_type = str  # the field's choice() validator names the options

    def hook(value: object, _t: Any) -> Any:
        try:
            result = conv.structure(value, structure_type)
        except ValueError:
            if field.validator is not None and percent_of(value) is not None:
                # "3%": the field's validator says what it takes (a fraction's, 0.03)
                field.validator(None, field, value)
            raise
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


def _strategy_hook(conv: cattrs.Converter) -> Callable[[object, Any], CandidateStrategy]:
    """Structure a candidate-strategy table as the strategy its ``strategy`` key names."""

    def structure_strategy(value: object, _t: Any) -> CandidateStrategy:
        known = ", ".join(spelled(s) for s in STRATEGIES)
        if not isinstance(value, Mapping):
            # a list, or a strategy's name but explicit's, was its table by now (_shorthand)
            raise _Refused(_no_candidates(value, known))
        name = value.get("strategy")
        if name is None:
            # a settings file's policy has its strategy by now (its own, or what it extends,
            # balanced's if nothing): only a table given in code comes here without one
            raise _Refused(f"missing required key strategy; expected one of {known}")
        if not isinstance(name, str) or name not in STRATEGIES:  # a list is not hashable
            raise _AtKey(
                "strategy", f"{spelled(name)} is not valid for strategy; {one_of(name, STRATEGIES)}"
            )
        rest = {k: v for k, v in value.items() if k != "strategy"}
        return conv.structure(rest, STRATEGIES[name])

    return structure_strategy


def _no_candidates(value: object, known: str) -> str:
    """Why ``candidates = value`` stands for no candidates table, and what was meant."""
    said = f"{spelled(value)} is not valid for candidates"
    if value == "explicit":
        return (
            f"{said} alone; expected the sizes it measures, as a list (candidates = [3, 7, 11]) "
            'or a table with strategy = "explicit" and sizes'
        )
    if isinstance(value, str):
        return f"{said}; {one_of(value, STRATEGIES)}, a list of sizes or a table"
    expected = f"{said}; expected a strategy's name ({known}), a list of sizes or a table"
    if type(value) is int:  # a count of sizes, most likely, or one size
        # spelled, as every value is: an int of hundreds of digits is cut, not written out
        # (past Python's int-to-str limit, writing it out raised)
        size = spelled(value)
        one = f"for size {size} alone, candidates = [{size}]"
        if not 2 <= value <= 4096:  # max_candidates' own range
            return f"{expected}: {one}"
        cap = (
            f"for at most {value} sizes, write max_candidates = {value} in the candidates "
            f"table (candidates.max_candidates = {value})"
        )
        return f"{expected}: {cap}; {one}"
    return expected


def _tagged(
    conv: cattrs.Converter, cls: type[CandidateStrategy]
) -> Callable[[CandidateStrategy], dict[str, Any]]:
    """Unstructure a candidate strategy as its table, with its name under ``strategy``."""
    plain = make_dict_unstructure_fn(cls, conv)
    return lambda value: {"strategy": cls.strategy, **plain(value)}


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
    for cls in (Policy, CacheSettings, LogSettings, RaySettings, *STRATEGIES.values()):
        attrs.resolve_types(cls)
        fields = attrs.fields(cls)
        overrides = {f.name: override(struct_hook=_field_hook(conv, cls, f)) for f in fields}
        structure_fn: Any = make_dict_structure_fn(
            cls,
            conv,
            _cattrs_forbid_extra_keys=True,
            **overrides,  # type: ignore[arg-type]
        )
        conv.register_structure_hook(cls, _tables_only(structure_fn))
    conv.register_structure_hook(CandidateStrategy, _strategy_hook(conv))
    for strategy_cls in STRATEGIES.values():
        conv.register_unstructure_hook(strategy_cls, _tagged(conv, strategy_cls))
    return conv


_CONVERTER = _make_converter()

# ---------------------------------------------------------------- errors


def suggest(key: str, valid: list[str]) -> str:
    """What an unknown ``key`` may have meant: the closest of ``valid``, else all of them."""
    close = difflib.get_close_matches(key, valid, n=1)
    if close:
        return f"did you mean {close[0]}?"
    return f"expected one of {', '.join(valid)}"


def join_path(path: str, part: object) -> str:
    """The dotted TOML path of ``part`` under ``path`` (``path`` empty: the top level).

    ``part`` (a file's key, an index) is shown as TOML spells a key
    (:func:`~chunktune._shown.toml_key`): bare where TOML allows, else quoted and escaped
    (``policies.mine."a.b"``), so that the path pasted names the key it names, and a key
    holding a newline or an escape sequence neither splits the problem's line nor acts on
    the terminal; a long key is cut, quoted, to its ends.
    """
    shown = toml_key(part)
    return f"{path}.{shown}" if path else shown


Problem = tuple[tuple[object, ...], str]
"""A problem of a table: the keys from the table down to where it is (none: the table's
own, a rule between its fields), and what is wrong there."""


def problem_line(path: str, problem: Problem) -> str:
    """``problem`` of the table at ``path`` (already shown, never empty: every table
    structured whole is under a key, ``cache`` or ``policies.NAME``) as one line:
    ``"dotted.path: message"``, the keys under ``path`` joined by :func:`join_path`."""
    keys, message = problem
    for key in keys:
        path = join_path(path, key)
    return f"{path}: {message}"


def _elsewhere(cls: type | None, key: str) -> str | None:
    """Where ``key``, unknown to the table of ``cls``, belongs: the [candidates] table, for a
    policy's key; the strategies that take it, for a [candidates] table's (a policy that
    extends a preset keeps its strategy, so ``sizes`` alone there is a key of
    ``explicit`` that ``balanced`` does not take); None where it belongs nowhere."""
    owners = [
        spelled(name)
        for name, strategy in STRATEGIES.items()
        if key in {f.name for f in attrs.fields(strategy)}
    ]
    if cls is Policy and (owners or key == "strategy"):
        return f"a key of the policy's [candidates] table: expected it there as candidates.{key}"
    if not owners or not isinstance(getattr(cls, "strategy", None), str):
        return None
    if len(owners) == 1:
        return f"a key of strategy {owners[0]} (set strategy = {owners[0]} to use it)"
    return f"a key of strategy {', '.join(owners[:-1])} or {owners[-1]}"


def _problems(exc: BaseException, at: tuple[object, ...] = ()) -> list[Problem]:
    """Flatten a cattrs validation error tree into problems, each at its keys below ``at``."""
    if isinstance(exc, cattrs.ForbiddenExtraKeysError):
        valid = [f.name for f in attrs.fields(exc.cl)] if exc.cl is not None else []
        if exc.cl is Policy:  # a key of every policy table, flattened away before this
            valid.insert(0, "extends")
        unknown = "unknown key"
        strategy = getattr(exc.cl, "strategy", None)
        if isinstance(strategy, str):  # a [candidates] table, its strategy key taken out
            valid.insert(0, "strategy")
            unknown = f"unknown key for strategy {spelled(strategy)}"
        return [
            ((*at, key), f"{unknown}; {_elsewhere(exc.cl, key) or suggest(key, valid)}")
            for key in sorted(exc.extra_fields)
        ]
    if isinstance(exc, cattrs.ClassValidationError | cattrs.IterableValidationError):
        found: list[Problem] = []
        with_notes, without_notes = exc.group_exceptions()
        for sub, note in with_notes:
            part = getattr(note, "name", None)
            if part is None:
                part = getattr(note, "index", "?")
            found.extend(_problems(sub, (*at, part)))
        for sub in without_notes:
            found.extend(_problems(sub, at))
        return found
    if isinstance(exc, _AtKey):
        return [((*at, exc.key), str(exc))]
    if isinstance(exc, KeyError) and exc.args:
        # cattrs's for a missing field; a table's own KeyError says anything (its key's
        # __str__ may even raise), so it is told as outside text is: str(LookupError(k))
        # is str(k), without the quotes str(KeyError(k)) adds
        key = told(LookupError(exc.args[0]))
        return [(at, f"missing required key {UNREAD if key is None else key}")]
    if isinstance(exc, ConfigError):  # a validator's: its own lines, not its rendering
        return [(at, p) for p in exc.problems]
    if isinstance(exc, _Refused):
        return [(at, str(exc))]
    # what no hook expected (a table's own error): its message is anyone's text, told on one
    # escaped, bounded line; its type alone where it has none
    message = told(exc)
    if message is None:
        message = f"{type_named(exc)} {UNREAD}"
    return [(at, message or type_named(exc))]


def structure_problems(data: object, cls: type[Any]) -> tuple[Any, list[Problem]]:
    """``data`` as a ``cls`` record and no problems, or None and its problems, each at its
    keys in ``data``: a caller that asks where a problem is reads the keys, not a line."""
    try:
        return _CONVERTER.structure(data, cls), []
    except Exception as exc:  # cattrs wraps every failure; we report, never re-raise here
        return None, _problems(exc)


def structure(data: object, cls: type[Any], path: str, problems: list[str]) -> Any:
    """``data`` as a ``cls`` record, or None with its problems at ``path`` (its table's,
    never empty: :func:`problem_line`) added to ``problems``."""
    result, found = structure_problems(data, cls)
    problems.extend(problem_line(path, problem) for problem in found)
    return result


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
    """A policy as a standalone TOML table (the format of the files in ``policies/``).

    Raises:
        InvalidArgumentError: ``policy`` is not a :class:`chunktune.Policy` (a name, say).
    """
    return tomli_w.dumps(unstructure_policy(given_policy(policy, "dump_policy")))


def dump_settings(settings: Settings) -> str:
    """Effective settings as a TOML document: every policy in full, the presets included.

    ``load_settings`` reads the document of loaded settings back equal. Settings built
    in code without every preset read back with the missing presets added.

    Raises:
        InvalidArgumentError: ``settings`` is not a :class:`chunktune.Settings` (a path,
            say).
    """
    if not isinstance(settings, Settings):
        raise InvalidArgumentError(
            f"dump_settings takes a chunktune.Settings, got {shown_one(settings)} "
            f"({type_named(settings)}); load one with chunktune.load_settings(path)"
        )
    doc: dict[str, Any] = {
        "policy": settings.policy,
        "cache": _drop_none(_CONVERTER.unstructure(settings.cache)),
        "log": _CONVERTER.unstructure(settings.log),
        "ray": _CONVERTER.unstructure(settings.ray),
        "policies": {name: unstructure_policy(p) for name, p in settings.policies.items()},
    }
    return tomli_w.dumps(doc)
