"""The cache file's format: one parser and one encoder for its JSON and TOML documents.

A document is ``{"schema": 1, "entries": {key: table}}``. One cattrs converter maps a
:class:`CacheEntry` to its table and back (``timings`` stored as ``timings_ms`` in
milliseconds, ``None`` written as ``"native"``: TOML has no null) and validates every
field on the way in, as strictly as a manual chunk size is checked: an entry that
fails is skipped and named, never served. A document that does not decode, or is of
the wrong shape (not a table, no schema, a newer schema, ``entries`` not a table), is
:class:`UnusableCache`; the caller moves it aside or reports it. The older tuner's
flat JSON cache (schema 0) goes through the same validation.
"""

from __future__ import annotations

import contextlib
import functools
import json
import math
import socket
import time
import tomllib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Literal, cast

import attrs
import cattrs
import tomli_w
from cattrs.gen import make_dict_structure_fn, make_dict_unstructure_fn, override

from ._decision import timings_to_ms
from ._errors import CacheError
from ._validators import shown

__all__ = [
    "LEGACY_PREFIX",
    "MAX_COUNT",
    "SCHEMA",
    "BadEntry",
    "CacheEntry",
    "CacheFormat",
    "ParsedCache",
    "UnusableCache",
    "cache_format",
    "check_entry",
    "decode",
    "encode",
    "entry_from_table",
    "entry_to_table",
    "parse_cache",
    "suffix_format",
]

SCHEMA = 1
NATIVE = "native"  # how None (the native chunk) is written: TOML has no null
LEGACY_PREFIX = "legacy-"  # keys of entries migrated from the older tuner's flat cache
MAX_COUNT = 2**31 - 1  # MuJoCo takes env counts, thread counts and chunk sizes as C ints

CacheFormat = Literal["json", "toml"]


@attrs.frozen(kw_only=True)
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


class UnusableCache(Exception):
    """A document that cannot be read as a whole; the message completes "the file ..."."""


