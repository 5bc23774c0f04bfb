"""The symbol tables of an ELF file: ``.symtab`` and ``.dynsym`` with their GNU symbol versions,
searched in place.

An ``ElfFile`` owns one ``SymbolTables`` and its symbol methods (``symbols``, ``find_functions``,
``symbol_at``, …) delegate here. They are apart from the file's structure (headers, sections,
notes, address conversion) because they are a second idea with its own machinery: a vmlinux has
150000 symbols, so a single name or address is found by searching that field's bytes of the table
in C (``_entries_matching``) and decoding only the entries that match, and the functions are put in
address order from the tables' number columns alone (``_sort_functions``), an order a large table
keeps in the cache (``indexcache``). The whole table is decoded only when all of it is listed
(``symbols``, ``functions``, a glob).
"""
from __future__ import annotations

import bisect
import fnmatch
import itertools
import operator
import os
import re
import struct
from array import array
from typing import TYPE_CHECKING, Callable, Iterable, Iterator, Optional, Sequence

from ..dataclass import dataclass

if TYPE_CHECKING:
    import mmap
    from typing import Any, Literal

    from .elf import ElfFile, Section

# sh_type of the symbol tables and of the sections that complete them
SHT_SYMTAB, SHT_DYNSYM, SHT_SYMTAB_SHNDX = 2, 11, 18
# special section indexes
SHN_UNDEF, SHN_LORESERVE, SHN_ABS, SHN_COMMON, SHN_XINDEX = 0, 0xFF00, 0xFFF1, 0xFFF2, 0xFFFF
# version indexes
VER_NDX_LOCAL, VER_NDX_GLOBAL, VERSYM_HIDDEN = 0, 1, 0x8000

SYMBOL_TYPES = {0: "NOTYPE", 1: "OBJECT", 2: "FUNC", 3: "SECTION", 4: "FILE", 5: "COMMON", 6: "TLS",
                10: "IFUNC"}
SYMBOL_BINDS = {0: "LOCAL", 1: "GLOBAL", 2: "WEAK", 10: "UNIQUE"}
# The names of every st_info type and binding, as the decoder of a whole table takes them.
_TYPE_NAMES = tuple(SYMBOL_TYPES.get(t) or f"TYPE{t}" for t in range(16))
_BIND_NAMES = tuple(SYMBOL_BINDS.get(b) or f"BIND{b}" for b in range(16))
_FUNCTION_TYPES = ("FUNC", "IFUNC")
_BIND_RANK = {"GLOBAL": 0, "WEAK": 1, "UNIQUE": 2, "LOCAL": 3}
_GLOB_CHARS = re.compile(r"[*?\[]")
# st_info byte -> 1 for FUNC and IFUNC symbols, else 0 (a bytes.translate table).
_FUNCTION_INFO = bytes(1 if (info & 0xF) in (2, 10) else 0 for info in range(256))
_NONZERO = bytes([0] + [1] * 255)  # byte -> 1 if it is not 0
_NOT = bytes([1, 0] + [0] * 254)  # 0 <-> 1
# Symbol tables at least this large keep their address order in the cache (vmlinux: 2.8 MB).
_CACHED_TABLE_BYTES = 1 << 20
_SYMBOL_INDEX_FORMAT = 1
# array typecodes by item size
_TYPECODES = {size: next(c for c in "BHILQ" if array(c).itemsize == size) for size in (1, 2, 4, 8)}


@dataclass(frozen=True)
class ElfSymbol:
    """One symbol of ``.symtab`` or ``.dynsym``; ``name`` never carries the ``@version`` suffix."""

    name: str
    value: int
    size: int
    type: str
    bind: str
    shndx: int
    version: Optional[str] = None
    default_version: bool = True
    table: str = "symtab"

    @property
    def versioned_name(self) -> str:
        """The name as readelf and the linker write it: ``malloc@@GLIBC_2.2.5``, ``memcpy@GLIBC_2.2.5``, ``main``."""
        if self.version is None:
            return self.name
        return f"{self.name}{'@@' if self.default_version else '@'}{self.version}"

    @property
    def defined(self) -> bool:
        return self.shndx != SHN_UNDEF

    @property
    def is_function(self) -> bool:
        return self.type in _FUNCTION_TYPES and self.shndx != SHN_UNDEF


def _alias_rank(sym: ElfSymbol) -> tuple:
    """Sort key choosing the name to show among aliases: global, default version, fewest leading '_'."""
    return (_BIND_RANK.get(sym.bind, 4), not sym.default_version,
            len(sym.name) - len(sym.name.lstrip("_")), len(sym.name), sym.name)


def _split_version(name: str) -> tuple[str, Optional[str], bool]:
    """``memcpy@@GLIBC_2.14`` → (``memcpy``, ``GLIBC_2.14``, True); names without '@' pass through."""
    at = name.find("@")
    if at <= 0:
        return name, None, True
    if name.startswith("@@", at):
        return name[:at], name[at + 2:], True
    return name[:at], name[at + 1:], False


