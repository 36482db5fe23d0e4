"""A policy key its other values leave without effect is named, and really changes no sweep."""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Any

import attrs
import pytest

import chunktune
from chunktune import ExplicitCandidates, Policy, SeedCandidates, load_settings
from chunktune._candidates import candidate_list
from chunktune._cli import main
from chunktune._idle_keys import CONFIRM_ONLY, ROUNDS_ONLY, idle_keys
from chunktune._probe import SweepResult
from chunktune._sweep import sweep
from chunktune.sim import Noise, SimulatedWorkload

_N, _T = 2048, 16


def _preset(name: str, **changes: Any) -> Policy:
    return attrs.evolve(load_settings().get_policy(name), **changes)


def _swept(policy: Policy) -> SweepResult:
    """One sweep of a noisy end-heavy batch whose best size is not native's: each seed the same."""
    workload = SimulatedWorkload.from_layout(
        "blocked", num_envs=_N, nthread=_T, noise=Noise(sigma=0.03), seed=5
    )
    return sweep(workload, candidate_list(policy.candidates, _N, _T), policy)


# each idle key, a value other than the policy's own, for the rule that idles it
_OTHER: dict[str, Any] = {
    "min_rounds": 4,
    "early_stop": False,
    "race_z": 1.0,
    "refine_steps": 0,
    "refine_top": 1,
    "extend_budget": True,
    "confirm_alpha": 0.3,
    "confirm_min_pairs": 2,
    "confirm_max_pairs": 8,
    "confirm_share": 0.0,
    "noise_gate": False,
}

_CASES = [
    pytest.param(_preset("seed", hard_limit_s=60.0), ROUNDS_ONLY, id="interleave-false"),
    pytest.param(
        _preset("balanced", confirm=False, time_budget_s=3.0, hard_limit_s=60.0),
        (*CONFIRM_ONLY, "noise_gate"),
        id="confirm-false",
    ),
    pytest.param(
        _preset("balanced", candidates=ExplicitCandidates(sizes=(2, 40, 128))),
        ("refine_steps",),
        id="explicit",
    ),
    pytest.param(
        _preset("balanced", candidates=SeedCandidates()), ("refine_steps",), id="seed-strategy"
    ),
]


@pytest.mark.parametrize(("policy", "keys"), _CASES)
def test_each_key_named_idle_changes_nothing_a_sweep_does(
    policy: Policy, keys: tuple[str, ...]
) -> None:
    """Under the value that idles it, each named key changes no probe, estimate or choice."""
    assert [k for k, _ in idle_keys(policy, dict.fromkeys(keys))] == list(keys)
    before = _swept(policy)
    for key in keys:
        assert _swept(attrs.evolve(policy, **{key: _OTHER[key]})) == before, key


def test_the_same_keys_change_a_sweep_where_they_are_read() -> None:
    """Teeth: refine_steps, min_rounds and the confirmation's keys change a balanced sweep."""
    policy = _preset("balanced", hard_limit_s=60.0)
    assert idle_keys(policy, dict.fromkeys(_OTHER)) == []
    before = _swept(policy)
    for key in ("refine_steps", "min_rounds", "confirm_max_pairs", "confirm_alpha"):
        assert _swept(attrs.evolve(policy, **{key: _OTHER[key]})) != before, key


def test_a_disabled_policy_names_every_key_it_sets_but_its_switch_and_words() -> None:
    """enabled = false: every key but enabled, description and extends is idle, in table order."""
    own = {"extends": "quick", "enabled": False, "description": "x", "margin": 0.1, "seed": 3}
    named = idle_keys(_preset("quick", enabled=False, margin=0.1, seed=3), own)
    assert named == [
        (k, "with enabled = false the policy never measures") for k in ("margin", "seed")
    ]


def test_a_key_idle_for_two_reasons_is_named_once_for_the_first() -> None:
    """refine_steps under interleave = false with seed candidates: named once, for the schedule."""
    (named,) = idle_keys(_preset("seed"), {"refine_steps": 2})
    assert named[0] == "refine_steps" and named[1].startswith("with interleave = false")


