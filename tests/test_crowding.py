"""A pool with more threads than the CPUs a process may use (affinity, quota) is said once."""

from __future__ import annotations

import logging
import os
import subprocess
import sys

import numpy as np
import pytest
from _users import child_env
from test_compat import FakePool, call

from chunktune import _crowding
from chunktune._fingerprint import allowed_cpus, current_quota

needs_affinity = pytest.mark.skipif(
    not hasattr(os, "sched_setaffinity"), reason="no CPU affinity on this platform"
)

# Pinned to one CPU, as `taskset -c 0` or a batch slot pins a trainer that still sizes its
# pool by os.cpu_count(): two workloads of 2 threads, then one of 1.
_PINNED = """
import os
import chunktune
from chunktune._mujoco import demo_model_path

os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
for nthread in (2, 2, 1):
    chunktune.RolloutWorkload.from_xml(demo_model_path(), num_envs=8, nthread=nthread, nstep=1)
print("built")
"""


@pytest.fixture
def one_cpu(monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """A process that may use 1 CPU, with nothing said of crowding yet."""
    monkeypatch.setattr(_crowding, "usable_cpus", lambda: 1)
    monkeypatch.setattr(_crowding, "current_quota", lambda: None)
    monkeypatch.setattr(_crowding, "_told", set())
    caplog.set_level(logging.WARNING, logger="chunktune")


def _said(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "is more than" in r.getMessage()]


@pytest.mark.mujoco
@needs_affinity
def test_a_pool_of_2_pinned_to_1_cpu_is_warned_of_once_in_a_real_process() -> None:
    """A RolloutWorkload of 2 threads on 1 allowed CPU logs one warning naming both counts."""
    child = subprocess.run(
        [sys.executable, "-c", _PINNED],
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert child.returncode == 0 and child.stdout == "built\n", child.stderr
    lines = [line for line in child.stderr.splitlines() if "is more than" in line]
    assert lines == [
        "chunktune: nthread=2 is more than the 1 CPU this process may use: the pool's workers "
        "take turns on shared cores, so a chunk size measured for it holds for that crowding "
        "only; "
        "expected nthread=1 or fewer, one worker a CPU"
    ]


@pytest.mark.mujoco
@needs_affinity
def test_a_pool_of_the_usable_cpus_is_not_warned_of(caplog: pytest.LogCaptureFixture) -> None:
    """A RolloutWorkload with one thread per CPU this process may use logs no crowding warning."""
    from chunktune._mujoco import RolloutWorkload, demo_model_path

    caplog.set_level(logging.WARNING, logger="chunktune")
    # the affinity's CPUs, within this machine's own CPU quota (a CI container's --cpus)
    nthread = allowed_cpus(len(os.sched_getaffinity(0)), current_quota())
    RolloutWorkload.from_xml(demo_model_path(), num_envs=8, nthread=nthread, nstep=1).close()
    assert not [r for r in caplog.records if "is more than" in r.getMessage()]


def test_a_quota_below_the_usable_cpus_is_named_and_counted_up(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A quota of 1.5 CPUs on 4 usable allows 2 threads, and the sentence names the quota."""
    monkeypatch.setattr(_crowding, "usable_cpus", lambda: 4)
    monkeypatch.setattr(_crowding, "current_quota", lambda: 1.5)
    assert _crowding.crowded_cpus(2) is None
    assert _crowding.crowded_cpus(4) == (
        2,
        "the 2 CPUs this process may use (its CPU quota, 1.5, of the 4 it may run on)",
    )


@pytest.mark.parametrize(
    ("usable", "quota", "allowed"),
    [
        pytest.param(2, None, 2, id="no-quota"),
        pytest.param(2, 1.0, 1, id="quota-1-of-2"),
        pytest.param(8, 2.5, 3, id="part-of-a-cpu-counts"),
        pytest.param(2, 0.1, 1, id="at-least-one"),
        pytest.param(2, 0.0, 1, id="a-quota-of-0-still-1"),
        pytest.param(1, 4.0, 1, id="affinity-below-quota"),
    ],
)
def test_the_allowed_cpus_are_the_usable_ones_within_the_quota_rounded_up(
    usable: int, quota: float | None, allowed: int
) -> None:
    """allowed_cpus is min(usable, ceil(quota)), at least 1, and the usable CPUs without quota."""
    assert allowed_cpus(usable, quota) == allowed


@pytest.mark.usefixtures("one_cpu")
def test_compat_warns_when_the_trainer_s_pool_has_more_threads_than_cpus(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """resolve_chunk_size with nthread=4 on 1 usable CPU logs the crowding warning once."""
    pool, state = FakePool(), np.zeros((256, 3))
    call(pool, state, manual_chunk_size=None, adaptive=True, bench_nsteps=1)
    call(pool, state, manual_chunk_size=None, adaptive=True, bench_nsteps=1)
    said = _said(caplog)
    assert len(said) == 1 and said[0].startswith("chunktune: nthread=4 is more than the 1 CPU")


def test_the_warning_is_said_again_when_the_cpus_the_process_may_use_change(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Once a process per nthread and CPU count: a quota tightened from 2 CPUs to 1 is told anew."""
    quota = [2.0]
    monkeypatch.setattr(_crowding, "usable_cpus", lambda: 4)
    monkeypatch.setattr(_crowding, "current_quota", lambda: quota[0])
    monkeypatch.setattr(_crowding, "_told", set())
    caplog.set_level(logging.WARNING, logger="chunktune")
    for tightened in (2.0, 2.0, 1.0, 1.0):
        quota[0] = tightened
        _crowding.warn_if_crowded(4)
    said = [r.getMessage() for r in caplog.records if "is more than" in r.getMessage()]
    assert [line.split(" this process")[0] for line in said] == [
        "chunktune: nthread=4 is more than the 2 CPUs",
        "chunktune: nthread=4 is more than the 1 CPU",
    ]


def test_a_machine_it_cannot_read_never_stops_a_trainer_building_its_workload(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A CPU count that raises (an unreadable /proc) leaves RolloutWorkload and compat working."""
    from chunktune._mujoco import RolloutWorkload, demo_model_path

    def unreadable() -> int:
        raise PermissionError("/proc/self/status")

    monkeypatch.setattr(_crowding, "usable_cpus", unreadable)
    RolloutWorkload.from_xml(demo_model_path(), num_envs=8, nthread=2, nstep=1).close()
    monkeypatch.setenv("CHUNKTUNE_CONFIG", "")
    pool, state = FakePool(), np.zeros((256, 3))
    call(pool, state, manual_chunk_size=3, adaptive=True, bench_nsteps=1)


@pytest.mark.mujoco
@pytest.mark.usefixtures("one_cpu")
def test_a_workload_refused_for_another_argument_is_not_warned_of(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A RolloutWorkload refused for its seed warns of nothing; the one built next warns once."""
    from chunktune import InvalidArgumentError
    from chunktune._mujoco import RolloutWorkload, demo_model_path

    with pytest.raises(InvalidArgumentError, match="seed"):
        RolloutWorkload.from_xml(demo_model_path(), num_envs=8, nthread=2, nstep=1, seed=-1)
    assert _said(caplog) == []
    RolloutWorkload.from_xml(demo_model_path(), num_envs=8, nthread=2, nstep=1).close()
    assert len(_said(caplog)) == 1


@pytest.mark.usefixtures("one_cpu")
def test_compat_refusing_an_argument_warns_of_no_crowding(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """resolve_chunk_size refusing its n_variants (nthread=4, 1 CPU) logs no crowding warning."""
    from chunktune import InvalidArgumentError

    with pytest.raises(InvalidArgumentError, match="n_variants"):
        call(FakePool(), np.zeros((256, 3)), n_variants=0)
    assert _said(caplog) == []
