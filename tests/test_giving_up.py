"""Giving up at hard_limit_s: the owner's watch tells its waits and says where it stood."""

from __future__ import annotations

import re
import time
from pathlib import Path

import anyio
import pytest

from chunktune import ProgressEvent, _giving_up, _lock_note, _locks

pytestmark = pytest.mark.anyio


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
