"""Whether a program's code keeps frame pointers: the kernel's user callchain (``record -g``) walks the
chain of saved frame pointers, which code built without them (gcc's ``-O2`` default, most distributions'
libraries) does not keep, so its stacks must be unwound from call-frame information instead
(:mod:`probectl.record.stackcopies`).

A file keeps them when most of its functions start with the frame set-up (:data:`FRAME_POINTER_PROLOGUE`):
gcc's ``-fno-omit-frame-pointer`` gives every function one, leaves included, and code built without it
gives almost none (a function that uses %rbp as a general register pushes it, but does not move %rsp
into it first). On AArch64 the set-up is ``add x29, sp, #N`` (``mov x29, sp``) among a function's first
instructions, after it stores x29 and x30 as its frame record.
"""
from __future__ import annotations

from ..arch import EM_AARCH64
from ..arch import aarch64, x86_64
from ..errors import DebugInfoError
from .elf import ElfFile

SAMPLED_FUNCTIONS = 400  # the functions looked at, spread over the file


def _x86_64_sets_up(code: bytes) -> bool:
    if code.startswith(x86_64.ENDBR64):
        code = code[len(x86_64.ENDBR64):]
    return code.startswith(x86_64.FRAME_POINTER_PROLOGUE)


def _aarch64_sets_up(code: bytes) -> bool:
    words = (int.from_bytes(code[i:i + 4], "little") for i in range(0, len(code) - 3, 4))
    return any(w & aarch64.FRAME_POINTER_SETUP_MASK == aarch64.FRAME_POINTER_SETUP for w in words)


def keeps_frame_pointers(elf: ElfFile) -> bool:
    """Whether most of the sized functions of ``elf`` (up to :data:`SAMPLED_FUNCTIONS`, spread over its
    symbol table) set up a frame pointer; False for a file without function symbols."""
    if elf.machine == EM_AARCH64:
        length, sets_up = 4 * aarch64.FRAME_POINTER_SETUP_WITHIN, _aarch64_sets_up
    else:
        length, sets_up = len(x86_64.ENDBR64) + len(x86_64.FRAME_POINTER_PROLOGUE), _x86_64_sets_up
    functions = [f for f in elf.functions() if f.size >= length]
    if not functions:
        return False
    step = max(1, len(functions) // SAMPLED_FUNCTIONS)
    looked = keeping = 0
    for sym in functions[::step]:
        try:
            start = elf.file_bytes(elf.vaddr_to_offset(sym.value), length, "a function's first instructions")
        except DebugInfoError:
            continue
        looked += 1
        keeping += sets_up(start)
    return looked > 0 and 2 * keeping > looked
