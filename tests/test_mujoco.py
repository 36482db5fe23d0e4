"""Tests of the MuJoCo adapter: RolloutWorkload, from_xml and the demo scene."""

from __future__ import annotations

import copy
import inspect
import os
import pathlib
import pickle
import re
import shutil
import subprocess
import sys
import tempfile
import types
from collections.abc import Callable
from multiprocessing.reduction import ForkingPickler
from typing import Any

import mujoco
import mujoco.rollout
import numpy as np
import pytest
from _users import child_env, unprivileged

import chunktune
from chunktune._errors import InvalidArgumentError, UsageError
from chunktune._mujoco import (
    RolloutWorkload,
    WarningTally,
    batch_seconds,
    demo_model_path,
    demo_workload,
    model_digest,
    per_env_costs,
    warnings_counted,
)
from chunktune._workload import Workload

pytestmark = pytest.mark.mujoco

FULLPHYSICS = mujoco.mjtState.mjSTATE_FULLPHYSICS

# A floor, a free box that lands on it, a free capsule and an actuated pendulum
# with sensors: contact, quaternions, controls and sensordata in a few bodies.
TINY_XML = """
<mujoco>
  <option timestep="0.005" iterations="{iterations}"/>
  <worldbody>
    <geom type="plane" size="2 2 .1"/>
    <body name="box" pos="0 0 .11">
      <freejoint/>
      <geom type="box" size="{box} .1 .1"/>
    </body>
    <body name="capsule" pos=".5 0 .5">
      <freejoint/>
      <geom type="capsule" size=".05 .1"/>
    </body>
    <body name="arm" pos="-.5 0 1">
      <joint name="hinge" axis="0 1 0"/>
      <geom type="capsule" fromto="0 0 0 .3 0 0" size=".03"/>
    </body>
  </worldbody>
  <actuator>
    <motor joint="hinge" gear="5"/>
  </actuator>
  <sensor>
    <jointpos joint="hinge"/>
    <framepos objtype="body" objname="box"/>
  </sensor>
</mujoco>
"""

KEYFRAME_XML = """
<mujoco>
  <worldbody>
    <body pos="0 0 1">
      <joint name="slide" type="slide" axis="0 0 1"/>
      <geom size=".1"/>
    </body>
  </worldbody>
  <keyframe>
    <key qpos="0.25"/>
  </keyframe>
</mujoco>
"""


def tiny_model(box: float = 0.1, iterations: int = 50) -> Any:
    return mujoco.MjModel.from_xml_string(TINY_XML.format(box=box, iterations=iterations))


def tiny_workload(**kwargs: Any) -> RolloutWorkload:
    args: dict[str, Any] = {"num_envs": 12, "nthread": 2, "nstep": 6}
    args.update(kwargs)
    model = args.pop("model", None) or tiny_model()
    return RolloutWorkload(model, **args)


def ncon(model: Any, state: np.ndarray) -> int:
    data = mujoco.MjData(model)
    # a writeable copy: mujoco before 3.4 refuses a read-only state array
    mujoco.mj_setState(model, data, np.array(state), FULLPHYSICS)
    mujoco.mj_forward(model, data)
    return int(data.ncon)


class CountingRollout(mujoco.rollout.Rollout):  # type: ignore[misc]
    """A caller's pool that counts its rollout calls."""

    def __init__(self, nthread: int) -> None:
        super().__init__(nthread=nthread)
        self.calls = 0

    def rollout(self, *args: Any, **kwargs: Any) -> Any:
        self.calls += 1
        return super().rollout(*args, **kwargs)


# -- running -------------------------------------------------------------------------


def test_run_returns_positive_seconds_and_chunk_size_never_changes_outputs() -> None:
    """run() returns positive float seconds, and outputs are bit-identical for chunks 1, 7, None."""
    with tiny_workload() as workload:
        outputs = []
        for chunk in (1, 7, None):
            seconds = workload.run(chunk)
            assert isinstance(seconds, float)
            assert seconds > 0
            outputs.append((workload.state.copy(), workload.sensordata.copy()))
    for state, sensordata in outputs[1:]:
        assert np.array_equal(state, outputs[0][0])
        assert np.array_equal(sensordata, outputs[0][1])
    assert not np.array_equal(outputs[0][0][:, -1], np.broadcast_to(outputs[0][0][0, -1], (12, 29)))


def test_workload_implements_the_protocol_and_reports_its_shape() -> None:
    """A RolloutWorkload is a chunktune Workload with the sizes it was given."""
    model = tiny_model()
    workload = RolloutWorkload(model, num_envs=5, nthread=3, nstep=4)
    assert isinstance(workload, Workload)
    assert (workload.num_envs, workload.nthread, workload.nstep) == (5, 3, 4)
    assert workload.nstate == mujoco.mj_stateSize(model, FULLPHYSICS)
    # its own copy: editing the caller's model later changes neither the runs nor the key
    (own,) = workload.models
    assert own is not model and model_digest([own]) == model_digest([model])
    assert workload.n_variants == 1
    assert workload.model_file is None
    assert workload.state.shape == (5, 4, workload.nstate)
    assert workload.sensordata.shape == (5, 4, model.nsensordata)


@pytest.mark.parametrize(
    "ship",
    [
        pytest.param(pickle.dumps, id="pickle"),
        pytest.param(ForkingPickler.dumps, id="multiprocessing"),
        pytest.param(copy.deepcopy, id="deepcopy"),
    ],
)
def test_a_workload_sent_to_another_process_is_refused_saying_what_to_send(
    ship: Callable[[Any], object],
) -> None:
    """Pickling a RolloutWorkload raises UsageError naming it and the Decision to send instead."""
    workload = tiny_workload()
    workload.run(None)  # its pool made
    with pytest.raises(UsageError, match=r"RolloutWorkload\(.*cannot be pickled.*Decision"):
        ship(workload)
    workload.close()


def test_single_thread_workload_runs_on_a_pool() -> None:
    """nthread=1 still runs through a pool and gives the same outputs as two threads."""
    one = tiny_workload(nthread=1)
    two = tiny_workload(nthread=2)
    assert one.run(None) > 0
    two.run(3)
    assert np.array_equal(one.state, two.state)


def test_control_reaches_the_actuator() -> None:
    """A (nu,) control is broadcast to every env and step and moves the actuated joint."""
    still = tiny_workload(perturbation=0.0)
    pushed = tiny_workload(perturbation=0.0, control=[1.0])
    still.run(None)
    pushed.run(None)
    hinge = 0  # the jointpos sensor comes first
    assert np.all(pushed.sensordata[:, -1, hinge] > still.sensordata[:, -1, hinge])


@pytest.mark.parametrize(
    "shape",
    [pytest.param((6, 1), id="nstep-nu"), pytest.param((12, 6, 1), id="full")],
)
def test_control_shapes_are_accepted(shape: tuple[int, ...]) -> None:
    """control may be (nstep, nu) or (num_envs, nstep, nu)."""
    workload = tiny_workload(control=np.full(shape, 0.5))
    assert workload.run(2) > 0


# -- initial states --------------------------------------------------------------------


def test_default_states_are_seeded_perturbations_with_unit_quaternions() -> None:
    """Default states differ per env, repeat per seed, change with it, and keep unit quaternions."""
    a = tiny_workload(seed=3).initial_state
    b = tiny_workload(seed=3).initial_state
    c = tiny_workload(seed=4).initial_state
    assert np.array_equal(a, b)
    assert not np.array_equal(a, c)
    assert len({row.tobytes() for row in a}) == len(a)
    qpos = a[:, 1:16]  # after time: the two free joints' qpos
    for start in (3, 10):
        assert np.allclose(np.linalg.norm(qpos[:, start : start + 4], axis=1), 1.0)


def test_default_states_start_from_the_first_keyframe() -> None:
    """A model with a keyframe starts from it rather than from the reset state."""
    model = mujoco.MjModel.from_xml_string(KEYFRAME_XML)
    workload = RolloutWorkload(model, num_envs=4, nthread=2, perturbation=0.001)
    assert np.allclose(workload.initial_state[:, 1], 0.25, atol=0.01)


def test_initial_state_of_one_row_is_tiled() -> None:
    """An (nstate,) initial_state is used for every env."""
    row = tiny_workload(num_envs=1).initial_state[0]
    workload = tiny_workload(initial_state=row)
    assert np.array_equal(workload.initial_state, np.tile(row, (12, 1)))
    workload.run(None)
    assert np.array_equal(workload.state[0], workload.state[11])


