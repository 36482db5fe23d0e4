"""TOML salvage names each block's entry from its header line as parsing that line alone would."""

from __future__ import annotations

import random
import tomllib
from collections.abc import Callable, Iterator
from typing import Any

import attrs
import pytest
from test_cache_salvage import original, several

from chunktune import CacheEntry
from chunktune._cache_format import encode
from chunktune._cache_salvage import _toml_key, salvage

# keys as tomli_w writes them: bare, quoted, escaped (a quote, a backslash, a control, a
# bidi override that escaped_toml escapes), a raw tab and non-ASCII, an apostrophe, empty
KEYS = [
    "0001.key",
    "bare_key-1",
    "with space",
    'quote"d',
    "back\\slash",
    "tab\there",
    "ünïcode.κλειδί",
    "bidi\u202eoverride",
    "ctl\x01char",
    "it's",
    "",
    "zz.last",
]


def reference_key(segment: bytes) -> str | None:
    """The entry a block's header names, found as salvage found it first: the header line
    parsed alone by tomllib (one parse per block: seconds for a large file)."""
    try:
        parsed = tomllib.loads(segment.partition(b"\n")[0].decode())
    except (ValueError, RecursionError):
        return None
    names = parsed.get("entries")
    if not isinstance(names, dict) or len(names) != 1:
        return None
    key: str = next(iter(names))
    return key


def keyed(*, checksums: bool = True) -> tuple[bytes, dict[str, CacheEntry]]:
    """A TOML file of an entry for each of KEYS, as chunktune writes it (or wrote it
    before checksums)."""
    _, three = original("toml")
    first = next(iter(three.values()))
    entries = {
        key: attrs.evolve(first, chunk_size=i + 1, reason=f"entry {i}")
        for i, key in enumerate(KEYS)
    }
    raw = encode(entries, "toml")
    if not checksums:
        raw = b"".join(
            line for line in raw.splitlines(keepends=True) if not line.startswith(b"checksum")
        )
    return raw, entries


def _header_offsets(raw: bytes) -> list[int]:
    return [i + 1 for i in range(len(raw)) if raw[i : i + 2] == b"\n["]


