"""A DIE reference goes straight to its unit: the units' offsets, read once, in place of pyelftools' search.

pyelftools finds the unit holding a ``.debug_info`` offset (``get_CU_containing``: a
``DW_FORM_ref_addr``, a name index entry given by DIE offset) by parsing units one after the other
from the nearest one it has parsed, each with its abbreviation table: for a kernel's 1,841 units,
~5 s for the 36 globals of ``vars --externs tcp_sendmsg``. The units' offsets only need their
headers (``dieindex.read_unit_headers``, ~2 ms for a kernel); the containing unit is then a
bisection, and only that unit is parsed.
"""
from __future__ import annotations

import bisect
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from . import DebugInfo


def install(debuginfo: "DebugInfo") -> None:
    """Make ``debuginfo.dwarf.get_CU_containing`` (and so ``get_DIE_from_refaddr``) find the unit by
    bisection in the unit offsets, read on first use; pyelftools' own search when the headers
    cannot be read that way (unit types the reader leaves to pyelftools, a damaged section) or the
    hooks are missing (another pyelftools)."""
    dwarf = debuginfo.dwarf
    original = getattr(dwarf, "get_CU_containing", None)
    if original is None or not hasattr(dwarf, "get_CU_at") or dwarf.debug_info_sec is None:
        return
    found: list = []

    def get_cu_containing(refaddr: int):
        if not found:
            from .dieindex import read_unit_headers

            units = read_unit_headers(debuginfo)
            found.append(([u[0] for u in units], [u[1] for u in units]) if units else None)
        if found[0] is not None:
            starts, ends = found[0]
            k = bisect.bisect_right(starts, refaddr) - 1
            if k >= 0 and refaddr < ends[k]:
                return dwarf.get_CU_at(starts[k])
        return original(refaddr)

    dwarf.get_CU_containing = get_cu_containing