@pytest.mark.parametrize(
    ("name", "value", "shown"),
    [
        pytest.param("initial_state", np.zeros((3, 29)), "(3, 29)", id="state-rows"),
        pytest.param("initial_state", np.zeros(30), "(30,)", id="state-width"),
        pytest.param("control", np.zeros((12, 5, 1)), "(12, 5, 1)", id="control-nstep"),
        pytest.param("control", np.zeros(2), "(2,)", id="control-nu"),
    ],
)
def test_misshapen_inputs_are_rejected_with_their_shape(name: str, value: Any, shown: str) -> None:
    """An initial_state or control of the wrong shape raises InvalidArgumentError naming it."""
    with pytest.raises(
        InvalidArgumentError, match=rf"{name} must have shape.*got {re.escape(shown)}"
    ):
        tiny_workload(**{name: value})


def test_non_finite_initial_state_is_rejected() -> None:
    """An initial_state holding NaN raises InvalidArgumentError."""
    with pytest.raises(InvalidArgumentError, match="finite"):
        tiny_workload(initial_state=np.full(29, np.nan))


# -- argument checks -------------------------------------------------------------------


@pytest.mark.parametrize("name", ["num_envs", "nthread", "nstep"])
@pytest.mark.parametrize(
    ("value", "shown"),
    [
        pytest.param(0, "0", id="zero"),
        pytest.param(-2, "-2", id="negative"),
        pytest.param(True, "True", id="bool"),
        pytest.param(2.5, "2.5", id="float"),
    ],
)
def test_bad_counts_are_rejected_with_the_value(name: str, value: Any, shown: str) -> None:
    """A num_envs, nthread or nstep that is not an integer >= 1 raises naming it and its value."""
    with pytest.raises(InvalidArgumentError, match=rf"{name} must be an integer >= 1, got {shown}"):
        tiny_workload(**{name: value})


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        pytest.param(0, "0", id="zero"),
        pytest.param(-3, "-3", id="negative"),
        pytest.param(True, "True", id="bool"),
        pytest.param(1.5, "1.5", id="float"),
        pytest.param("4", "'4'", id="str"),
    ],
)
def test_bad_chunk_size_is_rejected_with_the_value(value: Any, shown: str) -> None:
    """run() with a chunk_size that is neither None nor an integer >= 1 raises naming it."""
    workload = tiny_workload()
    with pytest.raises(
        InvalidArgumentError, match=rf"chunk_size must be an integer >= 1, got {shown}"
    ):
        workload.run(value)


@pytest.mark.parametrize(
    ("model", "message"),
    [
        pytest.param(["model.xml"], r"variant 0 is of type str, not a mujoco\.MjModel", id="list"),
        pytest.param(42, r"variant 0 is of type int", id="int"),
        pytest.param("model.xml", r"got the path 'model\.xml'.*from_xml", id="path"),
        pytest.param(
            pathlib.Path("model.xml"), r"got the path 'model\.xml'.*from_xml", id="pathlib"
        ),
        pytest.param([], "non-empty", id="empty"),
    ],
)
def test_model_of_the_wrong_type_is_rejected(model: Any, message: str) -> None:
    """A model that is not an MjModel or a sequence of them raises InvalidArgumentError."""
    with pytest.raises(InvalidArgumentError, match=message):
        RolloutWorkload(model, num_envs=2, nthread=1)


# -- variants -------------------------------------------------------------------------


def test_variants_run_in_contiguous_blocks_and_change_the_signature() -> None:
    """Two variants split the batch in halves, each half as if run alone; the signature changes."""
    light, heavy = tiny_model(box=0.1), tiny_model(box=0.12)
    state = tiny_workload(num_envs=1).initial_state[0]
    both = tiny_workload(model=[light, heavy], initial_state=state)
    alone = [tiny_workload(model=m, initial_state=state) for m in (light, heavy)]
    for workload in (both, *alone):
        workload.run(5)
    assert np.array_equal(both.state[:6], alone[0].state[:6])
    assert np.array_equal(both.state[6:], alone[1].state[6:])
    assert not np.array_equal(alone[0].state, alone[1].state)
    assert both.n_variants == 2
    signature = both.signature()
    assert signature["n_variants"] == 2
    assert signature["model_sha"] != alone[0].signature()["model_sha"]


def test_incompatible_variants_are_rejected_naming_the_size() -> None:
    """Variants of different sizes raise InvalidArgumentError naming what differs."""
    other = mujoco.MjModel.from_xml_string(KEYFRAME_XML)
    with pytest.raises(InvalidArgumentError, match=r"variant 1 .* nq \(15 vs 1\)"):
        RolloutWorkload([tiny_model(), other], num_envs=4, nthread=2)


def _sized(size: str) -> Any:
    """The tiny model with a ``<size .../>`` of ``size`` (user parameters, user data)."""
    xml = TINY_XML.format(box=0.1, iterations=50)
    return mujoco.MjModel.from_xml_string(xml.replace("<mujoco>", f"<mujoco><size {size}/>", 1))


def test_variants_differing_only_in_user_parameter_sizes_are_compatible() -> None:
    """nuser_* sizes shape model arrays only (site_user, ...), never MjData: such variants run."""
    user = _sized('nuser_site="2" nuser_cam="1" nuser_tendon="3"')
    assert (user.nuser_site, user.nuser_cam, user.nuser_tendon) == (2, 1, 3)
    workload = tiny_workload(model=[tiny_model(), user])
    assert workload.n_variants == 2 and workload.run(3) > 0


def test_variants_whose_model_buffers_differ_in_size_are_compatible() -> None:
    """User parameters of bodies and geoms the model has grow its buffer, not MjData: they run."""
    user = _sized('nuser_body="4" nuser_geom="2"')
    assert user.nbuffer != tiny_model().nbuffer
    workload = tiny_workload(model=[tiny_model(), user])
    assert workload.n_variants == 2 and workload.run(3) > 0


def test_variants_differing_in_user_data_size_are_rejected() -> None:
    """nuserdata sizes MjData.userdata: variants that differ in it are refused, naming it."""
    with pytest.raises(InvalidArgumentError, match=r"variant 1 .* nuserdata \(0 vs 3\)"):
        tiny_workload(model=[tiny_model(), _sized('nuserdata="3"')])


def test_more_variants_than_envs_are_rejected() -> None:
    """Three variants for two envs raise InvalidArgumentError."""
    with pytest.raises(InvalidArgumentError, match="3 model variants for num_envs=2"):
        RolloutWorkload([tiny_model()] * 3, num_envs=2, nthread=1)


# -- signature ----------------------------------------------------------------------


def test_randomized_variants_under_one_model_label_share_a_signature() -> None:
    """Variants drawn afresh under one model_label share a signature; unlabelled, they do not."""
    draws = [[tiny_model(box=b), tiny_model(box=b + 0.01)] for b in (0.1, 0.105)]
    labelled = [tiny_workload(model=m, model_label="box-dr").signature() for m in draws]
    plain = [tiny_workload(model=m).signature() for m in draws]
    assert labelled[0] == labelled[1]
    assert labelled[0]["model_label"] == "box-dr" and "model_sha" not in labelled[0]
    assert plain[0]["model_sha"] != plain[1]["model_sha"]
    other = tiny_workload(model=draws[0], model_label="another-robot").signature()
    assert other != labelled[0]
    # the sizes, the variant count and the rollout stay keyed under a label
    one = tiny_workload(model=draws[0][0], model_label="box-dr").signature()
    longer = tiny_workload(model=draws[0], model_label="box-dr", nstep=11).signature()
    assert one != labelled[0] and longer != labelled[0]


@pytest.mark.parametrize(
    ("option", "value"),
    [
        pytest.param("integrator", mujoco.mjtIntegrator.mjINT_IMPLICITFAST, id="integrator"),
        pytest.param("solver", mujoco.mjtSolver.mjSOL_CG, id="solver"),
        pytest.param("iterations", 7, id="iterations"),
        pytest.param("disableflags", mujoco.mjtDisableBit.mjDSBL_CONTACT, id="no-contact"),
    ],
)
def test_a_solver_or_integrator_change_under_one_model_label_is_another_key(
    option: str, value: int
) -> None:
    """Under a model_label, another solver or integrator is keyed; unlabelled, the hash is."""
    plain, edited = tiny_model(), tiny_model()
    setattr(edited.opt, option, value)
    labelled = [tiny_workload(model=m, model_label="box-dr").signature() for m in (plain, edited)]
    assert labelled[0] != labelled[1]
    assert labelled[1][f"opt_{option}"] == int(value)
    unlabelled = tiny_workload(model=plain).signature()
    assert not any(name.startswith("opt_") for name in unlabelled)


