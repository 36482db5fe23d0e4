"""What a first resolve would import in a thread loads with chunktune: a fork meanwhile is safe."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
from _users import child_env

pytestmark = pytest.mark.slow

HANG_GUARD_S = 120.0

FIRST_RESOLVES = textwrap.dedent(
    """
    import asyncio, sys
    import mujoco
    import chunktune
    from chunktune.sim import SimulatedWorkload

    XML = '''<mujoco><worldbody><geom type="plane" size="2 2 0.1"/>
    <body pos="0 0 0.2"><freejoint/><geom type="box" size="0.05 0.05 0.05"/></body>
    </worldbody></mujoco>'''
    quick = chunktune.load_settings().get_policy("quick")
    a, b = (SimulatedWorkload([s] * 64, nthread=4, name=str(s)) for s in (1e-4, 2e-4))
    w = chunktune.RolloutWorkload(
        mujoco.MjModel.from_xml_string(XML), num_envs=16, nthread=2, nstep=3
    )
    loaded = set(sys.modules)
    chunktune.resolve_sync(a, policy=quick)
    chunktune.resolve_sync(a, policy=quick)  # a hit
    asyncio.run(chunktune.resolve(b))
    chunktune.resolve_sync(w, policy=quick)
    w.close()
    print(sorted(set(sys.modules) - loaded))
    """
)

# A parent thread's first resolve is caught inside any import it makes (a finder holds
# it there), or else mid-sweep; the parent forks; the child resolves a workload of its own.
FORK_DURING_A_FIRST_RESOLVE = textwrap.dedent(
    """
    import os, sys, threading, time
    import chunktune
    from chunktune.sim import SimulatedWorkload

    main = threading.main_thread()
    busy, release = threading.Event(), threading.Event()

    class HoldsImports:
        def find_spec(self, name, path, target=None):
            if threading.current_thread() is not main and not release.is_set():
                busy.set()  # an import under way in the parent's resolve
                release.wait(60)
            return None

    class Marks(SimulatedWorkload):
        __slots__ = ()

        def run(self, chunk_size):
            busy.set()
            return super().run(chunk_size)

    def resolve(name):
        w = Marks([1e-4] * 64, nthread=4, name=name)
        chunktune.resolve_sync(w, policy=chunktune.load_settings().get_policy("quick"))

    sys.meta_path.insert(0, HoldsImports())
    parent = threading.Thread(target=resolve, args=("parent",))
    parent.start()
    busy.wait(60)
    pid = os.fork()
    if pid == 0:
        resolve("child")
        os._exit(0)
    deadline = time.monotonic() + 30
    while not os.waitpid(pid, os.WNOHANG)[0]:
        if time.monotonic() > deadline:
            os.kill(pid, 9)
            print("the child hung")
            break
        time.sleep(0.01)
    else:
        print("the child resolved")
    release.set()
    parent.join()
    """
)


def _run(code: str) -> str:
    """``code`` in a fresh interpreter running this chunktune: what it printed last."""
    done = subprocess.run(
        [sys.executable, "-c", code],
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=HANG_GUARD_S,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.strip().splitlines()[-1]


def test_a_first_resolve_imports_nothing_that_did_not_load_with_chunktune() -> None:
    """First resolves (sync, asyncio, a hit, MuJoCo) import no module in their threads."""
    assert _run(FIRST_RESOLVES) == "[]"


def test_a_child_forked_during_a_first_resolve_in_another_thread_resolves() -> None:
    """A fork while a parent thread runs its first resolve leaves no import lock held."""
    assert _run(FORK_DURING_A_FIRST_RESOLVE) == "the child resolved"
