"""SDT probes → ProbePoints: the notes that match ``%PROVIDER:NAME`` globs, their semaphores as uprobe
reference counters, and their operands as fetch arguments.

An operand becomes what perf writes where perf can (``-4@%esi`` → ``%si:s32``, ``8@-8(%rbp)`` →
``-8(%bp):u64``) and more where the kernel can read it and perf gives up: ``$5`` is the immediate
``\\5``, ``counter(%rip)`` the file-offset fetch ``@+0x…`` of the global (how uprobes read globals of
the probed file), a high-byte register (``%ah``) the bitfield ``b8@8/64`` of its register. An index
register (``-96(%rbp,%rax,8)``) cannot be expressed: the kernel's fetch arguments never add two
registers. Such an argument is an error when it is asked for by name (``arg2``); when the definition
names none and so takes them all, it is left out with a warning, as perf leaves them out.

A probe guarded by a semaphore fires only while the semaphore is non-zero: its place gets the
semaphore's file offset as the kernel's reference counter, ``PATH:0xOFF(0xREF)``, so the kernel
increments it in every process that maps the file, now or later, while the event is enabled.
"""
from __future__ import annotations

import fnmatch
from typing import TYPE_CHECKING, Optional

from .. import spec as S
from ..debuginfo.sdt import SdtNote, SdtOperand, parse_operand, read_sdt_notes
from ..errors import DebugInfoError, ProbePointNotFound, ResolveError, did_you_mean
from .points import ProbePoint, ResolvedArg

if TYPE_CHECKING:
    from . import Resolver


def resolve_sdt_points(resolver: "Resolver", probe: S.ProbeSpec) -> list[ProbePoint]:
    """One ProbePoint per matching note of the target file."""
    assert probe.point.sdt is not None
    if not resolver.target.is_uprobe:
        raise ResolveError(f"'{probe.point.text}' is an SDT probe, which lives in a user binary or library",
                           hint="give the binary with -x BINARY")
    provider, name = probe.point.sdt
    notes = read_sdt_notes(resolver.elf)
    found = [n for n in notes if fnmatch.fnmatchcase(n.provider, provider) and fnmatch.fnmatchcase(n.name, name)]
    if not found:
        known = [f"{n.provider}:{n.name}" for n in notes]
        hint = did_you_mean(f"{provider}:{name}", known, sep=", ") if known else ""
        raise ProbePointNotFound(
            probe.point.text,
            hint=hint or (f"'probectl funcs --sdt -x {resolver.target.path}' lists its SDT probes" if known
                          else f"{resolver.target.path} has no SDT probes (.note.stapsdt)"))
    return [_point(resolver, probe, note) for note in found]


def _point(resolver: "Resolver", probe: S.ProbeSpec, note: SdtNote) -> ProbePoint:
    place = resolver.place(note.name, note.address, 0)
    if note.semaphore:
        if not resolver.options.ref_ctr:
            raise ResolveError(
                f"sdt_{note.provider}:{note.name} is guarded by a semaphore, and this kernel's uprobes have no "
                "reference counter (ref_ctr_offset) to set it", hint="Linux 4.20 or later sets it")
        place += f"(0x{resolver.elf.vaddr_to_offset(note.semaphore):x})"
    operands = note.operand_texts
    args: list[ResolvedArg] = []
    if probe.args:
        for arg in probe.args:
            index = S.sdt_arg_index(arg)
            assert index is not None  # the spec checks that
            if index > len(operands):
                raise ResolveError(f"sdt_{note.provider}:{note.name} has {len(operands)} argument(s), not arg{index}",
                                   hint=f"its operands are: {note.arguments or '(none)'}")
            args.append(_arg(resolver, note, index, arg.name or f"arg{index}", arg.type, arg.text))
    else:
        for index in range(1, len(operands) + 1):
            try:
                args.append(_arg(resolver, note, index, f"arg{index}", None, f"arg{index}"))
            except ResolveError as err:
                resolver.warnings.append(f"{err.message}; that argument is left out")
    return ProbePoint(function=note.name, offset=0, address=note.address, place=place, args=tuple(args),
                      group=f"sdt_{note.provider}")


