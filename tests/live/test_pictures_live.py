"""Pictures of live recordings on this kernel: flame graphs of uprobe stacks (counted, weighed by a field,
selected by event and process), off-CPU time of a program that sleeps known times in known functions, the
Chrome JSON timeline of entry/return probes checked against the trace event format's rules, heat maps of
a recording's pairs against latency's, and pictures of the whole system opened in Chromium.

Uprobes and tracepoints with user stacks work here (no kprobes are needed): the fixture programs are
fixtures/uprobe_target.c and fixtures/offcpu_sleeps.c, built with frame pointers.
"""
from __future__ import annotations

import json
import os
import re
from collections import defaultdict
from pathlib import Path

import pytest

from tests.helpers import build_fixture, probectl, require_tracefs, tracefs_snapshot
from tests.live.test_live_uprobes import expect_lines
from tests.test_pictures import check_geometry, frames_of
from tests.live.test_record import prologue_end

pytestmark = pytest.mark.root

GS = f"pfgs{os.getpid()}"  # the stack probe, alone on its function (see test_record)
GT = f"pfgt{os.getpid()}"  # entry/return probes for the timeline


@pytest.fixture(scope="module")
def probes():
    require_tracefs()
    binary = build_fixture("uprobe_target")
    before = tracefs_snapshot()
    probectl("add", "-x", str(binary),
             f"{GS}:stk=bump+{prologue_end(binary, 'bump')} step=%si:s32",
             f"{GT}:add_ints=add_ints a=%di:s32 b=%si:s32",
             f"{GT}:ret=add_ints%return r=$retval:s32",
             f"{GT}:pick=pick_label index=%di:s32")
    try:
        yield binary
    finally:
        probectl("del", f"{GS}:*", f"{GT}:*", check=False)
        assert tracefs_snapshot() == before


@pytest.fixture(scope="module")
def stack_recording(probes, tmp_path_factory):
    path = tmp_path_factory.mktemp("fg") / "g.dat"
    probectl("record", "-g", "-e", f"{GS}:stk", "-o", str(path), "--", str(probes), "4")
    return path, probes


def test_flamegraph_of_a_recording(live_tracefs, stack_recording, tmp_path):
    path, binary = stack_recording
    svg = tmp_path / "g.svg"
    probectl("flamegraph", "-i", str(path), "-o", str(svg), "--width", "900")
    frames = frames_of(svg.read_text())
    check_geometry(frames, 4, 900)  # the root weighs the recording's 4 events
    names = [f["name"] for f in frames]
    chain = [next(f for f in frames if f["name"] == n) for n in ("main", "round_of_calls", "bump")]
    assert [f["count"] for f in chain] == [4, 4, 4] and not any(f["kernel"] for f in chain)
    assert chain[0]["y"] > chain[1]["y"] > chain[2]["y"]  # each on its caller
    assert binary.name[:15] in names  # the process is the root's child
    assert not any(f["kernel"] for f in frames)  # a uprobe's stack is the program's: no handler frames

    # weighed by a field: bump's step is i+5 in round i
    folded = probectl("flamegraph", "-i", str(path), "--weight", "step", "--format", "folded").stdout
    assert sum(int(line.rsplit(" ", 1)[1]) for line in folded.splitlines()) == 5 + 6 + 7 + 8
    probectl("flamegraph", "-i", str(path), "--weight", "step", "-o", str(svg))
    assert {f["unit"] for f in frames_of(svg.read_text())} == {"step"}
    got = probectl("flamegraph", "-i", str(path), "--weight", "stp", "-o", str(svg), check=False)
    assert got.returncode == 1 and "has no field 'stp'" in got.stderr and "did you mean step" in got.stderr

    # per process and per event: a selection that matches nothing says so, and writes nothing
    probectl("flamegraph", "-i", str(path), "--comm", binary.name[:15], "-e", "stk", "-o", str(svg))
    pid = json.loads(probectl("script", "-i", str(path), "--format", "json").stdout.splitlines()[0])["pid"]
    by_pid = probectl("flamegraph", "-i", str(path), "--pid", str(pid), "--format", "folded").stdout
    assert sum(int(line.rsplit(" ", 1)[1]) for line in by_pid.splitlines()) == 4
    got = probectl("flamegraph", "-i", str(path), "--pid", str(pid + 1000000), check=False)
    assert got.returncode == 1 and f"no stacks of pid {pid + 1000000}" in got.stderr
    other = tmp_path / "none.svg"
    got = probectl("flamegraph", "-i", str(path), "--comm", "no-such-comm", "-o", str(other), check=False)
    assert got.returncode == 1 and "no stacks of comm no-such-comm" in got.stderr and not other.exists()
    got = probectl("flamegraph", "-i", str(path), "-e", "nosuch", "-o", str(other), check=False)
    assert got.returncode == 1 and "no event in" in got.stderr and not other.exists()
    got = probectl("flamegraph", "--off-cpu", "-i", str(path), "-o", str(other), check=False)
    assert got.returncode == 1 and "has no sched:sched_switch events" in got.stderr and not other.exists()


