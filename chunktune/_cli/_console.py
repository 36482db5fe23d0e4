"""rich's console as the commands use it: a closed pipe is a BrokenPipeError, not exit 1.

Its own module so that rich loads only when a command draws something: ``--help`` and
a refused argument never need it.
"""

from __future__ import annotations

from rich.console import Console

__all__ = ["PipeConsole"]


class PipeConsole(Console):
    """A rich console whose closed pipe raises ``BrokenPipeError`` for ``main`` to map."""

    def on_broken_pipe(self) -> None:
        """Quiet from now on, then ``BrokenPipeError`` (rich itself would exit 1)."""
        # rich would exit 1, the code of a failed workload; main() maps this to 141
        self.quiet = True
        raise BrokenPipeError
