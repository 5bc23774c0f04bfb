"""probectl's DIE reader (debuginfo/dwarf/units.py: abbreviations, attribute forms, DIEs; location.py:
expressions; lists.py: range and location lists) against pyelftools, the oracle.

The resolver reads DWARF through probectl's own reader only; pyelftools reads the same files here,
so every test is differential: the same abbreviation tables, every DIE of whole compilation units
(tag, size, children, each attribute's form, value, raw value and offset), every location
expression, and the address ranges and location lists of every DIE that has them.
"""
from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from elftools.dwarf.abbrevtable import AbbrevTable
from elftools.dwarf.dwarf_expr import DWARFExprParser
from elftools.dwarf.locationlists import LocationEntry, LocationExpr, LocationParser

from probectl.debuginfo.dwarf import DebugInfo
from probectl.debuginfo.dwarf.location import location_entries, parse_expression
from probectl.debuginfo.dwarf.units import DwarfFormatError
from probectl.errors import DebugInfoError

from tests.helpers import build_fixture, kernel_testdata_dir, pyelftools_dwarfinfo

LIBC = "/usr/lib/x86_64-linux-gnu/libc.so.6"


def _debug_files() -> list[tuple[Path, int]]:
    """(file, about how many of its DIEs to read, in whole CUs): fixtures at DWARF 5 and 4, libc's separate debug
    file (libc6-dbg) and the cloud kernel's vmlinux, where there are."""
    files = [(build_fixture("dwarf_structs", "-O2"), 10**6), (build_fixture("dwarf_inline", "-O2", ("-gdwarf-4",)), 10**6),
             (build_fixture("dwarf_structs", "-O0", ("-gdwarf-4",)), 10**6)]
    try:
        files.append((Path(DebugInfo.open(LIBC).path), 20000))
    except DebugInfoError:
        pass
    kernel = kernel_testdata_dir()
    if kernel is not None:
        files.append((kernel / "vmlinux", 20000))
    return files


def test_abbreviation_tables_read_like_pyelftools():
    """The tables the DIE reader names (compiled by diescan.compiled_table, shared with the byte scanner)."""
    from probectl.debuginfo.dwarf.names import FORM

    for path, _count in _debug_files():
        di = DebugInfo(path)
        theirs_dwarf = pyelftools_dwarfinfo(di)
        sec = di.dwarf.debug_abbrev_sec
        seen = set()
        for cu in itertools.islice(di.dwarf.iter_CUs(), 50):
            if cu["debug_abbrev_offset"] in seen:
                continue
            seen.add(cu["debug_abbrev_offset"])
            ours = {code: (tag, children, [(name, FORM.get(form, form), value if form == 0x21 else None)
                                           for name, form, value in specs])
                    for code, (tag, children, specs) in cu.abbrevs.items()}
            table = AbbrevTable(theirs_dwarf.structs, sec.stream, cu["debug_abbrev_offset"])
            theirs = {code: (decl["tag"], decl.has_children(),
                             [(s.name, s.form, s.value if s.form == "DW_FORM_implicit_const" else None)
                              for s in decl["attr_spec"]])
                      for code, decl in table._abbrev_map.items()}
            assert ours == theirs, (path, cu["debug_abbrev_offset"])


def test_truncated_abbreviation_table_is_an_error():
    from probectl.debuginfo.dwarf.diescan import compiled_table

    with pytest.raises(IndexError):
        compiled_table(b"\x01\x11\x01\x03", 0, 4, 8, 5, {})  # ends inside an attribute spec


def _ops(ops) -> list:
    return [(op.op, op.op_name, [_ops(a) if isinstance(a, list) and a and hasattr(a[0], "op") else a for a in op.args])
            for op in ops]


