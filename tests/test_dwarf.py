"""The DWARF layer: functions, inline instances, line tables and perf's line rules.

Most tests are differential: the same fixture binary (built at -O0 and -O2) goes through
``perf probe -D/-L`` and through probectl's DWARF layer, and the addresses and line numbers must
agree. Where perf fails (functions split into ``.cold`` parts), the expectation comes from the
binary itself (ELF symbols) instead. ``PerfOracle``, ``fixture_bins`` and ``probe_points`` are
shared with test_location.py and test_types.py.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from probectl.debuginfo.dwarf import lines as L
from probectl.debuginfo.dwarf import DebugInfo
from probectl.debuginfo.elf import ElfFile
from probectl.resolve.dwarf_fetch import expand_variables, fetch_variable
from probectl.debuginfo.dwarf.variables import best_scope
from probectl.errors import DebugInfoError, ValueTooWideError
from probectl.events import FetchArg
from probectl.spec import SpecialVar, Variable, parse_probe

from tests.helpers import FIXTURES, ROOT, build_fixture, build_static_pair

LIBC = "/usr/lib/x86_64-linux-gnu/libc.so.6"
OPTS = ("-O0", "-O2")


# --- shared helpers ---------------------------------------------------------------------------


class Bins:
    """Fixture binaries and their DebugInfo, built and opened once per session."""

    def __init__(self):
        self._di: dict[Path, DebugInfo] = {}

    def path(self, name: str, opt: str = "-O0", extra: tuple[str, ...] = ()) -> Path:
        if name == "dwarf_static":
            return build_static_pair(opt, extra)
        return build_fixture(name, opt, extra)

    def di(self, name: str, opt: str = "-O0", extra: tuple[str, ...] = ()) -> DebugInfo:
        p = self.path(name, opt, extra)
        if p not in self._di:
            self._di[p] = DebugInfo.open(p)
        return self._di[p]


@pytest.fixture(scope="session")
def fixture_bins() -> Bins:
    if shutil.which("gcc") is None:
        pytest.skip("gcc is needed to build the fixtures")
    return Bins()


class PerfOracle:
    """``perf probe`` run offline, each distinct command once per session."""

    def __init__(self, perf: str):
        self.perf = perf
        self._cache: dict[tuple, subprocess.CompletedProcess] = {}

    def run(self, *args: str) -> subprocess.CompletedProcess:
        if args not in self._cache:
            self._cache[args] = subprocess.run([self.perf, "probe", *args], capture_output=True, text=True)
        return self._cache[args]

    def definitions(self, binary, definition: str) -> tuple[list[tuple[int, list[FetchArg]]], str]:
        """(file offset, arguments) of each probe perf would add, and perf's stderr."""
        out = self.run("-x", str(binary), "-D", definition)
        found = []
        for line in out.stdout.splitlines():
            if line.startswith(("p:", "r:")):
                parts = line.split()
                offset = int(parts[1].rsplit(":", 1)[1], 16)
                found.append((offset, [FetchArg.parse(a) for a in parts[2:]]))
        return found, out.stderr

    def lines(self, binary, spec: str) -> tuple[list[int], str]:
        """The numbered lines of ``perf probe -L`` (relative in function mode)."""
        out = self.run("-x", str(binary), "-L", spec)
        return sorted(int(x) for x in re.findall(r"^\s+(\d+)  ", out.stdout, re.M)), out.stderr

    def variables(self, binary, point: str, externs: bool = False) -> list[tuple[str, list[tuple[str, str]]]]:
        """``perf probe -V``: (``func+off``, [(type, name)]) per address."""
        args = ["-x", str(binary), "-V", point] + (["--externs"] if externs else [])
        out = self.run(*args)
        blocks: list[tuple[str, list[tuple[str, str]]]] = []
        for line in out.stdout.splitlines():
            m = re.match(r"^\t@<(.+)>$", line)
            if m:
                blocks.append((m.group(1), []))
            elif line.startswith("\t\t") and blocks:
                typ, _, name = line[2:].rpartition("\t")
                blocks[-1][1].append((typ, name))
        return blocks


@pytest.fixture(scope="session")
def perf_oracle(perf_bin) -> PerfOracle:
    return PerfOracle(perf_bin)


def probe_points(di: DebugInfo, point_text: str, with_args: bool = True) -> list[tuple[int, object]]:
    """(address, scope DIE) of each probe point, with perf's rules (a minimal resolver):
    ``FUNC`` → each instance's entry (prologue skipped in unoptimized CUs when arguments are
    fetched), ``FUNC:RLN`` → the line's addresses, ``SRC:ALN`` → the line in every CU."""
    point = parse_probe(point_text).point
    out = []
    if point.function and not point.line:
        for fn in di.probe_functions(point.function, point.source):
            addr = fn.entry
            if with_args and not fn.inlined and not di.cu_is_optimized(fn.cu):
                addr = L.skip_prologue(di, fn)
            out.append((addr, fn.die))
    elif point.function:
        seen = set()
        for fn in di.find_functions(point.function, point.source):
            for p in L.function_line(di, fn, point.line):
                if p.address not in seen:
                    seen.add(p.address)
                    out.append((p.address, best_scope(di, p.address, function=point.function)))
    else:
        for p in L.source_line(di, point.source, point.line):
            out.append((p.address, best_scope(di, p.address, file=p.file, line=p.line)))
    return out


WIDE_LEFT_OUT = "(left out: wider than 64 bits)"


