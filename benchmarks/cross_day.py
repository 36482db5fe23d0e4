"""Can one recording tell which sizes' gains will not hold on other days?

    python benchmarks/cross_day.py [--traces benchmarks/traces ...] [--window 16]
                                   [--min-gain 0.02] [--nthread 2] [--seed 0]

The traces of one batch (files of the same name) recorded on different days and loads,
under each ``--traces`` folder (each folder judged on its own, then all together), are
the data. An event is a size whose mean log gain over native in one recording (or in its
first ``--window`` rounds: what a sweep sees) is at least ``--min-gain``; it fails to
hold when the median of its gains over the batch's other recordings is below 0. For each
figure that recording itself shows, the table gives its AUC for "fails to hold" (0.5:
no information; under 0.5: a high value means the gain holds), a 95% interval from
resampling batches, and a permutation p (holds and fails shuffled within each batch):

- ``chunks_per_thread``: ceil(N/c)/T; ``uneven_last_wave``: 1 when ceil(N/c) is not a
  multiple of T;
- ``rel_spread``: the sd of the size's per-round log ratio over the recording's median
  such sd (its pair noise against the recording's typical size's);
- ``skew``: (mean - median) of the log ratios over their sd; ``lag1``: their lag-1
  autocorrelation in round order; ``var_ratio4``: the variance of 4-round means over
  what independent rounds give;
- ``gain``; ``neg_t``: minus the gain over its standard error from 4-round block means
  (weak evidence scores high), ``t95`` the two-sided 95% quantile of Student's t at its
  degrees of freedom (not a figure scored); ``rounds_losing``: the share of rounds the size lost.

Then the share of events that fail by chunks a thread, among all events and among those
of strong evidence (t past Student's 95% quantile at the figure's degrees of freedom:
2.57 for the 6 blocks of a 24-round recording, not the normal's 2). Session 66 (helper
crossday66) found that no figure of the rounds' dynamics (spread, skew, lag, variance
ratio) tells, in either folder; only the structure (few chunks a thread) and the
evidence's strength do. Not a test: it prints
figures.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

import attrs
import numpy as np
import numpy.typing as npt
from cases import TRACE_DIR, at_least_one, trace_files, traces_folder

from chunktune import ChunktuneError
from chunktune._spans import t95
from chunktune._trace import Trace, load_trace

__all__ = ["Event", "auc", "block_dof", "events", "features", "main"]

Array = npt.NDArray[np.float64]
BLOCK = 4
FIGURES = (
    "chunks_per_thread",
    "uneven_last_wave",
    "rel_spread",
    "skew",
    "lag1",
    "var_ratio4",
    "gain",
    "neg_t",
    "rounds_losing",
)
STRATA = ((0.0, 3.0), (3.0, 6.0), (6.0, 12.0), (12.0, math.inf))


@attrs.frozen
class Event:
    """One size that looked like a win in one recording, and whether it held elsewhere."""

    batch: str
    recording: str
    chunk: int
    fails: bool
    figures: dict[str, float]


def log_ratios(trace: Trace, chunk: int, window: int | None = None) -> Array:
    """Per-round log(seconds of ``chunk`` / seconds of native), in round order."""
    x: Array = np.log(np.asarray(trace.samples[chunk]) / np.asarray(trace.samples[trace.native]))
    return x[:window] if window else x


def block_dof(x: Array) -> int:
    """The degrees of freedom of :func:`block_se`: its blocks (or rounds, under 3) less one."""
    blocks = len(x) // BLOCK
    return (blocks if blocks >= 3 else len(x)) - 1


def block_se(x: Array) -> float:
    """The standard error of the mean from 4-round block means (naive under 3 blocks)."""
    blocks = len(x) // BLOCK
    if blocks < 3:
        return float(x.std(ddof=1) / math.sqrt(len(x)))
    means = x[: blocks * BLOCK].reshape(blocks, BLOCK).mean(axis=1)
    return float(means.std(ddof=1) / math.sqrt(blocks))


def features(trace: Trace, chunk: int, noise: float, window: int | None = None) -> dict[str, float]:
    """The figures one recording (its first ``window`` rounds) shows of ``chunk``."""
    x = log_ratios(trace, chunk, window)
    m = -(-trace.num_envs // chunk)
    sd = float(x.std(ddof=1))
    centred = x - x.mean()
    energy = float((centred * centred).sum())
    blocks = len(x) // BLOCK
    var_ratio = math.nan
    if blocks >= 2 and sd > 0:
        means = x[: blocks * BLOCK].reshape(blocks, BLOCK).mean(axis=1)
        var_ratio = float(means.var(ddof=1) / (sd * sd / BLOCK))
    se = block_se(x)
    return {
        "chunks_per_thread": m / trace.nthread,
        "uneven_last_wave": float(m % trace.nthread != 0),
        "rel_spread": sd / noise if noise > 0 else math.nan,
        "skew": float((x.mean() - np.median(x)) / sd) if sd > 0 else 0.0,
        "lag1": float((centred[:-1] * centred[1:]).sum() / energy) if energy > 0 else 0.0,
        "var_ratio4": var_ratio,
        "gain": -float(x.mean()),
        "neg_t": float(x.mean()) / se if se > 0 else -math.inf,
        "t95": t95(block_dof(x)),
        "rounds_losing": float(np.mean(x > 0)),
    }


def batches(folders: Sequence[Path], nthread: int) -> dict[str, list[tuple[str, Trace]]]:
    """Each batch's recordings (traces of one file name with ``nthread`` threads), by name."""
    out: dict[str, list[tuple[str, Trace]]] = defaultdict(list)
    for folder in folders:
        for path in trace_files(folder):
            trace = load_trace(path)
            if trace.nthread == nthread:
                out[path.stem].append((str(path), trace))
    return out


