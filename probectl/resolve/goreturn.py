"""``FUNC%return`` on a Go program, made safe: uprobes on the function's return instructions.

A kernel return probe swaps the return address on the stack for its trampoline's. Go copies a
goroutine's stack when it grows it and walks its frames itself (stack growth, the garbage collector,
tracebacks), meets the foreign address and kills the program ("unexpected return pc"); Go cannot be
told not to move stacks. A uprobe on an instruction changes nothing on the stack, so a Go return
probe is made of one uprobe on each return (RET) of the function, found by reading its code (x86-64's
decoded, AArch64's words), and the results are read where Go's register ABI leaves them at that
instruction: the integer pieces of the results from RAX on (x86-64), from R0 on (arm64)
(``Arch.go_integer_registers``), laid out from the results' DWARF types.

What cannot be made safe or right is refused with the reason, never turned into a kernel return
probe: a function whose code cannot be decoded (an instruction start is not known, and a uprobe
inside an instruction corrupts it), one with no return instruction, a result held in a
floating-point register (probe events cannot read one) or on the stack, a program built for Go's
older stack ABI. Direct jumps out of the function (tail calls, whose callee returns for it) are
reported: returns through them are not seen.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Optional

from .. import spec as S
from ..arch import Arch
from ..dataclass import dataclass, replace
from ..errors import InstructionDecodeError, ProbeSemanticError, ResolveError
from .points import ProbePoint, ResolvedArg

if TYPE_CHECKING:
    from ..debuginfo.dwarf.units import DIE
    from . import Resolver


@dataclass(frozen=True)
class Piece:
    """One register-sized piece of a Go value: ``path``, the member names leading to it (``("len",)``
    of a string); ``register``, the kernel's name of the register that holds it at a return, None
    for a floating-point piece; ``type``, its fetch type (``s64``, ``u8``, ``x64``)."""

    path: tuple[str, ...]
    register: Optional[str]
    type: str


@dataclass(frozen=True)
class GoResult:
    """One result of a Go function: its ``name`` (``~r0`` for an unnamed one), its Go type's name,
    and its ``pieces`` in registers, or ``on_stack`` when the ABI gave it no registers."""

    name: str
    type_name: str
    pieces: tuple[Piece, ...]
    on_stack: bool = False


def resolve_go_returns(resolver: "Resolver", probe: S.ProbeSpec) -> list[ProbePoint]:
    """The points of ``FUNC%return`` in a Go program: a uprobe on each return instruction of each
    function the point names, with the arguments read from the result registers."""
    from .boundary import code_bytes

    point = probe.point
    entries = resolver._resolve(replace(probe, point=replace(point, is_return=False), args=()))
    source = resolver.source(required=False)
    points: list[ProbePoint] = []
    for entry in entries:
        name = entry.function
        size = _function_size(resolver, entry.address, source)
        if not size:
            raise ResolveError(f"cannot place '{point.text}' safely: the size of {name} is not known, so its return "
                               "instructions cannot be found",
                               hint="a Go program is killed by a kernel return probe when its stack moves; probe "
                                    "a line before the return instead")
        try:
            exits = resolver.target.arch.code().function_exits(
                code_bytes(resolver.elf, entry.address, size, f"find the returns of {name}"), entry.address)
        except InstructionDecodeError as err:
            raise ResolveError(f"cannot place '{point.text}' safely: {err.message}",
                               hint="a uprobe must start an instruction, and a kernel return probe kills a Go "
                                    "program when its stack moves; probe a line before the return") from None
        if not exits.returns:
            raise ResolveError(f"cannot place '{point.text}': {name} has no return instruction (it ends in "
                               "jumps or calls that do not return)",
                               hint="a kernel return probe would kill the Go program when its stack moves; "
                                    "probe the functions it jumps to")
        if exits.jumps_out:
            where = ", ".join(f"{name}+{a - entry.address}" for a in exits.jumps_out)
            resolver.warnings.append(f"{name} also leaves by a jump to another function ({where}): "
                                     f"'{point.text}' does not see the returns made that way")
        results = _results(source, entry.address, name, resolver.target.arch) if _names_results(probe) else ()
        args = tuple(_return_arg(resolver, arg, results, name, entry.address) for arg in probe.args)
        for address in exits.returns:
            offset = entry.offset + address - entry.address
            points.append(ProbePoint(function=name, offset=offset, address=address,
                                     place=resolver.place(name, address, offset), args=args,
                                     at_return_instruction=True))
    resolver.notes.append(f"'{point.text}' on a Go program: uprobes on the {len(points)} return instruction(s), "
                          "not a kernel return probe (which kills a Go program when its stack moves)")
    return points


def _function_size(resolver: "Resolver", address: int, source) -> int:
    sym = resolver.elf.symbol_at(address)
    if sym is not None and sym.value == address and sym.size:
        return sym.size
    fn = source.debuginfo.function_at(address) if source is not None else None
    if fn is not None and fn.entry == address and fn.high is not None:
        return fn.high - address
    return 0


def _names_results(probe: S.ProbeSpec) -> bool:
    return any(_mentions_results(arg.expr) for arg in probe.args)


def _mentions_results(expr) -> bool:
    if isinstance(expr, S.Deref):
        return _mentions_results(expr.inner)
    return isinstance(expr, S.Variable) or (isinstance(expr, S.SpecialVar) and expr.name == "retval")


# -- the results and their registers ------------------------------------------------------------------


def _results(source, address: int, name: str, arch: Arch) -> tuple[GoResult, ...]:
    """The results of the Go function at ``address`` with the registers each is returned in."""
    from ..debuginfo.dwarf.die import die_attr, die_name

    registers = arch.go_integer_registers
    fn = source.debuginfo.function_at(address) if source is not None else None
    if fn is None:
        raise ProbeSemanticError(f"{name} has no debug information, so where its results are is not known",
                                 hint=f"fetch the registers of Go's ABI: the first integer result is in %{registers[0]}, "
                                      f"the next in {', '.join('%' + r for r in registers[1:])}")
    producer = die_attr(fn.cu.get_top_DIE(), "DW_AT_producer")
    producer = producer.decode("utf-8", "replace") if isinstance(producer, bytes) else str(producer or "")
    if "regabi" not in producer:
        raise ProbeSemanticError(f"{name} was compiled for Go's stack ABI ({producer or 'no producer'}): its results "
                                 "are on the stack, which probectl does not read at a return",
                                 hint="rebuild it with Go 1.17 or later (the register ABI)")
    results: list[GoResult] = []
    ints = floats = 0
    for child in fn.die.iter_children():
        if child.tag != "DW_TAG_formal_parameter" or not die_attr(child, "DW_AT_variable_parameter"):
            continue
        result_name = die_name(child) or f"~r{len(results)}"
        type_die = _type(child)
        leaves: list[tuple[tuple[str, ...], bool, str]] = []
        fits = type_die is not None and _leaves(type_die, (), leaves, 0)
        n_int = sum(1 for _, is_float, _ in leaves if not is_float)
        n_float = len(leaves) - n_int
        if fits and ints + n_int <= len(registers) and floats + n_float <= arch.go_float_registers:
            pieces = []
            for path, is_float, typ in leaves:
                if is_float:
                    pieces.append(Piece(path, None, typ))
                    floats += 1
                else:
                    pieces.append(Piece(path, registers[ints], typ))
                    ints += 1
            results.append(GoResult(result_name, _type_name(type_die), tuple(pieces)))
        else:
            results.append(GoResult(result_name, _type_name(type_die), (), on_stack=True))
    return tuple(results)


def _type(die: "DIE") -> "Optional[DIE]":
    from ..debuginfo.dwarf.types import real_type

    return real_type(die)


def _type_name(die: "Optional[DIE]") -> str:
    from ..debuginfo.dwarf.die import die_name

    return (die_name(die) if die is not None else None) or "?"


def _leaves(die: "DIE", path: tuple[str, ...], out: list, depth: int) -> bool:
    """Append the register pieces of a value of type ``t`` (path, is_float, fetch type) in the ABI's
    order; False when it goes on the stack (an array of more than one element) or is not understood."""
    from ..debuginfo.dwarf.die import die_name
    from ..debuginfo.dwarf.types import array_dimensions, byte_size, encoding, strip_typedefs

    if depth > 16:
        return False
    t = strip_typedefs(die)
    if t is None:
        return False
    size = byte_size(t)
    if t.tag == "DW_TAG_base_type":
        enc = encoding(t)
        if size == 0:
            return True
        if size is None or size > 8:
            if enc == 0x03 and size == 16:  # DW_ATE_complex_float: two float pieces
                out.extend([(path + ("real",), True, "f64"), (path + ("imag",), True, "f64")])
                return True
            return False
        if enc in (0x04, 0x03):  # DW_ATE_float, DW_ATE_complex_float (complex64)
            out.append((path, True, f"f{size * 8}"))
        elif enc in (0x05, 0x06):  # DW_ATE_signed, DW_ATE_signed_char
            out.append((path, False, f"s{size * 8}"))
        elif enc == 0x02:  # DW_ATE_boolean
            out.append((path, False, "u8"))
        else:
            out.append((path, False, f"u{size * 8}"))
        return True
    if t.tag == "DW_TAG_pointer_type":
        out.append((path, False, "x64"))
        return True
    if t.tag == "DW_TAG_structure_type":
        for member in t.iter_children():
            if member.tag != "DW_TAG_member":
                continue
            member_type = _type(member)
            if member_type is None or not _leaves(member_type, path + (die_name(member) or "?",), out, depth + 1):
                return False
        return True
    if t.tag == "DW_TAG_array_type":
        dims = array_dimensions(t)
        count = 1
        for d in dims:
            if d is None:
                return False
            count *= d
        if count == 0:
            return True
        element = strip_typedefs(_type(t)) if count == 1 else None
        return element is not None and _leaves(element, path + ("[0]",), out, depth + 1)
    return False


# -- the arguments -----------------------------------------------------------------------------------


def _return_arg(resolver: "Resolver", arg: S.ArgSpec, results: tuple[GoResult, ...], function: str,
                address: int) -> ResolvedArg:
    """One argument of a Go return probe: ``$retval`` and result names read from their registers,
    what needs no debug information as anywhere else."""
    expr = arg.expr
    if isinstance(expr, S.SpecialVar) and expr.name in ("params", "vars"):
        raise ProbeSemanticError(f"'{arg.text}' at a Go return: the arguments and locals are gone there",
                                 hint="name the results, or read $retval")
    if not _mentions_results(expr):
        return resolver.render_arg(arg, address, False)
    inner, derefs = expr, []
    while isinstance(inner, S.Deref):
        derefs.append(inner)
        inner = inner.inner
    piece, default_name = _piece(inner, results, function, arg.text)
    assert piece.register is not None
    fetch: S.Expr = S.Register(piece.register)
    for d in reversed(derefs):
        fetch = S.Deref(d.offset, fetch, d.user)
    if not derefs and arg.type is not None and arg.type.base in ("string", "ustring"):
        fetch = S.Deref(0, fetch)  # (the string a pointer piece points at, as $retval:string means)
    resolved = resolver.render_arg(replace(arg, expr=fetch), address, False)
    if arg.type is None and not derefs:
        resolved = replace(resolved, type=piece.type)
    if not arg.name and default_name:
        resolved = replace(resolved, name=default_name)
    return resolved


def _piece(expr, results: tuple[GoResult, ...], function: str, text: str) -> tuple[Piece, str]:
    """The one integer register piece ``expr`` ($retval or RESULT[.MEMBER...]) names, and the
    argument name it gets when the user gives none."""
    if isinstance(expr, S.SpecialVar):
        if not results:
            raise ProbeSemanticError(f"{function} returns nothing: '{text}' has no value", hint="remove $retval")
        result, path, default_name = results[0], tuple[str, ...](), ""
    else:
        assert isinstance(expr, S.Variable)
        found = [r for r in results if r.name == expr.name]
        if not found:
            names = ", ".join(r.name for r in results) or "none"
            raise ProbeSemanticError(f"'{expr.name}' is not a result of {function}: at a Go return only the results "
                                     f"are known (results: {names})",
                                     hint="record the arguments at the function's entry; $retval is the first result")
        result = found[0]
        if expr.method is not None:
            raise ProbeSemanticError(f"'{text}': .{expr.method.name}() reads a C++ container, not a Go result",
                                     hint="read a member of the result (RESULT.len of a slice or string)")
        members: list[str] = []
        for acc in expr.accessors:
            if not isinstance(acc, S.Member) or acc.arrow:
                raise ProbeSemanticError(f"'{text}': at a Go return a result is read from its registers, so only its "
                                         "own members (RESULT.member) can be named, not what it points to",
                                         hint="fetch memory through a register: +OFFS(%REG)")
            members.append(acc.name)
        path = tuple(members)
        default_name = "_".join((expr.name, *path))
    what = f"the result {result.name} ({result.type_name}) of {function}"
    if result.on_stack:
        raise ProbeSemanticError(f"{what} is returned on the stack, which probectl does not read at a return",
                                 hint="probe a line before the return where it is a variable")
    chosen = [p for p in result.pieces if p.path[:len(path)] == path]
    if not chosen:
        members = sorted({p.path[len(path)] for p in result.pieces if len(p.path) > len(path)} or {"none"})
        raise ProbeSemanticError(f"'{text}': {what} has no member {'.'.join(path)}",
                                 hint=f"its members: {', '.join(members)}")
    if len(chosen) > 1:
        parts = ", ".join(f"{'.'.join(p.path) or result.name} in %{p.register}" if p.register else
                          f"{'.'.join(p.path)} in a floating-point register" for p in chosen)
        raise ProbeSemanticError(f"'{text}': {what} is returned in {len(chosen)} registers ({parts})",
                                 hint="name one of its members (RESULT.member), or fetch the registers")
    if chosen[0].register is None:
        raise ProbeSemanticError(f"'{text}': {what} is returned in a floating-point register, which probe events "
                                 "cannot read", hint="probe a line before the return where it is a variable")
    return chosen[0], default_name