def test_signature_is_stable_across_recompiles() -> None:
    """The same XML compiled twice gives the same signature."""
    first = tiny_workload(model=tiny_model()).signature()
    second = tiny_workload(model=tiny_model()).signature()
    assert first == second
    assert first["kind"] == "mujoco.rollout"
    assert first["mujoco"] == mujoco.__version__
    assert (first["nq"], first["nv"], first["nu"], first["nstep"]) == (15, 13, 1, 6)
    assert first["timestep"] == 0.005
    assert all(isinstance(v, str | int | float | bool) for v in first.values())


@pytest.mark.parametrize(
    "changed",
    [
        pytest.param({"box": 0.11}, id="geom-size"),
        pytest.param({"iterations": 51}, id="solver-iterations"),
    ],
)
def test_signature_changes_with_the_model(changed: dict[str, Any]) -> None:
    """A changed geom size or solver option gives a different signature."""
    base = tiny_workload(model=tiny_model()).signature()
    other = tiny_workload(model=tiny_model(**changed)).signature()
    assert other["model_sha"] != base["model_sha"]
    assert other != base


def test_what_compiles_to_the_same_model_shares_a_signature_and_a_rename_does_not(
    tmp_path: pathlib.Path,
) -> None:
    """XML comments, whitespace, folder and the saved .mjb keep the key; a body's rename not."""
    xml = TINY_XML.format(box=0.1, iterations=50)
    (tmp_path / "a").mkdir()
    plain, cosmetic, mjb = tmp_path / "tiny.xml", tmp_path / "a" / "other.xml", tmp_path / "t.mjb"
    plain.write_text(xml)
    cosmetic.write_text(
        "<!-- tuned -->\n" + xml.replace("  ", "\t").replace("<worldbody>", "<worldbody>\n\n")
    )
    mujoco.mj_saveModel(mujoco.MjModel.from_xml_path(str(plain)), str(mjb), None)
    renamed = tmp_path / "renamed.xml"
    renamed.write_text(xml.replace('name="capsule"', 'name="pill"'))

    def signature(path: pathlib.Path) -> Any:
        return RolloutWorkload.from_xml(path, num_envs=12, nthread=2, nstep=6).signature()

    assert signature(plain) == signature(cosmetic) == signature(mjb)
    assert signature(renamed)["model_sha"] != signature(plain)["model_sha"]


def test_signature_changes_with_nstep() -> None:
    """A longer rollout gives a different signature."""
    assert tiny_workload(nstep=6).signature() != tiny_workload(nstep=7).signature()


# -- from_xml -----------------------------------------------------------------------


def test_from_xml_loads_the_file_and_remembers_it(tmp_path: pathlib.Path) -> None:
    """from_xml builds a workload over the file and records its path."""
    path = tmp_path / "tiny.xml"
    path.write_text(TINY_XML.format(box=0.1, iterations=50))
    workload = RolloutWorkload.from_xml(path, num_envs=4, nthread=2, nstep=3)
    assert workload.model_file == str(path)
    assert workload.signature() == tiny_workload(num_envs=4, nstep=3).signature()
    assert workload.run(None) > 0


def test_from_xml_variants_are_distinct(tmp_path: pathlib.Path) -> None:
    """n_variants=3 makes three different models of the same sizes, reproducibly."""
    path = tmp_path / "tiny.xml"
    path.write_text(TINY_XML.format(box=0.1, iterations=50))
    workload = RolloutWorkload.from_xml(path, num_envs=6, nthread=2, nstep=3, n_variants=3)
    again = RolloutWorkload.from_xml(path, num_envs=6, nthread=2, nstep=3, n_variants=3)
    single = RolloutWorkload.from_xml(path, num_envs=6, nthread=2, nstep=3)
    masses = {m.body_mass.tobytes() for m in workload.models}
    assert workload.n_variants == 3
    assert len(masses) == 3
    assert workload.signature() == again.signature()
    assert workload.signature()["model_sha"] != single.signature()["model_sha"]
    assert workload.run(1) > 0


def test_from_xml_missing_file_names_the_path(tmp_path: pathlib.Path) -> None:
    """A missing model file raises InvalidArgumentError naming the path."""
    path = tmp_path / "nowhere.xml"
    with pytest.raises(InvalidArgumentError, match=r"model file not found: .*nowhere\.xml"):
        RolloutWorkload.from_xml(path, num_envs=2, nthread=1)


def test_from_xml_of_a_name_too_long_says_so_as_an_invalid_argument(tmp_path: pathlib.Path) -> None:
    """A model name the system refuses (past NAME_MAX) is an InvalidArgumentError, not OSError."""
    path = tmp_path / ("m" * 300 + ".xml")
    with pytest.raises(InvalidArgumentError, match=r"cannot read model file .*m\.xml: File name"):
        RolloutWorkload.from_xml(path, num_envs=2, nthread=1)


def test_from_xml_of_an_empty_path_names_it_not_the_current_folder() -> None:
    """An empty model path is refused as no file name, not as the folder "." it would open."""
    with pytest.raises(InvalidArgumentError, match='model file "" is no file name'):
        RolloutWorkload.from_xml("", num_envs=2, nthread=1)


_FROM_XML = """
import sys
from chunktune import InvalidArgumentError, RolloutWorkload
try:
    RolloutWorkload.from_xml(sys.argv[1], num_envs=2, nthread=1)
except InvalidArgumentError as exc:
    print(exc)
"""


def test_from_xml_of_an_unreadable_file_says_it_cannot_be_read() -> None:
    """A model file its reader may not open is named unreadable, not empty as MuJoCo says."""
    prefix, why_not = unprivileged()
    if why_not:
        pytest.skip(why_not)
    folder = pathlib.Path(tempfile.mkdtemp(prefix="chunktune-shared-"))
    try:
        folder.chmod(0o755)  # pytest's own folders are the owner's alone
        path = folder / "tiny.xml"
        path.write_text(TINY_XML.format(box=0.1, iterations=50))
        path.chmod(0)  # root ignores it: the load runs as another user when the suite is root
        child = subprocess.run(
            [*prefix, sys.executable, "-c", _FROM_XML, str(path)],
            # no GL: glfw's import runs the interpreter anew, by a path the user may not run
            env={**child_env(), "MUJOCO_GL": "disable"},
            capture_output=True,
            text=True,
            timeout=60,
        )
    finally:
        shutil.rmtree(folder)
    assert child.returncode == 0, child.stderr
    assert child.stdout == f"cannot read model file {path}: Permission denied\n"


def _cut_mjb(path: pathlib.Path) -> None:
    """Write at ``path`` a compiled model cut short after its header."""
    mujoco.mj_saveModel(tiny_model(), str(path), None)
    path.write_bytes(path.read_bytes()[:20])


@pytest.mark.parametrize(
    ("write", "warning"),
    [
        pytest.param(lambda path: path.write_bytes(b"garbage\n"),
                     "Model file has an incomplete header", id="garbage"),
        pytest.param(_cut_mjb, "Truncated model file", id="cut-short"),
    ],
)  # fmt: skip
def test_from_xml_of_a_broken_mjb_says_what_mujoco_warned_and_writes_nothing_else(
    tmp_path: pathlib.Path,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
    write: Any,
    warning: str,
) -> None:
    """A broken .mjb's error holds MuJoCo's warning; nothing is printed, no MUJOCO_LOG.TXT made."""
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "broken.mjb"
    write(path)
    capfd.readouterr()
    with pytest.raises(InvalidArgumentError, match=rf"broken\.mjb: mj_loadModel: .*\({warning}"):
        RolloutWorkload.from_xml(path, num_envs=2, nthread=1)
    assert capfd.readouterr() == ("", "")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["broken.mjb"]
    assert mujoco.get_mju_user_warning() is None  # MuJoCo's own handler is back


def test_from_xml_leaves_a_programs_own_mujoco_warning_handler_alone(
    tmp_path: pathlib.Path,
) -> None:
    """A warning handler the program set still gets MuJoCo's warnings from a load."""
    path = tmp_path / "broken.mjb"
    path.write_bytes(b"garbage\n")
    heard: list[str] = []
    mujoco.set_mju_user_warning(heard.append)
    try:
        with pytest.raises(InvalidArgumentError, match="failed to load"):
            RolloutWorkload.from_xml(path, num_envs=2, nthread=1)
        assert mujoco.get_mju_user_warning() == heard.append
    finally:
        mujoco.set_mju_user_warning(None)
    assert heard == ["Model file has an incomplete header"]


