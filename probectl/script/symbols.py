"""Where formatted events get their names: process names and thread groups (:class:`Source`), and
symbols for kernel addresses (kallsyms) and user addresses (process maps and the mapped ELF files)."""
from __future__ import annotations

import bisect
from pathlib import Path
from typing import Any, Optional

from ..errors import DebugInfoError, ProbectlError
from ..termtext import backslashed
from ..tracedat.jitmaps import OPTION_JIT_MAPS, JitSymbols, decode_jit_maps
from ..tracedat.nspids import OPTION_NS_PIDS, decode_ns_pids
from ..tracedat.procmaps import OPTION_PROC_MAPS, Mapping, decode_proc_maps

UNKNOWN_SYMBOL = "[unknown]"


class Source:
    """What formatting needs besides the events: names of processes, thread groups, symbols.

    :class:`TraceSource` answers from a trace.dat file; the ``trace`` command gives a live one.
    """

    def comm(self, tid: int) -> str:
        raise NotImplementedError

    def tgid(self, tid: int) -> int:
        return tid

    def nspid(self, tid: int) -> int:
        """The thread's pid in its own PID namespace (a container's; the host's pid elsewhere)."""
        return tid

    def has_nspids(self) -> bool:
        """Whether some thread was recorded in another PID namespace (its pid there is known)."""
        return False

    def kernel_symbols(self) -> "KernelSymbols":
        return KernelSymbols(b"")

    def user_symbols(self) -> "UserSymbols":
        return UserSymbols({})


class LiveSource(Source):
    """Names of live processes, for the events of a live trace: ``names`` answers ``comm(tid)`` and
    ``tgid(tid)`` (no symbols: nothing was recorded to name them from)."""

    def __init__(self, names: Any):
        self.names = names

    def comm(self, tid: int) -> str:
        return backslashed(self.names.comm(tid))  # (as TraceSource.comm)

    def tgid(self, tid: int) -> int:
        return self.names.tgid(tid)

    def nspid(self, tid: int) -> int:
        return self.names.nspid(tid)


class TraceSource(Source):
    """Names from a trace.dat file: saved cmdlines and tgids, kallsyms, probectl's process maps;
    user functions named as stacks show them (C++ and Rust names demangled), or with ``demangle``
    off as their symbols are written (``script --no-demangle``, as perf script's)."""

    def __init__(self, trace: Any, demangle: bool = True):
        self.trace = trace
        self.demangle = demangle
        self._ksyms: Optional[KernelSymbols] = None
        self._usyms: Optional[UserSymbols] = None
        self._maps_option = [data for oid, data in trace.options if oid == OPTION_PROC_MAPS]
        self._jit_option = [data for oid, data in trace.options if oid == OPTION_JIT_MAPS]
        self._nspids: Optional[dict[int, int]] = None

    def comm(self, tid: int) -> str:
        return backslashed(self.trace.comm(tid))  # (a name is bytes: a control character is no escape sequence)

    def tgid(self, tid: int) -> int:
        return self.trace.tgids.get(tid, tid)

    def nspid(self, tid: int) -> int:
        return self._ns_pids().get(tid, tid)

    def has_nspids(self) -> bool:
        return bool(self._ns_pids())

    def _ns_pids(self) -> dict[int, int]:
        if self._nspids is None:
            self._nspids = {}
            for oid, data in self.trace.options:
                if oid == OPTION_NS_PIDS:
                    self._nspids.update(decode_ns_pids(data))
        return self._nspids

    def kernel_symbols(self) -> "KernelSymbols":
        if self._ksyms is None:
            self._ksyms = KernelSymbols(self.trace.kallsyms)
        return self._ksyms

    def user_symbols(self) -> "UserSymbols":
        if self._usyms is None:
            maps: dict[int, list[Mapping]] = {}
            for data in self._maps_option:
                maps.update(decode_proc_maps(data))
            jit: dict[int, JitSymbols] = {}
            for data in self._jit_option:
                jit.update(decode_jit_maps(data))
            self._usyms = UserSymbols(maps, jit, demangle=self.demangle)
        return self._usyms


