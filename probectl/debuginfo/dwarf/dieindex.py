"""A fast index of the functions and global variables defined at the top level of every CU.

Finding a function by name means looking at every compilation unit: perf walks all of them
(``dwarf_getfuncs``), and gcc emits no name index (``.debug_names``/``.debug_pubnames``) by
default. This module lists each unit's definitions from its top-level DIEs, read straight from
the section bytes (much faster than reading every DIE whole) by the native scanner
(native/dwscan.c), or by ``diescan.CUScanner``, its reference, for a unit of a shape the native one
leaves to it, under their own names or those of their abstract origin or specification;
``build_indexes`` maps each name to
the CUs that define it, and those CUs alone are then read DIE by DIE (``units``). ``top_level_dies``
gives one CU's functions and variables the same way, so that only those DIEs are read, not
the types around them (``function_bounds`` adds their code ranges, for ``DebugInfo.function_at``).
``indexcache`` keeps the index on disk; ``namesearch`` answers one exact name without it.

A unit the scanner cannot read (``diescan.Unsupported``) is read DIE by DIE instead (``scan_dies``).
"""
from __future__ import annotations

import struct
from typing import TYPE_CHECKING, Any, Callable, Iterator, Optional, Sequence, Union

from .diescan import (AT_ABSTRACT_ORIGIN, AT_DECL_LINE, AT_HIGH_PC, AT_LOCATION, AT_LOW_PC, AT_RANGES,
                      AT_SPECIFICATION, TAG_FORMAL_PARAMETER, TAG_VARIABLE, CUScanner, Unsupported, compiled_table)
from .forms import FORM_ADDR, FORM_DATA4, FORM_DATA8, FORM_INDIRECT, FORM_LOCLISTX, FORM_SEC_OFFSET
from .leb128 import read_uleb128
from .units import DW_UT_COMPILE, DW_UT_PARTIAL, DwarfFormatError, section_data
from ..indexcache import PendingStore

if TYPE_CHECKING:
    from . import DebugInfo


def parse_aranges(data: bytes, little_endian: bool = True) -> tuple[list[int], list[int], list[int]]:
    """``.debug_aranges`` → (starts, ends, CU offsets), sorted by start, for bisecting.

    Zero-length ranges are left out; a unit with segment selectors or an odd address size is
    skipped; a truncated section keeps the ranges read before the damage. (A library has a set
    per unit, most of one range: libc6-dbg's 2,063 sets are read with one unpack of each set's
    header.)
    """
    e = "<" if little_endian else ">"
    header = struct.Struct(e + "IHIBB").unpack_from  # unit_length, version, CU offset (32-bit DWARF), sizes
    header64 = struct.Struct(e + "QHQBB").unpack_from  # after the 0xffffffff escape (64-bit DWARF)
    tuples = {8: struct.Struct(e + "QQ").iter_unpack, 4: struct.Struct(e + "II").iter_unpack}
    rows: list[tuple[int, int, int]] = []
    pos = 0
    size = len(data)
    try:
        while pos + 4 <= size:
            length, _version, cu_offset, address_size, segment_size = header(data, pos)
            if length == 0xFFFFFFFF:
                length, _version, cu_offset, address_size, segment_size = header64(data, pos + 4)
                after, end = pos + 24, pos + 12 + length
            else:
                after, end = pos + 12, pos + 4 + length
            if length < 4 or end > size:
                break
            pos = end
            if address_size not in tuples or segment_size:
                continue
            pair = 2 * address_size
            after += (-after) % pair  # tuples start at a multiple of their size in the section
            for start, span in tuples[address_size](data[after:end - max(0, end - after) % pair]):
                if start == 0 and span == 0:
                    break
                if span:
                    rows.append((start, start + span, cu_offset))
    except (struct.error, IndexError):
        pass
    rows.sort()
    return [r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows]


# From this size of .debug_aranges on (a library's: libc6-dbg's is 97 KB, 2,063 sets), the table
# parse_aranges makes of it is kept in the index cache (``dwarf-aranges``).
CACHED_ARANGES_FROM = 32 << 10
_ARANGES_FORMAT = 1


