"""`chunktune cache merge FILE... [-o OUT]`: the newest entry per key wins; each choice is said."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from _cache_cli import entry, one_error
from _holders import FLOCK_REFUSAL_RAISES, refuse_flock_once

from chunktune import CacheEntry, DecisionCache
from chunktune._cache_entry import entry_to_table
from chunktune._cli import main


def host(path: Path, **entries: CacheEntry) -> Path:
    DecisionCache(path).update(entries)
    return path


@pytest.fixture
def fleet(isolated: Path) -> tuple[Path, Path]:
    """Two hosts' caches: one key each of their own, and one key both hold (n2's is newer)."""
    n1 = host(isolated / "n1.json", own1=entry(2), shared=entry(4, age_s=600))
    n2 = host(isolated / "n2.json", own2=entry(8), shared=entry(16, age_s=60))
    return n1, n2


def test_merge_into_a_file_keeps_the_newest_entry_per_key(
    isolated: Path, capsys: pytest.CaptureFixture[str], fleet: tuple[Path, Path]
) -> None:
    """Every key lands in OUT; the shared key holds the newer entry, and the replacement is said."""
    out_file = isolated / "fleet.toml"
    assert main(["cache", "merge", *map(str, fleet), "-o", str(out_file)]) == 0
    out = capsys.readouterr().out
    assert f"merged 2 files into {out_file}: " in out
    merged = DecisionCache(out_file).entries()
    assert set(merged) == {"own1", "own2", "shared"}
    assert merged["shared"].chunk_size == 16
    assert f"replaced shared: {fleet[1]}'s entry is newer than {fleet[0]}'s" in out
    assert "3 added, 1 replaced by newer entries, 0 not taken (not newer)" in out
    assert "3 entries now" in out


def test_entries_of_one_key_created_at_the_same_time_keep_the_one_merged_first(
    isolated: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Two inputs' entries of one key, equally new: the first input's stays, the other is named."""
    created = 1_700_000_000.0
    n1 = host(isolated / "n1.json", shared=entry(4, created=created))
    n2 = host(isolated / "n2.json", shared=entry(8, created=created))
    out_file = isolated / "fleet.json"
    assert main(["cache", "merge", str(n1), str(n2), "-o", str(out_file)]) == 0
    assert DecisionCache(out_file).entries()["shared"].chunk_size == 4
    assert f"kept shared from {n1}: {n2}'s entry is not newer" in capsys.readouterr().out


def test_merge_into_a_file_leaves_that_file_alone_beside_its_inputs(
    isolated: Path, fleet: tuple[Path, Path]
) -> None:
    """merge -o OUT creates OUT and nothing else: no OUT.lock is left beside it."""
    before = set(isolated.iterdir())
    out_file = isolated / "fleet.json"
    assert main(["cache", "merge", *map(str, fleet), "-o", str(out_file)]) == 0
    assert set(isolated.iterdir()) - before == {out_file}


@pytest.mark.skipif(
    not FLOCK_REFUSAL_RAISES, reason="filelock before 3.21 retries a refused flock as a held one"
)
@pytest.mark.parametrize("errno_", [errno.ENOLCK, errno.EIO], ids=["ENOLCK", "EIO"])
def test_a_merge_whose_lock_is_refused_leaves_no_lock_file(
    isolated: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    fleet: tuple[Path, Path],
    errno_: int,
) -> None:
    """merge -o OUT whose lock flock refuses: exit 2, one line, and no OUT.lock left beside it."""
    out_file = isolated / "fleet.json"
    refused = refuse_flock_once(monkeypatch, f"{out_file}.lock", errno_)
    before = set(isolated.iterdir())
    assert main(["cache", "merge", *map(str, fleet), "-o", str(out_file)]) == 2
    assert os.strerror(errno_) in one_error(capsys.readouterr().err)
    assert refused and set(isolated.iterdir()) == before


def test_an_older_entry_merged_later_is_named_not_taken(
    isolated: Path, capsys: pytest.CaptureFixture[str], fleet: tuple[Path, Path]
) -> None:
    """In the other order the older entry is not taken, and a line says which one was kept."""
    out_file = isolated / "fleet.json"
    assert main(["cache", "merge", str(fleet[1]), str(fleet[0]), "-o", str(out_file)]) == 0
    out = capsys.readouterr().out
    assert DecisionCache(out_file).entries()["shared"].chunk_size == 16
    assert f"kept shared from {fleet[1]}: {fleet[0]}'s entry is not newer" in out


