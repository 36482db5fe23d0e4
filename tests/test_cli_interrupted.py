"""`chunktune tune` ended by Ctrl-C once its decision is made: the loop closed whole and a
line that says what was decided and cached (``_cli._tune_interrupted``)."""

from __future__ import annotations

import functools
import json
import signal
import subprocess
import sys
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import pytest

from chunktune._cache import DecisionCache
from chunktune._cli import _tune_cmd, main
from chunktune._cli._tune_interrupted import NOTHING_DECIDED, NOTHING_MEASURED, SWEEP_STOPPED
from chunktune._decision import Decision
from chunktune._events import ProgressEvent
from chunktune._threads import run_held
from chunktune.sim import SimulatedWorkload

# The child's tune: a simulated workload under the quick policy, the cache in its cwd (the
# test's tmp_path, as the isolated fixture's CHUNKTUNE_CACHE names it). The stage before
# it sends the Ctrl-C; what it prints after is what the test reads.
CHILD_HEAD = """
import asyncio.selector_events as selector_events
import gc, json, os, signal, sys, threading
from chunktune import _sigint
from chunktune._cache import DecisionCache
from chunktune._cli import _tune_cmd, main
from chunktune._cli._tune_interrupted import SWEEP_STOPPED
from chunktune.sim import SimulatedWorkload

def ctrl_c():
    os.kill(os.getpid(), signal.SIGINT)

made = []

def simulated(args, nthread):
    made.append(nthread)
    return SimulatedWorkload.from_layout("blocked", num_envs=64, nthread=4), "sim"

# replaced only where it is: a name set that tune never calls would leave the child
# sweeping the real demo scene for the policy's budget (as a rename of it once did)
assert hasattr(_tune_cmd, "tune_workload")
_tune_cmd.tune_workload = simulated
loops = []
"""

CHILD_TAIL = """
code = main(["tune", "--policy", "quick", "-q"])
closed = [loop.is_closed() for loop in loops]
loops.clear()
gc.collect()  # a loop left half closed prints its __del__'s error now
entries = DecisionCache(os.environ["CHUNKTUNE_CACHE"]).entries()
print(json.dumps({"code": code, "closed": closed, "entries": len(entries), "made": len(made)}))
"""

# Ctrl-C inside the loop's close(), once its self-pipe is shut: raised there, it left the
# loop half closed and Python printing "Exception ignored in BaseEventLoop.__del__"
AS_THE_LOOP_CLOSES = """
closing = selector_events.BaseSelectorEventLoop._close_self_pipe

def close_self_pipe(self):
    loops.append(self)
    closing(self)
    ctrl_c()

selector_events.BaseSelectorEventLoop._close_self_pipe = close_self_pipe
"""

# Ctrl-C in the loop's main task just after resolve returned: the loop's Ctrl-C handler
# cancels the task on its last step, which discards the decision
AS_RESOLVE_RETURNS = """
resolving = _tune_cmd.resolve

async def resolve(*args, **kwargs):
    decision = await resolving(*args, **kwargs)
    ctrl_c()
    return decision

_tune_cmd.resolve = resolve
"""

# `asked` is set once the loop's Ctrl-C handler has run (it cancels the resolve): the one
# run_held sets in asyncio.run's stead (_sigint.LoopHold)
SIGINT_ASKED = """
asked = threading.Event()
on_sigint = _sigint._Cancelling.__call__

def noting(self, *args, **kwargs):
    try:
        return on_sigint(self, *args, **kwargs)
    finally:
        asked.set()

_sigint._Cancelling.__call__ = noting
"""

# Ctrl-C as the decision is stored: the write waits until the cancel has been asked, so
# resolve raises while the write, in a thread of its own, goes on to finish
AS_IT_IS_STORED = (
    SIGINT_ASKED
    + """
putting = DecisionCache.put

def put(self, key, entry):
    ctrl_c()
    assert asked.wait(60), "the Ctrl-C never reached the loop's handler"
    return putting(self, key, entry)

DecisionCache.put = put
"""
)

# Ctrl-C while the sweep's first call runs (a real batch's first warm-up may take
# seconds): the call returns only once the loop's handler has cancelled the resolve, so
# its event reaches nobody
IN_THE_FIRST_CALL = (
    SIGINT_ASKED
    + """
running = SimulatedWorkload.run

def run(self, chunk_size):
    if not asked.is_set():
        ctrl_c()
        assert asked.wait(60), "the Ctrl-C never reached the loop's handler"
    return running(self, chunk_size)

SimulatedWorkload.run = run
"""
)


