"""Locks: an unusable location degrades with one warning; a waiter says whom it waits for."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import functools
import gc
import json
import logging
import os
import socket
import subprocess
import sys
import threading
import time
import types
from pathlib import Path
from typing import Any

import anyio
import attrs
import filelock
import pytest
from _forking import run_forked
from _holders import FLOCK_REFUSAL_RAISES, holding, holding_async, refuse_flock_once

import chunktune
from chunktune import (
    DecisionCache,
    ProgressEvent,
    _lock_files,
    _lock_note,
    _lock_wait,
    _locks,
)
from chunktune._lock_files import SWEEP_LOCK_ENV
from chunktune._lock_wait import hold_blocking
from chunktune._locks import Lock, key_lock, sweep_lock
from chunktune.sim import Noise, SimulatedWorkload


def uneven(name: str = "sim") -> SimulatedWorkload:
    """One cache key per name."""
    costs = SimulatedWorkload.from_layout("blocked", num_envs=512, nthread=8).costs
    return SimulatedWorkload(costs, nthread=8, noise=Noise(sigma=0.01), name=name)


def warnings_about(caplog: pytest.LogCaptureFixture, what: str) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.levelno == logging.WARNING and what in r.getMessage()
    ]


def test_the_sweep_lock_variable_expands_the_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A ~ in $CHUNKTUNE_SWEEP_LOCK (as no shell expanded it) names the home, not a ~ folder."""
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("CHUNKTUNE_SWEEP_LOCK", "~/locks/sweep.lock")
    assert _lock_files.sweep_lock_path() == tmp_path / "locks" / "sweep.lock"


def test_a_sweep_lock_variable_naming_no_home_warns_once_and_uses_the_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """$CHUNKTUNE_SWEEP_LOCK='~nosuchuser/lock': one warning, the default lock, no ./~ folder."""
    user = "~nosuchuser-chunktune"
    with pytest.raises(RuntimeError):  # pathlib finds no such user's home ...
        Path(user).expanduser()
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "home" / ".cache"))
    monkeypatch.setenv(SWEEP_LOCK_ENV, f"{user}/sweep.lock")
    monkeypatch.setattr(_lock_files, "_warned_values", set())
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    caplog.set_level(logging.WARNING, logger="chunktune")
    default = tmp_path / "home" / ".cache" / f"chunktune-sweep-{_lock_files.this_machine()}.lock"
    assert _lock_files.sweep_lock_path() == default
    lock = _locks.sweep_lock()
    assert lock.path == default and lock.try_acquire() and lock.mode == "file"
    assert default.exists()  # ... so the lock another process takes is this file
    lock.release()
    assert not default.exists()  # removed by its holder as the default lock is
    assert chunktune.resolve_sync(uneven("a")).source == "benchmark"
    assert chunktune.resolve_sync(uneven("b")).source == "benchmark"
    assert list(work.iterdir()) == []  # never a junk ~nosuchuser folder in the cwd
    (warning,) = warnings_about(caplog, SWEEP_LOCK_ENV)
    assert f"{user}/sweep.lock" in warning and "no such home" in warning
    assert str(default) in warning
    default.touch()  # a killed holder's, which `cache clear` clears as the default's
    assert _lock_files.sweep_lock_litter() == [default]


_PROC = pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="no /proc here")


@_PROC
@pytest.mark.parametrize(
    "value",
    [
        pytest.param("/proc/nosuchfolder/sweep.lock", id="cannot-be-made"),
        pytest.param("/proc/self/status", id="each-process-its-own"),
    ],
)
def test_a_sweep_lock_variable_in_proc_warns_once_naming_it_and_uses_the_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, value: str
) -> None:
    """$CHUNKTUNE_SWEEP_LOCK in /proc: one warning naming it and what is expected; the default."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "home" / ".cache"))
    monkeypatch.setenv("CHUNKTUNE_CACHE", str(tmp_path / "cache.json"))
    monkeypatch.setenv(SWEEP_LOCK_ENV, value)
    monkeypatch.setattr(_lock_files, "_warned_values", set())
    caplog.set_level(logging.WARNING, logger="chunktune")
    default = tmp_path / "home" / ".cache" / f"chunktune-sweep-{_lock_files.this_machine()}.lock"
    assert _lock_files.sweep_lock_path() == default
    assert chunktune.resolve_sync(uneven("a")).source == "benchmark"
    assert chunktune.resolve_sync(uneven("b")).source == "benchmark"
    (warning,) = warnings_about(caplog, SWEEP_LOCK_ENV)
    assert warning == (
        f"chunktune: ${SWEEP_LOCK_ENV}: {value} is in /proc, the kernel's view of its "
        "processes, where no file of one's own can be kept; expected a path on a disk; "
        f"the default sweep lock {default} is used instead"
    )
    assert warnings_about(caplog, "cannot use the sweep lock") == []


def test_only_a_path_in_proc_or_sys_is_refused_as_the_kernels(tmp_path: Path) -> None:
    """/proc and /sys paths are refused; one on disk, or where /proc/self/cwd leads, is not."""
    from chunktune._paths import kernel_folder_problem

    assert kernel_folder_problem(tmp_path / "a" / "lock") is None
    if os.path.isdir("/proc/self"):
        assert kernel_folder_problem(Path("/proc/self/x.lock")) is not None
        assert kernel_folder_problem(Path("/proc/nosuchfolder/x.lock")) is not None
        assert kernel_folder_problem(Path("/proc/self/cwd/x.lock")) is None
    if os.path.isdir("/sys/kernel"):
        assert "is in /sys" in str(kernel_folder_problem(Path("/sys/kernel/x.lock")))


def test_an_unusable_home_degrades_every_lock_with_one_warning_each(
    unusable_home: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """With no usable cache dir a miss still measures; each unusable thing is warned about once."""
    caplog.set_level(logging.WARNING, logger="chunktune")
    first = chunktune.resolve_sync(uneven("a"))
    second = chunktune.resolve_sync(uneven("b"))
    assert (first.source, second.source) == ("benchmark", "benchmark")
    assert str(unusable_home) in str(_lock_files.sweep_lock_path())
    assert len(warnings_about(caplog, "cannot use the sweep lock")) == 1
    # the cache is warned about once, and no key lock is taken beside a cache that
    # cannot store the answer another process would wait for; no key is cached, and this
    # process answers a key again from memory (``_unstored``), not from the file
    assert len(warnings_about(caplog, "is unavailable")) == 1
    again = chunktune.resolve_sync(uneven("a"))
    assert again.source == "cache" and again.reason.startswith("remembered in this process")
    assert len(warnings_about(caplog, "is unavailable")) == 1
    assert not warnings_about(caplog, "cannot use the cache key locks")


def test_an_unusable_home_with_the_cache_disabled_still_measures(
    unusable_home: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """[cache] enabled = false never touches the cache; the sweep lock degrades to this process."""
    caplog.set_level(logging.WARNING, logger="chunktune")
    config = tmp_path / "nocache.toml"
    config.write_text("[cache]\nenabled = false\n")
    d = chunktune.resolve_sync(uneven(), settings=chunktune.load_settings(config))
    assert d.source == "benchmark"
    assert len(warnings_about(caplog, "cannot use the sweep lock")) == 1


def test_an_unusable_cache_path_measures_without_a_key_lock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """CHUNKTUNE_CACHE under a regular file: measured, nothing stored, no key lock tried."""
    # one warning, the cache's
    caplog.set_level(logging.WARNING, logger="chunktune")
    (tmp_path / "file").write_text("")
    monkeypatch.setenv("CHUNKTUNE_CACHE", str(tmp_path / "file" / "cache.json"))
    assert chunktune.resolve_sync(uneven()).source == "benchmark"
    assert len(warnings_about(caplog, "is unavailable")) == 1
    assert not warnings_about(caplog, "cannot use the cache key locks")


def test_a_degraded_sweep_lock_still_excludes_this_process(tmp_path: Path) -> None:
    """Two handles on one unusable sweep lock path share one lock of this process."""
    path = tmp_path / "file" / "sweep.lock"
    (tmp_path / "file").write_text("")
    a = Lock(path, what="the sweep lock", degrade="local")
    b = Lock(path, what="the sweep lock", degrade="local")
    assert a.try_acquire() and a.mode == "local"
    assert not b.try_acquire()
    holder = b.holder()
    assert holder is not None and holder.pid == os.getpid()
    a.release()
    assert b.try_acquire()
    b.release()
    assert key_lock(path).try_acquire()  # a key lock degrades to none: always free


def test_a_released_degraded_lock_names_no_holder(tmp_path: Path) -> None:
    """Once this process lets go of a degraded sweep lock, no holder is named for it."""
    path = tmp_path / "file" / "sweep.lock"
    (tmp_path / "file").write_text("")
    lock = Lock(path, what="the sweep lock", degrade="local")
    assert lock.try_acquire() and lock.mode == "local"
    assert lock.holder() is not None
    lock.release()
    assert lock.holder() is None


def test_key_locks_in_one_unusable_folder_are_warned_about_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Every key lock in an unusable folder degrades; one warning names the folder, not a key."""
    caplog.set_level(logging.WARNING, logger="chunktune")
    (tmp_path / "file").write_text("")
    folder = tmp_path / "file" / "locks"
    for key in ("a", "b", "c"):
        lock = key_lock(folder / f"{key}.lock")
        assert lock.try_acquire() and lock.mode == "none"
        lock.release()
    (warning,) = warnings_about(caplog, "cannot use the cache key locks")
    assert warning.startswith(f"chunktune: cannot use the cache key locks in {folder} (")


