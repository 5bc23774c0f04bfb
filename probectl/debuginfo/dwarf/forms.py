"""Plain-Python readers of DWARF attribute forms and abbreviation tables, put in place of
pyelftools' ``construct`` parsers for one DWARFInfo.

pyelftools reads every attribute through ``construct``, which costs ~20 µs an attribute; a
kernel probe reads a few hundred attributes and a CU's abbreviation table (hundreds of
declarations), so that alone was a third of a warm ``add -k vmlinux``. These readers return the
very values ``construct`` returns (ints, ``bytes`` for strings) and raise its ``FieldError`` at the
end of the data; the forms whose values are lists (blocks, ``data16``) keep pyelftools' parsers.
Everything here is an optimisation: with a pyelftools that lacks the hooks used, nothing changes.
"""
from __future__ import annotations

from typing import Callable, Optional, TypeVar

from elftools.construct.core import FieldError
from elftools.dwarf.abbrevtable import AbbrevDecl, AbbrevTable
from elftools.dwarf.enums import ENUM_DW_AT, ENUM_DW_FORM, ENUM_DW_TAG

from .leb128 import read_sleb128, read_uleb128

_TAG_NAMES = {v: k for k, v in ENUM_DW_TAG.items() if k != "_default_"}
_AT_NAMES = {v: k for k, v in ENUM_DW_AT.items() if k != "_default_"}
_FORM_NAMES = {v: k for k, v in ENUM_DW_FORM.items() if k != "_default_"}
_CHILDREN = {0: "DW_CHILDREN_no", 1: "DW_CHILDREN_yes"}


class FixedInt:
    """An unsigned integer of ``size`` bytes."""

    __slots__ = ("size", "byteorder")

    def __init__(self, size: int, little_endian: bool):
        self.size = size
        self.byteorder = "little" if little_endian else "big"

    def parse_stream(self, stream) -> int:
        data = stream.read(self.size)
        if len(data) != self.size:
            raise FieldError(f"expected {self.size} bytes, found {len(data)}")
        return int.from_bytes(data, self.byteorder)


class ULeb128:
    """An unsigned LEB128 number."""

    __slots__ = ()

    def parse_stream(self, stream) -> int:
        return _read_leb128(stream, signed=False)


class SLeb128:
    """A signed LEB128 number."""

    __slots__ = ()

    def parse_stream(self, stream) -> int:
        return _read_leb128(stream, signed=True)


def _read_leb128(stream, signed: bool) -> int:
    value = shift = 0
    read = stream.read
    while True:
        b = read(1)
        if not b:
            raise FieldError("LEB128 number runs past the end of the data")
        byte = b[0]
        value |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            return value - (1 << shift) if signed and byte & 0x40 else value


class CString:
    """A NUL-terminated string, without its NUL, as ``bytes``."""

    __slots__ = ()

    def parse_stream(self, stream) -> bytes:
        start = stream.tell()
        chunks = []
        while True:
            chunk = stream.read(64)
            if not chunk:
                raise FieldError("string runs past the end of the data")
            end = chunk.find(b"\0")
            if end >= 0:
                chunks.append(chunk[:end])
                stream.seek(start + sum(len(c) for c in chunks) + 1)
                return b"".join(chunks)
            chunks.append(chunk)


class Present:
    """DW_FORM_flag_present: no bytes (the flag is set by being there); pyelftools' raw value is b""."""

    __slots__ = ()

    def parse_stream(self, stream) -> bytes:
        return b""


_ULEB = ULeb128()
_SLEB = SLeb128()


class AttrSpec:
    """One attribute of an abbreviation, as pyelftools' DIE parser reads it: ``name``, ``form`` and,
    for DW_FORM_implicit_const, ``value`` (a lighter stand-in for a ``construct`` Container)."""

    __slots__ = ("name", "form", "value")

    def __init__(self, name, form, value=None):
        self.name, self.form, self.value = name, form, value

    def __getitem__(self, key: str):
        return getattr(self, key)

    def __repr__(self) -> str:
        return f"AttrSpec({self.name}, {self.form}, {self.value})"


def form_readers(structs) -> dict:
    """Readers for the scalar forms of one DWARFStructs (its byte order, offset and address sizes)."""
    le = structs.little_endian
    u8, u16, u24, u32, u64 = (FixedInt(n, le) for n in (1, 2, 3, 4, 8))
    offset = u32 if structs.dwarf_format == 32 else u64
    addr = u32 if structs.address_size == 4 else u64
    return {
        "DW_FORM_addr": addr, "DW_FORM_addrx": _ULEB, "DW_FORM_addrx1": u8, "DW_FORM_addrx2": u16,
        "DW_FORM_addrx3": u24, "DW_FORM_addrx4": u32,
        "DW_FORM_data1": u8, "DW_FORM_data2": u16, "DW_FORM_data4": u32, "DW_FORM_data8": u64,
        "DW_FORM_sdata": _SLEB, "DW_FORM_udata": _ULEB,
        "DW_FORM_string": CString(), "DW_FORM_strp": offset, "DW_FORM_strp_sup": offset,
        "DW_FORM_line_strp": offset, "DW_FORM_strx": _ULEB, "DW_FORM_strx1": u8, "DW_FORM_strx2": u16,
        "DW_FORM_strx3": u24, "DW_FORM_flag": u8,
        "DW_FORM_ref": u32, "DW_FORM_ref1": u8, "DW_FORM_ref2": u16, "DW_FORM_ref4": u32,
        "DW_FORM_ref_sup4": u32, "DW_FORM_ref8": u64, "DW_FORM_ref_sup8": u64, "DW_FORM_ref_udata": _ULEB,
        "DW_FORM_ref_addr": addr if structs.dwarf_version == 2 else offset,
        "DW_FORM_indirect": _ULEB, "DW_FORM_flag_present": Present(), "DW_FORM_sec_offset": offset,
        "DW_FORM_ref_sig8": u64, "DW_FORM_GNU_strp_alt": offset, "DW_FORM_GNU_ref_alt": offset,
        "DW_FORM_loclistx": _ULEB, "DW_FORM_rnglistx": _ULEB,
    }