class SymbolTables:
    """The symbol tables of one ``ElfFile`` (``.symtab``, then ``.dynsym``), read from its mapping on
    first use and cached here. The file's methods of the same names call these and turn low-level
    parse failures into ``DebugInfoError``; bytes, sections and error messages come from the file."""

    def __init__(self, elf: "ElfFile"):
        self.elf = elf
        self._sym_struct = struct.Struct(elf.byte_order + ("IBBHQQ" if elf.elf_class == 64 else "IIIBBH"))
        self._symbols: Optional[list[ElfSymbol]] = None
        self._functions: Optional[list[ElfSymbol]] = None
        self._by_name: Optional[dict[str, list[ElfSymbol]]] = None
        self._by_address: Optional[_AddressIndex] = None
        self._strtabs: dict[int, bytes] = {}
        self._symbol_columns: dict[int, tuple] = {}
        self._symbol_fields: dict[tuple[int, int], tuple[bytes, int]] = {}
        self._symbol_names: dict[int, dict[int, str]] = {}
        self._table_extras: dict[tuple[str, int], Any] = {}

    def symbols(self) -> list[ElfSymbol]:
        """All named symbols of .symtab and .dynsym, each (name, value, version) once, with versions."""
        if self._symbols is None:
            self._symbols = self._load_symbols()
        return self._symbols

    def find_symbols(self, name: str) -> list[ElfSymbol]:
        """The symbols of any type called ``name`` (every version), as ``symbols()`` has them, in
        its order; while the table is not loaded only the entries of that name are decoded."""
        return self.find_symbols_named((name,))[name]

    def find_symbols_named(self, names: Iterable[str]) -> dict[str, list[ElfSymbol]]:
        """``find_symbols`` of each of ``names`` at once (one pass over the tables)."""
        wanted = set(names)
        found: dict[str, list[ElfSymbol]] = {name: [] for name in wanted}
        for sym in (self._symbols if self._symbols is not None else self._load_symbols(wanted)):
            if sym.name in wanted:
                found[sym.name].append(sym)
        return found

    def has_local_function(self, name: str) -> Optional[bool]:
        """Whether ``.symtab`` has a defined LOCAL function called ``name`` or a clone of one that
        the compiler made (``name.constprop.0``, ``name.isra.0``, ``name.part.0``: any function whose
        name starts with ``name.``); None without a ``.symtab``, which would tell nothing of the
        file's static functions. Only the entries whose names are such strings are decoded."""
        tables = [sec for sec, table in self._tables() if table == "symtab"]
        if not tables:
            return None
        key = name.encode("utf-8", "surrogateescape")
        for sec in tables:
            offsets = self._string_offsets(sec, name)
            strtab = self._string_table(sec)
            at = strtab.find(key + b".")
            while at >= 0:  # (inside a longer string too: linkers share string tails)
                offsets.add(at)
                at = strtab.find(key + b".", at + 1)
            for _i, sym in self._decode_symbols(sec, "symtab", self._entries_named(sec, offsets)):
                if (sym.bind == "LOCAL" and sym.type in _FUNCTION_TYPES and sym.defined
                        and (sym.name == name or sym.name.startswith(name + "."))):
                    return True
        return False

    def _tables(self) -> list[tuple[Section, str]]:
        """The symbol tables in the order their symbols are merged: .symtab first, then .dynsym."""
        return ([(s, "symtab") for s in self.elf.sections if s.type == SHT_SYMTAB and s.has_data]
                + [(s, "dynsym") for s in self.elf.sections if s.type == SHT_DYNSYM and s.has_data])

    def _load_symbols(self, names: Optional[Iterable[str]] = None, holding: Sequence[bytes] = ()) -> list[ElfSymbol]:
        """``symbols()``, or with ``names`` only the symbols with those names (any version), found
        by searching the string tables for them and decoding only the entries that point there;
        with ``holding``, only the symbols whose names hold one of those strings."""
        merged: dict[tuple[str, int], list[ElfSymbol]] = {}
        for sec, table in self._tables():
            entries = None
            if names is not None:
                offsets: set[int] = set()
                for name in names:
                    offsets |= self._string_offsets(sec, name)
                entries = self._entries_named(sec, offsets)
                if not entries:
                    continue
            elif holding:
                entries = self._entries_holding(sec, holding)
                if not entries:
                    continue
            for _i, sym in self._decode_symbols(sec, table, entries):
                key = (sym.name, sym.value)
                group = merged.get(key)
                if group is None:
                    merged[key] = [sym]
                else:
                    group.append(sym)
        out: list[ElfSymbol] = []
        for group in merged.values():
            out.extend(group if len(group) == 1 else _merge_duplicates(group))
        return out

    def _string_table(self, sec: Section) -> bytes:
        """The string table of symbol table ``sec`` (cached)."""
        if not 0 < sec.link < len(self.elf.sections):
            raise self.elf.corrupt(f"section {sec.name}: string table index {sec.link} is invalid")
        cached = self._strtabs.get(sec.link)
        if cached is None:
            strsec = self.elf.sections[sec.link]
            cached = self._strtabs[sec.link] = self.elf.section_bytes(strsec) if strsec.has_data else b""
        return cached

    def _string_offsets(self, sec: Section, name: str) -> set[int]:
        """Offsets in ``sec``'s string table where a symbol named ``name`` or ``name@VERSION`` starts
        (inside longer strings too: linkers share string tails)."""
        if not 0 < sec.link < len(self.elf.sections):
            raise self.elf.corrupt(f"section {sec.name}: string table index {sec.link} is invalid")
        strsec = self.elf.sections[sec.link]
        data: bytes | mmap.mmap
        if sec.link in self._strtabs or strsec.compressed or not strsec.has_data:
            data = self._string_table(sec)
            start, end = 0, len(data)
        else:  # searched in place: no copy of a large table for one name
            data, start, end = self.elf.contents, strsec.offset, strsec.offset + strsec.size
        key = name.encode("utf-8", "surrogateescape")
        found: set[int] = set()
        versioned = self._table_extras.get(("versioned", sec.link))
        if versioned is None:  # no '@' at all in the table (a kernel's): no NAME@VERSION to look for
            versioned = self._table_extras[("versioned", sec.link)] = data.find(b"@", start, end) >= 0
        for pattern in (key + b"\0", key + b"@") if versioned else (key + b"\0",):
            at = data.find(pattern, start, end)
            while at >= 0:
                found.add(at - start)
                at = data.find(pattern, at + 1, end)
        return found

    def _entries_holding(self, sec: Section, parts: Sequence[bytes]) -> list[int]:
        """Indexes of the entries of ``sec`` whose names hold one of ``parts``, in table order: each
        occurrence of a part in the string table is a span from the start of its string, and an entry
        whose st_name lies in a span names a string that holds the part (a name may start inside
        another's string: linkers share string tails)."""
        data = self._string_table(sec)
        spans: list[tuple[int, int]] = []
        for part in parts:
            at = data.find(part)
            while at >= 0:
                spans.append((data.rfind(b"\0", 0, at) + 1, at))
                at = data.find(part, at + 1)
        if not spans:
            return []
        spans.sort()
        starts = [a for a, _ in spans]
        names = self._columns(sec)[0]
        out = []
        for i, st_name in enumerate(names):
            k = bisect.bisect_right(starts, st_name) - 1
            if k >= 0 and st_name <= spans[k][1]:
                out.append(i)
        return out

    def functions_holding(self, parts: Sequence[str]) -> list[ElfSymbol]:
        """Defined FUNC and IFUNC symbols whose names hold one of ``parts`` (``9_M_append``), without
        decoding the others (a large library's demangled names are wanted only for those)."""
        if self._symbols is not None:
            return [s for s in self.functions() if any(part in s.name for part in parts)]
        encoded = [part.encode("utf-8", "surrogateescape") for part in parts]
        return [s for s in self._load_symbols(holding=encoded) if s.type in _FUNCTION_TYPES and s.shndx != SHN_UNDEF]

    def _columns(self, sec: Section) -> tuple[array, array, bytes, array]:
        """(st_name, st_value, st_info, st_shndx) of every entry of symbol table ``sec``, as
        columns cut from the raw table in C (cached): no per-entry Python work."""
        cached = self._symbol_columns.get(sec.index)
        if cached is not None:
            return cached
        size = self._entry_size(sec)
        raw = self.elf.file_bytes(sec.offset, sec.size - sec.size % size, f"section {sec.name}")
        swap = not self.elf.little_endian
        words = _array(4, raw, swap)
        halves = _array(2, raw, swap)
        if self.elf.elf_class == 64:  # name:4 info:1 other:1 shndx:2 value:8 size:8
            columns = (words[0::6], _array(8, raw, swap)[1::3], raw[4::24], halves[3::12])
        else:  # name:4 value:4 size:4 info:1 other:1 shndx:2
            columns = (words[0::4], words[1::4], raw[12::16], halves[7::8])
        self._symbol_columns[sec.index] = columns
        return columns

    def _entries_named(self, sec: Section, offsets: set[int]) -> list[int]:
        """Indexes of the entries of ``sec`` whose st_name is one of ``offsets``, in table order."""
        return self._entries_matching(sec, 0, offsets)

    def _entries_matching(self, sec: Section, column: int, wanted: set[int]) -> list[int]:
        """Indexes of the entries of ``sec`` whose field ``column`` of ``_columns`` (0: st_name,
        1: st_value) is one of ``wanted``, in table order: each value's bytes are searched for in
        that field's bytes of every entry (``_field_bytes``), in C, without decoding the table."""
        if not wanted:
            return []
        if len(wanted) > 8:  # a search per value would cost more than one pass over the column
            items = self._columns(sec)[column]
            return list(itertools.compress(range(len(items)), map(wanted.__contains__, items)))
        data, width = self._field_bytes(sec, column)
        found = []
        for value in wanted:
            if not 0 <= value < 1 << (8 * width):
                continue
            needle = value.to_bytes(width, "little" if self.elf.little_endian else "big")
            at = data.find(needle)
            while at >= 0:
                if at % width == 0:
                    found.append(at // width)
                at = data.find(needle, at + 1)
        return sorted(found)

    def _field_bytes(self, sec: Section, column: int) -> tuple[bytes, int]:
        """(bytes, width): field ``column`` (0: st_name, 1: st_value) of every entry of ``sec``, one
        after the other (cached). Searching these instead of the whole table keeps a value's bytes
        from matching inside other fields, and there are 3 to 6 times fewer bytes to search."""
        key = (sec.index, column)
        cached = self._symbol_fields.get(key)
        if cached is not None:
            return cached
        size = self._entry_size(sec)
        count = sec.size // size
        start = sec.offset
        if start + count * size > len(self.elf.contents):
            raise self.elf.corrupt(f"truncated file: section {sec.name} extends past the end of the file")
        # 64-bit entry: name:4 info:1 other:1 shndx:2 value:8 size:8; 32-bit: name:4 value:4 size:4 ...
        # Cut as a strided view of words, in C; the bytes keep the file's byte order.
        fmt: Literal["I", "Q"]
        if column == 0:
            width, fmt, first, step = 4, "I", 0, size // 4
        elif self.elf.elf_class == 64:
            width, fmt, first, step = 8, "Q", 1, size // 8
        else:
            width, fmt, first, step = 4, "I", 1, size // 4
        view = memoryview(self.elf.contents)[start:start + count * size]
        try:
            out = view.cast(fmt)[first::step].tobytes()
        finally:
            view.release()
        self._symbol_fields[key] = (out, width)
        return out, width

    def _entry_size(self, sec: Section) -> int:
        size = self._sym_struct.size
        if sec.entsize not in (0, size):
            raise self.elf.corrupt(f"section {sec.name}: symbol entry size {sec.entsize}, expected {size}")
        return size

    def _decode_symbols(self, sec: Section, table: str,
                        entries: Optional[Iterable[int]] = None) -> Iterator[tuple[int, ElfSymbol]]:
        """(entry index, symbol) of the named symbols of ``sec``; with ``entries``, of just those
        entries, in the order given."""
        size = self._entry_size(sec)
        if entries is None:
            yield from self._decode_table(sec, table)
            return
        count = sec.size // size
        data, base, unpack = self.elf.contents, sec.offset, self._sym_struct.unpack_from
        yield from self._decoded(sec, table, ((i, unpack(data, base + i * size)) for i in entries if 0 <= i < count))

    def _decode_table(self, sec: Section, table: str) -> Iterator[tuple[int, ElfSymbol]]:
        """``_decode_symbols`` of a whole table, in C (``_native.elf_symbols``, native/elfsym.c: a large
        C++ library's 19,000 entries were a fifth of its cold funcs); :meth:`python_symbols` is its
        reference."""
        from .. import _native

        # (read in the order the reference reads them: a damaged file fails with the same error)
        strtab = self._string_table(sec)
        raw = self._raw_table(sec)
        versions = self._versions_for(sec)
        xindex = self._xindex_for(sec)
        indexes, symbols, bad = _native.elf_symbols(
            raw, strtab, self.elf.elf_class == 64, not self.elf.little_endian, versions,
            versions.names if versions is not None else {}, xindex, ElfSymbol, table, _TYPE_NAMES, _BIND_NAMES)
        yield from zip(indexes, symbols)
        if bad >= 0:
            raise self.elf.corrupt(f"section {sec.name}: symbol {bad} has a name outside its string table")

    def python_symbols(self, sec: Section, table: str) -> Iterator[tuple[int, ElfSymbol]]:
        """``_decode_symbols`` of a whole table, one entry at a time in Python: the reference
        ``_decode_table`` equals."""
        self._entry_size(sec)
        self._string_table(sec)
        return self._decoded(sec, table, enumerate(self._sym_struct.iter_unpack(self._raw_table(sec))))

    def _raw_table(self, sec: Section) -> bytes:
        size = self._entry_size(sec)
        return self.elf.file_bytes(sec.offset, sec.size - sec.size % size, f"section {sec.name}")

    def _decoded(self, sec: Section, table: str, rows: Iterable[tuple[int, tuple]]) -> Iterator[tuple[int, ElfSymbol]]:
        """(entry index, symbol) of the named symbols among ``rows`` (entry index, unpacked entry)."""
        strtab = self._string_table(sec)
        versions = self._versions_for(sec)
        xindex = self._xindex_for(sec)
        is64 = self.elf.elf_class == 64
        names = self._symbol_names.setdefault(sec.index, {})
        new = object.__new__
        find = strtab.find
        types, binds = SYMBOL_TYPES, SYMBOL_BINDS
        for i, fields in rows:
            if is64:
                st_name, st_info, _other, st_shndx, st_value, st_size = fields
            else:
                st_name, st_value, st_size, st_info, _other, st_shndx = fields
            if st_name == 0:
                continue
            name = names.get(st_name)
            if name is None:
                end = find(b"\0", st_name)
                if end < 0 or st_name >= len(strtab):
                    raise self.elf.corrupt(f"section {sec.name}: symbol {i} has a name outside its string table")
                name = strtab[st_name:end].decode("utf-8", "surrogateescape")
                names[st_name] = name
            if not name:
                continue
            version: Optional[str] = None
            default = True
            if "@" in name:
                name, version, default = _split_version(name)
            elif versions is not None and i < len(versions):
                ndx = versions[i]
                entry = versions.names.get(ndx & ~VERSYM_HIDDEN)
                if entry is not None:
                    # '@@' only for a version this file defines (.gnu.version_d) and does not hide;
                    # references to another file's version (.gnu.version_r) are written with '@'.
                    version, defined_here = entry
                    default = defined_here and not (ndx & VERSYM_HIDDEN) and st_shndx != SHN_UNDEF
                    if version == name and st_shndx == SHN_ABS:
                        version = None  # the marker symbol of a version definition, e.g. GLIBC_2.27
            if st_shndx == SHN_XINDEX and xindex is not None and i < len(xindex):
                st_shndx = xindex[i]
            typ = st_info & 0xF
            bind = st_info >> 4
            # Fast construction of a frozen dataclass: same fields as __init__, without its per-field cost.
            sym = new(ElfSymbol)
            sym.__dict__.update(name=name, value=st_value, size=st_size,
                                type=types.get(typ) or f"TYPE{typ}", bind=binds.get(bind) or f"BIND{bind}",
                                shndx=st_shndx, version=version, default_version=default, table=table)
            yield i, sym

    def _versions_for(self, symsec: Section) -> Optional["VersionTable"]:
        key = ("versions", symsec.index)
        if key not in self._table_extras:
            self._table_extras[key] = read_versions(self.elf, symsec)
        return self._table_extras[key]

    def _xindex_for(self, symsec: Section) -> Optional[tuple[int, ...]]:
        key = ("xindex", symsec.index)
        if key not in self._table_extras:
            self._table_extras[key] = self._read_xindex(symsec)
        return self._table_extras[key]

    def _read_xindex(self, symsec: Section) -> Optional[tuple[int, ...]]:
        sec = next((s for s in self.elf.sections if s.type == SHT_SYMTAB_SHNDX and s.link == symsec.index
                    and s.has_data), None)
        if sec is None:
            return None
        raw = self.elf.file_bytes(sec.offset, sec.size - sec.size % 4, f"section {sec.name}")
        return struct.unpack(f"{self.elf.byte_order}{len(raw) // 4}I", raw)

    def functions(self) -> list[ElfSymbol]:
        """Defined FUNC and IFUNC symbols."""
        if self._functions is None:
            self._functions = [s for s in self.symbols() if s.type in _FUNCTION_TYPES and s.shndx != SHN_UNDEF]
        return self._functions

    def find_functions(self, pattern: str) -> list[ElfSymbol]:
        """Functions matching ``pattern``: a name or fnmatch glob, optionally with ``@VERSION`` or ``@@VERSION``.

        A plain name matches every version of it (``malloc`` finds ``malloc@@GLIBC_2.2.5``);
        ``@VERSION`` restricts to that version, ``@@VERSION`` to that default version.
        Aliases (other names at the same address) are not added: ask ``aliases()`` for those.
        The result is sorted by address, then by preference among names at one address.
        """
        name_pat, ver_pat, need_default = _split_version(pattern)
        if _GLOB_CHARS.search(name_pat):
            match = re.compile(fnmatch.translate(name_pat)).match
            found = [s for s in self.functions() if match(s.name)]
        elif self._symbols is None:
            # One name of a table not loaded yet (vmlinux has 150000 symbols): decode only its entries.
            found = [s for s in self._load_symbols((name_pat,)) if s.type in _FUNCTION_TYPES and s.shndx != SHN_UNDEF]
        else:
            found = list(self._function_index().get(name_pat, ()))
        if ver_pat is not None:
            vmatch = re.compile(fnmatch.translate(ver_pat)).match
            found = [s for s in found if s.version is not None and vmatch(s.version)
                     and (s.default_version or not need_default)]
        found.sort(key=lambda s: (s.value, _alias_rank(s)))
        return found

    def _function_index(self) -> dict[str, list[ElfSymbol]]:
        if self._by_name is None:
            index: dict[str, list[ElfSymbol]] = {}
            for sym in self.functions():
                index.setdefault(sym.name, []).append(sym)
            self._by_name = index
        return self._by_name

    def _address_index(self) -> "_AddressIndex":
        """The functions sorted by address (aliases at one address best first), decoded on demand.

        Only the numbers of the symbol tables are read to sort them; names are decoded for the
        addresses that several symbols share (to merge duplicates and rank aliases) and for the
        entries asked for. A large table's order is kept in the cache (``indexcache``)."""
        if self._by_address is None:
            tables = self._tables()
            if sum(sec.size for sec, _ in tables) >= _CACHED_TABLE_BYTES:
                from . import indexcache

                def decode(stored: tuple) -> Optional[tuple[array, array]]:
                    values, refs = _array(8, stored[0], False), _array(8, stored[1], False)
                    return (values, refs) if len(values) == len(refs) else None

                def build() -> tuple[tuple[array, array], tuple]:
                    values, refs = self._sort_functions(tables)
                    return (values, refs), (values.tobytes(), refs.tobytes())

                values, refs = indexcache.load_or_build(
                    "elf-functions", indexcache.file_key(self.elf.path, self.elf.build_id),
                    self._symbols_fingerprint(tables), decode=decode, build=build, what=str(self.elf.path))
            else:
                values, refs = self._sort_functions(tables)
            self._by_address = _AddressIndex(values, refs, self._decode_ref)
        return self._by_address

    def _symbols_fingerprint(self, tables: list[tuple[Section, str]]) -> tuple:
        return (_SYMBOL_INDEX_FORMAT, self.elf.elf_class, self.elf.little_endian, os.path.getsize(self.elf.path)) + tuple(
            (sec.index, sec.offset, sec.size, sec.link) for sec, _ in tables)

    def _decode_ref(self, ref: int) -> ElfSymbol:
        """The symbol of a reference (table number << 32 | entry index) of the address index."""
        sec, table = self._tables()[ref >> 32]
        for _i, sym in self._decode_symbols(sec, table, (ref & 0xFFFFFFFF,)):
            return sym
        raise self.elf.corrupt(f"section {sec.name}: symbol {ref & 0xFFFFFFFF} vanished")

    def _sort_functions(self, tables: list[tuple[Section, str]]) -> tuple[array, array]:
        """(addresses, references) of ``functions()`` in (address, alias rank) order, as
        ``_address_index`` keeps them, computed from the symbol tables' columns with C-level
        operations (vmlinux has 120000 symbols): only addresses that several symbols share are
        decoded, to merge duplicates and rank aliases as ``symbols()``/``functions()`` do."""
        values_of: list[int] = []  # function entries: address and reference
        refs_of: list[int] = []
        others: set[int] = set()  # addresses of every other entry
        for t, (sec, _table) in enumerate(tables):
            names, values, _info, _shndx = self._columns(sec)
            mask = self._function_mask(sec)
            found = list(itertools.compress(range(len(names)), mask))
            values_of += map(values.__getitem__, found)
            refs_of += map((t << 32).__or__, found)
            others.update(itertools.compress(values, mask.translate(_NOT)))
        order = sorted(range(len(values_of)), key=values_of.__getitem__)
        values_sorted = list(map(values_of.__getitem__, order))
        refs_sorted = list(map(refs_of.__getitem__, order))
        # Addresses several symbols share, of any type (duplicates are merged across types too).
        shared = set(itertools.compress(values_sorted, map(others.__contains__, values_sorted)))
        shared.update(itertools.compress(values_sorted, map(operator.eq, values_sorted, values_sorted[1:])))
        if not shared:
            return array(_TYPECODES[8], values_sorted), array(_TYPECODES[8], refs_sorted)
        # Decode those groups in symbols()'s order, merge and rank them as functions() would be.
        groups: dict[int, list[tuple[int, ElfSymbol]]] = {}
        for t, (sec, table) in enumerate(tables):
            values = self._columns(sec)[1]
            entries = itertools.compress(range(len(values)), map(shared.__contains__, values))
            for i, sym in self._decode_symbols(sec, table, entries):
                groups.setdefault(sym.value, []).append((t << 32 | i, sym))
        out_values, out_refs = array(_TYPECODES[8]), array(_TYPECODES[8])
        positions = list(itertools.compress(range(len(values_sorted)), map(shared.__contains__, values_sorted)))
        done = 0  # values_sorted[:done] are in the output
        k = 0
        while k < len(positions):
            start = positions[k]
            value = values_sorted[start]
            end = bisect.bisect_right(values_sorted, value, start)
            out_values.extend(values_sorted[done:start])
            out_refs.extend(refs_sorted[done:start])
            members = groups.get(value, [])
            ref_of = {id(sym): member_ref for member_ref, sym in members}
            kept = _ranked_functions([sym for _ref, sym in members])
            out_values.extend([value] * len(kept))
            out_refs.extend(ref_of[id(sym)] for sym in kept)
            done = end
            k += end - start
        out_values.extend(values_sorted[done:])
        out_refs.extend(refs_sorted[done:])
        return out_values, out_refs

    def _function_mask(self, sec: Section) -> bytes:
        """One byte per entry of ``sec``: 1 for a named, defined FUNC/IFUNC symbol, else 0."""
        names, _values, info, shndx = self._columns(sec)
        count = len(names)
        if not count:
            return b""
        strtab = self._string_table(sec)
        last = max(names)
        if last >= len(strtab) or (last > strtab.rfind(b"\0")):
            i = next(i for i, n in enumerate(names) if n and (n >= len(strtab) or strtab.find(b"\0", n) < 0))
            raise self.elf.corrupt(f"section {sec.name}: symbol {i} has a name outside its string table")
        defined = bytearray(map(bool, shndx))
        if SHN_XINDEX in shndx:
            xindex = self._xindex_for(sec)
            if xindex is not None:
                for i in itertools.compress(range(count), map(SHN_XINDEX.__eq__, shndx)):
                    if i < len(xindex):
                        defined[i] = xindex[i] != SHN_UNDEF
        mask = (int.from_bytes(info.translate(_FUNCTION_INFO), "little")
                & int.from_bytes(bytes(map(bool, names)), "little")
                & int.from_bytes(bytes(map(strtab.__getitem__, names)).translate(_NONZERO), "little")
                & int.from_bytes(defined, "little"))
        return mask.to_bytes(count, "little")

    def aliases(self, sym: ElfSymbol) -> list[ElfSymbol]:
        """Every function at ``sym.value`` (including ``sym``), the preferred name first."""
        if self._by_address is None:  # (the same symbols, found without sorting the tables)
            return self._functions_starting_at(sym.value)
        index = self._address_index()
        lo = bisect.bisect_left(index.values, sym.value)
        hi = bisect.bisect_right(index.values, sym.value)
        return [index[k] for k in range(lo, hi)]

    def _functions_starting_at(self, vaddr: int) -> list[ElfSymbol]:
        """The functions at exactly ``vaddr``, best first, found without sorting the tables: the
        entries with that value are searched for in their value columns and merged and ranked as
        ``_address_index`` does."""
        members: list[ElfSymbol] = []
        for sec, table in self._tables():
            entries = self._entries_matching(sec, 1, {vaddr})
            if entries:
                members.extend(sym for _i, sym in self._decode_symbols(sec, table, entries))
        return _ranked_functions(members)

    def symbol_at(self, vaddr: int) -> Optional[ElfSymbol]:
        """The function containing ``vaddr`` (a zero-sized one only at its exact address), or None.

        Among aliases the global, default-version name with the fewest leading underscores wins.
        """
        if self._by_address is None:
            # A function's own start (a probe on its entry) needs no sorted table: the best of the
            # functions starting there is the answer the sorted table would give.
            starting = self._functions_starting_at(vaddr)
            if starting:
                return starting[0]
        index = self._address_index()
        values = index.values

        def contains(k: int) -> bool:
            sym = index[k]
            return sym.value <= vaddr < sym.value + sym.size or sym.value == vaddr

        i = bisect.bisect_right(values, vaddr) - 1
        # Walk back over nearby starts: a large function may enclose a small one that starts later.
        for j in range(i, max(i - 64, -1), -1):
            if contains(j):
                # Aliases at that start are sorted best first.
                for k in range(bisect.bisect_left(values, values[j]), j + 1):
                    if contains(k):
                        return index[k]
        return None


def _array(itemsize: int, raw: bytes, swap: bool) -> array:
    """``raw`` as an array of unsigned integers of ``itemsize`` bytes (byte-swapped if ``swap``)."""
    out = array(_TYPECODES[itemsize])
    out.frombytes(raw[:len(raw) - len(raw) % itemsize])
    if swap:
        out.byteswap()
    return out


class _AddressIndex:
    """The functions of a file sorted by address: ``values`` (an array, for bisecting) and the
    symbol at each position, decoded from its table entry on first use."""

    def __init__(self, values: array, refs: array, decode: Callable[[int], ElfSymbol]):
        self.values = values
        self._refs = refs
        self._decode = decode
        self._symbols: dict[int, ElfSymbol] = {}

    def __len__(self) -> int:
        return len(self.values)

    def __getitem__(self, k: int) -> ElfSymbol:
        sym = self._symbols.get(k)
        if sym is None:
            sym = self._symbols[k] = self._decode(self._refs[k])
        return sym


def _ranked_functions(symbols: list[ElfSymbol]) -> list[ElfSymbol]:
    """The functions among ``symbols`` (all the symbols at one address, in ``symbols()``'s table
    order) after merging duplicates as ``symbols()`` does, best alias first."""
    merged: dict[str, list[ElfSymbol]] = {}
    for sym in symbols:
        merged.setdefault(sym.name, []).append(sym)
    kept = [sym for group in merged.values()
            for sym in (group if len(group) == 1 else _merge_duplicates(group)) if sym.is_function]
    kept.sort(key=_alias_rank)
    return kept


def _merge_duplicates(group: list[ElfSymbol]) -> list[ElfSymbol]:
    """Reduce symbols sharing one name and value to one entry per version.

    The same symbol often appears in .symtab (without a version) and in .dynsym (with one), or twice
    in .symtab as a local alias and a versioned global: the versioned entries make the unversioned
    ones redundant, and among entries of one version the global one is kept.
    """
    best: dict[Optional[str], ElfSymbol] = {}
    for sym in group:
        other = best.get(sym.version)
        if other is None or _BIND_RANK.get(sym.bind, 4) < _BIND_RANK.get(other.bind, 4):
            best[sym.version] = sym
    if len(best) > 1:
        best.pop(None, None)
    return list(best.values())


def cstring(table: bytes, offset: int) -> str:
    """The NUL-terminated string at ``offset`` of an ELF string table ("" past its end)."""
    if offset >= len(table):
        return ""
    end = table.find(b"\0", offset)
    return table[offset:end if end >= 0 else len(table)].decode("utf-8", "surrogateescape")


# --- GNU symbol versions ---------------------------------------------------------------------------
# ``.gnu.version`` holds a version index per symbol, named by ``.gnu.version_d`` (the versions the file
# defines: ``memcpy@@GLIBC_2.14``) and ``.gnu.version_r`` (those it needs from other files:
# ``memcpy@GLIBC_2.2.5``). Only the dynamic symbol tables of user binaries have them.

SHT_GNU_VERDEF, SHT_GNU_VERNEED, SHT_GNU_VERSYM = 0x6FFFFFFD, 0x6FFFFFFE, 0x6FFFFFFF


class VersionTable(tuple):
    """The .gnu.version array (one index per symbol) plus index → (version name, defined here)."""

    names: dict[int, tuple[str, bool]]

    def __new__(cls, values: Iterable[int]):
        obj = super().__new__(cls, values)
        obj.names = {}
        return obj


def read_versions(elf: "ElfFile", symsec: "Section") -> Optional[VersionTable]:
    """The versions of the symbols of table ``symsec``, or None when it has no .gnu.version."""
    versym = next((s for s in elf.sections if s.type == SHT_GNU_VERSYM and s.link == symsec.index
                   and s.has_data), None)
    if versym is None:
        return None
    raw = elf.file_bytes(versym.offset, versym.size - versym.size % 2, "section .gnu.version")
    table = VersionTable(struct.unpack(f"{elf.byte_order}{len(raw) // 2}H", raw))
    for sec in elf.sections:
        if sec.type == SHT_GNU_VERDEF and sec.has_data:
            _read_verdef(elf, sec, table.names)
        elif sec.type == SHT_GNU_VERNEED and sec.has_data:
            _read_verneed(elf, sec, table.names)
    return table


def _version_strings(elf: "ElfFile", sec: "Section") -> bytes:
    if not 0 < sec.link < len(elf.sections) or not elf.sections[sec.link].has_data:
        raise elf.corrupt(f"section {sec.name}: string table index {sec.link} is invalid")
    return elf.section_bytes(elf.sections[sec.link])


def _read_verdef(elf: "ElfFile", sec: "Section", names: dict[int, tuple[str, bool]]) -> None:
    strtab = _version_strings(elf, sec)
    data = elf.file_bytes(sec.offset, sec.size, f"section {sec.name}")
    verdef = struct.Struct(elf.byte_order + "HHHHIII")
    verdaux = struct.Struct(elf.byte_order + "II")
    pos = 0
    for _ in range(sec.info or 0x10000):
        if pos + verdef.size > len(data):
            raise elf.corrupt(f"section {sec.name} is truncated")
        _ver, flags, ndx, cnt, _hash, aux, nxt = verdef.unpack_from(data, pos)
        if cnt and pos + aux + verdaux.size <= len(data):
            vda_name, _ = verdaux.unpack_from(data, pos + aux)
            # The base definition (VER_FLG_BASE) is the file's own soname, not a symbol version.
            if not flags & 1:
                names[ndx] = (cstring(strtab, vda_name), True)
        if nxt == 0:
            break
        pos += nxt


def _read_verneed(elf: "ElfFile", sec: "Section", names: dict[int, tuple[str, bool]]) -> None:
    strtab = _version_strings(elf, sec)
    data = elf.file_bytes(sec.offset, sec.size, f"section {sec.name}")
    verneed = struct.Struct(elf.byte_order + "HHIII")
    vernaux = struct.Struct(elf.byte_order + "IHHII")
    pos = 0
    for _ in range(sec.info or 0x10000):
        if pos + verneed.size > len(data):
            raise elf.corrupt(f"section {sec.name} is truncated")
        _ver, cnt, _file, aux, nxt = verneed.unpack_from(data, pos)
        apos = pos + aux
        for _ in range(cnt):
            if apos + vernaux.size > len(data):
                raise elf.corrupt(f"section {sec.name} is truncated")
            _hash, _flags, other, vna_name, anext = vernaux.unpack_from(data, apos)
            names[other & ~VERSYM_HIDDEN] = (cstring(strtab, vna_name), False)
            if anext == 0:
                break
            apos += anext
        if nxt == 0:
            break
        pos += nxt
