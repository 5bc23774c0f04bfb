"""Machine facts, one module per machine (:mod:`.x86_64`, :mod:`.aarch64`), each described by an
:class:`Arch`; :func:`for_machine` picks the one of an ELF file's ``e_machine``, :func:`host` the one
this process (and so the running kernel) runs on. Each machine's code is read by a module of its own
(``Arch.code``): :mod:`.x86_insn` decodes x86-64 instruction lengths, :mod:`.a64_insn` reads AArch64's
fixed-size words; both answer :class:`FunctionExits` and Go's stack-bound check.

A definition is resolved with the facts of the file it probes, not of the machine probectl runs on:
``-D`` prints an AArch64 program's definitions on x86-64, as perf does; writing them needs a kernel
of that machine.

A leaf package: every layer may import it, and it imports nothing of probectl but the errors and
:mod:`probectl.dataclass`. :class:`BoundaryError` is every machine's: a probe offset inside an
instruction."""
from __future__ import annotations

import importlib
import platform
from typing import Optional, Protocol

from ..dataclass import dataclass
from ..errors import ResolveError

# e_machine of the machines probectl knows, and the module of each one's facts (imported when a file
# of that machine is probed: an x86-64 run does not load the AArch64 tables).
EM_X86_64 = 62
EM_AARCH64 = 183
_MODULES = {EM_X86_64: "x86_64", EM_AARCH64: "aarch64"}
# Other machines' e_machine, to name them when a file is for none of these.
OTHER_MACHINES = {3: "i386", 8: "MIPS", 20: "PowerPC", 21: "PowerPC64", 22: "S/390", 40: "ARM",
                  243: "RISC-V", 258: "LoongArch"}
# platform.machine() (uname -m) of each known machine.
_UNAME = {"x86_64": EM_X86_64, "aarch64": EM_AARCH64}


@dataclass(frozen=True)
class FunctionExits:
    """How control leaves a function, by a linear reading of its code: ``returns``, the addresses of
    its returns (x86-64's near RET, AArch64's RET); ``jumps_out``, of its direct jumps whose target
    is outside the function (a tail call: its callee returns for it); ``indirect_jumps``, of its
    register or memory jumps, whose targets the code does not say."""

    returns: tuple[int, ...]
    jumps_out: tuple[int, ...]
    indirect_jumps: tuple[int, ...]


class CodeReader(Protocol):
    """What a machine's code reader (``Arch.code()``) answers."""

    def function_exits(self, code: bytes, start_address: int = 0) -> FunctionExits: ...

    def go_stack_check_end(self, code: bytes, start_address: int = 0) -> Optional[int]: ...


class BoundaryError(ResolveError):
    """A probe offset that is inside an instruction: ``start`` and ``end`` are the offsets around it."""

    def __init__(self, function: str, offset: int, start: int, end: int,
                 why: str = "a probe inside an instruction corrupts it, and the traced program crashes"):
        name = function or "the function"
        super().__init__(
            f"{name}+{offset} is inside the instruction at {name}+{start} ({end - start} bytes); "
            f"the nearest instruction starts are +{start} and +{end}",
            hint=f"use {name}+{start} or {name}+{end} instead: {why}")
        self.function = function
        self.offset = offset
        self.start = start
        self.end = end


