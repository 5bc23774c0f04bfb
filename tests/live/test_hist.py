"""probectl hist and latency: live uprobes on fixtures/hist_target.c (the path the running kernel takes:
in user space where it has no hist triggers, as 6.18 here), and bad input. The kernel path's trigger
texts run in a qemu guest: tests/guest/test_qemu_hist_triggers.py."""
from __future__ import annotations

import functools
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.helpers import FIXTURES, ROOT, build_program, probectl as run_probectl

probectl = functools.partial(run_probectl, env={"PYTHONPATH": str(ROOT)})


def default_path(tracefs: Path, latency: bool = False) -> tuple[str, str]:
    """The path an answer takes on the running kernel unless --user-space is given, and the words of
    its notice: in the kernel where events have a hist file (hist triggers built in) and, for a
    latency, the kernel has synthetic events; else in user space."""
    if (tracefs / "events/sched/sched_switch/hist").exists() and (not latency or (tracefs / "synthetic_events").exists()):
        return "kernel", "hist trigger in the kernel"
    return "user space", "user space aggregation"


@pytest.fixture(scope="module")
def target() -> Path:
    return build_program("hist_target", [FIXTURES / "hist_target.c"], extra=("-pthread",))


def expected(stdout: str) -> dict[str, list[dict[str, str]]]:
    out: dict[str, list[dict[str, str]]] = {}
    for line in stdout.splitlines():
        if line.startswith("EXPECT "):
            words = line.split()[1:]
            name = words[0] if "=" not in words[0] else "_"
            out.setdefault(name, []).append(dict(w.split("=", 1) for w in words if "=" in w))
    return out


def _run_json(*args: str) -> tuple[dict, str, dict]:
    out = probectl(*args)
    body = "\n".join(line for line in out.stdout.splitlines() if not line.startswith("EXPECT "))
    return json.loads(body), out.stderr, expected(out.stdout)


def test_hist_counts_and_sums_are_the_programs(live_tracefs, target):
    result, err, exp = _run_json("hist", "-x", str(target), "take size", "--key", "size", "--value", "size",
                                 "--json", "--", str(target))
    path, words = default_path(live_tracefs)
    assert words in err and ("no hist triggers" in err) == (path == "user space")
    assert result["path"] == path
    got = {r["key"]["size"]: (r["count"], r["sum"]) for r in result["rows"]}
    want = {int(e["size"]): int(e["count"]) for e in exp["take"]}
    assert got == {s: (n, s * n) for s, n in want.items()}
    # sorted by sum, biggest first
    assert [r["key"]["size"] for r in result["rows"]] == sorted(want, key=lambda s: -s * want[s])


def test_hist_by_thread_name_and_log2_buckets(live_tracefs, target):
    result, _, exp = _run_json("hist", "-x", str(target), "take size", "--key", "comm,size", "--log2", "--json",
                               "--", str(target))
    per_thread = sum(int(e["count"]) for e in exp["take"]) // 2
    counts: dict[str, int] = {}
    for r in result["rows"]:
        counts[r["key"]["comm"]] = counts.get(r["key"]["comm"], 0) + r["count"]
    assert counts == {"histA": per_thread, "histB": per_thread}
    # 4096 is in the kernel's bucket 2^12 ((2K, 4K]), 5000 in 2^13
    b12 = [r for r in result["rows"] if r["key"]["size.log2"] == 12]
    assert {r["count"] for r in b12} == {4} and b12[0]["key"]["size.log2.range"] == [2049, 4097]


def test_hist_table_has_bars_and_top(live_tracefs, target):
    out = probectl("hist", "-x", str(target), "take size", "--key", "size", "--top", "2", "--", str(target))
    rows = [line for line in out.stdout.splitlines() if line.startswith("@[") and "|" in line]
    assert len(rows) == 2 and rows[0].startswith("@[5000] 10 |@") and rows[1].startswith("@[4096]")
    result, _, exp = _run_json("hist", "-x", str(target), "take size", "--key", "size", "--top", "1", "--json",
                               "--", str(target))
    assert len(result["rows"]) == 1 and result["total"] == sum(int(e["count"]) for e in exp["take"])


