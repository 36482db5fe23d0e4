"""What about this machine changes step cost: the device part of a cache key.

Reads only files and the standard library; never imports mujoco (the version
comes from the installed distribution's metadata).
"""

from __future__ import annotations

import contextlib
import importlib
import math
import os
import platform
import time
from collections.abc import Callable
from importlib import metadata
from pathlib import Path

__all__ = [
    "allowed_cpus",
    "available_memory",
    "chunktune_version",
    "cpu_model",
    "cpu_quota",
    "current_quota",
    "device_fingerprint",
    "mujoco_version",
    "usable_cpus",
]


# Facts read once a process and remembered: the CPU's model, installed versions. A read
# that failed because this process could open no file (its descriptors spent) is not an
# answer: remembered, its fallback would stand in every key for the process's life.
_remembered: dict[str, str] = {}
_read_while_spent: set[str] = set()  # read again only after importlib's caches are cleared


def _can_open_files() -> bool:
    """Whether this process can open a file now (False while its descriptors are spent)."""
    try:
        os.close(os.open(os.devnull, os.O_RDONLY))
    except OSError:
        return False
    return True


def _remember(fact: str, read: Callable[[], str | None], fallback: Callable[[], str]) -> str:
    """``fact``'s value, ``read()`` once a process; ``fallback()`` where it reads None twice
    in a row, and that remembered only if this process could open files then."""
    if fact in _remembered:
        return _remembered[fact]
    if fact in _read_while_spent:
        _forget_listings()
    value = read()
    if value is None:
        # one failed read is no answer: an EIO or EACCES on /proc/cpuinfo, or a metadata
        # scan whose listing failed (importlib keeps it, empty), remembered the fallback
        # in every key for the process's life, so no stored entry was ever found again
        _forget_listings()
        value = read()
    if value is None:
        value = fallback()
        if not _can_open_files():
            _read_while_spent.add(fact)
            return value
    _read_while_spent.discard(fact)
    _remembered[fact] = value
    return value


def _forget_listings() -> None:
    """Drop the folder listings the import system keeps: importlib.metadata's too, the empty
    one of a scan made out of file descriptors among them (Python 3.11's
    ``importlib.invalidate_caches()`` leaves those)."""
    importlib.invalidate_caches()
    finder = getattr(metadata, "MetadataPathFinder", None)
    if finder is not None:
        finder().invalidate_caches()  # an instance's: 3.11's is no classmethod


def cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo`` on Linux, else ``platform.processor()``)."""
    return _remember(
        "cpu",
        _cpuinfo_model,
        lambda: platform.processor() or platform.machine() or "unknown",
    )


def _cpuinfo_model() -> str | None:
    try:
        for line in Path("/proc/cpuinfo").read_text(errors="replace").splitlines():
            key, _, value = line.partition(":")
            if key.strip() in ("model name", "Processor", "cpu model", "Hardware"):
                return value.strip()
    except OSError:
        pass
    return None


def usable_cpus() -> int:
    """CPUs this process may run on (its affinity mask where the OS has one)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def allowed_cpus(usable: int, quota: float | None) -> int:
    """The CPUs a process may keep busy at once: its ``usable`` CPUs, fewer where its
    ``quota`` (in CPUs) gives less time; a part of a CPU counts as a whole one."""
    return usable if quota is None else max(1, min(usable, math.ceil(quota)))


def cpu_quota(
    root: Path = Path("/sys/fs/cgroup"), membership: Path = Path("/proc/self/cgroup")
) -> float | None:
    """The CPU quota in CPUs that bounds this process, None if unlimited.

    The smallest cgroup v2 ``cpu.max`` (else v1 CFS quota) of this process's own cgroup,
    as ``membership`` names it, and of each cgroup above it: a batch scheduler or systemd
    sets the limit on the process's cgroup, not at the root a namespaced container sees.
    A cgroup folder that is not under ``root`` (a container shown the path of its host's
    cgroup, or a path that climbs out of its namespace, ``/../job``) is passed over, so the
    root's limit stands; nothing it reads raises.
    """
    v2, v1 = _own_cgroups(membership)
    # where no level has a readable cpu.max, the cgroup v1 files are the ones in use
    readings = _readings(root, v2, _v2_limit) or _readings(root / "cpu", v1, _v1_limit)
    limits = [limit for limit in readings if limit is not None]
    return round(min(limits), 3) if limits else None


def _own_cgroups(membership: Path) -> tuple[str, str]:
    """This process's cgroup v2 path and its v1 ``cpu`` controller's path ("/" if unknown)."""
    v2 = v1 = "/"
    try:
        # a cgroup's name is any bytes, as a file's: decoded as os.fsdecode does, a name
        # that is not UTF-8 names its folder still (and raises no UnicodeDecodeError)
        lines = os.fsdecode(membership.read_bytes()).split("\n")
    except OSError:
        return v2, v1
    for line in lines:
        number, _, rest = line.partition(":")
        controllers, _, path = rest.partition(":")
        if number == "0" and not controllers:
            v2 = path
        elif "cpu" in controllers.split(","):
            v1 = path
    return v2, v1