def probectl_definitions(di: DebugInfo, binary, definition: str) -> list[tuple[int, list[FetchArg]]]:
    """What perf -D prints, computed with probectl's DWARF layer."""
    spec = parse_probe(definition)
    elf = ElfFile(binary)
    found = []
    for address, scope in probe_points(di, spec.point.text, with_args=bool(spec.args)):
        args = []
        for arg in spec.args:
            expr = arg.expr
            if isinstance(expr, SpecialVar):
                for name in expand_variables(di, scope, address, params_only=(expr.name == "params")):
                    try:
                        r = fetch_variable(di, scope, address, Variable(name))
                    except ValueTooWideError:
                        # $vars/$params leave out a value wider than 64 bits (perf keeps its first 8
                        # bytes as x64): stand for it with perf's text so the comparison shows it
                        args.append(FetchArg(WIDE_LEFT_OUT, name, "x64"))
                        continue
                    args.append(FetchArg(r.fetch, r.default_name, r.type))
            else:
                r = fetch_variable(di, scope, address, expr, arg.type)
                args.append(FetchArg(r.fetch, arg.name or r.default_name, r.type))
        found.append((elf.vaddr_to_offset(address), args))
    return found


def render(defs: list[tuple[int, list[FetchArg]]]) -> list[str]:
    return [f"0x{off:x} " + " ".join(a.render() for a in args) for off, args in defs]


# --- functions ------------------------------------------------------------------------------------


@pytest.mark.parametrize("opt", OPTS)
def test_static_functions_in_two_cus(fixture_bins, opt):
    di = fixture_bins.di("dwarf_static", opt)
    found = di.find_functions("helper")
    assert [os.path.basename(f.decl_file) for f in found] == ["dwarf_static_a.c", "dwarf_static_b.c"]
    assert all(f.entry is not None and not f.external for f in found)
    only_b = di.find_functions("helper", src="dwarf_static_b.c")
    assert len(only_b) == 1 and only_b[0].entry == found[1].entry
    assert di.find_functions("helper", src="nosuch.c") == []
    elf = ElfFile(fixture_bins.path("dwarf_static", opt))
    assert sorted(f.entry for f in found) == sorted(s.value for s in elf.find_functions("helper"))


@pytest.mark.perf
@pytest.mark.parametrize("opt", OPTS)
@pytest.mark.parametrize("definition", ["helper x", "helper@dwarf_static_b.c x", "helper_b_entry x"])
def test_static_functions_match_perf(fixture_bins, perf_oracle, opt, definition):
    binary = fixture_bins.path("dwarf_static", opt)
    theirs, err = perf_oracle.definitions(binary, definition)
    assert theirs, err
    assert render(probectl_definitions(fixture_bins.di("dwarf_static", opt), binary, definition)) == render(theirs)


def test_glob_and_linkage_names(fixture_bins):
    di = fixture_bins.di("dwarf_structs", "-O2")
    names = {f.name for f in di.find_functions("*_*")}
    assert {"check_bits", "by_value", "vla_sum", "use_globals", "print_layout"} <= names
    assert "paint" not in names
    assert di.function_names("p*") == ["paint", "print_layout"]
    assert di.find_functions("nosuch_function") == []


@pytest.mark.perf
@pytest.mark.parametrize("opt", OPTS)
@pytest.mark.parametrize("definition", ["square v", "clamp v", "process data n"])
def test_inline_instances_match_perf(fixture_bins, perf_oracle, opt, definition):
    binary = fixture_bins.path("dwarf_inline", opt)
    di = fixture_bins.di("dwarf_inline", opt)
    theirs, err = perf_oracle.definitions(binary, definition)
    mine = probectl_definitions(di, binary, definition)
    if not theirs:
        # perf cannot place probes in a function split into a .cold part ("Failed to find symbol
        # at 0x..."): check that every instance we found is inside a real function instead.
        assert "Failed to find symbol" in err, err
        elf = ElfFile(binary)
        assert mine and all(elf.symbol_at(elf.offset_to_vaddr(off)) is not None for off, _ in mine)
        assert all(args for _, args in mine)
        return
    assert render(mine) == render(theirs)


def test_inline_instances_carry_call_sites(fixture_bins):
    di = fixture_bins.di("dwarf_inline", "-O2")
    (square,) = di.find_functions("square")
    assert square.abstract and square.entry is None
    insts = di.instances(square)
    assert len(insts) >= 2
    callers = set()
    for inst in insts:
        # gcc may put the entry (DW_AT_entry_pc) just before the instance's first range.
        assert inst.inlined and inst.entry is not None and inst.ranges
        assert os.path.basename(inst.call_file) == "dwarf_inline.c" and inst.call_line > 0
        callers.add(di.function_at(inst.entry).name)
    assert callers == {"process", "rare_path"}
    chain = di.inline_chain(insts[0].entry)
    assert [f.name for f in chain][-1] == "square" and not chain[0].inlined


def test_cold_part_is_in_ranges_but_not_the_entry(fixture_bins):
    binary = fixture_bins.path("dwarf_inline", "-O2")
    di = fixture_bins.di("dwarf_inline", "-O2")
    elf = ElfFile(binary)
    cold = [s for s in elf.functions() if s.name == "rare_path.cold"]
    if not cold:
        pytest.skip("this gcc did not split rare_path into a .cold part")
    (fn,) = di.find_functions("rare_path")
    (hot,) = elf.find_functions("rare_path")
    assert len(fn.ranges) == 2
    assert fn.entry == hot.value  # the first DW_AT_ranges entry, not the lowest address
    assert fn.contains(cold[0].value) and di.function_at(cold[0].value).name == "rare_path"


def test_function_index_agrees_with_pyelftools(fixture_bins):
    di = fixture_bins.di("dwarf_structs", "-O2")
    index = di.name_index()
    expected = {}
    for cu in di.compile_units():
        for die in cu.get_top_DIE().iter_children():
            if die.tag == "DW_TAG_subprogram" and "DW_AT_declaration" not in die.attributes:
                expected.setdefault(di.function(die).name, []).append((cu.cu_offset, die.offset))
    assert index == expected
    assert {"counter", "hidden", "gbuf", "global_widget"} <= set(di.variable_index())


