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
    "SCHEMA",
    "CacheEntry",
    "DecisionCache",
    "default_cache_path",
    "entry_from_dict",
    "entry_to_dict",
]

logger = logging.getLogger("chunktune")

SCHEMA = 1
NATIVE = "native"  # how None (the native chunk) is written: TOML has no null


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
        self._warned = False

    # -- locks ---------------------------------------------------------------------

    @property
    def lock_path(self) -> Path:
        """The file lock that serializes writers of this cache."""
        return self.path.with_name(self.path.name + ".lock")

    def key_lock(self, key: str) -> filelock.BaseFileLock:
        """A cross-process lock for sweeping one key (not thread-local: any thread may release)."""
        return filelock.FileLock(
            self.path.parent / "locks" / f"{key}.lock", thread_local=False
        )

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
            doc = tomllib.loads(raw.decode()) if self.format == "toml" else json.loads(raw)
        except (ValueError, UnicodeDecodeError) as exc:
            raise _Unusable(f"it does not parse as {self.format.upper()} ({exc})") from exc
        if not isinstance(doc, dict):
            raise _Unusable("it is not a table of entries")
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

    def _dump(self, entries: Mapping[str, CacheEntry]) -> bytes:
        doc = {"schema": SCHEMA, "entries": {k: entry_to_dict(e) for k, e in entries.items()}}
        if self.format == "toml":
            return tomli_w.dumps(doc).encode()
        return (json.dumps(doc, indent=1, sort_keys=True) + "\n").encode()

    def _write_atomic(self, data: bytes) -> None:
        fd, tmp = tempfile.mkstemp(
            prefix=f".{self.path.name}.", suffix=".tmp", dir=self.path.parent
        )
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.path)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
            raise
        with contextlib.suppress(OSError):
            dir_fd = os.open(self.path.parent, os.O_RDONLY)
            try:
                os.fsync(dir_fd)
            finally:
                os.close(dir_fd)

    def update(self, changes: Mapping[str, CacheEntry | None]) -> bool:
        """Merge ``changes`` (None deletes) into the file under the lock. False if unwritable."""
        try:
            with self._write_lock():
                try:
                    current = dict(self._load(fresh=True))
                except _Unusable as exc:
                    self._quarantine(str(exc))
                    current = {}
                for key, entry in changes.items():
                    if entry is None:
                        current.pop(key, None)
                    else:
                        current[key] = entry
                self._write_atomic(self._dump(current))
                self._memo = None
                return True
        except OSError as exc:
            self._degrade(exc)
            return False

    def put(self, key: str, entry: CacheEntry) -> bool:
        """Store one entry (other keys untouched). False if the cache is unwritable."""
        return self.update({key: entry})

    def clear(self) -> int:
        """Delete every entry; returns how many there were."""
        keys = list(self.entries())
        self.update(dict.fromkeys(keys))
        return len(keys)
