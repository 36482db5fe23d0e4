"""The keys a policy's own table sets that its other values leave without effect.

A settings editor who writes ``refine_steps = 5`` beside explicit candidates, or
``confirm_max_pairs`` under ``confirm = false``, changes nothing, and nothing said so: the
file reads as if it did. :func:`idle_keys` names each such key, with why; the loader
warns about them (:func:`warn_idle`). Only the keys the table writes itself count: an
inherited value is its parent's. Nor does a value that asks for nothing (a switch
written ``false``, ``refine_steps = 0``), one the policy would have without it
(``policy show`` prints every key, and comments out those that would be named:
:func:`idle_when_pasted`), one the rules between fields demand (``noise_gate =
false`` beside ``interleave = false``, in a policy whose parent gates), or one the
policy's ``rule()`` reads (``confirm_alpha`` under ``confirm = false``, ``margin`` under
``enabled = false``): that one keys the cache, and left out, the policy would neither
answer from nor store the entries it does. None misleads a reader.
``tests/test_idle_keys.py`` checks that each key named really changes no sweep.
"""

from __future__ import annotations

import functools
import logging
import os
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from ._converter import join_path, structure_problems, unstructure_policy
from ._extends import resolve_tables
from ._policy import Policy
from ._shown import shown_path

__all__ = ["idle_keys", "idle_when_pasted", "warn_idle"]

_logger = logging.getLogger("chunktune")

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
    """Whether leaving ``key`` out would change nothing to warn about: the same value, a
    policy refused (the key is demanded), or another ``rule()`` (the key names the cache
    entries the policy reads and writes: ``confirm_alpha`` under ``confirm = false``)."""
    if without is None:
        return False
    other = without(key)
    return (
        other is None
        or getattr(other, key, None) == getattr(policy, key, None)
        or other.rule() != policy.rule()
    )


# the idle keys warned about, with their values: once a process, for a file is read again
# (compat's resolve on an event loop loads it at every reset, a Ray worker at each task, a
# file changed lately at each resolve) and says nothing new while they stand unchanged
_idle_said: dict[tuple[str | None, str, str, str, str], object] = {}


def warn_idle(
    policies: Mapping[str, Policy],
    user: Mapping[str, Any],
    presets: Mapping[str, dict[str, Any]],
    source: str | None,
) -> None:
    """One warning for each key a policy of the file sets that its other values ignore
    (:func:`idle_keys`): the file would read as if it did something.
    Said once a process for each key and value."""
    where = "settings" if source is None else f"settings file {shown_path(source)}"
    file = None if source is None else os.path.abspath(source)
    for name, own in user.items():
        if isinstance(own, Mapping) and name in policies:
            without = functools.partial(_built_without, name, user, presets)
            for key, why in idle_keys(policies[name], own, without):
                said, mark = (file, name, key, repr(own[key]), why), object()
                if _idle_said.setdefault(said, mark) is not mark:  # atomic: threads say it once
                    continue
                path = join_path(join_path("policies", name), key)  # pasteable, as a problem's
                _logger.warning("chunktune: %s: %s has no effect: %s", where, path, why)


_PASTED = "pasted"  # no preset's name: a table of that name extends nothing


def idle_when_pasted(
    policy: Policy, presets: Mapping[str, dict[str, Any]]
) -> tuple[dict[str, Any], dict[str, str]]:
    """``policy``'s full table (as ``policy show`` prints it) split for pasting back as a
    policy of one's own, which extends nothing: the keys the loader would read, and those
    it would warn have no effect there, each with why (seed's ``min_rounds`` under
    ``interleave = false``: its 20 is not where a table of its own starts).

    The keys are left out one at a time, each named against what is left, so that the
    table returned loads without a warning; the policy it makes measures and picks as
    ``policy`` does, under the same ``rule()``, so the two share their cache entries."""
    own, idle = unstructure_policy(policy), {}
    # None: never, for a valid policy's table less keys it never reads
    while (built := _built(_PASTED, {_PASTED: own}, presets)) is not None:
        without = functools.partial(_built_without, _PASTED, {_PASTED: own}, presets)
        named = idle_keys(built, own, without)
        if not named:
            break
        key, why = named[0]
        idle[key] = why
        own = {k: v for k, v in own.items() if k != key}
    return own, idle


def _built_without(
    name: str, user: Mapping[str, Any], presets: Mapping[str, dict[str, Any]], key: str
) -> Policy | None:
    """User policy ``name`` as the file would make it without its key ``key`` (None: refused)."""
    own = {k: v for k, v in user[name].items() if k != key}
    return _built(name, {**user, name: own}, presets)


def _built(
    name: str, user: Mapping[str, Any], presets: Mapping[str, dict[str, Any]]
) -> Policy | None:
    """User policy ``name`` as the file would make it (None: refused)."""
    table = resolve_tables(presets, user, []).get(name)
    # its problems are the loader's to tell: none is made into a line here
    return None if table is None else structure_problems(table, Policy)[0]