def test_cu_by_address_without_aranges(fixture_bins):
    di = fixture_bins.di("dwarf_static", "-O2")
    for fn in di.find_functions("*"):
        if fn.entry is None:
            continue
        via_aranges = di.cu_at(fn.entry)
        via_ranges = next(off for lo, hi, off in di._cu_ranges() if lo <= fn.entry < hi)
        assert via_aranges.cu_offset == via_ranges == fn.cu.cu_offset


def _aranges_set(cu_offset: int, ranges: list[tuple[int, int]], address_size: int = 8, segment_size: int = 0,
                 dwarf64: bool = False, at: int = 0) -> bytes:
    """One .debug_aranges set as a producer writes it, starting ``at`` bytes into the section."""
    import struct

    a = "Q" if address_size == 8 else "I"
    body = struct.pack("<H", 2) + struct.pack("<Q" if dwarf64 else "<I", cu_offset) + bytes([address_size, segment_size])
    head = 12 if dwarf64 else 4
    pad = (-(at + head + len(body))) % (2 * address_size)
    body += b"\0" * pad + b"".join(struct.pack("<" + a + a, lo, n) for lo, n in ranges) + bytes(4 * address_size)
    return (b"\xff\xff\xff\xff" + struct.pack("<Q", len(body)) if dwarf64 else struct.pack("<I", len(body))) + body


def test_parse_aranges_of_every_shape():
    """32- and 64-bit sets, several ranges, a zero-length one, 4-byte addresses, a set with segment
    selectors (skipped), and a truncated last set (the ranges before it kept)."""
    from probectl.debuginfo.dwarf.dieindex import parse_aranges

    data = b""
    for args, kw in (((0x10, [(0x3000, 0x10), (0x1000, 0x20), (0x5000, 0)]), {}),
                     ((0x80, [(0x2000, 8)]), {"dwarf64": True}),
                     ((0x90, [(0x9000, 4)]), {"address_size": 4}),
                     ((0xa0, [(0x7000, 4)]), {"segment_size": 2})):
        data += _aranges_set(*args, **kw, at=len(data))
    whole = ([0x1000, 0x2000, 0x3000, 0x9000], [0x1020, 0x2008, 0x3010, 0x9004], [0x10, 0x80, 0x10, 0x90])
    assert parse_aranges(data) == whole
    truncated = data + _aranges_set(0xb0, [(0xb000, 4)], at=len(data))[:-9]
    assert parse_aranges(truncated) == whole
    assert parse_aranges(data + b"\x01\x02") == whole  # (a tail too short for a header)


def test_dwarf4_and_compressed_sections(fixture_bins):
    five = fixture_bins.di("dwarf_structs", "-O2")
    for extra in (("-gdwarf-4",), ("-gz",), ("-gz=zlib-gnu",)):
        di = fixture_bins.di("dwarf_structs", "-O2", extra)
        if extra == ("-gz",):
            sec = di.elffile.get_section_by_name(".debug_info")
            assert sec["sh_flags"] & 0x800, "gcc -gz should produce SHF_COMPRESSED sections"
            # inflated as it is read, to the bytes pyelftools inflates
            assert type(di.dwarf.debug_info_sec.stream).__name__ == "InflatingSection"
            for name in ("debug_info_sec", "debug_abbrev_sec", "debug_line_sec"):
                theirs = di.elffile.get_dwarf_info().__dict__[name]
                assert di.section_bytes(name) == theirs.stream.getvalue(), name
        elif extra == ("-gz=zlib-gnu",):
            assert di.elffile.get_section_by_name(".zdebug_info") is not None
        else:
            assert di.compile_units()[0].header.version == 4
        for name in ("paint", "vla_sum", "main"):
            (a,) = five.find_functions(name)
            (b,) = di.find_functions(name)
            assert L.probeable_lines(di, b) == L.probeable_lines(five, a)


# --- lines ---------------------------------------------------------------------------------------


def _function_names(di: DebugInfo) -> list[str]:
    return sorted(n for n in di.name_index() if len(di.find_functions(n)) == 1)


@pytest.mark.perf
@pytest.mark.parametrize("opt", OPTS)
@pytest.mark.parametrize("fixture", ["dwarf_structs", "dwarf_inline", "dwarf_static"])
def test_probeable_lines_match_perf(fixture_bins, perf_oracle, fixture, opt):
    binary = fixture_bins.path(fixture, opt)
    di = fixture_bins.di(fixture, opt)
    compared = 0
    for name in _function_names(di):
        (fn,) = di.find_functions(name)
        theirs, err = perf_oracle.lines(binary, name)
        mine = [ln - fn.decl_line for ln in L.probeable_lines(di, fn)]
        assert mine == theirs, (name, err)
        compared += 1
    assert compared >= 2


@pytest.mark.perf
@pytest.mark.parametrize("opt", OPTS)
def test_function_lines_match_perf(fixture_bins, perf_oracle, opt):
    """Every line of every function: the same addresses as perf, or the same refusal."""
    binary = fixture_bins.path("dwarf_structs", opt)
    di = fixture_bins.di("dwarf_structs", opt)
    elf = ElfFile(binary)
    for name in ("paint", "vla_sum", "check_bits", "use_globals"):
        (fn,) = di.find_functions(name)
        last = max(L.probeable_lines(di, fn)) - fn.decl_line
        for rln in range(1, last + 1):
            theirs, err = perf_oracle.definitions(binary, f"{name}:{rln}")
            try:
                mine = [elf.vaddr_to_offset(p.address) for p in L.function_line(di, fn, rln)]
            except L.LineSharedError as exc:
                assert "sharing the address" in err
                m = re.search(r"Please try to probe at (\S+):(\d+) instead", err)
                assert m and exc.suggestion == (m.group(1), int(m.group(2)))
                continue
            assert mine == [off for off, _ in theirs], (name, rln, err)


