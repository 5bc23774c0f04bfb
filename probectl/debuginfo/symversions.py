"""GNU symbol versions of an ELF symbol table: ``.gnu.version`` holds a version index per symbol,
named by ``.gnu.version_d`` (the versions the file defines: ``memcpy@@GLIBC_2.14``) and
``.gnu.version_r`` (those it needs from other files: ``memcpy@GLIBC_2.2.5``).

Only dynamic symbol tables of user binaries have them; ``symtab.SymbolTables`` reads them here when
it decodes such a table.
"""
from __future__ import annotations

import struct
from typing import TYPE_CHECKING, Iterable, Optional

from .symtab import VERSYM_HIDDEN, cstring

if TYPE_CHECKING:
    from .elf import ElfFile, Section

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
    raw = elf._bytes(versym.offset, versym.size - versym.size % 2, "section .gnu.version")
    table = VersionTable(struct.unpack(f"{elf._endian}{len(raw) // 2}H", raw))
    for sec in elf.sections:
        if sec.type == SHT_GNU_VERDEF and sec.has_data:
            _read_verdef(elf, sec, table.names)
        elif sec.type == SHT_GNU_VERNEED and sec.has_data:
            _read_verneed(elf, sec, table.names)
    return table


def _version_strings(elf: "ElfFile", sec: "Section") -> bytes:
    if not 0 < sec.link < len(elf.sections) or not elf.sections[sec.link].has_data:
        raise elf._corrupt(f"section {sec.name}: string table index {sec.link} is invalid")
    return elf._section_bytes(elf.sections[sec.link])


def _read_verdef(elf: "ElfFile", sec: "Section", names: dict[int, tuple[str, bool]]) -> None:
    strtab = _version_strings(elf, sec)
    data = elf._bytes(sec.offset, sec.size, f"section {sec.name}")
    verdef = struct.Struct(elf._endian + "HHHHIII")
    verdaux = struct.Struct(elf._endian + "II")
    pos = 0
    for _ in range(sec.info or 0x10000):
        if pos + verdef.size > len(data):
            raise elf._corrupt(f"section {sec.name} is truncated")
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
    data = elf._bytes(sec.offset, sec.size, f"section {sec.name}")
    verneed = struct.Struct(elf._endian + "HHIII")
    vernaux = struct.Struct(elf._endian + "IHHII")
    pos = 0
    for _ in range(sec.info or 0x10000):
        if pos + verneed.size > len(data):
            raise elf._corrupt(f"section {sec.name} is truncated")
        _ver, cnt, _file, aux, nxt = verneed.unpack_from(data, pos)
        apos = pos + aux
        for _ in range(cnt):
            if apos + vernaux.size > len(data):
                raise elf._corrupt(f"section {sec.name} is truncated")
            _hash, _flags, other, vna_name, anext = vernaux.unpack_from(data, apos)
            names[other & ~VERSYM_HIDDEN] = (cstring(strtab, vna_name), False)
            if anext == 0:
                break
            apos += anext
        if nxt == 0:
            break
        pos += nxt
