"""Tracebacks logged once: a failure's first at WARNING, its repeats one line and at DEBUG.

A trainer that resolves per epoch or per environment reset, with a workload broken for a
whole run (or a bug of chunktune's met on every resolve), would log the same traceback
hundreds of times and bury every other warning. So a failure is remembered by what it
happened to (a cache key; what chunktune was doing) and what it was (its exception's type
and message): its first traceback is logged at WARNING, a repeat logs its line at WARNING
saying the traceback was logged before, and its own traceback at DEBUG (a program logging
at DEBUG keeps every one). A different type, message, key or doing is a failure of its own.

The same memory says once what would repeat on every parse though nothing failed
(:func:`first_time`: a newer chunktune's entry of a cache file, once per file and key, or
per file and set of them past a sixteenth of this memory: :mod:`chunktune._cache_parsed`).

At most ``MAX_FAILURES`` are remembered, the least recently met let go first. Every
thread, and every event loop in it, shares them. A fork child forgets them: its log may
be another file than its parent's, and a traceback more is the worst of it.
"""

from __future__ import annotations

import hashlib
import logging
import os
import threading
from collections import OrderedDict
from collections.abc import Mapping

__all__ = ["AGAIN", "MAX_FAILURES", "first", "first_time", "forget", "warn_once"]

logger = logging.getLogger("chunktune")

MAX_FAILURES = 4096  # far more than the keys one trainer's workloads fail on
AGAIN = " (again: its traceback was logged the first time, this one's at DEBUG)"
"""What a repeat's line ends with: where its traceback went."""

_met: OrderedDict[bytes, None] = OrderedDict()  # least recently met first
_lock = threading.Lock()


def _forget_in_child() -> None:
    global _lock  # a parent's thread may have held it at the fork
    _lock = threading.Lock()
    _met.clear()


os.register_at_fork(after_in_child=_forget_in_child)


def forget() -> None:
    """Forget every failure met: each one's next traceback is logged at WARNING (tests)."""
    with _lock:
        _met.clear()


def _identity(about: str, exc: BaseException) -> bytes:
    """A digest of ``about`` and ``exc``'s type and message: what a repeat shares with the
    first (a digest, so a message of any length costs the same few bytes to remember)."""
    kind = type(exc)
    try:
        message = str(exc)
    except Exception:
        message = None  # a __str__ that raises is still a message, the same each time
    text = repr((about, kind.__module__, kind.__qualname__, message))
    return hashlib.blake2b(text.encode(), digest_size=16).digest()


def first(about: str, exc: BaseException) -> bool:
    """Whether ``exc`` is the first of its failure (its type and message) for ``about`` that
    this process has met; it is met from now on."""
    return _first_met(_identity(about, exc))


def first_time(*about: str) -> bool:
    """Whether this process meets ``about`` (no failure: what a warning is about) for the
    first time; it is met from now on."""
    # a pair: never a failure's identity, whose text is a tuple of four (_identity)
    text = repr(("said", about))
    return _first_met(hashlib.blake2b(text.encode(), digest_size=16).digest())


def _first_met(identity: bytes) -> bool:
    """Whether ``identity`` is met for the first time; it is met from now on."""
    with _lock:
        seen = identity in _met
        _met[identity] = None
        _met.move_to_end(identity)
        while len(_met) > MAX_FAILURES:
            _met.popitem(last=False)
    return not seen


def warn_once(
    about: str,
    exc: BaseException,
    msg: str,
    *args: object,
    extra: Mapping[str, object] | None = None,
) -> None:
    """Log ``msg % args`` at WARNING with ``exc``'s traceback the first time its failure is
    met for ``about``; a repeat's line ends with :data:`AGAIN`, its traceback at DEBUG."""
    if first(about, exc):
        logger.warning(msg, *args, exc_info=exc, extra=extra)
        return
    logger.warning(msg + AGAIN, *args, extra=extra)
    logger.debug(msg, *args, exc_info=exc, extra=extra)
