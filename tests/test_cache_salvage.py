"""A cache file that no longer parses: its whole entries kept, none altered."""

from __future__ import annotations

import errno
import json
import logging
import os
import random
import re
import subprocess
import sys
import threading
import tomllib
from pathlib import Path
from typing import Any

import attrs
import pytest

from chunktune import CacheEntry, DecisionCache
from chunktune._cache_file import CacheFile
from chunktune._cache_format import CacheFormat, Decoded, NewerCache, UnusableCache, encode
from chunktune._cache_json import json_by_entry
from chunktune._cache_parse import parse_cache
from chunktune._cache_salvage import salvage

DATA = Path(__file__).parent / "data"
FORMATS: list[CacheFormat] = ["json", "toml"]


def original(fmt: CacheFormat) -> tuple[bytes, dict[str, CacheEntry]]:
    raw = (DATA / f"cache_v1.{fmt}").read_bytes()
    return raw, dict(parse_cache(raw, fmt, mtime=0.0, source="t").entries)


def dozen(fmt: CacheFormat, *, checksums: bool = True) -> tuple[bytes, dict[str, CacheEntry]]:
    """A file of twelve entries, as chunktune writes it (or wrote it before checksums)."""
    return several(fmt, 12, checksums=checksums)


def several(
    fmt: CacheFormat, count: int, *, checksums: bool = True
) -> tuple[bytes, dict[str, CacheEntry]]:
    """A file of ``count`` entries, as chunktune writes it (or wrote it before checksums)."""
    _, three = original(fmt)
    first = next(iter(three.values()))
    entries = {
        f"{i:04x}.key": attrs.evolve(first, chunk_size=i + 1, reason=f"entry {i}")
        for i in range(count)
    }
    raw = encode(entries, fmt)
    return (raw if checksums else _CHECKSUM_LINE.sub(b"", raw)), entries


_CHECKSUM_LINE = re.compile(rb'^ *"?checksums?"? *[:=].*\n', re.M)


def served(raw: bytes, fmt: CacheFormat) -> dict[str, CacheEntry]:
    """What a DecisionCache serves from ``raw``: its entries, or if it is unusable or holds
    an altered entry (then moved aside), the entries salvaged from it."""
    try:
        parsed = parse_cache(raw, fmt, mtime=0.0, source="t")
    except NewerCache:
        return {}
    except UnusableCache:
        return salvage(raw, fmt)
    return salvage(raw, fmt) if parsed.altered else parsed.entries


@pytest.mark.parametrize("name", ["cache_v1", "cache_v1_checksummed"])
@pytest.mark.parametrize("fmt", FORMATS)
def test_a_whole_file_salvages_to_what_it_parses_to(fmt: CacheFormat, name: str) -> None:
    """Salvaging an undamaged file keeps every entry (TOML without checksums: all but its last)."""
    raw = (DATA / f"{name}.{fmt}").read_bytes()
    entries = parse_cache(raw, fmt, mtime=0.0, source="t").entries
    kept = salvage(raw, fmt)
    assert len(entries) == 3 and all(entries[k] == e for k, e in kept.items())
    whole = fmt == "json" or name.endswith("checksummed")
    assert len(kept) == (3 if whole else 2)  # TOML's last entry: see the next tests


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_file_cut_anywhere_serves_only_entries_equal_to_the_originals(fmt: CacheFormat) -> None:
    """At every byte, what is read or salvaged is a subset of the originals."""
    # four entries (the first, two between, the last), each cut at every one of its bytes:
    # a dozen cut at every 7th byte and line's end took twice as long (TOML parses slowly)
    raw, entries = several(fmt, 4)
    kept_at_cut = []
    for cut in range(len(raw) + 1):
        kept = served(raw[:cut], fmt)
        assert all(entries[k] == e for k, e in kept.items()), cut
        kept_at_cut.append(len(kept))
    assert kept_at_cut == sorted(kept_at_cut)  # a longer prefix never keeps fewer
    assert kept_at_cut[-1] == 4  # the whole file


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_file_without_checksums_cut_anywhere_salvages_only_whole_entries(
    fmt: CacheFormat,
) -> None:
    """Written before checksums: at every cut, what is salvaged is a subset of the originals."""
    # four entries cut at every byte, as above (a dozen at every 5th byte took twice as long)
    raw, entries = several(fmt, 4, checksums=False)
    kept_at_cut = []
    for cut in range(len(raw)):
        kept = salvage(raw[:cut], fmt)
        assert all(entries[k] == e for k, e in kept.items()), cut
        kept_at_cut.append(len(kept))
    assert kept_at_cut == sorted(kept_at_cut)  # a longer prefix never keeps fewer
    assert kept_at_cut[-1] >= 3  # cut in the last entry: the three before it survive