def address_ranges(debuginfo: "DebugInfo") -> Optional[tuple[Sequence[int], Sequence[int], Sequence[int]]]:
    """``parse_aranges`` of the file's ``.debug_aranges`` (None without one). A large one's table
    is kept on disk: a function found at its symbol's address reads it on every run, and three
    arrays are read back in a fraction of the time the sets take to parse (and bisected as they
    are: made into lists, their 37,000 numbers for libstdc++ cost more than the one lookup)."""
    sec = debuginfo.dwarf.debug_aranges_sec
    if sec is None:
        return None
    if sec.size < CACHED_ARANGES_FROM:
        return parse_aranges(section_data(sec), debuginfo.little_endian)
    from .. import indexcache
    from array import array

    info = debuginfo.dwarf.debug_info_sec
    fingerprint = (_ARANGES_FORMAT, debuginfo.little_endian, sec.size, info.size if info is not None else 0)
    stored = indexcache.load("dwarf-aranges", debuginfo.index_key, fingerprint)
    if stored is not None and len(stored) == 3 and all(type(part) is bytes and len(part) % 8 == 0 for part in stored):
        columns = [array("Q", part) for part in stored]
        if len(columns[0]) == len(columns[1]) == len(columns[2]):
            return columns[0], columns[1], columns[2]
    table = parse_aranges(section_data(sec), debuginfo.little_endian)
    try:
        payload = tuple(array("Q", column).tobytes() for column in table)
    except OverflowError:  # (a negative or huge value from damaged DWARF: not kept)
        return table
    indexcache.store("dwarf-aranges", debuginfo.index_key, fingerprint, payload)
    return table


# A unit's scans that add reads on every run of a function in it (the code bounds of its functions,
# its inline instances by origin: 20-30 ms of an add -D of a libstdc++ method) are kept on disk, for
# every unit scanned so far, in one file of the debug file's (``dwarf-unit-scans``).
_UNIT_SCANS_FORMAT = 2  # (2: inline instances whose origin is a DW_FORM_ref_addr into their unit: Go's)
_MISSING = object()


class UnitScans(PendingStore):
    """The per-unit scans of one debug file: :meth:`get` gives the kept one, or makes it; those made
    are stored once (:class:`~probectl.debuginfo.indexcache.PendingStore`)."""

    kind = "dwarf-unit-scans"

    def __init__(self, debuginfo: "DebugInfo"):
        info = debuginfo.dwarf.debug_info_sec
        super().__init__(debuginfo, debuginfo.index_key,
                         (_UNIT_SCANS_FORMAT, debuginfo.little_endian, info.size if info is not None else 0))
        self.tables: Optional[dict] = None

    def get(self, debuginfo: "DebugInfo", kind: str, cu, build: Callable[["DebugInfo", Any], Any],
            valid: Callable[[Any], bool]) -> Any:
        """The ``kind`` scan of ``cu`` (``build(debuginfo, cu)``), kept; a kept one ``valid`` rejects is made anew."""
        if self.tables is None:
            stored = self.load()
            self.tables = stored[0] if stored is not None and len(stored) == 1 and type(stored[0]) is dict else {}
        table = self.tables.get(kind)
        if type(table) is not dict:
            table = self.tables[kind] = {}
        value = table.get(cu.cu_offset, _MISSING)
        if value is not _MISSING and valid(value):
            return value
        value = table[cu.cu_offset] = build(debuginfo, cu)
        self.changed = True
        return value

    def payload(self) -> tuple:
        return (self.tables,)


def valid_bounds(value: Any) -> bool:
    """A kept :func:`function_bounds`: None, or (offset, bounds) pairs."""
    return value is None or type(value) is list and all(
        type(row) is tuple and len(row) == 2 and type(row[0]) is int and (
            row[1] is None or row[1] == COMPLEX or type(row[1]) is tuple and len(row[1]) == 2
            and type(row[1][0]) is int and type(row[1][1]) is int) for row in value)


