"""chunktune.ray on a local Ray cluster: one sweep per node type, shared with every worker.

    python benchmarks/ray_bench.py [--hosts-per-type 2] [--workers-per-host 2]
                                   [--sleep-ms 40] [--policy quick] [--json OUT]

Builds a cluster of simulated hosts with ``ray.cluster_utils.Cluster`` on this
machine: a CPU-less head and, for each of three node types (labels ``a``, ``b``,
``c``), ``--hosts-per-type`` raylets with one CPU each and their own cache file and
sweep lock, as separate machines would have. ``--workers-per-host`` zero-CPU worker
actors are pinned to each host. The workload is the simulated pool
(``chunktune.sim.SimulatedWorkload``), plus a real ``--sleep-ms`` sleep per call so a
sweep takes real time. Every probe is logged with its host and process, so each
sweep's interval is known.

Scenarios, each on a job of its own:

- ``registry-cold``, ``registry``: every worker calls ``chunktune.ray.resolve_sync``
  at once on a job no cache holds (the first run also starts the registry actor).
  Target: one sweep per node type, every worker gets its type's answer, no two sweeps
  overlap on one host.
- ``tune_cluster``: ``chunktune.ray.tune_cluster`` from the driver, then every worker
  resolves (all hits).
- ``per-host``: every worker calls plain ``chunktune.resolve_sync``: one sweep per
  host (its cache and locks are the host's), nothing shared between hosts.
- ``alone``: every worker resolves with a cache file of its own (no shared disk),
  under its host's sweep lock: one sweep per worker.
- ``takeover``: the workers of type ``a`` resolve at once with a short lease; the
  sweeping one is killed mid-sweep. Target: another takes over and all finish.

Prints a table and the checks; it is a benchmark, not a test: it never fails on a figure.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import shutil
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs

import chunktune
import chunktune.ray
from chunktune._keys import cache_key
from chunktune.sim import SimulatedWorkload, env_costs

TYPES = ("a", "b", "c")
WAIT_S = 600.0


class Sleepy:
    """The simulated pool's modeled seconds plus a real sleep; logs every probe to a file."""

    def __init__(self, job: str, sleep_s: float, log: str) -> None:
        self.inner = SimulatedWorkload(env_costs("blocked", 64), nthread=2, name=job)
        self.num_envs = self.inner.num_envs
        self.nthread = self.inner.nthread
        self.job = job
        self.sleep_s = sleep_s
        self.log = log

    def signature(self) -> dict[str, Any]:
        return dict(self.inner.signature())

    def run(self, chunk_size: int | None) -> float:
        import ray

        start = time.time()
        time.sleep(self.sleep_s)
        line = {
            "job": self.job,
            "host": ray.get_runtime_context().get_node_id(),
            "pid": os.getpid(),
            "t0": start,
            "t1": time.time(),
        }
        with open(self.log, "a") as f:  # one short append per probe: whole lines
            f.write(json.dumps(line) + "\n")
        return self.inner.run(chunk_size)


class Worker:
    """An env worker: a zero-CPU actor pinned to one simulated host."""

    def pid(self) -> int:
        return os.getpid()

    def resolve(
        self, job: str, sleep_s: float, log: str, policy: str, mode: str, **ray_options: Any
    ) -> dict[str, Any]:
        settings = chunktune.load_settings()
        settings = attrs.evolve(
            settings,
            ray=attrs.evolve(settings.ray, **ray_options),
            log=chunktune.LogSettings(stderr="never"),
        )
        if mode == "alone":  # a cache file of this worker's own: nothing shared
            own = Path(os.environ["CHUNKTUNE_CACHE"]).with_name(f"worker-{os.getpid()}.json")
            settings = attrs.evolve(settings, cache=attrs.evolve(settings.cache, path=str(own)))
        workload = Sleepy(job, sleep_s, log)
        started = time.time()
        if mode in ("per-host", "alone"):
            decision = chunktune.resolve_sync(workload, settings=settings, policy=policy)
        else:
            decision = chunktune.ray.resolve_sync(workload, settings=settings, policy=policy)
        return {
            "source": decision.source,
            "chunk": decision.chunk_size,
            "key": decision.key,
            "started": started,
            "done": time.time(),
            "pid": os.getpid(),
            "cache": str(settings.cache.path),
        }


