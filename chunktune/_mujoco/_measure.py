"""Measurements around a RolloutWorkload that benchmarks and plots use, not the sweep.

The balance bound (each env alone, summed over the workers) and the same rollouts on
``mujoco.batch.Batch``, the work-stealing alternative a user might pick instead.
"""

from __future__ import annotations

import time
import weakref
from typing import Any

import mujoco  # untyped: its objects are Any
import mujoco.rollout
import numpy as np
import numpy.typing as npt

from .._counts import check_chunk_size
from .._errors import UsageError
from ._models import FULLPHYSICS, INTEGRATION
from ._rollout import CLOSED, RolloutWorkload

__all__ = ["batch_seconds", "per_env_costs"]


def _open(workload: RolloutWorkload) -> RolloutWorkload:
    if workload._closed:
        raise UsageError(CLOSED)
    return workload


def per_env_costs(workload: RolloutWorkload, repeats: int = 1) -> npt.NDArray[np.float64]:
    """Single-thread seconds of each env's rollout, the minimum over ``repeats``.

    Each env runs alone on the calling thread (``Rollout(nthread=0)``); rounds go
    over all envs in turn, so drift touches every env alike. ``costs.sum() /
    nthread`` is the balance bound no schedule can beat.

    Raises:
        InvalidArgumentError: ``repeats`` is not an integer >= 1.
        UsageError: the workload was closed.
    """
    repeats = check_chunk_size(repeats, what="repeats")
    w = _open(workload)
    costs = np.full(w.num_envs, np.inf)
    data = [mujoco.MjData(w.models[0])]
    control = w._control if w._control.shape[2] else None
    with mujoco.rollout.Rollout(nthread=0) as solo:
        for _ in range(repeats):
            for i in range(w.num_envs):
                env = slice(i, i + 1)
                start = time.perf_counter()
                solo.rollout(
                    [w._env_models[i]],
                    data,
                    w._initial_state[env],
                    None if control is None else control[env],
                    skip_checks=True,
                    nstep=w.nstep,
                    state=w._state_out[env],
                    sensordata=w._sensor_out[env],
                )
                costs[i] = min(costs[i], time.perf_counter() - start)
    return costs


# one Batch per workload, built on first use and dropped with the workload
_batches: weakref.WeakKeyDictionary[RolloutWorkload, tuple[Any, npt.NDArray[np.float64]]] = (
    weakref.WeakKeyDictionary()
)


def _integration_rows(w: RolloutWorkload) -> npt.NDArray[np.float64]:
    """The initial states as Batch rows (mjSTATE_INTEGRATION), inputs at reset values."""
    m0 = w.models[0]
    rows = np.empty((w.num_envs, int(mujoco.mj_stateSize(m0, INTEGRATION))))
    datas = {id(m): mujoco.MjData(m) for m in w.models}
    for i, m in enumerate(w._env_models):
        d = datas[id(m)]
        mujoco.mj_resetData(m, d)
        mujoco.mj_setState(m, d, w._initial_state[i], FULLPHYSICS)
        mujoco.mj_getState(m, d, rows[i], INTEGRATION)
    return rows


def batch_seconds(workload: RolloutWorkload) -> float:
    """Seconds ``mujoco.batch.Batch`` takes for the same rollouts on ``nthread`` threads.

    Batch (mujoco 4) schedules with work stealing and has no chunk size. Its rows
    are set to the same initial states each call (mocap, equality and applied forces
    at their reset values, warm start zero, as the rollout does) and it records the
    same full-physics states and sensor values.

    Raises:
        UsageError: this mujoco has no ``mujoco.batch.Batch``, or the workload is closed.
    """
    w = _open(workload)
    try:
        from mujoco import batch as mj_batch  # absent before mujoco 4
    except ImportError as exc:
        raise UsageError(
            f"mujoco {mujoco.__version__} has no mujoco.batch.Batch (it came with mujoco 4)"
        ) from exc
    if w not in _batches:
        batch = mj_batch.Batch(w.models[0], w.num_envs, nthread=w.nthread)
        if len(w.models) > 1:
            batch.set_models(w._env_models)
        _batches[w] = (batch, _integration_rows(w))
    batch, rows = _batches[w]
    batch.state[:] = rows
    record: list[Any] = [FULLPHYSICS]
    out: dict[Any, npt.NDArray[np.float64]] = {FULLPHYSICS: w._state_out}
    if w._sensor_out.shape[2]:
        record.append("sensordata")
        out["sensordata"] = w._sensor_out
    control = w._control if w._control.shape[2] else None
    start = time.perf_counter()
    batch.rollout(w.nstep, control, record=record, out=out)
    return time.perf_counter() - start
