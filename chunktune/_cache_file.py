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
it stood in the file encoded again, not converted and hashed again
(:mod:`chunktune._cache_rewrite`). It takes no lock and moves nothing aside:
:mod:`chunktune._cache` does, around it.

Threads share one object, and a reader parses without the write lock while a writer holds
it: what a parse makes goes back to its caller (:class:`~chunktune._cache_parsed.Parsed`),
and what a write uses of the read before it (:class:`~chunktune._cache_rewrite.Locked`)
is set by that read, under the lock; no other thread's parse can hand its date, known
entries or older tuner's bytes to another's read or write.
"""

from __future__ import annotations

import errno
import logging
import stat
from collections.abc import Collection, Mapping
from pathlib import Path
from time import time_ns

from ._atomic import remove_stale_temps, write_atomic
from ._cache_checksums import Known
from ._cache_entry import CacheEntry
from ._cache_format import SCHEMA, CacheFormat, LeftAlone, Members, UnusableCache, document
from ._cache_json import Spans
from ._cache_parse import parse_cache
from ._cache_parsed import Broken, Parsed, left_alone, not_a_cache_file, parsed_file, too_large
from ._cache_rewrite import Content, Locked, Rewrite, digest, read_back_written, rewrite
from ._cache_toml import written_texts
from ._cache_unread import NOTHING_UNREAD, Unread
from ._reading import MAX_CACHE_BYTES
from ._recent import forget as forget_recent
from ._settled import LastParse, Stat, Version, changed_lately, identity
from ._shown import shown_file

__all__ = ["CacheFile", "same_file"]

logger = logging.getLogger("chunktune")


def same_file(a: Stat, b: Stat) -> bool:
    """Whether ``a`` and ``b`` agree on all but the ctime (which a link or a rename moves)."""
    return a[:3] == b[:3] and a[4] == b[4]


class CacheFile:
    """One cache file's entries, as last read, and the writing of them back.

    ``path`` is a real path (no link to follow); ``format`` is ``"json"`` or ``"toml"``.
    Shared between threads: each field is replaced whole, never changed in place.
    """

    def __init__(self, path: Path, format: CacheFormat, *, refused: str | None = None) -> None:
        self.path = path
        self.format = format
        # the format asked for; self.format is the one the file was last found in, which
        # machines whose settings disagree about it both keep (chunktune._cache_format)
        self._asked = format
        # why no file can be kept at the path (one in /proc), completing "it ..."
        self._refused = refused
        self._memo: LastParse[dict[str, CacheEntry]] = LastParse()
        # a file left as it is (a newer chunktune's, or another program's): why
        self._left: LastParse[str] = LastParse()
        # an unusable file (what is wrong with it, and what its parse decoded, for the
        # salvage): not parsed again until the file changes; chunktune._cache_quarantine
        # moves it aside, or serves it read-only
        self.broken: LastParse[Broken] = LastParse()
        # entries read from checksummed tables, and the tables written for them, by the
        # last parse or write of any thread: a hint that a parse reuses only for a table of
        # the same checksum, and a write only for the very entry object, so whichever
        # thread's it is, what is read and written is the same (test_cache_format pins both,
        # test_cache_file a reader thread's hint reused)
        self._known: Mapping[str, Known] = {}
        # each entry's text in the file last written: a rewrite reuses the unchanged ones
        # (writers alone touch it, under the write lock; each text is of the very Known)
        self._members: Members = {}
        # a write finds the file it reads under the lock byte for byte the memo's, and
        # parses nothing (checked against the memo's entries by identity: a reader's parse
        # may replace the two between a write's look at one and the other)
        self._content: Content | None = None
        # the document read under the write lock, for the write that follows: set by the
        # read, under the lock, that a writer makes before each write (readers never touch it)
        self._locked: Locked | None = None
        # what a newer chunktune wrote in the file last read or written that this one cannot
        # read: a write with no read under its hold of the lock keeps it
        self._unread: Unread = NOTHING_UNREAD

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
            raise not_a_cache_file(self.path)
        return identity(st)  # its size: the write lock's wait reads it

    def parse(self, raw: bytes, *, mtime: float) -> Parsed:
        """The valid entries of ``raw``, each skipped one warned about, and what a write of
        them reuses (:func:`~chunktune._cache_parsed.parsed_file`); ``mtime`` (Unix seconds,
        of the file read) dates the older tuner's.

        Raises:
            UnusableCache: the document as a whole cannot be used, or holds an entry
                whose checksum fails (named in the message); its subclass
                :class:`~chunktune._cache_format.LeftAlone` for a newer chunktune's file or
                another program's, to be left as it is.
        """
        spans: Spans = {}
        known = self._known
        # TOML: the entries whose text this process wrote, as it wrote them, are not decoded
        # again (another writer's put leaves them so): a parse costs what changed
        written = written_texts(self._members, known) if self.format == "toml" else None
        parsed = parse_cache(
            raw,
            self.format,
            mtime=mtime,
            source=str(self.path),
            known=known,
            spans=spans,
            written=written,
        )
        self._known = parsed.known  # a hint for the next parse (see __init__)
        self._found_as(parsed.found_as or self.format)
        return parsed_file(parsed, spans, self.path)

    def _found_as(self, fmt: CacheFormat) -> None:
        """Read and write the file as ``fmt`` from now on, the format it was found in (or,
        with no file, the one asked for), and say so where that is not the one asked for."""
        if fmt == self.format:
            return
        self.format = fmt
        self._members = {}  # each entry's text in the other format
        if fmt != self._asked:
            logger.warning(
                "chunktune: cache file %s holds %s, not the %s these settings ask for "
                "(a chunktune whose settings say %s wrote it); it is read and written as %s, "
                "so no machine sharing it loses its entries",
                shown_file(self.path),
                fmt.upper(),
                self._asked.upper(),
                fmt.upper(),
                fmt.upper(),
            )

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
            self._found_as(self._asked)  # a file made anew is of the format asked for
            self._unread = NOTHING_UNREAD
            return {}
        if stat[1] > MAX_CACHE_BYTES:  # no cache is this large: not read into memory, not moved
            raise too_large(self.path, MAX_CACHE_BYTES)
        if not fresh and (entries := self._memo.by_stat(stat)) is not None:
            return entries
        settled = not changed_lately(stat[0], stat[3], now)
        if settled:  # no write can carry these stamps now: the stat alone tells
            if (why := self._left.by_stat(stat)) is not None:
                raise left_alone(self.path, why)
            if (broken := self.broken.by_stat(stat)) is not None:
                raise UnusableCache(broken.why)
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            self._unread = NOTHING_UNREAD
            return {}
        # read within the tick (now, or when a memo was made): the bytes tell, and a read
        # and comparison cost far less than a parse (0.03 ms against 12.5 ms for 1000
        # entries here: benchmarks/racy_bench.py)
        if not fresh and (entries := self._memo.by_bytes(stat, raw, settled=settled)) is not None:
            return entries
        if fresh and (entries := self._unchanged(stat, raw, settled=settled)) is not None:
            return entries
        # what an earlier read found of a newer chunktune's is not these bytes' (a usable
        # parse sets theirs): the write of an unusable file's whole entries must not bring
        # back what that chunktune has since replaced, for it to serve (these bytes' own
        # stay in the copy moved aside)
        self._unread = NOTHING_UNREAD
        if (why := self._left.by_bytes(stat, raw, settled=settled)) is not None:
            raise left_alone(self.path, why)
        if (broken := self.broken.by_bytes(stat, raw, settled=settled)) is not None:
            raise UnusableCache(broken.why)
        version: Version = (stat, None if settled else raw)
        try:
            parsed = self.parse(raw, mtime=stat[0] / 1e9)
        except LeftAlone as exc:
            self._let_go_of_decoded()
            self._left.keep(version, str(exc))
            raise left_alone(self.path, str(exc)) from None
        except UnusableCache as exc:
            # a table in the other format is salvaged, and its whole entries written, in it
            self._found_as(exc.found_in(self.format))
            # with what the parse decoded: the quarantine hands it to the salvage
            self.broken.keep(version, Broken(str(exc), exc.decoded))
            raise
        self._let_go_of_decoded()
        entries = parsed.entries
        self._memo.keep(version, entries)
        # an older tuner's file is migrated by the write that follows its parse: never skipped
        spans, known, legacy, unread = parsed.spans, parsed.known, parsed.legacy, parsed.unread
        self._unread = unread
        self._content = None if legacy else Content(entries, digest(raw), spans, known, unread)
        if fresh:
            self._locked = Locked(raw, spans, known, legacy=legacy, unread=unread)
        return entries

    def _let_go_of_decoded(self) -> None:
        """Drop what the last unusable read decoded, unless salvaged already: a file read
        now as usable (or left alone) is not those bytes, which no salvage will ask for."""
        last = self.broken.last()
        if last is not None:
            last[1].take_decoded()

    def _unchanged(self, stat: Stat, raw: bytes, *, settled: bool) -> dict[str, CacheEntry] | None:
        """The memo, if ``raw``, read under the write lock with ``stat``, is byte for byte
        what it was made of, and ``stat`` the stat it was kept with; else None.

        The bytes are read and compared whatever the stat says: on NFS a stat may lag
        behind another host's write, and within the clock tick of a change a same-size
        rewrite keeps it (:mod:`chunktune._settled`).
        """
        last, content = self._memo.last(), self._content
        if last is None or content is None or content.entries is not last[1]:
            return None
        (kept_stat, kept_raw), entries = last
        if kept_stat != stat or digest(raw) != content.digest:
            return None
        if settled and kept_raw is not None:
            self._memo.keep((stat, None), entries)  # from now on the stat alone tells
        self._locked = Locked(raw, content.spans, content.known, unread=content.unread)
        return entries

    def take_salvaged(self, known: Mapping[str, Known], unread: Unread) -> None:
        """Keep, for the write that follows (the caller holds the write lock), what the
        salvage of the unusable file last read found of a newer chunktune's: the tables of
        its entries (``known``) and what this one cannot read (``unread``), written back as
        a usable file's read has them written (:mod:`chunktune._cache_salvage`)."""
        self._known = known
        self._unread = unread

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

    def unread_keys(self) -> frozenset[str]:
        """The keys of the entries a newer chunktune wrote that this one cannot read, in the
        file as last read or written."""
        return frozenset(self._unread.entries)

    def write(
        self,
        entries: Mapping[str, CacheEntry],
        *,
        replaced: Collection[str] = (),
        dropped: Collection[str] = (),
    ) -> None:
        """Replace the file (caller holds the write lock); back up a migrated older file once.

        An entry read from the file and written back as it is reuses its text written
        before, or (JSON) the table it was read from in the document read under the lock,
        encoded again (:func:`~chunktune._cache_format.member_as_read`). Those of
        ``replaced`` (and any other object) are converted, hashed and encoded afresh.
        What a newer chunktune wrote that this one cannot read is written back as it was
        read: no command here can show it, so none deletes it but ``cache clear``, which
        names its entries' keys in ``dropped`` (and a key stored anew replaces it).

        Raises:
            OSError: the file (or the backup) cannot be written.
        """
        locked, self._locked = self._locked, None
        self.remove_stale_temps()
        if locked is not None and locked.legacy:
            self._back_up(locked.raw)
        # no read under this hold of the lock (a broken file's entries written back, then
        # its writer's change): the hint serves, each of its tables reused for its very entry
        known = self._known if locked is None else locked.known
        gone = entries.keys() if not dropped else {*entries, *dropped}
        unread = (self._unread if locked is None else locked.unread).without(gone)
        made = rewrite(
            entries, known, replaced=replaced, members=self._members, locked=locked, fmt=self.format
        )
        data = document(made.members, self.format, unread)
        write_atomic(self.path, data)
        self._members = made.members
        self._known = made.known
        self._unread = unread
        forget_recent()
        self._remember_written(data, made, unread)

    def _back_up(self, raw: bytes) -> None:
        """Keep ``raw``, the older tuner's file this write migrates, unless a copy is kept."""
        backup = self.backup_path
        if not backup.exists():
            write_atomic(backup, raw)
            logger.warning(
                "chunktune: migrated the older tuner's cache %s to schema %d; "
                "the original is kept as %s",
                shown_file(self.path),
                SCHEMA,
                shown_file(backup),
            )

    def _remember_written(self, data: bytes, made: Rewrite, unread: Unread) -> None:
        """Keep what a read of the file just written (``data``, of ``made``) parses to as the
        memo, so the writer's next read parses nothing
        (:func:`~chunktune._cache_rewrite.read_back_written`).

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
        content = read_back_written(made, data, self.format, unread)
        if content is not None:
            self._known = content.known
            self._memo.keep((stat, data), content.entries)
            self._content = content
