"""x86-64 instruction lengths, so that a ``FUNC+OFFS`` probe can be checked to start an instruction.

The kernel accepts a uprobe at any byte offset; one placed inside an instruction replaces a byte of
that instruction with ``int3`` and the traced program crashes (SIGSEGV, SIGILL) or computes garbage.
perf does not check this for uprobes. This module decodes the function linearly from its first byte,
as compilers lay code out, and says whether the offset is an instruction start.

Only lengths are decoded, never operands: the legacy prefixes, REX, the VEX (C4/C5), EVEX (62) and
XOP (8F) escapes, the one-byte, 0F, 0F38 and 0F3A maps with their ModRM, SIB, displacement and
immediate sizes, and the operand-size (66) and address-size (67) overrides. The tables are written
from the opcode maps of the Intel SDM (volume 2, appendix A) and AMD's APM for XOP and 3DNow!,
for 64-bit mode. Where the two vendors disagree (a 66 prefix on a near branch), the length follows
AMD, which is also what objdump prints: no compiler emits that combination. Where objdump prints
something other than what the CPU executes, the decoder follows the CPU: FWAIT (9B) is an instruction
of its own even before an x87 instruction (objdump joins them: "finit"), and a REX prefix followed by
another prefix is ignored as part of the instruction (objdump prints it on a line of its own).
Undefined encodings (opcodes invalid in 64-bit mode, undefined members of the C6, C7, FE, FF, 8F and
0F BA groups, unknown 3DNow! and VEX/EVEX/XOP maps, VEX after a REX/66/F2/F3/F0 prefix, more than 15
bytes) raise an error: they are what a linear decode meets when a function holds data.

Entry points:

- ``insn_length(code, pos)``: the length of one instruction (raises ``InstructionDecodeError``);
- ``instruction_starts(code, start_address)``: every instruction start of a linear decode;
- ``check_boundary(code, offset, function)``: raise ``BoundaryError`` when ``offset`` is inside an
  instruction (``code`` starts at the function's first byte);
- ``function_exits(code, start_address)``: the near returns of a function and its direct jumps out of
  it (tail calls), the places a return probe made of uprobes must cover (a Go program's ``%return``);

:func:`probectl.resolve.boundary.check_probe_offset` applies the check to a function of an ELF file.

``BoundaryError`` is a user error (the probe would crash the program); ``InstructionDecodeError``
means the check could not be made (bytes that are not code, or an encoding this decoder lacks), and
a caller turns it into a warning.
"""
from __future__ import annotations

from typing import Optional

from ..errors import InstructionDecodeError
from . import BoundaryError, FunctionExits

MAX_INSN_LENGTH = 15


# --- opcode tables -------------------------------------------------------------------------------
#
# Each map is a tuple of 256 small ints: bit 0 says a ModRM byte follows the opcode, bits 1..4 give
# the kind of immediate, bit 5 and 6 mark special ModRM handling, and values from _SPECIAL up are
# bytes that are not (complete) opcodes.

_MODRM = 1
_IMM_NONE = 0
_IMM_B = 1 << 1      # imm8 (also rel8)
_IMM_W = 2 << 1      # imm16 (ret/retf imm16)
_IMM_Z = 3 << 1      # imm16 or imm32 by operand size; imm32 with REX.W (also rel16/rel32)
_IMM_V = 4 << 1      # imm16, imm32 or imm64 by operand size (mov r, imm)
_IMM_ENTER = 5 << 1  # imm16 + imm8
_IMM_MOFFS = 6 << 1  # an address: 8 bytes, or 4 with the 67 prefix
_IMM_GRP3 = 7 << 1   # F6/F7: test (/0 and /1) has imm8 / immz, the rest of the group none
_IMM_XTRQ = 8 << 1   # 0F 78: vmread (none), or extrq/insertq (imm8, imm8) with a 66/F2 prefix
_IMM_MASK = 0x1E
_REG_ONLY = 1 << 5   # mov to/from control and debug registers: the mod field is ignored (always 11)
_GROUP = 1 << 6      # a group whose ModRM reg field leaves some encodings undefined (see _group_error)

