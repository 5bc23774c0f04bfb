#!/usr/bin/env python3
"""Benchmark of flame graph generation: `probectl flamegraph --folded` on 1M samples of 100k distinct
stacks, against flamegraph.pl on the same input in the same run when it is available.

    .venv/bin/python bench/bench_flamegraph.py [--runs 5] [--flamegraph-pl PATH] [--samples N --distinct N]

The input is folded text from random walks down a call graph (tests/test_pictures.py's generator:
each function calls a few others, some far more often), written once to a temporary file. Each tool
reads it and writes an SVG at the same width and minimum frame width (1200 px, 0.1 px); the runs are
interleaved and the table shows the fastest and the median wall-clock time, and the SVG's size and
frame count. flamegraph.pl is in no Debian package: without it, the figures are probectl's alone.
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the tests package

from tests.test_pictures import call_graph_stacks  # noqa: E402


def timed(cmd: list[str]) -> float:
    start = time.perf_counter()
    with open(os.devnull, "wb") as devnull:
        subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=devnull, stderr=subprocess.PIPE, check=True)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--samples", type=int, default=1_000_000)
    parser.add_argument("--distinct", type=int, default=100_000)
    parser.add_argument("--flamegraph-pl", default=shutil.which("flamegraph.pl"), metavar="PATH")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="bench-flamegraph-") as tmp:
        folded = Path(tmp) / "stacks.folded"
        folded.write_text("".join(call_graph_stacks(args.distinct, args.samples)))
        ours = Path(tmp) / "probectl.svg"
        env_python = [sys.executable, "-m", "probectl"]
        tools = {"probectl": env_python + ["flamegraph", "--folded", "-i", str(folded), "-o", str(ours)]}
        if args.flamegraph_pl:
            tools["flamegraph.pl"] = [args.flamegraph_pl, "--width", "1200", "--minwidth", "0.1", str(folded)]
        times: dict[str, list[float]] = {name: [] for name in tools}
        for _ in range(args.runs):
            for name, cmd in tools.items():
                times[name].append(timed(cmd))
        theirs_size = None
        if args.flamegraph_pl:
            svg = subprocess.run(tools["flamegraph.pl"], capture_output=True, check=True).stdout
            theirs_size = len(svg)
        size = ours.stat().st_size
        frames = ours.read_text().count("<g><title>") + ours.read_text().count('<g class="k"><title>')
        print(f"input: {args.samples:,} samples, {args.distinct:,} distinct stacks, "
              f"{folded.stat().st_size / 1e6:.1f} MB folded")
        print(f"{'tool':<14} {'fastest s':>10} {'median s':>10} {'SVG MB':>8} {'frames':>8}")
        for name, ts in times.items():
            mb = (size if name == "probectl" else theirs_size) / 1e6
            shown = f"{frames:>8,}" if name == "probectl" else f"{'':>8}"
            print(f"{name:<14} {min(ts):>10.2f} {statistics.median(ts):>10.2f} {mb:>8.2f} {shown}")
        if args.flamegraph_pl:
            print(f"ratio probectl / flamegraph.pl (fastest): {min(times['probectl']) / min(times['flamegraph.pl']):.2f}")
        else:
            print("flamegraph.pl: not found (no Debian package ships it; --flamegraph-pl PATH to compare)")


if __name__ == "__main__":
    main()
