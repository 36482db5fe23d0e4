"""Traces: the file format, its validation, and replaying it as a workload."""

from __future__ import annotations

import codecs
import itertools
import json
import math
import os
from pathlib import Path
from typing import Any

import attrs
import numpy as np
import pytest
from _pools import remembering

import chunktune
from chunktune import TraceError
from chunktune._candidates import ExplicitCandidates
from chunktune._replay import sizes_text, standardized_noise, without_machine_state
from chunktune._trace import Trace, dump_trace, load_trace, trace_from_dict
from chunktune.sim import ReplayWorkload


def synthetic(rounds: int = 12, seed: int = 0) -> Trace:
    """64 envs on 4 threads: sizes 1..16, size 4 truly 15% faster than native (1)."""
    rng = np.random.default_rng(seed)
    level = np.exp(rng.normal(0.0, 0.3, rounds))  # the machine's state per round
    cost = {c: 1.0 + 0.02 * abs(c - 4) - (0.1 if c == 4 else 0.0) for c in range(1, 17)}
    samples = {
        c: tuple(float(0.05 * cost[c] * level[r] * math.exp(rng.normal(0, 0.05)))
                 for r in range(rounds))
        for c in cost
    }  # fmt: skip
    return Trace(num_envs=64, nthread=4, rounds=rounds, samples=samples)


def write(tmp_path: Path, doc: Any, name: str = "t.json") -> Path:
    path = tmp_path / name
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    return path


def nested(levels: int) -> str:
    """A JSON list ``levels`` deep."""
    return "[" * levels + "]" * levels


@pytest.mark.parametrize(
    ("doc", "said"),
    [
        pytest.param({"num_envs": 1, "nthread": 1, "rounds": 1, "native": 2,
                      "samples": {"1": [0.1]}},
                     "trace: native is 2, but the native chunk for 1 env on 1 thread is 1",
                     id="native"),
        pytest.param({"num_envs": 1, "nthread": 1, "rounds": 1,
                      "samples": {"1": [0.1], "2": [0.1]}},
                     'trace: samples["2"]: chunk sizes must be integers in 1..1 '
                     "(ceil(N/T) for 1 env on 1 thread)", id="sizes"),
    ],
)  # fmt: skip
def test_a_one_env_traces_messages_count_in_words(doc: dict[str, Any], said: str) -> None:
    """A trace of 1 env on 1 thread says so in words, not "1 envs on 1 threads"."""
    with pytest.raises(TraceError) as info:
        trace_from_dict(doc)
    assert str(info.value) == said


def test_a_trace_round_trips_through_its_file(tmp_path: Path) -> None:
    """dump_trace writes what load_trace reads back equal."""
    trace = synthetic()
    path = write(tmp_path, dump_trace(trace))
    assert load_trace(path) == trace
    assert json.loads(path.read_text())["native"] == 1


