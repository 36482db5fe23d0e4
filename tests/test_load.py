"""The machine's load as a sweep begins: recorded in the decision and its entry, and a
decision measured busy measured again once the machine is calm."""

from __future__ import annotations

import json
import logging
import os
import threading
from pathlib import Path
from typing import Any

import attrs
import pytest

import chunktune
from chunktune import CacheEntry, DecisionCache
from chunktune._cache import best_entry
from chunktune._cache_entry import BadEntry, entry_from_table, entry_to_table
from chunktune._load import MachineLoad, machine_load, serves_now
from chunktune.sim import Noise, SimulatedWorkload


class Loads:
    """os.getloadavg as a test sets it: ``now`` is the one-minute figure; counts the reads."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, now: float, cpus: int = 2) -> None:
        self.now, self.reads = now, 0
        monkeypatch.setattr(os, "getloadavg", self)
        monkeypatch.setattr(os, "cpu_count", lambda: cpus)

    def __call__(self) -> tuple[float, float, float]:
        self.reads += 1
        return (self.now, 0.0, 0.0)


def uneven() -> SimulatedWorkload:
    return SimulatedWorkload.from_layout(
        "blocked", num_envs=512, nthread=8, noise=Noise(sigma=0.01)
    )


def stored(entries: dict[str, Any], key: str) -> Any:
    return entries[key].get("load")


def entries_in(tmp: Path) -> dict[str, Any]:
    return dict(json.loads((tmp / "cache.json").read_text())["entries"])


@pytest.mark.parametrize(
    ("average", "busy", "calm"),
    [
        (0.0, False, True),
        (1.0, False, True),
        (1.01, False, False),
        (1.99, False, False),
        (2.0, True, False),
    ],
)
def test_busy_reaches_the_cpus_and_calm_is_at_most_half(
    average: float, busy: bool, calm: bool
) -> None:
    """Busy from one runnable task per CPU on, calm up to half that; a load reads as its figures."""
    load = MachineLoad(average, 2)
    assert (load.busy, load.calm) == (busy, calm)
    assert str(load) == f"load {average:.2f} on 2 CPUs"


def test_the_load_is_the_one_minute_average_over_the_cpus_the_system_counts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """machine_load reads os.getloadavg's first figure and os.cpu_count."""
    Loads(monkeypatch, 1.5, cpus=16)
    assert machine_load() == MachineLoad(1.5, 16)
    monkeypatch.setattr(os, "cpu_count", lambda: None)
    assert machine_load() == MachineLoad(1.5, 1)


def test_a_system_without_a_load_average_gives_none(monkeypatch: pytest.MonkeyPatch) -> None:
    """Where the system keeps no load average (Windows; no /proc), the load is None."""

    def no_load() -> tuple[float, float, float]:
        raise OSError("no load average")

    monkeypatch.setattr(os, "getloadavg", no_load)
    assert machine_load() is None
    monkeypatch.delattr(os, "getloadavg")
    assert machine_load() is None


@attrs.frozen
class Held:
    load: MachineLoad | None


@pytest.mark.parametrize(
    ("measured", "now", "serves"),
    [
        pytest.param(None, MachineLoad(0.1, 2), True, id="unrecorded"),
        pytest.param(MachineLoad(1.0, 2), MachineLoad(0.1, 2), True, id="measured-calm"),
        pytest.param(MachineLoad(3.0, 2), MachineLoad(2.5, 2), True, id="busy-then-and-now"),
        pytest.param(MachineLoad(3.0, 2), None, True, id="busy-now-unknown"),
        pytest.param(MachineLoad(3.0, 2), MachineLoad(1.9, 2), True, id="busy-now-not-calm"),
        pytest.param(MachineLoad(3.0, 2), MachineLoad(1.0, 2), False, id="busy-now-calm"),
        pytest.param(MachineLoad(2.0, 2), MachineLoad(0.0, 2), False, id="just-busy-now-idle"),
    ],
)
def test_only_a_decision_measured_busy_is_refused_and_only_while_calm(
    measured: MachineLoad | None, now: MachineLoad | None, serves: bool
) -> None:
    """serves_now refuses exactly a busy-measured decision when the machine is calm now."""
    assert serves_now(lambda: now)(Held(measured)) is serves


def test_the_load_is_read_once_and_only_for_a_busy_entry(caplog: pytest.LogCaptureFixture) -> None:
    """A calm entry reads no load; several busy ones read it once; a refusal is logged."""
    reads: list[int] = []

    def read() -> MachineLoad:
        reads.append(1)
        return MachineLoad(0.5, 2)

    serves = serves_now(read)
    assert serves(Held(MachineLoad(0.5, 2))) and serves(Held(None))
    assert reads == []
    with caplog.at_level(logging.INFO, logger="chunktune"):
        assert not serves(Held(MachineLoad(2.0, 2)))
        assert not serves(Held(MachineLoad(4.0, 2)))
    assert reads == [1]
    assert "measured while the machine was busy (load 2.00 on 2 CPUs)" in caplog.text
    assert "it is calm now (load 0.50 on 2 CPUs)" in caplog.text


