"""The native scanner of a unit's definitions (native/dwscan.c, ``_native.dwarf_definitions``) against
the Python byte scanner it stands in for (``dieindex.UnitScanner.python_definitions``, the reference):
the same (is a function, name, reference) in the same order, unit by unit, on C, C++, Rust and Go
fixtures (DWARF 4 and 5, compressed sections), Debian's libstdc++6-12-dbg and libc6-dbg; the whole
name index built either way; and the scanner under ASan and UBSan on damaged copies of a fixture's
DWARF (native/fuzz/dwscan_fuzz.c). Its scan of a unit's inline instances by origin
(``_native.dwarf_instances``) the same way against ``dieindex.python_instances_by_origin``: the same
instances, callers and order on every unit of the fixtures and of libstdc++6-12-dbg, in a unit's bytes
alone and in the whole section, and on damaged and truncated units."""
from __future__ import annotations

import os
import struct
from pathlib import Path

import pytest

from probectl import _native
from probectl.debuginfo.dwarf import DebugInfo
from probectl.debuginfo.dwarf import dieindex
from probectl.debuginfo.dwarf.dieindex import (UnitScanner, build_indexes, instances_by_origin, python_instances_by_origin,
                                               read_unit_headers)
from probectl.debuginfo.dwarf.diescan import AT_SIBLING, CUScanner
from probectl.debuginfo.dwarf.leb128 import read_uleb128
from probectl.debuginfo.dwarf.units import Unit, section_data
from probectl.errors import DebugInfoError
from tests.helpers import (build_cxx_fixture, build_fixture, build_go_fixture, build_rust_fixture, missing,
                           run_sanitized, sanitized_driver)

LIBSTDCXX_DBG = Path("/usr/lib/x86_64-linux-gnu/debug/libstdc++.so.6.0.30")
LIBC = "/usr/lib/x86_64-linux-gnu/libc.so.6"


def _scanner(debuginfo: DebugInfo) -> UnitScanner:
    # (as dieindex._index_units makes it: a mapped section is read where it lies)
    sec = debuginfo.dwarf.needed_section("debug_info_sec")
    return UnitScanner(debuginfo, section_data(sec) if getattr(sec.stream, "base", None) is None else None)


def _native_definitions(scanner: UnitScanner, unit: tuple):
    assert scanner.native_info is not None
    buffer, base = scanner.native_info
    return _native.dwarf_definitions(buffer, base, scanner.abbrev, scanner.strtab, scanner.line_strtab,
                                     scanner.str_offsets, unit, {})


def _assert_same_definitions(path) -> int:
    """Every unit of ``path``'s DWARF listed natively as the Python scanner lists it; none given up
    (these are files gcc, rustc and go made, all of shapes the native scanner reads). The count of
    definitions."""
    debuginfo = DebugInfo.open(str(path))
    try:
        scanner = _scanner(debuginfo)
        units = read_unit_headers(debuginfo)
        assert units
        total = 0
        for unit in units:
            native = _native_definitions(scanner, unit)
            assert native is not None, f"unit at 0x{unit[0]:x} given up"
            assert native == list(scanner.python_definitions(unit)), f"unit at 0x{unit[0]:x}"
            total += len(native)
        assert total
        return total
    finally:
        debuginfo.close()


@pytest.mark.parametrize("opt, extra", [("-O0", ()), ("-O2", ()), ("-O2", ("-gdwarf-4",)), ("-O0", ("-gz",))])
def test_c_fixture(opt, extra):
    _assert_same_definitions(build_fixture("dwarf_structs", opt, extra))
    _assert_same_definitions(build_fixture("dwarf_inline", opt, extra))


@pytest.mark.parametrize("opt", ["-O0", "-O2"])
def test_cxx_fixtures(opt):
    _assert_same_definitions(build_cxx_fixture("cxx_shop", opt))
    _assert_same_definitions(build_cxx_fixture("dwarf_namespaces", opt))


@pytest.mark.parametrize("mangling", ["legacy", "v0"])
def test_rust_fixture(mangling):
    """A Rust unit's types are scopes whose methods are definitions (the walk goes into them)."""
    _assert_same_definitions(build_rust_fixture("rust_shop", "0", mangling))


def test_go_fixture():
    _assert_same_definitions(build_go_fixture("go_target"))


def test_libstdcxx_dbg():
    """Declarations inside classes named by out-of-line definitions (the DIEs the walk does not take),
    a large mapped section."""
    if not LIBSTDCXX_DBG.exists():
        missing("libstdc++6-12-dbg is not installed")
    assert _assert_same_definitions(LIBSTDCXX_DBG) > 30000


