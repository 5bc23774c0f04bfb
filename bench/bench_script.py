#!/usr/bin/env python3
"""Benchmark of `probectl script` and the batch API against `trace-cmd report`, in events/s.

    sudo .venv/bin/python bench/bench_script.py [--getpid 5000000] [--uprobe-rounds 1000000] [--runs 3]
    .venv/bin/python bench/bench_script.py --input FILE.dat          # an existing recording

Two recordings are made with `probectl record` (root needed), so the figures cover both kinds of
event a user prints:

1. tracepoint: ``syscalls:sys_enter_getpid`` from a child calling getpid() N times (one small
   integer field per event);
2. uprobes on the fixture program (fixtures/uprobe_target.c): ``add_ints a=%di:s32 b=%si:s32``,
   ``count_char text=+0(%di):string`` and ``hash_u64 seed=%di:x64`` (ints, a string, hex).

Each file is then read by
- ``probectl script`` as a command, as a user runs it (start-up and imports included): text (the
  default fields), text with every ``-F`` field, ``--format json`` and ``--format csv``;
- ``write_script`` in-process, text/JSON/CSV, through the native formatter (what the command uses)
  and through the Python formatter (``native=False``, the reference whose bytes it equals);
- the same file opened only, and opened and decoded only (no formatting), to show what formatting
  adds; and ``write_script`` in a fresh interpreter that imports only probectl.script (what the
  command costs without the imports of the other commands);
- the Python batch API (``probectl.read_trace(path).batches()``, touching every field column) and
  per-event ``Event`` objects;
- ``trace-cmd report > /dev/null`` (the reference);
- ``perf script`` if it can read the file (it cannot: it reads perf.data only; the run says so).
The command's fixed cost (interpreter, imports, opening a file) is measured once, on the committed
104-event sample.

The default sizes (5M tracepoint events, 3M uprobe events) are files a ``trace-cmd report`` user
has; ``--getpid``/``--uprobe-rounds`` make smaller ones (the command's fixed cost weighs more there).

probectl runs as an installed program would: with its bytecode cached (``PYTHONPYCACHEPREFIX`` in a
temporary directory, compiled by an untimed first run), even when the environment sets
``PYTHONDONTWRITEBYTECODE``; ``--no-bytecode-cache`` measures without it. Before timing, the
command's text output is checked to be the Python formatter's, byte for byte.

All outputs go to /dev/null; the best of ``--runs`` runs counts, for wall time and for CPU time
(user + system) separately: on a machine shared with other work CPU time is the steadier figure.
Figures are ratios from one run on one machine, not absolute targets.
"""
from __future__ import annotations

import argparse
import filecmp
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # probectl and the tests package

import probectl  # noqa: E402
from probectl.record import EventRequest, RecordOptions, Recording  # noqa: E402
from probectl.script import DEFAULT_FIELDS, write_script  # noqa: E402
from probectl.tracedat import open_trace  # noqa: E402
from probectl.tracefs import Tracefs  # noqa: E402


SAMPLE = ROOT / "tests" / "data" / "tracedat" / "sample-v7.dat"


def best_of(runs: int, fn) -> tuple[float, float]:
    """(wall, CPU) seconds of ``fn``, each the best of ``runs``; CPU counts child processes."""
    wall = cpu = float("inf")
    for _ in range(runs):
        r0, c0, t0 = resource.getrusage(resource.RUSAGE_CHILDREN), time.process_time(), time.perf_counter()
        fn()
        t1, c1, r1 = time.perf_counter(), time.process_time(), resource.getrusage(resource.RUSAGE_CHILDREN)
        wall = min(wall, t1 - t0)
        cpu = min(cpu, c1 - c0 + (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime))
    return wall, cpu


ENV = dict(os.environ)  # the environment of the commands timed (see main)


