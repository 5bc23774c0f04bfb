"""Describing events for people: the ones `add` just created, from their definitions as typed, and the
existing ones for `list`, each definition mapped back to a readable place; and the SDT probes that
files carry, for ``funcs --sdt``.

For `list`, tracefs is the source of truth; the place is rebuilt from the definition itself (file
offset → symbol through the ELF symbol table), so events added by other tools are described as well
as probectl's own.
"""
from __future__ import annotations

import fnmatch
from pathlib import Path
from typing import TYPE_CHECKING

from ..dataclass import dataclass
from ..debuginfo.dwarf import DebugInfo
from ..debuginfo.dwarf.lines import source_point
from ..debuginfo.elf import ElfFile
from ..errors import ProbectlError
from ..events import EventDefinition
from ..target.process import root_of

if TYPE_CHECKING:
    from ..debuginfo.sdt import SdtNote
    from ..target import Target
    from . import Named


@dataclass(frozen=True)
class EventListing:
    """One probe of one event, described for people (``where``) and for scripts (the rest)."""

    definition: EventDefinition
    where: str  # "add+4 in /tmp/t", "tcp_sendmsg%return"
    arg_names: tuple[str, ...]

    def line(self) -> str:
        text = f"  {self.definition.full_name:<20} (on {self.where}"
        if self.arg_names:
            text += " with " + " ".join(self.arg_names)
        return text + ")"

    def as_json(self) -> dict:
        d = self.definition
        out: dict[str, object] = {
            "group": d.group,
            "event": d.event,
            "type": "uprobe" if d.is_uprobe else "kprobe",
            "return": d.kind == "r",
            "place": d.place,
            "on": self.where,
            "args": [{"name": n, "fetch": a.fetch, "type": a.type} for n, a in zip(self.arg_names, d.args)],
            "definition": d.render(),
        }
        if d.is_uprobe:
            out["path"] = d.uprobe_path
            out["offset"] = d.uprobe_offset
        return out


def added(named: "Named", target: "Target") -> list[EventListing]:
    """The events an `add` created, once each, described by the definition that made them (perf's
    "Added new events" lines: the place and arguments as the user typed them)."""
    out = []
    for spec, defs in named:
        seen = set()
        for d in defs:
            if d.full_name in seen:
                continue
            seen.add(d.full_name)
            point = spec.point.text
            if spec.point.sdt is not None:  # the note's own name, not the glob
                with ElfFile(d.uprobe_path) as elf:
                    point = _sdt_name_at(elf, elf.offset_to_vaddr(d.uprobe_offset)) or point
            where = point + (f" in {target.path}" if target.is_uprobe else "")
            args = tuple(f"{a.name}={a.text}" if a.name else a.text for a in spec.args)
            out.append(EventListing(d, where, args))
    return out


def kernel_arg_names(defn: EventDefinition) -> tuple[str, ...]:
    """The field names the kernel gives the arguments (unnamed ones become argN, N counting from 1)."""
    return tuple(arg.name or f"arg{i}" for i, arg in enumerate(defn.args, 1))


def describe(defn: EventDefinition, elf_cache: dict[str, ElfFile | None],
             dwarf_cache: dict[str, DebugInfo | None] | None = None, vmlinux: str | None = None) -> EventListing:
    """Map a definition's place back to FUNC[+OFF|:RLN|%return][@SRC] (and ` in PATH` for uprobes):
    through DWARF when the binary (for kprobes in the kernel itself: ``vmlinux``) has debug
    information, else through its symbol table."""
    ret = "%return" if defn.kind == "r" else ""
    if not defn.is_uprobe:
        where = defn.place
        if where.endswith("+0"):
            where = where[:-2]
        source = None
        if vmlinux is not None and dwarf_cache is not None:
            vaddr = _kernel_address(defn.place, vmlinux, elf_cache)
            source = _source_place(vmlinux, vaddr, dwarf_cache) if vaddr is not None else None
        if source is not None:
            where = source if not ret else source.replace("@", ret + "@", 1)
        return EventListing(defn, where + ("" if source else ret), kernel_arg_names(defn))
    path = defn.uprobe_path
    elf = _elf(path, elf_cache)
    where = f"0x{defn.uprobe_offset:x}"
    if elf is not None:
        try:
            vaddr = elf.offset_to_vaddr(defn.uprobe_offset)
            sym = elf.symbol_at(vaddr)
        except ProbectlError:
            vaddr, sym = None, None
        sdt = _sdt_name_at(elf, vaddr) if vaddr is not None else None
        if sdt is not None:
            return EventListing(defn, f"{sdt}{ret} in {path}", kernel_arg_names(defn))
        if sym is not None and vaddr is not None:
            off = vaddr - sym.value
            where = sym.name + (f"+{off}" if off else "")
        source = _source_place(path, vaddr, dwarf_cache) if vaddr is not None and dwarf_cache is not None else None
        if source is not None:
            where = source if not ret else source.replace("@", ret + "@", 1)
            ret = ""
    return EventListing(defn, f"{where}{ret} in {path}", kernel_arg_names(defn))