@pytest.mark.libcdbg
def test_libc_dbg():
    try:
        path = DebugInfo.open(LIBC).path
    except DebugInfoError as exc:
        if os.environ.get("PROBECTL_REQUIRE_ALL") == "1":
            raise
        pytest.skip(f"libc6-dbg is not installed: {exc}")
    _assert_same_definitions(path)


def test_the_full_index_is_the_one_the_python_scanner_builds(monkeypatch):
    """build_indexes with the native scanner: the same names, references and order as without it."""
    paths = [build_cxx_fixture("cxx_shop", "-O2"), build_fixture("dwarf_structs", "-O2")]
    native = [build_indexes(DebugInfo.open(str(path))) for path in paths]
    monkeypatch.setattr(UnitScanner, "definitions", UnitScanner.python_definitions)
    python = [build_indexes(DebugInfo.open(str(path))) for path in paths]
    for ours, theirs in zip(native, python):
        assert [list(index.items()) for index in ours] == [list(index.items()) for index in theirs]
    assert all(functions for functions, _ in native) and any(variables for _, variables in native)


def _first_form_of(abbrev: bytes, at: int, code: int) -> int:
    """Where the form of the first attribute of abbreviation ``code`` of the table at ``at`` is."""
    while True:
        found, at = read_uleb128(abbrev, at)
        assert found, f"no abbreviation {code}"
        _tag, at = read_uleb128(abbrev, at)
        at += 1  # (has children)
        if found == code:
            _attr, at = read_uleb128(abbrev, at)
            return at
        while True:
            attr, at = read_uleb128(abbrev, at)
            form, at = read_uleb128(abbrev, at)
            if not attr and not form:
                break
            if form == 0x21:  # (implicit_const: its value follows)
                _value, at = read_uleb128(abbrev, at)


def test_a_unit_it_cannot_read_is_left_to_the_python_scanner(monkeypatch):
    """A unit whose unit DIE has a DW_FORM_indirect attribute: None from the native scanner; and a unit
    the native scanner gives up is listed by the Python scanner."""
    path = build_fixture("dwarf_structs", "-O0")
    debuginfo = DebugInfo.open(str(path))
    scanner = _scanner(debuginfo)
    unit = read_unit_headers(debuginfo)[0]
    cu_offset, end, die_offset, aoff = unit[:4]
    # The unit DIE's first attribute made indirect: its form moves before its value.
    abbrev = bytearray(scanner.abbrev)
    info = bytearray(section_data(debuginfo.dwarf.needed_section("debug_info_sec")))
    assert info[die_offset] < 0x80
    form_at = _first_form_of(bytes(abbrev), aoff, info[die_offset])
    assert abbrev[form_at] < 0x80
    old_form, abbrev[form_at] = abbrev[form_at], 0x16
    info[die_offset + 1:die_offset + 1] = bytes([old_form])
    moved = (cu_offset, end + 1) + tuple(unit[2:])
    assert _native.dwarf_definitions(bytes(info), 0, bytes(abbrev), scanner.strtab, scanner.line_strtab,
                                     scanner.str_offsets, moved, {}) is None

    monkeypatch.setattr(_native, "dwarf_definitions", lambda *args: None)
    listed = list(scanner.definitions(unit))
    assert listed and listed == list(scanner.python_definitions(unit))


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError):
        _native.dwarf_definitions(b"\0" * 16, 17, b"", b"", b"", b"", (0, 16, 11, 0, 4, 8, 5), {})
    with pytest.raises(TypeError):
        _native.dwarf_definitions(b"", 0, b"", b"", b"", b"", (0, 16, 11), {})
    # A unit past the section's end, or whose sizes are not a unit's: given up, nothing read.
    assert _native.dwarf_definitions(b"\0" * 16, 0, b"", b"", b"", b"", (0, 64, 11, 0, 4, 8, 5), {}) is None
    assert _native.dwarf_definitions(b"\0" * 16, 0, b"", b"", b"", b"", (0, 16, 11, 0, 3, 8, 5), {}) is None


