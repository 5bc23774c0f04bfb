"""DIEs read straight from ``.debug_info`` bytes: compiled abbreviation tables and ``CUScanner``.

Reading every DIE whole (``units``) would take seconds on a library such as libc. This scanner decodes only the attributes the indexes need and skips every subtree it does not
want through ``DW_AT_sibling`` or the fixed size of its attributes; abbreviation entries are
compiled once per distinct byte string (a library's CUs repeat them). It is apart from
``dieindex``, which decides what a unit's definitions are and builds the index of all units,
because it is the hot loop: what it reads, and how fast, is all it is about.

Any form it does not know raises ``Unsupported``; the caller then reads that unit DIE by DIE.
"""
from __future__ import annotations

import struct
from typing import Any, Callable, Optional

from .forms import (BLOCK_LENGTH_SIZE, CONSTANT_SIZE, FORM_ADDR, FORM_BLOCK, FORM_EXPRLOC, FORM_FLAG,
                    FORM_IMPLICIT_CONST, FORM_INDIRECT, FORM_LINE_STRP, FORM_REF_ADDR, FORM_REF_UDATA, FORM_SDATA,
                    FORM_STRING, FORM_STRP, FORM_STRX, LEB128, OFFSET_SIZED, STRX_SIZE, UNIT_REF_SIZE)
from .leb128 import read_sleb128, read_uleb128

# DW_TAG / DW_AT numbers used by the scanner and the indexes built with it.
TAG_SUBPROGRAM = 0x2E
TAG_VARIABLE = 0x34
TAG_FORMAL_PARAMETER = 0x05
TAG_NAMESPACE = 0x39
TAG_MODULE = 0x1E
TAG_STRUCTURE_TYPE = 0x13
TAG_UNION_TYPE = 0x17
TAG_CLASS_TYPE = 0x02
AT_LANGUAGE = 0x13
DW_LANG_RUST = 0x1C
AT_SIBLING = 0x01
AT_NAME = 0x03
AT_LOW_PC = 0x11
AT_EXTERNAL = 0x3F
AT_DECLARATION = 0x3C
AT_LOCATION = 0x02
AT_RANGES = 0x55
AT_ENTRY_PC = 0x52
AT_INLINE = 0x20
AT_ABSTRACT_ORIGIN = 0x31
AT_SPECIFICATION = 0x47
AT_LINKAGE_NAME = 0x6E
AT_MIPS_LINKAGE_NAME = 0x2007
AT_STR_OFFSETS_BASE = 0x72
AT_HIGH_PC = 0x12
AT_DECL_LINE = 0x3B
AT_CALL_LINE = 0x59
TAG_INLINED_SUBROUTINE = 0x1D
TAG_LEXICAL_BLOCK = 0x0B
# What instances_by_origin reads of subprograms and inline instances: the origin, and whether the
# DIE has code (perf's die_is_func_instance: an entry pc, a low pc or ranges).
ORIGIN_ATTRS = frozenset({AT_ABSTRACT_ORIGIN, AT_LOW_PC, AT_ENTRY_PC, AT_RANGES})
_UNIT_REF_FORMS = frozenset({0x11, 0x12, 0x13, 0x14, 0x15})  # ref1 ref2 ref4 ref8 ref_udata
# What line_sites reads of subprograms and inline instances (lines._funclines' declaration lines
# and call sites).
LINE_ATTRS = frozenset({AT_DECL_LINE, AT_CALL_LINE, AT_ABSTRACT_ORIGIN, AT_SPECIFICATION})
_WANTED = {AT_SIBLING, AT_NAME, AT_LOW_PC, AT_EXTERNAL, AT_DECLARATION, AT_LOCATION, AT_RANGES,
           AT_ENTRY_PC, AT_INLINE, AT_ABSTRACT_ORIGIN, AT_SPECIFICATION, AT_LINKAGE_NAME, AT_MIPS_LINKAGE_NAME}
# What makes a function's definition one with code: its own (an address, ranges), or inline
# instances and out-of-line copies that refer to it as their abstract origin (DW_AT_inline). One with
# neither is a definition whose every call the compiler removed: nothing to probe, so not indexed.
CODE_ATTRS = frozenset({AT_LOW_PC, AT_RANGES, AT_ENTRY_PC, AT_INLINE})

