"""Ray's start under ``[ray] init_local``: bounded, a stale RAY_ADDRESS named, later calls."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
import threading
import types
from collections.abc import Iterator
from pathlib import Path

import attrs
import pytest
from _clock import jump_when

import chunktune
import chunktune.ray
from chunktune import _ray_api
from chunktune._ray_api import connected_ray
from chunktune.sim import SimulatedWorkload, env_costs

RAY_ADDRESS = "RAY_ADDRESS"
GUARD_S = 60  # no call here may block longer: a hang fails the test instead
README = (Path(__file__).parent.parent / "README.md").read_text()


class HangingRay(types.SimpleNamespace):
    """A stand-in Ray whose ``init()`` blocks until let go, as ``ray.init()`` does while it
    retries a cluster that is gone; let go, it connects, or raises ``fails``."""

    def __init__(self) -> None:
        super().__init__()
        self.inits = 0
        self.up = False
        self.go = threading.Event()
        self.entered = threading.Event()  # set once init() is under way
        self.fails: BaseException | None = None

    def is_initialized(self) -> bool:
        return self.up

    def init(self) -> None:
        self.inits += 1
        self.entered.set()
        self.go.wait(GUARD_S)
        if self.fails is not None:
            raise self.fails
        self.up = True


def local_init() -> chunktune.Settings:
    """The default settings with ``[ray] init_local = true``."""
    return chunktune.Settings(
        policies=chunktune.load_settings().policies, ray=chunktune.RaySettings(init_local=True)
    )


@pytest.fixture
def hanging(monkeypatch: pytest.MonkeyPatch) -> Iterator[HangingRay]:
    """A hanging stand-in Ray, a start timeout of a fifth of a second, no start before."""
    ray = HangingRay()
    monkeypatch.setitem(sys.modules, "ray", ray)
    monkeypatch.setattr(_ray_api, "START_TIMEOUT_S", 0.2, raising=False)
    monkeypatch.setattr(_ray_api, "_start", None, raising=False)
    monkeypatch.delenv(RAY_ADDRESS, raising=False)
    yield ray
    ray.go.set()  # the start thread ends (or waits for good, as after a real start)


def connect(settings: chunktune.Settings) -> object:
    """What ``connected_ray(settings)`` returned or raised, in a thread joined within GUARD_S."""
    out: list[object] = []

    def call() -> None:
        try:
            out.append(connected_ray(settings))
        except BaseException as exc:
            out.append(exc)

    caller = threading.Thread(target=call, daemon=True)
    caller.start()
    caller.join(GUARD_S)
    assert not caller.is_alive(), "connected_ray hung"
    return out[0]


@pytest.mark.parametrize(
    ("address", "said"),
    [
        pytest.param(
            "127.0.0.1:1",
            r"within 0\.2 s to the cluster that RAY_ADDRESS='127\.0\.0\.1:1' names .*"
            r"unset RAY_ADDRESS to let chunktune start a local Ray, or start that cluster, "
            r"or call ray\.init\(\) yourself",
            id="stale-address",
        ),
        pytest.param(
            None, r"a local Ray did not start within 0\.2 s .*call ray\.init\(\) yourself",
            id="local",
        ),
    ],
)  # fmt: skip
def test_a_start_still_under_way_at_the_timeout_raises_a_usage_error(
    monkeypatch: pytest.MonkeyPatch, hanging: HangingRay, address: str | None, said: str
) -> None:
    """ray.init() not back within START_TIMEOUT_S: UsageError naming RAY_ADDRESS's value."""
    if address is not None:
        monkeypatch.setenv(RAY_ADDRESS, address)
    raised = connect(local_init())
    assert isinstance(raised, chunktune.UsageError), raised
    assert re.search(said, str(raised)), str(raised)
    assert hanging.inits == 1


