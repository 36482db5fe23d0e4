"""The decision cache: one file (JSON or TOML) of entries keyed by workload, machine and policy.

Writes take a cross-process lock on the file, re-read it, merge, and replace it
atomically (temporary file, fsync, ``os.replace``), so concurrent writers of
different keys all survive and a crash leaves either the old or the new file.
A file that does not parse, or was written by a newer chunktune, is moved aside
with its bytes intact, never overwritten. Reads re-parse only when the file changed.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
import tempfile
import time
import tomllib
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import attrs
import filelock
import platformdirs
import tomli_w

from ._decision import timings_to_ms
from ._errors import CacheError

__all__ = [
    "LEGACY_PREFIX",
    "SCHEMA",
    "CacheEntry",
    "DecisionCache",
    "MergeReport",
    "default_cache_path",
    "entry_from_dict",
    "entry_to_dict",
    "legacy_entries",
    "read_cache_file",
    "write_cache_file",
]

logger = logging.getLogger("chunktune")

SCHEMA = 1
NATIVE = "native"  # how None (the native chunk) is written: TOML has no null
LEGACY_PREFIX = "legacy-"  # keys of entries migrated from the older tuner's flat cache


def default_cache_path() -> Path:
    """``<user cache dir>/chunktune/cache.json`` (platformdirs)."""
    return platformdirs.user_cache_path("chunktune", appauthor=False) / "cache.json"


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


def _chunk_out(value: int | None) -> int | str:
    return NATIVE if value is None else value


def _chunk_in(value: Any) -> int | None:
    if value == NATIVE or value is None:
        return None
    if isinstance(value, bool):
        raise ValueError(f"bad chunk size {value!r}")
    return int(value)


def entry_to_dict(entry: CacheEntry) -> dict[str, Any]:
    """A TOML- and JSON-safe table for ``entry`` (``None`` written as ``"native"``)."""
    data: dict[str, Any] = {
        "chunk_size": _chunk_out(entry.chunk_size),
        "native_chunk": entry.native_chunk,
        "reason": entry.reason,
        "timings_ms": timings_to_ms(entry.timings),
        "samples": {NATIVE if k is None else str(k): n for k, n in entry.samples.items()},
        "raced_out": list(entry.raced_out),
        "policy": entry.policy,
        "policy_hash": entry.policy_hash,
        "policy_rule": entry.policy_rule,
        "policy_effort": entry.policy_effort,
        "probe_seconds": entry.probe_seconds,
        "partial": entry.partial,
        "created": entry.created,
        "num_envs": entry.num_envs,
        "nthread": entry.nthread,
        "signature": dict(entry.signature),
        "device": dict(entry.device),
        "chunktune_version": entry.chunktune_version,
        "mujoco_version": entry.mujoco_version,
        "host": entry.host,
    }
    if entry.model_file is not None:
        data["model_file"] = entry.model_file
    return data


def entry_from_dict(data: Mapping[str, Any]) -> CacheEntry:
    """Parse a stored table.

    Raises:
        ValueError: a required field is missing or malformed.
    """
    try:
        return CacheEntry(
            chunk_size=_chunk_in(data["chunk_size"]),
            native_chunk=int(data["native_chunk"]),
            reason=str(data.get("reason", "")),
            timings={_chunk_in(k): float(v) / 1e3 for k, v in data.get("timings_ms", {}).items()},
            samples={_chunk_in(k): int(v) for k, v in data.get("samples", {}).items()},
            raced_out=tuple(int(c) for c in data.get("raced_out", ())),
            policy=str(data.get("policy", "")),
            policy_hash=str(data.get("policy_hash", "")),
            policy_rule=str(data.get("policy_rule", "")),
            policy_effort=int(data.get("policy_effort", 0)),
            probe_seconds=float(data.get("probe_seconds", 0.0)),
            partial=bool(data.get("partial", False)),
            created=float(data.get("created", 0.0)),
            num_envs=int(data.get("num_envs", 0)),
            nthread=int(data.get("nthread", 0)),
            signature=dict(data.get("signature", {})),
            device=dict(data.get("device", {})),
            chunktune_version=str(data.get("chunktune_version", "")),
            mujoco_version=str(data.get("mujoco_version", "")),
            host=str(data.get("host", "")),
            model_file=data.get("model_file"),
        )
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise ValueError(f"malformed cache entry: {exc!r}") from exc


def legacy_entries(
    doc: Mapping[str, Any], *, created: float, source: str
) -> tuple[dict[str, CacheEntry], int]:
    """The older tuner's flat ``{key: {"chunk_size", "per_candidate_ms", ...}}`` as entries.

    Keys become ``legacy-<key>``: the older keys hashed too little to be trusted
    for a hit, but the evidence is kept, listed and exported. Returns the entries
    and how many malformed ones were skipped. ``native_chunk`` is 0 (not stored).
    """
    entries: dict[str, CacheEntry] = {}
    bad = 0
    for key, value in doc.items():
        try:
            chunk = value["chunk_size"]
            if chunk is not None and (isinstance(chunk, bool) or not isinstance(chunk, int)):
                raise ValueError(f"chunk_size {chunk!r}")
            per_ms = value.get("per_candidate_ms") or {}
            timings = {
                (None if k == "None" else int(k)): float(ms) / 1e3 for k, ms in per_ms.items()
            }
            entries[f"{LEGACY_PREFIX}{key}"] = CacheEntry(
                chunk_size=chunk,
                native_chunk=0,
                reason=f"migrated from the older tuner's cache {source}",
                timings=timings,
                policy="legacy",
                created=created,
                signature={"kind": "legacy"},
                host=str(value.get("hostname") or ""),
                model_file=value.get("model_file"),
            )
        except (KeyError, TypeError, ValueError, AttributeError):
            bad += 1
    return entries, bad


def _is_legacy(doc: Mapping[str, Any]) -> bool:
    return (
        "schema" not in doc
        and bool(doc)
        and all(isinstance(v, dict) and "chunk_size" in v for v in doc.values())
    )


def _decode(raw: bytes, fmt: str) -> Any:
    return tomllib.loads(raw.decode()) if fmt == "toml" else json.loads(raw)


def _encode(entries: Mapping[str, CacheEntry], fmt: str) -> bytes:
    doc = {"schema": SCHEMA, "entries": {k: entry_to_dict(e) for k, e in sorted(entries.items())}}
    if fmt == "toml":
        return tomli_w.dumps(doc).encode()
    return (json.dumps(doc, indent=1, sort_keys=True) + "\n").encode()


def _format_of(path: Path) -> str:
    return "toml" if path.suffix.lower() == ".toml" else "json"


def _write_atomic(path: Path, data: bytes) -> None:
    """Temporary file in the same directory, fsync, rename: readers see old or new, never half."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    with contextlib.suppress(OSError):
        dir_fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)


