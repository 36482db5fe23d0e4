"""The registry's protocol, on its own (no Ray): claims, leases, takeovers, answers, failures."""

from __future__ import annotations

import time
import types
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import pytest

from chunktune import CacheEntry
from chunktune._ray_registry import Registry, registry_handle

pytestmark = pytest.mark.anyio

KEY = "a/job.policy"


@pytest.fixture
def anyio_backend() -> str:
    """The registry is an asyncio actor in Ray: test it on asyncio only."""
    return "asyncio"


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The registry's monotonic clock, read from ``clock[0]`` (100 s to start): set it to age."""
    from chunktune import _ray_registry

    now = [100.0]
    monkeypatch.setattr(
        _ray_registry, "time", types.SimpleNamespace(monotonic=lambda: now[0], time=time.time)
    )
    return now


def entry(chunk: int | None = 8) -> CacheEntry:
    return CacheEntry(chunk_size=chunk, native_chunk=12, reason="measured")


async def claim(
    reg: Registry,
    holder: str,
    since: object = None,  # what Registry.claim takes: None, or a since it returned
    *,
    refresh: bool = False,
    lease_s: float = 30.0,
) -> dict[str, Any]:
    return await reg.claim(KEY, holder, since=since, refresh=refresh, lease_s=lease_s)


async def test_first_caller_claims_and_others_see_it_busy() -> None:
    """The first caller claims the key; a second one is told who is measuring."""
    reg = Registry()
    first = await claim(reg, "w1")
    second = await claim(reg, "w2")
    assert first["state"] == "claimed"
    assert second["state"] == "busy"
    assert second["holder"] == "w1"


async def test_published_answer_reaches_every_later_caller() -> None:
    """After the claimant publishes, every caller gets the answer and nobody claims again."""
    reg = Registry()
    first = await claim(reg, "w1")
    await reg.publish(KEY, first["token"], entry(8), "w1")
    for holder in ("w2", "w3"):
        reply = await claim(reg, holder)
        assert reply["state"] == "answer"
        assert reply["entry"].chunk_size == 8
    events = [e["event"] for e in await reg.events(KEY)]
    assert events == ["claim", "publish"]


async def test_a_lapsed_lease_goes_to_the_next_caller() -> None:
    """A claimant that stops heartbeating loses its claim after one lease; the next takes over."""
    reg = Registry()
    await claim(reg, "dead", lease_s=0.1)
    assert (await claim(reg, "w2", lease_s=0.1))["state"] == "busy"
    await anyio.sleep(0.15)
    reply = await claim(reg, "w2")
    assert reply["state"] == "claimed"
    assert reply["took_over"] == "dead"
    assert [e["event"] for e in await reg.events(KEY)] == ["claim", "expired", "takeover"]


async def test_heartbeats_keep_the_claim() -> None:
    """Heartbeats renew the lease; a stale token's heartbeat is refused."""
    reg = Registry()
    first = await claim(reg, "w1", lease_s=0.2)
    for _ in range(3):
        await anyio.sleep(0.1)
        assert await reg.heartbeat(KEY, first["token"], 0.2)
    assert (await claim(reg, "w2"))["state"] == "busy"
    await reg.release(KEY, first["token"])
    assert (await claim(reg, "w2"))["state"] == "claimed"
    assert not await reg.heartbeat(KEY, first["token"], 0.2)


async def test_wait_returns_when_the_answer_arrives() -> None:
    """A waiter parked in wait() wakes when the claimant publishes, long before its timeout."""
    reg = Registry()
    first = await claim(reg, "w1")
    woke: list[float] = []

    async def waiter() -> None:
        await reg.wait(KEY, 30.0)
        woke.append(time.monotonic())

    async with anyio.create_task_group() as tg:
        tg.start_soon(waiter)
        await anyio.sleep(0.05)
        assert not woke
        await reg.publish(KEY, first["token"], entry(), "w1")
    assert len(woke) == 1
    assert (await claim(reg, "w2"))["state"] == "answer"


