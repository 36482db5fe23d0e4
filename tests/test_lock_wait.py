"""Waiting for a lock: a lock a try takes reaches its caller or is released, never leaked."""

from __future__ import annotations

import functools
import itertools
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypedDict

import anyio
import anyio.lowlevel
import pytest

from chunktune import _lock_wait
from chunktune._lock_note import Holder, note_path, read_note
from chunktune._locks import Lock, key_lock
from chunktune._threads import hop as real_hop

pytestmark = pytest.mark.anyio


def _free(path: Path) -> bool:
    """Whether another taker of this process can take the lock file ``path`` now."""
    other = key_lock(path)
    if not other.try_acquire():
        return False
    other.release()
    return True


def _finished_tries(monkeypatch: pytest.MonkeyPatch) -> threading.Event:
    """An event set once a try (a hop of ``_lock_wait``) has returned in its thread, even
    one its caller left behind."""
    done, real = threading.Event(), real_hop

    async def hop(func: Callable[..., Any], *args: Any, abandon_on_cancel: bool = False) -> Any:
        def run() -> Any:
            try:
                return func(*args)
            finally:
                done.set()

        return await real(run, abandon_on_cancel=abandon_on_cancel)

    monkeypatch.setattr(_lock_wait, "hop", hop)
    return done


class _Claims(TypedDict, total=False):
    """The claim callbacks ``acquire`` and ``hold`` take."""

    claim: Callable[[Lock], bool]
    unclaim: Callable[[Lock], bool]


def _recorded_claims(calls: list[str]) -> _Claims:
    """``claim`` and ``unclaim`` callbacks that each note their call in ``calls`` and agree."""

    def claim(held: Lock) -> bool:
        calls.append("claim")
        return True

    def unclaim(held: Lock) -> bool:
        calls.append("unclaim")
        return True

    return {"claim": claim, "unclaim": unclaim}


def _recorded_releases(lock: Lock, calls: list[str]) -> None:
    """Each release of ``lock`` notes ``"release"`` in ``calls``, then releases it."""
    real_release = lock.release

    def release() -> None:
        calls.append("release")
        real_release()

    lock.release = release  # type: ignore[method-assign]


def _stalled_try(lock: Lock) -> tuple[threading.Event, threading.Event]:
    """``lock``'s tries block, as on a stalled file system, until the second event is set
    (60 s at most: a hang guard); the first is set once a try is stuck."""
    entered, go, real = threading.Event(), threading.Event(), lock.try_acquire

    def stalled() -> bool:
        entered.set()
        go.wait(60)
        return real()

    lock.try_acquire = stalled  # type: ignore[method-assign]
    return entered, go


def _cancelled_once_taken(monkeypatch: pytest.MonkeyPatch, scope: list[anyio.CancelScope]) -> None:
    """The caller is cancelled just after a try returns, before it resumes (as a cancel that
    races the try's answer is)."""
    real = real_hop

    async def hop(func: Callable[..., Any], *args: Any, abandon_on_cancel: bool = False) -> Any:
        got = await real(func, *args, abandon_on_cancel=abandon_on_cancel)
        scope[0].cancel()
        await anyio.lowlevel.checkpoint()
        return got

    monkeypatch.setattr(_lock_wait, "hop", hop)


def _join_releases() -> None:
    """Wait for the threads that release locks for callers that left (a hang guard)."""
    for thread in threading.enumerate():
        if thread.name == "chunktune release":
            thread.join(60)


@pytest.mark.parametrize("claims", [pytest.param(False, id="bare"), pytest.param(True, id="claim")])
async def test_a_try_left_behind_lets_go_of_the_lock_it_takes_once_its_caller_left(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, claims: bool
) -> None:
    """A stuck try its caller was cancelled from takes the lock later: released, never claimed."""
    path = tmp_path / "k.lock"
    lock = key_lock(path)
    entered, go = _stalled_try(lock)
    finished = _finished_tries(monkeypatch)
    calls: list[str] = []

    kwargs: _Claims = _recorded_claims(calls) if claims else {}
    returned = []
    async with anyio.create_task_group() as tg:

        async def wait() -> None:
            await _lock_wait.acquire(lock, **kwargs)
            returned.append(True)

        tg.start_soon(wait)
        assert await anyio.to_thread.run_sync(entered.wait, 60)  # a hang guard
        assert lock.trying  # a try is in flight, stuck
        tg.cancel_scope.cancel()
    go.set()  # the file system answers: the try left behind takes the lock
    assert await anyio.to_thread.run_sync(finished.wait, 60)  # a hang guard
    assert returned == [] and calls == [] and not lock.trying
    assert _free(path)


