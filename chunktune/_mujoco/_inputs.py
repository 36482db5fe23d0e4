"""The rollout workload's inputs: each argument checked, and the arrays it leaves out filled in."""

from __future__ import annotations

import math
import numbers
import os
from collections.abc import Sequence
from typing import Any

import mujoco  # untyped: its objects are Any
import numpy as np
import numpy.typing as npt

from .._errors import InvalidArgumentError
from .._labels import MODEL_LABEL_NAMES, check_label
from .._shown import shown_one
from ._models import FULLPHYSICS, float_array, perturb

__all__ = [
    "DEFAULT_PERTURBATION",
    "MAX_PERTURBATION",
    "check_model_file",
    "check_model_label",
    "check_perturbation",
    "check_states_label",
    "default_states",
    "given_control",
    "given_states",
    "take_pool",
]

DEFAULT_PERTURBATION = 0.01
"""The standard deviation of the noise added to the default initial states' qpos and qvel."""

MAX_PERTURBATION = 10.0
"""The most noise the default initial states take: beyond it every env blows up at once."""


def check_perturbation(value: object) -> float:
    """``value`` as a float from 0 to :data:`MAX_PERTURBATION`, or InvalidArgumentError."""
    if (
        isinstance(value, bool)
        or not isinstance(value, numbers.Real)
        or not math.isfinite(value)
        or not 0 <= float(value) <= MAX_PERTURBATION
    ):
        raise InvalidArgumentError(
            f"perturbation must be a number from 0 to {MAX_PERTURBATION:g}, got {shown_one(value)}"
        )
    return float(value)


def take_pool(rollout: Any, nthread: int) -> Any:
    """The caller's pool, if any, checked to have ``nthread`` workers."""
    if rollout is not None:
        if not callable(getattr(rollout, "rollout", None)):
            raise InvalidArgumentError(
                f"rollout {shown_one(rollout)} is not a pool: expected a mujoco.rollout.Rollout "
                "(an object with a rollout() method)"
            )
        pool_threads = getattr(rollout, "nthread", None)
        if pool_threads is not None and pool_threads != nthread:
            raise InvalidArgumentError(
                f"the rollout pool has nthread={shown_one(pool_threads)} but the workload has "
                f"nthread={nthread}; they must match (worker i steps data[i])"
            )
    return rollout


def check_model_file(value: object) -> str | None:
    """``value`` as a file name (None stays None), or InvalidArgumentError if it is no path."""
    if value is None:
        return None
    if not isinstance(value, str | os.PathLike):
        raise InvalidArgumentError(
            f"model_file {shown_one(value)} is not a path (a str or os.PathLike)"
        )
    return os.fspath(value)


def check_states_label(value: object) -> str | None:
    """``value`` if it is None or a name (:func:`~chunktune._labels.check_label`), else
    InvalidArgumentError."""
    return check_label(value, what="states_label", names="the initial states")


def check_model_label(value: object) -> str | None:
    """``value`` if it is None or a name (:func:`~chunktune._labels.check_label`), else
    InvalidArgumentError."""
    return check_label(value, what="model_label", names=MODEL_LABEL_NAMES)


def default_states(
    models: Sequence[Any], env_models: Sequence[Any], nstate: int, seed: int, scale: float
) -> npt.NDArray[np.float64]:
    """One full-physics state per env: its variant's first keyframe (or reset state), perturbed.

    ``scale`` is the standard deviation of the seeded noise on qpos and qvel.
    """
    rng = np.random.default_rng(seed)
    datas = {id(m): mujoco.MjData(m) for m in models}
    states = np.empty((len(env_models), nstate))
    for i, m in enumerate(env_models):
        d = datas[id(m)]
        if m.nkey > 0:
            mujoco.mj_resetDataKeyframe(m, d, 0)
        else:
            mujoco.mj_resetData(m, d)
        perturb(m, d, rng, scale)
        mujoco.mj_getState(m, d, states[i], FULLPHYSICS)
    return states


def given_states(value: npt.ArrayLike, num_envs: int, nstate: int) -> npt.NDArray[np.float64]:
    """The caller's initial states as a contiguous ``(num_envs, nstate)`` array.

    Raises:
        InvalidArgumentError: ``value`` is neither ``(num_envs, nstate)`` nor one state.
    """
    array = float_array(value, "initial_state")
    n = num_envs
    if array.shape == (nstate,) or array.shape == (1, nstate):
        array = np.broadcast_to(array.reshape(nstate), (n, nstate))
    elif array.shape != (n, nstate):
        raise InvalidArgumentError(
            f"initial_state must have shape (num_envs, nstate) = ({n}, {nstate}) or "
            f"(nstate,) = ({nstate},), got {array.shape}"
        )
    return np.ascontiguousarray(array)


def given_control(
    value: npt.ArrayLike | None, num_envs: int, nstep: int, nu: int
) -> npt.NDArray[np.float64]:
    """The caller's controls as a contiguous ``(num_envs, nstep, nu)`` array (zeros for None).

    Raises:
        InvalidArgumentError: ``value`` has none of the shapes that broadcast to it.
    """
    n, k = num_envs, nstep
    if value is None:
        return np.zeros((n, k, nu))
    array = float_array(value, "control")
    if array.shape not in ((n, k, nu), (k, nu), (nu,)):
        raise InvalidArgumentError(
            f"control must have shape (num_envs, nstep, nu) = ({n}, {k}, {nu}), "
            f"(nstep, nu) = ({k}, {nu}) or (nu,) = ({nu},), got {array.shape}"
        )
    return np.ascontiguousarray(np.broadcast_to(array, (n, k, nu)))
