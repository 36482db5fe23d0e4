"""The Decision a resolve returns: the chunk the pool uses, and its JSON form."""

from __future__ import annotations

import multiprocessing
import pickle
from typing import Any

import attrs
import pytest

from chunktune import Decision, MachineLoad, load_settings
from chunktune._decision import headline


def decided(**over: object) -> Decision:
    fields: dict[str, object] = {
        "chunk_size": 8,
        "native_chunk": 3,
        "source": "benchmark",
        "reason": "measured",
        "timings": {None: 0.0125, 8: 0.01},
        "probe_seconds": 1.5,
        "gain": 0.2,
        "gain_ci": (0.1, 0.3),
    }
    fields.update(over)
    return Decision(**fields)  # type: ignore[arg-type]


def test_the_effective_chunk_of_native_is_the_native_chunk() -> None:
    """chunk_size None means the pool's own chunk, native_chunk; a chosen size is itself."""
    assert decided(chunk_size=None).effective_chunk == 3
    assert decided().effective_chunk == 8


def test_to_json_gives_milliseconds_probe_seconds_and_the_interval() -> None:
    """to_json shows timings in ms (native first), probe_seconds and gain_ci as they are."""
    shown = decided().to_json()
    assert shown["timings_ms"] == {"native": 12.5, "8": 10.0}
    assert shown["probe_seconds"] == 1.5
    assert shown["gain_ci"] == [0.1, 0.3]
    assert decided(gain_ci=None).to_json()["gain_ci"] is None


def test_a_decision_keeps_its_own_copy_of_the_timings() -> None:
    """Timings and samples passed in are copied: changing the caller's dict changes no Decision."""
    timings: dict[int | None, float] = {None: 0.0125, 8: 0.01}
    samples: dict[int | None, int] = {None: 4, 8: 4}
    decision = decided(timings=timings, samples=samples)
    timings[8] = 1.0
    samples[8] = 99
    assert decision.timings == {None: 0.0125, 8: 0.01}
    assert decision.samples == {None: 4, 8: 4}


def test_a_decision_declares_itself_unhashable_and_compares_by_value() -> None:
    """Decision.__hash__ is None (its timings are a dict) and equal fields still compare equal."""
    assert Decision.__hash__ is None
    with pytest.raises(TypeError, match="unhashable type: 'Decision'"):
        hash(decided())
    assert decided() == decided(timings={8: 0.01, None: 0.0125})
    assert decided() != decided(timings={None: 0.0125, 8: 0.011})


def test_to_json_gives_the_cache_key_and_whether_it_was_cut_short() -> None:
    """to_json's key is the decision's cache key (not its policy), and partial is its own."""
    shown = decided(key="abc.def", policy="quick", partial=True).to_json()
    assert (shown["key"], shown["partial"]) == ("abc.def", True)


def _echo(inbox: Any, outbox: Any) -> None:
    """A spawned trainer worker: send back what it was sent, and what it reads as."""
    for obj in iter(inbox.get, None):
        outbox.put((obj, repr(obj)))


def test_a_decision_policy_and_settings_reach_a_spawned_process_equal() -> None:
    """A Decision, Policy and Settings sent to a spawn child and back compare equal, repr too."""
    settings = load_settings()
    policy = attrs.evolve(settings.get_policy("quick"), margin=0.02)
    decision = decided(load=MachineLoad(average=1.5, cpus=2), samples={None: 4, 8: 4})
    ctx = multiprocessing.get_context("spawn")
    inbox, outbox = ctx.Queue(), ctx.Queue()
    child = ctx.Process(target=_echo, args=(inbox, outbox))
    child.start()
    try:
        for sent in (decision, policy, settings):
            inbox.put(sent)
            back, shown_there = outbox.get(timeout=120)
            assert back == sent and type(back) is type(sent)
            assert shown_there == repr(sent)
        assert pickle.loads(pickle.dumps(decision)).effective_chunk == 8
    finally:
        inbox.put(None)
        child.join(60)
    assert child.exitcode == 0


def test_to_json_lists_the_timings_native_first_then_by_size_and_gives_the_gain() -> None:
    """timings_ms goes native first, then by size, whatever the order given; gain is the gain."""
    got = decided(timings={16: 0.02, None: 0.0125, 4: 0.011, 8: 0.01}).to_json()["timings_ms"]
    assert list(got) == ["native", "4", "8", "16"]
    assert decided(gain=0.25).to_json()["gain"] == 0.25


def test_a_decision_made_without_a_sweep_has_no_probe_seconds_no_gain_and_is_whole() -> None:
    """Left out, probe_seconds and gain are 0.0, partial False, raced_out (), gain_ci None."""
    bare = Decision(chunk_size=None, native_chunk=3, source="manual", reason="as given")
    assert (bare.probe_seconds, bare.gain, bare.partial) == (0.0, 0.0, False)
    assert (bare.raced_out, bare.gain_ci, bare.load) == ((), None, None)
    assert (bare.key, bare.policy, bare.timings, bare.samples) == ("", "", {}, {})


def test_a_decision_takes_its_fields_by_keyword_only() -> None:
    """Decision(8, 3, ...) with positional fields is refused: each field is named."""
    with pytest.raises(TypeError):
        Decision(8, 3, "manual", "as given")  # type: ignore[call-arg]


def test_the_headline_names_the_chunk_the_native_and_the_source_then_the_probes() -> None:
    """headline: chunk, native and source; with probes, the probe seconds if any were spent."""
    assert headline(decided()) == "chunk_size=8 (native=3, benchmark)"
    assert headline(decided(chunk_size=None)) == "chunk_size=native (native=3, benchmark)"
    swept = "chunk_size=8 (native=3, benchmark, 1.50 s of probes)"
    assert headline(decided(), probes=True) == swept
    assert headline(decided(probe_seconds=0.0), probes=True) == headline(decided())
