"""The parse tree of ``grammar/probe.lark`` into the ProbeSpec tree.

perf's rules for what a point is (a file or a function, ``FUNC@*``, ``0xADDR``), C integer
literals (``0x`` hex, a leading ``0`` octal) with their ranges, special variables, fetch types
and line ranges; every failure is raised at the column of the offending character.
"""
from __future__ import annotations

import re
from typing import Any, Optional


from ..dataclass import dataclass
from ..errors import ProbeSemanticError, ProbeSyntaxError
from ..grammars import caret_line
from .checks import check_args, check_point
from .names import C_NAME, event_name, find_unescaped, unescape
from .lalr import Token, Transformer, v_args
from .tree import (INT_BITS, MAX_ARRAY_LEN, METHODS, TYPE_HINT, AddressRef, ArgSpec, Deref, Immediate, Index,
                   LineRange, Member, Method, PointSpec, ProbeSpec, Register, SpecialVar, SymbolRef, TypeSpec, Variable,
                   render_expr)

_C_INT = re.compile(r"0[xX][0-9a-fA-F]+|[1-9][0-9]*|0[0-7]*")


@dataclass(frozen=True)
class _Part:
    """One suffix of a point (``@SRC``, ``:LN``, ``+OFF``, ``%WORD``, ``;PTN``) with its position."""

    kind: str
    value: Any  # (by kind: a number, the text of a %WORD or ;PTN, the token of @SRC)
    column: int


