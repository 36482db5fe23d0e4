"""The sweep on the simulated workload: deterministic, seeded, racing, budgeted."""

from __future__ import annotations

import itertools
from collections.abc import Callable

import attrs
import pytest

import chunktune
from chunktune import Policy, WorkloadError, load_settings
from chunktune._candidates import (
    CandidateStrategy,
    ExhaustiveCandidates,
    GeometricCandidates,
    candidate_list,
)
from chunktune._events import ProgressEvent
from chunktune._modeled import CountedCalls
from chunktune._policy import Estimator
from chunktune._sweep import may_probe, sweep
from chunktune._workload import SignatureValue, native_chunk
from chunktune.sim import Noise, SimulatedWorkload


def balanced() -> Policy:
    return load_settings().get_policy("balanced")


def blocked(seed: int = 0, sigma: float = 0.02) -> SimulatedWorkload:
    return SimulatedWorkload.from_layout(
        "blocked", num_envs=1024, nthread=16, noise=Noise(sigma=sigma), seed=seed
    )


class FakeClock:
    """A clock that advances by the seconds each probe reports."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_same_seed_same_sweep() -> None:
    """Two sweeps with the same seeds measure the same sequence and agree exactly."""
    pol = balanced()
    a, b = blocked(), blocked()
    ra = sweep(a, candidate_list(pol.candidates, 1024, 16), pol)
    rb = sweep(b, candidate_list(pol.candidates, 1024, 16), pol)
    assert a.history == b.history
    assert ra.estimates == rb.estimates


def test_rounds_use_fresh_random_orders() -> None:
    """Each round measures every live candidate once, in an order that changes between rounds."""
    w = blocked(sigma=0.0)
    pol = attrs.evolve(
        balanced(),
        prime=0,
        race=False,
        early_stop=False,
        max_rounds=4,
        refine_steps=0,
        confirm=False,
    )
    cands = candidate_list(pol.candidates, 1024, 16)
    sweep(w, cands, pol)
    rounds = [
        [c for c, _ in w.history[i : i + len(cands)]] for i in range(0, 4 * len(cands), len(cands))
    ]
    assert all(sorted(r, key=str) == sorted(cands, key=str) for r in rounds)
    assert len({tuple(map(str, r)) for r in rounds}) > 1
    assert rounds[0][0] is None  # native leads the first round


def test_racing_drops_candidates_clearly_behind() -> None:
    """Candidates far behind the best stop being measured; the best keeps its samples."""
    pol = balanced()
    r = sweep(blocked(), candidate_list(pol.candidates, 1024, 16), pol)
    counts = r.counts()
    assert r.raced_out
    worst = max(r.estimates, key=lambda c: r.estimates[c])
    assert worst in r.raced_out
    best = min((c for c in r.estimates if c is not None), key=lambda c: r.estimates[c])
    assert best not in r.raced_out
    assert counts[best] > counts[worst]
    assert None not in r.raced_out


def test_flat_landscape_stops_early() -> None:
    """When every candidate ties with native the sweep settles before max_rounds."""
    # 640 envs on 8 threads: every size below cuts whole rounds, so all tie exactly
    w = SimulatedWorkload.from_layout(
        "uniform", num_envs=640, nthread=8, noise=Noise(sigma=0.01), dispatch_s=0.0
    )
    sizes = [None, 4, 5, 10, 16, 20, 40, 80]
    assert len({round(w.true_time(c), 12) for c in sizes}) == 1
    r = sweep(w, sizes, attrs.evolve(balanced(), max_rounds=50))
    assert r.stop == "settled"
    assert r.rounds < 50


def test_without_racing_every_candidate_gets_every_round() -> None:
    """race = false measures all candidates max_rounds times."""
    pol = attrs.evolve(
        balanced(), race=False, early_stop=False, max_rounds=5, prime=0, refine_steps=0
    )
    cands = candidate_list(pol.candidates, 1024, 16)
    r = sweep(blocked(), cands, pol)
    assert set(r.counts().values()) == {5}
    assert not r.raced_out


def test_budget_stops_at_a_probe_boundary_with_native_measured() -> None:
    """A budget smaller than one round still returns native's sample and says partial."""
    clock = FakeClock()
    w = blocked(sigma=0.0)

    def on_event(event: ProgressEvent) -> None:
        if event.seconds is not None:
            clock.now += event.seconds

    pol = attrs.evolve(balanced(), prime=0, confirm=False, time_budget_s=w.true_time(None) * 2.5)
    r = sweep(w, candidate_list(pol.candidates, 1024, 16), pol, on_event=on_event, clock=clock)
    assert r.partial and r.stop == "budget"
    assert None in r.estimates
    assert sum(r.counts().values()) == 3


