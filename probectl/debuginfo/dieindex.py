"""A fast index of the functions and global variables defined at the top level of every CU.

Finding a function by name means looking at every compilation unit: perf walks all of them
(``dwarf_getfuncs``), and gcc emits no name index (``.debug_names``/``.debug_pubnames``) by
default. pyelftools parses each DIE through ``construct``, which takes seconds on a library
such as libc; this module reads only the top-level DIEs straight from the section bytes,
decoding just the attributes it needs and skipping every subtree through ``DW_AT_sibling``.
The result maps a name to the CUs that define it; those CUs alone are then parsed by pyelftools.
Abbreviation entries are decoded once per distinct byte string (a library's CUs repeat them),
and ``top_level_dies`` gives one CU's functions and variables the same way, so that pyelftools
parses those DIEs and not the types around them (``function_bounds`` adds their code ranges, for
``DebugInfo.function_at``). ``indexcache`` keeps the index on disk.

A kernel has 2200 CUs and 160 MB of ``.debug_info``: indexing them all takes seconds. For one
exact name, ``lookup_name`` finds the few units that can define it from the bytes instead (the
name's string offsets and inline form, searched for in C) and scans only those (``_NameSearch``).

Any form this scanner does not know makes it fall back to pyelftools for that CU.
"""
from __future__ import annotations

import bisect
import marshal
import os
import re
import signal
import struct
import threading
from typing import TYPE_CHECKING, Callable, Iterator, Optional

from .leb128 import read_sleb128, read_uleb128

if TYPE_CHECKING:
    from .dwarf import DebugInfo

# DW_TAG / DW_AT / DW_FORM numbers used here.
_TAG_SUBPROGRAM = 0x2E
_TAG_VARIABLE = 0x34
_TAG_NAMESPACE = 0x39
_TAG_MODULE = 0x1E
_AT_SIBLING = 0x01
_AT_NAME = 0x03
_AT_LOW_PC = 0x11
_AT_EXTERNAL = 0x3F
_AT_DECLARATION = 0x3C
_AT_LOCATION = 0x02
_AT_RANGES = 0x55
_AT_ENTRY_PC = 0x52
_AT_ABSTRACT_ORIGIN = 0x31
_AT_SPECIFICATION = 0x47
_AT_LINKAGE_NAME = 0x6E
_AT_MIPS_LINKAGE_NAME = 0x2007
_AT_STR_OFFSETS_BASE = 0x72
_WANTED = {_AT_SIBLING, _AT_NAME, _AT_LOW_PC, _AT_EXTERNAL, _AT_DECLARATION, _AT_LOCATION, _AT_RANGES,
           _AT_ENTRY_PC, _AT_ABSTRACT_ORIGIN, _AT_SPECIFICATION, _AT_LINKAGE_NAME, _AT_MIPS_LINKAGE_NAME}

# Fixed sizes; None = variable, 'off' = offset size, 'addr' = address size.
_FIXED = {
    0x0B: 1, 0x11: 1, 0x0C: 1, 0x25: 1, 0x29: 1,  # data1 ref1 flag strx1 addrx1
    0x05: 2, 0x12: 2, 0x26: 2, 0x2A: 2,  # data2 ref2 strx2 addrx2
    0x27: 3, 0x2B: 3,  # strx3 addrx3
    0x06: 4, 0x13: 4, 0x28: 4, 0x2C: 4, 0x1C: 4,  # data4 ref4 strx4 addrx4 ref_sup4
    0x07: 8, 0x14: 8, 0x20: 8, 0x24: 8,  # data8 ref8 ref_sig8 ref_sup8
    0x1E: 16,  # data16
    0x19: 0, 0x21: 0,  # flag_present implicit_const
}
_OFFSET_FORMS = {0x0E, 0x1F, 0x17, 0x10, 0x1D, 0x1F20, 0x1F21}  # strp line_strp sec_offset ref_addr strp_sup GNU alt
_LEB_FORMS = {0x0D, 0x0F, 0x15, 0x1A, 0x1B, 0x22, 0x23, 0x1F01, 0x1F02}  # sdata udata ref_udata strx addrx loclistx rnglistx
_FORM_ADDR = 0x01
_FORM_STRING = 0x08
_FORM_STRP = 0x0E
_FORM_LINE_STRP = 0x1F
_FORM_STRX = 0x1A
_STRX_FIXED = {0x25: 1, 0x26: 2, 0x27: 3, 0x28: 4}
_BLOCK_FORMS = {0x0A: 1, 0x03: 2, 0x04: 4}  # block1 block2 block4 (length prefix size)
_FORM_BLOCK = 0x09
_FORM_EXPRLOC = 0x18
_FORM_INDIRECT = 0x16
_REF_FORMS = {0x11: 1, 0x12: 2, 0x13: 4, 0x14: 8}
_FORM_REF_UDATA = 0x15


class _Unsupported(Exception):
    pass


