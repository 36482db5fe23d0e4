"""Per-env cost vectors for simulated pools: named layouts of how uneven a batch is."""

from __future__ import annotations

import math
import numbers

import numpy as np
import numpy.typing as npt

from ._errors import InvalidArgumentError
from ._validators import shown
from ._workload import check_chunk_size, check_seed

__all__ = ["LAYOUTS", "FloatArray", "check_real", "env_costs"]

FloatArray = npt.NDArray[np.float64]

# Each layout's shape parameters and their defaults; a key not listed here is an error.
_SHAPES: dict[str, dict[str, float | int | str]] = {
    "uniform": {},
    "lognormal": {"sigma": 0.5},
    "blocked": {"heavy_fraction": 0.25, "heavy_factor": 4.0, "position": "end"},
    "blocks": {"n_blocks": 3, "heavy_fraction": 0.25, "heavy_factor": 4.0},
    "variants": {"n_variants": 4, "variant_sigma": 0.5, "jitter": 0.05},
    "interleaved": {"period": 4, "heavy_factor": 4.0},
}

#: The layout names :func:`env_costs` accepts.
LAYOUTS: tuple[str, ...] = tuple(_SHAPES)

_POSITIONS = ("end", "start", "middle")


def _is_real(value: object) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def check_real(
    what: str, value: object, *, low: float, low_open: bool = False, high: float | None = None
) -> float:
    """Return ``value`` as a finite float in the range, or raise InvalidArgumentError."""
    upper = "" if high is None else f" and <= {high}"
    rule = f"a finite number {'>' if low_open else '>='} {low}{upper}"
    if not _is_real(value):
        raise InvalidArgumentError(f"{what} must be {rule}, got {shown(value)}")
    number = float(value)  # type: ignore[arg-type]
    if (
        not math.isfinite(number)
        or number < low
        or (low_open and number == low)
        or (high is not None and number > high)
    ):
        raise InvalidArgumentError(f"{what} must be {rule}, got {shown(value)}")
    return number


# --------------------------------------------------------------------------- env costs


def env_costs(
    layout: str,
    num_envs: int,
    *,
    mean_s: float = 1e-3,
    seed: int = 0,
    **shape: float | int | str,
) -> FloatArray:
    """Per-env single-thread step costs in seconds for a named layout.

    The result has ``num_envs`` positive entries whose mean is exactly ``mean_s``.

    Layouts and their shape keywords (defaults in brackets):

    - ``"uniform"``: every env costs the same.
    - ``"lognormal"``: independent lognormal costs; ``sigma`` [0.5] is the log-spread.
    - ``"blocked"``: one contiguous block of heavy envs, as when a quarter of the batch is
      in heavy contact; ``heavy_fraction`` [0.25] of the envs cost ``heavy_factor`` [4.0]
      times the rest, placed at ``position`` [``"end"``], ``"start"`` or ``"middle"``.
    - ``"blocks"``: ``n_blocks`` [3] heavy blocks of equal size at seeded random,
      non-overlapping places, ``heavy_fraction`` [0.25] of the envs in all, costing
      ``heavy_factor`` [4.0] times the rest: contact that comes in clusters.
    - ``"variants"``: ``n_variants`` [4] model variants in contiguous, equal blocks (sizes
      differ by at most one env); each variant's cost factor is lognormal with log-spread
      ``variant_sigma`` [0.5], and each env gets lognormal jitter ``jitter`` [0.05].
    - ``"interleaved"``: every ``period``-th env [4], starting at env 0, costs
      ``heavy_factor`` [4.0] times the others, so heavy envs are spread evenly.

    Random layouts draw from ``numpy.random.default_rng(seed)``.

    Raises:
        InvalidArgumentError: an unknown layout or shape keyword, a shape value out of
            range, ``num_envs`` below 1, ``mean_s`` not positive, or a negative seed.
    """
    if not isinstance(layout, str) or layout not in _SHAPES:
        raise InvalidArgumentError(
            f"unknown layout {layout!r}; the layouts are {', '.join(LAYOUTS)}"
        )
    n = check_chunk_size(num_envs, what="num_envs")
    mean = check_real("mean_s", mean_s, low=0.0, low_open=True)
    rng = np.random.default_rng(check_seed(seed))
    defaults = _SHAPES[layout]
    unknown = sorted(set(shape) - set(defaults))
    if unknown:
        valid = ", ".join(defaults) if defaults else "none"
        raise InvalidArgumentError(
            f"layout {layout!r} has no shape parameter {', '.join(map(repr, unknown))}; "
            f"its parameters are: {valid}"
        )
    params = {**defaults, **shape}

    def real(key: str, *, low: float, low_open: bool = False, high: float | None = None) -> float:
        return check_real(f"{layout} {key}", params[key], low=low, low_open=low_open, high=high)

    def count(key: str) -> int:
        return check_chunk_size(params[key], what=f"{layout} {key}")

    costs: FloatArray
    if layout == "uniform":
        costs = np.ones(n)
    elif layout == "lognormal":
        costs = rng.lognormal(0.0, real("sigma", low=0.0), n)
    elif layout == "blocked":
        fraction = real("heavy_fraction", low=0.0, high=1.0)
        factor = real("heavy_factor", low=0.0, low_open=True)
        position = params["position"]
        if position not in _POSITIONS:
            raise InvalidArgumentError(
                f"blocked position must be one of {', '.join(_POSITIONS)}, got {shown(position)}"
            )
        heavy = round(fraction * n)
        start = {"start": 0, "middle": (n - heavy) // 2, "end": n - heavy}[str(position)]
        costs = np.ones(n)
        costs[start : start + heavy] = factor
    elif layout == "blocks":
        blocks = count("n_blocks")
        fraction = real("heavy_fraction", low=0.0, high=1.0)
        factor = real("heavy_factor", low=0.0, low_open=True)
        size = round(fraction * n / blocks)
        costs = np.ones(n)
        if size:
            # cut the light envs into blocks + 1 gaps at random, a heavy block in between
            light = n - size * blocks
            if light < 0:
                raise InvalidArgumentError(
                    f"blocks: {blocks} blocks of {size} envs do not fit in {n} envs"
                )
            cuts = np.sort(rng.integers(0, light + 1, blocks))
            for k, cut in enumerate(cuts):
                start = int(cut) + k * size
                costs[start : start + size] = factor
    elif layout == "variants":
        variants = count("n_variants")
        factors = rng.lognormal(0.0, real("variant_sigma", low=0.0), variants)
        block = (np.arange(n) * variants) // n
        costs = factors[block] * rng.lognormal(0.0, real("jitter", low=0.0), n)
    else:  # interleaved
        period = count("period")
        factor = real("heavy_factor", low=0.0, low_open=True)
        costs = np.where(np.arange(n) % period == 0, factor, 1.0)
    return np.asarray(costs * (mean / float(np.mean(costs))), dtype=np.float64)
