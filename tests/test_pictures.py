"""Pictures against the numbers and in a real browser: flame graphs (probectl/pictures/flamegraph.py) from
folded stacks, latency heat maps (heatmap.py) from pairs, and their bad inputs.

The SVGs are parsed back: every frame's width is its count's share of the drawing width, children sit
within their parent and weigh no more than it, the root weighs the input's total; every heat-map cell
holds the pairs that fall in its ranges. Then headless Chromium (tests/chromium.py) opens them: no
script error, search highlights the matching frames and prints their share, a click zooms, and PNG
screenshots are taken (test_pictures_live.py takes those of docs/pictures/, from real recordings).
"""
from __future__ import annotations

import random
import re
import xml.etree.ElementTree as ET
from collections import Counter

import pytest

from tests.chromium import Browser
from tests.helpers import ROOT, probectl
from probectl.errors import ProbectlError
from probectl.pictures.flamegraph import FlameGraphOptions, X_PAD, render_svg
from probectl.pictures.heatmap import bin_pairs, parse_pairs, render_heatmap_svg
from probectl.pictures.stacks import parse_folded

SVG = "{http://www.w3.org/2000/svg}"
TITLE = re.compile(r"^(.*) \(([\d,.]+) (\w+), ([\d.]+)%\)$")

FOLDED = """\
prog;main;read_input;read 40
prog;main;read_input;parse 25
prog;main;compute;sum_rows 20
prog;main;compute;sum_rows;do_syscall_64_[k];ksys_read_[k] 5
prog;main;compute 6
prog;init;load_config 3
other;main;sleep 1
"""


def frames_of(svg: str) -> list[dict]:
    """Each drawn frame: name, count, share, kernel or not, x, width, y."""
    root = ET.fromstring(svg)
    group = next(g for g in root.iter(SVG + "g") if g.get("id") == "frames")
    out = []
    for g in group:
        m = TITLE.match(g.find(SVG + "title").text)
        assert m, g.find(SVG + "title").text
        rect = g.find(SVG + "rect")
        count = m[2].replace(",", "")
        out.append({"name": m[1], "count": float(count) if "." in count else int(count), "unit": m[3], "share": float(m[4]),
                    "kernel": g.get("class") == "k", "x": float(rect.get("x")), "w": float(rect.get("width")),
                    "y": float(rect.get("y"))})
    return out


def check_geometry(frames: list[dict], total: int, width: int, inverted: bool = False) -> None:
    """Widths proportional to counts; children within their parent, no heavier than it."""
    scale = (width - 2 * X_PAD) / total
    height = 16
    assert frames[0]["name"] == "all" and frames[0]["count"] == total
    for f in frames:
        assert abs(f["w"] - f["count"] * scale) <= 0.01, f
        assert abs(f["share"] - 100 * f["count"] / total) <= 0.005, f
    for parent in frames:
        child_y = parent["y"] + (height if inverted else -height)
        children = [c for c in frames if c["y"] == child_y and parent["x"] - 0.02 <= c["x"]
                    and c["x"] + c["w"] <= parent["x"] + parent["w"] + 0.02]
        assert sum(c["count"] for c in children) <= parent["count"], parent
    for f in frames[1:]:  # every frame stands on a parent
        parent_y = f["y"] + (-height if inverted else height)
        assert any(p["y"] == parent_y and p["x"] - 0.02 <= f["x"] and f["x"] + f["w"] <= p["x"] + p["w"] + 0.02
                   for p in frames), f


def test_frames_are_as_wide_as_their_counts():
    stacks = parse_folded(FOLDED.splitlines(True))
    assert stacks.total == 100
    svg = render_svg(stacks, FlameGraphOptions(width=1000, min_width=0))
    frames = frames_of(svg)
    check_geometry(frames, 100, 1000)
    by_name = {f["name"]: f for f in frames}
    assert sorted(f["count"] for f in frames if f["name"] == "main") == [1, 96]
    assert by_name["prog"]["count"] == 99 and by_name["other"]["count"] == 1
    assert by_name["read_input"]["count"] == 65 and by_name["compute"]["count"] == 31
    assert by_name["sum_rows"]["count"] == 25 and by_name["ksys_read"]["count"] == 5
    assert by_name["ksys_read"]["kernel"] and by_name["do_syscall_64"]["kernel"]
    assert not by_name["sum_rows"]["kernel"]
    fill = re.findall(r'<g class="k"><title>ksys_read.*?fill="([^"]+)"', svg)[0]
    hue = int(re.match(r"hsl\((\d+),", fill)[1])
    assert 165 <= hue <= 195  # kernel frames in their own colours
    assert "<text id=\"title\"" in svg and ">Flame Graph<" in svg and "100 samples in 7 stacks" in svg


