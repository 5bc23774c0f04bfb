"""What `lines` and `vars` show (perf probe -L and -V): the probe-able source lines of a function or
a file range, and the variables that can be fetched at each address of a probe point.
"""
from __future__ import annotations

from pathlib import Path
from typing import Optional

from .. import spec as S
from ..dataclass import dataclass, field, replace
from ..debuginfo.dwarf import DebugInfo, Function
from ..debuginfo.dwarf.die import die_written_name, is_glob
from ..debuginfo.dwarf.lines import line_table, probeable_file_lines, probeable_lines, source_files
from ..debuginfo.dwarf.sources import SourceFetcher, find_source, source_lines
from ..debuginfo.demangle import demangle, function_name, is_mangled
from ..errors import DebugInfoError, ProbectlError, ProbePointNotFound, ResolveError
from ..resolve import Resolver, check_place_count
from ..resolve.cxx import hint_as_written
from ..resolve.btf_fetch import btf_vars_listing
from ..resolve.dwarf import SourceResolver
from ..resolve.dwarf_fetch import ListedVariable, available_variables

# perf shows this many lines after the last probe-able one when a range has no end.
ADDITIONAL_LINES = 2


@dataclass(frozen=True)
class SourceLine:
    number: int  # absolute line number in the file
    text: str
    probeable: bool


@dataclass
class LineListing:
    """One `lines` block: a header like perf's ``<func@/path.c:0>`` and the lines under it."""

    path: str
    function: Optional[str]
    start: int  # as shown in the header: relative to the function, or absolute
    offset: int  # what is subtracted from absolute numbers to show them (the function's decl line)
    lines: list[SourceLine] = field(default_factory=list)

    def header(self) -> str:
        if self.function:
            return f"<{self.function}@{self.path}:{self.start}>"
        return f"<{self.path}:{self.start}>"

    def render(self) -> list[str]:
        out = [self.header()]
        for ln in self.lines:
            if ln.probeable:
                out.append(f"{ln.number - self.offset:7d}  {ln.text}")
            else:
                out.append(f"         {ln.text}")
        return out

    def as_json(self) -> dict:
        return {
            "function": self.function,
            "file": self.path,
            "lines": [{"line": ln.number, "relative": ln.number - self.offset if self.function else None,
                       "probeable": ln.probeable, "text": ln.text} for ln in self.lines],
        }


def list_lines_of(resolver: Resolver, line_range: S.LineRange, source_dir: Optional[str] = None
                  ) -> list[LineListing]:
    """``list_lines`` of the resolver's target, a C++ name being each function it names, a Go
    function read as a source file (``main.work``) the function."""
    source = resolver.source(required=True)
    assert source is not None
    if resolver.go_function_read_as_file(line_range.source, line_range.function):
        line_range = replace(line_range, function=line_range.source, source=None)
    ranges = [line_range]
    if line_range.function and line_range.source is None:
        point = S.PointSpec(function=line_range.function, text=line_range.function)
        ranges = [replace(line_range, function=pt.function) for pt in resolver.source_points(point)]
    return [listing for r in ranges for listing in list_lines(source.debuginfo, r, source_dir, source.fetch_source)]


def list_lines(debuginfo: DebugInfo, line_range: S.LineRange, source_dir: Optional[str] = None,
               fetch: Optional[SourceFetcher] = None) -> list[LineListing]:
    """The listings of a LINEDESC: one per matching function (static duplicates) or source file;
    ``fetch`` gets sources that are not on this machine (debuginfod)."""
    if line_range.function:
        functions = debuginfo.find_functions(line_range.function, line_range.source)
        if not functions:
            raise ProbePointNotFound(line_range.function, hint="list the functions with 'probectl funcs'")
        return [_function_listing(debuginfo, fn, line_range, source_dir, fetch) for fn in functions]
    files = source_files(debuginfo, line_range.source)
    if not files:
        raise ProbePointNotFound(line_range.source or "", hint="no compilation unit has a source file of that name")
    start = line_range.start or 1
    end = line_range.end if line_range.end is not None else 1 << 30
    listings = []
    for path, numbers in probeable_file_lines(debuginfo, line_range.source, start, end).items():
        cu = next(cu for cu in debuginfo.compile_units() if path in _cu_files(debuginfo, cu))
        found = find_source(path, debuginfo.comp_dir(cu), source_dir, fetch)
        text = _read_source(found)
        _check_length(found, text, max(numbers, default=0), "file")
        listing = LineListing(path, None, line_range.start or 0, 0)
        last = len(text) if line_range.end is None else min(line_range.end, len(text))
        probe = set(numbers)
        for n in range(start, last + 1):
            listing.lines.append(SourceLine(n, text[n - 1], n in probe))
        if listing.lines:
            listings.append(listing)
    if not listings:
        raise ResolveError(f"'{line_range.source}' has no line {start}"
                           + (f" to {line_range.end}" if line_range.end is not None else ""),
                           hint="the range is past the end of the file; 'probectl lines FILE' shows it all")
    return listings


def _cu_files(debuginfo: DebugInfo, cu) -> list[str]:
    return line_table(debuginfo, cu).files()


