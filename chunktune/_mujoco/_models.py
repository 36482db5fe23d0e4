"""Models for the adapter: loaded from files, the variants taken, their sizes and
compatibility, content hashes, perturbed states."""

from __future__ import annotations

import contextlib
import copy
import hashlib
import logging
import os
import pathlib
import threading
import weakref
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import mujoco  # untyped: its objects are Any
import numpy as np
import numpy.typing as npt

from .._cache_entry import writable_text
from .._errors import InvalidArgumentError
from .._shown import shown_path, type_named

__all__ = [
    "FREE",
    "FULLPHYSICS",
    "INTEGRATION",
    "check_compatible",
    "float_array",
    "labelled_options",
    "load_model",
    "model_digest",
    "perturb",
    "randomized",
    "read_only",
    "remembered_digest",
    "take_models",
    "warning_hook",
]

FULLPHYSICS = int(mujoco.mjtState.mjSTATE_FULLPHYSICS)
INTEGRATION = int(mujoco.mjtState.mjSTATE_INTEGRATION)
FREE = int(mujoco.mjtJoint.mjJNT_FREE)

_logger = logging.getLogger("chunktune")

_LABELLED_OPTIONS = (
    "integrator",
    "solver",
    "cone",
    "jacobian",
    "iterations",
    "ls_iterations",
    "noslip_iterations",
    "disableflags",
    "enableflags",
)


def labelled_options(model: Any) -> dict[str, int]:
    """The ``MjOption`` fields a ``model_label``'s key keeps beside the label, as
    ``opt_<name>``: what the content hash told apart that domain randomization never draws
    (a trainer that switches solver or integrator and keeps its label would otherwise be
    served the old solver's decision). None of them for a stand-in without them."""
    opt = getattr(model, "opt", None)
    options = {}
    for name in _LABELLED_OPTIONS:
        value = getattr(opt, name, None)
        if isinstance(value, int | np.integer):
            options[f"opt_{name}"] = int(value)
    return options


warning_hook = threading.Lock()  # held by whoever swaps MuJoCo's process-wide warning hook

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
        # the model's own buffer: every model-only array above (and each nuser_*) sizes it
        "nbuffer",
    }
)  # fmt: skip


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


def check_compatible(models: Sequence[Any]) -> None:
    """Raise unless every variant has the sizes of the first (same MjData layout)."""
    first = models[0]
    ref = {"nstate": int(mujoco.mj_stateSize(first, FULLPHYSICS)), **_model_sizes(first)}
    order = [*_KEY_SIZES, "nstate", *sorted(set(ref) - {*_KEY_SIZES, "nstate"})]
    for index, other in enumerate(models[1:], start=1):
        sizes = {"nstate": int(mujoco.mj_stateSize(other, FULLPHYSICS)), **_model_sizes(other)}
        differ = [f"{k} ({ref[k]} vs {sizes.get(k)})" for k in order if sizes.get(k) != ref[k]]
        if differ:
            raise InvalidArgumentError(
                f"model variant {index} is not compatible with variant 0: "
                f"{', '.join(differ)} differ; variants must be one model with different "
                "parameters, so that they share the sizes of every array"
            )


def _model_bytes(model: Any) -> bytearray:
    """The compiled model as MJB bytes: every parameter, option and size."""
    buf = bytearray(int(mujoco.mj_sizeModel(model)))
    mujoco.mj_saveModel(model, None, np.frombuffer(buf, np.uint8))  # written in place: no copy
    return buf


def model_digest(models: Sequence[Any]) -> str:
    """sha256 (16 hex digits) over the MJB bytes of ``models``, in order."""
    seen: dict[int, bytes] = {}  # a model passed once per env is serialized once
    for m in models:
        if id(m) not in seen:
            seen[id(m)] = hashlib.sha256(_model_bytes(m)).digest()
    return _combined(seen[id(m)] for m in models)


def _combined(digests: Iterable[bytes]) -> str:
    """The digest of models whose MJB bytes have the sha256 ``digests``, in order."""
    digest = hashlib.sha256()
    for one in digests:
        digest.update(one)
    return digest.hexdigest()[:16]


# per model object: the MJB bytes last hashed and their digest. A model's parameters
# can be edited in place between two calls (model.body_mass[:] = ..., a trainer's
# domain randomization), so an object's digest is never taken on trust: its bytes are
# serialized again and compared with those hashed (together a third of the hash's cost).
_remembered: weakref.WeakKeyDictionary[Any, tuple[bytearray, str]] = weakref.WeakKeyDictionary()
_remembered_lock = threading.Lock()


def remembered_digest(model: Any) -> str:
    """``model_digest([model])``, hashed again only when ``model``'s MJB bytes differ from
    those this object had when last hashed here (an edit in place). Keeps one copy of
    the bytes of each live model asked about (dropped with the model).

    Raises:
        Exception: as ``mj_saveModel`` does for something that is no MjModel; TypeError
            for one that cannot be weakly referenced.
    """
    raw = _model_bytes(model)
    with _remembered_lock:
        known = _remembered.get(model)
    if known is not None and known[0] == raw:
        return known[1]
    digest = _combined([hashlib.sha256(raw).digest()])
    with _remembered_lock:
        _remembered[model] = (raw, digest)
    return digest


