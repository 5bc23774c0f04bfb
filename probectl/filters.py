"""Event filters: the kernel's filter language, checked against an event's fields before it is written.

A filter is written to ``events/<group>/<event>/filter`` (of probectl's own tracefs instance) and
the kernel then keeps only the events that match it. The kernel's language (events.rst, "Event
filtering")::

    prev_pid == 1 && !(next_comm ~ "kworker*") || call_site.function == ksys_read

``grammar/filter.lark`` parses it, :func:`compile_filter` checks every predicate against the
event's format and renders the text to write, and :func:`apply_filter` writes it and, if the
kernel still refuses it, shows the kernel's own message and caret.

What this kernel (6.18) accepts, found by writing filters to a private instance:

- numbers: ``== != < <= > >= &``; strings: ``== != ~`` (``~`` is a glob with ``*``, ``?`` and
  ``[...]``; ``==`` is an exact compare); ``&&`` binds tighter than ``||``; ``!`` before a
  predicate or a parenthesised group; numbers as ``kstrtoll``/``kstrtoull`` read them (``0x`` hex,
  leading ``0`` octal, ``-`` only on signed fields); strings must be quoted (``"..."`` or
  ``'...'``, no escapes, at most 255 bytes); the whole filter at most 4095 bytes;
- ``FIELD.function == SYMBOL`` (``==``/``!=``, long-sized fields only); ``FIELD.ustring`` on string
  fields (reads a ``char *`` from user memory); ``FIELD & CPUS{LIST}`` (also ``==``/``!=``) on
  numbers and cpumask fields; the generic fields ``CPU``/``cpu``/``common_cpu`` and ``COMM``/``comm``.

What probectl checks before the kernel sees the text:

- the field exists (else the event's fields are listed, with a did-you-mean), the operator suits
  its type (``~`` on a number, ``<`` or ``&`` on a string, ``.function`` on a short field...),
  the value suits it too, and numbers fit the field (``300`` on a ``u8``, ``-1`` on an unsigned
  field: the kernel would silently truncate the first one and read the second as a huge number);
- a syntax error is a :class:`~probectl.errors.ProbeSyntaxError` at the exact column, and a
  value or field that does not fit is a :class:`FilterError` with a caret under it.

What probectl adds, always rendered to plain kernel syntax (the kernel never sees an extension):

- symbolic names for numbers: ``skc_state != TCP_ESTABLISHED``, ``flags & O_CREAT|O_EXCL``
  (names joined by ``|`` are or-ed together). Names come from the ``enums`` callback (enum types
  in the probed program's debug info) and from the tables of ``__print_symbolic``/``__print_flags``
  in the event's print format, so tracepoints work without debug info:
  ``sock:inet_sock_set_state newstate == TCP_ESTABLISHED``, ``sched:sched_switch prev_state & D``;
  ``true``/``false`` for ``bool`` fields;
- sizes with units: ``bytes_req > 4k`` (``k``/``K``/``KiB``, ``M``/``MiB``, ``G``/``GiB``,
  ``T``/``TiB``: powers of 1024; ``1.5M`` when the result is whole; ``KB``/``MB``... are refused as
  ambiguous);
- IPv4 addresses for 4-byte address arrays: ``daddr == 127.0.0.1`` (the bytes as the kernel
  compares them, in this machine's byte order);
- unquoted strings on string fields: ``prev_comm == bash``, ``comm ~ *sh*``;
- syscall-entry string arguments (``const char * filename`` of ``syscalls:sys_enter_*``) are
  pointers to user memory, which the kernel reads only with ``.ustring``; without it such a
  filter silently never matches, so probectl adds the suffix.
"""
from __future__ import annotations

import difflib
import errno
import os
import re
import struct
import sys
import unicodedata
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache
from pathlib import Path
from typing import Callable, Optional, Union

from lark import Lark, Token, Tree
from lark.exceptions import LarkError, UnexpectedCharacters, UnexpectedInput, UnexpectedToken

from .errors import ProbectlError, ProbeSyntaxError, TracefsError
from .formats import EventFormat, Field
from .spec import grammar_path
from .tracefs import os_error

__all__ = [
    "And",
    "CpuList",
    "Filter",
    "FilterError",
    "FilterRejectedError",
    "MAX_FILTER_BYTES",
    "MAX_STRING_BYTES",
    "Not",
    "Or",
    "Predicate",
    "StringValue",
    "Term",
    "Terms",
    "apply_filter",
    "clear_filter",
    "compile_filter",
    "parse_filter",
    "print_fmt_symbols",
]

MAX_FILTER_BYTES = 4095   # event_filter_write() refuses a write of PAGE_SIZE bytes or more
MAX_STRING_BYTES = 255    # MAX_FILTER_STR_VAL (256) with the NUL: "Operand too long"
MAX_NESTING = 100         # parentheses and '!' (the kernel takes more, nobody writes more)

_LONG_SIZE = struct.calcsize("l")
_WHITESPACE_CONTROLS = frozenset("\t\n\r")
_NUMERIC_OPS = ("==", "!=", "<", "<=", ">", ">=", "&")
_STRING_OPS = ("==", "!=", "~")
_CPUS_OPS = ("&", "==", "!=")
_SUFFIXES = ("function", "ustring")

Enums = Callable[[str], Optional[dict[str, int]]]


# ---------------------------------------------------------------------------------------------
# Errors
# ---------------------------------------------------------------------------------------------

class FilterError(ProbectlError):
    """A filter that parses but does not fit the event: unknown field, wrong operator or value.

    ``text`` and ``column`` (0-based) place a caret under the offending part, as for syntax errors.
    """

    def __init__(self, message: str, text: str = "", column: Optional[int] = None, hint: str = ""):
        super().__init__(message, hint)
        self.text = text
        self.column = column

    def __str__(self) -> str:
        if self.column is None:
            return self.message
        return f"{self.message}\n  {self.text}\n  {' ' * self.column}^"