def test_inverted_titles_and_count_names():
    stacks = parse_folded(FOLDED.splitlines(True), unit="samples")
    svg = render_svg(stacks, FlameGraphOptions(title="Allocations <by> size", width=800, inverted=True,
                                               count_name="bytes", min_width=0))
    frames = frames_of(svg)
    check_geometry(frames, 100, 800, inverted=True)
    assert frames[0]["y"] < min(f["y"] for f in frames[1:])  # the root at the top
    assert {f["unit"] for f in frames} == {"bytes"}
    assert "Allocations &lt;by&gt; size" in svg


def call_graph_stacks(distinct: int, samples: int, seed: int = 7) -> list[str]:
    """Folded lines of ``samples`` stacks, ``distinct`` of them different, from random walks down a call
    graph where each function calls a few others, some far more often (as real profiles look)."""
    rng = random.Random(seed)
    callees = {f"fn_{i}": [f"fn_{rng.randrange(3000)}" for _ in range(rng.randint(2, 6))] for i in range(3000)}
    counts: Counter = Counter()
    expo, randint = rng.expovariate, rng.randint

    def walk() -> str:
        frames = ["main"]
        node = "fn_0"
        for _ in range(randint(4, 24)):
            frames.append(node)
            options = callees[node]
            node = options[min(len(options) - 1, int(expo(1.2)))]  # the first callees far more often
        return ";".join(frames)

    while len(counts) < distinct:
        counts[walk()] += 1
    population = list(counts)
    for stack in rng.choices(population, k=samples - sum(counts.values())):
        counts[stack] += 1
    return [f"{s} {n}\n" for s, n in counts.items()]


@pytest.fixture(scope="module")
def million_stacks() -> list[str]:
    """1,000,000 samples of 100,000 distinct stacks, as folded lines."""
    return call_graph_stacks(100_000, 1_000_000)


def test_minwidth_bounds_a_million_stacks(million_stacks):
    lines = million_stacks
    stacks = parse_folded(lines)
    assert stacks.total == 1_000_000 and len(stacks.counts) == 100_000
    svg = render_svg(stacks, FlameGraphOptions(width=1200, min_width=0.1))
    frames = frames_of(svg)
    assert all(f["w"] >= 0.1 - 0.005 for f in frames)
    assert frames[0]["count"] == 1_000_000
    # at most width/minwidth frames a level (25 levels)
    assert len(frames) <= 25 * 1180 / 0.1
    assert len(svg) < 40_000_000
    assert "frames narrower than the minimum width left out" in svg
    wide = render_svg(stacks, FlameGraphOptions(width=1200, min_width=2))
    assert len(frames_of(wide)) <= 25 * 1180 / 2 and len(wide) < len(svg) / 2


@pytest.mark.parametrize("text, message", [
    ("", "holds no stacks"),
    ("\n\n", "holds no stacks"),
    ("a;b;c 3\na;b junk\n", "line 2: not a folded stack"),
    ("a;b;c\n", "line 1: not a folded stack"),
    ("a;b -4\n", "line 1: not a folded stack"),
    (" 12\n", "line 1: not a folded stack"),
])
def test_bad_folded_input_is_an_error_and_writes_nothing(tmp_path, text, message):
    with pytest.raises(ProbectlError, match=message):
        parse_folded(text.splitlines(True))
    out = tmp_path / "g.svg"
    out.write_text("the old picture")
    got = probectl("flamegraph", "--folded", "-o", str(out), input=text, check=False)
    assert got.returncode == 1 and got.stderr.startswith("Error: ") and "Traceback" not in got.stderr
    assert message in got.stderr and "Hint: " in got.stderr
    assert out.read_text() == "the old picture"  # kept whole: never half an SVG
    assert [p.name for p in tmp_path.iterdir()] == ["g.svg"]  # no temporary file left


def test_cli_reads_folded_stdin_and_writes_atomically(tmp_path):
    out = tmp_path / "g.svg"
    got = probectl("flamegraph", "--folded", "-o", str(out), "--title", "T", "--width", "600", input=FOLDED)
    assert f"written to {out}" in got.stderr
    check_geometry(frames_of(out.read_text()), 100, 600)
    again = probectl("flamegraph", "--folded", "--format", "folded", input=FOLDED).stdout
    assert parse_folded(again.splitlines(True)).counts == parse_folded(FOLDED.splitlines(True)).counts


