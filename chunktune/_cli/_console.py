"""rich's console as the commands use it: a closed pipe is a BrokenPipeError, not exit 1.

Its own module so that rich loads only when a command draws something: ``--help`` and
a refused argument never need it.
"""

from __future__ import annotations

from rich.console import Console

__all__ = ["PipeConsole"]


class PipeConsole(Console):
    def on_broken_pipe(self) -> None:
        # rich would exit 1, the code of a failed workload; main() maps this to 141
        self.quiet = True
        raise BrokenPipeError
