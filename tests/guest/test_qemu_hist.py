"""hist and latency in the kernel (hist triggers, synthetic events) and in user space, on one workload.

This machine's kernel has no hist triggers, so the kernel path runs in Debian's cloud kernel booted in
qemu with the real probectl on board (vmtest/probectl_guest.py, one boot for the module). Each question is
asked twice on the same deterministic workload (busybox dd reads and writes of known sizes, usleep of
known lengths): once the default way, which there is the kernel's, and once with --user-space; the
counts and sums must equal the workload's numbers and the two answers must agree (latencies within the
resolution of a log2 bucket, since two runs never take the same time). Then what is shown of keys
(.sym, .syscall, comm, stacks), a trigger and a synthetic event the kernel refuses (its error_log entry
is the error), and Ctrl-C / --duration leaving no trigger, synthetic event, probe or instance behind.
"""
from __future__ import annotations

import json
import re
import sys

import pytest

from vmtest.probectl_guest import Step, ok, run_named_steps

pytestmark = pytest.mark.qemu

TRACING = "/sys/kernel/tracing"
READ_SIZES = {4321: 7, 100: 3}  # dd bs=SIZE count=N in work.sh: reads of /dev/zero by dd
WRITE_SIZE, WRITES = 3000, 5  # write.sh: writes to /dev/null
SLEEPS_US = (20000, 40000, 80000)  # sleeps.sh: usleep
CTRL_C_SIZE, CTRL_C_READS = 777, 9  # reads made while a run is interrupted or timed

FILES = {
    "work.sh": "".join(f"dd if=/dev/zero of=/dev/null bs={s} count={n} 2>/dev/null\n"
                       for s, n in READ_SIZES.items()),
    "write.sh": f"dd if=/dev/zero of=/dev/null bs={WRITE_SIZE} count={WRITES} 2>/dev/null\n",
    "sleeps.sh": f"for us in {' '.join(map(str, SLEEPS_US))}; do usleep $us; done\n",
    # during.py MODE EVENT WORKLOAD PROBECTL-ARGS...: start probectl, wait until its instance has a hist
    # trigger on EVENT (G/E) enabled with tracing on, run the shell WORKLOAD, then Ctrl-C it (MODE
    # 'interrupt') or let it end by itself ('wait'). (From a script: sh would start a background job
    # with SIGINT ignored.)
    "during.py": r'''
import glob, signal, subprocess, sys, time
mode, event, workload, *command = sys.argv[1:]
proc = subprocess.Popen(command)

def armed():
    for inst in glob.glob("/sys/kernel/tracing/instances/probectl-*"):
        try:
            with open(f"{inst}/events/{event}/trigger") as t, open(f"{inst}/events/{event}/enable") as e, \
                    open(f"{inst}/tracing_on") as on:
                # (enable reads "1*": the hist trigger has put the event in soft mode too)
                if "hist:" in t.read() and e.read().startswith("1") and on.read().strip() == "1":
                    return True
        except OSError:
            pass
    return False

deadline = time.monotonic() + 120
while not armed():
    if proc.poll() is not None or time.monotonic() > deadline:
        proc.send_signal(signal.SIGINT)
        sys.exit(f"during.py: {event} was never armed (probectl exit {proc.wait()})")
    time.sleep(0.1)
subprocess.run(workload, shell=True, check=True)
if mode == "interrupt":
    proc.send_signal(signal.SIGINT)
sys.exit(proc.wait())
''',
}
WORK, WRITE, SLEEPS = "sh /guest/files/work.sh", "sh /guest/files/write.sh", "sh /guest/files/sleeps.sh"
DURING = f"{sys.prefix}/bin/python /guest/files/during.py"
LEFT = (f"echo @@; cat {TRACING}/synthetic_events; echo @@; ls {TRACING}/instances; echo @@; "
        f"cat {TRACING}/kprobe_events; echo @@; grep -l hist: {TRACING}/events/*/*/trigger; true")
DD_READS = "--filter 'comm == \"dd\"'"
HUGE_BUCKET = 2 ** 64 + 1  # a bucket size no unsigned long holds

