"""A shared function's channel where posting to a carrier's loop fails (mutation round 47).

A post that raises is chunktune's bug: it is logged, that carrier is sent nothing more,
and the queue goes on to the next sharer that passed the function. A carrier's loop is
made to fail by giving its relay a loop token whose posting raises; every other part is
real (flights, channels, relays, the test's own loop).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import threading
from collections.abc import Callable

import anyio
import anyio.lowlevel
import anyio.to_thread
import pytest

from chunktune import Decision, ProgressEvent, _flights
from chunktune._backends import call_soon
from chunktune._channel import Channel
from chunktune._relay import Guarded, Relay

pytestmark = pytest.mark.anyio

HANG_GUARD_S = 60.0  # not a speed limit: a hang fails the test instead of the suite
BUG = "a bug in chunktune"


class _FailingLoop:
    """A loop token (trio's kind) whose posting raises, as a bug in posting would.

    ``first`` runs once, just before the first post raises (as a concurrent leave would).
    """

    def __init__(self, first: Callable[[], None] | None = None) -> None:
        self.tries = 0
        self.first = first

    def run_sync_soon(self, callback: Callable[[], None]) -> None:
        self.tries += 1
        if self.first is not None:
            first, self.first = self.first, None
            first()
        raise ValueError("cannot post to this loop")


class _EndedLoop:
    """A loop token whose loop has ended: posting says so (trio's RunFinishedError)."""

    def __init__(self) -> None:
        self.tries = 0

    def run_sync_soon(self, callback: Callable[[], None]) -> None:
        self.tries += 1
        raise RuntimeError("the run has finished")


def _numbered(n: int) -> ProgressEvent:
    """The n-th event of a test's stream (its number in ``round``)."""
    return ProgressEvent(kind="probe", round=n)


def _numbers(seen: list[ProgressEvent]) -> list[int]:
    """The numbers of the numbered events seen, in the order seen."""
    return [e.round for e in seen if e.kind == "probe"]


def _bugs(caplog: pytest.LogCaptureFixture) -> list[str]:
    """The messages logged as chunktune's own bug."""
    return [r.getMessage() for r in caplog.records if BUG in r.getMessage()]


async def _flushed() -> None:
    """Wait until this loop has run every callback posted to it so far (they run in order)."""
    done = anyio.Event()
    assert call_soon(anyio.lowlevel.current_token(), done.set)
    with anyio.fail_after(HANG_GUARD_S):
        await done.wait()


def _relay(seen: list[ProgressEvent], token: object | None = None) -> Relay:
    """A sharer's relay to ``seen.append``, on ``token`` (default: this task's loop)."""
    here = anyio.lowlevel.current_token() if token is None else token
    return Relay(Guarded(seen.append), here, threading.Event())


def _leave(channel: Channel, relay: Relay) -> None:
    """As a sharer's wait ends: its relay stopped, then out of the channel."""
    relay.stop.set()
    channel.leave(relay)


async def test_a_sharer_whose_post_fails_is_logged_dropped_and_the_next_sharer_is_told(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A carrier failing to post: logged once as a bug (key cut to 12), dropped; next told all."""
    flight, owner = _flights.board("test-post-fails-0123456789")
    assert owner
    seen: list[ProgressEvent] = []
    broken = _FailingLoop()
    try:
        with anyio.fail_after(HANG_GUARD_S):
            async with anyio.create_task_group() as tg:
                for n in (1, 2):  # one after the other: the first carries
                    tg.start_soon(flight.wait, Guarded(seen.append))
                    while len(flight.waiters) < n:  # noqa: ASYNC110 -- no event to await
                        await anyio.sleep(0.01)
                (channel,) = flight.channels
                first, second = channel.relays
                monkeypatch.setattr(first, "token", broken)
                with caplog.at_level(logging.WARNING, logger="chunktune"):
                    for n in range(3):
                        flight.tell(_numbered(n))
                    await _flushed()
                    assert _numbers(seen) == [0, 1, 2]
                    assert channel.relays == [second]
                _flights.land(flight, None)
    finally:
        _flights.land(flight, None)
    assert broken.tries == 1
    assert [e.kind for e in seen] == ["waiting", "probe", "probe", "probe"]
    want = "while telling a task sharing test-post-fa of the sweep's progress (ValueError)"
    assert len(_bugs(caplog)) == 1 and want in _bugs(caplog)[0]


async def test_a_sharer_dropped_by_a_failed_post_leaves_without_disturbing_the_next(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A dropped carrier leaving raises nothing; the next still carries, the dropped one never."""
    channel = Channel(print, "test-key")
    seen: list[ProgressEvent] = []
    broken = _FailingLoop()
    dropped, carrier = _relay(seen, broken), _relay(seen)
    assert channel.join(dropped) and not channel.join(carrier)
    with caplog.at_level(logging.WARNING, logger="chunktune"):
        channel.send(_numbered(0))
        _leave(channel, dropped)  # its task leaves after its relay was dropped
        channel.send(_numbered(1))
        await _flushed()
        assert _numbers(seen) == [0, 1]
        assert channel.relays == [carrier]
        _leave(channel, carrier)
        channel.send(_numbered(2))  # nobody waits: it reaches nobody
        await _flushed()
    assert _numbers(seen) == [0, 1]
    assert broken.tries == 1
    assert channel.relays == []
    assert len(_bugs(caplog)) == 1


async def test_a_dropped_carrier_is_never_its_successors_heir(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Once a failed post dropped a carrier, the next carrier leaving hands on past it."""
    channel = Channel(print, "test-key")
    seen: list[ProgressEvent] = []
    broken = _FailingLoop()
    relays = [_relay(seen, broken), _relay(seen), _relay(seen)]
    for relay in relays:
        channel.join(relay)
    with caplog.at_level(logging.WARNING, logger="chunktune"):
        channel.send(_numbered(0))  # the first fails; the second carries it
        await _flushed()
        _leave(channel, relays[1])
        channel.send(_numbered(1))  # the third carries it: not the first again
        await _flushed()
    assert _numbers(seen) == [0, 1]
    assert broken.tries == 1
    assert channel.relays == [relays[2]]
    assert len(_bugs(caplog)) == 1


async def test_a_carrier_leaving_as_its_post_fails_leaves_the_next_told_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A carrier whose task leaves while its post fails: no error; the next gets the event once."""
    channel = Channel(print, "test-key")
    seen: list[ProgressEvent] = []
    relays: list[Relay] = []
    broken = _FailingLoop(first=lambda: _leave(channel, relays[0]))
    relays += [_relay(seen, broken), _relay(seen)]
    for relay in relays:
        channel.join(relay)
    with caplog.at_level(logging.WARNING, logger="chunktune"):
        channel.send(_numbered(0))
        channel.send(_numbered(1))
        await _flushed()
    assert _numbers(seen) == [0, 1]
    assert broken.tries == 1
    assert channel.relays == [relays[1]]
    assert len(_bugs(caplog)) == 1


async def test_a_carrier_whose_loop_has_ended_is_dropped_without_a_bug_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A carrier's loop ended: not logged as a bug; dropped; the next gets every event in order."""
    channel = Channel(print, "test-key")
    seen: list[ProgressEvent] = []
    ended = _EndedLoop()
    relays = [_relay(seen, ended), _relay(seen)]
    for relay in relays:
        channel.join(relay)
    with caplog.at_level(logging.DEBUG, logger="chunktune"):
        channel.send(_numbered(0))
        channel.send(_numbered(1))
        await _flushed()
    assert _numbers(seen) == [0, 1]
    assert ended.tries == 1
    assert channel.relays == [relays[1]]
    assert caplog.records == []


async def test_with_every_carrier_failing_the_events_reach_nobody_and_are_not_kept(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """All carriers fail: each is tried once and logged; a sharer joining later gets only later."""
    channel = Channel(print, "test-key")
    seen: list[ProgressEvent] = []
    broken = [_FailingLoop(), _FailingLoop()]
    for loop in broken:
        channel.join(_relay(seen, loop))
    with caplog.at_level(logging.WARNING, logger="chunktune"):
        channel.send(_numbered(0))
        late = _relay(seen)
        assert channel.join(late)  # none carries now: it does
        channel.send(_numbered(1))
        await _flushed()
    assert _numbers(seen) == [1]
    assert [loop.tries for loop in broken] == [1, 1]
    assert channel.relays == [late]
    assert len(_bugs(caplog)) == 2


async def test_an_event_told_once_the_flight_has_landed_reaches_no_sharer() -> None:
    """An abandoned sweep telling on after its flight landed: a sharer being woken gets nothing."""
    flight, owner = _flights.board("test-told-after-landing")
    assert owner
    seen: list[ProgressEvent] = []
    try:
        with anyio.fail_after(HANG_GUARD_S):
            async with anyio.create_task_group() as tg:
                tg.start_soon(flight.wait, Guarded(seen.append))
                while not flight.waiters:  # noqa: ASYNC110 -- no event to await
                    await anyio.sleep(0.01)
                _flights.land(flight, None)  # the sharer's wake is posted to this loop...
                flight.tell(_numbered(0))  # ...and this comes before it runs
    finally:
        _flights.land(flight, None)
    assert [e.kind for e in seen] == ["waiting"]


async def test_a_carrier_letting_ctrl_c_through_hands_its_queue_on_with_none_told_after() -> None:
    """The carrier's callback raises SystemExit: the next gets the rest, though nothing follows."""
    channel = Channel(print, "test-key")
    seen: list[ProgressEvent] = []

    def exits(event: ProgressEvent) -> None:
        seen.append(event)
        raise SystemExit(3)

    token = anyio.lowlevel.current_token()
    carrier = Relay(Guarded(exits), token, threading.Event())
    channel.join(carrier)
    channel.join(_relay(seen))
    for n in range(3):  # all told before the loop delivers any: the last send is the last wake
        channel.send(_numbered(n))
    await _flushed()
    await _flushed()  # the hand-over's drain is posted while the first drain runs
    assert _numbers(seen) == [0, 1, 2]
    with pytest.raises(SystemExit):
        carrier.close()  # what it let through is its own task's


async def test_a_sharer_passing_the_owner_s_function_leaves_with_the_owner_s_decision() -> None:
    """A sharer whose function is the owner's gets no channel, and its wait returns cleanly."""
    seen: list[ProgressEvent] = []
    flight, owner = _flights.board("test-owner-s-function", Guarded(seen.append))
    assert owner
    decision = Decision(chunk_size=8, native_chunk=12, source="benchmark", reason="test")
    got: list[Decision | None] = []

    async def sharer() -> None:
        got.append(await flight.wait(Guarded(seen.append)))

    try:
        with anyio.fail_after(HANG_GUARD_S):
            async with anyio.create_task_group() as tg:
                tg.start_soon(sharer)
                while not flight.waiters:  # noqa: ASYNC110 -- no event to await
                    await anyio.sleep(0.01)
                assert flight.channels == []
                flight.tell(_numbered(0))  # the owner's sweep tells its own function itself
                await _flushed()
                _flights.land(flight, decision)
    finally:
        _flights.land(flight, None)
    assert got == [decision]
    assert seen == []


async def test_a_sharer_joining_after_its_function_s_sharers_all_left_gets_only_later_events() -> (
    None
):
    """What was told while nobody waited with a function never reaches a sharer joining later."""
    flight, owner = _flights.board("test-joins-after-all-left")
    assert owner
    seen: list[ProgressEvent] = []
    try:
        with anyio.fail_after(HANG_GUARD_S):
            async with anyio.create_task_group() as tg:
                first = anyio.CancelScope()

                async def first_sharer() -> None:
                    with first:
                        await flight.wait(Guarded(seen.append))

                tg.start_soon(first_sharer)
                while not flight.waiters:  # noqa: ASYNC110 -- no event to await
                    await anyio.sleep(0.01)
                first.cancel()
                while flight.waiters:  # noqa: ASYNC110 -- no event to await
                    await anyio.sleep(0.01)
                flight.tell(_numbered(0))  # nobody waits with the function now
                tg.start_soon(flight.wait, Guarded(seen.append))
                while not flight.waiters:  # noqa: ASYNC110 -- no event to await
                    await anyio.sleep(0.01)
                flight.tell(_numbered(1))
                await _flushed()
                _flights.land(flight, None)
    finally:
        _flights.land(flight, None)
    assert [e.kind for e in seen] == ["waiting", "waiting", "probe"]
    assert _numbers(seen) == [1]


def test_a_carrier_that_left_on_a_loop_since_stopped_leaves_the_events_to_the_next() -> None:
    """A carrier left, its asyncio loop stopped but open: the next sharer gets the events."""
    flight, owner = _flights.board("test-left-then-loop-stopped")
    assert owner
    seen: list[ProgressEvent] = []
    loops = [asyncio.new_event_loop(), asyncio.new_event_loop()]
    tasks = [loop.create_task(flight.wait(Guarded(seen.append))) for loop in loops]
    try:
        for n, loop in enumerate(loops, 1):  # one after the other: the first carries
            loop.run_until_complete(asyncio.sleep(0))
            assert len(flight.waiters) == n
        tasks[0].cancel()
        loops[0].run_until_complete(asyncio.wait([tasks[0]]))  # it left; its loop stops
        assert len(flight.waiters) == 1
        flight.tell(_numbered(0))
        loops[1].run_until_complete(asyncio.sleep(0))  # runs what was posted to it
        assert _numbers(seen) == [0]
    finally:
        _flights.land(flight, None)
        loops[1].run_until_complete(asyncio.wait([tasks[1]]))
        for loop in loops:
            loop.close()
    assert tasks[0].cancelled()
    assert tasks[1].result() is None


class _FailsSecond:
    """A loop token that posts to a real loop once, then raises (a bug on the second post)."""

    def __init__(self, token: object) -> None:
        self.token = token
        self.tries = 0

    def run_sync_soon(self, callback: Callable[[], None]) -> None:
        self.tries += 1
        if self.tries > 1:
            raise ValueError("cannot post to this loop")
        assert call_soon(self.token, callback)


async def test_a_carrier_dropped_by_a_failed_post_delivers_nothing_from_an_earlier_post(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A drain posted to a carrier before a later post of it failed delivers nothing on its loop."""
    channel = Channel(print, "test-key")
    seen: list[tuple[str, ProgressEvent]] = []
    token = anyio.lowlevel.current_token()
    flaky = _FailsSecond(token)
    for name, loop in (("dropped", flaky), ("next", token)):
        channel.join(Relay(functools.partial(_noted, seen, name), loop, threading.Event()))
    with caplog.at_level(logging.WARNING, logger="chunktune"):
        channel.send(_numbered(0))  # its drain is posted to the first carrier's loop
        channel.send(_numbered(1))  # this post fails: the next carries both
        await _flushed()
    assert [(name, e.round) for name, e in seen] == [("next", 0), ("next", 1)]
    assert flaky.tries == 2
    assert len(_bugs(caplog)) == 1


def _noted(seen: list[tuple[str, ProgressEvent]], name: str, event: ProgressEvent) -> None:
    """A relay's callback that notes which relay delivered the event."""
    seen.append((name, event))


# -- a carrier on a stopped loop (mutation round 49: _pass_on, _wake, loop_stopped) -------


def test_a_lone_carrier_on_a_stopped_loop_gets_the_events_when_its_loop_runs_again() -> None:
    """The only sharer's asyncio loop stopped (not closed): what is told reaches it as it runs."""
    flight, owner = _flights.board("test-lone-carrier-stopped-loop")
    assert owner
    seen: list[ProgressEvent] = []
    loop = asyncio.new_event_loop()
    task = loop.create_task(flight.wait(Guarded(seen.append)))
    try:
        loop.run_until_complete(asyncio.sleep(0))  # it joins and carries; its loop stops
        assert len(flight.waiters) == 1
        for n in range(2):
            flight.tell(_numbered(n))  # none other waits: kept for it
        loop.run_until_complete(asyncio.sleep(0))  # it runs again: what was told, in order
        assert _numbers(seen) == [0, 1]
        flight.tell(_numbered(2))
        loop.run_until_complete(asyncio.sleep(0))
    finally:
        _flights.land(flight, None)
        loop.run_until_complete(task)  # woken by the landing
        loop.close()
    assert _numbers(seen) == [0, 1, 2]
    assert task.result() is None


class _StoppedAsItLeaves:
    """An asyncio loop stopped (not closed) whose task leaves just as the sweep looks at it.

    ``leave`` runs the first time its state is read, as a carrier's own thread leaving at
    that moment would; ``posted`` are the drains posted to it (they never run).
    """

    def __init__(self) -> None:
        self.leave: Callable[[], None] | None = None
        self.posted: list[Callable[[], None]] = []

    def is_running(self) -> bool:
        if self.leave is not None:
            leave, self.leave = self.leave, None
            leave()
        return False

    def is_closed(self) -> bool:
        return False

    def call_soon_threadsafe(self, callback: Callable[[], None]) -> None:
        self.posted.append(callback)


async def test_a_stopped_carrier_leaving_as_it_is_looked_at_carries_no_more(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A carrier on a stopped loop leaving as the sweep tells is sent nothing; the next carries."""
    channel = Channel(print, "test-key")
    seen: list[tuple[str, ProgressEvent]] = []
    stopped = _StoppedAsItLeaves()
    gone = Relay(functools.partial(_noted, seen, "gone"), stopped, threading.Event())
    assert channel.join(gone)
    stopped.leave = functools.partial(_leave, channel, gone)
    with caplog.at_level(logging.WARNING, logger="chunktune"):
        channel.send(_numbered(0))  # it left meanwhile: the event reaches nobody, no bug
    assert _bugs(caplog) == []
    assert stopped.posted == []
    late = Relay(
        functools.partial(_noted, seen, "late"), anyio.lowlevel.current_token(), threading.Event()
    )
    assert channel.join(late)  # none else waits: it carries
    channel.send(_numbered(1))
    await _flushed()
    assert [(name, e.round) for name, e in seen] == [("late", 1)]
    assert stopped.posted == []
    assert channel.relays == [late]


async def test_a_stopped_carrier_passes_over_a_sharer_whose_loop_is_stopped_too() -> None:
    """Carrier and next sharer on stopped asyncio loops: the first one whose loop runs carries."""
    channel = Channel(print, "test-key")
    seen: list[tuple[str, ProgressEvent]] = []
    stopped = [asyncio.new_event_loop(), asyncio.new_event_loop()]  # not running, not closed
    try:
        tokens: list[object] = [*stopped, anyio.lowlevel.current_token()]
        for name, token in zip(("first", "second", "running"), tokens, strict=True):
            channel.join(Relay(functools.partial(_noted, seen, name), token, threading.Event()))
        channel.send(_numbered(0))
        channel.send(_numbered(1))
        await _flushed()
        assert [(name, e.round) for name, e in seen] == [("running", 0), ("running", 1)]
    finally:
        for loop in stopped:
            loop.close()


async def _park(tokens: list[object], done: threading.Event) -> None:
    """A loop's task that hands over its loop's token, then waits (without blocking it)."""
    tokens.append(anyio.lowlevel.current_token())
    await anyio.to_thread.run_sync(done.wait)


async def test_a_carrier_whose_loop_runs_carries_though_one_on_the_other_backend_waits(
    anyio_backend: str,
) -> None:
    """The carrier's loop runs (asyncio or trio): it delivers, not a sharer on the other's loop."""
    other = "trio" if anyio_backend == "asyncio" else "asyncio"
    tokens: list[object] = []
    done = threading.Event()
    thread = threading.Thread(
        target=anyio.run, args=(_park, tokens, done), kwargs={"backend": other}
    )
    thread.start()
    try:
        with anyio.fail_after(HANG_GUARD_S):
            while not tokens:  # noqa: ASYNC110 -- no event to await across threads
                await anyio.sleep(0.01)
        channel = Channel(print, "test-key")
        seen: list[tuple[str, ProgressEvent]] = []
        here = anyio.lowlevel.current_token()
        for name, token in (("carrier", here), ("other", tokens[0])):
            channel.join(Relay(functools.partial(_noted, seen, name), token, threading.Event()))
        channel.send(_numbered(0))
        channel.send(_numbered(1))
        await _flushed()
        assert [(name, e.round) for name, e in seen] == [("carrier", 0), ("carrier", 1)]
    finally:
        done.set()
        thread.join(HANG_GUARD_S)
    assert not thread.is_alive()
