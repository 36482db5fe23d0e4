"""Settings: presets, extends, discovery, dumping and the errors a person can act on."""

from __future__ import annotations

import errno
import logging
import os
import re
import tomllib
from pathlib import Path

import attrs
import pytest

from chunktune import (
    BalancedCandidates,
    ChunktuneError,
    ConfigError,
    ExplicitCandidates,
    InvalidArgumentError,
    Policy,
    RaySettings,
    Settings,
    _config,
    dump_policy,
    dump_settings,
    load_settings,
    resolve_sync,
)
from chunktune._cli import main
from chunktune._config import load_cache_settings, preset_names, settings_from_dict
from chunktune._discovered import discovered_settings
from chunktune._extends import origins
from chunktune._keys import cache_for
from chunktune.sim import SimulatedWorkload

PRESETS = ["balanced", "off", "patient", "quick", "seed", "shared", "thorough"]


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_presets_ship() -> None:
    """All six presets are found and balanced is the default."""
    assert preset_names() == PRESETS
    assert load_settings().policy == "balanced"


def test_a_preset_folder_that_cannot_be_listed_raises_not_reads_as_no_presets(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Listing the presets failing (descriptors spent) raises its OSError, never gives none."""
    import errno

    from chunktune import _config

    def spent(*args: object, **kwargs: object) -> object:
        raise OSError(errno.EMFILE, "Too many open files")

    # Python 3.13's Path.glob swallowed this and read no presets: "no policies are defined"
    monkeypatch.setattr(os, "scandir", spent)
    monkeypatch.setattr(os, "listdir", spent)
    with pytest.raises(OSError, match="Too many open files"):
        _config._parsed_presets.__wrapped__()


@pytest.mark.parametrize("name", PRESETS)
def test_each_preset_dumps_and_reloads_equal(name: str) -> None:
    """A preset written as TOML and read back is the same policy."""
    settings = load_settings()
    text = dump_settings(settings)
    again = settings_from_dict(tomllib.loads(text))
    assert again.get_policy(name) == settings.get_policy(name)
    assert tomllib.loads(dump_policy(settings.get_policy(name)))


@pytest.mark.parametrize(
    ("dump", "value", "named"),
    [
        pytest.param(dump_policy, "balanced", "'balanced' (str)", id="policy-name"),
        pytest.param(dump_policy, {"margin": 0.02}, "(dict)", id="policy-dict"),
        pytest.param(dump_settings, None, "None (NoneType)", id="settings-None"),
        pytest.param(dump_settings, "chunktune.toml", "'chunktune.toml' (str)", id="settings-path"),
        pytest.param(dump_settings, Policy(), "(Policy)", id="settings-policy"),
    ],
)
def test_dumping_what_is_no_record_raises_naming_it(
    dump: object, value: object, named: str
) -> None:
    """dump_policy / dump_settings of a name, dict, None or the other record raise naming it."""
    assert callable(dump)
    with pytest.raises(InvalidArgumentError, match=re.escape(named)) as raised:
        dump(value)
    assert isinstance(raised.value, ChunktuneError)


def test_ray_settings_dump_and_reload_equal() -> None:
    """dump_settings writes the [ray] table, so settings that change it read back equal."""
    settings = attrs.evolve(
        load_settings(),
        ray=RaySettings(init_local=True, while_sweeping="native", wait_timeout_s=5.0, lease_s=2.0),
    )
    again = settings_from_dict(tomllib.loads(dump_settings(settings)))
    assert again.ray == settings.ray
    assert again == settings


def test_seed_preset_is_the_older_tuner() -> None:
    """seed: 2 warm-ups, 20 reps in a row, min, margin 3%, tie 2%, toward ceil(N/T), 25 s."""
    seed = load_settings().get_policy("seed")
    assert (seed.warmup, seed.min_rounds, seed.max_rounds) == (2, 20, 20)
    assert (seed.estimator, seed.margin, seed.tie_tol) == ("min", 0.03, 0.02)
    assert (seed.tie_break, seed.time_budget_s, seed.interleave) == ("toward_upper", 25.0, False)
    assert seed.candidates.strategy == "seed"


def test_shared_preset_is_balanced_with_a_floor_of_ten_chunks_a_worker() -> None:
    """shared: balanced's every setting but a floor of 10 chunks a worker and the finest tie."""
    presets = load_settings().policies
    shared, balanced = presets["shared"], presets["balanced"]
    assert isinstance(balanced.candidates, BalancedCandidates)
    assert shared.candidates == attrs.evolve(balanced.candidates, min_chunks_per_thread=10)
    assert (shared.tie_break, balanced.tie_break) == ("smallest", "evidence")
    as_balanced = attrs.evolve(shared, candidates=balanced.candidates, tie_break="evidence")
    assert attrs.evolve(as_balanced, description=balanced.description) == balanced


def test_user_policy_extends_a_preset(tmp_path: Path) -> None:
    """A user policy starts from its preset and overrides only what it names."""
    cfg = write(
        tmp_path / "c.toml",
        'policy = "mine"\n[policies.mine]\nextends = "quick"\nmargin = 0.05\n'
        '[policies.mine.candidates]\nstrategy = "explicit"\nsizes = [3, 7, 11]\n',
    )
    s = load_settings(cfg)
    quick = s.get_policy("quick")
    mine = s.active
    assert mine.margin == 0.05
    assert mine.max_rounds == quick.max_rounds
    assert mine.candidates.strategy == "explicit"


def test_user_policy_extends_a_user_policy(tmp_path: Path) -> None:
    """extends may name another user policy, which may name a preset."""
    s = settings_from_dict(
        {"policies": {"a": {"extends": "thorough", "margin": 0.1}, "b": {"extends": "a"}}}
    )
    assert s.get_policy("b").margin == 0.1
    assert s.get_policy("b").max_rounds == s.get_policy("thorough").max_rounds


def test_a_policy_without_a_description_says_what_it_extends_and_changes() -> None:
    """A policy without a description names its parent and what it changes; a given one is kept."""
    # an inherited description would describe the parent
    s = settings_from_dict(
        {
            "policies": {
                "a": {"extends": "thorough", "margin": 0.1, "tie_tol": 0.03},
                "b": {"extends": "a"},
                "c": {"extends": "quick", "description": "mine", "margin": 0.2},
                "balanced": {"time_budget_s": 12.0},
            }
        }
    )
    assert s.get_policy("a").description == "thorough, with margin, tie_tol changed"
    assert s.get_policy("b").description == "as a"
    assert s.get_policy("c").description == "mine"
    assert s.get_policy("balanced").description == "balanced, with time_budget_s changed"
    assert s.get_policy("thorough").description.startswith("thorough: ")


def test_a_chain_met_child_first_names_each_policys_own_parent() -> None:
    """b, listed before the a it extends, is 'as a', and a is 'thorough, with margin changed'."""
    s = settings_from_dict(
        {"policies": {"b": {"extends": "a"}, "a": {"extends": "thorough", "margin": 0.1}}}
    )
    assert s.get_policy("b").description == "as a"
    assert s.get_policy("a").description == "thorough, with margin changed"


def test_same_strategy_merges_candidate_tables() -> None:
    """Overriding one candidate parameter keeps the preset's other parameters."""
    s = settings_from_dict(
        {"policies": {"m": {"extends": "balanced", "candidates": {"max_candidates": 5}}}}
    )
    preset = s.get_policy("balanced").candidates
    assert isinstance(preset, BalancedCandidates)
    assert s.get_policy("m").candidates == attrs.evolve(preset, max_candidates=5)


def test_table_named_like_a_preset_tweaks_it() -> None:
    """[policies.balanced] changes the shipped balanced preset instead of replacing it."""
    s = settings_from_dict({"policies": {"balanced": {"margin": 0.07}}})
    assert s.get_policy("balanced").margin == 0.07
    assert s.get_policy("balanced").candidates.strategy == "balanced"


@pytest.mark.parametrize(
    ("policies", "message"),
    [
        pytest.param({"a": {"extends": "b"}, "b": {"extends": "a"}}, "cycle a -> b -> a", id="two"),
        pytest.param({"e": {"extends": "e"}}, "cycle e -> e", id="self"),
        pytest.param(
            {"a": {"extends": "b"}, "b": {"extends": "c"}, "c": {"extends": "a"}},
            "cycle a -> b -> c -> a",
            id="three",
        ),
    ],
)
def test_extends_cycles_are_errors(policies: dict[str, object], message: str) -> None:
    """A cycle of extends is reported with its path."""
    with pytest.raises(ConfigError, match=message):
        settings_from_dict({"policies": policies})


def test_every_problem_is_reported_at_once(tmp_path: Path) -> None:
    """One ConfigError lists each problem with file, dotted path, value and what was expected."""
    cfg = write(
        tmp_path / "bad.toml",
        'policy = "mine"\n[cache]\npath = 3\n[policies.mine]\nmargn = 0.1\ntie_tol = 2\n'
        'race = 1\ntie_break = "left"\n[policies.mine.candidates]\nstrategy = "explicit"\n'
        "sizes = [0, 3]\n",
    )
    with pytest.raises(ConfigError) as info:
        load_settings(cfg)
    text = str(info.value)
    assert str(cfg) in text
    assert "policies.mine.margn: unknown key; did you mean margin?" in text
    assert (
        "policies.mine.tie_tol: 2 is not valid for tie_tol; expected a fraction in [0, 1): "
        "2% is 0.02"
    ) in text
    assert "policies.mine.race: 1 is not true or false" in text
    assert 'policies.mine.tie_break: "left"' in text and '"center"' in text
    assert "policies.mine.candidates.sizes" in text and "bad: 0" in text
    assert "cache.path: 3 is not a string" in text
    assert len(info.value.problems) == 6


@pytest.mark.parametrize(
    ("toml", "problem"),
    [
        pytest.param("tie_tol = true", "tie_tol: true is not a number", id="bool"),
        pytest.param('margin = "0.03"', 'margin: "0.03" is not a number', id="string"),
        pytest.param("prime = 1.5", "prime: 1.5 is not an integer", id="float"),
        pytest.param(
            "seed = -1", "seed: -1 is not valid for seed; expected an integer in "
            "[0, 9223372036854775807]", id="int-bound"
        ),
        pytest.param(
            "time_budget_s = 0", "time_budget_s: 0 is not valid for time_budget_s; expected a "
            "number in (0, 1000000]", id="int-as-written"
        ),
        pytest.param(
            'tie_break = "left"', 'tie_break: "left" is not valid for tie_break; expected one '
            'of "evidence", "center",', id="choice"
        ),
        pytest.param(
            '[policies.m.candidates]\nstrategy = "explicit"\nsizes = [0, "3", true]',
            '(bad: 0, "3", true)', id="sizes"
        ),
        pytest.param(
            '[policies.m.candidates]\nstrategy = "balanced"\nmin_chunks_per_thread = 0',
            "expected an integer in [1, 1000000]", id="strategy-bound"
        ),
        pytest.param('[policies.m.candidates]\nstrategy = "Seed"',
                     'strategy: "Seed" is not valid for strategy; did you mean "seed"?',
                     id="strategy"),
        pytest.param('extends = "Quick"', 'extends: unknown policy "Quick"', id="extends"),
        pytest.param("margin = 1979-05-27", "margin: 1979-05-27 is not a number", id="date"),
        pytest.param("margin = -inf", "margin: -inf is not valid for margin", id="minus-inf"),
        pytest.param('tie_break = "evidnce"', 'did you mean "evidence"? expected one of',
                     id="tie-break-near"),
        pytest.param('estimator = "trimed_mean"', 'did you mean "trimmed_mean"? expected one of',
                     id="estimator-near"),
        pytest.param('tie_break = "zzz"', '"zzz" is not valid for tie_break; expected one of',
                     id="tie-break-far"),
    ],
)  # fmt: skip
def test_a_bad_value_is_spelled_as_the_file_writes_it(
    tmp_path: Path, toml: str, problem: str
) -> None:
    """A bad value, its bounds and a near name read as TOML writes them: true, "0.03", "seed"."""
    cfg = write(tmp_path / "bad.toml", f'policy = "m"\n[policies.m]\n{toml}\n')
    with pytest.raises(ConfigError) as info:
        load_settings(cfg)
    assert problem in str(info.value)


def test_sections_that_are_no_tables_and_numbers_past_floats_are_named(tmp_path: Path) -> None:
    """`cache = "x"` or a 400-digit margin: each problem names the key and the value."""
    cfg = write(
        tmp_path / "bad.toml",
        'cache = "x"\nlog = 3\nray = []\npolicy = "m"\n[policies.m]\nmargin = 1' + "0" * 400 + "\n",
    )
    with pytest.raises(ConfigError) as info:
        load_settings(cfg)
    assert sorted(info.value.problems) == [
        'cache: "x" is not a table',
        "log: 3 is not a table",
        "policies.m.margin: 100000000000000000...0000000000000000000 is not a finite number",
        "ray: [] is not a table",
    ]


def test_every_broken_rule_and_bad_size_of_a_policy_is_reported_at_once(tmp_path: Path) -> None:
    """Two cross-field rules broken, three kinds of bad size: all named in one error."""
    cfg = write(
        tmp_path / "bad.toml",
        'policy = "m"\n[policies.m]\nmin_rounds = 5\nmax_rounds = 3\nconfirm_min_pairs = 10\n'
        'confirm_max_pairs = 5\n[policies.n.candidates]\nstrategy = "explicit"\n'
        "sizes = [0, -1, true, 4]\n",
    )
    with pytest.raises(ConfigError) as info:
        load_settings(cfg)
    problems = info.value.problems
    assert len(problems) == 3
    assert any("max_rounds 3 is below min_rounds 5" in p for p in problems)
    assert any("confirm_max_pairs 5 is below confirm_min_pairs 10" in p for p in problems)
    assert any(p.endswith("(bad: 0, -1, true)") for p in problems)


def test_a_long_list_of_bad_sizes_is_told_by_its_first_and_a_count(tmp_path: Path) -> None:
    """A hundred thousand bad sizes: the problem spells the first 8 and counts the rest."""
    cfg = write(
        tmp_path / "bad.toml",
        '[policies.m.candidates]\nstrategy = "explicit"\nsizes = [' + '"x", ' * 10**5 + "0]\n",
    )
    with pytest.raises(ConfigError) as info:
        load_settings(cfg)
    (problem,) = info.value.problems
    assert problem.endswith('(bad: "x", "x", "x", "x", "x", "x", "x", "x" and 99993 more)')
    assert len(problem) < 400, problem[:400]


def test_syntax_error_names_file_and_line(tmp_path: Path) -> None:
    """A TOML syntax error names the file and the line."""
    cfg = write(tmp_path / "broken.toml", 'policy = "quick"\nmargin = = 3\n')
    with pytest.raises(ConfigError, match=r"broken\.toml.*line 2"):
        load_settings(cfg)


@pytest.mark.parametrize(
    ("candidates", "extends", "message"),
    [
        pytest.param(
            {"stratgy": "geometric"},
            "quick",
            'policies.m.candidates.stratgy: unknown key for strategy "balanced"; '
            "did you mean strategy?",
            id="misspelt-strategy",
        ),
        pytest.param(
            {"strategy": "geometric", "sizes": [3]},
            None,
            'policies.m.candidates.sizes: unknown key for strategy "geometric"; a key of '
            'strategy "explicit" (set strategy = "explicit" to use it)',
            id="another-strategys-key",
        ),
        pytest.param(
            {"sizes": [3, 7]},
            "quick",
            'policies.m.candidates.sizes: unknown key for strategy "balanced"; a key of '
            'strategy "explicit" (set strategy = "explicit" to use it)',
            id="sizes-under-an-inherited-strategy",
        ),
        pytest.param(
            {"strategy": "explicit", "sizes": [3], "max_candidates": 4},
            None,
            'policies.m.candidates.max_candidates: unknown key for strategy "explicit"; a key '
            'of strategy "seed", "balanced", "geometric" or "exhaustive"',
            id="a-key-of-several-strategies",
        ),
    ],
)
def test_a_candidates_table_names_what_its_strategy_lacks(
    candidates: dict[str, object], extends: str | None, message: str
) -> None:
    """A [candidates] problem names the strategy (and a key's own strategy), or the missing key."""
    table: dict[str, object] = {"candidates": candidates}
    if extends:
        table["extends"] = extends
    with pytest.raises(ConfigError) as err:
        settings_from_dict({"policies": {"m": table}})
    assert message in str(err.value)


@pytest.mark.parametrize("key", ["max_candidates", "sizes", "strategy"])
def test_a_candidates_key_in_the_policys_own_table_names_the_candidates_table(key: str) -> None:
    """A [candidates] key written in the policy's own table is told to go under candidates."""
    with pytest.raises(ConfigError) as err:
        settings_from_dict({"policies": {"m": {"extends": "quick", key: 6}}})
    assert err.value.problems == (
        f"policies.m.{key}: unknown key; a key of the policy's [candidates] table: "
        f"expected it there as candidates.{key}",
    )


@pytest.mark.parametrize(
    ("strategy", "spelled"), [([1, 2], "[1, 2]"), ({"a": 1}, "{a = 1}")], ids=["list", "table"]
)
def test_a_strategy_that_is_no_name_is_named_as_unknown(strategy: object, spelled: str) -> None:
    """A strategy given as an array or a table is an unknown strategy, not 'unhashable type'."""
    with pytest.raises(ConfigError) as err:
        settings_from_dict({"policies": {"m": {"candidates": {"strategy": strategy}}}})
    assert f"policies.m.candidates.strategy: {spelled} is not valid for strategy" in str(err.value)


def test_an_unknown_strategy_is_named_at_its_full_key(tmp_path: Path) -> None:
    """strategy = "geometic" in a file: the error names policies.NAME.candidates.strategy."""
    cfg = write(
        tmp_path / "bad.toml", '[policies.m.candidates]\nstrategy = "geometic"\nratio = 3.0\n'
    )
    with pytest.raises(ConfigError) as err:
        load_settings(cfg)
    assert err.value.problems == (
        'policies.m.candidates.strategy: "geometic" is not valid for strategy; did you mean '
        '"geometric"? expected one of "seed", "balanced", "geometric", "exhaustive", "explicit"',
    )


def test_unknown_active_policy_lists_known_ones() -> None:
    """policy = an unknown name suggests the closest one and lists all."""
    with pytest.raises(ConfigError, match=r'unknown policy "balancd"; did you mean balanced\?'):
        settings_from_dict({"policy": "balancd"})


@pytest.mark.parametrize("key", ["extend", "extnds", "extends_"])
def test_a_misspelt_extends_is_suggested(key: str) -> None:
    """A misspelt `extends` is told `did you mean extends?`, not extend_budget or nothing."""
    with pytest.raises(ConfigError) as caught:
        settings_from_dict({"policies": {"m": {key: "quick"}}})
    assert caught.value.problems == (f"policies.m.{key}: unknown key; did you mean extends?",)


def test_unknown_top_level_key_is_reported() -> None:
    """A misspelt top-level table is an error, not silently ignored."""
    with pytest.raises(ConfigError, match="polices: unknown key; did you mean policies"):
        settings_from_dict({"polices": {}})


@pytest.mark.parametrize(
    ("key", "value", "expected"),
    [
        pytest.param("margin", 3, "expected a fraction in [0, 1): 3% is 0.03", id="margin-3"),
        pytest.param(
            "tie_tol", 2.5, "expected a fraction in [0, 1): 2.5% is 0.025", id="tie_tol-2.5"
        ),
        pytest.param("margin", -1, "expected a fraction in [0, 1) (0.03 is 3%)", id="negative"),
        pytest.param("margin", '"3%"', "expected a fraction in [0, 1): 3% is 0.03", id="text-3%"),
        pytest.param(
            "tie_tol", '"2.5 %"', "expected a fraction in [0, 1): 2.5% is 0.025", id="text-2.5%"
        ),
        pytest.param("trim", 20, "expected a fraction in [0, 0.5): 20% is 0.2", id="trim-20"),
        pytest.param(
            "trim", '"20%"', "expected a fraction in [0, 0.5): 20% is 0.2", id="trim-text-20%"
        ),
        pytest.param(
            "confirm_alpha", 5, "expected a fraction in (0, 0.5): 5% is 0.05", id="alpha-5"
        ),
        pytest.param(
            "confirm_share", 50, "expected a fraction in [0, 0.9]: 50% is 0.5", id="share-50"
        ),
        # 95% would be 0.95, refused too: only the unit is said, never a value out of range
        pytest.param(
            "confirm_share", 95, "expected a fraction in [0, 0.9] (0.03 is 3%)", id="share-95"
        ),
        pytest.param(
            "confirm_share", '"95%"', "expected a fraction in [0, 0.9] (0.03 is 3%)",
            id="share-text-95%",
        ),
        pytest.param("trim", 50, "expected a fraction in [0, 0.5) (0.03 is 3%)", id="trim-50"),
        pytest.param(
            "confirm_alpha", 50, "expected a fraction in (0, 0.5) (0.03 is 3%)", id="alpha-50"
        ),
    ],
)  # fmt: skip
def test_a_percent_given_for_a_fraction_is_told_the_unit(
    tmp_path: Path, key: str, value: float | str, expected: str
) -> None:
    """margin = 3 or "3%" is refused naming file, key and value, saying 3% is 0.03 (if allowed)."""
    cfg = write(tmp_path / "pct.toml", f'policy = "m"\n[policies.m]\n{key} = {value}\n')
    with pytest.raises(ConfigError) as caught:
        load_settings(cfg)
    assert str(caught.value) == (
        f"invalid settings in {cfg}: policies.m.{key}: {value} is not valid for {key}; {expected}"
    )


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        pytest.param(
            {"margin": 0.03},
            "margin: unknown key; a policy's field: expected it under [policies.NAME]",
            id="field",
        ),
        pytest.param(
            {"candidates": {"strategy": "seed"}},
            "candidates: unknown key; a policy's table: expected it as [policies.NAME.candidates]",
            id="candidates",
        ),
    ],
)
def test_a_policy_field_at_the_top_level_says_where_it_belongs(
    data: dict[str, object], problem: str
) -> None:
    """A policy's key written at the top level (as `policy show` prints it) names its table."""
    with pytest.raises(ConfigError) as caught:
        settings_from_dict(data)
    assert caught.value.problems == (problem,)


