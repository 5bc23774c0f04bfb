"""probectl/_native.pyi names what the built probectl._native has, no more and no less: the stub is
the C extension's types for a checker, and one that drifts from the C code types calls that fail."""
from __future__ import annotations

import ast
import inspect
from pathlib import Path

from probectl import _native

STUB = Path(_native.__file__).resolve().parent / "_native.pyi"


def _public(names) -> set[str]:
    return {n for n in names if not n.startswith("_")}


def _stub_module() -> ast.Module:
    return ast.parse(STUB.read_text(), str(STUB))


def _defined(body: list[ast.stmt]) -> dict[str, ast.stmt]:
    """Names a stub body defines (classes, functions, annotated or assigned names); the last
    definition of an overloaded name stands for it."""
    out: dict[str, ast.stmt] = {}
    for node in body:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef)):
            out[node.name] = node
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            out[node.target.id] = node
        elif isinstance(node, ast.Assign):
            out.update((t.id, node) for t in node.targets if isinstance(t, ast.Name))
    return out


def test_stub_names_every_public_attribute_of_the_module_and_nothing_else():
    stub = _public(_defined(_stub_module().body))
    module = _public(vars(_native))
    assert module - stub == set(), "in probectl._native but not in its stub"
    assert stub - module == set(), "in the stub but not in probectl._native"


def test_stub_classes_name_every_public_member_of_the_types_and_nothing_else():
    for name, node in _defined(_stub_module().body).items():
        if not isinstance(node, ast.ClassDef) or name.startswith("_"):
            continue
        real = getattr(_native, name)
        assert inspect.isclass(real), name
        stub = _public(_defined(node.body))
        own = _public(vars(real))
        assert own - stub == set(), f"{name}: in the type but not in its stub"
        assert stub - own == set(), f"{name}: in the stub but not in the type"


def test_stub_constants_are_the_module_integers():
    for name, node in _defined(_stub_module().body).items():
        if isinstance(node, ast.AnnAssign) and not name.startswith("_"):
            assert ast.unparse(node.annotation) == "int" and type(getattr(_native, name)) is int, name


def test_every_public_name_of_the_stub_has_a_docstring():
    """The stub carries the C API's documentation: each function and type, and each method but
    the dunder ones, says what it does."""
    def documented(node: ast.AST) -> bool:
        return isinstance(node, (ast.ClassDef, ast.FunctionDef)) and ast.get_docstring(node) is not None

    module = _stub_module()
    assert ast.get_docstring(module)
    for name, node in _defined(module.body).items():
        if name.startswith("_") or not isinstance(node, (ast.ClassDef, ast.FunctionDef)):
            continue
        assert documented(node), name
        if isinstance(node, ast.ClassDef):
            for member in node.body:
                if isinstance(member, ast.FunctionDef) and not member.name.startswith("_"):
                    overloads = [m for m in node.body if isinstance(m, ast.FunctionDef) and m.name == member.name]
                    assert any(documented(m) for m in overloads), f"{name}.{member.name}"
