"""Call-frame information: the Canonical Frame Address rule at an address.

gcc describes every function's frame base as ``DW_OP_call_frame_cfa``, so a stack variable at
``DW_OP_fbreg N`` lives at CFA + N, and the CFA is "register R plus offset K" at each address
according to the CFI rows of the function's FDE. Like perf (``dwarf_cfi_addrframe``), we look in
``.eh_frame`` first and ``.debug_frame`` second.

The FDE for an address is found through the ``.eh_frame_hdr`` binary-search table when the
binary has one, so only that FDE (and its CIE) is parsed. ``.debug_frame`` has no such table: its
entry headers are scanned once (lengths and initial locations only, where pyelftools parses every
entry and instruction of a kernel's tens of thousands of FDEs: docs/ledger.md) into an index by
address, kept on disk by build-id (``indexcache``, kind ``cfi-fdes``). The one FDE found, its CIE
and their instructions are then decoded here (``_Entries``), as far as the address asked for, and
for the row at that address: the CFA, and the registers' rules an unwinder needs (unwind.py). (An ``.eh_frame`` without ``.eh_frame_hdr`` has all its entry headers read:
its pointers' encodings are in each CIE's augmentation.)
"""
from __future__ import annotations

import bisect
import struct
import sys
from array import array
from collections.abc import Sequence
from typing import TYPE_CHECKING, NamedTuple, Optional

from ...dataclass import dataclass
from .leb128 import read_sleb128, read_uleb128

if TYPE_CHECKING:
    from ..elf import ElfFile
    from .units import ByteOrder

# DW_EH_PE pointer encodings (LSB Core spec, .eh_frame_hdr)
_PE_OMIT = 0xFF
_PE_FORMATS = {0x00: "Q", 0x01: "B", 0x02: "H", 0x03: "I", 0x04: "Q", 0x09: "b", 0x0A: "h", 0x0B: "i", 0x0C: "q"}
_PE_PCREL, _PE_DATAREL = 0x10, 0x30


@dataclass(frozen=True)
class CfaRule:
    """CFA = value of DWARF register ``register`` + ``offset``."""

    register: int
    offset: int


class _Fde(NamedTuple("_Fde", [("initial_location", int), ("address_range", int), ("code_alignment", int),
                               ("data_alignment", int), ("cie_instructions", bytes), ("instructions", bytes),
                               ("encoding", int), ("offset", int), ("return_register", int)])):
    """What the rules at an address need of one FDE: the code it covers, its CIE's alignment factors
    and the instructions of both (the CIE's first); ``encoding`` is the pointer encoding of
    DW_CFA_set_loc (.eh_frame: the CIE's 'R'; else absolute), ``offset`` that of the instructions in
    the section (for pc-relative set_loc), ``return_register`` the CIE's return address column.
    (Fields as a list: see units.Section.)"""

    __slots__ = ()


class _Cie(NamedTuple("_Cie", [("code_alignment", int), ("data_alignment", int), ("instructions", bytes),
                               ("fde_encoding", int), ("has_augmentation_data", bool), ("address_size", int),
                               ("return_register", int)])):
    __slots__ = ()


