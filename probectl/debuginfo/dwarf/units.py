"""The units and DIEs of ``.debug_info``, read by probectl straight from the section bytes.

``DwarfSections`` holds a file's DWARF sections (each a ``Section``: a stream read like an
in-memory copy, mapped or inflated as it is read) and reads from them what the resolver asks:
units (``Unit``: the header, the abbreviation table, the bytes; the tables are the ones
``diescan.compiled_table`` compiles for the byte scanner, named), DIEs (``DIE``: the tag and the
attributes, each an ``AttributeValue``), strings and indexed addresses. A DIE is read when it is
asked for (by offset, as a child, as the target of a reference) and kept by its unit.

Attribute values are what the resolver needs them to be: strings (``strp``, ``strx``...) as the
``bytes`` of the string, flags as bools, indexed addresses (``addrx``) as addresses, indexed list
offsets (``loclistx``, ``rnglistx``) as offsets into their section, blocks as lists of bytes;
``raw_value`` is the number that was in ``.debug_info``. (These are pyelftools' conventions too: it
stays the tests' oracle, and the resolver was first written over it.) References within a unit
(``ref1``...``ref_udata``) keep their unit-relative value.

Damaged DWARF raises ``DwarfFormatError`` (a ValueError) or IndexError, which the DWARF entry
points turn into a DebugInfoError naming the file (``die.guarded``).
"""
from __future__ import annotations

import bisect
import os
from typing import TYPE_CHECKING, Any, Callable, Iterator, Literal, NamedTuple, Optional, Union

from .forms import (ADDRX, BLOCK_LENGTH_SIZE, FORM_BLOCK, FORM_DATA16, FORM_EXPRLOC, FORM_FLAG, FORM_FLAG_PRESENT,
                    FORM_IMPLICIT_CONST, FORM_INDIRECT, FORM_LINE_STRP, FORM_LOCLISTX, FORM_RNGLISTX, FORM_SDATA,
                    FORM_STRING, FORM_STRP, STRX, ULEB128, fixed_sizes)
from .leb128 import read_sleb128, read_uleb128
from .names import AT, FORM, TAG

# The forms whose value is an index into a table of the unit's (strings, addresses, lists): resolved
# once the unit's bases (DW_AT_str_offsets_base…) are known.
_INDEXED_FORMS = STRX | ADDRX | {FORM_LOCLISTX, FORM_RNGLISTX}


class DwarfFormatError(ValueError):
    """DWARF this reader cannot read: damaged, or of a shape it does not know."""


# The named tuples of the DWARF reader give NamedTuple their fields as a list of (name, type): written
# as annotations, under ``from __future__ import annotations``, each type is a string that typing
# compiles (a ForwardRef), for each class at every start of a command that reads DWARF.


ByteOrder = Literal["little", "big"]
Buffer = Union[bytes, memoryview]  # (a section's bytes, or a view of them)

if TYPE_CHECKING:
    from typing import Protocol

    class SectionStream(Protocol):
        """What reads a section's bytes: a BytesIO, a SectionMap, an InflatingSection, pyelftools' stream."""

        def seek(self, offset: int, whence: int = 0, /) -> object: ...
        def tell(self) -> int: ...
        def read(self, size: int = -1, /) -> bytes: ...
else:  # (for a checker only: a Protocol class would be made at every start)
    SectionStream = object


class Section(NamedTuple("Section", [("stream", SectionStream), ("name", str), ("global_offset", Optional[int]),
                                     ("size", int), ("address", int)])):
    """One DWARF section: ``stream`` reads its bytes (``seek``/``tell``/``read``, positions from the
    section's start); ``global_offset`` is its position in the file (None if it is not there as is)."""

    __slots__ = ()


class AttributeValue(NamedTuple("AttributeValue", [("name", object), ("form", object), ("value", object),
                                                   ("raw_value", object), ("offset", int)])):
    """One attribute of a DIE: its name, form, value (see the module docstring), the raw number or
    bytes read, and its offset in ``.debug_info``."""

    __slots__ = ()


def section_data(sec: Optional[Section]) -> bytes:
    """All the bytes of a section (empty without it)."""
    if sec is None:
        return b""
    stream = sec.stream
    if hasattr(stream, "getvalue"):
        return stream.getvalue()
    stream.seek(0)
    return stream.read()


