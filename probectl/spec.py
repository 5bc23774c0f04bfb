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
- SDT/cached events (``%sdt_PROVIDER:EVENT``) are not supported and say so.
"""
from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Iterator, Optional, Union

from lark import Lark, Token, Transformer, Tree, v_args
from lark.exceptions import LarkError, UnexpectedCharacters, UnexpectedInput, UnexpectedToken, VisitError

import probectl

from .errors import ProbectlError, ProbeSemanticError, ProbeSyntaxError

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
]

MAX_PROBE_ARGS = 128          # perf's MAX_PROBE_ARGS and the kernel's MAX_TRACE_ARGS
MAX_DEREF_DEPTH = 12          # trace_probe.h: "fetch + deref*N + store + mod + end <= 16, this allows N=12"
MAX_ARRAY_LEN = 63            # kprobetrace.rst: "N is a fixed number, less than 64"
INT_BITS = (8, 16, 32, 64)

# Field names every probe event already has (kernel trace_probe.c reserved_field_names).
RESERVED_ARG_NAMES = frozenset({
    "common_type", "common_flags", "common_preempt_count", "common_pid", "common_tgid",
    "__probe_ip", "__probe_ret_ip", "__probe_func",
})

_C_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_C_INT = re.compile(r"0[xX][0-9a-fA-F]+|[1-9][0-9]*|0[0-7]*")
_WHITESPACE_CONTROLS = frozenset("\t\n\v\f\r")


# ---------------------------------------------------------------------------------------------
# The tree
# ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class PointSpec:
    """Where to probe: ``FUNC[@SRC][:RLN|+OFFS|%return|;PTN]``, ``SRC:ALN`` or ``SRC;PTN``.

    ``line`` is relative to the function (RLN) when ``function`` is set and absolute (ALN)
    otherwise. For ``0xADDR`` ``address`` holds the value and ``function`` is None. ``lazy`` is
    the pattern after ``;`` as written (escapes kept). ``offset`` is None when not written;
    ``+0`` stays 0.
    """

    function: Optional[str] = None
    source: Optional[str] = None
    line: Optional[int] = None
    offset: Optional[int] = None
    is_return: bool = False
    lazy: Optional[str] = None
    address: Optional[int] = None
    text: str = ""


@dataclass(frozen=True)
class Member:
    """``->name`` (``arrow``) or ``.name`` in a C variable chain."""

    name: str
    arrow: bool


@dataclass(frozen=True)
class Index:
    """``[index]`` in a C variable chain."""

    index: int


@dataclass(frozen=True)
class Variable:
    """A C variable with its member/index chain: ``sk->__sk_common.skc_state``, ``a.b[2]->c``."""

    name: str
    accessors: tuple[Union[Member, Index], ...] = ()


@dataclass(frozen=True)
class Register:
    """``%REG``; ``name`` is without the ``%`` and is not checked against an architecture."""

    name: str


@dataclass(frozen=True)
class SpecialVar:
    """``$retval``, ``$params``, ``$vars``, ``$comm``, ``$stack``, ``$stackN`` or ``$argN``.

    ``name`` is ``'retval'``, ``'params'``, ``'vars'``, ``'comm'``, ``'stack'`` or ``'arg'``;
    ``index`` is N for ``$stackN`` (N >= 0) and ``$argN`` (N >= 1), None otherwise.
    """

    name: str
    index: Optional[int] = None


@dataclass(frozen=True)
class SymbolRef:
    """``@SYMBOL[+|-OFFS]``: the memory at a data symbol plus ``offset`` bytes."""

    name: str
    offset: int = 0


@dataclass(frozen=True)
class AddressRef:
    """``@0xADDR`` (an absolute address), or ``@+OFFS`` (``relative``: a file offset, uprobes)."""

    address: int
    relative: bool = False


@dataclass(frozen=True)
class Deref:
    """``+|-[u]OFFS(inner)``: the memory at ``inner + offset``; ``user`` for ``+u`` (user memory)."""

    offset: int
    inner: "Expr"
    user: bool = False


@dataclass(frozen=True)
class Immediate:
    """``\\IMM`` (an int) or ``\\"string"`` (a str)."""

    value: Union[int, str]


Expr = Union[Variable, Register, SpecialVar, SymbolRef, AddressRef, Deref, Immediate]


@dataclass(frozen=True)
class TypeSpec:
    """A fetch type: ``u32``, ``s``, ``x8``, ``string``, ``b4@3/32``, ``%pd``, ``x8[16]`` ...

    ``base`` is one of ``'u'``, ``'s'``, ``'x'``, ``'string'``, ``'ustring'``, ``'char'``,
    ``'symbol'``, ``'symstr'``, ``'bitfield'``, ``'pd'``, ``'pD'``. ``bits`` is the width of
    ``u``/``s``/``x`` (None: the resolver picks it from the variable's type, as perf does).
    ``bitfield`` is ``(width, offset, container)``; ``array`` the element count of ``T[N]``.
    """

    base: str
    bits: Optional[int] = None
    bitfield: Optional[tuple[int, int, int]] = None
    array: Optional[int] = None

    @property
    def text(self) -> str:
        """The type as the kernel spells it (``u`` / ``s`` / ``x`` still need a width there)."""
        if self.base == "bitfield" and self.bitfield is not None:
            width, offset, container = self.bitfield
            text = f"b{width}@{offset}/{container}"
        elif self.base in ("pd", "pD"):
            text = "%" + self.base
        elif self.base in ("u", "s", "x"):
            text = self.base + (str(self.bits) if self.bits else "")
        else:
            text = self.base
        return text if self.array is None else f"{text}[{self.array}]"


@dataclass(frozen=True)
class ArgSpec:
    """One probe argument: ``[NAME=]FETCH[:TYPE][@user]``.

    ``text`` is the argument as written without ``NAME=`` (type and ``@user`` included).
    """

    expr: Expr
    name: Optional[str] = None
    type: Optional[TypeSpec] = None
    user: bool = False
    text: str = ""

    @property
    def is_c_expr(self) -> bool:
        """True when fetching it needs DWARF or BTF: it names a C variable (also inside ``+8(var)``)."""
        return any(isinstance(e, Variable) for e in _walk(self.expr))


@dataclass(frozen=True)
class ProbeSpec:
    """A whole probe definition: the point, its arguments, and an explicit ``[GROUP:]EVENT=``."""

    point: PointSpec
    args: tuple[ArgSpec, ...] = ()
    group: Optional[str] = None
    event: Optional[str] = None
    text: str = ""

    @property
    def needs_dwarf(self) -> bool:
        """perf's rule: a source file, a line, a lazy pattern, a C variable, ``$vars`` or ``$params``."""
        point = self.point
        if point.source is not None or point.line is not None or point.lazy is not None:
            return True
        for arg in self.args:
            if arg.is_c_expr:
                return True
            if isinstance(arg.expr, SpecialVar) and arg.expr.name in ("vars", "params"):
                return True
        return False


@dataclass(frozen=True)
class LineRange:
    """``lines`` input: a function or source file and an inclusive line range.

    ``start`` is None when no line was given; ``end`` is None for "to the end" (of the function
    or file). Lines are relative to the function when ``function`` is set.
    """

    function: Optional[str] = None
    source: Optional[str] = None
    start: Optional[int] = None
    end: Optional[int] = None


def _walk(expr: Expr) -> Iterator[Expr]:
    while True:
        yield expr
        if not isinstance(expr, Deref):
            return
        expr = expr.inner


def render_expr(expr: Expr) -> str:
    """The fetch expression as text: ``+8(+0(%di))``, ``sk->__sk_common.skc_state``, ``@jiffies+8``.

    ``parse_probe(f"f {render_expr(e)}").args[0].expr == e`` for every expression.
    """
    derefs = []
    while isinstance(expr, Deref):
        derefs.append(expr)
        expr = expr.inner
    if isinstance(expr, Variable):
        parts = [expr.name]
        for acc in expr.accessors:
            if isinstance(acc, Member):
                parts.append(("->" if acc.arrow else ".") + acc.name)
            else:
                parts.append(f"[{acc.index}]")
        text = "".join(parts)
    elif isinstance(expr, Register):
        text = "%" + expr.name
    elif isinstance(expr, SpecialVar):
        text = "$" + expr.name + ("" if expr.index is None else str(expr.index))
    elif isinstance(expr, SymbolRef):
        text = "@" + expr.name + (f"{expr.offset:+d}" if expr.offset else "")
    elif isinstance(expr, AddressRef):
        text = ("@+" if expr.relative else "@") + hex(expr.address)
    elif isinstance(expr, Immediate):
        text = f'\\"{expr.value}"' if isinstance(expr.value, str) else f"\\{expr.value}"
    else:
        raise TypeError(f"not a probe expression: {expr!r}")
    for deref in reversed(derefs):
        sign = "-" if deref.offset < 0 else "+"
        text = f"{sign}{'u' if deref.user else ''}{abs(deref.offset)}({text})"
    return text


# ---------------------------------------------------------------------------------------------
# The grammar
# ---------------------------------------------------------------------------------------------

def grammar_path(name: str) -> Path:
    """Find a grammar file: inside the installed package first, then in the source checkout."""
    package = Path(probectl.__file__).resolve().parent
    candidates = (package / "grammar" / name, package.parent / "grammar" / name)
    for path in candidates:
        if path.is_file():
            return path
    raise ProbectlError(
        f"grammar file {name} not found (looked in {', '.join(str(p.parent) for p in candidates)})",
        hint="reinstall probectl; the build copies grammar/*.lark into the package",
    )


@lru_cache(maxsize=None)
def _parser() -> Lark:
    return Lark(
        grammar_path("probe.lark").read_text(),
        parser="lalr",
        lexer="contextual",
        start=["probe", "line_range"],
        propagate_positions=True,
        maybe_placeholders=False,
    )


# ---------------------------------------------------------------------------------------------
# Entry points
# ---------------------------------------------------------------------------------------------

def parse_probe(text: str) -> ProbeSpec:
    """Parse a full definition, ``[[GROUP:]EVENT=]POINT [ARG ...]`` (arguments split on whitespace)."""
    tree = _parse(text, "probe")
    return _convert(tree, text)


def parse_point(text: str) -> PointSpec:
    """Parse a PROBEPOINT without event name or arguments (what ``vars`` takes)."""
    tree = _parse(text, "probe")
    for child in tree.children:
        if isinstance(child, Token) and child.type == "EVENT_NAME":
            raise ProbeSyntaxError("a probe point takes no event name", _display(text), child.start_pos)
        if isinstance(child, Tree) and child.data == "arg":
            raise ProbeSyntaxError("a probe point takes no arguments", _display(text), child.meta.start_pos)
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
    if not isinstance(text, str):
        raise TypeError(f"expected a str, got {type(text).__name__}")
    for column, ch in enumerate(text):
        if unicodedata.category(ch)[0] == "C" and ch not in _WHITESPACE_CONTROLS:
            raise ProbeSyntaxError(f"invalid character U+{ord(ch):04X}", _display(text), column)
    if not text.strip():
        what = "probe definition" if start == "probe" else "line range"
        raise ProbeSyntaxError(f"empty {what}", _display(text), len(text))
    if start == "probe":
        _reject_sdt(text)
    try:
        tree = _parser().parse(text, start=start)
    except UnexpectedInput as err:
        raise _translate(err, text, start) from None
    except LarkError as err:  # pragma: no cover - lark raises UnexpectedInput for bad input
        raise ProbeSyntaxError(f"cannot parse: {err}", _display(text), 0) from None
    _check_nesting(tree, text)
    return tree


def _convert(tree: Tree, text: str):
    try:
        return _Builder(text).transform(tree)
    except VisitError as err:
        if isinstance(err.orig_exc, ProbectlError):
            raise err.orig_exc from None
        raise


def _reject_sdt(text: str) -> None:
    # perf's is_sdt_event(): "%..." or "sdt_PROVIDER:EVENT" (a ':' and no '=').
    stripped = text.lstrip()
    word = stripped.split(None, 1)[0]
    if word.startswith("%") or (word.startswith("sdt_") and ":" in word and "=" not in word):
        raise ProbeSemanticError(
            f"{word} is an SDT or cached event; probectl does not support those yet",
            hint="probe the marker's function or source line instead",
        )


def _check_nesting(tree: Tree, text: str) -> None:
    # Iterative, so absurd nesting cannot exhaust the Python stack (the Transformer recurses).
    stack = [(tree, 0)]
    while stack:
        node, depth = stack.pop()
        if node.data == "deref":
            depth += 1
            if depth > MAX_DEREF_DEPTH:
                raise ProbeSyntaxError(
                    f"too many nested dereferences (the kernel allows at most {MAX_DEREF_DEPTH})",
                    _display(text), node.meta.start_pos,
                )
        stack.extend((child, depth) for child in node.children if isinstance(child, Tree))


def _display(text: str) -> str:
    """``text`` safe to print under a caret: one printable character per original character."""
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() else " " if ch.isspace() else "?" for ch in text)


