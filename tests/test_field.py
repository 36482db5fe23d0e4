"""The race's field (chunktune._field.Field): its leader, when it has settled, and what it drops."""

from __future__ import annotations

import math

from _fields import balanced, field

from chunktune._events import ProgressEvent
from chunktune._field import Field
from chunktune._probe import Probe
from chunktune.sim import SimulatedWorkload


def test_native_leads_a_candidate_measured_exactly_like_it() -> None:
    """On an exact tie with native the leader is native: a candidate must be faster to lead."""
    f = field(balanced(), {8: (1.0,)}, wobble=(1.0,) * 4)
    assert f.leader() is None


def test_contenders_measured_exactly_alike_are_settled_at_tie_tol_zero() -> None:
    """tie_tol 0 and tie_z 0: a contender exactly as fast as the leader is within the band."""
    f = field(balanced(tie_tol=0.0, tie_z=0.0), {8: (0.9,), 16: (0.9,)}, wobble=(1.0,) * 4)
    assert f.settled()


def test_only_the_first_round_screens_out_the_hopeless() -> None:
    """A candidate that took twice native's time in a later round is not screened out."""
    f = field(balanced(), {8: (0.9, 0.9, 2.5)}, wobble=(1.0, 1.0, 1.0))
    f.screen()
    assert f.live == [8]
    hopeless = field(balanced(), {8: (2.5,)}, wobble=(1.0,))
    hopeless.screen()
    assert hopeless.live == [] and hopeless.dropped == {8: 0}


def test_racing_drops_a_size_clearly_behind_the_leader_after_min_rounds() -> None:
    """After exactly min_rounds rounds, a size clearly outside the leader's band is dropped."""
    f = field(balanced(min_rounds=6), {8: (0.8,), 16: (0.9,)})
    f.race()
    assert f.live == [8] and 16 in f.dropped


def test_racing_drops_a_size_clearly_short_of_the_margin_after_min_rounds() -> None:
    """After exactly min_rounds rounds, a tie of the leader clearly under the margin is dropped."""
    f = field(balanced(min_rounds=6, margin=0.03, tie_tol=0.01), {8: (0.99,), 16: (0.995,)})
    f.race()
    assert f.live == [8] and 16 in f.dropped


def test_racing_drops_a_size_a_hair_short_of_the_margin_and_keeps_one_exactly_on_it() -> None:
    """No noise: a size 1e-12 short of the margin's log is dropped, one exactly on it stays."""
    margin = 0.03
    short = (1.0 - margin) * math.exp(1e-12)
    f = field(balanced(margin=margin), {8: (0.965,), 16: (short,), 32: (1.0 - margin,)},
              wobble=(1.0,) * 6)  # fmt: skip
    f.race()
    assert f.live == [8, 32] and 16 in f.dropped


def test_racing_never_drops_the_leader() -> None:
    """The leader stays in the race even when it is itself clearly short of the margin."""
    f = field(balanced(margin=0.03), {8: (0.99,)})
    f.race()
    assert f.live == [8] and f.dropped == {}


def _halved_field_with_a_late_joiner() -> Field:
    """Six rounds of five sizes, each with noise of its own, and a sixth, 3.3% behind the
    leader, that joined for the last two: it ranks in the worse half on its own rounds."""
    pol = balanced()
    w = SimulatedWorkload.from_layout("uniform", num_envs=1024, nthread=8)
    probe = Probe(w, pol, check_cancelled=lambda: None, on_event=None, clock=lambda: 0.0)
    levels = {2: 0.90, 3: 0.91, 4: 0.92, 6: 0.99, 7: 1.00}
    f = Field(probe, [None, *levels, 5])
    jitter = (1.05, 0.95, 1.04, 0.96, 1.05, 0.95)
    for r in range(6):
        f.ev.add(None, r, 1.0)
        for i, (chunk, level) in enumerate(levels.items()):
            f.ev.add(chunk, r, level * jitter[(r + i) % 6])
        if r >= 4:
            f.ev.add(5, r, 0.93 * jitter[r])
    f.round = 5
    return f