@pytest.mark.perf
def test_source_lines_match_perf(fixture_bins, perf_oracle):
    binary = fixture_bins.path("dwarf_static", "-O0")
    di = fixture_bins.di("dwarf_static", "-O0")
    elf = ElfFile(binary)
    for point in ("dwarf_static_b.c:12", "dwarf_static_a.c:16", "dwarf_static_b.c:20", "static_a.c:22"):
        src, line = point.split(":")
        theirs, err = perf_oracle.definitions(binary, point)
        mine = [elf.vaddr_to_offset(p.address) for p in L.source_line(di, src, int(line))]
        assert mine == [off for off, _ in theirs], (point, err)
    assert L.source_files(di, "static_b.c") == [str(FIXTURES / "dwarf_static_b.c")]
    assert L.probeable_file_lines(di, "dwarf_static_b.c", 10, 14) == {str(FIXTURES / "dwarf_static_b.c"):
                                                                       [10, 12, 13, 14]}


def _same_funclines_per_line(di: DebugInfo, cu, lines=None) -> int:
    """For each line, the declaration lines and call sites found from the unit's bytes
    (``_funclines_of_line``: only the DIEs of that line parsed) are those of the walk of every DIE,
    in the same order; the number of lines compared."""
    from probectl.debuginfo.dwarf.dieindex import inline_sites

    assert inline_sites(di, cu) is not None  # (else the walk itself answers)
    walked = L._cu_funclines(di, cu)
    every = sorted({t[1] for t in walked})
    for line in (every if lines is None else lines(every)) + [0, 1, max(every, default=0) + 1]:
        assert L._funclines_of_line(di, cu, line) == [t for t in walked if t[1] == line], line
    return len(every)


@pytest.mark.parametrize("opt", OPTS)
@pytest.mark.parametrize("fixture", ["dwarf_structs", "dwarf_inline", "dwarf_static"])
def test_function_lines_of_one_line_equal_the_walk(fixture_bins, fixture, opt):
    di = fixture_bins.di(fixture, opt)
    assert sum(_same_funclines_per_line(di, cu) for cu in di.compile_units()) >= 3


@pytest.mark.vmlinux
def test_kernel_function_lines_of_one_line_equal_the_walk():
    """tcp.c: 14k DIEs below its functions, 2,489 declaration lines and inline call sites."""
    import random

    from tests.helpers import kernel_testdata

    di = DebugInfo.open(kernel_testdata("vmlinux"))
    (fn,) = di.find_functions("tcp_sendmsg_locked")
    sample = lambda every: random.Random(16).sample(every, 40) + [fn.decl_line, fn.decl_line + 207]  # noqa: E731
    assert _same_funclines_per_line(di, fn.cu, sample) > 100


@pytest.mark.perf
@pytest.mark.parametrize("fixture", ["dwarf_structs", "dwarf_inline", "dwarf_static"])
def test_prologue_skip_matches_perf(fixture_bins, perf_oracle, fixture):
    binary = fixture_bins.path(fixture, "-O0")
    di = fixture_bins.di(fixture, "-O0")
    elf = ElfFile(binary)
    for name in _function_names(di):
        (fn,) = di.find_functions(name)
        if fn.abstract or not fn.ranges:
            continue
        assert not di.cu_is_optimized(fn.cu)
        out = perf_oracle.run("-x", str(binary), "-D", f"{name} $params")
        m = re.search(r"Probe on address 0x([0-9a-f]+) to force", out.stderr)
        place = re.search(r":0x([0-9a-f]+)", out.stdout)
        if not place:
            continue  # no parameters: perf adds nothing
        assert m and int(m.group(1), 16) == elf.vaddr_to_offset(fn.entry)
        assert int(place.group(1), 16) == elf.vaddr_to_offset(L.skip_prologue(di, fn)), name


def test_optimized_cu_detection(fixture_bins):
    assert not fixture_bins.di("dwarf_structs", "-O0").cu_is_optimized(
        fixture_bins.di("dwarf_structs", "-O0").compile_units()[0])
    assert fixture_bins.di("dwarf_structs", "-O2").cu_is_optimized(
        fixture_bins.di("dwarf_structs", "-O2").compile_units()[0])


def test_address_to_line_round_trip(fixture_bins):
    di = fixture_bins.di("dwarf_inline", "-O0")
    (fn,) = di.find_functions("process")
    checked = 0
    for ln in L.probeable_lines(di, fn)[1:]:
        try:
            points = L.function_line(di, fn, ln - fn.decl_line)
        except L.LineSharedError:
            continue  # a call site whose address starts the inlined body (perf refuses it too)
        for p in points:
            assert L.address_to_line(di, p.address) == (fn.decl_file, ln)
            checked += 1
    assert checked >= 5
    assert L.address_to_line(di, fn.entry) == (fn.decl_file, fn.decl_line)


def _same_sections(path) -> None:
    """probectl's own opening of a file's DWARF gives pyelftools' sections, byte for byte."""
    from probectl.debuginfo.dwarf.mappedelf import MappedELFFile
    from probectl.debuginfo.dwarf.sections import DWARF_SECTIONS, open_dwarf
    from probectl.debuginfo.dwarf.units import section_data

    with open(path, "rb") as f:
        mine = open_dwarf(f)
        assert mine.elffile is None, "an x86-64 file with plain sections is opened without ELFFile"
        theirs = MappedELFFile(f).get_dwarf_info(relocate_dwarf_sections=False)
        assert (mine.little_endian, mine.address_size) == (theirs.config.little_endian,
                                                           theirs.config.default_address_size)
        for arg in DWARF_SECTIONS:
            a, b = getattr(mine.dwarf, arg), getattr(theirs, arg)
            assert (a is None) == (b is None), arg
            if a is not None:
                assert (a.name, a.size, a.global_offset, a.address) == (b.name, b.size, b.global_offset, b.address)
                assert section_data(a) == section_data(b), arg


