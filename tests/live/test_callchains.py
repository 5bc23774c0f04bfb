"""``record -g``'s user stacks (perf's callchain of each event, stored as ``probectl:user_callchain``
records) on fixtures/callers.c: ``work()`` called from ``caller_a()`` and ``caller_b()``, some calls
through ``middle()``, and from the bottom of a recursion 40 deep. The stacks must have the callers and
counts the program prints, every frame ``perf record -g`` finds on the same binary (and the immediate
caller perf misses at the entry of a function without a frame), and no frame of the kernel's uprobe
machinery; trace-cmd must read the file."""
from __future__ import annotations

import json
import os
import re
import subprocess
from collections import Counter
from pathlib import Path

import pytest

from tests.helpers import added_probes, build_fixture, probectl, require_tool
from probectl.debuginfo.elf import ElfFile

pytestmark = pytest.mark.root

G = f"pcc{os.getpid()}"


def expected_paths(stdout: str) -> Counter:
    """``EXPECT calls PATH N`` lines: the program's calls of work() by caller path (summed over runs)."""
    out: Counter = Counter()
    for m in re.finditer(r"^EXPECT calls (\S+) (\d+)$", stdout, re.M):
        out[m.group(1)] += int(m.group(2))
    return out


def caller_path(frames: list[str]) -> str:
    """The callers of work() between main and work (outermost first), a run of one name as NAME*N."""
    i = frames.index("main")
    assert frames[-1] == "work", frames
    names = frames[i + 1:-1]
    out: list[str] = []
    for name in names:
        if out and out[-1].split("*")[0] == name:
            base, _, n = out[-1].partition("*")
            out[-1] = f"{base}*{int(n or 1) + 1}"
        else:
            out.append(name)
    return ";".join(out)


def has_frame(binary: Path, func: str) -> bool:
    """Whether ``func`` starts by setting up a frame (``push %rbp``, after an ``endbr64``)."""
    with ElfFile(binary) as elf:
        sym = next(s for s in elf.functions() if s.name == func)
        off = elf.vaddr_to_offset(sym.value)
    code = binary.read_bytes()[off:off + 5]
    return code[4 if code.startswith(b"\xf3\x0f\x1e\xfa") else 0] == 0x55


def text_stacks(text: str, binary: Path) -> list[tuple[str, ...]]:
    """The stacks of ``perf script -F ip,sym,dso`` or ``probectl script`` text: per event, the names of
    the frames in ``binary`` (innermost first)."""
    stacks, cur = [], None
    for line in text.splitlines():
        m = re.match(r"^\t\s*[0-9a-f]+ (\S+?)(?:\+0x[0-9a-f]+)? \((.*)\)$", line)
        if m:
            if cur is None:
                cur = []
            if m.group(2) == str(binary):
                cur.append(m.group(1))
        elif cur is not None:
            stacks.append(tuple(cur))
            cur = None
    if cur is not None:
        stacks.append(tuple(cur))
    return stacks


@pytest.fixture(scope="module")
def callers():
    with added_probes(build_fixture("callers", "-O1"), [f"{G}:work=work"], [G]) as binary:
        yield binary


@pytest.fixture(scope="module")
def recording(callers, tmp_path_factory):
    path = tmp_path_factory.mktemp("cc") / "callers.dat"
    out = probectl("record", "-g", "-e", f"{G}:work", "-o", str(path), "--", str(callers), "2")
    return path, out, callers


def test_user_stacks_have_the_programs_callers_and_counts(live_tracefs, recording):
    path, out, binary = recording
    want = expected_paths(out.stdout)
    assert sum(want.values()) == 102 and f"[ probectl record: {sum(want.values())} events" in out.stderr
    folded = probectl("script", "-i", str(path), "--format", "folded").stdout
    got: Counter = Counter()
    for line in folded.splitlines():
        stack, n = line.rsplit(" ", 1)
        got[caller_path(stack.split(";")[1:])] += int(n)
    assert got == want
    # the flame graph's counts are the same
    graph = probectl("flamegraph", "-i", str(path), "--format", "folded").stdout
    drawn: Counter = Counter()
    for line in graph.splitlines():
        stack, n = line.rsplit(" ", 1)
        frames = stack.split(";")[1:]
        assert not any(f.endswith("_[k]") for f in frames), "a uprobe's stack has no kernel frames"
        drawn[caller_path(frames)] += int(n)
    assert drawn == want


def test_every_frame_is_there_and_none_of_the_probe(live_tracefs, recording):
    path, out, binary = recording
    text = probectl("script", "-i", str(path)).stdout
    assert "[kernel.kallsyms]" not in text  # no __uprobe_trace_func, asm_exc_int3, ...
    deep = [s for s in text_stacks(text, binary) if "recurse" in s]
    assert len(deep) == 2 and all(s == ("work",) + ("recurse",) * 41 + ("main",) for s in deep)
    events = [json.loads(l) for l in probectl("script", "-i", str(path), "--format", "json").stdout.splitlines()]
    assert all(not e.get("kernel_stack") and e["user_stack"][0].startswith("work") for e in events)


