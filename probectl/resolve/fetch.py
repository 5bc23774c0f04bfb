"""C expressions → fetch arguments: the one member-chain walker, over DWARF and BTF alike.

perf's ``convert_variable_fields``/``convert_variable_type`` (probe-finder.c), written once against
a :class:`~probectl.debuginfo.typemodel.TypeModel` (DWARF type DIEs, or BTF type ids) and the one
place model of :mod:`probectl.debuginfo.place`. The rules are perf's: ``->`` and ``[i]`` on a pointer
add a dereference level, ``.`` on a pointer and ``->`` on a struct are errors, anonymous members
are looked through, union members are at offset 0. Types follow ``convert_variable_type``:
``s<bits>`` for signed C types, ``x<bits>`` otherwise (``u<bits>`` when the kernel lacks x-types),
``string`` for ``char`` arrays and pointers cast with ``:string`` (a pointer gets an extra
``+0(...)``), a bitfield ``b<width>@<shift>/<container>``; any other cast is used as given.

Where the value lives decides the rest: a member of a struct held in registers is a bit slice of
one register; a ``__user`` pointee (BTF) is read from user memory; a value known only to fewer
bits than its type (DWARF) is read at the width it is known to. What the kernel cannot read raises
:class:`~probectl.errors.LocationError`, which the callers turn into VariableUnavailable with the
place and lines they know of.
"""
from __future__ import annotations

from typing import Any, Optional

from .. import spec as S
from ..debuginfo.place import Computed, Deref, Memory, Pieces, Place, Reg, Register, Slice, Value
from ..debuginfo.typemodel import AGGREGATE_KIND, ARRAY_KIND, DECLARED_KIND, POINTER_KIND, Bitfield, TypeModel
from ..errors import LocationError, TypeMismatchError, ValueTooWideError
from .fetchresult import FetchResult, default_name
from .render import RenderOptions, register_name, render_memory, render_value

STRING_CASTS = ("string", "ustring")
SIZE_CASTS = ("u", "s", "x")


def fetch_chain(model: TypeModel, var_type, place: Place, variable: S.Variable, cast: Optional[S.TypeSpec],
                opts: RenderOptions, x_types: bool) -> FetchResult:
    """The fetch argument reading ``variable`` (a name and its member chain), whose own type is
    ``var_type`` and which lives at ``place``, with an optional cast.

    ``x_types``: the kernel has ``x<bits>`` types. Raises TypeMismatchError for chain and cast
    mistakes, LocationError for what probe events cannot read."""
    cur = var_type
    owner = variable.name
    bitfield: Optional[Bitfield] = None
    user = opts.user_access
    for acc in variable.accessors:
        real = model.strip(cur)
        if real is None:
            raise TypeMismatchError(f"'{owner}' has no type (void, or not described by {model.source})")
        if bitfield is not None:
            raise TypeMismatchError(f"'{owner}' is a bitfield, not a struct, union, pointer or array")
        kind = model.kind(real)
        if isinstance(acc, S.Index):
            if kind == ARRAY_KIND:
                element, size = model.element(real)
                if size is None:
                    raise TypeMismatchError(f"the elements of '{owner}' have no known size")
                if not isinstance(place, Memory):
                    raise LocationError(f"'{owner}' is an array that is not in memory", "register")
                place = Memory(place.address.plus(acc.index * size), place.user)
                cur = element
            elif kind == POINTER_KIND:
                pointee = model.pointee(real)
                size = model.byte_size(pointee) if pointee is not None else None
                if size is None:
                    pointee_name = model.type_name(pointee) if pointee is not None else None
                    raise TypeMismatchError(f"'{owner}' points to {pointee_name or 'void'}, which has no size to "
                                            f"index by", hint="cast it, or use a member chain")
                user = user or model.user_memory(pointee)
                place = Memory(value_of(place, owner).plus(acc.index * size), user)
                cur = pointee
            else:
                raise TypeMismatchError(f"'{owner}' ({model.type_name(cur)}) is not a pointer nor an array, so it "
                                        f"cannot be indexed")
            owner = f"{owner}[{acc.index}]"
            continue
        if kind == POINTER_KIND:
            if not acc.arrow:
                raise TypeMismatchError(f"{acc.name} must be referred by '->': '{owner}' is a pointer",
                                        hint=f"write {owner}->{acc.name}")
            pointee = model.pointee(real)
            agg = model.strip(pointee)
            agg_kind = model.kind(agg) if agg is not None else None
            if agg_kind == DECLARED_KIND:
                raise TypeMismatchError(f"'{owner}' points to {model.type_name(agg)}, which {model.source} only "
                                        f"declares (its members are not described)",
                                        hint="use a vmlinux with DWARF")
            if agg_kind != AGGREGATE_KIND:
                raise TypeMismatchError(f"'{owner}' is not a pointer to a struct or union ({model.type_name(cur)})")
            user = user or model.user_memory(pointee)
            place = Memory(value_of(place, owner), user)
        elif kind == AGGREGATE_KIND:
            if acc.arrow:
                raise TypeMismatchError(f"{acc.name} must be referred by '.': '{owner}' is not a pointer",
                                        hint=f"write {owner}.{acc.name}")
            agg = real
        else:
            raise TypeMismatchError(f"'{owner}' ({model.type_name(cur)}) is not a struct or union")
        member = model.member(agg, acc.name)
        if member is None:
            raise model.no_member_error(owner, agg, acc.name)
        place = member_place(place, member.offset, model.byte_size(agg), owner)
        bitfield = member.bitfield
        cur = member.type
        owner = f"{owner}{'->' if acc.arrow else '.'}{acc.name}"
    return _final(model, place, cur, bitfield, variable, cast, owner, opts, x_types)