@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        pytest.param(lambda d: "not json", "not a JSON trace", id="not-json"),
        pytest.param(lambda d: [1, 2], "expected a JSON object", id="not-an-object"),
        pytest.param(lambda d: d.pop("rounds") and d, 'missing field "rounds"', id="no-rounds"),
        pytest.param(lambda d: d.pop("samples") and d, 'missing field "samples"', id="no-samples"),
        pytest.param(lambda d: d.update(nthread=0) or d, "nthread is 0", id="nthread-0"),
        pytest.param(lambda d: d.update(rounds="12") or d, 'rounds is "12"', id="rounds-text"),
        pytest.param(lambda d: d.update(num_envs=True) or d, "num_envs is true", id="envs-bool"),
        pytest.param(lambda d: d.update(samples=None) or d, "samples is null", id="samples-null"),
        pytest.param(lambda d: d["samples"]["2"].__setitem__(3, -1.0) or d,
                     'samples["2"][3] is -1.0', id="negative-time"),
        pytest.param(lambda d: d["samples"]["2"].__setitem__(0, float("inf")) or d,
                     'samples["2"][0] is Infinity', id="infinite-time"),
        pytest.param(lambda d: d["samples"]["2"].__setitem__(1, 1e308) or d,
                     'samples["2"][1] is 1e+308', id="absurd-time"),
        pytest.param(lambda d: d["samples"]["2"].__setitem__(1, 1e-310) or d,
                     'samples["2"][1] is 1e-310', id="subnormal-time"),
        pytest.param(lambda d: d["samples"]["2"].__setitem__(0, 10**400) or d,
                     'samples["2"][0] is 1000', id="integer-past-float"),
        pytest.param(lambda d: d["samples"].update({"17": [0.1] * 12}) or d,
                     "chunk sizes must be integers in 1..16", id="size-above-upper"),
        pytest.param(lambda d: d["samples"].update({"0": [0.1] * 12}) or d,
                     'samples["0"]', id="size-zero"),
        pytest.param(lambda d: d["samples"].update({"02": d["samples"]["2"]}) or d,
                     'samples["02"]', id="size-written-twice-as-02"),
        pytest.param(lambda d: d["samples"].update({"é": [0.1] * 12}) or d,
                     'samples["é"]', id="size-not-ascii"),
        pytest.param(lambda d: d["samples"]["3"].pop() and d, "list of 12 seconds",
                     id="short-row"),
        pytest.param(lambda d: d.update(native=5) or d, "native is 5", id="wrong-native"),
        pytest.param(lambda d: d["samples"].pop("1") and d, "no entry for the native chunk 1",
                     id="no-native"),
        pytest.param(lambda d: d.update(num_envs=2**31) or d, "num_envs is 2147483648",
                     id="envs-past-int"),
        pytest.param(lambda d: '{"rounds": 3, ' + json.dumps(d)[1:],
                     '"rounds" is given more than once', id="repeated-field"),
        pytest.param(lambda d: json.dumps(d).replace('"2": [', '"2": [0.1], "2": [', 1),
                     '"2" is given more than once', id="repeated-size"),
        pytest.param(lambda d: d.update(oder=d.pop("order", [])) or d,
                     'unknown field "oder"; did you mean "order"? (expected num_envs',
                     id="misspelt-field"),
        pytest.param(lambda d: d.update(nthreads=d.pop("nthread")) or d,
                     'unknown field "nthreads"; did you mean "nthread"?', id="misspelt-required"),
        pytest.param(lambda d: d.update(order=[list(range(1, 17))]) or d,
                     "order lists 1 round; expected 12", id="order-short"),
        pytest.param(lambda d: d.update(order=[list(range(1, 17))] * 11 + [[1, 1]]) or d,
                     "order[11] is [1, 1]", id="order-ragged"),
        pytest.param(lambda d: d.update(order=[[True, *range(2, 17)]] * 12) or d,
                     "order[0] is [true, 2,", id="order-bool"),
        # past MAX_NESTING, within what every json follows / past 3.11's but not 3.13's
        pytest.param(lambda d: json.dumps(d)[:-1] + ', "x": ' + nested(600) + "}",
                     "nested more than 500 levels deep", id="nested-600"),
        pytest.param(lambda d: json.dumps(d)[:-1] + ', "x": ' + nested(5000) + "}",
                     "nested more than 500 levels deep", id="nested-5000"),
        pytest.param(lambda d: d.update(description=json.loads(nested(400))) or d,
                     "description is [[[", id="nested-400-read-as-a-value"),
    ],
)  # fmt: skip
def test_a_bad_trace_names_the_file_and_the_field(tmp_path: Path, mutate: Any, field: str) -> None:
    """Every malformed trace is a TraceError whose message names the file and the field."""
    doc = mutate(json.loads(dump_trace(synthetic())))
    path = write(tmp_path, doc)
    with pytest.raises(TraceError) as info:
        load_trace(path)
    assert str(path) in str(info.value) and field in str(info.value)
    assert isinstance(info.value, ValueError)


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        pytest.param(lambda b: b.replace(b'"recorded"', b'"r\xe9corded"'),
                     "is not UTF-8 text: byte 0xe9 at offset", id="latin-1"),
        pytest.param(lambda b: b.decode().encode("utf-16"),
                     "is not UTF-8 text: byte 0xff at offset 0", id="utf-16"),
        pytest.param(lambda b: codecs.BOM_UTF8 + b,
                     "starts with a UTF-8 byte-order mark (BOM)", id="bom"),
    ],
)  # fmt: skip
def test_a_trace_saved_in_another_encoding_is_said_to_be_so(
    tmp_path: Path, edit: Any, message: str
) -> None:
    """A trace an editor saved as Latin-1, UTF-16 or with a BOM: the file and its encoding named."""
    path = tmp_path / "t.json"
    path.write_bytes(edit(dump_trace(synthetic()).encode()))
    with pytest.raises(TraceError) as info:
        load_trace(path)
    assert str(info.value).startswith(f"{path} ") and message in str(info.value)
    assert "cannot read" not in str(info.value)  # no permission or disk to look into


HUGE = list(range(100_000))


@pytest.mark.parametrize(
    "mutate",
    [
        pytest.param(lambda d: d.update(native=HUGE) or d, id="native"),
        pytest.param(lambda d: d.update(samples=HUGE) or d, id="samples"),
        pytest.param(lambda d: d["samples"]["2"].__setitem__(0, HUGE) or d, id="seconds"),
        pytest.param(lambda d: d.update(description=HUGE) or d, id="description"),
        pytest.param(lambda d: d.update(signature=HUGE) or d, id="signature"),
    ],
)
def test_a_huge_bad_value_in_a_trace_is_shown_shortened(tmp_path: Path, mutate: Any) -> None:
    """A malformed field holding a huge value is named in a short message, not its whole repr."""
    path = write(tmp_path, mutate(json.loads(dump_trace(synthetic()))))
    with pytest.raises(TraceError) as info:
        load_trace(path)
    assert len(str(info.value)) < 500 + len(str(path))


def test_a_trace_that_never_ends_is_refused_at_its_cap(monkeypatch: pytest.MonkeyPatch) -> None:
    """ReplayWorkload.from_file('/dev/zero') stops at the cap with a TraceError naming both."""
    from chunktune import _trace

    monkeypatch.setattr(_trace, "MAX_TRACE_BYTES", 2**20)  # 256 MiB of zeros, spared
    with pytest.raises(TraceError) as info:
        ReplayWorkload.from_file("/dev/zero")
    assert str(info.value).startswith("cannot read trace /dev/zero: it holds more than 1 MiB;")


