"""The MuJoCo adapter: the only package of chunktune that imports mujoco.

``_rollout`` holds the Workload over ``mujoco.rollout.Rollout``, ``_inputs`` its
arguments checked and its default arrays, ``_models`` what it needs to know of models
(loading, sizes, variants, content hashes), ``_limits`` what this machine can hold,
``_demo`` the bundled demo scene, ``_warned`` MuJoCo's warnings while chunktune's
commands measure, and ``_measure`` the measurements benchmarks and plots make around a
workload. Python's exit waiting for a pool call still in flight is the package's own
(``chunktune._exiting``, for every workload): a RolloutWorkload registers its call lock
there, and refuses to start a call once the exit has begun. MuJoCo ships no type
stubs, so its objects are typed ``Any`` here, and every number that leaves a mujoco
call is converted to a Python or numpy type before it is returned.
"""

from __future__ import annotations

from ._demo import DEMO_NSTEP, demo_model_path, demo_workload
from ._measure import batch_seconds, per_env_costs
from ._models import labelled_options, model_digest, remembered_digest
from ._rollout import RolloutWorkload
from ._warned import WarningTally, warnings_counted

__all__ = [
    "DEMO_NSTEP",
    "RolloutWorkload",
    "WarningTally",
    "batch_seconds",
    "demo_model_path",
    "demo_workload",
    "labelled_options",
    "model_digest",
    "per_env_costs",
    "remembered_digest",
    "warnings_counted",
]
