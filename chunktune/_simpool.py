"""A simulated pool: MuJoCo's rollout thread pool as a model, in modeled seconds."""

from __future__ import annotations

import hashlib
import heapq
import math
from collections.abc import Callable, Iterable
from typing import Any, Self

import attrs
import numpy as np
import numpy.typing as npt

from ._counts import check_chunk_size, check_count, check_seed, native_chunk, upper_chunk
from ._errors import InvalidArgumentError
from ._modeled import CountedCalls
from ._returned import SignatureValue
from ._shown import shown_one
from ._simcosts import FloatArray, check_real, env_costs

__all__ = ["Noise", "SimulatedWorkload", "compare"]

# Relative gap below which two modeled times count as a tie (float rounding, not speed).
_TIE = 1e-12


# ------------------------------------------------------------------------------- noise


def _validator(
    low: float, *, low_open: bool = False, high: float | None = None
) -> Callable[[Any, attrs.Attribute[float], float], None]:
    def check(_instance: Any, attribute: attrs.Attribute[float], value: float) -> None:
        check_real(f"Noise.{attribute.name}", value, low=low, low_open=low_open, high=high)

    return check


@attrs.frozen
class Noise:
    """How far what ``SimulatedWorkload.run()`` reports strays from the model's exact time.

    Each call's reported seconds are ``true_time * m`` where ``m`` is the product of:

    - jitter ``exp(sigma * z)``, ``z`` standard normal: lognormal with median 1, so
      ``sigma=0.03`` is about 3% call-to-call noise and the median run equals the truth.
      With ``memory`` the ``z`` of successive calls are correlated (an AR(1) series,
      ``z_k = memory * z_(k-1) + sqrt(1 - memory**2) * e_k``, still standard normal
      each): calls made back to back share the machine's passing state, as on a real
      one (the recorded 2-core VM: about 0.5 between neighbouring calls, 0.2 three
      calls apart; 0.1-0.55 on 4-16 cores). 0, the default, is independent calls;
    - a spike, with probability ``spike_prob``: ``1 + spike_scale * u``, ``u`` uniform on
      [0, 1), as when another process steals a core; spikes only ever inflate;
    - drift ``1 + drift * sin(2*pi*k / drift_period + phase)`` at call ``k``, a slow swing
      of relative amplitude ``drift`` (below 1) such as thermal throttling or a
      neighbour's load; ``phase`` is drawn from the workload's seed.

    Raises:
        InvalidArgumentError: a field is negative or not finite, ``spike_prob``,
            ``drift`` or ``memory`` is out of range, or ``drift_period`` is not positive.
    """

    sigma: float = attrs.field(default=0.0, validator=_validator(0.0))
    spike_prob: float = attrs.field(default=0.0, validator=_validator(0.0, high=1.0))
    spike_scale: float = attrs.field(default=0.5, validator=_validator(0.0))
    drift: float = attrs.field(default=0.0, validator=_validator(0.0, high=0.99))
    drift_period: float = attrs.field(default=64.0, validator=_validator(0.0, low_open=True))
    memory: float = attrs.field(default=0.0, validator=_validator(0.0, high=0.99))

    @property
    def silent(self) -> bool:
        """Whether every call reports exactly the model's time."""
        return self.sigma == 0.0 and self.spike_prob == 0.0 and self.drift == 0.0


# ------------------------------------------------------------------------------- model


def _makespan(
    prefix: FloatArray, chunk: int, nthread: int, dispatch_s: float, queue_s: float = 0.0
) -> float:
    """Makespan in seconds of list-scheduling ``chunk``-sized chunks on ``nthread`` workers.

    ``prefix`` is the cumulative env cost with a leading 0, so a chunk's cost is one
    difference of it. ``queue_s`` is how long one take from the queue holds its mutex:
    takes are serialized, so with many small chunks workers wait for the lock.
    """
    n = len(prefix) - 1
    bounds = np.arange(0, n + chunk, chunk)
    bounds[-1] = n
    costs = np.diff(prefix[bounds]) + dispatch_s
    if queue_s > 0:
        free = [0.0] * nthread
        lock = 0.0
        for cost in costs.tolist():
            # the worker that frees first takes the lock next, once the last take released it
            lock = max(heapq.heappop(free), lock) + queue_s
            heapq.heappush(free, lock + cost)
        return max(free)
    if len(costs) <= nthread:  # every chunk starts at once, on its own worker
        return float(costs.max())
    if nthread == 1:
        return float(costs.sum())
    # The first T chunks start together; each later chunk goes to the worker that frees
    # first. Ties between workers do not matter: they are interchangeable.
    free = sorted(costs[:nthread].tolist())
    later: list[float] = costs[nthread:].tolist()
    for cost in later:
        heapq.heapreplace(free, free[0] + cost)
    return max(free)


