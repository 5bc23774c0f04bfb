"""The CFI unwinder on a uprobe's perf sample (tests/test_unwind.py has the rest): where perf's own DWARF
unwinding stops, probectl's goes on to ``_start``."""
from __future__ import annotations

import os
import re
import subprocess

from probectl.debuginfo.dwarf.unwind import StackCopy, Unwinder, registers_from_perf
from probectl.script.symbols import UserSymbols
from tests.helpers import probectl
from tests.perfdata import read_perf_data
from tests.test_unwind import perf_script_user_stacks, target  # noqa: F401 (target: the fixture)


def test_a_uprobe_sample_perf_cannot_unwind(perf_bin, target, tmp_path, live_tracefs):
    """At a uprobe on a leaf without a frame, perf script's DWARF unwinding of its own sample gives the
    probed function alone (perf 6.1 here); the same sample unwound by probectl has every frame."""
    group = f"uw{os.getpid()}"
    probectl("add", "-x", str(target), f"{group}:leaf=leaf")
    try:
        data = tmp_path / "perf.data"
        run = subprocess.run([perf_bin, "record", "-q", "--call-graph", "dwarf", "-e", f"{group}:leaf", "-o", str(data),
                              "--", str(target), str(tmp_path / "copy"), "4"], capture_output=True, text=True, check=True)
    finally:
        probectl("del", f"{group}:*")
    expected = re.findall(r"^EXPECT frame=(\S+)$", run.stdout, re.M)
    recorded = read_perf_data(data)
    (sample,) = recorded.samples
    regs = registers_from_perf(sample.regs_mask, sample.regs)
    maps = recorded.mappings[sample.pid]
    frames = Unwinder(maps).unwind(regs, StackCopy(regs[7], sample.stack))
    symbols = UserSymbols({sample.pid: maps})
    names = [symbols.lookup(sample.pid, f.address - (f.kind == "return"))[0] for f in frames if f.kind != "unknown"]
    assert names[:len(expected)] == expected and names[-1] == "_start"
    assert len(perf_script_user_stacks(perf_bin, data)[0]) <= len(names)
    # the immediate caller from the word at sp alone (what a probe at a function's entry can fetch
    # as +0(%sp):u64), by the probed address's CFI
    caller = Unwinder(maps).caller(regs, StackCopy(regs[7], sample.stack[:8]))
    assert caller == frames[1].address and names[1] == "path_c"
