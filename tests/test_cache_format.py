"""The cache document format: byte-compatible encoding, entry validation, wrong shapes."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import attrs
import pytest
import tomli_w

from chunktune import CacheEntry
from chunktune._cache_checksums import Known, altered, checksum, stored_tables
from chunktune._cache_entry import BadEntry, check_entry, entry_from_table, entry_to_table
from chunktune._cache_format import (
    SCHEMA,
    NewerCache,
    UnusableCache,
    cache_format,
    encode,
    encode_tables,
    suffix_format,
)
from chunktune._cache_parse import parse_cache
from chunktune._reading import MAX_NESTING
from chunktune._shown import escaped_toml, shown

DATA = Path(__file__).parent / "data"

# the entries tests/data/cache_v1.{json,toml} were written from, by chunktune 0.1's
# hand-written encoder: the converter must write the very same bytes
GOLDEN = {
    "3fa9c1d2e4b5a6c7d8e9f0a1b2c3d4e5.0a1b2c3d4e5f": CacheEntry(
        chunk_size=8,
        native_chunk=12,
        reason="chunk 8 is 4.1% faster than native (12)",
        timings={None: 0.0125, 4: 0.0101, 8: 0.0100, 16: 0.01049},
        samples={None: 9, 8: 9, 4: 3, 16: 3},
        raced_out=(4, 16),
        policy="balanced",
        policy_hash="0a1b2c3d4e5f",
        policy_rule="margin=0.03;tie_break=center;z=1.5",
        policy_effort=208,
        probe_seconds=1.5,
        partial=False,
        created=1_700_000_000.25,
        num_envs=256,
        nthread=2,
        signature={
            "kind": "mujoco.rollout",
            "model_sha": "ab12cd34ef56ab78",
            "nstep": 30,
            "timestep": 0.002,
            "flag": True,
        },
        device={
            "cpu": "Test CPU @ 2.0GHz",
            "logical_cpus": 2,
            "usable_cpus": 2,
            "cpu_quota": "none",
            "system": "Linux",
            "machine": "x86_64",
            "mujoco": "4.0.0",
        },
        chunktune_version="0.1.0",
        mujoco_version="4.0.0",
        host="box",
        model_file="/models/robot.xml",
    ),
    "legacy-0123abcd": CacheEntry(
        chunk_size=None,
        native_chunk=0,
        reason="migrated from the older tuner's cache /x/c.json",
        timings={None: 0.003},
        policy="legacy",
        created=1_600_000_000.0,
        signature={"kind": "legacy"},
        host="",
    ),
    "aa00.bb11": CacheEntry(
        chunk_size=None,
        native_chunk=3,
        reason="kept native",
        policy="quick",
        policy_hash="bb11",
        policy_rule="r",
        policy_effort=72,
        probe_seconds=0.25,
        partial=True,
        created=1_700_000_123.0,
        num_envs=64,
        nthread=2,
        signature={"kind": "simulated", "name": "x", "dispatch_s": 1e-07},
        chunktune_version="0.1.0",
        mujoco_version="none",
        host="h2",
    ),
}


def table(**changes: Any) -> dict[str, Any]:
    """A valid stored table with ``changes`` applied (a value of ... deletes the field)."""
    base = entry_to_table(GOLDEN["3fa9c1d2e4b5a6c7d8e9f0a1b2c3d4e5.0a1b2c3d4e5f"])
    for name, value in changes.items():
        if value is ...:
            base.pop(name)
        else:
            base[name] = value
    return base


# what chunktune writes now: JSON one entry a line (cache_v1_checksummed.json, each field
# on a line of its own, is what it wrote before, and is read the same)
_WRITTEN = {"json": "cache_v1_lines.json", "toml": "cache_v1_checksummed.toml"}


@pytest.mark.parametrize("fmt", ["json", "toml"])
def test_encoding_is_byte_identical_to_the_checksummed_format(fmt: str) -> None:
    """The converter writes the pinned bytes, checksums too: another canonical form breaks them."""
    golden = (DATA / _WRITTEN[fmt]).read_bytes()
    assert encode(GOLDEN, fmt) == golden  # type: ignore[arg-type]


def test_a_json_file_of_one_entry_a_line_reads_as_the_indented_one_did() -> None:
    """The pinned file of one entry a line decodes and parses exactly as the indented one."""
    lines = (DATA / "cache_v1_lines.json").read_bytes()
    indented = (DATA / "cache_v1_checksummed.json").read_bytes()
    assert json.loads(lines) == json.loads(indented)
    assert len(lines.splitlines()) == 6 + len(GOLDEN)  # braces, declarations: one line each
    new, old = (parse_cache(raw, "json", mtime=0.0, source="x") for raw in (lines, indented))
    assert new.entries == old.entries and not new.skipped and not old.skipped
    assert [k.checksum for k in new.known.values()] == [k.checksum for k in old.known.values()]


def test_the_json_layout_is_json_dumps_indent_one_but_for_each_entry_on_one_line() -> None:
    """Each entry is one line, its json.dumps (keys sorted, ASCII); none: json.dumps(indent=1)."""
    entries = {**GOLDEN, "zz.host": attrs.evolve(GOLDEN["aa00.bb11"], host="n\u00f6de\u202e")}
    tables = stored_tables(entries)
    lines = [f"  {json.dumps(k)}: {json.dumps(t, sort_keys=True)}" for k, t in tables.items()]
    expected = '{\n "checksums": "sha256",\n "entries": {\n' + ",\n".join(lines)
    assert encode(entries, "json").decode() == expected + '\n },\n "schema": 1\n}\n'
    assert "\\u202e" in lines[-1]
    empty = {"checksums": "sha256", "entries": {}, "schema": 1}
    assert encode({}, "json").decode() == json.dumps(empty, indent=1, sort_keys=True) + "\n"


@pytest.mark.parametrize("fmt", ["json", "toml"])
def test_checksums_add_one_line_each_to_the_first_format(fmt: str) -> None:
    """Without its checksum lines the file is the bytes chunktune 0.1 wrote for the same entries."""
    lines = (DATA / f"cache_v1_checksummed.{fmt}").read_bytes().splitlines(keepends=True)
    kept = [line for line in lines if not re.match(rb' *"?checksums?"? *[:=]', line)]
    assert len(lines) - len(kept) == 1 + len(GOLDEN)
    assert b"".join(kept) == (DATA / f"cache_v1.{fmt}").read_bytes()


def test_both_formats_hold_the_same_checksums() -> None:
    """An entry's checksum is the same in JSON and TOML: both read back the same table."""
    sums = [
        re.findall(
            rb'checksum"? *[:=] *"(\w+)"', (DATA / f"cache_v1_checksummed.{fmt}").read_bytes()
        )
        for fmt in ("json", "toml")
    ]
    assert len(sums[0]) == len(GOLDEN) and sums[0] == sums[1]