def test_loading_a_file_warns_once_for_each_idle_key_it_writes(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The loader names the file, the key's path and why; an inherited or keying value is not."""
    file = tmp_path / "chunktune.toml"
    file.write_text(
        'policy = "mine"\n'
        # confirm_alpha is read by the rule, which keys the cache: not idle
        "[policies.mine]\nconfirm = false\nconfirm_alpha = 0.1\nconfirm_max_pairs = 8\n"
        "refine_steps = 5\n"
        '[policies.mine.candidates]\nstrategy = "explicit"\nsizes = [3, 7]\n'
        # extends mine: its idle values are mine's, said there
        '[policies.child]\nextends = "mine"\nmargin = 0.02\n'
    )
    caplog.set_level(logging.WARNING, logger="chunktune")
    settings = chunktune.load_settings(file)
    assert settings.get_policy("child").confirm_max_pairs == 8
    said = [r.getMessage() for r in caplog.records]
    assert said == [
        f"chunktune: settings file {file}: policies.mine.confirm_max_pairs has no effect: with "
        "confirm = false nothing is confirmed",
        f"chunktune: settings file {file}: policies.mine.refine_steps has no effect: "
        "explicit candidates are never refined",
    ]


def test_a_file_whose_keys_all_act_loads_without_a_word(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The shipped chunktune.toml's policies, and presets tweaked, warn about nothing."""
    file = tmp_path / "chunktune.toml"
    file.write_text(
        (Path(__file__).parent.parent / "chunktune.toml").read_text()
        + "[policies.quick]\nrefine_steps = 3\n"
    )
    caplog.set_level(logging.WARNING, logger="chunktune")
    chunktune.load_settings(file)
    assert caplog.records == []


def test_a_key_the_rules_between_fields_demand_is_loaded_without_a_word(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """interleave = false needs noise_gate = false where balanced gates: writing it is not idle."""
    file = tmp_path / "chunktune.toml"
    file.write_text(
        'policy = "mine"\n[policies.mine]\n'
        "interleave = false\npaired = false\nrace = false\nconfirm = false\nnoise_gate = false\n"
    )
    caplog.set_level(logging.WARNING, logger="chunktune")
    assert not chunktune.load_settings(file).get_policy("mine").noise_gate
    assert caplog.records == []


def test_an_idle_key_the_policy_is_refused_without_is_not_named(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """seed with max_rounds = 3 needs min_rounds <= 3: idle (interleave = false), yet demanded."""
    file = tmp_path / "chunktune.toml"
    file.write_text('[policies.mine]\nextends = "seed"\nmax_rounds = 3\nmin_rounds = 3\n')
    caplog.set_level(logging.WARNING, logger="chunktune")
    assert chunktune.load_settings(file).get_policy("mine").min_rounds == 3
    assert caplog.records == []


_GATE_ON = {"noise_gate": True, "confirm_share": 0.2}


@pytest.mark.parametrize(
    ("policy", "own", "named"),
    [
        pytest.param("balanced", _GATE_ON, ["noise_gate", "confirm_share"], id="gate-on"),
        pytest.param("balanced", {**_GATE_ON, "noise_gate": False}, ["confirm_share"], id="off"),
        pytest.param("seed", {"refine_steps": 0, "extend_budget": False}, [], id="off-values"),
        pytest.param(
            "seed",
            {"refine_steps": 2, "extend_budget": True},
            ["refine_steps", "extend_budget"],
            id="on-values",
        ),
    ],
)
def test_a_value_that_asks_for_nothing_is_not_named(
    policy: str, own: dict[str, Any], named: list[str]
) -> None:
    """A switch written false, or refine_steps = 0, misleads no one; the same key on is named."""
    assert [k for k, _ in idle_keys(_preset(policy, confirm=False), own)] == named


def test_a_file_read_again_names_an_idle_key_again_only_once_its_value_changes(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Loaded at every reset (compat on a loop), a file warns once, and again for a new value."""
    monkeypatch.chdir(tmp_path)
    file = tmp_path / "chunktune.toml"
    file.write_text('policy = "mine"\n[policies.mine]\nconfirm = false\nconfirm_share = 0.1\n')
    caplog.set_level(logging.WARNING, logger="chunktune")
    for path in (file, file, "chunktune.toml"):  # the same file, named relatively
        chunktune.load_settings(path)
    assert len(caplog.records) == 1
    file.write_text(file.read_text().replace("0.1", "0.2"))
    chunktune.load_settings(file)
    assert len(caplog.records) == 2 and "confirm_share" in caplog.records[1].getMessage()


# what `policy show` comments out of each preset: a table of one's own starts elsewhere
_LEFT_OUT = {"seed": ["min_rounds"]}  # 20, under interleave = false, which never reads it


def _pasted(folder: Path, shown: str, *, uncommented: bool = False) -> Path:
    """``policy show``'s output pasted as its second line says, as policy ``copy``; with
    ``uncommented``, every line it commented out (``# key = value``, a table) pasted too."""
    lines = shown.splitlines()
    if uncommented:
        lines = [ln[2:] if re.match(r"# (\w+ = |\[|    |\])", ln) else ln for ln in lines]
    table = "\n".join(lines).replace("[candidates]", "[policies.copy.candidates]")
    file = folder / "pasted.toml"
    file.write_text(f"[policies.copy]\n{table}\n")
    return file


def _commented(shown: str) -> list[str]:
    """The keys ``policy show`` printed commented out: ``# key = value`` lines."""
    return [ln[2:].split(" = ")[0] for ln in shown.splitlines() if re.match(r"# \w+ = ", ln)]


@pytest.mark.parametrize("name", chunktune._config.preset_names())
def test_every_preset_shown_and_pasted_back_loads_without_a_warning(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
    name: str,
) -> None:
    """Each preset's `policy show`, pasted back, warns nothing and measures and picks alike."""
    monkeypatch.chdir(tmp_path)  # no chunktune.toml here: the shipped presets
    assert main(["policy", "show", name]) == 0
    shown = capsys.readouterr().out
    caplog.set_level(logging.WARNING, logger="chunktune")
    settings = chunktune.load_settings(_pasted(tmp_path, shown))
    assert caplog.records == []
    left_out = _commented(shown)
    assert left_out == _LEFT_OUT.get(name, [])
    copy, preset = settings.get_policy("copy"), settings.get_policy(name)
    # left out, a key takes a table of one's own's value; that is all that differs
    assert copy == attrs.evolve(preset, **{k: getattr(copy, k) for k in left_out})
    assert (copy.rule(), copy.effort()) == (preset.rule(), preset.effort())
    assert [k for k, _ in idle_keys(preset, dict.fromkeys(left_out, 1))] == left_out


_USER = """
[policies.dead]
enabled = false
margin = 0.05
seed = 3
[policies.dead.candidates]
strategy = "balanced"
max_candidates = 4

[policies.open]
extends = "quick"
confirm = false
noise_gate = false
confirm_alpha = 0.2
refine_steps = 4
candidates = [3, 7]

[policies.pairs]
confirm = false
noise_gate = false
confirm_min_pairs = 100
confirm_max_pairs = 200

[policies.keyed]
confirm = false
noise_gate = false
confirm_alpha = 0.3
"""


@pytest.mark.parametrize("name", ["dead", "open", "pairs", "keyed"])
def test_a_user_policy_shown_and_pasted_back_keeps_its_rule_and_its_cache_entries(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
    name: str,
) -> None:
    """A key the rule reads (confirm_alpha, unconfirmed) stays live: the copy shares the entries."""
    config = tmp_path / "user.toml"
    config.write_text(_USER)
    monkeypatch.chdir(tmp_path)
    assert main(["policy", "show", name, "--config", str(config)]) == 0
    shown = capsys.readouterr().out
    caplog.clear()
    caplog.set_level(logging.WARNING, logger="chunktune")
    copy = chunktune.load_settings(_pasted(tmp_path, shown)).get_policy("copy")
    assert caplog.records == []
    original = chunktune.load_settings(config).get_policy(name)
    assert copy.rule() == original.rule()
    # a disabled policy spends nothing: its max_candidates, commented out, is no effort
    assert copy.effort() == original.effort() or not original.enabled


@pytest.mark.parametrize(
    ("name", "said"),
    [
        pytest.param(
            "dead",
            [
                "# left out, as it would have no effect: with enabled = false the policy "
                "never measures",
                "# seed = 3",  # margin = 0.05 stays: the rule reads it
                "# [candidates]",
            ],
            id="disabled",
        ),
        pytest.param(
            "open",
            [
                "# left out, as it would have no effect: explicit candidates are never refined",
                "# refine_steps = 4",
                "# left out, as it would have no effect: with confirm = false nothing is confirmed",
                "# confirm_max_pairs = 12",  # quick's; a table of one's own starts at 64
            ],
            id="unconfirmed",
        ),
        pytest.param(
            "pairs",
            [
                "# left out, as it would have no effect: with confirm = false nothing is confirmed",
                "# confirm_min_pairs = 100",
                # without the 100 above, no longer demanded: its own default is 4 <= 64
                "# confirm_max_pairs = 200",
            ],
            id="each-named-against-what-is-left",
        ),
    ],
)
def test_a_user_policys_idle_keys_are_shown_commented_out_under_why(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
    name: str,
    said: list[str],
) -> None:
    """Idle keys print as comments under why: pasted, no warning; uncommented, the same policy."""
    config = tmp_path / "user.toml"
    config.write_text(_USER)
    monkeypatch.chdir(tmp_path)
    assert main(["policy", "show", name, "--config", str(config)]) == 0
    shown = capsys.readouterr().out
    assert [ln for ln in shown.splitlines() if ln in said] == said
    caplog.clear()
    caplog.set_level(logging.WARNING, logger="chunktune")
    chunktune.load_settings(_pasted(tmp_path, shown))
    assert caplog.records == []
    whole = chunktune.load_settings(_pasted(tmp_path, shown, uncommented=True))
    assert whole.get_policy("copy") == chunktune.load_settings(config).get_policy(name)
    assert caplog.records  # the keys commented out are the ones the loader names


@pytest.mark.parametrize(
    ("name", "block"),
    [
        pytest.param(
            "dead",
            [
                "# left out, as it would have no effect: with enabled = false the policy "
                "never measures",
                "# seed = 3",
                "# [candidates]",
                '# strategy = "balanced"',
                "# max_candidates = 4",
                "# min_chunks_per_thread = 2",
                "# k_ratio = 1.35",
            ],
            id="a-table-left-out",
        ),
        pytest.param(
            "pairs",
            [
                "# left out, as it would have no effect: with confirm = false nothing is confirmed",
                "# confirm_min_pairs = 100",
                "# confirm_max_pairs = 200",
                "",
                "[candidates]",
            ],
            id="a-table-kept",
        ),
    ],
)
def test_keys_left_out_print_after_the_plain_keys_and_apart_from_a_table(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    name: str,
    block: list[str],
) -> None:
    """Keys left out follow the plain keys as commented TOML lines, a blank line before a table."""
    config = tmp_path / "user.toml"
    config.write_text(_USER)
    monkeypatch.chdir(tmp_path)
    assert main(["policy", "show", name, "--config", str(config)]) == 0
    lines = capsys.readouterr().out.splitlines()
    at = lines.index(block[0])
    assert all(re.fullmatch(r"\w+ = \S.*", ln) for ln in lines[2:at]), lines[2:at]
    assert lines[at : at + len(block)] == block
    if name == "dead":  # its only table is left out: nothing follows it
        assert len(lines) == at + len(block)
