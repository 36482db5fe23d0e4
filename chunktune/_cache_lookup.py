"""Which cached entry answers a request: its own policy's, else a stronger one's of the same rule.

Pure over a mapping of entries; :class:`~chunktune._cache.DecisionCache` and the
read-only system cache (``_cache_layers``) both look up through it. A :class:`JobIndex`
lets a lookup look at one job's keys, not every key of a fleet's cache.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from ._cache_entry import CacheEntry

__all__ = ["JobIndex", "best_entry", "serves_any"]


def serves_any(_entry: CacheEntry) -> bool:
    """Every entry may answer (:meth:`DecisionCache.lookup`'s default ``serves``)."""
    return True


def _job(key: str) -> str:
    """What a key's entries share with every key that may answer for it: the key up to its
    first dot (``<base>.<policy hash>``; a base key of several dots shares the first part)."""
    return key.partition(".")[0]


class JobIndex:
    """The keys of a mapping of entries by :func:`_job`, made once per mapping.

    A cache's parse is never changed in place (each read makes a new one), so an index of
    the very mapping a lookup is given still holds; another mapping gets a new index.
    Shared between threads: the pair is replaced whole.
    """

    __slots__ = ("_last",)

    def __init__(self) -> None:
        self._last: tuple[Mapping[str, CacheEntry], dict[str, tuple[str, ...]]] | None = None

    def keys_of(self, entries: Mapping[str, CacheEntry], base_key: str) -> tuple[str, ...]:
        """The keys of ``entries`` that share ``base_key``'s job (a superset of those that
        may answer for it)."""
        last = self._last
        if last is None or last[0] is not entries:
            jobs: dict[str, list[str]] = {}
            for key in entries:
                jobs.setdefault(_job(key), []).append(key)
            last = self._last = (entries, {job: tuple(keys) for job, keys in jobs.items()})
        return last[1].get(_job(base_key), ())

    def drop_unless(self, entries: Mapping[str, CacheEntry]) -> None:
        """Let go of an index made for a mapping other than ``entries``: it would otherwise
        keep a whole stale parse alive, for as long as lookups hit their own key."""
        last = self._last
        if last is not None and last[0] is not entries:
            self._last = None


def best_entry(
    entries: Mapping[str, CacheEntry],
    base_key: str,
    *,
    policy_hash: str,
    rule: str,
    effort: int,
    serves: Callable[[CacheEntry], bool] | None = None,
    index: JobIndex | None = None,
) -> tuple[str, CacheEntry] | None:
    """The entry of ``entries`` that answers a request (see :meth:`DecisionCache.lookup`).

    ``serves``: None (the lookups' default: help() shows it, not a function's address)
    refuses none, as :func:`serves_any`. ``index``: where the other policies' entries are
    looked for, made once per mapping; without one, every key is looked at.
    """
    if serves is None:
        serves = serves_any
    if index is not None:
        index.drop_unless(entries)
    own = f"{base_key}.{policy_hash}"
    if own in entries and serves(entries[own]):
        return own, entries[own]
    keys: Iterable[str] = entries if index is None else index.keys_of(entries, base_key)
    prefix = base_key + "."
    stronger = []
    for k in keys:
        if k == own or not k.startswith(prefix):
            continue
        e = entries[k]
        if e.policy_rule == rule and e.policy_effort >= effort:
            stronger.append((e.policy_effort, k, e))
    # the strongest that may answer now; ``serves`` is asked of no more than it must be
    for _, key, entry in sorted(stronger, key=lambda t: (t[0], t[1]), reverse=True):
        if serves(entry):
            return key, entry
    return None