@pytest.mark.parametrize("name", ["cache_v1", "cache_v1_checksummed"])
@pytest.mark.parametrize("fmt", ["json", "toml"])
def test_files_of_the_first_format_read_back_every_field(fmt: str, name: str) -> None:
    """Files written by chunktune 0.1, and with checksums, read back as the entries written."""
    raw = (DATA / f"{name}.{fmt}").read_bytes()
    parsed = parse_cache(raw, fmt, mtime=0.0, source="x")  # type: ignore[arg-type]
    assert parsed.skipped == () and parsed.altered == () and set(parsed.entries) == set(GOLDEN)
    for key, want in GOLDEN.items():
        got = parsed.entries[key]
        assert got.timings == pytest.approx(want.timings)
        assert attrs.evolve(got, timings={}) == attrs.evolve(want, timings={})


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        pytest.param({"chunk_size": 0}, "chunk_size", id="chunk-0"),
        pytest.param({"chunk_size": -5}, "chunk_size", id="chunk-negative"),
        pytest.param({"chunk_size": 2.7}, "chunk_size", id="chunk-float"),
        pytest.param({"chunk_size": 8.0}, "chunk_size", id="chunk-integral-float"),
        pytest.param({"chunk_size": "5"}, "chunk_size", id="chunk-string"),
        pytest.param({"chunk_size": True}, "chunk_size", id="chunk-bool"),
        pytest.param({"chunk_size": 10**9}, "chunk_size", id="chunk-above-num-envs"),
        pytest.param({"chunk_size": 257}, "chunk_size", id="chunk-one-above-num-envs"),
        pytest.param({"chunk_size": 2**40, "num_envs": 0}, "chunk_size", id="chunk-beyond-c-int"),
        pytest.param({"chunk_size": float("inf")}, "chunk_size", id="chunk-inf"),
        pytest.param({"chunk_size": ...}, "chunk_size", id="chunk-missing"),
        pytest.param({"native_chunk": -1}, "native_chunk", id="native-negative"),
        pytest.param({"timings_ms": {"native": -1.0}}, "timings_ms", id="timing-negative"),
        pytest.param({"timings_ms": {"native": 0.0}}, "timings_ms", id="timing-zero"),
        pytest.param({"timings_ms": {"8": float("nan")}}, "timings_ms", id="timing-nan"),
        pytest.param({"timings_ms": {"eight": 1.0}}, "timings_ms", id="timing-key"),
        pytest.param({"timings_ms": {"+8": 1.0}}, "timings_ms", id="timing-key-signed"),
        pytest.param({"timings_ms": {"08": 1.0}}, "timings_ms", id="timing-key-zero-led"),
        pytest.param({"samples": {"08": 2}}, "samples", id="samples-key-zero-led"),
        pytest.param({"timings_ms": {"512": 1.0}}, "timings_ms", id="timing-key-above-n"),
        pytest.param({"timings_ms": [1.0]}, "timings_ms", id="timings-list"),
        pytest.param({"samples": {"8": -1}}, "samples", id="samples-negative"),
        pytest.param({"samples": {"8": 1.5}}, "samples", id="samples-float"),
        pytest.param({"samples": {"8": 2**63}}, "samples", id="samples-past-int64"),
        pytest.param({"gain_ci": [0.05, 0.01]}, "gain_ci", id="gain-ci-reversed"),
        pytest.param({"raced_out": [0]}, "raced_out", id="raced-zero"),
        pytest.param({"raced_out": "4"}, "raced_out", id="raced-string"),
        pytest.param({"raced_out": [257]}, "raced_out", id="raced-above-num-envs"),
        pytest.param({"policy_effort": -1}, "policy_effort", id="effort-negative"),
        pytest.param({"probe_seconds": -1.0}, "probe_seconds", id="probe-negative"),
        pytest.param({"probe_seconds": float("inf")}, "probe_seconds", id="probe-inf"),
        pytest.param({"partial": 1}, "partial", id="partial-int"),
        pytest.param({"created": float("inf")}, "created", id="created-inf"),
        pytest.param({"created": "yesterday"}, "created", id="created-string"),
        pytest.param({"num_envs": -256}, "num_envs", id="num-envs-negative"),
        pytest.param({"nthread": 2.0}, "nthread", id="nthread-float"),
        pytest.param({"signature": {"n": [1, 2]}}, "signature", id="signature-list"),
        pytest.param({"signature": {"n": None}}, "signature", id="signature-null"),
        pytest.param({"device": "cpu"}, "device", id="device-string"),
        pytest.param({"reason": 5}, "reason", id="reason-int"),
        pytest.param({"host": None}, "host", id="host-null"),
        pytest.param({"model_file": 3}, "model_file", id="model-file-int"),
    ],
)
def test_a_bad_field_is_named(changes: dict[str, Any], field: str) -> None:
    """A stored entry with a bad field is refused, naming that field."""
    with pytest.raises(BadEntry, match=f"^{field}: "):
        entry_from_table(table(**changes))


