"""``chunktune record``: measure every chunk size of a workload in rounds and write a trace."""

from __future__ import annotations

import argparse
import contextlib
import os
import stat
import sys
import tempfile
from contextlib import nullcontext
from pathlib import Path

from .._atomic import open_fd, write_atomic
from .._counts import MAX_COUNT
from .._errors import InvalidArgumentError, OutputError
from .._events import ProgressEvent
from .._record import check_calls, check_sizes, record
from .._shown import plural, shown_file, spelled
from .._trace import dump_trace
from ._args import (
    add_workload_options,
    load_workload,
    mujoco_warnings_told,
    pool_threads,
    positive_int,
    seed_int,
)
from ._common import (
    EXIT_INTERRUPTED,
    EXIT_OK,
    STDIN,
    console_on,
    help_formatter,
    live_terminal,
    output_file,
    output_writable,
    say,
)
from ._machine import machine_to_ourselves
from ._own_files import not_own_file

__all__ = ["PLAIN_EVERY_S", "add_parser"]

_NOTHING_WRITTEN = "interrupted: no trace was written"

PLAIN_EVERY_S = 30.0
"""Off a terminal, a finished round is said at most this often: a log, not a bar."""

_RECORD_EPILOG = """\
examples:
  chunktune record -o demo.json                     the bundled demo, every size, 20 rounds
  chunktune record robot.xml --num-envs 512 --nthread 4 --rounds 30 -o robot.json
  chunktune record --sizes 2,4,8,16 --rounds 40 -o few.json

Every round measures each size once, in a fresh random order, so what the machine
does during the recording hits every size alike. The file is written only when
every round is done (Ctrl-C writes nothing; one that comes as the file is written
says whether it was). Replay it with chunktune.sim.ReplayWorkload.from_file(path);
a trace of some sizes (--sizes) replays only a policy that probes those sizes
alone. No settings are used: a settings file is read only for the caches' names,
which -o may not replace (its [cache] table, whatever else is wrong in it; a file
whose [cache] cannot be read refuses the recording, unless $CHUNKTUNE_CACHE and
$CHUNKTUNE_SYSTEM_CACHE name both).
"""


