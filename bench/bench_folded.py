#!/usr/bin/env python3
"""Benchmark of folding the stacks of a recording (the input of a flame graph): ``probectl script
--format folded`` on probectl's ``record -g`` file against ``perf script`` plus folding (awk, as
stackcollapse-perf.pl does it) on ``perf record -g``'s file of the same workload, in one run (root):

    .venv/bin/python bench/bench_folded.py [--rounds 20000] [--runs 3]

The workload is bench_callgraph.py's (fixtures/callers.c, 51 calls of ``work()`` per round with stacks
of 3 to 44 frames: 1,020,000 stacks at 20,000 rounds). Each tool records it once; then, interleaved,
each folds its file ``--runs`` times. The table shows the best CPU time (the folding processes' user and
system time) and wall-clock time, the stacks folded and the distinct folded lines; the ratio is perf
and awk's CPU / probectl's.
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
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_callgraph import build  # noqa: E402

GROUP = f"pbfold{os.getpid()}"
# perf script -F comm,ip,sym: a "comm" line, then one "\tADDR SYMBOL" line a frame, innermost first
FOLD_AWK = r"""
/^[^ \t]/ { if (stack != "") n[comm stack]++; comm = $1; stack = ""; next }
/^[ \t]+[0-9a-f]+ / { stack = ";" $2 stack; next }
END { if (stack != "") n[comm stack]++; for (s in n) print s, n[s] }
"""


def timed(cmd: str, env: dict) -> tuple[float, float, str]:
    """(CPU, wall seconds, stdout) of a shell command line and its children."""
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    out = subprocess.run(["/bin/sh", "-c", cmd], capture_output=True, text=True, env=env, check=True).stdout
    wall = time.monotonic() - t0
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime), wall, out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=20000)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    perf = shutil.which("perf")
    if os.geteuid() != 0 or perf is None:
        sys.exit("needs root and perf")
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    probectl = f"{sys.executable} -m probectl"
    with tempfile.TemporaryDirectory(prefix="probectl-bench-fold-") as tmp_name:
        tmp = Path(tmp_name)
        binary = build(tmp, dwarf=False)
        (tmp / "fold.awk").write_text(FOLD_AWK)
        subprocess.run([sys.executable, "-m", "probectl", "add", "-x", str(binary), f"{GROUP}:work=work"], env=env,
                       check=True, capture_output=True)
        try:
            # (buffers big enough that neither loses a stack: the folding is measured, not the recording)
            subprocess.run(f"{probectl} record -g -m 65536 -e {GROUP}:work -o {tmp}/p.dat -- {binary} {args.rounds}",
                           shell=True, env=env, check=True, capture_output=True)
            subprocess.run([perf, "record", "-q", "-g", "-m", "16384", "-e", f"{GROUP}:work", "-o", str(tmp / "perf.data"),
                            "--", str(binary), str(args.rounds)], env=env, check=True, capture_output=True)
        finally:
            subprocess.run([sys.executable, "-m", "probectl", "del", f"{GROUP}:*"], env=env, capture_output=True)
        commands = {"probectl": f"{probectl} script -i {tmp}/p.dat --format folded",
                    "perf+awk": f"{perf} script -i {tmp}/perf.data -F comm,ip,sym | awk -f {tmp}/fold.awk"}
        best: dict[str, tuple[float, float, int, int]] = {}
        for _ in range(args.runs):
            for name, cmd in commands.items():
                cpu, wall, out = timed(cmd, env)
                lines = out.splitlines()
                stacks = sum(int(line.rsplit(" ", 1)[1]) for line in lines)
                if name not in best or cpu < best[name][0]:
                    best[name] = (cpu, wall, stacks, len(lines))
        print(f"{'':<10} {'CPU':>9} {'wall':>9} {'stacks':>11} {'lines':>7}")
        for name, (cpu, wall, stacks, lines) in best.items():
            print(f"{name:<10} {cpu:7.2f} s {wall:7.2f} s {stacks:>11,} {lines:>7,}")
        print(f"perf+awk CPU / probectl CPU: {best['perf+awk'][0] / best['probectl'][0]:.2f}")


if __name__ == "__main__":
    main()
