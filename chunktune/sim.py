"""Workloads without MuJoCo: a modeled pool, and replays of recorded real landscapes.

:class:`SimulatedWorkload` implements :class:`chunktune.Workload` without MuJoCo and
without sleeping. It models the pool as it was measured to behave: the caller queues
chunks of ``c`` consecutive envs in index order (the last may be shorter), each of the
``T`` workers takes the next chunk from one FIFO queue when it becomes free (list
scheduling), a chunk costs the sum of its envs' single-thread costs plus a per-chunk
dispatch overhead (and, optionally, a wait for the queue's mutex), and a call takes
the makespan (the latest worker finish). That model predicted 2-core measurements
within 1-4%, so sweeps, races and selection rules can be tested and benchmarked on it
deterministically, on any machine, at any N and T.

:func:`env_costs` builds per-env cost vectors for named layouts (uniform, lognormal,
a contact block, several blocks, model variants, interleaved heavies); :class:`Noise`
perturbs what ``run()`` reports the way a real machine does (jitter, spikes, drift,
and a memory that neighbouring calls share).
``true_time``, ``oracle``, ``landscape``, ``regret`` and ``bound`` give the exact
answers a tuner's choice can be scored against. ``clock()`` counts the simulated
seconds of every call so far; a sweep's budget runs on it, so it binds as on the
real pool. A workload of your own whose seconds are modeled gets the same by
subclassing :class:`ModeledTime` (a ``clock`` method alone is not enough: a real
workload's clock of some other time must never stand in for the wall clock).

:class:`ReplayWorkload` replays a trace that ``chunktune record`` measured on a real
machine: each probe is the size's recorded truth with the noise recorded at that point
of a walk through the recorded calls, so policies meet real machine noise, its memory
included, deterministically, anywhere.
"""

from __future__ import annotations

from . import _exports
from ._modeled import ModeledTime
from ._replay import ReplayWorkload
from ._simcosts import LAYOUTS, env_costs
from ._simpool import Noise, SimulatedWorkload, compare
from ._trace import Trace, load_trace

__all__ = [
    "LAYOUTS",
    "ModeledTime",
    "Noise",
    "ReplayWorkload",
    "SimulatedWorkload",
    "Trace",
    "compare",
    "env_costs",
    "load_trace",
]

_exports.present_as(__name__, (globals()[name] for name in __all__))