_SPECIAL = 128
_INVALID = 128       # undefined in 64-bit mode
_PREFIX = 129        # a legacy prefix
_REX = 130
_ESC_0F = 131
_VEX2 = 132          # C5
_VEX3 = 133          # C4
_EVEX = 134          # 62
_POP_XOP = 135       # 8F: pop r/m, or XOP when the next byte's map field is 8 or more
_ESC_38 = 136
_ESC_3A = 137

# Short names for the table cells (deleted after the tables): N nothing after the opcode, M ModRM,
# B imm8, W imm16, Z immz, V imm16/32/64, O moffs, EN enter's imm16+imm8, T F6/F7, XT 0F 78, R ModRM
# whose mod is ignored, G a group with undefined members, X undefined, P legacy prefix, RX REX,
# OF/E38/E3A escapes to the 0F/0F38/0F3A maps, V2/V3 VEX, EV EVEX, XP pop r/m or XOP.
N, M, B, W, Z, V = _IMM_NONE, _MODRM, _IMM_B, _IMM_W, _IMM_Z, _IMM_V
O, EN, T, XT = _IMM_MOFFS, _IMM_ENTER, _MODRM | _IMM_GRP3, _MODRM | _IMM_XTRQ
MB, MZ, R = _MODRM | _IMM_B, _MODRM | _IMM_Z, _MODRM | _REG_ONLY
G, MBG, MZG = _MODRM | _GROUP, _MODRM | _IMM_B | _GROUP, _MODRM | _IMM_Z | _GROUP
X, P, RX, OF, E38, E3A = _INVALID, _PREFIX, _REX, _ESC_0F, _ESC_38, _ESC_3A
V2, V3, EV, XP = _VEX2, _VEX3, _EVEX, _POP_XOP

# The one-byte map.
_ONE_BYTE = (
    # 0    1    2    3    4    5    6    7    8    9    A    B    C    D    E    F
    M,   M,   M,   M,   B,   Z,   X,   X,   M,   M,   M,   M,   B,   Z,   X,   OF,  # 0x
    M,   M,   M,   M,   B,   Z,   X,   X,   M,   M,   M,   M,   B,   Z,   X,   X,   # 1x
    M,   M,   M,   M,   B,   Z,   P,   X,   M,   M,   M,   M,   B,   Z,   P,   X,   # 2x
    M,   M,   M,   M,   B,   Z,   P,   X,   M,   M,   M,   M,   B,   Z,   P,   X,   # 3x
    RX,  RX,  RX,  RX,  RX,  RX,  RX,  RX,  RX,  RX,  RX,  RX,  RX,  RX,  RX,  RX,  # 4x REX
    N,   N,   N,   N,   N,   N,   N,   N,   N,   N,   N,   N,   N,   N,   N,   N,   # 5x push/pop r
    X,   X,   EV,  M,   P,   P,   P,   P,   Z,   MZ,  B,   MB,  N,   N,   N,   N,   # 6x 62: EVEX
    B,   B,   B,   B,   B,   B,   B,   B,   B,   B,   B,   B,   B,   B,   B,   B,   # 7x jcc rel8
    MB,  MZ,  X,   MB,  M,   M,   M,   M,   M,   M,   M,   M,   M,   M,   M,   XP,  # 8x 8F: pop r/m or XOP
    N,   N,   N,   N,   N,   N,   N,   N,   N,   N,   X,   N,   N,   N,   N,   N,   # 9x
    O,   O,   O,   O,   N,   N,   N,   N,   B,   Z,   N,   N,   N,   N,   N,   N,   # Ax A0..A3: mov moffs
    B,   B,   B,   B,   B,   B,   B,   B,   V,   V,   V,   V,   V,   V,   V,   V,   # Bx mov r, imm
    MB,  MB,  W,   N,   V3,  V2,  MBG, MZG, EN,  N,   W,   N,   N,   B,   X,   N,   # Cx C4/C5: VEX; C8: enter
    M,   M,   M,   M,   X,   X,   X,   N,   M,   M,   M,   M,   M,   M,   M,   M,   # Dx D8..DF: x87
    B,   B,   B,   B,   B,   B,   B,   B,   Z,   Z,   X,   B,   N,   N,   N,   N,   # Ex E8/E9: call/jmp rel
    P,   N,   P,   P,   N,   N,   T,   T,   N,   N,   N,   N,   N,   N,   G,   G,   # Fx
)

