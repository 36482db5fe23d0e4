"""``chunktune check`` off the plain verdict's path: a failing ``signature()``, the sweep
lock held past the wait, the workload closed, ``--json``'s ``written`` on each way a
check ends, MuJoCo's warnings, and paths that would not print.

The workload is test_cli_check's modeled one: each check takes milliseconds.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import mujoco
import pytest
from test_cli_check import FAST_CONFIG, QUICK, SHAPE, _Modeled, _serve, _tuned, env
from test_cli_check_system import _system

from chunktune._cache import DecisionCache
from chunktune._cache_entry import CacheEntry
from chunktune._cli import _check_cmd, _tune_cmd, main
from chunktune._fingerprint import usable_cpus
from chunktune._recheck import MIN_ROUNDS

__all__ = ["env"]  # the fixture, used by name

_UNSTABLE = "Nan, Inf or huge value in QACC at DOF 0. The simulation is unstable."


class _Closable(_Modeled):
    """The modeled workload with a ``close()`` that counts its calls."""

    def __init__(self, faster: float, **faults: Any) -> None:
        super().__init__(faster, **faults)
        self.closed = 0

    def close(self) -> None:
        self.closed += 1


class _Unsigned(_Closable):
    """A workload whose ``signature()`` raises ``exc``."""

    def __init__(self, exc: Exception) -> None:
        super().__init__(0.2)
        self.exc = exc

    def signature(self) -> dict[str, Any]:
        raise self.exc


class _Retuned(_Modeled):
    """1% slower sizes; at its 5th call another process re-tunes ``key`` to chunk 5."""

    def __init__(self, cache: Path, key: str) -> None:
        super().__init__(-0.01)
        self.cache, self.key = cache, key

    def run(self, chunk_size: int | None) -> float:
        if len(self.calls) == 4:
            retuned = CacheEntry(chunk_size=5, native_chunk=3, reason="re-tuned meanwhile")
            assert DecisionCache(self.cache).update({self.key: retuned})
        return super().run(chunk_size)


class _Warning(_Modeled):
    """A size that still wins, and an unstable model: each call warns through MuJoCo's hook."""

    def run(self, chunk_size: int | None) -> float:
        hook = mujoco.get_mju_user_warning()
        if hook is not None:
            hook(_UNSTABLE)
        return super().run(chunk_size)


def _check_json(capsys: pytest.CaptureFixture[str], *extra: str) -> dict[str, Any]:
    """``check --json`` (exit 0) and the object it printed."""
    assert main(["check", *SHAPE, *QUICK, "--json", *extra]) == 0
    return _result(capsys)


