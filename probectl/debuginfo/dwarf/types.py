"""The C type model, from DWARF type DIEs: sizes, signedness, names, members, arrays, bitfields.

Functions here take DIEs (``units.DIE``) and follow perf's ``dwarf-aux.c`` where perf's output is
compared with ours (type names in ``-V``, the kernel type chosen for a fetch); where perf fails
(DWARF 5 bitfields) or is wrong (DWARF 4 bitfields on little-endian machines), the rule is the
one of the DWARF standard, stated next to the code.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Optional

if TYPE_CHECKING:
    from .units import DIE

from ...dataclass import dataclass
from ...errors import TypeMismatchError
from .diescan import DW_LANG_RUST
from ..typemodel import (AGGREGATE_KIND, ARRAY_KIND, POINTER_KIND, REFERENCE_KIND, SCALAR_KIND, Bitfield, Variant,
                         Variants, no_member_error, scalar_fetch_type)

# DW_ATE encodings perf treats as signed (die_is_signed_type).
_SIGNED_ENCODINGS = (0x05, 0x06, 0x0D)  # signed, signed_char, signed_fixed
_QUALIFIERS = ("DW_TAG_const_type", "DW_TAG_volatile_type", "DW_TAG_restrict_type",
               "DW_TAG_shared_type", "DW_TAG_atomic_type", "DW_TAG_immutable_type")
_AGGREGATES = ("DW_TAG_structure_type", "DW_TAG_union_type", "DW_TAG_class_type")


def _ref(die: DIE, attr: str = "DW_AT_type") -> Optional[DIE]:
    if attr not in die.attributes:
        return None
    return die.get_DIE_from_attribute(attr)


def _name(die: Optional[DIE]) -> Optional[str]:
    if die is None:
        return None
    a = die.attributes.get("DW_AT_name")
    if a is None:
        return None
    v = a.value
    return v.decode("utf-8", "replace") if isinstance(v, bytes) else v


def type_of(die: DIE) -> Optional[DIE]:
    """The DW_AT_type of a variable, member or type DIE (from its origin if it has none)."""
    seen = 0
    cur: Optional[DIE] = die
    while cur is not None and seen < 8:
        t = _ref(cur)
        if t is not None:
            return t
        cur = _ref(cur, "DW_AT_abstract_origin") or _ref(cur, "DW_AT_specification")
        seen += 1
    return None


def strip_qualifiers(t: Optional[DIE]) -> Optional[DIE]:
    """Skip const/volatile/restrict/atomic (perf's ``__die_get_real_type``, applied to a type)."""
    seen = 0
    while t is not None and t.tag in _QUALIFIERS and seen < 32:
        t = _ref(t)
        seen += 1
    return t


def strip_typedefs(t: Optional[DIE]) -> Optional[DIE]:
    """Skip typedefs and qualifiers (perf's ``die_get_real_type``, applied to a type)."""
    seen = 0
    while t is not None and (t.tag in _QUALIFIERS or t.tag == "DW_TAG_typedef") and seen < 64:
        t = _ref(t)
        seen += 1
    return t


def real_type(die: DIE) -> Optional[DIE]:
    """The type of a variable or member with typedefs and qualifiers removed."""
    return strip_typedefs(type_of(die))


def byte_size(t: Optional[DIE]) -> Optional[int]:
    """The size of a type in bytes: DW_AT_byte_size, through typedefs and qualifiers; an
    array's size is its element size times its element counts; None when unknown."""
    t = strip_typedefs(t)
    if t is None:
        return None
    a = t.attributes.get("DW_AT_byte_size")
    if a is not None and isinstance(a.value, int):
        return a.value
    if t.tag == "DW_TAG_pointer_type" or t.tag == "DW_TAG_reference_type":
        return t.cu.header["address_size"]
    if t.tag == "DW_TAG_array_type":
        elem = byte_size(_ref(t))
        if elem is None:
            return None
        total = elem
        for count in array_dimensions(t):
            if count is None:
                return None
            total *= count
        return total
    if t.tag == "DW_TAG_enumeration_type":
        return byte_size(_ref(t))
    return None


def perf_byte_size(t: Optional[DIE]) -> Optional[int]:
    """elfutils' ``dwarf_bytesize``, which perf uses to size a fetch: DW_AT_byte_size only
    (no size for arrays), pointers sized by DW_AT_byte_size or the address size."""
    if t is None:
        return None
    a = t.attributes.get("DW_AT_byte_size")
    if a is not None and isinstance(a.value, int):
        return a.value
    if t.tag == "DW_TAG_pointer_type":
        return t.cu.header["address_size"]
    return None


def encoding(t: Optional[DIE]) -> Optional[int]:
    """DW_AT_encoding of a base type (or of an enum's underlying type)."""
    t = strip_typedefs(t)
    if t is None:
        return None
    a = t.attributes.get("DW_AT_encoding")
    if a is not None:
        return a.value
    if t.tag == "DW_TAG_enumeration_type":
        return encoding(_ref(t))
    return None


def is_signed(t: Optional[DIE]) -> bool:
    """perf's ``die_is_signed_type``: signed, signed_char or signed_fixed encoding."""
    return encoding(t) in _SIGNED_ENCODINGS


def array_dimensions(t: DIE) -> list[Optional[int]]:
    """Element counts of each dimension of an array type (None for an unknown bound)."""
    dims: list[Optional[int]] = []
    for sub in t.iter_children():
        if sub.tag not in ("DW_TAG_subrange_type", "DW_TAG_enumeration_type"):
            continue
        count = sub.attributes.get("DW_AT_count")
        upper = sub.attributes.get("DW_AT_upper_bound")
        lower = sub.attributes.get("DW_AT_lower_bound")
        lo = lower.value if lower is not None and isinstance(lower.value, int) else 0
        if count is not None and isinstance(count.value, int) and count.form.startswith("DW_FORM_data"):
            dims.append(count.value)
        elif upper is not None and isinstance(upper.value, int) and upper.form.startswith(("DW_FORM_data",
                                                                                              "DW_FORM_sdata",
                                                                                              "DW_FORM_udata",
                                                                                              "DW_FORM_implicit")):
            dims.append(upper.value - lo + 1)
        else:
            dims.append(None)
    return dims


@dataclass(frozen=True)
class ArrayInfo:
    """An array type: the element type (the next dimension for multi-dimensional arrays)."""

    element: Optional[DIE]  # (None: void)
    element_size: Optional[int]
    count: Optional[int]


def array_info(t: DIE) -> ArrayInfo:
    """Element type, size and count of the first dimension of an array type. Indexing a
    multi-dimensional array by one subscript gives a row, whose size is the product of the
    remaining dimensions."""
    elem = _ref(t)
    dims = array_dimensions(t)
    esize = byte_size(elem)
    if esize is not None:
        for d in dims[1:]:
            esize = esize * d if d is not None else None
            if esize is None:
                break
    return ArrayInfo(elem, esize, dims[0] if dims else None)


# --- names -------------------------------------------------------------------------------------


def type_name(t: Optional[DIE]) -> Optional[str]:
    """A type as perf's ``die_get_typename_from_type`` writes it: qualifiers dropped, typedef
    names kept, ``struct X``/``union X``/``enum X``, ``T*`` for pointers *and* arrays,
    ``(function_type)`` for functions, ``void*``; None for a nameless base type."""
    t = strip_qualifiers(t)
    if t is None:
        return None
    tag = t.tag
    if tag in ("DW_TAG_array_type", "DW_TAG_pointer_type", "DW_TAG_reference_type",
               "DW_TAG_rvalue_reference_type"):
        inner = strip_qualifiers(_ref(t))
        if inner is None:
            return "void*" if tag != "DW_TAG_array_type" else None
        name = type_name(inner)
        return None if name is None else name + "*"
    if tag == "DW_TAG_subroutine_type":
        return "(function_type)"
    name = _name(t)
    prefix = {"DW_TAG_union_type": "union ", "DW_TAG_structure_type": "struct ",
              "DW_TAG_class_type": "class ", "DW_TAG_enumeration_type": "enum "}.get(tag)
    if prefix is not None:
        return prefix + (name or "")
    return name


def variable_type_name(var: DIE) -> str:
    """The type column of ``perf probe -V``: ``type_name`` of the variable's type, or
    ``(unknown_type)``."""
    return type_name(type_of(var)) or "(unknown_type)"


# --- members -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class MemberRef:
    """A member found by name: its DIE, byte offset from the start of the outer aggregate
    (anonymous members looked through and their offsets added), and bitfield placement."""

    die: DIE
    offset: int
    bitfield: Optional[Bitfield]
    path: tuple[str, ...]

    @property
    def type(self) -> Optional[DIE]:
        return type_of(self.die)


def member_offset(member: DIE) -> Optional[int]:
    """DW_AT_data_member_location as a byte offset: a constant, or an expression that is one
    ``DW_OP_plus_uconst``/``DW_OP_constu``/``DW_OP_lit``; 0 for union members; None if absent."""
    a = member.attributes.get("DW_AT_data_member_location")
    if a is None:
        return None
    if isinstance(a.value, int):
        return a.value
    ops = list(a.value)
    if len(ops) >= 2 and ops[0] in (0x23, 0x10):  # DW_OP_plus_uconst / DW_OP_constu + ULEB
        value = shift = 0
        for b in ops[1:]:
            value |= (b & 0x7F) << shift
            shift += 7
            if b < 0x80:
                return value
    if len(ops) == 1 and 0x30 <= ops[0] <= 0x4F:  # DW_OP_lit0..31
        return ops[0] - 0x30
    raise TypeMismatchError(f"member '{_name(member)}' has a computed location (DW_AT_data_member_location "
                     f"is an expression), which cannot be fetched",
                     hint="this happens with C++ virtual bases; fetch the field with an explicit offset")


def bitfield_of(member: DIE, base_offset: int, little_endian: bool = True) -> Optional[Bitfield]:
    """The kernel placement of a bitfield member, or None if ``member`` is not one.

    DWARF 4+ ``DW_AT_data_bit_offset`` counts bits from the start of the aggregate. DWARF 2/3
    ``DW_AT_bit_offset`` counts from the most significant bit of a ``DW_AT_byte_size`` storage
    unit at ``DW_AT_data_member_location``, so on a little-endian machine the low-order bit
    offset is ``8*byte_size - bit_offset - bit_size`` (perf uses ``bit_offset`` as is, which
    reads the wrong bits on x86). The container is the declared type's size when the field
    fits an aligned unit of it, else the smallest unit from the field's first byte that holds
    it (packed structs).
    """
    size_attr = member.attributes.get("DW_AT_bit_size")
    if size_attr is None:
        return None
    bits = size_attr.value
    mtype = type_of(member)
    unit = byte_size(mtype) or 4
    signed = is_signed(mtype)
    dbo = member.attributes.get("DW_AT_data_bit_offset")
    if dbo is not None:
        absolute = dbo.value
    else:
        start = member_offset(member) or 0
        storage = member.attributes.get("DW_AT_byte_size")
        storage_bytes = storage.value if storage is not None else unit
        bo = member.attributes.get("DW_AT_bit_offset")
        bit_offset = bo.value if bo is not None else 0
        if little_endian:
            low = storage_bytes * 8 - bit_offset - bits
        else:
            low = bit_offset
        absolute = start * 8 + low
    cbits = unit * 8
    if cbits in (8, 16, 32, 64):
        byte = (absolute // cbits) * unit
        shift = absolute - byte * 8
        if shift + bits <= cbits:
            return Bitfield(base_offset + byte, shift, bits, cbits, signed)
    byte = absolute // 8
    shift = absolute % 8
    for size in (8, 16, 32, 64):
        if shift + bits <= size:
            return Bitfield(base_offset + byte, shift, bits, size, signed)
    raise TypeMismatchError(f"bitfield '{_name(member)}' spans more than 64 bits from its first byte and "
                     f"cannot be fetched in one read")


def members(agg: Optional[DIE]) -> list[str]:
    """Names of the members reachable by '.'/'->' from an aggregate, anonymous members
    flattened (for did-you-mean suggestions)."""
    out: list[str] = []
    agg = strip_typedefs(agg)
    if agg is None:
        return out
    for m in agg.iter_children():
        if m.tag not in ("DW_TAG_member", "DW_TAG_variable"):
            continue
        name = _name(m)
        if name is not None:
            out.append(name)
        else:
            inner = real_type(m)
            if inner is not None and inner.tag in _AGGREGATES:
                out.extend(members(inner))
    for base in agg.iter_children():
        if base.tag == "DW_TAG_inheritance":
            base_type = real_type(base)
            if base_type is not None:
                out.extend(n for n in members(base_type) if n not in out)
    return out


def find_member(agg: Optional[DIE], name: str) -> Optional[MemberRef]:
    """Find ``name`` in a struct or union, looking through anonymous struct/union members
    (perf's ``die_find_member``). Offsets of union members are 0."""
    agg = strip_typedefs(agg)
    if agg is None:
        return None
    is_union = agg.tag == "DW_TAG_union_type"
    for m in agg.iter_children():
        if m.tag != "DW_TAG_member":
            continue
        mname = _name(m)
        off = 0 if is_union else (member_offset(m) or 0)
        if mname == name:
            bf = bitfield_of(m, 0)
            return MemberRef(m, bf.byte_offset if bf is not None else off, bf, (name,))
        if mname is None:
            inner = real_type(m)
            if inner is not None and inner.tag in _AGGREGATES:
                found = find_member(inner, name)
                if found is not None:
                    bf = found.bitfield
                    if bf is not None:
                        bf = Bitfield(bf.byte_offset + off, bf.shift, bf.bits, bf.container, bf.signed)
                    return MemberRef(found.die, off + found.offset, bf, found.path)
    # A C++ class's members include its base classes' (DW_TAG_inheritance, at their offsets), after
    # its own, which hide a base's of the same name; a virtual base has a computed offset (refused).
    for base in agg.iter_children():
        if base.tag != "DW_TAG_inheritance":
            continue
        base_type = real_type(base)
        found = find_member(base_type, name) if base_type is not None else None
        if found is not None:
            off = member_offset(base) or 0
            bf = found.bitfield
            if bf is not None:
                bf = Bitfield(bf.byte_offset + off, bf.shift, bf.bits, bf.container, bf.signed)
            return MemberRef(found.die, off + found.offset, bf, found.path)
    return None


def unknown_member_error(owner: str, agg: DIE, name: str) -> TypeMismatchError:
    """"<owner> (type: struct X) has no member 'name'", with a did-you-mean from its members."""
    return no_member_error(owner, type_name(agg) or "?", name, members(agg))


def enumerators(t: Optional[DIE]) -> list[tuple[str, int]]:
    """(name, value) of each enumerator of an enum type, through typedefs."""
    t = strip_typedefs(t)
    if t is None or t.tag != "DW_TAG_enumeration_type":
        return []
    out = []
    for e in t.iter_children():
        if e.tag == "DW_TAG_enumerator":
            v = e.attributes.get("DW_AT_const_value")
            name = _name(e)
            if v is not None and name is not None:
                value = v.value
                if isinstance(value, int) and v.form in ("DW_FORM_data1", "DW_FORM_data2", "DW_FORM_data4",
                                                          "DW_FORM_data8") and is_signed(t):
                    bits = {"DW_FORM_data1": 8, "DW_FORM_data2": 16, "DW_FORM_data4": 32,
                            "DW_FORM_data8": 64}[v.form]
                    if value >= 1 << (bits - 1):
                        value -= 1 << bits
                out.append((name, value))
    return out


def variants(t: DIE) -> Optional[Variants]:
    """How a value of the stripped type ``t`` says its variant: a structure with a
    DW_TAG_variant_part (rustc's enums: DW_AT_discr names the discriminant member, each
    DW_TAG_variant gives its DW_AT_discr_value, or none for the variant that takes every other value:
    a niche's), or a C-like enum of a Rust unit (Rust prints its variants' names; C and C++ print a
    number). A variant chosen by a DW_AT_discr_list (ranges) is not described: None."""
    if t.tag == "DW_TAG_enumeration_type":
        top = t.cu.get_top_DIE()
        language = top.attributes.get("DW_AT_language")
        if language is None or language.value != DW_LANG_RUST:
            return None
        listed = enumerators(t)
        return Variants(0, t, tuple(Variant(name, value) for name, value in listed)) if listed else None
    if t.tag != "DW_TAG_structure_type":
        return None
    part = next((c for c in t.iter_children() if c.tag == "DW_TAG_variant_part"), None)
    if part is None:
        return None
    discr = _ref(part, "DW_AT_discr")
    tag_type = strip_typedefs(type_of(discr)) if discr is not None else None
    offset = member_offset(discr) if discr is not None else None
    if tag_type is None or offset is None or byte_size(tag_type) not in (1, 2, 4, 8):
        return None
    out = []
    for variant in part.iter_children():
        if variant.tag != "DW_TAG_variant":
            continue
        if "DW_AT_discr_list" in variant.attributes:
            return None
        value_attr = variant.attributes.get("DW_AT_discr_value")
        value = value_attr.value if value_attr is not None else None
        if value is not None and not isinstance(value, int):
            return None
        member = next((m for m in variant.iter_children() if m.tag == "DW_TAG_member"), None)
        name = _name(member)
        if member is None or name is None:
            return None
        payload = _payload(member)
        out.append(Variant(name, value, payload, () if payload is not None else _payload_members(member)))
    return Variants(offset, tag_type, tuple(out)) if out else None


def _payload(member: DIE) -> Optional[tuple[int, DIE]]:
    """(offset in the enum, type) of the one scalar a variant holds (``Some(5)``, ``Circle(9)``,
    ``Square { side }``), or None: the variant holds nothing, or more than one value."""
    body = strip_typedefs(type_of(member))
    if body is None or body.tag != "DW_TAG_structure_type":
        return None
    fields = [m for m in body.iter_children() if m.tag == "DW_TAG_member"]
    if len(fields) != 1:
        return None
    inner = strip_typedefs(type_of(fields[0]))
    offset, inner_offset = member_offset(member) or 0, member_offset(fields[0])
    if inner is None or inner_offset is None or byte_size(inner) not in (1, 2, 4, 8) \
            or inner.tag in _AGGREGATES or inner.tag == "DW_TAG_array_type":
        return None
    return offset + inner_offset, inner


def _payload_members(member: DIE) -> tuple[tuple[tuple[str, ...], int, DIE], ...]:
    """(path, offset in the enum, type) of each scalar a variant holds when it holds several
    (``Rect { w, h }``, ``Pair(u32, u32)``, ``Some((a, b))``, ``Some(Point { x, y })``): its members
    that are integers or pointers, and those of its members that are tuples or structs of nothing else;
    a tuple's member by its index (rustc's ``__0`` is ``0``). Other members (a ``String``, an array)
    are not among them."""
    def scalar(t: Optional[DIE]) -> bool:
        return t is not None and t.tag not in _AGGREGATES and t.tag != "DW_TAG_array_type" \
            and byte_size(t) in (1, 2, 4, 8)

    def members(t: DIE) -> list[tuple[str, int, Optional[DIE]]]:
        out = []
        for m in t.iter_children():
            name, offset = _name(m), member_offset(m)
            if m.tag == "DW_TAG_member" and name is not None and offset is not None \
                    and "DW_AT_bit_size" not in m.attributes:
                out.append((name[2:] if name.startswith("__") and name[2:].isdigit() else name, offset,
                            strip_typedefs(type_of(m))))
        return out

    body = strip_typedefs(type_of(member))
    if body is None or body.tag not in _AGGREGATES:
        return ()
    base = member_offset(member) or 0
    found: list[tuple[tuple[str, ...], int, DIE]] = []
    for label, offset, t in members(body):
        if t is None:
            continue
        if scalar(t):
            found.append(((label,), base + offset, t))
        elif t.tag in _AGGREGATES and (inner := members(t)) and all(scalar(u) for _, _, u in inner):
            found.extend(((label, name), base + offset + within, u) for name, within, u in inner if u is not None)
    return tuple(found)


def char_element(t: Optional[DIE]) -> bool:
    """True if ``t`` (typedefs/qualifiers stripped) is named ``char`` or ``unsigned char``
    (perf's test for the ``string`` cast; ``signed char`` is refused as perf refuses it)."""
    t = strip_typedefs(t)
    return t is not None and _name(t) in ("char", "unsigned char")


def kernel_type(t: Optional[DIE], prefix: Optional[str] = None, x_types: bool = True) -> str:
    """The fetch type perf's ``convert_variable_type`` gives a value of type ``t``: ``s<bits>``
    for signed encodings, else ``x<bits>`` (``u<bits>`` without kernel x-types); ``prefix``
    forces u/s/x. The width is DW_AT_byte_size (capped at 64 bits); a type without one
    (arrays) gets no type at all ("")."""
    real = strip_typedefs(t)
    return scalar_fetch_type(perf_byte_size(real), is_signed(real), prefix, x_types)


class DwarfTypes:
    """The type questions of the member-chain walker (:class:`~probectl.debuginfo.typemodel.TypeModel`)
    answered from DWARF type DIEs by the functions of this module."""

    source = "DWARF"

    def strip(self, t: Optional[DIE]) -> Optional[DIE]:
        return strip_typedefs(t)

    def kind(self, t: DIE) -> str:
        if t.tag == "DW_TAG_pointer_type":
            return POINTER_KIND
        if t.tag in ("DW_TAG_reference_type", "DW_TAG_rvalue_reference_type"):
            return REFERENCE_KIND
        if t.tag == "DW_TAG_array_type":
            return ARRAY_KIND
        if t.tag in _AGGREGATES:
            return AGGREGATE_KIND
        return SCALAR_KIND

    def pointee(self, t: DIE) -> Optional[DIE]:
        return type_of(t)

    def element(self, t: DIE) -> tuple[Optional[DIE], Optional[int]]:
        info = array_info(t)
        return info.element, info.element_size

    def member(self, agg: DIE, name: str) -> Optional[MemberRef]:
        return find_member(agg, name)

    def member_names(self, agg: DIE) -> list[str]:
        return members(agg)

    def no_member_error(self, owner: str, agg: DIE, name: str) -> TypeMismatchError:
        return unknown_member_error(owner, agg, name)

    def type_name(self, t: Optional[DIE]) -> Optional[str]:
        return type_name(t)

    def byte_size(self, t: Optional[DIE]) -> Optional[int]:
        return byte_size(t)

    def is_signed(self, t: Optional[DIE]) -> bool:
        return is_signed(t)

    def enumerators(self, t: Optional[DIE]) -> list[tuple[str, int]]:
        return enumerators(t)

    def char_element(self, t: Optional[DIE]) -> bool:
        return char_element(t)

    def variants(self, t: DIE) -> Optional[Variants]:
        return variants(t)

    def kernel_type(self, t: Optional[DIE], prefix: Optional[str] = None, x_types: bool = True) -> str:
        return kernel_type(t, prefix, x_types)

    def user_memory(self, t: Optional[DIE]) -> bool:
        return False  # (gcc writes no btf_type_tag("user") annotations into DWARF)

    def reads_through(self, t: DIE) -> bool:
        name = _name(t) if t.tag == "DW_TAG_pointer_type" else None
        return name is not None and name[:1] in ("&", "*")


DWARF_TYPES = DwarfTypes()
