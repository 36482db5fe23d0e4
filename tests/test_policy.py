"""The Policy record's hard limit: `inf` is no limit, held as an unset one is."""

from __future__ import annotations

import math
import tomllib
from pathlib import Path

import attrs
import pytest

import chunktune
from chunktune import (
    ConfigError,
    Policy,
    dump_policy,
)
from chunktune._cli import main
from chunktune._config import settings_from_dict

NO_LIMIT = '[policies.mine]\nextends = "patient"\nhard_limit_s = inf\nextend_budget = false\n'


def _policy(toml: str, name: str = "mine") -> Policy:
    return settings_from_dict(tomllib.loads(toml), source="s.toml").get_policy(name)


@pytest.mark.parametrize(
    "build",
    [
        pytest.param(lambda: Policy(hard_limit_s=math.inf), id="in-code"),
        pytest.param(
            lambda: attrs.evolve(Policy(hard_limit_s=40.0), hard_limit_s=math.inf), id="evolve"
        ),
        pytest.param(lambda: _policy("[policies.mine]\nhard_limit_s = inf\n"), id="toml-inf"),
        pytest.param(
            lambda: _policy("[policies.mine]\nhard_limit_s = 1e400\n"), id="toml-overflow"
        ),
    ],
)
def test_an_inf_hard_limit_is_held_as_no_limit(build: object) -> None:
    """hard_limit_s = inf builds a policy whose hard_limit_s is None, equal to one that set none."""
    assert callable(build)
    policy = build()
    assert policy.hard_limit_s is None
    assert policy == Policy()


def test_a_policy_that_extends_patient_drops_its_limit_with_inf() -> None:
    """extends = "patient", hard_limit_s = inf, no stretch: balanced's Policy, key and rule."""
    mine = _policy(NO_LIMIT)
    plain = Policy(description=mine.description)
    assert mine == plain
    assert (mine.fingerprint(), mine.rule(), mine.effort()) == (
        plain.fingerprint(),
        plain.rule(),
        plain.effort(),
    )
    assert "\nhard_limit_s" not in dump_policy(mine)


def test_policy_show_of_a_policy_without_its_inherited_limit_shows_none(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`policy show` prints the inf-limited policy as the one that never set a limit."""
    file = tmp_path / "s.toml"
    file.write_text(f'{NO_LIMIT}description = "d"\n[policies.plain]\ndescription = "d"\n')
    shown = []
    for name in ("mine", "plain"):
        assert main(["policy", "show", name, "--config", str(file)]) == 0
        shown.append(capsys.readouterr().out.split("\n", 1)[1])  # past the name's header
    assert shown[0] == shown[1]
    assert "hard_limit_s" not in shown[0]


@pytest.mark.parametrize(
    ("toml", "inherited"),
    [
        pytest.param(
            '[policies.mine]\nextends = "patient"\nhard_limit_s = inf\n',
            'extend_budget is true (from preset "patient") but hard_limit_s inf sets no limit',
            id="extends-patient",
        ),
        pytest.param(
            "[policies.mine]\nextend_budget = true\nhard_limit_s = inf\n",
            "extend_budget is true but hard_limit_s inf sets no limit",
            id="own-keys",
        ),
        pytest.param(
            '[policies.base]\nhard_limit_s = inf\n[policies.mine]\nextends = "base"\n'
            "extend_budget = true\n",
            'extend_budget is true but hard_limit_s inf (from policy "base") sets no limit',
            id="limit-inherited",
        ),
    ],
)
def test_a_stretch_without_a_limit_is_refused_naming_both_keys(toml: str, inherited: str) -> None:
    """extend_budget with hard_limit_s = inf: a ConfigError at the policy's path naming both."""
    with pytest.raises(ConfigError) as err:
        settings_from_dict(tomllib.loads(toml), source="s.toml")
    assert str(err.value) == (
        f"invalid settings in s.toml: policies.mine: {inherited}, and an extended sweep ends "
        "by nine tenths of hard_limit_s; expected a finite hard_limit_s above time_budget_s"
        + (' (from preset "balanced")' if "patient" in toml else " (the default)")
        + " / 0.9 (11.11 s), or extend_budget = false"
    )


def test_a_stretch_without_a_limit_built_in_code_is_refused() -> None:
    """Policy(extend_budget=True, hard_limit_s=inf) is refused as the file's is."""
    with pytest.raises(
        ConfigError, match=r"^invalid policy: extend_budget is true but hard_limit_s"
    ):
        Policy(extend_budget=True, hard_limit_s=math.inf)


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        pytest.param("-inf", "-inf", id="minus-inf"),
        pytest.param("nan", "nan", id="nan"),
        pytest.param("1e7", "10000000.0", id="past-the-cap"),
    ],
)
def test_other_limits_past_the_range_stay_refused(value: str, shown: str) -> None:
    """Only +inf means no limit: -inf, nan and 1e7 are refused, and the message offers inf."""
    with pytest.raises(ConfigError) as err:
        _policy(f"[policies.mine]\nhard_limit_s = {value}\n")
    assert str(err.value).startswith(
        f"invalid settings in s.toml: policies.mine.hard_limit_s: {shown[:40]}"
    )
    assert str(err.value).endswith(
        "expected a number in (0, 1000000] (or inf, or leave it unset: no limit)"
    )


def test_an_integer_past_any_float_is_no_inf_in_code() -> None:
    """Policy(hard_limit_s=10**400) is refused: only a float inf means no limit."""
    with pytest.raises(ConfigError, match=r"is not valid for hard_limit_s; expected a number in"):
        Policy(hard_limit_s=10**400)


def test_an_unknown_policy_among_thousands_is_matched_past_the_names_listed() -> None:
    """The hint for a misspelt policy looks among every name, not only the 20 listed."""
    policies = {f"p{i:04d}": Policy() for i in range(1000)}
    with pytest.raises(ConfigError, match=r"did you mean p0917\? known policies: p0000, "):
        chunktune.Settings(policies=policies, policy="p0917x")
