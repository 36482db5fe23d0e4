"""What ``tune`` and ``record`` share: the workload named on the command line."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from .._fingerprint import usable_cpus
from ._common import warn

if TYPE_CHECKING:
    from .._mujoco import RolloutWorkload

__all__ = ["ENVS_PER_THREAD", "load_workload", "pool_threads", "positive_int", "seed_int"]

ENVS_PER_THREAD = 128  # the default batch: 128 envs per worker, as trainers size theirs


def _int_from(text: str, low: int) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < low:
        raise argparse.ArgumentTypeError(f"must be an integer >= {low}, got {value}")
    return value


def positive_int(text: str) -> int:
    """An argparse type: an integer >= 1."""
    return _int_from(text, 1)


def seed_int(text: str) -> int:
    """An argparse type: a seed, an integer >= 0."""
    return _int_from(text, 0)


def pool_threads(asked: int | None) -> int:
    """``--nthread``, or the CPUs this process may use; warns when it asks for more."""
    usable = usable_cpus()
    nthread = asked or usable
    if nthread > usable:
        warn(
            f"--nthread {nthread} is more than the {usable} CPU{'' if usable == 1 else 's'} "
            "this process may use; workers will share cores, so the timings will not match "
            f"a machine with {nthread} free cores"
        )
    return nthread


def load_workload(args: argparse.Namespace, nthread: int) -> tuple[RolloutWorkload, str]:
    """The workload named by ``MODEL`` (or the demo) and a one-line description of it."""
    from .._mujoco import DEMO_NSTEP, RolloutWorkload, demo_workload

    num_envs: int = args.num_envs or ENVS_PER_THREAD * nthread
    if args.model is None:
        nstep = args.nstep or DEMO_NSTEP
        demo = demo_workload(num_envs=num_envs, nthread=nthread, nstep=nstep)
        what = f"demo scene: {num_envs} envs, {nthread} threads, {nstep} steps per rollout"
        return demo, what
    kwargs: dict[str, Any] = {}
    if args.nstep is not None:
        kwargs["nstep"] = args.nstep
    workload = RolloutWorkload.from_xml(args.model, num_envs=num_envs, nthread=nthread, **kwargs)
    what = f"{args.model}: {num_envs} envs, {nthread} threads, {workload.nstep} steps per rollout"
    return workload, what