def _tune_with_ctrl_c(stage: str) -> tuple[dict[str, Any], str]:
    """The child's report and stderr, SIGINT at its default there (a shell's background job
    starts with it ignored): the child must see the Ctrl-C it sends itself."""
    done = subprocess.run(
        [sys.executable, "-c", CHILD_HEAD + stage + CHILD_TAIL],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    assert done.returncode == 0 and done.stdout, done.stderr
    return json.loads(done.stdout.splitlines()[-1]), done.stderr


@pytest.mark.slow
@pytest.mark.parametrize(
    ("stage", "said"),
    [
        pytest.param(
            AS_THE_LOOP_CLOSES,
            "interrupted after the decision was made: chunk_size=",
            id="as-the-loop-closes",
        ),
        pytest.param(
            AS_RESOLVE_RETURNS,
            "interrupted after the decision was made: chunk_size=",
            id="as-resolve-returns",
        ),
        pytest.param(
            AS_IT_IS_STORED,
            "interrupted as the sweep's decision was stored: chunk_size=",
            id="as-it-is-stored",
        ),
    ],
)
def test_a_ctrl_c_once_the_decision_is_made_says_it_was_cached(stage: str, said: str) -> None:
    """Ctrl-C after the sweep: exit 130, the loop closed whole, the decision said and cached."""
    report, err = _tune_with_ctrl_c(stage)
    lines = [line for line in err.splitlines() if line.startswith("chunktune: interrupted")]
    assert len(lines) == 1, err
    assert said in lines[0] and "measured now" in lines[0], err
    assert "cached (cache key " in lines[0], err
    assert "nothing was cached" not in err
    assert "Exception ignored" not in err and "Traceback" not in err, err
    assert report["code"] == 130
    assert report["closed"] in ([], [True])  # the loop the Ctrl-C came in, closed whole
    assert report["entries"] == 1
    assert report["made"] == 1  # the simulated workload was swept, not the demo scene


@pytest.mark.slow
def test_a_ctrl_c_in_the_sweep_s_first_call_says_the_sweep_stopped() -> None:
    """Ctrl-C in the sweep's first call: 'the sweep stopped', not 'before anything was measured'."""
    report, err = _tune_with_ctrl_c(IN_THE_FIRST_CALL)
    lines = [line for line in err.splitlines() if line.startswith("chunktune: interrupted")]
    assert lines == [f"chunktune: {SWEEP_STOPPED}"], err
    assert (report["code"], report["entries"], report["made"]) == (130, 0, 1)


def _sim(num_envs: int = 64) -> SimulatedWorkload:
    return SimulatedWorkload.from_layout("blocked", num_envs=num_envs, nthread=4)


class _Failing:
    num_envs = 16
    nthread = 2

    def signature(self) -> dict[str, str]:
        return {"kind": "test.failing"}

    def run(self, chunk_size: int | None) -> float:
        raise RuntimeError("the simulation exploded")


def _ctrl_c_after_returning(
    call: Callable[[], Coroutine[Any, Any, Decision]], *, returned: Callable[[Decision], object]
) -> Decision:
    """run_held, then the Ctrl-C that came once call() had returned (as the loop closed)."""
    run_held(call, returned=returned)
    raise KeyboardInterrupt


@pytest.mark.parametrize(
    ("workload", "config", "policy", "said"),
    [
        pytest.param(
            _sim,
            "",
            "quick",
            "measured now and cached (cache key ",
            id="measured",
        ),
        pytest.param(
            _sim,
            "[cache]\nenabled = false\n",
            "quick",
            "measured now; not cached: the cache is disabled",
            id="cache-disabled",
        ),
        pytest.param(
            _Failing,
            "",
            "quick",
            "not measured to the end; not cached, as a fallback never is",
            id="fallback",
        ),
        pytest.param(_sim, "", "off", "policy disabled; nothing to cache", id="policy-off"),
        pytest.param(
            lambda: _sim(num_envs=4), "", "quick", "nothing to tune; nothing to cache", id="trivial"
        ),
    ],
)
def test_a_ctrl_c_after_resolve_returned_says_what_was_decided(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    workload: Callable[[], Any],
    config: str,
    policy: str,
    said: str,
) -> None:
    """Ctrl-C once resolve returned: exit 130, the decision and whether it was cached said."""
    settings = tmp_path / "chunktune.toml"
    settings.write_text(config)
    monkeypatch.setattr(_tune_cmd, "tune_workload", lambda args, nthread: (workload(), "x"))
    monkeypatch.setattr(_tune_cmd, "run_held", _ctrl_c_after_returning)
    argv = ["tune", "--config", str(settings), "--policy", policy, "-q"]
    assert main(argv) == 130
    err = capsys.readouterr().err
    line = err.splitlines()[-1]
    assert line.startswith("chunktune: interrupted after the decision was made: chunk_size=")
    assert said in line, err
    stored = DecisionCache(tmp_path / "cache.json").entries()
    assert len(stored) == (1 if "and cached" in said else 0)


def test_a_ctrl_c_after_a_cache_hit_says_it_came_from_the_cache(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Ctrl-C after a cache hit returned: exit 130, the decision said to come from the cache."""
    monkeypatch.setattr(_tune_cmd, "tune_workload", lambda args, nthread: (_sim(), "x"))
    assert main(["tune", "--policy", "quick", "-q"]) == 0
    capsys.readouterr()
    monkeypatch.setattr(_tune_cmd, "run_held", _ctrl_c_after_returning)
    assert main(["tune", "--policy", "quick", "-q"]) == 130
    line = capsys.readouterr().err.splitlines()[-1]
    assert "interrupted after the decision was made: chunk_size=" in line
    assert "; from the cache (cache key " in line


@pytest.mark.parametrize(
    ("calls", "said"),
    [
        pytest.param(1, SWEEP_STOPPED, id="mid-sweep"),
        pytest.param(0, NOTHING_MEASURED, id="before"),
    ],
)
def test_a_ctrl_c_before_resolve_returned_says_the_sweep_stopped(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    calls: int,
    said: str,
) -> None:
    """Ctrl-C as resolve runs: exit 130, no entry, the line as far as the sweep had come."""

    def interrupted(call: functools.partial[Decision], *, returned: object) -> Decision:
        for _ in range(calls):
            call.keywords["on_progress"](ProgressEvent(kind="probe", chunk_size=2, seconds=0.1))
        raise KeyboardInterrupt

    monkeypatch.setattr(_tune_cmd, "tune_workload", lambda args, nthread: (_sim(), "x"))
    monkeypatch.setattr(_tune_cmd, "run_held", interrupted)
    assert main(["tune", "--policy", "quick", "-q"]) == 130
    err = capsys.readouterr().err
    assert err.splitlines()[-1] == f"chunktune: {said}"
    assert DecisionCache(tmp_path / "cache.json").entries() == {}


# native_chunk(64, 4) is 1: a policy whose only size is 1 proposes nothing but native
_NATIVE_ONLY = (
    '[policies.nat]\nextends = "quick"\n'
    '[policies.nat.candidates]\nstrategy = "explicit"\nsizes = [1]\n'
)


@pytest.mark.parametrize(
    ("num_envs", "policy"),
    [(64, "off"), (4, "quick"), (64, "nat")],
    ids=["disabled", "trivial", "native-only"],
)
def test_a_ctrl_c_where_no_sweep_runs_does_not_say_a_sweep_stopped(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    num_envs: int,
    policy: str,
) -> None:
    """Ctrl-C before a measureless resolve returned: 130, 'before a decision', no sweep named."""
    # a policy that never measures, a batch of at most one chunk per thread, or a policy
    # that proposes no size but native's for this batch

    def interrupted(call: object, *, returned: object) -> Decision:
        raise KeyboardInterrupt

    config = tmp_path / "nat.toml"
    config.write_text(_NATIVE_ONLY)
    workload = _sim(num_envs)
    monkeypatch.setattr(_tune_cmd, "tune_workload", lambda args, nthread: (workload, "x"))
    monkeypatch.setattr(_tune_cmd, "run_held", interrupted)
    assert main(["tune", "--policy", policy, "--config", str(config), "-q"]) == 130
    assert capsys.readouterr().err.splitlines()[-1] == f"chunktune: {NOTHING_DECIDED}"
    assert not (tmp_path / "cache.json").exists()
