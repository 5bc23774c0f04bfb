#!/usr/bin/env python3
"""The hand-written parts of docs/ledger.md, each against the library (or the default) it replaces, in one run.

    .venv/bin/python bench/bench_ledger.py [--runs 5] [--case NAME]...

Cases (each runs both variants on the same work, in fresh interpreters, interleaved, ``--runs`` times;
the table shows the best CPU time of each in ms and the ratio library / probectl):

- ``parser``: parse one definition, imports included: probectl's LALR driver over the generated tables
  (probectl.spec) / lark at run time, loading the probe grammar analysed by lark from lark's own cache;
- ``filter``: the event-filter parser, imports included: loaded from probectl's checked cache of lark's
  analysis (probectl.grammars) / analysed by lark at each run (what a run without that cache does);
- ``dataclass``: ``probectl add -D`` of the fixture's ``paint w->corner->y`` with probectl.dataclass /
  with the standard ``dataclasses`` put in its place (same names: dataclass, field, fields, replace);
- ``gc``: the same ``add -D`` with probectl's collector settings (threshold, freeze, no collection at
  exit) / with CPython's defaults;
- ``dwarf``: open a file's DWARF and read every DIE of its first ``--units`` units with their
  attributes: probectl's reader / pyelftools (on the fixture and on libc6-dbg's debug file);
- ``elf``: open libc and look up ten symbols by name: probectl's ElfFile / pyelftools' ELFFile;
- ``inflate``: inflate libc6-dbg's compressed ``.debug_info`` whole: ISA-L (``isal``) / zlib;
- ``startup``: what each import or compile that probectl defers to the commands that need it would
  add to an ``add -D`` that does not need it: measured in the child after the command ran (so only
  what the command had not loaded yet counts), as ms and as a share of the command's CPU time.

The ``gc`` case also counts the collections the command makes under each setting.

The native recorder, reader, formatter and aggregator have their own benches (bench_native.py,
bench_script.py, bench_hist.py, bench_answers.py). Each figure is the CPU time (user + system) of the
child process, or for ``inflate`` of the call alone; a case whose input is missing (libc6-dbg, gcc)
says so and is skipped. Figures of one run on one machine: ratios to compare, not absolute targets.
"""
from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path
from typing import Optional

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
LIBC = "/usr/lib/x86_64-linux-gnu/libc.so.6"
DEFINITION = "paint:3 w->corner->y w->name:string w->fl.mode scale"
CASES = ["parser", "filter", "dataclass", "gc", "dwarf", "elf", "inflate", "startup"]
SYMBOLS = ["malloc", "free", "memcpy", "printf", "open", "read", "write", "__libc_start_main", "qsort", "strlen"]

# The child programs. Each prints nothing; the parent takes the child's CPU time from the kernel.
PARSE_PROBECTL = """
from probectl.spec import parse_probe
parse_probe(DEFINITION)
"""
PARSE_LARK = """
import lark
parser = lark.Lark(open(GRAMMAR).read(), parser="lalr", lexer="contextual", start=["probe", "line_range"],
                   propagate_positions=True, maybe_placeholders=False, cache=CACHE)
parser.parse(DEFINITION, start="probe")
"""
FILTER_CACHED = """
from probectl.grammars import load_parser
load_parser("filter.lark", lexer="contextual")
"""
FILTER_ANALYSED = """
from lark import Lark
from probectl.grammars import grammar_path
Lark(grammar_path("filter.lark").read_text(), parser="lalr", lexer="contextual")
"""
ADD = """
import sys
sys.argv = ["probectl", "add", "-D", "-x", BINARY, DEFINITION]
{patch}
from probectl.cli import main
main()
"""
STDLIB_DATACLASS = """
import dataclasses, types
shim = types.ModuleType("probectl.dataclass")
shim.dataclass, shim.field, shim.fields, shim.replace = (dataclasses.dataclass, dataclasses.field,
                                                         dataclasses.fields, dataclasses.replace)
shim.FrozenInstanceError = dataclasses.FrozenInstanceError
sys.modules["probectl.dataclass"] = shim
"""
DEFAULT_GC = """
import gc
gc.set_threshold = gc.freeze = gc.disable = lambda *args: None
"""
DWARF_PROBECTL = """
from probectl.debuginfo.dwarf import DebugInfo
di = DebugInfo.open(BINARY)
for n, cu in enumerate(di.dwarf.iter_CUs()):
    if n == UNITS:
        break
    for die in cu.iter_DIEs():
        die.attributes
"""
DWARF_PYELFTOOLS = """
from elftools.elf.elffile import ELFFile
with open(DEBUG_FILE, "rb") as f:
    dwarf = ELFFile(f).get_dwarf_info()
    for n, cu in enumerate(dwarf.iter_CUs()):
        if n == UNITS:
            break
        for die in cu.iter_DIEs():
            die.attributes
"""
ELF_PROBECTL = """
from probectl.debuginfo.elf import ElfFile
with ElfFile(LIBC) as elf:
    for name in SYMBOLS:
        elf.find_symbols(name)
"""
ELF_PYELFTOOLS = """
from elftools.elf.elffile import ELFFile
with open(LIBC, "rb") as f:
    elf = ELFFile(f)
    table = elf.get_section_by_name(".symtab") or elf.get_section_by_name(".dynsym")
    for name in SYMBOLS:
        table.get_symbol_by_name(name)
"""