def test_recordings_without_stacks_or_sched_events_are_errors(tmp_path):
    sample = ROOT / "tests" / "data" / "tracedat" / "sample-v7.dat"
    out = tmp_path / "g.svg"
    for extra, message in (((), "has no stacks"), (("--off-cpu",), "has no sched:sched_switch events")):
        got = probectl("flamegraph", "-i", str(sample), "-o", str(out), *extra, check=False)
        assert got.returncode == 1 and "Traceback" not in got.stderr, got.stderr
        assert message in got.stderr and "Hint: record" in got.stderr
        assert not out.exists()
    empty = tmp_path / "empty.dat"
    empty.write_bytes(b"")
    got = probectl("flamegraph", "-i", str(empty), "-o", str(out), check=False)
    assert got.returncode == 1 and got.stderr.startswith("Error: ") and not out.exists()
    got = probectl("flamegraph", "--folded", "--comm", "x", input=FOLDED, check=False)
    assert got.returncode == 2 and "apply to recordings" in got.stderr


# ---- heat maps --------------------------------------------------------------------------------------


def heat_cells(svg: str) -> list[tuple[float, float, str, float, float, int]]:
    """(t_lo, t_hi, latency range text, x, y, count) of every cell."""
    cells = []
    for m in re.finditer(r'<rect class="cell" x="([\d.]+)" y="([\d.]+)"[^>]*><title>([\d.e-]+)–([\d.e-]+) s, '
                         r'(.*?): ([\d,]+) pairs</title>', svg):
        cells.append((float(m[3]), float(m[4]), m[5], float(m[1]), float(m[2]), int(m[6].replace(",", ""))))
    return cells


def pairs_text(seed: int = 3, n: int = 5000) -> str:
    rng = random.Random(seed)
    t, lines = 50.0, []
    for _ in range(n):
        t += rng.expovariate(1000)
        lat = rng.lognormvariate(6, 0.6) if rng.random() < 0.9 else rng.lognormvariate(9, 0.2)
        lines.append(f"{t:.6f} {int(lat)}\n")
    return "".join(lines)


def test_heatmap_cells_hold_the_pairs():
    text = pairs_text()
    pairs = parse_pairs(text.splitlines(True))
    grid = bin_pairs(pairs, columns=40, rows=30)
    assert grid.total == len(pairs) == 5000
    svg = render_heatmap_svg(grid)
    cells = heat_cells(svg)
    assert sum(c[5] for c in cells) == 5000
    # every cell's count is the number of pairs in its ranges (recounted here from the pairs)
    scale, unit = grid.unit
    assert unit == "ms"  # the largest latencies are ~8 ms
    for t_lo, t_hi, rng, _x, _y, n in cells:
        lo, hi = (float(v) for v in re.match(r"([\d.]+)–([\d.]+) ms", rng).groups())
        inside = sum(1 for t, lat in zip(pairs.times, pairs.latencies)
                     if t_lo - 1e-9 <= t - grid.t0 < t_hi - 1e-9 and lo * scale <= lat < hi * scale)
        assert inside == n, (t_lo, rng)
    # units follow the data
    assert bin_pairs(parse_pairs(["1.0 3\n", "1.5 700\n"])).unit[1] == "µs"
    assert bin_pairs(parse_pairs(["1.0 3\n", "1.5 2500000\n"])).unit[1] == "s"
    in_ns = parse_pairs(["1.0 300\n", "1.5 900\n"], ns=True)  # (latency --ns --pairs)
    assert list(in_ns.latencies) == [0.3, 0.9] and bin_pairs(in_ns).unit[1] == "ns"


def test_heatmap_max_latency_counts_longer_ones_in_the_top_row():
    pairs = parse_pairs(["1.0 10\n", "1.1 20\n", "1.2 5000\n"])
    grid = bin_pairs(pairs, columns=1, rows=10, max_latency=100)
    assert grid.total == 3 and grid.clipped == 1 and grid.counts[0][-1] == 1
    assert "≥ 90 µs" in render_heatmap_svg(grid)


