"""The command line: ``chunktune tune|cache|policy``. (Being built: see issue E.)"""

from __future__ import annotations

import sys
from collections.abc import Sequence


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit code."""
    print("chunktune: the command line is not built yet", file=sys.stderr)
    return 2
