"""SDT (USDT) probe notes: what ``<sys/sdt.h>`` leaves in ``.note.stapsdt``, read from an ELF file.

Each note (owner ``stapsdt``, type 3) holds three addresses — the probe's pc, the link-time address
of ``.stapsdt.base`` and the semaphore (0: none) — then the provider, the name and the argument
string, each NUL-terminated. When the file was prelinked after it was built, its ``.stapsdt.base``
section moved and the notes did not: the difference is added to the pc and the semaphore
(SystemTap's and perf's rule).

The argument string is one operand spec per argument, ``[-]SIZE@OPERAND`` separated by spaces, each
operand written as the machine's assembler writes it. x86-64: ``-4@%esi`` (a signed 32-bit register),
``8@-8(%rbp)`` (memory), ``-4@$5`` (a constant), ``8@counter(%rip)`` (a global), ``1@-96(%rbp,%rax,8)``
(base + index * scale). AArch64: ``8@x25`` (a register), ``-4@[x22, 20]`` or ``-2@[sp]`` (memory
at a base register plus an offset), ``-4@5`` (a constant). :func:`parse_operand` splits one into
:class:`SdtOperand`; turning it into a fetch argument is the resolver's job.
"""
from __future__ import annotations

import re
import struct
from typing import Optional

from ..arch import EM_AARCH64, EM_X86_64, machine_name
from ..dataclass import dataclass
from ..errors import DebugInfoError
from .elf import ElfFile

NT_STAPSDT = 3
STAPSDT_OWNER = b"stapsdt"
STAPSDT_BASE = ".stapsdt.base"

_OPERAND = re.compile(r"(?:\[[^\]]*\]?|[^\s\[])+")
_NUMBER = r"[-+]?(?:0[xX][0-9a-fA-F]+|[0-9]+)"
_REGISTER = r"%[a-z0-9]+"
_MEMORY = re.compile(
    rf"(?P<disp>{_NUMBER})?(?P<sym>[A-Za-z_.$][A-Za-z0-9_.$@]*)?(?P<symoff>[-+](?:0[xX][0-9a-fA-F]+|[0-9]+))?"
    rf"(?:\((?P<base>{_REGISTER})?(?:,(?P<index>{_REGISTER})(?:,(?P<scale>[1248]))?)?\))?")


@dataclass(frozen=True)
class SdtOperand:
    """One argument of an SDT probe: where the value is and its size and sign.

    ``kind`` is ``register`` (``register`` holds the assembler name without ``%``), ``immediate``
    (``value``) or ``memory``: at ``displacement`` (+ ``symbol``'s address) + ``base`` +
    ``index`` * ``scale``. ``size`` is in bytes, None when the spec gives none.
    """

    text: str
    kind: str
    size: Optional[int] = None
    signed: bool = False
    register: Optional[str] = None
    value: int = 0
    displacement: int = 0
    symbol: Optional[str] = None
    base: Optional[str] = None
    index: Optional[str] = None
    scale: int = 1


@dataclass(frozen=True)
class SdtNote:
    """One SDT probe of a file: ``address`` and ``semaphore`` (0: none) are virtual addresses, already
    adjusted for prelinking; ``arguments`` is the operand spec string as written."""

    provider: str
    name: str
    address: int
    semaphore: int
    arguments: str

    @property
    def operand_texts(self) -> list[str]:
        """The operands, split at the spaces outside brackets (AArch64's ``-4@[x22, 20]`` is one)."""
        return _OPERAND.findall(self.arguments)