def _compiled_table(data: bytes, offset: int, offset_size: int, address_size: int, version: int,
                    entries: dict[bytes, tuple]) -> dict[int, tuple]:
    """The abbreviation table at ``offset``: code → (tag, has_children, specs, fixed_size, sibling,
    wanted), where specs are (attribute, form, implicit value) triples, ``fixed_size`` the size of
    the DIE's attributes when every form has a fixed size (else None), ``sibling`` the (position,
    size) of a fixed-size DW_AT_sibling reference preceded only by fixed-size attributes (else
    None) and ``wanted`` whether the scanner reads the DIE.

    ``entries`` (raw entry bytes → compiled entry, for one format) is shared by all tables: the
    tables of a library's CUs repeat the same entries under other codes. An entry's bytes run
    from its tag to its "0 0"
    terminator; the first "0 0" is the terminator unless an implicit constant or an empty
    attribute list comes first, so only entries whose real end was checked by parsing them
    are remembered, and a hit is the same bytes from the same start: the same entry."""
    table = {}
    pos = offset
    wanted_tags = (_TAG_SUBPROGRAM, _TAG_VARIABLE, _TAG_NAMESPACE, _TAG_MODULE)
    while True:
        code = data[pos]
        if code < 0x80:
            pos += 1
        else:
            code, pos = read_uleb128(data, pos)
        if code == 0:
            return table
        stop = data.find(b"\0\0", pos) + 2
        if stop < 2:
            raise IndexError("abbreviation table without terminator")
        raw = data[pos:stop]
        entry = entries.get(raw)
        if entry is None:
            tag, children, specs, end = _parse_entry(data, pos)
            entry = (tag, children, specs, *_plan(specs, offset_size, address_size, version), tag in wanted_tags)
            if end == stop:
                entries[raw] = entry
            stop = end
        table[code] = entry
        pos = stop


def _parse_entry(data: bytes, pos: int) -> tuple[int, bool, list, int]:
    """One abbreviation after its code: (tag, has_children, specs, position after it)."""
    b = data[pos]
    if b < 0x80:
        tag, pos = b, pos + 1
    else:
        tag, pos = read_uleb128(data, pos)
    children = data[pos] != 0
    pos += 1
    specs = []
    while True:
        attr = data[pos]
        if attr < 0x80:
            pos += 1
        else:
            attr, pos = read_uleb128(data, pos)
        form = data[pos]
        if form < 0x80:
            pos += 1
        else:
            form, pos = read_uleb128(data, pos)
        if attr == 0 and form == 0:
            return tag, children, specs, pos
        value = 0
        if form == 0x21:  # implicit_const
            value, pos = read_sleb128(data, pos)
        specs.append((attr, form, value))


def _plan(specs, offset_size: int, address_size: int, version: int) -> tuple[Optional[int], Optional[tuple]]:
    size = 0
    sibling = None
    for attr, form, _ in specs:
        if form in _FIXED:
            n = _FIXED[form]
        elif form in _OFFSET_FORMS:
            n = address_size if (form == 0x10 and version <= 2) else offset_size
        elif form == _FORM_ADDR:
            n = address_size
        else:
            return None, sibling
        if attr == _AT_SIBLING and form in _REF_FORMS and sibling is None:
            sibling = (size, n)
        size += n
    return size, sibling


