"""`candidates = [3, 7, 11]` and `candidates = "geometric"`: the tables they stand for."""

from __future__ import annotations

import logging
import re
import tomllib

import attrs
import pytest

from chunktune import ConfigError, Policy
from chunktune._candidates import STRATEGIES
from chunktune._config import settings_from_dict


def _load(toml: str) -> Policy:
    return settings_from_dict(tomllib.loads(toml), source="s.toml").get_policy("mine")


def _refused(toml: str) -> str:
    with pytest.raises(ConfigError) as err:
        _load(toml)
    return str(err.value)


def _same(a: Policy, b: Policy) -> None:
    """Equal records, and so equal cache keys, rules and efforts (asserted, not assumed)."""
    assert a == b
    assert (a.fingerprint(), a.rule(), a.effort()) == (b.fingerprint(), b.rule(), b.effort())


@pytest.mark.parametrize(
    "extends",
    [
        pytest.param("", id="nothing"),
        pytest.param('extends = "quick"\n', id="quick"),
        pytest.param('extends = "seed"\n', id="seed"),
    ],
)
def test_a_list_is_the_explicit_strategy_with_those_sizes(extends: str) -> None:
    """candidates = [3, 7, 11] is the Policy of the explicit table with sizes [3, 7, 11]."""
    table = '[policies.mine.candidates]\nstrategy = "explicit"\nsizes = [3, 7, 11]\n'
    short = _load(f"[policies.mine]\n{extends}candidates = [3, 7, 11]\n")
    _same(short, _load(f"[policies.mine]\n{extends}{table}"))
    assert short.candidates.strategy == "explicit"


@pytest.mark.parametrize("name", [pytest.param(n, id=n) for n in STRATEGIES if n != "explicit"])
@pytest.mark.parametrize(
    "extends",
    [
        pytest.param("", id="nothing"),
        pytest.param('extends = "quick"\n', id="quick"),
        pytest.param('extends = "seed"\n', id="seed"),
    ],
)
def test_a_strategy_name_is_that_strategy_with_its_defaults(name: str, extends: str) -> None:
    """candidates = "NAME" is the Policy of a table naming NAME with its defaults."""
    # a table of every default: it reads the same whatever the parent's table held
    shipped = STRATEGIES[name]()  # type: ignore[call-arg]
    keys = "".join(f"{k} = {v!r}\n" for k, v in attrs.asdict(shipped, recurse=False).items())
    table = f'[policies.mine.candidates]\nstrategy = "{name}"\n{keys}'
    short = _load(f'[policies.mine]\n{extends}candidates = "{name}"\n')
    _same(short, _load(f"[policies.mine]\n{extends}{table}"))
    assert short.candidates == shipped


def test_a_name_replaces_an_inherited_table_of_the_same_strategy_whole() -> None:
    """extends = "shared" with candidates = "balanced": balanced's defaults, not shared's floor."""
    short = _load('[policies.mine]\nextends = "shared"\ncandidates = "balanced"\n')
    assert short.candidates == STRATEGIES["balanced"]()  # type: ignore[call-arg]
    assert _load('[policies.mine]\nextends = "shared"\n').candidates != short.candidates


def test_a_table_without_a_strategy_still_changes_only_its_keys() -> None:
    """The table form is unchanged: max_candidates alone keeps shared's other keys."""
    got = _load(
        '[policies.mine]\nextends = "shared"\n[policies.mine.candidates]\nmax_candidates = 4\n'
    )
    shared = _load('[policies.mine]\nextends = "shared"\n').candidates
    assert got.candidates.max_candidates == 4  # type: ignore[union-attr]
    assert got.candidates.min_chunks_per_thread == shared.min_chunks_per_thread  # type: ignore[union-attr]


