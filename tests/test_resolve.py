"""resolve / resolve_sync: the flow from a workload to a cached Decision, on asyncio and trio."""

from __future__ import annotations

import asyncio
import functools
import itertools
import json
import logging
import os
import pickle
import re
import threading
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any, ClassVar

import anyio
import anyio.lowlevel
import anyio.to_thread
import attrs
import filelock
import pytest
from _clock import jump, jump_when
from _forking import run_forked
from _holders import cached_eventually, holding, holding_async
from _pools import lognormal_32

import chunktune
from chunktune import (
    ChunktuneError,
    InvalidArgumentError,
    ProgressEvent,
    UsageError,
    WorkloadError,
    _flights,
    _giving_up,
    _lock_wait,
    _locks,
    _miss,
    _resolve,
    _settings_read,
)
from chunktune._threads import KEYING_THREAD, STORE_THREAD, hop, wait_for_sweeps
from chunktune._workload import SignatureValue
from chunktune.sim import Noise, SimulatedWorkload

pytestmark = pytest.mark.anyio


def uneven(**kw: object) -> SimulatedWorkload:
    return SimulatedWorkload.from_layout(
        "blocked",
        num_envs=512,
        nthread=8,
        noise=Noise(sigma=0.01),
        **kw,  # type: ignore[arg-type]
    )


def storable() -> tuple[SimulatedWorkload, chunktune.Policy]:
    """A pool of 8 ms modeled calls and ``balanced`` at a 0.5 s budget that times candidates
    (worth storing), with a hard limit of 1 s: its sweep takes about 0.02 s of real time.

    For tests that wait out the limit while the entry is stored: uneven()'s 68 ms calls
    want a 2 s budget, so a limit of at least that, to time one candidate.
    """
    pool = SimulatedWorkload.from_layout("blocked", num_envs=64, nthread=8, noise=Noise(sigma=0.01))
    balanced = chunktune.load_settings().get_policy("balanced")
    return pool, attrs.evolve(balanced, time_budget_s=0.5, hard_limit_s=1.0)


def cache_entries(tmp: Path) -> dict[str, object]:
    path = tmp / "cache.json"
    if not path.exists():
        return {}
    return dict(json.loads(path.read_text())["entries"])


async def test_first_call_measures_second_hits_cache(isolated: Path) -> None:
    """A cold resolve sweeps and stores; the next one answers from the cache, measuring nothing."""
    w = uneven()
    first = await chunktune.resolve(w)
    assert first.source == "benchmark"
    assert first.probe_seconds > 0 and None in first.timings
    calls = w.calls
    second = await chunktune.resolve(w)
    assert second.source == "cache"
    assert second.chunk_size == first.chunk_size and second.key == first.key
    assert (second.gain, second.gain_ci) == (first.gain, first.gain_ci)
    assert second.probe_seconds == 0.0
    assert w.calls == calls
    assert list(cache_entries(isolated)) == [first.key]


async def test_uneven_batch_leaves_native_for_a_better_chunk() -> None:
    """An end-heavy batch picks a chunk that is truly faster than native."""
    w = uneven()
    d = await chunktune.resolve(w)
    assert d.chunk_size is not None
    assert w.true_time(d.chunk_size) < w.true_time(None) * 0.97


async def test_refresh_measures_again() -> None:
    """refresh=True ignores the cached entry."""
    w = uneven()
    await chunktune.resolve(w)
    again = await chunktune.resolve(w, refresh=True)
    assert again.source == "benchmark"


async def test_manual_wins_without_measuring() -> None:
    """A manual chunk size is returned as is; nothing runs."""
    w = uneven()
    d = await chunktune.resolve(w, manual=7)
    assert (d.chunk_size, d.source) == (7, "manual")
    assert w.calls == 0


@pytest.mark.parametrize(
    "manual",
    [
        pytest.param(0, id="zero"),
        pytest.param(2.5, id="float"),
        pytest.param("8", id="text"),
        pytest.param(True, id="bool"),
        pytest.param(10**6, id="above-num-envs"),
    ],
)
async def test_bad_manual_is_rejected(manual: object) -> None:
    """A manual chunk that is not an integer from 1 to num_envs raises, naming the value."""
    with pytest.raises(InvalidArgumentError, match=repr(manual).replace(".", r"\.")):
        await chunktune.resolve(uneven(), manual=manual)  # type: ignore[arg-type]


@pytest.mark.parametrize("settings", ["chunktune.toml", 3, {"policy": "quick"}])
async def test_settings_that_are_not_settings_are_rejected(settings: object) -> None:
    """settings= must be a Settings object: anything else raises, naming it."""
    with pytest.raises(InvalidArgumentError, match=r"is not a chunktune\.Settings"):
        await chunktune.resolve(uneven(), settings=settings)  # type: ignore[arg-type]


@pytest.mark.parametrize("manual", [None, 4], ids=["policy", "manual"])
@pytest.mark.parametrize(
    ("keywords", "named"),
    [
        pytest.param({"policy": 3}, "policy must be .* got 3", id="policy-int"),
        pytest.param({"policy": "off", "refresh": "no"}, "refresh .* got 'no'", id="refresh-text"),
        pytest.param({"policy": "off", "on_progress": "print"}, "on_progress", id="progress-text"),
    ],
)
async def test_a_keyword_of_the_wrong_type_is_rejected_whatever_answers(
    keywords: dict[str, object], named: str, manual: int | None
) -> None:
    """policy, refresh or on_progress of the wrong type: InvalidArgumentError, manual or not."""
    w = uneven()
    with pytest.raises(InvalidArgumentError, match=named):
        await chunktune.resolve(w, manual=manual, **keywords)  # type: ignore[arg-type]
    assert w.calls == 0


async def _heard_later(event: chunktune.ProgressEvent) -> None:
    """An async progress callback, as an async trainer would write one."""
    await anyio.lowlevel.checkpoint()


async def _streamed(event: chunktune.ProgressEvent) -> AsyncIterator[None]:
    """An async generator as a progress callback: calling it runs none of its body."""
    await anyio.lowlevel.checkpoint()
    yield


class _AsyncCall:
    """A callable object whose ``__call__`` is async."""

    async def __call__(self, event: chunktune.ProgressEvent) -> None:
        await anyio.lowlevel.checkpoint()


@pytest.mark.parametrize(
    "callback",
    [
        pytest.param(_heard_later, id="async-def"),
        pytest.param(functools.partial(_heard_later), id="partial"),
        pytest.param(_AsyncCall(), id="async-call"),
        pytest.param(_streamed, id="async-generator"),
    ],
)
async def test_an_async_on_progress_is_rejected_rather_than_never_awaited(
    callback: Callable[[chunktune.ProgressEvent], Any],
) -> None:
    """An async on_progress raises InvalidArgumentError up front instead of losing every event."""
    w = uneven()
    with pytest.raises(InvalidArgumentError, match=r"on_progress .* is async: .* never awaits"):
        await chunktune.resolve(w, policy="quick", on_progress=callback)
    assert w.calls == 0


async def test_off_policy_never_measures() -> None:
    """The off preset returns native with source disabled."""
    w = uneven()
    d = await chunktune.resolve(w, policy="off")
    assert (d.chunk_size, d.source, w.calls) == (None, "disabled", 0)


async def test_trivial_batch_is_not_measured() -> None:
    """N <= T means one chunk per thread at most: native, source trivial."""
    w = SimulatedWorkload.from_layout("uniform", num_envs=8, nthread=8)
    d = await chunktune.resolve(w)
    assert (d.chunk_size, d.source, w.calls) == (None, "trivial", 0)


async def test_a_policy_with_no_candidate_but_native_measures_nothing(isolated: Path) -> None:
    """12 envs on 8 threads leave balanced no size but native's: native, no call, every time."""
    w = SimulatedWorkload.from_layout("uniform", num_envs=12, nthread=8)
    decisions = [await chunktune.resolve(w) for _ in range(2)]
    assert [(d.chunk_size, d.source) for d in decisions] == [(None, "trivial")] * 2
    assert w.calls == 0 and "no candidate but the native chunk 1" in decisions[0].reason


@pytest.mark.parametrize(
    ("num_envs", "nthread", "said"),
    [
        pytest.param(1, 1, "1 env on 1 thread: at most one chunk", id="one-one"),
        pytest.param(8, 8, "8 envs on 8 threads: at most one chunk", id="eight-eight"),
        pytest.param(
            2,
            4,
            "2 envs on 4 threads: at most one chunk per thread, so chunk size cannot matter",
            id="two-four",
        ),
        pytest.param(2, 1, "native chunk 1 for 2 envs on 1 thread;", id="two-one"),
    ],
)
async def test_a_trivial_reason_counts_envs_and_threads_in_words(
    isolated: Path, num_envs: int, nthread: int, said: str
) -> None:
    """A batch with nothing to measure names its envs and threads, singular for one."""
    w = SimulatedWorkload.from_layout("uniform", num_envs=num_envs, nthread=nthread)
    d = await chunktune.resolve(w)
    assert d.source == "trivial" and said in d.reason


async def resolve_together(w: Any, n: int, **kwargs: Any) -> list[chunktune.Decision]:
    """``n`` tasks resolving ``w`` at once; their decisions in the order they came back."""
    decisions: list[chunktune.Decision] = []

    async def one() -> None:
        decisions.append(await chunktune.resolve(w, **kwargs))

    async with anyio.create_task_group() as tg:
        for _ in range(n):
            tg.start_soon(one)
    return decisions


async def test_tasks_resolving_a_batch_with_nothing_to_measure_at_once_share_no_sweep() -> None:
    """Concurrent resolves of a batch with nothing to measure all say so; none shared a sweep."""
    w = SimulatedWorkload.from_layout("uniform", num_envs=12, nthread=8)
    decisions = await resolve_together(w, 4)
    assert {(d.source, d.reason) for d in decisions} == {
        ("trivial", decisions[0].reason.removeprefix("shared a concurrent sweep: "))
    }


async def test_failing_workload_falls_back_and_caches_nothing(isolated: Path) -> None:
    """run() raising gives native, source fallback, the error in reason, no cache entry."""

    class Broken(SimulatedWorkload):
        def run(self, chunk_size: int | None) -> float:
            if self.calls >= 3:
                raise RuntimeError("simulator exploded")
            return super().run(chunk_size)

    costs = uneven().costs
    d = await chunktune.resolve(Broken(costs, nthread=8))
    assert (d.chunk_size, d.source) == (None, "fallback")
    assert "simulator exploded" in d.reason
    assert cache_entries(isolated) == {}