# name -> (shell text); the questions asked twice have a '_k' (default: the kernel) and a '_u'
# (--user-space) step.
QUESTIONS = {
    # a tracepoint: counts and sums by an exact key
    "read": f"probectl hist syscalls:sys_enter_read --key count --value count {DD_READS} --json -- {WORK}",
    # comm (the kernel's common_pid.execname) and log2 buckets
    "log2": f"probectl hist syscalls:sys_enter_read --key comm,count.log2 --json -- {WORK}",
    "log2_text": f"probectl hist syscalls:sys_enter_read --key count --log2 {DD_READS} -- {WORK}",
    # a kprobe from a definition, a .sym key of a member (the file's operations)
    "sym": f"probectl hist 'vfs_write count file->f_op' --key f_op.sym,count --value count --json -- {WRITE}",
    "sym_text": f"probectl hist 'vfs_write count file->f_op' --key f_op.sym --filter 'count == {WRITE_SIZE}' -- {WRITE}",
    # the kernel stack
    "stack": f"probectl hist 'vfs_write count' --key stacktrace --filter 'count == {WRITE_SIZE}' --json -- {WRITE}",
    # system calls by name
    "syscall": f"probectl hist raw_syscalls:sys_enter --key id.syscall {DD_READS} --json -- {WORK}",
    "syscall_text": f"probectl hist raw_syscalls:sys_enter --key id.syscall {DD_READS} -- {WORK}",
    # latency: a kernel function (entry and return kprobes), and two tracepoints of known sleeps
    "latency_func": f"probectl latency vfs_read --ns --json -- {WORK}",
    "latency_sleep": ("probectl latency --start syscalls:sys_enter_clock_nanosleep "
                      f"--end syscalls:sys_exit_clock_nanosleep --json -- {SLEEPS}"),
    "latency_text": ("probectl latency --start syscalls:sys_enter_clock_nanosleep "
                     f"--end syscalls:sys_exit_clock_nanosleep -- {SLEEPS}"),
    # the pairs (heat maps): in the kernel, the synthetic event streamed as an ordinary event
    "latency_pairs": ("probectl latency --start syscalls:sys_enter_clock_nanosleep "
                      f"--end syscalls:sys_exit_clock_nanosleep --pairs /tmp/pairs.txt --json -- {SLEEPS}; "
                      "echo @@pairs; cat /tmp/pairs.txt"),
}
STEPS = {}
for _name, _text in QUESTIONS.items():
    STEPS[_name + "_k"] = _text
    STEPS[_name + "_u"] = _text.replace(" -- ", " --user-space -- ", 1)
STEPS.update({
    # the kernel refuses the synthetic event: one of that name is there (made here for a live process,
    # the one that becomes probectl: its own pid, so no clean-up of dead runs removes it); the error
    # has the kernel's error_log entry, and the event that probectl did not make is left alone
    "refused_synthetic": (f"sh -c 'echo \"probectl_lat_$$ u64 lat\" >> {TRACING}/synthetic_events && exec probectl "
                          "latency --start syscalls:sys_enter_clock_nanosleep --end syscalls:sys_exit_clock_nanosleep "
                          f"-- usleep 1000'; echo @@kept; cat {TRACING}/synthetic_events; "
                          f"for e in $(cut -f1 {TRACING}/synthetic_events); do echo \"!$e\" >> {TRACING}/synthetic_events; "
                          f"done; {LEFT}"),
    # the kernel refuses a trigger that probectl's checks let through: a bucket size past an unsigned
    # long (kstrtoul in the kernel's parse_field; user space counts with it); the probe goes again
    "refused_trigger": (f"probectl hist 'vfs_write count' --key count.buckets={HUGE_BUCKET} -- {WRITE}; "
                        f"echo \"exit $?\"; {LEFT}"),
    # what the kernel refuses without a word in error_log (or takes wrongly) is refused before: a key
    # too big for it (a stack, a :string and comm), a value named hitcount; and a filter out of range
    "refused_key": (f"probectl hist 'do_sys_openat2 filename:string' --key stacktrace,filename_string,comm "
                    f"-- cat /guest/files/work.sh; {LEFT}"),
    "refused_value": f"probectl hist 'vfs_write hitcount=count' --key common_pid --value hitcount -- {WRITE}; {LEFT}",
    "refused_filter": (f"probectl hist syscalls:sys_enter_read --key count --filter 'count == 99999999999999999999' "
                       f"-- {WORK}; {LEFT}"),
    # Ctrl-C in the middle: the partial answer, and nothing left
    "ctrl_c_hist": (f"{DURING} interrupt syscalls/sys_enter_read "
                    f"'dd if=/dev/zero of=/dev/null bs={CTRL_C_SIZE} count={CTRL_C_READS} 2>/dev/null' "
                    f"probectl hist syscalls:sys_enter_read --key comm,count --filter 'comm == \"dd\"' --json; "
                    f"{LEFT}"),
    "ctrl_c_latency": (f"{DURING} interrupt probe/vfs_read "
                       f"'dd if=/dev/zero of=/dev/null bs={CTRL_C_SIZE} count={CTRL_C_READS} 2>/dev/null' "
                       f"probectl latency vfs_read --ns --json; {LEFT}"),
    # --duration ends a system-wide count
    "duration": (f"{DURING} wait syscalls/sys_enter_read "
                 f"'dd if=/dev/zero of=/dev/null bs={CTRL_C_SIZE} count={CTRL_C_READS} 2>/dev/null' "
                 f"probectl hist syscalls:sys_enter_read --key comm,count --filter 'comm == \"dd\"' --duration 8 "
                 f"--json; {LEFT}"),
    "after": LEFT,
})


