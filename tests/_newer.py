"""A newer chunktune's tables, made by hand: today's fields plus those it adds, each
checksummed as chunktune checksums a table (a newer one's are made the same way: another
way would need a new schema)."""

from __future__ import annotations

from typing import Any

from _full_entry import entry

from chunktune._cache_checksums import CHECKSUM_FIELD, checksum, stored_tables


def newer_table(key: str, **fields: Any) -> dict[str, Any]:
    """The table a newer chunktune writes for ``key``: today's fields plus ``fields``."""
    table = {k: v for k, v in stored_tables({key: entry()})[key].items() if k != CHECKSUM_FIELD}
    table.update(fields)
    return {CHECKSUM_FIELD: checksum(key, table), **table}


def unreadable_table(key: str, batch_ms: float = 9.4) -> dict[str, Any]:
    """A newer chunktune's table for ``key`` that this one cannot read (whole: its checksum
    matches): its timings name a candidate this one does not know."""
    return newer_table(key, timings_ms={"native": 12.5, "8": 10.0, "batch": batch_ms})
