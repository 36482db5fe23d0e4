"""Large outside files loaded: a long trace replayed, a damaged TOML cache salvaged.

    python benchmarks/load_bench.py [--trace-mib 1,13,100] [--cache-mib 8] [--repeats 3]
        [--compare OLD_TREE]

Each figure is one child process's own timing (its start and imports left out), the
median of ``--repeats``:

- ``trace``: ``ReplayWorkload.from_file`` of a trace of about that many MiB, two chunk
  sizes of recorded-looking seconds (17 significant digits each) over as many rounds as
  that takes (13 MiB: about 700,000 rounds), as the fuzz77 audit built them;
- ``signature``: three ``signature()`` calls of that trace's replay (a resolve asks once),
  its load left out;
- ``cache``: ``DecisionCache(path).entries()`` of a TOML cache of about ``--cache-mib``
  MiB of a fleet's entries (``scale_bench.fleet_entries``), damaged two ways: cut
  mid-line near its end (a copy cut short: it decodes to the cut, then is refused) and
  one entry altered (it decodes whole; the checksum fails). The file is moved aside and
  its whole entries written to a fresh one: read, salvage and write.

``--compare OLD_TREE`` races OLD_TREE's chunktune (a checkout: ``git archive REV
chunktune policies | tar -x -C OLD_TREE``) against this one's, the two trees' children
alternating (old first in even repeats, new first in odd ones), and prints each
median and old:new. Not a test: it prints figures. Runs in a fresh temporary directory.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
from cases import at_least_one
from scale_bench import fleet_entries, real_entry

from chunktune._cache_format import encode
from chunktune._trace import Trace, dump_trace

_WRAP = """
import sys, time
from chunktune import _settled
_settled.SETTLED_S = 0.0  # files as a trainer finds them: settled
what, path = sys.argv[1:3]
t = time.perf_counter()
if what == "trace":
    from chunktune.sim import ReplayWorkload
    ReplayWorkload.from_file(path)
elif what == "signature":
    from chunktune.sim import ReplayWorkload
    replay = ReplayWorkload.from_file(path)
    t = time.perf_counter()
    for _ in range(3):
        replay.signature()
else:
    from chunktune import DecisionCache
    assert DecisionCache(path).entries()
print(time.perf_counter() - t)
"""

_BYTES_A_ROUND = 2 * 21  # two sizes' seconds, "0.0812345678901234, " each


def write_trace(path: Path, mib: float, seed: int = 0) -> int:
    """A trace of about ``mib`` MiB at ``path`` (16 envs on 2 threads, sizes 1 and 2);
    returns its size in bytes."""
    rounds = max(1, int(mib * 2**20 / _BYTES_A_ROUND))
    rng = np.random.default_rng(seed)
    samples = {c: tuple((0.08 * c * rng.lognormal(0.0, 0.1, rounds)).tolist()) for c in (1, 2)}
    path.write_text(dump_trace(Trace(num_envs=16, nthread=2, rounds=rounds, samples=samples)))
    return path.stat().st_size


def write_caches(folder: Path, mib: float) -> dict[str, bytes]:
    """TOML caches of about ``mib`` MiB, damaged each way, by name."""
    key, entry = real_entry(folder)
    one = len(encode({key: entry}, "toml"))
    raw = encode(fleet_entries(key, entry, max(2, int(mib * 2**20 / one))), "toml")
    cut = raw[: raw.index(b"policy_hash", len(raw) * 9 // 10) + 5]  # mid-line, near the end
    reason = raw.index(b"reason = ", len(raw) // 2)
    altered = raw[:reason] + b"reason = 'altered'" + raw[raw.index(b"\n", reason) :]
    return {"cut mid-line": cut, "one entry altered": altered}


def _child(tree: Path, what: str, path: Path) -> float:
    """One child's own seconds for ``what`` (``trace``, ``signature`` or ``cache``) of
    ``path``, run on ``tree``'s chunktune; it must exit 0."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    done = subprocess.run(
        [sys.executable, "-c", _WRAP, what, str(path)],
        env=env,
        capture_output=True,
        check=False,
        cwd=path.parent,
    )
    if done.returncode != 0:
        raise SystemExit(f"{what} {path} exited {done.returncode}: {done.stderr[-500:]!r}")
    return float(done.stdout.decode().split()[-1])


