"""Property tests: valid settings round-trip; mutated files load or raise ConfigError."""

from __future__ import annotations

import copy
import tempfile
import tomllib
from pathlib import Path
from typing import Any

import attrs
import tomli_w
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chunktune import (
    BalancedCandidates,
    ConfigError,
    ExhaustiveCandidates,
    ExplicitCandidates,
    GeometricCandidates,
    Policy,
    SeedCandidates,
    dump_settings,
    load_settings,
)
from chunktune._config import settings_from_dict
from chunktune._policy import ESTIMATORS, EXTEND_SHARE, ONE_SIDED_ESTIMATORS, TIE_BREAKS

fractions = st.floats(0.0, 0.99, allow_nan=False)
strategies = st.one_of(
    st.builds(SeedCandidates, max_candidates=st.integers(2, 64)),
    st.builds(
        BalancedCandidates,
        max_candidates=st.integers(2, 64),
        min_chunks_per_thread=st.integers(1, 8),
        k_ratio=st.floats(1.01, 4.0),
    ),
    st.builds(GeometricCandidates, ratio=st.floats(1.01, 8.0), max_candidates=st.integers(2, 64)),
    st.builds(ExhaustiveCandidates, max_candidates=st.integers(2, 256)),
    st.builds(ExplicitCandidates, sizes=st.lists(st.integers(1, 10_000), min_size=1, max_size=8)),
)


@st.composite
def policies(draw: st.DrawFn) -> Policy:
    min_rounds = draw(st.integers(1, 10))
    budget = draw(st.floats(0.01, 100.0))
    return Policy(
        description=draw(st.text(max_size=30)),
        enabled=draw(st.booleans()),
        margin=draw(fractions),
        tie_tol=draw(fractions),
        tie_break=draw(st.sampled_from(TIE_BREAKS)),
        confidence_z=draw(st.floats(0.0, 10.0)),
        estimator=(estimator := draw(st.sampled_from(ESTIMATORS))),
        trim=draw(st.floats(0.0, 0.49)),
        prime=draw(st.integers(0, 5)),
        warmup=draw(st.integers(0, 5)),
        min_rounds=min_rounds,
        max_rounds=draw(st.integers(min_rounds, 50)),
        interleave=(rounds := draw(st.booleans())),
        # the rounds' own features need the rounds
        race=rounds and draw(st.booleans()),
        # a one-sided estimator measures each size's own calls, not differences
        paired=(differences := rounds and estimator not in ONE_SIDED_ESTIMATORS)
        and draw(st.booleans()),
        confirm=differences and draw(st.booleans()),
        noise_gate=rounds and draw(st.booleans()),
        race_z=draw(st.floats(0.1, 10.0)),
        early_stop=draw(st.booleans()),
        seed=draw(st.integers(0, 2**32)),
        time_budget_s=budget,
        hard_limit_s=(hard := draw(st.one_of(st.none(), st.floats(budget, 1000.0)))),
        # a stretch ends by nine tenths of the hard limit: less leaves it no room
        extend_budget=hard is not None and hard * EXTEND_SHARE > budget and draw(st.booleans()),
        candidates=draw(strategies),
    )


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pol=policies(), name=st.from_regex(r"[a-z][a-z0-9_]{0,10}", fullmatch=True))
def test_any_valid_settings_round_trip(pol: Policy, name: str) -> None:
    """Settings holding any valid policy dump to TOML and load back equal."""
    base = load_settings()
    s = attrs.evolve(base, policies={**base.policies, name: pol}, policy=name)
    again = settings_from_dict(tomllib.loads(dump_settings(s)))
    assert again == s


VALID = {
    "policy": "mine",
    "cache": {"path": "x.json", "format": "auto"},
    "log": {"stderr": "auto"},
    "policies": {
        "mine": {
            "extends": "quick",
            "margin": 0.03,
            "tie_tol": 0.02,
            "time_budget_s": 10.0,
            "candidates": {"strategy": "explicit", "sizes": [3, 7, 11]},
        }
    },
}

toml_values = st.recursive(
    st.one_of(
        st.booleans(),
        st.integers(-(2**40), 2**40),
        st.floats(allow_nan=False, allow_infinity=False),
        st.text(max_size=12),
    ),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=6,
)


def _paths(doc: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [prefix] if prefix else []
    if isinstance(doc, dict):
        for k, v in doc.items():
            found.extend(_paths(v, (*prefix, k)))
    return found


@st.composite
def mutated(draw: st.DrawFn) -> dict[str, Any]:
    doc = copy.deepcopy(VALID)
    for _ in range(draw(st.integers(1, 3))):
        paths = _paths(doc)
        if not paths:
            break
        path = draw(st.sampled_from(paths))
        parent: Any = doc
        for part in path[:-1]:
            parent = parent[part]
        action = draw(st.sampled_from(["replace", "delete", "add"]))
        if action == "replace":
            parent[path[-1]] = draw(toml_values)
        elif action == "delete":
            del parent[path[-1]]
        elif isinstance(parent, dict):
            parent[draw(st.text(min_size=1, max_size=10))] = draw(toml_values)
    # only what TOML itself can carry reaches a loader
    return tomllib.loads(tomli_w.dumps(doc))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(doc=mutated())
def test_mutated_files_load_or_raise_config_error(doc: dict[str, Any]) -> None:
    """A randomly damaged settings document either loads or raises ConfigError, nothing else."""
    try:
        settings_from_dict(doc)
    except ConfigError as exc:
        assert exc.problems


@st.composite
def hostile_files(draw: st.DrawFn) -> bytes:
    """A valid settings file cut short or with bytes changed, any TOML document, or random bytes."""
    raw = tomli_w.dumps(VALID).encode()
    kind = draw(st.sampled_from(["cut", "flip", "document", "bytes", "deep"]))
    if kind == "cut":
        return raw[: draw(st.integers(0, len(raw) - 1))]
    if kind == "flip":
        at = draw(st.integers(0, len(raw) - 1))
        return raw[:at] + bytes([draw(st.integers(0, 255))]) + raw[at + 1 :]
    if kind == "document":
        return tomli_w.dumps(draw(st.dictionaries(st.text(max_size=8), toml_values))).encode()
    if kind == "deep":
        depth = draw(st.integers(5, 4000))
        opener, closer = draw(st.sampled_from([(b"[", b"]"), (b"{a = ", b"}")]))
        return b"policy = " + opener * depth + b"1" + closer * depth
    return draw(st.binary(max_size=300))


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(raw=hostile_files())
def test_any_bytes_as_the_settings_file_load_or_raise_config_error(raw: bytes) -> None:
    """Any bytes as the settings file either load or raise ConfigError naming the file."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "s.toml"
        path.write_bytes(raw)
        try:
            load_settings(path)
        except ConfigError as exc:
            assert exc.problems and exc.source == str(path)
