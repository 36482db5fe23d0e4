"""Python's exit waits for a workload's pool call in flight (chunktune._mujoco._exit)."""

from __future__ import annotations

import logging
import threading
import time
import weakref
from collections.abc import Iterator

import pytest
from _forking import run_forked

from chunktune._mujoco import _exit


@pytest.fixture
def held(monkeypatch: pytest.MonkeyPatch) -> Iterator[threading.Lock]:
    """A call lock registered for the exit, as a workload's is, alone in the exit's list."""
    monkeypatch.setattr(_exit, "_locks", weakref.WeakSet())
    monkeypatch.setattr(_exit, "_exiting", False)
    lock = threading.Lock()
    _exit.wait_at_exit(lock)
    yield lock


def test_the_exit_waits_for_each_lock_lets_it_go_and_says_no_call_may_start(
    held: threading.Lock,
) -> None:
    """At exit each call lock is waited for and let go again, and exiting() turns true."""
    assert not _exit.exiting()
    _exit._wait_all()
    assert _exit.exiting()
    assert not held.locked()  # free for a program's own exit handler to close() with


def test_the_exit_waits_for_a_call_in_flight_and_warns_while_it_waits(
    held: threading.Lock, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A call in flight holds the exit until it returns, with a warning once it is slow."""
    monkeypatch.setattr(_exit, "EXIT_NOTICE_S", 0.05)
    held.acquire()
    returned = threading.Event()

    def call_in_flight() -> None:
        time.sleep(0.5)
        returned.set()
        held.release()

    threading.Thread(target=call_in_flight).start()
    with caplog.at_level(logging.WARNING, logger="chunktune"):
        _exit._wait_all()
    assert returned.is_set()
    assert not held.locked()
    assert "Python's exit is waiting, up to 10 s, for a MuJoCo pool call" in caplog.text


def test_a_call_that_never_returns_holds_the_exit_for_the_wait_at_most(
    held: threading.Lock, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A stuck call is given up on after EXIT_WAIT_S, with a warning, and the exit goes on."""
    monkeypatch.setattr(_exit, "EXIT_NOTICE_S", 0.05)
    monkeypatch.setattr(_exit, "EXIT_WAIT_S", 0.3)
    held.acquire()  # a call that never returns
    try:
        with caplog.at_level(logging.WARNING, logger="chunktune"):
            _exit._wait_all()
        assert "did not return within 0.3 s; Python exits without waiting" in caplog.text
    finally:
        held.release()


def test_a_forked_child_does_not_wait_for_a_call_of_its_parent(held: threading.Lock) -> None:
    """A child forked while its parent's call held a lock exits at once: that call is not its."""
    held.acquire()
    try:
        status = run_forked(_exit._wait_all, hang_guard_s=60.0)
    finally:
        held.release()
    assert status == 0


def test_a_collected_workloads_lock_is_not_waited_for(monkeypatch: pytest.MonkeyPatch) -> None:
    """A lock whose workload is gone is dropped from the exit's list."""
    monkeypatch.setattr(_exit, "_locks", weakref.WeakSet())
    lock = threading.Lock()
    _exit.wait_at_exit(lock)
    before = len(_exit._locks)
    del lock
    assert len(_exit._locks) == before - 1
