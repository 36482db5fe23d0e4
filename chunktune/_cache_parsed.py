"""What one read of a cache file made, or found wrong, for the caller of that read.

:func:`parsed_file` turns :func:`~chunktune._cache_parse.parse_cache`'s reading of a file
into :class:`Parsed`, or refuses the whole file for an entry edited or damaged since it
was written, and warns of the entries skipped. A :class:`Broken` says what was wrong with
an unusable file's bytes; the OSErrors here, why a file is unavailable to this chunktune.
"""

from __future__ import annotations

import errno
import logging
from pathlib import Path

import attrs

from . import _tracebacks
from ._cache_checksums import Known
from ._cache_entry import CacheEntry
from ._cache_format import Decoded, UnusableCache
from ._cache_json import Spans
from ._cache_parse import ParsedCache
from ._cache_unread import Unread
from ._shown import shown, shown_file, shown_some

__all__ = ["Broken", "Parsed", "left_alone", "not_a_cache_file", "parsed_file", "too_large"]

logger = logging.getLogger("chunktune")

_WARN_SKIPPED = 5  # entries named one by one in a warning; the rest are counted


def _held(decoded: Decoded | None) -> list[Decoded]:
    """``decoded`` held to be taken once: a list's pop is atomic, so of threads racing on
    one :class:`Broken` one takes it, and a decoded 8 MiB TOML file is let go then."""
    return [] if decoded is None else [decoded]


@attrs.frozen(eq=False)
class Broken:
    """What one parse found wrong with a cache file's bytes (completing "the file ..."),
    and what it decoded of them, for their salvage.

    Told apart by identity, never by value: two files may be wrong in the same words, and
    what is made of these very bytes (:mod:`chunktune._cache_quarantine` salvages their
    whole entries) holds wherever the memo of them goes, promoted to the stat alone or
    moved to the stat a failed move aside left.
    """

    why: str
    _decoded: list[Decoded] = attrs.field(default=None, converter=_held, repr=False)

    def take_decoded(self) -> Decoded | None:
        """What the parse decoded of the bytes (:class:`~chunktune._cache_format.Decoded`),
        once: to the first caller, for its salvage; None after, or if nothing was kept."""
        try:
            return self._decoded.pop()
        except IndexError:
            return None


@attrs.frozen(eq=False)
class Parsed:
    """What one parse of a cache file's bytes made, for its caller alone: another thread's
    parse of the same file meanwhile never changes it."""

    entries: dict[str, CacheEntry]
    spans: Spans
    """Where each entry stands in the text (:data:`chunktune._cache_json.Spans`; none for
    TOML)."""
    known: dict[str, Known]
    """The entries read from checksummed tables: a write of them reuses their tables."""
    legacy: bool
    """The older tuner's file (schema 0): migrated in memory, and rewritten by the next
    write, which first keeps a copy of these very bytes."""
    unread: Unread
    """What a newer chunktune wrote that this one cannot read: the next write keeps it."""


def not_a_cache_file(path: Path) -> OSError:
    """Why the path, which names something that is no regular file, is never read."""
    return OSError(
        errno.EINVAL, "it is no regular file (a directory, device, FIFO or socket)", str(path)
    )


def too_large(path: Path, cap: int) -> OSError:
    """Why the file at ``path``, past ``cap`` bytes, is neither read nor moved aside."""
    return OSError(
        errno.EFBIG,
        f"it holds more than {cap // 2**20} MiB; expected a chunktune cache "
        "(about 1.6 KB an entry)",
        str(path),
    )


def left_alone(path: Path, why: str) -> OSError:
    """Why the file at ``path``, a newer chunktune's or another program's, is unavailable."""
    return OSError(errno.EINVAL, f"it {why}; this chunktune leaves it as it is", str(path))


def parsed_file(parsed: ParsedCache, spans: Spans, path: Path) -> Parsed:
    """``parsed``, the reading of the file at ``path`` (its ``spans``), each entry skipped
    warned about.

    Raises:
        UnusableCache: it holds an entry whose checksum fails (named in the message).
    """
    if parsed.altered:
        # damage that left the file parsing (a cut at a line's end, a changed digit),
        # or a hand edit: the whole file is suspect, and goes aside as a broken one does
        count = len(parsed.altered)
        keys = shown_some(parsed.altered, _WARN_SKIPPED)
        exc = UnusableCache(
            f"holds {count} {'entry' if count == 1 else 'entries'} ({keys}) whose checksum "
            "does not match: edited or damaged after chunktune wrote "
            f"{'it' if count == 1 else 'them'}, so never served (to fix a chunk size, "
            "pass manual= to resolve)"
        )
        exc.decoded = parsed.decoded  # for the salvage that follows
        raise exc
    unread = parsed.unread.entries
    # kept for good, so met on every parse of the file (each resolve's): said once a process
    # for each key; past a sixteenth of the memory, for the set of them, said again when it
    # changes: thousands remembered key by key (a newer fleet's whole cache) pushed every
    # failure out of that memory on each parse, and so themselves, said on every parse
    file, said = str(path), _tracebacks.first_time
    if len(unread) <= _tracebacks.MAX_FAILURES // 16:
        newer = [key for key in unread if said("newer cache entry", file, key)]
    else:
        newer = list(unread) if said("newer cache entries", file, repr(sorted(unread))) else []
    if newer:
        one = len(newer) == 1
        logger.warning(
            "chunktune: %s %s in %s %s whole (%s checksum matches) but this chunktune "
            "cannot read %s (%s): a newer chunktune's; never served here, and every write "
            "but `cache clear` keeps %s as %s",
            "cache entry" if one else f"{len(newer)} cache entries",
            shown_some(newer, _WARN_SKIPPED),
            shown_file(path),
            "is" if one else "are",
            "its" if one else "each one's",
            "it" if one else "them",
            next(why for key, why in parsed.skipped if key in newer),
            "it" if one else "them",
            "it is" if one else "they are",
        )
    skipped = [(key, why) for key, why in parsed.skipped if key not in unread]
    for key, why in skipped[:_WARN_SKIPPED]:
        logger.warning(
            "chunktune: skipping cache entry %s in %s (%s); it is never served, "
            "and the next write drops it",
            shown(key),
            shown_file(path),
            why,
        )
    if len(skipped) > _WARN_SKIPPED:
        logger.warning(
            "chunktune: skipping %d more invalid cache entries in %s",
            len(skipped) - _WARN_SKIPPED,
            shown_file(path),
        )
    return Parsed(parsed.entries, spans, parsed.known, parsed.legacy, parsed.unread)
