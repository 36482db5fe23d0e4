"""How ``chunktune tune`` shows a sweep while it runs: a live bar, plain lines, or nothing."""

from __future__ import annotations

import math
import sys
from types import TracebackType
from typing import TYPE_CHECKING, Self

from .._decision import size_name
from .._events import CALLS, ProgressEvent
from .._shown import plural
from ._common import console_on, live_terminal, say

if TYPE_CHECKING:
    from rich.console import Console

__all__ = ["progress_display"]

# a stop reason travels in a progress event's message: any text, keyed here by the reason
_STOPS: dict[str, str] = {
    "budget": "the time budget ran out",
    "confirming": "the race ended early: confirming its leader needed the rest",
    "settled": "the answer is settled",
    "max_rounds": "all rounds are done",
    "noisy": "the machine is too noisy to confirm a gain in the budget",
    "too_slow": "calls are too slow for the budget to judge a candidate",
}

_ROUND_LINE_EVERY_S = 5.0


class _NoProgress:
    """Shows nothing; also the context-manager base of the other displays."""

    def __enter__(self) -> Self:
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


class _PlainProgress(_NoProgress):
    """Plain lines on stderr: a wait, the plan, rounds (one per 5 s at most), the end.

    ``rounds`` False: the sequential schedule (``interleave = false``), which measures
    each candidate's calls in a row; its lines count candidates, since the round of
    its probes is a call's place in its candidate's row.
    """

    def __init__(self, policy_name: str, budget_s: float, *, rounds: bool = True) -> None:
        self.policy_name = policy_name
        self.budget_s = budget_s
        self.rounds = rounds
        self.started = 0  # candidates the sequential schedule has started on, native not one
        self.chunk: int | None = None  # the one it measures now
        self.begun = False  # whether it has measured any size yet (native first)
        self.candidates = 0  # sizes other than native, as the budget's cut line counts them
        self.raced = 0
        self.probes = 0
        self.round = 0
        self.confirming = False
        self.last_line_s = -math.inf
        self.prev_elapsed_s = 0.0  # when the previous probe ended

    def _line_due(self) -> bool:
        """Whether a line for what ended with the previous probe is due (one per 5 s)."""
        if self.prev_elapsed_s - self.last_line_s < _ROUND_LINE_EVERY_S:
            return False
        self.last_line_s = self.prev_elapsed_s
        return True

    def __call__(self, event: ProgressEvent) -> None:
        if event.kind == "waiting":
            say(event.message)
        elif event.kind == "candidates":
            self._planned(event)
        elif event.kind == "extended":
            say(event.message)
        elif event.kind in ("probe", "warmup"):
            self._probed(event)
        elif event.kind == "raced_out":
            self.raced += 1
            why = f" ({event.message})" if event.message else ""
            say(f"chunk {event.chunk_size} raced out after round {event.round}{why}")
        elif event.kind == "refined":
            self.candidates += len(event.candidates)
            sizes = ", ".join(str(c) for c in event.candidates)
            say(f"refining after round {event.round}: also measuring {sizes}")
        elif event.kind == "confirm":
            if not self.confirming and event.chunk_size is not None:
                self.confirming = True
                say(f"confirming chunk {event.chunk_size} against native on fresh pairs")
            self.probes += 1
            self.prev_elapsed_s = event.elapsed_s
        elif event.kind == "done":
            self._done(event)

    def _planned(self, event: ProgressEvent) -> None:
        """Say which candidates the sweep measures: all, or those the budget can judge."""
        self.candidates = _sized(event.candidates)
        if event.message:  # the field was cut to what the budget can judge
            say(f"{event.message}: measuring only {', '.join(map(size_name, event.candidates))}")
        else:
            against = " against native" if None in event.candidates else ""
            sizes = ", ".join(map(size_name, (c for c in event.candidates if c is not None)))
            say(
                f"measuring {plural(self.candidates, 'candidate')}{against} ({sizes}); "
                f"policy {self.policy_name!r}, budget {self.budget_s:g} s"
            )

    def _probed(self, event: ProgressEvent) -> None:
        """Count a probe or warm-up; the first of a round (or candidate) closes the one before."""
        # the first probe of a new round (or candidate) closes the previous one, as of
        # the probe before
        if event.kind == "probe" and self.rounds and event.round != self.round:
            if self.round > 0 and self._line_due():
                say(
                    f"round {self.round} done: "
                    f"{plural(self.candidates - self.raced, 'candidate')} "
                    f"in the race, {plural(self.probes, 'probe')}, "
                    f"{self.prev_elapsed_s:.1f} s"
                )
            self.round = event.round
        elif event.kind == "probe" and not self.rounds and _first_of(event, self.begun, self.chunk):
            if self.begun and self._line_due():
                say(
                    f"{_chunk_name(self.chunk)} done: {self.started} of "
                    f"{plural(self.candidates, 'candidate')} measured, "
                    f"{plural(self.probes, 'probe')}, {self.prev_elapsed_s:.1f} s"
                )
            self.started += event.chunk_size is not None
            self.chunk, self.begun = event.chunk_size, True
        self.probes += 1
        self.prev_elapsed_s = event.elapsed_s

    def _done(self, event: ProgressEvent) -> None:
        """Say how the sweep ended: after how many rounds (or candidates) and probes, and why."""
        why = _STOPS.get(event.message, event.message)
        if event.message == "max_rounds" and not self.rounds:
            why = "every candidate had all its calls"
        done = (
            f"after {plural(event.round, 'round')}"
            if self.rounds
            else f"with {self.started} of {plural(self.candidates, 'candidate')} measured"
        )
        say(f"sweep done {done}, {plural(self.probes, 'probe')} in {event.elapsed_s:.1f} s ({why})")