# --- unit headers ---------------------------------------------------------------------------------

DW_UT_COMPILE, DW_UT_TYPE, DW_UT_PARTIAL, DW_UT_SKELETON, DW_UT_SPLIT_COMPILE, DW_UT_SPLIT_TYPE = 1, 2, 3, 4, 5, 6


class UnitHeader(NamedTuple("UnitHeader", [("offset", int), ("end", int), ("die_offset", int), ("abbrev_offset", int),
                                           ("offset_size", int), ("address_size", int), ("version", int),
                                           ("unit_type", int)])):
    """A unit's header: (offset, end, first DIE offset, abbrev offset, offset size, address size,
    version, unit type); a DWARF 2-4 unit's type is DW_UT_compile."""

    __slots__ = ()

    def __getitem__(self, key):
        """A field by position, or by name (``header["version"]``, ``header["debug_abbrev_offset"]``)."""
        if isinstance(key, str):
            return self.abbrev_offset if key == "debug_abbrev_offset" else getattr(self, key)
        return tuple.__getitem__(self, key)


def unit_headers(read: Callable[[int, int], bytes], size: int, little_endian: bool,
                 limit: Optional[int] = None) -> list[UnitHeader]:
    """The header of every unit of a ``.debug_info`` of ``size`` bytes (of the first ``limit``),
    given ``read(position, length)`` of its bytes (only the headers are read); DwarfFormatError
    where one is damaged. (With a ``limit``, a unit may end past ``size``: the caller checks.)"""
    order: ByteOrder = "little" if little_endian else "big"
    units: list[UnitHeader] = []
    pos = 0
    while pos + 11 <= size and (limit is None or len(units) < limit):
        head = read(pos, 40)
        length = int.from_bytes(head[0:4], order)
        at, offset_size = 4, 4
        if length == 0xFFFFFFFF:
            length = int.from_bytes(head[4:12], order)
            at, offset_size = 12, 8
        elif length >= 0xFFFFFFF0:
            raise DwarfFormatError(f"unit at 0x{pos:x}: reserved unit length 0x{length:x}")
        end = pos + at + length
        if end > size and limit is None:
            raise DwarfFormatError(f"unit at 0x{pos:x} runs past the end of .debug_info")
        version = int.from_bytes(head[at:at + 2], order)
        at += 2
        if version == 5:
            unit_type, address_size = head[at], head[at + 1]
            at += 2
            abbrev_offset = int.from_bytes(head[at:at + offset_size], order)
            at += offset_size
            if unit_type in (DW_UT_SKELETON, DW_UT_SPLIT_COMPILE):
                at += 8  # dwo_id
            elif unit_type in (DW_UT_TYPE, DW_UT_SPLIT_TYPE):
                at += 8 + offset_size  # type signature, type offset
            elif unit_type not in (DW_UT_COMPILE, DW_UT_PARTIAL):
                raise DwarfFormatError(f"unit at 0x{pos:x}: unknown unit type {unit_type}")
        elif 2 <= version <= 4:
            unit_type = DW_UT_COMPILE
            abbrev_offset = int.from_bytes(head[at:at + offset_size], order)
            at += offset_size
            address_size = head[at]
            at += 1
        else:
            raise DwarfFormatError(f"unit at 0x{pos:x}: DWARF version {version}")
        if address_size not in (4, 8):
            raise DwarfFormatError(f"unit at 0x{pos:x}: address size {address_size}")
        if pos + at > end:
            raise DwarfFormatError(f"unit at 0x{pos:x}: header longer than the unit")
        units.append(UnitHeader(pos, end, pos + at, abbrev_offset, offset_size, address_size, version, unit_type))
        pos = end
    return units


# --- abbreviation tables --------------------------------------------------------------------------

ABBREV_WINDOW = 64 << 10


def parse_abbrev_window(stream: SectionStream, offset: int, size: Optional[int], parse: Callable[[bytes], object]):
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


