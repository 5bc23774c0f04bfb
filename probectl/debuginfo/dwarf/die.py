"""Small helpers over DIEs (``units.DIE``): attributes through abstract origins, names, keys, globs,
and the error guard every DWARF entry point uses."""
from __future__ import annotations

import os
import re
from typing import Optional

from ...errors import DebugInfoError, guard_decoding
from .units import DIE

_GLOB_CHARS = re.compile(r"[*?\[]")

# Attributes that may be inherited from an abstract origin or a declaration.
_INTEGRATE = ("DW_AT_abstract_origin", "DW_AT_specification")


def _corrupt_dwarf(reader, exc: BaseException) -> DebugInfoError:
    path = getattr(reader, "path", None) or getattr(getattr(reader, "debuginfo", None), "path", "?")
    return DebugInfoError(f"{path}: corrupt or unsupported DWARF ({exc.__class__.__name__}: {exc})",
                          hint="rebuild the binary with a supported compiler, or check the debug file belongs to it")


# Every DWARF entry point: a failure to read damaged DWARF (units.DwarfFormatError is a ValueError;
# bytes that end too soon raise IndexError) becomes a DebugInfoError naming the file.
# (A zero line_range or address size divides by zero; a huge count overflows a C size.)
guarded = guard_decoding((KeyError, IndexError, ValueError,
                          AssertionError, UnicodeError, NotImplementedError, RecursionError, ZeroDivisionError,
                          OverflowError), _corrupt_dwarf)


# --- DIE helpers ------------------------------------------------------------------------------


def die_attr(die: Optional[DIE], attr: str, integrate: bool = True):
    """An attribute's value, following DW_AT_abstract_origin/DW_AT_specification when ``integrate``."""
    seen = 0
    while die is not None and seen < 8:
        a = die.attributes.get(attr)
        if a is not None:
            return a.value
        if not integrate:
            return None
        nxt = None
        for link in _INTEGRATE:
            if link in die.attributes:
                nxt = die.get_DIE_from_attribute(link)
                break
        die = nxt
        seen += 1
    return None


def die_name(die: DIE) -> Optional[str]:
    """DW_AT_name (from the origin for concrete instances), decoded."""
    value = die_attr(die, "DW_AT_name")
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else value


def die_linkage_name(die: DIE) -> Optional[str]:
    value = die_attr(die, "DW_AT_linkage_name") or die_attr(die, "DW_AT_MIPS_linkage_name")
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else value


def die_written_name(die: DIE) -> Optional[str]:
    """A function's name as its programmers write it: a C++ or Rust function's qualified name, from
    its linkage name demangled, without parameters and ABI tags (``shop::Cart::add``,
    ``rust_shop::shop::Cart::add``); else DW_AT_name (C's, Go's whole name)."""
    linkage = die_linkage_name(die)
    if linkage:
        from ..demangle import demangle, function_name, is_mangled

        full = demangle(linkage) if is_mangled(linkage) else None
        if full is not None:
            return function_name(full)
    return die_name(die)


def die_origin(die: DIE) -> DIE:
    """The abstract origin of a concrete instance (the DIE itself when it has none)."""
    seen = 0
    while "DW_AT_abstract_origin" in die.attributes and seen < 8:
        die = die.get_DIE_from_attribute("DW_AT_abstract_origin")
        seen += 1
    return die


def die_key(die: DIE) -> tuple[int, int]:
    return (die.cu.cu_offset, die.offset)


def is_glob(pattern: str) -> bool:
    return bool(_GLOB_CHARS.search(pattern))


def tail_match(path: Optional[str], tail: str) -> bool:
    """perf's ``strtailcmp``: ``tail`` equals the end of ``path`` (whole path components not required)."""
    if not path:
        return False
    return path.endswith(tail) or os.path.normpath(path).endswith(os.path.normpath(tail))
