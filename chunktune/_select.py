"""The choice: which chunk a table of estimates argues for. Pure functions over numbers.

The rule is the older tuner's, made explicit: leave the native chunk only when
the best candidate is at least ``margin`` faster (and, with ``confidence_z > 0``,
faster by more than the noise); then, among the candidates within ``tie_tol`` of
the best, pick one by the tie-break.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import attrs

__all__ = ["Choice", "pick", "select"]


@attrs.frozen
class Choice:
    """A chosen chunk (``None`` = native) and the sentence that explains it."""

    chunk_size: int | None
    best: int | None
    band: tuple[int, ...]
    reason: str


def _ms(seconds: float) -> str:
    """Milliseconds with about four significant digits: 107.6 ms, 98.50 ms, 1.300 ms."""
    ms = seconds * 1e3
    digits = 4 if ms <= 0 else min(4, max(1, 3 - math.floor(math.log10(ms))))
    return f"{ms:.{digits}f} ms"


def pick(
    band: list[int], tie_break: str, *, native: int, upper: int, best: int | None = None
) -> int:
    """One size of the ascending ``band`` of ties, by the named tie-break.

    ``evidence`` takes ``best`` (the measured best), or the band's first size.
    """
    if tie_break == "evidence":
        return band[0] if best is None or best not in band else best
    if tie_break == "toward_upper":
        return min(band, key=lambda c: (abs(c - upper), c))
    if tie_break == "toward_native":
        # rounded as center's is: sizes equally far from native in log scale (8 and 18
        # around 12) differ in the last bits, and the smaller must win that tie
        return min(band, key=lambda c: (round(abs(math.log(c) - math.log(native)), 9), c))
    if tie_break == "smallest":
        return band[0]
    # center: the middle of the fast plateau in log scale (chunk sizes scale by ratios),
    # rounding toward small chunks, away from the cliff where too few chunks idle workers
    middle = (math.log(band[0]) + math.log(band[-1])) / 2
    return min(band, key=lambda c: (round(abs(math.log(c) - middle), 9), c))


def select(
    estimates: Mapping[int | None, float],
    *,
    native: int,
    upper: int,
    margin: float,
    tie_tol: float,
    tie_break: str = "center",
    errors: Mapping[int | None, float] | None = None,
    confidence_z: float = 0.0,
    tie_z: float = 0.0,
) -> Choice:
    """Choose a chunk from per-candidate estimates (seconds; ``None`` = native).

    ``errors`` are standard errors in log-seconds; with ``confidence_z > 0`` the
    best candidate must beat native by more than ``confidence_z`` of them, and
    with ``tie_z > 0`` a candidate within ``tie_tol`` plus ``tie_z`` of them of the
    best is a tie (the noise cannot tell it from the best).
    """
    native_t = estimates.get(None)
    cand = {k: v for k, v in estimates.items() if k is not None}
    if not cand:
        return Choice(None, None, (), "only the native chunk was measured; kept it")
    best = min(sorted(cand), key=lambda c: cand[c])
    if native_t is not None:
        kept = _kept_native(
            best,
            cand[best],
            native_t,
            native=native,
            margin=margin,
            errors=errors,
            confidence_z=confidence_z,
        )
        if kept is not None:
            return kept
    band = _tie_band(
        cand, best, native_t, margin=margin, tie_tol=tie_tol, errors=errors, tie_z=tie_z
    )
    chosen = pick(band, tie_break, native=native, upper=upper, best=best)
    lead = _lead(chosen, cand[chosen], native_t, native=native)
    within = f"{tie_tol:.1%}" + (" or the noise" if tie_z > 0 and errors is not None else "")
    return Choice(chosen, best, tuple(band), f"{lead}; {_tail(band, tie_break, within)}")


def _kept_native(
    best: int,
    best_t: float,
    native_t: float,
    *,
    native: int,
    margin: float,
    errors: Mapping[int | None, float] | None,
    confidence_z: float,
) -> Choice | None:
    """Native kept, and why, when the best is under the margin or within the noise; else None."""
    gain = 1.0 - best_t / native_t
    # at margin 0 a size only as fast as native is no gain: native stays among true ties
    if best_t > native_t * (1.0 - margin) or best_t >= native_t:
        # a slower best is no gain at all: "under the margin" would suggest a small one
        verdict = f"{gain:.1%} faster" if gain >= 0 else f"{-gain:.1%} slower"
        short = f", under the {margin:.1%} margin" if gain >= 0 else ""
        return Choice(
            None,
            best,
            (),
            f"kept the native chunk {native}: the best candidate, {best} at "
            f"{_ms(best_t)}, was {verdict} than native ({_ms(native_t)}){short}",
        )
    if confidence_z > 0 and errors is not None:
        spread = math.hypot(errors.get(None, math.inf), errors.get(best, math.inf))
        if math.log(native_t / best_t) <= confidence_z * spread:
            return Choice(
                None,
                best,
                (),
                f"kept the native chunk {native}: the best candidate, {best}, looked "
                f"{gain:.1%} faster but the measurements are too noisy to be sure "
                f"(±{confidence_z * spread:.1%})",
            )
    return None


def _tie_band(
    cand: Mapping[int, float],
    best: int,
    native_t: float | None,
    *,
    margin: float,
    tie_tol: float,
    errors: Mapping[int | None, float] | None,
    tie_z: float,
) -> list[int]:
    """The ascending candidates within ``tie_tol`` (plus ``tie_z`` of the noise) of the best."""
    best_t = cand[best]

    def slack(c: int) -> float:
        if tie_z <= 0 or errors is None:
            return 0.0
        return tie_z * math.hypot(errors.get(c, math.inf), errors.get(best, math.inf))

    # a tie of the best joins the band only if it, too, clears the margin over native
    ceiling = math.inf if native_t is None else native_t * (1.0 - margin)
    return sorted(
        c
        for c, t in cand.items()
        if math.log(t / best_t) <= math.log1p(tie_tol) + slack(c)
        and t <= ceiling
        and (native_t is None or t < native_t)
    )


def _lead(chosen: int, chosen_t: float, native_t: float | None, *, native: int) -> str:
    """The reason's first clause: the chosen size and its time, against native's."""
    if native_t is None:
        return f"chose {chosen} at {_ms(chosen_t)} (native was not measured)"
    return (
        f"chose {chosen}: {1.0 - chosen_t / native_t:.1%} faster than the native chunk "
        f"{native} ({_ms(chosen_t)} vs {_ms(native_t)})"
    )


def _tail(band: list[int], tie_break: str, within: str) -> str:
    """The reason's second clause: the ties the chosen size had, and how it was picked."""
    if len(band) == 1:
        return f"no other candidate came within {within} of it"
    if tie_break == "center":
        return (
            f"{len(band)} candidates ({', '.join(map(str, band))}) were within {within} "
            "of the best; took the middle of that plateau, away from the large-chunk cliff"
        )
    return (
        f"{len(band)} candidates ({', '.join(map(str, band))}) were within {within} "
        f"of the best; tie-break {tie_break.replace('_', ' ')}"
    )
