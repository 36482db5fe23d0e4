"""Flights: concurrent resolves share one sweep per key, and no waiter holds a worker thread."""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import threading
import time
import types
from collections import Counter
from pathlib import Path

import anyio
import anyio.lowlevel
import anyio.to_thread
import attrs
import filelock
import pytest
from _clock import jump
from _forking import run_forked
from _small_sweeps import Blocking, small_policy, workload

import chunktune
from chunktune import Decision, ProgressEvent, _flights, _giving_up, _locks
from chunktune._backends import call_soon
from chunktune._events import ProgressCallback
from chunktune._relay import Guarded
from chunktune._threads import wait_for_sweeps
from chunktune.sim import SimulatedWorkload

pytestmark = pytest.mark.anyio

MANY = 64  # more concurrent resolves than anyio's 40 default worker threads
HANG_GUARD_S = 60.0  # not a speed limit: a hang fails the test instead of the suite


async def resolve_all(workloads: list[SimulatedWorkload]) -> tuple[list[Decision], Counter[str]]:
    """Resolve every workload concurrently; the decisions and the sweeps started per key."""
    pol = small_policy()
    decisions: list[Decision] = []
    dones: dict[str, list[ProgressEvent]] = {}

    async def one(w: SimulatedWorkload) -> None:
        def on_progress(event: ProgressEvent) -> None:
            if event.kind == "done":  # one per sweep, told to every task sharing it
                dones.setdefault(w.name, []).append(event)

        decisions.append(await chunktune.resolve(w, policy=pol, on_progress=on_progress))

    with anyio.fail_after(HANG_GUARD_S):
        async with anyio.create_task_group() as tg:
            for w in workloads:
                tg.start_soon(one, w)
    # the tasks sharing a sweep are told the same event: a sweep is one event object
    return decisions, Counter({name: len({id(e) for e in told}) for name, told in dones.items()})


async def test_more_resolves_of_one_key_than_worker_threads_share_one_sweep() -> None:
    """64 concurrent resolves of one cold key all return, after exactly one sweep."""
    w = workload("only")
    decisions, sweeps = await resolve_all([w] * MANY)
    assert len(decisions) == MANY
    assert sweeps == {"only": 1}
    assert Counter(d.source for d in decisions) == {"benchmark": 1, "cache": MANY - 1}
    assert len({d.chunk_size for d in decisions}) == 1


