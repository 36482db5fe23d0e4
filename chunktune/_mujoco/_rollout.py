"""The Workload over ``mujoco.rollout.Rollout``: one batched pool call, any chunk size."""

from __future__ import annotations

import os
import pathlib
import threading
import time
from collections.abc import Mapping
from types import TracebackType
from typing import Any, NoReturn, Self, SupportsIndex, TypedDict, Unpack

import mujoco  # untyped: its objects are Any
import mujoco.rollout
import numpy as np
import numpy.typing as npt

from .._counts import check_chunk_size, check_count, check_seed
from .._crowding import warn_if_crowded
from .._errors import InvalidArgumentError, UsageError
from .._exiting import exiting, wait_at_exit
from .._paths import model_file_problem
from .._returned import SignatureValue
from .._shown import shown_one
from ._inputs import (
    DEFAULT_PERTURBATION,
    check_model_file,
    check_model_label,
    check_perturbation,
    check_states_label,
    default_states,
    given_control,
    given_states,
    take_pool,
)
from ._limits import check_batch_memory, check_nthread
from ._models import (
    FULLPHYSICS,
    labelled_options,
    load_model,
    model_digest,
    randomized,
    read_only,
    take_models,
)

__all__ = ["CLOSED", "RolloutOptions", "RolloutWorkload"]

CLOSED = (
    "this RolloutWorkload is closed (its close() was called) and measures no more; build a "
    "new one to measure again (a pool given with rollout= stays open: hand it to the new one)"
)
EXITING = (
    "Python is exiting: this RolloutWorkload starts no pool call any more (a MuJoCo call "
    "that returns into an interpreter shutting down crashes the process)"
)
"""What a closed workload's calls raise: a resolve's fallback reason quotes it."""