class _CUScanner:
    def __init__(self, info: bytes, strtab: bytes, line_strtab: bytes, str_offsets: bytes,
                 offset_size: int, address_size: int, version: int, strings: Optional[dict] = None):
        self.info = info
        self.strtab = strtab
        self.line_strtab = line_strtab
        self.str_offsets = str_offsets
        self.offset_size = offset_size
        self.address_size = address_size
        self.version = version
        self.str_offsets_base: Optional[int] = None
        self.off_fmt = "<I" if offset_size == 4 else "<Q"
        self._strings: dict[tuple[int, int], str] = strings if strings is not None else {}

    def _cstr(self, table: bytes, off: int) -> str:
        key = (id(table), off)
        s = self._strings.get(key)
        if s is None:
            end = table.find(b"\0", off)
            s = self._strings[key] = table[off:end if end >= 0 else len(table)].decode("utf-8", "replace")
        return s

    def _strx(self, index: int) -> Optional[str]:
        if self.str_offsets_base is None or not self.str_offsets:
            return None
        at = self.str_offsets_base + index * self.offset_size
        (off,) = struct.unpack_from(self.off_fmt, self.str_offsets, at)
        return self._cstr(self.strtab, off)

    def read_die(self, pos: int, specs, cu_offset: int, want: bool) -> tuple[int, dict]:
        """Decode one DIE's attributes from ``pos``; return the position after it and, when
        ``want``, the interesting attributes (strings, flags, references made absolute)."""
        data = self.info
        found = {}
        for attr, form, implicit in specs:
            if form == _FORM_INDIRECT:
                form, pos = read_uleb128(data, pos)
            size = _FIXED.get(form)
            if size is not None:
                if want and attr in _WANTED:
                    if form in _REF_FORMS:
                        found[attr] = cu_offset + int.from_bytes(data[pos:pos + size], "little")
                    elif form in _STRX_FIXED:
                        found[attr] = self._strx(int.from_bytes(data[pos:pos + size], "little"))
                    elif form == 0x21:
                        found[attr] = implicit
                    elif form == 0x0C:
                        found[attr] = data[pos] != 0
                    else:
                        found[attr] = True
                elif attr == _AT_SIBLING and form in _REF_FORMS:
                    found[attr] = cu_offset + int.from_bytes(data[pos:pos + size], "little")
                pos += size
            elif form in _OFFSET_FORMS or (form == 0x10 and self.version <= 2):
                size = self.offset_size if not (form == 0x10 and self.version <= 2) else self.address_size
                if want and attr in _WANTED:
                    value = int.from_bytes(data[pos:pos + size], "little")
                    if form == _FORM_STRP:
                        found[attr] = self._cstr(self.strtab, value)
                    elif form == _FORM_LINE_STRP:
                        found[attr] = self._cstr(self.line_strtab, value)
                    elif form == 0x10:
                        found[attr] = ("ref_addr", value)
                    else:
                        found[attr] = True
                pos += size
            elif form in _LEB_FORMS:
                if form == 0x0D:
                    value, pos = read_sleb128(data, pos)
                else:
                    value, pos = read_uleb128(data, pos)
                if attr in _WANTED and (want or attr == _AT_SIBLING):
                    if form == _FORM_REF_UDATA:
                        found[attr] = cu_offset + value
                    elif form == _FORM_STRX:
                        found[attr] = self._strx(value)
                    else:
                        found[attr] = True
            elif form == _FORM_ADDR:
                if want and attr in _WANTED:
                    found[attr] = True
                pos += self.address_size
            elif form == _FORM_STRING:
                end = data.index(b"\0", pos)
                if want and attr in _WANTED:
                    found[attr] = data[pos:end].decode("utf-8", "replace")
                pos = end + 1
            elif form in (_FORM_EXPRLOC, _FORM_BLOCK):
                length, pos = read_uleb128(data, pos)
                if want and attr in _WANTED:
                    found[attr] = True
                pos += length
            elif form in _BLOCK_FORMS:
                n = _BLOCK_FORMS[form]
                length = int.from_bytes(data[pos:pos + n], "little")
                pos += n + length
                if want and attr in _WANTED:
                    found[attr] = True
            else:
                raise _Unsupported(f"form 0x{form:x}")
        return pos, found

    def read_values(self, pos: int, specs, cu_offset: int, wanted: frozenset) -> tuple[int, dict]:
        """Decode one DIE's attributes from ``pos``: the position after it and (form, number) of each
        attribute in ``wanted`` that has a constant, address, reference or offset form."""
        data = self.info
        found = {}
        for attr, form, implicit in specs:
            if form == _FORM_INDIRECT:
                form, pos = read_uleb128(data, pos)
            size = _FIXED.get(form)
            if size is not None:
                if attr in wanted:
                    found[attr] = (form, implicit if form == 0x21 else int.from_bytes(data[pos:pos + size], "little"))
                pos += size
            elif form in _OFFSET_FORMS or (form == 0x10 and self.version <= 2):
                size = self.offset_size if not (form == 0x10 and self.version <= 2) else self.address_size
                if attr in wanted:
                    found[attr] = (form, int.from_bytes(data[pos:pos + size], "little"))
                pos += size
            elif form in _LEB_FORMS:
                if form == 0x0D:
                    value, pos = read_sleb128(data, pos)
                else:
                    value, pos = read_uleb128(data, pos)
                if attr in wanted:
                    found[attr] = (form, value)
            elif form == _FORM_ADDR:
                if attr in wanted:
                    found[attr] = (form, int.from_bytes(data[pos:pos + self.address_size], "little"))
                pos += self.address_size
            elif form == _FORM_STRING:
                pos = data.index(b"\0", pos) + 1
            elif form in (_FORM_EXPRLOC, _FORM_BLOCK):
                length, pos = read_uleb128(data, pos)
                pos += length
            elif form in _BLOCK_FORMS:
                n = _BLOCK_FORMS[form]
                pos += n + int.from_bytes(data[pos:pos + n], "little")
            else:
                raise _Unsupported(f"form 0x{form:x}")
        return pos, found

    def scan(self, cu_offset: int, die_offset: int, end: int, abbrevs, records: list, seen: dict) -> None:
        """Scan one CU: ``records`` gets (is a function, DIE offset) of each definition to index,
        in DIE order; ``seen`` maps the offset of every function and variable DIE read (declarations
        too) to its (DW_AT_name, DW_AT_linkage_name, abstract origin or specification)."""
        data = self.info
        pos = die_offset
        # The CU DIE: read DW_AT_str_offsets_base before anything needs strx.
        code, pos = read_uleb128(data, pos)
        if code == 0:
            return
        tag, children, specs = abbrevs[code][:3]
        for attr, form, _ in specs:
            if attr == _AT_STR_OFFSETS_BASE:
                break
        else:
            attr = None
        if attr is not None:
            p = pos
            for a, form, implicit in specs:
                if a == _AT_STR_OFFSETS_BASE:
                    self.str_offsets_base = int.from_bytes(data[p:p + self.offset_size], "little")
                    break
                p, _ = self.read_die(p, [(a, form, implicit)], cu_offset, False)
        pos, _ = self.read_die(pos, specs, cu_offset, False)
        if not children:
            return
        self._scan_children(pos, end, cu_offset, abbrevs, records, seen)

    def _scan_children(self, pos, end, cu_offset, abbrevs, records, seen) -> int:
        data = self.info
        while pos < end:
            die_offset = pos
            code = data[pos]
            if code < 0x80:
                pos += 1
            else:
                code, pos = read_uleb128(data, pos)
            if code == 0:
                return pos
            tag, children, specs, fixed, sibling, want = abbrevs[code]
            if not want:
                if children:
                    if sibling is not None:
                        at, n = sibling
                        pos = _forward(cu_offset + int.from_bytes(data[pos + at:pos + at + n], "little"), pos)
                        continue
                elif fixed is not None:
                    pos += fixed
                    continue
            pos, attrs = self.read_die(pos, specs, cu_offset, want)
            if want and tag != _TAG_NAMESPACE and tag != _TAG_MODULE:
                name = attrs.get(_AT_NAME)
                linkage = attrs.get(_AT_LINKAGE_NAME) or attrs.get(_AT_MIPS_LINKAGE_NAME)
                origin = attrs.get(_AT_ABSTRACT_ORIGIN) or attrs.get(_AT_SPECIFICATION)
                seen[die_offset] = (name if isinstance(name, str) else None,
                                    linkage if isinstance(linkage, str) else None, origin)
                if not attrs.get(_AT_DECLARATION) and (
                        tag == _TAG_SUBPROGRAM or _AT_LOCATION in attrs or _AT_EXTERNAL in attrs):
                    records.append((tag == _TAG_SUBPROGRAM, die_offset))
            if children:
                if tag == _TAG_NAMESPACE or tag == _TAG_MODULE:
                    pos = self._scan_children(pos, end, cu_offset, abbrevs, records, seen)
                elif _AT_SIBLING in attrs:
                    pos = _forward(attrs[_AT_SIBLING], pos)
                else:
                    pos = self._skip_children(pos, end, abbrevs, cu_offset)
        return pos

    def collect(self, pos, end, cu_offset, abbrevs, out_funcs, out_vars, nested, bounds=None) -> int:
        """Offsets of the subprogram/variable DIEs among the children starting at ``pos`` (and,
        when ``nested``, among the children of namespaces and modules there); with ``bounds`` (a
        dict), also each subprogram's code bounds (``_code_bounds``) by offset."""
        data = self.info
        while pos < end:
            die_offset = pos
            code = data[pos]
            if code < 0x80:
                pos += 1
            else:
                code, pos = read_uleb128(data, pos)
            if code == 0:
                return pos
            tag, children, specs, fixed, sibling, _want = abbrevs[code]
            if tag == _TAG_SUBPROGRAM:
                out_funcs.append(die_offset)
                if bounds is not None:
                    pos, values = self.read_values(pos, specs, cu_offset, _BOUND_ATTRS)
                    bounds[die_offset] = _code_bounds(values)
                    if children:
                        sib = values.get(_AT_SIBLING)
                        if sib is not None and (sib[0] in _REF_FORMS or sib[0] == _FORM_REF_UDATA):
                            pos = _forward(cu_offset + sib[1], pos)
                        else:
                            pos = self._skip_children(pos, end, abbrevs, cu_offset)
                    continue
            elif tag == _TAG_VARIABLE:
                out_vars.append(die_offset)
            descend = children and nested and (tag == _TAG_NAMESPACE or tag == _TAG_MODULE)
            if not descend:
                if children:
                    if sibling is not None:
                        at, n = sibling
                        pos = _forward(cu_offset + int.from_bytes(data[pos + at:pos + at + n], "little"), pos)
                        continue
                elif fixed is not None:
                    pos += fixed
                    continue
            pos, attrs = self.read_die(pos, specs, cu_offset, False)
            if children:
                if descend:
                    pos = self.collect(pos, end, cu_offset, abbrevs, out_funcs, out_vars, False, bounds)
                elif _AT_SIBLING in attrs:
                    pos = _forward(attrs[_AT_SIBLING], pos)
                else:
                    pos = self._skip_children(pos, end, abbrevs, cu_offset)
        return pos

    def _skip_children(self, pos, end, abbrevs, cu_offset) -> int:
        data = self.info
        depth = 1
        while pos < end and depth:
            code = data[pos]
            if code < 0x80:
                pos += 1
            else:
                code, pos = read_uleb128(data, pos)
            if code == 0:
                depth -= 1
                continue
            tag, children, specs, fixed, sibling, _want = abbrevs[code]
            if children:
                if sibling is not None:
                    at, n = sibling
                    pos = _forward(cu_offset + int.from_bytes(data[pos + at:pos + at + n], "little"), pos)
                    continue
            elif fixed is not None:
                pos += fixed
                continue
            pos, attrs = self.read_die(pos, specs, cu_offset, False)
            if children:
                if _AT_SIBLING in attrs:
                    pos = _forward(attrs[_AT_SIBLING], pos)
                else:
                    depth += 1
        return pos


