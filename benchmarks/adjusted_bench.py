"""The confirmation's reported gain (``_sequential.adjusted``): its CPU time, old code and new.

    python benchmarks/adjusted_bench.py                 every design, 5 repetitions
    python benchmarks/adjusted_bench.py --reps 9 --no-traces

``adjusted`` runs once at the end of every confirmed confirmation, on the sweep's
thread and inside its wall-clock budget. The designs it is timed on are the ones real
confirmations hand it, captured by a wrapper: the quick simulated suite (balanced and
thorough, 3 seeds) and two replays of each recorded trace under balanced, all seeded;
confirmations judged at a strict (0.001) and a loose (0.2) ``confirm_alpha`` on seeded
pairs; and the edges: a look with no new pairs (in the middle, and as the last), walks
that all stopped before the last look. The code before session 72 is kept below,
marked as the reference; each design is timed old and new in turn, ``--reps`` times,
by the calling thread's CPU time (what the sweep's thread spends; the wall clock on a
shared machine measures the neighbours), and the table shows medians. The old code's
time depends on the allocator's state (it made six temporaries of 161 x 161 per look):
cheap in a heap full of holes, page faults in a fresh one. So the designs are timed
twice: in this process, after the sweeps that captured them, and in a fresh process.
The check compares every output: the largest absolute difference, in log gain, of the
centre and of both ends, and how many designs came out bit-identical. Not a test.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import math
import pickle
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import attrs
import numpy as np
import numpy.typing as npt

sys.path.insert(0, str(Path(__file__).resolve().parent))

from cases import SIM_CASES, at_least_one, trace_files
from measure import bench_settings, own_sweep_lock, policies_named, sim_rows, trace_rows

from chunktune import _confirm
from chunktune._confirm import FUTILITY_Z, judge, look_points, plan_bounds
from chunktune._sequential import Design, adjusted
from chunktune._stats import normal_quantile

_Array = npt.NDArray[np.float64]
Case = tuple[str, Design, float, float]  # (where it came from, design, observed, alpha)
Adjusted = tuple[float, tuple[float, float]]


# ------------------------------------------------------------ the reference (before 72)
# chunktune/_sequential.py as of e2d19ae, the functions adjusted() runs, unchanged but
# for their names; the new code must give the same numbers.

_REF_GRID = 161
_REF_SPAN = 8.0
_REF_ROOT_STEPS = 60
_REF_WIDENINGS = 6
_REF_ROOT_TOL = 1e-6


def _ref_norm_pdf(x: _Array) -> _Array:
    return np.exp(-0.5 * x * x) / math.sqrt(2.0 * math.pi)


_ref_erfc = np.frompyfunc(math.erfc, 1, 1)


def _ref_norm_sf(x: _Array) -> _Array:
    return 0.5 * np.asarray(_ref_erfc(x / math.sqrt(2.0)), dtype=np.float64)


def _ref_grid(lo: float, hi: float) -> tuple[_Array, _Array]:
    x = np.linspace(lo, hi, _REF_GRID)
    w = np.full(_REF_GRID, (hi - lo) / (_REF_GRID - 1))
    w[0] = w[-1] = w[0] / 2
    return x, w


def _ref_more_extreme(theta: float, design: Design, observed: float) -> float:
    # before_last
    total = 0.0
    nodes: _Array | None = None
    dens: _Array | None = None
    prev_info = 0.0
    stopped = False
    for k, s in enumerate(design.se[:-1]):
        i_k = 1.0 / s**2
        step = i_k - prev_info
        cut = design.upper[k] * i_k
        if nodes is None or dens is None:
            total += 0.5 * math.erfc((cut - theta * i_k) / math.sqrt(2.0 * i_k))
        elif step <= 0:
            continue
        else:
            z = (cut - nodes - theta * step) / math.sqrt(step)
            total += float(np.dot(dens, _ref_norm_sf(z)))
        lo = max(design.lower[k] * i_k, theta * i_k - _REF_SPAN * math.sqrt(i_k))
        hi = min(design.upper[k] * i_k, theta * i_k + _REF_SPAN * math.sqrt(i_k))
        if hi <= lo:
            stopped = True
            break
        x, w = _ref_grid(lo, hi)
        if nodes is None or dens is None:
            f = _ref_norm_pdf((x - theta * i_k) / math.sqrt(i_k)) / math.sqrt(i_k)
        else:
            kernel = _ref_norm_pdf((x[:, None] - nodes[None, :] - theta * step) / math.sqrt(step))
            f = kernel @ dens / math.sqrt(step)
        nodes, dens = x, f * w
        prev_info = i_k
    # at_last
    if stopped:
        return total
    i_k = 1.0 / design.se[-1] ** 2
    step = i_k - prev_info
    cut = observed * i_k
    if nodes is None or dens is None:
        total += 0.5 * math.erfc((cut - theta * i_k) / math.sqrt(2.0 * i_k))
    elif step <= 0:
        total += float(dens[nodes > cut].sum())
    else:
        z = (cut - nodes - theta * step) / math.sqrt(step)
        total += float(np.dot(dens, _ref_norm_sf(z)))
    return min(1.0, max(0.0, total))


def _ref_solve(design: Design, observed: float, target: float) -> float:
    width = 12.0 * design.se[-1]
    for _ in range(_REF_WIDENINGS):
        lo, hi = observed - width, observed + width
        f_lo = _ref_more_extreme(lo, design, observed) - target
        f_hi = _ref_more_extreme(hi, design, observed) - target
        if f_lo < 0 < f_hi:
            break
        width *= 4.0
    else:
        return lo if f_lo >= 0 else hi
    tol = _REF_ROOT_TOL * min(target, 1.0 - target)
    side = 0
    for _ in range(_REF_ROOT_STEPS):
        mid = (lo * f_hi - hi * f_lo) / (f_hi - f_lo)
        f_mid = _ref_more_extreme(mid, design, observed) - target
        if abs(f_mid) < tol or hi - lo < _REF_ROOT_TOL * design.se[-1]:
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


def reference_adjusted(design: Design, observed: float, alpha: float) -> Adjusted:
    """``adjusted`` as it was before session 72 (the reference the new code is held to)."""
    if len(design.se) == 1:
        z = normal_quantile(1.0 - alpha)
        se = design.se[0]
        return observed, (observed - z * se, observed + z * se)
    center = _ref_solve(design, observed, 0.5)
    return center, (_ref_solve(design, observed, alpha), _ref_solve(design, observed, 1.0 - alpha))


# -------------------------------------------------------------------- the designs


@contextlib.contextmanager
def _captured(where: str, into: list[Case]) -> Iterator[None]:
    """Record every ``(design, observed, alpha)`` a confirmation hands ``adjusted``."""
    names = vars(_confirm)  # judge() calls the adjusted it imported

    def wrapper(design: Design, observed: float, alpha: float) -> Adjusted:
        into.append((where, design, observed, alpha))
        return adjusted(design, observed, alpha)

    names["adjusted"] = wrapper
    try:
        yield
    finally:
        names["adjusted"] = adjusted


def from_sweeps(*, traces: bool) -> list[Case]:
    """The designs of the quick simulated suite's confirmations, and of replayed traces."""
    own_sweep_lock()
    settings = bench_settings()
    cases: list[Case] = []
    policies = policies_named(settings, ["balanced", "thorough"])
    with _captured("simulated", cases), contextlib.redirect_stdout(io.StringIO()):
        for i, case in enumerate(SIM_CASES):
            if case.quick:
                sim_rows(case, i, policies, 3, settings)
    if traces:
        balanced = policies_named(settings, ["balanced"])
        with _captured("traces", cases), contextlib.redirect_stdout(io.StringIO()):
            for path in trace_files():
                trace_rows(path, balanced, 2, settings)
    return cases


