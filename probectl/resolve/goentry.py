"""``FUNC`` on a Go program: the uprobe right after the function's stack-bound check, not on its
first byte.

A Go function begins by comparing the stack pointer with its goroutine's stack bound; when the frame
would not fit, it calls runtime.morestack, which moves the goroutine to a larger stack, and then
jumps back to the function's first byte to start the call again. A probe there fires once more for
that call each time (11 times in 2,001 nested calls of the tests' recursive fixture), so counts,
rates and latencies of a Go function were wrong by the number of stack growths; perf and bpftrace
probe the first byte. Right after the check, no register or stack slot has changed but a scratch
register and the flags, so the arguments are read there exactly as at the entry.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from .. import spec as S
from ..dataclass import replace
from ..errors import InstructionDecodeError
from .points import ProbePoint

if TYPE_CHECKING:
    from . import Resolver


def names_go_entry(point: S.PointSpec) -> bool:
    """The point is a function's entry as its name gives it (no line, offset, address or return: `FUNC+0`
    is the first byte, asked for)."""
    return (point.function is not None and point.address is None and point.line is None and point.lazy is None
            and point.offset is None and not point.is_return and point.sdt is None)


def past_stack_checks(resolver: "Resolver", points: list[ProbePoint], text: str) -> list[ProbePoint]:
    """``points`` with each one on a Go function's first byte moved past the function's stack-bound
    check (those with none, a NOSPLIT function's, and inline instances stay)."""
    from .boundary import code_bytes

    code_reader = resolver.target.arch.code()
    moved: list[ProbePoint] = []
    checked: list[str] = []
    for p in points:
        sym = resolver.elf.symbol_at(p.address) if p.offset == 0 and not p.at_return_instruction else None
        if sym is None or sym.value != p.address or not sym.size:
            moved.append(p)
            continue
        try:
            code = code_bytes(resolver.elf, p.address, sym.size, f"decode {p.function}")
            after = code_reader.go_stack_check_end(code, p.address)
        except InstructionDecodeError:
            after = None
        if after is None:
            moved.append(p)
            continue
        offset = after - p.address
        moved.append(replace(p, address=after, offset=offset, place=resolver.place(p.function, after, offset)))
        checked.append(f"{p.function}+{offset}")
    if checked:
        where = checked[0] if len(checked) == 1 else f"{len(checked)} functions"
        resolver.notes.append(f"'{text}' on a Go program: probed after the stack-bound check ({where}), which a Go "
                              "function runs again from its first byte when its goroutine's stack grows: there a "
                              "probe would fire twice for one call")
    return moved
