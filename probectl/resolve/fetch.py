"""C expressions → fetch arguments: the one member-chain walker, over DWARF and BTF alike.

perf's ``convert_variable_fields``/``convert_variable_type`` (probe-finder.c), written once against
a :class:`~probectl.debuginfo.typemodel.TypeModel` (DWARF type DIEs, or BTF type ids) and the one
place model of :mod:`probectl.debuginfo.place`. The rules are perf's: ``->`` and ``[i]`` on a pointer
add a dereference level, ``.`` on a pointer and ``->`` on a struct are errors, anonymous members
are looked through, union members are at offset 0. Types follow ``convert_variable_type``:
``s<bits>`` for signed C types, ``x<bits>`` otherwise (``u<bits>`` when the kernel lacks x-types),
``string`` for ``char`` arrays and pointers cast with ``:string`` (a pointer gets an extra
``+0(...)``), a bitfield ``b<width>@<shift>/<container>``; any other cast is used as given.

Beyond perf: a C++ reference is read as the object it refers to (``name.size`` of a
``const std::string &name``), a Rust reference or Go pointer takes '.' as its language does
(``it.id`` of ``it: &Item``), and a language's string that is a pointer and a length (Go's
``string``, Rust's ``&str`` and ``String``, libstdc++'s ``std::string``: :func:`counted_string`, by
the members DWARF gives, never by fixed offsets) is fetched as its text, by default or with
``:string``, with its length read beside it to cut the text where the string ends.

Where the value lives decides the rest: a member of a struct held in registers is a bit slice of
one register; a ``__user`` pointee (BTF) is read from user memory; a value known only to fewer
bits than its type (DWARF) is read at the width it is known to. What the kernel cannot read raises
:class:`~probectl.errors.LocationError`, which the callers turn into VariableUnavailable with the
place and lines they know of.
"""
from __future__ import annotations

import re
from typing import Any, Optional

from .. import spec as S
from ..dataclass import dataclass, replace
from ..debuginfo.place import Computed, Deref, Memory, Pieces, Place, Reg, Register, Slice, Value
from ..debuginfo.typemodel import (AGGREGATE_KIND, ARRAY_KIND, DECLARED_KIND, POINTER_KIND, REFERENCE_KIND, SCALAR_KIND,
                                   Bitfield, TypeModel, Variants)
from ..errors import LocationError, TypeMismatchError, ValueTooWideError
from ..spec.tree import MAX_PROBE_ARGS
from .fetchresult import FetchResult, StringPart, default_name
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
        place, cur = _referred(model, place, cur, owner, user)
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
            if not acc.arrow and not model.reads_through(real):
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
            shape = model.variants(agg)
            if shape is not None:
                names = ", ".join(v.name for v in shape.variants)
                raise TypeMismatchError(f"'{owner}' is an enum ({model.type_name(agg)}: {names}), which has no "
                                        f"member '{acc.name}'",
                                        hint=f"fetch '{owner}' itself: it is shown by its variant and the value "
                                             f"it holds")
            if acc.name == "size" and (cxx_vector(model, agg) or container_count(model, agg)):
                raise TypeMismatchError(f"'{owner}' ({model.type_name(agg)}) has no member 'size'",
                                        hint=f"write {owner}{'->' if acc.arrow else '.'}size() for its size")
            raise model.no_member_error(owner, agg, acc.name)
        place = member_place(place, member.offset, model.byte_size(agg), owner)
        bitfield = member.bitfield
        cur = member.type
        owner = f"{owner}{'->' if acc.arrow else '.'}{acc.name}"
    if variable.method is not None:
        return _size_fetch(model, place, cur, bitfield, variable, cast, owner, opts, x_types, user)
    if bitfield is None:
        place, cur = _referred(model, place, cur, owner, user)
        place, cur = _through_language_pointer(model, place, cur, owner, user)
    return _final(model, place, cur, bitfield, variable, cast, owner, opts, x_types)


def _through_language_pointer(model: TypeModel, place: Place, cur, owner: str, user: bool) -> tuple[Place, Any]:
    """A Rust reference or Go pointer to a string, slice or enum (``name: &String``, ``values:
    &Vec<u32>``, ``s: &Shape``) is read as what it points to, as that language prints it; anything else as it is."""
    real = model.strip(cur)
    if real is None or model.kind(real) != POINTER_KIND or not model.reads_through(real):
        return place, cur
    pointee = model.strip(model.pointee(real))
    if pointee is None or model.kind(pointee) != AGGREGATE_KIND or (
            counted_string(model, pointee) is None and counted_slice(model, pointee) is None
            and model.variants(pointee) is None):
        return place, cur
    return Memory(value_of(place, owner), user), pointee


