"""Ctrl-C in the command's own process, in a library's, and in a wait on asyncio.run's loop."""

from __future__ import annotations

import asyncio
import functools
import re
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from types import FrameType
from typing import Any

import anyio
import anyio.to_thread
import pytest

from chunktune import _sigint
from chunktune._threads import run_beside, run_held

PYTHON = "/usr/bin/python3"
MAIN = "/site-packages/chunktune/__main__.py"  # sys.argv[0] under `python -m chunktune`


def _own_ctrl_c(signum: int, frame: FrameType | None) -> None:
    pass


@pytest.fixture
def ctrl_c() -> Iterator[None]:
    """SIGINT's handler Python's default for the test (a shell's background job has it
    ignored, and asyncio.run sets its own only over the default), then put back."""
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, before)


@pytest.fixture
def the_command(monkeypatch: pytest.MonkeyPatch) -> None:
    """This process reads as `chunktune tune`."""
    monkeypatch.setattr(sys, "argv", ["/usr/bin/chunktune", "tune"])
    monkeypatch.setattr(sys, "orig_argv", [PYTHON, "/usr/bin/chunktune", "tune"])


def _in_thread(func: Callable[[], object]) -> list[BaseException]:
    """What ``func()`` raised in a thread of its own (nothing: [])."""
    raised: list[BaseException] = []

    def run() -> None:
        try:
            func()
        except BaseException as exc:
            raised.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(60)  # a hang guard, not a timing
    return raised


@pytest.mark.parametrize(
    ("argv", "orig_argv", "command"),
    [
        pytest.param(["/usr/bin/chunktune", "tune"], [], True, id="script"),
        pytest.param(["/opt/bin/chunktune.exe"], [], True, id="exe"),
        pytest.param(["/opt/bin/chunktune-script.py"], [], True, id="setuptools-script"),
        pytest.param([MAIN, "tune"], [PYTHON, "-m", "chunktune", "tune"], True, id="dash-m"),
        pytest.param([MAIN, "tune"], [PYTHON, "-mchunktune", "tune"], True, id="dash-m-joined"),
        pytest.param(
            [MAIN], [PYTHON, "-X", "dev", "-m", "chunktune", "cache", "list"], True, id="options"
        ),
        pytest.param([MAIN], [PYTHON, "-Im", "chunktune"], True, id="flags-joined"),
        pytest.param([MAIN], [PYTHON, "-Wignore", "-B", "-mchunktune"], True, id="joined-value"),
        pytest.param([MAIN], [PYTHON, "-Wignore", "-mchunktune"], True, id="joined-value-then-m"),
        # a joined value is no run of flags: its c is not -c
        pytest.param(
            [MAIN], [PYTHON, "-Wignore::ResourceWarning", "-m", "chunktune"], True, id="c-in-value"
        ),
        pytest.param(["train.py"], [PYTHON, "train.py"], False, id="a-script"),
        pytest.param(
            ["train.py", "-m", "chunktune"],
            [PYTHON, "train.py", "-m", "chunktune"],
            False,
            id="a-scripts-own-arguments",
        ),
        pytest.param(
            ["train.py", "-mchunktune"],
            [PYTHON, "-X", "dev", "train.py", "-mchunktune"],
            False,
            id="a-scripts-joined-argument",
        ),
        pytest.param(["-c"], [PYTHON, "-c", "pass", "-m", "chunktune"], False, id="dash-c"),
        # -c's command joined: "mchunktune" is code to run, not a module
        pytest.param(["-c"], [PYTHON, "-cmchunktune"], False, id="dash-c-joined"),
        pytest.param([MAIN], [PYTHON, "-W", "-m", "-m", "pytest"], False, id="w-takes-a-value"),
        pytest.param(["-"], [PYTHON, "-", "-m", "chunktune"], False, id="stdin"),
        pytest.param(
            ["/site-packages/pytest/__main__.py"], [PYTHON, "-m", "pytest"], False, id="another-m"
        ),
        pytest.param(["/x/__main__.py"], [PYTHON, "-m", "chunktune_x"], False, id="a-longer-name"),
        pytest.param(["/opt/bin/chunktune2"], [PYTHON, "/opt/bin/chunktune2"], False, id="alike"),
    ],
)
def test_the_command_is_told_by_its_argv(
    monkeypatch: pytest.MonkeyPatch, argv: list[str], orig_argv: list[str], command: bool
) -> None:
    """`chunktune`, its .exe and -script.py forms and `python -m chunktune` guard; others do not."""
    monkeypatch.setattr(sys, "argv", argv)
    monkeypatch.setattr(sys, "orig_argv", orig_argv)
    assert _sigint._is_the_command() is command