@pytest.mark.parametrize("claims", [pytest.param(False, id="bare"), pytest.param(True, id="claim")])
async def test_a_lock_taken_as_its_caller_is_cancelled_is_unclaimed_then_released(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, claims: bool
) -> None:
    """A cancel between a try taking the lock and its caller resuming: unclaimed, then let go."""
    path = tmp_path / "k.lock"
    lock, scope = key_lock(path), [anyio.CancelScope()]
    calls: list[str] = []
    _recorded_releases(lock, calls)
    _cancelled_once_taken(monkeypatch, scope)

    kwargs: _Claims = _recorded_claims(calls) if claims else {}
    returned = []
    with scope[0]:
        await _lock_wait.acquire(lock, **kwargs)
        returned.append(True)
    await anyio.to_thread.run_sync(_join_releases)
    assert returned == []
    assert calls == (["claim", "unclaim", "release"] if claims else ["release"])
    assert _free(path)


async def test_a_hold_cancelled_as_its_lock_is_taken_unclaims_it_then_lets_go(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """hold hands its unclaim to the wait: a lock taken as it is cancelled is unclaimed first."""
    path = tmp_path / "k.lock"
    lock, scope = key_lock(path), [anyio.CancelScope()]
    calls: list[str] = []
    _recorded_releases(lock, calls)
    _cancelled_once_taken(monkeypatch, scope)
    entered = []
    with scope[0]:
        async with _lock_wait.hold(lock, **_recorded_claims(calls)):
            entered.append(True)
    await anyio.to_thread.run_sync(_join_releases)
    assert entered == []
    assert calls == ["claim", "unclaim", "release"]
    assert _free(path)


async def test_a_lock_released_for_a_cancelled_caller_is_not_released_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """unclaim False (released for the caller, since taken by another): that holder keeps it."""
    path = tmp_path / "k.lock"
    lock, scope = key_lock(path), [anyio.CancelScope()]
    _cancelled_once_taken(monkeypatch, scope)
    other = key_lock(path)

    def released_for_it(held: Lock) -> bool:
        # as a flight abandoned with its loop does: the lock is released for its owner,
        # and another holder takes it before the owner's handshake asks
        held.release()
        assert other.try_acquire()
        return False

    with scope[0]:
        await _lock_wait.acquire(lock, claim=lambda held: True, unclaim=released_for_it)
    await anyio.to_thread.run_sync(_join_releases)
    try:
        holder = read_note(note_path(path))
        assert holder is not None  # the other holder's note is still there
        assert not _free(path)  # and its lock too
    finally:
        other.release()


async def test_a_cancelled_caller_leaves_a_release_that_the_file_system_holds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Releasing for a cancelled caller is done in a thread: a stuck release does not hold it."""
    path = tmp_path / "k.lock"
    lock, scope = key_lock(path), [anyio.CancelScope()]
    real_release, go, done = lock.release, threading.Event(), threading.Event()

    def stuck_release() -> None:
        go.wait(60)  # a hang guard
        real_release()
        done.set()

    lock.release = stuck_release  # type: ignore[method-assign]
    _cancelled_once_taken(monkeypatch, scope)
    with scope[0]:
        await _lock_wait.acquire(lock)
    try:
        assert not done.is_set()  # the caller left while the release was still stuck
    finally:
        go.set()
        await anyio.to_thread.run_sync(_join_releases)
    assert done.is_set() and _free(path)


async def test_a_cancel_while_the_try_claims_the_lock_never_leaks_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cancel that lands while the try records its lock: the caller gets it, or it is let go."""
    path = tmp_path / "k.lock"
    lock = key_lock(path)
    finished = _finished_tries(monkeypatch)
    in_claim, left = threading.Event(), threading.Event()
    claimed: list[Lock] = []

    def claim(held: Lock) -> bool:
        in_claim.set()
        # the caller's cancel comes now: it must not leave before this claim is settled
        # (a caller that did would drop the lock taken); it cannot, so this wait runs out
        left.wait(0.5)
        claimed.append(held)
        return True

    def unclaim(held: Lock) -> bool:
        claimed.remove(held)
        return True

    returned = []
    async with anyio.create_task_group() as tg:

        async def wait() -> None:
            await _lock_wait.acquire(lock, claim=claim, unclaim=unclaim)
            returned.append(True)

        tg.start_soon(wait)
        assert await anyio.to_thread.run_sync(in_claim.wait, 60)  # a hang guard
        tg.cancel_scope.cancel()
    left.set()
    assert await anyio.to_thread.run_sync(finished.wait, 60)  # a hang guard
    await anyio.to_thread.run_sync(_join_releases)
    if returned:  # the lock reached its caller, which holds it
        assert claimed == [lock] and not _free(path)
        lock.release()
    else:
        assert claimed == [] and _free(path)


async def test_a_try_that_answers_clears_trying(tmp_path: Path) -> None:
    """Once a try has answered (taken or not), the lock no longer says a try is in flight."""
    path = tmp_path / "k.lock"
    lock = key_lock(path)
    await _lock_wait.acquire(lock)
    try:
        assert not lock.trying
    finally:
        lock.release()
    assert _free(path)


async def test_a_lock_its_claim_gives_back_is_released_and_tried_again(tmp_path: Path) -> None:
    """claim False gives the lock back: acquire tries again, and returns holding the lock."""
    path = tmp_path / "k.lock"
    lock, answers, claims = key_lock(path), iter([False, True]), []

    def claim(held: Lock) -> bool:
        claims.append(next(answers))
        assert not _free(path)  # taken as it is claimed
        return claims[-1]

    await _lock_wait.acquire(lock, claim=claim)
    try:
        assert claims == [False, True] and not _free(path)
    finally:
        lock.release()


class _Halted(BaseException):
    """Not an Exception: what a claim interrupted by something other than an error raises."""


@pytest.mark.parametrize(
    "error", [pytest.param(RuntimeError, id="error"), pytest.param(_Halted, id="base-exception")]
)
async def test_a_claim_that_raises_lets_go_of_the_lock_it_was_given(
    tmp_path: Path, error: type[BaseException]
) -> None:
    """claim raising: the error reaches the caller, and the lock the try took is free again."""
    path = tmp_path / "k.lock"

    def claim(held: Lock) -> bool:
        raise error("the claim broke")

    with pytest.raises(error, match="the claim broke"):
        await _lock_wait.acquire(key_lock(path), claim=claim)
    assert _free(path)


async def test_an_error_in_a_try_reaches_the_caller(tmp_path: Path) -> None:
    """A try that raises (not a cancel) raises in the caller, not taken for a busy lock."""
    lock = key_lock(tmp_path / "k.lock")
    tries: list[None] = []

    def broken() -> bool:
        tries.append(None)
        if len(tries) == 1:
            raise RuntimeError("the try broke")
        return True  # a caller that went on would take it now

    lock.try_acquire = broken  # type: ignore[method-assign]
    with pytest.raises(RuntimeError, match="the try broke"):
        await _lock_wait.acquire(lock)
    assert not lock.trying


async def test_a_busy_lock_is_tried_again_until_its_holder_lets_go(tmp_path: Path) -> None:
    """A lock another taker holds is not the caller's: tried again until let go, then held."""
    path = tmp_path / "k.lock"
    other, lock = key_lock(path), key_lock(path)
    tries: list[None] = []
    assert other.try_acquire()
    real = lock.try_acquire

    def counted() -> bool:
        tries.append(None)
        if len(tries) == 3:
            other.release()
        return real()

    lock.try_acquire = counted  # type: ignore[method-assign]
    await _lock_wait.acquire(lock)
    try:
        assert len(tries) == 3 and not _free(path)
    finally:
        lock.release()


class _FakeClock:
    """``_lock_wait``'s anyio with a clock that moves only by its sleeps, which it notes."""

    def __init__(self) -> None:
        self.now = 0.0
        self.pauses: list[float] = []

    def current_time(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.pauses.append(seconds)
        self.now += seconds
        await anyio.lowlevel.checkpoint()

    def __getattr__(self, name: str) -> Any:
        return getattr(anyio, name)


def _fake_clock(monkeypatch: pytest.MonkeyPatch) -> _FakeClock:
    """A fake clock for ``_lock_wait``'s waits (a sleep takes no real time)."""
    clock = _FakeClock()
    monkeypatch.setattr(_lock_wait, "anyio", clock)
    return clock


def _held_until(
    path: Path, clock: _FakeClock, free_at: float, holder: Callable[[float], Holder | None]
) -> tuple[Lock, list[float]]:
    """A lock another process holds until the clock reads ``free_at`` (or the 1000th try: a
    hang guard for a clock that stands still), whose note names ``holder(now)``; the
    clock's readings at each look at the note."""
    lock = key_lock(path)
    looks: list[float] = []
    tries: list[None] = []

    def noted() -> Holder | None:
        looks.append(clock.now)
        return holder(clock.now)

    def attempt() -> bool:
        tries.append(None)
        return clock.now >= free_at or len(tries) >= 1000

    lock.try_acquire = attempt  # type: ignore[method-assign]
    lock.holder = noted  # type: ignore[method-assign]
    lock.release = lambda: None  # type: ignore[method-assign]
    return lock, looks


_OTHER = Holder(pid=4242, since=0.0, host="node17")


async def test_the_pause_between_tries_grows_from_a_fiftieth_to_a_quarter_second(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Tries are 0.02 s apart at first, each pause 1.5 times the last, never over 0.25 s."""
    clock = _fake_clock(monkeypatch)
    lock, _ = _held_until(tmp_path / "k.lock", clock, 3.0, lambda now: _OTHER)
    await _lock_wait.acquire(lock)
    pauses = clock.pauses
    assert pauses[0] == pytest.approx(0.02)
    for before, after in itertools.pairwise(pauses):
        assert after == pytest.approx(min(before * 1.5, 0.25))
    assert max(pauses) == pytest.approx(0.25) and clock.now >= 3.0


async def test_a_wait_reported_at_once_names_the_holder_before_its_first_pause(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With REPORT_AFTER_S at 0 the first busy try is followed by a report, then a pause."""
    monkeypatch.setattr(_lock_wait, "REPORT_AFTER_S", 0.0)
    clock = _fake_clock(monkeypatch)
    lock, _ = _held_until(tmp_path / "k.lock", clock, 1.0, lambda now: _OTHER)
    reports: list[tuple[float, Holder | None]] = []
    await _lock_wait.acquire(lock, on_wait=lambda holder: reports.append((clock.now, holder)))
    assert reports == [(0.0, _OTHER)]


async def test_a_long_wait_without_on_wait_takes_the_lock_unreported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A wait past REPORT_AFTER_S with no on_wait reads no note and takes the lock."""
    clock = _fake_clock(monkeypatch)
    lock, looks = _held_until(tmp_path / "k.lock", clock, 5.0, lambda now: _OTHER)
    await _lock_wait.acquire(lock)
    assert looks == [] and clock.now >= 5.0


@pytest.mark.parametrize(
    ("noted_at", "named"),
    [pytest.param(1.5, True, id="within-grace"), pytest.param(99.0, False, id="never")],
)
async def test_a_note_missing_at_the_first_look_is_awaited_for_its_grace(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, noted_at: float, named: bool
) -> None:
    """A note coming within 1 s of the first look is named; one that never comes, unknown."""
    clock = _fake_clock(monkeypatch)
    lock, _ = _held_until(
        tmp_path / "k.lock", clock, 6.0, lambda now: _OTHER if now >= noted_at else None
    )
    reports: list[tuple[float, Holder | None]] = []
    await _lock_wait.acquire(lock, on_wait=lambda holder: reports.append((clock.now, holder)))
    assert reports[0][1] == (_OTHER if named else None)
    assert reports[0][0] >= (noted_at if named else 2.0)
    assert len(reports) == 1


@pytest.mark.parametrize(
    "leaves_at", [pytest.param(99.0, id="steady"), pytest.param(1.2, id="note-gone")]
)
async def test_the_holder_is_read_again_only_every_relook_period(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, leaves_at: float
) -> None:
    """Once reported, the note is read again RELOOK_S after its last read, not on each try."""
    monkeypatch.setattr(_lock_wait, "RELOOK_S", 0.5)  # within the grace (until 2.0 s)
    clock = _fake_clock(monkeypatch)
    lock, looks = _held_until(
        tmp_path / "k.lock", clock, 6.0, lambda now: _OTHER if now < leaves_at else None
    )
    reports: list[Holder | None] = []
    await _lock_wait.acquire(lock, on_wait=reports.append)
    assert reports == [_OTHER]
    assert looks[0] >= 1.0 and len(looks) >= 5
    for before, after in itertools.pairwise(looks):
        assert after - before >= 0.5


async def test_a_cancel_while_the_holder_is_read_leaves_the_read_behind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A wait cancelled while its read of the holder's note is stuck returns before the read."""
    monkeypatch.setattr(_lock_wait, "REPORT_AFTER_S", 0.0)
    lock = key_lock(tmp_path / "k.lock")
    entered, finished = threading.Event(), threading.Event()

    def stuck() -> Holder | None:
        entered.set()
        threading.Event().wait(15)  # a stalled file system (a hang guard: 15 s)
        finished.set()
        return None

    lock.try_acquire = lambda: False  # type: ignore[method-assign]
    lock.holder = stuck  # type: ignore[method-assign]
    with anyio.CancelScope() as scope:
        async with anyio.create_task_group() as tg:
            tg.start_soon(functools.partial(_lock_wait.acquire, lock, on_wait=lambda h: None))
            assert await anyio.to_thread.run_sync(entered.wait, 60)  # a hang guard
            scope.cancel()
    assert not finished.is_set()