def test_latency_of_a_function_by_thread(live_tracefs, target, tmp_path):
    pairs = tmp_path / "pairs.txt"
    result, err, exp = _run_json("latency", "-x", str(target), "timed", "--json", "--pairs", str(pairs),
                                 "--", str(target))
    sleeps = sorted(int(e["us"]) for e in exp["timed"] for _ in range(int(e["count"])))
    assert default_path(live_tracefs, latency=True)[1] in err
    assert result["count"] == len(sleeps) == 8
    lines = pairs.read_text().splitlines()
    assert len(lines) == 8 and all(len(line.split()) == 2 for line in lines)
    measured = sorted(int(line.split()[1]) for line in lines)
    # nanosleep sleeps at least as asked (so each latency is at least its sleep, in order); a loaded
    # machine may wake it late, never by 50 ms
    assert all(s <= m < s + 50_000 for s, m in zip(sleeps, measured)), (sleeps, measured)
    # nearest-rank percentiles of the pairs
    assert (result["min"], result["p50"], result["p90"], result["max"]) == (measured[0], measured[3], measured[7],
                                                                             measured[7])


def test_latency_in_nanoseconds(live_tracefs, target):
    result, err, exp = _run_json("latency", "-x", str(target), "timed", "--ns", "--user-space", "--json", "--",
                                 str(target))
    sleeps = sorted(int(e["us"]) * 1000 for e in exp["timed"] for _ in range(int(e["count"])))
    assert "user space aggregation" in err and "(--user-space)" in err  # asked for: the notice says so
    assert result["unit"] == "ns" and result["count"] == 8 and result["min"] >= sleeps[0]
    assert "latency_ns.log2" in result["keys"]
    from probectl.analysis.keys import parse_keys
    from probectl.analysis.triggers import latency_triggers
    from probectl.formats import EventFormat

    fmt = EventFormat.parse(fmt_text_without_comm(), "test")
    texts = latency_triggers("l", "test.plain", parse_keys("pid", fmt), parse_keys("pid", fmt), "common_timestamp")
    assert texts.start == "hist:keys=common_pid:l_ts0=common_timestamp"
    assert texts.end == "hist:keys=common_pid:l_lat=common_timestamp-$l_ts0:onmatch(test.plain).trace(l,$l_lat)"


def test_latency_filter_times_only_the_starts_it_keeps(live_tracefs, target):
    """--filter on the start event: only the sleeps of 4 ms and more are timed (the fixture's two
    threads each sleep 1, 2, 4 and 8 ms); in the kernel, the start trigger's filter."""
    result, err, exp = _run_json("latency", "--start", "timed us", "--end", "timed%return", "-x", str(target),
                                 "--filter", "us >= 4000", "--json", "--", str(target))
    sleeps = sorted(int(e["us"]) for e in exp["timed"] for _ in range(int(e["count"])) if int(e["us"]) >= 4000)
    assert default_path(live_tracefs, latency=True)[1] in err and result["count"] == len(sleeps) == 4
    assert result["min"] >= sleeps[0] and result["unmatched"] == 4  # (the returns of the filtered starts)
    out = probectl("latency", "--start", "timed us", "--end", "timed%return", "-x", str(target),
                   "--filter", "nosuch > 1", "--", str(target), check=False)
    assert out.returncode == 1 and "nosuch" in out.stderr and "Traceback" not in out.stderr
    from probectl.analysis.keys import parse_keys
    from probectl.analysis.triggers import latency_triggers
    from probectl.formats import EventFormat

    fmt = EventFormat.parse(fmt_text_without_comm(), "test")
    texts = latency_triggers("l", "test.plain", parse_keys("pid", fmt), parse_keys("pid", fmt),
                             start_filter="us >= 4000", end_filter="ret == 0")
    assert texts.start == "hist:keys=common_pid:l_ts0=common_timestamp.usecs if us >= 4000"
    assert texts.end.endswith(":onmatch(test.plain).trace(l,$l_lat) if ret == 0")


def test_latency_from_an_interrupted_recording(live_tracefs, target, tmp_path):
    group = f"hl{os.getpid()}"
    probectl("add", "-x", str(target), f"{group}:s=timed", f"{group}:e=timed%return")
    try:
        dat = tmp_path / "t.dat"
        probectl("record", "-e", f"{group}:*", "-o", str(dat), "--", str(target))
        full = json.loads(probectl("latency", "-i", str(dat), "--start", f"{group}:s", "--end", f"{group}:e__return",
                                   "--json").stdout)
        assert full["count"] == 8 and full["path"] == "recording"
        cut = tmp_path / "cut.dat"
        cut.write_bytes(dat.read_bytes()[:-100])
        out = probectl("latency", "-i", str(cut), "--start", f"{group}:s", "--end", f"{group}:e__return", check=False)
        assert "Traceback" not in out.stderr
        assert out.returncode == 0 or out.stderr.startswith("Error:")
    finally:
        probectl("del", f"{group}:*")