def test_cancellation_stops_before_the_next_probe() -> None:
    """check_cancelled raising ends the sweep at once; no probe runs after it."""
    w = blocked()
    calls = {"n": 0}

    def check() -> None:
        calls["n"] += 1
        if calls["n"] == 5:
            raise KeyboardInterrupt

    pol = balanced()
    with pytest.raises(KeyboardInterrupt):
        sweep(w, candidate_list(pol.candidates, 1024, 16), pol, check_cancelled=check)
    assert w.calls == 4


@pytest.mark.parametrize(
    "bad",
    [
        pytest.param(-1.0, id="negative"),
        pytest.param(float("nan"), id="nan"),
        pytest.param("fast", id="text"),
        pytest.param(0.0, id="zero"),
    ],
)
def test_nonsense_seconds_are_a_workload_error(bad: object) -> None:
    """run() must return positive finite seconds."""

    class Bad:
        num_envs = 64
        nthread = 2

        def signature(self) -> dict[str, str]:
            return {}

        def run(self, chunk_size: int | None) -> object:
            return bad

    with pytest.raises(WorkloadError, match="positive number of seconds"):
        sweep(Bad(), [None, 4], balanced())  # type: ignore[arg-type]


def test_sequential_schedule_reproduces_the_older_tuner() -> None:
    """The seed policy measures each candidate 2 warm-ups + 20 reps in a row, native first."""
    seed = load_settings().get_policy("seed")
    w = SimulatedWorkload.from_layout("uniform", num_envs=64, nthread=2)
    cands = candidate_list(seed.candidates, 64, 2)
    r = sweep(w, cands, seed)
    order = [c for c, _ in w.history]
    expected = [c for c in cands for _ in range(22)]
    assert order == expected
    assert set(r.counts().values()) == {20}