def test_a_failed_sweep_lets_go_of_its_keys_lock_and_leaves_no_file_of_it(isolated: Path) -> None:
    """A sweep whose run() raised releases its key's lock: neither lock file nor note is left."""
    from chunktune._lock_note import note_path

    class Broken(SimulatedWorkload):
        def run(self, chunk_size: int | None) -> float:
            raise RuntimeError("simulator exploded")

    d = chunktune.resolve_sync(Broken(uneven().costs, nthread=8))
    assert d.source == "fallback"
    lock = Path(chunktune.DecisionCache(isolated / "cache.json").key_lock(d.key).lock_file)
    assert lock.parent.is_dir()  # the key was locked while it was measured
    assert not lock.exists() and not note_path(lock).exists()


async def test_a_workload_failing_after_a_stretch_reports_only_its_calls_seconds() -> None:
    """A fallback's probe_seconds sums run()'s seconds, not the stretched budget's."""

    class SlowThenBroken(SimulatedWorkload):
        def run(self, chunk_size: int | None) -> float:
            if self.calls >= 5:
                raise RuntimeError("simulator exploded")
            return super().run(chunk_size)

    # 1.5 s a call: too slow for patient's 10 s, which stretches before the pool fails
    w = SlowThenBroken(uneven().costs * 24, nthread=8)
    events: list[ProgressEvent] = []
    d = await chunktune.resolve(w, policy="patient", on_progress=events.append)
    assert d.source == "fallback" and "extended" in {e.kind for e in events}
    assert d.probe_seconds == pytest.approx(sum(seconds for _c, seconds in w.history))


def _cancelled_inside() -> None:
    """What a workload that runs asyncio of its own may raise: its inner task cancelled."""

    async def inner() -> None:
        task = asyncio.current_task()
        assert task is not None
        task.cancel()
        await asyncio.sleep(1)

    asyncio.run(inner())


@pytest.mark.parametrize("method", ["run", "signature"])
@pytest.mark.parametrize(
    "raise_", [pytest.param(_cancelled_inside, id="CancelledError"), pytest.param(
        lambda: next(iter(())), id="StopIteration")],
)  # fmt: skip
async def test_what_a_workload_raises_is_its_failure_not_the_caller_s(
    isolated: Path, method: str, raise_: Callable[[], None]
) -> None:
    """run() or signature() raising CancelledError or StopIteration: a fallback naming it."""
    # raised as themselves, one would read as the caller's cancellation, the other turn
    # into "RuntimeError: coroutine raised StopIteration"
    name = "CancelledError" if raise_ is _cancelled_inside else "StopIteration"

    class Raising(SimulatedWorkload):
        def run(self, chunk_size: int | None) -> float:
            if method == "run" and self.calls >= 3:
                raise_()
            return super().run(chunk_size)

        def signature(self) -> dict[str, SignatureValue]:
            if method == "signature":
                raise_()
            return super().signature()

    d = await chunktune.resolve(Raising(uneven().costs, nthread=8))
    assert (d.chunk_size, d.source) == (None, "fallback")
    said = f" raised {name})" if method == "run" else f"({name})"
    assert said in d.reason and "RuntimeError" not in d.reason, d.reason
    assert cache_entries(isolated) == {}


@pytest.mark.parametrize(
    ("method", "said"),
    [
        pytest.param(
            "run",
            r"the workload failed while measuring \(run\((None|\d+)\) raised "
            r"KeyError: 'env'\)",
            id="run",
        ),
        pytest.param(
            "signature", r"the workload's signature\(\) failed \(KeyError: 'env'\)", id="sig"
        ),
    ],
)
async def test_a_failing_workload_s_reason_names_what_failed(
    isolated: Path, method: str, said: str
) -> None:
    """signature() raising is said to be signature()'s failure, not one while measuring."""

    class Raising(SimulatedWorkload):
        def run(self, chunk_size: int | None) -> float:
            if method == "run" and self.calls >= 3:
                raise KeyError("env")
            return super().run(chunk_size)

        def signature(self) -> dict[str, SignatureValue]:
            if method == "signature":
                raise KeyError("env")
            return super().signature()

    d = await chunktune.resolve(Raising(uneven().costs, nthread=8))
    assert d.source == "fallback"
    assert re.fullmatch(f"kept the native chunk {d.native_chunk}: {said}", d.reason), d.reason
    assert cache_entries(isolated) == {}


async def test_a_sweep_that_timed_no_candidate_is_not_remembered(isolated: Path) -> None:
    """Too slow for the budget: native, not cached, so a larger budget measures next time."""
    pool = SimulatedWorkload.from_layout("blocked", num_envs=1024, nthread=16, mean_s=0.01)
    balanced = chunktune.load_settings().get_policy("balanced")
    short = await chunktune.resolve(pool, policy=attrs.evolve(balanced, time_budget_s=0.5))
    assert short.chunk_size is None and "too long for the budget" in short.reason
    assert cache_entries(isolated) == {}
    ample = await chunktune.resolve(pool, policy=attrs.evolve(balanced, time_budget_s=60.0))
    assert ample.source == "benchmark" and len(ample.timings) > 1
    assert list(cache_entries(isolated)) == [ample.key]


