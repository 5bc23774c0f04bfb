#!/usr/bin/env python3
"""Benchmark of user-space ``probectl hist`` aggregation against the seeds' way, ``trace-cmd report |
awk``, on the same 5M events, in one run:

    .venv/bin/python bench/bench_hist.py [--events 5000000] [--runs 3]

A trace.dat of ``probe_libc:malloc`` events (``u64 size`` drawn from a fixed table, 8 threads) is
synthesized by :mod:`synth`, so no root and no live tracing is needed. Then, on that file:

- ``probectl hist -i FILE probe_libc:malloc --key size`` (the command, start-up included): the pages
  go to the native aggregator (native/aggregate.c), no Python object per event;
- the same with ``--key comm,size --log2`` (two keys, buckets, names at the end);
- ``trace-cmd report FILE | awk`` counting ``size=`` values (the reference);

and the answers are checked to be equal before any figure is printed. CPU time (user + system of
the child processes) is the best of ``--runs``; the ratio is trace-cmd+awk CPU / probectl CPU.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from synth import synthesize

ROOT = Path(__file__).resolve().parent.parent
SIZES = (8, 24, 100, 4096, 5000, 64, 32, 512)
THREADS = {p: f"worker{p % 4}" for p in range(1000, 1008)}


def best_of(runs: int, fn):
    wall = cpu = float("inf")
    out = None
    for _ in range(runs):
        r0, t0 = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
        out = fn()
        t1, r1 = time.perf_counter(), resource.getrusage(resource.RUSAGE_CHILDREN)
        wall = min(wall, t1 - t0)
        cpu = min(cpu, (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime))
    return wall, cpu, out


def line(what: str, wall: float, cpu: float, events: int) -> None:
    print(f"{what:<38} {wall:7.2f} s wall {cpu:7.2f} s CPU {events / cpu / 1e6:6.1f} M ev/CPU-s")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=5_000_000)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    trace_cmd = shutil.which("trace-cmd")
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    with tempfile.TemporaryDirectory(prefix="probectl-bench-hist-") as tmp:
        path = Path(tmp) / "malloc.dat"
        counts: Counter = Counter()
        for (_tid, size), n in synthesize(path, args.events, Path(tmp), threads=THREADS, sizes=SIZES,
                                          system="probe_libc", event_id=2001).items():
            counts[size] += n
        total = sum(counts.values())
        print(f"{total:,} events, {path.stat().st_size / 2**20:.0f} MiB")

        def probectl(*keys: str):
            out = subprocess.run([sys.executable, "-m", "probectl", "hist", "-i", str(path), "probe_libc:malloc",
                                  *keys, "--json"], capture_output=True, text=True, env=env, check=True)
            return json.loads(out.stdout)

        def awk():
            report = subprocess.Popen([trace_cmd, "report", str(path)], stdout=subprocess.PIPE,
                                      stderr=subprocess.DEVNULL)
            out = subprocess.run(["awk", '{ for (i = 1; i <= NF; i++) if ($i ~ /^size=/) c[substr($i, 6)]++ } '
                                  'END { for (k in c) print k, c[k] }'], stdin=report.stdout, capture_output=True,
                                 text=True, check=True)
            report.wait()
            return out.stdout

        w1, c1, got = best_of(args.runs, lambda: probectl("--key", "size"))
        assert {r["key"]["size"]: r["count"] for r in got["rows"]} == dict(counts), "probectl's counts differ"
        w2, c2, got2 = best_of(args.runs, lambda: probectl("--key", "comm,size", "--log2"))
        assert sum(r["count"] for r in got2["rows"]) == total
        line("probectl hist --key size", w1, c1, total)
        line("probectl hist --key comm,size --log2", w2, c2, total)
        if not trace_cmd:
            print("trace-cmd report | awk: skipped (no trace-cmd)")
            return
        w3, c3, text = best_of(1, awk)
        ref = {int(k): int(v) for k, v in (line.split() for line in text.splitlines())}
        assert ref == dict(counts), "trace-cmd | awk counted otherwise"
        line("trace-cmd report | awk", w3, c3, total)
        print(f"ratio (CPU): trace-cmd|awk / probectl hist = {c3 / c1:.1f}x")


if __name__ == "__main__":
    main()
