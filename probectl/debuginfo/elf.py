"""A small, fast ELF reader: headers, PT_LOAD segments, sections, notes, separate debug files.

Everything is parsed straight from an ``mmap`` of the file with ``struct``, so a symbol table of
ten thousand entries loads in milliseconds (DWARF is read by :mod:`.dwarf`, from these sections).
The symbol tables are read by ``symtab.SymbolTables``, which an ``ElfFile`` owns and whose
searches its symbol methods (``symbols``, ``find_functions``, ``symbol_at``, …) pass on.
File offsets for uprobes come from the PT_LOAD segment that holds an address, which is what the
kernel maps; perf uses the delta of the ``.text`` section instead, which agrees for ordinary
binaries but not for code placed in another executable segment.

Every failure caused by the file itself (not ELF, truncated, corrupt) raises a ``ProbectlError``:
``TargetError`` when the file cannot be opened or is not ELF at all, ``DebugInfoError`` otherwise.
"""
from __future__ import annotations

import functools
import mmap
import os
import struct
import zlib
from pathlib import Path
from typing import Callable, Iterable, Iterator, Optional, Sequence, TypeVar, cast

from ..dataclass import dataclass
from ..compression import LibzstdMissing, inflate, unzstd
from ..errors import DebugInfoError, ProbectlError, TargetError, guard_decoding
from ..regularfile import open_regular
from .symtab import SHN_UNDEF, SHN_XINDEX, ElfSymbol, SymbolTables, cstring

DEBUG_ROOT = Path("/usr/lib/debug")

# e_type
_ELF_TYPES = {0: "NONE", 1: "REL", 2: "EXEC", 3: "DYN", 4: "CORE"}
# p_type
PT_LOAD, PT_DYNAMIC, PT_INTERP, PT_NOTE = 1, 2, 3, 4
# p_flags
PF_X, PF_W, PF_R = 1, 2, 4
# sh_type (the symbol tables' own are in symtab)
SHT_NULL, SHT_PROGBITS, SHT_STRTAB, SHT_RELA, SHT_NOTE, SHT_NOBITS = 0, 1, 3, 4, 7, 8
# sh_flags
SHF_ALLOC, SHF_COMPRESSED = 0x2, 0x800
ELFCOMPRESS_ZLIB, ELFCOMPRESS_ZSTD = 1, 2
# dynamic tags
DT_NULL, DT_STRTAB, DT_SONAME, DT_FLAGS_1 = 0, 5, 14, 0x6FFFFFFB
DF_1_PIE = 0x08000000
# notes
NT_GNU_BUILD_ID = 3

_T = TypeVar("_T")


def _corrupt_elf(elf: object, exc: BaseException) -> DebugInfoError:
    return cast("ElfFile", elf).corrupt(f"corrupt ELF file ({exc.__class__.__name__}: {exc})")


# The ElfFile methods that read sections and symbols: a low-level parse failure that slipped past the
# explicit checks becomes a DebugInfoError naming the file.
_guarded = guard_decoding((struct.error, IndexError, ValueError, OverflowError, UnicodeError, MemoryError),
                          _corrupt_elf)


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


