"""The ELF layer: symbol tables and versions against readelf, file offsets against perf probe -D,
build-ids and debuglinks, separate debug files, and garbage input (only ProbectlErrors, never a crash)."""
from __future__ import annotations

import fnmatch
import os
import random
import re
import shutil
import struct
import subprocess
import sys
import time
import zlib
from pathlib import Path

import pytest

from tests.helpers import build_fixture, missing
from probectl.debuginfo.elf import DEBUG_ROOT, ElfFile, ElfSymbol, find_debug_file, walk_notes
from probectl.errors import DebugInfoError, ProbectlError, TargetError
from probectl.target.binary import uprobe_group_name

LIBC = Path(os.path.realpath("/lib/x86_64-linux-gnu/libc.so.6"))
FIXTURE_FUNCTIONS = ["add_ints", "scale_long", "mix_unsigned", "hash_u64", "count_char", "sum_record",
                     "pick_label", "bump", "main"]
BUILDS = [("-O0", True), ("-O2", True), ("-O0", False), ("-O2", False)]


def _build_id_name(ids):
    return [f"{opt}{'' if pie else '-nopie'}" for opt, pie in ids]


@pytest.fixture(scope="module", params=BUILDS, ids=_build_id_name(BUILDS))
def target(request):
    opt, pie = request.param
    return build_fixture("uprobe_target", opt=opt, pie=pie)


@pytest.fixture(scope="module")
def libc():
    if not LIBC.exists():
        missing(f"{LIBC} not found")
    return LIBC


@pytest.fixture(scope="module")
def libc_debug(libc):
    elf = ElfFile(libc)
    path = DEBUG_ROOT / ".build-id" / elf.build_id[:2] / f"{elf.build_id[2:]}.debug"
    if not path.exists():
        missing("libc6-dbg is not installed (no libc debug file under /usr/lib/debug/.build-id)")
    return path


def _tool(*args: str) -> str:
    if not shutil.which(args[0]):
        missing(f"{args[0]} (binutils) is not installed")
    return subprocess.run(args, capture_output=True, text=True, check=True).stdout


# --- readelf as the oracle ------------------------------------------------------------------------

_READELF_SYM = re.compile(r"^\s*\d+:\s+([0-9a-f]+)\s+(\d+|0x[0-9a-f]+)\s+(\S+)\s+(\S+)\s+\S+\s+(\S+)\s+(.*)$")


def readelf_symbols(path: Path) -> dict[str, list[tuple]]:
    """readelf -Ws --dyn-syms as {table: [(versioned name, value, size, type, bind, defined)]}."""
    out: dict[str, list[tuple]] = {}
    table = None
    for line in _tool("readelf", "-Ws", "--dyn-syms", str(path)).splitlines():
        m = re.match(r"Symbol table '\.(\w+)'", line)
        if m:
            table = m.group(1)
            out.setdefault(table, [])
            continue
        m = _READELF_SYM.match(line)
        if m and table:
            value, size, typ, bind, ndx, name = m.groups()
            name = re.sub(r" \(\d+\)$", "", name.strip())
            if not name:
                continue
            out[table].append((name, int(value, 16), int(size, 0), typ, bind, ndx != "UND"))
    return out


def _base(name: str) -> str:
    return name.split("@", 1)[0]


def _elf_files_to_compare():
    files = [build_fixture("uprobe_target", opt=o, pie=p) for o, p in BUILDS]
    files += [LIBC, Path("/usr/bin/bash")]
    return [f for f in files if f.exists()]


@pytest.mark.parametrize("path", _elf_files_to_compare(), ids=lambda p: p.name)
def test_symbols_match_readelf(path):
    expected = readelf_symbols(path)
    elf = ElfFile(path)
    ours = elf.symbols()
    assert ours, "no symbols read"
    # Every (name, value, type, bind) readelf shows is there, and nothing else.
    want = {(_base(n), v, t, b) for rows in expected.values() for (n, v, _s, t, b, _d) in rows}
    got = {(s.name, s.value, s.type, s.bind) for s in ours}
    # Our merge keeps one entry per name/value/version (the global one): compare on name and value,
    # and check that every merged entry came from one readelf row.
    assert {(n, v) for (n, v, _t, _b) in want} == {(n, v) for (n, v, _t, _b) in got}
    assert got <= want
    # Sizes of defined functions agree.
    sizes = {(_base(n), v): s for rows in expected.values() for (n, v, s, t, _b, d) in rows if d}
    for sym in elf.functions():
        assert sizes[(sym.name, sym.value)] == sym.size, sym
    # .dynsym versions: readelf's '@@'/'@' spelling is ours.
    dyn = {(n, v) for (n, v, _s, _t, _b, _d) in expected.get("dynsym", [])}
    ours_versioned = {(s.versioned_name, s.value) for s in ours}
    assert dyn <= ours_versioned


