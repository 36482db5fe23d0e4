"""Models for the adapter: sizes, compatibility of variants, content hashes, perturbed states."""

from __future__ import annotations

import copy
import hashlib
from collections.abc import Sequence
from typing import Any

import mujoco  # untyped: its objects are Any
import numpy as np
import numpy.typing as npt

from .._errors import InvalidArgumentError

__all__ = [
    "FREE",
    "FULLPHYSICS",
    "INTEGRATION",
    "check_compatible",
    "float_array",
    "model_digest",
    "perturb",
    "randomized",
    "read_only",
]

FULLPHYSICS = int(mujoco.mjtState.mjSTATE_FULLPHYSICS)
INTEGRATION = int(mujoco.mjtState.mjSTATE_INTEGRATION)
FREE = int(mujoco.mjtJoint.mjJNT_FREE)

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
