"""Every policy and settings field changes what resolve or the sweep does."""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path
from typing import Any

import attrs
import numpy as np
import pytest

import chunktune
from chunktune import ExplicitCandidates, Policy, Settings, load_settings
from chunktune._candidates import candidate_list
from chunktune._settings import StderrMode
from chunktune._stats import estimate
from chunktune._sweep import sweep
from chunktune.sim import Noise, SimulatedWorkload


def base(**changes: Any) -> Policy:
    # a budget these simulated sweeps never reach: each test isolates one other field
    return attrs.evolve(
        load_settings().get_policy("balanced"), **{"time_budget_s": 3600.0, **changes}
    )


def plateau(seed: int = 0, sigma: float = 0.005) -> SimulatedWorkload:
    """End-heavy batch: small chunks form a wide fast plateau, native is clearly slower."""
    return SimulatedWorkload.from_layout(
        "blocked", num_envs=2048, nthread=16, noise=Noise(sigma=sigma), seed=seed
    )


def settings(**cache: Any) -> Settings:
    s = load_settings()
    return attrs.evolve(s, cache=attrs.evolve(s.cache, **cache)) if cache else s


def test_margin_decides_whether_to_leave_native() -> None:
    """A gain of several percent switches under a 3% margin and stays native under a 50% one."""
    low = chunktune.resolve_sync(plateau(), policy=base(margin=0.03))
    high = chunktune.resolve_sync(plateau(), policy=base(margin=0.5))
    assert low.chunk_size is not None and high.chunk_size is None
    assert "margin" in high.reason


def test_tie_break_and_tie_tol_pick_within_the_band() -> None:
    """smallest and toward_upper pick different ends of a band that tie_tol widens."""
    small = chunktune.resolve_sync(plateau(), policy=base(tie_break="smallest", tie_tol=0.05))
    upper = chunktune.resolve_sync(plateau(), policy=base(tie_break="toward_upper", tie_tol=0.05))
    narrow = chunktune.resolve_sync(plateau(), policy=base(tie_break="smallest", tie_tol=0.0))
    assert small.chunk_size is not None and upper.chunk_size is not None
    assert small.chunk_size < upper.chunk_size
    assert narrow.chunk_size is not None and narrow.chunk_size >= small.chunk_size


def test_confidence_z_refuses_a_win_inside_the_noise() -> None:
    """Under heavy noise a huge confidence_z keeps native where confidence_z = 0 switches."""
    noisy = dict(race=False, early_stop=False, max_rounds=3, prime=0, confirm=False)
    bold = chunktune.resolve_sync(plateau(sigma=0.1), policy=base(confidence_z=0.0, **noisy))
    careful = chunktune.resolve_sync(plateau(sigma=0.1), policy=base(confidence_z=10.0, **noisy))
    assert bold.chunk_size is not None
    assert careful.chunk_size is None and "within the noise" in careful.reason


@pytest.mark.parametrize("trim", [0.0, 0.25])
def test_estimator_and_trim_shape_the_estimate(trim: float) -> None:
    """trimmed_mean drops `trim` of the samples at each end before averaging."""
    pol = base(
        estimator="trimmed_mean",
        trim=trim,
        race=False,
        early_stop=False,
        max_rounds=8,
        paired=False,
    )
    r = sweep(plateau(sigma=0.05), [None, 8], pol)
    for chunk, samples in r.samples.items():
        assert r.estimates[chunk] == pytest.approx(estimate(samples, "trimmed_mean", trim=trim))
    if trim == 0.0:
        s = r.samples[None]
        assert r.estimates[None] == pytest.approx(sum(s) / len(s))


def test_prime_and_warmup_discard_calls() -> None:
    """prime discards native calls up front; warmup discards calls of every candidate."""
    w = plateau()
    pol = base(
        prime=3, warmup=2, race=False, early_stop=False, min_rounds=2, max_rounds=2, confirm=False
    )
    r = sweep(w, [None, 4, 8], pol)
    assert [c for c, _ in w.history[:3]] == [None, None, None]
    assert w.calls == 3 + 2 * 3 + 2 * 3
    assert set(r.counts().values()) == {2}