@pytest.mark.parametrize(
    "changes",
    [
        pytest.param({"chunk_size": "native"}, id="native"),
        pytest.param({"chunk_size": None}, id="null-is-native"),
        pytest.param({"created": 1e300}, id="far-future"),
        pytest.param({"created": ..., "host": ..., "reason": ...}, id="optional-missing"),
        pytest.param({"unknown_field": [1]}, id="extra-field-ignored"),
        pytest.param({"chunk_size": 256}, id="chunk-equal-to-num-envs"),
        pytest.param({"samples": {"2147483647": 1}, "num_envs": 0}, id="a-ten-digit-size"),
        pytest.param({"chunk_size": 10**6, "num_envs": 0}, id="num-envs-unknown"),
    ],
)
def test_valid_variations_are_accepted(changes: dict[str, Any]) -> None:
    """Native written either way, any finite date, missing optional fields: all accepted."""
    entry_from_table(table(**changes))


def test_entries_of_a_file_without_checksums_are_not_known() -> None:
    """A file written before checksums gives no known entries: none was read by its checksum."""
    raw = (DATA / "cache_v1.json").read_bytes()
    parsed = parse_cache(raw, "json", mtime=0.0, source="x")
    assert set(parsed.entries) == set(GOLDEN) and parsed.known == {}


