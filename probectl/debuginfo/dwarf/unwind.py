"""Unwinding a user stack from a copy of it and the call-frame information of the mapped files, as
perf's ``--call-graph dwarf`` does after the fact: the registers at the event (perf's
PERF_SAMPLE_REGS_USER), a copy of the stack from the stack pointer up (PERF_SAMPLE_STACK_USER, 8 KiB
by default) and the process's memory maps give the frames, innermost first, for code built without
frame pointers.

Each step finds the mapped file of the frame's address, the CFI row of that address in the file
(``.eh_frame`` through ``.eh_frame_hdr``, then ``.debug_frame`` of the file or of its debug file found
by build-id or ``.gnu_debuglink``: :mod:`.cfi`), computes the CFA and the caller's registers from
the row and reads what the row says is saved from the copy. For a frame above the innermost the row
is the one of the call instruction (the return address minus one): a call that ends a function
returns past its end.

Where a step cannot be made (an address in no mapped file, a file without CFI for it, a saved value
outside the copy, a rule this unwinder cannot evaluate, a CFA that does not move up the stack) the
frames end with an ``unknown`` frame that says why, never with a guessed one. A row whose return
address is undefined is the outermost frame (``_start``), and the stack ends there cleanly.
"""
from __future__ import annotations

import bisect
import functools
import struct
from typing import TYPE_CHECKING, Callable, Iterable, Mapping, NamedTuple, Optional, Protocol, Sequence

from ...arch import Arch, host, known_names, x86_64
from ...errors import ProbectlError
from .cfi import CallFrames, FrameRow, RegisterRule
from .leb128 import read_sleb128, read_uleb128

if TYPE_CHECKING:
    from ..elf import ElfFile

MAX_FRAMES = 127  # perf's default (kernel.perf_event_max_stack)
# native/unwind.h's values: a rule's kind, the CFA's register, the frame pointer's rule (x86-64's)
_STEP, _OUTERMOST = 0, 1
_CFA_REGISTERS = {x86_64.STACK_POINTER: 0, x86_64.FRAME_POINTER: 1}
_BP_SAME, _BP_SAVED, _BP_LOST = 0, 1, 2
_WORD = 0xFFFFFFFFFFFFFFFF
_U64 = struct.Struct("<Q")


class UserFrame(NamedTuple):
    """One frame of an unwound stack: ``kind`` ``ip`` (the address the registers were taken at),
    ``return`` (a return address, in the caller) or ``unknown`` (unwinding stopped before this frame:
    ``reason`` says why; ``address`` is the last address reached)."""

    address: int
    kind: str
    reason: str = ""


class MappedFile(Protocol):
    """A line of /proc/PID/maps: ``start``..``end`` maps ``path`` from file ``offset``
    (:class:`probectl.tracedat.procmaps.Mapping` is one)."""

    @property
    def start(self) -> int: ...

    @property
    def end(self) -> int: ...

    @property
    def offset(self) -> int: ...

    @property
    def path(self) -> str: ...


class StackCopy:
    """The bytes of a user stack copied from address ``sp`` up; a read outside them is None."""

    def __init__(self, sp: int, data: bytes):
        self.sp = sp
        self.data = bytes(data)
        self._last = self.sp + len(self.data) - 8

    def word(self, address: int) -> Optional[int]:
        if address < self.sp or address > self._last:
            return None
        return _U64.unpack_from(self.data, address - self.sp)[0]


def host_arch() -> Arch:
    """The facts of the machine whose stacks are unwound: this one's (a recording's stacks are)."""
    arch = host()
    if arch is None:
        import platform

        raise ProbectlError(f"probectl unwinds the user stacks of {known_names()} only, not of {platform.machine()}")
    return arch


def registers_from_perf(mask: int, values: Sequence[int], arch: Optional[Arch] = None) -> dict[int, int]:
    """A perf sample's user registers (``sample_regs_user`` ``mask``, then the values in bit order)
    by DWARF register number, on ``arch`` (default: this machine)."""
    numbers = _perf_registers(mask, (arch or host_arch()).perf_regs_dwarf)
    return {dwarf: value & _WORD for dwarf, value in zip(numbers, values) if dwarf is not None}


