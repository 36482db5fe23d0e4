"""A repeated hit of one workload object within a second is answered on the event loop."""

from __future__ import annotations

import weakref
from pathlib import Path

import anyio
import pytest
from _forking import run_forked

import chunktune
from chunktune import _recent
from chunktune._cache import DecisionCache
from chunktune.sim import Noise, SimulatedWorkload

pytestmark = pytest.mark.anyio


class Counted(SimulatedWorkload):
    """A simulated pool that counts its signature() calls (each hit path reads it once)."""

    def __init__(self, **kw: object) -> None:
        costs = SimulatedWorkload.from_layout("blocked", num_envs=256, nthread=4).costs
        super().__init__(costs, nthread=4, noise=Noise(sigma=0.01), **kw)  # type: ignore[arg-type]
        self.signatures = 0

    def signature(self) -> dict[str, chunktune.SignatureValue]:
        self.signatures += 1
        return super().signature()


@pytest.fixture
def settings(isolated: Path) -> chunktune.Settings:
    return chunktune.load_settings()


async def warm(w: Counted, settings: chunktune.Settings) -> None:
    """A sweep, then one hit through the worker thread: the second hit is remembered."""
    assert (await chunktune.resolve(w, settings=settings, policy="quick")).source == "benchmark"
    assert (await chunktune.resolve(w, settings=settings, policy="quick")).source == "cache"


async def test_repeated_hits_read_no_signature_and_agree(settings: chunktune.Settings) -> None:
    """Ten more resolves of the same object within the second call signature() no more."""
    w = Counted()
    await warm(w, settings)
    before = w.signatures
    first = await chunktune.resolve(w, settings=settings, policy="quick")
    for _ in range(9):
        again = await chunktune.resolve(w, settings=settings, policy="quick")
        assert again == first
    assert w.signatures == before and first.source == "cache"


async def test_a_change_this_process_makes_to_the_cache_is_seen_at_once(
    settings: chunktune.Settings, isolated: Path
) -> None:
    """Cleared through another DecisionCache of the same file: the next resolve sweeps."""
    w = Counted()
    await warm(w, settings)
    DecisionCache(isolated / "cache.json").clear()
    assert (await chunktune.resolve(w, settings=settings, policy="quick")).source == "benchmark"


async def test_a_damaged_cache_this_process_moves_aside_is_seen_at_once(
    settings: chunktune.Settings, isolated: Path
) -> None:
    """A damaged file moved aside with no whole entry to write back: the next resolve sweeps."""
    w = Counted()
    await warm(w, settings)
    path = isolated / "cache.json"
    path.write_bytes(b"{ damaged")
    assert DecisionCache(path).entries() == {} and not path.exists()
    assert (await chunktune.resolve(w, settings=settings, policy="quick")).source == "benchmark"


async def test_another_object_settings_shape_or_policy_is_asked_afresh(
    settings: chunktune.Settings,
) -> None:
    """Only the same workload object, settings object, policy and shape are remembered."""
    w = Counted()
    await warm(w, settings)
    twin = Counted()
    await chunktune.resolve(twin, settings=settings, policy="quick")
    assert twin.signatures == 1  # an equal but other object reads its own signature
    before = w.signatures
    await chunktune.resolve(w, settings=chunktune.load_settings(), policy="quick")
    await chunktune.resolve(w, settings=settings, policy="balanced")
    w.num_envs = 128
    await chunktune.resolve(w, settings=settings, policy="quick")
    assert w.signatures == before + 3