def test_a_trace_is_read_as_utf_8(tmp_path: Path) -> None:
    """A trace written with its text unescaped (a model named café) reads back as written."""
    trace = attrs.evolve(synthetic(), signature={"model": "café.xml"}, description="naïve")
    text = json.dumps(trace.to_dict(), ensure_ascii=False)
    path = tmp_path / "t.json"
    path.write_bytes(text.encode("utf-8"))
    assert load_trace(path) == trace


def test_a_missing_trace_file_is_a_trace_error(tmp_path: Path) -> None:
    """A trace that is not there says so, with its path."""
    with pytest.raises(TraceError, match=r"nope\.json"):
        ReplayWorkload.from_file(tmp_path / "nope.json")


def test_replay_draws_recorded_calls_at_the_current_machine_state() -> None:
    """Each replayed call is a recorded call of that size, moved to a recorded round's level."""
    trace = synthetic()
    w = ReplayWorkload(trace, seed=3)
    seconds = [w.run(4) for _ in range(200)]
    recorded = np.log(trace.samples[4])
    assert min(np.log(seconds)) >= recorded.min() - 2.0  # within the recorded levels' span
    assert len(set(seconds)) > 20
    assert w.calls == 200 and w.history[0][0] == 4
    again = ReplayWorkload(trace, seed=3)
    assert [again.run(4) for _ in range(200)] == seconds  # deterministic per seed


def drifting(with_order: bool) -> Trace:
    """Every round the machine slows and speeds up smoothly along the order calls ran in."""
    rng = np.random.default_rng(2)
    sizes = list(range(1, 17))
    samples: dict[int, list[float]] = {c: [] for c in sizes}
    order = []
    for _ in range(20):
        calls = [int(c) for c in rng.permutation(sizes)]
        for k, c in enumerate(calls):
            drift = 0.15 * math.sin(2 * math.pi * k / 16)
            samples[c].append(0.05 * math.exp(drift + rng.normal(0, 0.02)))
        order.append(tuple(calls))
    return Trace(
        num_envs=64, nthread=4, rounds=20, samples={c: tuple(v) for c, v in samples.items()},
        order=tuple(order) if with_order else (),
    )  # fmt: skip


def lag1(w: ReplayWorkload) -> float:
    x = np.log([w.run(c) / w.true_time(c) for c in [1, 2, 3, 4] * 100])
    return float(np.corrcoef(x[:-1], x[1:])[0, 1])


def test_replay_keeps_the_machines_short_memory_when_the_order_is_recorded() -> None:
    """With the recorded order, neighbouring replayed calls share the machine's state."""
    assert lag1(ReplayWorkload(drifting(with_order=True), seed=1)) > 0.5
    assert abs(lag1(ReplayWorkload(drifting(with_order=False), seed=1))) < 0.3


def autocorrelation(x: np.ndarray, lag: int) -> float:
    return float(np.corrcoef(x[:-lag], x[lag:])[0, 1])


def test_replay_keeps_the_shape_of_the_recorded_noises_memory() -> None:
    """Replayed calls share noise with their neighbours as the recorded ones did, fading as fast."""
    # the recorded noise here forgets quickly (lag 1: 0.6, lag 4: 0.13); a replay that
    # smoothed it into a moving state would remember it for longer than the machine did,
    # and favour pairing designs that the real machine does not
    w = ReplayWorkload(remembering(rho=0.6), seed=2)
    x = np.log([w.run(c) / w.true_time(c) for c in [1, 2, 3, 4] * 400])
    assert autocorrelation(x, 1) == pytest.approx(0.6, abs=0.1)
    assert autocorrelation(x, 4) == pytest.approx(0.6**4, abs=0.1)


def test_replay_keeps_each_sizes_own_spread() -> None:
    """A size that felt the machine's state three times as strongly is replayed about as noisy."""
    trace = remembering(rho=0.6, spreads={3: 0.3})
    w = ReplayWorkload(trace, seed=5)
    replayed = {c: np.std(np.log([w.run(c) for _ in range(900)])) for c in (2, 3)}
    recorded = {c: np.std(np.log(trace.samples[c])) for c in (2, 3)}
    assert replayed[2] == pytest.approx(recorded[2], rel=0.2)
    assert replayed[3] == pytest.approx(recorded[3], rel=0.2)
    assert replayed[3] > 2 * replayed[2]


def test_replay_truth_removes_the_rounds_levels() -> None:
    """The truth is each size's level-free geometric mean: 4 is the oracle, 15% under native."""
    w = ReplayWorkload(synthetic(rounds=40))
    assert w.oracle()[0] == 4
    assert w.true_time(4) / w.true_time(None) == pytest.approx(0.9 / 1.06, abs=0.02)
    assert w.regret(4) == 0.0 and w.regret(None) > 0.08
    apparent, held_out = w.offered_gain()
    assert held_out == pytest.approx(apparent, abs=0.02)  # a real gain survives holding out


def test_truth_error_shrinks_with_the_rounds_and_is_zero_for_native() -> None:
    """A size's truth against native is known to sigma*sqrt(2)/sqrt(R): 4x the rounds, half."""
    short, long = ReplayWorkload(synthetic(rounds=10)), ReplayWorkload(synthetic(rounds=160))
    assert short.truth_error(None) == 0.0 and short.truth_error(1) == 0.0  # 1 is native
    # two calls of 5% noise each: the ratio's spread is about 7%
    assert long.truth_error(4) == pytest.approx(0.05 * math.sqrt(2) / math.sqrt(160), rel=0.25)
    assert short.truth_error(4) > 2.5 * long.truth_error(4)


