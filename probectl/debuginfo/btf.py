"""Kernel BTF: the type information most kernels ship without DWARF.

BTF (the kernel's ``include/uapi/linux/btf.h``) is one blob: a header, a type section and a
string section. The header is ``magic`` (u16 0xEB9F, which also tells the byte order),
``version`` (u8, 1), ``flags`` (u8), ``hdr_len`` (u32), then ``type_off``, ``type_len``,
``str_off``, ``str_len`` (u32 each, relative to the end of the header). The string section is
NUL-terminated names, the first one empty. The type section is a sequence of records, each
three u32 words -- ``name_off``, ``info`` (vlen in bits 0-15, kind in bits 24-28, kind_flag
in bit 31) and ``size`` or ``type`` -- then data that depends on the kind:

=============  ==================================================================
INT            one word: encoding (bits 24-27: signed 1, char 2, bool 4), bit
               offset (16-23), bits (0-7)
ARRAY          element type, index type, element count
STRUCT, UNION  vlen members of (name, type, offset): the offset is in bits, or with
               kind_flag ``bitfield_size << 24 | bit_offset``
ENUM           vlen (name, s32 value); kind_flag: the enum is signed
FUNC_PROTO     vlen parameters (name, type); a last (0, 0) means ``...``;
               ``type`` is the return type (0: void)
VAR            one word: linkage
DATASEC        vlen (type, offset, size)
DECL_TAG       one word: component index
ENUM64         vlen (name, low 32 bits, high 32 bits)
=============  ==================================================================

PTR, FWD (kind_flag: union), TYPEDEF, VOLATILE, CONST, RESTRICT, FUNC (``type`` is its
FUNC_PROTO), FLOAT (``size``) and TYPE_TAG have no data. Type id 0 is ``void``; the records
are ids 1, 2, ... in order. *Split* BTF (a module's ``/sys/kernel/btf/<module>``) continues a
base BTF (vmlinux's): its ids start after the base's last id and its string offsets after the
base's string section.

:class:`Btf` reads the type section into a word array once and finds where each record
starts (one pass, no objects), then decodes records only when asked; names are indexed on the
first lookup by name. Its type helpers mirror :mod:`probectl.debuginfo.types` (perf's rules
for DWARF), so a fetch resolved through BTF has the type, name and size the DWARF path gives.
Damaged data -- truncated sections, a bad magic, type ids out of range, type chains that loop
-- raises :class:`~probectl.errors.DebugInfoError`.
"""
from __future__ import annotations

import difflib
import functools
import os
import platform
import struct
import sys
import time
from array import array
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator, Optional, TypeVar

from ..errors import DebugInfoError, ProbectlError, TargetError
from .types import Bitfield, TypeError_

__all__ = ["Btf", "BtfFunction", "BtfFunctionNotFound", "BtfMember", "BtfMemberRef", "BtfParam", "BtfType",
           "EM_X86_64", "KERNEL_BTF", "KIND_NAMES", "load_kernel_btf"]

BTF_MAGIC = 0xEB9F
KERNEL_BTF = Path("/sys/kernel/btf/vmlinux")
EM_X86_64 = 62

# Kinds (btf.h BTF_KIND_*).
INT, PTR, ARRAY, STRUCT, UNION, ENUM, FWD, TYPEDEF, VOLATILE, CONST, RESTRICT, FUNC, FUNC_PROTO, VAR, \
    DATASEC, FLOAT, DECL_TAG, TYPE_TAG, ENUM64 = range(1, 20)
KIND_NAMES = ("VOID", "INT", "PTR", "ARRAY", "STRUCT", "UNION", "ENUM", "FWD", "TYPEDEF", "VOLATILE",
              "CONST", "RESTRICT", "FUNC", "FUNC_PROTO", "VAR", "DATASEC", "FLOAT", "DECL_TAG", "TYPE_TAG",
              "ENUM64")
# Words of kind-specific data after the three-word record: fixed, and per vlen item.
_FIXED_WORDS = (None, 1, 0, 3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 1, 0, 0)
_VLEN_WORDS = (None, 0, 0, 0, 3, 3, 2, 0, 0, 0, 0, 0, 0, 2, 0, 3, 0, 0, 0, 3)