class DIE:
    """One debugging information entry: ``tag``, ``attributes`` (name → AttributeValue, in the order
    of the abbreviation), ``offset`` in ``.debug_info``, ``size`` in bytes (its own attributes, not
    its children), ``has_children``, and ``cu``, the unit it is in."""

    __slots__ = ("cu", "offset", "size", "tag", "attributes", "has_children", "abbrev_code", "_parent")

    def __init__(self, cu: "Unit", offset: int, size: int, tag, attributes: dict, has_children: bool,
                 abbrev_code: int):
        self.cu, self.offset, self.size, self.tag = cu, offset, size, tag
        self.attributes, self.has_children, self.abbrev_code = attributes, has_children, abbrev_code
        self._parent: Optional[DIE] = None

    @property
    def dwarfinfo(self) -> "DwarfSections":
        return self.cu.dwarfinfo

    def iter_children(self) -> Iterator["DIE"]:
        """The children, in order (read as they are reached)."""
        return self.cu.iter_DIE_children(self)

    def get_parent(self) -> Optional["DIE"]:
        """The DIE this one is a child of (None for the unit's top DIE)."""
        if self._parent is None and self.offset != self.cu.cu_die_offset:
            for die in self.cu.iter_DIEs():  # (sets every parent on the way)
                if die is self:
                    break
        return self._parent

    def get_DIE_from_attribute(self, name: str) -> "DIE":
        """The DIE a reference attribute points to."""
        attr = self.attributes[name]
        form = attr.form
        if form in ("DW_FORM_ref1", "DW_FORM_ref2", "DW_FORM_ref4", "DW_FORM_ref8", "DW_FORM_ref_udata"):
            return self.cu.get_DIE_from_refaddr(self.cu.cu_offset + attr.raw_value)
        if form == "DW_FORM_ref_addr":
            return self.cu.dwarfinfo.get_DIE_from_refaddr(attr.raw_value)
        raise DwarfFormatError(f"DIE 0x{self.offset:x}: {name} is a {form} reference, which is not read here")

    def __repr__(self) -> str:
        return f"<DIE {self.tag} at 0x{self.offset:x}>"