@pytest.mark.parametrize("path", _elf_files_to_compare()[:1] + [LIBC], ids=lambda p: p.name)
def test_defined_functions_match_nm(path):
    out = _tool("nm", "-D", "--defined-only", str(path)) if path == LIBC else \
        _tool("nm", "--defined-only", str(path))
    want, weak = set(), set()
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[1] in "Tti":
            want.add((_base(parts[2]), int(parts[0], 16)))
        elif len(parts) == 3 and parts[1] in "Ww":
            weak.add((_base(parts[2]), int(parts[0], 16)))
    got = {(s.name, s.value) for s in ElfFile(path).functions()}
    assert want <= got
    # nm's 'W' mixes weak functions and weak objects; whatever else we list must be one of those.
    assert got - want <= weak


def test_fixture_headers(target):
    elf = ElfFile(target)
    assert elf.elf_class == 64 and elf.little_endian and elf.machine == 62
    pie = "nopie" not in target.name
    assert elf.type == ("DYN" if pie else "EXEC")
    assert elf.is_pie == pie
    assert elf.has_dwarf
    assert any(s.executable for s in elf.segments)
    assert elf.section(".text") is not None and elf.section(".nonexistent") is None
    assert elf.interpreter and "ld-linux" in elf.interpreter
    names = {s.name for s in elf.functions()}
    assert set(FIXTURE_FUNCTIONS) <= names


def test_libc_and_bash_headers(libc):
    elf = ElfFile(libc)
    assert elf.type == "DYN" and elf.soname == "libc.so.6"
    assert not elf.is_pie, "libc.so.6 has PT_INTERP but is a library (DT_SONAME), not a PIE"
    assert not elf.has_dwarf
    bash = ElfFile("/usr/bin/bash")
    assert bash.is_pie and bash.soname is None


def test_undefined_symbols_carry_needed_versions(target):
    elf = ElfFile(target)
    printf = [s for s in elf.symbols() if s.name == "printf"]
    assert printf and all(not s.defined for s in printf)
    assert {s.versioned_name for s in printf} == {"printf@GLIBC_2.2.5"}
    assert "printf" not in {s.name for s in elf.functions()}


# --- versions and aliases -------------------------------------------------------------------------

def test_libc_symbol_versions(libc):
    elf = ElfFile(libc)
    memcpy = elf.find_functions("memcpy")
    by_version = {s.versioned_name: s for s in memcpy}
    assert set(by_version) == {"memcpy@@GLIBC_2.14", "memcpy@GLIBC_2.2.5"}
    assert by_version["memcpy@@GLIBC_2.14"].type == "IFUNC"
    assert by_version["memcpy@@GLIBC_2.14"].default_version
    assert not by_version["memcpy@GLIBC_2.2.5"].default_version
    assert by_version["memcpy@@GLIBC_2.14"].value != by_version["memcpy@GLIBC_2.2.5"].value
    rows = {n: v for rows in readelf_symbols(libc).values() for (n, v, *_r) in rows}
    for name, sym in by_version.items():
        assert rows[name] == sym.value
    assert [s.versioned_name for s in elf.find_functions("memcpy@GLIBC_2.2.5")] == ["memcpy@GLIBC_2.2.5"]
    assert [s.versioned_name for s in elf.find_functions("memcpy@@GLIBC_2.14")] == ["memcpy@@GLIBC_2.14"]
    assert [s.versioned_name for s in elf.find_functions("memcpy@GLIBC_2.14")] == ["memcpy@@GLIBC_2.14"]
    assert elf.find_functions("memcpy@@GLIBC_2.2.5") == []
    assert [s.versioned_name for s in elf.find_functions("malloc")] == ["malloc@@GLIBC_2.2.5"]
    assert elf.find_functions("memcpy@GLIBC_9.99") == []
    assert {s.versioned_name for s in elf.find_functions("memcpy@GLIBC_2.*")} == set(by_version)


def test_globs_return_aliases(libc):
    elf = ElfFile(libc)
    found = elf.find_functions("*malloc")
    names = {s.name for s in found}
    assert {"malloc", "__libc_malloc"} <= names
    at = {s.name: s.value for s in found}
    assert at["malloc"] == at["__libc_malloc"]
    assert all(fnmatch.fnmatchcase(s.name, "*malloc") for s in found)
    assert elf.find_functions("no_such_function_xyz*") == []
    assert elf.find_functions("no_such_function_xyz") == []


def test_local_functions_and_their_clones(libc, libc_debug):
    """What tells the resolver that a global name may also be a static function's (``has_local_function``)."""
    dbg = ElfFile(libc_debug)
    assert dbg.has_local_function("malloc") is False  # global only (malloc.c's FILE symbol is no function)
    assert dbg.has_local_function("_int_malloc") is True  # static in malloc.c
    assert dbg.has_local_function("obstack_free") is True  # global, but with a local part: obstack_free.cold
    assert dbg.has_local_function("no_such_function_xyz") is False
    assert ElfFile(libc).has_local_function("_int_malloc") is None  # no .symtab: nothing can be told


