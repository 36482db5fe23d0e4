"""docs/api.md, the API reference, is the public surface as the code has it.

Each entry is a ``### `chunktune.NAME``` heading over ```python blocks whose lines are
checked statements: ``NAME(...)`` (the signature, one parameter a line where it is
long), ``class NAME(BASES)`` and ``NAME = REPR``. ``chunktune.ray`` is read without
Ray: importing it, and taking its functions' signatures, never imports Ray.
"""

from __future__ import annotations

import importlib
import inspect
import re
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Protocol

import pytest

import chunktune
import chunktune.compat
import chunktune.ray
import chunktune.sim

ROOT = Path(__file__).resolve().parent.parent
DOC = (ROOT / "docs" / "api.md").read_text()
README = (ROOT / "README.md").read_text()
PUBLIC: list[ModuleType] = [chunktune, chunktune.sim, chunktune.compat, chunktune.ray]
EXPORTED = {f"{module.__name__}.{name}" for module in PUBLIC for name in module.__all__}

_CLASS = re.compile(r"class (chunktune(?:\.\w+)+)\((.*)\)")
_VALUE = re.compile(r"(chunktune(?:\.\w+)+) = (.*)")
_CALL = re.compile(r"(async )?(chunktune(?:\.\w+)+)(\(.*)")


def _entries() -> dict[str, str]:
    """Each entry's name (its heading) and its text, up to the next heading."""
    found: dict[str, str] = {}
    name: str | None = None
    for line in DOC.splitlines():
        if line.startswith("#"):
            heading = re.fullmatch(r"### `([\w.]+)`", line)
            name = heading.group(1) if heading else None
            if name is not None:
                assert name not in found, f"two entries for {name}"
                found[name] = ""
        elif name is not None:
            found[name] += line + "\n"
    return found


ENTRIES = _entries()


def _statements(text: str) -> Iterator[str]:
    """The lines of the python blocks in ``text``, a call written one parameter a line
    joined back into the line ``str(inspect.signature(...))`` gives."""
    for block in re.findall(r"```python\n(.*?)```", text, flags=re.S):
        lines = block.splitlines()
        while lines:
            line = lines.pop(0)
            if line.endswith("("):
                closing = next(i for i, rest in enumerate(lines) if rest.startswith(")"))
                params = [p.strip().removesuffix(",") for p in lines[:closing]]
                line += ", ".join(params) + lines[closing]
                del lines[: closing + 1]
            yield line


def _public(dotted: str) -> object:
    """The object a dotted name names: a module's attribute, or an attribute of one."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            found: object = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for part in parts[cut:]:
            found = getattr(found, part)
        return found
    raise AssertionError(dotted)


def _slugs(markdown: str) -> set[str]:
    """The anchors GitHub gives a document's headings (fenced blocks' lines are none)."""
    prose = re.sub(r"```.*?```", "", markdown, flags=re.S)
    slugs: set[str] = set()
    counts: dict[str, int] = {}
    for heading in re.findall(r"^#{1,6} (.+)$", prose, flags=re.M):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        repeat = counts.get(slug, 0)
        slugs.add(slug if repeat == 0 else f"{slug}-{repeat}")
        counts[slug] = repeat + 1
    return slugs


def _has_signature(value: object) -> bool:
    """Whether ``inspect.signature`` tells something of ``value`` (a Protocol's is noise)."""
    if not (inspect.isclass(value) or inspect.isfunction(value)):
        return False
    if inspect.isclass(value) and Protocol in value.__bases__:
        return False
    try:
        inspect.signature(value)
    except ValueError:  # an exception class that takes BaseException's arguments
        return False
    return True


def test_every_exported_name_has_an_entry_and_no_entry_names_another() -> None:
    """The headings are exactly the __all__ names of chunktune, .sim, .compat and .ray."""
    assert set(ENTRIES) == EXPORTED


@pytest.mark.parametrize("name", sorted(ENTRIES))
def test_each_statement_is_the_code_s(name: str) -> None:
    """Each signature, base list and value an entry writes is what the live object gives."""
    for statement in _statements(ENTRIES[name]):
        if match := _CLASS.fullmatch(statement):
            value = _public(match.group(1))
            assert inspect.isclass(value), statement
            assert match.group(2) == ", ".join(b.__name__ for b in value.__bases__)
        elif match := _VALUE.fullmatch(statement):
            assert match.group(2) == repr(_public(match.group(1)))
        elif match := _CALL.fullmatch(statement):
            value = _public(match.group(2))
            assert callable(value), statement
            assert bool(match.group(1)) == inspect.iscoroutinefunction(value), statement
            assert match.group(3) == str(inspect.signature(value))
        else:
            raise AssertionError(f"not a checked statement: {statement!r}")
        # an entry writes out its own name and its members, nothing else's
        named = statement.removeprefix("async ").removeprefix("class ")
        assert named == name or named.startswith((f"{name}(", f"{name} ", f"{name}.")), statement


@pytest.mark.parametrize("name", sorted(ENTRIES))
def test_each_entry_writes_out_its_own_object(name: str) -> None:
    """A callable's entry gives its signature, an error's its bases, a constant's its value."""
    value = _public(name)
    statements = list(_statements(ENTRIES[name]))
    if _has_signature(value):
        calls = [s.removeprefix("async ") for s in statements if _CALL.fullmatch(s)]
        assert any(s.startswith(f"{name}(") for s in calls)
    if inspect.isclass(value) and (issubclass(value, BaseException) or Protocol in value.__bases__):
        assert any(s.startswith(f"class {name}(") for s in statements)
    if not (inspect.isclass(value) or inspect.isfunction(value)):
        assert f"{name} = {value!r}" in statements


@pytest.mark.parametrize("name", sorted(ENTRIES))
def test_each_entry_links_to_the_readme(name: str) -> None:
    """Every entry points at the README section that explains it at length."""
    assert "](../README.md#" in ENTRIES[name]


def test_every_readme_anchor_the_reference_links_to_is_a_readme_heading() -> None:
    """Each ../README.md#anchor in docs/api.md is one of the README's headings."""
    linked = set(re.findall(r"\]\(\.\./README\.md#([^)]+)\)", DOC))
    assert linked
    assert linked <= _slugs(README), linked - _slugs(README)


def test_every_anchor_within_the_reference_is_one_of_its_headings() -> None:
    """The reference's contents line links to its own section headings."""
    linked = set(re.findall(r"\]\(#([^)]+)\)", DOC))
    assert linked
    assert linked <= _slugs(DOC), linked - _slugs(DOC)


def test_the_readme_links_to_the_reference() -> None:
    """A reader of the README's Python section is pointed at docs/api.md."""
    start = README.index("## Using it from Python")
    section = README[start : README.index("\n## ", start + 1)]
    assert "](docs/api.md)" in section
