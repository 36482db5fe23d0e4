"""The rollout workload's inputs and limits: perturbation, default states, threads per CPU."""

from __future__ import annotations

import mujoco
import numpy as np
import pytest

from chunktune import RolloutWorkload
from chunktune._errors import InvalidArgumentError
from chunktune._mujoco._inputs import MAX_PERTURBATION, check_perturbation

pytestmark = pytest.mark.mujoco

# one slide joint and no keyframe: every env starts from the reset state, qpos 0
SLIDER_XML = """
<mujoco>
  <worldbody>
    <body pos="0 0 1">
      <joint name="slide" type="slide" axis="0 0 1"/>
      <geom size=".1"/>
    </body>
  </worldbody>
</mujoco>
"""


@pytest.mark.parametrize("value", [-0.5, -1e-9, MAX_PERTURBATION * 1.01])
def test_a_perturbation_below_zero_or_above_the_most_is_refused(value: float) -> None:
    """A negative perturbation, or one past MAX_PERTURBATION, is refused naming the range."""
    with pytest.raises(InvalidArgumentError, match="perturbation must be a number from 0 to 10"):
        check_perturbation(value)


@pytest.mark.parametrize("value", [0, 0.0, MAX_PERTURBATION])
def test_a_perturbation_at_either_bound_is_taken(value: float) -> None:
    """0 and MAX_PERTURBATION themselves are perturbations, as floats."""
    assert check_perturbation(value) == float(value)


def test_each_env_s_default_state_is_the_reset_state_plus_its_own_noise() -> None:
    """No env starts from the env before it: each is one draw of the noise off the reset state."""
    model = mujoco.MjModel.from_xml_string(SLIDER_XML)
    workload = RolloutWorkload(model, num_envs=64, nthread=2, perturbation=0.01, seed=0)
    qpos, qvel = workload.initial_state[:, 1], workload.initial_state[:, 2]
    assert len(set(qpos.tolist())) == 64
    # one draw of sigma 0.01 stays within 5 sigma here; a sum of the draws before it does not
    assert np.abs(qpos).max() < 0.05 and np.abs(qvel).max() < 0.05


def test_a_machine_of_four_cpus_takes_up_to_thirty_two_threads(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With 4 usable CPUs, nthread 32 passes the check and 33 is refused naming 4 CPUs."""
    from chunktune._mujoco import _limits

    monkeypatch.setattr(_limits, "usable_cpus", lambda: 4)
    _limits.check_nthread(32)
    with pytest.raises(InvalidArgumentError, match=r"8 times the 4 CPUs .* at most 32 "):
        _limits.check_nthread(33)


def test_a_batch_too_large_names_what_it_needs_and_what_is_there_in_gib(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """3 GiB of arrays against 2 GiB available: the message says 3 GiB and 2 GiB."""
    from chunktune._mujoco import _limits

    monkeypatch.setattr(_limits, "available_memory", lambda: 2 * 2**30)
    with pytest.raises(InvalidArgumentError, match=r"about 3 GiB .* than the 2 GiB this machine"):
        # 2**26 envs of one step, 6 floats each: 3 * 2**30 bytes
        _limits.check_batch_memory(num_envs=2**26, nstep=1, nstate=1, nsensordata=4, nu=0)