@functools.lru_cache(maxsize=16)
def _perf_registers(mask: int, perf_regs_dwarf: tuple[Optional[int], ...]) -> tuple[Optional[int], ...]:
    """The DWARF number (or None) of each register a sample with ``sample_regs_user`` ``mask`` holds."""
    return tuple(perf_regs_dwarf[bit] if bit < len(perf_regs_dwarf) else None
                 for bit in range(64) if mask >> bit & 1)


class _File(NamedTuple):
    elf: "ElfFile"
    frames: CallFrames


class CallFrameFiles:
    """The call-frame information of mapped files by path, each file opened once: its own
    ``.eh_frame``/``.debug_frame``, and the ``.debug_frame`` of its debug file (build-id,
    ``.gnu_debuglink``, or what ``debug_file`` finds, e.g. from debuginfod) where it has none."""

    def __init__(self, debug_file: Optional[Callable[["ElfFile"], Optional[str]]] = None):
        self._files: dict[str, Optional[_File]] = {}
        self._why: dict[str, str] = {}
        self._debug_file = debug_file

    def get(self, path: str) -> Optional[_File]:
        if path not in self._files:
            self._files[path] = self._open(path)
        return self._files[path]

    def why_not(self, path: str) -> str:
        return self._why.get(path, "")

    def _open(self, path: str) -> Optional[_File]:
        from ..elf import ElfFile, find_debug_file

        if not path.startswith("/"):
            self._why[path] = f"{path} is no file to read call frames from"
            return None
        try:
            elf = ElfFile(path)
        except (ProbectlError, OSError) as exc:
            self._why[path] = f"{path} cannot be read ({exc})"
            return None
        debug_frame = None
        sec = elf.section(".debug_frame")
        if sec is None or not sec.has_data or not sec.size:
            try:
                found: Optional[str] = None
                if self._debug_file is not None:
                    found = self._debug_file(elf)
                if found is None:
                    located, _tried = find_debug_file(elf)
                    found = str(located) if located is not None else None
                if found is not None:
                    with ElfFile(found) as dbg:
                        dsec = dbg.section(".debug_frame")
                        if dsec is not None and dsec.has_data and dsec.size:
                            debug_frame = bytes(dbg.section_data(".debug_frame"))
            except (ProbectlError, OSError):
                debug_frame = None
        frames = CallFrames.from_sections(elf, debug_frame)
        if frames.empty:
            self._why[path] = f"{path} has no call-frame information (.eh_frame or .debug_frame)"
        return _File(elf, frames)

    def close(self) -> None:
        for f in self._files.values():
            if f is not None:
                f.elf.close()
        self._files.clear()