class SimulatedWorkload(CountedCalls):
    """A :class:`chunktune.Workload` whose ``run()`` returns modeled seconds.

    ``costs`` are the per-env single-thread costs in seconds (see :func:`env_costs`),
    ``nthread`` the pool's worker count T and ``dispatch_s`` the seconds each chunk adds
    for queueing (MuJoCo's mutex-guarded queue costs about 0.1-0.9 us a chunk).
    ``queue_s`` (default 0) is how long each take from the queue holds its mutex:
    takes are serialized, so many small chunks on many threads contend for it.
    ``run()`` never sleeps: it returns :meth:`true_time` perturbed by ``noise``, drawn
    from a generator seeded with ``seed`` that advances once per call, and records the
    call in ``calls`` and ``history``.

    Raises:
        InvalidArgumentError: ``costs`` is empty, not one-dimensional, or holds a value
            that is not positive and finite; ``nthread`` is not an integer >= 1;
            ``dispatch_s`` or ``queue_s`` is negative; ``seed`` is negative; ``noise`` is not
            a Noise.
    """

    __slots__ = (
        "__weakref__",  # resolve remembers a hit for a moment by the workload object
        "_costs",
        "_jitter",
        "_phase",
        "_prefix",
        "_rng",
        "_times",
        "dispatch_s",
        "name",
        "noise",
        "nthread",
        "num_envs",
        "queue_s",
        "seed",
    )

    num_envs: int
    nthread: int
    dispatch_s: float
    queue_s: float
    noise: Noise
    seed: int
    name: str

    def __init__(
        self,
        costs: npt.ArrayLike,
        *,
        nthread: int,
        dispatch_s: float = 5e-7,
        queue_s: float = 0.0,
        noise: Noise = Noise(),
        seed: int = 0,
        name: str = "sim",
    ) -> None:
        try:
            array = np.array(costs, dtype=np.float64)
        except (TypeError, ValueError) as exc:
            raise InvalidArgumentError(
                f"costs must be a sequence of positive, finite seconds, got {shown_one(costs)}"
            ) from exc
        if array.ndim != 1 or array.size == 0:
            raise InvalidArgumentError(
                f"costs must be a non-empty one-dimensional sequence of seconds, "
                f"got shape {array.shape}"
            )
        bad = ~(np.isfinite(array) & (array > 0))
        if bad.any():
            index = int(np.argmax(bad))
            got = float(array[index])
            raise InvalidArgumentError(
                f"costs must be positive and finite seconds, got {got!r} at env {index}"
            )
        if not isinstance(noise, Noise):
            raise InvalidArgumentError(
                f"noise must be a chunktune.sim.Noise, got {shown_one(noise)}"
            )
        array.flags.writeable = False
        self._costs: FloatArray = array
        self._prefix: FloatArray = np.concatenate(([0.0], np.cumsum(array)))
        self._times: dict[int, float] = {}
        self.num_envs = int(array.size)
        self.nthread = check_count(nthread, what="nthread")
        self.dispatch_s = check_real("dispatch_s", dispatch_s, low=0.0)
        self.queue_s = check_real("queue_s", queue_s, low=0.0)
        self.noise = noise
        self.seed = check_seed(seed)
        self.name = str(name)
        self.reset()

    @classmethod
    def from_layout(
        cls,
        layout: str,
        *,
        num_envs: int,
        nthread: int,
        mean_s: float = 1e-3,
        noise: Noise = Noise(),
        seed: int = 0,
        dispatch_s: float = 5e-7,
        queue_s: float = 0.0,
        **shape: float | int | str,
    ) -> Self:
        """A workload over ``env_costs(layout, num_envs, mean_s=, seed=, **shape)``.

        ``seed`` seeds both the layout and the noise. The workload's ``name`` is the
        layout name.

        Raises:
            InvalidArgumentError: as :func:`env_costs` and the constructor do.
        """
        costs = env_costs(layout, num_envs, mean_s=mean_s, seed=seed, **shape)
        return cls(
            costs,
            nthread=nthread,
            dispatch_s=dispatch_s,
            queue_s=queue_s,
            noise=noise,
            seed=seed,
            name=layout,
        )

    def __repr__(self) -> str:
        return (
            f"SimulatedWorkload(name={self.name!r}, num_envs={self.num_envs}, "
            f"nthread={self.nthread}, dispatch_s={self.dispatch_s!r}, queue_s={self.queue_s!r}, "
            f"noise={self.noise!r}, "
            f"seed={self.seed})"
        )

    @property
    def costs(self) -> FloatArray:
        """The per-env single-thread costs in seconds (a read-only array)."""
        return self._costs

    def reset(self) -> None:
        """Forget the calls made so far and restart the noise sequence from ``seed``."""
        self._rng = np.random.default_rng(self.seed)
        self._phase = float(self._rng.uniform(0.0, 2.0 * math.pi))
        self._jitter: float | None = None  # the last call's z, while noise has memory
        self._forget_calls()

    def signature(self) -> dict[str, SignatureValue]:
        """What besides N and T sets the cost: the cost vector's digest and the overhead."""
        digest = hashlib.sha1(self._costs.tobytes(), usedforsecurity=False).hexdigest()
        signature: dict[str, SignatureValue] = {
            "kind": "simulated",
            "name": self.name,
            "costs_sha": digest[:16],
            "dispatch_s": self.dispatch_s,
        }
        if self.queue_s:
            signature["queue_s"] = self.queue_s
        return signature

    def _chunk(self, chunk_size: int | None) -> int:
        if chunk_size is None:
            return native_chunk(self.num_envs, self.nthread)
        return check_chunk_size(chunk_size)

    def true_time(self, chunk_size: int | None) -> float:
        """The exact, noiseless modeled seconds of one call with this chunk size.

        ``None`` means the native chunk; sizes above ``num_envs`` make one chunk.

        Raises:
            InvalidArgumentError: ``chunk_size`` is not None or an integer >= 1.
        """
        chunk = min(self._chunk(chunk_size), self.num_envs)
        seconds = self._times.get(chunk)
        if seconds is None:
            seconds = _makespan(self._prefix, chunk, self.nthread, self.dispatch_s, self.queue_s)
            self._times[chunk] = seconds
        return seconds

    def _multiplier(self) -> float:
        # Draw the same three numbers every call so the sequence for a seed does not
        # depend on which noise terms are switched on.
        z, hit, size = self._rng.standard_normal(), self._rng.random(), self._rng.random()
        noise = self.noise
        if noise.memory and self._jitter is not None:
            z = noise.memory * self._jitter + math.sqrt(1.0 - noise.memory**2) * float(z)
        self._jitter = float(z)
        factor = math.exp(noise.sigma * float(z))
        if hit < noise.spike_prob:
            factor *= 1.0 + noise.spike_scale * float(size)
        if noise.drift:
            angle = 2.0 * math.pi * self.calls / noise.drift_period + self._phase
            factor *= 1.0 + noise.drift * math.sin(angle)
        return factor

    def run(self, chunk_size: int | None) -> float:
        """One modeled pool call: :meth:`true_time` times this call's noise, in seconds.

        Never sleeps. Advances the noise generator, increments ``calls`` and appends
        ``(chunk_size, seconds)`` to ``history``.

        Raises:
            InvalidArgumentError: ``chunk_size`` is not None or an integer >= 1.
        """
        seconds = self.true_time(chunk_size) * self._multiplier()
        return self._counted(chunk_size, seconds)

    def landscape(self) -> dict[int, float]:
        """The exact seconds of every chunk size from 1 to ``ceil(N/T)``."""
        return {
            c: self.true_time(c) for c in range(1, upper_chunk(self.num_envs, self.nthread) + 1)
        }

    def oracle(self) -> tuple[int, float]:
        """The fastest chunk size in ``[1, ceil(N/T)]`` and its exact seconds.

        Ties go to the smallest chunk size; times within a relative 1e-12 of the
        minimum tie, so rounding in the cost sums cannot pick the winner.
        """
        landscape = self.landscape()
        fastest = min(landscape.values())
        chunk = next(c for c, t in landscape.items() if t <= fastest * (1.0 + _TIE))
        return chunk, landscape[chunk]

    def regret(self, chunk_size: int | None) -> float:
        """How much slower ``chunk_size`` is than the oracle: ``true_time / best - 1``.

        Raises:
            InvalidArgumentError: ``chunk_size`` is not None or an integer >= 1.
        """
        return self.true_time(chunk_size) / self.oracle()[1] - 1.0

    def bound(self) -> float:
        """The balance bound in seconds: ``max(sum(costs) / T, max(costs))``.

        No chunking beats it; a work-stealing pool with free dispatch approaches it.
        """
        return max(float(self._prefix[-1]) / self.nthread, float(self._costs.max()))


def compare(
    layout: str,
    *,
    num_envs: int,
    nthread: int,
    chunks: Iterable[int | None],
    mean_s: float = 1e-3,
    seed: int = 0,
    dispatch_s: float = 5e-7,
    queue_s: float = 0.0,
    **shape: float | int | str,
) -> dict[int | None, float]:
    """What-if: the exact seconds of each chunk size on a layout (``None`` = native).

    Raises:
        InvalidArgumentError: as :meth:`SimulatedWorkload.from_layout` and
            :meth:`SimulatedWorkload.true_time` do.
    """
    costs = env_costs(layout, num_envs, mean_s=mean_s, seed=seed, **shape)
    workload = SimulatedWorkload(
        costs, nthread=nthread, dispatch_s=dispatch_s, queue_s=queue_s, name=layout
    )
    return {chunk: workload.true_time(chunk) for chunk in chunks}
