"""Names given in a signature's place: a ``model_label``, a ``states_label``.

A label keys a family of models (or of initial states) by a name instead of their content;
it goes into every entry's signature, ``tune``'s header and ``cache list``'s line.
"""

from __future__ import annotations

from ._errors import InvalidArgumentError
from ._shown import shown_one, unprinted

__all__ = ["MAX_LABEL_CHARS", "MODEL_LABEL_NAMES", "check_label"]


MAX_LABEL_CHARS = 256
"""The most characters a label (``model_label``, ``states_label``) may have. It is a name:
it goes into every entry's signature, ``tune``'s header and ``cache list``, and one past
this length (a serialized model passed by mistake, say) would bloat each of them."""


def check_label(value: object, *, what: str, names: str) -> str | None:
    """Return ``value``, a name given in a signature's place (``what`` names the argument and
    ``names`` what it stands for), if it is None or a name: a string of 1 to
    :data:`MAX_LABEL_CHARS` characters, not only whitespace, every one of which prints.

    Raises:
        InvalidArgumentError: ``value`` is neither None nor such a string; the message
            names ``what``, the value and what is wrong with it.
    """
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        raise InvalidArgumentError(
            f"{what} {shown_one(value)} is not a name for {names} (a non-empty string)"
        )
    expected = f"expected a name that prints, of 1 to {MAX_LABEL_CHARS} characters"
    # a blank label prints as nothing in a header or a listing, and looks like no label
    if not value.strip():
        raise InvalidArgumentError(
            f"{what} {shown_one(value)} is not a name for {names}: it is only whitespace; "
            f"{expected}"
        )
    # written raw, a newline or an escape sequence would break tune's header and cache
    # list's line, or act on the terminal (a bidi override reorders what follows it)
    char = unprinted(value)
    if char is not None:
        raise InvalidArgumentError(
            f"{what} {shown_one(value)} is not a name for {names}: it holds a control character "
            f"({char}); {expected}"
        )
    if len(value) > MAX_LABEL_CHARS:
        raise InvalidArgumentError(
            f"{what} {shown_one(value)} is not a name for {names}: it is {len(value)} characters "
            f"long; {expected}"
        )
    return value


MODEL_LABEL_NAMES = "the model or its family of variants"
"""What a ``model_label`` stands for, in :func:`check_label`'s message."""
