"""Odd values and unbounded options of the analysis commands (issue 26, third round): each is a clear
Error (or a usage error naming the option), never an internal error, and writes nothing; the values
that are odd but meaningful (names whose bytes are not UTF-8) work.
"""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from tests.helpers import fails, probectl

DATA = Path(__file__).parent / "data" / "tracedat"
SAMPLE = DATA / "sample-v7.dat"


# ---- heatmap: the grid is bounded, whatever --step or the pairs' times ----------------------------

@pytest.mark.parametrize("pairs,args,message", [
    ("1.0 5\n2.0 7\n", ("--step", "0.0000001"), "more than 5,000 columns"),
    ("0 5\n1e308 7\n", ("--step", "1"), "more than 5,000 columns"),
    ("-1e308 5\n1e308 7\n", (), "more than a float holds"),
    ("1e308 5\n-1e308 1e308\n", (), "more than a float holds"),
    ("1.0 5\n2.0 7\n", ("--max-latency", "inf"), "not a size"),
    ("1.0 5\n2.0 7\n", ("--step", "inf"), "not a size"),
    ("1.0 5\n2.0 7\n", ("--step", "nan"), "not a size"),
])
def test_heatmap_grid_is_bounded(tmp_path, pairs, args, message):
    src = tmp_path / "pairs.txt"
    src.write_text(pairs)
    out = tmp_path / "h.svg"
    assert message in fails("heatmap", "-i", str(src), "-o", str(out), *args, timeout=60)
    assert not out.exists()


@pytest.mark.parametrize("pairs", ["0 1e308\n1 0\n", "1e308 5\n1e308 1e308\n", "1e300 1\n1e300 2\n"])
def test_heatmap_of_huge_but_finite_values(tmp_path, pairs):
    src = tmp_path / "pairs.txt"
    src.write_text(pairs)
    probectl("heatmap", "-i", str(src), "-o", str(tmp_path / "h.svg"), timeout=60)
    assert (tmp_path / "h.svg").read_text().startswith("<?xml")


# ---- flamegraph --folded: counts that are not numbers, frames that are not UTF-8 -------------------

@pytest.mark.parametrize("count", ["inf", "-inf", "1e400", "nan", "9" * 30, "-1"])
def test_folded_counts_that_are_not_counts(tmp_path, count):
    src = tmp_path / "in.folded"
    src.write_text(f"main;foo {count}\nmain;bar 3\n")
    assert "not a folded stack" in fails("flamegraph", "--folded", "-i", str(src), "-o", str(tmp_path / "f.svg"))
    assert not (tmp_path / "f.svg").exists()


def test_folded_frames_that_are_not_utf8(tmp_path):
    """A frame's bytes that are not UTF-8 are \\xNN in the SVG (which must be UTF-8) and kept as they
    were in folded output."""
    src = tmp_path / "in.folded"
    src.write_bytes(b"main;\xff\xfeframe 3\nmain;ok 1\n")
    probectl("flamegraph", "--folded", "-i", str(src), "-o", str(tmp_path / "f.svg"))
    svg = (tmp_path / "f.svg").read_bytes().decode()
    assert "\\xff\\xfeframe" in svg
    probectl("flamegraph", "--folded", "-i", str(src), "--format", "folded", "-o", str(tmp_path / "out.folded"))
    assert b"main;\xff\xfeframe 3" in (tmp_path / "out.folded").read_bytes()


# ---- empty paths are not "not given" ------------------------------------------------------------

@pytest.mark.parametrize("args", [
    ("heatmap", "-i", "PAIRS", "-o", ""),
    ("flamegraph", "--folded", "-i", "FOLDED", "-o", ""),
    ("latency", "-i", "SAMPLE", "syscalls:sys_enter_getpid", "--pairs", ""),
    ("hist", "-i", "", "syscalls:sys_enter_getpid", "--key", "comm"),
    ("query", "-i", "", "SELECT 1"),
    ("report", "-i", ""),
    ("script", "-i", ""),
    ("script", "-i", "SAMPLE", "--format", "parquet", "-o", ""),
    ("record", "-o", "", "-e", "sched:sched_switch", "--", "true"),
    ("heatmap", "-i", " ", "-o", "OUT"),
])
def test_an_empty_path_is_a_usage_error(tmp_path, args):
    (tmp_path / "pairs").write_text("1 2\n")
    (tmp_path / "folded").write_text("a;b 1\n")
    real = {"PAIRS": str(tmp_path / "pairs"), "FOLDED": str(tmp_path / "folded"), "SAMPLE": str(SAMPLE),
            "OUT": str(tmp_path / "o.svg")}
    err = fails(*(real.get(a, a) for a in args), status=2, cwd=tmp_path)
    assert "was given an empty" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["folded", "pairs"]


