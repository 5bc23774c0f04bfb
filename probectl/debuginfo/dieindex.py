"""A fast index of the functions and global variables defined at the top level of every CU.

Finding a function by name means looking at every compilation unit: perf walks all of them
(``dwarf_getfuncs``), and gcc emits no name index (``.debug_names``/``.debug_pubnames``) by
default. pyelftools parses each DIE through ``construct``, which takes seconds on a library
such as libc; this module reads only the top-level DIEs straight from the section bytes,
decoding just the attributes it needs and skipping every subtree through ``DW_AT_sibling``.
The result maps a name to the CUs that define it; those CUs alone are then parsed by pyelftools.
Abbreviation entries are decoded once per distinct byte string (a library's CUs repeat them),
and ``top_level_dies`` gives one CU's functions and variables the same way, so that pyelftools
parses those DIEs and not the types around them. ``indexcache`` keeps the index on disk.

Any form this scanner does not know makes it fall back to pyelftools for that CU.
"""
from __future__ import annotations

import struct
from typing import TYPE_CHECKING, Optional

if TYPE_CHECKING:
    from .dwarf import DebugInfo

# DW_TAG / DW_AT / DW_FORM numbers used here.
_TAG_SUBPROGRAM = 0x2E
_TAG_VARIABLE = 0x34
_TAG_NAMESPACE = 0x39
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


