#!/usr/bin/env python3
"""Benchmark of the native core: recording and decoding, against plain readers and trace-cmd.

    sudo .venv/bin/python bench/bench_native.py [--events 1000000] [--keep trace.dat]

1. Recording: a child process calls getpid() N times with syscalls:sys_enter_getpid enabled in
   a private instance; the pages are copied to per-CPU files by
   - probectl's native recorder with splice (the default),
   - the same recorder in read() mode,
   - a plain Python read() loop (one read per page, as the simplest reader would),
   and for each the CPU time of the recording process (user + system) and the events kept and
   lost are printed. (trace-cmd record cannot run on this kernel: the function tracer is locked.)
2. Decoding the splice recording, written as trace.dat v7: probectl's columnar batch API, its
   row tuples, its per-event Python objects, and ``trace-cmd report > /dev/null``, in events/s,
   with ratios.

All figures come from one run on one machine; they are ratios to compare, not absolute targets.
"""
from __future__ import annotations

import argparse
import contextlib
import os
import resource
import select
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from probectl.formats import EventFormat  # noqa: E402
from probectl.ringbuf import PageLayout, Recorder  # noqa: E402
from probectl.tracedat import collect_metadata, open_trace, read_cpustats, write_tracedat  # noqa: E402

TRACEFS = Path("/sys/kernel/tracing")
EVENT = "syscalls/sys_enter_getpid"


@contextlib.contextmanager
def instance(name: str, buffer_kb: int):
    path = TRACEFS / "instances" / name
    path.mkdir()
    try:
        (path / "buffer_size_kb").write_text(str(buffer_kb))
        (path / "events" / EVENT / "enable").write_text("1")
        yield path
    finally:
        with contextlib.suppress(OSError):
            (path / "events" / EVENT / "enable").write_text("0")
        for _ in range(50):
            try:
                path.rmdir()
                break
            except OSError:
                time.sleep(0.1)


def workload(n: int) -> int:
    """Fork a child that calls getpid() n times; return its pid once it has finished."""
    pid = os.fork()
    if pid == 0:
        try:
            getpid = os.getpid
            for _ in range(n):
                getpid()
        finally:
            os._exit(0)
    os.waitpid(pid, 0)
    return pid


def cpu_time() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def python_read_loop(inst: Path, cpus: list[int], out_dir: Path, page_size: int, stop: threading.Event) -> None:
    """The simplest reader: select() then read() one page at a time, per CPU in one thread."""
    fds = {os.open(inst / "per_cpu" / f"cpu{c}" / "trace_pipe_raw", os.O_RDONLY | os.O_NONBLOCK): c for c in cpus}
    outs = {c: open(out_dir / f"cpu{c}.raw", "wb") for c in cpus}
    try:
        def drain(fd: int) -> None:
            while True:
                try:
                    data = os.read(fd, page_size)
                except BlockingIOError:
                    return
                if not data:
                    return
                outs[fds[fd]].write(data.ljust(page_size, b"\0"))

        while not stop.is_set():
            ready, _, _ = select.select(list(fds), [], [], 0.05)
            for fd in ready:
                drain(fd)
        for fd in fds:
            drain(fd)
    finally:
        for fd in fds:
            os.close(fd)
        for f in outs.values():
            f.close()


