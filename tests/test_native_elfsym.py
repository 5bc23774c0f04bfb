"""The native decoder of a whole ELF symbol table (native/elfsym.c, ``_native.elf_symbols``, which
``SymbolTables._decode_symbols`` uses for a whole table) against the Python decoder it stands in for
(``SymbolTables.python_symbols``, the reference): the same (entry index, symbol) list, every field of
every symbol the same, in the same order, on libc (and its debug file), libstdc++ (and
libstdc++6-12-dbg), bash, a vmlinux, the C, C++, Rust and Go fixtures and a tiny ELF of each class and
byte order; with versions and extended section indexes of every shape put in place of a table's own;
on damaged copies of a fixture's tables the same symbols before the same error. And the C core's
reading of entries and names under ASan and UBSan, on libstdc++6-12-dbg's table and a tiny 32-bit
big-endian one, whole and damaged (native/fuzz/elfsym_fuzz.c)."""
from __future__ import annotations

import random
import struct
from pathlib import Path

import pytest

from probectl import _native
from probectl.debuginfo.elf import ElfFile
from probectl.debuginfo.symtab import SHN_ABS, SHN_XINDEX, VERSYM_HIDDEN, ElfSymbol, VersionTable
from probectl.errors import ProbectlError
from tests.helpers import (build_cxx_fixture, build_fixture, build_go_fixture, build_rust_fixture, kernel_testdata,
                           missing, run_sanitized, sanitized_driver)
from tests.test_elf import DEBUG_ROOT, LIBC, _tiny_elf

LIBSTDCXX = Path("/usr/lib/x86_64-linux-gnu/libstdc++.so.6")
LIBSTDCXX_DBG = Path("/usr/lib/x86_64-linux-gnu/debug/libstdc++.so.6.0.30")


def _fields(decoded) -> list:
    """(entry index, class, fields in order) of each decoded symbol: what two decoders must agree on."""
    return [(i, type(sym), list(sym.__dict__.items())) for i, sym in decoded]


def _assert_same_tables(path: Path) -> int:
    """Every symbol table of ``path`` decoded natively as in Python; the count of symbols."""
    elf = ElfFile(path)
    try:
        total = 0
        tables = elf.symbol_tables._tables()
        assert tables
        for sec, table in tables:
            native = list(elf.symbol_tables._decode_table(sec, table))
            assert _fields(native) == _fields(elf.symbol_tables.python_symbols(sec, table)), (path, sec.name)
            total += len(native)
        return total
    finally:
        elf.close()


def _libc_debug() -> Path:
    elf = ElfFile(LIBC)
    path = DEBUG_ROOT / ".build-id" / elf.build_id[:2] / f"{elf.build_id[2:]}.debug"
    if not path.exists():
        missing("libc6-dbg is not installed (no libc debug file under /usr/lib/debug/.build-id)")
    return path


@pytest.mark.parametrize("which", ["libc", "libc debug", "libstdc++", "libstdc++ debug", "bash"])
def test_system_files(which):
    path = {"libc": LIBC, "libstdc++": LIBSTDCXX, "libstdc++ debug": LIBSTDCXX_DBG, "bash": Path("/usr/bin/bash")}.get(
        which) or _libc_debug()
    if not path.exists():
        missing(f"{path} is not installed")
    assert _assert_same_tables(path) > 1000


@pytest.mark.vmlinux
def test_vmlinux():
    assert _assert_same_tables(kernel_testdata("vmlinux")) > 100000


def test_fixtures():
    for path in (build_fixture("dwarf_structs", "-O2"), build_fixture("uprobe_target"), build_cxx_fixture("cxx_shop", "-O2"),
                 build_rust_fixture("rust_shop", "0", "legacy"), build_rust_fixture("rust_shop", "0", "v0"),
                 build_go_fixture("go_target")):
        assert _assert_same_tables(path) > 10


@pytest.mark.parametrize("elf_class,little", [(64, True), (64, False), (32, True), (32, False)])
def test_other_classes_and_byte_orders(tmp_path, elf_class, little):
    path = tmp_path / "tiny"
    path.write_bytes(_tiny_elf(elf_class, little))
    assert _assert_same_tables(path) == 2


def test_versions_and_section_indexes_of_every_shape(monkeypatch):
    """A table's .gnu.version and SHT_SYMTAB_SHNDX replaced by random ones (hidden, undefined, foreign,
    missing, the version marker's name on an SHN_ABS entry; shorter than the table), and some entries'
    section index made SHN_XINDEX or SHN_ABS: both decoders read them alike."""
    path = LIBC if LIBC.exists() else build_fixture("uprobe_target")
    rnd = random.Random(23)
    for _ in range(6):
        elf = ElfFile(path)
        tables = elf.symbol_tables
        (sec, table), *_ = [t for t in tables._tables() if t[1] == "dynsym"] or tables._tables()
        count = sec.size // sec.entsize
        names = {n: (rnd.choice(["GLIBC_2.2.5", "V1", "memcpy", "printf", ""]), rnd.choice([True, False]))
                 for n in range(2, 9)}
        versions = VersionTable(rnd.choice([0, 1, 2, 5, 8, 9, 3 | VERSYM_HIDDEN, 4 | VERSYM_HIDDEN])
                                for _ in range(rnd.randrange(count + 2)))
        versions.names = names
        xindex = tuple(rnd.randrange(0x10000) for _ in range(rnd.randrange(count + 2)))
        monkeypatch.setattr(tables, "_versions_for", lambda sec, v=versions: v)
        monkeypatch.setattr(tables, "_xindex_for", lambda sec, x=xindex: x)
        # (entries pointed at the version marker's own name, or given SHN_XINDEX or SHN_ABS)
        raw = bytearray(tables._raw_table(sec))
        strtab = tables._string_table(sec)
        marker = strtab.find(b"GLIBC_2.2.5\0")
        for i in rnd.sample(range(count), min(count, 200)):
            at = i * 24
            if marker > 0 and rnd.random() < 0.3:
                raw[at:at + 4] = struct.pack("<I", marker)
            raw[at + 6:at + 8] = struct.pack("<H", rnd.choice([SHN_XINDEX, SHN_ABS, 0, 1]))
        monkeypatch.setattr(tables, "_raw_table", lambda sec, r=bytes(raw): r)
        assert _fields(tables._decode_table(sec, table)) == _fields(tables.python_symbols(sec, table))
        elf.close()