def entry(effort: int, load: MachineLoad | None) -> CacheEntry:
    return CacheEntry(
        chunk_size=4,
        native_chunk=12,
        reason="r",
        policy_rule="rule",
        policy_effort=effort,
        load=load,
    )


def test_a_refused_entry_gives_way_to_the_strongest_that_serves() -> None:
    """Lookup passes over refused entries, its own included, to the strongest one that serves."""
    busy, calm = MachineLoad(3.0, 2), MachineLoad(0.5, 2)
    entries = {
        "job.own": entry(10, busy),
        "job.a": entry(30, busy),
        "job.b": entry(20, calm),
        "job.c": entry(40, None),
        "other.d": entry(50, calm),
    }

    def found(serves: Any) -> str | None:
        hit = best_entry(entries, "job", policy_hash="own", rule="rule", effort=10, serves=serves)
        return None if hit is None else hit[0]

    assert found(lambda e: True) == "job.own"
    assert found(lambda e: e.load is None or not e.load.busy) == "job.c"
    assert found(lambda e: e.load is not None and not e.load.busy) == "job.b"
    assert found(lambda e: False) is None


def test_a_tie_between_stronger_entries_goes_the_same_way_whatever_their_order() -> None:
    """Two stronger entries of one effort: lookup takes the same one in either order of entries."""
    a, b = entry(30, None), attrs.evolve(entry(30, None), chunk_size=8)
    found = [
        best_entry(dict(pairs), "job", policy_hash="own", rule="rule", effort=10)
        for pairs in ([("job.a", a), ("job.b", b)], [("job.b", b), ("job.a", a)])
    ]
    assert found[0] is not None and found[0] == found[1]


def test_lookup_asks_whether_an_entry_serves_once_at_most() -> None:
    """A lookup that finds no entry serving asks serves() once of each, its own included."""
    busy = MachineLoad(3.0, 2)
    entries = {"job.own": entry(10, busy), "job.a": entry(30, busy), "other.d": entry(50, busy)}
    asked: list[CacheEntry] = []

    def serves(e: CacheEntry) -> bool:
        asked.append(e)
        return False

    hit = best_entry(entries, "job", policy_hash="own", rule="rule", effort=10, serves=serves)
    assert hit is None
    assert asked == [entries["job.own"], entries["job.a"]]


@pytest.mark.parametrize("suffix", [".json", ".toml"])
def test_an_entrys_load_is_stored_and_read_back(tmp_path: Path, suffix: str) -> None:
    """The load round-trips in both formats; an entry without one reads back None."""
    cache = DecisionCache(tmp_path / f"c{suffix}")
    cache.put("with", entry(1, MachineLoad(2.25, 16)))
    cache.put("without", entry(1, None))
    again = DecisionCache(tmp_path / f"c{suffix}")
    assert [again.get(k).load for k in ("with", "without")] == [  # type: ignore[union-attr]
        MachineLoad(2.25, 16),
        None,
    ]
    assert "load" not in entry_to_table(entry(1, None))


@pytest.mark.parametrize(
    ("load", "problem"),
    [
        pytest.param([1.0, 2], "load: [1.0, 2] is not a table", id="list"),
        pytest.param({"average": 1.0}, "is not a table of average and cpus", id="no-cpus"),
        pytest.param({"cpus": 2}, "is not a table of average and cpus", id="no-average"),
        pytest.param({"average": -0.5, "cpus": 2}, "average -0.5 is not a load", id="negative"),
        pytest.param({"average": "high", "cpus": 2}, "average 'high' is not a load", id="text"),
        pytest.param({"average": True, "cpus": 2}, "average True is not a load", id="bool"),
        pytest.param({"average": 1.0, "cpus": 0}, "cpus 0 is not a number of CPUs", id="no-cpu"),
        pytest.param({"average": 1.0, "cpus": 2.0}, "cpus 2.0 is not a number", id="float-cpus"),
    ],
)
def test_a_stored_load_that_is_no_load_is_refused_by_name(load: object, problem: str) -> None:
    """A stored load that is not {average >= 0, cpus >= 1} makes the entry bad, naming it."""
    table = entry_to_table(entry(1, MachineLoad(1.0, 2)))
    table["load"] = load
    with pytest.raises(BadEntry, match="load: ") as caught:
        entry_from_table(table)
    assert problem in str(caught.value)


def test_an_integer_load_average_reads_as_a_float() -> None:
    """A stored whole-number average (a hand-edited file) reads back as the float it is."""
    table = entry_to_table(entry(1, MachineLoad(1.0, 2)))
    table["load"] = {"average": 3, "cpus": 2, "later": "ignored"}
    load = entry_from_table(table).load
    assert load == MachineLoad(3.0, 2) and type(load.average) is float


