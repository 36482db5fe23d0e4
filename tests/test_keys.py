"""Cache keys tell machines, jobs and policies apart; stronger results serve weaker requests."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path
from typing import Any

import attrs
import pytest
from _forking import run_forked

import chunktune
from chunktune import (
    BalancedCandidates,
    DecisionCache,
    ExplicitCandidates,
    GeometricCandidates,
    _fingerprint,
    _keys,
)
from chunktune._candidates import CandidateStrategy
from chunktune._fingerprint import (
    available_memory,
    chunktune_version,
    cpu_model,
    cpu_quota,
    device_fingerprint,
    mujoco_version,
    usable_cpus,
)
from chunktune._keys import cache_for, cache_key
from chunktune.sim import Noise, SimulatedWorkload

SIG = {"kind": "mujoco.rollout", "model_sha": "abc", "nstep": 10, "n_variants": 1}
DEVICE = {
    "cpu": "AMD EPYC",
    "logical_cpus": 16,
    "usable_cpus": 16,
    "cpu_quota": "none",
    "system": "Linux",
    "machine": "x86_64",
    "mujoco": "4.0.0",
}


def key(**over: object) -> str:
    sig = {**SIG, **over.pop("sig", {})}  # type: ignore[dict-item]
    device = {**DEVICE, **over.pop("device", {})}  # type: ignore[dict-item]
    args = {"num_envs": 256, "nthread": 8, "policy_hash": "p1", **over}
    return cache_key(sig, device=device, **args)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "field",
    ["cpu", "logical_cpus", "usable_cpus", "cpu_quota", "system", "machine", "mujoco"],
)
def test_each_device_field_separates_keys(field: str) -> None:
    """Changing any one machine fact changes the key."""
    assert key(device={field: "other"}) != key()


@pytest.mark.parametrize("field", ["kind", "model_sha", "nstep", "n_variants", "extra"])
def test_each_signature_field_separates_keys(field: str) -> None:
    """Changing or adding any signature field changes the key."""
    assert key(sig={field: "other"}) != key()


@pytest.mark.parametrize(
    "over", [{"num_envs": 512}, {"nthread": 4}, {"policy_hash": "p2"}], ids=["N", "T", "policy"]
)
def test_sizes_and_policy_separate_keys(over: dict[str, object]) -> None:
    """N, T and the policy each change the key."""
    assert key(**over) != key()


def test_policy_is_the_suffix_and_the_job_the_prefix() -> None:
    """Keys are <job>.<policy>: same job, different policy share the prefix."""
    a, b = key(), key(policy_hash="p2")
    assert a.split(".")[0] == b.split(".")[0] and a != b


def test_fingerprint_reads_affinity_and_quota(tmp_path: Path) -> None:
    """The fingerprint has the usable CPUs, and a cgroup v2 quota is read in CPUs."""
    fp = device_fingerprint()
    assert {"cpu", "logical_cpus", "usable_cpus", "cpu_quota", "mujoco"} <= set(fp)
    (tmp_path / "cpu.max").write_text("150000 100000\n")
    assert cpu_quota(tmp_path) == 1.5
    (tmp_path / "cpu.max").write_text("max 100000\n")
    assert cpu_quota(tmp_path) is None


def uneven() -> SimulatedWorkload:
    return SimulatedWorkload.from_layout(
        "blocked", num_envs=512, nthread=8, noise=Noise(sigma=0.01)
    )


def test_a_stronger_result_serves_a_weaker_request_but_not_the_reverse() -> None:
    """An entry of a policy with the same rule and more probes answers; a weaker one does not."""
    weak = attrs.evolve(chunktune.load_settings().get_policy("quick"), max_rounds=6)
    strong = attrs.evolve(weak, max_rounds=12, description="more rounds")
    assert strong.rule() == weak.rule() and strong.effort() > weak.effort()
    w = uneven()
    first = chunktune.resolve_sync(w, policy=strong)
    served = chunktune.resolve_sync(w, policy=weak)
    assert served.source == "cache" and served.key == first.key
    other = SimulatedWorkload.from_layout("blocked", num_envs=640, nthread=8)
    chunktune.resolve_sync(other, policy=weak)
    assert chunktune.resolve_sync(other, policy=strong).source == "benchmark"


def test_a_result_confirmed_on_fewer_pairs_does_not_serve_a_request_for_more() -> None:
    """A policy that confirms on 2 pairs is weaker than balanced's 64: balanced measures anew."""
    balanced = chunktune.load_settings().get_policy("balanced")
    thin = attrs.evolve(balanced, confirm_min_pairs=2, confirm_max_pairs=2, description="thin")
    assert thin.rule() == balanced.rule() and thin.effort() < balanced.effort()
    w = uneven()
    chunktune.resolve_sync(w, policy=thin)
    assert chunktune.resolve_sync(w, policy=balanced).source == "benchmark"


