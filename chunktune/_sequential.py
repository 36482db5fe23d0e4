"""The gain a sequential confirmation reports: median-unbiased under the stagewise ordering.

A confirmation that stops at an early look stops because its estimate came out
high there, so the estimate at the stop overstates the gain: by a tenth to a half
for gains near what the budget can confirm (``benchmarks/RESULTS.md``, session 26).
The reported gain corrects for when the test stopped, as in group-sequential
trials (Armitage, McPherson and Rowe 1969; Jennison and Turnbull 2000, ch. 8): an
outcome is *more extreme* than the one observed if it confirmed at an earlier
look, or at the same look with a larger estimate; the reported log gain is the
``theta`` at which the observed outcome is the median of that ordering, and its
interval the ``theta`` s at which it is the ``alpha`` and ``1 - alpha`` quantile
(:func:`chunktune._confirm.judge` passes the test's whole level, so the interval of
a confirmed gain excludes 0, as the test did).

The estimate at each look is taken as normal with the standard error of the last
look's noise figure, and the looks' estimates as a random walk in information
(``1 / se**2``), as for a mean; the trimmed mean and the pooled noise make this
an approximation, close where it matters (scratch simulation, session 26). Pure
numbers.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import NamedTuple

import attrs
import numpy as np
import numpy.typing as npt

from ._stats import normal_quantile

__all__ = ["Design", "Reach", "adjusted", "at_last", "before_last", "more_extreme"]

_GRID = 161  # points per look over the continuation region
_SPAN = 8.0  # standard deviations of B_k kept either side of its mean
_ROOT_STEPS = 60
_WIDENINGS = 6  # the root's bracket: 12 standard errors, then fourfold wider, five times
_ROOT_TOL = 1e-6  # relative to the target chance, and in standard errors of the bracket

_Array = npt.NDArray[np.float64]


@attrs.frozen
class Design:
    """The looks a confirmation made, in log gain, the last one where it stopped.

    ``se[k]`` is the estimate's standard error at look ``k``; a look ``k`` before
    the last confirmed above ``upper[k]`` and rejected below ``lower[k]``
    (``-inf`` where it could not reject).
    """

    se: tuple[float, ...]
    upper: tuple[float, ...]
    lower: tuple[float, ...]

    def __attrs_post_init__(self) -> None:
        if not self.se or not len(self.upper) == len(self.lower) == len(self.se) - 1:
            raise ValueError("a design has one look or more, and a bound fewer than looks")


_SQRT_2PI = math.sqrt(2.0 * math.pi)


def _norm_pdf(x: _Array) -> _Array:
    return np.exp(-0.5 * x * x) / _SQRT_2PI


def _norm_sf(x: _Array) -> _Array:
    # numpy has no erfc; math.erfc over a list of floats skips frompyfunc's object array
    scaled = (x / math.sqrt(2.0)).tolist()
    return 0.5 * np.fromiter(map(math.erfc, scaled), np.float64, len(scaled))


def _carried(x: _Array, nodes: _Array, dens: _Array, drift: float, step: float) -> _Array:
    """The density at ``x`` of walks at ``nodes`` (``dens``: density times weight) after
    ``step`` more information, ``drift`` their mean move.

    The normal kernel in place, operation for operation as ``_norm_pdf`` of
    ``(x - nodes - drift) / sqrt(step)``: the same numbers, without the six
    temporaries of a grid squared that took most of a walk's time.
    """
    sd = math.sqrt(step)
    u = np.subtract(x[:, None], nodes[None, :])
    u -= drift
    u /= sd
    kernel = np.multiply(u, -0.5)
    kernel *= u
    np.exp(kernel, out=kernel)
    kernel /= _SQRT_2PI
    result: _Array = kernel @ dens / sd
    return result


def _grid(lo: float, hi: float) -> tuple[_Array, _Array]:
    """Trapezoid nodes and weights on ``[lo, hi]``."""
    x = np.linspace(lo, hi, _GRID)
    w = np.full(_GRID, (hi - lo) / (_GRID - 1))
    w[0] = w[-1] = w[0] / 2
    return x, w


class Reach(NamedTuple):
    """A walk's state at the look before a design's last: what :func:`at_last` adds to.

    ``total`` is the chance of a crossing at the looks before the last; ``nodes`` and
    ``dens`` the continuation region's grid there and the density (times weight) of the
    walks not yet stopped (None: no look before the last); ``info`` that look's
    information; ``stopped``: (nearly) every walk stopped before the last look.
    """

    total: float
    nodes: _Array | None
    dens: _Array | None
    info: float
    stopped: bool


def before_last(theta: float, design: Design) -> Reach:
    """The walk at true log gain ``theta`` up to the look before the design's last.

    It does not depend on where the last look's cut is, so a search over that cut
    (:mod:`chunktune._spending`) takes it once.
    """
    # B_k = estimate_k * I_k: a random walk with drift theta in information I_k
    total = 0.0
    nodes: _Array | None = None  # the continuation region's nodes at the previous look
    dens: _Array | None = None  # the density (times weight) of B there, not yet stopped
    prev_info = 0.0
    for k, s in enumerate(design.se[:-1]):
        i_k = 1.0 / s**2
        step = i_k - prev_info
        cut = design.upper[k] * i_k
        if nodes is None or dens is None:
            total += 0.5 * math.erfc((cut - theta * i_k) / math.sqrt(2.0 * i_k))
        elif step <= 0:  # a look with no new pairs: the walk stands where it was
            continue
        else:
            z = (cut - nodes - theta * step) / math.sqrt(step)
            total += float(np.dot(dens, _norm_sf(z)))
        lo = max(design.lower[k] * i_k, theta * i_k - _SPAN * math.sqrt(i_k))
        hi = min(design.upper[k] * i_k, theta * i_k + _SPAN * math.sqrt(i_k))
        if hi <= lo:  # (nearly) every path has stopped by now
            return Reach(total, nodes, dens, prev_info, stopped=True)
        x, w = _grid(lo, hi)
        if nodes is None or dens is None:
            f = _norm_pdf((x - theta * i_k) / math.sqrt(i_k)) / math.sqrt(i_k)
        else:
            f = _carried(x, nodes, dens, theta * step, step)
        nodes, dens = x, f * w
        prev_info = i_k
    return Reach(total, nodes, dens, prev_info, stopped=False)


def at_last(theta: float, design: Design, reach: Reach, observed: float) -> float:
    """:func:`more_extreme` from the walk's ``reach`` (:func:`before_last` at ``theta``)."""
    if reach.stopped:
        return reach.total
    i_k = 1.0 / design.se[-1] ** 2
    step = i_k - reach.info
    cut = observed * i_k
    total = reach.total
    if reach.nodes is None or reach.dens is None:
        total += 0.5 * math.erfc((cut - theta * i_k) / math.sqrt(2.0 * i_k))
    elif step <= 0:  # a last look with no new pairs: the walk stands where it was
        total += float(reach.dens[reach.nodes > cut].sum())
    else:
        z = (cut - reach.nodes - theta * step) / math.sqrt(step)
        total += float(np.dot(reach.dens, _norm_sf(z)))
    return min(1.0, max(0.0, total))


