"""The README's commands and Python snippets are the real ones."""

from __future__ import annotations

import ast
import asyncio
import functools
import inspect
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import attrs
import pytest

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()
SNIPPETS = re.findall(r"```python\n(.*?)```", README, flags=re.S)


def test_readme_has_python_snippets() -> None:
    """The README shows the async, sync, custom-workload and compat uses."""
    assert len(SNIPPETS) >= 4


@pytest.mark.mujoco
@pytest.mark.parametrize("index", range(len(SNIPPETS)))
def test_snippet_runs(
    index: int, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each Python snippet in the README runs as written (a cell's top-level await too)."""
    monkeypatch.chdir(ROOT)
    code = compile(
        SNIPPETS[index],
        f"README.md snippet {index + 1}",
        "exec",
        flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT,
    )
    cell = eval(code, {"__name__": f"readme_snippet_{index}"})  # exec's, or a cell's coroutine
    if inspect.iscoroutine(cell):
        asyncio.run(cell)


@pytest.mark.mujoco
@pytest.mark.slow
def test_the_cancelled_resolve_snippet_steps_the_pool_without_crashing(tmp_path: Path) -> None:
    """The README's cancel-then-step snippet steps the pool with no close() first, and lives."""
    (snippet,) = [s for s in SNIPPETS if "move_on_after" in s and "pool.rollout(" in s]
    assert "workload.close" not in snippet  # the pool is the caller's once the cancel returns
    script = tmp_path / "cancelled.py"
    script.write_text(snippet)
    # a process of its own: two threads in one MuJoCo pool end the process, not a test
    done = subprocess.run(
        [sys.executable, str(script)], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr


def test_ci_runs_the_readme_test_command() -> None:
    """.ci/run runs exactly the README's test command."""
    commands = re.findall(r"```sh\n# [^\n]*\n([^\n]+)\n```", README)
    assert len(commands) == 2
    install_and_tune, install_and_test = commands
    assert install_and_tune.endswith("chunktune tune")
    assert install_and_test in (ROOT / ".ci" / "run").read_text().splitlines()


def test_ci_runs_the_suite_on_the_dependency_floors() -> None:
    """.ci/run runs the suite again in a fresh, git-ignored venv at the lowest direct versions."""
    lines = (ROOT / ".ci" / "run").read_text().splitlines()
    install = next(line for line in lines if "--resolution lowest-direct" in line)
    venv = re.search(r"--python (\S+)", install)
    assert venv and "-e '.[test]'" in install
    # children read their dependencies' bytecode rather than compile them (PYTHONDONTWRITEBYTECODE)
    assert "--compile-bytecode" in install
    removed = next(line for line in lines if line.startswith("rm -rf .venv "))
    assert venv.group(1) in removed.split()
    assert f"{venv.group(1)}/bin/python -m pytest" in lines
    assert f"{venv.group(1)}/" in (ROOT / ".gitignore").read_text().splitlines()


def test_ci_runs_the_suite_on_the_newest_python_where_the_machine_has_it() -> None:
    """.ci/run runs the suite on Python 3.13 when present, from a readable, git-ignored copy."""
    lines = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()]
    assert 'uv venv --python "$newest" .venv-newest' in lines
    assert "uv pip install --python .venv-newest --compile-bytecode -e '.[test]'" in lines
    assert 'env "${newest_env[@]}" .venv-newest/bin/python -m pytest' in lines
    assert 'newest="$PWD/.python-newest/bin/$(basename "$newest")"' in lines
    removed = next(line for line in lines if line.startswith("rm -rf .venv ")).split()
    assert {".venv-newest", ".python-newest"} <= set(removed)
    ignored = (ROOT / ".gitignore").read_text().splitlines()
    assert {".venv-newest/", ".python-newest/"} <= set(ignored)


def test_ci_runs_every_linter_the_readme_names() -> None:
    """.ci/run ends with ruff check, ruff format --check and mypy, as the README says."""
    lines = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()]
    assert "ruff check chunktune tests benchmarks" in lines
    assert "ruff format --check chunktune tests benchmarks" in lines
    assert "mypy" in lines
    said = " ".join(README.split("## What `chunktune tune` shows")[0].split())
    assert "Last, it runs `ruff check`, `ruff format --check` and `mypy`" in said


def test_example_settings_block_loads(tmp_path: Path) -> None:
    """The settings example in the README is valid."""
    import chunktune

    block = re.search(r"```toml\n(.*?)```", README, flags=re.S)
    assert block
    path = tmp_path / "example.toml"
    path.write_text(block.group(1))
    assert chunktune.load_settings(path).active.candidates.strategy == "explicit"


def test_the_settings_table_documents_every_field_at_its_balanced_value() -> None:
    """Every policy and candidate-strategy field is in the README's table, at balanced's value."""
    import tomllib

    import attrs

    from chunktune import Policy
    from chunktune._candidates import STRATEGIES
    from chunktune._config import settings_from_dict

    start = README.index("| field | meaning |")
    table = README[start : README.index("\n\n", start)]
    first_cells = "\n".join(row.split(" | ")[0] for row in table.splitlines())
    shown = dict(re.findall(r"`(?:\[candidates\] )?(\w+) = ([^`]+)`", first_cells))
    named = set(re.findall(r"`(?:\[candidates\] )?(\w+)(?: = [^`]+)?`", table))
    balanced = settings_from_dict({}).policies["balanced"]
    own = {f.name for f in attrs.fields(Policy)} - {"description", "candidates"}
    assert own <= named, own - named
    for strategy in STRATEGIES.values():
        assert {f.name for f in attrs.fields(strategy)} <= named, strategy.strategy
    values = {
        **{name: getattr(balanced, name) for name in own},
        **attrs.asdict(balanced.candidates),
        "strategy": balanced.candidates.strategy,
    }
    for name, text in shown.items():
        if name in values:
            assert tomllib.loads(f"v = {text}")["v"] == values[name], name


def test_the_ranges_of_confirm_share_and_max_candidates_are_the_validators() -> None:
    """README's settings table and chunktune.toml give both ranges as the validators check them."""
    from chunktune import ConfigError, Policy
    from chunktune._candidates import STRATEGIES

    def expected(make: Callable[[], object]) -> str:
        with pytest.raises(ConfigError) as refused:
            make()
        # the range, without a fraction's unit hint
        return str(refused.value).rpartition("; expected ")[2].removesuffix(" (0.03 is 3%)")

    capped = [s for s in STRATEGIES.values() if "max_candidates" in attrs.fields_dict(s)]

    def capped_at_zero(strategy: Callable[..., object]) -> Callable[[], object]:
        return lambda: strategy(max_candidates=0)

    caps = {expected(capped_at_zero(s)) for s in capped}
    assert len(caps) == 1 and len(capped) == len(STRATEGIES) - 1  # all but explicit
    ranges = {
        "confirm_share": expected(lambda: Policy(confirm_share=-1.0)),
        "max_candidates": caps.pop(),
    }
    start = README.index("| field | meaning |")
    rows = README[start : README.index("\n\n", start)].splitlines()
    example = (ROOT / "chunktune.toml").read_text()
    for name, allowed in ranges.items():
        (row,) = [row for row in rows if f"`{name} = " in row]
        assert f"({allowed})" in row, row
        assert re.search(rf"^# {name} = \S+ +# .*: {re.escape(allowed)}$", example, flags=re.M)


def test_the_layout_names_every_module_of_the_package() -> None:
    """The README's layout list names every private module and subpackage, and no other."""
    package = ROOT / "chunktune"
    layout = README[README.index("The code is a public package of private modules") :]
    named = set(re.findall(r"`(_\w+)`", layout))
    modules = {p.stem for p in package.glob("_*.py")} | {
        p.name for p in package.iterdir() if p.is_dir() and p.name.startswith("_")
    }
    modules |= {p.stem for p in (package / "_cli").glob("_*.py")}
    modules -= {"__init__", "__main__", "__pycache__"}
    assert modules <= named, sorted(modules - named)
    assert named <= modules, sorted(named - modules)


def test_the_trace_count_is_the_traces_recorded() -> None:
    """The README counts the batches under benchmarks/traces/ as there are traces there."""
    words = {"five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9}
    said = re.search(r"Traces of (\w+) real batches recorded on this machine", README)
    assert said
    assert words[said.group(1)] == len(list((ROOT / "benchmarks" / "traces").glob("*.json")))


def test_the_later_traces_are_counted_as_recorded() -> None:
    """The README's table of later days has a row per recording folder and counts its traces."""
    later = ROOT / "benchmarks" / "traces-later"
    traces = list(later.rglob("*.json"))
    folders = {"./" if t.parent == later else str(t.parent.relative_to(later)) for t in traces}
    said = re.search(r"(\d+) traces in\s+`benchmarks/traces-later/`, (\w+) recordings", README)
    assert said
    words = {"fifteen": 15, "sixteen": 16, "seventeen": 17, "eighteen": 18, "nineteen": 19}
    assert (int(said.group(1)), words[said.group(2)]) == (len(traces), len(folders))
    rows = re.findall(r"^\| `([^`]+)` \| \d{4}-\d\d-\d\d \|", README, flags=re.M)
    assert sorted(rows) == sorted(folders)
    total = re.search(r"^\| all \((\d+)\) \| +\| (\d+) traces, 10 draws each \|", README, re.M)
    assert total and (int(total.group(1)), int(total.group(2))) == (len(folders), len(traces))


def test_the_lock_wait_rereads_its_holder_as_often_as_said() -> None:
    """The README's interval for reading a lock's holder note again is the code's."""
    from chunktune._lock_wait import RELOOK_S

    said = re.search(r"it reads the note again every\s+(\d+(?:\.\d+)?) s", README)
    assert said and float(said.group(1)) == RELOOK_S


def test_a_lock_wait_is_reported_after_the_second_said() -> None:
    """The README's 'waited a second' before a lock wait is reported is the code's delay."""
    from chunktune._lock_wait import REPORT_AFTER_S

    assert "A resolve that has waited a second for it says so once" in README
    assert REPORT_AFTER_S == 1.0


def test_the_json_keys_listed_are_those_tune_prints() -> None:
    """The README lists exactly the keys of the object `chunktune tune --json` prints."""
    from chunktune import Decision

    start = README.index("`--json` prints only the decision, one JSON object with")
    listed = README[start : README.index(";", start)]
    keys = set(re.findall(r"`(\w+)`", listed))
    printed = Decision(chunk_size=None, native_chunk=1, source="trivial", reason="").to_json()
    assert keys == set(printed)


def test_the_readme_names_every_option_of_tune() -> None:
    """Each option `chunktune tune --help` lists is named in the README (either spelling)."""
    import argparse

    from chunktune._cli import build_parser

    parser = build_parser()
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    tune = commands.choices["tune"]
    spans = re.findall(r"`([^`\n]+)`", README)
    named = {o for span in spans for o in re.findall(r"(?<![\w-])(--?[a-z][a-z-]*)", span)}
    for action in tune._actions:
        if action.option_strings and "--help" not in action.option_strings:
            assert named & set(action.option_strings), action.option_strings


def test_the_notes_of_the_tune_table_are_explained() -> None:
    """Every note the candidate table can show is explained in the README's note item."""
    import io

    from rich.console import Console

    from chunktune._cli._render import candidate_rows, candidate_table

    start = README.index("- **note**:")
    item = README[start : README.index("\n\n", start)]
    explained = set(re.findall(r"`([^`]+)`", item))
    shown: set[str] = set()
    timings = {None: 1.0, 1: 0.9, 2: 1.1, 4: 1.2, 5: 1.0}  # 5: native's size, as seed lists it
    for chunk_size in (None, 1):
        rows = candidate_rows(timings, chunk_size=chunk_size, raced_out=[2])
        out = io.StringIO()
        Console(file=out, width=200).print(candidate_table(rows, native_chunk=5))
        lines = out.getvalue().splitlines()
        column = lines[0].index("note")
        for line in lines[2:]:
            shown |= {note for note in line[column:].strip().split(", ") if note}
    assert shown == {"native", "= native", "<- chosen", "raced out", "contender"}
    assert shown <= explained, shown - explained


def test_the_reasons_quoted_are_those_a_sweep_gives() -> None:
    """The README quotes the slow-pool and noise-gate reasons as the code words them."""
    import math

    from chunktune import Policy
    from chunktune._reasons import too_noisy, too_slow

    text = " ".join(README.split())
    assert too_slow(Policy(), mean_call_s=1.1) in text
    noisy = too_noisy(sigma=0.147 * math.sqrt(2.0), gain=0.02, needed=100, afford=10)
    assert noisy.split("; ")[0] + "; ..." in text


def test_the_typical_pair_reason_quoted_is_the_one_a_kept_native_gives() -> None:
    """Step 5 quotes the plain mean's kept-native reason as the code words it."""
    from chunktune import Policy
    from chunktune._confirm import Confirmation
    from chunktune._reasons import kept

    text = " ".join(README.split())
    held = Confirmation("inconclusive", 64, 0.019, (0.007, 0.031), 0.05, mean_gain=-0.038)
    reason = kept(43, 12, held, Policy())
    assert "in the typical pair but" in reason
    assert f"`... {reason.split('against native ', 1)[1]}`" in text


def test_the_out_of_reach_reason_quoted_is_the_one_a_kept_native_gives() -> None:
    """Step 5 quotes a confirmation stopped once its plan is out of reach as the code words it."""
    from chunktune import Policy
    from chunktune._confirm import Confirmation
    from chunktune._reasons import kept

    text = " ".join(README.split())
    held = Confirmation("inconclusive", 16, -0.005, (-0.029, 0.019), 0.05, out_of_reach=True)
    reason = kept(43, 12, held, Policy())
    assert f"`... {reason.split('against native ', 1)[1]}`" in text


def test_the_one_line_decision_quoted_is_the_one_resolve_writes(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The `[log] stderr` row's example line is, field for field, what resolve writes."""
    import chunktune
    from chunktune._report import report

    text = " ".join(README.split())
    quoted = re.search(r"`(\[chunktune\] chunk_size=[^`]*)`", text)
    assert quoted
    decision = chunktune.Decision(
        chunk_size=8,
        native_chunk=12,
        source="cache",
        reason="REASON",
        key="k" * 32,
        timings={None: 0.0418, 8: 0.0396},
        policy="quick",
    )
    always = chunktune.Settings(
        policies={"balanced": chunktune.Policy()}, log=chunktune.LogSettings(stderr="always")
    )
    report(decision, always)
    assert capsys.readouterr().err.strip() == quoted.group(1)


def test_the_hard_limit_row_states_its_rule_against_the_budget() -> None:
    """The README's hard_limit_s row says what Policy enforces: no less than time_budget_s."""
    from chunktune import ConfigError, Policy

    row = next(line for line in README.splitlines() if line.startswith("| `hard_limit_s`"))
    assert "at least `time_budget_s`" in row
    with pytest.raises(ConfigError, match="expected hard_limit_s >= time_budget_s"):
        Policy(hard_limit_s=1.0, time_budget_s=2.0)


def test_manual_looks_up_no_policy_as_said(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Under manual, no settings file is read and an unknown policy name is no error."""
    import chunktune
    from chunktune.sim import SimulatedWorkload

    said = "under `manual`, no settings file is read and an unknown name is no error"
    assert said in " ".join(README.split())
    monkeypatch.setenv("CHUNKTUNE_CONFIG", str(tmp_path / "missing.toml"))  # an error if read
    w = SimulatedWorkload.from_layout("uniform", num_envs=64, nthread=2)
    d = chunktune.resolve_sync(w, manual=3, policy="no-such-policy")
    assert (d.chunk_size, d.source, w.calls) == (3, "manual", 0)


def _constant(module: str, name: str) -> float:
    """``chunktune.<module>.<name>``, a number."""
    import importlib

    value = getattr(importlib.import_module(f"chunktune.{module}"), name)
    assert isinstance(value, int | float)
    return float(value)


@pytest.mark.parametrize(
    ("said", "module", "name", "scale"),
    [
        pytest.param(r"changes nothing for (\d+) s, plus a second per MB", "_cache_lock",
                     "WRITE_STALL_S", 1.0, id="write-stall"),
        pytest.param(r"plus a second per (MB)", "_cache_lock", "WRITE_BYTES_PER_S", 1e6,
                     id="write-per-mb"),
        pytest.param(r"give its holder (\d+(?:\.\d+)?) s to move", "_cache_lock", "WRITE_LOOK_S",
                     1.0, id="write-look"),
        pytest.param(r"older than (\d+) minutes\)", "_atomic", "STALE_TEMP_S", 60.0,
                     id="stale-temp"),
        pytest.param(r"a try in flight for less than (\d+) s was only slow", "_giving_up",
                     "STALLED_TRY_S", 1.0, id="stalled-try"),
        pytest.param(r"nests deeper than (\d+) levels", "_config", "MAX_DEPTH", 1.0,
                     id="settings-depth"),
        pytest.param(r"holds more than (\d+) MiB is refused", "_reading", "MAX_SETTINGS_BYTES",
                     2**20, id="settings-size"),
        pytest.param(r"A trace file of more than (\d+) MiB", "_reading", "MAX_TRACE_BYTES",
                     2**20, id="trace-size"),
        pytest.param(r"refuses a file of more than (\d+) MiB", "_reading", "MAX_CACHE_BYTES",
                     2**20, id="cache-size"),
        pytest.param(r"nested more than (\d+) levels deep", "_reading", "MAX_NESTING", 1.0,
                     id="cache-depth"),
        pytest.param(r"twice `time_budget_s` plus (\d+) s", "compat", "LOOP_GRACE_S", 1.0,
                     id="compat-grace"),
        pytest.param(r"given up after (\d+) s a call", "_ray_calls", "CALL_TIMEOUT_S", 1.0,
                     id="registry-call"),
        pytest.param(r"logger every (\d+) s of that wait", "_threads", "SETTLE_WARN_S", 1.0,
                     id="settle-warning"),
        pytest.param(r"a round every (\d+) s at most", "_cli._progress", "_ROUND_LINE_EVERY_S",
                     1.0, id="progress-round-line"),
    ],
)  # fmt: skip
def test_the_limits_the_readme_states_are_the_code_s(
    said: str, module: str, name: str, scale: float
) -> None:
    """Each limit the README gives in numbers is the constant the code uses."""
    found = re.search(said, " ".join(README.split()))
    assert found, said
    number = 1.0 if found.group(1) == "MB" else float(found.group(1))
    assert number * scale == _constant(module, name)


def test_the_example_settings_give_the_rule_auto_follows_for_stderr() -> None:
    """chunktune.toml's [log] comment states LogSettings' rule: stderr while INFO would not show."""
    text = (ROOT / "chunktune.toml").read_text()
    comment = text[text.index("[log]") : text.index("stderr =")]
    assert "logger would not show INFO" in " ".join(comment.replace("#", " ").split())


def test_the_shared_preset_keeps_every_size_within_one_of_native() -> None:
    """The `shared` preset, which chunktune.toml points to, measures no size over native + 1."""
    import chunktune
    from chunktune._candidates import largest_chunk
    from chunktune._workload import native_chunk

    assert 'policy = "shared"' in (ROOT / "chunktune.toml").read_text()
    policy = chunktune.load_settings(None).get_policy("shared")
    for num_envs, nthread in [(256, 2), (192, 2), (1000, 24), (4096, 16), (96, 8), (32768, 128)]:
        sizes = policy.candidates.propose(num_envs, nthread)
        largest = largest_chunk(policy.candidates, num_envs, nthread)
        native = native_chunk(num_envs, nthread)
        assert sizes and max(sizes) <= largest <= native + 1


def test_the_example_settings_name_every_shipped_preset() -> None:
    """chunktune.toml's comment on `policy` lists exactly the presets that ship."""
    from chunktune._config import preset_names

    text = (ROOT / "chunktune.toml").read_text()
    comment = " ".join(text[: text.index("policy =")].replace("#", " ").split())
    listed = re.search(r"a shipped preset \(([^)]*)\)", comment)
    assert listed is not None
    assert sorted(listed.group(1).split(", ")) == preset_names()


def test_the_record_progress_interval_is_the_codes() -> None:
    """The README's interval between a recording's round lines off a terminal is the code's."""
    from chunktune._cli._record_cmd import PLAIN_EVERY_S

    said = re.search(r"a line\s+for\s+each\s+finished\s+round, at most one every (\d+) s", README)
    assert said and float(said.group(1)) == PLAIN_EVERY_S


def _opening(call_s: float) -> int:
    """How many sizes balanced's opening keeps on the demo's batch (256 envs, 2 threads) when
    one call takes ``call_s`` seconds: its last ``candidates`` event, native left out."""
    import chunktune
    from chunktune.sim import SimulatedWorkload

    unit = SimulatedWorkload.from_layout("uniform", num_envs=256, nthread=2, mean_s=1e-3)
    scale = call_s / unit.true_time(None)
    w = SimulatedWorkload.from_layout("uniform", num_envs=256, nthread=2, mean_s=1e-3 * scale)
    events: list[chunktune.ProgressEvent] = []
    no_cache = chunktune.Settings(
        policies=chunktune.load_settings().policies,
        cache=chunktune.CacheSettings(enabled=False),
    )
    chunktune.resolve_sync(w, settings=no_cache, policy="balanced", on_progress=events.append)
    opened = [e.candidates for e in events if e.kind == "candidates"]
    return len(opened[-1]) - 1


def test_the_opening_field_is_as_large_as_said_for_a_call_that_long() -> None:
    """The README's counts of sizes a slow pool's opening keeps are balanced's at those calls."""
    words = {"three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "ten": 10}
    text = " ".join(README.split())
    said: list[tuple[float, int]] = []
    example = re.search(
        r"one call took about ([\d.]+) s, so the 10 s budget could judge (\w+)", text
    )
    other = re.search(r"a call of ([\d.]+) s keeps (\w+)\)", text)
    spread = re.search(
        r"calls of (\d+), (\d+) and (\d+) ms open (\d+), (\d+) and (\d+) candidates, "
        r"and calls under (\d+) ms the whole field",
        text,
    )
    assert example and other and spread
    for found in (example, other):
        said.append((float(found.group(1)), words[found.group(2)]))
    ms, counts = spread.groups()[:3], spread.groups()[3:6]
    said += [(int(t) / 1000, int(n)) for t, n in zip(ms, counts, strict=True)]
    said.append((int(spread.group(7)) / 1000, 10))  # the whole field: balanced's 10 sizes
    assert [(call_s, _opening(call_s)) for call_s, _ in said] == said


@functools.cache
def _options_of(script: Path) -> frozenset[str]:
    """The ``--options`` a benchmark script's parser declares, in it or in the benchmark
    modules it imports (``novel.py`` takes ``unseen.py``'s); each script is read once."""
    import ast

    found: set[str] = {"--help"}
    tree = ast.parse(script.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "add_argument":
            found |= {
                a.value
                for a in node.args
                if isinstance(a, ast.Constant)
                and isinstance(a.value, str)
                and a.value.startswith("--")
            }
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            local = script.parent / f"{node.module}.py"
            if local.exists() and local != script:
                found |= _options_of(local)
    return frozenset(found)


def _benchmark_commands() -> list[tuple[str, str, str]]:
    """Every ``python benchmarks/NAME.py ...`` command the two READMEs quote: (readme, script,
    arguments), from code blocks and from inline code (``NAME.py ...`` too), across line
    breaks."""
    found = []
    for name in ("README.md", "benchmarks/README.md"):
        text = (ROOT / name).read_text()
        for block in re.findall(r"```\w*\n(.*?)```", text, flags=re.S):
            for line in block.splitlines():
                command = re.match(r"python (benchmarks/\w+\.py)(.*)", line.split("#")[0])
                if command:
                    found.append((name, command.group(1), command.group(2)))
        prose = " ".join(re.sub(r"```.*?```", "", text, flags=re.S).split())
        for script, arguments in re.findall(
            r"`(?:python )?(?:benchmarks/)?(\w+\.py)([^`]*)`", prose
        ):
            found.append((name, f"benchmarks/{script}", arguments))
    return found


def test_the_benchmark_commands_quoted_name_options_their_scripts_take() -> None:
    """Each benchmark command the READMEs quote names a script there and only its options."""
    commands = _benchmark_commands()
    assert len(commands) >= 30
    for readme, script, arguments in commands:
        path = ROOT / script
        assert path.is_file(), (readme, script)
        named = set(re.findall(r"(?<![\w-])(--[a-z][a-z-]*)", arguments))
        assert named <= _options_of(path), (readme, script, named - _options_of(path))


def test_the_live_tunes_command_re_measures_in_the_rounds_said() -> None:
    """The README's live tunes are re-measured in the rounds its quoted command asks for."""
    text = " ".join(README.split())
    said = re.search(
        r"re-measured against native in (\d+) paired rounds[^`]*`(python benchmarks/run\.py[^`]*)`",
        text,
    )
    assert said
    rounds = re.search(r"--rounds (\d+)", said.group(2))
    assert rounds and rounds.group(1) == said.group(1)


def test_the_ray_start_labels_example_is_in_the_form_ray_parses_without_a_warning() -> None:
    """The README's `ray start --labels` is in Ray's key=value form and names chunktune's label."""
    import chunktune.ray

    labels = pytest.importorskip("ray._private.label_utils")
    said = re.search(r"`ray start --labels\s+([^`]+)`", README)
    assert said
    parsed = labels.parse_node_labels_string(said.group(1))  # JSON raises here, then warns
    assert list(parsed) == [chunktune.ray.NODE_TYPE_LABEL]


@pytest.mark.mujoco
@pytest.mark.parametrize(
    ("shown", "name"),
    [
        pytest.param("RolloutWorkload(", "RolloutWorkload", id="RolloutWorkload"),
        pytest.param("chunktune.demo_workload(", "demo_workload", id="demo_workload"),
    ],
)
def test_the_signatures_written_out_are_the_code_s(shown: str, name: str) -> None:
    """A call the README writes out with every keyword has the function's names and defaults."""
    import inspect

    import chunktune

    text = " ".join(README.split())
    start = text.index(f"`{shown}")
    written = text[start + len(shown) + 1 : text.index(")`", start)]
    said = {}
    for part in written.split(", "):
        key, _, default = part.partition("=")
        said[key] = default or None
    params = inspect.signature(getattr(chunktune, name)).parameters
    actual = {
        key: None if p.default is inspect.Parameter.empty else repr(p.default)
        for key, p in params.items()
    }
    assert said == actual


def test_the_decision_paragraph_names_every_public_attribute() -> None:
    """Each field and property of Decision and MachineLoad is named where the README lists them."""
    from chunktune import Decision, MachineLoad

    start = README.index("A `Decision` holds")
    paragraph = README[start : README.index("\n\n", start)]
    named = set(re.findall(r"`(\w+)(?:\(\))?`", paragraph))
    for record in (Decision, MachineLoad):
        public = {n for n in dir(record) if not n.startswith("_")}
        assert public <= named, (record.__name__, public - named)


def test_the_ray_settings_block_loads_at_ray_settings_defaults(tmp_path: Path) -> None:
    """The README's `[ray]` TOML block is valid settings, and each value it shows is the default."""
    import attrs

    import chunktune

    blocks = re.findall(r"```toml\n(.*?)```", README, flags=re.S)
    ray_block = next(block for block in blocks if block.startswith("[ray]"))
    path = tmp_path / "ray.toml"
    path.write_text(ray_block)
    loaded = chunktune.load_settings(path).ray
    assert loaded == chunktune.RaySettings()
    shown = set(re.findall(r"^(\w+) =", ray_block, flags=re.M))
    assert shown == {f.name for f in attrs.fields(chunktune.RaySettings)}


def test_the_ray_snippet_calls_chunktune_ray_as_it_is() -> None:
    """The README's Ray snippet compiles and calls chunktune.ray's functions with their keywords."""
    import ast
    import inspect

    import chunktune.ray

    blocks = re.findall(r"```py\n(.*?)```", README, flags=re.S)
    assert len(blocks) == 1
    tree = ast.parse(blocks[0])
    called = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            owner = ast.unparse(node.func.value)
            if owner == "chunktune.ray":
                called.append((node.func.attr, [k.arg for k in node.keywords]))
    assert {name for name, _ in called} == {"tune_cluster", "resolve_sync"}
    for name, keywords in called:
        assert name in chunktune.ray.__all__
        assert set(keywords) <= set(inspect.signature(getattr(chunktune.ray, name)).parameters)
    comment = re.search(r"await (chunktune\.ray\.\w+)\(", blocks[0])
    assert comment and comment.group(1).split(".")[-1] in chunktune.ray.__all__


def test_the_tune_transcript_is_what_tune_prints_for_its_decision() -> None:
    """The README's `chunktune tune` transcript is, line for line, what tune prints for it."""
    import io

    import chunktune
    from chunktune._cli._common import console_on
    from chunktune._cli._tune_cmd import _print_decision

    block = re.search(r"```text\n\$ chunktune tune[^\n]*\n(.*?)```", README, flags=re.S)
    assert block
    header, *shown = block.group(1).splitlines()
    rows = {}
    for line in shown[2:]:
        cells = re.match(r"\s*(native \(=12\)|\d+)\s+\d+\s+([\d.]+)\s+(\d+)\s", line)
        if not cells:
            break
        chunk = None if cells.group(1).startswith("native") else int(cells.group(1))
        rows[chunk] = (float(cells.group(2)), int(cells.group(3)))
    reason = shown[len(rows) + 3]
    footer = re.search(
        r"probe time ([\d.]+) s · load ([\d.]+) on 2 CPUs · cache key ([0-9a-f]{32}\.[0-9a-f]{12})",
        shown[-1],
    )
    assert footer
    probe, load, key = footer.groups()
    native_s = 0.1204  # native's seconds: the figure the table shows rounded, as 120
    decision = chunktune.Decision(
        chunk_size=None,
        native_chunk=12,
        source="benchmark",
        reason=reason,
        key=key,  # whole, <job>.<policy>, as the cache stores it
        timings={c: native_s * ratio for c, (ratio, _) in rows.items()},
        samples={c: n for c, (_, n) in rows.items()},
        probe_seconds=float(probe),
        policy="balanced",
        load=chunktune.MachineLoad(average=float(load), cpus=2),
    )
    out = io.StringIO()
    _print_decision(console_on(out), decision, header)
    assert [line.rstrip() for line in out.getvalue().splitlines()] == [
        line.rstrip() for line in block.group(1).splitlines()
    ]


def test_the_tune_transcript_s_cache_key_names_the_balanced_policy_it_ran_under() -> None:
    """The transcript's cache key ends in the `balanced` preset's identity, as `tune` prints it."""
    import chunktune

    block = re.search(r"```text\n\$ chunktune tune[^\n]*\n(.*?)```", README, flags=re.S)
    assert block and "; policy balanced\n" in block.group(1)
    key = re.search(r"cache key ([0-9a-f]{32})\.([0-9a-f]{12})", block.group(1))
    assert key
    balanced = chunktune.load_settings().policies["balanced"]
    assert key.group(2) == balanced.fingerprint()


def test_every_concrete_chunktune_command_quoted_parses() -> None:
    """Each `chunktune ...` command the README quotes without placeholders is one the CLI takes."""
    import shlex

    from chunktune._cli import build_parser

    quoted = re.findall(r"`(chunktune [^`]+)`", README)
    for block in re.findall(r"```(?:sh|text)\n(.*?)```", README, flags=re.S):
        quoted += re.findall(r"^\$? ?(chunktune [^\n#]+)", block, flags=re.M)
    concrete = [c.strip() for c in quoted if not re.search(r"[|\[\]]|\.\.\.|\b[A-Z]{2,}\b", c)]
    assert "chunktune record --num-envs 256 --nthread 2 --rounds 24 -o demo.json" in concrete
    parser = build_parser()
    for command in concrete:
        args = shlex.split(command)[1:]
        if len(args) < 2 or args[-1] == "--help":
            continue  # a command named in prose (`chunktune record` measures ...), or help
        parser.parse_args(args)  # a bad option or value exits 2 here


def _preset_row(name: str) -> str:
    """The row of the README's preset table that describes ``name``."""
    start = README.index("| policy | what it does |")
    rows = README[start : README.index("\n\n", start)].splitlines()
    (row,) = [row for row in rows if row.startswith(f"| `{name}`")]
    return row


def _said(pattern: str, text: str) -> tuple[str, ...]:
    found = re.search(pattern, text)
    assert found, (pattern, text)
    return found.groups()


def test_the_preset_table_gives_each_preset_s_own_numbers() -> None:
    """Each number the README's preset table gives is that preset's setting, as shipped."""
    import chunktune

    settings = chunktune.load_settings(None)

    def policy(name: str) -> chunktune.Policy:
        return settings.get_policy(name)

    def max_candidates(p: chunktune.Policy) -> int:
        assert not isinstance(p.candidates, chunktune.ExplicitCandidates)  # a capped search
        return p.candidates.max_candidates

    balanced, quick, thorough = policy("balanced"), policy("quick"), policy("thorough")
    seed, patient, shared = policy("seed"), policy("patient"), policy("shared")
    row = _preset_row("balanced")
    sizes, refinements = _said(r"over up to (\d+) sizes.*?(\d+) refinements", row)
    pairs, margin = _said(r"up to (\d+) fresh pairs.*?gain of (\d+)% or more", row)
    (budget,) = _said(r"; (\d+) s budget", row)
    assert max_candidates(balanced) == int(sizes)
    assert balanced.refine_steps == int(refinements)
    assert (balanced.confirm_max_pairs, balanced.margin) == (int(pairs), int(margin) / 100)
    assert balanced.time_budget_s == float(budget)
    row = _preset_row("quick")
    sizes, rounds, refinements = _said(r"up to (\d+) sizes, (\d+) rounds, (\d+) refinements", row)
    pairs, budget = _said(r"at most (\d+) confirmation pairs; (\d+) s budget", row)
    assert (max_candidates(quick), quick.max_rounds) == (int(sizes), int(rounds))
    assert (quick.refine_steps, quick.confirm_max_pairs) == (int(refinements), int(pairs))
    assert quick.time_budget_s == float(budget)
    row = _preset_row("thorough")
    sizes, rounds, refinements, top = _said(
        r"up to (\d+) sizes, up to (\d+) rounds, (\d+) refinements of the best (\d+)", row
    )
    pairs, budget = _said(r"at most (\d+) confirmation pairs; (\d+) s budget", row)
    assert (max_candidates(thorough), thorough.max_rounds) == (int(sizes), int(rounds))
    assert (thorough.refine_steps, thorough.refine_top) == (int(refinements), int(top))
    assert (thorough.confirm_max_pairs, thorough.time_budget_s) == (int(pairs), float(budget))
    row = _preset_row("seed")
    warmups, reps = _said(r"(\d+) warm-ups and (\d+) repetitions", row)
    margin, ties, budget = _said(r"margin (\d+)%, ties within (\d+)%.*?(\d+) s budget", row)
    assert (seed.warmup, seed.min_rounds, seed.max_rounds) == (int(warmups), int(reps), int(reps))
    assert (seed.estimator, seed.tie_break, seed.candidates.strategy) == (
        "min", "toward_upper", "seed",
    )  # fmt: skip
    assert (seed.margin, seed.tie_tol) == (int(margin) / 100, int(ties) / 100)
    assert seed.time_budget_s == float(budget)
    start, end = _said(r"stretches from (\d+) s up to (\d+) s", _preset_row("patient"))
    assert patient.extend_budget and patient.hard_limit_s is not None
    assert (patient.time_budget_s, 0.9 * patient.hard_limit_s) == (float(start), float(end))
    floor, tie_break = _said(r'`min_chunks_per_thread = (\d+)`.*`tie_break = "(\w+)"`',
                             _preset_row("shared"))  # fmt: skip
    assert isinstance(shared.candidates, chunktune.BalancedCandidates)
    assert (shared.candidates.min_chunks_per_thread, shared.tie_break) == (int(floor), tie_break)
    assert not policy("off").enabled


def test_the_demo_s_sizes_listed_are_balanced_s_for_its_batch() -> None:
    """The ten sizes the README lists for the demo's 256 envs on 2 threads are balanced's."""
    import chunktune

    text = " ".join(README.split())
    count, listed = _said(r"could judge \w+ of the (\w+) sizes listed \(([\d, ]+)\)", text)
    sizes = [int(size) for size in listed.split(", ")]
    policy = chunktune.load_settings(None).get_policy("balanced")
    assert policy.candidates.propose(256, 2) == sizes
    assert {"ten": 10}[count] == len(sizes)


def test_the_misspelled_key_quoted_is_the_error_a_settings_file_gets(tmp_path: Path) -> None:
    """The README's example of a settings error is what loading that misspelling reports."""
    import chunktune

    (quoted,) = _said(r"`(policies\.mine\.margn: [^`]*)`", " ".join(README.split()))
    path = tmp_path / "chunktune.toml"
    path.write_text("[policies.mine]\nmargn = 0.03\n")
    with pytest.raises(chunktune.ConfigError) as refused:
        chunktune.load_settings(path)
    assert str(refused.value) == f"invalid settings in {path}: {quoted}"


def test_the_looks_bounds_are_the_z_said() -> None:
    """Step 5's bounds for the looks of a 64-pair plan are the test's, at balanced's alpha."""
    import chunktune
    from chunktune._confirm import look_points, plan_bounds

    plan, bounds, at = _said(
        r"for a plan of (\d+) pairs the bounds are z = ([\d., and]+) at ([\d, and]+) pairs",
        " ".join(README.split()),
    )
    policy = chunktune.load_settings(None).get_policy("balanced")
    looks = look_points(policy.confirm_min_pairs, int(plan))
    assert re.split(r", | and ", at) == [str(n) for n in looks]
    z = plan_bounds(policy.confirm_alpha, policy.confirm_min_pairs, int(plan)).all_z(
        looks[:-1], looks[-1], last=True
    )
    assert re.split(r", | and ", bounds) == [f"{b:.2f}" for b in z]


def test_the_description_quoted_for_a_policy_without_one_is_the_one_it_gets(
    tmp_path: Path,
) -> None:
    """The fallback description chunktune.toml and the README quote is what `mine` gets."""
    import chunktune

    example = (ROOT / "chunktune.toml").read_text()
    comment = " ".join(example[example.index("[policies.mine]") :].replace("#", " ").split())
    (quoted,) = _said(r'\(without it: "([^"]+)"\)', comment)
    path = tmp_path / "chunktune.toml"
    path.write_text(re.sub(r"(?m)^description = .*$", "", example))
    assert chunktune.load_settings(path).get_policy("mine").description == quoted
    (elided,) = _said(r'\(else\s+#\s+"([^"]+)"\)', README)
    head, tail = elided.split(" ... ")
    assert quoted.startswith(head) and quoted.endswith(tail)


def test_the_exit_statuses_tabled_are_the_command_line_s() -> None:
    """The README's exit-status table lists every status the CLI has, SIGTERM's as 143."""
    from chunktune._cli import _common

    start = README.index("| status | meaning |")
    table = README[start : README.index("\n\n", start)]
    rows = dict(re.findall(r"^\| (\d+) \| (.*) \|$", table, flags=re.M))
    codes = {getattr(_common, name) for name in _common.__all__ if name.startswith("EXIT_")}
    assert {int(code) for code in rows} == codes
    (terminated,) = [code for code, meaning in rows.items() if "SIGTERM" in meaning]
    (interrupted,) = [code for code, meaning in rows.items() if "(Ctrl-C)" in meaning]
    assert (int(terminated), int(interrupted)) == (
        _common.EXIT_TERMINATED,
        _common.EXIT_INTERRUPTED,
    )


@pytest.mark.parametrize(
    ("written", "pattern"),
    [
        pytest.param("margin = 0.03\n", r"\(`(margin: unknown key; [^`]*)`", id="top-level"),
        pytest.param(
            '[policies.mine]\nextends = "quick"\n[policies.mine.candidates]\nsizes = [3]\n',
            r"\(`(a key of strategy \"explicit\" [^`]*)`\)",
            id="sizes-under-balanced",
        ),
        pytest.param(
            "[policies.mine]\nmargin = 3\n", r"is told `(expected a fraction [^`]*)`", id="3"
        ),
        pytest.param(
            '[policies.mine]\nmargin = "3%"\n',
            r"is told `(expected a fraction [^`]*)`",
            id="3%",
        ),
        pytest.param(
            "[policies.mine]\nconfirm_share = 95\n",
            r"`confirm_share = 95` is told only the unit, `(\([^`]*\))`",
            id="share-95",
        ),
        pytest.param(
            '[policies.mine]\nextends = "patient"\ntime_budget_s = 38\n',
            r"`time_budget_s = 38`: `([^`]*)`",
            id="inherited",
        ),
    ],
)
def test_the_settings_mistakes_quoted_are_what_loading_them_says(
    tmp_path: Path, written: str, pattern: str
) -> None:
    """Each settings error the README quotes is what loading that mistake reports."""
    import chunktune

    (quoted,) = _said(pattern, " ".join(README.split()))
    path = tmp_path / "chunktune.toml"
    path.write_text(written)
    with pytest.raises(chunktune.ConfigError) as refused:
        chunktune.load_settings(path)
    said = str(refused.value)
    assert said.startswith(f"invalid settings in {path}: ") and quoted in said
    if "share" in written:
        assert said.endswith(quoted)


def test_the_settings_paths_quoted_spell_keys_as_loading_them_says(tmp_path: Path) -> None:
    """The README's key paths, quoted and cut, are those loading such keys reports."""
    import chunktune

    text = " ".join(README.split())
    dotted, spaced = _said(r"TOML's escapes \(`([^`]*)`, `([^`]*)`\)", text)
    (cut_at,) = _said(r"a key or a policy's name of more than (\d+) characters is cut", text)
    long_name = "p" * int(cut_at) + "q"
    path = tmp_path / "chunktune.toml"
    path.write_text(
        '[policies."my.policy"]\nmargn = 0.03\n[policies.mine]\n"a b" = 1\n'
        f"[policies.{long_name}]\nmargn = 0.03\n"
    )
    with pytest.raises(chunktune.ConfigError) as refused:
        chunktune.load_settings(path)
    paths = {p.partition(": unknown key")[0] for p in refused.value.problems}
    half = (int(cut_at) - 3) // 2
    cut = f'policies."{long_name[:half]}...{long_name[-(int(cut_at) - 3 - half) :]}".margn'
    assert paths == {dotted, spaced, cut}


def test_a_missing_settings_file_is_told_as_quoted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A named settings file that does not exist gets the README's message, by name or by $."""
    import chunktune

    text = " ".join(README.split())
    (missing,) = _said(r"\(`(settings file FILE: [^`]*)`", text)
    (by_variable,) = _said(r"or `(FILE \(named by \$CHUNKTUNE_CONFIG\))`", text)
    path = tmp_path / "nope.toml"
    with pytest.raises(chunktune.ConfigError) as refused:
        chunktune.load_settings(path)
    assert str(refused.value) == missing.replace("FILE", str(path))
    monkeypatch.setenv("CHUNKTUNE_CONFIG", str(path))
    monkeypatch.chdir(tmp_path)
    with pytest.raises(chunktune.ConfigError) as refused:
        chunktune.load_settings(None)
    assert str(refused.value) == missing.replace("FILE", by_variable.replace("FILE", str(path)))


def test_the_lengths_cache_clear_and_the_host_column_take_are_the_code_s() -> None:
    """`clear KEY`'s shortest prefix and the host column's width are the code's numbers."""
    from chunktune._cli._entry_keys import MIN_CLEAR_CHARS
    from chunktune._cli._list_cmd import _HOST_CHARS

    text = " ".join(README.split())
    (prefix,) = _said(r"the whole key, or its first (\d+) or more characters", text)
    (host,) = _said(r"up to its first dot \((\d+) characters at most", text)
    assert (int(prefix), int(host)) == (MIN_CLEAR_CHARS, _HOST_CHARS)


def test_the_older_tuner_s_cache_variables_named_are_those_compat_heeds() -> None:
    """Where the README names the older tuner's cache file, it names both variables for it."""
    from chunktune._older_cache import OLDER_CACHE_VARIABLES

    text = " ".join(README.split())
    places = re.findall(r"`~/\.cache/unisim/chunk_size\.json`([^)]*)\)", text)
    assert places
    for place in places:
        assert tuple(re.findall(r"`\$(\w+)`", place)) == OLDER_CACHE_VARIABLES


def test_what_list_json_leaves_null_for_an_older_tuner_s_entry_is_as_said(
    isolated: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`cache list --json` of an older tuner's entry: the fields said null, dated by its file."""
    import datetime
    import json
    import os

    from chunktune._cli import main

    text = " ".join(README.split())
    (nulls, inner, dated) = _said(
        r"is `null` \(an older tuner's entry's ([^;]*) fields, and those of its `(\w+)` "
        r"object, say; its `(\w+)` is when\s+the file it came from was last written\)",
        text,
    )
    assert "`0.0` for native, and for an entry that records no gain, as an older tuner's" in text
    old = isolated / "chunk_size.json"
    old.write_text(json.dumps({"k": {"chunk_size": 8, "per_candidate_ms": {"None": 2.0}}}))
    os.utime(old, (1_790_000_000, 1_790_000_000))
    assert main(["cache", "import", str(old)]) == 0
    capsys.readouterr()
    assert main(["cache", "list", "--json"]) == 0
    (listed,) = json.loads(capsys.readouterr().out)
    for field in re.findall(r"`(\w+)`", nulls):
        assert listed[field] is None, (field, listed[field])
    assert isinstance(listed[inner], dict) and set(listed[inner].values()) == {None}
    assert listed["chunk_size"] == 8 and listed["gain"] == 0.0  # it records no gain
    stamp = datetime.datetime.fromisoformat(listed[dated])
    assert stamp.timestamp() == 1_790_000_000


def test_the_performance_span_covers_every_session_its_figures_cite() -> None:
    """The Performance section's 'sessions 1-N' reaches the latest session its figures name."""
    start = README.index("## Performance")
    section = " ".join(README[start : README.index("\n## ", start + 1)].split())
    (last,) = _said(r"Measured from \S+ to \S+ \(sessions 1-(\d+)\)", section)
    cited = [int(n) for n in re.findall(r"sessions? (\d+)", section)]
    assert max(cited) <= int(last), (max(cited), last)


def test_the_out_of_reach_chance_said_is_the_confirmation_s() -> None:
    """Step 5's chance under which a plan is out of reach is 1 - Phi(FUTILITY_Z)."""
    from chunktune._confirm import FUTILITY_Z
    from chunktune._stats import normal_cdf

    (percent,) = _said(r"would have under a (\d+)% chance of confirming", " ".join(README.split()))
    assert int(percent) == round(100 * (1 - normal_cdf(FUTILITY_Z)))


def test_the_exit_status_table_names_every_cause_the_help_names() -> None:
    """Each cause of exit 1 and 2 that `chunktune --help` lists is in the README's table."""
    from chunktune._cli import _MAIN_EPILOG

    def plain(text: str) -> str:
        return " ".join(text.replace("`", "").replace("its signature", "signature").split())

    help_text = plain(_MAIN_EPILOG)
    rows = {
        line.split("|")[1].strip(): plain(line.split("|")[2])
        for line in README.splitlines()
        if re.match(r"\| [12] \|", line)
    }
    causes = {
        "1": re.search(r"\b1 no measured decision.*?\((.*?)\); 2 ", help_text),
        "2": re.search(r"; 2 (.*?); 130 ", help_text),
    }
    for code, found in causes.items():
        assert found, code
        for cause in re.split(r", or |, | or ", found.group(1)):
            assert cause.strip() in rows[code], (code, cause)


def test_the_readme_names_every_error_a_caller_may_catch_with_its_builtin() -> None:
    """Each exported ChunktuneError subclass is in the README's errors table, with its built-in."""
    import chunktune

    rows = dict(re.findall(r"^\| `(\w+)` \(`(\w+)`\) \|", README, flags=re.M))
    for name in chunktune.__all__:
        error = getattr(chunktune, name)
        if isinstance(error, type) and issubclass(error, chunktune.ChunktuneError):
            if error is chunktune.ChunktuneError:
                continue
            builtin = [b for b in error.__bases__ if b is not chunktune.ChunktuneError]
            assert rows.get(name) == builtin[0].__name__, name


def test_every_chunktune_name_the_readme_gives_a_caller_is_in_all() -> None:
    """Each `chunktune.X` the README names (not a submodule) is public: in chunktune.__all__."""
    import importlib.util

    import chunktune

    # chunktune.toml is the settings file's name, not a Python name
    named = set(re.findall(r"`chunktune\.(\w+)`", README)) - {"toml"}
    assert {"CandidateStrategy", "ProgressCallback"} <= named
    for name in named:
        if importlib.util.find_spec(f"chunktune.{name}") is None:
            assert name in chunktune.__all__, name