@attrs.define
class Bench:
    ray: Any
    root: Path
    log: Path
    policy: str
    sleep_s: float
    hosts: dict[str, tuple[str, str]]  # node id -> (type, host name)
    workers: list[tuple[str, str, Any]]  # (type, host name, actor)
    cluster: Any

    def job(self, name: str) -> str:
        return f"{name}-{uuid.uuid4().hex[:6]}"

    def sweeps(self, job: str) -> list[dict[str, Any]]:
        """One interval per process that probed ``job``: its host, first and last probe."""
        found: dict[int, dict[str, Any]] = {}
        for line in self.log.read_text().splitlines():
            probe = json.loads(line)
            if probe["job"] != job:
                continue
            seen = found.setdefault(
                probe["pid"], {"host": probe["host"], "t0": probe["t0"], "t1": probe["t1"]}
            )
            seen["t0"] = min(seen["t0"], probe["t0"])
            seen["t1"] = max(seen["t1"], probe["t1"])
        return sorted(found.values(), key=lambda s: s["t0"])

    def overlaps(self, sweeps: list[dict[str, Any]]) -> int:
        """Pairs of sweeps that measured at the same time on one host."""
        count = 0
        for i, one in enumerate(sweeps):
            for other in sweeps[i + 1 :]:
                same = one["host"] == other["host"]
                if same and one["t0"] < other["t1"] and other["t0"] < one["t1"]:
                    count += 1
        return count

    def resolve_all(
        self, job: str, mode: str, workers: list[tuple[str, str, Any]] | None = None, **opts: Any
    ) -> tuple[list[tuple[str, str, dict[str, Any]]], float]:
        chosen = self.workers if workers is None else workers
        started = time.time()
        refs = [
            a.resolve.remote(job, self.sleep_s, str(self.log), self.policy, mode, **opts)
            for _, _, a in chosen
        ]
        results = self.ray.get(refs, timeout=WAIT_S)
        wall = time.time() - started
        return [(k, h, r) for (k, h, _), r in zip(chosen, results, strict=True)], wall


def answers_agree(results: list[tuple[str, str, dict[str, Any]]]) -> bool:
    by_type: dict[str, set[Any]] = {}
    for kind, _, r in results:
        by_type.setdefault(kind, set()).add(r["chunk"])
    return all(len(chunks) == 1 for chunks in by_type.values())


def row(
    name: str, wall: float, sweeps: list[dict[str, Any]], bench: Bench, **extra: Any
) -> dict[str, Any]:
    busy = sum(s["t1"] - s["t0"] for s in sweeps)
    return {
        "scenario": name,
        "wall_s": round(wall, 2),
        "sweeps": len(sweeps),
        "sweep_s_total": round(busy, 2),
        "sweep_s_mean": round(busy / len(sweeps), 2) if sweeps else 0.0,
        "overlaps_on_one_host": bench.overlaps(sweeps),
        **extra,
    }


def scenario_resolve(bench: Bench, name: str, mode: str) -> dict[str, Any]:
    """Every worker resolves one cold job at once, through ``mode`` ("ray", "per-host", "alone")."""
    job = bench.job(name)
    results, wall = bench.resolve_all(job, mode)
    sweeps = bench.sweeps(job)
    sources = sorted(r["source"] for _, _, r in results)
    return row(
        name,
        wall,
        sweeps,
        bench,
        workers=len(results),
        answers_agree=answers_agree(results),
        sources={s: sources.count(s) for s in set(sources)},
    )


