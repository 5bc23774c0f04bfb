"""Where the kernel refuses kprobes, read offline from a vmlinux (perf learns it only from the kernel's
EINVAL): a resolution rule, checked for every kprobe place before anything is written."""
from __future__ import annotations

import bisect
import os
import sys
from array import array
from typing import Optional

from ..arch import for_machine
from ..dataclass import dataclass
from ..debuginfo.elf import ElfFile
from ..errors import ResolveError


@dataclass(frozen=True)
class KprobeRules:
    """Where the kernel refuses kprobes, read offline from a vmlinux, so a definition fails before it is
    written with the reason instead of the kernel's bare EINVAL:

    - outside ``_stext.._etext``;
    - the areas the kernel blacklists whole (``__kprobes`` text, ``noinstr`` text, x86 entry text);
    - functions listed by ``NOKPROBE_SYMBOL`` (the ``_kprobe_blacklist`` array);
    - notrace functions (no ``__fentry__`` call site in ``__mcount_loc``), which kprobe events refuse
      unless the kernel has CONFIG_KPROBE_EVENTS_ON_NOTRACE.
    """

    text: tuple[int, int]
    areas: tuple[tuple[int, int, str], ...]
    blacklisted: frozenset[int]
    ftrace_sites: tuple[int, ...]

    @classmethod
    def from_vmlinux(cls, elf: ElfFile) -> Optional["KprobeRules"]:
        """The rules of the kernel ``elf``, read from a few marker symbols (looked up by name) and the
        arrays between them, or None without ``_stext``/``_etext``. They are kept in the cache
        (``indexcache``, keyed by build-id) for the next run."""
        from ..debuginfo import indexcache

        fingerprint = (_RULES_FORMAT, elf.elf_class, elf.little_endian, os.path.getsize(elf.path))
        key = indexcache.file_key(elf.path, elf.build_id)

        def build() -> tuple[KprobeRules, tuple]:
            rules = cls._read(elf)
            not_a_kernel = cls(text=(0, 0), areas=(), blacklisted=frozenset(), ftrace_sites=())  # (as _decode reads it)
            return rules or not_a_kernel, cls._encode(rules)

        rules = indexcache.load_or_build("kprobe-rules", key, fingerprint, decode=cls._decode, build=build,
                                         what=str(elf.path))
        return rules if rules.text != (0, 0) else None

    @classmethod
    def _read(cls, elf: ElfFile) -> Optional["KprobeRules"]:
        # The last symbol of each name, as a dict over every symbol in table order would keep it.
        found = elf.find_symbols_named(_MARK_NAMES)
        marks = {name: syms[-1].value for name, syms in found.items() if syms}
        if "_stext" not in marks or "_etext" not in marks:
            return None
        areas = tuple((marks[a], marks[b], why) for a, b, why in _AREAS if a in marks and b in marks)
        return cls(
            text=(marks["_stext"], marks["_etext"]),
            areas=areas,
            blacklisted=frozenset(_address_array(elf, marks, "__start_kprobe_blacklist", "__stop_kprobe_blacklist")),
            ftrace_sites=tuple(sorted(_address_array(elf, marks, "__start_mcount_loc", "__stop_mcount_loc"))),
        )

    @staticmethod
    def _encode(rules: Optional["KprobeRules"]) -> tuple:
        if rules is None:  # not a kernel: remembered as such
            return ((0, 0), (), b"", b"")
        return (rules.text, rules.areas, array("Q", sorted(rules.blacklisted)).tobytes(),
                array("Q", rules.ftrace_sites).tobytes())

    @classmethod
    def _decode(cls, stored: tuple) -> Optional["KprobeRules"]:
        try:
            text, areas, blacklisted, sites = stored
            if len(blacklisted) % 8 or len(sites) % 8:
                return None
            return cls(text=tuple(text), areas=tuple(tuple(a) for a in areas),
                       blacklisted=frozenset(array("Q", blacklisted)), ftrace_sites=tuple(array("Q", sites)))
        except (TypeError, ValueError):
            return None

    def check(self, address: int, symbol: str, start: int, size: int, notrace_allowed: bool = False) -> None:
        """Raise ResolveError if a kprobe at ``address`` (in function ``symbol`` at ``start``) is refused."""
        where = f"{symbol}+{address - start}"
        if not self.text[0] <= address < self.text[1]:
            raise ResolveError(f"{where} is out of .text; kprobes can only be put on kernel text",
                               hint="init and exit code is gone after boot")
        for lo, hi, why in self.areas:
            if lo <= address < hi:
                raise ResolveError(f"{symbol} is in the {why}, where the kernel does not allow kprobes")
        if start in self.blacklisted:
            raise ResolveError(f"{symbol} is blacklisted for kprobes (NOKPROBE_SYMBOL)",
                               hint="kprobes there could recurse into the kprobe handler; probe a caller instead")
        if not notrace_allowed and self.ftrace_sites and size:
            i = bisect.bisect_left(self.ftrace_sites, start)
            if i == len(self.ftrace_sites) or self.ftrace_sites[i] >= start + size:
                raise ResolveError(f"{symbol} is a notrace function; kprobe events refuse those",
                                   hint="the kernel needs CONFIG_KPROBE_EVENTS_ON_NOTRACE=y; probe a caller instead")


_AREAS = (
    ("__kprobes_text_start", "__kprobes_text_end", "__kprobes text"),
    ("__noinstr_text_start", "__noinstr_text_end", "noinstr text"),
    ("__entry_text_start", "__entry_text_end", "entry text"),
)
_RULES_FORMAT = 2  # (2: a position-independent kernel's tables read from its relocations)
_MARK_NAMES = {"_stext", "_etext", "__start_kprobe_blacklist", "__stop_kprobe_blacklist",
               "__start_mcount_loc", "__stop_mcount_loc"} | {n for a, b, _ in _AREAS for n in (a, b)}


def _address_array(elf: ElfFile, marks: dict[str, int], start: str, stop: str) -> list[int]:
    """The unsigned longs between two marker symbols (arrays the linker collects in a section). A
    position-independent kernel (arm64's vmlinux is ELF DYN) holds zeros there and the addresses in
    its RELATIVE relocations, which it applies at boot: those are read instead."""
    if start not in marks or stop not in marks or marks[stop] <= marks[start]:
        return []
    section = next((s for s in elf.sections if s.has_data and s.addr <= marks[start] < s.addr + s.size), None)
    if section is None:
        return []
    lo = marks[start] - section.addr
    hi = min(marks[stop] - section.addr, section.size)
    if section.compressed:
        data = elf.section_data(section.name)[lo:hi]
    else:  # only the array, not the whole section
        data = elf.section_bytes_at(section, lo, hi - lo)
    values = array("Q", data[:len(data) - len(data) % 8])
    if elf.little_endian != (sys.byteorder == "little"):
        values.byteswap()
    arch = for_machine(elf.machine)
    if elf.type == "DYN" and arch is not None:
        relocated = elf.relative_relocations(marks[start], marks[start] + 8 * len(values), arch.relative_relocation)
        return [relocated.get(marks[start] + 8 * i, value) for i, value in enumerate(values)]
    return values.tolist()