def test_the_scanner_under_sanitizers(tmp_path):
    """native/fuzz/dwscan_fuzz.c: the fixture's units (the same count of names as the Python scanner
    gives), then damaged copies of them, under ASan and UBSan."""
    path = build_cxx_fixture("cxx_shop", "-O0")
    debuginfo = DebugInfo.open(str(path))
    scanner = _scanner(debuginfo)
    units = read_unit_headers(debuginfo)
    sections = [section_data(debuginfo.dwarf.needed_section("debug_info_sec")), scanner.abbrev, scanner.strtab,
                scanner.line_strtab, scanner.str_offsets]
    data = struct.pack("<6Q", len(units), *(len(s) for s in sections))
    data += b"".join(struct.pack("<7Q", *unit) for unit in units) + b"".join(sections)
    (tmp_path / "input").write_bytes(data)
    names = sum(len(list(scanner.python_definitions(unit))) for unit in units)
    instances = sum(len(dies) for cu in debuginfo.dwarf.iter_CUs()
                    for dies in (python_instances_by_origin(debuginfo, cu) or {}).values())
    assert instances  # (C++ constructors: out-of-line copies of an abstract one, even at -O0)
    exe = sanitized_driver(tmp_path, ["fuzz/dwscan_fuzz.c", "dwscan.c"])
    for seed in ("1", "2"):
        out = run_sanitized(exe, str(tmp_path / "input"), "3000", seed)
        assert out == f"definitions {names} given up 0\ninstances {instances} given up 0\nok 3000\n"


@pytest.mark.parametrize("which", ["fixture", "libstdc++"])
def test_funcs_lists_the_same_rows(monkeypatch, which):
    """funcs' rows (every symbol demangled, and the functions inlined at every call, from the name
    index) are the same, in the same order, with the native scanner as with the Python one."""
    from probectl.debuginfo.dwarf.funcnames import function_rows

    if which == "libstdc++":
        if not LIBSTDCXX_DBG.exists():
            missing("libstdc++6-12-dbg is not installed")
        path = str(LIBSTDCXX_DBG)
    else:
        path = str(build_cxx_fixture("cxx_shop", "-O2"))
    monkeypatch.setenv("PROBECTL_NO_CACHE", "1")
    native = function_rows(path)
    monkeypatch.setattr(UnitScanner, "definitions", UnitScanner.python_definitions)
    python = function_rows(path)
    assert list(native.items()) == list(python.items())
    if which == "libstdc++":
        assert sum(1 for row in native.values() if row == (0, 0)) > 30  # (inlined at every call, with code: 37)


def test_damaged_units_are_answered_as_the_python_scanner_answers(tmp_path):
    """Copies of a fixture with bytes of .debug_info changed at random: for each unit, the native
    scanner gives it up or lists what the Python scanner lists from the same file (where that one
    reads the unit without an error)."""
    import random

    from probectl.debuginfo.elf import ElfFile

    path = build_cxx_fixture("cxx_shop", "-O0")
    original = path.read_bytes()
    sec = next(s for s in ElfFile(str(path)).sections if s.name == ".debug_info")
    rng = random.Random(23)
    answered = compared = 0
    for i in range(150):
        data = bytearray(original)
        for _ in range(rng.randint(1, 6)):
            data[sec.offset + rng.randrange(sec.size)] = rng.randrange(256)
        damaged = tmp_path / f"damaged{i}"
        damaged.write_bytes(bytes(data))
        try:
            debuginfo = DebugInfo.open(str(damaged))
            units = read_unit_headers(debuginfo) or []
        except DebugInfoError:
            continue
        try:
            scanner = _scanner(debuginfo)
            for unit in units:
                native = _native_definitions(scanner, unit)
                if native is None:
                    continue
                answered += 1
                try:
                    python = list(scanner.python_definitions(unit))
                except Exception:  # (the reference fails on this damage: nothing to compare)
                    continue
                compared += 1
                assert native == python, (i, unit)
        finally:
            debuginfo.close()
            damaged.unlink()
    assert compared > 50, (answered, compared)


# --- inline instances by origin ---------------------------------------------------------------------


def _native_instances(debuginfo: DebugInfo, cu):
    """``_native.dwarf_instances`` of ``cu`` as ``dieindex.instances_by_origin`` calls it: the unit's
    bytes alone."""
    h = cu.header
    unit = (0, cu.size, cu.cu_die_offset - cu.cu_offset, h.abbrev_offset, h.offset_size, h.address_size, h.version)
    return _native.dwarf_instances(debuginfo.cu_bytes(cu), 0, debuginfo.section_bytes("debug_abbrev_sec"), unit,
                                   cu.cu_offset)


