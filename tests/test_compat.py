"""The drop-in for the older tuner's resolve_chunk_size."""

from __future__ import annotations

import contextlib
import errno
import json
import logging
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import FrameType
from typing import Any

import anyio
import numpy as np
import pytest
from _teardown import at_teardown, run_at_teardown

import chunktune
from chunktune import InvalidArgumentError, compat
from chunktune._request import worth_storing
from chunktune._threads import wait_for_sweeps
from chunktune.compat import PoolStepWorkload, resolve_chunk_size
from chunktune.sim import SimulatedWorkload


class FakeModel:
    nq, nv, nu, nbody, njnt, ngeom, nsensordata = 7, 6, 2, 2, 1, 3, 0


class FakePool:
    """A pool with the older tuner's step signature whose cost follows the sim model."""

    def __init__(self, fail: bool = False) -> None:
        self.sim = SimulatedWorkload.from_layout("blocked", num_envs=256, nthread=4, mean_s=2e-5)
        self.calls: list[dict[str, Any]] = []
        self.flags: tuple[bool, bool] | None = None  # return_sensor, post_step_forward_sensor
        self.fail = fail

    def step(
        self,
        state: np.ndarray,
        *,
        nstep: int,
        control: np.ndarray,
        chunk_size: int | None,
        return_sensor: bool,
        post_step_forward_sensor: bool,
    ) -> None:
        if self.fail:
            raise RuntimeError("pool is gone")
        self.calls.append({"nstep": nstep, "control": control.shape, "chunk": chunk_size})
        self.flags = (return_sensor, post_step_forward_sensor)
        state += 1.0  # must be a copy: the caller's state never changes
        time.sleep(self.sim.true_time(chunk_size))


def call(pool: FakePool, state: np.ndarray, **over: Any) -> int | None:
    kwargs: dict[str, Any] = {
        "pool": pool,
        "state": state,
        "model": FakeModel(),
        "n_variants": 1,
        "num_envs": 256,
        "nthread": 4,
        "dtype": np.float32,
        "post_step_forward_sensor": False,
        "bench_nsteps": 3,
        "manual_chunk_size": None,
        "adaptive": True,
    }
    kwargs.update(over)
    return resolve_chunk_size(**kwargs)


def test_manual_override_first() -> None:
    """manual_chunk_size wins even with adaptive on, and nothing is stepped."""
    pool = FakePool()
    assert call(pool, np.zeros((256, 5)), manual_chunk_size=9) == 9
    assert pool.calls == []


def test_manual_override_comes_before_adaptive_off() -> None:
    """manual_chunk_size is the answer with adaptive off too, as the older tuner's was."""
    pool = FakePool()
    assert call(pool, np.zeros((256, 5)), manual_chunk_size=9, adaptive=False) == 9
    assert pool.calls == []


@pytest.mark.parametrize("manual", [0, 257])
def test_manual_override_is_validated(manual: int) -> None:
    """A manual chunk outside 1..num_envs raises a ChunktuneError naming it."""
    with pytest.raises(InvalidArgumentError, match=str(manual)):
        call(FakePool(), np.zeros((256, 5)), manual_chunk_size=manual)


class _BadPath:
    def __fspath__(self) -> object:  # neither str nor bytes: os.fsdecode raises TypeError
        return 3

    def __repr__(self) -> str:
        return "<bad path>"


class _Model(FakeModel):
    def __init__(self, nu: object) -> None:
        self.nu = nu  # type: ignore[assignment]