class DIEStructs:
    """A CU's DWARFStructs as its DIEs read it: the plain readers for scalar forms and LEB128s,
    pyelftools' own parsers for everything else.

    The shared DWARFStructs itself is left alone: pyelftools builds some parsers at run time from
    its form table (line-program file entries), and those need ``construct`` objects.
    """

    def __init__(self, structs):
        self._structs = structs
        self.Dwarf_dw_form = dict(structs.Dwarf_dw_form)
        for form, reader in form_readers(structs).items():
            if form in self.Dwarf_dw_form:  # only what this pyelftools reads as a scalar itself
                self.Dwarf_dw_form[form] = reader
        self.the_Dwarf_uleb128 = _ULEB
        self.the_Dwarf_sleb128 = _SLEB

    def __getattr__(self, name: str):
        return getattr(self._structs, name)


_die_structs: dict[int, DIEStructs] = {}


def die_structs(structs) -> DIEStructs:
    """The DIEStructs of a DWARFStructs (one per byte order, format, address size and version)."""
    if isinstance(structs, DIEStructs):
        return structs
    key = id(structs)
    found = _die_structs.get(key)
    if found is None or found._structs is not structs:
        found = _die_structs[key] = DIEStructs(structs)
    return found


def read_abbrev_table(structs, stream, offset: int, size: Optional[int] = None) -> AbbrevTable:
    """The abbreviation table at ``offset`` of a section of ``size`` bytes, equal to pyelftools'
    ``AbbrevTable`` for it."""
    table = AbbrevTable.__new__(AbbrevTable)
    table.structs, table.stream, table.offset = structs, stream, offset
    try:
        table._abbrev_map = parse_abbrev_window(stream, offset, size, _abbrev_decls)
    except IndexError:
        raise FieldError(f"abbreviation table at 0x{offset:x} runs past the end of the section") from None
    return table


ABBREV_WINDOW = 64 << 10
_T = TypeVar("_T")


def parse_abbrev_window(stream, offset: int, size: Optional[int], parse: Callable[[bytes], _T]) -> _T:
    """``parse`` of the abbreviation table at ``offset``, given the section's bytes from there on:
    first a window of them (a kernel's section is 5 MB, one CU's table a few KB), then all of them
    when ``parse`` ran past the window (IndexError); IndexError when it runs past the section."""
    rest = None if size is None else size - offset
    stream.seek(offset)
    data = stream.read(ABBREV_WINDOW if rest is None else min(ABBREV_WINDOW, rest))
    try:
        return parse(data)
    except IndexError:
        if len(data) < ABBREV_WINDOW:
            raise
    stream.seek(offset)
    return parse(stream.read() if rest is None else stream.read(rest))


def _abbrev_decls(data: bytes) -> dict[int, AbbrevDecl]:
    """code → AbbrevDecl of the table at the start of ``data`` (IndexError: it runs past the end)."""
    decls: dict[int, AbbrevDecl] = {}
    pos = 0
    while True:
        code, pos = read_uleb128(data, pos)
        if code == 0:
            return decls
        tag, pos = read_uleb128(data, pos)
        flag = data[pos]
        pos += 1
        if flag not in _CHILDREN:
            raise FieldError(f"abbreviation {code}: bad children flag {flag}")
        specs = []
        while True:
            name, pos = read_uleb128(data, pos)
            form, pos = read_uleb128(data, pos)
            if name == 0 and form == 0:
                break
            form_name = _FORM_NAMES.get(form, form)
            value = None
            if form_name == "DW_FORM_implicit_const":
                value, pos = read_sleb128(data, pos)
            specs.append(AttrSpec(_AT_NAMES.get(name, name), form_name, value))
        decls[code] = AbbrevDecl(code, {"tag": _TAG_NAMES.get(tag, tag), "children_flag": _CHILDREN[flag],
                                        "attr_spec": specs})


def accelerate(dwarfinfo) -> None:
    """Read the attributes and abbreviation tables of ``dwarfinfo``'s CUs with the plain readers."""
    parse_cu = getattr(dwarfinfo, "_parse_CU_at_offset", None)
    abbrevs = getattr(dwarfinfo, "_abbrevtable_cache", None)
    if parse_cu is None or not isinstance(abbrevs, dict) or dwarfinfo.debug_abbrev_sec is None:
        return

    def parse_accelerated(offset: int):
        cu = parse_cu(offset)
        if isinstance(getattr(cu.structs, "Dwarf_dw_form", None), dict):
            cu.structs = die_structs(cu.structs)
        at = cu["debug_abbrev_offset"]
        if at not in abbrevs and at < dwarfinfo.debug_abbrev_sec.size:
            sec = dwarfinfo.debug_abbrev_sec
            abbrevs[at] = read_abbrev_table(dwarfinfo.structs, sec.stream, at, sec.size)
        return cu

    dwarfinfo._parse_CU_at_offset = parse_accelerated
