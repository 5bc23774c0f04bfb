"""Probe definitions: perf probe's PROBEDEF syntax parsed into a tree of frozen dataclasses.

This is the first layer of probectl (design.md): text in, :class:`ProbeSpec` out, no I/O beyond
reading the grammar. ``grammar/probe.lark`` describes the tokens and their order; this module
turns the parse tree into dataclasses, applies perf's rules that a context-free grammar cannot
say (is the point a file or a function?), checks the combinations perf checks, and turns every
failure into a :class:`~probectl.errors.ProbeSyntaxError` (with the column of the offending
character) or a :class:`~probectl.errors.ProbeSemanticError` (with perf's message).

Syntax (perf-probe(1))::

    [[GROUP:]EVENT=]FUNC[@SRC][:RLN|+OFFS|%return|;PTN] [ARG ...]
    [[GROUP:]EVENT=]SRC:ALN [ARG ...]
    [[GROUP:]EVENT=]SRC;PTN [ARG ...]
    ARG  = [NAME=]FETCH[:TYPE][@user]
    LINEDESC = FUNC[@SRC][:RLN[+NUM|-RLN2]] | SRC[:ALN[+NUM|-ALN2]]

perf behaviours followed:

- A point is a *source file* only if it contains none of ``+@%``, does contain ``:`` or ``;``,
  and has a ``.`` before that ``:``/``;``; otherwise it is a function (``foo.isra.0`` is a function,
  ``foo.c:10`` a file, ``foo.isra.0:10`` a file too, as in perf; write ``foo.isra.0@*:10``).
  ``FUNC@*`` forces a function. ``0xADDR`` is an absolute address.
- ``\\`` escapes the next character and ``"..."``/``'...'`` quote a name (perf's 2024 non-C
  language support), so ``malloc_get_state\\@GLIBC_2.2.5`` is one function name; escapes are
  removed from names but kept in a lazy pattern, as perf does.
- Whitespace separates the point and the arguments (perf's ``argv_split``), so a lazy pattern ends
  at the first space; lazy matching ignores spaces anyway (``;a=*`` matches ``a = b``).
- The point's parts may come in any order (``func%return@file.c``), ``;PTN`` last.
- Numbers follow C (and perf's ``strtoul(..., 0)`` and the kernel's ``kstrtoul(..., 0)``):
  ``0x`` is hex, a leading ``0`` octal.
- Semantic errors carry perf's messages; ``+0`` counts as no offset with ``%return``
  (``func+0%return`` is kernel syntax).

Where probectl is stricter or goes further than perf:

- The file/function rule ignores the lazy pattern, which may contain anything (perf takes a ``+``
  inside ``;PTN`` as a sign that the point is a function). Quoted names may contain spaces.
- A line number, offset or ``%return`` given twice is an error (perf keeps the last one);
  an explicit ``:0`` line counts as a line (perf treats ``0`` as "no line").
- Types, register and ``$``-variable names, bitfields, array lengths and number ranges are checked
  here with a column instead of being left to the kernel's ``error_log``.
- C variables are allowed in return probes (perf refuses them): kernels can read parameters at
  exit through ``$argN``/BTF, so whether a name can be fetched there is the resolver's decision.
- ``$retval`` without ``%return``, ``$argN`` at a line/offset/lazy point, an ``@user`` or array
  type on a value that is not in memory, ``string`` on a register, dereferencing ``$comm`` or a
  string, duplicate or reserved argument names, and more than 12 nested dereferences (the
  kernel's limit) are rejected here.
- Beyond perf's documented forms, the kernel's ``@+OFFS`` (uprobe file offset, see
  :class:`AddressRef`) is accepted, and a C variable may sit inside a dereference (``+8(sk)``,
  as the kernel's BTF arguments allow); :attr:`ArgSpec.is_c_expr` is true for both.
- SDT probes are perf's ``sdt_PROVIDER:NAME`` and ``%[sdt_]PROVIDER:NAME`` (globs in both parts); their
  arguments are ``argN`` (the note's N-th operand), named with ``NAME=argN`` or cast with ``argN:TYPE``.
  Cached events (perf's probe cache) are not supported.

The package: :mod:`.probe_tables` (lark's parser tables of the grammar, generated) run by
:mod:`.lalr` (the lexer and LALR driver), :mod:`.tree` (the dataclasses), :mod:`.builder` (parse
tree → tree), :mod:`.checks` (perf's and the kernel's rules the grammar cannot say), :mod:`.names`
(escapes, quotes, C names) and :mod:`.syntax_errors` (parse failures → ProbeSyntaxError); this
module holds the entry points.
"""
from __future__ import annotations

