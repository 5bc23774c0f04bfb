"""DWARF debug information of one binary: compilation units, functions, inline instances and scopes.

``DebugInfo`` reads a file's units and DIEs (``units``) for the questions a probe resolver asks, the way
``perf probe`` answers them (``probe-finder.c``/``dwarf-aux.c``), and keeps every answer, including
those the other modules compute (line tables, call frames, location lists...), each behind an
accessor. The package:

- opening: ``sections`` (the sections, without pyelftools' ELFFile where it is not needed; only
  relocatable objects are relocated), ``sectionmap`` (a section mapped instead of copied),
  ``mappedelf`` (ELFFile with mapped sections, for the other files);
- reading: ``units`` (units, DIEs and attribute forms, with the abbreviation tables ``diescan``
  compiles), ``names`` (DWARF's names of its numbers), ``lists`` (range and location lists),
  ``leb128``, ``die`` (DIE helpers and the error guard);
- names: ``dieindex`` (index of top-level definitions, CU function bounds), ``diescan`` (its byte
  scanner), ``namesearch`` (one exact name searched in the bytes), ``nameindex`` (the indexes
  kept on disk);
- what is found: ``function`` (``Function``), ``lines`` (line tables, perf's line rules),
  ``sources`` (source files, lazy patterns), ``variables`` (variables at an address),
  ``location`` (location expressions → places), ``cfi`` (call-frame information), ``types``
  (the C type model).

Fetch arguments (C expressions, ``$vars``, variable listings) are built in :mod:`probectl.resolve`
(``dwarf_fetch``).
"""
from __future__ import annotations

import bisect
import contextlib
import fnmatch
import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Iterable, Iterator, Optional, Sequence

from ...errors import DebugInfoError, ProbectlError
from ...regularfile import open_regular
from .die import die_attr, die_key, die_linkage_name, die_name, die_origin, guarded, is_glob, tail_match
from .function import Function
from .sections import open_dwarf
from .units import DIE, DwarfFormatError, Unit as CompileUnit

if TYPE_CHECKING:
    from elftools.elf.elffile import ELFFile

    from ..elf import ElfFile
    from .cfi import CallFrames
    from .dieindex import CodeBounds, UnitScans
    from .lines import KeptEntryRows, LineTable
    from .location import LocationRange
    from .namesearch import NameSearch

# From this size of .debug_info on (a kernel's is 160 MB, libc6-dbg's 5.8 MB), an exact name is
# searched for in the bytes instead of indexing every CU first (see DebugInfo._refs): on a cold cache
# the full index is most of what a definition on libc costs (docs/ledger.md, "Name search"; bench_add.py
# measures it cold). Smaller files are indexed whole, cheaply, and the index then answers every name and glob.
SEARCH_NAMES_FROM = 2 << 20
DW_LANG_RUST = 0x1C
# The operations of a location that is no address: a value in a register, computed, or in pieces.
_VALUE_NOT_IN_MEMORY = frozenset([f"DW_OP_reg{n}" for n in range(32)] + [
    "DW_OP_regx", "DW_OP_stack_value", "DW_OP_implicit_value", "DW_OP_implicit_pointer",
    "DW_OP_GNU_implicit_pointer", "DW_OP_piece", "DW_OP_bit_piece"])