@pytest.mark.parametrize("args, message", [
    (("--key", "sise"), "did you mean 'size'"),
    (("--key", "size,comm,pid,cpu"), "at most 3"),
    (("--key", "stacktrace.log2"), "takes no modifier"),
    (("--key", "size.log3"), "unknown modifier .log3"),
    (("--key", "size", "--value", "sise"), "did you mean 'size'"),
])
def test_bad_keys_are_errors_that_leave_nothing(live_tracefs, target, args, message):
    out = probectl("hist", "-x", str(target), "take size", *args, "--", str(target), check=False)
    assert out.returncode == 1 and out.stderr.count("Error:") == 1 and message in out.stderr, out.stderr
    assert "Traceback" not in out.stderr


@pytest.mark.parametrize("command, message, hint", [
    (("hist", "nope:nope", "--key", "x"), "no event nope:nope", "probectl tracepoints"),
    (("hist", "sched:sched_swich", "--key", "prev_pid"), "no event sched:sched_swich", "sched:sched_switch"),
    (("latency", "--start", "sched:sched_switch", "--end", "sched/sched_wakeu"), "no event sched:sched_wakeu",
     "sched:sched_wakeup"),
    (("latency", "--start", "timed", "--end", "nope:nope"), "no event nope:nope", "probectl tracepoints"),
    (("trace", "sched:sched_swich"), "no event sched:sched_swich", "sched:sched_switch"),
    (("trace", "-e", "sched:sched_swich"), "no event matches 'sched:sched_swich'", "sched:sched_switch"),
    (("record", "-e", "nope:nope", "-o", "/dev/null"), "no event matches 'nope:nope'", "probectl tracepoints"),
])
def test_a_missing_event_is_no_event_not_a_definition(live_tracefs, target, command, message, hint):
    """A GROUP:EVENT that names no event gets "no event" and the close names, as record -e does (it was
    parsed as a probe definition: "expected a line number after ':'"); a definition added before it (the
    start of a latency) is removed again."""
    args = list(command) + (["-x", str(target)] if command[0] == "latency" else [])
    out = probectl(*args, "--", "/bin/true", check=False)
    assert out.returncode == 1 and out.stderr.startswith(f"Error: {message}\n"), out.stderr
    assert hint in out.stderr and "line number" not in out.stderr


def test_a_missing_event_of_a_recording_names_the_recorded_ones(live_tracefs, tmp_path):
    dat = tmp_path / "exec.dat"
    probectl("record", "-e", "sched:sched_process_exec", "-o", str(dat), "--", "/bin/true")
    for word, hint in (("sched:sched_process_exe", "did you mean 'sched:sched_process_exec'?"),
                       ("nope:nope", "its events: sched:sched_process_exec")):
        out = probectl("hist", "-i", str(dat), word, "--key", "pid", check=False)
        assert out.returncode == 1 and out.stderr.startswith(f"Error: {dat} has no event '{word}'\n"), out.stderr
        assert hint in out.stderr


def test_trace_streams_an_existing_event_named_among_its_definitions(live_tracefs):
    out = probectl("trace", "sched:sched_process_exec", "--", "/bin/true")
    assert "sched_process_exec" in out.stdout and 'filename="/bin/true"' in out.stdout, out.stdout


def test_kernel_stack_as_a_key_in_user_space(live_tracefs, target):
    """Each uprobe hit's kernel stack (the int3 path into the uprobe handler) is one key: every call counted,
    and the frames named from kallsyms."""
    result, _, exp = _run_json("hist", "-x", str(target), "take size", "--key", "stacktrace,comm", "--json",
                               "--", str(target))
    assert sum(r["count"] for r in result["rows"]) == sum(int(e["count"]) for e in exp["take"])
    assert {r["key"]["comm"] for r in result["rows"]} == {"histA", "histB"}
    frames = result["rows"][0]["key"]["stacktrace"]
    assert frames and any("uprobe" in f for f in frames), frames
    out = probectl("hist", "sched:sched_process_exec", "--key", "stacktrace", "--", "/bin/true")
    assert "execve" in out.stdout and out.stdout.rstrip().endswith("]: 1"), out.stdout