def test_a_later_call_during_an_overdue_start_refuses_and_starts_no_other(
    hanging: HangingRay,
) -> None:
    """A call while the overdue ray.init() still runs raises too; once it connects, Ray is used."""
    assert isinstance(connect(local_init()), chunktune.UsageError)
    again = connect(local_init())
    assert isinstance(again, chunktune.UsageError)
    assert "does not start Ray again in this process" in str(again)
    assert hanging.inits == 1
    hanging.go.set()
    assert _ray_api._start is not None and _ray_api._start.done.wait(GUARD_S)
    assert connect(local_init()) is hanging
    assert hanging.inits == 1


def test_a_start_that_failed_after_it_was_overdue_is_not_repeated(hanging: HangingRay) -> None:
    """The overdue ray.init() gave up, Ray left down: later calls refuse at once, saying why."""
    assert isinstance(connect(local_init()), chunktune.UsageError)
    hanging.fails = ConnectionError("Failed to connect to Ray cluster at 127.0.0.1:1")
    hanging.go.set()
    assert _ray_api._start is not None and _ray_api._start.done.wait(GUARD_S)
    hanging.fails = None
    for _ in range(3):
        refused = connect(local_init())
        assert isinstance(refused, chunktune.UsageError), refused
        assert "failed (ConnectionError: Failed to connect to Ray cluster at 127.0.0.1:1)" in str(
            refused
        )
        assert "does not start Ray again in this process" in str(refused)
    assert hanging.inits == 1


def test_a_start_that_failed_in_time_raises_its_error_once_then_refuses(
    hanging: HangingRay,
) -> None:
    """ray.init() failing at once: its own error to that caller, a UsageError saying so later."""
    hanging.fails = RuntimeError("no room for Ray's object store\nmore detail")
    hanging.go.set()
    first = connect(local_init())
    assert first is hanging.fails
    later = connect(local_init())
    assert isinstance(later, chunktune.UsageError)
    assert "failed (RuntimeError: no room for Ray's object store)" in str(later)
    assert hanging.inits == 1


def test_a_failed_start_is_tried_again_once_ray_address_changes(
    monkeypatch: pytest.MonkeyPatch, hanging: HangingRay
) -> None:
    """A start failed at a stale RAY_ADDRESS; RAY_ADDRESS unset, as advised: Ray starts again."""
    monkeypatch.setenv(RAY_ADDRESS, "127.0.0.1:1")
    hanging.fails = ConnectionError("Failed to connect to GCS")
    hanging.go.set()
    assert connect(local_init()) is hanging.fails
    refused = connect(local_init())
    assert isinstance(refused, chunktune.UsageError), refused
    assert "while RAY_ADDRESS stays '127.0.0.1:1': unset RAY_ADDRESS" in str(refused)
    assert hanging.inits == 1
    hanging.fails = None
    monkeypatch.delenv(RAY_ADDRESS)
    assert connect(local_init()) is hanging
    assert hanging.inits == 2


def test_an_overdue_start_is_not_joined_by_another_when_ray_address_changes(
    monkeypatch: pytest.MonkeyPatch, hanging: HangingRay
) -> None:
    """RAY_ADDRESS changed while the overdue ray.init() still runs: refused, no second init."""
    monkeypatch.setenv(RAY_ADDRESS, "127.0.0.1:1")
    assert isinstance(connect(local_init()), chunktune.UsageError)
    monkeypatch.delenv(RAY_ADDRESS)
    refused = connect(local_init())
    assert isinstance(refused, chunktune.UsageError), refused
    assert "does not start Ray again in this process while that start goes on" in str(refused)
    assert hanging.inits == 1


def test_ray_up_after_a_refused_start_is_used(hanging: HangingRay) -> None:
    """A ray.init() of the trainer's own after a refused start: later calls use that Ray."""
    assert isinstance(connect(local_init()), chunktune.UsageError)
    hanging.up = True  # the trainer's own ray.init(), while the abandoned one still retries
    assert connect(local_init()) is hanging
    assert hanging.inits == 1