def test_min_rounds_protects_candidates_from_early_racing() -> None:
    """No candidate is raced out before min_rounds samples, but the hopeless after one."""
    pol = base(min_rounds=6, max_rounds=8)
    r = sweep(plateau(), candidate_list(pol.candidates, 2048, 16), pol)
    counts = r.counts()
    early = [c for c in r.raced_out if counts[c] < 6]
    assert r.raced_out and len(early) < len(r.raced_out)
    assert all(counts[c] == 1 and r.estimates[c] > 2 * r.estimates[None] for c in early)


def test_max_rounds_caps_samples() -> None:
    """No candidate gets more than max_rounds samples."""
    pol = base(max_rounds=4, early_stop=False)
    r = sweep(plateau(), candidate_list(pol.candidates, 2048, 16), pol)
    assert max(r.counts().values()) == 4


def test_race_z_sets_racing_aggressiveness() -> None:
    """A cautious race_z races fewer candidates out than an eager one."""
    cands = candidate_list(base().candidates, 2048, 16)
    eager = sweep(plateau(sigma=0.03), cands, base(race_z=0.5, early_stop=False))
    cautious = sweep(plateau(sigma=0.03), cands, base(race_z=8.0, early_stop=False))
    assert len(eager.raced_out) > len(cautious.raced_out)


def test_early_stop_ends_a_settled_sweep() -> None:
    """With early_stop the sweep settles before max_rounds; without it, it runs them all."""
    cands = candidate_list(base().candidates, 2048, 16)
    on = sweep(plateau(), cands, base(max_rounds=40))
    off = sweep(plateau(), cands, base(max_rounds=40, early_stop=False))
    assert on.stop == "settled" and off.stop == "max_rounds"
    assert on.probe_seconds < off.probe_seconds


def test_seed_changes_the_measurement_order() -> None:
    """Different policy seeds shuffle rounds differently."""
    a, b = plateau(), plateau()
    cands = candidate_list(base().candidates, 2048, 16)
    sweep(a, cands, base(seed=1))
    sweep(b, cands, base(seed=2))
    assert [c for c, _ in a.history] != [c for c, _ in b.history]


def test_refine_top_decides_whose_neighbours_are_measured() -> None:
    """Refining around the best 4 survivors measures sizes that refining around the best 1 skips."""
    sizes = {}
    for top in (1, 4):
        pol = base(refine_top=top)
        r = sweep(plateau(), candidate_list(pol.candidates, 2048, 16), pol)
        sizes[top] = set(r.samples)
    assert sizes[1] < sizes[4]


def test_confirm_alpha_sets_the_reported_interval() -> None:
    """A smaller confirm_alpha reports a wider interval around the same confirmed gain."""
    strict = chunktune.resolve_sync(plateau(), policy=base(confirm_alpha=0.01))
    loose = chunktune.resolve_sync(plateau(), policy=base(confirm_alpha=0.3), refresh=True)
    assert strict.chunk_size == loose.chunk_size is not None
    assert strict.gain == pytest.approx(loose.gain)
    assert strict.gain_ci is not None and loose.gain_ci is not None
    assert strict.gain_ci[0] < loose.gain_ci[0] <= loose.gain_ci[1] < strict.gain_ci[1]


def test_candidates_strategy_decides_what_is_measured() -> None:
    """An explicit strategy measures exactly native and its sizes."""
    d = chunktune.resolve_sync(plateau(), policy=base(candidates=ExplicitCandidates(sizes=(3, 9))))
    assert set(d.timings) == {None, 3, 9}


def test_cache_enabled_false_stores_nothing(isolated: Path) -> None:
    """[cache] enabled = false measures every time and writes no file."""
    s = settings(enabled=False)
    w = plateau()
    chunktune.resolve_sync(w, settings=s)
    assert chunktune.resolve_sync(w, settings=s).source == "benchmark"
    assert not (isolated / "cache.json").exists()


def test_cache_path_and_format(isolated: Path) -> None:
    """[cache] path picks the file and format = toml writes TOML whatever the suffix."""
    target = isolated / "elsewhere" / "decisions.dat"
    chunktune.resolve_sync(plateau(), settings=settings(path=str(target), format="toml"))
    import tomllib

    assert tomllib.loads(target.read_text())["schema"] == 1
    with pytest.raises(json.JSONDecodeError):
        json.loads(target.read_text())


