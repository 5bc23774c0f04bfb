"""SDT (USDT) probes as live uprobes: the programs' own values, semaphores set through the kernel's
reference counter, list and trace (offline: tests/test_sdt.py)."""
from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from tests.helpers import probectl
from tests.test_sdt import usdt  # noqa: F401  (fixtures)


PROVIDERS = ("sdt_probectl:*", "sdt_probectl_lib:*")


def expected_values(stdout: str) -> list[tuple[str, dict[str, int]]]:
    out = []
    for line in stdout.splitlines():
        if line.startswith("EXPECT sdt="):
            fields = dict(re.findall(r"(\w+)=(\S+)", line))
            name = fields.pop("sdt")
            out.append((name, {k: int(v) for k, v in fields.items()}))
    return out


@pytest.fixture
def sdt_events(live_tracefs, usdt):
    probectl("add", "-x", str(usdt[0]), "sdt_probectl:*")
    try:
        probectl("add", "-x", str(usdt[1]), "%probectl_lib:*")
        yield live_tracefs
    finally:
        for group in PROVIDERS:
            probectl("del", group, check=False)


def recorded(path: Path) -> list[tuple[str, dict[str, int]]]:
    out = []
    for line in probectl("script", "-i", str(path), "--format", "json").stdout.splitlines():
        event = json.loads(line)
        name = event["event"].split(":")[1]
        fields = {k: v for k, v in event.get("fields", event).items() if re.fullmatch(r"arg\d+", k)}
        out.append((name, fields))
    return out


@pytest.mark.root
def test_recorded_values_are_the_programs(sdt_events, usdt, tmp_path):
    """record + script on every probe of the program and its library, semaphores included: each event
    carries what the program printed for it, in order."""
    path = tmp_path / "sdt.dat"
    out = probectl("record", "-e", "sdt_probectl:*", "-e", "sdt_probectl_lib:*", "-o", str(path), "--",
                   str(usdt[0]), "3")
    program = out.stdout
    expected = expected_values(program)
    assert "SKIPPED" not in program  # the kernel set both semaphores while the events were enabled
    names = [n for n, _ in expected]
    assert names.count("guarded") == 3 and names.count("call") == 3 and names.count("lib_guarded") == 3
    got = [(name, fields) for name, fields in recorded(path) if name != "indexed"]  # (never fired)
    assert [n for n, _ in got] == [n.replace("lib_guarded", "guarded") for n in names]
    for (name, values), (_, fields) in zip(expected, got):
        assert fields == values, name


@pytest.mark.root
def test_list_names_the_sdt_probe(sdt_events, usdt):
    rows = {f"{r['group']}:{r['event']}": r for r in json.loads(probectl("list", "--json", "sdt_probectl*:*").stdout)}
    assert rows["sdt_probectl:guarded"]["on"] == f"sdt_probectl:guarded in {usdt[0]}"
    assert rows["sdt_probectl:guarded"]["place"].endswith(")")  # (0xREF_CTR_OFFSET)
    assert rows["sdt_probectl_lib:call"]["on"] == f"sdt_probectl_lib:call in {usdt[1]}"


@pytest.mark.root
def test_semaphore_of_a_running_process(sdt_events, usdt, live_tracefs):
    """A process started before the event is enabled sees its semaphore set once it is, and clear again after."""
    proc = subprocess.Popen([str(usdt[0]), "--wait", "1"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    inst = live_tracefs / "instances" / f"probectl-sdt-{os.getpid()}"
    try:
        assert proc.stdout.readline().startswith("READY")
        inst.mkdir()
        try:
            (inst / "events" / "sdt_probectl" / "guarded" / "enable").write_text("1")
            proc.stdin.write("\n")
            proc.stdin.flush()
            text = proc.stdout.read()
            proc.wait()
            (inst / "tracing_on").write_text("0")
            trace = (inst / "trace").read_text()
            (inst / "events" / "sdt_probectl" / "guarded" / "enable").write_text("0")
        finally:
            inst.rmdir()
    finally:
        if proc.poll() is None:
            proc.kill()
    assert "EXPECT sdt=guarded arg1=1" in text
    assert re.search(r" guarded: \(0x[0-9a-f]+\) arg1=1$", trace, re.MULTILINE), trace
    after = subprocess.run([str(usdt[0]), "1"], capture_output=True, text=True, check=True).stdout
    assert "SKIPPED sdt=guarded" in after


@pytest.mark.root
def test_trace(live_tracefs, usdt):
    """trace adds, records, prints and removes: values as printed."""
    out = probectl("trace", "-x", str(usdt[0]), "sdt_probectl:mem", "sdt_probectl:constant", "--", str(usdt[0]), "2")
    events = re.findall(r"sdt_probectl:(\w+): \([0-9a-f]+\) arg1=(-?\d+) arg2=(-?\d+)", out.stdout)
    assert events == [("mem", "-300", "201"), ("constant", "5", "-9"), ("mem", "-600", "202"), ("constant", "5", "-9")]
