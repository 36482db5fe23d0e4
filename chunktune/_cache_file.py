"""The cache file's entries, read again only when the file changed, and written back whole.

:class:`CacheFile` holds what was last read of one file: its entries (the memo), what is
wrong with it when it is unusable, and the checksummed tables of its entries, so that a
re-read or a rewrite of an unchanged entry reuses them. Its stat (mtime, ctime, size,
inode, device) tells whether the file changed, except within the clock tick of its last
change (:mod:`chunktune._settled`), where a same-size rewrite may keep every field of it;
there a read compares the file's bytes with those last parsed, and parses only when they
differ. A writer reads the file under the write lock whatever its stat says, and parses it
unless its bytes and stat are those the memo was made of (read or written); an entry read
and left as it was is written back as the text last written for it, or (JSON) its table as
it stood in the file encoded again, not converted and hashed again. It takes no lock and
moves nothing aside: :mod:`chunktune._cache` does, around it.
"""

from __future__ import annotations

import errno
import hashlib
import logging
import stat
from collections.abc import Collection, Mapping
from pathlib import Path
from time import time_ns
from typing import Any

import attrs

from ._atomic import remove_stale_temps, write_atomic
from ._cache_checksums import CHECKSUM_FIELD, Known, stored_tables
from ._cache_entry import CacheEntry
from ._cache_format import (
    SCHEMA,
    CacheFormat,
    LeftAlone,
    Members,
    UnusableCache,
    document,
    encode_members,
    member_as_read,
    parse_cache,
    read_back,
)
from ._cache_json import Spans
from ._reading import MAX_CACHE_BYTES
from ._recent import forget as forget_recent
from ._settled import LastParse, Stat, Version, changed_lately, identity
from ._shown import shown, shown_some

__all__ = ["Broken", "CacheFile", "same_file"]

logger = logging.getLogger("chunktune")

_WARN_SKIPPED = 5  # entries named one by one in a warning; the rest are counted
# new entries a write reads back from their own text to keep as the memo: a sweep's few; past
# these (a merge, an import, a rebuild) the next read, if any, parses the file
_READ_BACK_MAX = 64


@attrs.frozen(eq=False)
class Broken:
    """What one parse found wrong with a cache file's bytes (completing "the file ...").

    Told apart by identity, never by value: two files may be wrong in the same words, and
    what is made of these very bytes (:mod:`chunktune._cache_quarantine` salvages their
    whole entries) holds wherever the memo of them goes, promoted to the stat alone or
    moved to the stat a failed move aside left.
    """

    why: str


def _digest(raw: bytes) -> bytes:
    """The SHA-256 of a document's bytes (11 ms for 15 MB here, a parse of them 1 s)."""
    return hashlib.sha256(raw).digest()


def same_file(a: Stat, b: Stat) -> bool:
    """Whether ``a`` and ``b`` agree on all but the ctime (which a link or a rename moves)."""
    return a[:3] == b[:3] and a[4] == b[4]


def _not_a_cache_file(path: Path) -> OSError:
    return OSError(
        errno.EINVAL, "it is no regular file (a directory, device, FIFO or socket)", str(path)
    )


def _left_alone(path: Path, why: str) -> OSError:
    return OSError(errno.EINVAL, f"it {why}; this chunktune leaves it as it is", str(path))