@pytest.mark.parametrize(
    ("over", "message"),
    [
        pytest.param({"dtype": "bogus"}, "dtype 'bogus' is not a numpy data type", id="dtype"),
        pytest.param({"dtype": (np.int32, -1)}, "is not a numpy data type", id="dtype-malformed"),
        pytest.param({"dtype": [("a", "i4"), ("a", "f4")]}, "is not a numpy data type",
                     id="dtype-repeated-field"),
        pytest.param({"model_file": 3}, "model_file 3 is not a path", id="model-file-int"),
        pytest.param({"model_file": _BadPath()}, "model_file <bad path> is not a path",
                     id="model-file-fspath-int"),
        pytest.param({"n_variants": "x"}, "n_variants must be an integer", id="variants-text"),
        pytest.param({"n_variants": 0}, "n_variants must be an integer", id="variants-zero"),
        pytest.param({"model": _Model(-1)}, "model.nu -1 is not a count", id="nu-negative"),
        pytest.param({"model": _Model("a")}, "model.nu 'a' is not a count", id="nu-text"),
        pytest.param({"adaptive": "no"}, r"adaptive must be True or False, got 'no' \(str\)",
                     id="text-no"),
        pytest.param({"adaptive": "false"}, r"got 'false' \(str\)", id="text-false"),
        pytest.param({"adaptive": 1}, r"got 1 \(int\)", id="int"),
        pytest.param({"adaptive": None}, r"got None \(NoneType\)", id="none"),
        pytest.param({"adaptive": np.array([True])}, r"\(ndarray\)", id="array"),
        pytest.param({"adaptive": "no", "manual_chunk_size": 8}, r"got 'no'", id="with-manual"),
        pytest.param({"post_step_forward_sensor": "no"},
                     r"post_step_forward_sensor must be True or False, got 'no' \(str\)",
                     id="sensor-text-no"),
        pytest.param({"post_step_forward_sensor": None}, r"got None \(NoneType\)",
                     id="sensor-none"),
        pytest.param({"backend_type": 3}, r"backend_type must be a backend's name .* got 3 \(int\)",
                     id="backend-int"),
        pytest.param({"backend_type": " "}, r"backend_type must be .* got ' ' \(str\)",
                     id="backend-blank"),
    ],
)  # fmt: skip
def test_bad_arguments_for_measuring_raise_naming_them(
    over: dict[str, object], message: str
) -> None:
    """A dtype, n_variants, model.nu, adaptive, sensor switch or backend it cannot use: raises."""
    pool = FakePool()
    with pytest.raises(InvalidArgumentError, match=message):
        call(pool, np.zeros((256, 5)), **over)
    assert pool.calls == []


@pytest.mark.parametrize(
    "model",
    [
        pytest.param(None, id="none"),
        pytest.param("robot.xml", id="path-text"),
        pytest.param(Path("robot.xml"), id="path"),
        pytest.param(object(), id="object"),
        pytest.param(np.zeros(3), id="array"),
    ],
)
def test_a_model_with_none_of_the_sizes_is_refused_naming_it(model: object) -> None:
    """A model with none of an MjModel's sizes (a path, None) raises, nothing measured or cached."""
    pool = FakePool()
    with pytest.raises(InvalidArgumentError, match=r"model .* is not a mujoco\.MjModel"):
        call(pool, np.zeros((256, 5)), model=model)
    assert pool.calls == []


def test_controls_too_large_to_allocate_keep_native() -> None:
    """Zero controls that cannot be allocated fail the measuring (None), never the caller."""
    pool = FakePool()
    huge = {"bench_nsteps": 2**31 - 1, "model": _Model(2**31 - 1)}  # 2**73 bytes of controls
    assert call(pool, np.zeros((256, 5)), **huge) is None
    assert pool.calls == []


def test_a_model_file_path_is_cached_as_its_text(isolated: Path) -> None:
    """model_file may be a pathlib.Path (the older tuner's callers passed one): measured, stored."""
    call(FakePool(), np.zeros((256, 5)), model_file=Path("/models/robot.xml"))
    (entry,) = json.loads((isolated / "cache.json").read_text())["entries"].values()
    assert entry["model_file"] == "/models/robot.xml"


def test_adaptive_off_gives_none() -> None:
    """adaptive=False returns None without stepping."""
    pool = FakePool()
    assert call(pool, np.zeros((256, 5)), adaptive=False) is None
    assert pool.calls == []


@pytest.mark.parametrize(
    ("adaptive", "stepped"),
    [
        pytest.param(np.False_, False, id="numpy-false"),
        pytest.param(np.True_, True, id="numpy-true"),
    ],
)
def test_a_numpy_bool_adaptive_is_taken_as_the_bool_it_holds(
    adaptive: np.bool_, stepped: bool
) -> None:
    """adaptive=np.True_ (np.any(...), a config array's) measures; np.False_ returns None."""
    pool = FakePool()
    chunk = call(pool, np.zeros((256, 5)), adaptive=adaptive)
    assert bool(pool.calls) == stepped
    if not stepped:
        assert chunk is None