def valid_origins(value: Any) -> bool:
    """A kept :func:`instances_by_origin`: None, or origin → [(offset, caller offset or None)]."""
    return value is None or type(value) is dict and all(
        type(origin) is int and type(dies) is list and all(
            type(d) is tuple and len(d) == 2 and type(d[0]) is int and (d[1] is None or type(d[1]) is int)
            for d in dies) for origin, dies in value.items())


def build_indexes(debuginfo: "DebugInfo") -> tuple[dict, dict]:
    """Scan every CU: (functions, variables), each a dict name → [(CU offset, DIE offset)].

    Each definition is listed under its name and its linkage name, taken from its abstract origin
    or specification when it has none of its own (as ``die_name``/``die_linkage_name`` do)."""
    return _index_units(debuginfo, _all_units(debuginfo))


def read_unit_headers(debuginfo: "DebugInfo") -> Optional[list[tuple]]:
    """(offset, end, first DIE offset, abbrev offset, offset size, address size, version) of each
    compilation or partial unit of the file's ``.debug_info`` (``DwarfSections.unit_headers``, read
    once a file); None when a header is damaged."""
    try:
        headers = debuginfo.dwarf.unit_headers()
    except (DwarfFormatError, IndexError):
        return None
    return [h[:7] for h in headers if h.unit_type in (DW_UT_COMPILE, DW_UT_PARTIAL)]


def _all_units(debuginfo: "DebugInfo") -> list[tuple]:
    """The units ``read_unit_headers`` lists (a damaged header: DebugInfoError)."""
    units = read_unit_headers(debuginfo)
    if units is None:
        from ...errors import DebugInfoError

        raise DebugInfoError(f"{debuginfo.path}: corrupt DWARF (a unit header of .debug_info is damaged)",
                             hint="the debug information is damaged")
    return units


def _index_units(debuginfo: "DebugInfo", units: list[tuple]) -> tuple[dict, dict]:
    # A section held in memory (inflated, or small and copied) is scanned where it is: read again unit
    # by unit through its stream, it would be copied, and an inflated one's pages all kept for the
    # next run, which has the index; a mapped one (a kernel's) is read where it is mapped by the native
    # scanner, unit by unit through its stream by the Python one.
    sec = debuginfo.dwarf.needed_section("debug_info_sec")
    unit_scanner = UnitScanner(debuginfo, section_data(sec) if getattr(sec.stream, "base", None) is None else None)
    funcs: dict = {}
    variables: dict = {}
    for unit in units:
        for is_function, name, ref in unit_scanner.definitions(unit):
            (funcs if is_function else variables).setdefault(name, []).append(ref)
    return funcs, variables


