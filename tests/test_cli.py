"""Tests of the command line: ``chunktune tune|cache|policy``, in-process and as a subprocess."""

from __future__ import annotations

import ast
import contextlib
import errno
import io
import json
import logging
import os
import re
import resource
import selectors
import signal
import subprocess
import sys
import threading
import time
import tomllib
from collections.abc import Mapping
from importlib import metadata
from pathlib import Path
from typing import Any

import attrs
import mujoco
import pytest
from _places import unwritable_folder
from _terminal import run_on_terminal
from _warned import WARNED_XML, load_warnings

from chunktune import _crowding, load_settings
from chunktune._cache import DecisionCache
from chunktune._cache_entry import CacheEntry
from chunktune._cache_transfer import write_cache_file
from chunktune._cli import _args, _cache_cmd, _interrupted, _tune_cmd, main
from chunktune._cli._common import open_cache
from chunktune._cli._console import PipeConsole
from chunktune._cli._render import write_plot
from chunktune._errors import CacheError, InvalidArgumentError
from chunktune._fingerprint import usable_cpus
from chunktune._load import MachineLoad
from chunktune._shown import shown_file

# A plane and three free boxes, two of them resting on it: contact, tiny and fast.
TINY_XML = """
<mujoco>
  <option timestep="0.005"/>
  <worldbody>
    <geom type="plane" size="2 2 .1"/>
    <body pos="0 0 .1"><freejoint/><geom type="box" size=".1 .1 .1"/></body>
    <body pos=".4 0 .1"><freejoint/><geom type="box" size=".1 .1 .1"/></body>
    <body pos="-.4 0 1"><freejoint/><geom type="box" size=".1 .1 .1"/></body>
  </worldbody>
</mujoco>
"""

# quick, cut down: a sweep of the tiny model takes well under a second. On a loaded
# machine a call took 0.16 s, too slow for 2 s to judge one candidate: the sweep kept native
# and stored nothing. extend_budget stretches the budget just that far (within the hard limit)
FAST_CONFIG = """
policy = "fast"

[policies.fast]
extends = "quick"
description = "tests: quick, 2 s, 3 rounds"
time_budget_s = 2.0
max_rounds = 3
extend_budget = true
hard_limit_s = 60.0
"""

# never settles and never races: runs until interrupted (or 60 s)
SLOW_CONFIG = """
policy = "slow"

[policies.slow]
extends = "quick"
max_rounds = 100000
race = false
early_stop = false
noise_gate = false
time_budget_s = 60.0
"""

SMALL = ("--num-envs", "16", "--nthread", "2", "--nstep", "2")
DECISION_KEYS = {
    "chunk_size",
    "native_chunk",
    "source",
    "policy",
    "reason",
    "probe_seconds",
    "key",
    "timings_ms",
    "gain",
    "gain_ci",
    "partial",
    "load",
}


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    """A fast policy as the settings file, and the cache and sweep lock in tmp_path."""
    config = tmp_path / "fast.toml"
    config.write_text(FAST_CONFIG)
    paths = {
        "config": config,
        "cache": tmp_path / "cache.json",
        "lock": tmp_path / "sweep.lock",
    }
    monkeypatch.setenv("CHUNKTUNE_CONFIG", str(config))
    monkeypatch.setenv("CHUNKTUNE_CACHE", str(paths["cache"]))
    monkeypatch.setenv("CHUNKTUNE_SWEEP_LOCK", str(paths["lock"]))
    return paths


@pytest.fixture
def model(tmp_path: Path) -> Path:
    """The tiny model as an XML file."""
    path = tmp_path / "boxes.xml"
    path.write_text(TINY_XML)
    return path


