"""DWARF's LEB128 variable-length integers, read straight from section bytes (the hot loops of the
line-table decoder, the DIE scanner and the DIE reader)."""
from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from typing import Protocol

    class Indexed(Protocol):
        """Bytes, a view of them, or lists.py's window over them: what gives a byte by position."""

        def __getitem__(self, index: int, /) -> int: ...


def read_uleb128(data: Indexed, pos: int) -> tuple[int, int]:
    """The unsigned LEB128 at ``pos`` and the position after it."""
    result = 0
    shift = 0
    while True:
        b = data[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos
        shift += 7


def read_sleb128(data: Indexed, pos: int) -> tuple[int, int]:
    """The signed LEB128 at ``pos`` and the position after it."""
    result = 0
    shift = 0
    while True:
        b = data[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        shift += 7
        if b < 0x80:
            if b & 0x40:
                result -= 1 << shift
            return result, pos
