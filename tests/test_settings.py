"""A policy's identity and rule come from its declared fields, not from its TOML form."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any, get_args

import attrs
import pytest
from _untyped import untyped

import chunktune
from chunktune import (
    BalancedCandidates,
    ConfigError,
    ExhaustiveCandidates,
    ExplicitCandidates,
    GeometricCandidates,
    InvalidArgumentError,
    Policy,
    SeedCandidates,
)
from chunktune._config import preset_names
from chunktune._policy import ESTIMATORS, TIE_BREAKS, Estimator, TieBreak
from chunktune._settings import (
    CACHE_FORMATS,
    STDERR_MODES,
    WHILE_SWEEPING,
    FormatSetting,
    StderrMode,
    WhileSweeping,
)

ROOT = Path(__file__).resolve().parent.parent

PRESET_FINGERPRINTS = {
    "balanced": "b55cb9e1791f",
    "off": "b55cb9e1791f",  # the class defaults are balanced's
    "patient": "b55cb9e1791f",  # balanced's identity: only its budget stretches
    "quick": "5b6bc0d37e2a",
    "seed": "61feff8ac90c",
    "shared": "e3a9df8c7ed1",  # balanced's measuring, a floor of ten chunks a worker, finest tie
    "thorough": "b135b8e6e7dd",
}

# For every Policy field: another valid value. A new field fails the tests below
# until it is listed here (and its role declared in its metadata).
OTHER_VALUE: dict[str, Any] = {
    "description": "another text",
    "enabled": False,
    "margin": 0.05,
    "tie_tol": 0.03,
    "tie_break": "smallest",
    "confidence_z": 2.0,
    "tie_z": 2.0,
    "estimator": "median",
    "trim": 0.1,
    "prime": 2,
    "warmup": 1,
    "min_rounds": 4,
    "max_rounds": 20,
    "interleave": False,
    "paired": False,
    "race": False,
    "race_z": 3.0,
    "early_stop": False,
    "seed": 7,
    "refine_steps": 1,
    "refine_top": 3,
    "confirm": False,
    "confirm_alpha": 0.01,
    "confirm_min_pairs": 6,
    "confirm_max_pairs": 40,
    "confirm_share": 0.3,
    "noise_gate": False,
    "time_budget_s": 30.0,
    "hard_limit_s": 60.0,
    "extend_budget": True,
    "candidates": GeometricCandidates(),
}
OUTSIDE_IDENTITY = {"description", "enabled", "time_budget_s", "hard_limit_s", "extend_budget"}
RULE = {
    "margin",
    "tie_tol",
    "tie_break",
    "confidence_z",
    "tie_z",
    "estimator",
    "trim",
    "confirm",
    "confirm_alpha",
}
FIELDS = [f.name for f in attrs.fields(Policy)]


def test_preset_fingerprints_are_pinned() -> None:
    """The shipped presets keep their fingerprints, so cache entries keep answering."""
    # The pins are the fingerprints of the presets in policies/*.toml, equal to those of
    # the versions that hashed the TOML form. Changing a preset's measuring or choosing
    # fields on purpose changes its fingerprint (its old entries stop answering it):
    # then update PRESET_FINGERPRINTS, the one place they are listed.
    presets = chunktune.load_settings().policies
    assert sorted(PRESET_FINGERPRINTS) == preset_names()  # a new preset is pinned too
    assert {name: presets[name].fingerprint() for name in PRESET_FINGERPRINTS} == (
        PRESET_FINGERPRINTS
    )


def test_every_field_has_a_declared_role() -> None:
    """Every Policy field has a test value; identity and rule membership are as declared."""
    assert sorted(OTHER_VALUE) == sorted(FIELDS)
    fields = attrs.fields_dict(Policy)
    assert {n for n, f in fields.items() if not f.metadata.get("identity", True)} == (
        OUTSIDE_IDENTITY
    )
    assert {n for n, f in fields.items() if f.metadata.get("rule", False)} == RULE


def _base_for(name: str) -> Policy:
    """A valid policy from which ``name`` alone can change (the older tuner's schedule
    takes none of the rounds' features)."""
    if name == "interleave":
        return Policy(hard_limit_s=100.0, race=False, paired=False, confirm=False,
                      noise_gate=False)  # fmt: skip
    return Policy(hard_limit_s=100.0)


@pytest.mark.parametrize("name", FIELDS)
def test_fingerprint_changes_with_exactly_the_identity_fields(name: str) -> None:
    """Changing an identity field changes the fingerprint; a limit or the text does not."""
    base = _base_for(name)
    other = attrs.evolve(base, **{name: OTHER_VALUE[name]})
    assert other != base
    assert (other.fingerprint() != base.fingerprint()) == (name not in OUTSIDE_IDENTITY)


@pytest.mark.parametrize("name", FIELDS)
def test_rule_changes_with_exactly_the_rule_fields(name: str) -> None:
    """rule() names every field the choice is declared to depend on, and the sizes searched."""
    base = _base_for(name)
    other = attrs.evolve(base, **{name: OTHER_VALUE[name]})
    # candidates: a search other than balanced's own (here geometric) is another question
    assert (other.rule() != base.rule()) == (name in RULE or name == "candidates")


@pytest.mark.parametrize(
    "strategy",
    [
        pytest.param(BalancedCandidates(k_ratio=1.5), id="balanced-field"),
        pytest.param(BalancedCandidates(max_candidates=8), id="balanced-cap"),
        pytest.param(GeometricCandidates(max_candidates=12), id="another-strategy"),
        pytest.param(ExhaustiveCandidates(max_candidates=12), id="exhaustive"),
        pytest.param(SeedCandidates(max_candidates=12), id="seed"),
        pytest.param(ExplicitCandidates(sizes=(2, 4)), id="explicit"),
    ],
)
def test_fingerprint_covers_the_strategy_and_its_fields(strategy: Any) -> None:
    """The candidate strategy's name and each of its fields are part of the identity."""
    base = Policy(candidates=BalancedCandidates(max_candidates=12))
    assert Policy(candidates=strategy).fingerprint() != base.fingerprint()


def test_equal_policies_fingerprint_alike_however_built(tmp_path: Path) -> None:
    """A policy built in Python and the same one read from TOML have one fingerprint."""
    path = tmp_path / "chunktune.toml"
    path.write_text(
        'policy = "mine"\n[policies.mine]\nmargin = 0.02\ndescription = "x"\n'
        '[policies.mine.candidates]\nstrategy = "explicit"\nsizes = [3, 7]\n'
    )
    loaded = chunktune.load_settings(path).active
    built = Policy(margin=0.02, candidates=ExplicitCandidates(sizes=[3, 7]))
    assert loaded.fingerprint() == built.fingerprint()
    assert loaded.measurement_fields()["candidates"] == {"strategy": "explicit", "sizes": [3, 7]}


def test_an_integer_for_a_float_field_is_the_float_in_the_fingerprint(tmp_path: Path) -> None:
    """Policy(tie_z=1), Policy(tie_z=1.0) and tie_z = 1 in a file share one fingerprint."""
    path = tmp_path / "chunktune.toml"
    path.write_text('policy = "mine"\n[policies.mine]\ntie_z = 1\nmargin = 0\n')
    loaded = chunktune.load_settings(path).active
    built = Policy(tie_z=1, margin=0, time_budget_s=10)
    assert (built.tie_z, built.margin, built.time_budget_s) == (1.0, 0.0, 10.0)
    assert type(built.tie_z) is float
    assert built.fingerprint() == Policy(tie_z=1.0, margin=0.0).fingerprint()
    assert built.fingerprint() == loaded.fingerprint()
    assert type(BalancedCandidates(k_ratio=2).k_ratio) is float


@pytest.mark.parametrize("field", ["prime", "max_rounds", "seed", "confirm_min_pairs"])
def test_a_bool_is_no_integer_in_a_policy_built_in_code(field: str) -> None:
    """Policy(prime=True) is a ConfigError naming the field, not a count of one."""
    with pytest.raises(ConfigError, match=rf"true is not valid for {field}; expected an integer"):
        Policy(**{field: untyped(True)})


@pytest.mark.parametrize("estimator", ["min", "lower_mean"])
def test_a_one_sided_estimator_needs_unpaired_unconfirmed_rounds(estimator: Estimator) -> None:
    """min or lower_mean with paired or confirm (balanced's) is a ConfigError naming both."""
    with pytest.raises(ConfigError, match=rf'estimator "{estimator}" is not valid with paired'):
        Policy(estimator=estimator)
    with pytest.raises(ConfigError, match=r"not valid with confirm true"):
        Policy(estimator=estimator, paired=False)
    assert Policy(estimator=estimator, paired=False, confirm=False).estimator == estimator


def test_a_policy_file_extending_balanced_with_min_is_told_where(tmp_path: Path) -> None:
    """estimator = "min" in a policy extending balanced is reported at that policy."""
    path = tmp_path / "chunktune.toml"
    path.write_text('[policies.mine]\nextends = "balanced"\nestimator = "min"\n')
    with pytest.raises(ConfigError, match=r"policies\.mine: estimator \"min\" is not valid"):
        chunktune.load_settings(path)


def test_a_hard_limit_below_the_budget_is_told_in_the_numbers_written() -> None:
    """hard_limit_s = 5 under time_budget_s = 20 says 5 and 20, not 5.0 and 20.0."""
    with pytest.raises(ConfigError, match=r"hard_limit_s 5 is below time_budget_s 20; expected"):
        Policy(hard_limit_s=5, time_budget_s=20)


@pytest.mark.parametrize(
    ("fields", "spelled"),
    [
        pytest.param({"margin": float("nan")}, "nan", id="nan"),
        pytest.param({"margin": float("-inf")}, "-inf", id="minus-inf"),
        pytest.param({"tie_break": 'C:\\x"y'}, '"C:\\\\x\\"y"', id="backslash-quote"),
        pytest.param({"tie_break": "a\x7f"}, '"a\\u007F"', id="delete"),
        pytest.param({"margin": tuple(range(8))}, "[0, 1, 2, 3, 4, 5, ...]", id="long-tuple"),
        pytest.param({"margin": dict.fromkeys("abcde", 1)}, "{a = 1, b = 1, c = 1, d = 1, ...}",
                     id="big-table"),
    ],
)  # fmt: skip
def test_a_bad_value_built_in_code_is_spelled_as_toml_writes_it(
    fields: dict[str, Any], spelled: str
) -> None:
    """nan, -inf, escapes, and what was left out of a long array or table read as TOML's."""
    with pytest.raises(ConfigError) as info:
        Policy(**fields)
    assert f"{spelled} is not valid for {next(iter(fields))}" in str(info.value)


def test_a_one_sided_estimator_refused_names_what_it_takes_and_the_way_out() -> None:
    """lower_mean with paired and confirm names both, the faster half, and setting both false."""
    with pytest.raises(ConfigError) as info:
        Policy(estimator="lower_mean")
    message = str(info.value)
    assert 'estimator "lower_mean" is not valid with paired and confirm true' in message
    assert "paired and confirm judge a size by the differences" in message
    assert "the faster half of those differences is the luck of the draw" in message
    assert "(or set paired and confirm to false: each size's own lower_mean" in message


def test_a_hard_limit_below_the_budget_gives_every_digit_written() -> None:
    """hard_limit_s = 12.3456789 under a budget of 20 says 12.3456789, not 12.3457."""
    with pytest.raises(ConfigError, match=r"hard_limit_s 12\.3456789 is below time_budget_s 20;"):
        Policy(hard_limit_s=12.3456789, time_budget_s=20)


def test_an_integer_for_an_optional_float_field_is_a_float() -> None:
    """Policy(hard_limit_s=30) holds 30.0, as a float field given an integer does."""
    assert type(Policy(hard_limit_s=30).hard_limit_s) is float


@pytest.mark.parametrize("module", ["_settings", "_policy"])
def test_settings_import_neither_the_loader_nor_the_sweep(module: str) -> None:
    """_settings and _policy import neither the loader (_config), the converter, nor the sweep."""
    tree = ast.parse((ROOT / "chunktune" / f"{module}.py").read_text())
    imported = {
        node.module
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module
    }
    assert not imported & {"_config", "_converter", "_sweep", "_rounds", "_resolve", "_cache"}


def test_choices_come_from_their_literal_types() -> None:
    """Each settings choice lists exactly the values of the Literal its field is annotated with."""
    assert get_args(TieBreak) == TIE_BREAKS and "evidence" in TIE_BREAKS
    assert get_args(Estimator) == ESTIMATORS and "trimmed_mean" in ESTIMATORS
    assert get_args(FormatSetting) == CACHE_FORMATS and "auto" in CACHE_FORMATS
    assert get_args(StderrMode) == STDERR_MODES and "auto" in STDERR_MODES
    assert get_args(WhileSweeping) == WHILE_SWEEPING and "wait" in WHILE_SWEEPING
    for cls, name, literal in [
        (Policy, "tie_break", TieBreak),
        (Policy, "estimator", Estimator),
        (chunktune.CacheSettings, "format", FormatSetting),
        (chunktune.LogSettings, "stderr", StderrMode),
        (chunktune.RaySettings, "while_sweeping", WhileSweeping),
    ]:
        declared: object = attrs.fields_dict(cls)[name].type  # attrs types it as a class
        assert declared == literal, name
    with pytest.raises(ValueError, match='expected one of "evidence"'):
        Policy(tie_break="left")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("table", "key", "values"),
    [
        pytest.param("cache", "format", CACHE_FORMATS, id="cache.format"),
        pytest.param("log", "stderr", STDERR_MODES, id="log.stderr"),
        pytest.param("ray", "while_sweeping", WHILE_SWEEPING, id="ray.while_sweeping"),
    ],
)
def test_a_settings_file_may_give_every_value_of_each_choice(
    tmp_path: Path, table: str, key: str, values: tuple[str, ...]
) -> None:
    """Each value a choice's Literal lists is valid in a settings file and kept as written."""
    for value in values:
        path = tmp_path / f"{value}.toml"
        path.write_text(f'[{table}]\n{key} = "{value}"\n')
        assert getattr(getattr(chunktune.load_settings(path), table), key) == value