def test_warnings_counted_leaves_a_programs_own_mujoco_warning_handler_alone() -> None:
    """A warning handler the program set hears a rollout's warnings; nothing is counted."""
    model = mujoco.MjModel.from_xml_string(
        '<mujoco><option timestep="0.5" gravity="0 0 -1e12"/><worldbody><body><freejoint/>'
        '<geom type="box" size=".05 .05 .05"/></body></worldbody></mujoco>'
    )
    heard: list[str] = []
    mujoco.set_mju_user_warning(heard.append)
    try:
        with (
            RolloutWorkload(model, num_envs=4, nthread=2, nstep=2) as w,
            warnings_counted() as tally,
        ):
            w.run(None)
        assert tally is None
        assert mujoco.get_mju_user_warning() == heard.append
    finally:
        mujoco.set_mju_user_warning(None)
    assert len(heard) >= 4 and all("The simulation is unstable" in text for text in heard)


def test_a_handler_the_program_sets_inside_the_counted_block_stays_set_after_it() -> None:
    """warnings_counted ends by taking back only its own handler: one set meanwhile stays."""
    heard: list[str] = []
    try:
        with warnings_counted() as tally:
            assert tally is not None and mujoco.get_mju_user_warning() == tally
            mujoco.set_mju_user_warning(heard.append)  # the program's own, set meanwhile
        assert mujoco.get_mju_user_warning() == heard.append
    finally:
        mujoco.set_mju_user_warning(None)


def test_warnings_counted_counts_a_rollouts_warnings_and_keeps_the_first() -> None:
    """Without a handler of the program's, every warning of the pool's threads is counted."""
    model = mujoco.MjModel.from_xml_string(
        '<mujoco><option timestep="0.5" gravity="0 0 -1e12"/><worldbody><body><freejoint/>'
        '<geom type="box" size=".05 .05 .05"/></body></worldbody></mujoco>'
    )
    with RolloutWorkload(model, num_envs=6, nthread=2, nstep=2) as w, warnings_counted() as tally:
        w.run(None)
        w.run(1)
    assert tally is not None and tally.count == 12  # once per env per call
    assert tally.first is not None and tally.first.startswith("Nan, Inf or huge value in QACC")
    assert mujoco.get_mju_user_warning() is None


def test_a_warning_tally_keeps_the_first_warning_on_one_line() -> None:
    """WarningTally counts every warning and keeps the first, its runs of white space one space."""
    tally = WarningTally()
    tally("Nan in QACC.\n  Time = 0.5.")
    tally("Another warning.")
    assert (tally.count, tally.first) == (2, "Nan in QACC. Time = 0.5.")


@pytest.mark.parametrize("path", [None, 3])
def test_from_xml_of_no_path_is_an_invalid_argument(path: object) -> None:
    """A model file argument that is no path raises InvalidArgumentError naming it."""
    with pytest.raises(InvalidArgumentError, match="is not a path"):
        RolloutWorkload.from_xml(path, num_envs=2, nthread=1)  # type: ignore[arg-type]


def test_from_xml_malformed_file_names_the_path_and_mujocos_message(tmp_path: pathlib.Path) -> None:
    """Malformed XML raises InvalidArgumentError with the path and MuJoCo's message."""
    path = tmp_path / "broken.xml"
    path.write_text("<mujoco><worldbody><body></worldbody></mujoco>")
    with pytest.raises(InvalidArgumentError, match=r"broken\.xml: .*XML") as info:
        RolloutWorkload.from_xml(path, num_envs=2, nthread=1)
    assert isinstance(info.value, ValueError)


# -- pools ------------------------------------------------------------------------------


def test_callers_pool_is_used_and_left_open() -> None:
    """A caller's Rollout pool runs the calls and is still open after close()."""
    pool = CountingRollout(nthread=2)
    with tiny_workload(rollout=pool) as workload:
        workload.run(None)
        workload.run(4)
    assert pool.calls == 2
    assert pool.rollout_ is not None
    pool.close()


def test_callers_pool_of_other_size_is_rejected() -> None:
    """A caller's pool whose nthread differs from the workload's raises InvalidArgumentError."""
    with (
        mujoco.rollout.Rollout(nthread=3) as pool,
        pytest.raises(InvalidArgumentError, match="nthread=3"),
    ):
        tiny_workload(nthread=2, rollout=pool)


def test_closed_workload_refuses_to_run() -> None:
    """After close(), run() raises UsageError; close() may be called twice, and lets go."""
    workload = tiny_workload()
    workload.run(None)
    assert workload.close() is True
    # bounded: a close that kept the workload's lock would hang every later call
    assert workload.close(timeout_s=30) is True
    with pytest.raises(UsageError, match="closed"):
        workload.run(None)


# -- measurements for benchmarks ----------------------------------------------------------


def test_per_env_costs_are_one_positive_figure_per_env() -> None:
    """per_env_costs returns one positive seconds figure per env and leaves the outputs right."""
    workload = tiny_workload()
    workload.run(None)
    expected = workload.state.copy()
    costs = per_env_costs(workload, repeats=2)
    assert costs.shape == (12,)
    assert np.all(costs > 0)
    assert np.array_equal(workload.state, expected)


def test_batch_matches_the_rollout() -> None:
    """batch_seconds, where mujoco.batch exists, returns seconds and computes the same states."""
    pytest.importorskip("mujoco.batch")
    workload = tiny_workload(model=[tiny_model(), tiny_model(box=0.12)])
    workload.run(None)
    expected = workload.state.copy(), workload.sensordata.copy()
    assert batch_seconds(workload) > 0
    assert np.array_equal(workload.state, expected[0])
    assert np.array_equal(workload.sensordata, expected[1])


# -- the demo --------------------------------------------------------------------------


def test_demo_model_ships_with_the_package() -> None:
    """demo_model_path names the shipped scene.xml, which MuJoCo loads."""
    path = demo_model_path()
    assert path.name == "scene.xml"
    assert path.is_file()
    assert mujoco.MjModel.from_xml_path(str(path)).ngeom > 16


def test_demo_workload_puts_contact_in_the_last_quarter() -> None:
    """demo_workload starts the last quarter of envs in contact and the others in free flight."""
    workload = demo_workload(num_envs=8, nthread=2, nstep=4)
    model = workload.models[0]
    contacts = [ncon(model, state) for state in workload.initial_state]
    assert all(n == 0 for n in contacts[:6])
    assert all(n > 4 for n in contacts[6:])
    assert workload.run(None) > 0
    assert workload.signature()["states"] == "demo"
    assert workload.model_file == str(demo_model_path())


def test_demo_heavy_envs_cost_more_than_light_ones() -> None:
    """In the demo, per_env_costs of the heavy last quarter exceed those of the light envs."""
    workload = demo_workload(num_envs=8, nthread=2, nstep=10)
    costs = per_env_costs(workload, repeats=3)
    assert np.median(costs[6:]) > np.median(costs[:6])


# -- limits of the machine -----------------------------------------------------------


