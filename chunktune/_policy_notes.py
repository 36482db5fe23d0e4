"""What a broken cross-field rule of a policy says after each value it did not set itself.

The loader knows where an inherited value came from, the record does not: without a
note, ``hard_limit_s 40`` of a policy that extends ``patient`` read as a value the user
wrote. ``_config`` sets the notes (:func:`noted`) while it builds a policy again to word
its problems; ``Policy.__attrs_post_init__`` reads them (:func:`notes_now`). A policy
built in code has none.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from contextvars import ContextVar

__all__ = ["DEFAULT_NOTE", "names_noted", "note_of", "noted", "notes_now"]

DEFAULT_NOTE = "the default"
"""The note of a value that no table of a policy's ``extends`` chain sets."""

# the notes of the policy being built, by field name (see noted())
_NOTES: ContextVar[Mapping[str, str] | None] = ContextVar("chunktune_policy_notes", default=None)


@contextlib.contextmanager
def noted(notes: Mapping[str, str]) -> Iterator[None]:
    """While a policy read from a file is built: a note for each value it does not set
    itself (``from preset "patient"``, ``the default``), which a broken cross-field rule
    puts after the value it names."""
    token = _NOTES.set(notes)
    try:
        yield
    finally:
        _NOTES.reset(token)


def notes_now() -> Mapping[str, str]:
    """The notes :func:`noted` set for the policy being built; empty outside it."""
    return _NOTES.get() or {}


def note_of(name: str, notes: Mapping[str, str]) -> str:
    """`` (from preset "patient")`` after field ``name``'s value, or ``""`` for its own."""
    return f" ({notes[name]})" if name in notes else ""


def names_noted(names: list[str], notes: Mapping[str, str]) -> tuple[str, str]:
    """``race, paired and confirm``, and the note their values share (`` (the defaults)``,
    said once after what they are), or each name with its own note and ``""``."""
    said = {notes.get(name, "") for name in names}
    if len(said) == 1:
        words, shared = names, said.pop()
        if shared == DEFAULT_NOTE and len(names) > 1:
            shared += "s"  # several values, each its own default
    else:
        words, shared = [name + note_of(name, notes) for name in names], ""
    listed = ", ".join(words[:-1]) + (" and " if len(words) > 1 else "") + words[-1]
    return listed, f" ({shared})" if shared else ""
