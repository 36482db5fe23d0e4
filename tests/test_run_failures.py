"""What a failing run() leaves a trainer and the workload's author: the reason and the log."""

from __future__ import annotations

import asyncio
import json
import logging
import math
import subprocess
import sys
import unicodedata
from collections.abc import Iterator
from pathlib import Path

import pytest

import chunktune
from chunktune import ProgressEvent

NATIVE = 12  # 256 envs on 2 threads
BEST = 7  # the chunk the modeled cost favours: the race's leader, then confirmed


class _Failing:
    """A workload whose modeled call is fastest at chunk 7, and whose ``fail_at``-th call
    (counted from 1) fails as ``how`` says; every call's chunk size is kept in ``calls``."""

    num_envs = 256
    nthread = 2

    def __init__(self, how: str = "", fail_at: int = 0) -> None:
        self.how = how
        self.fail_at = fail_at
        self.calls: list[int | None] = []

    def signature(self) -> dict[str, str | int]:
        return {"kind": "test.run_failures", "how": self.how, "at": self.fail_at}

    def run(self, chunk_size: int | None) -> float:
        self.calls.append(chunk_size)
        if len(self.calls) == self.fail_at:
            if self.how == "raise":
                raise KeyError("env 3")
            return {"nan": math.nan, "zero": 0, "none": None}[self.how]  # type: ignore[return-value]
        return 0.01 * (1 + 0.05 * abs((chunk_size or NATIVE) - BEST) / BEST)


def _clean_calls() -> tuple[list[int | None], list[str]]:
    """Every call of a sweep that nothing fails, in order, and what each was (its event's
    kind: a warm-up, the race's probe, a confirmation)."""
    events: list[ProgressEvent] = []
    workload = _Failing()
    d = chunktune.resolve_sync(workload, policy="quick", refresh=True, on_progress=events.append)
    assert (d.source, d.chunk_size) == ("benchmark", BEST), d.reason
    kinds: list[str] = [e.kind for e in events if e.kind in ("warmup", "probe", "confirm")]
    assert len(kinds) == len(workload.calls)
    return workload.calls, kinds


@pytest.fixture
def logged(caplog: pytest.LogCaptureFixture) -> Iterator[pytest.LogCaptureFixture]:
    with caplog.at_level(logging.WARNING, logger="chunktune"):
        yield caplog


def _which(where: str) -> tuple[int, int | None]:
    """The call (counted from 1) that ``where`` names in a clean sweep, and its chunk size."""
    calls, kinds = _clean_calls()
    if where == "native's first":
        return 1, None
    if where == "a candidate's first":
        at = next(i for i, c in enumerate(calls) if c is not None) + 1
        return at, calls[at - 1]
    # the last call of the chosen size: one of its confirmation's pairs against native
    at = max(i for i, c in enumerate(calls) if c == BEST) + 1
    assert kinds[at - 1] == "confirm"
    return at, BEST


WHERE = ["native's first", "a candidate's first", "the confirmation"]
HOW = {
    "raise": "raised KeyError: 'env 3'",
    "nan": "returned nan; expected a positive number of seconds from 1e-09 to 1e+06",
    "zero": "returned 0; expected a positive number of seconds from 1e-09 to 1e+06",
    "none": "returned None; expected a positive number of seconds from 1e-09 to 1e+06",
}


@pytest.mark.parametrize("how", list(HOW))
@pytest.mark.parametrize("where", WHERE)
def test_the_reason_names_the_call_that_failed(isolated: Path, where: str, how: str) -> None:
    """run() raising or returning no seconds: the reason names run(N), run(None) for native."""
    # a raising run() read "(KeyError: 'env 3')", naming no call; a bad value named it
    at, chunk = _which(where)
    d = chunktune.resolve_sync(_Failing(how, at), policy="quick")
    assert d.source == "fallback"
    assert d.reason == (
        f"kept the native chunk {NATIVE}: the workload failed while measuring "
        f"(run({chunk}) {HOW[how]})"
    )


@pytest.mark.anyio
async def test_resolve_names_the_call_on_either_loop(isolated: Path) -> None:
    """await resolve() names the failing call as resolve_sync does, on asyncio and on trio."""
    clean = _Failing()
    await chunktune.resolve(clean, policy="quick", refresh=True)
    at = next(i for i, c in enumerate(clean.calls) if c is not None) + 1
    chunk = clean.calls[at - 1]
    d = await chunktune.resolve(_Failing("raise", at), policy="quick")
    assert (d.source, d.chunk_size) == ("fallback", None)
    assert d.reason.endswith(f"(run({chunk}) raised KeyError: 'env 3')"), d.reason


class _Unprintable(_Failing):
    """A run() whose exception's message holds a newline, an escape sequence, a bidi
    override, and goes on for 2000 characters."""

    def run(self, chunk_size: int | None) -> float:
        if chunk_size is not None:
            raise RuntimeError("step 41\n\x1b[31mdiverged\u202e" + "x" * 2000 + "end")
        return super().run(chunk_size)


def _printable(text: str) -> bool:
    return not [c for c in text if unicodedata.category(c) in ("Cc", "Cf", "Zl", "Zp")]


def test_an_exception_s_message_is_one_escaped_bounded_line(isolated: Path) -> None:
    """A message's newline, escape and bidi override are escaped, its length cut, its end kept."""
    # the reason, documented as one sentence, held the raw newline and ESC, and all 2000 x's
    d = chunktune.resolve_sync(_Unprintable(), policy="quick")
    assert d.source == "fallback"
    assert _printable(d.reason) and len(d.reason) < 400, d.reason
    message = d.reason.split(" raised RuntimeError: ", 1)[1]
    assert message.startswith('"step 41\\n\\u001B[31mdiverged\\u202Exxx')
    assert "..." in message and message.endswith('xxxend")')