def scenario_tune_cluster(bench: Bench) -> dict[str, Any]:
    job = bench.job("tune")
    started = time.time()
    make = functools.partial(Sleepy, job, bench.sleep_s, str(bench.log))  # no closure over bench
    answers = chunktune.ray.tune_cluster(make, policy=bench.policy)
    tune_wall = time.time() - started
    results, hit_wall = bench.resolve_all(job, "ray")
    sweeps = bench.sweeps(job)
    sources = sorted(r["source"] for _, _, r in results)
    agree = all(r["chunk"] == answers[kind].chunk_size for kind, _, r in results)
    return row(
        "tune_cluster",
        tune_wall,
        sweeps,
        bench,
        workers=len(results),
        answers_agree=agree,
        sources={s: sources.count(s) for s in set(sources)},
        then_workers_wall_s=round(hit_wall, 2),
    )


def scenario_takeover(bench: Bench, lease_s: float) -> dict[str, Any]:
    ray = bench.ray
    job = bench.job("takeover")
    group = [w for w in bench.workers if w[0] == "a"]
    pids = ray.get([a.pid.remote() for _, _, a in group], timeout=WAIT_S)
    started = time.time()
    refs = [
        a.resolve.remote(job, bench.sleep_s, str(bench.log), bench.policy, "ray", lease_s=lease_s)
        for _, _, a in group
    ]
    policy = chunktune.load_settings().get_policy(bench.policy)
    probe = Sleepy(job, 0.0, "")
    key = "a/" + cache_key(
        probe.signature(),
        num_envs=probe.num_envs,
        nthread=probe.nthread,
        device={"node_type": "a"},
        policy_hash=policy.fingerprint(),
    )
    registry = ray.get_actor(
        chunktune.ray.REGISTRY_NAME, namespace=chunktune.ray.REGISTRY_NAMESPACE
    )
    while not (events := ray.get(registry.events.remote(key), timeout=WAIT_S)):
        time.sleep(0.02)
    holder = events[0]["holder"]
    victim = next(i for i, pid in enumerate(pids) if f"/pid{pid}/" in holder)
    while not any(s["t0"] for s in bench.sweeps(job)):
        time.sleep(0.02)
    time.sleep(0.5)  # well into its sweep
    killed_at = time.time()
    ray.kill(group[victim][2])
    survivors = [r for i, r in enumerate(refs) if i != victim]
    results = ray.get(survivors, timeout=WAIT_S)
    wall = time.time() - started
    events = ray.get(registry.events.remote(key), timeout=WAIT_S)
    takeover = next((e for e in events if e["event"] == "takeover"), None)
    sweeps = bench.sweeps(job)
    # the killed actor is gone: a fresh one takes its place for any later scenario
    kind, host, _ = group[victim]
    node_id = next(n for n, (_, h) in bench.hosts.items() if h == host)
    bench.workers[bench.workers.index(group[victim])] = (kind, host, spawn(ray, node_id))
    return row(
        "takeover",
        wall,
        sweeps,
        bench,
        workers=len(group),
        finished=len(results),
        answers_agree=len({r["chunk"] for r in results}) == 1,
        events=[e["event"] for e in events],
        kill_to_takeover_s=round(takeover["t"] - killed_at, 2) if takeover else None,
        lease_s=lease_s,
    )


def spawn(ray: Any, node_id: str) -> Any:
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    pinned = NodeAffinitySchedulingStrategy(node_id, soft=False)
    return ray.remote(num_cpus=0)(Worker).options(scheduling_strategy=pinned).remote()