# (label, statement[, definition]): the deferred imports and compiles of docs/ledger.md, "Deferred start-up work".
STARTUP: list[tuple[str, ...]] = [
    ("shutil + subprocess (target/binary.py)", "import shutil, subprocess"),
    ("hashlib (debuginfo/indexcache.py)", "import hashlib"),
    ("ctypes (compression.py)", "import ctypes"),
    ("difflib (cli's option parser)", "import difflib"),
    # (after a definition without C expressions, the case fetch_options.py is split off for)
    ("the member-chain walker (resolve/fetch_options.py)", "import probectl.resolve.fetch", "paint scale=%si"),
    ("pyelftools' ELFFile (debuginfo/dwarf/sections.py)", "import elftools.elf.elffile"),
    ("termtext's _UNSAFE compiled (termtext.py)",
     "import re, probectl.termtext as t; re.compile(t._UNSAFE)"),
    ("tracefs' README patterns as regexes (tracefs.py)",
     "import fnmatch, re, probectl.tracefs as t\n"
     "for p in t.Features._PATTERNS.values(): re.compile(fnmatch.translate(p))"),
    ("pyarrow.parquet (analysis/parquet.py)", "import pyarrow.parquet"),
    ("duckdb (cli/reports.py)", "import duckdb"),
]
STARTUP_CHILD = """
import resource, sys, time
sys.argv = ["probectl", "add", "-D", "-x", BINARY, DEFINITION]
from probectl.cli import main
main()
usage = resource.getrusage(resource.RUSAGE_SELF)
start = time.process_time()
exec(STATEMENT)
sys.stderr.write(f"{1000 * (time.process_time() - start)} {1000 * (usage.ru_utime + usage.ru_stime)}\\n")
"""
COUNT_COLLECTIONS = """
import atexit, gc, os
counted = [0]
gc.callbacks.append(lambda phase, info: counted.__setitem__(0, counted[0] + (phase == "start")))
atexit.register(lambda: os.write(2, f"collections {counted[0]}\\n".encode()))
"""


