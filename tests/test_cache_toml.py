"""A TOML cache decoded around the entries a writer wrote: only what changed is decoded,
what is read is what a decoding of the whole reads, and every byte written is the same."""

from __future__ import annotations

import shutil
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from _cache_cli import entry
from _forking import run_forked_all

from chunktune import CacheEntry, DecisionCache
from chunktune._cache_checksums import CHECKSUM_FIELD, checksum, stored_tables
from chunktune._cache_format import UnusableCache, encode, encode_tables
from chunktune._cache_parse import ParsedCache, parse_cache
from chunktune._cache_toml import Written, toml_reusing, written_texts

# keys and fields a TOML writer must quote or escape, and text that looks like TOML's own
ODD: dict[str, CacheEntry] = {
    "plain.balanced": entry(4),
    "a.b.c": entry(5, host="dots.and[brackets]"),
    "": entry(6, reason="an empty key"),
    'q"uote\\d.p': entry(7, reason='say "hi" \\ there'),
    "ünï\u202ecode\u200b.p": entry(8, host="h\u202eost", reason="ünïcode\u200b"),
    "line\nbreak.p": entry(9, reason="two\nlines\r\n[entries.fake]\n"),
    "[entries.k]": entry(10, reason='[entries."k"]\nx = 1'),
    "tab\there.p": entry(11, signature={"kind": "sim", "na me": "v\u0000l", "emoji": "\U0001f600"}),
}
TRIPLE = {"triple.p": entry(12, reason="'''quoted''' and \"\"\"more\"\"\"")}


def _writer(path: Path, entries: dict[str, CacheEntry]) -> DecisionCache:
    """A writer that wrote ``entries`` (and so holds each one's text as written)."""
    cache = DecisionCache(path)
    assert cache.update(entries)
    return cache