def test_cross_field_rule() -> None:
    """max_rounds below min_rounds is rejected with both values."""
    with pytest.raises(ConfigError, match="max_rounds 2 is below min_rounds 5"):
        settings_from_dict({"policies": {"x": {"min_rounds": 5, "max_rounds": 2}}})


def test_extend_budget_needs_a_hard_limit() -> None:
    """A budget that may stretch needs hard_limit_s, the most it stretches to; else an error."""
    with pytest.raises(ConfigError, match="extend_budget is true but hard_limit_s is not set"):
        settings_from_dict({"policies": {"x": {"extend_budget": True}}})
    with pytest.raises(ConfigError, match="extend_budget"):
        settings_from_dict({"policies": {"x": {"extend_budget": "yes", "hard_limit_s": 30.0}}})
    ok = settings_from_dict({"policies": {"x": {"extend_budget": True, "hard_limit_s": 30.0}}})
    assert ok.get_policy("x").extend_budget


def test_extend_budget_refuses_a_hard_limit_of_exactly_the_budget_over_nine_tenths() -> None:
    """hard_limit_s at exactly time_budget_s / 0.9 leaves a stretch no room: refused."""
    doc = {"policies": {"x": {"extend_budget": True, "hard_limit_s": 10.0, "time_budget_s": 9}}}
    with pytest.raises(ConfigError, match="hard_limit_s 10 leaves no room past time_budget_s 9"):
        settings_from_dict(doc)