@pytest.fixture(scope="module")
def guest(probectl_kernel_dir) -> dict[str, Step]:
    run = run_named_steps(probectl_kernel_dir, STEPS, files={name: text.encode() for name, text in FILES.items()})
    return dict(zip(STEPS, run.steps))


def answer(step: Step) -> dict:
    """The JSON answer of a step (the workload writes nothing to stdout)."""
    text = ok(step).stdout
    return json.loads(text[:text.index("\n}\n") + 2] if "\n}\n" in text else text)


def both(guest, name: str) -> tuple[dict, dict]:
    """The kernel's answer and user space's to question ``name``, each checked to come from its path."""
    kernel, user = answer(guest[name + "_k"]), answer(guest[name + "_u"])
    assert kernel["path"] == "kernel", guest[name + "_k"].stderr
    assert "hist trigger in the kernel" in guest[name + "_k"].stderr
    assert user["path"] == "user space"
    assert "user space aggregation" in guest[name + "_u"].stderr and "(--user-space)" in guest[name + "_u"].stderr
    return kernel, user


def rows(result: dict) -> dict[tuple, tuple]:
    """key values (in key order) -> (count, sum) of every row."""
    return {tuple(r["key"][k] for k in result["keys"]): (r["count"], r.get("sum")) for r in result["rows"]}


def left_behind(step: Step) -> list[str]:
    """What a step's LEFT listing shows: synthetic events, instances, kprobe events, hist triggers."""
    parts = step.stdout.split("@@\n")[-4:]
    return [line for part in parts for line in part.splitlines() if line.strip()]


def log2_bucket(v: int) -> int:
    return 0 if v <= 1 else (v - 1).bit_length()


def test_counts_and_sums_are_the_workloads(guest):
    kernel, user = both(guest, "read")
    want = {(size,): (n, size * n) for size, n in READ_SIZES.items()}
    assert rows(kernel) == want
    assert rows(user) == want
    assert kernel["total"] == user["total"] == sum(READ_SIZES.values())


def test_log2_buckets_and_comm_agree(guest):
    kernel, user = both(guest, "log2")
    assert rows(kernel) == rows(user)
    dd = {k[1]: c for k, (c, _) in rows(kernel).items() if k[0] == "dd"}
    assert dd == {log2_bucket(size): n for size, n in READ_SIZES.items()}
    # the table: the kernel's bucket 2^13 holds 4321, shown as a range, the empty buckets between shown
    for name in ("log2_text_k", "log2_text_u"):
        text = ok(guest[name]).stdout
        assert "@count.log2:" in text, text
        assert re.search(r"^\(4K, 8K\]\s+7 \|@+\s*\|$", text, re.M), text
        assert re.search(r"^\(64, 128\]\s+3 \|@+\s*\|$", text, re.M), text
        assert re.search(r"^\(1K, 2K\]\s+0 \|\s+\|$", text, re.M), text
    assert ok(guest["log2_text_k"]).stdout == ok(guest["log2_text_u"]).stdout


