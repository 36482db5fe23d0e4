"""benchmarks/cross_day.py: which of a recording's own figures tell a gain that will not hold."""

from __future__ import annotations

import importlib
import math
import sys
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

from chunktune._trace import Trace, dump_trace

BENCH = Path(__file__).resolve().parent.parent / "benchmarks"


@pytest.fixture(scope="module")
def cross_day() -> ModuleType:
    sys.path.insert(0, str(BENCH))
    try:
        return importlib.import_module("cross_day")
    finally:
        sys.path.remove(str(BENCH))


def _trace(gains: dict[int, float], rounds: int = 16, seed: int = 0) -> Trace:
    """64 envs on 2 threads (native 3): each size ``gain`` faster than native, 1% noise."""
    rng = np.random.default_rng(seed)
    level = 0.01 * np.exp(rng.normal(0.0, 0.1, rounds))
    samples = {3: tuple(level * np.exp(rng.normal(0.0, 0.01, rounds)))}
    for chunk, gain in gains.items():
        samples[chunk] = tuple(level * (1 - gain) * np.exp(rng.normal(0.0, 0.01, rounds)))
    return Trace(num_envs=64, nthread=2, rounds=rounds, samples=samples)


def _write(root: Path, recordings: list[dict[int, float]]) -> list[Path]:
    folders = []
    for i, gains in enumerate(recordings):
        folder = root / f"day{i}"
        folder.mkdir(parents=True)
        (folder / "batch-64.json").write_text(dump_trace(_trace(gains, seed=i)))
        folders.append(folder)
    return folders


def test_auc_is_one_when_every_failure_scores_above_every_hold(cross_day: ModuleType) -> None:
    """auc: 1 for a perfect score, 0 for a reversed one, 0.5 for a constant one."""
    bad = np.array([False, False, True, True])
    assert cross_day.auc(np.array([1.0, 2.0, 3.0, 4.0]), bad) == 1.0
    assert cross_day.auc(np.array([4.0, 3.0, 2.0, 1.0]), bad) == 0.0
    assert cross_day.auc(np.ones(4), bad) == 0.5
    assert math.isnan(cross_day.auc(np.ones(4), np.zeros(4, bool)))


def test_features_count_chunks_a_thread_and_an_uneven_last_wave(cross_day: ModuleType) -> None:
    """features: 64 envs in chunks of 8 are 4 chunks a thread, even; of 5, 6.5 and uneven."""
    trace = _trace({8: 0.05, 5: 0.05})
    eight = cross_day.features(trace, 8, 0.01)
    five = cross_day.features(trace, 5, 0.01)
    assert (eight["chunks_per_thread"], eight["uneven_last_wave"]) == (4.0, 0.0)
    assert (five["chunks_per_thread"], five["uneven_last_wave"]) == (6.5, 1.0)
    assert eight["gain"] == pytest.approx(-math.log(0.95), abs=0.01)
    assert eight["neg_t"] < -2.0  # 5% at 1.4% pair noise over 16 rounds: strong evidence


def test_strong_evidence_is_judged_at_students_quantile_of_its_blocks(
    cross_day: ModuleType,
) -> None:
    """features: the t cut is Student's at the block means' dof, never the normal's 2."""
    # 16 rounds: 4 blocks, 3 dof; under 3 blocks, the rounds' own dof
    assert cross_day.block_dof(np.zeros(16)) == 3
    assert cross_day.block_dof(np.zeros(8)) == 7  # 2 blocks: the naive error over 8 rounds
    assert cross_day.features(_trace({8: 0.05}), 8, 0.01)["t95"] == pytest.approx(3.182)


def test_a_win_of_one_day_that_loses_on_the_others_fails_to_hold(
    cross_day: ModuleType, tmp_path: Path
) -> None:
    """events: size 8 wins on day 0 only (fails), size 4 wins every day (holds)."""
    days = _write(tmp_path, [{8: 0.05, 4: 0.04}, {8: -0.05, 4: 0.04}, {8: -0.05, 4: 0.04}])
    evs = cross_day.events(cross_day.batches(days, 2), 0.02, None)
    got = {(e.recording.split("/")[-2], e.chunk): e.fails for e in evs}
    assert got == {("day0", 8): True, ("day0", 4): False, ("day1", 4): False, ("day2", 4): False}


