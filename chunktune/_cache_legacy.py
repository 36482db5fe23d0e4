"""The older tuner's flat JSON cache (schema 0), read as today's entries.

Its document is ``{key: {"chunk_size", "per_candidate_ms", ...}}``, with no schema, no
date and no checksums. Each table is put in today's form and goes through the same
validation as any entry; keys become ``legacy-<key>``: they hashed too little to be
trusted for a hit, but the evidence is kept, listed and exported.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from ._cache_entry import (
    NATIVE,
    BadEntry,
    CacheEntry,
    check_key,
    entry_from_table,
    writable_text,
)
from ._shown import shown

__all__ = ["LEGACY_PREFIX", "is_legacy", "legacy_entries", "stray_legacy"]

LEGACY_PREFIX = "legacy-"  # keys of entries migrated from the older tuner's flat cache


def _is_entry(value: object) -> bool:
    """Whether a top-level value is shaped as the older tuner's entries are."""
    return isinstance(value, dict) and "chunk_size" in value


def is_legacy(doc: Mapping[str, Any]) -> bool:
    """Whether a decoded document is the older tuner's: no schema, every value an entry."""
    return "schema" not in doc and bool(doc) and all(_is_entry(v) for v in doc.values())


def stray_legacy(doc: Mapping[str, Any], *, own: Collection[str]) -> dict[str, Any]:
    """The older tuner's entries at the top level of a chunktune document, by their keys.

    An older tuner pointed at a migrated cache still stores there: it loads the whole
    document, sets its key at the top level beside chunktune's ``own`` keys and writes it
    back. Read as its entries, they are kept by the next write instead of dropped.
    """
    return {key: value for key, value in doc.items() if key not in own and _is_entry(value)}


def legacy_entries(
    doc: Mapping[str, Any], *, mtime: float, source: str
) -> tuple[dict[str, CacheEntry], list[tuple[str, str]]]:
    """The valid entries of an older tuner's document, and ``(key, why)`` for each one skipped.

    ``mtime`` (Unix seconds) dates them, since they carry no date; ``source`` names the
    file in their reason. ``doc`` is one :func:`is_legacy` accepts.
    """
    entries: dict[str, CacheEntry] = {}
    skipped: list[tuple[str, str]] = []
    for key, value in doc.items():
        name = f"{LEGACY_PREFIX}{key}"
        try:
            check_key(name)
            entries[name] = entry_from_table(_legacy_table(value, created=mtime, source=source))
        except BadEntry as exc:
            skipped.append((name, str(exc)))
    return entries, skipped


def _legacy_table(value: dict[str, Any], *, created: float, source: str) -> dict[str, Any]:
    """An older tuner's ``{"chunk_size", "per_candidate_ms", ...}`` in today's form."""
    per_ms = value.get("per_candidate_ms") or {}
    if not isinstance(per_ms, dict):
        raise BadEntry([f"per_candidate_ms: {shown(per_ms)} is not a table"])
    chunk = value["chunk_size"]
    table = {
        "chunk_size": NATIVE if chunk is None else chunk,
        "native_chunk": 0,  # not stored by the older tuner
        # a folder named by bytes that are no UTF-8 made every entry "malformed"
        "reason": f"migrated from the older tuner's cache {writable_text(source)}",
        "timings_ms": {(NATIVE if k == "None" else k): ms for k, ms in per_ms.items()},
        "policy": "legacy",
        "created": created,
        "signature": {"kind": "legacy"},
        "host": value.get("hostname") or "",
    }
    if value.get("model_file") is not None:
        table["model_file"] = value["model_file"]
    return table
