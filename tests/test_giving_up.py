"""Giving up at hard_limit_s: the owner's watch tells its waits and says where it stood."""

from __future__ import annotations

import contextlib
import re
import subprocess
import sys
import time
from pathlib import Path

import anyio
import attrs
import pytest
from _small_sweeps import small_policy, workload

import chunktune
from chunktune import ProgressEvent, _flights, _giving_up, _lock_note, _lock_wait, _locks
from chunktune._shown import shown_file, unprinted

pytestmark = pytest.mark.anyio

HANG_GUARD_S = 60.0  # not a speed limit: a hang fails the test instead of the suite


async def test_a_waiting_event_says_how_long_the_wait_has_lasted() -> None:
    """A 'waiting' event's elapsed_s is the seconds the resolve has waited so far."""
    events: list[ProgressEvent] = []
    watch = _giving_up.Watch(events.append, native=3, policy_name="balanced")
    before = anyio.current_time()
    on_wait = watch.waiting("sweep", _locks.sweep_lock())
    began = anyio.current_time()
    await anyio.sleep(0.05)  # the wait goes on until the lock's holder is told of
    told = anyio.current_time()
    on_wait(_lock_note.Holder(pid=4242, since=time.time()))
    around = anyio.current_time() - before  # the wait lies within it
    assert [e.kind for e in events] == ["waiting"]
    assert events[0].message.startswith("waiting for another sweep (pid 4242, since ")
    assert told - began <= events[0].elapsed_s <= around  # the wait's own span, no figure


class Untold:
    """A lock that cannot tell who holds it (its holder let go, say)."""

    refused = True  # its tries found it held

    def in_flight_s(self) -> None:
        return None  # no try at it in flight

    def holder(self) -> None:
        return None


async def test_giving_up_names_the_holder_reported_when_the_lock_tells_none_now() -> None:
    """Giving up names the holder the wait was told of when the lock can tell no holder now."""
    watch = _giving_up.Watch(None, native=3, policy_name="balanced")
    on_wait = watch.waiting("sweep", Untold())  # type: ignore[arg-type]
    on_wait(_lock_note.Holder(pid=4242, since=time.time()))
    d = await watch.gave_up("k", 1.0)
    assert "while another sweep (pid 4242, since " in d.reason


def _trying(tmp_path: Path, *, for_s: float, refused: bool) -> _locks.Lock:
    """The sweep lock at ``tmp_path``, a try at it in flight for ``for_s`` seconds, whatever
    the wall clock does meanwhile; ``refused``: an earlier try of the wait found it held."""
    lock = _locks.Lock(tmp_path / "sweep.lock", what="the sweep lock", degrade="local")
    lock.trying_since, lock.refused = time.monotonic() - for_s, refused
    lock.in_flight_s = lambda: for_s  # type: ignore[method-assign]  # a loaded machine's pause
    return lock


async def test_giving_up_on_a_first_try_only_slow_to_answer_does_not_say_stalled(
    tmp_path: Path,
) -> None:
    """A first try in flight a moment at the limit: 'had not answered after', no stall named."""
    # it was once called "(a stalled file system?)" however briefly it had been in flight
    watch = _giving_up.Watch(None, native=3, policy_name="balanced")
    lock = _trying(tmp_path, for_s=0.05, refused=False)
    watch.waiting("sweep", lock)
    d = await watch.gave_up("k", 0.1)
    said = re.search(r"its try at the machine's sweep lock \((.*)\) had not answered after "
                     r"([0-9.]+) s; nothing was measured", d.reason)  # fmt: skip
    assert said is not None, d.reason
    assert said[1] == str(lock.path) and 0.05 <= float(said[2]) < _giving_up.STALLED_TRY_S
    assert "stalled" not in d.reason


async def test_giving_up_on_an_unanswered_try_names_an_odd_lock_file_escaped(
    tmp_path: Path,
) -> None:
    """The reason naming an unanswered lock quotes its file's newline and escape sequence."""
    odd = tmp_path / "a\nb\x1b[31m"
    odd.mkdir()
    watch = _giving_up.Watch(None, native=3, policy_name="balanced")
    lock = _trying(odd, for_s=0.05, refused=False)
    watch.waiting("sweep", lock)
    d = await watch.gave_up("k", 0.1)
    assert unprinted(d.reason) is None, d.reason
    assert f"sweep lock ({shown_file(lock.path)}) had not answered" in d.reason