def _decoded_or_error(decode) -> tuple[list, str]:
    out: list = []
    try:
        for item in decode:
            out.append(item)
    except ProbectlError as exc:
        return _fields(out), str(exc)
    return _fields(out), ""


def test_damaged_tables(tmp_path):
    """Bytes of a fixture's symbol, string and version tables changed at random: the same symbols, up to
    the same error (a name outside its string table, a truncated version section, ...)."""
    src = build_fixture("uprobe_target")
    data = bytes(src.read_bytes())
    elf = ElfFile(src)
    regions = [(s.offset, s.offset + s.size) for s in elf.sections
               if s.name in (".symtab", ".dynsym", ".strtab", ".dynstr", ".gnu.version", ".gnu.version_d",
                             ".gnu.version_r") and s.has_data]
    elf.close()
    rnd = random.Random(5)
    path = tmp_path / "damaged"
    errors = 0
    for _ in range(300):
        damaged = bytearray(data)
        for _ in range(rnd.choice((1, 2, 4, 16))):
            lo, hi = rnd.choice(regions)
            damaged[rnd.randrange(lo, hi)] = rnd.choice((0, 0xFF, 0x40, 0x80, rnd.randrange(256)))
        path.write_bytes(damaged)
        try:
            elf = ElfFile(path)
            tables = elf.symbol_tables._tables()
        except ProbectlError:
            continue
        for sec, table in tables:
            native = _decoded_or_error(ElfFile(path).symbol_tables._decode_table(sec, table))
            assert native == _decoded_or_error(ElfFile(path).symbol_tables.python_symbols(sec, table))
            errors += bool(native[1])
        elf.close()
    assert errors  # (damage that no decoder noticed would test only the happy path)


def test_bad_arguments_are_refused():
    types = tuple(f"T{i}" for i in range(16))
    entry = struct.pack("<IBBHQQ", 1, 0x12, 0, 1, 0x1000, 8)
    assert _native.elf_symbols(entry, b"\0f\0", True, False, None, {}, None, ElfSymbol, "symtab", types, types)[2] == -1
    for args in [(entry, b"\0f\0", True, False, [1], {}, None, ElfSymbol, "symtab", types, types),
                 (entry, b"\0f\0", True, False, None, {}, [1], ElfSymbol, "symtab", types, types),
                 (entry, b"\0f\0", True, False, None, {}, None, ElfSymbol, "symtab", types[:3], types),
                 (entry, b"\0f\0", True, False, (1,), {1: "V1"}, None, ElfSymbol, "symtab", types, types),
                 (entry, b"\0f\0", True, False, (-1,), {}, None, ElfSymbol, "symtab", types, types)]:
        with pytest.raises((TypeError, ValueError, OverflowError)):
            _native.elf_symbols(*args)
    # (a name at or past the string table's end, or without its NUL: the entry the list stops at)
    assert _native.elf_symbols(entry * 2, b"\0f", True, False, None, {}, None, ElfSymbol, "symtab", types, types) == (
        [], [], 0)


def test_under_sanitizers(tmp_path):
    """native/fuzz/elfsym_fuzz.c: a large table and a tiny one of the other class and byte order (as
    many named entries as the columns show, as many symbols as the Python decoder gives), then damaged
    and cut copies of them, under ASan and UBSan."""
    if not LIBSTDCXX_DBG.exists():
        missing("libstdc++6-12-dbg is not installed")
    tiny = tmp_path / "tiny"
    tiny.write_bytes(_tiny_elf(32, False))
    exe = sanitized_driver(tmp_path, ["fuzz/elfsym_fuzz.c", "elfsym.c"])
    for path in (LIBSTDCXX_DBG, tiny):
        elf = ElfFile(path)
        tables = elf.symbol_tables
        sec, table = tables._tables()[0]
        raw, strtab = tables._raw_table(sec), tables._string_table(sec)
        (tmp_path / "input").write_bytes(struct.pack("<4Q", elf.elf_class == 64, not elf.little_endian, len(raw),
                                                     len(strtab)) + raw + strtab)
        named = sum(1 for name in tables._columns(sec)[0] if name)
        symbols = len(list(tables.python_symbols(sec, table)))
        elf.close()
        for seed in ("1", "2"):
            out = run_sanitized(exe, str(tmp_path / "input"), "3000", seed)
            assert out == f"named {named} nonempty {symbols}\nok 3000\n"