def judged(alpha: float, *, seed: int = 0) -> list[Case]:
    """Confirmations at ``alpha`` on seeded normal pairs, judged at their looks as a sweep
    judges them (4 to 64 pairs, margin 1%), for a few gains and noise levels."""
    rng = np.random.default_rng(seed)
    bounds = plan_bounds(alpha, 4, 64)
    cases: list[Case] = []
    with _captured(f"alpha {alpha:g}", cases):
        for sigma in (0.01, 0.03, 0.08):
            for gain in (0.01, 0.02, 0.04):
                for _ in range(3):
                    d = list(rng.normal(gain, sigma, 64))
                    for n in look_points(4, 64):
                        v = judge(
                            d[:n],
                            prior_sigma=sigma,
                            prior_dof=10,
                            margin=0.01,
                            bounds=bounds,
                            z_futility=FUTILITY_Z,
                            min_pairs=4,
                            max_pairs=64,
                        )
                        if v.outcome is not None:
                            break
    return cases


def edges() -> list[Case]:
    """Designs the confirmation itself never makes but ``adjusted`` must take."""
    inf = math.inf
    return [
        ("edge: one look", Design(se=(0.02,), upper=(), lower=()), 0.05, 0.05),
        ("edge: last look, no new pairs", Design((0.03, 0.03), (0.09,), (-inf,)), 0.05, 0.05),
        (
            "edge: middle look, no new pairs",
            Design((0.04, 0.028, 0.028, 0.02), (0.12, 0.085, 0.085), (-inf, -0.036, -0.036)),
            0.06,
            0.05,
        ),
        (
            "edge: stopped before the last",
            Design((0.04, 0.028, 0.02), (0.12, 0.05), (-inf, 0.06)),
            0.06,
            0.05,
        ),
        (
            "edge: first look far noisier",
            Design((0.2, 0.01), (0.1,), (-1e9,)),
            0.03,
            0.025,
        ),
    ]


