"""`chunktune cache ...` over hostile files: one message and exit 2, or a warning and exit 0."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest
from _cache_cli import entry, one_error

import chunktune
from chunktune import DecisionCache, _config
from chunktune._cache_entry import entry_to_table
from chunktune._cache_transfer import write_cache_file
from chunktune._cli import main
from chunktune._shown import unprinted


@pytest.mark.parametrize(
    "verb",
    [
        pytest.param(["list"], id="list"),
        pytest.param(["export", "out.json"], id="export"),
        pytest.param(["show", "a"], id="show"),
        pytest.param(["clear"], id="clear"),
    ],
)
def test_an_unreadable_cache_is_an_error_not_an_empty_one(
    isolated: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    verb: list[str],
) -> None:
    """A cache that cannot be read fails list/export/show/clear with exit 2 saying why."""
    broken = isolated / "dir.json"
    broken.mkdir()
    monkeypatch.setenv("CHUNKTUNE_CACHE", str(broken))
    assert main(["cache", *verb]) == 2
    assert "cannot read the cache" in one_error(capsys.readouterr().err)
    assert not (isolated / "out.json").exists()


@pytest.mark.parametrize(
    ("content", "message"),
    [
        pytest.param(b'{"schema": 1, "entries": null}', "not a table", id="entries-null"),
        pytest.param(b'{"schema": 1, "entries": "x"}', "not a table", id="entries-string"),
        pytest.param(b"[" * 100_000 + b"]" * 100_000, "nested too deeply", id="deep"),
        pytest.param(b"\xff\xfe{}", "does not parse", id="not-utf8"),
    ],
)
def test_importing_a_malformed_file_leaves_the_cache_untouched(
    isolated: Path, capsys: pytest.CaptureFixture[str], content: bytes, message: str
) -> None:
    """`cache import` of a malformed file: one message, exit 2, the user's cache byte for byte."""
    cache = DecisionCache(isolated / "cache.json")
    cache.put("mine", entry())
    before = cache.path.read_bytes()
    other = isolated / "other.json"
    other.write_bytes(content)
    assert main(["cache", "import", str(other)]) == 2
    assert message in one_error(capsys.readouterr().err)
    assert cache.path.read_bytes() == before and other.read_bytes() == content