@pytest.mark.parametrize(
    "sizes",
    [
        pytest.param('[0, 3, "a"]', id="zero-and-text"),
        pytest.param("[]", id="empty"),
        pytest.param("[[1]]", id="nested"),
        pytest.param("[3.5]", id="fraction"),
    ],
)
def test_bad_sizes_in_the_list_are_told_as_in_the_table(sizes: str) -> None:
    """A list's bad sizes get the table's error, at the same path."""
    short = _refused(f"[policies.mine]\ncandidates = {sizes}\n")
    table = _refused(f'[policies.mine.candidates]\nstrategy = "explicit"\nsizes = {sizes}\n')
    assert short == table
    assert short.startswith("invalid settings in s.toml: policies.mine.candidates.sizes: ")


@pytest.mark.parametrize(
    ("value", "tail"),
    [
        pytest.param(
            "3",
            ": for at most 3 sizes, write max_candidates = 3 in the candidates table "
            "(candidates.max_candidates = 3); for size 3 alone, candidates = [3]",
            id="count",
        ),
        pytest.param("1", ": for size 1 alone, candidates = [1]", id="one-below-the-cap-range"),
        pytest.param(
            "5000", ": for size 5000 alone, candidates = [5000]", id="above-the-cap-range"
        ),
        pytest.param("3.5", "", id="float"),
        pytest.param("true", "", id="bool"),
    ],
)
def test_a_bare_value_is_refused_saying_what_was_meant(value: str, tail: str) -> None:
    """candidates = 3 names the value, the path, the forms taken and, for an integer, the key."""
    assert _refused(f"[policies.mine]\ncandidates = {value}\n") == (
        f"invalid settings in s.toml: policies.mine.candidates: {value} is not valid for "
        'candidates; expected a strategy\'s name ("seed", "balanced", "geometric", '
        f'"exhaustive", "explicit"), a list of sizes or a table{tail}'
    )


@pytest.mark.parametrize(
    ("value", "said"),
    [
        pytest.param(
            '"geometrc"',
            '"geometrc" is not valid for candidates; did you mean "geometric"? expected one of',
            id="misspelled",
        ),
        pytest.param(
            '"explicit"',
            '"explicit" is not valid for candidates alone; expected the sizes it measures, as '
            "a list (candidates = [3, 7, 11])",
            id="explicit-without-sizes",
        ),
    ],
)
def test_a_name_that_stands_for_no_table_is_refused(value: str, said: str) -> None:
    """A misspelled strategy is told the nearest; "explicit" alone is told to list its sizes."""
    message = _refused(f"[policies.mine]\ncandidates = {value}\n")
    assert message.startswith(f"invalid settings in s.toml: policies.mine.candidates: {said}")


def test_a_policy_that_extends_a_shorthand_inherits_its_table() -> None:
    """A policy extending one with candidates = [3, 7] measures those sizes too."""
    got = settings_from_dict(
        tomllib.loads(
            "[policies.base]\ncandidates = [3, 7]\n"
            '[policies.mine]\nextends = "base"\nmargin = 0.02\n'
        )
    ).get_policy("mine")
    assert got.candidates == STRATEGIES["explicit"](sizes=(3, 7))  # type: ignore[call-arg]


def test_refine_steps_beside_a_list_is_warned_as_beside_the_table(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """refine_steps with candidates = [3, 7] is idle, as with an explicit table: warned."""
    with caplog.at_level(logging.WARNING, logger="chunktune"):
        settings_from_dict(
            tomllib.loads("[policies.mine]\nrefine_steps = 5\ncandidates = [3, 7]\n"),
            source="warned-shorthand.toml",
        )
    assert "policies.mine.refine_steps has no effect: explicit candidates" in caplog.text


@pytest.mark.parametrize(
    ("value", "hint"),
    [
        pytest.param("[3, 7]", "a policy's field: expected it under [policies.NAME]", id="list"),
        pytest.param(
            '{ strategy = "seed" }',
            "a policy's table: expected it as [policies.NAME.candidates]",
            id="table",
        ),
    ],
)
def test_candidates_at_the_top_level_says_where_it_belongs(value: str, hint: str) -> None:
    """A top-level shorthand belongs under [policies.NAME]; a top-level table as its table."""
    with pytest.raises(ConfigError, match=rf"candidates: unknown key; {re.escape(hint)}"):
        settings_from_dict(tomllib.loads(f"candidates = {value}\n"))
