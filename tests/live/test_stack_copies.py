"""User stacks of code built without frame pointers: ``record --call-graph dwarf[,SIZE]``, and ``record
-g`` choosing it by itself for a file that keeps none (fixtures/callers.c at ``-O2
-fomit-frame-pointer``). Each sample copies the user stack, unwound from the files' call-frame
information when the recording ends. The stacks must have the callers and counts the program prints,
every frame ``perf record --call-graph dwarf`` finds on the same binary, libc's frames named, and a
stack that cannot be unwound to its end must end in ``[unknown]``, never in a wrong frame."""
from __future__ import annotations

import json
import os
import re
import subprocess
from collections import Counter

import pytest

from probectl.debuginfo.elf import ElfFile
from probectl.debuginfo.framepointers import keeps_frame_pointers
from tests.helpers import added_probes, build_fixture, probectl, require_tool, tracefs_snapshot
from tests.live.test_callchains import caller_path, expected_paths, text_stacks

pytestmark = pytest.mark.root

G = f"psc{os.getpid()}"
NO_FRAME_POINTERS = ("-fomit-frame-pointer",)


@pytest.fixture(scope="module")
def callers():
    with added_probes(build_fixture("callers", "-O2", NO_FRAME_POINTERS), [f"{G}:work=work"], [G]) as binary:
        yield binary


def folded_paths(path) -> Counter:
    got: Counter = Counter()
    for line in probectl("script", "-i", str(path), "--format", "folded").stdout.splitlines():
        stack, n = line.rsplit(" ", 1)
        got[caller_path(stack.split(";")[1:])] += int(n)
    return got


def test_the_fixture_keeps_no_frame_pointers_and_the_usual_build_does(callers):
    with ElfFile(callers) as elf:
        assert not keeps_frame_pointers(elf)
    with ElfFile(build_fixture("callers", "-O1")) as elf:
        assert keeps_frame_pointers(elf)


@pytest.mark.parametrize("how", [("-g",), ("--call-graph", "dwarf")])
def test_stacks_without_frame_pointers_have_every_caller(live_tracefs, callers, tmp_path, how):
    """``-g`` says it unwinds this file's stacks from CFI; both give the program's own counts per
    caller path, the recursion's 41 frames, main and libc's frames below it."""
    path = tmp_path / "nofp.dat"
    out = probectl("record", *how, "-e", f"{G}:work", "-o", str(path), "--", str(callers), "2")
    want = expected_paths(out.stdout)
    assert sum(want.values()) == 102 and "[ probectl record: 102 events" in out.stderr
    said = f"{callers} keeps no frame pointers: the user stacks of {G}:work are unwound from call-frame information"
    assert (said in out.stderr) == (how == ("-g",)), out.stderr
    assert "[unknown]" not in out.stderr
    assert folded_paths(path) == want
    events = [json.loads(l) for l in probectl("script", "-i", str(path), "--format", "json").stdout.splitlines()]
    deep = [e["user_stack"] for e in events if any(f.startswith("recurse") for f in e["user_stack"])]
    assert len(deep) == 2
    for stack in deep:
        names = [f.split("+")[0] for f in stack]
        assert names[:43] == ["work"] + ["recurse"] * 41 + ["main"], names
        # libc's frames by name (libc6-dbg), down to the program's _start
        assert names[43:] == ["__libc_start_call_main", "__libc_start_main", "_start"], names


def test_the_stacks_are_perfs(live_tracefs, callers, recording_dwarf, tmp_path):
    """perf record --call-graph dwarf on the same binary: every stack perf unwinds is ours, and where
    perf's unwinding stops early, its frames begin ours."""
    perf = require_tool("perf", "apt linux-perf")
    path, _out = recording_dwarf
    data = tmp_path / "perf.data"
    # (perf's 512 KiB ring holds 60-odd copies: a loaded machine made it lose some; a bigger one)
    subprocess.run([perf, "record", "-q", "-m", "4096", "--call-graph", "dwarf", "-e", f"{G}:work", "-o", str(data), "--",
                    str(callers), "2"], check=True, capture_output=True)
    theirs = text_stacks(subprocess.run([perf, "script", "-i", str(data), "-F", "ip,sym,dso"], check=True,
                                        capture_output=True, text=True).stdout, callers)
    ours = text_stacks(probectl("script", "-i", str(path)).stdout, callers)
    assert len(ours) == 102 and 0 < len(theirs) <= 102  # (what perf lost, it lost)
    unmatched = Counter(ours)
    shorter = 0
    for stack in theirs:
        if unmatched[stack]:
            unmatched[stack] -= 1
            continue
        # perf stopped early: its frames are the first of one of ours
        longer = next((s for s in unmatched if unmatched[s] and s[:len(stack)] == stack), None)
        assert longer is not None, (stack, unmatched)
        unmatched[longer] -= 1
        shorter += 1
    assert shorter < len(theirs)


