"""A settings problem's path as TOML spells it: each key bare where TOML allows, else quoted
and escaped, so that the path pasted into a file names the key it names; a long one cut."""

from __future__ import annotations

import logging
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import tomli_w

import chunktune
from chunktune._cli import main
from chunktune._config import settings_from_dict

# keys TOML would need quoted: a dot, a space, nothing, a colon, non-ASCII, a quote, a
# backslash, an escape; and one TOML would read as a float if bare
KEYS = [
    pytest.param("a.b", id="dot"),
    pytest.param("a b", id="space"),
    pytest.param("", id="empty"),
    pytest.param("a:b", id="colon"),
    pytest.param("café", id="non-ascii"),
    pytest.param('a"b', id="quote"),
    pytest.param("a\\b", id="backslash"),
    pytest.param("a\x1b[2Jb", id="escape"),
    pytest.param("1.5", id="float-like"),
]

# where an unknown key sits: the keys down to it, ``KEY`` standing for the one under test
KEY = object()
PLACES: list[Any] = [
    pytest.param((KEY,), id="top-level"),
    pytest.param(("cache", KEY), id="cache"),
    pytest.param(("policies", "mine", KEY), id="policy"),
    pytest.param(("policies", KEY, "margn"), id="policy-name"),
    pytest.param(("policies", "mine", "candidates", KEY), id="candidates"),
]


def _nested(keys: tuple[object, ...], leaf: object) -> dict[str, Any]:
    """``{keys[0]: {keys[1]: ... leaf}}``."""
    table: Any = leaf
    for key in reversed(keys):
        table = {key: table}
    return dict(table)


@pytest.mark.parametrize("place", PLACES)
@pytest.mark.parametrize("key", KEYS)
def test_a_problems_path_pasted_into_toml_names_the_key_it_is_at(
    place: tuple[object, ...], key: str, tmp_path: Path
) -> None:
    """A problem's path, pasted as a TOML key, reads back as the very keys of the file."""
    keys = tuple(key if k is KEY else k for k in place)
    document = _nested(keys, 1)
    if "candidates" in keys:
        document["policies"]["mine"]["candidates"]["strategy"] = "seed"
    file = tmp_path / "chunktune.toml"
    file.write_text(tomli_w.dumps(document), encoding="utf-8")
    with pytest.raises(chunktune.ConfigError) as caught:
        chunktune.load_settings(file)
    (problem,) = caught.value.problems
    if "is not valid as a policy name" in problem:  # a blank name, or one of an escape
        keys = keys[:2]
    else:
        assert ": unknown key" in problem, problem
    # no key here holds ": ", so the first ends the path
    assert tomllib.loads(f"{problem.partition(': ')[0]} = 1") == _nested(keys, 1)


def test_a_bare_key_path_reads_as_before() -> None:
    """Keys TOML allows bare (letters, digits, _ and -) are shown bare, the path as before."""
    with pytest.raises(chunktune.ConfigError) as caught:
        settings_from_dict({"policies": {"my_pol-2": {"candidates": {"strategy": "seed", "x": 1}}}})
    assert caught.value.problems[0].startswith(
        'policies.my_pol-2.candidates.x: unknown key for strategy "seed"'
    )


def test_the_cli_exits_2_naming_a_dotted_key_quoted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """policy show over a file whose policy sets "a.b": exit 2, the path written as TOML does."""
    file = tmp_path / "bad.toml"
    file.write_text('[policies.mine]\n"a.b" = 1\n', encoding="utf-8")
    assert main(["policy", "show", "mine", "--config", str(file)]) == 2
    err = capsys.readouterr().err
    assert 'policies.mine."a.b": unknown key; expected one of extends' in err
    assert "Traceback" not in err


# a policy's name of 500 characters: its path shows its first 28 and last 29, quoted
LONG = "head" + "x" * 492 + "tail"
CUT = f'"{LONG[:28]}...{LONG[-29:]}"'


@pytest.mark.parametrize(
    ("table", "problem"),
    [
        pytest.param({"margn": 1}, f"policies.{CUT}.margn: unknown key", id="key"),
        pytest.param({"margin": "x"}, f'policies.{CUT}.margin: "x" is not a number', id="value"),
        pytest.param(
            {"extends": "nope"}, f'policies.{CUT}.extends: unknown policy "nope"', id="extends"
        ),
        pytest.param(
            {"extends": LONG}, f"policies.{CUT}.extends: cycle {CUT} -> {CUT}", id="cycle"
        ),
        pytest.param(
            {"min_rounds": 50, "max_rounds": 10},
            f"policies.{CUT}: max_rounds 10 is below min_rounds 50",
            id="rule",
        ),
    ],
)
def test_a_long_policy_names_path_is_cut_to_its_ends(table: dict[str, Any], problem: str) -> None:
    """A policy named by 500 characters: each problem's path shows it cut, quoted, its ends kept."""
    with pytest.raises(chunktune.ConfigError) as caught:
        settings_from_dict({"policies": {LONG: table}})
    (said,) = caught.value.problems
    assert said.startswith(problem)
    assert len(said) < 500


@pytest.mark.parametrize(
    ("policies", "cycle"),
    [
        pytest.param({"a.b": {"extends": "a.b"}}, 'policies."a.b".extends: cycle "a.b" -> "a.b"',
                     id="itself"),
        pytest.param(
            {"a.b": {"extends": "c d"}, "c d": {"extends": "a.b"}},
            'policies."c d".extends: cycle "a.b" -> "c d" -> "a.b"',
            id="two",
        ),
    ],
)  # fmt: skip
def test_a_cycle_names_its_policies_as_toml_keys(policies: dict[str, Any], cycle: str) -> None:
    """A cycle through policies named "a.b" and "c d": each name (and the path) quoted."""
    with pytest.raises(chunktune.ConfigError) as caught:
        settings_from_dict({"policies": policies})
    assert caught.value.problems == (cycle,)


def test_an_idle_keys_warning_names_a_dotted_policy_quoted(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A key without effect in policy "my.pol": the warning's path is policies."my.pol".key."""
    file = tmp_path / "chunktune.toml"
    file.write_text(
        '[policies."my.pol"]\nrefine_steps = 5\n'
        '[policies."my.pol".candidates]\nstrategy = "explicit"\nsizes = [3, 7]\n',
        encoding="utf-8",
    )
    caplog.set_level(logging.WARNING, logger="chunktune")
    chunktune.load_settings(file)
    assert [r.getMessage() for r in caplog.records] == [
        f'chunktune: settings file {file}: policies."my.pol".refine_steps has no effect: '
        "explicit candidates are never refined"
    ]


@pytest.mark.parametrize(
    "where",
    [
        pytest.param(lambda key: {key: {}}, id="policy"),
        pytest.param(lambda key: {"candidates": {"strategy": "seed", key: 1}}, id="candidates"),
    ],
)
@pytest.mark.parametrize("key", ["a.b", "a:b", "x.y:z"])
def test_a_child_repeating_its_parents_dotted_key_is_told_at_both(
    where: Callable[[str], dict[str, Any]], key: str
) -> None:
    """A key holding . or : that parent and child both set: at each, not at a child lacking it."""
    policies = {
        "base": where(key),
        "kid": {"extends": "base", **where(key)},
        "other": {"extends": "base"},
    }
    with pytest.raises(chunktune.ConfigError) as caught:
        settings_from_dict({"policies": policies})
    paths = [p.partition(": unknown key")[0] for p in caught.value.problems]
    inner = "" if "candidates" not in where(key) else ".candidates"
    assert paths == [f'policies.base{inner}."{key}"', f'policies.kid{inner}."{key}"']
