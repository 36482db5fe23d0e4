"""The line an interrupted ``tune`` says, from ``_cli._tune_interrupted.interrupted_line``
called directly: each branch that test_cli_interrupted's Ctrl-C runs do not reach.

The workload is simulated and the cache is the isolated fixture's file: no sweep runs.
"""

from __future__ import annotations

import errno

import attrs
import pytest

from chunktune._cache import DecisionCache
from chunktune._cache_entry import CacheEntry
from chunktune._cli._tune_interrupted import (
    NOTHING_DECIDED,
    NOTHING_MEASURED,
    SWEEP_STOPPED,
    interrupted_line,
)
from chunktune._config import load_settings
from chunktune._decision import Decision
from chunktune._keys import job_key
from chunktune._request import pick_policy
from chunktune._settings import CacheSettings, Settings
from chunktune._workload import Workload
from chunktune.sim import SimulatedWorkload

SINCE = 1_000_000.0  # when the interrupted resolve began (time.time())


def _sim(num_envs: int = 64, nthread: int = 4) -> SimulatedWorkload:
    return SimulatedWorkload.from_layout("blocked", num_envs=num_envs, nthread=nthread)


def _line(
    decision: Decision | None,
    workload: Workload | None = None,
    settings: Settings | None = None,
    *,
    measured: bool = True,
) -> str:
    """interrupted_line under the quick policy, the resolve begun at SINCE."""
    settings = load_settings() if settings is None else settings
    return interrupted_line(
        decision,
        workload=_sim() if workload is None else workload,
        settings=settings,
        policy=pick_policy(settings, "quick")[1],
        since=SINCE,
        measured=measured,
    )


def _measured(timings: dict[int | None, float]) -> Decision:
    return Decision(
        chunk_size=8, native_chunk=1, source="benchmark", reason="r", key="k.q", timings=timings
    )


def _store(key: str, created: float, probe_seconds: float = 0.0) -> None:
    entry = CacheEntry(
        chunk_size=8,
        native_chunk=1,
        reason="r",
        timings={None: 1.0, 8: 0.9},
        probe_seconds=probe_seconds,
    )
    assert DecisionCache(load_settings().cache.path or "").update(
        {key: attrs.evolve(entry, created=created)}
    )


def test_a_measured_decision_that_timed_native_alone_is_said_not_cached() -> None:
    """A benchmark decision with native's timing alone: "nothing but native was timed"."""
    line = _line(_measured({None: 0.01}))
    assert line.endswith("; not cached: nothing but native was timed")


def test_a_measured_decision_missing_from_the_cache_is_said_not_cached() -> None:
    """A benchmark decision worth storing that the cache does not hold: "; not cached"."""
    line = _line(_measured({None: 0.01, 8: 0.009}))
    assert line.endswith("measured now; not cached")


@pytest.mark.parametrize(
    ("created", "stored"),
    [
        pytest.param(SINCE - 1.0, False, id="older-than-the-resolve"),
        pytest.param(SINCE, True, id="as-it-began"),
        pytest.param(SINCE + 1.0, True, id="after"),
    ],
)
def test_an_entry_counts_as_the_sweeps_only_if_written_since_it_began(
    created: float, stored: bool
) -> None:
    """An entry under the key is the sweep's if written since the resolve began, else not."""
    # an older one is what --refresh replaces only once the sweep is done
    workload = _sim()
    settings = load_settings()
    key = job_key(workload, pick_policy(settings, "quick")[1])
    _store(key, created)
    line = _line(None, workload, settings)
    if stored:
        assert line.startswith("interrupted as the sweep's decision was stored: chunk_size=8")
        assert line.endswith(f"measured now and cached (cache key {key})")
    else:
        assert line == SWEEP_STOPPED


def test_a_sweep_stopped_with_the_cache_disabled_says_so_plainly() -> None:
    """Ctrl-C before a decision, the cache disabled: the sweep stopped, nothing else to tell."""
    settings = attrs.evolve(load_settings(), cache=CacheSettings(enabled=False))
    assert _line(None, settings=settings) == SWEEP_STOPPED