def _forward(target: int, pos: int) -> int:
    # A DW_AT_sibling that does not move forward would loop forever: corrupt DWARF.
    if target <= pos:
        raise _Unsupported(f"DW_AT_sibling 0x{target:x} points backwards")
    return target


def section_data(sec) -> bytes:
    """The bytes of a pyelftools DWARF section (already decompressed by pyelftools)."""
    if sec is None:
        return b""
    stream = sec.stream
    if hasattr(stream, "getvalue"):
        return stream.getvalue()
    stream.seek(0)
    return stream.read()


def _section_bytes(debuginfo: "DebugInfo", name: str) -> bytes:
    """A DWARF section's bytes; the small ones (abbreviations, strings) are read once per file."""
    if name == "debug_info_sec":
        return section_data(debuginfo.dwarf.debug_info_sec)
    cache = debuginfo._cache.setdefault("section_bytes", {})
    data = cache.get(name)
    if data is None:
        data = cache[name] = section_data(getattr(debuginfo.dwarf, name, None))
    return data


def parse_aranges(data: bytes, little_endian: bool = True) -> tuple[list[int], list[int], list[int]]:
    """``.debug_aranges`` → (starts, ends, CU offsets), sorted by start, for bisecting.

    Zero-length ranges are left out; a unit with segment selectors or an odd address size is
    skipped; a truncated section keeps the ranges read before the damage.
    """
    e = "<" if little_endian else ">"
    rows: list[tuple[int, int, int]] = []
    pos = 0
    size = len(data)
    try:
        while pos + 4 <= size:
            (length,) = struct.unpack_from(e + "I", data, pos)
            pos += 4
            off_fmt = "I"
            if length == 0xFFFFFFFF:
                (length,) = struct.unpack_from(e + "Q", data, pos)
                pos += 8
                off_fmt = "Q"
            end = pos + length
            if length < 4 or end > size:
                break
            pos += 2  # version
            (cu_offset,) = struct.unpack_from(e + off_fmt, data, pos)
            pos += struct.calcsize(off_fmt)
            address_size, segment_size = data[pos], data[pos + 1]
            pos += 2
            if address_size not in (4, 8) or segment_size:
                pos = end
                continue
            pair = 2 * address_size
            pos += (-pos) % pair  # tuples start at a multiple of their size in the section
            usable = end - max(0, end - pos) % pair
            fmt = e + ("QQ" if address_size == 8 else "II")
            for start, span in struct.iter_unpack(fmt, data[pos:usable]):
                if start == 0 and span == 0:
                    break
                if span:
                    rows.append((start, start + span, cu_offset))
            pos = end
    except (struct.error, IndexError):
        pass
    rows.sort()
    return [r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows]


