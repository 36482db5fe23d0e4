"""The benchmark's cases: simulated landscapes, recorded traces, and live MuJoCo batches."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import attrs
import numpy as np

from chunktune import ChunktuneError
from chunktune._shown import shown_file
from chunktune._trace import load_trace
from chunktune.sim import Noise, SimulatedWorkload, env_costs

__all__ = [
    "REAL_CASES",
    "SIM_CASES",
    "TRACE_DIR",
    "RealCase",
    "SimCase",
    "at_least_one",
    "live_cases",
    "positive_seconds",
    "robot",
    "trace_file",
    "trace_files",
    "trace_name",
    "traces_folder",
]

TRACE_DIR = Path(__file__).resolve().parent / "traces"
MODELS = Path(__file__).resolve().parent / "models" / "dm_control"

Shape = tuple[tuple[str, float | int | str], ...]


# ------------------------------------------------------------------------ simulated


@attrs.frozen(kw_only=True)
class SimCase:
    """One simulated landscape: a fixed cost vector, a pool size and a noise model."""

    layout: str
    num_envs: int
    nthread: int
    sigma: float
    spike_prob: float = 0.02
    drift: float = 0.02
    mean_s: float = 1e-3
    dispatch_s: float = 5e-7
    queue_s: float = 0.0
    shape: Shape = ()
    tag: str = ""
    quick: bool = False

    @property
    def name(self) -> str:
        suffix = f"-{self.tag}" if self.tag else ""
        return f"{self.layout}{suffix}-{self.num_envs}x{self.nthread}"

    def noise(self) -> Noise:
        """Log-normal jitter ``sigma``, spikes up to +50%, a slow drift of ``drift``."""
        return Noise(
            sigma=self.sigma,
            spike_prob=self.spike_prob,
            spike_scale=0.5,
            drift=self.drift,
            drift_period=97.0,
        )

    def costs(self, index: int) -> np.ndarray[Any, np.dtype[np.float64]]:
        """The case's per-env costs in seconds; fixed per case, not per noise seed."""
        return env_costs(
            self.layout, self.num_envs, mean_s=self.mean_s, seed=1000 + index, **dict(self.shape)
        )

    def workload(self, index: int, *, seed: int | None = None) -> SimulatedWorkload:
        """The case's pool: noiseless (the truth) when ``seed`` is None, else with noise."""
        return SimulatedWorkload(
            self.costs(index),
            nthread=self.nthread,
            dispatch_s=self.dispatch_s,
            queue_s=self.queue_s,
            noise=Noise() if seed is None else self.noise(),
            seed=0 if seed is None else seed,
            name=self.layout,
        )


_CASE_KEYS = frozenset({"spike_prob", "drift", "mean_s", "dispatch_s", "queue_s", "tag"})


def _sim(layout: str, n: int, t: int, noise: float, *, quick: bool = False, **kw: Any) -> SimCase:
    shape = tuple(sorted((k, v) for k, v in kw.items() if k not in _CASE_KEYS))
    rest = {k: v for k, v in kw.items() if k in _CASE_KEYS}
    return SimCase(
        layout=layout, num_envs=n, nthread=t, sigma=noise, shape=shape, quick=quick, **rest
    )


