"""Fetch arguments from BTF at a kernel function's entry or return, for kernels without DWARF.

BTF gives a function's prototype -- parameter names and types, return type -- but no
locations. At the entry of a function (a kprobe at ``FUNC+0``, before the function has run an
instruction of its own) the calling convention of the kernel's machine says where each parameter
is. On AArch64 (AAPCS64, :func:`_aapcs64_locations`): integers, pointers and aggregates of up to 16
bytes in the next of ``%x0``..``%x7`` (two for 16 bytes, from an even one when 16-byte aligned),
floating point and homogeneous floating-point aggregates in SIMD registers, which probes cannot
read, larger aggregates by reference (a copy's address in the register), the rest on the stack from
``0(%sp)`` (the return address is in ``%lr``); a struct returned in memory goes through ``%x8``, not
an argument register. On x86-64, the System V convention:

- Each parameter is classified by its type: integers, pointers and enums up to 8 bytes take
  the next general-purpose register (``%di %si %dx %cx %r8 %r9``); a 16-byte integer takes two
  (or goes to the stack whole if two are not left); ``float``/``double`` take SSE registers,
  which probes cannot read; a struct or union of up to 16 bytes is split into eightbytes, each
  INTEGER (in a general register) unless it holds only floating-point fields; larger or
  unaligned aggregates and ``long double`` are passed in memory, on the stack.
- A function returning a struct in memory gets its address as a hidden first argument (``%di``).
- Stack arguments start 8 bytes above the stack pointer (the return address is at ``0(%sp)``),
  each at an 8-byte aligned slot (16 for 16-byte aligned types), as perf writes them from DWARF
  (``+8(%sp)``) and the kernel reads ``$argN`` (``regs_get_kernel_argument``).

From the parameter's place (a :mod:`probectl.debuginfo.place`: ``Memory`` on the stack, ``Pieces``
for the registers), member chains (``->``, ``.``, ``[N]``), bitfields, ``:string`` casts and the
kernel type are the DWARF path's: both hand them to the one walker,
:func:`probectl.resolve.fetch.fetch_chain` (perf's ``convert_variable_fields``/``_type``), so the same
definition resolves to the same fetch argument from either source. A struct passed in registers can
be read member by member (``b<bits>@<offset>/64`` of its register). Types tagged ``__user`` in BTF (``btf_type_tag("user")``, kernels built with clang)
are dereferenced as user memory (``+u0(...)``) and read as ``ustring``.

At a return probe the registers that held the parameters have been reused. Kernels whose
tracefs README says "kernel return probes support: $retval, $arg<N>, $comm" save the entry
registers and let a return probe read ``$argN``; with ``args_at_return`` the parameter is fetched
that way (N counts argument slots: registers, then 8-byte stack slots), else it is refused.
"""
from __future__ import annotations

from typing import Optional, Sequence, Union

from .. import spec as S
from ..arch import EM_AARCH64, Arch, for_machine, machine_name
from ..arch.x86_64 import ARCH as X86_64
from ..arch.x86_64 import ARGUMENT_REGISTERS, SSE_ARGUMENT_REGISTERS
from ..dataclass import dataclass
from ..debuginfo.btf import Btf
from ..debuginfo.btf.format import AGGREGATE_KINDS, ARRAY, ENUM, ENUM64, FLOAT, INT, PTR, BtfType, guarded
from ..debuginfo.place import Deref, Memory, Pieces, Place, Reg, Value, Var
from ..errors import (DebugInfoError, LocationError, ResolveError, ValueTooWideError, VariableNotFound,
                      VariableUnavailable)
from .fetch import fetch_chain
from .fetch_options import FetchOptions
from .fetchresult import FetchResult, ListedVariable
from .render import RenderOptions

_STACK_START = 8        # the return address is at 0(%sp) at a function's first instruction

# Eightbyte classes (x86-64 psABI 3.2.3).
_NONE, _INTEGER, _SSE = "none", "integer", "sse"
_MEMORY = "memory"      # the whole value is passed on the stack


# --- where parameters are ---------------------------------------------------------------------------


@dataclass(frozen=True)
class ParamLocation:
    """Where a parameter is at function entry: ``registers`` (indices into
    the machine's ``argument_registers``, one per eightbyte) or ``stack`` (offset from ``%sp``);
    ``by_reference``: the register or stack slot holds the address of a copy (AAPCS64's larger
    aggregates); ``slots``: the kernel's ``$argN`` numbers of its eightbytes; ``problem``: why it
    cannot be fetched ("" if it can)."""

    name: str
    type: int
    registers: tuple[int, ...] = ()
    stack: Optional[int] = None
    slots: Sequence[int] = ()
    problem: str = ""
    by_reference: bool = False


