"""Public names report the public module that exports them, not the private one.

Tracebacks, reprs and documentation tools then say ``chunktune.ConfigError``, never
``chunktune._errors.ConfigError``: the fix-up anyio, httpx and trio apply to what
their packages re-export.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterable

import attrs

__all__ = ["present_as"]


def present_as(module: str, objects: Iterable[object]) -> None:
    """Set ``__module__`` to ``module`` on each class and function defined in a private module.

    Other objects (constants, type aliases), and what a public module defines
    itself, are left as they are. An attrs class has its field types resolved
    first, in the module that wrote them: string annotations are evaluated in the
    namespace ``__module__`` names, where private helpers (``ClassVar``, a Literal
    alias) do not live, and cattrs and ``attrs.resolve_types`` then never need to.
    """
    for obj in objects:
        if not (inspect.isclass(obj) or inspect.isfunction(obj)):
            continue
        if not obj.__module__.startswith("chunktune._"):
            continue
        if inspect.isclass(obj) and attrs.has(obj):
            attrs.resolve_types(obj)
        obj.__module__ = module