@pytest.mark.parametrize("hard", [10.0, 10.5, 11.1])
def test_extend_budget_refuses_a_hard_limit_that_leaves_no_room_to_stretch(hard: float) -> None:
    """A stretch ends by 9/10 of hard_limit_s: at or under 10 / 0.9 s nothing could stretch."""
    doc = {"policies": {"x": {"extend_budget": True, "hard_limit_s": hard, "time_budget_s": 10}}}
    with pytest.raises(ConfigError) as err:
        settings_from_dict(doc)
    assert f"hard_limit_s {hard:g} leaves no room past time_budget_s 10" in str(err.value)
    assert "expected hard_limit_s above time_budget_s / 0.9 (11.11 s)" in str(err.value)
    doc["policies"]["x"]["hard_limit_s"] = 11.2
    assert settings_from_dict(doc).get_policy("x").extend_budget
    doc["policies"]["x"] |= {"hard_limit_s": hard, "extend_budget": False}
    assert settings_from_dict(doc).get_policy("x").hard_limit_s == hard


@pytest.mark.parametrize(
    ("field", "value"),
    [
        pytest.param("margin", -0.1, id="margin"),
        pytest.param("margin", 1.0, id="margin-whole"),
        pytest.param("confirm_alpha", 0.0, id="confirm_alpha"),
        pytest.param("confirm_min_pairs", 1, id="confirm_min_pairs"),
        pytest.param("tie_tol", 1.0, id="tie_tol"),
        pytest.param("estimator", "mode", id="estimator"),
        pytest.param("warmup", -1, id="warmup"),
        pytest.param("time_budget_s", 0.0, id="budget"),
        pytest.param("race_z", 0.0, id="race_z"),
        pytest.param("trim", 0.5, id="trim"),
        pytest.param("min_rounds", 0, id="min_rounds"),
    ],
)
def test_invalid_policy_cannot_exist(field: str, value: object) -> None:
    """Constructing a Policy with an out-of-range field raises."""
    with pytest.raises(ValueError, match=field):
        Policy(**{field: value})  # type: ignore[arg-type]


