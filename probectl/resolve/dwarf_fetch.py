"""Fetch arguments for C expressions: member chains, casts and kernel types; ``$vars``/``$params``;
the variable listings of ``probectl vars`` (perf ``-V``).

The chain rules are perf's ``convert_variable_fields``: ``->`` and ``[i]`` on a pointer add a
dereference level, ``.`` on a pointer and ``->`` on a struct are errors, anonymous members are
looked through, union members are at offset 0. Types follow ``convert_variable_type``:
``s<bits>`` for signed C types, ``x<bits>`` otherwise (``u<bits>`` when the kernel lacks
x-types), ``string`` for ``char`` arrays and pointers cast with ``:string`` (a pointer gets an
extra ``+0(...)``), a bitfield ``b<width>@<shift>/<container>``; any other cast is used as given.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Optional

from elftools.dwarf.die import DIE

from ..errors import ResolveError
from ..debuginfo.dwarf import types as T
from ..debuginfo.dwarf.die import die_name, guarded
from ..errors import VariableNotFound, VariableUnavailable
from .fetchresult import FetchResult, ListedVariable, cast_text, default_name, is_member
from ..debuginfo.dwarf.location import (Computed, Deref, LocationError, Memory, Place, Reg, Register, RenderOptions, Slice, Value,
                       register_name, render_memory, render_value)
from ..debuginfo.dwarf.variables import find_variable, variable_place

if TYPE_CHECKING:
    from ..debuginfo.dwarf import DebugInfo

_STRING_CASTS = ("string", "ustring")
_SIZE_CASTS = ("u", "s", "x")


def _value_of(place: Place, what: str) -> Value:
    """The value of a pointer-sized object at ``place`` (to dereference it)."""
    if isinstance(place, Memory):
        return Value(Deref(place.address, user=place.user))
    if isinstance(place, Register):
        return Value(Reg(place.regno))
    if isinstance(place, Computed):
        if place.value.bits < 64 and not place.value.is_const:
            raise LocationError(f"'{what}' is a truncated value and cannot be dereferenced", "computed")
        return place.value
    raise LocationError(f"'{what}' is part of a register and cannot be dereferenced", "computed")


def _member_place(place: Place, offset: int, agg_size: Optional[int], owner: str) -> Place:
    if isinstance(place, Memory):
        return Memory(place.address.plus(offset), place.user)
    if isinstance(place, Slice):
        return Slice(place.value, place.bit_offset + offset * 8)
    value = Value(Reg(place.regno)) if isinstance(place, Register) else place.value
    if agg_size is None or agg_size > 8:
        raise LocationError(f"'{owner}' is a structure held in registers, larger than one register",
                            "register", hint="probe a line where it is in memory")
    return Slice(value, offset * 8)


@guarded
def fetch_variable(debuginfo: "DebugInfo", function: Optional[DIE], address: int, variable, cast=None,
                   *, x_types: bool = True, immediates: bool = True, symbol_base: Optional[int] = None,
                   user_access: bool = False) -> FetchResult:
    """The fetch argument reading ``variable`` (a ``spec.Variable``: name and accessors) at
    ``address`` in scope ``function`` (a function or inline-instance DIE, or a ``Function``;
    None: the function containing the address), with an optional ``spec.TypeSpec`` cast.

    ``x_types``/``immediates``: the kernel supports ``x<bits>`` types / ``\\imm`` arguments.
    ``symbol_base``: write globals as uprobe ``@+FILEOFFSET`` relative to it (see
    ``RenderOptions``) instead of perf's ``@name+off``. ``user_access`` (kprobe ``@user``):
    every dereference through a pointer reads user memory (``+u0(...)``), as perf writes it.

    Raises VariableNotFound, VariableUnavailable (with the lines where it can be fetched),
    ``types.TypeMismatchError`` for chain/cast mistakes.
    """
    scope = getattr(function, "die", function)
    found = find_variable(debuginfo, variable.name, address, scope)
    place = variable_place(debuginfo, found.die, address)
    opts = RenderOptions(machine=debuginfo.machine, symbol_base=symbol_base, immediates=immediates,
                         user_access=user_access)
    try:
        return _convert(debuginfo, found.die, place, variable, cast, opts, x_types)
    except LocationError as exc:
        raise VariableUnavailable(f"'{_expr_text(variable)}' cannot be fetched at 0x{address:x}: {exc.message}",
                                  exc.hint, variable.name, address, [], [], exc.reason) from None


def _expr_text(variable) -> str:
    out = variable.name
    for a in getattr(variable, "accessors", ()):
        out += (("->" if a.arrow else ".") + a.name) if is_member(a) else f"[{a.index}]"
    return out


def _convert(debuginfo: "DebugInfo", var: DIE, place: Place, variable, cast, opts: RenderOptions,
             x_types: bool) -> FetchResult:
    cur_type = T.type_of(var)
    owner = variable.name
    bitfield: Optional[T.Bitfield] = None
    for acc in getattr(variable, "accessors", ()):
        real = T.strip_typedefs(cur_type)
        if real is None:
            raise T.TypeMismatchError(f"'{owner}' has no type information")
        if bitfield is not None:
            raise T.TypeMismatchError(f"'{owner}' is a bitfield, not a struct, union, pointer or array")
        if not is_member(acc):
            if real.tag == "DW_TAG_array_type":
                info = T.array_info(real)
                if info.element_size is None:
                    raise T.TypeMismatchError(f"the elements of '{owner}' have no known size")
                if not isinstance(place, Memory):
                    raise LocationError(f"'{owner}' is an array that is not in memory", "register")
                place = Memory(place.address.plus(acc.index * info.element_size), place.user)
                cur_type = info.element
            elif real.tag == "DW_TAG_pointer_type":
                pointee = T.type_of(real)
                size = T.byte_size(pointee)
                if pointee is None or size is None:
                    raise T.TypeMismatchError(f"'{owner}' points to {T.type_name(pointee) or 'void'}, which has no size "
                                       "to index by", hint="cast it, or use a member chain")
                place = Memory(_value_of(place, owner).plus(acc.index * size), opts.user_access)
                cur_type = pointee
            else:
                raise T.TypeMismatchError(f"'{owner}' ({T.type_name(cur_type)}) is not a pointer nor an array, "
                                   f"so it cannot be indexed")
            owner = f"{owner}[{acc.index}]"
            continue
        if real.tag == "DW_TAG_pointer_type":
            if not acc.arrow:
                raise T.TypeMismatchError(f"{acc.name} must be referred by '->': '{owner}' is a pointer",
                                   hint=f"write {owner}->{acc.name}")
            agg = T.strip_typedefs(T.type_of(real))
            if agg is None or agg.tag not in ("DW_TAG_structure_type", "DW_TAG_union_type", "DW_TAG_class_type"):
                raise T.TypeMismatchError(f"'{owner}' is not a pointer to a struct or union "
                                   f"({T.type_name(cur_type)})")
            place = Memory(_value_of(place, owner), opts.user_access)
        elif real.tag in ("DW_TAG_structure_type", "DW_TAG_union_type", "DW_TAG_class_type"):
            if acc.arrow:
                raise T.TypeMismatchError(f"{acc.name} must be referred by '.': '{owner}' is not a pointer",
                                   hint=f"write {owner}.{acc.name}")
            agg = real
        else:
            raise T.TypeMismatchError(f"'{owner}' ({T.type_name(cur_type)}) is not a struct or union")
        member = T.find_member(agg, acc.name)
        if member is None:
            raise T.unknown_member_error(owner, agg, acc.name)
        place = _member_place(place, member.offset, T.byte_size(agg), owner)
        bitfield = member.bitfield
        cur_type = T.type_of(member.die)
        owner = f"{owner}{'->' if acc.arrow else '.'}{acc.name}"
    return _final(place, cur_type, bitfield, variable, cast, owner, opts, x_types)


def _final(place: Place, cur_type: Optional[DIE], bitfield: Optional[T.Bitfield], variable, cast,
           owner: str, opts: RenderOptions, x_types: bool) -> FetchResult:
    real = T.strip_typedefs(cur_type)
    c_type = T.type_name(cur_type) or "(unknown_type)"
    signed = T.is_signed(cur_type)
    size = T.byte_size(cur_type)
    enums = tuple(T.enumerators(cur_type))
    name = default_name(variable, cast)
    base = getattr(cast, "base", None)
    common = dict(default_name=name, c_type=c_type, signed=signed, enumerators=enums, size=size,
                  variable=variable.name)
    if base in _STRING_CASTS:
        if real is None or real.tag not in ("DW_TAG_pointer_type", "DW_TAG_array_type"):
            raise T.TypeMismatchError(f"cannot fetch '{owner}' as a string: it is {c_type}, not a pointer nor an array",
                               hint="':string' needs a char array or a char pointer")
        if not T.char_element(T.type_of(real)):
            raise T.TypeMismatchError(f"cannot fetch '{owner}' as a string: it is {c_type}, not (unsigned) char * "
                               f"or a char array")
        if real.tag == "DW_TAG_pointer_type":
            fetch = render_memory(_value_of(place, owner), opts, opts.user_access)
        else:
            if not isinstance(place, Memory):
                raise LocationError(f"'{owner}' is an array that is not in memory", "register")
            fetch = render_memory(place.address, opts, place.user)
        return FetchResult(fetch=fetch, type=base, bits=0, **common)
    if base is not None and base not in _STRING_CASTS and (base not in _SIZE_CASTS or getattr(cast, "bits", None)):
        return FetchResult(fetch=_scalar_fetch(place, None, opts), type=cast_text(cast),
                           bits=getattr(cast, "bits", None) or 0, **common)
    if bitfield is not None:
        if isinstance(place, Slice):
            bf = T.Bitfield(0, place.bit_offset + bitfield.shift, bitfield.bits, 64, bitfield.signed)
            fetch = render_value(place.value, opts)
        else:
            bf = bitfield
            fetch = _scalar_fetch(place, None, opts)
        return FetchResult(fetch=fetch, type=bf.fetch_type, bits=bf.bits, **common)
    if isinstance(place, Slice):
        if size is None or size > 8:
            raise LocationError(f"'{owner}' is part of a register and has no fetchable size", "register")
        return FetchResult(fetch=render_value(place.value, opts), type=f"b{size * 8}@{place.bit_offset}/64",
                           bits=size * 8, **common)
    ktype = T.kernel_type(cur_type, base if base in _SIZE_CASTS else None, x_types)
    bits = int(ktype[1:]) if ktype else 0
    if isinstance(place, Computed) and not place.value.is_const and ktype and place.value.bits < bits:
        # gcc describes a value known to fit in fewer bits as a truncated register (for example
        # "DW_OP_breg0 0; DW_OP_const1u 32; DW_OP_shl; DW_OP_const1u 32; DW_OP_shra" for a long
        # holding an int): reading that many bits, with the same extension, gives the same number.
        v = place.value
        prefix = base if base in _SIZE_CASTS else ("s" if v.signed else ktype[0] if ktype[0] != "s" else "u")
        bits = v.bits
        ktype = f"{prefix}{bits}"
    fetch = _scalar_fetch(place, bits or None, opts)
    return FetchResult(fetch=fetch, type=ktype, bits=bits, **common)


def _scalar_fetch(place: Place, bits: Optional[int], opts: RenderOptions) -> str:
    if isinstance(place, Memory):
        return render_memory(place.address, opts, place.user)
    if isinstance(place, Register):
        return register_name(place.regno, opts.machine)
    if isinstance(place, Computed):
        v = place.value
        if not v.is_const and bits is not None and v.bits < bits:
            raise LocationError(f"only the low {v.bits} bits of the value are known, but its type has {bits}",
                                "computed")
        return render_value(v, opts)
    raise LocationError("a part of a register cannot be fetched with this type", "register")


# --- $params / $vars / listings -------------------------------------------------------------------


def _walk_vars(debuginfo: "DebugInfo", scope: DIE, address: int, tags: tuple[str, ...]):
    """perf's die_find_child walk: children in DIE order, descending into the DIEs whose code
    contains the address (lexical blocks and inline instances)."""
    for child in debuginfo.children(scope):
        if child.tag in tags:
            yield child
        if child.tag in ("DW_TAG_lexical_block", "DW_TAG_inlined_subroutine") and \
                debuginfo.die_contains(child, address):
            yield from _walk_vars(debuginfo, child, address, tags)


def _fetchable(debuginfo: "DebugInfo", var: DIE, address: int) -> bool:
    name = die_name(var)
    if not name:
        return False
    try:
        place = variable_place(debuginfo, var, address)
        _convert(debuginfo, var, place, _Plain(name), None, RenderOptions(machine=debuginfo.machine), True)
        return True
    except (ResolveError,):
        return False


@dataclass(frozen=True)
class _Plain:
    name: str
    accessors: tuple = ()


@guarded
def expand_variables(debuginfo: "DebugInfo", scope, address: int, params_only: bool = False) -> list[str]:
    """``$params`` (``params_only``) or ``$vars`` at ``address`` in ``scope`` (a function or inline
    instance): the names of the parameters (and locals) that can be fetched there, in perf's
    order (DIE order, nested scopes containing the address included), each name once."""
    scope = getattr(scope, "die", scope)
    tags = ("DW_TAG_formal_parameter",) if params_only else ("DW_TAG_formal_parameter", "DW_TAG_variable")
    names: list[str] = []
    for var in _walk_vars(debuginfo, scope, address, tags):
        name = die_name(var)
        if name and name not in names and _fetchable(debuginfo, var, address):
            names.append(name)
    return names


@guarded
def available_variables(debuginfo: "DebugInfo", scope, address: int, externs: bool = False
                        ) -> list[ListedVariable]:
    """The ``perf probe -V`` listing at one address: parameters and locals of ``scope`` that can
    be fetched there (``externs``: and the CU's global variables), sorted and deduplicated the
    way perf prints them (by ``"type\\tname"``)."""
    scope = getattr(scope, "die", scope)
    seen: dict[str, ListedVariable] = {}
    for var in _walk_vars(debuginfo, scope, address, ("DW_TAG_formal_parameter", "DW_TAG_variable")):
        name = die_name(var)
        if not name or not _fetchable(debuginfo, var, address):
            continue
        kind = "param" if var.tag == "DW_TAG_formal_parameter" else "local"
        item = ListedVariable(T.variable_type_name(var), name, kind)
        seen.setdefault(f"{item.c_type}\t{name}", item)
    if externs:
        for var in debuginfo.cu_variables(scope.cu):
            name = die_name(var)
            if not name or not _fetchable(debuginfo, var, address):
                continue
            item = ListedVariable(T.variable_type_name(var), name, "global")
            seen.setdefault(f"{item.c_type}\t{name}", item)
    return [seen[k] for k in sorted(seen)]


@guarded
def retval_type(debuginfo: "DebugInfo", function, x_types: bool = True) -> tuple[str, str]:
    """(kernel type, C type) of a function's return value, for ``$retval`` (("", "void") for
    void functions)."""
    die = getattr(function, "die", function)
    t = T.type_of(die)
    if t is None:
        return "", "void"
    return T.kernel_type(t, None, x_types), T.type_name(t) or "(unknown_type)"


__all__ = ["FetchResult", "ListedVariable", "VariableNotFound", "VariableUnavailable", "available_variables",
           "default_name", "expand_variables", "fetch_variable", "retval_type"]
