"""Call-frame information: the Canonical Frame Address rule at an address.

gcc describes every function's frame base as ``DW_OP_call_frame_cfa``, so a stack variable at
``DW_OP_fbreg N`` lives at CFA + N, and the CFA is "register R plus offset K" at each address
according to the CFI rows of the function's FDE. Like perf (``dwarf_cfi_addrframe``), we look in
``.eh_frame`` first and ``.debug_frame`` second.

The FDE for an address is found through the ``.eh_frame_hdr`` binary-search table when the
binary has one, so only that FDE (and its CIE) is parsed. ``.debug_frame`` has no such table: its
entry headers are scanned once (lengths and initial locations only, ~25 ms for a kernel's 46k FDEs,
where pyelftools' full parse of every entry and instruction took ten seconds) into an index by
address, kept on disk by build-id (``indexcache``, kind ``cfi-fdes``). pyelftools decodes the one
FDE found and its instruction table. (An ``.eh_frame`` without ``.eh_frame_hdr`` is parsed whole:
its pointers' encodings are in each CIE's augmentation.)
"""
from __future__ import annotations

import bisect
import io
import struct
import sys
from array import array
from typing import TYPE_CHECKING, Optional

from elftools.common.exceptions import DWARFError, ELFError, ELFParseError
from elftools.construct import ConstructError
from elftools.dwarf.callframe import FDE, CallFrameInfo
from elftools.dwarf.structs import DWARFStructs

from ...dataclass import dataclass

if TYPE_CHECKING:
    from elftools.elf.elffile import ELFFile

    from ..elf import ElfFile

# DW_EH_PE pointer encodings (LSB Core spec, .eh_frame_hdr)
_PE_OMIT = 0xFF
_PE_FORMATS = {0x00: "Q", 0x01: "B", 0x02: "H", 0x03: "I", 0x04: "Q", 0x09: "b", 0x0A: "h", 0x0B: "i", 0x0C: "q"}
_PE_PCREL, _PE_DATAREL = 0x10, 0x30


@dataclass(frozen=True)
class CfaRule:
    """CFA = value of DWARF register ``register`` + ``offset``."""

    register: int
    offset: int


class _Table:
    """One CFI section: FDE lookup and decoded rows."""

    def __init__(self, data: bytes, address: int, eh: bool, address_size: int, little_endian: bool,
                 hdr: Optional[tuple[bytes, int]] = None, index_key: Optional[str] = None):
        structs = DWARFStructs(little_endian=little_endian, dwarf_format=32, address_size=address_size)
        self.cfi = CallFrameInfo(io.BytesIO(data), len(data), address, structs, for_eh_frame=eh)
        self.address = address
        self.eh = eh
        self._search: Optional[tuple[list[int], list[int]]] = None
        self._all: Optional[tuple[list[int], list[FDE]]] = None
        self._index: Optional[tuple[array, array]] = None
        if not hasattr(self.cfi, "_parse_entry_at"):  # (another pyelftools: parse everything)
            return
        if hdr is not None:
            self._search = _parse_eh_frame_hdr(hdr[0], hdr[1], little_endian)
        elif not eh:
            self._index = _debug_frame_index(data, address_size, little_endian, index_key)

    def fde_for(self, pc: int) -> Optional[FDE]:
        if self._search is not None:
            starts, fdes = self._search
            i = bisect.bisect_right(starts, pc) - 1
            if i >= 0:
                entry = self.cfi._parse_entry_at(fdes[i] - self.address)
                if isinstance(entry, FDE) and _covers(entry, pc):
                    return entry
            return None
        if self._index is not None:
            starts, offsets = self._index
            i = bisect.bisect_right(starts, pc) - 1
            # Overlapping FDEs are not expected, but look back a little in case of zero-sized ones.
            for j in range(i, max(i - 4, -1), -1):
                entry = self.cfi._parse_entry_at(offsets[j])
                if isinstance(entry, FDE) and _covers(entry, pc):
                    return entry
            return None
        if self._all is None:
            found = [e for e in self.cfi.get_entries() if isinstance(e, FDE)]
            found.sort(key=lambda e: e["initial_location"])
            self._all = ([e["initial_location"] for e in found], found)
        starts, entries = self._all
        i = bisect.bisect_right(starts, pc) - 1
        # Overlapping FDEs are not expected, but look back a little in case of zero-sized ones.
        for j in range(i, max(i - 4, -1), -1):
            if _covers(entries[j], pc):
                return entries[j]
        return None


