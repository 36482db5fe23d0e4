"""The command line: ``chunktune tune|cache|policy``.

``main(argv) -> int`` never raises for a problem a person can fix: a
:class:`ChunktuneError` becomes ``chunktune: error: <message>`` on stderr and exit
code 2, Ctrl-C during a sweep exit code 130. Results go to stdout, progress and
warnings to stderr, so ``chunktune tune --json`` prints nothing but the decision.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import logging
import math
import sys
import time
import tomllib
from collections.abc import Callable, Iterator, Sequence
from importlib import metadata
from pathlib import Path
from types import TracebackType
from typing import Any, TextIO

import anyio
import filelock
from rich import box
from rich.console import Console
from rich.progress import (
    BarColumn,
    Progress,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Table

from ._cache import (
    LEGACY_PREFIX,
    CacheEntry,
    DecisionCache,
    read_cache_file,
    write_cache_file,
)
from ._config import dump_policy, load_settings, preset_names
from ._decision import Decision
from ._errors import CacheError, ChunktuneError, ConfigError, InvalidArgumentError
from ._events import ProgressEvent
from ._fingerprint import mujoco_version, usable_cpus
from ._render import (
    candidate_rows,
    candidate_table,
    chunk_label,
    entry_age,
    entry_table,
    model_summary,
    plot_formats,
    write_plot,
)
from ._resolve import cache_for, resolve, sweep_lock_path
from ._settings import Settings
from ._workload import Workload

__all__ = ["main"]

EXIT_OK = 0
EXIT_WORKLOAD_FAILED = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130
ENVS_PER_THREAD = 128  # the default batch: 128 envs per worker, as trainers size theirs
PLOT_HINT = "--plot needs matplotlib: pip install 'chunktune[plot]'"

logger = logging.getLogger("chunktune")


def _version() -> str:
    try:
        return metadata.version("chunktune")
    except metadata.PackageNotFoundError:
        return "0+unknown"


# ---------------------------------------------------------------- output helpers


def _console(file: TextIO) -> Console:
    """A console on ``file``; off a terminal, no colour and no wrapping of long lines."""
    console = Console(file=file, highlight=False, markup=False, emoji=False)
    if not console.is_terminal:
        console = Console(
            file=file, highlight=False, markup=False, emoji=False, width=160, no_color=True
        )
    return console


def _say(message: str) -> None:
    """One line of progress or information on stderr."""
    print(f"chunktune: {message}", file=sys.stderr, flush=True)


def _warn(message: str) -> None:
    print(f"chunktune: warning: {message}", file=sys.stderr, flush=True)


def _error(message: str) -> None:
    print(f"chunktune: error: {message}", file=sys.stderr, flush=True)


@contextlib.contextmanager
def _log_to_stderr() -> Iterator[None]:
    """Show chunktune's warnings (cache moved aside, ...) as plain lines on stderr.

    The logger is set to INFO so that ``resolve`` sees logging configured and does
    not print its own one-line report: the CLI draws the decision itself.
    """
    handler = logging.StreamHandler(sys.stderr)
    handler.setLevel(logging.WARNING)
    handler.setFormatter(logging.Formatter("%(message)s"))
    old_level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(old_level)


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be an integer >= 1, got {value}")
    return value


def _settings(args: argparse.Namespace) -> Settings:
    return load_settings(args.config)


# ---------------------------------------------------------------- progress


_STOPS = {
    "budget": "the time budget ran out",
    "settled": "the answer is settled",
    "single": "one candidate was left",
    "max_rounds": "all rounds are done",
}


_ROUND_LINE_EVERY_S = 5.0


class _PlainProgress:
    """Progress as a few plain lines on stderr: the plan, rounds (one per 5 s at most), the end."""

    def __init__(self, policy_name: str, budget_s: float) -> None:
        self.policy_name = policy_name
        self.budget_s = budget_s
        self.candidates = 0
        self.raced = 0
        self.probes = 0
        self.round = 0
        self.last_line_s = -math.inf

    def __enter__(self) -> _PlainProgress:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        return None

    def __call__(self, event: ProgressEvent) -> None:
        if event.kind == "candidates":
            self.candidates = len(event.candidates)
            sizes = ", ".join("native" if c is None else str(c) for c in event.candidates)
            _say(
                f"measuring {self.candidates} candidates ({sizes}); policy "
                f"{self.policy_name!r}, budget {self.budget_s:g} s"
            )
        elif event.kind in ("probe", "warmup"):
            self.probes += 1
            if event.kind == "probe" and event.round != self.round:
                if self.round > 0 and event.elapsed_s - self.last_line_s >= _ROUND_LINE_EVERY_S:
                    self.last_line_s = event.elapsed_s
                    _say(
                        f"round {self.round} done: {self.candidates - self.raced} candidates "
                        f"in the race, {self.probes} probes, {event.elapsed_s:.1f} s"
                    )
                self.round = event.round
        elif event.kind == "raced_out":
            self.raced += 1
            _say(f"chunk {event.chunk_size} raced out after round {event.round}")
        elif event.kind == "done":
            why = _STOPS.get(event.message, event.message)
            _say(
                f"sweep done after {event.round} rounds, {self.probes} probes in "
                f"{event.elapsed_s:.1f} s ({why})"
            )


class _LiveProgress:
    """A rich progress bar on the terminal: rounds, probes, elapsed time against the budget."""

    def __init__(self, console: Console, policy_name: str, budget_s: float) -> None:
        self.budget_s = budget_s
        self.candidates = 0
        self.raced = 0
        self.probes = 0
        self.progress = Progress(
            SpinnerColumn(),
            TextColumn("{task.description}"),
            BarColumn(),
            TextColumn("{task.fields[probes]} probes"),
            TimeElapsedColumn(),
            console=console,
            transient=True,
        )
        self.task = self.progress.add_task(
            f"policy {policy_name}: preparing", total=budget_s, probes=0
        )

    def __enter__(self) -> _LiveProgress:
        self.progress.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.progress.stop()

    def __call__(self, event: ProgressEvent) -> None:
        if event.kind == "candidates":
            self.candidates = len(event.candidates)
        elif event.kind in ("probe", "warmup"):
            self.probes += 1
        elif event.kind == "raced_out":
            self.raced += 1
        live = self.candidates - self.raced
        what = "warming up" if event.kind == "warmup" else f"round {max(event.round, 1)}"
        self.progress.update(
            self.task,
            description=f"{what}, {live}/{self.candidates} candidates",
            completed=self.budget_s
            if event.kind == "done"
            else min(event.elapsed_s, self.budget_s),
            probes=self.probes,
        )


class _NoProgress:
    def __enter__(self) -> _NoProgress:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        return None

    def __call__(self, event: ProgressEvent) -> None:
        return None


# ---------------------------------------------------------------- tune


def _load_workload(args: argparse.Namespace, nthread: int) -> tuple[Workload, str]:
    """The workload to tune and a one-line description of it."""
    from ._mujoco import DEMO_NSTEP, RolloutWorkload, demo_workload

    num_envs: int = args.num_envs or ENVS_PER_THREAD * nthread
    if args.model is None:
        nstep = args.nstep or DEMO_NSTEP
        demo = demo_workload(num_envs=num_envs, nthread=nthread, nstep=nstep)
        what = f"demo scene: {num_envs} envs, {nthread} threads, {nstep} steps per rollout"
        return demo, what
    kwargs: dict[str, Any] = {}
    if args.nstep is not None:
        kwargs["nstep"] = args.nstep
    workload = RolloutWorkload.from_xml(args.model, num_envs=num_envs, nthread=nthread, **kwargs)
    what = f"{args.model}: {num_envs} envs, {nthread} threads, {workload.nstep} steps per rollout"
    return workload, what


def _balance_bound(workload: Workload) -> float | None:
    """``sum(single-thread cost per env) / nthread`` in seconds, when the workload can tell."""
    per_env_costs: Callable[..., Any] | None = getattr(workload, "per_env_costs", None)
    if per_env_costs is None:
        return None
    try:
        # measure alone: another process's sweep on these cores would skew both
        with filelock.FileLock(sweep_lock_path(), thread_local=False, timeout=30):
            costs = per_env_costs(repeats=3)
    except filelock.Timeout:
        _warn("another sweep holds the machine; the plot has no balance bound")
        return None
    return float(sum(costs)) / workload.nthread


def _describe(decision: Decision) -> str:
    chosen = (
        f"chunk_size=None (native, {decision.native_chunk})"
        if decision.chunk_size is None
        else f"chunk_size={decision.chunk_size} (native would be {decision.native_chunk})"
    )
    where = {
        "benchmark": "measured now",
        "cache": "from the cache",
        "manual": "manual",
        "disabled": "policy disabled",
        "trivial": "nothing to tune",
        "fallback": "measuring failed",
    }[decision.source]
    return f"{chosen}; {where}"


def _print_decision(console: Console, decision: Decision, header: str) -> None:
    console.print(header)
    if decision.timings:
        rows = candidate_rows(
            decision.timings,
            chunk_size=decision.chunk_size,
            samples=decision.samples or None,
            raced_out=decision.raced_out,
        )
        console.print(candidate_table(rows, native_chunk=decision.native_chunk))
    else:
        console.print("(no candidates measured)")
    console.print(_describe(decision))
    console.print(decision.reason)
    details = []
    if decision.source == "benchmark":
        details.append(f"probe time {decision.probe_seconds:.2f} s")
    if decision.partial:
        details.append("partial sweep")
    if decision.key:
        details.append(f"cache key {decision.key[:12]}")
    if details:
        console.print(" · ".join(details))


def _cmd_tune(args: argparse.Namespace) -> int:
    if args.plot is not None:
        try:
            formats = plot_formats()
        except ImportError:
            _error(PLOT_HINT)
            return EXIT_USAGE
        suffix = Path(args.plot).suffix.lower().lstrip(".")
        if suffix not in formats:
            raise InvalidArgumentError(
                f"--plot {args.plot}: cannot tell the image format from the suffix; "
                f"use one of {', '.join('.' + f for f in sorted(formats))}"
            )
    settings = _settings(args)
    policy_name = args.policy or settings.policy
    policy = settings.get_policy(policy_name)

    usable = usable_cpus()
    nthread: int = args.nthread or usable
    if nthread > usable:
        _warn(
            f"--nthread {nthread} is more than the {usable} CPU{'' if usable == 1 else 's'} "
            "this process may use; workers will share cores, so the timings will not match "
            "a machine with "
            f"{nthread} free cores"
        )
    workload, what = _load_workload(args, nthread)
    try:
        progress: _PlainProgress | _LiveProgress | _NoProgress
        err_console = _console(sys.stderr)
        if args.quiet:
            progress = _NoProgress()
        elif err_console.is_terminal:
            progress = _LiveProgress(err_console, policy_name, policy.time_budget_s)
        else:
            progress = _PlainProgress(policy_name, policy.time_budget_s)
        call = functools.partial(
            resolve,
            workload,
            settings=settings,
            policy=policy_name,
            refresh=args.refresh,
            on_progress=progress,
        )
        try:
            with progress:
                decision = anyio.run(call)
        except KeyboardInterrupt:
            _say("interrupted: the sweep stopped and nothing was cached")
            return EXIT_INTERRUPTED

        if args.json:
            print(json.dumps(decision.to_json()), flush=True)
        else:
            _print_decision(_console(sys.stdout), decision, f"{what}; policy {policy_name}")
        if args.plot is not None:
            _plot(args.plot, decision, workload, what)
    finally:
        close = getattr(workload, "close", None)
        if callable(close):
            close()
    if decision.source == "fallback":
        _warn(f"the workload failed while measuring: {decision.reason}")
        return EXIT_WORKLOAD_FAILED
    return EXIT_OK


def _plot(path: str, decision: Decision, workload: Workload, title: str) -> None:
    if not decision.timings:
        _warn(f"nothing was measured ({decision.source}); no plot written")
        return
    rows = candidate_rows(
        decision.timings, chunk_size=decision.chunk_size, raced_out=decision.raced_out
    )
    bound = _balance_bound(workload)
    try:
        write_plot(path, rows, native_chunk=decision.native_chunk, title=title, bound_s=bound)
    except OSError as exc:
        raise CacheError(f"cannot write the plot {path}: {exc}") from exc
    _say(f"plot written to {path}")


# ---------------------------------------------------------------- cache


def _open_cache(args: argparse.Namespace) -> DecisionCache:
    settings = _settings(args)
    cache = cache_for(settings)
    if cache is None:
        where = f" in {settings.source}" if settings.source else ""
        raise ConfigError(f"cache.enabled: the cache is disabled{where}")
    return cache


def _cmd_cache_path(args: argparse.Namespace) -> int:
    print(_open_cache(args).path)
    return EXIT_OK


def _cmd_cache_list(args: argparse.Namespace) -> int:
    cache = _open_cache(args)
    entries = cache.entries()
    if not entries:
        print(f"no entries in {cache.path}")
        return EXIT_OK
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False)
    for name, justify in (
        ("key", "left"),
        ("model", "left"),
        ("N", "right"),
        ("T", "right"),
        ("chunk", "right"),
        ("age", "right"),
        ("policy", "left"),
    ):
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    now = time.time()
    for key, entry in sorted(entries.items(), key=lambda kv: -kv[1].created):
        table.add_row(
            key[: len(LEGACY_PREFIX) + 12] if key.startswith(LEGACY_PREFIX) else key[:12],
            model_summary(entry),
            str(entry.num_envs or "?"),
            str(entry.nthread or "?"),
            chunk_label(entry.chunk_size, entry.native_chunk),
            entry_age(entry, now),
            entry.policy or "?",
        )
    console = _console(sys.stdout)
    console.print(table)
    console.print(f"{len(entries)} entries in {cache.path}")
    return EXIT_OK


def _find_entry(cache: DecisionCache, prefix: str) -> tuple[str, CacheEntry]:
    entries = cache.entries()
    matches = sorted(k for k in entries if k.startswith(prefix))
    if not matches:
        raise InvalidArgumentError(
            f"no cache entry's key starts with {prefix!r} (see `chunktune cache list`)"
        )
    if len(matches) > 1:
        shown = ", ".join(k[:16] for k in matches[:8])
        more = f" and {len(matches) - 8} more" if len(matches) > 8 else ""
        raise InvalidArgumentError(
            f"{prefix!r} matches {len(matches)} entries ({shown}{more}); give more characters"
        )
    return matches[0], entries[matches[0]]


def _cmd_cache_show(args: argparse.Namespace) -> int:
    cache = _open_cache(args)
    key, entry = _find_entry(cache, args.key)
    console = _console(sys.stdout)
    created = (
        time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(entry.created))
        + f" ({entry_age(entry)} ago)"
        if entry.created > 0
        else "unknown"
    )
    facts = [
        ("key", key),
        ("model", model_summary(entry)),
        ("model file", entry.model_file or "-"),
        ("envs x threads", f"{entry.num_envs or '?'} x {entry.nthread or '?'}"),
        ("policy", f"{entry.policy or '?'} ({entry.policy_hash or 'no hash'})"),
        ("created", created),
        ("host", entry.host or "?"),
        (
            "versions",
            f"chunktune {entry.chunktune_version or '?'}, mujoco {entry.mujoco_version or '?'}",
        ),
        ("probe time", f"{entry.probe_seconds:.2f} s" + (" (partial)" if entry.partial else "")),
    ]
    width = max(len(name) for name, _ in facts)
    for name, value in facts:
        console.print(f"{name:<{width}}  {value}")
    if entry.signature:
        sig = ", ".join(f"{k}={v}" for k, v in sorted(entry.signature.items()))
        console.print(f"{'signature':<{width}}  {sig}")
    if entry.timings:
        console.print(entry_table(entry))
    else:
        console.print("(no candidates stored)")
    console.print(f"chunk_size={chunk_label(entry.chunk_size, entry.native_chunk)}")
    if entry.reason:
        console.print(entry.reason)
    return EXIT_OK


def _cmd_cache_clear(args: argparse.Namespace) -> int:
    cache = _open_cache(args)
    count = len(cache.entries())
    if count == 0:
        print(f"no entries in {cache.path}; nothing to clear")
        return EXIT_OK
    if not args.yes:
        if not sys.stdin.isatty():
            _error(
                f"refusing to delete {count} entries from {cache.path} without --yes "
                "(stdin is not a terminal, so there is no one to ask)"
            )
            return EXIT_USAGE
        try:
            answer = input(f"Delete all {count} entries from {cache.path}? [y/N] ")
        except EOFError:
            answer = ""
        if answer.strip().lower() not in ("y", "yes"):
            print("nothing deleted")
            return EXIT_OK
    removed = cache.clear()
    if cache.entries():
        raise CacheError(f"cannot write the cache {cache.path}; nothing was deleted")
    print(f"deleted {removed} entries from {cache.path}")
    return EXIT_OK


def _file_format(path: Path, what: str) -> str:
    suffix = path.suffix.lower()
    if suffix not in (".json", ".toml"):
        raise InvalidArgumentError(f"{what} {path}: the name must end in .json or .toml")
    return suffix[1:]


def _cmd_cache_export(args: argparse.Namespace) -> int:
    cache = _open_cache(args)
    target = Path(args.file).expanduser()
    fmt = _file_format(target, "export")
    if target.resolve() == cache.path.resolve():
        raise InvalidArgumentError(f"export {target}: that is the cache file itself")
    if target.exists() and not args.force:
        raise InvalidArgumentError(f"export {target}: the file exists; add --force to replace it")
    entries = cache.entries()
    write_cache_file(target, entries, format=fmt)
    print(f"exported {len(entries)} entries from {cache.path} to {target}")
    return EXIT_OK


def _cmd_cache_import(args: argparse.Namespace) -> int:
    cache = _open_cache(args)
    source = Path(args.file).expanduser()
    if source.exists() and source.resolve() == cache.path.resolve():
        raise InvalidArgumentError(f"import {source}: that is the cache file itself")
    incoming, bad, kind = read_cache_file(source)
    if bad:
        _warn(f"skipped {bad} malformed entries in {source}")
    report = cache.merge(incoming)
    for key in report.replaced:
        print(f"replaced {key[:12]}: the imported entry is newer")
    for key in report.kept:
        print(f"kept {key[:12]}: the entry already in the cache is newer")
    added, replaced, kept, same = (
        len(report.added),
        len(report.replaced),
        len(report.kept),
        len(report.same),
    )
    summary = f"imported {added + replaced} of {len(incoming)} entries from {kind} {source}"
    extras = []
    if replaced:
        extras.append(f"{replaced} replacing older entries")
    if kept:
        extras.append(f"kept {kept} newer entries already in the cache")
    if same:
        extras.append(f"{same} already present")
    if extras:
        summary += f" ({'; '.join(extras)})"
    print(f"{summary} into {cache.path}")
    return EXIT_OK


# ---------------------------------------------------------------- policy


def _user_policy_names(settings: Settings) -> set[str]:
    """The policies the settings file itself defines (or overrides)."""
    if settings.source is None:
        return set()
    try:
        with open(settings.source, "rb") as f:
            doc = tomllib.load(f)
    except (OSError, tomllib.TOMLDecodeError):
        return set()
    table = doc.get("policies", {})
    return set(table) if isinstance(table, dict) else set()


def _policy_origin(name: str, settings: Settings, user: set[str], presets: set[str]) -> str:
    if name in user:
        return (
            f"{settings.source} (overrides the preset)" if name in presets else str(settings.source)
        )
    return "preset"


def _cmd_policy_list(args: argparse.Namespace) -> int:
    settings = _settings(args)
    user = _user_policy_names(settings)
    presets = set(preset_names())
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False)
    table.add_column("policy")
    table.add_column("description")
    table.add_column("from")
    for name in sorted(settings.policies, key=lambda n: (n in user, n)):
        label = f"{name} *" if name == settings.policy else name
        table.add_row(
            label,
            settings.policies[name].description or "-",
            _policy_origin(name, settings, user, presets),
        )
    console = _console(sys.stdout)
    console.print(table)
    console.print(f"* the active policy ({settings.source or 'built-in default'})")
    return EXIT_OK


def _cmd_policy_show(args: argparse.Namespace) -> int:
    settings = _settings(args)
    name = args.name or settings.policy
    policy = settings.get_policy(name)
    origin = _policy_origin(name, settings, _user_policy_names(settings), set(preset_names()))
    active = "; the active policy" if name == settings.policy else ""
    sys.stdout.write(f"# policy {name!r}, fully resolved (from {origin}{active})\n")
    sys.stdout.write(dump_policy(policy))
    return EXIT_OK


# ---------------------------------------------------------------- the parser

_MAIN_EPILOG = """\
examples:
  chunktune tune                      tune the bundled demo on this machine
  chunktune tune robot.xml --num-envs 1024 --nthread 8
  chunktune tune --json               the decision as one JSON object
  chunktune cache list                what has been decided on this machine
  chunktune policy show quick         a policy, fully resolved, as TOML

