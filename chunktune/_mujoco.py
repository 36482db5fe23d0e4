"""The MuJoCo adapter: a Workload over ``mujoco.rollout.Rollout``, and the demo scene.

This is the only module of chunktune that imports mujoco. MuJoCo ships no type
stubs, so its objects are typed ``Any`` here and every number that leaves a
mujoco call is converted to a Python or numpy type before it is returned.
"""

from __future__ import annotations

import copy
import hashlib
import math
import numbers
import os
import pathlib
import time
from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import Any, Self

import mujoco  # untyped: its objects are Any
import mujoco.rollout
import numpy as np
import numpy.typing as npt

from ._errors import InvalidArgumentError, UsageError
from ._fingerprint import available_memory, usable_cpus
from ._workload import SignatureValue, check_chunk_size

__all__ = ["RolloutWorkload", "demo_model_path", "demo_workload", "model_digest"]

_FULLPHYSICS = int(mujoco.mjtState.mjSTATE_FULLPHYSICS)
_INTEGRATION = int(mujoco.mjtState.mjSTATE_INTEGRATION)
_FREE = int(mujoco.mjtJoint.mjJNT_FREE)

# The sizes a user most likely got wrong come first, so the message names them.
_KEY_SIZES = ("nq", "nv", "nu", "na", "nsensordata")

# Model sizes that shape no MjData array. The pool steps every env with the
# MjData of its worker, whatever the env's variant, so every other size must
# agree across variants: a mismatch would make MuJoCo read past the arrays.
_MODEL_ONLY_SIZES = frozenset(
    {
        "nnames", "nnames_map", "npaths", "ntext", "ntextdata", "ntuple", "ntupledata",
        "nnumeric", "nnumericdata", "nkey", "nmat", "ntex", "ntexdata", "nhfielddata",
        "nmeshvert", "nmeshnormal", "nmeshtexcoord", "nmeshface", "nmeshgraph", "nmeshpoly",
        "nmeshpolyvert", "nmeshpolymap", "nskin", "nskinvert", "nskintexvert", "nskinface",
        "nskinbone", "nskinbonevert", "npluginattr",
    }
)  # fmt: skip


# A pool far larger than the machine only adds threads, each with its own MjData.
_MAX_THREADS_PER_CPU = 8


def _check_nthread(nthread: int) -> None:
    """Raise unless ``nthread`` is within :data:`_MAX_THREADS_PER_CPU` times the usable CPUs.

    Raises:
        InvalidArgumentError: ``nthread`` is larger than that.
    """
    cpus = usable_cpus()
    if nthread > _MAX_THREADS_PER_CPU * cpus:
        raise InvalidArgumentError(
            f"nthread={nthread} is more than {_MAX_THREADS_PER_CPU} times the {cpus} "
            f"CPU{'' if cpus == 1 else 's'} this process may use; expected at most "
            f"{_MAX_THREADS_PER_CPU * cpus} (each pool thread steps its own MjData)"
        )


def _check_batch_memory(
    *, num_envs: int, nstep: int, nstate: int, nsensordata: int, nu: int
) -> None:
    """Raise when the batch's state, control and output arrays would not fit in memory.

    Raises:
        InvalidArgumentError: they need more bytes than this machine has available.
    """
    floats = num_envs * (nstate + nstep * (nstate + nsensordata + nu))
    need = 8 * floats
    avail = available_memory()
    if avail is not None and need > avail:
        raise InvalidArgumentError(
            f"num_envs={num_envs} with nstep={nstep} needs about {need / 2**30:.3g} GiB for "
            f"the batch's state and output arrays, more than the {avail / 2**30:.3g} GiB "
            "this machine has available; use fewer envs or steps"
        )


def _model_sizes(model: Any) -> dict[str, int]:
    """Every integer size field of an MjModel (``nq``, ``nbody``, ...) by name."""
    sizes = {}
    for name in dir(model):
        if not name.startswith("n") or name.startswith("nuser_") or name in _MODEL_ONLY_SIZES:
            continue
        value = getattr(model, name)
        if isinstance(value, int) and not isinstance(value, bool):
            sizes[name] = value
    return sizes


