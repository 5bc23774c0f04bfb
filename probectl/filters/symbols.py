"""Symbolic names for numbers from an event's print format: the ``{ value, "NAME" }`` tables of its
``__print_symbolic``/``__print_flags`` calls, whose values are C constant expressions."""
from __future__ import annotations

import re
from typing import Optional, Union

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
            op = str(tokens[index])  # (an operator: text)
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
