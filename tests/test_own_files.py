"""A command's output named as a file chunktune keeps (the cache, a lock) is refused, untouched."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from _cache_cli import entry, one_error

from chunktune._cache import DecisionCache
from chunktune._cache_paths import default_cache_path
from chunktune._cli import main
from chunktune._cli._own_files import not_own_file
from chunktune._errors import ConfigError, OutputError

SMALL = ("--num-envs", "4", "--nthread", "2", "--nstep", "1")
RECORD = ("record", *SMALL, "--rounds", "1", "--sizes", "2", "-q")


@pytest.fixture
def places(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    """A live cache of one entry and a sweep lock in tmp_path, named by the environment."""
    paths = {"cache": tmp_path / "cache.json", "lock": tmp_path / "sweep.lock"}
    monkeypatch.setenv("CHUNKTUNE_CACHE", str(paths["cache"]))
    monkeypatch.setenv("CHUNKTUNE_SWEEP_LOCK", str(paths["lock"]))
    monkeypatch.setenv("CHUNKTUNE_CONFIG", "")
    monkeypatch.chdir(tmp_path)  # no ./chunktune.toml of the checkout's
    assert DecisionCache(paths["cache"]).update({"a" * 32: entry()})
    return paths


def _untouched(path: Path, before: bytes) -> None:
    assert path.read_bytes() == before
    # and no temporary of a trial write was left beside it, or made there at all
    assert [p.name for p in path.parent.iterdir() if p.name.endswith(".tmp")] == []


def test_record_refuses_the_live_cache_file_as_its_trace(
    places: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """`record -o` naming the cache file: exit 2, a message naming it, every entry kept."""
    cache = places["cache"]
    before = cache.read_bytes()
    assert main([*RECORD, "-o", str(cache)]) == 2
    line = one_error(capsys.readouterr().err)
    assert line == (
        f"chunktune: error: cannot write the trace {cache}: it is the cache file {cache}, "
        "which chunktune keeps; expected the name of another file"
    )
    _untouched(cache, before)
    assert list(DecisionCache(cache).entries()) == ["a" * 32]


def test_record_refuses_the_cache_through_a_link_or_another_spelling(
    places: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A symlink to the cache file, or a path with `..` in it, is the cache file too."""
    cache = places["cache"]
    before = cache.read_bytes()
    link = tmp_path / "link.json"
    link.symlink_to(cache)
    (tmp_path / "sub").mkdir()
    for name in (str(link), str(tmp_path / "sub" / ".." / "cache.json"), "cache.json"):
        assert main([*RECORD, "-o", name]) == 2
        assert f"it is the cache file {cache}" in one_error(capsys.readouterr().err)
    _untouched(cache, before)


def test_record_refuses_the_cache_a_settings_file_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """With no $CHUNKTUNE_CACHE, the cache that ./chunktune.toml's [cache] path names is kept."""
    monkeypatch.delenv("CHUNKTUNE_CACHE", raising=False)
    monkeypatch.setenv("CHUNKTUNE_CONFIG", "")
    monkeypatch.setenv("CHUNKTUNE_SWEEP_LOCK", str(tmp_path / "sweep.lock"))
    monkeypatch.chdir(tmp_path)
    cache = tmp_path / "decisions.json"
    (tmp_path / "chunktune.toml").write_text(f'[cache]\npath = "{cache}"\n')
    assert DecisionCache(cache).update({"b" * 32: entry()})
    before = cache.read_bytes()
    assert main([*RECORD, "-o", str(cache)]) == 2
    assert f"it is the cache file {cache}" in one_error(capsys.readouterr().err)
    _untouched(cache, before)


