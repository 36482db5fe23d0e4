"""The public surface: ``__all__`` checked both ways, and names that report the public module."""

from __future__ import annotations

import ast
import functools
import importlib
import inspect
import os
import subprocess
import sys
import traceback
import typing
from collections.abc import Mapping
from collections.abc import Set as AbstractSet
from pathlib import Path
from types import ModuleType

import attrs
import pytest

import chunktune
import chunktune.compat
import chunktune.ray
import chunktune.sim
from chunktune._exports import present_as

PACKAGE = Path(chunktune.__file__).parent
PUBLIC: list[ModuleType] = [chunktune, chunktune.sim, chunktune.compat, chunktune.ray]
PRIVATE = sorted(
    f"chunktune.{f.stem}" for f in PACKAGE.glob("_*.py") if not f.stem.startswith("__")
)

# What these checks find in modules another change owns, by (check, module): each one
# goes once fixed there. A new problem fails its check, and so does a fixed one still
# listed here.
KNOWN: dict[tuple[str, str], set[str]] = {}


def _found(check: str, module: str, problems: AbstractSet[str]) -> None:
    assert problems == KNOWN.get((check, module), set())


@functools.cache
def _tree(module: str) -> ast.Module:
    """The module's syntax tree, parsed once a session (no check changes it)."""
    return ast.parse((PACKAGE / f"{module.rsplit('.', 1)[1]}.py").read_text())


@functools.cache
def _imported_from() -> dict[str, frozenset[str]]:
    """Each module's short name: the names chunktune's other modules import from it."""
    wanted: dict[str, set[str]] = {}
    for other in [*PRIVATE, "chunktune.__init__", "chunktune.sim", "chunktune.compat"]:
        for node in ast.walk(_tree(other)):
            if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module:
                wanted.setdefault(node.module, set()).update(a.name for a in node.names)
    return {short: frozenset(names) for short, names in wanted.items()}


def _top_level(module: str) -> dict[str, ast.stmt]:
    """The names a module's own top-level statements define, and what defines each."""
    found: dict[str, ast.stmt] = {}
    for node in _tree(module).body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            found[node.name] = node
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    found[target.id] = node
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            found[node.target.id] = node
    return found


def _ours(value: object) -> bool:
    """A class or function defined in chunktune (whatever module it now reports)."""
    if not (inspect.isclass(value) or inspect.isfunction(value)):
        return False
    return value.__module__.split(".")[0] == "chunktune"


@pytest.mark.parametrize("module", PUBLIC, ids=lambda m: m.__name__)
def test_public_all_names_exist_and_look_public(module: ModuleType) -> None:
    """Every name in a public module's __all__ is there, once, without a leading underscore."""
    assert len(set(module.__all__)) == len(module.__all__)
    for name in module.__all__:
        assert not name.startswith("_"), name
        assert getattr(module, name) is not None, name


@pytest.mark.parametrize("module", PUBLIC, ids=lambda m: m.__name__)
def test_public_classes_and_functions_are_all_in_all(module: ModuleType) -> None:
    """Every class or function of chunktune's that a public module holds publicly is in __all__."""
    leaked = {
        name
        for name, value in vars(module).items()
        if not name.startswith("_") and _ours(value) and name not in module.__all__
    }
    _found("leaked", module.__name__, leaked)


@pytest.mark.parametrize("module", PUBLIC, ids=lambda m: m.__name__)
def test_public_names_report_the_public_module(module: ModuleType) -> None:
    """Each exported class and function names the module that exports it (or chunktune)."""
    for name in module.__all__:
        value = getattr(module, name)  # also loads the lazy MuJoCo names
        if inspect.isclass(value) or inspect.isfunction(value):
            # one chunktune exports too (chunktune.ray's MissingExtraError) says chunktune
            home = "chunktune" if getattr(chunktune, name, None) is value else module.__name__
            assert value.__module__ == home, name


