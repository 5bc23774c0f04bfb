#!/usr/bin/env python3
"""Benchmark of ``probectl record -g`` on a uprobe at a high event rate against ``perf record -g`` on
the same workload, in one run (root, live tracing):

    .venv/bin/python bench/bench_callgraph.py [--rounds 10000] [--runs 3] [-m KB] [--dwarf]

The workload is fixtures/callers.c built ``-O1 -fno-omit-frame-pointer`` (51 calls of ``work()`` per
round, through callers, ``middle()`` and a recursion 40 deep: stacks of 3 to 44 frames). A uprobe at
``work`` is added for the run and removed at the end. Each tool runs the workload as its command:

- ``probectl record -g -e GROUP:work -o FILE -- callers ROUNDS``
- ``perf record -g -e GROUP:work -o FILE -- callers ROUNDS``

For each: events recorded (probectl's summary line; ``perf report --stats``'s SAMPLE count), events
not recorded (the workload's calls less those recorded; probectl's own lost count is checked to be
that number: perf's LOST records count chunks, not events), the file's size, and the CPU time of the recorder alone: the CPU of all the tool's children minus
the workload's own (the workload runs under ``sh -c '...; times'``, which prints it; the kernel's work
for each uprobe hit, the same for both tools, is charged to the workload). The run of median CPU of ``--runs`` (the fewest CPU would pick a run that lost events), and the events each run lost;
the ratio is perf's recorder CPU / probectl's.

``--dwarf``: the workload built ``-O2 -fomit-frame-pointer`` and both tools with ``--call-graph dwarf``
(8 KiB of stack with each event). probectl unwinds the copies when the recording ends, perf at each
``perf script``: perf's row adds the CPU of one ``perf script -F ip`` of its file (the unwinding that
gives the frames probectl's file already has), and its recorder-only CPU is shown beside it.
"""
from __future__ import annotations

import argparse
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GROUP = f"pbench{os.getpid()}"


def build(tmp: Path, dwarf: bool) -> Path:
    out = tmp / "callers"
    flags = ["-O2", "-fomit-frame-pointer"] if dwarf else ["-O1", "-fno-omit-frame-pointer"]
    subprocess.run(["gcc", *flags, "-g", "-o", str(out), str(ROOT / "fixtures/callers.c")], check=True)
    return out


def workload_cpu(stdout: str) -> float:
    """The workload's own user + system CPU from the ``times`` line of its shell (its children's)."""
    lines = [l for l in stdout.splitlines() if re.match(r"^\d+m[\d.]+s \d+m[\d.]+s$", l)]
    total = 0.0
    for part in lines[-1].split():
        m = re.match(r"(\d+)m([\d.]+)s", part)
        total += int(m.group(1)) * 60 + float(m.group(2))
    return total


def run(cmd: list[str], env: dict, workload: bool = True) -> tuple[float, str, str]:
    """The CPU time of ``cmd`` and its children less the workload's own (when it runs one), its output."""
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, check=True)
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    return cpu - (workload_cpu(proc.stdout) if workload else 0.0), proc.stdout, proc.stderr


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=10000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("-m", dest="buffer_kb", type=int, default=None, help="buffer per CPU, KB (both tools)")
    ap.add_argument("--dwarf", action="store_true", help="-O2 without frame pointers, --call-graph dwarf")
    args = ap.parse_args()
    graph = ["--call-graph", "dwarf"] if args.dwarf else ["-g"]
    perf = shutil.which("perf")
    if os.geteuid() != 0 or perf is None:
        sys.exit("needs root and perf")
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    probectl = [sys.executable, "-m", "probectl"]
    with tempfile.TemporaryDirectory(prefix="probectl-bench-cg-") as tmp_name:
        tmp = Path(tmp_name)
        binary = build(tmp, args.dwarf)
        workload = ["/bin/sh", "-c", '"$0" "$1"; times', str(binary), str(args.rounds)]
        subprocess.run(probectl + ["add", "-x", str(binary), f"{GROUP}:work=work"], env=env, check=True,
                       capture_output=True)
        try:
            rows = {}
            for _ in range(args.runs):
                out = tmp / "probectl.dat"
                m = ["-m", str(args.buffer_kb)] if args.buffer_kb else []
                cpu, _stdout, err = run(probectl + ["record", *graph, *m, "-e", f"{GROUP}:work", "-o", str(out), "--",
                                                    *workload], env)
                events = int(re.search(r"\[ probectl record: ([\d,]+) event", err).group(1).replace(",", ""))
                lost_m = re.search(r"([\d,]+) lost \]", err)
                lost = int(lost_m.group(1).replace(",", "")) if lost_m else 0
                assert lost == 51 * args.rounds - events, (lost, events)  # every event recorded or counted lost
                size = out.stat().st_size
                rows.setdefault("probectl", []).append((cpu, events, lost, size, cpu))

                out = tmp / "perf.data"
                m = ["-m", f"{max(1, args.buffer_kb // 4)}"] if args.buffer_kb else []  # (pages of 4 KiB)
                cpu, _stdout, err = run([perf, "record", "-q", *graph, *m, "-e", f"{GROUP}:work", "-o", str(out),
                                         "--", *workload], env)
                stats = subprocess.run([perf, "report", "-i", str(out), "--stats"], capture_output=True,
                                       text=True).stdout
                events = int(re.search(r"SAMPLE events:\s+(\d+)", stats).group(1))
                lost = 51 * args.rounds - events
                size = out.stat().st_size
                recorder = cpu
                if args.dwarf:
                    unwind_cpu, _stdout, _err = run([perf, "script", "-i", str(out), "-F", "ip"], env, workload=False)
                    cpu += unwind_cpu
                rows.setdefault("perf", []).append((cpu, events, lost, size, recorder))
        finally:
            subprocess.run(probectl + ["del", f"{GROUP}:*"], env=env, capture_output=True)
        expected = 51 * args.rounds
        print(f"workload: {expected:,} calls of work() with stacks of 3 to 44 frames")
        head = "CPU to frames" if args.dwarf else "recorder CPU"
        print(f"{'':<10} {head:>13} {'events':>11} {'not rec.':>9} {'file':>10}")
        median = {}
        for name in ("probectl", "perf"):
            runs = sorted(rows[name])
            cpu, events, lost, size, recorder = median[name] = runs[len(runs) // 2]
            extra = f"   (recorder alone {recorder:.2f} s)" if args.dwarf and name == "perf" else ""
            print(f"{name:<10} {cpu:11.2f} s {events:>11,} {lost:>9,} {size / 2**20:8.1f} MiB{extra}"
                  f"   not recorded in each run: {', '.join(f'{r[2]:,}' for r in rows[name])}")
        ratio = median["perf"][0] / median["probectl"][0] if median["probectl"][0] > 0 else float("inf")
        print(f"perf CPU / probectl CPU: {ratio:.2f}")


if __name__ == "__main__":
    main()
