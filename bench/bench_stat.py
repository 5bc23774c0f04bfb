#!/usr/bin/env python3
"""Benchmark of ``probectl stat`` counting one uprobe's events against ``perf stat`` and against
``probectl record`` + ``probectl report``, on the same workload, in one run (root, tracefs):

    .venv/bin/python bench/bench_stat.py [--hits 10000000] [--runs 2]

The workload is fixtures/stat_target.c built here: its two threads call ``alpha()`` ``--hits`` times
in all (no system calls: ``SYSCALLS`` 0). ``probe_stat_target:alpha`` is added once (``probectl add``),
and each tool counts it for one run of the workload:

- ``perf stat -e probe_stat_target:alpha -- WORKLOAD`` (the reference);
- ``probectl stat -e probe_stat_target:alpha -- WORKLOAD`` (a counting perf event: no event leaves the kernel);
- ``probectl record -e … -- WORKLOAD`` then ``probectl report`` (every event written and read back).

The counts are checked to be the program's own before any figure is printed. CPU is user + system
time of the tool and the workload it runs (best of ``--runs``); the workload alone, without the probe,
is measured too, so that what a uprobe hit costs the program (the trap, paid whoever counts it) and
what each tool adds over it are printed, with the ratios. probectl's cost note (``stat``, the end of
``record``) names an event whose rate makes that cost about 1% of a CPU: the per-hit cost printed
here is the figure behind it (probectl.analysis.counting.COSTLY_RATE).
"""
from __future__ import annotations

import argparse
import csv
import io
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROBECTL = [sys.executable, "-m", "probectl"]
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


def cpu_of(argv: list[str], runs: int, **kw) -> tuple[float, float, subprocess.CompletedProcess]:
    """Best (wall, CPU of the command and its children) of ``runs`` runs, and the last run's output."""
    wall = cpu = float("inf")
    out = None
    for _ in range(runs):
        r0, t0 = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
        out = subprocess.run(argv, capture_output=True, text=True, env=ENV, check=True, **kw)
        t1, r1 = time.perf_counter(), resource.getrusage(resource.RUSAGE_CHILDREN)
        wall = min(wall, t1 - t0)
        cpu = min(cpu, (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime))
    assert out is not None
    return wall, cpu, out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hits", type=int, default=10_000_000)
    ap.add_argument("--runs", type=int, default=2)
    args = ap.parse_args()
    perf = shutil.which("perf")
    if perf is None or os.geteuid() != 0:
        sys.exit("needs root and perf (apt-get install linux-perf)")
    with tempfile.TemporaryDirectory() as tmp:
        prog = Path(tmp) / "stat_target"
        subprocess.run(["gcc", "-O0", "-g", "-pthread", "-o", str(prog), str(ROOT / "fixtures/stat_target.c")],
                       check=True)
        workload = [str(prog), "1", "0", str(args.hits // 2), "0"]
        event = "probe_stat_target:alpha"
        subprocess.run([*PROBECTL, "add", "-x", str(prog), "alpha"], env=ENV, check=True, capture_output=True)
        try:
            w_alone, c_alone, _ = cpu_of(workload, args.runs)
            w_perf, c_perf, perf_out = cpu_of([perf, "stat", "-x", ",", "-e", event, "--", *workload], args.runs)
            w_stat, c_stat, stat_out = cpu_of([*PROBECTL, "stat", "-x", ",", "-e", event, "--", *workload], args.runs)
            dat = Path(tmp) / "alpha.dat"
            w_rec, c_rec, _ = cpu_of([*PROBECTL, "record", "-m", "8192", "-e", event, "-o", str(dat), "--", *workload],
                                     args.runs)
            w_rep, c_rep, rep_out = cpu_of([*PROBECTL, "report", "-i", str(dat), "--json"], 1)
        finally:
            subprocess.run([*PROBECTL, "del", "probe_stat_target:*"], env=ENV, capture_output=True)
    want = args.hits // 2 * 2

    def count_of(text: str) -> int:
        return next(int(row[0]) for row in csv.reader(io.StringIO(text)) if row and row[2:3] == [event])

    assert count_of(perf_out.stderr) == want, perf_out.stderr
    assert count_of(stat_out.stdout) == want, stat_out.stdout
    recorded = rep_out.stdout.count(event)  # (a sanity check: the report names the event)
    assert recorded, rep_out.stdout[:500]
    per_hit_us = (c_perf - c_alone) / want * 1e6
    print(f"{want:,} hits of one uprobe ({event}); CPU = the tool and the workload, best of {args.runs}")
    print(f"{'workload alone (no probe)':<34} {w_alone:7.2f} s wall {c_alone:7.2f} s CPU")
    print(f"{'perf stat':<34} {w_perf:7.2f} s wall {c_perf:7.2f} s CPU")
    print(f"{'probectl stat':<34} {w_stat:7.2f} s wall {c_stat:7.2f} s CPU")
    print(f"{'probectl record + report':<34} {w_rec + w_rep:7.2f} s wall {c_rec + c_rep:7.2f} s CPU"
          f"  (record {c_rec:.2f}, report {c_rep:.2f})")
    print(f"a uprobe hit costs the program {per_hit_us:.2f} µs of CPU (perf stat's run over the workload alone)")
    print(f"probectl stat / perf stat CPU: {c_stat / c_perf:.2f}x; over the workload: "
          f"{c_stat - c_alone:.2f} s against {c_perf - c_alone:.2f} s")
    print(f"record + report / probectl stat CPU: {(c_rec + c_rep) / c_stat:.2f}x")


if __name__ == "__main__":
    main()