class _Entries:
    """The entries of one CFI section (``.eh_frame`` or ``.debug_frame``), read one at a time."""

    def __init__(self, data: bytes, address: int, eh: bool, address_size: int, little_endian: bool):
        self.data, self.address, self.eh = data, address, eh
        self.address_size = address_size
        self.order: ByteOrder = "little" if little_endian else "big"
        self._cies: dict[int, _Cie] = {}

    def _int(self, pos: int, size: int, signed: bool = False) -> int:
        if pos < 0 or pos + size > len(self.data):
            raise ValueError("a call-frame entry runs past the end of its section")
        return int.from_bytes(self.data[pos:pos + size], self.order, signed=signed)

    def pointer(self, encoding: int, pos: int, absolute: bool = True) -> tuple[int, int]:
        """An encoded pointer (DW_EH_PE_*) at ``pos``: (value, position after it); without
        ``absolute``, its value alone (an address range is not relocated)."""
        fmt = encoding & 0x0F
        if fmt == 0x01:
            value, end = read_uleb128(self.data, pos)
        elif fmt == 0x09:
            value, end = read_sleb128(self.data, pos)
        else:
            size = {0x00: self.address_size, 0x02: 2, 0x03: 4, 0x04: 8, 0x0A: 2, 0x0B: 4, 0x0C: 8}.get(fmt)
            if size is None:
                raise ValueError(f"pointer encoding 0x{encoding:x}")
            value, end = self._int(pos, size, signed=fmt >= 0x08), pos + size
        if absolute:
            application = encoding & 0x70
            if application == _PE_PCREL:
                value += self.address + pos
            elif application == _PE_DATAREL:
                value += self.address
            elif application != 0:
                raise ValueError(f"pointer application 0x{application:x}")
        return value & 0xFFFFFFFFFFFFFFFF, end

    def _header(self, offset: int) -> tuple[int, int, int, bool]:
        """(position of the body, end, the CIE id/pointer field's position, is a CIE) of the entry at
        ``offset``."""
        length = self._int(offset, 4)
        if length == 0xFFFFFFFF:
            length = self._int(offset + 4, 8)
            id_at, size, end = offset + 12, 8, offset + 12 + length
        else:
            id_at, size, end = offset + 4, 4, offset + 4 + length
        if length == 0 or end > len(self.data):
            raise ValueError(f"call-frame entry at 0x{offset:x}: length {length}")
        cie_id = self._int(id_at, size)
        is_cie = cie_id == 0 if self.eh else cie_id == (0xFFFFFFFF if size == 4 else 0xFFFFFFFFFFFFFFFF)
        return id_at + size, end, id_at, is_cie

    def cie(self, offset: int) -> _Cie:
        found = self._cies.get(offset)
        if found is not None:
            return found
        pos, end, _, is_cie = self._header(offset)
        if not is_cie:
            raise ValueError(f"call-frame entry at 0x{offset:x} is not a CIE")
        version = self.data[pos]
        stop = self.data.index(b"\0", pos + 1)
        augmentation = bytes(self.data[pos + 1:stop])
        pos = stop + 1
        address_size = self.address_size
        if version >= 4:
            address_size = self.data[pos]
            pos += 2  # address size, segment selector size
        code_alignment, pos = read_uleb128(self.data, pos)
        data_alignment, pos = read_sleb128(self.data, pos)
        if version == 1:
            return_register = self.data[pos]
            pos += 1
        else:
            return_register, pos = read_uleb128(self.data, pos)
        fde_encoding = 0
        has_data = augmentation.startswith(b"z")
        if has_data:
            length, pos = read_uleb128(self.data, pos)
            at, stop = pos, pos + length
            for letter in augmentation[1:]:
                if letter == ord("R"):
                    fde_encoding = self.data[at]
                    at += 1
                elif letter == ord("P"):
                    encoding = self.data[at]
                    _, at = self.pointer(encoding & 0x7F, at + 1, absolute=False)
                elif letter == ord("L"):
                    at += 1
                elif letter != ord("S"):
                    break
            pos = stop
        elif augmentation and augmentation != b"eh":
            raise ValueError(f"CIE augmentation {augmentation!r}")
        found = self._cies[offset] = _Cie(code_alignment, data_alignment, bytes(self.data[pos:end]), fde_encoding,
                                          has_data, address_size, return_register)
        return found

    def fde(self, offset: int) -> Optional[_Fde]:
        """The FDE at ``offset`` of the section (None for a CIE)."""
        pos, end, id_at, is_cie = self._header(offset)
        if is_cie:
            return None
        pointer = self._int(id_at, pos - id_at)
        cie = self.cie(id_at - pointer if self.eh else pointer)
        if self.eh:
            start, pos = self.pointer(cie.fde_encoding, pos)
            span, pos = self.pointer(cie.fde_encoding & 0x0F, pos, absolute=False)
        else:
            start, span = self._int(pos, cie.address_size), self._int(pos + cie.address_size, cie.address_size)
            pos += 2 * cie.address_size
        if cie.has_augmentation_data:
            length, pos = read_uleb128(self.data, pos)
            pos += length
        encoding = cie.fde_encoding if self.eh else 0
        return _Fde(start, span, cie.code_alignment, cie.data_alignment, cie.instructions,
                    bytes(self.data[pos:end]), encoding, pos, cie.return_register)

    def all_fdes(self) -> list[_Fde]:
        """Every FDE of the section (an ``.eh_frame`` ends at a zero length)."""
        out = []
        pos, size = 0, len(self.data)
        while pos + 4 <= size:
            if self._int(pos, 4) == 0:
                break
            _, end, _, is_cie = self._header(pos)
            if not is_cie:
                fde = self.fde(pos)
                if fde is not None:  # (fde() is None only for a CIE)
                    out.append(fde)
            pos = end
        return out


