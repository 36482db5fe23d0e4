"""A failure's traceback is logged at WARNING once per process; its repeats, one line each."""

from __future__ import annotations

import logging
import os
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from _forking import run_forked

import chunktune
from chunktune import (
    Decision,
    _tracebacks,
)
from chunktune._failures import log_bug

LINE = "chunktune: workload failed while measuring: run(None) raised RuntimeError: "


class _Broken:
    """A workload whose every run() raises ``RuntimeError(message)``; ``which`` keys it."""

    num_envs = 256
    nthread = 2

    def __init__(self, message: str = "env 3 diverged", which: str = "a") -> None:
        self.message = message
        self.which = which

    def signature(self) -> dict[str, str]:
        return {"kind": "test.tracebacks", "which": self.which}

    def run(self, chunk_size: int | None) -> float:
        raise RuntimeError(self.message)


@pytest.fixture
def logged(caplog: pytest.LogCaptureFixture) -> Iterator[pytest.LogCaptureFixture]:
    with caplog.at_level(logging.WARNING, logger="chunktune"):
        yield caplog


def _tracebacks_at(caplog: pytest.LogCaptureFixture, level: int) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.levelno == level and r.exc_info is not None]


def _lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    """The WARNING records without a traceback, as their messages."""
    return [
        r.getMessage()
        for r in caplog.records
        if r.levelno == logging.WARNING and r.exc_info is None
    ]


def test_a_repeated_failure_logs_its_traceback_once(
    isolated: Path, logged: pytest.LogCaptureFixture
) -> None:
    """Three resolves of a failing key: one traceback at WARNING, then two one-line warnings."""
    # every resolve logged the same traceback at WARNING
    for _ in range(3):
        chunktune.resolve_sync(_Broken())
    (first,) = _tracebacks_at(logged, logging.WARNING)
    assert first.getMessage() == LINE + "env 3 diverged"
    assert first.exc_info is not None and isinstance(first.exc_info[1], RuntimeError)
    assert _lines(logged) == [LINE + "env 3 diverged" + _tracebacks.AGAIN] * 2
    assert "raise RuntimeError(self.message)" in logged.text  # the traceback, once
    assert logged.text.count("raise RuntimeError(self.message)") == 1


def test_the_decisions_and_the_cache_are_as_before(
    isolated: Path, logged: pytest.LogCaptureFixture
) -> None:
    """A repeat's decision is the first's, reason and all, and nothing is cached."""
    first, again = (chunktune.resolve_sync(_Broken()) for _ in range(2))
    assert first == again and first.source == "fallback", again.reason
    assert first.reason.endswith("(run(None) raised RuntimeError: env 3 diverged)")
    assert not (isolated / "cache.json").exists()
    assert len(_tracebacks_at(logged, logging.WARNING)) == 1  # and the log did say it once


@pytest.mark.parametrize(
    "other",
    [
        pytest.param(_Broken("env 4 diverged"), id="another-message"),
        pytest.param(_Broken(which="b"), id="another-key"),
    ],
)
def test_another_failure_or_key_gets_its_own_traceback(
    isolated: Path, logged: pytest.LogCaptureFixture, other: _Broken
) -> None:
    """A different message of the same key, or the same failure of another key: a traceback each."""
    for workload in (_Broken(), other, _Broken(), other):
        chunktune.resolve_sync(workload)
    told = _tracebacks_at(logged, logging.WARNING)
    assert [r.getMessage() for r in told] == [LINE + "env 3 diverged", LINE + other.message]
    assert len(_lines(logged)) == 2


def test_another_exception_type_gets_its_own_traceback(
    isolated: Path, logged: pytest.LogCaptureFixture
) -> None:
    """The same message raised as another exception type is another failure: its own traceback."""

    class Other(_Broken):
        def run(self, chunk_size: int | None) -> float:
            raise ValueError(self.message)

    for workload in (_Broken(), Other(), Other()):
        chunktune.resolve_sync(workload)
    told = _tracebacks_at(logged, logging.WARNING)
    assert [type(r.exc_info[1]).__name__ for r in told if r.exc_info] == [
        "RuntimeError",
        "ValueError",
    ]


