"""Smoke test of the benchmark scripts: they import, and tiny cases give sane, scored rows."""

from __future__ import annotations

import ast
import contextlib
import importlib
import json
import math
import os
import subprocess
import sys
import tarfile
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import attrs
import numpy as np
import pytest
from _holders import holding
from _pools import remembering

from chunktune import load_settings
from chunktune._confirm import Confirmation
from chunktune._lock_files import sweep_lock_path
from chunktune._margin import least_gain
from chunktune._spans import span_gain
from chunktune._trace import Trace, dump_trace
from chunktune.sim import LAYOUTS, Noise, ReplayWorkload, SimulatedWorkload

BENCH = Path(__file__).resolve().parent.parent / "benchmarks"


def _script(name: str) -> ModuleType:
    """The benchmark script ``benchmarks/<name>.py``, imported as its own folder imports it."""
    sys.path.insert(0, str(BENCH))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(str(BENCH))


@pytest.fixture(scope="module")
def bench() -> Iterator[dict[str, ModuleType]]:
    sys.path.insert(0, str(BENCH))
    try:
        names: tuple[str, ...] = ("cases", "measure", "report", "ceiling", "held_out")
        names += ("calibration",)
        names += ("device_landscapes", "unseen", "needle", "replay_fidelity", "adversary")
        names += ("novel", "burst_pairs", "odd_pools")
        yield {name: importlib.import_module(name) for name in names}
    finally:
        sys.path.remove(str(BENCH))


def test_suites_span_the_required_ranges(bench: dict[str, ModuleType]) -> None:
    """Full has >= 24 cases, quick >= 12, over 8..128 threads, narrow optima included."""
    full = bench["cases"].SIM_CASES
    quick = [c for c in full if c.quick]
    assert len(full) >= 24 and len(quick) >= 12
    for cases in (full, quick):
        assert {"uniform", "lognormal", "blocked", "variants"} <= {c.layout for c in cases}
        assert min(c.nthread for c in cases) == 8 and max(c.nthread for c in cases) == 128
    assert any(c.queue_s > 0 for c in quick)  # a contended queue: narrow optima
    assert len({c.name for c in full}) == len(full)
    assert sum(c.quick for c in bench["cases"].REAL_CASES) >= 2


def test_the_robots_live_cases_run_only_when_named_and_build_real_workloads(
    bench: dict[str, ModuleType],
) -> None:
    """run.py's live rows: the two standard batches by default, a robot only by name; it runs."""
    cases = bench["cases"]
    assert [c.name for c in cases.live_cases(None)] == ["tail-heavy-256", "uniform-air-256"]
    assert [c.name for c in cases.live_cases(["humanoid", "tail"])] == [
        "tail-heavy-256",
        "humanoid-128",
    ]
    (quadruped,) = cases.live_cases(["quadruped"])
    assert not quadruped.uneven  # held to "none slower than native" only
    with quadruped.build(2) as workload:
        assert (workload.num_envs, workload.nthread) == (128, 2)
        assert workload.run(None) > 0