def test_held_out_gain_exposes_a_best_that_is_only_noise() -> None:
    """On a flat trace the in-sample best looks faster than native; held out, it is not."""
    rng = np.random.default_rng(5)
    samples = {c: tuple(float(x) for x in 0.05 * np.exp(rng.normal(0, 0.1, 8)))
               for c in range(1, 17)}  # fmt: skip
    w = ReplayWorkload(Trace(num_envs=64, nthread=4, rounds=8, samples=samples))
    apparent, held_out = w.offered_gain()
    assert apparent > 0.03
    assert held_out < apparent / 2


def test_truth_is_what_the_replay_draws_around_when_a_size_ran_in_slow_stretches() -> None:
    """A size whose calls all ran at the machine's slow moments is not scored slow for it."""
    rng = np.random.default_rng(3)
    sizes = list(range(1, 17))  # all equally fast; native (1) always ran at the slow peak
    samples: dict[int, list[float]] = {c: [] for c in sizes}
    order = []
    for _ in range(40):
        rest = [int(c) for c in rng.permutation(sizes[1:])]
        calls = [*rest[:4], 1, *rest[4:]]
        for k, c in enumerate(calls):
            drift = 0.15 * math.sin(2 * math.pi * k / 16)  # slowest at position 4
            samples[c].append(0.05 * math.exp(drift + rng.normal(0, 0.02)))
        order.append(tuple(calls))
    trace = Trace(num_envs=64, nthread=4, rounds=40, order=tuple(order),
                  samples={c: tuple(v) for c, v in samples.items()})  # fmt: skip
    w = ReplayWorkload(trace, seed=0)
    truth = w.true_time(2) / w.true_time(None)
    # the round level alone says native is 15% slower (0.87); the short-lived state
    # around each call takes out most of what the slow stretches did to it
    assert 0.93 < truth < 1.03
    # pairs in a random order each, so the drift along a round's positions cancels
    pairs = [(2, None) if rng.random() < 0.5 else (None, 2) for _ in range(3000)]
    times = [{c: w.run(c) for c in pair} for pair in pairs]
    replayed = np.mean([math.log(t[2] / t[None]) for t in times])
    assert replayed == pytest.approx(math.log(truth), abs=0.01)  # the replay agrees


def test_selected_rounds_keep_their_samples_and_order() -> None:
    """select_rounds keeps each size's calls and the call order of exactly those rounds."""
    trace = drifting(with_order=True)
    half = trace.select_rounds([5, 0, 17])
    assert half.rounds == 3
    assert half.samples[3] == (trace.samples[3][5], trace.samples[3][0], trace.samples[3][17])
    assert half.order == (trace.order[5], trace.order[0], trace.order[17])
    assert ReplayWorkload(half).sizes == ReplayWorkload(trace).sizes
    assert trace.select_rounds(np.arange(2)).rounds == 2  # numpy integers are rounds too
    assert drifting(with_order=False).select_rounds([1]).order == ()


@pytest.mark.parametrize(
    ("rounds", "message"),
    [
        pytest.param([0, 20], r"round 20 is not in this trace; expected an integer in 0\.\.19",
                     id="past-the-end"),
        pytest.param([-1], "round -1 is not in this trace", id="negative"),
        pytest.param([True], "round True is not in this trace", id="bool"),
        pytest.param([1.0], "round 1.0 is not in this trace", id="float"),
        pytest.param([2, 2], r"rounds \[2, 2\]: expected at least one round, each listed once",
                     id="twice"),
        pytest.param([], "expected at least one round", id="none"),
    ],
)  # fmt: skip
def test_selecting_rounds_that_do_not_exist_is_an_invalid_argument(
    rounds: list[Any], message: str
) -> None:
    """Rounds out of range, not integers, repeated or missing get an error naming them."""
    with pytest.raises(chunktune.InvalidArgumentError, match=message):
        drifting(with_order=True).select_rounds(rounds)


def test_a_size_that_was_not_recorded_cannot_be_replayed() -> None:
    """Replaying an unrecorded size is an InvalidArgumentError naming the size."""
    trace = Trace(num_envs=64, nthread=4, rounds=3, samples={1: (0.1,) * 3, 4: (0.09,) * 3})
    with pytest.raises(chunktune.InvalidArgumentError, match="chunk size 2 was not recorded"):
        ReplayWorkload(trace).run(2)


def test_unrecorded_names_what_a_policy_may_probe_beyond_a_partial_trace() -> None:
    """A partial trace lacks sizes the presets probe; a full one, or an explicit policy, none."""
    settings = chunktune.load_settings()
    full = synthetic()
    partial = Trace(
        num_envs=64, nthread=4, rounds=12, samples={c: full.samples[c] for c in (1, 4, 8)}
    )
    balanced = settings.get_policy("balanced")
    missing = ReplayWorkload(partial).unrecorded(balanced)
    assert missing and {2, 3} <= set(missing) and not {1, 4, 8} & set(missing)
    assert ReplayWorkload(partial).unrecorded(settings.get_policy("off")) == []
    mine = attrs.evolve(balanced, candidates=ExplicitCandidates(sizes=(4, 8)))
    assert ReplayWorkload(partial).unrecorded(mine) == []
    for name in ("balanced", "quick", "thorough", "seed", "patient"):
        assert ReplayWorkload(full).unrecorded(settings.get_policy(name)) == []