# The two-byte map (0F xx).
_TWO_BYTE = (
    # 0    1    2    3    4    5    6    7    8    9    A    B    C    D    E    F
    M,   M,   M,   M,   X,   N,   N,   N,   N,   N,   X,   N,   X,   M,   N,   MBG, # 0x 0F: 3DNow!
    M,   M,   M,   M,   M,   M,   M,   M,   M,   M,   M,   M,   M,   M,   M,   M,   # 1x SSE, prefetch, hint nops, endbr
    R,   R,   R,   R,   X,   X,   X,   X,   M,   M,   M,   M,   M,   M,   M,   M,   # 2x 20..23: mov cr/dr
    N,   N,   N,   N,   N,   N,   X,   N,   E38, X,   E3A, X,   X,   X,   X,   X,   # 3x 38, 3A: three-byte maps
    M,   M,   M,   M,   M,   M,   M,   M,   M,   M,   M,   M,   M,   M,   M,   M,   # 4x cmovcc
    M,   M,   M,   M,   M,   M,   M,   M,   M,   M,   M,   M,   M,   M,   M,   M,   # 5x
    M,   M,   M,   M,   M,   M,   M,   M,   M,   M,   M,   M,   M,   M,   M,   M,   # 6x
    MB,  MB,  MB,  MB,  M,   M,   M,   N,   XT,  M,   X,   X,   M,   M,   M,   M,   # 7x 78: vmread/extrq
    Z,   Z,   Z,   Z,   Z,   Z,   Z,   Z,   Z,   Z,   Z,   Z,   Z,   Z,   Z,   Z,   # 8x jcc relz
    M,   M,   M,   M,   M,   M,   M,   M,   M,   M,   M,   M,   M,   M,   M,   M,   # 9x setcc
    N,   N,   N,   M,   MB,  M,   M,   M,   N,   N,   N,   M,   MB,  M,   M,   M,   # Ax A6, A7: VIA PadLock
    M,   M,   M,   M,   M,   M,   M,   M,   M,   M,   MBG, M,   M,   M,   M,   M,   # Bx BA: bt* imm8
    M,   M,   MB,  M,   MB,  MB,  MB,  M,   N,   N,   N,   N,   N,   N,   N,   N,   # Cx C2, C4..C6: imm8
    M,   M,   M,   M,   M,   M,   M,   M,   M,   M,   M,   M,   M,   M,   M,   M,   # Dx
    M,   M,   M,   M,   M,   M,   M,   M,   M,   M,   M,   M,   M,   M,   M,   M,   # Ex
    M,   M,   M,   M,   M,   M,   M,   M,   M,   M,   M,   M,   M,   M,   M,   M,   # Fx FF: ud0
)

del N, M, B, W, Z, V, O, EN, MB, MZ, T, XT, R, G, MBG, MZG, X, P, RX, OF, V2, V3, EV, XP, E38, E3A

# Maps reached through VEX, EVEX and XOP: every opcode has a ModRM byte; the immediate depends on
# the map, and in map 1 (0F) on the opcode (shifts by imm8, pshufd, cmpps, pinsrw, pextrw, shufps).
_MAP1_IMM8 = frozenset((0x70, 0x71, 0x72, 0x73, 0xC2, 0xC4, 0xC5, 0xC6))
_VEX_MAP_IMM = {1: None, 2: 0, 3: 1}            # None: by opcode (map 1)
_EVEX_MAP_IMM = {1: None, 2: 0, 3: 1, 5: 0, 6: 0}
_XOP_MAP_IMM: dict[int, Optional[int]] = {8: 1, 9: 0, 10: 4}

assert len(_ONE_BYTE) == 256 and len(_TWO_BYTE) == 256

