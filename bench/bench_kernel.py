#!/usr/bin/env python3
"""probectl vs perf probe on Debian's cloud vmlinux (DWARF): `add -D -k VMLINUX DEF` cold (empty
probectl cache), warm (index cached), and from the vmlinux's BTF, against `perf probe -k VMLINUX -D`,
in one run. Prints seconds (best of N) and the ratios (issue 4's targets: cold <= 1x perf, warm <= 0.25x).

    .venv/bin/python bench/bench_kernel.py [--runs N] [DEFINITION ...]
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
DEFAULT = ["tcp_sendmsg size sk->__sk_common.skc_state"]


def timed(args: list[str], env: dict) -> float:
    start = time.perf_counter()
    out = subprocess.run(args, capture_output=True, text=True, env=env)
    elapsed = time.perf_counter() - start
    if out.returncode != 0:
        sys.exit(f"{' '.join(args[:4])}... failed:\n{out.stderr}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
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
        perf_s = min(timed(perf, perf_env) for _ in range(opts.runs))
        cold = []
        for _ in range(opts.runs):
            shutil.rmtree(cache, ignore_errors=True)
            cold.append(timed(probectl + opts.definitions, env))
        warm = min(timed(probectl + opts.definitions, env) for _ in range(opts.runs))
        btf = min(timed(probectl + ["--btf"] + opts.definitions, env) for _ in range(opts.runs))
    print(f"definitions: {opts.definitions}")
    print(f"perf probe -D          {perf_s:7.2f} s")
    print(f"probectl cold          {min(cold):7.2f} s   {min(cold) / perf_s:5.2f}x perf")
    print(f"probectl warm          {warm:7.2f} s   {warm / perf_s:5.2f}x perf")
    print(f"probectl --btf (warm)  {btf:7.2f} s   {btf / perf_s:5.2f}x perf")


if __name__ == "__main__":
    main()