def read_sdt_notes(elf: ElfFile) -> list[SdtNote]:
    """Every SDT note of ``elf`` in file order (none: an empty list)."""
    if elf.section(".note.stapsdt") is None:
        return []
    base_section = elf.section(STAPSDT_BASE)
    width = 8 if elf.elf_class == 64 else 4
    addresses = struct.Struct(elf.byte_order + ("QQQ" if width == 8 else "III"))
    notes = []
    for owner, ntype, desc in elf.notes():
        if owner != STAPSDT_OWNER or ntype != NT_STAPSDT:
            continue
        if len(desc) < addresses.size + 3:
            raise DebugInfoError(f"{elf.path}: an SDT note of {len(desc)} bytes is too short",
                                 hint="the file's .note.stapsdt section is damaged")
        pc, base, semaphore = addresses.unpack_from(desc, 0)
        strings = desc[addresses.size:].split(b"\0")
        if len(strings) < 3:
            raise DebugInfoError(f"{elf.path}: an SDT note at pc 0x{pc:x} lacks its provider, name or arguments",
                                 hint="the file's .note.stapsdt section is damaged")
        provider, name, arguments = (s.decode("utf-8", "replace") for s in strings[:3])
        if base_section is not None and base:
            # Prelinked: the section moved by (new - old) and the notes were not rewritten.
            delta = base_section.addr - base
            pc += delta
            if semaphore:
                semaphore += delta
        notes.append(SdtNote(provider, name, pc, semaphore, arguments))
    return notes


# AArch64 (GNU as): a register, [BASE] or [BASE, OFFSET] (the offset with or without '#'), a constant.
_A64_REGISTER = r"(?:[xw](?:[12]?[0-9]|30)|sp|wsp|lr)"
_A64_MEMORY = re.compile(rf"\[(?P<base>{_A64_REGISTER})(?:,\s*#?(?P<disp>{_NUMBER}))?\]")


def parse_operand(text: str, machine: int = EM_X86_64) -> SdtOperand:
    """``[-]SIZE@OPERAND`` (or a bare ``OPERAND``, as old notes have) → :class:`SdtOperand`, the
    operand in the assembler syntax of ELF machine ``machine``.

    Raises DebugInfoError for a spec that is not that machine's assembler syntax."""
    size: Optional[int] = None
    signed = False
    operand = text
    m = re.fullmatch(r"(-?)([0-9]+)@(.+)", text)
    if m:
        signed = m.group(1) == "-"
        size = int(m.group(2))
        operand = m.group(3)
    if machine == EM_AARCH64:
        return _aarch64_operand(text, operand, size, signed)
    if machine != EM_X86_64:
        raise DebugInfoError(f"SDT operand {text!r}: probectl does not know the assembler syntax of "
                             f"{machine_name(machine)}")
    if re.fullmatch(_REGISTER, operand):
        return SdtOperand(text, "register", size, signed, register=operand[1:])
    if operand.startswith("$"):
        if not re.fullmatch(_NUMBER, operand[1:]):
            raise DebugInfoError(f"SDT operand {text!r}: {operand[1:]!r} is not a constant")
        return SdtOperand(text, "immediate", size, signed, value=int(operand[1:], 0))
    mem = _MEMORY.fullmatch(operand)
    if mem is None or not operand:
        raise DebugInfoError(f"SDT operand {text!r} is not x86-64 assembler syntax that probectl knows",
                             hint="expected [-]SIZE@%REG, SIZE@$CONST or SIZE@DISP(%BASE[,%INDEX,SCALE])")
    displacement = int(mem.group("disp"), 0) if mem.group("disp") else 0
    if mem.group("symoff"):
        displacement += int(mem.group("symoff"), 0)
    base = mem.group("base")[1:] if mem.group("base") else None
    index = mem.group("index")[1:] if mem.group("index") else None
    return SdtOperand(text, "memory", size, signed, displacement=displacement, symbol=mem.group("sym"),
                      base=base, index=index, scale=int(mem.group("scale") or 1))


def _aarch64_operand(text: str, operand: str, size: Optional[int], signed: bool) -> SdtOperand:
    if re.fullmatch(_A64_REGISTER, operand):
        return SdtOperand(text, "register", size, signed, register=operand)
    if re.fullmatch(f"#?{_NUMBER}", operand):
        return SdtOperand(text, "immediate", size, signed, value=int(operand.lstrip("#"), 0))
    mem = _A64_MEMORY.fullmatch(operand)
    if mem is None:
        raise DebugInfoError(f"SDT operand {text!r} is not AArch64 assembler syntax that probectl knows",
                             hint="expected [-]SIZE@xN, SIZE@CONST or SIZE@[xN, OFFSET]")
    displacement = int(mem.group("disp"), 0) if mem.group("disp") else 0
    return SdtOperand(text, "memory", size, signed, displacement=displacement, base=mem.group("base"))
