"""AArch64 code read for probing: every instruction is one 4-byte little-endian word (aligned), so a
function's instructions are its words; what is read here is which of them leave the function
(:func:`function_exits`) and where Go's stack-bound check ends (:func:`go_stack_check_end`), the
same answers :mod:`.x86_insn` gives for x86-64. Encodings from the Arm ARM (A64 base instructions)."""
from __future__ import annotations

from typing import Optional

from . import FunctionExits

# RET Xn, and RETAA/RETAB (pointer authentication's returns through x30).
_RET_MASK, _RET = 0xFFFFFC1F, 0xD65F0000
_RET_SIGNED = (0xD65F0BFF, 0xD65F0FFF)
# B imm26 and BL imm26: a signed word offset in the low 26 bits.
_B_MASK, _B, _BL = 0xFC000000, 0x14000000, 0x94000000
# BR Xn and its pointer-authenticated forms (BRAA, BRAB, BRAAZ, BRABZ): a jump the code does not say.
_BR_MASK, _BR = 0xFFFFFC1F, 0xD61F0000
_BR_SIGNED_MASK, _BR_SIGNED = 0xFEFFF800, 0xD61F0800
# B.cond imm19 (bits 23..5); CBZ/CBNZ imm19; TBZ/TBNZ imm14 (bits 18..5).
_BCOND_MASK, _BCOND = 0xFF000010, 0x54000000
_CB_MASK, _CB = 0x7E000000, 0x34000000
_TB_MASK, _TB = 0x7E000000, 0x36000000

# As x86_insn's: how far into a Go function its stack-bound check may reach, and how long the block
# it jumps to (the register arguments spilled, runtime.morestack called, reloaded) may be.
_GO_CHECK_INSNS = 8
_GO_MORESTACK_INSNS = 64


def _words(code: bytes) -> list[int]:
    return [int.from_bytes(code[k:k + 4], "little") for k in range(0, len(code) - len(code) % 4, 4)]


def _signed(value: int, bits: int) -> int:
    return value - (1 << bits) if value & (1 << (bits - 1)) else value


def _branch_target(word: int, pos: int) -> Optional[int]:
    """The offset a B or BL at offset ``pos`` goes to; None for any other word."""
    if word & _B_MASK in (_B, _BL):
        return pos + 4 * _signed(word & 0x3FFFFFF, 26)
    return None


def _conditional_target(word: int, pos: int) -> Optional[int]:
    """The offset a conditional branch (B.cond, CBZ/CBNZ, TBZ/TBNZ) at ``pos`` goes to; None else."""
    if word & _BCOND_MASK == _BCOND or word & _CB_MASK == _CB:
        return pos + 4 * _signed((word >> 5) & 0x7FFFF, 19)
    if word & _TB_MASK == _TB:
        return pos + 4 * _signed((word >> 5) & 0x3FFF, 14)
    return None


def _is_return(word: int) -> bool:
    return word & _RET_MASK == _RET or word in _RET_SIGNED


def function_exits(code: bytes, start_address: int = 0) -> FunctionExits:
    """The exits of the function whose code (all of it, no more) is ``code`` at ``start_address``:
    its RETs, its B (not BL) out of its own code, its BR."""
    returns, jumps_out, indirect = [], [], []
    for k, word in enumerate(_words(code)):
        pos = 4 * k
        if _is_return(word):
            returns.append(start_address + pos)
        elif word & _B_MASK == _B:
            target = _branch_target(word, pos)
            if target is not None and not 0 <= target < len(code):
                jumps_out.append(start_address + pos)
        elif word & _BR_MASK == _BR or word & _BR_SIGNED_MASK == _BR_SIGNED:
            indirect.append(start_address + pos)
    return FunctionExits(tuple(returns), tuple(jumps_out), tuple(indirect))


def go_stack_check_end(code: bytes, start_address: int = 0) -> Optional[int]:
    """The address right after the stack-bound check the Go compiler puts at a function's entry
    (``ldr x16, [x28, #16]; [sub x17, sp, #N;] cmp; b.ls MORESTACK``), whose block calls
    runtime.morestack (BL) and branches back to the function's first word: the function starts again
    once its goroutine's stack has grown, so a probe on the entry fires twice for one call. The check
    is the last conditional branch among its first instructions whose target block ends in a branch
    back to the entry after a call; None when there is none (a NOSPLIT function, or other code)."""
    words = _words(code)

    def returns_to_entry(k: int) -> bool:
        called = False
        for j in range(k, min(len(words), k + _GO_MORESTACK_INSNS)):
            word = words[j]
            if word & _B_MASK == _BL:
                called = True
            elif word & _B_MASK == _B:
                return called and _branch_target(word, 4 * j) == 0
            elif _is_return(word) or _conditional_target(word, 4 * j) is not None:
                return False
        return False

    found = None
    for k, word in enumerate(words[:_GO_CHECK_INSNS]):
        target = _conditional_target(word, 4 * k)
        if target is not None and 4 * k < target < 4 * len(words) and returns_to_entry(target // 4):
            found = 4 * k + 4
    return start_address + found if found is not None else None