def test_every_die_reads_like_pyelftools():
    """Every DIE of whole CUs, read by both, and every location expression decoded by both."""
    for path, count in _debug_files():
        di = DebugInfo(path)
        theirs_dwarf = pyelftools_dwarfinfo(di)
        theirs_units = theirs_dwarf.iter_CUs()
        parsers: dict = {}
        seen = expressions = 0
        for cu in di.dwarf.iter_CUs():
            if seen >= count:
                break
            other = next(theirs_units)
            assert (cu.cu_offset, cu.size, cu.cu_die_offset, cu["version"], cu["address_size"]) == \
                (other.cu_offset, other.size, other.cu_die_offset, other["version"], other["address_size"]), path
            # (pyelftools lists the null entries that end child lists too)
            for ours, theirs in itertools.zip_longest(cu.iter_DIEs(), (d for d in other.iter_DIEs() if not d.is_null())):
                assert theirs is not None and ours is not None, (path, cu.cu_offset)
                assert (ours.offset, ours.tag, ours.size, ours.has_children) == \
                    (theirs.offset, theirs.tag, theirs.size, theirs.has_children), (path, ours.offset)
                mine = [(a.name, a.form, a.value, a.raw_value, a.offset) for a in ours.attributes.values()]
                other_attrs = [(a.name, a.form, a.value, a.raw_value, a.offset) for a in theirs.attributes.values()]
                assert mine == other_attrs, (path, ours.offset)
                for attr in ours.attributes.values():
                    if attr.form == "DW_FORM_exprloc":
                        parser = parsers.get(id(other.structs))
                        if parser is None:
                            parser = parsers[id(other.structs)] = DWARFExprParser(other.structs)
                        assert _ops(parse_expression(attr.value, cu)) == _ops(parser.parse_expr(attr.value)), \
                            (path, attr.offset)
                        expressions += 1
                seen += 1
        assert seen > 100 and expressions > 10, path


def test_ranges_and_location_lists_read_like_pyelftools():
    """The address ranges (DW_AT_ranges, low/high pc) and location lists of every DIE of the
    fixtures, DWARF 5 and 4, and of a sample of libc6-dbg's and the vmlinux's units, against
    pyelftools' range and location list parsers."""
    listed = located = 0
    for path, count in _debug_files():
        di = DebugInfo(path)
        theirs_dwarf = pyelftools_dwarfinfo(di)
        ranges = theirs_dwarf.range_lists()
        locations = LocationParser(theirs_dwarf.location_lists())
        units = di.dwarf.iter_CUs()
        for cu in (units if count >= 10**6 else itertools.islice(units, 0, 400, 7)):
            base = di.cu_base(cu)
            for die in cu.iter_DIEs():
                rng = die.attributes.get("DW_AT_ranges")
                if rng is not None:
                    theirs = []
                    b = base
                    for e in ranges.get_range_list_at_offset(rng.value, cu=theirs_dwarf.get_CU_at(cu.cu_offset)):
                        if hasattr(e, "base_address"):
                            b = e.base_address
                            continue
                        lo, hi = (e.begin_offset, e.end_offset) if e.is_absolute else (e.begin_offset + b, e.end_offset + b)
                        if hi > lo:
                            theirs.append((lo, hi))
                    assert di.die_ranges(die) == theirs, (path, die.offset)
                    listed += 1
                loc = die.attributes.get("DW_AT_location")
                if loc is not None and loc.form in ("DW_FORM_sec_offset", "DW_FORM_loclistx"):
                    other_die = theirs_dwarf.get_DIE_from_refaddr(die.offset)
                    entries = locations.parse_from_attribute(other_die.attributes["DW_AT_location"], cu["version"],
                                                             other_die)
                    assert not isinstance(entries, LocationExpr)
                    theirs, b = [], base
                    for e in entries:
                        if hasattr(e, "base_address"):
                            b = e.base_address
                            continue
                        if isinstance(e, LocationEntry):
                            lo, hi = (e.begin_offset, e.end_offset) if e.is_absolute else \
                                (e.begin_offset + b, e.end_offset + b)
                            if hi >= lo:
                                theirs.append((lo, hi, list(e.loc_expr)))
                    ours = [(r.low, r.high) for r in location_entries(di, die)]
                    assert ours == [(lo, hi) for lo, hi, _ in theirs], (path, die.offset)
                    located += 1
    assert listed > 5 and located > 20


def test_damaged_unit_is_a_clean_error(tmp_path):
    """A unit cut short, or an abbreviation code its table lacks, gives DwarfFormatError/IndexError
    (which the DWARF entry points report as a DebugInfoError naming the file), never a wrong DIE."""
    di = DebugInfo(build_fixture("dwarf_structs", "-O2"))
    cu = next(di.dwarf.iter_CUs())
    cu._data = cu.data[:len(cu.data) // 2]
    with pytest.raises((DwarfFormatError, IndexError)):
        list(cu.iter_DIEs())
    cu = list(DebugInfo(build_fixture("dwarf_structs", "-O2")).dwarf.iter_CUs())[0]
    data = bytearray(cu.data)
    data[cu.cu_die_offset - cu.cu_offset] = 0x7F  # an abbreviation code the table does not have
    cu._data = bytes(data)
    with pytest.raises(DwarfFormatError, match="abbreviation code 127"):
        cu.get_top_DIE()