# The tags CUScanner.walk hands to the index and to collect, and to line_sites.
_DEFINITION_TAGS = frozenset({TAG_SUBPROGRAM, TAG_VARIABLE})
_SUBPROGRAM_TAGS = frozenset({TAG_SUBPROGRAM})
_NO_TAGS: frozenset = frozenset()
ALL_LEVELS = -1  # CUScanner.walk into namespaces and modules all the way down
# The DIEs whose children CUScanner.walk looks among for definitions: namespaces and modules; in a
# Rust unit also types, where rustc defines the methods of an impl block (shop::Cart::add is a child
# of the structure type Cart, in the modules of its path, as deep as they go).
_SCOPE_TAGS = frozenset({TAG_NAMESPACE, TAG_MODULE})
_RUST_SCOPE_TAGS = _SCOPE_TAGS | {TAG_STRUCTURE_TYPE, TAG_UNION_TYPE, TAG_CLASS_TYPE}

# The attributes of a subprogram's code range (CUScanner.collect reads them for function_bounds).
BOUND_ATTRS = frozenset({AT_LOW_PC, AT_HIGH_PC, AT_RANGES, AT_ENTRY_PC, AT_SIBLING})


class Unsupported(Exception):
    """A form or shape this scanner does not read: the caller reads that unit DIE by DIE."""


def compiled_table(data: bytes, offset: int, offset_size: int, address_size: int, version: int,
                   entries: dict[bytes, tuple]) -> dict[int, tuple]:
    """The abbreviation table at ``offset``: code → (tag, has_children, specs, fixed_size, sibling),
    where specs are (attribute, form, implicit value) triples, ``fixed_size`` the size of the DIE's
    attributes when every form has a fixed size (else None) and ``sibling`` the (position, size) of
    a fixed-size DW_AT_sibling reference preceded only by fixed-size attributes (else None).

    ``entries`` (raw entry bytes → compiled entry, for one format) is shared by all tables: the
    tables of a library's CUs repeat the same entries under other codes. An entry's bytes run
    from its tag to its "0 0"
    terminator; the first "0 0" is the terminator unless an implicit constant or an empty
    attribute list comes first, so only entries whose real end was checked by parsing them
    are remembered, and a hit is the same bytes from the same start: the same entry."""
    table: dict[int, tuple] = {}
    pos = offset
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
            entry = (tag, children, specs, *_plan(specs, offset_size, address_size, version))
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
    specs: list[tuple] = []
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
        if form == FORM_IMPLICIT_CONST:
            value, pos = read_sleb128(data, pos)
        specs.append((attr, form, value))


def _plan(specs, offset_size: int, address_size: int, version: int) -> tuple[Optional[int], Optional[tuple]]:
    size = 0
    sibling = None
    for attr, form, _ in specs:
        if form in CONSTANT_SIZE:
            n = CONSTANT_SIZE[form]
        elif form in OFFSET_SIZED:
            n = address_size if (form == FORM_REF_ADDR and version <= 2) else offset_size
        elif form == FORM_ADDR:
            n = address_size
        else:
            return None, sibling
        if attr == AT_SIBLING and form in UNIT_REF_SIZE and sibling is None:
            sibling = (size, n)
        size += n
    return size, sibling


