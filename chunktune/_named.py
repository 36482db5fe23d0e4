"""An exception named on one message line: its type and its message, escaped and bounded.

Apart from ``_failures`` (who a failure is blamed on), which imports ``_workload``:
``_workload`` names what a workload's member raised through here too, without a cycle.
"""

from __future__ import annotations

from ._shown import shown_line, type_named

__all__ = ["UNREAD", "named", "told"]

UNREAD = "(its message could not be read)"
"""What stands for a message whose ``__str__`` raised."""


def told(exc: BaseException) -> str | None:
    """``exc``'s message on one line, escaped and bounded (:func:`~chunktune._shown.shown_line`);
    None where its ``__str__`` raised."""
    try:
        message = str(exc)
    except Exception:
        # a workload's exception whose __str__ raises is still the workload's failure: a
        # message that raised here would blame chunktune for it
        return None
    return shown_line(message)


def named(exc: BaseException) -> str:
    """``exc`` as a decision's reason names it: its type, and its message if it has one, on
    one line and bounded (:func:`~chunktune._shown.shown_line`: a workload's message is
    anyone's text, a newline or an escape sequence in it included, and so is its class's
    name)."""
    kind = type_named(exc)
    message = told(exc)
    if message is None:
        return f"{kind} {UNREAD}"
    return f"{kind}: {message}" if message else kind
