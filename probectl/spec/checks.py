"""perf's and the kernel's rules that the grammar cannot say, checked before and after the tree is built.

Each raises :class:`~probectl.errors.ProbeSemanticError` with perf's message where perf has one,
or :class:`~probectl.errors.ProbeSyntaxError` at a column.
"""
from __future__ import annotations


from ..errors import ProbeSemanticError, ProbeSyntaxError
from ..grammars import caret_line
from .lalr import Tree
from .tree import (MAX_DEREF_DEPTH, MAX_PROBE_ARGS, RESERVED_ARG_NAMES, AddressRef, Deref, Expr, PointSpec, ProbeSpec,
                   Register, SpecialVar, SymbolRef, Variable, render_expr, sdt_arg_index)


def check_nesting(tree: Tree, text: str) -> None:
    """Refuse more nested dereferences than the kernel takes, before the tree is built."""
    # Iterative, so absurd nesting cannot exhaust the Python stack (the Transformer recurses).
    stack = [(tree, 0)]
    while stack:
        node, depth = stack.pop()
        if node.data == "deref":
            depth += 1
            if depth > MAX_DEREF_DEPTH:
                raise ProbeSyntaxError(
                    f"too many nested dereferences (the kernel allows at most {MAX_DEREF_DEPTH})",
                    caret_line(text), node.meta.start_pos,
                )
        stack.extend((child, depth) for child in node.children if isinstance(child, Tree))


def check_point(point: PointSpec) -> None:
    """perf's exclusion checks over the parts of a point (``parse_perf_probe_point``)."""
    address, source, line, lazy = point.address, point.source, point.line, point.lazy
    offset, function, is_return = point.offset, point.function, point.is_return
    if address is not None and (source is not None or line is not None or lazy is not None):
        raise ProbeSemanticError("An absolute address can't be used with a source file, line number or lazy pattern.")
    if lazy is not None and line is not None:
        raise ProbeSemanticError("Lazy pattern can't be used with line number.")
    if lazy is not None and offset is not None:
        raise ProbeSemanticError("Lazy pattern can't be used with offset.")
    if line is not None and offset is not None:
        raise ProbeSemanticError("Offset can't be used with line number.")
    if line is None and lazy is None and source is not None and function is None:
        raise ProbeSemanticError("File always requires line number or lazy pattern.")
    if offset is not None and function is None:
        raise ProbeSemanticError("Offset requires an entry function.")
    if is_return and (offset or line is not None or lazy is not None):
        raise ProbeSemanticError("Offset/Line/Lazy pattern can't be used with return probe.")


def _check_sdt_args(spec: ProbeSpec) -> None:
    """An SDT probe's arguments are its note's operands, by number: ``argN``, ``NAME=argN``, ``argN:TYPE``."""
    for arg in spec.args:
        if sdt_arg_index(arg) is None or arg.user:
            raise ProbeSemanticError(
                f"{arg.text!r}: the arguments of an SDT probe are arg1, arg2, ... (the note's operands)",
                hint="write argN, NAME=argN or argN:TYPE; 'probectl funcs --sdt -x BIN' shows the operands")


def _in_memory(expr: Expr) -> bool:
    return isinstance(expr, (Variable, Deref, SymbolRef, AddressRef))


def check_args(spec: ProbeSpec) -> None:
    """Checks over the arguments and the point together (perf's and the kernel's rules)."""
    point = spec.point
    if point.sdt is not None:
        _check_sdt_args(spec)
    if len(spec.args) > MAX_PROBE_ARGS:
        raise ProbeSemanticError(f"Too many probe arguments ({len(spec.args)}).",
                                 hint=f"a probe can have at most {MAX_PROBE_ARGS} arguments")
    seen: set[str] = set()
    for arg in spec.args:
        expr = arg.expr
        if arg.name is not None:
            if arg.name in RESERVED_ARG_NAMES:
                raise ProbeSemanticError(f"{arg.name} is a reserved field name; choose another argument name")
            if arg.name in seen:
                raise ProbeSemanticError(f"argument name {arg.name} is used twice")
            seen.add(arg.name)
        if isinstance(expr, SpecialVar):
            if expr.name == "retval" and not point.is_return:
                raise ProbeSemanticError("$retval can only be used with %return (a return probe)",
                                         hint=f"probe {point.text}%return to read the return value")
            if expr.name == "arg" and (point.line is not None or point.lazy is not None or point.offset):
                raise ProbeSemanticError(
                    f"${expr.name}{expr.index} can only be used at function entry or with %return",
                    hint="use the parameter's name instead: it is found through the debug information",
                )
            if expr.name in ("vars", "params") and (arg.name or arg.type or arg.user):
                raise ProbeSemanticError(
                    f"${expr.name} expands to several arguments and can't have a name, a type or @user")
        if arg.user and not isinstance(expr, (Variable, Deref)):
            raise ProbeSemanticError(
                f"@user needs a value in memory (a C variable or +OFFS(...)): {arg.text}")
        if arg.type is not None:
            if arg.type.array is not None and not _in_memory(expr):
                raise ProbeSemanticError(
                    f"an array type needs a value in memory, not {render_expr(expr)}: {arg.text}",
                    hint=f"dereference it, e.g. +0({render_expr(expr)}):{arg.type.text}",
                )
            if arg.type.base in ("string", "ustring") and isinstance(expr, Register):
                raise ProbeSemanticError(
                    f"a string is read from memory, not from the register {render_expr(expr)}: {arg.text}",
                    hint=f"dereference it: +0({render_expr(expr)}):{arg.type.text}",
                )
