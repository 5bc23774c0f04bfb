"""Range lists and location lists: ``.debug_ranges``/``.debug_loc`` (DWARF 2-4) and
``.debug_rnglists``/``.debug_loclists`` (DWARF 5), read into absolute address ranges.

A list that runs past the end of its section raises IndexError, an unknown entry DwarfFormatError.

Both kinds are the same list in each format: address pairs with base-address selections (DWARF 4),
or entries of a kind byte (DWARF 5: offset pairs from a base, start/end or start/length, as
addresses or as indexes into ``.debug_addr``); a location list's entries also carry an expression.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from .leb128 import read_uleb128
from .units import DwarfFormatError

if TYPE_CHECKING:
    from .units import Unit

# The address range of DW_LLE_default_location: everywhere.
EVERYWHERE = (0, 1 << 64)

_MAX_ENTRIES = 1 << 20  # (a list longer than this is damaged: it would loop over a corrupt section)


def range_list(unit: "Unit", offset: int, base: int) -> list[tuple[int, int]]:
    """The (low, high) ranges of the range list at ``offset`` (of ``.debug_rnglists`` for a DWARF 5
    unit, else ``.debug_ranges``), relative ones from ``base`` (the unit's base address), empty
    ones left out."""
    return [(lo, hi) for lo, hi, _ in _entries(unit, offset, base, False) if hi > lo]


def location_list(unit: "Unit", offset: int, base: int) -> list[tuple[int, int, bytes]]:
    """The (low, high, expression bytes) entries of the location list at ``offset`` (of
    ``.debug_loclists`` for a DWARF 5 unit, else ``.debug_loc``); a default location covers
    ``EVERYWHERE``."""
    return [e for e in _entries(unit, offset, base, True) if e[1] >= e[0]]


def _entries(unit: "Unit", offset: int, base: int, locations: bool) -> list[tuple[int, int, bytes]]:
    if unit.version >= 5:
        name, read = ("debug_loclists_sec" if locations else "debug_rnglists_sec"), _v5_entries
    else:
        name, read = ("debug_loc_sec" if locations else "debug_ranges_sec"), _v4_entries
    if offset < 0:
        raise DwarfFormatError(f"a list at a negative offset ({offset})")
    return unit.dwarfinfo.window(name, offset, lambda data: read(unit, _Ends(data), 0, base, locations))


class _Ends:
    """Bytes whose end raises IndexError (so that ``DwarfSections.window`` reads on), sliced as bytes."""

    __slots__ = ("data",)

    def __init__(self, data):
        self.data = data

    def __len__(self) -> int:
        return len(self.data)

    def __getitem__(self, key):
        if isinstance(key, slice):
            if key.stop is not None and key.stop > len(self.data):
                raise IndexError("past the window")
            return bytes(self.data[key])
        return self.data[key]


def _v4_entries(unit: "Unit", data: "_Ends", pos: int, base: int, locations: bool) -> list:
    size = unit.address_size
    order = unit.dwarfinfo.byteorder
    top = (1 << (8 * size)) - 1
    out: list[tuple[int, int, bytes]] = []
    n = len(data)
    for _ in range(_MAX_ENTRIES):
        if pos < 0 or pos + 2 * size > n:
            raise IndexError(f"a {'location' if locations else 'range'} list runs past the end of its section")
        begin = int.from_bytes(data[pos:pos + size], order)
        end = int.from_bytes(data[pos + size:pos + 2 * size], order)
        pos += 2 * size
        if begin == 0 and end == 0:
            return out
        if begin == top:  # a base address selection
            base = end
            continue
        expr = b""
        if locations:
            length = int.from_bytes(data[pos:pos + 2], order)
            expr = data[pos + 2:pos + 2 + length]
            pos += 2 + length
            if pos > n:
                raise IndexError("a location list runs past the end of its section")
        out.append((base + begin, base + end, expr))
    raise DwarfFormatError("a location or range list that does not end")


# DW_LLE_* / DW_RLE_* kinds (the same numbers up to 5; the location kinds then shift by one for
# DW_LLE_default_location).
_END, _BASEX, _STARTX_ENDX, _STARTX_LENGTH, _OFFSET_PAIR = 0, 1, 2, 3, 4
_LLE_DEFAULT, _LLE_BASE, _LLE_START_END, _LLE_START_LENGTH, _LLE_GNU_VIEW_PAIR = 5, 6, 7, 8, 9
_RLE_BASE, _RLE_START_END, _RLE_START_LENGTH = 5, 6, 7


def _v5_entries(unit: "Unit", data: "_Ends", pos: int, base: int, locations: bool) -> list:
    dwarf = unit.dwarfinfo
    size = unit.address_size
    order = dwarf.byteorder
    n = len(data)
    out: list[tuple[int, int, bytes]] = []

    def address(at: int) -> int:
        if at + size > n:
            raise IndexError("a list entry runs past the end of its section")
        return int.from_bytes(data[at:at + size], order)

    if locations:
        base_kind, start_end, start_length = _LLE_BASE, _LLE_START_END, _LLE_START_LENGTH
    else:
        base_kind, start_end, start_length = _RLE_BASE, _RLE_START_END, _RLE_START_LENGTH
    for _ in range(_MAX_ENTRIES):
        if not 0 <= pos < n:
            raise IndexError(f"a {'location' if locations else 'range'} list runs past the end of its section")
        kind = data[pos]
        pos += 1
        if kind == _END:
            return out
        if kind == _BASEX:
            index, pos = read_uleb128(data, pos)
            base = dwarf.get_addr(unit, index)
            continue
        if kind == base_kind:
            base = address(pos)
            pos += size
            continue
        if locations and kind == _LLE_GNU_VIEW_PAIR:
            _, pos = read_uleb128(data, pos)
            _, pos = read_uleb128(data, pos)
            continue
        if kind == _STARTX_ENDX:
            a, pos = read_uleb128(data, pos)
            b, pos = read_uleb128(data, pos)
            lo, hi = dwarf.get_addr(unit, a), dwarf.get_addr(unit, b)
        elif kind == _STARTX_LENGTH:
            a, pos = read_uleb128(data, pos)
            length, pos = read_uleb128(data, pos)
            lo = dwarf.get_addr(unit, a)
            hi = lo + length
        elif kind == _OFFSET_PAIR:
            a, pos = read_uleb128(data, pos)
            b, pos = read_uleb128(data, pos)
            lo, hi = base + a, base + b
        elif kind == start_end:
            lo, hi = address(pos), address(pos + size)
            pos += 2 * size
        elif kind == start_length:
            lo = address(pos)
            length, pos = read_uleb128(data, pos + size)
            hi = lo + length
        elif locations and kind == _LLE_DEFAULT:
            lo, hi = EVERYWHERE
        else:
            raise DwarfFormatError(f"unknown {'location' if locations else 'range'} list entry kind {kind}")
        expr = b""
        if locations:
            length, pos = read_uleb128(data, pos)
            expr = data[pos:pos + length]
            pos += length
            if pos > n:
                raise IndexError("a location list runs past the end of its section")
        out.append((lo, hi, expr))
    raise DwarfFormatError("a location or range list that does not end")