async def test_giving_up_on_a_try_long_unanswered_suggests_a_stalled_file_system(
    tmp_path: Path,
) -> None:
    """A try in flight STALLED_TRY_S or more at the limit: named, with a stalled file system."""
    for refused in (False, True):
        watch = _giving_up.Watch(None, native=3, policy_name="balanced")
        watch.waiting("sweep", _trying(tmp_path, for_s=_giving_up.STALLED_TRY_S, refused=refused))
        d = await watch.gave_up("k", 5.0)
        assert re.search(r"had not answered after [0-9.]+ s \(a stalled file system\?\)", d.reason)


async def test_giving_up_on_a_slow_try_after_the_lock_was_found_held_names_the_holder(
    tmp_path: Path,
) -> None:
    """A try in flight a moment after earlier ones found the lock held: the wait for its holder."""
    # it was once reported as a try that "had not answered (a stalled file system?)"
    watch = _giving_up.Watch(None, native=3, policy_name="balanced")
    on_wait = watch.waiting("sweep", _trying(tmp_path, for_s=0.05, refused=True))
    on_wait(_lock_note.Holder(pid=4242, since=time.time()))
    d = await watch.gave_up("k", 0.1)
    assert "while another sweep (pid 4242, since " in d.reason
    assert "had not answered" not in d.reason


HOLD_AS_HOST = """
import fcntl, json, os, sys, time
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT)
fcntl.flock(fd, fcntl.LOCK_EX)
note = {"pid": os.getpid(), "since": time.time(), "host": sys.argv[2]}
with open(sys.argv[1] + ".holder", "w") as f:
    f.write(json.dumps(note))
print("held", flush=True)
time.sleep(120)
"""


def hold_as_host(stack: contextlib.ExitStack, lock: Path, host: str) -> subprocess.Popen[str]:
    """A process of another host (of a shared cache) that waits for ``lock``, then holds it
    until the stack closes."""
    holder = stack.enter_context(
        subprocess.Popen(
            [sys.executable, "-c", HOLD_AS_HOST, str(lock), host],
            stdout=subprocess.PIPE,
            text=True,
        )
    )
    stack.callback(holder.kill)
    return holder


def test_giving_up_names_who_took_the_key_over_not_the_killed_holder(
    isolated: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A waiter giving up after the holder it reported was killed names the one measuring now."""
    monkeypatch.setattr(_lock_wait, "REPORT_AFTER_S", 0.0)
    # 1 s: room for a loaded machine to reach the wait and report it before the limit
    pol = attrs.evolve(small_policy(), time_budget_s=0.05, hard_limit_s=1.0)
    w = workload("taken-over")
    lock = isolated / "locks" / f"{chunktune.resolve_sync(w, policy=pol).key}.lock"
    lock.parent.mkdir(exist_ok=True)
    successors: list[subprocess.Popen[str]] = []
    with contextlib.ExitStack() as stack:
        first = hold_as_host(stack, lock, "node3")
        assert first.stdout is not None and first.stdout.readline() == "held\n"

        def take_over(event: ProgressEvent) -> None:
            # on the loop, between the waiter's tries: the successor is queued on the
            # lock before its holder dies, so it, not the waiter, takes it
            if event.kind == "waiting":
                successor = hold_as_host(stack, lock, "node5")
                successors.append(successor)
                first.kill()
                assert successor.stdout is not None
                assert successor.stdout.readline() == "held\n"

        d = chunktune.resolve_sync(w, policy=pol, refresh=True, on_progress=take_over)
    assert len(successors) == 1 and d.source == "fallback"
    assert f"pid {successors[0].pid} on node5" in d.reason and "node3" not in d.reason


async def test_the_owner_s_wait_for_the_machine_is_told_to_the_tasks_sharing_its_flight() -> None:
    """While the owner waits for another sweep, a task sharing its flight is told so too."""
    flight, owner = _flights.board("test-owner-waits")
    assert owner
    seen: list[ProgressEvent] = []
    watch = _giving_up.Watch(None, native=3, policy_name="balanced", flight=flight)
    try:
        with anyio.fail_after(HANG_GUARD_S):
            async with anyio.create_task_group() as tg:
                tg.start_soon(flight.wait, seen.append)
                with anyio.fail_after(HANG_GUARD_S):
                    while not flight.waiters:  # noqa: ASYNC110 -- no event to await
                        await anyio.sleep(0.01)
                watch.waiting("sweep", _locks.sweep_lock())(
                    _lock_note.Holder(pid=4242, since=time.time())
                )
                while len(seen) < 2:  # noqa: ASYNC110 -- the event comes through the loop
                    await anyio.sleep(0.01)
                _flights.land(flight, None)
    finally:
        _flights.land(flight, None)
    assert [e.kind for e in seen] == ["waiting", "waiting"]
    assert seen[1].message.startswith("waiting for another sweep (pid 4242, since ")