def value_of(place: Place, owner: str) -> Value:
    """The value of the pointer-sized object at ``place`` (to dereference it)."""
    if isinstance(place, Memory):
        return Value(Deref(place.address, user=place.user))
    if isinstance(place, Register):
        return Value(Reg(place.regno))
    if isinstance(place, Computed):
        if place.value.bits < 64 and not place.value.is_const:
            raise LocationError(f"'{owner}' is a truncated value and cannot be dereferenced", "computed")
        return place.value
    if isinstance(place, Pieces):
        if len(place.values) != 1:
            raise LocationError(f"'{owner}' is held in {len(place.values)} registers, not a pointer", "register")
        return place.values[0]
    if place.bit_offset == 0:  # a pointer at the start of a register-held struct is the whole register
        return place.value
    raise LocationError(f"'{owner}' is part of a register and cannot be dereferenced", "computed")


def member_place(place: Place, offset: int, agg_size: Optional[int], owner: str) -> Place:
    """Where the member ``offset`` bytes into the aggregate at ``place`` (of ``agg_size`` bytes) is."""
    if isinstance(place, Memory):
        return Memory(place.address.plus(offset), place.user)
    if isinstance(place, Slice):
        return Slice(place.value, place.bit_offset + offset * 8)
    if isinstance(place, Pieces):
        index, within = divmod(offset, 8)
        if index >= len(place.values):
            raise LocationError(f"a member of '{owner}' lies beyond the registers that hold it", "register")
        return Slice(place.values[index], within * 8)
    value = place.value
    if agg_size is None or agg_size > 8:
        raise LocationError(f"'{owner}' is a structure held in registers, larger than one register",
                            "register", hint="probe a line where it is in memory")
    return Slice(value, offset * 8)


