"""A drop-in for the older tuner's ``resolve_chunk_size(...)``.

Same keywords, same answers for the cheap cases (manual override first,
``adaptive=False`` gives None, at most one work-chunk gives None without
measuring); otherwise chunktune measures ``pool.step`` through the active policy
and caches the result under a key that, unlike the older tuner's, also holds the
model's content, the MuJoCo version and the CPUs this process may use.

Like the older tuner it blocks its caller until it has an answer, on an event loop's
thread too (where ``await chunktune.resolve(...)`` would not block); there the wait is
bounded (:data:`LOOP_GRACE_S`), so a sweep of the same workload that a task of that
very loop owns cannot hang it.
"""

from __future__ import annotations

import functools
import logging
import numbers
import os
import sys
import time
from collections.abc import Callable, Mapping
from typing import Any, cast

import numpy as np

from ._backends import loop_running_here as _loop_running_here
from ._config import load_settings as _load_settings
from ._counts import MAX_COUNT as _MAX_COUNT
from ._counts import check_chunk_size as _check_chunk_size
from ._counts import upper_chunk as _upper_chunk
from ._crowding import warn_if_crowded as _warn_if_crowded
from ._discovered import remembered_settings as _remembered_settings
from ._errors import ChunktuneError as _ChunktuneError
from ._errors import InvalidArgumentError as _InvalidArgumentError
from ._failures import by_signal_handler as _by_signal_handler
from ._failures import log_bug as _log_bug
from ._failures import spent_cause as _spent_cause
from ._labels import MODEL_LABEL_NAMES as _MODEL_LABEL_NAMES
from ._labels import check_label as _check_label
from ._older_cache import warn_of_older_cache as _warn_of_older_cache
from ._paths import fspath_text as _fspath_text
from ._request import pick_policy as _pick_policy
from ._resolve import resolve as _resolve
from ._resolve import resolve_sync as _resolve_sync
from ._returned import SignatureValue
from ._settings import Settings as _Settings
from ._shown import shown_one as _shown
from ._shown import type_named as _type_named
from ._threads import run_beside as _run_beside

__all__ = ["LOOP_GRACE_S", "PoolStepWorkload", "resolve_chunk_size"]

_logger = logging.getLogger("chunktune")
_warned_on_loop = False

LOOP_GRACE_S = 30.0
"""On an event loop's thread, how long past twice the policy's ``time_budget_s`` the
call waits (unless the policy's ``hard_limit_s`` says otherwise) before it answers None."""


_SIZES = ("nq", "nv", "nu", "na", "nbody", "njnt", "ngeom", "nsensordata")


def _model_facts(
    model: Any, n_variants: int, label: str | None = None
) -> dict[str, SignatureValue]:
    """The model's sizes and content hash (or ``label`` in its place), for the key.

    Raises:
        InvalidArgumentError: ``model`` has none of an MjModel's sizes (a path, None, the
            pool's MjData): keyed by nothing of the model, every such call would share one
            entry, the older tuner's fault made worse.
    """
    facts: dict[str, SignatureValue] = {"n_variants": int(n_variants)}
    for name in _SIZES:
        value = getattr(model, name, None)
        if isinstance(value, int | np.integer):
            facts[name] = int(value)
    if len(facts) == 1:
        raise _InvalidArgumentError(
            f"model {_shown(model)} ({_type_named(model)}) is not a mujoco.MjModel: it has "
            f"none of its sizes ({', '.join(_SIZES)}); pass the MjModel the pool steps "
            "(a path goes in model_file=)"
        )
    if label is not None:
        # a domain-randomized family: each draw's content would be a new key and a new
        # sweep, and hashing it on every call would be paid for nothing
        from ._mujoco import labelled_options  # imports mujoco; the model came from it anyway

        facts["model_label"] = label
        facts.update(labelled_options(model))
        return facts
    try:
        from ._mujoco import remembered_digest  # imports mujoco; the model came from it anyway

        # model_digest([model]), its hash skipped when the model's bytes are as last hashed:
        # a trainer calling every step pays a serialization and a compare, not a sha256
        facts["model_sha"] = remembered_digest(model)
    except Exception:  # not a real MjModel (a stand-in in a test, say): sizes only
        facts["model_sha"] = "unknown"
    return facts


