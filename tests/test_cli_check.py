"""Tests of ``chunktune check``: a cached size re-timed against native over a span of time.

The workload is modeled (its seconds are returned, not timed), so each verdict is
deterministic and a check of many rounds takes milliseconds.
"""

from __future__ import annotations

import json
import numbers
import random
import shlex
from pathlib import Path
from typing import Any

import pytest

from chunktune._cache import DecisionCache
from chunktune._cache_entry import CacheEntry
from chunktune._cli import _tune_cmd, main
from chunktune._errors import CacheError
from chunktune._modeled import ModeledTime
from chunktune._recheck import MIN_ROUNDS, Rechecked, recheck

# quick, cut down: a sweep of the modeled workload takes milliseconds
FAST_CONFIG = """
policy = "fast"

[policies.fast]
extends = "quick"
time_budget_s = 2.0
max_rounds = 3
"""

SHAPE = ("--num-envs", "64", "--nthread", "2")  # native 3
QUICK = ("--seconds", "0.01", "-q")
RESULT_KEYS = {
    "key",
    "chunk_size",
    "native_chunk",
    "rounds",
    "seconds",
    "gain",
    "gain_ci",
    "verdict",
    "written",
}


class _Unreadable:
    """A real number (registered as one) whose ``__float__`` raises: the workload's code."""

    def __float__(self) -> float:
        raise RuntimeError("its __float__ failed")


numbers.Real.register(_Unreadable)


class _Modeled:
    """64 envs on 2 threads whose every size but native's is ``faster`` faster (negative:
    slower), with 1% of deterministic jitter; one signature, whatever ``faster`` is."""

    num_envs = 64
    nthread = 2

    def __init__(
        self,
        faster: float,
        *,
        fail_at: int | None = None,
        stop_at: int | None = None,
        unreadable_at: int | None = None,
    ):
        self.faster = faster
        self.fail_at, self.stop_at, self.unreadable_at = fail_at, stop_at, unreadable_at
        self.calls: list[int | None] = []
        self.rng = random.Random(0)

    def signature(self) -> dict[str, Any]:
        return {"kind": "check-test"}

    def run(self, chunk_size: int | None) -> float:
        self.calls.append(chunk_size)
        if len(self.calls) == self.fail_at:
            raise RuntimeError("the simulation exploded")
        if len(self.calls) == self.stop_at:
            raise KeyboardInterrupt
        if len(self.calls) == self.unreadable_at:
            return _Unreadable()  # type: ignore[return-value]
        scale = 1.0 if chunk_size in (None, 3) else 1.0 - self.faster
        return 0.01 * scale * (1.0 + self.rng.uniform(-0.01, 0.01))


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    """A fast policy as the settings file, and the cache and sweep lock in tmp_path."""
    config = tmp_path / "fast.toml"
    config.write_text(FAST_CONFIG)
    paths = {"config": config, "cache": tmp_path / "cache.json"}
    monkeypatch.setenv("CHUNKTUNE_CONFIG", str(config))
    monkeypatch.setenv("CHUNKTUNE_CACHE", str(paths["cache"]))
    monkeypatch.setenv("CHUNKTUNE_SWEEP_LOCK", str(tmp_path / "sweep.lock"))
    return paths


def _serve(monkeypatch: pytest.MonkeyPatch, workload: _Modeled | _Paced) -> None:
    """Make ``workload`` what tune and check build from the command line."""
    monkeypatch.setattr(_tune_cmd, "load_workload", lambda args, nthread: (workload, "modeled"))