def _resolve_many(settings: chunktune.Settings, count: int) -> list[chunktune.Decision]:
    """``count`` resolve_sync calls of one Ray workload, in a thread joined within GUARD_S."""
    out: list[chunktune.Decision] = []

    def call() -> None:
        w = SimulatedWorkload(env_costs("blocked", 64), nthread=2, name="start")
        out.extend(chunktune.ray.resolve_sync(w, settings=settings) for _ in range(count))

    caller = threading.Thread(target=call, daemon=True)
    caller.start()
    caller.join(GUARD_S)
    assert not caller.is_alive(), "resolve_sync hung"
    return out


@pytest.mark.parametrize(
    "fails",
    [
        pytest.param(None, id="overdue"),
        pytest.param(ConnectionError("Failed to connect to GCS"), id="failed"),
    ],
)
def test_a_ray_resolve_whose_start_fails_keeps_native_and_says_why_every_time(
    monkeypatch: pytest.MonkeyPatch, hanging: HangingRay, fails: BaseException | None
) -> None:
    """Overdue or failed start: native each time, the reason naming RAY_ADDRESS; one start."""
    monkeypatch.setenv(RAY_ADDRESS, "127.0.0.1:1")
    if fails is not None:
        hanging.fails = fails
        hanging.go.set()
    decisions = _resolve_many(local_init(), 3)
    assert [(d.source, d.chunk_size) for d in decisions] == [("fallback", None)] * 3
    for decision in decisions:
        assert decision.reason.startswith(f"kept the native chunk {decision.native_chunk}: ")
        assert "RAY_ADDRESS='127.0.0.1:1'" in decision.reason
        assert "does not start Ray again in this process" in decision.reason
        assert decision.reason.endswith("; nothing was measured")
    if fails is not None:
        assert "failed (ConnectionError: Failed to connect to GCS)" in decisions[0].reason
    else:
        assert "did not connect within 0.2 s" in decisions[0].reason
    assert hanging.inits == 1


@pytest.mark.anyio
@pytest.mark.jumps
async def test_the_hard_limit_bounds_the_wait_for_rays_start(
    monkeypatch: pytest.MonkeyPatch, hanging: HangingRay
) -> None:
    """hard_limit_s ends before Ray's start does: native, the reason says Ray was starting."""
    import anyio

    # the hard limit comes first
    monkeypatch.setattr(_ray_api, "START_TIMEOUT_S", float(GUARD_S), raising=False)
    monkeypatch.setenv(RAY_ADDRESS, "127.0.0.1:1")
    here = local_init()
    # the loop's clock jumps past the limit once ray.init() is under way, however long a
    # loaded machine took to key the request and get there
    limited = attrs.evolve(here.get_policy("quick"), hard_limit_s=30.0, time_budget_s=0.3)
    w = SimulatedWorkload(env_costs("blocked", 64), nthread=2, name="start")
    decisions: list[chunktune.Decision] = []

    async def resolved() -> None:
        decisions.append(await chunktune.ray.resolve(w, settings=here, policy=limited))

    with anyio.fail_after(GUARD_S):
        async with anyio.create_task_group() as tg:
            tg.start_soon(jump_when, hanging.entered, 30.0)
            tg.start_soon(resolved)
    [decision] = decisions
    assert (decision.source, decision.chunk_size) == ("fallback", None)
    assert "hard limit of 30 s" in decision.reason
    assert "while Ray was starting" in decision.reason and "'127.0.0.1:1'" in decision.reason
    assert hanging.inits == 1


def test_the_readme_gives_the_start_timeout_the_code_uses() -> None:
    """The seconds the README says chunktune waits for Ray's start are START_TIMEOUT_S."""
    found = re.search(r"waits for that start at most (\d+) s", " ".join(README.split()))
    assert found and float(found.group(1)) == _ray_api.START_TIMEOUT_S