async def test_more_resolves_than_worker_threads_over_many_keys() -> None:
    """64 concurrent resolves over 8 cold keys all return, after one sweep per key."""
    keys = [workload(f"k{i}") for i in range(8)]
    decisions, sweeps = await resolve_all(keys * (MANY // len(keys)))
    assert len(decisions) == MANY
    assert sweeps == {w.name: 1 for w in keys}
    assert Counter(d.source for d in decisions) == {"benchmark": 8, "cache": MANY - 8}


async def test_a_saturated_default_thread_limiter_does_not_starve_resolve() -> None:
    """A trainer holding every token of anyio's default limiter still gets its decision."""
    limiter = anyio.to_thread.current_default_thread_limiter()
    limiter.total_tokens = 1
    gate = threading.Event()
    try:
        with anyio.fail_after(HANG_GUARD_S):
            async with anyio.create_task_group() as tg:
                tg.start_soon(functools.partial(anyio.to_thread.run_sync, gate.wait))
                await anyio.wait_all_tasks_blocked()
                assert limiter.borrowed_tokens == 1
                d = await chunktune.resolve(workload("w"), policy=small_policy())
                assert d.source == "benchmark"
                gate.set()
    finally:
        gate.set()


def test_resolve_sync_from_many_threads_shares_one_sweep_across_loops() -> None:
    """Threads that each run their own loop share one flight: one sweep, the same answer."""
    w = workload("shared")
    pol = small_policy()
    sweeps: list[ProgressEvent] = []
    decisions: list[Decision] = []
    start = threading.Barrier(8)

    def on_progress(event: ProgressEvent) -> None:
        if event.kind == "done":  # one per sweep, told to every thread sharing it
            sweeps.append(event)

    def one() -> None:
        start.wait()
        decisions.append(chunktune.resolve_sync(w, policy=pol, on_progress=on_progress))

    threads = [threading.Thread(target=one) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(HANG_GUARD_S)
    assert len(decisions) == 8
    assert len({id(e) for e in sweeps}) == 1
    assert len({d.chunk_size for d in decisions}) == 1


def _left_on_a_closed_loop(w: SimulatedWorkload, pol: chunktune.Policy) -> _flights.Flight:
    """Start resolving ``w`` on an asyncio loop, then close that loop mid-sweep, task pending."""
    loop = asyncio.new_event_loop()
    task = loop.create_task(chunktune.resolve(w, policy=pol))
    assert isinstance(w, Blocking)
    loop.run_until_complete(asyncio.to_thread(w.blocked.wait, HANG_GUARD_S))
    (flight,) = _flights._flights.values()
    loop.close()  # what asyncio.run would not do: the task stays pending for good
    _left.append(task)  # kept alive: its coroutine never runs again
    return flight


_left: list[object] = []  # tasks of closed loops, kept from the garbage collector


def test_a_flight_left_on_a_closed_loop_is_taken_over_by_the_next_resolve(
    isolated: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its owner's loop closed mid-sweep: a later resolve of the key takes over, no hang."""
    monkeypatch.setattr(_flights, "OWNER_CHECK_S", 0.05)
    costs = workload("x").costs
    pol = small_policy()
    dead = Blocking(costs, nthread=8, name="closed")
    flight = _left_on_a_closed_loop(dead, pol)

    async def again() -> Decision:
        async with anyio.create_task_group() as tg:
            decided: list[Decision] = []

            async def resolve() -> None:
                w = SimulatedWorkload(costs, nthread=8, name="closed")
                decided.append(await chunktune.resolve(w, policy=pol))

            tg.start_soon(resolve)
            with anyio.fail_after(HANG_GUARD_S):
                while not flight.landed:  # noqa: ASYNC110 -- a flight has no event to await
                    await anyio.sleep(0.01)
            assert not dead.release.is_set()  # taken over while the dead sweep still ran
            dead.release.set()  # its thread ends and frees the machine
        return decided[0]

    decision = anyio.run(again)
    assert decision.source == "benchmark"
    assert list(json.loads((isolated / "cache.json").read_text())["entries"]) == [decision.key]


def test_a_sweep_left_on_a_closed_loop_keeps_the_machine_until_its_thread_ends(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Its owner's loop closed mid-sweep: the flight is freed, the sweep lock only by the sweep."""
    monkeypatch.setattr(_flights, "OWNER_CHECK_S", 0.05)
    dead = Blocking(workload("x").costs, nthread=8, name="closed")
    flight = _left_on_a_closed_loop(dead, small_policy())
    deadline = time.monotonic() + HANG_GUARD_S
    while not flight.landed and time.monotonic() < deadline:
        time.sleep(0.01)
    assert flight.landed
    lock = _locks.sweep_lock()
    try:
        assert not lock.try_acquire()  # its probe in flight still runs on the machine
    finally:
        dead.release.set()
    assert wait_for_sweeps(HANG_GUARD_S)
    assert lock.try_acquire()
    lock.release()


def _keys_are_free(isolated: Path) -> bool:
    """Whether another process could take every key lock now."""
    for lock_file in (isolated / "locks").glob("*.lock"):
        other = filelock.FileLock(lock_file)
        try:
            other.acquire(timeout=0)
        except filelock.Timeout:
            return False
        other.release()
    return True


def _free_soon(isolated: Path) -> bool:
    """Wait (a few janitor rounds at most) for every flight to land and its key to be free."""
    deadline = time.monotonic() + HANG_GUARD_S
    while time.monotonic() < deadline:
        if not _flights._flights and _keys_are_free(isolated):
            return True
        time.sleep(0.02)
    return False


@pytest.mark.parametrize("when", ["mid-sweep", "after-the-sweep", "queued-behind-a-sweep"])
def test_a_flight_left_on_a_closed_loop_frees_its_key_with_nobody_asking_again(
    isolated: Path, monkeypatch: pytest.MonkeyPatch, when: str
) -> None:
    """Its loop closed with the owner pending, whatever it was doing: its key is freed."""
    monkeypatch.setattr(_flights, "OWNER_CHECK_S", 0.05)
    costs = workload("x").costs
    pol = small_policy()
    dead = Blocking(costs, nthread=8, name="closed")
    loop = asyncio.new_event_loop()
    tasks = [loop.create_task(chunktune.resolve(dead, policy=pol))]
    loop.run_until_complete(asyncio.to_thread(dead.blocked.wait, HANG_GUARD_S))
    if when == "queued-behind-a-sweep":  # a second key holds its lock, waits for the machine
        queued = SimulatedWorkload(costs, nthread=8, name="queued")
        tasks.append(loop.create_task(chunktune.resolve(queued, policy=pol)))

        def both_hold() -> bool:  # one sweeping, one waiting for the sweep lock
            flights = list(_flights._flights.values())
            return len(flights) == 2 and all(f.held is not None for f in flights)

        deadline = time.monotonic() + HANG_GUARD_S
        while not both_hold() and time.monotonic() < deadline:
            loop.run_until_complete(asyncio.sleep(0.01))
        assert both_hold()
    if when == "after-the-sweep":  # the loop stopped, not closed, while the sweep ended
        dead.release.set()
        assert wait_for_sweeps(HANG_GUARD_S)
    loop.close()  # what asyncio.run would not do: the tasks stay pending for good
    _left.extend(tasks)
    dead.release.set()
    assert _free_soon(isolated)
    assert wait_for_sweeps(HANG_GUARD_S)


@pytest.mark.parametrize("which", ["key", "sweep"])
def test_a_lock_taken_for_an_owner_whose_loop_then_closed_is_freed(
    isolated: Path, monkeypatch: pytest.MonkeyPatch, which: str
) -> None:
    """The lock was taken in a worker thread, the loop closed before the owner resumed."""
    monkeypatch.setattr(_flights, "OWNER_CHECK_S", 0.05)
    pol = small_policy()
    w = workload("window")
    if which == "key":  # its lock file is named by the key: learn it from another cache
        monkeypatch.setenv("CHUNKTUNE_CACHE", str(isolated / "elsewhere" / "cache.json"))
        key = chunktune.resolve_sync(workload("window"), policy=pol).key
        monkeypatch.setenv("CHUNKTUNE_CACHE", str(isolated / "cache.json"))
        path = isolated / "locks" / f"{key}.lock"
        path.parent.mkdir(exist_ok=True)
    else:
        path = isolated / "sweep.lock"
    other = filelock.FileLock(path)  # another holder, while the owner polls
    other.acquire()
    took = threading.Event()
    taking = _locks.Lock.try_acquire

    def slow_to_tell(self: _locks.Lock) -> bool:
        got = taking(self)
        if got and self.path == path and not took.is_set():
            took.set()
            time.sleep(0.3)  # the worker thread is slow to hand the lock back
        return got

    monkeypatch.setattr(_locks.Lock, "try_acquire", slow_to_tell)
    loop = asyncio.new_event_loop()
    _left.append(loop.create_task(chunktune.resolve(w, policy=pol)))
    loop.run_until_complete(asyncio.sleep(0.3))  # the owner polls
    other.release()
    loop.run_until_complete(asyncio.to_thread(took.wait, HANG_GUARD_S))  # a poll took it
    loop.close()  # before the owner ever resumed
    assert _free_soon(isolated)
    probe = filelock.FileLock(path)
    probe.acquire(timeout=HANG_GUARD_S)  # another holder gets it: nothing kept it
    probe.release()
    assert wait_for_sweeps(HANG_GUARD_S)


class Held:
    """A lock that counts its releases."""

    def __init__(self) -> None:
        self.released = 0

    def release(self) -> None:
        self.released += 1


def test_a_lock_released_for_an_abandoned_owner_is_not_its_to_release() -> None:
    """abandon releases the owner's locks once; unclaim then tells the owner they are gone."""
    flight, owner = _flights.board("test-unclaim")
    lock = Held()
    assert owner and flight.claim(lock)  # type: ignore[arg-type]
    _flights.abandon(flight)
    assert lock.released == 1
    assert not flight.unclaim(lock)  # type: ignore[arg-type]


def test_abandoning_a_flight_that_landed_releases_nothing() -> None:
    """An owner that gave up at its hard limit landed; its loop closing later frees no lock."""
    flight, _ = _flights.board("test-landed")
    lock = Held()
    assert flight.claim(lock)  # type: ignore[arg-type]
    _flights.land(flight, None)
    _flights.abandon(flight)
    assert lock.released == 0


def test_abandoning_a_flight_warns_with_its_key_cut_short(caplog: pytest.LogCaptureFixture) -> None:
    """abandon's warning names the flight by the first 12 characters of its key, not all of it."""
    key = "0123456789ab" + "cdef" * 8
    flight, _ = _flights.board(key)
    with caplog.at_level(logging.WARNING, logger="chunktune"):
        _flights.abandon(flight)
    assert "measuring 0123456789ab was left pending" in caplog.text


def test_landing_an_old_flight_again_leaves_the_next_owner_s_flight() -> None:
    """A flight landed late (its abandoned owner unwinding) does not unboard its successor."""
    old, _ = _flights.board("test-successor")
    _flights.land(old, None)
    new, owner = _flights.board("test-successor")
    assert owner and new is not old
    _flights.land(old, None)
    assert _flights.board("test-successor") == (new, False)
    _flights.land(new, None)


async def test_a_wait_on_a_flight_that_already_landed_returns_at_once() -> None:
    """Waiting on a flight that has landed returns its decision at once and leaves no waiter."""
    flight, _ = _flights.board("test-landed-wait")
    _flights.land(flight, None)
    with anyio.fail_after(HANG_GUARD_S):
        assert await flight.wait() is None
    assert flight.waiters == []


def test_a_child_forked_while_the_janitor_runs_starts_one_of_its_own(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The parent's janitor thread is not forked: the child's first flight on a loop starts one."""
    # an earlier test's janitor, still in its round, ends first: ending during this test, it
    # would clear the flag that the patch then restores as set, with no janitor running
    for earlier in threading.enumerate():
        if earlier.name == "chunktune-flights":
            earlier.join(HANG_GUARD_S)
    monkeypatch.setattr(_flights, "_janitor_running", True)  # as while the parent's runs
    assert run_forked(_child_starts_a_janitor, hang_guard_s=HANG_GUARD_S) == 0


def _child_starts_a_janitor() -> None:
    async def board() -> bool:
        flight, owner = _flights.board("test-child-janitor")
        started = any(t.name == "chunktune-flights" for t in threading.enumerate())
        _flights.land(flight, None)
        return owner and started

    raise SystemExit(0 if asyncio.run(board()) else 1)


def test_the_janitor_ends_as_the_last_flight_it_watches_lands(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """No thread of ours outlives the last flight on a loop by a janitor round (a fork after)."""
    for earlier in threading.enumerate():  # an earlier test's, still in its round: this one's own
        if earlier.name == "chunktune-flights":
            earlier.join(HANG_GUARD_S)
    monkeypatch.setattr(_flights, "OWNER_CHECK_S", 3600.0)  # a round longer than any test
    janitors: list[threading.Thread] = []

    async def fly() -> None:
        flight, owner = _flights.board("test-janitor-ends")
        assert owner
        janitors.extend(t for t in threading.enumerate() if t.name == "chunktune-flights")
        _flights.land(flight, None)

    asyncio.run(fly())
    assert len(janitors) == 1
    janitors[0].join(HANG_GUARD_S)
    assert not janitors[0].is_alive()


async def test_what_the_owner_s_caller_does_to_its_decision_never_reaches_a_sharer() -> None:
    """Tasks sharing one sweep each get timings of their own, whoever empties theirs first."""
    pol = small_policy()
    w = workload("edited")
    counts: list[int] = []

    async def one() -> None:
        decision = await chunktune.resolve(w, policy=pol)
        counts.append(len(decision.timings))
        decision.timings.clear()  # at once, before any other task runs

    with anyio.fail_after(HANG_GUARD_S):
        async with anyio.create_task_group() as tg:
            for _ in range(4):
                tg.start_soon(one)
    assert len(counts) == 4 and min(counts) > 0 and len(set(counts)) == 1


def test_a_child_forked_while_the_flights_lock_is_held_boards_and_lands() -> None:
    """A fork while a parent's thread holds the flights' lock leaves the child a free one."""

    def child() -> None:
        flight, owner = _flights.board("test-forked-under-the-lock")
        assert owner
        _flights.land(flight, None)
        assert _flights.board("test-forked-under-the-lock")[1]  # its key is free again

    with _flights._lock:
        status = run_forked(child, hang_guard_s=20)
    assert status == 0


def test_a_child_forked_while_the_janitor_s_wake_up_is_held_lands_its_flights() -> None:
    """A fork while a parent's thread holds the janitor's wake-up leaves the child a free one."""

    async def fly() -> None:
        flight, owner = _flights.board("test-forked-under-the-wake-up")
        assert owner
        _flights.land(flight, None)  # the child's janitor is woken to end

    def child() -> None:
        asyncio.run(fly())

    with _flights._idle._cond:  # type: ignore[attr-defined]  # as a parent thread setting it
        status = run_forked(child, hang_guard_s=20)
    assert status == 0


def test_a_child_forked_while_its_parent_owns_a_flight_owns_that_key_itself() -> None:
    """A flight its parent owned at the fork never lands in the child: the child owns the key."""
    flight, owner = _flights.board("test-forked-mid-flight")
    assert owner

    def child() -> None:
        mine, owner = _flights.board("test-forked-mid-flight")
        assert owner and mine is not flight
        _flights.land(mine, None)

    try:
        status = run_forked(child, hang_guard_s=20)
    finally:
        _flights.land(flight, None)
    assert status == 0


async def test_a_landing_that_fails_still_wakes_every_task_sharing_the_flight(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A bug while landing (the decision's copy fails): the sharers wake, later resolves too."""
    bug = TypeError("cannot copy the decision")

    def evolve(*args: object, **kwargs: object) -> object:
        raise bug

    # the one attrs call landing makes: the sharers' copy of the owner's decision
    monkeypatch.setattr(_flights, "attrs", types.SimpleNamespace(evolve=evolve))
    pol = small_policy()
    w = workload("land-fails")
    decisions: list[Decision] = []

    async def one() -> None:
        decisions.append(await chunktune.resolve(w, policy=pol))

    with caplog.at_level(logging.WARNING, logger="chunktune"), anyio.fail_after(HANG_GUARD_S):
        async with anyio.create_task_group() as tg:
            for _ in range(3):
                tg.start_soon(one)
        later = await chunktune.resolve(w, policy=pol)
    measured = [d for d in decisions if d.source == "benchmark"]
    assert len(measured) == 1 and later.chunk_size == measured[0].chunk_size
    assert sorted(d.source for d in decisions) == ["benchmark", "cache", "cache"]
    assert later.source == "cache"
    assert bug in [r.exc_info[1] for r in caplog.records if r.exc_info]
    # the key cut to its first 12 characters, as every other line of chunktune's names it
    doing = f"sharing the decision on {measured[0].key[:12]} with the tasks waiting for it"
    assert any(f"while {doing} (TypeError)" in r.getMessage() for r in caplog.records)


def test_a_lock_that_fails_to_release_for_an_abandoned_owner_still_frees_its_key(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """abandon lands the flight though releasing a lock raised: the key's next resolve owns it."""
    bug = OSError("release failed")

    class Broken(Held):
        def release(self) -> None:
            raise bug

    flight, _ = _flights.board("test-release-fails")
    assert flight.claim(Broken())  # type: ignore[arg-type]
    with caplog.at_level(logging.WARNING, logger="chunktune"):
        _flights.abandon(flight)
    successor, owner = _flights.board("test-release-fails")
    assert owner and successor is not flight and flight.landed
    _flights.land(successor, None)
    assert [r.exc_info[1] for r in caplog.records if r.exc_info] == [bug]
    assert "while releasing a lock of the task measuring test-release (OSError)" in caplog.text


def test_a_janitor_whose_look_at_one_loop_fails_still_frees_the_other_flights(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """An owner_gone probe raising is logged as a bug; the janitor goes on to the next flight."""
    for earlier in threading.enumerate():  # an earlier test's janitor: this test's is its own
        if earlier.name == "chunktune-flights":
            earlier.join(HANG_GUARD_S)
    monkeypatch.setattr(_flights, "OWNER_CHECK_S", 0.01)
    bug = TypeError("cannot probe the loop")
    looks: list[str] = []

    def failing_once() -> bool:
        looks.append("failing")
        if len(looks) == 1:
            raise bug
        return True

    failing, _ = _flights.board("test-janitor-probe-fails")
    closed, _ = _flights.board("test-janitor-probe-next")
    failing.owner_gone, closed.owner_gone = failing_once, lambda: True
    with caplog.at_level(logging.WARNING, logger="chunktune"):
        _flights._janitor()  # returns once no flight is left to watch
    assert closed.landed and failing.landed and looks == ["failing", "failing"]
    assert [r.exc_info[1] for r in caplog.records if r.exc_info] == [bug]
    assert "while checking the loop of the task measuring test-janitor (TypeError)" in caplog.text


class _Asleep:
    """A waiter's event, as land reaches it: only its ``set`` is taken."""

    def set(self) -> None:
        raise AssertionError("woken other than through call_soon")


def _assert_free(key: str, landed: _flights.Flight) -> None:
    """The next task to board ``key`` owns a new flight (and lands it at once)."""
    successor, owner = _flights.board(key)
    assert owner and successor is not landed
    _flights.land(successor, None)


def _waking_fails_at_first(monkeypatch: pytest.MonkeyPatch, exc: BaseException) -> list[object]:
    """Waking the sharer "first" raises ``exc``; the list fills with the others woken."""
    woken: list[object] = []

    def call_soon(token: object, func: object) -> None:
        if token == "first":
            raise exc
        woken.append(token)

    monkeypatch.setattr(_flights, "call_soon", call_soon)
    return woken


def test_a_waiter_that_cannot_be_woken_leaves_the_others_woken(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Waking one sharer raising is logged as a bug: the flight lands and the others wake."""
    bug = RuntimeError("the loop is gone")
    woken = _waking_fails_at_first(monkeypatch, bug)
    flight, _ = _flights.board("test-wake-fails")
    flight.waiters = [("first", _Asleep()), ("second", _Asleep())]  # type: ignore[list-item]
    with caplog.at_level(logging.WARNING, logger="chunktune"):
        _flights.land(flight, None)
    assert woken == ["second"] and flight.landed
    assert _flights.board("test-wake-fails")[1]  # the key is free: the next task owns it
    assert [r.exc_info[1] for r in caplog.records if r.exc_info] == [bug]
    assert "while waking a task waiting for test-wake-fa (RuntimeError)" in caplog.text
    _flights.land(_flights._flights["test-wake-fails"], None)


def test_an_interrupt_while_releasing_an_abandoned_owner_s_lock_still_lands_its_flight() -> None:
    """Ctrl-C as abandon releases a lock reaches the caller, and the flight has landed."""
    stop = KeyboardInterrupt()

    class Interrupted(Held):
        def release(self) -> None:
            raise stop

    flight, _ = _flights.board("test-release-interrupted")
    assert flight.claim(Interrupted())  # type: ignore[arg-type]
    with pytest.raises(KeyboardInterrupt):
        _flights.abandon(flight)
    successor, owner = _flights.board("test-release-interrupted")
    assert owner and successor is not flight and flight.landed
    _flights.land(successor, None)


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_only_an_owner_on_asyncio_is_watched_for_its_loop_closing(backend: str) -> None:
    """An owner on asyncio is watched (its loop open); on trio, which leaves no task, it is not."""

    async def main() -> tuple[bool, bool, bool]:
        flight, owner = _flights.board("a key owned on " + backend)
        try:
            with _flights._lock:
                watched = flight in _flights._watched()
            return owner, watched, flight.owner_gone()
        finally:
            _flights.land(flight, None)

    owner, watched, gone = anyio.run(main, backend=backend)
    assert (owner, watched, gone) == (True, backend == "asyncio", False)


def _join_earlier_janitors() -> None:
    """Wait out an earlier test's janitor, still in its round: the next one is this test's."""
    for earlier in threading.enumerate():
        if earlier.name == "chunktune-flights":
            earlier.join(HANG_GUARD_S)


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_owners_on_asyncio_share_one_daemon_janitor_and_owners_on_trio_start_none(
    backend: str,
) -> None:
    """Two owners on asyncio start one janitor, a daemon no exit waits for; on trio, none."""
    _join_earlier_janitors()

    async def main() -> list[bool]:
        flights = [_flights.board(f"janitors on {backend} {n}")[0] for n in range(2)]
        try:
            return [t.daemon for t in threading.enumerate() if t.name == "chunktune-flights"]
        finally:
            for flight in flights:
                _flights.land(flight, None)

    assert anyio.run(main, backend=backend) == ([True] if backend == "asyncio" else [])


class _NoThreads:
    """A thread that cannot start, as in a process out of threads."""

    def __init__(self, **kwargs: object) -> None:
        pass

    def start(self) -> None:
        raise RuntimeError("can't start new thread")


def test_a_janitor_that_could_not_start_is_started_by_the_next_owner_on_asyncio(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """An owner boarded with no thread to spare gets no janitor; the next one starts it."""
    _join_earlier_janitors()

    async def owned(key: str) -> bool:
        flight, owner = _flights.board(key)
        started = any(t.name == "chunktune-flights" for t in threading.enumerate())
        _flights.land(flight, None)
        return owner and started

    monkeypatch.setattr(_flights, "threading", types.SimpleNamespace(Thread=_NoThreads))
    with caplog.at_level(logging.DEBUG, logger="chunktune"):
        assert not asyncio.run(owned("test-no-thread-for-the-janitor"))
    said = "chunktune: cannot start the flights' janitor (can't start new thread)"
    assert said in caplog.messages
    monkeypatch.undo()
    assert asyncio.run(owned("test-a-thread-for-the-janitor-again"))


def test_ctrl_c_as_a_decision_is_copied_for_its_sharers_lands_the_flight_then_reaches_the_owner(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Ctrl-C in landing's copy: the sharers wake with none, the key is free, then it is raised."""
    # the flight once stayed boarded: every later resolve of its key in the process (a
    # notebook's, after the interrupt) waited for it for good
    stop = KeyboardInterrupt()

    def evolve(*args: object, **kwargs: object) -> object:
        raise stop

    woken: list[object] = []
    monkeypatch.setattr(_flights, "attrs", types.SimpleNamespace(evolve=evolve))
    monkeypatch.setattr(_flights, "call_soon", lambda token, func: woken.append(token))
    flight, _ = _flights.board("test-copy-interrupted")
    flight.waiters = [("sharer", _Asleep())]  # type: ignore[list-item]
    with pytest.raises(KeyboardInterrupt) as raised:
        _flights.land(flight, _giving_up.gave_up_keying(1.0, 3, "balanced"))
    assert raised.value is stop and woken == ["sharer"]
    assert flight.landed and flight.decision is None
    _assert_free("test-copy-interrupted", flight)


def test_ctrl_c_as_one_sharer_is_woken_still_wakes_the_others_then_reaches_the_owner(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Ctrl-C while waking one sharer: the sharers after it are woken, then it is raised."""
    # the sharers after it once slept for good: taken off the flight, nothing woke them
    stop = KeyboardInterrupt()
    woken = _waking_fails_at_first(monkeypatch, stop)
    flight, _ = _flights.board("test-wake-interrupted")
    sharers = [(token, _Asleep()) for token in ("first", "second", "third")]
    flight.waiters = sharers  # type: ignore[assignment]
    with pytest.raises(KeyboardInterrupt) as raised:
        _flights.land(flight, None)
    assert raised.value is stop and woken == ["second", "third"] and flight.landed
    _assert_free("test-wake-interrupted", flight)


def test_the_janitor_looks_at_no_owner_s_loop_before_its_round_ends(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A janitor waits out its round (OWNER_CHECK_S) before it looks at an owner's loop."""
    _join_earlier_janitors()
    monkeypatch.setattr(_flights, "OWNER_CHECK_S", 3600.0)  # a round longer than any test
    looks: list[str] = []

    def look() -> bool:
        looks.append("look")
        return False

    async def fly() -> None:
        flight, owner = _flights.board("test-janitor-round")
        assert owner
        flight.owner_gone = look
        await asyncio.sleep(0.1)  # a janitor that did not wait would look meanwhile
        _flights.land(flight, None)

    asyncio.run(fly())
    assert looks == []


async def test_a_wait_on_a_flight_that_landed_with_a_decision_returns_that_decision() -> None:
    """A task that comes to wait after the owner landed gets its decision at once, not none."""
    flight, _ = _flights.board("test-landed-with-a-decision")
    decision = _giving_up.gave_up_keying(1.0, 3, "balanced")
    _flights.land(flight, decision)
    with anyio.fail_after(HANG_GUARD_S):
        assert await flight.wait() == decision


async def test_a_task_that_stops_waiting_for_a_flight_is_no_longer_its_waiter() -> None:
    """A sharer cancelled (its hard limit, say) leaves the flight's waiters as it goes."""
    flight, _ = _flights.board("test-waiter-leaves")
    try:
        with anyio.move_on_after(0.01):
            await flight.wait()
        assert flight.waiters == []
    finally:
        _flights.land(flight, None)


# Tasks sharing a sweep get its progress, each on its own loop


def _gated(name: str) -> Blocking:
    """A sweep that can be caught mid-way (its third call blocks until released)."""
    return Blocking(workload(name).costs, nthread=8, name=name)


def _the_flight() -> _flights.Flight:
    """This test's one flight in the air."""
    (flight,) = _flights._flights.values()
    return flight


async def _caught(w: Blocking) -> None:
    """Wait until the sweep of ``w`` is blocked mid-way."""
    assert await anyio.to_thread.run_sync(w.blocked.wait, HANG_GUARD_S)


async def _joined(sharers: int) -> None:
    """Wait until ``sharers`` tasks wait for the flight in the air."""
    with anyio.fail_after(HANG_GUARD_S):
        while len(_the_flight().waiters) < sharers:  # noqa: ASYNC110 -- no event to await
            await anyio.sleep(0.01)


def _assert_shared(owner: list[ProgressEvent], sharer: list[ProgressEvent]) -> None:
    """The sharer was told it shares a sweep, then got the owner's events from there to done."""
    assert sharer, "the sharer got no event"
    joined, *rest = sharer
    assert joined.kind == "waiting" and "sharing its sweep" in joined.message
    assert len(rest) >= 2 and rest[-1].kind == "done"
    assert all(a is b for a, b in zip(rest, owner[-len(rest) :], strict=True))
    assert "probe" in {e.kind for e in rest}
    assert not any("sharing" in e.message for e in owner)


async def test_two_tasks_on_one_loop_each_see_the_shared_sweep_with_their_own_callback() -> None:
    """A task sharing another's sweep on the same loop gets its events in its own callback."""
    w, pol = _gated("one loop"), small_policy()
    seen: dict[str, list[ProgressEvent]] = {"owner": [], "sharer": []}
    decided: dict[str, Decision] = {}

    async def one(who: str) -> None:
        decided[who] = await chunktune.resolve(w, policy=pol, on_progress=seen[who].append)

    try:
        with anyio.fail_after(HANG_GUARD_S):
            async with anyio.create_task_group() as tg:
                tg.start_soon(one, "owner")
                await _caught(w)
                tg.start_soon(one, "sharer")
                await _joined(1)
                w.release.set()
    finally:
        w.release.set()
    assert (decided["owner"].source, decided["sharer"].source) == ("benchmark", "cache")
    _assert_shared(seen["owner"], seen["sharer"])


def _resolved_on(runner: str, w: Blocking, pol: chunktune.Policy, cb: ProgressCallback) -> Decision:
    """``w`` resolved by ``resolve_sync`` (its own asyncio loop) or by ``resolve`` on trio."""
    if runner == "sync":
        return chunktune.resolve_sync(w, policy=pol, on_progress=cb)
    call = functools.partial(chunktune.resolve, w, policy=pol, on_progress=cb)
    return anyio.run(call, backend="trio")


@pytest.mark.parametrize(
    ("owner_runner", "sharer_runner"),
    [
        pytest.param("sync", "sync", id="resolve_sync-both"),
        pytest.param("sync", "trio", id="sharer-on-trio"),
        pytest.param("trio", "sync", id="owner-on-trio"),
    ],
)
def test_callers_in_two_threads_each_see_the_shared_sweep_on_their_own_thread(
    owner_runner: str, sharer_runner: str
) -> None:
    """Two threads, a loop each, share a sweep: each callback gets its events on its thread."""
    w, pol = _gated("two threads"), small_policy()
    seen: dict[str, list[tuple[int, ProgressEvent]]] = {"owner": [], "sharer": []}
    threads_of: dict[str, int] = {}
    decided: dict[str, Decision] = {}

    def one(who: str, runner: str) -> None:
        threads_of[who] = threading.get_ident()

        def on_progress(event: ProgressEvent) -> None:
            seen[who].append((threading.get_ident(), event))

        decided[who] = _resolved_on(runner, w, pol, on_progress)

    owner = threading.Thread(target=one, args=("owner", owner_runner))
    sharer = threading.Thread(target=one, args=("sharer", sharer_runner))
    try:
        owner.start()
        assert w.blocked.wait(HANG_GUARD_S)
        sharer.start()
        deadline = time.monotonic() + HANG_GUARD_S
        while not _the_flight().waiters and time.monotonic() < deadline:
            time.sleep(0.01)
    finally:
        w.release.set()
        owner.join(HANG_GUARD_S)
        sharer.join(HANG_GUARD_S)
    assert (decided["owner"].source, decided["sharer"].source) == ("benchmark", "cache")
    for who in ("owner", "sharer"):
        assert {thread for thread, _ in seen[who]} == {threads_of[who]}
    _assert_shared([e for _, e in seen["owner"]], [e for _, e in seen["sharer"]])


@pytest.mark.parametrize(
    "exc",
    [
        pytest.param(ValueError("the progress bar broke"), id="error"),
        pytest.param(SystemExit(3), id="exit"),
    ],
)
async def test_a_raising_sharer_callback_leaves_the_owner_and_the_other_sharer_intact(
    exc: BaseException, caplog: pytest.LogCaptureFixture
) -> None:
    """A sharer's callback that raises ends at most its own wait: the sweep and others go on."""
    w, pol = _gated("raising sharer"), small_policy()
    seen: dict[str, list[ProgressEvent]] = {"owner": [], "other": []}
    decided: dict[str, Decision] = {}
    calls: list[ProgressEvent] = []
    raised: list[BaseException] = []

    def raising(event: ProgressEvent) -> None:
        calls.append(event)
        raise exc

    async def one(who: str) -> None:
        decided[who] = await chunktune.resolve(w, policy=pol, on_progress=seen[who].append)

    async def raising_one() -> None:
        try:
            decided["raising"] = await chunktune.resolve(w, policy=pol, on_progress=raising)
        except SystemExit as exit_:
            raised.append(exit_)

    try:
        with caplog.at_level(logging.WARNING, logger="chunktune"), anyio.fail_after(HANG_GUARD_S):
            async with anyio.create_task_group() as tg:
                tg.start_soon(one, "owner")
                await _caught(w)
                tg.start_soon(raising_one)
                if isinstance(exc, Exception):
                    await _joined(1)
                else:  # it leaves as it is told that it shares the sweep
                    while not raised:  # noqa: ASYNC110 -- no event to await
                        await anyio.sleep(0.01)
                tg.start_soon(one, "other")
                await _joined(2 if isinstance(exc, Exception) else 1)
                w.release.set()
    finally:
        w.release.set()
    assert (decided["owner"].source, decided["other"].source) == ("benchmark", "cache")
    _assert_shared(seen["owner"], seen["other"])
    if isinstance(exc, Exception):  # logged once, and the sharer got every event all the same
        assert decided["raising"].source == "cache" and len(calls) == len(seen["other"])
        assert len([r for r in caplog.records if "on_progress raised" in r.getMessage()]) == 1
    else:  # the sharer's to have: raised to it alone, and nothing more is told to it
        assert raised == [exc] and "raising" not in decided and len(calls) == 1


@pytest.mark.parametrize("how", ["cancelled", "hard_limit"])
@pytest.mark.jumps
async def test_a_sharer_that_stops_waiting_gets_no_event_after(how: str) -> None:
    """A sharer cancelled, or past its own hard_limit_s, is told nothing of the sweep after."""
    w, pol = _gated("leaving sharer"), small_policy()
    owner_seen: list[ProgressEvent] = []
    seen: list[ProgressEvent] = []
    decided: list[Decision] = []
    left = anyio.Event()
    scope = anyio.CancelScope()

    async def sharer() -> None:
        limited = (
            attrs.evolve(pol, time_budget_s=1.0, hard_limit_s=1.0) if how == "hard_limit" else pol
        )
        with scope:
            decided.append(await chunktune.resolve(w, policy=limited, on_progress=seen.append))
        left.set()

    try:
        with anyio.fail_after(HANG_GUARD_S):
            async with anyio.create_task_group() as tg:
                tg.start_soon(
                    functools.partial(
                        chunktune.resolve, w, policy=pol, on_progress=owner_seen.append
                    )
                )
                await _caught(w)
                tg.start_soon(sharer)
                await _joined(1)
                if how == "cancelled":
                    scope.cancel()
                else:
                    await jump(1.0)  # the sharer's limit, while it waits on the flight
                await left.wait()
                assert len(seen) == 1 and "sharing its sweep" in seen[0].message
                w.release.set()
    finally:
        w.release.set()
    assert len(seen) == 1 and owner_seen[-1].kind == "done"
    if how == "hard_limit":
        assert [d.source for d in decided] == ["fallback"]
    else:
        assert decided == [] and scope.cancelled_caught


async def test_a_sharer_sees_the_sweep_of_an_owner_without_a_callback() -> None:
    """The owner's caller wants no events; a task sharing its sweep that does gets them."""
    w, pol = _gated("silent owner"), small_policy()
    seen: list[ProgressEvent] = []
    try:
        with anyio.fail_after(HANG_GUARD_S):
            async with anyio.create_task_group() as tg:
                tg.start_soon(functools.partial(chunktune.resolve, w, policy=pol))
                await _caught(w)
                tg.start_soon(
                    functools.partial(chunktune.resolve, w, policy=pol, on_progress=seen.append)
                )
                await _joined(1)
                w.release.set()
    finally:
        w.release.set()
    assert seen and seen[0].kind == "waiting" and "sharing its sweep" in seen[0].message
    assert seen[-1].kind == "done" and "probe" in {e.kind for e in seen}


@pytest.mark.parametrize("passed", ["function", "bound method"])
async def test_one_function_passed_to_the_owner_and_a_sharer_gets_each_event_once(
    passed: str,
) -> None:
    """A callback the owner's task passed too is not called again for a sharing task."""
    w, pol = _gated(f"one callback, {passed}"), small_policy()
    seen: list[ProgressEvent] = []

    def on_event(event: ProgressEvent) -> None:
        seen.append(event)

    def callback() -> ProgressCallback:
        return on_event if passed == "function" else seen.append  # a new bound method each time

    try:
        with anyio.fail_after(HANG_GUARD_S):
            async with anyio.create_task_group() as tg:
                tg.start_soon(
                    functools.partial(chunktune.resolve, w, policy=pol, on_progress=callback())
                )
                await _caught(w)
                tg.start_soon(
                    functools.partial(chunktune.resolve, w, policy=pol, on_progress=callback())
                )
                await _joined(1)
                w.release.set()
    finally:
        w.release.set()
    assert len({id(e) for e in seen}) == len(seen), "an event came twice"
    assert [e.kind for e in seen].count("done") == 1 and "probe" in {e.kind for e in seen}
    assert not any("sharing its sweep" in e.message for e in seen)


async def test_cancelling_the_measuring_task_leaves_its_sharers_to_measure_the_key_anew() -> None:
    """The owner's cancel raises in the owner alone: one sharer measures anew, one shares it."""
    w, pol = _gated("owner cancelled"), small_policy()
    owner = anyio.CancelScope()
    decided: list[Decision] = []

    async def owning() -> None:
        with owner:
            await chunktune.resolve(w, policy=pol)

    async def sharing() -> None:
        decided.append(await chunktune.resolve(w, policy=pol))

    try:
        with anyio.fail_after(HANG_GUARD_S):
            async with anyio.create_task_group() as tg:
                tg.start_soon(owning)
                await _caught(w)
                tg.start_soon(sharing)
                tg.start_soon(sharing)
                await _joined(2)
                owner.cancel()
                w.release.set()
    finally:
        w.release.set()
    assert owner.cancelled_caught
    assert sorted(d.source for d in decided) == ["benchmark", "cache"]
    (shared,) = [d for d in decided if d.source == "cache"]
    assert shared.reason.startswith("shared a concurrent sweep: ")
    assert "Cancelling the task that measures does\n  not cancel those sharing its sweep" in _README


_README = (Path(__file__).resolve().parent.parent / "README.md").read_text()


async def test_one_function_passed_to_two_sharers_follows_the_one_still_waiting() -> None:
    """Two sharers' one callback: each event once, and still told once the first has left."""
    w, pol = _gated("two sharers, one callback"), small_policy()
    seen: list[ProgressEvent] = []
    first = anyio.CancelScope()

    async def first_sharer() -> None:
        with first:
            await chunktune.resolve(w, policy=pol, on_progress=seen.append)

    try:
        with anyio.fail_after(HANG_GUARD_S):
            async with anyio.create_task_group() as tg:
                tg.start_soon(functools.partial(chunktune.resolve, w, policy=pol))
                await _caught(w)
                tg.start_soon(first_sharer)
                await _joined(1)
                tg.start_soon(
                    functools.partial(chunktune.resolve, w, policy=pol, on_progress=seen.append)
                )
                await _joined(2)
                first.cancel()
                with anyio.fail_after(HANG_GUARD_S):
                    while len(_the_flight().waiters) > 1:  # noqa: ASYNC110 -- no event to await
                        await anyio.sleep(0.01)
                w.release.set()
    finally:
        w.release.set()
    assert first.cancelled_caught
    assert len({id(e) for e in seen}) == len(seen), "an event came twice"
    assert [e.message for e in seen].count(_flights.SHARING) == 1
    assert seen[-1].kind == "done" and "probe" in {e.kind for e in seen}
    assert "only where it was not getting the sweep's events already" in _README


def test_a_sharer_whose_loop_was_closed_is_called_no_more() -> None:
    """A sharer left pending on an asyncio loop that was closed gets no call from the sweep."""
    w, pol = _gated("closed sharer"), small_policy()
    seen: list[ProgressEvent] = []
    decided: list[Decision] = []
    owner = threading.Thread(target=lambda: decided.append(chunktune.resolve_sync(w, policy=pol)))
    loop = asyncio.new_event_loop()
    try:
        owner.start()
        assert w.blocked.wait(HANG_GUARD_S)
        task = loop.create_task(chunktune.resolve(w, policy=pol, on_progress=seen.append))
        _left.append(task)  # kept alive: its coroutine never runs again
        loop.run_until_complete(_joined(1))
        loop.close()  # the sharer stays pending for good
    finally:
        w.release.set()
        owner.join(HANG_GUARD_S)
    assert [d.source for d in decided] == ["benchmark"]
    assert len(seen) == 1 and "sharing its sweep" in seen[0].message


def test_a_sharer_callback_that_blocks_holds_up_neither_the_sweep_nor_its_owner() -> None:
    """A sharer's callback stuck on its own loop: the owner's sweep ends and returns meanwhile."""
    w, pol = _gated("stuck sharer"), small_policy()
    owner_returned = threading.Event()
    decided: dict[str, Decision] = {}
    calls: list[ProgressEvent] = []

    def stuck(event: ProgressEvent) -> None:
        calls.append(event)
        owner_returned.wait(HANG_GUARD_S)  # its loop, and so its thread, is stuck till then

    def owner() -> None:
        decided["owner"] = chunktune.resolve_sync(w, policy=pol)
        owner_returned.set()

    def sharer() -> None:
        decided["sharer"] = chunktune.resolve_sync(w, policy=pol, on_progress=stuck)

    threads = [threading.Thread(target=owner), threading.Thread(target=sharer)]
    try:
        threads[0].start()
        assert w.blocked.wait(HANG_GUARD_S)
        threads[1].start()
        deadline = time.monotonic() + HANG_GUARD_S
        while not calls and time.monotonic() < deadline:
            time.sleep(0.01)
    finally:
        w.release.set()
        for thread in threads:
            thread.join(HANG_GUARD_S)
    assert owner_returned.is_set() and decided["owner"].source == "benchmark"
    assert decided["sharer"].source == "cache" and calls[-1].kind == "done"


@pytest.mark.parametrize("wrapped", [False, True], ids=["plain", "guarded-as-resolve-wraps"])
async def test_an_event_a_leaving_sharer_was_to_carry_reaches_the_next_with_its_callback(
    wrapped: bool,
) -> None:
    """An event posted for a callback to a sharer that leaves first is told to its next sharer."""
    flight, owner = _flights.board(f"test-handover-{wrapped}")
    assert owner
    seen: list[ProgressEvent] = []

    def callback() -> ProgressCallback:
        return Guarded(seen.append) if wrapped else seen.append  # each resolve wraps its own

    first, first_left = anyio.CancelScope(), anyio.Event()

    async def first_sharer() -> None:
        with first:
            await flight.wait(callback())
        first_left.set()

    try:
        with anyio.fail_after(HANG_GUARD_S):
            async with anyio.create_task_group() as tg:
                tg.start_soon(first_sharer)
                while len(flight.waiters) < 1:  # noqa: ASYNC110 -- no event to await
                    await anyio.sleep(0.01)
                tg.start_soon(flight.wait, callback())
                while len(flight.waiters) < 2:  # noqa: ASYNC110 -- no event to await
                    await anyio.sleep(0.01)
                # the first sharer's wait ends before its loop handles the event told now
                first.cancel()
                flight.tell(ProgressEvent(kind="probe", chunk_size=4))
                await first_left.wait()
                while "probe" not in {e.kind for e in seen}:  # noqa: ASYNC110 -- nor here
                    await anyio.sleep(0.01)
                _flights.land(flight, None)
    finally:
        _flights.land(flight, None)
    assert first.cancelled_caught and [e.kind for e in seen] == ["waiting", "probe"]


async def test_a_partial_made_for_each_sharer_is_called_for_each_as_the_readme_says() -> None:
    """Two partials of one function are two callbacks: each sharer's is told every event."""
    flight, owner = _flights.board("test-partials")
    assert owner
    seen: list[ProgressEvent] = []
    try:
        with anyio.fail_after(HANG_GUARD_S):
            async with anyio.create_task_group() as tg:
                for _ in range(2):
                    tg.start_soon(flight.wait, functools.partial(seen.append))
                while len(flight.waiters) < 2:  # noqa: ASYNC110 -- no event to await
                    await anyio.sleep(0.01)
                flight.tell(ProgressEvent(kind="probe", chunk_size=4))
                while len(seen) < 4:  # noqa: ASYNC110 -- the events come through the loop
                    await anyio.sleep(0.01)
                _flights.land(flight, None)
    finally:
        _flights.land(flight, None)
    assert sorted(e.kind for e in seen) == ["probe", "probe", "waiting", "waiting"]


async def _flushed() -> None:
    """Wait until this loop has run every callback posted to it so far (they run in order)."""
    done = anyio.Event()
    call_soon(anyio.lowlevel.current_token(), done.set)
    await done.wait()


async def test_an_event_a_tell_posts_to_a_sharer_that_has_left_reaches_it_no_more() -> None:
    """A tell that took a sharer's relay just before the sharer left: its event reaches nobody."""
    flight, owner = _flights.board("test-posted-after-it-left")
    assert owner
    seen: list[ProgressEvent] = []
    scope, left = anyio.CancelScope(), anyio.Event()

    async def sharer() -> None:
        with scope:
            await flight.wait(seen.append)
        left.set()

    try:
        with anyio.fail_after(HANG_GUARD_S):
            async with anyio.create_task_group() as tg:
                tg.start_soon(sharer)
                while not flight.waiters:  # noqa: ASYNC110 -- no event to await
                    await anyio.sleep(0.01)
                (channel,) = flight.channels
                (relay,) = channel.relays  # the sharer's relay, as its channel holds it
                scope.cancel()
                await left.wait()
                assert not flight.waiters and flight.channels == []  # nor is it told again
                assert relay.post(ProgressEvent(kind="probe", chunk_size=4))
                await _flushed()
                _flights.land(flight, None)
    finally:
        _flights.land(flight, None)
    assert scope.cancelled_caught and [e.kind for e in seen] == ["waiting"]


def _failing_thread(error: type[BaseException]) -> type:
    """A thread class whose start raises ``error`` (no memory for its state, a Ctrl-C)."""

    class Failing:
        def __init__(self, **kwargs: object) -> None:
            pass

        def start(self) -> None:
            raise error

    return Failing


@pytest.mark.parametrize("error", [MemoryError, KeyboardInterrupt])
def test_a_janitor_start_that_raises_leaves_no_flight_without_an_owner(
    monkeypatch: pytest.MonkeyPatch, error: type[BaseException]
) -> None:
    """A MemoryError or Ctrl-C starting the janitor is raised, the key unboarded: boards again."""
    _join_earlier_janitors()
    key = "test-no-memory-for-the-janitor"

    async def board() -> bool:
        flight, owner = _flights.board(key)
        _flights.land(flight, None)
        return owner

    monkeypatch.setattr(_flights, "threading", types.SimpleNamespace(Thread=_failing_thread(error)))
    with pytest.raises(error):
        asyncio.run(board())
    monkeypatch.undo()
    assert key not in _flights._flights
    assert asyncio.run(board())
