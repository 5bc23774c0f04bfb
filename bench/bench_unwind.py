#!/usr/bin/env python3
"""Benchmark of the CFI unwinder (probectl/debuginfo/dwarf/unwind.py) against perf script's own DWARF
unwinding of the same perf.data.

    .venv/bin/python bench/bench_unwind.py [--runs 3] [--count 400000] [--frequency 10000]

One ``perf record -e cpu-clock --call-graph dwarf`` of Debian's dd (built without frame pointers;
its stacks go through libc and ld.so, 3-8 frames deep) makes the input: each sample carries the user
registers and 8 KiB of stack. Then, interleaved, in fresh processes each run:

- perf: ``perf script -F ip`` (it reads the file, unwinds each sample with libdw and prints the
  addresses);
- probectl: the samples read from the file (tests/perfdata.py), unwound by probectl's unwinder, the
  addresses printed as perf prints them.

Both print every sample's frames, and the bench checks that they are the same, address for address,
before it prints a figure. Each side's CPU time and wall-clock time include starting the process and
reading the file; the table shows the fastest and the median, the stacks per second and the ratio.
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
sys.path.insert(0, str(ROOT))  # the tests package, for its perf.data reader


def unwind_file(path: str) -> None:
    """The probectl side, in its own process: every sample's user frames, one line of hex addresses each."""
    from probectl.debuginfo.dwarf.unwind import CallFrameFiles, StackCopy, Unwinder, registers_from_perf
    from probectl.debuginfo.elf import ElfFile
    from tests.perfdata import read_perf_data

    recorded = read_perf_data(Path(path))
    files, elves = CallFrameFiles(), {}
    unwinders: dict[int, Unwinder] = {}
    out = []
    for sample in recorded.samples:
        regs = registers_from_perf(sample.regs_mask, sample.regs)
        if not sample.regs or regs.get(16, 0) >= 0xFFFF800000000000:
            out.append("")
            continue
        unwinder = unwinders.get(sample.pid)
        if unwinder is None:
            unwinder = unwinders[sample.pid] = Unwinder(recorded.mappings.get(sample.pid, []), files)
        addresses = []
        for f in unwinder.unwind(regs, StackCopy(regs[7], sample.stack)):
            if f.kind == "unknown":
                continue
            m = unwinder.mapping(f.address)
            if m is None:
                continue
            if m.path not in elves:
                elves[m.path] = ElfFile(m.path)
            addresses.append(elves[m.path].offset_to_vaddr(f.address - m.start + m.offset) - (f.kind == "return"))
        out.append(" ".join(f"{a:x}" for a in addresses))
    sys.stdout.write("\n".join(out) + "\n")


def perf_stacks(text: str) -> list[str]:
    """perf script -F ip's blocks as unwind_file's lines (kernel frames and inlined duplicates out)."""
    lines = []
    for block in text.strip("\n").split("\n\n"):
        addresses: list[int] = []
        for word in block.split():
            if word == "(inlined)":
                continue
            a = int(word, 16)
            if a < 0xFFFF800000000000 and (not addresses or addresses[-1] != a):
                addresses.append(a)
        lines.append(" ".join(f"{a:x}" for a in addresses))
    return lines


def timed(cmd: list[str]) -> tuple[float, float, str]:
    """(wall seconds, CPU seconds of the child, its stdout)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--count", type=int, default=400_000, help="dd's count of 1-byte blocks (the run's length)")
    parser.add_argument("--frequency", type=int, default=10_000, help="perf's sampling frequency")
    parser.add_argument("--unwind-only", metavar="PERF_DATA", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.unwind_only:
        unwind_file(args.unwind_only)
        return
    perf = shutil.which("perf")
    if perf is None:
        sys.exit("perf (apt linux-perf) is not installed")
    with tempfile.TemporaryDirectory(prefix="bench-unwind-") as tmp:
        data = os.path.join(tmp, "perf.data")
        subprocess.run([perf, "record", "-q", "-e", "cpu-clock", "-F", str(args.frequency), "--call-graph", "dwarf",
                        "-o", data, "--", "dd", "if=/dev/zero", "of=/dev/null", "bs=1", f"count={args.count}"],
                       capture_output=True, check=True)
        tools = {"perf script": [perf, "script", "-i", data, "-F", "ip"],
                 "probectl": [sys.executable, __file__, "--unwind-only", data]}
        times: dict[str, list[tuple[float, float]]] = {name: [] for name in tools}
        answers: dict[str, list[str]] = {}
        for _ in range(args.runs):
            for name, cmd in tools.items():
                wall, cpu, out = timed(cmd)
                times[name].append((wall, cpu))
                answers[name] = perf_stacks(out) if name == "perf script" else out.rstrip("\n").split("\n")
        ours = [line for line in answers["probectl"] if line]
        theirs = [line for line in answers["perf script"] if line]
        if ours != theirs:
            differ = sum(a != b for a, b in zip(ours, theirs)) + abs(len(ours) - len(theirs))
            sys.exit(f"the unwinders disagree on {differ} of {max(len(ours), len(theirs))} stacks: no figures")
    frames = sum(len(line.split()) for line in ours)
    print(f"{len(ours):,} user stacks ({frames:,} frames) from perf record --call-graph dwarf of dd, "
          f"the same frames from both; {args.runs} runs each, interleaved")
    print(f"{'':14} {'wall min':>9} {'wall med':>9} {'CPU min':>9} {'CPU med':>9} {'stacks/s (CPU med)':>19}")
    medians = {}
    for name, pairs in times.items():
        walls, cpus = [w for w, _ in pairs], [c for _, c in pairs]
        medians[name] = statistics.median(cpus)
        print(f"{name:14} {min(walls):9.3f} {statistics.median(walls):9.3f} {min(cpus):9.3f} {medians[name]:9.3f} "
              f"{len(ours) / medians[name]:19,.0f}")
    print(f"probectl / perf script, median CPU time: {medians['probectl'] / medians['perf script']:.2f}x")


if __name__ == "__main__":
    main()