@pytest.mark.parametrize("checksums", [True, False], ids=["checksums", "none"])
@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("seed", range(4))
def test_a_damaged_spot_loses_its_own_entry_and_no_more_than_its_neighbours(
    fmt: CacheFormat, seed: int, checksums: bool
) -> None:
    """Bytes that are not UTF-8 anywhere: the entries away from them are kept, unchanged."""
    raw, entries = dozen(fmt, checksums=checksums)
    rng = random.Random(seed)
    for _ in range(40):
        at = rng.randrange(len(raw))
        kept = salvage(raw[:at] + b"\xff\xfe" + raw[at + 2 :], fmt)
        assert all(entries[k] == e for k, e in kept.items()), at
        # the entry hit is lost (two if it spans a boundary); in TOML without checksums
        # perhaps its neighbours and the last one too
        assert len(kept) >= (10 if fmt == "json" or checksums else 9), at


@pytest.mark.parametrize("name", ["cache_v1", "cache_v1_checksummed"])
def test_a_toml_entry_whose_sub_table_header_broke_is_dropped_not_shortened(name: str) -> None:
    """A sub-table that lost its header would read as a shorter entry: the entry is dropped."""
    raw = (DATA / f"{name}.toml").read_bytes()
    entries = parse_cache(raw, "toml", mtime=0.0, source="t").entries
    first = next(iter(entries))
    header = f'[entries."{first}".timings_ms]'.encode()
    assert header in raw
    kept = salvage(raw.replace(header, b"[entries.\xff]"), "toml")
    # without checksums TOML's last entry goes too (max: the last key)
    lost = {first} if name.endswith("checksummed") else {first, max(entries)}
    assert set(kept) == set(entries) - lost


def test_a_json_file_whose_checksum_declaration_broke_still_requires_each_checksum() -> None:
    """Its entries carry checksums, so one whose checksum is gone is dropped, the rest kept."""
    raw, entries = dozen("json")
    raw = raw.replace(b'"checksums": "sha256"', b'"checksumz": "sha256"')
    raw, cut = re.subn(rb'(  "0005.key": \{)"checksum": "[0-9a-f]+", ', rb"\1", raw)
    assert cut == 1
    assert set(salvage(raw, "json")) == set(entries) - {"0005.key"}


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_cut_file_whose_checksum_declaration_broke_still_requires_each_checksum(
    fmt: CacheFormat,
) -> None:
    """Read block by block, its declaration gone: a block whose checksum is gone is dropped."""
    raw, entries = dozen(fmt)
    declaration = b'"checksums": "sha256"' if fmt == "json" else b'checksums = "sha256"'
    raw = raw.replace(declaration, declaration.replace(b"checksums", b"checksumz"))
    its = (
        rb'(  "0005.key": \{)"checksum": "[0-9a-f]+", '
        if fmt == "json"
        else rb'(\[entries\."0005\.key"\]\n)checksum = "[0-9a-f]+"\n'
    )
    raw, cut = re.subn(its, rb"\1", raw)
    assert cut == 1
    # cut short inside the last entry: the file no longer decodes as a whole
    raw = raw[: raw.rindex(b"chunk_size")]
    assert set(salvage(raw, fmt)) == set(entries) - {"0005.key", "000b.key"}


def test_a_json_member_whose_colon_broke_is_dropped() -> None:
    """A member with a damaged colon is damage: dropped, though its table and checksum are whole."""
    raw, entries = dozen("json")
    member = b'  "0003.key": {'
    assert member in raw
    assert set(salvage(raw.replace(member, b'  "0003.key"; {'), "json")) == set(entries) - {
        "0003.key"
    }


def test_a_toml_file_with_checksums_but_no_declaration_keeps_its_last_entry() -> None:
    """Entries that carry checksums are checked by them: no TOML entry is dropped on suspicion."""
    raw, entries = dozen("toml")
    declaration = b'checksums = "sha256"\n'
    assert declaration in raw
    assert salvage(raw.replace(declaration, b""), "toml") == entries


