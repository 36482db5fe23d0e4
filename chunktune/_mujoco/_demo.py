"""The bundled demo scene: an uneven batch, as a domain-randomized training batch is uneven."""

from __future__ import annotations

import math
import os
import pathlib
from collections.abc import Sequence
from typing import Any

import mujoco  # untyped: its objects are Any
import numpy as np

from .._counts import check_count, check_seed
from ._limits import check_batch_memory, check_nthread
from ._models import FREE, FULLPHYSICS, perturb
from ._rollout import RolloutWorkload

__all__ = ["DEMO_NSTEP", "demo_model_path", "demo_workload"]

DEMO_NSTEP = 20
"""Steps per rollout of :func:`demo_workload`."""

# The heavy envs' pile: the middle 2x2 columns of the compiled stack's two lowest
# layers, boxes and capsules; the other bodies fly.
_DEMO_PILE = (2, 3, 4, 5, 10, 11, 12, 13)
_DEMO_SETTLE_S = 1.5  # simulated seconds to settle the pile: boxes at rest, capsules rolling
_DEMO_PERTURBATION = 0.002  # small enough not to blow the settled pile apart


def demo_model_path() -> pathlib.Path:
    """The path of the demo scene shipped with chunktune, ``chunktune/demo/scene.xml``."""
    return pathlib.Path(__file__).resolve().parent.parent / "demo" / "scene.xml"


def _demo_base_states(model: Any, rng: np.random.Generator) -> tuple[Any, Any]:
    """The demo's two base states: every body in the air, and a settled pile."""
    free = [j for j in range(model.njnt) if model.jnt_type[j] == FREE]
    adr = [int(model.jnt_qposadr[j]) for j in free]
    vadr = [int(model.jnt_dofadr[j]) for j in free]
    data = mujoco.MjData(model)
    nstate = int(mujoco.mj_stateSize(model, FULLPHYSICS))

    # Air: a grid 0.5 m apart, 2 m up. A body falls 0.2 m in the first 0.2 s,
    # so rollouts of the demo's length see no contact at all.
    def fly(d: Any, bodies: Sequence[int]) -> None:
        cols = math.ceil(math.sqrt(len(free)))
        for k in bodies:
            row, col = divmod(k, cols)
            q = rng.normal(size=4)
            d.qpos[adr[k] : adr[k] + 7] = [(col - cols / 2) * 0.5, (row - 2) * 0.5, 2.0,
                                           *(q / np.linalg.norm(q))]  # fmt: skip
            d.qvel[vadr[k] : vadr[k] + 6] = 0.0

    mujoco.mj_resetData(model, data)
    fly(data, range(len(free)))
    air = np.empty(nstate)
    mujoco.mj_getState(model, data, air, FULLPHYSICS)

    # Pile: part of the compiled stack settles under gravity (the other bodies
    # parked far above, falling clear of it), then the others fly.
    flying = [k for k in range(len(free)) if k not in _DEMO_PILE]
    mujoco.mj_resetData(model, data)
    for k in flying:
        data.qpos[adr[k] : adr[k] + 3] = [10.0 * k, 0.0, 50.0]
    for k in _DEMO_PILE:
        data.qvel[vadr[k] : vadr[k] + 3] = rng.normal(0.0, 0.05, 3)
    for _ in range(round(_DEMO_SETTLE_S / model.opt.timestep)):
        mujoco.mj_step(model, data)
    fly(data, flying)
    data.time = 0.0
    pile = np.empty(nstate)
    mujoco.mj_getState(model, data, pile, FULLPHYSICS)
    return air, pile


def demo_workload(
    *,
    num_envs: int,
    nthread: int,
    nstep: int = DEMO_NSTEP,
    seed: int = 0,
    rollout: Any = None,
) -> RolloutWorkload:
    """An uneven batch over the demo scene, as a training batch is uneven.

    The last quarter of the envs (``num_envs // 4`` of them) start with eight
    of the 24 bodies settled in a two-layer pile on the floor, in contact for
    the whole rollout, and the rest in the air; the others start with every
    body in free flight, high in the air. A pile env costs about 4.5-5x a
    flying one, so chunks that put the heavy envs on one worker leave the
    other idle. Each env gets its own seeded perturbation. With ``num_envs=256,
    nthread=2`` and the default 20 steps, one pool call takes about 100-120 ms on
    this project's 2-core x86 VM.

    Raises:
        InvalidArgumentError: a count is not an integer >= 1, ``nthread`` is beyond
            what this machine can run, or the batch would not fit in memory.
    """
    n = check_count(num_envs, what="num_envs")
    check_nthread(check_count(nthread, what="nthread"))
    k = check_count(nstep, what="nstep")
    model = mujoco.MjModel.from_xml_path(os.fspath(demo_model_path()))
    nstate = int(mujoco.mj_stateSize(model, FULLPHYSICS))
    check_batch_memory(
        num_envs=n, nstep=k, nstate=nstate, nsensordata=int(model.nsensordata), nu=int(model.nu)
    )
    rng = np.random.default_rng(check_seed(seed))
    air, pile = _demo_base_states(model, rng)
    n_heavy = n // 4
    data = mujoco.MjData(model)
    states = np.empty((n, air.size))
    for i in range(n):
        mujoco.mj_setState(model, data, pile if i >= n - n_heavy else air, FULLPHYSICS)
        perturb(model, data, rng, _DEMO_PERTURBATION)
        mujoco.mj_getState(model, data, states[i], FULLPHYSICS)
    return RolloutWorkload(
        model,
        num_envs=n,
        nthread=nthread,
        nstep=nstep,
        initial_state=states,
        rollout=rollout,
        model_file=demo_model_path(),
        states_label="demo",
    )
