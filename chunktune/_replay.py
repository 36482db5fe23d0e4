"""Replaying a recorded real landscape as a Workload.

A trace holds ``R`` rounds of every chunk size, so each recorded call is, in logs,

    log t[c, r] = mu[c] + rho[r] + e[c, r]

the size's own cost ``mu``, the machine's level during round ``r`` (``rho``: a
neighbour's burst, a frequency change) and the call's own noise ``e``. The level
of each round is the median, over every size, of that round's calls against each
size's median: with dozens of sizes per round it is pinned down far more tightly
than any one size's cost.

The noise ``e`` itself has a memory: on this project's 2-core VM neighbouring calls
share about half of it (lag-1 correlation 0.4-0.55, about 0.2 at lag 3, gone by lag 5;
0.1-0.55 at lag 1 on 4-16 cores). Where the trace records the order the calls ran in,
each round's residuals ``e[c, r]`` (less each size's mean) are kept in that order.

**Replay.** The replayed machine starts at a random call of a random recorded round,
walks through that round's calls, one at a time, and then on to a random recorded
round. A probe of size ``c`` at the ``k``-th
call of recorded round ``s`` takes that call's noise, in multiples of the spread of
the size that made it, at ``c``'s own spread ``sd[c]``:
``true_time(c) * exp(rho[s] + sd[c] * e[c', s] / sd[c'])``, where ``c'`` ran ``k``-th
in round ``s``. So the replayed noise is the recorded sequence itself: calls next to
each other share as much of it as the recorded ones did and forget it as fast, and
each size keeps its own spread (shrunk toward the others' by what sampling explains).
An earlier replay moved each size's own recorded calls into a machine state smoothed
over 7 calls and shared alike by every size; re-recorded through it, the traces
remembered too long (lag 3 on the 2-core traces: 0.12-0.37 against the recorded
0.07-0.27) and alternating N W N W looked no better than N W W N, where the recorded
2-core noise gives the alternation 5-35% less variance. Nor is the state shared
alike: in the recordings the noise two neighbouring calls share grows with the
product of their sizes' spreads (a size that synchronises more feels the same burst
more). ``benchmarks/replay_fidelity.py`` sets a re-recording beside the recording.
Without the order (a trace written by hand) a probe is one of ``c``'s recorded calls,
moved from its round's level to the current one, and the machine moves to a random
recorded round with probability ``1/sizes`` after each call.

**Truth.** ``true_time(c)`` is the geometric mean of ``c``'s recorded calls, each
moved from the machine state it ran in to the mean level:
``exp(mean over r of (log t[c, r] - rho[r] - m[r, k(c, r)]))``, where the short-lived
state ``m[r, k]`` is the centered moving average of round ``r``'s residuals over the
7 calls around position ``k``. A replay of ``c`` draws around exactly that (the
recorded noise averages 0 over every call, and the walk visits every call alike), so
within the replayed world scores are exact. Taking the short-lived state out as well
as the round's level makes the truth tighter and fair to a size whose calls happened
to run in slow stretches (on one recording native's calls fell in stretches 9% slower
than the average call, and a truth with the round's level alone scored it 8% slow). It
is a mean over all ``R`` rounds, never a minimum, so one lucky call does not make a
size look fast. The one bias left is selection: the best of many sizes, each known to
``sigma / sqrt(R)``, is likely one whose mean came out low. :meth:`offered_gain`
measures that by splitting the rounds in halves: the best size picked on one
half is scored on the other.
"""

from __future__ import annotations

import hashlib
import math
import os
from collections.abc import Iterable
from contextvars import ContextVar
from typing import Any, Self

import numpy as np
import numpy.typing as npt

from ._counts import check_chunk_size, check_count, check_seed, native_chunk
from ._errors import InvalidArgumentError
from ._modeled import CountedCalls
from ._policy import Policy, given_policy
from ._returned import SignatureValue
from ._shown import shown_one, shown_path, type_named
from ._sweep import may_probe
from ._trace import Trace, load_trace, trace_from_dict

__all__ = [
    "ReplayWorkload",
    "decompose",
    "own_calls",
    "sizes_text",
    "standardized_noise",
    "without_machine_state",
]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.intp]


