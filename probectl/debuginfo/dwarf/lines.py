"""Line tables, and the line rules of ``perf probe``.

A CU's line program, header and opcodes, is decoded here straight from ``.debug_line`` and sorted
by address the way elfutils sorts it (stable, end-of-sequence rows first at equal addresses),
because perf's choices depend on that order.

The rules follow ``perf probe`` (``dwarf-aux.c``/``probe-finder.c``):

- ``walk_lines`` is ``die_walk_lines``: the ``is_stmt`` rows of a CU, or of one function without the
  bodies of functions inlined into it (but with their call sites), plus declaration lines and
  inline call sites that the line table lacks;
- ``reverse_line`` is ``cu_find_lineinfo``: the line an address maps back to;
- ``line_addresses`` is ``FUNC:RLN``/``SRC:ALN``: every address of a line in a CU, rejecting a line
  whose address maps back to another line of the same file ("sharing the address");
- ``probeable_lines`` is what ``perf probe -L`` numbers;
- ``skip_prologue`` is ``die_skip_prologue``.
"""
from __future__ import annotations

import bisect
import itertools
import os
from operator import itemgetter
from typing import TYPE_CHECKING, Any, Iterator, NamedTuple, Optional

from ...dataclass import dataclass
from ...errors import DebugInfoError, ResolveError
from ..indexcache import PendingStore
from .die import die_attr, die_name, die_written_name, guarded, tail_match
from .function import Function
from .leb128 import read_sleb128, read_uleb128
from .units import DIE, DwarfFormatError, Unit as CompileUnit

if TYPE_CHECKING:
    from . import DebugInfo


class LineRow(NamedTuple("LineRow", [("address", int), ("file", int), ("line", int), ("column", int), ("is_stmt", bool),
                                     ("end_sequence", bool), ("prologue_end", bool)])):
    """One row of a line table. (Fields as a list: see units.Section.)"""

    __slots__ = ()


_ADDRESS, _END_SEQUENCE = itemgetter(0), itemgetter(5)  # (LineRow's address and end_sequence)


@dataclass(frozen=True)
class LinePoint:
    """An address a source line was resolved to."""

    address: int
    file: str
    line: int


class LineSharedError(ResolveError):
    """A line whose code address maps back to another line of the same file (perf: "This line is
    sharing the address with other lines."). ``suggestion`` is the line to probe instead,
    ``(function, relative line)`` or ``(file, absolute line)``."""

    def __init__(self, message: str, hint: str, suggestion: tuple[str, int]):
        super().__init__(message, hint)
        self.suggestion = suggestion


def _text(value) -> str:
    # (None: a string whose offset is outside the string section)
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else (value or "")


