"""The package's shape (as drgn's tests/test_python.py guards its own): imports point one way along the
data flow of design.md, with no cycle, lazy and ``TYPE_CHECKING`` imports included.

Every ``import``/``from … import`` of every module of ``probectl/`` is read from its syntax tree,
wherever it stands (module level, inside a function, under ``if TYPE_CHECKING:``), and classified by
the stage it belongs to. ``LAYERS`` says which stages each stage may import; the rest of the rules
are in the tests' names."""
from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "probectl"

# stage -> the stages it may import (besides itself, the leaves ``errors``, ``notice``, ``termtext``,
# ``regularfile``, ``outputfile`` and ``dataclass``, and the root package's __version__).
# cli → probes/record/script → resolve → debuginfo/target → arch, as the package docstring draws it.
LAYERS: dict[str, set[str]] = {
    "probectl": {"api"},  # the package's read_trace, imported on first use
    "__main__": {"cli"},
    "cli": {"api", "probes", "record", "script", "analysis", "pictures", "resolve", "target", "spec", "filters", "tracedat",
            "tracefs", "events", "formats", "debuginfo", "debuginfo.dwarf", "debuginfo.btf", "arch", "cachedir"},
    "api": {"tracedat", "ringbuf", "formats", "script"},
    "probes": {"resolve", "target", "spec", "events", "tracefs", "formats", "debuginfo", "debuginfo.dwarf",
               "debuginfo.btf", "arch"},
    # (a traced run adds the probes of its definitions for the run: record composes probes, lazily)
    "record": {"probes", "target", "tracefs", "filters", "tracedat", "ringbuf", "formats", "events", "debuginfo",
               "debuginfo.dwarf", "debuginfo.btf", "cachedir", "arch"},
    "analysis": {"record", "script", "tracedat", "ringbuf", "tracefs", "events", "formats", "filters", "_native",
                 "cachedir", "arch"},
    "pictures": {"analysis", "script", "tracedat", "ringbuf", "formats", "events", "_native"},
    # (user symbols from a debug file fetched from debuginfod, as add fetches DWARF: script composes target, lazily)
    "script": {"tracedat", "ringbuf", "formats", "debuginfo", "target", "_native"},
    "resolve": {"spec", "target", "debuginfo", "debuginfo.dwarf", "debuginfo.btf", "arch"},
    "target": {"debuginfo", "cachedir", "arch"},
    "debuginfo.dwarf": {"debuginfo", "arch", "cachedir", "_native"},
    "debuginfo.btf": {"debuginfo", "arch", "cachedir"},
    "debuginfo": {"arch", "cachedir", "compression", "_native"},
    "spec": {"grammars"},
    "filters": {"grammars", "formats"},
    "tracedat": {"ringbuf", "formats", "_native", "compression"},
    "tracefs": {"events", "formats"},
    "ringbuf": {"formats", "_native"},
    "grammars": {"cachedir"},
    "events": set(),
    "formats": set(),
    "arch": set(),
    "cachedir": set(),
    "compression": set(),  # zlib and zstd for the ELF and trace.dat readers
    "notice": set(),
    "regularfile": set(),
    "outputfile": set(),
    "termtext": set(),
    "dataclass": set(),
    "errors": set(),
    "_native": set(),
}
# Stages whose imports of these may only be lazy (inside the function that needs them): reading debug
# information is rare in a recording (enum names in filters) and in a script (user symbols), and a run
# resolves definitions (the resolver's DWARF and grammars) only when it was given some; the Python
# API joins and names stacks (script's work) only when asked for them.
LAZY_ONLY = {("record", "debuginfo"), ("record", "debuginfo.dwarf"), ("record", "debuginfo.btf"),
             ("record", "probes"), ("record", "target"), ("script", "debuginfo"), ("script", "target"),
             ("api", "script")}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def stage(module: str) -> str:
    parts = module.split(".")[1:]
    if not parts:
        return "probectl"
    if parts[0] == "debuginfo" and len(parts) > 1 and parts[1] in ("dwarf", "btf"):
        return "debuginfo." + parts[1]
    return parts[0]