@pytest.mark.parametrize(
    "over",
    [
        pytest.param({"adaptive": False}, id="adaptive-off"),
        pytest.param({"nthread": 0}, id="no-threads"),
        pytest.param({"num_envs": 4}, id="one-work-chunk"),
    ],
)
def test_an_answer_without_measuring_looks_at_no_measuring_argument(
    over: dict[str, object],
) -> None:
    """None without measuring comes before dtype and bench_nsteps are checked: none raises."""
    pool = FakePool()
    assert call(pool, np.zeros((4, 5)), dtype="bogus", bench_nsteps=0, **over) is None
    assert pool.calls == []


def test_one_work_chunk_gives_none_without_measuring() -> None:
    """num_envs <= nthread cannot be tuned: None, nothing stepped."""
    pool = FakePool()
    assert call(pool, np.zeros((4, 5)), num_envs=4) is None
    assert pool.calls == []


def test_sweeps_pool_step_on_a_copy_with_zero_controls_then_caches() -> None:
    """The shim times pool.step(copy, nstep=bench_nsteps, zero control) and caches the answer."""
    pool = FakePool()
    state = np.zeros((256, 5))
    first = call(pool, state)
    assert pool.calls and all(c["nstep"] == 3 and c["control"] == (256, 3, 2) for c in pool.calls)
    assert not state.any()
    n = len(pool.calls)
    assert call(pool, state) == first
    assert len(pool.calls) == n


def test_an_unusable_home_steps_the_pool_for_the_first_call_only(unusable_home: Path) -> None:
    """With no cache that can be written, a second call of the same key steps nothing."""
    pool = FakePool()
    first = call(pool, np.zeros((256, 5)))
    n = len(pool.calls)
    assert n and call(pool, np.zeros((256, 5))) == first
    assert len(pool.calls) == n


@pytest.mark.parametrize("forward", [False, True])
def test_pool_step_is_called_with_sensors_and_the_forward_flag_given(forward: bool) -> None:
    """Each timed pool.step returns sensors and runs the post-step forward only if asked."""
    pool = FakePool()
    call(pool, np.zeros((256, 5)), post_step_forward_sensor=forward)
    assert pool.calls and pool.flags == (True, forward)


def test_the_key_holds_the_variants_and_the_model_s_sizes_numpy_s_too() -> None:
    """n_variants and each size of the model (as numpy integers too) are in the signature."""

    class NumpyModel:
        nq, nv, nu = np.int64(7), np.int32(6), np.int64(2)

    def signature(model: object, n_variants: int) -> dict[str, object]:
        return dict(
            PoolStepWorkload(
                pool=FakePool(), state=np.zeros((256, 5)), model=model, n_variants=n_variants,
                num_envs=256, nthread=4, dtype=np.float32, post_step_forward_sensor=False,
                bench_nsteps=3,
            ).signature()
        )  # fmt: skip

    sig = signature(NumpyModel(), 4)
    assert (sig["n_variants"], sig["nq"], sig["nv"], sig["nu"]) == (4, 7, 6, 2)
    assert signature(NumpyModel(), 1) != sig
    assert signature(FakeModel(), 4)["nq"] == 7


def test_failing_pool_never_raises() -> None:
    """A pool.step that raises gives None (native), not an exception."""
    assert call(FakePool(fail=True), np.zeros((256, 5))) is None


@pytest.mark.parametrize(
    "over",
    [
        pytest.param({"num_envs": -1}, id="envs-negative"),
        pytest.param({"num_envs": 0}, id="envs-zero"),
        pytest.param({"num_envs": 2.5}, id="envs-float"),
        pytest.param({"nthread": -1}, id="threads-negative"),
        pytest.param({"nthread": "4"}, id="threads-text"),
        pytest.param({"nthread": True}, id="threads-bool"),
        pytest.param({"num_envs": -1, "manual_chunk_size": 8}, id="before-manual"),
        pytest.param({"num_envs": -1, "adaptive": False}, id="before-adaptive"),
        pytest.param({"num_envs": -1, "adaptive": "no"}, id="before-a-bad-adaptive"),
        pytest.param({"nthread": -1, "adaptive": 1}, id="threads-before-a-bad-adaptive"),
    ],
)
def test_bad_sizes_are_rejected_first(over: dict[str, object]) -> None:
    """num_envs or nthread out of range raises InvalidArgumentError naming it, before anything."""
    pool = FakePool()
    field = "num_envs" if "num_envs" in over else "nthread"
    with pytest.raises(InvalidArgumentError, match=field):
        call(pool, np.zeros((256, 5)), **over)
    assert pool.calls == []