class Unwinder:
    """Unwinds the stacks of one process: its ``maps`` (lines of /proc/PID/maps) and the call-frame
    information of the mapped files (``files``, shared between processes)."""

    def __init__(self, maps: Iterable[MappedFile], files: Optional[CallFrameFiles] = None,
                 max_frames: int = MAX_FRAMES, arch: Optional[Arch] = None):
        self.arch = arch if arch is not None else host_arch()
        self.maps = sorted((m for m in maps if m.end > m.start), key=lambda m: m.start)
        self._starts = [m.start for m in self.maps]
        self.files = files if files is not None else CallFrameFiles()
        self.max_frames = max_frames
        # address -> its row's rules for a step (the return address's, then the callee-saved
        # registers'), or why there is none: a process's stacks pass the same call sites again and again
        self._steps: dict[int, "tuple[FrameRow, RegisterRule | None, tuple] | str"] = {}

    def unwind(self, registers: Mapping[int, int], stack: StackCopy,
               max_frames: Optional[int] = None) -> list[UserFrame]:
        """The frames of the stack whose ``registers`` (by DWARF number: ip, sp and what the rows
        name) and copy ``stack`` were taken at one moment, innermost first, at most ``max_frames``
        (default: the unwinder's); a last frame of kind ``unknown`` where the unwinding had to stop."""
        limit = self.max_frames if max_frames is None else max_frames
        regs = {r: v & _WORD for r, v in registers.items()}
        pc = regs.get(self.arch.instruction_pointer)
        if pc is None:
            return [UserFrame(0, "unknown", "the registers have no instruction pointer")]
        frames = [UserFrame(pc, "ip")]
        lookup = pc
        while True:
            if len(frames) >= limit:
                frames.append(UserFrame(pc, "unknown", f"the limit of {limit} frames"))
                break
            step = self._step(regs, lookup, stack)
            if isinstance(step, str):
                frames.append(UserFrame(pc, "unknown", step))
                break
            if step is None:
                break
            regs = step
            pc = regs[self.arch.instruction_pointer]
            frames.append(UserFrame(pc, "return"))
            lookup = pc - 1
        return frames

    def caller(self, registers: Mapping[int, int], stack: StackCopy) -> Optional[int]:
        """The return address of the frame the registers were taken in (at a function's entry: the
        word at sp, where its CFI says so), or None when it cannot be known."""
        frames = self.unwind(registers, stack, max_frames=2)
        return frames[1].address if len(frames) > 1 and frames[1].kind == "return" else None

    def mapping(self, address: int) -> Optional[MappedFile]:
        i = bisect.bisect_right(self._starts, address) - 1
        if i >= 0 and address < self.maps[i].end:
            return self.maps[i]
        return None

    def _row(self, address: int) -> "FrameRow | str":
        m = self.mapping(address)
        if m is None:
            return f"0x{address:x} is in no mapped file"
        found = self.files.get(m.path)
        if found is None or found.frames.empty:
            return self.files.why_not(m.path) or f"no call-frame information for {m.path}"
        try:
            vaddr = found.elf.offset_to_vaddr(address - m.start + m.offset)
        except (ProbectlError, ValueError):
            return f"0x{address:x} is outside the loaded parts of {m.path}"
        row = found.frames.row_at(vaddr)
        if row is None:
            return f"no call-frame information for 0x{vaddr:x} in {m.path}"
        return row

    def _rules(self, address: int) -> "tuple[FrameRow, RegisterRule | None, tuple] | str":
        found = self._steps.get(address)
        if found is None:
            row = self._row(address)
            if isinstance(row, str):
                found = row
            else:
                saved = tuple((reg, row.rule(reg)) for reg in sorted(self.arch.callee_saved)
                              if reg != row.return_register)
                found = (row, row.rule(row.return_register), saved)
            self._steps[address] = found
        return found

    def simple_rule(self, address: int) -> Optional[tuple[int, int, int, int, int, int]]:
        """The rule of the frame at ``address`` in the form the native unwinder walks by
        (``_native.unwind_stacks``, native/unwind.h), or None when it says more than that form can:
        a CFA from a register other than the stack and frame pointers or from an expression, a return
        address not saved at an offset from the CFA, a frame pointer recovered otherwise than kept or
        saved at an offset; or no row at all (this unwinder then says why). An x86-64 process's: the
        native walk knows x86-64's registers (an AArch64 return address is in x30 and may be signed)."""
        if self.arch is not x86_64.ARCH:
            return None
        rules = self._rules(address)
        if isinstance(rules, str):
            return None
        row, ra_rule, saved = rules
        if ra_rule is not None and ra_rule.kind == "undefined":
            return (_OUTERMOST, 0, 0, 0, 0, 0)
        if row.cfa is None or row.cfa.register not in _CFA_REGISTERS or ra_rule is None or ra_rule.kind != "offset":
            return None
        bp = next((rule for reg, rule in saved if reg == x86_64.FRAME_POINTER), None)
        if bp is None or bp.kind == "same":
            bp_rule, bp_off = _BP_SAME, 0
        elif bp.kind == "offset":
            bp_rule, bp_off = _BP_SAVED, bp.value
        elif bp.kind == "undefined":
            bp_rule, bp_off = _BP_LOST, 0
        else:
            return None
        return (_STEP, _CFA_REGISTERS[row.cfa.register], row.cfa.offset, ra_rule.value, bp_rule, bp_off)

    def _step(self, regs: dict[int, int], lookup: int, stack: StackCopy) -> "dict[int, int] | str | None":
        """The caller's registers, None at the outermost frame, or why they cannot be known."""
        rules = self._rules(lookup)
        if isinstance(rules, str):
            return rules
        row, ra_rule, saved = rules
        if row.cfa is not None:
            base = regs.get(row.cfa.register)
            if base is None:
                return f"the CFA's register {_name(row.cfa.register, self.arch)} is not known in this frame"
            cfa = (base + row.cfa.offset) & _WORD
        else:
            value = _evaluate(row.cfa_expression, regs, stack, None, self.arch)
            if isinstance(value, str):
                return f"the CFA's expression: {value}"
            cfa = value
        arch = self.arch
        if ra_rule is None and row.return_register == arch.instruction_pointer:
            return "the row gives no rule for the return address"
        if ra_rule is not None and ra_rule.kind == "undefined":
            return None
        ra: "int | str | None"
        if ra_rule is None:  # (AArch64: the return address in x30, where a function keeps it until it calls)
            ra = regs.get(row.return_register)
        else:
            ra = _recover(row.return_register, ra_rule, regs, cfa, stack, arch)
        if isinstance(ra, str):
            return f"the return address: {ra}"
        if ra is None:
            return "the return address is not known in this frame"
        caller: dict[int, int] = {}
        for reg, rule in saved:
            if rule is None:  # (the common cases first: kept, or saved in the frame)
                if reg in regs:
                    caller[reg] = regs[reg]
                continue
            if rule.kind == "offset":
                recovered: "int | str | None" = stack.word((cfa + rule.value) & _WORD)
            else:
                recovered = _recover(reg, rule, regs, cfa, stack, arch)
            if isinstance(recovered, int):
                caller[reg] = recovered
            # (a callee-saved register lost: a later step that needs it says so)
        ra &= arch.code_address_mask  # (a signed return address: its signature stripped)
        if ra == 0:
            return None  # (a zeroed return address ends a thread's stack)
        sp = regs.get(arch.stack_pointer)
        # The CFA is above the stack pointer, or at it in a frame that pushed nothing and returns through
        # a register (an AArch64 leaf, or any function at its entry: x30), which the caller's frame does
        # not have: the unwinding moves on either way.
        in_register = ra_rule is None or ra_rule.kind in ("same", "register")
        if sp is not None and (cfa < sp or (cfa == sp and not in_register)):
            return f"the CFA 0x{cfa:x} is not above the stack pointer 0x{sp:x}"
        caller[arch.instruction_pointer] = ra
        caller[arch.stack_pointer] = cfa
        return caller


