"""The machine's load as a sweep begins, and which cached decisions it lets answer now.

A sweep measures the machine as it is while it runs. Where other work kept every CPU
busy, the landscape it measured is a loaded one: small chunks that balance around
preempted threads can win by tens of percent there and by nothing once the machine is
calm (benchmarks/RESULTS.md, sessions 28-43). Such a decision is provisional: the
first lookup that finds the machine calm does not serve it, so that request measures
again and its entry, measured calm, replaces it. A decision measured while not busy, or
before the load was recorded, answers whatever the load; so does a busy one while the
machine is not calm. Each busy entry is thus measured again at most once per calm spell.

Busy is a one-minute load average of at least the CPU count; calm, at most half of it.
The gap between the two keeps a load that merely dips below the CPU count from
measuring again, and, as the average decays by at most a factor ``e`` a minute, puts
more than 40 s between a sweep that began busy and the first lookup that can find the
machine calm. The figures are system-wide (runnable and waiting tasks, the CPUs the
system counts), so a process confined to some CPUs compares like with like.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from typing import Protocol

import attrs

__all__ = ["MachineLoad", "machine_load", "serves_now"]

logger = logging.getLogger("chunktune")


@attrs.frozen
class MachineLoad:
    """The one-minute load average ``average`` as a sweep began, over ``cpus`` CPUs."""

    average: float
    cpus: int

    @property
    def busy(self) -> bool:
        """Other work kept every CPU busy: what a sweep measures then is a loaded landscape."""
        return self.average >= self.cpus

    @property
    def calm(self) -> bool:
        """At most half the CPUs' worth of work: a busy decision is measured again now."""
        return self.average <= self.cpus / 2

    def __str__(self) -> str:
        return f"load {self.average:.2f} on {self.cpus} CPUs"


def machine_load() -> MachineLoad | None:
    """The machine's load now, or None where the system keeps no load average."""
    try:
        average = os.getloadavg()[0]
    except (AttributeError, OSError):  # Windows; a system without /proc/loadavg
        return None
    return MachineLoad(average, os.cpu_count() or 1)


class _Loaded(Protocol):
    """Has a ``load`` (a cache entry, a decision)."""

    @property
    def load(self) -> MachineLoad | None: ...


def serves_now(read: Callable[[], MachineLoad | None] = machine_load) -> Callable[[_Loaded], bool]:
    """A test of whether a cached decision may answer now: not one measured busy once the
    machine is calm.

    The load is read once, and only when an entry measured busy is tested, so a hit on a
    calm entry reads nothing.
    """
    now: list[MachineLoad | None] = []

    def serves(entry: _Loaded) -> bool:
        measured = entry.load
        if measured is None or not measured.busy:
            return True
        if not now:
            now.append(read())
        current = now[0]
        if current is None or not current.calm:
            return True
        logger.info(
            "chunktune: not serving a decision measured while the machine was busy (%s): "
            "it is calm now (%s); unless another entry answers, this request measures again",
            measured,
            current,
        )
        return False

    return serves
