"""Which cached entry answers a request: its own policy's, else a stronger one's of the same rule.

Pure over a mapping of entries; :class:`~chunktune._cache.DecisionCache` and the
read-only system cache (``_cache_layers``) both look up through it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from ._cache_entry import CacheEntry

__all__ = ["best_entry", "serves_any"]


def serves_any(_entry: CacheEntry) -> bool:
    """Every entry may answer (:meth:`DecisionCache.lookup`'s default ``serves``)."""
    return True


def best_entry(
    entries: Mapping[str, CacheEntry],
    base_key: str,
    *,
    policy_hash: str,
    rule: str,
    effort: int,
    serves: Callable[[CacheEntry], bool] = serves_any,
) -> tuple[str, CacheEntry] | None:
    """The entry of ``entries`` that answers a request (see :meth:`DecisionCache.lookup`)."""
    own = f"{base_key}.{policy_hash}"
    if own in entries and serves(entries[own]):
        return own, entries[own]
    stronger = [
        (e.policy_effort, k, e)
        for k, e in entries.items()
        if k != own
        and k.startswith(base_key + ".")
        and e.policy_rule == rule
        and e.policy_effort >= effort
    ]
    # the strongest that may answer now; ``serves`` is asked of no more than it must be
    for _, key, entry in sorted(stronger, key=lambda t: (t[0], t[1]), reverse=True):
        if serves(entry):
            return key, entry
    return None
