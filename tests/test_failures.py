"""Who a failure during a resolve is blamed on: the workload, or chunktune's own code."""

from __future__ import annotations

import asyncio
import errno
import json
import logging
import re
import signal
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import attrs
import numpy as np
import pytest
import trio

import chunktune
from chunktune import Decision, compat
from chunktune._failures import log_bug
from chunktune._request import cache_entry
from chunktune._shown import unprinted
from chunktune._workload import SignatureValue
from chunktune.sim import Noise, SimulatedWorkload

CALLERS = ["sync", "asyncio", "trio"]


def uneven() -> SimulatedWorkload:
    return SimulatedWorkload.from_layout(
        "blocked", num_envs=512, nthread=8, noise=Noise(sigma=0.01)
    )


def resolved(caller: str, workload: chunktune.Workload) -> Decision:
    """``workload`` resolved by ``resolve_sync``, or by ``resolve`` on asyncio or trio."""
    if caller == "sync":
        return chunktune.resolve_sync(workload)

    async def main() -> Decision:
        return await chunktune.resolve(workload)

    return asyncio.run(main()) if caller == "asyncio" else trio.run(main)


def cache_entries(tmp: Path) -> dict[str, object]:
    path = tmp / "cache.json"
    return dict(json.loads(path.read_text())["entries"]) if path.exists() else {}


def _raising(exc: BaseException) -> Callable[..., Any]:
    def fail(*args: object, **kwargs: object) -> Any:
        raise exc

    return fail


def bugs_logged(caplog: pytest.LogCaptureFixture, exc: BaseException) -> list[logging.LogRecord]:
    """The warnings that logged ``exc`` with its traceback."""
    return [
        r
        for r in caplog.records
        if r.levelno == logging.WARNING and r.exc_info is not None and r.exc_info[1] is exc
    ]


@pytest.fixture
def logged(caplog: pytest.LogCaptureFixture) -> Iterator[pytest.LogCaptureFixture]:
    with caplog.at_level(logging.WARNING, logger="chunktune"):
        yield caplog


BUGS = [
    pytest.param(lambda: TypeError("unsupported operand"), id="TypeError"),
    pytest.param(lambda: MemoryError(), id="MemoryError"),
    pytest.param(lambda: RecursionError("maximum recursion depth exceeded"), id="RecursionError"),
]


@pytest.mark.parametrize("make", BUGS)
@pytest.mark.parametrize("caller", CALLERS)
def test_a_bug_in_the_sweep_keeps_native_and_blames_chunktune(
    isolated: Path,
    logged: pytest.LogCaptureFixture,
    caller: str,
    make: Callable[[], BaseException],
) -> None:
    """The sweep's own code raising: native, chunktune named, its traceback logged, uncached."""
    # it read "the workload failed while measuring", and logged no traceback to report
    bug = make()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("chunktune._sweep.run_rounds", _raising(bug))
        d = resolved(caller, uneven())
    assert (d.chunk_size, d.source) == (None, "fallback")
    name = type(bug).__name__
    assert d.reason.startswith(f"kept the native chunk {d.native_chunk}: chunktune failed while "
                               f"measuring ({name}"), d.reason  # fmt: skip
    assert "workload" not in d.reason and "nothing was cached" in d.reason
    assert len(bugs_logged(logged, bug)) == 1
    assert cache_entries(isolated) == {}
    assert resolved(caller, uneven()).source == "benchmark"  # nothing left locked or remembered


@pytest.mark.parametrize("caller", CALLERS)
def test_a_bug_while_keying_keeps_native_and_blames_chunktune(
    isolated: Path, monkeypatch: pytest.MonkeyPatch, logged: pytest.LogCaptureFixture, caller: str
) -> None:
    """The cache key's own code raising: native, chunktune named, not the workload's signature()."""
    # it read "the workload's signature() failed"
    bug = TypeError("unhashable type: 'dict'")
    monkeypatch.setattr("chunktune._keys.device_fingerprint", _raising(bug))
    d = resolved(caller, uneven())
    assert (d.chunk_size, d.source) == (None, "fallback")
    assert "chunktune failed while keying the workload (TypeError: unhashable" in d.reason
    assert "signature()" not in d.reason
    assert len(bugs_logged(logged, bug)) == 1
    assert cache_entries(isolated) == {}


