"""A pool with more threads than the CPUs this process may use: said once a process.

In a container or a batch slot a trainer often sizes its pool by ``os.cpu_count()``,
the host's count, while its affinity or CPU quota lets it run on fewer. Its workers
then take turns on shared cores: a chunk size is measured (and cached) for that pool,
and on one CPU every size measured within a few percent of the others (README, "In a
container or a batch slot"). Nothing fails, so nothing else would say so.
"""

from __future__ import annotations

import logging
import threading

from ._fingerprint import allowed_cpus, current_quota, usable_cpus

__all__ = ["crowded_cpus", "hush_crowding", "warn_if_crowded"]

logger = logging.getLogger("chunktune")

_told: set[tuple[int, int]] = set()  # (nthread, allowed CPUs) said in this process
_told_lock = threading.Lock()


def crowded_cpus(nthread: int) -> tuple[int, str] | None:
    """When ``nthread`` is more than the CPUs this process may use: their count, and
    ``"the 1 CPU this process may use"`` (naming the quota where that limits it); else None.
    """
    usable, quota = usable_cpus(), current_quota()
    allowed = allowed_cpus(usable, quota)
    if nthread <= allowed:
        return None
    cpus = f"the {allowed} CPU{'' if allowed == 1 else 's'} this process may use"
    if allowed < usable:
        assert quota is not None  # only a quota makes fewer than the usable CPUs
        cpus += f" (its CPU quota, {quota:g}, of the {usable} it may run on)"
    return allowed, cpus


def _first_time(nthread: int, crowded: tuple[int, str]) -> bool:
    """Whether ``crowded`` is new for ``nthread`` in this process (now marked as said)."""
    said = (nthread, crowded[0])
    with _told_lock:
        if said in _told:
            return False
        _told.add(said)
    return True


def warn_if_crowded(nthread: int) -> None:
    """Log a warning, once a process for this ``nthread`` and CPU count, when a pool of
    ``nthread`` threads is more than the CPUs this process may use. Never raises."""
    try:
        crowded = crowded_cpus(nthread)
    except Exception:  # advice only: a machine it cannot read must not stop a trainer
        logger.debug("chunktune: could not count the CPUs this process may use", exc_info=True)
        return
    if crowded is not None and _first_time(nthread, crowded):
        allowed, cpus = crowded
        logger.warning(
            "chunktune: nthread=%d is more than %s: the pool's workers take turns on shared "
            "cores, so a chunk size measured for it holds for that crowding only; "
            "expected nthread=%d or fewer, one worker a CPU",
            nthread,
            cpus,
            allowed,
        )


def hush_crowding(nthread: int) -> tuple[int, str] | None:
    """:func:`crowded_cpus`, marked as said: one who tells it in words of its own (the
    CLI's ``--nthread`` warning) keeps :func:`warn_if_crowded` from saying it again."""
    crowded = crowded_cpus(nthread)
    if crowded is not None:
        _first_time(nthread, crowded)
    return crowded