class FilterRejectedError(TracefsError):
    """The kernel refused a filter; ``kernel_log`` holds its message and caret (from the filter file)."""


# ---------------------------------------------------------------------------------------------
# The syntax tree
# ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Term:
    """A number or a bare word as written (``0x400``, ``4k``, ``TCP_ESTABLISHED``, ``bash``)."""

    text: str
    column: int


@dataclass(frozen=True)
class Terms:
    """One or more terms joined by ``|`` (``O_CREAT|O_EXCL``); usually just one."""

    terms: tuple[Term, ...]

    @property
    def column(self) -> int:
        return self.terms[0].column


@dataclass(frozen=True)
class StringValue:
    """A quoted string; ``value`` is without the quotes, ``quote`` is ``"`` or ``'``."""

    value: str
    quote: str
    column: int


@dataclass(frozen=True)
class CpuList:
    """``CPUS{...}``; ``text`` is what is between the braces."""

    text: str
    column: int


Value = Union[Terms, StringValue, CpuList]


@dataclass(frozen=True)
class Predicate:
    """``FIELD[.SUFFIX] OP VALUE``; ``column`` is where the field starts, ``op_column`` the operator."""

    field: str
    suffix: str
    op: str
    value: Value
    column: int
    op_column: int


@dataclass(frozen=True)
class Not:
    """``!operand``; ``column`` is where the ``!`` is."""

    operand: "Node"
    column: int


@dataclass(frozen=True)
class And:
    """Two or more operands joined by ``&&``."""

    operands: tuple["Node", ...]


@dataclass(frozen=True)
class Or:
    """Two or more operands joined by ``||``."""

    operands: tuple["Node", ...]


Node = Union[Predicate, Not, And, Or]


@dataclass(frozen=True)
class Filter:
    """A checked filter: ``text`` is what the kernel gets, ``source`` what the user wrote,
    ``fields`` the fields it reads (in order of first use, without suffixes)."""

    text: str
    source: str
    fields: tuple[str, ...]


# ---------------------------------------------------------------------------------------------
# Parsing
# ---------------------------------------------------------------------------------------------

@lru_cache(maxsize=None)
def _parser() -> Lark:
    return Lark(grammar_path("filter.lark").read_text(), parser="lalr", lexer="contextual")


def parse_filter(text: str) -> Node:
    """Parse a filter into its syntax tree; no field is checked (see :func:`compile_filter`)."""
    if not isinstance(text, str):
        raise TypeError(f"expected a str, got {type(text).__name__}")
    for column, ch in enumerate(text):
        if unicodedata.category(ch)[0] == "C" and ch not in _WHITESPACE_CONTROLS:
            raise ProbeSyntaxError(f"invalid character U+{ord(ch):04X}", _display(text), column)
    if not text.strip():
        raise ProbeSyntaxError("empty filter", _display(text), 0,
                               hint="write FIELD OP VALUE, e.g. 'common_pid == 42'; "
                                    "to remove a filter, give none")
    try:
        tree = _parser().parse(text)
    except UnexpectedInput as err:
        raise _syntax_error(err, text) from None
    except LarkError as err:  # pragma: no cover - lark raises UnexpectedInput for bad input
        raise ProbeSyntaxError(f"cannot parse the filter: {err}", _display(text), 0) from None
    _check_nesting(tree, text)
    return _build(tree.children[0], text)


def _display(text: str) -> str:
    """``text`` safe to print above a caret: one printable character per character of ``text``."""
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() else " " if ch.isspace() else "?" for ch in text)


_TERMINAL_NAMES = {
    "FIELD": "a field name", "NOT": "'!'", "_LPAR": "'('", "_RPAR": "')'", "OP": "an operator",
    "_AND": "'&&'", "_OR": "'||'", "_BAR": "'|'", "STRING": "a string", "NUMBER": "a number",
    "WORD": "a name", "CPUS": "CPUS{...}", "$END": "the end of the filter",
}
_VALUE_TERMINALS = {"STRING", "NUMBER", "WORD", "CPUS"}
_OPERATORS_TEXT = "==, !=, <, <=, >, >=, & or ~"


def _end_column(text: str) -> int:
    return min(len(text), len(text.rstrip()) + 1)


def _syntax_error(err: UnexpectedInput, text: str) -> ProbeSyntaxError:
    shown = _display(text)
    if isinstance(err, UnexpectedCharacters):
        column = err.pos_in_stream
        ch = text[column]
        expected = set(err.allowed or ())
        if ch in "\"'":
            other = "'" if ch == '"' else '"'
            return ProbeSyntaxError(f"missing closing {ch} for this string", shown, column,
                                    hint=f"the kernel's strings have no escapes; to put a {ch} in a "
                                         f"string, quote it with {other} instead")
        if ch == "{" and text[:column].endswith("CPUS"):
            return ProbeSyntaxError("missing '}' to close CPUS{", shown, len(text))
        return ProbeSyntaxError(f"unexpected {ch!r}: expected {_describe(expected)}", shown, column,
                                hint=_hint_for(expected, ch))
    assert isinstance(err, UnexpectedToken)
    token = err.token
    expected = set(err.expected or ())
    if token.type == "$END":
        if expected == {"_RPAR"} or "_RPAR" in expected and not expected & _VALUE_TERMINALS:
            opened = _unclosed_paren(text)
            if opened is not None:
                return ProbeSyntaxError("this '(' is never closed", shown, opened,
                                        hint="add a ')' where the group ends")
        return ProbeSyntaxError(f"unexpected end of the filter: expected {_describe(expected)}",
                                shown, _end_column(text), hint=_hint_for(expected, ""))
    column = token.start_pos
    if token.type == "_RPAR" and "_RPAR" not in expected and _paren_depth(text, column) == 0:
        return ProbeSyntaxError("unbalanced ')': there is no '(' to close", shown, column)
    if token.type == "OP" and str(token) == "=":
        return ProbeSyntaxError("unexpected '=': expected a value", shown, column)
    wanted = _describe(expected)
    if wanted == "'&&' or '||'" and _paren_depth(text, column):
        wanted = "'&&', '||' or ')'"
    return ProbeSyntaxError(f"unexpected {_token_text(token)}: expected {wanted}", shown, column,
                            hint=_hint_for(expected, str(token)))


