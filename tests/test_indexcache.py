"""What makes a kernel probe fast, checked against the slow ways it replaces: an exact name searched
for in the DWARF bytes gives what the full name index gives; symbols found without loading the
symbol table (by name, by start address, in address order from the table's columns) are the loaded
table's; kprobe rules read by marker name are a full read's. And the cache that keeps them by
build-id: the compact name index, stored answers, damaged, foreign or stale files rebuilt."""
from __future__ import annotations

import bisect
import io
import os
import random
import shutil
import struct
from pathlib import Path

import pytest

from tests.helpers import build_fixture, build_go_fixture, build_static_pair, kernel_testdata, missing
from probectl.debuginfo.dwarf import dieindex, nameindex, namesearch
from probectl.debuginfo import dwarf, indexcache
from probectl.debuginfo.dwarf import DebugInfo
from probectl.debuginfo.dwarf.sectionmap import SectionMap
from probectl.debuginfo.elf import ElfFile
from probectl.debuginfo.dwarf.nameindex import CompactIndex, names_holding
from probectl.debuginfo.symtab import SymbolTables, _alias_rank
from probectl.resolve.kprobe_rules import _MARK_NAMES
from probectl.resolve.kprobe_rules import KprobeRules

ROOT = Path(__file__).resolve().parent.parent
LIBC = Path(os.path.realpath("/lib/x86_64-linux-gnu/libc.so.6"))
TARGETS = ["dwarf_structs -O2", "dwarf_inline -O0", "dwarf_inline -O2", "static", "libc"]


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv("PROBECTL_NO_CACHE", raising=False)
    return tmp_path / "cache" / "probectl"


def _gcc():
    if shutil.which("gcc") is None:
        missing("gcc is needed to build the fixtures")


def _static_pair() -> Path:
    """dwarf_static_a.c + dwarf_static_b.c as one program: static functions of one name in two CUs."""
    _gcc()
    return build_static_pair("-O2")


def _target(name: str) -> Path:
    if name == "libc":
        if not LIBC.exists():
            missing(f"no libc at {LIBC}")
        return LIBC
    if name == "static":
        return _static_pair()
    _gcc()
    base, opt = name.rsplit(" ", 1)
    return build_fixture(base, opt)


def _debuginfo(path: Path) -> DebugInfo:
    try:
        return DebugInfo.open(path)
    except Exception as exc:  # libc without libc6-dbg
        missing(str(exc))


@pytest.fixture(scope="module")
def vmlinux():
    return kernel_testdata("vmlinux")


# --- exact names without the full index -------------------------------------------------------------


def _sample(names, n: int, seed: int = 7) -> list[str]:
    names = sorted(names)
    return names if len(names) <= n else random.Random(seed).sample(names, n)


def _check_search(di: DebugInfo, names: list[str], funcs, variables) -> int:
    """Each searched name's answer equals the full index; returns how many were searched."""
    searched = 0
    for name in names:
        found = namesearch.lookup_name(di, name)
        if found is None:  # too common to search for: the full index answers
            continue
        searched += 1
        assert found == (funcs.get(name, []), variables.get(name, [])), name
    return searched


@pytest.mark.parametrize("name", TARGETS)
def test_name_search_equals_full_index(name):
    """Functions, static duplicates in two CUs, inline functions (abstract definitions and concrete
    copies found through DW_AT_abstract_origin), variables, linkage names; names that exist only
    as declarations or not at all give nothing."""
    di = _debuginfo(_target(name))
    funcs, variables = dieindex.build_indexes(di)
    names = _sample(set(funcs) | set(variables), 250 if name == "libc" else 2000)
    extra = ["no_such_name_xyz", "printf", "malloc", "main", "x"]
    searched = _check_search(di, names + extra, funcs, variables)
    assert searched >= len(names) // 2


def test_name_search_refuses_what_it_cannot_see(monkeypatch):
    """Type units, string offset tables or supplementary files, references into other units, a
    bad-UTF-8 name: no answer (None), so the full index is used."""
    di = _debuginfo(_target("dwarf_structs -O2"))
    assert namesearch.lookup_name(di, "main") is not None
    assert namesearch.lookup_name(di, "ma\ufffdin") is None
    assert namesearch.lookup_name(di, "") == ([], [])
    for section in namesearch._INDIRECT_NAME_SECTIONS:
        other = _debuginfo(_target("dwarf_structs -O2"))
        monkeypatch.setattr(other.dwarf, section, other.dwarf.debug_info_sec)
        assert namesearch.lookup_name(other, "main") is None
    monkeypatch.undo()
    other = _debuginfo(_target("dwarf_structs -O2"))
    monkeypatch.setattr(namesearch, "_foreign_references", lambda abbrev: True)
    assert namesearch.lookup_name(other, "main") is None


def _abbrev(*entries: tuple[int, int, list[tuple[int, int]]]) -> bytes:
    def uleb(v: int) -> bytes:
        out = bytearray()
        while True:
            b = v & 0x7F
            v >>= 7
            out.append(b | (0x80 if v else 0))
            if not v:
                return bytes(out)

    body = b"".join(uleb(code) + uleb(tag) + b"\0" + b"".join(uleb(a) + uleb(f) for a, f in specs) + b"\0\0"
                    for code, tag, specs in entries)
    return body + b"\0"