def test_a_small_batch_with_a_size_to_try_had_a_sweep_to_stop() -> None:
    """12 envs on 4 threads (chunks of up to 3, quick tries 2): "the sweep stopped"."""
    # at chunks of up to 2, quick proposes only native: no sweep, as the next test says
    assert _line(None, _sim(num_envs=12, nthread=4)) == SWEEP_STOPPED


def test_a_batch_for_which_the_policy_proposes_only_native_had_no_sweep() -> None:
    """8 envs on 4 threads: quick proposes only native, so "before a decision was made"."""
    assert _line(None, _sim(num_envs=8, nthread=4)) == NOTHING_DECIDED


class _Shapeless:
    """A workload whose shape cannot be read: ``num_envs`` 0."""

    num_envs = 0
    nthread = 2

    def signature(self) -> dict[str, str]:
        return {"kind": "shapeless"}

    def run(self, chunk_size: int | None) -> float:
        return 0.01


def test_a_workload_of_unreadable_shape_is_not_taken_for_a_trivial_batch() -> None:
    """An unreadable shape is not a trivial batch: the line says why nothing could be told."""
    # the resolve would have refused such a workload, not skipped the sweep
    line = _line(None, _Shapeless())
    assert line != NOTHING_DECIDED
    assert line == (
        "interrupted: the sweep stopped; whether anything was cached could not be told "
        "(the workload's num_envs (_Shapeless.num_envs) must be an integer >= 1, got 0)"
    )


def test_a_cache_that_cannot_be_read_is_said_untold(monkeypatch: pytest.MonkeyPatch) -> None:
    """A cache read failing (an I/O error): whether it was cached could not be told, and why."""

    def unreadable(self: DecisionCache, key: str) -> CacheEntry | None:
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(DecisionCache, "get", unreadable)
    line = _line(_measured({None: 0.01, 8: 0.009}))
    assert line.endswith(
        "measured now; whether it was cached could not be told ([Errno 5] Input/output error)"
    )


def test_an_entry_written_while_the_tune_waited_is_told_as_another_process_s() -> None:
    """Ctrl-C before the sweep's first call: a new entry is another process's, said so."""
    # the tune waited for another process's sweep of this key, which stored meanwhile
    workload = _sim()
    settings = load_settings()
    key = job_key(workload, pick_policy(settings, "quick")[1])
    _store(key, SINCE + 1.0)
    line = _line(None, workload, settings, measured=False)
    assert line == (
        "interrupted before anything was measured; nothing was cached by this tune (another "
        f"process has cached chunk_size=8 (native would be 1) for this workload since: cache "
        f"key {key})"
    )


@pytest.mark.parametrize("enabled", [True, False], ids=["cache", "no-cache"])
def test_a_tune_stopped_before_its_first_call_says_nothing_was_measured(enabled: bool) -> None:
    """Ctrl-C before the sweep's first call, no new entry: nothing measured, nothing cached."""
    settings = attrs.evolve(load_settings(), cache=CacheSettings(enabled=enabled))
    assert _line(None, settings=settings, measured=False) == NOTHING_MEASURED


@pytest.mark.parametrize(
    ("stored_probe_s", "cached"),
    [pytest.param(2.5, True, id="as-measured"), pytest.param(7.0, False, id="written-over")],
)
def test_a_decision_is_said_cached_only_if_the_entry_is_the_one_it_measured(
    stored_probe_s: float, cached: bool
) -> None:
    """A new entry under the decision's key that another sweep wrote over is not "cached"."""
    decision = attrs.evolve(_measured({None: 0.01, 8: 0.009}), probe_seconds=2.5)
    _store(decision.key, SINCE + 1.0, probe_seconds=stored_probe_s)
    line = _line(decision)
    if cached:
        assert line.endswith(f"measured now and cached (cache key {decision.key})")
    else:
        assert line.endswith("measured now; not cached")