def test_missing_date_and_host_read_as_unknown_not_now() -> None:
    """An entry without created or host reads as of unknown age and host, not as new."""
    got = entry_from_table(table(created=..., host=...))
    assert (got.created, got.host) == (0.0, "")


def test_an_entry_that_would_not_read_back_is_not_writable() -> None:
    """check_entry refuses what entry_from_table would refuse: nothing is written unservable."""
    good = GOLDEN["aa00.bb11"]
    check_entry(good)
    for bad in (
        attrs.evolve(good, chunk_size=-5),
        attrs.evolve(good, signature={"n": object()}),
        attrs.evolve(good, timings={None: float("nan")}),
    ):
        with pytest.raises(BadEntry):
            check_entry(bad)


@pytest.mark.parametrize(
    ("raw", "fmt", "message"),
    [
        pytest.param(b'{"schema": 1, "entries": "x"}', "json", "entries", id="entries-string"),
        pytest.param(b'{"schema": 1, "entries": null}', "json", "entries", id="entries-null"),
        pytest.param(b'{"schema": 1, "entries": [1]}', "json", "entries", id="entries-list"),
        pytest.param(b"[1, 2]", "json", "top level", id="top-list"),
        pytest.param(b'"x"', "json", "top level", id="top-string"),
        pytest.param(b"{}", "json", "neither", id="empty-table"),
        pytest.param(b'{"schema": "1"}', "json", "neither", id="schema-string"),
        pytest.param(b'{"schema": true}', "json", "neither", id="schema-bool"),
        pytest.param(b'{"schema": 0, "entries": {}}', "json", "neither", id="schema-0"),
        pytest.param(b'{"schema": -1000000000000}', "json", "neither", id="schema-negative"),
        pytest.param(b'{"schema": 2}', "json", "newer", id="newer-schema"),
        # Python 3.13's json follows 5000 levels and says an unclosed one "does not parse"
        pytest.param(b"[" * 100_000 + b"]" * 100_000, "json", "nested too deeply", id="deep-json"),
        pytest.param(b"a = " + b"[" * 5000 + b"]" * 5000, "toml", "nested too deeply", id="deep"),
        pytest.param(b"a = " + b"{b=" * 3000 + b"1" + b"}" * 3000, "toml", "nested", id="deep-t"),
        pytest.param(b"\xff\xfe\x00garbage", "toml", "does not parse", id="not-utf8"),
        pytest.param(b'{"schema": 1, "entries": {', "json", "does not parse", id="truncated"),
        pytest.param(b"1" * 5000, "json", "does not parse", id="huge-int"),
        pytest.param(b"", "toml", r"\(no schema\)$", id="empty-toml"),
        pytest.param(b'{"schema": "1"}', "json", r"\(schema '1'\)$", id="schema-named"),
        pytest.param(b"{,}", "json", "does not parse as JSON: Expecting property name", id="why"),
    ],
)
def test_a_document_of_the_wrong_shape_is_unusable(raw: bytes, fmt: str, message: str) -> None:
    """A document that does not decode or is of the wrong shape is UnusableCache, saying why."""
    with pytest.raises(UnusableCache, match=message):
        parse_cache(raw, fmt, mtime=0.0, source="x")  # type: ignore[arg-type]


def _nested(depth: int) -> str:
    return "[" * depth + "1" + "]" * depth


def _with_deep_entry(depth: int) -> bytes:
    """A JSON cache of one good entry and one whose signature nests ``depth`` lists down."""
    good = CacheEntry(chunk_size=8, native_chunk=12, reason="kept")
    doc = json.loads(encode({"good": good}, "json"))
    doc["entries"]["deep"] = {"chunk_size": 8, "native_chunk": 12, "signature": {"x": "@"}}
    return json.dumps(doc).replace('"@"', _nested(depth)).encode()


