"""JIT frames named from ``/tmp/perf-PID.map``, copied into the recording when it ends: a program
(``fixtures/jit_target.c``) copies a function into an anonymous executable mapping, names it in its
map and calls a probed function through it; ``record -g`` keeps the map, so ``script`` and
``flamegraph`` name the frame after the file is gone, as perf names it from the file while it is
there. A map another user owns is left out with a note. libc's own frames are named from libc6-dbg's
debug file, as perf names them."""
from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from tests.helpers import build_fixture, probectl
from tests.live.test_record import script_json

NOBODY = 65534


@pytest.fixture
def jit_probe(live_tracefs):
    binary = build_fixture("jit_target")
    group = f"jit{os.getpid()}"
    probectl("add", "-x", str(binary), f"{group}:probed=probed")
    try:
        yield binary, f"{group}:probed"
    finally:
        probectl("del", f"{group}:*")


def _record(binary: Path, event: str, out: Path, *args: str) -> tuple[subprocess.CompletedProcess, Path]:
    rec = probectl("record", "-g", "-e", event, "-o", str(out), "--", str(binary), *args)
    m = re.search(r"^EXPECT jit=([0-9a-f]+) size=(\d+) name=(\S+) map=(\S+)$", rec.stdout, re.M)
    assert m, rec.stdout
    return rec, Path(m.group(4))


def test_jit_frames_are_named_from_the_copied_map(jit_probe, tmp_path):
    binary, event = jit_probe
    out = tmp_path / "jit.dat"
    rec, map_file = _record(binary, event, out, "3")
    map_file.unlink()  # (gone, as on another machine)
    assert "2 lines that are no 'START SIZE name' left out" in rec.stderr
    events = script_json(out)
    assert len(events) == 3
    for ev in events:
        stack = ev["user_stack"]
        assert stack[0] == "probed" and stack[1].startswith("middle"), stack
        assert stack[2].startswith("jit_trampoline") and stack[3].startswith("main"), stack
    text = probectl("script", "-i", str(out)).stdout
    assert re.search(rf"^\t\s*[0-9a-f]+ jit_trampoline\+0x[0-9a-f]+ \({map_file}\)$", text, re.M), text
    folded = probectl("flamegraph", "-i", str(out), "--format", "folded").stdout
    assert re.search(r";main;jit_trampoline;middle;probed(;.*)? 3$", folded, re.M), folded


def test_a_map_another_user_owns_is_left_out(jit_probe, tmp_path):
    if os.geteuid() != 0:
        pytest.skip("giving the map to another user needs root")
    binary, event = jit_probe
    out = tmp_path / "foreign.dat"
    rec, map_file = _record(binary, event, out, "--owner", str(NOBODY), "1")
    map_file.unlink()
    assert f"{map_file} is owned by uid {NOBODY}" in rec.stderr and "left out" in rec.stderr
    (ev,) = script_json(out)
    assert ev["user_stack"][:3] == ["probed", ev["user_stack"][1], "[unknown]"], ev["user_stack"]
    assert ev["user_stack"][1].startswith("middle")


def test_libc_frames_and_jit_frames_as_perf_names_them(jit_probe, tmp_path, perf_bin):
    """perf names __libc_start_call_main from libc6-dbg and the JIT frame from the map (read while it
    is there); probectl names both the same from the recording."""
    from probectl.debuginfo.elf import ElfFile, find_debug_file

    with ElfFile("/usr/lib/x86_64-linux-gnu/libc.so.6") as libc:
        if find_debug_file(libc)[0] is None:
            pytest.skip("libc6-dbg is not installed")
    binary, event = jit_probe
    data = tmp_path / "perf.data"
    run = subprocess.run([perf_bin, "record", "-q", "-g", "-e", event, "-o", str(data), "--", str(binary), "1"],
                         capture_output=True, text=True, check=True)
    map_file = Path(re.search(r"map=(\S+)", run.stdout).group(1))
    try:
        theirs = subprocess.run([perf_bin, "script", "-i", str(data), "-F", "ip,sym"], capture_output=True, text=True,
                                check=True).stdout
    finally:
        map_file.unlink()
    perf_frames = [l.split(None, 1)[1] for l in theirs.splitlines() if len(l.split(None, 1)) == 2]
    assert "jit_trampoline" in perf_frames and "__libc_start_call_main" in perf_frames, theirs
    out = tmp_path / "ours.dat"
    _rec, ours_map = _record(binary, event, out, "1")
    ours_map.unlink()
    (ev,) = script_json(out)
    names = [re.sub(r"\+0x[0-9a-f]+$", "", f) for f in ev["user_stack"]]
    assert names[:4] == ["probed", "middle", "jit_trampoline", "main"] and "__libc_start_call_main" in names, names
    user = perf_frames[perf_frames.index("probed"):]
    assert [n for n in names if n in user] == [n for n in user if n in names]  # the same order