@pytest.mark.parametrize("nthread", [-1, 2.0, None])
def test_a_bad_nthread_is_told_that_zero_is_allowed(nthread: object) -> None:
    """A bad nthread's error says what compat takes: an integer from 0, not from 1."""
    with pytest.raises(InvalidArgumentError, match=r"nthread must be an integer from 0 "):
        call(FakePool(), np.zeros((256, 5)), nthread=nthread)


def test_a_pool_without_threads_gives_none() -> None:
    """nthread=0 steps on the calling thread, where chunks cannot matter: None, nothing stepped."""
    pool = FakePool()
    assert call(pool, np.zeros((256, 5)), nthread=0) is None
    assert pool.calls == []


def _fast_policy(tmp_path: Path) -> None:
    (tmp_path / "chunktune.toml").write_text(
        'policy = "fast"\n[policies.fast]\nextends = "quick"\ntime_budget_s = 0.3\n'
    )


@pytest.mark.anyio
async def test_on_an_event_loop_it_blocks_and_answers_as_the_older_tuner_did(
    tmp_path: Path,
) -> None:
    """Called in a task, it blocks like the older tuner and answers what it caches."""
    _fast_policy(tmp_path)
    pool = FakePool()
    first = call(pool, np.zeros((256, 5)))  # on the loop's own thread: no UsageError
    assert pool.calls
    n = len(pool.calls)
    assert call(pool, np.zeros((256, 5))) == first and len(pool.calls) == n  # cached


def _owned_on_the_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[FakePool, np.ndarray, PoolStepWorkload]:
    """A pool, its state, and the workload a task of the loop measures it by (a short bound)."""
    _fast_policy(tmp_path)
    # the bound, 2 x 0.3 s + 0.1 s, is waited out in full: the task's flight cannot land
    # while the loop is blocked, however long the bound, so a longer one proves no more
    monkeypatch.setattr(compat, "LOOP_GRACE_S", 0.1)
    pool = FakePool()
    state = np.zeros((256, 5))
    owner = PoolStepWorkload(
        pool=pool, state=state, model=FakeModel(), n_variants=1, num_envs=256, nthread=4,
        dtype=np.float32, post_step_forward_sensor=False, bench_nsteps=3,
    )  # fmt: skip
    return pool, state, owner


async def _given_up_beside_its_owner(
    pool: FakePool, state: np.ndarray, owner: PoolStepWorkload
) -> None:
    """compat asked on the loop's thread while a task of the loop sweeps ``owner``: None
    at the bound (the task's flight cannot land); then the task is cancelled, its sweep
    with it, caching nothing, and the sweeps are waited out."""
    probing = anyio.Event()

    async def own() -> None:
        await chunktune.resolve(owner, on_progress=lambda _: probing.set())

    async with anyio.create_task_group() as tg:
        tg.start_soon(own)
        await probing.wait()
        assert call(pool, state) is None
        tg.cancel_scope.cancel()
    assert wait_for_sweeps(30)


@pytest.mark.anyio
async def test_on_an_event_loop_a_sweep_its_loop_owns_cannot_hang_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A task of the blocked loop measuring the same workload: None at the bound, no hang."""
    pool, state, owner = _owned_on_the_loop(tmp_path, monkeypatch)
    decided: list[chunktune.Decision] = []
    probing = anyio.Event()

    async def own() -> None:
        decided.append(await chunktune.resolve(owner, on_progress=lambda _: probing.set()))

    async with anyio.create_task_group() as tg:
        tg.start_soon(own)
        await probing.wait()  # the task's sweep is under way
        # the same workload, asked on the loop's thread: the task's flight cannot land
        # while the loop is blocked here, so the wait ends at its bound
        assert call(pool, state) is None
    assert decided and decided[0].source == "benchmark"
    # a sweep whose first calls a loaded machine slowed past the 0.3 s budget times native
    # alone and stores nothing (worth_storing): the flight landed either way
    stored = tmp_path / "cache.json"
    entries = json.loads(stored.read_text())["entries"] if stored.exists() else {}
    assert list(entries) == ([decided[0].key] if worth_storing(decided[0]) else [])


@pytest.mark.anyio
async def test_on_an_event_loop_what_it_gave_up_on_never_steps_the_pool_later(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past the bound it answers None and drops its resolve: nothing later steps the pool."""
    await _given_up_beside_its_owner(*_owned_on_the_loop(tmp_path, monkeypatch))
    await anyio.sleep(0.5)  # a resolve left behind would now take the key and sweep
    assert wait_for_sweeps(30)
    assert not (tmp_path / "cache.json").exists()


