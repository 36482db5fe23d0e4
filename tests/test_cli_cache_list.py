"""`chunktune cache list --json` and the table's host column, over real cache files."""

from __future__ import annotations

import datetime
import json
import re
import subprocess
import sys
import unicodedata
from pathlib import Path

import pytest
from _cache_cli import entry, one_error

import chunktune
from chunktune import DecisionCache
from chunktune._cli import main
from chunktune._cli._list_cmd import cpu_slot, entry_fields
from chunktune._load import MachineLoad

README = (Path(__file__).resolve().parents[1] / "README.md").read_text()
DEVICE = {
    "cpu": "EPYC 9654",
    "logical_cpus": 192,
    "usable_cpus": 8,
    "cpu_quota": 4.5,
    "mujoco": "3.3.0",
}


def _listed_json(capsys: pytest.CaptureFixture[str]) -> list[dict[str, object]]:
    """What `cache list --json` printed: exit 0, and stdout one JSON document, nothing else."""
    assert main(["cache", "list", "--json"]) == 0
    out = capsys.readouterr().out
    listed = json.loads(out)
    assert isinstance(listed, list)
    return listed


def test_list_json_gives_each_entry_s_facts_under_stable_names(
    isolated: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`cache list --json`: one JSON list, newest first, chunk null for native, date ISO 8601."""
    created = 1_780_000_000.0
    DecisionCache(isolated / "cache.json").update(
        {
            "a" * 32 + ".111111aaaaaa": entry(
                8,
                created=created,
                host="node7.cluster.example",
                device=DEVICE,
                mujoco_version="3.3.0",
                policy_hash="111111aaaaaa",
                load=MachineLoad(2.5, 2),
                signature={"task": "reach", "horizon": 200},
                model_file="/models/arm.xml",
            ),
            "b" * 32 + ".222222bbbbbb": entry(None, created=created - 3600, host=""),
        }
    )
    first, second = _listed_json(capsys)
    assert first == {
        "key": "a" * 32 + ".111111aaaaaa",
        "short_key": "a" * 12,
        "chunk_size": 8,
        "native_chunk": 3,
        "num_envs": 64,
        "nthread": 2,
        "model": "? arm.xml",
        "model_file": "/models/arm.xml",
        "policy": "balanced",
        "policy_hash": "111111aaaaaa",
        "reason": "test",
        "gain": 0.0,
        "partial": False,
        "busy": True,
        "created": "2026-05-28T20:26:40+00:00",
        "host": "node7.cluster.example",
        "machine": {
            "cpu": "EPYC 9654",
            "cpus": 192,
            "usable_cpus": 8,
            "cpu_quota": 4.5,
            "mujoco": "3.3.0",
        },
        "chunktune_version": None,
        "signature": {"horizon": 200, "task": "reach"},
    }
    assert datetime.datetime.fromisoformat(str(first["created"])).timestamp() == created
    assert second["key"] == "b" * 32 + ".222222bbbbbb"
    assert (second["chunk_size"], second["host"], second["busy"]) == (None, None, False)
    assert second["machine"] == {
        "cpu": None,
        "cpus": None,
        "usable_cpus": None,
        "cpu_quota": None,
        "mujoco": None,
    }


@pytest.mark.parametrize("created", [0.0, -5.0, 1e300], ids=["unknown", "negative", "far"])
def test_list_json_gives_a_date_it_cannot_write_as_null(
    isolated: Path, capsys: pytest.CaptureFixture[str], created: float
) -> None:
    """An entry of unknown date, or one no clock can write (1e300), has `created: null`."""
    DecisionCache(isolated / "cache.json").put("c" * 32, entry(created=created))
    (only,) = _listed_json(capsys)
    assert only["created"] is None


def test_list_json_of_an_empty_cache_is_an_empty_list(
    isolated: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`cache list --json` with no entries prints `[]`, not the table's 'no entries' line."""
    assert _listed_json(capsys) == []


def test_list_json_of_a_wrong_shape_warns_on_stderr_and_prints_only_json(
    isolated: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A cache of the wrong shape: moved aside, warned of on stderr; stdout is still `[]`."""
    path = isolated / "cache.json"
    path.write_text('{"schema": 1, "entries": null}')
    assert main(["cache", "list", "--json"]) == 0
    out, err = capsys.readouterr()
    (aside,) = isolated.glob("cache.json.corrupt-*")
    assert json.loads(out) == [] and str(path) in err and str(aside) in err


def test_list_json_of_a_damaged_cache_that_cannot_go_aside_lists_its_whole_entries(
    isolated: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A damaged cache whose lock cannot be taken: the whole entries as JSON, the warning apart."""
    path = isolated / "cache.json"
    DecisionCache(path).update(
        {"a" * 32: entry(4, reason="test 1"), "b" * 32: entry(8, reason="test 2")}
    )
    path.write_bytes(path.read_bytes().replace(b"test 2", b"test 3"))
    (isolated / "cache.json.lock").mkdir()  # the write lock cannot be taken
    assert main(["cache", "list", "--json"]) == 0
    out, err = capsys.readouterr()
    assert [row["key"] for row in json.loads(out)] == ["a" * 32]
    (warning,) = err.splitlines()
    assert "could not move it aside" in warning


def test_list_json_of_an_unreadable_cache_is_exit_2_as_the_table_s(
    isolated: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A cache that cannot be read: `list --json` exits 2 with one message and no stdout."""
    broken = isolated / "dir.json"
    broken.mkdir()
    monkeypatch.setenv("CHUNKTUNE_CACHE", str(broken))
    assert main(["cache", "list", "--json"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and "cannot read the cache" in one_error(err)


def test_the_readme_lists_exactly_the_fields_list_json_prints() -> None:
    """The README's `list --json` paragraph names every field of an entry and its machine."""
    start = README.index("- `list --json` prints one JSON list")
    listed = README[start : README.index("\n- ", start + 1)]
    named = set(re.findall(r"`(\w+)`", listed))
    fields = entry_fields("k", "k", entry())
    assert set(fields) | set(fields["machine"]) <= named
    assert named - set(fields) - set(fields["machine"]) <= {"null"}


def test_list_shows_a_host_column_where_the_entries_come_from_several_hosts(
    isolated: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Entries of two hosts: a last column `host`, the name up to its first dot, cut at 12."""
    DecisionCache(isolated / "cache.json").update(
        {
            "a" * 32: entry(4, age_s=10, host="node7.cluster.example"),
            "b" * 32: entry(8, age_s=20, host="gpu-worker-0042-east.example"),
            "c" * 32: entry(8, age_s=30, host=""),
        }
    )
    assert main(["cache", "list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["key", "model", "N", "T", "chunk", "age", "policy", "host"]
    hosts = [ln.split()[-1] for ln in lines[2:5]]
    assert hosts == ["node7", "gpu-worker-…", "?"]


def test_list_shows_no_host_column_where_one_host_made_every_entry(
    isolated: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Entries of one host only: the table keeps its columns, with no `host` column."""
    DecisionCache(isolated / "cache.json").update(
        {"a" * 32: entry(4, host="node7"), "b" * 32: entry(8, host="node7")}
    )
    assert main(["cache", "list"]) == 0
    assert "host" not in capsys.readouterr().out.splitlines()[0]


def test_list_shows_a_cpus_column_where_entries_had_different_cpus(
    isolated: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A 1-CPU slot's entry beside its whole machine's: a `cpus` column tells them apart."""
    machine = {"cpu": "EPYC", "logical_cpus": 2, "usable_cpus": 2, "cpu_quota": "none"}
    DecisionCache(isolated / "cache.json").update(
        {
            "a" * 32: entry(4, age_s=10, device=machine),
            "b" * 32: entry(None, age_s=20, device={**machine, "usable_cpus": 1}),
            "c" * 32: entry(None, age_s=30, device={**machine, "cpu_quota": 1.5}),
            "d" * 32: entry(None, age_s=40),
        }
    )
    assert main(["cache", "list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["key", "model", "N", "T", "chunk", "age", "policy", "cpus"]
    assert [ln.split("balanced")[-1].strip() for ln in lines[2:6]] == [
        "2 of 2",
        "1 of 2",
        "2 of 2, quota 1.5",
        "? of ?",
    ]


def test_list_tells_a_quota_slot_from_its_machine_with_the_same_affinity(
    isolated: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A systemd slot's entry (CPUQuota=100%, same CPUs) beside its machine's: a `cpus` column."""
    machine = {"logical_cpus": 2, "usable_cpus": 2, "cpu_quota": "none"}
    DecisionCache(isolated / "cache.json").update(
        {
            "a" * 32: entry(4, age_s=10, device=machine),
            "b" * 32: entry(None, age_s=20, device={**machine, "cpu_quota": 1.0}),
        }
    )
    assert main(["cache", "list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[-1] == "cpus"
    assert [ln.split("balanced")[-1].strip() for ln in lines[2:4]] == ["2 of 2", "2 of 2, quota 1"]
    unlimited = {"cpu": None, "cpus": 2, "usable_cpus": 2, "cpu_quota": None, "mujoco": None}
    assert [listed["machine"] for listed in _listed_json(capsys)] == [
        unlimited,  # "none", as a fingerprint without a quota records it, is null
        {**unlimited, "cpu_quota": 1.0},
    ]


def test_list_shows_no_cpus_column_where_every_entry_had_the_same_cpus(
    isolated: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Entries measured with the same CPUs: no `cpus` column."""
    machine = {"logical_cpus": 2, "usable_cpus": 2, "cpu_quota": "none"}
    DecisionCache(isolated / "cache.json").update(
        {"a" * 32: entry(4, device=machine), "b" * 32: entry(8, device=machine)}
    )
    assert main(["cache", "list"]) == 0
    assert "cpus" not in capsys.readouterr().out.splitlines()[0]


def test_list_of_exactly_two_hosts_shows_names_of_twelve_characters_whole(
    isolated: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Two hosts are several: a host column, a 12-character name whole, a 13-character one cut."""
    DecisionCache(isolated / "cache.json").update(
        {
            "a" * 32: entry(4, age_s=10, host="abcdefghijkl.example"),
            "b" * 32: entry(8, age_s=20, host="abcdefghijklm"),
        }
    )
    assert main(["cache", "list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[-1] == "host"
    assert [ln.split()[-1] for ln in lines[2:4]] == ["abcdefghijkl", "abcdefghijk…"]


def test_list_names_each_entry_s_policy_and_says_how_many_were_measured_busy(
    isolated: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The table's N, T and policy columns ("?" where unknown), and a line counting busy ones."""
    DecisionCache(isolated / "cache.json").update(
        {
            "a" * 32: entry(4, age_s=10, load=MachineLoad(2.5, 2)),
            "b" * 32: entry(8, age_s=20, policy="", num_envs=0, nthread=0),
        }
    )
    assert main(["cache", "list"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0].split()[2:4] == ["N", "T"] and lines[0].split()[-1] == "policy"
    assert [ln.split()[2:4] + ln.split()[-1:] for ln in lines[2:4]] == [
        ["64", "2", "balanced"],
        ["?", "?", "?"],
    ]
    assert "1 of them measured while the machine was busy" in out


@pytest.mark.parametrize(
    ("created", "iso"),
    [(1.0, "1970-01-01T00:00:01+00:00"), (0.5, "1970-01-01T00:00:00+00:00"), (0.0, None)],
)
def test_list_json_dates_every_moment_after_the_epoch(created: float, iso: str | None) -> None:
    """A date of the epoch's first second is a date; only zero (unknown) or less is null."""
    from chunktune._cli._list_cmd import iso_created

    assert iso_created(created) == iso


@pytest.mark.parametrize(
    ("quota", "listed"),
    [
        pytest.param(1.5, 1.5, id="a-quota"),
        pytest.param("none", None, id="none"),
        pytest.param(True, None, id="a-bool-is-no-quota"),
    ],
)
def test_the_cpus_column_and_list_json_read_one_quota_alike(quota: object, listed: object) -> None:
    """cpu_quota: a number in both the cpus cell and --json; "none" or a bool in neither."""
    device = {"logical_cpus": 2, "usable_cpus": 2, "cpu_quota": quota}
    assert entry_fields("k", "k", entry(device=device))["machine"]["cpu_quota"] == listed
    assert cpu_slot(device) == ("2 of 2" if listed is None else f"2 of 2, quota {listed:g}")


class _Unprintable:
    """A custom workload whose signature holds text a terminal would act on."""

    num_envs = 64
    nthread = 2

    def signature(self) -> dict[str, str | int]:
        return {"kind": "arm\nreach\x1b[31m", "\u202etask": "x\ty", "seed": 1}

    def run(self, chunk_size: int | None) -> float:
        return 0.01 * (1 + 0.02 * abs((chunk_size or 3) - 4))


@pytest.mark.parametrize("verb", ["list", "show"])
def test_a_custom_signature_s_control_characters_are_shown_escaped(verb: str) -> None:
    """cache list/show quote a signature's newline, escape and bidi override, one line each."""
    decision = chunktune.resolve_sync(_Unprintable(), policy="quick")
    assert decision.source == "benchmark"
    args = ["list"] if verb == "list" else ["show", decision.key[:12]]
    shown = subprocess.run(
        [sys.executable, "-m", "chunktune", "cache", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    assert not [c for c in shown if unicodedata.category(c) in ("Cc", "Cf") and c != "\n"]
    summary = r'"arm\nreach\u001B[31m" seed=1 "\u202Etask"="x\ty"'
    if verb == "list":
        (line,) = [ln for ln in shown.splitlines() if ln.startswith(decision.key[:12])]
        assert summary in line
    else:
        assert f"model           {summary}\n" in shown
        signature = r'kind="arm\nreach\u001B[31m", seed=1, "\u202Etask"="x\ty"'
        assert f"signature       {signature}\n" in shown


def test_a_stored_label_file_hash_and_kind_are_shown_escaped(
    isolated: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """cache list/show escape an entry's model_label, model file, model_sha and kind, sorted."""
    monkeypatch.setenv("CHUNKTUNE_CACHE", str(isolated / "cache.toml"))
    labelled = {"kind": "arm\x1b[2J", "model_label": "fam\nily", "z": 1, "a": 2}
    hashed = {"kind": "k", "model_sha": "01\n3456789abcdef"}
    DecisionCache(isolated / "cache.toml").update(
        {
            "a" * 32 + ".111111aaaaaa": entry(signature=labelled, model_file="/m/sc\u2028ene.xml"),
            "b" * 32 + ".222222bbbbbb": entry(signature=hashed),
        }
    )
    assert main(["cache", "list"]) == 0
    listed = capsys.readouterr().out
    assert r'"arm\u001B[2J" "sc\u2028ene.xml" ("fam\nily")' in listed
    assert r'k "01\n3456789ab"' in listed
    assert main(["cache", "show", "a" * 12]) == 0
    shown = capsys.readouterr().out
    assert not [c for c in shown if unicodedata.category(c) in ("Cc", "Cf", "Zl") and c != "\n"]
    assert 'model file      "/m/sc\\u2028ene.xml"\n' in shown
    assert r'signature       a=2, kind="arm\u001B[2J", model_label="fam\nily", z=1' in shown
