"""Sharers' progress handed over mid-sweep: one function sees every event once, in order.

Each test forces the interleaving that used to reorder events: the carrier of a function
shared by two sharing tasks leaves while an older event for it is still queued on its loop,
and a newer one is told meanwhile. The interleaving is made with events and callbacks
queued on the loops (each loop runs them in the order they were posted), never by sleeping.
"""

from __future__ import annotations

import asyncio
import functools
import gc
import threading
import time
import weakref
from collections.abc import Callable

import anyio
import anyio.lowlevel
import anyio.to_thread
import attrs
import pytest
from _forking import run_forked

import chunktune
from chunktune import ProgressEvent, _flights
from chunktune._backends import call_soon
from chunktune._channel import Channel
from chunktune._events import ProgressCallback
from chunktune._relay import Guarded, Relay
from chunktune.sim import Noise, SimulatedWorkload

pytestmark = pytest.mark.anyio

HANG_GUARD_S = 60.0  # not a speed limit: a hang fails the test instead of the suite
STREAM = 12  # the numbered events a flight-level test tells
MIDDLE = 5  # the carrier leaves with event MIDDLE + 1 still queued on its loop


def _until(done: Callable[[], bool]) -> None:
    """Wait (in a plain thread) until ``done()``; a hang fails the test."""
    deadline = time.monotonic() + HANG_GUARD_S
    while not done():
        assert time.monotonic() < deadline, "the test hung"
        time.sleep(0.01)


async def _until_async(done: Callable[[], bool]) -> None:
    """Wait (in a task) until ``done()``; a hang fails the test."""
    with anyio.fail_after(HANG_GUARD_S):
        while not done():  # noqa: ASYNC110 -- the events come through the loop
            await anyio.sleep(0.01)


def _numbered(n: int) -> ProgressEvent:
    """The n-th event of a test's stream (its number in ``round``)."""
    return ProgressEvent(kind="probe", round=n)


def _numbers(seen: list[ProgressEvent]) -> list[int]:
    """The numbers of the numbered events seen, in the order seen."""
    return [e.round for e in seen if e.kind == "probe"]


def _tell(flight: _flights.Flight, numbers: range) -> None:
    """Tell the numbered events, as the sweep would."""
    for n in numbers:
        flight.tell(_numbered(n))


# -- a carrier cancelled mid-stream (flight level) ---------------------------------------
# asyncio runs a task woken by a cancel before the callbacks posted after that cancel,
# which forces the hand-over; trio runs them in a random order, so there the old fault
# showed only at times, and the Ctrl-C tests below force it on trio too.


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_a_carrier_cancelled_mid_stream_hands_the_rest_over_in_order_on_one_loop() -> None:
    """A sharer cancelled with an event queued: the next sharer's callback gets all in order."""
    flight, owner = _flights.board("test-order-one-loop")
    assert owner
    seen: list[ProgressEvent] = []
    first, first_left = anyio.CancelScope(), anyio.Event()

    async def first_sharer() -> None:
        with first:
            await flight.wait(Guarded(seen.append))
        _tell(flight, range(MIDDLE + 2, STREAM))  # as it leaves: newer events, to the next
        first_left.set()

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(first_sharer)
            await _until_async(lambda: len(flight.waiters) == 1)
            tg.start_soon(flight.wait, Guarded(seen.append))
            await _until_async(lambda: len(flight.waiters) == 2)
            _tell(flight, range(MIDDLE + 1))
            await _until_async(lambda: len(_numbers(seen)) == MIDDLE + 1)
            first.cancel()
            flight.tell(_numbered(MIDDLE + 1))  # queued behind the first sharer's leaving
            await first_left.wait()
            await _until_async(lambda: len(_numbers(seen)) >= STREAM)
            _flights.land(flight, None)
    finally:
        _flights.land(flight, None)
    assert first.cancelled_caught
    assert _numbers(seen) == list(range(STREAM))
    assert [e.message for e in seen].count(_flights.SHARING) == 1


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_a_carrier_cancelled_mid_stream_hands_the_rest_to_another_thread_in_order(
    backend: str,
) -> None:
    """The carrier's loop and the next sharer's are two threads': all in order, none twice."""
    flight, owner = _flights.board(f"test-order-threads-{backend}")
    assert owner
    seen: list[tuple[str, ProgressEvent]] = []
    tokens: list[object] = []
    scopes: list[anyio.CancelScope] = []
    cancelled, told = threading.Event(), threading.Event()

    def on_event(event: ProgressEvent) -> None:
        seen.append((threading.current_thread().name, event))

    async def first_sharer() -> None:
        tokens.append(anyio.lowlevel.current_token())
        scopes.append(anyio.CancelScope())
        with scopes[0]:
            await flight.wait(Guarded(on_event))
        _tell(flight, range(MIDDLE + 2, STREAM))  # as it leaves: newer events, to the next

    def cancel_first() -> None:
        """On the first sharer's loop: cancel it, then hold the loop till MIDDLE + 1 is told."""
        scopes[0].cancel()
        cancelled.set()
        told.wait(HANG_GUARD_S)

    threads = [
        threading.Thread(target=anyio.run, args=(first_sharer,), name="first"),
        threading.Thread(
            target=anyio.run,
            args=(flight.wait, Guarded(on_event)),
            kwargs={"backend": backend},
            name="next",
        ),
    ]
    try:
        threads[0].start()
        _until(lambda: len(flight.waiters) == 1)
        threads[1].start()
        _until(lambda: len(flight.waiters) == 2)
        _tell(flight, range(MIDDLE + 1))
        _until(lambda: len(seen) == MIDDLE + 2)  # with the waiting event
        assert call_soon(tokens[0], cancel_first)
        assert cancelled.wait(HANG_GUARD_S)
        flight.tell(_numbered(MIDDLE + 1))  # queued behind the first sharer's leaving
        told.set()
        threads[0].join(HANG_GUARD_S)
        _until(lambda: len(_numbers([e for _, e in seen])) >= STREAM)
    finally:
        told.set()
        _flights.land(flight, None)
        for thread in threads:
            thread.join(HANG_GUARD_S)
    assert scopes[0].cancelled_caught
    assert _numbers([e for _, e in seen]) == list(range(STREAM))
    assert {who for who, e in seen if e.kind == "probe" and e.round > MIDDLE} == {"next"}


