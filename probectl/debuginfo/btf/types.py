"""C type questions answered from BTF, with perf's rules for DWARF (:mod:`probectl.debuginfo.dwarf.types`):
qualifiers and typedefs, sizes, signedness, names and kernel fetch types, members through anonymous
structs and bitfields, and functions with their prototypes — so that a fetch resolved through BTF
has the type, name and size the DWARF path gives. :class:`BtfTypeModel` is the part of
:class:`~probectl.debuginfo.btf.Btf` that asks these questions of the records the reader decodes
(``type``, ``members``, ``params``, ``find``...)."""
from __future__ import annotations

from typing import TYPE_CHECKING, Iterator, Optional

from ...dataclass import dataclass
from ...errors import DebugInfoError, TypeMismatchError, did_you_mean
from ..typemodel import (AGGREGATE_KIND, ARRAY_KIND, DECLARED_KIND, POINTER_KIND, SCALAR_KIND, Bitfield,
                         no_member_error, scalar_fetch_type)
from .format import (AGGREGATE_KINDS, ARRAY, BTF_INT_SIGNED, ENUM, ENUM64, FUNC, FUNC_PROTO, FWD, INT, MAX_CHAIN,
                     MAX_NESTING, MEMBER_BUDGET, PTR, QUALIFIER_KINDS, SIZED_KINDS, STRUCT, TYPE_TAG, TYPEDEF_KINDS,
                     UNION, BtfMember, BtfMemberRef, BtfParam, BtfType, guarded)


