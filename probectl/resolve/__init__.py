"""ProbeSpec + target → ProbePoints: where to put each probe and the kernel fetch text of each argument.

The :class:`Resolver` decides where the answer comes from — symbols (ELF, or kallsyms for the running
kernel), DWARF (:mod:`.dwarf`, perf's probe-finder) or, for kprobes without DWARF, BTF (:mod:`.btf`) —
renders raw fetch arguments, reads SDT probes from their notes (:mod:`.sdt`), and drops kprobe places
the kernel would refuse (:mod:`.kprobe_rules`, :mod:`.boundary`). Debug files not found locally come
from debuginfod (:mod:`probectl.target.debuginfod`). C expressions become fetch text in :mod:`.dwarf_fetch` and :mod:`.btf_fetch`, which
find the variable and its place and hand the member chain to the one walker, :mod:`.fetch`;
:mod:`.render` writes places as the kernel's fetch syntax. :mod:`.points` holds what comes out.
"""
from __future__ import annotations

import fnmatch
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Literal, Optional, overload

from .. import spec as S
from ..dataclass import dataclass, field, replace
from ..debuginfo.elf import ElfFile, ElfSymbol
from ..errors import DebugInfoError, ProbePointNotFound, ProbeSemanticError, ResolveError, TargetError, did_you_mean
from ..target import Target
from .fetch_options import FetchOptions
from .points import ProbePoint, ResolvedArg, is_untyped_retval

if TYPE_CHECKING:
    from ..debuginfo.btf import Btf
    from ..debuginfo.kallsyms import Kallsyms
    from .cxx import CxxFunction
    from .dwarf import SourceResolver
    from .kprobe_rules import KprobeRules

# The DWARF side (.dwarf, debuginfo.dwarf) is imported when a definition
# needs it: probes by symbol with register or BTF arguments do not pay for it. So are kallsyms, the
# instruction decoder and difflib, which only some definitions (or errors) need, and the kprobe
# rules, which uprobes do not.

# perf's filler for an argument that exists at some places of a multi-place event but not at others.
MISSING_ARG_MAGIC = 0xDEADE12D
# perf's MAX_PROBES: one definition that expands to more places than this is most likely a glob
# wider than meant (a '*' on libc makes ~2,000 probes, on a vmlinux ~35,000); perf stops there too.
MAX_POINTS = 128
# A trailing "@VERSION" that is a symbol version (GLIBC_2.2.5), not a source file.
_SYMBOL_VERSION = re.compile(r"[A-Z][A-Z0-9_]*_[0-9][0-9.]*")


ADD_LIMIT_HINT = ("narrow the glob or the definition (perf stops there too); 'probectl add --max-probes N' "
                  "raises the limit, 0 lifts it")


def check_place_count(text: str, count: int, limit: Optional[int] = MAX_POINTS, hint: str = ADD_LIMIT_HINT) -> None:
    """ResolveError when ``text`` (a definition or a probe point) matches more than ``limit`` places."""
    if limit is not None and count > limit:
        raise ResolveError(f"'{text}' matches {count:,} places, more than {limit}", hint=hint)


