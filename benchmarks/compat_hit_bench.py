"""What ``chunktune.compat.resolve_chunk_size`` costs a trainer on a cache hit, with the
model's hash remembered per model object (now) and taken on every call (before).

    python benchmarks/compat_hit_bench.py [--calls 400] [--rounds 8]
                                          [--models demo,cheetah,humanoid,quadruped]

Each model (the bundled demo scene; dm_control's humanoid, cheetah and quadruped from
``models/``) is tuned once through ``resolve_chunk_size`` on a pool whose ``step`` is a
real ``mujoco.rollout`` call, then hit ``--calls`` times per round in each way, the two
ways alternating in rounds (their order flipped each round), so that the machine's drift
falls on both alike. "before" is today's hit path with the model's digest taken as it
was before (serialized into a zeroed array, copied out and hashed, on every call); "now"
serializes it and compares the bytes with those last hashed for the object. Each call
is timed whole, as a trainer sees it. Not a test: it prints a table and each model's
ratio of medians, both ways measured in this one run. The cache, settings and sweep lock
are files of the script's own, in a temporary folder.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Protocol

import mujoco
import numpy as np
from mujoco import rollout

import chunktune
from chunktune import _settled, compat
from chunktune._mujoco import model_digest, remembered_digest

HERE = Path(__file__).resolve().parent
MODELS = {
    "demo": chunktune.demo_model_path(),
    "cheetah": HERE / "models" / "dm_control" / "cheetah.xml",
    "humanoid": HERE / "models" / "dm_control" / "humanoid.xml",
    "quadruped": HERE / "models" / "dm_control" / "quadruped.xml",
}
NUM_ENVS, NTHREAD = 64, 2


class _Digest(Protocol):
    """What stands in for ``remembered_digest``: called as it is, by keyword too."""

    def __call__(self, model: Any) -> str: ...


class _Pool:
    """The older tuner's pool: ``step`` is one ``mujoco.rollout`` call."""

    def __init__(self, model: Any) -> None:
        self.model = model
        self.data = [mujoco.MjData(model) for _ in range(NTHREAD)]
        self.rollout = rollout.Rollout(nthread=NTHREAD)

    def step(
        self,
        state: Any,
        *,
        nstep: int,
        control: Any,
        chunk_size: int | None,
        return_sensor: bool,
        post_step_forward_sensor: bool,
    ) -> None:
        self.rollout.rollout(
            self.model, self.data, state, control, nstep=nstep, chunk_size=chunk_size
        )

    def close(self) -> None:
        self.rollout.close()


def _states(model: Any) -> Any:
    spec = mujoco.mjtState.mjSTATE_FULLPHYSICS
    state = np.empty(mujoco.mj_stateSize(model, spec))
    mujoco.mj_getState(model, mujoco.MjData(model), state, spec)
    return np.tile(state, (NUM_ENVS, 1))


def _call(pool: _Pool, state: Any) -> int | None:
    return compat.resolve_chunk_size(
        pool=pool,
        state=state,
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


def _hashed_every_call(model: Any) -> str:
    """The digest as compat took it before: serialized (into zeros, then copied) and hashed."""
    buf = np.zeros(int(mujoco.mj_sizeModel(model)), np.uint8)
    mujoco.mj_saveModel(model, None, buf)
    digest = hashlib.sha256(hashlib.sha256(buf.tobytes()).digest()).hexdigest()[:16]
    assert digest == model_digest([model])  # the same key, however taken
    return digest


def _timed(pool: _Pool, state: Any, calls: int, digest: _Digest) -> list[float]:
    """Seconds per hit, with ``digest`` standing in for the remembered one."""
    import chunktune._mujoco as adapter

    adapter.remembered_digest = digest  # what compat imports at each call
    try:
        out = []
        for _ in range(calls):
            start = time.perf_counter()
            _call(pool, state)
            out.append(time.perf_counter() - start)
        return out
    finally:
        adapter.remembered_digest = remembered_digest


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="compat_hit_bench.py", description=__doc__)
    parser.add_argument("--calls", type=int, default=400, help="hits per way per round")
    parser.add_argument("--rounds", type=int, default=8, help="rounds, each way once per round")
    parser.add_argument("--models", default=",".join(MODELS), help="of: " + ", ".join(MODELS))
    args = parser.parse_args(argv)
    names = [n for n in args.models.split(",") if n]
    unknown = sorted(set(names) - set(MODELS))
    if unknown or args.calls < 1 or args.rounds < 1:
        parser.error(f"unknown models {unknown}" if unknown else "--calls, --rounds: >= 1")
    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / "chunktune.toml"
        config.write_text(
            'policy = "fast"\n[policies.fast]\nextends = "quick"\nmax_rounds = 3\n'
            "min_rounds = 2\ntime_budget_s = 0.5\n"
        )
        os.environ["CHUNKTUNE_CONFIG"] = str(config)
        os.environ["CHUNKTUNE_CACHE"] = str(Path(tmp) / "cache.json")
        os.environ["CHUNKTUNE_SWEEP_LOCK"] = str(Path(tmp) / "sweep.lock")
        _settled.SETTLED_S = 0.0  # a trainer's files were written long before its hits
        print(f"compat.resolve_chunk_size cache hits, {args.calls} calls x {args.rounds} rounds")
        print(f"{'model':<10} {'MJB KB':>7} {'before ms':>10} {'now ms':>8} {'now/before':>11}")
        for name in names:
            pool = _Pool(mujoco.MjModel.from_xml_path(str(MODELS[name])))
            try:
                state = _states(pool.model)
                _call(pool, state)  # the sweep, then hits
                ways: dict[str, list[float]] = {"before": [], "now": []}
                digests = {"before": _hashed_every_call, "now": remembered_digest}
                for r in range(args.rounds):
                    order = ["before", "now"] if r % 2 == 0 else ["now", "before"]
                    for way in order:
                        ways[way] += _timed(pool, state, args.calls, digests[way])
            finally:
                pool.close()
            before, now = (statistics.median(ways[w]) for w in ("before", "now"))
            kb = mujoco.mj_sizeModel(pool.model) / 1024
            ratio = now / before
            print(f"{name:<10} {kb:>7.0f} {before * 1e3:>10.3f} {now * 1e3:>8.3f} {ratio:>11.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
