#!/usr/bin/env python3
"""Regenerate the trace.dat samples of this directory (needs root, tracefs and trace-cmd).

Records, in a private instance: 100 getpid() calls of a forked child (syscalls:sys_enter_getpid),
an exec of /bin/true (sched:sched_process_exec) and two trace_marker writes (ftrace:print, one
over 112 bytes so that it takes the long record form). Then writes:

  sample-v7.dat           probectl's writer, version 7 (only the recorded events' formats)
  sample-v6.dat           probectl's writer, version 6
  tracecmd-v6.dat         trace-cmd convert of sample-v7.dat to version 6
  tracecmd-v7-zstd.dat    trace-cmd convert of sample-v6.dat to version 7, zstd-compressed
  sample-report.txt       trace-cmd report -R -t sample-v7.dat: the oracle of the tests
  sample.json             what the recording did (pids, counts, marker text)

Run from the repository root: .venv/bin/python tests/data/tracedat/make_samples.py
"""
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[2]))  # the checkout: the tests package, for the live helpers

from tests.live.test_native import getpid_child, tracefs_instance  # noqa: E402

from probectl.ringbuf import PageLayout, Recorder  # noqa: E402
from probectl.tracedat import collect_metadata, read_cpustats, write_tracedat  # noqa: E402

EVENTS = ["syscalls/sys_enter_getpid", "sched/sched_process_exec"]
MARKERS = ["probectl sample marker", "long " + "x" * 150]


def main() -> None:
    tracefs = Path("/sys/kernel/tracing")
    cpus = list(range(os.cpu_count() or 1))
    with tempfile.TemporaryDirectory() as tmp, tracefs_instance(tracefs, EVENTS) as inst:
        layout = PageLayout.from_header_page((inst / "events/header_page").read_text())
        with Recorder(inst, cpus, tmp, layout.page_size) as rec:
            rec.start()
            child = getpid_child(100)
            exe = subprocess.Popen(["/bin/true"])
            exe.wait()
            for text in MARKERS:
                (inst / "trace_marker").write_text(text)
            (inst / "tracing_on").write_text("0")
            rec.stop()
        meta = collect_metadata(inst, ["syscalls", "sched"], kallsyms=False)
        meta.cpustats = read_cpustats(inst, cpus)
        wanted = {e.split("/")[1] for e in EVENTS}
        meta.event_formats = [
            (system, [t for t in texts if re.search(r"^name: (\S+)", t, re.M).group(1) in wanted])
            for system, texts in meta.event_formats
        ]
        # Keep the pid -> comm lines of this recording only (saved_cmdlines is system-wide).
        keep = {str(child), str(exe.pid), str(os.getpid())}
        meta.cmdlines = "".join(line + "\n" for line in meta.cmdlines.splitlines() if line.split(" ")[0] in keep)
        meta.uname = "Linux sample 6.18 x86_64"
        meta.trace_id = 0x5A4D504C45
        write_tracedat(HERE / "sample-v7.dat", meta, rec.files, version=7)
        write_tracedat(HERE / "sample-v6.dat", meta, rec.files, version=6)
    subprocess.run(["trace-cmd", "convert", "-i", HERE / "sample-v7.dat", "-o", HERE / "tracecmd-v6.dat",
                    "--file-version", "6"], check=True, capture_output=True)
    subprocess.run(["trace-cmd", "convert", "-i", HERE / "sample-v6.dat", "-o", HERE / "tracecmd-v7-zstd.dat",
                    "--file-version", "7", "--compression", "zstd"], check=True, capture_output=True)
    report = subprocess.run(["trace-cmd", "report", "-R", "-t", HERE / "sample-v7.dat"], check=True,
                            capture_output=True, text=True).stdout
    (HERE / "sample-report.txt").write_text(report)
    (HERE / "sample.json").write_text(json.dumps({
        "getpid_pid": child, "getpid_count": 100, "exec_pid": exe.pid, "exec_filename": "/bin/true",
        "marker_pid": os.getpid(), "markers": MARKERS,
    }, indent=2) + "\n")


if __name__ == "__main__":
    main()