TEXT_SYMBOL_TYPES = (b"t", b"T", b"w", b"W")
# and data (what a pointer such as file->f_op points to: null_fops): all but absolute and undefined ones
DATA_SYMBOL_TYPES = TEXT_SYMBOL_TYPES + (b"d", b"D", b"b", b"B", b"r", b"R", b"v", b"V")


class KernelSymbols:
    """Kernel text symbols (with ``data``: data symbols too) from a kallsyms text (the file's copy),
    looked up by address."""

    def __init__(self, kallsyms: bytes, data: bool = False):
        self._text = kallsyms
        self._types = DATA_SYMBOL_TYPES if data else TEXT_SYMBOL_TYPES
        self._addrs: Optional[list[int]] = None
        self._names: list[str] = []

    def _load(self) -> None:
        pairs = []
        for line in self._text.split(b"\n"):
            parts = line.split()
            if len(parts) < 3 or parts[1] not in self._types:
                continue
            try:
                addr = int(parts[0], 16)
            except ValueError:
                continue
            name = parts[2].decode(errors="replace")
            if len(parts) > 3:
                name += " " + parts[3].decode(errors="replace")
            pairs.append((addr, name))
        pairs.sort()
        self._addrs = [a for a, _ in pairs]
        self._names = [n for _, n in pairs]

    def lookup(self, addr: int) -> Optional[tuple[str, int]]:
        """(name, offset) of the symbol at or before ``addr``, or None."""
        if self._addrs is None:
            self._load()
        assert self._addrs is not None
        i = bisect.bisect_right(self._addrs, addr) - 1
        if i < 0 or not self._addrs[i]:
            return None
        return self._names[i], addr - self._addrs[i]


class UserSymbols:
    """User addresses of a process → function names, through its maps and the mapped ELF files, or
    for code in no mapped file, the process's JIT map (``/tmp/perf-PID.map``, copied into the
    recording), as perf names such code; C++ and Rust functions demangled unless ``demangle`` is off."""

    def __init__(self, maps: dict[int, list[Mapping]], jit: Optional[dict[int, JitSymbols]] = None,
                 demangle: bool = True):
        self.jit = jit or {}
        self.demangle = demangle
        self.maps = {tgid: sorted(ms, key=lambda m: m.start) for tgid, ms in maps.items()}
        self._starts = {tgid: [m.start for m in ms] for tgid, ms in self.maps.items()}
        self._elves: dict[str, Any] = {}
        self._files: dict[str, list[Any]] = {}
        self._demangled: dict[str, str] = {}  # symbol name -> the name stacks show

    def mapping(self, tgid: int, addr: int) -> Optional[Mapping]:
        starts = self._starts.get(tgid)
        if not starts:
            return None
        i = bisect.bisect_right(starts, addr) - 1
        if i >= 0:
            m = self.maps[tgid][i]
            if m.start <= addr < m.end:
                return m
        return None

    def _elf(self, path: str) -> Any:
        if path not in self._elves:
            from ..debuginfo.elf import ElfFile

            try:
                self._elves[path] = ElfFile(path) if path.startswith("/") else None
            except (ProbectlError, OSError):
                self._elves[path] = None
        return self._elves[path]

    def _symbol_files(self, path: str) -> list[Any]:
        """The ELF files whose symbol tables name ``path``'s functions, the fullest first: a binary
        stripped to ``.dynsym`` (libc) names its local functions (``__libc_start_call_main``) only
        in its debug file, found as ``add`` finds DWARF (:func:`debug_symbol_file`)."""
        found = self._files.get(path)
        if found is None:
            elf = self._elf(path)
            found = [] if elf is None else [elf]
            if elf is not None and elf.section(".symtab") is None:
                debug = debug_symbol_file(elf)
                if debug is not None:
                    found.insert(0, debug)
            self._files[path] = found
        return found

    def lookup(self, tgid: int, addr: int) -> Optional[tuple[str, int, str]]:
        """(function, offset, path) for ``addr`` in process ``tgid``; (None-named) when unknown."""
        m = self.mapping(tgid, addr)
        if m is None:
            symbols = self.jit.get(tgid)
            found = symbols.lookup(addr) if symbols is not None else None
            return (found[0], found[1], f"/tmp/perf-{tgid}.map") if found is not None else None
        if m.path.startswith("["):  # [vdso], [uprobes] (a uretprobe's trampoline)
            return m.path, addr - m.start, m.path
        shown = backslashed(m.path)  # (a path is bytes)
        files = self._symbol_files(m.path)
        if not files:
            return None
        try:
            vaddr = files[-1].offset_to_vaddr(addr - m.start + m.offset)
        except (DebugInfoError, ProbectlError, OSError, ValueError):
            return None
        for elf in files:
            try:
                sym = elf.symbol_at(vaddr)
            except (DebugInfoError, ProbectlError, OSError, ValueError):
                continue
            if sym is not None:
                return (self._shown_name(sym.name) if self.demangle else sym.name), vaddr - sym.value, shown
        return None

    def _shown_name(self, name: str) -> str:
        """A symbol's name as stacks show it: a C++ or Rust one demangled and without its parameter
        list, as perf script shows it (``shop::Cart::add``, ``shop::Cart::scale<int>``, a Rust path
        without its hash), so that a flame graph's frame is the function; as it is when it demangles
        to nothing."""
        shown = self._demangled.get(name)
        if shown is None:
            from ..debuginfo.demangle import demangle, is_mangled, without_parameters

            full = demangle(name) if is_mangled(name) else None
            shown = self._demangled[name] = without_parameters(full) if full is not None else name
        return shown