def test_errors_read_as_chunktune_in_tracebacks() -> None:
    """A traceback names chunktune.ConfigError, not the private module that defines it."""
    lines = traceback.format_exception_only(chunktune.ConfigError("bad value"))
    assert lines[-1].startswith("chunktune.ConfigError: ")


@pytest.mark.parametrize("module", PUBLIC, ids=lambda m: m.__name__)
def test_exported_records_still_resolve_their_types(module: ModuleType) -> None:
    """attrs (and so cattrs) can read every exported record's field types after the fix-up."""
    for name in module.__all__:
        value = getattr(module, name)
        if inspect.isclass(value) and attrs.has(value):
            attrs.resolve_types(value)
            assert all(not isinstance(f.type, str) for f in attrs.fields(value)), name


@pytest.mark.parametrize("module", PUBLIC, ids=lambda m: m.__name__)
def test_exported_classes_give_their_type_hints(module: ModuleType) -> None:
    """typing.get_type_hints works on every exported class (and function) after the fix-up."""
    for name in module.__all__:
        value = getattr(module, name)
        if inspect.isclass(value) or inspect.isfunction(value):
            hints = typing.get_type_hints(value, include_extras=True)
            assert not any(isinstance(h, str) for h in hints.values()), name


def _mutable(hint: object) -> bool:
    """Whether a value of this type may be a dict, list or set (which do not hash)."""
    origin = typing.get_origin(hint) or hint
    if origin in (dict, list, set):
        return True
    if origin is typing.Literal:
        return False
    if inspect.isclass(origin) and attrs.has(origin):
        return origin.__hash__ is None
    return any(_mutable(arg) for arg in typing.get_args(hint) if arg is not Ellipsis)


@pytest.mark.parametrize("module", PUBLIC, ids=lambda m: m.__name__)
def test_exported_records_hash_only_when_every_compared_field_can(module: ModuleType) -> None:
    """A record with a dict, list or set field compared by value declares __hash__ None."""
    for name in module.__all__:
        value = getattr(module, name)
        if inspect.isclass(value) and attrs.has(value):
            hints = typing.get_type_hints(value)
            mutable = any(f.eq and _mutable(hints[f.name]) for f in attrs.fields(value))
            assert (value.__hash__ is None) == mutable, name


@pytest.mark.parametrize("module", PUBLIC, ids=lambda m: m.__name__)
def test_exported_signatures_evaluate(module: ModuleType) -> None:
    """inspect.signature(eval_str=True) works on every exported class and function."""
    for name in module.__all__:
        value = getattr(module, name)
        is_error = inspect.isclass(value) and issubclass(value, BaseException)
        if (inspect.isclass(value) and not is_error) or inspect.isfunction(value):
            inspect.signature(value, eval_str=True)


@pytest.mark.parametrize("module", PRIVATE)
def test_private_all_names_only_what_the_module_defines(module: str) -> None:
    """A private module's __all__ lists names its own top-level code defines, never imports."""
    listed = set(importlib.import_module(module).__all__)
    _found("defined", module, listed - set(_top_level(module)))


@pytest.mark.parametrize("module", PRIVATE)
def test_private_all_lists_its_public_classes_and_functions(module: str) -> None:
    """Every public class and function a private module defines is in its __all__."""
    listed = set(importlib.import_module(module).__all__)
    defined = {
        name
        for name, node in _top_level(module).items()
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
        and not name.startswith("_")
    }
    _found("unlisted", module, defined - listed)


@pytest.mark.parametrize("module", PRIVATE)
def test_private_all_lists_what_other_modules_import(module: str) -> None:
    """Whatever chunktune's other modules import from a private module is in its __all__."""
    wanted = _imported_from().get(module.rsplit(".", 1)[1], frozenset())
    listed = set(importlib.import_module(module).__all__)
    # an explicit re-export (``import X as X``) is importable too
    aliased = {
        alias.name
        for node in _tree(module).body
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
        if alias.asname == alias.name
    }
    _found("imported", module, wanted - listed - aliased)