# Length of ModRM + displacement by ModRM value (mod 00 rm 101 is RIP-relative disp32); 0 marks
# mod 00 with a SIB byte, whose base 101 means "disp32, no base".
_MODRM_LEN = tuple(
    0 if (m >> 6 == 0 and m & 7 == 4) else
    1 if m >> 6 == 3 else
    (1 + (m & 7 == 4) + (4 if m & 7 == 5 else 0)) if m >> 6 == 0 else
    (1 + (m & 7 == 4) + (1 if m >> 6 == 1 else 4))
    for m in range(256)
)


# Groups with undefined members, by (escaped, opcode): the bit mask of ModRM reg values that exist.
_GROUP_REGS = {
    (False, 0xC6): 0b00000001,  # mov r/m8, imm8 (and C6 F8: xabort)
    (False, 0xC7): 0b00000001,  # mov r/m, immz (and C7 F8: xbegin)
    (False, 0xFE): 0b00000011,  # inc, dec r/m8
    (False, 0xFF): 0b01111111,  # inc, dec, call, call far, jmp, jmp far, push
    (True, 0xBA): 0b11110000,   # bt, bts, btr, btc r/m, imm8
}
# 3DNow! (0F 0F ModRM imm8): the trailing byte is the opcode; these are the defined ones (AMD APM 5).
_3DNOW_OPCODES = frozenset((0x0C, 0x0D, 0x1C, 0x1D, 0x8A, 0x8E, 0x90, 0x94, 0x96, 0x97, 0x9A, 0x9E,
                            0xA0, 0xA4, 0xA6, 0xA7, 0xAA, 0xAE, 0xB0, 0xB4, 0xB6, 0xB7, 0xBB, 0xBF))


class _Undecodable(Exception):
    """Raised inside the decoder; the public functions turn it into an InstructionDecodeError."""

    def __init__(self, pos: int, reason: str):
        super().__init__(reason)
        self.pos = pos
        self.reason = reason


def _length(code, pos: int, end: int, _one=_ONE_BYTE, _two=_TWO_BYTE, _modrm_len=_MODRM_LEN) -> int:
    """The length of the instruction at ``code[pos]``, which must end at or before offset ``end``."""
    start = pos
    opsize16 = addr32 = rex_w = vex_forbidden = escaped = False
    mandatory = 0  # the last of 66/F2/F3, which selects the instruction in some 0F rows
    try:
        while True:
            b = code[pos]
            kind = _one[b]
            if kind == _PREFIX:
                if b == 0x66:
                    opsize16 = True
                    if not mandatory or mandatory == 0x66:
                        mandatory = 0x66
                elif b == 0x67:
                    addr32 = True
                elif b == 0xF2 or b == 0xF3:
                    mandatory = b
                if b == 0x66 or b >= 0xF0:
                    vex_forbidden = True
                rex_w = False  # a REX followed by a legacy prefix is ignored
            elif kind == _REX:
                rex_w = b & 8 != 0
                vex_forbidden = True
            else:
                break
            pos += 1
            if pos - start >= MAX_INSN_LENGTH:
                raise _Undecodable(start, "more than 15 bytes of prefixes")
        pos += 1
        if kind < _SPECIAL:
            table_kind = kind
        elif kind == _ESC_0F:
            escaped = True
            b = code[pos]
            pos += 1
            table_kind = _two[b]
            if table_kind >= _SPECIAL:
                if table_kind == _ESC_38:
                    pos += 1
                    table_kind = _MODRM
                elif table_kind == _ESC_3A:
                    pos += 1
                    table_kind = _MODRM | _IMM_B
                else:
                    raise _Undecodable(start, f"undefined opcode 0f {b:02x}")
        elif kind == _VEX2 or kind == _VEX3 or kind == _EVEX or kind == _POP_XOP:
            return _length_extended(code, start, pos, kind, end, vex_forbidden)
        else:
            raise _Undecodable(start, f"opcode {b:02x} is undefined in 64-bit mode")

        if table_kind & _MODRM:
            m = code[pos]
            n = _modrm_len[m]
            if table_kind & _REG_ONLY:
                n = 1
            elif n == 0:
                n = 6 if code[pos + 1] & 7 == 5 else 2
            if table_kind & _GROUP and escaped and b == 0x0F:
                if code[pos + n] not in _3DNOW_OPCODES:
                    raise _Undecodable(start, f"0f 0f ... {code[pos + n]:02x} is not a 3DNow! instruction")
            elif table_kind & _GROUP:
                _check_group(start, escaped, b, m)
            imm = table_kind & _IMM_MASK
            if imm == _IMM_GRP3:
                imm = (_IMM_B if b == 0xF6 else _IMM_Z) if (m >> 3) & 7 < 2 else _IMM_NONE
            elif imm == _IMM_XTRQ:
                imm = _IMM_W if mandatory == 0x66 or mandatory == 0xF2 else _IMM_NONE  # two imm8
            pos += n
        else:
            imm = table_kind
        if imm:
            if imm == _IMM_B:
                pos += 1
            elif imm == _IMM_Z:
                pos += 2 if opsize16 and not rex_w else 4
            elif imm == _IMM_V:
                pos += 8 if rex_w else 2 if opsize16 else 4
            elif imm == _IMM_W:
                pos += 2
            elif imm == _IMM_ENTER:
                pos += 3
            elif imm == _IMM_MOFFS:
                pos += 4 if addr32 else 8
    except IndexError:
        raise _Undecodable(start, "the code ends inside the instruction") from None
    length = pos - start
    if length > MAX_INSN_LENGTH:
        raise _Undecodable(start, f"{length} bytes long, more than the 15 an instruction may have")
    if pos > end:
        raise _Undecodable(start, "the code ends inside the instruction")
    return length


