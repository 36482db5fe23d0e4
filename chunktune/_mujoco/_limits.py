"""What this machine can hold: checked before a workload allocates anything per env or thread."""

from __future__ import annotations

from .._errors import InvalidArgumentError
from .._fingerprint import available_memory, usable_cpus

__all__ = ["MAX_THREADS_PER_CPU", "check_batch_memory", "check_nthread"]

# A pool far larger than the machine only adds threads, each with its own MjData.
MAX_THREADS_PER_CPU = 8


def check_nthread(nthread: int) -> None:
    """Raise unless ``nthread`` is within :data:`MAX_THREADS_PER_CPU` times the usable CPUs.

    Raises:
        InvalidArgumentError: ``nthread`` is larger than that.
    """
    cpus = usable_cpus()
    if nthread > MAX_THREADS_PER_CPU * cpus:
        raise InvalidArgumentError(
            f"nthread={nthread} is more than {MAX_THREADS_PER_CPU} times the {cpus} "
            f"CPU{'' if cpus == 1 else 's'} this process may use; expected at most "
            f"{MAX_THREADS_PER_CPU * cpus} (each pool thread steps its own MjData)"
        )


def check_batch_memory(
    *, num_envs: int, nstep: int, nstate: int, nsensordata: int, nu: int
) -> None:
    """Raise when the batch's state, control and output arrays would not fit in memory.

    Raises:
        InvalidArgumentError: they need more bytes than this machine has available.
    """
    floats = num_envs * (nstate + nstep * (nstate + nsensordata + nu))
    need = 8 * floats
    avail = available_memory()
    if avail is not None and need > avail:
        raise InvalidArgumentError(
            f"num_envs={num_envs} with nstep={nstep} needs about {need / 2**30:.3g} GiB for "
            f"the batch's state and output arrays, more than the {avail / 2**30:.3g} GiB "
            "this machine has available; use fewer envs or steps"
        )
