"""One cache entry: the record, and the converter that writes it as a table and reads it back.

One cattrs converter maps a :class:`CacheEntry` to its table and back (``timings``
stored as ``timings_ms`` in milliseconds, ``None`` written as ``"native"``: TOML has
no null) and validates every field on the way in, as strictly as a manual chunk size
is checked: an entry that fails is :class:`BadEntry`, naming each field, and is
skipped, never served. The document around the entries is :mod:`chunktune._cache_format`'s.
"""

from __future__ import annotations

import contextlib
import functools
import math
import socket
import time
from collections.abc import Callable, Mapping
from typing import Any, overload

import attrs
import cattrs
from cattrs.gen import make_dict_structure_fn, make_dict_unstructure_fn, override

from ._counts import MAX_COUNT
from ._decision import timings_to_ms
from ._load import MachineLoad
from ._paths import fspath_text
from ._shown import shown

__all__ = [
    "NATIVE",
    "STORED_FIELDS",
    "BadEntry",
    "CacheEntry",
    "check_entry",
    "check_key",
    "entry_from_table",
    "entry_to_table",
    "writable_path",
    "writable_signature",
    "writable_text",
]

NATIVE = "native"  # how None (the native chunk) is written: TOML has no null


# hash=False: its tables are dicts, so a hash would raise; __hash__ is None, as
# type checkers then say (equality stays by value)
@attrs.frozen(kw_only=True, hash=False)
class CacheEntry:
    """A stored decision and its evidence. Times in seconds; ``created`` in Unix seconds."""

    chunk_size: int | None
    native_chunk: int
    reason: str
    timings: dict[int | None, float] = attrs.field(factory=dict)
    samples: dict[int | None, int] = attrs.field(factory=dict)
    raced_out: tuple[int, ...] = ()
    policy: str = ""
    policy_hash: str = ""
    policy_rule: str = ""
    policy_effort: int = 0
    probe_seconds: float = 0.0
    partial: bool = False
    created: float = attrs.field(factory=time.time)
    num_envs: int = 0
    nthread: int = 0
    signature: dict[str, Any] = attrs.field(factory=dict)
    device: dict[str, Any] = attrs.field(factory=dict)
    chunktune_version: str = ""
    mujoco_version: str = ""
    host: str = attrs.field(factory=socket.gethostname)
    model_file: str | None = None
    gain: float = 0.0
    gain_ci: tuple[float, float] | None = None
    load: MachineLoad | None = None


