"""Public names report the public module that exports them, not the private one.

Tracebacks, reprs and documentation tools then say ``chunktune.ConfigError``, never
``chunktune._errors.ConfigError``: the fix-up anyio, httpx and trio apply to what
their packages re-export.
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Iterable

import attrs

__all__ = ["present_as"]


def present_as(module: str, objects: Iterable[object]) -> None:
    """Set ``__module__`` to ``module`` on each class and function defined in a private module.

    Other objects (constants, type aliases), and what a public module defines
    itself, are left as they are. A class has its annotations resolved first, in
    the module that wrote them: string annotations are evaluated in the namespace
    ``__module__`` names, where private helpers (``ClassVar``, a Literal alias) do not
    live, so ``typing.get_type_hints``, cattrs and ``attrs.resolve_types`` would fail
    there (a function's are evaluated in its own globals, which stay).
    """
    for obj in objects:
        if not (inspect.isclass(obj) or inspect.isfunction(obj)):
            continue
        if not obj.__module__.startswith("chunktune._"):
            continue
        if inspect.isclass(obj):
            _resolve_annotations(obj)
        obj.__module__ = module


def _resolve_annotations(cls: type) -> None:
    """Replace ``cls``'s own string annotations (and an attrs class's field types) by
    what they name where ``cls`` was written."""
    if attrs.has(cls):
        attrs.resolve_types(cls)
    own = inspect.get_annotations(cls)
    if own:
        hints = typing.get_type_hints(cls, include_extras=True)
        cls.__annotations__ = {name: hints.get(name, hint) for name, hint in own.items()}