STALE = """
    import sys, threading
    import chunktune, chunktune.ray
    from chunktune import _ray_api
    from chunktune.sim import SimulatedWorkload, env_costs

    _ray_api.START_TIMEOUT_S = float(sys.argv[1])
    settings = chunktune.Settings(
        policies=chunktune.load_settings().policies, ray=chunktune.RaySettings(init_local=True)
    )
    w = SimulatedWorkload(env_costs("blocked", 64), nthread=2, name="stale")
    for _ in range(3):
        decision = chunktune.ray.resolve_sync(w, settings=settings)
        print(decision.source, decision.chunk_size, decision.reason, sep="|")
    try:
        chunktune.ray.tune_cluster(lambda: w, settings=settings)
    except chunktune.UsageError as exc:
        print("UsageError|", exc)
    starting = [t for t in threading.enumerate() if t.name == "chunktune-ray-init"]
    print("starts|", len(starting))
"""


@pytest.mark.ray
@pytest.mark.slow
def test_a_stale_ray_address_keeps_native_and_is_waited_for_once(tmp_path: Path) -> None:
    """Real Ray, RAY_ADDRESS at a closed port: native three times, then UsageError; one start."""
    pytest.importorskip("ray")
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("RAY_")},
        RAY_ADDRESS: "127.0.0.1:1",
        "CHUNKTUNE_CACHE": str(tmp_path / "cache.json"),
        "CHUNKTUNE_SWEEP_LOCK": str(tmp_path / "sweep.lock"),
        "CHUNKTUNE_CONFIG": "",
    }
    done = subprocess.run(
        # a start waited for 1 s: ray.init() retries a closed port far longer than that
        [sys.executable, "-c", textwrap.dedent(STALE), "1"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=240,  # the hang guard: ray.init() alone retries that address far longer
    )
    assert done.returncode == 0, done.stderr[-3000:]
    lines = [line.split("|") for line in done.stdout.splitlines()]
    assert [line[:2] for line in lines[:3]] == [["fallback", "None"]] * 3
    for line in lines[:3]:
        assert "RAY_ADDRESS='127.0.0.1:1'" in line[2] and "within 1 s" in line[2]
        assert "unset RAY_ADDRESS" in line[2]
        assert "does not start Ray again in this process" in line[2]
    assert lines[3][0] == "UsageError" and "does not start Ray again" in lines[3][1]
    assert lines[4] == ["starts", " 1"]


def test_init_local_off_names_the_cluster_ray_address_would_join(
    hanging: HangingRay, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With init_local off and RAY_ADDRESS set, the error says init_local joins that cluster."""
    monkeypatch.setenv(RAY_ADDRESS, "10.0.0.9:6379")
    refused = connect(chunktune.Settings(policies=chunktune.load_settings().policies))
    assert isinstance(refused, chunktune.UsageError)
    assert "joins the cluster RAY_ADDRESS='10.0.0.9:6379' names" in str(refused)
    assert "start a local Ray" not in str(refused)
    assert hanging.inits == 0  # nothing was started
    monkeypatch.delenv(RAY_ADDRESS)
    refused = connect(chunktune.Settings(policies=chunktune.load_settings().policies))
    assert isinstance(refused, chunktune.UsageError)
    assert str(refused).endswith("[ray] init_local = true to let chunktune start a local Ray")


def test_a_start_whose_thread_could_not_start_is_no_start(
    monkeypatch: pytest.MonkeyPatch, hanging: HangingRay
) -> None:
    """Out of threads at the start: that caller's error; the next call starts Ray anew at once."""
    real = threading.Thread.start
    refusals = [RuntimeError("can't start new thread")]

    def start(thread: threading.Thread) -> None:
        if refusals and thread.name == "chunktune-ray-init":
            raise refusals.pop()
        real(thread)

    monkeypatch.setattr(threading.Thread, "start", start)
    hanging.go.set()
    failed = connect(local_init())
    assert isinstance(failed, RuntimeError) and "can't start new thread" in str(failed)
    assert connect(local_init()) is hanging  # not refused as an overdue start never begun
    assert hanging.inits == 1
