"""Python's exit waits for the workload calls in flight and starts none (chunktune._exiting)."""

from __future__ import annotations

import atexit
import logging
import subprocess
import sys
import threading
import time
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import cast

import pytest
from _forking import run_forked
from _users import child_env

from chunktune import _exiting as _exit
from chunktune._errors import UsageError


@pytest.fixture(autouse=True)
def no_long_calls(monkeypatch: pytest.MonkeyPatch) -> None:
    """No call counted yet: the exit's wait is EXIT_WAIT_S, whatever other tests timed."""
    monkeypatch.setattr(_exit, "_longest_s", 0.0)


@pytest.fixture
def held(monkeypatch: pytest.MonkeyPatch) -> Iterator[threading.Lock]:
    """A call lock registered for the exit, as a workload's is, alone in the exit's list."""
    monkeypatch.setattr(_exit, "_locks", weakref.WeakSet())
    monkeypatch.setattr(_exit, "_exiting", False)
    monkeypatch.setattr(_exit, "_calls", 0)
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


@pytest.fixture
def quiet(monkeypatch: pytest.MonkeyPatch) -> None:
    """No call lock, no call in flight, the exit not begun: the calls counted alone."""
    monkeypatch.setattr(_exit, "_locks", weakref.WeakSet())
    monkeypatch.setattr(_exit, "_exiting", False)
    monkeypatch.setattr(_exit, "_calls", 0)
    monkeypatch.setattr(_exit, "EXIT_NOTICE_S", 0.05)


def test_the_exit_waits_for_a_call_counted_in_flight_in_another_thread(
    quiet: None, caplog: pytest.LogCaptureFixture
) -> None:
    """A probe counted in flight (any workload's) holds the exit until it returns, warned."""
    entered, returned = threading.Event(), threading.Event()

    def probe() -> None:
        with _exit.call_in_flight():
            entered.set()
            time.sleep(0.5)
            returned.set()

    threading.Thread(target=probe).start()
    assert entered.wait(60)
    with caplog.at_level(logging.WARNING, logger="chunktune"):
        _exit._wait_all()
    assert returned.is_set()
    assert "Python's exit is waiting, up to 10 s, for a MuJoCo pool call" in caplog.text


def test_no_call_starts_once_the_exit_has_begun(quiet: None) -> None:
    """After the exit's wait, call_in_flight refuses with a UsageError naming the exit."""
    _exit._wait_all()
    ran = []
    refused = pytest.raises(UsageError, match="Python is exiting: the sweep starts no probe")
    with refused, _exit.call_in_flight():
        ran.append(True)
    assert not ran
    assert _exit._calls == 0


def test_a_call_that_raises_is_no_longer_counted(quiet: None) -> None:
    """A call that fails leaves the count as it found it: the exit does not wait for it."""
    with pytest.raises(ZeroDivisionError), _exit.call_in_flight():
        assert _exit._calls == 1
        _ = 1 / 0
    assert _exit._calls == 0


@contextmanager
def _stuck_call() -> Iterator[None]:
    """A call counted in flight in another thread, stuck until the block ends."""
    release, entered = threading.Event(), threading.Event()

    def stuck() -> None:
        with _exit.call_in_flight():
            entered.set()
            release.wait(60)

    thread = threading.Thread(target=stuck)
    thread.start()
    try:
        assert entered.wait(60)
        yield
    finally:
        release.set()
        thread.join(60)