@pytest.mark.parametrize(
    "raw",
    [
        # Python 3.11's json gives up near 1000 levels, 3.12's near 1500, 3.13's near
        # 10000: in between, the same file read as whole-file damage on one version and
        # as a wrong top level, or one skipped entry, on another
        pytest.param(_nested(5000).encode(), id="top-5000"),
        pytest.param(_with_deep_entry(5000), id="entry-5000"),
        pytest.param(_with_deep_entry(1200), id="entry-1200"),
        pytest.param(_with_deep_entry(MAX_NESTING - 2), id="entry-just-past"),
    ],
)
def test_a_document_nested_past_any_cache_is_too_deep_on_every_python(raw: bytes) -> None:
    """A document nested past MAX_NESTING is "nested too deeply", whatever its parser follows."""
    with pytest.raises(UnusableCache, match="nested too deeply") as caught:
        parse_cache(raw, "json", mtime=0.0, source="x")
    assert type(caught.value) is UnusableCache


def test_a_document_nested_as_deep_as_allowed_still_reads() -> None:
    """Nesting up to MAX_NESTING is read as before: the deep entry skipped, the good one kept."""
    parsed = parse_cache(_with_deep_entry(MAX_NESTING - 3), "json", mtime=0.0, source="x")
    assert set(parsed.entries) == {"good"} and [k for k, _ in parsed.skipped] == ["deep"]


def test_a_newer_schema_nested_deep_is_still_left_to_its_chunktune() -> None:
    """A newer chunktune's document is NewerCache however deep it nests, never "too deep"."""
    raw = f'{{"schema": 99, "x": {_nested(MAX_NESTING + 100)}}}'.encode()
    with pytest.raises(NewerCache):
        parse_cache(raw, "json", mtime=0.0, source="x")


def test_a_toml_document_cut_inside_a_line_is_unusable_not_read_with_a_cut_value() -> None:
    """A TOML cache cut short mid-line is unusable, never read with its last value cut."""
    # "native_chunk = 1" of 12 parses: TOML has no closing bracket to miss
    raw = (DATA / "cache_v1.toml").read_bytes()
    mid_line = [cut for cut in range(1, len(raw)) if raw[cut - 1 : cut] != b"\n"]
    for cut in mid_line:
        with pytest.raises(UnusableCache):
            parse_cache(raw[:cut], "toml", mtime=0.0, source="x")
    at = raw.index(b"native_chunk = 12") + len(b"native_chunk = 1")
    with pytest.raises(UnusableCache, match="ends inside a line"):
        parse_cache(raw[:at], "toml", mtime=0.0, source="x")


def checksummed(fmt: str) -> tuple[bytes, dict[str, CacheEntry]]:
    """The golden file with checksums, and its entries as read."""
    raw = (DATA / f"cache_v1_checksummed.{fmt}").read_bytes()
    return raw, parse_cache(raw, fmt, mtime=0.0, source="x").entries  # type: ignore[arg-type]


@pytest.mark.parametrize("fmt", ["json", "toml"])
def test_a_checksummed_document_cut_anywhere_serves_no_shortened_entry(fmt: str) -> None:
    """At every cut that parses (TOML's at a line's end), an entry cut short is altered."""
    raw, whole = checksummed(fmt)
    caught = 0
    for cut in range(len(raw)):
        try:
            parsed = parse_cache(raw[:cut], fmt, mtime=0.0, source="x")  # type: ignore[arg-type]
        except UnusableCache:
            continue
        assert all(whole[k] == e for k, e in parsed.entries.items()), cut
        present = {k for k in whole if k.encode() in raw[:cut]}
        assert set(parsed.entries) | set(parsed.altered) == present, cut
        caught += bool(parsed.altered)
    assert caught > 50 if fmt == "toml" else caught == 0  # JSON parses only when whole


@pytest.mark.parametrize("fmt", ["json", "toml"])
def test_a_changed_digit_or_letter_anywhere_is_never_served(fmt: str) -> None:
    """A digit or letter changed anywhere: the file is refused or the entry not served."""
    raw, whole = checksummed(fmt)
    caught = 0
    for at, byte in enumerate(raw):
        char = chr(byte)
        if not char.isascii() or not char.isalnum():
            continue
        first = "0" if char.isdigit() else "a" if char.islower() else "A"
        other = chr(ord(first) + (ord(char) - ord(first) + 1) % (10 if char.isdigit() else 26))
        changed = raw[:at] + other.encode() + raw[at + 1 :]
        try:
            parsed = parse_cache(changed, fmt, mtime=0.0, source="x")  # type: ignore[arg-type]
        except UnusableCache:
            continue
        assert all(whole.get(k) == e for k, e in parsed.entries.items()), (at, char, other)
        caught += bool(parsed.altered)
    assert caught > 1000  # every value's digits and letters, every field name's, every key's