class UnitScanner:
    """Lists the definitions of one unit after another, as ``build_indexes`` indexes them, sharing
    compiled abbreviation tables and decoded strings between units.

    ``info`` is the whole ``.debug_info`` (positions are section offsets), or None to read each
    unit's bytes alone from the section's stream (positions are then unit offsets, translated back)."""

    def __init__(self, debuginfo: "DebugInfo", info: Optional[bytes]):
        self.debuginfo = debuginfo
        self.info = info
        self.abbrev = debuginfo.section_bytes("debug_abbrev_sec")
        self.strtab = debuginfo.section_bytes("debug_str_sec")
        self.line_strtab = debuginfo.section_bytes("debug_line_str_sec")
        self.str_offsets = debuginfo.section_bytes("debug_str_offsets_sec")
        self.tables: dict[tuple, dict] = {}
        self.entries: dict[tuple, dict] = {}
        self.strings: dict[tuple[int, int], str] = {}
        # The whole .debug_info for the native scanner (bytes, or the mapped section: the buffer and
        # where the section starts in it); None where only this one reads it (a big-endian file).
        self.native_info: Optional[tuple[Any, int]] = None
        self.native_strings: dict[int, str] = {}
        if debuginfo.little_endian:
            if info is not None:
                self.native_info = (info, 0)
            else:
                stream = debuginfo.dwarf.needed_section("debug_info_sec").stream
                base = getattr(stream, "base", None)  # (a mapped section: sectionmap.SectionMap)
                if base is not None:
                    self.native_info = (stream, base)

    def definitions(self, unit: tuple) -> Iterator[tuple[bool, str, tuple[int, int]]]:
        """(is a function, name, (CU offset, DIE offset)) of each definition of ``unit`` (a tuple of
        ``read_unit_headers``) under each of its names, in DIE order.

        The native scanner (native/dwscan.h) lists them without a Python step per DIE; a unit of a
        shape it leaves to this one (an unknown form, a reference into another unit, damage) is
        read here, by the reference it is tested equal to (``python_definitions``)."""
        if self.native_info is not None:
            from ... import _native

            buffer, base = self.native_info
            found = _native.dwarf_definitions(buffer, base, self.abbrev, self.strtab, self.line_strtab,
                                              self.str_offsets, unit, self.native_strings)
            if found is not None:
                return iter(found)
        return self.python_definitions(unit)

    def python_definitions(self, unit: tuple) -> Iterator[tuple[bool, str, tuple[int, int]]]:
        """``definitions`` of ``unit`` by the byte scanner in Python (``diescan.CUScanner``)."""
        cu_offset, end, die_offset, aoff, offset_size, address_size, version = unit
        base = 0
        info = self.info
        if info is None:  # this unit's bytes, in unit-relative positions
            stream = self.debuginfo.dwarf.needed_section("debug_info_sec").stream
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
                table = self.tables[fmt] = compiled_table(self.abbrev, aoff, offset_size, address_size, version,
                                                           shared)
            scanner = CUScanner(info, self.strtab, self.line_strtab, self.str_offsets, offset_size, address_size,
                                 version, self.strings)
            scanner.scan(cu_offset - base, die_offset, end, table, records, seen)
        except (Unsupported, KeyError, IndexError, ValueError, struct.error):
            cu_funcs, cu_vars = scan_dies(self.debuginfo, dwarf.get_CU_at(cu_offset))
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
    ref: int | tuple[str, int] = offset  # (a unit-relative offset, or ("ref_addr", section offset))
    for _ in range(9):
        entry = seen.get(ref) if isinstance(ref, int) else None
        if entry is None:  # an origin outside the scanned DIEs (another CU, a nested DIE)
            from .die import die_linkage_name, die_name

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



def _cu_table(debuginfo: "DebugInfo", cu) -> tuple[bytes, dict, "CUScanner"]:
    """The CU's bytes (from its header on: positions are CU offsets), its compiled abbreviation
    table and a scanner for it, both kept by the DebugInfo (``cu_bytes``, ``abbrev_table``)."""
    info = debuginfo.cu_bytes(cu)
    header = cu.header
    offset_size = cu.offset_size
    table = debuginfo.abbrev_table((header["debug_abbrev_offset"], offset_size, header["address_size"],
                                    header["version"]))
    return info, table, CUScanner(info, b"", b"", b"", offset_size, header["address_size"], header["version"])


def _children_start(cu, table: dict, scanner: "CUScanner") -> Optional[int]:
    """Where the children of the unit DIE start (CU offsets), None when it has none; the scanner
    has noted the unit's language (CUScanner.note_language)."""
    code, pos = read_uleb128(scanner.info, cu.cu_die_offset - cu.cu_offset)
    if not code:
        return None
    _tag, children, specs = table[code][:3]
    scanner.note_language(pos, specs, 0)
    pos, _ = scanner.read_die(pos, specs, 0, False)
    return pos if children else None


def top_level_dies(debuginfo: "DebugInfo", cu) -> Optional[tuple[list[int], list[int]]]:
    """Offsets of the DW_TAG_subprogram and DW_TAG_variable DIEs among a CU's top-level DIEs and
    the children of its top-level namespaces and modules, in DIE order, read from the section
    bytes (declarations included); None when this scanner cannot read the CU."""
    try:
        info, table, scanner = _cu_table(debuginfo, cu)
        funcs: list[int] = []
        variables: list[int] = []
        pos = _children_start(cu, table, scanner)
        if pos is not None:
            scanner.collect(pos, cu.size, 0, table, funcs, variables, nested=True)
        base = cu.cu_offset
        return [base + off for off in funcs], [base + off for off in variables]
    except (Unsupported, KeyError, IndexError, ValueError, struct.error):
        return None


