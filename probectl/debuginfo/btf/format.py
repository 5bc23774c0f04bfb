"""The BTF format: kind numbers, limits, the plain records :class:`~probectl.debuginfo.btf.Btf`
decodes (types, members, parameters) and the guard that turns a decoding failure on damaged data
into a :class:`~probectl.errors.DebugInfoError`. The layout itself is described in the package's docstring."""
from __future__ import annotations

import struct
from pathlib import Path
from typing import Optional

from ...dataclass import dataclass
from ...errors import DebugInfoError, guard_decoding
from ..typemodel import Bitfield

BTF_MAGIC = 0xEB9F
KERNEL_BTF = Path("/sys/kernel/btf/vmlinux")

# Kinds (btf.h BTF_KIND_*).
INT, PTR, ARRAY, STRUCT, UNION, ENUM, FWD, TYPEDEF, VOLATILE, CONST, RESTRICT, FUNC, FUNC_PROTO, VAR, \
    DATASEC, FLOAT, DECL_TAG, TYPE_TAG, ENUM64 = range(1, 20)
KIND_NAMES = ("VOID", "INT", "PTR", "ARRAY", "STRUCT", "UNION", "ENUM", "FWD", "TYPEDEF", "VOLATILE",
              "CONST", "RESTRICT", "FUNC", "FUNC_PROTO", "VAR", "DATASEC", "FLOAT", "DECL_TAG", "TYPE_TAG",
              "ENUM64")
# Words of kind-specific data after the three-word record: fixed, and per vlen item (by kind; kind 0 is
# no kind, refused before these are read).
FIXED_WORDS = (0, 1, 0, 3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 1, 0, 0)
VLEN_WORDS = (0, 0, 0, 0, 3, 3, 2, 0, 0, 0, 0, 0, 0, 2, 0, 3, 0, 0, 0, 3)

BTF_INT_SIGNED = 1
BTF_INT_CHAR = 2
BTF_INT_BOOL = 4

QUALIFIER_KINDS = frozenset((VOLATILE, CONST, RESTRICT, TYPE_TAG))
TYPEDEF_KINDS = QUALIFIER_KINDS | {TYPEDEF}
SIZED_KINDS = frozenset((INT, STRUCT, UNION, ENUM, ENUM64, FLOAT))
AGGREGATE_KINDS = frozenset((STRUCT, UNION))
MAX_CHAIN = 64          # qualifier/typedef/array links followed before calling a chain a loop
MAX_NESTING = 32        # anonymous struct/union members looked through
MEMBER_BUDGET = 1_000_000  # members looked at for one lookup before calling the data damaged
SCANS_BEFORE_INDEX = 32  # lookups by name answered by scanning before all names are indexed
DAMAGED_HINT = "the BTF data is truncated or damaged; check the file, or use the kernel's vmlinux with DWARF"

def _corrupt_btf(btf, exc: BaseException) -> DebugInfoError:
    return DebugInfoError(f"{btf.source}: corrupt BTF ({exc.__class__.__name__}: {exc})", hint=DAMAGED_HINT)


# Every BTF entry point (the reader's methods, the fetches of resolve/btf_fetch): a decoding failure on
# damaged data becomes a DebugInfoError naming the BTF source.
guarded = guard_decoding((IndexError, ValueError, KeyError, OverflowError, UnicodeError, RecursionError,
                          struct.error), _corrupt_btf)

@dataclass(frozen=True)
class BtfType:
    """One decoded type record: ``ref`` is the referenced type id (PTR, TYPEDEF, qualifiers,
    FUNC, VAR, DECL_TAG, TYPE_TAG; the return type of a FUNC_PROTO; an ARRAY's element),
    ``size`` the byte size of sized kinds (INT, STRUCT, UNION, ENUM, ENUM64, FLOAT), None
    elsewhere."""

    id: int
    kind: int
    name: str
    vlen: int
    kind_flag: bool
    size: Optional[int]
    ref: int

    @property
    def kind_name(self) -> str:
        return KIND_NAMES[self.kind]


@dataclass(frozen=True)
class BtfMember:
    """A struct/union member: ``bit_offset`` from the start of the aggregate; ``bitfield_size``
    is 0 for a member that is not a bitfield."""

    name: str
    type: int
    bit_offset: int
    bitfield_size: int


@dataclass(frozen=True)
class BtfParam:
    """A FUNC_PROTO parameter (name "" when the prototype does not name it)."""

    name: str
    type: int


@dataclass(frozen=True)
class BtfMemberRef:
    """A member found by name (anonymous members looked through): its type id, byte offset
    from the start of the outer aggregate and its bitfield placement (offsets included), as
    :class:`probectl.debuginfo.dwarf.types.MemberRef` gives them for DWARF."""

    type: int
    offset: int
    bitfield: Optional[Bitfield]
    path: tuple[str, ...]