def child_cpu_ms(program: str, values: dict, cwd: Path) -> float:
    """Run ``program`` in a fresh interpreter (``values`` bound as globals first): its CPU time in ms."""
    prelude = "".join(f"{name} = {value!r}\n" for name, value in values.items())
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    run = subprocess.run([sys.executable, "-c", prelude + textwrap.dedent(program)], cwd=cwd,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if run.returncode:
        raise SystemExit(f"bench_ledger: a child failed:\n{run.stderr[-2000:]}")
    return 1000 * (after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)


def compare(label: str, ours: str, theirs: str, values: dict, runs: int, cwd: Path) -> None:
    """Both programs ``runs`` times, interleaved (one untimed run each first: caches, bytecode)."""
    child_cpu_ms(ours, values, cwd)
    child_cpu_ms(theirs, values, cwd)
    best_ours = best_theirs = float("inf")
    for _ in range(runs):
        best_ours = min(best_ours, child_cpu_ms(ours, values, cwd))
        best_theirs = min(best_theirs, child_cpu_ms(theirs, values, cwd))
    print(f"{label:58} {best_ours:9.1f} {best_theirs:9.1f} {best_theirs / best_ours:7.2f}x", flush=True)


def child_stderr(program: str, values: dict, cwd: Path) -> str:
    prelude = "".join(f"{name} = {value!r}\n" for name, value in values.items())
    run = subprocess.run([sys.executable, "-c", prelude + textwrap.dedent(program)], cwd=cwd,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if run.returncode:
        raise SystemExit(f"bench_ledger: a child failed:\n{run.stderr[-2000:]}")
    return run.stderr


def startup(runs: int, binary: str, cwd: Path) -> None:
    """The marginal cost of each deferred import, best of ``runs``, against the command's own CPU time."""
    print(f"\n{'deferred work, after an add -D (best of ' + str(runs) + ')':58} {'ms':>9} {'add -D':>9} {'share':>8}")
    for label, statement, *definition in STARTUP:
        costs, commands = [], []
        for _ in range(runs):
            values = {"BINARY": binary, "DEFINITION": definition[0] if definition else DEFINITION,
                      "STATEMENT": statement}
            cost, command = child_stderr(STARTUP_CHILD, values, cwd).split()[-2:]
            costs.append(float(cost))
            commands.append(float(command))
        print(f"{label:58} {min(costs):9.1f} {min(commands):9.1f} {100 * min(costs) / min(commands):7.1f}%",
              flush=True)


def collections(binary: str, cwd: Path) -> None:
    """How many collections one add -D makes with probectl's settings and with CPython's."""
    values = {"BINARY": binary, "DEFINITION": DEFINITION}
    counts = []
    for patch in ("", DEFAULT_GC):
        err = child_stderr(ADD.format(patch=COUNT_COLLECTIONS + patch), values, cwd)
        counts.append(err.split("collections ")[-1].strip())
    print(f"{'  collections in one add -D: probectl / CPython':58} {counts[0]:>9} {counts[1]:>9}")


def fixture() -> Optional[str]:
    try:
        from conftest import build_fixture

        return str(build_fixture("dwarf_structs", "-O0"))
    except BaseException as exc:  # (conftest skips through pytest's exception when gcc is missing)
        print(f"(no fixture: {exc})")
        return None


def libc_debug_file() -> Optional[str]:
    from probectl.debuginfo.dwarf import DebugInfo
    from probectl.errors import DebugInfoError

    try:
        with DebugInfo.open(LIBC) as di:
            return str(di.path)
    except DebugInfoError:
        print("(no libc6-dbg: the libc cases are skipped)")
        return None


def inflate(runs: int, debug_file: str) -> None:
    """ISA-L and zlib inflating the same compressed section, timed in this process."""
    import time
    import zlib

    from isal import isal_zlib

    from probectl.debuginfo.elf import ElfFile

    with ElfFile(debug_file) as elf:
        found = elf.zlib_payload(elf.section(".debug_info"))
    if found is None:
        print("(libc6-dbg's .debug_info is not zlib-compressed: no inflate case)")
        return
    offset, length, _size = found
    with open(debug_file, "rb") as f:
        f.seek(offset)
        payload = f.read(length)
    best = {}
    for name, module in (("isal", isal_zlib), ("zlib", zlib)) * (runs + 1):
        start = time.process_time()
        size = len(module.decompress(payload))
        best[name] = min(best.get(name, float("inf")), 1000 * (time.process_time() - start))
    print(f"{f'inflate libc .debug_info ({size / 1e6:.1f} MB)':58} {best['isal']:9.1f} {best['zlib']:9.1f} "
          f"{best['zlib'] / best['isal']:7.2f}x")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--units", type=int, default=40, help="units of libc's DWARF the dwarf case reads")
    parser.add_argument("--case", action="append", choices=CASES)
    args = parser.parse_args()
    cases = set(args.case or CASES)
    work = Path(tempfile.mkdtemp(prefix="bench-ledger-"))  # (an empty cwd: `-c` must not import this tree)
    env_cache = work / "cache"
    os.environ["XDG_CACHE_HOME"] = str(env_cache)  # probectl's index cache: filled by the untimed run
    binary = fixture()
    debug_file = libc_debug_file() if cases & {"dwarf", "inflate"} else None
    if cases - {"startup"}:
        print(f"{'case (best CPU ms of ' + str(args.runs) + ' runs)':58} {'probectl':>9} {'library':>9} {'ratio':>8}")
    if "parser" in cases:
        values = {"DEFINITION": DEFINITION, "GRAMMAR": str(ROOT / "grammar" / "probe.lark"),
                  "CACHE": str(work / "probe.lark.cache")}
        compare("parse a definition: LALR tables / lark", PARSE_PROBECTL, PARSE_LARK, values, args.runs, work)
    if "filter" in cases:
        compare("load the filter parser: cached analysis / lark analysing", FILTER_CACHED, FILTER_ANALYSED, {},
                args.runs, work)
    if binary and "dataclass" in cases:
        values = {"BINARY": binary, "DEFINITION": DEFINITION}
        compare("add -D: probectl.dataclass / dataclasses", ADD.format(patch=""),
                ADD.format(patch=STDLIB_DATACLASS), values, args.runs, work)
    if binary and "gc" in cases:
        values = {"BINARY": binary, "DEFINITION": DEFINITION}
        compare("add -D: probectl's gc settings / CPython's", ADD.format(patch=""), ADD.format(patch=DEFAULT_GC),
                values, args.runs, work)
        collections(binary, work)
    if "dwarf" in cases:
        if binary:
            values = {"BINARY": binary, "DEBUG_FILE": binary, "UNITS": -1}
            compare("read every DIE of the fixture: own reader / pyelftools", DWARF_PROBECTL, DWARF_PYELFTOOLS,
                    values, args.runs, work)
        if debug_file:
            values = {"BINARY": LIBC, "DEBUG_FILE": debug_file, "UNITS": args.units}
            compare(f"read {args.units} units of libc: own reader / pyelftools", DWARF_PROBECTL, DWARF_PYELFTOOLS,
                    values, args.runs, work)
    if "elf" in cases:
        values = {"LIBC": LIBC, "SYMBOLS": SYMBOLS}
        compare("libc: 10 symbols by name: ElfFile / pyelftools", ELF_PROBECTL, ELF_PYELFTOOLS, values, args.runs,
                work)
    if debug_file and "inflate" in cases:
        inflate(args.runs, debug_file)
    if binary and "startup" in cases:
        startup(args.runs, binary, work)
    return 0


if __name__ == "__main__":
    sys.exit(main())
