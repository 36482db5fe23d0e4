"""The policy record: how a sweep measures and how its winner is chosen.

An invalid ``Policy`` cannot exist: every field has a validator, and cross-field
rules run in ``__attrs_post_init__``. Nothing here touches files or imports the sweep;
the settings that hold every known policy are ``_settings``'.

A policy's identity (what its cache entries are keyed by) is declared on its
fields, not derived from its TOML form: each field's metadata says whether it is
part of the selection rule (``rule``), and whether it stays out of the identity
because it changes neither what a sweep measures nor what it picks (``identity``
False: the description, the on/off switch and the time limits).
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable, Mapping
from typing import Any, ClassVar, Literal, get_args

import attrs

from ._candidates import STRATEGIES, BalancedCandidates, CandidateStrategy
from ._errors import ConfigError, InvalidArgumentError
from ._policy_notes import names_noted, note_of, notes_now
from ._shown import bound, shown_one, spelled, type_named
from ._validators import boolean, choice, integer, number, plain_numbers, refused, text

__all__ = [
    "ESTIMATORS",
    "EXTEND_SHARE",
    "MAX_LIMIT_S",
    "ONE_SIDED_ESTIMATORS",
    "TIE_BREAKS",
    "Estimator",
    "Policy",
    "TieBreak",
    "given_policy",
]

Estimator = Literal["min", "median", "trimmed_mean", "lower_mean", "mean"]
"""How a candidate's samples become one figure (``_stats.estimate``)."""
TieBreak = Literal["evidence", "center", "toward_upper", "toward_native", "smallest"]
"""How one chunk is picked among ties (``_select.pick``)."""

ESTIMATORS: tuple[Estimator, ...] = get_args(Estimator)
TIE_BREAKS: tuple[TieBreak, ...] = get_args(TieBreak)
# estimators of one side of a size's values: where load only adds time, each size's
# own seconds; of differences between two sizes' calls they measure no gain
ONE_SIDED_ESTIMATORS: tuple[Estimator, ...] = ("min", "lower_mean")

MAX_LIMIT_S = 1e6
"""The most seconds a budget, limit or wait may be (11.6 days): past it, no limit at all."""
EXTEND_SHARE = 0.9
"""An extended sweep ends by this share of ``hard_limit_s``, which ends the flight itself
(counted from the resolve's start: a sweep that began after waits has that much less)."""

# Field metadata of Policy (see the module docstring).
_RULE = {"rule": True}
_NOT_IDENTITY = {"identity": False}


def _is_strategy(inst: Any, attr: attrs.Attribute[Any], value: Any) -> None:
    if not isinstance(value, tuple(STRATEGIES.values())):
        raise refused(
            inst,
            f"{shown_one(value)} is not valid for {attr.name}; expected a candidate strategy "
            f"({', '.join(STRATEGIES)})",
        )


