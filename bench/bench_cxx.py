#!/usr/bin/env python3
"""Benchmark of C++ names on a large C++ library with debug information (Debian's libstdc++6-12-dbg:
/usr/lib/x86_64-linux-gnu/debug/libstdc++.so.6.0.30), probectl against perf in one run.

    .venv/bin/python bench/bench_cxx.py [--runs 7] [--perf perf] [--lib PATH]

1. listing: ``probectl funcs -x LIB`` (every symbol demangled) against ``perf probe -x LIB -F``;
2. a method with arguments: ``probectl add -D`` of std::string's ``_M_append`` by its qualified
   demangled name (the program's symbols demangled and matched, the DWARF at the symbol read)
   against ``perf probe -D`` by its mangled name (perf does not take the qualified one);
   probectl by the mangled name too, the same work as perf's.

Issue 23's target: no slower than perf. Every command runs ``--runs`` times, interleaved; the table
shows the fastest and the median wall-clock time, and the ratio probectl / perf of the fastest runs
(the fairest figure on a busy machine). probectl runs warm (its index cache filled by a first,
untimed run), as perf has no cache to fill.
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LIB = "/usr/lib/x86_64-linux-gnu/debug/libstdc++.so.6.0.30"
MANGLED = "_ZNSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEE9_M_appendEPKcm"
QUALIFIED = ("std::__cxx11::basic_string<char, std::char_traits<char>, std::allocator<char> >::"
             "_M_append(char const*, unsigned long)")


def timed(cmd: list[str]) -> float:
    start = time.perf_counter()
    out = subprocess.run(cmd, capture_output=True)
    if out.returncode != 0:
        sys.exit(f"failed: {' '.join(cmd)}\n{out.stderr.decode(errors='replace')}")
    return time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--perf", default=shutil.which("perf") or "perf")
    ap.add_argument("--lib", default=LIB)
    args = ap.parse_args()
    if not os.path.exists(args.lib):
        sys.exit(f"{args.lib} is missing: apt-get install libstdc++6-12-dbg")
    probectl = [sys.executable, "-m", "probectl"]
    cases = [
        ("funcs", probectl + ["funcs", "-x", args.lib], [args.perf, "probe", "-x", args.lib, "-F"]),
        ("add -D qualified", probectl + ["add", "-D", "-x", args.lib, f"s=\"{QUALIFIED}\" __s __n"],
         [args.perf, "probe", "-x", args.lib, "-D", f"s={MANGLED} __s __n"]),
        ("add -D mangled", probectl + ["add", "-D", "-x", args.lib, f"s={MANGLED} __s __n"],
         [args.perf, "probe", "-x", args.lib, "-D", f"s={MANGLED} __s __n"]),
    ]
    print(f"{'case':<18} {'probectl min':>12} {'median':>8} {'perf min':>9} {'median':>8} {'ratio':>6}")
    for name, ours, theirs in cases:
        timed(ours)  # (fills probectl's index cache, compiles its bytecode)
        a, b = [], []
        for _ in range(args.runs):
            a.append(timed(ours))
            b.append(timed(theirs))
        print(f"{name:<18} {min(a) * 1e3:10.1f}ms {statistics.median(a) * 1e3:6.1f}ms "
              f"{min(b) * 1e3:7.1f}ms {statistics.median(b) * 1e3:6.1f}ms {min(a) / min(b):6.2f}")


if __name__ == "__main__":
    main()