class BadEntry(ValueError):
    """One stored entry is invalid; ``problems`` holds one ``"field: what is wrong"`` each."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = tuple(problems)
        super().__init__("; ".join(problems))


# ---------------------------------------------------------------- field checks


# `type(x) is int`: a decoded document's integers are exactly int, and bool is not one


def _count(value: Any, _t: Any = None) -> int:
    if type(value) is not int or not 0 <= value <= MAX_COUNT:
        raise ValueError(f"{shown(value)} is not an integer in [0, {MAX_COUNT}]")
    return value


def _chunk(value: Any) -> int:
    if type(value) is not int or not 1 <= value <= MAX_COUNT:
        raise ValueError(f"{shown(value)} is not a chunk size (an integer >= 1) or 'native'")
    return value


def _chunk_or_native(value: Any, _t: Any = None) -> int | None:
    return None if value is None or value == NATIVE else _chunk(value)


@functools.lru_cache(maxsize=4096)  # every entry repeats the same few keys
def _chunk_key(key: str) -> int | None:
    if key == NATIVE:
        return None
    # "08" is refused as traces refuse it: beside "8" it would silently replace it
    if not (key.isascii() and key.isdecimal() and len(key) <= 10) or key != str(int(key)):
        raise ValueError(f"key {shown(key)} is not 'native' or a chunk size")
    return _chunk(int(key))


def _finite(value: Any, _t: Any = None) -> float:
    if type(value) is float or type(value) is int:
        with contextlib.suppress(OverflowError):  # an int beyond any float
            number = float(value)
            if math.isfinite(number):
                return number
    raise ValueError(f"{shown(value)} is not a finite number")


def _seconds(value: Any, _t: Any = None) -> float:
    if _finite(value) < 0:
        raise ValueError(f"{shown(value)} is not a number of seconds >= 0")
    return float(value)


def _text(value: Any, _t: Any = None) -> str:
    if not isinstance(value, str):
        raise ValueError(f"{shown(value)} is not a string")
    try:  # a lone surrogate (a file name that was not UTF-8) cannot be written as TOML
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError(f"{shown(value)} is not writable as UTF-8 text") from None
    return value


@overload
def writable_text(text: str) -> str: ...
@overload
def writable_text(text: None) -> None: ...
def writable_text(text: str | None) -> str | None:
    """Text as an entry may hold it (a file name that was not UTF-8: its bytes as escapes).

    For what an entry only shows (its model file, its signature's values: the key was
    made from the originals), so a workload named by such a path is still cached.
    """
    if text is None:
        return None
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def writable_path(value: object) -> str | None:
    """A workload's ``model_file`` as an entry may hold it: :func:`writable_text` of
    :func:`chunktune._paths.fspath_text`; None for anything that names no file.

    The attribute is informal (any workload may have one), so what it holds never stops
    a measured decision from being stored.
    """
    return writable_text(fspath_text(value))


def writable_signature(signature: Mapping[str, Any]) -> dict[str, Any]:
    """A signature as an entry may hold it: :func:`writable_text` of every name and text value."""
    return {
        writable_text(k): writable_text(v) if isinstance(v, str) else v
        for k, v in signature.items()
    }


def _optional_text(value: Any, _t: Any = None) -> str | None:
    return None if value is None else _text(value)


def _flag(value: Any, _t: Any = None) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"{shown(value)} is not true or false")
    return value


def _table(value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ValueError(f"{shown(value)} is not a table")
    return value


def _timings_in(value: Any, _t: Any = None) -> dict[int | None, float]:
    out: dict[int | None, float] = {}
    for key, ms in _table(value).items():
        seconds = _finite(ms) / 1e3
        if not seconds > 0:
            raise ValueError(
                f"{shown(ms)} at {shown(key)} is not a positive number of milliseconds"
            )
        out[_chunk_key(key)] = seconds
    return _in_order(out)


def _in_order(table: dict[int | None, Any]) -> dict[int | None, Any]:
    """Native first, then the sizes ascending: the order a sweep reports them in."""
    return {k: table[k] for k in sorted(table, key=lambda k: -1 if k is None else k)}


def _interval_in(value: Any, _t: Any = None) -> tuple[float, float] | None:
    if value is None:
        return None
    if not isinstance(value, list) or len(value) != 2:
        raise ValueError(f"{shown(value)} is not a [low, high] interval")
    low, high = _finite(value[0]), _finite(value[1])
    if low > high:
        raise ValueError(f"{shown(value)} is not a [low, high] interval")
    return (low, high)


def _load_in(value: Any, _t: Any = None) -> MachineLoad | None:
    if value is None:
        return None
    table = _table(value)
    if "average" not in table or "cpus" not in table:
        raise ValueError(f"{shown(value)} is not a table of average and cpus")
    average, cpus = table["average"], table["cpus"]
    try:
        number = _finite(average)
    except ValueError:
        number = -1.0
    if number < 0:
        raise ValueError(f"average {shown(average)} is not a load average (a number >= 0)")
    if type(cpus) is not int or not 1 <= cpus <= MAX_COUNT:
        raise ValueError(f"cpus {shown(cpus)} is not a number of CPUs (an integer >= 1)")
    return MachineLoad(number, cpus)


def _load_out(load: MachineLoad | None) -> dict[str, Any] | None:
    return None if load is None else {"average": load.average, "cpus": load.cpus}


def _samples_in(value: Any, _t: Any = None) -> dict[int | None, int]:
    return _in_order({_chunk_key(key): _count(n) for key, n in _table(value).items()})


def _chunks_in(value: Any, _t: Any = None) -> tuple[int, ...]:
    if not isinstance(value, list):
        raise ValueError(f"{shown(value)} is not a list of chunk sizes")
    return tuple(_chunk(c) for c in value)


def _scalars(value: Any, _t: Any = None) -> dict[str, Any]:
    # what a signature (and the device fingerprint) may hold: the Workload protocol's values
    for key, item in _table(value).items():
        _text(key)  # TOML cannot hold a lone surrogate in a name either
        if not isinstance(item, str | int | float):
            raise ValueError(f"{key}: {shown(item)} is not a string, number or boolean")
        if isinstance(item, float) and not math.isfinite(item):
            raise ValueError(f"{key}: {item!r} is not a finite number (no key can hold it)")
        if isinstance(item, str):
            _text(item)
    return dict(value)


# ---------------------------------------------------------------- the converter

_STORED_NAME = {"timings": "timings_ms"}
STORED_FIELDS = frozenset(_STORED_NAME.get(f.name, f.name) for f in attrs.fields(CacheEntry))
"""The names of an entry's table as this chunktune writes it (its checksum aside): a
stored table with others was written by a newer chunktune, which reads them."""
# a stored entry without these is of unknown age and host: not "now, here"
_READ_DEFAULTS: dict[str, Any] = {"reason": "", "created": 0.0, "host": ""}


def _make_converter() -> cattrs.Converter:
    conv = cattrs.Converter()
    for kind, hook in (
        (int, _count),
        (float, _finite),
        (str, _text),
        (bool, _flag),
        (str | None, _optional_text),
    ):
        conv.register_structure_hook(kind, hook)
    special: dict[str, tuple[Callable[..., Any], Callable[..., Any]]] = {
        "chunk_size": (_chunk_or_native, lambda c: NATIVE if c is None else c),
        "timings": (_timings_in, timings_to_ms),
        "samples": (
            _samples_in,
            lambda s: {NATIVE if k is None else str(k): n for k, n in s.items()},
        ),
        "raced_out": (_chunks_in, list),
        "signature": (_scalars, dict),
        "device": (_scalars, dict),
        "gain_ci": (_interval_in, lambda ci: None if ci is None else list(ci)),
        "load": (_load_in, _load_out),
    }
    attrs.resolve_types(CacheEntry)
    structure: Any = make_dict_structure_fn(
        CacheEntry,
        conv,
        _cattrs_detailed_validation=True,
        probe_seconds=override(struct_hook=_seconds),
        **{  # type: ignore[arg-type]
            name: override(rename=_STORED_NAME.get(name), struct_hook=hooks[0])
            for name, hooks in special.items()
        },
    )
    unstructure: Any = make_dict_unstructure_fn(
        CacheEntry,
        conv,
        model_file=override(omit_if_default=True),
        gain=override(omit_if_default=True),
        **{  # type: ignore[arg-type]
            name: override(
                rename=_STORED_NAME.get(name),
                unstruct_hook=hooks[1],
                omit_if_default=name in ("gain_ci", "load"),
            )
            for name, hooks in special.items()
        },
    )
    conv.register_structure_hook(CacheEntry, structure)
    conv.register_unstructure_hook(CacheEntry, unstructure)
    return conv


_CONVERTER = _make_converter()


def entry_to_table(entry: CacheEntry) -> dict[str, Any]:
    """A TOML- and JSON-ready table for ``entry`` (``None`` written as ``"native"``)."""
    table: dict[str, Any] = _CONVERTER.unstructure(entry)
    return table


def _problems(exc: BaseException) -> list[str]:
    if isinstance(exc, cattrs.ClassValidationError):
        with_notes, without_notes = exc.group_exceptions()
        found = []
        for sub, note in with_notes:
            name = _STORED_NAME.get(note.name, note.name)
            found.append(f"{name}: missing" if isinstance(sub, KeyError) else f"{name}: {sub}")
        return found + [str(sub) for sub in without_notes]
    return [str(exc) or type(exc).__name__]


def _beyond_num_envs(entry: CacheEntry) -> list[str]:
    """Chunk sizes above the entry's own batch: no sweep of it measures or picks one."""
    if entry.num_envs == 0:  # unknown (migrated from the older tuner)
        return []
    found = []
    for name, sizes in (
        ("chunk_size", (entry.chunk_size,)),
        ("timings_ms", tuple(entry.timings)),
        ("samples", tuple(entry.samples)),
        ("raced_out", entry.raced_out),
    ):
        over = [c for c in sizes if c is not None and c > entry.num_envs]
        if over:
            found.append(f"{name}: {over[0]} is above num_envs {entry.num_envs}")
    return found


