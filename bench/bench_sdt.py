#!/usr/bin/env python3
"""Benchmark of SDT probe definitions: `probectl add -D` against `perf probe -D`, in one run.

    .venv/bin/python bench/bench_sdt.py [--runs 7] [--perf perf]

Cases (each on the same file, the same probes, both tools):

1. every SDT probe of python3.11 (``sdt_python:*``, 8 probes behind semaphores) — perf reads the notes
   from its build-id cache, filled first in a private ``HOME`` that is removed at the end;
2. one probe of libstdc++ (``sdt_libstdcxx:throw``).

Every command runs ``--runs`` times, interleaved; the table shows the fastest wall-clock time of each
tool and the ratio probectl / perf. The outputs are compared too (perf writes nothing for probes it
cannot convert, so the comparison is over perf's lines, and ``lines`` says how many perf wrote). Figures of one run on one machine: ratios
to compare, not absolute targets.
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CASES = [("/usr/bin/python3.11", "sdt_python:*"), ("/lib/x86_64-linux-gnu/libstdc++.so.6", "sdt_libstdcxx:throw")]


def timed(cmd: list[str], env: dict[str, str]) -> tuple[float, subprocess.CompletedProcess]:
    start = time.perf_counter()
    out = subprocess.run(cmd, capture_output=True, text=True, env=env)
    return time.perf_counter() - start, out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--perf", default="perf")
    args = parser.parse_args()
    perf = shutil.which(args.perf)
    if perf is None:
        print(f"bench_sdt: {args.perf} is not installed", file=sys.stderr)
        return 2
    home = tempfile.mkdtemp(prefix="bench-sdt-home-")
    try:
        perf_env = dict(os.environ, HOME=home)
        ours_env = dict(os.environ, PYTHONPATH=str(ROOT))
        print(f"{'case':<48} {'probectl':>10} {'perf':>10} {'ratio':>7}  same (lines)")
        for path, probe in CASES:
            if not os.path.exists(path):
                print(f"{probe + ' on ' + path:<48} (not installed)")
                continue
            subprocess.run([perf, "buildid-cache", "--add", path], env=perf_env, check=True, capture_output=True)
            ours_cmd = [sys.executable, "-m", "probectl", "add", "-D", "-x", path, probe]
            perf_cmd = [perf, "probe", "-x", path, "-D", probe]
            timed(ours_cmd, ours_env)  # (bytecode compiled, files in the page cache)
            ours, theirs = [], []
            for _ in range(args.runs):
                wall, ours_out = timed(ours_cmd, ours_env)
                ours.append(wall)
                wall, perf_out = timed(perf_cmd, perf_env)
                theirs.append(wall)
            perf_lines = perf_out.stdout.strip().splitlines()
            same = bool(perf_lines) and set(perf_lines) <= set(ours_out.stdout.strip().splitlines())
            label = f"{probe} on {os.path.basename(path)}"
            print(f"{label:<48} {min(ours) * 1000:>8.1f}ms {min(theirs) * 1000:>8.1f}ms "
                  f"{min(ours) / min(theirs):>7.2f}  {'yes' if same else 'NO'} ({len(perf_lines)})")
    finally:
        shutil.rmtree(home, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
