"""Tests of ``chunktune._paired``: the paired rounds ``check`` and the benchmarks run."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from chunktune._errors import InvalidArgumentError
from chunktune._paired import paired_rounds, reshuffled


class _Modeled:
    """Calls of modeled seconds (native 10 ms, a size ``c`` ``10 + c`` ms) on a clock that
    they move by those seconds; records every call's size."""

    def __init__(self, *, fail_at: int | None = None) -> None:
        self.now = 0.0
        self.calls: list[int | None] = []
        self.fail_at = fail_at

    def run(self, chunk: int | None) -> float:
        self.calls.append(chunk)
        if len(self.calls) == self.fail_at:
            raise RuntimeError("the pool broke")
        seconds = 0.010 if chunk is None else 0.010 + chunk / 1000
        self.now += seconds
        return seconds

    def clock(self) -> float:
        return self.now


@pytest.mark.parametrize(
    ("min_rounds", "seconds", "rounds"),
    [
        pytest.param(5, 0.0, 5, id="rounds-only"),
        pytest.param(5, 0.19, 6, id="seconds-past-the-rounds"),  # 33 ms a round
        pytest.param(5, 0.16, 5, id="seconds-met-within-the-rounds"),
        pytest.param(0, 0.1, 4, id="seconds-only"),
        pytest.param(0, 0.0, 0, id="neither"),
    ],
)
def test_rounds_go_on_until_both_the_rounds_and_the_seconds_are_met(
    min_rounds: int, seconds: float, rounds: int
) -> None:
    """The first round's end with min_rounds done and seconds passed on the clock ends it."""
    w = _Modeled(fail_at=100)  # rounds that never ended would fail, not run out of memory
    got = paired_rounds(w.run, [None, 1, 2], min_rounds=min_rounds, seconds=seconds, clock=w.clock)
    assert got.rounds == rounds
    # a frozen record all through: what one reader does to it, the next never sees
    assert isinstance(got.started, tuple) and isinstance(got.seconds, tuple)
    assert len(w.calls) == 3 * (rounds + 1)
    assert got.elapsed_s == pytest.approx(0.033 * rounds)
    assert got.started == pytest.approx([0.033 * (1 + r) for r in range(rounds)])


def test_the_warm_up_calls_each_size_once_in_order_and_is_not_counted() -> None:
    """One call of each size in the order given, then rounds; the seconds are the rounds'."""
    w = _Modeled()
    got = paired_rounds(w.run, [None, 4, 2], min_rounds=3, clock=w.clock)
    assert w.calls[:3] == [None, 4, 2]
    assert got.sizes == (None, 4, 2)
    assert got.of(None) == (0.010,) * 3
    assert got.of(4) == pytest.approx((0.014,) * 3)
    assert got.elapsed_s == pytest.approx(3 * 0.036)  # the warm-up's 36 ms left out
    with pytest.raises(KeyError):
        got.of(8)


def test_each_round_calls_every_size_once_in_the_order_drawn_afresh() -> None:
    """A round is one permutation of the sizes, drawn for it: numpy's permutation, as given."""
    w = _Modeled()
    paired_rounds(w.run, [None, 1, 2], min_rounds=40, order=np.random.default_rng(3).permutation)
    rounds = [tuple(w.calls[k : k + 3]) for k in range(3, len(w.calls), 3)]
    field = [None, 1, 2]
    expected = np.random.default_rng(3)
    assert rounds == [tuple(field[int(i)] for i in expected.permutation(3)) for _ in rounds]
    assert len(set(rounds)) == 6  # 40 rounds show every order of 3


def test_reshuffled_shuffles_one_list_in_place_as_recheck_always_did() -> None:
    """reshuffled(rng): each round's order is the last one shuffled by rng, as check drew."""
    w = _Modeled()
    paired_rounds(w.run, [None, 8], min_rounds=16, order=reshuffled(random.Random(1)))
    rng, pair = random.Random(1), [None, 8]
    expected = []
    for _ in range(16):
        rng.shuffle(pair)
        expected += pair
    assert w.calls[2:] == expected
    assert {tuple(w.calls[k : k + 2]) for k in range(2, 34, 2)} == {(None, 8), (8, None)}


def test_on_round_hears_each_round_s_count_and_elapsed_seconds() -> None:
    """on_round(rounds, elapsed_s) after every round, the warm-up not among them."""
    w = _Modeled()
    heard: list[tuple[int, float]] = []
    paired_rounds(
        w.run,
        [None, 2],
        min_rounds=3,
        clock=w.clock,
        on_round=lambda n, s: heard.append((n, s)),
    )
    assert [n for n, _ in heard] == [1, 2, 3]
    assert [s for _, s in heard] == pytest.approx([0.022, 0.044, 0.066])


@pytest.mark.parametrize(
    "error", [pytest.param(RuntimeError, id="error"), pytest.param(KeyboardInterrupt, id="ctrl-c")]
)
def test_what_a_call_raises_ends_the_rounds_at_once(error: type[BaseException]) -> None:
    """A call that raises (a Ctrl-C too) ends the rounds there: no call after it, no on_round."""
    calls: list[int | None] = []

    def call(chunk: int | None) -> float:
        calls.append(chunk)
        if len(calls) == 4:  # the second call of the first round
            raise error("stop")
        return 0.01

    heard: list[int] = []
    with pytest.raises(error, match="stop"):
        paired_rounds(call, [None, 3], min_rounds=5, on_round=lambda n, s: heard.append(n))
    assert len(calls) == 4 and heard == []


@pytest.mark.parametrize(
    ("sizes", "min_rounds", "seconds", "says"),
    [
        pytest.param([], 1, 0.0, r"paired rounds of \[\]: expected distinct sizes", id="none"),
        pytest.param([None, 4, 4], 1, 0.0, r"\[None, 4, 4\]: expected distinct", id="repeated"),
        pytest.param([None], -1, 0.0, "min_rounds -1, expected >= 0", id="rounds"),
        pytest.param([None], 1, math.nan, "seconds nan, expected a finite", id="nan"),
        pytest.param([None], 1, math.inf, "seconds inf, expected", id="inf"),
        pytest.param([None], 1, -1.0, "seconds -1.0, expected", id="negative"),
    ],
)
def test_bad_arguments_are_refused_before_any_call(
    sizes: list[int | None], min_rounds: int, seconds: float, says: str
) -> None:
    """No size, a repeated one, negative rounds or seconds that never end: one clear error."""
    w = _Modeled(fail_at=100)  # an accepted inf would fail at the 100th call, not run on
    with pytest.raises(InvalidArgumentError, match=says):
        paired_rounds(w.run, sizes, min_rounds=min_rounds, seconds=seconds)
    assert w.calls == []