@pytest.mark.parametrize("opt", OPTS)
def test_dwarf_sections_opened_without_elffile_equal_elffiles(opt):
    _same_sections(build_fixture("dwarf_structs", opt))


@pytest.mark.parametrize("size", [100, 70_000])
def test_copied_section_reads_as_its_bytes_do(tmp_path, size):
    """A section read from the file when asked (sections.CopiedSection: a piece at a time, or a small
    one whole) reads as a BytesIO of its bytes does, before and after all its bytes are asked for;
    once its file is closed, a read fails, never reads another file."""
    import io
    import random

    from probectl.debuginfo.dwarf.sections import CopiedSection

    data = random.Random(size).randbytes(size + 300)
    path = tmp_path / "file"
    path.write_bytes(data)
    with open(path, "rb") as f:
        section, expected = CopiedSection(f, 150, size), io.BytesIO(data[150:150 + size])
        moves = random.Random(1)
        for step in range(200):
            if step == 120:
                assert section.getvalue() == expected.getvalue()
            if moves.random() < 0.4:
                whence, offset = moves.choice([(os.SEEK_SET, moves.randrange(size + 50)),
                                               (os.SEEK_CUR, moves.randrange(-20, 500)), (os.SEEK_END, -7)])
                offset = max(offset, -expected.tell()) if whence == os.SEEK_CUR else offset
                assert section.seek(offset, whence) == expected.seek(offset, whence)
            n = moves.choice([-1, 0, 1, 12, 256, 5000])
            assert section.read(n) == expected.read(n) and section.tell() == expected.tell()
    unread = CopiedSection(open(path, "rb"), 0, size)
    unread._file.close()
    with pytest.raises(ValueError):
        unread.read(10)


def test_debug_information_reads_the_binary_its_caller_opened(monkeypatch):
    """DebugInfo.open given the binary already opened (the resolver's ElfFile) reads it for its
    sections, symbols and call frames, opens it no more, and leaves it open when it closes."""
    binary = build_fixture("uprobe_target")
    with ElfFile(binary) as elf:
        opened = []
        real_init = ElfFile.__init__
        monkeypatch.setattr(ElfFile, "__init__", lambda self, path: opened.append(path) or real_init(self, path))
        di = DebugInfo.open(binary, binary_elf=elf)
        assert di.binary_elf() is elf and di.debug_elf() is elf
        fn = di.find_functions("add_ints")[0]
        assert di.call_frames().cfa_at(fn.entry) is not None
        di.close()
        assert opened == []
        assert elf.find_functions("add_ints"), "the caller's ElfFile is still open"


@pytest.mark.vmlinux
def test_kernel_dwarf_sections_opened_without_elffile_equal_elffiles():
    from tests.helpers import kernel_testdata

    _same_sections(kernel_testdata("vmlinux"))