def events(
    recordings: dict[str, list[tuple[str, Trace]]], min_gain: float, window: int | None
) -> list[Event]:
    """Every size whose gain in one recording is ``min_gain`` or more, of batches with 3+
    recordings, over the sizes every recording of its batch holds."""
    out = []
    for batch, recs in sorted(recordings.items()):
        if len(recs) < 3:
            continue
        native = recs[0][1].native
        common = sorted(set.intersection(*(set(t.samples) for _, t in recs)) - {native})
        if not common:  # no size every recording holds: nothing to judge across days
            continue
        whole = {c: np.array([-log_ratios(t, c).mean() for _, t in recs]) for c in common}
        for i, (name, trace) in enumerate(recs):
            noise = float(np.median([log_ratios(trace, c, window).std(ddof=1) for c in common]))
            for c in common:
                figures = features(trace, c, noise, window)
                if figures["gain"] < min_gain:
                    continue
                others = np.delete(whole[c], i)
                fails = bool(np.median(others) < 0.0)
                out.append(Event(batch, name, c, fails, figures))
    return out


def _ranks(a: Array) -> Array:
    order = a.argsort(kind="stable")
    ranks = np.empty(len(a))
    ranks[order] = np.arange(1, len(a) + 1)
    for value in np.unique(a):
        tied = a == value
        if tied.sum() > 1:
            ranks[tied] = ranks[tied].mean()
    return ranks


def auc(score: Array, bad: npt.NDArray[np.bool_]) -> float:
    """P(a failing event scores above a holding one), ties counted half; NaN scores left out."""
    keep = ~np.isnan(score)
    score, bad = score[keep], bad[keep]
    pos, neg = int(bad.sum()), int((~bad).sum())
    if pos == 0 or neg == 0:
        return math.nan
    ranks = _ranks(score)
    return float((ranks[bad].sum() - pos * (pos + 1) / 2) / (pos * neg))


def _table(label: str, evs: list[Event], rng: np.random.Generator) -> None:
    if not evs:
        print(f"\n{label}: no events")
        return
    groups = np.array([e.batch for e in evs])
    bad = np.array([e.fails for e in evs])
    names = np.unique(groups)
    print(
        f"\n{label}: {len(evs)} events over {len(names)} batches, {int(bad.sum())} fail to hold "
        f"({bad.mean():.0%})"
    )
    print(f"{'figure':18s} {'AUC':>5s} {'95% CI (batches)':>17s} {'perm p':>7s}")
    members = [np.where(groups == g)[0] for g in names]
    for name in FIGURES:
        score = np.array([e.figures[name] for e in evs])
        a = auc(score, bad)
        if math.isnan(a):  # no failure or no hold among the scored: nothing to tell apart
            print(f"{name:18s} {a:5.2f}   [{a:5.2f}, {a:5.2f}] {a:7.3f}")
            continue
        boot = [
            auc(score[idx], bad[idx])
            for idx in (
                np.concatenate([members[j] for j in rng.integers(0, len(names), len(names))])
                for _ in range(400)
            )
        ]
        low, high = math.nan, math.nan
        if np.any(np.isfinite(boot)):
            low, high = np.nanpercentile(boot, [2.5, 97.5])
        shuffled = bad.copy()
        extreme = 0
        for _ in range(400):
            for idx in members:
                shuffled[idx] = rng.permutation(bad[idx])
            extreme += abs(auc(score, shuffled) - 0.5) >= abs(a - 0.5)
        print(f"{name:18s} {a:5.2f}   [{low:5.2f}, {high:5.2f}] {(1 + extreme) / 401:7.3f}")
    per = np.array([e.figures["chunks_per_thread"] for e in evs])
    strong = np.array([e.figures["neg_t"] <= -e.figures["t95"] for e in evs])
    for which, mask in (("all", np.ones(len(evs), bool)), ("t>=t95", strong)):
        cells = []
        for low_k, high_k in STRATA:
            cell = mask & (per > low_k) & (per <= high_k)
            if cell.any():
                cells.append(f"({low_k:g},{high_k:g}] {bad[cell].mean():.0%} of {int(cell.sum())}")
        print(f"fail to hold, {which:6s} by chunks a thread: " + ", ".join(cells))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--traces",
        type=traces_folder,
        nargs="+",
        default=[TRACE_DIR, TRACE_DIR.parent / "traces-later"],
    )
    parser.add_argument(
        "--window",
        type=at_least_one,
        default=None,
        help="judge each recording on its first WINDOW rounds only",
    )
    parser.add_argument("--min-gain", type=float, default=0.02)
    parser.add_argument("--nthread", type=at_least_one, default=2)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if not 0.0 <= args.min_gain < 1.0:
        parser.error(f"--min-gain {args.min_gain}: expected a fraction in [0, 1)")
    rng = np.random.default_rng(args.seed)
    seen = f"first {args.window} rounds" if args.window else "whole recordings"
    folders: list[list[Path]] = [[f] for f in args.traces]
    if len(args.traces) > 1:
        folders.append(list(args.traces))
    try:  # every folder before any table: a damaged file is refused, not met halfway
        loaded = [(" + ".join(f.name for f in g), batches(g, args.nthread)) for g in folders]
    except ChunktuneError as exc:  # a TraceError: a damaged or foreign .json
        print(f"cross_day.py: error: {exc}", file=sys.stderr)
        return 2
    for label, recordings in loaded:
        evs = events(recordings, args.min_gain, args.window)
        _table(f"{label} ({seen}, gain >= {args.min_gain:.0%})", evs, rng)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