def test_a_stuck_probe_and_a_held_lock_are_given_up_on_together(
    quiet: None, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A stuck probe and a held lock are given up on together, one notice and one warning."""
    monkeypatch.setattr(_exit, "EXIT_WAIT_S", 0.3)
    lock = threading.Lock()
    _exit.wait_at_exit(lock)
    lock.acquire()
    try:
        with _stuck_call(), caplog.at_level(logging.WARNING, logger="chunktune"):
            _exit._wait_all()
    finally:
        lock.release()
    assert caplog.text.count("Python's exit is waiting") == 1
    assert caplog.text.count("did not return within 0.3 s") == 1


def test_a_forked_child_does_not_wait_for_its_parents_calls_in_flight(quiet: None) -> None:
    """A child forked while a call of its parent was counted in flight exits at once."""

    def child_exit() -> None:
        counted = _exit._calls
        _exit._wait_all()
        sys.exit(counted)

    with _exit.call_in_flight():
        status = run_forked(child_exit, hang_guard_s=60.0)
    assert status == 0


def test_the_exit_is_registered_once_when_first_needed(monkeypatch: pytest.MonkeyPatch) -> None:
    """The first call or lock registers the exit's wait with atexit; later ones do not again."""
    registered: list[object] = []
    monkeypatch.setattr(_exit, "_armed", False)
    monkeypatch.setattr(atexit, "register", registered.append)
    monkeypatch.setattr(_exit, "_locks", weakref.WeakSet())
    lock = threading.Lock()
    _exit.wait_at_exit(lock)
    with _exit.call_in_flight():
        pass
    assert registered == [_exit._wait_all]


class _Held:
    """A call lock that the exit's first ``held_for`` waits find held; it keeps their timeouts."""

    def __init__(self, held_for: int) -> None:
        self.held_for = held_for
        self.timeouts: list[float] = []

    def acquire(self, timeout: float = -1) -> bool:
        self.timeouts.append(timeout)
        return len(self.timeouts) > self.held_for

    def release(self) -> None:
        pass


@pytest.mark.parametrize(
    ("held_for", "notices", "given_up"),
    [
        pytest.param([0], 0, 0, id="free"),
        pytest.param([1, 1], 1, 0, id="two-slow"),
        pytest.param([10**6], 1, 1, id="stuck"),
    ],
)
def test_the_exit_waits_to_the_notice_then_to_the_limit_and_says_each_once(
    quiet: None,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    held_for: list[int],
    notices: int,
    given_up: int,
) -> None:
    """Each wait runs to EXIT_NOTICE_S, then to EXIT_WAIT_S; one notice, a give-up if stuck."""
    # a clock that stands still: each timeout is the whole bound, however the test thread
    # is scheduled (the fakes return at once, so nothing is waited out)
    monkeypatch.setattr(_exit, "_clock", lambda: 0.0)
    monkeypatch.setattr(_exit, "EXIT_NOTICE_S", 5.0)
    monkeypatch.setattr(_exit, "EXIT_WAIT_S", 10.0)
    locks = [_Held(n) for n in held_for]
    for lock in locks:
        _exit.wait_at_exit(cast(threading.Lock, lock))
    with caplog.at_level(logging.WARNING, logger="chunktune"):
        _exit._wait_all()
    assert caplog.text.count("Python's exit is waiting") == notices
    assert caplog.text.count("did not return within 10 s") == given_up
    first, *later = locks[0].timeouts
    assert 0.0 < first <= 5.0
    assert all(5.0 < t <= 10.0 for t in later)  # to the limit, not the notice again
    assert [len(lock.timeouts) for lock in locks] == [min(n + 1, 2) for n in held_for]


@pytest.mark.parametrize("first", ["call", "lock"])
def test_either_a_call_or_a_lock_registers_the_exit_alone(
    monkeypatch: pytest.MonkeyPatch, first: str
) -> None:
    """A call counted, or a lock registered, is enough to register the exit's wait."""
    registered: list[object] = []
    monkeypatch.setattr(_exit, "_armed", False)
    monkeypatch.setattr(atexit, "register", registered.append)
    monkeypatch.setattr(_exit, "_locks", weakref.WeakSet())
    lock = threading.Lock()
    if first == "call":
        with _exit.call_in_flight():
            pass
    else:
        _exit.wait_at_exit(lock)
    assert registered == [_exit._wait_all]


def test_a_child_forked_after_the_exit_began_starts_afresh(
    held: threading.Lock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Forked mid-exit, a parent thread in the guard: a child starts calls, waits for none."""
    monkeypatch.setattr(_exit, "EXIT_NOTICE_S", 0.05)
    monkeypatch.setattr(_exit, "EXIT_WAIT_S", 0.3)
    monkeypatch.setattr(_exit, "_exiting", True)  # the parent's exit has begun
    held.acquire()  # a parent's call in flight
    guarded, forked = threading.Event(), threading.Event()

    def hold_the_guard() -> None:
        with _exit._guard:
            guarded.set()
            forked.wait(60)

    def child() -> None:
        warned: list[logging.LogRecord] = []

        class Kept(logging.Handler):
            def emit(self, record: logging.LogRecord) -> None:
                warned.append(record)

        logging.getLogger("chunktune").addHandler(Kept())
        if not _exit._guard.acquire(timeout=5):  # a guard copied held would never be let go
            sys.exit(1)
        _exit._guard.release()
        try:
            with _exit.call_in_flight():
                pass
        except UsageError:
            sys.exit(2)
        _exit._wait_all()
        sys.exit(3 if warned else 0)

    thread = threading.Thread(target=hold_the_guard)
    thread.start()
    try:
        assert guarded.wait(60)
        status = run_forked(child, hang_guard_s=60.0)
    finally:
        forked.set()
        thread.join(60)
        held.release()
    assert status == 0


def test_the_exit_waits_twice_the_longest_call_counted_up_to_the_cap(
    quiet: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Calls of 4 s leave the wait at EXIT_WAIT_S; one of 30 s makes it 60 s; 100 s, the cap."""
    readings = iter([0.0, 4.0, 10.0, 40.0, 50.0, 150.0])
    monkeypatch.setattr(_exit, "_clock", lambda: next(readings))
    assert _exit.exit_wait_s() == _exit.EXIT_WAIT_S
    with _exit.call_in_flight():
        pass
    assert _exit.exit_wait_s() == _exit.EXIT_WAIT_S  # a 4 s call: 8 s is under 10 s
    with _exit.call_in_flight():
        pass
    assert _exit.exit_wait_s() == 60.0
    with _exit.call_in_flight():
        pass
    assert _exit.exit_wait_s() == _exit.EXIT_WAIT_CAP_S == 120.0


def test_an_exit_after_long_calls_waits_past_exit_wait_s_before_giving_up(
    quiet: None, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """After a 5 s call a stuck lock is waited for 10 s, not EXIT_WAIT_S, and warned so."""
    # a pool whose calls are slow is not taken for stuck: the give-up is at twice 5 s
    monkeypatch.setattr(_exit, "_clock", lambda: 0.0)  # each timeout its whole bound
    monkeypatch.setattr(_exit, "EXIT_WAIT_S", 1.0)
    monkeypatch.setattr(_exit, "_longest_s", 5.0)
    stuck = _Held(10**6)
    _exit.wait_at_exit(cast(threading.Lock, stuck))
    with caplog.at_level(logging.WARNING, logger="chunktune"):
        _exit._wait_all()
    first, later = stuck.timeouts
    assert first <= _exit.EXIT_NOTICE_S < 5.0 < later <= 10.0  # the fake returns at once
    assert "waiting, up to 10 s," in caplog.text
    assert "did not return within 10 s" in caplog.text


def test_the_exit_s_warnings_give_a_scaled_limit_to_three_figures(
    quiet: None, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A limit of twice a 10.9142 s call is told as "21.8 s", not "21.8284 s" (measured)."""
    monkeypatch.setattr(_exit, "_clock", lambda: 0.0)  # each timeout its whole bound
    monkeypatch.setattr(_exit, "_longest_s", 10.9142)
    stuck = _Held(10**6)
    _exit.wait_at_exit(cast(threading.Lock, stuck))
    with caplog.at_level(logging.WARNING, logger="chunktune"):
        _exit._wait_all()
    assert "waiting, up to 21.8 s," in caplog.text
    assert "did not return within 21.8 s;" in caplog.text


def test_a_call_s_end_wakes_the_exit_waiting_for_it(
    held: threading.Lock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An exit waiting on the calls in flight is woken as the last ends, not at its timeout."""
    # a Condition that says whether it was notified: an exit that is never woken would
    # wait out its whole bound (10 s, or twice the longest call) after every call ended
    woken: list[bool] = []

    class Noting(threading.Condition):
        def notify_all(self) -> None:
            woken.append(True)
            super().notify_all()

    monkeypatch.setattr(_exit, "_guard", Noting())
    with _exit.call_in_flight():
        assert not woken
    assert woken == [True]


_LATE_FIRST_PROBE = """
import atexit, sys, threading, time
from chunktune import _exiting

marks = open(sys.argv[1], "w")
began, entered = threading.Event(), threading.Event()

def probe():  # a daemon thread whose first probe starts once the exit has begun
    began.wait()
    with _exiting.call_in_flight():
        marks.write("started\\n"); marks.flush()
        entered.set()
        time.sleep(0.5)
        marks.write("returned\\n"); marks.flush()

def programs_own_handler():
    began.set()
    entered.wait(60)  # the probe in flight as the handler returns, however loaded the machine

threading.Thread(target=probe, daemon=True).start()
atexit.register(programs_own_handler)
"""


def test_a_first_probe_that_starts_during_the_program_s_exit_handlers_is_waited_for(
    tmp_path: Path,
) -> None:
    """A first probe started while the program's exit handlers run is waited for at exit."""
    marks = tmp_path / "marks"
    done = subprocess.run(
        [sys.executable, "-c", _LATE_FIRST_PROBE, str(marks)],
        env=child_env(),  # this very chunktune: the child runs in tmp_path, not the tree
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert marks.read_text().split() == ["started", "returned"]


def test_a_second_wait_after_giving_up_on_a_stuck_call_returns_at_once(
    quiet: None, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The backstop after the armed wait gave up: no second wait, no second warning."""
    monkeypatch.setattr(_exit, "EXIT_WAIT_S", 0.2)
    with _stuck_call(), caplog.at_level(logging.WARNING, logger="chunktune"):
        _exit._wait_all()
        _exit._wait_all()  # the import-time backstop, run after the program's handlers
    assert caplog.text.count("did not return within 0.2 s") == 1


_HANDLER_BEFORE_IMPORT = """
import atexit

def tune_at_exit():  # registered before chunktune is imported: it runs after its backstop
    import chunktune
    from chunktune.sim import SimulatedWorkload

    w = SimulatedWorkload.from_layout("blocked", num_envs=64, nthread=4)
    d = chunktune.resolve_sync(w, policy="quick")
    print(d.source, w.calls, "Python is exiting" in d.reason)

atexit.register(tune_at_exit)
import chunktune  # no probe before the exit
"""


def test_a_handler_registered_before_the_import_runs_after_the_backstop_and_measures_nothing(
    tmp_path: Path,
) -> None:
    """A resolve in an exit handler registered before ``import chunktune`` measures nothing."""
    done = subprocess.run(
        [sys.executable, "-c", _HANDLER_BEFORE_IMPORT],
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["fallback", "0", "True"]