class ElfFile:
    """An ELF file opened for reading; headers are parsed at once, symbols on first use.

    ``contents`` is the whole file, a read-only mapping (searched in place by ``symtab``, never
    copied); :meth:`file_bytes` copies a checked range of it and :meth:`corrupt` makes the error for
    damage found in it. Use as a context manager, or call ``close()``, to release the mapping early.
    """

    def __init__(self, path: os.PathLike | str):
        self.path = Path(path)
        self._map: Optional[mmap.mmap] = None
        self.contents = self._open()
        try:
            self._parse_headers()
        except ProbectlError:
            self.close()
            raise
        except (struct.error, IndexError, ValueError, OverflowError, UnicodeError) as exc:
            self.close()
            raise DebugInfoError(f"{self.path}: corrupt ELF headers ({exc})",
                                 hint="the file may be truncated or damaged; rebuild or reinstall it") from None
        self.symbol_tables = SymbolTables(self)

    # --- opening and headers -------------------------------------------------------------------

    def _open(self) -> bytes | mmap.mmap:
        try:
            with open_regular(self.path) as f:
                st = os.fstat(f.fileno())
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

    def corrupt(self, what: str) -> DebugInfoError:
        """The error for damage in this file, ``what`` saying where: a DebugInfoError naming the file
        (raised by the readers of its sections, here and in ``symtab``)."""
        return DebugInfoError(f"{self.path}: {what}",
                              hint="the file may be truncated or damaged; rebuild or reinstall it")

    def _parse_headers(self) -> None:
        data = self.contents
        size = len(data)
        if size < 4 or data[:4] != b"\x7fELF":
            raise TargetError(f"{self.path} is not an ELF file", hint=_non_elf_hint(data[:64]))
        if size < 16:
            raise self.corrupt("truncated ELF identification")
        ei_class, ei_data = data[4], data[5]
        if ei_class not in (1, 2):
            raise self.corrupt(f"unknown ELF class {ei_class}")
        if ei_data not in (1, 2):
            raise self.corrupt(f"unknown ELF data encoding {ei_data}")
        self.elf_class = 32 if ei_class == 1 else 64
        self.little_endian = ei_data == 1
        e = "<" if self.little_endian else ">"
        self._endian = e
        is64 = self.elf_class == 64
        ehdr = struct.Struct(e + ("HHIQQQIHHHHHH" if is64 else "HHIIIIIHHHHHH"))
        if size < 16 + ehdr.size:
            raise self.corrupt("truncated ELF header")
        (e_type, self.machine, _version, self.entry, phoff, shoff, _flags, _ehsize,
         phentsize, phnum, shentsize, shnum, shstrndx) = ehdr.unpack_from(data, 16)
        self.type = _ELF_TYPES.get(e_type, f"0x{e_type:x}")
        self._shdr_struct = struct.Struct(e + ("IIQQQQIIQQ" if is64 else "IIIIIIIIII"))
        self._phdr_struct = struct.Struct(e + ("IIQQQQQQ" if is64 else "IIIIIIII"))
        self._dyn_struct = struct.Struct(e + ("qQ" if is64 else "iI"))

        # Section headers first: extended numbering keeps phnum/shnum/shstrndx in section 0.
        self.sections: list[Section] = []
        raw_sections: list[tuple] = []
        if shoff:
            if shentsize != self._shdr_struct.size:
                raise self.corrupt(f"bad section header size {shentsize}")
            if shoff + shentsize > size:
                raise self.corrupt("truncated file: section headers lie beyond its end")
            first = self._shdr_struct.unpack_from(data, shoff)
            if shnum == 0:
                shnum = first[5]
            if shstrndx == SHN_XINDEX:
                shstrndx = first[6]
            if phnum == 0xFFFF:
                phnum = first[7]
            if shoff + shnum * shentsize > size:
                raise self.corrupt(f"truncated file: {shnum} section headers do not fit")
            raw_sections = [self._shdr_struct.unpack_from(data, shoff + i * shentsize) for i in range(shnum)]

        self._program_headers: list[tuple] = []
        if phoff and phnum:
            if phentsize != self._phdr_struct.size:
                raise self.corrupt(f"bad program header size {phentsize}")
            if phoff + phnum * phentsize > size:
                raise self.corrupt("truncated file: program headers lie beyond its end")
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
            # A damaged name table would leave every section unnamed, and the file would then seem
            # to have no symbols and no debug information: say that it is damaged instead.
            names = b""
            if shstrndx != SHN_UNDEF:
                if shstrndx >= len(raw_sections):
                    raise self.corrupt(f"the section name table is said to be section {shstrndx}, but there are "
                                        f"{len(raw_sections)} sections")
                st = raw_sections[shstrndx]
                if st[1] == SHT_NOBITS:
                    raise self.corrupt("the section name table has no bytes in the file")
                names = self.file_bytes(st[4], st[5], "section name table")
            for i, (name, typ, flags, addr, offset, ssize, link, info, align, entsize) in enumerate(raw_sections):
                if name and name >= len(names):
                    raise self.corrupt(f"the name of section {i} lies outside the section name table")
                if typ != SHT_NOBITS and typ != SHT_NULL and offset + ssize > size:
                    raise self.corrupt(f"truncated file: section {i} ({cstring(names, name)!r}) "
                                        f"extends past the end of the file")
                self.sections.append(Section(cstring(names, name), i, typ, flags, addr, offset, ssize,
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
                # (read where it lies, in the file as the section table checked: the whole .dynstr,
                # 330 KB of libstdc++'s, was copied for one name)
                start, end = dynstr.offset + dynamic[DT_SONAME], dynstr.offset + dynstr.size
                nul = data.find(b"\0", start, end)
                self.soname = bytes(data[start:nul if nul >= 0 else end]).decode("utf-8", "surrogateescape")
        # A PIE is a DYN file marked DF_1_PIE by the linker; older linkers did not mark it, so a DYN
        # file with an interpreter and no soname counts too. Shared libraries that can also run as
        # programs (libc.so.6 has PT_INTERP) are libraries, not PIEs.
        self.is_pie = self.type == "DYN" and (
            bool(dynamic.get(DT_FLAGS_1, 0) & DF_1_PIE)
            or (self.interpreter is not None and DT_SONAME not in dynamic))

    def file_bytes(self, offset: int, length: int, what: str) -> bytes:
        """A copy of ``length`` bytes of the file from ``offset``; a :meth:`corrupt` error naming
        ``what`` (the part being read) when they are not all in the file."""
        if offset < 0 or length < 0 or offset + length > len(self.contents):
            raise self.corrupt(f"truncated file: {what} at 0x{offset:x} (+0x{length:x}) is past its end")
        return bytes(self.contents[offset:offset + length])

    def _dynamic_entries(self, offset: int, length: int) -> dict[int, int]:
        """The first value of each tag in the dynamic section at ``offset``."""
        dyn = self._dyn_struct
        out: dict[int, int] = {}
        for pos in range(offset, offset + length - dyn.size + 1, dyn.size):
            tag, val = dyn.unpack_from(self.contents, pos)
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
            raise self.corrupt(f"section {sec.name}: 0x{offset:x} (+0x{length:x}) is past its end")
        return self.file_bytes(sec.offset + offset, length, f"section {sec.name}")

    @_guarded
    def section_data(self, name: str) -> bytes:
        """The contents of section ``name``, decompressed if it is compressed (SHF_COMPRESSED or .zdebug)."""
        sec = self.section(name)
        if sec is None:
            raise DebugInfoError(f"{self.path} has no section {name}")
        return self.section_bytes(sec)

    @_guarded
    def section_bytes(self, sec: Section) -> bytes:
        """The contents of the section ``sec`` (one of :attr:`sections`), decompressed if it is
        compressed; :meth:`section_data` finds the section by its name."""
        if not sec.has_data:
            raise DebugInfoError(f"{self.path}: section {sec.name} has no data in this file (NOBITS)",
                                 hint="this is probably a stripped binary or a debug-only file; "
                                      "read the section from the other file")
        raw = self.file_bytes(sec.offset, sec.size, f"section {sec.name}")
        if sec.flags & SHF_COMPRESSED:
            return self._decompress_chdr(sec, raw)
        if sec.name.startswith(".zdebug"):
            if len(raw) < 12 or raw[:4] != b"ZLIB":
                raise self.corrupt(f"section {sec.name} lacks its ZLIB header")
            expected = int.from_bytes(raw[4:12], "big")
            return self._decompressed(sec, raw[12:], expected, inflate)
        return raw

    @_guarded
    def relative_relocations(self, start: int, end: int, relative: int) -> dict[int, int]:
        """address -> addend of the dynamic relocations of type ``relative`` (the machine's RELATIVE
        type) of the words in [start, end): the values a position-independent image (a shared object,
        an arm64 vmlinux) leaves as zero in the file and its loader (the arm64 kernel at boot) fills
        in as load base + addend. Only SHF_ALLOC RELA sections (.rela.dyn) are read."""
        found: dict[int, int] = {}
        if self.elf_class != 64:
            return found
        entry = struct.Struct(self._endian + "QQQ")  # (the addend as the unsigned word it makes)
        for sec in self.sections:
            if sec.type != SHT_RELA or not sec.flags & SHF_ALLOC or sec.size < entry.size:
                continue
            data = self.section_bytes(sec)
            for address, info, addend in entry.iter_unpack(data[:len(data) - len(data) % entry.size]):
                if start <= address < end and info & 0xFFFFFFFF == relative:
                    found[address] = addend
        return found

    def zlib_payload(self, sec: Section) -> Optional[tuple[int, int, int]]:
        """(file offset, length) of the zlib stream of a SHF_COMPRESSED section compressed with
        zlib, and its inflated size, for inflating only what is read (``dwarf.inflating``) from a
        mapping of the file; None for any other section. Only the compression header is read: the
        stream's pages are not touched until they are inflated."""
        if not sec.flags & SHF_COMPRESSED or not sec.has_data:
            return None
        chdr = struct.Struct(self._endian + ("IIQQ" if self.elf_class == 64 else "III"))
        if sec.size < chdr.size:
            raise self.corrupt(f"section {sec.name}: truncated compression header")
        fields = chdr.unpack(self.file_bytes(sec.offset, chdr.size, f"section {sec.name}"))
        if fields[0] != ELFCOMPRESS_ZLIB:
            return None
        size = fields[2] if self.elf_class == 64 else fields[1]
        length = sec.size - chdr.size
        if _implausible(size, length):
            raise self.corrupt(f"section {sec.name}: implausible decompressed size {size}")
        return sec.offset + chdr.size, length, size

    def _decompress_chdr(self, sec: Section, raw: bytes) -> bytes:
        e = self._endian
        chdr = struct.Struct(e + ("IIQQ" if self.elf_class == 64 else "III"))
        if len(raw) < chdr.size:
            raise self.corrupt(f"section {sec.name}: truncated compression header")
        fields = chdr.unpack_from(raw, 0)
        ch_type, ch_size = fields[0], fields[2] if self.elf_class == 64 else fields[1]
        if ch_type == ELFCOMPRESS_ZLIB:
            return self._decompressed(sec, raw[chdr.size:], ch_size, inflate)
        if ch_type == ELFCOMPRESS_ZSTD:
            return self._decompressed(sec, raw[chdr.size:], ch_size, unzstd)
        raise DebugInfoError(f"{self.path}: section {sec.name} uses unknown compression type {ch_type}")

    def _decompressed(self, sec: Section, payload: bytes, expected: int,
                      decompress: Callable[[bytes, int], bytes]) -> bytes:
        """``payload``, the compressed bytes of ``sec``, decompressed by ``decompress`` (zlib's
        :func:`~probectl.compression.inflate` or zstd's :func:`~probectl.compression.unzstd`) to
        the ``expected`` size its header gives."""
        if _implausible(expected, len(payload)):
            raise self.corrupt(f"section {sec.name}: implausible decompressed size {expected}")
        try:
            return decompress(payload, expected)
        except LibzstdMissing as exc:
            raise DebugInfoError(f"{self.path}: section {sec.name} is zstd-compressed and {exc}",
                                 hint="install libzstd1, or decompress the file with "
                                      "'objcopy --decompress-debug-sections'") from None
        except ValueError as exc:
            raise self.corrupt(f"section {sec.name}: {exc}") from None

    @property
    def byte_order(self) -> str:
        """The file's byte order as a struct format prefix: ``<`` or ``>``."""
        return self._endian

    @property
    def has_dwarf(self) -> bool:
        """Whether this file carries DWARF (.debug_info with data, possibly compressed, or .zdebug_info)."""
        for name in (".debug_info", ".zdebug_info"):
            sec = self.section(name)
            if sec is not None and sec.has_data and sec.size > 0:
                return True
        return False

    # --- notes: build-id and debuglink ----------------------------------------------------------

    def notes(self) -> Iterator[tuple[bytes, int, bytes]]:
        """(owner name, type, desc) of every note, from SHT_NOTE sections, or PT_NOTE segments if there are
        none (.note.stapsdt is not loaded, so only its section finds it)."""
        areas = [(s.offset, s.size, s.addralign) for s in self.sections
                 if s.type == SHT_NOTE and s.offset + s.size <= len(self.contents)]
        if not areas:
            areas = [(o, fs, a) for (t, _fl, o, _v, fs, _ms, a) in self._program_headers
                     if t == PT_NOTE and o + fs <= len(self.contents)]
        for offset, length, align in areas:
            yield from walk_notes(self.contents, self._endian, offset, offset + length, align)

    @functools.cached_property
    def build_id(self) -> Optional[str]:
        """The GNU build-id as lower-case hex, or None."""
        return gnu_build_id(self.notes())

    @functools.cached_property
    def debuglink(self) -> Optional[tuple[str, int]]:
        """(file name, CRC32) from .gnu_debuglink, or None."""
        sec = self.section(".gnu_debuglink")
        if sec is None or not sec.has_data:
            return None
        raw = self.file_bytes(sec.offset, sec.size, "section .gnu_debuglink")
        nul = raw.find(b"\0")
        if nul <= 0:
            raise self.corrupt("section .gnu_debuglink has no file name")
        crc_pos = _align_up(nul + 1, 4)
        if crc_pos + 4 > len(raw):
            raise self.corrupt("section .gnu_debuglink is truncated (no CRC)")
        crc = struct.unpack_from(self._endian + "I", raw, crc_pos)[0]
        name = raw[:nul].decode("utf-8", "surrogateescape")
        if "/" in name:
            raise self.corrupt(f"section .gnu_debuglink names a path ({name!r}), not a file name")
        return name, crc

    # --- symbols (SymbolTables) ------------------------------------------------------------------

    @_guarded
    def symbols(self) -> list[ElfSymbol]:
        """All named symbols of .symtab and .dynsym, each (name, value, version) once, with versions."""
        return self.symbol_tables.symbols()

    @_guarded
    def find_symbols(self, name: str) -> list[ElfSymbol]:
        """The symbols of any type called ``name`` (every version), as ``symbols()`` has them."""
        return self.symbol_tables.find_symbols(name)

    @_guarded
    def find_symbols_named(self, names: Iterable[str]) -> dict[str, list[ElfSymbol]]:
        """``find_symbols`` of each of ``names`` at once (one pass over the tables)."""
        return self.symbol_tables.find_symbols_named(names)

    @_guarded
    def functions(self) -> list[ElfSymbol]:
        """Defined FUNC and IFUNC symbols."""
        return self.symbol_tables.functions()

    @_guarded
    def functions_holding(self, parts: Sequence[str]) -> list[ElfSymbol]:
        """Defined FUNC and IFUNC symbols whose names hold one of ``parts``, the others not decoded."""
        return self.symbol_tables.functions_holding(parts)

    @_guarded
    def find_functions(self, pattern: str) -> list[ElfSymbol]:
        """Functions matching ``pattern``: a name or fnmatch glob, optionally with ``@VERSION`` or
        ``@@VERSION``, sorted by address, then by preference among names at one address."""
        return self.symbol_tables.find_functions(pattern)

    @_guarded
    def has_local_function(self, name: str) -> Optional[bool]:
        """Whether ``.symtab`` has a static function called ``name`` or a compiler's clone of one
        (``name.constprop.0``); None without a ``.symtab``."""
        return self.symbol_tables.has_local_function(name)

    @_guarded
    def aliases(self, sym: ElfSymbol) -> list[ElfSymbol]:
        """Every function at ``sym.value`` (including ``sym``), the preferred name first."""
        return self.symbol_tables.aliases(sym)

    @_guarded
    def symbol_at(self, vaddr: int) -> Optional[ElfSymbol]:
        """The function containing ``vaddr`` (a zero-sized one only at its exact address), or None."""
        return self.symbol_tables.symbol_at(vaddr)

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


def walk_notes(data: bytes | mmap.mmap, byte_order: str, start: int = 0, end: Optional[int] = None,
               align: int = 4) -> Iterator[tuple[bytes, int, bytes]]:
    """(owner name, type, desc) of each ELF note in ``data[start:end]``, a run of notes as a SHT_NOTE
    section, a PT_NOTE segment or the kernel's /sys/kernel/notes holds them: a header of three words
    (name size, desc size, type) in ``byte_order`` (``<`` or ``>``), the name and the desc, each padded
    to ``align`` (8 only for an area aligned to 8, else 4). A note cut short by ``end`` ends the walk."""
    end = len(data) if end is None else min(end, len(data))
    align = 8 if align == 8 else 4
    hdr = struct.Struct(byte_order + "III")
    pos = start
    while pos + hdr.size <= end:
        namesz, descsz, ntype = hdr.unpack_from(data, pos)
        pos += hdr.size
        name_end = pos + namesz
        desc_pos = pos + _align_up(namesz, align)
        desc_end = desc_pos + descsz
        if desc_end > end:
            return
        yield bytes(data[pos:name_end]).rstrip(b"\0"), ntype, bytes(data[desc_pos:desc_end])
        pos = desc_pos + _align_up(descsz, align)


def gnu_build_id(notes: Iterable[tuple[bytes, int, bytes]]) -> Optional[str]:
    """The GNU build-id among ``notes`` (as :func:`walk_notes` gives them), as lower-case hex, or None."""
    for name, ntype, desc in notes:
        if name == b"GNU" and ntype == NT_GNU_BUILD_ID and desc:
            return desc.hex()
    return None


def _implausible(size: int, compressed: int) -> bool:
    """Whether a compressed section's header claims an absurd size for its ``compressed`` bytes (a
    corrupt header), refused before anything is allocated for it."""
    return size > max(64 * compressed, 1 << 20) + (1 << 30)


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
    with open_regular(path) as f:
        while True:
            chunk = f.read(1 << 20)
            if not chunk:
                return crc
            crc = zlib.crc32(chunk, crc)


def find_debug_file(elf: ElfFile, extra_dirs: Iterable[os.PathLike | str] = (),
                    root: Optional[Path] = None) -> tuple[Optional[Path], list[str]]:
    """Find the separate debug-info file of ``elf``: the first candidate that really belongs to it.

    ``root``: the directory the binary's path is under when it is a file of another mount namespace
    (``/proc/PID/root``, a container's): that tree's ``/usr/lib/debug`` is tried first, and the
    binary's directories are named inside it (``.gnu_debuglink`` under ``ROOT/srv/app/``, not under
    ``ROOT/proc/PID/root/srv/app/``); the host's debug root by build-id comes after it.

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
    if root is None:
        dirs = _unique([elf.path.absolute().parent, elf.path.resolve().parent])
        paths = _unique([elf.path.absolute(), elf.path.resolve()])
        inside = paths
    else:
        # (resolve() would read the root's magic link as the host's / and leave the container's tree)
        roots.insert(0, root / DEBUG_ROOT.relative_to(DEBUG_ROOT.anchor))
        paths = [elf.path.absolute()]
        dirs = [paths[0].parent]
        inside = [Path("/") / p.relative_to(root) if p.is_relative_to(root) else p for p in paths]
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
        candidates += [(debug_root / ".build-id" / build_id[:2] / f"{build_id[2:]}.debug", same_build_id)
                       for debug_root in roots]
    if link is not None:
        name = link[0]
        for d in dirs:
            candidates += [(d / name, same_crc), (d / ".debug" / name, same_crc)]
        for debug_root in roots:
            for d in (p.parent for p in inside):
                candidates.append((debug_root / d.relative_to(d.anchor) / name, same_crc))
            candidates.append((debug_root / name, same_crc))
    for debug_root in roots:
        for p in inside:
            candidates.append((debug_root / p.relative_to(p.anchor).parent / f"{p.name}.debug", same_build_id))
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
