"""What the two C type models (DWARF's in :mod:`.dwarf.types`, BTF's in :mod:`.btf.types`) share:
bitfield placement, the kernel fetch type of a scalar, and the error for a chain that does not fit.

Kept apart from both, so that BTF resolution never imports the DWARF reader (or pyelftools).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from ..errors import TypeMismatchError

# TypeMismatchError is raised by both type models and by the fetches of resolve, so it lives in
# errors; it is re-exported here for the modules that import it from this one.
__all__ = ["MAX_BASIC_TYPE_BITS", "Bitfield", "TypeMismatchError", "scalar_fetch_type"]

MAX_BASIC_TYPE_BITS = 64  # the widest value a fetch type (u64/s64/x64) reads


@dataclass(frozen=True)
class Bitfield:
    """Where a bitfield lives, as the kernel reads it: ``bits`` wide, ``shift`` bits above the
    lowest bit of a ``container``-bit little-endian word starting ``byte_offset`` bytes into
    the enclosing struct."""

    byte_offset: int
    shift: int
    bits: int
    container: int
    signed: bool

    @property
    def fetch_type(self) -> str:
        return f"b{self.bits}@{self.shift}/{self.container}"


def scalar_fetch_type(size: Optional[int], signed: bool, prefix: Optional[str] = None, x_types: bool = True) -> str:
    """perf's ``convert_variable_type`` for a value of ``size`` bytes: ``s<bits>`` if signed, else
    ``x<bits>`` (``u<bits>`` without the kernel's x-types); ``prefix`` forces u/s/x. The width is
    capped at 64 bits; a type without a size (arrays) gets no type at all ("")."""
    if size is None or size <= 0:
        return ""
    bits = min(size * 8, MAX_BASIC_TYPE_BITS)
    if prefix == "x" and not x_types:
        prefix = None
    if prefix is None:
        prefix = "s" if signed else ("x" if x_types else "u")
    return f"{prefix}{bits}"
