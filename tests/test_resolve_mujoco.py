"""resolve end to end on real MuJoCo rollouts of a tiny model."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import mujoco
import numpy as np
import pytest

import chunktune

pytestmark = pytest.mark.mujoco

TINY = """
<mujoco>
  <option timestep="0.005"/>
  <worldbody>
    <geom type="plane" size="2 2 0.1"/>
    <body pos="0 0 0.2"><freejoint/><geom type="box" size="0.05 0.05 0.05"/></body>
    <body pos="0.02 0 0.35"><freejoint/><geom type="box" size="0.05 0.05 0.05"/></body>
  </worldbody>
</mujoco>
"""


def fast_settings(tmp: Path) -> chunktune.Settings:
    cfg = tmp / "fast.toml"
    cfg.write_text(
        'policy = "fast"\n[policies.fast]\nextends = "quick"\nmax_rounds = 3\nmin_rounds = 2\n'
        "time_budget_s = 5.0\n"
    )
    return chunktune.load_settings(cfg)


def test_rollout_workload_resolves_and_caches(isolated: Path) -> None:
    """A real RolloutWorkload sweeps, its chunk runs in the pool, and a second resolve hits."""
    path = isolated / "tiny.xml"
    path.write_text(TINY)
    settings = fast_settings(isolated)
    with chunktune.RolloutWorkload.from_xml(path, num_envs=32, nthread=2, nstep=3) as w:
        first = chunktune.resolve_sync(w, settings=settings)
        assert first.source == "benchmark"
        assert first.timings[None] > 0
        w.run(first.chunk_size)  # the chosen chunk is accepted by the real pool
        second = chunktune.resolve_sync(w, settings=settings)
    assert second.source == "cache" and second.chunk_size == first.chunk_size
    stored = json.loads((isolated / "cache.json").read_text())["entries"][first.key]
    assert stored["model_file"] == str(path)
    assert stored["signature"]["kind"] == "mujoco.rollout"


def test_model_variants_get_their_own_entry(isolated: Path) -> None:
    """A batch of model variants resolves under a different key than the single model."""
    settings = fast_settings(isolated)
    base = mujoco.MjModel.from_xml_string(TINY)
    heavy = mujoco.MjModel.from_xml_string(TINY)
    heavy.body_mass[1:] *= 3.0
    single = chunktune.RolloutWorkload(base, num_envs=16, nthread=2, nstep=2)
    variants = chunktune.RolloutWorkload([base, heavy], num_envs=16, nthread=2, nstep=2)
    a = chunktune.resolve_sync(single, settings=settings)
    b = chunktune.resolve_sync(variants, settings=settings)
    assert a.key != b.key
    assert {a.source, b.source} == {"benchmark"}
    single.close()
    variants.close()


def test_variants_drawn_afresh_under_one_model_label_are_answered_from_the_cache(
    isolated: Path,
) -> None:
    """A domain-randomized batch drawn again under its model_label is a hit, not a new sweep."""
    settings = fast_settings(isolated)
    rng = np.random.default_rng(0)

    def draw() -> list[mujoco.MjModel]:
        variants = []
        for _ in range(2):
            m = mujoco.MjModel.from_xml_string(TINY)
            m.body_mass[1:] *= rng.uniform(0.8, 1.2, size=m.nbody - 1)
            variants.append(m)
        return variants

    with chunktune.RolloutWorkload(draw(), num_envs=16, nthread=2, nstep=2, model_label="dr") as w:
        first = chunktune.resolve_sync(w, settings=settings)
    with chunktune.RolloutWorkload(draw(), num_envs=16, nthread=2, nstep=2, model_label="dr") as w:
        again = chunktune.resolve_sync(w, settings=settings)
    assert first.source == "benchmark"
    assert (again.source, again.key, again.chunk_size) == ("cache", first.key, first.chunk_size)
    stored = json.loads((isolated / "cache.json").read_text())["entries"][first.key]
    assert stored["signature"]["model_label"] == "dr"


def test_chunk_size_never_changes_the_physics() -> None:
    """Rollouts with native and a tuned chunk give bit-identical states."""
    model = mujoco.MjModel.from_xml_string(TINY)
    with chunktune.RolloutWorkload(model, num_envs=12, nthread=2, nstep=4) as w:
        w.run(None)
        native = np.array(w.state)
        w.run(1)
        assert np.array_equal(native, w.state)


# The trainer's side of a resolve cancelled mid-probe, in a process of its own (two
# threads in one MuJoCo pool end the process, not a test). The pool records whether it
# was in use when the resolve returned and whether two threads were ever inside it.
CANCEL_THEN_STEP = '''
import sys
import threading
import time

import anyio
import mujoco
import mujoco.rollout
import numpy as np

import chunktune

MODE, BACKEND, XML = sys.argv[1], sys.argv[2], sys.argv[3]
NUM_ENVS, NTHREAD, NSTEP = 64, 2, 1500


class WatchedPool:
    """The trainer's own pool: it records who is inside it."""

    def __init__(self) -> None:
        self.pool = mujoco.rollout.Rollout(nthread=NTHREAD)
        self.nthread = NTHREAD
        self.inside = 0
        self.overlapped = False
        self.lock = threading.Lock()
        self.entered = threading.Event()

    def rollout(self, *args, **kwargs):
        with self.lock:
            self.inside += 1
            self.overlapped |= self.inside > 1
        first = not self.entered.is_set()
        self.entered.set()
        try:
            self.pool.rollout(*args, **kwargs)
            if first:  # the probe in flight outlasts any prompt return of a cancel
                time.sleep(0.5)
        finally:
            with self.lock:
                self.inside -= 1


