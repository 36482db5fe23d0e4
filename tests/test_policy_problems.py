"""Each problem of a policy reported once, at the policy whose table sets it; a broken rule
notes which of its values the policy inherits, and from where."""

from __future__ import annotations

import pytest

from chunktune import ConfigError
from chunktune._config import settings_from_dict


@pytest.mark.parametrize(
    ("policies", "problem"),
    [
        pytest.param(
            {"m": {"extends": "patient", "time_budget_s": 38}},
            'policies.m: extend_budget is true (from preset "patient") but hard_limit_s 40 '
            '(from preset "patient") leaves no room past time_budget_s 38: an extended sweep '
            "ends by nine tenths of hard_limit_s; expected hard_limit_s above time_budget_s / "
            "0.9 (42.22 s), or extend_budget false",
            id="patient",
        ),
        pytest.param(
            {"base": {"extends": "quick", "time_budget_s": 30}, "m": {"extends": "base",
                                                                     "hard_limit_s": 20}},
            'policies.m: hard_limit_s 20 is below time_budget_s 30 (from policy "base"); '
            "expected hard_limit_s >= time_budget_s",
            id="user-parent",
        ),
        pytest.param(
            {"m": {"extends": "thorough", "min_rounds": 50}},
            'policies.m: max_rounds 40 (from preset "thorough") is below min_rounds 50; '
            "expected max_rounds >= min_rounds",
            id="preset-rounds",
        ),
        pytest.param(
            {"m": {"extends": "seed", "confirm": True}},
            'policies.m: interleave is false (from preset "seed") but confirm is true; expected',
            id="seed-interleave",
        ),
        pytest.param(
            {"m": {"confirm_min_pairs": 80}},
            "policies.m: confirm_max_pairs 64 (the default) is below confirm_min_pairs 80; "
            "expected confirm_max_pairs >= confirm_min_pairs",
            id="default",
        ),
        pytest.param(
            {"m": {"interleave": False}},
            "policies.m: interleave is false but race, paired, confirm and noise_gate are "
            "true (the defaults); expected",
            id="defaults",
        ),
        pytest.param(
            {"m": {"estimator": "min"}},
            'policies.m: estimator "min" is not valid with paired and confirm true '
            "(the defaults); expected",
            id="defaults-estimator",
        ),
        pytest.param(
            {"m": {"estimator": "min", "confirm": False}},
            'policies.m: estimator "min" is not valid with paired true (the default); '
            "expected",
            id="one-default",
        ),
    ],
)  # fmt: skip
def test_a_broken_rule_says_which_values_the_policy_inherits(
    policies: dict[str, object], problem: str
) -> None:
    """A rule broken by an inherited value names where it came from, so the user's own is plain."""
    with pytest.raises(ConfigError) as caught:
        settings_from_dict({"policies": policies})
    assert caught.value.problems[0].startswith(problem)


def test_a_parents_broken_rule_is_reported_once_with_notes_in_its_child() -> None:
    """A rule the parent breaks is its problem alone; the child's own break notes the parent."""
    policies = {
        "base": {"min_rounds": 20},
        "kid": {"extends": "base"},
        "own": {"extends": "base", "max_rounds": 5},
    }
    with pytest.raises(ConfigError) as caught:
        settings_from_dict({"policies": policies})
    assert caught.value.problems == (
        "policies.base: max_rounds 12 (the default) is below min_rounds 20; "
        "expected max_rounds >= min_rounds",
        'policies.own: max_rounds 5 is below min_rounds 20 (from policy "base"); '
        "expected max_rounds >= min_rounds",
    )


def test_a_problem_in_an_extended_policy_is_reported_once_where_it_is_written() -> None:
    """A bad field of a parent is one problem at its own path, not one more per child."""
    policies = {
        "a": {"extends": "b", "tie_tol": 0.02},
        "c": {"extends": "a"},
        "b": {"margn": 0.1, "candidates": {"strategy": "explicit", "sizes": [0]}},
        "d": {"extends": "b", "margn": 0.1},  # its own typo, the same as its parent's
    }
    with pytest.raises(ConfigError) as info:
        settings_from_dict({"policy": "c", "policies": policies})
    assert sorted(p.split(":")[0] for p in info.value.problems) == [
        "policies.b.candidates.sizes",
        "policies.b.margn",
        "policies.d.margn",
    ]


def test_a_preset_tweak_that_extends_its_preset_by_name_reports_its_own_broken_rule() -> None:
    """[policies.balanced] extends = "balanced", breaking a rule between fields, is told so."""
    policies = {"balanced": {"extends": "balanced", "min_rounds": 50, "max_rounds": 10}}
    with pytest.raises(ConfigError) as info:
        settings_from_dict({"policies": policies}, environ={})
    assert info.value.problems == (
        "policies.balanced: max_rounds 10 is below min_rounds 50; "
        "expected max_rounds >= min_rounds",
    )


def test_a_broken_rule_a_child_only_inherits_is_reported_once_at_its_parent() -> None:
    """A rule between fields that a parent breaks is its one problem; a child adds none."""
    policies = {
        "a": {"extends": "balanced", "min_rounds": 50, "max_rounds": 10},
        "b": {"extends": "a"},
    }
    with pytest.raises(ConfigError) as info:
        settings_from_dict({"policy": "b", "policies": policies}, environ={})
    assert info.value.problems == (
        "policies.a: max_rounds 10 is below min_rounds 50; expected max_rounds >= min_rounds",
    )


def test_a_parent_s_bad_nested_value_is_reported_again_only_where_a_child_sets_it() -> None:
    """A bad candidates size: at its parent, at a child that sets it, not at one setting another."""
    policies = {
        "b": {"candidates": {"strategy": "explicit", "sizes": [0]}},
        "c": {"extends": "b", "candidates": {"strategy": "explicit"}},
        "d": {"extends": "b", "candidates": {"strategy": "explicit", "sizes": [0]}},
    }
    with pytest.raises(ConfigError) as info:
        settings_from_dict({"policies": policies}, environ={})
    assert [p.split(":")[0] for p in info.value.problems] == [
        "policies.b.candidates.sizes",
        "policies.d.candidates.sizes",
    ]