class Builder(Transformer):
    """Builds a :class:`ProbeSpec` (start ``probe``) or a :class:`LineRange` (start ``line_range``)."""

    def __init__(self, text: str):
        super().__init__()
        self.text = text

    def _error(self, message: str, column: int, hint: str = "") -> ProbeSyntaxError:
        return ProbeSyntaxError(message, caret_line(self.text), column, hint)

    def _number(self, token: Token, what: str, limit: int, *, skip: int = 0, signed: bool = False,
                low: Optional[int] = None) -> int:
        """A C integer literal (``0x`` hex, leading ``0`` octal) from ``token[skip:]``."""
        column = token.start_pos + skip
        body = str(token)[skip:]
        return _c_int(body, column, what, limit, self, signed=signed, low=low)

    # -- the point ---------------------------------------------------------------------------

    def source(self, children):
        at, name = children
        return _Part("source", name, at.start_pos)

    def line(self, children):
        number = children[1]
        return _Part("line", self._number(number, "line number", 2**31 - 1), number.start_pos)

    def offset(self, children):
        number = children[1]
        return _Part("offset", self._number(number, "offset", 2**64 - 1), number.start_pos)

    def percent(self, children):
        (token,) = children
        return _Part("percent", str(token)[1:], token.start_pos)

    def lazy(self, children):
        (token,) = children
        pattern = str(token)[1:]
        if not pattern:
            raise self._error("expected a pattern after ';'", token.end_pos)
        return _Part("lazy", pattern, token.start_pos)

    @v_args(meta=True)
    def point_body(self, meta, children):
        head = children[0] if isinstance(children[0], Token) else None
        parts = [c for c in children if isinstance(c, _Part)]
        return _make_point(self, head, parts, self.text[meta.start_pos:meta.end_pos], meta.start_pos)

    @v_args(meta=True)
    def sdt_point(self, meta, children):
        (token,) = children
        raw = str(token)
        provider, _, name = raw.lstrip("%").partition(":")
        if provider.startswith("sdt_"):
            provider = provider[4:]
        if not provider or not name:
            raise self._error("an SDT probe is %[sdt_]PROVIDER:NAME", token.start_pos)
        return PointSpec(sdt=(provider, name), text=raw)

    # -- the arguments -----------------------------------------------------------------------

    def member(self, children):
        op, name = children
        return Member(str(name), op.type == "ARROW")

    def method(self, children):
        op, name, call = children
        if str(name) not in METHODS:
            raise self._error(f"'{name}()': a probe reads memory and calls nothing; the one method it reads is "
                              f".size(), a container's size", name.start_pos,
                              hint="read a member (NAME.MEMBER), or a container's size (NAME.size())")
        if str(call) != "()":
            raise self._error(f"expected '()': .{name}() takes no arguments", call.start_pos)
        return Method(str(name), op.type == "ARROW")

    def variable(self, children):
        name, *rest = children
        method = rest.pop() if rest and isinstance(rest[-1], Method) else None
        accessors = []
        for acc in rest:
            if isinstance(acc, Token):  # INDEX
                raw = str(acc)
                if not raw.endswith("]"):
                    raise self._error("missing ']'", acc.end_pos)
                if len(raw) == 2:
                    raise self._error("expected an array index between '[' and ']'", acc.start_pos + 1)
                body = raw[1:-1]
                accessors.append(Index(_c_int(body, acc.start_pos + 1, "array index", 2**63 - 1, self,
                                              signed=True)))
            else:
                accessors.append(acc)
        return Variable(str(name), tuple(accessors), method)

    def register(self, children):
        (token,) = children
        name = str(token)[1:]
        if not C_NAME.match(name):
            raise self._error("expected a register name after '%' (e.g. %di, %ax, %r8)", token.start_pos + 1)
        return Register(name)

    def special(self, children):
        (token,) = children
        return _special(str(token)[1:], token.start_pos, self)

    def symbol_ref(self, children):
        symbol = children[0]
        offset = 0
        if len(children) > 1:
            tok = children[1]
            offset = self._number(tok, "symbol offset", 2**63 - 1, signed=True)
        return SymbolRef(str(symbol)[1:], offset)

    def address_ref(self, children):
        (token,) = children
        raw = str(token)
        if raw.startswith("@+"):
            if len(raw) == 2:
                raise self._error("expected a file offset after '@+'", token.end_pos)
            return AddressRef(self._number(token, "file offset", 2**64 - 1, skip=2), relative=True)
        return AddressRef(self._number(token, "address", 2**64 - 1, skip=1))

    def deref(self, children):
        opening, inner, _closing = children
        raw = str(opening)[:-1]  # without '('
        sign, body = raw[0], raw[1:]
        user = body.startswith("u")
        skip = 2 if user else 1
        if not raw[skip:]:
            raise self._error(f"expected an offset after '{raw}' (e.g. +0(...))", opening.start_pos + skip)
        value = _c_int(raw[skip:], opening.start_pos + skip, "dereference offset", 2**31 - 1, self,
                       low=-(2**31) if sign == "-" else None, negate=(sign == "-"))
        if isinstance(inner, Immediate) and isinstance(inner.value, str) or (
                isinstance(inner, SpecialVar) and inner.name in ("comm", "vars", "params")):
            # The kernel's COMM_CANT_DEREF; $vars/$params are lists of arguments, not values.
            raise self._error(f"{render_expr(inner)} can not be dereferenced", opening.end_pos)
        return Deref(value, inner, user)

    def immediate(self, children):
        (token,) = children
        raw = str(token)
        if token.type == "IMMSTR":
            return Immediate(raw[2:-1])
        return Immediate(self._number(token, "immediate value", 2**64 - 1, skip=1, signed=True, low=-(2**63)))

    def type(self, children):
        token = children[1]
        return _type(str(token), token.start_pos, self)

    @v_args(meta=True)
    def arg(self, meta, children):
        name = None
        start = meta.start_pos
        if isinstance(children[0], Token) and children[0].type == "ARG_NAME":
            token = children.pop(0)
            name = str(token)[:-1]
            if not C_NAME.match(name):
                raise self._error(
                    f"bad argument name {name!r}: it must follow C symbol-naming rule",
                    token.start_pos, hint="use letters, digits and '_', not starting with a digit",
                )
            start = token.end_pos
        expr = children[0]
        typ = next((c for c in children if isinstance(c, TypeSpec)), None)
        user = any(isinstance(c, Token) and c.type == "USER" for c in children)
        return ArgSpec(expr=expr, name=name, type=typ, user=user, text=self.text[start:meta.end_pos])

    # -- the whole definition ----------------------------------------------------------------

    def probe(self, children):
        group = event = None
        if isinstance(children[0], Token):
            group, event = event_name(str(children.pop(0))[:-1])
        point, *args = children
        spec = ProbeSpec(point=point, args=tuple(args), group=group, event=event, text=self.text.strip())
        check_args(spec)
        return spec

    # -- lines -------------------------------------------------------------------------------

    @v_args(meta=True)
    def line_range(self, meta, children):
        return _make_line_range(self, children)

    def range_count(self, children):
        number = children[1]
        return _Part("count", self._number(number, "number of lines", 2**31 - 1), number.start_pos)

    def range_last(self, children):
        number = children[1]
        return _Part("last", self._number(number, "end line", 2**31 - 1), number.start_pos)


def _c_int(body: str, column: int, what: str, limit: int, builder: Builder, *, signed: bool = False,
           low: Optional[int] = None, negate: bool = False) -> int:
    """Parse a C integer literal; ``limit`` bounds the magnitude, ``low`` the negative side."""
    negative = negate
    digits_at = column
    if signed and body[:1] in ("+", "-"):
        negative = body[0] == "-"
        body = body[1:]
        digits_at += 1
    if not body:
        raise builder._error(f"expected a number for the {what}", digits_at)
    if not _C_INT.fullmatch(body):
        if re.fullmatch(r"0[0-9]+", body):
            raise builder._error(f"{body} is not a valid {what} (a leading 0 means octal)", digits_at)
        raise builder._error(f"{body!r} is not a valid {what}: expected a decimal or 0x-hex number", digits_at)
    floor = low if low is not None else (-limit if (signed or negate) else 0)
    if body[:2] in ("0x", "0X"):
        significant, base = body[2:].lstrip("0"), 16
    elif body[0] == "0":
        significant, base = body.lstrip("0"), 8
    else:
        significant, base = body, 10
    # Nothing we accept needs more than 22 digits (2**64 in octal); int() would refuse huge strings.
    value = int(significant or "0", base) if len(significant) <= 24 else limit + 1
    if negative:
        value = -value
    if value > limit or value < floor:
        raise builder._error(f"{what} {'-' if negative else ''}{body} is out of range ({floor}..{limit})", digits_at)
    return value


