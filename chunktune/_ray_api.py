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
import os
import threading
import time
from collections.abc import Mapping
from typing import Any

import attrs

from ._errors import MissingExtraError, UsageError
from ._settings import Settings

__all__ = [
    "NODE_TYPE_LABEL",
    "RAY_ADDRESS",
    "START_TIMEOUT_S",
    "StartRefused",
    "connected_ray",
    "fingerprint_type",
    "node_labels",
    "node_type",
    "ray_module",
    "started_ray",
]

NODE_TYPE_LABEL = "chunktune.io/node-type"
RAY_ADDRESS = "RAY_ADDRESS"  # the variable ray.init() takes its cluster's address from
# ray.init() under [ray] init_local: a start (a local Ray's, or joining the cluster
# RAY_ADDRESS names) not done by then is refused; a local start takes seconds
START_TIMEOUT_S = 60.0


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
    """``ray``, connected: as it is, or by ``ray.init()`` when ``[ray] init_local`` allows.

    :func:`started_ray`, raising where Ray cannot be used: ``tune_cluster`` can do
    nothing without it.

    Raises:
        MissingExtraError: Ray is not installed.
        UsageError: Ray is not initialised in this process and ``init_local`` is off, or
            ``ray.init()`` had not returned within :data:`START_TIMEOUT_S` seconds (the
            message names ``RAY_ADDRESS`` and its value where it is set), or this
            process's start failed or was overdue before (the message says why).
        what ``ray.init()`` raised, to the callers that waited for it to fail.
    """
    ray = started_ray(settings)
    if isinstance(ray, StartRefused):
        if ray.error is not None:
            raise ray.error
        raise UsageError(ray.why)
    return ray


@attrs.frozen
class StartRefused:
    """Why Ray cannot be used in this process: its start under ``[ray] init_local`` failed,
    or had not connected within :data:`START_TIMEOUT_S` seconds; ``why`` says which, and
    what to do. ``error`` is what ``ray.init()`` raised, for the callers that waited for
    it to fail (None for those that came later, or when it had not returned)."""

    why: str
    error: BaseException | None = None


def started_ray(settings: Settings) -> Any:
    """``ray``, connected as :func:`connected_ray` connects it, or :class:`StartRefused`.

    The start (``ray.init()``, which joins the cluster ``RAY_ADDRESS`` names where it is
    set) is waited for at most :data:`START_TIMEOUT_S` seconds, counted from when it
    began. A start that failed, or that was still under way then (it goes on in the
    background, and Ray is used if it connects), is remembered for the process: every
    later call answers :class:`StartRefused` at once, starting no other, so a stale
    ``RAY_ADDRESS`` costs a process that wait once, not every call. A failed start is
    remembered while ``RAY_ADDRESS`` stays as it was: a call after it changed starts
    again (see :func:`_start_for_good`).

    Raises:
        MissingExtraError: Ray is not installed.
        UsageError: Ray is not initialised in this process and ``init_local`` is off.
    """
    ray = ray_module()
    if not ray.is_initialized():
        if not settings.ray.init_local:
            address = os.environ.get(RAY_ADDRESS) or None
            starts = (
                "start a local Ray"
                if address is None
                else f"call ray.init(), which joins the cluster RAY_ADDRESS={address!r} names"
            )
            raise UsageError(
                "Ray is not initialised in this process; call ray.init() first "
                "(ray.init(address='auto') joins a running cluster), or set "
                f"[ray] init_local = true to let chunktune {starts}"
            )
        refused = _start_for_good(ray)
        if refused is not None:
            return refused
    return ray


class _Start:
    """One ``ray.init()`` under ``init_local``: when it began, what ``RAY_ADDRESS`` said
    then, whether it has returned, what it raised if it failed, and whether a caller
    gave up waiting for it (``overdue``)."""

    __slots__ = ("address", "began", "done", "failed", "overdue")

    def __init__(self, address: str | None) -> None:
        self.address = address
        self.began = time.monotonic()
        self.done = threading.Event()
        self.failed: list[BaseException] = []
        self.overdue = False

    def refused(self, address: str | None) -> bool:
        """Whether a call that finds this start, ``RAY_ADDRESS`` now ``address``, is refused
        rather than waiting for it or starting again: the start was given up while under
        way (and is so still), or it failed joining that same ``address``."""
        if not self.done.is_set():
            return self.overdue
        return bool(self.failed) and address == self.address