def test_importing_a_trace_says_it_is_a_trace_and_how_to_replay_it(
    isolated: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`cache import` of a file `chunktune record` wrote: exit 2, one line naming it a trace."""
    trace = isolated / "trace.json"
    record = ["record", "--num-envs", "4", "--nthread", "2", "--nstep", "1", "--rounds", "2"]
    assert main([*record, "--sizes", "1", "-q", "-o", str(trace)]) == 0
    cache = DecisionCache(isolated / "cache.json")
    cache.put("mine", entry())
    before = cache.path.read_bytes()
    assert main(["cache", "import", str(trace)]) == 2
    line = one_error(capsys.readouterr().err)
    assert "a trace written by `chunktune record`" in line
    assert "ReplayWorkload.from_file" in line
    assert cache.path.read_bytes() == before


def test_importing_bad_entries_names_them_and_imports_the_rest(
    isolated: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Bad entries in an imported file are named with their field; the valid ones go in."""
    other = isolated / "other.json"
    good = entry_to_table(entry())
    doc = {"good": good, "neg": {**good, "chunk_size": -5}, "inf": {**good, "created": 1e999}}
    other.write_text(json.dumps({"schema": 1, "entries": doc}))
    assert main(["cache", "import", str(other)]) == 0
    out, err = capsys.readouterr()
    assert "imported 1 of 3 entries" in out and "(2 malformed, skipped)" in out
    assert "skipped 2 malformed entries" in err
    assert "'neg': chunk_size: -5" in err and "'inf': created: inf" in err
    assert set(DecisionCache(isolated / "cache.json").entries()) == {"good"}


def test_show_of_an_entry_from_the_far_future(
    isolated: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`cache show` of an entry created at 1e300 says the date is unknown instead of crashing."""
    DecisionCache(isolated / "cache.json").put("far", entry(created=1e300))
    assert main(["cache", "show", "far"]) == 0
    assert any(ln.split() == ["created", "unknown"] for ln in capsys.readouterr().out.splitlines())
    assert main(["cache", "list"]) == 0


def test_list_of_a_wrong_shape_moves_it_aside(
    isolated: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`cache list` over a cache of the wrong shape warns with both paths and lists nothing."""
    path = isolated / "cache.json"
    path.write_text('{"schema": 1, "entries": null}')
    assert main(["cache", "list"]) == 0
    out, err = capsys.readouterr()
    (aside,) = isolated.glob("cache.json.corrupt-*")
    assert "no entries" in out and str(path) in err and str(aside) in err


def test_list_of_a_settings_file_named_as_the_cache_leaves_it_in_place(
    isolated: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`cache list` with $CHUNKTUNE_CACHE naming the settings file exits 2 and renames nothing."""
    settings = isolated / "chunktune.toml"
    settings.write_text('policy = "off"\n')
    monkeypatch.setenv("CHUNKTUNE_CACHE", str(settings))
    assert main(["cache", "list"]) == 2
    assert "neither a chunktune cache" in one_error(capsys.readouterr().err)
    assert settings.read_text() == 'policy = "off"\n'
    assert not list(isolated.glob("chunktune.toml.corrupt-*"))


def test_clear_of_an_empty_cache_still_removes_idle_locks(
    isolated: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`cache clear` with no entries still deletes the key-lock files no process holds."""
    (isolated / "locks").mkdir()
    (isolated / "locks" / "k.lock").touch()
    assert main(["cache", "clear", "--yes"]) == 0
    assert "nothing to clear" in capsys.readouterr().out
    assert not (isolated / "locks" / "k.lock").exists()


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        pytest.param('[cache]\npath = ""\n', 'cache.path: "" is not a path', id="empty"),
        pytest.param('[cache]\npath = "~nosuchuser-ct/c.json"\n', "no such home", id="user"),
        pytest.param('[cache]\npath = "a\\u0000b"\n', "NUL byte", id="nul"),
    ],
)
def test_a_bad_cache_path_is_one_config_error(
    isolated: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    settings: str,
    message: str,
) -> None:
    """[cache] path that no file can have: exit 2 and one message naming cache.path."""
    monkeypatch.delenv("CHUNKTUNE_CACHE")
    cfg = isolated / "s.toml"
    cfg.write_text(settings)
    assert main(["cache", "path", "--config", str(cfg)]) == 2
    assert message in one_error(capsys.readouterr().err)


@pytest.mark.parametrize("verb", ["export", "import"])
def test_a_file_argument_with_an_unknown_home(
    isolated: Path, capsys: pytest.CaptureFixture[str], verb: str
) -> None:
    """export/import of ~nosuchuser/x.json: exit 2 and one message, no traceback."""
    assert main(["cache", verb, "~nosuchuser-ct/x.json"]) == 2
    assert "no such home" in one_error(capsys.readouterr().err)


class Reach:
    """A custom workload, no MuJoCo model chunktune knows: modeled seconds, best near chunk 4."""

    num_envs = 64
    nthread = 4

    def signature(self) -> dict[str, str | int | float | bool]:
        return {"task": "reach-v3", "robot": "ur5e", "horizon": 200, "notes": "x" * 40}

    def run(self, chunk_size: int | None) -> float:
        return 0.0101 if chunk_size is None else 0.010 + 0.0001 * abs(chunk_size - 4)


def test_list_and_show_tell_custom_workloads_apart(
    isolated: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`cache list` shows a custom workload's first signature items; `cache show` all of them."""
    decision = chunktune.resolve_sync(Reach(), policy="quick")
    assert decision.source == "benchmark"
    assert main(["cache", "list"]) == 0
    out = capsys.readouterr().out
    row = next(ln for ln in out.splitlines() if ln.startswith(decision.key[:12]))
    assert "? ?" not in row
    assert row.split()[1:5] == ["horizon=200", "notes=xxxxxxxxxxx…", "robot=ur5e", "…"]
    assert main(["cache", "show", decision.key[:12]]) == 0
    shown = capsys.readouterr().out
    assert f"notes={'x' * 40}" in shown and "task=reach-v3" in shown


def test_list_shows_an_entry_alike_from_a_json_and_a_toml_cache(
    isolated: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`cache list` summarizes a signature by its names' order, not the file's (TOML keeps it)."""
    signature = {"kind": "reach", "task": "reach-v3", "robot": "ur5e", "horizon": 200}
    rows = []
    for suffix in (".json", ".toml"):
        path = isolated / f"c{suffix}"
        write_cache_file(path, {"a" * 32: entry(signature=signature)})
        monkeypatch.setenv("CHUNKTUNE_CACHE", str(path))
        assert main(["cache", "list"]) == 0
        rows.append(capsys.readouterr().out.splitlines()[2].split()[:5])
    assert rows[0] == rows[1]
    assert rows[0] == ["aaaaaaaaaaaa", "reach", "horizon=200", "robot=ur5e", "task=reach-v3"]


def test_importing_many_bad_entries_names_five_and_counts_the_rest(
    isolated: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Seven bad entries in an imported file: five are named, the other two only counted."""
    other = isolated / "other.json"
    good = entry_to_table(entry())
    doc = {"good": good, **{f"bad{i}": {**good, "chunk_size": -1 - i} for i in range(7)}}
    other.write_text(json.dumps({"schema": 1, "entries": doc}))
    assert main(["cache", "import", str(other)]) == 0
    err = capsys.readouterr().err
    assert f"chunktune: warning: skipped 7 malformed entries in {other}:\n" in err
    assert err.count("chunktune: warning:   'bad") == 5
    assert err.endswith("chunktune: warning:   and 2 more\n")


@pytest.mark.parametrize(
    ("verb", "advice"),
    [
        pytest.param(["list"], "", id="list"),
        pytest.param(["import", "other.json"], "", id="import"),
        pytest.param(["merge", "other.json"], "; use -o OUT", id="merge"),
    ],
)
def test_a_disabled_cache_is_named_with_the_settings_file_that_disabled_it(
    isolated: Path, capsys: pytest.CaptureFixture[str], verb: list[str], advice: str
) -> None:
    """[cache] enabled = false: each verb exits 2 naming the file (merge: and -o as the way out)."""
    config = isolated / "off.toml"
    config.write_text("[cache]\nenabled = false\n")
    assert main(["cache", *verb, "--config", str(config)]) == 2
    assert one_error(capsys.readouterr().err) == (
        f"chunktune: error: the cache is disabled ([cache] enabled = false in {config})" + advice
    )


def test_a_damaged_cache_that_cannot_go_aside_is_listed_whole_and_not_cleared(
    isolated: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A damaged cache whose lock cannot be taken: list shows the whole entries; clear exits 2."""
    path = isolated / "cache.json"
    DecisionCache(path).update(
        {"a" * 32: entry(4, reason="test 1"), "b" * 32: entry(8, reason="test 2")}
    )
    damaged = path.read_bytes().replace(b"test 2", b"test 3")  # a digit changed by hand
    path.write_bytes(damaged)
    lock = isolated / "cache.json.lock"
    lock.mkdir()  # the write lock cannot be taken (a read-only folder, for root too)
    assert main(["cache", "list"]) == 0
    out, err = capsys.readouterr()
    assert "a" * 12 in out and "b" * 12 not in out and "1 entry in" in out
    (warning,) = err.splitlines()
    assert "could not move it aside" in warning and "serving the 1 of its entries" in warning
    assert main(["cache", "clear", "--yes"]) == 2
    assert "nothing was deleted" in one_error(capsys.readouterr().err)
    assert path.read_bytes() == damaged
    assert not list(isolated.glob("cache.json.corrupt-*"))


def test_a_damaged_cache_with_no_whole_entry_that_cannot_go_aside_is_not_cleared(
    isolated: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every entry altered and the lock not to be taken: clear exits 2, not 'nothing to clear'."""
    path = isolated / "cache.json"
    DecisionCache(path).update({"a" * 32: entry(4, reason="test 1")})
    damaged = path.read_bytes().replace(b"test 1", b"test 3")
    path.write_bytes(damaged)
    lock = isolated / "cache.json.lock"
    lock.mkdir()  # the write lock cannot be taken (a read-only folder, for root too)
    assert main(["cache", "clear", "--yes"]) == 2
    out, err = capsys.readouterr()
    assert "nothing to clear" not in out
    assert "nothing was deleted" in one_error(err)
    assert path.read_bytes() == damaged


def test_exactly_five_bad_entries_are_all_named_and_none_counted(
    isolated: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Five bad entries are named one by one, with no 'and 0 more' line after them."""
    other = isolated / "other.json"
    good = entry_to_table(entry())
    doc = {"good": good, **{f"bad{i}": {**good, "chunk_size": -1 - i} for i in range(5)}}
    other.write_text(json.dumps({"schema": 1, "entries": doc}))
    assert main(["cache", "import", str(other)]) == 0
    err = capsys.readouterr().err
    assert err.count("chunktune: warning:   'bad") == 5
    assert "more" not in err


def test_importing_a_file_that_never_ends_is_refused_at_its_cap(
    isolated: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`cache import /dev/zero` exits 2 with one sentence naming the file and the cap."""
    from chunktune import _cache_transfer

    monkeypatch.setattr(_cache_transfer, "MAX_CACHE_BYTES", 2**20)  # 256 MiB of zeros, spared
    assert main(["cache", "import", "/dev/zero"]) == 2
    assert one_error(capsys.readouterr().err) == (
        "chunktune: error: cannot read /dev/zero: it holds more than 1 MiB; expected a "
        "chunktune cache (about 1.6 KB an entry)"
    )
    assert not (isolated / "cache.json").exists()


def test_one_skipped_entry_is_named_in_the_singular(
    isolated: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An import that skips exactly one entry says '1 malformed entry', not '1 ... entries'."""
    other = isolated / "other.json"
    good = entry_to_table(entry())
    doc = {"good": good, "neg": {**good, "chunk_size": -5}}
    other.write_text(json.dumps({"schema": 1, "entries": doc}))
    assert main(["cache", "import", str(other)]) == 0
    assert f"skipped 1 malformed entry in {other}:" in capsys.readouterr().err


def test_an_export_of_no_entries_counts_them_in_the_plural(
    isolated: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Exporting an empty cache says '0 entries', not '0 entry'."""
    assert main(["cache", "export", str(isolated / "out.json")]) == 0
    assert capsys.readouterr().out.startswith("exported 0 entries from ")


def test_the_cache_file_under_another_spelling_is_refused_as_import_file(
    isolated: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`cache import ./cache.json`, the cache itself by a relative name, is refused as itself."""
    DecisionCache(isolated / "cache.json").put("mine", entry())
    assert main(["cache", "import", "./cache.json"]) == 2
    assert "that is the cache file itself" in one_error(capsys.readouterr().err)


def test_an_export_to_a_symlink_loop_is_one_error(
    isolated: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`cache export --force loop.json`, a link to itself: exit 2 and one message, no traceback."""
    DecisionCache(isolated / "cache.json").put("mine", entry())
    (isolated / "loop.json").symlink_to("loop.json")
    assert main(["cache", "export", "--force", "loop.json"]) == 2
    assert "Too many levels of symbolic links" in one_error(capsys.readouterr().err)


_IN_PROC = (
    "is in /proc, the kernel's view of its processes, where no file of one's own can be "
    "kept; expected a path on a disk"
)


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="no /proc here")
@pytest.mark.parametrize(
    "path",
    [
        pytest.param("/proc/nosuchfolder/cache.json", id="cannot-be-made"),
        pytest.param("/proc/self/cache.json", id="each-process-its-own"),
    ],
)
def test_a_cache_in_proc_is_refused_naming_it_as_given(
    isolated: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
    path: str,
) -> None:
    """A cache in /proc: a resolve warns, naming it as given; `cache list|clear` exit 2."""
    from chunktune.sim import SimulatedWorkload

    monkeypatch.setenv("CHUNKTUNE_CACHE", path)
    workload = SimulatedWorkload.from_layout("blocked", num_envs=64, nthread=2)
    with caplog.at_level("WARNING", logger="chunktune"):
        decision = chunktune.resolve_sync(workload, policy="quick")
    assert decision.source == "benchmark"
    assert (
        f"chunktune: cache {path} is unavailable (it {_IN_PROC}); continuing without a cache"
        in (caplog.text)
    )
    assert not (isolated / "locks").exists()
    for verb in (["list"], ["clear", "--yes"]):
        assert main(["cache", *verb]) == 2
        error = one_error(capsys.readouterr().err)
        assert error == f"chunktune: error: cannot read the cache {path}: it {_IN_PROC}"


_OUTSIDE = "a\u202eb\u0007c\u200bd é"  # a bidi override, a bell, a zero-width space, é


@pytest.mark.parametrize("to", ["-", "out.toml"], ids=["stdout", "file"])
def test_a_toml_export_escapes_outside_texts_unprinted_characters_and_imports_back_equal(
    isolated: Path, capsys: pytest.CaptureFixture[str], to: str
) -> None:
    """A TOML export (stdout, file) spells U+202E, U+0007, U+200B as \\uXXXX, é raw; same back."""
    signature = {"scene": _OUTSIDE, f"key{_OUTSIDE}": 1}
    cache = DecisionCache(isolated / "cache.json")
    cache.put("a" * 32, entry(signature=signature, host=f"node{_OUTSIDE}", model_file=_OUTSIDE))
    assert main(["cache", "export", "--format", "toml", to]) == 0
    out = capsys.readouterr().out
    text = out if to == "-" else (isolated / to).read_text(encoding="utf-8")
    assert unprinted(text.replace("\n", "")) is None
    assert 'scene = "a\\u202Eb\\u0007c\\u200Bd é"' in text.splitlines()
    assert tomllib.loads(text)["entries"]["a" * 32]["signature"] == signature
    saved = isolated / "saved.toml"
    saved.write_text(text, encoding="utf-8")
    other = DecisionCache(isolated / "other.toml")  # a TOML cache file is written as escaped
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("CHUNKTUNE_CACHE", str(other.path))
        assert main(["cache", "import", str(saved)]) == 0
    assert other.entries() == cache.entries()
    assert unprinted(other.path.read_text(encoding="utf-8").replace("\n", "")) is None


def test_memory_spent_outside_a_resolve_is_one_line_and_exit_1(
    isolated: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A MemoryError finding the settings ends `cache path` in exit 1: one line, no traceback."""

    def no_memory(env: str | None) -> Path | None:
        raise MemoryError

    monkeypatch.setattr(_config, "discover_config", no_memory)
    assert main(["cache", "path"]) == 1
    assert "ran out of memory" in one_error(capsys.readouterr().err)


_ODD = "a\nb\x1b[31m"  # a newline and an escape sequence in a file's name
_ODD_SHOWN = r'"a\nb\u001B[31m'  # how a message starts naming it: quoted, escaped


@pytest.mark.parametrize(
    ("argv", "made"),
    [
        pytest.param(["import", f"{_ODD}.json"], None, id="import-missing"),
        pytest.param(["import", f"{_ODD}.json"], "{", id="import-broken"),
        pytest.param(["import", f"{_ODD}.json"], "dir", id="import-folder"),
        pytest.param(["merge", f"{_ODD}.json"], None, id="merge-missing"),
        pytest.param(["merge", f"{_ODD}.json"], "{", id="merge-broken"),
        pytest.param(["merge", "in.json", "-o", f"{_ODD}/x.json"], None, id="merge-o-no-dir"),
        pytest.param(["merge", "in.json", "-o", f"{_ODD}.json"], "dir", id="merge-o-folder"),
        pytest.param(["merge", "in.json", "-o", f"{_ODD}.txt"], None, id="merge-o-suffix"),
        pytest.param(["export", f"{_ODD}/x.json"], None, id="export-no-dir"),
        pytest.param(["export", f"{_ODD}.json"], "{", id="export-exists"),
        pytest.param(["export", f"{_ODD}.txt"], None, id="export-suffix"),
    ],
)
def test_an_error_names_an_odd_file_escaped_on_one_line(
    isolated: Path, capsys: pytest.CaptureFixture[str], argv: list[str], made: str | None
) -> None:
    """import/merge/export errors quote a file name's newline and escape: one line, exit 2."""
    # the name went out raw: the error line broken in two, the rest of the terminal red
    write_cache_file(isolated / "in.json", {})
    odd = isolated / f"{_ODD}.json"
    if made == "dir":
        odd.mkdir()
    elif made is not None:
        odd.write_text(made)
    assert main(["cache", *argv]) == 2
    err = capsys.readouterr().err
    assert unprinted(err.rstrip("\n")) is None, err
    assert _ODD_SHOWN in one_error(err)


@pytest.mark.parametrize(
    "argv",
    [
        pytest.param(["list"], id="list"),
        pytest.param(["clear", "--yes"], id="clear"),
        pytest.param(["import", "in.json"], id="import"),
        pytest.param(["export", "out.json"], id="export"),
        pytest.param(["merge", "in.json"], id="merge"),
    ],
)
def test_a_report_names_an_odd_cache_path_escaped_on_one_line(
    isolated: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
) -> None:
    """list/clear/import/export/merge quote a cache path's newline and escape in their report."""
    cache = DecisionCache(isolated / f"{_ODD}.json")
    assert cache.put("a" * 32 + ".b", entry())
    write_cache_file(isolated / "in.json", {"c" * 32 + ".d": entry()})
    monkeypatch.setenv("CHUNKTUNE_CACHE", str(cache.path))
    assert main(["cache", *argv]) == 0
    out = capsys.readouterr().out
    assert unprinted(out.replace("\n", "")) is None, out
    assert f'{_ODD_SHOWN[1:]}.json"' in out.splitlines()[-1]  # an absolute path, quoted whole


def test_an_export_that_cannot_be_written_names_the_file_as_given(
    isolated: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """export /proc/self/x.json that fails names /proc/self/x.json, not the pid it stands for."""
    assert main(["cache", "export", "/proc/self/x.json"]) == 2
    line = one_error(capsys.readouterr().err)
    assert line.startswith("chunktune: error: cannot write /proc/self/x.json: "), line


@pytest.mark.parametrize("verb", ["import", "merge"])
def test_a_newer_ones_entry_in_an_input_is_skipped_as_such_not_as_malformed(
    isolated: Path, capsys: pytest.CaptureFixture[str], verb: str
) -> None:
    """import/merge skip a newer chunktune's whole entry saying whose it is, not 'malformed'."""
    from _newer import unreadable_table

    # a newer chunktune's entry, its checksum whole, was called malformed, as damage is
    tables = {"n1.abc": unreadable_table("n1.abc"), "m2.abc": {"chunk_size": "x"}}
    (isolated / "in.json").write_text(json.dumps({"schema": 1, "entries": tables}))
    assert main(["cache", verb, "in.json"]) == 0
    out, err = capsys.readouterr()
    assert "skipped 1 malformed entry in in.json:\n" in err
    assert (
        "skipped 1 entry in in.json that a newer chunktune wrote, which this one cannot read:"
        in err
    )
    if verb == "import":
        assert "(1 malformed, skipped; 1 a newer chunktune wrote, skipped)" in out