@pytest.mark.anyio
async def test_on_an_event_loop_past_the_bound_it_says_it_dropped_its_resolve(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Past the bound its warning says its own resolve was dropped, not that it will land."""
    with caplog.at_level(logging.WARNING, logger="chunktune"):
        await _given_up_beside_its_owner(*_owned_on_the_loop(tmp_path, monkeypatch))
    (kept,) = [r.getMessage() for r in caplog.records if "kept the native" in r.getMessage()]
    assert "dropped its resolve" in kept and "the one being made" not in kept


class _Interrupted(BaseException):
    """Stands for KeyboardInterrupt (a BaseException too), which pytest takes as the user's."""


class InterruptingPool(FakePool):
    """Sends this process SIGUSR1 from its third step (in the sweep's thread)."""

    def step(self, state: np.ndarray, **kwargs: Any) -> None:
        super().step(state, **kwargs)
        if len(self.calls) == 3:
            os.kill(os.getpid(), signal.SIGUSR1)


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise _Interrupted


@pytest.mark.anyio
async def test_on_an_event_loop_an_interrupt_stops_the_sweep_and_caches_nothing(
    tmp_path: Path,
) -> None:
    """Ctrl-C while it blocks a loop: the sweep stops stepping the pool, nothing is cached."""
    (tmp_path / "chunktune.toml").write_text(
        'policy = "slow"\n[policies.slow]\nextends = "quick"\ntime_budget_s = 30.0\n'
    )
    pool = InterruptingPool()
    previous = signal.signal(signal.SIGUSR1, _interrupt)
    try:
        with pytest.raises(_Interrupted):
            call(pool, np.zeros((256, 5)))
    finally:
        signal.signal(signal.SIGUSR1, previous)
    assert wait_for_sweeps(10)  # the step in flight returns, and no other follows
    assert not (tmp_path / "cache.json").exists()


# A trainer's coroutine under asyncio.run calls the older tuner's entry point. The old
# code waited out the sweep (up to hard_limit_s, 60 s) and answered, and only then did
# the coroutine see the cancel asyncio's handler had made: no KeyboardInterrupt at all.
_ON_ASYNCIO_RUN = """
import asyncio, signal, time
import numpy as np
import chunktune
from chunktune.compat import PoolStepWorkload, resolve_chunk_size

class Model:
    nq, nv, nu, nbody, njnt, ngeom, nsensordata = 7, 6, 2, 2, 1, 3, 0

class Pool:
    def __init__(self, step_s, say=""):
        self.step_s, self.say = step_s, say

    def step(self, state, **kwargs):
        print(self.say, end="", flush=True)
        self.say = ""
        time.sleep(self.step_s)

SIZES = dict(
    state=np.zeros((256, 5)), model=Model(), n_variants=1, num_envs=256, nthread=4,
    dtype=np.float32, post_step_forward_sensor=False, bench_nsteps=3,
)

async def main():
    before = signal.getsignal(signal.SIGINT)
    try:
        slow = Pool(0.2, "stepping\\n")
        resolve_chunk_size(pool=slow, manual_chunk_size=None, adaptive=True, **SIZES)
    except KeyboardInterrupt:
        print("interrupted", flush=True)
    print("restored" if signal.getsignal(signal.SIGINT) is before else "changed", flush=True)
    # the same key at once, on this loop: its lock, the machine's, no entry left behind
    again = await chunktune.resolve(PoolStepWorkload(pool=Pool(0.001), **SIZES), policy="fast")
    print(again.source, flush=True)
    try:
        # asyncio.run's handler runs only when the loop's thread runs Python: a Ctrl-C that
        # lands just before the selector's wait (asyncio.run sets no wakeup fd) waits for
        # that wait to end, so each wait is short (a sleep(600) hung 2 runs in 2000 of a
        # plain asyncio.run, chunktune not imported)
        while True:
            await asyncio.sleep(0.05)
    except asyncio.CancelledError:
        print("cancelled", flush=True)
        raise

try:
    asyncio.run(main())
except KeyboardInterrupt:
    default = signal.getsignal(signal.SIGINT) is signal.default_int_handler
    print("default" if default else "not default", flush=True)
"""


def _lines(proc: subprocess.Popen[str]) -> queue.Queue[str]:
    """The child's stdout lines as they come (a reader thread: select misses buffered ones)."""
    lines: queue.Queue[str] = queue.Queue()

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.put(line.strip())
        lines.put(_ENDED)

    threading.Thread(target=read, daemon=True).start()
    return lines


_ENDED = "\0"  # the child's stdout closed: no line comes any more


def _next_line(lines: queue.Queue[str], timeout_s: float) -> str:
    """The next line, or "" if none came within ``timeout_s`` or the child's stdout closed."""
    try:
        line = lines.get(timeout=timeout_s)
    except queue.Empty:
        return ""
    if line == _ENDED:
        lines.put(_ENDED)  # for the next caller too, at once
        return ""
    return line


HANG_GUARD_S = 90.0  # not a speed limit: past the slow policy's 60 s hard limit, a hang fails


def test_ctrl_c_under_asyncio_run_interrupts_the_wait_and_frees_the_key(tmp_path: Path) -> None:
    """Ctrl-C blocking asyncio.run's loop: KeyboardInterrupt, key freed, asyncio's handler back."""
    (tmp_path / "chunktune.toml").write_text(
        'policy = "slow"\n[policies.slow]\nextends = "quick"\n'
        "time_budget_s = 30.0\nhard_limit_s = 60.0\n"
        '[policies.fast]\nextends = "quick"\ntime_budget_s = 0.3\nhard_limit_s = 20.0\n'
    )
    here = str(Path(chunktune.__file__).parents[1])  # this chunktune, not an installed one
    path = os.pathsep.join(p for p in (here, os.environ.get("PYTHONPATH")) if p)
    errors = tmp_path / "stderr.txt"
    with (
        errors.open("w") as stderr,
        subprocess.Popen(
            [sys.executable, "-c", _ON_ASYNCIO_RUN],
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
            env={**os.environ, "PYTHONPATH": path},
            # a shell may start background jobs with SIGINT ignored; the child must see it
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        ) as proc,
    ):
        lines = _lines(proc)
        said = []
        try:
            said.append(_next_line(lines, HANG_GUARD_S))
            proc.send_signal(signal.SIGINT)
            # the old wait never raised: it answered when the sweep ended, then "restored"
            # and a cache hit ("cache") followed; what comes, not when, is the check
            said += [_next_line(lines, HANG_GUARD_S) for _ in range(3)]
            if said[1:] == ["interrupted", "restored", "benchmark"]:
                proc.send_signal(signal.SIGINT)  # asyncio's own again: it cancels its task
                with contextlib.suppress(subprocess.TimeoutExpired):  # what it said tells
                    proc.wait(timeout=HANG_GUARD_S)
        finally:
            if proc.poll() is None:
                proc.kill()
    said += [_next_line(lines, HANG_GUARD_S) for _ in range(2)]
    expected = ["stepping", "interrupted", "restored", "benchmark", "cancelled", "default"]
    assert said == expected, errors.read_text()
    assert proc.returncode == 0, errors.read_text()


def _on_loop_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "running event loop" in r.getMessage()]