@pytest.mark.parametrize(
    "change",
    [
        pytest.param({"tie_tol": 0.03}, id="tie_tol"),
        pytest.param({"tie_z": 2.0}, id="tie_z"),
        pytest.param({"tie_break": "smallest"}, id="tie_break"),
        pytest.param({"confirm_alpha": 0.02}, id="confirm_alpha"),
    ],
)
def test_a_stronger_result_under_another_rule_does_not_serve(change: dict[str, object]) -> None:
    """More probes do not make up for another tie rule or level of proof: it measures anew."""
    weak = chunktune.load_settings().get_policy("quick")
    strong = attrs.evolve(weak, max_rounds=12, **change)  # type: ignore[arg-type]
    assert strong.effort() > weak.effort() and strong.rule() != weak.rule()
    w = uneven()
    chunktune.resolve_sync(w, policy=strong)
    assert chunktune.resolve_sync(w, policy=weak).source == "benchmark"


def test_a_result_from_other_sizes_does_not_answer_an_explicit_list() -> None:
    """A balanced entry may name a size outside sizes = [7, 11]: that policy measures anew."""
    balanced = chunktune.load_settings().get_policy("balanced")
    listed = attrs.evolve(balanced, candidates=ExplicitCandidates(sizes=(11, 7)))
    assert listed.effort() < balanced.effort()
    w = uneven()
    first = chunktune.resolve_sync(w, policy=balanced)
    assert first.source == "benchmark" and first.chunk_size not in (7, 11)
    again = chunktune.resolve_sync(w, policy=listed)
    assert again.source == "benchmark" and again.chunk_size in (None, 7, 11)
    assert chunktune.resolve_sync(w, policy=listed).source == "cache"  # its own entry


def test_an_explicit_list_measured_longer_does_not_answer_a_wider_search() -> None:
    """sizes = [7, 11] with more rounds than quick's search: a quick request measures anew."""
    quick = chunktune.load_settings().get_policy("quick")
    listed = attrs.evolve(quick, max_rounds=40, candidates=ExplicitCandidates(sizes=(7, 11)))
    assert listed.effort() > quick.effort()
    w = uneven()
    chunktune.resolve_sync(w, policy=listed)
    assert chunktune.resolve_sync(w, policy=quick).source == "benchmark"


@pytest.mark.parametrize(
    "candidates",
    [
        pytest.param(GeometricCandidates(), id="geometric"),
        pytest.param(BalancedCandidates(k_ratio=2.0), id="balanced-k_ratio"),
        pytest.param(BalancedCandidates(max_candidates=16), id="balanced-more"),
    ],
)
def test_the_rule_names_a_search_other_than_balanceds_own(
    candidates: CandidateStrategy,
) -> None:
    """Another strategy or balanced's keys change the rule; balanced's max_candidates does not."""
    balanced = chunktune.load_settings().get_policy("balanced")
    other = attrs.evolve(balanced, candidates=candidates)
    same = isinstance(candidates, BalancedCandidates) and candidates.k_ratio == 1.35
    assert (other.rule() == balanced.rule()) is same
    assert "candidates=" not in balanced.rule()


def test_an_explicit_list_names_the_same_rule_in_any_order_and_with_repeats() -> None:
    """sizes = [11, 3, 7, 3] asks what [3, 7, 11] asks; [3, 7] asks something else."""
    balanced = chunktune.load_settings().get_policy("balanced")

    def listed(*sizes: int) -> str:
        return attrs.evolve(balanced, candidates=ExplicitCandidates(sizes=sizes)).rule()

    assert listed(11, 3, 7, 3) == listed(3, 7, 11) != listed(3, 7)


@pytest.mark.parametrize(
    ("candidates", "search"),
    [
        pytest.param(
            BalancedCandidates(k_ratio=2.0, max_candidates=16),
            '{"k_ratio":2.0,"min_chunks_per_thread":2,"strategy":"balanced"}',
            id="balanced-k_ratio",
        ),
        pytest.param(
            ExplicitCandidates(sizes=(11, 3, 7, 3)),
            '{"sizes":[3,7,11],"strategy":"explicit"}',
            id="explicit",
        ),
        pytest.param(GeometricCandidates(), '{"ratio":2.0,"strategy":"geometric"}', id="geometric"),
    ],
)
def test_the_rule_of_a_search_is_pinned_so_stored_entries_keep_answering(
    candidates: CandidateStrategy, search: str
) -> None:
    """The candidates= part a cache entry stores is compact JSON, keys sorted, never reworded."""
    balanced = chunktune.load_settings().get_policy("balanced")
    other = attrs.evolve(balanced, candidates=candidates)
    assert other.rule() == f"{balanced.rule()};candidates={search}"


