"""``chunktune tune``: measure a workload (a model or the bundled demo) and print the decision."""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

import attrs

from .._config import load_settings
from .._counts import upper_chunk
from .._decision import Decision
from .._errors import InvalidArgumentError, OutputError, UsageError
from .._events import CALLS, ProgressCallback, ProgressEvent
from .._lock_wait import hold_blocking
from .._locks import sweep_lock
from .._paths import model_file_problem
from .._request import worth_storing
from .._resolve import resolve
from .._returned import SignatureValue
from .._settings import policy_name_problem
from .._shown import shown_file, shown_path, spelled
from .._threads import run_held, wait_for_stores, wait_for_sweeps
from .._unstored import why as unstored_why
from .._workload import Workload
from ._args import (
    add_workload_options,
    batch_words,
    check_family,
    default_envs,
    family_words,
    load_workload,
    mujoco_warnings_told,
    pool_threads,
)
from ._common import (
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USAGE,
    EXIT_WORKLOAD_FAILED,
    console_on,
    error,
    help_formatter,
    named_policy,
    output_file,
    output_writable,
    say,
    warn,
)
from ._own_files import not_own_file
from ._progress import progress_display
from ._render import (
    candidate_rows,
    candidate_table,
    load_label,
    plot_formats,
    write_plot,
)
from ._tune_interrupted import described, interrupted_line

if TYPE_CHECKING:
    from rich.console import Console

__all__ = ["add_parser", "policy_option", "tune_workload"]

PLOT_HINT = "--plot needs matplotlib: pip install 'chunktune[plot]'"
_WARNED_THEN = "the timings are of the model as it behaves, warnings and all"
_BOUND_WARNED_THEN = "the plot's balance bound is of the model as it behaves, warnings and all"
_SWEEP_END_S = 0.5  # a finished sweep's thread is gone by then; an abandoned one is not

_TUNE_EPILOG = """\
examples:
  chunktune tune                                   the bundled demo, sized for this machine
  chunktune tune --num-envs 64 --nthread 2         a smaller demo batch
  chunktune tune robot.xml --num-envs 1024 --nthread 8 --nstep 5
  chunktune tune robot.xml --policy thorough --refresh
  chunktune tune robot.xml --n-variants 8 --model-label robot-dr
                                                   a domain-randomized family, keyed by name
  chunktune tune --json > decision.json            only the decision on stdout
  chunktune tune --plot sweep.png                  needs: pip install 'chunktune[plot]'

Without MODEL, tunes the bundled demo scene: uneven envs (a quarter of them in
heavy contact), as training batches are. --nthread defaults to the CPUs this
process may use and --num-envs to 128 per thread. A second run with the same
arguments on the same machine is answered from the cache; --refresh measures
again. Ctrl-C stops the sweep within one probe and caches nothing (exit 130);
one that comes once the decision is made says what was decided and cached.
"""


def policy_option(text: str) -> str:
    """An argparse type: a policy's name (whether the settings know it is said later)."""
    if policy_name_problem(text) is not None:
        raise argparse.ArgumentTypeError(f"{spelled(text)} is not a policy name")
    return text


def add_parser(
    commands: argparse._SubParsersAction[argparse.ArgumentParser],
    common: argparse.ArgumentParser,
) -> None:
    """Add ``tune`` to ``commands``; ``common`` holds the options every command takes."""
    tune = commands.add_parser(
        "tune",
        parents=[common],
        help="measure a workload and print the chosen chunk size",
        description="Measure candidate chunk sizes on a MuJoCo model (or the bundled demo)\n"
        "and print the decision.",
        epilog=_TUNE_EPILOG,
        formatter_class=help_formatter,
    )
    add_workload_options(tune)
    tune.add_argument(
        "--policy", type=policy_option, metavar="P", help="policy name (default: the active policy)"
    )
    tune.add_argument("--refresh", action="store_true", help="ignore and replace a cached entry")
    tune.add_argument("--json", action="store_true", help="print only the decision as JSON")
    tune.add_argument("--plot", metavar="FILE.png", help="write step time against chunk size")
    tune.add_argument("-q", "--quiet", action="store_true", help="no progress on stderr")
    tune.set_defaults(handler=_cmd_tune)


@attrs.define
class _Trivial:
    """A batch of at most one chunk per thread: resolve answers it without a pool."""

    num_envs: int
    nthread: int

    def signature(self) -> dict[str, SignatureValue]:
        return {}

    def run(self, chunk_size: int | None) -> float:
        raise UsageError("a trivial batch is never measured")