@pytest.mark.parametrize(
    "toml",
    [
        pytest.param('[cache]\nsystem_path = "{system}"\n', id="settings"),
        pytest.param("[cache\n", id="variable-beside-settings-that-do-not-load"),
    ],
)
def test_record_refuses_the_system_cache(
    places: dict[str, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    toml: str,
) -> None:
    """The system cache, named by the settings or (where they do not load) the variable."""
    system = tmp_path / "system.json"
    assert DecisionCache(system).update({"c" * 32: entry()})
    before = system.read_bytes()
    (tmp_path / "chunktune.toml").write_text(toml.format(system=system))
    if toml.startswith("[cache\n"):
        monkeypatch.setenv("CHUNKTUNE_SYSTEM_CACHE", str(system))
    assert main([*RECORD, "-o", str(system)]) == 2
    assert f"it is the system cache {system}" in one_error(capsys.readouterr().err)
    _untouched(system, before)


@pytest.mark.parametrize(
    ("name", "argv"),
    [
        pytest.param("sweep.json", [*RECORD, "-o", "{lock}"], id="record"),
        pytest.param("sweep.toml", ["cache", "export", "{lock}", "--force"], id="export"),
        pytest.param("sweep.json", ["cache", "merge", "cache.json", "-o", "{lock}"], id="merge"),
    ],
)
def test_a_command_refuses_the_sweep_lock_it_would_replace(
    name: str,
    argv: list[str],
    places: dict[str, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A trace, export or merge over the sweep lock's file would replace a held lock: exit 2."""
    lock = tmp_path / name
    monkeypatch.setenv("CHUNKTUNE_SWEEP_LOCK", str(lock))
    lock.write_bytes(b"")
    inode = os.stat(lock).st_ino
    assert main([arg.replace("{lock}", str(lock)) for arg in argv]) == 2
    assert f"it is the sweep lock {lock}" in one_error(capsys.readouterr().err)
    assert os.stat(lock).st_ino == inode and lock.read_bytes() == b""


def test_tune_refuses_a_plot_named_as_the_cache_its_config_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`tune --config F --plot X` where F's cache is X: exit 2 before measuring, X kept."""
    pytest.importorskip("matplotlib")
    monkeypatch.delenv("CHUNKTUNE_CACHE", raising=False)
    monkeypatch.setenv("CHUNKTUNE_SWEEP_LOCK", str(tmp_path / "sweep.lock"))
    cache = tmp_path / "cache.png"  # a cache file may have any name
    config = tmp_path / "mine.toml"
    config.write_text(f'[cache]\npath = "{cache}"\n')
    assert DecisionCache(cache).update({"c" * 32: entry()})
    before = cache.read_bytes()
    assert main(["tune", *SMALL, "--config", str(config), "--plot", str(cache)]) == 2
    assert f"cannot write the plot {cache}: it is the cache file {cache}" in one_error(
        capsys.readouterr().err
    )
    _untouched(cache, before)


@pytest.mark.parametrize(
    "name",
    [
        pytest.param("cache.json.lock", id="write-lock"),
        pytest.param("cache.json.lock.holder", id="write-lock-note"),
        pytest.param("locks/" + "d" * 32 + ".lock", id="key-lock"),
        pytest.param("sweep.lock", id="sweep-lock"),
        pytest.param("sweep.lock.holder", id="sweep-lock-note"),
    ],
)
def test_every_lock_of_the_cache_and_the_sweep_is_refused(
    places: dict[str, Path], tmp_path: Path, name: str
) -> None:
    """The cache's write lock, a key's lock, the sweep lock and their holder notes are kept."""
    with pytest.raises(OutputError, match="which chunktune keeps; expected the name of another"):
        not_own_file(tmp_path / name, "trace")


def test_another_file_beside_the_cache_is_no_kept_file(
    places: dict[str, Path], tmp_path: Path
) -> None:
    """A trace beside the cache, or a .lock file outside its locks folder, is written as asked."""
    for name in ("trace.json", "cache.json.bak", "other/x.lock", "cache.toml"):
        not_own_file(tmp_path / name, "trace")


def test_a_name_that_cannot_be_resolved_is_left_for_its_write_to_refuse(
    places: dict[str, Path], tmp_path: Path
) -> None:
    """A name realpath cannot resolve (a NUL byte in it) is no kept file: no error raised here."""
    for what, caches_too in (("trace", True), ("merged cache", False)):
        not_own_file(tmp_path / "cache\0.json", what, caches_too=caches_too)


def test_merge_may_write_into_the_cache_and_the_system_cache(
    places: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`merge -o` naming the cache file or the system cache merges into it (under its lock)."""
    system = tmp_path / "system.json"
    monkeypatch.setenv("CHUNKTUNE_SYSTEM_CACHE", str(system))
    fleet = tmp_path / "fleet.json"
    assert DecisionCache(fleet).update({"e" * 32: entry()})
    for out in (places["cache"], system):
        assert main(["cache", "merge", str(fleet), "-o", str(out)]) == 0
    assert sorted(DecisionCache(places["cache"]).entries()) == ["a" * 32, "e" * 32]
    assert list(DecisionCache(system).entries()) == ["e" * 32]


def test_the_cache_and_its_key_locks_are_kept_when_the_cache_is_named_through_a_link(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """$CHUNKTUNE_CACHE through a linked folder: the real cache file and its key locks are kept."""
    real = tmp_path / "real"
    (real / "locks").mkdir(parents=True)
    via = tmp_path / "via"
    via.symlink_to(real)
    monkeypatch.setenv("CHUNKTUNE_CACHE", str(via / "cache.json"))
    monkeypatch.setenv("CHUNKTUNE_SWEEP_LOCK", str(tmp_path / "sweep.lock"))
    monkeypatch.setenv("CHUNKTUNE_CONFIG", "")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(OutputError, match=f"it is the cache file {via / 'cache.json'}, which"):
        not_own_file(real / "cache.json", "trace")
    key_lock = real / "locks" / ("d" * 32 + ".lock")
    with pytest.raises(OutputError, match="it is a cache key's lock in "):
        not_own_file(key_lock, "trace")


def test_only_lock_files_and_their_notes_in_the_locks_folder_are_kept(
    places: dict[str, Path], tmp_path: Path
) -> None:
    """In the cache's locks folder a .lock or .lock.holder file is kept; any other name is not."""
    locks = tmp_path / "locks"
    for name in ("notes.txt", "d.lock.bak", "d.json"):
        not_own_file(locks / name, "trace")
    for name in ("d.lock", "d.lock.holder"):
        with pytest.raises(OutputError, match=f"it is a cache key's lock in {locks}"):
            not_own_file(locks / name, "trace")


def test_the_key_locks_kept_are_the_caches_not_the_system_caches(
    places: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With a system cache in another folder, the key locks kept are beside the cache file."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.setenv("CHUNKTUNE_SYSTEM_CACHE", str(elsewhere / "system.json"))
    with pytest.raises(OutputError, match=f"it is a cache key's lock in {tmp_path / 'locks'}"):
        not_own_file(tmp_path / "locks" / "d.lock", "trace")
    not_own_file(elsewhere / "locks" / "d.lock", "trace")


@pytest.mark.parametrize(
    "toml",
    [
        pytest.param("", id="settings"),
        pytest.param("[cache\n", id="variables-beside-settings-that-do-not-load"),
    ],
)
def test_caches_named_from_home_are_the_files_in_home(
    places: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, toml: str
) -> None:
    """$CHUNKTUNE_CACHE and $CHUNKTUNE_SYSTEM_CACHE as ~/...: the files in $HOME are kept."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("CHUNKTUNE_CACHE", "~/mine.json")
    monkeypatch.setenv("CHUNKTUNE_SYSTEM_CACHE", "~/system.json")
    (tmp_path / "chunktune.toml").write_text(toml)
    with pytest.raises(OutputError, match=f"it is the cache file {home / 'mine.json'}, which"):
        not_own_file(home / "mine.json", "trace")
    with pytest.raises(OutputError, match=f"it is the system cache {home / 'system.json'}, which"):
        not_own_file(home / "system.json", "trace")


@pytest.fixture
def unnamed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """No variable names a cache; ./chunktune.toml (the caller writes it) names them."""
    for env in ("CHUNKTUNE_CACHE", "CHUNKTUNE_SYSTEM_CACHE"):
        monkeypatch.delenv(env, raising=False)
    monkeypatch.setenv("CHUNKTUNE_CONFIG", "")
    monkeypatch.setenv("CHUNKTUNE_SWEEP_LOCK", str(tmp_path / "sweep.lock"))
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.mark.parametrize(
    ("key", "kind"),
    [
        pytest.param("path", "the cache file", id="cache"),
        pytest.param("system_path", "the system cache", id="system-cache"),
    ],
)
def test_record_refuses_a_cache_named_by_settings_broken_elsewhere(
    unnamed: Path, capsys: pytest.CaptureFixture[str], key: str, kind: str
) -> None:
    """A misspelled policy key does not hide the [cache] table's cache: `record -o` it exits 2."""
    cache = unnamed / "decisions.json"
    (unnamed / "chunktune.toml").write_text(
        f'[cache]\n{key} = "decisions.json"\n[policies.mine]\nmargn = 0.1\n'
    )
    assert DecisionCache(cache).update({"f" * 32: entry()})
    before = cache.read_bytes()
    assert main([*RECORD, "-o", "decisions.json"]) == 2
    assert f"it is {kind} {cache}, which chunktune keeps" in one_error(capsys.readouterr().err)
    _untouched(cache, before)


@pytest.mark.parametrize(
    ("toml", "problem"),
    [
        pytest.param(
            "[cache\n",
            "TOML syntax error: Expected ']' at the end of a table declaration (at line 1, "
            "column 7)",
            id="not-toml",
        ),
        pytest.param(
            '[cache]\npth = "x.json"\nformat = 3\n',
            "cache.format: 3 is not a string (and 1 more)",
            id="broken-cache-table",
        ),
    ],
)
def test_record_refuses_any_trace_where_the_settings_cannot_name_the_cache(
    unnamed: Path, capsys: pytest.CaptureFixture[str], toml: str, problem: str
) -> None:
    """Settings whose [cache] cannot be read: exit 2, one line naming them, nothing written."""
    (unnamed / "chunktune.toml").write_text(toml)
    assert main([*RECORD, "-o", "trace.json"]) == 2
    assert one_error(capsys.readouterr().err) == (
        f"chunktune: error: invalid settings in {unnamed / 'chunktune.toml'}: {problem}; the "
        "trace trace.json is not written: it may be the cache these settings name (fix them, "
        "or name both caches with $CHUNKTUNE_CACHE and $CHUNKTUNE_SYSTEM_CACHE)"
    )
    assert not (unnamed / "trace.json").exists()


def test_record_refuses_a_trace_where_the_variable_names_a_missing_settings_file(
    unnamed: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """$CHUNKTUNE_CONFIG naming no file: the refusal names the file and the variable."""
    monkeypatch.setenv("CHUNKTUNE_CONFIG", str(unnamed / "gone.toml"))
    with pytest.raises(ConfigError) as err:
        not_own_file(unnamed / "trace.json", "trace", unknown_refused=True)
    assert str(err.value).startswith(
        f"settings file {unnamed / 'gone.toml'} (named by $CHUNKTUNE_CONFIG): it does not "
        "exist; the trace"
    )


def test_both_variables_let_a_trace_past_settings_that_cannot_name_the_cache(
    unnamed: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With $CHUNKTUNE_CACHE and $CHUNKTUNE_SYSTEM_CACHE set, broken settings name no cache used."""
    (unnamed / "chunktune.toml").write_text("[cache\n")
    monkeypatch.setenv("CHUNKTUNE_CACHE", str(unnamed / "c.json"))
    with pytest.raises(ConfigError, match="it may be the cache these settings name"):
        not_own_file(unnamed / "trace.json", "trace", unknown_refused=True)
    monkeypatch.setenv("CHUNKTUNE_SYSTEM_CACHE", str(unnamed / "s.json"))
    not_own_file(unnamed / "trace.json", "trace", unknown_refused=True)
    with pytest.raises(OutputError, match="it is the cache file"):
        not_own_file(unnamed / "c.json", "trace", unknown_refused=True)


def test_commands_that_read_the_settings_leave_their_problem_to_them(unnamed: Path) -> None:
    """Without unknown_refused (plot, export, merge), settings that do not load refuse nothing."""
    (unnamed / "chunktune.toml").write_text("[cache\n")
    not_own_file(unnamed / "trace.json", "plot")
    with pytest.raises(OutputError, match="it is the cache file"):
        not_own_file(default_cache_path(), "plot")
