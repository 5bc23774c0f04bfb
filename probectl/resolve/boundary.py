"""``FUNC+OFFS`` checked before anything is written: the offset falls inside the function, and it starts
an instruction, checked on the bytes of the probed file (x86-64: a uprobe inside an instruction
crashes the traced program) or by the instruction size (AArch64: the kernel refuses an offset that
is not 4-byte aligned); perf checks neither."""
from __future__ import annotations

from typing import Callable, Optional

from ..arch import EM_X86_64, for_machine
from ..arch.x86_insn import MAX_INSN_LENGTH, check_boundary
from ..debuginfo.elf import ElfFile
from ..errors import InstructionDecodeError, ResolveError

_SHF_ALLOC = 2


def check_probe_offset(elf: ElfFile, function: str, address: int, size: int, offset: int) -> None:
    """Check that ``function+offset`` of an ELF file is an instruction start.

    ``address`` is the function's virtual address (its symbol value or DWARF entry pc), ``size`` its
    length in bytes (0 when unknown). Does nothing for offset 0 and for machines probectl does not
    know. Raises ``BoundaryError`` when the offset is inside an instruction, and ``InstructionDecodeError``
    when the check cannot be made (the caller may report that as a warning and go on).
    """
    arch = for_machine(elf.machine)
    if offset <= 0 or arch is None or elf.elf_class != 64:
        return
    name = function or f"0x{address:x}"
    if arch.elf_machine != EM_X86_64:
        arch.check_alignment(name, offset)
        return
    want = offset + MAX_INSN_LENGTH
    if size and size < want:
        want = size
    code = code_bytes(elf, address, want, f"check that {name}+{offset} is on an instruction boundary")
    check_boundary(code, offset, name)


def code_bytes(elf: ElfFile, address: int, length: int, purpose: str) -> bytes:
    """Up to ``length`` bytes of code of an ELF file from virtual ``address`` (fewer where its
    file-backed segment ends); ``purpose`` says what they are for in the ``InstructionDecodeError``
    raised when the file holds no code there (a debug file) or cannot be read."""
    seg = elf.segment_for(address)
    if seg is None:
        raise InstructionDecodeError(f"cannot {purpose}: address 0x{address:x} is in no loadable part of {elf.path}",
                                     0, "no file-backed segment")
    for sec in elf.sections:
        if sec.flags & _SHF_ALLOC and sec.addr <= address < sec.addr + sec.size and sec.size:
            if not sec.has_data:
                raise InstructionDecodeError(f"cannot {purpose}: {elf.path} holds no code for {sec.name} "
                                             "(a separate debug file?)", 0, "no code bytes")
            break
    length = min(length, seg.vaddr + seg.filesz - address)
    try:
        with open(elf.path, "rb") as f:
            f.seek(seg.offset + (address - seg.vaddr))
            return f.read(length)
    except OSError as exc:
        raise InstructionDecodeError(f"cannot {purpose}: cannot read {elf.path} ({exc.strerror or exc})",
                                     0, "unreadable") from None


def check_function_offset(elf: Optional[ElfFile], function: str, address: int, size: int, offset: int,
                          warn: Callable[[str], None]) -> None:
    """``FUNC+OFFS`` (``function`` at ``address``, ``size`` bytes, 0 when unknown): the offset must
    fall inside the function, as perf checks, and start an instruction, which perf does not check
    (an ``int3`` inside an instruction crashes the traced program). Without the file (kprobes from
    kallsyms) only the first is checked; code that cannot be decoded is a warning, not an error."""
    if not offset:
        return
    if size and offset >= size:
        raise ResolveError(f"Offset {offset} is bigger than the size of {function}",
                           hint=f"{function} is {size} bytes long")
    if elf is None:
        return
    try:
        if elf.type == "REL" and elf.machine == EM_X86_64:  # a module: .text functions, by their section offset
            text = elf.section_data(".text")
            check_boundary(text[address:address + (size or offset + 16)], offset, function)
        else:
            check_probe_offset(elf, function, address, size, offset)
    except InstructionDecodeError as err:
        warn(str(err))
