"""resolve end to end on real MuJoCo rollouts of a tiny model."""

from __future__ import annotations

import json
from pathlib import Path

import mujoco
import numpy as np
import pytest

import chunktune

pytestmark = pytest.mark.mujoco

TINY = """
<mujoco>
  <option timestep="0.005"/>
  <worldbody>
    <geom type="plane" size="2 2 0.1"/>
    <body pos="0 0 0.2"><freejoint/><geom type="box" size="0.05 0.05 0.05"/></body>
    <body pos="0.02 0 0.35"><freejoint/><geom type="box" size="0.05 0.05 0.05"/></body>
  </worldbody>
</mujoco>
"""


def fast_settings(tmp: Path) -> chunktune.Settings:
    cfg = tmp / "fast.toml"
    cfg.write_text(
        'policy = "fast"\n[policies.fast]\nextends = "quick"\nmax_rounds = 3\nmin_rounds = 2\n'
        "time_budget_s = 5.0\n"
    )
    return chunktune.load_settings(cfg)


def test_rollout_workload_resolves_and_caches(isolated: Path) -> None:
    """A real RolloutWorkload sweeps, its chunk runs in the pool, and a second resolve hits."""
    path = isolated / "tiny.xml"
    path.write_text(TINY)
    settings = fast_settings(isolated)
    with chunktune.RolloutWorkload.from_xml(path, num_envs=32, nthread=2, nstep=3) as w:
        first = chunktune.resolve_sync(w, settings=settings)
        assert first.source == "benchmark"
        assert first.timings[None] > 0
        w.run(first.chunk_size)  # the chosen chunk is accepted by the real pool
        second = chunktune.resolve_sync(w, settings=settings)
    assert second.source == "cache" and second.chunk_size == first.chunk_size
    stored = json.loads((isolated / "cache.json").read_text())["entries"][first.key]
    assert stored["model_file"] == str(path)
    assert stored["signature"]["kind"] == "mujoco.rollout"


def test_model_variants_get_their_own_entry(isolated: Path) -> None:
    """A batch of model variants resolves under a different key than the single model."""
    settings = fast_settings(isolated)
    base = mujoco.MjModel.from_xml_string(TINY)
    heavy = mujoco.MjModel.from_xml_string(TINY)
    heavy.body_mass[1:] *= 3.0
    single = chunktune.RolloutWorkload(base, num_envs=16, nthread=2, nstep=2)
    variants = chunktune.RolloutWorkload([base, heavy], num_envs=16, nthread=2, nstep=2)
    a = chunktune.resolve_sync(single, settings=settings)
    b = chunktune.resolve_sync(variants, settings=settings)
    assert a.key != b.key
    assert {a.source, b.source} == {"benchmark"}
    single.close()
    variants.close()


def test_chunk_size_never_changes_the_physics() -> None:
    """Rollouts with native and a tuned chunk give bit-identical states."""
    model = mujoco.MjModel.from_xml_string(TINY)
    with chunktune.RolloutWorkload(model, num_envs=12, nthread=2, nstep=4) as w:
        w.run(None)
        native = np.array(w.state)
        w.run(1)
        assert np.array_equal(native, w.state)
