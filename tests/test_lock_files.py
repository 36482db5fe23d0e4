"""Lock files' modes: what the umask allows, so that the members of a group can all lock."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from _users import NOBODY, as_user, child_env

# Each lock a process takes beside a cache or for its sweeps: the cache's write lock, a
# key's lock as DecisionCache hands it out, the same key's lock as a resolve takes it,
# and the sweep lock at a path $CHUNKTUNE_SWEEP_LOCK names (that file stays).
KINDS = ["write", "cache key", "resolve key", "sweep"]

_LOCKS = """
import contextlib, json, os, stat, sys
from pathlib import Path
import filelock
from chunktune import DecisionCache
from chunktune._cache_file import CacheFile
from chunktune._cache_lock import write_lock
from chunktune._locks import key_lock, sweep_lock

def lock_of(kind, cache):
    if kind == "cache key":
        return DecisionCache(cache).key_lock("k")
    if kind == "resolve key":
        return key_lock(Path(DecisionCache(cache).key_lock("k").lock_file))
    os.environ["CHUNKTUNE_SWEEP_LOCK"] = str(cache.with_name("sweep.lock"))
    return sweep_lock()

@contextlib.contextmanager
def taken(kind, cache):
    # yields the mode of the lock file while held
    if kind == "write":
        with write_lock(CacheFile(cache, "json")):
            yield stat.S_IMODE(os.stat(cache.with_name(cache.name + ".lock")).st_mode)
        return
    lock = lock_of(kind, cache)
    if kind == "cache key":  # filelock before 3.23 makes no folder
        Path(lock.lock_file).parent.mkdir(parents=True, exist_ok=True)
        lock.acquire(timeout=0)
        path = lock.lock_file
    else:
        assert lock.try_acquire() and lock.mode == "file", lock.mode
        path = lock.path
    try:
        yield stat.S_IMODE(os.stat(path).st_mode)
    finally:
        lock.release()

def attempt(kind, cache):
    # one try, not waiting for a holder: "busy" (held by another), "taken", or why not
    try:
        if kind == "write":
            with write_lock(CacheFile(cache, "json"), brief=True):
                return "taken"
        lock = lock_of(kind, cache)
        if kind == "cache key":
            Path(lock.lock_file).parent.mkdir(parents=True, exist_ok=True)
            lock.acquire(timeout=0)
            lock.release()
            return "taken"
        got = lock.try_acquire()
        if got:
            lock.release()
        if lock.mode != "file":
            return "degraded to " + lock.mode
        return "taken" if got else "busy"
    except TimeoutError:  # filelock.Timeout is one
        return "busy"
    except OSError as exc:
        return "refused: " + str(exc)

kind, action = sys.argv[1], sys.argv[2]
if action == "modes":  # under each umask given, in a folder of its own
    modes = {}
    for mask in sys.argv[4:]:
        os.umask(int(mask, 8))
        cache = Path(sys.argv[3]) / mask / "cache.json"
        with taken(kind, cache) as mode:
            modes[mask] = oct(mode)
    print(json.dumps(modes))
elif action == "hold":  # until told to let go
    os.umask(0o002)
    with taken(kind, Path(sys.argv[3])) as mode:
        print(oct(mode), flush=True)
        sys.stdin.readline()
else:  # one try now, another once told to
    os.umask(0o002)
    print(attempt(kind, Path(sys.argv[3])), flush=True)
    sys.stdin.readline()
    print(attempt(kind, Path(sys.argv[3])), flush=True)
"""


@pytest.fixture
def group_dir() -> Iterator[Path]:
    """A folder the group nogroup shares (setgid, group-writable), as a team's cache folder."""
    folder = Path(tempfile.mkdtemp(prefix="chunktune-group-"))
    try:
        if os.geteuid() == 0:
            os.chown(folder, -1, NOBODY)
        folder.chmod(0o2775)
        yield folder
    finally:
        shutil.rmtree(folder)


@pytest.mark.parametrize("kind", KINDS)
def test_a_lock_file_gets_what_the_umask_allows(tmp_path: Path, kind: str) -> None:
    """A lock file is group-writable under umask 002, not under 022, private under 077."""
    child = subprocess.run(
        [sys.executable, "-c", _LOCKS, kind, "modes", str(tmp_path), "002", "022", "077"],
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert child.returncode == 0, child.stderr
    assert json.loads(child.stdout) == {"002": "0o664", "022": "0o644", "077": "0o600"}


@pytest.mark.slow
@pytest.mark.parametrize("kind", KINDS)
def test_another_member_of_the_group_can_take_the_lock(group_dir: Path, kind: str) -> None:
    """A lock file one member made under umask 002 lets another wait for it, then take it."""
    prefixes = [as_user(uid, NOBODY) for uid in (NOBODY, NOBODY - 1)]
    for _, why_not in prefixes:
        if why_not:
            pytest.skip(why_not)
    (first, _), (second, _) = prefixes
    cache = str(group_dir / "cache.json")
    run = {"env": child_env(), "stdin": subprocess.PIPE, "stdout": subprocess.PIPE, "text": True}
    with subprocess.Popen([*first, sys.executable, "-c", _LOCKS, kind, "hold", cache], **run) as a:
        assert a.stdin is not None and a.stdout is not None
        mode = a.stdout.readline().strip()
        with subprocess.Popen(
            [*second, sys.executable, "-c", _LOCKS, kind, "try", cache], **run
        ) as b:
            assert b.stdin is not None and b.stdout is not None
            while_held = b.stdout.readline().strip()
            a.stdin.close()  # the first lets go
            assert a.wait(timeout=60) == 0
            b.stdin.close()
            after = b.stdout.readline().strip()
            assert b.wait(timeout=60) == 0
    assert (mode, while_held, after) == ("0o664", "busy", "taken")