def tune_workload(args: argparse.Namespace, nthread: int) -> tuple[Workload, str]:
    """The workload to tune and a one-line description of it; a trivial batch builds nothing."""
    num_envs = default_envs(args, nthread)
    if upper_chunk(num_envs, nthread) <= 1:
        check_family(args)  # load_workload's own check, on the path that skips it
        # nothing to tune: build no scene, no per-thread MjData, no pool
        problem = None if args.model is None else model_file_problem(Path(args.model))
        if problem is not None:
            raise InvalidArgumentError(problem)
        model = "demo scene" if args.model is None else shown_path(args.model)
        what = f"{model}: {batch_words(num_envs, nthread)}"
        what += family_words(args)
        return _Trivial(num_envs, nthread), what
    return load_workload(args, nthread)


def _balance_bound(workload: Workload) -> float | None:
    """``sum(single-thread cost per env) / nthread`` in seconds, for a MuJoCo workload."""
    from .._mujoco import RolloutWorkload, per_env_costs

    if not isinstance(workload, RolloutWorkload):
        return None
    # measure alone: another process's sweep on these cores would skew both
    with hold_blocking(sweep_lock(), timeout_s=30) as held:
        if not held:
            warn("another sweep holds the machine; the plot has no balance bound")
            return None
        # counted as the sweep's are: MuJoCo's own handler wrote each to stderr, unprefixed,
        # and to a MUJOCO_LOG.TXT in the current folder
        with mujoco_warnings_told("timing each env for the plot", _BOUND_WARNED_THEN):
            costs = per_env_costs(workload, repeats=3)
    return float(sum(costs)) / workload.nthread


def _print_decision(
    console: Console, decision: Decision, header: str, *, unstored: str | None = None
) -> None:
    """The table, the choice, its gain and reason, and the machine's load as its sweep began;
    ``unstored``: why the cache could not store the decision (None: stored, or not meant to be)."""
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
    console.print(described(decision))
    if decision.chunk_size is not None and decision.gain_ci is not None:
        low, high = decision.gain_ci
        # two figures for one size: the table's ratio is the race's, this the confirmation's
        console.print(
            f"gain over native: {decision.gain:.1%} (confirmed on fresh pairs, interval "
            f"{low:.1%} to {high:.1%}; the table's ratios are the race's estimates)"
        )
    elif decision.chunk_size is not None and decision.gain:
        # confirm = false: a race's or the sequential schedule's own figure
        console.print(
            f"gain over native: {decision.gain:.1%} (not confirmed: the sweep's estimate)"
        )
    console.print(decision.reason)
    if decision.chunk_size is not None and decision.chunk_size > decision.native_chunk + 1:
        # measured: a coarser size's gain holds while the cores stay free (README). One env
        # over native's is native's side: `shared` may choose it, and must not be told to
        # use itself
        console.print(
            f"{decision.chunk_size} is coarser than native's {decision.native_chunk}: fewer "
            "chunks to hand to a free thread when other work takes a core, so its gain is "
            "the machine's as measured and can turn into a loss beside work that comes and "
            "goes (README, candidate strategies; --policy shared keeps to native's side)"
        )
    measured, load = decision.source == "benchmark", decision.load
    if measured and load is not None and load.busy:
        console.print(
            f"the machine was busy as the sweep began ({load}): what a sweep measures under "
            "load may not hold when the machine is calm; the first request that finds it "
            "calm measures again"
        )
    details = _details(decision, unstored=unstored)
    if details:
        console.print(" · ".join(details))


def _details(decision: Decision, *, unstored: str | None = None) -> list[str]:
    """The last line's parts: probe time, the machine's load, a partial sweep, the cache key
    (or why it was not cached: ``unstored``, the cache could not write it)."""
    measured, load = decision.source == "benchmark", decision.load
    details = []
    if measured:
        details.append(f"probe time {decision.probe_seconds:.2f} s")
    if load is not None:  # only a sweep's decision has one: measured now, cached or shared
        details.append(str(load) if measured else f"measured at {load_label(load)}")
    if decision.partial:
        details.append("partial sweep")
    if decision.key and decision.source == "benchmark" and not worth_storing(decision):
        details.append("not cached: nothing but native was timed")
    elif decision.key and unstored is not None:
        details.append(f"not cached: {unstored}")
    elif decision.key and decision.source in ("benchmark", "cache"):
        # a fallback's or a trivial batch's answer is never stored: it has no entry to name.
        # The whole key, as --json's "key": its first 12 characters are only the job's
        # part, which each policy's entry of the job shares (`cache show` found several)
        details.append(f"cache key {decision.key}")
    return details