@pytest.mark.parametrize(
    "handler", [pytest.param(signal.SIG_IGN, id="ignored"), pytest.param(_own_ctrl_c, id="own")]
)
@pytest.mark.usefixtures("ctrl_c", "the_command")
def test_the_guard_leaves_a_handler_the_process_already_had(handler: Any) -> None:
    """In the command, a SIGINT already ignored (a background job) or handled stays so."""
    signal.signal(signal.SIGINT, handler)
    _sigint.guard()
    assert signal.getsignal(signal.SIGINT) is handler
    _sigint.release()
    assert signal.getsignal(signal.SIGINT) is handler


@pytest.mark.usefixtures("ctrl_c", "the_command")
def test_guard_and_release_on_another_thread_change_nothing() -> None:
    """guard() and release() off the main thread (which alone sets handlers) raise nothing."""
    assert _in_thread(_sigint.guard) == []
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    _sigint.guard()
    guarded = signal.getsignal(signal.SIGINT)
    assert guarded is not signal.default_int_handler
    assert _in_thread(_sigint.release) == []
    assert signal.getsignal(signal.SIGINT) is guarded
    _sigint.release()
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


@pytest.mark.usefixtures("ctrl_c")
def test_interruptible_leaves_a_partial_of_the_programs_own() -> None:
    """A handler that is a functools.partial, but not of asyncio's runner, is left in place."""
    own = functools.partial(_own_ctrl_c)
    signal.signal(signal.SIGINT, own)
    with _sigint.interruptible():
        assert signal.getsignal(signal.SIGINT) is own
    assert signal.getsignal(signal.SIGINT) is own


@pytest.mark.usefixtures("ctrl_c")
def test_interruptible_leaves_a_handler_of_the_programs_own() -> None:
    """Where SIGINT's handler is not asyncio.run's, a wait made interruptible changes nothing."""
    signal.signal(signal.SIGINT, _own_ctrl_c)
    with _sigint.interruptible():
        assert signal.getsignal(signal.SIGINT) is _own_ctrl_c
    assert signal.getsignal(signal.SIGINT) is _own_ctrl_c


@pytest.mark.usefixtures("ctrl_c")
def test_interruptible_on_asyncio_runs_loop_sets_its_handler_aside_for_the_wait() -> None:
    """On asyncio.run's thread: Python's default within, then asyncio's very handler or one set."""
    seen: list[bool] = []

    async def main() -> None:
        asyncios = signal.getsignal(signal.SIGINT)
        with _sigint.interruptible():
            seen.append(signal.getsignal(signal.SIGINT) is signal.default_int_handler)
        seen.append(signal.getsignal(signal.SIGINT) is asyncios)
        with _sigint.interruptible():
            signal.signal(signal.SIGINT, _own_ctrl_c)  # as another signal's handler may
        seen.append(signal.getsignal(signal.SIGINT) is _own_ctrl_c)
        signal.signal(signal.SIGINT, asyncios)  # asyncio.run puts back only over its own

    asyncio.run(main())
    assert seen == [True, True, True]


@pytest.mark.usefixtures("ctrl_c")
def test_a_wait_beside_in_a_worker_thread_under_asyncio_run_answers() -> None:
    """run_beside from a worker thread of an asyncio.run loop waits and answers, raising nothing."""

    async def answer() -> int:
        return 7

    async def main() -> tuple[bool, int | None]:
        beside = functools.partial(run_beside, answer, timeout_s=60, name="chunktune test beside")
        return await anyio.to_thread.run_sync(beside)

    assert asyncio.run(main()) == (True, 7)