# the Trace that ReplayWorkload.from_file is handing to __init__, checked by load_trace
# (a context variable: another thread's or task's from_file hands its own)
_loaded: ContextVar[Trace | None] = ContextVar("chunktune_loaded_trace", default=None)

_STATE_WINDOW = 7  # calls averaged into the machine's short-lived state
_RUNS_SHOWN = 8  # runs of sizes a message lists before it only counts the rest


def sizes_text(sizes: Iterable[int]) -> str:
    """Chunk sizes for a message, runs joined: ``"1..16"``, ``"2, 4, 8..10"``; long lists cut."""
    runs: list[list[int]] = []
    for c in sorted(set(sizes)):
        if runs and c == runs[-1][1] + 1:
            runs[-1][1] = c
        else:
            runs.append([c, c])
    parts = [str(a) if a == b else f"{a}, {b}" if b == a + 1 else f"{a}..{b}" for a, b in runs]
    if len(parts) <= _RUNS_SHOWN:
        return ", ".join(parts)
    count = sum(b - a + 1 for a, b in runs)
    return f"{', '.join(parts[:_RUNS_SHOWN])}, ... ({count} sizes)"


def without_machine_state(
    residuals: FloatArray, order: tuple[tuple[int, ...], ...], sizes: list[int]
) -> FloatArray:
    """Each call's residual less the round's short-lived machine state when it ran.

    ``residuals[size, round]`` are the level-free calls less each size's mean. The
    state at the ``k``-th call of a round is the centered moving average of the
    round's residuals, in the order its calls ran, over the calls around it.
    """
    return _without_state(residuals, _call_rows(order, sizes))


def _call_rows(order: tuple[tuple[int, ...], ...], sizes: list[int]) -> IntArray:
    """``rows[round, k]``: the size row of the ``k``-th call of each round."""
    index = {c: i for i, c in enumerate(sizes)}
    return np.array([[index[c] for c in calls] for calls in order], dtype=np.intp)


def _without_state(residuals: FloatArray, rows: IntArray) -> FloatArray:
    """:func:`without_machine_state` with the order given as :func:`_call_rows`."""
    rounds = np.arange(rows.shape[0])[:, None]
    seq = residuals[rows, rounds]  # seq[round, k]: the k-th call's residual
    n = seq.shape[1]
    sums = np.concatenate((np.zeros((seq.shape[0], 1)), np.cumsum(seq, axis=1)), axis=1)
    half = _STATE_WINDOW // 2
    lo = np.clip(np.arange(n) - half, 0, n)
    hi = np.clip(np.arange(n) + half + 1, 0, n)
    states = (sums[:, hi] - sums[:, lo]) / (hi - lo)
    own = residuals.copy()
    own[rows, rounds] -= states
    return own


def own_calls(logs: FloatArray, rows: IntArray | None) -> FloatArray:
    """Each recorded call's log seconds with the machine's state when it ran taken out.

    ``logs[size, round]``; ``rows`` (:func:`_call_rows`) the order the calls ran in,
    or None without it (then the round's level alone is taken out). Computed from
    these rounds alone: the mean over rounds of a size's row is the log of its truth.
    """
    _, adjusted = decompose(logs)
    if rows is None:
        return adjusted
    residuals: FloatArray = adjusted - adjusted.mean(axis=1, keepdims=True)
    own: FloatArray = adjusted - residuals + _without_state(residuals, rows)
    return own


def standardized_noise(
    residuals: FloatArray, order: tuple[tuple[int, ...], ...], sizes: list[int]
) -> tuple[FloatArray, FloatArray]:
    """Each round's calls, in the order they ran, as multiples of their size's spread.

    ``residuals[size, round]`` are the level-free calls less each size's mean.
    Returns ``(spread, noise)``: ``noise[round, k]``, the ``k``-th call's residual
    over its size's standard deviation (0 for a size that never varied);
    ``spread[size]``, that standard deviation with its sampling error shrunk out.
    A standard deviation from ``R`` calls is itself off by about ``1/sqrt(2R)`` (13%
    at 30 rounds), and a replay that scaled the machine's state by it would swing a
    size that merely looked noisier further than its neighbours in every slow or
    fast stretch, inventing a gain: so each size's log spread is pulled toward
    their mean by the share of their scatter that sampling explains.
    """
    spread = residuals.std(axis=1)
    safe = np.where(spread > 0, spread, 1.0)
    standardized = np.where(spread[:, None] > 0, residuals / safe[:, None], 0.0)
    index = {c: i for i, c in enumerate(sizes)}
    noise = np.array([[standardized[index[c], r] for c in calls] for r, calls in enumerate(order)])
    varied = spread > 0
    if varied.sum() >= 2 and residuals.shape[1] >= 2:
        logs = np.log(spread[varied])
        scatter = float(logs.var())
        sampling = 1.0 / (2.0 * (residuals.shape[1] - 1))
        weight = max(0.0, 1.0 - sampling / scatter) if scatter > 0 else 0.0
        spread = spread.copy()
        spread[varied] = np.exp(logs.mean() + weight * (logs - logs.mean()))
    return spread, noise