def test_foreign_reference_check():
    """DW_AT_abstract_origin/DW_AT_specification as DW_FORM_ref_addr, ref_sig8 or indirect are
    found; the same bytes as an entry's code and tag (code 0x31, DW_TAG_typedef 0x16) are not."""
    plain = [(1, 0x2E, [(0x03, 0x0E), (0x31, 0x13), (0x3A, 0x0B)]), (2, 0x34, [(0x47, 0x13), (0x02, 0x18)])]
    assert not namesearch._foreign_references(_abbrev(*plain))
    for attr in (0x31, 0x47):
        for form in (0x10, 0x16, 0x20):
            assert namesearch._foreign_references(_abbrev(*plain, (3, 0x1D, [(0x58, 0x0B), (attr, form)])))
    codes = [(0x31, 0x16, [(0x03, 0x08)]), (0x47, 0x10, [(0x03, 0x08)]), (0x18B1, 0x20, [(0x03, 0x08)])]
    assert not namesearch._foreign_references(_abbrev(*codes))
    assert not namesearch._foreign_references(_abbrev(*codes[:1]))  # the code at the very start


def test_debuginfo_searches_and_keeps_answers(private_cache, monkeypatch):
    """With the search on (a large file), find_functions and variable references equal those of the
    full index; the answers are kept on disk and the next run asks nothing; a name too common to
    search for makes the full index, which is cached and then answers instead of searching."""
    path = _target("libc")
    reference = _debuginfo(path)
    funcs, variables = reference.name_index(), reference.variable_index()
    candidates = _sample(set(funcs) | set(variables), 80, seed=3) + ["malloc", "__libc_malloc", "no_such_xyz"]
    names = [n for n in candidates if namesearch.lookup_name(reference, n) is not None]
    common = next(n for n in ("printf", "_exit", "free") if namesearch.lookup_name(reference, n) is None)
    assert len(names) > 40

    def answers(di: DebugInfo, which) -> dict:
        return {n: ([f.key for f in di.find_functions(n)], di.variable_refs(n)) for n in which}

    expected = answers(reference, names + [common])
    shutil.rmtree(private_cache)

    monkeypatch.setattr(dwarf, "SEARCH_NAMES_FROM", 0)
    searches = []
    real = namesearch.lookup_name
    monkeypatch.setattr(namesearch, "lookup_name", lambda di, n: searches.append(n) or real(di, n))
    built = []
    real_build = dieindex.build_indexes
    monkeypatch.setattr(dieindex, "build_indexes", lambda di: built.append(di) or real_build(di))
    di = _debuginfo(path)
    assert answers(di, names) == {n: expected[n] for n in names}
    assert set(searches) == set(names) and built == [] and di._name_index is None
    (stored,) = private_cache.glob("dwarf-lookups-*")
    assert stored.name == f"dwarf-lookups-{di.index_key}.bin"
    searches.clear()
    again = _debuginfo(path)
    assert answers(again, names) == {n: expected[n] for n in names} and searches == []
    # a common name: the full index is made (and kept), and answers everything after it
    assert answers(again, [common]) == {common: expected[common]}
    assert len(built) == 1 and again._name_index is not None
    searches.clear()
    stored.unlink()
    third = _debuginfo(path)
    assert answers(third, names[:10]) == {n: expected[n] for n in names[:10]}
    assert searches == [] and len(built) == 1 and third._name_index is not None
    # the full index's answer to the name that loaded it was kept with the lookups: a run of that name
    # reads them, not the full index
    full_loads = []
    real_load_names = nameindex.load_names
    monkeypatch.setattr(nameindex, "load_names", lambda di: full_loads.append(di) or real_load_names(di))
    fourth = _debuginfo(path)
    assert answers(fourth, names[:1]) == {names[0]: expected[names[0]]}
    assert searches == [] and full_loads == [] and fourth._name_index is None


@pytest.mark.vmlinux
def test_name_search_on_the_kernel(vmlinux):
    """On Debian's vmlinux: functions of every kind the kernel definitions use, static functions
    defined in several files, variables; the full index built from every unit is the reference."""
    di = DebugInfo.open(vmlinux)
    funcs, variables = dieindex.build_indexes(di)
    names = ["tcp_sendmsg", "tcp_sendmsg_locked", "vfs_read", "do_sys_openat2", "ext4_file_write_iter",
             "__x64_sys_getpid", "do_execveat_common", "kernel_clone", "handle_mm_fault", "init_net",
             "tcp_hashinfo", "sysctl_tcp_mem", "jiffies", "kmalloc", "no_such_function_xyz"]
    names += _sample([n for n, refs in funcs.items() if len({cu for cu, _ in refs}) > 1], 6, seed=1)
    names += _sample(funcs, 10, seed=2) + _sample(variables, 6, seed=3)
    assert _check_search(di, names, funcs, variables) >= 15


