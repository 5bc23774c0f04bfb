#!/usr/bin/env python3
"""Benchmark of `probectl report` and `probectl query` against `trace-cmd report | awk`, in events/s.

    .venv/bin/python bench/bench_answers.py [--events 5000000] [--runs 3] [--keep FILE]

A trace.dat of N uprobe events (``probe_bench:malloc`` with ``__probe_ip`` and ``size``, from 6
commands and 12 threads on 2 CPUs, sizes from a fixed table) is synthesized by :mod:`synth`, so no
root and no tracing are needed. Then, end to end as a user runs them (interpreter start-up, imports,
decoding, SQL and printing included), on the same file in one run:

- ``probectl report -i FILE --sort comm`` (malloc calls per command),
- ``probectl report -i FILE --hist size`` (a log2 histogram of the sizes, the kernel's buckets),
- ``probectl query -i FILE 'SELECT comm, count(*), sum(size) FROM probe_bench.malloc GROUP BY comm'``,
- ``trace-cmd report FILE | awk`` counting the lines per command (the seeds' way), the reference.

The per-command counts of report, query and awk are checked to be the same before the figures are
printed. Each figure is the best of ``--runs`` runs, in wall time and in CPU time (user + system of
the command and its children: the whole pipeline for awk); events/s is N divided by it; the ratios
are against the awk pipeline. The targets of issue 13: at least 10 M events/s, and 20x the pipeline.
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
COMMS = ["make", "cc1", "ld", "bash", "python3", "sshd"]
THREADS = {3000 + i: COMMS[i % len(COMMS)] for i in range(12)}
SIZES = [16, 24, 24, 32, 64, 100, 128, 256, 1000, 4096, 65536, 24]


def children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def timed(cmd: list[str] | str, runs: int, shell: bool = False) -> tuple[float, float, str]:
    """The best wall time and the best CPU time (user + system of the command and its children,
    the whole pipeline for a shell) of ``runs`` runs, and the output."""
    best, best_cpu, out = float("inf"), float("inf"), ""
    for _ in range(runs):
        start, cpu = time.monotonic(), children_cpu()
        proc = subprocess.run(cmd, shell=shell, capture_output=True, text=True, env=_env())
        took, used = time.monotonic() - start, children_cpu() - cpu
        if proc.returncode:
            raise SystemExit(f"{cmd} failed: {proc.stderr}")
        best, best_cpu, out = min(best, took), min(best_cpu, used), proc.stdout
    return best, best_cpu, out


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    # (start-up as an installed package has it, its bytecode cached: with PYTHONDONTWRITEBYTECODE
    # set, a module changed since its .pyc was written is compiled again on every run, some 0.03 s
    # of CPU when a few dozen are; the first run writes them, and the best of the runs is shown)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--events", type=int, default=5_000_000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--keep", metavar="FILE", help="keep the synthesized trace.dat here")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-answers-"))
    try:
        path = tmp / "bench.dat"
        start = time.monotonic()
        want: Counter = Counter()
        for (tid, _size), n in synthesize(path, args.events, tmp, threads=THREADS, sizes=SIZES).items():
            want[THREADS[tid]] += n
        print(f"synthesized {args.events:,} events ({path.stat().st_size / 2**20:.0f} MiB) "
              f"in {time.monotonic() - start:.1f} s")
        if args.keep:
            shutil.copy(path, args.keep)
        probectl = [sys.executable, "-m", "probectl"]
        results = []

        t, c, out = timed([*probectl, "report", "-i", str(path), "--sort", "comm", "--json"], args.runs)
        got = {r["comm"]: r["samples"] for r in json.loads(out)["rows"]}
        assert got == want, (got, want)
        results.append(("probectl report --sort comm", t, c))

        t, c, out = timed([*probectl, "report", "-i", str(path), "--hist", "size", "--json"], args.runs)
        assert json.loads(out)["histograms"][0]["total"] == args.events
        results.append(("probectl report --hist size", t, c))

        sql = "SELECT comm, count(*) AS n, sum(size) AS bytes FROM probe_bench.malloc GROUP BY comm"
        t, c, out = timed([*probectl, "query", "-i", str(path), "--json", sql], args.runs)
        got = {r["comm"]: r["n"] for r in json.loads(out)}
        assert got == want, (got, want)
        results.append(("probectl query (count, sum by comm)", t, c))

        tracecmd = shutil.which("trace-cmd")
        ref = None
        if tracecmd:
            awk = ("awk '{sub(/-[0-9]+$/, \"\", $1); c[$1]++} END {for (k in c) print k, c[k]}'")
            t, c, out = timed(f"{tracecmd} report {path} 2>/dev/null | {awk}", max(1, min(args.runs, 2)), shell=True)
            got = {k: int(v) for k, v in (line.split() for line in out.splitlines()) if k in want}
            assert got == want, (got, want)
            ref = (t, c)
            results.append(("trace-cmd report | awk (reference)", t, c))
        else:
            print("trace-cmd is not installed: no reference pipeline")

        print(f"\n{'':38} {'wall s':>7} {'M ev/s':>7} {'vs awk':>7}   {'CPU s':>6} {'M ev/s':>7} {'vs awk':>7}")
        for name, t, c in results:
            r1 = f"{ref[0] / t:6.1f}x" if ref else "      -"
            r2 = f"{ref[1] / c:6.1f}x" if ref else "      -"
            print(f"{name:38} {t:7.2f} {args.events / t / 1e6:7.2f} {r1:>7}   "
                  f"{c:6.2f} {args.events / c / 1e6:7.2f} {r2:>7}")
        print(f"\n(load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs: on a shared machine the CPU "
              "figures are the steadier ones)")
        print("\ntargets (issue 13): >= 10 M events/s end to end, >= 20x the awk pipeline")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