def test_merge_without_output_goes_into_the_cache(
    isolated: Path, capsys: pytest.CaptureFixture[str], fleet: tuple[Path, Path]
) -> None:
    """Without -o the files merge into the user's cache, which keeps its own newer entries."""
    DecisionCache(isolated / "cache.json").put("shared", entry(32, age_s=1))
    assert main(["cache", "merge", *map(str, fleet)]) == 0
    merged = DecisionCache(isolated / "cache.json").entries()
    assert set(merged) == {"own1", "own2", "shared"}
    assert merged["shared"].chunk_size == 32
    assert "kept shared from the cache" in capsys.readouterr().out


def test_a_malformed_input_writes_nothing(
    isolated: Path, capsys: pytest.CaptureFixture[str], fleet: tuple[Path, Path]
) -> None:
    """One unreadable input: exit 2 with one message, and no output file written at all."""
    bad = isolated / "bad.json"
    bad.write_text('{"schema": 1, "entries": null}')
    out_file = isolated / "fleet.json"
    assert main(["cache", "merge", str(fleet[0]), str(bad), "-o", str(out_file)]) == 2
    assert "not a table" in one_error(capsys.readouterr().err)
    assert not out_file.exists()


def test_an_output_in_a_missing_directory_is_refused(
    isolated: Path, capsys: pytest.CaptureFixture[str], fleet: tuple[Path, Path]
) -> None:
    """-o in a directory that does not exist: exit 2 naming it, and no directory created."""
    out_file = isolated / "typo" / "fleet.json"
    assert main(["cache", "merge", str(fleet[0]), "-o", str(out_file)]) == 2
    assert "typo does not exist" in one_error(capsys.readouterr().err)
    assert not out_file.parent.exists()