def test_the_load_is_read_in_the_sweeps_thread_once_it_holds_the_machine(
    isolated: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The decision's load is read once, in the sweep's thread, before its first probe."""
    seen: list[tuple[str, int]] = []
    w = uneven()

    def read() -> tuple[float, float, float]:
        seen.append((threading.current_thread().name, w.calls))
        return (2.5, 0.0, 0.0)

    monkeypatch.setattr(os, "getloadavg", read)
    decision = chunktune.resolve_sync(w)
    assert decision.load == MachineLoad(2.5, os.cpu_count() or 1)
    assert len(seen) == 1
    name, calls = seen[0]
    assert calls == 0 and name != threading.main_thread().name
    assert stored(entries_in(isolated), decision.key) == {
        "average": 2.5,
        "cpus": os.cpu_count() or 1,
    }


@pytest.mark.anyio
async def test_a_decision_measured_busy_is_measured_again_once_calm_then_served(
    isolated: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Busy sweep -> served until calm -> calm: swept again, replaced -> served, even busy."""
    loads = Loads(monkeypatch, 3.0)
    first = await chunktune.resolve(uneven())
    assert first.source == "benchmark" and first.load == MachineLoad(3.0, 2)
    for now in (3.0, 1.5):  # busy, then between busy and calm
        loads.now = now
        busy_hit = await chunktune.resolve(uneven())
        assert busy_hit.source == "cache" and busy_hit.load == first.load
    loads.now = 0.4
    again = await chunktune.resolve(uneven())
    assert again.source == "benchmark" and again.load == MachineLoad(0.4, 2)
    assert list(entries_in(isolated)) == [first.key]
    assert stored(entries_in(isolated), first.key) == {"average": 0.4, "cpus": 2}
    for now in (0.4, 3.0):
        loads.now = now
        hit = await chunktune.resolve(uneven())
        assert hit.source == "cache" and hit.load == MachineLoad(0.4, 2)


def test_a_calm_or_unrecorded_decision_is_served_without_reading_the_load(
    isolated: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A hit on an entry measured calm, or cached before loads were recorded, reads no load."""
    loads = Loads(monkeypatch, 0.2)
    first = chunktune.resolve_sync(uneven())
    reads = loads.reads
    loads.now = 0.1
    assert chunktune.resolve_sync(uneven()).source == "cache"
    assert loads.reads == reads

    cache = DecisionCache(isolated / "cache.json")
    old = cache.get(first.key)
    assert old is not None
    cache.put(first.key, attrs.evolve(old, load=None))
    hit = chunktune.resolve_sync(uneven())
    assert (hit.source, hit.load, loads.reads) == ("cache", None, reads)


def test_a_stronger_policys_busy_entry_gives_way_once_calm_and_no_loop(
    isolated: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Calm, a weaker request passes over a stronger busy entry, measures once, then hits."""
    weak = attrs.evolve(chunktune.load_settings().get_policy("quick"), max_rounds=6)
    strong = attrs.evolve(weak, max_rounds=12, description="more rounds")
    loads = Loads(monkeypatch, 4.0)
    chunktune.resolve_sync(uneven(), policy=strong)
    assert chunktune.resolve_sync(uneven(), policy=weak).source == "cache"
    loads.now = 0.3
    assert chunktune.resolve_sync(uneven(), policy=weak).source == "benchmark"
    assert chunktune.resolve_sync(uneven(), policy=weak).source == "cache"
    assert len(entries_in(isolated)) == 2


def test_a_system_caches_busy_entry_gives_way_once_calm(
    isolated: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The read-only system layer's busy entry serves while busy; calm, the request measures."""
    loads = Loads(monkeypatch, 3.0)
    first = chunktune.resolve_sync(uneven())
    system = isolated / "image" / "system.json"
    system.parent.mkdir()
    (isolated / "cache.json").rename(system)
    monkeypatch.setenv("CHUNKTUNE_SYSTEM_CACHE", str(system))
    hit = chunktune.resolve_sync(uneven())
    assert (hit.source, hit.load) == ("cache", first.load)
    loads.now = 0.4
    again = chunktune.resolve_sync(uneven())
    assert (again.source, again.load) == ("benchmark", MachineLoad(0.4, 2))
    assert stored(entries_in(isolated), first.key) == {"average": 0.4, "cpus": 2}
    assert chunktune.resolve_sync(uneven()).source == "cache"


def test_a_system_layer_behind_a_refused_entry_reads_no_load_of_its_own(
    isolated: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Calm, a busy user entry and a busy system entry cost the reads of the user entry alone."""
    loads = Loads(monkeypatch, 3.0)
    chunktune.resolve_sync(uneven())
    busy = (isolated / "cache.json").read_bytes()
    system = isolated / "image" / "system.json"
    system.parent.mkdir()
    system.write_bytes(busy)
    reads: dict[bool, int] = {}
    for layered in (False, True):
        if layered:
            monkeypatch.setenv("CHUNKTUNE_SYSTEM_CACHE", str(system))
        (isolated / "cache.json").write_bytes(busy)
        loads.now, loads.reads = 0.4, 0
        assert chunktune.resolve_sync(uneven()).source == "benchmark"
        reads[layered] = loads.reads
    assert reads[True] == reads[False] > 0