# Every layout at several N and T, 1-8% noise. The second half adds what the first
# lacks: narrow optima (a contended queue makes small chunks expensive, so the best
# size sits on one tooth of the sawtooth), clustered heavy blocks, tiny batches.
SIM_CASES: tuple[SimCase, ...] = (
    _sim("uniform", 256, 8, 0.01, quick=True, spike_prob=0.01, drift=0.01),
    _sim("uniform", 1000, 24, 0.05, tag="odd"),
    _sim("uniform", 4096, 64, 0.03, quick=True),
    _sim("uniform", 16384, 128, 0.03, tag="cheap", mean_s=2e-5, dispatch_s=5e-6),
    _sim("uniform", 32768, 128, 0.02, quick=True, mean_s=5e-5),
    _sim("lognormal", 768, 12, 0.08, quick=True, spike_prob=0.03),
    _sim("lognormal", 1024, 16, 0.03),
    _sim("lognormal", 2048, 128, 0.04, quick=True),
    _sim("lognormal", 8192, 32, 0.05, sigma=1.0),
    _sim("lognormal", 32768, 128, 0.02, quick=True),
    _sim("blocked", 256, 8, 0.02, quick=True, heavy_factor=4.5),
    _sim("blocked", 1024, 8, 0.08, tag="start", position="start"),
    _sim("blocked", 2048, 16, 0.04),
    _sim("blocked", 4096, 32, 0.02, tag="middle", position="middle"),
    _sim("blocked", 6000, 48, 0.02, heavy_fraction=0.3, heavy_factor=3.0),
    _sim("blocked", 8192, 64, 0.03, quick=True, heavy_fraction=0.1, heavy_factor=8.0),
    _sim("blocked", 32768, 128, 0.05, quick=True, spike_prob=0.01),
    _sim("variants", 512, 8, 0.03, quick=True),
    _sim("variants", 4096, 32, 0.02, n_variants=8),
    _sim("variants", 16384, 128, 0.06, quick=True, drift=0.03),
    _sim("variants", 20000, 96, 0.04),
    _sim("interleaved", 256, 16, 0.01, quick=True),
    _sim("interleaved", 4096, 64, 0.03, period=7),
    _sim("interleaved", 32768, 32, 0.08, quick=True, period=3, spike_prob=0.03),
    # narrow optima: a contended queue (20 us a take) and cheap envs
    _sim("blocked", 32768, 96, 0.03, quick=True, tag="narrow", mean_s=5e-5, queue_s=2e-5,
         heavy_fraction=0.4),
    _sim("variants", 32768, 96, 0.03, tag="narrow", mean_s=5e-5, queue_s=2e-5, n_variants=10),
    _sim("variants", 32768, 96, 0.02, tag="tooth", mean_s=1e-4, queue_s=2e-5, n_variants=6),
    _sim("blocked", 16384, 64, 0.04, tag="queue", mean_s=1e-4, queue_s=1e-5,
         heavy_fraction=0.1),
    _sim("blocks", 4096, 16, 0.03, quick=True, mean_s=2e-4),
    _sim("blocks", 96, 8, 0.02, n_blocks=2),
    _sim("blocks", 2048, 64, 0.05, mean_s=1e-4, queue_s=2e-6, n_blocks=5),
    _sim("lognormal", 8192, 128, 0.03, tag="queue", mean_s=1e-4, queue_s=1e-6),
)  # fmt: skip


# ------------------------------------------------------------------------ options


def at_least_one(text: str) -> int:
    """A count option's argparse type: an integer >= 1, else argparse's one-line error
    (exit 2). A count of 0 or less would print empty tables, divide by zero, or, where
    0 reads as unset, quietly run the default count."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer >= 1")
    return value


def positive_seconds(text: str) -> float:
    """A span option's argparse type: finite seconds > 0, else argparse's one-line error
    (a NaN span would run no round and crash; a NaN width would cut garbage stretches)."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0 < value < math.inf:
        raise argparse.ArgumentTypeError(f"{text!r} is not a finite number of seconds > 0")
    return value


# ------------------------------------------------------------------------ traces


def trace_file(value: str) -> Path:
    """A trace argument's argparse type: a file that loads as a trace, else argparse's
    one-line error naming it (a missing or damaged file was a traceback)."""
    try:
        load_trace(Path(value))
    except ChunktuneError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return Path(value)


def traces_folder(value: str) -> Path:
    """``--traces``'s argparse type: a folder holding a trace (``*.json``) in it or below.

    A folder that is not there, or holds none, would replay nothing and print empty tables.
    """
    folder = Path(value)
    shown = shown_file(value)  # a newline in the name would split argparse's one-line error
    if not folder.is_dir():
        raise argparse.ArgumentTypeError(f"{shown}: expected a folder of traces, found none")
    if not trace_files(folder):
        raise argparse.ArgumentTypeError(f"{shown}: expected traces (*.json) in it, found none")
    return folder


def trace_files(directory: Path = TRACE_DIR) -> list[Path]:
    """The recorded traces to replay, by name, in ``directory`` and its subdirectories."""
    return sorted(directory.glob("**/*.json"))