def test_the_log_carries_the_workload_s_traceback(
    isolated: Path, logged: pytest.LogCaptureFixture
) -> None:
    """The warning names the call as the reason does, with the traceback of run()'s raise."""
    # it logged KeyError('env 3') alone: no call, and no traceback to find the raise by
    at, chunk = _which("a candidate's first")
    chunktune.resolve_sync(_Failing("raise", at), policy="quick")
    (record,) = [r for r in logged.records if r.levelno == logging.WARNING]
    assert record.getMessage() == (
        f"chunktune: workload failed while measuring: run({chunk}) raised KeyError: 'env 3'"
    )
    assert record.exc_info is not None and isinstance(record.exc_info[1], KeyError)
    assert "raise KeyError" in logged.text  # the line of run() that raised, from its traceback


def test_a_bad_value_s_warning_needs_no_traceback(
    isolated: Path, logged: pytest.LogCaptureFixture
) -> None:
    """run() returning nan: the warning names the call and the value, with no traceback."""
    at, chunk = _which("a candidate's first")
    chunktune.resolve_sync(_Failing("nan", at), policy="quick")
    (record,) = [r for r in logged.records if r.levelno == logging.WARNING]
    assert record.getMessage() == (
        f"chunktune: workload failed while measuring: run({chunk}) {HOW['nan']}"
    )
    assert record.exc_info is None


class _Seconds(float):
    """Seconds whose own conversion raises ``error``: the workload's code, run as it is read."""

    error: BaseException = ArithmeticError()

    def __float__(self) -> float:
        raise self.error


class _OddSeconds(_Failing):
    """A run() that returns, for each chunk size but native, a _Seconds raising ``error``."""

    def __init__(self, error: BaseException) -> None:
        super().__init__()
        self.error = error

    def run(self, chunk_size: int | None) -> float:
        seconds = super().run(chunk_size)
        if chunk_size is None:
            return seconds
        odd = _Seconds(seconds)
        odd.error = self.error
        return odd


@pytest.mark.parametrize(
    "error",
    [
        pytest.param(ArithmeticError("no seconds"), id="exception"),
        pytest.param(StopIteration("no seconds"), id="stopiteration"),
        pytest.param(asyncio.CancelledError("no seconds"), id="cancelled"),
        # chunktune's own type, raised by the workload's code: not chunktune's verdict
        pytest.param(chunktune.WorkloadError("no seconds"), id="workload-error"),
    ],
)
def test_a_number_whose_float_raises_is_named_as_read(isolated: Path, error: BaseException) -> None:
    """A number whose __float__ raises anything is named as 'reading what run(N) returned'."""
    # a StopIteration or a CancelledError, wrapped for the trip, read "run(26) raised ..."
    d = chunktune.resolve_sync(_OddSeconds(error), policy="quick")
    assert d.source == "fallback"
    assert d.reason.endswith(
        f"(reading what run({_first_candidate()}) returned raised "
        f"{type(error).__name__}: no seconds)"
    ), d.reason


def _first_candidate() -> int | None:
    """The chunk size of a clean sweep's first call that is not native's."""
    calls, _ = _clean_calls()
    return next(c for c in calls if c is not None)


class _Unreadable(Exception):
    def __str__(self) -> str:
        raise ValueError("no message")


class _Mute(_Failing):
    """A run() whose exception cannot say its message: its __str__ raises."""

    def run(self, chunk_size: int | None) -> float:
        raise _Unreadable


def test_an_exception_whose_message_raises_is_the_workload_s_failure(isolated: Path) -> None:
    """An exception whose __str__ raises is still the workload's failure, not chunktune's bug."""
    # it read "chunktune failed while resolving (ValueError: no message; a bug in chunktune"
    d = chunktune.resolve_sync(_Mute(), policy="quick")
    assert d.source == "fallback"
    assert d.reason == (
        f"kept the native chunk {NATIVE}: the workload failed while measuring "
        "(run(None) raised _Unreadable (its message could not be read))"
    )


_TUNE = """
import sys
from chunktune._cli import _tune_cmd, main

class Raising:
    num_envs, nthread = 256, 2

    def signature(self):
        return {"kind": "test.run_failures.cli"}

    def run(self, chunk_size):
        raise RuntimeError("step 41\\n\\x1b[31mdiverged")

_tune_cmd.load_workload = lambda args, nthread: (Raising(), "x")
sys.exit(main(["tune", "--policy", "quick", *sys.argv[1:]]))
"""


@pytest.mark.parametrize("json_", [False, True], ids=["table", "json"])
def test_tune_shows_the_same_reason_on_one_line_without_a_traceback(
    isolated: Path, json_: bool
) -> None:
    """`chunktune tune` prints the call, escaped, on one line; its stderr has no traceback."""
    done = subprocess.run(
        [sys.executable, "-c", _TUNE, *(["--json"] if json_ else [])],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 1, done.stderr
    said = 'run(None) raised RuntimeError: "step 41\\n\\u001B[31mdiverged")'
    for stream in (done.stdout, done.stderr):
        assert _printable(stream.replace("\n", "")), stream
    assert "Traceback" not in done.stderr
    assert f"chunktune: workload failed while measuring: {said[:-1]}\n" in done.stderr
    (line,) = [ln for ln in done.stderr.splitlines() if ln.startswith("chunktune: warning: ")]
    assert line.endswith(said)
    if json_:
        assert json.loads(done.stdout)["reason"] == line.removeprefix("chunktune: warning: ")
    else:
        assert [ln for ln in done.stdout.splitlines() if ln.endswith(said)], done.stdout
