"""The tail of a child script that calls its ``resolve(**kw)`` while Python shuts down.

The script before it defines ``resolve``; ``MANUAL`` in the tail is replaced by the name
of the entry point's manual keyword. ``argv[1]`` says where the call is made: "del", a
``__del__`` of an object that only the module table keeps, run as modules are torn down;
"weakref", a weakref callback run then; "manual", that ``__del__`` with the manual size 5;
"atexit", an atexit handler (Python is not finalizing yet: it measures as ever).
"""

from __future__ import annotations

import json
import subprocess
import sys

__all__ = ["at_teardown", "run_at_teardown"]

_TAIL = """
class Late:
    def __init__(self, **kw):
        self.kw = kw
    def __del__(self):
        resolve(**self.kw)

class Target:
    pass

where = sys.argv[1]
if where == "del":
    sys.modules["__late"] = Late()
elif where == "manual":
    sys.modules["__late"] = Late(MANUAL=5)
elif where == "weakref":
    target = Target()
    sys.modules["__target"] = target
    sys.modules["__ref"] = weakref.ref(target, lambda ref: resolve())
    del target
else:
    atexit.register(resolve)
"""


def at_teardown(script: str, manual: str) -> str:
    """``script`` (which imports atexit, sys and weakref and defines ``resolve``) and the tail."""
    return script + _TAIL.replace("MANUAL", manual)


def run_at_teardown(script: str, where: str, env: dict[str, str]) -> tuple[dict[str, object], str]:
    """What ``script`` (built by :func:`at_teardown`) wrote for ``where``, and its stderr."""
    done = subprocess.run(  # the timeout is a hang guard, not a timing
        [sys.executable, "-c", script, where],
        env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == 1, done.stdout + done.stderr
    said: dict[str, object] = json.loads(lines[0])
    return said, done.stderr