def _final(model: TypeModel, place: Place, cur, bitfield: Optional[Bitfield], variable: S.Variable,
           cast: Optional[S.TypeSpec], owner: str, opts: RenderOptions, x_types: bool) -> FetchResult:
    real = model.strip(cur)
    c_type = model.type_name(cur) or "(unknown_type)"
    size = model.byte_size(cur)
    common: dict[str, Any] = dict(default_name=default_name(variable, cast), c_type=c_type, signed=model.is_signed(cur),
                  enumerators=tuple(model.enumerators(cur)), size=size, variable=variable.name)
    base = cast.base if cast is not None else None
    if base in STRING_CASTS:
        kind = model.kind(real) if real is not None else None
        if kind not in (POINTER_KIND, ARRAY_KIND):
            raise TypeMismatchError(f"cannot fetch '{owner}' as a string: it is {c_type}, not a pointer nor an array",
                                    hint="':string' needs a char array or a char pointer")
        element = model.pointee(real) if kind == POINTER_KIND else model.element(real)[0]
        if not model.char_element(element):
            raise TypeMismatchError(f"cannot fetch '{owner}' as a string: it is {c_type}, not (unsigned) char * "
                                    f"or a char array")
        string_type = base
        if kind == POINTER_KIND:
            fetch = render_memory(value_of(place, owner), opts, opts.user_access)
            # A __user char pointer: the string is in user memory (``ustring``); with @user every
            # dereference already says so (``+u0(...)``).
            if base == "string" and not opts.user_access and model.user_memory(element):
                string_type = "ustring"
        else:
            if not isinstance(place, Memory):
                raise LocationError(f"'{owner}' is an array that is not in memory", "register")
            fetch = render_memory(place.address, opts, place.user)
        return FetchResult(fetch=fetch, type=string_type, bits=0, **common)
    if cast is not None and base is not None and (base not in SIZE_CASTS or cast.bits):
        return FetchResult(fetch=_scalar_fetch(place, None, opts, owner), type=cast.text,
                           bits=cast.bits or 0, **common)
    if bitfield is not None:
        if isinstance(place, Slice):
            bitfield = Bitfield(0, place.bit_offset + bitfield.shift, bitfield.bits, 64, bitfield.signed)
            if bitfield.shift + bitfield.bits > 64:
                raise LocationError(f"'{owner}' straddles two registers", "register")
            fetch = render_value(place.value, opts)
        else:
            fetch = _scalar_fetch(place, None, opts, owner)
        return FetchResult(fetch=fetch, type=bitfield.fetch_type, bits=bitfield.bits, **common)
    if isinstance(place, Slice):
        if size is None or size > 8 or place.bit_offset + size * 8 > 64:
            raise LocationError(f"'{owner}' is part of a register and has no fetchable size", "register")
        return FetchResult(fetch=render_value(place.value, opts), type=f"b{size * 8}@{place.bit_offset}/64",
                           bits=size * 8, **common)
    if (real is not None and model.kind(real) == AGGREGATE_KIND and size is not None and size > 8
            and not isinstance(place, Pieces)):  # (in registers: the error says which ones)
        # perf cuts it to its first 64 bits with only an info message ("exceeds max-bitwidth"): the
        # event would show 8 bytes of a larger object as if they were the value.
        raise ValueTooWideError(f"'{owner}' is a {c_type} of {size} bytes; a probe argument holds at most 8",
                                hint=f"fetch a member of it ({owner}.MEMBER), or cast it to :x64 to read its first "
                                     f"8 bytes")
    ktype = model.kernel_type(cur, base if base in SIZE_CASTS else None, x_types)
    bits = int(ktype[1:]) if ktype else 0
    if isinstance(place, Computed) and not place.value.is_const and ktype and place.value.bits < bits:
        # gcc describes a value known to fit in fewer bits as a truncated register (for example
        # "DW_OP_breg0 0; DW_OP_const1u 32; DW_OP_shl; DW_OP_const1u 32; DW_OP_shra" for a long
        # holding an int): reading that many bits, with the same extension, gives the same number.
        v = place.value
        prefix = base if base in SIZE_CASTS else ("s" if v.signed else ktype[0] if ktype[0] != "s" else "u")
        bits = v.bits
        ktype = f"{prefix}{bits}"
    return FetchResult(fetch=_scalar_fetch(place, bits or None, opts, owner), type=ktype, bits=bits, **common)


def _scalar_fetch(place: Place, bits: Optional[int], opts: RenderOptions, owner: str) -> str:
    if isinstance(place, Memory):
        return render_memory(place.address, opts, place.user)
    if isinstance(place, Register):
        return register_name(place.regno, opts.arch)
    if isinstance(place, Computed):
        v = place.value
        if not v.is_const and bits is not None and v.bits < bits:
            raise LocationError(f"only the low {v.bits} bits of the value are known, but its type has {bits}",
                                "computed")
        return render_value(v, opts)
    if isinstance(place, Pieces):
        if len(place.values) != 1:
            texts = ", ".join(render_value(v, opts) for v in place.values)
            raise LocationError(f"'{owner}' is held in {len(place.values)} registers ({texts}), which one argument "
                                f"cannot read", "register", hint="fetch its members, or each register")
        return render_value(place.values[0], opts)
    raise LocationError("a part of a register cannot be fetched with this type", "register")