def test_discovery_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Explicit path, then CHUNKTUNE_CONFIG, then ./chunktune.toml, then defaults."""
    assert load_settings().source is None
    write(tmp_path / "chunktune.toml", 'policy = "quick"\n')
    assert load_settings().policy == "quick"
    env = write(tmp_path / "env.toml", 'policy = "thorough"\n')
    monkeypatch.setenv("CHUNKTUNE_CONFIG", str(env))
    assert load_settings().policy == "thorough"
    explicit = write(tmp_path / "explicit.toml", 'policy = "seed"\n')
    assert load_settings(explicit).policy == "seed"


@pytest.mark.parametrize("kind", ["folder", "dangling-link"])
def test_a_local_chunktune_toml_that_is_no_file_is_an_error(
    isolated: Path, kind: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """./chunktune.toml as a folder or a link to nothing is an error (exit 2), not the defaults."""
    local = isolated / "chunktune.toml"
    if kind == "folder":
        local.mkdir()
        expected = "it is a directory; expected a TOML file"
    else:
        local.symlink_to(isolated / "gone.toml")
        expected = (
            f"it is a link to {isolated / 'gone.toml'}, which does not exist; expected a TOML file"
        )
    with pytest.raises(ConfigError) as caught:
        load_settings()
    assert str(caught.value) == f"settings file {local}: {expected}"
    assert main(["policy", "list"]) == 2
    err = capsys.readouterr().err
    assert err == f"chunktune: error: settings file {local}: {expected}\n"


def test_chunktune_config_expands_home_as_chunktune_cache_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """$CHUNKTUNE_CONFIG='~/x.toml' (a value no shell expanded) reads the file in $HOME."""
    write(tmp_path / "ct.toml", 'policy = "seed"\n')
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("CHUNKTUNE_CONFIG", "~/ct.toml")
    assert load_settings().policy == "seed"


@pytest.mark.parametrize("entry", ["load_settings", "discovered"])
def test_chunktune_config_naming_an_unknown_home_is_refused_as_chunktune_cache_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, entry: str
) -> None:
    """$CHUNKTUNE_CONFIG='~nosuchuser/x.toml': ConfigError naming the variable, not a ./~ folder."""
    (tmp_path / "~nosuchuser-chunktune").mkdir()  # a folder that reading it relative would find
    write(tmp_path / "~nosuchuser-chunktune" / "x.toml", 'policy = "seed"\n')
    monkeypatch.setenv("CHUNKTUNE_CONFIG", "~nosuchuser-chunktune/x.toml")
    load = load_settings if entry == "load_settings" else discovered_settings
    with pytest.raises(ConfigError, match=r"\$CHUNKTUNE_CONFIG: .* no such home") as info:
        load()
    assert info.value.source is None  # no file was read


def test_a_file_chunktune_config_names_is_said_to_come_from_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A missing or bad file the variable names: the error says $CHUNKTUNE_CONFIG named it."""
    monkeypatch.setenv("CHUNKTUNE_CONFIG", str(tmp_path / "gone.toml"))
    with pytest.raises(
        ConfigError,
        match=r"^settings file \S*gone\.toml \(named by \$CHUNKTUNE_CONFIG\): it does not exist$",
    ):
        load_settings()
    monkeypatch.setenv("CHUNKTUNE_CONFIG", str(write(tmp_path / "bad.toml", "policy = 3\n")))
    with pytest.raises(ConfigError, match=r"bad\.toml \(named by \$CHUNKTUNE_CONFIG\): policy"):
        load_settings()
    with pytest.raises(ConfigError, match=r"bad\.toml: policy"):  # named here: no variable
        load_settings(tmp_path / "bad.toml")