def race(
    trees: dict[str, Path], what: str, path: Path, repeats: int, source: bytes | None = None
) -> dict[str, float]:
    """Each tree's median seconds, children alternating; ``source``: the bytes written to
    ``path`` before each child (a damaged cache goes aside at its first read)."""
    times: dict[str, list[float]] = {name: [] for name in trees}
    names = list(trees)
    for r in range(repeats):
        for name in names if r % 2 == 0 else names[::-1]:
            if source is not None:
                for old in path.parent.iterdir():
                    old.unlink()
                path.write_bytes(source)
            times[name].append(_child(trees[name], what, path))
    return {name: statistics.median(t) for name, t in times.items()}


def _line(label: str, medians: dict[str, float]) -> str:
    if len(medians) == 1:
        return f"{label}: {medians['new']:.3f} s"
    old, new = medians["old"], medians["new"]
    return f"{label}: {old:.3f} s / {new:.3f} s / {old / new:.2f}x"


def _mibs(text: str) -> list[float]:
    try:
        mibs = [float(x) for x in text.split(",")]
    except ValueError:
        mibs = []
    if not mibs or not all(0 < m <= 250 for m in mibs):
        raise argparse.ArgumentTypeError(f"{text!r}: expected MiB above 0 up to 250, as 1,13,100")
    return mibs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--trace-mib", type=_mibs, default=[1.0, 13.0, 100.0])
    parser.add_argument("--cache-mib", type=_mibs, default=[8.0])
    parser.add_argument("--repeats", type=at_least_one, default=3)
    parser.add_argument("--compare", metavar="OLD_TREE", help="a source tree to race")
    args = parser.parse_args(argv)
    here = Path(__file__).resolve().parent.parent
    trees = {"new": here}
    if args.compare:
        old = Path(args.compare).resolve()
        if not (old / "chunktune" / "__init__.py").is_file():
            parser.error(f"--compare {args.compare}: expected a source tree holding chunktune/")
        trees = {"old": old, "new": here}
    how = "old / new / old:new" if args.compare else "this tree"
    print(f"median of {args.repeats}, each a child's own seconds; {how}")
    environ = dict(os.environ)
    try:
        with tempfile.TemporaryDirectory() as d:
            tmp = Path(d)
            os.environ["CHUNKTUNE_SWEEP_LOCK"] = str(tmp / "sweep.lock")
            os.environ["CHUNKTUNE_CONFIG"] = ""
            os.environ["CHUNKTUNE_CACHE"] = str(tmp / "seed.json")
            for mib in args.trace_mib:
                path = tmp / "trace.json"
                size = write_trace(path, mib)
                label = f"trace of {size / 2**20:.2f} MiB, ReplayWorkload.from_file"
                print(_line(label, race(trees, "trace", path, args.repeats)), flush=True)
                label = f"trace of {size / 2**20:.2f} MiB, signature() 3 times"
                print(_line(label, race(trees, "signature", path, args.repeats)), flush=True)
                path.unlink()
            for mib in args.cache_mib:
                for damage, raw in write_caches(tmp, mib).items():
                    folder = tmp / "cache"
                    folder.mkdir(exist_ok=True)
                    label = f"TOML cache of {len(raw) / 2**20:.2f} MiB, {damage}, entries()"
                    medians = race(trees, "cache", folder / "c.toml", args.repeats, raw)
                    print(_line(label, medians), flush=True)
                    shutil.rmtree(folder)
    finally:  # an importer (the smoke test) gets its own back
        os.environ.clear()
        os.environ.update(environ)
    return 0


if __name__ == "__main__":
    sys.exit(main())