@pytest.fixture(scope="module")
def recording_dwarf(callers, tmp_path_factory):
    path = tmp_path_factory.mktemp("sc") / "dwarf.dat"
    out = probectl("record", "--call-graph", "dwarf", "-e", f"{G}:work", "-o", str(path), "--", str(callers), "2")
    return path, out


def test_a_copy_too_short_ends_the_stack_in_unknown(live_tracefs, callers, recording_dwarf, tmp_path):
    """64 bytes of stack hold a few frames: every stack is the first frames of the full one, then
    [unknown]; the recording says how many stopped and why."""
    full_path, _out = recording_dwarf
    path = tmp_path / "short.dat"
    out = probectl("record", "--call-graph", "dwarf,64", "-e", f"{G}:work", "-o", str(path), "--",
                   str(callers), "2")
    assert re.search(r"probectl: 102 of 102 user stacks end in \[unknown\] where the unwinding stopped: "
                     r"the return address: saved at 0x…,? outside the stack copy", out.stderr), out.stderr
    full = Counter(tuple(e["user_stack"]) for e in _json(full_path))
    cut = Counter(tuple(e["user_stack"]) for e in _json(path))
    assert sum(cut.values()) == 102
    for stack in cut:
        assert stack[-1] == "[unknown]" and len(stack) >= 2
        known = [f.split("+")[0] for f in stack[:-1]]
        assert any([g.split("+")[0] for g in f[:len(known)]] == known for f in full), stack


def test_the_python_api_gives_the_same_stacks(live_tracefs, recording_dwarf):
    """probectl.read_trace(...).stacks(): each event with its frames, named as script names them."""
    import probectl

    path, _out = recording_dwarf
    with probectl.read_trace(path) as trace:
        got = [(ev.name, [f"{f.name}+0x{f.offset:x}" if f.offset else f.name for f in stack.user], stack.kernel)
               for ev, stack in trace.stacks(f"{G}:*")]
    assert [(name, user) for name, user, _k in got] == [(e["event"], e["user_stack"]) for e in _json(path)]
    assert len(got) == 102 and all(not kernel for _n, _u, kernel in got)


def _json(path) -> list[dict]:
    return [json.loads(l) for l in probectl("script", "-i", str(path), "--format", "json").stdout.splitlines()]


@pytest.mark.parametrize("how", [("-g",), ("--call-graph", "dwarf")])
def test_a_tracepoints_user_stack_through_libc(live_tracefs, callers, tmp_path, how):
    """A system call's user stack at a tracepoint, unwound through libc's syscall() (no frame pointers
    in Debian's libc), with the kernel stack still the kernel's: -g takes it so because the program
    the recording is scoped to keeps no frame pointers, and says so."""
    path = tmp_path / "sys.dat"
    out = probectl("record", *how, "-e", "syscalls:sys_enter_getpid", "-o", str(path), "--", str(callers))
    assert "EXPECT getpid 1" in out.stdout
    said = f"{callers} keeps no frame pointers: the user stacks of syscalls:sys_enter_getpid are unwound"
    assert (said in out.stderr) == (how == ("-g",)), out.stderr
    (ev,) = _json(path)
    assert any(f.startswith("do_syscall_64") for f in ev["kernel_stack"]), ev
    names = [f.split("+")[0] for f in ev["user_stack"]]
    assert names[0] == "syscall" and names[-1] == "_start" and "main" in names, names


def test_a_program_with_frame_pointers_keeps_the_walk(live_tracefs, tmp_path):
    """-g on a tracepoint of a program built with frame pointers: the kernel's walk, no notice."""
    path = tmp_path / "fp.dat"
    out = probectl("record", "-g", "-e", "syscalls:sys_enter_getpid", "-o", str(path), "--",
                   str(build_fixture("callers", "-O1")))
    assert "frame pointers" not in out.stderr, out.stderr
    (ev,) = _json(path)
    assert any(f.startswith("main") for f in ev["user_stack"]), ev


@pytest.mark.parametrize("value, says", [("lbr", "not a call-graph mode"), ("dwarf,3", "must be 8 to 65528"),
                                         ("dwarf,many", "not a stack copy size"), ("fp,8", "not a call-graph mode"),
                                         ("dwarf,70000", "must be 8 to 65528")])
def test_bad_call_graph_values_are_refused_before_anything(live_tracefs, callers, tmp_path, value, says):
    before = tracefs_snapshot()
    res = probectl("record", "--call-graph", value, "-e", f"{G}:work", "-o", str(tmp_path / "x.dat"), "--",
                   str(callers), check=False)
    assert res.returncode == 2 and says in res.stderr and "Traceback" not in res.stderr, res.stderr
    assert not (tmp_path / "x.dat").exists() and tracefs_snapshot() == before
