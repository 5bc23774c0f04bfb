"""Source-level resolution through DWARF (perf's probe-finder): probe points for functions, inline
instances, lines and lazy patterns, and fetch arguments for C expressions at each of them.

``resolve.Resolver`` decides when DWARF is needed; this module only turns a PointSpec into
SourceSites and ArgSpecs into ResolvedArgs with the debuginfo layer.
"""
from __future__ import annotations

from pathlib import Path
from typing import Callable, Optional

from .. import spec as S
from ..dataclass import dataclass
from ..debuginfo.dwarf import DebugInfo, Function
from ..debuginfo.dwarf.die import die_linkage_name, is_glob, tail_match
from ..debuginfo.dwarf.variables import best_scope
from ..debuginfo.elf import ElfFile, ElfSymbol
from ..errors import ProbePointNotFound, ProbeSemanticError, ResolveError, did_you_mean
from .dwarf_fetch import expand_variables, fetch_variable, retval_type
from .fetch_options import FetchOptions

# Line tables, lazy patterns, the instruction decoder and difflib are imported by the points and
# errors that use them: a probe at a function's entry needs none of them.


@dataclass(frozen=True)
class SourceSite:
    """One address a source-level point resolved to, with the function it belongs to."""

    address: int
    function: Function  # the matched function, or the instance (inline or out-of-line) the address is in
    at_entry: bool  # the address is the function's entry (for $argN)
    line: Optional[int] = None
    # The name of the scope to prefer there when the probe point named an alias (``malloc:12``:
    # ``__libc_malloc``, whose variables perf would give for ``__libc_malloc:12``), else None.
    scope_name: Optional[str] = None


def _is_cxx_symbol(name: Optional[str]) -> bool:
    """A name mangled as C++ (Itanium ``_Z``), not as Rust's legacy symbols are (which end with their
    hash, ``17h`` and 16 hex digits then ``E``: rustc writes their definitions without a declaration)."""
    if name is None or not name.startswith("_Z"):
        return False
    tail = name.split(".", 1)[0][-20:]  # (without a suffix gcc adds: .isra.0, .cold)
    return not (len(tail) == 20 and tail.startswith("17h") and tail.endswith("E")
                and all(c in "0123456789abcdef" for c in tail[3:19]))