def command(argv: list[str]):
    def run() -> None:
        with open(os.devnull, "wb") as null:
            subprocess.run(argv, stdout=null, stderr=subprocess.DEVNULL, check=True, env=ENV)
    return run


def check_output(path: Path) -> None:
    """The command prints what the Python formatter prints (and, untimed, compiles its bytecode).
    Both run in child processes writing to files: holding the text here would grow this process,
    and a large parent slows the processes it starts (and so every figure after it)."""
    reference = ("import sys; from probectl.script import write_script; from probectl.tracedat import open_trace\n"
                 "with open_trace(sys.argv[1]) as t, open(sys.argv[2], 'w', encoding='utf-8') as out:\n"
                 "    write_script(t, out, native=False)")
    with tempfile.TemporaryDirectory(prefix="probectl-bench-check-") as tmp:
        got, want = Path(tmp) / "command.txt", Path(tmp) / "python.txt"
        with open(got, "wb") as out:
            subprocess.run(probectl_script(path), stdout=out, check=True, env=ENV)
        subprocess.run([sys.executable, "-c", reference, str(path), str(want)], check=True, env=ENV)
        if not filecmp.cmp(got, want, shallow=False):
            sys.exit(f"bench_script: probectl script's output differs from the Python formatter's on {path}")


def probectl_script(path: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "probectl", "script", "-i", str(path), *args]


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
    from tests.helpers import build_fixture

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
                   capture_output=True, env=ENV)
    try:
        files.append(("uprobes (ints, string, hex)",
                      record(tfs, [f"{group}:*"], [str(binary), str(rounds)], tmp / "uprobes.dat", buffer_kb)))
    finally:
        subprocess.run([sys.executable, "-m", "probectl", "del", f"{group}:*"], capture_output=True, env=ENV)
    return files