_HIGH_PC_OFFSET_FORMS = frozenset({0x0B, 0x05, 0x06, 0x07, 0x0F, 0x21})  # data1 data2 data4 data8 udata implicit_const
# A subprogram whose code range the byte scanner leaves to the DIE reader (DW_AT_ranges, indexed addresses).
COMPLEX = "complex"


CodeBounds = Union[tuple[int, int], str, None]  # (low, high), COMPLEX or None


def _code_bounds(values: dict) -> CodeBounds:
    """What ``DebugInfo.die_ranges`` gives a subprogram with these attribute values: (low, high) for
    one range, ``COMPLEX`` when the DIE reader must say (range lists, indexed addresses), None without
    code ranges (no DW_AT_low_pc or DW_AT_ranges)."""
    low = values.get(AT_LOW_PC)
    high = values.get(AT_HIGH_PC)
    if low is not None and high is not None:
        if low[0] != FORM_ADDR:
            return COMPLEX
        if high[0] == FORM_ADDR:
            return low[1], high[1]
        if high[0] in _HIGH_PC_OFFSET_FORMS:
            return low[1], low[1] + high[1]
        return COMPLEX
    if AT_RANGES in values:
        return COMPLEX
    if low is not None:
        return (low[1], low[1] + 1) if low[0] == FORM_ADDR else COMPLEX
    return None


def function_bounds(debuginfo: "DebugInfo", cu) -> Optional[list[tuple[int, CodeBounds]]]:
    """(offset, code bounds) of the CU's ``cu_functions`` subprograms, in the same order, read from
    the section bytes (see ``_code_bounds``); None when this scanner cannot read the CU."""
    try:
        info, table, scanner = _cu_table(debuginfo, cu)
        funcs: list[int] = []
        variables: list[int] = []
        bounds: dict[int, dict] = {}
        pos = _children_start(cu, table, scanner)
        if pos is not None:
            scanner.collect(pos, cu.size, 0, table, funcs, variables, nested=True, bounds=bounds)
        base = cu.cu_offset
        return [(base + off, _code_bounds(bounds[off])) for off in funcs]
    except (Unsupported, KeyError, IndexError, ValueError, struct.error):
        return None


_CU_REF_FORMS = frozenset({0x11, 0x12, 0x13, 0x14, 0x15})  # ref1 ref2 ref4 ref8 ref_udata
# What inline_sites gives for a declaration line the bytes do not tell (an origin in another unit).
UNKNOWN = -1


def inline_sites(debuginfo: "DebugInfo", cu) -> Optional[list[tuple[int, Optional[int], Optional[int]]]]:
    """The CU's ``cu_functions`` subprograms and the DW_TAG_inlined_subroutine DIEs below them (those
    that ``lines._funclines`` visits), in DIE order, read from the section bytes: (offset,
    DW_AT_call_line of an inline instance (0 without one) or None for a subprogram, DW_AT_decl_line as ``die_attr``
    finds it through origins and specifications: None when there is none, ``UNKNOWN`` when the
    origin is not a subprogram or inline instance of this unit). None when this scanner cannot read
    the CU."""
    try:
        info, table, scanner = _cu_table(debuginfo, cu)
        pos = _children_start(cu, table, scanner)
        found: list[tuple[int, Optional[int]]] = []
        lines: dict[int, dict] = {}  # offset of a subprogram or inline instance → its LINE_ATTRS
        if pos is not None:
            scanner.line_sites(pos, cu.size, table, True, found, lines)
    except (Unsupported, KeyError, IndexError, ValueError, struct.error):
        return None
    base = cu.cu_offset
    return [(base + off, call_line, _decl_line(lines, off)) for off, call_line in found]