def read_cache_file(path: str | os.PathLike[str]) -> tuple[dict[str, CacheEntry], int, str]:
    """Read a chunktune cache (JSON or TOML, by suffix) or an older tuner's JSON cache.

    Returns the entries, the number of malformed entries skipped, and what the
    file was (``"chunktune cache"`` or ``"older tuner's cache"``).

    Raises:
        CacheError: the file cannot be read, does not parse, has a newer schema,
            or is neither kind of cache.
    """
    file = Path(path).expanduser()
    fmt = _format_of(file)
    try:
        raw = file.read_bytes()
        created = file.stat().st_mtime
    except OSError as exc:
        raise CacheError(f"cannot read {file}: {exc.strerror or exc}") from exc
    try:
        doc = _decode(raw, fmt)
    except (ValueError, UnicodeDecodeError) as exc:
        raise CacheError(f"{file} does not parse as {fmt.upper()}: {exc}") from exc
    if not isinstance(doc, dict):
        raise CacheError(f"{file} is not a cache: its top level is not a table")
    if _is_legacy(doc):
        legacy, bad = legacy_entries(doc, created=created, source=str(file))
        return legacy, bad, "older tuner's cache"
    schema = doc.get("schema")
    if not isinstance(schema, int) or isinstance(schema, bool):
        raise CacheError(
            f"{file} is neither a chunktune cache nor an older tuner's JSON cache "
            f"(schema {schema!r})"
        )
    if schema > SCHEMA:
        raise CacheError(
            f"{file} has cache schema {schema}, newer than this chunktune's {SCHEMA}; "
            "upgrade chunktune to read it"
        )
    table = doc.get("entries", {})
    if not isinstance(table, dict):
        raise CacheError(f"{file}: 'entries' is not a table")
    entries: dict[str, CacheEntry] = {}
    bad = 0
    for key, value in table.items():
        try:
            entries[str(key)] = entry_from_dict(value)
        except ValueError:
            bad += 1
    return entries, bad, "chunktune cache"


def write_cache_file(
    path: str | os.PathLike[str], entries: Mapping[str, CacheEntry], *, format: str = "auto"
) -> None:
    """Write ``entries`` as a cache file (format by suffix unless given), atomically.

    Raises:
        CacheError: the file cannot be written.
    """
    file = Path(path).expanduser()
    fmt = _format_of(file) if format == "auto" else format
    try:
        file.parent.mkdir(parents=True, exist_ok=True)
        _write_atomic(file, _encode(entries, fmt))
    except OSError as exc:
        raise CacheError(f"cannot write {file}: {exc.strerror or exc}") from exc