def _sizes(text: str) -> list[int] | None:
    if text == "all":
        return None
    try:
        sizes = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f'{spelled(text)} is not "all" or a comma-separated list of chunk sizes'
        ) from None
    if not sizes:
        raise argparse.ArgumentTypeError('expected "all" or at least one chunk size')
    return sizes


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``record`` to ``commands``.

    Unlike the other commands it takes no ``--config``: it uses no settings. It
    measures the sizes asked for, not a policy's, stores nothing in the cache, and
    its sweep lock is ``$CHUNKTUNE_SWEEP_LOCK``'s, which no settings file names; an
    option that is never read would only let a user believe otherwise. (The
    discovered settings are read for one thing: the caches' names, which ``-o`` may not
    replace, from their ``[cache]`` table whatever else is wrong in them; where that
    cannot be read, the recording is refused, unless ``$CHUNKTUNE_CACHE`` and
    ``$CHUNKTUNE_SYSTEM_CACHE`` name both caches.)
    """
    rec = commands.add_parser(
        "record",
        help="measure every chunk size in rounds and write a trace",
        description="Measure every chunk size (or a list) of a MuJoCo model, or the bundled\n"
        "demo, in interleaved rounds, and write the trace as JSON.",
        epilog=_RECORD_EPILOG,
        formatter_class=help_formatter,
    )
    add_workload_options(rec)
    rec.add_argument(
        "--rounds", type=positive_int, default=20, metavar="R", help="rounds (default: 20)"
    )
    rec.add_argument(
        "--sizes", type=_sizes, default=None, metavar="all|a,b,c",
        help="default: all (native's size is always added)",
    )  # fmt: skip
    rec.add_argument(
        "--seed", type=seed_int, default=0, help="seed of the round orders (default: 0)"
    )
    rec.add_argument(
        "-o", "--output", required=True, metavar="FILE.json",
        help="trace file (replaced if it exists, once the recording is whole)",
    )  # fmt: skip
    rec.add_argument("-q", "--quiet", action="store_true", help="no progress on stderr")
    rec.set_defaults(handler=_cmd_record)


def _cmd_record(args: argparse.Namespace) -> int:
    # `-` is stdout to `cache export`, and a user may try it here; but a trace is written
    # whole or not at all, renamed into place, which a pipe cannot be
    if args.output == STDIN:
        raise InvalidArgumentError(
            "-o -: a trace is written to a file, not to stdout; expected a FILE.json name"
        )
    out = output_file("-o", args.output)
    if out.suffix.lower() != ".json":
        raise InvalidArgumentError(f"-o {shown_file(out)}: a trace file's name must end in .json")
    # before a temporary is made beside the live cache; settings that cannot name the
    # cache refuse here, for record reads nothing else of them that would say so
    not_own_file(out, "trace", unknown_refused=True)
    output_writable(out, "trace")  # said now, not after minutes of recording
    if args.rounds > MAX_COUNT:  # said now, not after the model is built and announced
        raise InvalidArgumentError(f"--rounds {args.rounds}: expected at most {MAX_COUNT}")
    nthread = pool_threads(args.nthread)
    workload, what = load_workload(args, nthread)
    try:
        sizes = check_sizes(args.sizes, workload.num_envs, workload.nthread)
        check_calls(len(sizes), args.rounds)
        total = len(sizes) * args.rounds
        try:
            # made before the line that says the recording starts: it loads rich, a few
            # tenths of a second on a busy machine (a Ctrl-C meanwhile writes nothing either)
            shown = _Shown(args.rounds, len(sizes), quiet=args.quiet)
            if not args.quiet:
                counts = (
                    f"{plural(len(sizes), 'size')} x {plural(args.rounds, 'round')} "
                    f"= {plural(total, 'call')}"
                )
                say(f"recording {what}: {counts}")
            # before rich 14.3 a disabled Progress still printed a blank line
            with (
                machine_to_ourselves(),
                mujoco_warnings_told("recording", "the trace records the model as it behaves"),
                shown.progress if shown.bar else nullcontext(),
            ):
                trace = record(
                    workload,
                    rounds=args.rounds,
                    sizes=args.sizes,
                    seed=args.seed,
                    description=what,
                    on_event=shown,
                )
        except KeyboardInterrupt:
            say(_NOTHING_WRITTEN)
            return EXIT_INTERRUPTED
    finally:
        workload.close()
    data = dump_trace(trace).encode()
    try:
        try:  # whole or not at all: a failed write (a full disk) leaves no half file behind
            write_atomic(out, data)
        except OSError as exc:
            kept = _keep_elsewhere(data)
            where = f"; the recording is kept in {kept}" if kept else ""
            raise OutputError(
                f"cannot write the trace {shown_file(out)}: {exc.strerror or exc}{where}"
            ) from exc
        if not args.quiet:
            say(f"wrote {shown_file(out)}")
    except KeyboardInterrupt:
        # the recording is whole: a Ctrl-C as it is written may come after the rename
        say(_interrupted_writing(out, data))
        return EXIT_INTERRUPTED
    return EXIT_OK


def _interrupted_writing(out: Path, data: bytes) -> str:
    """What a Ctrl-C while the trace ``data`` was written to ``out`` left, as the file tells it."""
    try:
        if not stat.S_ISREG(os.stat(out).st_mode):
            # a pipe or /dev/stdout, written into (never renamed onto): read back it cannot be
            shown = shown_file(out)
            return f"interrupted as the trace was being written to {shown}: it may be cut short"
        written = out.read_bytes() == data
    except FileNotFoundError:
        written = False
    except OSError as exc:
        why = exc.strerror or exc
        return f"interrupted as the trace was being written to {shown_file(out)} ({why})"
    return (
        f"interrupted: the trace was written to {shown_file(out)}" if written else _NOTHING_WRITTEN
    )


class _Shown:
    """A recording's progress on stderr: a bar on a terminal; elsewhere (a log, or a dumb
    terminal, where a bar would leave a blank line) a finished round, at most every
    :data:`PLAIN_EVERY_S`."""

    def __init__(self, rounds: int, per_round: int, *, quiet: bool) -> None:
        self.rounds, self.per_round, self.total = rounds, per_round, rounds * per_round
        console = console_on(sys.stderr)
        self.bar = not quiet and live_terminal(console)
        self.plain = not quiet and not self.bar
        from rich.progress import (  # rich loads only for a recording
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        self.progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
            console=console,
            transient=True,
            disable=not self.bar,
        )
        self.task = self.progress.add_task("recording", total=self.total)
        self.calls, self.said_s = 0, 0.0

    def __call__(self, event: ProgressEvent) -> None:
        """One call measured: the bar moves, or a finished round is said if one is due."""
        self.calls += 1
        where = f"round {event.round}/{self.rounds}"
        self.progress.update(self.task, advance=1, description=where)
        elapsed = event.elapsed_s or 0.0
        round_done = self.calls % self.per_round == 0 and self.calls < self.total  # last: wrote
        if self.plain and round_done and elapsed - self.said_s >= PLAIN_EVERY_S:
            self.said_s = elapsed
            left = _left(elapsed / self.calls * (self.total - self.calls))
            say(f"{where} done: {self.calls} of {self.total} calls in {elapsed:.0f} s, {left}")


def _left(seconds: float) -> str:
    """``"about 40 s left"``, ``"about 7 min left"``: the rest at the pace so far.

    A whole recording takes minutes (the demo's 128 sizes in 24 rounds, 5-8 min on a
    2-core machine), which a log reader would otherwise work out from the counts.
    """
    if seconds < 120:
        return f"about {seconds:.0f} s left"
    return f"about {seconds / 60:.0f} min left"


def _keep_elsewhere(data: bytes) -> Path | None:
    """Write a recording that ``-o`` could not take to the temporary directory, or None.

    Minutes of measuring are not thrown away because the output's disk filled up
    meanwhile; where the temporary directory is full too, nothing is left behind.
    """
    try:
        fd, name = tempfile.mkstemp(prefix="chunktune-trace-", suffix=".json")
    except OSError:
        return None
    try:
        with open_fd(fd) as file:
            file.write(data)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(name)
        return None
    return Path(name)