def test_more_threads_than_eight_per_cpu_are_rejected_before_any_mjdata(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """nthread beyond 8x the usable CPUs raises, naming both, before an MjData is made."""
    from chunktune._mujoco import _limits

    monkeypatch.setattr(_limits, "usable_cpus", lambda: 2)
    monkeypatch.setattr(mujoco, "MjData", None)  # any MjData would fail loudly
    with pytest.raises(InvalidArgumentError, match=r"nthread=17 .* 8 times the 2 CPUs"):
        tiny_workload(nthread=17)
    with pytest.raises(InvalidArgumentError, match="nthread=17"):
        demo_workload(num_envs=64, nthread=17)
    monkeypatch.undo()
    assert tiny_workload(nthread=2).nthread == 2


def test_a_batch_larger_than_available_memory_is_rejected_before_allocating(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """State and output arrays beyond the available memory raise with the sizes, not MemoryError."""
    from chunktune._mujoco import _limits

    with pytest.raises(InvalidArgumentError, match=r"num_envs=2000000000 .* GiB"):
        tiny_workload(num_envs=2 * 10**9)
    with pytest.raises(InvalidArgumentError, match="num_envs=2000000000"):
        demo_workload(num_envs=2 * 10**9, nthread=2)
    monkeypatch.setattr(_limits, "available_memory", lambda: 1000)
    with pytest.raises(InvalidArgumentError, match=r"more than the .* GiB this machine has"):
        tiny_workload(num_envs=12)


def test_available_memory_reads_meminfo_and_the_cgroup_limit(tmp_path: pathlib.Path) -> None:
    """MemAvailable in bytes, capped by the room left under a cgroup v2 memory.max."""
    from chunktune._fingerprint import available_memory

    (tmp_path / "proc").mkdir()
    (tmp_path / "proc/meminfo").write_text("MemTotal: 8000 kB\nMemAvailable:    4000 kB\n")
    assert available_memory(tmp_path) == 4000 * 1024
    cgroup = tmp_path / "sys/fs/cgroup"
    cgroup.mkdir(parents=True)
    (cgroup / "memory.max").write_text("3000000\n")
    (cgroup / "memory.current").write_text("1000000\n")
    assert available_memory(tmp_path) == 2000000
    (cgroup / "memory.max").write_text("max\n")
    assert available_memory(tmp_path) == 4000 * 1024


def test_a_model_edited_after_the_workload_was_built_changes_neither_runs_nor_key() -> None:
    """The workload keeps its own copy: the caller's later edits do not reach its key."""
    model = tiny_model()
    workload = tiny_workload(model=model)
    key = dict(workload.signature())
    model.opt.iterations = 3
    model.geom_size[1, 0] = 0.3
    assert dict(workload.signature()) == key
    assert workload.models[0].opt.iterations == 50  # what it runs is what it is keyed by
    assert dict(tiny_workload(model=model).signature())["model_sha"] != key["model_sha"]


def test_one_model_as_a_list_per_env_is_that_model() -> None:
    """m, [m, m] and [m] * N lay the same model on every env: one key, one variant."""
    model = tiny_model()
    keys = {
        tuple(sorted(tiny_workload(model=m).signature().items()))
        for m in (model, [model, model], [model] * 12)
    }
    assert len(keys) == 1
    # two variants in per-env form collapse to them; unequal runs do not
    other = tiny_model(box=0.2)
    assert tiny_workload(model=[model] * 6 + [other] * 6).n_variants == 2
    assert tiny_workload(model=[model] * 5 + [other] * 7).n_variants == 12


def test_how_far_default_states_stray_is_in_the_key_unless_default() -> None:
    """A larger perturbation of the default states means other contact: another key."""
    default = dict(tiny_workload().signature())
    assert "perturbation" not in default  # entries made before stay valid
    assert dict(tiny_workload(perturbation=0.01).signature()) == default
    assert dict(tiny_workload(perturbation=0.5).signature())["perturbation"] == 0.5


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        pytest.param({"rollout": "pool"}, "is not a pool", id="rollout-not-a-pool"),
        pytest.param({"model_file": 5}, "model_file 5 is not a path", id="model-file-int"),
        pytest.param({"states_label": ""}, "states_label '' is not a name", id="label-empty"),
        pytest.param({"model_label": ""}, "model_label '' is not a name for the model",
                     id="model-label-empty"),
        pytest.param({"model_label": 7}, "model_label 7 is not a name for the model",
                     id="model-label-int"),
        pytest.param({"perturbation": 1e300}, "perturbation must be a number from 0 to 10",
                     id="perturbation-huge"),
        pytest.param({"seed": -1}, "seed must be an integer >= 0, got -1", id="seed-negative"),
        pytest.param({"perturbation": True}, "perturbation must be a number from 0 to 10",
                     id="perturbation-bool"),
        pytest.param({"rollout": types.SimpleNamespace(rollout=None, nthread=2)},
                     "is not a pool", id="rollout-attribute-not-callable"),
    ],
)  # fmt: skip
def test_bad_workload_arguments_are_named(kwargs: dict[str, Any], message: str) -> None:
    """A pool that is none, a model_file that is no path, an empty label: named at once."""
    with pytest.raises(InvalidArgumentError, match=message):
        tiny_workload(**kwargs)


@pytest.mark.parametrize("argument", ["model_label", "states_label"])
@pytest.mark.parametrize(
    ("label", "shown", "wrong"),
    [
        pytest.param("   ", "'   '", "it is only whitespace", id="spaces"),
        pytest.param("\t\n", "'\\t\\n'", "it is only whitespace", id="tab-newline"),
        pytest.param("\u3000", "'\\u3000'", "it is only whitespace", id="ideographic-space"),
        pytest.param("dr\nv2", "'dr\\nv2'", "it holds a control character (U+000A)", id="newline"),
        pytest.param("dr\x1b[2J", "'dr\\x1b[2J'", "it holds a control character (U+001B)",
                     id="escape-sequence"),
        pytest.param("dr\u202ev2", "'dr\\u202ev2'", "it holds a control character (U+202E)",
                     id="bidi-override"),
        pytest.param("x" * 257, "'xxxx", "it is 257 characters long", id="257-characters"),
        pytest.param("x" * 10**6, "'xxxx", "it is 1000000 characters long", id="a-megabyte"),
    ],
)  # fmt: skip
def test_a_label_that_is_no_name_is_refused_naming_it(
    argument: str, label: str, shown: str, wrong: str
) -> None:
    """A blank, control-character or over-256-character label: one line naming it and the rule."""
    with pytest.raises(InvalidArgumentError) as raised:
        tiny_workload(**{argument: label})
    message = str(raised.value)
    assert message.startswith(f"{argument} {shown}"), message
    assert wrong in message and "expected a name that prints, of 1 to 256 characters" in message
    assert "\n" not in message and len(message) < 300  # one line, the value cut short


@pytest.mark.parametrize("label", ["x" * 256, "humanoid dr \u00e9t\u00e9 \u2192 v2", "7"])
def test_a_label_that_is_a_name_keys_the_workload(label: str) -> None:
    """A label of 256 characters, or with spaces and non-ASCII letters inside, keys as given."""
    signature = tiny_workload(model_label=label, states_label=label).signature()
    assert (signature["model_label"], signature["states"]) == (label, label)


def test_a_compiled_mjb_loads_and_keys_as_its_xml(tmp_path: pathlib.Path) -> None:
    """from_xml takes a .mjb as the error message says it may; the key is the XML's."""
    xml = tmp_path / "tiny.xml"
    xml.write_text(TINY_XML.format(box=0.1, iterations=50))
    mjb = tmp_path / "tiny.mjb"
    mujoco.mj_saveModel(mujoco.MjModel.from_xml_path(str(xml)), str(mjb), None)
    a = RolloutWorkload.from_xml(xml, num_envs=12, nthread=2, nstep=6)
    b = RolloutWorkload.from_xml(mjb, num_envs=12, nthread=2, nstep=6)
    assert a.signature()["model_sha"] == b.signature()["model_sha"]
    with pytest.raises(InvalidArgumentError, match="leave model_file out"):
        RolloutWorkload.from_xml(xml, num_envs=12, nthread=2, model_file="x")  # type: ignore[call-arg]


def test_from_xml_types_the_keywords_it_passes_on_as_the_constructor_does() -> None:
    """from_xml's typed extra keywords are the constructor's others, each annotated alike."""
    from chunktune._mujoco._rollout import RolloutOptions

    own = {"self", "model", "num_envs", "nthread", "nstep", "model_file"}
    passed_on = {
        name: parameter.annotation
        for name, parameter in inspect.signature(RolloutWorkload.__init__).parameters.items()
        if name not in own
    }
    typed = {name: hint.__forward_arg__ for name, hint in RolloutOptions.__annotations__.items()}
    assert typed == passed_on
    assert RolloutOptions.__optional_keys__ == set(passed_on)


def test_close_waits_for_a_run_in_flight_on_the_caller_s_pool() -> None:
    """A run() still using the caller's pool (a hard-limit fallback's): close() waits for it."""
    import threading

    pool = mujoco.rollout.Rollout(nthread=2)
    started, finished = threading.Event(), threading.Event()

    class Watched:  # the caller's pool, seen from the inside
        nthread = 2

        def rollout(self, *args: Any, **kwargs: Any) -> None:
            started.set()
            pool.rollout(*args, **kwargs)
            finished.set()

    workload = tiny_workload(rollout=Watched(), nstep=200, num_envs=64)
    runner = threading.Thread(target=workload.run, args=(None,))
    runner.start()
    started.wait()
    assert workload.close()  # returns once the run is over: the pool is the caller's again
    assert finished.is_set()
    runner.join()
    pool.close()
    # with a timeout, a pool in use is left alone
    busy = tiny_workload()
    with busy._busy:
        assert busy.close(timeout_s=0) is False
    assert busy.close(timeout_s=0) is True


def test_run_hands_the_pool_the_chunk_size_it_was_given() -> None:
    """run(c) calls the pool with chunk_size=c (None stays None, MuJoCo's own default)."""
    sizes: list[int | None] = []

    class Recording(CountingRollout):
        def rollout(self, *args: Any, **kwargs: Any) -> Any:
            sizes.append(kwargs["chunk_size"])
            return super().rollout(*args, **kwargs)

    pool = Recording(nthread=2)
    with tiny_workload(rollout=pool) as workload:
        for chunk in (3, None, 1):
            workload.run(chunk)
    pool.close()
    assert sizes == [3, None, 1]