class BadEntry(ValueError):
    """One stored entry is invalid; ``problems`` holds one ``"field: what is wrong"`` each."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = tuple(problems)
        super().__init__("; ".join(problems))


@attrs.frozen
class ParsedCache:
    """What a document holds: the valid entries, and ``(key, why)`` for each one skipped."""

    entries: dict[str, CacheEntry]
    skipped: tuple[tuple[str, str], ...] = ()
    legacy: bool = False

    @property
    def kind(self) -> str:
        """``"chunktune cache"`` or ``"older tuner's cache"``."""
        return "older tuner's cache" if self.legacy else "chunktune cache"


# ---------------------------------------------------------------- the format decision


_SUFFIXES: dict[str, CacheFormat] = {".json": "json", ".toml": "toml"}


def suffix_format(path: Path) -> CacheFormat | None:
    """The format a file name asks for: ``.json`` or ``.toml``; None for any other suffix."""
    return _SUFFIXES.get(path.suffix.lower())


def cache_format(path: Path, format: str = "auto") -> CacheFormat:
    """``format`` itself, or for ``"auto"`` the suffix's (``.toml`` is TOML, anything else JSON).

    Raises:
        CacheError: ``format`` is not ``"auto"``, ``"json"`` or ``"toml"``.
    """
    if format == "auto":
        return suffix_format(path) or "json"
    if format in _SUFFIXES.values():
        return cast(CacheFormat, format)
    raise CacheError(f"cache format {format!r} is not json or toml")


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
    if not (key.isascii() and key.isdecimal() and len(key) <= 10):
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
    return value


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
    return out


def _interval_in(value: Any, _t: Any = None) -> tuple[float, float] | None:
    if value is None:
        return None
    if not isinstance(value, list) or len(value) != 2:
        raise ValueError(f"{shown(value)} is not a [low, high] interval")
    low, high = _finite(value[0]), _finite(value[1])
    if low > high:
        raise ValueError(f"{shown(value)} is not a [low, high] interval")
    return (low, high)


def _samples_in(value: Any, _t: Any = None) -> dict[int | None, int]:
    return {_chunk_key(key): _count(n) for key, n in _table(value).items()}


def _chunks_in(value: Any, _t: Any = None) -> tuple[int, ...]:
    if not isinstance(value, list):
        raise ValueError(f"{shown(value)} is not a list of chunk sizes")
    return tuple(_chunk(c) for c in value)


def _scalars(value: Any, _t: Any = None) -> dict[str, Any]:
    # what a signature (and the device fingerprint) may hold: the Workload protocol's values
    for key, item in _table(value).items():
        if not isinstance(item, str | int | float):
            raise ValueError(f"{key}: {shown(item)} is not a string, number or boolean")
    return dict(value)


# ---------------------------------------------------------------- the converter

_STORED_NAME = {"timings": "timings_ms"}
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
                omit_if_default=name == "gain_ci",
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


# ---------------------------------------------------------------- documents


def decode(raw: bytes, fmt: CacheFormat) -> Any:
    """The document in ``raw``.

    Raises:
        UnusableCache: it is not UTF-8 (TOML) or not valid JSON/TOML, or nests too deeply.
    """
    try:
        return tomllib.loads(raw.decode()) if fmt == "toml" else json.loads(raw)
    except RecursionError:
        raise UnusableCache(f"is nested too deeply to parse as {fmt.upper()}") from None
    except ValueError as exc:  # JSONDecodeError, TOMLDecodeError and UnicodeDecodeError
        raise UnusableCache(f"does not parse as {fmt.upper()}: {exc}") from None


def encode(entries: Mapping[str, CacheEntry], fmt: CacheFormat) -> bytes:
    """The document for ``entries``, keys sorted."""
    doc = {"schema": SCHEMA, "entries": {k: entry_to_table(e) for k, e in sorted(entries.items())}}
    if fmt == "toml":
        return tomli_w.dumps(doc).encode()
    return (json.dumps(doc, indent=1, sort_keys=True) + "\n").encode()


def _is_legacy(doc: Mapping[str, Any]) -> bool:
    return (
        "schema" not in doc
        and bool(doc)
        and all(isinstance(v, dict) and "chunk_size" in v for v in doc.values())
    )


def _legacy_table(value: dict[str, Any], *, created: float, source: str) -> dict[str, Any]:
    """An older tuner's ``{"chunk_size", "per_candidate_ms", ...}`` in today's form."""
    per_ms = value.get("per_candidate_ms") or {}
    if not isinstance(per_ms, dict):
        raise BadEntry([f"per_candidate_ms: {shown(per_ms)} is not a table"])
    chunk = value["chunk_size"]
    table = {
        "chunk_size": NATIVE if chunk is None else chunk,
        "native_chunk": 0,  # not stored by the older tuner
        "reason": f"migrated from the older tuner's cache {source}",
        "timings_ms": {(NATIVE if k == "None" else k): ms for k, ms in per_ms.items()},
        "policy": "legacy",
        "created": created,
        "signature": {"kind": "legacy"},
        "host": value.get("hostname") or "",
    }
    if value.get("model_file") is not None:
        table["model_file"] = value["model_file"]
    return table


def parse_cache(raw: bytes, fmt: CacheFormat, *, mtime: float, source: str) -> ParsedCache:
    """Parse a chunktune cache, or an older tuner's flat JSON cache, every entry validated.

    ``mtime`` (Unix seconds) dates the older tuner's entries, which carry no date;
    ``source`` names the file in their reason. Keys of the older tuner's entries
    become ``legacy-<key>``: they hashed too little to be trusted for a hit, but the
    evidence is kept, listed and exported.

    Raises:
        UnusableCache: the document does not decode, is of the wrong shape, or has a
            newer schema.
    """
    doc = decode(raw, fmt)
    if not isinstance(doc, dict):
        raise UnusableCache("is not a cache: its top level is not a table")
    entries: dict[str, CacheEntry] = {}
    skipped: list[tuple[str, str]] = []
    legacy = _is_legacy(doc)
    if legacy:
        tables = doc.items()
    else:
        schema = doc.get("schema")
        if type(schema) is not int or schema < 1:  # chunktune's schemas count from 1
            raise UnusableCache(
                "is neither a chunktune cache nor an older tuner's JSON cache "
                f"(schema {shown(schema)})"
            )
        if schema > SCHEMA:
            raise UnusableCache(
                f"has cache schema {schema}, newer than this chunktune's {SCHEMA}; "
                "upgrade chunktune to read it"
            )
        table = doc.get("entries", {})
        if not isinstance(table, dict):
            raise UnusableCache(f"is not a cache: its entries, {shown(table)}, are not a table")
        tables = table.items()
    for key, value in tables:
        name = f"{LEGACY_PREFIX}{key}" if legacy else key
        try:
            if legacy:
                value = _legacy_table(value, created=mtime, source=source)
            entries[name] = entry_from_table(value)
        except BadEntry as exc:
            skipped.append((name, str(exc)))
    return ParsedCache(entries, tuple(skipped), legacy)