@pytest.mark.anyio
async def test_on_an_event_loop_the_wait_is_bounded_by_the_hard_limit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A policy's hard_limit_s, where set, is the bound of the wait on the loop's thread."""
    (tmp_path / "chunktune.toml").write_text(
        'policy = "fast"\n[policies.fast]\nextends = "quick"\n'
        "time_budget_s = 0.3\nhard_limit_s = 7.0\n"
    )
    monkeypatch.setattr(compat, "_warned_on_loop", False)
    with caplog.at_level(logging.WARNING, logger="chunktune"):
        call(FakePool(), np.zeros((256, 5)))
    (warned,) = _on_loop_warnings(caplog)
    assert "(up to 7 s)" in warned


@pytest.mark.anyio
async def test_on_an_event_loop_the_wait_is_twice_the_budget_and_the_grace(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Without a hard_limit_s the wait on the loop's thread is 2 * time_budget_s + LOOP_GRACE_S."""
    _fast_policy(tmp_path)  # time_budget_s 0.3
    monkeypatch.setattr(compat, "_warned_on_loop", False)
    with caplog.at_level(logging.WARNING, logger="chunktune"):
        call(FakePool(), np.zeros((256, 5)))
    (warned,) = _on_loop_warnings(caplog)
    assert f"(up to {0.6 + compat.LOOP_GRACE_S:.3g} s)" in warned


