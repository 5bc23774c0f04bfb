"""What the two C type models (DWARF's in :mod:`.dwarf.types`, BTF's in :mod:`.btf.types`) share:
bitfield placement, the kernel fetch type of a scalar, and the questions the member-chain walker asks
(:class:`TypeModel`).

Kept apart from both, so that BTF resolution never imports the DWARF reader.
"""
from __future__ import annotations

from typing import Any, Optional, Protocol, TypeVar

from ..dataclass import dataclass
from ..errors import TypeMismatchError, did_you_mean

MAX_BASIC_TYPE_BITS = 64  # the widest value a fetch type (u64/s64/x64) reads


@dataclass(frozen=True)
class Bitfield:
    """Where a bitfield lives, as the kernel reads it: ``bits`` wide, ``shift`` bits above the
    lowest bit of a ``container``-bit little-endian word starting ``byte_offset`` bytes into
    the enclosing struct."""

    byte_offset: int
    shift: int
    bits: int
    container: int
    signed: bool

    @property
    def fetch_type(self) -> str:
        return f"b{self.bits}@{self.shift}/{self.container}"


def no_member_error(owner: str, type_name: str, name: str, members: list[str]) -> TypeMismatchError:
    """``'owner' (struct X) has no member 'name'``, with a did-you-mean from the aggregate's
    ``members``, or the first of them."""
    hint = did_you_mean(name, members, quote=True)
    if not hint and members:
        hint = f"{type_name} has: " + ", ".join(members[:12]) + (", ..." if len(members) > 12 else "")
    return TypeMismatchError(f"'{owner}' ({type_name}) has no member '{name}'", hint=hint)


def scalar_fetch_type(size: Optional[int], signed: bool, prefix: Optional[str] = None, x_types: bool = True) -> str:
    """perf's ``convert_variable_type`` for a value of ``size`` bytes: ``s<bits>`` if signed, else
    ``x<bits>`` (``u<bits>`` without the kernel's x-types); ``prefix`` forces u/s/x. The width is
    capped at 64 bits; a type without a size (arrays) gets no type at all ("")."""
    if size is None or size <= 0:
        return ""
    bits = min(size * 8, MAX_BASIC_TYPE_BITS)
    if prefix == "x" and not x_types:
        prefix = None
    if prefix is None:
        prefix = "s" if signed else ("x" if x_types else "u")
    return f"{prefix}{bits}"


# --- what the member-chain walker asks of a type model ----------------------------------------------

# The kinds of type a member chain tells apart, once typedefs and qualifiers are stripped.
POINTER_KIND, ARRAY_KIND, AGGREGATE_KIND, DECLARED_KIND, SCALAR_KIND = "pointer", "array", "aggregate", "declared", "scalar"
# A C++ reference (``const std::string &name``): a pointer in memory that the language reads as the
# object it refers to (``name.size()``), so the member walker reads through it without an arrow.
REFERENCE_KIND = "reference"

@dataclass(frozen=True)
class Variant:
    """One variant of an enum whose value says which it is (a Rust enum, ``Option``): its ``name``,
    the discriminant's ``value`` that selects it (None: every value no other variant has, the variant
    that holds its data where another's value is a niche, such as ``Some`` of an ``Option<&T>``) and,
    when the variant holds one scalar, its ``payload``: (byte offset in the enum, type); when it holds
    several (``Rect { w, h }``, ``Some((a, b))``), its ``members``: (path of member names, byte offset
    in the enum, type) of each scalar."""

    name: str
    value: Optional[int]
    payload: Optional[tuple[int, Any]] = None
    members: tuple[tuple[tuple[str, ...], int, Any], ...] = ()


@dataclass(frozen=True)
class Variants:
    """How a value tells its variant: the discriminant at byte ``offset`` of the value, of type
    ``tag_type`` (a C-like enum is its own discriminant: offset 0, its own type), and the variants."""

    offset: int
    tag_type: Any
    variants: tuple[Variant, ...]


TypeRef = TypeVar("TypeRef")  # a model's handle of a type: a DWARF type DIE, a BTF type id
MemberTypeRef = TypeVar("MemberTypeRef", covariant=True)  # (the same, in what a member only gives)


class Member(Protocol[MemberTypeRef]):
    """A member found by name: its type, byte offset from the start of the outer aggregate (anonymous
    members looked through) and its bitfield placement."""

    @property
    def type(self) -> Optional[MemberTypeRef]: ...

    @property
    def offset(self) -> int: ...

    @property
    def bitfield(self) -> Optional[Bitfield]: ...


class TypeModel(Protocol[TypeRef]):
    """The C type questions perf's ``convert_variable_fields``/``convert_variable_type`` ask, answered
    by DWARF (:class:`.dwarf.types.DwarfTypes`) or by BTF (:class:`.btf.types.BtfTypeModel`), so that
    one walker (:mod:`probectl.resolve.fetch`) serves both. ``None`` stands for void or no type."""

    source: str  # what the information is called in messages: "DWARF", "BTF"

    def strip(self, t: Optional[TypeRef], /) -> Optional[TypeRef]:
        """``t`` without typedefs and qualifiers."""

    def kind(self, t: TypeRef, /) -> str:
        """POINTER_KIND, ARRAY_KIND, AGGREGATE_KIND (struct, union, class), DECLARED_KIND (declared
        only), REFERENCE_KIND (a C++ reference; its pointee is what it refers to) or SCALAR_KIND,
        of a stripped type."""

    def pointee(self, t: TypeRef, /) -> Optional[TypeRef]:
        """What a pointer type points to."""

    def element(self, t: TypeRef, /) -> tuple[Optional[TypeRef], Optional[int]]:
        """An array type's element type and the size one index steps over."""

    def member(self, agg: TypeRef, /, name: str) -> Optional[Member[TypeRef]]:
        """The member ``name`` of an aggregate, through anonymous members."""

    def member_names(self, agg: TypeRef, /) -> list[str]:
        """The names ``member`` finds in an aggregate, in declaration order."""

    def no_member_error(self, owner: str, agg: TypeRef, /, name: str) -> TypeMismatchError:
        """The error for ``owner`` (of aggregate type ``agg``) lacking member ``name``."""

    def type_name(self, t: Optional[TypeRef], /) -> Optional[str]: ...

    def byte_size(self, t: Optional[TypeRef], /) -> Optional[int]: ...

    def is_signed(self, t: Optional[TypeRef], /) -> bool: ...

    def enumerators(self, t: Optional[TypeRef], /) -> list[tuple[str, int]]: ...

    def variants(self, t: TypeRef, /) -> Optional[Variants]:
        """How a value of the stripped type ``t`` says which variant it is, where the debug information
        says it and the language names its variants when it prints a value (a Rust enum, C-like or
        with data); None for any other type."""

    def char_element(self, t: Optional[TypeRef], /) -> bool:
        """``char`` or ``unsigned char`` (what ``:string`` reads)."""

    def kernel_type(self, t: Optional[TypeRef], /, prefix: Optional[str] = None, x_types: bool = True) -> str:
        """perf's fetch type of a value of type ``t`` (see :func:`scalar_fetch_type`)."""

    def user_memory(self, t: Optional[TypeRef], /) -> bool:
        """True when objects of type ``t`` live in user memory (a ``__user`` pointee)."""

    def reads_through(self, t: TypeRef, /) -> bool:
        """A pointer type whose language reads members through it with '.' (``it.id`` of a Rust
        ``&Item``, ``s.polls`` of a Go ``*Server``): DWARF names those pointer types (``&Item``,
        ``*main.Server``), C's it leaves unnamed."""