def decompose(logs: FloatArray) -> tuple[FloatArray, FloatArray]:
    """Split ``logs[size, round]`` into each round's level and each size's level-free values.

    Returns ``(rho, adjusted)``: ``rho[r]`` the median over sizes of round ``r``'s
    calls against each size's median (centered to mean 0), and
    ``adjusted = logs - rho``.
    """
    centered = logs - np.median(logs, axis=1, keepdims=True)
    rho = np.median(centered, axis=0)
    rho = rho - rho.mean()
    return rho, logs - rho[None, :]


class ReplayWorkload(CountedCalls):
    """A :class:`chunktune.Workload` that replays a recorded trace (see the module docstring).

    ``seed`` seeds the replay's draws and state changes. Sizes that were not
    recorded cannot be replayed: a trace recorded with ``--sizes`` replays a policy
    only if it holds every size the policy may probe (:meth:`unrecorded`).

    Raises:
        InvalidArgumentError: ``trace`` is not a :class:`Trace` (a path, say: use
            :meth:`from_file`), or ``seed`` is not an integer >= 0.
        TraceError: the trace breaks a rule a trace file is held to (the message names
            the field), as :func:`~chunktune.sim.load_trace` says.
    """

    def __init__(self, trace: Trace, *, seed: int = 0, name: str = "") -> None:
        if not isinstance(trace, Trace):
            raise InvalidArgumentError(
                f"trace must be a chunktune.sim.Trace, got {shown_one(trace)} "
                f"({type_named(trace)}); replay a file with ReplayWorkload.from_file(path)"
            )
        seed = check_seed(seed)
        if _loaded.get() is not trace:
            # a Trace built in code gets every check a trace file gets (a time that is not
            # positive, a size past ceil(N/T), rounds of unequal length); one from_file
            # just loaded has had them (checked again, a 13 MiB trace took as long again)
            # a description names the model's file, which may hold a newline
            where = f"trace {shown_path(name or trace.description)}"
            trace = trace_from_dict(trace.to_dict(), where=where)
        self.trace = trace
        self.num_envs = trace.num_envs
        self.nthread = trace.nthread
        self.seed = seed
        self.name = name or trace.description or "trace"
        self.sizes = sorted(trace.samples)
        # signature()'s rows and hash, made at its first call: (size, seconds) by size
        self._signed: tuple[tuple[tuple[int, tuple[float, ...]], ...], str] | None = None
        self._index = {c: i for i, c in enumerate(self.sizes)}
        logs = np.log(np.array([trace.samples[c] for c in self.sizes], dtype=float))
        self._rho, adjusted = decompose(logs)
        self._switch = 1.0 / len(self.sizes)
        # the state each recorded call ran in: round level plus, with the order, the
        # short-lived state; taken out of each call, what is left is the size's own
        self._recorded_in = np.broadcast_to(self._rho, adjusted.shape).copy()
        complete = len(trace.order) == trace.rounds and all(
            sorted(r) == self.sizes for r in trace.order
        )
        self._noise: FloatArray | None = None  # the recorded noise, walked through
        self._spread = np.zeros(len(self.sizes))
        self._logs = logs
        self._rows = _call_rows(trace.order, self.sizes) if complete else None
        if self._rows is not None:
            residuals = adjusted - adjusted.mean(axis=1, keepdims=True)
            own = _without_state(residuals, self._rows)
            self._recorded_in += residuals - own
            self._spread, self._noise = standardized_noise(residuals, trace.order, self.sizes)
        # each recorded call with the machine's state when it ran taken out: what a replayed
        # call of that size is drawn around, so the truth is the mean of these
        self._own = logs - self._recorded_in
        self._truth = np.exp(self._own.mean(axis=1))
        self.reset()

    @classmethod
    def from_file(cls, path: str | os.PathLike[str], *, seed: int = 0, name: str = "") -> Self:
        """Replay the trace in ``path``.

        Raises:
            TraceError: the file is missing, not JSON, or malformed.
        """
        trace = load_trace(path)  # first: it says what is wrong with ``path``
        # handed to __init__ as checked: nothing else holds it, so nothing changed it since
        token = _loaded.set(trace)
        try:
            return cls(trace, seed=seed, name=name or os.path.basename(path))
        finally:
            _loaded.reset(token)

    def reset(self) -> None:
        """Restart the replay from its seed."""
        self._rng = np.random.default_rng(self.seed)
        self._state = int(self._rng.integers(self.trace.rounds))
        # anywhere in that round: a start at its first call would leave an R-round trace
        # R openings, whatever the seed (two seeds of one round: the same first calls)
        self._position = 0 if self._noise is None else int(self._rng.integers(self._noise.shape[1]))
        self._forget_calls()

    @property
    def call_in_round(self) -> int:
        """Calls the walk has made in the recorded round it is in: 0 when the next call opens
        a round (always, for a trace without its calls' order, whose walk has no calls)."""
        return self._position

    def _advance(self) -> None:
        if self._noise is None:
            if self._rng.random() < self._switch:
                self._state = int(self._rng.integers(self.trace.rounds))
            return
        self._position += 1
        if self._position == self._noise.shape[1]:
            self._state, self._position = int(self._rng.integers(self.trace.rounds)), 0

    def __repr__(self) -> str:
        return (
            f"ReplayWorkload(name={self.name!r}, num_envs={self.num_envs}, "
            f"nthread={self.nthread}, rounds={self.trace.rounds}, seed={self.seed})"
        )

    def signature(self) -> dict[str, SignatureValue]:
        """The trace's content hash: replays of one trace share a key, others do not."""
        samples = self.trace.samples
        signed = self._signed
        # the hash of a 13 MiB trace's text took 0.5 s, nearly all of a resolve, each
        # resolve: kept while the trace holds the very tuples it was made of (a tuple of
        # seconds cannot change; samples[c] set anew, or trace replaced, hashes again)
        if signed is None or not _same_rows(signed[0], samples):
            rows = tuple(sorted(samples.items()))
            digest = hashlib.sha256(repr(list(rows)).encode()).hexdigest()[:16]
            signed = (rows, digest)
            if all(type(row) is tuple for _, row in rows):  # a list could change in place
                self._signed = signed
        return {"kind": "replay", "trace_sha": signed[1]}

    def _row(self, chunk_size: int | None) -> int:
        chunk = (
            native_chunk(self.num_envs, self.nthread)
            if chunk_size is None
            else check_chunk_size(chunk_size)
        )
        row = self._index.get(chunk)
        if row is None:
            raise InvalidArgumentError(
                f"chunk size {chunk} was not recorded in this trace (recorded: "
                f"{sizes_text(self.sizes)}); it replays only a policy that probes recorded "
                "sizes alone (ReplayWorkload.unrecorded(policy) names the others)"
            )
        return row

    def unrecorded(self, policy: Policy) -> list[int]:
        """The chunk sizes ``policy`` may probe on this batch that the trace did not record.

        Empty when the trace replays the policy whatever it measures. A policy that
        probes one of these fails mid-sweep, and its resolve falls back to native.

        Raises:
            InvalidArgumentError: ``policy`` is not a :class:`chunktune.Policy` (a name, say).
        """
        probed = may_probe(given_policy(policy, "unrecorded()"), self.num_envs, self.nthread)
        return [c for c in probed if c not in self._index]

    def run(self, chunk_size: int | None) -> float:
        """One replayed call: this size at the current point of the walk through the recorded noise.

        Raises:
            InvalidArgumentError: the size was not recorded.
        """
        row = self._row(chunk_size)
        level = float(self._rho[self._state])
        if self._noise is None:  # a recorded call of this size, moved to this round's level
            r = int(self._rng.integers(self.trace.rounds))
            recorded = float(np.log(self.trace.samples[self.sizes[row]][r]))
            seconds = math.exp(recorded - self._recorded_in[row, r] + level)
        else:  # the recorded noise at this point of the walk, at this size's spread
            noise = float(self._spread[row] * self._noise[self._state, self._position])
            seconds = float(self._truth[row]) * math.exp(level + noise)
        self._advance()
        return self._counted(chunk_size, seconds)

    def true_time(self, chunk_size: int | None) -> float:
        """The size's seconds by the recorded data (geometric mean, the machine's state removed).

        Raises:
            InvalidArgumentError: the size was not recorded.
        """
        return float(self._truth[self._row(chunk_size)])

    def truth_error(self, chunk_size: int | None) -> float:
        """The standard error of ``true_time(c) / true_time(None)``, as a fraction.

        From the recorded rounds: the spread over rounds of the size's log ratio to
        native in the same round (each call with the machine's state taken out, as in
        the truth), over ``sqrt(R)``. A choice scored slower than native by less than
        about twice this is within the truth's own noise. NaN for a trace of one round,
        whose spread over rounds is unknown.
        """
        row, native = self._row(chunk_size), self._row(None)
        if row == native:
            return 0.0
        ratios = self._own[row] - self._own[native]
        if ratios.size < 2:  # numpy would warn of no degrees of freedom, then say NaN
            return math.nan
        return float(np.std(ratios, ddof=1) / math.sqrt(ratios.size))

    def landscape(self) -> dict[int, float]:
        """The true seconds of every recorded size."""
        return {c: float(self._truth[i]) for i, c in enumerate(self.sizes)}

    def oracle(self) -> tuple[int, float]:
        """The recorded size with the smallest true seconds, and those seconds."""
        i = int(np.argmin(self._truth))
        return self.sizes[i], float(self._truth[i])

    def regret(self, chunk_size: int | None) -> float:
        """How much slower ``chunk_size`` is than the oracle, by the trace's truth."""
        return self.true_time(chunk_size) / self.oracle()[1] - 1.0

    def offered_gain(self, splits: int = 200) -> tuple[float, float]:
        """The gain on offer over native, in-sample and held out: ``(apparent, held_out)``.

        ``apparent`` is ``1 - oracle / native`` by the truth. ``held_out`` picks the
        best size on a random half of the rounds and scores it on the other half,
        averaged over ``splits`` random halves: what the best size really gives,
        without the luck that made it look best. Their difference is the part of
        the apparent gain that is noise in the recorded truth itself. Each half's
        truth is the one a replay of that half alone has (:func:`own_calls` on its
        rounds): the whole trace's takes out a machine state averaged with each
        call's own size's mean over every round, so a size's luck on the picking
        half would reach its score on the other. ``held_out`` is NaN for a trace of fewer
        than 4 rounds, whose halves hold fewer than two rounds each.

        Raises:
            InvalidArgumentError: ``splits`` is not an integer >= 1.
        """
        splits = check_count(splits, what="splits")
        native_row = self._row(None)
        apparent = 1.0 - float(self._truth.min() / self._truth[native_row])
        rounds = self.trace.rounds
        if rounds < 4:
            return apparent, math.nan
        rng = np.random.default_rng(12345)
        gains = []
        for _ in range(splits):
            perm = rng.permutation(rounds)
            a, b = perm[: rounds // 2], perm[rounds // 2 :]
            picking, scoring = (
                own_calls(self._logs[:, half], None if self._rows is None else self._rows[half])
                for half in (a, b)
            )
            pick = int(np.argmin(picking.mean(axis=1)))
            held = scoring.mean(axis=1)
            gains.append(1.0 - math.exp(held[pick] - held[native_row]))
        return apparent, float(np.mean(gains))


def _same_rows(rows: tuple[tuple[int, tuple[float, ...]], ...], samples: dict[int, Any]) -> bool:
    """Whether ``samples`` holds exactly ``rows``, each the very object it was."""
    return len(rows) == len(samples) and all(samples.get(c) is row for c, row in rows)
