"""The exceptions chunktune raises.

Every error derives from :class:`ChunktuneError`, and each also subclasses the
built-in exception of the same meaning, so callers may catch either::

    ChunktuneError
    ├── ConfigError (ValueError)          a settings file or policy is invalid
    ├── WorkloadError (TypeError)         an object does not implement Workload, or breaks it
    ├── InvalidArgumentError (ValueError) a bad num_envs, nthread, chunk size, ...
    ├── CacheError (OSError)              a cache file cannot be read or written
    ├── TraceError (ValueError)           a recorded trace file is unreadable or malformed
    ├── OutputError (OSError)             a file asked for (a plot, say) cannot be written
    ├── UsageError (RuntimeError)         an API called where it cannot work
    └── MissingExtraError (ImportError)   an optional dependency (an extra) is not installed

A workload whose ``run()`` raises is not an error of chunktune's: ``resolve``
falls back to the native chunk and says why in ``Decision.reason``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ._shown import shown_path

__all__ = [
    "CacheError",
    "ChunktuneError",
    "ConfigError",
    "InvalidArgumentError",
    "MissingExtraError",
    "OutputError",
    "TraceError",
    "UsageError",
    "WorkloadError",
]


class ChunktuneError(Exception):
    """Base class of every error chunktune raises on purpose."""


class ConfigError(ChunktuneError, ValueError):
    """A settings file, policy or preset is invalid, or a policy asked for is unknown.

    ``problems`` holds one line per problem found (all of them, not just the
    first), each starting with its dotted TOML path (each key as TOML spells it:
    ``policies."my.policy".margin``); ``source`` names the file.
    ``asked``: the problem is a name the caller asked for (``resolve(policy=...)``), not
    the settings', and the message says only that. ``subject`` says what is invalid where
    no file is named: ``"settings"``, or ``"policy"`` for a :class:`~chunktune.Policy`
    (or a candidate strategy) built in code, which no settings file is to blame for.
    ``unread``: the file ``source`` names was not read at all (missing, a folder,
    unreadable, past the size cap), so the message names it as ``settings file SOURCE``,
    not as invalid settings.
    """

    def __init__(
        self,
        problems: Sequence[str] | str,
        *,
        source: str | None = None,
        asked: bool = False,
        subject: str = "settings",
        unread: bool = False,
    ) -> None:
        self.problems: tuple[str, ...] = (
            (problems,) if isinstance(problems, str) else tuple(problems)
        )
        self.source = source
        self.asked = asked
        self.subject = subject
        self.unread = unread
        super().__init__(self._render())

    def __reduce__(self) -> tuple[Any, ...]:
        # the default would call ConfigError(message): the message rendered twice, the
        # problems lost; an error that crosses processes (a Ray task's) must read the same
        return (
            _config_error,
            (self.problems, self.source, self.asked, self.subject, self.unread),
        )

    def _render(self) -> str:
        if self.asked and len(self.problems) == 1:
            # a name the caller asked for (resolve(policy=...)): the settings are not at fault
            return self.problems[0]
        # a file's problems are its settings' (a policy table's too): the file is named;
        # one not read at all holds no settings to call invalid
        # a file's name with a control character in it is shown escaped, never raw
        source = None if self.source is None else shown_path(self.source)
        if source and self.unread:
            where = f"settings file {source}"
        elif source:
            where = f"invalid settings in {source}"
        else:
            where = f"invalid {self.subject}"
        if len(self.problems) == 1:
            return f"{where}: {self.problems[0]}"
        lines = "\n".join(f"  - {p}" for p in self.problems)
        return f"{where} ({len(self.problems)} problems):\n{lines}"


def _config_error(
    problems: tuple[str, ...],
    source: str | None,
    asked: bool = False,
    subject: str = "settings",
    unread: bool = False,
) -> ConfigError:
    return ConfigError(problems, source=source, asked=asked, subject=subject, unread=unread)


class WorkloadError(ChunktuneError, TypeError):
    """An object handed to ``resolve`` does not implement the Workload protocol, or breaks
    it: a ``signature()`` value that is no str, int (of at most 4300 digits), finite float
    or bool (raised), or a ``run()`` that returns no seconds (the decision falls back to
    native, this in its reason).
    """


class InvalidArgumentError(ChunktuneError, ValueError):
    """An argument is out of range or of the wrong type."""


class CacheError(ChunktuneError, OSError):
    """A cache file cannot be read, written or imported."""


class TraceError(ChunktuneError, ValueError):
    """A trace file (``chunktune record``'s output) cannot be read or is malformed."""


class OutputError(ChunktuneError, OSError):
    """A file the caller asked for, other than the cache, cannot be written."""


class UsageError(ChunktuneError, RuntimeError):
    """An API was called in a context where it cannot work (e.g. a deadlock)."""


class MissingExtraError(ChunktuneError, ImportError):
    """An optional dependency is missing; the message names the extra that installs it."""
