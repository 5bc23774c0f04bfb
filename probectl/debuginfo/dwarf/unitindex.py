"""The start offsets of a file's compilation units, so a DIE reference goes straight to its unit.

pyelftools finds the unit holding a ``.debug_info`` offset (``get_CU_containing``: a
``DW_FORM_ref_addr``, a name index entry given by DIE offset) by parsing units one after the other
from the nearest one it has parsed, each with its abbreviation table: for a kernel's 1,841 units,
~5 s for the 36 globals of ``vars --externs tcp_sendmsg``. The units' offsets only need their
``unit_length`` fields, read once (~2 ms for a kernel); the containing unit is then a bisection,
and only that unit is parsed.
"""
from __future__ import annotations

import bisect
import struct
from typing import Optional


def unit_offsets(stream, size: int, little_endian: bool) -> Optional[list[int]]:
    """Start offsets of the units of a ``.debug_info`` section of ``size`` bytes read through
    ``stream``, in order (a final offset is ``size``); None when a length runs past the section."""
    endian = "<" if little_endian else ">"
    offsets = []
    pos = 0
    while pos < size:
        offsets.append(pos)
        stream.seek(pos)
        head = stream.read(12)
        if len(head) < 4:
            return None
        (length,) = struct.unpack_from(endian + "I", head)
        if length == 0xFFFFFFFF:  # 64-bit DWARF
            if len(head) < 12:
                return None
            (length,) = struct.unpack_from(endian + "Q", head, 4)
            pos += 12 + length
        else:
            pos += 4 + length
    if pos != size:
        return None
    offsets.append(size)
    return offsets


def install(dwarfinfo) -> None:
    """Make ``dwarfinfo.get_CU_containing`` (and so ``get_DIE_from_refaddr``) find the unit by
    bisection in the unit offsets, read on first use; pyelftools' own search when they cannot be
    read (a damaged section) or the hooks are missing (another pyelftools)."""
    original = getattr(dwarfinfo, "get_CU_containing", None)
    section = dwarfinfo.debug_info_sec
    if original is None or not hasattr(dwarfinfo, "get_CU_at") or section is None:
        return
    found: list[Optional[list[int]]] = []

    def get_cu_containing(refaddr: int):
        if not found:
            found.append(unit_offsets(section.stream, section.size, dwarfinfo.config.little_endian))
        offsets = found[0]
        if offsets is None or not 0 <= refaddr < section.size:
            return original(refaddr)
        return dwarfinfo.get_CU_at(offsets[bisect.bisect_right(offsets, refaddr) - 1])

    dwarfinfo.get_CU_containing = get_cu_containing