def _first_definitions_per_cu(di: DebugInfo, name: str) -> list[int]:
    """find_functions(name) the slow way: every subprogram ``cu_functions`` lists in each CU the
    index names, the first matching definition per CU (what find_functions did before it
    trusted the index's DIE offsets)."""
    found = []
    for cu_offset in sorted({cu for cu, _ in di.function_refs(name)}):
        cu = di.dwarf.get_CU_at(cu_offset)
        found += [d.offset for d in di.cu_functions(cu) if di._is_definition(d) and di._matches(d, name, False)][:1]
    return found


def _check_exact_finds(di: DebugInfo, names: list[str]) -> None:
    for name in names:
        assert [f.die.offset for f in di.find_functions(name)] == _first_definitions_per_cu(di, name), name


@pytest.mark.parametrize("name", TARGETS)
def test_exact_names_find_what_every_subprogram_walk_finds(name):
    di = _debuginfo(_target(name))
    _check_exact_finds(di, _sample(di.name_index(), 300, seed=5))


@pytest.mark.vmlinux
def test_exact_kernel_names_find_what_every_subprogram_walk_finds(vmlinux):
    """On the kernel: names with static definitions in several files, and a sample of the rest."""
    di = DebugInfo.open(vmlinux)
    elf = ElfFile(vmlinux)
    functions = sorted({s.name for s in elf.functions()})
    names = ["tcp_sendmsg", "vfs_read", "do_sys_openat2", "kernel_clone", "handle_mm_fault", "kmalloc",
             "perf_trace_sched_switch", "nr_free_pages"]  # (a static one, and others)
    names += _sample(functions, 25, seed=11)
    _check_exact_finds(di, names)


# --- symbols without the symbol table -----------------------------------------------------------


def _elf_targets() -> list[Path]:
    out = [Path("/bin/bash")]
    if LIBC.exists():
        out.append(LIBC)
        debug = Path("/usr/lib/debug/.build-id") / ElfFile(LIBC).build_id[:2] / f"{ElfFile(LIBC).build_id[2:]}.debug"
        if debug.exists():
            out.append(debug)
    if shutil.which("gcc"):
        out += [build_fixture("uprobe_target", "-O2"), build_fixture("uprobe_target", "-O0", pie=False)]
    return out


def _reference_order(elf: ElfFile):
    funcs = sorted(elf.functions(), key=lambda s: (s.value, _alias_rank(s)))
    return [s.value for s in funcs], funcs


def _reference_symbol_at(values, funcs, vaddr):
    def contains(sym):
        return sym.value <= vaddr < sym.value + sym.size or sym.value == vaddr

    i = bisect.bisect_right(values, vaddr) - 1
    for j in range(i, max(i - 64, -1), -1):
        if contains(funcs[j]):
            for k in range(bisect.bisect_left(values, funcs[j].value), j + 1):
                if contains(funcs[k]):
                    return funcs[k]
    return None


