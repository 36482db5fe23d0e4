"""The CLI's --n-variants and --model-label: a trainer's domain-randomized entry named from
the terminal, so that tune answers it and check re-measures it."""

from __future__ import annotations

import json
from pathlib import Path

import mujoco
import numpy as np
import pytest

import chunktune
from chunktune._cli import main

pytestmark = pytest.mark.mujoco

# a plane and two free boxes resting on it: contact, tiny and fast
TINY_XML = """
<mujoco>
  <option timestep="0.005"/>
  <worldbody>
    <geom type="plane" size="2 2 .1"/>
    <body pos="0 0 .1"><freejoint/><geom type="box" size=".1 .1 .1"/></body>
    <body pos=".4 0 .1"><freejoint/><geom type="box" size=".1 .1 .1"/></body>
  </worldbody>
</mujoco>
"""

FAST_CONFIG = """
policy = "fast"

[policies.fast]
extends = "quick"
time_budget_s = 1.0
max_rounds = 3
# a loaded machine's calls too slow for 1 s to judge one candidate: stretched, not native
extend_budget = true
hard_limit_s = 60.0
"""

SMALL = ["--num-envs", "16", "--nthread", "2", "--nstep", "2"]


@pytest.fixture
def model(isolated: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The tiny model as an XML file, and a fast policy as the settings file."""
    config = isolated / "fast.toml"
    config.write_text(FAST_CONFIG)
    monkeypatch.setenv("CHUNKTUNE_CONFIG", str(config))
    path = isolated / "boxes.xml"
    path.write_text(TINY_XML)
    return path


def _trainers_draw(model: Path, seed: int) -> chunktune.Decision:
    """What a DR trainer resolves: its own two variants of the model, under a label."""
    rng = np.random.default_rng(seed)
    variants = []
    for _ in range(2):
        m = mujoco.MjModel.from_xml_path(str(model))
        m.body_mass[1:] *= rng.uniform(0.8, 1.2, size=m.nbody - 1)
        variants.append(m)
    with chunktune.RolloutWorkload(
        variants, num_envs=16, nthread=2, nstep=2, model_label="boxes-dr"
    ) as workload:
        return chunktune.resolve_sync(workload)


def test_tune_and_check_name_a_trainers_labelled_entry(
    model: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """tune and check with the trainer's --n-variants and --model-label find its entry."""
    trained = _trainers_draw(model, seed=0)
    assert trained.source == "benchmark"
    capsys.readouterr()
    family = ["--n-variants", "2", "--model-label", "boxes-dr"]
    assert main(["tune", str(model), *SMALL, *family, "--json", "-q"]) == 0
    tuned = json.loads(capsys.readouterr().out)
    assert (tuned["source"], tuned["key"]) == ("cache", trained.key)
    # check finds the entry (exit 0, whatever the verdict), where it would say "nothing cached"
    assert main(["check", str(model), *SMALL, *family, "--seconds", "0.2", "--dry-run",
                 "--json", "-q"]) == 0  # fmt: skip
    assert json.loads(capsys.readouterr().out)["key"] == trained.key
    # without them the same file is another job: nothing cached, and the tune named keeps them
    assert main(["check", str(model), *SMALL, "--json", "-q"]) == 1
    assert json.loads(capsys.readouterr().out)["key"] != trained.key
    assert main(["check", str(model), *SMALL, "--model-label", "boxes-dr", "-q"]) == 1
    err = capsys.readouterr().err
    assert '2 steps per rollout, model_label "boxes-dr"' in err
    assert "--model-label boxes-dr` tunes it" in err


def test_the_cache_list_names_the_label_beside_the_file(
    model: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An entry tuned with --model-label lists as its file and its label."""
    assert main(["tune", str(model), *SMALL, "--model-label", "boxes-dr", "--json", "-q"]) == 0
    capsys.readouterr()
    assert main(["cache", "list", "--json"]) == 0
    (listed,) = json.loads(capsys.readouterr().out)
    assert listed["model"] == "mujoco.rollout boxes.xml (boxes-dr)"
    assert listed["signature"]["model_label"] == "boxes-dr"


def test_one_variant_is_named_in_the_singular(
    model: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--n-variants 1 reads "1 variant" in the batch's words, as its envs and steps do."""
    assert main(["check", str(model), *SMALL, "--n-variants", "1", "-q"]) == 1
    assert "2 steps per rollout, 1 variant, policy fast" in capsys.readouterr().err


@pytest.mark.parametrize("command", ["tune", "check", "record"])
@pytest.mark.parametrize(
    ("args", "message"),
    [
        pytest.param(["--model-label", "x"], '--model-label "x": the demo scene has no',
                     id="label-for-the-demo"),
        pytest.param(["--n-variants", "2"], '--n-variants "2": the demo scene has no',
                     id="variants-for-the-demo"),
        pytest.param(["MODEL", "--model-label", ""], "model_label '' is not a name for the model",
                     id="empty-label"),
        pytest.param(["MODEL", "--model-label", "  "], "model_label '  ' is not a name for the "
                     "model or its family of variants: it is only whitespace", id="blank-label"),
        pytest.param(["MODEL", "--model-label", "dr\nv2"], "model_label 'dr\\nv2' is not a name "
                     "for the model or its family of variants: it holds a control character "
                     "(U+000A)", id="newline-in-label"),
        pytest.param(["MODEL", "--model-label", "x" * 300], "is not a name for the model or its "
                     "family of variants: it is 300 characters long; expected a name that prints, "
                     "of 1 to 256 characters", id="300-character-label"),
        pytest.param(["MODEL", "--n-variants", "0"], "--n-variants: must be an integer >= 1",
                     id="no-variants"),
        pytest.param(["MODEL", "--n-variants", "17"], "17 model variants for num_envs=16",
                     id="more-variants-than-envs"),
    ],
)  # fmt: skip
def test_a_bad_family_is_exit_2_with_one_line(
    model: Path,
    capsys: pytest.CaptureFixture[str],
    command: str,
    args: list[str],
    message: str,
) -> None:
    """Variants or a label for the demo, a label that is no name, a bad count: exit 2, one line."""
    argv = [command, *(str(model) if a == "MODEL" else a for a in args), *SMALL]
    if command == "record":
        argv += ["-o", "trace.json"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err.splitlines()[-1], err
    assert "Traceback" not in err
    assert not Path("cache.json").exists() and not Path("trace.json").exists()