@dataclass(frozen=True, eq=False)
class Arch:
    """What resolving, checking and unwinding need to know of one machine (one instance per machine,
    compared by identity).

    - ``dwarf_registers``: the kernel's fetch-argument name (``%x0``) of each DWARF register number,
      index = number (None: a number the kernel has no name for);
    - ``vector_registers``, ``vector_kind``: the DWARF numbers of the registers probe events cannot
      read, and what to call them in the error;
    - ``kernel_registers``: every name the kernel's ``regoffset_table`` takes after ``%``, and
      ``register_hint`` lists them for a person;
    - ``argument_registers``: the integer and pointer arguments' DWARF numbers, in order (a uprobe's
      ``$argN`` at a function's entry); ``stack_pointer``: the stack pointer's DWARF number;
    - ``assembler_registers``: SDT operands' register names → (fetch name, bit offset, bits);
    - ``instruction_size``: the size of every instruction, to which probe offsets must be aligned
      (0: variable lengths, decoded from the code's bytes);
    - ``relative_relocation``: the ELF relocation type that makes a word load base + addend (an
      arm64 kernel's tables of addresses are such words);
    - ``patchable_entry_nop``: the NOP a kernel function's patchable entry is made of, where ftrace
      patches NOPs the compiler put before a function's code (arm64), None where ftrace patches a
      call of its own (x86-64's ``__fentry__``);
    - ``return_address``, ``instruction_pointer``, ``callee_saved``, ``perf_regs_dwarf``,
      ``code_address_mask``: for a CFI unwinder: the CFA column of the return address, the DWARF
      number of the program counter (x86-64's %ip is both; AArch64 returns through x30 and counts
      its PC 32), the registers a call keeps, the DWARF number of each bit of perf's
      ``sample_regs_user`` (None: a register no CFI rule names), and the bits of a saved return
      address that are the address (AArch64's pointer authentication signs the bits above it);
    - ``call_pushes_return_address``: at a function's first instruction the return address is the
      word at the stack pointer (x86-64's call pushes it), not in a register (AArch64's x30);
    - ``go_integer_registers``, ``go_float_registers``: Go's internal register ABI (Go 1.17 on,
      "regabi" in its DWARF producer; src/cmd/compile/abi-internal.md): the kernel's names of the
      registers that hold the integer, pointer and integer pieces of the arguments, and again from the
      first of the results, in order; how many floating-point registers hold the floating-point pieces
      (which probe events cannot read);
    - ``code_reader``: the module of :mod:`probectl.arch` that reads its code (:meth:`code`).
    """

    name: str
    elf_machine: int
    dwarf_registers: tuple[Optional[str], ...]
    vector_registers: range
    vector_kind: str
    kernel_registers: frozenset[str]
    register_hint: str
    argument_registers: tuple[int, ...]
    stack_pointer: int
    assembler_registers: dict[str, tuple[str, int, int]]
    instruction_size: int
    relative_relocation: int
    patchable_entry_nop: Optional[bytes]
    return_address: int
    callee_saved: frozenset[int]
    perf_regs_dwarf: tuple[Optional[int], ...]
    instruction_pointer: int
    code_address_mask: int
    call_pushes_return_address: bool
    go_integer_registers: tuple[str, ...]
    go_float_registers: int
    code_reader: str

    def code(self) -> "CodeReader":
        """The module that reads this machine's code: ``function_exits`` and ``go_stack_check_end``
        (imported when code is read)."""
        reader: CodeReader = importlib.import_module(f"{__package__}.{self.code_reader}")
        return reader

    @property
    def perf_regs_unwind_mask(self) -> int:
        """perf's ``sample_regs_user`` for a CFI unwinder: every register a CFI row may name."""
        return sum(1 << bit for bit, dwarf in enumerate(self.perf_regs_dwarf) if dwarf is not None)

    def register_name(self, regno: int) -> Optional[str]:
        """The fetch-argument name of DWARF register ``regno`` (None: one probe events cannot read)."""
        return self.dwarf_registers[regno] if 0 <= regno < len(self.dwarf_registers) else None

    def check_alignment(self, function: str, offset: int) -> None:
        """BoundaryError when ``function+offset`` is not on an instruction of a fixed-size machine
        (``instruction_size`` 0: nothing to say without the code)."""
        size = self.instruction_size
        if size and offset % size:
            start = offset - offset % size
            raise BoundaryError(function, offset, start, start + size,
                                why=f"{self.name} instructions are {size} bytes long and {size}-byte aligned, "
                                    "and the kernel refuses a probe between them (a uprobe when it is enabled)")


def for_machine(e_machine: int) -> Optional[Arch]:
    """The facts of ELF machine ``e_machine``; None for a machine probectl does not know."""
    module = _MODULES.get(e_machine)
    if module is None:
        return None
    arch: Arch = importlib.import_module(f"{__name__}.{module}").ARCH
    return arch


def machine_name(e_machine: int) -> str:
    """A human name of ELF machine ``e_machine`` (``AArch64``, ``machine 99``)."""
    arch = for_machine(e_machine)
    return arch.name if arch is not None else OTHER_MACHINES.get(e_machine, f"machine {e_machine}")


def known_names() -> str:
    """The machines probectl knows, for a message: ``x86-64 and AArch64``."""
    return " and ".join(machine_name(m) for m in _MODULES)


def host() -> Optional[Arch]:
    """The facts of the machine this process runs on, the running kernel's (None: one probectl
    does not know)."""
    e_machine = _UNAME.get(platform.machine())
    return for_machine(e_machine) if e_machine is not None else None
