#!/usr/bin/env python3
"""Benchmark of the CFI unwinder (probectl/debuginfo/dwarf/unwind.py) against perf script's own DWARF
unwinding of the same perf.data.

    .venv/bin/python bench/bench_unwind.py [--runs 3] [--count 400000] [--frequency 10000]

One ``perf record -e cpu-clock --call-graph dwarf`` of Debian's dd (built without frame pointers;
its stacks go through libc and ld.so, 3-8 frames deep) makes the input: each sample carries the user
registers and 8 KiB of stack. Then, interleaved, in fresh processes each run:

- perf: ``perf script --no-inline -F ip`` (it reads the file, unwinds each sample with libdw and prints the
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
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the tests package, for its perf.data reader


def unwind_file(path: str) -> None:
    """The probectl side, in its own process: every sample's user frames, one line of hex addresses each."""
    from probectl.debuginfo.dwarf.unwind import CallFrameFiles, StackCopy, Unwinder, registers_from_perf
    from tests.perfdata import file_addresses, read_perf_data

    recorded = read_perf_data(Path(path))
    files = CallFrameFiles()
    elves: dict[str, Any] = {}
    unwinders: dict[int, Unwinder] = {}
    out = []
    for sample in recorded.samples:
        regs = registers_from_perf(sample.regs_mask, sample.regs)
        if not sample.regs:
            out.append("-")
            continue
        unwinder = unwinders.get(sample.pid)
        if unwinder is None:
            unwinder = unwinders[sample.pid] = Unwinder(recorded.mappings.get(sample.pid, []), files)
        frames = unwinder.unwind(regs, StackCopy(regs[7], sample.stack))
        addresses, complete = file_addresses(unwinder, frames, elves)
        out.append(" ".join([f"{a:x}" for a in addresses] + ([] if complete else ["..."])))
    sys.stdout.write("\n".join(out) + "\n")


def disagreements(ours_text: str, perf_text: str) -> tuple[int, int, int]:
    """(samples whose frames differ, samples compared, samples perf gave no user frame of), by
    tests/perfdata.py's rule, from unwind_file's lines and perf script --no-inline -F ip's output."""
    from tests.perfdata import perf_script_stacks, same_frames

    theirs = perf_script_stacks(perf_text)
    ours = ours_text.rstrip("\n").split("\n")
    if len(ours) != len(theirs):
        return max(len(ours), len(theirs)), 0, 0
    differ = compared = empty = 0
    for line, perf_frames in zip(ours, theirs):
        if line == "-":
            continue
        words = line.split()
        complete = not words or words[-1] != "..."
        addresses = [int(w, 16) for w in (words if complete else words[:-1])]
        differ += not same_frames((addresses, complete), perf_frames)
        compared += bool(perf_frames)
        empty += not perf_frames
    return differ, compared, empty


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
        tools = {"perf script": [perf, "script", "--no-inline", "-i", data, "-F", "ip"],
                 "probectl": [sys.executable, __file__, "--unwind-only", data]}
        times: dict[str, list[tuple[float, float]]] = {name: [] for name in tools}
        answers: dict[str, str] = {}
        for _ in range(args.runs):
            for name, cmd in tools.items():
                wall, cpu, out = timed(cmd)
                times[name].append((wall, cpu))
                answers[name] = out
        differ, compared, empty = disagreements(answers["probectl"], answers["perf script"])
        if differ:
            sys.exit(f"the unwinders disagree on {differ} of {compared} stacks: no figures")
    stacks = answers["probectl"].count("\n")
    print(f"{stacks:,} user stacks from perf record --call-graph dwarf of dd; the {compared:,} perf unwound: the "
          f"same frames from both ({empty} perf gave no user frame of); {args.runs} runs each, interleaved")
    print(f"{'':14} {'wall min':>9} {'wall med':>9} {'CPU min':>9} {'CPU med':>9} {'stacks/s (CPU med)':>19}")
    medians = {}
    for name, pairs in times.items():
        walls, cpus = [w for w, _ in pairs], [c for _, c in pairs]
        medians[name] = statistics.median(cpus)
        print(f"{name:14} {min(walls):9.3f} {statistics.median(walls):9.3f} {min(cpus):9.3f} {medians[name]:9.3f} "
              f"{stacks / medians[name]:19,.0f}")
    print(f"probectl / perf script, median CPU time: {medians['probectl'] / medians['perf script']:.2f}x")


if __name__ == "__main__":
    main()