def _one_policy(**fields: Any) -> chunktune.Settings:
    """Settings of one valid policy, with ``fields`` as given."""
    return chunktune.Settings(policies={"p": Policy()}, policy="p", **fields)


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: chunktune.Policy(margin=5.0), "5.0 is not valid for margin"),
        (lambda: chunktune.Policy(min_rounds=5, max_rounds=2), "max_rounds 2 is below"),
        (lambda: chunktune.ExplicitCandidates(sizes=[]), r"\[\] is not valid for sizes"),
        (lambda: chunktune.GeometricCandidates(ratio=1.0), "1.0 is not valid for ratio"),
        (lambda: chunktune.BalancedCandidates(max_candidates=0), "0 is not valid for max_"),
        (lambda: chunktune.Settings(policies={}, policy="x"), '"x"; no policies are defined'),
        (lambda: chunktune.CacheSettings(path=""), '"" is not a path'),
        # an int past any float, a list that is none, a mapping that is none
        (lambda: chunktune.Policy(margin=10**400), r"1000+\.\.\.0+ is not valid for margin"),
        (lambda: chunktune.GeometricCandidates(ratio=10**400), "is not valid for ratio"),
        (lambda: chunktune.ExplicitCandidates(sizes=untyped(5)), "5 is not valid for sizes"),
        (lambda: chunktune.ExplicitCandidates(sizes=untyped("123")), '"123" is not valid for siz'),
        (lambda: chunktune.Settings(policies=untyped(None)), "None is not valid for policies"),
        (lambda: chunktune.Settings(policies=untyped([1, 2])),
         r"\[1, 2\] is not valid for policies"),
        # the records a Settings holds are records, not what a file's table would hold
        (lambda: _one_policy(cache=3), "3 is not valid for cache; expected a CacheSettings"),
        (lambda: _one_policy(log="never"), '"never" is not valid for log; expected a LogSett'),
        (lambda: _one_policy(ray=None), "None is not valid for ray; expected a RaySettings"),
        # a bool field takes only a bool, in every settings class
        (lambda: chunktune.Policy(race=untyped(1)),
         "1 is not valid for race; expected true or false"),
        (lambda: chunktune.RaySettings(init_local=untyped("yes")),
         '"yes" is not valid for init_local'),
        # budgets past any use would overflow the pacing's arithmetic
        (lambda: chunktune.Policy(time_budget_s=1e307), "1e\\+307 is not valid for time_budget"),
        (lambda: chunktune.Policy(hard_limit_s=1e7), "10000000.0 is not valid for hard_limit"),
        # a wait of no time at all is no wait: while_sweeping = "native" says that
        (lambda: chunktune.RaySettings(wait_timeout_s=0), "0 is not valid for wait_timeout_s"),
        # None only where a number may be left unset (hard_limit_s)
        (lambda: chunktune.Policy(time_budget_s=untyped(None)),
         "None is not valid for time_budget_s"),
        # the active policy is a name: a list is refused as one, not hashed
        (lambda: chunktune.Settings(policies={"p": Policy()}, policy=untyped(["p"])),
         r"\['p'\] is not valid for policy; expected a policy name"),
    ],
)  # fmt: skip
def test_settings_classes_built_in_code_raise_config_error(build: Any, message: str) -> None:
    """A bad value given to a settings class's constructor is a ConfigError naming it."""
    with pytest.raises(ConfigError, match=message):
        build()


