"""The DWARF sections of one file, opened for probectl's DIE reader (:class:`.units.DwarfSections`).

An executable or shared object, the usual case and a kernel's, is opened from probectl's
own ELF reader: pyelftools' ``ELFFile`` is not needed for it, and importing and constructing one
is a visible part of a warm ``add`` (docs/ledger.md). Its zlib-compressed sections (a distribution's debug
files) are inflated only as far as they are read (:mod:`.inflating`), where ``ELFFile`` inflates
them all at open; its zstd-compressed ones (which ``ELFFile`` cannot read) are decompressed whole
at open, by libzstd (:mod:`probectl.compression`). Other files (relocatable objects such as kernel
modules, ``.zdebug`` sections) go through ``ELFFile``, which relocates and
decompresses zlib (:mod:`.mappedelf`).

Either way, the large sections of a file that needs no relocation are mapped (``SectionMap``)
instead of copied: pyelftools copies every DWARF section into memory, 300 MB for a kernel.
"""
from __future__ import annotations

import contextlib
import io
import mmap
import os
from typing import Any, BinaryIO, NamedTuple, Optional

from ...errors import DebugInfoError, TargetError
from ..elf import ElfFile
from ..indexcache import file_key
from .sectionmap import MAP_MIN, SectionMap
from .units import DwarfSections, Section, SectionStream, pread_reader

# DwarfSections' section attributes and the sections they hold.
DWARF_SECTIONS = {
    "debug_info_sec": ".debug_info", "debug_aranges_sec": ".debug_aranges", "debug_abbrev_sec": ".debug_abbrev",
    "debug_frame_sec": ".debug_frame", "eh_frame_sec": ".eh_frame", "debug_str_sec": ".debug_str",
    "debug_loc_sec": ".debug_loc", "debug_ranges_sec": ".debug_ranges", "debug_line_sec": ".debug_line",
    "debug_pubtypes_sec": ".debug_pubtypes", "debug_pubnames_sec": ".debug_pubnames",
    "debug_addr_sec": ".debug_addr", "debug_str_offsets_sec": ".debug_str_offsets",
    "debug_line_str_sec": ".debug_line_str", "debug_loclists_sec": ".debug_loclists",
    "debug_rnglists_sec": ".debug_rnglists", "debug_sup_sec": ".debug_sup",
    "gnu_debugaltlink_sec": ".gnu_debugaltlink", "debug_types_sec": ".debug_types",
}
class OpenedDwarf(NamedTuple("OpenedDwarf", [("dwarf", DwarfSections), ("elffile", Any), ("little_endian", bool),
                                             ("machine", int), ("address_size", int), ("index_key", str)])):
    """A file's DWARF and what the resolver needs to know of the file around it: ``elffile`` is
    pyelftools' ELFFile when it read the file (else None: made on demand), ``machine`` the file's
    e_machine (62: x86-64, 183: AArch64), ``index_key`` the name of the file's indexes in the cache
    (indexcache.file_key). (Fields as a list: see units.Section.)"""

    __slots__ = ()