def test_halving_keeps_a_size_the_leader_has_not_beaten_on_their_common_rounds() -> None:
    """Halving drops the worse half the leader is clearly ahead of, not a late joiner it is not."""
    f = _halved_field_with_a_late_joiner()
    assert f.leader() == 2
    assert f.ev.compare(5, 2).lower(f.p.tie_z) <= 0 < f.ev.compare(6, 2).lower(f.p.tie_z)
    f.halve()
    assert f.live == [2, 3, 4, 5] and set(f.dropped) == {6, 7}


def _why_dropped(f: Field, step: str, *args: int) -> list[tuple[int | None, str | None]]:
    """What ``f.<step>(*args)`` dropped, as its ``raced_out`` events say: (size, message)."""
    events: list[ProgressEvent] = []
    f.probe.on_event = events.append
    getattr(f, step)(*args)
    return [(e.chunk_size, e.message) for e in events if e.kind == "raced_out"]


def test_each_way_out_of_the_race_says_why_in_its_event() -> None:
    """Each way a size leaves the race puts its cause in the raced_out event's message."""
    behind = field(balanced(min_rounds=6), {8: (0.8,), 16: (0.9,)})
    assert _why_dropped(behind, "race") == [(16, "clearly behind 8")]
    short = field(balanced(min_rounds=6, margin=0.03, tie_tol=0.01), {8: (0.99,), 16: (0.995,)})
    assert _why_dropped(short, "race") == [(16, "clearly short of the margin over native")]
    halved = _halved_field_with_a_late_joiner()
    assert _why_dropped(halved, "halve") == [
        (6, "the field halved, behind 2"),
        (7, "the field halved, behind 2"),
    ]
    hopeless = field(balanced(), {8: (2.5,)}, wobble=(1.0,))
    assert _why_dropped(hopeless, "screen") == [(8, "twice native's time")]
    cut = field(balanced(), {8: (0.8,), 16: (0.9,), 32: (0.95,)})
    assert _why_dropped(cut, "keep_best", 1) == [
        (16, "the field cut to its 1 best"),
        (32, "the field cut to its 1 best"),
    ]


def test_a_size_dropped_behind_native_names_native_not_none() -> None:
    """When native leads, a size raced out or halved behind it is 'behind native', never 'None'."""
    behind = field(balanced(min_rounds=6), {8: (1.2,), 16: (1.3,)})
    assert behind.leader() is None
    assert _why_dropped(behind, "race") == [
        (8, "clearly behind native"),
        (16, "clearly behind native"),
    ]
    rows = {c: (1.1 + c / 100,) for c in (2, 3, 4, 5, 6, 7)}
    halved = field(balanced(min_rounds=2, race=False), rows)
    assert halved.leader() is None
    dropped = _why_dropped(halved, "halve")
    assert dropped and all(why == "the field halved, behind native" for _, why in dropped)


def test_joining_no_sizes_tells_no_refinement() -> None:
    """join([]) adds nothing and emits no 'refined' event; join of sizes emits one naming them."""
    events: list[ProgressEvent] = []
    w = SimulatedWorkload.from_layout("uniform", num_envs=1024, nthread=8)
    probe = Probe(
        w, balanced(), check_cancelled=lambda: None, on_event=events.append, clock=lambda: 0.0
    )
    f = Field(probe, [None, 8])
    f.join([])
    assert (f.live, events) == ([8], [])
    f.join([16])
    assert [(e.kind, e.candidates) for e in events] == [("refined", (16,))]


def test_screening_judges_only_a_sizes_first_round() -> None:
    """A size hopeless in its first round but screened after its second is left to racing."""
    f = field(balanced(), {8: (2.5, 0.9)}, wobble=(1.0, 1.0))
    f.screen()
    assert f.live == [8]