@pytest.mark.parametrize(
    ("policies", "message"),
    [
        pytest.param({1: Policy()}, "1 is not valid as a name in policies", id="name-not-str"),
        pytest.param({"a": 1}, r"1 is not valid for policies\['a'\]", id="value-not-policy"),
        pytest.param(
            {"a\nb": Policy()},
            r'"a\\nb" is not valid as a policy name: .*control',
            id="name-with-newline",
        ),
    ],
)
def test_a_bad_policies_entry_is_named_for_what_is_wrong_with_it(
    policies: dict[Any, Any], message: str
) -> None:
    """A policies entry with a non-str name or a non-Policy value says which of the two is wrong."""
    with pytest.raises(ConfigError, match=message):
        chunktune.Settings(policies=policies, policy="a")


@pytest.mark.parametrize(
    ("name", "shown"),
    [
        pytest.param(3, r"3 \(int\)", id="int"),
        pytest.param(["p"], r"\['p'\] \(list\)", id="list"),
        pytest.param(Policy(), r"Policy\(.*\) \(Policy\)", id="policy"),
    ],
)
def test_a_policy_asked_for_by_a_name_that_is_no_string_is_a_usage_error(
    name: object, shown: str
) -> None:
    """get_policy(3) is the caller's mistake (InvalidArgumentError naming it), not unknown."""
    settings = _one_policy()
    with pytest.raises(
        InvalidArgumentError, match=rf"^get_policy takes a policy's name \(a str\).*, got {shown}$"
    ):
        settings.get_policy(name)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "build",
    [
        pytest.param(lambda: Policy(candidates=untyped(list(range(100_000)))), id="strategy"),
        pytest.param(lambda: chunktune.CacheSettings(path="x" * 100_000 + "\0"), id="nul-path"),
        pytest.param(lambda: chunktune.CacheSettings(path="~" + "u" * 100_000), id="no-home"),
    ],
)
def test_a_huge_bad_value_is_shown_shortened_in_its_message(build: Any) -> None:
    """A bad value of any size is named in a message of a few lines, not its whole repr."""
    with pytest.raises(ConfigError) as caught:
        build()
    assert len(str(caught.value)) < 500