def _check_compatible(models: Sequence[Any]) -> None:
    """Raise unless every variant has the sizes of the first (same MjData layout)."""
    first = models[0]
    ref = {"nstate": int(mujoco.mj_stateSize(first, _FULLPHYSICS)), **_model_sizes(first)}
    order = [*_KEY_SIZES, "nstate", *sorted(set(ref) - {*_KEY_SIZES, "nstate"})]
    for index, other in enumerate(models[1:], start=1):
        sizes = {"nstate": int(mujoco.mj_stateSize(other, _FULLPHYSICS)), **_model_sizes(other)}
        differ = [f"{k} ({ref[k]} vs {sizes.get(k)})" for k in order if sizes.get(k) != ref[k]]
        if differ:
            raise InvalidArgumentError(
                f"model variant {index} is not compatible with variant 0: "
                f"{', '.join(differ)} differ; variants must be one model with different "
                "parameters, so that they share the sizes of every array"
            )


def _model_bytes(model: Any) -> bytes:
    """The compiled model as MJB bytes: every parameter, option and size."""
    buf = np.zeros(int(mujoco.mj_sizeModel(model)), np.uint8)
    mujoco.mj_saveModel(model, None, buf)
    return buf.tobytes()


def model_digest(models: Sequence[Any]) -> str:
    """sha256 (16 hex digits) over the MJB bytes of ``models``, in order."""
    digest = hashlib.sha256()
    seen: dict[int, bytes] = {}  # a model passed once per env is serialized once
    for m in models:
        if id(m) not in seen:
            seen[id(m)] = hashlib.sha256(_model_bytes(m)).digest()
        digest.update(seen[id(m)])
    return digest.hexdigest()[:16]