BTF_INT_SIGNED = 1
BTF_INT_CHAR = 2
BTF_INT_BOOL = 4

_QUALIFIER_KINDS = frozenset((VOLATILE, CONST, RESTRICT, TYPE_TAG))
_TYPEDEF_KINDS = _QUALIFIER_KINDS | {TYPEDEF}
_SIZED_KINDS = frozenset((INT, STRUCT, UNION, ENUM, ENUM64, FLOAT))
AGGREGATE_KINDS = frozenset((STRUCT, UNION))
MAX_CHAIN = 64          # qualifier/typedef/array links followed before calling a chain a loop
MAX_NESTING = 32        # anonymous struct/union members looked through
MEMBER_BUDGET = 1_000_000  # members looked at for one lookup before calling the data damaged
MAX_BASIC_TYPE_BITS = 64
_SCANS_BEFORE_INDEX = 32  # lookups by name answered by scanning before all names are indexed
_DAMAGED_HINT = "the BTF data is truncated or damaged; check the file, or use the kernel's vmlinux with DWARF"

_T = TypeVar("_T")


def _guarded(method: Callable[..., _T]) -> Callable[..., _T]:
    """Turn a decoding failure on damaged data into a DebugInfoError naming the BTF source."""

    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        try:
            return method(self, *args, **kwargs)
        except ProbectlError:
            raise
        except (IndexError, ValueError, KeyError, OverflowError, UnicodeError, RecursionError,
                struct.error) as exc:
            raise DebugInfoError(f"{self.source}: corrupt BTF ({exc.__class__.__name__}: {exc})",
                                 hint=_DAMAGED_HINT) from None

    return wrapper


