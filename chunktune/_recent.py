"""Answers given a moment ago, by workload object: a trainer's env runners pay one hop.

A trainer that resolves once per env runner asks the same question dozens of times
within a second. A cache hit is remembered for ``TTL_S``
under the workload object (held weakly), the settings object, the policy, the batch
shape and this process's count of cache changes, and a repeat within that time is
answered on the event loop itself: no worker thread, no ``signature()``, no file
stat. The price, within that second: a change another process makes to the cache,
or a new ``signature()`` from the same object with the same shape, is not seen yet.
A change this process makes to any cache file (a sweep's entry, ``refresh``,
``clear``, an import, a file moved aside) is.
"""

from __future__ import annotations

import os
import threading
import time
import weakref
from collections import OrderedDict
from typing import Any

import attrs

from ._decision import Decision
from ._policy import Policy
from ._settings import Settings

__all__ = ["TTL_S", "changes", "forget", "recall", "remember"]

TTL_S = 1.0  # as stale as the device fingerprint's CPU quota may be


@attrs.frozen(eq=False)
class _Said:
    workload: weakref.ref[Any]
    settings: Settings
    policy: Policy
    shape: tuple[int, int]
    changes: int
    decision: Decision
    until: float


# oldest first: with one TTL_S, the order in which answers were said is the order they
# expire in, so letting go of the spent ones looks only at the front
_said: OrderedDict[int, _Said] = OrderedDict()
_lock = threading.Lock()


def _reset_in_child() -> None:
    global _lock  # a parent's thread may have held it at the fork
    _lock = threading.Lock()


os.register_at_fork(after_in_child=_reset_in_child)
_changes = 0  # how many times this process changed a cache file (written, moved aside)


def forget() -> None:
    """A cache file was changed by this process: every answer remembered so far is stale."""
    global _changes
    with _lock:
        _changes += 1


def changes() -> int:
    """How many times this process has changed a cache file."""
    return _changes


def recall(
    workload: object, settings: Settings, policy: Policy, shape: tuple[int, int]
) -> Decision | None:
    """The answer given to this very question less than ``TTL_S`` ago, if any, as a copy
    of its own (what one caller does to its timings never reaches the next)."""
    said = _said.get(id(workload))
    if (
        said is None
        or said.workload() is not workload
        or said.settings is not settings
        or said.shape != shape
        or said.changes != changes()
        or time.monotonic() >= said.until
        or said.policy != policy
    ):
        return None
    # a copy: a Decision is frozen, but its timings and samples are dicts the caller may edit
    return attrs.evolve(said.decision)


def remember(
    workload: object,
    settings: Settings,
    policy: Policy,
    shape: tuple[int, int],
    decision: Decision,
) -> None:
    """Keep a copy of ``decision`` for repeats of this question within ``TTL_S``."""
    try:
        ref = weakref.ref(workload)
    except TypeError:  # an object without weak references is not remembered
        return
    now = time.monotonic()
    said = _Said(ref, settings, policy, shape, changes(), attrs.evolve(decision), now + TTL_S)
    with _lock:
        _said[id(workload)] = said
        _said.move_to_end(id(workload))
        while _said:  # a gone workload behind a live one waits for its turn: TTL_S at most
            oldest = next(iter(_said.values()))
            if oldest.until > now and oldest.workload() is not None:
                break
            _said.popitem(last=False)