def _unit_headers(info: Optional[bytes], little_endian: bool,
                  read: Optional[Callable[[int, int], bytes]] = None, size: int = 0) -> Optional[list[tuple]]:
    """(offset, end, first DIE offset, abbrev offset, offset size, address size, version) of each
    compilation/partial unit in ``.debug_info``, read without pyelftools; None when a unit is of
    a kind (type, skeleton, split units) or shape this reader leaves to pyelftools.

    Without ``info``, ``read(position, length)`` gives the section's bytes (``size`` of them):
    only the headers are read, not the units."""
    e = "<" if little_endian else ">"
    if read is None:
        assert info is not None
        data = info
        size = len(data)

        def read(at: int, length: int) -> bytes:
            return data[at:at + length]

    units = []
    pos = 0
    while pos + 11 <= size:
        start = pos
        head = read(pos, 24)  # the longest header: 64-bit length, version, unit type, sizes, offset
        (length,) = struct.unpack_from(e + "I", head, 0)
        at = 4
        offset_size, off_fmt = 4, "I"
        if length == 0xFFFFFFFF:
            (length,) = struct.unpack_from(e + "Q", head, at)
            at += 8
            offset_size, off_fmt = 8, "Q"
        elif length >= 0xFFFFFFF0:
            return None
        end = pos + at + length
        if end > size:
            return None
        (version,) = struct.unpack_from(e + "H", head, at)
        at += 2
        if version >= 5:
            unit_type, address_size = head[at], head[at + 1]
            at += 2
            if unit_type not in (1, 3):  # DW_UT_compile, DW_UT_partial
                return None
            (abbrev_offset,) = struct.unpack_from(e + off_fmt, head, at)
            at += offset_size
        elif version >= 2:
            (abbrev_offset,) = struct.unpack_from(e + off_fmt, head, at)
            at += offset_size
            address_size = head[at]
            at += 1
        else:
            return None
        units.append((start, end, pos + at, abbrev_offset, offset_size, address_size, version))
        pos = end
    return units


def build_indexes(debuginfo: "DebugInfo") -> tuple[dict, dict]:
    """Scan every CU: (functions, variables), each a dict name → [(CU offset, DIE offset)].

    Each definition is listed under its name and its linkage name, taken from its abstract origin
    or specification when it has none of its own (as ``die_name``/``die_linkage_name`` do).
    Each unit's bytes are read alone (not all of ``.debug_info`` at once); a large file's units
    are shared between two processes (``_in_two_processes``)."""
    units = _all_units(debuginfo)
    if debuginfo.dwarf.debug_info_sec.size >= PARALLEL_FROM:
        both = _in_two_processes(debuginfo, units)
        if both is not None:
            return both
    return _index_units(debuginfo, units)


# From this size of .debug_info on (a kernel's), the full index is built by two processes.
PARALLEL_FROM = 32 << 20