def test_a_file_found_here_or_a_bad_variable_is_not_blamed_on_chunktune_config(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """./chunktune.toml's error names no variable; a bad $CHUNKTUNE_CACHE blames no file."""
    write(tmp_path / "chunktune.toml", "policy = 3\n")
    with pytest.raises(ConfigError, match=r"chunktune\.toml: policy") as bad:
        load_settings()
    assert "CHUNKTUNE_CONFIG" not in str(bad.value)
    write(tmp_path / "chunktune.toml", 'policy = "seed"\n')
    monkeypatch.setenv("CHUNKTUNE_CACHE", "~nosuchuser-chunktune/c.json")
    with pytest.raises(ConfigError) as variable:
        load_settings()
    assert str(variable.value).startswith("invalid settings: $CHUNKTUNE_CACHE: ")
    assert variable.value.source is None


def test_missing_explicit_file_is_an_error(tmp_path: Path) -> None:
    """A named settings file that does not exist is an error, not the defaults, saying so."""
    with pytest.raises(ConfigError) as caught:
        load_settings(tmp_path / "nope.toml")
    assert str(caught.value) == f"settings file {tmp_path / 'nope.toml'}: it does not exist"


def test_cache_env_overrides_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """CHUNKTUNE_CACHE wins over [cache] path."""
    cfg = write(tmp_path / "c.toml", '[cache]\npath = "/somewhere/else.json"\n')
    monkeypatch.setenv("CHUNKTUNE_CACHE", str(tmp_path / "x.toml"))
    assert load_settings(cfg).cache.path == str(tmp_path / "x.toml")


@pytest.mark.parametrize("how", ["argument", "variable", "discovered"])
def test_a_relative_cache_path_is_read_from_the_settings_files_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    """[cache] path and system_path written relative name files beside the settings file."""
    project = tmp_path / "project"
    project.mkdir()
    cfg = write(
        project / "chunktune.toml",
        '[cache]\npath = "runs/cache.json"\nsystem_path = "shipped.json"\n',
    )
    monkeypatch.delenv("CHUNKTUNE_CACHE", raising=False)
    monkeypatch.delenv("CHUNKTUNE_SYSTEM_CACHE", raising=False)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(project if how == "discovered" else elsewhere)
    if how == "variable":
        monkeypatch.setenv("CHUNKTUNE_CONFIG", "../project/chunktune.toml")
    else:
        monkeypatch.delenv("CHUNKTUNE_CONFIG", raising=False)
    settings = load_settings(Path("../project/chunktune.toml") if how == "argument" else None)
    assert settings.source is not None and Path(settings.source).resolve() == cfg
    assert Path(settings.cache.path or "") == project / "runs" / "cache.json"
    assert Path(settings.cache.system_path or "") == project / "shipped.json"


def test_absolute_and_home_cache_paths_and_the_variables_are_left_as_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only a relative path in a settings file moves: ~, absolute and $CHUNKTUNE_* stay."""
    cfg = write(
        tmp_path / "c.toml",
        f'[cache]\npath = "~/c.json"\nsystem_path = "{tmp_path / "s.json"}"\n',
    )
    monkeypatch.delenv("CHUNKTUNE_CACHE", raising=False)
    monkeypatch.delenv("CHUNKTUNE_SYSTEM_CACHE", raising=False)
    settings = load_settings(cfg)
    assert (settings.cache.path, settings.cache.system_path) == (
        "~/c.json",
        str(tmp_path / "s.json"),
    )
    assert settings_from_dict({"cache": {"path": "x.json"}}).cache.path == "x.json"
    monkeypatch.setenv("CHUNKTUNE_CACHE", "here.json")  # a variable: the current folder's
    assert load_settings(cfg).cache.path == "here.json"


def test_repository_example_loads() -> None:
    """The commented chunktune.toml at the repository root is valid."""
    root = Path(__file__).resolve().parent.parent
    s = load_settings(root / "chunktune.toml")
    assert s.get_policy("mine").candidates.strategy == "explicit"


def test_repository_example_says_what_a_missing_description_becomes() -> None:
    """The example's note on leaving out description quotes what the policy then describes."""
    text = (Path(__file__).resolve().parent.parent / "chunktune.toml").read_text()
    note = re.search(r'without it: "([^"]*)"', text.replace("\n# ", " "))
    assert note
    data = tomllib.loads(text)
    del data["policies"]["mine"]["description"]
    assert settings_from_dict(data).get_policy("mine").description == note.group(1)


# ---------------------------------------------------------------- hostile files


@pytest.mark.parametrize(
    ("content", "message"),
    [
        pytest.param(bytes(range(256)) * 4, "not UTF-8", id="random-bytes"),
        pytest.param(b"a = " + b"[" * 5000 + b"]" * 5000, "nested too deeply", id="deep-array"),
        pytest.param(b"a = " + b"{b = " * 3000 + b"1" + b"}" * 3000, "nested too", id="deep-table"),
        pytest.param(
            b"a = " + b"[" * 50 + b"]" * 50, "a.0.0.0.0.0.0.0.0: nested more than 8", id="deep-50"
        ),
        pytest.param(b"[" + b".".join([b"t"] * 3000) + b"]\n", "nested more than 8", id="dotted"),
        pytest.param(b"\xef\xbb\xbfpolicy = 'quick'\n", "byte-order mark", id="bom"),
    ],
)
def test_a_file_no_settings_could_be_is_a_config_error(
    tmp_path: Path, content: bytes, message: str
) -> None:
    """Undecodable bytes, a BOM or nesting beyond any setting: one ConfigError naming the file."""
    cfg = tmp_path / "hostile.toml"
    cfg.write_bytes(content)
    with pytest.raises(ConfigError, match=message) as info:
        load_settings(cfg)
    assert str(cfg) in str(info.value)


@pytest.mark.parametrize(
    ("name", "message"),
    [
        pytest.param("dir.toml", "it is a directory; expected a TOML file", id="directory"),
        pytest.param("x" * 300, "cannot read it: File name too long", id="name-too-long"),
        pytest.param("gone.toml", "it does not exist", id="missing"),
        pytest.param("c.toml/in.toml", "cannot read it: Not a directory", id="not-a-dir"),
        pytest.param("/dev/zero", "it holds more than 16 MiB; expected a TOML settings file",
                     id="too-large"),
    ],
)  # fmt: skip
def test_a_settings_path_that_cannot_be_read_says_why_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, message: str
) -> None:
    """A folder or an unusable name: the settings file named once, why, no [Errno N] or repr."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "dir.toml").mkdir()
    write(tmp_path / "c.toml", "")
    with pytest.raises(ConfigError) as info:
        load_settings(name)
    assert str(info.value).startswith(f"settings file {name}: {message}")
    assert str(info.value).count(name) == 1
    assert "Errno" not in str(info.value) and "'" not in str(info.value)


def test_a_settings_file_that_never_ends_is_refused_at_its_cap() -> None:
    """`--config /dev/zero` is read to 16 MiB and refused, naming the file and the cap."""
    with pytest.raises(ConfigError) as info:
        load_settings("/dev/zero")
    assert "settings file /dev/zero: it holds more than 16 MiB" in str(info.value)
    assert info.value.source == "/dev/zero"


def test_settings_through_a_pipe_are_read(tmp_path: Path) -> None:
    """A pipe (`--config <(cat x.toml)` names /dev/fd/63) is a settings file like any other."""
    read, write = os.pipe()
    os.write(write, b'policy = "quick"\n')
    os.close(write)
    try:
        assert load_settings(f"/dev/fd/{read}").policy == "quick"
    finally:
        os.close(read)


def test_a_nul_byte_in_the_settings_path_is_a_config_error() -> None:
    """A settings path that no file can have is a ConfigError, not a ValueError from open()."""
    with pytest.raises(ConfigError) as caught:
        load_settings("a\0b.toml")
    assert str(caught.value).startswith('settings file "a\\u0000b.toml": cannot read it: ')


def test_a_long_extends_chain_merges_each_policy_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """A chain of 2000 extends resolves, each link merged once (linear, no recursion limit)."""
    import chunktune._extends as extends

    merges = {"n": 0}
    merge = extends._merge

    def counting(base: dict[str, object], over: dict[str, object]) -> dict[str, object]:
        merges["n"] += 1
        return merge(base, over)

    monkeypatch.setattr(extends, "_merge", counting)
    n = 2000
    policies: dict[str, object] = {"p0": {"extends": "quick", "margin": 0.07}}
    policies.update({f"p{i}": {"extends": f"p{i - 1}"} for i in range(1, n)})
    s = settings_from_dict({"policy": f"p{n - 1}", "policies": policies})
    assert s.active.margin == 0.07
    assert s.active.max_rounds == s.get_policy("quick").max_rounds
    assert merges["n"] <= n + len(PRESETS)


def test_each_extends_cycle_is_reported_once() -> None:
    """A 3-policy cycle is one problem; a policy extending it adds none and is not 'unknown'."""
    policies = {
        "a": {"extends": "b"},
        "b": {"extends": "c"},
        "c": {"extends": "a"},
        "d": {"extends": "a"},
    }
    with pytest.raises(ConfigError) as info:
        settings_from_dict({"policy": "d", "policies": policies})
    assert len(info.value.problems) == 1
    assert "cycle a -> b -> c -> a" in info.value.problems[0]


@pytest.mark.parametrize(
    ("path", "message"),
    [
        pytest.param("", 'cache.path: "" is not a path', id="empty"),
        pytest.param(
            "~nosuchuser-chunktune/x.json",
            'cache.path: .* starts with "~nosuchuser-chunktune", but no such home',
            id="user",
        ),
        pytest.param("a\0b.json", "cache.path: .* NUL byte", id="nul"),
        pytest.param(" \t", 'cache.path: ".*" is only blank space', id="blank"),
    ],
)
def test_a_cache_path_no_file_can_have_is_a_config_error(path: str, message: str) -> None:
    """[cache] path that is empty, blank, has a NUL byte or an unknown ~user: ConfigError."""
    with pytest.raises(ConfigError, match=message):
        settings_from_dict({"cache": {"path": path}})


def test_chunktune_cache_is_checked_like_cache_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """$CHUNKTUNE_CACHE naming an unknown ~user is a ConfigError naming the variable."""
    monkeypatch.setenv("CHUNKTUNE_CACHE", "~nosuchuser-chunktune/c.json")
    with pytest.raises(ConfigError, match=r"\$CHUNKTUNE_CACHE: .* no such home"):
        load_settings()


@pytest.mark.parametrize("path", [3, 2.5, ["chunktune.toml"], b"chunktune.toml"])
def test_a_settings_path_that_is_no_path_is_a_config_error(path: object) -> None:
    """load_settings(3), a bytes name and the like: ConfigError naming the value, no TypeError."""
    with pytest.raises(ConfigError, match="is not a settings file's path"):
        load_settings(path)  # type: ignore[arg-type]


def test_a_blank_chunktune_cache_is_a_config_error_not_a_file_named_by_spaces(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """$CHUNKTUNE_CACHE=' ': ConfigError naming the variable; no file ' ' in the folder."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CHUNKTUNE_CACHE", " ")
    with pytest.raises(ConfigError, match=r'\$CHUNKTUNE_CACHE: " " is only blank space'):
        load_settings()
    assert list(tmp_path.iterdir()) == []