class RolloutOptions(TypedDict, total=False):
    """The keywords of :class:`RolloutWorkload` that ``from_xml`` passes on to it."""

    initial_state: npt.ArrayLike | None
    control: npt.ArrayLike | None
    rollout: Any
    seed: int
    perturbation: float
    states_label: str | None
    model_label: str | None


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
    ``(nstep, nu)`` or ``(nu,)``, and defaults to zeros. ``states_label`` is how
    :meth:`signature` names where the initial states came from (default
    ``"caller"`` when ``initial_state`` is given, else ``"default"``), since two
    batches of one model with different contact cost differently.

    ``model_label`` names the model, or a family of its variants, in :meth:`signature`
    instead of their content: variants that domain randomization draws afresh (other
    masses, frictions, sizes of geoms) then share one cache entry, where without it every
    draw is a new key and a new sweep. The label stands for what the hash would have told
    apart, so give another label to a model whose cost differs (another robot, other
    contact); the model's ``nq``, ``nv``, ``nu`` and ``ngeom``, its timestep, its solver
    and integrator options (:func:`~chunktune._mujoco._models.labelled_options`) and the
    variant count stay in the key.

    ``rollout`` is the caller's own pool: the workload uses it and never closes
    it, and its ``nthread`` must equal ``nthread``. Without one, the workload
    makes its own on first use and closes it in :meth:`close` (or on leaving a
    ``with`` block). A workload runs one call at a time. It cannot be pickled or
    copied (a ``UsageError`` says so): build it in the process that measures, and send
    other processes the :class:`chunktune.Decision`, which pickles.

    Every limit is checked before anything per env or per thread is allocated:
    ``nthread`` may be at most 8 times the CPUs this process may use, and the
    batch's state, control and output arrays must fit in the memory available.

    Raises:
        InvalidArgumentError: a count is not an integer >= 1, ``nthread`` or the batch
            is beyond what this machine can hold, variants differ in size,
            ``initial_state``, ``control`` or ``rollout`` do not fit, ``seed`` is negative,
            ``perturbation`` is not a number from 0 to 10, ``model_file`` is no path, or
            ``states_label`` or ``model_label`` is no name (a string of 1 to 256
            characters, not only whitespace, with no control character).
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
    _busy: threading.Lock
    _closed: bool
    _model_file: str | None
    _initial_state: npt.NDArray[np.float64]
    _control: npt.NDArray[np.float64]
    _state_out: npt.NDArray[np.float64]
    _sensor_out: npt.NDArray[np.float64]
    _states_kind: str
    _model_label: str | None

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
        perturbation: float = DEFAULT_PERTURBATION,
        model_file: str | os.PathLike[str] | None = None,
        states_label: str | None = None,
        model_label: str | None = None,
    ) -> None:
        self.num_envs = check_count(num_envs, what="num_envs")
        self.nthread = check_count(nthread, what="nthread")
        self._nstep = check_count(nstep, what="nstep")
        check_nthread(self.nthread)
        seed = check_seed(seed)
        scale = check_perturbation(perturbation)
        self._perturbation = scale if initial_state is None else None
        self._models = take_models(model, self.num_envs)
        m0 = self._models[0]
        self._nstate = int(mujoco.mj_stateSize(m0, FULLPHYSICS))
        # before anything per env or per thread exists
        check_batch_memory(
            num_envs=self.num_envs,
            nstep=self._nstep,
            nstate=self._nstate,
            nsensordata=int(m0.nsensordata),
            nu=int(m0.nu),
        )
        n_var = len(self._models)
        # contiguous equal blocks, as a trainer's domain randomization lays them out
        self._env_models = [self._models[i * n_var // self.num_envs] for i in range(self.num_envs)]
        self._pool = take_pool(rollout, self.nthread)
        self._owns_pool = rollout is None
        self._busy = threading.Lock()
        wait_at_exit(self._busy)
        self._closed = False
        self._digest: str | None = None
        self._model_file = check_model_file(model_file)
        label = check_states_label(states_label)
        self._model_label = check_model_label(model_label)
        if initial_state is None:
            self._initial_state = default_states(
                self._models, self._env_models, self._nstate, seed, scale
            )
        else:
            self._initial_state = given_states(initial_state, self.num_envs, self._nstate)
        self._states_kind = label or ("default" if initial_state is None else "caller")
        self._control = given_control(control, self.num_envs, self._nstep, int(m0.nu))
        self._allocate_outputs(int(m0.nsensordata))
        # last: a workload refused for another argument is no pool to warn of, and the
        # warning, said once a process, is kept for the one that is built
        warn_if_crowded(self.nthread)

    def _allocate_outputs(self, nsensordata: int) -> None:
        n, k = self.num_envs, self._nstep
        self._state_out = np.zeros((n, k, self._nstate))
        self._sensor_out = np.zeros((n, k, nsensordata))
        # worker i of the pool always steps data[i]
        self._datas = [mujoco.MjData(self._models[0]) for _ in range(self.nthread)]

    # -- the Workload protocol --------------------------------------------------

    def signature(self) -> Mapping[str, SignatureValue]:
        """What besides N and T sets the cost: the compiled model(s) and the rollout length.

        ``model_sha`` hashes the MJB bytes of every variant in order, so any
        parameter or option change gives a new signature and recompiling the
        same XML does not; with a ``model_label``, ``model_label`` stands in its
        place (nothing is hashed), with the solver and integrator options beside it.
        ``states`` says where the initial states came from (``"default"``, ``"caller"``
        or ``"demo"``), since contact changes cost.
        """
        m0 = self._models[0]
        if self._model_label is not None:
            model: dict[str, SignatureValue] = {
                "model_label": self._model_label,
                **labelled_options(m0),
            }
        else:
            if self._digest is None:
                self._digest = model_digest(self._models)
            model = {"model_sha": self._digest}
        return {
            "kind": "mujoco.rollout",
            **model,
            "n_variants": len(self._models),
            "nstep": self._nstep,
            "nq": int(m0.nq),
            "nv": int(m0.nv),
            "nu": int(m0.nu),
            "ngeom": int(m0.ngeom),
            "mujoco": str(mujoco.__version__),
            "timestep": float(m0.opt.timestep),
            "states": self._states_kind,
            # how far the default states stray sets their contact; left out at the
            # default, so entries made before it was keyed stay valid
            **(
                {"perturbation": self._perturbation}
                if self._perturbation not in (None, DEFAULT_PERTURBATION)
                else {}
            ),
        }

    def run(self, chunk_size: int | None) -> float:
        """Roll out the whole batch once with ``chunk_size`` (None: MuJoCo's default).

        Returns:
            The seconds the pool call took (``time.perf_counter``), nothing else.

        Raises:
            InvalidArgumentError: ``chunk_size`` is neither None nor an integer >= 1.
            UsageError: the workload was closed, or Python is exiting.
        """
        chunk = None if chunk_size is None else check_chunk_size(chunk_size)
        control = self._control if self._control.shape[2] else None
        with self._busy:  # one call at a time: MuJoCo's pool crashes under two at once
            if exiting():
                raise UsageError(EXITING)
            pool = self._get_pool()
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

    @property
    def settle_on_cancel(self) -> bool:
        """True when the pool is the caller's (``rollout=``): a cancelled resolve, or one that
        ``hard_limit_s`` ends, returns only once the probe in flight has stepped it.

        The caller may step its pool as soon as the resolve returns, and MuJoCo's pool
        crashes the process when two threads step it at once. A pool the workload made
        itself is stepped by nobody else: a cancel returns at once, and :meth:`close`
        waits for the probe.
        """
        return not self._owns_pool

    # -- resources ----------------------------------------------------------------

    def _get_pool(self) -> Any:
        if self._closed:
            raise UsageError(CLOSED)
        if self._pool is None:
            self._pool = mujoco.rollout.Rollout(nthread=self.nthread)
        return self._pool

    def close(self, timeout_s: float | None = None) -> bool:
        """Stop using the pool, once no :meth:`run` is using it; close it if the workload made it.

        A caller's pool stays open, and is the caller's again when this returns: a
        ``run()`` still in progress (another task's resolve of this workload, a call of
        your own in another thread) is waited for first, and none starts after (MuJoCo's
        pool crashes the process when two threads call it at once). A resolve cancelled,
        or ended by ``hard_limit_s``, has already waited for its own probe with such a
        pool (:attr:`settle_on_cancel`); with the workload's own pool it has not, and
        this waits for that probe. ``timeout_s`` bounds the wait; past it nothing is
        closed and the result is False. It blocks: from a task, run it in a thread.
        """
        if not self._busy.acquire(timeout=-1 if timeout_s is None else max(0.0, timeout_s)):
            return False
        try:
            if self._owns_pool and self._pool is not None:
                self._pool.close()
            self._pool = None
            self._closed = True
        finally:
            self._busy.release()
        return True

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __reduce_ex__(self, protocol: SupportsIndex) -> NoReturn:
        # pickle's own refusal names a lock deep inside ("cannot pickle '_thread.lock'"):
        # a trainer that ships one to a spawned worker is told what to send instead
        raise UsageError(
            f"{self!r} cannot be pickled or copied: it holds a MuJoCo thread pool, its "
            "MjData and its batch's arrays; build it where it runs (RolloutWorkload.from_xml"
            "(path, ...) in the child process) and send the child the Decision or its "
            "chunk_size, which pickle"
        )

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
        """The workload's copies of the model variants, in order (one entry without variants)."""
        return self._models

    @property
    def n_variants(self) -> int:
        """How many model variants the envs run (identical per-env entries are one)."""
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
        return read_only(self._initial_state)

    @property
    def state(self) -> npt.NDArray[np.float64]:
        """The ``(num_envs, nstep, nstate)`` states of the last run, read-only and live."""
        return read_only(self._state_out)

    @property
    def sensordata(self) -> npt.NDArray[np.float64]:
        """The ``(num_envs, nstep, nsensordata)`` sensor values of the last run, read-only."""
        return read_only(self._sensor_out)

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
        **kwargs: Unpack[RolloutOptions],
    ) -> Self:
        """Load an MJCF (or URDF) file, or a compiled ``.mjb``, and build the workload over it.

        With ``n_variants > 1``, variant 0 is the model as written and each
        further variant scales every body's mass and inertia, and every geom's
        sliding friction, by its own factor drawn uniformly from [0.9, 1.1]
        (seeded by ``seed``), then recomputes the model's derived constants:
        distinct real variants of one model, as domain randomization makes.
        Other keywords go to the constructor.

        Raises:
            InvalidArgumentError: the file is missing, no regular file, or named so that
                the system refuses to look it up (past NAME_MAX, in a folder it may not
                search), MuJoCo cannot load it, or an argument is invalid.
        """
        if not isinstance(path, str | os.PathLike):
            raise InvalidArgumentError(
                f"model file {shown_one(path)} is not a path (a str or os.PathLike)"
            )
        if not os.fspath(path):  # pathlib would read "" as ".", the current folder
            raise InvalidArgumentError(
                'model file "" is no file name; expected an MJCF (.xml) or .mjb file'
            )
        file = pathlib.Path(path)
        problem = model_file_problem(file)
        if problem is not None:
            raise InvalidArgumentError(problem)
        n = check_chunk_size(n_variants, what="n_variants")
        if "model_file" in kwargs:
            raise InvalidArgumentError(
                "from_xml() names the model file itself: leave model_file out"
            )
        model = load_model(file)
        variants = [model]
        if n > 1:
            rng = np.random.default_rng(check_seed(kwargs.get("seed", 0)))
            variants += [randomized(model, rng) for _ in range(n - 1)]
        return cls(
            variants if n > 1 else model,
            num_envs=num_envs,
            nthread=nthread,
            nstep=nstep,
            model_file=file,
            **kwargs,
        )
