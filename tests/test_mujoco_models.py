"""The adapter's models: seeded perturbations and randomized variants, on real MuJoCo models."""

from __future__ import annotations

import logging
import pathlib
import re
from typing import Any

import mujoco
import numpy as np
import pytest
from _warned import WARNED_XML, load_warnings

from chunktune import RolloutWorkload
from chunktune._errors import InvalidArgumentError
from chunktune._mujoco import demo_model_path
from chunktune._mujoco._models import perturb, randomized

pytestmark = pytest.mark.mujoco

# a free body (7 qpos, a unit quaternion among them) and a hinge: both kinds of coordinate
FREE_AND_HINGE_XML = """
<mujoco>
  <worldbody>
    <body pos="0 0 1">
      <freejoint/>
      <geom size=".1"/>
    </body>
    <body pos="1 0 1">
      <joint type="hinge" axis="0 1 0"/>
      <geom type="capsule" fromto="0 0 0 .3 0 0" size=".03"/>
    </body>
  </worldbody>
</mujoco>
"""


def test_perturb_adds_the_seeded_normal_draws_to_qpos_then_qvel() -> None:
    """perturb adds N(0, scale) draws of its generator, qpos first, to the state (not subtracts)."""
    model = mujoco.MjModel.from_xml_string(FREE_AND_HINGE_XML)
    data = mujoco.MjData(model)
    data.qvel[:] = 0.5
    before_qpos, before_qvel = data.qpos.copy(), data.qvel.copy()
    perturb(model, data, np.random.default_rng(7), 0.01)
    draws = np.random.default_rng(7)
    dq, dv = draws.normal(0.0, 0.01, model.nq), draws.normal(0.0, 0.01, model.nv)
    np.testing.assert_allclose(data.qvel, before_qvel + dv, rtol=0, atol=1e-15)
    # the free body's position and the hinge angle are not renormalized: exact sums
    np.testing.assert_allclose(data.qpos[:3], before_qpos[:3] + dq[:3], rtol=0, atol=1e-15)
    assert data.qpos[7] == pytest.approx(before_qpos[7] + dq[7], abs=1e-15)
    assert np.linalg.norm(data.qpos[3:7]) == pytest.approx(1.0, abs=1e-12)


def test_randomized_scales_masses_inertias_and_friction_within_ten_percent() -> None:
    """A variant's factors span [0.9, 1.1] (wider than +-5%), mass and inertia share one."""
    model = mujoco.MjModel.from_xml_path(str(demo_model_path()))
    mass, inertia, friction = (model.body_mass.copy(), model.body_inertia.copy(),
                               model.geom_friction.copy())  # fmt: skip
    variant = randomized(model, np.random.default_rng(1))
    heavy = mass > 0  # the world body has none to scale
    factors = variant.body_mass[heavy] / mass[heavy]
    assert heavy.sum() >= 20
    assert factors.min() >= 0.9 and factors.max() <= 1.1
    assert factors.min() < 0.95 and factors.max() > 1.05  # seeded: the full spread is used
    np.testing.assert_allclose(
        variant.body_inertia[heavy], inertia[heavy] * factors[:, None], rtol=1e-12
    )
    slide = variant.geom_friction[:, 0] / friction[:, 0]
    assert slide.min() >= 0.9 and slide.max() <= 1.1
    assert slide.min() < 0.95 and slide.max() > 1.05
    np.testing.assert_array_equal(variant.geom_friction[:, 1:], friction[:, 1:])
    # the caller's model is untouched, and the variant's derived constants follow its masses
    np.testing.assert_array_equal(model.body_mass, mass)
    assert variant.body_subtreemass[0] == pytest.approx(variant.body_mass.sum(), rel=1e-12)


@pytest.mark.parametrize(
    ("keyword", "value"),
    [
        pytest.param("initial_state", "abc", id="states-text"),
        pytest.param("control", [[1.0], ["x"]], id="control-text"),
        pytest.param("control", object(), id="control-object"),
    ],
)
def test_inputs_that_are_no_numbers_are_refused_by_name(keyword: str, value: object) -> None:
    """States or controls numpy cannot read as numbers raise InvalidArgumentError naming them."""
    model = mujoco.MjModel.from_xml_string(FREE_AND_HINGE_XML)
    given: dict[str, Any] = {keyword: value}
    with pytest.raises(InvalidArgumentError, match=f"{keyword} must be an array of numbers: "):
        RolloutWorkload(model, num_envs=2, nthread=1, **given)