@dataclass
class Resolver:
    """Resolves ProbeSpecs against one target; ``warnings`` collects perf-style notices for the user."""

    target: Target
    options: FetchOptions = FetchOptions()  # what the kernel's fetch arguments can express
    max_points: Optional[int] = MAX_POINTS  # places one definition may expand to (None: no limit)
    use_btf: bool = False  # kprobe arguments from BTF even when a vmlinux with DWARF is there
    source_dir: str | None = None  # where to find sources for lazy patterns
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # which debug information was used, for the user
    _btf: "Btf | None" = None
    _elf: ElfFile | None = None
    _kallsyms: "Kallsyms | None" = None
    _source_resolver: "SourceResolver | None" = None
    _kprobe_rules: "KprobeRules | Literal[False] | None" = None
    _is_go: bool | None = None
    _cxx_functions: "list[CxxFunction] | None" = None

    @property
    def elf(self) -> ElfFile:
        if self._elf is None:
            if self.target.path is None:  # (the running kernel without its vmlinux: kallsyms answers)
                raise TargetError("the kernel's ELF symbols need its vmlinux", hint="give one with -k/--vmlinux")
            self._elf = ElfFile(self.target.path)
        return self._elf

    @property
    def is_go_program(self) -> bool:
        """The target is a program linked by the Go toolchain, whose stacks move."""
        if self._is_go is None:
            from ..debuginfo.languages import is_go_program

            self._is_go = is_go_program(self.elf)
        return self._is_go

    def go_function_read_as_file(self, source: Optional[str], function: Optional[str]) -> bool:
        """A Go function's name that perf's grammar read as a source file (:func:`.gonames.is_function_not_file`)."""
        if (function is not None or not source or "/" in source or not self.target.is_uprobe
                or self.target.path is None or not self.is_go_program):
            return False
        found = self.source(required=False)
        if found is None:
            return False
        from .gonames import is_function_not_file

        return is_function_not_file(self.elf, found.debuginfo, source)

    def as_named(self, probe: S.ProbeSpec) -> S.ProbeSpec:
        """``probe`` with its point as the program names it (a Go function read as a file: the
        function), which its event is named from (``main.work:3``: ``main_work_L3``)."""
        point = self.as_go_function(probe.point)
        return probe if point is probe.point else replace(probe, point=point)

    def as_go_function(self, point: S.PointSpec) -> S.PointSpec:
        """``point`` with a Go function read as a source file read as the function."""
        if point.address is None and self.go_function_read_as_file(point.source, point.function):
            return replace(point, function=point.source, source=None)
        return point

    def source_points(self, point: S.PointSpec) -> list[S.PointSpec]:
        """The point as the DWARF side finds it: a C++ name becomes the mangled symbol of each
        function it names (``vars``), a Go function read as a file the function, any other point
        stays as it is."""
        point = self.as_go_function(point)
        named = self._go_names(point)
        if named is not None:
            return [replace(point, function=name) for name in named]
        if not self._names_cxx(point):
            return [point]
        from .cxx import cxx_points

        return [pt for _fn, pt in cxx_points(self, point, point.text)]

    def _go_names(self, point: S.PointSpec) -> Optional[list[str]]:
        """A Go program's function named with its type arguments, or a generic one without them: the
        names to look it up by (:func:`.gonames.go_names`); None for any other point."""
        if (point.function is None or point.address is not None or point.sdt is not None or not self.target.is_uprobe
                or self.target.path is None or not self.is_go_program):
            return None
        from .gonames import go_names

        return go_names(self.elf, point.function)

    def _names_rust_main(self, point: S.PointSpec) -> bool:
        """The point is a Rust program's ``main`` (perf and ``main:1`` take the runtime's C main)."""
        if not (self.target.is_uprobe and point.function == "main" and point.source is None and point.sdt is None):
            return False
        from ..debuginfo.languages import is_rust_program

        return is_rust_program(self.elf)

    def _names_cxx(self, point: S.PointSpec) -> bool:
        """The point names C++ functions by their demangled names (not a symbol of the target)."""
        from .cxx import names_cxx_function

        name = point.function
        return (self.target.is_uprobe and name is not None and point.address is None and point.sdt is None
                and names_cxx_function(name) and not self.is_go_program
                # (a parameter list or a space is in no symbol: not looked for, which with a '*' in
                # "char const*" read as a glob would decode every symbol of a large library)
                and ("(" in name or " " in name or not self.elf.find_functions(name)))

    @property
    def kallsyms(self) -> "Kallsyms":
        if self._kallsyms is None:
            from ..debuginfo.kallsyms import Kallsyms

            self._kallsyms = Kallsyms()
        return self._kallsyms

    def resolve(self, probe: S.ProbeSpec) -> list[ProbePoint]:
        """All probe points of one definition (several for globs, static duplicates, inline
        instances or lines the compiler split)."""
        points = self._resolve(_with_symbol_version(probe))
        self._check_count(probe.text, len(points))
        if self.target.is_uprobe and probe.point.sdt is None and self.is_go_program:
            from .goentry import names_go_entry, past_stack_checks

            if names_go_entry(probe.point):
                points = past_stack_checks(self, points, probe.point.text)
            points = [replace(p, qualified_name=p.function) for p in points]
        if self.target.is_uprobe or self.target.path is None:
            return points
        return self._allowed_kprobes(points)

    def _check_count(self, text: str, count: int) -> None:
        """The limit on the places of one definition, checked as soon as they are counted (before the
        work per place: arguments resolved 35,000 times for a '*' on a vmlinux take minutes)."""
        check_place_count(text, count, self.max_points)

    def kprobe_rules(self) -> "KprobeRules | Literal[False]":
        """The kernel file's kprobe rules (False: the file is no kernel), read once."""
        if self._kprobe_rules is None:
            from .kprobe_rules import KprobeRules

            self._kprobe_rules = KprobeRules.from_vmlinux(self.elf) or False
        return self._kprobe_rules

    def _allowed_kprobes(self, points: list[ProbePoint]) -> list[ProbePoint]:
        """Drop the places the kernel would refuse (perf: "... is blacklisted function, skip it."),
        with a warning each; when none is left, the first reason is the error."""
        rules = self.kprobe_rules()
        if not rules:
            return points
        allowed, refused = [], []
        for point in points:
            sym = self.elf.symbol_at(point.address)
            start, size, name = (sym.value, sym.size, sym.name) if sym else (point.address, 0, point.function)
            try:
                rules.check(point.address, name, start, size)
                allowed.append(point)
            except ResolveError as err:
                refused.append(err)
        if not allowed:
            raise refused[0]
        self.warnings.extend(f"{err.message}; skipped it" for err in refused)
        return allowed

    def _resolve(self, probe: S.ProbeSpec) -> list[ProbePoint]:
        if probe.point.source is not None and probe.point.function is None:
            probe = replace(probe, point=self.as_go_function(probe.point))
        named = self._go_names(probe.point)
        if named is not None:
            # (a line of a generic function is a line of each instantiation: found from each of them)
            found: dict[int, ProbePoint] = {}
            for go_name in named:
                for p in self._resolve(replace(probe, point=replace(probe.point, function=go_name))):
                    found.setdefault(p.address, p)
            return list(found.values())
        if probe.point.is_return and self.target.is_uprobe and self.is_go_program:
            from .goreturn import resolve_go_returns

            return resolve_go_returns(self, probe)
        if self._names_cxx(probe.point):
            from .cxx import resolve_cxx

            return resolve_cxx(self, probe)
        if self._names_rust_main(probe.point):
            from .cxx import rust_main

            main = rust_main(self)
            if main is not None:
                self.notes.append(f"'main' of a Rust program is its own, {main.name} (the C main is the Rust "
                                  "runtime's: probe it by its address)")
                points = self._resolve(replace(probe, point=replace(probe.point, function=main.mangled)))
                return [replace(p, qualified_name=main.name) for p in points]
        name = probe.point.function
        if self.target.is_uprobe and name is not None and probe.point.address is None and name[:1] in ("_", "$"):
            from .cxx import check_mangled_name

            check_mangled_name(self, name)
        if probe.point.sdt is not None:
            from .sdt import resolve_sdt_points

            return resolve_sdt_points(self, probe)
        if probe.needs_dwarf:
            if self.btf_describes(probe.point):
                return self._resolve_btf(probe)
            return self._resolve_source(probe, self.source(required=True))
        if self._glob_of_functions_with_dwarf(probe.point):
            # A glob means the functions the program's DWARF defines, as perf takes it there (statics
            # and inlined copies included), not the symbols only the toolchain's start files add
            # (_init, _start, frame_dummy...); without DWARF, the function symbols it matches.
            source = self.source(required=False)
            if source is not None:
                return self._resolve_source(probe, source)
        try:
            sites = self.symbol_sites(probe.point, at_symbol=any(_uses_argn(a.expr) for a in probe.args))
        except ProbePointNotFound:
            # Names that only DWARF knows: functions that exist only inlined, or without a symbol.
            source = self.source(required=False) if probe.point.address is None else None
            if source is None:
                raise
            return self._resolve_source(probe, source)
        self._check_count(probe.text, len(sites))
        if _wants_retval_type(probe) and self.btf_describes(probe.point):
            return self._resolve_btf(probe)
        retval_source = self.source(required=False) if _wants_retval_type(probe) else None
        points = []
        for function, address, offset in sites:
            at_entry = offset == 0 and not probe.point.is_return
            args = []
            for arg in probe.args:
                resolved = self.render_arg(arg, address, at_entry)
                if retval_source is not None and is_untyped_retval(arg):
                    resolved = replace(resolved, type=self._retval_type(retval_source, address))
                args.append(resolved)
            points.append(
                ProbePoint(
                    function=function,
                    offset=offset,
                    address=address,
                    place=self.place(function, address, offset),
                    is_return=probe.point.is_return,
                    args=tuple(args),
                )
            )
        return points

    def _glob_of_functions_with_dwarf(self, point: S.PointSpec) -> bool:
        """A user binary's function glob, placed by nothing else (no address, file, line or offset)."""
        from ..debuginfo.dwarf.die import is_glob

        return (self.target.is_uprobe and self.target.path is not None and point.function is not None
                and is_glob(point.function) and point.address is None and point.source is None
                and point.line is None and point.lazy is None and not point.offset)

    # -- BTF (kernels without DWARF) ---------------------------------------------------------

    def btf_describes(self, point: S.PointSpec) -> bool:
        """Kprobes at a function's entry or return take their C arguments from BTF when there is no
        vmlinux with DWARF (or when asked to with use_btf)."""
        pt = point
        if self.target.is_uprobe or not (self.use_btf or self.target.path is None):
            return False
        return pt.function is not None and pt.source is None and pt.line is None and pt.lazy is None

    @property
    def btf(self) -> "Btf":
        if self._btf is None:
            from ..debuginfo.btf import load_kernel_btf, load_module_btf
            from ..debuginfo.btf.format import KERNEL_BTF

            if self.target.module is not None and self.target.path is not None:
                _check_module_release(self.target.module, self.target.path)
                self._btf = load_module_btf(self.target.module, self.target.path)
                where = f"{self._btf.source} on {KERNEL_BTF}"
            else:
                self._btf = load_kernel_btf(self.target.path if self.target.path is not None else None)
                where = f"the .BTF section of {self.target.path}" if self.target.path else str(KERNEL_BTF)
            self.notes.append(f"C arguments from BTF ({where})")
        return self._btf

    def _resolve_btf(self, probe: S.ProbeSpec) -> list[ProbePoint]:
        from .btf import resolve_btf_points

        return resolve_btf_points(self, probe)

    @overload
    def source(self, required: Literal[True]) -> "SourceResolver": ...
    @overload
    def source(self, required: bool) -> "SourceResolver | None": ...

    def source(self, required: bool) -> "SourceResolver | None":
        """The DWARF resolver of the target (None when it has no debug info and ``required`` is False).

        Debug files not found locally are fetched from debuginfod (``$DEBUGINFOD_URLS``): a user
        binary's by its build-id, and when a definition needs it, the running kernel's vmlinux."""
        if self._source_resolver is None:
            path = self.target.path
            if path is None:
                if not required:
                    return None
                path = self._fetch_running_vmlinux()
            from ..debuginfo.dwarf import DebugInfo
            from .dwarf import SourceResolver

            try:
                debuginfo = DebugInfo.open(path, root=self.target.root, binary_elf=self.elf)
            except DebugInfoError as local:
                debuginfo = self._debuginfo_from_servers(local, required)
                if debuginfo is None:
                    return None
            self._source_resolver = SourceResolver(
                debuginfo, self.elf, is_uprobe=self.target.is_uprobe,
                options=self.options, source_dir=self.source_dir, warn=self.warnings.append,
                sources_of=self.target.path, command=self.command)
        return self._source_resolver

    def _debuginfo_from_servers(self, local: DebugInfoError, required: bool):
        """The DWARF of the target from debuginfod after ``local`` (no local debug file); None, or
        when ``required`` an error saying where it was looked for locally and what each server answered."""
        from ..debuginfo.dwarf import DebugInfo
        from ..target.debuginfod import fetch_for_binary, fetch_note

        assert self.target.path is not None
        try:
            fetched = fetch_for_binary(self.target.path)
        except DebugInfoError as remote:
            if not required:
                return None
            raise DebugInfoError(f"{local.message}\n{remote.message}", hint=remote.hint) from None
        if fetched is None:
            if required:
                raise DebugInfoError(local.message, hint=f"{local.hint}; or set DEBUGINFOD_URLS to debuginfod "
                                                         "servers that have it")
            return None
        self.notes.append(fetch_note(fetched, str(self.target.path)))
        return DebugInfo.open(self.target.path, debug_file=fetched.path)

    def _fetch_running_vmlinux(self) -> Path:
        """Describe the running kernel by its vmlinux from debuginfod (its path), or say that there is none."""
        from ..target.debuginfod import fetch_note
        from ..target.kernel import fetch_running_vmlinux

        fetched = fetch_running_vmlinux()
        if fetched is None:
            raise DebugInfoError(
                "kernel source-level probes need the kernel's debug information, and no vmlinux "
                "matching the running kernel was found",
                hint="install the kernel's debug package (Debian: linux-image-$(uname -r)-dbg), give one with "
                     "-k/--vmlinux, or set DEBUGINFOD_URLS to servers that have it")
        self.notes.append(fetch_note(fetched, "the running kernel"))
        self.target = replace(self.target, path=fetched.path)
        self._elf = None
        return fetched.path

    def _retval_type(self, source: "SourceResolver", address: int) -> str:
        from .dwarf import SourceSite

        entry = self._code_entry(address)  # (DWARF's function begins after a patchable entry)
        fn = source.debuginfo.function_at(entry)
        if fn is None or fn.entry != entry:
            return ""
        return source.retval_type(SourceSite(address, fn, True))

    def _resolve_source(self, probe: S.ProbeSpec, source: "SourceResolver") -> list[ProbePoint]:
        from ..debuginfo.dwarf.die import is_glob
        from ..errors import ValueTooWideError, VariableNotFound, VariableUnavailable

        point = probe.point
        wants_variables = any(_needs_debuginfo(arg) for arg in probe.args)
        if point.function is not None and is_glob(point.function) and self.max_points is not None:
            self._check_count(probe.text, source.debuginfo.count_functions(point.function))
        sites = source.sites(point, wants_variables)
        self._check_count(probe.text, len(sites))
        per_site: list[list[ResolvedArg | VariableUnavailable | VariableNotFound]] = []
        for site in sites:
            row: list[ResolvedArg | VariableUnavailable | VariableNotFound] = []
            for arg in probe.args:
                if not _needs_debuginfo(arg):
                    resolved = self.render_arg(arg, site.address, site.at_entry and not point.is_return)
                    if is_untyped_retval(arg):
                        resolved = replace(resolved, type=source.retval_type(site))
                    row.append(resolved)
                    continue
                for var in source.variable_args(site, arg, point):
                    try:
                        found = source.fetch(site, var.variable, var.cast, arg.user, point)
                    except VariableUnavailable as missing:
                        row.append(missing)
                        continue
                    except VariableNotFound as missing:
                        # (the hint names the point as written: the DWARF's name of a C++ method, 'get',
                        # is every class's)
                        row.append(VariableNotFound(missing.message,
                                                    hint="list the variables there: "
                                                    + self.command("vars", point.text)))
                        continue
                    except ValueTooWideError as wide:
                        if not isinstance(arg.expr, S.SpecialVar):
                            raise
                        self.warnings.append(f"{wide.message}: ${arg.expr.name} leaves it out (fetch its members)")
                        continue
                    row.append(ResolvedArg(fetch=found.fetch, type=found.type,
                                           name=var.name or found.default_name, text=arg.text,
                                           named=bool(var.name), parts=found.parts))
            per_site.append(row)
        points = []
        for site, args in zip(sites, self._fill_missing(per_site, sites)):
            fn = site.function
            offset = site.address - fn.entry if fn.entry is not None and site.address >= fn.entry else 0
            name = fn.name
            if point.address is not None:  # named and placed as the address without variables is
                name, offset = f"abs_{point.address:x}", 0
            points.append(ProbePoint(function=name, offset=offset, address=site.address,
                                     place=self.place(name, site.address, offset),
                                     is_return=point.is_return, args=tuple(args), line=site.line))
        return points

    def command(self, verb: str, text: str) -> str:
        """The probectl command of a hint that runs ``verb`` (vars, lines) on ``text`` (a point as the
        user wrote it) of this target, as it can be pasted to a shell."""
        import shlex

        target = self.target
        where = (f"-x {shlex.quote(str(target.path))} " if target.is_uprobe else
                 f"-m {shlex.quote(target.module)} " if target.module else
                 f"-k {shlex.quote(str(target.path))} " if target.path is not None else "")
        return f"probectl {verb} {where}{shlex.quote(text)}"

    def _fill_missing(self, per_site, sites) -> list[list[ResolvedArg]]:
        """An argument missing at some points of a multi-point event gets perf's magic immediate
        there (with a warning); missing everywhere, it is an error that says where it is available."""
        from ..errors import VariableNotFound, VariableUnavailable

        width = max((len(row) for row in per_site), default=0)
        if any(len(row) != width for row in per_site):
            raise ResolveError("the variables ($vars/$params) differ between the places of this definition",
                               hint="name the variables explicitly")
        for col in range(width):
            column = [row[col] for row in per_site]
            present = [c for c in column if isinstance(c, ResolvedArg)]
            if not present:
                raise next((c for c in column if isinstance(c, VariableUnavailable)), column[0])
            for row, site in zip(per_site, sites):
                missing = row[col]
                if isinstance(missing, (VariableUnavailable, VariableNotFound)):
                    self.warnings.append(
                        f"{missing.message}; that event records {MISSING_ARG_MAGIC:#x} for it at 0x{site.address:x}")
                    magic = f"\\{MISSING_ARG_MAGIC:#x}"
                    # (an array, a counted string's head, is read from memory: the kernel refuses an
                    # immediate of an array type, and takes the memory at the magic address)
                    row[col] = replace(present[0], fetch=magic,
                                       parts=tuple(replace(p, fetch=f"+0({magic})" if "[" in p.type else magic)
                                                   for p in present[0].parts))
        return per_site

    # -- places ------------------------------------------------------------------------------

    def symbol_sites(self, point: S.PointSpec, at_symbol: bool = False) -> list[tuple[str, int, int]]:
        """(function name, address, offset) for a point given by symbol or absolute address.
        ``at_symbol``: count an offset from the symbol even where the function's code begins after a
        patchable entry (``$argN``, which the kernel reads only at the symbol: its function entry)."""
        if point.address is not None:
            self._check_address(point.address)
            return [(f"abs_{point.address:x}", point.address, 0)]
        if self.target.path is not None:
            symbols = self._elf_functions(point)
        else:
            symbols = self._kallsyms_functions(point)
        offset = point.offset or 0
        if offset:  # (each offset is checked against the instructions of its function: count first)
            self._check_count(point.text, len(symbols))
        sites = []
        for name, address, size in symbols:
            if not point.is_return and not at_symbol:  # (a return probe is at the symbol, where calls land)
                code = self._code_entry(address)
                address, size = code, size - (code - address) if size else 0
            if offset:
                from .boundary import check_function_offset

                check_function_offset(self.elf if self.target.path is not None else None, name, address, size,
                                      offset, self.warnings.append)
            sites.append((name, address + offset, offset))
        return sites

    def _code_entry(self, address: int) -> int:
        """Where the code of the kernel function at ``address`` begins: after the NOPs of its patchable
        entry on a machine whose ftrace patches those (arm64, in the functions the vmlinux lists as
        ftrace sites), as its DWARF entry does and perf counts FUNC+OFF; ``address`` elsewhere."""
        nop = self.target.arch.patchable_entry_nop
        if nop is None or self.target.is_uprobe or self.target.path is None or self.elf.type == "REL":
            return address
        rules = self.kprobe_rules()
        if not rules or address not in rules.ftrace_sites:
            return address
        from ..arch.aarch64 import MAX_PATCHABLE_NOPS
        from .boundary import code_bytes

        code = code_bytes(self.elf, address, len(nop) * MAX_PATCHABLE_NOPS, "read a function's patchable entry")
        entry = address
        while code[entry - address:entry - address + len(nop)] == nop:
            entry += len(nop)
        return entry

    def _check_address(self, address: int) -> None:
        """``0xADDR`` inside a function of the target file must start an instruction, as FUNC+OFFS must."""
        if self.target.path is None or self.elf.type == "REL":
            return
        sym = self.elf.symbol_at(address)
        if sym is not None and sym.value < address:
            from .boundary import check_function_offset

            check_function_offset(self.elf, sym.name, sym.value, sym.size, address - sym.value, self.warnings.append)

    def _module_text_only(self, name: str, symbols: list[ElfSymbol]) -> list[ElfSymbol]:
        text = self.elf.section(".text")
        kept = [s for s in symbols if text is not None and s.shndx == text.index]
        if not kept:
            where = self.elf.sections[symbols[0].shndx].name if symbols[0].shndx < len(self.elf.sections) else "?"
            raise ResolveError(f"{name} is in the module's {where} section; only its .text functions can be probed",
                               hint="init and exit code is freed once the module is loaded")
        return kept

    def _elf_functions(self, point: S.PointSpec) -> list[tuple[str, int, int]]:
        """Functions from the symbol table of the target file (a user binary, or an offline vmlinux)."""
        name = point.function or ""
        if point.source:
            raise DebugInfoError(f"'{point.text}' names a source file, which needs debug information",
                                 hint="install the binary's debug symbols (or build it with -g)")
        symbols = self.elf.find_functions(name)
        if symbols and self.elf.type == "REL":
            symbols = self._module_text_only(name, symbols)
        if not symbols:
            raise ProbePointNotFound(point.text or name,
                                     hint=self._function_hint(name, [s.name for s in self.elf.functions()]))
        if "@" not in name and any(s.version for s in symbols):
            # An unversioned name means the default version, as the dynamic linker binds it.
            symbols = [s for s in symbols if not s.version or s.default_version] or symbols
        chosen: dict[int, ElfSymbol] = {}
        for sym in symbols:
            best = chosen.get(sym.value)
            if best is None or _alias_rank(sym, name) < _alias_rank(best, name):
                chosen[sym.value] = sym
        for sym in chosen.values():
            if sym.type == "IFUNC":
                self.warnings.append(
                    f"The probe function ({sym.name}) is a GNU indirect function.\n"
                    "Consider identifying the final function used at run time and set the probe directly on that."
                )
        return [(s.name, s.value, s.size) for s in sorted(chosen.values(), key=lambda s: s.value)]

    def _kallsyms_functions(self, point: S.PointSpec) -> list[tuple[str, int, int]]:
        """Functions of the running kernel, when there is no vmlinux to read."""
        if point.source:
            raise DebugInfoError(f"'{point.text}' names a source file, which needs kernel debug information",
                                 hint="give a vmlinux with debug information (-k), e.g. from linux-image-*-dbg")
        ksyms = self.kallsyms
        if ksyms.addresses_hidden:
            raise TargetError("kernel symbol addresses are hidden in /proc/kallsyms",
                              hint="run as root, or check /proc/sys/kernel/kptr_restrict")
        found = ksyms.find_functions(point.function or "", module=self.target.module)
        if not found:
            raise ProbePointNotFound(point.text or point.function or "",
                                     hint=self._function_hint(point.function or "",
                                                        [s.name for s in ksyms.symbols if s.is_function]))
        unique: dict[int, str] = {}
        for sym in found:
            unique.setdefault(sym.address, sym.name)
        return [(name, addr, 0) for addr, name in sorted(unique.items())]

    def place(self, function: str, address: int, offset: int) -> str:
        """The kernel's place text of a probe: ``/path:0xFILEOFF`` (uprobe) or ``[MOD:]SYM+OFF``."""
        if self.target.is_uprobe:
            return f"{self.target.path}:0x{self.elf.vaddr_to_offset(address):x}"
        if function.startswith("abs_"):
            return f"0x{address:x}"
        if self.target.path is not None:
            return self._vmlinux_place(function, address, offset)
        names = [s for s in self.kallsyms.find_functions(function) if s.module == (self.target.module or "")]
        if len(names) > 1:
            # A name the kernel cannot resolve uniquely: anchor on _text instead.
            text = self.kallsyms.find_functions("_text")
            if text:
                return f"_text+{address - text[0].address}"
        prefix = f"{self.target.module}:" if self.target.module else ""
        return f"{prefix}{function}+{offset}"

    def _vmlinux_place(self, function: str, address: int, offset: int) -> str:
        """``SYMBOL+OFF`` with the ELF symbol at the address (``.isra``/``.constprop`` names included);
        a name that is not unique in the kernel is anchored on ``_text`` instead."""
        sym = self._text_symbol_at(address)
        name, off = (sym.name, address - sym.value) if sym is not None else (function, offset)
        if len(self.elf.find_functions(name)) > 1:
            text = self.elf.find_symbols("_text")
            if text:
                return f"_text+{address - text[0].value}"
        prefix = f"{self.target.module}:" if self.target.module else ""
        return f"{prefix}{name}+{off}"

    def _text_symbol_at(self, address: int) -> ElfSymbol | None:
        """The function at an address; in a module (a relocatable object every section of which starts
        at 0) only .text is addressable, so only its symbols count."""
        if self.elf.type != "REL":
            return self.elf.symbol_at(address)
        text = self.elf.section(".text")
        found = [s for s in self.elf.functions()
                 if text is not None and s.shndx == text.index and s.value <= address < s.value + max(s.size, 1)]
        return min(found, key=lambda s: (s.bind != "GLOBAL", s.name)) if found else None

    @staticmethod
    def _function_hint(name: str, candidates: list[str]) -> str:
        return did_you_mean(name, candidates, sep=", ") or "list the probe-able functions with 'probectl funcs'"

    # -- arguments ---------------------------------------------------------------------------

    def render_arg(self, arg: S.ArgSpec, address: int, at_entry: bool) -> ResolvedArg:
        """A fetch argument that needs no debug information (registers, $retval, $argN, @sym...).
        ``@user`` on a kprobe makes every dereference a user-memory one (``+u0(%si)``), which a
        string type then reads as a user string; uprobes read user memory anyway."""
        user = arg.user and not self.target.is_uprobe
        fetch = self._render_fetch(arg.expr, address, at_entry, user)
        if (isinstance(arg.expr, S.SpecialVar) and arg.expr.name == "retval" and arg.type is not None
                and arg.type.base in ("string", "ustring")):
            # A string is read from memory: $retval:string means the string $retval points at
            # (the kernel refuses the bare form with "String accepts only memory argument").
            fetch = f"+0({fetch})"
        typ = ""
        if arg.type is not None:
            typ = arg.type.text
            if arg.type.base in ("s", "u", "x") and arg.type.bits is None:
                typ = f"{arg.type.base}64"  # registers and raw fetches are machine words
        return ResolvedArg(fetch=fetch, type=typ, name=arg.name or "", text=arg.text, named=bool(arg.name))

    def _render_fetch(self, expr, address: int, at_entry: bool, user: bool = False) -> str:
        if isinstance(expr, S.Register):
            return f"%{expr.name}"
        if isinstance(expr, S.SpecialVar):
            if expr.name == "stack":
                return "$stack" if expr.index is None else f"$stack{expr.index}"
            if expr.name == "arg" and expr.index is not None:  # (the parser gives $arg a number)
                return self._render_argn(expr.index, at_entry)
            return f"${expr.name}"
        if isinstance(expr, S.SymbolRef):
            return self._render_symbol(expr, address)
        if isinstance(expr, S.AddressRef):
            return f"@{'+' if expr.relative else ''}0x{expr.address:x}"
        if isinstance(expr, S.Deref):
            sign = "-" if expr.offset < 0 else "+"
            u = "u" if expr.user or user else ""
            return f"{sign}{u}{abs(expr.offset)}({self._render_fetch(expr.inner, address, at_entry, user)})"
        if isinstance(expr, S.Immediate):
            if isinstance(expr.value, str):
                return '\\"' + expr.value + '"'
            return f"\\{expr.value}"
        if isinstance(expr, S.Variable):
            raise ResolveError(f"'{S.render_expr(expr)}': a C variable inside a raw fetch is not supported",
                               hint="fetch the variable on its own, or use registers (+8(%di))")
        raise ProbeSemanticError(f"unsupported argument {expr!r}")

    def _render_argn(self, index: int, at_entry: bool) -> str:
        """$argN: kprobes fetch it themselves; uprobes cannot, so use the calling convention's
        argument register of the probed file's machine."""
        if not self.target.is_uprobe:
            return f"$arg{index}"
        if not at_entry:
            raise ResolveError(f"$arg{index} is only known at a function entry",
                               hint="probe the function itself (no +OFFS, no %return), or fetch a register")
        arch = self.target.arch
        registers = arch.argument_registers
        if not 1 <= index <= len(registers):
            stack = arch.register_name(arch.stack_pointer)
            raise ResolveError(f"$arg{index} is not passed in a register on {arch.name} "
                               f"(only $arg1..$arg{len(registers)} are)",
                               hint=f"read it from the stack, e.g. +{8 * (index - len(registers))}({stack})")
        name = arch.register_name(registers[index - 1])
        assert name is not None  # (every argument register has a name)
        return name

    def _render_symbol(self, ref: S.SymbolRef, address: int) -> str:
        """@SYM: kprobes take it as is; uprobes need '@+OFFSET', relative to the probed file's mapping."""
        if not self.target.is_uprobe:
            sign = "-" if ref.offset < 0 else "+"
            return f"@{ref.name}{sign}{abs(ref.offset)}"
        matches = [s for s in self.elf.symbols() if s.name == ref.name and s.shndx != 0]
        if not matches:
            raise ResolveError(f"symbol '{ref.name}' not found in {self.target.path}",
                               hint=self._function_hint(ref.name, [s.name for s in self.elf.symbols()]))
        return self.file_offset_fetch(matches[0].value + ref.offset, address)

    def file_offset_fetch(self, vaddr: int, address: int) -> str:
        """The uprobe fetch of the memory at ``vaddr`` of the probed file, from a probe at ``address``:
        ``@+OFFSET``, which the kernel reads at (probe address - probe file offset) + OFFSET."""
        probe_delta = address - self.elf.vaddr_to_offset(address)
        return f"@+0x{vaddr - probe_delta:x}"