from functools import lru_cache

from ..errors import ProbectlError, ProbeSyntaxError
from ..grammars import caret_line, check_characters, grammar_path
from .builder import Builder
from .checks import check_nesting
from . import probe_tables
from .lalr import LarkError, Parser, Token, Tree, UnexpectedInput, VisitError
from .tree import (MAX_PROBE_ARGS, AddressRef, ArgSpec, Deref, Expr, Immediate, Index, LineRange, Member, Method,
                   PointSpec, ProbeSpec, Register, SpecialVar, SymbolRef, TypeSpec, Variable, render_expr,
                   sdt_arg_index)

__all__ = [
    "AddressRef",
    "ArgSpec",
    "Deref",
    "Expr",
    "Immediate",
    "Index",
    "LineRange",
    "MAX_PROBE_ARGS",
    "Member",
    "Method",
    "PointSpec",
    "ProbeSpec",
    "Register",
    "SpecialVar",
    "SymbolRef",
    "TypeSpec",
    "Variable",
    "grammar_path",
    "parse_line_range",
    "parse_point",
    "parse_probe",
    "render_expr",
    "sdt_arg_index",
]

_WHITESPACE_CONTROLS = frozenset("\t\n\v\f\r")


@lru_cache(maxsize=None)
def _parser() -> Parser:
    # The tables lark computes from grammar/probe.lark (tools/regenerate_probe_parser.py), run by
    # probectl's LALR driver: importing lark and loading an analysed grammar, or lark's stand-alone
    # module, would be a large part of each `add` (docs/ledger.md, "The probe parser's tables").
    return Parser(probe_tables)


def parse_probe(text: str) -> ProbeSpec:
    """Parse a full definition, ``[[GROUP:]EVENT=]POINT [ARG ...]`` (arguments split on whitespace)."""
    tree = _parse(text, "probe")
    return _convert(tree, text)


def parse_point(text: str) -> PointSpec:
    """Parse a PROBEPOINT without event name or arguments (what ``vars`` takes)."""
    tree = _parse(text, "probe")
    for child in tree.children:
        if isinstance(child, Token) and child.type == "EVENT_NAME":
            raise ProbeSyntaxError("a probe point takes no event name", caret_line(text), child.start_pos)
        if isinstance(child, Tree) and child.data == "arg":
            raise ProbeSyntaxError("a probe point takes no arguments", caret_line(text), child.meta.start_pos)
    return _convert(tree, text).point


def parse_line_range(text: str) -> LineRange:
    """Parse a LINEDESC for ``lines``: ``FUNC[@SRC][:RLN[+NUM|-RLN2]]`` or ``SRC[:ALN[+NUM|-ALN2]]``.

    ``+NUM`` means NUM lines from the start (``func:2+10`` is lines 2..11); ``-RLN2`` is the last
    line, included. Without ``@``, a name holding ``/`` or ``.`` is a source file and anything
    else must be a C function name (perf's ``parse_line_range_desc``).
    """
    tree = _parse(text, "line_range")
    return _convert(tree, text)


def _parse(text: str, start: str) -> Tree:
    check_characters(text, _WHITESPACE_CONTROLS)
    if not text.strip():
        what = "probe definition" if start == "probe" else "line range"
        raise ProbeSyntaxError(f"empty {what}", caret_line(text), len(text))
    try:
        tree = _parser().parse(text, start=start)
    except UnexpectedInput as err:
        from .syntax_errors import syntax_error  # (only a definition that does not parse needs it)

        raise syntax_error(err, text, start) from None
    except LarkError as err:  # pragma: no cover - lark raises UnexpectedInput for bad input
        raise ProbeSyntaxError(f"cannot parse: {err}", caret_line(text), 0) from None
    check_nesting(tree, text)
    return tree


def _convert(tree: Tree, text: str):
    try:
        return Builder(text).transform(tree)
    except VisitError as err:
        if isinstance(err.orig_exc, ProbectlError):
            raise err.orig_exc from None
        raise
