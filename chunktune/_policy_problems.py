"""Each flattened policy table as a Policy, each problem reported at the policy it is of.

A policy that extends a user's policy inherits that parent's problems; each is reported
once, at the policy whose own table sets the key (the parent's), and a broken rule
between fields notes which of the values it names the policy inherits, and from where
(``_policy_notes``). Which file is read, and the flattening of ``extends`` chains, are
``_config``'s and ``_extends``'.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from ._converter import Problem, join_path, problem_line, structure_problems
from ._extends import origins
from ._policy import Policy
from ._policy_notes import DEFAULT_NOTE, noted

__all__ = ["POLICY_KEYS", "policies_of"]

POLICY_KEYS = frozenset(f.name for f in attrs.fields(Policy)) | {"extends"}


def _user_parent(name: str, user: Mapping[str, object]) -> str | None:
    """The user policy that policy ``name`` extends, if it extends one (not a preset)."""
    table = user.get(name)
    parent = table.get("extends") if isinstance(table, Mapping) else None
    return parent if isinstance(parent, str) and parent != name and parent in user else None


def _sets(table: object, keys: tuple[object, ...]) -> bool:
    """Whether a policy's own table sets the key a problem (at ``keys`` past the policy's
    path) is at.

    A problem at a key the policy only inherits is its parent's, reported there: the
    key is nowhere under this policy's name in the file. Walked by the keys themselves,
    not by the problem's line: a key may hold a ``.`` or a ``:``.
    """
    if not keys:
        return False  # a rule between fields: its parent breaks it too, and says so
    for key in keys:
        if not isinstance(table, Mapping) or key not in table:
            return False
        table = table[key]
    return True


def _notes(
    name: str, presets: Mapping[str, dict[str, Any]], user: Mapping[str, Any]
) -> dict[str, str]:
    """What a broken rule of user policy ``name`` says after each value it does not set:
    ``from preset "patient"`` (an ancestor's), ``the default`` (no table of its chain's)."""
    notes = {key: f"from {where}" for key, where in origins(name, presets, user).items()}
    own = user.get(name)
    for key in POLICY_KEYS:
        if key not in notes and not (isinstance(own, Mapping) and key in own):
            notes[key] = DEFAULT_NOTE
    return notes


def policies_of(
    tables: Mapping[str, Mapping[str, Any]],
    user: Mapping[str, object],
    presets: Mapping[str, dict[str, Any]],
    problems: list[str],
) -> dict[str, Policy]:
    """Each flattened policy table as a Policy; its problems go to ``problems``, once.

    A problem a policy only inherits is its parent's, reported there (see :func:`_sets`).
    A broken rule between fields says which of the values it names the policy inherits,
    and from where (see :func:`_notes`).
    """
    policies: dict[str, Policy] = {}
    found: dict[str, list[Problem]] = {}  # each policy's problems, at its keys
    for name, table in tables.items():
        pol, found[name] = structure_problems(table, Policy)
        if pol is not None:
            policies[name] = pol
    for name in tables:
        inherited = set(found.get(_user_parent(name, user) or "", ()))
        said = found[name]
        kept = [i for i, p in enumerate(said) if p not in inherited or _sets(user.get(name), p[0])]
        if name in user and any(not said[i][0] for i in kept):
            # the plain lines are what tell a parent's problem from the policy's own
            said = _noted_problems(name, tables[name], presets, user, said)
        path = join_path("policies" if name in user else "presets", name)
        problems.extend(problem_line(path, said[i]) for i in kept)
    return policies


def _noted_problems(
    name: str,
    table: Mapping[str, Any],
    presets: Mapping[str, dict[str, Any]],
    user: Mapping[str, Any],
    plain: list[Problem],
) -> list[Problem]:
    """User policy ``name``'s problems (``plain``) found again, each broken rule noting the
    values it inherits (see :func:`_notes`); ``plain`` should building it again find other
    problems."""
    with noted(_notes(name, presets, user)):
        _, again = structure_problems(table, Policy)
    return again if len(again) == len(plain) else plain