@pytest.mark.parametrize(
    "where", ["chunktune._measure.cache_entry", "chunktune._cache.DecisionCache.put"]
)
@pytest.mark.parametrize("caller", CALLERS)
def test_a_bug_while_storing_keeps_the_decision_uncached(
    isolated: Path,
    logged: pytest.LogCaptureFixture,
    caller: str,
    where: str,
) -> None:
    """The cache entry's own code raising: the decision stands uncached, the bug logged."""
    # it raised out of resolve: the trainer lost the decision it had paid for
    bug = ValueError("bad entry")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(where, _raising(bug))
        d = resolved(caller, uneven())
    assert d.source == "benchmark"
    [told] = [r.getMessage() for r in bugs_logged(logged, bug)]
    assert told.startswith(
        f"chunktune: chunktune failed while storing {d.key[:12]} in the cache (the decision "
        "stands, uncached) (ValueError), a bug in chunktune"
    ), told
    assert cache_entries(isolated) == {}
    assert resolved(caller, uneven()).source == "benchmark"  # the key's lock was let go


class _Seconds(float):
    """A number of seconds whose own conversion fails: the workload's code, read by chunktune."""

    def __float__(self) -> float:
        raise ArithmeticError("no seconds")


class _Signature(Mapping[str, SignatureValue]):
    """A signature whose own iteration fails."""

    def __getitem__(self, key: str) -> SignatureValue:
        raise KeyError(key)

    def __iter__(self) -> Iterator[str]:
        raise LookupError("no keys")

    def __len__(self) -> int:
        return 1


@pytest.mark.parametrize(
    ("method", "said"),
    [
        pytest.param("run", "the workload failed while measuring (reading what run(", id="run"),
        pytest.param("signature", "the workload's signature() failed (LookupError", id="sig"),
    ],
)
def test_what_the_workload_returned_failing_to_read_is_its_failure(
    isolated: Path, method: str, said: str
) -> None:
    """run() or signature() returning a value whose own methods raise: the workload's failure."""

    class Odd(SimulatedWorkload):
        def run(self, chunk_size: int | None) -> float:
            seconds = super().run(chunk_size)
            return _Seconds(seconds) if method == "run" and self.calls >= 3 else seconds

        # a Mapping that is no dict, as the Workload protocol allows and SimulatedWorkload's is
        def signature(self) -> Mapping[str, SignatureValue]:  # type: ignore[override]
            return _Signature() if method == "signature" else super().signature()

    d = chunktune.resolve_sync(Odd(uneven().costs, nthread=8))
    assert d.source == "fallback" and said in d.reason, d.reason
    assert ("returned raised ArithmeticError: no seconds)" in d.reason) == (method == "run")
    assert cache_entries(isolated) == {}


class _Pool:
    """A pool with the older tuner's step signature."""

    def step(self, state: np.ndarray, **kwargs: object) -> None:
        time.sleep(1e-4)


class _Model:
    nq, nv, nu, nbody, njnt, ngeom, nsensordata = 7, 6, 2, 2, 1, 3, 0


def test_a_bug_in_the_sweep_answers_native_through_compat(
    isolated: Path, monkeypatch: pytest.MonkeyPatch, logged: pytest.LogCaptureFixture
) -> None:
    """compat.resolve_chunk_size over a sweep whose own code raises: None, never the error."""
    bug = TypeError("unsupported operand")
    monkeypatch.setattr("chunktune._sweep.run_rounds", _raising(bug))
    chunk = compat.resolve_chunk_size(
        pool=_Pool(), state=np.zeros((256, 8)), model=_Model(), n_variants=1, num_envs=256,
        nthread=4, dtype=np.float32, post_step_forward_sensor=False, bench_nsteps=1,
        manual_chunk_size=None, adaptive=True,
    )  # fmt: skip
    assert chunk is None
    assert len(bugs_logged(logged, bug)) == 1
    assert cache_entries(isolated) == {}