def _dtype_name(dtype: Any) -> str:
    try:
        return str(np.dtype(dtype).name)
    except (TypeError, ValueError):  # ValueError: a malformed one, (np.int32, -1) say
        raise _InvalidArgumentError(
            f"dtype {_shown(dtype)} is not a numpy data type (such as 'float64')"
        ) from None


def _control_width(model: Any) -> int:
    """``model.nu``, the controls per env (0 when the model has none)."""
    nu = getattr(model, "nu", 0)
    if isinstance(nu, bool) or not isinstance(nu, numbers.Integral) or nu < 0:
        raise _InvalidArgumentError(
            f"model.nu {_shown(nu)} is not a count of controls (an int >= 0)"
        )
    return int(nu)


def _threads(nthread: object) -> int:
    """``nthread`` as an int from 0 (the pool steps on the calling thread) to MAX_COUNT."""
    integral = isinstance(nthread, numbers.Integral) and not isinstance(nthread, bool)
    if not integral or not 0 <= cast(int, nthread) <= _MAX_COUNT:
        raise _InvalidArgumentError(
            f"nthread must be an integer from 0 (the calling thread steps the pool) to "
            f"{_MAX_COUNT}, got {_shown(nthread)} ({_type_named(nthread)})"
        )
    return int(cast(int, nthread))


def _switch(value: object, *, what: str = "adaptive") -> bool:
    """``value`` (the argument ``what``) as the bool it is: True or False (numpy's too),
    nothing else.

    The older tuner took its truth, so ``adaptive="no"`` (or ``"false"``, a config
    file's text) measured: the opposite of what the caller meant; and
    ``post_step_forward_sensor="no"`` stepped the pool with the sensors on.
    """
    if not isinstance(value, bool | np.bool_):
        raise _InvalidArgumentError(
            f"{what} must be True or False, got {_shown(value)} ({_type_named(value)})"
        )
    return bool(value)


def _backend(backend_type: object) -> str:
    """``backend_type`` as the text it is: a non-empty string (``"mujoco"``), which keys
    the cache; the older tuner keyed ``str()`` of anything, so ``3`` and ``"3"`` shared."""
    if not isinstance(backend_type, str) or not backend_type.strip():
        raise _InvalidArgumentError(
            f"backend_type must be a backend's name such as 'mujoco', got "
            f"{_shown(backend_type)} ({_type_named(backend_type)})"
        )
    return backend_type


def _model_file(model_file: object) -> str | None:
    """``model_file`` as the text of its path (None stays None)."""
    if model_file is None:
        return None
    text = _fspath_text(model_file)
    if text is None:
        raise _InvalidArgumentError(
            f"model_file {_shown(model_file)} is not a path (a str, bytes or os.PathLike)"
        )
    return text


