#!/usr/bin/env python3
"""probectl vs perf probe on Debian's cloud vmlinux (DWARF): `add -D -k VMLINUX DEF` cold (empty
probectl cache), warm (index cached), and from the vmlinux's BTF, against `perf probe -k VMLINUX -D`,
in one run. Prints seconds (best of N, wall and CPU) and the ratios (issue 4's targets: cold <= 1x
perf, warm <= 0.25x).

Python's bytecode is compiled once, before timing, into a temporary PYTHONPYCACHEPREFIX (an installed
probectl has its .pyc files; a PYTHONDONTWRITEBYTECODE=1 environment would otherwise compile every
module on every run). --source-only times the runs as the environment has them instead.

    .venv/bin/python bench/bench_kernel.py [--runs N] [--source-only] [DEFINITION ...]
"""
from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT = ["tcp_sendmsg size sk->__sk_common.skc_state"]


def timed(args: list[str], env: dict) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the child) of one run."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    out = subprocess.run(args, capture_output=True, text=True, env=env)
    elapsed = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if out.returncode != 0:
        sys.exit(f"{' '.join(args[:4])}... failed:\n{out.stderr}")
    return elapsed, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def best(runs: list[tuple[float, float]]) -> tuple[float, float]:
    return min(r[0] for r in runs), min(r[1] for r in runs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--source-only", action="store_true",
                        help="do not precompile bytecode (time the environment as it is)")
    parser.add_argument("definitions", nargs="*", default=DEFAULT)
    opts = parser.parse_args()
    kernel = Path(subprocess.run([str(ROOT / "tools" / "kernel-testdata.sh")], capture_output=True, text=True,
                                 check=True).stdout.strip())
    vmlinux = str(kernel / "vmlinux")
    probectl = [sys.executable, "-m", "probectl", "add", "-D", "-f", "-k", vmlinux]
    perf = ["perf", "probe", "-k", vmlinux]
    for d in opts.definitions:
        perf += ["-D", d]
    with tempfile.TemporaryDirectory() as tmp:
        perf_env = dict(os.environ, HOME=tmp)
        cache = Path(tmp) / "cache"
        env = dict(os.environ, XDG_CACHE_HOME=str(cache))
        if not opts.source_only:
            env.pop("PYTHONDONTWRITEBYTECODE", None)
            env["PYTHONPYCACHEPREFIX"] = str(Path(tmp) / "pycache")
            subprocess.run([sys.executable, "-m", "compileall", "-q", str(ROOT / "probectl")],
                           env=env, check=True, capture_output=True)
            timed(probectl + ["--btf"] + opts.definitions, env)  # site-packages' bytecode too
        perf_s = best([timed(perf, perf_env) for _ in range(opts.runs)])
        cold = []
        for _ in range(opts.runs):
            shutil.rmtree(cache, ignore_errors=True)
            cold.append(timed(probectl + opts.definitions, env))
        warm = best([timed(probectl + opts.definitions, env) for _ in range(opts.runs)])
        btf = best([timed(probectl + ["--btf"] + opts.definitions, env) for _ in range(opts.runs)])
    cold_s = best(cold)
    print(f"definitions: {opts.definitions}{' (source only, no bytecode)' if opts.source_only else ''}")
    print(f"{'':22} {'wall':>7}   {'ratio':>6}      {'cpu':>7}   {'ratio':>6}")
    for label, (wall, cpu) in (("perf probe -D", perf_s), ("probectl cold", cold_s), ("probectl warm", warm),
                               ("probectl --btf (warm)", btf)):
        print(f"{label:22} {wall:7.3f} s {wall / perf_s[0]:6.3f}x    {cpu:7.3f} s {cpu / perf_s[1]:6.3f}x")


if __name__ == "__main__":
    main()
