"""A drop-in for the older tuner's ``resolve_chunk_size(...)``.

Same keywords, same answers for the cheap cases (manual override first,
``adaptive=False`` gives None, at most one work-chunk gives None without
measuring); otherwise chunktune measures ``pool.step`` through the active policy
and caches the result under a key that, unlike the older tuner's, also holds the
model's content, the MuJoCo version and the CPUs this process may use.
"""

from __future__ import annotations

import numbers
import time
from collections.abc import Mapping
from typing import Any

import numpy as np

from ._errors import InvalidArgumentError as _InvalidArgumentError
from ._resolve import resolve_sync as _resolve_sync
from ._workload import SignatureValue
from ._workload import check_chunk_size as _check_chunk_size
from ._workload import upper_chunk as _upper_chunk

__all__ = ["PoolStepWorkload", "resolve_chunk_size"]


def _model_facts(model: Any, n_variants: int) -> dict[str, SignatureValue]:
    facts: dict[str, SignatureValue] = {"n_variants": int(n_variants)}
    for name in ("nq", "nv", "nu", "na", "nbody", "njnt", "ngeom", "nsensordata"):
        value = getattr(model, name, None)
        if isinstance(value, int | np.integer):
            facts[name] = int(value)
    try:
        from ._mujoco import model_digest  # imports mujoco; the model came from it anyway

        facts["model_sha"] = model_digest([model])
    except Exception:  # not a real MjModel (a stand-in in a test, say): sizes only
        facts["model_sha"] = "unknown"
    return facts


def _dtype_name(dtype: Any) -> str:
    try:
        return str(np.dtype(dtype).name)
    except TypeError:
        raise _InvalidArgumentError(
            f"dtype {dtype!r} is not a numpy data type (such as 'float64')"
        ) from None


def _control_width(model: Any) -> int:
    """``model.nu``, the controls per env (0 when the model has none)."""
    nu = getattr(model, "nu", 0)
    if isinstance(nu, bool) or not isinstance(nu, numbers.Integral) or nu < 0:
        raise _InvalidArgumentError(f"model.nu {nu!r} is not a count of controls (an int >= 0)")
    return int(nu)


class PoolStepWorkload:
    """The older tuner's probe as a Workload: ``pool.step`` on a copy of ``state``, zero controls.

    ``run`` times only the ``pool.step`` call (seconds).
    """

    def __init__(
        self,
        *,
        pool: Any,
        state: Any,
        model: Any,
        n_variants: int,
        num_envs: int,
        nthread: int,
        dtype: Any,
        post_step_forward_sensor: bool,
        bench_nsteps: int,
        backend_type: str = "mujoco",
        model_file: str | None = None,
    ) -> None:
        self.pool = pool
        self.state = state
        self.model = model
        self.num_envs = num_envs
        self.nthread = nthread
        self.bench_nsteps = _check_chunk_size(bench_nsteps, what="bench_nsteps")
        self.post_step_forward_sensor = bool(post_step_forward_sensor)
        self.model_file = model_file
        self._signature: dict[str, SignatureValue] = {
            "kind": "compat.pool_step",
            "backend_type": str(backend_type),
            "dtype": _dtype_name(dtype),
            "post_step_forward_sensor": self.post_step_forward_sensor,
            "bench_nsteps": self.bench_nsteps,
            **_model_facts(model, _check_chunk_size(n_variants, what="n_variants")),
        }
        nu = _control_width(model)
        self.control = np.zeros((num_envs, self.bench_nsteps, nu), dtype=np.float64)

    def signature(self) -> Mapping[str, SignatureValue]:
        """The older key's fields plus the model's content hash."""
        return self._signature

    def run(self, chunk_size: int | None) -> float:
        """Step a copy of the state ``bench_nsteps`` times; seconds spent in ``pool.step``."""
        state = self.state.copy()
        start = time.perf_counter()
        self.pool.step(
            state,
            nstep=self.bench_nsteps,
            control=self.control,
            chunk_size=chunk_size,
            return_sensor=True,
            post_step_forward_sensor=self.post_step_forward_sensor,
        )
        return time.perf_counter() - start


def resolve_chunk_size(
    *,
    pool: Any,
    state: Any,
    model: Any,
    n_variants: int,
    num_envs: int,
    nthread: int,
    dtype: Any,
    post_step_forward_sensor: bool,
    bench_nsteps: int,
    manual_chunk_size: int | None,
    adaptive: bool,
    backend_type: str = "mujoco",
    model_file: str | None = None,
) -> int | None:
    """The older tuner's entry point, answered by chunktune. Returns the chunk or None (native).

    A failing ``pool.step`` never raises out of here: the answer is None. ``nthread=0``
    (the pool steps on the calling thread) answers None: chunks cannot matter.

    Raises:
        InvalidArgumentError: ``num_envs`` is not an integer >= 1, ``nthread`` not an
            integer >= 0, ``manual_chunk_size`` not an integer from 1 to ``num_envs``;
            when measuring, ``n_variants`` or ``bench_nsteps`` not an integer >= 1,
            ``dtype`` no numpy data type, or ``model.nu`` no count of controls.
    """
    # first, before anything is sized by them
    num_envs = _check_chunk_size(num_envs, what="num_envs")
    on_caller = isinstance(nthread, numbers.Integral) and not isinstance(nthread, bool)
    nthread = 0 if on_caller and nthread == 0 else _check_chunk_size(nthread, what="nthread")
    if manual_chunk_size is not None:
        return _check_chunk_size(manual_chunk_size, what="manual_chunk_size", num_envs=num_envs)
    if not adaptive or nthread == 0 or _upper_chunk(num_envs, nthread) <= 1:
        return None
    workload = PoolStepWorkload(
        pool=pool,
        state=state,
        model=model,
        n_variants=n_variants,
        num_envs=num_envs,
        nthread=nthread,
        dtype=dtype,
        post_step_forward_sensor=post_step_forward_sensor,
        bench_nsteps=bench_nsteps,
        backend_type=backend_type,
        model_file=model_file,
    )
    return _resolve_sync(workload).chunk_size