def test_off_cpu_time_of_known_sleeps(live_tracefs, tmp_path):
    binary = build_fixture("offcpu_sleeps")
    path = tmp_path / "off.dat"
    out = probectl("record", "-g", "-e", "sched:sched_switch", "-e", "sched:sched_wakeup", "-o", str(path),
                   "--", str(binary))
    expected = {line.split("=")[0].split()[1]: int(line.split("=")[1]) for line in out.stdout.splitlines()
                if line.startswith("EXPECT ")}
    assert expected == {"sleep_long": 300, "sleep_short": 100}
    comm = binary.name[:15]
    folded = probectl("flamegraph", "--off-cpu", "-i", str(path), "--comm", comm, "--format", "folded").stdout
    blocked = defaultdict(int)
    for line in folded.splitlines():
        stack, ns = line.rsplit(" ", 1)
        frames = stack.split(";")
        assert frames[0] == comm
        for func in expected:
            if func in frames:
                blocked[func] += int(ns)
    for func, ms in expected.items():
        # five sleeps each: never shorter than asked (less the few µs from the syscall's entry to the
        # switch), later by the timer's slack (50 µs) and the wakeup's delivery
        assert ms * 1e6 - 5 * 200e3 <= blocked[func] <= ms * 1e6 + 5 * 3e6, (func, blocked[func])
    svg = tmp_path / "off.svg"
    probectl("flamegraph", "--off-cpu", "-i", str(path), "--comm", comm, "-o", str(svg))
    text = svg.read_text()
    assert ">Off-CPU Time Flame Graph<" in text
    frames = frames_of(text)
    long_frame = next(f for f in frames if f["name"] == "sleep_long")
    assert long_frame["unit"] == "ms" and abs(long_frame["count"] - 300) <= 16
    assert re.search(r"4\d\d ms off-CPU in \d+ stacks", text)


@pytest.fixture(scope="module")
def calls_recording(probes, tmp_path_factory):
    """add_ints' entries and returns and pick_label's entries, three rounds."""
    path = tmp_path_factory.mktemp("calls") / "t.dat"
    out = probectl("record", "-e", f"{GT}:*", "-o", str(path), "--", str(probes), "3")
    return path, expect_lines(out.stdout)


def test_timeline_of_entry_return_probes(live_tracefs, calls_recording, probes):
    path, expects = calls_recording
    expects = expects["add_ints"]
    trace = json.loads(probectl("script", "-i", str(path), "--format", "chrome-json", "--counter", "index").stdout)
    events = trace["traceEvents"]
    recorded = [json.loads(line) for line in
                probectl("script", "-i", str(path), "--format", "json").stdout.splitlines()]
    assert len(recorded) == 9

    # the trace event format's rules: phases, required keys, slices nesting per thread
    open_slices: dict[tuple, list] = defaultdict(list)
    for e in events:
        assert e["ph"] in ("M", "B", "E", "i", "C"), e
        assert isinstance(e["pid"], int) and isinstance(e["tid"], int)
        if e["ph"] == "M":
            assert e["name"] in ("process_name", "thread_name") and e["args"]["name"]
            continue
        assert isinstance(e["ts"], float | int) and "args" in e
        if e["ph"] == "B":
            open_slices[e["pid"], e["tid"]].append(e)
        elif e["ph"] == "E":
            begin = open_slices[e["pid"], e["tid"]].pop()
            assert begin["ts"] <= e["ts"]
        elif e["ph"] == "i":
            assert e["s"] in ("t", "p", "g")
    assert all(not v for v in open_slices.values())

    # every recorded event once, at its time
    shown = [e for e in events if e["ph"] in ("B", "E", "i")]
    assert len(shown) == len(recorded)
    times = sorted(round(e["ts"] * 1000) for e in shown)
    assert times == sorted(round(r["time"] * 1e9) for r in recorded)
    slices = [e for e in events if e["ph"] == "B"]
    ends = [e for e in events if e["ph"] == "E"]
    assert [(s["name"], s["args"]["a"], s["args"]["b"]) for s in slices] == \
        [("add_ints", int(x["a"]), int(x["b"])) for x in expects]
    assert [e["args"]["r"] for e in ends] == [int(x["ret"]) for x in expects]
    instants = [e for e in events if e["ph"] == "i"]
    assert [e["name"] for e in instants] == [f"{GT}:pick"] * 3
    assert [e["args"]["index"] for e in instants] == [1, 2, 3]
    counters = [e for e in events if e["ph"] == "C"]
    assert [e["args"] for e in counters] == [{"index": 1}, {"index": 2}, {"index": 3}]
    names = {e["args"]["name"] for e in events if e["ph"] == "M"}
    assert probes.name[:15] in names


