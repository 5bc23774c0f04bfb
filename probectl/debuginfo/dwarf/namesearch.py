"""One exact name's definitions found from the raw DWARF bytes, without the full name index.

A kernel has 2200 CUs and 160 MB of ``.debug_info``: indexing them all (``dieindex.build_indexes``)
takes seconds. For one exact name, ``lookup_name`` finds the few units that can define it from
the bytes instead (the name's string offsets and inline form, searched for in C) and scans only
those, as the index would (``NameSearch``). It is apart from ``dieindex`` because it answers
another way: by searching bytes rather than walking DIEs, with its own limits on when that is
sound (no indirect names or foreign references) and when it would cost more than the index.
"""
from __future__ import annotations

import bisect
import re
from typing import TYPE_CHECKING, Iterator, Optional

from .dieindex import UnitScanner, read_unit_headers, section_data

if TYPE_CHECKING:
    from . import DebugInfo


# Abbreviation bytes of an abstract origin or specification (0x31, 0x47) that may point into another
# unit (DW_FORM_ref_addr 0x10, DW_FORM_ref_sig8 0x20) or whose form is only known per DIE
# (DW_FORM_indirect 0x16): see _foreign_references.
_MERGE_FOREIGN = bytes(0x31 if b == 0x47 else 0x10 if b in (0x16, 0x20) else b for b in range(256))
# Sections whose presence means names may be indirect (string offsets, supplementary files).
_INDIRECT_NAME_SECTIONS = ("debug_str_offsets_sec", "debug_sup_sec", "gnu_debugaltlink_sec", "debug_types_sec")
# Beyond these, the search would cost more than indexing every unit once (which then answers
# every name): a string that lies in many places (a common tail: "size"), a needle found too
# often, a name many units mention (an inline function of a header used everywhere: "kmalloc").
_MAX_NEEDLES = 12
_MAX_HITS = 20000
_MAX_UNITS = 200


class NameSearch:
    """Where one name can be defined, found from the bytes instead of by scanning every unit.

    A definition is indexed under a name that is its own DW_AT_name/DW_AT_linkage_name or that of
    its abstract origin or specification. Every such attribute is, in ``.debug_info``, either the
    name itself (DW_FORM_string) or the offset of a string ending with it in ``.debug_str`` or
    ``.debug_line_str`` (DW_FORM_strp, DW_FORM_line_strp); without references into other units,
    an origin is in the unit of the DIE that uses it. So only the units holding those bytes can
    define the name: they are found with a few ``find``s over the section (C speed) and scanned as
    ``build_indexes`` scans every unit, which gives the same references in the same order.

    Not used (None from ``create``) when names or origins may be indirect: string offset tables,
    supplementary files, type units, references into other units, big-endian files."""

    def __init__(self, debuginfo: "DebugInfo", units: list[tuple], info_buffer, info_base: int, info_size: int):
        self.debuginfo = debuginfo
        self.units = units
        self.unit_starts = [u[0] for u in units]
        self.info_buffer = info_buffer
        self.info_base = info_base
        self.info_size = info_size
        # An inflated section is scanned where it is, in memory (read again through its stream, the
        # units would be copied, and their pages kept for the next run as if it needed them); a
        # mapped one unit by unit.
        self.scanner = UnitScanner(debuginfo, info_buffer if type(info_buffer) is bytes and info_base == 0 else None)

    @classmethod
    def create(cls, debuginfo: "DebugInfo") -> Optional["NameSearch"]:
        dwarf = debuginfo.dwarf
        if not debuginfo.little_endian or dwarf.debug_info_sec is None or dwarf.debug_abbrev_sec is None:
            return None
        if any(getattr(dwarf, name, None) is not None for name in _INDIRECT_NAME_SECTIONS):
            return None
        if _foreign_references(debuginfo.section_bytes("debug_abbrev_sec")):
            return None
        buffer, base, size = _searchable(dwarf.debug_info_sec)
        units = read_unit_headers(debuginfo)
        if not units:
            return None
        return cls(debuginfo, units, buffer, base, size)

    def lookup(self, name: str) -> Optional[tuple[list[tuple[int, int]], list[tuple[int, int]]]]:
        """(function references, variable references) of ``name`` as ``build_indexes`` lists them,
        or None if the name is too common a string to search for."""
        if "\ufffd" in name:  # the index decodes bad UTF-8 so: not the bytes to search for
            return None
        key = name.encode("utf-8", "surrogateescape")
        if not key or b"\0" in key:
            return [], []
        dwarf = self.debuginfo.dwarf
        # Offsets the name's attributes can hold: every place the string (or a string ending with
        # it: linkers merge tails) lies in the string sections.
        offsets = set()
        for sec in (dwarf.debug_str_sec, dwarf.debug_line_str_sec):
            if sec is None:
                continue
            buffer, base, size = _searchable(sec)
            at = buffer.find(key + b"\0", base, base + size)
            while at >= 0:
                offsets.add(at - base)
                at = buffer.find(key + b"\0", at + 1, base + size)
        needles = [(key, 0)]  # DW_FORM_string (the NUL after it is checked: a needle ending in NUL is slower)
        for offset in sorted(offsets):
            # The offset's low bytes, up to the last non-zero one; small offsets with their zeros
            # (a needle of one or two bytes would be everywhere).
            needle = offset.to_bytes(8, "little").rstrip(b"\0")
            if len(needle) < 3:
                needle = offset.to_bytes(4, "little")
            needles.append((needle, len(needle)))
        if len(needles) > _MAX_NEEDLES:
            return None
        candidates = set()
        for needle, significant in needles:
            found = self._units_holding(needle, significant)
            if found is None:
                return None
            candidates |= found
        if len(candidates) > _MAX_UNITS:
            return None
        funcs: list[tuple[int, int]] = []
        variables: list[tuple[int, int]] = []
        for k in sorted(candidates):
            for is_function, found_name, ref in self.scanner.definitions(self.units[k]):
                if found_name == name:
                    (funcs if is_function else variables).append(ref)
        return funcs, variables

    def _units_holding(self, needle: bytes, significant: int) -> Optional[set[int]]:
        """Indexes of the units whose bytes hold ``needle``: with ``significant``, the low bytes of
        an offset, followed by zeros up to the unit's offset size; else a name, followed by a NUL."""
        buffer, base = self.info_buffer, self.info_base
        end = base + self.info_size
        units, starts = self.units, self.unit_starts
        found: set[int] = set()
        hits = 0
        for at in _occurrences(buffer, needle, base, end):
            hits += 1
            if hits > _MAX_HITS:
                return None
            pos = at - base
            k = bisect.bisect_right(starts, pos) - 1
            if k >= 0 and pos < units[k][1]:
                if not significant:
                    if buffer[at + len(needle):at + len(needle) + 1] == b"\0":
                        found.add(k)
                else:
                    width = units[k][4]
                    if significant <= width and not buffer[at + significant:at + width].strip(b"\0"):
                        found.add(k)
        return found