def test_kprobe_with_a_symbol_key(guest):
    kernel, user = both(guest, "sym")
    assert rows(kernel) == rows(user)
    named = {(r["key"]["f_op.sym.name"], r["key"]["count"]): (r["count"], r["sum"]) for r in kernel["rows"]}
    assert named[("null_fops", WRITE_SIZE)] == (WRITES, WRITES * WRITE_SIZE), named
    assert [r["key"]["f_op.sym.name"] for r in kernel["rows"]] == [r["key"]["f_op.sym.name"] for r in user["rows"]]
    for name in ("sym_text_k", "sym_text_u"):
        text = ok(guest[name]).stdout
        assert re.search(rf"^@\[null_fops\] {WRITES} \|@+\|$", text, re.M), text


def _functions(frames: list[str]) -> list[str]:
    return [re.split(r"[+ ]", f.strip(), maxsplit=1)[0] for f in frames]


def test_stack_key(guest):
    kernel, user = both(guest, "stack")
    assert [r["count"] for r in kernel["rows"]] == [r["count"] for r in user["rows"]] == [WRITES]
    kframes = _functions(kernel["rows"][0]["key"]["stacktrace"])
    uframes = _functions(user["rows"][0]["key"]["stacktrace"])
    # from the system call down, the same functions (the first frames are the probe's own and may differ)
    for frames in (kframes, uframes):
        assert "ksys_write" in frames and "do_syscall_64" in frames, frames
    assert kframes[kframes.index("ksys_write"):] == uframes[uframes.index("ksys_write"):], (kframes, uframes)


def test_syscall_names(guest):
    kernel, user = both(guest, "syscall")
    assert rows(kernel) == rows(user)
    by_name = {r["key"]["id.syscall.name"]: r["count"] for r in kernel["rows"]}
    assert by_name["sys_read"] == sum(READ_SIZES.values())
    for name in ("syscall_text_k", "syscall_text_u"):
        text = ok(guest[name]).stdout
        assert re.search(rf"^@\[sys_read\]\s+{sum(READ_SIZES.values())} \|@+\s*\|$", text, re.M), text
    assert ok(guest["syscall_text_k"]).stdout == ok(guest["syscall_text_u"]).stdout


def _latency_agree(kernel: dict, user: dict, percentiles=("p50", "p90", "max")) -> None:
    assert kernel["count"] == user["count"]
    for p in percentiles:
        assert 0 < kernel[p] and 0 < user[p], (p, kernel, user)
        assert abs(log2_bucket(kernel[p]) - log2_bucket(user[p])) <= 1, (p, kernel[p], user[p])


def test_latency_of_a_kernel_function(guest):
    kernel, user = both(guest, "latency_func")
    # dd's reads of /dev/zero, and sh's of its script: the same calls on both paths
    assert kernel["count"] >= sum(READ_SIZES.values())
    assert kernel["unit"] == user["unit"] == "ns"
    # a read of /dev/zero, under a second even under TCG; the slowest read is an outlier (an interrupt,
    # a page fault of sh's script) that two runs do not share (711 µs and 104 µs in one run)
    assert kernel["max"] < 1_000_000_000 and user["max"] < 1_000_000_000
    _latency_agree(kernel, user, ("p50",))


def test_latency_of_known_sleeps(guest):
    kernel, user = both(guest, "latency_sleep")
    assert kernel["count"] == user["count"] == len(SLEEPS_US)
    for result in (kernel, user):
        # nearest rank of three: p50 the second sleep, p90 and max the third, each at least as asked;
        # TCG on a loaded host wakes late, but not by 100 ms
        assert SLEEPS_US[1] <= result["p50"] < SLEEPS_US[1] + 100_000, result
        assert SLEEPS_US[2] <= result["p90"] == result["max"] < SLEEPS_US[2] + 100_000, result
    _latency_agree(kernel, user)
    for name in ("latency_text_k", "latency_text_u"):
        text = ok(guest[name]).stdout
        assert "@latency_us.log2:" in text and re.search(r"^3 pairs  min \d+ µs  p50 \d+ µs", text, re.M), text