def test_an_entry_without_its_checksum_in_a_checksummed_file_is_altered() -> None:
    """An entry whose checksum line is gone (an older entry pasted in, a hand edit) is altered."""
    raw, whole = checksummed("toml")
    first = min(whole)
    line = raw[raw.index(b"checksum = ") : raw.index(b"\n", raw.index(b"checksum = ")) + 1]
    parsed = parse_cache(raw.replace(line, b"", 1), "toml", mtime=0.0, source="x")
    assert parsed.altered == (first,) and first not in parsed.entries
    assert "missing" in dict(parsed.skipped)[first]
    assert set(parsed.entries) == set(whole) - {first}


def test_a_checksum_is_checked_even_where_the_file_declares_none() -> None:
    """An entry's own checksum is checked even in a file that lost its declaration."""
    raw, _ = checksummed("json")
    changed = raw.replace(b' "checksums": "sha256",\n', b"").replace(
        b'"chunk_size": 8', b'"chunk_size": 4'
    )
    parsed = parse_cache(changed, "json", mtime=0.0, source="x")
    assert len(parsed.altered) == 1 and "edited or damaged" in parsed.skipped[0][1]


def test_an_edited_entry_is_skipped_naming_the_checksum_it_carries() -> None:
    """The reason an edited entry is skipped names the checksum its table carries."""
    key, table = next(iter(stored_tables(GOLDEN).items()))
    why = altered(key, {**table, "reason": "hand-edited"}, declared=True)
    assert why == (
        f"checksum: {shown(table['checksum'])} does not match the entry: "
        "it was edited or damaged after chunktune wrote it"
    )


def test_a_table_nested_past_what_json_encodes_fails_its_checksum() -> None:
    """A stored table nested too deeply for its checksum to be made is damage, never a match."""
    key, table = next(iter(stored_tables(GOLDEN).items()))
    deep: list[Any] = []
    for _ in range(100_000):
        deep = [deep]
    assert altered(key, {**table, "extra": deep}, declared=True) is not None


@pytest.mark.parametrize(
    "declared", [pytest.param('"md5"', id="other"), pytest.param("1", id="number")]
)
def test_checksums_made_otherwise_make_the_document_unusable(declared: str) -> None:
    """A declaration of checksums this chunktune cannot check is unusable (aside, salvaged)."""
    raw, _ = checksummed("toml")
    changed = raw.replace(b'checksums = "sha256"', f"checksums = {declared}".encode())
    with pytest.raises(UnusableCache, match="declares entry checksums"):
        parse_cache(changed, "toml", mtime=0.0, source="x")


def test_bad_entries_are_skipped_and_the_rest_kept() -> None:
    """A document with some bad entries keeps every valid one and names each skipped key."""
    doc = {
        "schema": 1,
        "entries": {
            "good": table(),
            "neg": table(chunk_size=-5),
            "str": "not a table",
            "inf": table(created=float("inf")),
        },
    }
    parsed = parse_cache(json.dumps(doc).encode(), "json", mtime=0.0, source="x")
    assert set(parsed.entries) == {"good"}
    assert dict(parsed.skipped).keys() == {"neg", "str", "inf"}
    assert "chunk_size" in dict(parsed.skipped)["neg"]


def test_older_tuner_entries_go_through_the_same_checks() -> None:
    """The older tuner's flat file: valid entries migrate, dated by the file; bad ones skipped."""
    doc = {
        "ok": {"chunk_size": 8, "per_candidate_ms": {"None": 10.0, "8": 9.0}},
        "native": {"chunk_size": None},
        "neg": {"chunk_size": -5},
        "timing": {"chunk_size": 4, "per_candidate_ms": {"4": -1.0}},
    }
    parsed = parse_cache(json.dumps(doc).encode(), "json", mtime=123.0, source="old.json")
    assert parsed.legacy and set(parsed.entries) == {"legacy-ok", "legacy-native"}
    assert {k for k, _ in parsed.skipped} == {"legacy-neg", "legacy-timing"}
    assert parsed.entries["legacy-ok"].created == 123.0
    assert parsed.entries["legacy-native"].chunk_size is None


def test_an_older_tuners_entry_names_its_file_in_its_reason() -> None:
    """A migrated entry's reason says which older tuner's file it came from."""
    doc = {"k": {"chunk_size": 8}}
    parsed = parse_cache(json.dumps(doc).encode(), "json", mtime=1.0, source="/x/old.json")
    assert parsed.entries["legacy-k"].reason == "migrated from the older tuner's cache /x/old.json"