class PoolStepWorkload:
    """The older tuner's probe as a Workload: ``pool.step`` on a copy of ``state``, zero controls.

    ``run`` times only the ``pool.step`` call (seconds). The zero controls are made on
    the first ``run``: a cache hit allocates nothing, and controls too large to allocate
    fail the measuring (native is kept), as the older tuner's did, not the call.

    The pool is the caller's: a resolve cancelled or ended by ``hard_limit_s`` returns
    only once the ``pool.step`` in flight has (``settle_on_cancel``). ``model_label``
    names the model's family in the key instead of its content, as
    ``RolloutWorkload(model_label=...)`` does.
    """

    settle_on_cancel = True

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
        model_file: str | os.PathLike[str] | None = None,
        model_label: str | None = None,
    ) -> None:
        self.pool = pool
        self.state = state
        self.model = model
        self.num_envs = num_envs
        self.nthread = nthread
        self.bench_nsteps = _check_chunk_size(bench_nsteps, what="bench_nsteps")
        self.post_step_forward_sensor = _switch(
            post_step_forward_sensor, what="post_step_forward_sensor"
        )
        self.model_file = _model_file(model_file)
        label = _check_label(model_label, what="model_label", names=_MODEL_LABEL_NAMES)
        self._signature: dict[str, SignatureValue] = {
            "kind": "compat.pool_step",
            "backend_type": _backend(backend_type),
            "dtype": _dtype_name(dtype),
            "post_step_forward_sensor": self.post_step_forward_sensor,
            "bench_nsteps": self.bench_nsteps,
            **_model_facts(model, _check_chunk_size(n_variants, what="n_variants"), label),
        }
        self._control_shape = (num_envs, self.bench_nsteps, _control_width(model))
        self._control: np.ndarray[Any, np.dtype[np.float64]] | None = None

    @property
    def control(self) -> np.ndarray[Any, np.dtype[np.float64]]:
        """Zero controls, ``(num_envs, bench_nsteps, model.nu)``, made on first use.

        Raises:
            MemoryError: they do not fit in memory.
        """
        if self._control is None:
            self._control = np.zeros(self._control_shape, dtype=np.float64)
        return self._control

    def signature(self) -> Mapping[str, SignatureValue]:
        """The older key's fields plus the model's content hash (or its ``model_label``)."""
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
    model_file: str | os.PathLike[str] | None = None,
    model_label: str | None = None,
) -> int | None:
    """The older tuner's entry point, answered by chunktune. Returns the chunk or None (native).

    A failing ``pool.step`` never raises out of here, nor does chunktune's own failure (its
    traceback logged) or a process out of threads: the answer is None. What the trainer's
    own signal handler raises meanwhile is raised. ``nthread=0``
    (the pool steps on the calling thread) answers None: chunks cannot matter; so does a
    call while Python shuts down (a ``__del__`` or weakref callback as modules are torn
    down), at once, stepping, importing and logging nothing. On an
    event loop's thread it blocks that loop, as the older tuner did, for up to twice
    ``time_budget_s`` plus :data:`LOOP_GRACE_S` (or ``hard_limit_s``), then answers None
    and drops its resolve (a sweep of its own stops at its next ``pool.step``, and the
    call returns once the ``pool.step`` in flight has: the pool is the caller's again);
    Ctrl-C there raises ``KeyboardInterrupt`` (under ``asyncio.run`` too, whose own
    handler is set aside for the wait) once that ``pool.step`` has returned, stops the
    sweep and caches nothing, as off a loop. A repeat with the same ``model`` object
    compares the model's serialized bytes with those it last hashed, rather than hashing
    them again: an edit in place still changes the key. A trainer that draws new variants
    (domain randomization) names their family with ``model_label``: the label stands in
    the key for the content, which is not hashed, so every draw shares one entry instead
    of each measuring anew (``RolloutWorkload``'s ``model_label``). The older tuner's cache
    variables (``$UNISIM_CHUNK_SIZE_CACHE``, ``$UNILAB_CHUNK_SIZE_CACHE``) and file are
    neither read nor written: where one is set and nothing chooses chunktune's file, a call
    that reaches the cache warns, once a process.

    Raises:
        InvalidArgumentError: ``num_envs`` is not an integer >= 1, ``nthread`` not an
            integer >= 0, ``adaptive`` not True or False (the older tuner took the truth
            of anything, so ``"no"`` measured), ``manual_chunk_size`` not an integer
            from 1 to ``num_envs``;
            when measuring, ``n_variants`` or ``bench_nsteps`` not an integer >= 1,
            ``dtype`` no numpy data type, ``model.nu`` no count of controls,
            ``post_step_forward_sensor`` not True or False, ``backend_type`` no
            non-empty string,
            ``model_file`` no path, ``model_label`` no name (a string of 1 to 256
            characters, not only whitespace, with no control character), or ``model``
            with none of an MjModel's sizes.
        ConfigError: the settings file is invalid, or names an unknown policy.
    """
    # first, before anything is sized by them
    num_envs = _check_chunk_size(num_envs, what="num_envs")
    nthread = _threads(nthread)
    adaptive = _switch(adaptive)  # wrong even where manual_chunk_size answers
    if manual_chunk_size is not None:
        return _check_chunk_size(manual_chunk_size, what="manual_chunk_size", num_envs=num_envs)
    if not adaptive or nthread == 0 or _upper_chunk(num_envs, nthread) <= 1:
        return None
    if sys.is_finalizing():
        # a __del__ or weakref callback as Python tears its modules down: as resolve's
        # at_shutdown, native at once; building the workload (numpy's dtype) would import
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
        model_label=model_label,
    )
    # the trainer's own pool, its threads real; once its arguments passed, as a workload's
    _warn_if_crowded(nthread)
    if _loop_running_here():
        return _decide_blocking_the_loop(workload)
    chunk = _resolve_sync(workload).chunk_size
    _tell_of_older_cache(_settings_seen)
    return chunk