class _LiveProgress:
    """A rich progress bar on the terminal: rounds, probes, elapsed time against the budget.

    ``rounds`` False: the sequential schedule; the bar names the candidate it measures.
    """

    def __init__(
        self, console: Console, policy_name: str, budget_s: float, *, rounds: bool = True
    ) -> None:
        self.budget_s = budget_s
        self.rounds = rounds
        self.started = 0
        self.chunk: int | None = None
        self.begun = False
        self.candidates = 0
        self.raced = 0
        self.probes = 0
        self.confirming: int | None = None
        from rich.progress import (  # rich loads only for a live bar
            BarColumn,
            Progress,
            SpinnerColumn,
            TextColumn,
            TimeElapsedColumn,
        )

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
        if event.kind == "waiting":
            # the bar is transient: the line stays, so the wait is on record after it
            self.progress.console.print(f"chunktune: {event.message}")
            self.progress.update(self.task, description=event.message)
            return
        if event.kind == "candidates":
            self.candidates = _sized(event.candidates)
        elif event.kind == "extended" and event.seconds is not None:
            self.progress.console.print(f"chunktune: {event.message}")
            self.budget_s = event.seconds
            self.progress.update(self.task, total=self.budget_s)
        elif event.kind in CALLS:
            self.probes += 1
            if event.kind == "probe" and _first_of(event, self.begun, self.chunk):
                self.started += event.chunk_size is not None
                self.chunk, self.begun = event.chunk_size, True
        elif event.kind == "raced_out":
            self.raced += 1
        elif event.kind == "refined":
            self.candidates += len(event.candidates)
        live = self.candidates - self.raced
        if event.kind == "confirm":
            self.confirming = event.chunk_size or self.confirming
        if self.confirming:
            what = f"confirming {self.confirming} against native"
        elif event.kind == "warmup":
            what = "warming up"
        elif not self.rounds:
            what = f"{_chunk_name(self.chunk)}, {self.started}/{self.candidates} candidates"
        else:
            what = f"round {max(event.round, 1)}, {live}/{self.candidates} candidates"
        self.progress.update(
            self.task,
            description=what,
            completed=self.budget_s
            if event.kind == "done"
            else min(event.elapsed_s, self.budget_s),
            probes=self.probes,
        )


def _first_of(event: ProgressEvent, begun: bool, chunk: int | None) -> bool:
    """Whether a probe is the sequential schedule's first of a size (native's too)."""
    return not begun or event.chunk_size != chunk


def _sized(candidates: tuple[int | None, ...]) -> int:
    """The candidates the lines count: every size but native (None), which each is timed
    against, so that "can judge 3 candidates" and "3 candidates in the race" count alike."""
    return sum(c is not None for c in candidates)


def _chunk_name(chunk: int | None) -> str:
    return "native" if chunk is None else f"chunk {chunk}"


def progress_display(
    policy_name: str, budget_s: float, *, quiet: bool, rounds: bool = True
) -> _PlainProgress | _LiveProgress | _NoProgress:
    """The progress callback for a sweep, and the context that shows it (``budget_s`` seconds).

    Nothing when ``quiet``, a live bar when stderr is a terminal that can redraw one
    (not ``TERM=dumb``), else plain lines.
    ``rounds``: the policy interleaves its candidates in rounds (``interleave``), rather
    than measuring each one's calls in a row.
    """
    if quiet:
        return _NoProgress()
    err_console = console_on(sys.stderr)
    if live_terminal(err_console):
        return _LiveProgress(err_console, policy_name, budget_s, rounds=rounds)
    return _PlainProgress(policy_name, budget_s, rounds=rounds)