def float_array(value: object, name: str) -> npt.NDArray[np.float64]:
    try:
        array = np.array(value, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise InvalidArgumentError(f"{name} must be an array of numbers: {exc}") from exc
    if not np.all(np.isfinite(array)):
        raise InvalidArgumentError(f"{name} must hold only finite numbers")
    return array


def perturb(model: Any, data: Any, rng: np.random.Generator, scale: float) -> None:
    """Add seeded noise of ``scale`` to qpos and qvel; keep quaternions unit."""
    if scale > 0:
        data.qpos[:] += rng.normal(0.0, scale, model.nq)
        data.qvel[:] += rng.normal(0.0, scale, model.nv)
        mujoco.mj_normalizeQuat(model, data.qpos)


def randomized(model: Any, rng: np.random.Generator, spread: float = 0.1) -> Any:
    """A copy of ``model`` with body masses/inertias and geom friction scaled per object."""
    variant = copy.copy(model)
    mass_scale = rng.uniform(1 - spread, 1 + spread, variant.nbody)
    variant.body_mass[:] *= mass_scale
    variant.body_inertia[:] *= mass_scale[:, None]
    variant.geom_friction[:, 0] *= rng.uniform(1 - spread, 1 + spread, variant.ngeom)
    # subtree masses, inverse weights and the like follow the masses
    mujoco.mj_setConst(variant, mujoco.MjData(variant))
    return variant


def read_only(array: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    view = array.view()
    view.flags.writeable = False
    return view


def take_models(model: Any, num_envs: int) -> tuple[Any, ...]:
    """``model`` as a tuple of compatible variants, one env at least for each.

    Raises:
        InvalidArgumentError: a path, an empty sequence, something not an MjModel,
            variants of different sizes, or more variants than envs.
    """
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
                f"model variant {index} is of type {type_named(m)}, not a mujoco.MjModel"
            )
    check_compatible(models)
    if len(models) > num_envs:
        raise InvalidArgumentError(
            f"{len(models)} model variants for num_envs={num_envs}: "
            "every variant needs at least one env"
        )
    models = _collapsed(models, num_envs)
    # the workload's own copies: a caller who edits a model later changes neither what
    # is measured nor the key it is stored under
    copies = {id(m): copy.copy(m) for m in models}
    return tuple(copies[id(m)] for m in models)


def _collapsed(models: tuple[Any, ...], num_envs: int) -> tuple[Any, ...]:
    """``models`` with runs of one model object made one variant, where that lays out the
    same model for every env (``[m] * num_envs``, MuJoCo's per-env list, is ``m``)."""
    runs = tuple(m for i, m in enumerate(models) if i == 0 or m is not models[i - 1])
    n, k = len(models), len(runs)
    if k == n:
        return models
    same = all(runs[i * k // num_envs] is models[i * n // num_envs] for i in range(num_envs))
    return runs if same else models


def load_model(file: pathlib.Path) -> Any:
    """The MjModel in ``file``: compiled MJB by its suffix, else MJCF or URDF.

    What MuJoCo warns of while loading goes into the error where the load fails, else to
    the ``chunktune`` logger, rather than to stderr and a ``MUJOCO_LOG.TXT`` in the
    current folder; a warning handler the program set gets them as before.

    Raises:
        InvalidArgumentError: the file cannot be read, MuJoCo cannot load it, or its
            name is not UTF-8.
    """
    try:  # MuJoCo calls a file it may not open "empty"
        file.open("rb").close()
    except OSError as exc:
        raise InvalidArgumentError(
            f"cannot read model file {_named(file)}: {exc.strerror or exc}"
        ) from None
    warned: list[str] = []
    try:
        with _warnings_kept(warned):
            if file.suffix.lower() == ".mjb":
                model = mujoco.MjModel.from_binary_path(os.fspath(file))
            else:
                model = mujoco.MjModel.from_xml_path(os.fspath(file))
    except TypeError:  # MuJoCo takes UTF-8 file names only
        raise InvalidArgumentError(
            f"cannot load model file {_named(file)}: its name is not "
            "UTF-8, which MuJoCo cannot open; rename the file"
        ) from None
    except (ValueError, mujoco.FatalError) as exc:
        # MuJoCo's parser reports on several lines (what, then where): one line here,
        # so the CLI's error stays one line under its "chunktune: error:" prefix
        why = " ".join(" ".join([str(exc), *(f"({w})" for w in warned)]).split())
        # which names the file as given: an escape sequence in it would act on the terminal
        raise InvalidArgumentError(
            f"cannot load model file {_named(file)}: {shown_path(why)}"
        ) from exc
    for warning in warned:
        # prefixed as every other line chunktune writes to stderr
        _logger.warning(
            "chunktune: MuJoCo warned while loading %s: %s",
            _named(file),
            shown_path(" ".join(warning.split())),
        )
    return model


def _named(file: pathlib.Path) -> str:
    """``file``'s name for a one-line message: a byte that is no UTF-8 as its escape, and a
    newline or an escape sequence in it escaped (:func:`~chunktune._shown.shown_path`)."""
    return shown_path(writable_text(os.fspath(file)))


@contextlib.contextmanager
def _warnings_kept(warned: list[str]) -> Iterator[None]:
    """MuJoCo's warnings appended to ``warned`` while in the block, where the program set
    no handler of its own (MuJoCo's default prints them and appends them to a log file in
    the current folder)."""
    with warning_hook:
        if mujoco.get_mju_user_warning() is not None:
            yield
            return
        mujoco.set_mju_user_warning(warned.append)
        try:
            yield
        finally:
            mujoco.set_mju_user_warning(None)
