"""The kernel as a probe target: which vmlinux describes the running kernel (perf's search, checked
by build-id), and where its BTF is when there is no vmlinux.
"""
from __future__ import annotations

import bisect
import os
import struct
import sys
from array import array
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from ..cachedir import cache_dir as probectl_cache_dir
from ..debuginfo.elf import ElfFile
from ..errors import ProbectlError, ResolveError, TargetError

NOTES = Path("/sys/kernel/notes")
SYS_BTF = Path("/sys/kernel/btf/vmlinux")
NT_GNU_BUILD_ID = 3


def vmlinux_candidates(release: Optional[str] = None) -> list[Path]:
    """perf's search order for the running kernel's vmlinux."""
    release = release or os.uname().release
    return [
        Path(f"/usr/lib/debug/boot/vmlinux-{release}"),
        Path(f"/usr/lib/debug/lib/modules/{release}/vmlinux"),
        Path(f"/boot/vmlinux-{release}"),
        Path(f"/lib/modules/{release}/build/vmlinux"),
        Path(f"/usr/lib/debug/boot/vmlinux-{release}.debug"),
        Path("/boot/vmlinux"),
        Path("vmlinux"),
    ]


def running_build_id(notes: Path = NOTES) -> Optional[str]:
    """The running kernel's build-id, from the ELF notes the kernel exports."""
    try:
        data = notes.read_bytes()
    except OSError:
        return None
    pos = 0
    while pos + 12 <= len(data):
        namesz, descsz, ntype = struct.unpack_from("<III", data, pos)
        pos += 12
        name = data[pos:pos + namesz].rstrip(b"\0")
        pos += (namesz + 3) & ~3
        desc = data[pos:pos + descsz]
        pos += (descsz + 3) & ~3
        if ntype == NT_GNU_BUILD_ID and name == b"GNU":
            return desc.hex()
    return None


def find_running_vmlinux() -> tuple[Optional[Path], list[str]]:
    """The vmlinux whose build-id is the running kernel's (or None), and what was tried."""
    wanted = running_build_id()
    tried = []
    for path in vmlinux_candidates():
        if not path.is_file():
            tried.append(str(path))
            continue
        try:
            with ElfFile(path) as elf:
                found = elf.build_id
        except (ProbectlError, OSError):
            tried.append(f"{path} (not a readable ELF file)")
            continue
        if wanted and found != wanted:
            tried.append(f"{path} (build-id {found}, running kernel {wanted})")
            continue
        return path, tried
    return None, tried


def check_vmlinux(path: Path) -> Path:
    """A user-given vmlinux must exist and be an ELF file with DWARF."""
    if not path.is_file():
        raise TargetError(f"vmlinux {path} does not exist")
    with ElfFile(path) as elf:
        if not elf.has_dwarf:
            raise TargetError(f"{path} has no debug information",
                              hint="use the vmlinux of the kernel's debug package (Debian: linux-image-*-dbg)")
    return path.resolve()


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
        stored = indexcache.load("kprobe-rules", key, fingerprint)
        if stored is not None:
            rules = cls._decode(stored)
            if rules is not None:
                return rules if rules.text != (0, 0) else None
        rules = cls._read(elf)
        indexcache.store("kprobe-rules", key, fingerprint, cls._encode(rules))
        return rules

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
_RULES_FORMAT = 1
_MARK_NAMES = {"_stext", "_etext", "__start_kprobe_blacklist", "__stop_kprobe_blacklist",
               "__start_mcount_loc", "__stop_mcount_loc"} | {n for a, b, _ in _AREAS for n in (a, b)}


def _address_array(elf: ElfFile, marks: dict[str, int], start: str, stop: str) -> list[int]:
    """The unsigned longs between two marker symbols (arrays the linker collects in a section)."""
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
    return values.tolist()


def module_name(path: Path) -> str:
    """A module's name as the kernel knows it: ``name=`` in its .modinfo, else the file name."""
    try:
        with ElfFile(path) as elf:
            info = elf.section_data(".modinfo") if elf.section(".modinfo") else b""
    except ProbectlError:
        info = b""
    for entry in info.split(b"\0"):
        if entry.startswith(b"name="):
            return entry[5:].decode(errors="replace")
    return path.name.split(".ko", 1)[0].replace("-", "_")


def find_module(spec: str, cache_dir: Optional[Path] = None) -> tuple[Path, str]:
    """``-m NAME|PATH``: the module object to read (its debug file when there is one; ``.ko.xz`` and
    ``.ko.zst`` unpacked into the cache) and the module's name."""
    path = Path(spec)
    if "/" in spec or spec.endswith((".ko", ".ko.xz", ".ko.zst", ".ko.debug")):
        if not path.is_file():
            raise TargetError(f"module file {spec} does not exist")
    else:
        path = _module_by_name(spec)
    path = _unpacked(path, cache_dir)
    return path.resolve(), module_name(path)


def _module_by_name(name: str) -> Path:
    release = os.uname().release
    root = Path(f"/lib/modules/{release}")
    wanted = {name.replace("-", "_"), name.replace("_", "-")}
    found = []
    try:
        deps = (root / "modules.dep").read_text().splitlines()
    except OSError:
        deps = []
    for line in deps:
        rel = line.split(":", 1)[0]
        base = rel.rsplit("/", 1)[-1].split(".ko", 1)[0]
        if base in wanted:
            found.append(rel)
    if not found:
        raise TargetError(f"module {name} is not in /lib/modules/{release}/modules.dep",
                          hint="give the module's path (a .ko or .ko.debug file) with -m")
    rel = found[0]
    debug = Path(f"/usr/lib/debug/lib/modules/{release}") / rel.split(".ko", 1)[0]
    for candidate in (debug.with_suffix(".ko"), Path(str(debug) + ".ko.debug")):
        if candidate.is_file():
            return candidate
    return root / rel


def _scratch_dir() -> Path:
    """A directory of this run's own, removed at exit (for unpacked modules when caching is off)."""
    import atexit
    import shutil
    import tempfile

    path = Path(tempfile.mkdtemp(prefix="probectl-modules-"))
    atexit.register(shutil.rmtree, path, ignore_errors=True)
    return path


def _unpacked(path: Path, cache_dir: Optional[Path]) -> Path:
    """Compressed modules are unpacked once into the cache (ELF readers need the plain file)."""
    if path.suffix not in (".xz", ".zst"):
        return path
    if cache_dir is None:
        base = probectl_cache_dir()
        cache_dir = base / "modules" if base is not None else _scratch_dir()
    cache = cache_dir
    stat = path.stat()
    out = cache / f"{path.name[:-len(path.suffix)]}-{stat.st_size}-{int(stat.st_mtime)}"
    if out.is_file():
        return out
    import lzma  # only for compressed modules: not imported by every command
    import subprocess

    try:
        if path.suffix == ".xz":
            plain = lzma.decompress(path.read_bytes())
        else:
            # Python's standard library has no zstd; the zstd tool does (Debian: apt install zstd).
            plain = subprocess.run(["zstd", "-dcq", str(path)], capture_output=True, check=True).stdout
    except (lzma.LZMAError, OSError, subprocess.CalledProcessError) as err:
        raise TargetError(f"cannot unpack the module {path}: {err}",
                          hint="for .ko.zst modules install zstd") from err
    cache.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".tmp")
    tmp.write_bytes(plain)
    tmp.rename(out)
    return out
