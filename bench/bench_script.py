#!/usr/bin/env python3
"""Benchmark of `probectl script` and the batch API against `trace-cmd report`, in events/s.

    sudo .venv/bin/python bench/bench_script.py [--getpid 1000000] [--uprobe-rounds 100000] [--runs 3]
    .venv/bin/python bench/bench_script.py --input FILE.dat          # an existing recording

Two recordings are made with `probectl record` (root needed), so the figures cover both kinds of
event a user prints:

1. tracepoint: ``syscalls:sys_enter_getpid`` from a child calling getpid() N times (one small
   integer field per event);
2. uprobes on the fixture program (fixtures/uprobe_target.c): ``add_ints a=%di:s32 b=%si:s32``,
   ``count_char text=+0(%di):string`` and ``hash_u64 seed=%di:x64`` (ints, a string, hex).

Each file is then read by
- ``probectl script`` (text, perf-script-like lines) in-process, and as a command (with its start-up),
- ``probectl script --format json`` and ``--format csv`` in-process,
- the Python batch API (``probectl.read_trace(path).batches()``, touching every field column) and
  per-event ``Event`` objects,
- ``trace-cmd report > /dev/null`` (the reference),
- ``perf script`` if it can read the file (it cannot: it reads perf.data only; the run says so).

All outputs go to /dev/null; the best of ``--runs`` runs counts. Figures are ratios from one run
on one machine, not absolute targets.
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
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

import probectl  # noqa: E402
from probectl.record import EventRequest, RecordOptions, Recording  # noqa: E402
from probectl.script import write_script  # noqa: E402
from probectl.tracedat import open_trace  # noqa: E402
from probectl.tracefs import Tracefs  # noqa: E402


def best_of(runs: int, fn) -> float:
    best = float("inf")
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def record(tfs: Tracefs, events: list[str], command: list[str], out: Path, buffer_kb: int) -> Path:
    rec = Recording(tfs, RecordOptions(events=[EventRequest(e) for e in events], output=out, command=command,
                                       buffer_kb=buffer_kb), notice=lambda m: None)
    with open(os.devnull, "w") as null:
        saved = os.dup(1)
        os.dup2(null.fileno(), 1)  # (the fixture prints a line per call)
        try:
            result = rec.run()
        finally:
            os.dup2(saved, 1)
            os.close(saved)
    print(f"  recorded {result.events:,} events to {out.name} ({result.bytes / 2**20:.1f} MiB), {result.lost:,} lost")
    return out


def make_recordings(tmp: Path, getpid: int, rounds: int, buffer_kb: int) -> list[tuple[str, Path]]:
    from conftest import build_fixture

    tfs = Tracefs.open()
    files = []
    loop = f"import os\ng = os.getpid\nfor _ in range({getpid}): g()"
    files.append(("tracepoint sys_enter_getpid",
                  record(tfs, ["syscalls:sys_enter_getpid"], [sys.executable, "-c", loop], tmp / "getpid.dat", buffer_kb)))
    binary = build_fixture("uprobe_target", "-O2")
    group = f"pbench{os.getpid()}"
    defs = [f"{group}:add=add_ints a=%di:s32 b=%si:s32", f"{group}:cnt=count_char text=+0(%di):string",
            f"{group}:hash=hash_u64 seed=%di:x64"]
    subprocess.run([sys.executable, "-m", "probectl", "add", "-x", str(binary), *defs], check=True,
                   capture_output=True)
    try:
        files.append(("uprobes (ints, string, hex)",
                      record(tfs, [f"{group}:*"], [str(binary), str(rounds)], tmp / "uprobes.dat", buffer_kb)))
    finally:
        subprocess.run([sys.executable, "-m", "probectl", "del", f"{group}:*"], capture_output=True)
    return files


def measure(path: Path, runs: int) -> dict[str, float]:
    out: dict[str, float] = {}
    with open_trace(path) as t:
        n = sum(len(b) for b in t.reader().batches())
    out["events"] = n
    null = open(os.devnull, "w")

    def script(kind: str):
        def run() -> None:
            with open_trace(path) as t:
                write_script(t, null, kind)
        return run

    out["probectl script (text)"] = best_of(runs, script("text"))
    out["probectl script (command)"] = best_of(runs, lambda: subprocess.run(
        [sys.executable, "-m", "probectl", "script", "-i", str(path)], stdout=null, stderr=null, check=True))
    out["probectl script --format json"] = best_of(runs, script("json"))
    out["probectl script --format csv"] = best_of(runs, script("csv"))

    def batches() -> None:
        with probectl.read_trace(path) as t:
            formats = t.formats
            for batch in t.batches():
                for f in formats:
                    for field in f.event_fields:
                        try:
                            col = batch.column(f, field.name)
                        except KeyError:
                            continue
                        len(col)

    def objects() -> None:
        with probectl.read_trace(path) as t:
            for ev in t:
                ev.fields

    out["batch API (columns)"] = best_of(runs, batches)
    out["Event objects"] = best_of(max(1, runs // 2), objects)
    if shutil.which("trace-cmd"):
        out["trace-cmd report"] = best_of(runs, lambda: subprocess.run(
            ["trace-cmd", "report", str(path)], stdout=null, stderr=null, check=True))
    if shutil.which("perf"):
        p = subprocess.run(["perf", "script", "-i", str(path)], capture_output=True, text=True)
        if p.returncode == 0 and "incompatible" not in p.stderr + p.stdout:
            out["perf script"] = best_of(runs, lambda: subprocess.run(
                ["perf", "script", "-i", str(path)], stdout=null, stderr=null))
        else:
            out["perf script (cannot read trace.dat)"] = float("nan")
    null.close()
    return out


def report(title: str, path: Path, m: dict[str, float]) -> None:
    n = m.pop("events")
    print(f"\n{title}: {int(n):,} events, {path.stat().st_size / 2**20:.1f} MiB ({path.name})")
    print(f"  {'reader':34} {'seconds':>8} {'M events/s':>11} {'vs trace-cmd report':>20}")
    ref = m.get("trace-cmd report")
    for name, secs in m.items():
        if secs != secs:  # nan
            print(f"  {name:34} {'-':>8} {'-':>11}")
            continue
        ratio = f"{ref / secs:.2f}x" if ref else "-"
        print(f"  {name:34} {secs:8.3f} {n / secs / 1e6:11.2f} {ratio:>20}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--input", type=Path, action="append", help="measure this trace.dat (repeatable); no recording")
    ap.add_argument("--getpid", type=int, default=1_000_000, help="getpid() calls of the tracepoint recording")
    ap.add_argument("--uprobe-rounds", type=int, default=100_000, help="rounds of the fixture (3 events each)")
    ap.add_argument("--buffer-kb", type=int, default=16384, help="ring buffer per CPU while recording")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--keep", type=Path, help="keep the recordings in this directory")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="probectl-bench-") as tmp:
        if args.input:
            files = [(p.name, p) for p in args.input]
        else:
            if os.geteuid() != 0:
                sys.exit("bench_script: recording needs root (or give --input FILE)")
            print("recording:")
            files = make_recordings(Path(tmp), args.getpid, args.uprobe_rounds, args.buffer_kb)
            if args.keep:
                args.keep.mkdir(parents=True, exist_ok=True)
                for _, p in files:
                    shutil.copy(p, args.keep / p.name)
        for title, path in files:
            report(title, path, measure(path, args.runs))


if __name__ == "__main__":
    main()