# -- a carrier whose callback lets Ctrl-C through mid-sweep (resolve, simulated sweep) ------


@attrs.define
class _Script:
    """What the sweep's thread does before some of its calls, to force one interleaving.

    The first sharer carries the shared function. Before call 2 the sweep holds that
    sharer's loop; calls 2 and 3 then tell their events to it, with a second hold queued
    between them. Before call 4 the loop goes on: the function raises SystemExit for the
    event of call 2 (that sharer's resolve raises it, and it leaves), and the loop is held
    again before the event of call 3; that of call 4 is told meanwhile. Before call 5 the
    loop goes on with the event of call 3 still to deliver.
    """

    token: object = None  # the first sharer's loop
    armed: bool = False  # the function raises for the next event it gets
    held: threading.Event = attrs.Factory(threading.Event)
    go: threading.Event = attrs.Factory(threading.Event)
    held_again: threading.Event = attrs.Factory(threading.Event)
    go_again: threading.Event = attrs.Factory(threading.Event)

    def hold(self) -> None:
        """On the first sharer's loop: hold it, then arm the function."""
        self.held.set()
        self.go.wait(HANG_GUARD_S)
        self.armed = True

    def hold_again(self) -> None:
        """On the first sharer's loop, once the function raised: hold it again."""
        self.held_again.set()
        self.go_again.wait(HANG_GUARD_S)

    def before(self, call: int) -> None:
        """In the sweep's thread, before its call number ``call``."""
        if call == 2:
            assert call_soon(self.token, self.hold) and self.held.wait(HANG_GUARD_S)
        elif call == 3:
            assert call_soon(self.token, self.hold_again)
        elif call == 4:
            self.go.set()
            assert self.held_again.wait(HANG_GUARD_S)
        elif call == 5:
            self.go_again.set()

    def release(self) -> None:
        """Let every hold go (a test that failed must not hang the loops)."""
        self.go.set()
        self.go_again.set()


class _Scripted(SimulatedWorkload):
    """A simulated workload whose call 1 blocks until released, and that runs a script."""

    def __init__(self, script: _Script, name: str) -> None:
        costs = SimulatedWorkload.from_layout("blocked", num_envs=512, nthread=8).costs
        super().__init__(costs, nthread=8, noise=Noise(sigma=0.01), name=name)
        self.script = script
        self.blocked, self.release = threading.Event(), threading.Event()

    def run(self, chunk_size: int | None) -> float:
        if self.calls == 1:
            self.blocked.set()
            self.release.wait(HANG_GUARD_S)
        self.script.before(self.calls)
        return super().run(chunk_size)


def _policy() -> chunktune.Policy:
    """Two full rounds of three sizes: six calls, one event each."""
    return attrs.evolve(
        chunktune.load_settings().get_policy("balanced"),
        candidates=chunktune.ExplicitCandidates(sizes=(2, 8)),
        prime=0,
        min_rounds=2,
        max_rounds=2,
    )