def test_unpaired_evidence_is_never_screened() -> None:
    """Unpaired, a size's values are log seconds, not ratios: 3 s against native's 4 s stays."""
    w = SimulatedWorkload.from_layout("uniform", num_envs=1024, nthread=8)
    probe = Probe(
        w, balanced(paired=False), check_cancelled=lambda: None, on_event=None, clock=lambda: 0.0
    )
    f = Field(probe, [None, 8])
    f.ev.add(None, 0, 4.0)
    f.ev.add(8, 0, 3.0)
    f.screen()
    assert f.live == [8]


def test_the_front_of_sizes_measured_exactly_alike_is_the_smaller() -> None:
    """front() breaks an exact tie toward the smaller size."""
    f = field(balanced(), {8: (0.9,), 16: (0.9,)}, wobble=(1.0,) * 4)
    assert f.front() == 8


def test_keeping_the_best_breaks_an_exact_tie_toward_the_smaller_size() -> None:
    """keep_best(1) of two sizes measured exactly alike keeps the smaller."""
    f = field(balanced(), {16: (0.9,), 8: (0.9,)}, wobble=(1.0,) * 4)
    f.keep_best(1)
    assert f.live == [8] and list(f.dropped) == [16]


def test_the_tie_band_is_tie_tol_as_a_ratio() -> None:
    """tie_tol 0.5: a size 1.55x the leader's time is clearly outside the band (log 1.5)."""
    f = field(balanced(min_rounds=6, tie_tol=0.5), {8: (0.5,), 16: (0.775,)})
    f.race()
    assert f.live == [8] and 16 in f.dropped


def test_a_call_in_a_round_cut_before_native_s_does_not_count_toward_min_rounds() -> None:
    """min_rounds counts paired rounds: a size's call whose round lost native's is no round."""
    f = field(balanced(min_rounds=2), {8: (0.9,)}, wobble=(1.0,))
    f.ev.add(8, 1, 0.9)  # the budget cut round 1 after 8's call, before native's
    f.round = 1
    assert (f.ev.count(8), f.ev.rounds(8)) == (2, 1)
    assert f.judged() == [None] and f.front() is None and not f.settled()


def test_halving_ranks_no_size_whose_second_call_lost_native_s_round() -> None:
    """Halving ranks sizes on paired rounds: one short of min_rounds but for a cut call races on."""
    rows = {2: (0.9,), 3: (0.95,), 4: (1.0,), 5: (1.3,), 6: (1.5, None)}
    f = field(balanced(min_rounds=2, refine_top=1), rows, wobble=(1.0, 1.002))
    f.ev.add(6, 2, 1.5)  # the budget cut round 2 after 6's call, before native's
    f.round = 2
    f.halve()
    assert 6 in f.live and 5 not in f.live


def test_the_leader_of_sizes_measured_exactly_alike_is_the_smaller_in_any_order() -> None:
    """leader() breaks an exact tie between candidates toward the smaller, whatever the order."""
    f = field(balanced(), {16: (0.9,), 8: (0.9,)}, wobble=(1.0,) * 4)
    assert f.live == [16, 8] and f.leader() == 8


def test_a_size_with_exactly_min_rounds_rounds_is_at_the_front() -> None:
    """front() judges a size measured in exactly min_rounds rounds."""
    f = field(balanced(min_rounds=4), {8: (0.9,)}, wobble=(1.0,) * 4)
    assert f.front() == 8


def test_contenders_with_exactly_min_rounds_rounds_can_be_settled() -> None:
    """Two sizes measured alike in exactly min_rounds rounds, at tie_tol 0: the race settled."""
    f = field(balanced(min_rounds=4, tie_tol=0.0, tie_z=0.0), {8: (0.9,), 16: (0.9,)},
              wobble=(1.0,) * 4)  # fmt: skip
    assert f.settled()


def test_a_field_with_every_candidate_dropped_has_settled() -> None:
    """With no live candidate left (the hopeless screened out), the race has settled."""
    f = field(balanced(), {8: (2.5,)}, wobble=(1.0,))
    f.screen()
    assert f.live == [] and f.settled()