def _name(register: int, arch: Optional[Arch] = None) -> str:
    return (arch or host_arch()).register_name(register) or f"r{register}"


def _recover(reg: int, rule: Optional[RegisterRule], regs: dict[int, int], cfa: int,
             stack: StackCopy, arch: Arch) -> "int | str | None":
    """The caller's value of ``reg`` by ``rule``: a value, None (not known, and not needed to go on)
    or why it cannot be had."""
    if rule is None or rule.kind == "same":
        return regs.get(reg) if (rule is not None or reg in arch.callee_saved) else None
    if rule.kind == "undefined":
        return None
    if rule.kind == "register":
        return regs.get(rule.value)
    if rule.kind == "val_offset":
        return (cfa + rule.value) & _WORD
    if rule.kind == "offset":
        address = (cfa + rule.value) & _WORD
    else:
        value = _evaluate(rule.expression, regs, stack, cfa, arch)
        if isinstance(value, str):
            return value
        if rule.kind == "val_expression":
            return value
        address = value
    word = stack.word(address)
    if word is None:
        return (f"saved at 0x{address:x}, outside the stack copy "
                f"(0x{stack.sp:x}..0x{stack.sp + len(stack.data):x})")
    return word


_BINARY = {0x1A: lambda a, b: a & b, 0x1C: lambda a, b: a - b, 0x1E: lambda a, b: a * b, 0x21: lambda a, b: a | b,
           0x22: lambda a, b: a + b, 0x24: lambda a, b: a << b if b < 64 else 0,
           0x25: lambda a, b: a >> b if b < 64 else 0, 0x27: lambda a, b: a ^ b,
           0x29: lambda a, b: int(a == b), 0x2A: lambda a, b: int(_signed(a) >= _signed(b)),
           0x2B: lambda a, b: int(_signed(a) > _signed(b)), 0x2C: lambda a, b: int(_signed(a) <= _signed(b)),
           0x2D: lambda a, b: int(_signed(a) < _signed(b)), 0x2E: lambda a, b: int(a != b)}