# From this size of type section on (a kernel's is ~4 MB, a module's some KB), record offsets are cached.
_CACHED_TYPES_BYTES = 1 << 20
_OFFSETS_FORMAT = 1


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
    :class:`probectl.debuginfo.types.MemberRef` gives them for DWARF."""

    type: int
    offset: int
    bitfield: Optional[Bitfield]
    path: tuple[str, ...]


class Btf:
    """A parsed BTF blob (``data``: the bytes of ``/sys/kernel/btf/vmlinux`` or of an ELF
    ``.BTF`` section). ``base``: the BTF this one is split from (a module's BTF is split from
    vmlinux's). ``source`` names the data in messages. ``machine`` is the ELF machine number of
    the kernel it describes, when known (BTF itself does not say).
    """

    def __init__(self, data: bytes, *, base: Optional["Btf"] = None, source: str = "BTF",
                 machine: Optional[int] = None):
        self.source = source
        self.base = base
        self.machine = machine if machine is not None else (base.machine if base is not None else None)
        self.parse_seconds = 0.0
        self._name_offs: Optional[bytes] = None
        start = time.perf_counter()
        try:
            self._parse(memoryview(data))
        except ProbectlError:
            raise
        except (IndexError, ValueError, OverflowError, struct.error) as exc:
            raise self._corrupt(f"{exc.__class__.__name__}: {exc}") from None
        self.parse_seconds = time.perf_counter() - start
        self._types: dict[int, BtfType] = {}
        self._names: Optional[dict[str, list[int]]] = None
        self._lookups = 0
        self.cache: dict = {}       # derived data (functions by name, parameter locations...)

    # --- parsing ---------------------------------------------------------------------------------

    def _corrupt(self, what: str) -> DebugInfoError:
        return DebugInfoError(f"{self.source}: corrupt BTF: {what}", hint=_DAMAGED_HINT)

    def _parse(self, data: memoryview) -> None:
        if len(data) < 24:
            raise self._corrupt(f"{len(data)} bytes, shorter than the 24-byte header")
        magic_le = int.from_bytes(data[0:2], "little")
        if magic_le == BTF_MAGIC:
            endian = "<"
        elif int.from_bytes(data[0:2], "big") == BTF_MAGIC:
            endian = ">"
        else:
            raise DebugInfoError(f"{self.source}: not BTF data (magic 0x{magic_le:04x}, expected 0xeb9f)",
                                 hint="give /sys/kernel/btf/vmlinux, a module's /sys/kernel/btf/<module>, "
                                      "or a vmlinux with a .BTF section")
        self.little_endian = endian == "<"
        _magic, version, _flags, hdr_len, type_off, type_len, str_off, str_len = \
            struct.unpack_from(endian + "HBBIIIII", data, 0)
        if version != 1:
            raise DebugInfoError(f"{self.source}: BTF version {version} is not supported (only version 1)")
        if hdr_len < 24 or hdr_len > len(data):
            raise self._corrupt(f"header length {hdr_len}")
        for name, off, length in (("type", type_off, type_len), ("string", str_off, str_len)):
            if hdr_len + off + length > len(data):
                raise self._corrupt(f"the {name} section ({length} bytes at {hdr_len + off}) ends past the "
                                    f"end of the data ({len(data)} bytes)")
        if type_off % 4 or type_len % 4:
            raise self._corrupt("the type section is not made of 4-byte words")
        strings = bytes(data[hdr_len + str_off:hdr_len + str_off + str_len])
        if self.base is None and (not strings or strings[0] != 0):
            raise DebugInfoError(f"{self.source}: the BTF string section does not start with the empty name: "
                                 f"this is split BTF (a module's), or damaged",
                                 hint="read a module's BTF with the BTF of its kernel as the base")
        if strings and strings[-1] != 0:
            raise self._corrupt("the string section does not end with a NUL")
        self._strings = strings
        words = array("I")
        if words.itemsize != 4:  # pragma: no cover - every CPython platform has a 4-byte unsigned int
            words = array("L")
        words.frombytes(data[hdr_len + type_off:hdr_len + type_off + type_len])
        if self.little_endian != (sys.byteorder == "little"):
            words.byteswap()
        self._words = words
        self._offsets = self._cached_record_offsets(words, data[hdr_len + type_off:hdr_len + type_off + type_len])
        # Ids of this blob start after the base's; string offsets after the base's strings.
        self.first_id = self.base.nr_types if self.base is not None else 1
        self.nr_types = self.first_id + len(self._offsets)
        self._str_base = self.base._str_end if self.base is not None else 0
        self._str_end = self._str_base + len(strings)

    def _cached_record_offsets(self, words: array, types: bytes) -> array:
        """``_record_offsets``, kept in the cache (``indexcache``) for a kernel's BTF with the
        records' name offsets (``_name_offs``): walking 100000 records in Python takes ~0.1 s, a
        SHA-1 of them ~4 ms. Keyed by the type section's digest, so another kernel's (or a
        changed) BTF never reads these offsets."""
        if len(types) < _CACHED_TYPES_BYTES:
            return self._record_offsets(words)
        import hashlib

        from . import indexcache

        key = "sha1-" + hashlib.sha1(types).hexdigest()
        fingerprint = (_OFFSETS_FORMAT, len(words), sys.byteorder)
        stored = indexcache.load("btf-records", key, fingerprint)
        if stored is not None and len(stored) == 2 and all(isinstance(part, bytes) for part in stored):
            offsets = array(words.typecode)
            offsets.frombytes(stored[0])
            if offsets and offsets[0] == 0 and offsets[-1] < len(words) and len(stored[1]) == 4 * len(offsets):
                self._name_offs = stored[1]
                return offsets
        offsets = self._record_offsets(words)
        indexcache.store("btf-records", key, fingerprint, (offsets.tobytes(), self._record_names(words, offsets)))
        return offsets

    def _record_names(self, words: array, offsets: array) -> bytes:
        """The name offset of each record, as 4-byte words (searched by ``_ids_named``)."""
        if self._name_offs is None:
            self._name_offs = array("I", [words[i] for i in offsets]).tobytes()
        return self._name_offs

    def _record_offsets(self, words: array) -> array:
        """The word index at which each record starts (records are variable-length)."""
        fixed, per = _FIXED_WORDS, _VLEN_WORDS
        offsets = array(words.typecode)
        append = offsets.append
        n = len(words)
        i = 0
        while i < n:
            if i + 3 > n:
                raise self._corrupt(f"type record {len(offsets) + 1} is truncated")
            info = words[i + 1]
            kind = (info >> 24) & 0x1F
            if kind == 0 or kind > ENUM64:
                raise self._corrupt(f"type record {len(offsets) + 1} has unknown kind {kind}")
            append(i)
            i += 3 + fixed[kind] + (info & 0xFFFF) * per[kind]
        if i != n:
            raise self._corrupt(f"the last type record (record {len(offsets)}) is truncated")
        return offsets

    # --- records ---------------------------------------------------------------------------------

    def string(self, offset: int) -> str:
        """The name at ``offset`` in the string section (split BTF: the base's below its end)."""
        if offset < self._str_base:
            return self.base.string(offset)
        local = offset - self._str_base
        if local >= len(self._strings):
            raise self._corrupt(f"name offset {offset} is past the string section ({self._str_end} bytes)")
        end = self._strings.index(b"\0", local)
        return self._strings[local:end].decode("utf-8", "replace")

    def _record(self, type_id: int) -> int:
        """The word index of a local type's record."""
        return self._offsets[type_id - self.first_id]

    def _check_id(self, type_id: int, what: str = "") -> None:
        if not 0 <= type_id < self.nr_types:
            raise self._corrupt(f"type id {type_id}{' (' + what + ')' if what else ''} is out of range "
                                f"(the data has {self.nr_types - 1} types)")

    @_guarded
    def type(self, type_id: int) -> Optional[BtfType]:
        """The type with id ``type_id``, or None for 0 (void)."""
        if type_id == 0:
            return None
        t = self._types.get(type_id)
        if t is not None:
            return t
        self._check_id(type_id)
        if type_id < self.first_id:
            return self.base.type(type_id)
        w = self._words
        i = self._record(type_id)
        name_off, info, size_type = w[i], w[i + 1], w[i + 2]
        kind = (info >> 24) & 0x1F
        ref = 0
        size: Optional[int] = None
        if kind in _SIZED_KINDS:
            size = size_type
        elif kind == ARRAY:
            ref = w[i + 3]
        elif kind != FWD and kind != DATASEC:
            ref = size_type
        if ref:
            self._check_id(ref, f"referenced by type {type_id}")
        t = BtfType(type_id, kind, self.string(name_off), info & 0xFFFF, bool(info >> 31), size, ref)
        self._types[type_id] = t
        return t

    def _local(self, t: BtfType) -> tuple["Btf", int]:
        """The blob that holds ``t`` and the word index of its record."""
        btf = self
        while t.id < btf.first_id:
            btf = btf.base
        return btf, btf._record(t.id)

    @_guarded
    def int_encoding(self, t: BtfType) -> tuple[int, int, int]:
        """(encoding, bit offset, bits) of an INT."""
        btf, i = self._local(t)
        v = btf._words[i + 3]
        return (v >> 24) & 0x0F, (v >> 16) & 0xFF, v & 0xFF

    @_guarded
    def array_info(self, t: BtfType) -> tuple[int, int]:
        """(element type id, element count) of an ARRAY."""
        btf, i = self._local(t)
        w = btf._words
        return w[i + 3], w[i + 5]

    @_guarded
    def members(self, t: BtfType) -> list[BtfMember]:
        """The members of a STRUCT or UNION, in order."""
        btf, i = self._local(t)
        w = btf._words
        out = []
        for j in range(i + 3, i + 3 + 3 * t.vlen, 3):
            off = w[j + 2]
            if t.kind_flag:
                bit_offset, bitfield_size = off & 0xFFFFFF, off >> 24
            else:
                bit_offset, bitfield_size = off, 0
            self._check_id(w[j + 1], f"a member of {t.name or 'type %d' % t.id}")
            out.append(BtfMember(btf.string(w[j]), w[j + 1], bit_offset, bitfield_size))
        return out

    @_guarded
    def params(self, proto: BtfType) -> tuple[list[BtfParam], bool]:
        """The parameters of a FUNC_PROTO and whether it is variadic (``...``)."""
        btf, i = self._local(proto)
        w = btf._words
        out = []
        variadic = False
        for n, j in enumerate(range(i + 3, i + 3 + 2 * proto.vlen, 2)):
            if w[j + 1] == 0:
                if n != proto.vlen - 1 or w[j]:
                    raise self._corrupt(f"function prototype {proto.id} has a void parameter")
                variadic = True
                break
            self._check_id(w[j + 1], f"a parameter of prototype {proto.id}")
            out.append(BtfParam(btf.string(w[j]), w[j + 1]))
        return out, variadic

    @_guarded
    def enum_values(self, t: BtfType) -> list[tuple[str, int]]:
        """(name, value) of each enumerator of an ENUM or ENUM64 (signed when kind_flag says so)."""
        btf, i = self._local(t)
        w = btf._words
        out = []
        if t.kind == ENUM:
            for j in range(i + 3, i + 3 + 2 * t.vlen, 2):
                v = w[j + 1]
                if t.kind_flag and v >= 1 << 31:
                    v -= 1 << 32
                out.append((btf.string(w[j]), v))
        elif t.kind == ENUM64:
            for j in range(i + 3, i + 3 + 3 * t.vlen, 3):
                v = w[j + 1] | (w[j + 2] << 32)
                if t.kind_flag and v >= 1 << 63:
                    v -= 1 << 64
                out.append((btf.string(w[j]), v))
        return out

    # --- names -----------------------------------------------------------------------------------

    def _string_offsets(self, name: str) -> list[int]:
        """Every offset (in this blob's numbering, base included) where the string ``name`` is."""
        out = [] if self.base is None else self.base._string_offsets(name)
        strings = self._strings
        encoded = name.encode("utf-8")
        pattern = b"\0" + encoded + b"\0"
        pos = strings.find(pattern)
        while pos >= 0:
            out.append(self._str_base + pos + 1)
            pos = strings.find(pattern, pos + 1)
        return out

    def _ids_named(self, name: str) -> list[int]:
        """Ids of this blob's own types called ``name``: find the name in the string section, then
        its offset among the records' name offsets (both searches run in C, about 2 ms); after
        a few lookups, from an index of all names (built once, about 0.1 s)."""
        if not name:
            return []
        if self._names is None:
            self._lookups += 1
            if self._lookups > _SCANS_BEFORE_INDEX:
                self._name_index()
        if self._names is not None:
            return list(self._names.get(name, ()))
        table = self._record_names(self._words, self._offsets)
        ids = []
        for off in self._string_offsets(name):
            needle = off.to_bytes(4, sys.byteorder)
            pos = table.find(needle)
            while pos >= 0:
                if pos % 4 == 0:
                    ids.append(self.first_id + pos // 4)
                pos = table.find(needle, pos + 1)
        return sorted(ids)

    def _name_index(self) -> dict[str, list[int]]:
        """Every name of this blob's types, with their ids (built for suggestions only)."""
        if self._names is None:
            index: dict[str, list[int]] = {}
            w = self._words
            for n, i in enumerate(self._offsets):
                if w[i]:
                    index.setdefault(self.string(w[i]), []).append(self.first_id + n)
            self._names = index
        return self._names

    @_guarded
    def find(self, name: str, kind: Optional[int] = None) -> list[BtfType]:
        """The types called ``name`` (of ``kind`` if given), this blob's first, then the base's."""
        out = [self.type(i) for i in self._ids_named(name)]
        if kind is not None:
            out = [t for t in out if t.kind == kind]
        if self.base is not None:
            out.extend(self.base.find(name, kind))
        return out

    @_guarded
    def names(self, kind: int) -> Iterator[str]:
        """Every name of a type of ``kind`` (for suggestions)."""
        for name, ids in self._name_index().items():
            if any(self.type(i).kind == kind for i in ids):
                yield name
        if self.base is not None:
            yield from self.base.names(kind)

    def suggest(self, name: str, kind: int, n: int = 3) -> list[str]:
        """Names of ``kind`` close to ``name`` (did-you-mean)."""
        return difflib.get_close_matches(name, list(self.names(kind)), n=n, cutoff=0.75)

    def __len__(self) -> int:
        return self.nr_types - 1

    def __repr__(self) -> str:
        return f"Btf({self.source!r}, {len(self)} types{', split' if self.base is not None else ''})"

    # --- the type model (mirrors probectl.debuginfo.types) ---------------------------------------

    def _chain_loop(self, type_id: int) -> DebugInfoError:
        return self._corrupt(f"the type chain from type {type_id} loops")

    def strip_qualifiers(self, type_id: int) -> int:
        """Skip const/volatile/restrict and type tags (``__user``...); 0 is void."""
        return self._skip_kinds(type_id, _QUALIFIER_KINDS)

    def strip_typedefs(self, type_id: int) -> int:
        """Skip typedefs, qualifiers and type tags."""
        return self._skip_kinds(type_id, _TYPEDEF_KINDS)

    def _skip_kinds(self, type_id: int, kinds: frozenset) -> int:
        start = type_id
        for _ in range(MAX_CHAIN):
            t = self.type(type_id)
            if t is None or t.kind not in kinds:
                return type_id
            type_id = t.ref
        raise self._chain_loop(start)

    def real(self, type_id: int) -> Optional[BtfType]:
        """The type with typedefs and qualifiers removed (None: void)."""
        return self.type(self.strip_typedefs(type_id))

    def has_tag(self, type_id: int, tag: str) -> bool:
        """True if a TYPE_TAG called ``tag`` (``user``, ``percpu``, ``rcu``) qualifies ``type_id``
        before its first typedef or non-qualifier."""
        for _ in range(MAX_CHAIN):
            t = self.type(type_id)
            if t is None or t.kind not in _QUALIFIER_KINDS:
                return False
            if t.kind == TYPE_TAG and t.name == tag:
                return True
            type_id = t.ref
        raise self._chain_loop(type_id)

    def byte_size(self, type_id: int, _depth: int = 0) -> Optional[int]:
        """The size of a type in bytes (an array's: elements times count); None when unknown
        (void, functions, declarations only, arrays of unknown length)."""
        if _depth > MAX_CHAIN:
            raise self._chain_loop(type_id)
        t = self.real(type_id)
        if t is None:
            return None
        if t.kind in _SIZED_KINDS:
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

    def perf_byte_size(self, type_id: int) -> Optional[int]:
        """The size perf sizes a fetch with (elfutils' ``dwarf_bytesize`` of the real type): sized
        kinds and pointers only, no size for arrays."""
        t = self.real(type_id)
        if t is None:
            return None
        if t.kind in _SIZED_KINDS:
            return t.size
        if t.kind == PTR:
            return self.pointer_size
        return None

    @property
    def pointer_size(self) -> int:
        """8: BTF does not record it, and the kernels it is read for here are 64-bit."""
        return 8

    def is_signed(self, type_id: int) -> bool:
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

    def type_name(self, type_id: int, _depth: int = 0) -> Optional[str]:
        """A type as ``perf probe -V`` writes it (perf's ``die_get_typename_from_type``):
        qualifiers dropped, typedef names kept, ``struct X``/``union X``/``enum X``, ``T*`` for
        pointers *and* arrays (a multi-dimensional array is one ``*``, as in DWARF),
        ``(function_type)`` for functions, ``void*``; None for a nameless base type."""
        if _depth > MAX_CHAIN:
            raise self._chain_loop(type_id)
        t = self.type(self.strip_qualifiers(type_id))
        if t is None:
            return None
        if t.kind in (PTR, ARRAY):
            inner_id = t.ref
            if t.kind == ARRAY:
                for _ in range(MAX_CHAIN):
                    inner = self.type(inner_id)
                    if inner is None or inner.kind != ARRAY:
                        break
                    inner_id = inner.ref
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

    def kernel_type(self, type_id: int, prefix: Optional[str] = None, x_types: bool = True) -> str:
        """perf's ``convert_variable_type`` for a value of ``type_id`` (as
        :func:`probectl.debuginfo.types.kernel_type`): ``s<bits>`` if signed, else ``x<bits>``
        (``u<bits>`` without kernel x-types), width from the size capped at 64, "" for arrays."""
        size = self.perf_byte_size(type_id)
        if size is None or size <= 0:
            return ""
        bits = min(size * 8, MAX_BASIC_TYPE_BITS)
        if prefix == "x" and not x_types:
            prefix = None
        if prefix is None:
            prefix = "s" if self.is_signed(type_id) else ("x" if x_types else "u")
        return f"{prefix}{bits}"

    def enumerators(self, type_id: int) -> list[tuple[str, int]]:
        """(name, value) of an enum type, through typedefs ([] for anything else)."""
        t = self.real(type_id)
        if t is None or t.kind not in (ENUM, ENUM64):
            return []
        return self.enum_values(t)

    def char_element(self, type_id: int) -> bool:
        """True if the type (typedefs stripped) is ``char`` or ``unsigned char`` (perf's test for
        a ``string`` fetch)."""
        t = self.real(type_id)
        return t is not None and t.kind == INT and t.name in ("char", "unsigned char")

    # --- members ---------------------------------------------------------------------------------

    def _bitfield(self, name: str, mtype: int, absolute: int, bits: int) -> Bitfield:
        """Where a ``bits``-wide bitfield at bit ``absolute`` of the aggregate is read, by
        :func:`probectl.debuginfo.types.bitfield_of`'s rule: the declared type's size when the
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
        raise TypeError_(f"bitfield '{name}' spans more than 64 bits from its first byte and cannot be "
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

    @_guarded
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

    @_guarded
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

    def unknown_member_error(self, owner: str, agg_id: int, name: str) -> TypeError_:
        """"'owner' (struct X) has no member 'name'", with a did-you-mean from its members."""
        names = self.member_names(agg_id)
        close = difflib.get_close_matches(name, names, n=3, cutoff=0.6)
        tname = self.type_name(agg_id) or "?"
        hint = ""
        if close:
            hint = "did you mean " + " or ".join(f"'{c}'" for c in close) + "?"
        elif names:
            hint = f"{tname} has: " + ", ".join(names[:12]) + (", ..." if len(names) > 12 else "")
        return TypeError_(f"'{owner}' ({tname}) has no member '{name}'", hint=hint)

    # --- functions -------------------------------------------------------------------------------

    @_guarded
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
            close = self.suggest(name, FUNC)
            hint = ("did you mean " + " or ".join(f"'{c}'" for c in close) + "?") if close else \
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


def load_kernel_btf(path: Optional[os.PathLike | str] = None, *, base: Optional[Btf] = None) -> Btf:
    """Read kernel BTF: ``/sys/kernel/btf/vmlinux`` (the running kernel) when ``path`` is None;
    else ``path`` is raw BTF or an ELF file (a vmlinux, or a ``.ko``) with a ``.BTF`` section.
    A module's BTF is split BTF: give ``base``, the BTF of the kernel it was built for; a
    module's BTF read from ``/sys/kernel/btf/<module>`` gets the running kernel's by default."""
    p = Path(path) if path is not None else KERNEL_BTF
    try:
        with open(p, "rb") as f:
            head = f.read(4)
    except FileNotFoundError:
        if path is None:
            raise TargetError(f"{p} does not exist: the running kernel has no BTF",
                              hint="the kernel needs CONFIG_DEBUG_INFO_BTF; or give a vmlinux with DWARF (-k)") \
                from None
        raise TargetError(f"{p} does not exist") from None
    except IsADirectoryError:
        raise TargetError(f"{p} is a directory, not BTF data nor an ELF file") from None
    except PermissionError:
        raise TargetError(f"{p}: permission denied", hint="run as root") from None
    except OSError as exc:
        raise TargetError(f"{p}: cannot read ({exc.strerror or exc})") from None
    if head == b"\x7fELF":
        from .elf import ElfFile

        with ElfFile(p) as elf:
            if elf.section(".BTF") is None:
                raise DebugInfoError(f"{p} has no .BTF section",
                                     hint="the kernel was built without CONFIG_DEBUG_INFO_BTF")
            data = elf.section_data(".BTF")
            machine = elf.machine
        return Btf(data, base=base, source=f"{p} (.BTF)", machine=machine)
    data = p.read_bytes()
    if base is None and p.parent == KERNEL_BTF.parent and p.name != KERNEL_BTF.name:
        base = load_kernel_btf()
    machine = EM_X86_64 if platform.machine() == "x86_64" and str(p).startswith("/sys/") else None
    return Btf(data, base=base, source=str(p), machine=machine)