# ---------------------------------------------------------------------------------------------
# Parse tree -> dataclasses
# ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class _Part:
    """One suffix of a point (``@SRC``, ``:LN``, ``+OFF``, ``%WORD``, ``;PTN``) with its position."""

    kind: str
    value: object
    column: int


class _Builder(Transformer):
    def __init__(self, text: str):
        super().__init__()
        self.text = text

    def _error(self, message: str, column: int, hint: str = "") -> ProbeSyntaxError:
        return ProbeSyntaxError(message, _display(self.text), column, hint)

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

    # -- the arguments -----------------------------------------------------------------------

    def member(self, children):
        op, name = children
        return Member(str(name), op.type == "ARROW")

    def variable(self, children):
        name, *rest = children
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
        return Variable(str(name), tuple(accessors))

    def register(self, children):
        (token,) = children
        name = str(token)[1:]
        if not _C_NAME.match(name):
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
            if not _C_NAME.match(name):
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
            group, event = _event_name(str(children.pop(0))[:-1])
        point, *args = children
        spec = ProbeSpec(point=point, args=tuple(args), group=group, event=event, text=self.text.strip())
        _check_args(spec)
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


def _c_int(body: str, column: int, what: str, limit: int, builder: _Builder, *, signed: bool = False,
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


def _unescape(raw: str) -> str:
    """perf's strdup_esq(): drop a backslash before any character and the quotes around a part."""
    out = []
    i = 0
    while i < len(raw):
        ch = raw[i]
        if ch == "\\" and i + 1 < len(raw):
            out.append(raw[i + 1])
            i += 2
        elif ch in "\"'":
            end = raw.find(ch, i + 1)
            end = len(raw) if end < 0 else end
            out.append(raw[i + 1:end])
            i = end + 1
        else:
            out.append(ch)
            i += 1
    return "".join(out)


def _find_unescaped(raw: str, chars: str) -> int:
    """Index of the first of ``chars`` in ``raw`` that is neither escaped nor quoted, or -1."""
    i = 0
    while i < len(raw):
        ch = raw[i]
        if ch == "\\":
            i += 2
            continue
        if ch in "\"'":
            end = raw.find(ch, i + 1)
            if end < 0:
                return -1
            i = end + 1
            continue
        if ch in chars:
            return i
        i += 1
    return -1


def _event_name(raw: str) -> tuple[Optional[str], str]:
    """Split ``[GROUP:]EVENT`` and check both follow C symbol-naming rule (perf's message)."""
    cut = _find_unescaped(raw, ":")
    group = None
    if cut >= 0:
        group = _unescape(raw[:cut])
        if not _C_NAME.match(group):
            raise ProbeSemanticError(
                f"{group or '(empty)'} is bad for group name -it must follow C symbol-naming rule.",
                hint="use letters, digits and '_', not starting with a digit",
            )
        raw = raw[cut + 1:]
    event = _unescape(raw)
    if not _C_NAME.match(event):
        raise ProbeSemanticError(
            f"{event or '(empty)'} is bad for event name -it must follow C symbol-naming rule.",
            hint="use letters, digits and '_', not starting with a digit",
        )
    return group, event


def _make_point(builder: _Builder, head: Optional[Token], parts: list[_Part], text: str,
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

    raw_head = str(head) if head is not None else None
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
            source = _unescape(str(src_token))
            if not source:
                raise builder._error("empty source file name", src_token.start_pos)

    if raw_head is not None:
        name = _unescape(raw_head)
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
    return PointSpec(function=function, source=source, line=line, offset=offset, is_return=is_return,
                     lazy=lazy, address=address, text=text)


def _special(name: str, column: int, builder: _Builder) -> SpecialVar:
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
                raise builder._error(f"$arg numbers start at 1 ($arg1 is the first argument)", at)
            return SpecialVar(prefix, index)
    if name == "arg":
        raise builder._error("$arg needs an argument number: $arg1, $arg2, ...", column + 4)
    raise builder._error(
        f"unknown special variable ${name}" if name else "expected a special variable name after '$'",
        column if name else column + 1,
        hint="special variables are $retval, $params, $vars, $comm, $stack, $stackN and $argN",
    )


_TYPE_HINT = ("types are u8/16/32/64, s8/16/32/64, x8/16/32/64, u, s, x, char, string, ustring, "
              "symbol, symstr, %pd, %pD, b<width>@<offset>/<container> and T[N]")


def _type(raw: str, column: int, builder: _Builder) -> TypeSpec:
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
                                 column + 1, hint=_TYPE_HINT)
        typ = TypeSpec(base_raw[0], bits=bits)
    elif base_raw.startswith("b") and "@" in base_raw:
        typ = _bitfield(base_raw, column, builder)
    elif base_raw.startswith("b") and base_raw[1:2].isdigit():
        raise builder._error(f"{base_raw} is not a valid bitfield: write b<width>@<offset>/<container>",
                             column, hint="e.g. b4@3/32: 4 bits at bit 3 of a 32-bit word")
    else:
        raise builder._error(f"unknown type {base_raw!r}", column, hint=_TYPE_HINT)
    if array is not None and typ.base in ("bitfield", "pd", "pD"):
        raise builder._error(f"{typ.text} can't be used as an array element type", column + bracket)
    if array is not None:
        typ = TypeSpec(typ.base, typ.bits, typ.bitfield, array)
    return typ


def _bitfield(raw: str, column: int, builder: _Builder) -> TypeSpec:
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


def _in_memory(expr: Expr) -> bool:
    return isinstance(expr, (Variable, Deref, SymbolRef, AddressRef))


def _check_args(spec: ProbeSpec) -> None:
    """Checks over the arguments and the point together (perf's and the kernel's rules)."""
    point = spec.point
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


def _make_line_range(builder: _Builder, children: list) -> LineRange:
    head = children[0] if isinstance(children[0], Token) and children[0].type == "NAME" else None
    source_part = next((c for c in children if isinstance(c, _Part) and c.kind == "source"), None)
    numbers = [c for c in children if isinstance(c, Token) and c.type == "NUMBER"]
    end_part = next((c for c in children if isinstance(c, _Part) and c.kind in ("count", "last")), None)

    function = source = None
    if source_part is not None:
        src = str(source_part.value)
        if head is not None:
            function = _unescape(str(head))
        if src != "*":
            source = _unescape(src)
        elif function is None:
            raise ProbeSemanticError("Only '@*' is not allowed.")
    else:
        raw = str(head)
        name = _unescape(raw)
        quoted = '"' in raw or "'" in raw
        if _find_unescaped(raw, "/.") >= 0 and not quoted:
            source = name
        elif quoted or _C_NAME.match(name):
            function = name
        else:
            raise builder._error(f"{name!r} is not a valid function name", head.start_pos,
                                 hint="write FUNC@* to use a name that is not a C identifier")
    if function == "":
        raise builder._error("empty function name", head.start_pos)

    start = end = None
    if numbers:
        start = builder._number(numbers[0], "start line", 2**31 - 1)
    if end_part is not None:
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


# ---------------------------------------------------------------------------------------------
# lark errors -> ProbeSyntaxError
# ---------------------------------------------------------------------------------------------

_FETCH_STARTS = frozenset({"IDENT", "REGISTER", "SPECIAL", "SYMBOL", "ADDRESS", "DEREF", "IMMEDIATE", "IMMSTR"})


def _translate(err: UnexpectedInput, text: str, start: str) -> ProbeSyntaxError:
    """A lark failure as a ProbeSyntaxError: the column of the offending character and what was expected."""
    found: Optional[str]
    if isinstance(err, UnexpectedCharacters):
        column = err.pos_in_stream
        found = text[column]
        expected = set(err.allowed or ())
    elif isinstance(err, UnexpectedToken) and err.token.type != "$END":
        column = err.token.start_pos
        found = str(err.token)
        expected = set(err.expected)
    else:
        column = len(text)
        found = None
        expected = set(getattr(err, "expected", ()) or ())
    if column is None:  # pragma: no cover - lark always sets positions for LALR tokens
        column = len(text)
    column = min(column, len(text))
    expected.discard("$END")
    expected.discard("_WS")
    prev = text[column - 1] if column > 0 else ""
    hint = ""

    if found and found[0] in "\"'" and ("NAME" in expected or "EVENT_NAME" in expected) \
            and text.find(found[0], column + 1) < 0:
        return ProbeSyntaxError("unterminated quote", _display(text), column,
                                "close it with a matching quote")
    if found and found[0] == "\\" and column < _point_end(text) and (
            column + 1 >= len(text) or text[column + 1].isspace()):
        return ProbeSyntaxError("a backslash must be followed by the character it escapes",
                                _display(text), column)

    if found and text.startswith('\\"', column) and "IMMSTR" in expected:
        end = column + len(text[column:].split(None, 1)[0])
        return ProbeSyntaxError(
            "missing closing '\"' of the immediate string", _display(text), end,
            "an immediate string can't contain spaces" if '"' in text[end:] else "",
        )

    if expected and expected <= {"TYPE"}:
        phrase = "expected a type after ':'"
        hint = _TYPE_HINT
    elif expected and expected <= {"NUMBER"}:
        if prev == ":":
            phrase = "expected a line number after ':'"
        elif prev == "+":
            phrase = "expected a number of lines after '+'" if start == "line_range" else "expected an offset after '+'"
        elif prev == "-":
            phrase = "expected an end line after '-'"
        else:
            phrase = "expected a number"
    elif expected and expected <= {"NAME"}:
        phrase = "expected a source file after '@'" if prev == "@" else "expected a name"
    elif "NAME" in expected and ("LAZY" in expected or start == "line_range") and column == _point_start(text):
        phrase = "expected a function name or source file"
    elif expected and expected <= {"IDENT"}:
        phrase = f"expected a member name after '{'->' if prev == '>' else prev}'"
    elif expected & _FETCH_STARTS:
        phrase = "expected an argument (a variable, %REG, $retval, @SYMBOL, +OFFS(...) or \\IMM)"
        if prev == "(":
            phrase = "expected an argument inside '(...)'"
        elif prev == "=":
            phrase = "expected an argument after '='"
        if found and found[0] in "0123456789":
            hint = ("write \\N for the number itself, @ADDR for the memory at an address, "
                    "or +OFFS(ARG) for a dereference (the sign is required)")
        elif found and found[0] in "+-":
            hint = "a dereference is written +OFFS(ARG), e.g. +8(%di)"
    elif expected == {"RPAR"} or ("RPAR" in expected and found is None):
        phrase = "expected ')'"
    else:
        phrase = ""

    if found is None:
        what = "end of the definition" if start == "probe" else "end of the line range"
        message = phrase or f"unexpected {what}"
    else:
        shown = "a space" if found.isspace() else repr(found if len(found) <= 24 else found[:20] + "...")
        message = f"{phrase}, found {shown}" if phrase else f"unexpected {shown}"
    before = text[:column]
    if found and found.startswith(":") and before.endswith("@user"):
        hint = "write the type before @user: ARG:TYPE@user"
    elif found and found.startswith(("->", ".", "[")) and re.search(r"[$%][A-Za-z0-9_]*\Z", before):
        hint = "only C variables have members and indexes; dereference registers with +OFFS(...)"
    elif found == "%return" and start == "probe" and column > _point_end(text):
        hint = "%return belongs to the probe point: FUNC%return ARG ..."
    if not hint and start == "probe":
        first_word_end = _point_end(text)
        if column > first_word_end and _find_unescaped(text[:first_word_end], ";") >= 0:
            hint = ("a lazy pattern ends at the first space; lazy matching ignores spaces, "
                    "so write the pattern without them")
    return ProbeSyntaxError(message, _display(text), column, hint)


def _point_start(text: str) -> int:
    """Where the point begins: after leading blanks and an ``EVENT=`` prefix."""
    begin = len(text) - len(text.lstrip())
    m = re.match(r"""(?:[^\s\\;=@+%"']|\\\S|"[^"]*"|'[^']*')*=""", text[begin:])
    return begin + m.end() if m else begin


def _point_end(text: str) -> int:
    begin = len(text) - len(text.lstrip())
    m = re.match(r"\S*", text[begin:])
    return begin + (m.end() if m else 0)