def test_a_contender_the_noise_cannot_tell_from_the_leader_keeps_the_race_open() -> None:
    """tie_tol 0 with round-to-round noise: a size measured like the leader has not settled."""
    f = field(balanced(min_rounds=6, tie_tol=0.0), {8: (0.9,), 16: (0.9,)})
    assert f.leader() == 8 and not f.settled()


def test_a_size_exactly_twice_native_s_time_is_not_screened_out() -> None:
    """Screening drops more than twice native's time: a size at exactly twice it races on."""
    f = field(balanced(), {8: (2.0,)}, wobble=(1.0,))
    assert next(iter(f.ev.values(8).values())) == math.log(2.0)
    f.screen()
    assert f.live == [8]


def test_a_size_with_fewer_common_rounds_than_min_rounds_is_not_raced_out() -> None:
    """A size that joined for the last round, far behind and short of the margin, races on."""
    f = field(balanced(min_rounds=2), {8: (0.8,), 16: (None,) * 5 + (0.999,)})
    assert f.ev.compare(16, 8).n == 1
    f.race()
    assert f.live == [8, 16] and f.dropped == {}


def test_a_size_exactly_the_tie_band_behind_the_leader_is_not_raced_out() -> None:
    """No noise: a size whose lead is exactly the tie band stays; one 1e-12 past it is dropped."""
    f = field(balanced(min_rounds=6), {8: (0.8,), 16: (0.9,)}, wobble=(1.0,) * 6)
    f.band = f.ev.compare(16, 8).diff
    f.race()
    assert f.live == [8, 16]
    f.band -= 1e-12
    assert _why_dropped(f, "race") == [(16, "clearly behind 8")]


def test_a_size_whose_gain_is_exactly_the_least_gain_is_not_raced_out() -> None:
    """No noise: a size gaining exactly `need` over native stays; 1e-12 less and it is dropped."""
    f = field(balanced(min_rounds=6, tie_tol=0.5), {8: (0.95,), 16: (0.96,)}, wobble=(1.0,) * 6)
    f.need = -f.ev.compare(16, None).diff
    f.race()
    assert f.live == [8, 16]
    f.need += 1e-12
    assert _why_dropped(f, "race") == [(16, "clearly short of the margin over native")]


def _spaced(pol_top: int, count: int) -> Field:
    """``count`` sizes 5% apart in time after six noisy rounds, refine_top ``pol_top``."""
    rows = {2**k: (0.9 * 1.05**k,) for k in range(count)}
    return field(balanced(min_rounds=2, refine_top=pol_top, race=False), rows)


def test_halving_keeps_refine_top_plus_one_where_that_is_more_than_half() -> None:
    """Four sizes clearly apart, refine_top 2: halving keeps three and drops the slowest."""
    f = _spaced(2, 4)
    f.halve()
    assert f.live == [1, 2, 4] and list(f.dropped) == [8]


def test_halving_keeps_the_better_half_rounded_up() -> None:
    """Six sizes clearly apart, refine_top 1: halving keeps three (more than refine_top + 1)."""
    f = _spaced(1, 6)
    f.halve()
    assert f.live == [1, 2, 4] and set(f.dropped) == {8, 16, 32}


def test_halving_keeps_sizes_measured_exactly_like_the_leader() -> None:
    """No noise, six sizes measured alike: the leader is not ahead of any, so halving drops none."""
    rows = {2**k: (0.9,) for k in range(6)}
    f = field(balanced(min_rounds=2, refine_top=1, race=False), rows, wobble=(1.0,) * 6)
    f.halve()
    assert f.live == [1, 2, 4, 8, 16, 32] and f.dropped == {}


def test_a_contender_clearly_behind_the_leader_settles_the_race_at_tie_tol_zero() -> None:
    """tie_tol 0 with noise: a size 12% behind the leader is settled; the leader is no contender."""
    f = field(balanced(min_rounds=6, tie_tol=0.0), {8: (0.8,), 16: (0.9,)})
    assert f.leader() == 8 and f.settled()