async def test_a_remembered_hit_expires(
    settings: chunktune.Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past TTL_S a hit goes back through the worker thread and reads the file again."""
    monkeypatch.setattr(_recent, "TTL_S", 0.05)
    w = Counted()
    await warm(w, settings)
    before = w.signatures
    await anyio.sleep(0.1)
    assert (await chunktune.resolve(w, settings=settings, policy="quick")).source == "cache"
    assert w.signatures == before + 1


async def test_refresh_is_never_answered_from_memory(settings: chunktune.Settings) -> None:
    """refresh=True measures again even right after a remembered hit."""
    w = Counted()
    await warm(w, settings)
    fresh = await chunktune.resolve(w, settings=settings, policy="quick", refresh=True)
    assert fresh.source == "benchmark"


def _decision() -> chunktune.Decision:
    return chunktune.Decision(chunk_size=8, native_chunk=6, source="cache", reason="cached")


async def test_answers_for_gone_or_expired_workloads_are_let_go(
    settings: chunktune.Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Remembering an answer drops those whose workload is gone or whose time ran out."""
    policy = settings.get_policy("quick")
    gone, expired, kept = Counted(), Counted(), Counted()
    _recent.remember(gone, settings, policy, (256, 4), _decision())
    ttl = _recent.TTL_S
    monkeypatch.setattr(_recent, "TTL_S", 0.0)  # out of time as soon as it is said
    _recent.remember(expired, settings, policy, (256, 4), _decision())
    monkeypatch.setattr(_recent, "TTL_S", ttl)
    ids = {id(gone), id(expired)}
    del gone
    _recent.remember(kept, settings, policy, (256, 4), _decision())
    assert not ids & set(_recent._said)
    assert _recent.recall(kept, settings, policy, (256, 4)) == _decision()


@pytest.mark.parametrize("change", ["policy", "shape"])
async def test_one_thing_changed_right_after_a_hit_is_asked_afresh(
    settings: chunktune.Settings, change: str
) -> None:
    """Right after a remembered hit, another policy or batch shape alone is never answered by it."""
    w = Counted()
    await warm(w, settings)
    policy = "balanced" if change == "policy" else "quick"
    if change == "shape":
        w.num_envs = 128
    other = await chunktune.resolve(w, settings=settings, policy=policy)
    assert other.source == "benchmark"
    assert other.policy == policy and other.native_chunk == w.num_envs // 40


async def test_an_answer_is_never_given_to_another_object_at_the_same_id(
    settings: chunktune.Settings,
) -> None:
    """An object that took a gone workload's id (CPython reuses them) is asked afresh."""
    policy = settings.get_policy("quick")
    gone, twin = Counted(), Counted()
    _recent.remember(gone, settings, policy, (256, 4), _decision())
    _recent._said[id(twin)] = _recent._said.pop(id(gone))  # as if twin now had gone's id
    del gone
    assert _recent.recall(twin, settings, policy, (256, 4)) is None


async def test_what_a_caller_does_to_its_decision_never_reaches_the_next(
    settings: chunktune.Settings,
) -> None:
    """A remembered hit is a copy: emptying one answer's timings and samples leaves the next's."""
    w = Counted()
    await warm(w, settings)
    first = await chunktune.resolve(w, settings=settings, policy="quick")
    timings, samples = dict(first.timings), dict(first.samples)
    assert timings and samples
    first.timings.clear()
    first.samples.clear()
    again = await chunktune.resolve(w, settings=settings, policy="quick")
    assert again.timings == timings and again.samples == samples
    again.timings.clear()
    assert (await chunktune.resolve(w, settings=settings, policy="quick")).timings == timings


async def test_what_the_remembered_hit_s_caller_does_never_reaches_the_next(
    settings: chunktune.Settings,
) -> None:
    """Emptying the timings of the very hit that was remembered leaves the repeat's whole."""
    w = Counted()
    assert (await chunktune.resolve(w, settings=settings, policy="quick")).source == "benchmark"
    hit = await chunktune.resolve(w, settings=settings, policy="quick")  # the one remembered
    assert hit.source == "cache"
    timings, samples = dict(hit.timings), dict(hit.samples)
    assert timings and samples
    hit.timings.clear()
    hit.samples.clear()
    again = await chunktune.resolve(w, settings=settings, policy="quick")
    assert (again.timings, again.samples) == (timings, samples)


class Slotted:
    """A workload whose __slots__ leave out __weakref__: no weak reference can name it."""

    __slots__ = ("nthread", "num_envs", "signatures", "sim")

    def __init__(self) -> None:
        self.sim = Counted()
        self.num_envs, self.nthread, self.signatures = self.sim.num_envs, self.sim.nthread, 0

    def signature(self) -> dict[str, chunktune.SignatureValue]:
        self.signatures += 1
        return self.sim.signature()

    def run(self, chunk_size: int | None) -> float:
        return self.sim.run(chunk_size)


async def test_a_workload_without_weak_references_is_answered_but_not_remembered(
    settings: chunktune.Settings,
) -> None:
    """Hits of an object no weak reference can name come from the cache each time, never raise."""
    w = Slotted()
    with pytest.raises(TypeError):
        weakref.ref(w)
    assert (await chunktune.resolve(w, settings=settings, policy="quick")).source == "benchmark"
    for _ in range(3):
        assert (await chunktune.resolve(w, settings=settings, policy="quick")).source == "cache"
    assert w.signatures == 4  # every hit keyed it again: none was answered from memory


def test_a_child_forked_while_the_memory_s_lock_is_held_remembers_and_forgets(
    isolated: Path,
) -> None:
    """A fork while a parent's thread holds the memory's lock leaves the child a free one."""
    settings = chunktune.load_settings()
    policy = settings.get_policy("quick")
    w = Counted()
    decision = _decision()

    def child() -> None:
        _recent.forget()  # a cache file this child changed
        _recent.remember(w, settings, policy, (256, 4), decision)
        assert _recent.recall(w, settings, policy, (256, 4)) == decision

    with _recent._lock:
        status = run_forked(child, hang_guard_s=20)
    assert status == 0


async def test_a_workload_said_again_goes_behind_the_others(
    settings: chunktune.Settings,
) -> None:
    """A workload remembered again moves to the back: a gone one it passed is let go at once."""
    policy = settings.get_policy("quick")
    again, gone = Counted(), Counted()
    _recent.remember(again, settings, policy, (256, 4), _decision())
    _recent.remember(gone, settings, policy, (256, 4), _decision())
    del gone
    _recent.remember(again, settings, policy, (256, 4), _decision())
    assert [s for s in _recent._said.values() if s.workload() is None] == []
    assert _recent.recall(again, settings, policy, (256, 4)) == _decision()


class _Clock:
    """A monotonic clock that moves only when told to."""

    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now


@pytest.mark.parametrize(
    ("later_s", "from_memory"),
    [pytest.param(0.999, True, id="within-a-second"), pytest.param(1.0, False, id="a-second-on")],
)
async def test_a_hit_is_remembered_for_one_second(
    settings: chunktune.Settings, monkeypatch: pytest.MonkeyPatch, later_s: float, from_memory: bool
) -> None:
    """A repeat 0.999 s after a hit is answered from memory; one 1.0 s after reads signature()."""
    clock = _Clock()
    monkeypatch.setattr(_recent, "time", clock)  # the memory's clock only, not the sweep's
    w = Counted()
    await warm(w, settings)  # the hit through the worker thread is remembered now
    before = w.signatures
    clock.now += later_s
    assert (await chunktune.resolve(w, settings=settings, policy="quick")).source == "cache"
    assert w.signatures == (before if from_memory else before + 1)


def test_an_answer_whose_second_is_up_to_the_instant_is_let_go(
    settings: chunktune.Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An answer exactly TTL_S old is spent, as recall takes it: the next remember lets it go."""
    clock = _Clock()
    monkeypatch.setattr(_recent, "time", clock)
    policy = settings.get_policy("quick")
    spent, kept = Counted(), Counted()
    _recent.remember(spent, settings, policy, (256, 4), _decision())
    clock.now += _recent.TTL_S
    assert _recent.recall(spent, settings, policy, (256, 4)) is None
    _recent.remember(kept, settings, policy, (256, 4), _decision())
    assert id(spent) not in _recent._said and id(kept) in _recent._said
