"""A trace.dat recorded live reads the same in trace-cmd (offline: tests/test_tracedat.py)."""
from __future__ import annotations

import os
import re
import subprocess

import pytest

from probectl.ringbuf import PageLayout, Recorder
from probectl.tracedat import collect_metadata, open_trace, read_cpustats, write_tracedat

from tests.live.test_native import getpid_child, tracefs_instance
from tests.test_tracedat import assert_same_events, decoded, parse_report, trace_cmd_report


@pytest.mark.root
@pytest.mark.tracecmd
@pytest.mark.parametrize("version", [6, 7])
def test_recorded_file_reads_the_same_in_trace_cmd(live_tracefs, trace_cmd_bin, tmp_path, version):
    n = 500
    events = ["syscalls/sys_enter_getpid", "sched/sched_process_exec"]
    cpus = list(range(os.cpu_count() or 1))
    with tracefs_instance(live_tracefs, events) as inst:
        layout = PageLayout.from_header_page((inst / "events/header_page").read_text())
        with Recorder(inst, cpus, tmp_path, layout.page_size) as rec:
            rec.start()
            child = getpid_child(n)
            true = subprocess.Popen(["/bin/true"])
            true.wait()
            (inst / "trace_marker").write_text("probectl live marker")
            (inst / "tracing_on").write_text("0")
            rec.stop()
        meta = collect_metadata(inst, ["syscalls", "sched"])
        meta.cpustats = read_cpustats(inst, cpus)
        path = tmp_path / "live.dat"
        write_tracedat(path, meta, rec.files, version=version)
    report = parse_report(trace_cmd_report(trace_cmd_bin, path))
    with open_trace(path) as t:
        ours = decoded(t)
        assert t.kallsyms.startswith(b"ffffffff")  # root reads the real addresses
        assert t.cpus == len(cpus)
        assert_same_events(report, ours, t.kallsyms)
    mine = [e for e in ours if e[2] == child and e[3] == "sys_enter_getpid"]
    assert len(mine) == n and {e[4]["__syscall_nr"] for e in mine} == {39}
    assert [e[4]["filename"] for e in ours if e[3] == "sched_process_exec" and e[2] == true.pid] == ["/bin/true"]
    assert [e[4]["buf"] for e in ours if e[3] == "print"] == ["probectl live marker"]
    # With kallsyms in the file, trace-cmd names the marker's caller.
    text = subprocess.run([trace_cmd_bin, "report", str(path)], capture_output=True, text=True).stdout
    assert re.search(r"print:\s+\w+.*probectl live marker", text)
    assert "0x" not in next(line for line in text.splitlines() if "probectl live marker" in line).split("print:")[1]