def _check_group(start: int, escaped: bool, opcode: int, modrm: int) -> None:
    reg = (modrm >> 3) & 7
    if _GROUP_REGS[escaped, opcode] >> reg & 1:
        if opcode == 0xFF and not escaped and (reg == 3 or reg == 5) and modrm >= 0xC0:
            raise _Undecodable(start, f"ff /{reg} (far call/jmp) needs a memory operand")
        return
    if modrm == 0xF8 and not escaped and (opcode == 0xC6 or opcode == 0xC7):
        return  # xabort, xbegin
    raise _Undecodable(start, f"{'0f ' if escaped else ''}{opcode:02x} /{reg} is undefined")


def _length_extended(code, start: int, pos: int, kind: int, end: int, vex_forbidden: bool) -> int:
    """VEX, EVEX and XOP instructions; ``pos`` is just past the escape byte (C4, C5, 62 or 8F).

    ``vex_forbidden`` says a REX, 66, F2, F3 or F0 prefix came first, which makes a VEX, EVEX or XOP
    instruction undefined.
    """
    if vex_forbidden and kind != _POP_XOP:
        raise _Undecodable(start, "a REX, 66, F2, F3 or F0 prefix before VEX or EVEX is undefined")
    if kind == _VEX2:
        pos += 1
        mapnum, maps, what = 1, _VEX_MAP_IMM, "VEX"
    elif kind == _VEX3:
        mapnum = code[pos] & 0x1F
        pos += 2
        maps, what = _VEX_MAP_IMM, "VEX"
    elif kind == _EVEX:
        p0 = code[pos]
        if code[pos + 1] & 4 == 0:
            raise _Undecodable(start, "EVEX prefix with its fixed bit (P1 bit 2) clear")
        mapnum = p0 & 7
        pos += 3
        maps, what = _EVEX_MAP_IMM, "EVEX"
    else:
        mapnum = code[pos] & 0x1F
        if mapnum < 8:  # pop r/m64 (8F /0); the other reg value with map < 8 is 4
            if code[pos] & 0x38:
                raise _Undecodable(start, "8f /4 is undefined")
            n = _MODRM_LEN[code[pos]]
            if n == 0:
                n = 6 if code[pos + 1] & 7 == 5 else 2
            return _checked(start, pos + n, end)
        pos += 2
        maps, what = _XOP_MAP_IMM, "XOP"
        if vex_forbidden:
            raise _Undecodable(start, "a REX, 66, F2, F3 or F0 prefix before XOP is undefined")
    if mapnum not in maps:
        raise _Undecodable(start, f"{what} opcode map {mapnum} is undefined")
    opcode = code[pos]
    pos += 1
    imm = maps[mapnum]
    if imm is None:
        if kind == _VEX2 or kind == _VEX3:
            if opcode == 0x77:  # vzeroupper / vzeroall: no ModRM
                return _checked(start, pos, end)
        imm = 1 if opcode in _MAP1_IMM8 else 0
    n = _MODRM_LEN[code[pos]]
    if n == 0:
        n = 6 if code[pos + 1] & 7 == 5 else 2
    return _checked(start, pos + n + imm, end)