@pytest.mark.parametrize(
    ("estimator", "expect"),
    [
        pytest.param("min", lambda s: min(s), id="min"),
        pytest.param("median", lambda s: sorted(s)[len(s) // 2], id="median"),
    ],
)
def test_estimator_is_the_policy_s(
    estimator: Estimator, expect: Callable[[list[float]], float]
) -> None:
    """The reported estimate is the policy's estimator over the kept samples."""
    pol = attrs.evolve(
        balanced(),
        estimator=estimator,
        race=False,
        early_stop=False,
        max_rounds=5,
        prime=0,
        paired=False,
        confirm=False,
        refine_steps=0,
    )
    w = blocked(sigma=0.05)
    r = sweep(w, [None, 4], pol)
    for chunk, samples in r.samples.items():
        assert r.estimates[chunk] == pytest.approx(expect(list(samples)))


@pytest.mark.parametrize(
    "name", [pytest.param("balanced", id="rounds"), pytest.param("seed", id="sequential")]
)
def test_events_report_candidates_probes_and_done(name: str) -> None:
    """on_event sees the candidate list first, every probe, raced-out sizes and a final done."""
    events: list[ProgressEvent] = []
    pol = load_settings().get_policy(name)
    r = sweep(blocked(), candidate_list(pol.candidates, 1024, 16), pol, on_event=events.append)
    kinds = [e.kind for e in events]
    assert kinds[0] == "candidates" and kinds[-1] == "done"
    assert kinds.count("probe") == sum(r.counts().values())
    assert {e.chunk_size for e in events if e.kind == "raced_out"} == set(r.raced_out)


class OwnClock:
    """A real-time workload of a user's with a ``clock()`` of its own: simulation time."""

    def __init__(self) -> None:
        self.inner = blocked(sigma=0.0)
        self.num_envs, self.nthread = self.inner.num_envs, self.inner.nthread

    def signature(self) -> dict[str, str]:
        return {"kind": "own-clock"}

    def run(self, chunk_size: int | None) -> float:
        return self.inner.run(chunk_size)

    def clock(self) -> float:
        return 1e9 * self.inner.calls  # the physics' time: a billion seconds a call


def test_a_user_workload_s_own_clock_is_not_the_budget_s() -> None:
    """A ``clock()`` on a workload that is no ModeledTime leaves the budget on the wall clock."""
    pol = balanced()
    w = OwnClock()
    r = sweep(w, candidate_list(pol.candidates, 1024, 16), pol)
    # read as the budget's clock, its first calls would have spent the whole budget
    assert r.stop != "too_slow" and not r.partial and r.rounds >= pol.min_rounds


def test_a_modeled_time_workload_s_clock_is_the_budget_s() -> None:
    """A simulated workload's budget runs on its ``clock()``: modeled seconds, not wall time."""
    pol = attrs.evolve(balanced(), time_budget_s=0.5)
    w = SimulatedWorkload.from_layout("blocked", num_envs=1024, nthread=16, mean_s=0.01)
    r = sweep(w, candidate_list(pol.candidates, 1024, 16), pol)
    # one modeled call of 0.69 s spends the budget; on the wall clock it took
    # microseconds and the sweep would have gone on
    assert r.stop == "too_slow" and w.calls == 1


@pytest.mark.parametrize("prime", [1, 5])
def test_priming_stops_at_the_budget(prime: int) -> None:
    """A budget under one call: priming stops after its first call, nothing more is timed."""
    w = SimulatedWorkload([1e-3] * 1024, nthread=8, dispatch_s=0.0)
    pol = attrs.evolve(balanced(), prime=prime, time_budget_s=0.5 * w.true_time(None))
    r = sweep(w, candidate_list(pol.candidates, 1024, 8), pol)
    assert w.calls == 1 and r.stop == "too_slow"


def test_the_older_tuner_s_schedule_checks_the_budget_after_warm_ups_too() -> None:
    """seed's schedule: the budget ending after native's 22 calls stops at the next warm-up."""
    w = SimulatedWorkload([1e-3] * 1024, nthread=8, dispatch_s=0.0)
    seed = load_settings().get_policy("seed")  # 2 warm-ups and 20 repetitions a candidate
    pol = attrs.evolve(seed, time_budget_s=22.01 * w.true_time(None))
    r = sweep(w, candidate_list(pol.candidates, 1024, 8), pol)
    assert r.partial and w.calls == 23  # native's 22, then one warm-up past the budget


@pytest.mark.parametrize(("low", "high"), [(3, 3), (5, 5), (3, 4), (4, 5)])
def test_an_odd_number_of_confirmation_pairs_still_confirms(low: int, high: int) -> None:
    """Pairs come two to a block: confirm_min_pairs = confirm_max_pairs = 3 still confirms."""
    w = SimulatedWorkload.from_layout("blocked", num_envs=1024, nthread=8)
    pol = attrs.evolve(
        balanced(), confirm_min_pairs=low, confirm_max_pairs=high, time_budget_s=1000.0
    )
    r = sweep(w, candidate_list(pol.candidates, 1024, 8), pol)
    assert r.choice.chunk_size is not None and r.confirm_pairs >= low


def test_a_list_of_native_alone_says_there_was_nothing_to_compare() -> None:
    """Explicit sizes holding only native's: native kept, and the reason says why."""
    w = SimulatedWorkload([1e-3] * 1024, nthread=8)
    pol = attrs.evolve(balanced(), candidates=chunktune.ExplicitCandidates(sizes=(12,)))
    r = sweep(w, candidate_list(pol.candidates, 1024, 8), pol)
    assert r.choice.chunk_size is None and "no size but native's" in r.choice.reason


def test_at_margin_zero_a_size_that_ties_native_exactly_keeps_native() -> None:
    """margin 0, a candidate exactly as fast as native, no noise: native, not a crash."""
    w = SimulatedWorkload([1e-3] * 64, nthread=32, dispatch_s=0.0)  # native 1 and 2 tie
    pol = attrs.evolve(
        balanced(), margin=0.0, candidates=chunktune.ExplicitCandidates(sizes=(2,)),
        refine_steps=0,
    )  # fmt: skip
    r = sweep(w, candidate_list(pol.candidates, 64, 32), pol)
    assert r.choice.chunk_size is None and "no candidate measured faster" in r.choice.reason


def test_the_older_tuner_s_schedule_measures_native_once_however_short_the_budget() -> None:
    """seed's schedule, a budget under one call: native still gets its one sample."""
    w = SimulatedWorkload([1e-3] * 1024, nthread=8, dispatch_s=0.0)
    seed = load_settings().get_policy("seed")
    pol = attrs.evolve(seed, time_budget_s=0.5 * w.true_time(None))
    r = sweep(w, candidate_list(pol.candidates, 1024, 8), pol)
    assert r.partial and list(r.estimates) == [None] and r.choice.chunk_size is None


def test_the_older_tuner_s_schedule_reports_the_gain_of_what_it_chose() -> None:
    """seed's schedule choosing a size other than native's: gain is 1 - its estimate/native's."""
    seed = load_settings().get_policy("seed")
    w = blocked(sigma=0.0)
    r = sweep(w, candidate_list(seed.candidates, 1024, 16), seed)
    chosen = r.choice.chunk_size
    assert chosen is not None and chosen != native_chunk(1024, 16)
    assert r.gain == pytest.approx(1.0 - r.estimates[chosen] / r.estimates[None])
    assert r.gain > 0.0


def test_native_is_measured_first_when_the_list_does_not_name_it() -> None:
    """Candidates without None: native still runs first, so a short budget still measures it."""
    w = SimulatedWorkload([1e-3] * 1024, nthread=8, dispatch_s=0.0)
    pol = attrs.evolve(load_settings().get_policy("seed"), time_budget_s=0.5 * w.true_time(None))
    r = sweep(w, [4, 16], pol)
    assert w.history[0][0] is None
    assert list(r.estimates) == [None] and r.choice.chunk_size is None


def test_the_older_tuner_choosing_native_s_own_size_reports_no_gain() -> None:
    """seed's grid holds native's size: chosen, it is native's schedule, so gain 0."""
    seed = load_settings().get_policy("seed")
    for s in range(20):  # some noise draw makes native's size look faster than native
        w = SimulatedWorkload([1e-3] * 2, nthread=1, noise=Noise(sigma=0.1), seed=s)
        r = sweep(w, candidate_list(seed.candidates, 2, 1), attrs.evolve(seed, seed=s))
        if r.choice.chunk_size == 1:  # native's own size (native chunk of 2 envs, 1 thread)
            assert r.gain == 0.0 and "no gain" in r.choice.reason
            return
    pytest.fail("no draw chose native's own size")


def test_a_stretching_policy_does_not_time_native_again_past_its_cap() -> None:
    """patient-like, one call of 0.69 s against a cap of 0.9 s: one call, no second past it."""
    w = SimulatedWorkload.from_layout("blocked", num_envs=1024, nthread=16, mean_s=0.01)
    pol = attrs.evolve(balanced(), time_budget_s=0.5, extend_budget=True, hard_limit_s=1.0)
    r = sweep(w, candidate_list(pol.candidates, 1024, 16), pol)
    assert r.stop == "too_slow" and w.calls == 1
    assert "the budget was extended" not in r.choice.reason  # it never was


def test_a_reason_that_no_size_beat_native_speaks_of_the_sizes_left_in_the_race() -> None:
    """Sizes raced out early may have looked faster then: the reason names those that stayed."""
    w = SimulatedWorkload.from_layout(
        "uniform", num_envs=256, nthread=2, noise=Noise(sigma=0.15), seed=28
    )
    pol = attrs.evolve(balanced(), seed=28)
    r = sweep(w, candidate_list(pol.candidates, 256, 2), pol)
    assert r.choice.chunk_size is None and r.raced_out
    assert "no candidate left in the race measured faster than native" in r.choice.reason


@pytest.mark.parametrize(
    ("name", "strategy"),
    [
        pytest.param("balanced", None, id="balanced"),
        pytest.param("thorough", None, id="thorough"),
        pytest.param("seed", None, id="seed"),
        pytest.param("patient", None, id="patient"),
        pytest.param("balanced", GeometricCandidates(), id="geometric"),
        pytest.param("thorough", ExhaustiveCandidates(max_candidates=8), id="exhaustive"),
    ],
)
def test_a_resolve_runs_only_sizes_that_may_probe_names(
    name: str, strategy: CandidateStrategy | None
) -> None:
    """Every size a resolve runs, refinements and confirmation included, is in may_probe."""
    policy = load_settings().get_policy(name)
    if strategy is not None:
        policy = attrs.evolve(policy, candidates=strategy)
    for layout, n, t in (("blocked", 256, 2), ("variants", 1000, 8), ("uniform", 97, 3)):
        for seed in range(2):
            w = SimulatedWorkload.from_layout(
                layout, num_envs=n, nthread=t, noise=Noise(sigma=0.03), seed=seed
            )
            chunktune.resolve_sync(w, policy=attrs.evolve(policy, seed=seed))
            ran = {native_chunk(n, t) if c is None else c for c, _ in w.history}
            assert ran <= set(may_probe(policy, n, t)), (layout, seed)


class Quarters(CountedCalls):
    """Every call a modeled 0.25 s, a binary fraction: the calls' sum lands exactly on a budget."""

    num_envs, nthread = 64, 2

    def __init__(self) -> None:
        self._forget_calls()

    def signature(self) -> dict[str, str]:
        return {"kind": "quarters"}

    def run(self, chunk_size: int | None) -> float:
        return self._counted(chunk_size, 0.25)


def test_a_budget_spent_exactly_ends_the_sweep_there() -> None:
    """A call that brings the clock exactly to time_budget_s ends the sweep: no call past it."""
    w = Quarters()
    seed = load_settings().get_policy("seed")  # 2 warm-ups, then repetitions
    r = sweep(w, [4, 8], attrs.evolve(seed, time_budget_s=1.0))
    assert (w.calls, r.counts(), r.stop) == (4, {None: 2}, "budget")


def test_the_older_tuner_s_schedule_counts_the_rounds_of_its_longest_candidate() -> None:
    """A budget ending in the second candidate's repetitions: rounds is native's 20, not its 4."""
    w = Quarters()
    events: list[ProgressEvent] = []
    seed = attrs.evolve(load_settings().get_policy("seed"), time_budget_s=7.0)
    r = sweep(w, [4, 8], seed, on_event=events.append)
    assert (r.counts(), r.stop) == ({None: 20, 4: 4}, "budget")
    assert r.rounds == 20 and events[-1].round == 20


def test_events_tell_the_time_on_the_sweep_s_clock() -> None:
    """Each event's elapsed_s is the sweep's clock since its start, not the seconds run() said."""
    w = Quarters()
    events: list[ProgressEvent] = []
    seed = attrs.evolve(load_settings().get_policy("seed"), min_rounds=2, max_rounds=2)
    sweep(w, [4], seed, on_event=events.append, clock=lambda: 100.0 + 3.0 * w.calls)
    timed = [(e.kind, e.elapsed_s) for e in events if e.seconds is not None]
    assert timed == [
        ("warmup", 3.0), ("warmup", 6.0), ("probe", 9.0), ("probe", 12.0),
        ("warmup", 15.0), ("warmup", 18.0), ("probe", 21.0), ("probe", 24.0),
    ]  # fmt: skip


def test_a_bad_return_names_the_size_that_gave_it() -> None:
    """run() fine for native but not for a candidate: the error names that candidate's call."""

    class BadAtFour:
        num_envs, nthread = 64, 2

        def signature(self) -> dict[str, str]:
            return {}

        def run(self, chunk_size: int | None) -> object:
            return "0.5 s" if chunk_size == 4 else 0.01

    with pytest.raises(WorkloadError, match=r"run\(4\) returned '0\.5 s'"):
        sweep(BadAtFour(), [None, 4], balanced())  # type: ignore[arg-type]


def test_a_policy_measuring_in_a_row_may_probe_no_refinement() -> None:
    """Sizes measured in a row are never refined: may_probe is native's size and the proposals."""
    pol = attrs.evolve(
        balanced(), interleave=False, race=False, paired=False, confirm=False, noise_gate=False
    )
    assert pol.refine_steps and pol.candidates.refinable
    proposed = pol.candidates.propose(256, 2)
    assert may_probe(pol, 256, 2) == sorted({native_chunk(256, 2), *proposed})


class _Scripted:
    """A workload whose calls take the seconds given, in turn, per chunk size (wall clock)."""

    def __init__(self, times: dict[int | None, list[float]]) -> None:
        self.num_envs, self.nthread = 64, 2
        self._times = {c: itertools.cycle(ts) for c, ts in times.items()}

    def run(self, chunk_size: int | None) -> float:
        return next(self._times[chunk_size])

    def signature(self) -> dict[str, SignatureValue]:
        return {}


def test_the_older_tuner_s_schedule_weighs_a_gain_against_the_noise_when_asked() -> None:
    """In a row, with confidence_z: a gain past the margin but inside the noise keeps native."""
    assert native_chunk(64, 2) != 2
    noisy = [1.0, 1.4, 0.7]  # the candidate's times are 10% less, as noisy
    w = _Scripted({None: noisy, 2: [0.9 * t for t in noisy]})
    seed = attrs.evolve(load_settings().get_policy("seed"), time_budget_s=3600.0)
    assert sweep(w, [2], seed).choice.chunk_size == 2  # no noise test: the gain clears the margin
    careful = attrs.evolve(seed, confidence_z=3.0)
    r = sweep(_Scripted({None: noisy, 2: [0.9 * t for t in noisy]}), [2], careful)
    assert r.choice.chunk_size is None and "±" in r.choice.reason


def test_a_policy_that_never_measures_may_probe_no_size() -> None:
    """A disabled policy runs nothing: may_probe is empty, not native's size and the proposals."""
    assert may_probe(attrs.evolve(balanced(), enabled=False), 1024, 16) == []


def test_a_sweep_s_probe_seconds_are_every_call_s_seconds_summed() -> None:
    """probe_seconds adds up the seconds of every run() call, warm-ups and priming included."""
    w = blocked()
    r = sweep(w, [4, 16, 64], load_settings().get_policy("seed"))
    assert len(w.history) > 3
    assert r.probe_seconds == pytest.approx(sum(s for _, s in w.history))


def test_a_tie_toward_upper_between_sizes_as_near_ceil_n_over_t_takes_the_smaller() -> None:
    """Sizes 31 and 33 tie, equally near 64 envs' ceil(N/T) of 32 on 2 threads: the smaller wins."""
    seed = attrs.evolve(
        load_settings().get_policy("seed"), time_budget_s=3600.0, tie_break="toward_upper"
    )
    r = sweep(_Scripted({None: [1.0], 31: [0.5], 33: [0.5]}), [31, 33], seed)
    assert r.choice.chunk_size == 31


def test_a_sweep_of_short_calls_gated_by_its_pair_cap_says_so_not_the_budget() -> None:
    """160 us calls at 5% noise: 10 s pays for thousands of pairs; the reason names the cap."""
    w = SimulatedWorkload([5e-6] * 64, nthread=2, dispatch_s=2e-8, noise=Noise(sigma=0.05))
    policy = load_settings().get_policy("balanced")
    result = sweep(w, policy.candidates.propose(64, 2), policy)
    assert result.stop == "noisy" and result.elapsed_s < 0.1 * policy.time_budget_s
    assert result.choice.reason.endswith(
        "confirm_max_pairs allows 64 (what is left of the budget would pay for more)"
    )