@pytest.mark.parametrize(
    "policy", [pytest.param("balanced", id="name"), pytest.param(None, id="none")]
)
def test_unrecorded_of_no_policy_is_an_error_naming_it(policy: object) -> None:
    """unrecorded() of a name or None is an InvalidArgumentError naming it, not AttributeError."""
    replay = ReplayWorkload(synthetic())
    with pytest.raises(chunktune.InvalidArgumentError, match=rf"got {policy!r} .*get_policy"):
        replay.unrecorded(policy)  # type: ignore[arg-type]


def test_a_preset_on_a_partial_trace_keeps_native_and_says_what_was_recorded() -> None:
    """The fallback's reason lists the sizes the trace holds and points at unrecorded()."""
    full = synthetic()
    partial = Trace(
        num_envs=64, nthread=4, rounds=12, samples={c: full.samples[c] for c in (1, 4, 8, 9, 10)}
    )
    d = chunktune.resolve_sync(ReplayWorkload(partial))
    assert d.source == "fallback" and d.chunk_size is None
    assert "was not recorded in this trace (recorded: 1, 4, 8..10)" in d.reason
    assert "ReplayWorkload.unrecorded(policy)" in d.reason


def test_a_one_round_trace_has_no_truth_error_to_tell_and_says_nan_quietly() -> None:
    """truth_error on a trace of one round is NaN, without numpy's degrees-of-freedom warning."""
    replay = ReplayWorkload(synthetic().select_rounds([0]))
    assert math.isnan(replay.truth_error(4)) and replay.truth_error(None) == 0.0


def test_a_replayed_trace_resolves_like_any_workload() -> None:
    """resolve_sync on a replay leaves native for the recorded 15% gain."""
    d = chunktune.resolve_sync(ReplayWorkload(synthetic(rounds=40), seed=1))
    assert d.source == "benchmark"
    assert d.chunk_size in (3, 4, 5)


@pytest.mark.parametrize("path", [None, 3, b"trace.json"])
def test_a_trace_path_that_is_no_path_is_a_trace_error(path: object) -> None:
    """ReplayWorkload.from_file(None), a bytes name and the like: TraceError naming the value."""
    with pytest.raises(TraceError, match="is not a trace file's path"):
        ReplayWorkload.from_file(path)  # type: ignore[arg-type]


@pytest.mark.parametrize("splits", [0, -1, 1.5, "a"])
def test_offered_gain_needs_a_whole_number_of_splits(splits: object) -> None:
    """offered_gain(splits) takes an integer >= 1; anything else raises naming it."""
    replay = ReplayWorkload(synthetic(), seed=0)
    with pytest.raises(chunktune.InvalidArgumentError, match="splits"):
        replay.offered_gain(splits)  # type: ignore[arg-type]