def _checked(start: int, pos: int, end: int) -> int:
    length = pos - start
    if length > MAX_INSN_LENGTH:
        raise _Undecodable(start, f"{length} bytes long, more than the 15 an instruction may have")
    if pos > end:
        raise _Undecodable(start, "the code ends inside the instruction")
    return length


def _describe(code, pos: int, end: int) -> str:
    raw = bytes(code[pos:min(end, pos + MAX_INSN_LENGTH)])
    return raw.hex(" ") if raw else "no bytes"


# --- public API ----------------------------------------------------------------------------------

def insn_length(code, pos: int = 0, end: Optional[int] = None) -> int:
    """The length in bytes of the x86-64 instruction at ``code[pos]`` (not reading at or past ``end``).

    Raises ``InstructionDecodeError`` for an undefined opcode, a truncated instruction, or one longer
    than 15 bytes.
    """
    if end is None:
        end = len(code)
    try:
        return _length(code, pos, end)
    except _Undecodable as exc:
        raise InstructionDecodeError(
            f"cannot decode the instruction at offset {pos} ({_describe(code, pos, end)}): {exc.reason}",
            pos, exc.reason) from None


def instruction_starts(code, start_address: int = 0, end: Optional[int] = None) -> list[int]:
    """The addresses of the instructions of a linear decode of ``code``, which is at ``start_address``.

    Decoding stops at offset ``end`` of ``code`` (default: its length); the last instruction may
    extend past ``end`` as long as ``code`` holds its bytes, as when a function's block is decoded
    inside its section. Raises ``InstructionDecodeError`` (``.offset`` relative to ``code``).
    """
    limit = len(code)
    stop = limit if end is None else min(end, limit)
    starts: list[int] = []
    append = starts.append
    pos = 0
    try:
        while pos < stop:
            append(start_address + pos)
            pos += _length(code, pos, limit)
    except _Undecodable as exc:
        raise InstructionDecodeError(
            f"cannot decode the instruction at 0x{start_address + exc.pos:x} "
            f"({_describe(code, exc.pos, limit)}): {exc.reason}", exc.pos, exc.reason) from None
    return starts


def check_boundary(code, offset: int, function: str = "") -> None:
    """Raise ``BoundaryError`` unless ``offset`` is an instruction start of ``code`` decoded from 0.

    ``code`` holds the function from its first byte, at least up to the end of the instruction that
    contains ``offset``. ``function`` names it in messages. Raises ``InstructionDecodeError``
    ("cannot decode the instruction at FUNC+N") when an instruction before ``offset`` cannot be sized.
    """
    if offset < 0:
        raise ValueError("negative offset")
    name = function or "the function"
    limit = len(code)
    pos = 0
    try:
        while pos < offset:
            if pos >= limit:
                raise InstructionDecodeError(
                    f"cannot check that {name}+{offset} is on an instruction boundary: the code of {name} "
                    f"ends at +{pos}", pos, "past the end of the code")
            previous = pos
            pos += _length(code, pos, limit)
    except _Undecodable as exc:
        raise InstructionDecodeError(
            f"cannot decode the instruction at {name}+{exc.pos} ({_describe(code, exc.pos, limit)}): "
            f"{exc.reason}, so {name}+{offset} cannot be checked to be on an instruction boundary",
            exc.pos, exc.reason,
            hint="make sure the offset starts an instruction (objdump -d lists them)") from None
    if pos != offset:
        raise BoundaryError(function, offset, previous, pos)


_LEGACY_PREFIXES = frozenset((0xF0, 0xF2, 0xF3, 0x2E, 0x36, 0x3E, 0x26, 0x64, 0x65, 0x66, 0x67))