async def test_wait_is_bounded_by_the_lease() -> None:
    """wait() returns once the claimant's lease has run out, however long the caller offered."""
    reg = Registry()
    await claim(reg, "dead", lease_s=0.1)
    with anyio.fail_after(5):
        await reg.wait(KEY, 30.0)
    assert (await claim(reg, "w2"))["state"] == "claimed"


async def test_a_failed_sweep_ends_its_waiters_waits_only() -> None:
    """Waiters that saw the failed sweep fall back; a caller arriving later claims afresh."""
    reg = Registry()
    first = await claim(reg, "w1")
    waiting = await claim(reg, "w2")
    await reg.fail(KEY, first["token"], "boom", "w1")
    again = await claim(reg, "w2", since=waiting["since"])
    assert again["state"] == "failed"
    assert again["reason"] == "boom"
    assert (await claim(reg, "w3"))["state"] == "claimed"


async def test_release_lets_the_next_caller_claim() -> None:
    """A cancelled claimant's release hands the claim to the next caller at once."""
    reg = Registry()
    first = await claim(reg, "w1")
    await reg.release(KEY, first["token"])
    assert (await claim(reg, "w2"))["state"] == "claimed"


async def test_refresh_ignores_answers_older_than_the_call() -> None:
    """A refreshing caller claims despite an old answer, and takes one published after it asked."""
    reg = Registry()
    first = await claim(reg, "w1")
    await reg.publish(KEY, first["token"], entry(8), "w1")
    fresh = await claim(reg, "w2", refresh=True)
    assert fresh["state"] == "claimed"
    other = await claim(reg, "w3", refresh=True)
    assert other["state"] == "busy"
    await reg.publish(KEY, fresh["token"], entry(4), "w2")
    reply = await claim(reg, "w3", since=other["since"], refresh=True)
    assert reply["state"] == "answer"
    assert reply["entry"].chunk_size == 4
    assert (await claim(reg, "w4"))["entry"].chunk_size == 4


async def test_a_claim_its_caller_stopped_waiting_for_is_abandoned_after_it() -> None:
    """abandon(holder), run after a late claim, frees the key; another holder's stays."""
    reg = Registry()
    await claim(reg, "late")  # granted after its caller's hard limit ran out
    await reg.abandon(KEY, "late")
    assert (await claim(reg, "next"))["state"] == "claimed"  # no lease to wait out
    await reg.abandon(KEY, "late")  # not the holder any more: nothing happens
    assert (await claim(reg, "third"))["holder"] == "next"


async def test_a_busy_reply_says_how_long_the_claim_has_been_held(clock: list[float]) -> None:
    """A caller told the key is busy learns how old the claim is, counted from a takeover."""
    reg = Registry()
    await claim(reg, "w1", lease_s=5.0)
    clock[0] = 106.0  # w1's lease lapsed
    assert (await claim(reg, "w2", lease_s=5.0))["state"] == "claimed"
    clock[0] = 108.5
    busy = await claim(reg, "w3")
    assert (busy["holder"], busy["held_s"]) == ("w2", 2.5)  # w2's claim, not w1's


def restart(monkeypatch: pytest.MonkeyPatch, clock_s: float) -> Registry:
    """The registry as Ray restarts it: its state lost, on a host whose clock reads ``clock_s``."""
    from chunktune import _ray_registry

    monkeypatch.setattr(
        _ray_registry, "time", types.SimpleNamespace(monotonic=lambda: clock_s, time=time.time)
    )
    return Registry()


CLOCKS = [
    pytest.param(1_000_000.0, 50.0, id="new-host-clock-behind"),
    pytest.param(50.0, 1_000_000.0, id="new-host-clock-ahead"),
]