def test_a_batch_of_two_recordings_gives_no_events(cross_day: ModuleType, tmp_path: Path) -> None:
    """events: a batch needs 3 recordings (one judged, a median over at least 2 others)."""
    days = _write(tmp_path, [{8: 0.05}, {8: -0.05}])
    assert cross_day.events(cross_day.batches(days, 2), 0.02, None) == []


def test_main_prints_the_events_and_their_failures_by_chunks_a_thread(
    cross_day: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """main: the folder's events, and the share failing by chunks a thread (8 a thread: 4)."""
    days = _write(tmp_path, [{8: 0.05, 4: 0.04}, {8: -0.05, 4: 0.04}, {8: -0.05, 4: 0.04}])
    assert cross_day.main(["--traces", str(tmp_path), "--window", "8"]) == 0
    out = capsys.readouterr().out
    assert "4 events over 1 batches, 1 fail to hold (25%)" in out
    assert "fail to hold, all    by chunks a thread: (3,6] 100% of 1, (6,12] 0% of 3" in out
    assert len(days) == 3


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        pytest.param(["--min-gain", "1.5"], "--min-gain 1.5: expected a fraction", id="min-gain"),
        pytest.param(["--window", "0"], "argument --window: '0'", id="window"),
        pytest.param(["--traces", "/nonexistent"], "expected a folder of traces", id="traces"),
    ],
)
def test_bad_arguments_exit_2_with_one_line(
    cross_day: ModuleType, argv: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A bad fraction, count or folder: exit 2 and one error line naming it."""
    with pytest.raises(SystemExit) as exit_:
        cross_day.main(argv)
    assert exit_.value.code == 2
    assert says in capsys.readouterr().err.strip().splitlines()[-1]


def test_a_figure_with_no_failure_to_tell_apart_gets_no_p_value(
    cross_day: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """_table: every event holds, so each AUC is undefined: its CI and p are NaN, not p=0.002."""
    _write(tmp_path, [{4: 0.04}, {4: 0.04}, {4: 0.04}])
    assert cross_day.main(["--traces", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "3 events over 1 batches, 0 fail to hold (0%)" in out
    rows = [line.split() for line in out.splitlines() if line.split()[:1] == ["gain"]]
    assert rows == [["gain", "nan", "[", "nan,", "nan]", "nan"]]


def test_a_damaged_trace_exits_2_with_one_line_before_any_table(
    cross_day: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """main: a .json not a trace, in a later folder: exit 2, one line naming it, no table."""
    _write(tmp_path / "a", [{4: 0.04}, {4: 0.04}, {4: 0.04}])
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "batch-64.json").write_text("{not json")
    assert cross_day.main(["--traces", str(tmp_path / "a"), str(tmp_path / "b")]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.count("\n") == 1 and err.startswith("cross_day.py: error: ")
    assert "batch-64.json is not a JSON trace" in err


def test_a_batch_whose_recordings_share_no_size_gives_no_events(
    cross_day: ModuleType, tmp_path: Path
) -> None:
    """events: three recordings of one batch with no size in common: skipped, no warning."""
    days = _write(tmp_path, [{4: 0.04}, {8: 0.04}, {16: 0.04}])
    assert cross_day.events(cross_day.batches(days, 2), 0.02, None) == []


def test_features_of_known_log_ratios_keep_their_signs(cross_day: ModuleType) -> None:
    """features: gain positive when faster; losing rounds, skew, lag-1 and block t as defined."""
    x = np.array([0.1, 0.1, -0.1, -0.1, 0.3, 0.1, -0.1, -0.1])  # log(size / native) a round
    trace = Trace(num_envs=64, nthread=2, rounds=8,
                  samples={3: (1.0,) * 8, 8: tuple(np.exp(x))})  # fmt: skip
    f = cross_day.features(trace, 8, noise=float(x.std(ddof=1)) / 2)
    sd = float(x.std(ddof=1))
    assert f["gain"] == pytest.approx(-0.025)  # slower on average: a negative gain
    assert f["rounds_losing"] == 0.5
    assert f["rel_spread"] == pytest.approx(2.0)
    assert f["skew"] == pytest.approx((0.025 - 0.0) / sd)
    c = x - x.mean()
    assert f["lag1"] == pytest.approx(float(c[:-1] @ c[1:] / (c @ c)))
    assert f["var_ratio4"] == pytest.approx(float(np.var([0.0, 0.05], ddof=1) / (sd * sd / 4)))
    # two 4-round blocks, under 3: the plain standard error
    assert f["neg_t"] == pytest.approx(0.025 / (sd / math.sqrt(8)))