def test_an_older_tuners_entry_holds_no_native_chunk() -> None:
    """The older tuner stored no native chunk: a migrated entry's is 0, never a made-up size."""
    doc = {"k": {"chunk_size": 8, "hostname": "h1"}}
    parsed = parse_cache(json.dumps(doc).encode(), "json", mtime=1.0, source="x")
    got = parsed.entries["legacy-k"]
    assert (got.native_chunk, got.chunk_size, got.host) == (0, 8, "h1")


def test_an_empty_object_is_no_older_tuners_cache() -> None:
    """A schema-less empty JSON object has no entry to say it is the older tuner's: unusable."""
    with pytest.raises(UnusableCache, match="neither a chunktune cache nor an older tuner's"):
        parse_cache(b"{}", "json", mtime=1.0, source="x")


@pytest.mark.parametrize(
    ("timings", "kept"),
    [
        pytest.param(None, True, id="null-migrates-without-timings"),
        pytest.param([10.0, 9.0], False, id="list-skipped"),
    ],
)
def test_an_older_tuners_timings_that_are_no_table(timings: Any, kept: bool) -> None:
    """per_candidate_ms null migrates with no timings; a list skips its entry, not the file."""
    doc = {"k": {"chunk_size": 8, "per_candidate_ms": timings}, "ok": {"chunk_size": 4}}
    parsed = parse_cache(json.dumps(doc).encode(), "json", mtime=1.0, source="x")
    assert set(parsed.entries) == ({"legacy-k", "legacy-ok"} if kept else {"legacy-ok"})
    if kept:
        assert parsed.entries["legacy-k"].timings == {}
    else:
        assert list(parsed.skipped) == [
            ("legacy-k", "per_candidate_ms: [10.0, 9.0] is not a table")
        ]


def test_a_file_of_tables_without_chunk_sizes_is_no_older_tuners_cache() -> None:
    """A schema-less file of tables, one with no chunk_size, is unusable, not migrated."""
    doc = {"ok": {"chunk_size": 8}, "other": {"size": 8}}
    with pytest.raises(UnusableCache, match="neither a chunktune cache nor an older tuner's"):
        parse_cache(json.dumps(doc).encode(), "json", mtime=0.0, source="x")


def test_entries_that_open_with_no_brace_do_not_parse() -> None:
    """A JSON file whose entries open with '[' where '{' was is unusable, not read past it."""
    raw = encode(GOLDEN, "json").replace(b'"entries": {', b'"entries": [', 1)
    assert b'"entries": [' in raw
    with pytest.raises(UnusableCache, match="does not parse as JSON"):
        parse_cache(raw, "json", mtime=0.0, source="x")


def test_one_format_decision() -> None:
    """`.toml` is TOML, `.json` JSON; auto maps anything else to JSON; an explicit format wins."""
    assert suffix_format(Path("a.TOML")) == "toml"
    assert suffix_format(Path("a.txt")) is None
    assert cache_format(Path("a.txt")) == "json"
    assert cache_format(Path("a.json"), "toml") == "toml"


_KEY = "3fa9c1d2e4b5a6c7d8e9f0a1b2c3d4e5.0a1b2c3d4e5f"


@pytest.mark.parametrize("fmt", ["json", "toml"])
def test_a_rewrite_that_reuses_known_tables_writes_the_pinned_bytes(fmt: str) -> None:
    """Entries read back from the golden file and rewritten, tables reused, give the same bytes."""
    raw = (DATA / f"cache_v1_checksummed.{fmt}").read_bytes()
    first = parse_cache(raw, fmt, mtime=0.0, source="x")  # type: ignore[arg-type]
    tables = stored_tables(first.entries)
    known = {k: Known(s.checksum, s.entry, tables[k]) for k, s in first.known.items()}
    again = parse_cache(raw, fmt, mtime=0.0, source="x", known=known)  # type: ignore[arg-type]
    assert again.entries[_KEY] is first.entries[_KEY]
    reused = stored_tables(again.entries, again.known)
    assert reused[_KEY] is tables[_KEY]
    assert encode_tables(reused, fmt) == encode(first.entries, fmt)  # type: ignore[arg-type]