exit status: 0 ok; 1 the workload failed while measuring (the native chunk is
reported); 2 a usage, settings or file error; 130 interrupted.
settings: --config F, else $CHUNKTUNE_CONFIG, else ./chunktune.toml, else defaults;
$CHUNKTUNE_CACHE names the cache file.
"""

_TUNE_EPILOG = """\
examples:
  chunktune tune                                   the bundled demo, sized for this machine
  chunktune tune --num-envs 64 --nthread 2         a smaller demo batch
  chunktune tune robot.xml --num-envs 1024 --nthread 8 --nstep 5
  chunktune tune robot.xml --policy thorough --refresh
  chunktune tune --json > decision.json            only the decision on stdout
  chunktune tune --plot sweep.png                  needs: pip install 'chunktune[plot]'

Without MODEL, tunes the bundled demo scene: uneven envs (a quarter of them in
heavy contact), as training batches are. --nthread defaults to the CPUs this
process may use and --num-envs to 128 per thread. A second run with the same
arguments on the same machine is answered from the cache; --refresh measures
again. Ctrl-C stops the sweep within one probe and caches nothing (exit 130).
"""

_CACHE_EPILOG = """\
examples:
  chunktune cache path                 where the cache file is
  chunktune cache list                 one line per stored decision
  chunktune cache show 3fa9c1          the stored table of one entry (key prefix)
  chunktune cache clear --yes          delete every entry
  chunktune cache export backup.toml   a copy, in the format of the suffix
  chunktune cache import other.json    merge another machine's cache, or an older
                                       tuner's JSON cache (keys legacy-<key>)