def designs(*, traces: bool) -> list[Case]:
    """Every design timed, each once, in a fixed order."""
    every = [*from_sweeps(traces=traces), *judged(0.001), *judged(0.2, seed=1), *edges()]
    seen: set[tuple[Design, float, float]] = set()
    unique: list[Case] = []
    for where, design, observed, alpha in every:
        if (design, observed, alpha) not in seen:
            seen.add((design, observed, alpha))
            unique.append((where, design, observed, alpha))
    return unique


# ------------------------------------------------------------------ timing, check


@attrs.frozen
class Timed:
    """One design's median CPU seconds, old and new, and both outputs."""

    where: str
    looks: int
    alpha: float
    old_s: float
    new_s: float
    old: Adjusted
    new: Adjusted


def _cpu(fn: Callable[[], Adjusted]) -> tuple[float, Adjusted]:
    start = time.thread_time()
    out = fn()
    return time.thread_time() - start, out


def timed(case: Case, reps: int) -> Timed:
    """Old and new on ``case``, alternating which goes first, ``reps`` times each."""
    where, design, observed, alpha = case
    old_s: list[float] = []
    new_s: list[float] = []
    old = new = None
    for r in range(reps):
        order = (0, 1) if r % 2 == 0 else (1, 0)
        for which in order:
            if which == 0:
                t, old = _cpu(lambda: reference_adjusted(design, observed, alpha))
                old_s.append(t)
            else:
                t, new = _cpu(lambda: adjusted(design, observed, alpha))
                new_s.append(t)
    assert old is not None and new is not None
    return Timed(
        where.split(":")[0],
        len(design.se),
        alpha,
        statistics.median(old_s),
        statistics.median(new_s),
        old,
        new,
    )


def _group_table(rows: Sequence[Timed]) -> str:
    lines = [f"{'designs from':<18} {'looks':>5} {'n':>4} {'old ms':>9} {'new ms':>9} {'ratio':>6}"]
    groups: dict[tuple[str, int], list[Timed]] = {}
    for r in rows:
        groups.setdefault((r.where, r.looks), []).append(r)
    for (where, looks), rs in sorted(groups.items()):
        old = statistics.median(r.old_s for r in rs)
        new = statistics.median(r.new_s for r in rs)
        lines.append(
            f"{where:<18} {looks:>5} {len(rs):>4} {old * 1e3:>9.2f} {new * 1e3:>9.2f} "
            f"{old / new if new > 0 else math.nan:>5.2f}x"
        )
    old_all = sum(r.old_s for r in rows)
    new_all = sum(r.new_s for r in rows)
    lines.append(
        f"{'all (sum)':<18} {'':>5} {len(rows):>4} {old_all * 1e3:>9.1f} {new_all * 1e3:>9.1f} "
        f"{old_all / new_all:>5.2f}x"
    )
    return "\n".join(lines)


def _check_table(rows: Sequence[Timed]) -> str:
    def diff(pick: Callable[[Adjusted], float]) -> float:
        return max(abs(pick(r.old) - pick(r.new)) for r in rows)

    same = sum(r.old == r.new for r in rows)
    return "\n".join(
        [
            f"bit-identical outputs: {same} of {len(rows)} designs",
            f"max |difference| in log gain: centre {diff(lambda a: a[0]):.3g}, "
            f"low end {diff(lambda a: a[1][0]):.3g}, high end {diff(lambda a: a[1][1]):.3g}",
        ]
    )


def report(cases: Sequence[Case], reps: int, where: str) -> None:
    """Time and check every case; print the tables."""
    rows = [timed(c, reps) for c in cases]
    print(f"{where}: median CPU time (its thread) per adjusted() call, {reps} reps each:\n")
    print(_group_table(rows) + "\n")
    print(_check_table(rows) + "\n")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--reps", type=at_least_one, default=5, help="timings per design and code")
    parser.add_argument("--no-traces", action="store_true", help="skip the replayed traces")
    parser.add_argument("--cases-from", type=Path, help=argparse.SUPPRESS)  # the fresh process
    args = parser.parse_args(argv)
    if args.cases_from:
        report(pickle.loads(args.cases_from.read_bytes()), args.reps, "in a fresh process")
        return 0
    t0 = time.perf_counter()
    cases = designs(traces=not args.no_traces)
    print(f"{len(cases)} designs captured in {time.perf_counter() - t0:.1f} s\n")
    report(cases, args.reps, "in this process, after the sweeps")
    sys.stdout.flush()
    with tempfile.TemporaryDirectory() as tmp:
        saved = Path(tmp) / "cases.pickle"
        saved.write_bytes(pickle.dumps(cases))
        fresh = [sys.executable, __file__, "--reps", str(args.reps), "--cases-from", str(saved)]
        return subprocess.run(fresh, check=False).returncode


if __name__ == "__main__":
    raise SystemExit(main())
