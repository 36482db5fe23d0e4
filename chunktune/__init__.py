"""chunktune: choose the thread-pool ``chunk_size`` of MuJoCo batched rollouts by measurement.

decision = await chunktune.resolve(workload)
rollout.rollout(..., chunk_size=decision.chunk_size)
"""

from __future__ import annotations

# first, before anything else loads (typing included): the command's Ctrl-C while
# loading exits quietly
from . import _sigint  # noqa: F401

# isort: split
from typing import TYPE_CHECKING, Any

from . import _eager, _exports  # noqa: F401
from ._cache import DecisionCache
from ._cache_entry import CacheEntry
from ._candidates import (
    BalancedCandidates,
    CandidateStrategy,
    ExhaustiveCandidates,
    ExplicitCandidates,
    GeometricCandidates,
    SeedCandidates,
)
from ._config import load_settings
from ._converter import dump_policy, dump_settings
from ._counts import native_chunk, upper_chunk
from ._decision import Decision
from ._errors import (
    CacheError,
    ChunktuneError,
    ConfigError,
    InvalidArgumentError,
    MissingExtraError,
    OutputError,
    TraceError,
    UsageError,
    WorkloadError,
)
from ._events import ProgressCallback, ProgressEvent
from ._load import MachineLoad
from ._policy import Policy
from ._resolve import resolve, resolve_sync
from ._settings import CacheSettings, LogSettings, RaySettings, Settings
from ._workload import Workload

if TYPE_CHECKING:
    from ._mujoco import RolloutWorkload, demo_model_path, demo_workload

__all__ = [
    "BalancedCandidates",
    "CacheEntry",
    "CacheError",
    "CacheSettings",
    "CandidateStrategy",
    "ChunktuneError",
    "ConfigError",
    "Decision",
    "DecisionCache",
    "ExhaustiveCandidates",
    "ExplicitCandidates",
    "GeometricCandidates",
    "InvalidArgumentError",
    "LogSettings",
    "MachineLoad",
    "MissingExtraError",
    "OutputError",
    "Policy",
    "ProgressCallback",
    "ProgressEvent",
    "RaySettings",
    "RolloutWorkload",
    "SeedCandidates",
    "Settings",
    "TraceError",
    "UsageError",
    "Workload",
    "WorkloadError",
    "demo_model_path",
    "demo_workload",
    "dump_policy",
    "dump_settings",
    "load_settings",
    "native_chunk",
    "resolve",
    "resolve_sync",
    "upper_chunk",
]


_LAZY = ("RolloutWorkload", "demo_model_path", "demo_workload")

_exports.present_as(__name__, (globals()[name] for name in __all__ if name not in _LAZY))


def __getattr__(name: str) -> Any:
    # importing mujoco costs ~0.3 s; only pay for it when the real workload is asked for
    if name in _LAZY:
        from . import _mujoco

        value = getattr(_mujoco, name)
        _exports.present_as(__name__, [value])
        return value
    raise AttributeError(f"module 'chunktune' has no attribute {name!r}")


def __dir__() -> list[str]:
    # what tab completion offers: the lazy names too, not this module's own imports
    return sorted((set(globals()) - {"Any", "TYPE_CHECKING", "annotations"}) | set(__all__))
