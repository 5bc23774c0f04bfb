"""A small, fast ELF reader: headers, PT_LOAD segments, sections, symbol tables with versions, notes.

Everything is parsed straight from an ``mmap`` of the file with ``struct``, so a symbol table of
ten thousand entries loads in milliseconds (pyelftools is kept for DWARF, where it is needed).
File offsets for uprobes come from the PT_LOAD segment that holds an address, which is what the
kernel maps; perf uses the delta of the ``.text`` section instead, which agrees for ordinary
binaries but not for code placed in another executable segment.

Every failure caused by the file itself (not ELF, truncated, corrupt) raises a ``ProbectlError``:
``TargetError`` when the file cannot be opened or is not ELF at all, ``DebugInfoError`` otherwise.
"""
from __future__ import annotations

import bisect
import fnmatch
import functools
import itertools
import mmap
import operator
import os
import re
import stat
import struct
import zlib
from array import array
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Iterator, Optional, TypeVar

from ..errors import DebugInfoError, ProbectlError, TargetError

DEBUG_ROOT = Path("/usr/lib/debug")

# e_type
_ELF_TYPES = {0: "NONE", 1: "REL", 2: "EXEC", 3: "DYN", 4: "CORE"}
# p_type
PT_LOAD, PT_DYNAMIC, PT_INTERP, PT_NOTE = 1, 2, 3, 4
# p_flags
PF_X, PF_W, PF_R = 1, 2, 4
# sh_type
SHT_NULL, SHT_PROGBITS, SHT_SYMTAB, SHT_STRTAB = 0, 1, 2, 3
SHT_NOTE, SHT_NOBITS, SHT_DYNSYM, SHT_SYMTAB_SHNDX = 7, 8, 11, 18
SHT_GNU_VERDEF, SHT_GNU_VERNEED, SHT_GNU_VERSYM = 0x6FFFFFFD, 0x6FFFFFFE, 0x6FFFFFFF
# sh_flags
SHF_COMPRESSED = 0x800
ELFCOMPRESS_ZLIB, ELFCOMPRESS_ZSTD = 1, 2
# special section indexes
SHN_UNDEF, SHN_LORESERVE, SHN_ABS, SHN_COMMON, SHN_XINDEX = 0, 0xFF00, 0xFFF1, 0xFFF2, 0xFFFF
# dynamic tags
DT_NULL, DT_STRTAB, DT_SONAME, DT_FLAGS_1 = 0, 5, 14, 0x6FFFFFFB
DF_1_PIE = 0x08000000
# notes
NT_GNU_BUILD_ID = 3
# version indexes
VER_NDX_LOCAL, VER_NDX_GLOBAL, VERSYM_HIDDEN = 0, 1, 0x8000

SYMBOL_TYPES = {0: "NOTYPE", 1: "OBJECT", 2: "FUNC", 3: "SECTION", 4: "FILE", 5: "COMMON", 6: "TLS",
                10: "IFUNC"}
SYMBOL_BINDS = {0: "LOCAL", 1: "GLOBAL", 2: "WEAK", 10: "UNIQUE"}
_FUNCTION_TYPES = ("FUNC", "IFUNC")
_BIND_RANK = {"GLOBAL": 0, "WEAK": 1, "UNIQUE": 2, "LOCAL": 3}
_GLOB_CHARS = re.compile(r"[*?\[]")
# st_info byte -> 1 for FUNC and IFUNC symbols, else 0 (a bytes.translate table).
_FUNCTION_INFO = bytes(1 if (info & 0xF) in (2, 10) else 0 for info in range(256))
_NONZERO = bytes([0] + [1] * 255)  # byte -> 1 if it is not 0
_NOT = bytes([1, 0] + [0] * 254)  # 0 <-> 1
# Symbol tables at least this large keep their address order in the cache (vmlinux: 2.8 MB).
_CACHED_TABLE_BYTES = 1 << 20
_SYMBOL_INDEX_FORMAT = 1
# array typecodes by item size
_TYPECODES = {size: next(c for c in "BHILQ" if array(c).itemsize == size) for size in (1, 2, 4, 8)}

_T = TypeVar("_T")


def _guarded(method: Callable[..., _T]) -> Callable[..., _T]:
    """Turn a low-level parse failure that slipped past the explicit checks into a DebugInfoError."""

    @functools.wraps(method)
    def wrapper(self: "ElfFile", *args, **kwargs):
        try:
            return method(self, *args, **kwargs)
        except ProbectlError:
            raise
        except (struct.error, IndexError, ValueError, OverflowError, UnicodeError, zlib.error,
                MemoryError) as exc:
            raise DebugInfoError(f"{self.path}: corrupt ELF file ({exc.__class__.__name__}: {exc})",
                                 hint="the file may be truncated or damaged; rebuild or reinstall it") from None

    return wrapper


@dataclass(frozen=True)
class Segment:
    """A PT_LOAD program header: what the loader maps, and so what a uprobe offset refers to."""

    vaddr: int
    offset: int
    filesz: int
    memsz: int
    flags: int

    @property
    def executable(self) -> bool:
        return bool(self.flags & PF_X)


@dataclass(frozen=True)
class Section:
    """A section header, with its name resolved."""

    name: str
    index: int
    type: int
    flags: int
    addr: int
    offset: int
    size: int
    link: int
    info: int
    addralign: int
    entsize: int

    @property
    def has_data(self) -> bool:
        return self.type not in (SHT_NULL, SHT_NOBITS)

    @property
    def compressed(self) -> bool:
        return bool(self.flags & SHF_COMPRESSED) or self.name.startswith(".zdebug")


@dataclass(frozen=True)
class ElfSymbol:
    """One symbol of ``.symtab`` or ``.dynsym``; ``name`` never carries the ``@version`` suffix."""

    name: str
    value: int
    size: int
    type: str
    bind: str
    shndx: int
    version: Optional[str] = None
    default_version: bool = True
    table: str = "symtab"

    @property
    def versioned_name(self) -> str:
        """The name as readelf and the linker write it: ``malloc@@GLIBC_2.2.5``, ``memcpy@GLIBC_2.2.5``, ``main``."""
        if self.version is None:
            return self.name
        return f"{self.name}{'@@' if self.default_version else '@'}{self.version}"

    @property
    def defined(self) -> bool:
        return self.shndx != SHN_UNDEF

    @property
    def is_function(self) -> bool:
        return self.type in _FUNCTION_TYPES and self.shndx != SHN_UNDEF


def _alias_rank(sym: ElfSymbol) -> tuple:
    """Sort key choosing the name to show among aliases: global, default version, fewest leading '_'."""
    return (_BIND_RANK.get(sym.bind, 4), not sym.default_version,
            len(sym.name) - len(sym.name.lstrip("_")), len(sym.name), sym.name)


def _split_version(name: str) -> tuple[str, Optional[str], bool]:
    """``memcpy@@GLIBC_2.14`` → (``memcpy``, ``GLIBC_2.14``, True); names without '@' pass through."""
    at = name.find("@")
    if at <= 0:
        return name, None, True
    if name.startswith("@@", at):
        return name[:at], name[at + 2:], True
    return name[:at], name[at + 1:], False