def _readings(base: Path, own: str, read: Callable[[Path], float | None]) -> list[float | None]:
    """What ``read`` gives at ``base`` and in each folder down to ``own`` under it, where it
    can read one (None: that level sets no limit); at ``base`` alone where ``own`` climbs
    out of it."""
    parts = [part for part in own.split("/") if part not in ("", ".")]
    if ".." in parts:
        # a cgroup outside the namespace's root (``/../job``): the folder its other parts
        # name under ``base`` is some other cgroup, whose limit is not this process's
        parts = []
    readings: list[float | None] = []
    for depth in range(len(parts) + 1):
        with contextlib.suppress(OSError, ValueError, ZeroDivisionError):
            readings.append(read(base.joinpath(*parts[:depth])))
    return readings


def _v2_limit(folder: Path) -> float | None:
    quota, period = (folder / "cpu.max").read_text().split()[:2]
    return None if quota == "max" else int(quota) / int(period)


def _v1_limit(folder: Path) -> float | None:
    quota_us = int((folder / "cpu.cfs_quota_us").read_text())
    period_us = int((folder / "cpu.cfs_period_us").read_text())
    # -1 (and 0, or a period of 0) set no limit
    return quota_us / period_us if quota_us > 0 and period_us > 0 else None


def available_memory(root: Path = Path("/")) -> int | None:
    """Bytes this process could still allocate, None if unknown.

    ``MemAvailable`` of ``/proc/meminfo`` (else free pages by ``sysconf``), capped by
    the room left under a cgroup v2 ``memory.max``.
    """
    avail: int | None = None
    try:
        for line in (root / "proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                avail = int(line.split()[1]) * 1024
                break
    except (OSError, ValueError, IndexError):
        pass
    if avail is None:
        with contextlib.suppress(ValueError, OSError, AttributeError):
            avail = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    try:
        cgroup = root / "sys/fs/cgroup"
        limit = (cgroup / "memory.max").read_text().strip()
        if limit != "max":
            room = int(limit) - int((cgroup / "memory.current").read_text())
            avail = room if avail is None else min(avail, room)
    except (OSError, ValueError):
        pass
    return avail


def chunktune_version() -> str:
    """This chunktune's installed version, or ``"0+unknown"`` when run from a bare tree."""
    return _remember("chunktune", lambda: _installed("chunktune"), lambda: "0+unknown")


def mujoco_version() -> str:
    """The installed MuJoCo version, or ``"none"``."""
    # remembered: reading distribution metadata costs milliseconds, on every cache hit
    return _remember("mujoco", lambda: _installed("mujoco"), lambda: "none")


def _installed(name: str) -> str | None:
    """The installed version of the distribution ``name``, None where none is found.

    A read of its metadata that the file system refuses once (EIO on a network mount) is
    read again: it is no answer (a fallback would stand in every cache key for the
    process's life), and raised it failed the resolve as a bug in chunktune.

    Raises:
        OSError: the metadata could not be read twice in a row.
    """
    try:
        return _version(name)
    except OSError:
        return _version(name)


def _version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


_fixed: tuple[tuple[str, str | int], ...] | None = None


def _fixed_facts() -> tuple[tuple[str, str | int], ...]:
    """The facts that cannot change while this process runs: read once, as soon as the CPU's
    model and mujoco's version were read for real (not fallbacks out of file descriptors)."""
    global _fixed
    if _fixed is not None:
        return _fixed
    facts: tuple[tuple[str, str | int], ...] = (
        ("cpu", cpu_model()),
        ("logical_cpus", os.cpu_count() or 1),
        ("system", platform.system()),
        ("machine", platform.machine()),
        ("mujoco", mujoco_version()),
    )
    if "cpu" in _remembered and "mujoco" in _remembered:
        _fixed = facts
    return facts


_QUOTA_TTL_S = 1.0  # a container's quota changes rarely: read its files at most once a second
_quota_seen: tuple[float, float | None] = (-float("inf"), None)


def current_quota() -> float | None:
    """:func:`cpu_quota` as read at most a second ago."""
    global _quota_seen
    now = time.monotonic()
    if now - _quota_seen[0] >= _QUOTA_TTL_S:
        _quota_seen = (now, cpu_quota())
    return _quota_seen[1]


def device_fingerprint() -> dict[str, str | int | float | bool]:
    """The machine facts a cache key holds, so entries never cross machines or setups.

    What cannot change within a process is read once; the CPUs this process may
    use (its affinity) are asked every call, the container's quota at most once a
    second: a cache hit stays a few microseconds.
    """
    quota = current_quota()
    return {
        **dict(_fixed_facts()),
        "usable_cpus": usable_cpus(),
        "cpu_quota": quota if quota is not None else "none",
    }