def open_dwarf(file: BinaryIO, elf: Optional[ElfFile] = None) -> OpenedDwarf:
    """The DWARF of the open ``file``: a DebugInfoError if it is not ELF or has no DWARF (or damaged
    headers, or sections pyelftools' ELFFile cannot read); ValueError or IndexError for damaged DWARF.
    ``elf`` is the file already opened by probectl's ELF reader (read, and left open), if the caller has it."""
    if elf is None:
        try:
            elf = ElfFile(file.name)
        except TargetError as err:  # (not an ELF file: a file given as debug information is wrong)
            raise DebugInfoError(f"cannot read debug information: {err.message}", hint=err.hint) from None
        opened: Any = elf
    else:
        opened = contextlib.nullcontext(elf)
    with opened:
        if not elf.has_dwarf:
            raise DebugInfoError(f"{file.name} has no DWARF debug information (.debug_info)",
                                 hint="install the package's -dbg/-dbgsym package, or rebuild with -g")
        key = file_key(elf.path, elf.build_id)
        dwarf = _from_elf(elf, file, key)
    if dwarf is not None:
        return OpenedDwarf(dwarf, None, elf.little_endian, elf.machine, elf.elf_class // 8, key)
    from elftools.common.exceptions import DWARFError, ELFError, ELFParseError
    from elftools.construct import ConstructError

    from .mappedelf import MappedELFFile

    try:
        elffile = MappedELFFile(file)
        info = elffile.get_dwarf_info(relocate_dwarf_sections=elffile["e_type"] == "ET_REL")
    except (ELFError, ELFParseError, DWARFError, ConstructError) as exc:
        raise DebugInfoError(f"{file.name}: unreadable ELF/DWARF ({exc})",
                             hint="check that the file is a complete ELF file with debug information") from None
    # (pyelftools' section descriptors have Section's fields: their relocated, inflated streams are read as they are)
    dwarf = DwarfSections({name: getattr(info, name, None) for name in DWARF_SECTIONS}, elffile.little_endian,
                          elffile.elfclass // 8)
    return OpenedDwarf(dwarf, elffile, elffile.little_endian, elf.machine, elffile.elfclass // 8, key)


# From this size on a section below MAP_MIN is read a piece at a time (a smaller one, whole at its first
# read: .debug_line_str, 18 KB of libstdc++'s, is read a name at a time, 155 of them for one line table).
PIECES_FROM = 64 << 10


class CopiedSection:
    """A section smaller than ``MAP_MIN``, read from the file a piece at a time (``pread``) until all
    its bytes are asked for (``getvalue``), then from a copy of them: a run reads few of a file's DWARF
    sections and little of most (an add -D of a C++ method: one unit's line table of libstdc++'s
    0.9 MB of .debug_line, none of .debug_aranges, kept in the index cache), and copying all of them
    as the file was opened cost ~1 ms of libstdc++'s. A section smaller than ``PIECES_FROM`` is copied
    at its first read. Read from ``file``, the debug file open as long as its DebugInfo: once it is
    closed, a read fails (ValueError), never reads another file."""

    def __init__(self, file: BinaryIO, offset: int, size: int):
        self._file = file
        self._offset = offset
        self._size = size
        self._position = 0
        self._copy: Optional[io.BytesIO] = None

    @property
    def copied(self) -> bool:
        """Whether the bytes are read from a copy of them (all asked for, or a small section's)."""
        return self._copy is not None or self._size < PIECES_FROM

    def seek(self, offset: int, whence: int = os.SEEK_SET) -> int:
        if self._copy is not None:
            return self._copy.seek(offset, whence)
        position = offset + (0 if whence == os.SEEK_SET else self._position if whence == os.SEEK_CUR else self._size)
        if position < 0:
            raise ValueError(f"negative seek position {position}")
        self._position = position
        return position

    def tell(self) -> int:
        return self._copy.tell() if self._copy is not None else self._position

    def read(self, size: Optional[int] = -1) -> bytes:
        if self._copy is None and self._size < PIECES_FROM:
            self.getvalue()
        if self._copy is not None:
            return self._copy.read(size)
        end = self._size if size is None or size < 0 else min(self._size, self._position + size)
        if end <= self._position:
            return b""
        data = os.pread(self._file.fileno(), end - self._position, self._offset + self._position)
        self._position += len(data)
        return data

    def getvalue(self) -> bytes:
        if self._copy is None:
            # (short only if the file shrank since its section headers were read)
            self._copy = io.BytesIO(os.pread(self._file.fileno(), self._size, self._offset))
            self._copy.seek(self._position)
        return self._copy.getvalue()


def _from_elf(elf: ElfFile, file: BinaryIO, key: str) -> Optional[DwarfSections]:
    """DwarfSections over ``elf``'s sections as they are in the file (open as ``file``), or None when
    they need more than reading (relocation, decompression). ``key`` names the file's inflated
    windows in the cache."""
    fileno = file.fileno()
    if elf.type == "REL" or elf.section(".zdebug_info") is not None:
        return None
    found = {arg: elf.section(name) for arg, name in DWARF_SECTIONS.items()}
    compressed: dict[str, tuple[str, int, int, int]] = {}  # (section, zlib stream's offset and length, inflated size)
    whole: dict[str, bytes] = {}  # zstd sections, decompressed
    for arg, sec in found.items():
        if sec is not None and sec.compressed:
            payload = elf.zlib_payload(sec)
            if payload is not None:
                compressed[arg] = (sec.name, *payload)
            elif sec.name.startswith(".zdebug"):  # (ELFFile's way)
                return None
            else:  # zstd (which ELFFile cannot read), decompressed whole by libzstd
                whole[arg] = elf.section_data(sec.name)
    inflating: dict = {}
    keep_inflated = None
    if compressed:
        # The zlib streams are read where they lie in a mapping of the file (never copied: a warm
        # run inflates little or nothing, and a copy would fault in every page of them); the
        # mapping lives as long as the streams that view it.
        view = memoryview(mmap.mmap(fileno, 0, access=mmap.ACCESS_READ))
        from .inflating import open_sections  # (only for compressed sections)

        inflating, keep_inflated = open_sections({name: (view[offset:offset + length], size)
                                                  for name, offset, length, size in compressed.values()},
                                                 elf.path, key)
    sections: dict[str, Optional[Section]] = {}
    for arg, sec in found.items():
        if sec is None:
            sections[arg] = None
            continue
        size = sec.size
        stream: SectionStream
        if arg in compressed:
            stream, size = inflating[sec.name], compressed[arg][3]
        elif arg in whole:
            stream, size = io.BytesIO(whole[arg]), len(whole[arg])
        elif not sec.has_data:  # (NOBITS: zeros, as ELFFile gives)
            stream = io.BytesIO(bytes(sec.size))
        elif sec.size >= MAP_MIN:
            stream = SectionMap(fileno, sec.offset, sec.size)
        else:  # (within the file: ElfFile checked every section's bounds as it read the headers)
            stream = CopiedSection(file, sec.offset, sec.size)
        sections[arg] = Section(stream=stream, name=sec.name, global_offset=sec.offset, size=size, address=sec.addr)
    info, info_section = found["debug_info_sec"], sections["debug_info_sec"]
    # (a mapped .debug_info's unit headers are read with pread: faulting in a page of the mapping per unit costs more)
    read_info = (pread_reader(fileno, info.offset)
                 if info is not None and info_section is not None and isinstance(info_section.stream, SectionMap) else None)
    dwarf = DwarfSections(sections, elf.little_endian, elf.elf_class // 8, read_info)
    if keep_inflated is not None:
        import weakref

        weakref.finalize(dwarf, keep_inflated)
    return dwarf
