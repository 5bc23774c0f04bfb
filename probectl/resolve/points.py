"""What resolution produces: the resolved probe points with their fetch arguments (plain data shared
by the DWARF, symbol and BTF resolvers)."""
from __future__ import annotations


from .. import spec as S
from ..dataclass import dataclass
from .fetchresult import StringPart


@dataclass(frozen=True)
class ResolvedArg:
    """One fetch argument: ``name`` is empty when the kernel should name it (argN), as perf leaves it;
    ``named`` says the user gave the name (a name made from the expression may be changed to fit the
    kernel's rules, a given one may not). ``parts``: the hidden arguments of a counted string
    (:class:`~probectl.resolve.fetchresult.StringPart`), written after it."""

    fetch: str
    type: str = ""
    name: str = ""
    text: str = ""
    named: bool = False
    parts: tuple[StringPart, ...] = ()


@dataclass(frozen=True)
class ProbePoint:
    """One resolved probe location with its arguments."""

    function: str  # the real function (symbol) name at the place
    offset: int  # bytes from the function's start
    address: int  # virtual address in the target (kernel address for kprobes)
    place: str  # the kernel's place text: "/path:0x1139" or "sym+off"
    is_return: bool = False
    args: tuple[ResolvedArg, ...] = ()
    line: int | None = None  # relative line of FUNC:RLN, for naming
    group: str | None = None  # the group the place itself names (sdt_PROVIDER), None: the target's
    # An entry probe on a return instruction standing for FUNC%return (a Go program's, see goreturn):
    # named as a return probe is, written as a uprobe on an instruction.
    at_return_instruction: bool = False
    # The function's qualified name when it is not C's (a Go program's main.(*T).m, whose dots are
    # part of it; C++'s shop::Cart::add, whose symbol is mangled): the event is named from all of it,
    # not from the symbol cut at its first '.' as a C clone's suffix is (foo.isra.0).
    qualified_name: str | None = None


def is_untyped_retval(arg: S.ArgSpec) -> bool:
    """``$retval`` without a type: its type comes from the function's return type, if known."""
    return isinstance(arg.expr, S.SpecialVar) and arg.expr.name == "retval" and arg.type is None