class DebugInfo:
    """The DWARF of one binary, read from the binary itself or from its separate debug file.

    :param path: the file that holds the DWARF sections
    :param binary: the runtime binary (for ``.eh_frame`` when the debug file only has NOBITS
        copies of the loaded sections); defaults to ``path``
    """

    def __init__(self, path: os.PathLike | str, binary: Optional[os.PathLike | str] = None,
                 binary_elf: Optional["ElfFile"] = None):
        self.path = str(path)
        self.binary_path = str(binary) if binary is not None else self.path
        try:
            self._file = open_regular(self.path)
        except OSError as exc:
            raise DebugInfoError(f"cannot open debug information {self.path}: {exc.strerror}") from None
        try:
            (self.dwarf, self._elffile, self.little_endian, self.machine, self.address_size,
             index_key) = open_dwarf(self._file, binary_elf if self.path == self.binary_path else None)
        except ProbectlError:
            self._file.close()
            raise
        except (ValueError, IndexError) as exc:
            self._file.close()
            raise DebugInfoError(f"{self.path}: unreadable ELF/DWARF ({exc})",
                                 hint="check that the file is a complete ELF file with debug information") from None
        self._cu_index: Optional[list[tuple[int, int, int]]] = None
        self._aranges: Optional[tuple[Sequence[int], Sequence[int], Sequence[int]]] = None
        self._aranges_loaded = False
        self._cus: Optional[list[CompileUnit]] = None
        self._cu_functions: dict[int, list[DIE]] = {}
        self._cu_variables: dict[int, list[DIE]] = {}
        self._name_index: Optional[Mapping[str, list[tuple[int, int]]]] = None
        self._variable_index: Mapping[str, list[tuple[int, int]]] = {}
        self._lookups: Optional[dict[str, Optional[tuple[list, list]]]] = None
        self._functions_cache: dict[tuple[int, int], Function] = {}
        self._instances_cache: dict[tuple[tuple[int, int], bool], list[Function]] = {}
        self._by_origin: dict[int, Optional[dict[int, list[tuple[int, Optional[int]]]]]] = {}  # (by unit offset)
        self._children: dict[tuple[int, int], list[DIE]] = {}
        # What the other modules of the package compute, kept here and read through the accessors:
        # CU offset -> whether some variable of the CU uses a location list (cu_is_optimized)
        self._optimized: dict[int, bool] = {}
        self._die_ranges: dict[int, tuple[tuple[int, int], ...]] = {}  # DIE offset → die_ranges
        # CU offset -> dieindex.function_bounds of the CU, None once its functions are parsed (_function_bounds)
        self._bounds: dict[int, Optional[list[tuple[int, CodeBounds]]]] = {}
        self._scans: Optional["UnitScans"] = None  # the scans above kept on disk (dieindex.UnitScans)
        # CU offset -> the CU's line table (line_table)
        self._line_tables: dict[int, "LineTable"] = {}
        # lines.entry_rows found so far, with those earlier runs kept (entry_rows)
        self._entry_rows: Optional["KeptEntryRows"] = None
        # the call-frame information: .eh_frame of the runtime binary, .debug_frame (call_frames)
        self._call_frames: Optional["CallFrames"] = None
        # the runtime binary read by probectl's ELF reader (binary_elf); closed by close() unless it
        # is the caller's (``binary_elf``: the resolver's, whose symbols are then read once a run)
        self._binary_elf: Optional["ElfFile"] = binary_elf
        self._borrowed_elf = binary_elf
        # the separate debug file read by probectl's ELF reader (debug_elf); closed by close()
        self._debug_elf: Optional["ElfFile"] = None
        # name -> global_object_addresses of it
        self._global_objects: dict[str, Optional[int]] = {}
        # die_key of a variable -> the DIE whose child it is (parent_scope)
        self._parent_scopes: dict[tuple[int, int], Optional[DIE]] = {}
        # (CU offset, DIE offset, attribute) -> location.location_entries of it (location_lists)
        self._location_lists: dict[tuple[int, int, str], Optional[list["LocationRange"]]] = {}
        # namesearch's searcher of exact names, None for a file it cannot search (name_search)
        self._name_search: Optional["NameSearch"] = None
        # whether _name_search was made (it may be None once made)
        self._name_search_made = False
        # the key of the file's name indexes on disk (index_key)
        self._index_key: str = index_key

    @property
    def elffile(self) -> "ELFFile":
        """pyelftools' ELFFile of the file, which opened it when probectl's ELF reader could not
        (relocation, zstd or ``.zdebug`` sections); opened on first use otherwise."""
        if self._elffile is None:
            from .mappedelf import MappedELFFile

            self._elffile = MappedELFFile(self._file)
        return self._elffile

    @classmethod
    def open(cls, binary: os.PathLike | str, debug_file: Optional[os.PathLike | str] = None,
             extra_dirs: Iterable[os.PathLike | str] = (), root: Optional[Path] = None,
             binary_elf: Optional["ElfFile"] = None) -> "DebugInfo":
        """DWARF for ``binary``: from ``debug_file`` if given, the binary itself if it has
        ``.debug_info``, else its separate debug file (build-id, ``.gnu_debuglink``; first in the
        tree of ``root``, a container's, when the binary is one of its files: see ``find_debug_file``).
        ``binary_elf`` is ``binary`` already opened by probectl's ELF reader: read instead of
        opening the file again (each opening parses its headers, and its symbols when asked), and
        left open by ``close``.

        A missing debug file raises DebugInfoError listing every path tried.
        """
        if debug_file is not None:
            return cls(debug_file, binary, binary_elf)
        from ..elf import ElfFile, find_debug_file

        with contextlib.nullcontext(binary_elf) if binary_elf is not None else ElfFile(binary) as elf:
            if elf.has_dwarf:
                return cls(binary, binary, binary_elf)
            found, tried = find_debug_file(elf, extra_dirs, root)
        if found is None:
            lines = "\n".join(f"  {t}" for t in tried)
            raise DebugInfoError(
                f"{binary} has no debug information, and no separate debug file was found; tried:\n{lines}",
                hint="install the debug symbols (Debian: the -dbg or -dbgsym package of the binary's package, "
                     "e.g. libc6-dbg for libc), or pass the debug file explicitly")
        return cls(found, binary, binary_elf)

    def close(self) -> None:
        if self._scans is not None:
            self._scans.keep()
        if self._entry_rows is not None:
            self._entry_rows.keep()
        self._file.close()
        if self._binary_elf is not None and self._binary_elf is not self._borrowed_elf:
            self._binary_elf.close()
        if self._debug_elf is not None:
            self._debug_elf.close()

    def fileno(self) -> Optional[int]:
        """The descriptor of the open debug file (to pread a mapped section), None once it is closed."""
        return None if self._file.closed else self._file.fileno()

    def __enter__(self) -> "DebugInfo":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<DebugInfo {self.path}>"

    # --- compilation units ------------------------------------------------------------------

    @guarded
    def compile_units(self) -> list[CompileUnit]:
        """Every CU, in section order (headers only are parsed)."""
        if self._cus is None:
            self._cus = list(self.dwarf.iter_CUs())
        return self._cus

    def _get_aranges(self) -> Optional[tuple[Sequence[int], Sequence[int], Sequence[int]]]:
        """``.debug_aranges`` as sorted (starts, ends, CU offsets), or None without the section."""
        if not self._aranges_loaded:
            self._aranges_loaded = True
            from .dieindex import address_ranges

            self._aranges = address_ranges(self)
        return self._aranges

    def _aranges_cu_offset(self, address: int) -> Optional[int]:
        """The offset of the CU that ``.debug_aranges`` says holds ``address`` (None if none does)."""
        table = self._get_aranges()
        if table is None or not table[0]:
            return None
        starts, ends, offsets = table
        i = bisect.bisect_right(starts, address) - 1
        if i >= 0 and address < ends[i]:
            return offsets[i]
        return None

    @guarded
    def cu_at(self, address: int) -> Optional[CompileUnit]:
        """The CU whose code contains ``address``: through ``.debug_aranges`` when it has the
        address, else through each CU's own DW_AT_low_pc/high_pc/ranges."""
        offset = self._aranges_cu_offset(address)
        if offset is not None:
            return self.dwarf.get_CU_at(offset)
        for lo, hi, offset in self._cu_ranges():
            if lo <= address < hi:
                return self.dwarf.get_CU_at(offset)
        return None

    def _cu_ranges(self) -> list[tuple[int, int, int]]:
        # Fallback for CUs missing from .debug_aranges (clang emits none by default): parse
        # every CU's top DIE once.
        if self._cu_index is None:
            index = []
            for cu in self.compile_units():
                for lo, hi in self.die_ranges(cu.get_top_DIE()):
                    index.append((lo, hi, cu.cu_offset))
            index.sort()
            self._cu_index = index
        return self._cu_index

    def comp_dir(self, cu: CompileUnit) -> str:
        value = cu.get_top_DIE().attributes.get("DW_AT_comp_dir")
        return value.value.decode("utf-8", "replace") if value is not None and isinstance(value.value, bytes) else ""

    def cu_base(self, cu: CompileUnit) -> int:
        top = cu.get_top_DIE()
        low = top.attributes.get("DW_AT_low_pc")
        return low.value if low is not None else 0

    @guarded
    def cu_is_optimized(self, cu: CompileUnit) -> bool:
        """perf's ``die_is_optimized_target``: some variable of the CU uses a location list."""
        if cu.cu_offset not in self._optimized:
            from .dieindex import uses_location_lists

            found = uses_location_lists(self, cu)
            if found is None:  # a CU the byte scanner cannot read: read its DIEs
                found = False
                version = cu.header.version
                for die in cu.iter_DIEs():
                    if die.tag in ("DW_TAG_variable", "DW_TAG_formal_parameter"):
                        loc = die.attributes.get("DW_AT_location")
                        if loc is not None and (loc.form in ("DW_FORM_sec_offset", "DW_FORM_loclistx")
                                                or (version < 4 and loc.form in ("DW_FORM_data4", "DW_FORM_data8"))):
                            found = True
                            break
            self._optimized[cu.cu_offset] = found
        return self._optimized[cu.cu_offset]

    @guarded
    def is_unoptimized_rust(self, fn: "Function") -> bool:
        """``fn`` is a Rust function built without optimisation, whose variables live in its stack
        frame (valid once the prologue has moved the stack pointer), although its unit uses location
        lists (rustc writes them at opt-level 0 too, for a value passed by reference: an address in a
        register, then on the stack), so that perf's unit-wide test takes the unit as optimised: a
        Rust unit (DW_LANG_Rust) whose variables of ``fn`` are all in memory, in every entry of their
        location lists (optimised code keeps values in registers, computed, or in pieces)."""
        from .location import location_entries

        top = fn.cu.get_top_DIE()
        language = top.attributes.get("DW_AT_language")
        if language is None or language.value != DW_LANG_RUST:
            return False

        def in_memory(die: DIE) -> bool:
            for child in self.children(die):
                if child.tag in ("DW_TAG_variable", "DW_TAG_formal_parameter"):
                    entries = location_entries(self, child)
                    if entries is not None and any(op.op_name in _VALUE_NOT_IN_MEMORY
                                                   for entry in entries for op in entry.expr):
                        return False
                elif child.tag == "DW_TAG_lexical_block" and not in_memory(child):
                    return False
            return True

        return in_memory(fn.die)

    # --- addresses of DIEs ------------------------------------------------------------------

    @guarded
    def die_ranges(self, die: DIE) -> list[tuple[int, int]]:
        """The address ranges of a DIE in DW_AT_ranges order (low_pc/high_pc gives one range)."""
        # A range list is decoded once (`vars` asks for
        # the ranges of the same functions once per line-table row).
        found = self._die_ranges.get(die.offset)
        if found is None:
            found = self._die_ranges[die.offset] = tuple(self._read_die_ranges(die))
        return list(found)

    def _read_die_ranges(self, die: DIE) -> list[tuple[int, int]]:
        attrs = die.attributes
        low = attrs.get("DW_AT_low_pc")
        high = attrs.get("DW_AT_high_pc")
        rng = attrs.get("DW_AT_ranges")
        for attr in (low, high, rng):
            # (an address, a constant or an offset; a block or a string there is damage, not a range)
            if attr is not None and not isinstance(attr.value, int):
                raise DwarfFormatError(f"DIE 0x{die.offset:x}: {attr.name} has the form {attr.form}, "
                                       "not an address, a constant or an offset")
        if low is not None and high is not None:
            if high.form.startswith("DW_FORM_addr"):
                return [(low.value, high.value)]
            return [(low.value, low.value + high.value)]
        if rng is None and low is not None:
            return [(low.value, low.value + 1)]
        if rng is None:
            return []
        cu = die.cu
        if cu.version < 5 and rng.form not in ("DW_FORM_sec_offset", "DW_FORM_data4", "DW_FORM_data8"):
            return []
        offset = rng.value
        if die.tag != "DW_TAG_compile_unit" and cu.version < 5:
            base_attr = cu.get_top_DIE().attributes.get("DW_AT_GNU_ranges_base")
            if base_attr is not None and rng.form != "DW_FORM_sec_offset":
                offset += base_attr.value
        from .lists import range_list

        return range_list(cu, offset, self.cu_base(cu))

    @guarded
    def die_entry(self, die: DIE) -> Optional[int]:
        """perf's ``die_entrypc``: DW_AT_entry_pc, else DW_AT_low_pc, else the first DW_AT_ranges entry."""
        attrs = die.attributes
        entry = attrs.get("DW_AT_entry_pc")
        if entry is not None:
            if entry.form.startswith("DW_FORM_addr"):
                return entry.value
            ranges = self.die_ranges(die)
            if ranges:
                base = attrs["DW_AT_low_pc"].value if "DW_AT_low_pc" in attrs else ranges[0][0]
                return base + entry.value
        low = attrs.get("DW_AT_low_pc")
        if low is not None:
            return low.value
        ranges = self.die_ranges(die)
        return ranges[0][0] if ranges else None

    @guarded
    def die_contains(self, die: DIE, address: int) -> bool:
        return any(lo <= address < hi for lo, hi in self.die_ranges(die))

    # --- files ------------------------------------------------------------------------------

    @guarded
    def decl_file(self, die: DIE) -> Optional[str]:
        index = die_attr(die, "DW_AT_decl_file")
        if index is None:
            return None
        return self.file_name(die.cu, index)

    @guarded
    def call_file(self, die: DIE) -> Optional[str]:
        index = die.attributes.get("DW_AT_call_file")
        return self.file_name(die.cu, index.value) if index is not None else None

    @guarded
    def file_name(self, cu: CompileUnit, index: int) -> Optional[str]:
        """The path of file ``index`` of the CU's line table, absolute as elfutils builds it."""
        return self.line_table(cu).file_name(index)

    def entry_line(self, func: Function) -> int:
        """:func:`.lines.entry_line` (for Function, which lines imports)."""
        from .lines import entry_line

        return entry_line(self, func)

    def entry_rows(self) -> "KeptEntryRows":
        """``lines.entry_rows`` found so far, those kept on disk included (read once)."""
        if self._entry_rows is None:
            from .lines import KeptEntryRows

            self._entry_rows = KeptEntryRows(self)
        return self._entry_rows

    @guarded
    def line_table(self, cu: CompileUnit) -> "LineTable":
        """The line table of ``cu`` (``lines.LineTable``), read once."""
        table = self._line_tables.get(cu.cu_offset)
        if table is None:
            from .lines import LineTable

            try:
                table = LineTable(self, cu)
            except (TypeError, AttributeError) as exc:
                # (a corrupt line-program header gives None or bytes where a number belongs)
                raise DebugInfoError(f"{self.path}: corrupt line table of CU 0x{cu.cu_offset:x} ({exc})",
                                     hint="the debug information is damaged") from None
            self._line_tables[cu.cu_offset] = table
        return table

    # --- children, cached -------------------------------------------------------------------

    @guarded
    def children(self, die: DIE) -> list[DIE]:
        """The children of a DIE (cached); a corrupt sibling chain that does not move forward
        raises DebugInfoError instead of looping."""
        key = die_key(die)
        kids = self._children.get(key)
        if kids is None:
            kids = []
            if die.has_children:
                last = die.offset
                for child in die.iter_children():
                    if child.offset <= last:
                        raise DebugInfoError(f"{self.path}: corrupt DWARF (DIE 0x{die.offset:x} has a child "
                                             f"list that loops)", hint="the debug information is damaged")
                    last = child.offset
                    kids.append(child)
            self._children[key] = kids
        return kids

    @guarded
    def parent_scope(self, var: DIE) -> Optional[DIE]:
        """The DIE whose child ``var`` is, found by walking its CU's scopes (cached); None if none is."""
        key = die_key(var)
        if key in self._parent_scopes:
            return self._parent_scopes[key]
        found = None

        def walk(die: DIE) -> bool:
            nonlocal found
            for c in self.children(die):
                if c.offset == var.offset:
                    found = die
                    return True
                if c.has_children and c.tag in ("DW_TAG_subprogram", "DW_TAG_lexical_block",
                                                 "DW_TAG_inlined_subroutine", "DW_TAG_namespace"):
                    if walk(c):
                        return True
            return False

        walk(var.cu.get_top_DIE())
        self._parent_scopes[key] = found
        return found

    @guarded
    def cu_functions(self, cu: CompileUnit) -> list[DIE]:
        """Top-level DW_TAG_subprogram DIEs of a CU, in DIE order."""
        dies = self._cu_functions.get(cu.cu_offset)
        if dies is None:
            from .dieindex import top_level_dies

            found = top_level_dies(self, cu)
            if found is not None:
                # Only these DIEs are parsed, not the types and declarations around them.
                self._cu_functions[cu.cu_offset] = [cu.get_DIE_from_refaddr(off) for off in found[0]]
                self._cu_variables[cu.cu_offset] = [cu.get_DIE_from_refaddr(off) for off in found[1]]
                return self._cu_functions[cu.cu_offset]
            dies = []
            variables = []
            for die in self.children(cu.get_top_DIE()):
                if die.tag == "DW_TAG_subprogram":
                    dies.append(die)
                elif die.tag == "DW_TAG_variable":
                    variables.append(die)
                elif die.tag == "DW_TAG_namespace" or die.tag == "DW_TAG_module":
                    for sub in self.children(die):
                        if sub.tag == "DW_TAG_subprogram":
                            dies.append(sub)
                        elif sub.tag == "DW_TAG_variable":
                            variables.append(sub)
            self._cu_functions[cu.cu_offset] = dies
            self._cu_variables[cu.cu_offset] = variables
        return dies

    @guarded
    def cu_variables(self, cu: CompileUnit) -> list[DIE]:
        """Top-level DW_TAG_variable DIEs of a CU (globals, file statics, declarations)."""
        self.cu_functions(cu)
        return self._cu_variables[cu.cu_offset]

    # --- functions --------------------------------------------------------------------------

    @guarded
    def function(self, die: DIE) -> Function:
        """The Function for a DW_TAG_subprogram or DW_TAG_inlined_subroutine DIE (cached)."""
        key = die_key(die)
        fn = self._functions_cache.get(key)
        if fn is None:
            origin = die_origin(die)
            name = die_name(die) or ""
            ranges = tuple(self.die_ranges(die))
            entry = self._code_entry(die, ranges)
            inlined = die.tag == "DW_TAG_inlined_subroutine"
            call_line = die.attributes["DW_AT_call_line"].value if "DW_AT_call_line" in die.attributes else 0
            fn = Function(
                name=name, die=die, cu=die.cu, debuginfo=self,
                entry=entry, ranges=ranges,
                inlined=inlined,
                call_file=self.call_file(die) if inlined else None,
                call_line=call_line,
                external=bool(die_attr(die, "DW_AT_external")),
                abstract=(not ranges and entry is None and ("DW_AT_inline" in origin.attributes
                                                            or "DW_AT_inline" in die.attributes)),
            )
            self._functions_cache[key] = fn
        return fn

    def _code_entry(self, die: DIE, ranges: Sequence[tuple[int, int]]) -> Optional[int]:
        """A Function's ``entry``: the DIE's entry address when it has code (``ranges``, its
        ``die_ranges``, or an entry pc), else None."""
        return self.die_entry(die) if ranges or "DW_AT_entry_pc" in die.attributes else None

    @staticmethod
    def _is_definition(die: DIE) -> bool:
        # perf's die_is_func_def: a subprogram that is not a declaration.
        return die.tag == "DW_TAG_subprogram" and "DW_AT_declaration" not in die.attributes

    def _matches(self, die: DIE, pattern: str, glob: bool) -> bool:
        names = (die_name(die), die_linkage_name(die))
        if glob:
            return any(n is not None and fnmatch.fnmatchcase(n, pattern) for n in names)
        return pattern in names

    @guarded
    def find_functions(self, pattern: str, src: Optional[str] = None) -> list[Function]:
        """Function definitions named ``pattern`` (DW_AT_name or DW_AT_linkage_name; a glob if it
        has ``*?[``), in every CU, as perf finds them.

        With an exact name, the first matching definition of each CU is taken (so a static
        function defined in several CUs gives one Function per CU); a glob takes every match.
        ``src`` keeps the definitions whose DW_AT_decl_file ends with it (``FUNC@SRC``).
        Inline functions come back as abstract definitions: expand them with ``instances()``,
        or use ``probe_functions()`` to get code addresses directly.
        """
        glob = is_glob(pattern)
        if not glob:
            return self._find_exact(pattern, src)
        found: list[Function] = []
        for cu in self._candidate_cus(pattern, glob):
            for die in self.cu_functions(cu):
                if not self._is_definition(die) or not self._matches(die, pattern, glob):
                    continue
                if src is not None and not tail_match(self.decl_file(die), src):
                    continue
                found.append(self.function(die))
                if not glob:
                    break
        return found

    def _find_exact(self, name: str, src: Optional[str]) -> list[Function]:
        """``find_functions`` of an exact name: the same first match per CU, found by parsing only
        the DIEs the name index lists, not every function of the CU. (The index holds top-level
        definitions, found as ``cu_functions`` finds subprograms: a test checks that both ways
        give the same functions.)"""
        return [self.function(die) for die in self._exact_definitions(name, src)]

    def _exact_definitions(self, name: str, src: Optional[str]) -> list[DIE]:
        """The DIEs of ``_find_exact``'s functions."""
        by_cu: dict[int, list[int]] = {}
        for cu_offset, die_offset in self.function_refs(name):
            by_cu.setdefault(cu_offset, []).append(die_offset)
        found: list[DIE] = []
        for cu_offset in sorted(by_cu):
            cu = self.dwarf.get_CU_at(cu_offset)
            for offset in sorted(by_cu[cu_offset]):
                die = cu.get_DIE_from_refaddr(offset)
                if not self._is_definition(die) or not self._matches(die, name, False):
                    continue
                if src is not None and not tail_match(self.decl_file(die), src):
                    continue
                found.append(die)
                break
        return found

    def _function_bounds(self, cu: CompileUnit) -> Optional[list[tuple[int, CodeBounds]]]:
        """``dieindex.function_bounds`` of the CU (cached); None once its functions are parsed anyway."""
        if cu.cu_offset not in self._bounds:
            from .dieindex import function_bounds, valid_bounds

            self._bounds[cu.cu_offset] = (self._unit_scans().get(self, "bounds", cu, function_bounds, valid_bounds)
                                          if cu.cu_offset not in self._cu_functions else None)
        return self._bounds[cu.cu_offset]

    def _unit_scans(self) -> "UnitScans":
        if self._scans is None:
            from .dieindex import UnitScans

            self._scans = UnitScans(self)
        return self._scans

    def _candidate_cus(self, pattern: str, glob: bool) -> Iterator[CompileUnit]:
        # Only the CUs the name index says define a matching name are parsed, in CU order.
        if glob:
            index = self.name_index()
            refs = [ref for name in index if fnmatch.fnmatchcase(name, pattern) for ref in index[name]]
        else:
            refs = self.function_refs(pattern)
        for cu_offset in sorted({cu_offset for cu_offset, _ in refs}):
            yield self.dwarf.get_CU_at(cu_offset)

    @guarded
    def name_index(self) -> Mapping[str, list[tuple[int, int]]]:
        """Name (and linkage name) of every top-level function definition → [(CU offset, DIE offset)].

        Built once, by walking the top-level DIEs of every CU (``DW_AT_sibling`` skips bodies),
        and kept on disk for the next run (``nameindex``).
        """
        if self._name_index is None:
            from .nameindex import load_or_build

            self._name_index, self._variable_index = load_or_build(self)
        return self._name_index

    @guarded
    def variable_index(self) -> Mapping[str, list[tuple[int, int]]]:
        """Name of every top-level variable with a location (or DW_AT_external) → [(CU offset, DIE offset)]."""
        self.name_index()
        return self._variable_index

    def function_names_holding(self, parts: tuple[str, ...]) -> list[str]:
        """The names of ``name_index()`` that hold one of ``parts`` (a C++ function's mangled source
        name, ``5clear``: the functions that only DWARF names, by their linkage names), in the order
        of their UTF-8 bytes (an empty part holds none)."""
        from .nameindex import CompactIndex, names_holding

        index = self.name_index()
        if isinstance(index, CompactIndex):
            return index.names_holding(parts)
        return names_holding(index, parts)

    def function_refs(self, name: str) -> list[tuple[int, int]]:
        """``name_index().get(name, [])``, without the full index when it is not needed (``_refs``)."""
        return self._refs(name)[0]

    def variable_refs(self, name: str) -> list[tuple[int, int]]:
        """``variable_index().get(name, [])``, without the full index when it is not needed (``_refs``)."""
        return self._refs(name)[1]

    def variable_refs_at_hand(self, name: str) -> Optional[list[tuple[int, int]]]:
        """``variable_refs(name)`` when it is known without searching a large file or building its
        full index (seconds for a kernel): from a full index in memory or on disk, or an answer kept
        from an earlier run; None when only a search or the full index would say."""
        if self._name_index is None and self._searches_names():
            if self._lookups is None:  # (loaded as _search_name loads them: the full index only if needed)
                from . import nameindex

                self._lookups = nameindex.load_lookups(self)
                if name not in self._lookups:
                    full = nameindex.load_names(self)
                    if full is not None:
                        self._name_index, self._variable_index = full
            if self._name_index is None:
                found = self._lookups.get(name)
                return list(found[1]) if found is not None else None
        return self.variable_refs(name)

    def global_object_addresses(self, names: Iterable[str]) -> dict[str, Optional[int]]:
        """The address of the runtime binary's one global (or weak) data symbol of each name (None
        without exactly one), the names not asked before found in one pass over its symbol tables."""
        names = list(dict.fromkeys(names))
        missing = [name for name in names if name not in self._global_objects]
        if missing:
            elf = self.binary_elf()
            try:
                found = elf.find_symbols_named(missing) if elf is not None else {}
            except ProbectlError:
                found = {}
            for name in missing:
                values = {s.value for s in found.get(name, ())
                          if s.defined and s.type == "OBJECT" and s.bind in ("GLOBAL", "WEAK")}
                self._global_objects[name] = values.pop() if len(values) == 1 else None
        return {name: self._global_objects[name] for name in names}

    @guarded
    def _refs(self, name: str) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
        """The function and variable references of one exact name, as the full indexes list them.

        In a large file (``SEARCH_NAMES_FROM`` bytes of .debug_info: a kernel, libc6-dbg) without a cached full
        index, the name is searched for (``namesearch.lookup_name``: seconds less than indexing every
        CU) and the answer is kept on disk (``nameindex``) for the next run."""
        if self._name_index is None and self._searches_names():
            found = self._lookups[name] if self._lookups is not None and name in self._lookups \
                else self._search_name(name)
            if found is not None:
                return found
        index = self.name_index()
        return list(index.get(name, ())), list(self._variable_index.get(name, ()))

    def _searches_names(self) -> bool:
        info = self.dwarf.debug_info_sec
        return info is not None and info.size >= SEARCH_NAMES_FROM

    def _search_name(self, name: str) -> Optional[tuple[list, list]]:
        from . import nameindex

        if self._lookups is None:
            self._lookups = nameindex.load_lookups(self)
            if name in self._lookups:
                return self._lookups[name]
            full = nameindex.load_names(self)
            if full is not None:  # a full index made earlier (a glob, `funcs`) answers everything
                self._name_index, self._variable_index = full
                # (and its answer is kept with the lookups: the next run of this name reads those, a
                # few hundred bytes, not the whole index, 1.4 MB of a C++ library's)
                self._lookups[name] = (list(full[0].get(name, ())), list(full[1].get(name, ())))
                nameindex.store_lookups(self, self._lookups)
                return None
        from .namesearch import lookup_name  # (a name answered by the cache needs no search)

        found = lookup_name(self, name)
        # (None, a name too common to search for, is kept too: the next run does not search again)
        self._lookups[name] = found
        nameindex.store_lookups(self, self._lookups)
        return found

    @guarded
    def function_names(self, pattern: str = "*") -> list[str]:
        """Sorted names of the functions defined with code (perf ``-F``), filtered by a glob."""
        names = set()
        for name, refs in self.name_index().items():
            if fnmatch.fnmatchcase(name, pattern):
                names.add(name)
        return sorted(names)

    def count_functions(self, pattern: str) -> int:
        """How many top-level function definitions the glob ``pattern`` names (from the name index,
        without parsing them: a bound to check before ``find_functions`` parses tens of thousands)."""
        refs = set()
        for name, found in self.name_index().items():
            if fnmatch.fnmatchcase(name, pattern):
                refs.update(found)
        return len(refs)

    @guarded
    def instances(self, func: Function, skip_redundant: bool = True) -> list[Function]:
        """The concrete instances of an inline function in its CU (perf's ``die_walk_instances``):
        every DW_TAG_inlined_subroutine and out-of-line DW_TAG_subprogram whose abstract origin is
        ``func``, in DIE order. perf skips "redundant" inline instances, whose call site is the
        function's own declaration line; ``skip_redundant`` does the same.
        """
        origin = die_origin(func.die)
        key = (die_key(origin), skip_redundant)
        cached = self._instances_cache.get(key)
        if cached is not None:
            return cached
        found: list[Function] = []
        target = origin.offset
        by_origin = self._instances_by_origin(func.cu)
        if by_origin is not None:
            # (read from the unit's bytes, once a unit: walking its DIEs for each function parsed
            # every DIE of the unit, most of the time of a C++ method's add -D on libstdc++)
            cu = func.cu
            for offset, caller in by_origin.get(target, ()):
                die = cu.get_DIE_from_refaddr(offset)
                inst = self.function(die)
                if die.tag == "DW_TAG_inlined_subroutine":
                    inst.caller = self.function(cu.get_DIE_from_refaddr(caller)) if caller is not None else None
                if not (skip_redundant and self._redundant(die, origin)):
                    found.append(inst)
            self._instances_cache[key] = found
            return found

        def walk(die: DIE, caller: Optional[Function]) -> None:
            for child in self.children(die):
                tag = child.tag
                if tag in ("DW_TAG_subprogram", "DW_TAG_inlined_subroutine"):
                    here = caller
                    ao = child.attributes.get("DW_AT_abstract_origin")
                    if ao is not None:
                        at = ao.value if ao.form == "DW_FORM_ref_addr" else ao.value + child.cu.cu_offset
                        if at == target and self.has_code(child):
                            inst = self.function(child)
                            if tag == "DW_TAG_inlined_subroutine":
                                inst.caller = caller
                            if not (skip_redundant and self._redundant(child, origin)):
                                found.append(inst)
                    if self.has_code(child):
                        here = self.function(child)
                    walk(child, here)
                elif tag in ("DW_TAG_lexical_block", "DW_TAG_namespace", "DW_TAG_module"):
                    walk(child, caller)

        walk(func.cu.get_top_DIE(), None)
        self._instances_cache[key] = found
        return found

    def _instances_by_origin(self, cu: CompileUnit) -> Optional[dict[int, list[tuple[int, Optional[int]]]]]:
        """``dieindex.instances_by_origin`` of ``cu``, kept per unit (None: walk the DIEs instead)."""
        if cu.cu_offset not in self._by_origin:
            from .dieindex import instances_by_origin, valid_origins

            self._by_origin[cu.cu_offset] = self._unit_scans().get(self, "origins", cu, instances_by_origin, valid_origins)
        return self._by_origin[cu.cu_offset]

    @guarded
    def has_code(self, die: DIE) -> bool:
        # perf's die_is_func_instance: an entry pc or DW_AT_ranges.
        a = die.attributes
        return "DW_AT_low_pc" in a or "DW_AT_entry_pc" in a or "DW_AT_ranges" in a

    def _redundant(self, inst: DIE, origin: DIE) -> bool:
        if inst.tag != "DW_TAG_inlined_subroutine":
            return False
        call_line = inst.attributes.get("DW_AT_call_line")
        call_file = inst.attributes.get("DW_AT_call_file")
        decl_line = origin.attributes.get("DW_AT_decl_line")
        decl_file = origin.attributes.get("DW_AT_decl_file")
        return (call_line is not None and decl_line is not None and call_line.value == decl_line.value
                and call_file is not None and decl_file is not None and call_file.value == decl_file.value)

    @guarded
    def probe_functions(self, pattern: str, src: Optional[str] = None, inlines: bool = True) -> list[Function]:
        """The code instances a ``FUNC[@SRC]`` probe point means, in perf's order: each matching
        definition that has code, and (unless ``inlines`` is False) each instance of a matching
        inline function. Instances without an entry address are dropped (perf: "has no entry PC").
        """
        out: list[Function] = []
        seen: set[int] = set()
        for fn in self.find_functions(pattern, src):
            cands = [fn] if self.has_code(fn.die) else (self.instances(fn) if inlines else [])
            for c in cands:
                if c.entry is None or c.entry == 0:
                    continue
                if c.entry in seen:
                    continue
                seen.add(c.entry)
                out.append(c)
        return out

    @guarded
    def finds_code(self, name: str) -> bool:
        """Whether ``probe_functions(name)`` finds any code: the same answer, with the first place
        found enough and the cheap checks first (a definition's address before a unit's inline
        instances, an instance's address before its call line), for ``funcs``, which asks it of
        hundreds of names a symbol does not give (most of a large C++ library's are COMDAT copies the
        linker discarded, or inlined only into those: at address 0)."""
        if is_glob(name):
            return bool(self.probe_functions(name))
        # (the DIEs find_functions and instances() find, without making a Function of each)
        found = self._exact_definitions(name, None)
        if any(self.has_code(die) and self._code_entry(die, self.die_ranges(die)) for die in found):
            return True
        for definition in found:
            if self.has_code(definition):
                continue
            origin = die_origin(definition)
            by_origin = self._instances_by_origin(definition.cu)
            if by_origin is None:
                if any(inst.entry for inst in self.instances(self.function(definition))):
                    return True
                continue
            for offset, _caller in by_origin.get(origin.offset, ()):
                die = definition.cu.get_DIE_from_refaddr(offset)
                if self._code_entry(die, self.die_ranges(die)) and not self._redundant(die, origin):
                    return True
        return False

    # --- what is at an address --------------------------------------------------------------

    @guarded
    def function_at(self, address: int) -> Optional[Function]:
        """The out-of-line function (DW_TAG_subprogram with code) containing ``address``."""
        # Usually the function a probe was just placed in: found among the few parsed so far
        # without reading the CU's address table and function bounds.
        if len(self._functions_cache) <= 64:
            for fn in self._functions_cache.values():
                if (fn.die.tag == "DW_TAG_subprogram" and fn.ranges
                        and any(lo <= address < hi for lo, hi in fn.ranges)):
                    return fn
        cu = self.cu_at(address)
        if cu is None:
            return None
        die = self.cu_function_containing(cu, address)
        return self.function(die) if die is not None else None

    def cu_function_containing(self, cu: CompileUnit, address: int) -> Optional[DIE]:
        """The first of ``cu_functions(cu)`` with code that contains ``address``, or None."""
        bounds = self._function_bounds(cu)
        if bounds is None:
            for die in self.cu_functions(cu):
                if self.has_code(die) and self.die_contains(die, address):
                    return die
            return None
        # The same first match, reading only the DIE found (and those the byte scanner cannot judge).
        for offset, bound in bounds:
            if bound is None:
                continue
            if isinstance(bound, str):  # (dieindex.COMPLEX: the DIE reader says)
                die = cu.get_DIE_from_refaddr(offset)
                if self.has_code(die) and self.die_contains(die, address):
                    return die
            elif bound[0] <= address < bound[1]:
                return cu.get_DIE_from_refaddr(offset)
        return None

    @guarded
    def scope_chain(self, address: int, top: Optional[DIE] = None) -> list[DIE]:
        """The DIEs whose code contains ``address``, outermost first: the subprogram, then each
        inline instance and lexical block inside it down to the innermost one.

        ``top`` starts the walk at that DIE instead of the subprogram.
        """
        if top is None:
            fn = self.function_at(address)
            if fn is None:
                return []
            top = fn.die
        chain = [top]
        die = top
        while True:
            inner = None
            for child in self.children(die):
                if child.tag in ("DW_TAG_inlined_subroutine", "DW_TAG_lexical_block"):
                    if self._scope_contains(child, address):
                        inner = child
                        break
            if inner is None:
                return chain
            chain.append(inner)
            die = inner

    def _scope_contains(self, die: DIE, address: int) -> bool:
        if any(lo <= address < hi for lo, hi in self.die_ranges(die)):
            return True
        # gcc leaves holes in a lexical block's ranges where the code of a function inlined in
        # it lies (and emits blocks without addresses): such a block still encloses the address
        # if one of its nested scopes does, as perf's walks (which descend everywhere) find.
        if die.tag == "DW_TAG_lexical_block":
            return any(self._scope_contains(c, address) for c in self.children(die)
                       if c.tag in ("DW_TAG_inlined_subroutine", "DW_TAG_lexical_block"))
        return False

    @guarded
    def inline_chain(self, address: int) -> list[Function]:
        """The function containing ``address`` and each inline instance it is inside, outermost first."""
        return [self.function(d) for d in self.scope_chain(address) if d.tag != "DW_TAG_lexical_block"]

    # --- what the other modules read once per file ------------------------------------------

    @guarded
    def call_frames(self) -> "CallFrames":
        """The call-frame information of the binary: ``.eh_frame`` from the runtime binary,
        ``.debug_frame`` from the debug file (read once)."""
        if self._call_frames is None:  # (only frame bases computed from the CFA need it: imported then)
            from ..elf import ElfFile
            from .cfi import CallFrames

            debug_frame = None
            opened = self.debug_elf()
            with contextlib.nullcontext(opened) if opened is not None else ElfFile(self.path) as debug:
                sec = debug.section(".debug_frame")
                if sec is not None and sec.has_data and sec.size:
                    debug_frame = debug.section_data(".debug_frame")
            binary = self.binary_elf()
            if binary is None:  # (the runtime binary unreadable: the debug file's rules)
                with ElfFile(self.path) as own:
                    self._call_frames = CallFrames.from_sections(own, debug_frame, self.index_key)
            else:
                self._call_frames = CallFrames.from_sections(binary, debug_frame, self.index_key)
        return self._call_frames

    def binary_elf(self) -> Optional["ElfFile"]:
        """The runtime binary, opened with probectl's ELF reader once (closed by ``close``); None if
        it cannot be read."""
        if self._binary_elf is None:
            from ..elf import ElfFile

            try:
                self._binary_elf = ElfFile(self.binary_path)
            except (OSError, ProbectlError):
                return None
        return self._binary_elf

    def debug_elf(self) -> Optional["ElfFile"]:
        """The file that holds the DWARF (the separate debug file, or the binary itself), opened
        with probectl's ELF reader once (closed by ``close``): its ``.symtab`` has the static
        functions a stripped binary lacks. None if it cannot be read."""
        if self.path == self.binary_path:
            return self.binary_elf()
        if self._debug_elf is None:
            from ..elf import ElfFile

            try:
                self._debug_elf = ElfFile(self.path)
            except (OSError, ProbectlError):
                return None
        return self._debug_elf

    def section_bytes(self, name: str) -> bytes:
        """The bytes of a DWARF section, by its ``DwarfSections`` attribute (``"debug_abbrev_sec"``;
        empty without the section); all but ``.debug_info`` are read once per file."""
        if name == "debug_info_sec":
            from .units import section_data

            return section_data(self.dwarf.debug_info_sec)
        return self.dwarf.section_bytes(name)

    def has_section_bytes(self, name: str) -> bool:
        """Whether ``section_bytes(name)`` has been read already."""
        return self.dwarf.has_section_bytes(name)

    @guarded
    def cu_bytes(self, cu: CompileUnit) -> bytes:
        """The bytes of one CU from its header on (positions in them are CU offsets), read once;
        only the CU is read, not all of ``.debug_info``."""
        return cu.data

    @guarded
    def abbrev_table(self, fmt: tuple[int, int, int, int]) -> dict[int, tuple]:
        """The compiled abbreviation table (``diescan.compiled_table``) of ``fmt``: (abbreviation
        offset, offset size, address size, version), compiled once (``DwarfSections.compiled_abbreviations``)."""
        return self.dwarf.compiled_abbreviations(fmt)

    @property
    def location_lists(self) -> dict[tuple[int, int, str], Optional[list["LocationRange"]]]:
        """The location lists ``location.location_entries`` has read, by (CU offset, DIE offset,
        attribute name); it fills this mapping."""
        return self._location_lists

    def name_search(self) -> Optional["NameSearch"]:
        """``namesearch.NameSearch`` of the file (made once); None for a file it cannot search."""
        if not self._name_search_made:
            from .namesearch import NameSearch

            self._name_search = NameSearch.create(self)
            self._name_search_made = True
        return self._name_search

    @property
    def index_key(self) -> str:
        """The key of the file's indexes on disk (``indexcache.file_key`` of its path and build-id)."""
        return self._index_key