def test_shared_and_balanced_entries_never_answer_each_other() -> None:
    """`shared` searches other sizes than balanced: neither's entry answers the other, nor quick."""
    w = uneven()
    chunktune.resolve_sync(w, policy="balanced")
    assert chunktune.resolve_sync(w, policy="shared").source == "benchmark"
    assert chunktune.resolve_sync(w, policy="shared").source == "cache"
    w = uneven()
    w.name = "another job"  # only shared's entry exists for it
    chunktune.resolve_sync(w, policy="shared")
    assert chunktune.resolve_sync(w, policy="quick").source == "benchmark"
    assert chunktune.resolve_sync(w, policy="balanced").source == "benchmark"


def test_seed_policy_is_served_only_by_itself() -> None:
    """The seed policy picks by another rule, so a thorough entry does not answer it."""
    w = uneven()
    chunktune.resolve_sync(w, policy="thorough")
    assert chunktune.resolve_sync(w, policy="seed").source == "benchmark"


def test_keys_of_valid_signatures_never_change() -> None:
    """The key of a plain signature is pinned: entries cached by earlier versions still hit."""
    assert key() == "857a21cb2010ff874ae3557a577756c4.p1"


def test_numpy_scalars_key_like_the_numbers_they_hold() -> None:
    """A signature of numpy scalars keys exactly as the same plain values do."""
    import numpy as np

    from chunktune._workload import check_signature

    plain = {"n": 5, "dt": 0.002, "on": True, "name": "hopper"}
    numpy = {
        "n": np.int64(5),
        "dt": np.float64(0.002),
        "on": np.bool_(True),
        "name": np.str_("hopper"),
    }
    assert key(sig=check_signature(numpy)) == key(sig=plain)
    assert key(sig=check_signature(plain)) == key(sig=plain)


def test_an_entry_with_the_older_rule_form_still_answers_its_own_policy(tmp_path: Path) -> None:
    """Entries stored before rule() named ties and confirmation keep answering their policy."""
    w = uneven()
    first = chunktune.resolve_sync(w, policy="balanced")
    cache = DecisionCache(tmp_path / "cache.json")
    stored = cache.get(first.key)
    assert stored is not None
    cache.put(first.key, attrs.evolve(stored, policy_rule="margin=0.01;tie_break=evidence;z=1"))
    again = chunktune.resolve_sync(w, policy="balanced")
    assert again.source == "cache" and again.key == first.key
    assert chunktune.resolve_sync(w, policy="quick").source == "benchmark"


def test_a_cgroup_v1_quota_is_read_in_cpus_and_minus_one_is_no_limit(tmp_path: Path) -> None:
    """Without cpu.max, the v1 CFS quota over its period; a quota of -1 means unlimited (None)."""
    (tmp_path / "cpu").mkdir()
    (tmp_path / "cpu" / "cpu.cfs_period_us").write_text("100000\n")
    (tmp_path / "cpu" / "cpu.cfs_quota_us").write_text("250000\n")
    assert cpu_quota(tmp_path) == 2.5
    (tmp_path / "cpu" / "cpu.cfs_quota_us").write_text("-1\n")
    assert cpu_quota(tmp_path) is None


@pytest.mark.parametrize(("quota", "period"), [("0", "100000"), ("250000", "0")])
def test_a_cgroup_v1_quota_or_period_of_zero_is_no_limit(
    tmp_path: Path, quota: str, period: str
) -> None:
    """A v1 CFS quota of 0, or a period of 0, sets no limit: None, neither 0 CPUs nor an error."""
    (tmp_path / "cpu").mkdir()
    (tmp_path / "cpu" / "cpu.cfs_period_us").write_text(f"{period}\n")
    (tmp_path / "cpu" / "cpu.cfs_quota_us").write_text(f"{quota}\n")
    assert cpu_quota(tmp_path) is None


def test_one_cache_path_in_two_formats_gives_two_caches(tmp_path: Path) -> None:
    """cache_for keys its caches by path and format: a second format is not served the first."""
    path = str(tmp_path / "decisions.dat")
    settings = chunktune.load_settings()
    as_json, as_toml = (
        cache_for(attrs.evolve(settings, cache=attrs.evolve(settings.cache, path=path, format=f)))
        for f in ("json", "toml")
    )
    assert as_json is not None and as_toml is not None
    assert (as_json.format, as_toml.format) == ("json", "toml")