def _shared_function(script: _Script, seen: list[ProgressEvent]) -> ProgressCallback:
    """The function both sharers pass: it notes the first sharer's loop as it is told it
    shares the sweep, and raises SystemExit once when armed."""

    def on_event(event: ProgressEvent) -> None:
        if event.message == _flights.SHARING:
            script.token = anyio.lowlevel.current_token()
        seen.append(event)
        if script.armed:
            script.armed = False
            raise SystemExit(3)

    return on_event


def _sharers() -> int:
    """How many tasks wait for the one flight in the air."""
    (flight,) = _flights._flights.values()
    return len(flight.waiters)


def _assert_in_order(owner: list[ProgressEvent], shared: list[ProgressEvent]) -> None:
    """The shared function got the sweep's events from call 1 on, each once and in order."""
    assert shared[0].message == _flights.SHARING
    since = [e.kind for e in owner].index("probe") + 1  # the event of call 0 came before
    places = [next(i for i, told in enumerate(owner) if told is e) for e in shared[1:]]
    assert places == list(range(since, len(owner)))  # where each stands in the sweep's order


async def test_a_carrier_whose_callback_lets_ctrl_c_through_hands_over_in_order() -> None:
    """On one loop: the sharer after it gets the rest of the sweep's events once, in order."""
    script = _Script()
    w, pol = _Scripted(script, "ctrl-c on one loop"), _policy()
    owner_seen: list[ProgressEvent] = []
    shared: list[ProgressEvent] = []
    on_event = _shared_function(script, shared)
    raised: list[BaseException] = []

    async def first_sharer() -> None:
        try:
            await chunktune.resolve(w, policy=pol, on_progress=on_event)
        except SystemExit as exc:
            raised.append(exc)

    try:
        with anyio.fail_after(HANG_GUARD_S):
            async with anyio.create_task_group() as tg:
                owner = functools.partial(
                    chunktune.resolve, w, policy=pol, on_progress=owner_seen.append
                )
                tg.start_soon(owner)
                assert await anyio.to_thread.run_sync(w.blocked.wait, HANG_GUARD_S)
                tg.start_soon(first_sharer)
                await _until_async(lambda: script.token is not None)
                tg.start_soon(
                    functools.partial(chunktune.resolve, w, policy=pol, on_progress=on_event)
                )
                await _until_async(lambda: _sharers() == 2)
                w.release.set()
    finally:
        w.release.set()
        script.release()
    assert [type(e) for e in raised] == [SystemExit]
    _assert_in_order(owner_seen, shared)


@pytest.mark.parametrize(
    ("first_runner", "next_runner"),
    [
        pytest.param("sync", "sync", id="resolve_sync-both"),
        pytest.param("sync", "trio", id="next-on-trio"),
        pytest.param("trio", "sync", id="first-on-trio"),
    ],
)
def test_a_carrier_whose_callback_lets_ctrl_c_through_hands_over_to_another_thread_in_order(
    first_runner: str, next_runner: str
) -> None:
    """Sharers in two threads, a loop each: the second's callback gets the rest once, in order."""
    script = _Script()
    w, pol = _Scripted(script, f"ctrl-c, {first_runner} then {next_runner}"), _policy()
    owner_seen: list[ProgressEvent] = []
    shared: list[ProgressEvent] = []
    on_event = _shared_function(script, shared)
    raised: list[BaseException] = []

    def resolve(runner: str) -> None:
        try:
            if runner == "sync":
                chunktune.resolve_sync(w, policy=pol, on_progress=on_event)
            else:
                call = functools.partial(chunktune.resolve, w, policy=pol, on_progress=on_event)
                anyio.run(call, backend="trio")
        except SystemExit as exc:
            raised.append(exc)

    owner = threading.Thread(
        target=lambda: chunktune.resolve_sync(w, policy=pol, on_progress=owner_seen.append)
    )
    sharers = [
        threading.Thread(target=resolve, args=(first_runner,)),
        threading.Thread(target=resolve, args=(next_runner,)),
    ]
    try:
        owner.start()
        assert w.blocked.wait(HANG_GUARD_S)
        sharers[0].start()
        _until(lambda: script.token is not None)
        sharers[1].start()
        _until(lambda: _sharers() == 2)
        w.release.set()
    finally:
        w.release.set()
        for thread in (owner, *sharers):
            thread.join(HANG_GUARD_S)
        script.release()
    assert [type(e) for e in raised] == [SystemExit]
    _assert_in_order(owner_seen, shared)


_left: list[object] = []  # tasks of closed loops, kept from the garbage collector