def _needs_debuginfo(arg: S.ArgSpec) -> bool:
    return arg.is_c_expr or (isinstance(arg.expr, S.SpecialVar) and arg.expr.name in ("params", "vars"))


def _uses_argn(expr) -> bool:
    """The fetch reads ``$argN`` (itself or through dereferences)."""
    while isinstance(expr, S.Deref):
        expr = expr.inner
    return isinstance(expr, S.SpecialVar) and expr.name == "arg"


def _wants_retval_type(probe: S.ProbeSpec) -> bool:
    return probe.point.is_return and any(is_untyped_retval(a) for a in probe.args)


def _with_symbol_version(probe: S.ProbeSpec) -> S.ProbeSpec:
    """Read ``FUNC@GLIBC_2.2.5`` as a symbol version, not a source file.

    perf wants ``malloc\\@GLIBC_2.2.5``; a version-shaped suffix cannot be a source file, so accept it bare.
    """
    pt = probe.point
    if not (pt.function and pt.source and _SYMBOL_VERSION.fullmatch(pt.source)):
        return probe
    if pt.line is not None or pt.lazy is not None:
        return probe
    point = replace(pt, function=f"{pt.function}@{pt.source}", source=None)
    return replace(probe, point=point)


def _alias_rank(sym: ElfSymbol, wanted: str) -> tuple:
    """Order aliases at one address: the name asked for, then global, default-version, fewer underscores."""
    exact = sym.name != wanted and sym.versioned_name != wanted
    glob_miss = not fnmatch.fnmatchcase(sym.name, wanted)
    return (exact and glob_miss, sym.bind != "GLOBAL", not sym.default_version,
            len(sym.name) - len(sym.name.lstrip("_")), sym.name)


def _check_module_release(name: str, path: Path) -> None:
    """A module's BTF is split BTF, completed by its kernel's: a module that is not loaded is read
    from its object file, which is only right when it was built for the running kernel."""
    from ..debuginfo.btf.format import KERNEL_BTF
    from ..target.kernel import module_release

    release = module_release(path)
    if (KERNEL_BTF.parent / name).is_file() or release is None or release == os.uname().release:
        return
    raise TargetError(f"{path} was built for kernel {release}, not for the running {os.uname().release}: "
                      "its BTF refers to the types of its own kernel's BTF",
                      hint="use --btf on the kernel the module is built for, or its debug information "
                           "(without --btf)")