def _covers(fde: FDE, pc: int) -> bool:
    start = fde["initial_location"]
    return start <= pc < start + fde["address_range"]


# Bump when _scan_debug_frame's result changes, so older cached indexes are not trusted.
_INDEX_FORMAT = 1


def _debug_frame_index(data: bytes, address_size: int, little_endian: bool,
                       index_key: Optional[str]) -> Optional[tuple[array, array]]:
    """(initial locations in ascending order, section offsets of their FDEs) of a ``.debug_frame``,
    from the cache when ``index_key`` names the file there; None if the section cannot be scanned."""
    from .. import indexcache

    fingerprint = (_INDEX_FORMAT, address_size, little_endian, len(data), sys.byteorder)
    if index_key is not None:
        stored = indexcache.load("cfi-fdes", index_key, fingerprint)
        if stored is not None and len(stored) == 2:
            starts, offsets = array("Q"), array("Q")
            try:
                starts.frombytes(stored[0])
                offsets.frombytes(stored[1])
            except (TypeError, ValueError):
                starts = offsets = array("Q")
            if len(starts) == len(offsets) and len(starts):
                return starts, offsets
    found = _scan_debug_frame(data, address_size, little_endian)
    if found is None:
        return None
    if index_key is not None:
        indexcache.store("cfi-fdes", index_key, fingerprint, (found[0].tobytes(), found[1].tobytes()))
    return found


def _scan_debug_frame(data: bytes, address_size: int, little_endian: bool) -> Optional[tuple[array, array]]:
    """Read only the headers of ``.debug_frame``'s entries (length, CIE id, an FDE's initial location):
    (starts, offsets) sorted by start, or None when an entry's length runs past the section."""
    endian = "<" if little_endian else ">"
    u32 = struct.Struct(endian + "I").unpack_from
    u64 = struct.Struct(endian + "Q").unpack_from
    location = struct.Struct(endian + ("Q" if address_size == 8 else "I")).unpack_from
    fdes: list[tuple[int, int]] = []
    pos, size = 0, len(data)
    try:
        while pos + 4 <= size:
            (length,) = u32(data, pos)
            if length == 0xFFFFFFFF:  # 64-bit DWARF: the length follows, the CIE id is 8 bytes
                (length,) = u64(data, pos + 4)
                (cie_id,) = u64(data, pos + 12)
                body, end, is_cie = pos + 20, pos + 12 + length, cie_id == 0xFFFFFFFFFFFFFFFF
            else:
                (cie_id,) = u32(data, pos + 4)
                body, end, is_cie = pos + 8, pos + 4 + length, cie_id == 0xFFFFFFFF
            if end > size:
                return None
            if not is_cie and length:
                fdes.append((location(data, body)[0], pos))
            pos = end
    except struct.error:
        return None
    fdes.sort()
    return array("Q", [start for start, _ in fdes]), array("Q", [offset for _, offset in fdes])


def _parse_eh_frame_hdr(data: bytes, address: int, little_endian: bool) -> Optional[tuple[list[int], list[int]]]:
    # version, eh_frame_ptr_enc, fde_count_enc, table_enc, then the encoded pointers.
    if len(data) < 4 or data[0] != 1:
        return None
    endian = "<" if little_endian else ">"
    _, ptr_enc, count_enc, table_enc = data[:4]
    pos = 4

    def read(enc: int, pos: int) -> tuple[Optional[int], int]:
        if enc == _PE_OMIT:
            return None, pos
        fmt = _PE_FORMATS.get(enc & 0x0F)
        if fmt is None:
            raise ValueError(f"pointer encoding 0x{enc:x}")
        size = struct.calcsize(fmt)
        (value,) = struct.unpack_from(endian + fmt, data, pos)
        app = enc & 0x70
        if app == _PE_PCREL:
            value += address + pos
        elif app == _PE_DATAREL:
            value += address
        elif app != 0:
            raise ValueError(f"pointer application 0x{app:x}")
        return value & 0xFFFFFFFFFFFFFFFF, pos + size

    try:
        _, pos = read(ptr_enc, pos)
        count, pos = read(count_enc, pos)
        if count is None or table_enc == _PE_OMIT:
            return None
        starts, fdes = [], []
        for _ in range(count):
            start, pos = read(table_enc, pos)
            fde, pos = read(table_enc, pos)
            starts.append(start)
            fdes.append(fde)
    except (ValueError, struct.error):
        return None
    return starts, fdes


