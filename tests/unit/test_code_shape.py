"""The shape rules of docs/architecture.md ("Code shape"), read from the source: no
function of more than 60 lines of code outside the tests."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SOURCES = ("flwr_vflgan", "strategies", "clients", "simulations")
LONGEST = 60


def code_lines(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """A function's lines from ``def`` to its end, less its docstring's (documentation
    is not what makes a function hard to read)."""
    lines = node.end_lineno - node.lineno + 1  # type: ignore[operator]
    first = node.body[0]
    if (
        len(node.body) > 1
        and isinstance(first, ast.Expr)
        and isinstance(first.value, ast.Constant)
        and isinstance(first.value.value, str)
    ):
        lines -= first.end_lineno - first.lineno + 1  # type: ignore[operator]
    return lines


def test_code_lines_leave_out_the_docstring_only():
    source = 'def f():\n    """One.\n\n    Two.\n    """\n    x = 1\n    return x\n'
    node = ast.parse(source).body[0]
    assert isinstance(node, ast.FunctionDef)
    assert code_lines(node) == 3  # def, x = 1, return x


def test_no_function_is_longer_than_sixty_lines_of_code():
    long = []
    for root in SOURCES:
        for path in sorted((REPO / root).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
                is_function = isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
                if is_function and code_lines(node) > LONGEST:
                    long.append(f"{path.relative_to(REPO)}:{node.lineno} {node.name}")
    assert not long, f"functions over {LONGEST} lines of code: split them\n" + "\n".join(long)


READERS = {"get_field", "get_int", "get_str", "get_indices"}
"""The codec's field readers: a message's fields are read in its family's messages module."""


def test_strategies_and_clients_read_no_message_field_by_name():
    found = []
    for root in ("strategies", "clients"):
        for path in sorted((REPO / root).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
                if not isinstance(node, ast.Call):
                    continue
                name = getattr(node.func, "id", getattr(node.func, "attr", ""))
                literal = any(
                    isinstance(a, ast.Constant) and isinstance(a.value, str) for a in node.args
                )
                if name in READERS and literal:
                    found.append(f"{path.relative_to(REPO)}:{node.lineno} {name}")
    assert not found, "message fields read by name outside a messages module:\n" + "\n".join(found)