@pytest.mark.parametrize(("old_clock", "new_clock"), CLOCKS)
async def test_a_refresh_takes_an_answer_a_restarted_registry_got_after_it_asked(
    monkeypatch: pytest.MonkeyPatch, old_clock: float, new_clock: float
) -> None:
    """A refreshing waiter's since from before a restart: the new registry's answer is fresh."""
    old = restart(monkeypatch, old_clock)
    await claim(old, "w1")
    waiting = await claim(old, "w2", refresh=True)
    assert waiting["state"] == "busy"
    new = restart(monkeypatch, new_clock)
    sweeper = await claim(new, "w3", refresh=True)
    await new.publish(KEY, sweeper["token"], entry(4), "w3")
    reply = await claim(new, "w2", since=waiting["since"], refresh=True)
    assert (reply["state"], reply["entry"].chunk_size) == ("answer", 4)


@pytest.mark.parametrize(("old_clock", "new_clock"), CLOCKS)
async def test_a_failure_in_a_restarted_registry_ends_a_wait_that_began_before_it(
    monkeypatch: pytest.MonkeyPatch, old_clock: float, new_clock: float
) -> None:
    """A waiter's since from before a restart: a sweep failed after the restart ends its wait."""
    old = restart(monkeypatch, old_clock)
    await claim(old, "w1")
    waiting = await claim(old, "w2")
    new = restart(monkeypatch, new_clock)
    sweeper = await claim(new, "w3")
    await new.fail(KEY, sweeper["token"], "boom", "w3")
    reply = await claim(new, "w2", since=waiting["since"])
    assert (reply["state"], reply["reason"]) == ("failed", "boom")


@pytest.mark.parametrize("call", ["release", "fail", "heartbeat", "publish"])
async def test_a_claim_of_a_restarted_registry_is_not_ended_by_a_token_from_before(
    monkeypatch: pytest.MonkeyPatch, call: str
) -> None:
    """A token from before a restart (same count) never ends nor renews the new registry's claim."""
    old = restart(monkeypatch, 100.0)
    before = await claim(old, "w1", lease_s=5.0)
    new = restart(monkeypatch, 100.0)
    now = await claim(new, "w2", lease_s=5.0)
    assert now["state"] == "claimed"
    calls: dict[str, Callable[[], Awaitable[bool | None]]] = {
        "release": lambda: new.release(KEY, before["token"]),
        "fail": lambda: new.fail(KEY, before["token"], "cancelled", "w1"),
        "heartbeat": lambda: new.heartbeat(KEY, before["token"], 5.0),
        "publish": lambda: new.publish(KEY, before["token"], entry(4), "w1"),
    }
    assert not await calls[call]()
    assert await new.heartbeat(KEY, now["token"], 5.0)  # w2 still holds its claim


def test_the_registry_is_made_on_the_head_node_outside_any_placement_group() -> None:
    """The registry asks for the head node's resource, so no autoscaler removes its node."""
    made: dict[str, Any] = {}

    class FakeRay:
        def get_runtime_context(self) -> Any:
            return types.SimpleNamespace(get_job_id=lambda: f"job-{uuid.uuid4().hex}")

        def remote(self, cls: type) -> Any:
            def options(**kwargs: Any) -> Any:
                made.update(kwargs)
                return types.SimpleNamespace(remote=lambda: "handle")

            return types.SimpleNamespace(options=options)

    assert registry_handle(FakeRay()) == "handle"
    assert made["resources"] == {"node:__internal_head__": 0.001}
    assert made["scheduling_strategy"] == "DEFAULT"
    assert (made["lifetime"], made["max_restarts"]) == ("detached", -1)