@pytest.mark.parametrize(
    "on_ctrl_c",
    [
        pytest.param(signal.default_int_handler, id="default"),
        pytest.param(signal.SIG_IGN, id="ignored"),
    ],
)
@pytest.mark.usefixtures("ctrl_c")
def test_sigterm_in_the_command_ends_it_as_ctrl_c_does(on_ctrl_c: Any) -> None:
    """Within terminated_as_interrupted, SIGTERM raises KeyboardInterrupt (SIGINT ignored too)."""
    signal.signal(signal.SIGINT, on_ctrl_c)
    before = signal.signal(signal.SIGTERM, signal.SIG_DFL)
    try:
        with pytest.raises(KeyboardInterrupt), _sigint.terminated_as_interrupted() as termination:
            # never the default here: it would end this process
            assert signal.getsignal(signal.SIGTERM) is termination
            signal.raise_signal(signal.SIGTERM)
        assert termination.came
        assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
    finally:
        signal.signal(signal.SIGTERM, before)


def test_sigterm_handled_by_the_process_already_is_left_alone() -> None:
    """A SIGTERM handler the process had (a trainer's own) is neither replaced nor reset."""
    before = signal.signal(signal.SIGTERM, _own_ctrl_c)
    try:
        with _sigint.terminated_as_interrupted() as termination:
            assert signal.getsignal(signal.SIGTERM) is _own_ctrl_c
            signal.raise_signal(signal.SIGTERM)
        assert not termination.came
        assert signal.getsignal(signal.SIGTERM) is _own_ctrl_c
    finally:
        signal.signal(signal.SIGTERM, before)


def test_the_signal_exit_codes_are_defined_once_for_the_whole_package() -> None:
    """130 and 143 are written in one module: the starting command and the CLI share them."""
    import ast
    from pathlib import Path

    from chunktune._cli import _common

    package = Path(_sigint.__file__).parent
    defined: dict[int, list[str]] = {130: [], 143: []}
    for file in sorted(package.rglob("*.py")):
        for node in ast.walk(ast.parse(file.read_text())):
            assigned = node.value if isinstance(node, ast.Assign) else None
            value = assigned.value if isinstance(assigned, ast.Constant) else None
            if isinstance(value, int) and not isinstance(value, bool) and value in defined:
                defined[value].append(str(file.relative_to(package)))
    assert defined == {130: ["_sigint.py"], 143: ["_sigint.py"]}
    assert (_common.EXIT_INTERRUPTED, _common.EXIT_TERMINATED) == (130, 143)


def test_a_ctrl_c_held_while_asyncio_run_closes_is_raised_after(ctrl_c: None) -> None:
    """Ctrl-C after LoopHold.closing on asyncio.run's loop raises only at end(), default back."""
    hold = _sigint.LoopHold()

    async def main() -> None:
        hold.closing()
        signal.raise_signal(signal.SIGINT)  # held: the task ends as if none came

    asyncio.run(main())
    assert isinstance(signal.getsignal(signal.SIGINT), _sigint._Held)  # asyncio.run left it
    with pytest.raises(KeyboardInterrupt):
        hold.end()
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_a_second_ctrl_c_while_a_loop_closes_raises_at_once() -> None:
    """A close that hangs gives way: the Ctrl-C after the one held raises there and then."""
    held = _sigint._Held()
    held(signal.SIGINT, None)
    with pytest.raises(KeyboardInterrupt):
        held(signal.SIGINT, None)


def test_closing_hold_leaves_a_programs_own_ctrl_c_alone(ctrl_c: None) -> None:
    """Under asyncio.run over a program's own SIGINT handler, closing and end change nothing."""
    signal.signal(signal.SIGINT, _own_ctrl_c)
    hold = _sigint.LoopHold()

    async def main() -> None:
        hold.closing()
        signal.raise_signal(signal.SIGINT)  # the program's: nothing held

    asyncio.run(main())
    hold.end()
    assert signal.getsignal(signal.SIGINT) is _own_ctrl_c