def _sdt_name_at(elf: ElfFile, vaddr: int) -> str | None:
    """``sdt_PROVIDER:NAME`` of the SDT probe at ``vaddr``, if there is one."""
    from ..debuginfo.sdt import read_sdt_notes

    try:
        notes = read_sdt_notes(elf)
    except ProbectlError:
        return None
    return next((f"sdt_{n.provider}:{n.name}" for n in notes if n.address == vaddr), None)


def _kernel_address(place: str, vmlinux: str, elf_cache: dict[str, ElfFile | None]) -> int | None:
    """The address in ``vmlinux`` of a kprobe place ``SYMBOL[+OFFSET]`` (None for a module's
    ``MOD:SYMBOL``, a raw address, or a symbol vmlinux does not have)."""
    symbol, _, offset = place.partition("+")
    if ":" in symbol or not symbol or symbol[0].isdigit():
        return None
    elf = _elf(vmlinux, elf_cache)
    try:
        found = [s for s in elf.find_symbols(symbol) if s.type == "FUNC"] if elf is not None else []
        return found[0].value + int(offset or "0", 0) if found else None
    except (ProbectlError, ValueError):
        return None


def _elf(path: str, elf_cache: dict[str, ElfFile | None]) -> ElfFile | None:
    if path not in elf_cache:
        try:
            elf_cache[path] = ElfFile(Path(path))
        except (ProbectlError, OSError):
            elf_cache[path] = None
    return elf_cache[path]


def _source_place(path: str, vaddr: int, cache: dict[str, DebugInfo | None]) -> str | None:
    """perf -l's ``FUNC[:RLN|+OFF]@FILE`` (FILE cut to its last ~30 characters at a '/')."""
    if path not in cache:
        try:
            cache[path] = DebugInfo.open(path, root=root_of(Path(path)))  # (a container's: its tree first)
        except (ProbectlError, OSError):
            cache[path] = None
    debuginfo = cache[path]
    if debuginfo is None:
        return None
    try:
        sp = source_point(debuginfo, vaddr)
    except ProbectlError:
        return None
    if sp is None or not sp.function:
        return None
    text = sp.function
    if sp.line:
        text += f":{sp.line}"
    elif sp.offset:
        text += f"+{sp.offset}"
    if sp.file:
        name = sp.file
        if len(name) > 30:
            cut = name.find("/", len(name) - 30)
            name = name[cut + 1:] if cut >= 0 else name[len(name) - 30:]
        text += f"@{name}"
    return text


def match_definitions(defs: list[EventDefinition], patterns: list[str], binary: str | None = None) -> list[EventDefinition]:
    """Definitions whose ``group:event`` matches one of the ``[GROUP:]EVENT`` globs (no group = any group)."""
    chosen = []
    for d in defs:
        if binary is not None and (not d.is_uprobe or d.uprobe_path != binary):
            continue
        if not patterns or any(_matches(d, p) for p in patterns):
            chosen.append(d)
    return chosen


def _matches(defn: EventDefinition, pattern: str) -> bool:
    group, _, event = pattern.rpartition(":")
    if not fnmatch.fnmatchcase(defn.event, event):
        return False
    return not group or fnmatch.fnmatchcase(defn.group, group)


@dataclass(frozen=True)
class SdtListing:
    """One SDT probe of one file, for ``funcs --sdt``: what ``add`` takes (``sdt_PROVIDER:NAME``) and its
    notes (several when the probe's code was inlined or unrolled: one event, several places)."""

    path: Path
    notes: tuple["SdtNote", ...]

    @property
    def note(self) -> "SdtNote":
        return self.notes[0]

    @property
    def name(self) -> str:
        return f"sdt_{self.note.provider}:{self.note.name}"

    def line(self, with_path: bool) -> str:
        text = f"{self.path} {self.name}" if with_path else self.name
        if self.note.semaphore:
            text += " [semaphore]"
        return text

    def as_json(self) -> dict:
        note = self.note
        return {"path": str(self.path), "provider": note.provider, "name": note.name,
                "addresses": [n.address for n in self.notes], "semaphore": note.semaphore,
                "arguments": note.operand_texts}


def sdt_probes(paths: list[Path], pattern: str | None) -> list[SdtListing]:
    """The SDT probes of ``paths`` whose ``PROVIDER:NAME`` matches ``pattern`` (a glob, ``sdt_`` and ``%``
    prefixes allowed; None: all), each provider:name once per file, in file order."""
    from ..debuginfo.sdt import SdtNote, read_sdt_notes

    wanted = None
    if pattern:
        wanted = pattern.lstrip("%")
        wanted = wanted[4:] if wanted.startswith("sdt_") else wanted
        if ":" not in wanted:
            wanted = f"*:{wanted}"  # a bare NAME glob: any provider
    out: list[SdtListing] = []
    for path in paths:
        with ElfFile(path) as elf:
            by_name: dict[str, list[SdtNote]] = {}
            for note in read_sdt_notes(elf):
                key = f"{note.provider}:{note.name}"
                if wanted is None or fnmatch.fnmatchcase(key, wanted):
                    by_name.setdefault(key, []).append(note)
        out.extend(SdtListing(path, tuple(notes)) for notes in by_name.values())
    return out