# A trainer whose file descriptors are spent (all but `free`, argv[1]) once chunktune is
# warm (its modules imported, its loop made): the settings file, which $CHUNKTUNE_CONFIG
# names, is then read afresh (argv[3] rewrites it: a file changed lately is never taken
# from memory). Prints the decision, or what it raised.
_NO_FDS_FOR_SETTINGS = """\
import asyncio, json, os, sys
import trio
import attrs

import chunktune
from chunktune.sim import SimulatedWorkload
free, caller = int(sys.argv[1]), sys.argv[2]
w = SimulatedWorkload.from_layout("blocked", num_envs=512, nthread=8)
given = chunktune.load_settings(os.environ["CHUNKTUNE_CONFIG"])
held = []
def spend():
    with open(os.environ["CHUNKTUNE_CONFIG"], "a") as file:
        file.write("\\n")  # changed lately: read again, not remembered
    try:
        while True:
            held.append(os.open(os.devnull, os.O_RDONLY))
    except OSError:
        pass
    for _ in range(free):
        os.close(held.pop())
def resolved():
    if caller == "sync":
        chunktune.resolve_sync(w, settings=given, refresh=True)
        spend()
        return chunktune.resolve_sync(w)
    if caller == "sync-limit":  # a Policy with hard_limit_s: the file is read on the loop
        limited = chunktune.Policy(hard_limit_s=60.0)
        chunktune.resolve_sync(w, settings=given, policy=limited, refresh=True)
        spend()
        return chunktune.resolve_sync(w, policy=limited)
    async def main():
        await chunktune.resolve(w, settings=given, refresh=True)
        spend()
        return await chunktune.resolve(w)
    return asyncio.run(main()) if caller == "asyncio" else trio.run(main)
try:
    d = resolved()
    said = [d.source, d.reason]
except BaseException as exc:
    said = ["raised", repr(exc)]
for fd in held:
    os.close(fd)
print(json.dumps(said), flush=True)
"""


def _limit_descriptors() -> None:
    import resource

    resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))


