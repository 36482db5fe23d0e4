"""How often native's own tooth is the best size, and what it gains over native.

    python benchmarks/tooth_census.py [--cases 300] [--unseen-base 777] [--novel-base 777]

MuJoCo's native chunk ``floor(N/(10T))`` cuts the batch into ``m0 = ceil(N/native)``
chunks, usually a little over ``10T``: a last, partial wave leaves most workers idle.
Native's tooth is the smallest size whose chunk count is a whole number of waves at or
below ``m0``, ``ceil(N/(T*floor(m0/T)))``. On every exact (noiseless) landscape of
``cases.py``'s simulated suite, ``unseen.py``'s and ``novel.py``'s drawn cases and the
recorded traces' truths, this prints how often the tooth differs from native, how often
it is the best size or within 0.5% of it, what it gains over native, and whether
``balanced``'s opening list (:class:`chunktune.BalancedCandidates`) holds it.
No tuner runs: the census reads the models' exact seconds only.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable, Sequence
from typing import NamedTuple, Protocol

import numpy as np
from cases import SIM_CASES, at_least_one, trace_files, trace_name
from novel import draw
from unseen import draw_cases

from chunktune import BalancedCandidates
from chunktune._replay import ReplayWorkload
from chunktune._schedule import chunk_count
from chunktune._workload import native_chunk

_NEAR = 0.005  # "within 0.5% of the best"


class Truth(Protocol):
    """What the census reads of a landscape: its exact seconds by size, and its best."""

    def true_time(self, chunk_size: int | None) -> float: ...

    def oracle(self) -> tuple[int, float]: ...


def native_tooth(num_envs: int, nthread: int) -> int:
    """``ceil(N/(T*floor(m0/T)))``: the smallest size whose whole waves fit native's count."""
    native = native_chunk(num_envs, nthread)
    waves = chunk_count(num_envs, native) // nthread
    if waves < 1:
        return native
    return -(-num_envs // (nthread * waves))


class Row(NamedTuple):
    """One landscape's census."""

    suite: str
    name: str
    num_envs: int
    nthread: int
    native: int
    tooth: int
    tooth_gain: float  # 1 - tooth / native, by the truth
    offered: float  # 1 - best / native
    best: int
    near_best: bool  # the tooth within 0.5% of the best
    listed: bool  # balanced's opening list holds the tooth


def census(suite: str, name: str, num_envs: int, nthread: int, truth: Truth) -> Row:
    native = native_chunk(num_envs, nthread)
    tooth = native_tooth(num_envs, nthread)
    t_native = truth.true_time(None)
    t_tooth = truth.true_time(tooth)
    best, t_best = truth.oracle()
    listed = tooth in BalancedCandidates().propose(num_envs, nthread)
    return Row(
        suite,
        name,
        num_envs,
        nthread,
        native,
        tooth,
        1.0 - t_tooth / t_native,
        1.0 - t_best / t_native,
        best,
        t_tooth <= t_best * (1.0 + _NEAR),
        listed,
    )


def _sim_rows() -> Iterable[Row]:
    for i, case in enumerate(SIM_CASES):
        yield census("sim", case.name, case.num_envs, case.nthread, case.workload(i))


def _unseen_rows(count: int, base: int) -> Iterable[Row]:
    for case in draw_cases(count, base):
        yield census(f"unseen {base}", case.name, case.num_envs, case.nthread, case.workload())


def _novel_rows(count: int, base: int) -> Iterable[Row]:
    for case in draw(count, base):
        yield census(f"novel {base}", case.name, case.num_envs, case.nthread, case.workload())


def _trace_rows() -> Iterable[Row]:
    for path in trace_files():
        replay = ReplayWorkload.from_file(path)
        yield census("traces", trace_name(path), replay.num_envs, replay.nthread, replay)


def _pct(x: float) -> str:
    return f"{100 * x:+.2f}%"


def _median(values: Sequence[float]) -> str:
    return _pct(float(np.median(values))) if values else "-"


def summary(suite: str, rows: Sequence[Row]) -> str:
    """One line: how often the tooth differs, is best or near it, and what it gains."""
    apart = [r for r in rows if r.tooth != r.native]
    big = [r for r in apart if r.native >= 20]
    gains = np.array([r.tooth_gain for r in apart]) if apart else np.zeros(1)
    return (
        f"| {suite} | {len(rows)} | {len(apart)} | "
        f"{sum(r.best == r.tooth for r in apart)} | {sum(r.near_best for r in apart)} | "
        f"{sum(r.near_best for r in big)} of {len(big)} | "
        f"{_median([r.tooth_gain for r in big])} / {_median([r.offered for r in big])} | "
        f"{_pct(float(np.median(gains)))} / {_pct(float(gains.max()))} / "
        f"{_pct(float(gains.min()))} | "
        f"{sum(r.tooth_gain > 0.01 for r in apart)} | "
        f"{sum(r.near_best and not r.listed for r in apart)} |"
    )


def table(groups: Sequence[tuple[str, Sequence[Row]]]) -> str:
    head = (
        "| suite | landscapes | tooth != native | tooth best | tooth within 0.5% of best "
        "| same, native >= 20 | native >= 20: tooth's gain / best's gain, medians "
        "| tooth's gain over native: median / max / min "
        "| gain > 1% | near best, not in balanced's list |\n"
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"
    )
    return "\n".join([head, *(summary(s, rows) for s, rows in groups)])


def details(rows: Sequence[Row]) -> str:
    """The landscapes where the tooth gains more than 1% over native."""
    lines = []
    for r in sorted(rows, key=lambda r: -r.tooth_gain):
        if r.tooth != r.native and r.tooth_gain > 0.01:
            lines.append(
                f"  {r.suite:12} {r.name:34} native {r.native:4} tooth {r.tooth:4} "
                f"gains {_pct(r.tooth_gain)}; best {r.best} offers {_pct(r.offered)}"
                f"{'' if r.listed else ' (not listed)'}"
            )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--cases", type=at_least_one, default=300, help="drawn landscapes per suite"
    )
    parser.add_argument("--unseen-base", type=int, default=777, help="unseen.py's --base")
    parser.add_argument("--novel-base", type=int, default=777, help="novel.py's --base")
    args = parser.parse_args(argv)
    groups: list[tuple[str, Sequence[Row]]] = [
        ("sim", list(_sim_rows())),
        (f"unseen {args.unseen_base}", list(_unseen_rows(args.cases, args.unseen_base))),
        (f"novel {args.novel_base}", list(_novel_rows(args.cases, args.novel_base))),
        ("traces", list(_trace_rows())),
    ]
    print(table(groups))
    print("\nwhere the tooth gains more than 1% over native:")
    print(details([r for _, rows in groups for r in rows]))
    apart = [r for _, rows in groups for r in rows if r.tooth != r.native]
    worse = [r for r in apart if r.tooth_gain < -_NEAR]
    print(f"\ntooth more than 0.5% slower than native: {len(worse)} of {len(apart)}")
    for r in worse:
        print(f"  {r.suite:12} {r.name:34} native {r.native} tooth {r.tooth} {_pct(r.tooth_gain)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