def test_pictures_of_the_whole_system_in_chromium(live_tracefs, tmp_path, chromium_bin):
    """Two seconds of every CPU's scheduler events with stacks, drawn as a flame graph of the switches and
    as off-CPU time, and two seconds of read() calls as a latency heat map; Chromium opens them, a search
    reports the share Python computes from the folded stacks, the cells are latency's pairs. With
    PROBECTL_PICTURES_DIR set the screenshots go there (docs/pictures/, the README's pictures)."""
    from tests.chromium import Browser

    path = tmp_path / "sys.dat"
    probectl("record", "-g", "-a", "-e", "sched:sched_switch", "-e", "sched:sched_wakeup", "--duration", "2",
             "-o", str(path))
    shots = Path(os.environ["PROBECTL_PICTURES_DIR"]) if os.environ.get("PROBECTL_PICTURES_DIR") else tmp_path
    shots.mkdir(parents=True, exist_ok=True)
    with Browser(chromium_bin) as b:
        for name, args in (("flamegraph", ["-e", "sched_switch", "--title", "sched_switch stacks, every CPU, 2 s"]),
                           ("offcpu", ["--off-cpu", "--title", "Off-CPU time, every CPU, 2 s"])):
            folded = probectl("flamegraph", "-i", str(path), *args, "--format", "folded").stdout
            weights = [(line.rsplit(" ", 1)[0].split(";"), int(line.rsplit(" ", 1)[1]))
                       for line in folded.splitlines()]
            total = sum(n for _s, n in weights)
            share = 100 * sum(n for s, n in weights if "schedule_[k]" in s) / total
            svg = tmp_path / f"{name}.svg"
            probectl("flamegraph", "-i", str(path), *args, "-o", str(svg))
            frames = frames_of(svg.read_text())
            scale = {"samples": 1, "ns": 1, "µs": 1e3, "ms": 1e6, "s": 1e9}[frames[0]["unit"]]
            assert abs(frames[0]["count"] * scale - total) <= total * 0.005  # (times: 3 digits)
            height = int(re.search(r'height="(\d+)"', svg.read_text())[1])
            b.open(svg, 1200, height)
            assert b.errors() == []
            got = b.evaluate("flamegraph.search('^schedule$')")
            # (positions are written to 0.01 px: a few hundred frames add up to ~0.1 %)
            assert got["frames"] >= 1 and abs(got["percent"] - share) < 0.2, (got, share)
            b.evaluate("flamegraph.resetSearch()")
            b.screenshot(shots / f"{name}.png")
            assert (shots / f"{name}.png").read_bytes()[:4] == b"\x89PNG"

        # read() latencies of every CPU: the heat map's cells hold latency's pairs
        from tests.test_pictures import heat_cells

        reads = tmp_path / "reads.dat"
        probectl("record", "-a", "-e", "syscalls:sys_enter_read", "-e", "syscalls:sys_exit_read", "--duration", "2",
                 "-o", str(reads))
        pairs = tmp_path / "reads.pairs"
        probectl("latency", "-i", str(reads), "--start", "sys_enter_read", "--end", "sys_exit_read",
                 "--pairs", str(pairs))
        count = len(pairs.read_text().splitlines())
        svg = tmp_path / "heatmap.svg"
        probectl("heatmap", "-i", str(reads), "--start", "sys_enter_read", "--end", "sys_exit_read",
                 "--max-latency", "100", "--title", "read() latency, every CPU, 2 s", "-o", str(svg))
        cells = heat_cells(svg.read_text())
        assert sum(c[-1] for c in cells) == count
        b.open(svg, 1200, 600)
        assert b.errors() == []
        assert b.evaluate("document.querySelectorAll('rect.cell').length") == len(cells)
        b.screenshot(shots / "heatmap.png")


def test_heatmap_of_a_recording_is_the_heatmap_of_its_latency_pairs(live_tracefs, calls_recording, tmp_path):
    """heatmap --start/--end pairs a recording as latency -i does: the same cells as the heat map of
    latency's --pairs output (in ns, for these sub-µs calls)."""
    from tests.test_pictures import heat_cells

    path, _expects = calls_recording
    end = next(json.loads(line)["event"] for line in
               probectl("script", "-i", str(path), "--format", "json").stdout.splitlines()
               if "__probe_func" in line)
    pairs = tmp_path / "pairs.txt"
    probectl("latency", "-i", str(path), "--start", f"{GT}:add_ints", "--end", end, "--ns", "--pairs", str(pairs))
    assert len(pairs.read_text().splitlines()) == 3
    from_pairs = tmp_path / "a.svg"
    from_recording = tmp_path / "b.svg"
    probectl("heatmap", "-i", str(pairs), "--ns", "-o", str(from_pairs))
    probectl("heatmap", "-i", str(path), "--start", f"{GT}:add_ints", "--end", end, "-o", str(from_recording))
    cells = heat_cells(from_recording.read_text())
    assert sum(c[-1] for c in cells) == 3
    assert cells == heat_cells(from_pairs.read_text())
    got = probectl("heatmap", "-i", str(path), "--start", f"{GT}:pick", "--end", f"{GT}:pick", check=False)
    assert got.returncode == 1 and "one event" in got.stderr
    got = probectl("heatmap", "-i", str(path), "--start", f"{GT}:add_ints", check=False)
    assert got.returncode == 2 and "give both" in got.stderr