def build(args: argparse.Namespace, root: Path) -> Bench:
    import ray
    from ray.cluster_utils import Cluster

    # ray's vendored cloudpickle is unannotated
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])  # type: ignore[no-untyped-call]

    def env(name: str) -> dict[str, str]:
        return {
            "CHUNKTUNE_CACHE": str(root / name / "cache.json"),
            "CHUNKTUNE_SWEEP_LOCK": str(root / name / "sweep.lock"),
            "CHUNKTUNE_CONFIG": "",
        }

    started = time.time()
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 0, "env_vars": env("head")})
    hosts: dict[str, tuple[str, str]] = {}
    for kind in TYPES:
        for i in range(args.hosts_per_type):
            name = f"{kind}{i + 1}"
            node = cluster.add_node(
                num_cpus=1, labels={chunktune.ray.NODE_TYPE_LABEL: kind}, env_vars=env(name)
            )
            hosts[node.node_id] = (kind, name)
    cluster.wait_for_nodes()
    ray.init(address=cluster.address, log_to_driver=False)
    workers = [
        (kind, name, spawn(ray, node_id))
        for node_id, (kind, name) in hosts.items()
        for _ in range(args.workers_per_host)
    ]
    ray.get([a.pid.remote() for _, _, a in workers], timeout=WAIT_S)
    print(
        f"cluster: {len(hosts)} hosts of {len(TYPES)} types, {len(workers)} workers, "
        f"up in {time.time() - started:.1f} s",
        flush=True,
    )
    bench = Bench(
        ray=ray,
        root=root,
        log=root / "probes.jsonl",
        policy=args.policy,
        sleep_s=args.sleep_ms / 1e3,
        hosts=hosts,
        workers=workers,
        cluster=cluster,
    )
    bench.log.touch()
    return bench


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts-per-type", type=int, default=2)
    parser.add_argument("--workers-per-host", type=int, default=2)
    parser.add_argument("--sleep-ms", type=float, default=40.0, help="real sleep per probe")
    parser.add_argument("--policy", default="quick")
    parser.add_argument("--lease-s", type=float, default=2.0, help="lease in the takeover run")
    parser.add_argument("--json", metavar="OUT", help="write the rows as JSON")
    args = parser.parse_args()
    if args.hosts_per_type < 1 or args.workers_per_host < 1:
        parser.error("--hosts-per-type and --workers-per-host must be at least 1")
    if args.hosts_per_type * args.workers_per_host < 2:
        parser.error(
            "the takeover run needs two workers of a type (one is killed mid-sweep, the "
            "other takes over): give --hosts-per-type or --workers-per-host 2"
        )
    root = Path(tempfile.mkdtemp(prefix="chunktune-ray-bench-"))
    # the driver's cache and sweep lock live in the run's folder, not the user's
    os.environ["CHUNKTUNE_CACHE"] = str(root / "driver" / "cache.json")
    os.environ["CHUNKTUNE_SWEEP_LOCK"] = str(root / "driver" / "sweep.lock")
    bench = build(args, root)
    scenarios: list[Callable[[], dict[str, Any]]] = [
        lambda: scenario_resolve(bench, "registry-cold", "ray"),
        lambda: scenario_resolve(bench, "registry", "ray"),
        lambda: scenario_tune_cluster(bench),
        lambda: scenario_resolve(bench, "per-host", "per-host"),
        lambda: scenario_resolve(bench, "alone", "alone"),
        lambda: scenario_takeover(bench, args.lease_s),
    ]
    rows = []
    try:
        for run in scenarios:
            result = run()
            rows.append(result)
            print(json.dumps(result), flush=True)
    finally:
        bench.ray.shutdown()
        bench.cluster.shutdown()
        shutil.rmtree(root, ignore_errors=True)
    print()
    head = f"{'scenario':<14}{'wall s':>8}{'sweeps':>8}{'sweep s':>9}{'mean s':>8}{'overlaps':>10}"
    print(head + "  agree")
    for r in rows:
        print(
            f"{r['scenario']:<14}{r['wall_s']:>8.2f}{r['sweeps']:>8}{r['sweep_s_total']:>9.2f}"
            f"{r['sweep_s_mean']:>8.2f}{r['overlaps_on_one_host']:>10}  {r['answers_agree']}"
        )
    if args.json:
        Path(args.json).write_text(json.dumps({"args": vars(args), "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