def _relative_imports() -> list[tuple[str, str, set[str]]]:
    """``(importer, absolute module, names)`` for every relative import in the package."""
    found: list[tuple[str, str, set[str]]] = []
    for file in sorted(PACKAGE.rglob("*.py")):
        parts = ["chunktune", *file.relative_to(PACKAGE).with_suffix("").parts]
        package = parts[:-1]  # a package's __init__ and its modules alike
        for node in ast.walk(ast.parse(file.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level:
                base = package[: len(package) - (node.level - 1)]
                target = ".".join([*base, *([node.module] if node.module else [])])
                found.append((".".join(parts), target, {a.name for a in node.names}))
    return found


def test_every_module_imported_from_lists_the_names_taken_in_its_all() -> None:
    """What any module, in a subpackage too, imports from a private module is in its __all__."""
    missing: set[str] = set()
    for importer, target, names in _relative_imports():
        module = importlib.import_module(target)
        if not target.split(".")[-1].startswith("_") or not hasattr(module, "__all__"):
            continue
        for name in names:
            value = getattr(module, name, None)
            if name not in module.__all__ and not inspect.ismodule(value):
                missing.add(f"{importer}: {target}.{name}")
    assert not missing


@pytest.mark.parametrize(
    "entry",
    [
        pytest.param("chunktune.resolve_sync", id="resolve_sync"),
        pytest.param("chunktune.ray.resolve", id="ray.resolve"),
        pytest.param("chunktune.ray.resolve_sync", id="ray.resolve_sync"),
    ],
)
def test_every_resolve_takes_resolves_keywords_typed_with_its_defaults(entry: str) -> None:
    """Each resolve entry point spells out chunktune.resolve's parameters, types and defaults."""
    module, _, name = entry.rpartition(".")
    function = getattr(importlib.import_module(module), name)
    # the annotations as written (from __future__ import annotations): help() shows these
    assert inspect.signature(function).parameters == inspect.signature(chunktune.resolve).parameters


def test_the_package_ships_a_py_typed_marker() -> None:
    """chunktune/py.typed is there, so a user's type checker reads the annotations, not Any."""
    assert (PACKAGE / "py.typed").is_file()


def test_present_as_leaves_what_a_public_module_defines_itself() -> None:
    """A function whose module is public (chunktune.sim) keeps it; only private ones move."""

    def helper() -> None:
        pass

    helper.__module__ = "chunktune.sim"
    present_as("chunktune", [helper])
    assert helper.__module__ == "chunktune.sim"


_FIELD_TYPES = """
import attrs, inspect, chunktune, chunktune.sim
for module in (chunktune, chunktune.sim):
    for name in module.__all__:
        if name in getattr(module, "_LAZY", ()):
            continue  # the MuJoCo adapter: importing it costs a third of a second
        value = getattr(module, name)
        if inspect.isclass(value) and attrs.has(value):
            for field in attrs.fields(value):
                assert not isinstance(field.type, str), (name, field.name, field.type)
"""


def test_exported_records_field_types_are_resolved_on_import() -> None:
    """In a fresh process, every exported record's attrs field types are types, not strings."""
    done = subprocess.run([sys.executable, "-c", _FIELD_TYPES], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_an_unknown_chunktune_name_is_told_in_python_s_own_words() -> None:
    """chunktune.<unknown> raises AttributeError worded as Python words a module's missing name."""
    with pytest.raises(AttributeError) as raised:
        chunktune.no_such_name  # noqa: B018
    assert str(raised.value) == "module 'chunktune' has no attribute 'no_such_name'"


@pytest.mark.parametrize("module", PUBLIC, ids=lambda m: m.__name__)
def test_a_name_a_public_module_lacks_raises_attribute_error(module: ModuleType) -> None:
    """An unknown name is an AttributeError naming it (hasattr False), never a quiet None."""
    name = "no_such_name"
    assert not hasattr(module, name)
    with pytest.raises(AttributeError, match=name):
        getattr(module, name)


def test_dir_offers_every_public_name_and_none_of_the_package_s_own_imports() -> None:
    """dir(chunktune) lists the lazy names too, and not Any, TYPE_CHECKING or annotations."""
    listed = set(dir(chunktune))
    assert set(chunktune.__all__) <= listed
    assert not listed & {"Any", "TYPE_CHECKING", "annotations"}


def _init_hints(cls: type) -> dict[str, object]:
    """The evaluated parameter annotations of ``cls.__init__``, as help() resolves them."""
    signature = inspect.signature(cls, eval_str=True)
    return {name: p.annotation for name, p in signature.parameters.items()}


def test_the_types_a_caller_annotates_with_are_exported_as_used() -> None:
    """CandidateStrategy and ProgressCallback are exported: what Policy and resolve are typed by."""
    import chunktune

    hints = typing.get_type_hints(chunktune.Policy)
    assert hints["candidates"] == chunktune.CandidateStrategy
    assert set(typing.get_args(chunktune.CandidateStrategy)) == {
        chunktune.SeedCandidates,
        chunktune.BalancedCandidates,
        chunktune.GeometricCandidates,
        chunktune.ExhaustiveCandidates,
        chunktune.ExplicitCandidates,
    }
    on_progress = typing.get_type_hints(chunktune.resolve)["on_progress"]
    assert on_progress == chunktune.ProgressCallback | None


def _callables(module: ModuleType) -> list[tuple[str, object]]:
    """Each exported function and class, and each public method a class defines itself."""
    found: list[tuple[str, object]] = []
    for name in module.__all__:
        value = getattr(module, name)
        if inspect.isfunction(value) or inspect.isclass(value):
            found.append((name, value))
        if inspect.isclass(value):
            for member in vars(value):
                if not member.startswith("_") and callable(getattr(value, member)):
                    found.append((f"{name}.{member}", getattr(value, member)))
    return found


@pytest.mark.parametrize("module", PUBLIC, ids=lambda m: m.__name__)
def test_no_exported_signature_shows_an_object_s_address(module: ModuleType) -> None:
    """help() shows each default as its value, never ``<function f at 0x...>``."""
    shown = {}
    for name, value in _callables(module):
        try:
            shown[name] = str(inspect.signature(value))  # type: ignore[arg-type]
        except (ValueError, TypeError):  # an exception class, a Protocol's members
            continue
    assert not {name for name, text in shown.items() if " at 0x" in text}


# What a record's __init__ takes beyond the type its field holds: its converter narrows
# it (a Path to its text, a list to a tuple, any mapping to a dict of the record's own).
_WIDER: dict[tuple[str, str], object] = {
    ("CacheSettings", "path"): str | os.PathLike[str] | None,
    ("CacheSettings", "system_path"): str | os.PathLike[str] | None,
    ("ExplicitCandidates", "sizes"): list[int] | tuple[int, ...],
    ("Decision", "timings"): Mapping[int | None, float],
    ("Decision", "samples"): Mapping[int | None, int],
    ("Settings", "policies"): Mapping[str, chunktune.Policy],
}


def test_exported_records_take_exactly_their_field_types_or_a_listed_wider_one() -> None:
    """help(Policy) shows margin: float: each field typed as it is, or as a listed wider type."""
    seen: set[tuple[str, str]] = set()
    for module in PUBLIC:
        for name in module.__all__:
            value = getattr(module, name)
            if not (inspect.isclass(value) and attrs.has(value)):
                continue
            hints = _init_hints(value)
            types = typing.get_type_hints(value)
            for field in attrs.fields(value):
                if field.init:
                    # attrs before 22.2 (the floor) has no alias: the name without "_"s
                    alias = getattr(field, "alias", None) or field.name.lstrip("_")
                    expected = _WIDER.get((name, field.name), types[field.name])
                    assert hints[alias] == expected, (name, field.name, hints[alias])
                    seen.add((name, field.name))
    assert set(_WIDER) <= seen
