"""Puts into a large cache: TOML against JSON, one writer and writers at once.

    python benchmarks/put_bench.py [--sizes 100,1000,10000] [--rounds 3] [--seconds 5]
        [--compare OLD_TREE]

Each size's cache (``scale_bench.fleet_entries``: a real sweep's entry varied as a fleet's
are) is written once in each format. A round copies it afresh for every setting and runs,
in a random order, each of: ``1 writer`` (one child process: read the cache, one put, then
puts of new keys for ``--seconds``) and ``4 writers`` (two child processes of two threads
each, one ``DecisionCache`` a process as ``resolve`` shares one, each thread putting new
keys for ``--seconds`` once both processes are past their first put). Figures, medians over
the rounds: puts a second (all writers together), CPU seconds a put (the writing processes'
user + system time over the puts), and the first put of the process that read the cache
(wall and CPU), then TOML's figure over JSON's of the same round (puts a second: JSON's
over TOML's, so that above 1 TOML is slower). Every entry written is counted back after
the 4 writers: none lost. ``--compare OLD_TREE`` (a checkout: ``git archive REV chunktune
policies | tar -x -C OLD_TREE``) runs every setting with OLD_TREE's chunktune too, in the
same rounds and random order, and prints TOML's figures new against old. Not a test: it
prints figures.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from cases import at_least_one, positive_seconds

HERE = Path(__file__).resolve().parent
_MODES = {"1 writer": (1, 1), "4 writers": (2, 2)}  # processes, threads each


def _key(tag: str, i: int) -> str:
    return hashlib.sha256(f"{tag}-{i}".encode()).hexdigest()[:32] + ".balanced"


def child(spec: dict[str, Any]) -> None:
    """One writing process: read the cache, put once, say ready, wait for go, then each of
    ``threads`` threads puts new keys for ``seconds``; write what it did to ``out``."""
    from chunktune._cache import DecisionCache

    cache = DecisionCache(spec["path"])
    entry = next(iter(cache.entries().values()))
    wall, cpu = time.perf_counter(), time.process_time()
    firsts = int(cache.put(_key(spec["tag"], -1), entry))
    first = (time.perf_counter() - wall, time.process_time() - cpu)
    Path(spec["ready"]).touch()
    while not Path(spec["go"]).exists():
        time.sleep(0.005)
    counts = [0] * spec["threads"]
    refused = [0] * spec["threads"]

    def puts(t: int) -> None:
        end = time.perf_counter() + spec["seconds"]
        while True:
            # False: the write lock's holder made no change within the stall limit (nor
            # kept working); the next put would try again, but this writer stops, so that
            # its refusal is counted once and its count of puts stays exact
            if not cache.put(_key(f"{spec['tag']}-{t}", counts[t]), entry):
                refused[t] += 1
                return
            counts[t] += 1
            if time.perf_counter() >= end:
                return

    cpu = time.process_time()
    threads = [threading.Thread(target=puts, args=(t,)) for t in range(spec["threads"])]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    said = {"first": first, "firsts": firsts, "puts": sum(counts), "refused": sum(refused)}
    said["cpu"] = time.process_time() - cpu
    Path(spec["out"]).write_text(json.dumps({**said, "done": time.time()}))


def run_mode(base: Path, folder: Path, tree: Path, mode: str, seconds: float) -> dict[str, float]:
    """One setting once: a copy of ``base``, ``mode``'s writers of ``tree``'s chunktune."""
    procs, threads = _MODES[mode]
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    path = folder / base.name
    shutil.copyfile(base, path)
    env = {**os.environ, "PYTHONPATH": str(tree), "CHUNKTUNE_CONFIG": ""}
    env["CHUNKTUNE_SWEEP_LOCK"] = str(folder / "sweep.lock")
    go = folder / "go"
    specs: list[dict[str, Any]] = [
        {"path": str(path), "tag": f"p{p}", "threads": threads, "seconds": seconds,
         "ready": str(folder / f"ready{p}"), "go": str(go), "out": str(folder / f"out{p}.json")}
        for p in range(procs)
    ]  # fmt: skip
    children = [
        subprocess.Popen([sys.executable, __file__, "--child", json.dumps(s)], env=env)
        for s in specs
    ]
    while not all(Path(s["ready"]).exists() for s in specs):
        if any(c.poll() not in (None, 0) for c in children):
            raise SystemExit("a writer failed before its first put")
        time.sleep(0.01)
    start = time.time()
    go.touch()
    for c in children:
        if c.wait() != 0:
            raise SystemExit(f"a writer failed with exit code {c.returncode}")
    outs = [json.loads(Path(s["out"]).read_text()) for s in specs]
    puts = sum(o["puts"] for o in outs)
    refused = sum(o["refused"] for o in outs)
    # every entry written is there: the first put of each process and each timed one
    from chunktune._cache import DecisionCache

    before = int(base.with_suffix(".count").read_text())
    kept = len(DecisionCache(path).entries())
    wanted = before + sum(o["firsts"] for o in outs) + puts
    if kept != wanted:
        raise SystemExit(f"{mode}: {kept} entries kept, expected {wanted}")
    return {
        "puts/s": puts / (max(o["done"] for o in outs) - start),  # all writers together
        "cpu/put": sum(o["cpu"] for o in outs) / max(puts, 1),
        "refused": refused,
        "first": statistics.median(o["first"][0] for o in outs),
        "first cpu": statistics.median(o["first"][1] for o in outs),
    }


_FIGURES = {"puts/s": "{:.2f}", "cpu/put": "{:.3f} s", "first": "{:.2f} s", "first cpu": "{:.2f} s"}


def _ratio(figure: str, slow: float, fast: float) -> float:
    """How many times slower ``slow`` is than ``fast`` (for puts/s: fast's over slow's)."""
    num, den = (fast, slow) if figure == "puts/s" else (slow, fast)
    return num / den if den else math.inf


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--sizes", default="100,1000,10000", type=_sizes)
    parser.add_argument("--rounds", type=at_least_one, default=3)
    # a NaN or an infinity never ends the writers' puts; 0 or less times one put
    parser.add_argument(
        "--seconds", type=positive_seconds, default=5.0, help="each writer's timed puts"
    )
    parser.add_argument("--compare", metavar="OLD_TREE", help="a source tree to race")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(json.loads(args.child))
        return 0
    trees = {"new": HERE.parent}
    if args.compare:
        old = Path(args.compare).resolve()
        if not (old / "chunktune" / "__init__.py").is_file():
            parser.error(f"--compare {args.compare}: expected a source tree holding chunktune/")
        trees["old"] = old
    import scale_bench

    from chunktune._cache import DecisionCache

    tmp = Path(tempfile.mkdtemp(prefix="put_bench-"))
    try:
        os.environ["CHUNKTUNE_CONFIG"] = ""
        os.environ["CHUNKTUNE_SWEEP_LOCK"] = str(tmp / "sweep.lock")
        key, entry = scale_bench.real_entry(tmp)
        bases = {}
        for n in args.sizes:
            ents = scale_bench.fleet_entries(key, entry, n)
            for fmt in ("json", "toml"):
                bases[fmt, n] = tmp / f"base-{n}" / f"cache.{fmt}"
                bases[fmt, n].parent.mkdir(exist_ok=True)
                DecisionCache(bases[fmt, n]).update(ents)
                bases[fmt, n].with_suffix(".count").write_text(str(len(ents)))
        settings = [(t, f, n, m) for t in trees for f in ("json", "toml") for n in args.sizes
                    for m in _MODES]  # fmt: skip
        got: dict[tuple[str, str, int, str], list[dict[str, float]]] = {s: [] for s in settings}
        rng = random.Random(0)
        for r in range(args.rounds):
            for s in rng.sample(settings, len(settings)):
                tree, fmt, n, mode = s
                got[s].append(run_mode(bases[fmt, n], tmp / "run", trees[tree], mode, args.seconds))
            # the figures so far: a long run cut short still says what it found
            _print({s: v[: r + 1] for s, v in got.items()}, args, trees, r + 1)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


def _print(got: dict[tuple[str, str, int, str], list[dict[str, float]]], args: Any,
           trees: dict[str, Path], rounds: int) -> None:  # fmt: skip
    print(f"\nmedians of {rounds} rounds, {args.seconds:g} s of puts a writer", flush=True)
    for tree in trees:
        print(f"\n{tree} tree: JSON / TOML / TOML:JSON (times slower)")
        for n in args.sizes:
            for mode in _MODES:
                cells = []
                for fig, form in _FIGURES.items():
                    j, t = (got[tree, f, n, mode] for f in ("json", "toml"))
                    ratios = [_ratio(fig, b[fig], a[fig]) for a, b in zip(j, t, strict=True)]
                    jm, tm = (statistics.median(x[fig] for x in v) for v in (j, t))
                    cells.append(
                        f"{fig} {form.format(jm)} / {form.format(tm)} / "
                        f"{statistics.median(ratios):.1f}x"
                    )
                refused = sum(x["refused"] for f in ("json", "toml") for x in got[tree, f, n, mode])
                if refused:
                    cells.append(f"{refused:g} puts refused (the write lock's stall limit)")
                print(f"  {n:>6} entries, {mode}: " + "; ".join(cells))
    if "old" not in trees:
        return
    for fmt in ("toml", "json"):
        print(f"\n{fmt.upper()}, old / new / old:new (times faster, median of the rounds' ratios)")
        for n in args.sizes:
            for mode in _MODES:
                cells = []
                for fig, form in _FIGURES.items():
                    o, w = (got[tree, fmt, n, mode] for tree in ("old", "new"))
                    ratios = [_ratio(fig, a[fig], b[fig]) for a, b in zip(o, w, strict=True)]
                    om, wm = (statistics.median(x[fig] for x in v) for v in (o, w))
                    cells.append(
                        f"{fig} {form.format(om)} / {form.format(wm)} / "
                        f"{statistics.median(ratios):.2f}x"
                    )
                lost = [sum(x["refused"] for x in got[t, fmt, n, mode]) for t in ("old", "new")]
                if any(lost):
                    cells.append(f"puts refused {lost[0]:g} / {lost[1]:g}")
                print(f"  {n:>6} entries, {mode}: " + "; ".join(cells))


def _sizes(text: str) -> list[int]:
    try:
        sizes = [int(x) for x in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a comma-separated list") from None
    if not sizes or min(sizes) < 2:
        raise argparse.ArgumentTypeError(f"{text!r}: expected entry counts >= 2")
    return sizes


if __name__ == "__main__":
    sys.path.insert(0, str(HERE))
    raise SystemExit(main())