def run_cli(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """``python -m chunktune ARGS`` with this process's environment."""
    return subprocess.run(
        [sys.executable, "-m", "chunktune", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=dict(os.environ),
    )


def buffered_env() -> dict[str, str]:
    """This process's environment without PYTHONUNBUFFERED: stdout block-buffered, as a shell
    runs the command, so that what is still buffered meets the closed or full stdout late."""
    return {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}


def entry(created: float, chunk: int | None = 4, **fields: Any) -> CacheEntry:
    """A stored decision with a small table of evidence."""
    values: dict[str, Any] = {
        "chunk_size": chunk,
        "native_chunk": 3,
        "reason": f"chose {chunk} for the test",
        "timings": {None: 0.0100, 2: 0.0095, 4: 0.0090, 16: 0.0150},
        "samples": {None: 5, 2: 5, 4: 5, 16: 2},
        "raced_out": (16,),
        "policy": "balanced",
        "created": created,
        "num_envs": 64,
        "nthread": 2,
        "signature": {"kind": "mujoco.rollout", "model_sha": "ab12cd34ef56ab78"},
        "model_file": "/models/robot.xml",
    }
    values.update(fields)
    return CacheEntry(**values)


def fill(path: Path, entries: Mapping[str, CacheEntry]) -> DecisionCache:
    cache = DecisionCache(path)
    assert cache.update(dict(entries))
    return cache


# ---------------------------------------------------------------- tune


def _address_space_of_1_gib() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (2**30, 2**30))


def _refused_in_1_gib(*argv: str) -> str:
    """The one line `chunktune ARGV` prints on stderr where it may allocate 1 GiB, having
    exited 2 without a traceback."""
    done = subprocess.run(
        [sys.executable, "-m", "chunktune", *argv],
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=_address_space_of_1_gib,
    )
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    (line,) = done.stderr.splitlines()
    return line


@pytest.mark.mujoco
@pytest.mark.parametrize("command", ["tune", "record"])
def test_a_batch_past_the_memory_this_process_may_use_is_a_usage_error(
    env: dict[str, Path], model: Path, tmp_path: Path, command: str
) -> None:
    """--num-envs too large for `ulimit -v` (1 GiB): exit 2 naming the value, no traceback."""
    out = ["-o", str(tmp_path / "trace.json")] if command == "record" else []
    batch = ["--num-envs", "4000000", "--nthread", "1", "--nstep", "1"]
    line = _refused_in_1_gib(command, str(model), *batch, *out)
    # the machine's available memory may refuse it first; either way the value is named
    assert line.startswith(("chunktune: error: --num-envs 4000000 ", "chunktune: error: num_envs"))
    assert "4000000" in line and line.endswith("use fewer envs or steps")


@pytest.mark.mujoco
def test_a_demo_batch_past_the_memory_this_process_may_use_is_a_usage_error(
    env: dict[str, Path],
) -> None:
    """The demo under `ulimit -v`: exit 2 naming --num-envs alone, as no --nstep was given."""
    # the demo's own 20 steps are not the user's --nstep
    # about 1.2 GiB, past the 1 GiB at any rate: the demo builds its envs before its batch
    # is refused, a time that grows with them (100000, 4.7 GiB, took over 2 s; 40000 about
    # 1 s more than this); the machine's available memory may refuse it first
    line = _refused_in_1_gib("tune", "--num-envs", "25000", "--nthread", "1")
    assert line.startswith(("chunktune: error: --num-envs 25000: ", "chunktune: error: num_envs"))


@pytest.mark.parametrize(
    ("nstep", "error", "said"),
    [
        pytest.param(None, MemoryError(), "--num-envs 10: the batch's arrays do not fit in the "
                     "memory this process may allocate (out of memory); use fewer envs or steps",
                     id="bare"),
        pytest.param(5, MemoryError("Unable to allocate 9 GiB"), "--num-envs 10 with --nstep 5: "
                     "the batch's arrays do not fit in the memory this process may allocate "
                     "(Unable to allocate 9 GiB); use fewer envs or steps", id="numpy's"),
    ],
)  # fmt: skip
def test_a_memory_error_building_the_batch_says_why_in_one_sentence(
    nstep: int | None, error: MemoryError, said: str
) -> None:
    """A MemoryError building the batch names --num-envs, --nstep if given, and the reason."""
    # the allocator's reason, or `out of memory` where it gave none
    with pytest.raises(InvalidArgumentError) as info, _args._fits(10, nstep):
        raise error
    assert str(info.value) == said


@pytest.mark.mujoco
def test_tune_json_benchmark_then_cache(env: dict[str, Path], model: Path) -> None:
    """--json prints only the decision object: measured first, from the cache the second time."""
    first = run_cli("tune", str(model), *SMALL, "--json")
    assert first.returncode == 0, first.stderr
    decision = json.loads(first.stdout)
    assert first.stdout == json.dumps(decision) + "\n"
    assert set(decision) == DECISION_KEYS
    assert decision["source"] == "benchmark"
    assert decision["probe_seconds"] > 0
    assert "native" in decision["timings_ms"]
    assert "Traceback" not in first.stderr

    second = run_cli("tune", str(model), *SMALL, "--json")
    assert second.returncode == 0, second.stderr
    again = json.loads(second.stdout)
    assert second.stdout == json.dumps(again) + "\n"
    assert again["source"] == "cache"
    assert again["key"] == decision["key"]
    assert again["chunk_size"] == decision["chunk_size"]
    assert again["timings_ms"] == pytest.approx(decision["timings_ms"])


@pytest.mark.mujoco
@pytest.mark.parametrize(
    ("errno_", "folder"),
    [
        *(
            pytest.param(e, "", id=errno.errorcode[e])
            for e in (errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EIO)
        ),
        # a newline and an escape sequence in the cache's path: it went out raw
        pytest.param(errno.ENOSPC, "a\nb\x1b[31m", id="odd-path-escaped"),
    ],
)
def test_tune_whose_decision_cannot_be_stored_says_not_cached(
    env: dict[str, Path],
    model: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    errno_: int,
    folder: str,
) -> None:
    """A tune whose cache write fails (a full disk) names no cache key: it says not cached, why."""
    cache = env["cache"].parent / folder / "cache.json"
    cache.parent.mkdir(exist_ok=True)
    monkeypatch.setenv("CHUNKTUNE_CACHE", str(cache))
    real_replace = os.replace

    def replace(src: Any, dst: Any, **kwargs: Any) -> None:
        if Path(dst) == cache:
            raise OSError(errno_, os.strerror(errno_), str(dst))
        real_replace(src, dst, **kwargs)

    monkeypatch.setattr(os, "replace", replace)
    assert main(["tune", str(model), *SMALL]) == 0
    out, err = capsys.readouterr()
    assert "\x1b" not in out, out
    why = f"the cache {shown_file(cache)} is unavailable: {os.strerror(errno_)}"
    assert out.rstrip().splitlines()[-1].endswith(f"not cached: {why}")
    assert "cache key" not in out and "Traceback" not in err
    assert not cache.exists()


@pytest.mark.mujoco
def test_tune_json_names_the_policy_that_made_the_decision(
    env: dict[str, Path], model: Path
) -> None:
    """--json's policy is the active policy of the settings file, measured and from the cache."""
    for source in ("benchmark", "cache"):
        done = run_cli("tune", str(model), *SMALL, "--json")
        assert done.returncode == 0, done.stderr
        decision = json.loads(done.stdout)
        assert (decision["source"], decision["policy"]) == (source, "fast")


# one free box under a gravity no step survives: MuJoCo warns and resets it every step
UNSTABLE_XML = """
<mujoco>
  <option timestep="0.5" gravity="0 0 -1e12"/>
  <worldbody>
    <body pos="0 0 .2"><freejoint/><geom type="box" size=".05 .05 .05"/></body>
  </worldbody>
</mujoco>
"""


@pytest.mark.mujoco
def test_tune_of_an_unstable_model_says_so_once_instead_of_flooding_stderr(
    env: dict[str, Path], tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """MuJoCo's warnings while measuring are one counted line, and no MUJOCO_LOG.TXT is made."""
    path = tmp_path / "unstable.xml"
    path.write_text(UNSTABLE_XML)
    capfd.readouterr()
    assert main(["tune", str(path), *SMALL, "--json", "-q"]) == 0
    out, err = capfd.readouterr()
    assert json.loads(out)["source"] == "benchmark"
    assert err.count("The simulation is unstable") == 1, err[:2000]
    (line,) = err.splitlines()
    assert re.fullmatch(
        r"chunktune: warning: MuJoCo warned \d+ times while measuring \(first: Nan, Inf or "
        r"huge value in QACC at DOF \d+\. The simulation is unstable\. Time = [\d.]+\.\); the "
        r"timings are of the model as it behaves, warnings and all",
        line,
    ), line
    assert Path.cwd() == tmp_path and not (tmp_path / "MUJOCO_LOG.TXT").exists()
    assert mujoco.get_mju_user_warning() is None  # MuJoCo's own handler is back


@pytest.mark.mujoco
def test_what_mujoco_warns_while_loading_a_model_is_a_chunktune_line(
    env: dict[str, Path], tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """MuJoCo's warning from loading the model reaches stderr as one `chunktune:` line."""
    path = tmp_path / "warned.xml"
    path.write_text(WARNED_XML)
    heard = load_warnings()
    if not heard:
        pytest.skip(f"mujoco {mujoco.__version__} does not warn of settotalmass")
    (config := tmp_path / "off.toml").write_text('policy = "off"\n')
    capfd.readouterr()
    assert main(["tune", str(path), *SMALL, "--config", str(config), "--json", "-q"]) == 0
    out, err = capfd.readouterr()
    assert json.loads(out)["source"] == "disabled"
    assert err.splitlines() == [
        f"chunktune: MuJoCo warned while loading {path}: {' '.join(heard[0].split())}"
    ]


@pytest.mark.parametrize(
    ("warnings", "told"),
    [
        pytest.param(0, None, id="none"),
        pytest.param(1, "MuJoCo warned once while measuring (first: W0.); mind it", id="once"),
        pytest.param(2, "MuJoCo warned 2 times while measuring (first: W0.); mind it", id="twice"),
    ],
)
@pytest.mark.parametrize("interrupted", [False, True], ids=["ended", "interrupted"])
def test_mujoco_warnings_told_says_once_how_many_even_when_interrupted(
    warnings: int, told: str | None, interrupted: bool, capsys: pytest.CaptureFixture[str]
) -> None:
    """The block's MuJoCo warnings are one line at its end (once, N times), Ctrl-C or not."""
    with contextlib.ExitStack() as stack:
        if interrupted:
            stack.enter_context(pytest.raises(KeyboardInterrupt))
        stack.enter_context(_args.mujoco_warnings_told("measuring", "mind it"))
        hook = mujoco.get_mju_user_warning()
        for i in range(warnings):
            hook(f"W{i}.")
        if interrupted:
            raise KeyboardInterrupt
    err = capsys.readouterr().err
    assert err == ("" if told is None else f"chunktune: warning: {told}\n")
    assert mujoco.get_mju_user_warning() is None


@pytest.mark.mujoco
def test_tune_leaves_its_decision_to_the_table_and_only_progress_on_stderr(
    env: dict[str, Path], model: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """resolve's own one-line report is not shown: the CLI draws the decision itself."""
    assert main(["tune", str(model), *SMALL, "--json"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["source"] == "benchmark"
    assert err and all(line.startswith("chunktune: ") for line in err.splitlines()), err


@pytest.mark.mujoco
def test_on_a_terminal_tune_draws_a_live_bar_there_and_plain_results_on_stdout(
    env: dict[str, Path], model: Path
) -> None:
    """On a terminal, stderr gets the live bar (escape codes) and redirected stdout none."""
    done = run_on_terminal("tune", str(model), *SMALL, term="xterm-256color")
    assert done.returncode == 0, done.screen
    assert "\x1b[" in done.screen and "chunktune: measuring" not in done.screen
    assert "\x1b" not in done.stdout and "measured now" in done.stdout


@pytest.mark.mujoco
@pytest.mark.parametrize(
    "command",
    [pytest.param(("tune", "--json"), id="tune"), pytest.param(("record",), id="record")],
)
def test_on_a_dumb_terminal_progress_comes_as_plain_lines(
    env: dict[str, Path], model: Path, tmp_path: Path, command: tuple[str, ...]
) -> None:
    """On TERM=dumb (no live redraw), tune and record say progress in lines, as to a log."""
    if command[0] == "record":
        command = (*command, "--rounds", "2", "-o", str(tmp_path / "trace.json"))
    done = run_on_terminal(command[0], str(model), *SMALL, *command[1:], term="dumb")
    assert done.returncode == 0, done.screen
    lines = done.screen.splitlines()
    assert lines and all(line.startswith("chunktune: ") for line in lines), done.screen
    first = "chunktune: measuring" if command[0] == "tune" else "chunktune: recording"
    last = "chunktune: sweep done" if command[0] == "tune" else "chunktune: wrote"
    assert lines[0].startswith(first) and lines[-1].startswith(last), done.screen


@pytest.mark.mujoco
def test_tune_table_marks_native_and_chosen(
    env: dict[str, Path], model: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The table lists native first and marks the chosen row; a cache hit shows the stored table."""
    assert main(["tune", str(model), *SMALL]) == 0
    out, err = capsys.readouterr()
    lines = out.splitlines()
    native_rows = [ln for ln in lines if ln.lstrip().startswith("native (=")]
    assert len(native_rows) == 1
    assert sum("<- chosen" in ln for ln in lines) == 1
    assert "measured now" in out
    assert "chunktune: measuring" in err and "sweep done" in err

    assert main(["tune", str(model), *SMALL]) == 0
    out, err = capsys.readouterr()
    assert "from the cache" in out
    assert sum("<- chosen" in ln for ln in out.splitlines()) == 1
    assert [ln for ln in out.splitlines() if ln.lstrip().startswith("native (=")] == native_rows
    assert "measuring" not in err


@pytest.mark.mujoco
@pytest.mark.parametrize(("load", "busy"), [(0.4, False), (2.0, True), (7.5, True)])
def test_a_fresh_tune_tells_the_machines_load_and_whether_it_was_busy(
    env: dict[str, Path],
    model: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    load: float,
    busy: bool,
) -> None:
    """A sweep gives the load as it began and calls every CPU loaded busy; a hit, its entry's."""
    monkeypatch.setattr(os, "getloadavg", lambda: (load, 0.1, 0.1))
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    assert main(["tune", str(model), *SMALL]) == 0
    out = capsys.readouterr().out
    assert "probe time" in out and f"· load {load:.2f} on 2 CPUs" in out
    assert ("the machine was busy as the sweep began" in out) is busy

    assert main(["tune", str(model), *SMALL]) == 0  # the load unchanged: never calm if busy
    out = capsys.readouterr().out
    assert "from the cache" in out
    assert f"measured at load {load:.2f} on 2 CPUs" in out
    assert "the machine was busy as the sweep began" not in out
    assert ("(busy: measured again once the machine is calm)" in out) is busy


@pytest.mark.mujoco
def test_a_tune_measured_busy_is_measured_again_once_the_machine_is_calm(
    env: dict[str, Path],
    model: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A decision swept under load is not served once calm: the next tune measures, then hits."""
    loads = {"now": 3.0}
    monkeypatch.setattr(os, "getloadavg", lambda: (loads["now"], 0.1, 0.1))
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    assert main(["tune", str(model), *SMALL, "--json"]) == 0
    assert main(["tune", str(model), *SMALL, "--json"]) == 0  # still busy: served
    loads["now"] = 0.5
    assert main(["tune", str(model), *SMALL, "--json"]) == 0
    assert main(["tune", str(model), *SMALL, "--json"]) == 0
    shown = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [d["source"] for d in shown] == ["benchmark", "cache", "benchmark", "cache"]
    assert [d["load"] for d in shown] == [{"average": 3.0, "cpus": 2}] * 2 + [
        {"average": 0.5, "cpus": 2}
    ] * 2
    assert len(json.loads(env["cache"].read_text())["entries"]) == 1


def test_a_system_without_a_load_average_tells_none() -> None:
    """A decision with no load (the system keeps none; cached before it was recorded) names none."""
    for source in ("benchmark", "cache"):
        out = _printed(
            source=source,
            chunk_size=None,
            reason="kept native",
            timings={None: 0.066, 4: 0.065},
            probe_seconds=3.0,
            key="0123456789abcdef",
        )
        assert "cache key 0123456789ab" in out
        assert "load" not in out


@pytest.mark.mujoco
def test_tune_refresh_measures_again(
    env: dict[str, Path], model: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--refresh ignores the cached entry and sweeps again."""
    assert main(["tune", str(model), *SMALL, "--json"]) == 0
    assert main(["tune", str(model), *SMALL, "--json", "--refresh"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert [json.loads(line)["source"] for line in out] == ["benchmark", "benchmark"]


@pytest.mark.mujoco
def test_tune_demo_defaults_fit_the_machine(
    env: dict[str, Path], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Without a model the demo is tuned with nthread = usable CPUs and 128 envs per thread."""
    monkeypatch.setattr(_args, "usable_cpus", lambda: 1)
    assert main(["tune", "--nstep", "2", "--json"]) == 0
    out, err = capsys.readouterr()
    decision = json.loads(out)
    assert decision["native_chunk"] == 128 // 10
    assert decision["source"] == "benchmark"
    assert "warning" not in err
    (stored,) = DecisionCache(env["cache"]).entries().values()
    assert (stored.num_envs, stored.nthread) == (128, 1)
    assert stored.signature["states"] == "demo"


@pytest.mark.mujoco
@pytest.mark.parametrize("of_model", [True, False], ids=["model", "demo"])
def test_nthread_above_usable_cpus_warns(
    env: dict[str, Path],
    model: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    of_model: bool,
) -> None:
    """--nthread above the usable CPUs is one warning on stderr (model or demo), and it tunes."""
    monkeypatch.setattr(_crowding, "usable_cpus", lambda: 1)
    assert main(["tune", *([str(model)] if of_model else []), *SMALL, "--json"]) == 0
    out, err = capsys.readouterr()
    assert "warning: --nthread 2 is more than the 1 CPU this process may use;" in err
    assert err.count("is more than") == 1  # the workload's own warning is not said again
    assert json.loads(out)["source"] == "benchmark"


@pytest.mark.mujoco
def test_a_cpu_quota_below_the_usable_cpus_sets_the_default_nthread_and_the_warning(
    env: dict[str, Path],
    model: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Under a quota of 1 CPU on 2 usable, tune's nthread is 1, and --nthread 2 is warned of."""
    for module in (_args, _crowding):
        monkeypatch.setattr(module, "usable_cpus", lambda: 2)
        monkeypatch.setattr(module, "current_quota", lambda: 1.0)
    assert main(["tune", str(model), "--num-envs", "16", "--nstep", "2", "--json"]) == 0
    out, err = capsys.readouterr()
    assert "is more than" not in err
    stored = DecisionCache(env["cache"]).get(json.loads(out)["key"])
    assert stored is not None and stored.nthread == 1
    assert main(["tune", str(model), *SMALL, "--json"]) == 0
    err = capsys.readouterr().err
    assert (
        "warning: --nthread 2 is more than the 1 CPU this process may use (its CPU quota, 1, of "
        "the 2 it may run on);" in err
    )


@pytest.mark.mujoco
def test_plot_writes_png(
    env: dict[str, Path], model: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--plot writes a PNG of step time against chunk size."""
    pytest.importorskip("matplotlib")
    target = tmp_path / "sweep.png"
    assert main(["tune", str(model), *SMALL, "--plot", str(target)]) == 0
    assert target.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    assert f"plot written to {target}" in capsys.readouterr().err


@pytest.mark.mujoco
def test_plot_of_an_unstable_model_tells_mujocos_warnings_as_chunktune_lines(
    env: dict[str, Path], tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """--plot's balance bound counts MuJoCo's warnings too: no bare lines, no MUJOCO_LOG.TXT."""
    pytest.importorskip("matplotlib")
    path = tmp_path / "unstable.xml"
    path.write_text(UNSTABLE_XML)
    target = tmp_path / "sweep.png"
    capfd.readouterr()
    assert main(["tune", str(path), *SMALL, "--json", "-q", "--plot", str(target)]) == 0
    out, err = capfd.readouterr()
    assert json.loads(out)["source"] == "benchmark"
    assert all(line.startswith("chunktune: ") for line in err.splitlines()), err[:2000]
    assert re.search(
        r"^chunktune: warning: MuJoCo warned \d+ times while timing each env for the plot "
        r"\(first: Nan, Inf or huge value in QACC.*\); the plot's balance bound is of the model "
        r"as it behaves, warnings and all$",
        err,
        flags=re.M,
    ), err[:2000]
    assert Path.cwd() == tmp_path and not (tmp_path / "MUJOCO_LOG.TXT").exists()
    assert target.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")


def test_plot_without_matplotlib_exits_2(
    env: dict[str, Path],
    model: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Without matplotlib, --plot fails before measuring, with the install hint."""

    def missing() -> set[str]:
        raise ImportError("No module named 'matplotlib'")

    monkeypatch.setattr(_tune_cmd, "plot_formats", missing)
    assert main(["tune", str(model), *SMALL, "--plot", "x.png"]) == 2
    err = capsys.readouterr().err
    assert "--plot needs matplotlib: pip install 'chunktune[plot]'" in err
    assert not env["cache"].exists()


def test_tune_refuses_a_plot_in_a_directory_it_cannot_write_before_measuring(
    env: dict[str, Path],
    model: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """--plot into a directory no file can be made in: exit 2, one message, nothing measured."""
    place = unwritable_folder(tmp_path)
    monkeypatch.setattr(
        _tune_cmd, "load_settings", lambda *a: pytest.fail("the tune started before --plot")
    )
    assert main(["tune", str(model), *SMALL, "--plot", str(place / "x.png")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"chunktune: error: cannot write the plot {place / 'x.png'}: ")
    assert "Traceback" not in err and err.count("\n") == 1
    assert not env["cache"].exists()


class _FailingWorkload:
    num_envs = 16
    nthread = 2

    def signature(self) -> dict[str, str]:
        return {"kind": "test.failing"}

    def run(self, chunk_size: int | None) -> float:
        raise RuntimeError("the simulation exploded")


def test_failing_workload_reports_native_and_exits_1(
    env: dict[str, Path], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A workload that fails while measuring gives the native fallback, a warning and exit 1."""
    monkeypatch.setattr(_tune_cmd, "load_workload", lambda args, nthread: (_FailingWorkload(), "x"))
    assert main(["tune", "--json"]) == 1
    out, err = capsys.readouterr()
    decision = json.loads(out)
    assert decision["source"] == "fallback"
    assert decision["chunk_size"] is None
    assert "the simulation exploded" in err
    assert f"chunktune: warning: {decision['reason']}" in err.splitlines()
    assert "Traceback" not in err


@pytest.mark.parametrize(
    ("exc", "said", "helped"),
    [
        pytest.param(TypeError("unsupported operand"), "chunktune failed while measuring",
                     "chunktune's own code failed", id="chunktune-bug"),
        pytest.param(RuntimeError("can't start new thread"), "chunktune could not start a thread",
                     "the process ran out of threads or file descriptors", id="no-thread"),
    ],
)  # fmt: skip
def test_a_fallback_not_of_the_workload_exits_1_as_the_help_says(
    env: dict[str, Path],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    exc: BaseException,
    said: str,
    helped: str,
) -> None:
    """chunktune's own bug or spent threads while measuring: exit 1, and --help names the cause."""
    # the help's status 1 named only the workload's failure and hard_limit_s
    monkeypatch.setattr("chunktune._sweep.run_rounds", lambda *args, **kwargs: _raise(exc))
    assert main(["tune", "--json", *SMALL]) == 1
    out, err = capsys.readouterr()
    decision = json.loads(out)
    assert (decision["source"], decision["chunk_size"]) == ("fallback", None)
    assert said in decision["reason"], decision["reason"]
    assert f"chunktune: warning: {decision['reason']}" in err.splitlines()
    assert main(["--help"]) == 0
    status = " ".join(capsys.readouterr().out.split()).split("exit status: ")[1]
    assert helped in status.split("; 2 ")[0], status


def _raise(exc: BaseException) -> Any:
    raise exc


class _LongFailure(_FailingWorkload):
    def run(self, chunk_size: int | None) -> float:
        raise RuntimeError("the simulation exploded" + ", again" * 40)


def test_a_long_reason_stays_one_line_off_a_terminal(
    env: dict[str, Path], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Piped or redirected, the reason is one line however long, never wrapped at the width."""
    monkeypatch.setattr(_tune_cmd, "load_workload", lambda args, nthread: (_LongFailure(), "x"))
    assert main(["tune", "-q"]) == 1
    out, _ = capsys.readouterr()
    reason = [ln for ln in out.splitlines() if "the simulation exploded" in ln]
    assert len(reason) == 1 and len(reason[0]) > 160
    # the message is cut in its middle (the log has it whole), its end kept
    assert "..." in reason[0] and reason[0].endswith(", again" * 9 + ")")


def _error_case(tmp_path: Path, case: str) -> list[str]:
    if case == "missing model":
        return ["tune", str(tmp_path / "nope.xml"), *SMALL]
    if case == "malformed model":
        bad = tmp_path / "bad.xml"
        bad.write_text("<mujoco><worldbody><geom type='bogus'/></worldbody></mujoco>")
        return ["tune", str(bad), *SMALL]
    if case == "num-envs 0":
        return ["tune", "--num-envs", "0"]
    if case == "unknown policy":
        return ["tune", "--policy", "nope"]
    bad_config = tmp_path / "bad.toml"
    bad_config.write_text("[policies.mine]\nextends = 'quick'\nmargn = 0.1\n")
    return ["tune", "--config", str(bad_config)]


@pytest.mark.parametrize(
    ("case", "message"),
    [
        pytest.param("missing model", "model file not found", id="missing-model"),
        pytest.param("malformed model", "cannot load model file", id="malformed-model"),
        pytest.param("num-envs 0", "--num-envs: must be an integer >= 1", id="num-envs-0"),
        pytest.param("unknown policy", 'unknown policy "nope"', id="unknown-policy"),
        pytest.param("bad config", "margn: unknown key; did you mean margin?", id="bad-config"),
    ],
)
def test_errors_exit_2_with_a_message(
    env: dict[str, Path], tmp_path: Path, case: str, message: str
) -> None:
    """Each error a person can fix exits 2 with one readable line and no traceback."""
    result = run_cli(*_error_case(tmp_path, case))
    assert result.returncode == 2
    assert message in result.stderr
    # the message is the last line, whole (argparse's usage may come before it; MuJoCo's
    # parser errors spanned lines after it)
    assert message in result.stderr.splitlines()[-1], result.stderr
    assert "error" in result.stderr
    assert "Traceback" not in result.stderr
    assert result.stdout == ""
    assert not env["cache"].exists()


@pytest.mark.mujoco
@pytest.mark.parametrize(
    ("signum", "status"),
    [pytest.param(signal.SIGINT, 130, id="ctrl-c"), pytest.param(signal.SIGTERM, 143, id="term")],
)
def test_an_interrupt_stops_the_sweep_and_caches_nothing(
    env: dict[str, Path], model: Path, tmp_path: Path, signum: signal.Signals, status: int
) -> None:
    """SIGINT (SIGTERM) during a sweep stops it within a probe, caches nothing, exits 130 (143)."""
    slow = tmp_path / "slow.toml"
    slow.write_text(SLOW_CONFIG)
    with subprocess.Popen(
        [sys.executable, "-m", "chunktune", "tune", str(model), *SMALL, "--config", str(slow)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(os.environ),
        # a shell may start background jobs with SIGINT ignored; the CLI must see it
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    ) as proc:
        try:
            assert proc.stderr is not None
            with selectors.DefaultSelector() as sel:
                sel.register(proc.stderr, selectors.EVENT_READ)
                assert sel.select(timeout=30), "the sweep did not start"
            assert "measuring" in proc.stderr.readline()
            time.sleep(0.3)
            proc.send_signal(signum)
            out, err = proc.communicate(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
    assert proc.returncode == status, err
    assert "interrupted" in err and "nothing was cached" in err
    assert "Traceback" not in err
    assert out == ""
    assert DecisionCache(env["cache"]).entries() == {}


# ---------------------------------------------------------------- cache


def test_cache_path_prints_the_file(
    env: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """`cache path` prints the cache file that CHUNKTUNE_CACHE names."""
    assert main(["cache", "path"]) == 0
    assert capsys.readouterr().out.strip() == str(env["cache"])


def test_cache_list_summarizes_entries(
    env: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """`cache list` prints key prefix, model, N, T, chunk, age and policy for each entry."""
    now = time.time()
    fill(
        env["cache"],
        {
            "a" * 32: entry(now - 7200, 4),
            "b" * 32: entry(now - 30, None, policy="quick", num_envs=256, nthread=8),
        },
    )
    assert main(["cache", "list"]) == 0
    out = capsys.readouterr().out
    row_a = next(ln for ln in out.splitlines() if ln.startswith("a" * 12))
    row_b = next(ln for ln in out.splitlines() if ln.startswith("b" * 12))
    assert "a" * 13 not in out
    assert row_a.split() == [
        "a" * 12,
        "mujoco.rollout",
        "robot.xml",
        "64",
        "2",
        "4",
        "2h",
        "balanced",
    ]
    assert row_b.split()[3:] == ["256", "8", "native", "(=3)", "30s", "quick"]
    assert "2 entries in" in out


def test_on_a_narrow_terminal_cache_list_keeps_every_key_whole(
    env: dict[str, Path], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """At 40 columns the key column, what `cache show` takes, is not cut; the others give way."""
    fill(
        env["cache"],
        {
            "a" * 32: entry(1.0, 4),
            "b" * 32 + ".1234567890ab": entry(2.0, 4, policy="quick"),
            "b" * 32 + ".cdef01234567": entry(3.0, 4),
        },
    )
    monkeypatch.setenv("COLUMNS", "40")
    monkeypatch.setenv("NO_COLOR", "1")
    terminal = _Terminal()
    monkeypatch.setattr(sys, "stdout", terminal)
    assert main(["cache", "list"]) == 0
    shown = re.sub(r"\x1b\[[0-9;]*m", "", terminal.getvalue())
    assert max(len(line) for line in shown.splitlines()) <= 40, shown
    for key in ("a" * 12, "b" * 12 + ".123456", "b" * 12 + ".cdef01"):
        assert re.search(rf"^{re.escape(key)}\s", shown, re.MULTILINE), shown


def test_off_a_terminal_cache_list_writes_one_whole_line_per_entry(
    env: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """Piped, a long model file name is neither cut nor wrapped: each entry stays one line."""
    name = "half_cheetah_" + "randomized_" * 20 + "v17.xml"
    fill(env["cache"], {"a" * 32: entry(1.0, 4, model_file=f"/models/{name}")})
    assert main(["cache", "list"]) == 0
    rows = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("a" * 12)]
    assert len(rows) == 1 and f"mujoco.rollout {name}" in rows[0], rows
    assert "\u2026" not in rows[0]


def test_cache_list_empty(env: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    """`cache list` on an empty cache says so."""
    assert main(["cache", "list"]) == 0
    assert "no entries in" in capsys.readouterr().out


def test_cache_show_prints_the_stored_table(
    env: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """`cache show PREFIX` prints the entry's facts, its candidate table and its reason."""
    fill(env["cache"], {"abc123" + "0" * 26: entry(time.time(), 4)})
    assert main(["cache", "show", "abc1"]) == 0
    out = capsys.readouterr().out
    assert "abc123" + "0" * 26 in out
    assert "/models/robot.xml" in out
    lines = out.splitlines()
    assert any(ln.lstrip().startswith("native (=3)") for ln in lines)
    assert any(ln.split()[:1] == ["4"] and "<- chosen" in ln for ln in lines)
    assert any(ln.split()[:1] == ["16"] and "raced out" in ln for ln in lines)
    assert "chose 4 for the test" in out


@pytest.mark.parametrize(
    ("chunk", "line"),
    [
        pytest.param(None, "chunk_size=None (native, 3)", id="native"),
        pytest.param(4, "chunk_size=4 (native would be 3)", id="chosen"),
    ],
)
def test_cache_show_states_the_chunk_size_as_tune_does(
    env: dict[str, Path], capsys: pytest.CaptureFixture[str], chunk: int | None, line: str
) -> None:
    """`cache show` gives the choice in tune's words: what to pass as chunk_size, and native."""
    fill(env["cache"], {"a" * 32: entry(1.0, chunk)})
    assert main(["cache", "show", "aaaa"]) == 0
    assert line in capsys.readouterr().out.splitlines()


def test_on_a_narrow_terminal_cache_show_wraps_each_value_under_its_column(
    env: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """At 60 columns a long signature wraps under its value column; the key keeps a whole line."""
    key = "a" * 32 + ".1234567890ab"
    signature = {"kind": "mujoco.rollout", **{f"field{i}": "x" * 10 for i in range(8)}}
    fill(env["cache"], {key: entry(1.0, 4, signature=signature)})
    monkeypatch.setenv("COLUMNS", "60")
    monkeypatch.setenv("NO_COLOR", "1")
    terminal = _Terminal()
    monkeypatch.setattr(sys, "stdout", terminal)
    assert main(["cache", "show", "aaaa"]) == 0
    lines = re.sub(r"\x1b\[[0-9;]*m", "", terminal.getvalue()).splitlines()
    assert max(len(line) for line in lines) <= 60, lines
    assert key in lines
    facts = lines[: next(i for i, ln in enumerate(lines) if ln.lstrip().startswith("chunk"))]
    start = facts.index(next(ln for ln in facts if ln.startswith("signature ")))
    column = len(facts[start]) - len(facts[start][len("signature") :].lstrip())
    wrapped = [facts[start][column:]]
    for line in facts[start + 1 :]:
        assert line[:column].isspace(), facts  # a continuation, not a new name
        wrapped.append(line[column:])
    assert " ".join(w.strip() for w in wrapped) == ", ".join(
        f"{k}={v}" for k, v in sorted(signature.items())
    )


@pytest.mark.parametrize(
    ("prefix", "message"),
    [
        pytest.param("zzz", 'no cache entry\'s key starts with "zzz"', id="no-match"),
        pytest.param("ab", '"ab" matches 2 entries', id="ambiguous"),
    ],
)
def test_cache_show_bad_prefix_exits_2(
    env: dict[str, Path], capsys: pytest.CaptureFixture[str], prefix: str, message: str
) -> None:
    """`cache show` with a prefix that matches no entry, or several, exits 2 and says which."""
    fill(env["cache"], {"ab1" + "0" * 29: entry(1.0), "ab2" + "0" * 29: entry(2.0)})
    assert main(["cache", "show", prefix]) == 2
    assert message in capsys.readouterr().err


def test_one_workload_under_two_policies_lists_keys_cache_show_takes(
    env: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """Entries of one workload under two policies: listed apart, each shown by its listed key."""
    base = "c" * 32
    fill(env["cache"], {f"{base}.111111aaaaaa": entry(1.0), f"{base}.222222bbbbbb": entry(2.0)})
    assert main(["cache", "list"]) == 0
    listed = [ln.split()[0] for ln in capsys.readouterr().out.splitlines() if ln.startswith("c")]
    assert sorted(listed) == ["cccccccccccc.111111", "cccccccccccc.222222"]
    for short, policy in zip(sorted(listed), ("111111aaaaaa", "222222bbbbbb"), strict=True):
        assert main(["cache", "show", short]) == 0
        assert f"{base}.{policy}" in capsys.readouterr().out
    # the bare 12 characters are ambiguous, and the message lists what tells them apart
    assert main(["cache", "show", "c" * 12]) == 2
    assert "(cccccccccccc.111111, cccccccccccc.222222)" in capsys.readouterr().err


@pytest.mark.parametrize("prefix", ["", "  "])
def test_cache_show_an_empty_prefix_exits_2_even_with_one_entry(
    env: dict[str, Path], capsys: pytest.CaptureFixture[str], prefix: str
) -> None:
    """`cache show ""` names no entry: exit 2, not the only entry shown by accident."""
    fill(env["cache"], {"ab1" + "0" * 29: entry(1.0)})
    assert main(["cache", "show", prefix]) == 2
    assert f'key prefix "{prefix}" is empty' in capsys.readouterr().err


def test_cache_clear_yes_deletes_everything(
    env: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """`cache clear --yes` deletes every entry without asking."""
    cache = fill(env["cache"], {"a" * 32: entry(1.0), "b" * 32: entry(2.0)})
    assert main(["cache", "clear", "--yes"]) == 0
    assert "deleted 2 entries" in capsys.readouterr().out
    assert cache.entries() == {}


def test_cache_clear_refuses_without_a_terminal(
    env: dict[str, Path], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Off a terminal and without --yes, `cache clear` refuses with exit 2 and deletes nothing."""
    cache = fill(env["cache"], {"a" * 32: entry(1.0)})
    monkeypatch.setattr(sys, "stdin", io.StringIO("y\n"))
    assert main(["cache", "clear"]) == 2
    assert "without --yes" in capsys.readouterr().err
    assert len(cache.entries()) == 1


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize(
    ("answer", "left"),
    [
        pytest.param("y\n", 0, id="yes"),
        pytest.param(" YES \n", 0, id="yes-spelled-out"),
        pytest.param("n\n", 1, id="no"),
        pytest.param("", 1, id="eof"),
    ],
)
def test_cache_clear_asks_on_a_terminal(
    env: dict[str, Path],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    answer: str,
    left: int,
) -> None:
    """On a terminal `cache clear` asks, and deletes only on yes."""
    cache = fill(env["cache"], {"a" * 32: entry(1.0)})
    monkeypatch.setattr(sys, "stdin", _Terminal(answer))
    assert main(["cache", "clear"]) == 0
    out, err = capsys.readouterr()
    assert err.startswith(f"Delete the 1 entry from {env['cache']}? [y/N] ")
    assert "Delete" not in out
    assert len(cache.entries()) == left


@pytest.mark.parametrize(
    ("typed", "out", "left"),
    [
        pytest.param(b"n\n", "nothing deleted\n", 1, id="no"),
        pytest.param(b"y\n", "deleted 1 entry from {cache}\n", 0, id="yes"),
        pytest.param(b"\x04", "nothing deleted\n", 1, id="ctrl-d"),
        # "n" sent by a first Ctrl-D without Enter, the input ended by a second
        pytest.param(b"n\x04\x04", "nothing deleted\n", 1, id="n-then-ctrl-d"),
    ],
)
def test_cache_clear_asks_on_the_terminal_while_its_stdout_goes_to_a_file(
    env: dict[str, Path], typed: bytes, out: str, left: int
) -> None:
    """`cache clear > log` typed at a terminal asks there, and only the outcome goes to stdout."""
    cache = fill(env["cache"], {"a" * 32: entry(1.0)})
    question = f"Delete the 1 entry from {env['cache']}? [y/N] "
    done = run_on_terminal(
        "cache",
        "clear",
        term="xterm",
        stdin_tty=True,
        typed=typed,
        typed_after=question,
    )
    assert done.returncode == 0, done.screen
    assert question in done.screen
    # the answer's line ends on the terminal, typed or (Ctrl-D) by chunktune
    assert done.screen.split(question, 1)[1].endswith("\n")
    assert done.stdout == out.format(cache=env["cache"])
    assert len(cache.entries()) == left


class _Interrupted(_Terminal):
    # typeshed's text readline overrides _IOBase's bytes one the same way, with this ignore
    def readline(self, size: int | None = -1) -> str:  # type: ignore[override]
        raise KeyboardInterrupt


def test_ctrl_c_at_the_cache_clear_question_says_interrupted_on_a_line_of_its_own(
    env: dict[str, Path], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Ctrl-C at `cache clear`'s question ends its line, says interrupted, exits 130, keeps all."""
    cache = fill(env["cache"], {"a" * 32: entry(1.0)})
    monkeypatch.setattr(sys, "stdin", _Interrupted())
    assert main(["cache", "clear"]) == 130
    out, err = capsys.readouterr()
    question = f"Delete the 1 entry from {env['cache']}? [y/N] "
    assert (out, err) == ("", f"{question}\nchunktune: interrupted\n")
    assert len(cache.entries()) == 1


def test_sigint_at_the_cache_clear_question_on_a_terminal_says_interrupted_on_its_own_line(
    env: dict[str, Path],
) -> None:
    """SIGINT while `cache clear` waits at a terminal: the question's line ends, exit 130."""
    cache = fill(env["cache"], {"a" * 32: entry(1.0)})
    question = f"Delete the 1 entry from {env['cache']}? [y/N] "
    done = run_on_terminal("cache", "clear", term="xterm", stdin_tty=True, interrupt_after=question)
    assert done.returncode == 130, done.screen
    assert done.screen.endswith(f"{question}\nchunktune: interrupted\n"), done.screen
    assert done.stdout == ""
    assert len(cache.entries()) == 1


@pytest.mark.parametrize(
    "suffix", [pytest.param(".json", id="json"), pytest.param(".toml", id="toml")]
)
def test_cache_export_round_trips(
    env: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str], suffix: str
) -> None:
    """`cache export FILE` writes every entry in the format of FILE's suffix."""
    cache = fill(env["cache"], {"a" * 32: entry(1.0, 4), "b" * 32: entry(2.0, None)})
    target = tmp_path / f"copy{suffix}"
    assert main(["cache", "export", str(target)]) == 0
    assert "exported 2 entries" in capsys.readouterr().out
    if suffix == ".toml":
        assert tomllib.loads(target.read_text())["schema"] == 1
    else:
        assert json.loads(target.read_text())["schema"] == 1
    assert DecisionCache(target).entries() == cache.entries()


@pytest.mark.parametrize(
    ("name", "extra", "message"),
    [
        pytest.param("copy.txt", [], "must end in .json or .toml", id="bad-suffix"),
        pytest.param("exists.json", [], "the file exists; add --force", id="exists"),
        pytest.param("no/such/dir/copy.json", [], "no/such/dir does not exist", id="no-dir"),
    ],
)
def test_cache_export_refuses(
    env: dict[str, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    name: str,
    extra: list[str],
    message: str,
) -> None:
    """`cache export` refuses an unknown suffix, an existing file without --force, a missing dir."""
    fill(env["cache"], {"a" * 32: entry(1.0)})
    (tmp_path / "exists.json").write_text("{}")
    assert main(["cache", "export", str(tmp_path / name), *extra]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "no").exists()  # nothing created on a typo's say-so
    assert main(["cache", "export", str(tmp_path / "exists.json"), "--force"]) == 0


def test_cache_export_to_a_dash_writes_the_cache_as_json_on_stdout_and_nothing_else(
    env: dict[str, Path], tmp_path: Path
) -> None:
    """`cache export -` writes the cache as a JSON cache file on stdout, and no file named -."""
    cache = fill(env["cache"], {"a" * 32: entry(1.0, 4), "b" * 32: entry(2.0, None)})
    done = subprocess.run(
        [sys.executable, "-m", "chunktune", "cache", "export", "-"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )
    assert (done.returncode, done.stderr) == (0, "")
    assert json.loads(done.stdout)["schema"] == 1
    copy = tmp_path / "copy.json"
    copy.write_text(done.stdout)
    assert DecisionCache(copy).entries() == cache.entries()
    assert not (tmp_path / "-").exists()


def test_cache_export_to_a_dash_that_fails_writes_nothing_to_stdout(
    env: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """`cache export -` of an unreadable cache says why on stderr (exit 2); stdout stays empty."""
    env["cache"].write_text('{"schema": 99, "entries": {}}')
    assert main(["cache", "export", "-"]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    (line,) = err.splitlines()
    assert line.startswith(f"chunktune: error: cannot read the cache {env['cache']}: ")


def test_cache_export_format_toml_to_a_dash_writes_toml_that_imports_back(
    env: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`cache export --format toml -` writes the .toml export's bytes; saved, they import back."""
    cache = fill(env["cache"], {"a" * 32: entry(1.0, 4), "b" * 32: entry(2.0, None)})
    assert run_cli("cache", "export", str(tmp_path / "x.toml")).returncode == 0
    done = run_cli("cache", "export", "--format", "toml", "-")
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout == (tmp_path / "x.toml").read_text()
    assert tomllib.loads(done.stdout)["schema"] == 1
    saved = tmp_path / "saved.toml"
    saved.write_text(done.stdout)
    other = tmp_path / "other.json"
    monkeypatch.setenv("CHUNKTUNE_CACHE", str(other))
    imported = run_cli("cache", "import", str(saved))
    assert imported.returncode == 0, imported.stderr
    assert "imported 2 of 2 entries" in imported.stdout
    assert DecisionCache(other).entries() == cache.entries()


@pytest.mark.parametrize("source", ["-", "/dev/stdin"])
def test_cache_export_to_a_dash_piped_into_import_from_stdin_copies_the_cache(
    env: dict[str, Path], tmp_path: Path, source: str
) -> None:
    """`cache export - | cache import -` (or `/dev/stdin`) copies every entry, real processes."""
    cache = fill(env["cache"], {"a" * 32: entry(1.0, 4), "b" * 32: entry(2.0, None)})
    other = tmp_path / "other.json"
    command = [sys.executable, "-m", "chunktune", "cache"]
    exporter = subprocess.Popen([*command, "export", "-"], stdout=subprocess.PIPE)
    assert exporter.stdout is not None
    importer = subprocess.run(
        [*command, "import", source],
        stdin=exporter.stdout,
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
        env={**os.environ, "CHUNKTUNE_CACHE": str(other)},
    )
    exporter.stdout.close()
    assert exporter.wait(timeout=60) == 0
    assert importer.returncode == 0, importer.stderr
    assert "imported 2 of 2 entries" in importer.stdout
    assert DecisionCache(other).entries() == cache.entries()


@pytest.mark.parametrize("good", [True, False], ids=["cache", "not-a-cache"])
def test_cache_import_of_a_file_named_dash_names_it_by_its_path_not_as_stdin(
    env: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, good: bool
) -> None:
    """`cache import ./-` reads the file named "-" and names it by its whole path, never "-"."""
    source = tmp_path / "-"
    if good:
        fill(source, {"a" * 32: entry(1.0, 4)})
    else:
        source.write_text("{}")
    monkeypatch.chdir(tmp_path)
    done = run_cli("cache", "import", "./-")
    if good:
        assert done.returncode == 0, done.stderr
        assert f" {source} into " in done.stdout
    else:
        assert done.returncode == 2
        assert done.stderr.startswith(f"chunktune: error: {source} is neither a chunktune cache")


@pytest.mark.parametrize(
    ("closed", "said"),
    [
        pytest.param(False, "stdin does not parse as JSON: ", id="empty"),
        pytest.param(True, "cannot read stdin: it is closed; ", id="closed"),
    ],
)
def test_cache_import_dash_without_a_cache_on_stdin_names_stdin(
    env: dict[str, Path], tmp_path: Path, closed: bool, said: str
) -> None:
    """`cache import -` with nothing (or no stdin at all) piped in: exit 2, naming stdin."""
    fill(env["cache"], {"a" * 32: entry(1.0, 4)})
    before = env["cache"].read_bytes()
    done = subprocess.run(
        [sys.executable, "-m", "chunktune", "cache", "import", "-"],
        stdin=subprocess.DEVNULL,
        preexec_fn=(lambda: os.close(0)) if closed else None,
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )
    assert done.returncode == 2
    assert done.stderr.startswith(f"chunktune: error: {said}"), done.stderr
    assert env["cache"].read_bytes() == before


@pytest.mark.parametrize("verb", ["import", "merge"])
def test_cache_import_dash_on_a_terminal_refuses_without_waiting(
    env: dict[str, Path], verb: str
) -> None:
    """`cache import -` (or merge -) on a terminal: exit 2 at once, showing that verb piped to."""
    done = run_on_terminal("cache", verb, "-", term="xterm", stdin_tty=True)
    assert done.returncode == 2, done.screen
    assert done.screen.startswith("chunktune: error: cannot read stdin: it is a terminal; ")
    assert f"chunktune cache {verb} -" in " ".join(done.screen.split())
    assert not env["cache"].exists()


def test_cache_import_dash_dates_an_older_tuner_s_piped_cache_when_it_is_read(
    env: dict[str, Path], tmp_path: Path
) -> None:
    """An older tuner's cache piped to `import -` is dated as it is read; the summary says stdin."""
    before = time.time()
    done = subprocess.run(
        [sys.executable, "-m", "chunktune", "cache", "import", "-"],
        input=json.dumps({"0123abcd": {"chunk_size": 8, "per_candidate_ms": {"None": 10.0}}}),
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert "imported 1 of 1 entry from older tuner's cache stdin into" in done.stdout
    (imported,) = DecisionCache(env["cache"]).entries().values()
    assert before <= imported.created <= time.time()


def _import_dash(stdin: Any, cwd: Path) -> subprocess.CompletedProcess[str]:
    """`chunktune cache import -` run in ``cwd`` with ``stdin`` (a file or descriptor) as stdin."""
    return subprocess.run(
        [sys.executable, "-m", "chunktune", "cache", "import", "-"],
        stdin=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        cwd=cwd,
    )


@pytest.mark.parametrize("endless", [False, True], ids=["file-past-the-cap", "dev-zero"])
def test_cache_import_dash_refuses_a_stdin_past_the_cache_cap(
    env: dict[str, Path], tmp_path: Path, endless: bool
) -> None:
    """Stdin past 256 MiB (a file, /dev/zero): exit 2 naming stdin and the cap, nothing imported."""
    source = Path("/dev/zero") if endless else tmp_path / "huge.json"
    if not endless:
        with source.open("wb") as f:
            f.truncate(256 * 2**20 + 1)  # sparse: nothing of it is on disk
    with source.open("rb") as stdin:
        done = _import_dash(stdin, tmp_path)
    assert done.returncode == 2, done.stderr
    said = "chunktune: error: cannot read stdin: it holds more than 256 MiB; expected a chunktune"
    assert done.stderr.startswith(f"{said} cache"), done.stderr
    assert not env["cache"].exists()


def test_cache_import_dash_from_a_stdin_it_cannot_read_names_stdin_and_why(
    env: dict[str, Path], tmp_path: Path
) -> None:
    """Stdin open for writing only: exit 2, `cannot read stdin` and the system's reason."""
    stdin = os.open(tmp_path / "written.json", os.O_WRONLY | os.O_CREAT)
    try:
        done = _import_dash(stdin, tmp_path)
    finally:
        os.close(stdin)
    assert done.returncode == 2, done.stderr
    assert done.stderr == "chunktune: error: cannot read stdin: Bad file descriptor\n"
    assert not env["cache"].exists()


@pytest.mark.parametrize(
    ("name", "fmt"),
    [
        pytest.param("x.json", "toml", id="toml-to-json"),
        pytest.param("x.TOML", "json", id="json-to-toml"),
    ],
)
def test_cache_export_refuses_a_format_that_contradicts_the_suffix(
    env: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, fmt: str
) -> None:
    """`cache export --format F FILE`, the suffix saying another format: exit 2, one line."""
    fill(env["cache"], {"a" * 32: entry(1.0)})
    target = tmp_path / name
    assert main(["cache", "export", "--format", fmt, str(target), "--force"]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err == (
        f"chunktune: error: export {target}: --format {fmt} contradicts the name's suffix "
        f"{target.suffix}; expected a .{fmt} name, or no --format\n"
    )
    assert not target.exists()
    agreeing = "json" if fmt == "toml" else "toml"
    assert main(["cache", "export", "--format", agreeing, str(target)]) == 0
    assert target.exists()


def test_cache_export_names_a_contradicting_format_before_an_existing_file(
    env: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A --format against an existing FILE's suffix is refused as that, not sent to --force."""
    fill(env["cache"], {"a" * 32: entry(1.0)})
    target = tmp_path / "x.json"
    target.write_text("kept")
    assert main(["cache", "export", "--format", "toml", str(target)]) == 2
    _out, err = capsys.readouterr()
    assert "--format toml contradicts the name's suffix .json" in err
    assert "--force" not in err
    assert target.read_text() == "kept"


def test_cache_import_keeps_the_newer_entry(
    env: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`cache import` adds new keys; on a conflict the later `created` wins, and it says so."""
    mine = fill(
        env["cache"],
        {"a" * 32: entry(100.0, 4), "b" * 32: entry(300.0, 4), "d" * 32: entry(50.0, 2)},
    )
    theirs = fill(
        tmp_path / "other.toml",
        {
            "a" * 32: entry(200.0, 8),
            "b" * 32: entry(200.0, 8),
            "c" * 32: entry(10.0, 2),
            "d" * 32: entry(50.0, 2),
        },
    )
    assert main(["cache", "import", str(theirs.path)]) == 0
    out = capsys.readouterr().out
    assert f"replaced {'a' * 12}: the imported entry is newer" in out
    assert f"kept {'b' * 12}: the entry already in the cache is newer" in out
    assert "imported 2 of 4 entries" in out
    assert "kept 1 newer" in out and "1 already present" in out
    merged = mine.entries()
    assert merged["a" * 32].chunk_size == 8
    assert merged["b" * 32].chunk_size == 4
    assert merged["c" * 32].chunk_size == 2
    assert len(merged) == 4


def test_cache_import_legacy_json(
    env: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An older tuner's flat JSON cache imports as `legacy-<key>` entries with policy legacy."""
    legacy = tmp_path / "chunk_size.json"
    legacy.write_text(
        json.dumps(
            {
                "0123abcd": {
                    "chunk_size": 8,
                    "per_candidate_ms": {"None": 10.0, "4": 9.5, "8": 9.0},
                    "model_file": "/models/arm.xml",
                    "hostname": "node7",
                },
                "4567efgh": {"chunk_size": None, "per_candidate_ms": {"None": 5.0}},
                "broken": {"chunk_size": "eight"},
            }
        )
    )
    assert main(["cache", "import", str(legacy)]) == 0
    out, err = capsys.readouterr()
    assert "imported 2 of 3 entries from older tuner's cache" in out
    assert "(1 malformed, skipped)" in out
    assert "skipped 1 malformed" in err
    entries = DecisionCache(env["cache"]).entries()
    assert set(entries) == {"legacy-0123abcd", "legacy-4567efgh"}
    first = entries["legacy-0123abcd"]
    assert first.chunk_size == 8
    assert first.policy == "legacy"
    assert first.host == "node7"
    assert first.model_file == "/models/arm.xml"
    assert first.timings == pytest.approx({None: 0.010, 4: 0.0095, 8: 0.009})
    assert entries["legacy-4567efgh"].chunk_size is None

    assert main(["cache", "list"]) == 0
    assert "legacy-0123abcd" in capsys.readouterr().out
    assert main(["cache", "show", "legacy-0123"]) == 0
    shown = capsys.readouterr().out
    assert any(ln.split()[:1] == ["8"] and "<- chosen" in ln for ln in shown.splitlines())


def test_cache_import_names_a_legacy_key_as_cache_list_does(
    env: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A legacy entry replaced or kept on import is named whole, as `cache list` names it."""
    legacy = tmp_path / "chunk_size.json"

    def older_tuner(chunk: int, mtime: float) -> None:
        table = {"chunk_size": chunk, "per_candidate_ms": {"None": 10.0, str(chunk): 9.0}}
        legacy.write_text(json.dumps({"0123abcdef98": table}))
        os.utime(legacy, (mtime, mtime))

    older_tuner(8, 1_000_000.0)
    assert main(["cache", "import", str(legacy)]) == 0
    older_tuner(4, 2_000_000.0)
    capsys.readouterr()
    assert main(["cache", "import", str(legacy)]) == 0
    assert "replaced legacy-0123abcdef98: the imported entry is newer" in capsys.readouterr().out
    older_tuner(2, 1_500_000.0)
    assert main(["cache", "import", str(legacy)]) == 0
    out = capsys.readouterr().out
    assert "kept legacy-0123abcdef98: the entry already in the cache is newer" in out
    assert DecisionCache(env["cache"]).entries()["legacy-0123abcdef98"].chunk_size == 4


@pytest.mark.parametrize(
    ("content", "message"),
    [
        pytest.param("{not json", "does not parse as JSON", id="not-json"),
        pytest.param("[1, 2]", "is not a cache", id="not-a-table"),
        pytest.param('{"x": 1}', "JSON cache (no schema)", id="unknown-shape"),
        pytest.param('{"schema": 99, "entries": {}}', "newer than this chunktune", id="newer"),
    ],
)
def test_cache_import_rejects_other_files(
    env: dict[str, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    content: str,
    message: str,
) -> None:
    """`cache import` of a file that is no cache exits 2 and changes neither file."""
    other = tmp_path / "other.json"
    other.write_text(content)
    assert main(["cache", "import", str(other)]) == 2
    assert message in capsys.readouterr().err
    assert other.read_text() == content
    assert not env["cache"].exists()


@pytest.mark.parametrize(
    ("key", "fields"),
    [
        pytest.param("\udce8" + "a" * 31 + ".policy", {}, id="entry-key"),
        pytest.param("a" * 32 + ".policy", {"signature": {"sc\udce8ne": 1}}, id="signature-key"),
    ],
)
def test_cache_import_into_toml_of_a_name_that_is_not_utf8_is_no_traceback(
    env: dict[str, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    key: str,
    fields: dict[str, Any],
) -> None:
    """A JSON cache's key holding a lone surrogate, imported into a TOML cache: skipped, exit 0."""
    monkeypatch.setenv("CHUNKTUNE_CACHE", str(tmp_path / "cache.toml"))
    other = tmp_path / "other.json"  # JSON escapes the surrogate; TOML cannot hold it
    write_cache_file(other, {key: entry(time.time(), **fields), "b" * 32 + ".p": entry(1.0)})
    assert main(["cache", "import", str(other)]) == 0
    assert "imported 1 of 2 entries" in capsys.readouterr().out
    assert list(DecisionCache(tmp_path / "cache.toml").entries()) == ["b" * 32 + ".p"]


def test_cache_import_into_toml_of_an_older_tuner_s_key_that_is_not_utf8_is_no_traceback(
    env: dict[str, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """An older tuner's key with a lone surrogate, imported into a TOML cache: skipped, exit 0."""
    monkeypatch.setenv("CHUNKTUNE_CACHE", str(tmp_path / "cache.toml"))
    older = tmp_path / "older.json"
    table = {"chunk_size": 4, "per_candidate_ms": {"None": 9.0, "4": 8.0}}
    older.write_text(json.dumps({"\udce8" + "a" * 39: table, "b" * 40: table}))
    assert main(["cache", "import", str(older)]) == 0
    assert "imported 1 of 2 entries" in capsys.readouterr().out
    assert list(DecisionCache(tmp_path / "cache.toml").entries()) == ["legacy-" + "b" * 40]


def test_cache_import_of_an_older_tuner_s_cache_in_a_folder_not_named_in_utf8(
    env: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An older tuner's cache under a name of bytes that are no UTF-8 is imported whole."""
    folder = tmp_path / os.fsdecode(b"sc\xe8nes")
    folder.mkdir()
    older = folder / "older.json"
    table = {"chunk_size": 4, "per_candidate_ms": {"None": 9.0, "4": 8.0}}
    older.write_text(json.dumps({"a" * 40: table}))
    assert main(["cache", "import", str(older)]) == 0
    assert "imported 1 of 1 entry" in capsys.readouterr().out
    (stored,) = DecisionCache(env["cache"]).entries().values()
    assert "sc\\udce8nes" in stored.reason  # its bytes as escapes


# ---------------------------------------------------------------- policy


def test_policy_list_names_every_policy_and_its_origin(
    env: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """`policy list` shows presets and the settings file's own policies, the active one starred."""
    assert main(["policy", "list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    rows = {ln.split()[0]: ln for ln in lines if ln and ln.split()[0].isidentifier()}
    for preset in ("quick", "balanced", "patient", "shared", "thorough", "seed", "off"):
        assert rows[preset].rstrip().endswith("preset")
    assert rows["fast"].split()[1] == "*"
    assert str(env["config"]) in rows["fast"]
    assert "tests: quick, 2 s, 3 rounds" in rows["fast"]


def test_policy_list_keeps_names_whole_on_a_narrow_terminal_and_rows_whole_piped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A policy's name is never cut at 40 columns; piped, a long description stays on its row."""
    name = "humanoid_long_runs_of_last_week"
    description = "a description that goes on about margins, budgets and why " * 4
    config = tmp_path / "long.toml"
    config.write_text(f'[policies.{name}]\nextends = "quick"\ndescription = "{description}"\n')
    assert main(["policy", "list", "--config", str(config)]) == 0
    rows = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith(name)]
    assert len(rows) == 1 and description.strip() in rows[0], rows

    monkeypatch.setenv("COLUMNS", "40")
    monkeypatch.setenv("NO_COLOR", "1")
    terminal = _Terminal()
    monkeypatch.setattr(sys, "stdout", terminal)
    assert main(["policy", "list", "--config", str(config)]) == 0
    shown = re.sub(r"\x1b\[[0-9;]*m", "", terminal.getvalue())
    assert max(len(line) for line in shown.splitlines()) <= 40, shown
    assert re.search(rf"^{name}\s", shown, re.MULTILINE), shown


@pytest.mark.parametrize("terminal", [False, True], ids=["piped", "terminal"])
def test_a_description_that_looks_like_rich_markup_is_shown_as_written(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    terminal: bool,
) -> None:
    """A description with [tags], :emoji: codes and numbers is shown as written, unstyled."""
    description = "[bold]fast[/bold] on :smile: 42 threads"
    config = tmp_path / "marked.toml"
    config.write_text(f'[policies.marked]\nextends = "quick"\ndescription = "{description}"\n')
    stream = _Terminal()
    if terminal:  # colours allowed: highlighting would style the 42
        monkeypatch.setenv("COLUMNS", "200")
        monkeypatch.delenv("NO_COLOR", raising=False)
        monkeypatch.setattr(sys, "stdout", stream)
    assert main(["policy", "list", "--config", str(config)]) == 0
    out = stream.getvalue() if terminal else capsys.readouterr().out
    rows = [ln for ln in out.splitlines() if ln.startswith("marked")]
    assert len(rows) == 1 and description in rows[0], out


def test_policy_show_prints_resolved_toml(
    env: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """`policy show` prints the active policy fully resolved, as TOML that parses."""
    assert main(["policy", "show"]) == 0
    doc = tomllib.loads(capsys.readouterr().out)
    assert doc["time_budget_s"] == 2.0
    assert doc["max_rounds"] == 3
    assert doc["min_rounds"] == 2  # inherited from quick
    assert doc["candidates"]["strategy"] == "balanced"

    assert main(["policy", "show", "seed"]) == 0
    assert tomllib.loads(capsys.readouterr().out)["estimator"] == "min"


@pytest.mark.parametrize("name", ["fast", "quick", "seed", "patient"])
def test_policy_show_pasted_as_it_says_reads_back_as_the_same_policy(
    env: dict[str, Path], name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """`policy show` pasted as it says loads as the same policy but for keys it comments out."""
    assert main(["policy", "show", name]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1] == (
        "# as a policy of your own: these keys under [policies.NAME] in a settings file, "
        "[candidates] as [policies.NAME.candidates]"
    )
    left_out = [ln[2:].split(" = ")[0] for ln in lines if re.match(r"# \w+ = ", ln)]
    assert left_out == (["min_rounds"] if name == "seed" else [])
    table = "\n".join(lines).replace("[candidates]", "[policies.copy.candidates]")
    pasted = env["config"].parent / "pasted.toml"
    pasted.write_text(f"{FAST_CONFIG}\n[policies.copy]\n{table}\n")
    settings = load_settings(pasted)
    copy, shown = settings.get_policy("copy"), settings.get_policy(name)
    assert copy == attrs.evolve(shown, **{k: getattr(copy, k) for k in left_out})
    assert main(["policy", "show", "copy", "--config", str(pasted)]) == 0
    again = capsys.readouterr().out.splitlines()
    if not left_out:
        assert again[2:] == lines[2:]
    # the copy's own value of a key left out is where a table of one's own starts: idle no more
    kept = {k: v for k, v in tomllib.loads("\n".join(again)).items() if k not in left_out}
    assert kept == tomllib.loads("\n".join(lines))


def test_policy_show_unknown_exits_2(
    env: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """`policy show NAME` of an unknown policy exits 2 and lists the known ones."""
    assert main(["policy", "show", "nope"]) == 2
    err = capsys.readouterr().err
    assert 'unknown policy "nope"' in err and "fast" in err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        pytest.param(("policy", "show", "nope"), 'policy show NAME: unknown policy "nope"',
                     id="policy-show-unknown"),
        pytest.param(("policy", "show", ""), 'policy show NAME: unknown policy ""',
                     id="policy-show-empty"),
        pytest.param(("tune", "--policy", "fsat"),
                     '--policy: unknown policy "fsat"; did you mean fast?', id="tune-policy"),
        pytest.param(("policy", "show", "--config", ""), '"" is not a settings file\'s path',
                     id="config-empty"),
        pytest.param(("tune", "."), "is a directory; expected an MJCF", id="model-is-a-dir"),
        pytest.param(("tune", "m" * 300 + ".xml"), "cannot read model file", id="model-too-long"),
        pytest.param(("tune", "--num-envs", "2", "--nthread", "2", "m" * 300 + ".xml"),
                     "cannot read model file", id="trivial-model-too-long"),
        pytest.param(("check", "--seconds", "1", "m" * 300 + ".xml"), "cannot read model file",
                     id="check-model-too-long"),
        pytest.param(("tune", "--nthread", "9" * 23), f"--nthread {'9' * 23}: expected at most",
                     id="nthread-past-int"),
        pytest.param(("tune", "--nthread", str(8 * usable_cpus() + 1), "--num-envs", "4096"),
                     "8 times the", id="nthread-past-the-machine"),
        pytest.param(("tune", "--plot", "/no/such/dir/x.png"), "the directory /no/such/dir",
                     id="plot-dir-missing"),
    ],
)  # fmt: skip
def test_what_the_command_line_got_wrong_is_named_once(
    env: dict[str, Path], capsys: pytest.CaptureFixture[str], args: tuple[str, ...], message: str
) -> None:
    """A bad name, path or count on the command line: exit 2, one line naming it, no sweep."""
    assert main(list(args)) == 2
    err = capsys.readouterr().err
    # the settings file is not blamed for the command line, and no warning comes first
    assert err.count("\n") == 1 and message in err and "invalid settings in" not in err, err
    assert not env["cache"].exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        pytest.param(("tune", "--num-envs", "x"), 'argument --num-envs: "x" is not an integer',
                     id="num-envs"),
        pytest.param(("record", "--sizes", "a,b", "-o", "t.json"),
                     'argument --sizes: "a,b" is not "all" or a comma-separated list',
                     id="sizes"),
        pytest.param(("tune", "--policy", " "), 'argument --policy: " " is not a policy name',
                     id="policy"),
        pytest.param(("tune", "--policy", "a\nb"),
                     'argument --policy: "a\\nb" is not a policy name', id="policy-newline"),
        pytest.param(("frob",),
                     'argument COMMAND: "frob" is not one of tune, check, record, cache, policy\n',
                     id="command"),
        pytest.param(("cache", "lsit"),
                     'argument VERB: "lsit" is not one of path, list, show, clear, export, '
                     "import, merge; did you mean list?", id="cache-verb"),
        pytest.param(("tune", ""), 'argument MODEL.xml: "" is not a model file\'s path',
                     id="model-empty"),
        pytest.param(("record", "", "-o", "t.json"),
                     'argument MODEL.xml: "" is not a model file\'s path', id="record-model-empty"),
        pytest.param(("policy", "it's"),
                     """argument VERB: "it's" is not one of list, show""", id="policy-verb"),
        pytest.param(("tune", "--json=1"),
                     'chunktune tune: error: argument --json: takes no value, got "1"\n',
                     id="flag-value"),
        pytest.param(("cache", "clear", "--yes=it's"), "chunktune cache clear: error: "
                     """argument --yes: takes no value, got "it's"\n""", id="flag-quote"),
        pytest.param(("tune", "--quiet="), 'argument -q/--quiet: takes no value, got ""\n',
                     id="flag-empty"),
    ],
)  # fmt: skip
def test_a_bad_word_on_the_command_line_is_quoted_as_the_settings_quote_it(
    capsys: pytest.CaptureFixture[str], args: tuple[str, ...], message: str
) -> None:
    """A word the parser refuses is quoted as settings values are ("x"), not as a repr ('x')."""
    assert main(list(args)) == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        pytest.param(("tune", "--polcy", "quick"), "chunktune tune: error: unrecognized "
                     "arguments: --polcy; did you mean --policy?", id="tune-option"),
        pytest.param(("cache", "clear", "--yse"), "chunktune cache clear: error: unrecognized "
                     "arguments: --yse; did you mean --yes?", id="cache-clear-option"),
        pytest.param(("policy", "list", "--zzz"),
                     "chunktune policy list: error: unrecognized arguments: --zzz\n",
                     id="far-option"),
        pytest.param(("tune", "a.xml", "b.xml"),
                     "chunktune tune: error: unrecognized arguments: b.xml\n", id="extra-word"),
        pytest.param(("tune", "--polcy=thorough"), "chunktune tune: error: unrecognized "
                     "arguments: --polcy=thorough; did you mean --policy?", id="option-value"),
        pytest.param(("tune", "a.xml", "b.xml", "--polcy"), "chunktune tune: error: "
                     "unrecognized arguments: b.xml --polcy; did you mean --policy?",
                     id="word-then-option"),
    ],
)  # fmt: skip
def test_an_unknown_option_is_told_by_its_command_with_a_near_miss_named(
    capsys: pytest.CaptureFixture[str], args: tuple[str, ...], message: str
) -> None:
    """An unknown option is refused by the (sub)command it was given to, naming a near miss."""
    assert main(list(args)) == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize("args", [("tune", "--num-envs", "4"), ("policy", "list")])
def test_a_policy_name_with_a_newline_in_the_settings_is_one_line_of_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: tuple[str, ...]
) -> None:
    """[policies."a\\nb"] in ./chunktune.toml: exit 2, one line naming it escaped, nothing raw."""
    (tmp_path / "chunktune.toml").write_text('[policies."a\\nb"]\nextends = "quick"\n')
    assert main(list(args)) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.count("\n") == 1 and 'policies."a\\nb": ' in err, err


# ---------------------------------------------------------------- the program


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    """--version prints the installed chunktune version."""
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.startswith(f"chunktune {metadata.version('chunktune')} ")


# A fresh process: the command named in argv, then whether it loaded rich and which
# distributions' versions it read, one a line.
_LOADED = """\
import contextlib, io, sys
from chunktune import _fingerprint
from chunktune._cli import main
with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
    main(sys.argv[1:])
print("rich" if "rich" in sys.modules else "")
print("\\n".join(f for f in ("chunktune", "mujoco") if f in _fingerprint._remembered))
"""


@pytest.mark.parametrize(
    "argv",
    [
        pytest.param((), id="no-command"),
        pytest.param(("--help",), id="help"),
        pytest.param(("tune", "--help"), id="tune-help"),
        pytest.param(("tune", "--num-envs", "0"), id="refused-argument"),
    ],
)
def test_help_and_a_refused_argument_load_no_rich_nor_read_versions(
    tmp_path: Path, argv: tuple[str, ...]
) -> None:
    """--help and a refused argument load no rich and read no distribution's version."""
    env = {**os.environ, "CHUNKTUNE_CACHE": str(tmp_path / "c.json"), "CHUNKTUNE_CONFIG": ""}
    done = subprocess.run(  # the timeout is a hang guard, not a timing
        [sys.executable, "-c", _LOADED, *argv], env=env, capture_output=True, text=True,
        timeout=120, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [], done.stdout


def test_no_command_prints_usage_and_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    """`chunktune` alone prints the help on stderr and exits 2."""
    assert main([]) == 2
    assert "usage: chunktune" in capsys.readouterr().err


def test_main_leaves_the_process_as_it_found_it(env: dict[str, Path]) -> None:
    """After a command, ok or failed: the caller's stdout, stderr and the logger's level again."""
    log = logging.getLogger("chunktune")
    level, handlers = log.level, list(log.handlers)
    log.setLevel(logging.ERROR)
    try:
        for args, code in ((["cache", "path"], 0), (["policy", "show", "nosuch"], 2)):
            out, err = sys.stdout, sys.stderr
            assert main(args) == code
            assert (sys.stdout, sys.stderr) == (out, err)
            assert (log.level, log.handlers) == (logging.ERROR, handlers)
    finally:
        log.setLevel(level)


def test_an_error_whose_message_ends_in_a_newline_is_still_one_line(
    env: dict[str, Path], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A ChunktuneError's message is told stripped, on one line: no blank line follows it."""

    def gone(_config: str | None) -> DecisionCache:
        raise CacheError("the cache is gone\n")

    monkeypatch.setattr(_cache_cmd, "open_cache", gone)
    assert main(["cache", "path"]) == 2
    assert capsys.readouterr().err == "chunktune: error: the cache is gone\n"


def test_ctrl_c_outside_a_sweep_says_interrupted_and_exits_130(
    env: dict[str, Path], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A KeyboardInterrupt where no command handles it (opening the cache): one line, exit 130."""

    def interrupted(_config: str | None) -> DecisionCache:
        raise KeyboardInterrupt

    monkeypatch.setattr(_cache_cmd, "open_cache", interrupted)
    assert main(["cache", "path"]) == 130
    assert capsys.readouterr() == ("", "chunktune: interrupted\n")


def test_an_error_whose_causes_loop_is_not_taken_for_ctrl_c() -> None:
    """A chain of causes that loops back on itself is walked once: no interrupt, no hang."""
    first, second = RuntimeError("first"), ImportError("second")
    first.__cause__, second.__context__ = second, first
    told: list[bool] = []
    walker = threading.Thread(target=lambda: told.append(_interrupted(first)), daemon=True)
    walker.start()
    walker.join(timeout=60)  # a hang guard, not a timing
    assert told == [False]


def test_with_stderr_closed_a_child_the_command_starts_has_dev_null_for_stderr(
    env: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`2>&-`: /dev/null takes descriptor 2, inheritable by the command's children; then closed."""
    children: list[int] = []
    real_open = open_cache

    def open_after_a_child(config: str | None) -> DecisionCache:
        child = subprocess.run([sys.executable, "-c", "import os; os.fstat(2)"], timeout=60)
        children.append(child.returncode)  # 1: the child found no descriptor 2
        return real_open(config)

    monkeypatch.setattr(_cache_cmd, "open_cache", open_after_a_child)
    monkeypatch.setattr(sys, "stderr", None)  # as Python starts with descriptor 2 closed
    saved = os.dup(2)
    try:
        os.close(2)
        code = main(["cache", "path"])
        with pytest.raises(OSError):
            os.fstat(2)  # main closed its /dev/null
    finally:
        os.dup2(saved, 2)
        os.close(saved)
    assert code == 0 and children == [0]


def test_python_m_chunktune_help() -> None:
    """`python -m chunktune --help` works like the command and shows examples."""
    result = run_cli("--help")
    assert result.returncode == 0
    assert "usage: chunktune" in result.stdout
    assert "examples:" in result.stdout
    tune = run_cli("tune", "--help")
    assert tune.returncode == 0
    assert "chunktune tune --json" in tune.stdout


def test_main_help_says_how_a_trainer_uses_the_decision() -> None:
    """The main help's first screen says how a program gets a chunk size and passes it on."""
    result = run_cli("--help")
    assert "chunktune.resolve_sync(workload)" in result.stdout
    assert "chunk_size=decision.chunk_size" in result.stdout


def test_main_help_names_the_commands_that_read_settings() -> None:
    """The main help's settings line names exactly the commands with a --config option."""
    import argparse
    import re

    from chunktune._cli import build_parser

    parser = build_parser()
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices

    def takes_config(command: argparse.ArgumentParser) -> bool:
        verbs = [a for a in command._actions if isinstance(a, argparse._SubParsersAction)]
        parsers = [command, *(p for v in verbs for p in v.choices.values())]
        return any("--config" in p._option_string_actions for p in parsers)

    line = re.search(r"settings \(([^;)]*)", parser.epilog or "")
    assert line, "the main help names no settings line"
    named = {name.strip() for name in line.group(1).split(",")}
    assert named == {name for name, command in commands.items() if takes_config(command)}


@pytest.mark.parametrize("args", [("--help",), ("cache", "--help")], ids=["main", "cache"])
def test_the_help_says_which_cache_file_names_store_toml(
    capsys: pytest.CaptureFixture[str], args: tuple[str, ...]
) -> None:
    """The help says a name not ending in .toml is JSON, unless [cache] format says which."""
    assert main(list(args)) == 0
    help_text = " ".join(capsys.readouterr().out.split())
    assert "a name ending in .toml is stored as TOML, any other as JSON" in help_text
    assert "[cache] format can say which" in help_text  # a format set there wins over the name


# ---------------------------------------------------------------- hostile and careless use


@pytest.mark.parametrize(
    "args",
    [
        pytest.param(("policy", "show"), id="policy-show"),
        pytest.param(("cache", "list"), id="cache-list"),
        pytest.param(("--help",), id="help"),  # argparse swallows what its write raises
    ],
)
def test_a_reader_that_closes_early_gets_exit_141_and_no_traceback(
    env: dict[str, Path], args: tuple[str, ...]
) -> None:
    """stdout closed before anything is written (`| head` done early): exit 141, stderr clean."""
    with subprocess.Popen(
        [sys.executable, "-m", "chunktune", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=buffered_env(),
    ) as proc:
        assert proc.stdout is not None
        proc.stdout.close()  # the only reader is gone: every write gets EPIPE
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 141, err
    assert "Traceback" not in err and "Exception ignored" not in err


class _ClosedPipe(io.StringIO):
    """A stream whose reader is gone: every write fails as a closed pipe's does."""

    writes = 0

    def write(self, s: str) -> int:
        self.writes += 1
        raise BrokenPipeError


def test_a_console_on_a_closed_pipe_raises_broken_pipe_then_stays_quiet() -> None:
    """A command's console raises BrokenPipeError (for exit 141) once, then writes nothing."""
    from rich.console import Console

    stream = _ClosedPipe()
    console = PipeConsole(file=stream)
    with pytest.raises(BrokenPipeError):
        console.print("a row")
    if not hasattr(Console, "on_broken_pipe"):
        # rich before on_broken_pipe (the floor, 12.0) lets the write's error through
        # as it is, and main() exits 141 at once; nothing of ours runs to quiet it
        assert stream.writes == 1
        return
    tried = stream.writes
    console.print("the next row")  # quiet now: no write tried, nothing raised
    assert console.quiet and tried == stream.writes == 1


def test_help_to_a_reader_gone_exits_141_with_stdout_unbuffered(env: dict[str, Path]) -> None:
    """`--help` to a closed pipe under PYTHONUNBUFFERED: the write fails in argparse, still 141."""
    with subprocess.Popen(
        [sys.executable, "-m", "chunktune", "--help"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**buffered_env(), "PYTHONUNBUFFERED": "1"},
    ) as proc:
        assert proc.stdout is not None
        proc.stdout.close()  # the only reader is gone: the first write gets EPIPE
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 141, err
    assert "Traceback" not in err and "Exception ignored" not in err


@pytest.mark.parametrize(
    "args",
    [
        pytest.param(("tune", "--policy", "nosuch"), id="tune-policy"),
        pytest.param(("policy", "show", "nosuch"), id="policy-show"),
        pytest.param(("cache", "show", "zz"), id="cache-show"),
        pytest.param((), id="no-command"),  # the usage, through argparse
    ],
)
@pytest.mark.parametrize("stdout", ["pipe", "same-pipe"])
def test_an_error_told_to_a_closed_stderr_still_exits_2(
    env: dict[str, Path], args: tuple[str, ...], stdout: str
) -> None:
    """`2>&1 | head -0`: the error line meets a closed pipe; exit 2, silently, not 141."""
    read, write = os.pipe()
    os.close(read)  # the reader is gone before the command starts: every write gets EPIPE
    try:
        result = subprocess.run(
            [sys.executable, "-m", "chunktune", *args],
            stdout=subprocess.PIPE if stdout == "pipe" else write,
            stderr=write,
            timeout=60,
            env=dict(os.environ),
        )
    finally:
        os.close(write)
    assert result.returncode == 2
    assert not result.stdout


@pytest.mark.parametrize(
    "args",
    [
        pytest.param(("policy", "list"), id="policy-list"),  # a table through rich
        pytest.param(("cache", "path"), id="cache-path"),  # one short print, still buffered
        pytest.param(("--help",), id="help"),  # argparse swallows what its write raises
        pytest.param(("--version",), id="version"),
    ],
)
@pytest.mark.parametrize("stdout", ["full", "closed"])
def test_results_that_cannot_be_written_are_one_error_and_exit_2(
    env: dict[str, Path], args: tuple[str, ...], stdout: str
) -> None:
    """stdout on a full disk or never open (`>&-`): one message, exit 2, no traceback."""
    with open("/dev/full", "w") as full:
        result = subprocess.run(
            [sys.executable, "-m", "chunktune", *args],
            stdout=full if stdout == "full" else None,
            stderr=subprocess.PIPE,
            text=True,
            timeout=60,
            env=buffered_env(),
            preexec_fn=(lambda: os.close(1)) if stdout == "closed" else None,
        )
    why = "No space left on device" if stdout == "full" else "it is closed"
    assert result.returncode == 2, result.stderr
    assert result.stderr == f"chunktune: error: cannot write the results to stdout: {why}\n"


@pytest.mark.parametrize(
    ("args", "code"),
    [
        pytest.param(("tune", "--policy", "nosuch"), 2, id="error"),
        pytest.param(("record", "--num-envs", "4", "--nthread", "2", "--nstep", "1",
                      "--rounds", "2", "--sizes", "1,2"), 0, id="record"),
    ],
)  # fmt: skip
def test_a_stderr_on_a_full_disk_leaves_the_exit_code_the_commands_own(
    env: dict[str, Path], tmp_path: Path, args: tuple[str, ...], code: int
) -> None:
    """`2>log` on a full disk: an error still exits 2, a recording is still made (exit 0)."""
    out = tmp_path / "trace.json"
    extra = ("-o", str(out)) if args[0] == "record" else ()
    with open("/dev/full", "w") as full:
        result = subprocess.run(
            [sys.executable, "-m", "chunktune", *args, *extra],
            stdout=subprocess.PIPE,
            stderr=full,
            timeout=120,
            env=dict(os.environ),
        )
    assert result.returncode == code
    assert out.exists() == (args[0] == "record")


def test_with_stderr_closed_tune_json_writes_only_the_decision_to_stdout(
    env: dict[str, Path], model: Path
) -> None:
    """stderr never open (`2>&-`): progress goes nowhere, stdout holds one JSON object."""
    result = subprocess.run(
        [sys.executable, "-m", "chunktune", "tune", str(model), *SMALL, "--json"],
        capture_output=True,
        text=True,
        timeout=60,
        env=dict(os.environ),
        preexec_fn=lambda: os.close(2),
    )
    assert result.returncode == 0
    assert json.loads(result.stdout)["source"] == "benchmark"


@pytest.mark.parametrize(
    "args",
    [
        pytest.param(("cache", "path"), id="cache-path"),
        pytest.param(("tune", "--nstep", "0"), id="usage"),
    ],
)
def test_with_stdout_and_stderr_closed_a_failure_is_exit_2_not_a_traceback(
    env: dict[str, Path], args: tuple[str, ...]
) -> None:
    """`>&- 2>&-`: exit 2, as with stdout alone closed, not Python's 1 for a traceback."""

    def close_stdout_and_stderr() -> None:
        os.close(1)
        os.close(2)

    result = subprocess.run(
        [sys.executable, "-m", "chunktune", *args],
        timeout=60,
        env=dict(os.environ),
        preexec_fn=close_stdout_and_stderr,
    )
    assert result.returncode == 2


def test_ctrl_c_while_the_command_is_still_loading_exits_130_quietly() -> None:
    """SIGINT between the first import of chunktune and main(): exit 130, no traceback."""
    script = (
        "import sys; sys.argv[0] = '/usr/bin/chunktune'\n"
        "import os, signal, time\n"
        "import chunktune._cli\n"  # main() has not run: only the startup guard stands
        "os.kill(os.getpid(), signal.SIGINT)\n"
        "time.sleep(30)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=60,
        # a shell may start background jobs with SIGINT ignored; the CLI must see it
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    assert result.returncode == 130
    assert "Traceback" not in result.stderr and "KeyboardInterrupt" not in result.stderr


def test_the_startup_guard_stands_before_any_third_party_module_loads() -> None:
    """In the command's process, chunktune guards SIGINT before importing attrs, numpy, ..."""
    script = (
        "import signal, sys; sys.argv[0] = '/usr/bin/chunktune'\n"
        "seen = []\n"
        "class Watch:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if '.' not in name and name in {'attrs', 'anyio', 'numpy', 'cattrs', 'rich'}:\n"
        "            guarded = signal.getsignal(signal.SIGINT) is not signal.default_int_handler\n"
        "            seen.append((name, guarded))\n"
        "sys.meta_path.insert(0, Watch())\n"
        "import chunktune._cli\n"
        "print(seen)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60
    )
    seen = ast.literal_eval(result.stdout.strip())
    assert seen and all(guarded for _, guarded in seen), seen


def test_ctrl_c_while_mujoco_loads_exits_130_quietly(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Ctrl-C in an extension's import (an ImportError raised from it): exit 130, no traceback."""
    from chunktune._cli import _tune_cmd

    def loading(*args: object) -> None:
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt as exc:  # what mujoco's module init turns it into
            raise ImportError("initialization failed") from exc

    monkeypatch.setattr(_tune_cmd, "tune_workload", loading)
    assert main(["tune", "--num-envs", "256", "--nthread", "2"]) == 130
    assert "interrupted" in capsys.readouterr().err


def test_importing_chunktune_leaves_ctrl_c_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    """Only the command's own process guards SIGINT; a library import keeps the handler."""
    import signal

    from chunktune import _sigint

    monkeypatch.setattr(sys, "argv", ["train.py"])
    monkeypatch.setattr(sys, "orig_argv", [sys.executable, "train.py"])
    before = signal.getsignal(signal.SIGINT)
    _sigint.guard()
    assert signal.getsignal(signal.SIGINT) is before
    monkeypatch.setattr(sys, "orig_argv", [sys.executable, "-X", "dev", "-m", "chunktune"])
    assert _sigint._is_the_command()


def test_an_empty_policy_name_is_an_error(
    env: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """`--policy ''` names no policy: exit 2 with a message, not the active policy."""
    assert main(["tune", "--policy", ""]) == 2
    assert '--policy: "" is not a policy name' in capsys.readouterr().err


def test_a_trivial_batch_is_answered_without_building_anything(
    env: dict[str, Path], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """ceil(N/T) <= 1 is answered 'trivial' without a scene, an MjData per thread or a pool."""
    from chunktune import _mujoco

    def built(*args: object, **kwargs: object) -> None:
        raise AssertionError("a trivial batch built a workload")

    monkeypatch.setattr(_mujoco, "demo_workload", built)
    monkeypatch.setattr(_args, "load_workload", built)
    monkeypatch.setattr(_mujoco.RolloutWorkload, "__init__", built)
    assert main(["tune", "--nthread", "100000", "--num-envs", "4", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["source"] == "trivial"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        pytest.param(("--num-envs", "2000000000"), "GiB", id="huge-batch"),
        pytest.param(("--num-envs", "1000000000000"), "from 1 to 2147483647", id="past-int"),
        pytest.param(("--nthread", "100000"), "8 times the", id="huge-pool"),
    ],
)
def test_a_batch_beyond_this_machine_is_an_error_before_allocating(
    env: dict[str, Path], capsys: pytest.CaptureFixture[str], args: tuple[str, ...], message: str
) -> None:
    """A batch or pool this machine cannot hold: exit 2 with one message, nothing allocated."""
    assert main(["tune", *args]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


@pytest.mark.mujoco
def test_tune_with_an_unusable_home_measures_and_exits_0(
    env: dict[str, Path],
    model: Path,
    unusable_home: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """No usable cache dir or sweep lock: the tune measures, warns, and exits 0."""
    assert "CHUNKTUNE_CACHE" not in os.environ  # unusable_home came after env
    assert main(["tune", str(model), *SMALL, "--json"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["source"] == "benchmark"
    assert "cannot use the sweep lock" in err and "Traceback" not in err


def test_a_wait_for_another_sweep_is_printed(capsys: pytest.CaptureFixture[str]) -> None:
    """The plain progress display prints the 'waiting for another sweep' line."""
    from chunktune import ProgressEvent
    from chunktune._cli._progress import progress_display

    display = progress_display("quick", 1.0, quiet=False)
    message = "waiting for another sweep (pid 42, since 12:00:00)"
    display(ProgressEvent(kind="waiting", message=message))
    assert f"chunktune: {message}" in capsys.readouterr().err


def test_a_field_cut_by_the_budget_is_printed(capsys: pytest.CaptureFixture[str]) -> None:
    """The plain display says why a slow pool measures only some candidates, and which."""
    from chunktune import ProgressEvent
    from chunktune._cli._progress import progress_display

    display = progress_display("balanced", 10.0, quiet=False)
    display(ProgressEvent(kind="candidates", candidates=(None, 1, 4, 16, 64)))
    why = (
        "one call takes about 1.1 s, so the budget can judge 2 candidates in 2 rounds "
        "and still halve them"
    )
    display(ProgressEvent(kind="candidates", candidates=(None, 1, 64), message=why))
    err = capsys.readouterr().err
    assert "measuring 4 candidates against native (1, 4, 16, 64)" in err
    assert f"{why}: measuring only native, 1, 64" in err


def test_progress_counts_the_candidates_as_the_budget_s_cut_counts_them(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Progress counts the sizes timed against native, as "the budget can judge 3" does."""
    from chunktune import ProgressEvent
    from chunktune._cli._progress import progress_display

    opened = (None, 1, 2, 3, 4, 6, 11, 15, 26, 43, 64)
    why = (
        "one call takes about 0.2 s, so the budget can judge 3 candidates in 2 rounds "
        "and still halve them"
    )
    events = [
        ProgressEvent(kind="candidates", candidates=opened),
        ProgressEvent(kind="candidates", candidates=(None, 1, 6, 64), message=why),
    ]
    for r, start in ((1, 0.0), (2, 6.0)):
        events += [
            ProgressEvent(kind="probe", chunk_size=c, round=r, elapsed_s=start + i + 1)
            for i, c in enumerate((None, 1, 6, 64))
        ]
    display = progress_display("balanced", 10.0, quiet=False)
    for event in events:
        display(event)
    err = capsys.readouterr().err
    assert "measuring 10 candidates against native (1, 2, 3, 4, 6, 11, 15, 26, 43, 64);" in err
    assert "round 1 done: 3 candidates in the race, 4 probes, 4.0 s" in err
    assert _live(*events).description == "round 2, 3/3 candidates"


def test_a_stretched_budget_is_printed_and_moves_the_bar(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Both displays say why and how far an extend_budget policy stretched its budget."""
    import io

    from rich.console import Console

    from chunktune import ProgressEvent
    from chunktune._cli._progress import _LiveProgress, progress_display

    why = "confirming a 3.0% gain at this noise takes about 32 pairs of calls: ..."
    event = ProgressEvent(kind="extended", seconds=27.5, message=why)
    progress_display("patient", 10.0, quiet=False)(event)
    assert f"chunktune: {why}" in capsys.readouterr().err
    out = io.StringIO()
    with _LiveProgress(
        Console(file=out, force_terminal=True, width=300, highlight=False), "patient", 10.0
    ) as live:
        live(event)
        assert live.budget_s == 27.5
        assert live.progress.tasks[0].total == 27.5
    assert why in out.getvalue()


def test_a_sweep_too_slow_to_judge_says_so_when_done(capsys: pytest.CaptureFixture[str]) -> None:
    """The plain display words the too_slow stop, not as a budget that ran out."""
    from chunktune import ProgressEvent
    from chunktune._cli._progress import progress_display

    display = progress_display("balanced", 10.0, quiet=False)
    display(ProgressEvent(kind="done", message="too_slow", elapsed_s=3.5))
    err = capsys.readouterr().err
    assert "calls are too slow for the budget to judge a candidate" in err
    assert "ran out" not in err


def test_a_race_ended_for_its_leaders_confirmation_says_so_when_done(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A race that handed the rest to the confirmation is not worded as a budget that ran out."""
    from chunktune import ProgressEvent
    from chunktune._cli._progress import progress_display

    display = progress_display("balanced", 10.0, quiet=False)
    display(ProgressEvent(kind="done", round=3, message="confirming", elapsed_s=7.1))
    err = capsys.readouterr().err
    assert "the race ended early: confirming its leader needed the rest" in err
    assert "ran out" not in err


def test_the_sequential_schedule_is_shown_by_candidate_not_by_round(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Without interleave (seed), lines count candidates: a probe's round is its place in a row."""
    import io

    from rich.console import Console

    from chunktune import ProgressEvent
    from chunktune._cli._progress import _LiveProgress, progress_display

    events = [ProgressEvent(kind="candidates", candidates=(None, 4, 8))]
    for i, chunk in enumerate([None, 4, 8]):
        events += [
            ProgressEvent(kind="probe", chunk_size=chunk, round=r, elapsed_s=6.0 * i + r)
            for r in (1, 2, 3)
        ]
    events.append(ProgressEvent(kind="done", round=3, message="max_rounds", elapsed_s=18.0))
    display = progress_display("seed", 25.0, quiet=False, rounds=False)
    for event in events:
        display(event)
    err = capsys.readouterr().err
    assert "round" not in err.replace("measuring", "")
    assert "native done: 0 of 2 candidates measured, 3 probes, 3.0 s" in err
    assert "chunk 4 done: 1 of 2 candidates measured, 6 probes, 9.0 s" in err
    assert "sweep done with 2 of 2 candidates measured, 9 probes in 18.0 s" in err
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=300, highlight=False)
    with _LiveProgress(console, "seed", 25.0, rounds=False) as live:
        for event in events[:5]:
            live(event)
        assert live.progress.tasks[0].description == "chunk 4, 1/2 candidates"


def test_one_probe_is_one_probe(capsys: pytest.CaptureFixture[str]) -> None:
    """Counts of one are singular in the progress lines."""
    from chunktune import ProgressEvent
    from chunktune._cli._progress import progress_display

    display = progress_display("balanced", 10.0, quiet=False)
    display(ProgressEvent(kind="candidates", candidates=(None, 4)))
    display(ProgressEvent(kind="warmup", elapsed_s=0.1))
    display(ProgressEvent(kind="done", round=0, message="too_slow", elapsed_s=0.1))
    assert "sweep done after 0 rounds, 1 probe in 0.1 s" in capsys.readouterr().err
    display = progress_display("balanced", 10.0, quiet=False)
    display(ProgressEvent(kind="candidates", candidates=(None, 4)))
    display(ProgressEvent(kind="probe", chunk_size=None, round=1, elapsed_s=0.1))
    display(ProgressEvent(kind="probe", chunk_size=4, round=1, elapsed_s=0.2))
    display(ProgressEvent(kind="done", round=1, message="too_slow", elapsed_s=0.2))
    assert "sweep done after 1 round, 2 probes in 0.2 s" in capsys.readouterr().err


def test_one_candidate_is_one_candidate(capsys: pytest.CaptureFixture[str]) -> None:
    """One-size-at-a-time lines say 'of 1 candidate', not 'of 1 candidates'."""
    from chunktune import ProgressEvent
    from chunktune._cli._progress import progress_display

    display = progress_display("seed", 25.0, quiet=False, rounds=False)
    display(ProgressEvent(kind="candidates", candidates=(None, 4)))
    for chunk in (None, 4):
        display(ProgressEvent(kind="probe", chunk_size=chunk, round=1, elapsed_s=1.0))
    display(ProgressEvent(kind="done", round=1, message="max_rounds", elapsed_s=2.0))
    err = capsys.readouterr().err
    assert "native done: 0 of 1 candidate measured" in err
    assert "sweep done with 1 of 1 candidate measured" in err


def test_a_sequential_sweep_cut_short_counts_measured_of_planned(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A one-size-at-a-time sweep the budget stops says 'with 1 of 2 candidates measured'."""
    from chunktune import ProgressEvent
    from chunktune._cli._progress import progress_display

    display = progress_display("seed", 25.0, quiet=False, rounds=False)
    display(ProgressEvent(kind="candidates", candidates=(None, 4, 8)))
    for chunk in (None, 4):
        display(ProgressEvent(kind="probe", chunk_size=chunk, round=1, elapsed_s=1.0))
    display(ProgressEvent(kind="done", round=1, message="budget", elapsed_s=2.0))
    err = capsys.readouterr().err
    assert "sweep done with 1 of 2 candidates measured, 2 probes in 2.0 s" in err


def _live(*events: Any, budget_s: float = 10.0) -> Any:
    """The live bar's task after ``events``, drawn on a terminal console that goes nowhere."""
    from rich.console import Console

    from chunktune._cli._progress import _LiveProgress

    console = Console(file=io.StringIO(), force_terminal=True, width=300, highlight=False)
    with _LiveProgress(console, "balanced", budget_s) as live:
        for event in events:
            live(event)
        return live.progress.tasks[0]


def test_the_live_bar_names_the_size_it_confirms_through_native_s_calls() -> None:
    """A confirmation's native calls (chunk None) keep the bar on 'confirming 4 against native'."""
    from chunktune import ProgressEvent

    task = _live(
        ProgressEvent(kind="candidates", candidates=(None, 4)),
        ProgressEvent(kind="probe", chunk_size=None, round=1, elapsed_s=1.0),
        ProgressEvent(kind="confirm", chunk_size=4, round=1, elapsed_s=2.0),
        ProgressEvent(kind="confirm", chunk_size=None, round=1, elapsed_s=3.0),
    )
    assert task.description == "confirming 4 against native"
    assert task.fields["probes"] == 3


def test_the_live_bar_is_full_when_the_sweep_ends_before_its_budget() -> None:
    """A sweep done at 3 s of a 10 s budget fills the bar; before that, it stood at 3 s."""
    from chunktune import ProgressEvent

    probe = ProgressEvent(kind="probe", chunk_size=None, round=1, elapsed_s=3.0)
    assert _live(probe).completed == 3.0
    done = ProgressEvent(kind="done", round=1, message="settled", elapsed_s=3.0)
    assert _live(probe, done).completed == 10.0


def test_the_live_bar_counts_refined_sizes_into_the_race() -> None:
    """After a drop and a refinement, the bar counts the race as its live sizes of all added."""
    from chunktune import ProgressEvent

    task = _live(
        ProgressEvent(kind="candidates", candidates=(None, 4, 8)),
        ProgressEvent(kind="probe", chunk_size=None, round=1, elapsed_s=1.0),
        ProgressEvent(kind="raced_out", chunk_size=8, round=1, message="clearly behind 4"),
        ProgressEvent(kind="refined", candidates=(6,), round=1),
        ProgressEvent(kind="probe", chunk_size=None, round=2, elapsed_s=2.0),
    )
    assert task.description == "round 2, 2/3 candidates"


def _printed(**fields: Any) -> str:
    """What `chunktune tune` prints for a decision: by default a sweep's, to leave native for 4."""
    from chunktune import Decision
    from chunktune._cli._common import console_on

    decision = Decision(**{"chunk_size": 4, "native_chunk": 12, "source": "benchmark", **fields})
    out = io.StringIO()
    _tune_cmd._print_decision(console_on(out), decision, "demo")
    return out.getvalue()


@pytest.mark.parametrize(
    ("chunk_size", "source", "noted"),
    [(43, "benchmark", True), (14, "cache", True), (13, "benchmark", False),
     (13, "cache", False), (12, "benchmark", False), (4, "benchmark", False),
     (None, "benchmark", False)],
)  # fmt: skip
def test_a_size_coarser_than_native_is_noted_as_a_bet_on_free_cores(
    chunk_size: int | None, source: str, noted: bool
) -> None:
    """A size over native + 1, measured or cached, says its gain can turn, and how not."""
    out = _printed(chunk_size=chunk_size, source=source, reason="chose it")
    flat = " ".join(out.split())
    assert ("is coarser than native's 12" in flat) is noted
    assert ("can turn into a loss beside work that comes and goes" in flat) is noted
    assert ("--policy shared" in flat) is noted


@pytest.mark.parametrize(("num_envs", "nthread"), [(256, 2), (192, 2), (1000, 24), (39, 2)])
def test_the_largest_size_the_shared_preset_may_choose_is_not_noted(
    num_envs: int, nthread: int
) -> None:
    """`shared`'s coarsest size, one env over native's, is never told to use --policy shared."""
    import chunktune
    from chunktune._candidates import largest_chunk
    from chunktune._workload import native_chunk

    candidates = chunktune.load_settings(None).get_policy("shared").candidates
    largest = largest_chunk(candidates, num_envs, nthread)
    native = native_chunk(num_envs, nthread)
    assert largest == native + 1  # a batch where shared can choose a size above native's
    out = _printed(chunk_size=largest, native_chunk=native, reason="chose it")
    assert "coarser than native" not in " ".join(out.split())


def test_tune_s_table_notes_the_sizes_the_race_dropped() -> None:
    """tune's table marks a size its race dropped 'raced out' and the others 'contender'."""
    timings = {None: 0.066, 4: 0.055, 8: 0.058, 64: 0.2}
    out = _printed(reason="chose 4", timings=timings, raced_out=(64,))
    notes = {ln.split()[0]: ln for ln in out.splitlines() if ln.split()[:1] in (["8"], ["64"])}
    assert notes["64"].rstrip().endswith("raced out")
    assert notes["8"].rstrip().endswith("contender")


def test_the_native_size_chosen_as_a_candidate_claims_no_gain() -> None:
    """seed choosing native's own size (gain 0) prints no 'gain over native' line, not 0.0%."""
    out = _printed(chunk_size=12, reason="chose 12, the native chunk's own size", gain=0.0)
    assert "gain over native" not in out


def test_a_kept_native_names_no_gain_even_with_an_interval_stored() -> None:
    """A native answer prints no gain line, even one whose entry holds an interval."""
    out = _printed(chunk_size=None, source="cache", reason="kept native", gain_ci=(-0.01, 0.02))
    assert "gain over native" not in out


def test_a_decision_that_measured_nothing_says_so_in_place_of_the_table() -> None:
    """A disabled policy's answer prints '(no candidates measured)' where the table would be."""
    out = _printed(chunk_size=None, source="disabled", reason="the policy is disabled")
    assert out.splitlines()[1] == "(no candidates measured)"


def test_a_confirmed_gain_says_the_tables_ratios_are_the_races() -> None:
    """The confirmed gain line tells its figure from the table's ratio (the race's) for one size."""
    out = _printed(
        reason="chose 4: 6.7% faster than the native chunk 12",
        timings={None: 0.066, 4: 0.055},
        gain=0.067,
        gain_ci=(0.031, 0.099),
    )
    assert (
        "gain over native: 6.7% (confirmed on fresh pairs, interval 3.1% to 9.9%; "
        "the table's ratios are the race's estimates)"
    ) in out


def test_an_unconfirmed_gain_is_not_credited_to_a_race() -> None:
    """A gain no confirmation measured (seed: no race either) is called the sweep's estimate."""
    out = _printed(
        reason="chose 4: 11.7% faster than the native chunk 12",
        timings={None: 0.066, 4: 0.058},
        gain=0.117,
    )
    assert "gain over native: 11.7% (not confirmed: the sweep's estimate)" in out
    assert "race" not in out


def test_an_answer_that_is_never_stored_names_no_cache_key(
    env: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """12 envs on 8 threads leave balanced nothing to measure: no 'cache key' line."""
    assert main(["tune", "--num-envs", "12", "--nthread", "8", "--policy", "balanced"]) == 0
    out = capsys.readouterr().out
    assert "nothing to measure" in out and "cache key" not in out


@pytest.mark.parametrize(
    "extra",
    [
        pytest.param(["--num-envs", "12", "--nthread", "8"], id="trivial"),
        pytest.param(["--num-envs", "64", "--nthread", "2", "--policy", "off"], id="off"),
    ],
)
def test_tune_json_key_is_empty_for_a_decision_without_one(
    env: dict[str, Path], capsys: pytest.CaptureFixture[str], extra: list[str]
) -> None:
    """tune --json's key is "" where no key was made, as README and Decision.key say."""
    assert main(["tune", *extra, "--json", "-q"]) == 0
    assert json.loads(capsys.readouterr().out)["key"] == ""


# ---------------------------------------------------------------- what the options reach

# measures nothing: the workload is built, and the decision is 'policy disabled'
OFF_CONFIG = """
policy = "idle"

[policies.idle]
enabled = false
"""


@pytest.fixture
def off(env: dict[str, Path]) -> Path:
    """A settings file whose active policy never measures, beside `env`'s fast one."""
    config = env["config"].with_name("off.toml")
    config.write_text(OFF_CONFIG)
    return config


def test_the_plot_draws_the_sizes_the_race_dropped_as_raced_out(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """--plot hands the race's drops to the image as raced out, as the table notes them."""
    pytest.importorskip("matplotlib")
    from chunktune import Decision

    drawn: list[Any] = []
    real = write_plot

    def recording(path: Any, rows: Any, **kwargs: Any) -> None:
        drawn.extend(rows)
        real(path, rows, **kwargs)

    monkeypatch.setattr(_tune_cmd, "write_plot", recording)
    timings = {None: 0.066, 4: 0.055, 64: 0.2}
    decision = Decision(
        chunk_size=4,
        native_chunk=12,
        source="benchmark",
        reason="",
        timings=timings,
        raced_out=(64,),
    )
    target = tmp_path / "sweep.png"
    _tune_cmd._plot(str(target), decision, _tune_cmd._Trivial(16, 2), "demo")
    assert {row.chunk: row.raced_out for row in drawn} == {None: False, 4: False, 64: True}
    assert target.read_bytes().startswith(b"\x89PNG")


@pytest.mark.mujoco
def test_a_plot_of_a_tune_that_measured_nothing_is_not_written(
    off: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--plot with a disabled policy: a warning that nothing was measured, and no image file."""
    pytest.importorskip("matplotlib")
    target = tmp_path / "sweep.png"
    assert main(["tune", *SMALL, "--config", str(off), "--plot", str(target)]) == 0
    err = capsys.readouterr().err
    assert "chunktune: warning: nothing was measured (disabled); no plot written" in err
    assert "plot written" not in err.replace("no plot written", "")
    assert not target.exists()


@pytest.mark.mujoco
@pytest.mark.parametrize(
    ("workload", "steps"),
    [
        pytest.param((True, "--nstep", "3"), 3, id="model-nstep"),
        pytest.param((True,), 10, id="model-default"),
        pytest.param(("--nstep", "3"), 3, id="demo-nstep"),
    ],
)
def test_nstep_reaches_the_workload_the_header_names(
    off: Path,
    model: Path,
    capsys: pytest.CaptureFixture[str],
    workload: tuple[Any, ...],
    steps: int,
) -> None:
    """--nstep sets the steps of a model's or the demo's rollouts, and the header says how many."""
    args = [str(model) if a is True else a for a in workload]
    assert main(["tune", *args, "--num-envs", "16", "--nthread", "2", "--config", str(off)]) == 0
    header = capsys.readouterr().out.splitlines()[0]
    assert f"16 envs, 2 threads, {steps} steps per rollout; policy idle" in header


def test_the_header_of_one_step_on_one_thread_reads_singular(
    off: Path, model: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An nstep=1 batch on one thread is '1 thread, 1 step per rollout', not '1 steps'."""
    args = [str(model), "--nstep", "1", "--num-envs", "16", "--nthread", "1"]
    assert main(["tune", *args, "--config", str(off)]) == 0
    header = capsys.readouterr().out.splitlines()[0]
    assert header.endswith(": 16 envs, 1 thread, 1 step per rollout; policy idle")


def test_policy_names_the_policy_resolve_uses(
    env: dict[str, Path], off: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--policy P tunes with P, not with the settings' active policy."""
    env["config"].write_text(FAST_CONFIG + OFF_CONFIG.replace('policy = "idle"\n', ""))
    args = ["tune", "--num-envs", "16", "--nthread", "2", "--nstep", "2", "--json"]
    assert main([*args, "--policy", "idle"]) == 0
    assert json.loads(capsys.readouterr().out)["source"] == "disabled"


@pytest.mark.mujoco
@pytest.mark.parametrize(
    "command",
    [
        pytest.param(["tune", "--config", "OFF"], id="tune"),
        pytest.param(["record", "--rounds", "1", "-q", "-o", "trace.json"], id="record"),
    ],
)
def test_a_command_closes_the_workload_it_built(
    off: Path, monkeypatch: pytest.MonkeyPatch, command: list[str]
) -> None:
    """tune and record close their RolloutWorkload (and so its pool) before returning."""
    from chunktune._mujoco import RolloutWorkload

    closed: list[RolloutWorkload] = []
    real_close = RolloutWorkload.close

    def close(self: RolloutWorkload, timeout_s: float | None = None) -> bool:
        closed.append(self)
        return real_close(self, timeout_s)

    monkeypatch.setattr(RolloutWorkload, "close", close)
    args = [str(off) if a == "OFF" else a for a in command]
    assert main([*args, "--num-envs", "8", "--nthread", "2", "--nstep", "2"]) == 0
    assert len(closed) == 1 and closed[0]._closed


def test_a_plot_name_of_no_image_format_is_refused_before_measuring(
    env: dict[str, Path], model: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--plot x.nosuch: exit 2 naming the suffixes it can write, before any sweep or cache."""
    pytest.importorskip("matplotlib")
    assert main(["tune", str(model), *SMALL, "--plot", "sweep.nosuch"]) == 2
    err = capsys.readouterr().err
    assert "cannot tell the image format from the suffix; use one of" in err and ".png" in err
    assert not env["cache"].exists()


@pytest.mark.mujoco
def test_the_balance_bound_is_the_summed_cost_over_the_threads(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The plot's balance bound is sum(single-thread cost per env) / nthread, in seconds."""
    import numpy as np

    from chunktune import _mujoco

    monkeypatch.setattr(_mujoco, "per_env_costs", lambda w, repeats: np.array([0.1, 0.2, 0.5]))
    with _mujoco.RolloutWorkload.from_xml(
        _mujoco.demo_model_path(), num_envs=3, nthread=2, nstep=1
    ) as workload:
        assert _tune_cmd._balance_bound(workload) == pytest.approx(0.4)


def test_a_cache_hit_names_its_key_but_no_probe_time() -> None:
    """A decision from the cache shows its cache key; the probe time is a sweep's alone."""
    out = _printed(
        source="cache",
        reason="chose 4",
        timings={None: 0.066, 4: 0.055},
        probe_seconds=3.0,
        key="0123456789abcdef",
    )
    assert "cache key 0123456789ab" in out
    assert "probe time" not in out


@pytest.mark.parametrize(
    ("timings", "line"),
    [
        pytest.param({None: 0.066}, "not cached: nothing but native was timed", id="native-only"),
        pytest.param({None: 0.066, 4: 0.055}, "cache key 0123456789ab", id="a-candidate"),
    ],
)
def test_a_sweep_that_timed_only_native_says_it_was_not_cached(
    timings: dict[int | None, float], line: str
) -> None:
    """A sweep that timed native alone says it was not stored; one that timed more names its key."""
    text = _printed(
        chunk_size=None,
        reason="kept native",
        timings=timings,
        probe_seconds=3.0,
        key="0123456789abcdef",
    )
    assert line in text
    assert ("cache key" in text) != ("not cached" in text)


def test_cache_list_counts_the_entries_measured_busy(
    env: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """`cache list` says how many entries were measured busy; with none busy, says nothing."""
    now = time.time()
    calm, busy = MachineLoad(0.5, 2), MachineLoad(2.5, 2)
    fill(env["cache"], {"a" * 32: entry(now, load=calm), "b" * 32: entry(now, load=None)})
    assert main(["cache", "list"]) == 0
    assert "busy" not in capsys.readouterr().out
    fill(env["cache"], {"c" * 32: entry(now, load=busy), "d" * 32: entry(now, load=busy)})
    assert main(["cache", "list"]) == 0
    assert (
        "2 of them measured while the machine was busy: each is measured again by the first "
        "request that finds it calm (`cache show KEY` says which)"
    ) in capsys.readouterr().out


def test_cache_list_puts_the_newest_entry_first(
    env: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """`cache list` orders its rows by age, the entry created last first."""
    now = time.time()
    fill(
        env["cache"],
        {"a" * 32: entry(now - 7200), "b" * 32: entry(now - 30), "c" * 32: entry(now - 600)},
    )
    assert main(["cache", "list"]) == 0
    rows = [ln.split()[0] for ln in capsys.readouterr().out.splitlines() if ln[:1] in "abc"]
    assert rows == ["b" * 12, "c" * 12, "a" * 12]


@pytest.mark.parametrize(("partial", "shown"), [(True, "1.50 s (partial)"), (False, "1.50 s")])
def test_cache_show_says_when_the_stored_sweep_was_partial(
    env: dict[str, Path], capsys: pytest.CaptureFixture[str], partial: bool, shown: str
) -> None:
    """`cache show` marks the probe time of an entry from a partial sweep '(partial)'."""
    fill(env["cache"], {"d" * 32: entry(time.time(), partial=partial, probe_seconds=1.5)})
    assert main(["cache", "show", "ddd"]) == 0
    (line,) = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("probe time")]
    assert line.split(None, 2)[2] == shown


@pytest.mark.parametrize(
    ("load", "shown"),
    [
        (None, "load not recorded"),
        (MachineLoad(0.75, 4), "load 0.75 on 4 CPUs"),
        (
            MachineLoad(4.0, 4),
            "load 4.00 on 4 CPUs (busy: measured again once the machine is calm)",
        ),
    ],
)
def test_cache_show_gives_the_load_the_entry_was_measured_at(
    env: dict[str, Path], capsys: pytest.CaptureFixture[str], load: MachineLoad | None, shown: str
) -> None:
    """`cache show` gives the entry's load as its sweep began, and says when that was busy."""
    fill(env["cache"], {"d" * 32: entry(time.time(), load=load)})
    assert main(["cache", "show", "ddd"]) == 0
    (line,) = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("measured at")]
    assert line.split(None, 2)[2] == shown


def test_policy_list_says_which_policies_override_a_preset(
    env: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """A settings file's policy named as a preset is said to override it; its own are not."""
    # a short relative name, so that the 'from' column fits on its row
    Path("q.toml").write_text(FAST_CONFIG + '\n[policies.quick]\nextends = "balanced"\n')
    assert main(["policy", "list", "--config", "q.toml"]) == 0
    lines = capsys.readouterr().out.splitlines()
    rows = {ln.split()[0]: ln for ln in lines if ln and ln.split()[0].isidentifier()}
    assert rows["quick"].rstrip().endswith("q.toml (overrides the preset)")
    assert rows["fast"].rstrip().endswith("q.toml")


def test_policy_show_says_whether_the_policy_is_the_active_one(
    env: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """`policy show`'s first line names the policy's origin and, for the active one, says so."""
    assert main(["policy", "show"]) == 0
    assert capsys.readouterr().out.splitlines()[0] == (
        f'# policy "fast", fully resolved (from {env["config"]}; the active policy)'
    )
    assert main(["policy", "show", "seed"]) == 0
    assert (
        capsys.readouterr().out.splitlines()[0] == '# policy "seed", fully resolved (from preset)'
    )


def test_ctrl_c_behind_an_error_raised_while_handling_it_exits_130(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """An error raised while a Ctrl-C was being handled (its __context__, no `from`): exit 130."""

    def loading(*args: object) -> None:
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt:
            raise ImportError("initialization failed")  # noqa: B904

    monkeypatch.setattr(_tune_cmd, "tune_workload", loading)
    assert main(["tune", "--num-envs", "256", "--nthread", "2"]) == 130
    assert "interrupted" in capsys.readouterr().err


def test_a_missing_model_is_an_error_even_for_a_trivial_batch(
    env: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A batch of one chunk per thread still names a missing model file: exit 2, no answer."""
    missing = tmp_path / "nosuch.xml"
    assert main(["tune", str(missing), "--num-envs", "2", "--nthread", "2", "--json"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and "model file not found" in err


@pytest.mark.parametrize("verb", [["export", "--force"], ["import"]])
def test_the_cache_file_itself_is_refused_as_export_or_import_file(
    env: dict[str, Path], capsys: pytest.CaptureFixture[str], verb: list[str]
) -> None:
    """`cache export --force` to, or `cache import` from, the cache file itself: exit 2."""
    fill(env["cache"], {"a" * 32: entry(time.time())})
    assert main(["cache", verb[0], str(env["cache"]), *verb[1:]]) == 2
    assert "that is the cache file itself" in capsys.readouterr().err


# ---------------------------------------------------------------- found by the mutants13 audit


def test_the_default_batch_of_many_threads_is_what_a_pool_can_count() -> None:
    """Without --num-envs, 128 envs per thread are asked for, but no more than a pool counts."""
    import argparse

    from chunktune._workload import MAX_COUNT

    assert _args.default_envs(argparse.Namespace(num_envs=None), 2) == 256
    assert _args.default_envs(argparse.Namespace(num_envs=None), MAX_COUNT // 64) == MAX_COUNT


def test_policy_list_puts_presets_first_and_a_missing_description_as_a_dash(
    isolated: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`policy list`: presets first, then the file's own (even 'aaa'); '-' for no description."""
    Path("p.toml").write_text(
        'policy = "aaa"\n[policies.aaa]\nextends = "quick"\ndescription = ""\n'
    )
    assert main(["policy", "list", "--config", "p.toml"]) == 0
    rows = capsys.readouterr().out.splitlines()[2:-1]
    names = [row.split()[0] for row in rows]
    assert names[-1] == "aaa" and names[:-1] == sorted(names[:-1]) and "quick" in names
    assert rows[-1].split()[1:3] == ["*", "-"]


def test_policy_list_without_a_settings_file_names_the_built_in_default(
    isolated: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """With no settings file, `policy list` says the active policy is the built-in default."""
    assert main(["policy", "list"]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "* the active policy (built-in default)"


def test_a_partial_sweep_says_so_beside_its_probe_time() -> None:
    """A decision from a sweep cut short ends with 'partial sweep' in its details line."""
    out = _printed(reason="chose 4", timings={None: 0.066, 4: 0.055}, partial=True)
    assert "partial sweep" in out


def test_the_cache_key_shown_is_the_whole_key_job_and_policy() -> None:
    """The details line names the whole cache key, its policy part too, as --json's "key"."""
    key = "0123456789abcdef0123456789abcdef.fedcba987654"
    out = _printed(reason="chose 4", timings={None: 0.066, 4: 0.055}, key=key)
    assert out.splitlines()[-1].endswith(f" · cache key {key}")


def test_the_cache_key_a_tune_shows_is_one_cache_show_finds_among_its_policies(
    env: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """The key tune names picks its one entry out of a job's several policies' in `cache show`."""
    job = "0123456789abcdef0123456789abcdef"
    fill(env["cache"], {f"{job}.aaaaaaaaaaaa": entry(1.0), f"{job}.bbbbbbbbbbbb": entry(2.0)})
    shown = _printed(reason="chose 4", timings={None: 0.066, 4: 0.055}, key=f"{job}.bbbbbbbbbbbb")
    named = shown.splitlines()[-1].rpartition("cache key ")[2]
    capsys.readouterr()
    assert main(["cache", "show", named]) == 0
    assert capsys.readouterr().out.splitlines()[0].split() == ["key", f"{job}.bbbbbbbbbbbb"]


def test_a_fallback_with_a_key_names_no_cache_key() -> None:
    """A fallback's answer is never stored, so no cache key is named even where it has one."""
    out = _printed(chunk_size=None, source="fallback", reason="failed", key="0123456789ab")
    assert "cache key" not in out


# in a row, not in rounds: the older tuner's schedule, cut down to two calls per candidate
ROW_CONFIG = """
policy = "row"

[policies.row]
extends = "seed"
warmup = 0
min_rounds = 2
max_rounds = 2
time_budget_s = 5.0
"""


@pytest.mark.mujoco
def test_tune_shows_a_policy_that_measures_in_a_row_by_candidate(
    env: dict[str, Path], model: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """tune with a policy that does not interleave counts candidates in its progress, not rounds."""
    config = tmp_path / "row.toml"
    config.write_text(ROW_CONFIG)
    assert main(["tune", str(model), *SMALL, "--config", str(config)]) == 0
    err = capsys.readouterr().err
    assert "sweep done with" in err and "candidates measured" in err


def test_cache_list_shows_what_an_entry_does_not_know_as_a_question_mark(
    env: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """An entry with no batch shape and no policy (as a migrated one) lists '?' for each."""
    fill(env["cache"], {"c" * 32: entry(time.time() - 30, 4, num_envs=0, nthread=0, policy="")})
    assert main(["cache", "list"]) == 0
    row = next(ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("c" * 12))
    assert row.split()[3:] == ["?", "?", "4", "30s", "?"]


def test_a_prefix_that_matches_exactly_eight_keys_lists_them_all_and_no_more(
    env: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """`cache show` of a prefix eight keys share names all eight, with no 'and 0 more'."""
    fill(env["cache"], {f"ab{i}" + "0" * 29: entry(1.0) for i in range(8)})
    assert main(["cache", "show", "ab"]) == 2
    line = capsys.readouterr().err
    assert '"ab" matches 8 entries (' in line and "ab7" in line and " more)" not in line


def test_plain_progress_counts_the_race_and_says_a_round_once_five_seconds_passed(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Plain progress: the race after drops and refinements, rounds every 5 s, one confirm."""
    from chunktune import ProgressEvent
    from chunktune._cli._progress import progress_display

    probes = [(None, 1, 1.0), (4, 1, 2.0), (8, 1, 3.0)]
    events = [ProgressEvent(kind="candidates", candidates=(None, 4, 8))]
    events += [
        ProgressEvent(kind="probe", chunk_size=c, round=r, elapsed_s=s) for c, r, s in probes
    ]
    events += [
        ProgressEvent(kind="raced_out", chunk_size=8, round=1, message="clearly behind 4"),
        ProgressEvent(kind="refined", candidates=(6,), round=1),
    ]
    probes = [
        (None, 2, 4.0),
        (4, 2, 6.0),
        (6, 2, 8.0),
        (None, 3, 9.0),
        (4, 3, 10.0),
        (None, 4, 11.0),
    ]
    events += [
        ProgressEvent(kind="probe", chunk_size=c, round=r, elapsed_s=s) for c, r, s in probes
    ]
    events += [
        ProgressEvent(kind="confirm", chunk_size=4, round=4, elapsed_s=12.0),
        ProgressEvent(kind="confirm", chunk_size=4, round=4, elapsed_s=13.0),
        ProgressEvent(kind="done", round=4, message="settled", elapsed_s=14.0),
    ]
    display = progress_display("quick", 3.0, quiet=False)
    for event in events:
        display(event)
    assert capsys.readouterr().err.splitlines() == [
        "chunktune: measuring 2 candidates against native (4, 8); policy 'quick', budget 3 s",
        "chunktune: chunk 8 raced out after round 1 (clearly behind 4)",
        "chunktune: refining after round 1: also measuring 6",
        "chunktune: round 1 done: 2 candidates in the race, 3 probes, 3.0 s",
        "chunktune: round 2 done: 2 candidates in the race, 6 probes, 8.0 s",
        "chunktune: confirming chunk 4 against native on fresh pairs",
        "chunktune: sweep done after 4 rounds, 11 probes in 14.0 s (the answer is settled)",
    ]


def test_cache_clear_at_the_end_of_its_input_deletes_nothing_and_says_so(
    env: dict[str, Path], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """On a terminal whose input ends before an answer, `cache clear` says nothing was deleted."""
    cache = fill(env["cache"], {"a" * 32: entry(1.0)})
    monkeypatch.setattr(sys, "stdin", _Terminal(""))
    assert main(["cache", "clear"]) == 0
    assert "nothing deleted" in capsys.readouterr().out and len(cache.entries()) == 1


@pytest.mark.parametrize(
    ("encoding", "name", "escaped"),
    [
        # a file name of bytes that are no UTF-8, under a UTF-8 locale (en_US.UTF-8)
        pytest.param("utf-8:strict", "\udcff", b"\\udcff", id="undecodable-bytes"),
        # a name the console's code page cannot hold (cp1252 and a Chinese name)
        pytest.param("ascii", "模型", b"\\u6a21\\u578b", id="code-page"),
    ],
)
def test_a_name_stdout_cannot_encode_is_printed_escaped_not_a_traceback(
    env: dict[str, Path], tmp_path: Path, encoding: str, name: str, escaped: bytes
) -> None:
    """A path stdout's encoding cannot hold is written with escapes, as stderr writes it; exit 0."""
    cache = f"{tmp_path}/{name}.json"
    result = subprocess.run(
        [sys.executable, "-m", "chunktune", "cache", "path"],
        capture_output=True,
        timeout=60,
        env={**os.environ, "CHUNKTUNE_CACHE": cache, "PYTHONIOENCODING": encoding},
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == os.fsencode(str(tmp_path)) + b"/" + escaped + b".json\n"


def test_on_an_ascii_stdout_chunktunes_own_punctuation_is_written_in_ascii_not_escaped(
    env: dict[str, Path],
) -> None:
    """On an ASCII stdout, `cache show` and `cache list` write ± and … as +/- and ..., unescaped."""
    fill(
        env["cache"],
        {
            "a" * 32: entry(
                1.0, None, reason="kept native: within the noise (±1.2%)", host="a" * 20
            ),
            "b" * 32: entry(1.0, host="node7"),  # two hosts: `cache list` names them
        },
    )
    ascii_env = {**os.environ, "PYTHONIOENCODING": "ascii"}
    show, listed = (
        subprocess.run(
            [sys.executable, "-m", "chunktune", "cache", *verb],
            capture_output=True,
            text=True,
            encoding="ascii",
            timeout=60,
            env=ascii_env,
        )
        for verb in (["show", "aaaa"], ["list"])
    )
    assert show.returncode == listed.returncode == 0, show.stderr + listed.stderr
    assert "within the noise (+/-1.2%)" in show.stdout
    assert "a" * 11 + "..." in listed.stdout
    assert "\\x" not in show.stdout + listed.stdout
    assert "\\u" not in show.stdout + listed.stdout


def test_with_stderr_closed_an_error_naming_an_undecodable_file_still_exits_2(
    env: dict[str, Path], tmp_path: Path
) -> None:
    """`2>&-`: an error line naming a file of bytes that are no UTF-8 exits 2, not 1."""
    missing = f"{tmp_path}/\udcff.xml"  # os.fsencode: the byte 0xff
    result = subprocess.run(
        [sys.executable, "-m", "chunktune", "tune", missing, *SMALL],
        capture_output=True,
        timeout=60,
        env=dict(os.environ),
        preexec_fn=lambda: os.close(2),
    )
    assert result.returncode == 2


def test_cache_export_to_a_dash_writes_what_export_to_a_json_file_writes(
    env: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`cache export -` puts on stdout exactly the bytes `cache export x.json` writes, no more."""
    fill(env["cache"], {"a" * 32: entry(1.0, 4), "b" * 32: entry(2.0, None)})
    assert main(["cache", "export", str(tmp_path / "x.json")]) == 0
    capsys.readouterr()
    assert main(["cache", "export", "-"]) == 0
    assert capsys.readouterr().out == (tmp_path / "x.json").read_text()


# ------------------------------------------------------------ found by the mutation round 35 audit


def test_cache_list_heads_its_columns_in_the_order_of_its_cells(
    env: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """`cache list`'s header names key, model, N, T, chunk, age and policy, as its rows hold."""
    fill(env["cache"], {"a" * 32: entry(time.time(), 4)})
    assert main(["cache", "list"]) == 0
    header = capsys.readouterr().out.splitlines()[0]
    assert header.split() == ["key", "model", "N", "T", "chunk", "age", "policy"]


def test_on_a_very_narrow_terminal_cache_list_still_keeps_every_key_whole(
    env: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """At 25 columns, fewer than the row needs, the key column still holds a 19-character key."""
    fill(
        env["cache"],
        {
            "b" * 32 + ".1234567890ab": entry(2.0, 4, policy="quick"),
            "b" * 32 + ".cdef01234567": entry(3.0, 4),
        },
    )
    monkeypatch.setenv("COLUMNS", "25")
    monkeypatch.setenv("NO_COLOR", "1")
    terminal = _Terminal()
    monkeypatch.setattr(sys, "stdout", terminal)
    assert main(["cache", "list"]) == 0
    shown = re.sub(r"\x1b\[[0-9;]*m", "", terminal.getvalue())
    for key in ("b" * 12 + ".123456", "b" * 12 + ".cdef01"):
        assert re.search(rf"^{re.escape(key)}\s", shown, re.MULTILINE), shown


def test_cache_show_of_a_prefix_many_keys_share_lists_eight_and_counts_the_rest(
    env: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """Ten keys under one prefix: the refusal lists the first eight and says '2 more'."""
    keys = [f"ab{i}" + "0" * 29 for i in range(10)]
    fill(env["cache"], {key: entry(float(i + 1)) for i, key in enumerate(keys)})
    assert main(["cache", "show", "ab"]) == 2
    err = capsys.readouterr().err
    listed = ", ".join(key[:12] for key in keys[:8])
    assert f'"ab" matches 10 entries ({listed} and 2 more); give more characters' in err


def test_cache_show_states_the_batch_the_policy_s_hash_and_the_host(
    env: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """`cache show` gives envs x threads in that order, the policy with its hash, and the host."""
    stored = entry(time.time(), 4, num_envs=256, nthread=8, policy_hash="0a1b2c3d", host="node7")
    fill(env["cache"], {"e" * 32: stored})
    assert main(["cache", "show", "eee"]) == 0
    facts = dict(ln.split(None, 1) for ln in capsys.readouterr().out.splitlines()[:9])
    assert facts["envs"].split() == ["x", "threads", "256", "x", "8"]
    assert facts["policy"].strip() == "balanced (0a1b2c3d)"
    assert facts["host"].strip() == "node7"


def test_cache_show_writes_the_signature_sorted_by_name(
    env: dict[str, Path], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`cache show`'s signature line lists its fields by name, whatever their stored order."""
    cache = env["cache"].with_suffix(".toml")  # TOML keeps a table's order; JSON sorts it
    monkeypatch.setenv("CHUNKTUNE_CACHE", str(cache))
    signature = {"kind": "mujoco.rollout", "nstep": 10, "dtype": "float64", "model_sha": "ab12"}
    fill(cache, {"f" * 32: entry(time.time(), 4, signature=signature)})
    assert main(["cache", "show", "fff"]) == 0
    (line,) = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("signature")]
    assert line.split(None, 1)[1] == "dtype=float64, kind=mujoco.rollout, model_sha=ab12, nstep=10"


def test_cache_show_names_the_machine_the_entry_was_measured_on(
    env: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """`cache show` gives the machine part of the key, so two machines' entries tell apart."""
    device = {"cpu": "EPYC 9654", "logical_cpus": 192, "usable_cpus": 8, "cpu_quota": 8.0}
    fill(env["cache"], {"a" * 32: entry(time.time(), 4, device=device), "b" * 32: entry(1.0)})
    assert main(["cache", "show", "aaa"]) == 0
    (line,) = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("machine")]
    assert line.split(None, 1)[1] == "cpu=EPYC 9654, cpu_quota=8.0, logical_cpus=192, usable_cpus=8"
    assert main(["cache", "show", "bbb"]) == 0
    (line,) = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("machine")]
    assert line.split(None, 1)[1] == "not recorded"


def test_cache_show_of_an_entry_with_no_timings_says_none_were_stored(
    env: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """An entry without measurements shows '(no candidates stored)' in place of an empty table."""
    bare = entry(time.time(), None, timings={}, samples={}, raced_out=())
    fill(env["cache"], {"9" * 32: bare})
    assert main(["cache", "show", "999"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "(no candidates stored)" in lines
    assert not any(ln.split()[:1] == ["chunk"] for ln in lines)  # no table header


def test_cache_clear_counts_what_it_deleted_not_what_it_asked_about(
    env: dict[str, Path], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """An entry stored while `cache clear` waits for its answer is deleted and counted."""
    fill(env["cache"], {"a" * 32: entry(1.0), "b" * 32: entry(2.0)})

    def answer_after_another_store(question: str) -> str:
        assert question.startswith("Delete all 2 entries")
        fill(env["cache"], {"c" * 32: entry(3.0)})  # another process's sweep, meanwhile
        return "y\n"

    monkeypatch.setattr(sys, "stdin", _Terminal(""))  # a terminal: it asks
    monkeypatch.setattr(_cache_cmd, "_ask", answer_after_another_store)
    assert main(["cache", "clear"]) == 0
    assert "deleted 3 entries from" in capsys.readouterr().out
    assert DecisionCache(env["cache"]).entries() == {}


def test_policy_list_keeps_the_active_mark_of_a_long_name_on_a_terminal_just_as_wide(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On a terminal exactly as wide as 'NAME *', the active long-named policy shows whole."""
    name = "humanoid_long_runs_of_last_week"
    config = tmp_path / "long.toml"
    config.write_text(
        f'policy = "{name}"\n[policies.{name}]\nextends = "quick"\n'
        f'description = "{"a description that goes on about margins and budgets " * 2}"\n'
    )
    monkeypatch.setenv("COLUMNS", str(len(f"{name} *")))
    monkeypatch.setenv("NO_COLOR", "1")
    terminal = _Terminal()
    monkeypatch.setattr(sys, "stdout", terminal)
    assert main(["policy", "list", "--config", str(config)]) == 0
    shown = re.sub(r"\x1b\[[0-9;]*m", "", terminal.getvalue())
    assert re.search(rf"^{name} \*", shown, re.MULTILINE), shown


def test_nthread_may_be_as_many_as_a_pool_can_count_and_no_more() -> None:
    """--nthread 2**31-1 (a C int's most) is taken as asked; one more is a usage error."""
    from chunktune._workload import MAX_COUNT

    assert _args.pool_threads(MAX_COUNT) == MAX_COUNT
    with pytest.raises(InvalidArgumentError, match=f"--nthread {MAX_COUNT + 1}: expected at most"):
        _args.pool_threads(MAX_COUNT + 1)


def test_an_unknown_option_before_any_command_is_a_usage_error_with_a_near_miss(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`chunktune --verison` (no command): exit 2 naming it and --version, not a traceback."""
    assert main(["--verison"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: chunktune ")
    assert "unrecognized arguments: --verison; did you mean --version?" in err
