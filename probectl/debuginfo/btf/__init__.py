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
first lookup by name. Its type helpers mirror :mod:`probectl.debuginfo.dwarf.types` (perf's rules
for DWARF), so a fetch resolved through BTF has the type, name and size the DWARF path gives.
Damaged data -- truncated sections, a bad magic, type ids out of range, type chains that loop
-- raises :class:`~probectl.errors.DebugInfoError`.
"""
from __future__ import annotations

import os
import struct
import sys
import time
from array import array
from pathlib import Path
from typing import Iterator, Optional

from ...arch import host
from ...errors import DebugInfoError, ProbectlError, TargetError
from ...regularfile import open_regular
from .format import (ARRAY, BTF_MAGIC, DAMAGED_HINT, DATASEC, ENUM, ENUM64, FIXED_WORDS, FWD, KERNEL_BTF,
                     SCANS_BEFORE_INDEX, SIZED_KINDS, VLEN_WORDS, BtfMember, BtfParam, BtfType, guarded)
from .types import BtfTypeModel

# From this size of type section on (a kernel's is ~4 MB, a module's some KB), record offsets are cached.
_CACHED_TYPES_BYTES = 1 << 20
_OFFSETS_FORMAT = 1


class Btf(BtfTypeModel):
    """A parsed BTF blob (``data``: the bytes of ``/sys/kernel/btf/vmlinux`` or of an ELF
    ``.BTF`` section). ``base``: the BTF this one is split from (a module's BTF is split from
    vmlinux's). ``source`` names the data in messages. ``machine`` is the ELF machine number of
    the kernel it describes, when known (BTF itself does not say).
    """

    def __init__(self, data: bytes, *, base: Optional["Btf"] = None, source: str = "BTF",
                 machine: Optional[int] = None):
        self.source = source
        self.base = base
        self.machine: Optional[int] = machine if machine is not None else (base.machine if base is not None else None)
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
        return DebugInfoError(f"{self.source}: corrupt BTF: {what}", hint=DAMAGED_HINT)

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
        self.first_id: int = self.base.nr_types if self.base is not None else 1
        self.nr_types: int = self.first_id + len(self._offsets)
        self._str_base: int = self.base._str_end if self.base is not None else 0
        self._str_end: int = self._str_base + len(strings)

    def _cached_record_offsets(self, words: array, types: bytes | memoryview) -> array:
        """``_record_offsets``, kept in the cache (``indexcache``) for a kernel's BTF with the
        records' name offsets (``_name_offs``): walking a kernel's hundred thousand records in Python
        costs far more than a SHA-1 of them. Keyed by the type section's digest, so another kernel's (or a
        changed) BTF never reads these offsets."""
        if len(types) < _CACHED_TYPES_BYTES:
            return self._record_offsets(words)
        import hashlib

        from .. import indexcache

        key = "sha1-" + hashlib.sha1(types).hexdigest()
        fingerprint = (_OFFSETS_FORMAT, len(words), sys.byteorder)

        def decode(stored: tuple) -> Optional[tuple[array, bytes]]:
            if len(stored) != 2 or not all(isinstance(part, bytes) for part in stored):
                return None
            offsets = array(words.typecode)
            offsets.frombytes(stored[0])
            if offsets and offsets[0] == 0 and offsets[-1] < len(words) and len(stored[1]) == 4 * len(offsets):
                return offsets, stored[1]
            return None

        def build() -> tuple[tuple[array, bytes], tuple]:
            offsets = self._record_offsets(words)
            names = self._record_names(words, offsets)
            return (offsets, names), (offsets.tobytes(), names)

        offsets, self._name_offs = indexcache.load_or_build("btf-records", key, fingerprint, decode=decode,
                                                            build=build, what=self.source)
        return offsets

    def _record_names(self, words: array, offsets: array) -> bytes:
        """The name offset of each record, as 4-byte words (searched by ``_ids_named``)."""
        if self._name_offs is None:
            self._name_offs = array("I", [words[i] for i in offsets]).tobytes()
        return self._name_offs

    def _record_offsets(self, words: array) -> array:
        """The word index at which each record starts (records are variable-length)."""
        fixed, per = FIXED_WORDS, VLEN_WORDS
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
        if self.base is not None and offset < self._str_base:
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

    @guarded
    def type(self, type_id: int) -> Optional[BtfType]:
        """The type with id ``type_id``, or None for 0 (void)."""
        if type_id == 0:
            return None
        t = self._types.get(type_id)
        if t is not None:
            return t
        self._check_id(type_id)
        if self.base is not None and type_id < self.first_id:
            return self.base.type(type_id)
        w = self._words
        i = self._record(type_id)
        name_off, info, size_type = w[i], w[i + 1], w[i + 2]
        kind = (info >> 24) & 0x1F
        ref = 0
        size: Optional[int] = None
        if kind in SIZED_KINDS:
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
        while t.id < btf.first_id and btf.base is not None:
            btf = btf.base
        return btf, btf._record(t.id)

    @guarded
    def int_encoding(self, t: BtfType) -> tuple[int, int, int]:
        """(encoding, bit offset, bits) of an INT."""
        btf, i = self._local(t)
        v = btf._words[i + 3]
        return (v >> 24) & 0x0F, (v >> 16) & 0xFF, v & 0xFF

    @guarded
    def array_info(self, t: BtfType) -> tuple[int, int]:
        """(element type id, element count) of an ARRAY."""
        btf, i = self._local(t)
        w = btf._words
        return w[i + 3], w[i + 5]

    @guarded
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

    @guarded
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

    @guarded
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
        its offset among the records' name offsets (both searches run in C); after a few lookups,
        from an index of all names (built once: dearer than one search, cheaper than many)."""
        if not name:
            return []
        if self._names is None:
            self._lookups += 1
            if self._lookups > SCANS_BEFORE_INDEX:
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

    @guarded
    def find(self, name: str, kind: Optional[int] = None) -> list[BtfType]:
        """The types called ``name`` (of ``kind`` if given), this blob's first, then the base's."""
        out = [t for t in map(self.type, self._ids_named(name)) if t is not None]  # (named: never void)
        if kind is not None:
            out = [t for t in out if t.kind == kind]
        if self.base is not None:
            out.extend(self.base.find(name, kind))
        return out

    @guarded
    def names(self, kind: int) -> Iterator[str]:
        """Every name of a type of ``kind`` (for suggestions)."""
        for name, ids in self._name_index().items():
            if any((t := self.type(i)) is not None and t.kind == kind for i in ids):
                yield name
        if self.base is not None:
            yield from self.base.names(kind)

    def __len__(self) -> int:
        return self.nr_types - 1

    def __repr__(self) -> str:
        return f"Btf({self.source!r}, {len(self)} types{', split' if self.base is not None else ''})"

def load_kernel_btf(path: Optional[os.PathLike | str] = None, *, base: Optional[Btf] = None) -> Btf:
    """Read kernel BTF: ``/sys/kernel/btf/vmlinux`` (the running kernel) when ``path`` is None;
    else ``path`` is raw BTF or an ELF file (a vmlinux, or a ``.ko``) with a ``.BTF`` section.
    A module's BTF is split BTF: give ``base``, the BTF of the kernel it was built for; a
    module's BTF read from ``/sys/kernel/btf/<module>`` gets the running kernel's by default."""
    p = Path(path) if path is not None else KERNEL_BTF
    try:
        with open_regular(p) as f:
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
        from ..elf import ElfFile

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
    running = host() if str(p).startswith("/sys/") else None  # (the running kernel's: this machine's)
    return Btf(data, base=base, source=str(p), machine=running.elf_machine if running is not None else None)


def load_module_btf(name: str, path: os.PathLike | str) -> Btf:
    """A module's BTF, split BTF on top of the running kernel's: ``/sys/kernel/btf/<name>`` when the
    module is loaded (what the kernel itself uses), else the ``.BTF`` section of its object ``path``
    (which must have been built for the running kernel)."""
    loaded = KERNEL_BTF.parent / name
    if loaded.is_file():
        return load_kernel_btf(loaded)
    return load_kernel_btf(path, base=load_kernel_btf())
