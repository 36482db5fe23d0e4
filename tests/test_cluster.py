"""A cluster without Ray: hosts sharing a home directory (its cache and its cache root).

Each host is a real process with a kernel boot id of its own (so a sweep lock of its
own) and a host name of its own; they share one cache file and its key locks.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import chunktune
from chunktune._lock_files import SWEEP_LOCK_ENV

HANG_GUARD_S = 120.0  # not a speed limit: a hang fails the test instead of the suite

HOST = """
import json, os, socket, sys, time
from pathlib import Path

host, job, mode, out = sys.argv[1], sys.argv[2], sys.argv[3], Path(sys.argv[4])
others = [h for h in sys.argv[5].split(",") if h != host]
socket.gethostname = lambda: host  # before chunktune is imported
import chunktune
from chunktune import _lock_files, _lock_wait
from chunktune.sim import SimulatedWorkload

_lock_files._BOOT_ID = out / f"{host}.boot_id"
BARRIER_S = 90.0  # a hang guard: only a sweep that never overlaps the others' reaches it
_lock_wait.REPORT_AFTER_S = 0.0
_lock_wait.NOTE_GRACE_S = BARRIER_S  # a wait is reported once it can name the sweeper


class OnHost(SimulatedWorkload):
    def run(self, chunk_size):
        if not self.calls:
            # 'sweeps': every other host is sweeping too; 'waits': every other host
            # waits for this sweep. Else this first probe fails and nothing is cached.
            (out / f"sweeping-{host}").touch()
            mark = "sweeping" if mode == "sweeps" else "waiting"
            deadline = time.monotonic() + BARRIER_S
            while not all((out / f"{mark}-{h}").exists() for h in others):
                if time.monotonic() > deadline:
                    raise TimeoutError(f"the other hosts were not {mark}")
                time.sleep(0.01)
        return super().run(chunk_size)


def on_progress(event):
    if event.kind == "waiting":
        (out / f"waiting-{host}").touch()
        waits.append(event.message)


waits = []
costs = SimulatedWorkload.from_layout("blocked", num_envs=256, nthread=4).costs
w = OnHost(costs, nthread=4, name=job)
d = chunktune.resolve_sync(w, policy="quick", on_progress=on_progress)
result = {"pid": os.getpid(), "source": d.source, "key": d.key, "reason": d.reason, "waits": waits}
(out / f"{host}.json").write_text(json.dumps(result))
"""


def run_hosts(home: Path, jobs: dict[str, str], mode: str) -> dict[str, dict[str, Any]]:
    """Run one process per host at once, each resolving its job; each one's result."""
    out = home.parent / "hosts"
    out.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("XDG_CACHE_HOME", SWEEP_LOCK_ENV)}
    env |= {
        "HOME": str(home),
        "CHUNKTUNE_CACHE": str(home / "cache.json"),
        # the chunktune under test, wherever the children start
        "PYTHONPATH": str(Path(chunktune.__file__).parents[1]),
    }
    for n, host in enumerate(jobs):
        (out / f"{host}.boot_id").write_text(f"{n:08x}-77b2-4f0d-8e6c-bb0000000002\n")
    hosts = ",".join(jobs)
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", HOST, host, job, mode, str(out), hosts],
            env=env,
            stdout=subprocess.DEVNULL,
        )
        for host, job in jobs.items()
    ]
    try:
        for proc in procs:
            assert proc.wait(timeout=HANG_GUARD_S) == 0
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()
    return {host: json.loads((out / f"{host}.json").read_text()) for host in jobs}


def entries(home: Path) -> dict[str, Any]:
    entries: dict[str, Any] = json.loads((home / "cache.json").read_text())["entries"]
    return entries


@pytest.mark.parametrize(
    ("mode", "jobs"),
    [
        pytest.param("waits", {"node1": "job", "node2": "job", "node3": "job"}, id="same-key"),
        pytest.param("sweeps", {"node1": "a", "node2": "b", "node3": "c"}, id="own-keys"),
    ],
)
def test_hosts_sharing_a_cache_sweep_a_key_once_and_their_own_keys_at_once(
    tmp_path: Path, mode: str, jobs: dict[str, str]
) -> None:
    """Hosts of one node type: one sweeps a key the rest wait for and hit; own keys overlap."""
    home = tmp_path / "home"
    results = run_hosts(home, jobs, mode)
    if mode == "waits":
        sweepers = [host for host, r in results.items() if r["source"] == "benchmark"]
        assert len(sweepers) == 1, results
        (sweeper,) = sweepers
        named = f"(pid {results[sweeper]['pid']} on {sweeper}, since "
        for host, r in results.items():
            if host != sweeper:
                assert r["source"] == "cache" and r["key"] == results[sweeper]["key"]
                assert len(r["waits"]) == 1 and named in r["waits"][0], r["waits"]
        assert len(entries(home)) == 1
    else:
        # each sweep's first probe waited until every other host's sweep had begun
        assert [r["source"] for r in results.values()] == ["benchmark"] * 3, results
        assert sorted(entries(home)) == sorted(r["key"] for r in results.values())