class _Unclassifiable(Exception):
    """A type the calling convention cannot place (declared only, void, a function...)."""


def _alignment(btf: Btf, type_id: int, depth: int = 0, memo: Optional[dict[int, int]] = None) -> int:
    """Natural alignment of a type (1 for aggregates whose members are not naturally aligned,
    i.e. packed ones)."""
    if depth > 32:
        raise DebugInfoError(f"{btf.source}: corrupt BTF: types nest too deep (a loop?)")
    if memo is None:
        memo = {}
    if type_id in memo:
        return memo[type_id]
    memo[type_id] = align = _natural_alignment(btf, type_id, depth, memo)
    return align


def _natural_alignment(btf: Btf, type_id: int, depth: int, memo: dict[int, int]) -> int:
    t = btf.real(type_id)
    if t is None:
        raise _Unclassifiable("void")
    if t.kind in (INT, ENUM, ENUM64, FLOAT):
        return max(1, min(t.size or 1, 16))
    if t.kind == PTR:
        return btf.pointer_size
    if t.kind == ARRAY:
        return _alignment(btf, btf.array_info(t)[0], depth + 1, memo)
    if t.kind in AGGREGATE_KINDS:
        align = 1
        for m in btf.members(t):
            if m.bitfield_size:
                continue
            a = _alignment(btf, m.type, depth + 1, memo)
            if m.bit_offset % (8 * a):
                return 1
            align = max(align, a)
        if t.size is None or t.size % align:  # (an aggregate is sized: None is not met)
            return 1
        return align
    raise _Unclassifiable(btf.type_name(type_id) or t.kind_name)


