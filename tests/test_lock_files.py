"""Lock files' modes: what the umask allows, so that the members of a group can all lock."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import shutil
import stat
import struct
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import filelock
import pytest
from _forking import run_forked
from _users import NOBODY, as_user, child_env, unprivileged

from chunktune._lock_files import file_lock, make_folder, take
from chunktune._lock_note import note_path, read_note
from chunktune._locks import key_lock, sweep_lock

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
elif action == "hold":  # until told to let go (under umask 002 unless one is given)
    os.umask(int(sys.argv[4] if len(sys.argv) > 4 else "002", 8))
    with taken(kind, Path(sys.argv[3])) as mode:
        print(oct(mode), flush=True)
        sys.stdin.readline()
else:  # one try now, another once told to
    os.umask(int(sys.argv[4] if len(sys.argv) > 4 else "002", 8))
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


def _modes_in_child(kind: str, folder: Path, *umasks: str, user: Sequence[str] = ()) -> Any:
    """The modes ``kind``'s lock files get in a child under each of ``umasks`` (as
    ``user``'s command prefix, if any), by umask."""
    child = subprocess.run(
        [*user, sys.executable, "-c", _LOCKS, kind, "modes", str(folder), *umasks],
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert child.returncode == 0, child.stderr
    return json.loads(child.stdout)


@pytest.mark.parametrize("kind", KINDS)
def test_a_lock_file_gets_what_the_umask_allows(tmp_path: Path, kind: str) -> None:
    """A lock file is group-writable under umask 002, not under 022, private under 077."""
    assert _modes_in_child(kind, tmp_path, "002", "022", "077") == {
        "002": "0o664",
        "022": "0o644",
        "077": "0o600",
    }


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
    run: dict[str, Any] = {
        "env": child_env(),
        "stdin": subprocess.PIPE,
        "stdout": subprocess.PIPE,
        "text": True,
    }
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


# The locks chunktune takes itself; a key's lock DecisionCache hands out is its caller's to take.
OWN_KINDS = [kind for kind in KINDS if kind != "cache key"]


def _lock_file(kind: str, cache: Path) -> Path:
    """Where the lock of ``kind`` beside ``cache`` has its file."""
    if kind == "write":
        return cache.with_name(cache.name + ".lock")
    if kind == "sweep":
        return cache.with_name("sweep.lock")
    return cache.parent / "locks" / "k.lock"


def _mode(path: Path) -> str:
    """The file's permission bits, as oct() writes them, or "gone"."""
    try:
        return oct(stat.S_IMODE(path.stat().st_mode))
    except FileNotFoundError:
        return "gone"


def _child(
    prefix: list[str], kind: str, action: str, cache: Path, mask: str
) -> subprocess.Popen[str]:
    """A child that holds, or tries, the lock of ``kind`` beside ``cache`` under ``mask``."""
    return subprocess.Popen(
        [*prefix, sys.executable, "-c", _LOCKS, kind, action, str(cache), mask],
        env=child_env(),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )


def _held_and_tried(
    holder: tuple[list[str], str], trier: tuple[list[str], str], kind: str, cache: Path
) -> tuple[str, str, str, str]:
    """The holder's mode as it holds; the other's try while held, the file's mode then, and
    its try once the holder let go (each child: a command prefix and its umask)."""
    with _child(holder[0], kind, "hold", cache, holder[1]) as a:
        assert a.stdin is not None and a.stdout is not None
        mode = a.stdout.readline().strip()
        with _child(trier[0], kind, "try", cache, trier[1]) as b:
            assert b.stdin is not None and b.stdout is not None
            while_held = b.stdout.readline().strip()
            mode_then = _mode(_lock_file(kind, cache))
            a.stdin.close()  # the holder lets go
            assert a.wait(timeout=60) == 0
            b.stdin.close()
            after = b.stdout.readline().strip()
            assert b.wait(timeout=60) == 0
    return mode, while_held, mode_then, after


def _kept(mode: str) -> str:
    """What the sweep lock's file is once let go: ``mode`` (it stays), or "gone" with a
    filelock that removes a lock file as it releases it (3.23 and 3.24 did)."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "probe.lock"
        lock = filelock.FileLock(path)
        lock.acquire()
        lock.release()
        return mode if path.exists() else "gone"


def _own_user() -> list[str]:
    """The prefix of a child without root's power over permissions (skips where none can run)."""
    prefix, why_not = unprivileged()
    if why_not:
        pytest.skip(why_not)
    return prefix


def test_an_exported_cache_file_lands_in_folders_made_under_a_umask_without_the_owners_write(
    group_dir: Path,
) -> None:
    """Under umask 277 write_cache_file makes the folders it needs writable by their owner."""
    target = group_dir / "new" / "deeper" / "export.json"
    script = (
        "import os, sys\n"
        "from chunktune import CacheEntry\n"
        "from chunktune._cache_transfer import write_cache_file\n"
        "os.umask(0o277)\n"
        "entry = CacheEntry(chunk_size=4, native_chunk=12, reason='r')\n"
        "write_cache_file(sys.argv[1], {'k': entry})\n"
    )
    child = subprocess.run(
        [*_own_user(), sys.executable, "-c", script, str(target)],
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert child.returncode == 0, child.stderr
    assert json.loads(target.read_text())["entries"]["k"]["chunk_size"] == 4
    assert int(_mode(target.parent), 8) & 0o777 == 0o700  # the owner's whole, the rest none


@pytest.mark.parametrize("kind", OWN_KINDS)
def test_a_lock_file_made_under_a_umask_without_the_owners_write_is_its_owners_to_open(
    group_dir: Path, kind: str
) -> None:
    """Under umask 277 a lock file, and a folder made for it, still let their owner write."""
    assert _modes_in_child(kind, group_dir, "277", user=_own_user()) == {"277": "0o600"}


@pytest.mark.slow
@pytest.mark.parametrize("kind", OWN_KINDS)
def test_its_owner_waits_for_then_takes_a_lock_made_under_umask_277(
    group_dir: Path, kind: str
) -> None:
    """A lock one process holds under umask 277 is busy to another of the same user, then taken."""
    me = (_own_user(), "277")
    got = _held_and_tried(me, me, kind, group_dir / "cache.json")
    assert got == ("0o600", "busy", "0o600", "taken")


@pytest.mark.parametrize("kind", OWN_KINDS)
def test_a_lock_file_of_ones_own_left_unwritable_is_opened_to_its_owner_and_taken(
    group_dir: Path, kind: str
) -> None:
    """A lock file left 0o400 (made under umask 277 by an older chunktune) is taken, 0o600 after."""
    prefix = _own_user()
    path = _lock_file(kind, group_dir / "cache.json")
    path.parent.mkdir(exist_ok=True)
    path.touch()
    if prefix:  # the child's user owns the file, as its own earlier run left it
        os.chown(path.parent, NOBODY, NOBODY)
        os.chown(path, NOBODY, NOBODY)
    path.chmod(0o400)
    with _child(prefix, kind, "try", group_dir / "cache.json", "022") as child:
        assert child.stdin is not None and child.stdout is not None
        first = child.stdout.readline().strip()
        mode = _mode(path)
        child.stdin.close()
        assert (first, child.stdout.readline().strip()) == ("taken", "taken")
        assert child.wait(timeout=60) == 0
    # the sweep lock's file stays; the others' holders remove theirs
    assert mode == (_kept("0o600") if kind == "sweep" else "gone")


@pytest.mark.slow
@pytest.mark.parametrize("kind", OWN_KINDS)
def test_a_waiter_under_umask_022_leaves_a_held_lock_files_group_bits(
    group_dir: Path, kind: str
) -> None:
    """The owner's process under umask 022 trying a held 0o664 lock leaves it so, then takes it."""
    # filelock < 3.24 set it to 0o644 as it opened it; the sweep lock's file stays, 0o664
    prefix = _own_user()
    cache = group_dir / "cache.json"
    got = _held_and_tried((prefix, "002"), (prefix, "022"), kind, cache)
    assert got == ("0o664", "busy", "0o664", "taken")
    assert _mode(_lock_file(kind, cache)) == (_kept("0o664") if kind == "sweep" else "gone")


@pytest.mark.slow
def test_another_member_takes_a_shared_sweep_lock_its_owner_took_under_umask_022(
    group_dir: Path,
) -> None:
    """A shared 0o664 sweep-lock file stays the group's to lock once its owner took it under 022."""
    # filelock < 3.24 set it to 0o644: the other member's sweep lock degraded to local
    prefixes = [as_user(uid, NOBODY) for uid in (NOBODY, NOBODY - 1)]
    for _, why_not in prefixes:
        if why_not:
            pytest.skip(why_not)
    (owner, _), (member, _) = prefixes
    cache = group_dir / "cache.json"
    tries = []
    for prefix, mask in [(owner, "002"), (owner, "022"), (member, "002")]:
        with _child(prefix, "sweep", "try", cache, mask) as child:
            out, _ = child.communicate("\n", timeout=60)
            tries.append((out.split("\n")[0], _mode(_lock_file("sweep", cache))))
    assert tries == [("taken", _kept("0o664"))] * 3


def _group_writing_default_acl(folder: Path) -> str:
    """Give ``folder`` a default ACL of user rwx, group rwx, others r-x; why not, or ""."""
    entries = [(0x01, 7), (0x04, 7), (0x20, 5)]  # ACL_USER_OBJ, ACL_GROUP_OBJ, ACL_OTHER
    value = struct.pack("<I", 2) + b"".join(
        struct.pack("<HHI", t, p, 2**32 - 1) for t, p in entries
    )
    try:
        os.setxattr(folder, "system.posix_acl_default", value)
    except (AttributeError, OSError) as exc:
        return f"no POSIX default ACL here: {exc}"
    return ""


@pytest.mark.parametrize("kind", OWN_KINDS)
def test_a_lock_file_gets_what_a_default_acl_gives_over_the_umask(
    tmp_path: Path, kind: str
) -> None:
    """Under a default ACL giving the group write, lock files are 0o664 under umask 022 too."""
    # as open() makes files there; filelock < 3.24 set them to 0o644
    (tmp_path / "022").mkdir()
    why_not = _group_writing_default_acl(tmp_path / "022")
    if why_not:
        pytest.skip(why_not)
    (tmp_path / "022" / "plain").touch()
    assert _mode(tmp_path / "022" / "plain") == "0o664"  # what the ACL gives a file over umask 022
    assert _modes_in_child(kind, tmp_path, "022") == {"022": "0o664"}


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["resolve key", "sweep"])
def test_the_next_holder_replaces_the_note_a_holder_killed_under_umask_277_left(
    group_dir: Path, kind: str
) -> None:
    """A killed holder's 0o400 note (umask 277) gives way to the next holder's: it names it."""
    prefix = _own_user()
    cache = group_dir / "cache.json"
    note = note_path(_lock_file(kind, cache))
    with _child(prefix, kind, "hold", cache, "277") as killed:
        assert killed.stdout is not None and killed.stdout.readline().strip() == "0o600"
        killed.kill()  # SIGKILL: its lock file and its note stay
        killed.wait(timeout=60)
    left = read_note(note)
    assert left is not None and left.pid == killed.pid and _mode(note) == "0o400"
    with _child(prefix, kind, "hold", cache, "277") as after:
        assert after.stdin is not None and after.stdout is not None
        assert after.stdout.readline().strip() == "0o600"
        holder = read_note(note)
        after.stdin.close()
        assert after.wait(timeout=60) == 0
    assert holder is not None and holder.pid == after.pid


_FORKED_THEN_KILLED = """
import os, signal, sys, time
import chunktune
from chunktune.sim import SimulatedWorkload

class Forking(SimulatedWorkload):
    calls = 0

    def run(self, chunk_size):
        Forking.calls += 1
        if Forking.calls == 3:  # mid-sweep: the machine's sweep lock and the key's are held
            child = os.fork()
            if child == 0:  # a data loader's worker, say, that outlives the trainer
                null = os.open(os.devnull, os.O_RDWR)
                for fd in (0, 1, 2):  # the test reads the trainer's output up to its end
                    os.dup2(null, fd)
                time.sleep(60)
                os._exit(0)
            print(child, flush=True)
            os.kill(os.getpid(), signal.SIGKILL)  # the trainer dies (the OOM killer)
        return super().run(chunk_size)

chunktune.resolve_sync(Forking.from_layout("blocked", num_envs=512, nthread=8), policy="quick")
"""


def test_a_child_forked_mid_sweep_does_not_keep_the_locks_of_a_killed_parent(
    isolated: Path,
) -> None:
    """A process killed mid-sweep frees the sweep and key locks though a forked child lives on."""
    done = subprocess.run(
        [sys.executable, "-c", _FORKED_THEN_KILLED],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    child = int(done.stdout.split()[0])
    try:
        assert done.returncode == -9, done.stderr[-2000:]
        keys = list((isolated / "locks").glob("*.lock"))
        assert keys  # the killed holder left its key's lock file behind
        # before, the child's copies of the descriptors held both for as long as it lived
        for lock in [sweep_lock(), *(key_lock(path) for path in keys)]:
            assert lock.try_acquire(), lock.path
            lock.release()
    finally:
        os.kill(child, 9)


@contextlib.contextmanager
def _umask(mask: int) -> Iterator[None]:
    """This process's umask set to ``mask`` for the block, and the old one after."""
    old = os.umask(mask)
    try:
        yield
    finally:
        os.umask(old)


def _octal(path: Path) -> str:
    """The permission bits of the file or folder at ``path``, as ``0o...``."""
    return oct(stat.S_IMODE(os.stat(path).st_mode))


def test_a_lock_taken_under_umask_277_leaves_its_file_open_to_its_owner(tmp_path: Path) -> None:
    """take() under umask 277 leaves the lock file it made 0o600 while held, not open()'s 0o400."""
    path = tmp_path / "own.lock"
    lock = file_lock(path)
    with _umask(0o277):
        take(lock, timeout=0)
    try:
        assert _octal(path) == "0o600"
    finally:
        lock.release()


@pytest.mark.skipif(
    hasattr(filelock.BaseFileLock, "has_explicit_mode") or os.geteuid() != 0,
    reason="filelock < 3.24 sets the mode it was given as root opens another's file",
)
def test_root_taking_another_users_lock_file_leaves_its_mode_as_it_is(tmp_path: Path) -> None:
    """Root taking nobody's 0o444 lock file under filelock < 3.24: still 0o444, no owner write."""
    path = tmp_path / "theirs.lock"
    path.touch()
    os.chown(path, NOBODY, NOBODY)
    path.chmod(0o444)
    lock = file_lock(path)
    take(lock, timeout=0)
    try:
        assert _octal(path) == "0o444"
    finally:
        lock.release()


def test_folders_made_under_umask_277_let_their_owner_in(tmp_path: Path) -> None:
    """make_folder() under umask 277 leaves each folder it made 0o700 (mkdir gives 0o500)."""
    (tmp_path / "kept").mkdir(mode=0o750)
    target = tmp_path / "kept" / "new" / "deeper"
    with _umask(0o277):
        make_folder(target)
        make_folder(target)  # already there: nothing to do, and no error
    got = [_octal(f) for f in (tmp_path / "kept", target.parent, target)]
    assert got == ["0o750", "0o700", "0o700"]


def test_make_folder_leaves_the_mode_of_a_folder_already_there_as_it_is(tmp_path: Path) -> None:
    """make_folder() on a folder already there (0o500, its owner's choice) changes no mode."""
    kept = tmp_path / "kept"
    kept.mkdir(mode=0o500)
    try:
        make_folder(kept)
        assert _octal(kept) == "0o500"
    finally:
        kept.chmod(0o700)


def test_take_mends_the_file_it_holds_not_one_put_at_its_path_meanwhile(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """take() under umask 277 mends the file it locked, through its descriptor, not the path's."""
    path = tmp_path / "own.lock"
    lock = file_lock(path)
    acquire = lock.acquire

    def then_replaced(timeout: float | None = None) -> Any:
        got = acquire(timeout=timeout)
        path.rename(tmp_path / "held.lock")  # a `cache clear` and a new file, say
        path.touch(mode=0o400)
        return got

    monkeypatch.setattr(lock, "acquire", then_replaced)
    with _umask(0o277):
        take(lock, timeout=0)
    try:
        assert (_octal(tmp_path / "held.lock"), _octal(path)) == ("0o600", "0o400")
    finally:
        lock.release()


def test_a_refusal_that_mending_cannot_help_is_raised_after_one_try(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """take() refused a lock file its owner may already open raises the refusal without a retry."""
    path = tmp_path / "open.lock"
    path.touch(mode=0o600)
    lock = file_lock(path)
    tries: list[float | None] = []

    def refused(timeout: float | None = None) -> Any:
        tries.append(timeout)
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(lock, "acquire", refused)
    with pytest.raises(PermissionError):
        take(lock, timeout=0)
    assert (tries, _octal(path)) == ([0], "0o600")


def test_a_child_forked_while_a_lock_is_held_starts_without_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fork while this process holds a taken lock runs the child's fork hook without an error."""
    told = tmp_path / "unraisable.txt"

    def record(unraisable: Any) -> None:
        told.write_text(f"{unraisable.exc_type.__name__}: {unraisable.exc_value}")

    monkeypatch.setattr(sys, "unraisablehook", record)
    lock = file_lock(tmp_path / "held.lock")
    take(lock, timeout=0)
    try:
        assert run_forked(lambda: None, hang_guard_s=30) == 0
    finally:
        lock.release()
    assert not told.exists(), told.read_text()


def test_a_lock_file_its_owner_was_refused_is_opened_to_it_and_then_held(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """take() refused a 0o400 lock file of its own user mends it to 0o600 and holds the lock."""
    # root is never refused: the first try raises what a refused open() raises for others
    path = tmp_path / "left.lock"
    path.touch()
    path.chmod(0o400)
    lock = file_lock(path)
    acquire = lock.acquire
    tries: list[float | None] = []

    def refused_once(timeout: float | None = None) -> Any:
        tries.append(timeout)
        if len(tries) == 1:
            raise PermissionError(13, "Permission denied", str(path))
        return acquire(timeout=timeout)

    monkeypatch.setattr(lock, "acquire", refused_once)
    take(lock, timeout=0)
    try:
        assert (lock.is_locked, _octal(path), tries) == (True, "0o600", [0, 0])
    finally:
        lock.release()


def test_a_lock_on_a_file_system_without_flock_is_refused_as_an_oserror(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An older filelock's NotImplementedError for a file system without flock is an ENOSYS."""
    lock = file_lock(tmp_path / "k.lock")

    def acquire(*args: object, **kwargs: object) -> None:
        raise NotImplementedError("FileSystem does not appear to support flock")

    monkeypatch.setattr(lock, "acquire", acquire)
    with pytest.raises(OSError, match="does not support flock") as caught:
        take(lock, timeout=0)
    assert caught.value.errno == errno.ENOSYS