@pytest.mark.anyio
async def test_on_an_event_loop_it_warns_once_a_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The warning that it blocks the loop comes on the first call only, not on every reset."""
    _fast_policy(tmp_path)
    monkeypatch.setattr(compat, "_warned_on_loop", False)
    with caplog.at_level(logging.WARNING, logger="chunktune"):
        call(FakePool(), np.zeros((256, 5)))
        call(FakePool(), np.zeros((256, 5)))
    assert len(_on_loop_warnings(caplog)) == 1


def test_off_an_event_loop_it_never_warns_of_blocking_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Off any event loop it decides as resolve_sync does, without the loop's warning."""
    _fast_policy(tmp_path)
    monkeypatch.setattr(compat, "_warned_on_loop", False)
    with caplog.at_level(logging.WARNING, logger="chunktune"):
        call(FakePool(), np.zeros((256, 5)))
    assert _on_loop_warnings(caplog) == []


def _raises(exc: Exception) -> Any:
    def raising(*args: object, **kwargs: object) -> object:
        raise exc

    return raising


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("where", "exc"),
    [
        pytest.param("_pick_policy", TypeError("a bug in the lookup"), id="bug"),
        pytest.param("_run_beside", RuntimeError("can't start new thread"), id="no-thread"),
    ],
)
async def test_on_an_event_loop_chunktunes_own_failure_outside_the_resolve_answers_native(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    where: str,
    exc: Exception,
) -> None:
    """On the loop's thread a bug or spent threads before the resolve answer None, logged."""
    _fast_policy(tmp_path)
    monkeypatch.setattr(compat, where, _raises(exc))
    pool = FakePool()
    with caplog.at_level(logging.WARNING, logger="chunktune"):
        assert call(pool, np.zeros((256, 5))) is None
    assert pool.calls == [] and not (tmp_path / "cache.json").exists()
    logged = [r.exc_info[1] for r in caplog.records if r.exc_info]
    if where == "_pick_policy":
        assert logged == [exc] and "a bug in chunktune" in caplog.text
    else:
        assert logged == [] and "can't start new thread" in caplog.text


@pytest.mark.anyio
async def test_on_an_event_loop_an_unknown_policy_still_raises(tmp_path: Path) -> None:
    """On the loop's thread a settings file naming no known policy is the caller's error."""
    (tmp_path / "chunktune.toml").write_text('policy = "nosuch"\n')
    with pytest.raises(chunktune.ConfigError, match="nosuch"):
        call(FakePool(), np.zeros((256, 5)))