def test_libc_debug_symtab_aliases(libc_debug):
    dbg = ElfFile(libc_debug)
    assert dbg.has_dwarf
    malloc = dbg.find_functions("malloc")
    libc_malloc = dbg.find_functions("__libc_malloc")
    assert len(malloc) == 1 and len(libc_malloc) == 1
    assert malloc[0].value == libc_malloc[0].value
    assert malloc[0].table == "symtab"
    aliases = [s.name for s in dbg.aliases(malloc[0])]
    assert {"malloc", "__libc_malloc"} <= set(aliases)
    assert aliases[0] == "malloc", "the public, global name is preferred"
    assert dbg.symbol_at(malloc[0].value + 3).name == "malloc"
    # .symtab spells versions into the names; they are split off like .dynsym's.
    assert {s.versioned_name for s in dbg.find_functions("memcpy")} == {"memcpy@@GLIBC_2.14", "memcpy@GLIBC_2.2.5"}
    # The local 'memcpy' alias of the IFUNC adds nothing next to the versioned global entry.
    assert [s.bind for s in dbg.find_functions("memcpy@@GLIBC_2.14")] == ["GLOBAL"]


def test_symbol_at(target):
    elf = ElfFile(target)
    for name in FIXTURE_FUNCTIONS:
        (sym,) = elf.find_functions(name)
        assert sym.size > 0
        assert elf.symbol_at(sym.value) == sym
        assert elf.symbol_at(sym.value + sym.size - 1) == sym
        after = elf.symbol_at(sym.value + sym.size)
        assert after is None or after.name != name
    assert elf.symbol_at(0xFFFF_FFFF_0000) is None
    assert elf.symbol_at(0) is None


def test_symbols_are_cached_and_versioned_name():
    sym = ElfSymbol("malloc", 1, 2, "FUNC", "GLOBAL", 1, "GLIBC_2.2.5", True, "dynsym")
    assert sym.versioned_name == "malloc@@GLIBC_2.2.5"
    assert ElfSymbol("memcpy", 1, 2, "FUNC", "GLOBAL", 1, "GLIBC_2.2.5", False).versioned_name == "memcpy@GLIBC_2.2.5"
    assert ElfSymbol("main", 1, 2, "FUNC", "GLOBAL", 1).versioned_name == "main"
    elf = ElfFile(LIBC)
    assert elf.symbols() is elf.symbols()
    assert elf.functions() is elf.functions()


def test_symbol_load_time(libc, libc_debug, record_property):
    """Measured, not asserted: libc's .dynsym and libc6-dbg's .symtab (design: no timed assertions)."""
    for label, path in (("libc .dynsym", libc), ("libc debug .symtab", libc_debug)):
        best = float("inf")
        for _ in range(3):
            start = time.perf_counter()
            n = len(ElfFile(path).symbols())
            best = min(best, time.perf_counter() - start)
        record_property(f"{label} symbols", n)
        record_property(f"{label} ms", round(best * 1000, 2))
        print(f"{label}: {n} symbols in {best * 1000:.1f} ms")


# --- file offsets vs perf probe -D ----------------------------------------------------------------

_PERF_DEF = re.compile(r"^([pr]):(\w+)/(\w+) (\S+):0x([0-9a-f]+)")