class LineTable:
    """The line table of one CU, sorted by address, with its file names.

    The file names come from the header at once; the rows are decoded on first use (naming a
    declaration's file needs only the header)."""

    def __init__(self, debuginfo: "DebugInfo", cu: CompileUnit):
        self.cu = cu
        self.version = 0
        self._files: list[Optional[str]] = []
        self._rows: Optional[list[LineRow]] = []
        self._addresses: Optional[list[int]] = []
        self.program_size = 0  # (the line program's bytes, rows excluded)
        stmt_list = cu.get_top_DIE().attributes.get("DW_AT_stmt_list")
        if stmt_list is None:
            return
        dwarf = cu.dwarfinfo
        start = stmt_list.value
        head = dwarf.read("debug_line_sec", start, 12)
        if len(head) < 4:
            raise DwarfFormatError(f"line table offset 0x{start:x} outside .debug_line")
        length = int.from_bytes(head[:4], dwarf.byteorder)
        length = 4 + length if length != 0xFFFFFFFF or len(head) < 12 else 12 + int.from_bytes(head[4:12], dwarf.byteorder)
        data = dwarf.read("debug_line_sec", start, length)  # (this table's bytes only)
        header = LineProgramHeader.read(data, 0, cu)
        self.version = header.version
        comp_dir = debuginfo.comp_dir(cu)
        dirs = [_text(d) for d in header.directories]
        if self.version < 5:
            dirs = [comp_dir] + dirs
        for file_name, dir_index in header.files:
            name = _text(file_name)
            if not os.path.isabs(name):
                d = dirs[dir_index] if dir_index < len(dirs) else ""
                # Directory 0 is the compilation directory itself (relative in Debian's libc6-dbg:
                # './malloc'); the others are relative to it.
                if d and not os.path.isabs(d) and dir_index != 0:
                    d = os.path.join(comp_dir, d)
                name = os.path.join(d, name) if d else name
            self._files.append(name)
        self._program = (data, header)
        self.program_size = header.program_end - header.program_start
        self._rows = self._addresses = None

    @property
    def rows(self) -> list[LineRow]:
        if self._rows is None:
            data, header = self._program
            rows = self._decode(data[header.program_start:header.program_end], header)
            # By address, a sequence's end before the rows that start another there, each kind in the
            # table's order: two stable sorts by one field each (a key of both, made per row by a
            # Python function, took as long again for libstdc++'s 6,000-row units).
            rows.sort(key=_END_SEQUENCE, reverse=True)
            rows.sort(key=_ADDRESS)
            self._rows = rows
        return self._rows

    @property
    def addresses(self) -> list[int]:
        if self._addresses is None:
            self._addresses = [r.address for r in self.rows]
        return self._addresses

    @staticmethod
    def _decode(data: bytes, header: "LineProgramHeader") -> list[LineRow]:
        min_inst = header.minimum_instruction_length
        line_base = header.line_base
        line_range = header.line_range
        if line_range == 0:  # (every special opcode divides by it)
            raise ValueError("a line table header with line_range 0")
        opcode_base = header.opcode_base
        default_is_stmt = header.default_is_stmt
        std_lengths = header.standard_opcode_lengths
        rows: list[LineRow] = []
        append = rows.append
        # (each row made as the tuple it is: LineRow(...) goes through the NamedTuple's Python
        # __new__, a third of the decoding of a large unit)
        make, row = tuple.__new__, LineRow
        pos = 0
        end = len(data)

        address, file, line, column = 0, 1, 1, 0
        is_stmt, prologue_end = default_is_stmt, False
        while pos < end:
            op = data[pos]
            pos += 1
            if op >= opcode_base:
                adj = op - opcode_base
                address += (adj // line_range) * min_inst
                line += line_base + adj % line_range
                append(make(row, (address, file, line, column, is_stmt, False, prologue_end)))
                prologue_end = False
            elif op == 0:
                length, pos = read_uleb128(data, pos)
                if length == 0:
                    continue
                sub = data[pos]
                nxt = pos + length
                if sub == 1:  # DW_LNE_end_sequence
                    append(make(row, (address, file, line, column, is_stmt, True, prologue_end)))
                    address, file, line, column = 0, 1, 1, 0
                    is_stmt, prologue_end = default_is_stmt, False
                elif sub == 2:  # DW_LNE_set_address
                    address = int.from_bytes(data[pos + 1:nxt], "little")
                pos = nxt
            elif op == 1:  # DW_LNS_copy
                append(make(row, (address, file, line, column, is_stmt, False, prologue_end)))
                prologue_end = False
            elif op == 2:  # advance_pc
                v, pos = read_uleb128(data, pos)
                address += v * min_inst
            elif op == 3:  # advance_line
                v, pos = read_sleb128(data, pos)
                line += v
            elif op == 4:  # set_file
                file, pos = read_uleb128(data, pos)
            elif op == 5:  # set_column
                column, pos = read_uleb128(data, pos)
            elif op == 6:  # negate_stmt
                is_stmt = not is_stmt
            elif op == 7:  # set_basic_block
                pass
            elif op == 8:  # const_add_pc
                address += ((255 - opcode_base) // line_range) * min_inst
            elif op == 9:  # fixed_advance_pc
                address += int.from_bytes(data[pos:pos + 2], "little")
                pos += 2
            elif op == 10:  # set_prologue_end
                prologue_end = True
            elif op == 11:  # set_epilogue_begin
                pass
            else:  # set_isa (12) and unknown standard opcodes: skip their ULEB operands
                n = std_lengths[op - 1] if op - 1 < len(std_lengths) else 0
                for _ in range(n):
                    _, pos = read_uleb128(data, pos)
        return rows

    def file_name(self, index: int) -> Optional[str]:
        """The path of file ``index`` as DW_AT_decl_file/DW_AT_call_file and rows number it."""
        i = index if self.version >= 5 else index - 1
        if 0 <= i < len(self._files):
            return self._files[i]
        return None

    def files(self) -> list[str]:
        """Every file name of the table, in order (DWARF 5 tables list the primary file twice)."""
        return [f for f in self._files if f is not None]

    def row_at(self, address: int) -> Optional[LineRow]:
        """The row perf's ``cu_getsrc_die`` picks for ``address``: among the rows at the
        greatest address not above it, the first ``is_stmt`` one (rows at exactly ``address``
        are searched from the lowest), or None if no statement row starts there."""
        rows = self.rows
        i = bisect.bisect_right(self.addresses, address) - 1
        if i < 0:
            return None
        # Back to the first row at exactly this address (perf never returns row 0).
        while True:
            i -= 1
            if i < 0:
                return None
            if rows[i].address != address:
                break
        i += 1
        while i < len(rows):
            row = rows[i]
            i += 1
            if row.address > address:
                return None
            if row.is_stmt:
                return row
        return None


# DW_LNCT_* content types of a DWARF 5 directory or file entry, and the forms they come in.
_LNCT_PATH, _LNCT_DIRECTORY_INDEX = 1, 2
_FORM_STRING, _FORM_LINE_STRP, _FORM_STRP, _FORM_UDATA = 0x08, 0x1F, 0x0E, 0x0F
_FORM_SIZES = {0x0B: 1, 0x05: 2, 0x06: 4, 0x07: 8, 0x1E: 16, 0x25: 1, 0x26: 2, 0x27: 3, 0x28: 4}  # data*, strx*
_FORM_BLOCK, _FORM_STRX = 0x09, 0x1A


@dataclass(frozen=True)
class LineProgramHeader:
    """The header of one line program: what decoding its opcodes needs, its directories and its
    files as (name, directory index), names as bytes (None where a string offset is outside its
    section), and where the opcodes are in ``.debug_line``."""

    version: int
    minimum_instruction_length: int
    default_is_stmt: bool
    line_base: int
    line_range: int
    opcode_base: int
    standard_opcode_lengths: tuple
    directories: tuple
    files: tuple
    program_start: int
    program_end: int

    @classmethod
    def read(cls, data: bytes, offset: int, cu: CompileUnit) -> "LineProgramHeader":
        """The header at ``offset`` of ``.debug_line`` (``data``), for ``cu``; DwarfFormatError (or
        IndexError) where it is damaged."""
        order = cu.dwarfinfo.byteorder

        def number(at: int, size: int) -> int:
            if at + size > len(data):
                raise DwarfFormatError(f"line table at 0x{offset:x} runs past the end of .debug_line")
            return int.from_bytes(data[at:at + size], order)

        length, offset_size, pos = number(offset, 4), 4, offset + 4
        if length == 0xFFFFFFFF:
            length, offset_size, pos = number(pos, 8), 8, pos + 8
        end = pos + length
        if end > len(data):
            raise DwarfFormatError(f"line table at 0x{offset:x} runs past the end of .debug_line")
        version = number(pos, 2)
        pos += 2
        if not 2 <= version <= 5:
            raise DwarfFormatError(f"line table at 0x{offset:x}: version {version}")
        if version >= 5:
            pos += 2  # address size, segment selector size
        header_length = number(pos, offset_size)
        pos += offset_size
        program_start = pos + header_length
        min_inst = data[pos]
        pos += 1
        if version >= 4:
            pos += 1  # maximum operations per instruction
        default_is_stmt, line_base, line_range, opcode_base = data[pos] != 0, data[pos + 1], data[pos + 2], data[pos + 3]
        line_base -= 256 if line_base >= 128 else 0
        pos += 4
        std_lengths = tuple(data[pos:pos + max(0, opcode_base - 1)])
        pos += max(0, opcode_base - 1)
        if version >= 5:
            dirs, pos = cls._entries(data, pos, cu, offset_size, number)
            files, pos = cls._entries(data, pos, cu, offset_size, number)
            directories = tuple(name for name, _ in dirs)
        else:
            names = []
            while data[pos] != 0:
                stop = data.index(b"\0", pos)
                names.append(data[pos:stop])
                pos = stop + 1
            pos += 1
            directories = tuple(names)
            files = []
            while data[pos] != 0:
                stop = data.index(b"\0", pos)
                name = data[pos:stop]
                dir_index, pos = read_uleb128(data, stop + 1)
                _, pos = read_uleb128(data, pos)  # modification time
                _, pos = read_uleb128(data, pos)  # size
                files.append((name, dir_index))
        if not pos <= program_start <= end:
            raise DwarfFormatError(f"line table at 0x{offset:x}: its header runs past its program")
        return cls(version, min_inst, default_is_stmt, line_base, line_range, opcode_base, std_lengths,
                   directories, tuple(files), program_start, end)

    @staticmethod
    def _entries(data: bytes, pos: int, cu: CompileUnit, offset_size: int, number) -> tuple[list, int]:
        """The directory or file entries of a DWARF 5 header at ``pos``: [(path, directory index)]."""
        formats = []
        count = data[pos]
        pos += 1
        for _ in range(count):
            kind, pos = read_uleb128(data, pos)
            form, pos = read_uleb128(data, pos)
            formats.append((kind, form))
        entries, pos = read_uleb128(data, pos)
        dwarf = cu.dwarfinfo
        out = []
        value: Any  # (a path's bytes, a number or an offset, as the form says)
        for _ in range(entries):
            path, dir_index = None, 0
            for kind, form in formats:
                if form == _FORM_STRING:
                    stop = data.index(b"\0", pos)
                    value, pos = data[pos:stop], stop + 1
                elif form in (_FORM_LINE_STRP, _FORM_STRP):
                    at = number(pos, offset_size)
                    pos += offset_size
                    value = dwarf.line_string(at) if form == _FORM_LINE_STRP else dwarf.string(at)
                elif form in (_FORM_UDATA, _FORM_STRX):
                    value, pos = read_uleb128(data, pos)
                elif form in _FORM_SIZES:
                    size = _FORM_SIZES[form]
                    value = number(pos, size)
                    pos += size
                elif form == _FORM_BLOCK:
                    size, pos = read_uleb128(data, pos)
                    value, pos = None, pos + size
                else:
                    raise DwarfFormatError(f"line table: form 0x{form:x} in a file entry")
                if form in (_FORM_STRX, 0x25, 0x26, 0x27, 0x28):
                    value = dwarf.string(dwarf.indexed_offset(
                        "debug_str_offsets_sec", cu.bases().get("str_offsets", 8 if offset_size == 4 else 16),
                        value, cu.offset_size))
                if kind == _LNCT_PATH:
                    path = value
                elif kind == _LNCT_DIRECTORY_INDEX:
                    dir_index = value
            out.append((path, dir_index))
        return out, pos


def line_table(debuginfo: "DebugInfo", cu: CompileUnit) -> LineTable:
    """The (cached) line table of ``cu``: ``DebugInfo.line_table``."""
    return debuginfo.line_table(cu)


# --- perf's line walks -----------------------------------------------------------------------


def _innermost_inline(debuginfo: "DebugInfo", die: DIE, address: int) -> Optional[DIE]:
    # perf's die_find_inlinefunc: any inlined_subroutine below ``die`` containing the address,
    # then again inside it, down to the innermost.
    found = None
    current = die
    while True:
        nxt = _find_inline_below(debuginfo, current, address)
        if nxt is None:
            return found
        found = current = nxt


def _find_inline_below(debuginfo: "DebugInfo", die: DIE, address: int) -> Optional[DIE]:
    for child in debuginfo.children(die):
        if child.tag == "DW_TAG_inlined_subroutine" and debuginfo.die_contains(child, address):
            return child
        if child.has_children:
            hit = _find_inline_below(debuginfo, child, address)
            if hit is not None:
                return hit
    return None


def _funclines(debuginfo: "DebugInfo", sp: DIE, recursive: bool) -> Iterator[tuple[str, int, int]]:
    # perf's __die_walk_funclines: the declaration line at the entry address, then inline
    # call sites (and, when recursive, the declaration lines of the inlined functions).
    fname = debuginfo.decl_file(sp)
    line = die_attr(sp, "DW_AT_decl_line")
    entry = debuginfo.die_entry(sp)
    if fname and line is not None and entry is not None:
        yield fname, line, entry

    def walk(die: DIE) -> Iterator[tuple[str, int, int]]:
        for child in debuginfo.children(die):
            if child.tag == "DW_TAG_inlined_subroutine":
                yield from _inline_lines(debuginfo, child, recursive)
                if not recursive:
                    continue
            if child.has_children:
                yield from walk(child)

    yield from walk(sp)


def _inline_lines(debuginfo: "DebugInfo", inline: DIE, recursive: bool) -> list[tuple[str, int, int]]:
    # What __die_walk_funclines_cb gives for one inline instance: its call site at its entry, and
    # when recursive, the inlined function's declaration line there too.
    cfile = debuginfo.call_file(inline)
    cline = inline.attributes.get("DW_AT_call_line")
    cline = cline.value if cline is not None else 0
    entry = debuginfo.die_entry(inline)
    if not (cfile and cline > 0 and entry is not None):
        return []
    found = [(cfile, cline, entry)]
    if recursive and entry:
        dfile = debuginfo.decl_file(inline)
        dline = die_attr(inline, "DW_AT_decl_line")
        if dfile and dline is not None:
            found.append((dfile, dline, entry))
    return found


def _funclines_of_line(debuginfo: "DebugInfo", cu: CompileUnit, line: int) -> list[tuple[str, int, int]]:
    """The triples of ``_cu_funclines(debuginfo, cu)`` on ``line``, in the same order: only the
    subprograms and inline instances whose declaration or call line is ``line`` (as the section's
    bytes say, ``dieindex.inline_sites``) are parsed, not the whole unit."""
    from .dieindex import UNKNOWN, inline_sites

    sites = inline_sites(debuginfo, cu)
    if sites is None:
        return [t for t in _cu_funclines(debuginfo, cu) if t[1] == line]
    found: list[tuple[str, int, int]] = []
    for offset, call_line, decl_line in sites:
        if call_line != line and decl_line != line and decl_line != UNKNOWN:
            continue
        die = cu.get_DIE_from_refaddr(offset)
        if call_line is not None:
            found += (t for t in _inline_lines(debuginfo, die, True) if t[1] == line)
        elif die_attr(die, "DW_AT_decl_line") == line:
            fname = debuginfo.decl_file(die)
            entry = debuginfo.die_entry(die)
            if fname and entry is not None:
                found.append((fname, line, entry))
    return found


def _cu_funclines(debuginfo: "DebugInfo", cu: CompileUnit) -> list[tuple[str, int, int]]:
    """``_funclines`` of every function of ``cu``, recursively."""
    return [triple for sp in debuginfo.cu_functions(cu) for triple in _funclines(debuginfo, sp, True)]


def walk_lines(debuginfo: "DebugInfo", scope: Optional[Function | DIE], cu: Optional[CompileUnit] = None
               ) -> Iterator[tuple[str, int, int]]:
    """(file, line, address) for each ``is_stmt`` row of ``cu`` (``scope`` None) or of a
    function, as perf's ``die_walk_lines`` visits them."""
    if isinstance(scope, Function):
        scope = scope.die
    if cu is None:
        assert scope is not None
        cu = scope.cu
    table = line_table(debuginfo, cu)
    if scope is None:
        for row in table.rows:
            if row.end_sequence or not row.is_stmt:
                continue
            fname = table.file_name(row.file)
            if fname:
                yield fname, row.line, row.address
        yield from _cu_funclines(debuginfo, cu)
        return

    decl_file = debuginfo.decl_file(scope)
    decl_line = die_attr(scope, "DW_AT_decl_line") or 0
    if not decl_file:
        return
    decl_index = die_attr(scope, "DW_AT_decl_file")
    for row in table.rows:
        if row.end_sequence or not row.is_stmt:
            continue
        if not debuginfo.die_contains(scope, row.address):
            continue
        inl = _innermost_inline(debuginfo, scope, row.address)
        if inl is not None:
            call_file = debuginfo.call_file(inl)
            call_line = inl.attributes.get("DW_AT_call_line")
            if not (call_file == decl_file and call_line is not None and call_line.value == row.line):
                # Keep only a recursive inline of the function itself.
                if (die_attr(inl, "DW_AT_decl_line") != decl_line
                        or die_attr(inl, "DW_AT_decl_file") != decl_index):
                    continue
        fname = table.file_name(row.file)
        if fname:
            yield fname, row.line, row.address
    yield from _funclines(debuginfo, scope, False)


def reverse_line(debuginfo: "DebugInfo", cu: CompileUnit, address: int) -> Optional[tuple[str, int]]:
    """The (file, line) an address maps back to (perf's ``cu_find_lineinfo``): the declaration
    line when it is a function's entry, else the line table row covering it."""
    sp = debuginfo.cu_function_containing(cu, address)
    if sp is not None and debuginfo.die_entry(sp) == address:
        f = debuginfo.decl_file(sp)
        ln = die_attr(sp, "DW_AT_decl_line")
        if f and ln:
            return f, ln
    table = line_table(debuginfo, cu)
    row = table.row_at(address)
    if row is None:
        return None
    fname = table.file_name(row.file)
    if not fname or not row.line:
        return None
    return fname, row.line


def _statement_line_in(table: LineTable, address: int, fname: Optional[str], statements: bool = True) -> int:
    """The line of a statement row (``statements``; else of any row) of file ``fname`` at exactly
    ``address``, or 0."""
    i = bisect.bisect_left(table.addresses, address)
    while i < len(table.rows) and table.rows[i].address == address:
        row = table.rows[i]
        if (row.is_stmt or not statements) and row.line and table.file_name(row.file) == fname:
            return row.line
        i += 1
    return 0


@guarded
def entry_line(debuginfo: "DebugInfo", func: Function) -> int:
    """The line of its own file that the line table gives a function's entry, a statement or not (Go's
    marks the stack-bound check before a function's first statement as none, on its ``func`` line);
    0 when it has none."""
    if func.entry is None or not func.decl_file:
        return 0
    return _statement_line_in(line_table(debuginfo, func.cu), func.entry, func.decl_file, statements=False)


@guarded
def address_to_line(debuginfo: "DebugInfo", address: int) -> Optional[tuple[str, int]]:
    """The (file, line) of an address, anywhere in the binary."""
    cu = debuginfo.cu_at(address)
    return reverse_line(debuginfo, cu, address) if cu is not None else None


def _line_points(debuginfo: "DebugInfo", cu: CompileUnit, fname: str, line: int,
                 function: Optional[Function]) -> list[LinePoint]:
    points: list[LinePoint] = []
    seen: set[int] = set()
    # walk_lines(debuginfo, None, cu), keeping only the triples of ``line`` before naming files
    table = line_table(debuginfo, cu)
    rows = ((table.file_name(row.file), row.line, row.address) for row in table.rows
            if row.line == line and row.is_stmt and not row.end_sequence)
    for f, ln, addr in itertools.chain(rows, _funclines_of_line(debuginfo, cu, line)):
        if not f or not tail_match(f, fname):
            continue
        back = reverse_line(debuginfo, cu, addr)
        if back is not None and back[0] == f and back[1] != ln:
            raise _shared_error(debuginfo, cu, f, ln, addr, back, function)
        if addr in seen:
            continue
        seen.add(addr)
        points.append(LinePoint(addr, f, ln))
    return points


def _shared_error(debuginfo: "DebugInfo", cu: CompileUnit, fname: str, line: int, addr: int,
                  back: tuple[str, int], function: Optional[Function]) -> LineSharedError:
    """The line has no code of its own; the place to probe instead, written as the function is (a C++
    or Rust function by its qualified name: ``shop::Cart::add:0``, not every class's ``add``)."""
    target: tuple[str, int] = (os.path.basename(back[0]), back[1])
    written = (die_written_name(function.die) or function.name) if function is not None else None
    if function is not None:
        for fn in reversed(debuginfo.inline_chain(addr)):
            if fn.name == function.name and fn.decl_line:
                target = (written or fn.name, back[1] - fn.decl_line)
                break
    where = f"{written}:{line - function.decl_line}" if function is not None else \
        f"{os.path.basename(fname)}:{line}"
    return LineSharedError(
        f"line {where} has no code of its own: its address 0x{addr:x} belongs to line "
        f"{os.path.basename(back[0])}:{back[1]}",
        hint=f"probe {target[0]}:{target[1]} instead", suggestion=target)


@guarded
def function_line(debuginfo: "DebugInfo", func: Function, relative_line: int) -> list[LinePoint]:
    """Addresses of ``FUNC:RLN``: line ``decl_line + relative_line`` of the function's file,
    searched in its whole CU (so inlined copies in that CU count), every ``is_stmt`` address of
    it, each address once. Raises LineSharedError as perf refuses such lines; an empty list
    means the line has no code."""
    if not func.decl_file:
        raise DebugInfoError(f"function '{func.name}' has no DW_AT_decl_file")
    return _line_points(debuginfo, func.cu, func.decl_file, func.decl_line + relative_line, func)


@guarded
def source_line(debuginfo: "DebugInfo", src: str, line: int) -> list[LinePoint]:
    """Addresses of ``SRC:ALN`` in every CU whose line table has a file ending with ``src``."""
    points: list[LinePoint] = []
    seen: set[int] = set()
    for cu in debuginfo.compile_units():
        table = line_table(debuginfo, cu)
        real = next((f for f in table.files() if tail_match(f, src)), None)
        if real is None:
            continue
        for p in _line_points(debuginfo, cu, real, line, None):
            if p.address not in seen:
                seen.add(p.address)
                points.append(p)
    return points


@guarded
def source_files(debuginfo: "DebugInfo", src: str) -> list[str]:
    """Full paths of the line-table files that end with ``src`` (for SRC:ALN and -L SRC)."""
    found: list[str] = []
    for cu in debuginfo.compile_units():
        for f in line_table(debuginfo, cu).files():
            if tail_match(f, src) and f not in found:
                found.append(f)
    return found


@guarded
def probeable_lines(debuginfo: "DebugInfo", func: Function) -> list[int]:
    """Absolute line numbers of ``func``'s file that perf ``-L FUNC`` numbers: lines with an
    ``is_stmt`` address in the function (its inline instances for an inline function) that maps
    back to the same line."""
    scopes = [func] if func.ranges else debuginfo.instances(func)
    lines: set[int] = set()
    for scope in scopes:
        for f, ln, addr in walk_lines(debuginfo, scope):
            if not func.decl_file or not tail_match(f, func.decl_file):
                continue
            back = reverse_line(debuginfo, scope.cu, addr)
            if back is not None and (back[1] != ln or back[0] != f):
                continue
            lines.add(ln)
    return sorted(lines)


@guarded
def probeable_file_lines(debuginfo: "DebugInfo", src: str, start: int = 1, end: int = 1 << 30
                         ) -> dict[str, list[int]]:
    """For ``-L SRC[:A-B]``: full path → probe-able line numbers in [start, end] of each
    matching file."""
    out: dict[str, set[int]] = {}
    for cu in debuginfo.compile_units():
        table = line_table(debuginfo, cu)
        real = next((f for f in table.files() if tail_match(f, src)), None)
        if real is None:
            continue
        for f, ln, addr in walk_lines(debuginfo, None, cu):
            if f != real or not start <= ln <= end:
                continue
            back = reverse_line(debuginfo, cu, addr)
            if back is not None and (back[1] != ln or back[0] != f):
                continue
            out.setdefault(real, set()).add(ln)
    return {k: sorted(v) for k, v in out.items()}


@guarded
def skip_prologue(debuginfo: "DebugInfo", func: Function) -> int:
    """The address after the prologue, as perf's ``die_skip_prologue`` computes it for
    unoptimized user code: the line-table row after the one at the entry address (or the
    entry row itself if it carries ``prologue_end``), staying below DW_AT_high_pc.
    Functions described by DW_AT_ranges have no high_pc, so they keep their entry (as in perf).

    Whether to skip at all (uprobe, unoptimized CU, plain ``FUNC`` with variables) is the
    caller's decision: see ``DebugInfo.cu_is_optimized``.
    """
    entry = func.entry
    assert entry is not None
    die = func.die
    if "DW_AT_high_pc" not in die.attributes or "DW_AT_low_pc" not in die.attributes:
        return entry
    high = func.ranges[0][1]
    rows = entry_rows(debuginfo, func.cu, entry)
    if rows is None or rows[0] or rows[1] is None:  # (no row at the entry; one that ends the prologue; the last)
        return entry
    return rows[1] if rows[1] < high else entry


# From this size of a unit's line program on, the rows at the entries asked for are kept in the index
# cache (``line-entries``): the table of libstdc++'s unit of std::string (12 KB, 2,000 rows, 155 file
# names) is read in ~2 ms, the answer kept in ~0.1 ms; a smaller one, in less than the kept file.
KEPT_FROM = 4 << 10
MAX_KEPT = 4096  # (the most recent entries)
_ENTRIES_FORMAT = 1
EntryRows = Optional[tuple[bool, Optional[int]]]


def entry_rows(debuginfo: "DebugInfo", cu: CompileUnit, entry: int) -> EntryRows:
    """What the prologue skip reads of the line table of ``cu`` at a function's ``entry``: whether its
    first row there (after any end of a sequence before) carries ``prologue_end``, and the address of
    the row after it (None: it is the last); None without a row at ``entry``. Kept on disk for a large
    table (``KEPT_FROM``), with the entries of earlier runs (``DebugInfo.entry_rows``)."""
    kept = debuginfo.entry_rows()
    key = (cu.cu_offset, entry)
    if key in kept.rows:
        return kept.rows[key]
    table = line_table(debuginfo, cu)
    rows = table.rows
    idx = bisect.bisect_left(table.addresses, entry)
    # (the end of the sequence before, at the same address, is not the function's row: a C++
    # template or inline member is a sequence of its own, right after another's end)
    while idx < len(rows) and rows[idx].address == entry and rows[idx].end_sequence:
        idx += 1
    found: EntryRows = None
    if idx < len(rows) and rows[idx].address == entry:
        found = (rows[idx].prologue_end, rows[idx + 1].address if idx + 1 < len(rows) else None)
    if table.program_size >= KEPT_FROM:
        kept.add(key, found)
    return found


class KeptEntryRows(PendingStore):
    """The ``entry_rows`` of a file kept on disk: read when first asked for, stored once with those
    added (:class:`~probectl.debuginfo.indexcache.PendingStore`)."""

    kind = "line-entries"

    def __init__(self, debuginfo: "DebugInfo"):
        super().__init__(debuginfo, debuginfo.index_key, _entries_fingerprint(debuginfo))
        self.rows: dict[tuple[int, int], EntryRows] = {}
        stored = self.load()
        if stored is None or len(stored) != 1 or type(stored[0]) is not list:
            return
        for item in stored[0]:
            if not (type(item) is tuple and len(item) == 2 and type(item[0]) is tuple and len(item[0]) == 2
                    and all(type(n) is int for n in item[0]) and _valid_rows(item[1])):
                self.rows = {}  # (a damaged file: none of it is trusted)
                return
            self.rows[item[0]] = item[1]

    def add(self, key: tuple[int, int], rows: EntryRows) -> None:
        self.rows[key] = rows
        self.changed = True

    def payload(self) -> tuple:
        return (list(self.rows.items())[-MAX_KEPT:],)  # (the most recent entries)


def _valid_rows(rows: object) -> bool:
    return rows is None or (type(rows) is tuple and len(rows) == 2 and type(rows[0]) is bool
                            and (rows[1] is None or type(rows[1]) is int))


def _entries_fingerprint(debuginfo: "DebugInfo") -> tuple:
    dwarf = debuginfo.dwarf
    return (_ENTRIES_FORMAT, debuginfo.little_endian,
            *(sec.size if sec is not None else 0 for sec in (dwarf.debug_info_sec, dwarf.debug_line_sec)))


@dataclass(frozen=True)
class SourcePoint:
    """An address described the way ``perf probe -l`` shows it: ``function:line@file`` with a
    line relative to the function's declaration, or ``function+offset`` when no line fits."""

    function: Optional[str]
    line: Optional[int]
    offset: Optional[int]
    file: Optional[str]


@guarded
def source_point(debuginfo: "DebugInfo", address: int) -> Optional[SourcePoint]:
    """perf's ``debuginfo__find_probe_point``: the function (an inline function when the address
    is inside an inlined body), the line relative to its declaration (the call-site line when
    the address is an inline instance's entry), and the file; None outside any CU."""
    cu = debuginfo.cu_at(address)
    if cu is None:
        return None
    back = reverse_line(debuginfo, cu, address)
    fname, lineno = back if back is not None else (None, 0)
    fn = debuginfo.function_at(address)
    if fn is None:
        return SourcePoint(None, lineno or None, None, fname)
    func = base_func = die_written_name(fn.die) or fn.name
    base_addr = fn.entry
    baseline = fn.decl_line
    if not func or base_addr is None or not baseline:
        return SourcePoint(func, None, address - (base_addr or address), fname)
    fname = fn.decl_file
    scope = fn.die
    if address == base_addr:
        lineno = baseline
    else:
        while True:
            inner = _find_inline_below(debuginfo, scope, address)
            if inner is None:
                break
            if debuginfo.die_entry(inner) == address:
                call_line = inner.attributes.get("DW_AT_call_line")
                lineno = call_line.value if call_line is not None else 0
                fname = debuginfo.call_file(inner)
                break
            name = die_written_name(inner)
            decl = die_attr(inner, "DW_AT_decl_line")
            if not name or decl is None:
                break
            func, baseline, scope = name, decl, inner
        if scope is fn.die and back is not None and back[0] != fname:
            # The row perf picks is in another file (an inline's line) though no inline instance
            # covers the address: gcc also gives it a row of the function's own file (the line a
            # `FUNC:N` probe put there), which perf overlooks and reads as a line of this file.
            lineno = _statement_line_in(line_table(debuginfo, cu), address, fname)
        if debuginfo.decl_file(scope) != fname:
            lineno = 0
    if lineno:
        return SourcePoint(func, lineno - baseline, None, fname)
    return SourcePoint(base_func, None, address - base_addr, fname)