def test_cache_settings_take_a_pathlib_path(tmp_path: Path) -> None:
    """CacheSettings takes a pathlib.Path for its paths and keeps them as str."""
    cache = chunktune.CacheSettings(path=tmp_path / "c.json", system_path=tmp_path / "s.json")
    assert cache == chunktune.CacheSettings(
        path=str(tmp_path / "c.json"), system_path=str(tmp_path / "s.json")
    )


class _Place:
    """An ``os.PathLike`` that is no ``pathlib`` path (a path type of a caller's own)."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __fspath__(self) -> str:
        return self.text


def test_cache_settings_take_any_os_pathlike_as_the_path_it_gives(tmp_path: Path) -> None:
    """CacheSettings takes any os.PathLike, not only pathlib's, as the text its __fspath__ gives."""
    cache = chunktune.CacheSettings(
        path=_Place(str(tmp_path / "c.json")), system_path=_Place(str(tmp_path / "s.json"))
    )
    assert (cache.path, cache.system_path) == (str(tmp_path / "c.json"), str(tmp_path / "s.json"))


def test_a_policy_written_without_extends_starts_from_balanced() -> None:
    """Policy()'s every default is the balanced preset's (its description aside)."""
    balanced = chunktune.load_settings().get_policy("balanced")
    assert attrs.evolve(Policy(), description=balanced.description) == balanced


