"""Process names that are not UTF-8 and the exit paths of a traced run (issue 26).

A comm is bytes any process chooses (exec of a file so named, or prctl(PR_SET_NAME)): the fixture
program is run through a symbolic link named ``\\xff\\xfebad`` (its comm is those bytes) and traced
by trace, record (with -a), hist --key comm and latency; every one must finish, name it
``\\xff\\xfebad`` (each byte that is not UTF-8 as \\xNN, as script prints it), and a later trace of
an ordinary program must still work (saved_cmdlines holds the name for every later run). Then a
failure inside a run (a part that raises mid-run) must leave no instance and no event enabled.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import TRACEFS, build_fixture, probectl

NAME = b"\xff\xfebad"
SHOWN = "\\xff\\xfebad"
G = f"phn{os.getpid()}"


@pytest.fixture(scope="module")
def named(tmp_path_factory):
    """The fixture program and a link to it whose name (so the process's comm) is not UTF-8."""
    binary = build_fixture("uprobe_target")
    link = os.path.join(os.fsencode(tmp_path_factory.mktemp("names")), NAME)
    os.symlink(binary, link)
    return binary, os.fsdecode(link)


def test_a_name_that_is_not_utf8_traces(live_tracefs, named):
    binary, link = named
    out = probectl("trace", "-x", str(binary), f"{G}:t=add_ints a=%di:s32", "--", link, "2")
    lines = [l for l in out.stdout.splitlines() if f"{G}:t:" in l]
    assert len(lines) == 2 and all(l.split()[0] == SHOWN for l in lines), out.stdout
    # saved_cmdlines now holds the name: every later trace reads it
    out = probectl("trace", "-x", str(binary), f"{G}:t=add_ints a=%di:s32", "--", str(binary), "1")
    assert any(f"{G}:t:" in l for l in out.stdout.splitlines())


def test_a_name_that_is_not_utf8_is_recorded_and_counted(live_tracefs, named, tmp_path):
    binary, link = named
    probectl("add", "-x", str(binary), f"{G}:t=add_ints a=%di:s32")
    try:
        for extra in ((), ("-a",)):
            path = tmp_path / f"r{len(extra)}.dat"
            probectl("record", *extra, "-e", f"{G}:t", "-o", str(path), "--", link, "2")
            comms = {json.loads(l)["comm"] for l in probectl("script", "-i", str(path), "--format", "json")
                     .stdout.splitlines()}
            assert SHOWN in comms, comms
            rows = json.loads(probectl("query", "--json", "-i", str(path),
                                       f"SELECT comm, count(*) AS n FROM {G}.t GROUP BY comm").stdout)
            assert {"comm": SHOWN, "n": 2} in rows, rows
            report = json.loads(probectl("report", "--json", "-i", str(path), "--sort", "comm").stdout)
            assert any(r.get("comm") == SHOWN for r in report["rows"]), report
            pq = tmp_path / f"pq{len(extra)}"
            probectl("script", "-i", str(path), "--format", "parquet", "-o", str(pq))
            rows = json.loads(probectl("query", "--json", "-i", str(pq), "SELECT DISTINCT comm FROM events").stdout)
            assert {"comm": SHOWN} in rows
    finally:
        probectl("del", f"{G}:*", check=False)


@pytest.mark.parametrize("stacks", [("-g",), ("--call-graph", "dwarf")])
def test_a_program_at_a_path_of_bytes_and_controls_is_probed_and_its_stacks_named(live_tracefs, tmp_path, stacks):
    """A program whose path (so its comm and its frames' file) holds bytes that are not UTF-8 and an
    escape character: add, record with stacks (the maps kept in the file as bytes), and every output
    format names it with each such byte as \\xNN, no raw control character (a process must not send
    escape sequences to the terminal of whoever reads its trace), the frames named from the file."""
    binary = build_fixture("uprobe_target")
    odd = os.path.join(os.fsencode(tmp_path), b"pt\xff\x1b]0;x\x07")
    subprocess.run(["cp", binary, odd], check=True)
    shown = f"{os.fsdecode(os.fsencode(tmp_path))}/pt\\xff\\x1b]0;x\\x07"
    probectl("add", "-x", os.fsdecode(odd), f"{G}:s=sum_record rec->id")
    try:
        path = tmp_path / "odd.dat"
        probectl("record", *stacks, "-e", f"{G}:s", "-o", str(path), "--", os.fsdecode(odd), "2")
        outputs = {fmt: probectl("script", "-i", str(path), "--format", fmt).stdout
                   for fmt in ("text", "csv", "json", "folded")}
    finally:
        probectl("del", f"{G}:s")
    for fmt, text in outputs.items():
        assert "\x1b" not in text and "\x07" not in text and "\ufffd" not in text, (fmt, text)
    assert outputs["text"].count("pt\\xff\\x1b]0;x\\x07 ") == 2, outputs["text"]  # the comm, escaped
    assert f"sum_record+0x8 ({shown})" in outputs["text"] and "main+" in outputs["text"], outputs["text"]
    folded = outputs["folded"].splitlines()
    # (a frame's ';' is ':' in folded text, whose frames ';' separates)
    assert len(folded) == 1 and folded[0].startswith("pt\\xff\\x1b]0:x\\x07;") and \
        folded[0].endswith(";main;round_of_calls;sum_record 2"), folded
    events = [json.loads(l) for l in outputs["json"].splitlines()]
    assert [e["comm"] for e in events] == ["pt\\xff\\x1b]0;x\\x07"] * 2


def test_hist_and_latency_name_it(live_tracefs, named):
    binary, link = named
    out = probectl("hist", "-x", str(binary), "add_ints", "--key", "comm", "--json", "--", link, "2")
    hist = json.loads(out.stdout[out.stdout.index("{"):])
    assert [r["key"]["comm"] for r in hist["rows"]] == [SHOWN], hist
    out = probectl("latency", "-x", str(binary), "add_ints", "--", link, "2")
    assert "2 pairs" in out.stdout, out.stdout


FAILING_RUN = """
import sys
from probectl.record import processes
def broken(self, *a, **k):
    raise RuntimeError("a part failed mid-run")
processes.ProcessWatch.look = broken
from probectl.cli import main
sys.argv = ["probectl"] + sys.argv[1:]
main()
"""


def test_a_failure_mid_run_leaves_no_instance(live_tracefs, named, tmp_path):
    """Not only Ctrl-C: a run whose part raises tears its instance down (the live_tracefs fixture
    checks that no instance, probe or event is left) and says so with an Error, not a traceback."""
    binary, _ = named
    probectl("add", "-x", str(binary), f"{G}:t=add_ints")
    try:
        proc = subprocess.Popen([sys.executable, "-c", FAILING_RUN, "record", "-e", f"{G}:t",
                                 "-o", str(tmp_path / "x.dat"), "--", str(binary), "2"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        _, err = proc.communicate(timeout=120)
        # (the probe is not in use: the run's instance is gone)
        probectl("del", f"{G}:*")
    finally:
        probectl("del", f"{G}:*", check=False)
    assert proc.returncode == 1 and "a part failed mid-run" in err, err
    assert "Traceback" not in err
    assert not (tmp_path / "x.dat").exists()
    assert not (TRACEFS / "instances" / f"probectl-{proc.pid}").exists()