def test_a_batch_beyond_the_memory_is_refused_before_any_env_is_built(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Past the memory available, the workload and the demo refuse before building any env."""
    from chunktune._mujoco import _demo, _limits, _rollout

    def built(*args: object, **kwargs: object) -> None:
        pytest.fail("per-env states were built before the batch's memory was checked")

    monkeypatch.setattr(_limits, "available_memory", lambda: 1000)
    monkeypatch.setattr(_rollout, "default_states", built)
    monkeypatch.setattr(_demo, "_demo_base_states", built)
    model = mujoco.MjModel.from_xml_string(FREE_AND_HINGE_XML)
    with pytest.raises(InvalidArgumentError, match=r"num_envs=8 .*this machine has available"):
        RolloutWorkload(model, num_envs=8, nthread=1)
    with pytest.raises(InvalidArgumentError, match=r"num_envs=8 .*this machine has available"):
        _demo.demo_workload(num_envs=8, nthread=1)


def test_incompatible_sizes_are_named_key_sizes_first_then_the_rest_in_name_order() -> None:
    """A variant differing in many sizes names nq, nv and nstate first, then the rest sorted."""
    model = mujoco.MjModel.from_xml_string(FREE_AND_HINGE_XML)
    more = FREE_AND_HINGE_XML.replace(
        "<worldbody>",
        '<worldbody><body pos="3 0 1"><joint type="slide"/><geom size=".1"/><site name="s"/>'
        '<camera name="c"/><light name="l"/></body>',
        1,
    )
    other = mujoco.MjModel.from_xml_string(more)
    with pytest.raises(InvalidArgumentError, match="variant 1 is not compatible") as caught:
        RolloutWorkload([model, other], num_envs=2, nthread=1)
    names = re.findall(r"(\w+) \(\d+ vs \d+\)", str(caught.value))
    assert names[:3] == ["nq", "nv", "nstate"]
    rest = names[3:]
    assert len(rest) >= 6 and rest == sorted(rest)  # 6 names in hash order: 1 in 720 sorted


def test_a_load_that_warns_keeps_a_programs_own_handler_and_tells_it(
    tmp_path: pathlib.Path,
) -> None:
    """A model that loads with a warning: the program's handler hears it and stays set."""
    path = tmp_path / "warned.xml"
    path.write_text(WARNED_XML)
    heard: list[str] = []
    mujoco.set_mju_user_warning(heard.append)
    try:
        workload = RolloutWorkload.from_xml(path, num_envs=2, nthread=1)
        assert mujoco.get_mju_user_warning() == heard.append
    finally:
        mujoco.set_mju_user_warning(None)
    assert workload.run(None) > 0
    assert heard == load_warnings()


def test_a_load_that_warns_logs_each_warning_as_one_chunktune_line(
    tmp_path: pathlib.Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Without a program's handler, each load warning is one line of the chunktune logger."""
    expected = load_warnings()
    if not expected:
        pytest.skip(f"mujoco {mujoco.__version__} does not warn of settotalmass")
    path = tmp_path / "warned.xml"
    path.write_text(WARNED_XML)
    with caplog.at_level(logging.WARNING, logger="chunktune"):
        RolloutWorkload.from_xml(path, num_envs=2, nthread=1)
    assert mujoco.get_mju_user_warning() is None
    assert [(r.name, r.getMessage()) for r in caplog.records] == [
        ("chunktune", f"chunktune: MuJoCo warned while loading {path}: {' '.join(w.split())}")
        for w in expected
    ]


def test_the_demo_piles_eight_bodies_on_the_floor_in_its_heavy_envs_only() -> None:
    """A demo pile env has 8 of its 24 bodies on the floor, the rest 2 m up; a light one none."""
    from chunktune._mujoco import demo_workload

    workload = demo_workload(num_envs=4, nthread=1)  # env 3 is the one heavy env
    model = workload.models[0]
    data = mujoco.MjData(model)
    heights = []
    for state in workload.initial_state:
        mujoco.mj_setState(model, data, np.array(state), mujoco.mjtState.mjSTATE_FULLPHYSICS)
        free = [j for j in range(model.njnt) if model.jnt_type[j] == mujoco.mjtJoint.mjJNT_FREE]
        heights.append(np.array([data.qpos[model.jnt_qposadr[j] + 2] for j in free]))
    assert all(len(h) == 24 for h in heights)
    for light in heights[:3]:
        assert (light > 1.9).all()
    assert (heights[3] < 0.5).sum() == 8
    assert (heights[3] > 1.9).sum() == 16


def test_the_demo_refuses_a_negative_seed_by_name() -> None:
    """demo_workload(seed=-1) raises InvalidArgumentError naming the seed, not numpy's error."""
    from chunktune._mujoco import demo_workload

    with pytest.raises(InvalidArgumentError, match="seed"):
        demo_workload(num_envs=4, nthread=1, seed=-1)


def test_the_demos_pile_is_stacked_bodies_resting_on_one_another() -> None:
    """A demo pile env's eight bodies touch one another (two layers), not only the floor."""
    from chunktune._mujoco import demo_workload

    workload = demo_workload(num_envs=8, nthread=1)  # envs 6 and 7 are the heavy ones
    model = workload.models[0]
    data = mujoco.MjData(model)
    for state in workload.initial_state[6:]:
        mujoco.mj_setState(model, data, np.array(state), mujoco.mjtState.mjSTATE_FULLPHYSICS)
        mujoco.mj_forward(model, data)
        bodies = [
            (int(model.geom_bodyid[c.geom[0]]), int(model.geom_bodyid[c.geom[1]]))
            for c in data.contact[: data.ncon]
        ]
        on_one_another = [pair for pair in bodies if 0 not in pair]  # body 0 is the world
        assert on_one_another
        assert all(data.xpos[b][2] < 0.5 for pair in on_one_another for b in pair)


# The demo's free bodies: the heavy envs' pile is bodies 2-5 and 10-13 (its `_DEMO_PILE`).
DEMO_PILE = (2, 3, 4, 5, 10, 11, 12, 13)


def _demo_bodies(workload: RolloutWorkload, env: int) -> tuple[Any, Any]:
    """(model, data) with the workload's env `env` set and forwarded."""
    model = workload.models[0]
    data = mujoco.MjData(model)
    state = np.array(workload.initial_state[env])
    mujoco.mj_setState(model, data, state, mujoco.mjtState.mjSTATE_FULLPHYSICS)
    mujoco.mj_forward(model, data)
    return model, data


def _free_qpos(model: Any, data: Any) -> Any:
    """The 24 free joints' qpos, one row of 7 (x, y, z, quaternion) each."""
    free = [j for j in range(model.njnt) if model.jnt_type[j] == mujoco.mjtJoint.mjJNT_FREE]
    return np.array([data.qpos[model.jnt_qposadr[j] : model.jnt_qposadr[j] + 7] for j in free])


def _grid_lines(values: Any) -> list[float]:
    """The distinct grid lines of coordinates that sit on lines up to the perturbation."""
    ordered = np.sort(values)
    lines = np.split(ordered, np.flatnonzero(np.diff(ordered) > 0.1) + 1)
    assert all(np.ptp(line) < 0.02 for line in lines), f"{values} sit on no grid lines"
    return [float(np.mean(line)) for line in lines]


def test_the_demos_flyers_sit_on_a_half_metre_grid_two_metres_up_over_the_floor() -> None:
    """A light demo env's 24 bodies: a 5x5 grid 0.5 m apart, 2 m up, centred over the floor."""
    from chunktune._mujoco import demo_workload

    workload = demo_workload(num_envs=4, nthread=1)
    model, data = _demo_bodies(workload, 0)
    qpos = _free_qpos(model, data)
    floor = model.geom_pos[mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_GEOM, "floor")]
    for axis in (0, 1):
        lines = _grid_lines(qpos[:, axis])
        assert len(lines) == 5
        np.testing.assert_allclose(np.diff(lines), 0.5, atol=0.02)
        # a whole row or column off the middle (0.5 m) is not centred
        assert abs((lines[0] + lines[-1]) / 2 - floor[axis]) < 0.3
    np.testing.assert_allclose(qpos[:, 2], 2.0, atol=0.02)


def test_the_demos_flyers_each_have_their_own_orientation() -> None:
    """No two of a light demo env's bodies share an orientation: each is drawn at random."""
    from chunktune._mujoco import demo_workload

    model, data = _demo_bodies(demo_workload(num_envs=4, nthread=1), 0)
    quats = _free_qpos(model, data)[:, 3:]
    alike = np.abs(quats @ quats.T)  # |cos| of half the angle between two orientations
    np.fill_diagonal(alike, 0.0)
    assert alike.max() < 0.999


def test_the_demos_pile_has_two_layers_and_no_third() -> None:
    """A demo pile env's eight bodies settle in two layers: some 0.1-0.2 m up, none higher."""
    from chunktune._mujoco import demo_workload

    for seed in (0, 1):
        model, data = _demo_bodies(demo_workload(num_envs=4, nthread=1, seed=seed), 3)
        heights = _free_qpos(model, data)[list(DEMO_PILE), 2]
        assert ((heights > 0.1) & (heights < 0.2)).sum() >= 3, heights
        assert (heights < 0.2).all(), heights


def test_the_demos_pile_settles_differently_for_another_seed() -> None:
    """The seed moves the demo's settled pile itself, by far more than each env's perturbation."""
    from chunktune._mujoco import demo_workload

    piles = []
    for seed in (0, 1):
        model, data = _demo_bodies(demo_workload(num_envs=4, nthread=1, seed=seed), 3)
        piles.append(_free_qpos(model, data)[list(DEMO_PILE), :3])
    # the perturbation moves a coordinate by about 2 mm; a pile settled from another
    # kick puts some body centimetres away
    assert np.abs(piles[0] - piles[1]).max() > 0.02


def test_the_demos_pile_settles_with_no_other_body_touching_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """While the demo's pile settles, only its eight bodies and the floor touch anything."""
    from chunktune._mujoco import demo_workload

    step = mujoco.mj_step
    touching: set[int] = set()

    def recording_step(model: Any, data: Any) -> None:
        step(model, data)
        for c in data.contact[: data.ncon]:
            touching.update(int(model.body_jntadr[model.geom_bodyid[g]]) for g in c.geom)

    monkeypatch.setattr(mujoco, "mj_step", recording_step)  # _demo calls mujoco.mj_step
    demo_workload(num_envs=4, nthread=1)
    monkeypatch.undo()
    # a body's free joint numbers it among the 24; the floor (the world) has none, -1
    assert touching - {-1} == set(DEMO_PILE)


def test_the_demos_seed_defaults_to_0() -> None:
    """demo_workload without a seed builds the same states as seed=0, not another seed's."""
    from chunktune._mujoco import demo_workload

    default = demo_workload(num_envs=4, nthread=1)
    assert np.array_equal(
        default.initial_state, demo_workload(num_envs=4, nthread=1, seed=0).initial_state
    )
    assert not np.array_equal(
        default.initial_state, demo_workload(num_envs=4, nthread=1, seed=1).initial_state
    )


def test_a_demo_rollout_of_its_length_keeps_its_light_envs_free_and_its_pile_touching() -> None:
    """Over the demo's 20 steps its light envs touch nothing, its last quarter at every step."""
    from chunktune._mujoco import DEMO_NSTEP, demo_workload

    workload = demo_workload(num_envs=8, nthread=2)  # envs 6 and 7 are the heavy ones
    model = workload.models[0]
    data = mujoco.MjData(model)
    contacts = []
    for state in workload.initial_state:
        mujoco.mj_setState(model, data, np.array(state), mujoco.mjtState.mjSTATE_FULLPHYSICS)
        per_step = []
        for _ in range(DEMO_NSTEP):
            mujoco.mj_step(model, data)
            per_step.append(data.ncon)
        contacts.append(per_step)
        # the pile stays a pile on the floor; the flyers are still high in the air
        heights = _free_qpos(model, data)[list(DEMO_PILE), 2]
        assert (heights < 0.2).all() if len(contacts) > 6 else (heights > 1.5).all(), heights
    assert all(n == 0 for light in contacts[:6] for n in light), contacts
    # heavy contact: the pile's eight bodies on the floor and on one another, at every step
    assert all(n >= 8 for heavy in contacts[6:] for n in heavy), contacts