model = mujoco.MjModel.from_xml_string(XML)
pool = WatchedPool()
workload = chunktune.RolloutWorkload(
    model, num_envs=NUM_ENVS, nthread=NTHREAD, nstep=NSTEP, rollout=pool
)
balanced = chunktune.load_settings().get_policy("balanced")


async def cancelled() -> None:
    async with anyio.create_task_group() as tg:
        tg.start_soon(chunktune.resolve, workload)
        await anyio.to_thread.run_sync(pool.entered.wait)
        tg.cancel_scope.cancel()


if MODE == "cancel":
    anyio.run(cancelled, backend=BACKEND)
else:  # past hard_limit_s, from plain code
    import attrs

    policy = attrs.evolve(balanced, time_budget_s=0.05, hard_limit_s=0.1)
    decision = chunktune.resolve_sync(workload, policy=policy)
    assert decision.source == "fallback", decision
in_use = pool.inside
data = [mujoco.MjData(model) for _ in range(NTHREAD)]
spec = mujoco.mjtState.mjSTATE_FULLPHYSICS
state = np.empty(mujoco.mj_stateSize(model, spec))
mujoco.mj_getState(model, data[0], state, spec)
for _ in range(3):  # the trainer's steps, on its pool, with no close() first
    pool.rollout(model, data, np.tile(state, (NUM_ENVS, 1)), nstep=20)
if in_use or pool.overlapped:
    sys.exit(f"the pool was in use at the return: {in_use}, overlapped: {pool.overlapped}")
'''


@pytest.mark.slow
@pytest.mark.parametrize(
    ("mode", "backend"),
    [
        pytest.param("cancel", "asyncio", id="cancel-asyncio"),
        pytest.param("cancel", "trio", id="cancel-trio"),
        pytest.param("limit", "asyncio", id="hard-limit-resolve-sync"),
    ],
)
def test_a_cancelled_resolve_hands_the_callers_pool_back_idle(
    isolated: Path, mode: str, backend: str
) -> None:
    """A resolve of the trainer's own pool, cancelled mid-probe, returns with the pool idle."""
    script = isolated / "cancel_then_step.py"
    script.write_text(CANCEL_THEN_STEP)
    done = subprocess.run(
        [sys.executable, str(script), mode, backend, TINY],
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stderr[-3000:]


# A trainer that exits right after a resolve it cancelled, or that hard_limit_s ended, with
# the probe in flight on the workload's own pool. A call that returns into a finalizing
# Python kills the process (a segmentation fault, most runs with the demo at 256 envs), so
# the exit must wait for it. The pool's first call is held in flight for 1 s (the script
# reaches its exit within milliseconds of the cancel, or of the 0.1 s limit); a check that
# Python's exit runs after chunktune's (registered first, so called last) sees whether a
# call is still in flight there.
EXIT_AFTER_CANCEL = '''
import atexit
import os
import signal
import sys
import threading
import time

import anyio
import mujoco
import mujoco.rollout

MODE, XML = sys.argv[1], sys.argv[2]
Rollout = mujoco.rollout.Rollout


sent = threading.Event()  # the Ctrl-C is sent: a loaded machine may start its thread late


class HeldPool:
    """What the workload makes as its own pool: its first call stays in flight for 1 s (after
    the Ctrl-C, when there is one: else a starved sender could find the resolve done)."""

    def __init__(self, nthread: int) -> None:
        self.pool = Rollout(nthread=nthread)
        self.inside = 0
        self.entered = threading.Event()

    def rollout(self, *args, **kwargs):
        self.inside += 1
        first = not self.entered.is_set()
        self.entered.set()
        try:
            self.pool.rollout(*args, **kwargs)
            if first:
                if MODE == "interrupt":
                    sent.wait(60)
                time.sleep(1.0)
        finally:
            self.inside -= 1

    def close(self) -> None:
        self.pool.close()