class CallFrames:
    """The CFA rules of a binary, from its ``.eh_frame`` and its debug file's ``.debug_frame``.

    :param binary: the runtime ELF (its ``.eh_frame`` is loaded, so it is never in a debug file)
    :param debug: the ELF holding ``.debug_frame``, if different
    """

    def __init__(self, binary: ELFFile, debug: Optional[ELFFile] = None, index_key: Optional[str] = None):
        """:param index_key: the ``indexcache`` key of the file holding ``.debug_frame`` (its
        index is kept on disk under it), or None not to cache it."""
        self._tables: list[_Table] = []
        address_size = binary.elfclass // 8
        little = binary.little_endian
        try:
            eh = binary.get_section_by_name(".eh_frame")
            if eh is not None and eh["sh_type"] != "SHT_NOBITS" and eh["sh_size"]:
                hdr_sec = binary.get_section_by_name(".eh_frame_hdr")
                hdr = None
                if hdr_sec is not None and hdr_sec["sh_type"] != "SHT_NOBITS":
                    hdr = (hdr_sec.data(), hdr_sec["sh_addr"])
                self._tables.append(_Table(eh.data(), eh["sh_addr"], True, address_size, little, hdr))
            for elf in (debug, binary) if debug is not None else (binary,):
                df = elf.get_section_by_name(".debug_frame")
                if df is not None and df["sh_type"] != "SHT_NOBITS" and df["sh_size"]:
                    key = index_key if elf is (debug if debug is not None else binary) else None
                    self._tables.append(_Table(df.data(), 0, False, address_size, little, index_key=key))
                    break
        except (ELFError, ELFParseError, DWARFError, ConstructError, ValueError):
            pass
        self._cache: dict[int, Optional[CfaRule]] = {}

    @classmethod
    def from_sections(cls, binary: "ElfFile", debug_frame: Optional[bytes],
                      index_key: Optional[str] = None) -> "CallFrames":
        """The same rules read through probectl's ELF reader, without pyelftools' ``ELFFile`` (~30 ms
        to make for a kernel, its section table parsed by ``construct``): ``binary``'s
        ``.eh_frame``, then ``debug_frame`` (the debug file's ``.debug_frame`` bytes, or None to
        take the binary's own). A section that cannot be read is left out, as the constructor does."""
        from ...errors import ProbectlError

        self = cls.__new__(cls)
        self._tables = []
        self._cache = {}
        address_size = binary.elf_class // 8
        little = binary.little_endian
        try:
            eh = binary.section(".eh_frame")
            if eh is not None and eh.has_data and eh.size and not eh.compressed:
                hdr_sec = binary.section(".eh_frame_hdr")
                hdr = None
                if hdr_sec is not None and hdr_sec.has_data and not hdr_sec.compressed:
                    hdr = (binary.section_data(".eh_frame_hdr"), hdr_sec.addr)
                self._tables.append(_Table(binary.section_data(".eh_frame"), eh.addr, True, address_size, little, hdr))
            if debug_frame is None:
                df = binary.section(".debug_frame")
                if df is not None and df.has_data and df.size:
                    debug_frame = binary.section_data(".debug_frame")
                    index_key = None  # (the key names the debug file, not the binary)
            if debug_frame:
                self._tables.append(_Table(debug_frame, 0, False, address_size, little, index_key=index_key))
        except (ProbectlError, DWARFError, ConstructError, ValueError):
            pass
        return self

    def cfa_at(self, pc: int) -> Optional[CfaRule]:
        """The CFA rule in force at ``pc``, or None if no FDE covers it or the CFA is a
        DWARF expression (``DW_CFA_def_cfa_expression``)."""
        if pc in self._cache:
            return self._cache[pc]
        rule = None
        for table in self._tables:
            try:
                fde = table.fde_for(pc)
                if fde is None:
                    continue
                rows = fde.get_decoded().table
            except (DWARFError, ELFParseError, ConstructError, ValueError, KeyError, AssertionError):
                continue
            best = None
            for row in rows:
                if row["pc"] <= pc:
                    best = row
                else:
                    break
            if best is not None:
                cfa = best["cfa"]
                if cfa.expr is None and cfa.reg is not None:
                    rule = CfaRule(cfa.reg, cfa.offset or 0)
            break
        self._cache[pc] = rule
        return rule