def _token_text(token: Token) -> str:
    value = str(token)
    return repr(value) if len(value) <= 30 else repr(value[:27] + "...")


def _describe(expected: set[str]) -> str:
    if "OP" in expected:
        return f"an operator ({_OPERATORS_TEXT})"
    if expected and expected <= {"NUMBER", "WORD"}:
        return "a number or a name after '|'"
    if expected & _VALUE_TERMINALS and not expected - _VALUE_TERMINALS:
        return "a value (a number, a \"string\", a name or CPUS{...})"
    if "FIELD" in expected:
        return "a field name, '!' or '('"
    if "_AND" in expected or "_OR" in expected:
        return "'&&' or '||'"
    names = [_TERMINAL_NAMES.get(name, name) for name in sorted(expected, key=_order)]
    if not names:
        return "something else"
    return ", ".join(names[:-1]) + " or " + names[-1] if len(names) > 1 else names[0]


def _order(name: str) -> int:
    return list(_TERMINAL_NAMES).index(name) if name in _TERMINAL_NAMES else len(_TERMINAL_NAMES)


def _hint_for(expected: set[str], found: str) -> str:
    if "FIELD" in expected:
        if found and (found[0].isdigit() or found[0] in "\"'-"):
            return "the field comes first: FIELD OP VALUE, e.g. 'common_pid == 42'"
        return "a filter is FIELD OP VALUE, joined by && and ||"
    if "_AND" in expected or "_OR" in expected:
        if found == "&":
            return "'&' tests bits (flags & 0x4); join predicates with '&&'"
        return "join predicates with '&&' or '||'"
    if "OP" in expected and found in ("&&", "||"):
        return "each predicate compares a field with a value, e.g. 'flags & 0x4', not just a field"
    return ""


def _paren_depth(text: str, end: int) -> int:
    """How many '(' are open just before ``end``."""
    return len(_open_parens(text[:end]))


def _unclosed_paren(text: str) -> Optional[int]:
    """The column of the first '(' that no ')' closes."""
    stack = _open_parens(text)
    return stack[0] if stack else None


def _open_parens(text: str) -> list[int]:
    """The columns of the '(' that are still open at the end of ``text`` (strings and CPUS{} skipped)."""
    stack: list[int] = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch in "\"'":
            end = text.find(ch, i + 1)
            if end < 0:
                break
            i = end
        elif ch == "{":
            end = text.find("}", i + 1)
            if end < 0:
                break
            i = end
        elif ch == "(":
            stack.append(i)
        elif ch == ")" and stack:
            stack.pop()
        i += 1
    return stack


def _check_nesting(tree: Tree, text: str) -> None:
    # Iterative: the tree is turned into dataclasses recursively, so its depth is bounded first.
    stack = [(tree, 0)]
    while stack:
        node, depth = stack.pop()
        if node.data in ("not_", "or_", "and_"):
            depth += 1
            if depth > MAX_NESTING:
                column = node.children[0].start_pos if node.data == "not_" else _first_column(node)
                raise ProbeSyntaxError(f"the filter nests too deeply (more than {MAX_NESTING} levels)",
                                       _display(text), column)
        stack.extend((child, depth) for child in node.children if isinstance(child, Tree))


def _first_column(tree: Tree) -> int:
    node: Union[Tree, Token] = tree
    while isinstance(node, Tree):
        node = node.children[0]
    return node.start_pos


def _build(tree: Tree, text: str) -> Node:
    kind = tree.data
    if kind == "or_":
        return Or(tuple(_build(child, text) for child in tree.children))
    if kind == "and_":
        return And(tuple(_build(child, text) for child in tree.children))
    if kind == "not_":
        token, operand = tree.children
        return Not(_build(operand, text), token.start_pos)
    assert kind == "predicate", kind
    field_token, op_token, value_tree = tree.children
    name, _, suffix = str(field_token).partition(".")
    if "." in str(field_token) and not suffix:
        raise ProbeSyntaxError("expected a suffix after '.' (.function or .ustring)", _display(text),
                               field_token.start_pos + len(name) + 1)
    op = str(op_token)
    if op == "=":
        raise ProbeSyntaxError("'=' is not an operator: use '==' to compare", _display(text),
                               op_token.start_pos)
    return Predicate(name, suffix, op, _build_value(value_tree), field_token.start_pos, op_token.start_pos)


def _build_value(tree: Tree) -> Value:
    if tree.data == "string":
        (token,) = tree.children
        raw = str(token)
        return StringValue(raw[1:-1], raw[0], token.start_pos)
    if tree.data == "cpus":
        (token,) = tree.children
        return CpuList(str(token)[len("CPUS{"):-1], token.start_pos)
    return Terms(tuple(Term(str(token), token.start_pos) for token in tree.children))


# ---------------------------------------------------------------------------------------------
# Field kinds (the kernel's filter_assign_type, from the type text of the format file)
# ---------------------------------------------------------------------------------------------

