"""chunktune on a Ray cluster (``pip install 'chunktune[ray]'``): one sweep per node type.

From the driver, before the workers start::

    answers = chunktune.ray.tune_cluster(make_workload)   # {node_type: Decision}

Inside Ray tasks and actors, instead of :func:`chunktune.resolve`::

    decision = chunktune.ray.resolve_sync(workload)       # sync tasks and actors
    decision = await chunktune.ray.resolve(workload)      # async actors

A node's type is its ``chunktune.io/node-type`` label (``ray start --labels``,
``ray.init(labels=...)``) where set, else its device fingerprint. Importing this
module does not import Ray; using it does, and without Ray installed raises
:class:`MissingExtraError`.
"""

from __future__ import annotations

from ._errors import MissingExtraError
from ._ray_api import NODE_TYPE_LABEL
from ._ray_cluster import tune_cluster
from ._ray_registry import REGISTRY_NAME, REGISTRY_NAMESPACE
from ._ray_resolve import resolve, resolve_sync

__all__ = [
    "NODE_TYPE_LABEL",
    "REGISTRY_NAME",
    "REGISTRY_NAMESPACE",
    "MissingExtraError",
    "resolve",
    "resolve_sync",
    "tune_cluster",
]

# users and tracebacks see chunktune.ray.resolve, not chunktune._ray_resolve.resolve
# (the error class keeps its own: it is chunktune.MissingExtraError too)
for _function in (resolve, resolve_sync, tune_cluster):
    _function.__module__ = __name__
del _function