def _opcode_at(code, pos: int, end: int) -> tuple[int, int]:
    """(the opcode byte, its position) of the instruction at ``pos``: after its legacy and REX prefixes."""
    while pos < end and (code[pos] in _LEGACY_PREFIXES or 0x40 <= code[pos] <= 0x4F):
        pos += 1
    return (code[pos] if pos < end else -1), pos


def function_exits(code, start_address: int = 0) -> FunctionExits:
    """The exits of the function whose code (all of it, no more) is ``code`` at ``start_address``.

    Raises ``InstructionDecodeError`` when a byte of it cannot be decoded: then the instruction starts,
    and so the places that are safe to probe, are not known."""
    end = len(code)
    returns, jumps_out, indirect = [], [], []
    for address in instruction_starts(code, start_address):
        pos = address - start_address
        length = _length(code, pos, end)
        opcode, at = _opcode_at(code, pos, pos + length)
        if opcode in (0xC3, 0xC2):
            returns.append(address)
        elif opcode in (0xE9, 0xEB):
            size = 4 if opcode == 0xE9 else 1
            target = address + length + int.from_bytes(code[at + 1:at + 1 + size], "little", signed=True)
            if not start_address <= target < start_address + end:
                jumps_out.append(address)
        elif opcode == 0xFF and at + 1 < pos + length and (code[at + 1] >> 3) & 7 in (4, 5):
            indirect.append(address)
    return FunctionExits(tuple(returns), tuple(jumps_out), tuple(indirect))


# How far into a Go function its stack-bound check may reach, and how long the block it jumps to
# (the register arguments spilled, runtime.morestack called, the arguments reloaded) may be.
_GO_CHECK_INSNS = 8
_GO_MORESTACK_INSNS = 64


def go_stack_check_end(code, start_address: int = 0) -> Optional[int]:
    """The address right after the stack-bound check that the Go compiler puts at a function's entry
    (``cmp 0x10(%r14),%rsp; jbe MORESTACK``, or with a large frame ``lea -N(%rsp),%r12`` first), whose
    block calls runtime.morestack and jumps back to the function's first byte (the same check as
    :func:`.a64_insn.go_stack_check_end`'s): the function starts
    again once its goroutine's stack has grown, so a probe on the entry fires twice for one call.
    ``code`` is the whole function at ``start_address``. The check is the last conditional jump
    (Jcc) among its first instructions whose target block ends in a jump back to the entry; None
    when there is none (a NOSPLIT function, or code not of this shape)."""
    end = len(code)

    def jcc_target(pos: int, length: int) -> Optional[int]:
        opcode, at = _opcode_at(code, pos, pos + length)
        if 0x70 <= opcode <= 0x7F:
            return pos + length + int.from_bytes(code[at + 1:at + 2], "little", signed=True)
        if opcode == 0x0F and at + 1 < pos + length and 0x80 <= code[at + 1] <= 0x8F:
            return pos + length + int.from_bytes(code[at + 2:at + 6], "little", signed=True)
        return None

    def returns_to_entry(pos: int) -> bool:
        called = False
        try:
            for _ in range(_GO_MORESTACK_INSNS):
                if not 0 <= pos < end:
                    return False
                length = _length(code, pos, end)
                opcode, at = _opcode_at(code, pos, pos + length)
                called = called or opcode == 0xE8
                if opcode in (0xE9, 0xEB):
                    size = 4 if opcode == 0xE9 else 1
                    return called and pos + length + int.from_bytes(code[at + 1:at + 1 + size], "little",
                                                                    signed=True) == 0
                if opcode in (0xC3, 0xC2) or jcc_target(pos, length) is not None:
                    return False
                pos += length
        except _Undecodable:
            return False
        return False

    found, pos = None, 0
    try:
        for _ in range(_GO_CHECK_INSNS):
            if pos >= end:
                break
            length = _length(code, pos, end)
            target = jcc_target(pos, length)
            if target is not None and target > pos and returns_to_entry(target):
                found = pos + length
            pos += length
    except _Undecodable:
        pass
    return start_address + found if found is not None else None
