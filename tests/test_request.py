"""Decisions made from a request: what is worth caching, and what is said of them."""

from __future__ import annotations

import io
import logging
import uuid
from typing import Literal

import attrs
import pytest

from chunktune import CacheEntry, Decision, LogSettings, load_settings
from chunktune._probe import SweepResult
from chunktune._report import report, say
from chunktune._request import (
    Request,
    entry_decision,
    measured_decision,
    pick_policy,
    worth_storing,
)
from chunktune._select import Choice
from chunktune._settings import StderrMode
from chunktune.sim import SimulatedWorkload


def test_a_decision_that_timed_native_alone_is_not_worth_storing() -> None:
    """Only a decision that timed a candidate is evidence to cache; native's time alone is not."""
    alone = Decision(
        chunk_size=None, native_chunk=12, source="benchmark", reason="r", timings={None: 0.1}
    )
    assert not worth_storing(alone)
    assert worth_storing(attrs.evolve(alone, timings={None: 0.1, 8: 0.09}))


def test_auto_says_a_key_s_cached_decision_on_stderr_once(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Under stderr "auto" a key's first cache hit is written to stderr, its later ones not."""
    settings = load_settings()
    assert settings.log.stderr == "auto"
    hit = Decision(
        chunk_size=8, native_chunk=12, source="cache", reason="cached", key=uuid.uuid4().hex
    )
    for _ in range(3):
        report(hit, settings)
    assert capsys.readouterr().err.count("[chunktune] chunk_size=8") == 1


def swept(
    *,
    budget_s: float,
    raced_out: dict[int | None, int],
    gain: float = 0.0,
    gain_ci: tuple[float, float] | None = None,
    elapsed_s: float | None = None,
) -> Decision:
    """The decision of a partial balanced sweep that ended with ``budget_s``, native kept,
    ``elapsed_s`` (default: ``budget_s``) after it began."""
    settings = load_settings()
    policy = settings.get_policy("balanced")
    req = Request(
        workload=SimulatedWorkload.from_layout("uniform", num_envs=64, nthread=2),
        num_envs=64,
        nthread=2,
        native=12,
        policy=policy,
        policy_name="balanced",
        settings=settings,
        refresh=False,
        on_progress=None,
        settles=False,
    )
    result = SweepResult(
        samples={None: (0.1, 0.1), 1: (0.3,), 4: (0.2,)},
        estimates={None: 0.1, 1: 0.3, 4: 0.2},
        raced_out=raced_out,
        rounds=2,
        probe_seconds=0.7,
        elapsed_s=budget_s if elapsed_s is None else elapsed_s,
        partial=True,
        stop="budget",
        sigma=0.05,
        choice=Choice(None, None, (), "kept the native chunk 12: no candidate measured faster"),
        budget_s=budget_s,
        gain=gain,
        gain_ci=gain_ci,
    )
    return measured_decision(req, result, "k" * 32)


def test_a_partial_sweep_names_the_budget_that_ended_it() -> None:
    """Cut at the policy's own budget, a sweep names that budget; past it, the stretched one."""
    budget = load_settings().get_policy("balanced").time_budget_s
    plain = swept(budget_s=budget, raced_out={})
    assert plain.reason.endswith(f"(partial: the {budget:g} s budget ended the sweep)")
    stretched = swept(budget_s=2 * budget, raced_out={})
    assert stretched.reason.endswith("(partial: the stretched budget ended the sweep)")


def test_a_partial_sweep_that_ended_before_its_budget_does_not_say_the_budget_ended_it() -> None:
    """Cut at the race's share and stopped at half its budget, a sweep does not blame the budget."""
    budget = load_settings().get_policy("balanced").time_budget_s
    early = swept(budget_s=budget, raced_out={}, elapsed_s=budget / 2)
    assert "budget ended the sweep" not in early.reason
    assert early.reason.endswith(
        f"(partial: the race's share of the {budget:g} s budget cut its last round short)"
    )


def test_a_decision_lists_size_1_among_the_sizes_raced_out() -> None:
    """raced_out holds each candidate the race dropped, 1 among them, in order."""
    assert swept(budget_s=10.0, raced_out={4: 1, 1: 1}).raced_out == (1, 4)


def test_a_hit_on_an_entry_with_no_policy_name_calls_it_earlier() -> None:
    """A cached entry that names no policy reads as 'cached earlier decision', not a blank."""
    stored = CacheEntry(chunk_size=8, native_chunk=12, reason="8 was faster", policy="")
    hit = entry_decision(stored, "k" * 32, 12)
    assert hit.reason == "cached earlier decision: 8 was faster"


def test_a_policy_object_is_named_custom() -> None:
    """A Policy passed as an object, not a name, is called 'custom' in decisions and the cache."""
    settings = load_settings()
    policy = settings.get_policy("quick")
    assert pick_policy(settings, policy) == ("custom", policy)


def test_always_says_a_line_on_stderr_and_not_to_the_logger_too(
    capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    """Under stderr "always" the line goes to stderr only: a logger shown there would repeat it."""
    settings = attrs.evolve(load_settings(), log=LogSettings(stderr="always"))
    with caplog.at_level(logging.INFO, logger="chunktune"):
        say("chunk_size=8", settings)
    assert capsys.readouterr().err == "[chunktune] chunk_size=8\n"
    assert caplog.records == []


class _GoneReader:
    """A stderr whose reader has gone: every write is a broken pipe."""

    def write(self, _text: str) -> int:
        raise BrokenPipeError(32, "Broken pipe")

    def flush(self) -> None:
        raise BrokenPipeError(32, "Broken pipe")


@pytest.mark.parametrize("mode", ["always", "auto"])
def test_a_report_to_a_stderr_no_one_reads_never_fails_the_resolve(
    monkeypatch: pytest.MonkeyPatch, mode: StderrMode
) -> None:
    """A one-line report that meets a closed stderr is dropped, not raised into the trainer."""
    settings = attrs.evolve(load_settings(), log=LogSettings(stderr=mode))
    monkeypatch.setattr("sys.stderr", _GoneReader())
    say("chunk_size=8", settings)  # raised BrokenPipeError out of resolve, ending the trainer


def test_a_measured_decision_carries_the_confirmed_gain_and_its_interval() -> None:
    """The gain a sweep confirmed comes into its decision with its confidence interval."""
    decision = swept(budget_s=10.0, raced_out={}, gain=0.05, gain_ci=(0.01, 0.09))
    assert (decision.gain, decision.gain_ci) == (0.05, (0.01, 0.09))


@pytest.mark.parametrize(
    ("level", "err", "logged"),
    [
        pytest.param(logging.INFO, "", ["chunk_size=8"], id="logger-listens"),
        pytest.param(logging.WARNING, "[chunktune] chunk_size=8\n", [], id="logger-silent"),
    ],
)
def test_auto_says_a_line_to_a_listening_chunktune_logger_else_on_stderr(
    level: int,
    err: str,
    logged: list[str],
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Under stderr "auto" a said line goes to the chunktune logger at INFO alone, else stderr."""
    settings = load_settings()
    assert settings.log.stderr == "auto"
    with caplog.at_level(level, logger="chunktune"):
        say("chunk_size=8", settings)
    assert capsys.readouterr().err == err
    assert [r.getMessage() for r in caplog.records] == logged


def test_auto_writes_a_new_sweep_s_decision_for_a_key_already_told(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Under stderr "auto" only cache hits go quiet after the first: a fresh sweep is written."""
    settings = load_settings()
    key = uuid.uuid4().hex
    hit = Decision(chunk_size=8, native_chunk=12, source="cache", reason="cached", key=key)
    report(hit, settings)
    report(attrs.evolve(hit, source="benchmark", reason="measured"), settings)
    err = capsys.readouterr().err
    assert err.count("[chunktune] chunk_size=8") == 2 and "(native=12, benchmark)" in err


def test_auto_counts_a_hit_told_to_a_listening_logger_as_not_yet_on_stderr(
    capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    """A hit that went to the logger alone is written to stderr once the logger stops listening."""
    settings = load_settings()
    hit = Decision(
        chunk_size=8, native_chunk=12, source="cache", reason="cached", key=uuid.uuid4().hex
    )
    with caplog.at_level(logging.INFO, logger="chunktune"):
        report(hit, settings)
    assert capsys.readouterr().err == ""
    report(hit, settings)
    report(hit, settings)
    assert capsys.readouterr().err.count("[chunktune] chunk_size=8") == 1


def test_a_decision_counts_the_samples_each_size_had() -> None:
    """A measured decision's samples are the rounds each size was timed in."""
    assert swept(budget_s=10.0, raced_out={}).samples == {None: 2, 1: 1, 4: 1}


def test_a_report_without_timings_ends_with_its_reason(capsys: pytest.CaptureFixture[str]) -> None:
    """A decision that timed nothing is reported without an empty list of timings after it."""
    settings = attrs.evolve(load_settings(), log=LogSettings(stderr="always"))
    report(Decision(chunk_size=None, native_chunk=12, source="manual", reason="asked"), settings)
    assert capsys.readouterr().err == "[chunktune] chunk_size=native (native=12, manual): asked\n"


def test_a_report_names_the_policy_that_made_the_decision(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The one-line report says which policy decided, before the timings."""
    settings = attrs.evolve(load_settings(), log=LogSettings(stderr="always"))
    d = Decision(chunk_size=8, native_chunk=12, source="cache", reason="cached", policy="quick",
                 timings={None: 0.0418, 8: 0.0396})  # fmt: skip
    report(d, settings)
    assert capsys.readouterr().err == (
        "[chunktune] chunk_size=8 (native=12, cache): cached | policy quick"
        " | native=41.8ms, 8=39.6ms\n"
    )


def test_no_stderr_at_all_says_nothing_into_stdout(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """With sys.stderr None (pythonw, `2>&-`) a report goes nowhere, not to stdout."""
    settings = attrs.evolve(load_settings(), log=LogSettings(stderr="always"))
    monkeypatch.setattr("sys.stderr", None)
    say("chunk_size=8", settings)
    assert capsys.readouterr().out == ""


def test_a_line_on_a_buffered_stderr_is_written_through_at_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A line said to a stderr that buffers whole blocks (redirected) reaches its file at once."""
    settings = attrs.evolve(load_settings(), log=LogSettings(stderr="always"))
    raw = io.BytesIO()
    monkeypatch.setattr("sys.stderr", io.TextIOWrapper(raw, encoding="utf-8"))
    say("chunk_size=8", settings)
    assert raw.getvalue() == b"[chunktune] chunk_size=8\n"


def test_a_report_to_a_closed_stderr_never_fails_the_resolve(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A stderr the program closed (writing raises ValueError) drops the line, raises nothing."""
    closed = io.StringIO()
    closed.close()
    monkeypatch.setattr("sys.stderr", closed)
    say("chunk_size=8", attrs.evolve(load_settings(), log=LogSettings(stderr="always")))


class _CtrlC:
    """A stderr that Ctrl-C interrupts mid-write."""

    def write(self, _text: str) -> int:
        raise KeyboardInterrupt

    def flush(self) -> None:
        raise KeyboardInterrupt


def test_ctrl_c_while_a_decision_is_reported_reaches_the_trainer(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Ctrl-C landing in a report's write is raised on, never logged as a bug and swallowed."""
    settings = attrs.evolve(load_settings(), log=LogSettings(stderr="always"))
    monkeypatch.setattr("sys.stderr", _CtrlC())
    with caplog.at_level(logging.WARNING, logger="chunktune"), pytest.raises(KeyboardInterrupt):
        report(Decision(chunk_size=8, native_chunk=12, source="cache", reason="cached"), settings)
    assert caplog.records == []


@pytest.mark.parametrize("mode", ["never", "auto"])
def test_a_report_no_one_reads_is_never_formatted(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
    mode: Literal["auto", "always", "never"],
) -> None:
    """With no listening logger, "never" and "auto"'s repeated hit leave the line unformatted."""
    settings = attrs.evolve(load_settings(), log=LogSettings(stderr=mode))
    hit = Decision(
        chunk_size=8, native_chunk=12, source="cache", reason="cached", key=uuid.uuid4().hex
    )
    with caplog.at_level(logging.WARNING, logger="chunktune"):
        report(hit, settings)  # "auto": the first hit is told
        monkeypatch.setattr("chunktune._report.headline", _unformattable)
        report(hit, settings)
    assert caplog.records == []  # formatting it would have raised, logged as a bug
    assert capsys.readouterr().err == ("" if mode == "never" else _HIT_LINE)


_HIT_LINE = "[chunktune] chunk_size=8 (native=12, cache): cached\n"


def _unformattable(_decision: Decision) -> str:
    raise AssertionError("a line no one reads was formatted")