@pytest.mark.anyio
async def test_on_an_event_loop_a_settings_file_unread_for_want_of_descriptors_answers_native(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """On the loop's thread the settings' read failing for want of descriptors: None, warned."""
    spent = OSError(errno.EMFILE, "Too many open files")
    unread = chunktune.ConfigError(
        "cannot read it: Too many open files", source="chunktune.toml", unread=True
    )
    unread.__cause__ = spent  # as _config raises it: the process's descriptors, not the file

    def load(*args: object, **kwargs: object) -> object:
        raise unread

    monkeypatch.setattr(compat, "_load_settings", load)
    pool = FakePool()
    with caplog.at_level(logging.WARNING, logger="chunktune"):
        assert call(pool, np.zeros((256, 5))) is None
    assert pool.calls == [] and not (tmp_path / "cache.json").exists()
    assert [r.exc_info for r in caplog.records if r.exc_info] == []
    said = "([Errno 24] Too many open files: the process's threads or file descriptors are spent)"
    assert said in caplog.text


class _HeldPool(FakePool):
    """A FakePool whose first step holds until chunktune warns that a cancel waits for it."""

    def __init__(self) -> None:
        super().__init__()
        self.release = threading.Event()
        self.in_step = 0

    def step(self, state: np.ndarray, **kwargs: Any) -> None:
        self.in_step += 1
        try:
            if len(self.calls) == 0:
                self.release.wait(60)
            super().step(state, **kwargs)
        finally:
            self.in_step -= 1


class _Releases(logging.Handler):
    def __init__(self, pool: _HeldPool) -> None:
        super().__init__()
        self.pool = pool

    def emit(self, record: logging.LogRecord) -> None:
        if "waited" in record.getMessage():
            self.pool.release.set()


@pytest.mark.anyio
async def test_on_an_event_loop_past_the_bound_it_returns_with_the_pool_idle(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On a loop's thread, past hard_limit_s it answers None once the pool.step in flight ended."""
    from chunktune import _threads

    (tmp_path / "chunktune.toml").write_text(
        'policy = "fast"\n[policies.fast]\nextends = "quick"\ntime_budget_s = 0.1\n'
        "hard_limit_s = 1.0\n"  # room for the first step to begin on a loaded machine
    )
    monkeypatch.setattr(_threads, "SETTLE_WARN_S", 0.05, raising=False)
    pool = _HeldPool()
    handler = _Releases(pool)
    logging.getLogger("chunktune").addHandler(handler)
    try:
        answer = call(pool, np.zeros((256, 5)))
        in_step = pool.in_step
    finally:
        pool.release.set()
        logging.getLogger("chunktune").removeHandler(handler)
    assert (answer, in_step, len(pool.calls)) == (None, 0, 1)


# ---------------------------------------------------------------- while Python shuts down

# Calls resolve_chunk_size from where argv[1] says (see _teardown), with a real MuJoCo
# model and a pool that counts its steps, writing the answer (or what it raised) as a
# JSON line to fd 1 with os.write: print() may be gone by then.
_COMPAT_AT_EXIT = at_teardown(
    """\
import atexit, json, os, sys, weakref
import mujoco
import numpy as np
from chunktune.compat import resolve_chunk_size

MODEL = mujoco.MjModel.from_xml_string(
    '<mujoco><worldbody><body><freejoint/><geom size="0.1"/></body></worldbody></mujoco>'
)

class Pool:
    steps = 0
    def step(self, state, *, nstep, control, chunk_size, return_sensor,
             post_step_forward_sensor):
        Pool.steps += 1

def resolve(**over):
    kw = dict(pool=Pool(), state=np.zeros((64, MODEL.nq + MODEL.nv + 1)), model=MODEL,
              n_variants=1, num_envs=64, nthread=2, dtype=np.float64,
              post_step_forward_sensor=False, bench_nsteps=1, manual_chunk_size=None,
              adaptive=True)
    kw.update(over)
    try:
        said = {"chunk": resolve_chunk_size(**kw), "steps": Pool.steps,
                "finalizing": sys.is_finalizing()}
    except BaseException as exc:
        said = {"raised": type(exc).__name__ + ": " + str(exc)}
    os.write(1, (json.dumps(said) + "\\n").encode())
""",
    "manual_chunk_size",
)


def _compat_at_exit(tmp_path: Path, where: str) -> tuple[dict[str, object], str]:
    """What the _COMPAT_AT_EXIT script answered for ``where``, and its stderr."""
    config = tmp_path / "quick.toml"
    config.write_text('policy = "quick"\n')
    env = {
        **os.environ,
        "CHUNKTUNE_CACHE": str(tmp_path / "c.json"),
        "CHUNKTUNE_CONFIG": str(config),
    }
    return run_at_teardown(_COMPAT_AT_EXIT, where, env)


@pytest.mark.parametrize(
    "where",
    [pytest.param("del", id="__del__"), pytest.param("weakref", id="weakref-callback")],
)
def test_resolve_chunk_size_while_python_shuts_down_answers_native_at_once(
    tmp_path: Path, where: str
) -> None:
    """The compat entry as modules are torn down: None (native), no step, nothing raised or said."""
    # it raised "ImportError: sys.meta_path is None" into the trainer's __del__: building
    # the workload asked numpy for the dtype, which imports
    said, stderr = _compat_at_exit(tmp_path, where)
    assert said == {"chunk": None, "steps": 0, "finalizing": True}
    assert stderr == ""
    assert not (tmp_path / "c.json").exists()


def test_resolve_chunk_size_with_a_manual_size_while_python_shuts_down(tmp_path: Path) -> None:
    """A manual size asked for of the compat entry as modules are torn down is that size."""
    said, stderr = _compat_at_exit(tmp_path, "manual")
    assert said == {"chunk": 5, "steps": 0, "finalizing": True}
    assert stderr == ""


def test_resolve_chunk_size_in_an_atexit_handler_still_measures(tmp_path: Path) -> None:
    """An atexit handler runs before Python finalizes: the compat entry steps the pool."""
    said, _ = _compat_at_exit(tmp_path, "atexit")
    assert said["finalizing"] is False and "raised" not in said
    assert isinstance(said["steps"], int) and said["steps"] > 0