def test_the_cpu_model_is_the_model_name_proc_cpuinfo_gives() -> None:
    """On Linux the fingerprint's cpu is /proc/cpuinfo's model name, not the bare architecture."""
    try:
        lines = Path("/proc/cpuinfo").read_text(errors="replace").splitlines()
    except OSError:
        pytest.skip("no /proc/cpuinfo here")
    names = [line.partition(":")[2].strip() for line in lines if line.startswith("model name")]
    if not names:
        pytest.skip("this /proc/cpuinfo names no model")
    assert cpu_model() == names[0] == device_fingerprint()["cpu"]


def test_a_changed_quota_is_seen_within_a_second_and_not_read_more_often(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The container's quota is re-read once its last reading is a second old, never sooner."""
    now = [1000.0]
    quota: list[float | None] = [2.0]
    monkeypatch.setattr(time, "monotonic", lambda: now[0])  # the time _fingerprint reads
    monkeypatch.setattr(_fingerprint, "cpu_quota", lambda: quota[0])
    monkeypatch.setattr(_fingerprint, "_quota_seen", (-float("inf"), None))
    assert device_fingerprint()["cpu_quota"] == 2.0
    quota[0] = 1.0
    now[0] += 0.5
    assert device_fingerprint()["cpu_quota"] == 2.0
    now[0] += 0.6
    assert device_fingerprint()["cpu_quota"] == 1.0
    quota[0] = None
    now[0] += 1.0
    assert device_fingerprint()["cpu_quota"] == "none"


def test_a_hit_gives_the_native_chunk_of_the_request_not_of_the_entry(isolated: Path) -> None:
    """A hit whose entry has another native_chunk (hand-edited, say) gives this N/T's."""
    w = uneven()
    first = chunktune.resolve_sync(w, policy="quick")
    cache = DecisionCache(isolated / "cache.json")
    entry = cache.get(first.key)
    assert entry is not None
    cache.put(first.key, attrs.evolve(entry, native_chunk=1))
    hit = chunktune.resolve_sync(w, policy="quick")
    assert hit.source == "cache" and hit.native_chunk == first.native_chunk == 512 // 80


def test_a_quota_is_kept_to_the_thousandth_of_a_cpu(tmp_path: Path) -> None:
    """cpu.max of 12345 over 100000 is 0.123 CPUs: three places, not fewer."""
    (tmp_path / "cpu.max").write_text("12345 100000\n")
    assert cpu_quota(tmp_path) == 0.123


def test_a_cpu_max_that_cannot_be_read_as_numbers_falls_back_to_the_v1_quota(
    tmp_path: Path,
) -> None:
    """A cpu.max of one word is passed over for the cgroup v1 files, not raised."""
    (tmp_path / "cpu.max").write_text("max\n")
    (tmp_path / "cpu").mkdir()
    (tmp_path / "cpu" / "cpu.cfs_period_us").write_text("100000\n")
    (tmp_path / "cpu" / "cpu.cfs_quota_us").write_text("250000\n")
    assert cpu_quota(tmp_path) == 2.5


def test_the_usable_cpus_are_the_affinity_masks_not_the_machines(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Pinned to 3 of 64 CPUs, usable_cpus and the fingerprint say 3."""
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2}, raising=False)
    monkeypatch.setattr(os, "cpu_count", lambda: 64)
    assert usable_cpus() == 3
    assert device_fingerprint()["usable_cpus"] == 3


def test_the_logical_cpus_are_the_machines_whatever_the_affinity(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Pinned to 3 of 64 CPUs, the fingerprint's logical_cpus says the machine's 64."""
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2}, raising=False)
    monkeypatch.setattr(os, "cpu_count", lambda: 64)
    monkeypatch.setattr(_fingerprint, "_fixed", None)  # read anew; no later test sees 64
    assert device_fingerprint()["logical_cpus"] == 64