@pytest.mark.parametrize(
    ("make", "instead"),
    [
        pytest.param(lambda f: Lock(f / "sweep.lock", what="the sweep lock", degrade="local"),
                     "sweeps of this process still take turns, other processes are not excluded",
                     id="sweep-lock"),
        pytest.param(lambda f: key_lock(f / "k.lock"),
                     "this process's tasks still share one sweep per key, other processes may "
                     "measure the same key", id="key-lock"),
    ],
)  # fmt: skip
def test_a_degraded_lock_says_what_still_holds(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, make: Any, instead: str
) -> None:
    """The warning of a degraded lock ends with what its stand-in still keeps from happening."""
    caplog.set_level(logging.WARNING, logger="chunktune")
    (tmp_path / "file").write_text("")
    lock = make(tmp_path / "file")
    assert lock.try_acquire()
    lock.release()
    (warning,) = [r.getMessage() for r in caplog.records]
    assert warning.endswith(f"; {instead}")


@pytest.mark.parametrize(
    ("make", "what"),
    [
        pytest.param(lambda f: Lock(f / "sweep.lock", what="the sweep lock", degrade="local"),
                     "the sweep lock", id="sweep-lock"),
        pytest.param(lambda f: key_lock(f / "k.lock"), "the cache key locks", id="key-lock"),
    ],
)  # fmt: skip
def test_a_lock_whose_folder_is_a_file_says_not_a_directory(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, make: Any, what: str
) -> None:
    """A regular file where the lock's folder goes is warned about as such, not 'File exists'."""
    caplog.set_level(logging.WARNING, logger="chunktune")
    folder = tmp_path / "locks"
    folder.write_text("a file, not a directory")
    lock = make(folder)
    assert lock.try_acquire()
    lock.release()
    (warning,) = warnings_about(caplog, f"cannot use {what}")
    assert "Not a directory" in warning and "File exists" not in warning


def test_the_holder_writes_its_pid_and_removes_it_on_release(tmp_path: Path) -> None:
    """Holding a lock writes <lock>.holder with this pid; releasing removes it."""
    lock = Lock(tmp_path / "x.lock", what="a lock", degrade="none")
    assert lock.try_acquire()
    holder = lock.holder()
    assert holder is not None and holder.pid == os.getpid()
    assert f"pid {os.getpid()}, since " in holder.describe()
    lock.release()
    assert not lock.holder_path.exists() and lock.holder() is None


def test_a_holder_on_another_host_is_named_with_its_host(tmp_path: Path) -> None:
    """A note from another node (a key lock on a shared home) says its host; an old one, none."""
    lock = Lock(tmp_path / "x.lock", what="a lock", degrade="none")
    lock.holder_path.write_text(json.dumps({"pid": 4242, "since": 0.0, "host": "node17"}))
    holder = lock.holder()
    assert holder is not None and holder.describe().startswith("pid 4242 on node17, since ")
    lock.holder_path.write_text(json.dumps({"pid": 4242, "since": 0.0}))  # before hosts
    holder = lock.holder()
    assert holder is not None and holder.describe().startswith("pid 4242, since ")
    assert lock.try_acquire()
    assert json.loads(lock.holder_path.read_text())["host"] == socket.gethostname()
    lock.release()


def test_a_holder_in_this_process_is_named_as_this_process(tmp_path: Path) -> None:
    """A note of this process's pid (another task's sweep) says "this process"; another's not."""
    lock = Lock(tmp_path / "x.lock", what="a lock", degrade="none")
    lock.holder_path.write_text(json.dumps({"pid": os.getpid(), "since": 0.0}))
    holder = lock.holder()
    assert holder is not None
    assert holder.describe().startswith(f"this process, pid {os.getpid()}, since ")
    lock.holder_path.write_text(json.dumps({"pid": os.getpid() + 1, "since": 0.0}))
    holder = lock.holder()
    assert holder is not None and holder.describe().startswith(f"pid {os.getpid() + 1}, since ")