class Unit:
    """One unit of ``.debug_info``: its header (``header``, also read as ``unit["version"]``...),
    ``cu_offset``, ``size`` (header included), ``cu_die_offset``, and its DIEs, read on demand."""

    def __init__(self, dwarfinfo: "DwarfSections", header: UnitHeader):
        self.dwarfinfo = dwarfinfo
        self.header = header
        self.cu_offset = header.offset
        self.size = header.end - header.offset
        self.cu_die_offset = header.die_offset
        self.offset_size = header.offset_size
        self.address_size = header.address_size
        self.version = header.version
        self._data: Optional[bytes] = None
        self._abbrevs: Optional[dict] = None
        self._dies: dict[int, DIE] = {}
        self._after: dict[int, int] = {}  # DIE offset → offset after its subtree
        self._fixed = fixed_sizes(header.offset_size, header.address_size, header.version)
        del self._fixed[FORM_DATA16]  # (read below as a block of 16 bytes, not as a number)
        self._bases: Optional[dict[str, int]] = None

    def __getitem__(self, key: str):
        """A field of the header by name (``unit["version"]``)."""
        return self.header[key]

    def __repr__(self) -> str:
        return f"<Unit at 0x{self.cu_offset:x}>"

    @property
    def data(self) -> bytes:
        """The unit's bytes from its header on (positions in them are offsets from ``cu_offset``)."""
        if self._data is None:
            self._data = self.dwarfinfo.info_bytes(self.cu_offset, self.size)
        return self._data

    @property
    def abbrevs(self) -> dict:
        """code → (tag name, has children, ((attribute name, form number, implicit constant), ...))."""
        if self._abbrevs is None:
            h = self.header
            self._abbrevs = self.dwarfinfo.named_abbreviations(
                self.dwarfinfo.compiled_abbreviations((h.abbrev_offset, h.offset_size, h.address_size, h.version)))
        return self._abbrevs

    def has_top_DIE(self) -> bool:
        return self.cu_die_offset in self._dies

    def get_top_DIE(self) -> DIE:
        die = self._die_at(self.cu_die_offset)
        if die is None:
            raise DwarfFormatError(f"unit at 0x{self.cu_offset:x} has no DIE")
        return die

    def get_DIE_from_refaddr(self, refaddr: int) -> DIE:
        """The DIE at ``refaddr`` (a ``.debug_info`` offset inside this unit)."""
        if not self.cu_die_offset <= refaddr < self.cu_offset + self.size:
            raise DwarfFormatError(f"reference 0x{refaddr:x} outside its unit at 0x{self.cu_offset:x}")
        die = self._die_at(refaddr)
        if die is None:
            raise DwarfFormatError(f"reference 0x{refaddr:x} to a null entry")
        return die

    def iter_DIEs(self) -> Iterator[DIE]:
        """Every DIE of the unit in order, parents set."""
        top = self.get_top_DIE()
        yield top
        stack = [top]
        pos = self._end_of(top) if top.has_children else self.cu_offset + self.size
        end = self.cu_offset + self.size
        while stack and pos < end:
            die = self._die_at(pos)
            if die is None:
                stack.pop()
                pos += 1
                continue
            die._parent = stack[-1]
            yield die
            if die.has_children:
                stack.append(die)
                pos = self._end_of(die)
            else:
                pos = self._end_of(die)

    def iter_DIE_children(self, die: DIE) -> Iterator[DIE]:
        if not die.has_children:
            return
        pos = self._end_of(die)
        end = self.cu_offset + self.size
        while pos < end:
            child = self._die_at(pos)
            if child is None:
                return
            child._parent = die
            yield child
            nxt = self._after_subtree(child)
            if nxt <= pos:
                raise DwarfFormatError(f"DIE 0x{child.offset:x}: its sibling is not after it")
            pos = nxt

    def _end_of(self, die: DIE) -> int:
        return die.offset + die.size

    def _after_subtree(self, die: DIE) -> int:
        """The offset after ``die`` and all its descendants (its sibling, or its parent's null)."""
        if not die.has_children:
            return die.offset + die.size
        found = self._after.get(die.offset)
        if found is not None:
            return found
        sibling = die.attributes.get("DW_AT_sibling")
        if sibling is not None and sibling.form in ("DW_FORM_ref1", "DW_FORM_ref2", "DW_FORM_ref4",
                                                    "DW_FORM_ref8", "DW_FORM_ref_udata"):
            found = self.cu_offset + sibling.raw_value
            if found <= die.offset:
                raise DwarfFormatError(f"DIE 0x{die.offset:x}: its sibling is not after it")
        else:
            # No sibling reference: walk the descendants to the null entry that closes them.
            depth = 1
            pos = die.offset + die.size
            end = self.cu_offset + self.size
            data, base = self.data, self.cu_offset
            while depth:
                if pos >= end:
                    raise DwarfFormatError(f"DIE 0x{die.offset:x}: its children run past the end of the unit")
                if data[pos - base] == 0:
                    depth -= 1
                    pos += 1
                    continue
                child = self._die_at(pos)
                if child is None:  # (a null entry's code written in more than one byte)
                    raise DwarfFormatError(f"DIE 0x{die.offset:x}: a null entry of several bytes among its children")
                if child.has_children:
                    inner = self._after.get(child.offset)
                    if inner is not None:
                        pos = inner
                        continue
                    depth += 1
                pos = child.offset + child.size
            found = pos
        self._after[die.offset] = found
        return found

    def _die_at(self, offset: int) -> Optional[DIE]:
        """The DIE at ``offset`` (None for a null entry), read once."""
        die = self._dies.get(offset)
        if die is not None:
            return die
        data = self.data
        base = self.cu_offset
        pos = offset - base
        if not 0 <= pos < len(data):
            raise DwarfFormatError(f"DIE offset 0x{offset:x} outside its unit")
        code, pos = read_uleb128(data, pos)
        if code == 0:
            return None
        decl = self.abbrevs.get(code)
        if decl is None:
            raise DwarfFormatError(f"DIE 0x{offset:x}: abbreviation code {code} is not in its table")
        tag, children, specs = decl
        fixed = self._fixed
        order = self.dwarfinfo.byteorder
        n = len(data)
        attributes = {}
        deferred = None
        raw: Any  # (a number, bytes or a list of bytes, as the form says)
        value: object
        for name, form, implicit in specs:
            at = pos
            if form == FORM_INDIRECT:
                form, pos = read_uleb128(data, pos)
                if form == FORM_INDIRECT:
                    raise DwarfFormatError(f"DIE 0x{offset:x}: DW_FORM_indirect to itself")
            size = fixed.get(form)
            if size is not None:
                end = pos + size
                if end > n:
                    raise DwarfFormatError(f"DIE 0x{offset:x} runs past the end of its unit")
                # (flag_present has no bytes: its raw value is empty, its value True)
                raw = int.from_bytes(data[pos:end], order) if size else (implicit if form == FORM_IMPLICIT_CONST
                                                                           else b"")
                pos = end
                if form == FORM_STRP:
                    value = self.dwarfinfo.string(raw)
                elif form == FORM_FLAG:
                    value = raw != 0
                elif form in _INDEXED_FORMS:
                    value = raw
                    deferred = (deferred or []) + [name]
                elif form == FORM_LINE_STRP:
                    value = self.dwarfinfo.line_string(raw)
                elif form == FORM_FLAG_PRESENT:
                    value = True
                else:
                    value = raw
            elif form in ULEB128:
                raw, pos = read_uleb128(data, pos)
                value = raw
                if form in _INDEXED_FORMS:
                    deferred = (deferred or []) + [name]
            elif form == FORM_SDATA:
                raw, pos = read_sleb128(data, pos)
                value = raw
            elif form == FORM_STRING:
                end = data.find(b"\0", pos)
                if end < 0:
                    raise DwarfFormatError(f"DIE 0x{offset:x}: a string runs past the end of its unit")
                raw = value = data[pos:end]
                pos = end + 1
            elif form == FORM_EXPRLOC or form == FORM_BLOCK or form in BLOCK_LENGTH_SIZE:
                if form in BLOCK_LENGTH_SIZE:
                    width = BLOCK_LENGTH_SIZE[form]
                    length = int.from_bytes(data[pos:pos + width], order)
                    pos += width
                else:
                    length, pos = read_uleb128(data, pos)
                end = pos + length
                if end > n:
                    raise DwarfFormatError(f"DIE 0x{offset:x}: a block runs past the end of its unit")
                raw = value = list(data[pos:end])
                pos = end
            elif form == FORM_DATA16:
                end = pos + 16
                if end > n:
                    raise DwarfFormatError(f"DIE 0x{offset:x} runs past the end of its unit")
                raw = value = list(data[pos:end])
                pos = end
            else:
                raise DwarfFormatError(f"DIE 0x{offset:x}: unknown attribute form 0x{form:x}")
            attributes[name] = AttributeValue(name, FORM.get(form, form), value, raw, at + base)
        if pos > n:
            raise DwarfFormatError(f"DIE 0x{offset:x} runs past the end of its unit")
        die = DIE(self, offset, pos + base - offset, tag, attributes, children, code)
        self._dies[offset] = die
        if deferred:
            self._translate(die, deferred)
        return die

    def _translate(self, die: DIE, names: list) -> None:
        """The values of the indexed forms (strx, addrx, loclistx, rnglistx) of ``die``, which need the
        unit's bases (from its top DIE: when ``die`` is the top DIE, once all of it is read)."""
        bases = self.bases()
        attrs = die.attributes
        for name in names:
            attr = attrs[name]
            form, raw = attr.form, attr.raw_value
            value: object
            if form.startswith(("DW_FORM_strx", "DW_FORM_GNU_str_index")):
                value = self.dwarfinfo.string(self.dwarfinfo.indexed_offset(
                    "debug_str_offsets_sec", bases.get("str_offsets", 8 if self.offset_size == 4 else 16),
                    raw, self.offset_size))
            elif form.startswith(("DW_FORM_addrx", "DW_FORM_GNU_addr_index")):
                value = self.dwarfinfo.get_addr(self, raw)
            else:
                section = "debug_loclists_sec" if form == "DW_FORM_loclistx" else "debug_rnglists_sec"
                key = "loclists" if form == "DW_FORM_loclistx" else "rnglists"
                base = bases.get(key, 12 if self.offset_size == 4 else 20)
                value = base + self.dwarfinfo.indexed_offset(section, base, raw, self.offset_size)
            attrs[name] = attr._replace(value=value)

    def bases(self) -> dict[str, int]:
        """The unit's DW_AT_*_base offsets (str_offsets, addr, loclists, rnglists), by short name."""
        if self._bases is None:
            top = self._dies.get(self.cu_die_offset) or self.get_top_DIE()
            found = {}
            for key, names in (("str_offsets", ("DW_AT_str_offsets_base",)),
                               ("addr", ("DW_AT_addr_base", "DW_AT_GNU_addr_base")),
                               ("loclists", ("DW_AT_loclists_base",)),
                               ("rnglists", ("DW_AT_rnglists_base",))):
                for name in names:
                    attr = top.attributes.get(name)
                    if attr is not None:
                        found[key] = attr.raw_value
                        break
            self._bases = found
        return self._bases


