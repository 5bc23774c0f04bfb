"""Go function names as Go writes them, generics included, where perf's grammar reads them otherwise.

perf's grammar reads a name that holds a '.' as a source file (``main.work:3``, ``lines main.work``):
in a Go program, whose functions' names hold dots, such a name is the function when it names one of
the program's and no source file (:func:`is_function_not_file`).

Go names an instantiation of a generic function, or a method of an instantiated generic type, with
its type arguments in brackets (``main.Sum[go.shape.int_0]``, ``main.(*Stack[go.shape.string_0]).Push``:
one instantiation per shape of the arguments, shared by the types of that shape). In a probe point
a bracket is a glob's character class, which no such name matches, so in a Go program brackets are
the name's own. A generic function or method named without its type arguments (``main.Sum``,
``main.(*Stack).Push``) is each of its instantiations, as a C++ name without its parameters is each
of its overloads.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Optional

from ..errors import ProbePointNotFound

if TYPE_CHECKING:
    from ..debuginfo.dwarf import DebugInfo
    from ..debuginfo.elf import ElfFile

# fnmatch's pattern of one literal '['
_LITERAL_BRACKET = "[[]"


def without_type_args(name: str) -> str:
    """``name`` without its bracketed type arguments (nested ones too: ``map[string]int``)."""
    out, depth = [], 0
    for ch in name:
        if ch == "[":
            depth += 1
        elif ch == "]" and depth:
            depth -= 1
        elif not depth:
            out.append(ch)
    return "".join(out)


def go_names(elf: "ElfFile", name: str) -> Optional[list[str]]:
    """The names to look ``name`` up by, as globs whose brackets are literal, in a Go program: the name
    itself when it holds type arguments, each instantiation when it is a generic function or method
    named without them; None when it needs neither (no bracket, or a glob already written with
    fnmatch's literal bracket, or a function of that very name)."""
    if _LITERAL_BRACKET in name:
        return None
    if "[" in name:
        exact = name.replace("[", _LITERAL_BRACKET)
        generic = without_type_args(name)
        if not elf.find_functions(exact) and "*" not in name and "?" not in name:
            found = instantiations(elf, generic)
            if found:  # (main.Sum[int]: a type argument, where Go names the shape)
                raise ProbePointNotFound(name, hint=f"Go names an instantiation by the shapes of its type "
                                                    f"arguments: {', '.join(found)} ({generic} names them all)")
        return [exact]
    if elf.find_functions(name):
        return None
    return [n.replace("[", _LITERAL_BRACKET) for n in instantiations(elf, name)] or None


def instantiations(elf: "ElfFile", name: str) -> list[str]:
    """The functions of ``elf`` that are instantiations of the generic function or method ``name``
    (written without type arguments), by name."""
    return sorted({sym.name for sym in elf.functions() if "[" in sym.name and without_type_args(sym.name) == name})


def is_function_not_file(elf: "ElfFile", debuginfo: "DebugInfo", name: str) -> bool:
    """``name``, which perf's grammar read as a source file, is a function of the Go program (one its
    DWARF defines, or a generic one's instantiations) and no source file of it."""
    if not debuginfo.find_functions(name) and go_names(elf, name) is None:
        return False
    from ..debuginfo.dwarf.lines import source_files

    return not source_files(debuginfo, name)
