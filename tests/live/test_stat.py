"""probectl stat: exact counts from the kernel's counters, compared with what fixtures/stat_target.c says
it did and with perf stat on the same workload; its output shapes (the block, -I, -A, -r, -x, --json)
and bad input."""
from __future__ import annotations

import csv
import functools
import io
import json
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.helpers import FIXTURES, ROOT, build_program, fails as run_fails, missing, probectl as run_probectl

ENV = {"PYTHONPATH": str(ROOT)}
probectl = functools.partial(run_probectl, env=ENV)
fails = functools.partial(run_fails, env=ENV)
SYSCALLS = "syscalls:sys_enter_getppid,syscalls:sys_enter_sched_yield"
MINE = 'COMM == "statA" || COMM == "statB"'  # (the fixture's two threads)


@pytest.fixture(scope="module")
def target() -> Path:
    return build_program("stat_target", [FIXTURES / "stat_target.c"], extra=("-pthread",))


def expected(stdout: str) -> dict[str, int]:
    return {k: int(v) for k, _, v in (line.split()[1].partition("=") for line in stdout.splitlines()
                                      if line.startswith("EXPECT "))}


def block_counts(stdout: str) -> dict[str, int]:
    """The counts of perf stat's block: 'COUNT  EVENT' lines."""
    out = {}
    for line in stdout.splitlines():
        words = line.split()
        if len(words) == 2 and words[0].replace(",", "").isdigit() and ":" in words[1]:
            out[words[1]] = int(words[0].replace(",", ""))
    return out


def csv_rows(stdout: str) -> list[list[str]]:
    return [row for row in csv.reader(io.StringIO(stdout)) if row and not row[0].startswith("EXPECT ")]


def want_of(exp: dict[str, int], group: str) -> dict[str, int]:
    return {"syscalls:sys_enter_getppid": exp["getppid"], "syscalls:sys_enter_sched_yield": exp["sched_yield"],
            f"{group}:alpha": exp["alpha"], f"{group}:beta": exp["beta"], f"{group}:gamma_": exp["gamma_"]}


def test_stat_counts_what_the_program_did_and_what_perf_counts(live_tracefs, target):
    """Syscalls and uprobes of definitions added for the run: the program's own numbers; and, on the
    same workload in the same test, perf stat's (the uprobes through events added for both)."""
    out = probectl("stat", "-e", SYSCALLS, "--exec", str(target), "alpha", "beta", "gamma_", "--", str(target))
    exp = expected(out.stdout)
    counts = block_counts(out.stdout)
    group = next(name.split(":")[0] for name in counts if name.endswith(":alpha"))
    assert group.startswith("probe_") and counts == want_of(exp, group)
    assert f"Performance counter stats for '{target}'" in out.stdout and "seconds time elapsed" in out.stdout
    perf = shutil.which("perf")
    if perf is None:
        missing("perf is not installed (apt-get install linux-perf)")
    probectl("add", "-x", str(target), "alpha", "beta", "gamma_")
    try:
        names = f"{SYSCALLS},{group}:alpha,{group}:beta,{group}:gamma_"
        ours = probectl("stat", "-x", ",", "-e", names, "--", str(target), "2", "0", "500")
        theirs = subprocess.run([perf, "stat", "-x", ",", "-e", names, "--", str(target), "2", "0", "500"],
                                capture_output=True, text=True, check=True)
        got = {row[2]: int(row[0]) for row in csv_rows(ours.stdout)}
        perfs = {row[2]: int(row[0]) for row in csv_rows(theirs.stderr)}
        assert got == perfs == want_of(expected(ours.stdout), group)
    finally:
        probectl("del", f"{group}:*")


def test_interval_lines_add_up_to_the_total(live_tracefs, target):
    out = probectl("stat", "-I", "20", "-x", ",", "-e", SYSCALLS, "--", str(target), "6", "30")
    rows = csv_rows(out.stdout)
    times = sorted({float(row[0]) for row in rows})
    assert len(times) >= 3  # (six rounds 30 ms apart, counted every 20 ms)
    sums: dict[str, int] = {}
    for row in rows:
        if row[1] != "<not counted>":
            sums[row[3]] = sums.get(row[3], 0) + int(row[1])
    exp = expected(out.stdout)
    assert sums == {"syscalls:sys_enter_getppid": exp["getppid"], "syscalls:sys_enter_sched_yield": exp["sched_yield"]}


def test_per_cpu_counts_add_up(live_tracefs, target):
    """System-wide per CPU, filtered to the program's threads by name: one row per CPU and event, and
    the rows of an event add up to what the program did."""
    out = probectl("stat", "-a", "-A", "--json", "-e", SYSCALLS, "--filter", MINE, "--", str(target))
    objs = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
    cpus = {o["cpu"] for o in objs}
    assert len(cpus) == len({line for line in Path("/sys/devices/system/cpu/online").read_text().split()} and cpus)
    sums: dict[str, float] = {}
    for o in objs:
        sums[o["event"]] = sums.get(o["event"], 0) + float(o["counter-value"])
    exp = expected(out.stdout)
    assert sums == {"syscalls:sys_enter_getppid": exp["getppid"], "syscalls:sys_enter_sched_yield": exp["sched_yield"]}
    assert all(len([o for o in objs if o["event"] == e]) == len(cpus) for e in sums)