def _plot_writable(plot: str, config: str | None) -> bool:
    """Whether ``--plot plot`` can be drawn and written; False (the hint told) without
    matplotlib.

    Raises:
        InvalidArgumentError: a bad name, or a suffix that names no image format
            matplotlib writes.
        OutputError: its directory does not exist, the file cannot be written there, or
            it is a file chunktune keeps (the cache, a lock), as ``config`` names them.
    """
    try:
        formats = plot_formats()
    except ImportError:
        error(PLOT_HINT)
        return False
    # its folder is checked now, not after a sweep whose table it would then lose
    target = output_file("--plot", plot)
    suffix = target.suffix.lower().lstrip(".")
    if suffix not in formats:
        raise InvalidArgumentError(
            f"--plot {plot}: cannot tell the image format from the suffix; "
            f"use one of {', '.join('.' + f for f in sorted(formats))}"
        )
    not_own_file(target, "plot", config)
    output_writable(target, "plot")
    return True


def _noting_calls(progress: ProgressCallback, calls: list[bool]) -> ProgressCallback:
    """``progress``, noting in ``calls`` once the sweep has begun: its ``candidates``
    event, sent as it holds the machine and before its first call, or one of its calls."""

    # Not a call's own event alone: that comes once the call returns, and a Ctrl-C
    # during the first (a real batch's warm-up may take seconds) drops it, so the line
    # would say nothing was measured of a sweep that was stopped
    def noting(event: ProgressEvent) -> None:
        if (event.kind == "candidates" or event.kind in CALLS) and not calls:
            calls.append(True)
        progress(event)

    return noting


def _cmd_tune(args: argparse.Namespace) -> int:
    if args.plot is not None and not _plot_writable(args.plot, args.config):
        return EXIT_USAGE
    settings = load_settings(args.config)
    policy_name, policy = named_policy(settings, args.policy, "--policy")

    nthread = pool_threads(args.nthread)
    workload, what = tune_workload(args, nthread)
    try:
        progress = progress_display(
            policy_name, policy.time_budget_s, quiet=args.quiet, rounds=policy.interleave
        )
        measured: list[bool] = []  # one entry once the sweep began: its Ctrl-C line
        call = functools.partial(
            resolve,
            workload,
            settings=settings,
            policy=policy_name,
            refresh=args.refresh,
            on_progress=_noting_calls(progress, measured),
        )
        told = (
            contextlib.nullcontext()
            if isinstance(workload, _Trivial)  # builds nothing, so imports no mujoco
            else mujoco_warnings_told("measuring", _WARNED_THEN)
        )
        decided: list[Decision] = []  # what resolve returned, though a Ctrl-C came after
        since = time.time()  # as a cache entry's own time is told
        try:
            with told, progress:
                decision = run_held(call, returned=decided.append)
        except KeyboardInterrupt:
            # the sweep stops at its next probe; wait for it, so the pool closes idle, and
            # for a decision's cache write, which a Ctrl-C as it is stored lets finish
            wait_for_sweeps()
            wait_for_stores()
            said = interrupted_line(
                decided[0] if decided else None,
                workload=workload,
                settings=settings,
                policy=policy,
                since=since,
                measured=bool(measured),
            )
            say(said)
            return EXIT_INTERRUPTED

        # measured, but the cache could not keep it (a full disk, a read-only folder): the
        # last line must not name a cache key as if the entry were there (the exit stays 0:
        # a read-only home still gets its decision, warned about on stderr)
        unstored = (
            unstored_why(decision.key) if decision.source == "benchmark" and decision.key else None
        )
        if args.json:
            print(json.dumps(decision.to_json()), flush=True)
        else:
            header = f"{what}; policy {policy_name}"
            _print_decision(console_on(sys.stdout), decision, header, unstored=unstored)
        if args.plot is not None:
            _plot(args.plot, decision, workload, what)
    finally:
        close = getattr(workload, "close", None)
        # a sweep left running past hard_limit_s still uses the pool: exiting frees it
        if callable(close) and wait_for_sweeps(_SWEEP_END_S):
            close()
    if decision.source == "fallback":
        # the reason says which: the workload or chunktune failed, the process's threads or
        # descriptors were spent, or hard_limit_s ran out
        warn(decision.reason)
        return EXIT_WORKLOAD_FAILED
    return EXIT_OK


def _plot(path: str, decision: Decision, workload: Workload, title: str) -> None:
    if not decision.timings:
        warn(f"nothing was measured ({decision.source}); no plot written")
        return
    rows = candidate_rows(
        decision.timings, chunk_size=decision.chunk_size, raced_out=decision.raced_out
    )
    bound = _balance_bound(workload)
    try:
        write_plot(path, rows, native_chunk=decision.native_chunk, title=title, bound_s=bound)
    except OSError as exc:
        raise OutputError(f"cannot write the plot {shown_file(path)}: {exc}") from exc
    say(f"plot written to {shown_file(path)}")
