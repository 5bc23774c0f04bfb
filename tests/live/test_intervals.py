"""hist and latency --interval on the running kernel's path (user space here: no hist triggers): what
each interval printed adds up to what fixtures/stat_target.c did, the rounds it made apart show apart,
and bad input. The kernel path's intervals (readings of the hist file) are not run on this kernel."""
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

from tests.helpers import FIXTURES, ROOT, build_program, fails as run_fails, probectl as run_probectl

ENV = {"PYTHONPATH": str(ROOT)}
probectl = functools.partial(run_probectl, env=ENV)
fails = functools.partial(run_fails, env=ENV)


@pytest.fixture(scope="module")
def target() -> Path:
    return build_program("stat_target", [FIXTURES / "stat_target.c"], extra=("-pthread",))


def expected(stdout: str) -> dict[str, int]:
    return {k: int(v) for k, _, v in (line.split()[1].partition("=") for line in stdout.splitlines()
                                      if line.startswith("EXPECT "))}


def objects(stdout: str) -> list[dict]:
    return [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]


def test_hist_intervals_add_up_to_what_the_program_did(live_tracefs, target):
    """Four rounds 300 ms apart counted every 200 ms: several intervals with counts, one JSON object
    each, and the intervals' rows add up to the program's calls."""
    out = probectl("hist", "-x", str(target), "alpha", "--key", "pid", "--json", "--interval", "0.2", "--",
                   str(target), "4", "300", "100")
    blocks = objects(out.stdout)
    assert len([b for b in blocks if b["total"]]) >= 2 and all("time" in b for b in blocks)
    assert sum(row["count"] for b in blocks for row in b["rows"]) == expected(out.stdout)["alpha"]


def test_hist_intervals_as_text_blocks(live_tracefs, target):
    out = probectl("hist", "-x", str(target), "alpha", "--key", "comm", "--interval", "0.2", "--",
                   str(target), "2", "300", "100")
    stamps = [line for line in out.stdout.splitlines() if len(line) == 8 and line.count(":") == 2]
    assert len(stamps) >= 2 and "@[statA] 100" in out.stdout


def test_latency_intervals_add_up(live_tracefs, target):
    out = probectl("latency", "-x", str(target), "beta", "--json", "--interval", "0.2", "--", str(target), "3", "300", "50")
    blocks = objects(out.stdout)
    assert len([b for b in blocks if b["total"]]) >= 2
    assert sum(b["total"] for b in blocks) == expected(out.stdout)["beta"]


def test_ctrl_c_mid_interval_prints_the_partial_one(live_tracefs, target):
    """SIGINT 1.5 s into 1 s intervals of a system-wide count: the first interval and the cut one; the
    probe added for the run removed (live_tracefs checks)."""
    busy = subprocess.Popen([str(target), "1000", "20", "10", "0"], stdout=subprocess.DEVNULL)
    try:
        proc = subprocess.Popen([sys.executable, "-m", "probectl", "hist", "-x", str(target), "alpha", "--key", "comm",
                                 "--json", "--interval", "1"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, env={**os.environ, **ENV})
        deadline = time.monotonic() + 30
        while proc.stdout is not None and time.monotonic() < deadline:
            first = proc.stdout.readline()  # (the first interval: the run is under way)
            if first.startswith("{"):
                break
        time.sleep(0.5)
        proc.send_signal(signal.SIGINT)
        rest, stderr = proc.communicate(timeout=60)
    finally:
        busy.kill()
        busy.wait()
    assert proc.returncode == 0 and "Traceback" not in stderr, stderr
    blocks = objects(first + rest)
    assert len(blocks) == 2 and blocks[0]["total"] > 0 and blocks[1]["total"] > 0


@pytest.mark.parametrize("command", ["hist", "latency"])
def test_an_interval_too_short(live_tracefs, target, command):
    args = ["--key", "comm"] if command == "hist" else []
    assert "too short" in fails(command, "-x", str(target), "alpha", *args, "--interval", "0", "--", "true")


def test_interval_options_that_do_not_fit(live_tracefs, target, tmp_path):
    assert "--interval does not apply" in fails("latency", "-i", str(tmp_path / "x.dat"), "beta", "--interval", "1",
                                                status=2)
    assert "do not go together" in fails("latency", "-x", str(target), "beta", "--pairs", str(tmp_path / "p"),
                                         "--interval", "1", "--", "true")
    assert not (tmp_path / "p").exists()


def test_on_a_terminal_the_table_is_redrawn_in_place_with_the_rows_that_fit(live_tracefs, target):
    """In a pseudo-terminal of 8 lines: each interval clears the screen and draws the table again, cut
    to the rows that fit (a key per call: many rows)."""
    import fcntl
    import pty
    import struct
    import termios

    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 8, 120, 0, 0))
    proc = subprocess.Popen([sys.executable, "-m", "probectl", "hist", "-x", str(target), "alpha i", "--key", "i",
                             "--interval", "0.2", "--", str(target), "3", "300", "50"],
                            stdin=follower, stdout=follower, stderr=subprocess.DEVNULL, env={**os.environ, **ENV,
                                                                                          "COLUMNS": "120", "LINES": "8"})
    os.close(follower)
    chunks = []
    while True:
        try:
            data = os.read(leader, 65536)
        except OSError:
            break
        if not data:
            break
        chunks.append(data)
    proc.wait(timeout=60)
    os.close(leader)
    screens = b"".join(chunks).decode(errors="replace").split("\033[H\033[2J")[1:]
    assert proc.returncode == 0 and len(screens) >= 2
    drawn = [[line for line in s.splitlines() if line.startswith("@[") and "]:" not in line] for s in screens]
    assert any(rows for rows in drawn) and all(len(rows) <= 4 for rows in drawn)  # (8 lines: 4 for rows)
