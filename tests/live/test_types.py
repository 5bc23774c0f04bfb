"""Values of C types recorded by live uprobes equal what the program printed (offline: tests/test_types.py)."""
from __future__ import annotations

import os
import re
import subprocess

import pytest

from probectl.debuginfo.elf import ElfFile
from probectl.resolve.dwarf_fetch import fetch_variable
from probectl.spec import parse_probe

from tests.helpers import FIXTURES
from tests.test_dwarf import fixture_bins  # noqa: F401  (fixtures)


LIVE_ARGS = {
    "paint": ["w->fl.ready", "w->fl.mode", "w->fl.delta", "w->fl.big", "w->fl.wide", "w->name:string",
              "w->label:string", "w->corner->y", "w->pts[2].x", "w->tag", "w->hi", "w->level", "w->sc"],
    "check_bits": ["pb->head", "pb->straddle", "pb->high", "fl->delta"],
    "by_value": ["p.x", "p.y", "wv.id", "wv.origin.y", "m"],
    "use_globals": ["counter", "big_counter", "hidden", "greeting:string", "gbuf:string", "global_widget.id"],
}


def _write(path, text: str) -> None:
    # tracefs files reject the seek that Python's append mode does: write with os.write.
    fd = os.open(path, os.O_WRONLY | os.O_APPEND)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


@pytest.mark.root
@pytest.mark.parametrize("opt, extra", [("-O0", ()), ("-O2", ()), ("-O2", ("-gdwarf-4",))],
                         ids=["O0", "O2", "O2-dwarf4"])
def test_live_values_equal_the_programs(fixture_bins, live_tracefs, opt, extra):
    """Fetch the fixture's values with uprobes built from our fetch arguments (bitfields, packed
    bitfields, a struct in a register, globals via @+OFFSET, strings) and compare them with
    the EXPECT lines the program prints."""
    from probectl.debuginfo.dwarf import lines as L

    binary = fixture_bins.path("dwarf_structs", opt, extra)
    di = fixture_bins.di("dwarf_structs", opt, extra)
    elf = ElfFile(binary)
    text = next(s for s in elf.segments if s.executable)
    group = f"ptypes{os.getpid()}"
    events, expected = [], {}
    source = (FIXTURES / "dwarf_structs.c").read_text().splitlines()
    # A VLA's element, at the line that prints it (perf reads the frame slot instead).
    vla_line = next(i for i, text in enumerate(source, 1) if "EXPECT func=vla_sum arr[1]" in text)
    points = dict.fromkeys(LIVE_ARGS)
    if opt == "-O0":
        points["vla_sum"] = vla_line
    for func in points:
        args = LIVE_ARGS.get(func, ["arr[1]", "n"])
        (fn,) = di.probe_functions(func)
        if points[func] is not None:
            address = L.function_line(di, fn, points[func] - fn.decl_line)[0].address
        else:
            address = fn.entry if di.cu_is_optimized(fn.cu) else L.skip_prologue(di, fn)
        fetches = []
        for i, arg in enumerate(args):
            spec = parse_probe(f"x {arg}").args[0]
            r = fetch_variable(di, fn, address, spec.expr, spec.type, symbol_base=text.vaddr - text.offset)
            fetches.append(f"a{i}={r.fetch}" + (f":{r.type}" if r.type else ""))
            expected[(func, i)] = (arg.split(":")[0], r)
        events.append(f"p:{group}/{func} {binary}:0x{elf.vaddr_to_offset(address):x} {' '.join(fetches)}")
    inst = live_tracefs / "instances" / f"ptypes-{os.getpid()}"
    added = []
    try:
        for line in events:
            _write(live_tracefs / "uprobe_events", line + "\n")
            added.append(line.split()[0][2:])
        inst.mkdir()
        (inst / "events" / group / "enable").write_text("1")
        out = subprocess.run([str(binary)], capture_output=True, text=True, check=True).stdout
        trace = (inst / "trace").read_text()
    finally:
        if inst.exists():
            (inst / "events" / group / "enable").write_text("0")
            inst.rmdir()
        for event in added:
            _write(live_tracefs / "uprobe_events", f"-:{event}\n")
    truth = {}
    for line in out.splitlines():
        m = re.match(r"EXPECT func=(\w+) (\S+?):(\w+)=(.*)$", line)
        if m:
            truth[(m.group(1), m.group(2))] = m.group(4).strip('"')
    recorded = {}
    for line in trace.splitlines():
        m = re.search(r" (\w+): \(0x[0-9a-f]+\) (.*)$", line)
        if m:
            for i, value in re.findall(r"a(\d+)=(\"[^\"]*\"|\S+)", m.group(2)):
                recorded[(m.group(1), int(i))] = value.strip('"')
    assert len(recorded) == len(expected), trace
    for (func, i), (arg, r) in expected.items():
        value = recorded[(func, i)]
        if r.type == "string":
            assert value == truth[(func, arg)], (func, arg)
            continue
        number = int(value, 16) if value.startswith("0x") else int(value)
        if r.type.startswith("b") and r.signed and number >> (r.bits - 1):
            number -= 1 << r.bits  # bitfield types read unsigned: sign-extend
        assert number == int(truth[(func, arg)]), (func, arg, r, value)