@pytest.mark.parametrize("text, message", [
    ("", "holds no latency pairs"),
    ("# only a comment\n", "holds no latency pairs"),
    ("1.0 20\n2.0\n", "line 2: not a 'completion_time latency' pair"),
    ("1.0 -5\n", "line 1"),
    ("x y\n", "line 1"),
])
def test_bad_pairs_are_errors_and_write_nothing(tmp_path, text, message):
    out = tmp_path / "h.svg"
    got = probectl("heatmap", "-o", str(out), input=text, check=False)
    assert got.returncode == 1 and message in got.stderr and "Traceback" not in got.stderr
    assert not out.exists() and not list(tmp_path.iterdir())


# ---- in the browser ----------------------------------------------------------------------------------


def test_flamegraph_in_chromium(tmp_path, chromium_bin):
    svg = tmp_path / "g.svg"
    probectl("flamegraph", "--folded", "-o", str(svg), "--width", "1000", input=FOLDED)
    frames = frames_of(svg.read_text())
    with Browser(chromium_bin) as b:
        b.open(svg, 1000, 300)
        assert b.errors() == []
        assert b.evaluate("flamegraph.frames().length") == len(frames)
        # search: the matching frames highlighted, their share (nested matches once) printed
        got = b.evaluate("flamegraph.search('^(read|sum_rows|ksys_read)$')")
        assert got["frames"] == 3
        assert abs(got["percent"] - 65.0) < 0.01  # read 40 + sum_rows 25 (ksys_read is inside it)
        assert b.evaluate("document.getElementById('matched').textContent") == "Matched: 65.0%"
        lit = b.evaluate("flamegraph.frames().filter(f => f.rect.getAttribute('fill') == "
                         "document.documentElement.getAttribute('data-match')).map(f => f.name).sort()")
        assert lit == ["ksys_read", "read", "sum_rows"]
        b.screenshot(tmp_path / "search.png")
        # a click on "compute" zooms: it fills the width, its children scale with it, the others hide
        box = b.evaluate("(() => { var r = flamegraph.frames().find(f => f.name == 'compute').rect"
                         ".getBoundingClientRect(); return [r.x + r.width / 2, r.y + r.height / 2]; })()")
        b.click(*box)
        zoomed = b.evaluate("(() => { var f = flamegraph.zoomed(); return [f.name, +f.rect.getAttribute('width')]; })()")
        assert zoomed == ["compute", 980.0]
        sum_rows = b.evaluate("+flamegraph.frames().find(f => f.name == 'sum_rows').rect.getAttribute('width')")
        assert abs(sum_rows - 980 * 25 / 31) < 0.01
        assert b.evaluate("flamegraph.frames().find(f => f.name == 'read').g.classList.contains('hide')")
        assert b.evaluate("flamegraph.frames().find(f => f.name == 'main' && f.w0 > 500).g.classList.contains('parent')")
        assert b.evaluate("!document.getElementById('unzoom').classList.contains('hide')")
        b.screenshot(tmp_path / "zoom.png")
        b.evaluate("flamegraph.unzoom()")
        assert b.evaluate("+flamegraph.frames().find(f => f.name == 'read').rect.getAttribute('width')") == \
            pytest.approx(980 * 40 / 100, abs=0.01)
        # ?s= in the address searches on load
        b.open(svg, 1000, 300, query="?s=parse")
        assert b.evaluate("document.getElementById('matched').textContent") == "Matched: 25.0%"
        assert b.errors() == []
    assert (tmp_path / "zoom.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_big_flamegraph_and_heatmap_open_in_chromium(tmp_path, chromium_bin, million_stacks):
    big = tmp_path / "big.svg"
    probectl("flamegraph", "--folded", "-o", str(big), input="".join(million_stacks))
    heat = tmp_path / "heat.svg"
    probectl("heatmap", "-o", str(heat), "--title", "Latency", input=pairs_text())
    with Browser(chromium_bin) as b:
        b.open(big, 1200, 500)
        assert b.errors() == []
        assert b.evaluate("flamegraph.frames().length") == len(frames_of(big.read_text()))
        b.open(heat, 1200, 600)
        assert b.errors() == []
        assert b.evaluate("document.querySelectorAll('rect.cell').length") == len(heat_cells(heat.read_text()))
        b.screenshot(tmp_path / "heat.png")
    assert (tmp_path / "heat.png").stat().st_size > 1000


def test_timeline_of_a_trace_cmd_file_has_every_event_once(tmp_path):
    """A file of tracepoints (no probes: instants only) as Chrome JSON, to a file written whole."""
    import json

    sample = ROOT / "tests" / "data" / "tracedat" / "sample-v7.dat"
    recorded = probectl("script", "-i", str(sample), "--format", "json").stdout.splitlines()
    out = tmp_path / "t.json"
    got = probectl("script", "-i", str(sample), "--format", "chrome-json", "-o", str(out), "--counter", "target_cpu")
    assert f"{len(recorded)} events written to {out}" in got.stderr
    events = json.loads(out.read_text())["traceEvents"]
    shown = [e for e in events if e["ph"] not in ("M", "C")]
    assert len(shown) == len(recorded) and {e["ph"] for e in shown} == {"i"}
    assert sorted(round(e["ts"] * 1000) for e in shown) == sorted(round(json.loads(r)["time"] * 1e9) for r in recorded)
    bad = probectl("script", "-i", str(sample), "--format", "chrome-json", "-o", str(tmp_path / "no" / "t.json"),
                   check=False)
    assert bad.returncode == 1 and bad.stderr.startswith("Error: cannot write") and not (tmp_path / "no").exists()
    usage = probectl("script", "-i", str(sample), "--format", "text", "--counter", "x", check=False)
    assert usage.returncode == 2 and "--counter" in usage.stderr


def test_a_timeline_file_is_written_in_bounded_memory(tmp_path):
    """script --format chrome-json -o FILE streams the timeline into the file (whole or not at all):
    three times the events (beyond a batch of the reader) take little more memory than the larger input
    file's mapping, where the whole text in memory grew with the output."""
    import json
    import subprocess
    import sys

    sys.path.insert(0, str(ROOT / "bench"))
    from synth import synthesize

    peaks = {}
    for events in (150_000, 450_000):
        trace, out = tmp_path / f"s{events}.dat", tmp_path / f"s{events}.json"
        (tmp_path / f"p{events}").mkdir()
        synthesize(trace, events, tmp_path / f"p{events}", threads={101: "a", 102: "b"}, sizes=(16, 4096))
        run = ("import resource, subprocess, sys\n"
               "done = subprocess.run(sys.argv[1:], capture_output=True, text=True)\n"
               "assert done.returncode == 0, done.stderr\n"
               "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)")
        got = subprocess.run([sys.executable, "-c", run, sys.executable, "-m", "probectl", "script", "-i", str(trace),
                              "--format", "chrome-json", "-o", str(out)], capture_output=True, text=True, cwd=ROOT)
        assert got.returncode == 0, got.stderr
        peaks[events] = int(got.stdout.split()[-1])  # KiB
        shown = [e for e in json.loads(out.read_text())["traceEvents"] if e["ph"] == "i"]
        assert len(shown) == events
    grown = peaks[450_000] - peaks[150_000]
    size = (tmp_path / "s450000.json").stat().st_size - (tmp_path / "s150000.json").stat().st_size
    assert grown * 1024 < size / 3, (peaks, size)


def test_blocked_time_of_switches_and_wakeups():
    """Off-CPU intervals (pictures/offcpu.py) from switch and wakeup sequences, as a recording gives them."""
    from probectl.pictures.offcpu import BlockedTime

    time = BlockedTime(Counter())
    S, R, PREEMPTED = 1, 0, 0x100  # prev_state: sleeping, running, preempted (TASK_REPORT_MAX)
    time.switch(1000, 7, S, 8, lambda: "app;main;wait_k_[k];trace_event_raw_event_sched_switch_[k]")
    time.wakeup(1600, 7)  # blocked 600 ns: the wakeup ends it, not the switch in
    time.switch(1900, 8, R, 7, lambda: "other")
    time.switch(2000, 7, PREEMPTED, 8, lambda: "app;preempted")  # runnable: not blocked
    time.switch(2100, 8, S, 7, None)  # no stack / not selected: not counted
    time.switch(3000, 7, S, 0, lambda: "app;main;read")
    time.wakeup(3500, 7)
    time.wakeup(3600, 7)  # (a second wakeup does not move the first)
    # no switch in from the idle task (a command-scoped recording lacks it): the next switch out ends it
    time.switch(4000, 7, S, 0, lambda: "app;main;read")
    time.switch(4800, 0, R, 7, None)  # without a wakeup: until the switch in
    time.switch(5000, 7, S, 0, lambda: "app;main;never_ends")  # still blocked at the end: unknown
    assert dict(time.counts) == {"app;main;wait_k_[k]": 600, "app;main;read": 500 + 800}
    assert time.intervals == 3