def _uleb(data: bytes, pos: int) -> tuple[int, int]:
    result = 0
    shift = 0
    while True:
        b = data[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos
        shift += 7


def _sleb(data: bytes, pos: int) -> tuple[int, int]:
    result = 0
    shift = 0
    while True:
        b = data[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        shift += 7
        if b < 0x80:
            if b & 0x40:
                result -= 1 << shift
            return result, pos


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
    wanted_tags = (_TAG_SUBPROGRAM, _TAG_VARIABLE, _TAG_NAMESPACE)
    while True:
        code = data[pos]
        if code < 0x80:
            pos += 1
        else:
            code, pos = _uleb(data, pos)
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
        tag, pos = _uleb(data, pos)
    children = data[pos] != 0
    pos += 1
    specs = []
    while True:
        attr = data[pos]
        if attr < 0x80:
            pos += 1
        else:
            attr, pos = _uleb(data, pos)
        form = data[pos]
        if form < 0x80:
            pos += 1
        else:
            form, pos = _uleb(data, pos)
        if attr == 0 and form == 0:
            return tag, children, specs, pos
        value = 0
        if form == 0x21:  # implicit_const
            value, pos = _sleb(data, pos)
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
                form, pos = _uleb(data, pos)
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
                    value, pos = _sleb(data, pos)
                else:
                    value, pos = _uleb(data, pos)
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
                length, pos = _uleb(data, pos)
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

    def scan(self, cu_offset: int, die_offset: int, end: int, abbrevs, records: list, seen: dict) -> None:
        """Scan one CU: ``records`` gets (is a function, DIE offset) of each definition to index,
        in DIE order; ``seen`` maps the offset of every function and variable DIE read (declarations
        too) to its (DW_AT_name, DW_AT_linkage_name, abstract origin or specification)."""
        data = self.info
        pos = die_offset
        # The CU DIE: read DW_AT_str_offsets_base before anything needs strx.
        code, pos = _uleb(data, pos)
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
                code, pos = _uleb(data, pos)
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
            if want and tag != _TAG_NAMESPACE:
                name = attrs.get(_AT_NAME)
                linkage = attrs.get(_AT_LINKAGE_NAME) or attrs.get(_AT_MIPS_LINKAGE_NAME)
                origin = attrs.get(_AT_ABSTRACT_ORIGIN) or attrs.get(_AT_SPECIFICATION)
                seen[die_offset] = (name if isinstance(name, str) else None,
                                    linkage if isinstance(linkage, str) else None, origin)
                if not attrs.get(_AT_DECLARATION) and (
                        tag == _TAG_SUBPROGRAM or _AT_LOCATION in attrs or _AT_EXTERNAL in attrs):
                    records.append((tag == _TAG_SUBPROGRAM, die_offset))
            if children:
                if tag == _TAG_NAMESPACE:
                    pos = self._scan_children(pos, end, cu_offset, abbrevs, records, seen)
                elif _AT_SIBLING in attrs:
                    pos = _forward(attrs[_AT_SIBLING], pos)
                else:
                    pos = self._skip_children(pos, end, abbrevs, cu_offset)
        return pos

    def collect(self, pos, end, cu_offset, abbrevs, out_funcs, out_vars, nested) -> int:
        """Offsets of the subprogram/variable DIEs among the children starting at ``pos`` (and,
        when ``nested``, among the children of namespaces and modules there)."""
        data = self.info
        while pos < end:
            die_offset = pos
            code = data[pos]
            if code < 0x80:
                pos += 1
            else:
                code, pos = _uleb(data, pos)
            if code == 0:
                return pos
            tag, children, specs, fixed, sibling, _want = abbrevs[code]
            if tag == _TAG_SUBPROGRAM:
                out_funcs.append(die_offset)
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
                    pos = self.collect(pos, end, cu_offset, abbrevs, out_funcs, out_vars, False)
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
                code, pos = _uleb(data, pos)
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
    return section_data(getattr(debuginfo.dwarf, name, None))


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


def _unit_headers(info: bytes, little_endian: bool) -> Optional[list[tuple]]:
    """(offset, end, first DIE offset, abbrev offset, offset size, address size, version) of each
    compilation/partial unit in ``.debug_info``, read without pyelftools; None when a unit is of
    a kind (type, skeleton, split units) or shape this reader leaves to pyelftools."""
    e = "<" if little_endian else ">"
    units = []
    pos = 0
    size = len(info)
    while pos + 11 <= size:
        start = pos
        (length,) = struct.unpack_from(e + "I", info, pos)
        pos += 4
        offset_size, off_fmt = 4, "I"
        if length == 0xFFFFFFFF:
            (length,) = struct.unpack_from(e + "Q", info, pos)
            pos += 8
            offset_size, off_fmt = 8, "Q"
        elif length >= 0xFFFFFFF0:
            return None
        end = pos + length
        if end > size:
            return None
        (version,) = struct.unpack_from(e + "H", info, pos)
        pos += 2
        if version >= 5:
            unit_type, address_size = info[pos], info[pos + 1]
            pos += 2
            if unit_type not in (1, 3):  # DW_UT_compile, DW_UT_partial
                return None
            (abbrev_offset,) = struct.unpack_from(e + off_fmt, info, pos)
            pos += offset_size
        elif version >= 2:
            (abbrev_offset,) = struct.unpack_from(e + off_fmt, info, pos)
            pos += offset_size
            address_size = info[pos]
            pos += 1
        else:
            return None
        units.append((start, end, pos, abbrev_offset, offset_size, address_size, version))
        pos = end
    return units


def build_indexes(debuginfo: "DebugInfo") -> tuple[dict, dict]:
    """Scan every CU: (functions, variables), each a dict name → [(CU offset, DIE offset)].

    Each definition is listed under its name and its linkage name, taken from its abstract origin
    or specification when it has none of its own (as ``die_name``/``die_linkage_name`` do)."""
    dwarf = debuginfo.dwarf
    info = _section_bytes(debuginfo, "debug_info_sec")
    abbrev = _section_bytes(debuginfo, "debug_abbrev_sec")
    strtab = _section_bytes(debuginfo, "debug_str_sec")
    line_strtab = _section_bytes(debuginfo, "debug_line_str_sec")
    str_offsets = _section_bytes(debuginfo, "debug_str_offsets_sec")
    units = _unit_headers(info, debuginfo.elf.little_endian)
    if units is None:
        units = [(cu.cu_offset, cu.cu_offset + cu.size, cu.cu_die_offset, cu.header["debug_abbrev_offset"],
                  cu.structs.dwarf_format // 8, cu.header["address_size"], cu.header["version"])
                 for cu in debuginfo.compile_units()]
    tables: dict[tuple, dict] = {}
    entries: dict[tuple, dict] = {}
    funcs: dict = {}
    variables: dict = {}
    strings: dict[tuple[int, int], str] = {}
    for cu_offset, end, die_offset, aoff, offset_size, address_size, version in units:
        records: list[tuple[bool, int]] = []
        seen: dict[int, tuple] = {}
        try:
            fmt = (aoff, offset_size, address_size, version)
            table = tables.get(fmt)
            if table is None:
                shared = entries.setdefault(fmt[1:], {})
                table = tables[fmt] = _compiled_table(abbrev, aoff, offset_size, address_size, version, shared)
            scanner = _CUScanner(info, strtab, line_strtab, str_offsets, offset_size, address_size, version,
                                 strings)
            scanner.scan(cu_offset, die_offset, end, table, records, seen)
        except (_Unsupported, KeyError, IndexError, ValueError, struct.error):
            cu_funcs, cu_vars = _scan_with_pyelftools(debuginfo, dwarf.get_CU_at(cu_offset))
            for src, dst in ((cu_funcs, funcs), (cu_vars, variables)):
                for name, refs in src.items():
                    dst.setdefault(name, []).extend(refs)
            continue
        for is_function, offset in records:
            target = funcs if is_function else variables
            for name in dict.fromkeys(_names(dwarf, seen, offset)):
                if name:
                    target.setdefault(name, []).append((cu_offset, offset))
    return funcs, variables


def _names(dwarf, seen: dict[int, tuple], offset: int) -> tuple[Optional[str], Optional[str]]:
    """(name, linkage name) of a scanned DIE as ``die_name``/``die_linkage_name`` give them: its own
    attributes, else those of its abstract origin or specification (followed like ``die_attr``)."""
    name = linkage = None
    ref: object = offset
    for _ in range(9):
        entry = seen.get(ref) if isinstance(ref, int) else None
        if entry is None:  # an origin outside the scanned DIEs (another CU, a nested DIE)
            from .dwarf import die_linkage_name, die_name

            try:
                die = dwarf.get_DIE_from_refaddr(ref[1] if isinstance(ref, tuple) else ref)
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


_TAG_MODULE = 0x1E


def _cu_table(debuginfo: "DebugInfo", cu) -> tuple[bytes, dict, "_CUScanner"]:
    """``.debug_info``, the CU's compiled abbreviation table and a scanner for it (cached per file)."""
    cache = debuginfo._cache.setdefault("top_level_scan", {})
    if "sections" not in cache:
        cache["sections"] = (_section_bytes(debuginfo, "debug_info_sec"),
                             _section_bytes(debuginfo, "debug_abbrev_sec"))
        cache["tables"] = {}
        cache["entries"] = {}
    info, abbrev = cache["sections"]
    header = cu.header
    offset_size = cu.structs.dwarf_format // 8
    fmt = (header["debug_abbrev_offset"], offset_size, header["address_size"], header["version"])
    table = cache["tables"].get(fmt)
    if table is None:
        shared = cache["entries"].setdefault(fmt[1:], {})
        table = cache["tables"][fmt] = _compiled_table(abbrev, fmt[0], *fmt[1:], shared)
    return info, table, _CUScanner(info, b"", b"", b"", offset_size, header["address_size"], header["version"])


def top_level_dies(debuginfo: "DebugInfo", cu) -> Optional[tuple[list[int], list[int]]]:
    """Offsets of the DW_TAG_subprogram and DW_TAG_variable DIEs among a CU's top-level DIEs and
    the children of its top-level namespaces and modules, in DIE order, read from the section
    bytes (declarations included); None when this scanner cannot read the CU."""
    try:
        info, table, scanner = _cu_table(debuginfo, cu)
        funcs: list[int] = []
        variables: list[int] = []
        end = cu.cu_offset + cu.size
        pos = cu.cu_die_offset
        code, pos = _uleb(info, pos)
        tag, children, specs = table[code][:3]
        pos, _ = scanner.read_die(pos, specs, cu.cu_offset, False)
        if code and children:
            scanner.collect(pos, end, cu.cu_offset, table, funcs, variables, nested=True)
        return funcs, variables
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
        pos = cu.cu_die_offset
        end = cu.cu_offset + cu.size
        while pos < end:
            code = info[pos]
            if code < 0x80:
                pos += 1
            else:
                code, pos = _uleb(info, pos)
            if code == 0:
                continue
            if code in listed:
                return True
            _tag, _children, specs, fixed, *_rest = table[code]
            if fixed is not None:
                pos += fixed
            else:
                pos, _ = scanner.read_die(pos, specs, cu.cu_offset, False)
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
