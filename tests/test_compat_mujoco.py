"""The drop-in for the older tuner's resolve_chunk_size, over a real MuJoCo pool."""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path
from typing import Any, cast

import mujoco
import numpy as np
import pytest
from mujoco import rollout

from chunktune import InvalidArgumentError, _older_cache, _settled, compat
from chunktune._cache import default_cache_path
from chunktune._older_cache import OLDER_CACHE_VARIABLES
from chunktune._resolve import resolve_sync
from chunktune.compat import resolve_chunk_size

pytestmark = pytest.mark.mujoco

TINY = """
<mujoco>
  <worldbody>
    <body><joint name="a" type="hinge"/><geom type="box" size=".05 .05 .05"/></body>
    <body pos=".3 0 0"><joint name="b" type="hinge"/><geom type="box" size=".05 .05 .05"/></body>
  </worldbody>
  <actuator><motor joint="a"/><motor joint="b"/></actuator>
</mujoco>
"""

NUM_ENVS, NTHREAD = 32, 2

# one older tuner's entry, as it wrote them
OLDER_DOC = {
    "ab" * 20: {
        "chunk_size": 4,
        "per_candidate_ms": {"None": 1.2, "4": 1.0},
        "model_file": None,
        "hostname": "node7",
    }
}


class RolloutPool:
    """A trainer's pool with the older tuner's step signature, over mujoco.rollout."""

    def __init__(self, model: Any) -> None:
        self.model = model
        self.data = [mujoco.MjData(model) for _ in range(NTHREAD)]
        self.rollout = rollout.Rollout(nthread=NTHREAD)
        self.calls = 0

    def step(
        self,
        state: np.ndarray,
        *,
        nstep: int,
        control: np.ndarray,
        chunk_size: int | None,
        return_sensor: bool,
        post_step_forward_sensor: bool,
    ) -> None:
        self.calls += 1
        self.rollout.rollout(
            self.model, self.data, state, control, nstep=nstep, chunk_size=chunk_size
        )

    def close(self) -> None:
        self.rollout.close()


def initial_states(model: Any) -> np.ndarray:
    spec = mujoco.mjtState.mjSTATE_FULLPHYSICS
    state = np.empty(mujoco.mj_stateSize(model, spec))
    mujoco.mj_getState(model, mujoco.MjData(model), state, spec)
    return np.tile(state, (NUM_ENVS, 1))


def resolve(pool: RolloutPool) -> int | None:
    """resolve_chunk_size as the older tuner's callers call it."""
    return resolve_chunk_size(
        pool=pool,
        state=initial_states(pool.model),
        model=pool.model,
        n_variants=1,
        num_envs=NUM_ENVS,
        nthread=NTHREAD,
        dtype=np.float64,
        post_step_forward_sensor=False,
        bench_nsteps=2,
        manual_chunk_size=None,
        adaptive=True,
    )