class DwarfSections:
    """The DWARF sections of one file (each a ``Section`` or None, as attributes ``debug_info_sec``,
    ``debug_abbrev_sec``...), and its units and DIEs read from them.

    ``read_info(position, length)``, when given, reads ``.debug_info``'s unit headers without
    touching the section's stream (a pread of the file where the section is mapped)."""

    SECTIONS = ("debug_info_sec", "debug_aranges_sec", "debug_abbrev_sec", "debug_frame_sec", "eh_frame_sec",
                "debug_str_sec", "debug_loc_sec", "debug_ranges_sec", "debug_line_sec", "debug_pubtypes_sec",
                "debug_pubnames_sec", "debug_addr_sec", "debug_str_offsets_sec", "debug_line_str_sec",
                "debug_loclists_sec", "debug_rnglists_sec", "debug_sup_sec", "gnu_debugaltlink_sec",
                "debug_types_sec")

    debug_info_sec: Optional[Section]
    debug_aranges_sec: Optional[Section]
    debug_abbrev_sec: Optional[Section]
    debug_frame_sec: Optional[Section]
    eh_frame_sec: Optional[Section]
    debug_str_sec: Optional[Section]
    debug_loc_sec: Optional[Section]
    debug_ranges_sec: Optional[Section]
    debug_line_sec: Optional[Section]
    debug_pubtypes_sec: Optional[Section]
    debug_pubnames_sec: Optional[Section]
    debug_addr_sec: Optional[Section]
    debug_str_offsets_sec: Optional[Section]
    debug_line_str_sec: Optional[Section]
    debug_loclists_sec: Optional[Section]
    debug_rnglists_sec: Optional[Section]
    debug_sup_sec: Optional[Section]
    gnu_debugaltlink_sec: Optional[Section]
    debug_types_sec: Optional[Section]

    def __init__(self, sections: dict[str, Optional[Section]], little_endian: bool, address_size: int,
                 read_info: Optional[Callable[[int, int], bytes]] = None):
        for name in self.SECTIONS:
            setattr(self, name, sections.get(name))
        self.little_endian = little_endian
        self.byteorder: ByteOrder = "little" if little_endian else "big"
        self.address_size = address_size
        self._read_info = read_info
        self._units: dict[int, Unit] = {}
        self._headers: Optional[list[UnitHeader]] = None
        self._starts: list[int] = []
        # (abbrev offset, offset size, address size, version) -> compiled table (compiled_abbreviations)
        self._compiled: dict[tuple[int, int, int, int], dict[int, tuple]] = {}
        self._compiled_entries: dict[tuple[int, int, int], dict] = {}
        # id of a compiled table / entry -> its named form (named_abbreviations; the entry is kept
        # with it, so that its id is not reused)
        self._named: dict[int, dict] = {}
        self._named_entries: dict[int, tuple] = {}
        self._bytes: dict[str, bytes] = {}

    # --- sections -------------------------------------------------------------------------------

    def needed_section(self, name: str) -> Section:
        """The section of attribute ``name``; DwarfFormatError when the file has none."""
        sec = getattr(self, name)
        if sec is None:
            raise DwarfFormatError(f"no .{name.removesuffix('_sec')} section")
        return sec

    def section_bytes(self, name: str) -> bytes:
        """All the bytes of a section other than ``.debug_info`` (by attribute name), read once."""
        data = self._bytes.get(name)
        if data is None:
            data = self._bytes[name] = section_data(getattr(self, name, None))
        return data

    def has_section_bytes(self, name: str) -> bool:
        return name in self._bytes

    def _whole(self, name: str) -> Optional[bytes]:
        """The bytes of a section when holding all of them costs little (in memory, or copied
        already); None for an inflated section, which is read piece by piece through its stream, so
        that what this run reads is kept for the next (:mod:`.inflating`), and for one mapped or read
        from the file piece by piece (``sections.CopiedSection``), read where it lies (copied whole to
        read a string, libstdc++'s .debug_str cost ~0.7 ms; its .debug_line, for one unit's table, ~0.4 ms)."""
        sec = getattr(self, name, None)
        if sec is None:
            return b""
        if hasattr(sec.stream, "windows") or (name not in self._bytes and (
                getattr(sec.stream, "base", None) is not None or getattr(sec.stream, "copied", True) is False)):
            return None
        return self.section_bytes(name)

    def read(self, name: str, offset: int, length: int) -> bytes:
        """``length`` bytes at ``offset`` of a section (fewer at its end)."""
        data = self._whole(name)
        if data is not None:
            return data[offset:offset + length] if offset >= 0 else b""
        stream = getattr(self, name).stream
        stream.seek(offset)
        return stream.read(length)

    def window(self, name: str, offset: int, parse: Callable[[Buffer], object]):
        """``parse`` of a section's bytes from ``offset`` on: a window of them first, all of them
        when ``parse`` ran past the window (IndexError)."""
        data = self._whole(name)
        if data is not None:
            return parse(memoryview(data)[offset:] if offset >= 0 else b"")
        sec = getattr(self, name)
        return parse_abbrev_window(sec.stream, offset, sec.size, parse)

    def _string_in(self, name: str, offset: int) -> Optional[bytes]:
        data = self._whole(name)
        if data is not None:
            return _cstring(data, offset)
        if not 0 <= offset < getattr(self, name).size:
            return None
        chunks = []
        while True:
            chunk = self.read(name, offset, 256)
            if not chunk:
                return None
            end = chunk.find(b"\0")
            if end >= 0:
                chunks.append(chunk[:end])
                return b"".join(chunks)
            chunks.append(chunk)
            offset += len(chunk)

    def info_bytes(self, offset: int, length: int) -> bytes:
        sec = self.needed_section("debug_info_sec")
        sec.stream.seek(offset)
        return sec.stream.read(length)

    def string(self, offset: int) -> Optional[bytes]:
        """The string at ``offset`` of ``.debug_str`` (None outside it)."""
        return self._string_in("debug_str_sec", offset)

    def line_string(self, offset: int) -> Optional[bytes]:
        """The string at ``offset`` of ``.debug_line_str`` (None outside it)."""
        return self._string_in("debug_line_str_sec", offset)

    def indexed_offset(self, section: str, base: int, index: int, offset_size: int) -> int:
        """Entry ``index`` of the offset table at ``base`` of a section (str_offsets, loclists,
        rnglists)."""
        data = self.read(section, base + index * offset_size, offset_size)
        if base + index * offset_size < 0 or len(data) != offset_size:
            raise DwarfFormatError(f"index {index} outside the offset table of .{section[:-4]}")
        return int.from_bytes(data, self.byteorder)

    def get_addr(self, cu: Unit, index: int) -> int:
        """Address ``index`` of the unit's table in ``.debug_addr``."""
        size = cu.address_size
        data = self.read("debug_addr_sec", cu.bases().get("addr", 8) + index * size, size)
        if len(data) != size:
            raise DwarfFormatError(f"address index {index} outside .debug_addr")
        return int.from_bytes(data, self.byteorder)

    def compiled_abbreviations(self, fmt: tuple[int, int, int, int]) -> dict[int, tuple]:
        """The abbreviation table of ``fmt`` (abbreviation offset, offset size, address size,
        version) as ``diescan.compiled_table`` compiles it for the byte scanner (which the DIE reader
        names: ``named_abbreviations``), compiled once; the entries of one format are shared by the
        tables (a library's units repeat them)."""
        table = self._compiled.get(fmt)
        if table is None:
            from .diescan import compiled_table

            offset, rest = fmt[0], fmt[1:]
            shared = self._compiled_entries.setdefault(rest, {})
            sec = self.debug_abbrev_sec
            if sec is None or not 0 <= offset < sec.size:
                raise DwarfFormatError(f"abbreviation table offset 0x{offset:x} outside .debug_abbrev")
            whole = self._whole("debug_abbrev_sec")
            if whole is not None:
                table = compiled_table(whole, offset, *rest, shared)
            else:
                table = parse_abbrev_window(sec.stream, offset, sec.size,
                                            lambda data: compiled_table(data, 0, *rest, shared))
            self._compiled[fmt] = table
        return table

    def named_abbreviations(self, table: dict[int, tuple]) -> dict[int, tuple]:
        """A compiled table with its tags and attributes named (``names``), as DIEs carry them."""
        named = self._named.get(id(table))
        if named is None:
            named = {}
            entries = self._named_entries
            for code, entry in table.items():
                found = entries.get(id(entry))
                if found is None:
                    tag, children, specs = entry[0], entry[1], entry[2]
                    found = entries[id(entry)] = (entry, (TAG.get(tag, tag), children,
                                                          tuple((AT.get(a, a), f, v) for a, f, v in specs)))
                named[code] = found[1]
            self._named[id(table)] = named
        return named

    # --- units ----------------------------------------------------------------------------------

    def _header_reader(self) -> Callable[[int, int], bytes]:
        if self._read_info is not None:
            return self._read_info
        stream = self.needed_section("debug_info_sec").stream

        def read(at: int, length: int) -> bytes:
            stream.seek(at)
            return stream.read(length)

        return read

    def unit_headers(self) -> list[UnitHeader]:
        """Every unit's header, in section order (read once)."""
        if self._headers is None:
            sec = self.debug_info_sec
            if sec is None:
                self._headers = []
            elif self._read_info is None and hasattr(sec.stream, "getvalue"):
                # (in memory, or inflated: all the headers need all of it, read where it is)
                data = section_data(sec)
                self._headers = unit_headers(lambda at, length: data[at:at + length], sec.size, self.little_endian)
            else:
                self._headers = unit_headers(self._header_reader(), sec.size, self.little_endian)
            self._starts = [h.offset for h in self._headers]
        return self._headers

    def iter_CUs(self) -> Iterator[Unit]:
        for header in self.unit_headers():
            yield self._unit(header)

    def _unit(self, header: UnitHeader) -> Unit:
        unit = self._units.get(header.offset)
        if unit is None:
            unit = self._units[header.offset] = Unit(self, header)
        return unit

    def get_CU_at(self, offset: int) -> Unit:
        """The unit whose header is at ``offset`` (only that header is read: the others are not, and
        an inflated section is not inflated up to the last one)."""
        unit = self._units.get(offset)
        if unit is not None:
            return unit
        sec = self.debug_info_sec
        if sec is None or not 0 <= offset < sec.size:
            raise DwarfFormatError(f"no unit at offset 0x{offset:x} of .debug_info")
        read = self._header_reader()
        (header,) = unit_headers(lambda at, length: read(offset + at, length), min(sec.size - offset, 40),
                                 self.little_endian, limit=1) or (None,)
        if header is None:
            raise DwarfFormatError(f"no unit at offset 0x{offset:x} of .debug_info")
        end = header.end + offset
        if end > sec.size:
            raise DwarfFormatError(f"unit at 0x{offset:x} runs past the end of .debug_info")
        header = header._replace(offset=offset, end=end, die_offset=header.die_offset + offset)
        return self._unit(header)

    def get_CU_containing(self, refaddr: int) -> Unit:
        """The unit holding the ``.debug_info`` offset ``refaddr`` (a unit read already, else found
        among all the unit headers)."""
        for unit in self._units.values():
            if unit.cu_offset <= refaddr < unit.cu_offset + unit.size:
                return unit
        headers = self.unit_headers()
        k = bisect.bisect_right(self._starts, refaddr) - 1
        if k < 0 or refaddr >= headers[k].end:
            raise DwarfFormatError(f"reference 0x{refaddr:x} outside every unit")
        return self._unit(headers[k])

    def get_DIE_from_refaddr(self, refaddr: int, cu: Optional[Unit] = None) -> DIE:
        if cu is None or not cu.cu_offset <= refaddr < cu.cu_offset + cu.size:
            cu = self.get_CU_containing(refaddr)
        return cu.get_DIE_from_refaddr(refaddr)


def _cstring(data: bytes, offset: int) -> Optional[bytes]:
    if not 0 <= offset < len(data):
        return None
    end = data.find(b"\0", offset)
    return None if end < 0 else data[offset:end]


def pread_reader(fileno: int, start: int) -> Callable[[int, int], bytes]:
    """``read(position, length)`` of a section at ``start`` of an open file, by pread."""
    return lambda at, length: os.pread(fileno, length, start + at)