def _float_array(value: object, name: str) -> npt.NDArray[np.float64]:
    try:
        array = np.array(value, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise InvalidArgumentError(f"{name} must be an array of numbers: {exc}") from exc
    if not np.all(np.isfinite(array)):
        raise InvalidArgumentError(f"{name} must hold only finite numbers")
    return array


def _check_seed(seed: object) -> int:
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or seed < 0:
        raise InvalidArgumentError(f"seed must be an integer >= 0, got {seed!r}")
    return int(seed)


def _perturb(model: Any, data: Any, rng: np.random.Generator, scale: float) -> None:
    """Add seeded noise of ``scale`` to qpos and qvel; keep quaternions unit."""
    if scale > 0:
        data.qpos[:] += rng.normal(0.0, scale, model.nq)
        data.qvel[:] += rng.normal(0.0, scale, model.nv)
        mujoco.mj_normalizeQuat(model, data.qpos)


class RolloutWorkload:
    """One batched ``mujoco.rollout.Rollout`` call, repeatable with any chunk size.

    Implements :class:`chunktune.Workload`. Each env is one open-loop rollout of
    ``nstep`` steps from its own initial state; ``run(chunk_size)`` performs the
    whole batch on a pool of ``nthread`` workers and times only the pool call.
    Outputs are preallocated once and every input is checked here, so the call
    runs with ``skip_checks=True`` and the figure is the physics and the pool's
    scheduling, not Python's argument handling.

    ``model`` is one ``MjModel`` or a sequence of variants of one model (the
    same sizes, different parameters, as domain randomization makes them).
    Variants are assigned to envs in contiguous equal blocks: env ``i`` runs
    variant ``i * n_variants // num_envs``.

    Default initial states start from the model's first keyframe, or from its
    reset state when it has none, add seeded Gaussian noise of standard
    deviation ``perturbation`` to qpos and qvel (quaternions renormalized), and
    are captured as full-physics states; so envs differ, and so does their
    contact. ``initial_state`` may be given instead, ``(num_envs, nstate)`` or
    ``(nstate,)`` for all envs; ``control`` may be ``(num_envs, nstep, nu)``,
    ``(nstep, nu)`` or ``(nu,)``, and defaults to zeros.

    ``rollout`` is the caller's own pool: the workload uses it and never closes
    it, and its ``nthread`` must equal ``nthread``. Without one, the workload
    makes its own on first use and closes it in :meth:`close` (or on leaving a
    ``with`` block). A workload runs one call at a time.

    Every limit is checked before anything per env or per thread is allocated:
    ``nthread`` may be at most 8 times the CPUs this process may use, and the
    batch's state, control and output arrays must fit in the memory available.

    Raises:
        InvalidArgumentError: a count is not an integer >= 1, ``nthread`` or the batch
            is beyond what this machine can hold, variants differ in size, or
            ``initial_state``, ``control`` or ``rollout`` do not fit.
    """

    num_envs: int
    nthread: int
    _nstep: int
    _nstate: int
    _models: tuple[Any, ...]
    _env_models: list[Any]
    _datas: list[Any]
    _pool: Any
    _owns_pool: bool
    _closed: bool
    _batch: Any
    _batch_rows: npt.NDArray[np.float64] | None
    _model_file: str | None
    _initial_state: npt.NDArray[np.float64]
    _control: npt.NDArray[np.float64]
    _state_out: npt.NDArray[np.float64]
    _sensor_out: npt.NDArray[np.float64]
    _states_kind: str

    def __init__(
        self,
        model: Any,
        *,
        num_envs: int,
        nthread: int,
        nstep: int = 10,
        initial_state: npt.ArrayLike | None = None,
        control: npt.ArrayLike | None = None,
        rollout: Any = None,
        seed: int = 0,
        perturbation: float = 0.01,
        model_file: str | os.PathLike[str] | None = None,
    ) -> None:
        self.num_envs = check_chunk_size(num_envs, what="num_envs")
        self.nthread = check_chunk_size(nthread, what="nthread")
        self._nstep = check_chunk_size(nstep, what="nstep")
        _check_nthread(self.nthread)
        seed = _check_seed(seed)
        if (
            isinstance(perturbation, bool)
            or not isinstance(perturbation, numbers.Real)
            or not math.isfinite(perturbation)
            or perturbation < 0
        ):
            raise InvalidArgumentError(
                f"perturbation must be a finite number >= 0, got {perturbation!r}"
            )

        if isinstance(model, str | os.PathLike):
            raise InvalidArgumentError(
                f"model must be a mujoco.MjModel, got the path {os.fspath(model)!r}; "
                "use RolloutWorkload.from_xml() to load a file"
            )
        try:
            models = (model,) if isinstance(model, mujoco.MjModel) else tuple(model)
        except TypeError:
            models = (model,)  # not iterable: reported as a wrong type just below
        if not models:
            raise InvalidArgumentError("model must be an MjModel or a non-empty sequence of them")
        for index, m in enumerate(models):
            if not isinstance(m, mujoco.MjModel):
                raise InvalidArgumentError(
                    f"model variant {index} is a {type(m).__name__}, not a mujoco.MjModel"
                )
        _check_compatible(models)
        if len(models) > self.num_envs:
            raise InvalidArgumentError(
                f"{len(models)} model variants for num_envs={self.num_envs}: "
                "every variant needs at least one env"
            )
        m0 = models[0]
        # before anything per env or per thread exists
        _check_batch_memory(
            num_envs=self.num_envs,
            nstep=self._nstep,
            nstate=int(mujoco.mj_stateSize(m0, _FULLPHYSICS)),
            nsensordata=int(m0.nsensordata),
            nu=int(m0.nu),
        )
        self._models = models
        n_var = len(models)
        # contiguous equal blocks, as a trainer's domain randomization lays them out
        self._env_models = [models[i * n_var // self.num_envs] for i in range(self.num_envs)]

        if rollout is not None:
            pool_threads = getattr(rollout, "nthread", None)
            if pool_threads is not None and pool_threads != self.nthread:
                raise InvalidArgumentError(
                    f"the rollout pool has nthread={pool_threads!r} but the workload has "
                    f"nthread={self.nthread}; they must match (worker i steps data[i])"
                )
        self._pool = rollout
        self._owns_pool = rollout is None
        self._closed = False
        self._batch = None
        self._batch_rows = None
        self._digest: str | None = None

        self._nstate = int(mujoco.mj_stateSize(m0, _FULLPHYSICS))
        nu, nsensordata = int(m0.nu), int(m0.nsensordata)
        self._model_file = None if model_file is None else os.fspath(model_file)

        if initial_state is None:
            self._initial_state = self._default_states(seed, float(perturbation))
            self._states_kind = "default"
        else:
            self._initial_state = self._given_states(initial_state)
            self._states_kind = "caller"
        self._control = self._given_control(control, nu)

        n, k = self.num_envs, self._nstep
        self._state_out = np.zeros((n, k, self._nstate))
        self._sensor_out = np.zeros((n, k, nsensordata))
        # worker i of the pool always steps data[i]
        self._datas = [mujoco.MjData(m0) for _ in range(self.nthread)]

    # -- construction helpers -------------------------------------------------

    def _default_states(self, seed: int, scale: float) -> npt.NDArray[np.float64]:
        rng = np.random.default_rng(seed)
        datas = {id(m): mujoco.MjData(m) for m in self._models}
        states = np.empty((self.num_envs, self._nstate))
        for i, m in enumerate(self._env_models):
            d = datas[id(m)]
            if m.nkey > 0:
                mujoco.mj_resetDataKeyframe(m, d, 0)
            else:
                mujoco.mj_resetData(m, d)
            _perturb(m, d, rng, scale)
            mujoco.mj_getState(m, d, states[i], _FULLPHYSICS)
        return states

    def _given_states(self, value: npt.ArrayLike) -> npt.NDArray[np.float64]:
        array = _float_array(value, "initial_state")
        n, nstate = self.num_envs, self._nstate
        if array.shape == (nstate,) or array.shape == (1, nstate):
            array = np.broadcast_to(array.reshape(nstate), (n, nstate))
        elif array.shape != (n, nstate):
            raise InvalidArgumentError(
                f"initial_state must have shape (num_envs, nstate) = ({n}, {nstate}) or "
                f"(nstate,) = ({nstate},), got {array.shape}"
            )
        return np.ascontiguousarray(array)

    def _given_control(self, value: npt.ArrayLike | None, nu: int) -> npt.NDArray[np.float64]:
        n, k = self.num_envs, self._nstep
        if value is None:
            return np.zeros((n, k, nu))
        array = _float_array(value, "control")
        if array.shape not in ((n, k, nu), (k, nu), (nu,)):
            raise InvalidArgumentError(
                f"control must have shape (num_envs, nstep, nu) = ({n}, {k}, {nu}), "
                f"(nstep, nu) = ({k}, {nu}) or (nu,) = ({nu},), got {array.shape}"
            )
        return np.ascontiguousarray(np.broadcast_to(array, (n, k, nu)))

    # -- the Workload protocol --------------------------------------------------

    def signature(self) -> Mapping[str, SignatureValue]:
        """What besides N and T sets the cost: the compiled model(s) and the rollout length.

        ``model_sha`` hashes the MJB bytes of every variant in order, so any
        parameter or option change gives a new signature and recompiling the
        same XML does not. ``states`` says where the initial states came from
        (``"default"``, ``"caller"`` or ``"demo"``), since contact changes cost.
        """
        if self._digest is None:
            self._digest = model_digest(self._models)
        m0 = self._models[0]
        return {
            "kind": "mujoco.rollout",
            "model_sha": self._digest,
            "n_variants": len(self._models),
            "nstep": self._nstep,
            "nq": int(m0.nq),
            "nv": int(m0.nv),
            "nu": int(m0.nu),
            "ngeom": int(m0.ngeom),
            "mujoco": str(mujoco.__version__),
            "timestep": float(m0.opt.timestep),
            "states": self._states_kind,
        }

    def run(self, chunk_size: int | None) -> float:
        """Roll out the whole batch once with ``chunk_size`` (None: MuJoCo's default).

        Returns:
            The seconds the pool call took (``time.perf_counter``), nothing else.

        Raises:
            InvalidArgumentError: ``chunk_size`` is neither None nor an integer >= 1.
            UsageError: the workload was closed.
        """
        chunk = None if chunk_size is None else check_chunk_size(chunk_size)
        pool = self._get_pool()
        control = self._control if self._control.shape[2] else None
        start = time.perf_counter()
        pool.rollout(
            self._env_models,
            self._datas,
            self._initial_state,
            control,
            skip_checks=True,
            nstep=self._nstep,
            state=self._state_out,
            sensordata=self._sensor_out,
            chunk_size=chunk,
        )
        return time.perf_counter() - start

    # -- resources ----------------------------------------------------------------

    def _get_pool(self) -> Any:
        if self._closed:
            raise UsageError("this RolloutWorkload is closed")
        if self._pool is None:
            self._pool = mujoco.rollout.Rollout(nthread=self.nthread)
        return self._pool

    def close(self) -> None:
        """Close the pool if the workload made it; a caller's pool stays open."""
        if self._owns_pool and self._pool is not None:
            self._pool.close()
        self._pool = None
        self._batch = None
        self._closed = True

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return (
            f"RolloutWorkload(model_file={self._model_file!r}, num_envs={self.num_envs}, "
            f"nthread={self.nthread}, nstep={self._nstep}, n_variants={len(self._models)})"
        )

    # -- properties ---------------------------------------------------------------

    @property
    def model_file(self) -> str | None:
        """The XML file the model came from, when known."""
        return self._model_file

    @property
    def models(self) -> tuple[Any, ...]:
        """The model variants, in order (one entry without variants)."""
        return self._models

    @property
    def n_variants(self) -> int:
        return len(self._models)

    @property
    def nstep(self) -> int:
        """Steps per rollout."""
        return self._nstep

    @property
    def nstate(self) -> int:
        """Length of a full-physics state vector, ``mj_stateSize(m, mjSTATE_FULLPHYSICS)``."""
        return self._nstate

    @property
    def initial_state(self) -> npt.NDArray[np.float64]:
        """The ``(num_envs, nstate)`` initial states, read-only."""
        return _read_only(self._initial_state)

    @property
    def state(self) -> npt.NDArray[np.float64]:
        """The ``(num_envs, nstep, nstate)`` states of the last run, read-only and live."""
        return _read_only(self._state_out)

    @property
    def sensordata(self) -> npt.NDArray[np.float64]:
        """The ``(num_envs, nstep, nsensordata)`` sensor values of the last run, read-only."""
        return _read_only(self._sensor_out)

    # -- measurements for benchmarks ----------------------------------------------

    def per_env_costs(self, repeats: int = 1) -> npt.NDArray[np.float64]:
        """Single-thread seconds of each env's rollout, the minimum over ``repeats``.

        Each env runs alone on the calling thread (``Rollout(nthread=0)``);
        rounds go over all envs in turn, so drift touches every env alike.
        ``costs.sum() / nthread`` is the balance bound no schedule can beat.

        Raises:
            InvalidArgumentError: ``repeats`` is not an integer >= 1.
            UsageError: the workload was closed.
        """
        repeats = check_chunk_size(repeats, what="repeats")
        if self._closed:
            raise UsageError("this RolloutWorkload is closed")
        costs = np.full(self.num_envs, np.inf)
        data = [mujoco.MjData(self._models[0])]
        control = self._control if self._control.shape[2] else None
        with mujoco.rollout.Rollout(nthread=0) as solo:
            for _ in range(repeats):
                for i in range(self.num_envs):
                    env = slice(i, i + 1)
                    start = time.perf_counter()
                    solo.rollout(
                        [self._env_models[i]],
                        data,
                        self._initial_state[env],
                        None if control is None else control[env],
                        skip_checks=True,
                        nstep=self._nstep,
                        state=self._state_out[env],
                        sensordata=self._sensor_out[env],
                    )
                    costs[i] = min(costs[i], time.perf_counter() - start)
        return costs

    def batch_seconds(self) -> float:
        """Seconds ``mujoco.batch.Batch`` takes for the same rollouts on ``nthread`` threads.

        Batch (mujoco 4) schedules with work stealing and has no chunk size: it
        is what a user might pick instead of a tuned rollout. Its rows are set to
        the same initial states each call (mocap, equality and applied forces at
        their reset values, warm start zero, as the rollout does) and it records
        the same full-physics states and sensor values.

        Raises:
            UsageError: this mujoco has no ``mujoco.batch.Batch``, or the workload is closed.
        """
        if self._closed:
            raise UsageError("this RolloutWorkload is closed")
        try:
            from mujoco import batch as mj_batch  # absent before mujoco 4
        except ImportError as exc:
            raise UsageError(
                f"mujoco {mujoco.__version__} has no mujoco.batch.Batch (it came with mujoco 4)"
            ) from exc
        if self._batch is None:
            batch = mj_batch.Batch(self._models[0], self.num_envs, nthread=self.nthread)
            if len(self._models) > 1:
                batch.set_models(self._env_models)
            self._batch = batch
            self._batch_rows = self._integration_rows()
        batch, rows = self._batch, self._batch_rows
        batch.state[:] = rows
        record: list[Any] = [_FULLPHYSICS]
        out: dict[Any, npt.NDArray[np.float64]] = {_FULLPHYSICS: self._state_out}
        if self._sensor_out.shape[2]:
            record.append("sensordata")
            out["sensordata"] = self._sensor_out
        control = self._control if self._control.shape[2] else None
        start = time.perf_counter()
        batch.rollout(self._nstep, control, record=record, out=out)
        return time.perf_counter() - start

    def _integration_rows(self) -> npt.NDArray[np.float64]:
        """The initial states as Batch rows (mjSTATE_INTEGRATION), inputs at reset values."""
        m0 = self._models[0]
        rows = np.empty((self.num_envs, int(mujoco.mj_stateSize(m0, _INTEGRATION))))
        datas = {id(m): mujoco.MjData(m) for m in self._models}
        for i, m in enumerate(self._env_models):
            d = datas[id(m)]
            mujoco.mj_resetData(m, d)
            mujoco.mj_setState(m, d, self._initial_state[i], _FULLPHYSICS)
            mujoco.mj_getState(m, d, rows[i], _INTEGRATION)
        return rows

    # -- loading ------------------------------------------------------------------

    @classmethod
    def from_xml(
        cls,
        path: str | os.PathLike[str],
        *,
        num_envs: int,
        nthread: int,
        nstep: int = 10,
        n_variants: int = 1,
        **kwargs: Any,
    ) -> RolloutWorkload:
        """Load an MJCF (or URDF) file and build the workload over it.

        With ``n_variants > 1``, variant 0 is the model as written and each
        further variant scales every body's mass and inertia, and every geom's
        sliding friction, by its own factor drawn uniformly from [0.9, 1.1]
        (seeded by ``seed``), then recomputes the model's derived constants:
        distinct real variants of one model, as domain randomization makes.
        Other keywords go to the constructor.

        Raises:
            InvalidArgumentError: the file is missing or MuJoCo cannot load it,
                or an argument is invalid.
        """
        file = pathlib.Path(path)
        if not file.is_file():
            raise InvalidArgumentError(f"model file not found: {file}")
        n = check_chunk_size(n_variants, what="n_variants")
        try:
            model = mujoco.MjModel.from_xml_path(os.fspath(file))
        except (ValueError, mujoco.FatalError) as exc:
            raise InvalidArgumentError(f"cannot load model file {file}: {exc}") from exc
        variants = [model]
        if n > 1:
            rng = np.random.default_rng(_check_seed(kwargs.get("seed", 0)))
            variants += [_randomized(model, rng) for _ in range(n - 1)]
        return cls(
            variants if n > 1 else model,
            num_envs=num_envs,
            nthread=nthread,
            nstep=nstep,
            model_file=file,
            **kwargs,
        )


def _randomized(model: Any, rng: np.random.Generator, spread: float = 0.1) -> Any:
    """A copy of ``model`` with body masses/inertias and geom friction scaled per object."""
    variant = copy.copy(model)
    mass_scale = rng.uniform(1 - spread, 1 + spread, variant.nbody)
    variant.body_mass[:] *= mass_scale
    variant.body_inertia[:] *= mass_scale[:, None]
    variant.geom_friction[:, 0] *= rng.uniform(1 - spread, 1 + spread, variant.ngeom)
    # subtree masses, inverse weights and the like follow the masses
    mujoco.mj_setConst(variant, mujoco.MjData(variant))
    return variant


def _read_only(array: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    view = array.view()
    view.flags.writeable = False
    return view


# -- the demo scene ---------------------------------------------------------------

DEMO_NSTEP = 20
"""Steps per rollout of :func:`demo_workload`."""

# The heavy envs' pile: the middle 2x2 columns of the compiled stack's two lowest
# layers, boxes and capsules; the other bodies fly.
_DEMO_PILE = (2, 3, 4, 5, 10, 11, 12, 13)
_DEMO_SETTLE_S = 1.5  # simulated seconds for the pile to come to rest
_DEMO_PERTURBATION = 0.002  # small enough not to blow the settled pile apart


def demo_model_path() -> pathlib.Path:
    """The path of the demo scene shipped with chunktune, ``chunktune/demo/scene.xml``."""
    return pathlib.Path(__file__).resolve().parent / "demo" / "scene.xml"


def _demo_base_states(model: Any, rng: np.random.Generator) -> tuple[Any, Any]:
    """The demo's two base states: every body in the air, and a settled pile."""
    free = [j for j in range(model.njnt) if model.jnt_type[j] == _FREE]
    adr = [int(model.jnt_qposadr[j]) for j in free]
    vadr = [int(model.jnt_dofadr[j]) for j in free]
    data = mujoco.MjData(model)
    nstate = int(mujoco.mj_stateSize(model, _FULLPHYSICS))

    # Air: a grid 0.5 m apart, 2 m up. A body falls 0.2 m in the first 0.2 s,
    # so rollouts of the demo's length see no contact at all.
    def fly(d: Any, bodies: Sequence[int]) -> None:
        cols = math.ceil(math.sqrt(len(free)))
        for k in bodies:
            row, col = divmod(k, cols)
            q = rng.normal(size=4)
            d.qpos[adr[k] : adr[k] + 7] = [(col - cols / 2) * 0.5, (row - 2) * 0.5, 2.0,
                                           *(q / np.linalg.norm(q))]  # fmt: skip
            d.qvel[vadr[k] : vadr[k] + 6] = 0.0

    mujoco.mj_resetData(model, data)
    fly(data, range(len(free)))
    air = np.empty(nstate)
    mujoco.mj_getState(model, data, air, _FULLPHYSICS)

    # Pile: part of the compiled stack settles under gravity (the other bodies
    # parked far above, falling clear of it), then the others fly.
    flying = [k for k in range(len(free)) if k not in _DEMO_PILE]
    mujoco.mj_resetData(model, data)
    for k in flying:
        data.qpos[adr[k] : adr[k] + 3] = [10.0 * k, 0.0, 50.0]
    for k in _DEMO_PILE:
        data.qvel[vadr[k] : vadr[k] + 3] = rng.normal(0.0, 0.05, 3)
    for _ in range(round(_DEMO_SETTLE_S / model.opt.timestep)):
        mujoco.mj_step(model, data)
    fly(data, flying)
    data.time = 0.0
    pile = np.empty(nstate)
    mujoco.mj_getState(model, data, pile, _FULLPHYSICS)
    return air, pile


def demo_workload(
    *,
    num_envs: int,
    nthread: int,
    nstep: int = DEMO_NSTEP,
    seed: int = 0,
    rollout: Any = None,
) -> RolloutWorkload:
    """An uneven batch over the demo scene, as a training batch is uneven.

    The last quarter of the envs (``num_envs // 4`` of them) start with eight
    of the 24 bodies settled in a two-layer pile on the floor, in contact for
    the whole rollout, and the rest in the air; the others start with every
    body in free flight, high in the air. A pile env costs about 4.5-5x a
    flying one, so chunks that put the heavy envs on one worker leave the
    other idle. Each env gets its own seeded perturbation. With the defaults,
    ``num_envs=256, nthread=2`` takes about 50 ms per pool call on a 2-core
    x86 machine.

    Raises:
        InvalidArgumentError: a count is not an integer >= 1, ``nthread`` is beyond
            what this machine can run, or the batch would not fit in memory.
    """
    n = check_chunk_size(num_envs, what="num_envs")
    _check_nthread(check_chunk_size(nthread, what="nthread"))
    k = check_chunk_size(nstep, what="nstep")
    model = mujoco.MjModel.from_xml_path(os.fspath(demo_model_path()))
    nstate = int(mujoco.mj_stateSize(model, _FULLPHYSICS))
    _check_batch_memory(
        num_envs=n, nstep=k, nstate=nstate, nsensordata=int(model.nsensordata), nu=int(model.nu)
    )
    rng = np.random.default_rng(_check_seed(seed))
    air, pile = _demo_base_states(model, rng)
    n_heavy = n // 4
    data = mujoco.MjData(model)
    states = np.empty((n, air.size))
    for i in range(n):
        mujoco.mj_setState(model, data, pile if i >= n - n_heavy else air, _FULLPHYSICS)
        _perturb(model, data, rng, _DEMO_PERTURBATION)
        mujoco.mj_getState(model, data, states[i], _FULLPHYSICS)
    workload = RolloutWorkload(
        model,
        num_envs=n,
        nthread=nthread,
        nstep=nstep,
        initial_state=states,
        rollout=rollout,
        model_file=demo_model_path(),
    )
    workload._states_kind = "demo"
    return workload
