"""Keys typed on the command line: which cache entries they name (``cache show``, ``cache clear``).

``cache list`` shows keys shortened (:func:`~chunktune._cli._common.short_keys`): a
key is named by its start, or, as ``<job>.<policy>``, by the start of each part.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from .._cache import DecisionCache
from .._cache_entry import CacheEntry
from .._errors import InvalidArgumentError
from .._shown import spelled
from ._common import entries_of, short_keys

__all__ = ["MIN_CLEAR_CHARS", "find_entry", "named_keys"]

MIN_CLEAR_CHARS = 8  # a prefix `cache clear KEY` takes: one typed by hand, not one letter
_SHOW_MATCHES = 8  # keys an ambiguous prefix's message lists; the rest are counted


def _matches(key: str, prefix: str) -> bool:
    """Whether ``prefix`` names ``key``: its start, or (``base.policy``) the start of each part."""
    if key.startswith(prefix):
        return True
    head, dot, tail = prefix.partition(".")
    base, _, policy = key.rpartition(".")
    return bool(dot) and base.startswith(head) and policy.startswith(tail)


def _ambiguous(prefix: str, matches: Sequence[str]) -> str:
    """``"ab" matches 2 entries (ab1…, ab2…)``: the keys as ``cache list`` shows them."""
    short = short_keys(matches)
    listed = ", ".join(short[k] for k in matches[:_SHOW_MATCHES])
    more = f" and {len(matches) - _SHOW_MATCHES} more" if len(matches) > _SHOW_MATCHES else ""
    return f"{spelled(prefix)} matches {entries_of(len(matches))} ({listed}{more})"


def _none_named(name: str, newer: Iterable[str], expected: str) -> InvalidArgumentError:
    """The error for ``name``, which names no entry this chunktune reads: where it names a
    newer chunktune's entry (the warning just printed its key), one that says so."""
    if any(_matches(k, name) for k in newer):
        return InvalidArgumentError(
            f"{spelled(name)} names an entry a newer chunktune wrote, which this one cannot "
            "read, show or delete alone; expected a key as `chunktune cache list` shows it "
            "(`chunktune cache clear` deletes every entry, that one too, as does the newer "
            "chunktune's `cache clear KEY`)"
        )
    return InvalidArgumentError(f"no cache entry's key starts with {spelled(name)}{expected}")


def find_entry(cache: DecisionCache, prefix: str) -> tuple[str, CacheEntry]:
    """The one entry whose key ``prefix`` names (``cache show``).

    Raises:
        InvalidArgumentError: ``prefix`` is empty, or names no entry or several.
        CacheError: the cache cannot be read.
    """
    if not prefix.strip():
        raise InvalidArgumentError(
            f"key prefix {spelled(prefix)} is empty; expected the start of an entry's key "
            "(see `chunktune cache list`)"
        )
    entries = cache.entries(strict=True)
    matches = sorted(k for k in entries if _matches(k, prefix))
    if not matches:
        raise _none_named(prefix, cache.unreadable(), " (see `chunktune cache list`)")
    if len(matches) > 1:
        raise InvalidArgumentError(f"{_ambiguous(prefix, matches)}; give more characters")
    return matches[0], entries[matches[0]]


def named_keys(
    keys: Iterable[str], names: Sequence[str], *, newer: Iterable[str] = ()
) -> list[str]:
    """The keys of ``keys`` that ``names`` name (``cache clear KEY...``), each once, in order.

    A name is a whole key, or at least :data:`MIN_CLEAR_CHARS` characters of one as
    ``cache list`` shows it (its start, or the start of each part of ``<job>.<policy>``)
    that name no other key. Every name is checked before any is used. ``newer``: the keys
    of a newer chunktune's entries that this one cannot read, which no name may name.

    Raises:
        InvalidArgumentError: the first name that is shorter than that (and no whole
            key), or names no key (or a newer chunktune's), or several.
    """
    keys = sorted(keys)
    known = set(keys)
    named: list[str] = []
    for name in names:
        if name in known:
            matches = [name]
        elif len(name.strip()) < MIN_CLEAR_CHARS:
            raise InvalidArgumentError(
                f"key {spelled(name)} is too short; expected a key as `chunktune cache list` "
                f"shows it, or its first {MIN_CLEAR_CHARS} or more characters"
            )
        else:
            matches = [k for k in keys if _matches(k, name)]
        if not matches:
            raise _none_named(name, newer, "; expected a key as `chunktune cache list` shows it")
        if len(matches) > 1:
            raise InvalidArgumentError(
                f"{_ambiguous(name, matches)}; expected one entry's key: give more characters"
            )
        if matches[0] not in named:
            named.append(matches[0])
    return named