def test_the_balanced_rule_is_pinned() -> None:
    """The rule string cache entries are matched by: changing its spelling orphans them."""
    assert Policy().rule() == (
        "margin=0.01;tie_tol=0.01;tie_break=evidence;confidence_z=0.0;tie_z=1.0;"
        "estimator=trimmed_mean;trim=0.2;confirm=true;confirm_alpha=0.05"
    )


_BASE_RULE = (
    "margin=0.01;tie_tol=0.01;tie_break=evidence;confidence_z=0.0;tie_z=1.0;"
    "estimator=trimmed_mean;trim=0.2;confirm=true;confirm_alpha=0.05"
)


@pytest.mark.parametrize(
    ("name", "rule"),
    [pytest.param(name, _BASE_RULE, id=name) for name in ("balanced", "off", "patient", "quick")]
    + [
        pytest.param(
            "seed",
            "margin=0.03;tie_tol=0.02;tie_break=toward_upper;confidence_z=0.0;tie_z=0.0;"
            'estimator=min;trim=0.2;confirm=false;confirm_alpha=0.05;candidates={"strategy":"seed"}',
            id="seed",
        ),
        pytest.param(
            "shared",
            _BASE_RULE.replace("evidence", "smallest")
            + ';candidates={"k_ratio":1.35,"min_chunks_per_thread":10,"strategy":"balanced"}',
            id="shared",
        ),
        pytest.param(
            "thorough", _BASE_RULE.replace("tie_tol=0.01", "tie_tol=0.005"), id="thorough"
        ),
    ],
)
def test_every_presets_rule_is_pinned(name: str, rule: str) -> None:
    """Each preset's rule string, as its stored entries are keyed: a change orphans them."""
    assert chunktune.load_settings().get_policy(name).rule() == rule