@pytest.mark.parametrize("caller", [*CALLERS, "sync-limit"])
def test_a_settings_file_unread_for_want_of_descriptors_gives_native(
    tmp_path: Path, caller: str
) -> None:
    """`ulimit -n` spent as the settings file is read: native, chunktune's reason, no raise."""
    # it raised ConfigError ("settings file ...: cannot read it: Too many open files") out of
    # resolve_sync into the trainer, as if the file were the user's mistake
    import os
    import subprocess
    import sys

    config = tmp_path / "chunktune.toml"
    config.write_text('policy = "quick"\n')
    env = {
        **os.environ,
        "CHUNKTUNE_CACHE": str(tmp_path / "c.json"),
        "CHUNKTUNE_SWEEP_LOCK": str(tmp_path / "sweep.lock"),
        "CHUNKTUNE_CONFIG": str(config),
    }
    # under hard_limit_s the file is read in a thread of resolve_sync's own loop: three
    # descriptors left make that loop (epoll, its wake-up pair), none the file's
    free = "3" if caller == "sync-limit" else "0"
    done = subprocess.run(  # the timeout is a hang guard, not a timing
        [sys.executable, "-c", _NO_FDS_FOR_SETTINGS, free, caller], env=env, cwd=tmp_path,
        capture_output=True, text=True, timeout=120, preexec_fn=_limit_descriptors,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    source, reason = json.loads(done.stdout)
    assert source == "fallback", reason
    assert f"chunktune could not open a file ([Errno 24] Too many open files: '{config}'" in reason


def test_the_cli_says_a_settings_file_unread_for_want_of_descriptors_in_one_message(
    tmp_path: Path,
) -> None:
    """`chunktune tune` with `ulimit -n` spent as it reads the settings file: exit 2, one line."""
    import os
    import subprocess
    import sys

    config = tmp_path / "chunktune.toml"
    config.write_text('policy = "quick"\n')
    spend = (
        "import os, sys\n"
        "from chunktune._cli import main\n"
        "held = []\n"
        "try:\n"
        "    while True: held.append(os.open(os.devnull, os.O_RDONLY))\n"
        "except OSError: pass\n"
        "sys.exit(main(['policy', 'show', '--config', sys.argv[1]]))\n"
    )
    done = subprocess.run(  # the timeout is a hang guard, not a timing
        [sys.executable, "-c", spend, str(config)], env={**os.environ}, cwd=tmp_path,
        capture_output=True, text=True, timeout=120, preexec_fn=_limit_descriptors,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert "Too many open files" in done.stderr and "Traceback" not in done.stderr


class _Shifting:
    """A simulated pool whose ``num_envs`` property says ``later`` once it has been read
    twice (``check_workload``'s ``hasattr`` and its value, as the resolve is called)."""

    def __init__(self, later: object) -> None:
        self.inner = uneven()
        self.later, self.reads, self.nthread = later, 0, 8

    @property
    def num_envs(self) -> int:
        self.reads += 1
        if self.reads <= 2:
            return 512
        if isinstance(self.later, BaseException):
            raise self.later
        return self.later  # type: ignore[return-value]

    def signature(self) -> Mapping[str, SignatureValue]:
        return self.inner.signature()

    def run(self, chunk_size: int | None) -> float:
        return self.inner.run(chunk_size)


@pytest.mark.parametrize(
    "later",
    [
        pytest.param(64, id="fewer"),
        pytest.param(100_000, id="more"),
        pytest.param("x", id="no-count"),
        pytest.param(AttributeError("gone"), id="raises"),
    ],
)
def test_the_counts_are_read_once_as_the_resolve_is_called(isolated: Path, later: object) -> None:
    """num_envs saying otherwise mid-sweep changes nothing: the sweep uses the counts asked."""
    # the sweep read them again: it raced against native 1250 while the decision said 6,
    # or read "x" and fell back blaming chunktune
    w = _Shifting(later)
    d = chunktune.resolve_sync(w)
    assert (d.source, d.native_chunk) == ("benchmark", 6), d.reason
    assert "native chunk 6" in d.reason and "1250" not in d.reason
    assert max(c for c in d.timings if c is not None) <= 64  # ceil(512 / 8)


def test_a_workload_failing_mid_sweep_is_logged_as_its_own_failure(
    isolated: Path, logged: pytest.LogCaptureFixture
) -> None:
    """run() raising mid-sweep logs one warning naming what it raised, and no bug of chunktune's."""

    class Failing(SimulatedWorkload):
        def run(self, chunk_size: int | None) -> float:
            if self.calls >= 3:
                raise KeyError("env")
            return super().run(chunk_size)

    d = chunktune.resolve_sync(Failing(uneven().costs, nthread=8))
    assert (d.source, d.chunk_size) == ("fallback", None)
    (said,) = [r for r in logged.records if r.levelno == logging.WARNING]
    assert re.fullmatch(
        r"chunktune: workload failed while measuring: run\((None|\d+)\) raised KeyError: 'env'",
        said.getMessage(),
    ), said.getMessage()


@pytest.mark.parametrize("method", ["run", "signature"])
def test_one_of_chunktune_s_errors_raised_by_the_workload_is_its_failure(
    isolated: Path, method: str
) -> None:
    """run() or signature() raising a ChunktuneError of its own: a fallback naming it."""
    # from signature() it was raised into the trainer (from run() it fell back)

    class Raising(SimulatedWorkload):
        def run(self, chunk_size: int | None) -> float:
            if method == "run" and self.calls >= 3:
                raise chunktune.TraceError("trace gone")
            return super().run(chunk_size)

        def signature(self) -> dict[str, SignatureValue]:
            if method == "signature":
                raise chunktune.TraceError("trace gone")
            return super().signature()

    d = chunktune.resolve_sync(Raising(uneven().costs, nthread=8))
    assert (d.source, d.chunk_size) == ("fallback", None)
    said = " raised TraceError: trace gone)" if method == "run" else "(TraceError: trace gone)"
    assert said in d.reason and "workload" in d.reason, d.reason
    assert cache_entries(isolated) == {}


def _guarded(resolving: Callable[[], Decision]) -> str:
    """The source of ``resolving()``'s decision, or "hung" if it has not answered within a
    minute (a lock left taken): a hang guard, not a timing."""
    import threading

    said: list[str] = []
    thread = threading.Thread(target=lambda: said.append(resolving().source), daemon=True)
    thread.start()
    thread.join(60)
    return said[0] if said else "hung"


@pytest.mark.parametrize(
    "where",
    [
        pytest.param("chunktune._miss.lookup", id="lookup-under-the-key-lock"),
        pytest.param("chunktune._flights.board", id="flights"),
        pytest.param("chunktune._locks.Lock.try_acquire", id="lock"),
        pytest.param("chunktune._here.only_native", id="in-memory"),
        pytest.param("chunktune._measure._sweeper", id="machine-taken"),
    ],
)
@pytest.mark.parametrize("caller", CALLERS)
def test_a_bug_elsewhere_in_the_resolve_flow_keeps_native_and_frees_the_key(
    isolated: Path, logged: pytest.LogCaptureFixture, caller: str, where: str
) -> None:
    """chunktune's code outside keying and measuring raising: native, logged, the key freed."""
    # it raised out of resolve; the bug after the sweep lock was taken also kept that lock,
    # so that every later sweep on the machine waited for it for good
    bug = TypeError("unsupported operand")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(where, _raising(bug))
        d = resolved(caller, uneven())
    assert (d.chunk_size, d.source) == (None, "fallback")
    said = f"kept the native chunk {d.native_chunk}: chunktune failed while resolving (TypeError"
    assert d.reason.startswith(f"{said}: unsupported operand"), d.reason
    assert "nothing was cached" in d.reason and d.policy == ""
    assert len(bugs_logged(logged, bug)) == 1
    assert cache_entries(isolated) == {}
    assert _guarded(lambda: resolved(caller, uneven())) == "benchmark"


@pytest.mark.parametrize(
    "where",
    [
        pytest.param("chunktune._here.recall", id="recall"),
        pytest.param("chunktune._here.remember", id="remember"),
        pytest.param("chunktune._report.headline", id="report"),
    ],
)
@pytest.mark.parametrize("caller", CALLERS)
def test_a_bug_in_memory_or_in_the_report_keeps_the_answer(
    isolated: Path, logged: pytest.LogCaptureFixture, caller: str, where: str
) -> None:
    """Recalling, remembering or reporting a decision raising: the hit is still the answer."""
    # it raised out of resolve: a cache hit, found and sound, lost to a shortcut or a log line
    logged.set_level(logging.DEBUG, logger="chunktune")  # every hit's line is then made
    w = uneven()
    assert resolved(caller, w).source == "benchmark"
    bug = TypeError("unhashable type: 'dict'")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(where, _raising(bug))
        d = resolved(caller, w)
    (entry,) = cache_entries(isolated).values()
    assert (d.source, d.chunk_size) == ("cache", entry["chunk_size"])  # type: ignore[index]
    assert len(bugs_logged(logged, bug)) >= 1
    assert resolved(caller, w).source == "cache"


@pytest.mark.parametrize(
    "make",
    [
        pytest.param(lambda: KeyboardInterrupt(), id="KeyboardInterrupt"),
        pytest.param(lambda: chunktune.CacheError("cache gone"), id="CacheError"),
        pytest.param(lambda: chunktune.InvalidArgumentError("bad"), id="InvalidArgumentError"),
    ],
)
@pytest.mark.parametrize("caller", CALLERS)
def test_an_interrupt_or_a_deliberate_error_in_the_flow_still_raises(
    isolated: Path, caller: str, make: Callable[[], BaseException]
) -> None:
    """Ctrl-C, or one of chunktune's own errors, raised in the flow reaches the caller."""
    # the guard against chunktune's bugs must not swallow these
    raised = make()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("chunktune._flights.board", _raising(raised))
        with pytest.raises(type(raised)) as caught:
            resolved(caller, uneven())
    assert caught.value is raised
    assert _guarded(lambda: resolved(caller, uneven())) == "benchmark"


@pytest.mark.parametrize("caller", CALLERS)
def test_ctrl_c_before_the_sweep_s_thread_takes_the_machine_over_frees_it(
    isolated: Path, caller: str
) -> None:
    """Ctrl-C between taking the sweep lock and handing it to the sweep's thread lets go of it."""
    # caught only as an Exception, Ctrl-C there kept the lock: every later sweep waited for good
    raised = KeyboardInterrupt()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("chunktune._measure._sweeper", _raising(raised))
        with pytest.raises(KeyboardInterrupt) as caught:
            resolved(caller, uneven())
    assert caught.value is raised
    assert _guarded(lambda: resolved(caller, uneven())) == "benchmark"


@pytest.mark.parametrize(
    ("policy", "named_as"),
    [
        pytest.param("quick", "quick", id="by-name"),
        pytest.param(chunktune.Policy(time_budget_s=0.5), "custom", id="object"),
    ],
)
def test_a_bug_in_the_flow_keeps_native_naming_the_policy_and_the_bug(
    isolated: Path, logged: pytest.LogCaptureFixture, policy: str | chunktune.Policy, named_as: str
) -> None:
    """A bug outside keying and measuring: the fallback names the policy asked for and a bug."""
    bug = TypeError("unsupported operand")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("chunktune._flights.board", _raising(bug))
        d = chunktune.resolve_sync(uneven(), policy=policy)
    assert (d.source, d.policy) == ("fallback", named_as)
    assert d.reason.endswith(
        "(TypeError: unsupported operand; a bug in chunktune, its traceback logged); "
        "nothing was cached"
    ), d.reason


@pytest.mark.parametrize(
    ("make", "said", "why"),
    [
        pytest.param(
            lambda: RuntimeError("can't start new thread"),
            "could not start a thread",
            "the process's thread limit, or memory for a stack, is spent",
            id="thread",
        ),
        pytest.param(
            lambda: OSError(errno.ENFILE, "Too many open files in system"),
            "could not open a file",
            "the process's file descriptors are spent",
            id="ENFILE",
        ),
    ],
)
@pytest.mark.parametrize(
    "where",
    [
        pytest.param("chunktune._keys.device_fingerprint", id="keying"),
        pytest.param("chunktune._flights.board", id="flights"),
    ],
)
@pytest.mark.parametrize("caller", CALLERS)
def test_threads_or_descriptors_spent_in_the_flow_give_native_with_a_warning(
    isolated: Path,
    logged: pytest.LogCaptureFixture,
    caller: str,
    where: str,
    make: Callable[[], BaseException],
    said: str,
    why: str,
) -> None:
    """The process out of threads or (system-wide) descriptors mid-flow: native, warned once."""
    spent = make()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(where, _raising(spent))
        d = resolved(caller, uneven())
    assert (d.source, d.chunk_size) == ("fallback", None)
    assert d.reason.endswith(f"chunktune {said} ({spent}: {why}); nothing was cached"), d.reason
    warned = [r for r in logged.records if r.levelno == logging.WARNING]
    assert [r.getMessage() for r in warned] == [f"chunktune: {d.reason}"]
    assert bugs_logged(logged, spent) == [] and cache_entries(isolated) == {}


def test_a_store_out_of_threads_keeps_the_decision_with_a_warning(
    isolated: Path, logged: pytest.LogCaptureFixture
) -> None:
    """The cache write failing for want of a thread: the decision stands, warned, no traceback."""
    spent = RuntimeError("can't start new thread")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("chunktune._cache.DecisionCache.put", _raising(spent))
        d = chunktune.resolve_sync(uneven())
    assert d.source == "benchmark" and cache_entries(isolated) == {}
    said = f"chunktune: cannot store {d.key[:12]} in the cache (can't start new thread)"
    assert [r.getMessage() for r in logged.records if r.levelno == logging.WARNING] == [said]
    assert bugs_logged(logged, spent) == []


def test_a_bug_in_the_sweep_keeps_the_key_the_policy_and_the_seconds_it_probed(
    isolated: Path, logged: pytest.LogCaptureFixture
) -> None:
    """The sweep's own code raising after its warmup: the fallback has the key, policy, seconds."""
    warmups: list[float] = []

    def on_progress(event: chunktune.ProgressEvent) -> None:
        if event.kind == "warmup":
            warmups.append(event.seconds or 0.0)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("chunktune._sweep.run_rounds", _raising(TypeError("unsupported operand")))
        d = chunktune.resolve_sync(uneven(), on_progress=on_progress)
    measured = chunktune.resolve_sync(uneven())
    assert (d.source, measured.source) == ("fallback", "benchmark")
    assert (d.key, d.policy) == (measured.key, measured.policy) and d.key and d.policy
    assert len(warmups) == 1 and d.probe_seconds == warmups[0] > 0


@pytest.mark.parametrize("caller", CALLERS)
def test_one_of_chunktune_s_own_errors_while_keying_still_raises(
    isolated: Path, logged: pytest.LogCaptureFixture, caller: str
) -> None:
    """A ChunktuneError raised by chunktune's keying reaches the caller, no bug logged."""
    raised = chunktune.CacheError("cache gone")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("chunktune._keys.device_fingerprint", _raising(raised))
        with pytest.raises(chunktune.CacheError) as caught:
            resolved(caller, uneven())
    assert caught.value is raised and bugs_logged(logged, raised) == []


class _Watchdog(Exception):
    """What a trainer's own signal handler raises (a watchdog's alarm, say)."""


@pytest.fixture
def watchdog() -> Iterator[Callable[[], None]]:
    """A SIGUSR1 handler that raises _Watchdog, installed as a trainer would; yields the
    call that fires it (the handler runs on the main thread at once)."""

    def bark(signum: int, frame: object) -> None:
        raise _Watchdog(f"signal {signum}")

    previous = signal.signal(signal.SIGUSR1, bark)
    try:
        yield lambda: signal.raise_signal(signal.SIGUSR1)
    finally:
        signal.signal(signal.SIGUSR1, previous)


def _firing(fire: Callable[[], None], original: Callable[..., Any]) -> Callable[..., Any]:
    def fired(*args: Any, **kwargs: Any) -> Any:
        fire()
        return original(*args, **kwargs)

    return fired


def test_a_trainer_s_signal_handler_raising_while_a_decision_is_reported_reaches_it(
    logged: pytest.LogCaptureFixture, watchdog: Callable[[], None]
) -> None:
    """The trainer's signal handler raising as a decision's line is made: raised, no bug logged."""
    from chunktune import _decision, _report

    settings = attrs.evolve(chunktune.load_settings(), log=chunktune.LogSettings(stderr="always"))
    hit = Decision(chunk_size=8, native_chunk=12, source="cache", reason="cached")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_report, "headline", _firing(watchdog, _decision.headline))
        with pytest.raises(_Watchdog):
            _report.report(hit, settings)
    assert [r for r in logged.records if "a bug in chunktune" in r.getMessage()] == []


@pytest.mark.parametrize("caller", CALLERS)
def test_a_trainer_s_signal_handler_raising_while_the_entry_is_built_reaches_it(
    isolated: Path, logged: pytest.LogCaptureFixture, watchdog: Callable[[], None], caller: str
) -> None:
    """The trainer's signal handler raising as the cache entry is built: raised, no bug logged."""
    # it was taken for chunktune's bug: the decision returned, the trainer's alarm lost
    from chunktune import _measure

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_measure, "cache_entry", _firing(watchdog, cache_entry))
        with pytest.raises(_Watchdog):
            resolved(caller, uneven())
    assert [r for r in logged.records if "a bug in chunktune" in r.getMessage()] == []
    assert resolved(caller, uneven()).source == "benchmark"  # the key's lock was let go
    assert len(cache_entries(isolated)) == 1


