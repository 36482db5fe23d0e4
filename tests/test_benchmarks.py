"""Smoke test of the benchmark script: it imports, and one tiny simulated case gives sane rows."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

RUN_PY = Path(__file__).resolve().parent.parent / "benchmarks" / "run.py"


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("chunktune_benchmarks_run", RUN_PY)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # attrs resolves the module's annotations through it
    spec.loader.exec_module(module)
    return module


def test_suites_span_the_required_ranges(bench: ModuleType) -> None:
    """Full has >= 20 cases, quick >= 12, both over 8..128 threads and 256..32768 envs."""
    full = bench.SIM_CASES
    quick = [c for c in full if c.quick]
    assert len(full) >= 20 and len(quick) >= 12
    for cases in (full, quick):
        assert {c.layout for c in cases} == {
            "uniform",
            "lognormal",
            "blocked",
            "variants",
            "interleaved",
        }
        assert min(c.nthread for c in cases) == 8 and max(c.nthread for c in cases) == 128
        assert min(c.num_envs for c in cases) == 256 and max(c.num_envs for c in cases) == 32768
    assert sum(c.quick for c in bench.REAL_CASES) >= 2


def test_one_tiny_simulated_case_gives_scored_rows(
    bench: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A tiny case through the real resolve path yields one row per seed, scored and summarized."""
    monkeypatch.setenv("CHUNKTUNE_SWEEP_LOCK", str(tmp_path / "sweep.lock"))
    monkeypatch.setenv("CHUNKTUNE_CACHE", str(tmp_path / "cache.json"))
    settings = bench.bench_settings()
    assert not settings.cache.enabled
    case = bench.SimCase(layout="blocked", num_envs=64, nthread=4, sigma=0.02)
    policies = bench._policies(settings, ["balanced"])

    rows = bench.simulated_rows(case, policies, 2, settings)

    assert [r["seed"] for r in rows] == [0, 1]
    for row in rows:
        assert row["kind"] == "simulated" and row["policy"] == "balanced"
        assert row["source"] == "benchmark"
        assert row["regret"] >= 0.0
        assert row["vs_native"] <= row["regret"] + 1e-12  # the oracle is never slower than native
        assert row["probe_seconds"] > 0.0
    assert not (tmp_path / "cache.json").exists()
    summary = bench.summarize_sim(rows)["balanced"]
    assert summary["runs"] == 2
    assert summary["worst_regret"] >= summary["median_regret"] >= 0.0
    assert summary["probe_vs_seed"] is None  # no seed policy rows to compare against
    assert "balanced" in bench.sim_summary_table(bench.summarize_sim(rows))


def test_fuzz_script_runs_a_few_cases_of_every_kind(capsys: pytest.CaptureFixture[str]) -> None:
    """benchmarks/fuzz.py runs every kind of settings file and cache document without a failure."""
    path = RUN_PY.with_name("fuzz.py")
    spec = importlib.util.spec_from_file_location("chunktune_benchmarks_fuzz", path)
    assert spec is not None and spec.loader is not None
    fuzz = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = fuzz
    spec.loader.exec_module(fuzz)
    assert fuzz.main_fuzz(["--settings", "15", "--caches", "24", "--seed", "1"]) == 0
    out = capsys.readouterr().out
    assert "failures: 0" in out and "quarantined" in out and "ConfigError" in out