def test_held_out_gain_scores_each_half_by_its_own_replay_truth() -> None:
    """With the call order recorded, each half is scored as a replay of that half alone sees it."""
    trace = remembering(rho=0.6)
    replay = ReplayWorkload(trace)
    perm = np.random.default_rng(12345).permutation(trace.rounds)  # offered_gain's first split
    picking, scoring = (
        ReplayWorkload(trace.select_rounds(int(r) for r in half))
        for half in (perm[: trace.rounds // 2], perm[trace.rounds // 2 :])
    )
    best = picking.oracle()[0]
    expected = 1.0 - scoring.true_time(best) / scoring.true_time(None)
    assert replay.offered_gain(splits=1)[1] == pytest.approx(expected, abs=1e-12)


def test_a_traces_description_and_call_order_round_trip_through_its_file(tmp_path: Path) -> None:
    """dump_trace keeps the description and the order the calls ran in; load_trace reads them."""
    trace = attrs.evolve(
        synthetic(rounds=2), description="tail-heavy 24 boxes", order=(tuple(range(1, 17)),) * 2
    )
    back = load_trace(write(tmp_path, dump_trace(trace)))
    assert back.description == "tail-heavy 24 boxes" and back.order == trace.order
    assert back == trace


def test_traces_of_the_same_sizes_but_other_seconds_replay_under_other_keys() -> None:
    """A replay's signature hashes the recorded seconds, not only the sizes: no shared cache key."""
    one, other = synthetic(seed=0), synthetic(seed=1)
    assert sorted(one.samples) == sorted(other.samples)
    assert ReplayWorkload(one).signature() == ReplayWorkload(synthetic(seed=0)).signature()
    assert ReplayWorkload(one).signature() != ReplayWorkload(other).signature()


def test_replays_of_one_trace_share_a_key_whatever_their_seed_and_name() -> None:
    """The signature is the trace's alone: another seed or name replays under the same key."""
    trace = synthetic()
    seeded = ReplayWorkload(trace, seed=7, name="other")
    assert seeded.signature() == ReplayWorkload(trace).signature()


def test_a_replay_from_a_file_is_named_by_the_file(tmp_path: Path) -> None:
    """ReplayWorkload.from_file without a name takes the file's name, as tables print it."""
    path = write(tmp_path, dump_trace(synthetic()), name="tail-heavy.json")
    assert ReplayWorkload.from_file(path).name == "tail-heavy.json"
    assert ReplayWorkload.from_file(path, name="mine").name == "mine"


def test_truth_is_the_geometric_mean_of_the_recorded_calls_without_an_order() -> None:
    """Sizes that move alike with the rounds' levels: each one's truth is its calls' geomean."""
    trace = Trace(
        num_envs=64, nthread=4, rounds=3, samples={1: (0.1, 0.1, 0.2), 2: (0.05, 0.05, 0.1)}
    )
    w = ReplayWorkload(trace)
    assert w.true_time(None) == pytest.approx(0.1 * 2 ** (1 / 3), rel=1e-12)
    assert w.oracle() == pytest.approx((2, 0.05 * 2 ** (1 / 3)), rel=1e-12)


def test_truth_error_is_the_sample_spread_of_the_ratios_over_root_rounds() -> None:
    """truth_error uses the sample standard deviation (ddof=1) of the per-round log ratios."""
    calls = (0.09, 0.1, 0.12)
    trace = Trace(num_envs=64, nthread=4, rounds=3, samples={1: (0.1,) * 3, 2: calls})
    expected = float(np.std(np.log(calls), ddof=1)) / math.sqrt(3)
    assert ReplayWorkload(trace).truth_error(2) == pytest.approx(expected, rel=1e-9)


def test_an_unrecorded_size_message_cuts_a_long_list_of_recorded_sizes() -> None:
    """Past 8 runs of sizes the message lists the first 8 and counts them all."""
    odd = {c: (0.1,) * 2 for c in range(1, 32, 2)}  # 16 runs of one size each
    trace = Trace(num_envs=128, nthread=4, rounds=2, samples={**odd, 3: (0.1,) * 2})
    with pytest.raises(chunktune.InvalidArgumentError) as info:
        ReplayWorkload(trace).run(2)
    assert "recorded: 1, 3, 5, 7, 9, 11, 13, 15, ... (16 sizes)" in str(info.value)


def test_a_size_list_of_exactly_eight_runs_is_listed_whole() -> None:
    """sizes_text cuts only past 8 runs: eight are all listed, a ninth brings the count."""
    assert sizes_text(range(1, 16, 2)) == "1, 3, 5, 7, 9, 11, 13, 15"
    assert sizes_text(range(1, 18, 2)) == "1, 3, 5, 7, 9, 11, 13, 15, ... (9 sizes)"


def test_spreads_that_differ_by_sampling_alone_are_pulled_together() -> None:
    """standardized_noise pulls each size's spread toward the others' by what sampling explains."""
    base = np.array([1.0, -1.0, 1.0, -1.0])
    residuals = np.stack([base, 1.2 * base])  # 20% apart, from 4 rounds: within sampling
    spread, noise = standardized_noise(residuals, ((1, 2),) * 4, [1, 2])
    assert spread == pytest.approx([math.sqrt(1.2)] * 2)
    assert noise[0] == pytest.approx([1.0, 1.0])


def test_spreads_are_pulled_together_by_the_share_sampling_explains() -> None:
    """Log spreads from R rounds vary by 1/(2(R-1)); scattered twice that, each goes halfway."""
    # 3 rounds: sampling explains a variance of 1/4; the two log spreads scatter by 1/2
    apart = math.sqrt(2.0)  # log spread of size 2 less that of size 1: variance (apart/2)^2 = 1/2
    base = np.array([-1.0, 0.0, 1.0])
    residuals = np.stack([base, math.exp(apart) * base])
    spread, noise = standardized_noise(residuals, ((1, 2),) * 3, [1, 2])
    mean = math.log(math.sqrt(2 / 3)) + apart / 2
    assert np.log(spread) == pytest.approx([mean - apart / 4, mean + apart / 4], rel=1e-12)
    assert noise[0] == pytest.approx([-math.sqrt(1.5)] * 2)  # against each size's own spread


def test_the_machine_state_is_the_centered_mean_of_seven_calls_in_the_order_they_ran() -> None:
    """without_machine_state takes out the mean of the calls k-3..k+3, cut at the round's ends."""
    sizes = list(range(1, 9))
    order = (tuple(reversed(sizes)),)  # size 5 ran 4th (position 3)
    residuals = np.zeros((8, 1))
    residuals[4, 0] = 7.0
    own = without_machine_state(residuals, order, sizes)
    # the state by position: 7 over the calls each window holds, 0 where 5 is out of it
    state = [7 / 4, 7 / 5, 7 / 6, 1.0, 1.0, 7 / 6, 7 / 5, 0.0]
    expected = [residuals[c - 1, 0] - state[order[0].index(c)] for c in sizes]
    assert own[:, 0] == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize(
    "trace",
    [
        pytest.param("benchmarks/traces/demo-tail-256.json", id="path"),
        pytest.param(None, id="none"),
    ],
)
def test_a_replay_of_no_trace_is_an_error_naming_it(trace: object) -> None:
    """ReplayWorkload(a path or None) is an InvalidArgumentError pointing at from_file."""
    with pytest.raises(chunktune.InvalidArgumentError, match=rf"got {trace!r} .*from_file"):
        ReplayWorkload(trace)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("samples", "named"),
    [
        ({12: (1.0, 1.0), 3: (1.0,)}, 'samples["3"] must be a list of 2 seconds'),
        ({12: (1.0, -1.0)}, 'samples["12"][1] is -1.0; expected seconds'),
        ({12: (1.0, math.nan)}, 'samples["12"][1] is NaN; expected seconds'),
        ({12: (1.0, 1.0), 500: (1.0, 1.0)}, "chunk sizes must be integers in 1..128"),
        ({3: (1.0, 1.0)}, "samples has no entry for the native chunk 12"),
    ],
)
def test_a_trace_built_in_code_is_held_to_a_trace_files_rules(
    samples: dict[int, tuple[float, ...]], named: str
) -> None:
    """ReplayWorkload(Trace(...)) with a bad time, size or round count: TraceError naming it."""
    trace = Trace(num_envs=256, nthread=2, rounds=2, samples=samples, description="mine")
    with pytest.raises(TraceError) as err:
        ReplayWorkload(trace)
    assert str(err.value).startswith("trace mine: ") and named in str(err.value)


def test_a_one_round_trace_asks_for_one_second_per_size() -> None:
    """A 1-round trace with a size of 2 samples asks for "a list of 1 second", not "1 seconds"."""
    trace = Trace(num_envs=256, nthread=2, rounds=1, samples={12: (1.0, 1.0)}, description="x")
    with pytest.raises(TraceError, match=r'samples\["12"\] must be a list of 1 second \(one'):
        ReplayWorkload(trace)


def test_a_recorded_trace_s_repr_counts_its_samples_rather_than_listing_them() -> None:
    """repr(Trace) of a recorded landscape names N, T, rounds and sizes, not every second."""
    path = Path(__file__).parents[1] / "benchmarks/traces/manycore/cheetah-2048-t16.json"
    trace = load_trace(path)
    text = repr(trace)
    assert len(text) < 1000
    assert "num_envs=2048, nthread=16, rounds=20" in text
    assert f"samples=<{len(trace.samples)} sizes from 1 to {max(trace.samples)}>" in text
    assert repr(trace.samples[1][0]) not in text
    assert repr(Trace(num_envs=4, nthread=2, rounds=1, samples={})).count("samples={}") == 1
    assert "order=()" in repr(Trace(num_envs=4, nthread=2, rounds=1, samples={}))


def _levelled(rounds: int, sizes: list[int], *, seed: int = 0, with_order: bool = False) -> Trace:
    """Each size's calls: its cost times its round's level (1.0, 1.1, ...), noisy with order."""
    rng = np.random.default_rng(seed)
    noise = rng.normal(0, 0.05 if with_order else 0.0, (len(sizes), rounds))
    samples = {
        c: tuple(0.01 * c * (1.0 + 0.1 * r) * math.exp(noise[i, r]) for r in range(rounds))
        for i, c in enumerate(sizes)
    }  # fmt: skip
    order = tuple(tuple(int(c) for c in rng.permutation(sizes)) for _ in range(rounds))
    return Trace(num_envs=64, nthread=4, rounds=rounds, samples=samples,
                 order=order if with_order else ())  # fmt: skip


def test_without_the_order_the_replay_moves_to_a_random_round_once_in_sizes_calls() -> None:
    """No order: after each call the machine moves to a random round with probability 1/sizes."""
    replay = ReplayWorkload(_levelled(8, [1, 2, 3, 4]), seed=3)
    seconds = [replay.run(2) for _ in range(2000)]
    assert len({round(s, 9) for s in seconds}) == 8  # one value per round's level
    moves = sum(not math.isclose(a, b, rel_tol=1e-9) for a, b in itertools.pairwise(seconds))
    # 1999 chances at 1/4, a move landing on another of the 8 rounds 7 times in 8: about 437
    assert 380 < moves < 500


def test_the_replay_walks_through_every_call_of_a_recorded_round_the_last_included() -> None:
    """With the order, a replay of one size meets every call of each round, the last too."""
    replay = ReplayWorkload(_levelled(4, [1, 2, 4], with_order=True), seed=1)
    seconds = {round(replay.run(2), 12) for _ in range(600)}
    assert len(seconds) == 4 * 3  # 4 rounds, 3 calls each, every one of them met


def test_a_trace_of_three_rounds_offers_no_held_out_gain() -> None:
    """offered_gain's held-out figure needs two rounds a half: NaN at 3 rounds, a number at 4."""
    assert math.isnan(ReplayWorkload(synthetic(rounds=3)).offered_gain(splits=5)[1])
    assert math.isfinite(ReplayWorkload(synthetic(rounds=4)).offered_gain(splits=5)[1])


def test_replays_of_other_seeds_open_at_any_call_not_only_a_round_s_first() -> None:
    """A 4-round trace of 3 calls a round opens 12 ways over seeds, not 4 (one per round)."""
    trace = _levelled(4, [1, 2, 4], with_order=True)
    openings = {round(ReplayWorkload(trace, seed=s).run(2), 12) for s in range(200)}
    assert len(openings) == 4 * 3


def test_call_in_round_counts_the_walk_s_calls_in_its_round_and_wraps_at_its_end() -> None:
    """call_in_round counts 0, 1, 2 through a round of 3 calls, then 0 as the next opens."""
    replay = ReplayWorkload(_levelled(4, [1, 2, 4], with_order=True), seed=5)
    positions = []
    for _ in range(7):
        positions.append(replay.call_in_round)
        replay.run(2)
    start = positions[0]
    assert positions == [(start + k) % 3 for k in range(7)]
    assert ReplayWorkload(_levelled(4, [1, 2, 4]), seed=5).call_in_round == 0  # no order


def test_a_field_no_known_name_is_near_is_left_as_it_is(tmp_path: Path) -> None:
    """A trace with a newer version's field or a note by hand loads as the trace it holds."""
    doc = json.loads(dump_trace(synthetic()))
    doc.update(comment="recorded by hand", calls_per_second=[1.0, 2.0])
    assert load_trace(write(tmp_path, doc)) == synthetic()


def test_replays_open_at_any_call_when_a_round_holds_more_calls_than_there_are_rounds() -> None:
    """A 3-round trace of 4 calls a round opens 12 ways over seeds: any call of any round."""
    trace = _levelled(3, [1, 2, 4, 8], with_order=True)
    openings = {round(ReplayWorkload(trace, seed=s).run(2), 12) for s in range(300)}
    assert len(openings) == 3 * 4


def test_reset_after_calls_replays_what_a_fresh_replay_of_the_seed_draws() -> None:
    """reset() restarts the seed's draws: the same seconds as a new ReplayWorkload of it."""
    trace = _levelled(4, [1, 2, 4], with_order=True)
    w = ReplayWorkload(trace, seed=7)
    first = [w.run(c) for c in (1, 2, 4) * 5]
    w.reset()
    assert [w.run(c) for c in (1, 2, 4) * 5] == first


@pytest.mark.parametrize(
    ("misspelt", "field"),
    [
        pytest.param("descripton", "description", id="description"),
        pytest.param("signatures", "signature", id="signature"),
        pytest.param("machin", "machine", id="machine"),
        pytest.param("recorder", "recorded", id="recorded"),
        pytest.param("nativ", "native", id="native"),
    ],
)
def test_a_misspelt_optional_field_is_refused_with_its_name(
    tmp_path: Path, misspelt: str, field: str
) -> None:
    """Each optional field misspelt (which would fall back to its default) names the field."""
    doc = json.loads(dump_trace(synthetic()))
    doc[misspelt] = doc.pop(field, "x")
    with pytest.raises(TraceError, match=f'unknown field "{misspelt}"; did you mean "{field}"'):
        load_trace(write(tmp_path, doc))


def test_a_field_only_loosely_like_a_known_name_is_left_as_it_is(tmp_path: Path) -> None:
    """A note named "note" or "envs" (near-ish native, num_envs) is ignored, not refused."""
    doc = json.loads(dump_trace(synthetic()))
    doc.update(note="by hand", envs=256, machine_name="node7")
    assert load_trace(write(tmp_path, doc)) == synthetic()


@pytest.mark.parametrize(
    ("name", "text"),
    [
        pytest.param("new\nline.json", "not json", id="newline-not-json"),
        pytest.param("new\nline.json", '{"num_envs": 1}', id="newline-missing-field"),
        pytest.param("new\nline.json", "\ufeff{}", id="newline-bom"),
        pytest.param(os.fsdecode(b"bad\xffname.json"), "not json", id="not-utf8-name"),
    ],
)
def test_a_trace_s_odd_file_name_is_shown_escaped_on_one_line(
    tmp_path: Path, name: str, text: str
) -> None:
    """A trace named with a newline or a non-UTF-8 byte: a one-line TraceError, the name escaped."""
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    with pytest.raises(TraceError) as err:
        ReplayWorkload.from_file(path)
    message = str(err.value)
    assert "\n" not in message
    message.encode("utf-8")  # no lone surrogate: a UTF-8 log can write it
    assert str(tmp_path) in message


def test_a_described_trace_built_in_code_is_named_on_one_line() -> None:
    """ReplayWorkload(Trace) whose description holds a newline: its error names it on one line."""
    trace = Trace(num_envs=4, nthread=1, rounds=1, samples={1: (-1.0,)}, description="a\nb.xml")
    with pytest.raises(TraceError) as err:
        ReplayWorkload(trace)
    assert str(err.value).startswith('trace "a\\nb.xml": samples["1"][0] is -1.0')


@pytest.mark.parametrize(
    ("values", "held"),
    [
        pytest.param([0.1, 0.1, 0.1], "it holds 3 values", id="short"),
        pytest.param([], "it holds 0 values", id="empty"),
        pytest.param(0.1, "it is 0.1", id="not-a-list"),
    ],
)
def test_a_size_with_the_wrong_number_of_rounds_says_how_many_it_holds(
    tmp_path: Path, values: object, held: str
) -> None:
    """samples[c] of the wrong length: TraceError says how many values it holds (or what it is)."""
    doc = {"num_envs": 4, "nthread": 1, "rounds": 4, "samples": {"1": [0.1] * 4, "2": values}}
    with pytest.raises(TraceError) as err:
        load_trace(write(tmp_path, doc))
    assert str(err.value).endswith(
        'samples["2"] must be a list of 4 seconds (one per round); ' + held
    )


@pytest.mark.parametrize(
    "path",
    [
        pytest.param("", id="empty"),
        pytest.param("a\0b.json", id="nul"),
        pytest.param(Path("a\0b.json"), id="nul-path"),
    ],
)
def test_a_trace_path_that_names_no_file_is_a_trace_error(path: str | Path) -> None:
    """from_file("") or a path with a NUL byte: a TraceError naming it, not "." or a ValueError."""
    with pytest.raises(TraceError, match=r"is not a trace file's path; expected a file name"):
        ReplayWorkload.from_file(path)