def _damaged(raw: bytes) -> Iterator[tuple[str, bytes]]:
    """``raw`` damaged each way salvage meets: cut, a line broken, an entry altered, a
    header mangled, duplicated or moved, CRLF line ends, a byte-order mark."""
    rng = random.Random(0)
    for cut in sorted(rng.sample(range(len(raw)), 24)):
        yield f"cut at {cut}", raw[:cut]
    lines = raw.splitlines(keepends=True)
    for i in sorted(rng.sample(range(len(lines)), 8)):
        at = max(1, len(lines[i]) // 2)
        broken = [*lines[:i], lines[i][:at] + b"\n" + lines[i][at:], *lines[i + 1 :]]
        yield f"line {i} broken", b"".join(broken)
    at = raw.index(b"reason = ", len(raw) // 2)
    yield "entry altered", raw[:at] + b"reason = 'altered'" + raw[raw.index(b"\n", at) :]
    headers = _header_offsets(raw)
    mangles: list[Callable[[bytes], bytes]] = [
        lambda h: h.replace(b"]", b"", 1),
        lambda h: h.replace(b"[", b"[[", 1).replace(b"]", b"]]", 1),
        lambda h: h.replace(b'"', b"'", 2),
        lambda h: h.replace(b"\n", b" # a comment\n", 1),
        lambda h: h.replace(b"\n", b"  \n", 1),
        lambda h: h.replace(b"entries.", b"entries .", 1),
        lambda h: h.replace(b"]", b"].x]", 1),
        lambda h: h.replace(b"]", b'.""]', 1),
        lambda h: h.replace(b"[entries.", b'[entries."a", "b', 1),
        lambda h: h[:12] + b"\xff" + h[12:],
        lambda h: h[:12] + b"\\q" + h[12:],
        lambda h: h[:12] + b"\x7f" + h[12:],
    ]
    for n, mangle in enumerate(mangles):
        for at in headers[1 + n % 3 :: 7]:
            end = raw.index(b"\n", at) + 1
            yield f"header at {at} mangled ({n})", raw[:at] + mangle(raw[at:end]) + raw[end:]
    for at in headers[2::9]:
        block = raw[at : raw.index(b"\n\n", at) + 2]
        yield f"block at {at} duplicated", raw + block
        yield f"block at {at} repeated in place", raw[:at] + block + raw[at:]
    yield "CRLF", raw.replace(b"\n", b"\r\n")
    yield "CRLF cut", raw.replace(b"\n", b"\r\n")[: len(raw) * 2 // 3]
    yield "BOM", b"\xef\xbb\xbf" + raw
    yield "BOM cut", (b"\xef\xbb\xbf" + raw)[: len(raw) // 2]


def _cases() -> Iterator[Any]:
    for checksums in (True, False):
        raw, _ = keyed(checksums=checksums)
        for name, damaged in _damaged(raw):
            yield pytest.param(damaged, id=f"{'checksums' if checksums else 'none'}, {name}")


CASES = list(_cases())


def test_each_header_line_names_the_entry_that_parsing_it_alone_names() -> None:
    """Over every header line of every damaged file, the key found equals tomllib's reading."""
    lines = {
        case.values[0][at : case.values[0].find(b"\n", at) + 1 or None]
        for case in CASES
        for at in [0, *_header_offsets(case.values[0])]
    }
    assert len(lines) > 100
    for line in lines:
        assert _toml_key(line) == reference_key(line), line


@pytest.mark.parametrize("raw", CASES)
def test_a_damaged_toml_file_salvages_what_the_parse_of_each_header_alone_salvages(
    raw: bytes, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The entries salvaged, and the bytes written of them, equal those of the old salvage."""
    kept = salvage(raw, "toml")
    monkeypatch.setattr("chunktune._cache_salvage._toml_key", reference_key)
    expected = salvage(raw, "toml")
    assert kept == expected
    assert encode(kept, "toml") == encode(expected, "toml")


def test_a_damaged_toml_file_is_parsed_once_per_entry_not_once_per_block(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Salvage of a cut file parses TOML once an entry (and decode, preamble), not once a block."""
    raw, entries = several("toml", 12)  # keys as plain as a cache's: no escapes
    cut = raw[: raw.rindex(b"chunk_size") + 5]
    calls = []
    loads = tomllib.loads

    def counted(text: str, **kwargs: Any) -> dict[str, Any]:
        calls.append(text)
        return loads(text, **kwargs)

    monkeypatch.setattr(tomllib, "loads", counted)
    kept = salvage(cut, "toml")
    assert len(kept) == len(entries) - 1
    assert len(calls) <= len(entries) + 2


def _header_of(raw: bytes, key: str) -> int:
    """Where ``key``'s own ``[entries."key"]`` header line starts in ``raw``."""
    return raw.index(f'[entries."{key}"]\n'.encode())


@pytest.mark.parametrize(
    ("at", "byte"),
    [
        pytest.param(0, b"X", id="bracket-made-a-letter"),
        pytest.param(0, b"\xf8", id="bracket-made-no-utf8"),
        pytest.param(3, b"\xf8", id="name-made-no-utf8"),
        # the blank line before it run on into it: the line before the broken one is this
        # entry's last
        pytest.param(-1, b"X", id="blank-line-made-a-letter"),
    ],
)
def test_a_toml_entry_before_a_header_that_broke_is_kept_whole(at: int, byte: bytes) -> None:
    """An entry's next header broken (its lines run on into this one) keeps this one, whole."""
    raw, entries = several("toml", 4)
    where = _header_of(raw, "0002.key") + at
    damaged = raw[:where] + byte + raw[where + 1 :]
    assert salvage(damaged, "toml") == {k: e for k, e in entries.items() if k != "0002.key"}


def test_a_json_member_before_a_line_break_made_no_utf8_is_kept_whole() -> None:
    """A member whose next member's line break became no UTF-8 (run on into it) is kept, whole."""
    raw, entries = several("json", 4)
    where = raw.index(b'\n  "0002.key"')
    damaged = raw[:where] + b"\xf8" + raw[where + 1 :]
    assert salvage(damaged, "json") == {k: e for k, e in entries.items() if k != "0002.key"}


def test_a_toml_file_without_checksums_still_drops_the_neighbour_of_a_broken_header() -> None:
    """Without checksums, the entry before a broken header is dropped: nothing tells it whole."""
    raw, _ = several("toml", 4, checksums=False)
    where = _header_of(raw, "0002.key")
    damaged = raw[:where] + b"\xf8" + raw[where + 1 :]
    assert set(salvage(damaged, "toml")) == {"0000.key"}
