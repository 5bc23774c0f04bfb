"""Whether a program's code keeps frame pointers: the kernel's user callchain (``record -g``) walks the
chain of saved frame pointers, which code built without them (gcc's ``-O2`` default, most distributions'
libraries) does not keep, so its stacks must be unwound from call-frame information instead
(:mod:`probectl.record.stackcopies`).

A file keeps them when most of its functions start with the frame set-up (:data:`FRAME_POINTER_PROLOGUE`):
gcc's ``-fno-omit-frame-pointer`` gives every function one, leaves included, and code built without it
gives almost none (a function that uses %rbp as a general register pushes it, but does not move %rsp
into it first).
"""
from __future__ import annotations

from ..arch.x86_64 import ENDBR64, FRAME_POINTER_PROLOGUE
from ..errors import DebugInfoError
from .elf import ElfFile

SAMPLED_FUNCTIONS = 400  # the functions looked at, spread over the file


def keeps_frame_pointers(elf: ElfFile) -> bool:
    """Whether most of the sized functions of ``elf`` (up to :data:`SAMPLED_FUNCTIONS`, spread over its
    symbol table) set up a frame pointer; False for a file without function symbols."""
    functions = [f for f in elf.functions() if f.size >= len(ENDBR64) + len(FRAME_POINTER_PROLOGUE)]
    if not functions:
        return False
    step = max(1, len(functions) // SAMPLED_FUNCTIONS)
    looked = keeping = 0
    for sym in functions[::step]:
        try:
            start = elf.file_bytes(elf.vaddr_to_offset(sym.value), len(ENDBR64) + len(FRAME_POINTER_PROLOGUE),
                                   "a function's first instructions")
        except DebugInfoError:
            continue
        looked += 1
        if start.startswith(ENDBR64):
            start = start[len(ENDBR64):]
        keeping += start.startswith(FRAME_POINTER_PROLOGUE)
    return looked > 0 and 2 * keeping > looked