def test_effort_counts_every_call_a_sweep_may_make() -> None:
    """effort() is (candidates + native) x max_rounds, plus two calls a pair if it confirms."""
    sizes = chunktune.ExplicitCandidates(sizes=[3, 7, 11])
    policy = Policy(candidates=sizes, max_rounds=5, confirm_max_pairs=10)
    assert policy.effort() == (3 + 1) * 5 + 2 * 10
    assert attrs.evolve(policy, confirm=False).effort() == (3 + 1) * 5
    capped = attrs.evolve(policy, candidates=chunktune.BalancedCandidates(max_candidates=6))
    assert capped.effort() == (6 + 1) * 5 + 2 * 10


def test_numpy_numbers_in_code_built_settings_are_kept_as_plain_numbers() -> None:
    """A policy built from numpy's numbers holds ints and floats: it fingerprints and dumps."""
    import numpy as np

    p = Policy(
        margin=np.float64(0.02), min_rounds=untyped(np.int32(2)), max_rounds=untyped(np.int64(12))
    )
    assert type(p.margin) is float and type(p.max_rounds) is int and type(p.min_rounds) is int
    assert p.fingerprint() == Policy(margin=0.02, min_rounds=2, max_rounds=12).fingerprint()
    strategy = chunktune.BalancedCandidates(max_candidates=untyped(np.int64(10)))
    assert type(strategy.max_candidates) is int
    with pytest.raises(ConfigError, match="expected true or false"):
        Policy(race=np.bool_(True))  # type: ignore[arg-type]


def test_the_rounds_features_without_the_rounds_are_refused() -> None:
    """interleave = false with confirm (or race, paired, noise_gate) on is named, not ignored."""
    with pytest.raises(ConfigError, match="interleave is false but confirm is true"):
        Policy(interleave=False, race=False, paired=False, noise_gate=False)
    with pytest.raises(ConfigError, match="race, paired, confirm and noise_gate are true"):
        Policy(interleave=False)
    seed = chunktune.load_settings().policies["seed"]
    assert not seed.interleave and not (seed.confirm or seed.race or seed.paired)


def test_settings_declare_themselves_unhashable_and_policies_hash() -> None:
    """Settings.__hash__ is None (policies is a dict), equality is by value, a Policy hashes."""
    settings = chunktune.load_settings()
    assert chunktune.Settings.__hash__ is None
    with pytest.raises(TypeError, match="unhashable type: 'Settings'"):
        hash(settings)
    assert settings == attrs.evolve(settings, policies=dict(settings.policies), source="elsewhere")
    assert settings != attrs.evolve(settings, policy="quick")
    assert hash(settings.active) == hash(attrs.evolve(settings.active))