@pytest.fixture
def pool(isolated: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    # settled as soon as written, as a job's settings file is: a resolve's settings are
    # then known afterwards without reading the file again
    monkeypatch.setattr(_settled, "SETTLED_S", 0.0)
    # the rounds end the sweep, not the budget: a budget of 0.5 s, at a loaded machine's
    # 0.03 s a call, timed native alone and stored nothing, so a later resolve measured again
    (isolated / "chunktune.toml").write_text(
        'policy = "fast"\n[policies.fast]\nextends = "quick"\nmax_rounds = 3\n'
        "min_rounds = 2\ntime_budget_s = 3.0\n"
    )
    pool = RolloutPool(mujoco.MjModel.from_xml_string(TINY))
    yield pool
    pool.close()


@pytest.fixture
def older_cache(isolated: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The older tuner's cache file, which nothing in chunktune has warned of yet."""
    path = isolated / "unisim" / "chunk_size.json"
    path.parent.mkdir()
    path.write_text(json.dumps(OLDER_DOC, indent=2, sort_keys=True))
    monkeypatch.setattr(_older_cache, "_warned", False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(isolated / "xdg"))  # chunktune's default file
    return path


def _older_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "older tuner's cache" in r.getMessage()]


@pytest.mark.parametrize("variable", OLDER_CACHE_VARIABLES)
@pytest.mark.parametrize("where", ["plain", "event loop"])
def test_the_older_tuners_cache_variable_is_warned_of_once_and_its_file_left_alone(
    pool: RolloutPool,
    older_cache: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    variable: str,
    where: str,
) -> None:
    """A variable naming the older tuner's cache: one warning saying where chunktune caches."""
    monkeypatch.delenv("CHUNKTUNE_CACHE")
    monkeypatch.setenv(variable, str(older_cache))
    before = older_cache.read_bytes()

    async def on_a_loop() -> int | None:
        return resolve(pool)

    with caplog.at_level(logging.WARNING, logger="chunktune"):
        first = asyncio.run(on_a_loop()) if where == "event loop" else resolve(pool)
        measured = pool.calls
        assert resolve(pool) == first and pool.calls == measured > 0  # the second a cache hit
    (warning,) = _older_warnings(caplog)
    assert f"${variable}" in warning and str(older_cache) in warning
    assert str(default_cache_path()) in warning and "CHUNKTUNE_CACHE" in warning
    assert older_cache.read_bytes() == before  # neither read as chunktune's nor migrated
    assert sorted(p.name for p in older_cache.parent.iterdir()) == ["chunk_size.json"]
    (key,) = json.loads(default_cache_path().read_text())["entries"]
    assert not key.startswith("legacy-")


@pytest.mark.parametrize("chosen", ["CHUNKTUNE_CACHE", "[cache] path"])
def test_a_chosen_cache_file_is_no_reason_to_warn_of_the_older_variable(
    pool: RolloutPool,
    older_cache: Path,
    isolated: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    chosen: str,
) -> None:
    """With chunktune's own cache file chosen, the older tuner's variable is no surprise."""
    monkeypatch.setenv(OLDER_CACHE_VARIABLES[0], str(older_cache))
    if chosen == "[cache] path":
        monkeypatch.delenv("CHUNKTUNE_CACHE")
        settings = isolated / "chunktune.toml"
        settings.write_text(f'{settings.read_text()}[cache]\npath = "mine.json"\n')
    with caplog.at_level(logging.WARNING, logger="chunktune"):
        resolve(pool)
    assert pool.calls > 0 and _older_warnings(caplog) == []
    name = "cache.json" if chosen == "CHUNKTUNE_CACHE" else "mine.json"
    assert len(json.loads((isolated / name).read_text())["entries"]) == 1


@pytest.mark.parametrize("where", ["plain", "event loop"])
def test_a_policy_that_never_measures_is_no_reason_to_warn_of_the_older_variable(
    pool: RolloutPool,
    older_cache: Path,
    isolated: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    where: str,
) -> None:
    """policy = "off" never reaches the cache: no warning that chunktune caches elsewhere."""
    monkeypatch.delenv("CHUNKTUNE_CACHE")
    monkeypatch.setenv(OLDER_CACHE_VARIABLES[0], str(older_cache))
    (isolated / "chunktune.toml").write_text('policy = "off"\n')

    async def on_a_loop() -> int | None:
        return resolve(pool)

    with caplog.at_level(logging.WARNING, logger="chunktune"):
        answer = asyncio.run(on_a_loop()) if where == "event loop" else resolve(pool)
    assert answer is None and pool.calls == 0
    assert _older_warnings(caplog) == [] and not default_cache_path().exists()


@pytest.mark.parametrize("where", ["plain", "event loop"])
def test_a_bug_in_warning_of_the_older_cache_leaves_the_answer(
    pool: RolloutPool,
    older_cache: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    where: str,
) -> None:
    """chunktune failing while it checks the older variables: logged, the decision returned."""
    monkeypatch.delenv("CHUNKTUNE_CACHE")
    monkeypatch.setenv(OLDER_CACHE_VARIABLES[0], str(older_cache))
    bug = TypeError("a bug in the check")

    def failing(settings: object) -> None:
        raise bug

    monkeypatch.setattr(compat, "_warn_of_older_cache", failing)

    async def on_a_loop() -> int | None:
        return resolve(pool)

    with caplog.at_level(logging.WARNING, logger="chunktune"):
        answer = asyncio.run(on_a_loop()) if where == "event loop" else resolve(pool)
    (entry,) = json.loads(default_cache_path().read_text())["entries"].values()
    assert answer == (None if entry["chunk_size"] == "native" else entry["chunk_size"])
    assert pool.calls > 0 and "a bug in chunktune" in caplog.text
    assert [r.exc_info[1] for r in caplog.records if r.exc_info] == [bug]


def test_a_hit_hashes_an_unchanged_model_once_and_an_edited_one_again(
    pool: RolloutPool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Hits on one unedited model hash it once; an edit in place is hashed again, a new key."""
    import hashlib
    import types

    from chunktune._mujoco import _models, model_digest

    hashed: list[int] = []

    def sha256(data: bytes = b"") -> Any:
        hashed.append(len(data))
        return hashlib.sha256(data)

    monkeypatch.setattr(_models, "hashlib", types.SimpleNamespace(sha256=sha256))
    size = mujoco.mj_sizeModel(pool.model)
    keys: list[str] = []
    monkeypatch.setattr(compat, "_resolve_sync", _keeping_keys(resolve_sync, keys))
    resolve(pool)
    first = hashed.count(size)
    for _ in range(3):
        resolve(pool)  # cache hits
    assert first == 1 and hashed.count(size) == first
    assert keys[0] == keys[-1]
    pool.model.body_mass[1] *= 2.0  # edited in place, as domain randomization does
    resolve(pool)
    assert hashed.count(size) == first + 1
    assert keys[-1] != keys[0]
    assert keys[-1].split(".")[0] != keys[0].split(".")[0]  # the job's part: the model
    assert compat._model_facts(pool.model, 1)["model_sha"] == model_digest([pool.model])


def test_variants_drawn_afresh_under_one_model_label_measure_once(
    pool: RolloutPool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Draws under one model_label share a key (one sweep, then hits); a new integrator does not."""
    keys: list[str] = []
    monkeypatch.setattr(compat, "_resolve_sync", _keeping_keys(resolve_sync, keys))
    rng = np.random.default_rng(0)
    calls = []
    for draw in range(4):
        pool.model.body_mass[1:] *= rng.uniform(0.8, 1.2, size=pool.model.nbody - 1)
        if draw == 3:
            pool.model.opt.integrator = mujoco.mjtIntegrator.mjINT_IMPLICITFAST
        resolve_chunk_size(
            pool=pool, state=initial_states(pool.model), model=pool.model, n_variants=1,
            num_envs=NUM_ENVS, nthread=NTHREAD, dtype=np.float64, post_step_forward_sensor=False,
            bench_nsteps=2, manual_chunk_size=None, adaptive=True, model_label="hinges-dr",
        )  # fmt: skip
        calls.append(pool.calls)
    assert calls[0] > 0 and calls[1] == calls[2] == calls[0]  # measured once
    assert keys[0] == keys[1] == keys[2] != keys[3]
    facts = compat._model_facts(pool.model, 1, "hinges-dr")
    assert facts["model_label"] == "hinges-dr" and "model_sha" not in facts


@pytest.mark.parametrize(
    "label",
    [
        pytest.param("", id="empty"),
        pytest.param(7, id="int"),
        pytest.param("  ", id="blank"),
        pytest.param("hinges\ndr", id="newline"),
        pytest.param("x" * 257, id="257-characters"),
    ],
)
def test_a_model_label_that_is_no_name_is_refused(pool: RolloutPool, label: object) -> None:
    """A model_label that is no name (empty, blank, a control character, 257 long) raises first."""
    with pytest.raises(InvalidArgumentError, match=r"model_label .* is not a name for the model"):
        resolve_chunk_size(
            pool=pool, state=initial_states(pool.model), model=pool.model, n_variants=1,
            num_envs=NUM_ENVS, nthread=NTHREAD, dtype=np.float64, post_step_forward_sensor=False,
            bench_nsteps=2, manual_chunk_size=None, adaptive=True, model_label=cast(Any, label),
        )  # fmt: skip
    assert pool.calls == 0


def _keeping_keys(resolve_sync: Any, keys: list[str]) -> Any:
    def kept(workload: Any, **kwargs: Any) -> Any:
        decision = resolve_sync(workload, **kwargs)
        keys.append(decision.key)
        return decision

    return kept


def test_the_pool_s_mjdata_given_as_its_model_is_refused(pool: RolloutPool) -> None:
    """model=MjData (an easy slip) raises: keyed by no content, it would share one entry."""
    with pytest.raises(InvalidArgumentError, match=r"\(MjData\) is not a mujoco\.MjModel"):
        resolve_chunk_size(
            pool=pool, state=initial_states(pool.model), model=pool.data[0], n_variants=1,
            num_envs=NUM_ENVS, nthread=NTHREAD, dtype=np.float64, post_step_forward_sensor=False,
            bench_nsteps=2, manual_chunk_size=None, adaptive=True,
        )  # fmt: skip
    assert pool.calls == 0