def record(mode: str, n: int, out_dir: Path, buffer_kb: int) -> dict:
    cpus = list(range(os.cpu_count() or 1))
    with instance(f"probectl-bench-{os.getpid()}", buffer_kb) as inst:
        layout = PageLayout.from_header_page((inst / "events/header_page").read_text())
        fmt = EventFormat.parse((inst / "events" / EVENT / "format").read_text(), "syscalls")
        before_cpu, before_wall = cpu_time(), time.monotonic()
        if mode == "python-read":
            stop = threading.Event()
            thread = threading.Thread(target=python_read_loop, args=(inst, cpus, out_dir, layout.page_size, stop))
            thread.start()
            child = workload(n)
            (inst / "tracing_on").write_text("0")
            stop.set()
            thread.join()
            files = {c: out_dir / f"cpu{c}.raw" for c in cpus}
        else:
            with Recorder(inst, cpus, out_dir, layout.page_size, use_read=(mode == "native-read")) as rec:
                rec.start()
                child = workload(n)
                (inst / "tracing_on").write_text("0")
                rec.stop()
            files = rec.files
        used, wall = cpu_time() - before_cpu, time.monotonic() - before_wall
        stats = read_cpustats(inst, cpus)
        meta = collect_metadata(inst, ["syscalls"], kallsyms=False)
        meta.cpustats = stats
    lost = sum(int(s.split("overrun:")[1].split()[0]) + int(s.split("dropped events:")[1].split()[0])
               for s in stats.values())
    path = out_dir / "trace.dat"
    write_tracedat(path, meta, files)
    with open_trace(path) as t:
        reader = t.reader(formats=[fmt])
        kept = 0
        for batch in reader.batches():
            kept += sum(1 for p in batch.pid if p == child)
        flagged = sum(s["missed_events"] for s in reader.stats())
    return dict(mode=mode, cpu=used, wall=wall, kept=kept, lost=lost, flagged=flagged, path=path,
                size=sum(f.stat().st_size for f in files.values()))


def best_of(runs: int, fn) -> float:
    best = float("inf")
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def decode(path: Path, runs: int) -> dict:
    with open_trace(path) as t:
        total = sum(len(b) for b in t.reader().batches())

        def columns() -> None:
            for batch in t.reader().batches():
                batch.column("syscalls:sys_enter_getpid", "__syscall_nr")

        def rows() -> None:
            for _rows, _lost in t.reader().rows():
                pass

        def events() -> None:
            for _ in t.events():
                pass

        out = {"events": total, "columns": best_of(runs, columns), "rows": best_of(runs, rows),
               "objects": best_of(max(1, runs // 2), events)}
    if shutil.which("trace-cmd"):
        with open(os.devnull, "w") as null:
            out["trace-cmd report"] = best_of(max(1, runs // 3), lambda: subprocess.run(
                ["trace-cmd", "report", str(path)], stdout=null, stderr=null, check=True))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--buffer-kb", type=int, default=1410, help="per-CPU buffer (the kernel's default)")
    ap.add_argument("--runs", type=int, default=3, help="decoding runs (the best counts)")
    ap.add_argument("--keep", type=Path, help="keep the splice recording as this trace.dat")
    args = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("bench_native: recording needs root")
    n = args.events
    print(f"recording {n:,} sys_enter_getpid events, buffer {args.buffer_kb} KiB/CPU, {os.cpu_count()} CPUs")
    print(f"{'recorder':14} {'CPU s':>7} {'wall s':>7} {'kept':>10} {'lost':>8} {'MiB':>7}")
    results = {}
    with tempfile.TemporaryDirectory(prefix="probectl-bench-") as tmp:
        for mode in ("native-splice", "native-read", "python-read"):
            out_dir = Path(tmp) / mode
            out_dir.mkdir()
            r = record(mode, n, out_dir, args.buffer_kb)
            results[mode] = r
            print(f"{mode:14} {r['cpu']:7.3f} {r['wall']:7.3f} {r['kept']:10,} {r['lost']:8,} {r['size'] / 2**20:7.1f}")
        base = results["native-splice"]["cpu"]
        for mode in ("native-read", "python-read"):
            print(f"CPU time {mode} / native-splice: {results[mode]['cpu'] / base:.1f}x")
        path = results["native-splice"]["path"]
        d = decode(path, args.runs)
        size = path.stat().st_size
        if args.keep:
            shutil.copy(path, args.keep)
    total = d["events"]
    print(f"\ndecoding {total:,} events ({size / 2**20:.1f} MiB trace.dat v7), best of runs")
    for name in ("columns", "rows", "objects", "trace-cmd report"):
        if name in d:
            print(f"{name:18} {d[name]:7.3f} s {total / d[name] / 1e6:8.2f} M events/s")
    if "trace-cmd report" in d:
        print(f"columnar batch API vs trace-cmd report: {d['trace-cmd report'] / d['columns']:.0f}x")
        print(f"row tuples         vs trace-cmd report: {d['trace-cmd report'] / d['rows']:.1f}x")
        print(f"Event objects      vs trace-cmd report: {d['trace-cmd report'] / d['objects']:.1f}x")


if __name__ == "__main__":
    main()