def _tuned(
    env: dict[str, Path], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> dict[str, Any]:
    """Tune the modeled workload whose sizes are 20% faster: a size other than native cached."""
    _serve(monkeypatch, _Modeled(0.2))
    assert main(["tune", *SHAPE, "--json", "-q"]) == 0
    decision: dict[str, Any] = json.loads(capsys.readouterr().out)
    assert decision["chunk_size"] not in (None, 3), decision
    return decision


def _other() -> CacheEntry:
    return CacheEntry(chunk_size=4, native_chunk=3, reason="another job's", timings={None: 0.01})


def test_a_size_still_faster_holds_and_its_entry_is_kept(
    env: dict[str, Path], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A cached size that still beats native: "holds", exit 0, the cache file unchanged."""
    decision = _tuned(env, monkeypatch, capsys)
    before = env["cache"].read_bytes()
    _serve(monkeypatch, _Modeled(0.2))
    assert main(["check", *SHAPE, *QUICK]) == 0
    out = capsys.readouterr().out
    assert f"cached: chunk {decision['chunk_size']} (native 3)" in out
    assert "holds: still measurably faster than native" in out.splitlines()
    assert "kept: the entry is unchanged" in out
    assert env["cache"].read_bytes() == before


def test_a_size_no_longer_faster_is_replaced_by_native_and_no_other_entry_changes(
    env: dict[str, Path], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A size now 1% slower: native replaces its entry (reason: the figures), others stay."""
    decision = _tuned(env, monkeypatch, capsys)
    cache = DecisionCache(env["cache"])
    assert cache.update({"other.job": _other()})
    others = {k: e for k, e in cache.entries().items() if k != decision["key"]}
    slower = _Modeled(-0.01)
    _serve(monkeypatch, slower)
    assert main(["check", *SHAPE, *QUICK, "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert set(result) == RESULT_KEYS
    assert (result["verdict"], result["written"]) == ("does not hold", True)
    assert result["key"] == decision["key"]
    assert result["rounds"] >= MIN_ROUNDS and result["seconds"] >= 0.01
    assert result["gain"] == pytest.approx(-0.01, abs=0.002)
    low, high = result["gain_ci"]
    assert low <= result["gain"] <= high < 0
    entries = DecisionCache(env["cache"]).entries()
    native = entries.pop(decision["key"])
    assert entries == others
    assert native.chunk_size is None
    assert native.samples == {None: result["rounds"], decision["chunk_size"]: result["rounds"]}
    over = f"{result['seconds']:.2g}"  # a check under 10 s gives two figures, not "0 s"
    assert native.reason.startswith(f"re-checked over {over} s ({result['rounds']} paired rounds)")
    assert native.reason.endswith("against native, not measurably faster; native kept")
    _serve(monkeypatch, _Modeled(0.2))  # a faster pool now: the entry, not a sweep, answers
    assert main(["tune", *SHAPE, "--json", "-q"]) == 0
    again = json.loads(capsys.readouterr().out)
    assert (again["source"], again["chunk_size"]) == ("cache", None)


def test_dry_run_measures_but_writes_nothing(
    env: dict[str, Path], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """--dry-run: the verdict "does not hold" is told, and the cache file is untouched."""
    _tuned(env, monkeypatch, capsys)
    before = env["cache"].read_bytes()
    _serve(monkeypatch, _Modeled(-0.01))
    assert main(["check", *SHAPE, *QUICK, "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "does not hold: not measurably faster than native" in out
    assert "dry run: nothing written" in out
    assert env["cache"].read_bytes() == before


def test_nothing_cached_exits_1_naming_the_tune_that_caches_it(
    env: dict[str, Path], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """No entry for the key: exit 1, one line naming the tune with the same arguments."""
    workload = _Modeled(0.2)
    _serve(monkeypatch, workload)
    assert main(["check", *SHAPE, *QUICK, "--policy", "quick"]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert len(err.splitlines()) == 1
    assert "nothing cached for modeled, policy quick" in err
    assert "`chunktune tune --num-envs 64 --nthread 2 --policy quick` tunes it" in err
    assert workload.calls == []


def test_a_cached_native_is_not_measured(
    env: dict[str, Path], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Native cached: one line, exit 0, no call; --json: its key, no verdict, nothing written."""
    _serve(monkeypatch, _Modeled(-0.2))  # every size slower: tune keeps native
    assert main(["tune", *SHAPE, "--json", "-q"]) == 0
    tuned = json.loads(capsys.readouterr().out)
    assert tuned["chunk_size"] is None
    workload = _Modeled(0.2)
    _serve(monkeypatch, workload)
    assert main(["check", *SHAPE, *QUICK, "--json"]) == 0
    out, err = capsys.readouterr()
    result = json.loads(out)
    assert set(result) == RESULT_KEYS
    assert (result["verdict"], result["written"], result["rounds"]) == (None, False, 0)
    assert (result["key"], result["chunk_size"], result["native_chunk"]) == (tuned["key"], None, 3)
    assert "cached: the native chunk 3" in err and "nothing to check" in err
    assert workload.calls == []


@pytest.mark.parametrize("seconds", ["0", "-1", "nan", "inf", "soon"])
def test_a_bad_seconds_is_one_line_and_exit_2(
    env: dict[str, Path], capsys: pytest.CaptureFixture[str], seconds: str
) -> None:
    """--seconds must be a finite number > 0: else exit 2 and one line naming it."""
    assert main(["check", *SHAPE, "--seconds", seconds]) == 2
    err = capsys.readouterr().err
    assert err.splitlines() == [
        f'chunktune: error: --seconds "{seconds}": expected a finite number of seconds > 0'
    ]


@pytest.mark.parametrize(
    ("fault", "status", "said"),
    [
        pytest.param({"fail_at": 9}, 1, "the workload failed while re-checking (RuntimeError: "
                     "the simulation exploded); nothing was written", id="workload-fails"),
        pytest.param({"stop_at": 9}, 130, "interrupted: the re-check stopped and nothing was "
                     "written", id="ctrl-c"),
        pytest.param({"unreadable_at": 9}, 1, "the workload failed while re-checking "
                     "(RuntimeError: its __float__ failed); nothing was written", id="unreadable"),
    ],
)  # fmt: skip
def test_a_check_that_does_not_finish_writes_nothing(
    env: dict[str, Path],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    fault: dict[str, int],
    status: int,
    said: str,
) -> None:
    """A workload (its run or its number) failing mid-check exits 1, a Ctrl-C 130; no write."""
    _tuned(env, monkeypatch, capsys)
    before = env["cache"].read_bytes()
    _serve(monkeypatch, _Modeled(-0.01, **fault))
    assert main(["check", *SHAPE, *QUICK]) == status
    out, err = capsys.readouterr()
    assert out == ""
    assert said in err and "Traceback" not in err
    assert env["cache"].read_bytes() == before


class _Unsigned(_Modeled):
    """A workload whose ``signature()`` fails: it cannot be keyed."""

    def signature(self) -> dict[str, Any]:
        raise RuntimeError("no signature today")


class _NanForTheSize(_Modeled):
    """Native's seconds as ``_Modeled`` gives them; NaN for any other size."""

    def run(self, chunk_size: int | None) -> float:
        seconds = super().run(chunk_size)
        return seconds if chunk_size in (None, 3) else float("nan")


def test_a_bad_value_from_the_recheck_names_the_call_that_returned_it(
    env: dict[str, Path], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A re-check whose run(C) returns NaN exits 1 naming run(C) and the value; nothing written."""
    chunk = _tuned(env, monkeypatch, capsys)["chunk_size"]
    before = env["cache"].read_bytes()
    _serve(monkeypatch, _NanForTheSize(0.2))
    assert main(["check", *SHAPE, *QUICK]) == 1
    err = capsys.readouterr().err
    assert (
        f"the workload failed while re-checking (WorkloadError: run({chunk}) returned nan; "
        "expected a positive number of seconds"
    ) in err
    assert "Traceback" not in err
    assert env["cache"].read_bytes() == before


@pytest.mark.parametrize(
    ("case", "key_made"),
    [
        pytest.param("nothing-cached", True, id="nothing-cached"),
        pytest.param("workload-fails", True, id="workload-fails"),
        pytest.param("signature-fails", False, id="signature-fails"),
    ],
)
def test_json_prints_the_object_on_every_exit_1(
    env: dict[str, Path],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    case: str,
    key_made: bool,
) -> None:
    """--json that exits 1 still prints one object (no verdict, nothing written), as tune's."""
    if case == "workload-fails":
        _tuned(env, monkeypatch, capsys)
    workload = _Unsigned(0.2) if case == "signature-fails" else _Modeled(0.2, fail_at=9)
    _serve(monkeypatch, workload)
    assert main(["check", *SHAPE, *QUICK, "--json"]) == 1
    out, err = capsys.readouterr()
    result = json.loads(out)
    assert set(result) == RESULT_KEYS
    assert (result["verdict"], result["written"], result["rounds"]) == (None, False, 0)
    assert result["native_chunk"] == 3
    # no key made is JSON null, never a string a script could take for a key
    assert (result["key"] is not None) == key_made
    assert result["key"] is None or len(result["key"].split(".")) == 2
    assert "chunktune: error:" in err and "Traceback" not in err


def test_a_cache_that_cannot_be_read_is_exit_2_not_nothing_cached(
    env: dict[str, Path], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A cache path that cannot be read (a folder here): exit 2 naming it; no tune suggested."""
    env["cache"].mkdir()
    workload = _Modeled(0.2)
    _serve(monkeypatch, workload)
    assert main(["check", *SHAPE, *QUICK, "--json"]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.splitlines() == [
        f"chunktune: error: cannot read the cache {env['cache']}: it is no regular file "
        "(a directory, device, FIFO or socket)"
    ]
    assert workload.calls == []


def test_recheck_warms_each_size_once_then_pairs_them_in_random_order() -> None:
    """recheck: one warm-up call each, then MIN_ROUNDS rounds at least, in both orders."""
    workload = _Modeled(0.1)
    seen: list[int] = []
    got = recheck(
        workload, 8, seconds=1e-9, rng=random.Random(1), on_round=lambda r, s: seen.append(r)
    )
    assert workload.calls[:2] == [None, 8]
    rounds = [tuple(workload.calls[k : k + 2]) for k in range(2, len(workload.calls), 2)]
    assert got.rounds == len(rounds) == MIN_ROUNDS == len(seen)
    assert set(rounds) == {(None, 8), (8, None)}
    assert got.span.gain == pytest.approx(0.1, abs=0.01)


def test_swap_writes_only_while_the_entries_are_as_they_were(tmp_path: Path) -> None:
    """DecisionCache.swap: an entry changed since it was read refuses the write; else one key."""
    cache = DecisionCache(tmp_path / "cache.json")
    assert cache.update({"a.p": _other(), "b.p": _other()})
    seen, b = cache.get("a.p"), cache.get("b.p")
    native = CacheEntry(chunk_size=None, native_chunk=3, reason="native", timings={None: 0.01})
    assert cache.update({"a.p": CacheEntry(chunk_size=8, native_chunk=3, reason="re-tuned")})
    before = cache.path.read_bytes()
    assert not cache.swap("a.p", native, expected={"a.p": seen})
    assert not cache.swap("a.p", native, expected={"c.p": None, "b.p": None})
    assert cache.path.read_bytes() == before
    now = cache.get("a.p")
    assert cache.swap("a.p", native, expected={"a.p": now, "c.p": None})
    entries = cache.entries()
    assert entries["a.p"].chunk_size is None and entries["b.p"] == b


def test_swap_of_an_entry_that_would_not_read_back_raises(tmp_path: Path) -> None:
    """DecisionCache.swap: an invalid entry is a CacheError, nothing written."""
    cache = DecisionCache(tmp_path / "cache.json")
    bad = CacheEntry(chunk_size=0, native_chunk=3, reason="zero")
    with pytest.raises(CacheError, match="invalid entry"):
        cache.swap("a.p", bad, expected={})
    assert not cache.path.exists()


def test_a_stronger_policys_entry_that_does_not_hold_is_left_native_cached_for_this_one(
    env: dict[str, Path], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A stronger policy's entry answered: native cached under this policy's key, it left."""
    strong_policy = '\n[policies.strong]\nextends = "fast"\nmax_rounds = 6\n'
    env["config"].write_text(FAST_CONFIG + strong_policy)
    _serve(monkeypatch, _Modeled(0.2))
    assert main(["tune", *SHAPE, "--policy", "strong", "--json", "-q"]) == 0
    strong = json.loads(capsys.readouterr().out)
    _serve(monkeypatch, _Modeled(-0.01))
    assert main(["check", *SHAPE, *QUICK]) == 0
    out = capsys.readouterr().out
    assert f"cache key {strong['key']}" in out
    entries = DecisionCache(env["cache"]).entries()
    (own,) = (k for k in entries if k != strong["key"])
    assert entries[strong["key"]].chunk_size == strong["chunk_size"]
    assert entries[own].chunk_size is None
    assert f"written: the native chunk 3 is cached for policy fast (key {own})" in out
    assert f"the entry of policy strong ({strong['key']}) is left as it is" in out


@pytest.mark.parametrize(
    ("elapsed_s", "said"),
    [
        pytest.param(0.456, "0.46 s", id="under-a-second"),
        pytest.param(9.2, "9.2 s", id="under-ten"),
        pytest.param(61.4, "61 s", id="a-minute"),
    ],
)
def test_the_summary_tells_a_short_span_in_two_figures(elapsed_s: float, said: str) -> None:
    """Rechecked.summary: seconds whole from 10 s, two figures under (never "over 0 s")."""
    checked = Rechecked(22, (1.0,) * 16, (0.98,) * 16, elapsed_s)
    assert checked.summary().startswith(f"re-checked over {said} (16 paired rounds): chunk 22")


class _Paced(ModeledTime):
    """A modeled workload whose every call takes 0.25 s of its own clock (exact in binary)."""

    num_envs = 64
    nthread = 2

    def __init__(self) -> None:
        self.elapsed_s = 0.0
        self.calls = 0

    def signature(self) -> dict[str, Any]:
        return {"kind": "paced"}

    def run(self, chunk_size: int | None) -> float:
        self.calls += 1
        self.elapsed_s += 0.25
        return 0.25

    def clock(self) -> float:
        return self.elapsed_s


@pytest.mark.parametrize(
    ("min_rounds", "seconds", "rounds"),
    [
        # 0.5 s a round: 20 rounds reach 10 s exactly, past MIN_ROUNDS
        pytest.param(MIN_ROUNDS, 10.0, 20, id="seconds-past-min-rounds"),
        pytest.param(0, 1.0, 2, id="seconds-alone"),
    ],
)
def test_recheck_measures_until_the_seconds_pass_on_a_modeled_workloads_clock(
    min_rounds: int, seconds: float, rounds: int
) -> None:
    """recheck: rounds until the clock passes ``seconds`` past the warm-ups; on_round hears each."""
    workload = _Paced()
    seen: list[tuple[int, float]] = []
    got = recheck(
        workload,
        8,
        seconds=seconds,
        min_rounds=min_rounds,
        rng=random.Random(0),
        on_round=lambda r, s: seen.append((r, s)),
    )
    assert (got.rounds, got.elapsed_s) == (rounds, seconds)
    assert workload.calls == 2 + 2 * rounds  # the warm-ups not counted in the seconds
    assert seen == [(k, 0.5 * k) for k in range(1, rounds + 1)]


def test_recheck_needs_no_progress_callback_nor_random_source() -> None:
    """recheck with neither on_round nor rng: MIN_ROUNDS rounds, then it returns."""
    workload = _Modeled(0.1, fail_at=10 * MIN_ROUNDS)  # a recheck that never ended would fail
    got = recheck(workload, 8, seconds=1e-9)
    assert got.rounds == MIN_ROUNDS
    assert len(workload.calls) == 2 + 2 * MIN_ROUNDS


@pytest.mark.parametrize(
    ("chunk_s", "said"),
    [
        pytest.param((0.97, 0.99), "measured +2.0% (+1.5%..+2.6%)", id="faster"),
        pytest.param((0.995, 1.015), "measured -0.5% (-1.0%..+0.1%)", id="interval-over-0"),
    ],
)
def test_the_summary_gives_the_gain_and_its_interval_as_signed_percentages(
    chunk_s: tuple[float, float], said: str
) -> None:
    """Rechecked.summary: the gain and both ends of its interval, each signed, one decimal."""
    checked = Rechecked(22, (1.0,) * 16, chunk_s * 8, 61.4)
    assert checked.summary() == (
        f"re-checked over 61 s (16 paired rounds): chunk 22 {said} against native"
    )


class _PacedCheck(_Paced):
    """The check-test workload (its signature), every size 20% faster than native, paced."""

    def signature(self) -> dict[str, Any]:
        return {"kind": "check-test"}

    def run(self, chunk_size: int | None) -> float:
        super().run(chunk_size)
        return 0.2 if chunk_size not in (None, 3) else 0.25


def test_a_check_tells_its_rounds_every_five_seconds_and_its_verdict_in_lines(
    env: dict[str, Path], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Not quiet: what it re-checks, a round line each 5 s of the clock, then the verdict."""
    decision = _tuned(env, monkeypatch, capsys)
    _serve(monkeypatch, _PacedCheck())
    assert main(["check", *SHAPE, "--seconds", "12"]) == 0
    out, err = capsys.readouterr()
    chunk = decision["chunk_size"]
    assert err.splitlines() == [
        f"chunktune: re-checking chunk {chunk} against native 3: paired rounds for at least "
        f"12 s and {MIN_ROUNDS} rounds",
        "chunktune: round 10: 5 s of 12 s",  # 0.5 s a round on the workload's clock
        "chunktune: round 20: 10 s of 12 s",
    ]
    lines = out.splitlines()
    assert lines[:2] == [
        "modeled; policy fast",
        f"cached: chunk {chunk} (native 3); cache key {decision['key']}",
    ]
    assert lines[2].startswith(f"re-checked over 12 s (24 paired rounds): chunk {chunk} measured")
    assert lines[3:] == [
        "holds: still measurably faster than native",
        "kept: the entry is unchanged",
    ]


@pytest.mark.parametrize("policy", ["off", "nat"], ids=["disabled", "native-only"])
def test_a_policy_that_measures_nothing_has_nothing_to_check(
    env: dict[str, Path],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    policy: str,
) -> None:
    """--policy off, or one whose only size is native's: exit 0, why; --json, key null, native."""
    # native_chunk(64, 2) is 3: "nat" proposes nothing but native for this batch
    env["config"].write_text(
        FAST_CONFIG + '[policies.nat]\nextends = "quick"\n'
        '[policies.nat.candidates]\nstrategy = "explicit"\nsizes = [3]\n'
    )
    workload = _Modeled(0.2)
    _serve(monkeypatch, workload)
    assert main(["check", *SHAPE, *QUICK, "--policy", policy, "--json"]) == 0
    out, err = capsys.readouterr()
    result = json.loads(out)
    assert result == {
        "key": None,
        "chunk_size": None,
        "native_chunk": 3,
        "rounds": 0,
        "seconds": 0.0,
        "gain": 0.0,
        "gain_ci": None,
        "verdict": None,
        "written": False,
    }
    assert err.startswith("chunktune: nothing to check: ")
    assert workload.calls == []


def test_a_disabled_cache_is_a_settings_error(
    env: dict[str, Path], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """[cache] enabled = false: exit 2, one line naming the setting and its file."""
    env["config"].write_text(FAST_CONFIG + "\n[cache]\nenabled = false\n")
    _serve(monkeypatch, _Modeled(0.2))
    assert main(["check", *SHAPE, *QUICK]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("chunktune: error: the cache is disabled ([cache] enabled = false in ")
    assert "fast.toml" in line and line.endswith("); nothing to check")


def test_nothing_cached_names_the_tune_with_every_argument_given(
    env: dict[str, Path], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The tune that caches the entry names the model, --nstep and --config as they were given."""
    _serve(monkeypatch, _Modeled(0.2))
    config = str(env["config"])
    args = ["robot.xml", *SHAPE, "--nstep", "5", "--config", config]
    assert main(["check", *args, *QUICK]) == 1
    err = capsys.readouterr().err
    assert f"`chunktune tune {shlex.join(args)}` tunes it" in err