On import, a key present in both keeps the entry created later.
"""

_POLICY_EPILOG = """\
examples:
  chunktune policy list                every policy, where it comes from, the active one
  chunktune policy show                the active policy as TOML
  chunktune policy show seed           the policy that behaves like the older tuner
"""


def _formatter(prog: str) -> argparse.HelpFormatter:
    return argparse.RawDescriptionHelpFormatter(prog, max_help_position=30)


def build_parser() -> argparse.ArgumentParser:
    """The ``chunktune`` argument parser."""
    parser = argparse.ArgumentParser(
        prog="chunktune",
        description="Pick the chunk_size of MuJoCo's rollout thread pool by measurement,\n"
        "once per job and machine, and remember the answer.",
        epilog=_MAIN_EPILOG,
        formatter_class=_formatter,
    )
    parser.add_argument(
        "--version",
        action="version",
        version=f"chunktune {_version()} (mujoco {mujoco_version()})",
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--config",
        metavar="FILE",
        help="settings file (default: $CHUNKTUNE_CONFIG, else ./chunktune.toml)",
    )

    tune = commands.add_parser(
        "tune",
        parents=[common],
        help="measure a workload and print the chosen chunk size",
        description="Measure candidate chunk sizes on a MuJoCo model (or the bundled demo)\n"
        "and print the decision.",
        epilog=_TUNE_EPILOG,
        formatter_class=_formatter,
    )
    tune.add_argument("model", nargs="?", metavar="MODEL.xml", help="MJCF file (default: demo)")
    tune.add_argument(
        "--num-envs",
        type=_positive_int,
        metavar="N",
        help=f"rollouts per pool call (default: {ENVS_PER_THREAD} per thread)",
    )
    tune.add_argument(
        "--nthread",
        type=_positive_int,
        metavar="T",
        help="pool worker threads (default: the CPUs this process may use)",
    )
    tune.add_argument(
        "--nstep",
        type=_positive_int,
        metavar="K",
        help="steps per rollout (default: 20 for the demo, 10 for a model)",
    )
    tune.add_argument("--policy", metavar="P", help="policy name (default: the active policy)")
    tune.add_argument("--refresh", action="store_true", help="ignore and replace a cached entry")
    tune.add_argument("--json", action="store_true", help="print only the decision as JSON")
    tune.add_argument("--plot", metavar="FILE.png", help="write step time against chunk size")
    tune.add_argument("-q", "--quiet", action="store_true", help="no progress on stderr")
    tune.set_defaults(handler=_cmd_tune)

    cache = commands.add_parser(
        "cache",
        help="inspect, clear, export or import the decision cache",
        description="Inspect and manage the decision cache.",
        epilog=_CACHE_EPILOG,
        formatter_class=_formatter,
    )
    verbs = cache.add_subparsers(dest="verb", metavar="VERB", required=True)
    verbs.add_parser("path", parents=[common], help="print the cache file's path").set_defaults(
        handler=_cmd_cache_path
    )
    verbs.add_parser("list", parents=[common], help="one line per entry").set_defaults(
        handler=_cmd_cache_list
    )
    show = verbs.add_parser("show", parents=[common], help="the stored table of one entry")
    show.add_argument("key", metavar="KEY-PREFIX", help="the start of the entry's key")
    show.set_defaults(handler=_cmd_cache_show)
    clear = verbs.add_parser("clear", parents=[common], help="delete every entry")
    clear.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    clear.set_defaults(handler=_cmd_cache_clear)
    export = verbs.add_parser(
        "export", parents=[common], help="write a copy (.json or .toml by the suffix)"
    )
    export.add_argument("file", metavar="FILE")
    export.add_argument("--force", action="store_true", help="replace FILE if it exists")
    export.set_defaults(handler=_cmd_cache_export)
    imp = verbs.add_parser(
        "import", parents=[common], help="merge a chunktune cache or an older tuner's cache"
    )
    imp.add_argument("file", metavar="FILE")
    imp.set_defaults(handler=_cmd_cache_import)

    policy = commands.add_parser(
        "policy",
        help="list the policies or show one as TOML",
        description="The measurement policies: shipped presets and your own.",
        epilog=_POLICY_EPILOG,
        formatter_class=_formatter,
    )
    pverbs = policy.add_subparsers(dest="verb", metavar="VERB", required=True)
    pverbs.add_parser(
        "list", parents=[common], help="name, description and origin of every policy"
    ).set_defaults(handler=_cmd_policy_list)
    pshow = pverbs.add_parser("show", parents=[common], help="a policy, fully resolved, as TOML")
    pshow.add_argument("name", nargs="?", metavar="NAME", help="default: the active policy")
    pshow.set_defaults(handler=_cmd_policy_show)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit code (0 ok, 1 workload failed, 2 error, 130 interrupted)."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, --version and usage errors
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else EXIT_USAGE)
    handler: Callable[[argparse.Namespace], int] | None = getattr(args, "handler", None)
    if handler is None:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    with _log_to_stderr():
        try:
            return handler(args)
        except ChunktuneError as exc:
            _error(str(exc).strip())
            return EXIT_USAGE
        except KeyboardInterrupt:
            _say("interrupted")
            return EXIT_INTERRUPTED