def _make_point(builder: Builder, head: Optional[Token], parts: list[_Part], text: str,
                start: int) -> PointSpec:
    by_kind: dict[str, _Part] = {}
    names = {"line": "line number", "offset": "offset", "percent": "%return"}
    for part in parts:
        if part.kind == "source" and "source" in by_kind:
            raise ProbeSemanticError("SRC@SRC is not allowed.")
        if part.kind in by_kind and part.kind in names:
            raise builder._error(f"the {names[part.kind]} is given twice", part.column)
        by_kind[part.kind] = part
    percent = by_kind.get("percent")
    if percent is not None and percent.value != "return":
        raise ProbeSemanticError(f"%{percent.value} is not supported.", hint="the only point modifier is %return")

    line = by_kind["line"].value if "line" in by_kind else None
    offset = by_kind["offset"].value if "offset" in by_kind else None
    lazy = by_kind["lazy"].value if "lazy" in by_kind else None
    is_return = percent is not None
    function = source = None
    address = None
    forced_function = False

    if "source" in by_kind:
        src_token = by_kind["source"].value
        if str(src_token) == "*":
            forced_function = True
        else:
            source = unescape(str(src_token))
            if not source:
                raise builder._error("empty source file name", src_token.start_pos)

    if head is not None:
        raw_head = str(head)
        name = unescape(raw_head)
        if not name:
            raise builder._error("empty function name", head.start_pos)
        # perf: a file only if none of +@% (outside ;PTN), a ':' or ';', and a '.' before it.
        is_file = (
            not forced_function and source is None and offset is None and percent is None
            and (line is not None or lazy is not None) and "." in raw_head
        )
        if is_file:
            source = name
        elif re.match(r"0[xX]", raw_head):
            address = _c_int(raw_head, head.start_pos, "absolute address", 2**64 - 1, builder)
        else:
            function = name
    elif forced_function:
        raise ProbeSemanticError("Only '@*' is not allowed.", hint="write FUNC@* to force FUNC to be a function")
    elif source is None:
        raise builder._error("expected a function name or source file", start)

    point = PointSpec(function=function, source=source, line=line, offset=offset, is_return=is_return,
                      lazy=lazy, address=address, text=text)
    check_point(point)
    return point


def _special(name: str, column: int, builder: Builder) -> SpecialVar:
    if name in ("retval", "params", "vars", "comm", "stack"):
        return SpecialVar(name)
    for prefix, low in (("stack", 0), ("arg", 1)):
        if name.startswith(prefix) and name[len(prefix):].isdigit() and name[len(prefix):].isascii():
            digits = name[len(prefix):]
            at = column + 1 + len(prefix)
            if len(digits) > 1 and digits[0] == "0":
                raise builder._error(f"${prefix}{digits}: write the number without leading zeros", at)
            if len(digits) > 9:
                raise builder._error(f"${prefix}{digits}: {prefix} number is too big", at)
            index = int(digits)
            if index < low:
                raise builder._error("$arg numbers start at 1 ($arg1 is the first argument)", at)
            return SpecialVar(prefix, index)
    if name == "arg":
        raise builder._error("$arg needs an argument number: $arg1, $arg2, ...", column + 4)
    raise builder._error(
        f"unknown special variable ${name}" if name else "expected a special variable name after '$'",
        column if name else column + 1,
        hint="special variables are $retval, $params, $vars, $comm, $stack, $stackN and $argN",
    )


