"""A second look at a confirmed size, in a later stretch of the machine: what it would catch.

    python benchmarks/second_look.py [--tunes 8] [--look-s 2] [--cases humanoid,uniform,tail-heavy]

Live, on this machine. Each case is tuned ``--tunes`` times with `balanced` (cache off),
the cases in turn, so that about a whole pass of tunes lies between a tune and its second
look. Then each size a tune confirmed is re-checked against native for ``--look-s``
seconds (``chunktune check``'s paired rounds and rule: it holds if its interval's low end
is above 0), in the tunes' order. Last, every chosen size and the case's known-good sizes
are re-measured over at least 45 s (``run.py --live``'s re-measure). A lever measured,
not a feature: a second look that reverts to native whatever does not hold again.
"""

from __future__ import annotations

import argparse
import random
import sys
from collections.abc import Sequence

import attrs
from cases import live_cases
from measure import bench_settings, own_sweep_lock, remeasure

import chunktune
from chunktune._recheck import recheck


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tunes", type=int, default=8, help="tunes per case")
    parser.add_argument("--look-s", type=float, default=2.0, help="seconds of each second look")
    parser.add_argument("--cases", default="humanoid,uniform,tail-heavy", help="live cases")
    args = parser.parse_args(argv)
    own_sweep_lock()
    settings = bench_settings()
    policy = settings.get_policy("balanced")
    cases = live_cases(args.cases.split(","))
    loads = {c.name: c.build(2) for c in cases}
    for w in loads.values():
        w.run(None)  # the first call pays for thread start-up
    tuned: list[tuple[str, int, int | None]] = []
    for k in range(args.tunes):
        for c in cases:
            pol = attrs.evolve(policy, seed=100 + k)
            d = chunktune.resolve_sync(loads[c.name], settings=settings, policy=pol)
            tuned.append((c.name, k, d.chunk_size))
    looked: dict[tuple[str, int], bool] = {}
    for name, k, chunk in tuned:
        if chunk is not None:
            got = recheck(loads[name], chunk, seconds=args.look_s, rng=random.Random(k))
            looked[name, k] = got.span.holds
    print("case              tune  chose   second look  re-measured  paid")
    for c in cases:
        chosen = sorted({ch for n, _, ch in tuned if n == c.name and ch is not None})
        measured = remeasure(loads[c.name], [*chosen, *c.known_good], 150, min_seconds=45)
        for name, k, chunk in tuned:
            if name != c.name:
                continue
            m = measured[chunk]
            look = "-" if chunk is None else ("holds" if looked[name, k] else "native")
            print(
                f"{name:17} {k:4}  {chunk or 'native':>6}  {look:>11}  "
                f"{m.gain:+10.2%}  {m.paid:+.2%}"
            )
        best = max(c.known_good, key=lambda s: measured[s].gain)
        print(f"{c.name:17} best known {best}: {measured[best].gain:+.2%}")
    for w in loads.values():
        w.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
