"""A repeated hit of one workload object within a second is answered on the event loop."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

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
