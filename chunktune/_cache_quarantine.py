"""What becomes of a cache file that cannot be used as it is: moved aside, or served read-only.

A file that does not parse, is of the wrong shape or holds an altered entry is moved
aside with its bytes intact, its whole entries (:func:`chunktune._cache_salvage.salvage`)
written to a fresh file; one that cannot be moved aside (a read-only folder or mount, a
write lock that cannot be taken, a disk too full for the fresh file) serves those whole
entries read-only, with one warning, until it can. A cache that cannot be read at all is
said to be unavailable, once for each cause (a full disk, then a permission taken away).
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from pathlib import Path

from ._cache_entry import CacheEntry
from ._cache_file import CacheFile, same_file
from ._cache_parsed import Broken
from ._cache_salvage import Salvaged, salvage, salvaged
from ._errors import CacheError
from ._recent import forget as forget_recent
from ._settled import Version
from ._shown import shown_file

__all__ = ["Quarantine"]

logger = logging.getLogger("chunktune")

_UNAVAILABLE = "unavailable"  # the warnings that the cache cannot be used, one a cause


def _cause(exc: OSError) -> str:
    """What keeps the cache from use, as said: the path is said once, and str(exc) would
    repeat it after an [Errno N]."""
    return str(exc.strerror or exc)


def _said_once(exc: OSError) -> tuple[str, object]:
    """What is warned about once for ``exc``: its cause. An error's own words where it has
    an errno; else its kind, for its words carry figures (a write lock's wait is longer for
    a larger file, and brief for a file served read-only) that differ for the same cause."""
    return (_UNAVAILABLE, exc.strerror if exc.strerror else type(exc))


def _link_aside(path: Path, aside: Path) -> bool:
    """Give ``path``'s file the name ``aside`` too (True), or, where the file system makes
    no hard links, rename it there (False).

    Raises:
        OSError: neither can be done (a read-only folder or mount); FileNotFoundError:
            no file is there.
    """
    try:
        os.link(path, aside)  # the cache path is a real path: no link to follow
    except FileNotFoundError:
        raise
    except OSError:
        os.replace(path, aside)
        return False
    return True


def _fresh_aside(path: Path) -> Path:
    """A name aside for ``path`` that no file has yet: the time, the process id, a count."""
    name = f"{path.name}.corrupt-{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}"
    aside = path.with_name(name)
    # the write lock is held, so no other move runs meanwhile: a name that is taken is an
    # earlier move's in the same second (this process's own), and its bytes must stay
    taken = 1
    while os.path.lexists(aside):
        taken += 1
        aside = path.with_name(f"{name}-{taken}")
    return aside


class Quarantine:
    """The unusable file that a :class:`~chunktune._cache_file.CacheFile` last read
    (``CacheFile.broken``): moving it aside, or serving its whole entries read-only.

    Shared between threads: each field is replaced whole, and each warning is given once.
    """

    def __init__(self, file: CacheFile) -> None:
        self._file = file
        # its whole entries while it cannot be moved aside: not salvaged again until the
        # file changes (then another Broken is read: the memo of these bytes is promoted,
        # or moved to the stat a failed move left, but stays the same Broken)
        self._salvaged: tuple[Broken, dict[str, CacheEntry]] | None = None
        # what was warned about (at most once each): setdefault, atomic, so threads that
        # race on one cache object warn once without a lock a fork could leave held
        self._said: dict[object, object] = {}

    def _linked_aside_before(self) -> Path | None:
        """The name aside a mover killed mid-move gave this very file, if there is one.

        Such a mover linked the damaged file aside and died before the fresh file replaced
        it; moving it again under that name keeps one copy aside, not two names of it.
        """
        path = self._file.path
        prefix = f"{path.name}.corrupt-"
        with contextlib.suppress(OSError), os.scandir(path.parent) as found:
            for item in found:
                with contextlib.suppress(OSError):
                    if item.name.startswith(prefix) and os.path.samefile(item.path, path):
                        return Path(item.path)
        return None

    def move_aside(self, why: str) -> dict[str, CacheEntry]:
        """Move an unusable file aside, bytes intact, and start afresh with its whole entries.

        The caller holds the write lock. Returns the entries kept (written to the fresh
        file: :func:`chunktune._cache_salvage.salvage`). The file is linked aside and the
        fresh one replaces it, so a process killed meanwhile leaves the unusable file where
        it was, whole entries and all, for the next one to move; a file system without
        hard links has it renamed aside first instead.

        Raises:
            OSError: the kept entries cannot be written (a full disk): the file stays (or,
                renamed, is moved back), to be served read-only; should the move back fail
                too, a warning says where it went.
        """
        path = self._file.path
        earlier = self._linked_aside_before()
        if earlier is not None:  # a mover killed before its fresh file replaced this one
            aside, linked = earlier, True
        else:
            aside = _fresh_aside(path)
            try:
                linked = _link_aside(path, aside)
            except FileNotFoundError:
                return {}
        forget_recent()
        try:
            data: bytes | None = aside.read_bytes()
        except OSError:
            data = None
        # what the read that found the file unusable decoded (salvage checks that these
        # bytes, read again from the name aside, are those): TOML is not decoded again
        last = self._file.broken.last()
        decoded = None if last is None else last[1].take_decoded()
        found = Salvaged({}) if data is None else salvaged(data, self._file.format, decoded)
        kept = found.entries
        try:
            if kept or found.unread:
                # what a newer chunktune wrote is kept as a usable file's write keeps it:
                # the machines already upgraded share the fresh file, not the copy aside
                self._file.take_salvaged(found.known, found.unread)
                self._file.write(kept)
                self._file.forget()
            elif linked:
                path.unlink(missing_ok=True)
        except OSError:
            self._undo_move(aside, linked, data, why, _kept(len(kept), len(found.unread.entries)))
            raise
        logger.warning(
            "chunktune: cache file %s %s; moved it to %s and started a fresh cache%s",
            shown_file(path),
            why,
            shown_file(aside),
            _keeping(_kept(len(kept), len(found.unread.entries))),
        )
        return kept

    def _undo_move(
        self, aside: Path, linked: bool, data: bytes | None, why: str, kept: str
    ) -> None:
        """Undo a move whose whole entries (``kept``: :func:`_kept`'s words for them) could
        not be written, or warn where it went."""
        if linked:
            # the file never left: it serves its whole entries read-only, as one that
            # cannot be moved aside does
            with contextlib.suppress(OSError):
                aside.unlink()
            self._kept_in_place(data)
            return
        # a full disk: moved back, the file serves its whole entries read-only, as
        # one that cannot be moved aside does; left aside, they would be lost to the
        # cache, and the next write would start a file without them
        path = self._file.path
        try:
            os.replace(aside, path)
            self._kept_in_place(data)
        except OSError:
            # the file is aside for good: where it went must be said, whatever follows
            logger.warning(
                "chunktune: cache file %s %s; moved it to %s, but could not write %s to a "
                "fresh cache",
                shown_file(path),
                why,
                shown_file(aside),
                kept,
            )

    def _kept_in_place(self, data: bytes | None) -> None:
        """The unusable file last read, linked aside and unlinked there (or moved aside and
        back) under the write lock, is still that file: the link or the move changed its
        ctime, not ``data``, its bytes (None: unknown, so it is read again)."""
        broken = self._file.broken.last()
        try:
            stat = self._file.stat()
        except OSError:
            return
        if broken is None or stat is None or data is None:
            return
        if same_file(broken[0][0], stat):  # changed just now: the bytes tell
            self._file.broken.keep((stat, data), broken[1])  # its whole entries follow

    def read_only(self, exc: OSError) -> dict[str, CacheEntry] | None:
        """The whole entries of the unusable file that ``exc`` kept from being moved aside,
        served as they are (one warning); None if the file there is no longer that one.

        The same entries a move aside would keep (:func:`chunktune._cache_salvage.salvage`),
        read once per version of the file.
        """
        found = self.still_broken()
        if found is None:
            return None  # moved aside (then its entries could not be written), or replaced
        version, broken = found
        if self._salvaged is not None and self._salvaged[0] is broken:
            return self._salvaged[1]
        raw = version[1]  # read within the tick of its change: the very bytes found unusable
        if raw is None:
            try:
                raw = self._file.path.read_bytes()
            except OSError:
                return None
        kept = salvage(raw, self._file.format, broken.take_decoded())
        self._salvaged = (broken, kept)
        # a failed write for the same cause would only say again what this says
        self._first_time(_said_once(exc))
        seen = version[0]  # a failed move's link changes the ctime each time: not said again
        if not self._first_time(("read-only", seen[:3], seen[4])):
            return kept  # another thread salvaged this very file at the same moment
        logger.warning(
            "chunktune: cache file %s %s; could not move it aside (%s), so serving the %d of "
            "its entries that are whole, read-only: nothing is written to it",
            shown_file(self._file.path),
            broken.why,
            exc,
            len(kept),
        )
        return kept

    def still_broken(self) -> tuple[Version, Broken] | None:
        """What was read of the file there, and what is wrong with it, if it is the unusable
        one last read; else None."""
        try:
            stat = self._file.stat()
        except OSError:
            return None
        broken = self._file.broken.last()
        if stat is None or broken is None or broken[0][0] != stat:
            return None
        raw = broken[0][1]
        if raw is not None:  # found unusable within the tick of its change: the bytes tell
            try:
                if self._file.path.read_bytes() != raw:
                    return None
            except OSError:
                return None
        return broken

    def served_read_only(self) -> bool:
        """Whether the file there is the unusable one already served read-only.

        Its lock's holder then gets :data:`~chunktune._cache_lock.WRITE_LOOK_S`, not the
        whole stall: a writer stuck holding it would otherwise cost every later read and
        write of this cache that stall, while a live one moves the file at once (a write
        given up at once would lose its entry to it).
        """
        salvaged, found = self._salvaged, self.still_broken()
        return salvaged is not None and found is not None and salvaged[0] is found[1]

    def _first_time(self, what: object) -> bool:
        """Whether ``what`` is warned about for the first time: True once, however threads race."""
        mark = object()
        return self._said.setdefault(what, mark) is mark

    def unavailable(self, exc: OSError, *, strict: bool) -> dict[str, CacheEntry]:
        """No entries, for a cache that ``exc`` keeps from being read or written (one warning
        a cause: a trainer that runs for days hears of a second cause, not of each failure).

        Raises:
            CacheError: when ``strict``, instead of the warning.
        """
        path = self._file.path
        if strict:
            raise CacheError(
                f"cannot read the cache {shown_file(path)}: {exc.strerror or exc}"
            ) from exc
        if self._first_time(_said_once(exc)):
            # a write lock given up on is no lasting state: the next write takes it again,
            # and the decision that was not written is kept in this process (_unstored)
            going_on = (
                "not written this time; later writes try again"
                if isinstance(exc, TimeoutError)
                else "continuing without a cache"
            )
            logger.warning(
                "chunktune: cache %s is unavailable (%s); %s",
                shown_file(path),
                _cause(exc),
                going_on,
            )
        return {}


def _whole(count: int) -> str:
    """``the 3 of its entries that were whole``; one entry reads ``... that was whole``."""
    return f"the {count} of its entries that {'was' if count == 1 else 'were'} whole"


def _kept(count: int, newer: int) -> str:
    """``the 3 of its entries that were whole`` and ``the 1 a newer chunktune wrote`` that
    this one cannot read, of those there are; nothing for none."""
    kept = [_whole(count)] if count else []
    if newer:
        kept.append(f"the {newer} a newer chunktune wrote that this one cannot read")
    return " and ".join(kept)


def _keeping(kept: str) -> str:
    """``, keeping`` what :func:`_kept` words, if anything."""
    return f", keeping {kept}" if kept else ""
