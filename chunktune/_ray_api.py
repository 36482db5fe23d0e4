"""Ray, imported on use, and what chunktune asks of it: a connection and a node's type.

The only module that imports ``ray`` itself, and only inside :func:`ray_module`
(:mod:`chunktune._ray_cluster` loads one submodule of it, the scheduling strategies, when
it pins a task to a node), so plain ``import chunktune`` (and ``import chunktune.ray``)
never pays for it. Ray is typed as ``Any`` here: its annotations vary between releases,
and chunktune calls few of its functions.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import threading
from collections.abc import Mapping
from typing import Any

from ._errors import MissingExtraError, UsageError
from ._settings import Settings

__all__ = [
    "NODE_TYPE_LABEL",
    "connected_ray",
    "fingerprint_type",
    "node_labels",
    "node_type",
    "ray_module",
]

NODE_TYPE_LABEL = "chunktune.io/node-type"


def ray_module() -> Any:
    """The ``ray`` package.

    Raises:
        MissingExtraError: Ray is not installed (the message names the extra).
    """
    try:
        return importlib.import_module("ray")
    except ImportError as exc:
        raise MissingExtraError(
            f"chunktune.ray needs Ray, which cannot be imported ({exc}); install it with "
            "`pip install 'chunktune[ray]'`"
        ) from None


def connected_ray(settings: Settings) -> Any:
    """``ray``, connected: as it is, or started locally when ``[ray] init_local`` allows.

    Raises:
        MissingExtraError: Ray is not installed.
        UsageError: Ray is not initialised in this process and ``init_local`` is off.
    """
    ray = ray_module()
    if not ray.is_initialized():
        if not settings.ray.init_local:
            raise UsageError(
                "Ray is not initialised in this process; call ray.init() first "
                "(ray.init(address='auto') joins a running cluster), or set "
                "[ray] init_local = true to let chunktune start a local Ray"
            )
        _init_for_good(ray)
    return ray


_init_lock = threading.Lock()


def _init_for_good(ray: Any) -> None:
    """``ray.init()`` on a thread that lives as long as the process.

    Ray's own processes end with the thread that started them (they are told to die
    with their parent thread), so a local Ray started on a worker thread of an event
    loop went down when that loop ended. A daemon thread that starts it and then waits
    forever keeps it up; the caller waits for the start and gets its error, if any.
    """
    with _init_lock:
        if ray.is_initialized():
            return
        started = threading.Event()
        failed: list[BaseException] = []

        def keep() -> None:
            try:
                ray.init()
            except BaseException as exc:  # handed to the caller below
                failed.append(exc)
            started.set()
            if not failed:
                threading.Event().wait()  # Ray's processes live while this thread does

        threading.Thread(target=keep, name="chunktune-ray-init", daemon=True).start()
        started.wait()
        if failed:
            raise failed[0]


def node_labels(ray: Any) -> dict[str, str]:
    """The calling process's node labels (empty where this Ray has none)."""
    get = getattr(ray.get_runtime_context(), "get_node_labels", None)
    if get is None:
        return {}
    return {str(k): str(v) for k, v in (get() or {}).items()}


def fingerprint_type(device: Mapping[str, Any]) -> str:
    """The node type a device fingerprint stands for: ``"fp-"`` and 12 hex digits of its hash."""
    blob = json.dumps(dict(device), sort_keys=True, separators=(",", ":"), default=str)
    return "fp-" + hashlib.sha256(blob.encode()).hexdigest()[:12]


def node_type(labels: Mapping[str, str], device: Mapping[str, Any]) -> str:
    """A node's type: its ``chunktune.io/node-type`` label where set, else its fingerprint's."""
    label = labels.get(NODE_TYPE_LABEL)
    return str(label) if label else fingerprint_type(device)
