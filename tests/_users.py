"""Children that run this very chunktune, as another user where the suite runs as root."""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
from pathlib import Path

import chunktune

NOBODY = 65534  # nobody's uid, and nogroup's gid, on Debian and its kin


def child_env() -> dict[str, str]:
    """The environment of a child that imports this very chunktune."""
    paths = [str(Path(chunktune.__file__).parent.parent), os.environ.get("PYTHONPATH", "")]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in paths if p)}


@functools.cache
def as_user(uid: int, gid: int) -> tuple[list[str], str]:
    """The command prefix that runs a child as user ``uid`` in group ``gid`` alone, or why
    there is none (only root can: setpriv from root)."""
    if os.geteuid() != 0:
        return [], "not running as root: no process of another user can be started"
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        return [], "running as root, and no setpriv to drop to an unprivileged user"
    prefix = [setpriv, f"--reuid={uid}", f"--regid={gid}", "--clear-groups"]
    probe = subprocess.run(
        [*prefix, sys.executable, "-c", "import chunktune"],
        env=child_env(),
        capture_output=True,
        text=True,
    )
    if probe.returncode != 0:
        return [], f"an unprivileged user cannot run this chunktune: {probe.stderr[-200:]}"
    return prefix, ""


def unprivileged() -> tuple[list[str], str]:
    """The command prefix that runs a child without root's power over permissions, or
    why there is none (no prefix where the suite is not root)."""
    if os.geteuid() != 0:
        return [], ""
    return as_user(NOBODY, NOBODY)