def test_a_chunktune_run_from_a_bare_tree_is_version_0_unknown(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Without installed metadata, chunktune's version reads "0+unknown", not an error."""

    def not_installed(name: str) -> str:
        raise metadata.PackageNotFoundError(name)

    monkeypatch.setattr(metadata, "version", not_installed)
    monkeypatch.delitem(_fingerprint._remembered, "chunktune", raising=False)
    try:
        assert chunktune_version() == "0+unknown"
    finally:
        _fingerprint._remembered.pop("chunktune", None)


def test_a_fallback_read_while_files_open_is_remembered_for_the_process(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A fact read as None twice with descriptors free keeps its fallback: read() runs twice."""
    monkeypatch.setattr(_fingerprint, "_remembered", {})
    reads: list[str] = []
    answers: list[str | None] = [None, None, "9.9"]

    def read() -> str | None:
        reads.append("read")
        return answers[len(reads) - 1]

    first = _fingerprint._remember("fact", read, lambda: "fallback")
    assert (first, _fingerprint._remember("fact", read, lambda: "other")) == ("fallback",) * 2
    assert reads == ["read", "read"]


def test_a_cpuinfo_read_that_fails_once_is_read_again_not_remembered_as_the_fallback(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """One EIO reading /proc/cpuinfo: the model is read again, the fallback never stands."""
    try:
        real = Path("/proc/cpuinfo").read_text(errors="replace")
    except OSError:
        pytest.skip("no /proc/cpuinfo here")
    if _fingerprint._cpuinfo_model() is None:
        pytest.skip("this /proc/cpuinfo names no model")
    read_text = Path.read_text
    failed: list[Path] = []

    def failing_once(self: Path, *args: Any, **kwargs: Any) -> str:
        if str(self) == "/proc/cpuinfo" and not failed:
            failed.append(self)
            raise OSError(errno.EIO, os.strerror(errno.EIO))
        return read_text(self, *args, **kwargs)

    monkeypatch.setattr(_fingerprint, "_remembered", {})
    monkeypatch.setattr(Path, "read_text", failing_once)
    assert cpu_model() == _fingerprint._cpuinfo_model()
    assert failed and cpu_model() in real


def test_a_metadata_scan_whose_listing_fails_once_does_not_remember_mujoco_as_none(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """One EIO listing sys.path for mujoco's metadata: its version is read again, not "none"."""
    installed = metadata.version("mujoco")
    # the folder that holds mujoco's metadata, as the scan lists it
    found = str(metadata.distribution("mujoco").locate_file(""))
    listdir = os.listdir
    failed: list[str] = []

    def failing_once(path: Any = ".") -> list[str]:
        if not failed and os.path.samefile(path, found):
            failed.append(str(path))
            raise OSError(errno.EIO, os.strerror(errno.EIO))
        return listdir(path)

    monkeypatch.setattr(_fingerprint, "_remembered", {})
    _fingerprint._forget_listings()  # a fresh scan, as a process's first
    monkeypatch.setattr(os, "listdir", failing_once)
    assert mujoco_version() == installed
    assert failed


def test_the_fixed_facts_are_read_once_a_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """Once read for real, the fixed facts stand: a later os.cpu_count() answer is not seen."""
    monkeypatch.setattr(_fingerprint, "_fixed", None)
    before = device_fingerprint()["logical_cpus"]
    assert isinstance(before, int)
    monkeypatch.setattr(os, "cpu_count", lambda: before + 1)
    assert device_fingerprint()["logical_cpus"] == before


def test_a_machine_whose_cpu_count_is_unknown_has_one_logical_cpu(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """os.cpu_count() answering None (it cannot tell) gives logical_cpus 1, not None or 0."""
    monkeypatch.setattr(_fingerprint, "_fixed", None)
    monkeypatch.setattr(os, "cpu_count", lambda: None)
    assert device_fingerprint()["logical_cpus"] == 1


def test_a_fact_read_while_the_descriptors_are_spent_leaves_the_facts_unfixed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """mujoco's version unread for want of descriptors: the next fingerprint reads it again."""
    cpu = cpu_model()
    monkeypatch.setattr(_fingerprint, "_remembered", {"cpu": cpu})
    monkeypatch.setattr(_fingerprint, "_read_while_spent", set())
    monkeypatch.setattr(_fingerprint, "_fixed", None)
    monkeypatch.setattr(_fingerprint, "_can_open_files", lambda: False)
    monkeypatch.setattr(_fingerprint, "_installed", lambda name: None)
    assert device_fingerprint()["mujoco"] == "none"
    monkeypatch.setattr(_fingerprint, "_can_open_files", lambda: True)
    monkeypatch.setattr(_fingerprint, "_installed", lambda name: "3.9.1")
    assert device_fingerprint()["mujoco"] == "3.9.1"
    assert device_fingerprint()["cpu"] == cpu


def test_available_memory_is_meminfos_under_a_roomier_cgroup_limit(tmp_path: Path) -> None:
    """A memory.max with more room than MemAvailable leaves MemAvailable: the least of the two."""
    (tmp_path / "proc").mkdir()
    (tmp_path / "proc/meminfo").write_text("MemAvailable:    4000 kB\n")
    cgroup = tmp_path / "sys/fs/cgroup"
    cgroup.mkdir(parents=True)
    (cgroup / "memory.max").write_text("90000000\n")
    (cgroup / "memory.current").write_text("1000000\n")
    assert available_memory(tmp_path) == 4000 * 1024


@pytest.mark.parametrize(
    ("meminfo", "limit"),
    [
        pytest.param("MemAvailable:\n", "max\n", id="meminfo-without-a-number"),
        pytest.param("MemAvailable:    4000 kB\n", "lots\n", id="memory-max-no-number"),
    ],
)
def test_available_memory_passes_over_what_it_cannot_read_as_numbers(
    tmp_path: Path, meminfo: str, limit: str
) -> None:
    """A MemAvailable line with no number, or a memory.max of words, is passed over, not raised."""
    (tmp_path / "proc").mkdir()
    (tmp_path / "proc/meminfo").write_text(meminfo)
    cgroup = tmp_path / "sys/fs/cgroup"
    cgroup.mkdir(parents=True)
    (cgroup / "memory.max").write_text(limit)
    (cgroup / "memory.current").write_text("1000000\n")
    got = available_memory(tmp_path)
    if meminfo.split()[1:]:
        assert got == 4000 * 1024
    else:  # the free pages sysconf tells instead
        assert got is not None and got > 0


# A fresh process: the facts read with its file descriptors spent, then read again with
# them free, one a line.
_SPENT = """\
import os, resource
from chunktune import _fingerprint
facts = (_fingerprint.cpu_model, _fingerprint.mujoco_version, _fingerprint.chunktune_version)
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (len(os.listdir("/proc/self/fd")) + 2, hard))
held = []
try:
    while True:
        held.append(os.open(os.devnull, os.O_RDONLY))
except OSError:
    pass
spent = [fact() for fact in facts]
for fd in held:
    os.close(fd)
print(*spent, sep="\\n")
print(*(fact() for fact in facts), sep="\\n")
"""


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="counts descriptors in /proc")
def test_facts_read_with_the_file_descriptors_spent_are_read_again_later(
    tmp_path: Path,
) -> None:
    """Out of file descriptors a fact falls back, but is not kept: read again once they free."""
    here = str(Path(chunktune.__file__).parents[1])
    done = subprocess.run(  # the timeout is a hang guard, not a timing
        [sys.executable, "-c", _SPENT], env={**os.environ, "PYTHONPATH": here},
        capture_output=True, text=True, timeout=120, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    spent, later = done.stdout.splitlines()[:3], done.stdout.splitlines()[3:]
    assert spent[1] == "none"  # the metadata could not be scanned: as if not installed
    assert later == [cpu_model(), mujoco_version(), chunktune_version()]
    assert later[1] == metadata.version("mujoco")


def test_the_mujoco_version_is_the_installed_mujocos() -> None:
    """The fingerprint's mujoco is the version the mujoco package reports."""
    mujoco = pytest.importorskip("mujoco")
    assert mujoco_version() == mujoco.__version__ == device_fingerprint()["mujoco"]


def test_a_child_forked_while_the_caches_lock_is_held_finds_its_cache(tmp_path: Path) -> None:
    """A fork while a parent's thread holds cache_for's lock leaves the child a free one."""
    settings = chunktune.load_settings()
    named = attrs.evolve(
        settings, cache=attrs.evolve(settings.cache, path=str(tmp_path / "c.json"))
    )

    def child() -> None:
        cache = cache_for(named)
        assert cache is not None and cache.path == tmp_path / "c.json"

    with _keys._caches_lock:
        status = run_forked(child, hang_guard_s=20)
    assert status == 0


def test_a_sweep_stores_its_entry_under_its_jobs_key_with_the_machine_it_ran_on(
    isolated: Path,
) -> None:
    """The key hashes this N and T, not swapped; the entry records the machine's fingerprint."""
    w = uneven()
    decision = chunktune.resolve_sync(w, policy="quick")
    device = device_fingerprint()
    policy_hash = decision.key.rsplit(".", 1)[1]
    assert decision.key == cache_key(
        w.signature(), num_envs=512, nthread=8, device=device, policy_hash=policy_hash
    )
    entry = DecisionCache(isolated / "cache.json").get(decision.key)
    assert entry is not None
    assert (entry.num_envs, entry.nthread, entry.device) == (512, 8, device)


def test_a_cache_path_from_home_is_one_cache_however_spelled(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """cache_for expands '~' before keying: ~/x and the whole path to x give one cache."""
    monkeypatch.setenv("HOME", str(tmp_path))
    settings = chunktune.load_settings()
    tilde, whole = (
        cache_for(attrs.evolve(settings, cache=attrs.evolve(settings.cache, path=p)))
        for p in ("~/decisions.json", str(tmp_path / "decisions.json"))
    )
    assert tilde is not None and tilde is whole


class Numbered(SimulatedWorkload):
    """A simulated pool whose signature holds one (possibly very long) int."""

    def __init__(self, number: int) -> None:
        super().__init__(uneven().costs, nthread=8)
        self.number = number

    def signature(self) -> dict[str, chunktune.SignatureValue]:
        return {**super().signature(), "number": self.number}


def test_a_signature_int_too_long_to_write_out_is_refused_before_measuring() -> None:
    """resolve raises a WorkloadError naming the long int, not a fallback blaming signature()."""
    w = Numbered(10**5000)
    with pytest.raises(chunktune.WorkloadError, match=r"\['number'\] is an int of 5001 digits"):
        chunktune.resolve_sync(w, policy="quick")
    assert w.calls == 0


def test_a_signature_int_of_the_most_digits_allowed_is_keyed_stored_and_hit() -> None:
    """An int of 4300 digits keys, is written to the cache file, and the next resolve hits it."""
    first = chunktune.resolve_sync(Numbered(10**4300 - 1), policy="quick")
    assert first.source == "benchmark" and first.key
    again = chunktune.resolve_sync(Numbered(10**4300 - 1), policy="quick")
    assert again.source == "cache" and again.key == first.key
    assert chunktune.resolve_sync(Numbered(10**4300 - 2), policy="quick").key != first.key


class _Shaped:
    """A workload of 64 envs on 2 threads, its shape given as ``kind`` (int, numpy.int64)."""

    def __init__(self, kind: type) -> None:
        self.num_envs, self.nthread = kind(64), kind(2)

    def signature(self) -> dict[str, chunktune.SignatureValue]:
        return {"kind": "shaped"}

    def run(self, chunk_size: int | None) -> float:
        return 0.01


def test_job_key_reads_the_shape_as_a_request_does() -> None:
    """job_key of a numpy-int shape is a resolve's key (its request reads the ints as ints)."""
    import numpy as np

    policy = chunktune.load_settings(None).policies["quick"]
    assert _keys.job_key(_Shaped(np.int64), policy) == _keys.job_key(_Shaped(int), policy)


def test_a_v2_quota_on_the_process_s_own_cgroup_is_read_not_only_the_root_s(
    tmp_path: Path,
) -> None:
    """A cpu.max set on this process's cgroup (systemd, a batch slot), not the root, is read."""
    own = tmp_path / "system.slice" / "job_7"
    own.mkdir(parents=True)
    (own / "cpu.max").write_text("100000 100000\n")
    membership = tmp_path / "cgroup"
    membership.write_text("0::/system.slice/job_7\n")
    assert cpu_quota(tmp_path, membership) == 1.0


def test_the_smallest_quota_on_the_way_to_the_process_s_cgroup_bounds_it(tmp_path: Path) -> None:
    """A parent's 0.5 CPUs bounds a child cgroup that sets none, and a child's 2 CPUs."""
    (tmp_path / "slot" / "step").mkdir(parents=True)
    (tmp_path / "slot" / "cpu.max").write_text("50000 100000\n")
    (tmp_path / "slot" / "step" / "cpu.max").write_text("max 100000\n")
    membership = tmp_path / "cgroup"
    membership.write_text("0::/slot/step\n")
    assert cpu_quota(tmp_path, membership) == 0.5
    (tmp_path / "slot" / "step" / "cpu.max").write_text("200000 100000\n")
    assert cpu_quota(tmp_path, membership) == 0.5


def test_a_v1_quota_on_the_process_s_cpu_cgroup_is_read(tmp_path: Path) -> None:
    """A cgroup v1 CFS quota on the process's cpu controller's cgroup is read, in CPUs."""
    (tmp_path / "cpu" / "slurm" / "job_3").mkdir(parents=True)
    (tmp_path / "cpu" / "cpu.cfs_quota_us").write_text("-1\n")
    (tmp_path / "cpu" / "cpu.cfs_period_us").write_text("100000\n")
    (tmp_path / "cpu" / "slurm" / "job_3" / "cpu.cfs_quota_us").write_text("150000\n")
    (tmp_path / "cpu" / "slurm" / "job_3" / "cpu.cfs_period_us").write_text("100000\n")
    membership = tmp_path / "cgroup"
    membership.write_text("5:memory:/slurm\n4:cpu,cpuacct:/slurm/job_3\n0::/\n")
    assert cpu_quota(tmp_path, membership) == 1.5


def test_a_container_shown_its_host_s_cgroup_path_reads_its_root_s_quota(tmp_path: Path) -> None:
    """A cgroup path that is not under the mount (a v1 container's) leaves the root's quota."""
    (tmp_path / "cpu").mkdir()
    (tmp_path / "cpu" / "cpu.cfs_quota_us").write_text("200000\n")
    (tmp_path / "cpu" / "cpu.cfs_period_us").write_text("100000\n")
    membership = tmp_path / "cgroup"
    membership.write_text("4:cpu,cpuacct:/docker/0123abcd\n0::/\n")
    assert cpu_quota(tmp_path, membership) == 2.0
    assert cpu_quota(tmp_path, tmp_path / "no-such-file") == 2.0


@pytest.mark.skipif(os.name != "posix", reason="a cgroup path is bytes on Linux")
def test_a_cgroup_path_that_is_not_utf8_is_read_and_never_raises(tmp_path: Path) -> None:
    """A cgroup named in bytes that are not UTF-8 (mkdir takes any) has its quota read."""
    own = os.fsencode(tmp_path) + b"/slot-\xe9"
    os.mkdir(own)
    with open(own + b"/cpu.max", "w") as limit:
        limit.write("100000 100000\n")
    membership = tmp_path / "cgroup"
    membership.write_bytes(b"0::/slot-\xe9\n")
    assert cpu_quota(tmp_path, membership) == 1.0


def test_a_cpu_max_that_sets_no_limit_is_the_answer_over_leftover_v1_files(
    tmp_path: Path,
) -> None:
    """Where cpu.max reads (as "max"), cgroup v2 is in use: v1 CFS files beside it are not read."""
    (tmp_path / "cpu.max").write_text("max 100000\n")
    (tmp_path / "cpu").mkdir()
    (tmp_path / "cpu" / "cpu.cfs_period_us").write_text("100000\n")
    (tmp_path / "cpu" / "cpu.cfs_quota_us").write_text("50000\n")
    membership = tmp_path / "cgroup"
    membership.write_text("0::/\n")
    assert cpu_quota(tmp_path, membership) is None


@pytest.mark.parametrize(
    "garbage",
    [
        pytest.param(b"100000 0\n", id="period-0"),
        pytest.param(b"\n", id="empty"),
        pytest.param(b"lots 100000\n", id="a-word"),
        pytest.param(b"\xff\xfe\n", id="not-text"),
    ],
)
def test_a_garbage_cpu_max_on_the_way_sets_no_limit_and_never_raises(
    tmp_path: Path, garbage: bytes
) -> None:
    """A cpu.max that is no quota (a period of 0, not numbers, not text) is passed over."""
    (tmp_path / "slot").mkdir()
    (tmp_path / "slot" / "cpu.max").write_bytes(garbage)
    membership = tmp_path / "cgroup"
    membership.write_text("0::/slot\n")
    assert cpu_quota(tmp_path, membership) is None
    (tmp_path / "cpu.max").write_text("150000 100000\n")
    assert cpu_quota(tmp_path, membership) == 1.5


def test_the_v1_cgroup_is_the_cpu_controller_s_not_cpuset_s_or_cpuacct_s(tmp_path: Path) -> None:
    """cpuset's and cpuacct's lines, after cpu's, do not name the cgroup the quota is read in."""
    for folder, quota in (("job", "150000"), ("other", "300000"), ("acct", "300000")):
        (tmp_path / "cpu" / folder).mkdir(parents=True)
        (tmp_path / "cpu" / folder / "cpu.cfs_quota_us").write_text(f"{quota}\n")
        (tmp_path / "cpu" / folder / "cpu.cfs_period_us").write_text("100000\n")
    membership = tmp_path / "cgroup"
    membership.write_text("4:cpu:/job\n3:cpuset:/other\n2:cpuacct:/acct\n0::/\n")
    assert cpu_quota(tmp_path, membership) == 1.5


def test_a_cgroup_path_that_climbs_out_of_the_mount_reads_only_the_mount_s_quota(
    tmp_path: Path,
) -> None:
    """A cgroup outside the namespace's root (/../job) never reads the mount's own job folder."""
    (tmp_path / "job").mkdir()
    (tmp_path / "job" / "cpu.max").write_text("50000 100000\n")  # another process's cgroup
    (tmp_path / "cpu.max").write_text("200000 100000\n")
    membership = tmp_path / "cgroup"
    membership.write_text("0::/../job\n")
    assert cpu_quota(tmp_path, membership) == 2.0


def test_a_version_read_refused_once_is_read_again_not_a_failed_resolve(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """One EIO reading mujoco's METADATA is read again: its real version, nothing raised."""
    real_version, refused = metadata.version, list[str]()

    def version(name: str) -> str:
        if not refused:
            refused.append(name)
            raise OSError(5, "Input/output error")
        return real_version(name)

    monkeypatch.setattr(_fingerprint, "_remembered", {})
    monkeypatch.setattr(metadata, "version", version)
    assert mujoco_version() == real_version("mujoco") and refused == ["mujoco"]