_init_lock = threading.Lock()
_start: _Start | None = None  # the latest start; a new one only after one that connected


def _start_for_good(ray: Any) -> StartRefused | None:
    """``ray.init()`` on a thread that lives as long as the process, waited for within
    :data:`START_TIMEOUT_S` seconds of its start; None once Ray is up.

    Ray's own processes end with the thread that started them (they are told to die
    with their parent thread), so a local Ray started on a worker thread of an event
    loop went down when that loop ended. A daemon thread that starts it and then waits
    forever keeps it up; the caller waits for the start and gets its error, if any.

    ``ray.init()`` cannot be stopped once called, and joining a cluster that is gone (a
    stale ``RAY_ADDRESS``) retries for many minutes and then fails. There is only ever
    one start under way: a caller that finds one joins it, waiting what is left of its
    :data:`START_TIMEOUT_S`. A start that was given up while under way, or that failed,
    is not repeated: a trainer that resolves many workloads would otherwise pay the wait
    again and again; every later caller is refused at once with the reason (and uses
    Ray once it is up: a ``ray.init()`` of the caller's own, or the abandoned start
    connecting after all). A caller starts again only after a start that connected (and
    a ``ray.shutdown()`` since), or after one that failed once ``RAY_ADDRESS`` has
    changed since it began (unset, to start a local Ray, or naming another cluster), as
    the refusal advises.
    """
    global _start
    with _init_lock:
        if ray.is_initialized():
            return None
        start = _start
        address = os.environ.get(RAY_ADDRESS) or None
        if start is not None and start.refused(address):
            return StartRefused(_refusal(start))
        if start is None or start.done.is_set():
            start = _Start(address)
            threading.Thread(
                target=_keep, args=(ray, start), name="chunktune-ray-init", daemon=True
            ).start()
            _start = start  # once its thread runs: a start that never began is no start
    left = start.began + START_TIMEOUT_S - time.monotonic()
    if not start.done.wait(max(0.0, left)):
        start.overdue = True
        return StartRefused(_refusal(start))
    if start.failed:
        return StartRefused(_refusal(start), start.failed[0])
    return None


def _keep(ray: Any, start: _Start) -> None:
    """Start Ray (``start`` says how it went), then keep this thread, and so Ray, alive."""
    try:
        ray.init()
    except BaseException as exc:  # handed to the callers waiting on the start
        start.failed.append(exc)
    start.done.set()
    if not start.failed:
        threading.Event().wait()  # Ray's processes live while this thread does


def _refusal(start: _Start) -> str:
    """Why Ray cannot be used once ``start`` failed or was overdue, and what to do."""
    began = f"{time.monotonic() - start.began:.0f} s ago"
    if start.failed:
        error = start.failed[0]
        lines = str(error).strip().splitlines()
        told = f"{type(error).__name__}: {lines[0][:300]}" if lines else type(error).__name__
        joining = "" if start.address is None else f", joining RAY_ADDRESS={start.address!r}"
        what = f"Ray's start (ray.init() under [ray] init_local{joining}) failed ({told})"
    elif start.address is not None:
        what = (
            f"Ray did not connect within {START_TIMEOUT_S:g} s to the cluster that "
            f"RAY_ADDRESS={start.address!r} names (ray.init() under [ray] init_local = true "
            f"joins it, and keeps retrying an address nothing answers at; it began {began}, "
            "goes on in the background, and is used if it connects)"
        )
    else:
        what = (
            f"a local Ray did not start within {START_TIMEOUT_S:g} s (ray.init() under [ray] "
            f"init_local = true, begun {began}; it goes on in the background, and is used if "
            "it starts)"
        )
    if start.address is not None:
        fix = (
            "unset RAY_ADDRESS to let chunktune start a local Ray, or start that cluster, "
            "or call ray.init() yourself before chunktune does"
        )
    else:
        fix = (
            "Ray's logs (its session's logs folder) say what holds it up, or call "
            "ray.init() yourself before chunktune does"
        )
    if start.failed:
        was = "unset" if start.address is None else f"{start.address!r}"
        again = f"while RAY_ADDRESS stays {was}"
    else:
        again = "while that start goes on"
    return f"{what}; chunktune does not start Ray again in this process {again}: {fix}"


def _forget_in_child() -> None:
    """In a forked child: the parent's start thread is not here, and will never end."""
    global _init_lock, _start
    _init_lock = threading.Lock()
    _start = None


os.register_at_fork(after_in_child=_forget_in_child)


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