def _imports(module: str, path: Path):
    """(imported module, line, kind) of every import in ``path``; kind: top, lazy or typing."""
    tree = ast.parse(path.read_text(), str(path))
    is_package = path.name == "__init__.py"

    def absolute(level: int, name: str | None) -> str:
        if not level:
            return name or ""
        base = module.split(".") if is_package else module.split(".")[:-1]
        base = base[:len(base) - (level - 1)]
        return ".".join(base + ([name] if name else []))

    def walk(node, kind):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.dump(child.test):
                for sub in child.body:
                    yield from visit(sub, "typing")
                for sub in child.orelse:
                    yield from visit(sub, kind)
                continue
            yield from visit(child, kind)

    def visit(node, kind):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)) and kind == "top":
            kind = "lazy"
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno, kind
        elif isinstance(node, ast.ImportFrom):
            base = absolute(node.level, node.module)
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                yield (sub if sub in MODULES or alias.name == "_native" else base), node.lineno, kind
        yield from walk(node, kind)

    for target, line, kind in walk(tree, "top"):
        if target == "probectl" or target.startswith("probectl."):
            yield target, line, kind


# A generated module (probectl/spec/probe_tables.py: lark's parser tables, written by a tool) is data, not held to the
# layers (it imports nothing).
GENERATED = {module for module, path in MODULES.items() if path.read_text().startswith("# Generated by tools/")}
EDGES = [(module, target, line, kind) for module, path in MODULES.items() if module not in GENERATED
         for target, line, kind in _imports(module, path) if target != module]


def test_the_stages_are_known():
    """Every module belongs to a stage of LAYERS (a new package gets its place in the flow)."""
    assert {stage(m) for m in MODULES} - {"probectl"} <= set(LAYERS)


@pytest.mark.parametrize("module", sorted(MODULES))
def test_imports_point_down(module):
    wrong = []
    for source, target, line, kind in EDGES:
        if source != module:
            continue
        a, b = stage(source), stage(target)
        if a == b or target in ("probectl.errors", "probectl.notice", "probectl.termtext", "probectl.regularfile",
                                "probectl.outputfile", "probectl.dataclass", "probectl"):
            continue
        if b not in LAYERS.get(a, ()):
            wrong.append(f"{source}:{line} imports {target} ({a} may import {sorted(LAYERS.get(a, ()))})")
        elif (a, b) in LAZY_ONLY and kind == "top":
            wrong.append(f"{source}:{line} imports {target} at module level; {a} reads debug information "
                         "only when a definition or filter needs it")
    assert not wrong, "\n".join(wrong)


def test_nothing_imports_the_command_line():
    assert [f"{s}:{line}" for s, t, line, _ in EDGES if stage(t) == "cli" and stage(s) not in ("cli", "__main__")] == []


def test_no_import_cycles():
    """No cycle through module-level or lazy imports. A TYPE_CHECKING import (annotations only) may
    point back, but only within its stage: across stages test_imports_point_down holds it too."""
    graph = defaultdict(set)
    for source, target, _line, kind in EDGES:
        if target in MODULES and target != "probectl" and kind != "typing":
            graph[source].add(target)
    cycles = _strongly_connected(graph)
    assert cycles == [], "import cycles: " + "; ".join(" <-> ".join(c) for c in cycles)


def test_the_native_extension_is_read_in_its_own_layers():
    """Python.h code is reached only through ringbuf, tracedat, script and analysis (the readers,
    formatters and the aggregator of hist/latency), debuginfo.dwarf (the scanner of a unit's
    definitions for the name index) and debuginfo (the C++ runtime's demangler called for a list, a whole
    symbol table decoded)."""
    users = {stage(s) for s, t, _, _ in EDGES if t == "probectl._native"}
    assert users <= {"ringbuf", "tracedat", "script", "analysis", "debuginfo.dwarf", "debuginfo"}


def _strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's algorithm, iteratively: the components of more than one module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.get(root, ()))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_the_cycle_finder_finds_cycles():
    """The rule above can fail: a planted cycle is found, a chain is not."""
    assert _strongly_connected({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _strongly_connected({"a": {"b"}, "b": {"c"}}) == []


def test_python_h_only_in_the_glue_files():
    """native/: the C core (ring-buffer pages, recorder, decoder, formatter) knows nothing of Python;
    only the py*.c glue files and pyglue.h include Python.h, and the extension is built from
    native/*.c alone (the fuzz drivers live in native/fuzz/)."""
    native = PACKAGE.parent / "native"
    including = {p.name for p in native.glob("*.[ch]") if "#include <Python.h>" in p.read_text()
                 or '#include "pyglue.h"' in p.read_text()}
    assert including and all(name.startswith("py") for name in including), sorted(including)
    assert not [p.name for p in native.glob("*.c") if "int main(" in p.read_text()]