def debug_symbol_file(elf: Any) -> Any:
    """The separate debug file of ``elf`` with a ``.symtab``, opened: by build-id or
    ``.gnu_debuglink`` on this machine, else from the debuginfod servers of ``$DEBUGINFOD_URLS``
    (as ``add`` finds DWARF; a container's file, named through ``/proc/PID/root``, in its tree first);
    None when there is none."""
    from ..debuginfo.elf import ElfFile, find_debug_file
    from ..target.process import root_of

    try:
        path, _tried = find_debug_file(elf, root=root_of(Path(elf.path)))
        if path is None:
            from ..target.debuginfod import fetch_for_binary

            fetched = fetch_for_binary(elf.path)
            path = fetched.path if fetched is not None else None
        if path is None:
            return None
        debug = ElfFile(path)
    except (ProbectlError, OSError):
        return None
    if debug.section(".symtab") is None:
        debug.close()
        return None
    return debug


class Symbolizer:
    """Cached address → name for both spaces (``tgid`` None or 0 for the kernel)."""

    def __init__(self, source: Source):
        self.source = source
        self._cache: dict[tuple[int, int], tuple[str, int, str]] = {}

    def resolve(self, tgid: int, addr: int, kernel: bool) -> tuple[str, int, str]:
        """(name, offset, dso); name is ``[unknown]`` when nothing knows the address."""
        key = (0 if kernel else tgid, addr)
        hit = self._cache.get(key)
        if hit is not None:
            return hit
        if kernel:
            found = self.source.kernel_symbols().lookup(addr)
            out = (found[0], found[1], "[kernel.kallsyms]") if found else (UNKNOWN_SYMBOL, 0, "[kernel.kallsyms]")
        else:
            ufound = self.source.user_symbols().lookup(tgid, addr)
            if ufound:
                out = ufound
            else:
                m = self.source.user_symbols().mapping(tgid, addr)
                out = (UNKNOWN_SYMBOL, 0, backslashed(m.path) if m else UNKNOWN_SYMBOL)
        self._cache[key] = out
        return out

    def name(self, tgid: int, addr: int, kernel: bool) -> str:
        """``func+0x1c`` (or ``func``, or ``[unknown]``)."""
        n, off, _ = self.resolve(tgid, addr, kernel)
        return symbol_offset(n, off)


def is_kernel_address(addr: int) -> bool:
    return addr >= 0xFFFF800000000000


def symbol_offset(name: str, offset: int) -> str:
    """``func+0x1c`` (``func`` at offset 0; ``[unknown]`` as it is)."""
    return f"{name}+0x{offset:x}" if offset and name != UNKNOWN_SYMBOL else name
