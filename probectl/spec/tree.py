"""The ProbeSpec tree: a probe definition as frozen dataclasses, and :func:`render_expr` back to text.

What the user asked for and nothing more: no I/O, no debug information. The kernel's and perf's
limits that the checks of :mod:`probectl.spec.checks` apply are here too.
"""
from __future__ import annotations

from typing import Iterator, Optional, Union

from ..dataclass import dataclass

MAX_PROBE_ARGS = 128          # perf's MAX_PROBE_ARGS and the kernel's MAX_TRACE_ARGS
MAX_DEREF_DEPTH = 12          # trace_probe.h: "fetch + deref*N + store + mod + end <= 16, this allows N=12"
MAX_ARRAY_LEN = 64            # trace_probe.h MAX_ARRAY_LEN (the 6.1 kernel takes x8[64] and refuses x8[65])
INT_BITS = (8, 16, 32, 64)

# Field names every probe event already has (kernel trace_probe.c reserved_field_names).
RESERVED_ARG_NAMES = frozenset({
    "common_type", "common_flags", "common_preempt_count", "common_pid", "common_tgid",
    "__probe_ip", "__probe_ret_ip", "__probe_func",
})

# What the type errors suggest: every type the kernel's fetch arguments take.
TYPE_HINT = ("types are u8/16/32/64, s8/16/32/64, x8/16/32/64, u, s, x, char, string, ustring, "
             "symbol, symstr, %pd, %pD, b<width>@<offset>/<container> and T[N]")


@dataclass(frozen=True)
class PointSpec:
    """Where to probe: ``FUNC[@SRC][:RLN|+OFFS|%return|;PTN]``, ``SRC:ALN`` or ``SRC;PTN``.

    ``line`` is relative to the function (RLN) when ``function`` is set and absolute (ALN)
    otherwise. For ``0xADDR`` ``address`` holds the value and ``function`` is None. ``lazy`` is
    the pattern after ``;`` as written (escapes kept). ``offset`` is None when not written;
    ``+0`` stays 0. ``sdt`` is (provider, name), fnmatch globs, for an SDT probe
    (``%[sdt_]PROVIDER:NAME`` or ``sdt_PROVIDER:NAME``; the other fields are then unset).
    """

    function: Optional[str] = None
    source: Optional[str] = None
    line: Optional[int] = None
    offset: Optional[int] = None
    is_return: bool = False
    lazy: Optional[str] = None
    address: Optional[int] = None
    text: str = ""
    sdt: Optional[tuple[str, str]] = None


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
class Method:
    """``.size()`` (or ``->size()``) at the end of a C variable chain: a C++ container's size, read
    from its members (the only method a probe reads: nothing is called)."""

    name: str
    arrow: bool = False


# The methods a chain may end with.
METHODS = ("size",)


@dataclass(frozen=True)
class Variable:
    """A C variable with its member/index chain: ``sk->__sk_common.skc_state``, ``a.b[2]->c``, and
    maybe a method at its end (``v.size()``)."""

    name: str
    accessors: tuple[Union[Member, Index], ...] = ()
    method: Optional[Method] = None


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
        if point.sdt is not None:
            return False  # its arguments are the note's operands, argN
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


def sdt_arg_index(arg: ArgSpec) -> Optional[int]:
    """N of an SDT probe's argument ``argN`` (N >= 1), None for anything else."""
    expr = arg.expr
    if isinstance(expr, Variable) and not expr.accessors and expr.method is None:
        digits = expr.name[3:]
        if expr.name.startswith("arg") and digits.isdigit() and digits.isascii() and digits[0] != "0":
            return int(digits)
    return None


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
        if expr.method is not None:
            parts.append(f"{'->' if expr.method.arrow else '.'}{expr.method.name}()")
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