HOLD_SWEEP_LOCK = """
import time
from chunktune._locks import sweep_lock
lock = sweep_lock()
assert lock.try_acquire()
print("held", flush=True)
time.sleep(120)
"""


def test_a_wait_for_another_process_is_reported_and_bounded(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A wait for another process's sweep is reported once and hard_limit_s ends it with native."""
    # one 'waiting' report with the holder's pid; the fallback's reason names the holder
    monkeypatch.setattr(_lock_wait, "REPORT_AFTER_S", 0.0)
    caplog.set_level(logging.INFO, logger="chunktune")
    with subprocess.Popen(
        [sys.executable, "-c", HOLD_SWEEP_LOCK], stdout=subprocess.PIPE, text=True
    ) as holder:
        try:
            assert holder.stdout is not None and holder.stdout.readline() == "held\n"
            pol = attrs.evolve(
                chunktune.load_settings().get_policy("balanced"),
                time_budget_s=0.05,
                hard_limit_s=1.0,  # room for a loaded machine to reach the wait and report it
            )
            events: list[ProgressEvent] = []
            w = uneven()
            d = chunktune.resolve_sync(w, policy=pol, on_progress=events.append)
        finally:
            holder.kill()
    waits = [e.message for e in events if e.kind == "waiting"]
    assert len(waits) == 1 and waits[0].startswith(
        f"waiting for another sweep (pid {holder.pid}, since "
    )
    assert (d.source, d.chunk_size, w.calls) == ("fallback", None, 0)
    assert "another sweep" in d.reason and f"pid {holder.pid}" in d.reason
    infos = [
        r.getMessage() for r in caplog.records if "waiting for another sweep" in r.getMessage()
    ]
    assert len(infos) == 1


def test_a_lock_file_removed_during_a_try_is_made_again_not_given_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A key-lock file that `cache clear` deletes during a try is made afresh; it still excludes."""
    caplog.set_level(logging.WARNING, logger="chunktune")
    path = tmp_path / "locks" / "k.lock"
    lock = key_lock(path)
    real = lock._file.acquire
    tries: list[float | None] = []

    def vanishing(timeout: float | None = None, **kw: object) -> object:
        tries.append(timeout)
        if len(tries) == 1:  # filelock found the file gone between its create and open
            path.unlink(missing_ok=True)  # (one chunktune made first, below filelock 3.24)
            raise filelock.Timeout(str(path))
        return real(timeout=timeout, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(lock._file, "acquire", vanishing)
    assert lock.try_acquire() and lock.mode == "file"
    assert not key_lock(path).try_acquire()
    lock.release()
    assert not warnings_about(caplog, "cannot use the cache key locks")


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs Linux's /proc")
def test_a_lock_file_no_try_finds_and_none_can_make_degrades_the_lock(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A lock file never there and that cannot be made (in /proc) degrades: not taken for busy."""
    caplog.set_level(logging.WARNING, logger="chunktune")
    monkeypatch.setattr(_locks, "_warned", set())
    path = Path("/proc/chunktune-test-k.lock")  # filelock's tries time out; open() says ENOENT
    lock = key_lock(path)
    assert lock.try_acquire() and lock.mode == "none"
    assert warnings_about(caplog, f"cannot use the cache key locks in {path.parent}")
    assert not path.exists()


def test_a_lock_on_a_file_removed_after_it_was_opened_is_not_held(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A lock taken on a file `cache clear` unlinked meanwhile is given back, so two never hold."""
    path = tmp_path / "locks" / "k.lock"
    lock = key_lock(path)
    real = lock._file.acquire

    def then_unlinked(timeout: float | None = None, **kw: object) -> object:
        got = real(timeout=timeout, **kw)  # type: ignore[arg-type]
        path.unlink()  # what a filelock without an unlinked-file check would not notice
        return got

    monkeypatch.setattr(lock._file, "acquire", then_unlinked)
    assert not lock.try_acquire() and not lock._file.is_locked
    other = key_lock(path)
    assert other.try_acquire()
    monkeypatch.setattr(lock._file, "acquire", real)
    assert not lock.try_acquire()
    other.release()
    assert lock.try_acquire()
    lock.release()


TRY_KEY_LOCK = """
import sys
from pathlib import Path
from chunktune._locks import key_lock
lock = key_lock(Path(sys.argv[1]))
print(lock.mode if lock.try_acquire() else "busy", flush=True)
"""


def test_a_key_lock_wait_that_cache_clear_beats_at_every_try_waits_on_not_unlocked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`cache clear` removing the key-lock file at each try: the wait goes on, never unlocked."""
    path = tmp_path / "locks" / "k.lock"
    lock = key_lock(path)
    real = lock._file.acquire
    cleared: list[Path] = []

    def cleared_at_the_try(timeout: float | None = None, **kw: object) -> object:
        if len(cleared) < 3 * _locks._VANISHED_TRIES:
            # clear held the file as this try came (a timeout), then removed it
            cleared.append(path)
            path.unlink(missing_ok=True)
            raise filelock.Timeout(str(path))
        return real(timeout=timeout, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(lock._file, "acquire", cleared_at_the_try)
    with hold_blocking(lock, timeout_s=3600.0) as got:
        other = subprocess.run(
            [sys.executable, "-c", TRY_KEY_LOCK, str(path)],
            capture_output=True, text=True, check=True, timeout=60,
        )  # fmt: skip
        assert other.stdout.strip() == "busy"  # another process is kept out
        assert got and lock.mode == "file"
    assert len(cleared) == 3 * _locks._VANISHED_TRIES


CLEAR_KEY_LOCKS_NONSTOP = """
import sys
from pathlib import Path
from chunktune._cache_lock import remove_idle_key_locks
cache, stop = Path(sys.argv[1]), Path(sys.argv[2])
print("clearing", flush=True)
while not stop.exists():
    remove_idle_key_locks(cache)
"""

TAKE_KEY_LOCK_ROUNDS = """
import os, sys
from pathlib import Path
from chunktune._cache import DecisionCache
from chunktune._lock_wait import hold_blocking
from chunktune._locks import key_lock
cache, rounds = Path(sys.argv[1]), int(sys.argv[2])
inside = cache.parent / "inside"
seen = {"held": 0, "overlaps": 0, "unlocked": 0}
for _ in range(rounds):
    lock = key_lock(Path(DecisionCache(cache).key_lock("k").lock_file))
    with hold_blocking(lock, timeout_s=120) as got:
        assert got, "a hang guard, not a timing"
        seen["held"] += 1
        seen["unlocked"] += lock.mode != "file"
        try:
            os.close(os.open(inside, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        except FileExistsError:
            seen["overlaps"] += 1
            continue
        os.unlink(inside)
print(__import__("json").dumps(seen), flush=True)
"""


def test_key_lock_holders_never_overlap_while_cache_clear_runs_nonstop(tmp_path: Path) -> None:
    """Three processes take one key's lock while two clear idle key locks nonstop: one at a time."""
    cache, stop = tmp_path / "cache.json", tmp_path / "stop"
    clearers = [
        subprocess.Popen(
            [sys.executable, "-c", CLEAR_KEY_LOCKS_NONSTOP, str(cache), str(stop)],
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    try:
        for clearer in clearers:
            assert clearer.stdout is not None and clearer.stdout.readline().strip() == "clearing"
        holders = [
            subprocess.Popen(
                [sys.executable, "-c", TAKE_KEY_LOCK_ROUNDS, str(cache), "150"],
                stdout=subprocess.PIPE,
                text=True,
            )
            for _ in range(3)
        ]
        seen = [json.loads(h.communicate(timeout=240)[0]) for h in holders]
    finally:
        stop.touch()
        for clearer in clearers:
            clearer.wait(60)
            if clearer.stdout is not None:
                clearer.stdout.close()
    assert seen == [{"held": 150, "overlaps": 0, "unlocked": 0}] * 3


HOLD_ANOTHER_MACHINES_SWEEP_LOCK = """
import sys, time
from pathlib import Path
from chunktune import _lock_files, _locks
_lock_files._BOOT_ID = Path(sys.argv[1])  # another kernel: another host of the cluster
lock = _locks.sweep_lock()
assert lock.try_acquire()
print("held", flush=True)
time.sleep(120)
"""


def test_hosts_sharing_a_home_directory_sweep_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another host's sweep in a cache root both see (an NFS home) does not hold this one's."""
    home = tmp_path / "home"
    for name in ("HOME", "XDG_CACHE_HOME", "CHUNKTUNE_SWEEP_LOCK"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(home))
    boot = {host: tmp_path / f"{host}.boot_id" for host in ("this", "other")}
    boot["this"].write_text("0b7c2f7e-1d4a-4c7e-9f3e-aa0000000001\n")
    boot["other"].write_text("5e1a9c44-77b2-4f0d-8e6c-bb0000000002\n")
    monkeypatch.setattr(_lock_files, "_BOOT_ID", boot["this"], raising=False)
    env = {k: v for k, v in os.environ.items() if k not in ("XDG_CACHE_HOME", SWEEP_LOCK_ENV)}
    with subprocess.Popen(
        [sys.executable, "-c", HOLD_ANOTHER_MACHINES_SWEEP_LOCK, str(boot["other"])],
        stdout=subprocess.PIPE,
        text=True,
        env={**env, "HOME": str(home)},
    ) as holder:
        try:
            assert holder.stdout is not None and holder.stdout.readline() == "held\n"
            lock = _locks.sweep_lock()
            assert lock.try_acquire()  # this host's own lock: free
            assert sorted(p.name for p in (home / ".cache").glob("chunktune-sweep-*.lock")) == [
                "chunktune-sweep-0b7c2f7e1d4a.lock",
                "chunktune-sweep-5e1a9c4477b2.lock",
            ]
            lock.release()
        finally:
            holder.kill()


def test_a_machines_sweep_lock_file_goes_with_its_holder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Sweeps on many machines (each boot a new name) leave no sweep lock files in a shared home."""
    home = tmp_path / "home"
    for name in ("XDG_CACHE_HOME", SWEEP_LOCK_ENV):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(home))
    for n in range(3):
        boot = tmp_path / f"boot{n}"
        boot.write_text(f"{n:08x}-1d4a-4c7e-9f3e-aa0000000001\n")
        monkeypatch.setattr(_lock_files, "_BOOT_ID", boot)
        d = chunktune.resolve_sync(uneven(f"job{n}"), policy="quick")
        assert d.source == "benchmark"
    assert list((home / ".cache").glob("chunktune-sweep-*")) == []
    assert (tmp_path / "cache.json").exists()  # the shared cache itself is unaffected


def test_a_sweep_lock_file_the_user_named_stays(tmp_path: Path) -> None:
    """The file $CHUNKTUNE_SWEEP_LOCK names is the user's: released, it is still there."""
    lock = _locks.sweep_lock()
    assert lock.try_acquire()
    lock.release()
    assert (tmp_path / "sweep.lock").exists() and not lock.holder_path.exists()


@pytest.mark.skipif(not Path("/proc/sys/kernel/random/boot_id").exists(), reason="no boot id")
def test_the_containers_of_one_host_share_its_sweep_lock(monkeypatch: pytest.MonkeyPatch) -> None:
    """Host names differ between containers; the kernel's boot id, and so the lock, does not."""
    paths = set()
    for name in ("web-1", "trainer-7"):
        monkeypatch.setattr(socket, "gethostname", lambda name=name: name)  # as _lock_files asks
        monkeypatch.delenv(SWEEP_LOCK_ENV, raising=False)
        paths.add(_lock_files.sweep_lock_path())
    assert len(paths) == 1


@pytest.mark.anyio
async def test_a_wait_reports_again_when_another_process_takes_the_lock_over(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each new holder of a lock waited for is reported once; a missing note is no news."""
    monkeypatch.setattr(_lock_wait, "REPORT_AFTER_S", 0.0)
    monkeypatch.setattr(_lock_wait, "RELOOK_S", 0.0)
    lock = Lock(tmp_path / "x.lock", what="a lock", degrade="none")
    seen: list[str] = []
    news = [anyio.Event(), anyio.Event()]

    def report(holder: _lock_note.Holder | None) -> None:
        seen.append(holder.describe().split(", since")[0] if holder else "-")
        news[min(len(seen), 2) - 1].set()

    def noted(pid: int, host: str) -> None:
        lock.holder_path.write_text(json.dumps({"pid": pid, "since": 0.0, "host": host}))

    noted(111, "node1")
    async with anyio.create_task_group() as tg, holding_async(lock.path):
        tg.start_soon(functools.partial(_lock_wait.acquire, lock, on_wait=report))
        with anyio.fail_after(30):  # not a speed limit: a missing report fails, not hangs
            await news[0].wait()
        lock.holder_path.unlink()  # between two holders: nothing to say
        await anyio.sleep(0.2)
        noted(222, "node2")  # the first was killed; a process on another host took over
        with anyio.fail_after(30):
            await news[1].wait()
        noted(222, "node2")  # the same holder, read again
        await anyio.sleep(0.2)
        # leaving, the holder is killed and the wait takes the lock
    lock.release()
    assert seen == ["pid 111 on node1", "pid 222 on node2"]


def note_written_late(monkeypatch: pytest.MonkeyPatch, pid: int, host: str) -> list[Lock]:
    """The holder writes its note only as ``Lock.holder`` looks the third time; the looks."""
    looks: list[Lock] = []
    real = Lock.holder

    def looking(self: Lock) -> _lock_note.Holder | None:
        looks.append(self)
        if len(looks) == 3:
            self.holder_path.write_text(json.dumps({"pid": pid, "since": 0.0, "host": host}))
        return real(self)

    monkeypatch.setattr(Lock, "holder", looking)
    return looks


async def first_report(lock: Lock) -> list[_lock_note.Holder | None]:
    """What a wait for ``lock``, held by another process, reports until its first report."""
    seen: list[_lock_note.Holder | None] = []
    reported = anyio.Event()

    def report(holder: _lock_note.Holder | None) -> None:
        seen.append(holder)
        reported.set()

    async with anyio.create_task_group() as tg, holding_async(lock.path):
        tg.start_soon(functools.partial(_lock_wait.acquire, lock, on_wait=report))
        with anyio.fail_after(30):  # not a speed limit: a missing report fails, not hangs
            await reported.wait()
    lock.release()
    return seen


@pytest.mark.anyio
async def test_a_holder_whose_note_is_not_yet_written_is_named_once_it_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A wait that first looks between the holder's lock and its note reports the holder."""
    monkeypatch.setattr(_lock_wait, "REPORT_AFTER_S", 0.0)
    monkeypatch.setattr(_lock_wait, "NOTE_GRACE_S", 3600.0)  # the note surely comes first
    looks = note_written_late(monkeypatch, 333, "n3")
    seen = await first_report(Lock(tmp_path / "x.lock", what="a lock", degrade="none"))
    assert len(looks) >= 3 and len(seen) == 1
    assert seen[0] is not None and seen[0].describe().startswith("pid 333 on n3, since ")


@pytest.mark.anyio
async def test_a_holder_that_never_writes_its_note_is_reported_unknown(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A wait for a holder with no note reports it unknown once the note's grace is over."""
    monkeypatch.setattr(_lock_wait, "REPORT_AFTER_S", 0.0)
    monkeypatch.setattr(_lock_wait, "NOTE_GRACE_S", 0.0)
    seen = await first_report(Lock(tmp_path / "x.lock", what="a lock", degrade="none"))
    assert seen == [None]


def test_a_blocking_read_of_the_holder_waits_for_a_note_not_yet_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """noted_holder names a holder whose note comes a moment late; None once the grace is over."""
    lock = Lock(tmp_path / "x.lock", what="a lock", degrade="none")
    note_written_late(monkeypatch, 444, "n4")
    monkeypatch.setattr(_lock_wait, "NOTE_GRACE_S", 3600.0)  # the note surely comes first
    with holding(lock.path):
        holder = _lock_wait.noted_holder(lock)
        assert holder is not None and holder.describe().startswith("pid 444 on n4, since ")
        lock.holder_path.unlink()
        monkeypatch.setattr(_lock_wait, "NOTE_GRACE_S", 0.0)
        assert _lock_wait.noted_holder(lock) is None


def test_a_holder_whose_file_was_replaced_leaves_the_new_one_at_release(tmp_path: Path) -> None:
    """Releasing a key lock whose file another made anew keeps that file, and its holder's hold."""
    path = tmp_path / "k.lock"
    first = key_lock(path)
    assert first.try_acquire()
    path.unlink()  # removed under it (as `cache clear` may): another makes a fresh file
    second = key_lock(path)
    assert second.try_acquire()
    first.release()
    assert path.exists()
    assert not key_lock(path).try_acquire()
    second.release()


def test_a_blocking_wait_that_gives_up_leaves_the_holders_files(tmp_path: Path) -> None:
    """hold_blocking that gave up on another process's lock leaves that lock's file and note."""
    lock = Lock(tmp_path / "x.lock", what="a lock", degrade="none", remove_on_release=True)
    note = json.dumps({"pid": 4242, "since": 0.0, "host": "node17"})
    with holding(lock.path):
        lock.holder_path.write_text(note)
        with hold_blocking(lock, timeout_s=0.05) as got:
            assert not got
        assert lock.path.exists() and lock.holder_path.read_text() == note


def test_a_blocking_hold_lets_go_of_the_lock_it_took_as_its_block_ends(tmp_path: Path) -> None:
    """hold_blocking that took the lock releases it after the block: another process takes it."""
    path = tmp_path / "locks" / "k.lock"
    lock = key_lock(path)

    def other_process() -> str:
        return subprocess.run(
            [sys.executable, "-c", TRY_KEY_LOCK, str(path)],
            capture_output=True, text=True, check=True, timeout=60,
        ).stdout.strip()  # fmt: skip

    with hold_blocking(lock, timeout_s=60.0) as got:
        assert got and other_process() == "busy"
    assert not lock.holder_path.exists()  # its note goes with it
    assert other_process() == "file"


KILLED_WHILE_WRITING_ITS_NOTE = """
import os, signal
from chunktune._locks import sweep_lock
lock = sweep_lock()
assert lock.try_acquire()
lock.holder_path.write_text("")  # killed with its note opened, nothing written yet
os.kill(os.getpid(), signal.SIGKILL)
"""


@pytest.mark.parametrize("note", ["empty", "none"])
def test_clear_removes_this_machines_sweep_lock_file_without_a_readable_note(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, note: str
) -> None:
    """A sweeper killed before its note was whole: clear removes the file named for this machine."""

    root = tmp_path / "xdg"
    monkeypatch.delenv(SWEEP_LOCK_ENV)
    monkeypatch.setenv("XDG_CACHE_HOME", str(root))
    env = {k: v for k, v in os.environ.items() if k != SWEEP_LOCK_ENV}
    killed = subprocess.run([sys.executable, "-c", KILLED_WHILE_WRITING_ITS_NOTE], env=env)
    assert killed.returncode < 0
    own = _lock_files.sweep_lock_path()
    assert own.exists() and own.with_name(own.name + ".holder").read_text() == ""
    if note == "none":  # killed as it let go, between removing its note and its file
        own.with_name(own.name + ".holder").unlink()
    other_boot = root / "chunktune-sweep-0123456789ab.lock"  # maybe another host's
    other_boot.touch()
    DecisionCache(tmp_path / "c.json").clear()
    assert sorted(p.name for p in root.iterdir()) == [other_boot.name]


def test_no_sweep_lock_file_is_litter_while_the_variable_names_the_lock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With $CHUNKTUNE_SWEEP_LOCK set, default sweep lock files are never this host's litter."""
    root = tmp_path / "xdg"
    monkeypatch.setenv("XDG_CACHE_HOME", str(root))
    root.mkdir()
    other_boot = root / "chunktune-sweep-aaaaaaaaaaaa.lock"  # this host's, killed holding it
    other_boot.touch()
    note = {"pid": 1, "since": 0.0, "host": socket.gethostname()}
    _lock_note.note_path(other_boot).write_text(json.dumps(note))
    assert _lock_files.sweep_lock_litter() == []
    monkeypatch.delenv(SWEEP_LOCK_ENV)
    assert _lock_files.sweep_lock_litter() == [other_boot]


@pytest.mark.parametrize("value", [None, ""], ids=["unset", "empty"])
def test_a_sweep_lock_variable_unset_or_empty_names_no_lock_and_warns_nothing(
    value: str | None, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """$CHUNKTUNE_SWEEP_LOCK unset or empty names no lock file, without a warning."""
    monkeypatch.setattr(_lock_files, "_warned_values", set())
    if value is None:
        monkeypatch.delenv(SWEEP_LOCK_ENV, raising=False)
    else:
        monkeypatch.setenv(SWEEP_LOCK_ENV, value)
    with caplog.at_level(logging.WARNING, logger="chunktune"):
        assert _lock_files.named_sweep_lock() is None
    assert caplog.records == []


def test_a_cache_root_that_cannot_be_listed_has_no_sweep_lock_litter(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A user cache root whose listing fails (an I/O error) lists no litter: an empty list."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.delenv(SWEEP_LOCK_ENV, raising=False)

    def failing(self: Path, pattern: str) -> list[Path]:
        raise OSError(5, "Input/output error", str(self))

    monkeypatch.setattr(Path, "glob", failing)
    assert _lock_files.sweep_lock_litter() == []


def test_remove_idle_counts_the_files_it_removed(tmp_path: Path) -> None:
    """remove_idle deletes idle lock files and their notes, and says how many files went."""
    files = [tmp_path / "a.lock", tmp_path / "b.lock"]
    for file in files:
        file.touch()
        _lock_note.note_path(file).write_text("{}")
    assert _lock_files.remove_idle(files) == 2
    assert list(tmp_path.iterdir()) == []


def test_remove_idle_releases_each_lock_it_took_whether_the_file_went_or_stayed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """remove_idle lets go of every lock it took, not leaving it to the garbage collector."""
    made: list[filelock.BaseFileLock] = []
    real = _lock_files.file_lock

    def recorded(path: Path) -> filelock.BaseFileLock:
        made.append(real(path))
        return made[-1]

    monkeypatch.setattr(_lock_files, "file_lock", recorded)
    # one idle file goes; one another `clear` replaced meanwhile (a new file) stays
    monkeypatch.setattr(_lock_files, "holds_file_at", lambda lock, path: path.name == "a.lock")
    files = [tmp_path / "a.lock", tmp_path / "b.lock"]
    for file in files:
        file.touch()
    assert _lock_files.remove_idle(files) == 1
    assert len(made) == 2 and not any(lock.is_locked for lock in made)


def test_a_host_name_becomes_a_file_name_where_there_is_no_boot_id(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without a boot id the host name names the machine, its odd characters made safe."""
    monkeypatch.setattr(_lock_files, "_BOOT_ID", tmp_path / "no-boot-id")
    monkeypatch.setattr(socket, "gethostname", lambda: "node 17/a:b")  # as _lock_files asks
    assert _lock_files.this_machine() == "node_17_a_b"


def test_a_lock_that_keeps_no_descriptor_is_trusted(tmp_path: Path) -> None:
    """holds_file_at trusts a filelock that exposes no descriptor, rather than retrying forever."""
    path = tmp_path / "x.lock"
    path.touch()
    assert _lock_files.holds_file_at(types.SimpleNamespace(), path)  # type: ignore[arg-type]
    no_fd = types.SimpleNamespace(_context=types.SimpleNamespace(lock_file_fd=None))
    assert _lock_files.holds_file_at(no_fd, path)  # type: ignore[arg-type]


def _granted_on_try(path: Path, n: int) -> Lock:
    """A lock that another holder (pid 4242) keeps until the ``n``-th try takes it."""
    lock = Lock(path, what="a lock", degrade="none")
    tries = iter([False] * (n - 1) + [True])
    lock.try_acquire = lambda: next(tries)  # type: ignore[method-assign]
    lock.holder = lambda: _lock_note.Holder(pid=4242, since=0.0)  # type: ignore[method-assign]
    lock.release = lambda: None  # type: ignore[method-assign]
    return lock


@pytest.mark.anyio
async def test_a_wait_shorter_than_the_report_delay_is_not_reported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A lock taken before the wait has lasted REPORT_AFTER_S is taken without a report."""
    monkeypatch.setattr(_lock_wait, "REPORT_AFTER_S", 3600.0)
    seen: list[Any] = []
    await _lock_wait.acquire(_granted_on_try(tmp_path / "x.lock", 3), on_wait=seen.append)
    assert seen == []


def test_a_blocking_wait_tries_again_until_the_lock_is_free(tmp_path: Path) -> None:
    """hold_blocking tries again within its timeout, and holds a lock freed meanwhile."""
    with hold_blocking(_granted_on_try(tmp_path / "x.lock", 3), timeout_s=3600.0) as got:
        assert got


@pytest.mark.anyio
async def test_a_held_block_without_unclaim_releases_its_lock(tmp_path: Path) -> None:
    """hold() with no claim or unclaim releases the lock as its block ends."""
    path = tmp_path / "x.lock"
    held = Lock(path, what="a lock", degrade="none")
    async with _lock_wait.hold(held):
        assert not Lock(path, what="a lock", degrade="none").try_acquire()
    after = Lock(path, what="a lock", degrade="none")
    assert after.try_acquire()
    after.release()


def test_remove_idle_passes_over_a_lock_file_that_cannot_be_made(tmp_path: Path) -> None:
    """A lock file whose folder is a regular file is passed over, not raised about."""
    (tmp_path / "file").write_text("")
    assert _lock_files.remove_idle([tmp_path / "file" / "k.lock"]) == 0


def test_a_boot_id_that_is_not_text_names_the_machine_by_its_host(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A boot id file of bytes that are not UTF-8 is passed over for the host name."""
    boot = tmp_path / "boot_id"
    boot.write_bytes(b"\xff\xfe\x00\n")
    monkeypatch.setattr(_lock_files, "_BOOT_ID", boot)
    monkeypatch.setattr(socket, "gethostname", lambda: "node17")  # as _lock_files asks
    assert _lock_files.this_machine() == "node17"


def test_a_holder_is_described_with_its_local_start_to_the_second(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A holder's description gives its start in local time, hours, minutes and seconds."""
    monkeypatch.setenv("TZ", "XXX-05:30")
    time.tzset()
    try:
        holder = _lock_note.Holder(pid=7, since=45.0, host=socket.gethostname())
        assert holder.describe() == "pid 7, since 05:30:45"
    finally:
        monkeypatch.undo()
        time.tzset()


def test_a_note_that_is_no_json_object_names_no_holder(tmp_path: Path) -> None:
    """A holder note holding JSON that is no object (a list) reads as no holder."""
    note = tmp_path / "x.lock.holder"
    note.write_text("[4242, 0.0]")
    assert _lock_note.read_note(note) is None


def test_a_note_gives_its_holders_start_in_unix_seconds(tmp_path: Path) -> None:
    """The note a holder writes says since when in Unix seconds, as time.time() counts."""
    note = tmp_path / "x.lock.holder"
    before = time.time()
    _lock_note.write_note(note)
    after = time.time()
    holder = _lock_note.read_note(note)
    assert holder is not None and holder.pid == os.getpid()
    assert before <= holder.since <= after


def _free_fifo(path: Path, thread: threading.Thread) -> None:
    """Open both ends of the named pipe at ``path`` until ``thread`` ends (one stuck opening
    it, reading or writing it goes on)."""
    while thread.is_alive():
        with contextlib.suppress(OSError):
            reader = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
            with contextlib.suppress(OSError):
                os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))
            os.close(reader)
        thread.join(0.05)


def test_a_note_that_is_a_named_pipe_holds_neither_a_waiter_nor_the_taker(
    tmp_path: Path,
) -> None:
    """A named pipe where a lock's note goes: a waiter's look and the taker's note return."""
    # a hop stuck there held a resolve past hard_limit_s, and a taker stuck writing it
    # held the lock (the machine's sweep lock) for good
    path = tmp_path / "k.lock"
    os.mkfifo(_lock_note.note_path(path))
    lock = key_lock(path)
    seen: list[object] = []

    def look_then_take() -> None:
        with holding(path):
            seen.extend([lock.holder(), lock.try_acquire()])
        seen.extend([lock.try_acquire(), lock.holder()])
        lock.release()

    worker = threading.Thread(target=look_then_take, daemon=True)
    worker.start()
    worker.join(60)  # a hang guard, not a timing
    stuck = worker.is_alive()
    _free_fifo(_lock_note.note_path(path), worker)
    assert not stuck
    assert seen[:3] == [None, False, True]
    assert isinstance(seen[3], _lock_note.Holder) and seen[3].pid == os.getpid()


def test_a_lock_taken_let_go_and_dropped_is_forgotten(tmp_path: Path) -> None:
    """The record of locks taken (for a forked child to close) lets go of a lock dropped."""
    # a long-running trainer resolving key after key once kept one entry for each for good
    lock = _lock_files.file_lock(tmp_path / "k.lock")
    _lock_files.take(lock, timeout=0)
    taken = id(lock)
    assert taken in _lock_files._taken
    lock.release()
    del lock
    gc.collect()
    assert taken not in _lock_files._taken


def test_make_folder_makes_every_missing_folder_above_it(tmp_path: Path) -> None:
    """make_folder makes a folder three levels below the last one there, as mkdir -p does."""
    folder = tmp_path / "a" / "b" / "c"
    _lock_files.make_folder(folder)
    assert folder.is_dir()


def test_remove_idle_tries_a_held_file_once_without_waiting_and_leaves_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A lock file another holds stays: remove_idle tries it once, never waiting for its holder."""
    path = tmp_path / "held.lock"
    holder = _lock_files.file_lock(path)
    _lock_files.take(holder, timeout=0)
    timeouts: list[float] = []
    take = _lock_files.take

    def trying(lock: filelock.BaseFileLock, *, timeout: float) -> None:
        timeouts.append(timeout)
        take(lock, timeout=timeout)

    monkeypatch.setattr(_lock_files, "take", trying)
    try:
        assert _lock_files.remove_idle([path]) == 0
        assert path.exists()
    finally:
        holder.release()
    assert timeouts == [0]


def test_a_lock_held_at_a_fork_is_free_in_the_child_and_still_the_parent_s(
    tmp_path: Path,
) -> None:
    """A forked child sees the lock its parent took as not its own; the parent still holds it."""
    earlier = _lock_files.file_lock(tmp_path / "earlier.lock")  # taken, let go, still about
    _lock_files.take(earlier, timeout=0)
    earlier.release()
    path = tmp_path / "k.lock"
    lock = _lock_files.file_lock(path)
    _lock_files.take(lock, timeout=0)

    def child() -> None:
        assert not lock.is_locked
        lock.release()  # nothing of the child's to let go, nor the parent's
        with pytest.raises(filelock.Timeout):
            _lock_files.file_lock(path).acquire(timeout=0)

    try:
        assert run_forked(child, hang_guard_s=20) == 0
        assert lock.is_locked
        with pytest.raises(filelock.Timeout):
            _lock_files.file_lock(path).acquire(timeout=0)
    finally:
        lock.release()


@pytest.mark.skipif(
    int(filelock.__version__.split(".")[0]) >= 4,
    reason="filelock 4 refuses an instance inherited across a fork (CI's floors pass runs it)",
)
def test_a_child_takes_and_lets_go_a_lock_its_parent_held_at_the_fork_once_the_parent_did(
    tmp_path: Path,
) -> None:
    """Once the parent lets go, a forked child takes its copy of the lock and frees it whole."""
    path = tmp_path / "k.lock"
    lock = _lock_files.file_lock(path)
    _lock_files.take(lock, timeout=0)
    told, tell = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never back into pytest
        code = 1
        try:
            os.close(tell)
            os.read(told, 1)  # the parent let go
            lock.acquire(timeout=0)
            lock.release()
            probe = _lock_files.file_lock(path)  # free: nothing of the child's kept it
            probe.acquire(timeout=0)
            probe.release()
            code = 0
        finally:
            os._exit(code)
    os.close(told)
    try:
        lock.release()
    finally:
        os.write(tell, b"x")
        os.close(tell)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


@pytest.mark.skipif(os.geteuid() != 0, reason="only root can take another user's unwritable file")
def test_taking_another_user_s_lock_file_leaves_its_mode_as_it_is(tmp_path: Path) -> None:
    """A lock file of another user's is taken without its mode mended: only one's own is."""
    path = tmp_path / "theirs.lock"
    path.touch()
    os.chown(path, 65534, 65534)  # nobody's
    path.chmod(0o444)
    lock = _lock_files.file_lock(path)
    _lock_files.take(lock, timeout=0)
    lock.release()
    assert path.stat().st_mode & 0o777 == 0o444


_TRY_FLOCK = (
    "import fcntl, os, sys\n"
    "fd = os.open(sys.argv[1], os.O_RDWR)\n"
    "fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)\n"  # BlockingIOError (exit 1) if held
)


def test_an_unlock_refused_once_is_retried_and_the_lock_is_free_for_other_processes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """One EIO from flock(LOCK_UN) neither raises from release nor keeps the lock held."""
    lock = Lock(tmp_path / "sweep.lock", what="the sweep lock", degrade="local")
    assert lock.try_acquire()
    real_flock, refused = fcntl.flock, list[int]()

    def flock(fd: int, operation: int) -> None:
        if operation == fcntl.LOCK_UN and not refused:
            refused.append(fd)
            raise OSError(5, "Input/output error")
        real_flock(fd, operation)

    monkeypatch.setattr(fcntl, "flock", flock)
    lock.release()
    assert refused and not warnings_about(caplog, "cannot release")
    other = subprocess.run([sys.executable, "-c", _TRY_FLOCK, str(lock.path)], check=False)
    assert other.returncode == 0


def test_an_unlock_refused_for_good_is_warned_about_not_raised(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """An unlock that always fails returns; one warning names the lock exactly if it stays held."""
    lock = Lock(tmp_path / "sweep.lock", what="the sweep lock", degrade="local")
    assert lock.try_acquire()
    real_flock = fcntl.flock

    def flock(fd: int, operation: int) -> None:
        if operation == fcntl.LOCK_UN:
            raise OSError(5, "Input/output error")
        real_flock(fd, operation)

    monkeypatch.setattr(fcntl, "flock", flock)
    lock.release()
    monkeypatch.setattr(fcntl, "flock", real_flock)
    other = subprocess.run([sys.executable, "-c", _TRY_FLOCK, str(lock.path)], check=False)
    warnings = warnings_about(caplog, "cannot release the sweep lock")
    # filelock 4 keeps the descriptor, whose unlock fails again: held, and said; filelock 3
    # drops it, and closing it lets the lock go: nothing to say
    assert len(warnings) == (other.returncode != 0)
    assert all("Input/output error" in warning for warning in warnings)
    lock.release()  # let go for real where filelock kept the descriptor


def test_a_holder_note_that_raises_lets_the_lock_go(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A MemoryError writing the holder's note is raised with the file lock released."""

    def no_memory(path: Path) -> None:
        raise MemoryError

    lock = key_lock(tmp_path / "locks" / "k.lock")
    monkeypatch.setattr(_locks, "write_note", no_memory)
    with pytest.raises(MemoryError):
        lock.try_acquire()
    monkeypatch.undo()
    assert key_lock(tmp_path / "locks" / "k.lock").try_acquire()


@pytest.mark.parametrize("error", [MemoryError, KeyboardInterrupt])
def test_a_lock_whose_noting_raises_once_taken_lets_it_go(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, error: type[BaseException]
) -> None:
    """A MemoryError (or Ctrl-C) noting a lock just taken is raised, the file lock released."""

    def no_memory(lock: filelock.BaseFileLock, fd: int) -> None:
        raise error

    lock = Lock(tmp_path / "sweep.lock", what="the sweep lock", degrade="local")
    monkeypatch.setattr(_lock_files, "_note_taken", no_memory)
    with pytest.raises(error):
        lock.try_acquire()
    monkeypatch.undo()
    assert Lock(tmp_path / "sweep.lock", what="the sweep lock", degrade="local").try_acquire()


@pytest.mark.parametrize("error", [MemoryError, KeyboardInterrupt])
def test_a_lock_whose_file_check_raises_once_taken_lets_it_go(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, error: type[BaseException]
) -> None:
    """A MemoryError (or Ctrl-C) checking the file a lock just took is raised, the lock let go."""

    def no_memory(lock: filelock.BaseFileLock, path: Path) -> bool:
        raise error

    lock = key_lock(tmp_path / "locks" / "k.lock")
    monkeypatch.setattr(_locks, "holds_file_at", no_memory)
    with pytest.raises(error):
        lock.try_acquire()
    monkeypatch.undo()
    assert key_lock(tmp_path / "locks" / "k.lock").try_acquire()


def test_a_release_whose_tidying_raises_still_lets_the_lock_go(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A MemoryError as a release checks its file is raised with the file lock released."""

    def no_memory(lock: filelock.BaseFileLock, path: Path) -> bool:
        raise MemoryError

    lock = key_lock(tmp_path / "locks" / "k.lock")
    assert lock.try_acquire()
    monkeypatch.setattr(_locks, "holds_file_at", no_memory)
    with pytest.raises(MemoryError):
        lock.release()
    monkeypatch.undo()
    assert key_lock(tmp_path / "locks" / "k.lock").try_acquire()


def test_an_interrupt_writing_the_holder_note_lets_the_lock_go(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Ctrl-C as the holder's note is written is raised with the file lock released."""

    def interrupted(path: Path) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(_locks, "write_note", interrupted)
    lock = key_lock(tmp_path / "locks" / "k.lock")
    with pytest.raises(KeyboardInterrupt):
        lock.try_acquire()
    other = subprocess.run([sys.executable, "-c", _TRY_FLOCK, str(lock.path)], check=False)
    assert other.returncode == 0  # another process takes it: not held by nobody


@pytest.mark.skipif(
    not FLOCK_REFUSAL_RAISES, reason="filelock before 3.21 retries a refused flock as a held one"
)
def test_a_key_lock_flock_refuses_leaves_no_lock_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A key lock whose flock fails (EIO) goes on unlocked, its file removed, not left."""
    path = tmp_path / "locks" / "k.lock"
    refused = refuse_flock_once(monkeypatch, path)
    caplog.set_level(logging.WARNING, logger="chunktune")
    lock = key_lock(path)
    assert lock.try_acquire()
    lock.release()
    assert refused and lock.mode == "none"
    assert list(path.parent.iterdir()) == []


@pytest.mark.filterwarnings("ignore:flock not supported:UserWarning")
def test_a_file_system_without_flock_still_tunes_and_answers_the_key_again(
    isolated: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where flock is ENOSYS the resolve measures and its next one answers without measuring."""
    real_flock = fcntl.flock

    def flock(fd: int, operation: int) -> None:
        if operation & fcntl.LOCK_EX:
            raise OSError(errno.ENOSYS, os.strerror(errno.ENOSYS))
        real_flock(fd, operation)

    monkeypatch.setattr(fcntl, "flock", flock)
    w = SimulatedWorkload([1e-4] * 64, nthread=2)
    first = chunktune.resolve_sync(w)
    again = chunktune.resolve_sync(w)
    assert first.source == "benchmark"
    assert again.source == "cache" and again.chunk_size == first.chunk_size


@pytest.mark.skipif(
    not FLOCK_REFUSAL_RAISES, reason="filelock before 3.21 retries a refused flock as a held one"
)
def test_a_named_sweep_lock_flock_refuses_keeps_the_users_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The sweep lock file $CHUNKTUNE_SWEEP_LOCK names is the user's: a refused flock leaves it."""
    path = tmp_path / "sweep.lock"
    path.write_text("")
    monkeypatch.setenv(SWEEP_LOCK_ENV, str(path))
    refused = refuse_flock_once(monkeypatch, path)
    caplog.set_level(logging.WARNING, logger="chunktune")
    lock = sweep_lock()
    assert lock.try_acquire()
    lock.release()
    assert refused and path.exists()