def test_latency_pairs_from_both_paths(guest):
    """--pairs: one 'completion_time latency' line a pair, the latencies the summary counts, on the
    kernel's path (its synthetic event streamed, start and end only triggered) as in user space."""
    kernel, user = both(guest, "latency_pairs")
    for name, result in (("latency_pairs_k", kernel), ("latency_pairs_u", user)):
        lines = guest[name].stdout.split("@@pairs\n", 1)[1].split()
        times, lats = [float(t) for t in lines[0::2]], [int(v) for v in lines[1::2]]
        assert len(lats) == result["count"] == len(SLEEPS_US), guest[name].stdout
        assert times == sorted(times) and max(lats) == result["max"] and min(lats) == result["min"], result
        assert all(lat >= want for lat, want in zip(sorted(lats), sorted(SLEEPS_US))), lats


def test_refused_synthetic_event_shows_the_kernels_words(guest):
    step = guest["refused_synthetic"]
    said, kept = step.stdout.split("@@kept\n")
    assert re.search(r"Error: the kernel refused the synthetic event 'probectl_lat_(\d+) u64 lat': File exists",
                     step.stderr), step.output
    assert "synthetic_events: error:" in step.stderr and "Command: probectl_lat_" in step.stderr, step.stderr
    assert re.search(r"^ +\^$", step.stderr, re.M), step.stderr  # the caret under the name
    assert "Hint: its name is this process's" in step.stderr
    assert "Traceback" not in step.stderr and said == ""
    assert re.fullmatch(r"probectl_lat_\d+\tu64 lat\n", kept.split("@@\n")[0]), kept  # not removed by probectl
    assert left_behind(step) == [], step.stdout


def test_refused_trigger_shows_the_kernels_words(guest):
    """The kernel's own reason for refusing a hist trigger is the error (its error_log entry, caret
    under the bucket size), and the probe added for the run and the instance are gone."""
    step = guest["refused_trigger"]
    trigger = f"hist:keys=count.buckets={HUGE_BUCKET}"
    assert re.search(rf"^Error: the kernel refused the hist trigger '{trigger}[:']", step.stderr, re.M), step.output
    assert re.search(r"^\[ *[\d.]+\] hist:probe:vfs_write: error: Invalid field modifier$", step.stderr, re.M), step.stderr
    command = next(line for line in step.stderr.splitlines() if line.startswith("  Command: "))
    caret = step.stderr.splitlines()[step.stderr.splitlines().index(command) + 1]
    assert trigger in command and caret == " " * command.index(str(HUGE_BUCKET)) + "^", step.stderr
    assert "Hint: " in step.stderr and "Traceback" not in step.stderr
    assert step.stdout.startswith("exit 1\n"), step.stdout
    assert left_behind(step) == [], step.stdout


@pytest.mark.parametrize("name, message", [
    ("refused_key", "the key 'stacktrace,filename_string,comm' takes 392 bytes, and the kernel's hist triggers "
                    "take at most 384"),
    ("refused_value", "--value hitcount: the kernel's hist triggers take 'hitcount' for their own count"),
    ("refused_filter", "99999999999999999999 is out of range for count"),
])
def test_what_the_kernel_would_take_wrongly_is_refused_before(guest, name, message):
    step = guest[name]
    assert f"Error: {message}" in step.stderr, step.output
    assert "refused" not in step.stderr and "Traceback" not in step.stderr
    assert left_behind(step) == [], step.stdout  # (the probes it added are removed)


def test_ctrl_c_prints_the_partial_answer_and_cleans_up(guest):
    result = answer(guest["ctrl_c_hist"])
    assert result["path"] == "kernel"
    assert rows(result) == {("dd", CTRL_C_SIZE): (CTRL_C_READS, None)}
    assert left_behind(guest["ctrl_c_hist"]) == []
    latency = answer(guest["ctrl_c_latency"])
    assert latency["path"] == "kernel" and latency["count"] >= CTRL_C_READS
    assert left_behind(guest["ctrl_c_latency"]) == []


def test_duration_ends_the_count_and_cleans_up(guest):
    result = answer(guest["duration"])
    assert result["path"] == "kernel"
    assert rows(result) == {("dd", CTRL_C_SIZE): (CTRL_C_READS, None)}
    assert left_behind(guest["duration"]) == []


def test_nothing_left_behind(guest):
    assert left_behind(guest["after"]) == []
