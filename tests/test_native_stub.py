"""probectl/_native.pyi names what the built probectl._native has, no more and no less: the stub is
the C extension's types for a checker, and one that drifts from the C code types calls that fail."""
from __future__ import annotations

import ast
import inspect
import re
import sys
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


# --- the stub's signatures against what the C code parses ------------------------------------------

NATIVE = Path(__file__).resolve().parent.parent / "native"
_UNIT = re.compile(r"[a-zA-Z](?:\*|#|!|&)?|[|$]")


def _c_sources() -> str:
    return "\n".join(p.read_text() for p in sorted(NATIVE.glob("py*.c")))


def _c_function(source: str, name: str) -> str:
    """The body of the C function ``name``."""
    start = re.search(rf"^(?:static )?[A-Za-z_][\w \*]*\b{name}\(", source, re.M)
    assert start, name
    return source[start.start():source.index("\n}\n", start.start())]


def _c_parameters(body: str) -> list[tuple[str, bool, bool, object]]:
    """(name, required, keyword-only, default) of what ``body`` parses with PyArg_ParseTupleAndKeywords
    or PyArg_ParseTuple (name None: positional only); the default is the C variable's initial value."""
    call = re.search(r"PyArg_ParseTuple(AndKeywords)?\(args, (?:kwargs, )?\"([^\";]*)[^\"]*\",\s*([^)]*)\)", body)
    assert call, body[:200]
    keywords, fmt, rest = call.group(1), call.group(2), [a.strip() for a in call.group(3).split(",")]
    names = re.search(r"kwlist\[\] = \{([^}]*)\}", body).group(1) if keywords else ""
    names = re.findall(r'"(\w+)"', names)
    if keywords:
        rest = rest[1:]  # (kwlist)
    out, required, kwonly, i = [], True, False, 0
    for unit in _UNIT.findall(fmt):
        if unit in "|$":
            required, kwonly = (False, kwonly) if unit == "|" else (required, True)
            continue
        if unit == "O!":
            rest = rest[1:]  # (the type object checked against)
        var = rest.pop(0).lstrip("&")
        init = re.search(rf"\b{re.escape(var)}\s*=\s*([^,;]+)[,;]", body)
        default = None if init is None else init.group(1).strip()
        if default == "Py_None":
            default = None
        elif default is not None:
            default = eval(default)  # (an integer, such as 8 or 1 << 20)
            if unit == "p":
                default = bool(default)
        out.append((names[i] if keywords else None, required, kwonly, default))
        i += 1
    return out


def _stub_parameters(defs: list[ast.FunctionDef], method: bool) -> list[tuple[str, bool, bool, object]]:
    """As ``_c_parameters``, of a stub function, its overloads merged: a parameter is required when
    every form requires it, and its default is the one a form gives."""
    merged: dict[str, list] = {}
    required_in: dict[str, int] = {}
    for node in defs:
        args = node.args
        skip = 1 if method else 0
        positional = (args.posonlyargs + args.args)[skip:]
        defaults = ([None] * (len(args.posonlyargs + args.args) - len(args.defaults)) + list(args.defaults))[skip:]
        posonly = {a.arg for a in args.posonlyargs}
        for arg, default, kwonly in [(a, d, False) for a, d in zip(positional, defaults)] + \
                                    [(a, d, True) for a, d in zip(args.kwonlyargs, args.kw_defaults)]:
            entry = merged.setdefault(arg.arg, [None if arg.arg in posonly else arg.arg, False, kwonly, None])
            if default is None:
                required_in[arg.arg] = required_in.get(arg.arg, 0) + 1
            else:
                entry[3] = ast.literal_eval(default)
    for name, entry in merged.items():
        entry[1] = required_in.get(name, 0) == len(defs)
    return [tuple(e) for e in merged.values()]


def _stub_callables() -> dict[str, tuple[list[ast.FunctionDef], bool]]:
    """Python name ("parse_page", "Reader.read_rows", "Reader" for its __init__) -> (its defs, method?)."""
    out: dict[str, tuple[list[ast.FunctionDef], bool]] = {}
    for node in _stub_module().body:
        if isinstance(node, ast.FunctionDef) and not node.name.startswith("_"):
            out.setdefault(node.name, ([], False))[0].append(node)
        elif isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
            for member in node.body:
                if isinstance(member, ast.FunctionDef) and not any(
                        isinstance(d, ast.Name) and d.id == "property" for d in member.decorator_list):
                    name = node.name if member.name == "__init__" else f"{node.name}.{member.name}"
                    if member.name == "__init__" or not member.name.startswith("_"):
                        out.setdefault(name, ([], True))[0].append(member)
    return out


def _c_callables(source: str) -> dict[str, tuple[str, str]]:
    """Python name -> (C function, METH_ flags, "init" for a type's tp_init)."""
    owners = {"module_methods": ""}
    for typ in re.finditer(r"PyTypeObject \w+ = \{(.*?)\n\};", source, re.S):
        name = re.search(r'\.tp_name = "probectl\._native\.(\w+)"', typ.group(1)).group(1)
        methods = re.search(r"\.tp_methods = (\w+)", typ.group(1))
        if methods:
            owners[methods.group(1)] = name + "."
        init = re.search(r"\.tp_init = \(initproc\)(\w+)", typ.group(1))
        if init:
            owners[name] = init.group(1)
    out = {}
    for table in re.finditer(r"static PyMethodDef (\w+)\[\] = \{(.*?)\n\};", source, re.S):
        for entry in re.finditer(r'\{ "(\w+)", \(PyCFunction\)(?:\(void \(\*\)\(void\)\))?(\w+),\s*([A-Z_| ]+),',
                                 table.group(2)):
            out[owners[table.group(1)] + entry.group(1)] = (entry.group(2), entry.group(3))
    for name, init in owners.items():
        if not name.endswith("_methods") and name:
            out[name] = (init, "METH_VARARGS | METH_KEYWORDS")
    return out


def test_stub_signatures_are_what_the_c_code_parses():
    """Each function, method and constructor of the stub takes the parameters its C code parses: the
    names of its kwlist in order (none for a METH_VARARGS-only function: positional-only), which are
    optional ('|') and keyword-only ('$'), and as defaults the C variables' initial values."""
    source = _c_sources()
    c = _c_callables(source)
    stub = _stub_callables()
    assert set(c) == set(stub)
    for name, (function, flags) in c.items():
        defs, method = stub[name]
        expected = [] if "METH_NOARGS" in flags else _c_parameters(_c_function(source, function))
        assert _stub_parameters(defs, method) == expected, name


def test_the_docstrings_header_is_made_from_the_current_stub():
    """native/docstrings.h holds the stub's docstrings: regenerate it (tools/regenerate_native_docstrings.py)
    after editing the stub."""
    sys.path.insert(0, str(NATIVE.parent / "tools"))
    from regenerate_native_docstrings import OUTPUT, native_docstrings

    assert OUTPUT.read_text() == native_docstrings(STUB.read_text()), "run tools/regenerate_native_docstrings.py"


def test_the_built_module_documents_itself_with_the_stub():
    assert _native.__doc__ == ast.get_docstring(_stub_module())
    assert inspect.signature(_native.Reader.read_slices).parameters.keys() == {"self", "first", "count", "threads",
                                                                               "skip"}
    assert _native.Reader.read_rows.__doc__ == "The next batch as (rows, lost)."
