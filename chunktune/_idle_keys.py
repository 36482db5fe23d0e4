"""The keys a policy's own table sets that its other values leave without effect.

A settings editor who writes ``refine_steps = 5`` beside explicit candidates, or
``confirm_alpha`` under ``confirm = false``, changes nothing, and nothing said so: the
file reads as if it did. :func:`idle_keys` names each such key, with why; the loader
warns about them (:func:`chunktune._config.settings_from_dict`). Only the keys the table
writes itself count: an inherited value is its parent's. Nor does a value that asks
for nothing (a switch written ``false``, ``refine_steps = 0``), one the policy would
have without it (``policy show``'s output pasted back writes every key), or one the
rules between fields demand (``noise_gate = false`` beside ``interleave = false``, in a
policy whose parent gates): none misleads a reader. ``tests/test_idle_keys.py`` checks
that each key named really changes no sweep.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

from ._policy import Policy

__all__ = ["idle_keys"]

ROUNDS_ONLY = ("min_rounds", "early_stop", "race_z", "refine_steps", "refine_top", "extend_budget")
"""What only the rounds' schedule reads (``interleave = true``)."""
CONFIRM_ONLY = ("confirm_alpha", "confirm_min_pairs", "confirm_max_pairs", "confirm_share")
"""What only a confirmation reads (``confirm = true``); the noise gate prices one too."""
_EVERY = ("*",)
_ALWAYS_READ = frozenset({"description", "enabled", "extends"})


def _rules(p: Policy) -> Iterator[tuple[tuple[str, ...], str]]:
    """The keys ``p``'s values leave idle, and why, in the order a reader would fix them."""
    if not p.enabled:
        yield _EVERY, "with enabled = false the policy never measures"
    if not p.interleave:
        yield (
            ROUNDS_ONLY,
            (
                "with interleave = false the older tuner's schedule has no rounds to race, "
                "refine or stretch"
            ),
        )
    if not p.confirm:
        yield (*CONFIRM_ONLY, "noise_gate"), "with confirm = false nothing is confirmed"
    if not p.candidates.refinable:
        yield ("refine_steps",), f"{p.candidates.strategy} candidates are never refined"


def _asks_nothing(key: str, value: object) -> bool:
    """Whether ``value`` turns ``key``'s work off: idle or not, nothing it asked for is lost."""
    return value is False or (key == "refine_steps" and type(value) is int and value == 0)


def idle_keys(
    policy: Policy,
    own: Mapping[str, Any],
    without: Callable[[str], Policy | None] | None = None,
) -> list[tuple[str, str]]:
    """Each key of ``own`` (the policy's own table, as written) that ``policy`` never reads,
    with why (the first reason, where there are several), in the table's order.

    Not named: a value that asks for nothing, and, where ``without`` builds the policy
    as it would be without a key (None: refused then), a value it would have anyway or
    one it could not do without."""
    said: dict[str, str] = {}
    for keys, why in _rules(policy):
        for key in own if keys is _EVERY else keys:
            if key not in _ALWAYS_READ:
                said.setdefault(key, why)
    return [
        (key, said[key])
        for key in own
        if key in said and not _asks_nothing(key, own[key]) and not _needless(key, policy, without)
    ]


def _needless(key: str, policy: Policy, without: Callable[[str], Policy | None] | None) -> bool:
    """Whether leaving ``key`` out would change nothing to warn about: the same value, or
    a policy refused (the key is demanded)."""
    if without is None:
        return False
    other = without(key)
    return other is None or getattr(other, key, None) == getattr(policy, key, None)