@pytest.fixture
def decoded(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every text tomllib decodes, in order."""
    seen: list[str] = []
    real = tomllib.loads

    def counted(text: str, **kw: Any) -> dict[str, Any]:
        seen.append(text)
        return real(text, **kw)

    monkeypatch.setattr(tomllib, "loads", counted)
    return seen


def test_a_writers_put_after_another_processs_decodes_only_what_that_one_changed(
    tmp_path: Path, decoded: list[str]
) -> None:
    """After another writer's put, the next put decodes a small part of the file, not all of it."""
    path = tmp_path / "c.toml"
    mine = _writer(path, {f"k{i}.p": entry(i % 8 + 1) for i in range(40)})
    assert DecisionCache(path).put("theirs.p", entry(3))
    size = path.stat().st_size
    del decoded[:]
    assert mine.put("mine.p", entry(5))
    assert decoded and max(map(len, decoded)) < size / 10
    # each of its own 40 entries as its header alone: only theirs.p's fields are decoded
    assert [text.count("chunk_size = ") for text in decoded if "theirs.p" in text] == [1]
    assert set(mine.entries()) == {*(f"k{i}.p" for i in range(40)), "theirs.p", "mine.p"}


@pytest.mark.parametrize(
    "entries", [pytest.param(ODD, id="odd"), pytest.param({**ODD, **TRIPLE}, id="triple-quotes")]
)
def test_a_put_reusing_its_own_text_writes_what_a_fresh_process_writes(
    tmp_path: Path, entries: dict[str, CacheEntry]
) -> None:
    """Odd keys and text: after another's put, the writer's put is byte for byte a fresh one's."""
    path = tmp_path / "c.toml"
    mine = _writer(path, entries)
    assert DecisionCache(path).put("theirs\u202e.p", entry(3, reason="[entries.x]"))
    fresh = tmp_path / "fresh" / "c.toml"
    fresh.parent.mkdir()
    shutil.copyfile(path, fresh)
    new = entry(5)
    assert mine.put("mine.p", new)
    assert DecisionCache(fresh).put("mine.p", new)
    assert path.read_bytes() == fresh.read_bytes()
    theirs = DecisionCache(path).entries()
    assert path.read_bytes() == encode(theirs, "toml")
    assert mine.entries() == theirs and list(mine.entries()) == list(theirs)


def test_puts_from_two_processes_at_once_keep_every_entry(tmp_path: Path) -> None:
    """Two processes putting into one TOML cache, each reusing its own text: none is lost."""
    path = tmp_path / "c.toml"
    _writer(path, {f"k{i}.p": entry(i % 8 + 1) for i in range(30)})

    def puts(tag: str) -> Callable[[], None]:
        def run() -> None:
            cache = DecisionCache(path)
            cache.entries()  # the first put reuses what this read, as a trainer's does
            for i in range(12):
                if not cache.put(f"{tag}{i}.p", entry(i % 8 + 1)):
                    raise SystemExit(3)

        return run

    assert run_forked_all([puts("a"), puts("b")], hang_guard_s=60) == [0, 0]
    wanted = {*(f"k{i}.p" for i in range(30)), *(f"{t}{i}.p" for t in "ab" for i in range(12))}
    assert set(DecisionCache(path).entries()) == wanted


# ---------------------------------------------------------------- damage: decoded whole


def _parsed(raw: bytes, written: Written | None, known: Any) -> tuple[str, Any]:
    """What parse_cache makes of ``raw``: the parse, or the exception (with what it decoded)."""
    try:
        parsed = parse_cache(raw, "toml", mtime=0.0, source="c", known=known, written=written)
    except UnusableCache as exc:
        got = exc.decoded
        return type(exc).__name__, (str(exc), got and (got.whole, got.document))
    got = parsed.decoded
    return "parsed", (parsed, got and (got.whole, got.document, got.built))


def _damaged(text: str, key_text: str) -> dict[str, str]:
    """``text`` damaged around the entry whose text is ``key_text``, in ways that a decoding
    of the whole refuses or reads otherwise than the entry as written."""
    at = text.index(key_text)
    end = at + len(key_text)
    head = key_text.partition("\n")[0]
    spaced = head.replace("[entries.", "[ entries . ")
    digit = next(i for i in range(at + len(head), end) if text[i].isdigit())
    flipped = "1" if text[digit] != "1" else "2"
    cut = text.rindex("\n", at, end - 1) + 1
    # the entry's text inside a multi-line string of a table of its own
    in_string = text[:at] + '[notes]\nnote = """\n' + key_text + '"""\n\n' + text[end:]
    in_literal = text[:at] + "[notes]\nnote = '''\n" + key_text + "'''\n\n" + text[end:]
    # the entry's text in a comment of a table of its own: its lines are that table's keys
    noted = "\n[notes]\n# " + key_text
    return {
        "digit": text[:digit] + flipped + text[digit + 1 :],
        "twice": text + "\n" + key_text,
        "subtable-later": text + f"\n{head[:-1]}.extra]\nx = 1\n",
        "key-after": text[:end] + "extra = 1\n" + text[end:],
        "cut-at-line": text[:cut],
        "cut-mid-line": text[: cut - 3],
        # its last line break cut (the last entry, whoever wrote it, no longer as written)
        "cut-last-break": text[:-1],
        "inline-entries": text.replace("\n", "\nentries = {}\n", 1),
        "in-a-string": in_string,
        # and its header (an empty table) elsewhere: only that is the entry's table
        "in-a-string-empty-too": in_string + "\n" + head + "\n",
        "in-a-literal-string": in_literal,
        "in-a-literal-string-empty-too": in_literal + "\n" + head + "\n",
        # a header line's text past the start of a line is no header: nothing stands as written
        "in-a-comment-empty-too": text[:at] + text[end:] + noted + "\n" + head + "\n",
        # arrays nested past a cache's depth, and past what the decoder's recursion reaches
        "nested-deep": text + "\n[notes]\nx = " + "[" * 600 + "]" * 600 + "\n",
        "nested-past-recursion": text + "\n[notes]\nx = " + "[" * 3000 + "]" * 3000 + "\n",
        # the document's own keys of the wrong shape, or of a newer schema, its entries intact
        "schema-a-string": text.replace("schema = 1\n", 'schema = "one"\n', 1),
        "schema-newer": text.replace("schema = 1\n", "schema = 99\n", 1),
        "checksums-a-number": text.replace('checksums = "sha256"\n', "checksums = 5\n", 1),
        "in-an-array": text[:at] + "note = [\n" + key_text + "]\n" + text[end:],
        # the header then names a table in the array's last element
        "array-of-entries": text[:at] + "[[entries]]\n" + text[at:],
        "crlf": text.replace("\n", "\r\n"),
        "header-spaced": text[:at] + spaced + text[at + len(head) :],
    }


def test_each_damage_near_an_entry_as_written_reads_as_a_decoding_of_the_whole(
    tmp_path: Path,
) -> None:
    """Digit changed, entry twice, cut, sub-table or key added: as decoded whole, every one."""
    path = tmp_path / "c.toml"
    mine = _writer(path, {**ODD, "k1.p": entry(1), "k2.p": entry(2)})
    file = mine._file
    assert DecisionCache(path).put("theirs.p", entry(3))
    written = written_texts(file._members, file._known)
    assert set(written) == {*ODD, "k1.p", "k2.p"}
    raw = path.read_bytes()
    assert toml_reusing(raw, written) is not None
    assert _parsed(raw, written, file._known) == _parsed(raw, None, file._known)
    seen = set()
    for key_text in (written["k1.p"][0], written["[entries.k]"][0], written[""][0]):
        for why, text in _damaged(raw.decode(), key_text).items():
            damaged = text.encode()
            got = _parsed(damaged, written, file._known)
            assert got == _parsed(damaged, None, file._known), why
            seen.add((why, got[0]))
    # the damages reach each way a decoding of the whole goes
    assert {kind for _, kind in seen} == {"parsed", "UnusableCache", "NewerCache"}
    assert ("digit", "parsed") in seen and ("twice", "UnusableCache") in seen


@pytest.mark.parametrize(
    "damage",
    [
        pytest.param(lambda t: t + '\n[entries."k1.p".extra]\nx = 1\n', id="subtable-later"),
        pytest.param(lambda t: t.replace("chunk_size = 1\n", "chunk_size = 3\n", 1), id="digit"),
    ],
)
def test_an_entry_no_longer_as_written_is_decoded_and_found_altered(
    tmp_path: Path, damage: Callable[[str], str]
) -> None:
    """A writer's own entry changed in the file is decoded again and named altered, not reused."""
    path = tmp_path / "c.toml"
    mine = _writer(path, {"k1.p": entry(1), "k2.p": entry(2)})
    file = mine._file
    path.write_text(damage(path.read_text()))
    written = written_texts(file._members, file._known)
    parsed = parse_cache(
        path.read_bytes(), "toml", mtime=0.0, source="c", known=file._known, written=written
    )
    assert isinstance(parsed, ParsedCache)
    assert parsed.altered == ("k1.p",) and set(parsed.entries) == {"k2.p"}
    # the salvage that follows starts from the whole document: every table as it stands
    assert parsed.decoded is not None
    assert parsed.decoded.document == tomllib.loads(path.read_text())


def test_an_entry_written_in_another_form_than_it_was_read_is_decoded_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A table read with an int date, written back with a float one: its text is decoded."""
    from chunktune import _cache_rewrite

    # a write past what it reads back (a merge's): the entry is known as it was read
    monkeypatch.setattr(_cache_rewrite, "READ_BACK_MAX", 0)
    path = tmp_path / "c.toml"
    tables = stored_tables({"k1.p": entry(1), "k2.p": entry(2)})
    hand = {**tables["k1.p"], "created": int(tables["k1.p"]["created"])}
    hand[CHECKSUM_FIELD] = checksum("k1.p", hand)
    path.write_bytes(encode_tables({**tables, "k1.p": hand}, "toml"))
    mine = DecisionCache(path)
    assert len(mine.entries()) == 2 and mine.put("x.p", entry(3))
    assert DecisionCache(path).put("y.p", entry(4))
    file = mine._file
    written = written_texts(file._members, file._known)
    assert set(written) == {"k2.p"}  # x.p was not read back: not known
    raw = path.read_bytes()
    assert _parsed(raw, written, file._known) == _parsed(raw, None, file._known)


def test_a_file_with_no_entries_table_after_a_writers_put_reads_empty(tmp_path: Path) -> None:
    """A writer's file replaced by a cache with no entries table reads empty, as decoded whole."""
    path = tmp_path / "c.toml"
    mine = _writer(path, {"k1.p": entry(1), "k2.p": entry(2)})
    path.write_text('schema = 1\nchecksums = "sha256"\n')
    assert mine.entries() == {}
    assert mine.put("k3.p", entry(3)) and set(DecisionCache(path).entries()) == {"k3.p"}


def test_a_text_as_written_again_after_another_table_was_read_is_decoded(tmp_path: Path) -> None:
    """Own text back after a newer table was read for its key: the entry is its text's, not that."""
    path = tmp_path / "c.toml"
    mine = _writer(path, {"k1.p": entry(1), "k2.p": entry(2)})
    as_written = path.read_bytes()
    tables = stored_tables(DecisionCache(path).entries())
    # a newer chunktune's table for k1.p (a field this one does not write): known as read
    newer = {**tables["k1.p"], "chunk_size": 7, "added_later": 1}
    newer[CHECKSUM_FIELD] = checksum("k1.p", newer)
    path.write_bytes(encode_tables({**tables, "k1.p": newer}, "toml"))
    assert mine.entries()["k1.p"].chunk_size == 7
    # then the very bytes this writer wrote, back (a backup restored)
    path.write_bytes(as_written)
    assert mine.entries()["k1.p"].chunk_size == 1
