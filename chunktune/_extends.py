"""Flattening ``extends``: each policy's raw table with its ancestors' fields merged in.

A policy may extend a preset or another user policy, which may extend another, and
so on. Each policy is resolved once and without recursion, so a chain of any length
costs linear time; each cycle is reported once, and a policy that extends a broken
one is left out without repeating its ancestor's problem.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ._settings import unknown_policy
from ._shown import spelled, toml_key

__all__ = ["origins", "resolve_tables"]


def _merge(base: dict[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in over.items():
        if key == "extends":
            continue
        old = merged.get(key)
        same_strategy = (
            isinstance(old, dict)
            and isinstance(value, Mapping)
            and value.get("strategy", old.get("strategy")) == old.get("strategy")
        )
        if key == "candidates" and same_strategy and isinstance(old, dict):
            merged[key] = {**old, **value}
        else:
            merged[key] = value
    return merged


def _inherited(parent: str, table: Mapping[str, Any]) -> str:
    """The description of a policy that gives none: what it extends and what it sets.

    The parent's own description would describe another policy (``policy list``
    showed a policy that changes thorough's margin as thorough).
    """
    changed = [key for key in table if key not in ("extends", "description")]
    return f"{parent}, with {', '.join(changed)} changed" if changed else f"as {parent}"


_Node = tuple[str, str]  # (policy name, "user" or "preset")


def _where(node: _Node) -> str:
    """The node's TOML path, as problems name it: ``policies.NAME`` or ``presets.NAME``, its
    name as TOML spells a key (``policies."my.policy"``)."""
    return f"{'policies' if node[1] == 'user' else 'presets'}.{toml_key(node[0])}"


def _link(
    node: _Node, presets: Mapping[str, dict[str, Any]], user: Mapping[str, Any]
) -> tuple[Mapping[str, Any], _Node | None] | str:
    """The node's own table and the node it extends (None: nothing), or its problem."""
    name, layer = node
    table = (user if layer == "user" else presets)[name]
    if not isinstance(table, Mapping):
        return f"{_where(node)}: {spelled(table)} is not a table"
    parent = table.get("extends")
    if parent is None and layer == "user" and name in presets:
        parent = name  # [policies.balanced] tweaks the shipped balanced preset
    if parent is None:
        return _with_default_strategy(table, presets), None
    if not isinstance(parent, str):
        return f"{_where(node)}.extends: {spelled(parent)} is not a policy name"
    if parent == name and layer == "user" and name not in presets:
        return f"{_where(node)}.extends: cycle {toml_key(name)} -> {toml_key(name)}"
    # a user policy extends another user policy of that name, else the preset
    parent_layer = "user" if layer == "user" and parent in user and parent != name else "preset"
    if parent_layer == "preset" and parent not in presets:
        # a policy cannot extend itself, so its own name is no suggestion
        known = (set(presets) | set(user)) - ({name} - set(presets))
        return f"{_where(node)}.extends: {unknown_policy(parent, known)}"
    return table, (parent, parent_layer)


def _with_default_strategy(
    table: Mapping[str, Any], presets: Mapping[str, dict[str, Any]]
) -> Mapping[str, Any]:
    """A policy that extends nothing starts from the shipped ``balanced``: a candidates
    table of its own without a strategy keeps ``balanced``'s, as one that extends it would
    (a bare ``max_candidates`` had no strategy to cap)."""
    own, shipped = table.get("candidates"), presets.get("balanced", {}).get("candidates")
    if not (isinstance(own, Mapping) and "strategy" not in own and isinstance(shipped, dict)):
        return table
    return {**table, "candidates": {**shipped, **own}}


def resolve_tables(
    presets: Mapping[str, dict[str, Any]],
    user: Mapping[str, Any],
    problems: list[str],
) -> dict[str, dict[str, Any]]:
    """Flatten ``extends`` chains into one raw table per policy name.

    Each policy is resolved once (a chain of any length costs linear time, without
    recursion); each cycle is reported once, and a policy that extends a broken one
    is left out without repeating its parent's problem.
    """
    done: dict[_Node, dict[str, Any] | None] = {}  # None: broken, its problem reported

    def resolve(start: _Node) -> dict[str, Any] | None:
        chain: list[tuple[_Node, Mapping[str, Any]]] = []
        on_chain: dict[_Node, int] = {}
        node: _Node | None = start
        base: dict[str, Any] | None = {}
        while node is not None:
            if node in done:
                base = done[node]
                break
            if node in on_chain:
                names = [toml_key(n) for (n, _), _t in chain[on_chain[node] :]]
                names.append(toml_key(node[0]))
                problems.append(f"{_where(chain[-1][0])}.extends: cycle {' -> '.join(names)}")
                base = None
                break
            linked = _link(node, presets, user)
            if isinstance(linked, str):
                problems.append(linked)
                done[node] = base = None
                break
            on_chain[node] = len(chain)
            chain.append((node, linked[0]))
            node = linked[1]
        parent = node  # the resolved policy the chain's last member extends, if any
        for member, table in reversed(chain):
            base = None if base is None else _merge(base, table)
            if base is not None and parent is not None and "description" not in table:
                base["description"] = _inherited(parent[0], table)
            done[member] = base
            parent = member
        return base

    resolved: dict[str, dict[str, Any]] = {}
    starts = [(name, "preset") for name in presets if name not in user]
    for name, layer in [*starts, *((name, "user") for name in user)]:
        got = resolve((name, layer))
        if got is not None:
            resolved[name] = got
    return resolved


def origins(
    name: str, presets: Mapping[str, dict[str, Any]], user: Mapping[str, Any]
) -> dict[str, str]:
    """Where each key user policy ``name`` does not set itself comes from, as a rule's
    problem says it: ``preset "patient"`` or ``policy "base"``, the nearest up its
    ``extends`` chain whose own table sets the key.

    A value the user never wrote, named in a problem without this, read as theirs
    (``hard_limit_s 40`` of a policy that extends ``patient``). Keys no table of the
    chain sets are left out; a broken link or a cycle ends the walk.
    """
    own = user.get(name)
    mine = set(own) if isinstance(own, Mapping) else set()
    found: dict[str, str] = {}
    node: _Node | None = (name, "user")
    seen: set[_Node] = set()
    while node is not None and node not in seen:
        seen.add(node)
        linked = _link(node, presets, user)
        if isinstance(linked, str):
            break
        table, parent = linked
        if node != (name, "user"):
            kind = "policy" if node[1] == "user" else "preset"
            for key in table:
                if key not in mine and key not in found:
                    found[key] = f"{kind} {spelled(node[0])}"
        node = parent
    return found