def test_stacks_are_perfs_and_the_caller_perf_misses(live_tracefs, recording, tmp_path):
    perf = require_tool("perf", "apt linux-perf")
    path, _out, binary = recording
    data = tmp_path / "perf.data"
    subprocess.run([perf, "record", "-q", "-g", "-e", f"{G}:work", "-o", str(data), "--", str(binary), "2"],
                   check=True, capture_output=True)
    theirs = text_stacks(subprocess.run([perf, "script", "-i", str(data), "-F", "ip,sym,dso"], check=True,
                                        capture_output=True, text=True).stdout, binary)
    ours = text_stacks(probectl("script", "-i", str(path)).stdout, binary)
    assert len(ours) == len(theirs) == 102
    if has_frame(binary, "work"):
        # the kernel fixes up the caller at a `push %rbp`: the stacks are the same
        assert Counter(ours) == Counter(theirs)
    else:
        # work() has no frame of its own: perf's walk starts at its caller's frame and skips the caller;
        # probectl puts it in from the return address at the stack pointer
        assert Counter(s[:1] + s[2:] for s in ours) == Counter(theirs)
        assert all(s[1] in ("caller_a", "caller_b", "middle", "recurse") for s in ours)


def test_trace_cmd_reads_the_callchains(live_tracefs, recording, trace_cmd_bin):
    path, _out, _binary = recording
    report = subprocess.run([trace_cmd_bin, "report", str(path)], capture_output=True, text=True, check=True).stdout
    assert report.count("user_callchain:") == 102 and report.count(" work:") == 102
    assert re.search(r"user_callchain:\s+tgid=\d+ caller=\d+ \d+", report)


def test_a_tracepoint_keeps_its_kernel_stack_and_gets_the_user_stack(live_tracefs, callers, tmp_path):
    path = tmp_path / "sys.dat"
    out = probectl("record", "-g", "-e", "syscalls:sys_enter_getpid", "-o", str(path), "--", str(callers))
    assert "EXPECT getpid 1" in out.stdout
    events = [json.loads(l) for l in probectl("script", "-i", str(path), "--format", "json").stdout.splitlines()]
    assert len(events) == 1
    ev = events[0]
    assert any(f.startswith("do_syscall_64") for f in ev["kernel_stack"]), ev
    assert any(f.startswith("main+") for f in ev["user_stack"]), ev


def test_a_damaged_callchain_record_gives_what_can_be_read(live_tracefs, recording, tmp_path):
    path, _out, _binary = recording
    data = bytearray(path.read_bytes())
    # every callchain record's data_loc word points past its record
    with_id = probectl("script", "-i", str(path), "--format", "json").stdout  # (the file is fine before)
    assert with_id
    fmt = re.search(rb"name: user_callchain\nID: (\d+)", bytes(data))
    assert fmt
    event_id = int(fmt.group(1))
    damaged = 0
    for m in re.finditer(re.escape(event_id.to_bytes(2, "little") + b"\0\0"), bytes(data)):
        loc = m.start() + 12
        if int.from_bytes(data[loc:loc + 2], "little") == 16:
            data[loc:loc + 4] = (0xFFF0 << 16 | 0xFF00).to_bytes(4, "little")
            damaged += 1
    assert damaged >= 50
    bad = tmp_path / "damaged.dat"
    bad.write_bytes(bytes(data))
    for args in (("script",), ("script", "--format", "folded"), ("script", "--format", "json"),
                 ("flamegraph", "--format", "folded")):
        res = probectl(*args, "-i", str(bad), check=False)
        assert "Traceback" not in res.stderr and "internal error" not in res.stderr, res.stderr
        assert res.returncode in (0, 1), res.stderr


def test_a_commands_stacks_are_its_own_and_its_childrens(live_tracefs, callers, tmp_path):
    """With -- COMMAND, the uprobe's events (taken from perf) are the command's and its children's,
    not those of another process hitting the same probe at the same time."""
    other = subprocess.Popen(["/bin/sh", "-c", f"while :; do {callers} 1 >/dev/null; done"])
    try:
        path = tmp_path / "children.dat"
        out = probectl("record", "-g", "-e", f"{G}:work", "-o", str(path), "--",
                       "/bin/sh", "-c", f"{callers} 1; {callers} 1")
    finally:
        other.kill()
        other.wait()
    want = expected_paths(out.stdout)
    assert sum(want.values()) == 102 and "[ probectl record: 102 events" in out.stderr
    events = [json.loads(l) for l in probectl("script", "-i", str(path), "--format", "json").stdout.splitlines()]
    assert len({e["pid"] for e in events}) == 2 and all(e["user_stack"][0].startswith("work") for e in events)
    # the children are gone when the recording ends: their names come from the execs perf reported
    assert {e["comm"] for e in events} == {callers.name[:15]}


def test_a_small_ring_wraps_and_every_event_is_written_or_counted_lost(live_tracefs, callers, tmp_path):
    """The pages are written as perf's ring is read (native/chainmerge.h, ``cm_stream``): with the
    smallest ring (``-m 4``: one page) and 51,000 events, records wrap around the ring's end all the
    time and the kernel drops some; each event is then in the file with its own callchain, or
    counted lost, never half there."""
    path = tmp_path / "small.dat"
    out = probectl("record", "-g", "-m", "4", "-e", f"{G}:work", "-o", str(path), "--", str(callers), "1000")
    calls = sum(expected_paths(out.stdout).values())
    assert calls == 51_000
    m = re.search(r"\[ probectl record: ([\d,]+) events[^]]*?(?:, ([\d,]+) lost)? \]", out.stderr)
    assert m, out.stderr
    events, lost = (int((g or "0").replace(",", "")) for g in m.groups())
    assert events + lost == calls and events > 0
    want = expected_paths(out.stdout)
    got: Counter = Counter()
    for line in probectl("script", "-i", str(path), "--format", "folded").stdout.splitlines():
        stack, n = line.rsplit(" ", 1)
        got[caller_path(stack.split(";")[1:])] += int(n)
    assert sum(got.values()) == events and all(got[p] <= want[p] for p in got), (got, want)