def _arg(resolver: "Resolver", note: SdtNote, index: int, name: str, cast: Optional[S.TypeSpec],
         text: str) -> ResolvedArg:
    spec = note.operand_texts[index - 1]
    what = f"arg{index} of sdt_{note.provider}:{note.name} ({spec})"
    try:
        operand = parse_operand(spec, resolver.target.arch.elf_machine)
    except DebugInfoError as err:
        raise ResolveError(f"{what}: {err.message}", hint=err.hint) from None
    fetch, typ = _fetch(resolver, operand, note.address, what)
    if cast is not None:
        typ = cast.text
        if cast.base in ("s", "u", "x") and cast.bits is None:
            typ = f"{cast.base}{8 * (operand.size or 8)}"
    return ResolvedArg(fetch=fetch, type=typ, name=name, text=text)


def _fetch(resolver: "Resolver", op: SdtOperand, address: int, what: str) -> tuple[str, str]:
    """The fetch text and type of one operand at the probe's ``address``."""
    if op.size is not None and op.size not in (1, 2, 4, 8):
        raise ResolveError(f"{what}: a {op.size}-byte value (a vector register?) is not something probe events read")
    typ = f"{'s' if op.signed else 'u'}{8 * (op.size or 8)}"
    if op.kind == "register":
        kernel, shift, bits = _register(resolver, op.register or "", what)
        if shift:
            return kernel, f"b{bits}@{shift}/64"  # %ah: bits 8..15 of %ax
        return kernel, typ
    if op.kind == "immediate":
        if not resolver.options.immediates:
            raise ResolveError(f"{what}: this kernel's probe events take no immediate values (\\IMM)")
        return f"\\{op.value}", typ
    if op.index is not None:
        raise ResolveError(f"{what}: the kernel's fetch arguments cannot add an index register to a base "
                           "(base + index * scale)", hint="probe the code around it and fetch the registers yourself")
    if op.base is None or op.base == "rip":
        if op.symbol is None and op.base == "rip":
            raise ResolveError(f"{what}: a RIP-relative operand without a symbol needs the instruction's length")
        return _global(resolver, op, address, what), typ
    if op.symbol is not None:
        raise ResolveError(f"{what}: a symbol plus a base register is not something probe events read")
    kernel, shift, bits = _register(resolver, op.base, what)
    if shift or bits != 64:
        raise ResolveError(f"{what}: the base register %{op.base} is not a 64-bit register")
    sign = "-" if op.displacement < 0 else "+"
    return f"{sign}{abs(op.displacement)}({kernel})", typ


def _register(resolver: "Resolver", name: str, what: str) -> tuple[str, int, int]:
    try:
        return resolver.target.arch.assembler_registers[name]
    except KeyError:
        raise ResolveError(f"{what}: probe events cannot read the register %{name}",
                           hint="they read the general-purpose registers only") from None


def _symbol_value(resolver: "Resolver", name: str) -> Optional[int]:
    """A data symbol's address from the binary's symbol table, else (a stripped binary) from its debug
    file's, found locally or through debuginfod."""
    from ..debuginfo.elf import ElfFile

    matches = [s for s in resolver.elf.symbols() if s.name == name and s.shndx != 0]
    if matches:
        return matches[0].value
    source = resolver.source(required=False)
    if source is None or source.debuginfo.path == str(resolver.target.path):
        return None
    with ElfFile(source.debuginfo.path) as debug:
        matches = [s for s in debug.symbols() if s.name == name and s.shndx != 0]
    return matches[0].value if matches else None


def _global(resolver: "Resolver", op: SdtOperand, address: int, what: str) -> str:
    """Memory at a symbol (+ displacement) or an absolute address, as the uprobe file-offset fetch."""
    if op.symbol is None:
        target = op.displacement
    else:
        value = _symbol_value(resolver, op.symbol)
        if value is None:
            raise ResolveError(f"{what}: the symbol {op.symbol} is in the symbol table of neither "
                               f"{resolver.target.path} nor a debug file of it",
                               hint="the file is stripped: install its debug file, or set DEBUGINFOD_URLS")
        target = value + op.displacement
    return resolver.file_offset_fetch(target, address)