@pytest.mark.parametrize(
    ("build", "message"),
    [
        pytest.param(lambda: Policy(margin=-1), "invalid policy: -1.0 is not valid for margin; ",
                     id="policy-field"),
        pytest.param(lambda: attrs.evolve(Policy(), tie_z=untyped("x")),
                     'invalid policy: "x" is not', id="policy-evolved"),
        pytest.param(lambda: Policy(min_rounds=5, max_rounds=2),
                     "invalid policy: max_rounds 2 is below min_rounds 5", id="policy-rule"),
        pytest.param(lambda: Policy(candidates=untyped(3)),
                     "invalid policy: 3 is not valid for candidates", id="policy-strategy"),
        pytest.param(lambda: ExplicitCandidates(sizes=[0]),
                     "invalid candidates: [0] is not valid for sizes", id="candidates-size"),
        pytest.param(lambda: ExplicitCandidates(sizes=untyped(3)),
                     "invalid candidates: 3 is not valid for sizes", id="candidates-sizes"),
        pytest.param(lambda: BalancedCandidates(k_ratio=1),
                     "invalid candidates: 1.0 is not valid for k_ratio", id="candidates-field"),
        pytest.param(lambda: Policy(refine_top=0),
                     "invalid policy: 0 is not valid for refine_top", id="policy-integer"),
        pytest.param(lambda: Policy(race=untyped("yes")),
                     'invalid policy: "yes" is not valid for race', id="policy-boolean"),
        pytest.param(lambda: Policy(estimator=untyped("mode")),
                     'invalid policy: "mode" is not valid for estimator', id="policy-choice"),
        pytest.param(lambda: Policy(description=untyped(3)),
                     "invalid policy: 3 is not valid for description", id="policy-text"),
        pytest.param(lambda: SeedCandidates(max_candidates=1),
                     "invalid candidates: 1 is not valid for max_candidates", id="seed-field"),
        pytest.param(lambda: GeometricCandidates(ratio=1),
                     "invalid candidates: 1.0 is not valid for ratio", id="geometric-field"),
        pytest.param(lambda: ExhaustiveCandidates(max_candidates=1),
                     "invalid candidates: 1 is not valid for max_candidates", id="exhaustive"),
        pytest.param(lambda: chunktune.CacheSettings(format=untyped("x")),
                     'invalid settings: "x" is not valid for format', id="settings-record"),
    ],
)  # fmt: skip
def test_a_record_built_in_code_says_what_is_invalid(build: Any, message: str) -> None:
    """A bad Policy or strategy built in code is an invalid policy, not settings no file holds."""
    with pytest.raises(ConfigError) as caught:
        build()
    assert str(caught.value).startswith(message), str(caught.value)


def test_a_bad_policy_in_a_file_still_names_the_file_and_its_key(tmp_path: Path) -> None:
    """The same bad margin read from a file is invalid settings in that file, at its dotted key."""
    cfg = tmp_path / "bad.toml"
    cfg.write_text('policy = "mine"\n[policies.mine]\nmargin = -1\n')
    with pytest.raises(ConfigError) as caught:
        chunktune.load_settings(cfg)
    assert str(caught.value) == (
        f"invalid settings in {cfg}: policies.mine.margin: -1 is not valid for margin; "
        "expected a fraction in [0, 1) (0.03 is 3%)"
    )


@pytest.mark.parametrize(
    "build",
    [
        pytest.param(lambda: Policy(tie_z=True), id="policy-tie_z"),
        pytest.param(lambda: Policy(confidence_z=False), id="policy-confidence_z"),
        pytest.param(lambda: chunktune.RaySettings(lease_s=True), id="ray-lease_s"),
    ],
)
def test_a_bool_is_no_number_for_a_float_field_built_in_code(build: Any) -> None:
    """Policy(tie_z=True) is a ConfigError, not the number 1.0 (a float field takes no bool)."""
    # tie_z, confidence_z and lease_s each take 1.0 or 0.0: only the bool check refuses these
    with pytest.raises(ConfigError, match=r"(true|false) is not valid for \w+; expected a number"):
        build()