_NUMBER, _STRING, _PTR_STRING, _CPUMASK = "number", "string", "string pointer", "cpumask"


@dataclass(frozen=True)
class _FieldInfo:
    name: str
    kind: str                  # one of the kinds above, or "" when the kernel cannot filter on it
    type: str
    size: int
    signed: bool
    reason: str = ""           # why it cannot be filtered on
    field: Optional[Field] = None

    def describe(self) -> str:
        if self.kind == _NUMBER:
            return f"{self.type}, {'signed' if self.signed else 'unsigned'} {self.size}-byte"
        return self.type


_GENERIC_FIELDS = {
    "CPU": _FieldInfo("CPU", _NUMBER, "int", 4, True),
    "cpu": _FieldInfo("cpu", _NUMBER, "int", 4, True),
    "common_cpu": _FieldInfo("common_cpu", _NUMBER, "int", 4, True),
    "COMM": _FieldInfo("COMM", _STRING, "char[16]", 16, False),
    "comm": _FieldInfo("comm", _STRING, "char[16]", 16, False),
}


def _field_info(field: Field) -> _FieldInfo:
    def make(kind: str, reason: str = "") -> _FieldInfo:
        return _FieldInfo(field.name, kind, field.type, field.size, field.signed, reason, field)

    if field.is_data_loc:
        if field.is_string and field.array_len is None:
            return make(_STRING)
        if "cpumask_t" in field.type and field.array_len is None:
            return make(_CPUMASK)
        return make("", "it is a dynamic array, which the kernel's filters cannot read")
    if field.is_string:
        return make(_STRING)
    if field.type in ("char *", "const char *"):
        return make(_PTR_STRING)
    if "cpumask_t" in field.type:
        return make(_CPUMASK)
    if field.size not in (1, 2, 4, 8):
        what = "an array" if field.is_array else "a field"
        return make("", f"it is {what} of {field.size} bytes, and the kernel compares only "
                        "numbers of 1, 2, 4 or 8 bytes and strings")
    return make(_NUMBER)


# ---------------------------------------------------------------------------------------------
# Symbolic names from the print format
# ---------------------------------------------------------------------------------------------

_PRINT_TABLE_RE = re.compile(r"__print_(?:symbolic|flags)(?:_u64)?\s*\(")
_ENTRY_RE = re.compile(r'\{\s*(?P<value>[^{}"]*?)\s*,\s*"(?P<name>[^"\\]*)"\s*\}', re.S)
_IDENT_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def print_fmt_symbols(print_fmt: str) -> dict[str, dict[str, int]]:
    """The ``{ value, "NAME" }`` tables of ``__print_symbolic``/``__print_flags`` calls, by field.

    ``__print_symbolic(REC->newstate, { 1, "TCP_ESTABLISHED" }, ...)`` gives
    ``{"newstate": {"TCP_ESTABLISHED": 1, ...}}``. A call whose first argument reads more than one
    field, an entry whose value is not a constant, and a name that is not an identifier are skipped;
    when a name comes twice for a field, the first value is kept.
    """
    tables: dict[str, dict[str, int]] = {}
    for match in _PRINT_TABLE_RE.finditer(print_fmt):
        args = _call_arguments(print_fmt, match.end())
        if not args:
            continue
        fields = set(re.findall(r"REC->([A-Za-z_][A-Za-z0-9_]*)", args[0]))
        if len(fields) != 1:
            continue
        table = tables.setdefault(fields.pop(), {})
        for arg in args[1:]:
            entry = _ENTRY_RE.fullmatch(arg.strip())
            if not entry or not _IDENT_RE.fullmatch(entry.group("name")):
                continue
            value = _c_constant(entry.group("value"))
            if value is not None:
                table.setdefault(entry.group("name"), value)
    return {name: table for name, table in tables.items() if table}


def _call_arguments(text: str, start: int) -> list[str]:
    """The top-level comma-separated arguments of a call whose '(' ends just before ``start``."""
    args: list[str] = []
    depth = 0
    current = start
    i = start
    while i < len(text):
        ch = text[i]
        if ch == '"':
            end = i + 1
            while end < len(text) and text[end] != '"':
                end += 2 if text[end] == "\\" else 1
            i = end
        elif ch in "({[":
            depth += 1
        elif ch in ")}]":
            if depth == 0:
                args.append(text[current:i])
                return args
            depth -= 1
        elif ch == "," and depth == 0:
            args.append(text[current:i])
            current = i + 1
        i += 1
    return []  # unterminated call: ignore it


_C_TOKEN_RE = re.compile(r"\s*(?:(?P<num>0[xX][0-9a-fA-F]+|[0-9]+)[uUlL]*|(?P<op><<|>>|[-+~|&^()*]))")
# Binary operators from the loosest to the tightest, as in C.
_C_CAST_RE = re.compile(r"\(\s*[A-Za-z_][A-Za-z0-9_ ]*\**\s*\)")
_C_BINARY = (("|",), ("^",), ("&",), ("<<", ">>"), ("+", "-"), ("*",))


class _NotConstant(Exception):
    pass