# DW_CFA_* instructions (the three in the high two bits, then the others).
_CFA_ADVANCE_LOC, _CFA_OFFSET, _CFA_RESTORE = 0x40, 0x80, 0xC0


@dataclass(frozen=True)
class RegisterRule:
    """Where the caller's value of a register is, by the CFI row of an address (DWARF 5, 6.4.1):
    ``undefined`` (none: for the return address, the outermost frame), ``same`` (unchanged),
    ``offset`` (saved at CFA + ``value``), ``val_offset`` (it is CFA + ``value``), ``register``
    (in register ``value``), ``expression`` (saved at the address ``expression`` computes from the
    CFA), ``val_expression`` (it is what ``expression`` computes)."""

    kind: str
    value: int = 0
    expression: bytes = b""


@dataclass(frozen=True)
class FrameRow:
    """The CFI row in force at an address: the CFA (``cfa``, or a DWARF expression ``cfa_expression``
    when ``cfa`` is None), the rules of the registers the row names (a register it does not name
    keeps its value, as x86-64's callee-saved ones do, or is lost, as the others are), and the
    column that holds the return address."""

    cfa: Optional[CfaRule]
    cfa_expression: bytes
    registers: tuple[tuple[int, RegisterRule], ...]
    return_register: int

    def rule(self, register: int) -> Optional[RegisterRule]:
        for number, rule in self.registers:
            if number == register:
                return rule
        return None


def _block(data: bytes, pos: int) -> tuple[bytes, int]:
    length, pos = read_uleb128(data, pos)
    if pos + length > len(data):
        raise ValueError("a call-frame expression runs past its entry")
    return bytes(data[pos:pos + length]), pos + length