def _all_units(debuginfo: "DebugInfo") -> list[tuple]:
    """The unit headers of ``_unit_headers`` (from pyelftools when that reader declines)."""
    info = debuginfo.dwarf.debug_info_sec
    units = None
    if getattr(info.stream, "base", None) is not None and info.global_offset is not None \
            and not debuginfo._file.closed:
        # Only the headers, with pread: faulting in a page of the mapping per unit costs more.
        fd, start = debuginfo._file.fileno(), info.global_offset
        units = _unit_headers(None, debuginfo.elf.little_endian,
                              lambda at, length: os.pread(fd, length, start + at), info.size)
    else:
        units = _unit_headers(section_data(info), debuginfo.elf.little_endian)
    if units is None:
        units = [(cu.cu_offset, cu.cu_offset + cu.size, cu.cu_die_offset, cu.header["debug_abbrev_offset"],
                  cu.structs.dwarf_format // 8, cu.header["address_size"], cu.header["version"])
                 for cu in debuginfo.compile_units()]
    return units


def _index_units(debuginfo: "DebugInfo", units: list[tuple]) -> tuple[dict, dict]:
    unit_scanner = _UnitScanner(debuginfo, None)
    funcs: dict = {}
    variables: dict = {}
    for unit in units:
        for is_function, name, ref in unit_scanner.definitions(unit):
            (funcs if is_function else variables).setdefault(name, []).append(ref)
    return funcs, variables


def _in_two_processes(debuginfo: "DebugInfo", units: list[tuple]) -> Optional[tuple[dict, dict]]:
    """``_index_units`` of all units, the second half (by size) indexed by a forked child that sends
    its dicts back through a pipe; the halves are joined in unit order, so the result is the one
    process's. None when forking is not possible or not safe (threads); a child that fails has its
    half done here."""
    if not hasattr(os, "fork") or (os.cpu_count() or 1) < 2 or threading.active_count() != 1 or len(units) < 2:
        return None
    middle = (units[0][0] + units[-1][1]) // 2
    k = max(1, min(len(units) - 1, bisect.bisect_left([u[0] for u in units], middle)))
    first_half, second_half = units[:k], units[k:]
    read_end, write_end = os.pipe()
    try:
        pid = os.fork()
    except OSError:
        os.close(read_end)
        os.close(write_end)
        return None
    if pid == 0:  # the child: index the second half, send it, leave without any clean-up
        status = 1
        try:
            os.close(read_end)
            data = marshal.dumps(_index_units(debuginfo, second_half))
            with os.fdopen(write_end, "wb") as out:
                out.write(data)
            status = 0
        finally:
            os._exit(status)
    os.close(write_end)
    reaped = False
    try:
        with os.fdopen(read_end, "rb") as pipe:
            funcs, variables = _index_units(debuginfo, first_half)
            data = pipe.read()
        _, status = os.waitpid(pid, 0)
        reaped = True
    finally:
        if not reaped:
            try:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
            except OSError:
                pass
    second = None
    if status == 0:
        try:
            second = marshal.loads(data)
        except (ValueError, EOFError, TypeError):
            second = None
    if not (type(second) is tuple and len(second) == 2 and all(type(d) is dict for d in second)):
        second = _index_units(debuginfo, second_half)
    for mine, theirs in ((funcs, second[0]), (variables, second[1])):
        for name, refs in theirs.items():
            mine.setdefault(name, []).extend(refs)
    return funcs, variables


class _UnitScanner:
    """Lists the definitions of one unit after another, as ``build_indexes`` indexes them, sharing
    compiled abbreviation tables and decoded strings between units.

    ``info`` is the whole ``.debug_info`` (positions are section offsets), or None to read each
    unit's bytes alone from the section's stream (positions are then unit offsets, translated back)."""

    def __init__(self, debuginfo: "DebugInfo", info: Optional[bytes]):
        self.debuginfo = debuginfo
        self.info = info
        self.abbrev = _section_bytes(debuginfo, "debug_abbrev_sec")
        self.strtab = _section_bytes(debuginfo, "debug_str_sec")
        self.line_strtab = _section_bytes(debuginfo, "debug_line_str_sec")
        self.str_offsets = _section_bytes(debuginfo, "debug_str_offsets_sec")
        self.tables: dict[tuple, dict] = {}
        self.entries: dict[tuple, dict] = {}
        self.strings: dict[tuple[int, int], str] = {}

    def definitions(self, unit: tuple) -> Iterator[tuple[bool, str, tuple[int, int]]]:
        """(is a function, name, (CU offset, DIE offset)) of each definition of ``unit`` (a tuple of
        ``_unit_headers``) under each of its names, in DIE order."""
        cu_offset, end, die_offset, aoff, offset_size, address_size, version = unit
        base = 0
        info = self.info
        if info is None:  # this unit's bytes, in unit-relative positions
            stream = self.debuginfo.dwarf.debug_info_sec.stream
            stream.seek(cu_offset)
            info = stream.read(end - cu_offset)
            base, end, die_offset = cu_offset, end - cu_offset, die_offset - cu_offset
        records: list[tuple[bool, int]] = []
        seen: dict[int, tuple] = {}
        dwarf = self.debuginfo.dwarf
        try:
            fmt = (aoff, offset_size, address_size, version)
            table = self.tables.get(fmt)
            if table is None:
                shared = self.entries.setdefault(fmt[1:], {})
                table = self.tables[fmt] = _compiled_table(self.abbrev, aoff, offset_size, address_size, version,
                                                           shared)
            scanner = _CUScanner(info, self.strtab, self.line_strtab, self.str_offsets, offset_size, address_size,
                                 version, self.strings)
            scanner.scan(cu_offset - base, die_offset, end, table, records, seen)
        except (_Unsupported, KeyError, IndexError, ValueError, struct.error):
            cu_funcs, cu_vars = _scan_with_pyelftools(self.debuginfo, dwarf.get_CU_at(cu_offset))
            found = [(True, name, ref) for name, refs in cu_funcs.items() for ref in refs]
            found += [(False, name, ref) for name, refs in cu_vars.items() for ref in refs]
            # in DIE order, as the byte scanner gives them (a name's references stay in order)
            found.sort(key=lambda f: f[2][1])
            yield from found
            return
        for is_function, offset in records:
            for name in dict.fromkeys(_names(dwarf, seen, offset, base)):
                if name:
                    yield is_function, name, (cu_offset, offset + base)


def _names(dwarf, seen: dict[int, tuple], offset: int, base: int = 0) -> tuple[Optional[str], Optional[str]]:
    """(name, linkage name) of a scanned DIE as ``die_name``/``die_linkage_name`` give them: its own
    attributes, else those of its abstract origin or specification (followed like ``die_attr``).
    ``base`` is added to the scanned offsets to make them section offsets."""
    name = linkage = None
    ref: object = offset
    for _ in range(9):
        entry = seen.get(ref) if isinstance(ref, int) else None
        if entry is None:  # an origin outside the scanned DIEs (another CU, a nested DIE)
            from .dwarf import die_linkage_name, die_name

            try:
                die = dwarf.get_DIE_from_refaddr(ref[1] if isinstance(ref, tuple) else ref + base)
                return name or die_name(die), linkage or die_linkage_name(die)
            except Exception:  # a dangling reference: what was found so far
                return name, linkage
        own_name, own_linkage, origin = entry
        name = name or own_name
        linkage = linkage or own_linkage
        if (name and linkage) or origin is None:
            break
        ref = origin
    return name, linkage



def _cu_table(debuginfo: "DebugInfo", cu) -> tuple[bytes, dict, "_CUScanner"]:
    """The CU's bytes (from its header on: positions are CU offsets), its compiled abbreviation
    table (cached per file) and a scanner for it. Only the CU is read, not all of ``.debug_info``."""
    cache = debuginfo._cache.setdefault("top_level_scan", {})
    if "tables" not in cache:
        cache["tables"] = {}
        cache["entries"] = {}
        cache["units"] = {}
    info = cache["units"].get(cu.cu_offset)
    if info is None:
        stream = debuginfo.dwarf.debug_info_sec.stream
        stream.seek(cu.cu_offset)
        info = cache["units"][cu.cu_offset] = stream.read(cu.size)
    header = cu.header
    offset_size = cu.structs.dwarf_format // 8
    fmt = (header["debug_abbrev_offset"], offset_size, header["address_size"], header["version"])
    table = cache["tables"].get(fmt)
    if table is None:
        shared = cache["entries"].setdefault(fmt[1:], {})
        table = cache["tables"][fmt] = _abbrev_table(debuginfo, fmt[0], fmt[1:], shared)
    return info, table, _CUScanner(info, b"", b"", b"", offset_size, header["address_size"], header["version"])


def _abbrev_table(debuginfo: "DebugInfo", offset: int, fmt: tuple, shared: dict) -> dict[int, tuple]:
    """``_compiled_table`` of the table at ``offset``, read from a window of the section after it
    (a kernel's .debug_abbrev is 5 MB, one CU's table a few KB); the whole section only for a
    table that does not fit in the window."""
    sec = debuginfo.dwarf.debug_abbrev_sec
    whole = debuginfo._cache.get("section_bytes", {}).get("debug_abbrev_sec")
    if whole is None and sec is not None and 0 <= offset < sec.size:
        sec.stream.seek(offset)
        window = sec.stream.read(min(_ABBREV_WINDOW, sec.size - offset))
        try:
            return _compiled_table(window, 0, *fmt, shared)
        except IndexError:
            if offset + len(window) >= sec.size:
                raise
    return _compiled_table(_section_bytes(debuginfo, "debug_abbrev_sec"), offset, *fmt, shared)


_ABBREV_WINDOW = 64 << 10


def top_level_dies(debuginfo: "DebugInfo", cu) -> Optional[tuple[list[int], list[int]]]:
    """Offsets of the DW_TAG_subprogram and DW_TAG_variable DIEs among a CU's top-level DIEs and
    the children of its top-level namespaces and modules, in DIE order, read from the section
    bytes (declarations included); None when this scanner cannot read the CU."""
    try:
        info, table, scanner = _cu_table(debuginfo, cu)
        funcs: list[int] = []
        variables: list[int] = []
        end = cu.size
        pos = cu.cu_die_offset - cu.cu_offset
        code, pos = read_uleb128(info, pos)
        tag, children, specs = table[code][:3]
        pos, _ = scanner.read_die(pos, specs, 0, False)
        if code and children:
            scanner.collect(pos, end, 0, table, funcs, variables, nested=True)
        base = cu.cu_offset
        return [base + off for off in funcs], [base + off for off in variables]
    except (_Unsupported, KeyError, IndexError, ValueError, struct.error):
        return None


_AT_HIGH_PC = 0x12
_BOUND_ATTRS = frozenset({_AT_LOW_PC, _AT_HIGH_PC, _AT_RANGES, _AT_ENTRY_PC, _AT_SIBLING})
_HIGH_PC_OFFSET_FORMS = frozenset({0x0B, 0x05, 0x06, 0x07, 0x0F, 0x21})  # data1 data2 data4 data8 udata implicit_const
# A subprogram whose code range the byte scanner leaves to pyelftools (DW_AT_ranges, indexed addresses).
COMPLEX = "complex"


def _code_bounds(values: dict):
    """What ``DebugInfo.die_ranges`` gives a subprogram with these attribute values: (low, high) for
    one range, ``COMPLEX`` when pyelftools must say (range lists, indexed addresses), None without
    code ranges (no DW_AT_low_pc or DW_AT_ranges)."""
    low = values.get(_AT_LOW_PC)
    high = values.get(_AT_HIGH_PC)
    if low is not None and high is not None:
        if low[0] != _FORM_ADDR:
            return COMPLEX
        if high[0] == _FORM_ADDR:
            return low[1], high[1]
        if high[0] in _HIGH_PC_OFFSET_FORMS:
            return low[1], low[1] + high[1]
        return COMPLEX
    if _AT_RANGES in values:
        return COMPLEX
    if low is not None:
        return (low[1], low[1] + 1) if low[0] == _FORM_ADDR else COMPLEX
    return None


def function_bounds(debuginfo: "DebugInfo", cu) -> Optional[list[tuple[int, object]]]:
    """(offset, code bounds) of the CU's ``cu_functions`` subprograms, in the same order, read from
    the section bytes (see ``_code_bounds``); None when this scanner cannot read the CU."""
    try:
        info, table, scanner = _cu_table(debuginfo, cu)
        funcs: list[int] = []
        variables: list[int] = []
        bounds: dict[int, object] = {}
        pos = cu.cu_die_offset - cu.cu_offset
        code, pos = read_uleb128(info, pos)
        tag, children, specs = table[code][:3]
        pos, _ = scanner.read_die(pos, specs, 0, False)
        if code and children:
            scanner.collect(pos, cu.size, 0, table, funcs, variables, nested=True, bounds=bounds)
        base = cu.cu_offset
        return [(base + off, bounds[off]) for off in funcs]
    except (_Unsupported, KeyError, IndexError, ValueError, struct.error):
        return None


_TAG_FORMAL_PARAMETER = 0x05
_FORM_SEC_OFFSET, _FORM_LOCLISTX, _FORM_DATA4, _FORM_DATA8 = 0x17, 0x22, 0x06, 0x07


def uses_location_lists(debuginfo: "DebugInfo", cu) -> Optional[bool]:
    """Whether some DW_TAG_variable or DW_TAG_formal_parameter of the CU has a location list
    (DW_AT_location as sec_offset/loclistx, or data4/data8 before DWARF 4), read from the
    section bytes: the abbreviation table says which entries would, and the DIEs are walked
    until one of them is used. None when this scanner cannot read the CU."""
    try:
        info, table, scanner = _cu_table(debuginfo, cu)
        version = cu.header["version"]
        forms = {_FORM_SEC_OFFSET, _FORM_LOCLISTX} | ({_FORM_DATA4, _FORM_DATA8} if version < 4 else set())
        listed = set()
        for code, (tag, _children, specs, *_rest) in table.items():
            if tag in (_TAG_VARIABLE, _TAG_FORMAL_PARAMETER):
                for attr, form, _ in specs:
                    if attr == _AT_LOCATION and form == _FORM_INDIRECT:
                        return None
                    if attr == _AT_LOCATION and form in forms:
                        listed.add(code)
        if not listed:
            return False
        pos = cu.cu_die_offset - cu.cu_offset
        end = cu.size
        while pos < end:
            code = info[pos]
            if code < 0x80:
                pos += 1
            else:
                code, pos = read_uleb128(info, pos)
            if code == 0:
                continue
            if code in listed:
                return True
            _tag, _children, specs, fixed, *_rest = table[code]
            if fixed is not None:
                pos += fixed
            else:
                pos, _ = scanner.read_die(pos, specs, 0, False)
        return False
    except (_Unsupported, KeyError, IndexError, ValueError, struct.error):
        return None


def _scan_with_pyelftools(debuginfo: "DebugInfo", cu) -> tuple[dict, dict]:
    from .dwarf import die_linkage_name, die_name

    funcs: dict = {}
    variables: dict = {}
    for die in debuginfo.cu_functions(cu):
        if "DW_AT_declaration" in die.attributes:
            continue
        for n in {die_name(die), die_linkage_name(die)}:
            if n:
                funcs.setdefault(n, []).append((cu.cu_offset, die.offset))
    for die in debuginfo.cu_variables(cu):
        a = die.attributes
        if "DW_AT_declaration" in a or not ("DW_AT_location" in a or "DW_AT_external" in a):
            continue
        for n in {die_name(die), die_linkage_name(die)}:
            if n:
                variables.setdefault(n, []).append((cu.cu_offset, die.offset))
    return funcs, variables


# --- one name without the full index ----------------------------------------------------------------

# Abbreviation bytes of an abstract origin or specification (0x31, 0x47) that may point into another
# unit (DW_FORM_ref_addr 0x10, DW_FORM_ref_sig8 0x20) or whose form is only known per DIE
# (DW_FORM_indirect 0x16): see _foreign_references.
_FOREIGN_REFERENCES = tuple(bytes([attr, form]) for attr in (0x31, 0x47) for form in (0x10, 0x16, 0x20))
_MERGE_FOREIGN = bytes(0x31 if b == 0x47 else 0x10 if b in (0x16, 0x20) else b for b in range(256))
# Sections whose presence means names may be indirect (string offsets, supplementary files).
_INDIRECT_NAME_SECTIONS = ("debug_str_offsets_sec", "debug_sup_sec", "gnu_debugaltlink_sec", "debug_types_sec")
# Beyond these, the search would cost more than indexing every unit once (which then answers
# every name): a string that lies in many places (a common tail: "size"), a needle found too
# often, a name many units mention (an inline function of a header used everywhere: "kmalloc").
_MAX_NEEDLES = 12
_MAX_HITS = 20000
_MAX_UNITS = 200


class _NameSearch:
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
        self.scanner = _UnitScanner(debuginfo, None)

    @classmethod
    def create(cls, debuginfo: "DebugInfo") -> Optional["_NameSearch"]:
        dwarf = debuginfo.dwarf
        if not debuginfo.elf.little_endian or dwarf.debug_info_sec is None or dwarf.debug_abbrev_sec is None:
            return None
        if any(getattr(dwarf, name, None) is not None for name in _INDIRECT_NAME_SECTIONS):
            return None
        if _foreign_references(_section_bytes(debuginfo, "debug_abbrev_sec")):
            return None
        info = dwarf.debug_info_sec
        buffer, base, size = _searchable(info)
        if getattr(info.stream, "base", None) is not None and info.global_offset is not None \
                and not debuginfo._file.closed:
            # Only the headers, with pread: faulting in a page of the mapping per unit costs more.
            fd, start = debuginfo._file.fileno(), info.global_offset
            units = _unit_headers(None, True, lambda at, length: os.pread(fd, length, start + at), size)
        else:
            units = _unit_headers(memoryview(buffer)[base:base + size], True)
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
    (twice as fast as ``find`` over a kernel's 160 MB); the occurrences a match overlaps are looked
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
    """(buffer with ``find``, position of the section in it, section size) for a pyelftools section."""
    stream = sec.stream
    base = getattr(stream, "base", None)
    if base is not None:  # a mapped section (dwarf._SectionMap)
        return stream, base, sec.size
    data = section_data(sec)
    return data, 0, len(data)


def lookup_name(debuginfo: "DebugInfo", name: str) -> Optional[tuple[list, list]]:
    """(functions, variables) references of one exact name, as ``build_indexes`` would list them,
    without scanning every unit (``_NameSearch``); None when that cannot be done for this file or
    name (then the full index answers)."""
    cache = debuginfo._cache
    if "name_search" not in cache:
        cache["name_search"] = _NameSearch.create(debuginfo)
    search = cache["name_search"]
    if search is None:
        return None
    return search.lookup(name)
