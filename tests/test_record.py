"""`chunktune record`: a real recording end to end, its bad input, and Ctrl-C."""

from __future__ import annotations

import argparse
import errno
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from _places import unwritable_folder

from chunktune import (
    InvalidArgumentError,
    WorkloadError,
    load_settings,
    resolve_sync,
)
from chunktune._cli import _record_cmd, main
from chunktune._fingerprint import device_fingerprint
from chunktune._keys import cache_key
from chunktune._record import MAX_CALLS, check_calls, check_sizes, record
from chunktune._request import pick_policy, policy_identity
from chunktune._trace import Trace, dump_trace, load_trace, trace_from_dict
from chunktune.sim import ReplayWorkload, SimulatedWorkload

TINY = ("--num-envs", "8", "--nthread", "2", "--nstep", "2")


@pytest.mark.mujoco
def test_record_the_demo_and_replay_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A real recording of every size writes a valid trace that replays through resolve."""
    out = tmp_path / "demo.json"
    assert main(["record", *TINY, "--rounds", "3", "-q", "-o", str(out)]) == 0
    trace = load_trace(out)
    assert (trace.num_envs, trace.nthread, trace.rounds) == (8, 2, 3)
    assert sorted(trace.samples) == [1, 2, 3, 4]
    assert len(trace.order) == 3 and all(sorted(r) == [1, 2, 3, 4] for r in trace.order)
    assert trace.signature["kind"] == "mujoco.rollout" and trace.machine["usable_cpus"] >= 1
    replay = ReplayWorkload.from_file(out, seed=1)
    assert replay.signature()["kind"] == "replay"
    assert replay.run(None) > 0 and replay.oracle()[0] in trace.samples
    assert capsys.readouterr().err == ""  # -q: nothing on stderr


@pytest.mark.mujoco
def test_record_of_an_unstable_model_says_so_once_instead_of_flooding_stderr(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """MuJoCo's warnings while recording are one counted line, and no MUJOCO_LOG.TXT is made."""
    model = tmp_path / "unstable.xml"
    model.write_text(
        '<mujoco><option timestep="0.5" gravity="0 0 -1e12"/><worldbody><body><freejoint/>'
        '<geom type="box" size=".05 .05 .05"/></body></worldbody></mujoco>'
    )
    out = tmp_path / "unstable.json"
    capfd.readouterr()
    assert main(["record", str(model), *TINY, "--rounds", "2", "-q", "-o", str(out)]) == 0
    (line,) = capfd.readouterr().err.splitlines()
    assert line.startswith("chunktune: warning: MuJoCo warned ")
    assert " times while recording (first: Nan, Inf or huge value in QACC" in line
    assert load_trace(out).rounds == 2
    assert Path.cwd() == tmp_path and not (tmp_path / "MUJOCO_LOG.TXT").exists()


@pytest.mark.mujoco
def test_off_a_terminal_record_says_two_lines_and_no_blank_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """With stderr a file or pipe, no progress bar: what it records, then what it wrote."""
    out = tmp_path / "demo.json"
    assert main(["record", *TINY, "--rounds", "2", "-o", str(out)]) == 0
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 2 and lines[0].startswith("chunktune: recording demo scene: 8 envs")
    assert lines[1] == f"chunktune: wrote {out}"