def _referred(model: TypeModel, place: Place, cur, owner: str, user: bool) -> tuple[Place, Any]:
    """The object a C++ reference at ``place`` refers to (its place and type); anything else as it is."""
    real = model.strip(cur)
    if real is None or model.kind(real) != REFERENCE_KIND:
        return place, cur
    return Memory(value_of(place, owner), user), model.pointee(real)


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
    shape = model.variants(real) if real is not None and cast is None and bitfield is None else None
    if shape is not None and opts.immediates:
        return _enum_fetch(model, place, real, shape, owner, opts, x_types, common)
    counted = counted_string(model, real) if real is not None and model.kind(real) == AGGREGATE_KIND else None
    if counted is not None and (base is None or base in STRING_CASTS):
        return _counted_string_fetch(model, place, real, counted, owner, opts, common)
    vector = cxx_vector(model, real) if real is not None and model.kind(real) == AGGREGATE_KIND else None
    if vector is not None:
        return _vector_fetch(model, place, real, vector, cast, owner, opts, x_types, common)
    slice_ = counted_slice(model, real) if real is not None and model.kind(real) == AGGREGATE_KIND else None
    if slice_ is not None and (cast is None or cast.array is not None):
        return _counted_slice_fetch(model, place, real, slice_, cast, owner, opts, x_types, common)
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
        ktype = model.kernel_type(cur, base if base in SIZE_CASTS else None, x_types) if not place.bit_offset else None
        if ktype and int(ktype[1:]) == size * 8:
            # (the register's low bytes: a register fetch of a type takes them, with the type's sign, as
            # perf writes %di:s32 for an int; a bitfield type would show a signed member unsigned)
            return FetchResult(fetch=render_value(place.value, opts), type=ktype, bits=size * 8, **common)
        return FetchResult(fetch=render_value(place.value, opts), type=f"b{size * 8}@{place.bit_offset}/64",
                           bits=size * 8, **common)
    if (real is not None and model.kind(real) == AGGREGATE_KIND and size is not None and size > 8
            and not isinstance(place, Pieces)):  # (in registers: the error says which ones)
        # perf cuts it to its first 64 bits with only an info message ("exceeds max-bitwidth"): the
        # event would show 8 bytes of a larger object as if they were the value.
        raise ValueTooWideError(f"'{owner}' is a {c_type} of {size} bytes; a probe argument holds at most 8",
                                hint=f"read its size ({owner}.size())" if container_count(model, real) is not None
                                else f"fetch a member of it ({owner}.MEMBER), or cast it to :x64 to read its first "
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


# -- strings that are a pointer and a length ---------------------------------------------------------


@dataclass(frozen=True)
class CountedString:
    """Where a string type keeps its text: the member paths of the pointer to its bytes and of its
    length. ``nul_terminated``: a NUL always follows the text (a std::string's); a Go or Rust
    string's bytes run on into whatever follows them (a substring: the rest of its string; a literal:
    the program's other strings, with no NUL for many kilobytes)."""

    pointer: tuple[str, ...]
    length: tuple[str, ...]
    nul_terminated: bool = False


# The first bytes of a counted string without a NUL after it, read as an array (the kernel's
# MAX_ARRAY_LEN): its text where the string fetch finds no NUL within its 4 KiB.
HEAD_BYTES = 64
# The elements of a slice read by default (a cast such as :s64[64] reads up to the kernel's 64).
SLICE_ELEMENTS = 16


# The string of a Go generic function's instantiation for strings (its "shape": go.shape.string_0 in
# Go 1.19, go.shape.string later), the same {str, len} as a string.
GO_SHAPE_STRING = re.compile(r"go\.shape\.string(_\d+)?")


def counted_string(model: TypeModel, agg) -> Optional[CountedString]:
    """The counted-string shape of the aggregate type ``agg``, known by its name and members: Go's
    ``string`` {str, len} (and a generic's string shape), Rust's ``&str`` {data_ptr, length} and ``String`` {vec: Vec<u8> {buf: ...,
    len}}, libstdc++'s ``basic_string<char>`` {_M_dataplus._M_p, _M_string_length} (by its members:
    it has several names, ``std::string`` a typedef of ``std::__cxx11::basic_string<char, ...>``).
    The pointer must point to bytes and the length be an integer, else None."""
    name = model.type_name(agg) or ""
    for prefix in ("struct ", "class "):
        name = name.removeprefix(prefix)
    shapes: list[tuple[tuple[str, ...], tuple[str, ...], bool]] = [
        (("_M_dataplus", "_M_p"), ("_M_string_length",), True)]
    if name == "string" or GO_SHAPE_STRING.fullmatch(name):
        shapes.append((("str",), ("len",), False))
    elif name in ("&str", "&mut str"):
        shapes.append((("data_ptr",), ("length",), False))
    elif name == "String" or name.endswith("::String"):
        # (the path to a Vec's pointer changed between rustc versions: buf.ptr.pointer, then
        # buf.inner.ptr.pointer.pointer; the first byte pointer inside buf is it)
        vec = _member_type(model, agg, ("vec",))
        found = _pointer_path(model, vec, ("vec",), 8, byte=True) if vec is not None else None
        if found is not None:
            shapes.append((found, ("vec", "len"), False))
    for pointer, length, nul_terminated in shapes:
        ptr, size = _member_type(model, agg, pointer), _member_type(model, agg, length)
        if ptr is not None and size is not None and _is_byte_pointer(model, ptr) \
                and model.kind(size) == SCALAR_KIND and model.byte_size(size) in (4, 8):
            return CountedString(pointer, length, nul_terminated)
    return None


def _member_type(model: TypeModel, agg, path: tuple[str, ...]):
    """The stripped type at the end of a member path of ``agg`` (members of members), or None."""
    t = agg
    for name in path:
        if t is None or model.kind(t) != AGGREGATE_KIND:
            return None
        member = model.member(t, name)
        t = model.strip(member.type) if member is not None else None
    return t


def _is_byte_pointer(model: TypeModel, t) -> bool:
    return model.kind(t) == POINTER_KIND and model.byte_size(model.pointee(t)) == 1


def _pointer_path(model: TypeModel, agg, path: tuple[str, ...], depth: int, byte: bool) -> Optional[tuple[str, ...]]:
    """The member path from ``agg`` (reached by ``path``) to its first pointer (``byte``: to bytes),
    looked for through members that are aggregates held in place (not through pointers), ``depth``
    deep."""
    if depth == 0 or agg is None or model.kind(agg) != AGGREGATE_KIND:
        return None
    for name in model.member_names(agg):
        member = model.member(agg, name)
        t = model.strip(member.type) if member is not None else None
        if t is None:
            continue
        if _is_byte_pointer(model, t) if byte else model.kind(t) == POINTER_KIND:
            return path + (name,)
        found = _pointer_path(model, t, path + (name,), depth - 1, byte)
        if found is not None:
            return found
    return None


def _length_part(model: TypeModel, length_place: Any, length_type: Any, opts: RenderOptions,
                 owner: str) -> StringPart:
    """The hidden ``length`` part of a counted string or slice: its length member read where it is
    (a whole register, or memory)."""
    size = model.byte_size(length_type) or 8
    if isinstance(length_place, Slice):
        if length_place.bit_offset != 0 or size != 8:
            raise LocationError(f"the length of '{owner}' is part of a register", "register")
        length = render_value(length_place.value, opts)
    else:
        length = _scalar_fetch(length_place, size * 8, opts, owner)
    return StringPart("length", length, f"u{size * 8}")


def _counted_string_fetch(model: TypeModel, place: Place, agg, counted: CountedString, owner: str,
                          opts: RenderOptions, common: dict[str, Any]) -> FetchResult:
    """The text of a counted string at ``place``: its bytes read as a kernel ``string`` from its
    pointer, its length read beside it, and its first bytes as an array when no NUL may follow it."""
    pointer_place, _ = _member_path(model, place, agg, counted.pointer, owner)
    length_place, length_type = _member_path(model, place, agg, counted.length, owner)
    fetch = render_memory(value_of(pointer_place, owner), opts, opts.user_access)
    parts = [_length_part(model, length_place, length_type, opts, owner)]
    if not counted.nul_terminated:
        # (u8, not char: trace-cmd prints a char array's '%c's as '>c<')
        parts.append(StringPart("head", fetch, f"u8[{HEAD_BYTES}]"))
    return FetchResult(fetch=fetch, type="string", bits=0, parts=tuple(parts), **common)


def _member_path(model: TypeModel, place: Place, agg, path: tuple[str, ...], owner: str) -> tuple[Place, Any]:
    """The place and stripped type at the end of a member path of the aggregate ``agg`` at ``place``."""
    t = agg
    for name in path:
        member = model.member(t, name)
        assert member is not None  # (counted_string found the path)
        place = member_place(place, member.offset, model.byte_size(t), owner)
        t = model.strip(member.type)
    return place, t


# -- enums shown by variant --------------------------------------------------------------------------

# An enum is shown by variant: each variant is one more argument of its event (a marker byte, or its
# scalars), so an enum takes as many as the kernel's arguments of an event (MAX_PROBE_ARGS, the
# kernel's MAX_TRACE_ARGS, the enum's own included), and their names must fit an argument's 32
# characters beside the enum's: NAME__v<value>_<Variant>, NAME__m<value>_<Variant>__<member>.
MAX_VARIANT_NAME = 20
MAX_MEMBER_PATH = 12
_PART_WORD = re.compile(r"[A-Za-z0-9]+(?:_[A-Za-z0-9]+)*")


def _enum_fetch(model: TypeModel, place: Place, agg, shape: Variants, owner: str, opts: RenderOptions,
                x_types: bool, common: dict[str, Any]) -> FetchResult:
    """An enum (``Option<u32>``, a C-like Rust enum, ``Shape::Rect { w, h }``) read as its
    discriminant, with a hidden part per variant naming it, or holding its scalar, or one per scalar
    it holds (:mod:`probectl.formats`): the decoders show ``Some(5)``, ``Rect{w:3 h:4}``. An enum
    whose variants take more arguments than an event has, or whose names do not fit an argument's,
    is refused, with the cast that reads its discriminant as a number."""
    variants = shape.variants
    agg_size = model.byte_size(agg)
    tag_size = model.byte_size(shape.tag_type)
    hint = (f"fetch its discriminant as a number: {owner}:u{tag_size * 8}" if shape.offset == 0 and tag_size in (
        1, 2, 4, 8) else f"read it as a number: {owner}:u64 is its first 8 bytes (its discriminant is at byte "
                          f"{shape.offset})")
    what = f"'{owner}' ({model.type_name(agg)})"
    names = {v.name: _payload_names(model, v.payload[1]) for v in variants if v.payload is not None}
    arguments = 1 + sum(len(v.members) or 1 for v in variants) + sum(len(n) for n in names.values())
    if arguments > MAX_PROBE_ARGS:
        raise TypeMismatchError(f"{what} is an enum of {len(variants)} variants, which take {arguments} arguments "
                                f"to show by variant; an event has at most {MAX_PROBE_ARGS}", hint=hint)
    for v in variants:
        multi = bool(v.members)
        for name in [v.name] + [n for _, n in names.get(v.name, ())]:
            if len(name) > MAX_VARIANT_NAME or not name.isascii() or not (
                    _PART_WORD.fullmatch(name) if multi else name.replace("_", "a").isalnum()):
                raise TypeMismatchError(f"{what} has a variant named {name!r}, which does not fit a probe "
                                        f"argument's name (at most {MAX_VARIANT_NAME} letters, digits and single "
                                        f"'_')", hint=hint)
        for path, _offset, _type in v.members:
            text = "__".join(path)
            if len(text) > MAX_MEMBER_PATH or not all(_PART_WORD.fullmatch(p) for p in path):
                raise TypeMismatchError(f"{what}: variant {v.name} holds {'.'.join(path)}, whose name does not fit "
                                        f"a probe argument's (at most {MAX_MEMBER_PATH} letters, digits and "
                                        f"single '_')", hint=hint)
    if tag_size not in (1, 2, 4, 8):
        raise TypeMismatchError(f"{what} has a discriminant of {tag_size} bytes, which no probe argument reads",
                                hint=hint)
    tag_place = member_place(place, shape.offset, agg_size, owner) if model.kind(agg) == AGGREGATE_KIND else place
    fetch, ktype = _scalar_part(model, tag_place, shape.tag_type, "u", opts, owner)
    mask = (1 << (8 * tag_size)) - 1

    def scalar(offset: int, t: Any, named: bool = False) -> tuple[str, str]:
        # (a C-like enum's names are looked up by unsigned values)
        prefix = _part_prefix(model, t, x_types, signed=not named)
        return _scalar_part(model, member_place(place, offset, agg_size, owner), t, prefix, opts, owner)

    parts = []
    for v in variants:
        value = v.value & mask if v.value is not None else None
        if v.payload is not None:
            parts.append(StringPart("payload", *scalar(*v.payload, bool(names[v.name])), v.name, value))
            parts.extend(StringPart("name", "\\0", "u8", name, number) for number, name in names[v.name])
        elif v.members:
            parts.extend(StringPart("member", *scalar(offset, t), v.name, value, "__".join(path))
                         for path, offset, t in v.members)
        else:
            parts.append(StringPart("variant", "\\0", "u8", v.name, value))
    common = dict(common, signed=False)
    return FetchResult(fetch=fetch, type=ktype, bits=tag_size * 8, parts=tuple(parts), **common)


def _payload_names(model: TypeModel, t: Any) -> tuple[tuple[int, str], ...]:
    """(value, name) of each variant of the C-like Rust enum ``t`` a variant holds (``Some(Green)``),
    its values as its bytes read unsigned; () for any other payload."""
    real = model.strip(t)
    shape = model.variants(real) if real is not None and model.kind(real) != AGGREGATE_KIND else None
    if shape is None or any(v.value is None or v.payload is not None or v.members for v in shape.variants):
        return ()
    mask = (1 << (8 * (model.byte_size(real) or 8))) - 1
    return tuple((v.value & mask, v.name) for v in shape.variants if v.value is not None)


def _part_prefix(model: TypeModel, t, x_types: bool, signed: bool = True) -> str:
    """The kernel type's letter of a hidden part holding a scalar of type ``t``: a pointer's ``x``
    (``u`` without hex types), else ``s`` or ``u`` by its sign (``signed`` False: ``u`` always)."""
    real = model.strip(t)
    if real is not None and model.kind(real) == POINTER_KIND:
        return "x" if x_types else "u"
    return "s" if signed and model.is_signed(t) else "u"


def _scalar_part(model: TypeModel, place: Place, t, prefix: str, opts: RenderOptions, owner: str) -> tuple[str, str]:
    """The fetch and kernel type (``u32``, ``x64``: ``prefix`` and the size) of the scalar of type
    ``t`` at ``place``, a part of a larger value: memory, a register, or bytes of one."""
    size = model.byte_size(t) or 8
    if isinstance(place, Slice):
        if place.bit_offset + size * 8 > 64:
            raise LocationError(f"a part of '{owner}' straddles two registers", "register")
        if place.bit_offset or size != 8:
            return render_value(place.value, opts), f"b{size * 8}@{place.bit_offset}/64"
        return render_value(place.value, opts), f"{prefix}64"
    return _scalar_fetch(place, size * 8, opts, owner), f"{prefix}{size * 8}"


# -- slices: a pointer to elements and a length ---------------------------------------------------------


def counted_slice(model: TypeModel, agg) -> Optional[tuple[tuple[str, ...], tuple[str, ...]]]:
    """The member paths of the element pointer and of the length of a slice type: Go's ``[]T``
    {array, len, cap}, Rust's ``&[T]`` {data_ptr, length} and ``Vec<T>`` {buf: ..., len}; None for
    another type or elements that are not integers of 1, 2, 4 or 8 bytes."""
    name = model.type_name(agg) or ""
    for prefix in ("struct ", "class "):
        name = name.removeprefix(prefix)
    shape: tuple[tuple[str, ...], tuple[str, ...]]
    if name.startswith("[]"):
        shape = (("array",), ("len",))
    elif name.startswith(("&[", "&mut [")):
        shape = (("data_ptr",), ("length",))
    elif name.startswith(("Vec<", "alloc::vec::Vec<")):
        # (Rust's Vec: its pointer somewhere in buf, as for a String's, its length len)
        found = _pointer_path(model, agg, (), 8, byte=False)
        if found is None:
            return None
        shape = (found, ("len",))
    else:
        return None
    ptr, size = _member_type(model, agg, shape[0]), _member_type(model, agg, shape[1])
    if ptr is None or size is None or model.kind(ptr) != POINTER_KIND or model.kind(size) != SCALAR_KIND:
        return None
    element = model.strip(model.pointee(ptr))
    if element is None or (model.byte_size(element) not in (1, 2, 4, 8) or model.kind(element) != SCALAR_KIND) \
            and not _element_members(model, element):
        return None
    return shape


# A slice of structs: the scalar members of its first elements, each an argument of its own (those of
# a struct member too, NAME__e<i>_<member>__<inner>).
STRUCT_ELEMENTS = 4
MAX_ELEMENT_MEMBERS = 4
MAX_MEMBER_NAME = 16


def _element_members(model: TypeModel, element) -> list[tuple[str, int, Any]]:
    """(name, offset, type) of the scalar members of a struct element (integers and pointers of 1, 2,
    4 or 8 bytes, not bitfields), and of its members that are structs of such scalars (named
    ``member__inner``), the first ``MAX_ELEMENT_MEMBERS``; [] when it is no struct, has none, or a
    member's name is too long for an argument's."""
    def members(agg) -> list[tuple[str, int, Any, Any]]:
        """(name, offset, type, stripped type) of the members of ``agg``, the stripped type None for a
        bitfield's or a member of no type."""
        out = []
        for name in model.member_names(agg):
            member = model.member(agg, name)
            if member is not None:
                t = model.strip(member.type) if member.bitfield is None else None
                out.append((name, member.offset, member.type, t))
        return out

    def fits(name: str) -> bool:
        return len(name) <= MAX_MEMBER_NAME and name.isascii() and name.replace("_", "a").isalnum()

    def scalar(t) -> bool:
        return t is not None and model.kind(t) in (SCALAR_KIND, POINTER_KIND) and model.byte_size(t) in (1, 2, 4, 8)

    if model.kind(element) != AGGREGATE_KIND or not model.byte_size(element):
        return []
    out: list[tuple[str, int, Any]] = []
    for name, offset, declared, t in members(element):
        if t is None:
            continue
        if model.kind(t) in (SCALAR_KIND, POINTER_KIND):
            if not scalar(t) or not fits(name):
                return []
            out.append((name, offset, declared))
        elif model.kind(t) == AGGREGATE_KIND and _PART_WORD.fullmatch(name):
            inner = members(t)
            if inner and all(scalar(u) and _PART_WORD.fullmatch(n) for n, _, _, u in inner) \
                    and all(fits(f"{name}__{n}") for n, _, _, _ in inner):
                out.extend((f"{name}__{n}", offset + o, d) for n, o, d, _ in inner)
    return out[:MAX_ELEMENT_MEMBERS]


def _counted_slice_fetch(model: TypeModel, place: Place, agg, shape, cast: Optional[S.TypeSpec], owner: str,
                         opts: RenderOptions, x_types: bool, common: dict[str, Any]) -> FetchResult:
    """A slice's first elements as a kernel array (``SLICE_ELEMENTS``, or as many as a cast such as
    ``:s64[32]`` says), with its length beside it to cut the array where the slice ends."""
    pointer_place, pointer_type = _member_path(model, place, agg, shape[0], owner)
    length_place, length_type = _member_path(model, place, agg, shape[1], owner)
    element = model.pointee(pointer_type)
    members = _element_members(model, model.strip(element))
    if members:
        return _struct_slice_fetch(model, pointer_place, length_place, length_type, model.strip(element), members,
                                   cast, owner, opts, x_types, common)
    if cast is not None and cast.base not in SIZE_CASTS:
        raise TypeMismatchError(f"'{owner}' is a slice of {model.type_name(element)}: cast it to an integer "
                                f"array (:s64[{SLICE_ELEMENTS}])")
    count = cast.array if cast is not None and cast.array else SLICE_ELEMENTS
    etype = (f"{cast.base}{cast.bits}" if cast is not None and cast.bits
             else model.kernel_type(element, cast.base if cast is not None else None, x_types))
    fetch = render_memory(value_of(pointer_place, owner), opts, opts.user_access)
    return FetchResult(fetch=fetch, type=f"{etype}[{count}]", bits=0,
                       parts=(_length_part(model, length_place, length_type, opts, owner),), **common)


def _struct_slice_fetch(model: TypeModel, pointer_place: Place, length_place: Place, length_type, element,
                        members: list[tuple[str, int, Any]], cast: Optional[S.TypeSpec], owner: str,
                        opts: RenderOptions, x_types: bool, common: dict[str, Any]) -> FetchResult:
    """A slice of structs: its length, and a hidden ``element`` part per scalar member of each of its
    first ``STRUCT_ELEMENTS`` elements (:mod:`probectl.formats`), which the decoders show as the
    elements within its length: ``[{id:101 price:5} {id:102 price:5}]``."""
    if cast is not None:
        raise TypeMismatchError(f"'{owner}' is a slice of {model.type_name(element)}: it is read as its first "
                                f"{STRUCT_ELEMENTS} elements' members, with no cast",
                                hint=f"or fetch one element's member ({owner}.MEMBER is not one: index its array)")
    length = _length_part(model, length_place, length_type, opts, owner)
    parts = _element_parts(model, value_of(pointer_place, owner), element, members, opts, x_types)
    common = dict(common, signed=False)
    return FetchResult(fetch=length.fetch, type=length.type, bits=int(length.type[1:]), parts=tuple(parts),
                       **common)


def _element_parts(model: TypeModel, base: Value, element, members: list[tuple[str, int, Any]], opts: RenderOptions,
                   x_types: bool) -> list[StringPart]:
    """The hidden ``element`` parts of an array of structs at ``base``: each scalar member of each of
    its first ``STRUCT_ELEMENTS`` elements."""
    size = model.byte_size(element) or 0
    parts = []
    for i in range(STRUCT_ELEMENTS):
        for name, offset, member_type in members:
            prefix = _part_prefix(model, member_type, x_types)
            bits = (model.byte_size(member_type) or 8) * 8
            fetch = render_memory(base.plus(i * size + offset), opts, opts.user_access)
            parts.append(StringPart("element", fetch, f"{prefix}{bits}", name, i))
    return parts


# -- C++ containers: a std::vector's elements, a container's size() --------------------------------------


@dataclass(frozen=True)
class CxxVector:
    """Where a libstdc++ ``std::vector<T>`` keeps its elements: the member paths of its pointers to the
    first element and past the last (``_M_impl._M_start`` and ``_M_impl._M_finish``, members of its base
    classes), and its element type and size."""

    begin: tuple[str, ...]
    end: tuple[str, ...]
    element: Any
    element_size: int


VECTOR_POINTERS = (("_M_impl", "_M_start"), ("_M_impl", "_M_finish"))
# The member that counts the elements of libstdc++'s other containers: std::map, std::set and their
# multi- forms (a red-black tree), std::unordered_map and std::unordered_set (a hash table), std::list
# (a node holding the count, since C++11), std::string.
COUNT_MEMBERS = (("_M_t", "_M_impl", "_M_node_count"), ("_M_h", "_M_element_count"), ("_M_impl", "_M_node", "_M_size"),
                 ("_M_string_length",))
MAX_VECTOR_CAST = 64  # (the kernel's MAX_ARRAY_LEN: the most elements a cast reads)
SIZED_CONTAINERS = ("libstdc++'s std::vector (from its two pointers), std::string, std::map, std::multimap, std::set, "
                    "std::multiset, std::unordered_map, std::unordered_set and std::list (their counts)")


def cxx_vector(model: TypeModel, agg) -> Optional[CxxVector]:
    """The vector shape of the aggregate type ``agg``, known by its members in the debug information
    (never by fixed offsets): two pointers to elements of one known size. None for another type, and
    for ``std::vector<bool>``, whose "pointers" are bit iterators."""
    begin, end = (_member_type(model, agg, path) for path in VECTOR_POINTERS)
    if begin is None or end is None or model.kind(begin) != POINTER_KIND or model.kind(end) != POINTER_KIND:
        return None
    element = model.strip(model.pointee(begin))
    size = model.byte_size(element) if element is not None else None
    if not size or model.byte_size(model.strip(model.pointee(end))) != size:
        return None
    return CxxVector(VECTOR_POINTERS[0], VECTOR_POINTERS[1], element, size)


def _vector_pointers(model: TypeModel, place: Place, agg, vector: CxxVector, opts: RenderOptions,
                     owner: str) -> tuple[Place, tuple[str, str], tuple[str, str]]:
    """The place of a vector's begin pointer, and the fetch and kernel type of each of its two pointers
    (unsigned: the begin pointer of a vector of structs or of a size() reads as a count)."""
    begin_place, begin_type = _member_path(model, place, agg, vector.begin, owner)
    end_place, end_type = _member_path(model, place, agg, vector.end, owner)
    return (begin_place, _scalar_part(model, begin_place, begin_type, "u", opts, owner),
            _scalar_part(model, end_place, end_type, "u", opts, owner))


def _vector_fetch(model: TypeModel, place: Place, agg, vector: CxxVector, cast: Optional[S.TypeSpec], owner: str,
                  opts: RenderOptions, x_types: bool, common: dict[str, Any]) -> FetchResult:
    """A std::vector as its elements: the kernel cannot subtract its pointers, so both are hidden parts
    and the decoders divide (:mod:`probectl.formats`). Integers: its first ``SLICE_ELEMENTS`` as an
    array, with ``begin`` and ``end`` parts; structs: its begin pointer, an ``end`` part that carries
    the element's size, and the members of its first elements as for a slice of structs."""
    begin_place, (begin_fetch, begin_type), (end_fetch, end_type) = _vector_pointers(model, place, agg, vector,
                                                                                     opts, owner)
    element, size = vector.element, vector.element_size
    members = _element_members(model, element)
    if members:
        if cast is not None:
            raise TypeMismatchError(f"'{owner}' is a vector of {model.type_name(element)}: it is read as its first "
                                    f"{STRUCT_ELEMENTS} elements' members, with no cast")
        parts = (StringPart("end", end_fetch, end_type, value=size),
                 *_element_parts(model, value_of(begin_place, owner), element, members, opts, x_types))
        return FetchResult(fetch=begin_fetch, type=begin_type, bits=int(begin_type[1:]), parts=parts,
                           **dict(common, signed=False))
    text = counted_string(model, element) if model.kind(element) == AGGREGATE_KIND else None
    if text is not None and text.nul_terminated:
        if cast is not None:
            raise TypeMismatchError(f"'{owner}' is a vector of strings: it is read as its first {STRUCT_ELEMENTS} "
                                    f"strings, with no cast")
        return FetchResult(fetch=begin_fetch, type=begin_type, bits=int(begin_type[1:]), parts=(
            StringPart("end", end_fetch, end_type, value=size),
            *_string_elements(model, begin_place, element, text, opts, owner)), **dict(common, signed=False))
    if model.kind(element) not in (SCALAR_KIND, POINTER_KIND) or size not in (1, 2, 4, 8):
        raise TypeMismatchError(f"'{owner}' is a vector of {model.type_name(element)}, which are neither integers, "
                                f"structs with integer members nor std::strings: probectl shows those",
                                hint=f"read its size ({owner}.size()), or an element's member through "
                                     f"{owner}._M_impl._M_start")
    if cast is not None and (cast.base not in SIZE_CASTS or cast.bits and cast.bits != size * 8):
        raise TypeMismatchError(f"'{owner}' is a vector of {size}-byte {model.type_name(element)}: a cast can change "
                                f"how many are read and their sign, not their size",
                                hint=f"cast it to :s{size * 8}[{MAX_VECTOR_CAST}] or :u{size * 8}[...]")
    count = cast.array if cast is not None and cast.array else SLICE_ELEMENTS
    etype = (f"{cast.base}{size * 8}" if cast is not None and cast.bits
             else model.kernel_type(element, cast.base if cast is not None else None, x_types))
    fetch = render_memory(value_of(begin_place, owner), opts, opts.user_access)
    return FetchResult(fetch=fetch, type=f"{etype}[{count}]", bits=0, parts=(
        StringPart("begin", begin_fetch, begin_type), StringPart("end", end_fetch, end_type)), **common)


def _string_elements(model: TypeModel, begin_place: Place, element, text: CountedString, opts: RenderOptions,
                     owner: str) -> list[StringPart]:
    """The hidden ``element`` parts of a vector of std::strings: the text of each of its first
    ``STRUCT_ELEMENTS``, read to its NUL from the pointer each keeps (``_M_dataplus._M_p``)."""
    size = model.byte_size(element) or 0
    base = value_of(begin_place, owner)
    parts = []
    for i in range(STRUCT_ELEMENTS):
        pointer_place, _ = _member_path(model, Memory(base.plus(i * size), opts.user_access), element, text.pointer,
                                        owner)
        parts.append(StringPart("element", render_memory(value_of(pointer_place, owner), opts, opts.user_access),
                                "string", value=i))
    return parts


def container_count(model: TypeModel, agg) -> Optional[tuple[str, ...]]:
    """The member path of the integer that counts the elements of a libstdc++ container (not a
    vector's: it has none), by the members the debug information gives; None for another type."""
    for path in COUNT_MEMBERS:
        t = _member_type(model, agg, path)
        if t is not None and model.kind(t) == SCALAR_KIND and model.byte_size(t) in (4, 8):
            return path
    return None


def _size_fetch(model: TypeModel, place: Place, cur, bitfield: Optional[Bitfield], variable: S.Variable,
                cast: Optional[S.TypeSpec], owner: str, opts: RenderOptions, x_types: bool,
                user: bool) -> FetchResult:
    """``NAME.size()`` of a C++ container: the member that counts its elements, or a vector's two
    pointers (its begin pointer, with a hidden ``end`` part carrying the element's size: the decoders
    give the difference in elements, :mod:`probectl.formats`)."""
    method = variable.method
    assert method is not None
    what = f"{owner}{'->' if method.arrow else '.'}{method.name}()"
    place, cur = _referred(model, place, cur, owner, user)
    real = model.strip(cur) if bitfield is None else None
    kind = model.kind(real) if real is not None else None
    if kind == POINTER_KIND and model.kind(model.strip(model.pointee(real))) == AGGREGATE_KIND:
        if not method.arrow:
            raise TypeMismatchError(f"{method.name}() must be called by '->': '{owner}' is a pointer",
                                    hint=f"write {owner}->{method.name}()")
        user = user or model.user_memory(model.pointee(real))
        place, real = Memory(value_of(place, owner), user), model.strip(model.pointee(real))
        kind = AGGREGATE_KIND
    elif method.arrow and kind == AGGREGATE_KIND:
        raise TypeMismatchError(f"{method.name}() must be called by '.': '{owner}' is not a pointer",
                                hint=f"write {owner}.{method.name}()")
    type_name = model.type_name(real if kind == AGGREGATE_KIND else cur) or "of no type"
    if kind != AGGREGATE_KIND:
        raise TypeMismatchError(f"'{owner}' is {'a bitfield' if bitfield is not None else type_name}, which has no "
                                f"size(): it is read from {SIZED_CONTAINERS}")
    vector = cxx_vector(model, real)
    if vector is not None:
        if cast is not None:
            raise TypeMismatchError(f"'{what}' is worked out from two pointers when the events are read: it takes "
                                    f"no cast")
        _, (begin_fetch, begin_type), (end_fetch, end_type) = _vector_pointers(model, place, real, vector, opts,
                                                                               owner)
        return FetchResult(fetch=begin_fetch, type=begin_type, bits=int(begin_type[1:]),
                           default_name=default_name(variable), c_type="size_t", size=8, variable=variable.name,
                           parts=(StringPart("end", end_fetch, end_type, value=vector.element_size),))
    path = container_count(model, real)
    if path is None:
        raise TypeMismatchError(f"'{owner}' ({type_name}) has no size() that probectl reads: it is read from "
                                f"{SIZED_CONTAINERS}",
                                hint=f"read a member of it ({owner}{'->' if method.arrow else '.'}MEMBER)")
    count_place, count_type = _member_path(model, place, real, path, owner)
    count = _final(model, count_place, count_type, None, variable, cast, what, opts, x_types)
    # (a count in decimal, where perf's type for an unsigned integer would print it in hex)
    return replace(count, type="u" + count.type[1:]) if cast is None and count.type.startswith("x") else count
