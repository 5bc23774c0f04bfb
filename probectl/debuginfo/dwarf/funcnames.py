"""The functions ``funcs`` lists, with the names their DWARF gives that their symbols do not
(:func:`function_rows`): Rust closures named as rustc names them, ``{closure#0}``, the number telling a
function's closures apart, and functions inlined at every call, which have no symbol.

A v0 symbol says which closure it is (:mod:`probectl.debuginfo.rustv0`); a legacy symbol says only
``{{closure}}`` (the hash tells them apart), but its DWARF names the closure's subprogram, and each
enclosing closure's namespace, ``{closure#N}``: a legacy path is spelled the same as the v0 path
from there, so that ``funcs`` lists, and ``add`` takes, one spelling on both builds."""
from __future__ import annotations

from typing import TYPE_CHECKING, Optional

from ...errors import ProbectlError
from ..demangle import LEGACY_CLOSURE
from ..demangle import function_rows as symbol_rows
from ..elf import ElfFile

if TYPE_CHECKING:
    from . import DebugInfo
    from .units import DIE

_CLOSURE = "{closure#"


def spell_closures(debuginfo: "DebugInfo", demangled: str, address: int) -> str:
    """``demangled`` (a legacy Rust path) with each ``{{closure}}`` part spelled as the DWARF of the
    function at ``address`` names it (``{closure#1}``); as it is when that DWARF does not say (no
    function there, or not as many closures in its scopes as in the path)."""
    if LEGACY_CLOSURE not in demangled:
        return demangled
    fn = debuginfo.function_at(address) if address else None
    if fn is None:
        return demangled
    names = _closure_scopes(fn.die)
    parts = _path_parts(demangled)
    at = [i for i, part in enumerate(parts) if part == LEGACY_CLOSURE]
    if not at or len(at) != len(names):
        return demangled
    for i, name in zip(at, names):
        parts[i] = name
    return "::".join(parts)


def _closure_scopes(die: "DIE") -> list[str]:
    """The ``{closure#N}`` names of ``die`` and the scopes around it, outermost first (without the
    generic arguments rustc writes after an instance's: ``{closure#0}<alloc::alloc::Global>``)."""
    out = []
    cur: Optional["DIE"] = die
    while cur is not None:
        attr = cur.attributes.get("DW_AT_name")
        name = attr.value.decode("utf-8", "replace") if attr is not None and isinstance(attr.value, bytes) else (
            attr.value if attr is not None else None)
        if isinstance(name, str) and name.startswith(_CLOSURE):
            out.append(name.split("}", 1)[0] + "}")
        cur = cur.get_parent()
    return out[::-1]


def _path_parts(path: str) -> list[str]:
    """A path's ``::`` parts; those inside ``<...>`` (a type's) stay in their part."""
    parts, depth, start = [], 0, 0
    i = 0
    while i < len(path):
        c = path[i]
        if c == "<":
            depth += 1
        elif c == ">" and path[i - 1:i] != "-":
            depth -= 1
        elif depth == 0 and path.startswith("::", i):
            parts.append(path[start:i])
            start = i + 2
            i += 2
            continue
        i += 1
    parts.append(path[start:])
    return parts


def function_rows(path: str, demangled: bool = True) -> dict[str, tuple[int, int]]:
    """The functions ``funcs`` lists of the file at ``path`` (:func:`..demangle.function_rows`):
    with their DWARF, read only when a C++ or Rust list is made (not when it is kept), the closures of
    a legacy Rust path spelled as v0 spells them (``{closure#0}``) and the functions inlined at every
    call, which no symbol names (found by their linkage names in the DWARF's name index), those that
    ``add`` finds code for (``DebugInfo.probe_functions``: a definition or an inline instance at an
    address; a COMDAT copy the linker discarded, and the instances inlined into one, are at 0)."""
    from . import DebugInfo

    opened: list[Optional[DebugInfo]] = []

    def debuginfo() -> Optional[DebugInfo]:
        if not opened:
            try:
                opened.append(DebugInfo.open(path))
            except (ProbectlError, OSError):
                opened.append(None)
        return opened[0]

    def closures(full: str, address: int) -> str:
        found = debuginfo()
        return spell_closures(found, full, address) if found is not None else full

    def inlined() -> list[str]:
        found = debuginfo()
        try:
            return list(found.name_index()) if found is not None else []
        except ProbectlError:
            return []

    def probed(name: str) -> bool:
        found = debuginfo()
        try:
            return found is not None and found.finds_code(name)
        except ProbectlError:
            return False

    try:
        return symbol_rows(ElfFile(path), demangled, closures, inlined, probed)
    finally:
        if opened and opened[0] is not None:
            opened[0].close()