# Python as it warns of all it can: what is left unclosed, never awaited, destroyed pending
STRICT_PYTHON = [sys.executable, "-X", "dev", "-W", "error::ResourceWarning"]
# asyncio's debug mode, on under -X dev, names a callback that ran past 0.1 s (as a loaded
# machine makes the first of a child's): a line that depends on the load, not on chunktune
_SLOW_CALLBACK = re.compile(r"Executing .* took \d+\.\d+ seconds")

# A child that sends itself Ctrl-C at one moment of resolve_sync's own asyncio.run loop (its
# first reach of the step named, as the step returns or, for the close, as it begins), prints
# the KeyboardInterrupt's traceback, lets go of it (a loop or task it left says so then), and
# checks what is left before resolving again, as a notebook goes on after an interrupt.
AT_A_MOMENT = """
import asyncio, gc, os, signal, sys, threading, traceback

signal.signal(signal.SIGINT, signal.default_int_handler)  # a background job's is ignored

import chunktune
from chunktune.sim import SimulatedWorkload

moment, config = sys.argv[1:]
owner, name, after = {
    "loop-made": (asyncio.events, "new_event_loop", True),
    "task-to-make": (asyncio.BaseEventLoop, "create_task", False),
    "loop-closing": (asyncio.BaseEventLoop, "close", False),
}[moment]
original = getattr(owner, name)
came = []

def ctrl_c_there(*args, **kwargs):
    if came:  # the loop's own first call only, not the sweep's
        return original(*args, **kwargs)
    came.append(moment)
    if not after:
        signal.raise_signal(signal.SIGINT)
    made = original(*args, **kwargs)
    if after:
        signal.raise_signal(signal.SIGINT)  # handled here, before what was made is returned
    return made

setattr(owner, name, ctrl_c_there)
workload = SimulatedWorkload([1e-3] * 64, nthread=4)
settings = chunktune.load_settings(config)
fds, threads = set(os.listdir("/proc/self/fd")), set(threading.enumerate())
try:
    chunktune.resolve_sync(workload, settings=settings)
    sys.exit("returned")
except KeyboardInterrupt as exc:
    traceback.print_exception(exc)
gc.collect()
left = set(os.listdir("/proc/self/fd")) - fds
problems = [
    not came and "the moment never came",
    signal.getsignal(signal.SIGINT) is not signal.default_int_handler and "SIGINT's handler",
    set(threading.enumerate()) != threads and f"threads {threading.enumerate()}",
    left and f"file descriptors {sorted(left)}",
    chunktune.resolve_sync(workload, settings=settings).source not in ("benchmark", "cache")
    and "the next resolve",
]
sys.exit(", ".join(p for p in problems if p) or 130)
"""