# ---- names: too long for a directory, or not UTF-8 -----------------------------------------------

@pytest.mark.parametrize("flag", ["--recording", "--host"])
def test_a_partition_name_too_long_for_a_directory(tmp_path, flag):
    err = fails("script", "-i", str(SAMPLE), "--format", "parquet", "-o", str(tmp_path / "pq"), flag, "r" * 300)
    assert "longer than a directory name may be" in err and flag in err
    assert not (tmp_path / "pq").exists() or not any((tmp_path / "pq").iterdir())


def test_recording_paths_that_are_not_utf8(tmp_path):
    """A trace.dat and a Parquet directory whose paths are not UTF-8 query, report and convert; the
    recording's name shows its bytes as \\xNN."""
    base = os.path.join(os.fsencode(tmp_path), b"\xff\xfe")
    os.mkdir(base)
    dat = os.fsdecode(os.path.join(base, b"rec\xff.dat"))
    shutil.copy(SAMPLE, dat)
    rows = json.loads(probectl("query", "--json", "-i", dat,
                               "SELECT recording, count(*) AS n FROM syscalls.sys_enter_getpid GROUP BY ALL").stdout)
    assert rows == [{"recording": "rec\\xff", "n": 100}]
    out = os.fsdecode(os.path.join(base, b"pq"))
    probectl("script", "-i", dat, "--format", "parquet", "-o", out)
    rows = json.loads(probectl("query", "--json", "-i", out,
                               "SELECT count(*) AS n FROM syscalls.sys_enter_getpid").stdout)
    assert rows == [{"n": 100}]
    assert json.loads(probectl("report", "--json", "-i", out).stdout)["total"] > 0


# ---- Ctrl-C from the very start -----------------------------------------------------------------

def test_ctrl_c_at_any_moment_of_the_start_is_quiet():
    """SIGINT at many moments of a command's first fractions of a second (its imports, its start,
    its run): the program ends with 130 (or 0, done before it came) and no traceback of probectl's
    code. (Before probectl's first line the interpreter's own start-up is not probectl's: a
    traceback from there names none of its files, and Python's default SIGINT action there kills.)"""
    import re
    import signal
    import subprocess
    import sys
    import time

    pkg = re.compile(r'File "[^"]*/probectl/')
    seen = []
    for k in range(40):
        delay = 0.005 * k
        proc = subprocess.Popen([sys.executable, "-m", "probectl", "report", "-i", str(SAMPLE)],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        time.sleep(delay)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
        assert not pkg.search(err), (delay, err)
        assert proc.returncode in (0, 130, -signal.SIGINT) or "Traceback" in err, (delay, proc.returncode, err)
        seen.append(proc.returncode)
    assert 130 in seen


def test_ctrl_c_during_a_query_is_quiet_and_never_hangs():
    """SIGINT while DuckDB runs a query: DuckDB turns the KeyboardInterrupt into errors of its own
    ("Query interrupted", "... failed: KeyboardInterrupt"), and its threads and a module still
    importing in the background made the interpreter's shutdown hang now and then. Each run ends
    with 130 and nothing on stderr, within seconds, at whatever moment the signal came."""
    import random
    import signal
    import subprocess
    import sys
    import time

    rng = random.Random(26)
    for _ in range(25):
        proc = subprocess.Popen([sys.executable, "-m", "probectl", "query", "-i", str(SAMPLE),
                                 "SELECT count(*) FROM range(3000000000) a, events"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        time.sleep(rng.uniform(0.3, 1.2))
        proc.send_signal(signal.SIGINT)
        try:
            _, err = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            raise AssertionError("a query interrupted by Ctrl-C did not end")
        assert proc.returncode == 130 and err == "", (proc.returncode, err)


def test_ctrl_c_raised_inside_a_callback_is_delivered_again_not_printed(monkeypatch, capsys):
    """A Ctrl-C whose KeyboardInterrupt Python raised inside a weakref callback (the import machinery's,
    as a command imports a module late) cannot propagate: Python printed "Exception ignored in ..."
    with a traceback of probectl's handler, and the interrupt was lost. The command's hook delivers it
    again and prints nothing."""
    import signal
    import sys
    import weakref

    from probectl.cli import _interrupt_again

    monkeypatch.setattr(sys, "unraisablehook", _interrupt_again)
    got: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: got.append(signum))
    try:
        class Owner:
            pass

        def interrupted(_ref: object) -> None:
            raise KeyboardInterrupt

        owner = Owner()
        ref = weakref.ref(owner, interrupted)
        del owner
        assert got == [signal.SIGINT] and ref() is None
    finally:
        signal.signal(signal.SIGINT, previous)
    assert capsys.readouterr().err == ""
