#!/usr/bin/env python3
"""probectl vs perf probe on Debian's cloud vmlinux (DWARF), every kernel path of issue 16, in one run.

Cases (probectl command / perf command on the same vmlinux):

1. entry with a member chain: ``add -D 'tcp_sendmsg size sk->__sk_common.skc_state'``;
2. a line with a stack local (CFA from the CFI): ``add -D 'tcp_sendmsg_locked:207 mss_now'``;
3. the variables at a line: ``vars tcp_sendmsg_locked:207`` / ``perf probe -V``;
4. the globals too: ``vars --externs tcp_sendmsg`` / ``perf probe -V --externs``;
5. (``--btf``) case 1 from the vmlinux's BTF, against the same perf run.

probectl runs cold (an empty cache: a new ``XDG_CACHE_HOME`` each run) and warm (the cache of the
previous runs). The commands of one case run interleaved, ``--runs`` times; the table shows the
fastest and the median wall-clock seconds, the median CPU seconds (user + system) of the child, and
the ratios probectl / perf of the fastest runs and of the median CPU times (targets of issue 16:
warm <= 0.5x, cold <= 1.0x). On a busy machine the fastest run and the CPU times are the fairest
figures: a run that waits for a core has its wall time stretched, not its CPU time.

Python's bytecode is compiled once, before timing, into a temporary PYTHONPYCACHEPREFIX (an installed
probectl has its .pyc files; a PYTHONDONTWRITEBYTECODE=1 environment would otherwise compile every
module on every run). --source-only times the runs as the environment has them instead.

    .venv/bin/python bench/bench_kernel.py [--runs N] [--source-only] [--tree CHECKOUT] [--case SUBSTRING]
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

ROOT = Path(__file__).resolve().parent.parent

# (label, probectl arguments after `-m probectl`, perf arguments after `perf probe`); VMLINUX is replaced.
CASES = [
    ("entry tcp_sendmsg size sk->..skc_state",
     ["add", "-D", "-f", "-k", "VMLINUX", "tcp_sendmsg size sk->__sk_common.skc_state"],
     ["-k", "VMLINUX", "-D", "tcp_sendmsg size sk->__sk_common.skc_state"]),
    ("line tcp_sendmsg_locked:207 mss_now",
     ["add", "-D", "-f", "-k", "VMLINUX", "tcp_sendmsg_locked:207 mss_now"],
     ["-k", "VMLINUX", "-D", "tcp_sendmsg_locked:207 mss_now"]),
    ("vars tcp_sendmsg_locked:207",
     ["vars", "-k", "VMLINUX", "tcp_sendmsg_locked:207"],
     ["-k", "VMLINUX", "-V", "tcp_sendmsg_locked:207"]),
    ("vars --externs tcp_sendmsg",
     ["vars", "-k", "VMLINUX", "--externs", "tcp_sendmsg"],
     ["-k", "VMLINUX", "-V", "tcp_sendmsg", "--externs"]),
    ("--btf tcp_sendmsg size sk->..skc_state",
     ["add", "-D", "-f", "--btf", "-k", "VMLINUX", "tcp_sendmsg size sk->__sk_common.skc_state"],
     ["-k", "VMLINUX", "-D", "tcp_sendmsg size sk->__sk_common.skc_state"]),
]


def timed(args: list[str], env: dict) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the child) of one run (which must succeed)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    out = subprocess.run(args, capture_output=True, text=True, env=env, cwd=env.get("BENCH_CWD"))
    elapsed = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if out.returncode != 0:
        sys.exit(f"{' '.join(args[:6])}... failed:\n{out.stderr}")
    return elapsed, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--source-only", action="store_true",
                        help="do not precompile bytecode (time the environment as it is)")
    parser.add_argument("--tree", type=Path, help="measure the probectl of another source tree")
    parser.add_argument("--case", action="append", default=[],
                        help="only the cases whose label contains this (repeatable)")
    opts = parser.parse_args()
    kernel = Path(subprocess.run([str(ROOT / "tools" / "kernel-testdata.sh")], capture_output=True, text=True,
                                 check=True).stdout.strip())
    vmlinux = str(kernel / "vmlinux")
    cases = [(label, [vmlinux if a == "VMLINUX" else a for a in ours], [vmlinux if a == "VMLINUX" else a for a in perf])
             for label, ours, perf in CASES if not opts.case or any(c in label for c in opts.case)]
    tree = (opts.tree or ROOT).resolve()
    with tempfile.TemporaryDirectory() as tmp:
        perf_env = dict(os.environ, HOME=tmp)
        env = dict(os.environ, PYTHONPATH=str(tree), BENCH_CWD=tmp)
        warm_env = dict(env, XDG_CACHE_HOME=str(Path(tmp) / "warm"))
        if not opts.source_only:
            env.pop("PYTHONDONTWRITEBYTECODE", None)
            env["PYTHONPYCACHEPREFIX"] = warm_env["PYTHONPYCACHEPREFIX"] = str(Path(tmp) / "pycache")
            warm_env.pop("PYTHONDONTWRITEBYTECODE", None)
            subprocess.run([sys.executable, "-m", "compileall", "-q", str(tree / "probectl")],
                           env=env, check=True, capture_output=True)
        probectl = [sys.executable, "-m", "probectl"]
        for _, ours, _ in cases:  # untimed: site-packages' bytecode, the warm cache
            timed(probectl + ours, warm_env)
        rows = []
        for number, (label, ours, theirs) in enumerate(cases):
            perf, cold, warm = [], [], []
            for i in range(opts.runs):
                perf.append(timed(["perf", "probe"] + theirs, perf_env))
                cold_env = dict(env, XDG_CACHE_HOME=str(Path(tmp) / f"cold-{number}-{i}"))
                cold.append(timed(probectl + ours, cold_env))
                shutil.rmtree(cold_env["XDG_CACHE_HOME"], ignore_errors=True)
                warm.append(timed(probectl + ours, warm_env))
            rows.append((label, perf, cold, warm))
    print(f"probectl{' from ' + str(opts.tree) if opts.tree else ''} vs perf probe on {vmlinux}, {opts.runs} runs"
          f" each, interleaved{' (source only, no bytecode)' if opts.source_only else ''}; seconds, fastest/median\n")
    print(f"{'':40} {'wall: fastest/median':^41} {'ratio':^13}   {'CPU median':^20} {'ratio':^13}")
    print(f"{'case':40} {'perf':>13} {'cold':>13} {'warm':>13} {'cold':>6} {'warm':>6}   "
          f"{'perf':>6} {'cold':>6} {'warm':>6} {'cold':>6} {'warm':>6}")
    for label, perf, cold, warm in rows:
        walls = [[w for w, _ in series] for series in (perf, cold, warm)]
        cpus = [statistics.median(c for _, c in series) for series in (perf, cold, warm)]
        cells = " ".join(f"{min(s):6.3f}/{statistics.median(s):6.3f}" for s in walls)
        print(f"{label:40} {cells} {min(walls[1]) / min(walls[0]):5.2f}x {min(walls[2]) / min(walls[0]):5.2f}x   "
              + " ".join(f"{c:6.3f}" for c in cpus) + f" {cpus[1] / cpus[0]:5.2f}x {cpus[2] / cpus[0]:5.2f}x")


if __name__ == "__main__":
    main()
