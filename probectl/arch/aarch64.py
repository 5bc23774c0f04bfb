"""AArch64 facts: the kernel's fetch-argument names of the DWARF register numbers ("DWARF for the Arm
64-bit Architecture", AADWARF64), the arguments of the procedure call standard (AAPCS64), the names
the assembler gives the registers in SDT operands, and perf's user registers; :data:`ARCH` gathers
them (:class:`probectl.arch.Arch`).

Every AArch64 instruction is 4 bytes long and 4-byte aligned, so no decoding is needed to know where
instructions start. The kernel takes a uprobe definition at an offset that is not aligned, and then
cannot enable the event (``uprobe_register``: ``-EINVAL``; seen in the arm64 guest,
tests/guest/test_qemu_arm64.py); perf writes such definitions."""
from __future__ import annotations

from . import EM_AARCH64, Arch

INSTRUCTION_SIZE = 4
NOP = (0xD503201F).to_bytes(4, "little")
# A kernel built with ftrace (-fpatchable-function-entry=2) begins each traceable function with two
# NOPs that ftrace patches into a call; the function's DWARF range, where perf counts FUNC+OFF from,
# begins after them, and the kernel refuses a kprobe on the one ftrace uses.
MAX_PATCHABLE_NOPS = 4

# DWARF register numbers -> kernel fetch names: 0..30 are X0..X30, 31 SP, 32 PC (AADWARF64 4.1).
# X30 is the link register: perf's table (tools/perf/arch/arm64/include/dwarf-regs-table.h) writes
# it %lr, which the kernel takes as well, and has no PC, which the kernel takes as %pc.
DWARF_REGISTERS = (*(f"%x{n}" for n in range(30)), "%lr", "%sp", "%pc")
STACK_POINTER = 31
LINK_REGISTER = 30
PROGRAM_COUNTER = 32
# User addresses are below 2**48 (Linux's 48-bit user address space); pointer authentication (Debian's
# arm64 libraries are built with -mbranch-protection=standard) signs a saved return address in the
# bits above, which an unwinder strips as the kernel's frame-record walk does.
USER_ADDRESS_BITS = 48
# ELR_mode, RA_SIGN_STATE, the thread registers, VG, FFR, the SVE predicates P0..P15, the SIMD and
# floating-point V0..V31 and the SVE Z0..Z31: nothing probe events read.
DWARF_VECTOR_REGISTERS = range(33, 128)

# Integer and pointer arguments of AAPCS64, in order ($arg1..$arg8 at a function's entry): X0..X7.
ARGUMENT_REGISTERS = tuple(range(8))

# The register names kprobe and uprobe events take (%NAME): the kernel's arm64 regoffset_table
# (arch/arm64/kernel/ptrace.c): x0..x30, lr (x30 again), sp, pc and pstate.
KERNEL_REGISTERS = frozenset({*(f"x{n}" for n in range(31)), "lr", "sp", "pc", "pstate"})
KERNEL_REGISTER_HINT = "%x0..%x30 %lr %sp %pc %pstate"


def _assembler_registers() -> dict[str, tuple[str, int, int]]:
    """GNU as register names -> (kernel fetch name, bit offset, bits): ``x5`` is ``%x5``, ``w5`` its
    low 32 bits, ``sp`` and ``wsp`` the stack pointer (what SDT notes write: ``-4@x2``)."""
    table: dict[str, tuple[str, int, int]] = {}
    for n in range(31):
        table[f"x{n}"] = (f"%x{n}", 0, 64)
        table[f"w{n}"] = (f"%x{n}", 0, 32)
    table["lr"] = ("%lr", 0, 64)
    table["sp"] = ("%sp", 0, 64)
    table["wsp"] = ("%sp", 0, 32)
    return table


ASSEMBLER_REGISTERS = _assembler_registers()

# How a function that keeps a frame record sets its frame pointer, in its first few instructions
# (after a paciasp or bti c, and an stp of x29 and x30): add x29, sp, #imm (mov x29, sp is #0).
FRAME_POINTER_SETUP_MASK, FRAME_POINTER_SETUP = 0xFFC003FF, 0x910003FD
FRAME_POINTER_SETUP_WITHIN = 4  # instructions

# perf's user registers (PERF_SAMPLE_REGS_USER, arch/arm64/include/uapi/asm/perf_regs.h): bits 0..30
# are X0..X30 (LR), 31 SP and 32 PC, the DWARF numbers themselves.
PERF_REGS_DWARF = tuple(range(33))
# Registers whose value a call keeps (AAPCS64 6.1.1): X19..X28 and the frame pointer X29 (SP too,
# which the CFA gives).
CALLEE_SAVED = frozenset(range(19, 30))

# Go's internal register ABI on arm64 (src/cmd/compile/abi-internal.md): integer pieces in R0..R15,
# floating-point pieces in F0..F15 (see Arch).
GO_INTEGER_REGISTERS = tuple(f"x{n}" for n in range(16))
GO_FLOAT_REGISTERS = 16

ARCH = Arch(
    name="AArch64", elf_machine=EM_AARCH64, dwarf_registers=DWARF_REGISTERS,
    vector_registers=DWARF_VECTOR_REGISTERS, vector_kind="a SIMD, floating-point or system register",
    kernel_registers=KERNEL_REGISTERS, register_hint=KERNEL_REGISTER_HINT,
    argument_registers=ARGUMENT_REGISTERS, stack_pointer=STACK_POINTER,
    assembler_registers=ASSEMBLER_REGISTERS, instruction_size=INSTRUCTION_SIZE,
    relative_relocation=1027,  # R_AARCH64_RELATIVE
    patchable_entry_nop=NOP,
    return_address=LINK_REGISTER, callee_saved=CALLEE_SAVED, perf_regs_dwarf=PERF_REGS_DWARF,
    instruction_pointer=PROGRAM_COUNTER, code_address_mask=(1 << USER_ADDRESS_BITS) - 1,
    call_pushes_return_address=False,
    go_integer_registers=GO_INTEGER_REGISTERS, go_float_registers=GO_FLOAT_REGISTERS, code_reader="a64_insn",
)