@pytest.mark.parametrize("end", ["publish", "fail", "release", "abandon"])
async def test_every_end_of_a_claim_wakes_its_waiters_at_once(end: str) -> None:
    """Two waiters parked in wait() both wake when the claim ends, however it ends."""
    reg = Registry()
    first = await claim(reg, "w1")
    ends = {
        "publish": lambda: reg.publish(KEY, first["token"], entry(), "w1"),
        "fail": lambda: reg.fail(KEY, first["token"], "boom", "w1"),
        "release": lambda: reg.release(KEY, first["token"]),
        "abandon": lambda: reg.abandon(KEY, "w1"),
    }
    woke: list[int] = []

    async def waiter(i: int) -> None:
        await reg.wait(KEY, 30.0)
        woke.append(i)

    with anyio.fail_after(10):  # a hang detector: the lease and the timeout are 30 s
        async with anyio.create_task_group() as tg:
            tg.start_soon(waiter, 1)
            tg.start_soon(waiter, 2)
            await anyio.sleep(0.05)
            assert not woke
            await ends[end]()
    assert sorted(woke) == [1, 2]


async def test_wait_on_a_released_key_returns_at_once() -> None:
    """A key whose claim was given up has nobody to wait for, though its lease still runs."""
    reg = Registry()
    first = await claim(reg, "w1", lease_s=30.0)
    await reg.release(KEY, first["token"])
    with anyio.fail_after(5):
        await reg.wait(KEY, 30.0)


async def test_wait_returns_by_the_callers_timeout() -> None:
    """wait(timeout_s) shorter than the lease returns by then, the claim still held."""
    reg = Registry()
    await claim(reg, "w1", lease_s=30.0)
    with anyio.fail_after(5):
        await reg.wait(KEY, 0.1)
    assert (await claim(reg, "w2"))["state"] == "busy"


async def test_a_busy_reply_says_how_long_the_lease_has_left(clock: list[float]) -> None:
    """A caller told the key is busy learns when the claim lapses without a heartbeat."""
    reg = Registry()
    await claim(reg, "w1", lease_s=5.0)
    clock[0] = 102.0
    assert (await claim(reg, "w2"))["lease_left_s"] == 3.0


async def test_a_token_released_is_spent() -> None:
    """A claimant's fail after its release never fails the waits of those who asked before."""
    reg = Registry()
    first = await claim(reg, "w1")
    waiting = await claim(reg, "w2")
    await reg.release(KEY, first["token"])
    await reg.fail(KEY, first["token"], "too late", "w1")
    assert (await claim(reg, "w2", since=waiting["since"]))["state"] == "claimed"


async def test_a_since_the_registry_did_not_hand_out_counts_from_its_start(
    clock: list[float],
) -> None:
    """An earlier incarnation's since counts from this one's start: a failure since ends a wait."""
    reg = Registry()  # started at 100 s
    sweeper = await claim(reg, "w1")
    clock[0] = 101.0
    await reg.fail(KEY, sweeper["token"], "boom", "w1")
    clock[0] = 103.0
    reply = await claim(reg, "w2", since=("an-earlier-incarnation", 50.0))
    assert (reply["state"], reply["reason"]) == ("failed", "boom")


async def test_a_lease_lapses_at_its_very_end(clock: list[float]) -> None:
    """At exactly the end of its lease a claim has lapsed: the next caller takes it over."""
    reg = Registry()
    await claim(reg, "w1", lease_s=5.0)
    clock[0] = 105.0
    reply = await claim(reg, "w2", lease_s=5.0)
    assert (reply["state"], reply["took_over"]) == ("claimed", "w1")


async def test_a_caller_claiming_again_after_its_own_lease_lapsed_takes_over_nobody(
    clock: list[float],
) -> None:
    """A claimant that asks again once its own lease lapsed claims afresh, not from itself."""
    reg = Registry()
    await claim(reg, "w1", lease_s=5.0)
    clock[0] = 106.0
    reply = await claim(reg, "w1", lease_s=5.0)
    assert (reply["state"], reply["took_over"]) == ("claimed", None)
    assert [e["event"] for e in await reg.events(KEY)] == ["claim", "expired", "claim"]