def _function_listing(debuginfo: DebugInfo, fn: Function, line_range: S.LineRange,
                      source_dir: Optional[str], fetch: Optional[SourceFetcher]) -> LineListing:
    if not fn.decl_file:
        raise DebugInfoError(f"function '{fn.name}' has no source file in its debug information")
    found = find_source(fn.decl_file, debuginfo.comp_dir(fn.cu), source_dir, fetch)
    text = _read_source(found)
    probe = set(probeable_lines(debuginfo, fn))
    _check_length(found, text, max(probe | {fn.decl_line}), f"function {fn.name}")
    rel_start = line_range.start or 0
    first = fn.decl_line + rel_start
    if line_range.end is not None:
        last = fn.decl_line + line_range.end
    else:
        numbered = [n for n in probe if n >= first]
        last = (max(numbered) if numbered else first) + 1 + ADDITIONAL_LINES
    # (named as written: a C++ or Rust method by its qualified name, which lines takes back, not the
    # DWARF's bare name, which is every class's)
    listing = LineListing(fn.decl_file, die_written_name(fn.die) or fn.name, rel_start, fn.decl_line)
    for n in range(max(first, 1), min(last, len(text)) + 1):
        listing.lines.append(SourceLine(n, text[n - 1], n in probe))
    if not listing.lines:
        raise ResolveError(f"{fn.name}:{rel_start} is line {first} of {fn.decl_file}, which has {len(text)} lines",
                           hint=f"'probectl lines {fn.name}' shows the function")
    return listing


def _check_length(found: Path, text: list[str], last_line: int, what: str) -> None:
    """A source file shorter than the debug information's lines is not the one the binary was
    built from (perf: "Source file is shorter than expected.")."""
    if last_line > len(text):
        raise DebugInfoError(f"source file {found} is shorter than expected: it has {len(text)} lines, "
                             f"the debug information of the {what} has code on line {last_line}",
                             hint="give the sources the binary was built from (--source DIR)")


def _read_source(found: Path) -> list[str]:
    try:
        return source_lines(found)
    except OSError as err:
        raise DebugInfoError(f"cannot read the source file {found}: {err.strerror}",
                             hint="point --source at the source tree") from err


@dataclass(frozen=True)
class VariablePlace:
    """The variables available at one address of a probe point (one ``@<sym+off>`` block)."""

    symbol: str
    offset: int
    address: int
    variables: tuple[ListedVariable, ...]

    def render(self) -> list[str]:
        out = [f"\t@<{self.symbol}+{self.offset}>"]
        if not self.variables:
            out.append("\t\t(No matched variables)")
        out.extend(f"\t\t{v.c_type}\t{v.name}" for v in self.variables)
        return out

    def as_json(self) -> dict:
        return {"at": f"{self.symbol}+{self.offset}", "address": self.address,
                "variables": [{"type": v.c_type, "name": v.name, "kind": v.kind} for v in self.variables]}


def list_variables(resolver: Resolver, point: S.PointSpec, externs: bool = False) -> list[VariablePlace]:
    """perf -V: each address of the point (each function a C++ name names), with the variables
    fetchable there (a return probe lists the function's entry, where its parameters still are)."""
    source = resolver.source(required=True)
    assert source is not None
    places = []
    for pt in resolver.source_points(point):
        try:
            places.extend(_list_variables(source, pt, externs))
        except ProbectlError as err:
            if pt.function is not None and pt.function != point.function and is_mangled(pt.function):
                full = demangle(pt.function)
                hint_as_written(err, pt.function, function_name(full) if full else pt.function)
            raise
    return places


def _list_variables(source: SourceResolver, point: S.PointSpec, externs: bool) -> list[VariablePlace]:
    entry_point = S.PointSpec(**{**point.__dict__, "is_return": False}) if point.is_return else point
    hint = "narrow the glob (perf stops there too)"
    if point.function is not None and is_glob(point.function):  # (counted before tens of thousands are listed)
        check_place_count(point.text, source.debuginfo.count_functions(point.function), hint=hint)
    places = []
    sites = source.sites(entry_point, wants_variables=False)
    check_place_count(point.text, len(sites), hint=hint)
    for site in sites:
        scope = source.scope(site, point)
        listed = available_variables(source.debuginfo, scope, site.address, externs)
        symbol, offset = _symbol_offset(source, site.address, site.function)
        places.append(VariablePlace(symbol, offset, site.address, tuple(listed)))
    return places


def _symbol_offset(source: SourceResolver, address: int, function: Function) -> tuple[str, int]:
    """perf names a place after the DWARF function containing it (``@<__libc_malloc+0>``), else the symbol."""
    real = source.debuginfo.function_at(address)
    if real is not None and real.entry is not None and real.entry <= address:
        return real.name, address - real.entry
    sym = source.elf.symbol_at(address)
    if sym is not None:
        return sym.name, address - sym.value
    entry = function.entry if function.entry is not None else address
    return function.name, address - entry


def point_title(point: S.PointSpec) -> str:
    """A probe point as perf prints it in `-V` headers: ``FUNC[+OFF|:LINE|%return][@FILE][:LINE]``, the
    file cut to its last 30 characters at a '/', a lazy pattern left out."""
    if point.address is not None:
        return f"0x{point.address:x}"
    text = point.function or ""
    if point.function:
        if point.offset:
            text += f"+{point.offset}"
        elif point.line is not None:
            text += f":{point.line}"
        elif point.is_return:
            text += "%return"
    if point.source:
        name = point.source
        if len(name) > 30:
            cut = name.find("/", len(name) - 30)
            name = name[cut + 1:] if cut >= 0 else name[len(name) - 30:]
        text += f"@{name}"
        if not point.function and point.line is not None:
            text += f":{point.line}"
    return text


def list_btf_variables(resolver: Resolver, point: S.PointSpec) -> list[VariablePlace]:
    """`vars` for a kernel function from BTF (no DWARF): its parameters at the entry (and, where the
    kernel reads $argN at return probes, at the return)."""
    places = []
    for function, address, _offset in resolver.symbol_sites(point):
        name = function.split(".", 1)[0]
        listed = btf_vars_listing(resolver.btf, name, at_return=point.is_return, options=resolver.options)
        places.append(VariablePlace(function, 0, address, tuple(listed)))
    return places