async def test_a_workload_named_by_a_path_that_is_not_utf8_is_cached_as_toml(
    isolated: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A model file name that was not UTF-8 (a lone surrogate) is stored with escapes."""
    monkeypatch.setenv("CHUNKTUNE_CACHE", str(isolated / "cache.toml"))
    name = os.fsdecode(b"sc\xe8ne.xml")

    class Named(SimulatedWorkload):
        model_file = name

        def signature(self) -> dict[str, SignatureValue]:
            return {**super().signature(), "file": name}

    w = Named(uneven().costs, nthread=8)
    first = await chunktune.resolve(w)
    again = await chunktune.resolve(Named(uneven().costs, nthread=8))
    assert first.source == "benchmark" and again.source == "cache"
    (stored,) = chunktune.DecisionCache(isolated / "cache.toml").entries().values()
    assert stored.model_file == "sc\\udce8ne.xml"  # its bytes as escapes


async def test_a_signature_keyed_by_a_name_that_is_not_utf8_is_cached_as_toml(
    isolated: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A signature key holding a lone surrogate is stored with escapes; the resolve never raises."""
    monkeypatch.setenv("CHUNKTUNE_CACHE", str(isolated / "cache.toml"))
    name = os.fsdecode(b"sc\xe8ne.xml")

    class Keyed(SimulatedWorkload):
        def signature(self) -> dict[str, SignatureValue]:
            return {**super().signature(), name: 1}

    first = await chunktune.resolve(Keyed(uneven().costs, nthread=8))
    again = await chunktune.resolve(Keyed(uneven().costs, nthread=8))
    assert first.source == "benchmark" and again.source == "cache"
    (stored,) = chunktune.DecisionCache(isolated / "cache.toml").entries().values()
    assert stored.signature["sc\\udce8ne.xml"] == 1  # its bytes as escapes


async def test_not_a_workload_is_rejected() -> None:
    """An object without the Workload members raises WorkloadError naming what is missing."""
    with pytest.raises(WorkloadError, match="run"):
        await chunktune.resolve(object())  # type: ignore[arg-type]


class _NoMethod(SimulatedWorkload):
    """A workload whose method is replaced by a value (set per test)."""


@pytest.mark.parametrize(
    ("member", "value", "manual"),
    [
        pytest.param("run", None, None, id="run-None"),
        pytest.param("run", 3, 4, id="run-int-under-manual"),
        pytest.param("signature", "abc", None, id="signature-str"),
        pytest.param("signature", {"kind": "x"}, 4, id="signature-dict-under-manual"),
    ],
)
async def test_a_workload_member_that_is_no_method_is_rejected_naming_it(
    member: str, value: object, manual: int | None
) -> None:
    """A run or signature that cannot be called raises WorkloadError naming it; nothing runs."""
    workload = _NoMethod(uneven().costs, nthread=8)
    setattr(workload, member, value)
    with pytest.raises(WorkloadError, match=rf"its {member} is .*expected a method {member}\(\)"):
        await chunktune.resolve(workload, manual=manual)
    assert workload.calls == 0


@pytest.mark.parametrize(
    ("model_file", "stored"),
    [
        pytest.param(Path("/models/arm.xml"), "/models/arm.xml", id="path"),
        pytest.param(b"/models/arm.xml", "/models/arm.xml", id="bytes"),
        pytest.param(3, None, id="no-path"),
    ],
)
async def test_a_model_file_that_is_no_str_is_stored_as_text_or_not_at_all(
    isolated: Path, model_file: object, stored: str | None
) -> None:
    """A workload's model_file that is a Path, bytes or no path never fails the stored sweep."""

    class Named(SimulatedWorkload):
        pass

    w = Named(uneven().costs, nthread=8)
    w.model_file = model_file  # type: ignore[attr-defined]
    first = await chunktune.resolve(w)
    assert first.source == "benchmark"
    (entry,) = chunktune.DecisionCache(isolated / "cache.json").entries().values()
    assert entry.model_file == stored


@pytest.mark.parametrize(
    ("n", "t", "field"),
    [
        pytest.param(0, 2, "num_envs", id="envs0"),
        pytest.param(16, 0, "nthread", id="threads0"),
        pytest.param(16, 2.0, "nthread", id="threads-float"),
        pytest.param(2**31, 2, "num_envs", id="envs-past-int"),
    ],
)
async def test_bad_sizes_are_rejected(n: object, t: object, field: str) -> None:
    """num_envs and nthread must be integers >= 1."""
    with pytest.raises(InvalidArgumentError, match=field):
        await chunktune.resolve(Pool(n, t))  # type: ignore[arg-type]


class Pool:
    """A custom workload whose sizes are whatever it was given."""

    def __init__(self, num_envs: object, nthread: object) -> None:
        self.num_envs, self.nthread = num_envs, nthread

    def signature(self) -> dict[str, str]:
        return {}

    def run(self, chunk_size: int | None) -> float:
        return 1.0


@pytest.mark.parametrize(
    ("n", "t", "said"),
    [
        pytest.param(0, 2, "the workload's num_envs (Pool.num_envs) must be", id="envs0"),
        pytest.param(16, 2.0, "the workload's nthread (Pool.nthread) must be", id="threads-float"),
        pytest.param(16, 0, "pass chunk_size=None to it without resolving", id="threads0"),
    ],
)
async def test_a_bad_size_is_told_as_the_workload_s_attribute(
    n: object, t: object, said: str
) -> None:
    """A workload's bad num_envs or nthread is named as its own; nthread=0 says what to do."""
    with pytest.raises(InvalidArgumentError) as info:
        await chunktune.resolve(Pool(n, t), manual=1)  # type: ignore[arg-type]
    assert said in str(info.value)


async def test_unknown_policy_lists_known_ones() -> None:
    """An unknown policy name raises ConfigError listing the presets."""
    with pytest.raises(chunktune.ConfigError, match="balanced"):
        await chunktune.resolve(uneven(), policy="fastest")


async def test_an_unknown_policy_asked_for_does_not_blame_the_settings() -> None:
    """resolve(policy="fastest"): the error names the policy, not invalid settings."""
    with pytest.raises(chunktune.ConfigError) as info:
        await chunktune.resolve(uneven(), policy="fastest")
    assert str(info.value).startswith('unknown policy "fastest"; ')
    assert pickle.loads(pickle.dumps(info.value)).args == info.value.args  # as a Ray task's


async def test_policies_do_not_share_entries() -> None:
    """A seed-policy entry is not served to a balanced request."""
    w = uneven()
    a = await chunktune.resolve(w, policy="quick")
    b = await chunktune.resolve(w, policy="balanced")
    assert a.key != b.key and b.source == "benchmark"


async def test_progress_events_arrive_on_the_loop() -> None:
    """on_progress gets candidates, probes and done events on the event loop's thread."""
    events: list[ProgressEvent] = []
    threads: set[int] = set()

    def on_progress(event: ProgressEvent) -> None:
        events.append(event)
        threads.add(threading.get_ident())

    await chunktune.resolve(uneven(), on_progress=on_progress)
    assert events[0].kind == "candidates" and events[-1].kind == "done"
    assert threads == {threading.get_ident()}


async def test_a_progress_callback_that_always_raises_is_logged_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A callback failing on every event: the sweep goes on, one traceback per resolve."""
    calls = 0

    def on_progress(event: ProgressEvent) -> None:
        nonlocal calls
        calls += 1
        raise RuntimeError("the progress bar broke")

    with caplog.at_level(logging.DEBUG, logger="chunktune"):
        d = await chunktune.resolve(uneven(), on_progress=on_progress)
    assert d.source == "benchmark" and calls > 2
    errors = [r for r in caplog.records if r.levelno >= logging.WARNING and r.exc_info]
    assert len(errors) == 1 and "on_progress raised" in errors[0].getMessage()
    again = [r for r in caplog.records if "raised again" in r.getMessage()]
    assert len(again) == calls - 1 and all(r.exc_info for r in again)  # tracebacks kept


class SlowSim(SimulatedWorkload):
    """A simulated pool whose calls also take a little real time, so a cancel lands mid-sweep."""

    def __init__(self, *args: Any, sleep_s: float = 0.002, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.sleep_s = sleep_s

    def run(self, chunk_size: int | None) -> float:
        time.sleep(self.sleep_s)
        return super().run(chunk_size)


async def cancel_mid_sweep(workload: SimulatedWorkload) -> None:
    """Start a resolve of ``workload`` and cancel it once its first probe is reported."""
    started = anyio.Event()

    def on_progress(event: ProgressEvent) -> None:
        if event.kind == "probe":
            started.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: chunktune.resolve(workload, on_progress=on_progress))
        await started.wait()
        tg.cancel_scope.cancel()


async def test_cancel_mid_sweep_caches_nothing_and_next_resolve_works(isolated: Path) -> None:
    """Cancelling during the sweep stops it at a probe boundary, stores nothing, frees the locks."""
    w = uneven()
    slow = SlowSim(w.costs, nthread=8)
    await cancel_mid_sweep(slow)
    calls = slow.calls
    # the cancel returns at once; the abandoned sweep finishes its probe in flight and stops
    assert await anyio.to_thread.run_sync(wait_for_sweeps, 10.0)
    assert slow.calls <= calls + 1  # no probe started after the cancel took effect
    assert cache_entries(isolated) == {}
    with anyio.fail_after(60):  # hang guard: a sweep lock left held would block it for good
        d = await chunktune.resolve(w)
    assert d.source == "benchmark"


async def test_a_cancelled_resolve_s_callback_hears_nothing_after_it_raised() -> None:
    """Once a cancelled resolve has raised, its on_progress gets no event of the stopping sweep."""
    in_flight, left = threading.Event(), threading.Event()

    class HoldsItsSecondCall(SimulatedWorkload):
        def run(self, chunk_size: int | None) -> float:
            if self.calls == 1:  # in flight as the cancel lands; returns once it has
                in_flight.set()
                left.wait(30.0)
            return super().run(chunk_size)

    w = HoldsItsSecondCall(uneven().costs, nthread=8)
    heard: list[ProgressEvent] = []

    with anyio.fail_after(60):  # a hang detector, not a timing
        async with anyio.create_task_group() as tg:
            tg.start_soon(functools.partial(chunktune.resolve, w, on_progress=heard.append))
            assert await anyio.to_thread.run_sync(in_flight.wait, 30.0)
            tg.cancel_scope.cancel()
        await anyio.sleep(0.05)  # what the sweep sent before the cancel has reached the loop
        before = list(heard)
        left.set()  # the call in flight returns: the sweep reports it and stops
        assert await anyio.to_thread.run_sync(wait_for_sweeps, 30.0)
        await anyio.sleep(0.05)  # what the sweep's thread sent since has reached the loop
    assert w.calls == 2  # the call in flight was made, then no other
    assert heard == before


README_TEXT = (Path(__file__).resolve().parent.parent / "README.md").read_text()


class AwaitsSharers(SimulatedWorkload):
    """A simulated pool whose first call waits until ``sharers`` tasks wait on its flight:
    on a loaded machine a task may else start only after the sweep landed (a cache hit)."""

    def __init__(self, sharers: int) -> None:
        super().__init__(uneven().costs, nthread=8, noise=Noise(sigma=0.01))
        self.sharers = sharers

    def run(self, chunk_size: int | None) -> float:
        deadline = time.monotonic() + 60.0  # a hang guard, not a speed limit
        while not self.calls and time.monotonic() < deadline:
            with _flights._lock:
                if any(len(f.waiters) >= self.sharers for f in _flights._flights.values()):
                    break
            time.sleep(0.005)
        return super().run(chunk_size)


async def test_concurrent_resolves_share_one_sweep() -> None:
    """Five concurrent resolves of one key run one sweep, agree, and tell one callback once."""
    w = AwaitsSharers(4)
    sweeps: list[ProgressEvent] = []

    def on_progress(event: ProgressEvent) -> None:
        if event.kind == "done":  # one per sweep, however its field opened
            sweeps.append(event)

    results = await resolve_together(w, 5, on_progress=on_progress)
    # one function passed to every task is told of the one sweep once, not once per task
    assert len(sweeps) == 1
    assert [d.source for d in results].count("benchmark") == 1
    assert len({d.chunk_size for d in results}) == 1


async def test_a_task_that_shares_a_sweep_reports_no_probe_seconds() -> None:
    """Tasks that shared another's sweep spent no run() seconds: 0.0, and the reason says so."""
    results = await resolve_together(AwaitsSharers(2), 3)
    owner = [d for d in results if d.source == "benchmark"]
    shared = [d for d in results if d.source != "benchmark"]
    assert len(owner) == 1 and owner[0].probe_seconds > 0
    assert len(shared) == 2
    assert all(d.probe_seconds == 0.0 for d in shared)
    assert all(d.reason.startswith("shared a concurrent sweep") for d in shared), [
        d.reason for d in shared
    ]


async def test_a_task_that_shares_a_sweep_gets_its_events_as_the_readme_says() -> None:
    """A sharer's own on_progress gets the sweep's events; its decision is a shared "cache"."""
    w = AwaitsSharers(1)
    events: dict[str, list[str]] = {"first": [], "second": []}
    decisions: dict[str, chunktune.Decision] = {}

    async def one(name: str) -> None:
        decisions[name] = await chunktune.resolve(
            w, on_progress=lambda e: events[name].append(e.kind)
        )

    async with anyio.create_task_group() as tg:
        tg.start_soon(one, "first")
        tg.start_soon(one, "second")
    (owner,) = [name for name, d in decisions.items() if d.source == "benchmark"]
    (sharer,) = set(decisions) - {owner}
    assert "done" in events[owner] and events[sharer][0] == "waiting"
    told = events[sharer][1:]  # the owner's, from when the sharer joined
    assert told[-1] == "done" and told == events[owner][len(events[owner]) - len(told) :]
    shared = decisions[sharer]
    assert shared.source == "cache" and shared.probe_seconds == 0.0
    assert shared.reason.startswith("shared a concurrent sweep: ")
    readme = README_TEXT
    (cache_row,) = [line for line in readme.splitlines() if line.startswith('| `"cache"` |')]
    assert "shared a concurrent sweep: " in cache_row
    (progress_row,) = [line for line in readme.splitlines() if line.startswith("| `on_progress` |")]
    assert "shares another task's sweep of the same key" in progress_row
    assert "gets, on its own loop, a `waiting` event saying so, then that sweep's" in progress_row
    assert "is called once for each event, not once per task, and in the sweep's order" in (
        progress_row
    )


async def test_a_cancelled_sweep_leaves_the_machine_wide_lock_free() -> None:
    """Once a cancelled resolve's sweep thread has ended, the sweep lock can be taken at once."""
    await cancel_mid_sweep(SlowSim(uneven().costs, nthread=8))
    assert await anyio.to_thread.run_sync(wait_for_sweeps, 10.0)
    lock = _locks.sweep_lock()
    assert await anyio.to_thread.run_sync(lock.try_acquire)
    lock.release()


async def test_resolve_sync_on_the_loop_thread_raises() -> None:
    """resolve_sync called on the event loop's thread says to await resolve instead."""
    with pytest.raises(UsageError, match=r"await chunktune\.resolve"):
        chunktune.resolve_sync(uneven())


async def test_resolve_sync_on_the_loop_thread_raises_even_for_a_remembered_hit() -> None:
    """A hit resolve_sync could answer from memory still raises UsageError on the loop's thread."""
    w = uneven()
    settings = chunktune.load_settings()
    await chunktune.resolve(w, settings=settings, policy="quick")
    assert (await chunktune.resolve(w, settings=settings, policy="quick")).source == "cache"
    with pytest.raises(UsageError, match=r"await chunktune\.resolve"):
        chunktune.resolve_sync(w, settings=settings, policy="quick")


def _no_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make any resolve_sync that starts an event loop fail."""

    def refused(*_args: object, **_kw: object) -> None:
        raise AssertionError("resolve_sync started an event loop")

    monkeypatch.setattr(_resolve, "run_blocking", refused)


def test_resolve_sync_answers_a_repeat_from_memory_without_a_loop(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A repeated hit of one workload object in plain code starts no event loop or thread."""
    w, v = uneven(), uneven()
    settings = chunktune.load_settings()
    assert chunktune.resolve_sync(w, settings=settings, policy="quick").source == "benchmark"
    assert chunktune.resolve_sync(w, settings=settings, policy="quick").source == "cache"
    assert chunktune.resolve_sync(v, policy="quick").source == "cache"  # discovered settings
    _no_loop(monkeypatch)
    assert chunktune.resolve_sync(w, settings=settings, policy="quick").source == "cache"
    assert chunktune.resolve_sync(v, policy="quick").source == "cache"


class _Keyed(SimulatedWorkload):
    """The uneven batch, counting its signature() calls; ``broken`` makes them raise."""

    broken = False

    def __init__(self) -> None:
        super().__init__(uneven().costs, nthread=8, noise=Noise(sigma=0.01))
        self.signatures = 0

    def signature(self) -> dict[str, SignatureValue]:
        self.signatures += 1
        if self.broken:
            raise RuntimeError("no signature today")
        return super().signature()


def test_resolve_sync_answers_a_hit_without_a_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    """A hit of a new workload object in plain code starts no event loop; one signature()."""
    settings = chunktune.load_settings()
    assert chunktune.resolve_sync(_Keyed(), settings=settings, policy="quick").source == "benchmark"
    _no_loop(monkeypatch)
    w = _Keyed()
    hit = chunktune.resolve_sync(w, settings=settings, policy="quick")
    assert (hit.source, w.signatures) == ("cache", 1)
    assert hit.key and hit.reason.startswith("cached quick decision")


def test_resolve_sync_keys_a_miss_once() -> None:
    """A miss keyed on the caller's thread is swept on the loop without keying it again."""
    w = _Keyed()
    assert chunktune.resolve_sync(w, policy="quick").source == "benchmark"
    assert w.signatures == 1


def test_resolve_sync_falls_back_when_signature_raises(monkeypatch: pytest.MonkeyPatch) -> None:
    """A signature() that raises, keyed on the caller's thread, is native with the error."""
    _no_loop(monkeypatch)
    w = _Keyed()
    w.broken = True
    decision = chunktune.resolve_sync(w, policy="quick")
    assert (decision.source, decision.chunk_size) == ("fallback", None)
    assert "signature() failed (RuntimeError: no signature today)" in decision.reason


async def test_threads_and_tasks_on_one_cold_key_share_one_sweep(
    isolated: Path, anyio_backend: str
) -> None:
    """Threads, a loop's worker threads and tasks on one cold key share one sweep and answer."""
    (isolated / "chunktune.toml").write_text('policy = "quick"\n[log]\nstderr = "never"\n')
    calls = itertools.count()

    class Counted(SimulatedWorkload):
        """The uneven batch, counting its run() calls across threads."""

        def run(self, chunk_size: int | None) -> float:
            next(calls)
            return super().run(chunk_size)

    def make() -> Counted:
        return Counted(uneven().costs, nthread=8, noise=Noise(sigma=0.01))

    got: list[chunktune.Decision] = []
    plain = [
        threading.Thread(target=lambda: got.append(chunktune.resolve_sync(make())))
        for _ in range(6)
    ]
    for t in plain:
        t.start()

    async def task(on_worker: bool) -> None:
        w = make()
        if on_worker:
            got.append(await anyio.to_thread.run_sync(lambda: chunktune.resolve_sync(w)))
        else:
            got.append(await chunktune.resolve(w))

    with anyio.fail_after(120):  # a hang guard, not a time asserted
        async with anyio.create_task_group() as tg:
            for i in range(8):
                tg.start_soon(task, i % 2 == 0)
        for t in plain:
            await anyio.to_thread.run_sync(t.join)
    assert len(got) == 14
    assert [d.source for d in got].count("benchmark") == 1
    assert len({(d.chunk_size, d.key) for d in got}) == 1
    measured = next(calls)
    hit = await anyio.to_thread.run_sync(lambda: chunktune.resolve_sync(make()))
    assert hit.source == "cache" and next(calls) == measured + 1  # no run() since


async def test_a_hit_with_discovered_settings_takes_one_hop(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """await resolve(settings=None) of a new object discovers, keys and looks up in one hop."""
    assert (await chunktune.resolve(_Keyed(), policy="quick")).source == "benchmark"
    hops: list[object] = []
    real = hop

    async def counted(func: Callable[..., Any], *args: Any, **kw: Any) -> Any:
        hops.append(func)
        return await real(func, *args, **kw)

    for flow in (_resolve, _settings_read, _miss):
        monkeypatch.setattr(flow, "hop", counted)
    w = _Keyed()
    assert (await chunktune.resolve(w, policy="quick")).source == "cache"
    assert (len(hops), w.signatures) == (1, 1)


async def test_discovered_settings_under_a_hard_limit_are_keyed_on_the_loop() -> None:
    """A policy with hard_limit_s and settings=None still sweeps once, then hits."""
    quick = chunktune.load_settings().get_policy("quick")
    limited = attrs.evolve(quick, hard_limit_s=60.0)
    w = _Keyed()
    assert (await chunktune.resolve(w, policy=limited)).source == "benchmark"
    assert (await chunktune.resolve(_Keyed(), policy=limited)).source == "cache"
    assert w.signatures == 1


@pytest.mark.parametrize(
    ("kw", "source"),
    [
        pytest.param({"manual": 7}, "manual", id="manual"),
        pytest.param({"policy": "off"}, "disabled", id="disabled"),
        pytest.param({"policy": "quick", "num_envs": 8}, "trivial", id="trivial"),
    ],
)
def test_resolve_sync_answers_without_measuring_without_a_loop(
    monkeypatch: pytest.MonkeyPatch, kw: dict[str, Any], source: str
) -> None:
    """A manual, disabled or trivial answer from resolve_sync starts no event loop."""
    _no_loop(monkeypatch)
    num_envs = kw.pop("num_envs", 512)
    w = SimulatedWorkload.from_layout("blocked", num_envs=num_envs, nthread=8)
    assert chunktune.resolve_sync(w, **kw).source == source


async def test_resolve_sync_from_a_worker_thread_runs_on_the_loop() -> None:
    """From an anyio worker thread resolve_sync runs on the caller's loop and returns."""
    loop_thread = threading.get_ident()
    seen: set[int] = set()  # progress arrives on the loop that ran the resolve

    def resolve() -> chunktune.Decision:
        return chunktune.resolve_sync(
            uneven(), on_progress=lambda e: seen.add(threading.get_ident())
        )

    d = await anyio.to_thread.run_sync(resolve)
    assert d.source == "benchmark"
    assert seen == {loop_thread}


def test_resolve_sync_from_plain_code() -> None:
    """Without a loop resolve_sync runs its own."""
    d = chunktune.resolve_sync(uneven())
    assert d.source == "benchmark"
    assert isinstance(d, chunktune.Decision)


def test_errors_share_one_base() -> None:
    """Every chunktune error is a ChunktuneError and its built-in counterpart."""
    assert issubclass(chunktune.ConfigError, ChunktuneError)
    assert issubclass(chunktune.ConfigError, ValueError)
    assert issubclass(WorkloadError, TypeError)
    assert issubclass(InvalidArgumentError, ValueError)


class Recording(SimulatedWorkload):
    """A simulated workload that really takes a little time and records when each probe ran."""

    log: ClassVar[list[tuple[float, float, str]]] = []

    def run(self, chunk_size: int | None) -> float:
        import time

        start = time.monotonic()
        time.sleep(0.001)
        seconds = super().run(chunk_size)
        Recording.log.append((start, time.monotonic(), self.name))
        return seconds


async def test_two_keys_never_measure_at_the_same_time() -> None:
    """Concurrent sweeps of different keys take turns: no two probes overlap."""
    Recording.log = []
    a = Recording(uneven().costs, nthread=8, name="a")
    b = Recording(uneven(seed=1).costs, nthread=8, name="b")
    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: chunktune.resolve(a, policy="quick"))
        tg.start_soon(lambda: chunktune.resolve(b, policy="quick"))
    spans = sorted(Recording.log)
    assert {name for *_, name in spans} == {"a", "b"}
    assert all(prev[1] <= nxt[0] for prev, nxt in itertools.pairwise(spans))
    # one whole sweep, then the other: the names change exactly once
    names = [name for *_, name in spans]
    assert sum(1 for x, y in itertools.pairwise(names) if x != y) == 1


@pytest.mark.jumps
async def test_hard_limit_returns_while_run_is_blocked_and_later_sweeps_wait(
    isolated: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past hard_limit_s resolve returns native while run() blocks; later sweeps wait for it."""
    # the abandoned sweep keeps the sweep lock until that run() returns, then stops and
    # caches nothing
    import attrs

    from chunktune import _lock_wait

    monkeypatch.setattr(_lock_wait, "REPORT_AFTER_S", 0.0)
    blocked, release = threading.Event(), threading.Event()

    class Stuck(SimulatedWorkload):
        def clock(self) -> float:  # it blocks in real time: the budget runs on the wall clock
            return time.monotonic()

        def run(self, chunk_size: int | None) -> float:
            if self.calls == 2:  # the third call blocks until the test releases it
                blocked.set()
                release.wait()
            return super().run(chunk_size)

    pol = attrs.evolve(
        chunktune.load_settings().get_policy("balanced"), time_budget_s=0.5, hard_limit_s=1.0
    )
    stuck = Stuck(uneven().costs, nthread=8)
    other = uneven(seed=1)  # another key: it needs the machine, not this key's answer
    later: list[chunktune.Decision] = []
    waits: list[ProgressEvent] = []
    waiting = anyio.Event()

    def on_progress(event: ProgressEvent) -> None:
        if event.kind == "waiting":
            waits.append(event)
            waiting.set()

    async def resolve_other() -> None:
        later.append(await chunktune.resolve(other, on_progress=on_progress))

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(jump_when, blocked, 1.0)  # the limit runs out with run() blocked
            d = await chunktune.resolve(stuck, policy=pol)
        assert (d.source, d.chunk_size) == ("fallback", None)
        assert "hard limit" in d.reason and "abandoned" in d.reason
        assert d.probe_seconds > 0  # the two calls made before the one that blocked
        assert blocked.is_set() and not release.is_set()  # returned while run() is blocked
        async with anyio.create_task_group() as tg:
            tg.start_soon(resolve_other)
            await waiting.wait()
            assert other.calls == 0  # it waits for the machine, measuring nothing
            release.set()
    finally:
        release.set()
    assert later[0].source == "benchmark"
    assert f"pid {os.getpid()}" in waits[0].message
    assert stuck.calls == 3  # the abandoned sweep stopped after its run() in flight
    assert list(cache_entries(isolated)) == [later[0].key]


async def test_hard_limit_covers_waiting_for_the_sweep_lock(isolated: Path) -> None:
    """While another process holds the machine-wide sweep lock, the hard limit still applies."""
    import attrs
    import filelock

    pol = attrs.evolve(
        chunktune.load_settings().get_policy("balanced"), time_budget_s=0.05, hard_limit_s=0.1
    )
    w = uneven()
    with filelock.FileLock(isolated / "sweep.lock"):
        d = await chunktune.resolve(w, policy=pol)
    assert d.source == "fallback" and w.calls == 0
    # the same key, without the 0.1 s limit a loaded machine's sweep can outrun
    again = await chunktune.resolve(w, policy=attrs.evolve(pol, hard_limit_s=None))
    assert again.source == "benchmark"


async def test_a_raced_out_candidate_is_never_chosen() -> None:
    """A size raced out early keeps its old estimate in timings but cannot win later."""
    import attrs

    class Drifting:
        """Chunk 8 leads early then slows down; chunk 4 is raced out in round 3."""

        num_envs, nthread = 512, 8

        def __init__(self) -> None:
            self.seen: dict[int | None, int] = {}

        def signature(self) -> dict[str, str]:
            return {"kind": "drifting"}

        def run(self, chunk_size: int | None) -> float:
            n = self.seen[chunk_size] = self.seen.get(chunk_size, 0) + 1
            if chunk_size == 8:
                return 0.80 if n <= 3 else 0.93
            return {None: 1.0, 4: 0.90}[chunk_size]

    pol = attrs.evolve(
        chunktune.load_settings().get_policy("balanced"),
        prime=0,
        estimator="median",
        paired=False,  # raw estimates, so the stale one really looks best
        early_stop=False,
        max_rounds=12,
        candidates=chunktune.ExplicitCandidates(sizes=(4, 8)),
    )
    d = await chunktune.resolve(Drifting(), policy=pol)
    assert d.raced_out == (4,)
    assert d.timings[4] < d.timings[8]
    assert d.chunk_size == 8


def test_native_asyncio_cancel_stops_the_worker(isolated: Path) -> None:
    """task.cancel() on an asyncio task awaiting resolve stops the sweep and caches nothing."""
    import asyncio

    slow = SlowSim(uneven().costs, nthread=8, sleep_s=0.005)
    at_cancel: list[int] = []

    async def main() -> None:
        probing = asyncio.Event()

        def on_progress(event: ProgressEvent) -> None:
            if event.kind == "probe":
                probing.set()

        task = asyncio.ensure_future(chunktune.resolve(slow, on_progress=on_progress))
        await probing.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        at_cancel.append(slow.calls)

    asyncio.run(main())
    assert wait_for_sweeps(10.0)  # the probe in flight when the task was cancelled may finish
    assert slow.calls <= at_cancel[0] + 1  # and no other starts
    assert cache_entries(isolated) == {}
    assert chunktune.resolve_sync(uneven()).source == "benchmark"


def test_one_cache_object_per_file_so_hits_do_not_reparse(isolated: Path) -> None:
    """Settings naming the same file share one DecisionCache; an unchanged file is parsed once."""
    from chunktune._cache_parsed import Parsed
    from chunktune._keys import cache_for

    s = chunktune.load_settings()
    assert cache_for(s) is cache_for(chunktune.load_settings())
    w = uneven()
    chunktune.resolve_sync(w, settings=s)
    cache = cache_for(s)
    assert cache is not None
    parsed = cache._file.parse  # count re-parses of the file from here on
    calls = {"n": 0}

    def counting(raw: bytes, *, mtime: float) -> Parsed:
        calls["n"] += 1
        return parsed(raw, mtime=mtime)

    cache._file.parse = counting  # type: ignore[method-assign]
    for _ in range(3):
        assert chunktune.resolve_sync(w, settings=s).source == "cache"
    assert calls["n"] <= 1


class Keyed(SimulatedWorkload):
    """A simulated workload with the signature the test gives it (unkeyable values too)."""

    extra: dict[str, Any]  # any value a workload might put in its signature

    def signature(self) -> dict[str, SignatureValue]:
        return {**super().signature(), **self.extra}


@pytest.mark.parametrize("suffix", [".json", ".toml"])
async def test_numpy_scalars_in_a_signature_are_keyed_and_cached(
    isolated: Path, monkeypatch: pytest.MonkeyPatch, suffix: str
) -> None:
    """numpy scalars in signature() are taken as numbers: measured once, stored, then a hit."""
    import numpy as np

    monkeypatch.setenv("CHUNKTUNE_CACHE", str(isolated / f"cache{suffix}"))
    w = Keyed(uneven().costs, nthread=8)
    w.extra = {"n": np.int64(5), "dt": np.float64(0.002), "on": np.bool_(True)}
    first = await chunktune.resolve(w)
    assert first.source == "benchmark"
    assert (await chunktune.resolve(w)).source == "cache"


@pytest.mark.parametrize(
    "value",
    [
        pytest.param(None, id="None"),
        pytest.param({1, 2}, id="set"),
        pytest.param(b"xml", id="bytes"),
        pytest.param(object(), id="object"),
    ],
)
async def test_an_unkeyable_signature_is_rejected_before_measuring(value: object) -> None:
    """A signature value that cannot be keyed raises WorkloadError naming it; nothing runs."""
    w = Keyed(uneven().costs, nthread=8)
    w.extra = {"bad": value}
    with pytest.raises(WorkloadError, match="'bad'"):
        await chunktune.resolve(w)
    assert w.calls == 0


async def test_run_may_return_numpy_seconds() -> None:
    """run() returning np.float32 or a 0-d array is measured like a float."""
    import numpy as np

    class NumpySeconds(SimulatedWorkload):
        def run(self, chunk_size: int | None) -> float:
            seconds = super().run(chunk_size)
            return np.float32(seconds) if self.calls % 2 else np.array(seconds)  # type: ignore[return-value]

    d = await chunktune.resolve(NumpySeconds(uneven().costs, nthread=8))
    assert d.source == "benchmark" and d.timings


async def test_run_may_return_decimal_or_fraction_seconds() -> None:
    """run() returning a Decimal or a Fraction of seconds is measured like a float."""
    import decimal
    import fractions

    class ExactSeconds(SimulatedWorkload):
        def run(self, chunk_size: int | None) -> float:
            seconds = super().run(chunk_size)
            exact = decimal.Decimal(seconds) if self.calls % 2 else fractions.Fraction(seconds)
            return exact  # type: ignore[return-value]

    d = await chunktune.resolve(ExactSeconds(uneven().costs, nthread=8))
    assert d.source == "benchmark" and d.timings


async def test_resolve_sync_in_a_plain_callback_of_the_loop_raises() -> None:
    """resolve_sync from a loop callback (call_soon) raises UsageError and creates no coroutine."""
    import sniffio

    schedule: Callable[[Callable[[], None]], object]  # a plain callback of the running loop
    if sniffio.current_async_library() == "asyncio":
        import asyncio

        loop = asyncio.get_running_loop()
        schedule = loop.call_soon
    else:
        import trio

        schedule = trio.lowlevel.current_trio_token().run_sync_soon
    outcome: list[BaseException | None] = []
    done = anyio.Event()

    def callback() -> None:
        try:
            chunktune.resolve_sync(uneven())
        except BaseException as exc:
            outcome.append(exc)
        else:
            outcome.append(None)
        done.set()

    schedule(callback)
    await done.wait()
    assert isinstance(outcome[0], UsageError)


def test_a_stretched_sweep_cut_short_says_so() -> None:
    """A stretched sweep whose calls slow down ends partial, saying the stretched budget did it."""
    w = lognormal_32(4, slow_after=45)
    settings = chunktune.load_settings()
    policy = settings.get_policy("patient")
    d = chunktune.resolve_sync(w, settings=settings, policy=attrs.evolve(policy, seed=4))
    assert d.partial and w.clock() > policy.time_budget_s
    assert "the budget was extended to" in d.reason
    assert d.reason.endswith("(partial: the stretched budget ended the sweep)")


class _StuckAtThirdCall(SimulatedWorkload):
    """The uneven pool on 8 threads whose third call (the owner's) blocks until ``release``."""

    def __init__(self, blocked: threading.Event, release: threading.Event) -> None:
        super().__init__(uneven().costs, nthread=8)
        self.blocked, self.release = blocked, release

    def run(self, chunk_size: int | None) -> float:
        if self.calls == 2:
            self.blocked.set()
            self.release.wait()
        return super().run(chunk_size)


async def _jump_once_shared(seconds: float) -> None:
    """Once a task waits on another's flight, jump the loop's clock ``seconds`` on."""
    with anyio.fail_after(60):  # a hang guard, not a timing
        while not any(f.waiters for f in _flights._flights.values()):  # noqa: ASYNC110
            await anyio.sleep(0.001)
    await jump(seconds)


@pytest.mark.jumps
async def test_hard_limit_bounds_a_task_that_shares_another_tasks_sweep() -> None:
    """A task sharing a sweep with no limit returns native at its own hard_limit_s."""
    blocked, release = threading.Event(), threading.Event()
    balanced = chunktune.load_settings().get_policy("balanced")
    # the same key: budgets and limits are no part of a policy's identity
    limited = attrs.evolve(balanced, time_budget_s=0.1, hard_limit_s=1.0)
    stuck = _StuckAtThirdCall(blocked, release)
    owner: list[chunktune.Decision] = []

    async def own() -> None:
        owner.append(await chunktune.resolve(stuck, policy=balanced))

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(own)
            await anyio.to_thread.run_sync(blocked.wait)
            with anyio.fail_after(60):  # a hang detector, not a timing
                async with anyio.create_task_group() as sharing:
                    sharing.start_soon(_jump_once_shared, 1.0)  # the limit: while it shares
                    shared = await chunktune.resolve(stuck, policy=limited)
            assert (shared.source, shared.chunk_size) == ("fallback", None)
            assert "another task of this process" in shared.reason
            assert not owner  # the owner is still measuring
            release.set()
    finally:
        release.set()
    assert owner[0].source == "benchmark"


@pytest.mark.jumps
async def test_a_sharer_is_not_handed_the_fallback_of_the_owner_s_own_hard_limit() -> None:
    """A task sharing a sweep whose owner gave up at its hard_limit_s measures the key itself."""
    blocked, release = threading.Event(), threading.Event()
    balanced = chunktune.load_settings().get_policy("balanced")
    # the same key: budgets and limits are no part of a policy's identity
    # uneven()'s calls: a 1.5 s budget (the least that times candidates) reaches the third
    limited = attrs.evolve(balanced, time_budget_s=1.5, hard_limit_s=1.5)
    patient = attrs.evolve(balanced, time_budget_s=3.0)
    stuck = _StuckAtThirdCall(blocked, release)
    owner: list[chunktune.Decision] = []
    sharer: list[chunktune.Decision] = []

    owned = anyio.Event()

    async def own() -> None:
        owner.append(await chunktune.resolve(stuck, policy=limited))
        owned.set()

    async def share() -> None:
        sharer.append(await chunktune.resolve(stuck, policy=patient))

    try:
        with anyio.fail_after(60):  # a hang detector, not a timing
            async with anyio.create_task_group() as tg:
                tg.start_soon(own)
                assert await anyio.to_thread.run_sync(blocked.wait, 30.0)
                tg.start_soon(share)  # waits on the owner's flight
                await _jump_once_shared(1.5)  # the owner's limit, with the sharer waiting
                await owned.wait()
                release.set()  # the abandoned call returns; the sharer may take the machine
    finally:
        release.set()
    assert owner[0].source == "fallback" and "hard limit" in owner[0].reason
    assert sharer[0].source == "benchmark", sharer[0].reason
    assert "hard limit" not in sharer[0].reason


@pytest.mark.jumps
async def test_hard_limit_covers_a_signature_that_blocks() -> None:
    """A workload whose signature() never returns: native at hard_limit_s, the thread left."""
    keying, release = threading.Event(), threading.Event()

    class Unkeyable(SimulatedWorkload):
        def signature(self) -> dict[str, SignatureValue]:
            keying.set()
            # hang guard: a resolve that waited for signature() returns at last and fails
            release.wait(60)
            return dict(super().signature())

    pol = attrs.evolve(
        # room for a loaded machine to read the settings file before the limit: past it the
        # fallback would name that read, not signature()
        chunktune.load_settings().get_policy("balanced"),
        time_budget_s=0.05,
        hard_limit_s=1.0,
    )
    w = Unkeyable(uneven().costs, nthread=8)
    try:
        with anyio.fail_after(60):  # a hang detector, not a timing
            async with anyio.create_task_group() as tg:
                tg.start_soon(jump_when, keying, 1.0)  # the limit: inside signature()
                d = await chunktune.resolve(w, policy=pol)
    finally:
        release.set()
    assert (d.source, d.chunk_size, w.calls, d.key) == ("fallback", None, 0, "")  # never keyed
    assert "hard limit of 1 s" in d.reason and "signature()" in d.reason


@pytest.mark.jumps
async def test_hard_limit_covers_a_re_check_of_the_cache_that_blocks(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The cache's re-check under the key's lock blocking: native at hard_limit_s, left behind."""
    rechecking, release = threading.Event(), threading.Event()
    checked: list[str] = []

    def stuck_lookup(*args: object) -> None:
        checked.append("re-check")
        rechecking.set()
        release.wait(20)  # hang guard: a resolve that waited for it returns at last

    monkeypatch.setattr("chunktune._miss.lookup", stuck_lookup)
    pol = attrs.evolve(
        chunktune.load_settings().get_policy("balanced"), time_budget_s=0.5, hard_limit_s=1.0
    )
    w = uneven()
    try:
        with anyio.fail_after(60):  # a hang detector, not a timing
            async with anyio.create_task_group() as tg:
                tg.start_soon(jump_when, rechecking, 1.0)  # the limit: inside the re-check
                d = await chunktune.resolve(w, policy=pol)
        left_behind = not release.is_set()
    finally:
        release.set()
    assert checked == ["re-check"] and left_behind and w.calls == 0
    assert (d.source, d.chunk_size) == ("fallback", None)
    # the key's lock was held by then: no other process was measuring this workload
    assert d.reason.endswith("before the sweep started; nothing was cached"), d.reason


@pytest.mark.parametrize("hard_limit_s", [None, 30.0], ids=["no-limit", "limit"])
async def test_signature_runs_in_a_thread_of_its_own_only_under_a_hard_limit(
    hard_limit_s: float | None,
) -> None:
    """Keying with settings given: a hop's worker thread, a daemon thread of its own at a limit."""
    ran_in: list[str] = []

    class Noted(SimulatedWorkload):
        def signature(self) -> dict[str, SignatureValue]:
            ran_in.append(threading.current_thread().name)
            return dict(super().signature())

    settings = chunktune.load_settings()
    pol = attrs.evolve(settings.get_policy("balanced"), hard_limit_s=hard_limit_s)
    d = await chunktune.resolve(Noted(uneven().costs, nthread=8), policy=pol, settings=settings)
    assert d.source == "benchmark" and len(ran_in) == 1
    assert (ran_in[0] == KEYING_THREAD) == (hard_limit_s is not None), ran_in


def test_a_process_whose_signature_blocks_for_good_still_exits(tmp_path: Path) -> None:
    """The signature() left behind at hard_limit_s never holds up the interpreter's exit."""
    import subprocess
    import sys

    script = (
        "import threading, attrs, chunktune\n"
        "from chunktune.sim import SimulatedWorkload, env_costs\n"
        "class Unkeyable(SimulatedWorkload):\n"
        "    def signature(self):\n"
        "        threading.Event().wait()\n"
        "pol = attrs.evolve(chunktune.load_settings().get_policy('balanced'),\n"
        "                   time_budget_s=0.05, hard_limit_s=0.2)\n"
        "w = Unkeyable(env_costs('blocked', 64), nthread=2)\n"
        "print(chunktune.resolve_sync(w, policy=pol).source, flush=True)\n"
    )
    env = {**os.environ, "CHUNKTUNE_CACHE": str(tmp_path / "c.json")}
    done = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120
    )
    assert (done.returncode, done.stdout.strip()) == (0, "fallback"), done.stderr


def test_a_process_that_ends_while_its_entry_is_written_waits_for_the_write(
    tmp_path: Path,
) -> None:
    """Returned at hard_limit_s while storing, then the process ends: the entry is written."""
    import subprocess
    import sys

    script = (
        "import threading, time, attrs, chunktune\n"
        "from chunktune._cache import DecisionCache\n"
        "from chunktune.sim import SimulatedWorkload\n"
        "returned, put = threading.Event(), DecisionCache.put\n"
        "def slow_put(self, *args, **kwargs):\n"
        "    returned.wait(60)  # the write goes on once resolve has returned\n"
        "    time.sleep(0.5)  # and takes a while: the interpreter is exiting meanwhile\n"
        "    return put(self, *args, **kwargs)\n"
        "DecisionCache.put = slow_put\n"
        "pol = attrs.evolve(chunktune.load_settings().get_policy('balanced'),\n"
        "                   time_budget_s=0.5, hard_limit_s=1.0)  # modeled: worth storing\n"
        "w = SimulatedWorkload.from_layout('blocked', num_envs=64, nthread=8)\n"
        "print(chunktune.resolve_sync(w, policy=pol).source, flush=True)\n"
        "returned.set()\n"
    )
    cache = tmp_path / "c.json"
    env = {**os.environ, "CHUNKTUNE_CACHE": str(cache)}
    done = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120
    )
    assert (done.returncode, done.stdout.strip()) == (0, "benchmark"), done.stderr
    assert len(json.loads(cache.read_text())["entries"]) == 1


def _write_waits(monkeypatch: pytest.MonkeyPatch) -> threading.Event:
    """An event set once a cache write has found its write lock held (a try timed out)."""
    from chunktune import _cache_lock, _lock_files

    waits, real = threading.Event(), _lock_files.take  # what _cache_lock calls by that name

    def noted(lock: filelock.BaseFileLock, *, timeout: float) -> None:
        try:
            real(lock, timeout=timeout)
        except filelock.Timeout:
            waits.set()
            raise

    monkeypatch.setattr(_cache_lock, "take", noted)
    return waits


@pytest.mark.jumps
async def test_a_decision_stuck_behind_the_cache_write_lock_returns_at_the_hard_limit(
    isolated: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A decision behind another process's cache write lock returns at the limit; stored later."""
    # its entry is written once the lock is free

    from chunktune import _cache_lock

    monkeypatch.setattr(_cache_lock, "WRITE_STALL_S", 600.0)  # a stall this write waits out
    writing = _write_waits(monkeypatch)
    cache = chunktune.DecisionCache(isolated / "cache.json")
    w, pol = storable()  # a budget of modeled seconds that times candidates: worth storing
    async with holding_async(cache.lock_path) as holder:
        with anyio.fail_after(60):  # a hang detector, not a timing
            async with anyio.create_task_group() as tg:
                tg.start_soon(jump_when, writing, 1.0)  # the limit: while the write waits
                d = await chunktune.resolve(w, policy=pol)
        assert holder.returncode is None  # returned while the lock was still held
    assert d.source == "benchmark" and d.key and len(d.timings) > 1
    # the abandoned write goes on once the lock is free
    assert await anyio.to_thread.run_sync(cached_eventually, cache.path, d.key)
    again = await chunktune.resolve(w, policy=pol)
    assert (again.source, again.chunk_size) == ("cache", d.chunk_size)


def stores_ended() -> None:
    """Wait for the threads that write sweeps' entries (blocking: run it in a thread)."""
    for thread in threading.enumerate():
        if thread.name == STORE_THREAD:
            thread.join(60)


@pytest.mark.jumps
async def test_the_key_stays_locked_while_an_entry_returned_at_the_hard_limit_is_written(
    isolated: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Returned at the hard limit, a resolve keeps the key locked until its entry is written."""
    # so another process waiting for the key reads that entry and measures nothing
    from chunktune import _cache_lock

    monkeypatch.setattr(_cache_lock, "WRITE_STALL_S", 600.0)  # a stall this write waits out
    writing = _write_waits(monkeypatch)
    cache = chunktune.DecisionCache(isolated / "cache.json")
    w, pol = storable()
    async with holding_async(cache.lock_path):
        with anyio.fail_after(60):  # a hang detector, not a timing
            async with anyio.create_task_group() as tg:
                tg.start_soon(jump_when, writing, 1.0)  # the limit: while the write waits
                d = await chunktune.resolve(w, policy=pol)
        assert d.source == "benchmark"
        key = _locks.key_lock(Path(cache.key_lock(d.key).lock_file))
        assert not await anyio.to_thread.run_sync(key.try_acquire)
    await anyio.to_thread.run_sync(stores_ended)
    assert await anyio.to_thread.run_sync(key.try_acquire)
    key.release()
    assert d.key in cache_entries(isolated)


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_a_process_that_exits_while_an_entry_is_written_lets_it_land(
    tmp_path: Path, backend: str
) -> None:
    """The process's exit waits for an entry still being written (on trio too): it lands."""
    import subprocess
    import sys

    script = (
        "import anyio, attrs, chunktune\n"
        "from chunktune import _cache_lock\n"
        "_cache_lock.WRITE_STALL_S = 600.0\n"
        "from chunktune.sim import Noise, SimulatedWorkload\n"
        "w = SimulatedWorkload.from_layout('blocked', num_envs=64, nthread=8,\n"
        "                                  noise=Noise(sigma=0.01))\n"
        "pol = attrs.evolve(chunktune.load_settings().get_policy('balanced'),\n"
        "                   time_budget_s=0.5, hard_limit_s=1.0)\n"
        "async def main():\n"
        "    return await chunktune.resolve(w, policy=pol)\n"
        f"d = anyio.run(main, backend={backend!r})\n"
        "print(d.source, d.key, flush=True)\n"
    )
    cache = tmp_path / "c.json"
    here = str(Path(chunktune.__file__).parents[1])  # this chunktune, not an installed one
    env = {**os.environ, "CHUNKTUNE_CACHE": str(cache), "PYTHONPATH": here}
    with (
        holding(tmp_path / "c.json.lock") as holder,
        subprocess.Popen(
            [sys.executable, "-c", script], env=env, stdout=subprocess.PIPE, text=True
        ) as child,
    ):
        assert child.stdout is not None
        source, key = child.stdout.readline().split()
        assert source == "benchmark" and holder.poll() is None  # returned; write lock held
        holder.kill()  # the write goes on: the child exits once it is done
        assert child.wait(120) == 0
    assert key in json.loads(cache.read_text())["entries"]


async def test_a_task_that_takes_over_from_an_owner_cancelled_while_storing_reads_its_entry(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An owner cancelled while storing: the task sharing its sweep reads the entry, no sweep."""
    monkeypatch.setattr(_lock_wait, "REPORT_AFTER_S", 0.0)  # a wait for the key is reported at once
    writing, write = threading.Event(), threading.Event()
    put = chunktune.DecisionCache.put

    def held_put(cache: chunktune.DecisionCache, key: str, entry: chunktune.CacheEntry) -> bool:
        writing.set()
        write.wait(60)
        return put(cache, key, entry)

    monkeypatch.setattr(chunktune.DecisionCache, "put", held_put)
    w = uneven()
    measuring, waits_or_measures = anyio.Event(), anyio.Event()
    seen: list[str] = []
    shared: list[chunktune.Decision] = []

    def owner_progress(event: ProgressEvent) -> None:
        if event.kind == "probe":
            measuring.set()

    def waiter_progress(event: ProgressEvent) -> None:
        seen.append(event.kind)
        if event.kind in ("waiting", "candidates"):
            waits_or_measures.set()

    owner = anyio.CancelScope()

    async def own() -> None:
        with owner:
            await chunktune.resolve(w, on_progress=owner_progress)

    async def wait() -> None:
        shared.append(await chunktune.resolve(w, on_progress=waiter_progress))

    with anyio.fail_after(60):  # a hang detector, not a timing
        async with anyio.create_task_group() as tg:
            tg.start_soon(own)
            await measuring.wait()
            tg.start_soon(wait)  # shares the owner's flight: the owner is still storing
            await anyio.to_thread.run_sync(writing.wait)
            owner.cancel()
            await waits_or_measures.wait()
            write.set()
    assert owner.cancelled_caught
    assert shared[0].source == "cache" and "candidates" not in seen


async def test_resolve_since_counts_the_hard_limit_from_the_time_given() -> None:
    """A caller that spent the limit before handing over gets native, nothing measured."""
    from chunktune._request import ask
    from chunktune._resolve import resolve_since

    pol = attrs.evolve(
        chunktune.load_settings().get_policy("balanced"), time_budget_s=0.05, hard_limit_s=5.0
    )
    w = uneven()
    asked = ask(w, settings=None, policy=pol, manual=None, refresh=False, on_progress=None)
    d = await resolve_since(anyio.current_time() - 10.0, asked)
    assert (d.source, d.chunk_size, w.calls) == ("fallback", None, 0)
    assert "hard limit of 5 s" in d.reason
    fresh = await resolve_since(anyio.current_time(), asked)
    assert fresh.source == "benchmark"


async def test_a_stretched_budget_stays_inside_what_the_hard_limit_still_leaves() -> None:
    """extend_budget with 3 s of a 10 s hard limit left: the sweep's calls stay inside 3 s."""
    from chunktune._request import ask
    from chunktune._resolve import resolve_since

    pol = attrs.evolve(
        chunktune.load_settings().get_policy("balanced"),
        time_budget_s=0.5,
        hard_limit_s=10.0,
        extend_budget=True,
    )
    # 0.27 s calls: judging a candidate wants a stretch to about 9 s
    w = SimulatedWorkload([4 * c for c in uneven().costs], nthread=8, noise=Noise(sigma=0.05))
    asked = ask(w, settings=None, policy=pol, manual=None, refresh=False, on_progress=None)
    d = await resolve_since(anyio.current_time() - 7.0, asked)
    assert 0.0 < d.probe_seconds <= 3.0


def test_a_child_forked_mid_sweep_owns_no_flight_and_holds_no_lock() -> None:
    """After a fork the child starts afresh: the parent's flights and local locks are not its."""
    from chunktune import _flights, _locks

    flight, owner = _flights.board("k" * 32)
    local = _locks.Lock(Path("/nonexistent/sweep.lock"), what="a lock", degrade="local")
    lock, _ = local._local()
    lock.acquire()  # as a parent's sweep thread holds a degraded sweep lock
    try:
        assert owner
        assert run_forked(lambda: _child_starts_afresh("k" * 32), hang_guard_s=60) == 0
    finally:
        lock.release()
        _flights.land(flight, None)


def _child_starts_afresh(key: str) -> None:
    from chunktune import _flights, _locks

    _, owner = _flights.board(key)
    local = _locks.Lock(Path("/nonexistent/sweep.lock"), what="a lock", degrade="local")
    lock, _ = local._local()
    got = lock.acquire(timeout=5)
    raise SystemExit(0 if owner and got else 1)


_REPORTED = re.compile(r"^chunk_size=\S+ \(native=\d+, (\w+)\): ")


def test_every_answer_of_resolve_sync_is_reported(caplog: pytest.LogCaptureFixture) -> None:
    """resolve_sync reports a manual size, a policy that never measures, a sweep and a hit."""
    w = uneven()
    # the hit at DEBUG: the sweep just told its key at INFO
    with caplog.at_level(logging.DEBUG, logger="chunktune"):
        chunktune.resolve_sync(w, manual=7, settings=chunktune.load_settings())
        chunktune.resolve_sync(w, policy="off")
        chunktune.resolve_sync(w)
        chunktune.resolve_sync(w)
    said = [m.group(1) for r in caplog.records if (m := _REPORTED.match(r.getMessage()))]
    assert said == ["manual", "disabled", "benchmark", "cache"]


async def test_a_policy_that_never_measures_is_named_in_its_decision() -> None:
    """The decision of a policy that never measures names that policy."""
    assert (await chunktune.resolve(uneven(), policy="off")).policy == "off"


async def test_a_manual_size_wins_with_settings_given() -> None:
    """A manual chunk size with settings given is returned as is; nothing runs."""
    w = uneven()
    d = await chunktune.resolve(w, manual=7, settings=chunktune.load_settings())
    assert (d.chunk_size, d.source, w.calls) == (7, "manual", 0)


async def test_with_the_cache_disabled_a_shared_sweep_is_not_answered_again(
    tmp_path: Path,
) -> None:
    """With the cache off, a sweep two tasks shared is not repeated from memory: it measures."""
    config = tmp_path / "nocache.toml"
    config.write_text("[cache]\nenabled = false\n")
    w, settings = AwaitsSharers(1), chunktune.load_settings(config)
    sources: list[str] = []

    async def one() -> None:
        sources.append((await chunktune.resolve(w, settings=settings)).source)

    async with anyio.create_task_group() as tg:
        tg.start_soon(one)
        tg.start_soon(one)
    assert sorted(sources) == ["benchmark", "cache"]
    assert (await chunktune.resolve(w, settings=settings)).source == "benchmark"


async def test_a_workload_failing_while_confirming_counts_the_confirming_calls() -> None:
    """A fallback's probe_seconds counts the seconds of the confirming calls before the failure."""
    full = uneven()
    events: list[ProgressEvent] = []
    assert (await chunktune.resolve(full, on_progress=events.append)).source == "benchmark"
    assert [e.kind for e in events if e.kind in ("warmup", "probe", "confirm")][-2:] == [
        "confirm",
        "confirm",
    ]

    class BrokenAtItsLastCall(SimulatedWorkload):
        def run(self, chunk_size: int | None) -> float:
            if self.calls >= full.calls - 1:
                raise RuntimeError("simulator exploded")
            return super().run(chunk_size)

    w = BrokenAtItsLastCall(full.costs, nthread=8, noise=Noise(sigma=0.01))
    d = await chunktune.resolve(w, refresh=True)
    assert d.source == "fallback" and w.calls == full.calls - 1
    assert d.probe_seconds == pytest.approx(sum(seconds for _c, seconds in w.history))


async def test_a_miss_keys_its_workload_once() -> None:
    """A resolve that discovers its settings and misses calls signature() once, not again."""
    w = _Keyed()
    assert (await chunktune.resolve(w)).source == "benchmark"
    assert w.signatures == 1


@attrs.define
class _Stall:
    """Calls held as on a stalled file system until :meth:`end` (60 s at most: a hang guard)."""

    release: threading.Event = attrs.field(factory=threading.Event)
    entered: list[None] = attrs.field(factory=list)
    freed: list[bool] = attrs.field(factory=list)  # each: let go by end() (False: the guard)
    stuck: threading.Event = attrs.field(factory=threading.Event)  # a call is held

    def hold(self) -> None:
        self.entered.append(None)
        self.stuck.set()
        self.freed.append(self.release.wait(60))

    def end(self) -> list[bool]:
        """Let the calls go; what :attr:`freed` says once each has come out (blocking)."""
        self.release.set()
        deadline = time.monotonic() + 60
        while len(self.freed) < len(self.entered) and time.monotonic() < deadline:
            time.sleep(0.01)
        return self.freed


def _stalled(
    monkeypatch: pytest.MonkeyPatch, name: str, stalls: Callable[[_locks.Lock], bool]
) -> _Stall:
    """``Lock.<name>`` blocks, as on a stalled file system, for the locks ``stalls`` picks."""
    stall, real = _Stall(), getattr(_locks.Lock, name)

    def stalled(self: _locks.Lock) -> Any:
        if stalls(self):
            stall.hold()
        return real(self)

    monkeypatch.setattr(_locks.Lock, name, stalled)
    return stall


def _key_lock_free(lock_file: Path, within_s: float = 60.0) -> bool:
    """Whether the key lock ``lock_file`` can be taken within ``within_s`` (blocking)."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        lock = _locks.key_lock(lock_file)
        if lock.try_acquire():
            lock.release()
            return True
        time.sleep(0.05)
    return False


def _quick_limit() -> chunktune.Policy:
    """``balanced`` with a 0.05 s budget and a hard limit of 1 s: room for a loaded machine
    to reach the lock's try (settings read, keyed, the cache looked up) before it passes."""
    return attrs.evolve(
        chunktune.load_settings().get_policy("balanced"), time_budget_s=0.05, hard_limit_s=1.0
    )


async def _resolved_past_a_stalled_try(
    monkeypatch: pytest.MonkeyPatch, w: Any, pol: chunktune.Policy, *, sweep_lock: bool
) -> chunktune.Decision:
    """``resolve(w)`` while tries at the sweep lock (or else at key locks) do not answer;
    asserts it returned while the try was still stuck."""
    stall = _stalled(
        monkeypatch, "try_acquire", lambda lock: (lock.what == "the sweep lock") == sweep_lock
    )
    assert pol.hard_limit_s is not None
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(jump_when, stall.stuck, pol.hard_limit_s)  # the limit: with it stuck
            d = await chunktune.resolve(w, policy=pol)
    finally:
        freed = await anyio.to_thread.run_sync(stall.end)
    assert freed == [True]  # returned while the try was still stuck
    return d


@pytest.mark.jumps
async def test_hard_limit_covers_a_try_at_the_key_lock_that_a_stalled_file_system_holds(
    isolated: Path,
) -> None:
    """A key lock's try that does not answer: native at the limit; the lock it takes is freed."""
    pol, w = _quick_limit(), uneven()
    # its own patch: monkeypatch.undo() would undo `isolated` too, and the resolve below
    # would read and write the cache of whoever runs the tests
    with pytest.MonkeyPatch.context() as stalling:
        d = await _resolved_past_a_stalled_try(stalling, w, pol, sweep_lock=False)
    assert (d.source, d.chunk_size, w.calls) == ("fallback", None, 0)
    assert "this key's lock" in d.reason and "had not answered" in d.reason
    # the try left behind takes the lock once the file system answers, and lets it go
    assert await anyio.to_thread.run_sync(_key_lock_free, isolated / "locks" / f"{d.key}.lock")
    assert cache_entries(isolated) == {}
    # the same key, without the 1 s limit a loaded machine's sweep can outrun
    again = await chunktune.resolve(w, policy=attrs.evolve(pol, hard_limit_s=None))
    assert (again.source, again.key) == ("benchmark", d.key)


@pytest.mark.jumps
async def test_hard_limit_covers_a_look_at_the_holder_that_a_stalled_file_system_holds(
    isolated: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another process holds the key; reading its note does not answer: native at the limit."""
    monkeypatch.setattr(_lock_wait, "REPORT_AFTER_S", 0.0)  # the holder is looked at at once
    pol = _quick_limit()  # 1 s: the wait (and its look at the holder) is reached by then
    w = uneven()
    key = (await chunktune.resolve(w, policy=pol, refresh=True)).key  # then forgotten
    cache = chunktune.DecisionCache(isolated / "cache.json")
    assert cache.update({key: None})
    stall = _stalled(monkeypatch, "holder", lambda lock: True)
    async with holding_async(Path(cache.key_lock(key).lock_file)):
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(jump_when, stall.stuck, 1.0)  # the limit: with a look stuck
                d = await chunktune.resolve(w, policy=pol)
        finally:
            freed = await anyio.to_thread.run_sync(stall.end)
    assert freed and all(freed)  # returned while the looks were still stuck
    assert (d.source, d.chunk_size, d.key) == ("fallback", None, key)
    assert "while another process was measuring this workload" in d.reason


@pytest.mark.jumps
async def test_hard_limit_names_the_sweep_lock_whose_try_a_stalled_file_system_holds(
    isolated: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The sweep lock's try does not answer: native at the limit, naming that lock's file."""
    pol, w = _quick_limit(), uneven()
    d = await _resolved_past_a_stalled_try(monkeypatch, w, pol, sweep_lock=True)
    assert (d.source, d.chunk_size, w.calls) == ("fallback", None, 0)
    path = _locks.sweep_lock().path
    assert f"its try at the machine's sweep lock ({path}) had not answered" in d.reason


@pytest.mark.jumps
async def test_a_try_at_a_held_sweep_lock_only_slow_at_the_limit_names_the_other_sweep(
    isolated: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another sweep holds the machine; a later try still in flight at the limit: that sweep."""
    # such a try was once reported as one that "had not answered (a stalled file system?)"
    tries: list[None] = []
    real = _locks.Lock.try_acquire
    stall = _Stall()

    def slow_after_the_first(lock: _locks.Lock) -> bool:
        if lock.what == "the sweep lock":
            tries.append(None)
            if len(tries) > 1:  # in flight when the limit comes, as on a busy machine
                stall.hold()
        return real(lock)

    monkeypatch.setattr(_locks.Lock, "try_acquire", slow_after_the_first)
    monkeypatch.setattr(_giving_up, "STALLED_TRY_S", 600.0)  # "slow", however loaded the machine
    pol, w = attrs.evolve(_quick_limit(), hard_limit_s=2.0), uneven()
    async with holding_async(_locks.sweep_lock().path):
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(jump_when, stall.stuck, 2.0)  # the limit: the second try stuck
                d = await chunktune.resolve(w, policy=pol)
        finally:
            freed = await anyio.to_thread.run_sync(stall.end)
    assert freed == [True]  # returned while its second try was in flight
    assert (d.source, d.chunk_size, w.calls) == ("fallback", None, 0)
    assert "while another sweep" in d.reason and "held the machine" in d.reason
    assert "had not answered" not in d.reason and "stalled" not in d.reason


# A process whose threads are spent: the Thread.start named by argv[1] fails once, as
# Python's does past `ulimit -u` (root is exempt from that limit, so it is stood in for);
# "hop" names a worker thread of anyio's or trio's. Prints the first decision (or what it
# raised), the thread that failed, then the source of a second resolve with threads back.
# quick's few probes: every thread named here starts under any policy that measures, and
# balanced's longer sweep cost each child a third of a second twice over
_NO_THREAD = """\
import asyncio, functools, json, sys, threading
import trio
import chunktune
from chunktune.sim import SimulatedWorkload
which, caller = sys.argv[1], sys.argv[2]
start, failed = threading.Thread.start, []
def failing(self):
    chunktune_s = self.name.startswith("chunktune")
    if not failed and (self.name == which or (which == "hop" and not chunktune_s)):
        failed.append(self.name)
        raise RuntimeError("can't start new thread")
    start(self)
def resolved():
    w = SimulatedWorkload.from_layout("blocked", num_envs=512, nthread=8)
    if caller == "sync":
        return chunktune.resolve_sync(w, policy="quick")
    if caller == "asyncio":
        return asyncio.run(chunktune.resolve(w, policy="quick"))
    return trio.run(functools.partial(chunktune.resolve, w, policy="quick"))
threading.Thread.start = failing
try:
    d = resolved()
    first = [d.source, d.reason]
except BaseException as exc:
    first = ["raised", repr(exc)]
threading.Thread.start = start
print(json.dumps({"first": first, "failed": failed, "again": resolved().source}), flush=True)
"""


def _without_a_thread(tmp_path: Path, which: str, caller: str) -> dict[str, Any]:
    """What the _NO_THREAD script prints, run in a fresh process of its own."""
    import subprocess
    import sys

    env = {**os.environ, "CHUNKTUNE_CACHE": str(tmp_path / "c.json")}
    done = subprocess.run(  # the timeout is a hang guard, not a timing
        [sys.executable, "-c", _NO_THREAD, which, caller],
        env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    said: dict[str, Any] = json.loads(done.stdout)
    assert said["failed"], "no thread of that name was started"
    return said


@pytest.mark.parametrize("caller", ["sync", "asyncio", "trio"])
@pytest.mark.parametrize("which", ["hop", "chunktune sweep"])
def test_a_thread_that_cannot_start_gives_native_and_says_so(
    tmp_path: Path, which: str, caller: str
) -> None:
    """A hop's or the sweep's thread failing to start: native, chunktune's reason, no raise."""
    # the sweep's was once called the workload's failure, a hop's raised into the trainer
    said = _without_a_thread(tmp_path, which, caller)
    source, reason = said["first"]
    assert source == "fallback", reason
    assert "chunktune could not start a thread (can't start new thread" in reason
    assert said["again"] == "benchmark"  # nothing was cached, nothing is left locked


@pytest.mark.parametrize("caller", ["sync", "asyncio", "trio"])
def test_a_store_thread_that_cannot_start_leaves_the_measured_decision_uncached(
    tmp_path: Path, caller: str
) -> None:
    """The cache write's thread failing to start: the measured decision, not stored."""
    said = _without_a_thread(tmp_path, STORE_THREAD, caller)
    assert said["first"][0] == "benchmark"
    assert said["again"] == "benchmark"


@pytest.mark.parametrize("caller", ["sync", "asyncio"])
def test_a_janitor_that_cannot_start_leaves_the_key_to_the_next_resolve(
    tmp_path: Path, caller: str
) -> None:
    """The flights' janitor failing to start: the resolve measures; the next one hits."""
    # it raised once, leaving the key's flight boarded for good: the next resolve hung
    said = _without_a_thread(tmp_path, "chunktune-flights", caller)
    assert said["first"][0] == "benchmark"
    assert said["again"] == "cache"


# A process whose file descriptors are spent but `free` (argv[1]): its trainer's loop
# made first, then every descriptor it may open taken. Prints the decision or what it raised.
# quick, as for _NO_THREAD: the descriptors are the point, not the sweep.
_NO_FDS = """\
import asyncio, json, os, sys
import trio
import chunktune
from chunktune.sim import SimulatedWorkload
free, caller = int(sys.argv[1]), sys.argv[2]
held = []
def spend():
    try:
        while True:
            held.append(os.open(os.devnull, os.O_RDONLY))
    except OSError:
        pass
    for _ in range(free):
        os.close(held.pop())
def resolved():
    w = SimulatedWorkload.from_layout("blocked", num_envs=512, nthread=8)
    if caller == "sync":
        spend()
        return chunktune.resolve_sync(w, policy="quick")
    async def main():
        spend()
        return await chunktune.resolve(w, policy="quick")
    return asyncio.run(main()) if caller == "asyncio" else trio.run(main)
try:
    d = resolved()
    said = [d.source, d.reason]
except BaseException as exc:
    said = ["raised", repr(exc)]
for fd in held:
    os.close(fd)
print(json.dumps(said), flush=True)
"""


def _limit_descriptors() -> None:
    import resource

    resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))


@pytest.mark.parametrize("caller", ["sync", "asyncio", "trio"])
@pytest.mark.parametrize("free", [0, 1, 2])
def test_file_descriptors_spent_give_native_and_say_so(
    tmp_path: Path, free: int, caller: str
) -> None:
    """`ulimit -n` all but spent: native (or a decision), chunktune's reason, never a raise."""
    # it raised OSError out of resolve (its own loop, anyio's backend import), or called a
    # module the sweep imports failing to open the workload's failure
    import subprocess
    import sys

    env = {**os.environ, "CHUNKTUNE_CACHE": str(tmp_path / "c.json")}
    done = subprocess.run(  # the timeout is a hang guard, not a timing
        [sys.executable, "-c", _NO_FDS, str(free), caller], env=env, capture_output=True,
        text=True, timeout=120, preexec_fn=_limit_descriptors,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    source, reason = json.loads(done.stdout)
    assert source in {"fallback", "benchmark"} and (free or source == "fallback"), reason
    if source == "fallback":
        assert "chunktune could not open a file ([Errno 24] Too many open files" in reason