@pytest.mark.parametrize("caller", ["sync", "asyncio"])
def test_a_trainer_s_signal_handler_raising_during_the_sweep_reaches_it(
    isolated: Path, logged: pytest.LogCaptureFixture, watchdog: Callable[[], None], caller: str
) -> None:
    """The trainer's handler raising on the loop's thread while run() measures: raised."""
    # the loop's wait was interrupted: "chunktune failed while resolving", native returned
    inner = uneven()

    class Barking:
        num_envs, nthread = inner.num_envs, inner.nthread
        signature = inner.signature
        run = _firing(watchdog, inner.run)  # in the sweep's thread: the main thread barks

    with pytest.raises(_Watchdog):
        resolved(caller, Barking())
    assert [r for r in logged.records if "a bug in chunktune" in r.getMessage()] == []
    assert cache_entries(isolated) == {}


def test_a_trainer_s_signal_handler_raising_reaches_compat_s_caller(
    isolated: Path, logged: pytest.LogCaptureFixture, watchdog: Callable[[], None]
) -> None:
    """compat.resolve_chunk_size with the trainer's handler raising mid-resolve: raised."""
    from chunktune import _measure

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_measure, "cache_entry", _firing(watchdog, cache_entry))
        with pytest.raises(_Watchdog):
            compat.resolve_chunk_size(
                pool=_Pool(), state=np.zeros((256, 8)), model=_Model(), n_variants=1,
                num_envs=256, nthread=4, dtype=np.float32, post_step_forward_sensor=False,
                bench_nsteps=1, manual_chunk_size=None, adaptive=True,
            )  # fmt: skip
    assert [r for r in logged.records if "a bug in chunktune" in r.getMessage()] == []