pools = []


def make_pool(*, nthread: int) -> HeldPool:
    pools.append(HeldPool(nthread))
    return pools[-1]


def after_chunktune() -> None:
    if any(pool.inside for pool in pools):
        os.write(2, b"a pool call was still in flight as Python finalized\\n")
        os._exit(3)


atexit.register(after_chunktune)
mujoco.rollout.Rollout = make_pool

import attrs
import chunktune

model = mujoco.MjModel.from_xml_string(XML)
workload = chunktune.RolloutWorkload(model, num_envs=16, nthread=2, nstep=5)
balanced = chunktune.load_settings().get_policy("balanced")


def entered() -> None:
    while not pools:
        time.sleep(0.01)
    pools[0].entered.wait()


async def cancelled() -> None:
    async with anyio.create_task_group() as tg:
        tg.start_soon(chunktune.resolve, workload)
        await anyio.to_thread.run_sync(entered)
        tg.cancel_scope.cancel()


if MODE in ("asyncio", "trio"):
    anyio.run(cancelled, backend=MODE)
elif MODE == "interrupt":
    # where it stood, for the failure message: a SIGINT ignored from the start (a
    # background job's) ends nothing, and that is no loss of chunktune's
    print(f"phase: start, SIGINT handler {signal.getsignal(signal.SIGINT)!r}", file=sys.stderr)

    def interrupt() -> None:
        entered()
        os.kill(os.getpid(), signal.SIGINT)
        print("phase: SIGINT sent, the first pool call held", file=sys.stderr, flush=True)
        sent.set()

    threading.Thread(target=interrupt, daemon=True).start()
    try:
        decision = chunktune.resolve_sync(workload)
    except KeyboardInterrupt:
        sys.exit(130)
    print(f"phase: resolve_sync returned {decision.source}, SIGINT sent: {sent.is_set()}, "
          f"handler {signal.getsignal(signal.SIGINT)!r}", file=sys.stderr)
else:  # past hard_limit_s
    policy = attrs.evolve(balanced, time_budget_s=0.05, hard_limit_s=0.1)
    decision = chunktune.resolve_sync(workload, policy=policy)
    assert decision.source == "fallback", decision
'''


@pytest.mark.slow
@pytest.mark.parametrize(
    ("mode", "status"),
    [
        pytest.param("asyncio", 0, id="cancel-asyncio"),
        pytest.param("trio", 0, id="cancel-trio"),
        pytest.param("interrupt", 130, id="ctrl-c-resolve-sync"),
        pytest.param("limit", 0, id="hard-limit-resolve-sync"),
    ],
)
def test_python_exits_only_once_the_own_pools_probe_returns(
    isolated: Path, mode: str, status: int
) -> None:
    """A trainer exiting just after a cancelled resolve waits for its own pool's probe."""
    _exits_with(isolated / "exit_after_cancel.py", EXIT_AFTER_CANCEL, mode, status)


def _exits_with(script: Path, text: str, mode: str, status: int) -> None:
    """Run ``text`` as ``script MODE TINY`` in a child and check it exits with ``status``."""
    script.write_text(text)
    done = subprocess.run(
        [sys.executable, str(script), mode, TINY],
        capture_output=True,
        text=True,
        timeout=240,
        # a shell may start background jobs with SIGINT ignored (pytest &): the child must
        # see the Ctrl-C, as a trainer in the foreground does
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    assert done.returncode == status, (
        f"exit {done.returncode}, not {status}\nstdout:\n{done.stdout[-2000:]}\n"
        f"stderr:\n{done.stderr[-4000:]}"
    )


# The same exit with a trainer's own Workload class stepping its own mujoco.rollout.Rollout
# (no RolloutWorkload, so no call lock of chunktune's). Each pool call starts only once the
# main thread is on its way out (or after 5 s), so the probe is in flight as the exit
# begins, however loaded the machine; a check registered before chunktune is imported
# (so run after chunktune's exit handler) exits 3 if a pool call is still in flight there,
# and 4 if a probe started once the exit had begun. "abandoned": a resolve_sync in a
# daemon thread that nobody cancels, whose sweep would go on probing through the exit.
OWN_WORKLOAD_EXIT = '''
import atexit
import os
import sys
import threading
import time

import anyio
import mujoco
import mujoco.rollout
import numpy as np

MODE, XML = sys.argv[1], sys.argv[2]
entered = threading.Event()  # a probe is in flight
leaving = threading.Event()  # the main thread is on its way out
state = {"inside": 0, "late": 0}