def _classify(btf: Btf, type_id: int) -> Union[str, list[str]]:
    """The classes of the eightbytes of a value of ``type_id``, or ``_MEMORY``."""
    t = btf.real(type_id)
    if t is None:
        raise _Unclassifiable("void")
    if t.kind in (INT, ENUM, ENUM64, PTR):
        size = btf.byte_size(t.id) or 0
        if 0 < size <= 8:
            return [_INTEGER]
        if size == 16:
            return [_INTEGER, _INTEGER]
        raise _Unclassifiable(f"a {size}-byte integer")
    if t.kind == FLOAT:
        return [_SSE] if t.size in (4, 8) else _MEMORY    # long double: x87, in memory
    if t.kind in AGGREGATE_KINDS:
        size = t.size or 0
        if size == 0:
            return []
        if size > 16:
            return _MEMORY
        classes = [_NONE] * ((size + 7) // 8)
        if t.vlen == 0:
            # BTF without the members (pahole writes transparent unions so): kernel aggregates
            # hold integers and pointers, so take the eightbytes as INTEGER.
            return [_INTEGER] * len(classes)
        if not _classify_fields(btf, t.id, 0, classes, 0):
            return _MEMORY
        if _NONE in classes:
            raise _Unclassifiable(f"{btf.type_name(t.id)}, which has an eightbyte of padding only")
        return classes
    raise _Unclassifiable(btf.type_name(type_id) or t.kind_name)


_CLASSIFY_BUDGET = 100_000  # fields visited for one parameter before calling the data damaged


def _classify_fields(btf: Btf, type_id: int, base_bits: int, classes: list[str], depth: int,
                     budget: Optional[list[int]] = None) -> bool:
    """Merge the class of every scalar inside ``type_id`` (at ``base_bits``) into ``classes``;
    False if a field is not naturally aligned (the aggregate then goes to memory)."""
    if budget is None:
        budget = [_CLASSIFY_BUDGET]
    budget[0] -= 1
    if depth > 32 or budget[0] < 0:
        raise DebugInfoError(f"{btf.source}: corrupt BTF: an aggregate of at most 16 bytes has too many "
                             f"fields or nests too deep (a loop?)")
    t = btf.real(type_id)
    if t is None:
        raise _Unclassifiable("void")
    if t.kind in AGGREGATE_KINDS:
        for m in btf.members(t):
            if base_bits + m.bit_offset >= len(classes) * 64:
                continue    # past the end of the aggregate (damaged data)
            bits = m.bitfield_size
            mt = btf.real(m.type)
            if not bits and mt is not None and mt.kind == INT:
                _enc, int_off, int_bits = btf.int_encoding(mt)
                if int_bits != (mt.size or 0) * 8 or int_off:
                    bits = int_bits
            if bits:
                start = base_bits + m.bit_offset
                for eb in range(start // 64, (start + bits - 1) // 64 + 1):
                    if eb < len(classes):
                        classes[eb] = _INTEGER
                continue
            if not _classify_fields(btf, m.type, base_bits + m.bit_offset, classes, depth + 1, budget):
                return False
        return True
    if t.kind == ARRAY:
        elem, count = btf.array_info(t)
        esize = btf.byte_size(elem) or 0
        for n in range(count if esize else 0):
            if base_bits + n * esize * 8 >= len(classes) * 64:
                break       # an aggregate of at most 16 bytes: the rest is past its end (damaged data)
            if not _classify_fields(btf, elem, base_bits + n * esize * 8, classes, depth + 1, budget):
                return False
        return True
    size = btf.byte_size(t.id)
    if size is None:
        raise _Unclassifiable(btf.type_name(t.id) or t.kind_name)
    if base_bits % (8 * _alignment(btf, t.id)):
        return False
    cls = _SSE if t.kind == FLOAT else _INTEGER
    if t.kind == FLOAT and size > 8:
        return False
    for eb in range(base_bits // 64, (base_bits + size * 8 - 1) // 64 + 1):
        if eb < len(classes) and classes[eb] != _INTEGER:
            classes[eb] = cls
    return True


def _returns_in_memory(btf: Btf, ret: int) -> bool:
    if ret == 0:
        return False
    try:
        real = btf.real(ret)
        return _classify(btf, ret) == _MEMORY and real is not None and real.kind in AGGREGATE_KINDS
    except _Unclassifiable:
        return False


@guarded
def btf_param_locations(btf: Btf, function: str) -> list[ParamLocation]:
    """Where each named or unnamed parameter of ``function`` is at its entry (x86-64 SysV, AAPCS64)."""
    arch = btf_arch(btf)
    key = ("param_locations", function)
    cached = btf.cache.get(key)
    if cached is None:
        proto = btf.function(function).proto
        locations = _aapcs64_locations if arch.elf_machine == EM_AARCH64 else _param_locations
        cached = btf.cache[key] = locations(btf, proto)
    return list(cached)


_AAPCS64_REGISTERS = 8  # x0..x7, and v0..v7 for floating point


def _hfa_members(btf: Btf, type_id: int, depth: int = 0) -> Optional[list[int]]:
    """The sizes of the floating-point members of an aggregate made of floating-point members only
    (AAPCS64's homogeneous floating-point aggregate, when 1 to 4 of one size), else None."""
    if depth > 32:
        raise DebugInfoError(f"{btf.source}: corrupt BTF: types nest too deep (a loop?)")
    t = btf.real(type_id)
    if t is None:
        return None
    if t.kind == FLOAT:
        return [t.size or 0]
    if t.kind == ARRAY:
        elem, count = btf.array_info(t)
        inner = _hfa_members(btf, elem, depth + 1)
        return None if inner is None or count > 4 else inner * count
    if t.kind in AGGREGATE_KINDS and t.vlen:
        sizes: list[int] = []
        for m in btf.members(t):
            inner = _hfa_members(btf, m.type, depth + 1)
            if inner is None or m.bitfield_size:
                return None
            sizes += inner
            if len(sizes) > 4:
                return None
        return sizes
    return None


def _aapcs64_locations(btf: Btf, proto: BtfType) -> tuple[ParamLocation, ...]:
    """AAPCS64 (6.8.2): parameter by parameter, the next general register (NGRN), SIMD register
    (NSRN) or stack offset (NSAA)."""
    params, _variadic = btf.params(proto)
    ngrn = nsrn = nsaa = 0
    out = []
    for p in params:
        t = btf.real(p.type)
        size = btf.byte_size(p.type) if t is not None else None
        if t is None or size is None or t.kind not in (INT, ENUM, ENUM64, PTR, FLOAT, *AGGREGATE_KINDS):
            what = btf.type_name(p.type) or (t.kind_name if t is not None else "void")
            # the places of the parameters after it are still known: each is placed by its own type
            out.append(ParamLocation(p.name, p.type, problem=f"its type ({what}) cannot be placed by the calling "
                                                             f"convention"))
            continue
        try:
            align = _alignment(btf, p.type)
        except _Unclassifiable:
            align = 8
        hfa = _hfa_members(btf, p.type) if t.kind in AGGREGATE_KINDS else None
        if t.kind == FLOAT or (hfa and len(set(hfa)) == 1):
            count = len(hfa) if hfa else 1
            if nsrn + count <= _AAPCS64_REGISTERS:
                nsrn += count
                out.append(ParamLocation(p.name, p.type, problem="it is passed in a SIMD register (%v), which probe "
                                                                 "arguments cannot read"))
                continue
            nsrn = _AAPCS64_REGISTERS
        elif t.kind in AGGREGATE_KINDS and size > 16:
            if ngrn < _AAPCS64_REGISTERS:  # a copy's address, in the next register
                out.append(ParamLocation(p.name, p.type, registers=(ngrn,), slots=(ngrn + 1,), by_reference=True))
                ngrn += 1
            else:
                out.append(ParamLocation(p.name, p.type, stack=nsaa, by_reference=True))
                nsaa += 8
            continue
        else:
            words = max(1, (size + 7) // 8)
            if words == 2 and align == 16:
                ngrn += ngrn % 2
            if ngrn + words <= _AAPCS64_REGISTERS:
                regs = tuple(range(ngrn, ngrn + words))
                ngrn += words
                out.append(ParamLocation(p.name, p.type, registers=regs, slots=tuple(r + 1 for r in regs),
                                         problem="" if size else "it is an empty aggregate, passed nowhere"))
                continue
            ngrn = _AAPCS64_REGISTERS
        # On the stack, at the next slot aligned for it (8 bytes at least); $argN reads registers only.
        slot_align = max(8, min(align, 16))
        nsaa = (nsaa + slot_align - 1) // slot_align * slot_align
        out.append(ParamLocation(p.name, p.type, stack=nsaa))
        nsaa += max(8, (size + 7) // 8 * 8)
    return tuple(out)


def _param_locations(btf: Btf, proto: BtfType) -> tuple[ParamLocation, ...]:
    params, _variadic = btf.params(proto)
    gp = 1 if _returns_in_memory(btf, proto.ref) else 0
    sse = 0
    stack = 0           # bytes of stack arguments so far
    lost = ""           # a parameter whose place is unknown hides the places of those after it
    out = []
    for p in params:
        if lost:
            out.append(ParamLocation(p.name, p.type, problem=f"where it is depends on '{lost}', whose type "
                                                             f"the calling convention cannot place"))
            continue
        try:
            classes = _classify(btf, p.type)
        except _Unclassifiable as exc:
            lost = p.name or "?"
            out.append(ParamLocation(p.name, p.type, problem=f"its type ({exc}) cannot be placed by the "
                                                             f"calling convention"))
            continue
        if classes != _MEMORY:
            n_int = classes.count(_INTEGER)
            n_sse = classes.count(_SSE)
            if gp + n_int <= len(ARGUMENT_REGISTERS) and sse + n_sse <= SSE_ARGUMENT_REGISTERS:
                regs = []
                for c in classes:
                    if c == _INTEGER:
                        regs.append(gp)
                        gp += 1
                sse += n_sse
                problem = ""
                if n_sse:
                    problem = ("it is passed in an SSE register (%xmm), which probe arguments cannot read" if not n_int
                               else "part of it is passed in an SSE register (%xmm), which probe arguments "
                                    "cannot read")
                elif not classes:
                    problem = "it is an empty aggregate, passed nowhere"
                out.append(ParamLocation(p.name, p.type, registers=tuple(regs),
                                         slots=tuple(r + 1 for r in regs), problem=problem))
                continue
        # In memory: on the stack, at the next slot aligned for it.
        size = btf.byte_size(p.type) or 0
        try:
            align = max(8, _alignment(btf, p.type))
        except _Unclassifiable:
            align = 8
        stack = (stack + align - 1) // align * align
        first_slot = len(ARGUMENT_REGISTERS) + 1 + stack // 8
        nslots = max(1, (size + 7) // 8)
        out.append(ParamLocation(p.name, p.type, stack=_STACK_START + stack,
                                 slots=range(first_slot, first_slot + nslots)))
        stack += nslots * 8
    return tuple(out)


def btf_arch(btf: Btf) -> Arch:
    """The machine of the kernel ``btf`` describes (x86-64 when the data does not say: a BTF file of
    its own, not the running kernel's)."""
    if btf.machine is None:
        return X86_64
    arch = for_machine(btf.machine)
    if arch is None:
        raise DebugInfoError(f"{btf.source} describes a kernel for {machine_name(btf.machine)}; fetching "
                             f"arguments from BTF knows the calling conventions of x86-64 and AArch64",
                             hint="use a vmlinux with DWARF, or $argN where the kernel supports it")
    return arch


def _unavailable(name: str, message: str, hint: str = "") -> VariableUnavailable:
    return VariableUnavailable(message, hint, name, 0, [], [], "register")


# --- fetching --------------------------------------------------------------------------------------------


def _param_place(btf: Btf, function: str, name: str, at_return: bool, options: FetchOptions
                 ) -> tuple[ParamLocation, Place]:
    locations = btf_param_locations(btf, function)
    positions = sorted({n for proto in btf.function(function).protos
                        for n, p in enumerate(btf.params(proto)[0]) if p.name == name})
    if len(positions) > 1:
        raise VariableNotFound(f"'{name}' names different parameters of the functions called '{function}' in "
                               f"{btf.source}", hint="BTF does not say which symbol is which; use a vmlinux with "
                                                     "DWARF, or $argN")
    if positions:
        loc = locations[positions[0]]
    else:
        names = [p.name for p in locations if p.name]
        raise VariableNotFound(f"'{function}' has no parameter '{name}' in {btf.source}",
                               hint=(f"its parameters are: {', '.join(names)}" if names else
                                     f"'{function}' takes no named parameters") +
                               "; BTF describes parameters only (no locals, no globals): use a vmlinux with "
                               "DWARF for those")
    if loc.problem:
        raise _unavailable(name, f"parameter '{name}' of '{function}' cannot be fetched: {loc.problem}")
    if at_return:
        if not loc.slots:
            raise _unavailable(name, f"parameter '{name}' is not available at the return of '{function}': it "
                                     f"was passed on the stack, and $argN reads the argument registers only")
        if not options.args_at_return:
            raise _unavailable(name, f"parameter '{name}' is not available at the return of '{function}': the "
                                     f"registers that held it have been reused",
                               hint="probe the function's entry, or use a kernel whose return probes support "
                                    "$arg<N> (tracefs README: 'kernel return probes support: $retval, $arg<N>, "
                                    "$comm')")
        if loc.by_reference:
            return loc, Memory(Value(Var(f"$arg{loc.slots[0]}")))
        return loc, Pieces(tuple(Value(Var(f"$arg{n}")) for n in loc.slots))
    arch = btf_arch(btf)
    if loc.stack is not None:
        place: Place = Memory(Value(Reg(arch.stack_pointer), loc.stack))
        if loc.by_reference:  # (the slot holds the copy's address)
            place = Memory(Value(Deref(Value(Reg(arch.stack_pointer), loc.stack))))
        return loc, place
    if loc.by_reference:
        return loc, Memory(Value(Reg(arch.argument_registers[loc.registers[0]])))
    return loc, Pieces(tuple(Value(Reg(arch.argument_registers[r])) for r in loc.registers))


@guarded
def btf_fetch(btf: Btf, function: str, variable: S.Variable, cast: Optional[S.TypeSpec] = None, *,
              at_return: bool = False, options: FetchOptions = FetchOptions(),
              user_access: bool = False) -> FetchResult:
    """The fetch argument reading ``variable`` (a ``spec.Variable``: a parameter of ``function``
    with its member chain) at the entry of ``function`` (``at_return``: at its return), with an
    optional ``spec.TypeSpec`` cast, from BTF alone.

    ``options``: what the kernel's fetch arguments can express (``x<bits>`` types, ``$argN`` at a
    return probe). ``user_access`` (``@user``): every dereference reads user memory.

    Raises VariableNotFound (not a parameter), VariableUnavailable (a parameter in an SSE
    register, of an unplaceable type, or at a return probe), TypeMismatchError for member
    chain and cast mistakes, BtfFunctionNotFound, DebugInfoError for damaged BTF.
    """
    loc, place = _param_place(btf, function, variable.name, at_return, options)
    try:
        return fetch_chain(btf, loc.type, place, variable, cast,
                           RenderOptions(arch=btf_arch(btf), user_access=user_access), options.x_types)
    except LocationError as exc:
        message = exc.message
        if exc.reason == "offset":  # (the message says "its offset": name the expression)
            message = f"'{S.render_expr(variable)}' cannot be fetched: {message}"
        raise VariableUnavailable(message, exc.hint, variable.name, 0, [], [], exc.reason) from None


# --- $retval, $params, listings ------------------------------------------------------------------------


@guarded
def btf_retval(btf: Btf, function: str, options: FetchOptions = FetchOptions()) -> FetchResult:
    """``$retval`` of ``function``: its kernel type, C type, signedness and enumerators from the
    return type. Raises VariableUnavailable for void functions and values not returned in
    ``%ax`` (``%x0``) alone (floating point, 16-byte values, structs returned in memory)."""
    arch = btf_arch(btf)
    ret = btf.function(function).proto.ref
    if ret == 0:
        raise _unavailable("$retval", f"'{function}' returns void: $retval has no value",
                           hint="probe the return without $retval, or fetch something else")
    tname = btf.type_name(ret) or "(unknown_type)"
    try:
        classes = _classify(btf, ret)
    except _Unclassifiable as exc:
        raise _unavailable("$retval", f"the return type of '{function}' ({exc}) cannot be placed") from None
    if arch is not X86_64:
        real = btf.real(ret)
        hfa = _hfa_members(btf, ret) if real is not None and real.kind in AGGREGATE_KINDS else None
        if real is not None and (real.kind == FLOAT or hfa):
            raise _unavailable("$retval", f"'{function}' returns {tname} in a SIMD register (%v0), which $retval "
                                          "cannot read")
        returned = btf.byte_size(ret) or 0
        if returned > 16 and real is not None and real.kind in AGGREGATE_KINDS:
            raise _unavailable("$retval", f"'{function}' returns {tname} in memory (at the address the caller "
                                          f"passed in %x8), which $retval cannot read")
        if returned > 8:
            raise _unavailable("$retval", f"'{function}' returns {tname} in two registers (%x0, %x1), which "
                                          "$retval cannot read")
    elif classes == _MEMORY:
        raise _unavailable("$retval", f"'{function}' returns {tname} in memory ($retval holds its address)",
                           hint="fetch $retval:x64 for the address")
    elif classes != [_INTEGER]:
        where = "an SSE register" if _SSE in classes else "two registers (%ax, %dx)"
        raise _unavailable("$retval", f"'{function}' returns {tname} in {where}, which $retval cannot read")
    ktype = btf.kernel_type(ret, None, options.x_types)
    size = btf.byte_size(ret)
    return FetchResult(fetch="$retval", type=ktype, default_name="arg1", c_type=tname, signed=btf.is_signed(ret),
                       bits=int(ktype[1:]) if ktype else 0, enumerators=tuple(btf.enumerators(ret)), size=size,
                       variable="$retval")


@guarded
def btf_retval_type(btf: Btf, function: str, options: FetchOptions = FetchOptions()) -> str:
    """The kernel type of ``$retval`` of ``function`` (``s32``, ``x64``...)."""
    return btf_retval(btf, function, options).type


def _fetchable(btf: Btf, function: str, name: str, at_return: bool, options: FetchOptions) -> bool:
    try:
        loc, place = _param_place(btf, function, name, at_return, options)
        fetch_chain(btf, loc.type, place, S.Variable(name), None, RenderOptions(arch=btf_arch(btf)), True)
        return True
    except ValueTooWideError:
        return True  # there to read, member by member (listed; $params leaves it out with a warning)
    except ResolveError:
        return False


@guarded
def btf_params(btf: Btf, function: str, *, at_return: bool = False, options: FetchOptions = FetchOptions()
               ) -> list[str]:
    """``$params``: the names of the parameters of ``function`` that can be fetched there, in
    order."""
    out = []
    for loc in btf_param_locations(btf, function):
        if loc.name and loc.name not in out and _fetchable(btf, function, loc.name, at_return, options):
            out.append(loc.name)
    return out


@guarded
def btf_vars_listing(btf: Btf, function: str, *, at_return: bool = False,
                     options: FetchOptions = FetchOptions()) -> list[ListedVariable]:
    """The ``vars`` listing of ``function`` from BTF: each fetchable parameter with its C type as
    ``perf probe -V`` writes it, sorted as perf prints them."""
    seen: dict[str, ListedVariable] = {}
    for loc in btf_param_locations(btf, function):
        if not loc.name or not _fetchable(btf, function, loc.name, at_return, options):
            continue
        item = ListedVariable(btf.type_name(loc.type) or "(unknown_type)", loc.name, "param")
        seen.setdefault(f"{item.c_type}\t{loc.name}", item)
    return [seen[k] for k in sorted(seen)]
