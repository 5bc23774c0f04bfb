"""x86-64 facts every layer may need: the registers of the System V calling convention, the kernel's
fetch-argument names of the DWARF register numbers, perf's user registers; :data:`ARCH` gathers the
ones every machine has (:class:`probectl.arch.Arch`)."""
from __future__ import annotations

from . import EM_X86_64, Arch

# DWARF register numbers -> kernel fetch names (x86-64 psABI numbering; 16 is the return address).
DWARF_REGISTERS = ("%ax", "%dx", "%cx", "%bx", "%si", "%di", "%bp", "%sp",
                   "%r8", "%r9", "%r10", "%r11", "%r12", "%r13", "%r14", "%r15", "%ip")
DWARF_VECTOR_REGISTERS = range(17, 67)  # SSE, x87 and MMX registers in the DWARF numbering
STACK_POINTER = 7  # %sp
FRAME_POINTER = 6  # %bp

# Integer and pointer arguments of the System V calling convention, in order ($arg1..$arg6 at a
# function's entry), as DWARF register numbers: %di, %si, %dx, %cx, %r8, %r9.
ARGUMENT_REGISTERS = (5, 4, 1, 2, 8, 9)
SSE_ARGUMENT_REGISTERS = 8  # %xmm0..%xmm7, which probe events cannot read

# Go's internal register ABI (Go 1.17 on, "regabi" in its DWARF producer; src/cmd/compile/abi-internal.md):
# integer, pointer and the integer pieces of strings, slices, interfaces and small structs, of the
# arguments and again from the first of the results, in these registers, in order; floating-point
# pieces in X0..X14, which probe events cannot read.
GO_INTEGER_REGISTERS = ("ax", "bx", "cx", "di", "si", "r8", "r9", "r10", "r11")
GO_FLOAT_REGISTERS = 15

# The register names kprobe and uprobe events take (%NAME): the names of the kernel's x86-64
# regoffset_table (arch/x86/kernel/ptrace.c), compared case-sensitively. No %rax or %eax spellings,
# no segment registers but %cs and %ss (%ds..%gs are 32-bit only).
KERNEL_REGISTERS = frozenset({
    "r15", "r14", "r13", "r12", "r11", "r10", "r9", "r8",
    "bx", "cx", "dx", "si", "di", "bp", "ax", "orig_ax", "ip", "cs", "flags", "sp", "ss",
})
KERNEL_REGISTER_HINT = "%ax %bx %cx %dx %si %di %bp %sp %r8..%r15 %ip %flags %cs %ss %orig_ax"

def _assembler_registers() -> dict[str, tuple[str, int, int]]:
    """GNU as register names -> (kernel fetch name, bit offset, bits): ``eax`` is the low 32 bits of
    ``%ax``, ``ah`` bits 8..15 of it, ``r8d`` the low 32 bits of ``%r8`` (what SDT notes write)."""
    table: dict[str, tuple[str, int, int]] = {}
    for letter in "abcd":
        kernel = f"%{letter}x"
        table.update({f"r{letter}x": (kernel, 0, 64), f"e{letter}x": (kernel, 0, 32), f"{letter}x": (kernel, 0, 16),
                      f"{letter}l": (kernel, 0, 8), f"{letter}h": (kernel, 8, 8)})
    for name in ("si", "di", "bp", "sp"):
        kernel = f"%{name}"
        table.update({f"r{name}": (kernel, 0, 64), f"e{name}": (kernel, 0, 32), name: (kernel, 0, 16),
                      f"{name}l": (kernel, 0, 8)})
    for n in range(8, 16):
        kernel = f"%r{n}"
        table.update({f"r{n}": (kernel, 0, 64), f"r{n}d": (kernel, 0, 32), f"r{n}w": (kernel, 0, 16),
                      f"r{n}b": (kernel, 0, 8)})
    table["rip"] = ("%ip", 0, 64)
    return table


# SDT operands name registers as the assembler does; the kernel knows only the 64-bit ones.
ASSEMBLER_REGISTERS = _assembler_registers()

# perf's user registers (PERF_SAMPLE_REGS_USER): bit N of ``sample_regs_user`` is register N of
# perf_event_x86_regs (asm/perf_regs.h), and a sample holds the chosen ones in bit order. Here each
# bit's DWARF register number (None: a segment or flags register, which no CFI rule names).
PERF_REGS_DWARF = (0, 3, 2, 1, 4, 5, 6, 7, 16, None, None, None, None, None, None, None,
                   8, 9, 10, 11, 12, 13, 14, 15)
RETURN_ADDRESS = 16  # the DWARF column of the return address (%ip)
# Registers whose value a call keeps (System V): a CFI row that does not name one leaves it as it is;
# the others are lost in the caller's frame.
CALLEE_SAVED = frozenset({3, 6, 12, 13, 14, 15})  # %bx %bp %r12..%r15

# perf_event_open(2): its system call number (arch/x86/entry/syscalls/syscall_64.tbl) and the ioctls
# of a perf event's file, _IO('$', n) and _IOW('$', 6, char *) in x86-64's ioctl encoding
# (include/uapi/linux/perf_event.h).
PERF_EVENT_OPEN_SYSCALL = 298
PERF_EVENT_IOC_ENABLE = 0x2400
PERF_EVENT_IOC_DISABLE = 0x2401
PERF_EVENT_IOC_RESET = 0x2403
PERF_EVENT_IOC_SET_FILTER = 0x40082406

# How a function that keeps a frame pointer starts: push %rbp; mov %rsp,%rbp, after an endbr64
# where the code is built for indirect-branch tracking (-fcf-protection, Debian's default).
ENDBR64 = b"\xf3\x0f\x1e\xfa"
FRAME_POINTER_PROLOGUE = b"\x55\x48\x89\xe5"


ARCH = Arch(
    name="x86-64", elf_machine=EM_X86_64, dwarf_registers=DWARF_REGISTERS,
    vector_registers=DWARF_VECTOR_REGISTERS, vector_kind="an SSE/x87/vector register",
    kernel_registers=KERNEL_REGISTERS, register_hint=KERNEL_REGISTER_HINT,
    argument_registers=ARGUMENT_REGISTERS, stack_pointer=STACK_POINTER,
    assembler_registers=ASSEMBLER_REGISTERS,
    instruction_size=0,  # 1 to 15 bytes: x86_insn decodes them
    relative_relocation=8,  # R_X86_64_RELATIVE
    patchable_entry_nop=None,
    return_address=RETURN_ADDRESS, callee_saved=CALLEE_SAVED, perf_regs_dwarf=PERF_REGS_DWARF,
    instruction_pointer=RETURN_ADDRESS, code_address_mask=(1 << 64) - 1, call_pushes_return_address=True,
    go_integer_registers=GO_INTEGER_REGISTERS, go_float_registers=GO_FLOAT_REGISTERS, code_reader="x86_insn",
)