def test_one_tiny_simulated_case_gives_scored_rows(
    bench: dict[str, ModuleType], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A tiny case through the real resolve path yields one row per seed, scored and summarized."""
    monkeypatch.setenv("CHUNKTUNE_CACHE", str(tmp_path / "cache.json"))
    measure, report = bench["measure"], bench["report"]
    settings = measure.bench_settings()
    assert not settings.cache.enabled
    case = bench["cases"].SimCase(layout="blocked", num_envs=64, nthread=4, sigma=0.02)
    policies = measure.policies_named(settings, ["balanced", "seed"])

    rows = measure.sim_rows(case, 0, policies, 2, settings)

    assert [r.seed for r in rows] == [0, 1, 0, 1]
    for row in rows:
        assert row.regret >= 0.0
        assert row.vs_native <= row.regret + 1e-12  # the oracle is never slower than native
        assert row.probe_seconds > 0.0
    assert not (tmp_path / "cache.json").exists()
    summary = report.summarize_sim(rows)["balanced"]
    assert summary["runs"] == 2 and summary["probe_vs_seed"] is not None
    assert summary["max_single_regret"] >= summary["median_regret"] >= 0.0
    assert "balanced" in report.sim_summary_table(report.summarize_sim(rows))
    checks = report.check_targets(rows, [], [])
    assert {c.target.split(":")[0] for c in checks} == {"sim"}


def test_claims_are_set_against_the_truth_and_live_reasons_are_listed(
    bench: dict[str, ModuleType],
) -> None:
    """The claims table compares confirmed claims with the truth; each live tune's reason prints."""
    measure, report = bench["measure"], bench["report"]
    common = dict(case="c", layout="uniform", nthread=4, num_envs=64, noise_sigma=0.02,
                  policy="balanced", native_chunk=2, oracle_chunk=4, oracle_gain=0.05,
                  regret=0.0, probe_seconds=1.0, probes=10, partial=False)  # fmt: skip
    rows = [
        measure.SimRow(seed=0, chunk_size=4, vs_native=-0.04, confirmed=True,
                       claimed_gain=0.06, claimed_ci=(0.01, 0.08), **common),
        measure.SimRow(seed=1, chunk_size=4, vs_native=-0.04, confirmed=True,
                       claimed_gain=0.02, claimed_ci=(0.01, 0.03), **common),
        measure.SimRow(seed=2, chunk_size=None, vs_native=0.0, confirmed=False, **common),
    ]  # fmt: skip
    line = report.claims_table(rows).splitlines()[-1].split()
    # two confirmed: claimed 4.00% on average against a true 4.00%; one interval holds it
    assert line == ["balanced", "2", "+4.00%", "+4.00%", "1.00", "50%"]
    live = measure.LiveRow(
        case="tail", nthread=2, num_envs=8, policy="balanced", tune=1, chunk_size=None,
        native_chunk=1, claimed_gain=0.0, claimed_ci=None, partial=False, probe_seconds=1.0,
        sweep_wall_s=1.0, reason="kept the native chunk 1: why", measured_gain=0.0,
        measured_low=0.0, measured_high=0.0, best_known=2, best_known_gain=0.01,
        best_known_ci=(0.0, 0.02), rounds=10, hog=True, uneven=True,
    )  # fmt: skip
    assert report.live_reasons([live]) == "tail tune 1 (hog): kept the native chunk 1: why"


def test_a_trace_replays_into_scored_rows(bench: dict[str, ModuleType], tmp_path: Path) -> None:
    """A small trace gives one row per draw with the gain on offer, held out and captured."""
    samples = {c: tuple(0.01 * (1.0 if c != 2 else 0.8) * (1 + 0.01 * r) for r in range(6))
               for c in range(1, 5)}  # fmt: skip
    path = tmp_path / "small.json"
    path.write_text(dump_trace(Trace(num_envs=16, nthread=4, rounds=6, samples=samples)))
    measure, report = bench["measure"], bench["report"]
    settings = measure.bench_settings()
    rows = measure.trace_rows(path, measure.policies_named(settings, ["balanced"]), 2, settings)
    assert len(rows) == 2 and rows[0].oracle_chunk == 2
    assert rows[0].offered == pytest.approx(0.2)
    summary = report.summarize_traces(rows)["balanced"]
    assert summary["offered"] == pytest.approx(0.2)
    assert -1.0 < summary["captured_share"] <= 1.0


def _two_sizes(tmp_path: Path) -> Path:
    """64 envs on 4 threads, sizes 1 (native) and 4 alone: balanced probes more."""
    samples = {c: tuple(0.05 * (0.8 if c == 4 else 1.0) * (1 + 0.01 * (r % 3)) for r in range(20))
               for c in (1, 4)}  # fmt: skip
    path = tmp_path / "two-sizes.json"
    path.write_text(dump_trace(Trace(num_envs=64, nthread=4, rounds=20, samples=samples)))
    return path


def test_a_run_whose_workload_failed_is_not_scored_as_keeping_native(
    bench: dict[str, ModuleType], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A replay that fails mid-sweep (here a size it lacks) stops the run, naming the draw."""
    path = _two_sizes(tmp_path)
    measure = bench["measure"]
    monkeypatch.setattr(measure, "check_replayable", lambda *a: None)
    settings = measure.bench_settings()
    with pytest.raises(measure.BenchmarkError, match=r"balanced on .*two-sizes draw 0: the run"):
        measure.trace_rows(path, measure.policies_named(settings, ["balanced"]), 1, settings)


def test_a_trace_lacking_sizes_a_policy_probes_is_refused_before_any_replay(
    bench: dict[str, ModuleType], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """run.py on a partial trace: exit 2 at once, naming the trace, policy, sizes to record."""
    path = _two_sizes(tmp_path)
    measure = bench["measure"]
    policies = measure.policies_named(measure.bench_settings(), ["balanced", "seed"])
    with pytest.raises(measure.BenchmarkError) as info:
        measure.check_replayable([path], policies)
    message = str(info.value)
    assert "two-sizes (recorded: 1, 4): balanced may probe 2, 3, 5..8; " in message
    assert "; seed may probe 2, 3, 6, 7, 13, 16\n" in message
    assert message.endswith("record --sizes 1,2,3,4,5,6,7,8,13,16")
    argv = ["--no-sim", "--traces", str(tmp_path), "--draws", "1", "--policies", "balanced"]
    assert _script("run").main(argv) == 2
    out, err = capsys.readouterr()
    assert err.startswith("run.py: error: these traces do not hold") and "two-sizes" in err
    assert "traces:" not in out  # refused before anything was replayed


@pytest.mark.parametrize("script", ["run", "held_out"])
def test_a_file_that_is_no_trace_is_refused_with_one_line(
    script: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """run.py and held_out.py on a directory holding a broken trace: exit 2, file named."""
    (tmp_path / "broken.json").write_text('{"num_envs": 64')
    argv = ["--traces", str(tmp_path), "--draws", "1", "--policies", "balanced"]
    argv = ["--no-sim", *argv] if script == "run" else argv
    assert _script(script).main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"{script}.py: error: ") and "broken.json" in err
    assert "Traceback" not in err


@pytest.mark.parametrize("script", ["run", "held_out", "calibration", "ceiling"])
@pytest.mark.parametrize("folder", ["missing", "empty"])
def test_a_traces_folder_that_holds_no_trace_is_refused_with_one_line(
    script: str, folder: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--traces naming no folder, or one without a trace: exit 2 naming it, not empty tables."""
    where = tmp_path / folder
    if folder == "empty":
        where.mkdir()
        (where / "notes.txt").write_text("no trace here")
    with pytest.raises(SystemExit) as exit_:
        _script(script).main(["--traces", str(where), "--draws", "1"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert f"argument --traces: {where}: expected" in err and "Traceback" not in err


@pytest.mark.parametrize("script", ["run", "held_out"])
@pytest.mark.parametrize("broken", ["folder", "trace"])
def test_a_trace_or_folder_named_with_a_newline_is_refused_on_one_line(
    script: str, broken: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--traces naming a missing folder, or a broken trace, with a newline: exit 2, one line."""
    where = tmp_path / "a\nb"
    if broken == "trace":
        where.mkdir()
        (where / "x.json").write_text('{"num_envs": 64')
    argv = ["--traces", str(where), "--draws", "1", "--policies", "balanced"]
    argv = ["--no-sim", *argv] if script == "run" else argv
    with contextlib.suppress(SystemExit):  # argparse exits; a trace it cannot read returns 2
        assert _script(script).main(argv) == 2
    last = capsys.readouterr().err.splitlines()[-1]  # argparse's usage lines come first
    assert ": error: " in last and "a\\nb" in last  # argparse's prog is pytest's in process


def test_held_out_refuses_a_trace_lacking_sizes_a_policy_probes(
    bench: dict[str, ModuleType], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """held_out.py on a partial trace: exit 2 before any replay, naming the sizes it lacks."""
    _two_sizes(tmp_path)
    argv = ["--draws", "1", "--policies", "balanced", "--traces", str(tmp_path)]
    assert bench["held_out"].main(argv) == 2
    out, err = capsys.readouterr()
    assert err.startswith("held_out.py: error:") and "balanced may probe 2, 3, 5..8" in err
    assert out == ""


def _split_trace(
    rounds: int, fast: int, gain: float, noise: float = 0.05, slower: float = 0.0
) -> Trace:
    """64 envs on 4 threads, sizes 1..16: ``fast`` is ``gain`` faster than native (1), and
    the rest ``slower`` slower."""
    rng = np.random.default_rng(0)
    level = np.exp(rng.normal(0.0, 0.2, rounds))
    cost = {c: 0.05 * (1 - gain * (c == fast) + slower * (c not in (1, fast)))
            for c in range(1, 17)}  # fmt: skip
    samples = {c: tuple(float(cost[c] * level[r] * np.exp(rng.normal(0, noise)))
                        for r in range(rounds))
               for c in range(1, 17)}  # fmt: skip
    return Trace(num_envs=64, nthread=4, rounds=rounds, samples=samples)


def test_held_out_halves_split_every_round_once(bench: dict[str, ModuleType]) -> None:
    """A draw's replayed and scoring halves are disjoint, cover the rounds, and differ by draw."""
    halves = bench["held_out"].halves
    replayed, scoring = halves(31, 0)
    assert sorted(replayed + scoring) == list(range(31)) and len(replayed) == 15
    assert halves(31, 0) == (replayed, scoring) and halves(31, 1) != (replayed, scoring)


def test_held_out_scores_capture_a_real_gain_and_expose_a_lucky_one(
    bench: dict[str, ModuleType],
) -> None:
    """A real 15% gain is captured on unseen rounds; on a flat trace A's best gains nothing."""
    held_out, measure = bench["held_out"], bench["measure"]
    settings = measure.bench_settings()
    policies = measure.policies_named(settings, ["balanced"])
    real = held_out.held_out_rows(
        _split_trace(40, 4, 0.15), "real", policies, 4, settings, ceiling=policies["balanced"]
    )
    assert [r.policy for r in real[:2]] == ["ceiling", "balanced"]  # one of each per draw
    assert all(r.chunk_size == 4 and r.gain == pytest.approx(0.15, abs=0.05) for r in real)
    summary = held_out.summarize(real)["balanced"]
    assert summary.captured / summary.best > 0.8 and summary.slower == 0
    flat_trace = _split_trace(24, 4, 0.0, noise=0.1)
    flat = held_out.held_out_rows(flat_trace, "flat", policies, 8, settings)
    # the best of 16 equal sizes looks faster on the rounds it was picked on, not on the others
    seen = [ReplayWorkload(flat_trace.select_rounds(held_out.halves(24, d)[0])) for d in range(8)]
    in_sample = float(np.mean([1 - w.oracle()[1] / w.true_time(None) for w in seen]))
    assert in_sample > 0.02
    assert float(np.mean([r.best_gain for r in flat])) < in_sample / 2
    assert "balanced" in held_out.report(real + flat)


def test_held_out_reasons_sort_each_decision_by_what_kept_native(
    bench: dict[str, ModuleType],
) -> None:
    """--reasons files a real gain under 'left native' and a flat trace's draws under why not."""
    held_out, measure = bench["held_out"], bench["measure"]
    settings = measure.bench_settings()
    policies = measure.policies_named(settings, ["balanced"])
    real = held_out.held_out_rows(_split_trace(40, 4, 0.15), "real", policies, 2, settings)
    flat = held_out.held_out_rows(
        _split_trace(24, 4, 0.0, noise=0.1), "flat", policies, 4, settings
    )
    kinds = {held_out.reason_kind(r.chunk_size, r.reason) for r in real}
    assert kinds == {"left native"}
    kept = [held_out.reason_kind(r.chunk_size, r.reason) for r in flat if r.chunk_size is None]
    assert kept and "other" not in kept  # each reason a kind the table names
    table = held_out.reasons_report(real + flat)
    assert table.splitlines()[0].split()[:3] == ["policy", "decision", "draws"]
    assert "balanced   left native" in table


def test_calibration_offers_each_size_alone_and_bins_by_true_gain(
    bench: dict[str, ModuleType], tmp_path: Path
) -> None:
    """A size 15% faster leaves native each time; sizes no faster do no more often than alpha."""
    calibration, measure = bench["calibration"], bench["measure"]
    path = tmp_path / "one-fast.json"
    path.write_text(dump_trace(_split_trace(40, 4, 0.15, slower=0.02)))
    settings = measure.bench_settings()
    rows = calibration.calibration_rows(path, settings.get_policy("balanced"), 3, settings)
    assert {r.chunk_size for r in rows} == set(range(2, 17))  # every size but native (1)
    fast = [r for r in rows if r.chunk_size == 4]
    assert len(fast) == 3 and all(r.left_native for r in fast)
    # the rest are 2% slower, recorded to about 1.1%: those no faster by the truth stay, but
    # for alpha's share (each size replays on seeds of its own, so they are 30 chances)
    (_, runs, left), *_ = calibration.summarize(rows)
    assert runs >= 15 and left <= 0.05 * runs
    assert "over +6%" in calibration.report(rows, -0.03)


def _pool(seed: int) -> SimulatedWorkload:
    """1024 envs on 4 threads, the last 64 heavy: native (25) is 30% slower than 16, 64 twice."""
    costs = np.full(1024, 0.0001)
    costs[-64:] = 0.002
    return SimulatedWorkload(costs, nthread=4, noise=Noise(sigma=0.03), seed=seed)


def test_ceiling_confirms_a_clear_gain_and_never_a_loss(bench: dict[str, ModuleType]) -> None:
    """The known-best confirmation leaves native on a 23% gain and never on a slower size."""
    ceiling = bench["ceiling"]
    policy = bench["measure"].bench_settings().get_policy("balanced")
    truth = _pool(0)
    fast, _ = truth.oracle()
    assert fast is not None and truth.true_time(fast) < 0.8 * truth.true_time(None)
    assert truth.true_time(64) > 1.5 * truth.true_time(None)
    wins = [ceiling.confirm_known_best(_pool(s), fast, policy, 10.0) for s in range(5)]
    losses = [ceiling.confirm_known_best(_pool(s), 64, policy, 10.0) for s in range(5)]
    assert all(wins) and not any(losses)


def test_ceiling_confirms_nothing_when_the_budget_pays_for_too_few_pairs(
    bench: dict[str, ModuleType],
) -> None:
    """Under confirm_min_pairs pairs affordable, the known best is not confirmed and not run."""
    ceiling = bench["ceiling"]
    policy = bench["measure"].bench_settings().get_policy("balanced")
    workload = _pool(0)
    fast, _ = workload.oracle()
    budget = 0.5 * policy.confirm_min_pairs * (workload.true_time(None) + workload.true_time(fast))
    assert not ceiling.confirm_known_best(workload, fast, policy, budget)
    assert workload.calls == 0


@pytest.mark.parametrize("flag", ["--unbounded", "--quick"])
def test_run_script_runs_a_picked_case_under_each_documented_mode(
    flag: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """benchmarks/run.py with --unbounded or --quick on one simulated case: exit 0, one row."""
    run = _script("run")
    argv = [flag, "--no-traces", "--cases", "uniform-256x8", "--seeds", "1", "--policies", "quick"]
    assert run.main(argv) == 0
    out = capsys.readouterr().out
    assert "simulated: 1 cases" in out and "uniform-256x8" in out


@pytest.mark.parametrize("rounds", ["0", "-3", "many"])
def test_record_traces_script_refuses_rounds_below_one_with_one_line(
    rounds: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """benchmarks/record_traces.py --rounds 0: argparse's exit 2 naming the value, no traceback."""
    script = _script("record_traces")
    with pytest.raises(SystemExit) as exit_:
        script.main(["--rounds", rounds, "--only", "humanoid-128"])
    assert exit_.value.code == 2
    assert f"--rounds: '{rounds}' is not an integer >= 1" in capsys.readouterr().err


_MANYCORE = str(BENCH / "traces" / "manycore")
_UNKNOWN = 'unknown policy "nosuch"'


@pytest.mark.parametrize(
    ("script", "argv", "says"),
    [
        pytest.param("run", ["--seeds", "0", "--no-traces", "--cases", "uniform-256"],
                     "argument --seeds: '0' is not an integer >= 1", id="run-seeds-0-ran-5"),
        pytest.param("run", ["--draws", "-1", "--no-sim", "--cases", "demo-tail-256-t4"],
                     "argument --draws: '-1'", id="run-draws-negative"),
        pytest.param("run", ["--tunes", "0", "--no-sim", "--no-traces"],
                     "argument --tunes: '0'", id="run-tunes-0"),
        pytest.param("run", ["--policies", "nosuch", "--no-traces", "--cases", "uniform-256"],
                     f"--policies: {_UNKNOWN}", id="run-unknown-policy"),
        pytest.param("run", ["--rounds", "1", "--live", "--no-sim", "--no-traces"],
                     "--rounds 1: expected at least 2", id="run-rounds-1"),
        pytest.param("run", ["--remeasure-s", "-1", "--no-sim", "--no-traces"],
                     "--remeasure-s -1.0: expected", id="run-remeasure-negative"),
        pytest.param("run", ["--remeasure-s", "inf", "--no-sim", "--no-traces"],
                     "--remeasure-s inf: expected", id="run-remeasure-inf"),
        pytest.param("hog_blocks", ["--rounds", "1"], "--rounds 1: expected at least 2",
                     id="hog_blocks-rounds-1"),
        pytest.param("stretch_gains", ["--case", "nosuch"], "--case nosuch: expected",
                     id="stretch_gains-case"),
        pytest.param("stretch_gains", ["--seconds", "0"],
                     "argument --seconds: '0' is not a finite number of seconds > 0",
                     id="stretch_gains-seconds"),
        pytest.param("stretch_gains", ["--seconds", "nan"], "argument --seconds: 'nan'",
                     id="stretch_gains-seconds-nan-indexerror"),
        pytest.param("stretch_gains", ["--seconds", "1", "--bins", "4", "nan"],
                     "argument --bins: 'nan'", id="stretch_gains-bins-nan-garbage"),
        pytest.param("stretch_gains", ["--sizes", "4", "0"], "argument --sizes: '0'",
                     id="stretch_gains-sizes"),
        pytest.param("held_out", ["--draws", "0"], "argument --draws: '0'", id="held_out-draws"),
        pytest.param("held_out", ["--policies", "nosuch"], _UNKNOWN, id="held_out-policy"),
        pytest.param("needle", ["--draws", "0"], "argument --draws: '0'", id="needle-draws"),
        pytest.param("needle", ["--gain", "-1", "--draws", "1"], "--gain -1", id="needle-gain"),
        pytest.param("needle", ["--policies", "nosuch"], _UNKNOWN, id="needle-policy"),
        pytest.param("ceiling", ["--draws", "0", "--no-sim"], "argument --draws: '0'",
                     id="ceiling-draws-indexerror"),
        pytest.param("ceiling", ["--budget", "-1", "--no-sim", "--draws", "1",
                                 "--traces", _MANYCORE], "--budget -1", id="ceiling-budget"),
        pytest.param("ceiling", ["--policy", "nosuch"], f"--policy: {_UNKNOWN}",
                     id="ceiling-policy"),
        pytest.param("held_out_causes", ["--traces", _MANYCORE, "--draws", "0"],
                     "argument --draws: '0'", id="held_out_causes-draws-zerodivision"),
        pytest.param("held_out_causes", ["--traces", _MANYCORE, "--policy", "nosuch"],
                     _UNKNOWN, id="held_out_causes-policy"),
        pytest.param("calibration", ["--draws", "0"], "argument --draws: '0'",
                     id="calibration-draws"),
        pytest.param("calibration", ["--policy", "nosuch"], _UNKNOWN, id="calibration-policy"),
        pytest.param("cross_regime", ["--policy", "nosuch", "--only", "quadruped-128"],
                     _UNKNOWN, id="cross_regime-policy"),
        pytest.param("stalls", ["--policies", "nosuch", "--only", "uniform-256x8"], _UNKNOWN,
                     id="stalls-policy"),
        pytest.param("unseen", ["--cases", "0"], "argument --cases: '0'", id="unseen-cases"),
        pytest.param("unseen", ["--seeds", "0", "--cases", "2"], "argument --seeds: '0'",
                     id="unseen-seeds"),
        pytest.param("novel", ["--worst", "-1", "--cases", "1", "--seeds", "1"], "--worst -1",
                     id="novel-worst"),
        pytest.param("tooth_census", ["--cases", "-5"], "argument --cases: '-5'",
                     id="tooth_census-cases-valueerror"),
        pytest.param("se_factor", ["--draws", "0"], "--draws 0", id="se_factor-indexerror"),
        pytest.param("trace_stats", ["/nonexistent/x.json"], "cannot read trace",
                     id="trace_stats-missing-file"),
        pytest.param("replay_fidelity", ["/nonexistent/x.json"], "cannot read trace",
                     id="replay_fidelity-missing-file"),
        pytest.param("hit_bench", ["--calls", "0", "--entries", "1"], "--calls 0",
                     id="hit_bench-calls-indexerror"),
        pytest.param("scale_bench", ["--sizes", "1,10"], "argument --sizes: '1,10': expected",
                     id="scale_bench-sizes"),
        pytest.param("scale_bench", ["--formats", "yaml"], "argument --formats: 'yaml'",
                     id="scale_bench-formats"),
        pytest.param("scale_bench", ["--writers", "-1"], "--writers -1: expected >= 0",
                     id="scale_bench-writers"),
        pytest.param("scale_bench", ["--hits", "0"], "argument --hits: '0'",
                     id="scale_bench-hits"),
        pytest.param("load_bench", ["--trace-mib", "0"], "argument --trace-mib: '0'",
                     id="load_bench-trace-mib"),
        pytest.param("load_bench", ["--cache-mib", "8,x"], "argument --cache-mib: '8,x'",
                     id="load_bench-cache-mib"),
        pytest.param("load_bench", ["--repeats", "0"], "argument --repeats: '0'",
                     id="load_bench-repeats"),
        pytest.param("load_bench", ["--compare", "/nonexistent/old"],
                     "expected a source tree holding chunktune/", id="load_bench-no-tree"),
        pytest.param("put_bench", ["--sizes", "1,10"], "argument --sizes: '1,10': expected",
                     id="put_bench-sizes"),
        pytest.param("put_bench", ["--rounds", "0"], "argument --rounds: '0'",
                     id="put_bench-rounds"),
        pytest.param("put_bench", ["--seconds", "0", "--sizes", "2", "--rounds", "1"],
                     "argument --seconds: '0'", id="put_bench-seconds"),
        pytest.param("put_bench", ["--seconds", "nan", "--sizes", "2", "--rounds", "1"],
                     "argument --seconds: 'nan'", id="put_bench-seconds-nan"),
        pytest.param("put_bench", ["--compare", "/nonexistent/old"],
                     "expected a source tree holding chunktune/", id="put_bench-no-tree"),
        pytest.param("racy_bench", ["/nonexistent/old", "/nonexistent/new"],
                     "expected a source tree holding chunktune/", id="racy_bench-no-tree"),
        pytest.param("racy_bench", [str(BENCH.parent), str(BENCH.parent), "--rounds", "0"],
                     "--rounds 0", id="racy_bench-rounds"),
    ],
)  # fmt: skip
def test_a_script_refuses_a_bad_count_or_name_with_one_line_and_exit_2(
    script: str, argv: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A count below one, an unknown policy or an unreadable trace: exit 2, one error line."""
    with pytest.raises(SystemExit) as exit_:
        _script(script).main(argv)
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    last = err.strip().splitlines()[-1]  # argparse's usage lines, then the one error line
    assert ": error: " in last and says in last


def test_scale_bench_prints_a_table_per_format_and_counts_what_writers_at_once_kept(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """scale_bench.py on tiny caches, no CLI: both tables, their growth columns, writers' line."""
    from chunktune import _settled

    settled, environ = _settled.SETTLED_S, dict(os.environ)
    argv = ["--sizes", "2,4", "--repeats", "1", "--hits", "2", "--no-cli"]
    argv += ["--writers", "1", "--per-writer", "1", "--writers-base", "3"]
    assert _script("scale_bench").main(argv) == 0
    out = capsys.readouterr().out
    assert "JSON cache, median of 1" in out and "TOML cache, median of 1" in out
    starts = [line[:28].strip() for line in out.splitlines()]
    for row in ("build (s)", "read (s)", "hit async new (us)", "reread (s)", "write (s)"):
        assert starts.count(row) == 2
    assert "x/n 0k>0k" in out
    assert "1 process x 1 new key into 3 entries (JSON): 4/4 entries kept" in out
    assert (_settled.SETTLED_S, dict(os.environ)) == (settled, environ)  # given back


def test_scale_bench_races_two_trees_on_merges_lookups_stores_and_lists(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """--compare --one-child, this tree as both: one child a tree; each figure on its own line."""
    bench = _script("scale_bench")
    real, children = bench._child_out, []

    def marked(argv: list[str], env: dict[str, str], cwd: Path) -> str:
        # each child runs as it is; its figures are swapped for ones naming their slot (the
        # new tree's twice the old's), so that where each is printed can be told
        said = json.loads(real(argv, env, cwd))
        assert (len(said["lookups"]), len(said["writes"])) == (4, 4)
        children.append(argv[0])
        k = len(children)
        lookups, writes = [10.0 * k * i for i in (1, 2, 3, 4)], [1e-3 * k * i for i in (1, 2, 3, 4)]
        return json.dumps({"merge": 2.0 * k, "list": 3.0 * k, "lookups": lookups, "writes": writes})

    def refused(argv: list[str], *_: object, **__: object) -> tuple[float, float]:
        raise AssertionError(f"--one-child started another child: {argv}")

    monkeypatch.setattr(bench, "_child_out", marked)
    monkeypatch.setattr(bench, "_child", refused)
    # --one-child: a child of each tree, not four (each child's start is most of the cost)
    argv = ["--no-tables", "--sizes", "3", "--merge-files", "2", "--repeats", "1", "--hits", "2"]
    argv += ["--compare", str(BENCH.parent), "--one-child"]
    assert bench.main(argv) == 0
    assert children == ["race", "race"]
    out = capsys.readouterr().out
    merged = (
        "3 entries, median of 1 alternating in one child each, old / new / old:new: cache merge"
    )
    assert f"{merged} of 2 files 2.00 s / 4.00 s / 0.50x" in out
    for i, what in enumerate(
        ("user own", "user other policy", "system own", "system other policy")
    ):
        assert (
            f"3 entries, lookup {what}: {10 * (i + 1):.1f} us / {20 * (i + 1):.1f} us / 0.50x"
            in out
        )
    for i, what in enumerate(("first put", "its next hit", "second put", "its next hit")):
        assert f"3 entries, {what}: {i + 1:.1f} ms / {2 * (i + 1):.1f} ms / 0.50x" in out
    assert "3 entries, cache list into a pipe: 3.00 s / 6.00 s / 0.50x" in out
    assert out.count("x\n") == 10


def test_load_bench_races_two_trees_alternating_on_traces_and_damaged_caches(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """--compare, this tree as both: a line per trace and damage, old first then new first."""
    bench = _script("load_bench")
    children: list[tuple[str, str, bytes]] = []

    def marked(tree: Path, what: str, path: Path) -> float:
        # what each child would be given, and figures naming their slot (new twice old)
        children.append((tree.name, what, path.read_bytes()[:40]))
        return (1.0 if tree.name == "old" else 2.0) * len(children)

    monkeypatch.setattr(bench, "_child", marked)
    here = BENCH.parent
    old = tmp_path / "old"
    (old / "chunktune").mkdir(parents=True)
    (old / "chunktune" / "__init__.py").write_text("")
    argv = ["--trace-mib", "0.01", "--cache-mib", "0.05", "--repeats", "2", "--compare", str(old)]
    assert bench.main(argv) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "median of 2, each a child's own seconds; old / new / old:new"
    assert [name for name, _, _ in children] == ["old", here.name, here.name, "old"] * 4
    assert [what for _, what, _ in children] == ["trace"] * 4 + ["signature"] * 4 + ["cache"] * 8
    assert children[0][2].startswith(b'{\n "machine"') and children[4][2] == children[0][2]
    assert children[8][2] == children[11][2]
    assert out[1] == "trace of 0.01 MiB, ReplayWorkload.from_file: 2.500 s / 5.000 s / 0.50x"
    assert out[2] == "trace of 0.01 MiB, signature() 3 times: 6.500 s / 13.000 s / 0.50x"
    assert out[3].startswith("TOML cache of 0.0") and ", cut mid-line, entries(): " in out[3]
    assert ", one entry altered, entries(): " in out[4] and len(out) == 5


def test_load_bench_children_replay_a_trace_and_salvage_a_damaged_cache(tmp_path: Path) -> None:
    """Each of load_bench's children loads its file in this tree and says its seconds."""
    bench = _script("load_bench")
    trace = tmp_path / "t" / "trace.json"
    trace.parent.mkdir()
    assert bench.write_trace(trace, 0.01) > 0.009 * 2**20
    cache = tmp_path / "c" / "c.toml"
    cache.parent.mkdir()
    damaged = bench.write_caches(tmp_path, 0.02)
    cache.write_bytes(damaged["cut mid-line"])
    assert bench._child(BENCH.parent, "trace", trace) > 0
    assert bench._child(BENCH.parent, "signature", trace) > 0
    assert bench._child(BENCH.parent, "cache", cache) > 0
    assert len([p for p in cache.parent.iterdir() if ".corrupt-" in p.name]) == 1


def test_scale_bench_race_child_lists_the_cache_its_plan_names(tmp_path: Path) -> None:
    """The --one-child race lists its plan's cache: one it cannot read ends it, named."""
    bench = _script("scale_bench")
    listed = tmp_path / "listed.json"
    listed.write_text('{"schema": 99, "entries": {}}\n', encoding="utf-8")  # a newer one's
    plan = {"merge": ["cache", "path"], "listed": str(listed), "lookups": [], "written": ""}
    env = {**os.environ, "PYTHONPATH": str(BENCH.parent), "SCALE_BENCH_HWM": str(tmp_path / "hwm")}
    env["CHUNKTUNE_CACHE"] = str(tmp_path / "user.json")  # no file: listed, it lists nothing
    with pytest.raises(SystemExit) as caught:
        bench._child_out(["race", json.dumps(plan)], env, tmp_path)
    said = str(caught.value)  # the child's stderr, as a repr of its bytes
    assert "listed.json: it has cache schema 99" in said
    assert "AssertionError: [\\'cache\\', \\'list\\']" in said


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        pytest.param(["--seeds", "0", "--cases", "uniform-256x8"], "argument --seeds: '0'",
                     id="seeds"),
        pytest.param(["--traces", _MANYCORE, "--draws", "0"], "argument --draws: '0'",
                     id="draws-zerodivision"),
        pytest.param(["--policy", "nosuch", "--cases", "uniform-256x8"], _UNKNOWN, id="policy"),
    ],
)  # fmt: skip
def test_regret_causes_refuses_a_bad_count_or_policy_with_one_line(
    argv: list[str],
    says: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """regret_causes.py (it reads sys.argv) with a zero count or unknown policy: exit 2."""
    monkeypatch.setattr(sys, "argv", ["regret_causes.py", *argv])
    with pytest.raises(SystemExit) as exit_:
        _script("regret_causes").main()
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and says in err.strip().splitlines()[-1]


def test_regret_causes_with_a_negative_threshold_says_which_runs_lost_nothing() -> None:
    """--above -1 lists every run; one that chose or measured the best is no "never proposed"."""
    lost = _script("regret_causes").causes("balanced", 5, -1.0, ["lognormal-768x12"])
    by_seed = {c.seed: c for c in lost}
    assert sorted(by_seed) == [0, 1, 2, 3, 4]  # every run, as the README's example says
    for cause in lost:
        if cause.regret <= 0.0:
            assert cause.cause == "chose the best"
        elif cause.best_measured_regret <= 0.0 and cause.chosen is not None:
            assert cause.cause == "out-raced"  # the best was measured, another chosen
    assert {c.cause for c in lost} >= {"chose the best", "out-raced"}


def test_fuzz_script_refuses_a_negative_count(capsys: pytest.CaptureFixture[str]) -> None:
    """fuzz.py --settings -1 (it ran the other 10,000 instead): exit 2 naming the value."""
    with pytest.raises(SystemExit) as exit_:
        _script("fuzz").main_fuzz(["--settings", "-1", "--caches", "1"])
    assert exit_.value.code == 2
    assert "--settings -1" in capsys.readouterr().err


def test_ceiling_script_reports_traces_with_nothing_on_offer(
    bench: dict[str, ModuleType], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """ceiling.py on a trace whose best size is native prints no share (no ZeroDivisionError)."""
    samples = {c: tuple(0.05 * (1.0 if c == 1 else 1.1) * (1 + 0.01 * (r % 3)) for r in range(8))
               for c in range(1, 5)}  # fmt: skip
    trace = Trace(num_envs=16, nthread=4, rounds=8, samples=samples)
    (tmp_path / "native-best.json").write_text(dump_trace(trace))
    argv = ["--no-sim", "--draws", "1", "--traces", str(tmp_path)]
    assert bench["ceiling"].main(argv) == 0
    assert "captured 0.00% of the 0.00% on offer (-)" in capsys.readouterr().out


def test_run_script_unbounded_takes_a_policy_that_stretches_its_budget(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """run.py --unbounded runs patient (an extend_budget policy) with no budget: exit 0, a row."""
    argv = ["--unbounded", "--no-traces", "--cases", "uniform-256x8", "--seeds", "1"]
    assert _script("run").main([*argv, "--policies", "patient"]) == 0
    assert "simulated: 1 cases" in capsys.readouterr().out


def test_run_script_picks_traces_by_the_name_its_tables_print(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """--cases with a trace's printed name (manycore/...) picks it under --traces manycore."""
    argv = ["--no-sim", "--traces", str(BENCH / "traces" / "manycore"), "--draws", "1"]
    argv += ["--cases", "manycore/demo-tail-256-t4", "--policies", "quick"]
    assert _script("run").main(argv) == 0
    out = capsys.readouterr().out
    assert "traces: 1 recorded landscapes" in out and "manycore/demo-tail-256-t4" in out


def test_fuzz_script_runs_a_few_cases_of_every_kind(capsys: pytest.CaptureFixture[str]) -> None:
    """benchmarks/fuzz.py runs every kind of settings file and cache document without a failure."""
    fuzz = _script("fuzz")
    assert fuzz.main_fuzz(["--settings", "15", "--caches", "24", "--seed", "1"]) == 0
    out = capsys.readouterr().out
    assert "failures: 0" in out and "quarantined" in out and "ConfigError" in out


_TINY = """
<mujoco>
  <worldbody>
    <geom type="plane" size="2 2 .1"/>
    <body pos="0 0 .3"><freejoint/><geom type="box" size=".1 .1 .1"/></body>
  </worldbody>
</mujoco>
"""


def test_device_script_ranks_sizes_by_their_paired_ratio_to_native_and_bundles_traces(
    bench: dict[str, ModuleType], tmp_path: Path
) -> None:
    """The best sizes are ranked against native in the same round; the archive holds every trace."""
    device = bench["device_landscapes"]
    level = np.exp(np.random.default_rng(0).normal(0.0, 0.3, 8))  # rounds far apart
    cost = {1: 1.2, 2: 0.8, 3: 0.9, 4: 1.0}  # native for 16 envs on 4 threads is 1
    samples = {c: tuple(float(cost[c] * lv) for lv in level) for c in cost}
    trace = Trace(num_envs=16, nthread=4, rounds=8, samples=samples)
    assert device.best_sizes(trace, 2) == [2, 3]
    traces, out = tmp_path / "traces", tmp_path / "out"
    traces.mkdir()
    out.mkdir()
    for name in ("a-t4.json", "b-t8.json"):
        (traces / name).write_text(dump_trace(trace))
    device.bundle(traces, out)
    with tarfile.open(out / "traces.tar.gz") as tar:
        assert sorted(tar.getnames()) == ["a-t4.json", "b-t8.json"]
    assert sorted(p.name for p in out.iterdir()) == ["traces.tar.gz"]


def test_device_script_records_a_real_batch_and_skips_one_the_deadline_cannot_fit(
    bench: dict[str, ModuleType], tmp_path: Path
) -> None:
    """A tiny real batch is recorded in at least 6 rounds; past the deadline nothing is written."""
    from chunktune._mujoco import RolloutWorkload
    from chunktune._trace import load_trace

    model = tmp_path / "tiny.xml"
    model.write_text(_TINY)

    def build(nthread: int) -> RolloutWorkload:
        return RolloutWorkload.from_xml(model, num_envs=8, nthread=nthread, nstep=2)

    device, traces = bench["device_landscapes"], tmp_path / "traces"
    traces.mkdir()
    trace = device.record_one("tiny", build, 2, 0.5, time.monotonic() + 60, traces)
    assert trace is not None and trace.rounds >= 6
    assert sorted(trace.samples) == device.sizes_for(8, 2)
    assert load_trace(traces / "tiny-t2.json").samples == trace.samples
    (traces / "tiny-t2.json").unlink()
    assert device.record_one("tiny", build, 2, 0.5, time.monotonic(), traces) is None
    assert not list(traces.iterdir())


def test_unseen_cases_are_drawn_from_their_base_and_scored_by_the_exact_model(
    bench: dict[str, ModuleType],
) -> None:
    """The same base draws the same landscapes; each run's regret and harm come from the truth."""
    unseen, measure = bench["unseen"], bench["measure"]
    cases = unseen.draw_cases(4, 5)
    assert cases == unseen.draw_cases(4, 5) and cases != unseen.draw_cases(4, 6)
    # noise memory comes from a generator of its own: the same landscapes, remembering
    remembering = unseen.draw_cases(4, 5, unseen.NoiseRanges(memory=(0.2, 0.6)))
    assert [c._replace(noise=attrs.evolve(c.noise, memory=0.0)) for c in remembering] == cases
    assert all(0.2 <= c.noise.memory <= 0.6 for c in remembering)
    assert all(c.noise.memory == 0.0 for c in cases)
    assert len({c.layout for c in unseen.draw_cases(60, 5)}) >= 5
    # neighbouring bases draw no case's costs or noise from a shared seed, shifted or not
    seeds = [
        c.workload(d).seed if d is not None else c.costs_seed
        for b in (777, 778)
        for c in unseen.draw_cases(300, b)
        for d in (None, 0, 1)
    ]
    assert len(set(seeds)) == len(seeds)
    settings = measure.bench_settings()
    policies = measure.policies_named(settings, ["balanced", "quick"])
    rows = unseen.unseen_rows(cases[:2], policies, 2, settings)
    assert len(rows) == 2 * 2 * 2
    for row in rows:
        truth = next(c for c in cases if c.name == row.case).workload()
        _, best = truth.oracle()
        chosen = truth.true_time(row.chunk_size)
        assert row.regret == pytest.approx(chosen / best - 1.0) and row.regret >= 0.0
        assert row.vs_native == pytest.approx(chosen / truth.true_time(None) - 1.0)
        assert row.probe_seconds > 0.0
    summary = unseen.summarize(rows)
    assert set(summary) == {"balanced", "quick"} and summary["balanced"].runs == 4
    assert "balanced" in unseen.report(rows)


def test_unseen_noise_ranges_widen_the_noise_of_the_same_landscapes(
    bench: dict[str, ModuleType],
) -> None:
    """--noise and --spikes ranges: the same pools and costs, noise drawn from the new range."""
    unseen = bench["unseen"]
    cases = unseen.draw_cases(40, 5)
    harsh = unseen.draw_cases(40, 5, unseen.NoiseRanges(sigma=(0.1, 0.2), spikes=0.08))
    assert [c._replace(noise=None) for c in harsh] == [c._replace(noise=None) for c in cases]
    assert all(0.1 <= c.noise.sigma <= 0.2 and c.noise.spike_prob <= 0.08 for c in harsh)
    assert [c.noise.drift for c in harsh] == [c.noise.drift for c in cases]
    assert max(c.noise.spike_prob for c in harsh) > 0.06  # the wider range is drawn from
    assert unseen.NoiseRanges().note() == ""
    note = unseen.NoiseRanges(sigma=(0.1, 0.2), spikes=0.08, memory=(0.3, 0.6)).note()
    assert note == ", noise 10%-20% a call, spikes up to 8% of calls, noise memory 0.3-0.6"


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--noise", "0.2,0.1"], "--noise 0.2,0.1: expected 0 <= LOW <= HIGH <= 2"),
        (["--noise", "0.1"], "--noise 0.1: expected LOW,HIGH"),
        (["--memory", "0.3,1.5"], "--memory 0.3,1.5: expected 0 <= LOW <= HIGH <= 0.99"),
        (["--spikes", "1.5"], "--spikes 1.5: expected a share of calls from 0 to 1"),
    ],
)
def test_unseen_script_refuses_noise_ranges_out_of_bounds_with_one_line(
    argv: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """unseen.py with a reversed, single or out-of-range noise option: exit 2 naming it."""
    script = _script("unseen")
    with pytest.raises(SystemExit) as exit_:
        script.main([*argv, "--cases", "1", "--seeds", "1"])
    assert exit_.value.code == 2
    assert says in capsys.readouterr().err


def test_novel_costs_are_shapes_of_its_own_on_unseen_pools_and_tiny_cases_fill_each_table(
    bench: dict[str, ModuleType],
) -> None:
    """Families no layout names, dealt evenly on unseen.py's pools; every table has its rows."""
    novel, unseen, measure = bench["novel"], bench["unseen"], bench["measure"]
    assert len(novel.FAMILIES) >= 5 and not set(novel.FAMILIES) & set(LAYOUTS)
    cases = novel.draw(2 * len(novel.FAMILIES), 5)
    assert cases == novel.draw(len(cases), 5) and cases != novel.draw(len(cases), 6)
    pools = unseen.draw_cases(len(cases), 5)
    assert [c._replace(layout="") for c in cases] == [p._replace(layout="") for p in pools]
    assert sorted(c.layout for c in cases) == sorted(2 * list(novel.FAMILIES))
    for case in cases:
        costs = case.costs()
        assert costs.shape == (case.num_envs,) and costs.min() > 0.0 and costs.std() > 0.0
        assert costs.mean() == pytest.approx(case.mean_s)
    firsts = [next(c for c in cases if c.layout == family) for family in list(novel.FAMILIES)[:3]]
    tiny = [c._replace(num_envs=37 + i, nthread=4, queue_s=0.0) for i, c in enumerate(firsts)]
    settings = measure.bench_settings()
    policies = measure.policies_named(settings, ["quick", "seed"])
    runs = novel.novel_runs(tiny, policies, 2, settings)
    assert [row.case for _, row in runs] == [c.name for c in tiny for _ in range(4)]
    harm = (tiny[0], runs[0][1]._replace(vs_native=0.02, reason="a reason of its own"))
    overall, families, calm = novel.tables(runs).split("\n\n")
    *_, harmful = novel.tables([*runs, harm], worst=1).split("\n\n")
    assert [line.split()[:2] for line in overall.splitlines()[2:]] == [
        ["quick", "6"],
        ["seed", "6"],
    ]
    assert [line.split()[:4] for line in families.splitlines()[2:]] == [
        [c.layout, "1", name, "2"] for c in tiny for name in ("quick", "seed")
    ]
    assert [line.split(":")[0] for line in calm.splitlines()[1:] if line[0] != " "] == [
        "quick",
        "seed",
    ]
    assert harmful.splitlines()[1].startswith("quick: ")
    assert "+2.00% vs native" in harmful and "reason: a reason of its own" in harmful


def test_odd_pools_kinds_change_unseen_pools_as_their_docstring_says(
    bench: dict[str, ModuleType],
) -> None:
    """Unequal workers slow a pool, cold chunks pay per chunk, few envs is 2-6 a thread."""
    odd_pools, unseen = bench["odd_pools"], bench["unseen"]
    cases = unseen.draw_cases(12, 5)
    for case in cases:
        pool = case.workload()
        costs = case.costs()
        # equal speeds are the simulator's own list scheduling
        for chunk in (1, 3, max(1, case.num_envs // case.nthread)):
            speeds = [1.0] * case.nthread
            equal = odd_pools._unequal_makespan(costs, chunk, speeds, case.queue_s, pool.dispatch_s)
            assert equal == pytest.approx(pool.true_time(chunk))
        unequal = odd_pools.odd_case("unequal", case)
        assert all(unequal.truth(c) >= pool.true_time(c) for c in (1, 2, 5))
        cold = odd_pools.odd_case("coldchunks", case)
        assert all(cold.truth(c) > pool.true_time(c) for c in (1, 2, 8))
        assert cold.truth(2) == odd_pools.odd_case("coldchunks", case).truth(2)  # drawn, not random
        few = odd_pools.odd_case("fewenvs", case)
        assert 2 * case.nthread <= few.num_envs < 7 * case.nthread
        assert few.true_time(None) == few.truth(1)  # native is chunk 1 below 10 envs a thread
        stalls = odd_pools.odd_case("stalls", case)
        assert 0.002 <= stalls.stall[0] <= 0.03 and stalls.truth(4) == pool.true_time(4)
    # without noise, a stalled call is 2-5x its truth, and the stalls come by call number
    quiet = odd_pools.odd_case("stalls", cases[0]._replace(noise=Noise()))
    quiet = quiet._replace(stall=(0.2, 2.0, 5.0))
    one, two = odd_pools.OddPool(quiet, 0), odd_pools.OddPool(quiet, 0)
    first = [one.run(None) / quiet.true_time(None) for _ in range(200)]
    second = [two.run(3) / quiet.true_time(3) for _ in range(200)]
    assert first == pytest.approx(second)
    assert 10 < sum(f > 1.0 for f in first) < 80 and all(f == 1.0 or 2.0 <= f <= 5.0 for f in first)


def test_odd_pools_runs_each_kind_through_resolve_and_prints_a_table_per_kind(
    bench: dict[str, ModuleType],
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Tiny cases of every kind are scored by their exact model; harmful runs say what ran."""
    monkeypatch.setenv("CHUNKTUNE_CACHE", str(tmp_path / "cache.json"))
    odd_pools, unseen, measure = bench["odd_pools"], bench["unseen"], bench["measure"]
    settings = measure.bench_settings()
    policies = measure.policies_named(settings, ["quick", "seed"])
    tiny = [c._replace(num_envs=37 + c.number, nthread=4) for c in unseen.draw_cases(2, 7)]
    odds = [odd_pools.odd_case(kind, case) for kind in odd_pools.KINDS for case in tiny]
    runs = odd_pools.odd_runs(odds, policies, 1, settings)
    assert len(runs) == len(odds) * 2
    for run in runs:
        native, chosen = run.odd.true_time(None), run.odd.true_time(run.row.chunk_size)
        assert run.row.vs_native == pytest.approx(chosen / native - 1.0)
        assert run.row.regret >= 0.0 and run.row.probe_seconds > 0.0
    harm = runs[0]._replace(row=runs[0].row._replace(vs_native=0.02, reason="its own reason"))
    text = odd_pools.tables([harm, *runs[1:]], worst=1)
    assert [line[3:].split()[0] for line in text.splitlines() if line.startswith("== ")] == list(
        odd_pools.KINDS
    )
    assert "+2.00% vs native" in text and "reason: its own reason" in text
    assert odd_pools.main(["--cases", "2", "--seeds", "1", "--policies", "quick"]) == 0
    out = capsys.readouterr().out
    assert sum(line.startswith("quick ") for line in out.splitlines()) == len(odd_pools.KINDS)
    with pytest.raises(SystemExit):
        odd_pools.main(["--kinds", "stalls,quake"])
    assert "unknown quake" in capsys.readouterr().err
    assert not (tmp_path / "cache.json").exists()


def test_adversary_families_hold_their_promise_and_size_noise_keeps_each_size_mean(
    bench: dict[str, ModuleType],
) -> None:
    """Native-best and hard landscapes are as drawn; a size-kind's factors average 1 per size."""
    adversary = bench["adversary"]
    cases = adversary.draw(9, 5)
    assert [c.family for c in cases] == ["random"] * 3 + ["native"] * 3 + ["hard"] * 3
    assert [c.name for c in adversary.draw(9, 5)] == [c.name for c in cases]
    for case in cases[3:]:
        t = case.truth
        upper = adversary.upper_chunk(t.num_envs, t.nthread)
        ratios = [t.true_time(c) / t.true_time(None) for c in range(1, upper + 1)]
        faster = [r for r in ratios if r < 1.0]
        assert all(r == 1.0 or r >= 1.006 for r in ratios if r >= 1.0)
        if case.family == "native":
            assert not faster
        else:
            assert faster and all(0.97 <= r <= 0.99 for r in faster)
    # the exact model is what a trainer pays on average: each size's factors average 1
    for kind in ("sizenoise", "tail", "bimodal"):
        machine = adversary.Machine(kind, 100.0, 64, seed=3)
        for chunk in (1, 8, 64):
            factors = [machine.factor(k, chunk) for k in range(40_000)]
            assert np.mean(factors) == pytest.approx(1.0, abs=0.02), (kind, chunk)
    step = adversary.Machine("step", 100.0, 64, seed=3)
    logs = np.log([step.factor(k, 4) for k in range(200)])
    slow = np.arange(200) >= step.at
    slow &= np.arange(200) < step.until
    if slow.any() and not slow.all():
        assert logs[slow].mean() - logs[~slow].mean() > np.log1p(step.slow) - 0.02


def test_adversary_runs_every_kind_and_prints_a_table_per_kind(
    bench: dict[str, ModuleType],
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A few cases of each kind run through resolve, scored by the truth, one table each."""
    monkeypatch.setenv("CHUNKTUNE_CACHE", str(tmp_path / "cache.json"))
    adversary, measure = bench["adversary"], bench["measure"]
    settings = measure.bench_settings()
    policies = measure.policies_named(settings, ["balanced", "seed"])
    cases = adversary.draw(3, 7)
    rows = adversary.adversary_rows(cases, ["step", "bimodal"], policies, 1, settings)
    assert len(rows) == 2 * 3 * 2
    assert rows == adversary.adversary_rows(cases, ["step", "bimodal"], policies, 1, settings)
    for row in rows:
        truth = next(c for c in cases if c.name == row.case).truth
        chosen, native = truth.true_time(row.chunk_size), truth.true_time(None)
        assert row.vs_native == pytest.approx(chosen / native - 1.0)
        assert row.regret >= 0.0 and row.probe_seconds > 0.0
        assert bool(row.diagnosis) == (row.vs_native > adversary.HARM)
    kinds = ",".join(adversary.KINDS)
    assert adversary.main(["--cases", "3", "--seeds", "1", "--policies", "balanced"]) == 0
    out = capsys.readouterr().out
    assert [line[3:] for line in out.splitlines() if line.startswith("== ")] == kinds.split(",")
    with pytest.raises(SystemExit):
        adversary.main(["--kinds", "calm,quake"])
    assert "unknown quake" in capsys.readouterr().err
    assert not (tmp_path / "cache.json").exists()


def test_needle_finds_a_clear_needle_and_scores_every_other_size_as_native(
    bench: dict[str, ModuleType], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under 1% noise a 20% needle is found whenever the whole list opens; false ones counted."""
    needle, measure = bench["needle"], bench["measure"]
    # calls cheap enough that the opening measures every candidate (50 ms calls thin it)
    monkeypatch.setattr(needle, "CALL_S", 0.01)
    w = needle.Needle(good=7, gain=0.2, sigma=0.0, seed=0)
    assert w.run(7) == pytest.approx(0.8 * w.run(None)) and w.run(3) == w.run(None)
    settings = measure.bench_settings()
    policies = measure.policies_named(settings, ["balanced"])
    rows = needle.needle_rows(policies, 2, 0.2, (0.01,), settings)
    assert rows and all(r.chunk_size == r.needle for r in rows)
    assert all(r.captured == pytest.approx(0.2) for r in rows)
    assert "0 false confirmations" in needle.report(rows, 0.2)


def test_replay_fidelity_sees_memory_that_favours_alternation_and_a_replay_that_keeps_it(
    bench: dict[str, ModuleType],
) -> None:
    """On noise with a short memory, alternation beats ABBA, recorded and re-recorded alike."""
    fidelity = bench["replay_fidelity"]
    trace = remembering(rho=0.6, seed=1)  # 16 sizes, 60 rounds, each call's noise 0.1
    sizes = sorted(trace.samples)
    recorded = fidelity.memory(fidelity.residual_sequences(trace))
    again = fidelity.rerecord(trace, seed=3)
    assert again.rounds == 60 and sorted(again.samples) == sizes
    replayed = fidelity.memory(fidelity.residual_sequences(again))
    assert recorded["lag1"] > 0.35  # 0.6, less what centering 16-call rounds takes out
    assert replayed["lag1"] == pytest.approx(recorded["lag1"], abs=0.1)
    assert replayed["lag5"] == pytest.approx(recorded["lag5"], abs=0.1)
    assert recorded["alternation"] < 0.85 and replayed["alternation"] < 0.85


def test_replay_fidelity_counts_each_sizes_spikes_and_tells_its_spread(
    bench: dict[str, ModuleType],
) -> None:
    """own_noise gives each size its robust sigma, untouched by a spike, and counts the spike."""
    fidelity = bench["replay_fidelity"]
    trace = remembering(rho=0.0, spreads={3: 0.3}, seed=2)  # size 3 swings three times as far
    samples = dict(trace.samples)
    samples[5] = (samples[5][0] * 3.0, *samples[5][1:])  # one call of size 5 three times slow
    spiked = attrs.evolve(trace, samples=samples)
    sigma, spikes = fidelity.own_noise(spiked)
    sizes = sorted(trace.samples)
    others = np.delete(sigma, [sizes.index(3), sizes.index(5)])
    assert sigma[sizes.index(3)] / np.median(others) == pytest.approx(3.0, rel=0.3)
    assert sigma[sizes.index(5)] == pytest.approx(np.median(others), rel=0.3)
    assert spikes == pytest.approx(1 / (16 * 60))
    assert fidelity.own_noise(trace)[1] == 0.0


def test_trace_scripts_print_a_dash_where_a_short_trace_has_no_held_out_gain(
    bench: dict[str, ModuleType], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """trace_stats.py and ceiling.py print "-" for a 2-round trace's held-out gain, not nan%."""
    path = tmp_path / "short.json"
    path.write_text(dump_trace(_split_trace(2, 4, 0.2)))
    assert _script("trace_stats").main([str(path)]) == 0
    assert bench["ceiling"].main(["--no-sim", "--draws", "1", "--traces", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "nan" not in out
    assert out.splitlines()[1].split()[-2:] == ["-", "-"]  # trace_stats: held out, noise
    assert "held-out      - captured" in out  # ceiling


def test_report_all_lists_every_name_the_scripts_take_from_it() -> None:
    """Every name a benchmark script imports from report.py is in report's __all__."""
    report = _script("report")
    taken = {
        alias.name
        for script in BENCH.glob("*.py")
        for node in ast.walk(ast.parse(script.read_text()))
        if isinstance(node, ast.ImportFrom) and node.module == "report"
        for alias in node.names
    }
    assert taken <= set(report.__all__), sorted(taken - set(report.__all__))


@pytest.mark.parametrize("script", ["unseen", "needle"])
def test_a_benchmark_neither_waits_on_nor_blocks_a_trainers_sweep(
    script: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the machine's sweep lock held (a trainer sweeping), a benchmark runs on its own."""
    monkeypatch.delenv("CHUNKTUNE_SWEEP_LOCK")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    lock = sweep_lock_path()
    lock.parent.mkdir(parents=True)
    args = {"unseen": ["--cases", "1", "--seeds", "1"], "needle": ["--draws", "1"]}[script]
    with holding(lock):
        done = subprocess.run(
            [sys.executable, str(BENCH / f"{script}.py"), *args, "--policies", "quick"],
            capture_output=True,
            text=True,
            timeout=300,  # a hang guard: the old scripts wait for the holder forever
        )
    assert done.returncode == 0, done.stderr


def test_cpu_time_summary_separates_a_shared_slowdown_from_a_real_gain() -> None:
    """CPU time that carries each call's slowdown but not the size's gain takes the noise out."""
    summarize = _script("cpu_time").summarize
    rng = np.random.default_rng(5)
    speed = np.exp(rng.normal(0.0, 0.05, (400, 2)))  # each call's machine, shared by both clocks
    seconds = np.empty((400, 2, 2))
    seconds[:, 0, 0], seconds[:, 1, 0] = speed[:, 0] * 1.0, speed[:, 1] * 0.96
    seconds[:, :, 1] = 2.0 * speed * np.exp(rng.normal(0.0, 0.005, (400, 2)))
    seen = summarize(8, seconds)
    assert seen.pairs == 400 and abs(seen.wall_gain - math.log(1 / 0.96)) < 0.01
    assert abs(seen.cpu_gain) < 0.01 and seen.corr > 0.9 and seen.kept < 0.1


def test_cpu_time_script_measures_the_demo_on_both_clocks(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """benchmarks/cpu_time.py on a tiny demo batch prints one finite row per size."""
    assert _script("cpu_time").main(["--sizes", "1", "2", "--rounds", "3", "--num-envs", "8"]) == 0
    rows = capsys.readouterr().out.splitlines()[1:]
    assert [r.split()[:2] for r in rows] == [["1", "3"], ["2", "3"]]
    assert "nan" not in " ".join(rows)


def _regime_trace(path: Path, best: int, gain: float) -> Path:
    """16 envs on 4 threads (native 1, sizes 1-4): ``best`` ``gain`` faster, the rest as native."""
    samples = {c: tuple(0.01 * ((1 - gain) if c == best else 1.0) * (1 + 0.01 * (r % 3))
                        for r in range(12)) for c in range(1, 5)}  # fmt: skip
    path.write_text(dump_trace(Trace(num_envs=16, nthread=4, rounds=12, samples=samples)))
    return path


def test_cross_regime_scores_each_regimes_choice_by_the_other_regimes_truth(
    tmp_path: Path,
) -> None:
    """A size that wins busy and loses calm is scored as a loss by the calm truth, and counted."""
    script = _script("cross_regime")
    # balanced's one candidate besides native here is 2
    busy = _regime_trace(tmp_path / "busy.json", best=2, gain=0.2)
    calm = _regime_trace(tmp_path / "calm.json", best=2, gain=-0.1)
    settings = _script("measure").bench_settings()
    row = script.cross(busy, calm, settings.get_policy("balanced"), 2, settings)
    assert row.chosen == {"busy": (2, 2), "calm": (None, None)}
    assert row.offer == pytest.approx({"busy": 0.2, "calm": 0.0})
    assert row.gains["busy"] == pytest.approx({"busy": 0.2, "calm": -0.1})
    assert row.gains["calm"] == pytest.approx({"busy": 0.0, "calm": 0.0})
    assert row.slower == {"busy": {"busy": 0, "calm": 2}, "calm": {"busy": 0, "calm": 0}}


def test_cross_regime_crosses_each_pair_of_folders_and_names_rows_by_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """--pair BUSY CALM twice: every twin crossed, each row named by its busy folder."""
    monkeypatch.setenv("CHUNKTUNE_CONFIG", "")
    script = _script("cross_regime")
    argv = ["--draws", "1"]
    for day in ("d1", "d2"):
        for regime, gain in (("busy", 0.2), ("calm", -0.1)):
            (tmp_path / f"{day}-{regime}").mkdir()
            _regime_trace(tmp_path / f"{day}-{regime}" / "b.json", best=2, gain=gain)
        argv += ["--pair", str(tmp_path / f"{day}-busy"), str(tmp_path / f"{day}-calm")]
    assert script.main(argv) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| d")]
    assert [row.split(" | ")[0] for row in rows] == ["| d1-busy/b", "| d2-busy/b"]
    (tmp_path / "d2-calm" / "b.json").unlink()
    with pytest.raises(SystemExit) as exited:
        script.main(argv)
    assert exited.value.code == 2
    assert f"no calm twin: {tmp_path / 'd2-calm' / 'b.json'}" in capsys.readouterr().err


def test_hog_blocks_pools_blocks_on_the_log_ratio_by_inverse_variance() -> None:
    """One block pools to itself; two equally sure ones to their log-mean, sqrt(2) narrower."""
    script, measure = _script("hog_blocks"), _script("measure")

    def block(diff: float, se: float) -> Any:
        """A block as remeasure gives it: the gain and 95% interval of a log ratio."""
        low, high = -math.expm1(diff + 1.96 * se), -math.expm1(diff - 1.96 * se)
        return measure.Measured(gain=-math.expm1(diff), low=low, high=high, rounds=50)

    one = block(math.log(0.87), 0.3)
    assert script.pooled([one]) == pytest.approx((one.gain, one.low, one.high))
    diffs, se = (math.log(0.95), math.log(0.99)), 0.01
    gain, low, high = script.pooled([block(d, se) for d in diffs])
    mid, half = sum(diffs) / 2, 1.96 * se / math.sqrt(2)
    assert (gain, low, high) == pytest.approx(
        (-math.expm1(mid), -math.expm1(mid + half), -math.expm1(mid - half))
    )


class _BurstHitFake:
    """Native 10 ms a call; size 8 is 3% faster, except every fifth of its calls, 40% slower."""

    num_envs, nthread = 64, 2

    def __init__(self) -> None:
        self.calls8 = 0

    def run(self, chunk_size: int | None) -> float:
        if chunk_size != 8:
            return 0.010
        self.calls8 += 1
        return 0.014 if self.calls8 % 5 == 0 else 0.0097


def test_a_live_choice_that_bursts_slow_is_judged_by_what_a_trainer_pays(
    bench: dict[str, ModuleType],
) -> None:
    """remeasure's gain (a plain mean) and paid gain count every call; the live target fails it."""
    measure, report = bench["measure"], bench["report"]
    m = measure.remeasure(_BurstHitFake(), [8], 20)[8]
    # the trimmed mean would drop the slow calls (+3%); check's plain mean keeps them
    assert m.gain == pytest.approx(-math.expm1((16 * math.log(0.97) + 4 * math.log(1.4)) / 20))
    assert m.gain < -0.04
    assert m.paid == pytest.approx(1 - (16 * 0.0097 + 4 * 0.014) / 0.2, abs=1e-3)
    assert m.paid < -0.01
    live = measure.LiveRow(
        case="uniform", nthread=2, num_envs=64, policy="balanced", tune=0, chunk_size=8,
        native_chunk=3, claimed_gain=0.03, claimed_ci=(0.01, 0.05), partial=False,
        probe_seconds=1.0, sweep_wall_s=1.0, reason="chose 8", measured_gain=m.gain,
        measured_low=m.low, measured_high=m.high, best_known=8, best_known_gain=m.gain,
        best_known_ci=(m.low, m.high), rounds=20, hog=False, uneven=False, measured_paid=m.paid,
    )  # fmt: skip
    (check,) = [c for c in report.check_targets([], [], [live]) if "slower" in c.target]
    assert not check.met and check.value == pytest.approx(-m.paid)
    assert "paid" in report.live_table([live])


def test_burst_pairs_tells_a_typical_gain_from_a_paid_loss(bench: dict[str, ModuleType]) -> None:
    """gains: trimmed says faster, sums slower; resampled: the confirmation holds it back."""
    bp = bench["burst_pairs"]
    native = np.full(50, 0.010)
    size = np.where(np.arange(50) % 5 == 4, 0.014, 0.0097)
    g = bp.gains(native, size)
    assert g["trimmed"] > 0.02 and g["median"] > 0.02
    assert g["mean"] < 0 and g["paid"] < -0.01
    policy = load_settings(None).get_policy("balanced")
    alone, confirmed = bp.resampled(native, size, trials=50, policy=policy)
    assert 0.5 < alone <= 1.0 and confirmed < alone  # shares of trials, each counted once
    steady = 0.0095 * np.exp(np.random.default_rng(0).normal(0, 0.01, 50))
    assert bp.resampled(native, steady, trials=20, policy=policy) == (1.0, 1.0)


def _live(measure: ModuleType, chunk: int | None, gain: float, **more: Any) -> Any:
    """A live row of case "u" whose re-measurement found ``gain`` (and ``more``)."""
    fields: dict[str, Any] = dict(
        case="u", nthread=2, num_envs=64, policy="balanced", tune=0, chunk_size=chunk,
        native_chunk=3, claimed_gain=0.03, claimed_ci=(0.01, 0.05), partial=False,
        probe_seconds=1.0, sweep_wall_s=1.0, reason="r", measured_gain=gain,
        measured_low=gain - 0.01, measured_high=gain + 0.01, best_known=8,
        best_known_gain=0.03, best_known_ci=(0.02, 0.04), rounds=20, hog=False, uneven=False,
    )  # fmt: skip
    return measure.LiveRow(**(fields | more))


def _slower(report: ModuleType, rows: list[Any]) -> Any:
    (check,) = [c for c in report.check_targets([], [], rows) if "slower" in c.target]
    return check


@pytest.mark.parametrize(
    ("rows", "value", "met"),
    [
        pytest.param([(8, 0.02, -0.05), (16, -0.01, 0.01)], 0.05, False, id="paid-worst"),
        pytest.param([(8, -0.06, 0.01), (16, 0.02, 0.02)], 0.06, False, id="gain-worst"),
        pytest.param([(8, 0.02, -0.01)], 0.01, True, id="paid-at-the-limit"),
        pytest.param([(8, -0.005, math.nan)], 0.005, True, id="no-paid-figure"),
    ],
)  # fmt: skip
def test_the_live_target_takes_each_choice_s_worse_gain_and_the_worst_choice(
    bench: dict[str, ModuleType], rows: list[tuple[int, float, float]], value: float, met: bool
) -> None:
    """'none > 1% slower': the worst row by the lower of its two gains; 1% itself is met."""
    measure, report = bench["measure"], bench["report"]
    check = _slower(report, [_live(measure, c, g, measured_paid=p) for c, g, p in rows])
    assert (check.value, check.met) == (pytest.approx(value), met)


def test_the_live_target_and_table_show_each_choice_s_paid_gain(
    bench: dict[str, ModuleType],
) -> None:
    """The evidence and the paid column give a size's paid gain; native's and a missing one '-'."""
    measure, report = bench["measure"], bench["report"]
    rows = [
        _live(measure, 8, 0.02, measured_paid=-0.0416),
        _live(measure, None, 0.0, measured_paid=0.0),
        _live(measure, 16, 0.01),  # a row from before the paid figure
    ]
    assert math.isnan(rows[2].measured_paid)
    assert _slower(report, rows).evidence == (
        "8 +2.00% (paid -4.16%); native +0.00% (paid -); 16 +1.00% (paid -)"
    )
    lines = report.live_table(rows).splitlines()
    end = lines[0].index("  paid  ") + len("  paid")  # the column is right-aligned
    assert [line[:end].split()[-1] for line in lines[2:]] == ["-4.16%", "-", "-"]


class _Counting:
    """Every size 10 ms a call; counts the calls of each size."""

    num_envs, nthread = 64, 2

    def __init__(self) -> None:
        self.calls: dict[int | None, int] = {}

    def run(self, chunk_size: int | None) -> float:
        self.calls[chunk_size] = self.calls.get(chunk_size, 0) + 1
        return 0.010


def test_remeasure_runs_each_size_once_a_round_after_one_warm_up_and_pays_them_all(
    bench: dict[str, ModuleType],
) -> None:
    """remeasure: rounds + 1 calls a size, the warm-up unpaid; a Measured without paid: NaN."""
    measure = bench["measure"]
    fake = _Counting()
    out = measure.remeasure(fake, [4, 8], 7)
    assert fake.calls == {None: 8, 4: 8, 8: 8}
    assert [out[c].paid for c in (None, 4, 8)] == [0.0, 0.0, 0.0]
    assert math.isnan(measure.Measured(gain=0.0, low=0.0, high=0.0, rounds=1).paid)


class _Skewed:
    """Native 10 ms a call; size ``c``'s ``k``-th call ``_RATIOS[c][k % 5]`` of it, the
    warm-up being call 0 (a slow call in five: the plain mean and the trimmed one differ)."""

    num_envs, nthread = 64, 2

    def __init__(self) -> None:
        self.calls: dict[int, int] = {4: 0, 8: 0}

    def run(self, chunk_size: int | None) -> float:
        if chunk_size is None:
            return 0.010
        k = self.calls[chunk_size]
        self.calls[chunk_size] += 1
        return 0.010 * _RATIOS[chunk_size][k % 5]


_RATIOS = {4: (0.95, 0.97, 0.99, 0.96, 1.25), 8: (1.01, 0.99, 1.02, 1.0, 0.98)}


def test_remeasure_judges_a_size_by_check_s_rule(bench: dict[str, ModuleType]) -> None:
    """remeasure's gain and interval are span_gain's over the rounds' log ratios, as check's."""
    measure = bench["measure"]
    out = measure.remeasure(_Skewed(), [8, 4], 40)
    for c in (4, 8):
        logs = [math.log(_RATIOS[c][(k + 1) % 5]) for k in range(40)]
        span = span_gain(logs)
        assert (out[c].gain, out[c].low, out[c].high, out[c].rounds) == pytest.approx(
            (span.gain, span.low, span.high, 40)
        )
    assert out[4].gain < 0 < out[4].high  # the slow fifth counted: no gain, a wide interval
    assert (out[None].gain, out[None].low, out[None].high, out[None].paid) == (0, 0, 0, 0)
    with pytest.raises(ValueError, match="1 rounds, expected 2 or more"):
        measure.remeasure(_Skewed(), [4], 1)


class _Zero(_Counting):
    """:class:`_Counting` whose ``zero`` size (None: native) times 0 s a call."""

    def __init__(self, zero: int | None) -> None:
        super().__init__()
        self.zero = zero

    def run(self, chunk_size: int | None) -> float:
        seconds = super().run(chunk_size)
        return 0.0 if chunk_size == self.zero else seconds


@pytest.mark.parametrize("zero", [pytest.param(None, id="native"), pytest.param(4, id="size")])
def test_remeasure_refuses_a_call_of_zero_seconds_with_a_value_error_naming_it(
    bench: dict[str, ModuleType], zero: int | None
) -> None:
    """A call of 0 s (native's or a size's) has no log ratio: ValueError naming the call."""
    said = r"remeasure: a call of (native|chunk 4) took 0\.0 s, expected seconds > 0"
    with pytest.raises(ValueError, match=said):
        bench["measure"].remeasure(_Zero(zero), [4], 3)


class _Drifting:
    """Native 10 ms a call; size 4 10% faster in the first half of the rounds, 10% slower after."""

    num_envs, nthread = 64, 2

    def __init__(self, rounds: int) -> None:
        self.rounds, self.calls = rounds, 0

    def run(self, chunk_size: int | None) -> float:
        if chunk_size is None:
            return 0.010
        self.calls += 1
        # the warm-up is call 1: round r is call r + 2
        return 0.009 if self.calls - 2 < self.rounds // 2 else 0.011


def test_remeasure_interval_spans_a_gain_that_moves_between_stretches(
    bench: dict[str, ModuleType],
) -> None:
    """remeasure: a size faster in one half and slower in the other gets an interval over 0."""
    measure = bench["measure"]
    out = measure.remeasure(_Drifting(64), [4], 64)
    iid = 1.96 * 0.1 / math.sqrt(64)  # what rounds taken as independent draws would allow
    assert out[4].low < 0 < out[4].high
    assert out[4].high - out[4].low > 2 * 2 * iid  # more than twice as wide
    steady = measure.remeasure(_Counting(), [4], 64)
    assert steady[4].low == steady[4].high == 0.0


class _Ticking(_Counting):
    """:class:`_Counting` on a clock of its own that each call moves 1 s on."""

    def __init__(self) -> None:
        super().__init__()
        self.now = 0.0

    def run(self, chunk_size: int | None) -> float:
        self.now += 1.0
        return super().run(chunk_size)


def test_remeasure_keeps_going_until_its_least_seconds_have_passed(
    bench: dict[str, ModuleType], monkeypatch: pytest.MonkeyPatch
) -> None:
    """remeasure(min_seconds=...): rounds past the count asked for until the time is spent."""
    measure = bench["measure"]
    fake = _Ticking()
    monkeypatch.setattr(measure, "time", SimpleNamespace(perf_counter=lambda: fake.now))
    out = measure.remeasure(fake, [4], 3, min_seconds=10)
    # 2 s a round from the warm-up's end: 3 rounds asked for (6 s), two more to reach 10 s
    assert out[4].rounds == 5
    assert fake.calls == {None: 6, 4: 6}


def test_stretch_half_width_is_zero_without_stretches_and_wide_for_moving_ones(
    bench: dict[str, ModuleType],
) -> None:
    """stretch_half_width: 0 under 2 rounds a stretch or for equal stretch means; else t * se."""
    measure = bench["measure"]
    assert measure.stretch_half_width([0.1] * 15) == 0.0
    assert measure.stretch_half_width([0.1, -0.1] * 8) == 0.0
    moving = [0.1] * 8 + [-0.1] * 8
    means = [0.1] * 4 + [-0.1] * 4
    assert measure.stretch_half_width(moving) == pytest.approx(
        2.365 * float(np.std(means, ddof=1)) / math.sqrt(8)
    )


def test_stretch_gains_sees_a_gain_that_moves_and_not_one_that_only_varies() -> None:
    """between_sd: the stretches' spread past their rounds' noise; iid noise alone gives ~0."""
    sg = _script("stretch_gains")
    stamps = np.arange(100.0)
    moving = np.where(stamps < 50, 0.05, -0.05)
    means, counts, within = sg.stretch_means(stamps, moving, 10.0)
    assert list(counts) == [10.0] * 10 and within == 0.0
    assert sg.between_sd(means, counts, within) == pytest.approx(0.05 * math.sqrt(10 / 9))
    rng = np.random.default_rng(0)
    noisy = rng.normal(0.0, 0.05, 10_000)
    means, counts, within = sg.stretch_means(np.arange(10_000.0), noisy, 100.0)
    assert sg.between_sd(means, counts, within) < 0.003
    assert math.isnan(sg.between_sd(means[:1], counts[:1], within))
    # both at once: each stretch mean's own noise (0.05^2 / 100) is taken off, no more
    mixed = np.where(np.arange(2000) < 1000, 0.05, -0.05) + rng.normal(0.0, 0.05, 2000)
    means, counts, within = sg.stretch_means(np.arange(2000.0), mixed, 100.0)
    assert sg.between_sd(means, counts, within) == pytest.approx(
        0.05 * math.sqrt(20 / 19), abs=0.005
    )


class _Halves:
    """Native 10 ms a call; size 4 9 ms in the first 8 rounds, 11 ms after (a 1 s clock tick
    a call to ``time.monotonic``)."""

    num_envs, nthread = 64, 2

    def __init__(self) -> None:
        self.calls = 0

    def run(self, chunk_size: int | None) -> float:
        if chunk_size is None:
            return 0.010
        self.calls += 1
        return 0.009 if self.calls <= 1 + 8 else 0.011  # the warm-up, then 8 rounds


def test_stretch_gains_interval_over_two_stretches_uses_students_t(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """stretch_gains: the whole run's CI from 2 stretches' means takes t at 1 dof, not 1.96."""
    sg = _script("stretch_gains")
    case = SimpleNamespace(name="halves", build=lambda nthread: _Halves())
    monkeypatch.setattr(sg, "REAL_CASES", [case])
    clock = iter(range(10_000))
    monkeypatch.setattr(sg, "time", SimpleNamespace(monotonic=lambda: float(next(clock))))
    # start at 0 s; each round stamps its start (odd) and reads its end (even): 16 rounds,
    # stamps 1..31 s, two 16-second stretches of 8 rounds
    assert sg.main(["--case", "halves", "--sizes", "4", "--seconds", "32", "--bins", "16"]) == 0
    row = capsys.readouterr().out.splitlines()[-1]
    first, second = math.log(10 / 9), math.log(10 / 11)
    whole = (first + second) / 2
    half = 12.706 * abs(first - second) / math.sqrt(2) / math.sqrt(2)
    low, high = -math.expm1(-(whole - half)), -math.expm1(-(whole + half))
    assert row.split()[:4] == ["4", f"{-math.expm1(-whole):+.2%}", f"({low:+.2%}..{high:+.2%})",
                               "+0.00%"]  # fmt: skip


def test_t95_is_students_t_for_every_count_of_degrees_of_freedom(
    bench: dict[str, ModuleType],
) -> None:
    """t95: the table's quantiles to 30 dof, Cornish-Fisher past it, 1.96 in the limit."""
    t95 = bench["measure"].t95
    assert (t95(1), t95(7), t95(30)) == (12.706, 2.365, 2.042)
    assert t95(40) == pytest.approx(2.0211, abs=0.001)
    assert t95(120) == pytest.approx(1.9799, abs=0.001)
    assert t95(10**6) == pytest.approx(1.95996, abs=1e-4)
    with pytest.raises(ValueError, match="0 degrees of freedom"):
        t95(0)


def test_run_refuses_cases_that_match_nothing_it_would_run(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """run.py --cases naming nothing of the suites asked for: exit 2 and one line, no tables."""
    argv = ["--no-traces", "--cases", "nosuch-case"]
    assert _script("run").main(argv) == 2
    out, err = capsys.readouterr()
    assert err.strip() == (
        "run.py: error: --cases nosuch-case: no case of the suites asked for has one of these "
        "in its name"
    )
    assert out == ""
    # a live case only: the simulated and replayed suites skipped, the live one not asked for
    assert _script("run").main(["--no-sim", "--no-traces", "--cases", "humanoid"]) == 2


def test_burst_pairs_gains_are_the_four_figures_of_the_paired_rounds(
    bench: dict[str, ModuleType],
) -> None:
    """gains: trimmed mean, mean and median of the log ratios, and 1 - the ratio of the sums."""
    native = np.full(5, 0.010)
    size = np.array([0.0097, 0.0097, 0.014, 0.0097, 0.0097])
    logs = np.log(size / native)
    assert bench["burst_pairs"].gains(native, size) == pytest.approx(
        {
            "trimmed": 0.03,  # a fifth dropped at each end: the 0.97s are left
            "mean": -math.expm1(float(np.mean(logs))),
            "median": 0.03,
            "paid": 1 - 0.0528 / 0.05,
        }
    )


class _TunableBurstHit(_BurstHitFake):
    """_BurstHitFake as a workload resolve can tune: a signature, and a close for live_rows."""

    def signature(self) -> dict[str, str]:
        return {"kind": "burst-hit-fake"}

    def close(self) -> None:
        pass


def _one_live_row(measure: ModuleType) -> Any:
    """live_rows of one balanced tune of a _TunableBurstHit, re-measured over 10 rounds."""
    fake = _TunableBurstHit()
    case = SimpleNamespace(name="u", build=lambda nthread: fake, known_good=(8,), uneven=False)
    settings = measure.bench_settings()
    policies = measure.policies_named(settings, ["balanced"])
    (row,) = measure.live_rows(case, policies, settings, nthread=2, tunes=1, rounds=10)
    return row


def test_live_rows_carry_each_choice_s_paid_gain(bench: dict[str, ModuleType]) -> None:
    """live_rows' row has its choice's paid gain from the re-measurement (native's is 0)."""
    row = _one_live_row(bench["measure"])
    assert not math.isnan(row.measured_paid)
    assert row.chunk_size is not None or row.measured_paid == 0.0


def test_burst_pairs_resampled_holds_back_a_size_no_faster_than_native(
    bench: dict[str, ModuleType],
) -> None:
    """resampled: a slower size never passes; a noisier one, or one 0.4% faster, seldom."""
    bp = bench["burst_pairs"]
    policy = load_settings(None).get_policy("balanced")
    native = np.full(50, 0.010)
    assert bp.resampled(native, native * 1.05, trials=20, policy=policy) == (0.0, 0.0)
    noisy = native * np.exp(np.where(np.arange(50) % 2 == 0, 0.05, -0.05))
    alone, confirmed = bp.resampled(native, noisy, trials=100, policy=policy)
    assert confirmed <= alone <= 0.3
    small = native * np.exp(np.where(np.arange(50) % 2 == 0, -0.012, 0.004))  # 0.4% faster
    alone, confirmed = bp.resampled(native, small, trials=100, policy=policy)
    assert confirmed <= alone <= 0.2  # short of the margin: the trimmed test alone seldom passes


def test_burst_pairs_resampled_counts_a_confirmation_whose_adjusted_gain_is_under_the_margin(
    bench: dict[str, ModuleType],
) -> None:
    """resampled: a trial confirmed with its adjusted gain under the margin passes alone too."""
    bp = bench["burst_pairs"]
    policy = load_settings(None).get_policy("balanced")
    native = np.full(50, 0.010)
    # 1.2% faster, steady: confirmed, its median-unbiased gain often pulled under 1%
    size = native * np.exp(-0.012 + np.random.default_rng(1).normal(0, 0.005, 50))
    assert bp.resampled(native, size, trials=40, policy=policy) == (1.0, 1.0)


def test_burst_pairs_resampled_passes_a_steady_gain_of_exactly_the_margin_alone(
    bench: dict[str, ModuleType],
) -> None:
    """resampled: a size steadily 1% faster (balanced's margin) passes the trimmed test alone."""
    bp = bench["burst_pairs"]
    policy = load_settings(None).get_policy("balanced")
    native = np.full(50, 0.010)
    size = native * (1.0 - policy.margin)  # its log gain is the margin's less a rounding error
    assert float(np.log(native / size)[0]) != -math.log1p(-policy.margin)
    assert bp.resampled(native, size, trials=5, policy=policy)[0] == 1.0


def test_burst_pairs_resampled_s_test_alone_passes_from_the_confirmation_s_least_gain(
    bench: dict[str, ModuleType], monkeypatch: pytest.MonkeyPatch
) -> None:
    """resampled: an undecided gain clear of 0 passes alone from least_gain, not a float under."""
    # a verdict whose gain's log is exactly least_gain passes; the next float under does not
    bp = bench["burst_pairs"]
    policy = load_settings(None).get_policy("balanced")
    need = least_gain(policy.margin)
    gain = -math.expm1(-need)
    while -math.log1p(-gain) < need:  # the gain whose log comes out exactly on it
        gain = math.nextafter(gain, 1.0)
    while -math.log1p(-math.nextafter(gain, 0.0)) >= need:
        gain = math.nextafter(gain, 0.0)
    assert -math.log1p(-gain) == need
    native = np.full(8, 0.010)
    for verdict_gain, share in ((gain, 1.0), (math.nextafter(gain, 0.0), 0.0)):
        verdict = Confirmation(None, 4, verdict_gain, (0.001, 0.05), 0.01)
        monkeypatch.setattr(bp, "judge", lambda d, verdict=verdict, **kw: verdict)
        assert bp.resampled(native, native * 0.99, trials=3, policy=policy)[0] == share


def test_burst_pairs_resampled_plans_each_trial_as_the_policy_s_confirmation(
    bench: dict[str, ModuleType], monkeypatch: pytest.MonkeyPatch
) -> None:
    """resampled: each trial judges its plan's looks (4..64 pairs for balanced), planned to 64."""
    bp = bench["burst_pairs"]
    policy = load_settings(None).get_policy("balanced")
    looks = list(bp.look_points(policy.confirm_min_pairs, policy.confirm_max_pairs))
    bounds = bp.plan_bounds(policy.confirm_alpha, policy.confirm_min_pairs, 64)
    seen: list[tuple[int, int, int, tuple[float, float]]] = []

    def spy(d: list[float], **kw: Any) -> Any:
        seen.append((len(d), kw["max_pairs"], kw["min_pairs"], kw["bounds"]))
        return judge(d, **kw)

    judge = bp.judge
    monkeypatch.setattr(bp, "judge", spy)
    native = np.full(50, 0.010)
    # 0.5% faster and noisy: most trials stay undecided up to the plan's last look
    size = native * np.exp(-0.005 + np.random.default_rng(1).normal(0, 0.02, 50))
    bp.resampled(native, size, trials=10, policy=policy)
    assert looks == [4, 8, 16, 32, 64]
    assert {(m, lo, b) for _, m, lo, b in seen} == {(64, 4, bounds)}
    trials: list[list[int]] = []
    for n, *_ in seen:
        if n == looks[0]:
            trials.append([])
        trials[-1].append(n)
    assert len(trials) == 10 and all(t == looks[: len(t)] for t in trials)
    assert sum(t == looks for t in trials) >= 5


def test_stalls_without_bursts_is_the_calm_models_time() -> None:
    """At no load the burst model's list scheduling gives the calm model's exact seconds."""
    script, cases = _script("stalls"), _script("cases")
    quiet = script.Stalls(0.0)
    for index in (0, 24):  # a plain pool, and one whose queue's takes are serialized
        pool = cases.SIM_CASES[index].workload(index)
        for chunk in (1, 5, 40):
            got = script.burst_makespan(pool, chunk, quiet, np.random.default_rng(0))
            assert got == pytest.approx(pool.true_time(chunk), rel=1e-12)


def test_stalls_a_burst_stretches_a_workers_chunk_by_its_speed() -> None:
    """Work begun in a burst that outlasts it runs at the burst's speed; outside, at full."""
    script = _script("stalls")
    rng = np.random.default_rng(0)
    assert script.Bursts(rng, 1e9, 1e-9, 0.25).finish(2.0, 1.0) == pytest.approx(6.0)
    assert script.Bursts(rng, 1e-9, 1e9, 0.25).finish(2.0, 1.0) == pytest.approx(3.0)


def test_stalls_cost_a_chunk_per_worker_more_than_sizes_finer_than_native() -> None:
    """Under bursts one chunk a worker loses to native, and a size finer than native does not."""
    script = _script("stalls")
    pool = SimulatedWorkload(np.full(256, 3e-4), nthread=2, dispatch_s=5e-6)
    stalls = script.Stalls(0.25)

    def gain(chunk: int) -> float:
        """1 - chunk's expected seconds over native's (12), the same bursts for both."""
        seconds: float = script.expected_seconds(pool, chunk, stalls, draws=300, seed=1)
        native: float = script.expected_seconds(pool, 12, stalls, draws=300, seed=1)
        return 1.0 - seconds / native

    assert gain(128) < -0.02 and gain(4) > -0.01
    assert pool.true_time(128) < pool.true_time(12)  # calm, the coarse size is the faster


def test_stalls_main_scores_a_policys_choices_calm_and_busy(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The script tunes a case and prints each policy's gain calm and at each busy share."""
    script = _script("stalls")
    argv = ["--only", "uniform-256x8", "--seeds", "1", "--draws", "3", "--busy", "0.1"]
    assert script.main(argv) == 0
    out = capsys.readouterr().out
    assert "uniform-256x8" in out and "busy 0.1" in out
    assert any(line.startswith("balanced ") for line in out.splitlines())


class _Scripted:
    """A generator whose draws are given: ``random()`` returns the ``firsts`` in order,
    ``exponential()`` the ``lengths``; the scales it was asked for are kept in ``scales``."""

    def __init__(self, firsts: list[float], lengths: list[float]) -> None:
        self._firsts, self._lengths, self.scales = iter(firsts), iter(lengths), list[float]()

    def random(self) -> float:
        return next(self._firsts)

    def exponential(self, scale: float) -> float:
        self.scales.append(scale)
        return next(self._lengths)


@pytest.mark.parametrize(("first", "on"), [(0.2, True), (0.3, False)])
def test_stalls_a_worker_starts_in_a_burst_as_often_as_bursts_take_its_time(
    first: float, on: bool
) -> None:
    """Bursts 1 s long, 3 s apart: a uniform draw under 1/4 starts in a burst, one over it free."""
    script = _script("stalls")
    rng = _Scripted([first], [1e9])
    bursts = script.Bursts(rng, 1.0, 3.0, 0.5)
    assert rng.scales == [1.0 if on else 3.0]  # the first spell is a burst's or a free one's
    assert bursts.finish(0.0, 1.0) == (2.0 if on else 1.0)


def test_stalls_work_across_a_spells_end_runs_at_each_spells_speed() -> None:
    """Work spanning a burst's edge runs at the burst's speed inside it and at full speed out."""
    script = _script("stalls")
    rng = _Scripted([0.0], [1.0, 2.0, 10.0])  # a burst until 1, free until 3, a burst until 13
    bursts = script.Bursts(rng, 1.0, 3.0, 0.5)
    assert bursts.finish(0.5, 1.0) == 1.75  # 0.25 done in the burst, 0.75 free
    assert bursts.finish(2.5, 1.0) == 4.0  # 0.5 done free, 0.5 at half speed
    assert rng.scales == [1.0, 3.0, 1.0]  # each spell's length drawn at its own kind's mean


def test_stalls_a_worker_stopped_by_a_burst_resumes_when_it_ends() -> None:
    """At speed 0 a burst does none of the work: it carries on, whole, once the burst is over."""
    script = _script("stalls")
    bursts = script.Bursts(_Scripted([0.0], [1.0, 2.0, 10.0]), 1.0, 3.0, 0.0)
    assert bursts.finish(0.5, 1.0) == 2.0


@pytest.mark.parametrize(
    ("firsts", "chunks"),
    [
        pytest.param([0.1, 0.1], 8, id="both-in-bursts"),
        pytest.param([0.9, 0.9], 4, id="both-free"),
        pytest.param([0.1, 0.9], 6, id="the-first-in-a-burst"),
    ],
)
def test_stalls_each_worker_has_bursts_of_its_own_sized_by_native_s_call(
    firsts: list[float], chunks: int
) -> None:
    """Each worker has its own bursts, burst x native's call long, filling busy of its time."""
    # and runs its own chunks at its own speed
    script = _script("stalls")
    pool = SimulatedWorkload(np.full(64, 1e-3), nthread=2, dispatch_s=5e-6)
    rng = _Scripted(firsts, [1e9, 1e9])  # no spell ends within the call
    seconds = script.burst_makespan(pool, 8, script.Stalls(0.25, burst=0.5, speed=0.5), rng)
    on_s = 0.5 * pool.true_time(None)
    assert rng.scales == pytest.approx([on_s if f < 0.25 else 3 * on_s for f in firsts])
    # 8 chunks of 8 envs: calm, 4 chunks' time; at half speed, 8; one worker slowed, 6
    # (it does 3 of them, the free one 5)
    chunk_s = 8e-3 + 5e-6
    assert seconds == pytest.approx(chunks * chunk_s, rel=1e-9)


def test_stalls_expected_seconds_is_the_mean_of_its_draws_from_its_seed() -> None:
    """expected_seconds averages ``draws`` calls whose bursts all come from ``seed``."""
    script = _script("stalls")
    pool = SimulatedWorkload(np.full(64, 1e-3), nthread=2, dispatch_s=5e-6)
    stalls = script.Stalls(0.25)
    rng = np.random.default_rng(5)
    calls = [script.burst_makespan(pool, 8, stalls, rng) for _ in range(7)]
    got = script.expected_seconds(pool, 8, stalls, draws=7, seed=5)
    assert got == pytest.approx(float(np.mean(calls)), rel=1e-12)
    assert got != pytest.approx(float(np.median(calls)), rel=1e-9)


@pytest.mark.parametrize(
    "argv",
    [
        pytest.param(["--seeds", "0"], id="seeds-0"),
        pytest.param(["--draws", "0"], id="draws-0"),
        pytest.param(["--busy", "0"], id="busy-0"),
        pytest.param(["--busy", "0.1", "1"], id="busy-1"),
        pytest.param(["--burst", "0"], id="burst-0"),
        pytest.param(["--speed", "1"], id="speed-1"),
        pytest.param(["--speed", "-0.5"], id="speed-negative"),
        pytest.param(["--only", "no-such-case", "--seeds", "1"], id="unknown-case"),
    ],
)
def test_stalls_main_refuses_arguments_out_of_range(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    """Seeds, draws, busy, burst, speed out of range or an unknown case: exit 2, nothing tuned."""
    # seeds or draws under 1, busy outside (0, 1), burst 0, speed outside [0, 1)
    script = _script("stalls")
    with pytest.raises(SystemExit) as exited:
        script.main(argv)
    assert exited.value.code == 2
    assert "error: " in capsys.readouterr().err


def test_stalls_calibrate_takes_a_burst_that_stops_the_worker(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """--speed 0 (a worker that does nothing in a burst) is in range: --calibrate models it."""
    script = _script("stalls")
    assert script.main(["--calibrate", "--draws", "1", "--busy", "0.5", "--speed", "0"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("uniform 256 envs x 2 workers, native 12, Stalls(busy=0.5, ")
    assert "speed=0.0)" in out


def test_recordings_script_sums_each_folder_oldest_first(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """recordings.py prints a row per folder of traces, oldest recording first, then all summed."""
    for folder, stamp, gain in (("a-later", "2026-12-02T00:00:00+00:00", 0.3),
                                ("b-earlier", "2026-12-01T00:00:00+00:00", 0.0)):  # fmt: skip
        (tmp_path / folder).mkdir()
        trace = attrs.evolve(_split_trace(8, 4, gain), recorded=stamp)
        (tmp_path / folder / "batch.json").write_text(dump_trace(trace))
    argv = ["--traces", str(tmp_path), "--draws", "1", "--policies", "balanced"]
    assert _script("recordings").main(argv) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split(" | ")[0] for line in lines[2:]] == [
        "| `b-earlier`",
        "| `a-later`",
        "| all (2)",
    ]
    offered = [ReplayWorkload.from_file(tmp_path / f / "batch.json").offered_gain()[0]
               for f in ("b-earlier", "a-later")]  # fmt: skip
    cells = [line.split(" | ")[4] for line in lines[2:]]
    assert [c.split()[0] for c in cells] == [f"{o:.2%}" for o in (*offered, sum(offered))]
    assert lines[2].split(" | ")[1:3] == ["2026-12-01", "batch"]


def test_recordings_script_refuses_a_file_that_is_no_trace(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """recordings.py on a folder holding a JSON file that is no trace exits 2 with one line."""
    (tmp_path / "broken.json").write_text("{}")
    assert _script("recordings").main(["--traces", str(tmp_path), "--draws", "1"]) == 2
    err = capsys.readouterr().err
    assert (
        err.startswith("recordings.py: error:")
        and "broken.json" in err
        and len(err.splitlines()) == 1
    )


def test_regret_causes_sorts_each_loss_by_where_it_happened() -> None:
    """regret_causes' categories: a size chosen, a confirmation run, the gate, the budget."""
    cause = _script("regret_causes")._cause
    assert cause(8, True, None, "settled", False) == "out-raced"
    assert cause(8, False, True, "settled", False) == "never proposed"
    assert cause(None, True, True, "budget", True) == "confirm inconclusive, good size held"
    assert cause(None, True, False, "confirming", False) == (
        "confirm inconclusive, weaker size held"
    )
    assert cause(None, True, None, "noisy", False) == "noise gate"
    assert cause(None, False, None, "too_slow", False) == "budget"
    assert cause(None, True, None, "settled", True) == "budget"
    assert cause(None, True, None, "settled", False) == "kept at race end"


def test_regret_causes_lists_every_run_of_a_named_case() -> None:
    """regret_causes on one case with no threshold: a row per seed, each consistent with it."""
    script = _script("regret_causes")
    rows = script.causes("balanced", 2, -1.0, ["lognormal-768x12"])
    assert [(r.case, r.seed) for r in rows] == [("lognormal-768x12", 0), ("lognormal-768x12", 1)]
    for r in rows:
        assert r.measured and r.best_measured in r.measured
        if r.chosen is not None:  # a size chosen was measured: none measured did worse
            assert 0.0 <= r.best_measured_regret <= r.regret
        assert (r.held is not None) == (r.pairs > 0)
        if r.chosen is None and r.held is not None:
            assert r.cause.startswith("confirm inconclusive")


def test_regret_causes_sorts_each_lost_trace_draw_by_cause(tmp_path: Path) -> None:
    """regret_causes --traces: every draw under half the held-out offer, each consistent."""
    script = _script("regret_causes")
    (tmp_path / "busy").mkdir()
    source = BENCH / "traces" / "busy" / "demo-tail-256.json"
    (tmp_path / "busy" / "demo-tail-256.json").write_bytes(source.read_bytes())
    lost, offers = script.trace_causes("balanced", 3, tmp_path)
    offer = ReplayWorkload.from_file(source).offered_gain()[1]
    assert offers == {"busy/demo-tail-256": offer}
    assert lost and {x.draw for x in lost} <= {0, 1, 2}
    for x in lost:
        assert x.trace == "busy/demo-tail-256" and x.held_out == offer
        assert x.gain < offer / 2 and math.isclose(x.lost, offer - x.gain)
        assert (x.held is not None) == (x.pairs > 0) and x.calls > 0
        if x.chosen is None and x.held is not None:
            assert x.cause.startswith("confirm inconclusive")
    text = script.trace_report(lost, offers, 3)
    assert "by cause:" in text and "busy/demo-tail-256:" in text


def test_regret_causes_refuses_an_unknown_case() -> None:
    """regret_causes.py --cases with a name no case has: exit 2 naming it, no traceback."""
    done = subprocess.run(
        [sys.executable, str(BENCH / "regret_causes.py"), "--cases", "no-such-case"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2 and "no-such-case" in done.stderr
    assert "Traceback" not in done.stderr


def test_tooth_census_names_native_s_tooth_and_its_gain_on_even_envs() -> None:
    """tooth_census.py: 32768 even envs on 128 threads, native 25's tooth is 26, 10 waves not 11."""
    census = _script("tooth_census")
    assert census.native_tooth(32768, 128) == 26
    assert census.native_tooth(10000, 7) == 143
    assert census.native_tooth(2560, 16) == 16  # 10 whole waves already: native is its tooth
    pool = SimulatedWorkload(np.full(32768, 1e-4), nthread=128)
    row = census.census("even", "even-32768x128", 32768, 128, pool)
    assert (row.native, row.tooth) == (25, 26)
    # 11 waves of 25 against 10 of 26 envs, each plus its chunk's dispatch
    assert row.tooth_gain == pytest.approx(1 - 260 / 275, abs=0.002)
    assert not row.listed and row.offered >= row.tooth_gain
    assert "| even | 1 | 1 |" in census.table([("even", [row])])


def test_held_out_causes_sorts_each_draw_by_phase() -> None:
    """held_out_causes' phases: a size chosen, a confirmation that kept native, the gate."""
    cause = _script("held_out_causes").cause_of
    assert cause(1, "chose 1: ...", 1, 1, True) == "chose A's best"
    assert cause(3, "chose 3: ...", 3, 1, True) == "chose another, best measured"
    assert cause(3, "chose 3: ...", 3, 1, False) == "chose another, best never measured"
    could_not = "kept the native chunk 6: ... could not confirm a gain"
    assert cause(None, could_not, 1, 1, True) == "not confirmed, best held"
    assert cause(None, could_not, 4, 1, True) == "not confirmed, another held, best measured"
    assert cause(None, "kept ...: at most 0.1% (95% upper bound)", 4, 1, False) == (
        "rejected, another held, best never measured"
    )
    assert cause(None, "kept ...: too noisy to confirm a gain", None, 1, True) == "noise gate"
    assert cause(None, "kept ...: within the noise", None, 1, True) == "native, other"


def test_held_out_causes_adds_up_to_the_ceilings_lead(tmp_path: Path) -> None:
    """held_out_causes on one trace: a row per draw, losses summing to ceiling less policy."""
    script = _script("held_out_causes")
    source = BENCH / "traces" / "manycore" / "demo-tail-256-t4.json"
    (tmp_path / "t.json").write_bytes(source.read_bytes())
    rows = script.held_out_causes("balanced", 2, tmp_path)
    assert [(r.trace, r.draw) for r in rows] == [("t", 0), ("t", 1)]
    for r in rows:
        assert math.isclose(r.lost, r.ceiling_gain - r.gain)
        assert (r.chosen is None) == (not r.cause.startswith("chose"))
    text = script.report(rows, 2, verbose=True)
    total = 100 * sum(r.lost for r in rows) / 2
    assert f"{total:+12.2f}" in text.splitlines()[-1] and "t   " in text
    assert script.main(["--traces", str(tmp_path / "none")]) == 2


def _recording_pool(sizes: list[int | None]) -> Any:
    """A real MuJoCo pool (2 threads) that records the chunk_size of every rollout."""
    import mujoco.rollout

    class Recording(mujoco.rollout.Rollout):  # type: ignore[misc]
        def rollout(self, *args: Any, **kwargs: Any) -> Any:
            sizes.append(kwargs["chunk_size"])
            return super().rollout(*args, **kwargs)

    return Recording(nthread=2)


@contextlib.contextmanager
def _tiny_on_a_recording_pool(tmp_path: Path, sizes: list[int | None]) -> Iterator[Any]:
    """The tiny model's 40 envs on 2 threads, its pool recording each call's chunk_size."""
    from chunktune._mujoco import RolloutWorkload

    (tmp_path / "tiny.xml").write_text(_TINY)
    pool = _recording_pool(sizes)
    try:
        with RolloutWorkload.from_xml(
            tmp_path / "tiny.xml", num_envs=40, nthread=2, nstep=2, rollout=pool
        ) as inner:
            yield inner
    finally:
        pool.close()


def test_aa_live_twins_run_native_and_other_sizes_run_as_themselves(tmp_path: Path) -> None:
    """aa_live's wrapper runs native for a twin (clamped as candidates are), others as asked."""
    from chunktune._errors import InvalidArgumentError

    script = _script("aa_live")
    sizes: list[int | None] = []
    with _tiny_on_a_recording_pool(tmp_path, sizes) as inner:
        # 40 envs on 2 threads: native 2, ceil(N/T) 20, so twin 99 is asked for as 20
        twins = script.TwinWorkload(inner, (3, 99), tune=7)
        for asked in (3, None, 20, 4):
            assert twins.run(asked) > 0
        assert sizes == [None, None, None, 4]
        assert [(a, r) for a, r, _ in twins.calls] == [(3, None), (None, None), (20, None), (4, 4)]
        assert twins.signature() == {**inner.signature(), "aa_twins": "3,20", "aa_tune": 7}
        with pytest.raises(InvalidArgumentError, match=r"twins \(2, 5\).*native chunk 2"):
            script.TwinWorkload(inner, (2, 5))
        with pytest.raises(InvalidArgumentError, match=r"twins \(\)"):
            script.TwinWorkload(inner, ())


def test_aa_live_a_twin_only_list_tunes_to_a_decision_on_native_calls_alone(
    tmp_path: Path,
) -> None:
    """balanced on K twins over a real pool measures, decides, and the pool only ever ran None."""
    import chunktune
    from chunktune._candidates import ExplicitCandidates

    script = _script("aa_live")
    settings = _script("measure").bench_settings()
    policy = settings.get_policy("balanced")
    sizes: list[int | None] = []
    with _tiny_on_a_recording_pool(tmp_path, sizes) as inner:
        twins = script.TwinWorkload(inner, script.TWIN_SIZES)
        decision = chunktune.resolve_sync(
            twins,
            settings=settings,
            policy=attrs.evolve(policy, candidates=ExplicitCandidates(sizes=script.TWIN_SIZES)),
        )
        assert isinstance(decision, chunktune.Decision) and decision.source == "benchmark"
        assert {a for a, _, _ in twins.calls} > {None} and set(sizes) == {None}
        row = script.tune_once(
            inner, case="tiny", name="balanced", policy=policy, k=1, tune=3, settings=settings
        )
    assert (row.case, row.k, row.tune, row.calls > 0) == ("tiny", 1, 3, True)
    assert row.kind in {"left", "gate", "race", "confirm", "budget"}
    assert (row.kind == "left") == (row.chunk_size is not None)
    assert set(sizes) == {None}


def test_aa_live_clopper_pearson_matches_known_exact_intervals() -> None:
    """The exact interval: 0 of 60 reaches 1 - 0.025**(1/60); 1 of 10 spans 0.25% to 44.5%."""
    cp = _script("aa_live").clopper_pearson
    low, high = cp(0, 60)
    assert low == 0.0 and math.isclose(high, 1 - 0.025 ** (1 / 60), rel_tol=1e-9)
    low, high = cp(1, 10)
    assert math.isclose(low, 0.00253, rel_tol=1e-2) and math.isclose(high, 0.44502, rel_tol=1e-3)
    assert cp(5, 5)[1] == 1.0


def test_aa_live_null_z_reports_the_spread_of_each_confirmations_statistic() -> None:
    """null_z counts confirmations of 8+ pairs only and gives their z's mean, sd and tail share."""
    script = _script("aa_live")
    rng = np.random.default_rng(5)

    def row(pairs: Any) -> Any:
        return script.AARow(
            case="c", policy="balanced", k=1, tune=0, chunk_size=None, kind="confirm",
            reason="", gain=0.0, gain_ci=None, partial=False, probe_seconds=1.0, calls=8,
            pairs=tuple(float(x) for x in pairs), block_drift=(), load=1.0,
        )  # fmt: skip

    assert script.null_z([row([0.1] * 4)]).startswith("fewer than 2 confirmations")
    rows = [row(rng.normal(0.0, 0.05, 32)) for _ in range(40)] + [row([0.3] * 4)]
    text = script.null_z(rows)
    assert text.startswith("40 confirmations with 8+ pairs") and "sd " in text


def test_live_rows_keep_each_tune_s_progress_events(bench: dict[str, ModuleType]) -> None:
    """live_rows' row keeps its tune's events as JSON objects: probes' seconds, each one's when."""
    row = _one_live_row(bench["measure"])
    probes = [e for e in row.events if e["kind"] == "probe"]
    assert probes and all(isinstance(e["seconds"], float) for e in probes)
    assert row.events[-1]["kind"] == "done"
    assert json.loads(json.dumps(row.events)) == list(row.events)
    elapsed = [e["elapsed_s"] for e in row.events]
    assert all(isinstance(s, float) for s in elapsed) and elapsed == sorted(elapsed)