def after_chunktune() -> None:
    if state["inside"]:
        os.write(2, b"a pool call was still in flight as Python finalized\\n")
        os._exit(3)
    if state["late"]:
        os.write(2, b"a probe started after the exit had begun\\n")
        os._exit(4)


atexit.register(after_chunktune)

import chunktune


class OwnWorkload:
    """A trainer's own Workload: run() is one call of its own pool, a few tenths of a second."""

    def __init__(self) -> None:
        self.num_envs, self.nthread = 16, 2
        self.model = mujoco.MjModel.from_xml_string(XML)
        self.pool = mujoco.rollout.Rollout(nthread=self.nthread)
        self.datas = [mujoco.MjData(self.model) for _ in range(self.nthread)]
        spec = mujoco.mjtState.mjSTATE_FULLPHYSICS
        one = np.empty(mujoco.mj_stateSize(self.model, spec))
        mujoco.mj_getState(self.model, self.datas[0], one, spec)
        self.states = np.tile(one, (self.num_envs, 1))

    def signature(self):
        return {"kind": "own rollout", "mode": MODE}

    def run(self, chunk_size):
        if leaving.is_set():
            state["late"] += 1
        state["inside"] += 1
        try:
            entered.set()
            leaving.wait(5)
            start = time.perf_counter()
            self.pool.rollout(
                self.model, self.datas, self.states, nstep=2000, chunk_size=chunk_size
            )
            return time.perf_counter() - start
        finally:
            state["inside"] -= 1


workload = OwnWorkload()


async def cancelled() -> None:
    async with anyio.create_task_group() as tg:
        tg.start_soon(chunktune.resolve, workload)
        await anyio.to_thread.run_sync(entered.wait)
        tg.cancel_scope.cancel()


if MODE == "cancel":
    anyio.run(cancelled)
elif MODE == "limit":
    import attrs

    balanced = chunktune.load_settings().get_policy("balanced")
    policy = attrs.evolve(balanced, time_budget_s=0.05, hard_limit_s=0.1)
    decision = chunktune.resolve_sync(workload, policy=policy)
    assert decision.source == "fallback", decision
else:  # abandoned
    threading.Thread(target=chunktune.resolve_sync, args=(workload,), daemon=True).start()
    entered.wait()
leaving.set()
sys.exit(7)
'''


@pytest.mark.slow
@pytest.mark.parametrize(
    "mode",
    [
        pytest.param("cancel", id="cancelled"),
        pytest.param("limit", id="hard-limit"),
        pytest.param("abandoned", id="abandoned-in-a-daemon-thread"),
    ],
)
def test_python_exits_only_once_an_own_workloads_probe_returns(isolated: Path, mode: str) -> None:
    """Exiting with an own Workload's probe in flight waits for it, starts none, keeps 7."""
    _exits_with(isolated / "own_workload_exit.py", OWN_WORKLOAD_EXIT, mode, 7)


# A program's own exit handler, set up before chunktune's MuJoCo adapter loads, runs after
# chunktune's: it must still be able to close its workloads and find the pool idle.
CLOSE_AT_EXIT = """
import atexit
import sys

import mujoco

import chunktune

workloads = []


def close_all() -> None:
    closed = [w.close(timeout_s=30) for w in workloads]
    print("closed", closed, flush=True)


atexit.register(close_all)
model = mujoco.MjModel.from_xml_string(sys.argv[1])
workload = chunktune.RolloutWorkload(model, num_envs=8, nthread=2, nstep=5)
workloads.append(workload)
workload.run(None)
"""


def test_a_programs_own_exit_handler_may_close_its_workloads_after_chunktunes(
    isolated: Path,
) -> None:
    """An exit handler that runs after chunktune's closes its workload, neither hanging."""
    script = isolated / "close_at_exit.py"
    script.write_text(CLOSE_AT_EXIT)
    done = subprocess.run(
        [sys.executable, str(script), TINY], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "closed [True]" in done.stdout  # not a close() that timed out on a held lock


def test_a_workload_starts_no_pool_call_once_python_is_exiting(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Once the exit has waited for the calls in flight, run() refuses, naming the exit."""
    from chunktune import _exiting as _exit

    workload = chunktune.RolloutWorkload(
        mujoco.MjModel.from_xml_string(TINY), num_envs=4, nthread=1, nstep=2
    )
    with workload:
        workload.run(None)
        monkeypatch.setattr(_exit, "_exiting", True)
        with pytest.raises(chunktune.UsageError, match="Python is exiting: this RolloutWorkload"):
            workload.run(None)