class ElfFile:
    """An ELF file opened for reading; headers are parsed at once, symbols on first use.

    Use as a context manager, or call ``close()``, to release the mapping early.
    """

    def __init__(self, path: os.PathLike | str):
        self.path = Path(path)
        self._map: Optional[mmap.mmap] = None
        self._data = self._open()
        try:
            self._parse_headers()
        except ProbectlError:
            self.close()
            raise
        except (struct.error, IndexError, ValueError, OverflowError, UnicodeError) as exc:
            self.close()
            raise DebugInfoError(f"{self.path}: corrupt ELF headers ({exc})",
                                 hint="the file may be truncated or damaged; rebuild or reinstall it") from None
        self._symbols: Optional[list[ElfSymbol]] = None
        self._functions: Optional[list[ElfSymbol]] = None
        self._by_name: Optional[dict[str, list[ElfSymbol]]] = None
        self._by_address: Optional[_AddressIndex] = None
        self._strtabs: dict[int, bytes] = {}
        self._symbol_columns: dict[int, tuple] = {}
        self._symbol_fields: dict[tuple[int, int], tuple[bytes, int]] = {}
        self._symbol_names: dict[int, dict[int, str]] = {}
        self._table_extras: dict[tuple[str, int], object] = {}

    # --- opening and headers -------------------------------------------------------------------

    def _open(self) -> bytes | mmap.mmap:
        try:
            with open(self.path, "rb") as f:
                st = os.fstat(f.fileno())
                if not stat.S_ISREG(st.st_mode):
                    raise TargetError(f"{self.path} is not a regular file")
                if st.st_size == 0:
                    raise TargetError(f"{self.path} is empty, not an ELF file")
                self._map = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
                return self._map
        except IsADirectoryError:
            raise TargetError(f"{self.path} is a directory, not an ELF file") from None
        except FileNotFoundError:
            raise TargetError(f"{self.path} does not exist") from None
        except PermissionError:
            raise TargetError(f"{self.path}: permission denied", hint="run as root or fix the file's mode") from None
        except OSError as exc:
            raise TargetError(f"{self.path}: cannot read ({exc.strerror or exc})") from None

    def close(self) -> None:
        if self._map is not None:
            self._map.close()
            self._map = None

    def __enter__(self) -> "ElfFile":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"ElfFile({str(self.path)!r}, {self.type}, {self.elf_class}-bit, machine={self.machine})"

    def _corrupt(self, what: str) -> DebugInfoError:
        return DebugInfoError(f"{self.path}: {what}",
                              hint="the file may be truncated or damaged; rebuild or reinstall it")

    def _parse_headers(self) -> None:
        data = self._data
        size = len(data)
        if size < 4 or data[:4] != b"\x7fELF":
            raise TargetError(f"{self.path} is not an ELF file", hint=_non_elf_hint(data[:64]))
        if size < 16:
            raise self._corrupt("truncated ELF identification")
        ei_class, ei_data = data[4], data[5]
        if ei_class not in (1, 2):
            raise self._corrupt(f"unknown ELF class {ei_class}")
        if ei_data not in (1, 2):
            raise self._corrupt(f"unknown ELF data encoding {ei_data}")
        self.elf_class = 32 if ei_class == 1 else 64
        self.little_endian = ei_data == 1
        e = "<" if self.little_endian else ">"
        self._endian = e
        is64 = self.elf_class == 64
        ehdr = struct.Struct(e + ("HHIQQQIHHHHHH" if is64 else "HHIIIIIHHHHHH"))
        if size < 16 + ehdr.size:
            raise self._corrupt("truncated ELF header")
        (e_type, self.machine, _version, self.entry, phoff, shoff, _flags, _ehsize,
         phentsize, phnum, shentsize, shnum, shstrndx) = ehdr.unpack_from(data, 16)
        self.type = _ELF_TYPES.get(e_type, f"0x{e_type:x}")
        self._sym_struct = struct.Struct(e + ("IBBHQQ" if is64 else "IIIBBH"))
        self._shdr_struct = struct.Struct(e + ("IIQQQQIIQQ" if is64 else "IIIIIIIIII"))
        self._phdr_struct = struct.Struct(e + ("IIQQQQQQ" if is64 else "IIIIIIII"))
        self._dyn_struct = struct.Struct(e + ("qQ" if is64 else "iI"))

        # Section headers first: extended numbering keeps phnum/shnum/shstrndx in section 0.
        self.sections: list[Section] = []
        raw_sections: list[tuple] = []
        if shoff:
            if shentsize != self._shdr_struct.size:
                raise self._corrupt(f"bad section header size {shentsize}")
            if shoff + shentsize > size:
                raise self._corrupt("truncated file: section headers lie beyond its end")
            first = self._shdr_struct.unpack_from(data, shoff)
            if shnum == 0:
                shnum = first[5]
            if shstrndx == SHN_XINDEX:
                shstrndx = first[6]
            if phnum == 0xFFFF:
                phnum = first[7]
            if shoff + shnum * shentsize > size:
                raise self._corrupt(f"truncated file: {shnum} section headers do not fit")
            raw_sections = [self._shdr_struct.unpack_from(data, shoff + i * shentsize) for i in range(shnum)]

        self._program_headers: list[tuple] = []
        if phoff and phnum:
            if phentsize != self._phdr_struct.size:
                raise self._corrupt(f"bad program header size {phentsize}")
            if phoff + phnum * phentsize > size:
                raise self._corrupt("truncated file: program headers lie beyond its end")
            for i in range(phnum):
                fields = self._phdr_struct.unpack_from(data, phoff + i * phentsize)
                if is64:
                    p_type, p_flags, p_offset, p_vaddr, _paddr, p_filesz, p_memsz, p_align = fields
                else:
                    p_type, p_offset, p_vaddr, _paddr, p_filesz, p_memsz, p_flags, p_align = fields
                self._program_headers.append((p_type, p_flags, p_offset, p_vaddr, p_filesz, p_memsz, p_align))
        self.segments: list[Segment] = [
            Segment(vaddr=v, offset=o, filesz=fs, memsz=ms, flags=fl)
            for (t, fl, o, v, fs, ms, _a) in self._program_headers if t == PT_LOAD]

        if raw_sections:
            names = b""
            if 0 < shstrndx < len(raw_sections):
                st = raw_sections[shstrndx]
                if st[1] != SHT_NOBITS:
                    names = self._bytes(st[4], st[5], "section name table")
            for i, (name, typ, flags, addr, offset, ssize, link, info, align, entsize) in enumerate(raw_sections):
                if typ != SHT_NOBITS and typ != SHT_NULL and offset + ssize > size:
                    raise self._corrupt(f"truncated file: section {i} ({_cstr(names, name)!r}) "
                                        f"extends past the end of the file")
                self.sections.append(Section(_cstr(names, name), i, typ, flags, addr, offset, ssize,
                                             link, info, align, entsize))
        self._section_by_name: dict[str, Section] = {}
        for sec in self.sections:
            self._section_by_name.setdefault(sec.name, sec)

        self.interpreter: Optional[str] = None
        self.soname: Optional[str] = None
        dynamic: dict[int, int] = {}
        for (t, _fl, o, _v, fs, _ms, _a) in self._program_headers:
            if t == PT_INTERP and o + fs <= size:
                self.interpreter = bytes(data[o:o + fs]).split(b"\0", 1)[0].decode("utf-8", "replace")
            elif t == PT_DYNAMIC and o + fs <= size:
                dynamic = self._dynamic_entries(o, fs)
        if DT_SONAME in dynamic:
            dynstr = self.section(".dynstr")
            if dynstr is not None and dynstr.has_data and dynamic[DT_SONAME] < dynstr.size:
                self.soname = _cstr(self._bytes(dynstr.offset, dynstr.size, "section .dynstr"), dynamic[DT_SONAME])
        # A PIE is a DYN file marked DF_1_PIE by the linker; older linkers did not mark it, so a DYN
        # file with an interpreter and no soname counts too. Shared libraries that can also run as
        # programs (libc.so.6 has PT_INTERP) are libraries, not PIEs.
        self.is_pie = self.type == "DYN" and (
            bool(dynamic.get(DT_FLAGS_1, 0) & DF_1_PIE)
            or (self.interpreter is not None and DT_SONAME not in dynamic))

    def _bytes(self, offset: int, length: int, what: str) -> bytes:
        if offset < 0 or length < 0 or offset + length > len(self._data):
            raise self._corrupt(f"truncated file: {what} at 0x{offset:x} (+0x{length:x}) is past its end")
        return bytes(self._data[offset:offset + length])

    def _dynamic_entries(self, offset: int, length: int) -> dict[int, int]:
        """The first value of each tag in the dynamic section at ``offset``."""
        dyn = self._dyn_struct
        out: dict[int, int] = {}
        for pos in range(offset, offset + length - dyn.size + 1, dyn.size):
            tag, val = dyn.unpack_from(self._data, pos)
            if tag == DT_NULL:
                break
            out.setdefault(tag, val)
        return out

    # --- sections --------------------------------------------------------------------------------

    def section(self, name: str) -> Optional[Section]:
        """The first section called ``name``, or None."""
        return self._section_by_name.get(name)

    @_guarded
    def section_bytes_at(self, sec: Section, offset: int, length: int) -> bytes:
        """``length`` bytes of the (uncompressed) section ``sec`` from ``offset``, read alone."""
        if sec.compressed or not sec.has_data:
            raise DebugInfoError(f"{self.path}: section {sec.name} is compressed or has no data")
        if offset < 0 or length < 0 or offset + length > sec.size:
            raise self._corrupt(f"section {sec.name}: 0x{offset:x} (+0x{length:x}) is past its end")
        return self._bytes(sec.offset + offset, length, f"section {sec.name}")

    @_guarded
    def section_data(self, name: str) -> bytes:
        """The contents of section ``name``, decompressed if it is compressed (SHF_COMPRESSED or .zdebug)."""
        sec = self.section(name)
        if sec is None:
            raise DebugInfoError(f"{self.path} has no section {name}")
        return self._section_bytes(sec)

    def _section_bytes(self, sec: Section) -> bytes:
        if not sec.has_data:
            raise DebugInfoError(f"{self.path}: section {sec.name} has no data in this file (NOBITS)",
                                 hint="this is probably a stripped binary or a debug-only file; "
                                      "read the section from the other file")
        raw = self._bytes(sec.offset, sec.size, f"section {sec.name}")
        if sec.flags & SHF_COMPRESSED:
            return self._decompress_chdr(sec, raw)
        if sec.name.startswith(".zdebug"):
            if len(raw) < 12 or raw[:4] != b"ZLIB":
                raise self._corrupt(f"section {sec.name} lacks its ZLIB header")
            expected = int.from_bytes(raw[4:12], "big")
            return self._inflate(sec, raw[12:], expected)
        return raw

    def _decompress_chdr(self, sec: Section, raw: bytes) -> bytes:
        e = self._endian
        chdr = struct.Struct(e + ("IIQQ" if self.elf_class == 64 else "III"))
        if len(raw) < chdr.size:
            raise self._corrupt(f"section {sec.name}: truncated compression header")
        fields = chdr.unpack_from(raw, 0)
        ch_type, ch_size = fields[0], fields[2] if self.elf_class == 64 else fields[1]
        if ch_type == ELFCOMPRESS_ZLIB:
            return self._inflate(sec, raw[chdr.size:], ch_size)
        if ch_type == ELFCOMPRESS_ZSTD:
            try:
                import zstandard  # type: ignore[import-not-found]
            except ImportError:
                raise DebugInfoError(f"{self.path}: section {sec.name} is zstd-compressed",
                                     hint="install the Python 'zstandard' package, or decompress the file "
                                          "with 'objcopy --decompress-debug-sections'") from None
            try:
                out = zstandard.ZstdDecompressor().decompress(raw[chdr.size:], max_output_size=ch_size)
            except zstandard.ZstdError as exc:
                raise self._corrupt(f"section {sec.name}: bad zstd data ({exc})") from None
            if len(out) != ch_size:
                raise self._corrupt(f"section {sec.name}: decompressed to {len(out)} bytes, expected {ch_size}")
            return out
        raise DebugInfoError(f"{self.path}: section {sec.name} uses unknown compression type {ch_type}")

    def _inflate(self, sec: Section, payload: bytes, expected: int) -> bytes:
        # Refuse absurd sizes from corrupt headers before allocating anything.
        if expected > max(64 * len(payload), 1 << 20) + (1 << 30):
            raise self._corrupt(f"section {sec.name}: implausible decompressed size {expected}")
        try:
            d = zlib.decompressobj()
            out = d.decompress(payload, expected + 1)
        except zlib.error as exc:
            raise self._corrupt(f"section {sec.name}: bad zlib data ({exc})") from None
        if len(out) != expected:
            raise self._corrupt(f"section {sec.name}: decompressed to {len(out)} bytes, expected {expected}")
        return out

    @property
    def has_dwarf(self) -> bool:
        """Whether this file carries DWARF (.debug_info with data, possibly compressed, or .zdebug_info)."""
        for name in (".debug_info", ".zdebug_info"):
            sec = self.section(name)
            if sec is not None and sec.has_data and sec.size > 0:
                return True
        return False

    # --- notes: build-id and debuglink ----------------------------------------------------------

    def _notes(self) -> Iterator[tuple[bytes, int, bytes]]:
        """(name, type, desc) of every note, from SHT_NOTE sections, or PT_NOTE segments if there are none."""
        areas = [(s.offset, s.size, s.addralign) for s in self.sections
                 if s.type == SHT_NOTE and s.offset + s.size <= len(self._data)]
        if not areas:
            areas = [(o, fs, a) for (t, _fl, o, _v, fs, _ms, a) in self._program_headers
                     if t == PT_NOTE and o + fs <= len(self._data)]
        hdr = struct.Struct(self._endian + "III")
        for offset, length, align in areas:
            align = 8 if align == 8 else 4
            pos, end = offset, offset + length
            while pos + hdr.size <= end:
                namesz, descsz, ntype = hdr.unpack_from(self._data, pos)
                pos += hdr.size
                name_end = pos + namesz
                desc_pos = pos + _align_up(namesz, align)
                desc_end = desc_pos + descsz
                if desc_end > end:
                    break
                yield bytes(self._data[pos:name_end]).rstrip(b"\0"), ntype, bytes(self._data[desc_pos:desc_end])
                pos = desc_pos + _align_up(descsz, align)

    @functools.cached_property
    def build_id(self) -> Optional[str]:
        """The GNU build-id as lower-case hex, or None."""
        try:
            for name, ntype, desc in self._notes():
                if name == b"GNU" and ntype == NT_GNU_BUILD_ID and desc:
                    return desc.hex()
        except struct.error:
            pass
        return None

    @functools.cached_property
    def debuglink(self) -> Optional[tuple[str, int]]:
        """(file name, CRC32) from .gnu_debuglink, or None."""
        sec = self.section(".gnu_debuglink")
        if sec is None or not sec.has_data:
            return None
        raw = self._bytes(sec.offset, sec.size, "section .gnu_debuglink")
        nul = raw.find(b"\0")
        if nul <= 0:
            raise self._corrupt("section .gnu_debuglink has no file name")
        crc_pos = _align_up(nul + 1, 4)
        if crc_pos + 4 > len(raw):
            raise self._corrupt("section .gnu_debuglink is truncated (no CRC)")
        crc = struct.unpack_from(self._endian + "I", raw, crc_pos)[0]
        name = raw[:nul].decode("utf-8", "surrogateescape")
        if "/" in name:
            raise self._corrupt(f"section .gnu_debuglink names a path ({name!r}), not a file name")
        return name, crc

    # --- symbols ----------------------------------------------------------------------------------

    @_guarded
    def symbols(self) -> list[ElfSymbol]:
        """All named symbols of .symtab and .dynsym, each (name, value, version) once, with versions."""
        if self._symbols is None:
            self._symbols = self._load_symbols()
        return self._symbols

    @_guarded
    def find_symbols(self, name: str) -> list[ElfSymbol]:
        """The symbols of any type called ``name`` (every version), as ``symbols()`` has them, in
        its order; while the table is not loaded only the entries of that name are decoded."""
        return self.find_symbols_named((name,))[name]

    @_guarded
    def find_symbols_named(self, names: Iterable[str]) -> dict[str, list[ElfSymbol]]:
        """``find_symbols`` of each of ``names`` at once (one pass over the tables)."""
        wanted = set(names)
        found: dict[str, list[ElfSymbol]] = {name: [] for name in wanted}
        for sym in (self._symbols if self._symbols is not None else self._load_symbols(wanted)):
            if sym.name in wanted:
                found[sym.name].append(sym)
        return found

    def _symbol_tables(self) -> list[tuple[Section, str]]:
        """The symbol tables in the order their symbols are merged: .symtab first, then .dynsym."""
        return ([(s, "symtab") for s in self.sections if s.type == SHT_SYMTAB and s.has_data]
                + [(s, "dynsym") for s in self.sections if s.type == SHT_DYNSYM and s.has_data])

    def _load_symbols(self, names: Optional[Iterable[str]] = None) -> list[ElfSymbol]:
        """``symbols()``, or with ``names`` only the symbols with those names (any version), found
        by searching the string tables for them and decoding only the entries that point there."""
        merged: dict[tuple[str, int], list[ElfSymbol]] = {}
        for sec, table in self._symbol_tables():
            entries = None
            if names is not None:
                offsets: set[int] = set()
                for name in names:
                    offsets |= self._string_offsets(sec, name)
                entries = self._entries_named(sec, offsets)
                if not entries:
                    continue
            for _i, sym in self._decode_symbols(sec, table, entries):
                key = (sym.name, sym.value)
                group = merged.get(key)
                if group is None:
                    merged[key] = [sym]
                else:
                    group.append(sym)
        out: list[ElfSymbol] = []
        for group in merged.values():
            out.extend(group if len(group) == 1 else _merge_duplicates(group))
        return out

    def _string_table(self, sec: Section) -> bytes:
        """The string table of symbol table ``sec`` (cached)."""
        if not 0 < sec.link < len(self.sections):
            raise self._corrupt(f"section {sec.name}: string table index {sec.link} is invalid")
        cached = self._strtabs.get(sec.link)
        if cached is None:
            strsec = self.sections[sec.link]
            cached = self._strtabs[sec.link] = self._section_bytes(strsec) if strsec.has_data else b""
        return cached

    def _string_offsets(self, sec: Section, name: str) -> set[int]:
        """Offsets in ``sec``'s string table where a symbol named ``name`` or ``name@VERSION`` starts
        (inside longer strings too: linkers share string tails)."""
        if not 0 < sec.link < len(self.sections):
            raise self._corrupt(f"section {sec.name}: string table index {sec.link} is invalid")
        strsec = self.sections[sec.link]
        if sec.link in self._strtabs or strsec.compressed or not strsec.has_data:
            data, start, end = self._string_table(sec), 0, None
        else:  # searched in place: no copy of a large table for one name
            data, start, end = self._data, strsec.offset, strsec.offset + strsec.size
        key = name.encode("utf-8", "surrogateescape")
        found: set[int] = set()
        versioned = self._table_extras.get(("versioned", sec.link))
        if versioned is None:  # no '@' at all in the table (a kernel's): no NAME@VERSION to look for
            versioned = self._table_extras[("versioned", sec.link)] = data.find(b"@", start, end) >= 0
        for pattern in (key + b"\0", key + b"@") if versioned else (key + b"\0",):
            at = data.find(pattern, start, end)
            while at >= 0:
                found.add(at - start)
                at = data.find(pattern, at + 1, end)
        return found

    def _columns(self, sec: Section) -> tuple[array, array, bytes, array]:
        """(st_name, st_value, st_info, st_shndx) of every entry of symbol table ``sec``, as
        columns cut from the raw table in C (cached): no per-entry Python work."""
        cached = self._symbol_columns.get(sec.index)
        if cached is not None:
            return cached
        size = self._entry_size(sec)
        raw = self._bytes(sec.offset, sec.size - sec.size % size, f"section {sec.name}")
        swap = not self.little_endian
        words = _array(4, raw, swap)
        halves = _array(2, raw, swap)
        if self.elf_class == 64:  # name:4 info:1 other:1 shndx:2 value:8 size:8
            columns = (words[0::6], _array(8, raw, swap)[1::3], raw[4::24], halves[3::12])
        else:  # name:4 value:4 size:4 info:1 other:1 shndx:2
            columns = (words[0::4], words[1::4], raw[12::16], halves[7::8])
        self._symbol_columns[sec.index] = columns
        return columns

    def _entries_named(self, sec: Section, offsets: set[int]) -> list[int]:
        """Indexes of the entries of ``sec`` whose st_name is one of ``offsets``, in table order."""
        return self._entries_matching(sec, 0, offsets)

    def _entries_matching(self, sec: Section, column: int, wanted: set[int]) -> list[int]:
        """Indexes of the entries of ``sec`` whose field ``column`` of ``_columns`` (0: st_name,
        1: st_value) is one of ``wanted``, in table order: each value's bytes are searched for in
        that field's bytes of every entry (``_field_bytes``), in C, without decoding the table."""
        if not wanted:
            return []
        if len(wanted) > 8:  # a search per value would cost more than one pass over the column
            items = self._columns(sec)[column]
            return list(itertools.compress(range(len(items)), map(wanted.__contains__, items)))
        data, width = self._field_bytes(sec, column)
        found = []
        for value in wanted:
            if not 0 <= value < 1 << (8 * width):
                continue
            needle = value.to_bytes(width, "little" if self.little_endian else "big")
            at = data.find(needle)
            while at >= 0:
                if at % width == 0:
                    found.append(at // width)
                at = data.find(needle, at + 1)
        return sorted(found)

    def _field_bytes(self, sec: Section, column: int) -> tuple[bytes, int]:
        """(bytes, width): field ``column`` (0: st_name, 1: st_value) of every entry of ``sec``, one
        after the other (cached). Searching these instead of the whole table keeps a value's bytes
        from matching inside other fields, and there are 3 to 6 times fewer bytes to search."""
        key = (sec.index, column)
        cached = self._symbol_fields.get(key)
        if cached is not None:
            return cached
        size = self._entry_size(sec)
        count = sec.size // size
        start = sec.offset
        if start + count * size > len(self._data):
            raise self._corrupt(f"truncated file: section {sec.name} extends past the end of the file")
        # 64-bit entry: name:4 info:1 other:1 shndx:2 value:8 size:8; 32-bit: name:4 value:4 size:4 ...
        # Cut as a strided view of words, in C; the bytes keep the file's byte order.
        if column == 0:
            width, fmt, first, step = 4, "I", 0, size // 4
        elif self.elf_class == 64:
            width, fmt, first, step = 8, "Q", 1, size // 8
        else:
            width, fmt, first, step = 4, "I", 1, size // 4
        view = memoryview(self._data)[start:start + count * size]
        try:
            out = view.cast(fmt)[first::step].tobytes()
        finally:
            view.release()
        self._symbol_fields[key] = (out, width)
        return out, width

    def _entry_size(self, sec: Section) -> int:
        size = self._sym_struct.size
        if sec.entsize not in (0, size):
            raise self._corrupt(f"section {sec.name}: symbol entry size {sec.entsize}, expected {size}")
        return size

    def _read_symbol_table(self, sec: Section, table: str) -> list[ElfSymbol]:
        """The named symbols of ``sec``."""
        return [sym for _i, sym in self._decode_symbols(sec, table)]

    def _decode_symbols(self, sec: Section, table: str,
                        entries: Optional[Iterable[int]] = None) -> Iterator[tuple[int, ElfSymbol]]:
        """(entry index, symbol) of the named symbols of ``sec``; with ``entries``, of just those
        entries, in the order given."""
        sym_struct = self._sym_struct
        size = self._entry_size(sec)
        strtab = self._string_table(sec)
        if entries is None:
            raw = self._bytes(sec.offset, sec.size - sec.size % size, f"section {sec.name}")
            rows: Iterable[tuple[int, tuple]] = enumerate(sym_struct.iter_unpack(raw))
        else:
            count = sec.size // size
            data, base = self._data, sec.offset
            rows = ((i, sym_struct.unpack_from(data, base + i * size)) for i in entries if 0 <= i < count)
        versions = self._versions_for(sec)
        xindex = self._xindex_for(sec)
        is64 = self.elf_class == 64
        names = self._symbol_names.setdefault(sec.index, {})
        new = object.__new__
        find = strtab.find
        types, binds = SYMBOL_TYPES, SYMBOL_BINDS
        for i, fields in rows:
            if is64:
                st_name, st_info, _other, st_shndx, st_value, st_size = fields
            else:
                st_name, st_value, st_size, st_info, _other, st_shndx = fields
            if st_name == 0:
                continue
            name = names.get(st_name)
            if name is None:
                end = find(b"\0", st_name)
                if end < 0 or st_name >= len(strtab):
                    raise self._corrupt(f"section {sec.name}: symbol {i} has a name outside its string table")
                name = strtab[st_name:end].decode("utf-8", "surrogateescape")
                names[st_name] = name
            if not name:
                continue
            version: Optional[str] = None
            default = True
            if "@" in name:
                name, version, default = _split_version(name)
            elif versions is not None and i < len(versions):
                ndx = versions[i]
                entry = versions.names.get(ndx & ~VERSYM_HIDDEN)
                if entry is not None:
                    # '@@' only for a version this file defines (.gnu.version_d) and does not hide;
                    # references to another file's version (.gnu.version_r) are written with '@'.
                    version, defined_here = entry
                    default = defined_here and not (ndx & VERSYM_HIDDEN) and st_shndx != SHN_UNDEF
                    if version == name and st_shndx == SHN_ABS:
                        version = None  # the marker symbol of a version definition, e.g. GLIBC_2.27
            if st_shndx == SHN_XINDEX and xindex is not None and i < len(xindex):
                st_shndx = xindex[i]
            typ = st_info & 0xF
            bind = st_info >> 4
            # Fast construction of a frozen dataclass: same fields as __init__, without its per-field cost.
            sym = new(ElfSymbol)
            sym.__dict__.update(name=name, value=st_value, size=st_size,
                                type=types.get(typ) or f"TYPE{typ}", bind=binds.get(bind) or f"BIND{bind}",
                                shndx=st_shndx, version=version, default_version=default, table=table)
            yield i, sym

    def _versions_for(self, symsec: Section) -> Optional["_VersionTable"]:
        key = ("versions", symsec.index)
        if key not in self._table_extras:
            self._table_extras[key] = self._read_versions(symsec)
        return self._table_extras[key]

    def _read_versions(self, symsec: Section) -> Optional["_VersionTable"]:
        versym = next((s for s in self.sections if s.type == SHT_GNU_VERSYM and s.link == symsec.index
                       and s.has_data), None)
        if versym is None:
            return None
        raw = self._bytes(versym.offset, versym.size - versym.size % 2, "section .gnu.version")
        table = _VersionTable(struct.unpack(f"{self._endian}{len(raw) // 2}H", raw))
        for sec in self.sections:
            if sec.type == SHT_GNU_VERDEF and sec.has_data:
                self._read_verdef(sec, table.names)
            elif sec.type == SHT_GNU_VERNEED and sec.has_data:
                self._read_verneed(sec, table.names)
        return table

    def _version_strings(self, sec: Section) -> bytes:
        if not 0 < sec.link < len(self.sections) or not self.sections[sec.link].has_data:
            raise self._corrupt(f"section {sec.name}: string table index {sec.link} is invalid")
        return self._section_bytes(self.sections[sec.link])

    def _read_verdef(self, sec: Section, names: dict[int, tuple[str, bool]]) -> None:
        strtab = self._version_strings(sec)
        data = self._bytes(sec.offset, sec.size, f"section {sec.name}")
        verdef = struct.Struct(self._endian + "HHHHIII")
        verdaux = struct.Struct(self._endian + "II")
        pos = 0
        for _ in range(sec.info or 0x10000):
            if pos + verdef.size > len(data):
                raise self._corrupt(f"section {sec.name} is truncated")
            _ver, flags, ndx, cnt, _hash, aux, nxt = verdef.unpack_from(data, pos)
            if cnt and pos + aux + verdaux.size <= len(data):
                vda_name, _ = verdaux.unpack_from(data, pos + aux)
                # The base definition (VER_FLG_BASE) is the file's own soname, not a symbol version.
                if not flags & 1:
                    names[ndx] = (_cstr(strtab, vda_name), True)
            if nxt == 0:
                break
            pos += nxt

    def _read_verneed(self, sec: Section, names: dict[int, tuple[str, bool]]) -> None:
        strtab = self._version_strings(sec)
        data = self._bytes(sec.offset, sec.size, f"section {sec.name}")
        verneed = struct.Struct(self._endian + "HHIII")
        vernaux = struct.Struct(self._endian + "IHHII")
        pos = 0
        for _ in range(sec.info or 0x10000):
            if pos + verneed.size > len(data):
                raise self._corrupt(f"section {sec.name} is truncated")
            _ver, cnt, _file, aux, nxt = verneed.unpack_from(data, pos)
            apos = pos + aux
            for _ in range(cnt):
                if apos + vernaux.size > len(data):
                    raise self._corrupt(f"section {sec.name} is truncated")
                _hash, _flags, other, vna_name, anext = vernaux.unpack_from(data, apos)
                names[other & ~VERSYM_HIDDEN] = (_cstr(strtab, vna_name), False)
                if anext == 0:
                    break
                apos += anext
            if nxt == 0:
                break
            pos += nxt

    def _xindex_for(self, symsec: Section) -> Optional[tuple[int, ...]]:
        key = ("xindex", symsec.index)
        if key not in self._table_extras:
            self._table_extras[key] = self._read_xindex(symsec)
        return self._table_extras[key]

    def _read_xindex(self, symsec: Section) -> Optional[tuple[int, ...]]:
        sec = next((s for s in self.sections if s.type == SHT_SYMTAB_SHNDX and s.link == symsec.index
                    and s.has_data), None)
        if sec is None:
            return None
        raw = self._bytes(sec.offset, sec.size - sec.size % 4, f"section {sec.name}")
        return struct.unpack(f"{self._endian}{len(raw) // 4}I", raw)

    @_guarded
    def functions(self) -> list[ElfSymbol]:
        """Defined FUNC and IFUNC symbols."""
        if self._functions is None:
            self._functions = [s for s in self.symbols() if s.type in _FUNCTION_TYPES and s.shndx != SHN_UNDEF]
        return self._functions

    @_guarded
    def find_functions(self, pattern: str) -> list[ElfSymbol]:
        """Functions matching ``pattern``: a name or fnmatch glob, optionally with ``@VERSION`` or ``@@VERSION``.

        A plain name matches every version of it (``malloc`` finds ``malloc@@GLIBC_2.2.5``);
        ``@VERSION`` restricts to that version, ``@@VERSION`` to that default version.
        Aliases (other names at the same address) are not added: ask ``aliases()`` for those.
        The result is sorted by address, then by preference among names at one address.
        """
        name_pat, ver_pat, need_default = _split_version(pattern)
        if _GLOB_CHARS.search(name_pat):
            match = re.compile(fnmatch.translate(name_pat)).match
            found = [s for s in self.functions() if match(s.name)]
        elif self._symbols is None:
            # One name of a table not loaded yet (vmlinux has 150000 symbols): decode only its entries.
            found = [s for s in self._load_symbols((name_pat,)) if s.type in _FUNCTION_TYPES and s.shndx != SHN_UNDEF]
        else:
            found = list(self._function_index().get(name_pat, ()))
        if ver_pat is not None:
            vmatch = re.compile(fnmatch.translate(ver_pat)).match
            found = [s for s in found if s.version is not None and vmatch(s.version)
                     and (s.default_version or not need_default)]
        found.sort(key=lambda s: (s.value, _alias_rank(s)))
        return found

    def _function_index(self) -> dict[str, list[ElfSymbol]]:
        if self._by_name is None:
            index: dict[str, list[ElfSymbol]] = {}
            for sym in self.functions():
                index.setdefault(sym.name, []).append(sym)
            self._by_name = index
        return self._by_name

    def _address_index(self) -> "_AddressIndex":
        """The functions sorted by address (aliases at one address best first), decoded on demand.

        Only the numbers of the symbol tables are read to sort them; names are decoded for the
        addresses that several symbols share (to merge duplicates and rank aliases) and for the
        entries asked for. A large table's order is kept in the cache (``indexcache``)."""
        if self._by_address is None:
            tables = self._symbol_tables()
            stored = None
            if sum(sec.size for sec, _ in tables) >= _CACHED_TABLE_BYTES:
                from . import indexcache

                key = indexcache.file_key(self.path, self.build_id)
                fingerprint = self._symbols_fingerprint(tables)
                stored = indexcache.load("elf-functions", key, fingerprint)
                if stored is not None:
                    values, refs = _array(8, stored[0], False), _array(8, stored[1], False)
                    if len(values) != len(refs):
                        stored = None
            if stored is None:
                values, refs = self._sort_functions(tables)
                if sum(sec.size for sec, _ in tables) >= _CACHED_TABLE_BYTES:
                    indexcache.store("elf-functions", key, fingerprint, (values.tobytes(), refs.tobytes()))
            self._by_address = _AddressIndex(values, refs, self._decode_ref)
        return self._by_address

    def _symbols_fingerprint(self, tables: list[tuple[Section, str]]) -> tuple:
        return (_SYMBOL_INDEX_FORMAT, self.elf_class, self.little_endian, os.path.getsize(self.path)) + tuple(
            (sec.index, sec.offset, sec.size, sec.link) for sec, _ in tables)

    def _decode_ref(self, ref: int) -> ElfSymbol:
        """The symbol of a reference (table number << 32 | entry index) of the address index."""
        sec, table = self._symbol_tables()[ref >> 32]
        for _i, sym in self._decode_symbols(sec, table, (ref & 0xFFFFFFFF,)):
            return sym
        raise self._corrupt(f"section {sec.name}: symbol {ref & 0xFFFFFFFF} vanished")

    def _sort_functions(self, tables: list[tuple[Section, str]]) -> tuple[array, array]:
        """(addresses, references) of ``functions()`` in (address, alias rank) order, as
        ``_address_index`` keeps them, computed from the symbol tables' columns with C-level
        operations (vmlinux has 120000 symbols): only addresses that several symbols share are
        decoded, to merge duplicates and rank aliases as ``symbols()``/``functions()`` do."""
        values_of: list[int] = []  # function entries: address and reference
        refs_of: list[int] = []
        others: set[int] = set()  # addresses of every other entry
        for t, (sec, _table) in enumerate(tables):
            names, values, _info, _shndx = self._columns(sec)
            mask = self._function_mask(sec)
            found = list(itertools.compress(range(len(names)), mask))
            values_of += map(values.__getitem__, found)
            refs_of += map((t << 32).__or__, found)
            others.update(itertools.compress(values, mask.translate(_NOT)))
        order = sorted(range(len(values_of)), key=values_of.__getitem__)
        values_sorted = list(map(values_of.__getitem__, order))
        refs_sorted = list(map(refs_of.__getitem__, order))
        # Addresses several symbols share, of any type (duplicates are merged across types too).
        shared = set(itertools.compress(values_sorted, map(others.__contains__, values_sorted)))
        shared.update(itertools.compress(values_sorted, map(operator.eq, values_sorted, values_sorted[1:])))
        if not shared:
            return array(_TYPECODES[8], values_sorted), array(_TYPECODES[8], refs_sorted)
        # Decode those groups in symbols()'s order, merge and rank them as functions() would be.
        groups: dict[int, list[tuple[int, ElfSymbol]]] = {}
        for t, (sec, table) in enumerate(tables):
            values = self._columns(sec)[1]
            entries = itertools.compress(range(len(values)), map(shared.__contains__, values))
            for i, sym in self._decode_symbols(sec, table, entries):
                groups.setdefault(sym.value, []).append((t << 32 | i, sym))
        out_values, out_refs = array(_TYPECODES[8]), array(_TYPECODES[8])
        positions = list(itertools.compress(range(len(values_sorted)), map(shared.__contains__, values_sorted)))
        done = 0  # values_sorted[:done] are in the output
        k = 0
        while k < len(positions):
            start = positions[k]
            value = values_sorted[start]
            end = bisect.bisect_right(values_sorted, value, start)
            out_values.extend(values_sorted[done:start])
            out_refs.extend(refs_sorted[done:start])
            members = groups.get(value, [])
            ref_of = {id(sym): member_ref for member_ref, sym in members}
            kept = _ranked_functions([sym for _ref, sym in members])
            out_values.extend([value] * len(kept))
            out_refs.extend(ref_of[id(sym)] for sym in kept)
            done = end
            k += end - start
        out_values.extend(values_sorted[done:])
        out_refs.extend(refs_sorted[done:])
        return out_values, out_refs

    def _function_mask(self, sec: Section) -> bytes:
        """One byte per entry of ``sec``: 1 for a named, defined FUNC/IFUNC symbol, else 0."""
        names, _values, info, shndx = self._columns(sec)
        count = len(names)
        if not count:
            return b""
        strtab = self._string_table(sec)
        last = max(names)
        if last >= len(strtab) or (last > strtab.rfind(b"\0")):
            i = next(i for i, n in enumerate(names) if n and (n >= len(strtab) or strtab.find(b"\0", n) < 0))
            raise self._corrupt(f"section {sec.name}: symbol {i} has a name outside its string table")
        defined = bytearray(map(bool, shndx))
        if SHN_XINDEX in shndx:
            xindex = self._xindex_for(sec)
            if xindex is not None:
                for i in itertools.compress(range(count), map(SHN_XINDEX.__eq__, shndx)):
                    if i < len(xindex):
                        defined[i] = xindex[i] != SHN_UNDEF
        mask = (int.from_bytes(info.translate(_FUNCTION_INFO), "little")
                & int.from_bytes(bytes(map(bool, names)), "little")
                & int.from_bytes(bytes(map(strtab.__getitem__, names)).translate(_NONZERO), "little")
                & int.from_bytes(defined, "little"))
        return mask.to_bytes(count, "little")

    @_guarded
    def aliases(self, sym: ElfSymbol) -> list[ElfSymbol]:
        """Every function at ``sym.value`` (including ``sym``), the preferred name first."""
        index = self._address_index()
        lo = bisect.bisect_left(index.values, sym.value)
        hi = bisect.bisect_right(index.values, sym.value)
        return [index[k] for k in range(lo, hi)]

    def _functions_starting_at(self, vaddr: int) -> list[ElfSymbol]:
        """The functions at exactly ``vaddr``, best first, found without sorting the tables: the
        entries with that value are searched for in their value columns and merged and ranked as
        ``_address_index`` does."""
        members = []
        for sec, table in self._symbol_tables():
            entries = self._entries_matching(sec, 1, {vaddr})
            if entries:
                members.extend(sym for _i, sym in self._decode_symbols(sec, table, entries))
        return _ranked_functions(members)

    @_guarded
    def symbol_at(self, vaddr: int) -> Optional[ElfSymbol]:
        """The function containing ``vaddr`` (a zero-sized one only at its exact address), or None.

        Among aliases the global, default-version name with the fewest leading underscores wins.
        """
        if self._by_address is None:
            # A function's own start (a probe on its entry) needs no sorted table: the best of the
            # functions starting there is the answer the sorted table would give.
            starting = self._functions_starting_at(vaddr)
            if starting:
                return starting[0]
        index = self._address_index()
        values = index.values

        def contains(k: int) -> bool:
            sym = index[k]
            return sym.value <= vaddr < sym.value + sym.size or sym.value == vaddr

        i = bisect.bisect_right(values, vaddr) - 1
        # Walk back over nearby starts: a large function may enclose a small one that starts later.
        for j in range(i, max(i - 64, -1), -1):
            if contains(j):
                # Aliases at that start are sorted best first.
                for k in range(bisect.bisect_left(values, values[j]), j + 1):
                    if contains(k):
                        return index[k]
        return None

    # --- address conversion ---------------------------------------------------------------------

    def segment_for(self, vaddr: int) -> Optional[Segment]:
        """The PT_LOAD segment whose file-backed part holds ``vaddr``."""
        for seg in self.segments:
            if seg.vaddr <= vaddr < seg.vaddr + seg.filesz:
                return seg
        return None

    def vaddr_to_offset(self, vaddr: int) -> int:
        """The file offset of ``vaddr``, through the PT_LOAD segment that contains it (what uprobes need)."""
        seg = self.segment_for(vaddr)
        if seg is None:
            in_bss = any(s.vaddr <= vaddr < s.vaddr + s.memsz for s in self.segments)
            why = "it lies in zero-filled memory (.bss), not in the file" if in_bss else \
                "no PT_LOAD segment contains it"
            raise DebugInfoError(f"{self.path}: address 0x{vaddr:x} has no file offset: {why}",
                                 hint="" if self.segments else "the file has no loadable segments")
        return seg.offset + (vaddr - seg.vaddr)

    def offset_to_vaddr(self, offset: int) -> int:
        """The virtual address at which file offset ``offset`` is mapped (executable segments preferred)."""
        hits = [s for s in self.segments if s.offset <= offset < s.offset + s.filesz]
        if not hits:
            raise DebugInfoError(f"{self.path}: file offset 0x{offset:x} is in no PT_LOAD segment")
        seg = next((s for s in hits if s.executable), hits[0])
        return seg.vaddr + (offset - seg.offset)


def _array(itemsize: int, raw: bytes, swap: bool) -> array:
    """``raw`` as an array of unsigned integers of ``itemsize`` bytes (byte-swapped if ``swap``)."""
    out = array(_TYPECODES[itemsize])
    out.frombytes(raw[:len(raw) - len(raw) % itemsize])
    if swap:
        out.byteswap()
    return out


class _AddressIndex:
    """The functions of a file sorted by address: ``values`` (an array, for bisecting) and the
    symbol at each position, decoded from its table entry on first use."""

    def __init__(self, values: array, refs: array, decode: Callable[[int], ElfSymbol]):
        self.values = values
        self._refs = refs
        self._decode = decode
        self._symbols: dict[int, ElfSymbol] = {}

    def __len__(self) -> int:
        return len(self.values)

    def __getitem__(self, k: int) -> ElfSymbol:
        sym = self._symbols.get(k)
        if sym is None:
            sym = self._symbols[k] = self._decode(self._refs[k])
        return sym


class _VersionTable(tuple):
    """The .gnu.version array (one index per dynamic symbol) plus index → (version name, defined here)."""

    names: dict[int, tuple[str, bool]]

    def __new__(cls, values: Iterable[int]):
        obj = super().__new__(cls, values)
        obj.names = {}
        return obj


def _ranked_functions(symbols: list[ElfSymbol]) -> list[ElfSymbol]:
    """The functions among ``symbols`` (all the symbols at one address, in ``symbols()``'s table
    order) after merging duplicates as ``symbols()`` does, best alias first."""
    merged: dict[str, list[ElfSymbol]] = {}
    for sym in symbols:
        merged.setdefault(sym.name, []).append(sym)
    kept = [sym for group in merged.values()
            for sym in (group if len(group) == 1 else _merge_duplicates(group)) if sym.is_function]
    kept.sort(key=_alias_rank)
    return kept


def _merge_duplicates(group: list[ElfSymbol]) -> list[ElfSymbol]:
    """Reduce symbols sharing one name and value to one entry per version.

    The same symbol often appears in .symtab (without a version) and in .dynsym (with one), or twice
    in .symtab as a local alias and a versioned global: the versioned entries make the unversioned
    ones redundant, and among entries of one version the global one is kept.
    """
    best: dict[Optional[str], ElfSymbol] = {}
    for sym in group:
        other = best.get(sym.version)
        if other is None or _BIND_RANK.get(sym.bind, 4) < _BIND_RANK.get(other.bind, 4):
            best[sym.version] = sym
    if len(best) > 1:
        best.pop(None, None)
    return list(best.values())


def _cstr(table: bytes, offset: int) -> str:
    if offset >= len(table):
        return ""
    end = table.find(b"\0", offset)
    return table[offset:end if end >= 0 else len(table)].decode("utf-8", "surrogateescape")


def _align_up(value: int, align: int) -> int:
    return (value + align - 1) & ~(align - 1)


def _non_elf_hint(head: bytes) -> str:
    if head.startswith(b"#!"):
        interp = head[2:].split(b"\n", 1)[0].strip().decode("utf-8", "replace")
        return f"it is a script for {interp}; probe the interpreter (or the script's runtime) instead"
    if head.startswith(b"/* GNU ld script"):
        return "it is a linker script; give the real shared library (e.g. libc.so.6)"
    if head.startswith(b"!<arch>"):
        return "it is a static archive (.a); probe the program linked with it"
    return "give an executable or shared library (ELF)"


# --- separate debug files ----------------------------------------------------------------------------

def _file_crc32(path: Path) -> int:
    crc = 0
    with open(path, "rb") as f:
        while True:
            chunk = f.read(1 << 20)
            if not chunk:
                return crc
            crc = zlib.crc32(chunk, crc)


def find_debug_file(elf: ElfFile, extra_dirs: Iterable[os.PathLike | str] = ()) -> tuple[Optional[Path], list[str]]:
    """Find the separate debug-info file of ``elf``: the first candidate that really belongs to it.

    Tried in order, for ``/usr/lib/debug`` and then each of ``extra_dirs`` as a debug root:
    ``ROOT/.build-id/xx/rest.debug`` (accepted when its build-id matches), then the
    ``.gnu_debuglink`` name next to the binary, in its ``.debug/`` subdirectory and under
    ``ROOT/<binary's dir>/`` and ``ROOT/`` (accepted when the file's CRC32 matches), then
    ``ROOT/<binary's path>.debug`` (accepted when build-ids match, or if there is none to compare).
    Returns the file (or None) and every path tried; a path that exists but did not match is
    followed by the reason in parentheses, for error messages.
    """
    tried: list[str] = []
    roots = [DEBUG_ROOT, *(Path(d) for d in extra_dirs)]
    build_id = elf.build_id
    try:
        link = elf.debuglink
    except DebugInfoError:
        link = None
    dirs = _unique([elf.path.absolute().parent, elf.path.resolve().parent])
    paths = _unique([elf.path.absolute(), elf.path.resolve()])
    seen: set[Path] = set()

    def check(candidate: Path, verify: Callable[[ElfFile], Optional[str]]) -> bool:
        if candidate in seen:
            return False
        seen.add(candidate)
        if not candidate.is_file():
            tried.append(str(candidate))
            return False
        try:
            if candidate.samefile(elf.path):
                tried.append(f"{candidate} (the binary itself)")
                return False
            with ElfFile(candidate) as dbg:
                problem = verify(dbg)
        except (ProbectlError, OSError) as exc:
            problem = str(exc)
        if problem:
            tried.append(f"{candidate} ({problem})")
            return False
        tried.append(str(candidate))
        return True

    def same_build_id(dbg: ElfFile) -> Optional[str]:
        if build_id and dbg.build_id != build_id:
            return f"build-id {dbg.build_id or 'missing'}, expected {build_id}"
        return None

    def same_crc(dbg: ElfFile) -> Optional[str]:
        assert link is not None
        crc = _file_crc32(dbg.path)
        if crc != link[1]:
            return f"CRC32 0x{crc:08x}, expected 0x{link[1]:08x}"
        return same_build_id(dbg)

    candidates: list[tuple[Path, Callable[[ElfFile], Optional[str]]]] = []
    if build_id and len(build_id) > 2:
        candidates += [(root / ".build-id" / build_id[:2] / f"{build_id[2:]}.debug", same_build_id)
                       for root in roots]
    if link is not None:
        name = link[0]
        for d in dirs:
            candidates += [(d / name, same_crc), (d / ".debug" / name, same_crc)]
        for root in roots:
            for d in dirs:
                candidates.append((root / d.relative_to(d.anchor) / name, same_crc))
            candidates.append((root / name, same_crc))
    for root in roots:
        for p in paths:
            candidates.append((root / p.relative_to(p.anchor).parent / f"{p.name}.debug", same_build_id))
    for candidate, verify in candidates:
        if check(candidate, verify):
            return candidate, tried
    return None, tried


def _unique(items: Iterable[_T]) -> list[_T]:
    out: list[_T] = []
    for item in items:
        if item not in out:
            out.append(item)
    return out