def _units_found_by_offset(path) -> None:
    """The units are pyelftools' units; a reference is read from its unit alone (the one pyelftools'
    own search finds), without reading the units before it."""
    from tests.helpers import pyelftools_dwarfinfo
    from probectl.debuginfo.dwarf.dieindex import read_unit_headers

    di = DebugInfo.open(path)
    fresh = DebugInfo.open(path)
    theirs = pyelftools_dwarfinfo(di)
    cus = list(di.dwarf.iter_CUs())
    last = list(cus[-1].iter_DIEs())[-1]
    assert fresh.dwarf.get_DIE_from_refaddr(last.offset).tag == last.tag
    assert len(fresh.dwarf._units) == 1
    assert len(cus) >= 2
    assert [(cu.cu_offset, cu.size) for cu in cus] == [(cu.cu_offset, cu.size) for cu in theirs.iter_CUs()]
    assert [u[:2] for u in read_unit_headers(di)] == [(cu.cu_offset, cu.cu_offset + cu.size) for cu in cus]
    for cu in cus[:: max(1, len(cus) // 40)]:
        for die in (cu.get_top_DIE(), list(cu.iter_DIEs())[-1]):
            assert di.dwarf.get_CU_containing(die.offset).cu_offset == theirs.get_CU_containing(die.offset).cu_offset
            assert di.dwarf.get_DIE_from_refaddr(die.offset) is die


@pytest.mark.parametrize("inflater", ["isal", "zlib"])
def test_compressed_section_inflated_as_far_as_read(monkeypatch, inflater):
    """A zlib section read at a few places equals its whole inflated bytes there, and what is
    before the furthest read is all that was inflated; damaged data is a DebugInfoError. The same
    with ISA-L's inflater (what probectl uses) and with zlib's (without the isal package)."""
    import zlib

    from probectl.debuginfo.dwarf import inflating
    from probectl.debuginfo.dwarf.inflating import STEP, InflatingSection

    if inflater == "isal":
        isal_zlib = pytest.importorskip("isal.isal_zlib")  # (a dependency: installed with probectl)
        monkeypatch.setattr(inflating, "_INFLATER", isal_zlib)
    else:
        monkeypatch.setattr(inflating, "_INFLATER", zlib)

    data = bytes(range(256)) * (STEP // 64) + os.urandom(STEP)
    stream = InflatingSection(zlib.compress(data), len(data), ".debug_x", "f")
    assert stream.read(10) == data[:10] and stream.tell() == 10
    assert stream.inflated < len(data)
    stream.seek(STEP + 5)
    assert stream.read(100) == data[STEP + 5:STEP + 105]
    assert stream.inflated < len(data)
    stream.seek(-3, os.SEEK_END)
    assert stream.read() == data[-3:] and stream.read(5) == b""
    assert stream.getvalue() == data
    whole = InflatingSection(memoryview(b"x" + zlib.compress(data))[1:], len(data), ".debug_x", "f")
    assert whole.getvalue() == data and whole.read(7) == data[:7], "read whole at once, from a view"
    with pytest.raises(DebugInfoError, match="bad zlib data"):
        InflatingSection(b"not zlib", 100, ".debug_x", "f").getvalue()
    with pytest.raises(DebugInfoError, match="header says"):
        InflatingSection(zlib.compress(b"short"), 100, ".debug_x", "f").getvalue()
    with pytest.raises(DebugInfoError, match="bad zlib data"):
        InflatingSection(b"not zlib", 100, ".debug_x", "f").read(1)
    with pytest.raises(DebugInfoError, match="header says"):
        InflatingSection(zlib.compress(b"short"), 100, ".debug_x", "f").read(50)


def test_kept_windows_answer_the_reads_of_the_next_run():
    """The pages one run read are kept as page-aligned windows; a stream given them answers the same
    reads with the same bytes without inflating anything, and inflates for a read outside them."""
    import random
    import zlib

    from probectl.debuginfo.dwarf.inflating import PAGE, InflatingSection, KeptWindow

    rng = random.Random(16)
    data = bytes(rng.randrange(8) for _ in range(40 * PAGE + 123))
    payload = zlib.compress(data)
    reads = [(rng.randrange(len(data)), rng.randrange(1, 3 * PAGE)) for _ in range(12)] + [(len(data) - 50, 100)]
    first = InflatingSection(payload, len(data), ".debug_x", "f")
    for pos, n in reads:
        first.seek(pos)
        assert first.read(n) == data[pos:pos + n]
    windows = first.windows()
    assert windows and all(offset % PAGE == 0 and data[offset:offset + len(w)] == w for offset, w in windows)
    assert sum(len(w) for _o, w in windows) < len(data)
    loaded = []

    def lazily(offset: int, window: bytes) -> KeptWindow:
        return KeptWindow(offset, len(window), lambda: loaded.append(offset) or window)

    again = InflatingSection(payload, len(data), ".debug_x", "f", [lazily(o, w) for o, w in windows])
    assert again.read(0) == b"" and loaded == [], "a window is read when a read needs it"
    for pos, n in reversed(reads):
        again.seek(pos)
        assert again.read(n) == data[pos:pos + n]
    assert again.inflated == 0 and again.windows() is None, "nothing new was read"
    outside = next(page for page in range(40) if all(not (o <= page * PAGE < o + len(w)) for o, w in windows))
    again.seek(outside * PAGE + 1)
    assert again.read(10) == data[outside * PAGE + 1:outside * PAGE + 11] and again.inflated > 0
    merged = again.windows()
    assert merged and all(data[offset:offset + len(w)] == w for offset, w in merged)
    assert set(loaded) <= {o for o, _w in windows} and len(loaded) == len(set(loaded)), "each read once"
    # windows that are not page-aligned or run past the section are not used
    odd = InflatingSection(payload, len(data), ".debug_x", "f",
                           [KeptWindow.holding(1, data[1:PAGE + 1]), KeptWindow.holding(0, data + b"x")])
    assert odd.read(5) == data[:5] and odd.inflated > 0
    # windows are cut at multiples of WINDOW; a read across two adjacent ones is answered by both
    from probectl.debuginfo.dwarf.inflating import WINDOW

    big = bytes(rng.randrange(8) for _ in range(3 * WINDOW))
    whole = InflatingSection(zlib.compress(big), len(big), ".debug_x", "f")
    whole.seek(100)
    whole.read(2 * WINDOW)
    cut = whole.windows()
    assert [(o, len(w)) for o, w in cut] == [(0, WINDOW), (WINDOW, WINDOW), (2 * WINDOW, PAGE)]
    across = InflatingSection(zlib.compress(big), len(big), ".debug_x", "f", [KeptWindow.holding(o, w) for o, w in cut])
    across.seek(WINDOW - 10)
    assert across.read(WINDOW + 20) == big[WINDOW - 10:2 * WINDOW + 10] and across.inflated == 0
    # a window that cannot be read (damaged in the cache) is inflated, and counts as not kept
    bad = InflatingSection(payload, len(data), ".debug_x", "f", [KeptWindow(o, len(w), lambda: None) for o, w in windows])
    pos, n = reads[0]
    bad.seek(pos)
    assert bad.read(n) == data[pos:pos + n] and bad.inflated > 0
    assert bad.windows() and all(data[o:o + len(w)] == w for o, w in bad.windows())


def test_kept_windows_of_compressed_dwarf_in_the_cache(tmp_path):
    """`add -D` on a binary with compressed DWARF (gcc -gz) keeps what it read under the build-id; the
    next run prints the same as an uncached run, and a damaged file of windows is not used."""
    binary = build_fixture("dwarf_structs", "-O2", ("-gz",))
    definition = "paint scale w->name w->next->label:string w->pts[2].x"
    env = dict(os.environ, PYTHONPATH=str(ROOT), XDG_CACHE_HOME=str(tmp_path))
    env.pop("PROBECTL_NO_CACHE", None)

    def run(**extra):
        out = subprocess.run([sys.executable, "-m", "probectl", "add", "-D", "-x", str(binary), definition],
                             capture_output=True, text=True, env=dict(env, **extra), timeout=60)
        assert out.returncode == 0 and "Traceback" not in out.stderr, out.stderr
        return out.stdout

    uncached = run(PROBECTL_NO_CACHE="1")
    assert run() == uncached
    (kept,) = (tmp_path / "probectl").glob("dwarf-inflated-*.bin")
    assert kept.stat().st_mode & 0o777 == 0o600
    good = kept.read_bytes()
    assert run() == uncached and kept.read_bytes() == good, "read back, and not rewritten when nothing new was read"
    for damaged in (good[:-64] + bytes(64), good[:-1], good[:40] + b"\xff" + good[41:]):
        # a damaged window (or header) is inflated again, and the file is written anew
        kept.write_bytes(damaged)
        assert run() == uncached and kept.read_bytes() == good


def test_unit_index_of_a_two_unit_program():
    _units_found_by_offset(build_static_pair("-O2"))


def _libc_debuginfo() -> DebugInfo:
    """libc's DWARF from libc6-dbg (the test is skipped without it, unless PROBECTL_REQUIRE_ALL)."""
    try:
        return DebugInfo.open(LIBC)
    except DebugInfoError as exc:
        if os.environ.get("PROBECTL_REQUIRE_ALL") == "1":
            raise
        pytest.skip(f"libc6-dbg is not installed: {exc}")


@pytest.mark.libcdbg
def test_unit_index_of_libc():
    _libc_debuginfo()
    _units_found_by_offset(LIBC)


@pytest.mark.libcdbg
def test_name_search_of_compressed_libc_reads_nothing_twice(monkeypatch):
    """Searching libc6-dbg's compressed .debug_info for a name mentioned in ~200 units (``malloc``:
    declared wherever it is called) scans them in the inflated section, where they are: nothing is
    read again through the section's stream, so no page of them is kept for the next run. The same
    for the full index."""
    monkeypatch.setenv("PROBECTL_NO_CACHE", "1")
    di = _libc_debuginfo()
    stream = di.dwarf.debug_info_sec.stream
    if type(stream).__name__ != "InflatingSection":
        pytest.skip("this libc6-dbg's DWARF is not zlib-compressed")
    assert di.function_refs("malloc") == [] and len(di.function_refs("__libc_malloc")) == 1
    assert stream.inflated == stream.size and stream.windows() is None
    # so does the full index (a glob's), which scans every unit
    assert di.name_index()["__libc_malloc"] == di.function_refs("__libc_malloc") and stream.windows() is None


# --- separate debug files ---------------------------------------------------------------------------


@pytest.mark.libcdbg
def test_libc_through_its_debug_file(perf_oracle):
    if not os.path.exists(LIBC):
        pytest.skip("no libc at " + LIBC)
    di = _libc_debuginfo()
    assert di.path != LIBC and di.binary_path == LIBC
    elf = ElfFile(LIBC)
    malloc = elf.find_functions("malloc")[0]
    fn = di.function_at(malloc.value)
    assert fn.name == "__libc_malloc" and fn.entry == malloc.value
    r = fetch_variable(di, fn, fn.entry, Variable("bytes"))
    theirs, err = perf_oracle.definitions(LIBC, "__libc_malloc bytes")
    assert [(elf.vaddr_to_offset(fn.entry), [FetchArg(r.fetch, r.default_name, r.type)])] == theirs, err
    assert [f.name for f in di.find_functions("_int_malloc")] == ["_int_malloc"]
    assert len(di.probe_functions("tcache_get")) >= 2


def test_missing_debug_info_lists_what_was_tried(tmp_path):
    src = tmp_path / "t.c"
    src.write_text("int main(void) { return 0; }\n")
    binary = tmp_path / "stripped"
    subprocess.run(["gcc", "-O2", "-s", "-o", str(binary), str(src)], check=True)
    with pytest.raises(DebugInfoError) as exc:
        DebugInfo.open(binary)
    assert "no debug information" in exc.value.message and "/usr/lib/debug" in exc.value.message
    assert exc.value.hint
    with pytest.raises(DebugInfoError):
        DebugInfo(src)


# --- lazy patterns --------------------------------------------------------------------------------


@pytest.mark.perf
@pytest.mark.parametrize("opt", OPTS)
def test_lazy_patterns_match_perf(fixture_bins, perf_oracle, opt):
    from probectl.debuginfo.dwarf.sources import lazy_points

    binary = fixture_bins.path("dwarf_inline", opt)
    di = fixture_bins.di("dwarf_inline", opt)
    elf = ElfFile(binary)
    (fn,) = di.find_functions("process")
    theirs, err = perf_oracle.definitions(binary, "process;total*")
    mine = [elf.vaddr_to_offset(p.address) for p in lazy_points(di, "total*", scope=fn)]
    assert mine == [off for off, _ in theirs], err
    (real,) = L.source_files(di, "dwarf_inline.c")
    theirs, err = perf_oracle.definitions(binary, "dwarf_inline.c;printf(*")
    mine = [elf.vaddr_to_offset(p.address) for p in lazy_points(di, "printf(*", cu=fn.cu, file=real)]
    if theirs or "Failed to find symbol" not in err:  # perf fails on the .cold function at -O2
        assert mine == [off for off, _ in theirs], err
    assert len(mine) == 4


def test_lazy_pattern_needs_the_source(fixture_bins, tmp_path):
    from probectl.debuginfo.dwarf.sources import lazy_match, lazy_points

    assert lazy_match("\trq = cpu_rq(cpu);", "rq=*") and not lazy_match("\tfoo(rq);", "rq=*")
    di = fixture_bins.di("dwarf_inline", "-O0")
    (fn,) = di.find_functions("process")
    with pytest.raises(DebugInfoError) as exc:
        lazy_points(di, "total*", scope=fn, source_dir=str(tmp_path))
    assert str(tmp_path) in exc.value.message and "--source" in exc.value.hint
    (tmp_path / "dwarf_inline.c").write_text((FIXTURES / "dwarf_inline.c").read_text())
    assert len(lazy_points(di, "total*", scope=fn, source_dir=str(tmp_path))) == 2


# --- damaged debug information ---------------------------------------------------------------------


def test_corrupt_dwarf_gives_errors_not_crashes(fixture_bins, tmp_path):
    """Random damage to the DWARF sections: every query either answers or raises a
    ProbectlError (never another exception, never a hang)."""
    import random

    from elftools.elf.elffile import ELFFile

    from probectl.resolve.dwarf_fetch import available_variables
    from probectl.errors import ProbectlError

    source = fixture_bins.path("dwarf_inline", "-O2")
    original = source.read_bytes()
    with open(source, "rb") as f:
        elf = ELFFile(f)
        sections = [(s["sh_offset"], s["sh_size"]) for s in elf.iter_sections()
                    if s.name in (".debug_info", ".debug_abbrev", ".debug_line", ".debug_loclists",
                                  ".debug_rnglists", ".debug_str", ".eh_frame")]
    rng = random.Random(7)
    for i in range(25):
        data = bytearray(original)
        off, size = rng.choice(sections)
        for _ in range(rng.choice((1, 4, 16))):
            data[off + rng.randrange(size)] = rng.randrange(256)
        path = tmp_path / f"damaged{i}"
        path.write_bytes(bytes(data))
        try:
            di = DebugInfo(path)
            for fn in di.find_functions("*"):
                L.probeable_lines(di, fn)
                for inst in ([fn] if fn.ranges else di.instances(fn)):
                    if inst.entry is not None:
                        for name in expand_variables(di, inst, inst.entry):
                            fetch_variable(di, inst, inst.entry, Variable(name))
                        available_variables(di, inst, inst.entry, externs=True)
        except ProbectlError:
            pass


@pytest.mark.parametrize("opt", OPTS)
def test_source_point_of_addresses(fixture_bins, opt):
    """Addresses back to ``function:line`` (what ``list`` shows): every line of a function maps
    back to itself, an inline instance's entry to its call site in the caller."""
    di = fixture_bins.di("dwarf_inline", opt)
    (fn,) = di.find_functions("process")
    assert L.source_point(di, fn.entry) == L.SourcePoint("process", 0, None, fn.decl_file)
    for ln in L.probeable_lines(di, fn):
        try:
            points = L.function_line(di, fn, ln - fn.decl_line)
        except L.LineSharedError:
            continue
        for p in points:
            sp = L.source_point(di, p.address)
            assert (sp.function, sp.line) == ("process", ln - fn.decl_line), hex(p.address)
    (square,) = di.find_functions("square")
    for inst in di.instances(square):
        caller = di.function_at(inst.entry)
        sp = L.source_point(di, inst.entry)
        assert (sp.function, sp.line) == (caller.name, inst.call_line - caller.decl_line)
    assert L.source_point(di, 0) is None


@pytest.mark.parametrize("dwarf", ["-gdwarf-5", "-gdwarf-4"])
def test_file_names_with_a_relative_compilation_directory(tmp_path, dwarf):
    """Debian's libc6-dbg is built with the compilation directory mapped to a relative one ('./malloc'):
    a file of directory 0 is in that directory once ('./malloc/malloc.c', as perf names it), and the
    other directories are relative to it (it was './malloc/./malloc/malloc.c' in 'list')."""
    sub = tmp_path / "malloc"
    sub.mkdir()
    shutil.copyfile(FIXTURES / "uprobe_target.c", sub / "target.c")
    (sub / "inc").mkdir()
    (sub / "inc" / "extra.h").write_text("static inline int twice(int x) { return 2 * x; }\n")
    (sub / "use.c").write_text('#include "inc/extra.h"\nint use(int x) { return twice(x); }\n')
    binary = tmp_path / "prog"
    subprocess.run(["gcc", "-O0", dwarf, f"-fdebug-prefix-map={sub}=./malloc", "-o", str(binary),
                    "target.c", "use.c"], cwd=sub, check=True)
    with DebugInfo.open(str(binary)) as debuginfo:
        files = {f for cu in debuginfo.dwarf.iter_CUs() for f in debuginfo.line_table(cu).files()}
    assert {"./malloc/target.c", "./malloc/use.c", "./malloc/inc/extra.h"} <= files, sorted(files)
    assert not any("malloc/./malloc" in f for f in files)


def _instances_read_both_ways(di: DebugInfo, names: list[str]) -> int:
    """Each function's instances (and their callers) read from its unit's bytes equal those of the
    walk over its unit's DIEs (a second DebugInfo, made to walk); the number compared."""
    walker = DebugInfo.open(di.path)
    compared = 0
    for name in names:
        for fn in di.find_functions(name):
            (other,) = [f for f in walker.find_functions(name) if f.die.offset == fn.die.offset]
            walker._by_origin[other.cu.cu_offset] = None  # (no bytes to read: the DIE walk)
            for skip in (True, False):
                fast, walked = di.instances(fn, skip), walker.instances(other, skip)
                assert [(f.die.offset, f.caller and f.caller.die.offset) for f in fast] == \
                       [(f.die.offset, f.caller and f.caller.die.offset) for f in walked], name
                compared += len(walked)
    return compared


def test_inline_instances_from_the_bytes_are_the_walks(fixture_bins):
    assert _instances_read_both_ways(fixture_bins.di("dwarf_inline", "-O2"), ["square", "clamp"]) >= 2


@pytest.mark.libcdbg
def test_inline_instances_from_the_bytes_are_the_walks_in_libc():
    assert _instances_read_both_ways(_libc_debuginfo(), ["checked_request2size", "tcache_get", "arena_get2",
                                                         "malloc_consolidate", "__libc_malloc"]) >= 5