@attrs.frozen
class MergeReport:
    """What a merge did, by key."""

    added: tuple[str, ...] = ()
    replaced: tuple[str, ...] = ()
    kept: tuple[str, ...] = ()
    same: tuple[str, ...] = ()


class _Unusable(Exception):
    """The cache file cannot be parsed or is from a newer schema."""


class DecisionCache:
    """A cache file. Safe to share between threads and processes.

    ``format`` is ``"json"``, ``"toml"`` or ``"auto"`` (by suffix: ``.toml`` is
    TOML, anything else JSON).
    """

    def __init__(self, path: str | os.PathLike[str], *, format: str = "auto") -> None:
        self.path = Path(path).expanduser()
        if format == "auto":
            format = "toml" if self.path.suffix.lower() == ".toml" else "json"
        if format not in ("json", "toml"):
            raise CacheError(f"cache format {format!r} is not json or toml")
        self.format = format
        self._memo: tuple[tuple[int, int, int], dict[str, CacheEntry]] | None = None
        self._legacy_bytes: bytes | None = None
        self._warned = False

    # -- locks ---------------------------------------------------------------------

    @property
    def lock_path(self) -> Path:
        """The file lock that serializes writers of this cache."""
        return self.path.with_name(self.path.name + ".lock")

    def key_lock(self, key: str) -> filelock.BaseFileLock:
        """A cross-process lock for sweeping one key (not thread-local: any thread may release)."""
        return filelock.FileLock(self.path.parent / "locks" / f"{key}.lock", thread_local=False)

    @contextlib.contextmanager
    def _write_lock(self) -> Iterator[None]:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with filelock.FileLock(self.lock_path, thread_local=False):
            yield

    # -- reading -------------------------------------------------------------------

    def _stat(self) -> tuple[int, int, int] | None:
        try:
            st = self.path.stat()
        except FileNotFoundError:
            return None
        return (st.st_mtime_ns, st.st_size, st.st_ino)

    def _parse(self, raw: bytes) -> dict[str, CacheEntry]:
        try:
            doc = _decode(raw, self.format)
        except (ValueError, UnicodeDecodeError) as exc:
            raise _Unusable(f"it does not parse as {self.format.upper()} ({exc})") from exc
        if not isinstance(doc, dict):
            raise _Unusable("it is not a table of entries")
        if _is_legacy(doc):
            # schema 0, the older tuner's flat file: migrated in memory, rewritten on the
            # next write, which first keeps a copy of the original bytes
            self._legacy_bytes = raw
            legacy, _bad = legacy_entries(doc, created=time.time(), source=str(self.path))
            return legacy
        self._legacy_bytes = None
        schema = doc.get("schema")
        if not isinstance(schema, int) or isinstance(schema, bool):
            raise _Unusable(f"its schema version {schema!r} is not a number")
        if schema > SCHEMA:
            raise _Unusable(f"it has schema {schema}, newer than this chunktune's {SCHEMA}")
        entries: dict[str, CacheEntry] = {}
        for key, table in dict(doc.get("entries", {})).items():
            try:
                entries[str(key)] = entry_from_dict(table)
            except ValueError as exc:
                # one malformed entry must not cost the others their place
                logger.warning("chunktune: ignoring cache entry %s in %s: %s", key, self.path, exc)
        return entries

    def _quarantine(self, why: str) -> None:
        """Move an unusable file aside, bytes intact, and say where it went."""
        stamp = time.strftime("%Y%m%dT%H%M%S")
        aside = self.path.with_name(f"{self.path.name}.corrupt-{stamp}-{os.getpid()}")
        try:
            os.replace(self.path, aside)
        except FileNotFoundError:
            return
        logger.warning(
            "chunktune: cache file %s is unusable (%s); moved it to %s and started a fresh cache",
            self.path,
            why,
            aside,
        )

    def _load(self, *, fresh: bool) -> dict[str, CacheEntry]:
        stat = self._stat()
        if stat is None:
            return {}
        if not fresh and self._memo is not None and self._memo[0] == stat:
            return self._memo[1]
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return {}
        entries = self._parse(raw)
        self._memo = (stat, entries)
        return entries

    def _degrade(self, exc: OSError) -> None:
        if not self._warned:
            self._warned = True
            logger.warning(
                "chunktune: cache %s is unavailable (%s); continuing without a cache",
                self.path,
                exc,
            )

    def entries(self) -> dict[str, CacheEntry]:
        """Every entry, by key. An unusable file is moved aside and reads as empty."""
        try:
            return dict(self._load(fresh=False))
        except _Unusable as exc:
            try:
                with self._write_lock():
                    try:
                        return dict(self._load(fresh=True))
                    except _Unusable:
                        self._quarantine(str(exc))
                        return {}
            except OSError as os_exc:
                self._degrade(os_exc)
                return {}
        except OSError as exc:
            self._degrade(exc)
            return {}

    def get(self, key: str) -> CacheEntry | None:
        """The entry stored under ``key``, or None."""
        try:
            return self._load(fresh=False).get(key)
        except (_Unusable, OSError):
            return self.entries().get(key)

    def lookup(
        self, base_key: str, *, policy_hash: str, rule: str, effort: int
    ) -> tuple[str, CacheEntry] | None:
        """The entry that answers a request: its own policy's, else a stronger one's.

        Entries live under ``"<base_key>.<policy_hash>"``. A result made under
        another policy serves the request when that policy picks by the same rule
        (margin, tie-break, confidence) and may spend at least as many probes: a
        ``thorough`` result serves ``balanced`` and ``quick`` requests, never the
        reverse. Among several, the one with the most effort wins.
        """
        own = f"{base_key}.{policy_hash}"
        entries = self.entries()
        if own in entries:
            return own, entries[own]
        stronger = [
            (e.policy_effort, k, e)
            for k, e in entries.items()
            if k.startswith(base_key + ".") and e.policy_rule == rule and e.policy_effort >= effort
        ]
        if not stronger:
            return None
        _, key, entry = max(stronger, key=lambda t: (t[0], t[1]))
        return key, entry

    # -- writing -------------------------------------------------------------------

    def _write(self, entries: Mapping[str, CacheEntry]) -> None:
        """Replace the file (caller holds the write lock); back up a migrated older file once."""
        if self._legacy_bytes is not None:
            backup = self.path.with_name(self.path.name + ".schema0")
            if not backup.exists():
                _write_atomic(backup, self._legacy_bytes)
                logger.warning(
                    "chunktune: migrated the older tuner's cache %s to schema %d; "
                    "the original is kept as %s",
                    self.path,
                    SCHEMA,
                    backup,
                )
            self._legacy_bytes = None
        _write_atomic(self.path, _encode(entries, self.format))

    def _current(self) -> dict[str, CacheEntry]:
        """The file's entries as of now (caller holds the write lock); unusable: moved aside."""
        try:
            return dict(self._load(fresh=True))
        except _Unusable as exc:
            self._quarantine(str(exc))
            return {}

    def update(self, changes: Mapping[str, CacheEntry | None]) -> bool:
        """Merge ``changes`` (None deletes) into the file under the lock. False if unwritable."""
        try:
            with self._write_lock():
                current = self._current()
                for key, entry in changes.items():
                    if entry is None:
                        current.pop(key, None)
                    else:
                        current[key] = entry
                self._write(current)
                self._memo = None
                return True
        except OSError as exc:
            self._degrade(exc)
            return False

    def merge(self, incoming: Mapping[str, CacheEntry]) -> MergeReport:
        """Merge another cache's entries under the write lock; on a conflict the newer wins.

        Raises:
            CacheError: the cache cannot be written.
        """
        added: list[str] = []
        replaced: list[str] = []
        kept: list[str] = []
        same: list[str] = []
        try:
            with self._write_lock():
                current = self._current()
                for key, entry in sorted(incoming.items()):
                    mine = current.get(key)
                    if mine is None:
                        added.append(key)
                    elif mine == entry:
                        same.append(key)
                        continue
                    elif entry.created > mine.created:
                        replaced.append(key)
                    else:
                        kept.append(key)
                        continue
                    current[key] = entry
                if added or replaced:
                    self._write(current)
                self._memo = None
        except OSError as exc:
            raise CacheError(f"cannot write the cache {self.path}: {exc.strerror or exc}") from exc
        return MergeReport(tuple(added), tuple(replaced), tuple(kept), tuple(same))

    def put(self, key: str, entry: CacheEntry) -> bool:
        """Store one entry (other keys untouched). False if the cache is unwritable."""
        return self.update({key: entry})

    def clear(self) -> int:
        """Delete every entry present now; returns how many were deleted.

        Raises:
            CacheError: the cache cannot be written (nothing was deleted).
        """
        keys = list(self.entries())
        if keys and not self.update(dict.fromkeys(keys)):
            raise CacheError(f"cannot write the cache {self.path}; nothing was deleted")
        return len(keys)