def _settings_seen() -> _Settings | None:
    """The settings the resolve just discovered, where known without reading a file."""
    try:
        return _remembered_settings()
    except _ChunktuneError:  # $CHUNKTUNE_CONFIG names no home: the resolve raised it first
        return None


def _tell_of_older_cache(settings: Callable[[], _Settings | None]) -> None:
    """:func:`~chunktune._older_cache.warn_of_older_cache` of ``settings()``: a bug there
    is logged, since only a warning is at stake, never the answer."""
    try:
        _warn_of_older_cache(settings())
    except Exception as exc:
        if _by_signal_handler(exc):
            raise
        _log_bug(exc, "checking for the older tuner's cache variables")


def _decide_blocking_the_loop(workload: PoolStepWorkload) -> int | None:
    """Called on an event loop's thread: :func:`_decided_blocking_the_loop`, failing as
    ``resolve_sync`` does off a loop.

    Its steps outside the resolve (the settings' discovery, the policy's lookup, the thread
    it waits on) are chunktune's: a bug there, or a process out of threads or file
    descriptors, answers None (native), the bug's traceback logged; only chunktune's
    deliberate errors (invalid settings, an unknown policy) raise, and ``KeyboardInterrupt``.
    """
    try:
        return _decided_blocking_the_loop(workload)
    except Exception as exc:
        cause = _spent_cause(exc)
        if cause is None and (isinstance(exc, _ChunktuneError) or _by_signal_handler(exc)):
            raise
        if cause is None:
            _log_bug(exc, "deciding on a running event loop's thread")
        else:
            _logger.warning(
                "chunktune: resolve_chunk_size kept the native chunk: chunktune could not "
                "start a thread or open a file (%s: the process's threads or file "
                "descriptors are spent); nothing was cached",
                cause,
            )
        return None


def _decided_blocking_the_loop(workload: PoolStepWorkload) -> int | None:
    """Called on an event loop's thread: resolve on a loop of its own, the caller's blocked.

    The wait is bounded: a task of the blocked loop may own this workload's sweep, and it
    cannot land while its loop waits here. Past the bound the answer is None and this
    resolve is dropped, as on Ctrl-C: the caller has its pool back, which no resolve
    left behind may step later (were the loop's task to fail, it would take the key and
    sweep). The task's own sweep caches what it decides once the loop runs again.
    """
    settings = _load_settings()
    _, policy = _pick_policy(settings, None)
    _tell_of_older_cache(lambda: settings)
    limit = policy.hard_limit_s
    wait_s = 2 * policy.time_budget_s + LOOP_GRACE_S if limit is None else limit
    global _warned_on_loop
    if not _warned_on_loop:  # once a process: a trainer may call it on every reset
        _warned_on_loop = True
        _logger.warning(
            "chunktune: resolve_chunk_size was called on a running event loop's thread; "
            "like the older tuner it blocks the loop while it decides (up to %.3g s); "
            "`await chunktune.resolve(...)` would not",
            wait_s,
        )
    done, decision = _run_beside(
        functools.partial(_resolve, workload, settings=settings),
        timeout_s=wait_s,
        name="chunktune compat",
    )
    if not done or decision is None:
        _logger.warning(
            "chunktune: resolve_chunk_size kept the native chunk: no decision within %.3g s, "
            "so it dropped its resolve (a task of the blocked loop may be measuring the same "
            "workload: that sweep is cached once the loop runs again)",
            wait_s,
        )
        return None
    return decision.chunk_size