def trace_name(path: Path, directory: Path = TRACE_DIR) -> str:
    """A trace's name: its path under ``directory`` without the suffix (``busy/demo-tail-256``).

    A trace found elsewhere is named by its path under ``benchmarks/``
    (``traces-later/2026-12-01/demo-tail-256``), or under the working directory, or in
    full: never by its file name alone, which two recordings of one batch share.
    """
    path = path.resolve()
    for root in (directory.resolve(), TRACE_DIR.parent, Path.cwd()):
        if path.is_relative_to(root):
            return str(path.relative_to(root).with_suffix(""))
    return str(path.with_suffix(""))


# ------------------------------------------------------------------------ live


@attrs.frozen(kw_only=True)
class RealCase:
    """A real rollout batch of the demo scene; ``build(nthread)`` makes its workload.

    ``known_good`` are sizes re-measured beside the choices: the best of them is
    what a choice is held against.
    """

    name: str
    description: str
    build: Callable[[int], Any]
    uneven: bool
    known_good: tuple[int, ...] = (2, 4, 8, 16)
    quick: bool = False
    named_only: bool = False  # run only when --cases names it: minutes more per live run


def _demo_states(num_envs: int, nthread: int, *, heavy: bool) -> Any:
    """Initial states of one kind from the demo batch: all in the pile, or all flying."""
    from chunktune._mujoco import demo_workload

    with demo_workload(num_envs=max(4 * num_envs, 8), nthread=nthread) as demo:
        states = np.asarray(demo.initial_state)
        n_heavy = states.shape[0] // 4
        pool = states[-n_heavy:] if heavy else states[:-n_heavy]
        return np.ascontiguousarray(pool[:num_envs]), demo.models[0]


def _uniform(num_envs: int, *, heavy: bool, nstep: int = 20) -> Callable[[int], Any]:
    def build(nthread: int) -> Any:
        from chunktune._mujoco import RolloutWorkload, demo_model_path

        states, model = _demo_states(num_envs, nthread, heavy=heavy)
        return RolloutWorkload(
            model,
            num_envs=num_envs,
            nthread=nthread,
            nstep=nstep,
            initial_state=states,
            model_file=demo_model_path(),
        )

    return build


def _uneven(num_envs: int, *, nstep: int = 20) -> Callable[[int], Any]:
    def build(nthread: int) -> Any:
        from chunktune._mujoco import demo_workload

        return demo_workload(num_envs=num_envs, nthread=nthread, nstep=nstep)

    return build


def robot(name: str, num_envs: int, nstep: int) -> Callable[[int], Any]:
    """A dm_control robot (shipped with the dm_control package, copied under ``models/``),
    its envs started from the model's state perturbed by 0.05."""

    def build(nthread: int) -> Any:
        from chunktune._mujoco import RolloutWorkload

        return RolloutWorkload.from_xml(
            MODELS / f"{name}.xml", num_envs=num_envs, nthread=nthread, nstep=nstep,
            perturbation=0.05,
        )  # fmt: skip

    return build


REAL_CASES: tuple[RealCase, ...] = (
    RealCase(
        name="tail-heavy-256",
        description="demo_workload(256): the last quarter of the envs in a contact pile",
        build=_uneven(256),
        uneven=True,
        quick=True,
    ),
    RealCase(
        name="uniform-air-256",
        description="256 envs, every body flying (no contact)",
        build=_uniform(256, heavy=False),
        uneven=False,
        quick=True,
    ),
    # the robots of traces/, live: each held to "none slower than native" only, the
    # within-the-best target being the uneven batch's
    *(
        RealCase(
            name=f"{name}-{n}",
            description=f"dm_control {name}, {n} envs, {nstep} steps",
            build=robot(name, n, nstep),
            uneven=False,
            named_only=True,
        )
        for name, n, nstep in (("humanoid", 128, 10), ("cheetah", 384, 20), ("quadruped", 128, 10))
    ),
)


def live_cases(names: Sequence[str] | None) -> list[RealCase]:
    """The live cases to run: without ``names`` all but the robots (``named_only``), with
    them each whose name holds one of them."""
    if not names:
        return [c for c in REAL_CASES if not c.named_only]
    return [c for c in REAL_CASES if any(n in c.name for n in names)]