def more_extreme(theta: float, design: Design, observed: float) -> float:
    """The chance, at true log gain ``theta``, of an outcome more extreme than ``observed``.

    ``observed`` is the estimate at the design's last look; more extreme: confirmed at
    an earlier look, or reached the last look and estimated above ``observed`` there.
    It rises with ``theta``.
    """
    return at_last(theta, design, before_last(theta, design), observed)


def _chances(design: Design, observed: float) -> Callable[[float], float]:
    """:func:`more_extreme` of ``design`` and ``observed``, each ``theta`` walked once.

    :func:`adjusted` solves for three targets from the same brackets, so their
    ends are walked once for all three (a fifth of the walks of a 5-look design).
    """
    known: dict[float, float] = {}

    def chance(theta: float) -> float:
        if theta not in known:
            known[theta] = more_extreme(theta, design, observed)
        return known[theta]

    return chance


def _solve(
    design: Design,
    observed: float,
    target: float,
    chance: Callable[[float], float] | None = None,
) -> float:
    """The ``theta`` at which :func:`more_extreme` is ``target`` (Illinois false position).

    The bracket starts 12 standard errors of the last look either side of ``observed``
    and widens (fourfold, up to five times) until it holds the root: a strict target,
    or a first look much noisier than the last, can put it farther out. ``chance``:
    :func:`more_extreme` of ``design`` and ``observed`` (:func:`_chances`; None: a new one).
    """
    if chance is None:
        chance = _chances(design, observed)
    width = 12.0 * design.se[-1]
    for _ in range(_WIDENINGS):
        lo, hi = observed - width, observed + width
        f_lo = chance(lo) - target
        f_hi = chance(hi) - target
        if f_lo < 0 < f_hi:
            break
        width *= 4.0
    else:  # past any bracket (a target at the very edge): its end is the answer
        return lo if f_lo >= 0 else hi
    # relative to the target: a strict alpha's tail holds chances far under _ROOT_TOL
    tol = _ROOT_TOL * min(target, 1.0 - target)
    side = 0
    for _ in range(_ROOT_STEPS):
        mid = (lo * f_hi - hi * f_lo) / (f_hi - f_lo)
        f_mid = chance(mid) - target
        if abs(f_mid) < tol or hi - lo < _ROOT_TOL * design.se[-1]:
            return mid
        if f_mid < 0:
            lo, f_lo = mid, f_mid
            if side == -1:
                f_hi /= 2
            side = -1
        else:
            hi, f_hi = mid, f_mid
            if side == 1:
                f_lo /= 2
            side = 1
    return (lo * f_hi - hi * f_lo) / (f_hi - f_lo)


def adjusted(design: Design, observed: float, alpha: float) -> tuple[float, tuple[float, float]]:
    """The median-unbiased log gain and its ``(alpha, 1 - alpha)`` interval, in log gain.

    With one look this is the estimate itself and ``observed -+ z * se``.
    """
    if len(design.se) == 1:
        z = normal_quantile(1.0 - alpha)
        se = design.se[0]
        return observed, (observed - z * se, observed + z * se)
    chance = _chances(design, observed)
    center = _solve(design, observed, 0.5, chance)
    return center, (
        _solve(design, observed, alpha, chance),
        _solve(design, observed, 1.0 - alpha, chance),
    )