def entry_from_table(table: object) -> CacheEntry:
    """A stored table as an entry, every field checked.

    Raises:
        BadEntry: naming each field that is missing, of the wrong type or out of range.
    """
    if not isinstance(table, dict):
        raise BadEntry([f"{shown(table)} is not a table"])
    try:
        entry: CacheEntry = _CONVERTER.structure({**_READ_DEFAULTS, **table}, CacheEntry)
    except (cattrs.BaseValidationError, ValueError, TypeError) as exc:
        raise BadEntry(_problems(exc)) from None
    problems = _beyond_num_envs(entry)
    if problems:
        raise BadEntry(problems)
    return entry


def check_key(key: str) -> None:
    """Check that an entry's ``key`` can be written in either format.

    Raises:
        BadEntry: it holds a lone surrogate (a name that was not UTF-8), which JSON
            escapes and TOML cannot hold.
    """
    try:
        _text(key)
    except ValueError as exc:
        raise BadEntry([f"key: {exc}"]) from None


def check_entry(entry: CacheEntry) -> None:
    """Check that ``entry`` would read back as it is: nothing is written that would not be served.

    Raises:
        BadEntry: naming each field that would not read back.
    """
    try:
        table = entry_to_table(entry)
    except (ValueError, TypeError, AttributeError) as exc:
        raise BadEntry([f"cannot be written: {exc}"]) from None
    entry_from_table(table)