def test_empty_cache_variables_count_as_unset(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """CHUNKTUNE_CACHE= and CHUNKTUNE_SYSTEM_CACHE= leave the file's cache paths in force."""
    path = write(
        tmp_path / "c.toml",
        f'[cache]\npath = "{tmp_path / "mine.json"}"\nsystem_path = "{tmp_path / "site.json"}"\n',
    )
    monkeypatch.setenv("CHUNKTUNE_CACHE", "")
    monkeypatch.setenv("CHUNKTUNE_SYSTEM_CACHE", "")
    cache = load_settings(path).cache
    assert (cache.path, cache.system_path) == (
        str(tmp_path / "mine.json"),
        str(tmp_path / "site.json"),
    )


def test_a_cycle_reached_through_a_policy_off_it_is_reported_where_it_closes() -> None:
    """x extends a, a and b extend each other: the cycle is b's extends, not x's, and once."""
    policies = {"x": {"extends": "a"}, "a": {"extends": "b"}, "b": {"extends": "a"}}
    with pytest.raises(ConfigError) as info:
        settings_from_dict({"policy": "x", "policies": policies}, environ={})
    assert info.value.problems == ("policies.b.extends: cycle a -> b -> a",)


def test_a_policy_extending_one_with_an_unknown_parent_repeats_no_problem() -> None:
    """a extends an unknown policy and b extends a: one problem, a's, not one more for b."""
    policies = {"a": {"extends": "nosuch"}, "b": {"extends": "a"}}
    with pytest.raises(ConfigError) as info:
        settings_from_dict({"policy": "b", "policies": policies}, environ={})
    assert len(info.value.problems) == 1
    assert info.value.problems[0].startswith('policies.a.extends: unknown policy "nosuch"')


def test_an_unknown_parent_is_matched_against_the_presets_and_the_user_s_policies() -> None:
    """A misspelt parent is told the closest of every policy, the presets' and the user's."""
    policies = {"a": {"extends": "mien"}, "mine": {"extends": "patient"}}
    with pytest.raises(ConfigError) as info:
        settings_from_dict({"policy": "a", "policies": policies}, environ={})
    expected = 'policies.a.extends: unknown policy "mien"; did you mean mine? known policies: '
    names = ", ".join(sorted({*preset_names(), "mine"}))
    assert info.value.problems == (expected + names,)


def test_a_policy_under_a_broken_one_is_not_judged_against_the_defaults() -> None:
    """b extends a, whose parent is unknown: b's min_rounds 20 is not weighed against max 12."""
    # without a's real parent, b's fields have nothing to be checked against
    policies = {"a": {"extends": "nosuch"}, "b": {"extends": "a", "min_rounds": 20}}
    with pytest.raises(ConfigError) as info:
        settings_from_dict({"policy": "b", "policies": policies}, environ={})
    assert len(info.value.problems) == 1, info.value.problems
    assert info.value.problems[0].startswith('policies.a.extends: unknown policy "nosuch"')


def test_a_policy_that_is_no_table_is_named_as_no_table() -> None:
    """[policies] a = 3 is 'policies.a: 3 is not a table'."""
    with pytest.raises(ConfigError) as info:
        settings_from_dict({"policy": "balanced", "policies": {"a": 3}}, environ={})
    assert info.value.problems == ("policies.a: 3 is not a table",)


@pytest.mark.parametrize(
    ("table", "problem"),
    [
        pytest.param(
            {"min_rounds": True}, "policies.a.min_rounds: true is not an integer", id="bool-int"
        ),
        pytest.param(
            {"candidates": {"strategy": "explicit"}},
            "policies.a.candidates.sizes: missing required key sizes",
            id="missing-sizes",
        ),
        pytest.param(
            {"candidates": {"strategy": "explicit", "sizes": 3}},
            "policies.a.candidates.sizes: 3 is not valid for sizes; expected a list of chunk sizes",
            id="sizes-no-list",
        ),
    ],
)
def test_a_policy_value_of_the_wrong_kind_is_named_for_what_it_is(
    table: dict[str, object], problem: str
) -> None:
    """true for an integer, a missing sizes list and a number for it: each named exactly."""
    with pytest.raises(ConfigError) as info:
        settings_from_dict({"policies": {"a": {"extends": "balanced", **table}}}, environ={})
    assert info.value.problems == (problem,)


def test_a_value_nested_too_deep_is_named_by_its_path_from_the_top() -> None:
    """The too-deep value's path starts at its top-level key (a.b...), with no leading dot."""
    data: dict[str, object] = {"j": 1}
    for key in "ihgfedcba":
        data = {key: data}
    with pytest.raises(ConfigError, match=r"^invalid settings: a\.b\.c\.d\.e\.f\.g\.h\.i: nested"):
        settings_from_dict(data, environ={})


def test_a_bad_cache_variable_beside_chunktune_config_is_not_blamed_on_that_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """$CHUNKTUNE_CONFIG names a good file, $CHUNKTUNE_CACHE is bad: the error names no file."""
    good = write(tmp_path / "c.toml", 'policy = "quick"\n')
    monkeypatch.setenv("CHUNKTUNE_CONFIG", str(good))
    monkeypatch.setenv("CHUNKTUNE_CACHE", "~nosuchuser-chunktune/x.json")
    with pytest.raises(ConfigError) as info:
        load_settings()
    assert info.value.source is None
    assert str(info.value).startswith("invalid settings: $CHUNKTUNE_CACHE: ")


def test_a_settings_path_through_a_file_says_not_a_directory(tmp_path: Path) -> None:
    """A path whose parent is a file is unreadable for the reason the system gives."""
    file = write(tmp_path / "c.toml", "")
    with pytest.raises(
        ConfigError, match=r"^settings file \S*inner\.toml: cannot read it: Not a directory$"
    ):
        load_settings(file / "inner.toml")


def test_an_empty_chunktune_config_counts_as_unset(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """$CHUNKTUNE_CONFIG set to "" names no file: ./chunktune.toml is found as without it."""
    write(tmp_path / "chunktune.toml", 'policy = "quick"\n')
    monkeypatch.setenv("CHUNKTUNE_CONFIG", "")
    assert load_settings().policy == "quick"


@pytest.mark.parametrize(
    ("name", "escaped"),
    [
        pytest.param("a\nb", r"a\\nb", id="newline"),
        pytest.param("a\x1b[31mb", r"a\\u001B\[31mb", id="escape"),
        pytest.param("a\tb", r"a\\tb", id="tab"),
        pytest.param("a\x7fb", r"a\\u007Fb", id="delete"),
        pytest.param("a\x85b", r"a\\u0085b", id="c1-next-line"),
        pytest.param("a\u2028b", r"a\\u2028b", id="line-separator"),
        pytest.param("a\u202eb", r"a\\u202Eb", id="bidi-override"),
    ],
)
def test_a_policy_name_with_a_control_character_is_refused_at_its_toml_path(
    tmp_path: Path, name: str, escaped: str
) -> None:
    """[policies."a\\nb"] in a file: ConfigError at policies."a\\nb" naming the file."""
    key = name.encode("unicode_escape").decode().replace("\\x", "\\u00")
    file = write(tmp_path / "c.toml", f'policy = "quick"\n[policies."{key}"]\nmargin = 0.05\n')
    with pytest.raises(ConfigError, match=rf'policies\."{escaped}": .*control') as info:
        load_settings(file)
    assert info.value.source == str(file)
    assert len(info.value.problems) == 1
    assert name[1] not in str(info.value)  # escaped wherever it is shown


def test_a_policy_extending_or_made_active_by_a_refused_name_adds_no_second_problem() -> None:
    """policy = "a\\nb" and extends = "a\\nb" beside [policies."a\\nb"]: that name's one problem."""
    data = {
        "policy": "a\nb",
        "policies": {"a\nb": {"extends": "quick"}, "child": {"extends": "a\nb"}},
    }
    with pytest.raises(ConfigError) as info:
        settings_from_dict(data, environ={})
    assert len(info.value.problems) == 1
    assert info.value.problems[0].startswith('policies."a\\nb": ')


def test_printable_unicode_policy_names_are_kept() -> None:
    """Names with spaces, accents or CJK text load: only control characters are refused."""
    names = ["my policy", "schnell-ä", "快速", "a.b"]
    settings = settings_from_dict({"policies": {n: {"extends": "quick"} for n in names}})
    assert set(names) <= set(settings.policies)


@pytest.mark.parametrize(
    "body",
    [
        pytest.param("margin = 5", id="bad-value"),
        pytest.param("marign = 0.05", id="unknown-key"),
        pytest.param('extends = "nosuch"', id="unknown-parent"),
    ],
)
def test_a_refused_policy_name_is_its_one_problem_whatever_its_table_holds(
    tmp_path: Path, body: str
) -> None:
    """[policies."a\\u001Bb"] with a bad key under it: the name's one problem, never shown raw."""
    # its own keys' problems would print their path, the escape in it, raw
    file = write(tmp_path / "c.toml", f'policy = "quick"\n[policies."a\\u001Bb"]\n{body}\n')
    with pytest.raises(ConfigError) as info:
        load_settings(file)
    assert len(info.value.problems) == 1, info.value.problems
    assert info.value.problems[0].startswith('policies."a\\u001Bb": ')
    assert "\x1b" not in str(info.value)


def test_a_cache_path_ending_toml_is_a_toml_cache_when_no_format_is_given(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """[cache] path = "d.toml" and no format: format is "auto", so the cache is TOML (README)."""
    monkeypatch.delenv("CHUNKTUNE_CACHE", raising=False)
    file = write(tmp_path / "c.toml", '[cache]\npath = "d.toml"\n')
    settings = load_settings(file)
    assert settings.cache.format == "auto"
    cache = cache_for(settings)
    assert cache is not None
    assert (cache.path.name, cache.format) == ("d.toml", "toml")


@pytest.mark.parametrize(
    ("name", "shown"),
    [
        pytest.param("a\0b.toml", '"a\\u0000b.toml"', id="nul"),
        pytest.param("a\nb.toml", '"a\\nb.toml"', id="newline"),
        pytest.param("a\x1b[31mred.toml", '"a\\u001B[31mred.toml"', id="escape-sequence"),
    ],
)
def test_a_settings_path_with_a_control_character_is_named_escaped(
    isolated: Path, name: str, shown: str
) -> None:
    """A settings file named with a NUL, newline or escape: a ConfigError naming it escaped."""
    with pytest.raises(ConfigError) as caught:
        load_settings(name)
    message = str(caught.value)
    assert message.startswith(f"settings file {shown}: "), message
    assert message.isprintable(), message
    if "\0" in name:
        assert "its name holds a NUL byte, which no path can; expected a file name" in message


def test_a_settings_path_from_the_environment_with_control_characters_exits_2_escaped(
    isolated: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """$CHUNKTUNE_CONFIG naming "x<BEL><LF>b.toml": exit 2 and one line naming it escaped."""
    monkeypatch.setenv("CHUNKTUNE_CONFIG", "x\a\nb.toml")
    assert main(["policy", "list"]) == 2
    err = capsys.readouterr().err
    assert err == (
        'chunktune: error: settings file "x\\u0007\\nb.toml" (named by $CHUNKTUNE_CONFIG): '
        "it does not exist\n"
    )


def test_policy_list_names_a_settings_file_with_a_newline_in_its_name_escaped(
    isolated: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`policy list --config` of a file whose name holds a newline: its origin is escaped."""
    config = write(isolated / "my\nsettings.toml", 'policy = "mine"\n[policies.mine]\n')
    assert main(["policy", "list", "--config", str(config)]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[-1] == f'* the active policy ("{isolated}/my\\nsettings.toml")'
    [row] = [line for line in out.splitlines() if line.startswith("mine")]
    assert row.rstrip().endswith('my\\nsettings.toml"')


def test_an_extends_that_is_no_string_is_refused_naming_it() -> None:
    """extends = 5 is one problem: the value is not a policy name (not an unknown policy)."""
    with pytest.raises(ConfigError) as info:
        settings_from_dict({"policies": {"a": {"extends": 5}}})
    assert str(info.value) == "invalid settings: policies.a.extends: 5 is not a policy name"


def test_a_policy_extending_a_cycle_is_left_out_with_only_the_cycle_reported() -> None:
    """c extends a policy of a cycle: the cycle is the one problem, c's own values unjudged."""
    policies = {"a": {"extends": "b"}, "b": {"extends": "a"}, "c": {"extends": "a", "margin": 5}}
    with pytest.raises(ConfigError) as info:
        settings_from_dict({"policies": policies})
    assert str(info.value) == "invalid settings: policies.b.extends: cycle a -> b -> a"


def test_origins_stop_at_a_cycle_and_at_a_broken_link() -> None:
    """origins walks up extends to a cycle's start or a broken link and ends there."""
    cycle = {"a": {"extends": "b", "margin": 0.1}, "b": {"extends": "a", "tie_tol": 0.02}}
    assert origins("a", {}, cycle) == {"tie_tol": 'policy "b"'}
    broken = {"a": {"extends": "b"}, "b": {"extends": "nowhere", "margin": 0.1}}
    assert origins("a", {}, broken) == {}


@pytest.mark.parametrize("name", [pytest.param("", id="empty"), pytest.param("  ", id="spaces")])
def test_a_blank_policy_name_in_a_file_is_refused(tmp_path: Path, name: str) -> None:
    """[policies.""] is refused, as --policy "" is: a blank name would print as nothing."""
    file = write(tmp_path / "c.toml", f'policy = "{name}"\n[policies."{name}"]\nmargin = 0.02\n')
    with pytest.raises(ConfigError) as info:
        load_settings(file)
    assert info.value.problems == (
        f'policies."{name}": "{name}" is not valid as a policy name: it is blank; '
        "expected a name that prints",
    )


def test_a_blank_policy_name_in_code_is_refused() -> None:
    """Settings(policies={"": ...}) raises a ConfigError naming the blank name."""
    with pytest.raises(ConfigError, match='"" is not valid as a policy name: it is blank'):
        Settings(policy="", policies={"": Policy()})


def test_a_candidates_table_without_a_strategy_in_a_policy_extending_nothing_keeps_balanced_s(
    tmp_path: Path,
) -> None:
    """No extends, no strategy: the shipped balanced's strategy, capped as the table says."""
    file = write(
        tmp_path / "c.toml",
        'policy = "m"\n[policies.m]\nmargin = 0.02\n[policies.m.candidates]\nmax_candidates = 6\n',
    )
    policy = load_settings(file).get_policy("m")
    assert policy.candidates == BalancedCandidates(max_candidates=6)
    assert policy.margin == 0.02


def test_a_policy_extending_nothing_keeps_the_shipped_balanced_s_strategy_past_a_tweak(
    tmp_path: Path,
) -> None:
    """A file's [policies.balanced] of another strategy: one extending nothing keeps shipped's."""
    file = write(
        tmp_path / "c.toml",
        '[policies.balanced.candidates]\nstrategy = "geometric"\n'
        "[policies.m.candidates]\nmax_candidates = 6\n",
    )
    settings = load_settings(file)
    assert settings.get_policy("balanced").candidates.strategy == "geometric"
    assert settings.get_policy("m").candidates == BalancedCandidates(max_candidates=6)


def test_the_cache_settings_are_read_past_a_broken_policy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """load_cache_settings reads [cache], anchored, variables applied, where load_settings fails."""
    monkeypatch.delenv("CHUNKTUNE_CACHE", raising=False)
    monkeypatch.delenv("CHUNKTUNE_SYSTEM_CACHE", raising=False)
    file = write(tmp_path / "s.toml", '[cache]\npath = "d.json"\n[policies.x]\nmargn = 1\n')
    with pytest.raises(ConfigError, match="margn"):
        load_settings(file)
    assert load_cache_settings(file).path == str(tmp_path / "d.json")
    monkeypatch.setenv("CHUNKTUNE_CACHE", str(tmp_path / "e.json"))
    assert load_cache_settings(file).path == str(tmp_path / "e.json")
    write(file, '[cache]\npath = ""\n')
    with pytest.raises(ConfigError, match=r"^invalid settings in .*s\.toml: cache\.path: "):
        load_cache_settings(file)


def test_a_misspelt_parent_is_not_told_the_policy_s_own_name() -> None:
    """A policy extending a misspelt name is not offered itself: extending itself is a cycle."""
    policies = {"mine": {"extends": "mien"}}
    with pytest.raises(ConfigError) as info:
        settings_from_dict({"policy": "mine", "policies": policies}, environ={})
    (problem,) = info.value.problems
    assert "did you mean mine" not in problem
    assert problem.endswith("known policies: " + ", ".join(sorted(preset_names())))


def test_a_preset_s_tweak_is_still_told_its_own_preset() -> None:
    """[policies.quick] extends "quik": quick, the preset it may extend, is still offered."""
    policies = {"quick": {"extends": "quik"}}
    with pytest.raises(ConfigError) as info:
        settings_from_dict({"policy": "quick", "policies": policies}, environ={})
    (problem,) = info.value.problems
    assert 'unknown policy "quik"; did you mean quick?' in problem


def test_a_table_s_key_error_whose_key_cannot_be_shown_is_one_problem() -> None:
    """A table's KeyError whose key's __str__ raises: one problem saying so, not that error."""
    from collections.abc import Iterator, Mapping

    class Unshown:
        def __str__(self) -> str:
            raise ValueError("no str")

    class Table(Mapping[str, object]):
        """Says it holds ``path``; reading it raises a KeyError of an unprintable key."""

        def __getitem__(self, key: str) -> object:
            raise KeyError(Unshown())

        def __contains__(self, key: object) -> bool:
            return key == "path"

        def __iter__(self) -> Iterator[str]:
            return iter(["path"])

        def __len__(self) -> int:
            return 1

    with pytest.raises(ConfigError) as caught:
        settings_from_dict({"cache": Table()})
    assert caught.value.problems == (
        "cache.path: missing required key (its message could not be read)",
    )


def test_a_removed_working_directory_gives_the_defaults_and_one_warning(
    isolated: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Settings discovery in a working directory removed under the process warns, not raises."""
    monkeypatch.setattr(_config, "_looked", set(), raising=False)  # warned once per process
    gone = isolated / "gone"
    gone.mkdir()
    monkeypatch.chdir(gone)
    gone.rmdir()
    assert load_settings() == load_settings()  # the second look says nothing more
    assert load_settings().policy == "balanced"
    (warning,) = [r.getMessage() for r in caplog.records if "cannot look for" in r.getMessage()]
    assert "No such file or directory" in warning and "built-in settings" in warning


def test_a_settings_file_that_cannot_be_looked_at_leaves_resolve_its_sweep(
    isolated: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """An EIO stat of ./chunktune.toml gives the defaults and a sweep, not a bug's fallback."""
    monkeypatch.setattr(_config, "_looked", set(), raising=False)  # warned once per process
    real_stat = os.stat

    def stat(path: object, *args: object, **kwargs: object) -> os.stat_result:
        if str(path).endswith("chunktune.toml"):
            raise OSError(5, "Input/output error")
        return real_stat(path, *args, **kwargs)  # type: ignore[arg-type]

    policy = attrs.evolve(
        load_settings().get_policy("quick"), candidates=ExplicitCandidates(sizes=(2, 8))
    )
    workload = SimulatedWorkload.from_layout("blocked", num_envs=64, nthread=4)
    monkeypatch.setattr(os, "stat", stat)
    decision = resolve_sync(workload, policy=policy)
    assert decision.source == "benchmark", decision.reason
    assert any("Input/output error" in r.getMessage() for r in caplog.records)


def test_each_cause_of_a_working_directory_not_looked_in_is_warned_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A removed working directory, then an EIO: one warning each, by its reason alone."""
    monkeypatch.setattr(_config, "_looked", set())  # warned once per process
    gone = tmp_path / "gone"
    gone.mkdir()
    monkeypatch.chdir(gone)
    gone.rmdir()
    with caplog.at_level(logging.WARNING, logger="chunktune"):
        assert load_settings() == load_settings()
        monkeypatch.chdir(tmp_path)
        real_stat = os.stat

        def stat(path: object, *args: object, **kwargs: object) -> os.stat_result:
            if str(path).endswith("chunktune.toml"):
                raise OSError(errno.EIO, "Input/output error", str(path))
            return real_stat(path, *args, **kwargs)  # type: ignore[arg-type]

        monkeypatch.setattr(os, "stat", stat)
        assert load_settings() == load_settings()
    warnings = [r.getMessage() for r in caplog.records if "cannot look for" in r.getMessage()]
    assert [w.split("(")[1].split(")")[0] for w in warnings] == [
        "No such file or directory",
        "Input/output error",
    ]
