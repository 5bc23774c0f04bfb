#!/usr/bin/env python3
"""Benchmark of source-level resolution: `probectl add -D` against `perf probe -D`, in one run.

    .venv/bin/python bench/bench_add.py [--runs 7] [--perf perf] [--tree OLD_CHECKOUT] [--case paint]

Each case runs both tools on the same binary and the same work:

1. libc ``malloc bytes``: perf fails on the alias, so perf runs ``__libc_malloc bytes`` (the
   definition probectl gives for ``malloc bytes``); perf's failing ``malloc bytes`` is timed too;
2. libc ``__libc_malloc bytes`` in both;
3. libc ``free mem``: an alias again (perf runs ``__libc_free mem``), of a name so common (the tail
   of every ``*free`` string) that searching the units for it by name gives up;
4. libc ``malloc size=%di``: a symbol and a register, no DWARF read (perf's work is the same);
5. the largest fixture definition: ``paint`` of dwarf_structs at -O2 with 25 arguments.

Issue 16's targets: libc <= 1.0x perf warm and <= 1.5x cold; ``paint`` <= 60 ms warm.

probectl runs cold (an empty index cache: ``XDG_CACHE_HOME`` points to a new directory each
time) and warm (the cache filled by a previous run). Every command runs ``--runs`` times,
interleaved; the table shows the fastest and the median wall-clock time and the median CPU time
(user + system) of the child, and the ratios probectl / perf of the fastest runs and of the
median CPU times. The fastest run is the fairest figure on a busy machine: as root, `add -D`
takes probectl's lock and reads tracefs, so it may wait for other probectl processes.

probectl is run as an installed program would be: with its bytecode cached
(``PYTHONPYCACHEPREFIX`` in a temporary directory, compiled by a first, untimed run), even when
the environment sets ``PYTHONDONTWRITEBYTECODE``; ``--no-bytecode-cache`` measures without it.
All figures come from one run on one machine; they are ratios to compare, not absolute targets.

Start-up and work are told apart: the floor is ``probectl --version`` (the interpreter, click and
the command table), and each case's *work* is timed inside one process after the modules its
command imports are imported (listed by an untimed run of it): the CPU time of the command
itself, cold and warm, with what it builds lazily (the probe grammar's parser) but no import.
``--no-work`` leaves the work rows out.
"""
from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Optional

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the tests package, for its fixture builders

from tests.helpers import build_fixture  # noqa: E402

LIBC = "/usr/lib/x86_64-linux-gnu/libc.so.6"
# Every member chain of paint() that perf can fetch too (not the bitfields).
PAINT = ("paint scale w->id w->depth w->name w->label:string w->origin.x w->corner->y w->pts[2].x "
         "w->values[3] w->u.ival w->tag w->hi w->mode w->level w->size w->next->id w->serial w->sc "
         "w->uc w->ok w->fl.tail w->u.bytes[1] w->cv w->next->name:string w->next->label:string")


def list_modules(args: list[str], into: Path) -> None:
    """(In a child started by ``work_command``'s setup.) Run probectl ARGS, then write the names of
    every module it imported to ``into``."""
    import json

    import probectl.cli

    _run_quietly(probectl.cli.main, args)
    into.write_text(json.dumps(sorted(sys.modules)))


def time_work(args: list[str], modules: Path) -> None:
    """(In a child.) Import the modules ``list_modules`` found, then run probectl ARGS once and
    print the CPU milliseconds the command took."""
    import importlib
    import json

    for name in json.loads(modules.read_text()):
        try:
            importlib.import_module(name)
        except Exception:  # (a module that only imports where it was first imported: not needed)
            pass
    import probectl.cli

    start = time.process_time()
    _run_quietly(probectl.cli.main, args)
    print(f"work-ms {(time.process_time() - start) * 1000:.3f}")


def _run_quietly(main, args: list[str]) -> None:
    stdout = sys.stdout
    with open(os.devnull, "w") as sink:
        sys.stdout = sink
        try:
            main(args)
        except SystemExit as done:
            if done.code:
                raise
        finally:
            sys.stdout = stdout