_CONSTANTS = {0x08: (1, False), 0x09: (1, True), 0x0A: (2, False), 0x0B: (2, True), 0x0C: (4, False),
              0x0D: (4, True), 0x0E: (8, False), 0x0F: (8, True)}


def _signed(value: int) -> int:
    return value - (1 << 64) if value >> 63 else value


def _evaluate(expression: bytes, regs: dict[int, int], stack: StackCopy, cfa: Optional[int],
              arch: Optional[Arch] = None) -> "int | str":
    """A CFI expression's value (DWARF 5, 2.5: the operations a call-frame rule uses, such as the
    PLT's ``rsp + 8 + ((rip & 15) >= 11) << 3``), with ``cfa`` pushed first for a register's rule; or
    why it cannot be evaluated from the registers and the stack copy."""
    values: list[int] = [] if cfa is None else [cfa]
    pos, n = 0, len(expression)
    try:
        while pos < n:
            op = expression[pos]
            pos += 1
            if 0x30 <= op <= 0x4F:  # lit0..lit31
                values.append(op - 0x30)
            elif 0x70 <= op <= 0x8F or op == 0x92:  # breg0..breg31, bregx
                if op == 0x92:
                    reg, pos = read_uleb128(expression, pos)
                else:
                    reg = op - 0x70
                off, pos = read_sleb128(expression, pos)
                if reg not in regs:
                    return f"register {_name(reg, arch)} is not known in this frame"
                values.append((regs[reg] + off) & _WORD)
            elif op in _CONSTANTS:
                size, signed = _CONSTANTS[op]
                if pos + size > n:
                    return "a constant runs past the expression"
                values.append(int.from_bytes(expression[pos:pos + size], "little", signed=signed) & _WORD)
                pos += size
            elif op == 0x10:  # constu
                value, pos = read_uleb128(expression, pos)
                values.append(value & _WORD)
            elif op == 0x11:  # consts
                value, pos = read_sleb128(expression, pos)
                values.append(value & _WORD)
            elif op == 0x23:  # plus_uconst
                value, pos = read_uleb128(expression, pos)
                values.append((values.pop() + value) & _WORD)
            elif op in _BINARY:
                b, a = values.pop(), values.pop()
                values.append(_BINARY[op](a, b) & _WORD)
            elif op == 0x06:  # deref
                address = values.pop()
                word = stack.word(address)
                if word is None:
                    return f"it reads 0x{address:x}, outside the stack copy"
                values.append(word)
            elif op == 0x12:  # dup
                values.append(values[-1])
            elif op == 0x13:  # drop
                values.pop()
            elif op == 0x14:  # over
                values.append(values[-2])
            elif op == 0x16:  # swap
                values[-1], values[-2] = values[-2], values[-1]
            elif op == 0x1F:  # neg
                values.append(-values.pop() & _WORD)
            elif op == 0x20:  # not
                values.append(~values.pop() & _WORD)
            else:
                return f"operation 0x{op:02x} is not one a call-frame rule is evaluated with here"
    except IndexError:
        return "its stack of values runs empty, or an operand runs past it"
    if not values:
        return "it leaves no value"
    return values[-1]