def _type(raw: str, column: int, builder: Builder) -> TypeSpec:
    array = None
    base_raw = raw
    bracket = raw.find("[")
    if bracket >= 0:
        base_raw = raw[:bracket]
        inner = raw[bracket + 1:]
        if not inner.endswith("]"):
            raise builder._error("missing ']' after the array length", column + len(raw))
        inner = inner[:-1]
        at = column + bracket + 1
        if not inner:
            raise builder._error("expected an array length between '[' and ']'", at)
        length = _c_int(inner, at, "array length", 2**31 - 1, builder)
        if not 1 <= length <= MAX_ARRAY_LEN:
            raise builder._error(f"array length must be 1 to {MAX_ARRAY_LEN}, not {length}", at)
        array = length

    if base_raw in ("string", "ustring", "char", "symbol", "symstr"):
        typ = TypeSpec(base_raw)
    elif base_raw in ("%pd", "%pD"):
        typ = TypeSpec(base_raw[1:])
    elif re.fullmatch(r"[usx][0-9]*", base_raw):
        bits = int(base_raw[1:]) if base_raw[1:] else None
        if base_raw[1:] and (bits not in INT_BITS or base_raw[1] == "0"):
            raise builder._error(f"{base_raw} is not a valid type: the width must be 8, 16, 32 or 64",
                                 column + 1, hint=TYPE_HINT)
        typ = TypeSpec(base_raw[0], bits=bits)
    elif base_raw.startswith("b") and "@" in base_raw:
        typ = _bitfield(base_raw, column, builder)
    elif base_raw.startswith("b") and base_raw[1:2].isdigit():
        raise builder._error(f"{base_raw} is not a valid bitfield: write b<width>@<offset>/<container>",
                             column, hint="e.g. b4@3/32: 4 bits at bit 3 of a 32-bit word")
    else:
        raise builder._error(f"unknown type {base_raw!r}", column, hint=TYPE_HINT)
    if array is not None and typ.base in ("bitfield", "pd", "pD"):
        raise builder._error(f"{typ.text} can't be used as an array element type", column + bracket)
    if array is not None:
        typ = TypeSpec(typ.base, typ.bits, typ.bitfield, array)
    return typ


def _bitfield(raw: str, column: int, builder: Builder) -> TypeSpec:
    m = re.fullmatch(r"b([0-9A-Za-z_]*)@([0-9A-Za-z_]*)(?:/([0-9A-Za-z_]*))?", raw)
    if not m or m.group(3) is None:
        raise builder._error(f"{raw} is not a valid bitfield: write b<width>@<offset>/<container>",
                             column, hint="e.g. b4@3/32: 4 bits at bit 3 of a 32-bit word")
    values = []
    for group, what in ((1, "bitfield width"), (2, "bitfield offset"), (3, "bitfield container size")):
        at = column + m.start(group)
        text = m.group(group)
        if not text.isdigit() or not text.isascii():
            raise builder._error(f"expected a decimal {what}", at)
        if len(text) > 3:
            raise builder._error(f"{what} {text} is too big", at)
        values.append((int(text), at))
    (width, w_at), (offset, o_at), (container, c_at) = values
    if container not in INT_BITS:
        raise builder._error(f"bitfield container size must be 8, 16, 32 or 64, not {container}", c_at)
    if width < 1:
        raise builder._error("bitfield width must be at least 1", w_at)
    if offset + width > container:
        raise builder._error(
            f"bitfield {raw} does not fit: offset {offset} + width {width} > {container} bits", o_at)
    return TypeSpec("bitfield", bitfield=(width, offset, container))


def _make_line_range(builder: Builder, children: list) -> LineRange:
    head = children[0] if isinstance(children[0], Token) and children[0].type == "NAME" else None
    source_part = next((c for c in children if isinstance(c, _Part) and c.kind == "source"), None)
    numbers = [c for c in children if isinstance(c, Token) and c.type == "NUMBER"]
    end_part = next((c for c in children if isinstance(c, _Part) and c.kind in ("count", "last")), None)
    head_at = head.start_pos if head is not None else 0

    function = source = None
    if source_part is not None:
        src = str(source_part.value)
        if head is not None:
            function = unescape(str(head))
        if src != "*":
            source = unescape(src)
        elif function is None:
            raise ProbeSemanticError("Only '@*' is not allowed.")
    else:
        raw = str(head)
        name = unescape(raw)
        quoted = '"' in raw or "'" in raw
        if find_unescaped(raw, "/.") >= 0 and not quoted:
            source = name
        elif quoted or C_NAME.match(name) or "::" in name:  # (a C++ or Rust name: shop::Cart::add)
            function = name
        else:
            raise builder._error(f"{name!r} is not a valid function name", head_at,
                                 hint="write FUNC@* to use a name that is not a C identifier")
    if function == "":
        raise builder._error("empty function name", head_at)

    start = end = None
    if numbers:
        start = builder._number(numbers[0], "start line", 2**31 - 1)
    if start is not None and end_part is not None:  # (the grammar has no end without a start)
        if end_part.kind == "count":
            end = start + end_part.value - 1
        else:
            end = end_part.value
        if end > 2**31 - 1:
            raise builder._error("the line range goes past the last possible line", end_part.column)
        if start > end:
            raise ProbeSemanticError("Start line must be smaller than end line.",
                                     hint=f"the range {start}..{end} is empty")
    return LineRange(function=function, source=source, start=start, end=end)