def _row_at(entries: _Entries, fde: _Fde, pc: int) -> FrameRow:
    """The CFI row in force at ``pc`` by the FDE's (and its CIE's) instructions."""
    cfa: Optional[tuple[int, int]] = None  # (register, offset); None: an expression (or not yet set)
    cfa_expression = b""
    registers: dict[int, RegisterRule] = {}
    initial: dict[int, RegisterRule] = {}
    saved: list[tuple[Optional[tuple[int, int]], bytes, dict[int, RegisterRule]]] = []
    location = fde.initial_location
    align = fde.data_alignment

    def restore(reg: int) -> None:
        if reg in initial:
            registers[reg] = initial[reg]
        else:
            registers.pop(reg, None)

    for program, base in ((fde.cie_instructions, None), (fde.instructions, fde.offset)):
        data = program
        pos, n = 0, len(data)
        while pos < n:
            op = data[pos]
            pos += 1
            high = op & 0xC0
            if high:
                if high == _CFA_ADVANCE_LOC:
                    location += (op & 0x3F) * fde.code_alignment
                    if location > pc:
                        break
                elif high == _CFA_OFFSET:
                    off, pos = read_uleb128(data, pos)
                    registers[op & 0x3F] = RegisterRule("offset", off * align)
                else:
                    restore(op & 0x3F)
                continue
            if op in (0x02, 0x03, 0x04, 0x1D):  # advance_loc1/2/4, MIPS_advance_loc8
                size = {0x02: 1, 0x03: 2, 0x04: 4, 0x1D: 8}[op]
                if pos + size > n:
                    raise ValueError("a call-frame instruction runs past its entry")
                location += int.from_bytes(data[pos:pos + size], entries.order) * fde.code_alignment
                pos += size
                if location > pc:
                    break
            elif op == 0x01:  # set_loc
                if fde.encoding and base is not None:
                    value, used = entries.pointer(fde.encoding, base + pos)
                    pos = used - base
                else:
                    size = entries.address_size
                    value = int.from_bytes(data[pos:pos + size], entries.order)
                    pos += size
                location = value
                if location > pc:
                    break
            elif op == 0x0C:  # def_cfa
                reg, pos = read_uleb128(data, pos)
                off, pos = read_uleb128(data, pos)
                cfa, cfa_expression = (reg, off), b""
            elif op == 0x12:  # def_cfa_sf
                reg, pos = read_uleb128(data, pos)
                off, pos = read_sleb128(data, pos)
                cfa, cfa_expression = (reg, off * align), b""
            elif op == 0x0D:  # def_cfa_register
                reg, pos = read_uleb128(data, pos)
                cfa, cfa_expression = (reg, cfa[1] if cfa else 0), b""
            elif op == 0x0E:  # def_cfa_offset
                off, pos = read_uleb128(data, pos)
                if cfa is not None:
                    cfa = (cfa[0], off)
            elif op == 0x13:  # def_cfa_offset_sf
                off, pos = read_sleb128(data, pos)
                if cfa is not None:
                    cfa = (cfa[0], off * align)
            elif op == 0x0F:  # def_cfa_expression
                cfa_expression, pos = _block(data, pos)
                cfa = None
            elif op == 0x0A:  # remember_state
                saved.append((cfa, cfa_expression, dict(registers)))
            elif op == 0x0B:  # restore_state
                if saved:
                    cfa, cfa_expression, registers = saved.pop()
            elif op in (0x05, 0x11, 0x14, 0x15, 0x2F):  # offset_extended(_sf), val_offset(_sf), GNU negative
                reg, pos = read_uleb128(data, pos)
                if op in (0x11, 0x15):
                    off, pos = read_sleb128(data, pos)
                else:
                    off, pos = read_uleb128(data, pos)
                if op == 0x2F:
                    off = -off
                registers[reg] = RegisterRule("val_offset" if op in (0x14, 0x15) else "offset", off * align)
            elif op == 0x06:  # restore_extended
                reg, pos = read_uleb128(data, pos)
                restore(reg)
            elif op in (0x07, 0x08):  # undefined, same_value
                reg, pos = read_uleb128(data, pos)
                registers[reg] = RegisterRule("undefined" if op == 0x07 else "same")
            elif op == 0x09:  # register
                reg, pos = read_uleb128(data, pos)
                other, pos = read_uleb128(data, pos)
                registers[reg] = RegisterRule("register", other)
            elif op in (0x10, 0x16):  # expression, val_expression
                reg, pos = read_uleb128(data, pos)
                block, pos = _block(data, pos)
                registers[reg] = RegisterRule("expression" if op == 0x10 else "val_expression", 0, block)
            elif op == 0x2E:  # GNU_args_size
                _, pos = read_uleb128(data, pos)
            elif op == 0x2D:  # AArch64 negate_ra_state: the return address saved from here on is signed
                pass  # (pointer authentication; the unwinder strips the signature: Arch.code_address_mask)
            elif op != 0x00:  # (nop)
                raise ValueError(f"unknown call-frame instruction 0x{op:02x}")
        else:
            if base is None:
                initial = dict(registers)  # (what DW_CFA_restore returns to: the CIE's rules)
            continue
        break
    rule = CfaRule(cfa[0], cfa[1]) if cfa is not None and not cfa_expression else None
    return FrameRow(rule, cfa_expression if rule is None else b"", tuple(sorted(registers.items())),
                    fde.return_register)


class _Table:
    """One CFI section: FDE lookup and decoded rows."""

    def __init__(self, data: bytes, address: int, eh: bool, address_size: int, little_endian: bool,
                 hdr: Optional[tuple[bytes, int]] = None, index_key: Optional[str] = None):
        self.entries = _Entries(data, address, eh, address_size, little_endian)
        self.address = address
        self.eh = eh
        self._search: Optional[tuple[Sequence[int], Sequence[int]]] = None
        self._all: Optional[tuple[list[int], list[_Fde]]] = None
        self._index: Optional[tuple[array, array]] = None
        if hdr is not None:
            self._search = _parse_eh_frame_hdr(hdr[0], hdr[1], little_endian)
        elif not eh:
            self._index = _debug_frame_index(data, address_size, little_endian, index_key)

    def fde_for(self, pc: int) -> Optional[_Fde]:
        if self._search is not None:
            starts, fdes = self._search
            i = bisect.bisect_right(starts, pc) - 1
            if i >= 0:
                entry = self.entries.fde(fdes[i] - self.address)
                if entry is not None and _covers(entry, pc):
                    return entry
            return None
        if self._index is not None:
            index_starts, offsets = self._index
            i = bisect.bisect_right(index_starts, pc) - 1
            # Overlapping FDEs are not expected, but look back a little in case of zero-sized ones.
            for j in range(i, max(i - 4, -1), -1):
                entry = self.entries.fde(offsets[j])
                if entry is not None and _covers(entry, pc):
                    return entry
            return None
        if self._all is None:
            found = sorted(self.entries.all_fdes(), key=lambda e: e.initial_location)
            self._all = ([e.initial_location for e in found], found)
        starts, entries = self._all
        i = bisect.bisect_right(starts, pc) - 1
        # Overlapping FDEs are not expected, but look back a little in case of zero-sized ones.
        for j in range(i, max(i - 4, -1), -1):
            if _covers(entries[j], pc):
                return entries[j]
        return None


