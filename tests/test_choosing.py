"""Choosing at the race's end (chunktune._choosing.choose): the candidate to confirm, or native."""

from __future__ import annotations

import attrs

from chunktune import Policy, load_settings
from chunktune._choosing import choose
from chunktune._field import Field
from chunktune._probe import Probe
from chunktune.sim import SimulatedWorkload

# per-round noise: each size's calls alternate this far either side of its level
WOBBLE = (0.998, 1.002, 0.999, 1.001, 0.997, 1.003)


def balanced(**changes: object) -> Policy:
    return attrs.evolve(load_settings().get_policy("balanced"), **changes)  # type: ignore[arg-type]


def field(pol: Policy, levels: dict[int, float], *, wobble: tuple[float, ...] = WOBBLE) -> Field:
    """A race of six paired rounds: native at 1 s, each size at its level (native 12, upper 128)."""
    w = SimulatedWorkload.from_layout("uniform", num_envs=1024, nthread=8)
    probe = Probe(w, pol, check_cancelled=lambda: None, on_event=None, clock=lambda: 0.0)
    f = Field(probe, [None, *levels])
    for r, jitter in enumerate(wobble):
        f.ev.add(None, r, 1.0)
        for chunk, level in levels.items():
            f.ev.add(chunk, r, level * jitter)
    f.round = len(wobble) - 1
    return f


class Gate:
    """The noise gate as choose asks it: a fixed answer."""

    def __init__(self, noisy: str | None = None) -> None:
        self.noisy = noisy

    def too_noisy(self, *, final: bool) -> str | None:
        return self.noisy


def chosen(f: Field, gate: Gate | None = None) -> tuple[int | None, str, bool]:
    size, choice, gated = choose(f, gate or Gate())  # type: ignore[arg-type]
    return size, choice.reason, gated


def test_a_tie_short_of_the_margin_is_never_the_one_chosen() -> None:
    """toward_upper takes no tie of the best that is itself under the margin over native."""
    pol = balanced(tie_break="toward_upper", tie_z=0.0, tie_tol=0.02, margin=0.03)
    # 16 is within 2% of 8, but only 2.5% faster than native
    size, reason, _ = chosen(field(pol, {8: 0.96, 16: 0.975}))
    assert (size, reason) == (8, "the best candidate, 8, looked 4.0% faster than native")


def test_a_tie_within_the_noise_of_the_best_joins_the_band() -> None:
    """With tie_z, a size outside tie_tol but within the noise of the best is a tie."""
    noisy = (0.97, 1.03, 0.97, 1.03, 0.97, 1.03)
    pol = balanced(tie_break="toward_upper")  # tie_tol 1%, tie_z 1
    assert chosen(field(pol, {8: 0.94, 16: 0.96}, wobble=noisy))[0] == 16
    assert chosen(field(attrs.evolve(pol, tie_z=0.0), {8: 0.94, 16: 0.96}, wobble=noisy))[0] == 8


def test_a_best_clearly_faster_but_under_the_margin_keeps_native() -> None:
    """A 1.5% gain clear of the noise is still under a 3% margin: native, and the reason says so."""
    size, reason, gated = chosen(field(balanced(margin=0.03), {8: 0.985}))
    assert size is None and not gated
    assert reason == (
        "kept the native chunk 12: the best candidate, 8, looked 1.5% faster than native, "
        "under the 3.0% margin"
    )


def test_a_race_whose_every_candidate_was_dropped_says_so() -> None:
    """Candidates raced out leave native with that reason, not 'no size but native's'."""
    f = field(balanced(), {8: 1.3, 16: 2.5})
    for c in (8, 16):
        f.drop(c)
    size, reason, _ = chosen(f)
    assert size is None
    assert reason == (
        "kept the native chunk 12: every candidate fell clearly behind native or short of the "
        "margin"
    )


def test_an_extending_policy_asks_the_noise_gate_after_the_margin() -> None:
    """With extend_budget, a gain the stretched budget cannot confirm keeps native, gated."""
    pol = balanced(extend_budget=True, hard_limit_s=60.0)
    f = field(pol, {8: 0.9})
    assert chosen(f) == (8, "the best candidate, 8, looked 10.0% faster than native", False)
    size, reason, gated = chosen(f, Gate("too noisy to confirm"))
    assert (size, reason, gated) == (None, "kept the native chunk 12: too noisy to confirm", True)


def test_a_best_measured_in_one_round_keeps_native_for_want_of_a_noise_figure() -> None:
    """One round gives no noise estimate: native, and the reason says the rounds were too few."""
    size, reason, gated = chosen(field(balanced(min_rounds=1), {8: 0.9}, wobble=(1.0,)))
    assert size is None and not gated
    assert reason == (
        "kept the native chunk 12: the best candidate, 8, looked 10.0% faster than native, "
        "in too few rounds to know the noise"
    )
