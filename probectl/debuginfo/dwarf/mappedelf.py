"""pyelftools' ELFFile with the large DWARF sections of a file that needs no relocation mapped
(:class:`~.sectionmap.SectionMap`) instead of copied into memory when it opens them.

Used for the files :mod:`.sections` does not open itself (relocatable objects, compressed
sections) and for call-frame information, which reads ``.eh_frame``
and ``.debug_frame`` through ELFFile.
"""
from __future__ import annotations

from elftools.dwarf.dwarfinfo import DebugSectionDescriptor
from elftools.elf.elffile import ELFFile

from .sectionmap import MAP_MIN, SectionMap


class MappedELFFile(ELFFile):
    """ELFFile, mapping the large DWARF sections it reads without relocation."""

    def _read_dwarf_section(self, section, relocate_dwarf_sections: bool) -> DebugSectionDescriptor:
        if (relocate_dwarf_sections or section.compressed or section.name.startswith(".z")
                or section["sh_type"] == "SHT_NOBITS" or section["sh_size"] < MAP_MIN
                or self.has_phantom_bytes()):
            return super()._read_dwarf_section(section, relocate_dwarf_sections)
        # The mapping outlives the file object (it holds its own descriptor), as the in-memory
        # copies did: a DebugInfo's DIEs stay readable after close().
        stream = SectionMap(self.stream.fileno(), section["sh_offset"], section["sh_size"])
        # (pyelftools annotates the stream as IO; it seeks, tells and reads it, as a SectionMap does)
        return DebugSectionDescriptor(stream=stream,  # type: ignore[arg-type]
                                      name=section.name, global_offset=section["sh_offset"],
                                      size=section["sh_size"], address=section["sh_addr"])
