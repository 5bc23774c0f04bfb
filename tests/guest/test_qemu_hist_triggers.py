"""hist and latency's kernel path in ONE qemu boot of Debian's cloud kernel (vmtest.busybox_guest): the
trigger texts made on the host, written in the guest over a workload of known reads and sleeps, and
the guest's hist files read back with probectl's parser (this machine's kernel has no hist triggers)."""
from __future__ import annotations

import re
import shlex

import pytest

from tests.helpers import missing
from vmtest.busybox_guest import run_in_guest

pytestmark = pytest.mark.qemu


def test_kernel_hist_and_latency_in_one_qemu_boot(live_tracefs, kernel_dir):
    """Trigger texts made on the host (keys checked against this machine's syscall formats, which the
    guest's 6.1 kernel shares), run in the guest on a workload of known reads and sleeps, and the
    guest's hist files read back with probectl's parser."""
    from probectl.analysis.keys import parse_keys, parse_value
    from probectl.analysis.latency import result_from_kernel
    from probectl.analysis.triggers import hist_trigger, latency_triggers, parse_hist
    from probectl.tracefs import new_error_log_entry
    from probectl.formats import EventFormat

    events = live_tracefs / "events" / "syscalls"
    if not (events / "sys_enter_read").exists():
        missing("no syscall tracepoints to take the formats from")
    read = EventFormat.parse((events / "sys_enter_read" / "format").read_text(), "syscalls")
    sleep_in = EventFormat.parse((events / "sys_enter_clock_nanosleep" / "format").read_text(), "syscalls")
    sleep_out = EventFormat.parse((events / "sys_exit_clock_nanosleep" / "format").read_text(), "syscalls")
    by_count = parse_keys("count", read)
    by_comm_log2 = parse_keys("comm,count.log2", read)
    total = parse_value("count", read)
    flt = 'comm == "dd"'
    h1 = hist_trigger(by_count, total, filter_text=flt)
    h2 = hist_trigger(by_comm_log2, filter_text=flt)
    lat = latency_triggers("probectl_lat_test", "syscalls.sys_enter_clock_nanosleep",
                           parse_keys("common_pid", sleep_in),
                           parse_keys("common_pid", sleep_out), start_filter="flags == 0", end_filter="ret == 0")
    # latency --filter in the kernel: a start filter that no sleep passes leaves its histogram empty
    none = latency_triggers("probectl_lat_none", "syscalls.sys_enter_clock_nanosleep",
                            parse_keys("common_pid", sleep_in), parse_keys("common_pid", sleep_out),
                            start_filter="flags == 12345")
    # latency --pairs in the kernel (live.kernel_latency_pairs): in a second instance, the synthetic
    # event enabled, the start and end events not (their triggers run in soft mode), then the
    # triggers taken back out before the instance is removed
    pairs = latency_triggers("probectl_lat_pairs", "syscalls.sys_enter_clock_nanosleep",
                             parse_keys("common_pid", sleep_in), parse_keys("common_pid", sleep_out),
                             start_filter="flags == 0")
    inst2 = "instances/probectl-2/events"
    bad = hist_trigger(parse_keys("buf.sym", read)).replace("buf.sym", "nosuchthing.sym")  # as a stale format would
    exec_fmt = EventFormat.parse((live_tracefs / "events/sched/sched_process_exec/format").read_text(), "sched")
    by_stack = parse_keys("stacktrace", exec_fmt)
    kmalloc = EventFormat.parse((live_tracefs / "events/kmem/kmalloc/format").read_text(), "kmem")
    by_site = parse_keys("call_site.sym,bytes_req.buckets=64", kmalloc)
    # the latency triggers go where probectl's runner puts them: in its own instance (the synthetic
    # event is global), with the three events enabled there
    inst = "instances/probectl-1/events"
    triggers = [("events/syscalls/sys_enter_read/trigger", h1),
                ("events/syscalls/sys_enter_read/trigger", h2),
                ("synthetic_events", lat.synthetic),
                (f"{inst}/syscalls/sys_enter_clock_nanosleep/trigger", lat.start),
                (f"{inst}/syscalls/sys_exit_clock_nanosleep/trigger", lat.end),
                (f"{inst}/synthetic/{lat.synthetic_name}/trigger", lat.histogram),
                (f"{inst}/syscalls/sys_enter_clock_nanosleep/enable", "1"),
                (f"{inst}/syscalls/sys_exit_clock_nanosleep/enable", "1"),
                (f"{inst}/synthetic/{lat.synthetic_name}/enable", "1"),
                ("synthetic_events", none.synthetic),
                (f"{inst}/syscalls/sys_enter_clock_nanosleep/trigger", none.start),
                (f"{inst}/syscalls/sys_exit_clock_nanosleep/trigger", none.end),
                (f"{inst}/synthetic/{none.synthetic_name}/trigger", none.histogram),
                (f"{inst}/synthetic/{none.synthetic_name}/enable", "1"),
                ("synthetic_events", pairs.synthetic),
                (f"{inst2}/synthetic/{pairs.synthetic_name}/enable", "1"),
                (f"{inst2}/syscalls/sys_enter_clock_nanosleep/trigger", pairs.start),
                (f"{inst2}/syscalls/sys_exit_clock_nanosleep/trigger", pairs.end),
                ("events/sched/sched_process_exec/trigger", hist_trigger(by_stack)),
                ("events/kmem/kmalloc/trigger", hist_trigger(by_site)),
                ("events/syscalls/sys_enter_read/trigger", bad)]
    workload = ("dd if=/dev/zero of=/dev/null bs=100 count=3 2>/dev/null\n"
                "dd if=/dev/zero of=/dev/null bs=4096 count=5 2>/dev/null\n"
                "for us in 2000 4000 8000 16000; do usleep $us; done\n"
                "T=/sys/kernel/tracing; echo 0 > $T/instances/probectl-2/tracing_on\n"
                "cat $T/instances/probectl-2/trace\n"
                f"rmdir $T/instances/probectl-2 || echo RMDIR-REFUSED-WITH-TRIGGERS\n"
                f"echo {shlex.quote('!' + pairs.end)} >> $T/{inst2}/syscalls/sys_exit_clock_nanosleep/trigger\n"
                f"echo {shlex.quote('!' + pairs.start)} >> $T/{inst2}/syscalls/sys_enter_clock_nanosleep/trigger\n"
                "rmdir $T/instances/probectl-2 && echo RMDIR-OK\n"
                f"echo '!{pairs.synthetic_name}' >> $T/synthetic_events && echo SYNTHETIC-REMOVED\n")
    hists = ["events/syscalls/sys_enter_read/hist", f"{inst}/synthetic/{lat.synthetic_name}/hist",
             "events/sched/sched_process_exec/hist", "events/kmem/kmalloc/hist",
             f"{inst}/synthetic/{none.synthetic_name}/hist", "instances/probectl-1/trace"]
    result = run_in_guest(kernel_dir, [], workload, enable=[], triggers=triggers, hists=hists,
                          instances=["probectl-1", "probectl-2"])
    # the kernel refused the bad trigger and said why; probectl shows the last error_log entry
    assert len(result.trigger_errors) == 1 and "nosuchthing" in result.trigger_errors[0], result.trigger_errors
    log = new_error_log_entry("", result.trigger_errors[0].split("\n", 1)[1])
    assert "nosuchthing" in log and "^" in log, log
    other = "[  1.000000] trace_kprobe: error: Invalid register name\n  Command: p:x/y f %zz\n                   ^"
    assert new_error_log_entry(other, other + "\n" + log) == log  # another writer's entry is not ours
    assert new_error_log_entry(other, other) == ""
    # stacks and symbols as the kernel prints them
    stacks = parse_hist(result.hists[hists[2]], "sched:sched_process_exec", by_stack)
    assert stacks.total >= 2 and any("execve" in r.key[0] for r in stacks.rows), result.hists[hists[2]]
    sites = parse_hist(result.hists[hists[3]], "kmem:kmalloc", by_site)
    assert sites.total > 0 and all(r.key[0] >> 63 and r.key[1] % 64 == 0 for r in sites.rows)
    text = result.hists[hists[0]]
    table = parse_hist(text, "syscalls:sys_enter_read", by_count, total)
    assert table.path == "kernel"
    assert {r.key[0]: (r.count, r.sum) for r in table.rows} == {100: (3, 300), 4096: (5, 5 * 4096)}
    second = text[text.index("# event histogram", text.index("Totals:")):]
    table2 = parse_hist(second, "syscalls:sys_enter_read", by_comm_log2)
    assert {r.key: r.count for r in table2.rows} == {("dd", 7): 3, ("dd", 12): 5}
    latency = result_from_kernel("syscalls:sys_enter_clock_nanosleep", "syscalls:sys_exit_clock_nanosleep",
                                 parse_hist(result.hists[hists[1]], lat.synthetic_name,
                                            parse_keys("lat", _synthetic_format())))
    assert latency.count == 4, result.hists[hists[1]]
    # each sleep at least as asked (in order); TCG on a loaded host wakes late, never by 100 ms
    measured = latency.sorted_values()
    assert all(s <= m < s + 100_000 for s, m in zip((2000, 4000, 8000, 16000), measured)), measured
    assert parse_hist(result.hists[hists[4]], none.synthetic_name, parse_keys("lat", _synthetic_format())).total == 0
    # the synthetic event is recorded as an ordinary event in the instance's ring buffer: one
    # "lat=N" record a pair, the latencies the histogram counted (what kernel --pairs would stream)
    recorded = [int(m) for m in re.findall(rf"{lat.synthetic_name}: lat=(\d+)", result.hists[hists[5]])]
    assert sorted(recorded) == measured, result.hists[hists[5]]
    # the pairs instance: only the synthetic event reached its ring buffer, a record a sleep, each
    # at least as asked; its triggers had to go before the instance could, and then the event
    out = result.workload_output
    streamed = [int(m) for m in re.findall(rf"{pairs.synthetic_name}: lat=(\d+)", out)]
    assert len(streamed) == 4 and all(s <= m < s + 100_000 for s, m in zip((2000, 4000, 8000, 16000),
                                                                          sorted(streamed))), out
    assert "clock_nanosleep" not in out and "sys_enter" not in out, out
    assert "RMDIR-REFUSED-WITH-TRIGGERS" in out and "RMDIR-OK" in out and "SYNTHETIC-REMOVED" in out, out


def _synthetic_format():
    from probectl.formats import EventFormat

    return EventFormat.parse("name: lat\nID: 1\nformat:\n\tfield:u64 lat;\toffset:8;\tsize:8;\tsigned:0;\n"
                             "\nprint fmt: \"lat=%llu\", REC->lat\n", "synthetic")
