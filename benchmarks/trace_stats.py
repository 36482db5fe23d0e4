"""What the recorded traces say about the machine and about the gain on offer.

    python benchmarks/trace_stats.py [traces/*.json]

Per trace: how far the machine's level moved between rounds, how much one call
differs from the next once that level is taken out (robust sigma of the residuals),
whether neighbouring calls share their noise (lag-1 correlation of the residuals in
the order the calls ran), and the gain of the best size over native by the trace's
truth: as it appears, and held out (best picked on half of the rounds, scored on
the other half), with the share of the apparent gain that is noise. "-" where a
figure does not exist: no call order recorded, or fewer than 4 rounds to split.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np
from cases import trace_file, trace_name
from report import pct

from chunktune._replay import ReplayWorkload, decompose
from chunktune._trace import load_trace

HERE = Path(__file__).resolve().parent


def stats(path: Path) -> dict[str, float]:
    trace = load_trace(path)
    sizes = sorted(trace.samples)
    logs = np.log(np.array([trace.samples[c] for c in sizes]))
    rho, adjusted = decompose(logs)
    residual = adjusted - adjusted.mean(axis=1, keepdims=True)
    sigma = float(1.4826 * np.median(np.abs(residual - np.median(residual))))
    lag1 = float("nan")
    if trace.order:
        index = {c: i for i, c in enumerate(sizes)}
        seq = [residual[index[c], r] for r, order in enumerate(trace.order) for c in order]
        x = np.asarray(seq)
        lag1 = float(np.corrcoef(x[:-1], x[1:])[0, 1])
    w = ReplayWorkload(trace)
    apparent, held_out = w.offered_gain()
    return {
        "sizes": len(sizes),
        "rounds": trace.rounds,
        "native_ms": w.true_time(None) * 1e3,
        "oracle": w.oracle()[0],
        "level_spread": float(np.exp(rho.max() - rho.min()) - 1),
        "sigma": sigma,
        "lag1": lag1,
        "apparent": apparent,
        "held_out": held_out,
    }


def _num(value: float) -> str:
    return "-" if math.isnan(value) else f"{value:.2f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("files", nargs="*", type=trace_file, help="traces (default: traces/*.json)")
    files = parser.parse_args(argv).files or sorted((HERE / "traces").glob("*.json"))
    head = (f"{'trace':34s} {'sizes':>5s} {'rounds':>6s} {'native':>8s} {'best':>5s} "
            f"{'levels':>7s} {'sigma':>6s} {'lag-1':>6s} {'apparent':>8s} {'held out':>8s} "
            f"{'noise':>6s}")  # fmt: skip
    print(head)
    for f in files:
        s = stats(f)
        noise = 1 - s["held_out"] / s["apparent"] if s["apparent"] > 0 else float("nan")
        print(f"{trace_name(f):34s} {s['sizes']:5d} {s['rounds']:6d} {s['native_ms']:6.1f}ms "
              f"{s['oracle']:5d} {s['level_spread']:7.1%} {s['sigma']:6.1%} {_num(s['lag1']):>6s} "
              f"{s['apparent']:8.2%} {pct(s['held_out']):>8s} {pct(noise, 0):>6s}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