def _c_constant(text: str) -> Optional[int]:
    """Evaluate a C integer constant such as ``(1UL << 3)`` or ``0x01 | 0x02``; None if it is not one.

    Literals (decimal, 0x hex, 0 octal, with U/L suffixes), casts to a named type, parentheses,
    unary - ~ + and the binary | ^ & << >> + - * are understood; a name is not a constant here.
    """
    if len(text) > 2000:
        return None
    # A parenthesised type name is a cast, ``( unsigned long)`` or ``( gfp_t)``: drop it (a name in
    # parentheses that is not a type leaves an operator without an operand, which fails below).
    text = _C_CAST_RE.sub(" ", text).strip()
    if not text:
        return None
    tokens: list[Union[int, str]] = []
    pos = 0
    while pos < len(text):
        m = _C_TOKEN_RE.match(text, pos)
        if not m:
            return None
        literal = m.group("num")
        if literal is None:
            tokens.append(m.group("op"))
        elif literal[:2].lower() == "0x":
            tokens.append(int(literal, 16))
        elif literal.startswith("0") and len(literal) > 1:
            if any(ch in "89" for ch in literal):
                return None
            tokens.append(int(literal, 8))
        else:
            tokens.append(int(literal))
        pos = m.end()

    def binary(index: int, level: int) -> tuple[int, int]:
        if level == len(_C_BINARY):
            return unary(index)
        left, index = binary(index, level + 1)
        while index < len(tokens) and tokens[index] in _C_BINARY[level]:
            op = tokens[index]
            right, index = binary(index + 1, level + 1)
            if op in ("<<", ">>") and not 0 <= right < 128:
                raise _NotConstant
            left = {"|": lambda: left | right, "^": lambda: left ^ right, "&": lambda: left & right,
                    "<<": lambda: left << right, ">>": lambda: left >> right, "+": lambda: left + right,
                    "-": lambda: left - right, "*": lambda: left * right}[op]()
        return left, index

    def unary(index: int) -> tuple[int, int]:
        if index >= len(tokens):
            raise _NotConstant
        token = tokens[index]
        if isinstance(token, int):
            return token, index + 1
        if token in ("-", "~", "+"):
            operand, index = unary(index + 1)
            return (-operand if token == "-" else ~operand if token == "~" else operand), index
        if token == "(":
            value, index = binary(index + 1, 0)
            if index >= len(tokens) or tokens[index] != ")":
                raise _NotConstant
            return value, index + 1
        raise _NotConstant

    try:
        value, end = binary(0, 0)
    except (_NotConstant, RecursionError):
        return None
    return value if end == len(tokens) else None


# ---------------------------------------------------------------------------------------------
# Checking and rendering
# ---------------------------------------------------------------------------------------------

def compile_filter(text: str, fmt: EventFormat, *, enums: Optional[Enums] = None) -> Filter:
    """Parse ``text``, check it against ``fmt``'s fields and render the kernel's filter text.

    ``enums(field_name)`` returns ``{name: value}`` for a field with an enum (or flags) type, or
    None; names not found there are looked up in the event's print format tables. Raises
    ProbeSyntaxError for text that does not parse and FilterError for one that does not fit
    the event.
    """
    tree = parse_filter(text)
    checker = _Checker(text, fmt, enums)
    rendered = checker.render(tree)
    size = len(rendered.encode())
    if size > MAX_FILTER_BYTES:
        raise FilterError(f"the filter is too long for the kernel ({size} bytes as written for it, "
                          f"at most {MAX_FILTER_BYTES})",
                          hint="split it: record the event twice with simpler filters, or filter afterwards")
    return Filter(text=rendered, source=text, fields=tuple(checker.fields))


_PRECEDENCE = {Or: 1, And: 2}
_INT_RE = re.compile(r"(?P<neg>-)?(?:0[xX](?P<hex>[0-9a-fA-F]+)|(?P<oct>0[0-7]*)|(?P<dec>[1-9][0-9]*))")
_UNIT_RE = re.compile(r"(?P<neg>-)?(?P<number>[0-9]+(?:\.[0-9]+)?)(?P<unit>[A-Za-z]+)")
_IPV4_RE = re.compile(r"[0-9]{1,3}(?:\.[0-9]{1,3}){3}")
_UNITS = {"B": 0}
for _power, _letter in enumerate("KMGT", 1):
    for _spelling in (_letter, _letter + "i", _letter + "iB"):
        _UNITS[_spelling] = _power
_UNITS["k"] = _UNITS["ki"] = _UNITS["kiB"] = 1
_AMBIGUOUS_UNITS = {"KB", "kB", "MB", "GB", "TB"}
_CPULIST_ITEM_RE = re.compile(r"(?P<first>[0-9]+|N)(?:-(?P<last>[0-9]+|N)(?::(?P<used>[0-9]+)/(?P<group>[0-9]+))?)?")
_SYMBOL_RE = re.compile(r"[A-Za-z_.$][A-Za-z0-9_.$]*")


@dataclass(frozen=True)
class _Number:
    value: int
    style: str  # "dec", "hex", "oct": how to write it for the kernel


