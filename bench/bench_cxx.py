#!/usr/bin/env python3
"""Benchmark of C++ names on a large C++ library with debug information (Debian's libstdc++6-12-dbg:
/usr/lib/x86_64-linux-gnu/debug/libstdc++.so.6.0.30), probectl against perf in one run.

    .venv/bin/python bench/bench_cxx.py [--runs 7] [--perf perf] [--lib PATH] [--no-cold] [--no-warm]

1. listing: ``probectl funcs -x LIB`` (every symbol demangled, and the functions inlined at every
   call found in the DWARF's name index) against ``perf probe -x LIB -F``;
2. a method with arguments: ``probectl add -D`` of std::string's ``_M_append`` by its qualified
   demangled name (the program's symbols demangled and matched, the DWARF at the symbol read)
   against ``perf probe -D`` by its mangled name (perf does not take the qualified one);
   probectl by the mangled name too, the same work as perf's.

Issue 23's target: no slower than perf. Each case runs warm (probectl's index cache filled by a
first, untimed run) and cold (the cache emptied before each timed run: ``XDG_CACHE_HOME`` points to
a new directory, as on a user's first run); perf has no cache either way. Every command runs
``--runs`` times, interleaved; the table shows the fastest and the median wall-clock time, the
median CPU time (user + system) of the child, and the ratios probectl / perf of the fastest runs
(the fairest figure on a busy machine) and of the median CPU times. probectl's bytecode is compiled
by an untimed run before any timed one, cold or warm: a cold run is a first run of the index cache,
not of the interpreter. The last row, ``start-up``, is the floor under every probectl command: the
interpreter started and probectl's command line (click) imported, nothing read, against perf's whole
listing. Before any figure, each case's output is checked to be the same cold and
warm (the same rows of ``funcs``, the same ``-D`` definition).
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
LIB = "/usr/lib/x86_64-linux-gnu/debug/libstdc++.so.6.0.30"
MANGLED = "_ZNSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEE9_M_appendEPKcm"
QUALIFIED = ("std::__cxx11::basic_string<char, std::char_traits<char>, std::allocator<char> >::"
             "_M_append(char const*, unsigned long)")


def timed(cmd: list[str], env: Optional[dict[str, str]] = None) -> tuple[float, float, bytes]:
    """(wall seconds, child CPU seconds, standard output) of one run of ``cmd``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    out = subprocess.run(cmd, capture_output=True, env=env)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if out.returncode != 0:
        sys.exit(f"failed: {' '.join(cmd)}\n{out.stderr.decode(errors='replace')}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), out.stdout


def with_cache(cache: str) -> dict[str, str]:
    """The environment of a probectl run whose index cache is ``cache``."""
    return dict(os.environ, XDG_CACHE_HOME=cache)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--perf", default=shutil.which("perf") or "perf")
    ap.add_argument("--lib", default=LIB)
    ap.add_argument("--no-cold", action="store_true", help="leave out the cold runs")
    ap.add_argument("--no-warm", action="store_true", help="leave out the warm runs")
    args = ap.parse_args()
    if not os.path.exists(args.lib):
        sys.exit(f"{args.lib} is missing: apt-get install libstdc++6-12-dbg")
    # (byte-compiled first: with PYTHONDONTWRITEBYTECODE set, a module changed since the set-up is compiled
    # again by every run, which measured 35 ms more for a warm add -D)
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(ROOT / "probectl")], check=True,
                   stdout=subprocess.DEVNULL)
    probectl = [sys.executable, "-m", "probectl"]
    cases = [
        ("funcs", probectl + ["funcs", "-x", args.lib], [args.perf, "probe", "-x", args.lib, "-F"]),
        ("add -D qualified", probectl + ["add", "-D", "-x", args.lib, f"s=\"{QUALIFIED}\" __s __n"],
         [args.perf, "probe", "-x", args.lib, "-D", f"s={MANGLED} __s __n"]),
        ("add -D mangled", probectl + ["add", "-D", "-x", args.lib, f"s={MANGLED} __s __n"],
         [args.perf, "probe", "-x", args.lib, "-D", f"s={MANGLED} __s __n"]),
        # (what every command pays before it reads a file: the interpreter, click and probectl's command
        # line imported, against perf's whole listing: the share of a ratio that is start-up)
        ("start-up", [sys.executable, "-c", "import probectl.cli"], [args.perf, "probe", "-x", args.lib, "-F"]),
    ]
    temporary = tempfile.mkdtemp(prefix="bench_cxx.")
    try:
        warm_cache = os.path.join(temporary, "warm")
        print(f"{'case':<24} {'probectl min':>12} {'median':>8} {'cpu':>7} {'perf min':>9} {'median':>8} "
              f"{'cpu':>7} {'ratio':>6} {'cpu':>6}")
        for name, ours, theirs in cases:
            _, _, warm_output = timed(ours, with_cache(warm_cache))  # (fills the warm cache, compiles bytecode)
            modes = [m for m, skip in (("warm", args.no_warm), ("cold", args.no_cold or name == "start-up"))
                     if not skip]
            for mode in modes:
                a: list[tuple[float, float]] = []
                b: list[tuple[float, float]] = []
                for run in range(args.runs):
                    cache = warm_cache if mode == "warm" else os.path.join(temporary, f"cold-{name}-{run}")
                    wall, cpu, output = timed(ours, with_cache(cache))
                    if output != warm_output:
                        sys.exit(f"{name}: the {mode} run's output differs from the first run's")
                    if mode == "cold":
                        shutil.rmtree(cache, ignore_errors=True)
                    a.append((wall, cpu))
                    wall, cpu, _ = timed(theirs)
                    b.append((wall, cpu))
                a_wall, a_cpu = [w for w, _ in a], [c for _, c in a]
                b_wall, b_cpu = [w for w, _ in b], [c for _, c in b]
                label = name if name == "start-up" else f"{name} {mode}"
                print(f"{label:<24} {min(a_wall) * 1e3:10.1f}ms {statistics.median(a_wall) * 1e3:6.1f}ms "
                      f"{statistics.median(a_cpu) * 1e3:5.0f}ms {min(b_wall) * 1e3:7.1f}ms "
                      f"{statistics.median(b_wall) * 1e3:6.1f}ms {statistics.median(b_cpu) * 1e3:5.0f}ms "
                      f"{min(a_wall) / min(b_wall):6.2f} {statistics.median(a_cpu) / statistics.median(b_cpu):6.2f}")
    finally:
        shutil.rmtree(temporary, ignore_errors=True)


if __name__ == "__main__":
    main()