def test_what_a_carrier_on_a_closed_loop_had_not_delivered_reaches_the_next_sharer() -> None:
    """A carrier left pending on a loop closed with an event queued: the next sharer gets it."""
    flight, owner = _flights.board("test-order-closed-loop")
    assert owner
    seen: list[ProgressEvent] = []
    loop = asyncio.new_event_loop()
    task = loop.create_task(flight.wait(Guarded(seen.append)))
    _left.append(task)  # kept alive: its coroutine never runs again once the loop is closed
    sharer = threading.Thread(target=anyio.run, args=(flight.wait, Guarded(seen.append)))
    try:
        loop.run_until_complete(asyncio.sleep(0))  # the carrier joins, and is told so
        assert len(flight.waiters) == 1
        sharer.start()
        _until(lambda: len(flight.waiters) == 2)
        flight.tell(_numbered(0))  # posted to the carrier's loop, which no longer runs
        loop.close()
        flight.tell(_numbered(1))
        _until(lambda: 1 in _numbers(seen))  # the last told: those before it came first
    finally:
        loop.close()
        _flights.land(flight, None)
        sharer.join(HANG_GUARD_S)
    assert _numbers(seen) == [0, 1]
    assert [e.message for e in seen].count(_flights.SHARING) == 1


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_a_carrier_on_a_stopped_loop_leaves_the_events_to_a_sharer_whose_loop_runs(
    backend: str,
) -> None:
    """A carrier whose loop stopped (not closed): the next sharer's loop delivers, once each."""
    flight, owner = _flights.board(f"test-order-stopped-loop-{backend}")
    assert owner
    seen: list[ProgressEvent] = []
    loop = asyncio.new_event_loop()
    task = loop.create_task(flight.wait(Guarded(seen.append)))
    sharer = threading.Thread(
        target=anyio.run, args=(flight.wait, Guarded(seen.append)), kwargs={"backend": backend}
    )
    try:
        loop.run_until_complete(asyncio.sleep(0))  # the carrier joins; its loop then stops
        assert len(flight.waiters) == 1
        sharer.start()
        _until(lambda: len(flight.waiters) == 2)
        _tell(flight, range(2))
        _until(lambda: len(_numbers(seen)) == 2)  # not held till the stopped loop runs again
        loop.run_until_complete(asyncio.sleep(0))  # it runs again: what it was sent, nobody
        flight.tell(_numbered(2))
        _until(lambda: len(_numbers(seen)) == 3)
    finally:
        _flights.land(flight, None)
        sharer.join(HANG_GUARD_S)
        loop.run_until_complete(task)  # woken by the landing
        loop.close()
    assert _numbers(seen) == [0, 1, 2]
    assert [e.message for e in seen].count(_flights.SHARING) == 1


# -- what a channel holds once its tasks have left ---------------------------------------


class _Bar:
    """A progress bar: its ``update`` is what a sharing task passes."""

    def update(self, event: ProgressEvent) -> None:
        """Take one event (nothing to show here)."""


async def test_a_function_whose_tasks_all_left_is_not_held_while_the_sweep_goes_on() -> None:
    """Once every task that passed a function has left, the flight holds it no more."""
    flight, owner = _flights.board("test-channel-let-go")
    assert owner
    gone: list[weakref.ref[_Bar]] = []

    async def sharer() -> None:
        bar = _Bar()
        gone.append(weakref.ref(bar))
        with anyio.move_on_after(0.01):  # it gives up: the sweep flies on
            await flight.wait(Guarded(bar.update))

    try:
        async with anyio.create_task_group() as tg:  # the cancel's traceback ends with it
            tg.start_soon(sharer)
        gc.collect()
        assert gone[0]() is None  # the bar (and all it holds) can go
        assert flight.channels == []
    finally:
        _flights.land(flight, None)


async def _relay_to(token: object) -> Relay:
    """A sharing task's relay to the loop of ``token`` (made where a cancel scope can be)."""
    return Relay(Guarded(_Bar().update), token, threading.Event())


def test_a_child_forked_while_a_channel_s_lock_is_held_tells_and_leaves() -> None:
    """A fork while a parent's thread holds a channel's lock leaves the child a free one."""
    ended = asyncio.new_event_loop()
    ended.close()  # the carrier's loop: posts to it fail, so the child needs no loop
    relay = anyio.run(_relay_to, ended)
    channel = Channel(relay.callback, "test")
    assert channel.join(relay)

    def child() -> None:
        # as a sharing task carried on in the child would: told an event, then leaving
        channel.send(_numbered(0))
        channel.leave(relay)

    with channel._lock:  # as the sweep's thread telling at the fork
        status = run_forked(child, hang_guard_s=20)
    assert status == 0