def _check_symbols(path: Path, step: int = 1) -> None:
    values, funcs = _reference_order(ElfFile(path))
    index = ElfFile(path).symbol_tables._address_index()
    assert list(index.values) == values
    assert [index[k] for k in range(len(index))] == funcs
    lazy = ElfFile(path)
    for sym in funcs[::step]:
        lazy.symbol_tables._by_address = None  # the start-address path, without the sorted order
        assert lazy.symbol_at(sym.value) == _reference_symbol_at(values, funcs, sym.value)
    for sym in funcs[::step]:
        for vaddr in (sym.value + sym.size // 2, sym.value + max(sym.size, 1) - 1, sym.value + sym.size):
            assert lazy.symbol_at(vaddr) == _reference_symbol_at(values, funcs, vaddr)
        lo, hi = bisect.bisect_left(values, sym.value), bisect.bisect_right(values, sym.value)
        assert lazy.aliases(sym) == funcs[lo:hi]
    loaded = ElfFile(path)
    by_name = {}
    for s in loaded.symbols():
        by_name.setdefault(s.name, []).append(s)
    names = _sample(by_name, 300) + ["no_such_symbol_xyz"]
    fresh = ElfFile(path)
    assert fresh.find_symbols_named(names) == {n: by_name.get(n, []) for n in names}
    for n in names[:40]:
        assert ElfFile(path).find_symbols(n) == by_name.get(n, [])
        assert ElfFile(path).find_functions(n) == loaded.find_functions(n)


@pytest.mark.parametrize("path", _elf_targets(), ids=lambda p: p.name)
def test_symbols_without_the_table(path):
    """Address order, symbol_at (own starts and inside), aliases, symbols by name: equal to what the
    fully loaded table gives (versions, duplicates merged across .symtab and .dynsym, IFUNCs)."""
    _check_symbols(path)


@pytest.mark.vmlinux
def test_kernel_symbols_without_the_table(vmlinux):
    _check_symbols(vmlinux, step=251)


def test_address_order_is_cached(private_cache, monkeypatch):
    """A large table's order is kept (by build-id) and read back; a damaged or foreign file is rebuilt."""
    if not LIBC.exists():
        missing(f"no libc at {LIBC}")
    monkeypatch.setattr("probectl.debuginfo.symtab._CACHED_TABLE_BYTES", 0)
    values, funcs = _reference_order(ElfFile(LIBC))
    sorts = []
    real = SymbolTables._sort_functions
    monkeypatch.setattr(SymbolTables, "_sort_functions", lambda self, t: sorts.append(1) or real(self, t))
    ElfFile(LIBC).symbol_tables._address_index()
    (cached,) = private_cache.glob("elf-functions-*")
    key = indexcache.file_key(LIBC, ElfFile(LIBC).build_id)
    assert cached.name == f"elf-functions-{key}.bin" and len(sorts) == 1
    index = ElfFile(LIBC).symbol_tables._address_index()
    assert len(sorts) == 1 and [index[k] for k in range(len(index))] == funcs
    good = cached.read_bytes()
    for damaged in (b"", good[:-3], good[:40] + bytes([good[40] ^ 1]) + good[41:]):
        cached.write_bytes(damaged)
        index = ElfFile(LIBC).symbol_tables._address_index()
        assert [index[k] for k in range(len(index))] == funcs
        assert cached.read_bytes() == good
    assert len(sorts) == 4


def test_address_ranges_are_cached(private_cache, monkeypatch):
    """A large .debug_aranges (libc6-dbg's) is parsed once and read back as the same table; a
    damaged file is parsed again and replaced; a small one (a fixture's) is not kept."""
    from probectl.debuginfo.dwarf import dieindex

    try:
        DebugInfo.open(LIBC).close()
    except Exception as exc:  # (DebugInfoError: no libc6-dbg)
        missing(f"libc6-dbg is not installed: {exc}")
    parses = []
    real = dieindex.parse_aranges
    monkeypatch.setattr(dieindex, "parse_aranges", lambda *a: parses.append(1) or real(*a))

    def table():
        with DebugInfo.open(LIBC) as di:  # (a kept table is read back as arrays: compared as lists)
            ranges = dieindex.address_ranges(di)
            assert ranges is not None
            return tuple(map(list, ranges)), real(dieindex.section_data(di.dwarf.debug_aranges_sec))

    first, truth = table()
    assert first == truth and len(truth[0]) > 1000 and len(parses) == 1
    (cached,) = private_cache.glob("dwarf-aranges-*")
    again, _ = table()
    assert again == truth and len(parses) == 1
    good = cached.read_bytes()
    for damaged in (b"", good[:-3], good[:40] + bytes([good[40] ^ 1]) + good[41:]):
        cached.write_bytes(damaged)
        assert table()[0] == truth and cached.read_bytes() == good
    assert len(parses) == 4
    with DebugInfo.open(_target("dwarf_structs -O2")) as di:
        assert di.cu_at(di.find_functions("paint")[0].entry) is not None
    assert len(list(private_cache.glob("dwarf-aranges-*"))) == 1


def test_unit_scans_are_kept(private_cache, monkeypatch):
    """A unit's function bounds and inline instances by origin, scanned once and read back by the
    next run as the same; a kept entry of another shape is scanned anew; the instances add finds
    are the same with and without the kept scans."""
    from probectl.debuginfo.dwarf import dieindex

    target = _target("dwarf_inline -O2")
    scans = []
    for name in ("function_bounds", "instances_by_origin"):
        real = getattr(dieindex, name)
        monkeypatch.setattr(dieindex, name, lambda *a, _real=real, _name=name: scans.append(_name) or _real(*a))

    addresses = sorted(s.value for s in ElfFile(target).functions() if s.value)

    def answers():
        with DebugInfo.open(target) as di:
            at = [(fn.die.offset if fn is not None else None) for fn in map(di.function_at, addresses)]
            fns = [f for name in di.function_names("*") for f in di.probe_functions(name)]
            return [(f.name, f.entry) for f in fns], at

    first = answers()
    made = len(scans)
    assert made >= 2 and "instances_by_origin" in scans and "function_bounds" in scans
    (kept,) = private_cache.glob("dwarf-unit-scans-*")
    assert answers() == first and len(scans) == made, "read back, not scanned"
    stored = indexcache.load("dwarf-unit-scans", kept.name[len("dwarf-unit-scans-"):-len(".bin")],
                             DebugInfo.open(target)._unit_scans().fingerprint)
    assert stored is not None
    tables = stored[0]
    for cu in tables["origins"]:
        tables["origins"][cu] = {"not": "an index"}
    indexcache.store("dwarf-unit-scans", kept.name[len("dwarf-unit-scans-"):-len(".bin")],
                     DebugInfo.open(target)._unit_scans().fingerprint, (tables,))
    assert answers() == first and "instances_by_origin" in scans[made:]
    monkeypatch.setenv("PROBECTL_NO_CACHE", "1")
    assert answers() == first


def test_prologue_rows_are_kept(private_cache, monkeypatch):
    """The rows the prologue skip reads at a function's entry in a large line table (libc's units),
    read once and kept when the debug file closes: the next run skips the same prologues without
    decoding a line program; a damaged kept file is read as none; small tables (a fixture's) are not kept."""
    from probectl.debuginfo.dwarf import lines

    addresses = _sample(sorted({sym.value for sym in ElfFile(LIBC).functions() if sym.value}), 40, seed=6)

    def skips(di: DebugInfo) -> list[tuple[int, int]]:
        fns = [fn for fn in map(di.function_at, addresses)
               if fn is not None and fn.entry and "DW_AT_high_pc" in fn.die.attributes]
        assert len(fns) >= 20
        return [(fn.entry, lines.skip_prologue(di, fn)) for fn in fns]

    decoded: list[int] = []  # (the size of each line program decoded)
    real = lines.LineTable._decode
    monkeypatch.setattr(lines.LineTable, "_decode",
                        staticmethod(lambda data, *a, **k: decoded.append(len(data)) or real(data, *a, **k)))
    with _debuginfo(LIBC) as di:
        first = skips(di)
    assert any(entry != skipped for entry, skipped in first), "some prologue is skipped"
    assert any(size >= lines.KEPT_FROM for size in decoded), "some table is large"
    (kept,) = private_cache.glob("line-entries-*")
    decoded.clear()
    with _debuginfo(LIBC) as di:
        assert skips(di) == first
    assert decoded and all(size < lines.KEPT_FROM for size in decoded), "only the small tables are decoded again"
    kept.write_bytes(kept.read_bytes()[:-5])
    decoded.clear()
    with _debuginfo(LIBC) as di:
        assert skips(di) == first
    assert any(size >= lines.KEPT_FROM for size in decoded), "a damaged kept file is read as none"
    monkeypatch.setenv("PROBECTL_NO_CACHE", "1")
    with _debuginfo(LIBC) as di:
        assert skips(di) == first
    monkeypatch.delenv("PROBECTL_NO_CACHE")
    small = _target("dwarf_structs -O2")
    with DebugInfo.open(small) as di:
        fn = di.find_functions("paint")[0]
        lines.skip_prologue(di, fn)
        assert di.line_table(fn.cu).program_size < lines.KEPT_FROM
    assert len(list(private_cache.glob("line-entries-*"))) == 1


def test_unit_scans_are_written_once_a_run(private_cache, monkeypatch, tmp_path):
    """The scans of many units made in one run are written once: when the debug file is closed, or at
    exit when it never is (as a command leaves it open); the next run reads them back, scanning none."""
    import subprocess
    import sys

    target = str(build_go_fixture("go_target"))  # (a unit per package)
    writes: list[str] = []
    real_store = indexcache.store
    monkeypatch.setattr(indexcache, "store", lambda kind, *rest: writes.append(kind) or real_store(kind, *rest))
    with DebugInfo.open(target) as di:
        units = [cu.cu_offset for cu in di.dwarf.iter_CUs()][:20]
        found = [di._instances_by_origin(di.dwarf.get_CU_at(offset)) for offset in units]
        assert len(units) == 20 and "dwarf-unit-scans" not in writes
    assert writes.count("dwarf-unit-scans") == 1
    scans = []
    real_scan = dieindex.instances_by_origin
    monkeypatch.setattr(dieindex, "instances_by_origin", lambda *a: scans.append(a) or real_scan(*a))
    with DebugInfo.open(target) as di:
        assert [di._instances_by_origin(di.dwarf.get_CU_at(offset)) for offset in units] == found
    assert not scans and writes.count("dwarf-unit-scans") == 1, "read back, nothing new written"

    other = tmp_path / "other-cache"
    script = ("import sys\nfrom probectl.debuginfo.dwarf import DebugInfo\n"
              "di = DebugInfo.open(sys.argv[1])\n"
              "for cu in list(di.dwarf.iter_CUs())[:20]:\n    di._instances_by_origin(cu)\n")
    subprocess.run([sys.executable, "-c", script, target], check=True,
                   env=dict(os.environ, XDG_CACHE_HOME=str(other)))
    (kept,) = (other / "probectl").glob("dwarf-unit-scans-*")
    assert kept.read_bytes() == next(private_cache.glob("dwarf-unit-scans-*")).read_bytes()


# --- kprobe rules -------------------------------------------------------------------------------


@pytest.mark.vmlinux
def test_kprobe_rules_by_name_equal_a_full_read(vmlinux, private_cache):
    elf = ElfFile(vmlinux)
    marks = {s.name: s.value for s in elf.symbols() if s.name in _MARK_NAMES}
    rules = KprobeRules.from_vmlinux(ElfFile(vmlinux))
    assert rules.text == (marks["_stext"], marks["_etext"])
    assert [a[:2] for a in rules.areas] == [(marks[a], marks[b]) for a, b in (
        ("__kprobes_text_start", "__kprobes_text_end"), ("__noinstr_text_start", "__noinstr_text_end"),
        ("__entry_text_start", "__entry_text_end"))]

    def array(start: str, stop: str) -> list[int]:
        sec = next(s for s in elf.sections if s.has_data and s.addr <= marks[start] < s.addr + s.size)
        data = elf.section_data(sec.name)[marks[start] - sec.addr:marks[stop] - sec.addr]
        return [v for (v,) in struct.iter_unpack("<Q", data)]

    assert rules.blacklisted == frozenset(array("__start_kprobe_blacklist", "__stop_kprobe_blacklist"))
    assert rules.ftrace_sites == tuple(sorted(array("__start_mcount_loc", "__stop_mcount_loc")))
    (cached,) = private_cache.glob("kprobe-rules-*")
    assert KprobeRules.from_vmlinux(ElfFile(vmlinux)) == rules
    cached.write_bytes(cached.read_bytes()[:-1])
    assert KprobeRules.from_vmlinux(ElfFile(vmlinux)) == rules


def test_kprobe_rules_of_a_program_are_none(private_cache):
    assert KprobeRules.from_vmlinux(ElfFile("/bin/bash")) is None
    assert KprobeRules.from_vmlinux(ElfFile("/bin/bash")) is None  # remembered as such


# --- the cache itself ---------------------------------------------------------------------------


def test_compact_index_round_trip():
    index = {"main": [(0, 11)], "ma": [(0, 12), (40, 50)], "zeta": [], "\u00e9t\u00e9": [(1 << 40, 3)],
             "a\udcff": [(2, 2)], "": [(9, 9)], "b": [(5, 6)]}
    compact = CompactIndex.decode(CompactIndex.encode(index))
    assert compact == index and index == compact and dict(compact.items()) == index
    assert len(compact) == len(index) and set(compact) == set(index)
    for name, refs in index.items():
        assert compact[name] == refs and name in compact and compact.get(name) == refs
    for missing in ("mai", "mainx", "c", "\u00e9", "zz"):
        assert missing not in compact and compact.get(missing, ()) == ()
    for parts in [("ma",), ("a",), ("t\u00e9", "b"), ("\udcff",), ("zz",), ("",), ("a", "a"), ("eta", "mai")]:
        # (the names searched in the one text a CompactIndex keeps them in: what filtering them finds)
        assert compact.names_holding(parts) == names_holding(index, parts) == sorted(
            {n for n in index for p in parts if p and p in n}, key=lambda n: n.encode("utf-8", "surrogateescape"))
    empty = CompactIndex.decode(CompactIndex.encode({}))
    assert len(empty) == 0 and list(empty) == [] and empty.get("x") is None and empty == {}
    assert empty.names_holding(("a",)) == []
    blob, starts, ref_starts, refs = CompactIndex.encode(index)
    for bad in ([], (blob, starts, ref_starts), (blob, starts[:-8], ref_starts, refs),
                (blob, starts, ref_starts, refs[:-8]), (blob + b"\0x", starts, ref_starts, refs),
                (blob, starts, ref_starts, refs + b"\0"), (blob, starts, ref_starts, "refs")):
        assert CompactIndex.decode(bad) is None


def _encoded_one_by_one(index):
    """CompactIndex.encode's columns made name by name: the reference its C-level passes must equal."""
    from array import array

    names = sorted((name.encode("utf-8", "surrogateescape"), name) for name in index)
    starts, ref_starts, refs = array("Q"), array("Q", [0]), array("Q")
    pos = 0
    for raw, name in names:
        starts.append(pos)
        pos += len(raw) + 1
        for cu, die in index[name]:
            refs.extend((cu, die))
        ref_starts.append(len(refs) // 2)
    return b"\0".join(raw for raw, _ in names), starts.tobytes(), ref_starts.tobytes(), refs.tobytes()


def test_compact_index_encodes_as_name_by_name():
    rnd = random.Random(23)
    # (text order and byte order differ where a surrogate escape meets U+0800..U+FFFF; two names may
    # have the same bytes: "\udcc3\udca9" and "\u00e9")
    alphabet = ["a", "b", "z", "\u00e9", "\u0800", "\ud7ff", "\ue000", "\U0001f600", "\udc80", "\udcc3", "\udca9", "\udcff"]
    indexes = [{}, {"": []}, {"a": [(1, 2)]}, {"\udcc3\udca9": [(3, 3)], "\u00e9": [(4, 4)], "\ue000": []}]
    for _ in range(500):
        indexes.append({"".join(rnd.choice(alphabet[:rnd.choice((3, len(alphabet)))]) for _ in range(rnd.randrange(5))):
                        [(rnd.randrange(1 << 64), rnd.randrange(1 << 20)) for _ in range(rnd.randrange(3))]
                        for _ in range(rnd.randrange(10))})
    for index in indexes:
        assert CompactIndex.encode(index) == _encoded_one_by_one(index), index


def test_store_and_load(private_cache, monkeypatch):
    assert indexcache.load("kind", "key", (1,)) is None
    indexcache.store("kind", "key", (1,), ("a", b"b", (3,)))
    assert indexcache.load("kind", "key", (1,)) == ("a", b"b", (3,))
    assert indexcache.load("kind", "key", (2,)) is None  # another format or contents
    assert indexcache.load("other", "key", (1,)) is None
    path = private_cache / "kind-key.bin"
    data = path.read_bytes()
    for damaged in (b"", data[:-1], data[:20], b"x" + data[1:], data[:-1] + bytes([data[-1] ^ 0x40])):
        path.write_bytes(damaged)
        assert indexcache.load("kind", "key", (1,)) is None
    for i in range(indexcache.MAX_FILES + 3):
        indexcache.store("many", f"{i:04d}", (1,), (i,))
        os.utime(private_cache / f"many-{i:04d}.bin", (1000 + i, 1000 + i))
    indexcache.store("kind", "key", (1,), (1,))
    names = {p.name for p in private_cache.iterdir()}
    assert len([n for n in names if n.startswith("many-")]) == indexcache.MAX_FILES
    assert "kind-key.bin" in names  # another kind's files are not counted
    monkeypatch.setenv("PROBECTL_NO_CACHE", "1")
    assert indexcache.load("kind", "key", (1,)) is None
    indexcache.store("off", "key", (1,), (1,))
    assert not (private_cache / "off-key.bin").exists()
    bash = os.stat("/bin/bash")  # (a build-id names a build; size and time tell a damaged copy from it)
    assert indexcache.file_key("/bin/bash", "abc") == f"abc-{bash.st_size:x}-{bash.st_mtime_ns:x}"
    assert indexcache.file_key("/bin/bash", None).startswith("path-")


def test_parts_are_read_one_by_one(private_cache, monkeypatch):
    """Parts come back with their table, each read when asked for and checked on its own: a damaged
    part is None and the others still read; a damaged header, a truncated or longer file, another
    fingerprint or a file of the other format is no parts at all."""
    parts = [b"first", b"", bytes(range(256)) * 40, b"last"]
    assert indexcache.load_parts("kind", "key", (1,)) is None
    indexcache.store_parts("kind", "key", (1,), ("table", (2, 3)), parts)
    stored = indexcache.load_parts("kind", "key", (1,))
    assert stored is not None and stored.table == ("table", (2, 3)) and len(stored) == 4
    assert [stored.part(i) for i in range(4)] == parts and stored.part(4) is None and stored.part(-1) is None
    stored.close()
    assert stored.part(0) is None
    assert indexcache.load_parts("kind", "key", (2,)) is None and indexcache.load_parts("other", "key", (1,)) is None
    path = private_cache / "kind-key.bin"
    good = path.read_bytes()
    at = good.index(parts[2])
    path.write_bytes(good[:at + 7] + bytes([good[at + 7] ^ 1]) + good[at + 8:])
    stored = indexcache.load_parts("kind", "key", (1,))
    assert [stored.part(i) for i in range(4)] == [parts[0], parts[1], None, parts[3]]
    stored.close()
    for damaged in (b"", good[:10], good[:-1], good + b"x", good[:20] + bytes([good[20] ^ 1]) + good[21:],
                    good[:30] + b"\xff" + good[31:]):
        path.write_bytes(damaged)
        assert indexcache.load_parts("kind", "key", (1,)) is None
    indexcache.store("kind", "key", (1,), ("payload",))  # the other format
    assert indexcache.load_parts("kind", "key", (1,)) is None
    indexcache.store_parts("kind", "key", (1,), (), [])
    assert indexcache.load("kind", "key", (1,)) is None and len(indexcache.load_parts("kind", "key", (1,))) == 0
    path.chmod(0o666)  # writable by others: not read
    assert indexcache.load_parts("kind", "key", (1,)) is None
    monkeypatch.setenv("PROBECTL_NO_CACHE", "1")
    indexcache.store_parts("off", "key", (1,), (), [b"x"])
    assert not (private_cache / "off-key.bin").exists()


def test_kept_windows_are_used_only_as_stored(private_cache):
    """The windows of compressed sections a run kept answer the next run's reads; a table that does
    not agree with its parts (a window longer than its part) is not used at all."""
    import zlib

    from probectl.debuginfo.dwarf import inflating

    data = bytes(range(256)) * 64
    compressed = {".debug_x": (zlib.compress(data), len(data))}
    first, keep = inflating.open_sections(compressed, "f", "key")
    first[".debug_x"].seek(5000)
    assert first[".debug_x"].read(10) == data[5000:5010]
    assert keep is not None
    keep()  # (what the reader's finalizer runs when it is collected, or at exit)
    fingerprint = ((".debug_x", len(compressed[".debug_x"][0]), len(data)),)
    again = inflating.open_sections(compressed, "f", "key")[0][".debug_x"]
    again.seek(5000)
    assert again.read(10) == data[5000:5010] and again.inflated == 0
    indexcache.store_parts(inflating.CACHE_KIND, "key", fingerprint, ((".debug_x", ((4096, 8192),)),),
                           [data[4096:8192]])
    lying = inflating.open_sections(compressed, "f", "key")[0][".debug_x"]
    lying.seek(5000)
    assert lying.read(10) == data[5000:5010] and lying.inflated > 0


@pytest.mark.parametrize("offset,size", [(0, 5000), (4095, 1), (4097, 70000), (123457, 9000)])
def test_mapped_sections_read_like_copies(tmp_path, offset, size):
    """A mapped section reads, seeks and tells like pyelftools' in-memory copy of it, and ends
    where the section ends."""
    rng = random.Random(offset)
    content = bytes(rng.randrange(256) for _ in range(offset + size + 777))
    (tmp_path / "file").write_bytes(content)
    raw = content[offset:offset + size]
    with open(tmp_path / "file", "rb") as f:
        stream = SectionMap(f.fileno(), offset, size)
    copy = io.BytesIO(raw)
    assert stream.getvalue() == raw
    for _ in range(200):
        pos = rng.randrange(len(raw))
        n = rng.randrange(64)
        stream.seek(pos)
        copy.seek(pos)
        assert stream.read(n) == copy.read(n) and stream.tell() == copy.tell()
        if stream.tell() + 3 <= size:
            stream.seek(3, os.SEEK_CUR)
            copy.seek(3, os.SEEK_CUR)
            assert stream.tell() == copy.tell()
    stream.seek(-1, os.SEEK_END)
    copy.seek(-1, os.SEEK_END)
    assert stream.read() == copy.read() and stream.read(10) == b"" and stream.tell() == size


@pytest.mark.vmlinux
def test_kernel_dwarf_is_mapped(vmlinux):
    di = DebugInfo.open(vmlinux)
    for name in ("debug_info_sec", "debug_abbrev_sec", "debug_str_sec", "debug_line_sec", "debug_loclists_sec"):
        sec = getattr(di.dwarf, name)
        assert isinstance(sec.stream, SectionMap), name
        stream = sec.stream
        stream.seek(sec.size - 16)
        assert stream.read(100) == ElfFile(vmlinux).section_bytes_at(
            ElfFile(vmlinux).section(sec.name), sec.size - 16, 16)


# --- the function at an address ---------------------------------------------------------------------


def _function_at_by_parsing(di: DebugInfo, address: int):
    cu = di.cu_at(address)
    if cu is None:
        return None
    for die in di.cu_functions(cu):
        if di.has_code(die) and di.die_contains(die, address):
            return die.offset
    return None


def _check_function_at(path: Path, count: int) -> None:
    fast, reference = _debuginfo(path), _debuginfo(path)
    funcs = ElfFile(path).functions() or ElfFile(fast.path).functions()
    addresses = []
    for f in random.Random(1).sample(funcs, min(len(funcs), count)):
        addresses += [f.value, f.value + f.size // 2, f.value + max(f.size, 1) - 1, f.value + f.size]
    for address in addresses:
        found = fast.function_at(address)
        assert (found.die.offset if found else None) == _function_at_by_parsing(reference, address), hex(address)


@pytest.mark.parametrize("name", TARGETS)
def test_function_at_from_bytes(name):
    """function_at reads the subprograms' code bounds from the bytes and parses only the DIE it
    returns (and those with range lists): the same DIE as parsing every function of the CU."""
    _check_function_at(_target(name), 150)


@pytest.mark.vmlinux
def test_kernel_function_at_from_bytes(vmlinux):
    _check_function_at(vmlinux, 8)


def test_a_long_lived_process_keeps_no_file_open_for_definitions_it_resolved(private_cache):
    """A test run or a script of the Python API resolves thousands of definitions in one process. The
    indexes a run adds are written when their DebugInfo is closed or collected, not kept pending with
    it until exit (which held every DebugInfo, and its open file, for the process's life), and a load
    from the cache freezes nothing outside the command line (gc.freeze kept cycles made before it):
    the descriptors of the files read go back to what they were, and what was learnt is on disk."""
    import gc

    from probectl.cli.probes import make_target
    from probectl.probes import ProbeSet
    from tests.helpers import build_cxx_fixture, build_go_fixture

    assert indexcache.FREEZE_AFTER_LOAD is False
    cases = [("shop::Cart::add it qty", build_cxx_fixture("cxx_shop", "-O2")),
             ("main.work depth", build_go_fixture("go_target"))]  # (compressed DWARF: inflated windows kept)
    libstdcxx = Path("/usr/lib/x86_64-linux-gnu/debug/libstdc++.so.6.0.30")
    if libstdcxx.exists():  # (prologue rows kept: a large line table)
        cases.append(("_ZNSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEE9_M_appendEPKcm __s", libstdcxx))

    def open_files() -> list[str]:
        names = []
        for fd in os.listdir("/proc/self/fd"):
            try:
                names.append(os.readlink(f"/proc/self/fd/{fd}"))
            except OSError:
                pass
        return sorted(names)

    gc.collect()
    before = open_files()
    for _ in range(3):
        for definition, binary in cases:
            ProbeSet.resolve([definition], make_target(str(binary)))
    gc.collect()
    assert open_files() == before
    kinds = {path.name.split("-")[0] + "-" + path.name.split("-")[1] for path in private_cache.iterdir()}
    assert {"dwarf-unit", "dwarf-inflated"} <= kinds, kinds
