"""The suite's own conventions, checked so they do not drift."""

from __future__ import annotations

import ast
from pathlib import Path


def test_every_test_has_a_one_line_docstring() -> None:
    """Each test says in one line what behaviour it checks (STYLE); details go in comments."""
    missing, long = [], []
    for path in sorted(Path(__file__).parent.glob("test_*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name.startswith(
                "test_"
            ):
                doc = ast.get_docstring(node, clean=False)
                where = f"{path.name}::{node.name}"
                if not doc or not doc.strip():
                    missing.append(where)
                elif "\n" in doc.strip():
                    long.append(where)
    assert not missing, f"tests without a docstring: {missing}"
    assert not long, f"tests whose docstring is more than one line: {long}"