@dataclass
class SourceResolver:
    """Resolves points and C arguments of one target's DWARF."""

    debuginfo: DebugInfo
    elf: ElfFile
    is_uprobe: bool
    # the probectl command of a hint (verb, point as written) on this target: Resolver.command
    command: Callable[[str, str], str]
    options: FetchOptions = FetchOptions()
    source_dir: Optional[str] = None
    warn: Callable[[str], None] = lambda message: None
    sources_of: Optional[Path] = None  # the binary whose sources debuginfod may send when not found here

    # (debuginfod's fetcher, made when a source file is first looked for: lines and lazy patterns
    # only; a probe at a function and its arguments need none, nor the debuginfod module)
    _fetch_source = None
    _fetch_source_made = False

    @property
    def fetch_source(self) -> Optional[Callable[[str], Path]]:
        """Gets a source file not on this machine from debuginfod (None: no server, or no build-id)."""
        if not self._fetch_source_made:
            if self.sources_of is not None:
                from ..target.debuginfod import source_fetcher

                self._fetch_source = source_fetcher(self.sources_of)
            self._fetch_source_made = True
        return self._fetch_source

    # -- points ---------------------------------------------------------------------------------

    def sites(self, point: S.PointSpec, wants_variables: bool) -> list[SourceSite]:
        """Every address of ``point``; ``wants_variables`` enables perf's prologue skip."""
        if point.sdt is not None:  # (add takes them apart, by their notes; vars and lines cannot)
            raise ProbeSemanticError(f"'{point.text}' names an SDT probe, which has no source place or C variables",
                                     "its arguments are the operands of its note: see 'probectl funcs --sdt'")
        if point.address is not None:
            return [self._address_site(point)]
        if point.function is None:
            return self._file_sites(point)
        functions = self._functions(point)
        sites: list[SourceSite] = []
        seen: set[int] = set()

        def add(site: SourceSite) -> None:
            if site.address not in seen:
                seen.add(site.address)
                sites.append(site)

        if point.line is not None:
            from ..debuginfo.dwarf.lines import function_line

            # (a function found at its symbol is the one definition of the name: no search by name)
            definitions = (self._functions_at_symbol(point) or self.debuginfo.find_functions(point.function, point.source)
                           or functions)
            for fn in definitions:
                for lp in function_line(self.debuginfo, fn, point.line):
                    add(SourceSite(lp.address, self._function_at(lp.address, fn), False, lp.line,
                                   self._alias_scope(point, fn)))
            if not sites:
                raise ProbePointNotFound(point.text, hint="that line has no code; see the probe-able lines: "
                                                          + self.command("lines", point.function))
            return sites
        for fn in functions:
            if point.lazy is not None:
                from ..debuginfo.dwarf.sources import lazy_points

                for lp in lazy_points(self.debuginfo, point.lazy, scope=fn, source_dir=self.source_dir,
                                      fetch=self.fetch_source):
                    add(SourceSite(lp.address, fn, lp.address == fn.entry, lp.line, self._alias_scope(point, fn)))
                continue
            if fn.entry is None:
                continue
            if point.is_return and fn.inlined:
                raise ResolveError(f'Failed to find "{point.function}%return", because {fn.name} is an inlined '
                                   "function and has no return point.")
            if point.offset:
                from .boundary import check_function_offset

                check_function_offset(self.elf, fn.name, fn.entry, fn.high - fn.entry if fn.high is not None else 0,
                                      point.offset, self.warn)
            address = fn.entry + (point.offset or 0)
            if (wants_variables and self.is_uprobe and not point.offset and not point.is_return
                    and not fn.inlined and (not self.debuginfo.cu_is_optimized(fn.cu)
                                            or self.debuginfo.is_unoptimized_rust(fn))):
                from ..debuginfo.dwarf.lines import skip_prologue

                skipped = skip_prologue(self.debuginfo, fn)
                if skipped != address:
                    self.warn("Target program is compiled without optimization. Skipping prologue.\n"
                              f"Probe on address 0x{address:x} to force probing at the function entry.")
                    address = skipped
            add(SourceSite(address, fn, address == fn.entry))
        if not sites:
            raise ProbePointNotFound(point.text, hint="no line matches the pattern" if point.lazy else "")
        return sites

    @staticmethod
    def _alias_scope(point: S.PointSpec, fn: Function) -> Optional[str]:
        """``SourceSite.scope_name`` of a site in ``fn``: its name when the point's function is
        another name of it (an ELF alias), which names no scope in DWARF."""
        name = point.function
        if name is None or is_glob(name) or name == fn.name or name == die_linkage_name(fn.die):
            return None
        return fn.name

    def _functions(self, point: S.PointSpec) -> list[Function]:
        if _is_cxx_symbol(point.function):
            # The same answer in the other order: g++ writes a C++ function's definition as the
            # DW_AT_specification of its declaration (a member's, or a namespace's function declared
            # in a header), which _function_at_symbol refuses after reading the unit's address table
            # and function bounds (~7 ms of a first add -D of a libstdc++ method; it refused every
            # one of 300 tried). Searched by name first (an answer the index cache keeps), the
            # definition found is the function at the symbol's address that DebugInfo.function_at
            # then finds among those it made, without either table.
            by_name = self.debuginfo.probe_functions(point.function, point.source)
            return self._functions_at_symbol(point) or by_name or self._aliased_functions(point)
        functions = self._functions_at_symbol(point)
        if functions:
            return functions
        functions = self.debuginfo.probe_functions(point.function, point.source)
        if functions:
            return functions
        return self._aliased_functions(point)

    def _aliased_functions(self, point: S.PointSpec) -> list[Function]:
        """The functions of ``point`` that no DWARF definition is named as: by their symbols' addresses."""
        # perf's find_alternative_probe_point: a symbol (an alias such as malloc) mapped to the
        # DWARF function at its address (__libc_malloc).
        found: list[Function] = []
        symbols = self.elf.find_functions(point.function)
        debug_elf = self.debuginfo.debug_elf() if not symbols else None
        if debug_elf is not None and debug_elf.path != self.elf.path:
            # (a static function of a stripped binary, such as libc's __malloc: only the debug file's
            # .symtab names it, where perf finds it too)
            symbols = debug_elf.find_functions(point.function)
        for sym in symbols:
            fn = self._function_starting_at(sym)
            if fn is not None and all(f.entry != fn.entry for f in found):
                if point.source is None or tail_match(fn.decl_file, point.source):
                    found.append(fn)
        if not found:
            if point.source is not None and self.debuginfo.find_functions(point.function):
                raise ProbePointNotFound(point.text, hint=f"{point.function} is defined, but not in a file "
                                                          f"ending with {point.source!r}")
            hint = (did_you_mean(point.function or "", self.debuginfo.function_names(), sep=", ")
                    or "list the functions with 'probectl funcs'")
            raise ProbePointNotFound(point.text, hint=hint)
        return found

    def _functions_at_symbol(self, point: S.PointSpec) -> Optional[list[Function]]:
        """``_function_at_symbol`` of a user binary's function named exactly, without ``@SRC``."""
        if not self.is_uprobe or point.source is not None or point.function is None or is_glob(point.function):
            return None
        return self._function_at_symbol(point.function)

    def _function_at_symbol(self, name: str) -> Optional[list[Function]]:
        """The DWARF functions of a global function symbol of a user binary, found at its address
        (``.debug_aranges``, then the one unit that holds it), or None when DWARF may define more
        than that under the name: then every unit is searched for it by name, as perf does.

        Searching by name costs most where a name is an alias (``malloc`` of ``__libc_malloc``):
        its string lies in the declarations of every unit that calls it (191 units of
        libc6-dbg), each of which must be read to find none is a definition; the address gives the
        answer from one unit. Both give the same functions when no other definition can hold the
        name: a global symbol is defined once, a static function of the same name in another unit
        would have a LOCAL symbol in ``.symtab`` (or a clone's, ``name.constprop.0``), and a global
        function gcc inlined as well has an abstract origin (whose inline instances perf probes
        too). Left out of this reasoning: a static function of that name inlined everywhere (no
        symbol at all), in a unit that cannot see the global's declaration."""
        symbols = self.elf.find_functions(name)
        if not symbols or any(sym.bind not in ("GLOBAL", "WEAK") for sym in symbols):
            return None
        told = False  # (a stripped runtime binary has no .symtab: its debug file's tells)
        for elf in dict.fromkeys((self.elf, self.debuginfo.debug_elf())):
            local = elf.has_local_function(name) if elf is not None else None
            if local:
                return None
            told = told or local is False
        if not told:
            return None
        found: list[Function] = []
        for sym in symbols:
            fn = self.debuginfo.function_at(sym.value)
            if (fn is None or fn.entry != sym.value or fn.inlined
                    or "DW_AT_abstract_origin" in fn.die.attributes or "DW_AT_specification" in fn.die.attributes):
                return None
            if all(f.entry != fn.entry for f in found):
                found.append(fn)
        return found

    def _function_starting_at(self, sym: ElfSymbol) -> Optional[Function]:
        """The DWARF function whose entry is the address of ``sym`` (a symbol DWARF does not name):
        looked up by the names of the other symbols at that address (``__libc_malloc`` for
        ``malloc``: a lookup by name reads the function's DIE, and a name index answers it), else
        the out-of-line function at the address (which reads the bounds of every function of its
        unit: 1.7 MB of libc6-dbg's malloc.c)."""
        for alias in self.elf.aliases(sym):
            if alias.name == sym.name:
                continue
            for fn in self.debuginfo.find_functions(alias.name):
                if fn.entry == sym.value and not fn.inlined:
                    return fn
        out_of_line = self.debuginfo.function_at(sym.value)
        return out_of_line if out_of_line is not None and out_of_line.entry == sym.value else None

    def _address_site(self, point: S.PointSpec) -> SourceSite:
        """``0xADDR``: the address itself, in the DWARF function that contains it (whose variables,
        innermost scope first, are the ones visible there)."""
        address = point.address
        assert address is not None
        fn = self.debuginfo.function_at(address)
        if fn is None or fn.entry is None:
            sym = self.elf.symbol_at(address)
            where = f" (in {sym.name}+{address - sym.value})" if sym is not None else ""
            raise ResolveError(f"no function with debug information contains 0x{address:x}{where}, so its "
                               "C variables are unknown",
                               hint="probe a function or line by name, or fetch registers at the address "
                                    "(e.g. '0x%x %%di')" % address)
        if fn.high is not None and fn.entry < address < fn.high:
            from .boundary import check_function_offset

            check_function_offset(self.elf, fn.name, fn.entry, fn.high - fn.entry, address - fn.entry, self.warn)
        return SourceSite(address, fn, address == fn.entry)

    def _file_sites(self, point: S.PointSpec) -> list[SourceSite]:
        from ..debuginfo.dwarf.lines import line_table, source_line
        from ..debuginfo.dwarf.sources import lazy_points

        source = point.source
        if source is None:  # (a point without a function or an address names a file: the parser sees to it)
            raise ProbePointNotFound(point.text, hint="name a function or a source file")
        if point.lazy is not None:
            points = []
            for cu in self.debuginfo.compile_units():
                real = next((f for f in line_table(self.debuginfo, cu).files() if tail_match(f, source)), None)
                if real is not None:
                    points.extend(lazy_points(self.debuginfo, point.lazy, cu=cu, file=real,
                                              source_dir=self.source_dir, fetch=self.fetch_source))
        else:
            points = source_line(self.debuginfo, point.source, point.line)
        sites = []
        for lp in points:
            fn = self.debuginfo.function_at(lp.address)
            if fn is None:
                continue
            sites.append(SourceSite(lp.address, fn, lp.address == fn.entry, lp.line))
        if not sites:
            raise ProbePointNotFound(point.text,
                                     hint="see the probe-able lines: " + self.command("lines", source))
        return sites

    def _function_at(self, address: int, fallback: Function) -> Function:
        fn = self.debuginfo.function_at(address)
        return fn if fn is not None else fallback

    # -- arguments ------------------------------------------------------------------------------

    def variable_args(self, site: SourceSite, arg: S.ArgSpec, point: S.PointSpec) -> list["VariableArg"]:
        """The C variables an argument names at a site: one, or the expansion of $params/$vars."""
        if isinstance(arg.expr, S.SpecialVar):
            scope = self.scope(site, point)
            names = expand_variables(self.debuginfo, scope, site.address, params_only=arg.expr.name == "params")
            return [VariableArg(S.Variable(name), None, None) for name in names]
        if not isinstance(arg.expr, S.Variable):  # (a C variable inside a raw fetch: +8(var))
            raise ProbeSemanticError(f"'{arg.text}': a C variable cannot be the base of a +OFFS(...) dereference",
                                     hint="fetch a member or element of it in C (var->member, var[N]), or "
                                          "dereference a register: +8(%di)")
        return [VariableArg(arg.expr, arg.name, arg.type)]

    def fetch(self, site: SourceSite, var: S.Variable, cast: Optional[S.TypeSpec], user: bool,
              point: S.PointSpec):
        """FetchResult of a C expression at a site (raises VariableUnavailable/VariableNotFound)."""
        if point.is_return:
            raise ProbeSemanticError(f"'{S.render_expr(var)}': variables cannot be read at a return probe",
                                     hint="their registers and stack slots are gone; probe a line before "
                                          "the return, or read $retval")
        symbol_base = None
        if self.is_uprobe:  # (a DebugInfoError when no segment maps the address: damaged program headers)
            symbol_base = site.address - self.elf.vaddr_to_offset(site.address)
        return fetch_variable(self.debuginfo, self.scope(site, point), site.address, var, cast,
                              options=self.options, symbol_base=symbol_base,
                              user_access=user and not self.is_uprobe)

    def retval_type(self, site: SourceSite) -> str:
        return retval_type(self.debuginfo, site.function, self.options)[0]

    def scope(self, site: SourceSite, point: S.PointSpec):
        """The function or inline-instance DIE whose variables are visible at a site (perf's best scope)."""
        if point.address is not None:
            # An address: the innermost function or inline instance there (no name or line to prefer).
            scope = best_scope(self.debuginfo, site.address)
            return scope if scope is not None else site.function.die
        if point.line is None and point.lazy is None and point.function is not None:
            # A function's own instance, even when its entry pc lies outside its ranges (perf's
            # probe_point_inline_cb looks variables up from the instance DIE itself).
            return site.function.die
        scope = best_scope(self.debuginfo, site.address,
                           function=site.scope_name or point.function or site.function.name)
        return scope if scope is not None else site.function.die


@dataclass(frozen=True)
class VariableArg:
    """A C variable to fetch, with the user's name and cast for it (None for $vars expansions)."""

    variable: S.Variable
    name: Optional[str]
    cast: Optional[S.TypeSpec]
