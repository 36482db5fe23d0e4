"""An exception named on one message line: its type and its message, escaped and bounded.

Apart from ``_failures`` (who a failure is blamed on), which imports ``_workload``:
``_workload`` names what a workload's member raised through here too, without a cycle.
"""

from __future__ import annotations

from ._shown import shown_line

__all__ = ["named"]


def named(exc: BaseException) -> str:
    """``exc`` as a decision's reason names it: its type, and its message if it has one, on
    one line and bounded (:func:`~chunktune._shown.shown_line`: a workload's message is
    anyone's text, a newline or an escape sequence in it included)."""
    kind = shown_line(type(exc).__name__)
    try:
        message = str(exc)
    except Exception:
        # a workload's exception whose __str__ raises is still the workload's failure: a
        # reason that raised here would blame chunktune for it
        return f"{kind} (its message could not be read)"
    return f"{kind}: {shown_line(message)}" if message else kind