class _Checker:
    def __init__(self, text: str, fmt: EventFormat, enums: Optional[Enums]):
        self.text = text
        self.shown = _display(text)
        self.fmt = fmt
        self.enums = enums
        self.fields: list[str] = []
        self._symbols: Optional[dict[str, dict[str, int]]] = None
        self._names_cache: dict[str, dict[str, int]] = {}

    def error(self, message: str, column: Optional[int], hint: str = "") -> FilterError:
        return FilterError(message, self.shown, column, hint)

    # ---- structure --------------------------------------------------------------------------

    def render(self, node: Node, parent: int = 0) -> str:
        if isinstance(node, Predicate):
            return self.predicate(node)
        if isinstance(node, Not):
            return f"!({self.render(node.operand)})"
        join = " || " if isinstance(node, Or) else " && "
        own = _PRECEDENCE[type(node)]
        text = join.join(self.render(child, own) for child in node.operands)
        return f"({text})" if parent > own else text

    # ---- fields -----------------------------------------------------------------------------

    def lookup(self, pred: Predicate) -> _FieldInfo:
        field = self.fmt.field(pred.field)
        info = _field_info(field) if field is not None else _GENERIC_FIELDS.get(pred.field)
        if info is None:
            raise self.unknown_field(pred)
        if not info.kind:
            raise self.error(f"cannot filter on {pred.field} ({info.type}): {info.reason}", pred.column)
        if pred.field not in self.fields:
            self.fields.append(pred.field)
        return info

    def unknown_field(self, pred: Predicate) -> FilterError:
        event = self.fmt.full_name
        own = [f.name for f in self.fmt.event_fields]
        common = [f.name for f in self.fmt.common_fields]
        generic = ["CPU", "COMM"]
        candidates = own + common + list(_GENERIC_FIELDS)
        close = difflib.get_close_matches(pred.field, candidates, n=3, cutoff=0.6)
        if not close:
            folded = [name for name in candidates if name.lower() == pred.field.lower()]
            close = folded[:1]
        lists = []
        if own:
            lists.append(f"{event} has {', '.join(own)}")
        else:
            lists.append(f"{event} has no fields of its own")
        lists.append(f"every event has {', '.join(common + generic)}")
        hint = "; ".join(lists)
        if close:
            hint = f"did you mean {' or '.join(close)}? " + hint
        return self.error(f"{event} has no field {pred.field!r}", pred.column, hint)

    # ---- predicates -------------------------------------------------------------------------

    def predicate(self, pred: Predicate) -> str:
        info = self.lookup(pred)
        suffix = pred.suffix
        if suffix and suffix not in _SUFFIXES:
            raise self.error(f"unknown field suffix '.{suffix}'", pred.column + len(pred.field),
                             hint=".function compares a kernel address with a function name, "
                                  ".ustring reads a string from user memory")
        if suffix == "function":
            value = self.function_value(pred, info)
        elif info.kind in (_STRING, _PTR_STRING):
            value = self.string_value(pred, info)
        elif suffix == "ustring":
            raise self.error(f".ustring reads a string, and {pred.field} is not one ({info.describe()})",
                             pred.column + len(pred.field),
                             hint=".ustring applies to string fields, such as 'const char *' arguments")
        elif info.kind == _CPUMASK:
            value = self.cpumask_value(pred, info)
        else:
            value = self.number_value(pred, info)
        if (not suffix and info.kind == _PTR_STRING and self.fmt.system == "syscalls"
                and self.fmt.name.startswith("sys_enter_")):
            # A syscall's string argument points to user memory: without .ustring the kernel reads
            # it as a kernel address, fails, and the predicate never matches.
            suffix = "ustring"
        name = f"{pred.field}.{suffix}" if suffix else pred.field
        return f"{name} {pred.op} {value}"

    def function_value(self, pred: Predicate, info: _FieldInfo) -> str:
        column = pred.column + len(pred.field)
        if info.kind != _NUMBER or info.size != _LONG_SIZE:
            raise self.error(f".function needs an address field of {_LONG_SIZE} bytes; "
                             f"{pred.field} is {info.describe()}", column)
        if pred.op not in ("==", "!="):
            raise self.error(f"'{pred.op}' does not apply to .function: use == or !=", pred.op_column)
        value = pred.value
        if isinstance(value, StringValue):
            name, where = value.value, value.column
        elif isinstance(value, Terms) and len(value.terms) == 1:
            name, where = value.terms[0].text, value.column
        else:
            raise self.error(".function compares with one function name", value.column)
        if not _SYMBOL_RE.fullmatch(name):
            raise self.error(f"{name!r} is not a function name", where,
                             hint="write the name of a kernel function, as in /proc/kallsyms")
        return name

    def string_value(self, pred: Predicate, info: _FieldInfo) -> str:
        if pred.op not in _STRING_OPS:
            raise self.error(f"'{pred.op}' does not apply to the string {pred.field} ({info.describe()})",
                             pred.op_column, hint="strings take == and != (exact) and ~ (glob: *, ?, [...])")
        value = pred.value
        if isinstance(value, CpuList):
            raise self.error(f"CPUS{{...}} needs a number or cpumask field; {pred.field} is a string",
                             value.column)
        if isinstance(value, Terms):
            if len(value.terms) > 1:
                raise self.error("'|' joins numbers, not strings", value.terms[1].column - 1,
                                 hint="quote the string if it contains '|'")
            string, quote, column = value.terms[0].text, '"', value.column
        else:
            string, quote, column = value.value, value.quote, value.column
        size = len(string.encode())
        if size > MAX_STRING_BYTES:
            raise self.error(f"the string is too long for the kernel ({size} bytes, at most {MAX_STRING_BYTES})",
                             column)
        return f"{quote}{string}{quote}"

    def cpumask_value(self, pred: Predicate, info: _FieldInfo) -> str:
        if not isinstance(pred.value, CpuList):
            raise self.error(f"{pred.field} is a CPU mask: compare it with CPUS{{LIST}}", pred.value.column,
                             hint=f"e.g. '{pred.field} & CPUS{{0-3}}' (any of CPUs 0 to 3)")
        return self.cpus(pred)

    def cpus(self, pred: Predicate) -> str:
        value = pred.value
        assert isinstance(value, CpuList)
        if pred.op not in _CPUS_OPS:
            raise self.error(f"'{pred.op}' does not apply to CPUS{{...}}: use &, == or !=", pred.op_column)
        items = [item.strip() for item in value.text.split(",")]
        if items and not items[-1]:
            items.pop()  # the kernel accepts a trailing comma
        if not items:
            raise self.error("empty CPU list", value.column, hint="e.g. CPUS{0-3,8}")
        column = value.column + len("CPUS{")
        for item in items:
            if item == "all":
                continue
            m = _CPULIST_ITEM_RE.fullmatch(item)
            if not m:
                raise self.error(f"invalid CPU list item {item!r}", column,
                                 hint="a CPU list is N, N-M or N-M:USED/GROUP items separated by commas")
            first, last = m.group("first"), m.group("last")
            if last is not None and first != "N" and last != "N" and int(first) > int(last):
                raise self.error(f"the CPU range {item} goes backwards", column)
            if m.group("group") is not None:
                used, group = int(m.group("used")), int(m.group("group"))
                if group == 0 or used == 0 or used > group:
                    raise self.error(f"invalid CPU stride {item}: USED/GROUP needs 0 < USED <= GROUP", column)
        return "CPUS{" + ",".join(items) + "}"

    # ---- numbers ----------------------------------------------------------------------------

    def number_value(self, pred: Predicate, info: _FieldInfo) -> str:
        value = pred.value
        if pred.op == "~":
            raise self.error(f"'~' matches strings, and {pred.field} is a number ({info.describe()})",
                             pred.op_column, hint="numbers take ==, !=, <, <=, >, >= and & (bit test)")
        if pred.op not in _NUMERIC_OPS:  # pragma: no cover - the grammar lexes only known operators
            raise self.error(f"unknown operator {pred.op!r}", pred.op_column)
        if isinstance(value, CpuList):
            return self.cpus(pred)
        if isinstance(value, StringValue):
            raise self.error(f"{pred.field} is a number ({info.describe()}), not a string", value.column,
                             hint="write a number (42, 0x2a) or, for enums and flags, a name without quotes")
        numbers = [self.term_number(term, info) for term in value.terms]
        if len(numbers) == 1:
            number = numbers[0]
        else:
            combined = 0
            for term, num in zip(value.terms, numbers):
                if num.value < 0:
                    raise self.error(f"cannot or a negative value ({term.text}) into flags", term.column)
                combined |= num.value
            number = _Number(combined, "hex")
        return self.fit(number, info, value)

    def fit(self, number: _Number, info: _FieldInfo, value: Terms) -> str:
        bits = 8 * info.size
        low, high = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if info.signed else (0, (1 << bits) - 1)
        n = number.value
        if info.signed and number.style != "dec" and high < n < (1 << bits):
            n -= 1 << bits  # a bit pattern (0xffffffff on an int): the kernel wants the signed value
            number = _Number(n, "dec")
        if not low <= n <= high:
            written = "|".join(term.text for term in value.terms)
            shown = written if str(n) == written else f"{written} (= {n})"
            raise self.error(f"{shown} is out of range for {info.name} ({info.describe()}: {low}..{high})",
                             value.column, hint=self.range_hint(info, n))
        if number.style == "hex":
            return f"0x{n:x}" if n >= 0 else f"-0x{-n:x}"
        if number.style == "oct":
            return f"0{n:o}" if n > 0 else ("-0" + f"{-n:o}" if n < 0 else "0")
        return str(n)

    @staticmethod
    def range_hint(info: _FieldInfo, n: int) -> str:
        if n < 0 and not info.signed:
            c_type = info.type.replace("const ", "").strip()
            natural = {"int": 4, "short": 2, "long": 8, "s32": 4, "s16": 2, "s8": 1, "pid_t": 4,
                       "signed char": 1}.get(c_type)
            if natural and natural < info.size and n >= -(1 << (8 * natural - 1)):
                pattern = n & ((1 << (8 * natural)) - 1)
                return (f"the kernel records {info.name} ({c_type}) as an unsigned {info.size}-byte value, "
                        f"so a negative {c_type} usually appears as 0x{pattern:x}")
            return f"{info.name} is unsigned in the event's format"
        return ""

    def term_number(self, term: Term, info: _FieldInfo) -> _Number:
        text = term.text
        if text[:1].isdigit() or text[:1] == "-":
            if _IPV4_RE.fullmatch(text):
                return self.ipv4(term, info)
            return self.literal(term)
        return self.symbol(term, info)

    def literal(self, term: Term) -> _Number:
        text = term.text
        m = _INT_RE.fullmatch(text)
        if m:
            sign = -1 if m.group("neg") else 1
            if m.group("hex") is not None:
                return _Number(sign * int(m.group("hex"), 16), "hex")
            if m.group("oct") is not None:
                return _Number(sign * int(m.group("oct"), 8), "oct")
            return _Number(sign * int(m.group("dec")), "dec")
        m = None if re.match(r"-?0[xX]", text) else _UNIT_RE.fullmatch(text)
        if m:
            unit = m.group("unit")
            unit_column = term.column + m.start("unit")
            if unit in _AMBIGUOUS_UNITS:
                number = m.group("number")
                raise self.error(f"ambiguous unit {unit!r}", unit_column,
                                 hint=f"write {number}{unit[0].upper()}iB for {number}×1024 bytes, "
                                      f"or the number of bytes itself")
            if unit not in _UNITS:
                raise self.error(f"invalid number {text}: {unit!r} is not a size unit", unit_column,
                                 hint="numbers are decimal, 0x hex or 0 octal; sizes may end in "
                                      "k/K/KiB, M/MiB, G/GiB, T/TiB (powers of 1024) or B")
            exact = Fraction(m.group("number")) * (1024 ** _UNITS[unit])
            if exact.denominator != 1:
                raise self.error(f"{text} is not a whole number ({float(exact):g})", term.column)
            return _Number(-int(exact) if m.group("neg") else int(exact), "dec")
        if re.fullmatch(r"-?0[0-9]+", text):
            bad = next(i for i, ch in enumerate(text) if ch in "89")
            raise self.error(f"{text} is not a valid number: a leading 0 means octal, and "
                             f"{text[bad]} is not an octal digit", term.column + bad,
                             hint=f"write {int(text)} without the leading 0")
        if re.fullmatch(r"-?[0-9]+\.[0-9]+", text):
            raise self.error(f"{text} is not an integer", term.column,
                             hint="filters compare integers; units such as 1.5M are whole numbers of bytes")
        return self.bad_number(term)

    def bad_number(self, term: Term) -> _Number:
        text = term.text
        body = text.lstrip("-")
        prefix = len(text) - len(body)
        if body[:2].lower() == "0x":
            bad = next((i for i, ch in enumerate(body[2:], 2) if ch not in "0123456789abcdefABCDEF"), 2)
            raise self.error(f"invalid hexadecimal number {text}", term.column + prefix + bad)
        bad = next((i for i, ch in enumerate(body) if not ch.isdigit()), 0)
        raise self.error(f"invalid number {text}", term.column + prefix + bad,
                         hint="numbers are decimal, 0x hex or 0 octal, optionally with a size unit (4k, 2MiB)")

    def ipv4(self, term: Term, info: _FieldInfo) -> _Number:
        field = info.field
        if field is None or not field.is_array or field.size != 4:
            raise self.error(f"an IPv4 address needs a 4-byte address field; {info.name} is {info.describe()}",
                             term.column)
        parts = [int(part) for part in term.text.split(".")]
        if any(part > 255 for part in parts):
            raise self.error(f"{term.text} is not an IPv4 address", term.column)
        return _Number(int.from_bytes(bytes(parts), sys.byteorder), "hex")

    def symbol(self, term: Term, info: _FieldInfo) -> _Number:
        name = term.text
        element = info.field.element_type if info.field is not None else info.type
        if element in ("bool", "_Bool") and name in ("true", "false"):
            return _Number(int(name == "true"), "dec")
        names = self.names(info.name)
        if name in names:
            value = names[name]
            if value < 0 and not info.signed:
                value &= (1 << (8 * info.size)) - 1
            return _Number(value, "sym")
        if self.fmt.field(name) is not None or name in _GENERIC_FIELDS:
            raise self.error(f"{name} is a field: the kernel compares a field only with a constant",
                             term.column)
        close = difflib.get_close_matches(name, list(names), n=3, cutoff=0.6)
        if close:
            hint = f"did you mean {' or '.join(close)}?"
        elif names:
            shown = sorted(names, key=names.__getitem__)
            hint = f"{info.name} knows {', '.join(shown[:12])}{', ...' if len(shown) > 12 else ''}"
        else:
            hint = (f"{info.name} has no symbolic names (they come from the enum type of a probed "
                    "variable or from the event's print format); write a number")
        raise self.error(f"{name!r} is neither a number nor a known name for {info.name} ({info.describe()})",
                         term.column, hint=hint)

    def names(self, field: str) -> dict[str, int]:
        cached = self._names_cache.get(field)
        if cached is not None:
            return cached
        names: dict[str, int] = {}
        if self._symbols is None:
            self._symbols = print_fmt_symbols(self.fmt.print_fmt)
        names.update(self._symbols.get(field, {}))
        if self.enums is not None:
            names.update(self.enums(field) or {})
        self._names_cache[field] = names
        return names