def _assert_same_instances(path) -> int:
    """Every unit of ``path``'s DWARF scanned natively as the Python scanner scans it, in the unit's
    bytes alone and in the whole section (mapped, or in memory); none given up. The count of instances."""
    debuginfo = DebugInfo.open(str(path))
    try:
        buffer, base = _scanner(debuginfo).native_info
        total = 0
        for cu in debuginfo.dwarf.iter_CUs():
            native = _native_instances(debuginfo, cu)
            assert native is not None, f"unit at 0x{cu.cu_offset:x} given up"
            python = python_instances_by_origin(debuginfo, cu)
            assert list(native.items()) == list(python.items()), f"unit at 0x{cu.cu_offset:x}"
            whole = _native.dwarf_instances(buffer, base, debuginfo.section_bytes("debug_abbrev_sec"),
                                            tuple(cu.header[:7]), 0)
            assert whole == native
            assert instances_by_origin(debuginfo, cu) == native
            total += sum(len(dies) for dies in native.values())
        return total
    finally:
        debuginfo.close()


@pytest.mark.parametrize("extra", [(), ("-gdwarf-4",), ("-gz",)])
def test_instances_of_c_fixtures(extra):
    assert _assert_same_instances(build_fixture("dwarf_inline", "-O2", extra))
    _assert_same_instances(build_fixture("dwarf_structs", "-O2", extra))


@pytest.mark.parametrize("opt", ["-O0", "-O2"])
def test_instances_of_cxx_fixtures(opt):
    counts = [_assert_same_instances(build_cxx_fixture(name, opt))
              for name in ("cxx_shop", "cxx_containers", "dwarf_namespaces")]
    assert counts[1] > (1000 if opt == "-O2" else 0)


@pytest.mark.parametrize("opt", ["0", "3"])
def test_instances_of_rust_fixture(opt):
    assert _assert_same_instances(build_rust_fixture("rust_shop", opt)) > 10000


@pytest.mark.parametrize("gcflags", ["", "all=-N -l"])
def test_instances_of_go_fixture(gcflags):
    """Go refers to an abstract origin by its section offset (DW_FORM_ref_addr): kept when it is in the
    instance's unit. (The unoptimised build inlines nothing.)"""
    count = _assert_same_instances(build_go_fixture("go_target", gcflags))
    assert count > 1000 if not gcflags else count == 0


def test_instances_of_libstdcxx_dbg():
    if not LIBSTDCXX_DBG.exists():
        missing("libstdc++6-12-dbg is not installed")
    assert _assert_same_instances(LIBSTDCXX_DBG) > 3000


def test_instances_the_native_scanner_gives_up_are_the_python_scanners(monkeypatch):
    path = build_cxx_fixture("cxx_containers", "-O2")
    debuginfo = DebugInfo.open(str(path))
    cu = next(debuginfo.dwarf.iter_CUs())
    monkeypatch.setattr(_native, "dwarf_instances", lambda *args: None)
    found = instances_by_origin(debuginfo, cu)
    assert found and found == python_instances_by_origin(debuginfo, cu)


def test_instances_bad_arguments_are_refused():
    with pytest.raises(ValueError):
        _native.dwarf_instances(b"\0" * 16, 17, b"", (0, 16, 11, 0, 4, 8, 5), 0)
    with pytest.raises(TypeError):
        _native.dwarf_instances(b"", 0, b"", (0, 16, 11), 0)
    with pytest.raises(OverflowError):
        _native.dwarf_instances(b"", 0, b"", (0, 16, 11, 0, 4, 8, 5), -1)
    # A unit past the data's end, whose sizes are not a unit's, or whose first DIE is before it: given up.
    assert _native.dwarf_instances(b"\0" * 16, 0, b"", (0, 64, 11, 0, 4, 8, 5), 0) is None
    assert _native.dwarf_instances(b"\0" * 16, 0, b"", (0, 16, 11, 0, 3, 8, 5), 0) is None
    assert _native.dwarf_instances(b"\0" * 16, 0, b"", (12, 16, 11, 0, 4, 8, 5), 0) is None
    # (a unit without DIEs: none)
    assert _native.dwarf_instances(b"\0" * 16, 0, b"\0", (0, 16, 11, 0, 4, 8, 5), 0) == {}


def _unit_with_instances(debuginfo: DebugInfo):
    return max(debuginfo.dwarf.iter_CUs(), key=lambda cu: len(python_instances_by_origin(debuginfo, cu) or {}))