def test_repeats_give_the_mean_and_the_runs(live_tracefs, target):
    out = probectl("stat", "-r", "3", "-e", SYSCALLS, "--", str(target), "1")
    exp = expected(out.stdout)
    assert exp and out.stdout.count("EXPECT getppid=") == 3
    assert f"Performance counter stats for '{target} 1' (3 runs):" in out.stdout
    assert block_counts(out.stdout) == {"syscalls:sys_enter_getppid": exp["getppid"],
                                        "syscalls:sys_enter_sched_yield": exp["sched_yield"]}
    assert "+-" in out.stdout.split("seconds time elapsed")[0].splitlines()[-1]


def test_a_glob_of_hundreds_of_tracepoints(live_tracefs, target):
    """Every syscall entry (some hundreds of events, a counter each) for one command."""
    out = probectl("stat", "-x", ",", "-e", "syscalls:sys_enter_*", "--", str(target), "1", "0", "10")
    got = {row[2]: int(row[0]) for row in csv_rows(out.stdout)}
    assert len(got) > 200
    assert got["syscalls:sys_enter_getppid"] == 20 and got["syscalls:sys_enter_clone3"] >= 1


# ---- bad input -----------------------------------------------------------------------------------


def test_a_glob_that_matches_nothing(live_tracefs):
    assert "no event matches 'nosuch:*'" in fails("stat", "-e", "nosuch:*", "--", "true")


def test_more_events_than_file_descriptors_allow(live_tracefs):
    script = f"ulimit -n 100; exec {sys.executable} -m probectl stat -a -e 'syscalls:sys_enter_*' --duration 0.1"
    out = subprocess.run(["sh", "-c", script], capture_output=True, text=True, env={**ENV, "PATH": "/usr/bin:/bin"})
    assert out.returncode == 1 and "Traceback" not in out.stderr, out.stderr
    assert "file descriptors" in out.stderr and "limit of open files is 100" in out.stderr
    assert "ulimit -n" in out.stderr


@pytest.mark.parametrize("ms", ["0", "5"])
def test_an_interval_too_short(live_tracefs, ms):
    assert "too short" in fails("stat", "-I", ms, "-e", SYSCALLS, "--", "true")


def test_ctrl_c_mid_interval_prints_the_partial_one_and_removes_everything(live_tracefs, target):
    """SIGINT 1.5 s into 1 s intervals: the first interval and the half one after it, and the probe
    added for the run gone (live_tracefs checks)."""
    proc = subprocess.Popen([sys.executable, "-m", "probectl", "stat", "-a", "-I", "1000", "-x", ",", "-e", SYSCALLS,
                             "--exec", str(target), "alpha"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env={**__import__("os").environ, **ENV})
    time.sleep(3.0)  # (the probe is added, the counters open: the start of a Python process)
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 0 and "Traceback" not in stderr, stderr
    times = sorted({float(row[0]) for row in csv_rows(stdout)})
    assert len(times) >= 2 and times[0] == pytest.approx(1.0, abs=0.3)
    assert times[-1] - int(times[-1]) > 0.05  # the last interval is a partial one


def test_a_kprobe_where_the_kernel_has_none(live_tracefs):
    if (live_tracefs / "kprobe_events").exists():
        pytest.skip("this kernel has kprobes: the guest tests count them")
    err = fails("stat", "tcp_sendmsg", "--duration", "0.1")
    assert "no kprobe_events" in err


def test_options_that_do_not_fit(live_tracefs):
    assert "system-wide" in fails("stat", "-A", "-e", SYSCALLS, "--", "true")
    assert "repeats a command" in fails("stat", "-r", "2", "-e", SYSCALLS, "--duration", "0.1")
    assert "choose one" in fails("stat", "-x", ",", "--json", "-e", SYSCALLS, "--", "true", status=2)


def test_a_costly_rate_is_named_after_stat_and_record(live_tracefs, target, tmp_path):
    """200,000 uprobe hits in a fraction of a second: named with their rate; a run of a few hundred
    events is not."""
    out = probectl("stat", "--exec", str(target), "alpha", "--", str(target), "1", "0", "100000", "0")
    note = [line for line in out.stderr.splitlines() if line.startswith("Note: ")]
    assert len(note) == 1 and ":alpha fired " in note[0] and "times a second" in note[0]
    rate = int(note[0].split(" fired ")[1].split()[0].replace(",", ""))
    assert rate >= 10_000
    quiet = probectl("stat", "-e", SYSCALLS, "--", str(target), "1", "0", "100")
    assert "Note: " not in quiet.stderr
    rec = probectl("record", "-o", str(tmp_path / "t.dat"), "-e", "syscalls:sys_enter_getppid", "--",
                   str(target), "1", "0", "100000")
    assert "Note: syscalls:sys_enter_getppid fired " in rec.stderr


def test_a_process_by_pid(live_tracefs, syscall_maker):
    """-p: the counters of a running process's threads (it makes a getppid every millisecond)."""
    out = probectl("stat", "-p", str(syscall_maker.pid), "-x", ",", "-e", "syscalls:sys_enter_getppid",
                   "--duration", "0.5")
    (row,) = csv_rows(out.stdout)
    assert row[2] == "syscalls:sys_enter_getppid" and 50 < int(row[0]) <= 500