def measure(path: Path, runs: int) -> dict[str, tuple[float, float]]:
    out: dict[str, tuple[float, float]] = {}
    with open_trace(path) as t:
        n = sum(len(b) for b in t.reader().batches(1 << 16))  # (small batches: this process stays small)
    out["events"] = (n, n)
    check_output(path)
    null = open(os.devnull, "w")

    out["probectl script (command)"] = best_of(runs, command(probectl_script(path)))
    out["probectl script -F <all> (command)"] = best_of(runs, command(probectl_script(
        path, "-F", "comm,pid,tid,cpu,time,event,ip,sym,trace")))
    out["probectl script --format json (cmd)"] = best_of(runs, command(probectl_script(path, "--format", "json")))
    out["probectl script --format csv (cmd)"] = best_of(runs, command(probectl_script(path, "--format", "csv")))
    out["fresh python, probectl.script only"] = best_of(runs, command(_fresh_script(path)))
    if shutil.which("trace-cmd"):  # (measured before this process holds decoded data)
        out["trace-cmd report"] = best_of(runs, command(["trace-cmd", "report", str(path)]))

    def script(kind: str, native: bool):
        fields = ("time", "cpu", "pid", "tid", "comm", "event", "trace") if kind == "csv" else DEFAULT_FIELDS

        def run() -> None:
            with open_trace(path) as t:
                write_script(t, null, kind, fields, native=native)
        return run

    for kind in ("text", "json", "csv"):
        out[f"write_script {kind} (native)"] = best_of(runs, script(kind, True))
    for kind in ("text", "json", "csv"):
        out[f"write_script {kind} (Python formatter)"] = best_of(max(1, runs // 2), script(kind, False))

    def open_only() -> None:
        with open_trace(path):
            pass

    out["open_trace only (metadata, formats)"] = best_of(runs, open_only)

    def decode_only() -> None:
        with open_trace(path) as t:
            reader = t.reader()
            while reader._native.scan_ids(1 << 16) is not None:
                pass
            reader.close()

    out["open + decode only (no formatting)"] = best_of(runs, decode_only)

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
    if shutil.which("perf"):
        p = subprocess.run(["perf", "script", "-i", str(path)], capture_output=True, text=True)
        if p.returncode == 0 and "incompatible" not in p.stderr + p.stdout:
            out["perf script"] = best_of(runs, command(["perf", "script", "-i", str(path)]))
        else:
            out["perf script (cannot read trace.dat)"] = (float("nan"), float("nan"))
    null.close()
    return out


def report(title: str, path: Path, m: dict[str, tuple[float, float]]) -> None:
    n = m.pop("events")[0]
    print(f"\n{title}: {int(n):,} events, {path.stat().st_size / 2**20:.1f} MiB ({path.name})")
    print(f"  {'reader':40} {'wall s':>7} {'cpu s':>7} {'M ev/s':>7} {'vs trace-cmd report':>20}")
    print(f"  {'':40} {'':>7} {'':>7} {'(wall)':>7} {'wall':>9} {'cpu':>10}")
    ref = m.get("trace-cmd report")
    for name, (wall, cpu) in m.items():
        if wall != wall:  # nan
            print(f"  {name:40} {'-':>7} {'-':>7} {'-':>7}")
            continue
        ratio = f"{ref[0] / wall:8.2f}x {ref[1] / cpu:9.2f}x" if ref else "-"
        print(f"  {name:40} {wall:7.3f} {cpu:7.3f} {n / wall / 1e6:7.2f} {ratio:>20}")


def fixed_cost(runs: int) -> None:
    """The command's cost that does not grow with the file: interpreter, imports, opening."""
    wall, cpu = best_of(runs, command(probectl_script(SAMPLE)))
    bare = best_of(runs, command([sys.executable, "-c", "pass"]))
    imports = best_of(runs, command([sys.executable, "-c", "import probectl.cli"]))
    module = best_of(runs, command([sys.executable, "-c", "import probectl.cli.recording"]))
    alone = best_of(runs, command(_fresh_script(SAMPLE)))
    print(f"\nprobectl script's fixed cost: {wall:.3f} s wall, {cpu:.3f} s CPU on the 104-event sample "
          f"(python -c pass: {bare[0]:.3f} s; import probectl.cli: {imports[0]:.3f} s wall, {imports[1]:.3f} s CPU; "
          f"import probectl.cli.recording, the script command's module: {module[0]:.3f} s; "
          f"probectl.script alone, no command line: {alone[0]:.3f} s)")


def _fresh_script(path: Path) -> list[str]:
    return [sys.executable, "-c", ("import sys; from probectl.script import write_script; "
                                   "from probectl.tracedat import open_trace\n"
                                   f"with open_trace({str(path)!r}) as t: write_script(t, sys.stdout)")]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--input", type=Path, action="append", help="measure this trace.dat (repeatable); no recording")
    ap.add_argument("--getpid", type=int, default=5_000_000, help="getpid() calls of the tracepoint recording")
    ap.add_argument("--uprobe-rounds", type=int, default=1_000_000, help="rounds of the fixture (3 events each; it takes at most 1,000,000)")
    ap.add_argument("--buffer-kb", type=int, default=16384, help="ring buffer per CPU while recording")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--keep", type=Path, help="keep the recordings in this directory")
    ap.add_argument("--no-bytecode-cache", action="store_true",
                    help="run probectl without cached bytecode (as with PYTHONDONTWRITEBYTECODE=1)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="probectl-bench-") as tmp:
        if args.no_bytecode_cache:
            ENV["PYTHONDONTWRITEBYTECODE"] = "1"
        else:
            ENV.pop("PYTHONDONTWRITEBYTECODE", None)
            ENV["PYTHONPYCACHEPREFIX"] = str(Path(tmp) / "pycache")
        subprocess.run(probectl_script(SAMPLE), capture_output=True, env=ENV)  # (bytecode compiled)
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
        fixed_cost(args.runs)
        for title, path in files:
            report(title, path, measure(path, args.runs))


if __name__ == "__main__":
    main()