def _covers(fde: _Fde, pc: int) -> bool:
    return fde.initial_location <= pc < fde.initial_location + fde.address_range


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


class _Shifted(Sequence[int]):
    """The offsets of ``.eh_frame_hdr``'s table (from the section) as the addresses they are."""

    __slots__ = ("_offsets", "_address")

    def __init__(self, offsets: array, address: int):
        self._offsets = offsets
        self._address = address

    def __len__(self) -> int:
        return len(self._offsets)

    def __getitem__(self, i):  # (an index only: bisect and fde_for ask no slice)
        return (self._offsets[i] + self._address) & 0xFFFFFFFFFFFFFFFF


def _parse_eh_frame_hdr(data: bytes, address: int, little_endian: bool) -> Optional[tuple[Sequence[int], Sequence[int]]]:
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
        if table_enc == _PE_DATAREL | 0x0B and pos + 8 * count <= len(data):
            # (what every linker writes: pairs of 32-bit offsets from the section; libstdc++ has 16,000,
            # which read one by one were a fifth of an add)
            pairs = array("i")
            pairs.frombytes(data[pos:pos + 8 * count])
            if little_endian != (sys.byteorder == "little"):
                pairs.byteswap()
            # (each made absolute when a lookup reads it: a lookup reads ~15 of them, where making
            # all 32,000 of libstdc++'s was ~1 ms of an add)
            return _Shifted(pairs[0::2], address), _Shifted(pairs[1::2], address)
        starts, fdes = [], []
        for _ in range(count):
            start, pos = read(table_enc, pos)
            fde, pos = read(table_enc, pos)
            if start is None or fde is None:  # (read() gives None only for _PE_OMIT, which table_enc is not)
                return None
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

    def __init__(self) -> None:
        self._tables: list[_Table] = []
        self._rows: dict[int, Optional[FrameRow]] = {}

    @classmethod
    def from_sections(cls, binary: "ElfFile", debug_frame: Optional[bytes],
                      index_key: Optional[str] = None) -> "CallFrames":
        """The rules of ``binary``'s ``.eh_frame``, then of ``debug_frame`` (the debug file's
        ``.debug_frame`` bytes, or None to take the binary's own). A section that cannot be read is
        left out."""
        from ...errors import ProbectlError

        self = cls()
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
        except (ProbectlError, ValueError, IndexError):
            pass
        return self

    def row_at(self, pc: int) -> Optional[FrameRow]:
        """The CFI row in force at ``pc``, or None if no FDE covers it (or its entry cannot be read)."""
        if pc in self._rows:
            return self._rows[pc]
        row = None
        for table in self._tables:
            try:
                fde = table.fde_for(pc)
                if fde is None:
                    continue
                row = _row_at(table.entries, fde, pc)
            except (ValueError, IndexError, KeyError):
                continue
            break
        self._rows[pc] = row
        return row

    def cfa_at(self, pc: int) -> Optional[CfaRule]:
        """The CFA rule in force at ``pc``, or None if no FDE covers it or the CFA is a
        DWARF expression (``DW_CFA_def_cfa_expression``)."""
        row = self.row_at(pc)
        return row.cfa if row is not None else None

    @property
    def empty(self) -> bool:
        """Whether no CFI section could be read (the binary has none, or none this reader takes)."""
        return not self._tables