def _occurrences(buffer, needle: bytes, start: int, end: int) -> Iterator[int]:
    """Every position of ``needle`` in ``buffer[start:end]``, overlapping ones included, in order.

    A short needle is found with ``re``, whose literal search skips to its first byte with memchr
    (faster than ``find`` for a short needle over a kernel's 160 MB); the occurrences a match overlaps are looked
    for right after it."""
    if len(needle) > 4:
        at = buffer.find(needle, start, end)
        while at >= 0:
            yield at
            at = buffer.find(needle, at + 1, end)
        return
    for match in re.compile(re.escape(needle)).finditer(buffer, start, end):
        at = match.start()
        yield at
        inner = buffer.find(needle, at + 1, min(at + 2 * len(needle) - 1, end))
        while inner >= 0 and inner < at + len(needle):
            yield inner
            inner = buffer.find(needle, inner + 1, min(inner + 2 * len(needle) - 1, end))


def _foreign_references(abbrev: bytes) -> bool:
    """Whether an abbreviation may give an abstract origin or specification a form that can point
    into another unit (or an indirect one). The bytes are searched for instead of parsing every
    table (a kernel has thousands): a hit that starts an entry (its abbreviation code, after the
    "0 0" that ends the previous entry, and any continuation bytes of the code) is the code and the
    tag of an entry, not an attribute; any other hit counts, even if it is something else by chance."""
    # One search instead of six: 0x47 becomes 0x31 and the three forms become 0x10 (any other byte
    # is left alone, so a "31 10" of the translated bytes is exactly one of the six pairs).
    merged = abbrev.translate(_MERGE_FOREIGN)
    at = merged.find(b"\x31\x10")
    while at >= 0:
        start = at
        while start > 0 and abbrev[start - 1] >= 0x80:
            start -= 1
        if not (start == 0 or (start >= 2 and abbrev[start - 2:start] == b"\0\0")):
            return True
        at = merged.find(b"\x31\x10", at + 1)
    return False


def _searchable(sec) -> tuple:
    """(buffer with ``find``, position of the section in it, section size) for a section."""
    stream = sec.stream
    base = getattr(stream, "base", None)
    if base is not None:  # a mapped section (sectionmap.SectionMap)
        return stream, base, sec.size
    data = section_data(sec)
    return data, 0, len(data)


def lookup_name(debuginfo: "DebugInfo", name: str) -> Optional[tuple[list, list]]:
    """(functions, variables) references of one exact name, as ``build_indexes`` would list them,
    without scanning every unit (``NameSearch``); None when that cannot be done for this file or
    name (then the full index answers)."""
    search = debuginfo.name_search()
    if search is None:
        return None
    return search.lookup(name)