def test_only_a_settings_file_s_error_is_looked_behind_for_spent_descriptors() -> None:
    """spent_cause looks behind a ConfigError to its cause, and behind nothing else."""
    from chunktune._failures import spent, spent_cause

    no_fd = OSError(errno.EMFILE, "Too many open files")
    unread = chunktune.ConfigError("cannot read chunktune.toml")
    unread.__cause__ = no_fd
    assert spent_cause(unread) is no_fd
    assert spent_cause(no_fd) is no_fd and spent(no_fd)
    assert spent_cause(chunktune.ConfigError("bad value")) is None
    other = RuntimeError("while opening")
    other.__cause__ = no_fd
    assert spent_cause(other) is None and not spent(other)


def _chunktune_raises() -> BaseException:
    """What chunktune's own code raises for a bad cache path, caught with its traceback."""
    from chunktune._cache_paths import checked_cache_path

    try:
        checked_cache_path(3)  # type: ignore[arg-type]
    except chunktune.CacheError as exc:
        return exc
    raise AssertionError("checked_cache_path(3) raised nothing")


def test_an_exception_is_chunktune_s_where_its_innermost_frame_is_in_chunktune() -> None:
    """Raised in chunktune's module: chunktune's; in a callback it called, or untraced: not."""
    from chunktune._cache_lookup import best_entry
    from chunktune._failures import raised_by_chunktune

    assert raised_by_chunktune(_chunktune_raises())

    def serves(entry: object) -> bool:
        raise LookupError("the caller's own code")

    own = cache_entry_for_lookup()
    with pytest.raises(LookupError) as caught:
        best_entry({"job.p": own}, "job", policy_hash="p", rule="r", effort=1, serves=serves)
    assert not raised_by_chunktune(caught.value)  # passed through chunktune, raised outside it
    assert not raised_by_chunktune(ValueError("never raised"))