def perf_definitions(perf: str, binary: Path, events: list[str]) -> list[tuple[str, str, str, int]]:
    args = [perf, "probe", "-x", str(binary)]
    for ev in events:
        args += ["-D", ev]
    proc = subprocess.run(args, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    out = []
    for line in proc.stdout.splitlines():
        m = _PERF_DEF.match(line)
        if m:
            out.append((m.group(2), m.group(3), m.group(4), int(m.group(5), 16)))
    return out


@pytest.mark.perf
def test_offsets_match_perf_on_fixture(perf_bin, target):
    elf = ElfFile(target)
    defs = perf_definitions(perf_bin, target, FIXTURE_FUNCTIONS)
    assert len(defs) == len(FIXTURE_FUNCTIONS)
    for (group, event, path, offset), name in zip(defs, FIXTURE_FUNCTIONS):
        (sym,) = elf.find_functions(name)
        assert event == name
        assert group == uprobe_group_name(target)
        assert elf.vaddr_to_offset(sym.value) == offset, name
        assert elf.offset_to_vaddr(offset) == sym.value
        if "nopie" in target.name:
            assert sym.value != offset, "non-PIE: addresses and file offsets differ"


@pytest.mark.perf
def test_offsets_match_perf_on_libc(perf_bin, libc):
    elf = ElfFile(libc)
    names = ["malloc", "free", "printf", "memcpy", "__libc_malloc", "strlen"]
    defs = perf_definitions(perf_bin, libc, names)
    assert [d[1] for d in defs] == names
    for (group, event, path, offset) in defs:
        assert group == "probe_libc" == uprobe_group_name(libc)
        found = elf.find_functions(event)
        # perf takes the default version (memcpy@@GLIBC_2.14, an IFUNC).
        sym = next(s for s in found if s.default_version)
        assert elf.vaddr_to_offset(sym.value) == offset, event


SECOND_SEGMENT_C = r"""
#include <stdio.h>
__attribute__((noinline, section(".farcode"))) int far_func(int x) { return x * 7; }
int main(int argc, char **argv) { (void)argv; printf("%d\n", far_func(argc)); return 0; }
"""


@pytest.fixture(scope="module")
def second_segment_binary(tmp_path_factory):
    """A non-PIE program with one function in its own executable PT_LOAD far from .text."""
    d = tmp_path_factory.mktemp("farcode")
    (d / "far.c").write_text(SECOND_SEGMENT_C)
    out = d / "far"
    subprocess.run(["gcc", "-g", "-O0", "-no-pie", "-Wl,--section-start=.farcode=0x800000",
                    "-o", str(out), str(d / "far.c")], check=True)
    return out


def test_offset_of_code_in_a_second_executable_segment(second_segment_binary):
    elf = ElfFile(second_segment_binary)
    (sym,) = elf.find_functions("far_func")
    far = elf.section(".farcode")
    text = elf.section(".text")
    assert sym.value == far.addr
    offset = elf.vaddr_to_offset(sym.value)
    assert offset == far.offset, "the segment holding .farcode maps it from its own file offset"
    with open(second_segment_binary, "rb") as f:
        f.seek(offset)
        assert f.read(far.size) == elf.section_data(".farcode")
    # perf's .text delta would give a different, wrong place here (see test below).
    assert sym.value - (text.addr - text.offset) != offset
    execs = [s for s in elf.segments if s.executable]
    assert len(execs) == 2


@pytest.mark.perf
def test_perf_uses_text_delta_for_second_segment(perf_bin, second_segment_binary):
    """Documents a known perf difference: probectl's segment-based offset is the one that fires."""
    elf = ElfFile(second_segment_binary)
    (sym,) = elf.find_functions("far_func")
    text = elf.section(".text")
    (_g, _e, _p, perf_offset) = perf_definitions(perf_bin, second_segment_binary, ["far_func"])[0]
    ours = elf.vaddr_to_offset(sym.value)
    if perf_offset != ours:
        assert perf_offset == sym.value - (text.addr - text.offset)
    # main is in .text, where both methods agree.
    (_g, _e, _p, main_offset) = perf_definitions(perf_bin, second_segment_binary, ["main"])[0]
    assert main_offset == elf.vaddr_to_offset(elf.find_functions("main")[0].value)


def test_address_conversion_errors(target):
    elf = ElfFile(target)
    with pytest.raises(DebugInfoError, match="no PT_LOAD segment"):
        elf.vaddr_to_offset(0x7FFF_0000_0000)
    with pytest.raises(DebugInfoError, match="no PT_LOAD segment"):
        elf.offset_to_vaddr(10 ** 12)
    bss = elf.section(".bss")
    if bss is not None and bss.size:
        with pytest.raises(DebugInfoError, match="bss"):
            elf.vaddr_to_offset(bss.addr + bss.size - 1)


# --- notes, debuglink, debug files ----------------------------------------------------------------

def _readelf_build_id(path: Path) -> str | None:
    m = re.search(r"Build ID: ([0-9a-f]+)", _tool("readelf", "-n", str(path)))
    return m.group(1) if m else None


@pytest.mark.parametrize("path", [LIBC, Path("/usr/bin/bash")], ids=lambda p: p.name)
def test_build_id_matches_readelf(path):
    if not path.exists():
        missing(f"{path} not found")
    assert ElfFile(path).build_id == _readelf_build_id(path)


def test_fixture_build_id(target):
    assert ElfFile(target).build_id == _readelf_build_id(target)
    assert len(ElfFile(target).build_id) == 40


def test_a_note_blob_is_walked_as_the_file_notes_are(target, tmp_path):
    """/sys/kernel/notes is a bare run of notes (the kernel's .notes section): running_build_id walks
    it with the walker ElfFile.notes uses. Here the fixture's note sections laid end to end stand for
    it, with a note cut short at the end, which ends the walk without an error."""
    from probectl.target.kernel import running_build_id

    elf = ElfFile(target)
    four = [s for s in elf.sections if s.type == 7 and s.addralign == 4]  # SHT_NOTE, as the kernel's
    blob = b"".join(elf.section_data(s.name) for s in four)
    walked = list(walk_notes(blob, "<"))
    assert len(walked) >= 2 and all(n in list(elf.notes()) for n in walked), walked
    notes = tmp_path / "notes"
    notes.write_bytes(blob + struct.pack("<III", 4, 20, 3) + b"GNU\0" + bytes(8))
    assert running_build_id(notes) == _readelf_build_id(target) == elf.build_id
    assert running_build_id(tmp_path / "missing") is None


def test_libc_debuglink_and_debug_file(libc, libc_debug):
    elf = ElfFile(libc)
    name, crc = elf.debuglink
    assert name == f"{elf.build_id[2:]}.debug"
    found, tried = find_debug_file(elf)
    assert found == libc_debug
    assert tried[0] == str(libc_debug)
    assert ElfFile(found).build_id == elf.build_id
    assert zlib.crc32(found.read_bytes()) == crc


def _split_debug(binary: Path, workdir: Path, where: str = "") -> tuple[Path, Path]:
    """A stripped copy of ``binary`` in ``workdir`` with its DWARF in ``workdir/where/<name>.debug``."""
    stripped = workdir / binary.name
    dbgdir = workdir / where
    dbgdir.mkdir(parents=True, exist_ok=True)
    debug = dbgdir / f"{binary.name}.debug"
    shutil.copy(binary, stripped)
    _tool("objcopy", "--only-keep-debug", str(stripped), str(debug))
    _tool("objcopy", "--strip-debug", f"--add-gnu-debuglink={debug}", str(stripped))
    return stripped, debug


@pytest.mark.parametrize("where", ["", ".debug"])
def test_find_debug_file_by_debuglink(tmp_path, where):
    binary = build_fixture("uprobe_target")
    stripped, debug = _split_debug(binary, tmp_path, where)
    elf = ElfFile(stripped)
    assert not elf.has_dwarf
    assert elf.debuglink[0] == debug.name
    found, tried = find_debug_file(elf)
    assert found == debug, tried
    assert ElfFile(found).has_dwarf
    assert any(".build-id" in t for t in tried), "the build-id path is tried first"


def test_find_debug_file_rejects_wrong_crc(tmp_path):
    binary = build_fixture("uprobe_target")
    stripped, debug = _split_debug(binary, tmp_path)
    with open(debug, "ab") as f:
        f.write(b"\0")
    found, tried = find_debug_file(ElfFile(stripped))
    assert found is None
    assert any(t.startswith(str(debug)) and "CRC32" in t for t in tried), tried


def test_find_debug_file_in_extra_build_id_dir(tmp_path):
    binary = build_fixture("uprobe_target", opt="-O2")
    stripped, debug = _split_debug(binary, tmp_path / "bin")
    os.unlink(debug)  # only the build-id copy below remains
    elf = ElfFile(stripped)
    root = tmp_path / "debugroot"
    bid = root / ".build-id" / elf.build_id[:2] / f"{elf.build_id[2:]}.debug"
    bid.parent.mkdir(parents=True)
    _tool("objcopy", "--only-keep-debug", str(binary), str(bid))
    found, tried = find_debug_file(elf, extra_dirs=[root])
    assert found == bid
    # A debug file from another build is refused.
    other = build_fixture("uprobe_target", opt="-O0")
    _tool("objcopy", "--only-keep-debug", str(other), str(bid))
    found, tried = find_debug_file(elf, extra_dirs=[root])
    assert found is None
    assert any("build-id" in t and t.startswith(str(bid)) for t in tried)


def test_find_debug_file_none_for_unstripped(target):
    found, tried = find_debug_file(ElfFile(target))
    assert found is None and tried


# --- compressed DWARF -----------------------------------------------------------------------------

def _compressed_copy(binary: Path, mode: str, tmp_path: Path) -> Path:
    """``binary`` with its debug sections compressed by objcopy in ``mode`` (zlib, zlib-gnu, zstd)."""
    compressed = tmp_path / f"compressed-{mode}"
    if not shutil.which("objcopy"):
        missing("objcopy (binutils) is not installed")
    done = subprocess.run(["objcopy", f"--compress-debug-sections={mode}", str(binary), str(compressed)],
                          capture_output=True, text=True)
    if done.returncode and mode == "zstd":
        missing(f"this objcopy cannot compress with zstd (binutils 2.40 can): {done.stderr.strip()}")
    assert done.returncode == 0, done.stderr
    return compressed


@pytest.mark.parametrize("mode", ["zlib", "zlib-gnu", "zstd"])
def test_compressed_debug_sections(tmp_path, mode):
    binary = build_fixture("uprobe_target")
    compressed = _compressed_copy(binary, mode, tmp_path)
    elf = ElfFile(compressed)
    plain = ElfFile(binary)
    assert elf.has_dwarf
    name = ".zdebug_info" if mode == "zlib-gnu" else ".debug_info"
    sec = elf.section(name)
    assert sec is not None and sec.compressed
    assert elf.section_data(name) == plain.section_data(".debug_info")


@pytest.mark.parametrize("command", [["vars", "sum_record"], ["lines", "sum_record"],
                                     ["add", "-D", "sum_record rec->value rec->label:string"]], ids=lambda c: c[0])
def test_probectl_reads_zstd_compressed_dwarf_as_the_plain_file(tmp_path, command):
    """A zstd-compressed .debug_* (pyelftools cannot read one) is decompressed by libzstd: the
    answers on it are those on the uncompressed file (only the file's own name differs)."""
    binary = build_fixture("uprobe_target")
    compressed = _compressed_copy(binary, "zstd", tmp_path)
    assert "ZSTD" in _tool("readelf", "-t", str(compressed))  # (readelf names each section's compression)

    def answer(path: Path) -> str:
        done = subprocess.run([sys.executable, "-m", "probectl", command[0], "-x", str(path), *command[1:]],
                              capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        return done.stdout.replace(str(path), "BINARY").replace(uprobe_group_name(path), "GROUP")

    assert answer(compressed) == answer(binary) and "sum_record" in answer(binary)


def test_zstd_and_zlib_decompression_of_bytes_made_by_the_tools(tmp_path):
    """probectl.compression against the zstd command's frames and zlib's streams: the bytes back, and
    a ValueError (never a crash, nor a buffer of the claimed size) for damaged data or another size."""
    from probectl.compression import inflate, unzstd

    plain = b"".join(b"line %d of some debug section\n" % i for i in range(5000))
    if not shutil.which("zstd"):
        missing("the zstd command (apt zstd) is not installed")
    frame = subprocess.run(["zstd", "-c", "-q"], input=plain, capture_output=True, check=True).stdout
    assert frame[:4] == b"\x28\xb5\x2f\xfd" and unzstd(frame, len(plain)) == plain
    stream = subprocess.run(["zstd", "-c", "-q", "--no-content-size"], input=plain, capture_output=True,
                            check=True).stdout  # (a frame of undeclared size, as a stream writes it)
    assert unzstd(stream, len(plain)) == plain
    for bad, size in [(frame, len(plain) - 1), (frame, len(plain) + 1), (frame[:-9], len(plain)),
                      (b"\x28\xb5\x2f\xfd" + bytes(20), 100), (b"not zstd", 8), (stream, 1 << 40)]:
        with pytest.raises(ValueError):
            unzstd(bad, size)
    assert inflate(zlib.compress(plain), len(plain)) == plain
    for bad, size in [(zlib.compress(plain), len(plain) - 1), (zlib.compress(plain)[:100], len(plain)),
                      (b"not zlib", 8)]:
        with pytest.raises(ValueError):
            inflate(bad, size)


def test_zstd_sections_without_libzstd(tmp_path, monkeypatch):
    import probectl.compression

    compressed = _compressed_copy(build_fixture("uprobe_target"), "zstd", tmp_path)

    def no_libzstd():
        raise probectl.compression.LibzstdMissing("libzstd (libzstd.so.1) cannot be loaded")

    monkeypatch.setattr(probectl.compression, "_libzstd", no_libzstd)
    with pytest.raises(DebugInfoError, match="section .debug_info is zstd-compressed and libzstd") as err:
        ElfFile(compressed).section_data(".debug_info")
    assert "libzstd1" in err.value.hint and "objcopy --decompress-debug-sections" in err.value.hint


def test_section_data_errors(libc_debug):
    dbg = ElfFile(libc_debug)
    with pytest.raises(DebugInfoError, match="NOBITS"):
        dbg.section_data(".text")
    with pytest.raises(DebugInfoError, match="no section"):
        dbg.section_data(".no_such_section")


# --- bad input: clear errors, never another exception -------------------------------------------

def test_not_elf(tmp_path):
    text = tmp_path / "notes.txt"
    text.write_text("hello, not an ELF file\n")
    with pytest.raises(TargetError, match="not an ELF file"):
        ElfFile(text)
    script = tmp_path / "script.sh"
    script.write_text("#!/bin/sh\necho hi\n")
    with pytest.raises(TargetError) as err:
        ElfFile(script)
    assert "script for /bin/sh" in err.value.hint
    empty = tmp_path / "empty"
    empty.write_bytes(b"")
    with pytest.raises(TargetError, match="empty"):
        ElfFile(empty)
    with pytest.raises(TargetError, match="does not exist"):
        ElfFile(tmp_path / "missing")
    with pytest.raises(TargetError, match="directory"):
        ElfFile(tmp_path)


def _exercise(path: Path) -> None:
    """Everything a caller may ask of a file; the only failures allowed are ProbectlErrors."""
    try:
        elf = ElfFile(path)
    except ProbectlError:
        return
    calls = [
        lambda: (elf.type, elf.machine, elf.is_pie, list(elf.segments), elf.interpreter, elf.soname),
        lambda: elf.build_id,
        lambda: elf.debuglink,
        lambda: elf.has_dwarf,
        lambda: elf.symbols(),
        lambda: elf.functions(),
        lambda: elf.find_functions("*"),
        lambda: elf.find_functions("main"),
        lambda: elf.find_functions("printf@GLIBC_2.2.5"),
        lambda: elf.symbol_at(0x1139),
        lambda: find_debug_file(elf, extra_dirs=[path.parent]),
    ]
    for sec in elf.sections[:64]:
        calls.append(lambda name=sec.name: elf.section_data(name))
    for call in calls:
        try:
            call()
        except ProbectlError:
            pass
    try:
        for sym in elf.functions()[:50]:
            for fn in (lambda: elf.vaddr_to_offset(sym.value), lambda: elf.offset_to_vaddr(sym.value),
                       lambda: elf.aliases(sym)):
                try:
                    fn()
                except ProbectlError:
                    pass
    except ProbectlError:
        pass
    elf.close()


def test_a_parse_failure_past_the_checks_names_the_corrupt_file(target, monkeypatch):
    """The symbol and section readers are guarded (errors.guard_decoding): a struct/zlib/index error
    the explicit checks missed is a DebugInfoError naming the file, not a traceback."""
    elf = ElfFile(target)
    monkeypatch.setattr(elf.symbol_tables, "symbols", lambda: struct.unpack("<I", b""))
    with pytest.raises(DebugInfoError, match=r"corrupt ELF file \(error: unpack requires") as err:
        elf.symbols()
    assert err.value.message.startswith(f"{target}: ") and "rebuild or reinstall" in err.value.hint


def test_truncated_files(tmp_path):
    data = build_fixture("uprobe_target").read_bytes()
    elf = ElfFile(build_fixture("uprobe_target"))
    interesting = {0, 1, 3, 4, 5, 15, 16, 17, 40, 63, 64, 65, 100, 0x40 + 56 * 3}
    for sec in elf.sections:
        interesting.update({sec.offset, sec.offset + 1, sec.offset + sec.size - 1})
    shoff = struct.unpack_from("<Q", data, 0x28)[0]
    interesting.update({shoff, shoff + 1, shoff + 64 * 5, len(data) - 1})
    rng = random.Random(1234)
    interesting.update(rng.randrange(len(data)) for _ in range(40))
    path = tmp_path / "truncated"
    for size in sorted(n for n in interesting if 0 <= n < len(data)):
        path.write_bytes(data[:size])
        _exercise(path)
    path.write_bytes(data[:100])
    with pytest.raises(DebugInfoError, match="truncated"):
        ElfFile(path)


def test_mutated_files(tmp_path):
    src = build_fixture("uprobe_target")
    data = bytearray(src.read_bytes())
    elf = ElfFile(src)
    # Bytes worth breaking: the ELF and program headers, section headers, symbol and version tables, notes.
    regions = [(0, 64 + 56 * 14)]
    shoff = struct.unpack_from("<Q", data, 0x28)[0]
    regions.append((shoff, len(data)))
    for name in (".dynsym", ".symtab", ".gnu.version", ".gnu.version_d", ".gnu.version_r", ".note.gnu.build-id",
                 ".gnu_debuglink", ".dynamic", ".strtab", ".dynstr"):
        sec = elf.section(name)
        if sec is not None and sec.has_data:
            regions.append((sec.offset, sec.offset + sec.size))
    rng = random.Random(5678)
    path = tmp_path / "mutated"
    for _ in range(400):
        mutated = bytearray(data)
        for _ in range(rng.choice((1, 2, 4, 16))):
            lo, hi = rng.choice(regions)
            pos = rng.randrange(lo, hi)
            mutated[pos] = rng.choice((0, 0xFF, 0x7F, 0x80, rng.randrange(256)))
        path.write_bytes(mutated)
        _exercise(path)


def _tiny_elf(elf_class: int, little: bool) -> bytes:
    """A minimal ELF (one PT_LOAD, .text, .symtab, .strtab, .shstrtab, a build-id note) in any class/order."""
    e = "<" if little else ">"
    is64 = elf_class == 64
    ehsize, phentsize, shentsize = (64, 56, 64) if is64 else (52, 32, 40)
    code = b"\x90" * 32
    strtab = b"\0tiny_func\0tiny_obj\0"
    shstrtab = b"\0.text\0.symtab\0.strtab\0.shstrtab\0.note.gnu.build-id\0"
    note = struct.pack(e + "III", 4, 20, 3) + b"GNU\0" + bytes(range(20))
    if is64:
        syms = struct.pack(e + "IBBHQQ", 0, 0, 0, 0, 0, 0)
        syms += struct.pack(e + "IBBHQQ", 1, (1 << 4) | 2, 0, 1, 0x401000, 16)
        syms += struct.pack(e + "IBBHQQ", 11, (1 << 4) | 1, 0, 1, 0x401010, 8)
    else:
        syms = struct.pack(e + "IIIBBH", 0, 0, 0, 0, 0, 0)
        syms += struct.pack(e + "IIIBBH", 1, 0x401000, 16, (1 << 4) | 2, 0, 1)
        syms += struct.pack(e + "IIIBBH", 11, 0x401010, 8, (1 << 4) | 1, 0, 1)
    text_off = 0x100
    blobs = [code, syms, strtab, shstrtab, note]
    offsets = []
    pos = text_off
    for blob in blobs:
        offsets.append(pos)
        pos += (len(blob) + 7) & ~7
    shoff = pos
    sym_entsize = 24 if is64 else 16
    # (name, type, flags, addr, offset, size, link, info, align, entsize)
    sections = [(0, 0, 0, 0, 0, 0, 0, 0, 0, 0),
                (1, 1, 6, 0x401000, offsets[0], len(code), 0, 0, 16, 0),
                (7, 2, 0, 0, offsets[1], len(syms), 3, 1, 8, sym_entsize),
                (15, 3, 0, 0, offsets[2], len(strtab), 0, 0, 1, 0),
                (23, 3, 0, 0, offsets[3], len(shstrtab), 0, 0, 1, 0),
                (33, 7, 2, 0, offsets[4], len(note), 0, 0, 4, 0)]
    ident = b"\x7fELF" + bytes([1 if not is64 else 2, 1 if little else 2, 1]) + bytes(9)
    if is64:
        header = struct.pack(e + "HHIQQQIHHHHHH", 2, 62, 1, 0x401000, ehsize, shoff, 0, ehsize,
                             phentsize, 1, shentsize, len(sections), 4)
        phdr = struct.pack(e + "IIQQQQQQ", 1, 5, text_off, 0x401000, 0x401000, len(code), len(code), 0x1000)
        shdrs = b"".join(struct.pack(e + "IIQQQQIIQQ", *s) for s in sections)
    else:
        header = struct.pack(e + "HHIIIIIHHHHHH", 2, 3, 1, 0x401000, ehsize, shoff, 0, ehsize,
                             phentsize, 1, shentsize, len(sections), 4)
        phdr = struct.pack(e + "IIIIIIII", 1, text_off, 0x401000, 0x401000, len(code), len(code), 5, 0x1000)
        shdrs = b"".join(struct.pack(e + "IIIIIIIIII", *s) for s in sections)
    out = bytearray(shoff + len(shdrs))
    out[0:len(ident + header)] = ident + header
    out[ehsize:ehsize + len(phdr)] = phdr
    for off, blob in zip(offsets, blobs):
        out[off:off + len(blob)] = blob
    out[shoff:] = shdrs
    return bytes(out)


@pytest.mark.parametrize("elf_class,little", [(64, True), (64, False), (32, True), (32, False)])
def test_other_classes_and_byte_orders(tmp_path, elf_class, little):
    path = tmp_path / f"tiny{elf_class}{'le' if little else 'be'}"
    path.write_bytes(_tiny_elf(elf_class, little))
    elf = ElfFile(path)
    assert elf.elf_class == elf_class and elf.little_endian == little and elf.type == "EXEC"
    assert [s.name for s in elf.functions()] == ["tiny_func"]
    (obj,) = [s for s in elf.symbols() if s.name == "tiny_obj"]
    assert (obj.type, obj.bind, obj.value, obj.size) == ("OBJECT", "GLOBAL", 0x401010, 8)
    assert elf.build_id == bytes(range(20)).hex()
    assert elf.vaddr_to_offset(0x401004) == 0x104
    assert elf.offset_to_vaddr(0x104) == 0x401004
    assert elf.symbol_at(0x40100F).name == "tiny_func"
    assert elf.segments[0].executable
    if shutil.which("readelf"):
        out = subprocess.run(["readelf", "-Ws", str(path)], capture_output=True, text=True).stdout
        assert "tiny_func" in out and "tiny_obj" in out


def test_single_name_and_address_searches_equal_the_whole_table(libc, libc_debug):
    """find_functions(NAME) and symbol_at(START) on a fresh file search one field of the symbol
    table for the name's string offsets / the address (``_field_bytes``); the answers must be the
    ones the fully decoded table gives, for names sharing string tails and aliases too."""
    for path in (libc, libc_debug, Path("/usr/bin/bash")):
        whole = ElfFile(path)
        functions = whole.functions()
        names = sorted({s.name for s in functions})
        picked = random.Random(4).sample(names, 150) + ["malloc", "memcpy", "free", "__libc_malloc"]
        for name in picked:
            fresh = ElfFile(path)
            assert fresh.find_functions(name) == whole.find_functions(name), (path, name)
            fresh.close()
        for sym in random.Random(5).sample(functions, 150):
            fresh = ElfFile(path)
            assert fresh.symbol_at(sym.value) == whole.symbol_at(sym.value), (path, sym)
            fresh.close()
        whole.close()


@pytest.mark.parametrize("elf_class,little", [(64, True), (64, False), (32, True), (32, False)])
def test_single_searches_in_other_classes_and_byte_orders(tmp_path, elf_class, little):
    path = tmp_path / "tiny"
    path.write_bytes(_tiny_elf(elf_class, little))
    assert [s.name for s in ElfFile(path).find_functions("tiny_func")] == ["tiny_func"]
    assert ElfFile(path).symbol_at(0x401000).name == "tiny_func"
    assert ElfFile(path).find_functions("tiny_obj") == []


def test_find_debug_file_in_a_containers_tree_first(tmp_path):
    """A binary of another mount namespace (its path under ROOT, as /proc/PID/root): its debug file is
    looked for in ROOT/usr/lib/debug first, and the debuglink directories are named inside ROOT."""
    binary = build_fixture("uprobe_target", opt="-O2")
    root = tmp_path / "root"
    stripped, debug = _split_debug(binary, root / "srv" / "app")
    os.unlink(debug)
    elf = ElfFile(stripped)
    by_id = root / "usr" / "lib" / "debug" / ".build-id" / elf.build_id[:2] / f"{elf.build_id[2:]}.debug"
    by_id.parent.mkdir(parents=True)
    _tool("objcopy", "--only-keep-debug", str(binary), str(by_id))
    found, tried = find_debug_file(elf, root=root)
    assert found == by_id and tried == [str(by_id)]
    os.unlink(by_id)
    found, tried = find_debug_file(elf, root=root)
    assert found is None
    assert str(DEBUG_ROOT / "srv" / "app" / elf.debuglink[0]) in tried
    assert str(root / "usr" / "lib" / "debug" / "srv" / "app" / elf.debuglink[0]) in tried
    assert not any(f"/debug{root}" in t for t in tried), tried