def _damaged(monkeypatch, debuginfo: DebugInfo, data: bytes):
    """Both scanners read ``data`` as the bytes of every unit (they take them from ``cu_bytes``)."""
    monkeypatch.setattr(debuginfo, "cu_bytes", lambda cu: data)


def test_instances_of_damaged_units_are_the_python_scanners(monkeypatch):
    """A unit's bytes changed at random, and the unit cut short at many places (its header's end moved):
    the native scan gives it up or finds what the Python scanner finds in the same bytes; it never
    answers where that one fails."""
    import random

    debuginfo = DebugInfo.open(str(build_cxx_fixture("cxx_containers", "-O2")))
    cu = _unit_with_instances(debuginfo)
    original = debuginfo.cu_bytes(cu)
    first_die = cu.cu_die_offset - cu.cu_offset
    rng = random.Random(23)
    answered = given_up = 0

    def compare(unit):
        nonlocal answered, given_up
        native = _native_instances(debuginfo, unit)
        python = python_instances_by_origin(debuginfo, unit)
        if native is None:
            given_up += 1
        else:
            answered += 1
            assert python is not None and list(native.items()) == list(python.items())

    for _ in range(300):
        data = bytearray(original)
        for _ in range(rng.randint(1, 6)):
            data[rng.randrange(first_die, len(data))] = rng.randrange(256)
        _damaged(monkeypatch, debuginfo, bytes(data))
        compare(cu)
    monkeypatch.undo()
    for cut in range(first_die, cu.size, max(1, cu.size // 300)):
        compare(Unit(debuginfo.dwarf, cu.header._replace(end=cu.cu_offset + cut)))
    assert answered > 50 and given_up > 50, (answered, given_up)


def _children_start(debuginfo: DebugInfo, cu) -> tuple[CUScanner, dict, int]:
    """The unit's scanner and abbreviation table, and where the unit DIE's children start."""
    h = cu.header
    table = debuginfo.abbrev_table((h.abbrev_offset, h.offset_size, h.address_size, h.version))
    scanner = CUScanner(debuginfo.cu_bytes(cu), b"", b"", b"", h.offset_size, h.address_size, h.version)
    at = dieindex._children_start(cu, table, scanner)
    assert at is not None
    return scanner, table, at


def test_instances_of_a_unit_with_a_bad_abbreviation_code(monkeypatch):
    """The unit DIE's first child with a code its table lacks (a C unit's table: fewer than 127 codes,
    each one byte)."""
    debuginfo = DebugInfo.open(str(build_fixture("dwarf_inline", "-O2")))
    cu = _unit_with_instances(debuginfo)
    assert python_instances_by_origin(debuginfo, cu)
    _scanner_, table, at = _children_start(debuginfo, cu)
    unknown = max(table) + 1
    assert unknown < 0x80 and debuginfo.cu_bytes(cu)[at] < 0x80
    data = bytearray(debuginfo.cu_bytes(cu))
    data[at] = unknown
    _damaged(monkeypatch, debuginfo, bytes(data))
    assert _native_instances(debuginfo, cu) is None and python_instances_by_origin(debuginfo, cu) is None


def test_instances_of_a_unit_whose_sibling_points_backwards(monkeypatch):
    """A DIE the walk passes (a class, with its members) by its DW_AT_sibling, which points at itself."""
    debuginfo = DebugInfo.open(str(build_cxx_fixture("cxx_containers", "-O2")))
    cu = _unit_with_instances(debuginfo)
    scanner, table, pos = _children_start(debuginfo, cu)
    data = bytearray(debuginfo.cu_bytes(cu))
    while True:  # (the unit DIE's children, to the first with children and a sibling of form ref4)
        die = pos
        code, pos = read_uleb128(data, pos)
        assert code, "no DIE with a sibling reference"
        tag, children, specs = table[code][:3]
        sibling_at = None
        for spec in specs:
            if spec[0] == AT_SIBLING and spec[1] == 0x13:
                sibling_at = pos
            pos, _ = scanner.read_die(pos, [spec], 0, False)
        if children and sibling_at is not None and tag not in (0x2E, 0x1D, 0x0B, 0x39, 0x1E):
            break
        if children:
            pos = dieindex.CUScanner._skip_children(scanner, pos, cu.size, table, 0)
    data[sibling_at:sibling_at + 4] = die.to_bytes(4, "little")
    _damaged(monkeypatch, debuginfo, bytes(data))
    assert _native_instances(debuginfo, cu) is None and python_instances_by_origin(debuginfo, cu) is None