def cache_entry_for_lookup() -> chunktune.CacheEntry:
    """A stored decision for best_entry to ask ``serves`` about."""
    return chunktune.CacheEntry(chunk_size=4, native_chunk=3, reason="test", timings={None: 0.01})


def test_a_signal_handler_wrapped_in_partials_is_still_the_trainer_s() -> None:
    """A handler installed as a functools.partial is found behind it for what it raised."""
    import functools

    from chunktune._failures import by_signal_handler

    def bark(name: str, signum: int, frame: object) -> None:
        raise _Watchdog(f"{name}: signal {signum}")

    previous = signal.signal(signal.SIGUSR1, functools.partial(bark, "watchdog"))
    try:
        with pytest.raises(_Watchdog) as caught:
            signal.raise_signal(signal.SIGUSR1)
        assert by_signal_handler(caught.value)  # while the handler is installed
        assert not by_signal_handler(_chunktune_raises())
    finally:
        signal.signal(signal.SIGUSR1, previous)


def test_a_bug_of_an_exception_class_named_by_anyone_is_logged_on_one_line(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """log_bug's line names an exception class called with a newline and an ESC, escaped."""
    kind = type("Bug\n\x1b[31m", (Exception,), {})
    with caplog.at_level(logging.WARNING, logger="chunktune"):
        log_bug(kind("x"), "choosing")
    (record,) = caplog.records
    message = record.getMessage()
    assert unprinted(message) is None and '("Bug\\n\\u001B[31m")' in message