def test_an_optional_number_says_it_may_be_left_unset() -> None:
    """A bad hard_limit_s is refused with "(or inf, or leave it unset: no limit)": both valid."""
    with pytest.raises(
        ConfigError, match=r"for hard_limit_s; expected a number .* unset: no limit\)$"
    ):
        Policy(hard_limit_s=-1.0)
    assert Policy(hard_limit_s=None).hard_limit_s is None


@pytest.mark.parametrize(
    "build",
    [
        pytest.param(lambda: chunktune.CacheSettings(format=untyped(3)), id="format-int"),
        pytest.param(lambda: chunktune.CacheSettings(format=untyped(None)), id="format-none"),
        pytest.param(lambda: chunktune.LogSettings(stderr=untyped(True)), id="stderr-bool"),
        pytest.param(
            lambda: chunktune.RaySettings(while_sweeping=untyped(["wait"])), id="sweeping-list"
        ),
        pytest.param(lambda: Policy(estimator=untyped(1)), id="estimator-int"),
    ],
)
def test_a_choice_given_no_string_in_code_is_refused(build: Any) -> None:
    """A choice field given a number, None, a bool or a list is a ConfigError listing options."""
    with pytest.raises(ConfigError, match=r"is not valid for \w+; expected one of \"\w+\", "):
        build()


@pytest.mark.parametrize(
    ("field", "value", "valid"),
    [
        pytest.param("lease_s", 0.05, False, id="lease-below"),
        pytest.param("lease_s", 0.1, True, id="lease-floor"),
        pytest.param("lease_s", 3600.0, True, id="lease-ceiling"),
        pytest.param("lease_s", 3600.5, False, id="lease-above"),
        pytest.param("wait_timeout_s", 1e6, True, id="wait-ceiling"),
        pytest.param("wait_timeout_s", 1e6 + 1, False, id="wait-above"),
    ],
)
def test_ray_settings_keep_their_lease_and_wait_in_range(
    field: str, value: float, valid: bool
) -> None:
    """lease_s is in [0.1, 3600] and wait_timeout_s in (0, 1e6]; a value past either is named."""
    given: dict[str, Any] = {field: value}  # one field, named at run time
    if valid:
        assert getattr(chunktune.RaySettings(**given), field) == value
    else:
        with pytest.raises(ConfigError, match=rf"is not valid for {field}; expected a number in "):
            chunktune.RaySettings(**given)


def test_an_unknown_policy_lists_the_known_ones_sorted() -> None:
    """Settings(policy="x") beside policies zeta and alpha lists them as alpha, zeta."""
    with pytest.raises(ConfigError, match=r'unknown policy "x"; known policies: alpha, zeta$'):
        chunktune.Settings(policies={"zeta": Policy(), "alpha": Policy()}, policy="x")


def test_an_unknown_policy_among_thousands_lists_twenty_and_counts_the_rest() -> None:
    """An unknown policy beside 1000 defined ones names the first 20 sorted and counts 980."""
    policies = {f"p{i:04d}": Policy() for i in range(1000)}
    with pytest.raises(ConfigError) as caught:
        chunktune.Settings(policies=policies, policy="zzz")
    listed = ", ".join(f"p{i:04d}" for i in range(20))
    assert str(caught.value).endswith(f"known policies: {listed} and 980 more")


def test_settings_keep_their_own_copy_of_the_policies_given() -> None:
    """A policies dict changed after Settings(policies=d) changes nothing in the Settings."""
    given = {"p": Policy()}
    settings = chunktune.Settings(policies=given, policy="p")
    given["q"] = 3  # type: ignore[assignment]  # would never pass the validator
    del given["p"]
    assert list(settings.policies) == ["p"]
    assert settings.active == Policy()


@pytest.mark.parametrize(
    ("value", "message"),
    [
        pytest.param("", '"" is not a path', id="empty"),
        pytest.param("a\0b", "NUL", id="nul"),
        pytest.param(3, "3 is not valid for system_path; expected a path", id="int"),
    ],
)
def test_a_bad_system_cache_path_built_in_code_is_refused(value: Any, message: str) -> None:
    """CacheSettings(system_path=...) is checked as path is: an empty, NUL or non-str one raises."""
    with pytest.raises(ConfigError, match=message):
        chunktune.CacheSettings(system_path=value)