@attrs.frozen(kw_only=True, field_transformer=plain_numbers)
class Policy:
    """How a sweep measures and how its winner is chosen.

    Times are in seconds. ``margin``, ``tie_tol``, ``trim``, ``confirm_alpha`` and
    ``confirm_share`` are fractions (0.03 = 3%). Every default is the ``balanced``
    preset's, so a policy written without ``extends`` starts from the default policy (a
    test holds them equal).
    """

    # built in code, a bad field is the policy's ("invalid policy: ..."), not a file's
    _invalid_as: ClassVar[str] = "policy"
    description: str = attrs.field(default="", validator=text(), metadata=_NOT_IDENTITY)
    enabled: bool = attrs.field(default=True, validator=boolean(), metadata=_NOT_IDENTITY)
    # selection
    margin: float = attrs.field(
        default=0.01, validator=number(0.0, 1.0, hi_open=True, fraction=True), metadata=_RULE
    )
    tie_tol: float = attrs.field(
        default=0.01, validator=number(0.0, 1.0, hi_open=True, fraction=True), metadata=_RULE
    )
    tie_break: TieBreak = attrs.field(
        default="evidence", validator=choice(TIE_BREAKS), metadata=_RULE
    )
    confidence_z: float = attrs.field(default=0.0, validator=number(0.0, 10.0), metadata=_RULE)
    tie_z: float = attrs.field(default=1.0, validator=number(0.0, 10.0), metadata=_RULE)
    # measurement
    estimator: Estimator = attrs.field(
        default="trimmed_mean", validator=choice(ESTIMATORS), metadata=_RULE
    )
    trim: float = attrs.field(
        default=0.2, validator=number(0.0, 0.5, hi_open=True, fraction=True), metadata=_RULE
    )
    prime: int = attrs.field(default=1, validator=integer(0, 1000))
    warmup: int = attrs.field(default=0, validator=integer(0, 1000))
    min_rounds: int = attrs.field(default=2, validator=integer(1, 100_000))
    max_rounds: int = attrs.field(default=12, validator=integer(1, 100_000))
    interleave: bool = attrs.field(default=True, validator=boolean())
    paired: bool = attrs.field(default=True, validator=boolean())
    race: bool = attrs.field(default=True, validator=boolean())
    race_z: float = attrs.field(default=2.0, validator=number(0.0, 10.0, lo_open=True))
    early_stop: bool = attrs.field(default=True, validator=boolean())
    # the order of every round: it changes which calls are measured, so it is identity
    seed: int = attrs.field(default=0, validator=integer(0, 2**63 - 1))
    # refinement in chunk-count space
    refine_steps: int = attrs.field(default=3, validator=integer(0, 1000))
    refine_top: int = attrs.field(default=2, validator=integer(1, 1000))
    # confirmation against native, and the noise gate
    confirm: bool = attrs.field(default=True, validator=boolean(), metadata=_RULE)
    confirm_alpha: float = attrs.field(
        default=0.05,
        validator=number(0.0, 0.5, lo_open=True, hi_open=True, fraction=True),
        metadata=_RULE,
    )
    confirm_min_pairs: int = attrs.field(default=4, validator=integer(2, 100_000))
    confirm_max_pairs: int = attrs.field(default=64, validator=integer(2, 100_000))
    confirm_share: float = attrs.field(default=0.5, validator=number(0.0, 0.9, fraction=True))
    noise_gate: bool = attrs.field(default=True, validator=boolean())
    # limits
    time_budget_s: float = attrs.field(
        default=10.0, validator=number(0.0, MAX_LIMIT_S, lo_open=True), metadata=_NOT_IDENTITY
    )
    # inf is no limit, as unset is (held as None): TOML has no null, and a policy that
    # extends one with a limit (patient's 40 s) has no other way to drop it
    hard_limit_s: float | None = attrs.field(
        default=None,
        validator=number(0.0, MAX_LIMIT_S, lo_open=True, optional=True, unlimited=True),
        metadata=_NOT_IDENTITY,
    )
    # past time_budget_s, up to nine tenths of hard_limit_s, where that is what a
    # confirmation of a plausible gain (or judging one candidate) takes
    extend_budget: bool = attrs.field(default=False, validator=boolean(), metadata=_NOT_IDENTITY)
    candidates: CandidateStrategy = attrs.field(factory=BalancedCandidates, validator=_is_strategy)

    def __attrs_post_init__(self) -> None:
        said = _Said(notes_now())
        # every rule broken, not just the first
        problems = [p for rule in _CROSS_FIELD_RULES if (p := rule(self, said)) is not None]
        if problems:
            raise ConfigError(problems, subject=self._invalid_as)
        if self.hard_limit_s == math.inf:
            # after the rules, which name the inf written; then held as a policy that never
            # set a limit holds it, so the two show, dump and compare alike
            object.__setattr__(self, "hard_limit_s", None)

    def measurement_fields(self) -> dict[str, Any]:
        """The fields that change what a sweep measures or picks, by name, as JSON values.

        Every field but those declared outside the identity (``description``,
        ``enabled``, ``time_budget_s``, ``hard_limit_s``, ``extend_budget``); the
        candidate strategy as a table of its fields plus ``strategy``, its name. Unset (None) fields
        are left out, tuples become lists, and numbers are as the fields hold them (a
        float field holds a float, however it was given).
        """
        return _identity(self)

    def effort(self) -> int:
        """Probes the policy may spend per sweep at most: (candidates + native) x max_rounds,
        and the confirmation's calls (two a pair, ``confirm_max_pairs`` pairs) when it confirms.

        A result answers requests of policies of lesser effort (and the same rule): one
        confirmed on 2 pairs must not answer a request that would have asked for 64.
        """
        cap = getattr(self.candidates, "max_candidates", None)
        if cap is None:
            cap = len(getattr(self.candidates, "sizes", ()))
        pairs = 2 * self.confirm_max_pairs if self.confirm else 0
        return (int(cap) + 1) * self.max_rounds + pairs

    def rule(self) -> str:
        """How the winner is picked from measurements; results reuse only across equal rules.

        The fields declared part of the rule, as ``name=value`` joined by ``;``:
        the margin and the noise a gain must clear (``margin``, ``confidence_z``),
        what counts as a tie and which tie wins (``tie_tol``, ``tie_z``,
        ``tie_break``), the figure compared (``estimator``, ``trim``), and the
        proof needed to leave native (``confirm``, ``confirm_alpha``).

        The choice also reads fields left out on purpose, because they set how much
        evidence is gathered, not what it must show, and a result made with more of
        it answers the same question: the rounds and pairs (``min_rounds``,
        ``confirm_min_pairs``, ``confirm_max_pairs``: ``confirm_alpha`` bounds false
        confirmations whatever the number of looks), pairing (``paired``: the same
        ratio, measured more or less precisely), the budget, and the noise gate
        (``noise_gate``: it keeps native only when the budget cannot pay for a
        confirmation). Those enter ``effort()`` and the fingerprint instead.

        The sizes a sweep may pick from are part of the question too: an ``explicit``
        list (``sizes = [3, 7, 11]``) asks which of those, and a result picked from
        ``balanced``'s sizes may name none of them. So a candidate search other than
        ``balanced`` at its defaults adds ``candidates=`` (its strategy and keys, but
        ``max_candidates``, which is effort); ``balanced``'s rule, and every preset's but
        ``seed``'s and ``shared``'s (ten chunks a worker at least), read as they always
        did, so their stored entries keep answering.
        """
        rule = ";".join(
            f"{f.name}={_rule_value(getattr(self, f.name))}"
            for f in attrs.fields(Policy)
            if f.metadata.get("rule", False)
        )
        search = _search(self.candidates)
        return rule if search is None else f"{rule};candidates={search}"

    def fingerprint(self) -> str:
        """A short hash of ``measurement_fields()``: results under equal hashes are comparable.

        The hash of sorted, compact JSON: equal to what versions that derived it
        from the TOML form computed, so their cache entries keep answering.
        """
        blob = json.dumps(self.measurement_fields(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(blob.encode()).hexdigest()[:12]


# ---------------------------------------------------------------- cross-field rules


@attrs.frozen
class _Said:
    """How a broken rule names the values it is about: each with the note of where it
    came from, when a loader noted one (``hard_limit_s 40 (from preset "patient")``)."""

    notes: Mapping[str, str]

    def __call__(self, name: str, value: object) -> str:
        return f"{name} {value}{self.note(name)}"

    def note(self, name: str) -> str:
        return note_of(name, self.notes)


_Rule = Callable[[Policy, _Said], str | None]


def _ordered(low: str, high: str, *, show: Callable[[Any], object] = str) -> _Rule:
    """The rule that field ``high``, where set, is at least field ``low``."""

    def rule(policy: Policy, said: _Said) -> str | None:
        lo, hi = getattr(policy, low), getattr(policy, high)
        if hi is not None and hi < lo:
            return (
                f"{said(high, show(hi))} is below {said(low, show(lo))}; expected {high} >= {low}"
            )
        return None

    return rule


def _rounds_for_round_switches(policy: Policy, said: _Said) -> str | None:
    """Without interleaved rounds, none of the switches that act on them is on."""
    rounds_only = [
        name
        for name in ("race", "paired", "confirm", "noise_gate")
        if not policy.interleave and getattr(policy, name)
    ]
    if not rounds_only:
        return None
    one = len(rounds_only) == 1
    listed, shared = names_noted(rounds_only, said.notes)
    return (
        f"{said('interleave', 'is false')} but {listed} "
        f"{'is' if one else 'are'} true{shared}; expected "
        f"false: {'it acts' if one else 'they act'} on the paired rounds, and "
        "interleave = false measures each candidate's samples in a row instead "
        "(the older tuner's schedule)"
    )


def _estimator_for_differences(policy: Policy, said: _Said) -> str | None:
    """A one-sided estimator is not asked to judge the differences from native."""
    on_differences = [name for name in ("paired", "confirm") if getattr(policy, name)]
    if policy.estimator not in ONE_SIDED_ESTIMATORS or not on_differences:
        return None
    one = len(on_differences) == 1
    named = " and ".join(on_differences)
    part = "least" if policy.estimator == "min" else "faster half"
    listed, shared = names_noted(on_differences, said.notes)
    return (
        f"{said('estimator', spelled(policy.estimator))} is not valid with "
        f"{listed} true{shared}; expected "
        f'"trimmed_mean", "median" or "mean": {named} {"judges" if one else "judge"} '
        "a size by the differences between its calls and native's, and the "
        f"{part} of those differences is the luck of the draw, not the gain "
        f"(or set {named} to false: each size's own {policy.estimator} is compared, "
        "as the older tuner compared them)"
    )


def _room_to_extend(policy: Policy, said: _Said) -> str | None:
    """``extend_budget`` has a ``hard_limit_s`` whose nine tenths end past ``time_budget_s``."""
    if not policy.extend_budget:
        return None
    room = policy.time_budget_s / EXTEND_SHARE  # a stretch ends by 9/10 of hard_limit_s
    if policy.hard_limit_s == math.inf:
        # no limit gives a stretch no end but the evidence's: a confirmation of 64 pairs
        # on a slow pool could hold the trainer for hours, which is what the limit is for
        return (
            f"{said('extend_budget', 'is true')} but {said('hard_limit_s', 'inf')} sets no "
            "limit, and an extended sweep ends by nine tenths of hard_limit_s; "
            f"expected a finite hard_limit_s above time_budget_s{said.note('time_budget_s')} "
            f"/ {EXTEND_SHARE:g} ({room:.4g} s), or extend_budget = false"
        )
    if policy.hard_limit_s is None:
        return (
            f"{said('extend_budget', 'is true')} but hard_limit_s is not set; expected a "
            f"hard_limit_s (an extended sweep ends by nine tenths of it) above "
            f"time_budget_s{said.note('time_budget_s')} / {EXTEND_SHARE:g} "
            f"({room:.4g} s)"
        )
    if policy.hard_limit_s <= room:
        return (
            f"{said('extend_budget', 'is true')} but "
            f"{said('hard_limit_s', bound(policy.hard_limit_s))} leaves no room past "
            f"{said('time_budget_s', bound(policy.time_budget_s))}: an extended sweep "
            "ends by nine tenths of hard_limit_s; expected hard_limit_s above "
            f"time_budget_s / {EXTEND_SHARE:g} ({room:.4g} s), or extend_budget false"
        )
    return None


# in the order their problems are listed
_CROSS_FIELD_RULES: tuple[_Rule, ...] = (
    _ordered("min_rounds", "max_rounds"),
    _ordered("confirm_min_pairs", "confirm_max_pairs"),
    _ordered("time_budget_s", "hard_limit_s", show=bound),
    _rounds_for_round_switches,
    _estimator_for_differences,
    _room_to_extend,
)


def _search(candidates: CandidateStrategy) -> str | None:
    """The sizes a candidate strategy may pick from, as the rule names them; None for
    ``balanced`` at its defaults (the rule of every policy before it said more).

    Its identity but ``max_candidates`` (how many: effort), an ``explicit`` list as the
    set it measures (order and repeats change nothing), in compact sorted JSON.
    """
    shape = {k: v for k, v in _identity(candidates).items() if k != "max_candidates"}
    if "sizes" in shape:
        shape["sizes"] = sorted(set(shape["sizes"]))
    if shape == _BALANCED_SEARCH:
        return None
    return json.dumps(shape, sort_keys=True, separators=(",", ":"))


def _rule_value(value: object) -> str:
    """Exact and type-blind: ``0.01``, ``1.0`` (also for an int 1), ``true``, ``evidence``."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(float(value))
    return str(value)


def _identity_value(value: object) -> Any:
    """``value`` as JSON: scalars as they are, tuples as lists, records as tables."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, tuple | list):
        return [_identity_value(v) for v in value]
    if attrs.has(type(value)):
        return _identity(value)
    raise TypeError(f"{value!r} has no identity encoding; give its type a case here")


def _identity(record: Any) -> dict[str, Any]:
    """The identity fields of an attrs record; a candidate strategy adds its ``strategy`` name."""
    data: dict[str, Any] = {
        f.name: _identity_value(getattr(record, f.name))
        for f in attrs.fields(type(record))
        if f.metadata.get("identity", True) and getattr(record, f.name) is not None
    }
    strategy = getattr(type(record), "strategy", None)
    if isinstance(strategy, str):
        data["strategy"] = strategy
    return data


_BALANCED_SEARCH = {
    k: v for k, v in _identity(BalancedCandidates()).items() if k != "max_candidates"
}


def given_policy(value: object, what: str) -> Policy:
    """``value``, checked to be a :class:`Policy` where ``what`` (a function) takes one.

    Raises:
        InvalidArgumentError: ``value`` is not a Policy (a preset's name, say), with how to
            look one up.
    """
    if not isinstance(value, Policy):
        raise InvalidArgumentError(
            f"{what} takes a chunktune.Policy, got {shown_one(value)} ({type_named(value)}); "
            "look a name up with chunktune.load_settings().get_policy(name)"
        )
    return value