def test_debug_keeps_every_traceback(isolated: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Logging at DEBUG: each repeat's traceback is logged at DEBUG, with the reason's line."""
    with caplog.at_level(logging.DEBUG, logger="chunktune"):
        for _ in range(3):
            chunktune.resolve_sync(_Broken())
    assert len(_tracebacks_at(caplog, logging.WARNING)) == 1
    repeats = _tracebacks_at(caplog, logging.DEBUG)
    assert [r.getMessage() for r in repeats] == [LINE + "env 3 diverged"] * 2
    assert caplog.text.count("raise RuntimeError(self.message)") == 3


@pytest.mark.anyio
async def test_resolve_on_either_loop_logs_the_traceback_once(
    isolated: Path, logged: pytest.LogCaptureFixture
) -> None:
    """await resolve() on asyncio and on trio: one traceback, then a one-line warning."""
    for _ in range(2):
        d = await chunktune.resolve(_Broken())
        assert d.source == "fallback"
    assert len(_tracebacks_at(logged, logging.WARNING)) == 1
    assert _lines(logged) == [LINE + "env 3 diverged" + _tracebacks.AGAIN]


def test_threads_resolving_a_failing_key_log_one_traceback(
    isolated: Path, logged: pytest.LogCaptureFixture
) -> None:
    """Eight threads each resolving the failing key twice: one traceback, every other one a line."""
    decisions: list[Decision] = []

    def resolving() -> None:
        for _ in range(2):
            decisions.append(chunktune.resolve_sync(_Broken()))

    threads = [threading.Thread(target=resolving) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(decisions) == 16 and {d.source for d in decisions} == {"fallback"}
    assert len(_tracebacks_at(logged, logging.WARNING)) == 1
    # a resolve that shared another's sweep logs nothing of its own
    assert all(line.endswith(_tracebacks.AGAIN) for line in _lines(logged))


def test_a_bug_of_chunktune_s_logs_its_traceback_once(logged: pytest.LogCaptureFixture) -> None:
    """log_bug: the same bug while doing the same thing, one traceback; another doing, its own."""
    # every call logged the bug's traceback at WARNING
    bug = TypeError("unsupported operand")
    for doing in ("keying the workload", "keying the workload", "measuring"):
        log_bug(bug, doing)
    told = _tracebacks_at(logged, logging.WARNING)
    assert ["keying the workload" in r.getMessage() for r in told] == [True, False]
    (line,) = _lines(logged)
    assert line.startswith("chunktune: chunktune failed while keying the workload (TypeError)")
    assert line.endswith(_tracebacks.AGAIN)


def test_the_failures_remembered_are_bounded() -> None:
    """Past MAX_FAILURES others, the first failure is forgotten: its traceback is logged again."""
    oldest = RuntimeError("oldest")
    assert _tracebacks.first("key", oldest) and not _tracebacks.first("key", oldest)
    for n in range(_tracebacks.MAX_FAILURES):
        _tracebacks.first(f"key {n}", oldest)
    assert len(_tracebacks._met) == _tracebacks.MAX_FAILURES
    assert _tracebacks.first("key", oldest)


def test_a_failure_met_again_is_remembered_longer() -> None:
    """A failure met again is the newest: the others, met once, are forgotten before it."""
    failure = RuntimeError("recurring")
    _tracebacks.first("key", failure)
    for n in range(_tracebacks.MAX_FAILURES - 1):
        _tracebacks.first(f"key {n}", failure)
    assert not _tracebacks.first("key", failure)  # met again: the newest now
    _tracebacks.first("one more", failure)
    assert not _tracebacks.first("key", failure)


def test_a_message_that_cannot_be_read_is_one_failure() -> None:
    """An exception whose __str__ raises is remembered as such: its repeat is a repeat."""

    class Unreadable(Exception):
        def __str__(self) -> str:
            raise ValueError("no message")

    assert _tracebacks.first("key", Unreadable())
    assert not _tracebacks.first("key", Unreadable())


def test_a_warning_said_once_is_never_taken_for_a_failure_met() -> None:
    """first_time's memory of three strings never answers for a failure's, nor the reverse."""

    class Odd(Exception):
        pass

    # a failure whose about, type and message spell what first_time is told
    Odd.__module__, Odd.__qualname__ = "newer cache entry", "c.json"
    assert _tracebacks.first("said", Odd("key.p"))
    assert _tracebacks.first_time("newer cache entry", "c.json", "key.p")
    assert not _tracebacks.first_time("newer cache entry", "c.json", "key.p")


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork")
def test_a_fork_child_logs_the_traceback_again() -> None:
    """A child forked after a failure logs it with its traceback: its log may be another file."""
    failure = RuntimeError("broken")
    _tracebacks.first("key", failure)

    def child() -> None:  # exits 0 where the failure is new to the child
        sys.exit(0 if _tracebacks.first("key", failure) else 3)

    # run_forked: the child never returns into pytest, whatever it raises
    assert run_forked(child, hang_guard_s=60) == 0
    assert not _tracebacks.first("key", failure)  # the parent still remembers it


def test_what_is_said_once_never_shares_a_failures_memory() -> None:
    """first_time of the very strings a failure's identity is made of is still a first time."""
    about = "tracebacks test: said once"
    assert _tracebacks.first(about, ValueError("same words"))
    assert _tracebacks.first_time(about, "builtins", "ValueError", "same words")
    assert not _tracebacks.first_time(about, "builtins", "ValueError", "same words")
    assert not _tracebacks.first(about, ValueError("same words"))


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork")
def test_a_fork_child_remembers_failures_though_a_parent_thread_held_the_lock() -> None:
    """A child forked while the lock was held (another thread's) still tells first from repeat."""
    failure = RuntimeError("broken")

    def child() -> None:  # exits 0 where the child's own lock let it through twice
        first = _tracebacks.first("key", failure)
        sys.exit(0 if first and not _tracebacks.first("key", failure) else 3)

    with _tracebacks._lock:  # as a parent's thread logging at the fork holds it
        status = run_forked(child, hang_guard_s=10)
    assert status == 0


def _same_name_elsewhere() -> type[Exception]:
    """An exception class named as RuntimeError, of another module."""
    kind = type("RuntimeError", (Exception,), {})
    kind.__module__ = "someones.workload"
    return kind


def test_an_exception_of_another_module_with_the_same_name_is_another_failure() -> None:
    """A workload's own RuntimeError class is not the built-in: its traceback is logged too."""
    assert _tracebacks.first("key", RuntimeError("diverged"))
    assert _tracebacks.first("key", _same_name_elsewhere()("diverged"))


@pytest.mark.parametrize("raised", [RuntimeError, KeyError, AttributeError])
def test_a_message_that_raises_any_error_is_one_failure(raised: type[Exception]) -> None:
    """An exception whose __str__ raises any Exception is remembered; its repeat is a repeat."""

    class Unreadable(Exception):
        def __str__(self) -> str:
            raise raised("no message")

    assert _tracebacks.first("key", Unreadable())
    assert not _tracebacks.first("key", Unreadable())