def test_bad_entries_are_named_and_the_rest_merged(
    isolated: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An input's invalid entries are listed on stderr; its valid ones are merged."""
    good = entry_to_table(entry())
    doc = {"good": good, "neg": {**good, "chunk_size": -5}}
    source = isolated / "n1.json"
    source.write_text(json.dumps({"schema": 1, "entries": doc}))
    out_file = isolated / "fleet.json"
    assert main(["cache", "merge", str(source), "-o", str(out_file)]) == 0
    out, err = capsys.readouterr()
    assert "'neg': chunk_size: -5" in err
    assert f"merged 1 file into {out_file}: 1 added" in out
    assert set(DecisionCache(out_file).entries()) == {"good"}


@pytest.mark.parametrize(
    ("make", "message"),
    [
        pytest.param(lambda p: p / "fleet.txt", "must end in .json or .toml", id="suffix"),
        pytest.param(lambda p: p / "n1.json", "the file being merged into", id="self"),
    ],
)
def test_bad_outputs_are_refused(
    isolated: Path,
    capsys: pytest.CaptureFixture[str],
    fleet: tuple[Path, Path],
    make: Any,
    message: str,
) -> None:
    """An output without a cache suffix, or one of the inputs, is refused with exit 2."""
    assert main(["cache", "merge", *map(str, fleet), "-o", str(make(isolated))]) == 2
    assert message in one_error(capsys.readouterr().err)


def test_a_corrupt_output_is_refused_and_left_alone(
    isolated: Path, capsys: pytest.CaptureFixture[str], fleet: tuple[Path, Path]
) -> None:
    """An existing OUT that is not a cache: exit 2, and its bytes stay as they were."""
    out_file = isolated / "fleet.json"
    out_file.write_bytes(b"not json")
    assert main(["cache", "merge", *map(str, fleet), "-o", str(out_file)]) == 2
    assert "does not parse" in one_error(capsys.readouterr().err)
    assert out_file.read_bytes() == b"not json"


def test_an_output_that_is_no_regular_file_is_refused_unread(
    isolated: Path, capsys: pytest.CaptureFixture[str], fleet: tuple[Path, Path]
) -> None:
    """An OUT linked to a device (/dev/zero would be read until memory ran out) is refused."""
    out_file = isolated / "fleet.json"
    out_file.symlink_to(os.devnull)
    assert main(["cache", "merge", *map(str, fleet), "-o", str(out_file)]) == 2
    assert "it is no regular file" in one_error(capsys.readouterr().err)
    assert out_file.is_symlink()


def test_an_output_with_an_altered_entry_is_refused_and_left_alone(
    isolated: Path, capsys: pytest.CaptureFixture[str], fleet: tuple[Path, Path]
) -> None:
    """An existing OUT whose entry fails its checksum: exit 2, not moved aside, bytes kept."""
    out_file = host(isolated / "fleet.json", kept=entry(2), edited=entry(8))
    edited = out_file.read_bytes().replace(b'"chunk_size": 8', b'"chunk_size": 16')
    out_file.write_bytes(edited)
    assert main(["cache", "merge", *map(str, fleet), "-o", str(out_file)]) == 2
    assert "'edited') whose checksum does not match" in one_error(capsys.readouterr().err)
    assert out_file.read_bytes() == edited
    assert [p.name for p in isolated.iterdir() if ".corrupt-" in p.name] == []


def test_a_write_that_fails_merges_nothing_and_says_why(
    isolated: Path,
    capsys: pytest.CaptureFixture[str],
    fleet: tuple[Path, Path],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The one write fails (a full disk, say): exit 2, one message saying why, OUT untouched."""
    from chunktune._cache_file import CacheFile

    def full(self: CacheFile, entries: Any, **_: Any) -> None:
        raise OSError(28, "No space left on device")

    out_file = host(isolated / "fleet.json", old=entry(2))
    before = out_file.read_bytes()
    monkeypatch.setattr(CacheFile, "write", full)
    assert main(["cache", "merge", *map(str, fleet), "-o", str(out_file)]) == 2
    line = one_error(capsys.readouterr().err)
    assert line.endswith("No space left on device") and "had been merged" not in line
    assert out_file.read_bytes() == before


def test_many_inputs_are_merged_in_one_write_of_the_output(
    isolated: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Five hosts' caches: OUT is written once (each write rewrites it whole), all keys in it."""
    from chunktune._cache_file import CacheFile

    hosts = [host(isolated / f"n{i}.json", **{f"own{i}": entry(2 + i)}) for i in range(5)]
    real = CacheFile.write
    writes: list[Path] = []

    def counted(self: CacheFile, entries: Any, **kw: Any) -> None:
        writes.append(self.path)
        real(self, entries, **kw)

    monkeypatch.setattr(CacheFile, "write", counted)
    out_file = isolated / "fleet.json"
    assert main(["cache", "merge", *map(str, hosts), "-o", str(out_file)]) == 0
    assert writes == [out_file]
    assert set(DecisionCache(out_file).entries()) == {f"own{i}" for i in range(5)}


def test_each_line_names_the_input_that_holds_the_key_now(
    isolated: Path, capsys: pytest.CaptureFixture[str], fleet: tuple[Path, Path]
) -> None:
    """Later lines name the input that holds a key now, and the summary counts each outcome."""
    n3 = host(isolated / "n3.json", shared=entry(32, age_s=300))  # newer than n1's, older than n2's
    n4 = host(isolated / "n4.json", shared=entry(64, age_s=1))
    args = [str(fleet[0]), str(fleet[1]), str(n3), str(n4), "-o", str(isolated / "out.json")]
    assert main(["cache", "merge", *args]) == 0
    out = capsys.readouterr().out
    assert f"kept shared from {fleet[1]}: {n3}'s entry is not newer" in out
    assert f"replaced shared: {n4}'s entry is newer than {fleet[1]}'s" in out
    assert "3 added, 2 replaced by newer entries, 1 not taken (not newer), 0 already present" in out


def test_an_output_with_several_altered_entries_names_them_all(
    isolated: Path, capsys: pytest.CaptureFixture[str], fleet: tuple[Path, Path]
) -> None:
    """The refusal of an OUT with two altered entries names both keys, not only the first."""
    out_file = host(isolated / "fleet.json", a=entry(2), b=entry(8))
    edited = out_file.read_bytes().replace(b'"chunk_size": 8', b'"chunk_size": 16')
    out_file.write_bytes(edited.replace(b'"chunk_size": 2', b'"chunk_size": 32'))
    assert main(["cache", "merge", *map(str, fleet), "-o", str(out_file)]) == 2
    assert "2 entries ('a', 'b') whose checksum does not match" in one_error(
        capsys.readouterr().err
    )


def test_the_summary_counts_what_out_holds_now_entries_from_before_too(
    isolated: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Merged into an OUT that held an entry already, the summary counts that one too."""
    out_file = host(isolated / "fleet.json", before=entry(2))
    n1 = host(isolated / "n1.json", own1=entry(4))
    assert main(["cache", "merge", str(n1), "-o", str(out_file)]) == 0
    assert "1 added, 0 replaced" in (out := capsys.readouterr().out) and "2 entries now" in out


def test_one_job_s_entries_under_two_policies_are_named_apart(
    isolated: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Replaced and kept lines name a job's two policies' keys as `cache list` does, not alike."""
    job = "0123456789abcdef0123"
    k1, k2 = f"{job}.aaaaaaaaaaaa", f"{job}.bbbbbbbbbbbb"
    old = host(isolated / "old.json", **{k1: entry(4, age_s=600), k2: entry(4, age_s=60)})
    new = host(isolated / "new.json", **{k1: entry(8, age_s=300), k2: entry(8, age_s=900)})
    out_file = isolated / "out.json"
    assert main(["cache", "merge", str(old), str(new), "-o", str(out_file)]) == 0
    out = capsys.readouterr().out
    assert f"replaced 0123456789ab.aaaaaa: {new}'s entry is newer than {old}'s" in out
    assert f"kept 0123456789ab.bbbbbb from {old}: {new}'s entry is not newer" in out


def _one_policy_each_of_a_job_cached_under_two(isolated: Path) -> tuple[Path, Path]:
    """A cache holding a job under two policies; a newer input of one, an older of the other."""
    job = "0123456789abcdef0123"
    k1, k2 = f"{job}.aaaaaaaaaaaa", f"{job}.bbbbbbbbbbbb"
    host(isolated / "cache.json", **{k1: entry(4, age_s=600), k2: entry(4, age_s=60)})
    newer = host(isolated / "newer.json", **{k1: entry(8, age_s=300)})
    older = host(isolated / "older.json", **{k2: entry(2, age_s=900)})
    return newer, older


def test_a_key_whose_job_has_another_policy_in_the_cache_is_named_apart(
    isolated: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An input holding one policy's entry of a job the cache holds two of names it as list does."""
    newer, older = _one_policy_each_of_a_job_cached_under_two(isolated)
    assert main(["cache", "merge", str(newer), str(older)]) == 0
    out = capsys.readouterr().out
    assert f"replaced 0123456789ab.aaaaaa: {newer}'s entry is newer than the cache's" in out
    assert f"kept 0123456789ab.bbbbbb from the cache: {older}'s entry is not newer" in out
    assert main(["cache", "show", "0123456789ab.aaaaaa"]) == 0  # the name shown picks one


def test_import_names_a_key_whose_job_has_another_policy_in_the_cache_apart(
    isolated: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Import names a replaced or kept key as `cache list` does beside its job's other policy."""
    newer, older = _one_policy_each_of_a_job_cached_under_two(isolated)
    assert main(["cache", "import", str(newer)]) == 0
    assert "replaced 0123456789ab.aaaaaa: the imported entry is newer" in capsys.readouterr().out
    assert main(["cache", "import", str(older)]) == 0
    out = capsys.readouterr().out
    assert "kept 0123456789ab.bbbbbb: the entry already in the cache is newer" in out


def test_a_dash_merges_the_cache_piped_to_stdin(isolated: Path, fleet: tuple[Path, Path]) -> None:
    """`cache export - | cache merge n1.json - -o OUT` merges the piped cache in its place."""
    n1, n2 = fleet
    out_file = isolated / "fleet.json"
    command = [sys.executable, "-m", "chunktune", "cache"]
    exporter = subprocess.Popen(
        [*command, "export", "-"],
        stdout=subprocess.PIPE,
        env={**os.environ, "CHUNKTUNE_CACHE": str(n2)},
    )
    assert exporter.stdout is not None
    merged = subprocess.run(
        [*command, "merge", str(n1), "-", "-o", str(out_file)],
        stdin=exporter.stdout,
        capture_output=True,
        text=True,
        timeout=60,
    )
    exporter.stdout.close()
    assert exporter.wait(timeout=60) == 0
    assert merged.returncode == 0, merged.stderr
    assert f"replaced shared: stdin's entry is newer than {n1}'s" in merged.stdout
    assert DecisionCache(out_file).entries() == {
        **DecisionCache(n1).entries(),
        **DecisionCache(n2).entries(),
    }


def test_a_dash_given_twice_is_refused_before_reading(
    isolated: Path, capsys: pytest.CaptureFixture[str], fleet: tuple[Path, Path]
) -> None:
    """stdin holds one cache: `merge - -` is exit 2, naming the dash, and OUT is not made."""
    out_file = isolated / "fleet.json"
    assert main(["cache", "merge", "-", str(fleet[0]), "-", "-o", str(out_file)]) == 2
    assert "- (stdin) is given 2 times; expected it once at most" in one_error(
        capsys.readouterr().err
    )
    assert not out_file.exists()


def test_an_input_merged_twice_counts_its_entries_already_present(
    isolated: Path, capsys: pytest.CaptureFixture[str], fleet: tuple[Path, Path]
) -> None:
    """The same file given twice: its entries are added once, then counted 'already present'."""
    out_file = isolated / "fleet.json"
    assert main(["cache", "merge", str(fleet[0]), str(fleet[0]), "-o", str(out_file)]) == 0
    out = capsys.readouterr().out
    assert "2 added, 0 replaced by newer entries, 0 not taken (not newer), 2 already present" in out


def test_an_empty_output_name_is_refused_not_taken_for_the_cache(
    isolated: Path, capsys: pytest.CaptureFixture[str], fleet: tuple[Path, Path]
) -> None:
    """`merge FILE -o ""` is a usage error; nothing is merged into the user's cache instead."""
    cache = DecisionCache(isolated / "cache.json")
    cache.put("mine", entry())
    before = cache.path.read_bytes()
    assert main(["cache", "merge", *map(str, fleet), "-o", ""]) == 2
    assert "merge -o" in one_error(capsys.readouterr().err)
    assert cache.path.read_bytes() == before
