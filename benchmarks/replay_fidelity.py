"""Does a replay's noise look like the recording's? Each trace re-recorded through its replay.

    python benchmarks/replay_fidelity.py [traces/**/*.json] [--seed S]

Per trace, on the recording and on a re-recording (the same rounds of every size, each
in a fresh random order, made through ``ReplayWorkload``): the correlation of the
residuals (each round's level and each size's mean taken out) with the calls 1, 3 and 5
places later in the order they ran, the robust sigma of the residuals, and how much less
variance alternating native and a size (N W N W N W N W) leaves in a paired estimate
than N W W N W N N W over the same eight calls. The last is what decides whether a
confirmation should alternate; a replay that smoothed the noise would say "no
difference" where the recording says otherwise. Two more look at each size's own
noise: the share of calls more than five of their size's robust sigmas from its mean
(rare spikes), and, on the re-recording's row, the correlation of the sizes' robust
sigmas with the recording's (1: each size swings as far as it did when recorded; 0: the
replay keeps none of the differences between sizes).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import numpy.typing as npt
from cases import trace_file, trace_name

from chunktune._replay import ReplayWorkload, decompose
from chunktune._trace import Trace, load_trace

HERE = Path(__file__).resolve().parent
LAGS = (1, 3, 5)
ALTERNATING = np.array([-1, 1, -1, 1, -1, 1, -1, 1]) / 4
ABBA = np.array([-1, 1, 1, -1, 1, -1, -1, 1]) / 4
SPIKE = 5.0  # a call this many of its size's robust sigmas from its mean is a spike

FloatArray = npt.NDArray[np.float64]


def residual_sequences(trace: Trace) -> list[FloatArray]:
    """Each round's residuals (level and size mean taken out) in the order the calls ran."""
    sizes = sorted(trace.samples)
    index = {c: i for i, c in enumerate(sizes)}
    _, adjusted = decompose(np.log(np.array([trace.samples[c] for c in sizes])))
    residual = adjusted - adjusted.mean(axis=1, keepdims=True)
    return [np.array([residual[index[c], r] for c in calls]) for r, calls in enumerate(trace.order)]


def own_noise(trace: Trace) -> tuple[FloatArray, float]:
    """Each size's robust sigma (its residuals' MAD, scaled), and the share of calls more
    than :data:`SPIKE` of their size's sigmas from its mean."""
    sizes = sorted(trace.samples)
    _, adjusted = decompose(np.log(np.array([trace.samples[c] for c in sizes])))
    residual = adjusted - adjusted.mean(axis=1, keepdims=True)
    median = np.median(residual, axis=1, keepdims=True)
    sigma = 1.4826 * np.median(np.abs(residual - median), axis=1)
    safe = np.where(sigma > 0, sigma, np.inf)[:, None]
    return sigma, float(np.mean(np.abs(residual) > SPIKE * safe))


def memory(sequences: list[FloatArray]) -> dict[str, float]:
    """Lag correlations, robust sigma and the alternation's variance against ABBA's."""
    out: dict[str, float] = {}
    centered = [s - s.mean() for s in sequences]
    total = sum(float(np.sum(s**2)) for s in centered)
    for lag in LAGS:
        out[f"lag{lag}"] = sum(float(np.sum(s[:-lag] * s[lag:])) for s in centered) / total
    every = np.concatenate(sequences)
    out["sigma"] = float(1.4826 * np.median(np.abs(every - np.median(every))))

    def variance(weights: FloatArray) -> float:
        n = len(weights)
        windows = [s[i : i + n] for s in sequences for i in range(len(s) - n + 1)]
        return float(np.var([w @ weights for w in windows]))

    out["alternation"] = variance(ALTERNATING) / variance(ABBA)
    return out


def rerecord(trace: Trace, *, seed: int = 0) -> Trace:
    """The same rounds of every size, each in a fresh random order, made through the replay.

    Not ``chunktune record``'s loop: its warm-up call would put every re-recorded round
    one call off the replay's walk through the recorded rounds, and each would straddle
    a jump between two recorded rounds' levels, which is the walk's, not the noise's.
    """
    replay = ReplayWorkload(trace, seed=seed)
    rng = np.random.default_rng(seed)
    sizes = sorted(trace.samples)
    # the walk starts anywhere in a recorded round: re-record from the next round's start
    while replay.call_in_round != 0:
        replay.run(sizes[0])
    samples: dict[int, list[float]] = {c: [] for c in sizes}
    order = []
    for _ in range(trace.rounds):
        calls = [int(c) for c in rng.permutation(sizes)]
        for c in calls:
            samples[c].append(replay.run(c))
        order.append(tuple(calls))
    return Trace(
        num_envs=trace.num_envs,
        nthread=trace.nthread,
        rounds=trace.rounds,
        samples={c: tuple(v) for c, v in samples.items()},
        order=tuple(order),
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument(
        "files", nargs="*", type=trace_file, help="traces (default: traces/**/*.json)"
    )
    parser.add_argument("--seed", type=int, default=0, help="the re-recording's seed")
    args = parser.parse_args(argv)
    files = args.files or sorted((HERE / "traces").glob("**/*.json"))
    cols = " ".join(f"{'lag-' + str(lag):>6s}" for lag in LAGS)
    print(f"{'trace':42s} {'':10s} {cols} {'sigma':>6s} {'alternation':>11s} "
          f"{'spikes':>6s} {'sizes r':>7s}")  # fmt: skip
    for f in files:
        trace = load_trace(f)
        if not trace.order:
            print(f"{trace_name(f):42s} (no call order recorded: skipped)")
            continue
        recorded_sigma, _ = own_noise(trace)
        for label, t in (("recorded", trace), ("replayed", rerecord(trace, seed=args.seed))):
            m = memory(residual_sequences(t))
            sigma, spikes = own_noise(t)
            name = trace_name(f)
            lags = " ".join(f"{m[f'lag{lag}']:6.2f}" for lag in LAGS)
            alike = "" if t is trace else f"{np.corrcoef(recorded_sigma, sigma)[0, 1]:7.2f}"
            shape = f"{m['sigma']:6.1%} {m['alternation']:11.2f} {spikes:6.2%} {alike:>7s}"
            print(f"{name if label == 'recorded' else '':42s} {label:10s} {lags} {shape}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
