"""Per-env cost vectors for simulated pools: named layouts of how uneven a batch is."""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable

import numpy as np
import numpy.typing as npt

from ._counts import check_chunk_size, check_seed
from ._errors import InvalidArgumentError
from ._shown import shown_one

__all__ = ["LAYOUTS", "FloatArray", "check_real", "env_costs"]

FloatArray = npt.NDArray[np.float64]

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
        raise InvalidArgumentError(f"{what} must be {rule}, got {shown_one(value)}")
    number = float(value)  # type: ignore[arg-type]
    if (
        not math.isfinite(number)
        or number < low
        or (low_open and number == low)
        or (high is not None and number > high)
    ):
        raise InvalidArgumentError(f"{what} must be {rule}, got {shown_one(value)}")
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
    if not isinstance(layout, str) or layout not in _LAYOUTS:
        raise InvalidArgumentError(
            f"unknown layout {layout!r}; the layouts are {', '.join(LAYOUTS)}"
        )
    n = check_chunk_size(num_envs, what="num_envs")
    mean = check_real("mean_s", mean_s, low=0.0, low_open=True)
    rng = np.random.default_rng(check_seed(seed))
    defaults, costs_of = _LAYOUTS[layout]
    unknown = sorted(set(shape) - set(defaults))
    if unknown:
        valid = ", ".join(defaults) if defaults else "none"
        raise InvalidArgumentError(
            f"layout {layout!r} has no shape parameter {', '.join(map(repr, unknown))}; "
            f"its parameters are: {valid}"
        )
    costs = costs_of(n, rng, _Shape(layout, {**defaults, **shape}))
    return np.asarray(costs * (mean / float(np.mean(costs))), dtype=np.float64)


class _Shape:
    """One layout's shape parameters, defaults filled in; each read is checked and named."""

    __slots__ = ("layout", "params")

    def __init__(self, layout: str, params: dict[str, float | int | str]) -> None:
        self.layout = layout
        self.params = params

    def real(
        self, key: str, *, low: float, low_open: bool = False, high: float | None = None
    ) -> float:
        """Parameter ``key`` as a finite float in the range, or InvalidArgumentError."""
        what = f"{self.layout} {key}"
        return check_real(what, self.params[key], low=low, low_open=low_open, high=high)

    def count(self, key: str) -> int:
        """Parameter ``key`` as an integer >= 1, or InvalidArgumentError."""
        return check_chunk_size(self.params[key], what=f"{self.layout} {key}")


def _uniform(n: int, rng: np.random.Generator, shape: _Shape) -> FloatArray:
    """Every env costs the same."""
    return np.ones(n)


def _lognormal(n: int, rng: np.random.Generator, shape: _Shape) -> FloatArray:
    """Independent lognormal costs of log-spread ``sigma``."""
    return rng.lognormal(0.0, shape.real("sigma", low=0.0), n)


def _blocked(n: int, rng: np.random.Generator, shape: _Shape) -> FloatArray:
    """One contiguous heavy block at the start, middle or end."""
    fraction = shape.real("heavy_fraction", low=0.0, high=1.0)
    factor = shape.real("heavy_factor", low=0.0, low_open=True)
    position = shape.params["position"]
    if position not in _POSITIONS:
        raise InvalidArgumentError(
            f"blocked position must be one of {', '.join(_POSITIONS)}, got {shown_one(position)}"
        )
    heavy = round(fraction * n)
    start = {"start": 0, "middle": (n - heavy) // 2, "end": n - heavy}[str(position)]
    costs = np.ones(n)
    costs[start : start + heavy] = factor
    return costs


def _blocks(n: int, rng: np.random.Generator, shape: _Shape) -> FloatArray:
    """``n_blocks`` heavy blocks of equal size at seeded random, non-overlapping places."""
    blocks = shape.count("n_blocks")
    fraction = shape.real("heavy_fraction", low=0.0, high=1.0)
    factor = shape.real("heavy_factor", low=0.0, low_open=True)
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
    return costs


def _variants(n: int, rng: np.random.Generator, shape: _Shape) -> FloatArray:
    """Contiguous equal blocks of lognormal variant factors, each env jittered."""
    variants = shape.count("n_variants")
    factors = rng.lognormal(0.0, shape.real("variant_sigma", low=0.0), variants)
    block = (np.arange(n) * variants) // n
    costs: FloatArray = factors[block] * rng.lognormal(0.0, shape.real("jitter", low=0.0), n)
    return costs


def _interleaved(n: int, rng: np.random.Generator, shape: _Shape) -> FloatArray:
    """Every ``period``-th env, from env 0, heavy."""
    period = shape.count("period")
    factor = shape.real("heavy_factor", low=0.0, low_open=True)
    return np.where(np.arange(n) % period == 0, factor, 1.0)


_Costs = Callable[[int, np.random.Generator, _Shape], FloatArray]

# Each layout: its shape parameters with their defaults (a key not listed is an error),
# and its costs before scaling to the mean.
_LAYOUTS: dict[str, tuple[dict[str, float | int | str], _Costs]] = {
    "uniform": ({}, _uniform),
    "lognormal": ({"sigma": 0.5}, _lognormal),
    "blocked": ({"heavy_fraction": 0.25, "heavy_factor": 4.0, "position": "end"}, _blocked),
    "blocks": ({"n_blocks": 3, "heavy_fraction": 0.25, "heavy_factor": 4.0}, _blocks),
    "variants": ({"n_variants": 4, "variant_sigma": 0.5, "jitter": 0.05}, _variants),
    "interleaved": ({"period": 4, "heavy_factor": 4.0}, _interleaved),
}

#: The layout names :func:`env_costs` accepts.
LAYOUTS: tuple[str, ...] = tuple(_LAYOUTS)
