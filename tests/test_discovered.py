"""Settings discovered by a resolve are parsed again only when their file or variables change."""

from __future__ import annotations

import contextlib
import functools
import json
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import attrs
import pytest
from _discoveries import counted_loads, discovery_loads, late_settings_file, silent_settings_file
from _forking import run_forked

import chunktune
from chunktune import _config, _discovered, _recent, _resolve, _settings_read, _settled
from chunktune._config import discover_config
from chunktune._discovered import remembered_settings
from chunktune._request import ask
from chunktune._workload import native_chunk
from chunktune.sim import Noise, SimulatedWorkload


class Counted(SimulatedWorkload):
    """A simulated pool that counts its signature() calls (a hit from memory reads none)."""

    def __init__(self) -> None:
        costs = SimulatedWorkload.from_layout("blocked", num_envs=256, nthread=4).costs
        super().__init__(costs, nthread=4, noise=Noise(sigma=0.01))
        self.signatures = 0

    def signature(self) -> dict[str, chunktune.SignatureValue]:
        self.signatures += 1
        return super().signature()


@pytest.fixture
def loads(monkeypatch: pytest.MonkeyPatch) -> list[chunktune.Settings]:
    """Every Settings that discovery parsed, in order."""
    return counted_loads(monkeypatch)


@pytest.fixture
def config(isolated: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A settings file named by $CHUNKTUNE_CONFIG, active policy quick, trusted as soon as
    written (as on a file system whose stamps move on every change)."""
    monkeypatch.setattr(_settled, "SETTLED_S", 0.0)
    file = isolated / "settings.toml"
    file.write_text('policy = "quick"\n[log]\nstderr = "never"\n')
    monkeypatch.setenv("CHUNKTUNE_CONFIG", str(file))
    return file


def test_an_unchanged_file_is_not_parsed_again(
    config: Path, loads: list[chunktune.Settings]
) -> None:
    """Two discoveries of an unchanged file parse it once and give the same object."""
    first = _discovered.discovered_settings()
    assert _discovered.discovered_settings() is first
    assert len(loads) == 1
    assert first.policy == "quick"


def test_a_changed_file_is_read_again(config: Path, loads: list[chunktune.Settings]) -> None:
    """A rewritten settings file (even one of the same size and time stamp) is read afresh."""
    first = _discovered.discovered_settings()
    st = config.stat()
    config.write_text('policy = "seed" \n[log]\nstderr = "never"\n')  # the same size
    os.utime(config, ns=(st.st_atime_ns, st.st_mtime_ns))  # same mtime: ctime still moves
    again = _discovered.discovered_settings()
    assert again is not first
    assert again.policy == "seed"
    assert len(loads) == 2


def test_a_same_size_rewrite_within_a_coarse_tick_is_read_again(
    config: Path, loads: list[chunktune.Settings], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A same-size rewrite within a coarse time stamp tick is seen (failed before)."""
    monkeypatch.setattr(_settled, "SETTLED_S", 3.0)
    real = os.stat
    frozen = config.stat()
    tick = frozen.st_ctime_ns  # every change within this tick is stamped with it

    class Coarse:
        """A stat result whose time stamps are the tick's."""

        def __init__(self, st: os.stat_result) -> None:
            self.st = st
            self.st_mtime_ns = self.st_ctime_ns = tick

        def __getattr__(self, name: str) -> object:
            return getattr(self.st, name)

    def coarse(path: object, *args: object, **kwargs: object) -> object:
        st = real(path, *args, **kwargs)  # type: ignore[arg-type]
        return Coarse(st) if str(path) == str(config) else st

    monkeypatch.setattr(os, "stat", coarse)
    monkeypatch.setattr(_discovered, "time_ns", lambda: tick + 10**8)
    assert _discovered.discovered_settings().policy == "quick"
    config.write_text('policy = "seed" \n[log]\nstderr = "never"\n')  # the same size
    assert _discovered.discovered_settings().policy == "seed"
    monkeypatch.setattr(_discovered, "time_ns", lambda: tick + 4 * 10**9)
    settled = _discovered.discovered_settings()
    assert _discovered.discovered_settings() is settled  # settled: remembered again
    assert len(loads) == 3


@pytest.mark.parametrize("moved", ["cwd", "variable"])
def test_what_another_thread_sets_and_sets_back_meanwhile_is_not_remembered(
    config: Path, isolated: Path, monkeypatch: pytest.MonkeyPatch, moved: str
) -> None:
    """Another thread's cwd or variable, set and set back meanwhile, is not kept (failed before)."""
    # contextlib.chdir in another thread: the file read was another directory's, yet the
    # one named after it was unchanged, so its settings were remembered for good
    if moved == "cwd":
        monkeypatch.delenv("CHUNKTUNE_CONFIG")
        config.rename(isolated / "chunktune.toml")
    elsewhere = isolated / "elsewhere"
    elsewhere.mkdir()  # holds no chunktune.toml: built-in defaults
    real = discover_config
    calls: list[str | None] = []

    def meanwhile(env: str | None) -> Path | None:
        calls.append(env)
        if len(calls) > 1:  # the other thread is done by the next discovery
            return real(env)
        if moved == "cwd":
            with contextlib.chdir(elsewhere):
                return real(env)
        with monkeypatch.context() as other_thread:
            other_thread.setenv("CHUNKTUNE_CONFIG", str(elsewhere / "none.toml"))
            (elsewhere / "none.toml").write_text('policy = "off"\n')
            return real(env)

    monkeypatch.setattr(_discovered, "discover_config", meanwhile)
    _discovered.discovered_settings()
    assert _discovered.discovered_settings().policy == "quick"


class _MovedAsRead:
    """``os`` for a module whose look at the environment is overtaken: as it reads
    ``$CHUNKTUNE_SYSTEM_CACHE``, the last variable, another thread points
    ``$CHUNKTUNE_CONFIG`` and ``$CHUNKTUNE_CACHE`` elsewhere (and leaves them there)."""

    def __init__(self, moves: dict[str, str]) -> None:
        self.moves = moves

    @property
    def environ(self) -> _MovedAsRead:
        return self

    def get(self, name: str, default: str | None = None) -> str | None:
        value = os.environ.get(name, default)
        if name == "CHUNKTUNE_SYSTEM_CACHE" and self.moves:
            os.environ.update(self.moves)
            self.moves = {}
        return value

    def __getattr__(self, name: str) -> Any:
        return getattr(os, name)


@pytest.mark.parametrize("named", [pytest.param(True, id="file"), pytest.param(False, id="none")])
@pytest.mark.parametrize("load", ["discovered", "load_settings"])
def test_a_variable_changed_as_they_are_read_is_the_next_calls(
    config: Path, isolated: Path, monkeypatch: pytest.MonkeyPatch, load: str, named: bool
) -> None:
    """A call reads the file and cache named as it began; a variable moved meanwhile, the next."""
    other = isolated / "other.toml"
    other.write_text('policy = "seed"\n[log]\nstderr = "never"\n')
    first_cache = os.environ["CHUNKTUNE_CACHE"]
    monkeypatch.setenv("CHUNKTUNE_CONFIG", str(config))  # undone at the end, moved or not
    monkeypatch.setenv("CHUNKTUNE_CACHE", first_cache)
    if not named:  # built-in defaults at first
        monkeypatch.delenv("CHUNKTUNE_CONFIG")
    moves = {"CHUNKTUNE_CONFIG": str(other), "CHUNKTUNE_CACHE": str(isolated / "other.json")}
    module = _discovered if load == "discovered" else _config
    monkeypatch.setattr(module, "os", _MovedAsRead(moves))
    call = _discovered.discovered_settings if load == "discovered" else chunktune.load_settings
    first = call()
    began = ("quick", str(config)) if named else ("balanced", None)
    assert (first.policy, first.source, first.cache.path) == (*began, first_cache)
    second = call()
    assert (second.policy, second.source) == ("seed", str(other))
    assert second.cache.path == str(isolated / "other.json")


def test_a_file_named_relative_to_the_folder_is_read_where_it_was_found(
    config: Path, isolated: Path, loads: list[chunktune.Settings], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A relative $CHUNKTUNE_CONFIG is read from the folder it was found in, whatever cwd is now."""
    monkeypatch.setenv("CHUNKTUNE_CONFIG", config.name)
    elsewhere = isolated / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / config.name).write_text('policy = "off"\n')  # another file of that name
    real = discovery_loads()  # the loads fixture's counting wrapper

    def meanwhile(file: Path | None, variables: dict[str, str | None]) -> chunktune.Settings:
        with contextlib.chdir(elsewhere):  # another thread's, as the file is read
            return real(file, variables)

    monkeypatch.setattr(_discovered, "load_discovered", meanwhile)
    found = _discovered.discovered_settings()
    assert (found.policy, found.source) == ("quick", str(config))
    assert _discovered.discovered_settings() is found  # remembered as the file it is
    assert len(loads) == 1


class _Halted(BaseException):
    """Not an Exception: what a settings read interrupted by something other than an error
    raises."""


@pytest.mark.parametrize("how", ["resolve_sync", "asyncio", "trio"])
def test_a_settings_read_ended_by_no_exception_still_reaches_the_caller(
    isolated: Path, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    """A bounded settings read ended by a BaseException raises it to the caller, no fallback."""

    def halted() -> chunktune.Settings:
        raise _Halted("the read was halted")

    monkeypatch.setattr(_settings_read, "discovered_settings", halted)
    policy = attrs.evolve(limited_policy(), time_budget_s=30.0, hard_limit_s=60.0)
    with pytest.raises(_Halted, match="the read was halted"):
        resolving(how, Counted(), policy)()


def test_a_changed_variable_is_read_again(
    config: Path, loads: list[chunktune.Settings], monkeypatch: pytest.MonkeyPatch, isolated: Path
) -> None:
    """A new $CHUNKTUNE_CACHE, or no settings file any more, is discovered afresh."""
    first = _discovered.discovered_settings()
    monkeypatch.setenv("CHUNKTUNE_CACHE", str(isolated / "other.json"))
    moved = _discovered.discovered_settings()
    assert moved.cache.path == str(isolated / "other.json") != first.cache.path
    monkeypatch.delenv("CHUNKTUNE_CONFIG")
    assert _discovered.discovered_settings().policy == "balanced"
    assert len(loads) == 3


def test_a_bad_file_raises_every_time(config: Path) -> None:
    """A settings file that does not parse is reported on each call, never remembered."""
    config.write_text("policy = \n")
    for _ in range(2):
        with pytest.raises(chunktune.ConfigError):
            _discovered.discovered_settings()


def test_a_repeat_with_discovered_settings_is_answered_from_memory(config: Path) -> None:
    """resolve(settings=None) again within a second does not key the workload again."""
    w = Counted()
    assert chunktune.resolve_sync(w).source == "benchmark"
    assert chunktune.resolve_sync(w).source == "cache"
    keyed = w.signatures
    assert chunktune.resolve_sync(w).source == "cache"
    assert w.signatures == keyed


def test_a_resolve_sees_a_changed_settings_file(config: Path) -> None:
    """A settings file changed between two resolves is what the second one uses."""
    w = Counted()
    assert chunktune.resolve_sync(w).policy == "quick"
    config.write_text('policy = "off"\n[log]\nstderr = "never"\n')
    assert chunktune.resolve_sync(w).source == "disabled"


def test_built_in_defaults_are_remembered_as_a_file_is(loads: list[chunktune.Settings]) -> None:
    """With no settings file to find, two discoveries parse once and give the same object."""
    first = _discovered.discovered_settings()
    assert first.source is None
    assert _discovered.discovered_settings() is first
    assert len(loads) == 1


def test_a_child_forked_while_the_lock_is_held_remembers_with_a_lock_of_its_own(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A fork while the memory's lock is held leaves the child a free lock: its discovery ends."""
    monkeypatch.setattr(_discovered, "_seen", None)  # the child must store, so take the lock
    with _discovered._lock:
        status = run_forked(_discovered.discovered_settings, hang_guard_s=20)
    assert status == 0


def limited_policy() -> chunktune.Policy:
    """The quick preset with a hard limit of 0.3 s (read before any settings file is named)."""
    quick = chunktune.load_settings().get_policy("quick")
    return attrs.evolve(quick, time_budget_s=0.3, hard_limit_s=0.3)


def test_settings_given_are_used_though_discovery_remembers_others(config: Path) -> None:
    """resolve_sync(settings=S) under a limited Policy uses S, not the settings discovery kept."""
    found = _discovered.discovered_settings()  # remembered, its cache on
    given = attrs.evolve(found, cache=attrs.evolve(found.cache, enabled=False))
    policy = attrs.evolve(limited_policy(), time_budget_s=10.0, hard_limit_s=60.0)
    d = chunktune.resolve_sync(Counted(), settings=given, policy=policy)
    assert d.source == "benchmark"
    stored = Path(os.environ["CHUNKTUNE_CACHE"])
    assert not stored.exists() or d.key not in stored.read_text()


def resolving(
    how: str, w: chunktune.Workload, policy: chunktune.Policy, **kwargs: Any
) -> Callable[[], chunktune.Decision]:
    """A call that resolves ``w`` under ``policy`` (settings=None): ``resolve_sync``, or
    ``resolve`` on a loop of ``how``'s backend."""
    if how == "resolve_sync":
        return functools.partial(chunktune.resolve_sync, w, policy=policy, **kwargs)
    call = functools.partial(chunktune.resolve, w, policy=policy, **kwargs)
    return functools.partial(anyio.run, call, backend=how)


def answered_in_thread(call: Callable[[], chunktune.Decision]) -> list[chunktune.Decision]:
    """What ``call()`` returned, run in a daemon thread given 30 s (a hang guard, not a timing)."""
    answers: list[chunktune.Decision] = []
    caller = threading.Thread(target=lambda: answers.append(call()), daemon=True)
    caller.start()
    caller.join(30)
    return answers


@pytest.mark.parametrize("how", ["resolve_sync", "asyncio", "trio"])
def test_a_settings_file_that_never_answers_is_given_up_at_a_given_policys_limit(
    isolated: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, how: str
) -> None:
    """settings=None and a settings read that blocks: native at the given Policy's hard_limit_s."""
    w = Counted()
    call = resolving(how, w, limited_policy())  # the policy read before the file stalls
    with silent_settings_file(isolated, monkeypatch):
        answers = answered_in_thread(call)
        assert answers, "the resolve was still reading the settings file"
    [d] = answers
    assert (d.source, d.chunk_size, w.signatures, w.calls) == ("fallback", None, 0, 0)
    assert "hard limit of 0.3 s (hard_limit_s) while the settings file had not answered" in d.reason
    assert (d.native_chunk, d.policy) == (native_chunk(256, 4), "custom")
    assert [(r.levelname, r.getMessage()) for r in caplog.records] == [
        ("WARNING", f"chunktune: {d.reason}")
    ]


def test_a_given_policy_with_a_limit_still_reads_a_settings_file_that_answers(
    config: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Policy with hard_limit_s given: the settings discovered (their cache path) still apply."""
    monkeypatch.delenv("CHUNKTUNE_CACHE")
    mine = config.parent / "mine.json"
    config.write_text(f'policy = "quick"\n[cache]\npath = "{mine}"\n[log]\nstderr = "never"\n')
    policy = attrs.evolve(limited_policy(), time_budget_s=30.0, hard_limit_s=60.0)
    d = chunktune.resolve_sync(Counted(), policy=policy)
    assert d.source == "benchmark" and d.key in json.loads(mine.read_text())["entries"]


@pytest.mark.parametrize("how", ["resolve_sync", "asyncio", "trio"])
def test_a_repeat_under_a_given_limit_starts_no_thread_to_read_unchanged_settings(
    config: Path, loads: list[chunktune.Settings], monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    """A given Policy's bounded settings read: a repeat, the file unchanged, starts no thread."""
    monkeypatch.setattr(_recent, "TTL_S", 3600.0)  # the third call is a repeat however slow
    policy = attrs.evolve(limited_policy(), time_budget_s=30.0, hard_limit_s=60.0)
    call = resolving(how, Counted(), policy)
    first = call()
    started: list[str] = []
    start = threading.Thread.start

    def noted(thread: threading.Thread) -> None:
        started.append(thread.name)
        start(thread)

    monkeypatch.setattr(threading.Thread, "start", noted)
    again = call()
    assert (again.source, again.chunk_size) == ("cache", first.chunk_size)
    assert _discovered.SETTINGS_THREAD not in started
    if how == "resolve_sync":  # a hit said a moment ago: a stat on this thread, no loop
        started.clear()
        assert call() == again and started == []
    assert len(loads) == 1  # the file was parsed once, by the first call


@pytest.mark.parametrize("how", ["resolve_sync", "asyncio", "trio"])
def test_a_settings_read_given_up_is_left_to_a_daemon_thread_of_its_own_name(
    isolated: Path, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    """A settings read given up at a given Policy's limit goes on in a named daemon thread."""
    before, call = set(threading.enumerate()), resolving(how, Counted(), limited_policy())
    with silent_settings_file(isolated, monkeypatch):
        answers = answered_in_thread(call)
        assert answers, "the resolve was still reading the settings file"
        left = [
            t
            for t in threading.enumerate()
            if t.name == _discovered.SETTINGS_THREAD and t not in before
        ]
        assert answers[0].source == "fallback" and left and all(t.daemon for t in left)


@pytest.mark.parametrize("how", ["resolve_sync", "asyncio", "trio"])
def test_an_invalid_settings_file_under_a_given_limit_is_a_config_error(
    config: Path, how: str
) -> None:
    """A Policy with hard_limit_s given and a broken settings file read in time: ConfigError."""
    policy, w = attrs.evolve(limited_policy(), time_budget_s=30.0, hard_limit_s=60.0), Counted()
    config.write_text('policy = "quick"\n[cache]\npath = 3\n')
    with pytest.raises(chunktune.ConfigError, match=r"cache\.path"):
        resolving(how, w, policy)()
    assert w.calls == 0


@pytest.mark.parametrize("how", ["resolve_sync", "asyncio", "trio"])
def test_a_manual_size_under_a_given_limit_never_reads_the_settings_file(
    isolated: Path, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    """manual= with a limited Policy and a settings file that never answers: the manual size."""
    w = Counted()
    call = resolving(how, w, limited_policy(), manual=4)
    with silent_settings_file(isolated, monkeypatch):
        answers = answered_in_thread(call)
        assert answers, "the resolve was still reading the settings file"
    [d] = answers
    assert (d.source, d.chunk_size, w.calls) == ("manual", 4, 0)


def test_resolve_sync_answers_a_manual_size_under_a_given_limit_without_a_loop(
    config: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """manual= with a limited Policy and settings not yet read: resolve_sync starts no loop."""

    def refused(*_args: object, **_kw: object) -> None:
        raise AssertionError("resolve_sync started an event loop")

    monkeypatch.setattr(_resolve, "run_blocking", refused)
    d = chunktune.resolve_sync(Counted(), policy=limited_policy(), manual=4)
    assert (d.source, d.chunk_size) == ("manual", 4)


def test_a_repeat_under_a_given_limit_parses_no_settings_on_the_calling_thread(
    config: Path, loads: list[chunktune.Settings], monkeypatch: pytest.MonkeyPatch
) -> None:
    """resolve_sync under a limit uses the settings its stat found unchanged; it parses none."""
    policy = attrs.evolve(limited_policy(), time_budget_s=30.0, hard_limit_s=60.0)
    first = chunktune.resolve_sync(Counted(), policy=policy)
    stat = remembered_settings

    def then_rewritten() -> chunktune.Settings | None:
        known = stat()
        # changed just after the stat: only a read bounded on the loop may parse it now
        config.write_text('policy = "quick"\n[log]\nstderr = "never"\n# changed\n')
        return known

    monkeypatch.setattr(_settings_read, "remembered_settings", then_rewritten)
    again = chunktune.resolve_sync(Counted(), policy=policy)
    assert (again.source, again.chunk_size) == ("cache", first.chunk_size)
    assert len(loads) == 1  # the first call's parse; the repeat parsed nothing


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_an_async_resolve_under_a_given_limit_applies_the_settings_file_it_reads(
    config: Path, monkeypatch: pytest.MonkeyPatch, backend: str
) -> None:
    """await resolve with a limited Policy: the settings file read in time (its cache) applies."""
    monkeypatch.delenv("CHUNKTUNE_CACHE")
    monkeypatch.setenv("HOME", str(config.parent / "home"))  # no default cache outside tmp
    mine = config.parent / "mine.json"
    config.write_text(f'policy = "quick"\n[cache]\npath = "{mine}"\n[log]\nstderr = "never"\n')
    policy = attrs.evolve(limited_policy(), time_budget_s=30.0, hard_limit_s=60.0)
    resolving = functools.partial(chunktune.resolve, Counted(), policy=policy)
    d = anyio.run(resolving, backend=backend)
    assert d.source == "benchmark" and d.key in json.loads(mine.read_text())["entries"]


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_a_settings_read_starts_its_limit_from_when_the_call_began(
    config: Path, backend: str
) -> None:
    """with_settings counts hard_limit_s from ``started``: a limit spent before it reads nothing."""
    policy = attrs.evolve(limited_policy(), time_budget_s=30.0, hard_limit_s=3600.0)
    asked = ask(Counted(), settings=None, policy=policy, manual=None, refresh=False,
                on_progress=None)  # fmt: skip

    async def spent_before() -> object:
        with anyio.fail_after(60):  # a hang guard, not a timing
            return await _settings_read.with_settings(asked, anyio.current_time() - 3600.0)

    answer = anyio.run(spent_before, backend=backend)
    assert isinstance(answer, chunktune.Decision) and answer.source == "fallback"
    assert "while the settings file had not answered" in answer.reason


class SlowSignature(Counted):
    """A simulated pool whose signature() takes ``SIGNATURE_S`` seconds."""

    SIGNATURE_S = 1.25

    def signature(self) -> dict[str, chunktune.SignatureValue]:
        time.sleep(self.SIGNATURE_S)
        return super().signature()


@pytest.mark.parametrize("how", ["resolve_sync", "asyncio"])
@pytest.mark.parametrize(
    ("late_s", "source"),
    [pytest.param(0.0, "benchmark", id="read-at-once"), pytest.param(2.25, "fallback", id="late")],
)
def test_the_seconds_a_settings_read_took_count_against_a_given_hard_limit(
    isolated: Path, monkeypatch: pytest.MonkeyPatch, how: str, late_s: float, source: str
) -> None:
    """A 2.25 s settings read and a 1.25 s signature(), each within a 3 s limit: both, past it."""
    # slack kept: signature() alone ends 1.75 s inside the limit, the two together pass it by
    # 0.5 s (a busy machine only lengthens them), and the read ends 0.75 s inside it (it was
    # 3 s, with a 1.5 s signature() and a 4 s limit: 2.5 s more of waiting over the four cases)
    policy = attrs.evolve(limited_policy(), time_budget_s=0.3, hard_limit_s=3.0)
    w = SlowSignature()
    with late_settings_file(isolated, monkeypatch, late_s):
        d = resolving(how, w, policy)()
    assert d.source == source
    if source == "fallback":  # at the limit, while keying: the settings file had answered
        assert "signature() (or the cache file) had not answered" in d.reason
        assert w.calls == 0


def test_resolve_sync_counts_a_slow_look_at_the_settings_file_against_a_given_limit(
    config: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """resolve_sync's limit counts from the call: a 0.75 s stat, 1.25 s signature() pass 1.5 s."""
    # each wait alone is within the limit and together they pass it by 0.5 s, as at twice
    # these sizes: a busy machine only lengthens them, so only that 0.5 s (for a limit that
    # fires late) is slack, and it is kept
    real, caller = os.stat, threading.current_thread()

    def slow(path: object, *args: object, **kwargs: object) -> os.stat_result:
        if str(path) == str(config) and threading.current_thread() is caller:
            time.sleep(0.75)  # a file system slow to answer, on the calling thread only
        return real(path, *args, **kwargs)  # type: ignore[arg-type]

    policy, w = attrs.evolve(limited_policy(), time_budget_s=0.3, hard_limit_s=1.5), SlowSignature()
    monkeypatch.setattr(os, "stat", slow)
    d = chunktune.resolve_sync(w, policy=policy)
    assert d.source == "fallback" and w.calls == 0
    assert "signature() (or the cache file) had not answered" in d.reason
