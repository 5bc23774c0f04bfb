"""Source files named by DWARF, and lazy line patterns (``FUNC;PTN``, ``SRC;PTN``).

perf matches a lazy pattern against the text of the source file (``find_lazy_match_lines``): a
line matches when the glob pattern matches the whole line with all whitespace ignored
(``strlazymatch``), so ``rq=*`` matches ``\\trq = cpu_rq(cpu);``. The matching lines' statement
addresses in the function (or the whole CU for ``SRC;PTN``) are the probe points.
The file is found the way perf's ``find_source_path`` looks for it: under ``--source`` DIR
(the DWARF path appended, then with leading directories dropped one by one), else relative to
the CU's ``DW_AT_comp_dir``, else as written; when none of those exists, a ``fetch`` callable
given by the caller (debuginfod's ``/buildid/ID/source/PATH``) may get it by its absolute path.
"""
from __future__ import annotations

import fnmatch
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Optional

from ...errors import DebugInfoError
from ...regularfile import open_regular
from .die import guarded, tail_match
from .function import Function
from .lines import LinePoint, walk_lines

if TYPE_CHECKING:
    from .units import Unit as CompileUnit

    from . import DebugInfo

_SPACES = re.compile(r"\s+")

# Gets a source file that is not on this machine by its absolute path (as DWARF names it), or raises
# DebugInfoError saying why not.
SourceFetcher = Callable[[str], Path]


def source_candidates(path: str, comp_dir: str = "", source_dir: Optional[str] = None) -> list[Path]:
    """Where the source file ``path`` (as DWARF names it) may be, in the order perf tries."""
    if source_dir:
        rel = path.lstrip("/")
        parts = Path(rel).parts
        return [Path(source_dir, *parts[i:]) for i in range(len(parts))]
    if not os.path.isabs(path) and comp_dir and not path.startswith(comp_dir.rstrip("/") + "/"):
        return [Path(comp_dir, path)]
    # (a path that starts with a relative comp_dir has it already: DWARF 5 line tables name
    # directory 0 after it, as Debian's kernel builds do with debian/build/build_amd64_...)
    return [Path(path)]


def find_source(path: str, comp_dir: str = "", source_dir: Optional[str] = None,
                fetch: Optional[SourceFetcher] = None) -> Path:
    """The readable source file for ``path``; DebugInfoError listing the places tried."""
    tried = source_candidates(path, comp_dir, source_dir)
    for p in tried:
        if p.is_file():
            return p
    listing = "\n".join(f"  {p}" for p in tried)
    remote = ""
    if fetch is not None:
        absolute = path if os.path.isabs(path) or not comp_dir else os.path.join(comp_dir, path)
        try:
            return fetch(absolute)
        except DebugInfoError as err:
            remote = f"\n{err.message}"
    raise DebugInfoError(f"source file {path} not found; tried:\n{listing}{remote}",
                         hint="point at the source tree with --source DIR")


def lazy_match(line: str, pattern: str) -> bool:
    """perf's ``strlazymatch``: glob match of the whole line, whitespace ignored on both sides."""
    return fnmatch.fnmatchcase(_SPACES.sub("", line), _SPACES.sub("", pattern))


def source_lines(path: os.PathLike | str) -> list[str]:
    """The lines of the source file ``path``, numbered as the compiler numbers them: a line ends at
    a newline only (``str.splitlines`` and text mode also end lines at ``\\r``, form feeds and other
    separators, which would shift every number after one); a ``\\r`` before the newline is dropped.
    OSError when it cannot be read or is not a regular file (a FIFO named by the DWARF never hangs)."""
    with open_regular(path) as f:
        text = f.read().decode(errors="replace")
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [line[:-1] if line.endswith("\r") else line for line in lines]


def matching_lines(path: Path, pattern: str) -> list[int]:
    """1-based numbers of the lines of ``path`` that ``pattern`` matches lazily."""
    try:
        lines = source_lines(path)
    except OSError as err:
        raise DebugInfoError(f"cannot read the source file {path}: {err.strerror}",
                             hint="point at the source tree with --source DIR") from None
    return [number for number, line in enumerate(lines, 1) if lazy_match(line, pattern)]


@guarded
def lazy_points(debuginfo: "DebugInfo", pattern: str, scope: Optional[Function] = None,
                cu: Optional["CompileUnit"] = None, file: Optional[str] = None,
                source_dir: Optional[str] = None, fetch: Optional[SourceFetcher] = None) -> list[LinePoint]:
    """Probe points of a lazy pattern: in function ``scope`` (``FUNC;PTN``, one instance; for an
    inline function call it on each instance), or in ``file`` of ``cu`` (``SRC;PTN``).
    Each address once, in line-table order; an empty list when no matching line has code."""
    if scope is not None:
        cu = scope.cu
        file = scope.decl_file
    if cu is None or not file:
        raise DebugInfoError("a lazy pattern needs a function or a source file with debug information")
    source = find_source(file, debuginfo.comp_dir(cu), source_dir, fetch)
    wanted = set(matching_lines(source, pattern))
    points: list[LinePoint] = []
    seen: set[int] = set()
    if not wanted:
        return points
    for fname, line, address in walk_lines(debuginfo, scope, cu):
        if line in wanted and tail_match(fname, file) and address not in seen:
            seen.add(address)
            points.append(LinePoint(address, fname, line))
    return points