def test_a_broken_toml_file_with_checksums_but_no_declaration_keeps_its_last_entry() -> None:
    """Read block by block, no declaration: its checksums vouch for the last entry, still kept."""
    raw, entries = dozen("toml")
    raw = raw.replace(b'checksums = "sha256"\n', b"")
    at = raw.index(b'policy_hash = "', raw.index(b'[entries."0005.key"]'))
    broken = raw[:at] + b"policy_hash = 0a1b" + raw[raw.index(b"\n", at) :]
    with pytest.raises(UnusableCache):
        parse_cache(broken, "toml", mtime=0.0, source="t")
    assert salvage(broken, "toml") == {k: e for k, e in entries.items() if k != "0005.key"}


def test_a_newer_schemas_broken_file_yields_nothing() -> None:
    """Entries of a schema this chunktune does not know are not read into its own."""
    raw, _ = dozen("toml")
    newer = raw.replace(b"schema = 1", b"schema = 99")
    assert newer != raw and salvage(newer[: len(newer) // 2], "toml") == {}
    raw, _ = dozen("json")  # JSON's schema comes last: seen when the damage is elsewhere
    newer = raw.replace(b'"schema": 1', b'"schema": 99')
    assert newer != raw and salvage(newer[:100] + b"\xff" + newer[101:], "json") == {}


def test_a_whole_file_on_one_line_with_no_declaration_keeps_each_checksummed_entry() -> None:
    """Laid out anew, no declaration, a number among its tables: each checksummed entry is kept."""
    raw, entries = dozen("json")
    doc = json.loads(raw)
    del doc["checksums"]
    doc["entries"] = {"0000.bad": 5, **doc["entries"]}  # a hand edit, first of them
    doc["entries"]["0005.key"]["chunk_size"] += 1  # altered: the file is unusable
    raw = json.dumps(doc).encode()  # one line: no block where chunktune lays one out
    assert parse_cache(raw, "json", mtime=0.0, source="t").altered == ("0005.key",)
    assert salvage(raw, "json") == {k: e for k, e in entries.items() if k != "0005.key"}


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_newer_schemas_whole_file_yields_nothing(fmt: CacheFormat) -> None:
    """A newer schema's file that decodes whole (written since the read found one broken): none."""
    raw, _ = dozen(fmt)
    schema = b'"schema": 1' if fmt == "json" else b"schema = 1"
    newer = raw.replace(schema, schema[:-1] + b"99")
    assert newer != raw and salvage(newer, fmt) == {}


def test_an_entry_at_the_end_of_a_toml_file_is_not_kept_when_it_may_be_cut() -> None:
    """A TOML file cut at a line's end still parses: its last entry would come back shorter."""
    raw, entries = dozen("toml")
    last = sorted(entries)[-1]
    cut = raw[: raw.rindex(b"policy_hash")]  # the last entry, cut at a line's end
    assert tomllib.loads(cut.decode())["entries"][last]  # parses, shorter
    assert last not in salvage(cut, "toml")


@pytest.mark.parametrize(
    "damage",
    [
        pytest.param(b"schema = \xff\n", id="not-utf8"),
        pytest.param(b"schema = \n", id="value-lost"),
        pytest.param(b"schema = 1 1\n", id="garbled"),
    ],
)
def test_a_toml_file_without_checksums_whose_preamble_broke_keeps_its_whole_first_entry(
    tmp_path: Path, damage: bytes
) -> None:
    """Damage before the first entry only: that entry, whole and valid, is kept, not suspected."""
    raw, entries = dozen("toml", checksums=False)
    assert raw.startswith(b"schema = 1\n\n[entries.")
    broken = damage + raw[len(b"schema = 1\n") :]
    path = tmp_path / "c.toml"
    path.write_bytes(broken)
    kept = DecisionCache(path).entries()
    assert kept == {k: e for k, e in entries.items() if k != max(entries)}  # the last: maybe cut
    assert [p.read_bytes() for p in tmp_path.iterdir() if ".corrupt-" in p.name] == [broken]


def test_a_toml_entry_without_checksum_broken_mid_table_is_dropped_not_read_to_the_break() -> None:
    """No checksum, a line inside an entry broken: its lines before the break are not served."""
    raw, entries = dozen("toml", checksums=False)
    at = raw.index(b'[entries."0005.key"]')
    line = b'policy_hash = "0a1b2c3d4e5f"\n'
    i = raw.index(line, at)
    broken = raw[:i] + line[:-2] + b"\n" + raw[i + len(line) :]  # its closing quote lost
    # what its lines before the break read as is a valid entry: only a checksum would tell
    head = broken[at:i].decode()
    assert tomllib.loads(head)["entries"]["0005.key"]["chunk_size"] == 6
    assert salvage(broken, "toml") == {
        k: e for k, e in entries.items() if k not in {"0005.key", max(entries)}
    }


@pytest.mark.parametrize(
    ("header", "salvaged"),
    [
        pytest.param(b'[entr\xffies."0000.key"]', True, id="not-utf8"),
        pytest.param(b'[entries"0000.key"]', True, id="not-toml"),
        pytest.param(b'[entrie."0000.key"]', False, id="another-table"),  # the file parses
    ],
)
def test_a_toml_first_entry_whose_own_header_broke_is_dropped_not_read_from_its_sub_tables(
    tmp_path: Path, header: bytes, salvaged: bool
) -> None:
    """The first entry's header broken (into the preamble): its sub-tables alone are not served."""
    raw, entries = dozen("toml", checksums=False)
    broken = raw.replace(b'[entries."0000.key"]', header, 1)
    assert broken != raw and b'[entries."0000.key".timings_ms]' in broken
    path = tmp_path / "c.toml"
    path.write_bytes(broken)
    kept = DecisionCache(path).entries()
    lost = {"0000.key", max(entries)} if salvaged else {"0000.key"}  # salvaged: the last maybe cut
    assert kept == {k: e for k, e in entries.items() if k not in lost}


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_broken_cache_file_starts_afresh_with_its_whole_entries(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, fmt: CacheFormat
) -> None:
    """The broken file is moved aside intact, and the fresh cache holds what of it was whole."""
    raw, entries = dozen(fmt)
    path = tmp_path / f"c.{fmt}"
    broken = raw[: raw.index(b"policy_hash", len(raw) * 3 // 4) + 5]  # mid-line
    path.write_bytes(broken)
    with caplog.at_level(logging.WARNING, logger="chunktune"):
        kept = DecisionCache(path).entries()
    (aside,) = [p for p in tmp_path.iterdir() if ".corrupt-" in p.name]
    assert aside.read_bytes() == broken
    assert kept and all(entries[k] == e for k, e in kept.items())
    assert DecisionCache(path).entries() == kept  # written to the fresh file
    were = "was" if len(kept) == 1 else "were"
    assert f"keeping the {len(kept)} of its entries that {were} whole" in caplog.text


def test_a_toml_cache_cut_inside_a_value_is_moved_aside_not_served_cut(tmp_path: Path) -> None:
    """A TOML cache cut mid-value is moved aside intact; no entry is served with the value cut."""
    raw, entries = dozen("toml")
    path = tmp_path / "c.toml"
    cut = raw[: raw.rindex(b"native_chunk = 12") + len(b"native_chunk = 1")]  # the last entry's
    path.write_bytes(cut)
    kept = DecisionCache(path).entries()
    assert all(entries[k] == e for k, e in kept.items()) and len(kept) == 11
    (aside,) = [p for p in tmp_path.iterdir() if ".corrupt-" in p.name]
    assert aside.read_bytes() == cut


def test_a_toml_cache_cut_at_a_lines_end_goes_aside_and_its_cut_entry_is_not_served(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A TOML cache cut at a line's end in its last entry: not served, named, the file aside."""
    raw, entries = dozen("toml")
    last = max(entries)
    header = raw.index(f'[entries."{last}"]'.encode())
    ends = [at + 1 for at in range(header, len(raw) - 1) if raw[at] == ord("\n")]
    named = 0
    for cut in ends:
        folder = tmp_path / str(cut)
        folder.mkdir()
        (folder / "c.toml").write_bytes(raw[:cut])
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="chunktune"):
            kept = DecisionCache(folder / "c.toml").entries()
        assert kept == {k: e for k, e in entries.items() if k != last}, cut
        (aside,) = [p for p in folder.iterdir() if ".corrupt-" in p.name]
        assert aside.read_bytes() == raw[:cut]
        assert "keeping the 11 of its entries" in caplog.text
        # the entry is named where the file parses (not inside its multi-line raced_out)
        named += f"('{last}') whose checksum does not match" in caplog.text
    assert named > 30


def test_a_write_onto_a_broken_file_keeps_its_whole_entries(tmp_path: Path) -> None:
    """A put that finds the file broken stores its entry beside the salvaged ones."""
    raw, entries = dozen("json")
    path = tmp_path / "c.json"
    path.write_bytes(raw[: len(raw) // 2])
    first = min(entries)
    assert DecisionCache(path).put("new", entries[first])
    assert {first, "new"} <= set(DecisionCache(path).entries())


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_block_nested_past_the_recursion_limit_is_dropped_not_raised(
    tmp_path: Path, fmt: CacheFormat
) -> None:
    """An entry nested too deeply to parse (RecursionError) is dropped; the others are kept."""
    raw, entries = dozen(fmt)
    deep = b"[" * 100_000 + b"]" * 100_000
    text = b'"reason": "entry 0"' if fmt == "json" else b'reason = "entry 0"'
    assert text in raw
    broken = raw.replace(text, text.replace(b'"entry 0"', deep))
    path = tmp_path / f"c.{fmt}"
    path.write_bytes(broken)
    kept = DecisionCache(path).entries()  # the whole file does not parse: salvaged
    assert kept and all(entries[k] == e for k, e in kept.items())
    assert min(entries) not in kept  # "entry 0", the deep one
    assert [p.read_bytes() for p in tmp_path.iterdir() if ".corrupt-" in p.name] == [broken]


def test_a_broken_file_whose_entries_cannot_be_written_back_still_says_where_it_went(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The salvaged entries' write and the move back both failing still names the file aside."""
    from chunktune import _cache_file

    raw, _ = dozen("json")
    path = tmp_path / "c.json"
    path.write_bytes(raw[: len(raw) // 2])
    real_replace = os.replace

    def full(*_args: object, **_kwargs: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    def no_way_back(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> None:
        if Path(dst) == path:
            raise OSError(errno.EIO, "Input/output error")
        real_replace(src, dst)

    def no_hard_links(*_args: object, **_kwargs: object) -> None:
        raise OSError(errno.EPERM, "Operation not permitted")  # the file is renamed aside

    monkeypatch.setattr(_cache_file, "write_atomic", full)
    monkeypatch.setattr(os, "replace", no_way_back)
    monkeypatch.setattr(os, "link", no_hard_links)
    with caplog.at_level(logging.WARNING, logger="chunktune"):
        assert DecisionCache(path).entries() == {}
    (aside,) = [p for p in tmp_path.iterdir() if ".corrupt-" in p.name]
    assert aside.read_bytes() == raw[: len(raw) // 2]
    assert str(aside) in caplog.text and "No space left on device" in caplog.text


@pytest.mark.parametrize(
    "indent",
    [pytest.param(None, id="one-line"), pytest.param(2, id="jq"), pytest.param(4, id="four")],
)
def test_a_json_cache_laid_out_anew_keeps_its_whole_entries_beside_an_altered_one(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, indent: int | None
) -> None:
    """A cache rewritten by hand or `jq .` with one entry altered keeps every other entry."""
    raw, entries = dozen("json")
    table = json.loads(raw)
    altered = next(iter(table["entries"]))
    table["entries"][altered]["chunk_size"] = 12
    path = tmp_path / "cache.json"
    path.write_text(json.dumps(table, indent=indent))
    with caplog.at_level(logging.WARNING, logger="chunktune"):
        kept = DecisionCache(path).entries()
    assert kept == {key: e for key, e in entries.items() if key != altered}
    assert "keeping the 11 of its entries that were whole" in caplog.text
    assert DecisionCache(path).entries() == kept  # the fresh file holds them


# damage a read finds after decoding the whole file, part of it, or none of it
_DAMAGES = [
    pytest.param(lambda raw: raw.replace(b"entry 3", b"entry X", 1), id="altered-entry"),
    pytest.param(lambda raw: raw.replace(b"sha256", b"sha999", 1), id="wrong-declaration"),
    pytest.param(lambda raw: raw[: raw.rindex(b"policy_hash") + 5], id="cut-mid-line"),
    pytest.param(lambda raw: raw[: len(raw) // 2] + b"\n= =\n" + raw[len(raw) // 2 :],
                 id="broken-line"),
    pytest.param(lambda raw: raw[: len(raw) // 3] + b"\xff" + raw[len(raw) // 3 :],
                 id="not-utf-8"),
]  # fmt: skip


def _damaged(tmp_path: Path, fmt: CacheFormat, damage: Any, name: str = "c") -> tuple[Path, bytes]:
    """A dozen entries' file at ``tmp_path/name.fmt``, ``damage`` done to its bytes."""
    raw, _ = dozen(fmt)
    broken = damage(raw)
    assert broken != raw
    path = tmp_path / f"{name}.{fmt}"
    path.write_bytes(broken)
    return path, broken


def _count_decodes(monkeypatch: pytest.MonkeyPatch, only: bytes | None = None) -> list[bytes]:
    """The bytes every decode of a cache read or salvage is given from now on (``only``'s)."""
    from chunktune import _cache_format

    decoded: list[bytes] = []
    real_decode = _cache_format.decode

    def decode_counted(raw: bytes, fmt: CacheFormat, **kwargs: Any) -> Any:
        decoded.extend([bytes(raw)] if only is None or raw == only else [])
        return real_decode(raw, fmt, **kwargs)

    monkeypatch.setattr("chunktune._cache_parse.decode", decode_counted)  # the read's
    monkeypatch.setattr("chunktune._cache_salvage.decode", decode_counted)
    return decoded


@pytest.mark.parametrize("damage", _DAMAGES)
@pytest.mark.parametrize("fmt", FORMATS)
def test_a_damaged_file_is_decoded_once_to_read_and_salvage_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fmt: CacheFormat, damage: Any
) -> None:
    """A damaged cache read, moved aside and salvaged: the whole file is decoded once, not twice."""
    from chunktune import _cache_format

    path, broken = _damaged(tmp_path, fmt, damage)
    whole: list[object] = []
    real_toml = tomllib.loads

    def toml_counted(text: str, **kwargs: Any) -> dict[str, Any]:
        whole.extend([text] if text.encode() == broken else [])
        return real_toml(text, **kwargs)

    def json_counted(raw: bytes, *args: Any) -> Any:
        whole.extend([raw] if raw == broken else [])
        return json_by_entry(raw, *args)

    monkeypatch.setattr(tomllib, "loads", toml_counted)
    monkeypatch.setattr(_cache_format, "json_by_entry", json_counted)
    decoded = _count_decodes(monkeypatch, broken)
    kept = DecisionCache(path).entries()
    assert kept and [p.read_bytes() for p in tmp_path.iterdir() if ".corrupt-" in p.name] == [
        broken
    ]
    assert len(decoded) == 1  # its read's; the salvage reused what that decoded
    assert len(whole) <= 1  # not UTF-8: nothing reached the parser


@pytest.mark.parametrize("damage", _DAMAGES)
@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("way", ["read-only", "system"])
def test_a_damaged_file_served_read_only_or_as_the_system_cache_is_decoded_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fmt: CacheFormat, damage: Any, way: str
) -> None:
    """A damaged cache that is never moved aside serves its whole entries, decoded once."""
    from chunktune._cache_layers import SystemCache

    path, broken = _damaged(tmp_path, fmt, damage)
    decoded = _count_decodes(monkeypatch, broken)
    if way == "system":
        kept = SystemCache(path).entries()
    else:
        path.with_name(path.name + ".lock").mkdir()  # the write lock cannot be taken
        kept = DecisionCache(path).entries()
    assert kept and path.read_bytes() == broken
    assert len(decoded) == 1  # its read's; the salvage reused what that decoded


@pytest.mark.parametrize("fmt", FORMATS)
def test_two_threads_salvaging_two_damaged_files_at_once_decode_each_file_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fmt: CacheFormat
) -> None:
    """Two damaged caches read at once: neither salvage decodes again, whichever read was last."""
    from chunktune import _cache_quarantine

    one, broken_one = _damaged(tmp_path, fmt, _DAMAGES[0].values[0], "one")
    other, broken_other = _damaged(tmp_path, fmt, lambda raw: raw.replace(b"entry 5", b"Y"), "o")
    decoded = _count_decodes(monkeypatch)
    both_read = threading.Barrier(2)

    def salvage_once_both_read(*args: Any) -> Any:
        both_read.wait(timeout=60)  # a hang guard: each file was read before either salvage
        return salvage(*args)

    monkeypatch.setattr(_cache_quarantine, "salvage", salvage_once_both_read)
    kept: dict[Path, dict[str, CacheEntry]] = {}
    threads = [
        threading.Thread(target=lambda p=path: kept.update({p: DecisionCache(p).entries()}))
        for path in (one, other)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert sorted(decoded) == sorted([broken_one, broken_other])  # by their reads alone
    assert kept[one] == salvage(broken_one, fmt) and len(kept[one]) == 11
    assert kept[other] == salvage(broken_other, fmt) and len(kept[other]) == 11


@pytest.mark.parametrize("damage", _DAMAGES)
@pytest.mark.parametrize("fmt", FORMATS)
def test_a_damaged_file_salvages_to_the_same_bytes_whether_or_not_its_read_is_reused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fmt: CacheFormat, damage: Any
) -> None:
    """The fresh file a damaged one leaves is byte for byte the same when salvage decodes anew."""
    from chunktune import _cache_salvage

    reused, _ = _damaged(tmp_path, fmt, damage, "reused")
    afresh, broken = _damaged(tmp_path, fmt, damage, "afresh")
    kept = DecisionCache(reused).entries()
    # what the read decoded is never taken: salvage decodes anew
    monkeypatch.setattr(_cache_salvage, "_reusable", lambda *_: None)
    assert DecisionCache(afresh).entries() == kept == salvage(broken, fmt)
    assert reused.read_bytes() == afresh.read_bytes()
    assert kept and kept.keys() <= dozen(fmt)[1].keys()


def test_what_an_unusable_read_decoded_rides_on_its_result_until_taken_or_let_go(
    tmp_path: Path,
) -> None:
    """An unusable parse's decoding goes with its result, to the file's Broken; taken once."""
    path, broken = _damaged(tmp_path, "toml", _DAMAGES[0].values[0])
    parsed = parse_cache(broken, "toml", mtime=0.0, source="t")
    assert parsed.altered and parsed.decoded is not None and parsed.decoded.whole
    assert parsed.decoded.document == tomllib.loads(broken.decode())
    assert parsed.decoded.of(bytes(broken), "toml") and not parsed.decoded.of(broken, "json")
    assert parse_cache(dozen("toml")[0], "toml", mtime=0.0, source="t").decoded is None
    with pytest.raises(UnusableCache) as cut:
        parse_cache(broken[:-1], "toml", mtime=0.0, source="t")
    assert cut.value.decoded is not None and not cut.value.decoded.whole
    file = CacheFile(path, "toml")
    with pytest.raises(UnusableCache):
        file.load(fresh=False)
    first = file.broken.last()
    assert first is not None and (decoded := first[1].take_decoded()) is not None
    assert decoded.of(broken, "toml") and first[1].take_decoded() is None  # taken once
    path.write_bytes(broken + b"\n")  # damaged anew, and never salvaged
    with pytest.raises(UnusableCache):
        file.load(fresh=False)
    second = file.broken.last()
    path.write_bytes(dozen("toml")[0])
    assert file.load(fresh=False)  # usable: no salvage of the damaged bytes follows
    assert second is not None and second[1].take_decoded() is None  # let go


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_salvage_handed_what_other_bytes_decoded_decodes_its_own(fmt: CacheFormat) -> None:
    """What another file (or format) decoded is never taken: the salvage decodes its bytes."""
    raw, entries = dozen(fmt)
    broken = raw.replace(b"entry 3", b"entry X", 1)
    intact = Decoded(
        raw, fmt, True, tomllib.loads(raw.decode()) if fmt == "toml" else json.loads(raw)
    )
    other: CacheFormat = "json" if fmt == "toml" else "toml"
    kept = {k: e for k, e in entries.items() if k != "0003.key"}
    assert salvage(broken, fmt, intact) == kept == salvage(broken, fmt)
    assert salvage(broken, fmt, Decoded(broken, other, False)) == kept


@pytest.mark.parametrize("fmt", FORMATS)
def test_an_altered_files_salvage_takes_the_entries_its_read_built(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fmt: CacheFormat
) -> None:
    """One entry altered: salvage builds none of the eleven others again, its read built them."""
    from chunktune import _cache_parse
    from chunktune._cache_entry import entry_from_table as real

    path, broken = _damaged(tmp_path, fmt, _DAMAGES[0].values[0])
    built: list[object] = []

    def counted(table: Any) -> CacheEntry:
        built.append(table)
        return real(table)

    monkeypatch.setattr(_cache_parse, "entry_from_table", counted)
    kept = DecisionCache(path).entries()
    assert len(built) == 11  # by the read alone: its salvage built none again
    assert len(kept) == 11 and kept == salvage(broken, fmt)  # decoded anew: built anew
    assert len(built) == 22


def test_a_salvage_takes_an_entry_built_by_its_read_only_for_a_table_of_that_checksum() -> None:
    """An entry kept for a key whose table's checksum is another is not taken: it is read."""
    from chunktune._cache_checksums import Known

    raw, entries = dozen("toml")
    broken = raw.replace(b'reason = "entry 3"', b'reason = "altered"')
    document = tomllib.loads(broken.decode())
    other = attrs.evolve(entries["0005.key"], chunk_size=99)
    stale = {"0005.key": Known("0" * 16, other), "0006.key": Known("1" * 16, other)}
    kept = salvage(broken, "toml", Decoded(broken, "toml", True, document, stale))
    assert kept == {k: e for k, e in entries.items() if k != "0003.key"}
    matched = document["entries"]["0005.key"]["checksum"]
    built = {"0005.key": Known(matched, other)}
    # that checksum: taken, not read
    assert (
        salvage(broken, "toml", Decoded(broken, "toml", True, document, built))["0005.key"] is other
    )


# another process moves the damaged file aside (its whole entries written afresh), then
# damages the fresh file otherwise: entry 7 altered (the first damage altered entry 3)
_REPAIR_AND_DAMAGE_AGAIN = """
import sys
from pathlib import Path
from chunktune import DecisionCache
path = Path(sys.argv[1])
assert len(DecisionCache(path).entries()) == 11
path.write_bytes(path.read_bytes().replace(b"entry 7", b"entry Y", 1))
"""


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_file_repaired_and_damaged_again_by_another_process_salvages_its_new_bytes(
    tmp_path: Path, fmt: CacheFormat
) -> None:
    """Damaged, repaired elsewhere, damaged again before the move: the new bytes are salvaged."""
    from chunktune._cache_quarantine import Quarantine

    path, first = _damaged(tmp_path, fmt, _DAMAGES[0].values[0])
    file = CacheFile(path, fmt)
    with pytest.raises(UnusableCache):
        file.load(fresh=True)  # as under the write lock: what it decoded is kept
    subprocess.run(
        [sys.executable, "-c", _REPAIR_AND_DAMAGE_AGAIN, str(path)], check=True, timeout=120
    )
    again = path.read_bytes()
    assert b"entry 7" in first and b"entry Y" in again
    # the file changed between that read and the move (a damage takes no lock)
    kept = Quarantine(file).move_aside("holds an altered entry")
    assert len(kept) == 10 and "0007.key" not in kept  # the first bytes' held entry 7
    assert kept == salvage(again, fmt) == DecisionCache(path).entries()
    asides = [p.read_bytes() for p in tmp_path.iterdir() if ".corrupt-" in p.name]
    assert sorted(asides) == sorted([first, again])  # each damage aside, bytes intact


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("now", ["repaired", "damaged-anew"])
@pytest.mark.parametrize("strict", [False, True])
def test_a_damaged_file_replaced_before_its_read_only_serve_serves_the_file_there_now(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fmt: CacheFormat, now: str, strict: bool
) -> None:
    """Replaced between its read and its read-only serve: what the file there now holds serves."""
    from chunktune._cache_quarantine import Quarantine

    path, _ = _damaged(tmp_path, fmt, _DAMAGES[0].values[0])
    path.with_name(path.name + ".lock").mkdir()  # the write lock cannot be taken
    raw, entries = dozen(fmt)
    there = raw if now == "repaired" else raw.replace(b"entry 9", b"entry Z", 1)
    real = Quarantine.read_only
    replaced: list[bytes] = []

    def replaced_first(self: Quarantine, exc: OSError) -> dict[str, CacheEntry] | None:
        if not replaced:  # by a process that can write there: atomically, as chunktune does
            path.with_name("new").write_bytes(there)
            os.replace(path.with_name("new"), path)
            replaced.append(there)
        return real(self, exc)

    monkeypatch.setattr(Quarantine, "read_only", replaced_first)
    served = DecisionCache(path).entries(strict=strict)
    assert replaced and served == (entries if now == "repaired" else salvage(there, fmt))
    assert len(served) == (12 if now == "repaired" else 11) and path.read_bytes() == there