def test_a_known_table_is_reused_only_for_the_very_entry_it_was_made_from() -> None:
    """An entry equal to the known one but another object (an int created) is converted afresh."""
    entry = attrs.evolve(GOLDEN[_KEY], created=1_700_000_000)
    equal = attrs.evolve(entry, created=1_700_000_000.0)
    assert equal == entry
    table = stored_tables({_KEY: entry})[_KEY]
    known = {_KEY: Known(table["checksum"], entry, table)}
    assert stored_tables({_KEY: entry}, known)[_KEY] is table
    fresh = stored_tables({_KEY: equal}, known)[_KEY]
    assert fresh["created"] == 1_700_000_000.0 and type(fresh["created"]) is float
    assert fresh["checksum"] == checksum(_KEY, fresh) != table["checksum"]


@pytest.mark.parametrize("fmt", ["json", "toml"])
def test_a_known_entry_is_reused_only_for_a_table_with_its_checksum(fmt: str) -> None:
    """A table changed and re-checksummed reads as itself; one edited without is still altered."""
    raw = (DATA / f"cache_v1_checksummed.{fmt}").read_bytes()
    first = parse_cache(raw, fmt, mtime=0.0, source="x")  # type: ignore[arg-type]
    other = attrs.evolve(first.entries[_KEY], chunk_size=4)
    rewritten = encode({**first.entries, _KEY: other}, fmt)  # type: ignore[arg-type]
    again = parse_cache(rewritten, fmt, mtime=0.0, source="x", known=first.known)  # type: ignore[arg-type]
    assert again.entries[_KEY].chunk_size == 4 and again.known[_KEY].entry is again.entries[_KEY]
    edited = raw.replace(b"chunk_size = 8", b"chunk_size = 4").replace(
        b'"chunk_size": 8', b'"chunk_size": 4'
    )
    damaged = parse_cache(edited, fmt, mtime=0.0, source="x", known=first.known)  # type: ignore[arg-type]
    assert damaged.altered == (_KEY,) and _KEY not in damaged.entries


@pytest.mark.parametrize(
    "tail",
    [pytest.param(b"junk", id="junk"), pytest.param(b'{"schema": 1}\n', id="second-document")],
)
def test_a_json_document_with_bytes_after_it_is_unusable(tail: bytes) -> None:
    """Bytes after a JSON cache's closing brace make it unusable, as json.loads says."""
    raw = encode(GOLDEN, "json") + tail
    with pytest.raises(UnusableCache, match="does not parse as JSON"):
        parse_cache(raw, "json", mtime=0.0, source="c.json")


@pytest.mark.parametrize(
    ("wrote", "damaged"),
    [
        pytest.param(b'"checksums": ', b'"checksums"= ', id="no-colon"),
        pytest.param(b'"sha256",', b'"sha256";', id="no-comma"),
        pytest.param(b"\n}\n", b"\n]\n", id="closed-by-a-bracket"),
        pytest.param(b'"checksums":', b"0:", id="a-name-not-a-string"),
        pytest.param(b'{\n "checksums"', b'[\n "checksums"', id="opened-by-a-bracket"),
        pytest.param(b',\n "entries"', b',\x0c"entries"', id="a-form-feed-between"),
    ],
)
def test_a_json_document_one_byte_off_json_is_unusable(wrote: bytes, damaged: bytes) -> None:
    """A JSON cache with one separator, bracket or space damaged is unusable, as json.loads says."""
    raw = encode(GOLDEN, "json")
    assert raw.count(wrote) == 1
    raw = raw.replace(wrote, damaged)
    with pytest.raises(ValueError):
        json.loads(raw)
    with pytest.raises(UnusableCache, match="does not parse as JSON"):
        parse_cache(raw, "json", mtime=0.0, source="c.json")


def test_a_toml_cache_is_the_document_tomli_w_writes_escaped_empty_or_not() -> None:
    """TOML: the whole document as tomli_w writes it, escaped (a bidi override), empty too."""
    odd = {"zz.host": attrs.evolve(GOLDEN["aa00.bb11"], host="n\u00f6de\u202e")}
    for entries in ({}, GOLDEN, odd):
        doc = {"schema": SCHEMA, "checksums": "sha256", "entries": stored_tables(entries)}
        assert encode(entries, "toml").decode() == escaped_toml(tomli_w.dumps(doc))
    assert "\u202e" not in encode(odd, "toml").decode()