@pytest.mark.parametrize(("mode", "printed"), [("always", True), ("never", False)])
def test_log_stderr_mode(
    mode: StderrMode, printed: bool, capsys: pytest.CaptureFixture[str]
) -> None:
    """[log] stderr = always prints the decision line; never keeps stderr quiet."""
    s = attrs.evolve(load_settings(), log=chunktune.LogSettings(stderr=mode))
    chunktune.resolve_sync(plateau(), settings=s, policy="quick")
    assert ("[chunktune] chunk_size=" in capsys.readouterr().err) is printed


@pytest.mark.parametrize(("mode", "lines"), [("auto", 1), ("always", 3)])
def test_a_cached_answer_is_told_on_stderr_once_per_process(
    isolated: Path, mode: StderrMode, lines: int, capsys: pytest.CaptureFixture[str]
) -> None:
    """auto: a sweep's line, then its key's hits quietly; always: every resolve's line."""
    s = attrs.evolve(load_settings(), log=chunktune.LogSettings(stderr=mode))
    sources = [chunktune.resolve_sync(plateau(seed=7), settings=s).source for _ in range(3)]
    assert sources == ["benchmark", "cache", "cache"]
    assert capsys.readouterr().err.count("[chunktune] chunk_size=") == lines


@pytest.mark.parametrize("mode", ["auto", "always"])
def test_with_no_stderr_the_decision_line_stays_out_of_stdout(
    mode: StderrMode, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """sys.stderr None (`2>&-`, pythonw): the line is dropped, not printed into stdout."""
    monkeypatch.setattr(sys, "stderr", None)
    s = attrs.evolve(load_settings(), log=chunktune.LogSettings(stderr=mode))
    assert chunktune.resolve_sync(plateau(), settings=s, policy="quick").source == "benchmark"
    assert capsys.readouterr().out == ""


def test_log_auto_uses_logging_when_configured(
    caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    """With INFO logging enabled the decision goes to the chunktune logger, not stderr."""
    with caplog.at_level(logging.INFO, logger="chunktune"):
        chunktune.resolve_sync(plateau(), policy="quick")
    assert "chunk_size=" in caplog.text
    assert "[chunktune]" not in capsys.readouterr().err


@pytest.mark.parametrize("mode", ["auto", "never"])
def test_under_logging_a_cached_answer_is_logged_at_info_once_per_process(
    isolated: Path, mode: StderrMode, caplog: pytest.LogCaptureFixture
) -> None:
    """INFO logging hears a sweep's line, then its key's hits at DEBUG, as stderr hears them."""
    s = attrs.evolve(load_settings(), log=chunktune.LogSettings(stderr=mode))
    caplog.set_level(logging.DEBUG, logger="chunktune")
    sources = [chunktune.resolve_sync(plateau(seed=8), settings=s).source for _ in range(3)]
    assert sources == ["benchmark", "cache", "cache"]
    levels = [r.levelno for r in caplog.records if "chunk_size=" in r.getMessage()]
    assert levels == [logging.INFO, logging.DEBUG, logging.DEBUG]


class RoundDrift:
    """A machine whose speed jumps by up to 40% between rounds of the sweep, with 1% jitter."""

    num_envs, nthread = 512, 8

    def __init__(self) -> None:
        self.rng = np.random.default_rng(7)
        self.calls = 0
        self.factor = 1.0

    def signature(self) -> dict[str, str]:
        return {"kind": "round-drift"}

    def run(self, chunk_size: int | None) -> float:
        if self.calls % 3 == 0:  # native + 2 candidates: one round every 3 calls
            self.factor = float(self.rng.uniform(0.8, 1.4))
        self.calls += 1
        base = {None: 1.0, 4: 0.90, 8: 0.95}[chunk_size]
        return base * self.factor * float(np.exp(self.rng.normal(0.0, 0.01)))


def test_paired_cancels_what_the_machine_did_each_round() -> None:
    """Paired by round, a 10% win shows through 40% swings; unpaired it drowns in them."""
    common = dict(
        prime=0,
        race=False,
        early_stop=False,
        max_rounds=10,
        min_rounds=10,
        confirm=False,  # judge the race's own evidence
        confidence_z=2.0,
        candidates=ExplicitCandidates(sizes=(4, 8)),
    )
    paired = chunktune.resolve_sync(RoundDrift(), policy=base(paired=True, **common))
    plain = chunktune.resolve_sync(
        RoundDrift(),
        policy=base(paired=False, **common),
        refresh=True,
    )
    assert paired.chunk_size == 4
    assert plain.chunk_size is None and "within the noise" in plain.reason