def instances_by_origin(debuginfo: "DebugInfo", cu) -> Optional[dict[int, list[tuple[int, Optional[int]]]]]:
    """The CU's subprograms and inline instances with code by the section offset of their abstract
    origin (``CUScanner.instances_by_origin``, offsets made section offsets), read from the section
    bytes; None when this scanner cannot read the CU.

    The native scanner (native/dwscan.h) reads the unit without a Python step per DIE; a unit of a
    shape it leaves to the byte scanner in Python (an unknown or indirect form, damage) is read by
    that one, the reference it is tested equal to (``python_instances_by_origin``)."""
    if debuginfo.little_endian:
        from ... import _native

        header = cu.header
        base = cu.cu_offset
        # (the unit's bytes alone, which its DIEs are read from next: positions are unit offsets)
        unit = (0, cu.size, cu.cu_die_offset - base, header.abbrev_offset, header.offset_size, header.address_size,
                header.version)
        found = _native.dwarf_instances(debuginfo.cu_bytes(cu), 0, debuginfo.section_bytes("debug_abbrev_sec"),
                                        unit, base)
        if found is not None:
            return found
    return python_instances_by_origin(debuginfo, cu)


def python_instances_by_origin(debuginfo: "DebugInfo", cu) -> Optional[dict[int, list[tuple[int, Optional[int]]]]]:
    """``instances_by_origin`` of ``cu`` by the byte scanner in Python."""
    try:
        _info, table, scanner = _cu_table(debuginfo, cu)
        pos = _children_start(cu, table, scanner)
        found = scanner.instances_by_origin(pos, cu.size, table, cu.cu_offset) if pos is not None else {}
    except (Unsupported, KeyError, IndexError, ValueError, struct.error):
        return None
    base = cu.cu_offset
    return {base + origin: [(base + off, None if caller is None else base + caller) for off, caller in dies]
            for origin, dies in found.items()}


def _decl_line(lines: dict, offset: int) -> Optional[int]:
    """DW_AT_decl_line of the DIE at ``offset`` as ``die_attr`` finds it, following its abstract
    origin or else its specification; ``UNKNOWN`` past a DIE ``lines`` lacks."""
    for _ in range(8):  # (die_attr's limit)
        values = lines.get(offset)
        if values is None:
            return UNKNOWN
        decl = values.get(AT_DECL_LINE)
        if decl is not None:
            return decl[1]
        link = values.get(AT_ABSTRACT_ORIGIN) or values.get(AT_SPECIFICATION)
        if link is None:
            return None
        if link[0] not in _CU_REF_FORMS:  # (into another unit)
            return UNKNOWN
        offset = link[1]
    return None


def uses_location_lists(debuginfo: "DebugInfo", cu) -> Optional[bool]:
    """Whether some DW_TAG_variable or DW_TAG_formal_parameter of the CU has a location list
    (DW_AT_location as sec_offset/loclistx, or data4/data8 before DWARF 4), read from the
    section bytes: the abbreviation table says which entries would, and the DIEs are walked
    until one of them is used. None when this scanner cannot read the CU."""
    try:
        info, table, scanner = _cu_table(debuginfo, cu)
        version = cu.header["version"]
        forms = {FORM_SEC_OFFSET, FORM_LOCLISTX} | ({FORM_DATA4, FORM_DATA8} if version < 4 else set())
        listed = set()
        for code, (tag, _children, specs, *_rest) in table.items():
            if tag in (TAG_VARIABLE, TAG_FORMAL_PARAMETER):
                for attr, form, _ in specs:
                    if attr == AT_LOCATION and form == FORM_INDIRECT:
                        return None
                    if attr == AT_LOCATION and form in forms:
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
    except (Unsupported, KeyError, IndexError, ValueError, struct.error):
        return None


def scan_dies(debuginfo: "DebugInfo", cu) -> tuple[dict, dict]:
    """The definitions of a unit the byte scanner cannot read, found among its DIEs (as ``build_indexes``
    lists them: {name: [(CU offset, DIE offset)]} of functions and of variables)."""
    from .die import die_linkage_name, die_name

    funcs: dict = {}
    variables: dict = {}
    for die in debuginfo.cu_functions(cu):
        # (as diescan.CODE_ATTRS: a definition with no code of its own nor an abstract origin's is not one)
        if "DW_AT_declaration" in die.attributes or not (debuginfo.has_code(die) or "DW_AT_inline" in die.attributes):
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