def test_resolving_a_closed_workload_says_to_build_a_new_one() -> None:
    """A closed workload's fallback reason says why it failed and what to do: build another."""
    workload = tiny_workload()
    workload.close()
    decision = chunktune.resolve_sync(workload, policy="quick")
    assert decision.source == "fallback"
    assert "closed (its close() was called)" in decision.reason
    assert "build a new one to measure again" in decision.reason
    with pytest.raises(UsageError, match="rollout= stays open"):
        workload.run(None)


def test_close_closes_the_pool_the_workload_made(monkeypatch: pytest.MonkeyPatch) -> None:
    """The pool a workload made for itself is closed by close(), its threads released."""
    made: list[Any] = []

    class Made(mujoco.rollout.Rollout):  # type: ignore[misc]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            made.append(self)

    monkeypatch.setattr(mujoco.rollout, "Rollout", Made)
    with tiny_workload() as workload:
        workload.run(None)
        assert len(made) == 1 and made[0].rollout_ is not None
    assert made[0].rollout_ is None


def test_callers_initial_states_are_keyed_as_the_caller_s() -> None:
    """Caller-given states are keyed 'caller', not 'default', without the unused perturbation."""
    default = tiny_workload()
    given = tiny_workload(initial_state=default.initial_state.copy(), perturbation=0.5)
    assert given.signature()["states"] == "caller"
    assert default.signature()["states"] == "default"
    assert "perturbation" not in given.signature()


def test_demo_workload_takes_its_nstep_and_seed() -> None:
    """demo_workload takes its nstep, its seed (the perturbed states) and a caller's pool."""
    pool = CountingRollout(nthread=2)
    one = demo_workload(num_envs=8, nthread=2, nstep=3, seed=1, rollout=pool)
    one.run(None)
    assert pool.calls == 1
    pool.close()
    other = demo_workload(num_envs=8, nthread=2, nstep=3, seed=2)
    assert one.nstep == 3 and one.signature()["nstep"] == 3
    assert not np.array_equal(one.initial_state, other.initial_state)
    again = demo_workload(num_envs=8, nthread=2, nstep=3, seed=1)
    assert np.array_equal(one.initial_state, again.initial_state)


def test_the_batch_memory_counts_every_step(monkeypatch: pytest.MonkeyPatch) -> None:
    """The memory check counts the outputs of every step, not of one."""
    from chunktune._mujoco import _limits

    monkeypatch.setattr(_limits, "available_memory", lambda: 2**20)
    _limits.check_batch_memory(num_envs=10, nstep=1, nstate=20, nsensordata=0, nu=0)
    with pytest.raises(InvalidArgumentError, match="nstep=1000 needs about"):
        _limits.check_batch_memory(num_envs=10, nstep=1000, nstate=20, nsensordata=0, nu=0)


# -- limits, inputs and models: cases the mutants13 audit found untested ------------------