@pytest.mark.mujoco
def test_off_a_terminal_record_says_its_finished_rounds_now_and_then(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Off a terminal, a finished round is said (at most every PLAIN_EVERY_S), the last not."""
    from chunktune._cli import _record_cmd

    monkeypatch.setattr(_record_cmd, "PLAIN_EVERY_S", 0.0)
    out = tmp_path / "demo.json"
    assert main(["record", *TINY, "--rounds", "3", "-o", str(out)]) == 0
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 4, lines
    assert lines[1].startswith("chunktune: round 1/3 done: 4 of 12 calls in ")
    assert lines[2].startswith("chunktune: round 2/3 done: 8 of 12 calls in ")
    assert lines[3] == f"chunktune: wrote {out}"


def test_record_measures_in_fresh_random_rounds() -> None:
    """Every round measures each size once, in an order that changes between rounds."""
    w = SimulatedWorkload.from_layout("uniform", num_envs=64, nthread=4)
    trace = record(w, rounds=4, sizes=[2, 8], seed=0)
    assert sorted(trace.samples) == [1, 2, 8]  # native's size always joins
    calls = [c for c, _ in w.history]
    assert calls[0] is None  # one unrecorded warm-up of native
    sized = [c for c in calls[1:] if c is not None]
    assert len(sized) == len(calls) - 1  # every recorded call is of a size
    rounds = [sized[3 * r : 3 + 3 * r] for r in range(4)]
    assert all(sorted(r) == [1, 2, 8] for r in rounds)
    assert len({tuple(r) for r in rounds}) > 1
    assert [list(r) for r in trace.order] == rounds


@pytest.mark.parametrize(
    ("args", "message"),
    [
        pytest.param(["--rounds", "0"], "--rounds: must be an integer >= 1", id="rounds-0"),
        pytest.param(
            ["--rounds", "9" * 12], "--rounds 999999999999: expected at most", id="rounds-past-int"
        ),
        pytest.param(
            ["--rounds", "2147483647", "--sizes", "2"],
            "2147483647 rounds of 2 sizes make 4294967294 calls; expected at most",
            id="rounds-past-a-readable-trace",
        ),
        pytest.param(["--seed", "-1"], "--seed: must be an integer >= 0", id="seed-negative"),
        pytest.param(["--sizes", "1,99"], "chunk size 99 is outside 1..4", id="size-too-big"),
        pytest.param(["--sizes", "a,b"], 'is not "all" or a comma-separated', id="not-sizes"),
        pytest.param(["--sizes", ","], 'expected "all" or at least one chunk size', id="no-sizes"),
        pytest.param(["nope.xml"], "model file not found", id="missing-model"),
        pytest.param(["-o", "x.txt"], "must end in .json", id="not-json-name"),
        pytest.param(["-o", "-"], "-o -: a trace is written to a file, not to stdout", id="stdout"),
    ],
)
def test_bad_record_arguments_exit_2_with_one_message(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
    args: list[str], message: str,
) -> None:  # fmt: skip
    """Bad rounds, sizes, models and file names: exit 2, one message, no traceback, no file."""
    monkeypatch.chdir(tmp_path)
    argv = ["record", *TINY, "-o", str(tmp_path / "t.json"), *args]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    assert not (tmp_path / "t.json").exists()


def test_record_help_states_the_workload_defaults_tune_states() -> None:
    """record --help gives MODEL, --num-envs, --nthread and --nstep the defaults tune gives."""
    import argparse

    from chunktune._cli import build_parser

    commands = next(
        a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)
    ).choices

    def helps(command: str) -> dict[str, str | None]:
        return {
            a.dest: a.help
            for a in commands[command]._actions
            if a.dest in ("model", "num_envs", "nthread", "nstep")
        }

    tune = helps("tune")
    assert all("default" in (text or "") for text in tune.values()), tune
    assert helps("record") == tune


def test_record_takes_no_config_option_because_it_reads_no_settings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """record --config FILE: exit 2, the option named as unknown, before any model loads."""
    config = tmp_path / "chunktune.toml"
    config.write_text('policy = "quick"\n')
    monkeypatch.setattr(
        "chunktune._cli._record_cmd.load_workload",
        lambda *a: pytest.fail("recorded with a --config it would never read"),
    )
    argv = ["record", *TINY, "--config", str(config), "-o", str(tmp_path / "t.json")]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "unrecognized arguments: --config" in err and "Traceback" not in err
    assert not (tmp_path / "t.json").exists()


@pytest.mark.parametrize(
    ("output", "message"),
    [
        pytest.param("adir.json", "-o adir.json is a directory", id="a-directory"),
        pytest.param("a" * 300 + "/t.json", "File name too long", id="directory-name-too-long"),
        pytest.param("a" * 300 + ".json", "File name too long", id="file-name-too-long"),
    ],
)
def test_an_output_that_cannot_be_a_file_is_refused_before_recording(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
    output: str, message: str,
) -> None:  # fmt: skip
    """-o naming a directory or too long a name: exit 2, one message, before any model loads."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "adir.json").mkdir()
    monkeypatch.setattr(
        "chunktune._cli._record_cmd.load_workload",
        lambda *a: pytest.fail("the recording started before -o was checked"),
    )
    assert main(["record", *TINY, "-q", "-o", output]) == 2
    err = capsys.readouterr().err
    assert err.startswith("chunktune: error: -o") and message in err
    assert "Traceback" not in err and err.count("\n") == 1


def test_an_unwritable_output_directory_is_refused_before_recording(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """-o in a directory no file can be made in: exit 2, one message, before any model loads."""
    place = unwritable_folder(tmp_path)
    monkeypatch.setattr(
        "chunktune._cli._record_cmd.load_workload",
        lambda *a: pytest.fail("the recording started before -o was checked"),
    )
    assert main(["record", *TINY, "-q", "-o", str(place / "t.json")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"chunktune: error: cannot write the trace {place / 't.json'}: ")
    assert "Traceback" not in err and err.count("\n") == 1
    assert not (place / "t.json").exists()


@pytest.mark.mujoco
def test_a_trace_that_cannot_be_written_leaves_nothing_behind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A full disk while the trace is written: exit 2, one message, no file, no temporary."""

    def full(fd: int) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "fsync", full)  # the os module _atomic uses
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "nowhere"))  # full as well
    assert main(["record", *TINY, "--rounds", "2", "-q", "-o", str(tmp_path / "t.json")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("chunktune: error: cannot write the trace") and "No space left" in err
    assert "kept" not in err
    assert [p.name for p in tmp_path.iterdir() if p.name != "sweep.lock"] == []


@pytest.mark.mujoco
def test_a_trace_its_output_cannot_take_is_kept_in_the_temporary_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The output's disk fills while recording: the recording is kept elsewhere, and named."""
    from chunktune._cli import _record_cmd

    def full(path: Path, data: bytes) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(_record_cmd, "write_atomic", full)
    spare = tmp_path / "spare"
    spare.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(spare))
    out = tmp_path / "t.json"
    assert main(["record", *TINY, "--rounds", "2", "--sizes", "1,3", "-q", "-o", str(out)]) == 2
    err = capsys.readouterr().err
    (kept,) = spare.iterdir()
    assert f"cannot write the trace {out}: No space left on device" in err
    assert f"the recording is kept in {kept}" in err and not out.exists()
    trace = load_trace(kept)
    assert trace.rounds == 2 and sorted(trace.samples) == [1, 3]


@pytest.mark.parametrize("seed", [-1, 1.5, True])
def test_record_refuses_a_seed_that_is_no_seed(seed: object) -> None:
    """record(seed=-1) and the like: InvalidArgumentError naming it, before any call."""
    w = SimulatedWorkload.from_layout("uniform", num_envs=64, nthread=4)
    with pytest.raises(InvalidArgumentError, match=r"seed must be an integer >= 0"):
        record(w, rounds=2, seed=seed)  # type: ignore[arg-type]
    assert w.calls == 0


def test_check_sizes_names_every_size_out_of_range() -> None:
    """Sizes outside 1..ceil(N/T) are an InvalidArgumentError listing them."""
    with pytest.raises(InvalidArgumentError, match=r"0, 9 are outside 1\.\.8"):
        check_sizes([0, 3, 9], 16, 2)
    assert check_sizes([3], 16, 2) == [1, 3]
    assert check_sizes(None, 16, 2) == list(range(1, 9))


@pytest.mark.parametrize(
    ("num_envs", "said"),
    [
        pytest.param(3, "3 envs on 1 thread", id="three"),
        pytest.param(1, "1 env on 1 thread", id="one"),
    ],
)
def test_check_sizes_counts_one_thread_in_the_singular(num_envs: int, said: str) -> None:
    """The range's reason reads "for 3 envs on 1 thread", "for 1 env on 1 thread": one singular."""
    with pytest.raises(InvalidArgumentError, match=rf"\(ceil\(N/T\) for {said}\)$"):
        check_sizes([4], num_envs, 1)


def test_check_sizes_names_each_bad_size_once_in_the_right_number() -> None:
    """A size given twice is named once, and one bad size reads "chunk size 9 is"."""
    with pytest.raises(InvalidArgumentError, match=r"^chunk size 9 is outside 1\.\.8 "):
        check_sizes([9, 3, 9], 16, 2)
    with pytest.raises(InvalidArgumentError, match=r"^chunk sizes 0, 9 are outside"):
        check_sizes([0, 9, 0, 9], 16, 2)


def test_numpy_integers_are_chunk_sizes_and_rounds() -> None:
    """record(sizes=np.arange(...), rounds=np.int64(2)) records them, as plain ints in the trace."""
    w = SimulatedWorkload.from_layout("uniform", num_envs=64, nthread=4)
    trace = record(w, rounds=np.int64(2), sizes=np.arange(2, 5))  # type: ignore[arg-type]
    assert sorted(trace.samples) == [1, 2, 3, 4] and trace.rounds == 2
    assert all(type(c) is int for c in trace.samples) and type(trace.rounds) is int
    assert load_trace_text(dump_trace(trace)) == trace


def load_trace_text(text: str) -> Trace:
    """A trace read back from its JSON text."""
    return trace_from_dict(json.loads(text))


@pytest.mark.parametrize(
    ("sizes", "rounds", "message"),
    [
        pytest.param([2.0, "3"], 2, r"chunk sizes 2\.0, '3' are not integers; expected integers "
                     r"in 1\.\.16", id="not-integers"),
        pytest.param([True, 2], 2, r"chunk size True is not an integer; expected integers in "
                     r"1\.\.", id="bool"),
        pytest.param([2], 2**31, r"rounds must be an integer from 1 to 2147483647",
                     id="rounds-past-a-trace"),
        pytest.param([2], MAX_CALLS // 2 + 1, rf"{MAX_CALLS // 2 + 1} rounds of 2 sizes make "
                     rf"{2 * (MAX_CALLS // 2 + 1)} calls; expected at most {MAX_CALLS} \(",
                     id="calls-past-a-readable-trace"),
    ],
)  # fmt: skip
def test_record_names_sizes_and_rounds_it_cannot_take(
    sizes: list[object], rounds: int, message: str
) -> None:
    """Sizes that are no integers, or more rounds than a trace may hold: said before any call."""

    class Unmeasurable:
        num_envs, nthread = 64, 4

        def signature(self) -> dict[str, str]:
            return {}

        def run(self, chunk_size: int | None) -> float:
            pytest.fail("measured before the check")

    with pytest.raises(InvalidArgumentError, match=message):
        record(Unmeasurable(), rounds=rounds, sizes=sizes)  # type: ignore[arg-type]


@pytest.mark.mujoco
@pytest.mark.slow
@pytest.mark.parametrize(
    ("signum", "status"),
    [pytest.param(signal.SIGINT, 130, id="ctrl-c"), pytest.param(signal.SIGTERM, 143, id="term")],
)
def test_an_interrupt_during_record_writes_no_file(
    tmp_path: Path, signum: signal.Signals, status: int
) -> None:
    """SIGINT (SIGTERM) mid-recording exits 130 (143), says nothing was written, leaves no file."""
    out = tmp_path / "t.json"
    env = {**os.environ, "CHUNKTUNE_SWEEP_LOCK": str(tmp_path / "sweep.lock")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "chunktune", "record", *TINY, "--rounds", "100000",
         "-o", str(out)],
        stderr=subprocess.PIPE, text=True, env=env, cwd=tmp_path,
        # a shell may start background jobs with SIGINT ignored; the CLI must see it
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )  # fmt: skip
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()  # "recording ...": the rounds have begun
        assert "recording" in line
        time.sleep(0.3)
        proc.send_signal(signum)
        _, err = proc.communicate(timeout=30)
    finally:  # never leave a 100000-round recording running behind a failed test
        proc.kill()
        proc.communicate()
    assert proc.returncode == status
    assert "interrupted: no trace was written" in err and "Traceback" not in err
    assert list(tmp_path.glob("*.json")) == [] and list(tmp_path.glob(".*tmp")) == []


@pytest.mark.mujoco
def test_a_ctrl_c_as_the_progress_loads_says_no_trace_was_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A Ctrl-C while the progress display loads (rich's import) writes and says no trace."""
    import chunktune._cli._record_cmd as record_cmd

    def interrupted(*args: Any, **kwargs: Any) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(record_cmd, "_Shown", interrupted)
    out = tmp_path / "t.json"
    assert main(["record", *TINY, "--rounds", "2", "-o", str(out)]) == 130
    err = capsys.readouterr().err
    assert err.strip().splitlines()[-1].endswith("interrupted: no trace was written")
    assert not out.exists()


@pytest.mark.mujoco
def test_a_recording_names_itself_as_the_sweep_lock_holder(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """While recording, the sweep lock's holder note names this process, as a sweep's does."""
    import chunktune._cli._record_cmd as record_cmd
    from chunktune._lock_note import Holder
    from chunktune._locks import sweep_lock

    seen: list[Holder | None] = []

    def noting(*args: Any, **kwargs: Any) -> Trace:
        seen.append(sweep_lock().holder())
        return record(*args, **kwargs)

    monkeypatch.setattr(record_cmd, "record", noting)
    assert main(["record", *TINY, "--rounds", "1", "-q", "-o", str(tmp_path / "t.json")]) == 0
    assert len(seen) == 1 and seen[0] is not None and seen[0].pid == os.getpid()
    assert sweep_lock().holder() is None  # released with the note


@pytest.mark.mujoco
@pytest.mark.slow
def test_a_recording_waits_for_another_sweep_and_says_whose(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A sweep lock held by another process: record says whom it waits for, then records."""
    from chunktune._lock_wait import hold_blocking

    script = (
        "import sys\nfrom chunktune._locks import sweep_lock\n"
        "lock = sweep_lock()\nassert lock.try_acquire()\nprint('held', flush=True)\n"
        "sys.stdin.readline()\nlock.release()\n"
    )
    with subprocess.Popen(
        [sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    ) as holder:
        stdin, stdout = holder.stdin, holder.stdout
        assert stdin is not None and stdout is not None

        def letting_go(lock: Any, *, timeout_s: float) -> Any:
            # the holder lets go as the wait begins (it said whom it waits for just before):
            # a timer a second in waited out that second on every run, and a loaded machine
            # could still reach the wait only after it
            stdin.close()
            return hold_blocking(lock, timeout_s=timeout_s)

        monkeypatch.setattr("chunktune._cli._machine.hold_blocking", letting_go)
        guard = threading.Timer(60.0, stdin.close)  # a hang guard, were that wait never begun
        try:
            assert stdout.readline() == "held\n"
            guard.start()
            out = str(tmp_path / "t.json")
            assert main(["record", *TINY, "--rounds", "1", "-q", "-o", out]) == 0
        finally:
            guard.cancel()
            holder.kill()
    err = capsys.readouterr().err
    assert f"waiting for another sweep to finish (pid {holder.pid}, since " in err
    assert load_trace(tmp_path / "t.json").rounds == 1


def test_a_cancelled_recording_stops_at_the_next_call() -> None:
    """record checks for cancellation before every call, not only before the warm-up."""
    w = SimulatedWorkload.from_layout("uniform", num_envs=64, nthread=4)
    checks = 0

    def cancel_on_third() -> None:
        nonlocal checks
        checks += 1
        if checks == 3:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        record(w, rounds=4, sizes=[2, 8], check_cancelled=cancel_on_third)
    assert w.calls == 2  # the warm-up and the first probe


@pytest.mark.parametrize("bad", [float("nan"), -1.0, True, "0.1"])
def test_a_run_that_returns_no_seconds_is_a_workload_error_naming_the_size(bad: object) -> None:
    """A recording refuses what run() returned when it is no seconds, before it goes in a trace."""

    class Broken:
        num_envs, nthread = 64, 4

        def signature(self) -> dict[str, str]:
            return {}

        def run(self, chunk_size: int | None) -> object:
            return 0.1 if chunk_size is None else bad

    with pytest.raises(WorkloadError, match=r"run\(\d+\) returned"):
        record(Broken(), rounds=1, sizes=[2])  # type: ignore[arg-type]


def test_check_sizes_refuses_an_empty_list() -> None:
    """sizes=[] is an InvalidArgumentError, not a recording of native alone."""
    with pytest.raises(InvalidArgumentError, match="sizes is empty"):
        check_sizes([], 16, 2)


def test_a_recording_keeps_the_machines_load_at_its_start_and_end() -> None:
    """The trace's machine holds the load average before and after the recording."""
    w = SimulatedWorkload.from_layout("uniform", num_envs=64, nthread=4)
    machine = record(w, rounds=1, sizes=[2]).machine
    assert isinstance(machine["loadavg_start"], list) and isinstance(machine["loadavg_end"], list)


@pytest.mark.mujoco
def test_record_measures_the_sizes_and_seed_asked_for(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--sizes and --seed reach the recording: only those sizes (and native's), in that order."""
    from chunktune._cli import _record_cmd

    seen: dict[str, Any] = {}

    def spy(workload: Any, **kwargs: Any) -> Trace:
        seen.update(kwargs)
        return record(workload, **kwargs)

    monkeypatch.setattr(_record_cmd, "record", spy)
    out = tmp_path / "few.json"
    args = ["record", *TINY, "--rounds", "2", "--sizes", "2", "--seed", "7", "-q", "-o", str(out)]
    assert main(args) == 0
    assert (seen["sizes"], seen["seed"]) == ([2], 7)
    assert sorted(load_trace(out).samples) == [1, 2]  # native's size for 8 envs on 2 threads is 1


def test_record_sizes_all_or_a_list_with_a_trailing_comma_parse() -> None:
    """--sizes all means every size (None); a list's empty parts (a last comma) are dropped."""
    from chunktune._cli import build_parser

    parser = build_parser()
    assert parser.parse_args(["record", "--sizes", "all", "-o", "t.json"]).sizes is None
    assert parser.parse_args(["record", "--sizes", "2,4,", "-o", "t.json"]).sizes == [2, 4]


@pytest.mark.mujoco
def test_record_takes_a_json_suffix_in_capitals(tmp_path: Path) -> None:
    """-o NAME.JSON is a JSON trace's name as NAME.json is: the recording is written."""
    out = tmp_path / "t.JSON"
    assert main(["record", *TINY, "--rounds", "1", "--sizes", "2", "-q", "-o", str(out)]) == 0
    assert load_trace(out).rounds == 1


@pytest.mark.mujoco
@pytest.mark.parametrize(
    ("rounds", "sizes", "said"),
    [
        pytest.param("3", "2", ": 2 sizes x 3 rounds = 6 calls", id="many"),
        pytest.param("1", "1", ": 1 size x 1 round = 1 call", id="one-of-each"),
    ],
)
def test_record_says_how_many_calls_the_sizes_asked_for_make(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], rounds: str, sizes: str, said: str
) -> None:
    """The first line counts the sizes asked for (and native's) times the rounds, in English."""
    out = tmp_path / "t.json"
    assert main(["record", *TINY, "--rounds", rounds, "--sizes", sizes, "-o", str(out)]) == 0
    assert said in capsys.readouterr().err.splitlines()[0]


def test_off_a_terminal_a_round_is_said_once_due_and_the_last_never(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Off a terminal a round is said once PLAIN_EVERY_S (or exactly it) passed; the last never."""
    from chunktune import ProgressEvent
    from chunktune._cli._record_cmd import PLAIN_EVERY_S, _Shown

    shown = _Shown(3, 2, quiet=False)
    calls = [(1, 1.0), (1, PLAIN_EVERY_S), (2, 35.0), (2, 40.0), (3, 50.0), (3, 100.0)]
    for round_, elapsed in calls:
        shown(ProgressEvent(kind="probe", chunk_size=2, round=round_, elapsed_s=elapsed))
    assert capsys.readouterr().err.splitlines() == [
        "chunktune: round 1/3 done: 2 of 6 calls in 30 s, about 60 s left"
    ]


@pytest.mark.parametrize(
    ("per_round", "elapsed", "said"),
    [
        pytest.param(
            128, 44.0, "round 2/24 done: 256 of 3072 calls in 44 s, about 8 min left", id="minutes"
        ),
        pytest.param(
            2, 40.0, "round 2/3 done: 4 of 6 calls in 40 s, about 20 s left", id="seconds"
        ),
    ],
)
def test_off_a_terminal_a_finished_round_says_about_how_long_is_left(
    capsys: pytest.CaptureFixture[str], per_round: int, elapsed: float, said: str
) -> None:
    """A round said off a terminal gives the time left at the pace so far, in s or min."""
    from chunktune import ProgressEvent
    from chunktune._cli._record_cmd import _Shown

    shown = _Shown(3 if per_round == 2 else 24, per_round, quiet=False)
    for call in range(2 * per_round):
        at = elapsed if call == 2 * per_round - 1 else 1.0
        shown(ProgressEvent(kind="probe", chunk_size=2, round=1 + call // per_round, elapsed_s=at))
    assert capsys.readouterr().err.splitlines() == [f"chunktune: {said}"]


class NumpySigned:
    """A modeled workload whose signature() holds numpy numbers, as a trainer's often does."""

    def __init__(self, signature: dict[str, object]) -> None:
        self._sim = SimulatedWorkload.from_layout("blocked", num_envs=64, nthread=4)
        self.num_envs, self.nthread = self._sim.num_envs, self._sim.nthread
        self._signature = signature
        self.calls = 0

    def signature(self) -> dict[str, object]:
        return self._signature

    def run(self, chunk_size: int | None) -> float:
        self.calls += 1
        return self._sim.run(chunk_size)


def test_a_recorded_signature_of_numpy_numbers_is_keyed_as_resolve_keys_it() -> None:
    """record() keeps a numpy signature as resolve does: plain numbers, the same cache key."""
    w = NumpySigned(
        {"kind": "np", "bodies": np.int64(24), "dt": np.float32(0.5), "soft": np.bool_(True),
         "scale": np.array(2.5), "name": "box"}
    )  # fmt: skip
    trace = record(w, rounds=1, sizes=[2])  # type: ignore[arg-type]
    decision = resolve_sync(w, policy="quick")  # type: ignore[arg-type]
    key = cache_key(
        trace.signature,
        num_envs=trace.num_envs,
        nthread=trace.nthread,
        device=device_fingerprint(),
        policy_hash=policy_identity(pick_policy(load_settings(), "quick")[1])[0],
    )
    assert key == decision.key
    plain = {"kind": "np", "bodies": 24, "dt": 0.5, "soft": True, "scale": 2.5, "name": "box"}
    assert trace.signature == plain
    assert [type(v) for v in trace.signature.values()] == [type(v) for v in plain.values()]
    assert load_trace_text(dump_trace(trace)).signature == plain  # and it reads back so


@pytest.mark.parametrize(
    "bad",
    [
        pytest.param(np.float64("nan"), id="nan"),
        pytest.param(np.array([1, 2]), id="array"),
        pytest.param(None, id="none"),
    ],
)
def test_a_signature_resolve_would_refuse_is_refused_before_recording(bad: object) -> None:
    """A signature value resolve cannot key is a WorkloadError before any run() is made."""
    w = NumpySigned({"kind": "np", "bad": bad})
    with pytest.raises(WorkloadError, match="signature"):
        record(w, rounds=1, sizes=[2])  # type: ignore[arg-type]
    assert w.calls == 0


@pytest.mark.parametrize("option", ["--rounds", "--seed"])
def test_record_s_defaults_are_those_its_help_states(option: str) -> None:
    """--rounds and --seed default to the values `record --help` gives for them."""
    from chunktune._cli import build_parser

    parser = build_parser()
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    action = next(a for a in commands.choices["record"]._actions if option in a.option_strings)
    stated = re.search(r"\(default: (\d+)\)", action.help or "")
    assert stated
    assert parser.parse_args(["record", "-o", "t.json"]).__dict__[action.dest] == int(stated[1])


def test_record_takes_rounds_up_to_the_count_it_states(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--rounds 2**31-1 is in range: the refusal that follows is of the missing model, not it."""
    from chunktune._workload import MAX_COUNT

    out = tmp_path / "t.json"
    argv = ["record", str(tmp_path / "none.xml"), "--rounds", str(MAX_COUNT), "-o", str(out)]
    assert main(argv) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert "none.xml" in line and "--rounds" not in line
    assert main([*argv[:3], str(MAX_COUNT + 1), *argv[4:]]) == 2
    assert f"--rounds {MAX_COUNT + 1}: expected at most {MAX_COUNT}" in capsys.readouterr().err


@pytest.mark.mujoco
def test_a_recording_cut_short_lets_the_sweep_lock_go(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Ctrl-C in a recording (exit 130) releases the sweep lock: the next sweep takes it at once."""
    import chunktune._cli._record_cmd as record_cmd
    from chunktune._locks import sweep_lock

    def interrupted(*args: Any, **kwargs: Any) -> Trace:
        raise KeyboardInterrupt

    monkeypatch.setattr(record_cmd, "record", interrupted)
    assert main(["record", *TINY, "--rounds", "1", "-q", "-o", str(tmp_path / "t.json")]) == 130
    lock = sweep_lock()
    assert lock.holder() is None
    assert lock.try_acquire()
    lock.release()


def test_a_quiet_recording_says_no_round(capsys: pytest.CaptureFixture[str]) -> None:
    """-q: off a terminal, rounds that are due to be said are not, nor is anything else."""
    from chunktune import ProgressEvent
    from chunktune._cli._record_cmd import PLAIN_EVERY_S, _Shown

    shown = _Shown(3, 1, quiet=True)
    for round_ in (1, 2, 3):
        shown(
            ProgressEvent(
                kind="probe", chunk_size=2, round=round_, elapsed_s=PLAIN_EVERY_S * round_
            )
        )
    assert capsys.readouterr() == ("", "")


@pytest.mark.parametrize("name", ["t.Json", "t.jSON"])
def test_a_json_suffix_in_any_case_is_a_trace_s_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    """-o t.Json passes the suffix check in any mix of cases: what is refused next is the model."""
    argv = ["record", str(tmp_path / "none.xml"), "-o", str(tmp_path / name)]
    assert main(argv) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert "none.xml" in line and "must end in .json" not in line


def test_record_to_a_directory_is_refused_before_a_call_is_measured(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """-o naming a directory: exit 2 at once, saying so, not after minutes of measuring."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "d.json").mkdir()
    assert main(["record", *TINY, "-o", "d.json"]) == 2
    err = capsys.readouterr().err
    assert "-o d.json is a directory; expected a file's name" in err
    assert "recording" not in err and "Traceback" not in err


def test_record_to_a_name_too_long_is_refused_before_a_call_is_measured(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """-o with a name longer than the file system takes: exit 2 at once, not after measuring."""
    monkeypatch.chdir(tmp_path)
    name = "a" * 300 + ".json"
    assert main(["record", *TINY, "-o", name]) == 2
    err = capsys.readouterr().err
    assert f"-o {name}: File name too long" in err
    assert "recording" not in err and "Traceback" not in err


class _ClosableSim(SimulatedWorkload):
    """A simulated workload that record may close, as it closes the pool it built."""

    def close(self) -> None:
        pass


@pytest.mark.parametrize(
    ("renamed", "said"),
    [
        pytest.param(True, "interrupted: the trace was written to ", id="after-the-rename"),
        pytest.param(False, "interrupted: no trace was written", id="before-the-rename"),
    ],
)
def test_a_ctrl_c_as_the_trace_is_written_says_whether_it_was(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    renamed: bool,
    said: str,
) -> None:
    """Ctrl-C as the whole recording is written: exit 130, and the line says whether it was."""
    import chunktune._cli._record_cmd as record_cmd
    from chunktune._atomic import write_atomic

    def interrupted(path: Path, data: bytes) -> None:
        if renamed:
            write_atomic(path, data)
        raise KeyboardInterrupt

    workload = _ClosableSim.from_layout("blocked", num_envs=8, nthread=2)
    monkeypatch.setattr(record_cmd, "load_workload", lambda args, nthread: (workload, "sim"))
    monkeypatch.setattr(record_cmd, "write_atomic", interrupted)
    out = tmp_path / "t.json"
    assert main(["record", "--rounds", "1", "-q", "-o", str(out)]) == 130
    line = capsys.readouterr().err.splitlines()[-1]
    assert said in line
    assert out.exists() is renamed
    if renamed:
        assert line.endswith(str(out)) and load_trace(out).rounds == 1


def test_a_recording_of_one_size_past_the_calls_cap_says_one_size() -> None:
    """One size in too many rounds: "rounds of 1 size make", not "1 sizes"."""
    with pytest.raises(InvalidArgumentError, match=rf"^{MAX_CALLS + 1} rounds of 1 size make "):
        check_calls(1, MAX_CALLS + 1)


def test_a_recording_of_exactly_the_calls_cap_is_taken() -> None:
    """README's cap, 26,843,545 calls, is the most allowed: that many pass, one more is refused."""
    check_calls(1, 26_843_545)
    check_calls(26_843_545, 1)
    with pytest.raises(InvalidArgumentError, match="make 26843546 calls; expected at most"):
        check_calls(1, 26_843_546)


def test_a_recording_past_the_calls_cap_is_refused_before_it_is_announced(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """record refuses sizes x rounds past the cap as its one line, with no 'recording' line."""
    argv = ["record", *TINY, "-o", str(tmp_path / "t.json"), "--rounds", "2147483647"]
    assert main([*argv, "--sizes", "2"]) == 2
    err = capsys.readouterr().err
    assert "calls; expected at most" in err and "recording" not in err


def test_a_recording_kept_elsewhere_closes_a_descriptor_that_cannot_become_a_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """record's fallback copy: a failed fdopen of its temporary closes it and leaves none."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    made: list[int] = []
    real_mkstemp = tempfile.mkstemp

    def mkstemp(*args: object, **kwargs: object) -> tuple[int, str]:
        fd, name = real_mkstemp(*args, **kwargs)  # type: ignore[call-overload]
        made.append(fd)
        return fd, name

    def fdopen(fd: int, *args: object, **kwargs: object) -> None:
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(tempfile, "mkstemp", mkstemp)
    monkeypatch.setattr(os, "fdopen", fdopen)
    assert _record_cmd._keep_elsewhere(b"{}") is None
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(OSError, match="Bad file descriptor"):  # closed, not left open
        os.fstat(made[0])