def timed(cmd: list[str], env: dict[str, str]) -> tuple[float, float, subprocess.CompletedProcess]:
    """(wall seconds, child CPU seconds, result) of one run."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=env.get("BENCH_CWD"))
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, out


class Series:
    def __init__(self, label: str):
        self.label = label
        self.wall: list[float] = []
        self.cpu: list[float] = []
        self.output = ""
        self.status = 0

    def add_work(self, out: subprocess.CompletedProcess) -> None:
        """A run of ``time_work``: its figure is CPU time only."""
        self.status = out.returncode
        lines = [line for line in out.stdout.splitlines() if line.startswith("work-ms ")]
        if out.returncode == 0 and lines:
            ms = float(lines[-1].split()[1]) / 1000
            self.wall.append(ms)
            self.cpu.append(ms)
        else:
            self.status = out.returncode or 1
            self.output = out.stderr.strip()

    def add(self, wall: float, cpu: float, out: subprocess.CompletedProcess) -> None:
        self.wall.append(wall)
        self.cpu.append(cpu)
        self.output = out.stdout.strip() or out.stderr.strip().splitlines()[-1]
        self.status = out.returncode

    @property
    def best(self) -> float:
        return min(self.wall)

    @property
    def cpu_median(self) -> float:
        return statistics.median(self.cpu)

    def row(self, floor: Optional["Series"] = None) -> str:
        if not self.wall:
            return f"  {self.label:<44} {'':>8} {'':>8} {'':>8}  FAILS"
        if floor is not None:  # (a whole command: and its CPU time above the floor)
            return self.row() + f"  {(self.cpu_median - floor.cpu_median) * 1000:4.0f} above the floor"
        return (f"  {self.label:<44} {self.best * 1000:8.0f} {statistics.median(self.wall) * 1000:8.0f} "
                f"{self.cpu_median * 1000:8.0f}  {'ok' if self.status == 0 else 'FAILS'}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--perf", default=shutil.which("perf") or "perf")
    parser.add_argument("--tree", type=Path,
                        help="measure the probectl of another source tree (e.g. an older checkout; default: this one)")
    parser.add_argument("--no-bytecode-cache", action="store_true",
                        help="run probectl without cached bytecode (as with PYTHONDONTWRITEBYTECODE=1)")
    parser.add_argument("--no-work", action="store_true", help="do not time the work of each case apart")
    parser.add_argument("--case", help="run only the cases whose label contains this text (e.g. paint)")
    parser.add_argument("--list-modules", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--time-work", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("probectl_args", nargs="*", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.list_modules:
        list_modules(args.probectl_args, args.list_modules)
        return 0
    if args.time_work:
        time_work(args.probectl_args, args.time_work)
        return 0

    structs = str(build_fixture("dwarf_structs", "-O2"))
    cases = [
        ("libc malloc bytes", LIBC, "malloc bytes", "__libc_malloc bytes"),
        ("libc __libc_malloc bytes", LIBC, "__libc_malloc bytes", "__libc_malloc bytes"),
        ("libc free mem (an alias of a common name)", LIBC, "free mem", "__libc_free mem"),
        ("libc malloc size=%di (by symbol)", LIBC, "malloc size=%di", "malloc size=%di"),
        ("dwarf_structs -O2 paint (25 arguments)", structs, PAINT, PAINT),
    ]
    cases = [case for case in cases if args.case is None or args.case in case[0]]

    work = Path(tempfile.mkdtemp(prefix="bench-add-"))
    # Run from an empty directory, so `python -m probectl` does not import the tree it starts in.
    env = dict(os.environ, BENCH_CWD=str(work))
    if args.no_bytecode_cache:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    else:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = str(work / "pycache")
    # This checkout's probectl unless told otherwise (an editable install may point to another tree).
    env["PYTHONPATH"] = str((args.tree or ROOT).resolve())
    warm_env = dict(env, XDG_CACHE_HOME=str(work / "warm-cache"))
    probectl = [sys.executable, "-m", "probectl", "add", "-D", "-x"]
    this = [sys.executable, str(Path(__file__).resolve())]
    try:
        # Untimed: compile the bytecode, fill the warm cache, check both tools agree, list the
        # modules each case imports.
        for number, (_label, binary, ours, theirs) in enumerate(cases):
            if not args.no_work:
                subprocess.run(this + ["--list-modules", str(work / f"modules-{number}.json"), "--",
                                       "add", "-D", "-x", binary, ours],
                               capture_output=True, text=True, env=warm_env, cwd=work, check=True)
            mine = subprocess.run(probectl + [binary, ours], capture_output=True, text=True, env=warm_env,
                                  cwd=work)
            perf = subprocess.run([args.perf, "probe", "-x", binary, "-D", theirs], capture_output=True, text=True)
            if mine.returncode != 0 or perf.returncode != 0:
                print(f"setup failed:\n{mine.stderr}{perf.stderr}", file=sys.stderr)
                return 1

        floor = Series("probectl --version (the floor)")
        for _i in range(args.runs):
            floor.add(*timed([sys.executable, "-m", "probectl", "--version"], env))
        results = []
        for number, (label, binary, ours, theirs) in enumerate(cases):
            series = {
                "cold": Series(f"probectl cold  {ours[:28]}"),
                "warm": Series(f"probectl warm  {ours[:28]}"),
                "perf": Series(f"perf           {theirs[:28]}"),
            }
            if not args.no_work:
                series["work-cold"] = Series("  work after imports, cold")
                series["work-warm"] = Series("  work after imports, warm")
            if ours != theirs:
                series["perf-alias"] = Series(f"perf           {ours[:28]}")
            in_process = this + ["--time-work", str(work / f"modules-{number}.json"), "--", "add", "-D", "-x",
                                 binary, ours]
            for i in range(args.runs):
                cold_env = dict(env, XDG_CACHE_HOME=str(work / f"cold-{number}-{i}"))
                series["cold"].add(*timed(probectl + [binary, ours], cold_env))
                series["warm"].add(*timed(probectl + [binary, ours], warm_env))
                if not args.no_work:
                    cold_env = dict(env, XDG_CACHE_HOME=str(work / f"cold-work-{number}-{i}"))
                    series["work-cold"].add_work(timed(in_process, cold_env)[2])
                    series["work-warm"].add_work(timed(in_process, warm_env)[2])
                series["perf"].add(*timed([args.perf, "probe", "-x", binary, "-D", theirs], env))
                if "perf-alias" in series:
                    series["perf-alias"].add(*timed([args.perf, "probe", "-x", binary, "-D", ours], env))
            results.append((label, series))

        print(f"probectl{' from ' + str(args.tree) if args.tree else ''} add -D vs perf probe -D, {args.runs} runs each"
              f"{' (no bytecode cache)' if args.no_bytecode_cache else ''}; milliseconds\n")
        print(f"  {'':<44} {'fastest':>8} {'median':>8} {'cpu':>8}")
        print(floor.row())
        print()
        for label, series in results:
            print(label)
            for name, s in series.items():
                print(s.row(floor if name in ("cold", "warm") else None))
            perf = series["perf"]
            for mode in ("cold", "warm"):
                s = series[mode]
                print(f"  ratio {mode}: {s.best / perf.best:5.1f}x (fastest)  {s.cpu_median / perf.cpu_median:5.1f}x (cpu)")
            print()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