def test_eight_threads_per_cpu_are_allowed_and_one_cpu_is_named_singular(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """nthread of exactly 8x the usable CPUs builds; one more is refused naming '1 CPU'."""
    from chunktune._mujoco import _limits

    monkeypatch.setattr(_limits, "usable_cpus", lambda: 1)
    assert tiny_workload(nthread=8).nthread == 8
    with pytest.raises(InvalidArgumentError, match=r"8 times the 1 CPU this process may use"):
        tiny_workload(nthread=9)


def test_the_batch_memory_counts_the_initial_states_and_the_controls(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The memory check counts each env's initial state and every step's controls too."""
    from chunktune._mujoco import _limits

    sizes = {"num_envs": 10, "nstep": 5, "nstate": 20, "nsensordata": 3, "nu": 2}
    need = 8 * 10 * (20 + 5 * (20 + 3 + 2))
    monkeypatch.setattr(_limits, "available_memory", lambda: need)
    _limits.check_batch_memory(**sizes)
    monkeypatch.setattr(_limits, "available_memory", lambda: need - 1)
    with pytest.raises(InvalidArgumentError, match="num_envs=10 with nstep=5 needs about"):
        _limits.check_batch_memory(**sizes)


def test_initial_state_of_shape_one_by_nstate_is_tiled() -> None:
    """A (1, nstate) initial_state is used for every env, as an (nstate,) one is."""
    row = tiny_workload(num_envs=1).initial_state[:1]
    workload = tiny_workload(initial_state=row)
    assert np.array_equal(workload.initial_state, np.tile(row, (12, 1)))


def test_a_path_like_model_file_is_kept_as_its_file_system_path() -> None:
    """model_file given as an os.PathLike is stored as what __fspath__ returns, not its str()."""

    class Where:
        def __fspath__(self) -> str:
            return "/models/robot.xml"

    assert tiny_workload(model_file=Where()).model_file == "/models/robot.xml"


def test_model_sha_is_sixteen_hex_digits() -> None:
    """The signature's model_sha is the first 16 hex digits of a sha256."""
    sha = tiny_workload().signature()["model_sha"]
    assert isinstance(sha, str) and re.fullmatch("[0-9a-f]{16}", sha)


def test_variants_repeating_a_model_in_another_place_key_differently() -> None:
    """Variants [a, b, a] and [a, b, b] are different batches: their model_sha differs."""
    a, b = tiny_model(box=0.1), tiny_model(box=0.2)
    aba = RolloutWorkload([a, b, a], num_envs=3, nthread=1).signature()
    abb = RolloutWorkload([a, b, b], num_envs=3, nthread=1).signature()
    assert aba["model_sha"] != abb["model_sha"]


def test_from_xml_variants_scale_inertia_with_mass_and_recompute_constants(
    tmp_path: pathlib.Path,
) -> None:
    """Each variant's inertia follows its masses, and its subtree masses are recomputed."""
    path = tmp_path / "tiny.xml"
    path.write_text(TINY_XML.format(box=0.1, iterations=50))
    base, *variants = RolloutWorkload.from_xml(
        path, num_envs=3, nthread=1, nstep=2, n_variants=3
    ).models
    for variant in variants:
        assert not np.allclose(variant.body_mass[1:], base.body_mass[1:])
        scale = variant.body_mass[1:] / base.body_mass[1:]
        assert np.allclose(variant.body_inertia[1:], base.body_inertia[1:] * scale[:, None])
        assert variant.body_subtreemass[0] == pytest.approx(variant.body_mass.sum())


def test_from_xml_variants_scale_each_geoms_sliding_friction_alone(tmp_path: pathlib.Path) -> None:
    """Each geom's sliding friction gets its own factor in [0.9, 1.1]; the other columns stay."""
    path = tmp_path / "tiny.xml"
    path.write_text(TINY_XML.format(box=0.1, iterations=50))
    written = mujoco.MjModel.from_xml_path(str(path))
    base, *variants = RolloutWorkload.from_xml(
        path, num_envs=3, nthread=1, nstep=2, n_variants=3
    ).models
    assert np.array_equal(base.geom_friction, written.geom_friction)  # variant 0: as written
    for variant in variants:
        factor = variant.geom_friction[:, 0] / written.geom_friction[:, 0]
        assert np.all((factor >= 0.9) & (factor <= 1.1))
        assert len(set(factor)) == written.ngeom  # one factor per geom
        assert np.array_equal(variant.geom_friction[:, 1:], written.geom_friction[:, 1:])
    assert not np.array_equal(variants[0].geom_friction, variants[1].geom_friction)


def test_a_compiled_model_with_an_upper_case_suffix_loads(tmp_path: pathlib.Path) -> None:
    """A .MJB file is read as compiled MJB, whatever the case of its suffix."""
    mjb = tmp_path / "tiny.MJB"
    mujoco.mj_saveModel(tiny_model(), str(mjb), None)
    workload = RolloutWorkload.from_xml(mjb, num_envs=2, nthread=1, nstep=2)
    assert workload.signature()["model_sha"] == tiny_workload(num_envs=2).signature()["model_sha"]


def test_close_with_a_negative_timeout_waits_no_time_and_closes() -> None:
    """close(timeout_s=-0.5) is taken as no wait: an idle workload closes and says so."""
    workload = tiny_workload()
    assert workload.close(timeout_s=-0.5) is True
    with pytest.raises(UsageError, match="closed"):
        workload.run(None)


def test_from_xml_variants_follow_the_seed(tmp_path: pathlib.Path) -> None:
    """from_xml's randomized variants are drawn from its seed: the same seed, the same ones."""
    path = tmp_path / "tiny.xml"
    path.write_text(TINY_XML.format(box=0.1, iterations=50))

    def masses(seed: int) -> bytes:
        workload = RolloutWorkload.from_xml(
            path, num_envs=2, nthread=1, nstep=2, n_variants=2, seed=seed
        )
        return bytes(workload.models[1].body_mass.tobytes())

    assert masses(1) == masses(1) != masses(2)


def test_the_signature_holds_the_models_own_sizes() -> None:
    """nq, nv, nu and ngeom in the signature are the model's (one geom on two bodies here)."""
    model = mujoco.MjModel.from_xml_string(KEYFRAME_XML)
    assert (model.ngeom, model.nbody) == (1, 2)
    signature = RolloutWorkload(model, num_envs=2, nthread=1).signature()
    assert (signature["nq"], signature["nv"], signature["nu"], signature["ngeom"]) == (1, 1, 0, 1)


def test_per_env_costs_are_each_envs_least_over_the_repeats(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each env's cost is its smallest time over all repeats, whichever repeat gave it."""
    from chunktune._mujoco import _measure

    # (start, end) per call, repeat by repeat: env 0 takes 3 s then 5 s, env 1 5 s then 3 s
    clock = iter([0.0, 3.0, 10.0, 15.0, 20.0, 25.0, 30.0, 33.0])
    monkeypatch.setattr(_measure, "time", types.SimpleNamespace(perf_counter=lambda: next(clock)))
    costs = per_env_costs(tiny_workload(num_envs=2, nthread=1), repeats=2)
    assert costs.tolist() == [3.0, 3.0]


def test_per_env_costs_refuses_zero_repeats() -> None:
    """repeats=0 is an InvalidArgumentError naming repeats, not a row of infinities."""
    with pytest.raises(InvalidArgumentError, match="repeats"):
        per_env_costs(tiny_workload(), repeats=0)


def test_measurements_refuse_a_closed_workload() -> None:
    """per_env_costs and batch_seconds raise UsageError for a workload that was closed."""
    workload = tiny_workload()
    workload.close()
    with pytest.raises(UsageError, match="closed"):
        per_env_costs(workload)
    with pytest.raises(UsageError, match="closed"):
        batch_seconds(workload)


def test_batch_takes_the_workloads_controls() -> None:
    """batch_seconds steps the envs with the workload's controls, as the rollout does."""
    pytest.importorskip("mujoco.batch")
    workload = tiny_workload(control=[0.8])
    workload.run(None)
    expected = workload.state.copy(), workload.sensordata.copy()
    batch_seconds(workload)
    assert np.array_equal(workload.state, expected[0])
    assert np.array_equal(workload.sensordata, expected[1])


def test_demo_envs_start_at_time_zero_with_flyers_at_rest_each_perturbed_its_own_way() -> None:
    """Demo envs start at t=0, 3 of 12 in the pile, flyers not falling, each state its own."""
    from chunktune._mujoco._demo import _DEMO_PILE

    workload = demo_workload(num_envs=12, nthread=2, nstep=2)
    model = workload.models[0]
    contacts = [ncon(model, state) for state in workload.initial_state]
    assert all(n == 0 for n in contacts[:9]) and all(n > 4 for n in contacts[9:])
    free = [j for j in range(model.njnt) if model.jnt_type[j] == mujoco.mjtJoint.mjJNT_FREE]
    flyers = [int(model.jnt_dofadr[j]) for k, j in enumerate(free) if k not in _DEMO_PILE]
    data = mujoco.MjData(model)
    for state in workload.initial_state:
        mujoco.mj_setState(model, data, np.array(state), FULLPHYSICS)
        assert data.time == 0.0
        assert max(abs(data.qvel[a : a + 6]).max() for a in flyers) < 0.05
    assert len({state.tobytes() for state in workload.initial_state}) == 12


# -- the adapter: cases the mut30 audit found untested ----------------------------------


def test_run_times_the_pool_call_alone_not_the_pool_made_on_first_use(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """run()'s seconds span the pool's rollout call only, not the making of its own pool."""
    from chunktune._mujoco import _rollout

    now = [0.0]
    monkeypatch.setattr(_rollout, "time", types.SimpleNamespace(perf_counter=lambda: now[0]))

    class Slow(mujoco.rollout.Rollout):  # type: ignore[misc]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            now[0] += 100.0  # making the pool

        def rollout(self, *args: Any, **kwargs: Any) -> Any:
            now[0] += 2.0  # the call itself
            return super().rollout(*args, **kwargs)

    monkeypatch.setattr(mujoco.rollout, "Rollout", Slow)
    with tiny_workload() as workload:
        assert workload.run(None) == 2.0


def test_run_asks_the_pool_to_skip_its_argument_checks() -> None:
    """run() passes skip_checks=True: the inputs were checked once, not on every timed call."""
    seen: list[object] = []

    class Recording(CountingRollout):
        def rollout(self, *args: Any, **kwargs: Any) -> Any:
            seen.append(kwargs.get("skip_checks"))
            return super().rollout(*args, **kwargs)

    pool = Recording(nthread=2)
    with tiny_workload(rollout=pool) as workload:
        workload.run(None)
    pool.close()
    assert seen == [True]


@pytest.mark.parametrize("name", ["initial_state", "state", "sensordata"])
def test_the_workloads_arrays_are_read_only(name: str) -> None:
    """initial_state, state and sensordata refuse writes: a caller cannot change the batch."""
    with tiny_workload() as workload:
        workload.run(None)
        array = getattr(workload, name)
        with pytest.raises(ValueError, match="read-only"):
            array[...] = 0.0


@pytest.mark.parametrize(
    ("value", "shown"),
    [pytest.param(0, "0", id="zero"), pytest.param(1.5, "1.5", id="float")],
)
def test_from_xml_refuses_a_bad_n_variants_naming_it(
    tmp_path: pathlib.Path, value: object, shown: str
) -> None:
    """n_variants that is no integer >= 1 raises InvalidArgumentError naming it and its value."""
    path = tmp_path / "tiny.xml"
    path.write_text(TINY_XML.format(box=0.1, iterations=50))
    with pytest.raises(
        InvalidArgumentError, match=rf"n_variants must be an integer >= 1, got {shown}"
    ):
        RolloutWorkload.from_xml(path, num_envs=4, nthread=1, n_variants=value)  # type: ignore[arg-type]


def test_the_batch_memory_check_counts_every_step_of_the_workload(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A workload whose nstep outputs do not fit is refused, though one step's would fit."""
    from chunktune._mujoco import _limits

    nstate = tiny_workload(num_envs=1).nstate
    one_step = 8 * 12 * (nstate + 1 * (nstate + 4 + 1))  # 4 sensor values, 1 control
    monkeypatch.setattr(_limits, "available_memory", lambda: one_step)
    assert tiny_workload(nstep=1).nstep == 1
    with pytest.raises(InvalidArgumentError, match="num_envs=12 with nstep=6 needs about"):
        tiny_workload(nstep=6)


@pytest.mark.parametrize("name", ["initial_state", "control"])
def test_the_callers_arrays_are_copied_so_later_edits_change_nothing(name: str) -> None:
    """Editing the initial_state or control array after building changes nothing the runs do."""
    base = tiny_workload(perturbation=0.0)
    given = {
        "initial_state": np.array(base.initial_state),
        "control": np.full((12, 6, 1), 0.5),
    }[name]
    workload = tiny_workload(**{name: given})
    workload.run(None)
    before = workload.state.copy()
    given[...] = 0.0  # the caller reuses its buffer
    workload.run(None)
    assert np.array_equal(workload.state, before)


def test_a_perturbation_of_exactly_the_maximum_is_taken_and_more_is_refused() -> None:
    """perturbation=10 builds; 10.5 raises InvalidArgumentError naming the range and the value."""
    assert tiny_workload(perturbation=10.0).signature()["perturbation"] == 10.0
    with pytest.raises(InvalidArgumentError, match=r"from 0 to 10, got 10\.5$"):
        tiny_workload(perturbation=10.5)


def test_a_callers_pool_that_does_not_say_its_nthread_is_used() -> None:
    """A pool with a rollout() method but no nthread attribute is taken and runs the calls."""
    inner = CountingRollout(nthread=2)

    class Wrapped:  # a trainer's wrapper around its pool, without the attribute
        def rollout(self, *args: Any, **kwargs: Any) -> Any:
            return inner.rollout(*args, **kwargs)

    with tiny_workload(rollout=Wrapped()) as workload:
        workload.run(None)
    assert inner.calls == 1 and inner.rollout_ is not None  # used, and left open
    inner.close()


def test_from_xml_variants_without_a_seed_are_those_of_seed_zero(tmp_path: pathlib.Path) -> None:
    """from_xml's variants default to seed 0, the constructor's default seed."""
    path = tmp_path / "tiny.xml"
    path.write_text(TINY_XML.format(box=0.1, iterations=50))
    kwargs: dict[str, Any] = {"num_envs": 2, "nthread": 1, "nstep": 2, "n_variants": 2}
    unseeded = RolloutWorkload.from_xml(path, **kwargs)
    zero = RolloutWorkload.from_xml(path, seed=0, **kwargs)
    assert unseeded.signature() == zero.signature()


def test_from_xml_of_a_file_name_that_is_not_utf8_says_so(tmp_path: pathlib.Path) -> None:
    """A model file whose name is not UTF-8 raises InvalidArgumentError asking for a rename."""
    raw = os.fsencode(tmp_path) + b"/robot\xff.xml"
    with open(raw, "w") as file:
        file.write(TINY_XML.format(box=0.1, iterations=50))
    with pytest.raises(InvalidArgumentError, match=r"its name is not UTF-8.*rename the file") as e:
        RolloutWorkload.from_xml(os.fsdecode(raw), num_envs=2, nthread=1)
    # the name's odd byte as an escape: the message can be printed, to any UTF-8 stream
    assert "robot\\udcff.xml" in str(e.value)
    str(e.value).encode("utf-8")


def test_run_hands_the_pool_contiguous_arrays_of_its_own() -> None:
    """The pool gets C-contiguous initial states and controls, even for a tiled row and a (nu,)."""
    seen: list[tuple[bool, bool]] = []

    class Recording(CountingRollout):
        def rollout(self, *args: Any, **kwargs: Any) -> Any:
            initial, control = args[2:4]
            seen.append((initial.flags.c_contiguous, control.flags.c_contiguous))
            return super().rollout(*args, **kwargs)

    pool = Recording(nthread=2)
    row = tiny_workload(num_envs=1).initial_state[0]
    with tiny_workload(rollout=pool, initial_state=row, control=[0.3]) as workload:
        workload.run(None)
    pool.close()
    assert seen == [(True, True)]


def test_a_machine_whose_available_memory_is_unknown_builds_the_workload(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Where available memory cannot be read (None), the memory check lets the batch through."""
    from chunktune._mujoco import _limits

    monkeypatch.setattr(_limits, "available_memory", lambda: None)
    assert tiny_workload().run(None) > 0


@pytest.mark.parametrize(
    "kwargs",
    [
        pytest.param({"model": [tiny_model(), tiny_model(box=0.2)]}, id="variants"),
        pytest.param({"control": np.linspace(-1.0, 1.0, 12)[:, None, None] * np.ones((12, 6, 1))},
                     id="controls"),
    ],
)  # fmt: skip
def test_per_env_costs_roll_out_each_env_as_the_batch_does(kwargs: dict[str, Any]) -> None:
    """Each env alone runs its own variant, its own controls and every step: the batch's states."""
    batch = tiny_workload(**kwargs)
    batch.run(None)
    alone = tiny_workload(**kwargs)
    per_env_costs(alone)
    assert np.array_equal(alone.state, batch.state)
    assert np.array_equal(alone.sensordata, batch.sensordata)


def test_batch_records_the_states_and_sensor_values_of_a_fresh_workload() -> None:
    """batch_seconds alone fills the states and sensordata run() would: Batch records both."""
    pytest.importorskip("mujoco.batch")
    rolled = tiny_workload(control=[0.4])
    rolled.run(None)
    batched = tiny_workload(control=[0.4])
    batch_seconds(batched)
    assert np.array_equal(batched.state, rolled.state)
    assert np.array_equal(batched.sensordata, rolled.sensordata)


def test_the_defaults_of_from_xml_are_the_constructors(tmp_path: pathlib.Path) -> None:
    """from_xml and the constructor both default to 10 steps and seed 0: the same batch."""
    path = tmp_path / "tiny.xml"
    path.write_text(TINY_XML.format(box=0.1, iterations=50))
    loaded = RolloutWorkload.from_xml(path, num_envs=4, nthread=2)
    built = RolloutWorkload(tiny_model(), num_envs=4, nthread=2)
    seeded = RolloutWorkload(tiny_model(), num_envs=4, nthread=2, nstep=10, seed=0)
    assert loaded.nstep == built.nstep == 10
    assert np.array_equal(loaded.initial_state, seeded.initial_state)
    assert np.array_equal(built.initial_state, seeded.initial_state)


def test_the_signature_describes_variant_zero() -> None:
    """Variants that differ in their options: the signature's timestep is variant 0's."""
    other = tiny_model()
    other.opt.timestep = 0.002
    workload = RolloutWorkload([tiny_model(), other], num_envs=4, nthread=2, nstep=2)
    assert workload.signature()["timestep"] == 0.005


def test_from_xml_of_a_path_like_that_names_no_file_is_refused_as_no_file_name() -> None:
    """An os.PathLike whose __fspath__ is "" is no file name, as "" is (not the folder ".")."""

    class Nowhere:
        def __fspath__(self) -> str:
            return ""

    with pytest.raises(InvalidArgumentError, match='model file "" is no file name'):
        RolloutWorkload.from_xml(Nowhere(), num_envs=2, nthread=1)


@pytest.mark.parametrize(
    ("seed", "shown"),
    [pytest.param(-1, "-1", id="negative"), pytest.param(2.5, "2.5", id="float")],
)
def test_from_xml_variants_refuse_a_bad_seed_by_name(
    tmp_path: pathlib.Path, seed: Any, shown: str
) -> None:
    """A seed for randomized variants that is no integer >= 0 is named, not left to numpy."""
    path = tmp_path / "tiny.xml"
    path.write_text(TINY_XML.format(box=0.1, iterations=50))
    with pytest.raises(InvalidArgumentError, match=f"seed must be an integer >= 0, got {shown}"):
        RolloutWorkload.from_xml(path, num_envs=2, nthread=1, n_variants=2, seed=seed)


def test_a_workloads_repr_names_its_file_sizes_and_variant_count(tmp_path: pathlib.Path) -> None:
    """repr() shows the model file, num_envs, nthread, nstep and how many variants, no models."""
    path = tmp_path / "tiny.xml"
    path.write_text(TINY_XML.format(box=0.1, iterations=50))
    workload = RolloutWorkload.from_xml(path, num_envs=4, nthread=2, nstep=3, n_variants=2)
    assert repr(workload) == (
        f"RolloutWorkload(model_file={str(path)!r}, num_envs=4, nthread=2, nstep=3, n_variants=2)"
    )


class _HeldPool:
    """A caller's pool whose rollout waits until the test lets it go (a long probe)."""

    nthread = 2

    def __init__(self) -> None:
        import threading

        self.pool = mujoco.rollout.Rollout(nthread=2)
        self.started, self.go = threading.Event(), threading.Event()

    def rollout(self, *args: Any, **kwargs: Any) -> None:
        self.started.set()
        self.go.wait(60)
        self.pool.rollout(*args, **kwargs)


def test_close_without_a_timeout_waits_for_a_run_however_long_it_takes() -> None:
    """close() with no timeout waits out a run longer than a second, then closes: True."""
    import threading

    held = _HeldPool()
    workload = tiny_workload(rollout=held)
    runner = threading.Thread(target=workload.run, args=(None,))
    runner.start()
    assert held.started.wait(60)
    # a run of 1.5 s: longer than a second, which a wait bounded at a second would give up on
    letting_go = threading.Timer(1.5, held.go.set)
    letting_go.start()
    try:
        assert workload.close() is True
        assert held.go.is_set()  # it returned only once the run could end
    finally:
        held.go.set()
        runner.join()
        held.pool.close()


def test_close_with_no_time_to_wait_does_not_wait_for_a_run_about_to_end() -> None:
    """close(timeout_s=0) during a run gives up at once (False), even if the run ends soon."""
    import threading

    held = _HeldPool()
    workload = tiny_workload(rollout=held)
    runner = threading.Thread(target=workload.run, args=(None,))
    runner.start()
    assert held.started.wait(60)
    # the run ends soon, but not before a loaded machine reaches close(): a close that
    # waited would return True after it; one that does not returns False at once
    letting_go = threading.Timer(10.0, held.go.set)
    letting_go.start()
    try:
        assert workload.close(timeout_s=0) is False
    finally:
        letting_go.cancel()
        held.go.set()
        runner.join()
    assert workload.close(timeout_s=0) is True
    held.pool.close()


def test_a_closed_workload_keeps_no_hold_on_the_callers_pool() -> None:
    """After close(), dropping the caller's pool frees it: the workload no longer refers to it."""
    import gc
    import weakref

    pool = mujoco.rollout.Rollout(nthread=2)
    workload = tiny_workload(rollout=pool)
    workload.run(None)
    assert workload.close() is True
    pool.close()
    gone = weakref.ref(pool)
    del pool
    gc.collect()
    assert gone() is None
    with pytest.raises(UsageError, match="closed"):
        workload.run(None)