def test_duration_ends_a_system_wide_count(live_tracefs):
    out = probectl("hist", "sched:sched_switch", "--key", "prev_comm", "--top", "3", "--duration", "0.3", "--json")
    result = json.loads(out.stdout)
    assert result["stopped_by"] == "duration" and result["total"] > 0 and len(result["rows"]) <= 3


def test_a_system_wide_syscall_count_leaves_out_its_own_reads(live_tracefs, syscall_maker):
    """Counting every syscall of the system while reading the ring buffer: each read() of the stream
    is itself a syscall event. probectl's reads are left out (set_event_notrace_pid) and a pass reads at
    most a buffer's worth of pages (it read "until empty", which never came: 24 GB, then the OOM killer)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    run = subprocess.Popen([sys.executable, "-m", "probectl", "hist", "raw_syscalls:sys_enter", "--key", "common_pid",
                            "--duration", "1", "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           env=env)
    try:
        stdout, stderr = run.communicate(timeout=120)
    finally:
        run.kill()
    assert run.returncode == 0, stderr
    result = json.loads(stdout)
    pids = [row["key"]["pid"] for row in result["rows"]]
    assert result["stopped_by"] == "duration" and result["total"] > 0
    assert syscall_maker.pid in pids and run.pid not in pids, pids


def test_options_that_do_not_apply_to_a_recording(tmp_path):
    for extra in (("--filter", "size > 1"), ("--duration", "1")):
        out = probectl("hist", "-i", str(tmp_path / "none.dat"), "x:y", "--key", "size", *extra, check=False)
        assert out.returncode == 2 and "-i" in out.stderr and "Traceback" not in out.stderr
    for extra in (("--filter", "us > 1"), ("--end-filter", "ret > 1")):
        out = probectl("latency", "-i", str(tmp_path / "none.dat"), "x:y", *extra, check=False)
        assert out.returncode == 2 and "-i" in out.stderr and "Traceback" not in out.stderr


def test_a_start_event_that_never_fires(live_tracefs, target):
    out = probectl("latency", "-x", str(target), "never_called", "--", str(target), check=False)
    assert out.returncode == 1 and "the start event never fired" in out.stderr


def test_ctrl_c_prints_the_partial_answer_and_removes_everything(live_tracefs, target):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen([sys.executable, "-m", "probectl", "hist", "-x", str(target), "take size", "--key",
                             "size", "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    deadline = time.monotonic() + 60

    def streaming() -> bool:
        """Its instance (another run's has another pid) traces the probe: the event is enabled there
        (a new instance's tracing_on is 1 before probectl has set it up)."""
        inst = live_tracefs / "instances" / f"probectl-{proc.pid}"
        try:
            return ((inst / "events/probe_hist_target/take/enable").read_text().strip() == "1"
                    and (inst / "tracing_on").read_text().strip() == "1")
        except OSError:
            return False

    while not streaming():
        assert time.monotonic() < deadline and proc.poll() is None
        time.sleep(0.05)
    exp = expected(subprocess.run([str(target)], capture_output=True, text=True, check=True).stdout)
    time.sleep(0.5)
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 0, stderr
    got = {r["key"]["size"]: r["count"] for r in json.loads(stdout)["rows"]}
    assert got == {int(e["size"]): int(e["count"]) for e in exp["take"]}
    # its probe and its instance are gone (checked by name: other runs may be tracing meanwhile)
    assert str(target) not in (live_tracefs / "uprobe_events").read_text()
    assert not (live_tracefs / "instances" / f"probectl-{proc.pid}").exists()


def test_latency_keyed_by_a_field_pairs_requests_that_end_out_of_order(live_tracefs, target):
    result, _, exp = _run_json("latency", "-x", str(target), "--start", "begin_io id", "--end", "end_io id",
                               "--key", "id", "--buckets", "1000", "--json", "--", str(target))
    assert result["count"] == 3 and result["unmatched"] == 0 and result["pending"] == 0
    mins = sorted(int(e["min_us"]) for e in exp["io"])
    # by thread, the three would pair as 1 ms, 2 ms, 4 ms; by id they are at least 1, 3 and 7 ms
    assert result["min"] >= mins[0] and result["p50"] >= mins[1] and result["max"] >= mins[2]
    assert result["max"] < mins[2] + 50_000
    assert all(r["key"]["latency_us.buckets=1000.range"][1] - r["key"]["latency_us.buckets=1000.range"][0] == 1000
               for r in result["rows"])


def test_start_and_end_must_be_two_events(live_tracefs):
    out = probectl("latency", "--start", "sched:sched_switch", "--end", "sched:sched_switch", "--duration", "0.1",
                   check=False)
    assert out.returncode == 1 and "one event" in out.stderr, out.stderr


def test_a_key_the_kernel_cannot_hist_on():
    from probectl.analysis.keys import parse_keys
    from probectl.errors import AnalysisError
    from probectl.formats import EventFormat

    fmt = EventFormat.parse("name: stackish\nID: 7\nformat:\n"
                            "\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n"
                            "\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n\n"
                            "\tfield:unsigned long caller[8];\toffset:8;\tsize:64;\tsigned:0;\n"
                            "\tfield:char comm[16];\toffset:72;\tsize:16;\tsigned:0;\n\n"
                            "print fmt: \"x\"\n", "test")
    with pytest.raises(AnalysisError, match="a histogram key is a number or text"):
        parse_keys("caller", fmt)
    with pytest.raises(AnalysisError, match="applies to numbers"):
        parse_keys("comm.log2", fmt)
    # the kernel's room for a key (384 bytes): a string of variable length takes 256, a stack 128, other
    # fields their size (the guest's 6.1 took stacktrace,prev_comm,prev_pid and refused a stack, a
    # :string and comm, with no word in error_log: tests/guest/test_qemu_hist.py)
    assert len(parse_keys("stacktrace,comm,pid", fmt)) == 3
    strings = EventFormat.parse("name: strings\nID: 9\nformat:\n"
                                "\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n\n"
                                "\tfield:__data_loc char[] path;\toffset:8;\tsize:4;\tsigned:0;\n"
                                "\tfield:__data_loc char[] name;\toffset:12;\tsize:4;\tsigned:0;\n\n"
                                "print fmt: \"x\"\n", "test")
    assert len(parse_keys("stacktrace,path", strings)) == 2
    with pytest.raises(AnalysisError, match=r"takes 392 bytes, and the kernel's hist triggers take at most 384"):
        parse_keys("stacktrace,path,comm", strings)
    with pytest.raises(AnalysisError, match=r"takes 512 bytes"):
        parse_keys("path,name", strings)
    # a field named hitcount is the kernel's own count in vals= (the guest summed 6 writes as 6)
    from probectl.analysis.keys import parse_value

    hits = EventFormat.parse(fmt_text_without_comm().replace(" size;", " hitcount;"), "test")
    with pytest.raises(AnalysisError, match="'hitcount' for their own count"):
        parse_value("hitcount", hits)
    # a field named comm is that field; the pseudo keys are the common fields
    assert [p.trigger_text() for p in parse_keys("comm,pid.hex,cpu", fmt)] == [
        "comm", "common_pid.hex", "common_cpu"]
    no_comm = EventFormat.parse(fmt_text_without_comm(), "test")
    assert [p.trigger_text() for p in parse_keys("comm,common_pid", no_comm)] == [
        "common_pid.execname", "common_pid"]


def fmt_text_without_comm() -> str:
    return ("name: plain\nID: 8\nformat:\n\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n"
            "\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n\n"
            "\tfield:u64 size;\toffset:8;\tsize:8;\tsigned:0;\n\nprint fmt: \"x\"\n")


def test_the_kernel_path_in_pieces_on_this_kernel(live_tracefs):
    """The kernel path's runner (instance, trigger, workload, read-back, removal) on this machine: where
    the event has a hist file it counts the command's one exec; here, where it has none, the kernel
    refuses the trigger, which is an error naming it (no other writer's error_log entry), and the
    instance and the command are gone."""
    from probectl.analysis import live
    from probectl.analysis.keys import parse_keys
    from probectl.errors import AnalysisError
    from probectl.record.selection import SelectedEvent
    from probectl.record.session import RunScope, TracedRun
    from probectl.tracefs import Tracefs

    tfs = Tracefs.open()
    fmt = tfs.event_format("sched", "sched_process_exec")
    event = SelectedEvent("sched", "sched_process_exec", fmt)
    keys = parse_keys("comm", fmt)
    mine = live_tracefs / "instances" / f"probectl-{os.getpid()}"
    if live.kernel_has_hist(tfs, [event]):
        with TracedRun(tfs, RunScope(command=["/bin/true"])) as run:
            table = live.kernel_hist(run, event, keys, None)
        assert table.path == "kernel" and {r.key: r.count for r in table.rows} == {("true",): 1}
    else:
        with pytest.raises(AnalysisError, match="refused the hist trigger 'hist:keys=common_pid.execname") as err:
            with TracedRun(tfs, RunScope(command=["/bin/true"])) as run:
                live.kernel_hist(run, event, keys, None)
        assert "Command:" not in err.value.message  # this write logged nothing; others' entries are not shown
    assert not mine.exists()
    assert "hist:" not in (live_tracefs / "events/sched/sched_process_exec/trigger").read_text()
    # latency --pairs in the kernel: where there are no synthetic events, an error, and nothing left
    if not (live_tracefs / "synthetic_events").exists():
        from probectl.analysis.triggers import latency_triggers

        exit_fmt = tfs.event_format("sched", "sched_process_exit")
        texts = latency_triggers(live.latency_name(), "sched.sched_process_exec", keys, parse_keys("comm", exit_fmt))
        with pytest.raises(AnalysisError, match="refused the synthetic event"):
            with TracedRun(tfs, RunScope(command=["/bin/true"])) as run:
                live.kernel_latency_pairs(run, event, SelectedEvent("sched", "sched_process_exit", exit_fmt), texts)
        assert not mine.exists() and not (live_tracefs / "synthetic_events").exists()


def _usdt_answer(*args: str) -> tuple[dict, list[dict[str, str]]]:
    """The JSON answer of a hist/latency run of usdt_target, and the program's EXPECT lines (its
    other lines, SKIPPED and DONE, come before the answer)."""
    lines = probectl(*args).stdout.splitlines()
    start = lines.index("{")
    expect = [dict(w.split("=", 1) for w in line.split()[1:]) for line in lines[:start] if line.startswith("EXPECT ")]
    return json.loads("\n".join(lines[start:])), expect


def test_hist_and_latency_of_sdt_events(live_tracefs):
    """USDT probes (sdt_PROVIDER:NAME, <sys/sdt.h>) are events like any other: hist counts and sums
    their arguments as the program passed them, and latency times one marker to the next."""
    from tests.helpers import build_usdt

    program, _ = build_usdt()
    rounds = 5
    result, expect = _usdt_answer("hist", "-x", str(program), "sdt_probectl:mem arg1 arg2", "--key", "arg2",
                                  "--value", "arg1", "--json", "--", str(program), str(rounds))
    mem = [e for e in expect if e["sdt"] == "mem"]
    assert len(mem) == rounds and result["path"] == default_path(live_tracefs)[0]
    assert {r["key"]["arg2"]: (r["count"], r["sum"]) for r in result["rows"]} == \
        {int(e["arg2"]): (1, int(e["arg1"])) for e in mem}  # (a signed s16 argument, summed signed)
    result, expect = _usdt_answer("hist", "-x", str(program), "sdt_probectl:regs arg2", "--key", "arg2.log2",
                                  "--json", "--", str(program), str(rounds))
    assert [(r["key"]["arg2.log2"], r["count"]) for r in result["rows"]] == [(64, rounds)]  # 2^64 - 2^28 + round
    result, expect = _usdt_answer("latency", "-x", str(program), "--start", "sdt_probectl:regs", "--end",
                                  "sdt_probectl:mem", "--ns", "--json", "--", str(program), str(rounds))
    assert result["count"] == rounds and result["unmatched"] == result["pending"] == 0 and result["min"] > 0
    assert live_tracefs and not [e for e in (live_tracefs / "uprobe_events").read_text().splitlines()
                                 if "sdt_probectl/" in e]  # (the definitions were removed)


def test_sym_keys_are_named_among_data_symbols_and_stack_frames_among_code():
    """A .sym key is often a pointer to data (file->f_op -> null_fops), which the kernel's .sym names;
    a stack frame is code, named by the text symbol before it."""
    from probectl.analysis.keys import KeyPart
    from probectl.analysis.names import KeyNames

    kallsyms = (b"0000000000000000 A fixed_percpu_data\n"
                b"ffffffff81000000 T _stext\nffffffff81000100 t do_thing\nffffffff81e00000 T _etext\n"
                b"ffffffff82a00000 r null_fops\nffffffff82a00100 D jiffies\n")
    names = KeyNames(kallsyms)
    sym = KeyPart("f_op", "sym")
    assert names(sym, 0xffffffff82a00000) == "null_fops"
    assert names(sym, 0xffffffff82a00108) == "jiffies+0x8"
    assert names(sym, 0xffffffff81000104) == "do_thing+0x4"
    assert names(KeyPart("stacktrace"), (0xffffffff81000104, 0xffffffff82a00000)) == "do_thing+0x4\n_etext+0xc00000"