class CacheFile:
    """One cache file's entries, as last read, and the writing of them back.

    ``path`` is a real path (no link to follow); ``format`` is ``"json"`` or ``"toml"``.
    Shared between threads: each field is replaced whole, never changed in place.
    """

    def __init__(self, path: Path, format: CacheFormat, *, refused: str | None = None) -> None:
        self.path = path
        self.format = format
        # why no file can be kept at the path (one in /proc), completing "it ..."
        self._refused = refused
        self._memo: LastParse[dict[str, CacheEntry]] = LastParse()
        # a file left as it is (a newer chunktune's, or another program's): why
        self._left: LastParse[str] = LastParse()
        # an unusable file (what is wrong with it): not parsed again until the file
        # changes; chunktune._cache_quarantine moves it aside, or serves it read-only
        self.broken: LastParse[Broken] = LastParse()
        self._mtime = 0.0  # of the file being parsed: dates the older tuner's entries
        self._legacy_bytes: bytes | None = None
        # entries read from checksummed tables, and the tables written for them: a re-read
        # or rewrite of an unchanged entry reuses them (every checksum is still checked)
        self._known: dict[str, Known] = {}
        # each entry's text in the file last written: a rewrite reuses the unchanged ones
        self._members: Members = {}
        # the memo's entries (the very dict), the SHA-256 of the bytes they were read from
        # or written as, and where each entry stands in those bytes' text: a write finds the
        # file it reads under the lock byte for byte the memo's, and parses nothing
        self._content: tuple[dict[str, CacheEntry], bytes, Spans] | None = None
        # the document read under the write lock, and its spans, for the write that follows
        self._locked: tuple[bytes, Spans] | None = None

    def stat(self) -> Stat | None:
        """The file's identity, or None if there is none.

        Raises:
            OSError: the path names something that is no regular file. It is never
                read (a FIFO would block for good), moved aside or replaced (a device).
                Nor is one in ``/proc`` or ``/sys``, whatever is there.
        """
        if self._refused is not None:
            raise OSError(errno.EINVAL, f"it {self._refused}", str(self.path))
        try:
            st = self.path.stat()
        except FileNotFoundError:
            return None
        if not stat.S_ISREG(st.st_mode):
            raise _not_a_cache_file(self.path)
        return identity(st)  # its size: the write lock's wait reads it

    def parse(self, raw: bytes) -> tuple[dict[str, CacheEntry], Spans]:
        """The valid entries of ``raw``, each skipped one warned about, and where each stands
        in its text (:data:`chunktune._cache_json.Spans`; none for TOML).

        Raises:
            UnusableCache: the document as a whole cannot be used, or holds an entry
                whose checksum fails (named in the message).
        """
        spans: Spans = {}
        parsed = parse_cache(
            raw,
            self.format,
            mtime=self._mtime,
            source=str(self.path),
            known=self._known,
            spans=spans,
        )
        self._known = parsed.known
        if parsed.altered:
            # damage that left the file parsing (a cut at a line's end, a changed digit),
            # or a hand edit: the whole file is suspect, and goes aside as a broken one does
            count = len(parsed.altered)
            keys = shown_some(parsed.altered, _WARN_SKIPPED)
            raise UnusableCache(
                f"holds {count} {'entry' if count == 1 else 'entries'} ({keys}) whose checksum "
                "does not match: edited or damaged after chunktune wrote "
                f"{'it' if count == 1 else 'them'}, so never served (to fix a chunk size, "
                "pass manual= to resolve)"
            )
        # schema 0, the older tuner's flat file: migrated in memory, rewritten on the
        # next write, which first keeps a copy of the original bytes
        self._legacy_bytes = raw if parsed.legacy else None
        for key, why in parsed.skipped[:_WARN_SKIPPED]:
            logger.warning(
                "chunktune: skipping cache entry %s in %s (%s); it is never served, "
                "and the next write drops it",
                shown(key),
                self.path,
                why,
            )
        if len(parsed.skipped) > _WARN_SKIPPED:
            logger.warning(
                "chunktune: skipping %d more invalid cache entries in %s",
                len(parsed.skipped) - _WARN_SKIPPED,
                self.path,
            )
        return parsed.entries, spans

    def load(self, *, fresh: bool) -> dict[str, CacheEntry]:
        """The file's valid entries, shared with the memo: never changed in place (copy them).

        ``fresh``: read the file whatever its stat says (the write lock is held), and parse
        it unless its bytes (compared by their SHA-256) and its stat are those the memo was
        made of.

        Raises:
            UnusableCache: the file does not parse, is of the wrong shape or holds an
                altered entry (said again without reading it while it is unchanged).
            OSError: the file cannot be read, holds more than
                :data:`~chunktune._reading.MAX_CACHE_BYTES`, or a newer chunktune (or
                another program) wrote it: it is unavailable to this one, not broken.
        """
        now = time_ns()  # before the stat: a change after it is stamped later than this
        if fresh:
            self._locked = None
        stat = self.stat()
        if stat is None:
            return {}
        if stat[1] > MAX_CACHE_BYTES:  # no cache is this large: not read into memory, not moved
            raise OSError(
                errno.EFBIG,
                f"it holds more than {MAX_CACHE_BYTES // 2**20} MiB; expected a chunktune "
                "cache (about 1.6 KB an entry)",
                str(self.path),
            )
        if not fresh and (entries := self._memo.by_stat(stat)) is not None:
            return entries
        settled = not changed_lately(stat[0], stat[3], now)
        if settled:  # no write can carry these stamps now: the stat alone tells
            if (why := self._left.by_stat(stat)) is not None:
                raise _left_alone(self.path, why)
            if (broken := self.broken.by_stat(stat)) is not None:
                raise UnusableCache(broken.why)
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return {}
        # read within the tick (now, or when a memo was made): the bytes tell, and a read
        # and comparison cost far less than a parse (0.03 ms against 12.5 ms for 1000
        # entries here: benchmarks/racy_bench.py)
        if not fresh and (entries := self._memo.by_bytes(stat, raw, settled=settled)) is not None:
            return entries
        if fresh and (entries := self._unchanged(stat, raw, settled=settled)) is not None:
            return entries
        if (why := self._left.by_bytes(stat, raw, settled=settled)) is not None:
            raise _left_alone(self.path, why)
        if (broken := self.broken.by_bytes(stat, raw, settled=settled)) is not None:
            raise UnusableCache(broken.why)
        version: Version = (stat, None if settled else raw)
        self._mtime = stat[0] / 1e9
        try:
            entries, spans = self.parse(raw)
        except LeftAlone as exc:
            self._left.keep(version, str(exc))
            raise _left_alone(self.path, str(exc)) from None
        except UnusableCache as exc:
            self.broken.keep(version, Broken(str(exc)))
            raise
        self._memo.keep(version, entries)
        # an older tuner's file is migrated by the write that follows its parse: never skipped
        legacy = self._legacy_bytes is not None
        self._content = None if legacy else (entries, _digest(raw), spans)
        if fresh:
            self._locked = (raw, spans)
        return entries

    def _unchanged(self, stat: Stat, raw: bytes, *, settled: bool) -> dict[str, CacheEntry] | None:
        """The memo, if ``raw``, read under the write lock with ``stat``, is byte for byte
        what it was made of, and ``stat`` the stat it was kept with; else None.

        The bytes are read and compared whatever the stat says: on NFS a stat may lag
        behind another host's write, and within the clock tick of a change a same-size
        rewrite keeps it (:mod:`chunktune._settled`).
        """
        last, content = self._memo.last(), self._content
        if last is None or content is None or content[0] is not last[1]:
            return None
        (kept_stat, kept_raw), entries = last
        if kept_stat != stat or _digest(raw) != content[1]:
            return None
        if settled and kept_raw is not None:
            self._memo.keep((stat, None), entries)  # from now on the stat alone tells
        self._locked = (raw, content[2])
        return entries

    def forget(self) -> None:
        """Read the file afresh next time, whatever its stat says."""
        self._memo.forget()
        self._content = self._locked = None

    @property
    def backup_path(self) -> Path:
        """Where a migrated older tuner's file is kept, as it was."""
        return self.path.with_name(self.path.name + ".schema0")

    def remove_stale_temps(self) -> None:
        """Delete the temporary files of writers killed mid-write: the cache's and its backup's
        (caller holds the write lock, which every writer of them holds while it writes)."""
        remove_stale_temps(self.path, also=(self.backup_path,))

    def write(self, entries: Mapping[str, CacheEntry], *, replaced: Collection[str] = ()) -> None:
        """Replace the file (caller holds the write lock); back up a migrated older file once.

        An entry read from the file and written back as it is reuses its text written
        before, or (JSON) the table it was read from in the document read under the lock,
        encoded again (:func:`~chunktune._cache_format.member_as_read`). Those of
        ``replaced`` (and any other object) are converted, hashed and encoded afresh.

        Raises:
            OSError: the file (or the backup) cannot be written.
        """
        locked, self._locked = self._locked, None
        self.remove_stale_temps()
        if self._legacy_bytes is not None:
            backup = self.backup_path
            if not backup.exists():
                write_atomic(backup, self._legacy_bytes)
                logger.warning(
                    "chunktune: migrated the older tuner's cache %s to schema %d; "
                    "the original is kept as %s",
                    self.path,
                    SCHEMA,
                    backup,
                )
            self._legacy_bytes = None
        known = {k: seen for k, seen in self._known.items() if k not in replaced}
        as_read = self._as_read(entries, known, locked)
        tables = stored_tables({k: e for k, e in entries.items() if k not in as_read}, known)
        members = dict(
            sorted({**encode_members(tables, self.format, self._members), **as_read}.items())
        )
        data = document(members, self.format)
        write_atomic(self.path, data)
        self._members = members
        self._known = {
            k: seen
            if seen.stored is not None or k in as_read
            else Known(seen.checksum, seen.entry, tables[k])
            for k, seen in known.items()
            if k in entries and entries[k] is seen.entry
        }
        forget_recent()
        self._remember_written(data, tables)

    def _as_read(
        self,
        entries: Mapping[str, CacheEntry],
        known: Mapping[str, Known],
        locked: tuple[bytes, Spans] | None,
    ) -> Members:
        """The entries of ``entries`` read from the file, unchanged, that no table was made
        for, each with its text: the one in the file last written, or that of its very table
        in the document read under the lock (``locked``: its bytes and spans), encoded again.
        Neither costs a conversion or a hash (the first write of a process that read a large
        cache: 1.1 s at 10k), and the bytes are those any process writes for that table.
        """
        kept: Members = {}
        text: str | None = None
        for key, entry in entries.items():
            seen = known.get(key)
            if seen is None or seen.entry is not entry or seen.stored is not None:
                continue
            earlier = self._members.get(key)
            if earlier is not None and earlier[0] is seen:
                kept[key] = earlier
                continue
            if locked is None or key not in locked[1]:
                continue
            if text is None:
                text = locked[0].decode()  # spans are of a document that decoded
            member = member_as_read(text, locked[1][key], key, seen.checksum)
            if member is not None:
                kept[key] = (seen, member)
        return kept

    def _remember_written(self, data: bytes, tables: Mapping[str, dict[str, Any]]) -> None:
        """Keep what a read of the file just written (``data``: the texts of
        ``self._members``, those of ``tables`` made of them) parses to as the memo, so the
        writer's next read parses nothing: the entries it knew, and the others (at most
        :data:`_READ_BACK_MAX`) read back from their text as a parse reads them.

        The memo holds the bytes with the stat, as one read within the clock tick of a
        change does: the next read compares the file's bytes before it trusts the stat
        alone, so a file some other program replaced meanwhile is parsed as it is.
        """
        self._memo.forget()
        self._content = None
        try:
            stat = self.stat()
        except OSError:
            return
        if stat is None:
            return
        known = dict(self._known)
        # a parse reuses a known entry for a table of its checksum, and reads the others;
        # an entry written as it was read (no table made) is known by that very text
        fresh = {
            k: m
            for k, m in self._members.items()
            if k in tables and (k not in known or known[k].checksum != tables[k][CHECKSUM_FIELD])
        }
        if len(fresh) > _READ_BACK_MAX:
            return  # a merge, an import: read back, they would cost what a parse costs
        parsed = read_back(fresh, self.format) if fresh else None
        if parsed is not None and (parsed.skipped or parsed.altered):
            return  # not as written: the next read parses the file
        entries: dict[str, CacheEntry] = {}
        for key in self._members:
            if key in fresh:
                assert parsed is not None
                seen, table = parsed.known[key], tables[key]
                # written again as a fresh reader of the file writes it, so the bytes do not
                # depend on which process writes: JSON, the text it read (the table given,
                # an int where the entry read back holds a float); TOML, the entry read back
                # converted anew (reused only if that makes the same table)
                same = self.format == "json" or (
                    stored_tables({key: seen.entry})[key][CHECKSUM_FIELD] == table[CHECKSUM_FIELD]
                )
                known[key] = attrs.evolve(seen, stored=table) if same else seen
            entries[key] = known[key].entry
        self._known = known
        self._memo.keep((stat, data), entries)
        self._content = (entries, _digest(data), {})  # texts: self._members has them all