def _result(capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    result: dict[str, Any] = json.loads(capsys.readouterr().out)
    return result


def test_a_failing_signature_is_one_line_exit_1_and_the_workload_closed(
    env: dict[str, Path], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """signature() raising: exit 1, one line naming its error; no call, no file, closed once."""
    workload = _Unsigned(RuntimeError("no model loaded"))
    _serve(monkeypatch, workload)
    assert main(["check", *SHAPE, *QUICK]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert err.splitlines() == [
        "chunktune: error: the workload's signature() failed (RuntimeError: no model loaded); "
        "nothing was checked"
    ]
    assert (workload.calls, workload.closed) == ([], 1)
    assert not env["cache"].exists()


@pytest.mark.parametrize("where", ["identify_and_look", "recheck"])
def test_a_bug_of_chunktunes_is_raised_not_blamed_on_the_workload(
    env: dict[str, Path],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    where: str,
) -> None:
    """A bug of chunktune's while keying or measuring propagates, not blamed on the workload."""
    # a traceback to report, never "the workload failed"; the workload closed all the same
    _tuned(env, monkeypatch, capsys)

    def broken(*args: Any, **kwargs: Any) -> None:
        raise ZeroDivisionError("a bug")

    monkeypatch.setattr(_check_cmd, where, broken)
    workload = _Closable(-0.01)
    _serve(monkeypatch, workload)
    with pytest.raises(ZeroDivisionError, match="a bug"):
        main(["check", *SHAPE, *QUICK])
    assert "failed" not in capsys.readouterr().err
    assert workload.closed == 1


@pytest.mark.parametrize(
    ("limit", "wait_s", "said"),
    [
        pytest.param("", _check_cmd.LOCK_WAIT_S, "600 s", id="no-hard-limit"),
        pytest.param("hard_limit_s = 7.5\n", 7.5, "7.5 s", id="hard-limit"),
    ],
)
def test_a_sweep_holding_the_machine_past_the_wait_is_exit_1_and_nothing_measured(
    env: dict[str, Path],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    limit: str,
    wait_s: float,
    said: str,
) -> None:
    """The sweep lock not got in hard_limit_s (else LOCK_WAIT_S): exit 1, one line, no call."""
    # the line says how long it waited; --json's object says nothing was measured or
    # written, as on every exit 1; the cache file is unchanged
    env["config"].write_text(FAST_CONFIG + limit)
    _tuned(env, monkeypatch, capsys)
    before = env["cache"].read_bytes()
    waited: list[float] = []

    @contextlib.contextmanager
    def busy(wait: float) -> Iterator[bool]:
        waited.append(wait)
        yield False

    monkeypatch.setattr(_check_cmd, "machine_to_ourselves", busy)
    workload = _Closable(-0.01)
    _serve(monkeypatch, workload)
    assert main(["check", *SHAPE, *QUICK, "--json"]) == 1
    out, err = capsys.readouterr()
    result = json.loads(out)
    assert (result["verdict"], result["written"], result["rounds"]) == (None, False, 0)
    assert err.splitlines() == [
        f"chunktune: error: another sweep held the machine for {said}; nothing was checked "
        "(try again when it is done)"
    ]
    assert waited == [wait_s]
    assert (workload.calls, workload.closed) == ([], 1)
    assert env["cache"].read_bytes() == before


def test_a_check_closes_its_workload_once(
    env: dict[str, Path], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A check that measured closes the workload it built, once."""
    _tuned(env, monkeypatch, capsys)
    workload = _Closable(0.2)
    _serve(monkeypatch, workload)
    assert main(["check", *SHAPE, *QUICK]) == 0
    assert workload.calls and workload.closed == 1


def test_json_written_is_false_where_the_entry_holds_or_a_dry_run_leaves_it(
    env: dict[str, Path], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """--json: "written" false for a size that holds, and for a dry run that does not."""
    _tuned(env, monkeypatch, capsys)
    _serve(monkeypatch, _Modeled(0.2))
    held = _check_json(capsys)
    assert (held["verdict"], held["written"]) == ("holds", False)
    _serve(monkeypatch, _Modeled(-0.01))
    dry = _check_json(capsys, "--dry-run")
    assert (dry["verdict"], dry["written"]) == ("does not hold", False)


def test_json_written_is_false_where_another_process_changed_the_entry(
    env: dict[str, Path], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """An entry re-tuned while it was checked: not written, --json says so, the new one stays."""
    decision = _tuned(env, monkeypatch, capsys)
    _serve(monkeypatch, _Retuned(env["cache"], decision["key"]))
    result = _check_json(capsys)
    assert (result["verdict"], result["written"]) == ("does not hold", False)
    assert DecisionCache(env["cache"]).entries()[decision["key"]].chunk_size == 5
    _serve(monkeypatch, _Retuned(env["cache"], decision["key"]))
    assert main(["check", *SHAPE, *QUICK]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == (
        "not written: the entry changed while it was checked (another process re-tuned it?); "
        "it is left as it is"
    )


def test_json_written_is_true_for_native_cached_beside_a_stronger_policys_entry(
    env: dict[str, Path], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A stronger policy's entry that does not hold: native written for this one, --json true."""
    env["config"].write_text(
        FAST_CONFIG + '\n[policies.strong]\nextends = "fast"\nmax_rounds = 6\n'
    )
    _serve(monkeypatch, _Modeled(0.2))
    assert main(["tune", *SHAPE, "--policy", "strong", "--json", "-q"]) == 0
    strong = _result(capsys)
    _serve(monkeypatch, _Modeled(-0.01))
    result = _check_json(capsys)
    assert (result["key"], result["written"]) == (strong["key"], True)
    assert len(DecisionCache(env["cache"]).entries()) == 2


def test_json_written_of_a_system_entry_is_true_unless_a_dry_run(
    env: dict[str, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A system entry that does not hold: --json "written" false on a dry run, else true."""
    _tuned(env, monkeypatch, capsys)
    _system(env, tmp_path, monkeypatch)
    _serve(monkeypatch, _Modeled(-0.01))
    assert _check_json(capsys, "--dry-run")["written"] is False
    assert _check_json(capsys)["written"] is True


def test_a_user_cache_path_that_would_not_print_is_quoted_in_the_system_lines(
    env: dict[str, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A user's cache path with an escape: the system lines spell it as TOML does, never raw."""
    _tuned(env, monkeypatch, capsys)
    _system(env, tmp_path, monkeypatch)
    odd = tmp_path / "user\x1b[2Jcache.json"
    monkeypatch.setenv("CHUNKTUNE_CACHE", str(odd))
    _serve(monkeypatch, _Modeled(-0.01))
    shown = '\\u001B[2Jcache.json"'
    for dry in (["--dry-run"], []):
        assert main(["check", *SHAPE, *QUICK, *dry]) == 0
        out = capsys.readouterr().out
        assert "\x1b" not in out
        assert shown in out and "answers before the read-only system cache" in out
    assert DecisionCache(odd).entries()


def test_a_disabled_caches_settings_file_that_would_not_print_is_quoted(
    env: dict[str, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """[cache] enabled = false in a file named with an escape: the line quotes its name."""
    config = tmp_path / "odd\x1b.toml"
    config.write_text(FAST_CONFIG + "\n[cache]\nenabled = false\n")
    monkeypatch.setenv("CHUNKTUNE_CONFIG", str(config))
    _serve(monkeypatch, _Modeled(0.2))
    assert main(["check", *SHAPE, *QUICK]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert "\x1b" not in line
    assert line.endswith('odd\\u001B.toml"); nothing to check')


def test_mujocos_warnings_while_re_checking_are_told_in_one_line(
    env: dict[str, Path], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each call warning through MuJoCo's hook: one line, "while re-checking", the first one."""
    _tuned(env, monkeypatch, capsys)
    workload = _Warning(0.2)
    _serve(monkeypatch, workload)
    assert main(["check", *SHAPE, *QUICK]) == 0
    err = capsys.readouterr().err.splitlines()
    assert err == [
        f"chunktune: warning: MuJoCo warned {len(workload.calls)} times while re-checking "
        f"(first: {_UNSTABLE}); the re-check timed the model as it behaves, warnings and all"
    ]


def test_without_nthread_the_workload_gets_the_usable_cpus(
    env: dict[str, Path], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """No --nthread: the workload is built for the CPUs this process may use."""
    built: list[int] = []

    def load(args: Any, nthread: int) -> tuple[_Modeled, str]:
        built.append(nthread)
        return _Modeled(0.2), "modeled"

    monkeypatch.setattr(_tune_cmd, "load_workload", load)
    main(["check", "--num-envs", "4096", *QUICK])
    assert built == [usable_cpus()]
    capsys.readouterr()


def test_too_many_threads_is_one_line_and_exit_2(
    env: dict[str, Path], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """--nthread past what a pool can count: exit 2, one line naming it, nothing built."""
    workload = _Closable(0.2)
    _serve(monkeypatch, workload)
    assert main(["check", "--num-envs", "64", "--nthread", str(2**31), *QUICK]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(f"chunktune: error: --nthread {2**31}: expected at most ")
    assert workload.closed == 0


def test_a_decision_this_process_remembers_does_not_stand_for_the_cache(
    env: dict[str, Path], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A hit this process remembers from a tune: check still reads the cache and measures."""
    # in_memory is asked with refresh=True; a remembered answer would be "nothing to check"
    _tuned(env, monkeypatch, capsys)
    workload = _Modeled(0.2)
    _serve(monkeypatch, workload)
    assert main(["tune", *SHAPE, "--json", "-q"]) == 0
    assert _result(capsys)["source"] == "cache"
    assert main(["check", *SHAPE, *QUICK]) == 0
    assert "holds: still measurably faster than native" in capsys.readouterr().out
    assert len(workload.calls) >= 2 + 2 * MIN_ROUNDS
