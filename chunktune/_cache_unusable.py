"""What the last read of an unusable cache file decoded, for the salvage of those bytes.

A cache file that cannot be used as it is goes aside, or is served read-only, with the
entries :func:`chunktune._cache_salvage.salvage` finds whole in the same bytes, right
after the read that found it unusable. Salvage starts from the document as a whole (a
file that decodes keeps every entry whose checksum matches), and TOML decodes slowly
(1.5 s for 8.6 MiB, against 33 ms as JSON): so the read leaves what it decoded here, or
that the bytes did not decode, and the salvage of equal bytes takes it instead of
decoding them again; with it, the entries the read built of the tables whose checksum
matched (0.85 s for 8 MiB of TOML), which the salvage takes for tables of those very
checksums. It holds one document at most, the last unusable read's in this process:
taken by its salvage, dropped by the next read that is usable. Threads race on it
harmlessly: a salvage that finds another file's document (or none) decodes its own.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # _cache_format keeps what it decodes here
    from collections.abc import Mapping

    from ._cache_checksums import Known
    from ._cache_format import CacheFormat

__all__ = ["forget", "recall", "remember", "remember_undecoded"]

# (the bytes read, their format, whether they decoded, the document, the entries built
# of its checksummed tables), replaced whole
_last: tuple[bytes, CacheFormat, bool, Any, Mapping[str, Known]] | None = None


def remember(
    raw: bytes, fmt: CacheFormat, document: Any, built: Mapping[str, Known] | None = None
) -> None:
    """Keep ``document``, what ``raw`` decoded to, for the salvage of these bytes, and
    ``built``: the entries read of its tables whose checksum matched, by key."""
    global _last
    _last = (raw, fmt, True, document, built or {})


def remember_undecoded(raw: bytes, fmt: CacheFormat) -> None:
    """Keep that ``raw`` does not decode as ``fmt`` (decode raised UnusableCache)."""
    global _last
    _last = (raw, fmt, False, None, {})


def forget() -> None:
    """Drop the document kept: the last file read was usable, and is salvaged by nobody."""
    global _last
    _last = None


def recall(raw: bytes, fmt: CacheFormat) -> tuple[bool, Any, Mapping[str, Known]] | None:
    """Whether bytes equal to ``raw`` decoded as ``fmt``, to what document (None if they
    did not), and the entries built of its checksummed tables, taken from the memo; None
    if it holds no such bytes."""
    global _last
    last = _last
    # equal bytes decode alike: a move aside reads them again, from the name aside
    if last is None or last[1] != fmt or (last[0] is not raw and last[0] != raw):
        return None
    if _last is last:  # taken: salvage needs it once (another thread's may be kept by now)
        _last = None
    return last[2], last[3], last[4]
