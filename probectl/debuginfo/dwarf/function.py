"""A function as DWARF describes it: a definition with code, an inline function's abstract
definition, or one inline instance (what ``DebugInfo`` finds by name and the line rules walk)."""
from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Optional

from .units import DIE, Unit as CompileUnit

from ...dataclass import dataclass, field
from .die import die_attr, die_key

if TYPE_CHECKING:
    from . import DebugInfo


@dataclass(eq=False)
class Function:
    """A function definition (``DW_TAG_subprogram``) or one instance of it.

    An out-of-line function has code: ``entry`` and ``ranges`` are set. An inline function's
    abstract definition has none (``abstract`` is True); its instances are other ``Function``
    objects with ``inlined`` True (``DW_TAG_inlined_subroutine``) carrying the call site, or
    out-of-line concrete copies (``DW_TAG_subprogram`` with an abstract origin).
    """

    name: str
    die: DIE
    cu: CompileUnit
    debuginfo: "DebugInfo" = field(repr=False)
    entry: Optional[int]
    ranges: tuple[tuple[int, int], ...]
    inlined: bool = False
    call_file: Optional[str] = None
    call_line: int = 0
    external: bool = False
    abstract: bool = False
    caller: Optional["Function"] = field(default=None, repr=False)

    @property
    def key(self) -> tuple[int, int]:
        return die_key(self.die)

    @functools.cached_property
    def decl_file(self) -> Optional[str]:
        """The file that declares it; read on first use (it needs the CU's line-table header)."""
        return self.debuginfo.decl_file(self.die)

    @functools.cached_property
    def decl_line(self) -> int:
        """The line that declares it (0: not known), which relative lines (``FUNC:RLN``) count from:
        DW_AT_decl_line, or where the DWARF has none (Go's before 1.20: every function) the first line
        its parameters are declared on (the ``func work(depth int) int {`` line), or without
        parameters the line of its entry in its own file (Go's line table puts the stack-bound check
        on the ``func`` line); read on first use."""
        line = die_attr(self.die, "DW_AT_decl_line")
        if line:
            return int(line)
        if self.inlined or self.abstract or not self.decl_file:
            return 0
        lines = [die_attr(child, "DW_AT_decl_line") for child in self.die.iter_children()
                 if child.tag == "DW_TAG_formal_parameter"]
        if any(lines):
            return min(int(n) for n in lines if n)
        return self.debuginfo.entry_line(self)

    @property
    def low(self) -> Optional[int]:
        return min((lo for lo, _ in self.ranges), default=None)

    @property
    def high(self) -> Optional[int]:
        return max((hi for _, hi in self.ranges), default=None)

    def contains(self, address: int) -> bool:
        return any(lo <= address < hi for lo, hi in self.ranges)

    def __repr__(self) -> str:
        kind = "inline " if self.inlined else "abstract " if self.abstract else ""
        where = f"@0x{self.entry:x}" if self.entry is not None else ""
        return f"<Function {kind}{self.name}{where} {self.decl_file}:{self.decl_line}>"