# ---------------------------------------------------------------------------------------------
# Writing to tracefs
# ---------------------------------------------------------------------------------------------

def _filter_path(instance_events_dir: Path, group: str, event: str) -> Path:
    return Path(instance_events_dir) / group / event / "filter"


def _write(path: Path, text: str) -> None:
    data = text.encode()
    fd = os.open(path, os.O_WRONLY | os.O_TRUNC)
    try:
        written = os.write(fd, data)
    finally:
        os.close(fd)
    if written != len(data):
        raise OSError(errno.EIO, f"short write ({written} of {len(data)} bytes)")


_KERNEL_HINTS = {
    "Function not found": "the name after .function must be a kernel function listed in /proc/kallsyms",
    "Invalid cpulist": "CPU numbers must be below the number of possible CPUs "
                       "(/sys/devices/system/cpu/possible)",
}


def apply_filter(instance_events_dir: Path, group: str, event: str, flt: Filter) -> None:
    """Write ``flt`` to ``<instance_events_dir>/<group>/<event>/filter``.

    When the kernel refuses it (EINVAL), its message and caret are read back from the filter file,
    the filter is cleared (so the event is left unfiltered, not half-configured) and a
    FilterRejectedError carries them; enable the event only after this returns.
    """
    path = _filter_path(instance_events_dir, group, event)
    try:
        _write(path, flt.text)
    except OSError as err:
        if err.errno != errno.EINVAL:
            raise os_error(err, f"set the filter of {group}:{event}", path) from None
        try:
            answer = path.read_text()
        except OSError:
            answer = ""
        try:
            _write(path, "0")
        except OSError:
            pass
        raise _rejected(group, event, flt, answer) from None


def _rejected(group: str, event: str, flt: Filter, answer: str) -> FilterRejectedError:
    lines = [line.rstrip() for line in answer.rstrip("\n").splitlines()]
    if not any("^" in line or "error" in line.lower() for line in lines):
        lines = [flt.text, "(the kernel gave no reason)"]
    kernel_log = "\n".join(f"  {line}" for line in lines)
    hint = next((h for message, h in _KERNEL_HINTS.items() if message in answer),
                "the kernel's own check refused a filter that probectl's checks accepted; "
                "its message above says what to change")
    if flt.source.strip() != flt.text:
        hint += f" (probectl wrote {flt.source.strip()!r} as {flt.text!r})"
    return FilterRejectedError(f"the kernel rejected the filter for {group}:{event}", hint, kernel_log)


def clear_filter(instance_events_dir: Path, group: str, event: str) -> None:
    """Remove the filter of ``<group>:<event>`` (writes ``0`` to its filter file)."""
    path = _filter_path(instance_events_dir, group, event)
    try:
        _write(path, "0")
    except OSError as err:
        raise os_error(err, f"clear the filter of {group}:{event}", path) from None