class BtfTypeModel:
    """The type model of a :class:`~probectl.debuginfo.btf.Btf` (see the module docstring)."""

    if TYPE_CHECKING:  # What Btf, of which this is a part, reads from the records.
        cache: dict

        def _corrupt(self, what: str) -> DebugInfoError: ...
        def type(self, type_id: int) -> Optional[BtfType]: ...
        def int_encoding(self, t: BtfType) -> tuple[int, int, int]: ...
        def array_info(self, t: BtfType) -> tuple[int, int]: ...
        def members(self, t: BtfType) -> list[BtfMember]: ...
        def params(self, proto: BtfType) -> tuple[list[BtfParam], bool]: ...
        def enum_values(self, t: BtfType) -> list[tuple[str, int]]: ...
        def find(self, name: str, kind: Optional[int] = None) -> list[BtfType]: ...
        def names(self, kind: int) -> Iterator[str]: ...

    # --- the type model (mirrors probectl.debuginfo.dwarf.types) ---------------------------------------

    def _chain_loop(self, type_id: Optional[int]) -> DebugInfoError:
        return self._corrupt(f"the type chain from type {type_id} loops")

    def strip_qualifiers(self, type_id: int) -> int:
        """Skip const/volatile/restrict and type tags (``__user``...); 0 is void."""
        return self._skip_kinds(type_id, QUALIFIER_KINDS)

    def strip_typedefs(self, type_id: int) -> int:
        """Skip typedefs, qualifiers and type tags."""
        return self._skip_kinds(type_id, TYPEDEF_KINDS)

    def _skip_kinds(self, type_id: int, kinds: frozenset) -> int:
        start = type_id
        for _ in range(MAX_CHAIN):
            t = self.type(type_id)
            if t is None or t.kind not in kinds:
                return type_id
            type_id = t.ref
        raise self._chain_loop(start)

    def real(self, type_id: Optional[int]) -> Optional[BtfType]:
        """The type with typedefs and qualifiers removed (None: void)."""
        return self.type(self.strip_typedefs(type_id)) if type_id else None

    # --- the member-chain walker's questions (probectl.debuginfo.typemodel.TypeModel) ----------------
    # (Void is type 0 in BTF; the walker's void is None: the questions about a type take either.)

    source = "BTF"

    def strip(self, type_id: Optional[int]) -> Optional[int]:
        return (self.strip_typedefs(type_id) if type_id else 0) or None

    def kind(self, type_id: int) -> str:
        t = self.type(type_id)
        if t is None:
            return SCALAR_KIND
        if t.kind == PTR:
            return POINTER_KIND
        if t.kind == ARRAY:
            return ARRAY_KIND
        if t.kind in AGGREGATE_KINDS:
            return AGGREGATE_KIND
        return DECLARED_KIND if t.kind == FWD else SCALAR_KIND

    def pointee(self, type_id: int) -> int:
        t = self.type(type_id)
        return t.ref if t is not None else 0  # (0: void, which every question here answers)

    def element(self, type_id: int) -> tuple[Optional[int], Optional[int]]:
        t = self.type(type_id)
        if t is None:
            raise self._corrupt(f"type {type_id} is void where an array was expected")
        elem, _count = self.array_info(t)
        return elem, self.byte_size(elem)

    def member(self, agg: int, name: str) -> Optional[BtfMemberRef]:
        return self.find_member(agg, name)

    def no_member_error(self, owner: str, agg: int, name: str) -> TypeMismatchError:
        return self.unknown_member_error(owner, agg, name)

    def user_memory(self, type_id: Optional[int]) -> bool:
        return bool(type_id and self.has_tag(type_id, "user"))

    def reads_through(self, type_id: int) -> bool:
        return False  # (C's pointers: '->')

    def variants(self, type_id: int) -> None:
        return None  # (C prints an enum as its number)

    def has_tag(self, type_id: int, tag: str) -> bool:
        """True if a TYPE_TAG called ``tag`` (``user``, ``percpu``, ``rcu``) qualifies ``type_id``
        before its first typedef or non-qualifier."""
        for _ in range(MAX_CHAIN):
            t = self.type(type_id)
            if t is None or t.kind not in QUALIFIER_KINDS:
                return False
            if t.kind == TYPE_TAG and t.name == tag:
                return True
            type_id = t.ref
        raise self._chain_loop(type_id)

    def byte_size(self, type_id: Optional[int], _depth: int = 0) -> Optional[int]:
        """The size of a type in bytes (an array's: elements times count); None when unknown
        (void, functions, declarations only, arrays of unknown length)."""
        if _depth > MAX_CHAIN:
            raise self._chain_loop(type_id)
        t = self.real(type_id)
        if t is None:
            return None
        if t.kind in SIZED_KINDS:
            return t.size
        if t.kind == PTR:
            return self.pointer_size
        if t.kind == ARRAY:
            elem, count = self.array_info(t)
            esize = self.byte_size(elem, _depth + 1)
            if esize is None or count == 0:
                return None
            return esize * count
        return None

    def perf_byte_size(self, type_id: Optional[int]) -> Optional[int]:
        """The size perf sizes a fetch with (elfutils' ``dwarf_bytesize`` of the real type): sized
        kinds and pointers only, no size for arrays."""
        t = self.real(type_id)
        if t is None:
            return None
        if t.kind in SIZED_KINDS:
            return t.size
        if t.kind == PTR:
            return self.pointer_size
        return None

    @property
    def pointer_size(self) -> int:
        """8: BTF does not record it, and the kernels it is read for here are 64-bit."""
        return 8

    def is_signed(self, type_id: Optional[int]) -> bool:
        """perf's ``die_is_signed_type``: a signed INT (``char`` included when the compiler made it
        signed), or an enum whose values are signed."""
        t = self.real(type_id)
        if t is None:
            return False
        if t.kind == INT:
            return bool(self.int_encoding(t)[0] & BTF_INT_SIGNED)
        if t.kind in (ENUM, ENUM64):
            return t.kind_flag
        return False

    def type_name(self, type_id: Optional[int], _depth: int = 0) -> Optional[str]:
        """A type as ``perf probe -V`` writes it (perf's ``die_get_typename_from_type``):
        qualifiers dropped, typedef names kept, ``struct X``/``union X``/``enum X``, ``T*`` for
        pointers *and* arrays (a multi-dimensional array is one ``*``, as in DWARF),
        ``(function_type)`` for functions, ``void*``; None for a nameless base type."""
        if _depth > MAX_CHAIN:
            raise self._chain_loop(type_id)
        t = self.type(self.strip_qualifiers(type_id)) if type_id else None
        if t is None:
            return None
        if t.kind in (PTR, ARRAY):
            inner_id = t.ref
            if t.kind == ARRAY:
                for _ in range(MAX_CHAIN):
                    inner_type = self.type(inner_id)
                    if inner_type is None or inner_type.kind != ARRAY:
                        break
                    inner_id = inner_type.ref
            inner = self.strip_qualifiers(inner_id)
            if inner == 0:
                return "void*" if t.kind == PTR else None
            name = self.type_name(inner, _depth + 1)
            return None if name is None else name + "*"
        if t.kind == FUNC_PROTO:
            return "(function_type)"
        if t.kind in (STRUCT, UNION, FWD):
            union = t.kind == UNION or (t.kind == FWD and t.kind_flag)
            return ("union " if union else "struct ") + t.name
        if t.kind in (ENUM, ENUM64):
            return "enum " + t.name
        return t.name or None

    def kernel_type(self, type_id: Optional[int], prefix: Optional[str] = None, x_types: bool = True) -> str:
        """perf's ``convert_variable_type`` for a value of ``type_id`` (as
        :func:`probectl.debuginfo.dwarf.types.kernel_type`): ``s<bits>`` if signed, else ``x<bits>``
        (``u<bits>`` without kernel x-types), width from the size capped at 64, "" for arrays."""
        return scalar_fetch_type(self.perf_byte_size(type_id), self.is_signed(type_id), prefix, x_types)

    def enumerators(self, type_id: Optional[int]) -> list[tuple[str, int]]:
        """(name, value) of an enum type, through typedefs ([] for anything else)."""
        t = self.real(type_id)
        if t is None or t.kind not in (ENUM, ENUM64):
            return []
        return self.enum_values(t)

    def char_element(self, type_id: Optional[int]) -> bool:
        """True if the type (typedefs stripped) is ``char`` or ``unsigned char`` (perf's test for
        a ``string`` fetch)."""
        t = self.real(type_id)
        return t is not None and t.kind == INT and t.name in ("char", "unsigned char")

    # --- members ---------------------------------------------------------------------------------

    def _bitfield(self, name: str, mtype: int, absolute: int, bits: int) -> Bitfield:
        """Where a ``bits``-wide bitfield at bit ``absolute`` of the aggregate is read, by
        :func:`probectl.debuginfo.dwarf.types.bitfield_of`'s rule: the declared type's size when the
        field fits an aligned unit of it, else the smallest unit from its first byte."""
        unit = self.byte_size(mtype) or 4
        signed = self.is_signed(mtype)
        cbits = unit * 8
        if cbits in (8, 16, 32, 64):
            byte = (absolute // cbits) * unit
            shift = absolute - byte * 8
            if shift + bits <= cbits:
                return Bitfield(byte, shift, bits, cbits, signed)
        byte, shift = divmod(absolute, 8)
        for size in (8, 16, 32, 64):
            if shift + bits <= size:
                return Bitfield(byte, shift, bits, size, signed)
        raise TypeMismatchError(f"bitfield '{name}' spans more than 64 bits from its first byte and cannot be "
                         f"fetched in one read")

    def _member_ref(self, m: BtfMember) -> BtfMemberRef:
        bits = m.bitfield_size
        absolute = m.bit_offset
        if not bits:
            # Without kind_flag, a bitfield is a member whose INT type is narrower than its size.
            t = self.type(m.type)
            if t is not None and t.kind == INT:
                _enc, int_off, int_bits = self.int_encoding(t)
                if int_bits != (t.size or 0) * 8 or int_off:
                    bits = int_bits
                    absolute += int_off
        if bits:
            bf = self._bitfield(m.name, m.type, absolute, bits)
            return BtfMemberRef(m.type, bf.byte_offset, bf, (m.name,))
        if absolute % 8:
            raise self._corrupt(f"member '{m.name}' is at bit {absolute}, not on a byte, but is not a bitfield")
        return BtfMemberRef(m.type, absolute // 8, None, (m.name,))

    def _visit(self, budget: list[int], depth: int, agg: Optional[BtfType]) -> None:
        budget[0] -= 1 + (agg.vlen if agg is not None else 0)
        if depth > MAX_NESTING:
            raise self._corrupt(f"anonymous members nest more than {MAX_NESTING} deep (a loop?)")
        if budget[0] < 0:
            raise self._corrupt("anonymous members repeat without end (a loop?)")

    @guarded
    def find_member(self, agg_id: int, name: str, _depth: int = 0,
                    _budget: Optional[list[int]] = None) -> Optional[BtfMemberRef]:
        """Find ``name`` in a struct or union, looking through anonymous struct/union members
        (perf's ``die_find_member``); offsets are from the start of ``agg_id``."""
        if _budget is None:
            _budget = [MEMBER_BUDGET]
        agg = self.real(agg_id)
        self._visit(_budget, _depth, agg)
        if agg is None or agg.kind not in AGGREGATE_KINDS:
            return None
        for m in self.members(agg):
            if m.name == name:
                return self._member_ref(m)
            if not m.name:
                inner = self.real(m.type)
                if inner is not None and inner.kind in AGGREGATE_KINDS:
                    found = self.find_member(inner.id, name, _depth + 1, _budget)
                    if found is not None:
                        if m.bit_offset % 8:
                            raise self._corrupt(f"an anonymous member of {agg.name or agg.id} is not on a byte")
                        off = m.bit_offset // 8
                        bf = found.bitfield
                        if bf is not None:
                            bf = Bitfield(bf.byte_offset + off, bf.shift, bf.bits, bf.container, bf.signed)
                        return BtfMemberRef(found.type, off + found.offset, bf, found.path)
        return None

    @guarded
    def member_names(self, agg_id: int, _depth: int = 0, _budget: Optional[list[int]] = None) -> list[str]:
        """Names reachable by '.'/'->' from an aggregate, anonymous members flattened."""
        if _budget is None:
            _budget = [MEMBER_BUDGET]
        agg = self.real(agg_id)
        self._visit(_budget, _depth, agg)
        out: list[str] = []
        if agg is None or agg.kind not in AGGREGATE_KINDS:
            return out
        for m in self.members(agg):
            if m.name:
                out.append(m.name)
            else:
                out.extend(self.member_names(m.type, _depth + 1, _budget))
        return out

    def unknown_member_error(self, owner: str, agg_id: int, name: str) -> TypeMismatchError:
        """"'owner' (struct X) has no member 'name'", with a did-you-mean from its members."""
        return no_member_error(owner, self.type_name(agg_id) or "?", name, self.member_names(agg_id))

    # --- functions -------------------------------------------------------------------------------

    @guarded
    def function(self, name: str) -> "BtfFunction":
        """The function called ``name``: its FUNC records and their prototypes. Several FUNCs of
        one name (static functions of different files, a weak stub and its override) must
        have prototypes of the same types, else which one a symbol is cannot be told from BTF.
        Raises :class:`BtfFunctionNotFound`."""
        key = ("function", name)
        found = self.cache.get(key)
        if found is None:
            found = self.cache[key] = self._function(name)
        return found

    def _function(self, name: str) -> "BtfFunction":
        funcs = self.find(name, FUNC)
        if not funcs:
            hint = did_you_mean(name, self.names(FUNC), cutoff=0.75, quote=True) or \
                "BTF describes the functions the kernel was built with, except inlined ones and copies the " \
                "compiler changed (.isra, .constprop); probe by symbol with $argN, or use a vmlinux with DWARF"
            raise BtfFunctionNotFound(name, f"no function '{name}' in {self.source}", hint)
        protos = []
        for f in funcs:
            proto = self.type(f.ref)
            if proto is None or proto.kind != FUNC_PROTO:
                raise self._corrupt(f"function '{name}' (type {f.id}) does not refer to a prototype")
            protos.append(proto)
        first = self.type_signature(protos[0])
        for p in protos[1:]:
            if self.type_signature(p) != first:
                raise BtfFunctionNotFound(name, f"'{name}' names {len(protos)} functions in {self.source} with "
                                          f"different prototypes ({self.signature(protos[0])} and "
                                          f"{self.signature(p)})",
                                          "they are static functions of different files, and BTF does not say "
                                          "which symbol is which; use a vmlinux with DWARF")
        return BtfFunction(name, tuple(funcs), tuple(protos))

    def signature(self, proto: BtfType) -> str:
        """``ret (type name, ...)`` of a prototype, for messages."""
        params, variadic = self.params(proto)
        parts = [f"{self.type_name(p.type) or '?'} {p.name}".rstrip() for p in params]
        if variadic:
            parts.append("...")
        return f"{self.type_name(proto.ref) or 'void'} ({', '.join(parts)})"

    def type_signature(self, proto: BtfType) -> tuple:
        """What places a prototype's parameters and return value: their type names and sizes."""
        params, variadic = self.params(proto)
        return tuple((self.type_name(t) or "?", self.byte_size(t))
                     for t in (proto.ref, *(p.type for p in params))) + (variadic,)


@dataclass(frozen=True)
class BtfFunction:
    """A function found by name: its FUNC records and their FUNC_PROTOs (one of each unless
    several definitions share the name; their prototypes then have the same types, but may name
    the parameters differently)."""

    name: str
    funcs: tuple[BtfType, ...]
    protos: tuple[BtfType, ...]

    @property
    def proto(self) -> BtfType:
        return self.protos[0]


class BtfFunctionNotFound(DebugInfoError):
    """No (unambiguous) FUNC of that name in the BTF; ``function`` is the name asked for."""

    def __init__(self, function: str, message: str, hint: str = ""):
        super().__init__(message, hint)
        self.function = function