@pytest.mark.parametrize(
    "moment",
    [
        pytest.param("loop-made", id="loop-made"),
        pytest.param("task-to-make", id="main-task-to-make"),
        pytest.param("loop-closing", id="loop-closing"),
    ],
)
def test_ctrl_c_as_resolve_syncs_own_loop_opens_or_closes_raises_it_alone(
    isolated: Path, moment: str
) -> None:
    """A Ctrl-C as resolve_sync's loop is made or closed: one KeyboardInterrupt, nothing else."""
    config = isolated / "quiet.toml"
    config.write_text('policy = "quick"\n[log]\nstderr = "never"\n')
    child = subprocess.run(
        [*STRICT_PYTHON, "-c", AT_A_MOMENT, moment, str(config)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    assert child.returncode == 130, child.stdout + child.stderr
    # the traceback's own lines are indented: no warning or "Exception ignored" besides
    # (but -X dev's asyncio debug mode, not chunktune, says when a loaded machine ran one
    # of the loop's callbacks past 0.1 s)
    unindented = [
        line
        for line in child.stderr.splitlines()
        if not line.startswith(" ") and not _SLOW_CALLBACK.fullmatch(line)
    ]
    assert unindented == ["Traceback (most recent call last):", "KeyboardInterrupt"], child.stderr


@pytest.mark.usefixtures("ctrl_c")
def test_ctrl_c_in_a_held_runs_task_cancels_it_and_raises_after() -> None:
    """Within run_held's task a Ctrl-C cancels it, as asyncio.run's handler does; then raised."""
    cancelled: list[bool] = []

    async def call() -> None:
        try:
            signal.raise_signal(signal.SIGINT)
            await anyio.sleep(60)  # a hang guard, not a timing: the Ctrl-C ends it
        except asyncio.CancelledError:
            cancelled.append(True)
            raise

    with pytest.raises(KeyboardInterrupt):
        run_held(call)
    assert cancelled == [True]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


@pytest.mark.usefixtures("ctrl_c")
def test_a_ctrl_c_whose_cancel_a_held_runs_task_took_is_raised_still() -> None:
    """A Ctrl-C that cancelled run_held's task raises after, though the task swallowed it."""

    async def call() -> str:
        try:
            signal.raise_signal(signal.SIGINT)
            await anyio.sleep(60)  # a hang guard, not a timing: the Ctrl-C ends it
        except asyncio.CancelledError:
            task = asyncio.current_task()
            assert task is not None
            task.uncancel()  # taken for its own: the task returns as if no cancel came
        return "decided"

    with pytest.raises(KeyboardInterrupt):
        run_held(call)
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


@pytest.mark.usefixtures("ctrl_c")
def test_a_held_runs_handler_is_set_aside_for_a_synchronous_wait() -> None:
    """interruptible() in run_held's task makes Ctrl-C raise there, then puts its handler back."""

    async def call() -> tuple[Any, Any]:
        handler = signal.getsignal(signal.SIGINT)
        with _sigint.interruptible():
            inside = signal.getsignal(signal.SIGINT)
        assert signal.getsignal(signal.SIGINT) is handler
        return handler, inside

    handler, inside = run_held(call)
    assert handler is not signal.default_int_handler
    assert inside is signal.default_int_handler
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


@pytest.mark.usefixtures("ctrl_c")
def test_a_held_run_leaves_a_programs_own_ctrl_c_alone() -> None:
    """Under a program's own SIGINT handler, run_held's loop opens, runs and closes with it."""
    signal.signal(signal.SIGINT, _own_ctrl_c)

    async def call() -> Any:
        signal.raise_signal(signal.SIGINT)  # the program's: nothing cancelled or held
        return signal.getsignal(signal.SIGINT)

    assert run_held(call) is _own_ctrl_c
    assert signal.getsignal(signal.SIGINT) is _own_ctrl_c


def test_a_held_run_off_the_main_thread_sets_no_handler() -> None:
    """run_held in a thread of its own leaves SIGINT's handler as it was, even while it runs."""
    seen: list[Any] = []
    before = signal.getsignal(signal.SIGINT)

    async def call() -> None:
        seen.append(signal.getsignal(signal.SIGINT))

    assert _in_thread(lambda: run_held(call)) == []
    assert seen == [before]
    assert signal.getsignal(signal.SIGINT) is before


def test_a_held_run_where_sigint_cannot_be_set_runs_unheld(ctrl_c: None) -> None:
    """Where setting SIGINT raises ValueError (an embedding's thread: gh-91880), run_held runs."""
    setting = signal.signal

    def refused(signum: int, handler: Any) -> Any:
        if signum == signal.SIGINT:  # as CPython says off the main interpreter's main thread
            raise ValueError("signal only works in main thread of the main interpreter")
        return setting(signum, handler)

    async def call() -> str:
        return "ran"

    with pytest.MonkeyPatch.context() as patch:  # undone before ctrl_c puts SIGINT back
        patch.setattr(signal, "signal", refused)
        assert run_held(call) == "ran"  # as asyncio.run runs there, without its handler
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