class CUScanner:
    """Reads the DIEs of one unit from its bytes with a compiled abbreviation table (``compiled_table``):
    ``scan`` lists the definitions to index, ``collect`` the top-level functions and variables,
    ``line_sites`` the functions and inline instances with their declaration and call lines.

    The three walk the siblings of a unit's top level with one loop, ``walk``, which skips in line
    the DIEs they do not take (by sibling reference or fixed size: the most of a library's DIEs) and
    calls back only for those they take, and which also passes the children of a DIE without a
    sibling reference (``_skip_children``); ``_subtree_sites`` reads every DIE of a subtree."""

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
        self.scope_tags = _SCOPE_TAGS
        self.nested_levels = 1  # (how deep collect and line_sites look into scopes: ALL_LEVELS for Rust)
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

    def note_language(self, pos: int, specs, cu_offset: int) -> None:
        """Read the DW_AT_language of the unit DIE whose attributes start at ``pos``: a Rust unit
        has its definitions nested in modules and types (``_RUST_SCOPE_TAGS``)."""
        for attr, form, implicit in specs:
            if attr == AT_LANGUAGE:
                if form == FORM_INDIRECT:
                    return
                size = CONSTANT_SIZE.get(form)
                if form == FORM_IMPLICIT_CONST:
                    language = implicit
                elif form in LEB128:
                    language = read_uleb128(self.info, pos)[0]
                elif size is not None:
                    language = int.from_bytes(self.info[pos:pos + size], "little")
                else:
                    return
                if language == DW_LANG_RUST:
                    self.scope_tags, self.nested_levels = _RUST_SCOPE_TAGS, ALL_LEVELS
                return
            pos, _ = self.read_die(pos, [(attr, form, implicit)], cu_offset, False)

    def read_die(self, pos: int, specs, cu_offset: int, want: bool) -> tuple[int, dict]:
        """Decode one DIE's attributes from ``pos``; return the position after it and, when
        ``want``, the interesting attributes (strings, flags, references made absolute)."""
        data = self.info
        found: dict[str, Any] = {}  # (a number, a string or a reference, as the form says)
        for attr, form, implicit in specs:
            if form == FORM_INDIRECT:
                form, pos = read_uleb128(data, pos)
            size = CONSTANT_SIZE.get(form)
            if size is not None:
                if want and attr in _WANTED:
                    if form in UNIT_REF_SIZE:
                        found[attr] = cu_offset + int.from_bytes(data[pos:pos + size], "little")
                    elif form in STRX_SIZE:
                        found[attr] = self._strx(int.from_bytes(data[pos:pos + size], "little"))
                    elif form == FORM_IMPLICIT_CONST:
                        found[attr] = implicit
                    elif form == FORM_FLAG:
                        found[attr] = data[pos] != 0
                    else:
                        found[attr] = True
                elif attr == AT_SIBLING and form in UNIT_REF_SIZE:
                    found[attr] = cu_offset + int.from_bytes(data[pos:pos + size], "little")
                pos += size
            elif form in OFFSET_SIZED or (form == FORM_REF_ADDR and self.version <= 2):
                size = self.offset_size if not (form == FORM_REF_ADDR and self.version <= 2) else self.address_size
                if want and attr in _WANTED:
                    value = int.from_bytes(data[pos:pos + size], "little")
                    if form == FORM_STRP:
                        found[attr] = self._cstr(self.strtab, value)
                    elif form == FORM_LINE_STRP:
                        found[attr] = self._cstr(self.line_strtab, value)
                    elif form == FORM_REF_ADDR:
                        found[attr] = ("ref_addr", value)
                    else:
                        found[attr] = True
                pos += size
            elif form in LEB128:
                if form == FORM_SDATA:
                    value, pos = read_sleb128(data, pos)
                else:
                    value, pos = read_uleb128(data, pos)
                if attr in _WANTED and (want or attr == AT_SIBLING):
                    if form == FORM_REF_UDATA:
                        found[attr] = cu_offset + value
                    elif form == FORM_STRX:
                        found[attr] = self._strx(value)
                    else:
                        found[attr] = True
            elif form == FORM_ADDR:
                if want and attr in _WANTED:
                    found[attr] = True
                pos += self.address_size
            elif form == FORM_STRING:
                end = data.index(b"\0", pos)
                if want and attr in _WANTED:
                    found[attr] = data[pos:end].decode("utf-8", "replace")
                pos = end + 1
            elif form in (FORM_EXPRLOC, FORM_BLOCK):
                length, pos = read_uleb128(data, pos)
                if want and attr in _WANTED:
                    found[attr] = True
                pos += length
            elif form in BLOCK_LENGTH_SIZE:
                n = BLOCK_LENGTH_SIZE[form]
                length = int.from_bytes(data[pos:pos + n], "little")
                pos += n + length
                if want and attr in _WANTED:
                    found[attr] = True
            else:
                raise Unsupported(f"form 0x{form:x}")
        return pos, found

    def read_values(self, pos: int, specs, cu_offset: int, wanted: frozenset) -> tuple[int, dict]:
        """Decode one DIE's attributes from ``pos``: the position after it and (form, number) of each
        attribute in ``wanted`` that has a constant, address, reference or offset form."""
        data = self.info
        found: dict[str, Any] = {}  # (a number, a string or a reference, as the form says)
        for attr, form, implicit in specs:
            if form == FORM_INDIRECT:
                form, pos = read_uleb128(data, pos)
            size = CONSTANT_SIZE.get(form)
            if size is not None:
                if attr in wanted:
                    found[attr] = (form, implicit if form == FORM_IMPLICIT_CONST else int.from_bytes(data[pos:pos + size], "little"))
                pos += size
            elif form in OFFSET_SIZED or (form == FORM_REF_ADDR and self.version <= 2):
                size = self.offset_size if not (form == FORM_REF_ADDR and self.version <= 2) else self.address_size
                if attr in wanted:
                    found[attr] = (form, int.from_bytes(data[pos:pos + size], "little"))
                pos += size
            elif form in LEB128:
                if form == FORM_SDATA:
                    value, pos = read_sleb128(data, pos)
                else:
                    value, pos = read_uleb128(data, pos)
                if attr in wanted:
                    found[attr] = (form, value)
            elif form == FORM_ADDR:
                if attr in wanted:
                    found[attr] = (form, int.from_bytes(data[pos:pos + self.address_size], "little"))
                pos += self.address_size
            elif form == FORM_STRING:
                pos = data.index(b"\0", pos) + 1
            elif form in (FORM_EXPRLOC, FORM_BLOCK):
                length, pos = read_uleb128(data, pos)
                pos += length
            elif form in BLOCK_LENGTH_SIZE:
                n = BLOCK_LENGTH_SIZE[form]
                pos += n + int.from_bytes(data[pos:pos + n], "little")
            else:
                raise Unsupported(f"form 0x{form:x}")
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
            if attr == AT_STR_OFFSETS_BASE:
                break
        else:
            attr = None
        if attr is not None:
            p = pos
            for a, form, implicit in specs:
                if a == AT_STR_OFFSETS_BASE:
                    self.str_offsets_base = int.from_bytes(data[p:p + self.offset_size], "little")
                    break
                p, _ = self.read_die(p, [(a, form, implicit)], cu_offset, False)
        self.note_language(pos, specs, cu_offset)
        pos, _ = self.read_die(pos, specs, cu_offset, False)
        if not children:
            return
        self._index_children(pos, end, cu_offset, abbrevs, records, seen)

    def _index_children(self, pos, end, cu_offset, abbrevs, records, seen) -> int:
        """``scan``'s part below the CU DIE: its definitions, namespaces and modules searched all the
        way down."""

        def index(die_offset: int, tag: int, children: bool, specs, pos: int) -> int:
            pos, attrs = self.read_die(pos, specs, cu_offset, True)
            name = attrs.get(AT_NAME)
            linkage = attrs.get(AT_LINKAGE_NAME) or attrs.get(AT_MIPS_LINKAGE_NAME)
            origin = attrs.get(AT_ABSTRACT_ORIGIN) or attrs.get(AT_SPECIFICATION)
            seen[die_offset] = (name if isinstance(name, str) else None,
                                linkage if isinstance(linkage, str) else None, origin)
            if not attrs.get(AT_DECLARATION) and (
                    not CODE_ATTRS.isdisjoint(attrs) if tag == TAG_SUBPROGRAM else
                    AT_LOCATION in attrs or AT_EXTERNAL in attrs):
                records.append((tag == TAG_SUBPROGRAM, die_offset))
            return self._past_children(pos, attrs, end, abbrevs, cu_offset) if children else pos

        return self.walk(pos, end, abbrevs, cu_offset, _DEFINITION_TAGS, index, ALL_LEVELS)

    def collect(self, pos, end, cu_offset, abbrevs, out_funcs, out_vars, nested, bounds=None) -> int:
        """Offsets of the subprogram/variable DIEs among the children starting at ``pos`` (and,
        when ``nested``, among the children of namespaces and modules there); with ``bounds`` (a
        dict), also each subprogram's code-range attributes (``read_values`` of ``BOUND_ATTRS``) by offset."""

        def take(die_offset: int, tag: int, children: bool, specs, pos: int) -> Optional[int]:
            if tag == TAG_VARIABLE:
                out_vars.append(die_offset)
                return None
            out_funcs.append(die_offset)
            if bounds is None:
                return None
            pos, values = self.read_values(pos, specs, cu_offset, BOUND_ATTRS)
            bounds[die_offset] = values
            if not children:
                return pos
            sib = values.get(AT_SIBLING)
            if sib is not None and (sib[0] in UNIT_REF_SIZE or sib[0] == FORM_REF_UDATA):
                return forward(cu_offset + sib[1], pos)
            return self._skip_children(pos, end, abbrevs, cu_offset)

        return self.walk(pos, end, abbrevs, cu_offset, _DEFINITION_TAGS, take, self.nested_levels if nested else 0)

    def line_sites(self, pos: int, end: int, table: dict, nested: bool, found: list, lines: dict) -> int:
        """The subprograms among the DIEs from ``pos`` (and, when ``nested``, among the children of
        namespaces and modules there: ``collect``'s walk) and the inline instances below them, in DIE
        order: ``found`` gets (offset, None) for a subprogram, (offset, DW_AT_call_line or 0) for an
        inline instance; ``lines`` maps each offset to ``read_values`` of ``LINE_ATTRS``. A
        subprogram's whole subtree is read; the other DIEs are skipped."""

        def site(die_offset: int, tag: int, children: bool, specs, pos: int) -> int:
            pos, values = self.read_values(pos, specs, 0, LINE_ATTRS)
            lines[die_offset] = values
            found.append((die_offset, None))
            return self._subtree_sites(pos, end, table, found, lines) if children else pos

        return self.walk(pos, end, table, 0, _SUBPROGRAM_TAGS, site, self.nested_levels if nested else 0)

    def walk(self, pos: int, end: int, table: dict, cu_offset: int, tags: frozenset,
             visit: Optional[Callable[[int, int, bool, list, int], Optional[int]]], levels: int) -> int:
        """The DIEs from ``pos`` up to the 0 code that ends their parent's children (returns the
        position after it) and, ``levels`` deep (``ALL_LEVELS``: all the way), the children of the
        namespaces and modules among them (and of types, in a Rust unit: ``scope_tags``). Each DIE whose tag is in ``tags`` is handed to
        ``visit(offset, tag, has_children, specs, position after its code)``, which returns the
        position after the DIE and its children, or None to have it skipped as the others are: by
        its sibling reference or fixed size when the abbreviation gives them, else by reading it
        (and its children, without a sibling reference, one by one)."""
        data = self.info
        entered = 0  # namespaces and modules walked into
        skipping = 0  # DIEs whose children are passed one by one (no sibling reference to jump by)
        while pos < end:
            die_offset = pos
            code = data[pos]
            if code < 0x80:
                pos += 1
            else:
                code, pos = read_uleb128(data, pos)
            if code == 0:  # the end of some DIE's children
                if skipping:
                    skipping -= 1
                elif entered:
                    entered -= 1
                else:
                    return pos
                continue
            tag, children, specs, fixed, sibling = table[code]
            if not skipping:
                if tag in tags:
                    after = visit(die_offset, tag, children, specs, pos)  # type: ignore[misc]
                    if after is not None:
                        pos = after
                        continue
                if children and entered != levels and tag in self.scope_tags:
                    pos, _ = self.read_die(pos, specs, cu_offset, False)
                    entered += 1
                    continue
            if children:
                if sibling is not None:
                    at, n = sibling
                    pos = forward(cu_offset + int.from_bytes(data[pos + at:pos + at + n], "little"), pos)
                    continue
            elif fixed is not None:
                pos += fixed
                continue
            pos, attrs = self.read_die(pos, specs, cu_offset, False)
            if children:
                if AT_SIBLING in attrs:
                    pos = forward(attrs[AT_SIBLING], pos)
                else:
                    skipping += 1
        return pos

    def _past_children(self, pos: int, attrs: dict, end: int, table: dict, cu_offset: int) -> int:
        """The position after the children of the DIE whose attributes ``attrs`` end at ``pos``."""
        if AT_SIBLING in attrs:
            return forward(attrs[AT_SIBLING], pos)
        return self._skip_children(pos, end, table, cu_offset)

    def _subtree_sites(self, pos: int, end: int, table: dict, found: list, lines: dict) -> int:
        # Every DIE below a subprogram, in order (inline instances nest in lexical blocks and in each other).
        data = self.info
        depth = 1
        while depth and pos < end:
            die_offset = pos
            code = data[pos]
            if code < 0x80:
                pos += 1
            else:
                code, pos = read_uleb128(data, pos)
            if code == 0:
                depth -= 1
                continue
            tag, children, specs, fixed, _sibling = table[code]
            if tag == TAG_INLINED_SUBROUTINE or tag == TAG_SUBPROGRAM:
                pos, values = self.read_values(pos, specs, 0, LINE_ATTRS)
                lines[die_offset] = values
                if tag == TAG_INLINED_SUBROUTINE:
                    call = values.get(AT_CALL_LINE)
                    found.append((die_offset, call[1] if call is not None else 0))
            elif fixed is not None:
                pos += fixed
            else:
                pos, _ = self.read_die(pos, specs, 0, False)
            if children:
                depth += 1
        return pos

    def instances_by_origin(self, pos: int, end: int, table: dict,
                            unit_base: int = 0) -> dict[int, list[tuple[int, Optional[int]]]]:
        """The subprograms and inline instances with code among the DIEs from ``pos`` (walking into
        subprograms, inline instances, lexical blocks, namespaces and modules, as
        ``DebugInfo.instances`` does), by the unit offset of their abstract origin in this unit: (their
        offset, the offset of the nearest enclosing DIE with code, for an inline instance, else None),
        in DIE order. Offsets are unit offsets; an origin given by its section offset (DW_FORM_ref_addr,
        which Go writes for every reference) counts when it is in this unit, at ``unit_base``.
        (native/dwscan.c:dws_instances does the same in C; this is its reference.)"""
        data = self.info
        found: dict[int, list[tuple[int, Optional[int]]]] = {}
        callers: list[Optional[int]] = []  # per open DIE whose children are walked: the caller before it
        caller: Optional[int] = None
        while pos < end:
            die_offset = pos
            code = data[pos]
            if code < 0x80:
                pos += 1
            else:
                code, pos = read_uleb128(data, pos)
            if code == 0:
                if not callers:
                    return found
                caller = callers.pop()
                continue
            tag, children, specs, fixed, _sibling = table[code]
            if tag == TAG_SUBPROGRAM or tag == TAG_INLINED_SUBROUTINE:
                pos, values = self.read_values(pos, specs, 0, ORIGIN_ATTRS)
                has_code = AT_LOW_PC in values or AT_ENTRY_PC in values or AT_RANGES in values
                origin = values.get(AT_ABSTRACT_ORIGIN)
                if has_code and origin is not None:
                    at = origin[1] if origin[0] in _UNIT_REF_FORMS else (
                        origin[1] - unit_base if origin[0] == FORM_REF_ADDR else -1)
                    if 0 <= at < end:
                        found.setdefault(at, []).append(
                            (die_offset, caller if tag == TAG_INLINED_SUBROUTINE else None))
                if children:
                    callers.append(caller)
                    if has_code:
                        caller = die_offset
            elif tag == TAG_LEXICAL_BLOCK or tag == TAG_NAMESPACE or tag == TAG_MODULE:
                if fixed is not None:
                    pos += fixed
                else:
                    pos, _ = self.read_die(pos, specs, 0, False)
                if children:
                    callers.append(caller)
            elif children:
                pos, attrs = self.read_die(pos, specs, 0, False)
                pos = self._past_children(pos, attrs, end, table, 0)
            elif fixed is not None:
                pos += fixed
            else:
                pos, _ = self.read_die(pos, specs, 0, False)
        return found

    def _skip_children(self, pos, end, abbrevs, cu_offset) -> int:
        """The position after the children that start at ``pos`` (``walk`` taking none of them)."""
        return self.walk(pos, end, abbrevs, cu_offset, _NO_TAGS, None, 0)


def forward(target, pos: int) -> int:
    # A DW_AT_sibling that does not move forward would loop forever: corrupt DWARF. (A value that is
    # no offset, None or a string: one in a form that is no reference, as damaged DWARF has.)
    if type(target) is not int:
        raise Unsupported(f"DW_AT_sibling is not a reference ({target!r})")
    if target <= pos:
        raise Unsupported(f"DW_AT_sibling 0x{target:x} points backwards")
    return target
