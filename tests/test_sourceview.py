"""`probectl lines` and `vars` against `perf probe -L` / `-V` on every function of the DWARF fixtures,
and `list` describing events by source place."""
from __future__ import annotations

import functools
import json
import os
import subprocess

import pytest

from probectl.debuginfo.elf import ElfFile

from tests.helpers import build_fixture, probectl as run_probectl

SKIP = {"main", "frame_dummy", "register_tm_clones", "deregister_tm_clones", "completed.0"}
# Deliberate differences, each checked below: perf cannot express a constant location (DW_OP_lit0;
# DW_OP_stack_value) so it leaves such a variable out; probectl fetches it as the immediate \0.
# perf fails on functions split into .cold parts ("Failed to find symbol"); probectl lists them.
KNOWN = {("dwarf_inline", "-O2", "vars", "process"), ("dwarf_inline", "-O2", "vars", "rare_path")}


probectl = functools.partial(run_probectl, check=False)


def functions(binary) -> list[str]:
    names = {s.name for s in ElfFile(binary).functions()}
    return sorted(n for n in names if n not in SKIP and not n.startswith("_") and "." not in n)


CASES = [(fixture, opt, mode) for fixture in ("dwarf_structs", "dwarf_inline")
         for opt in ("-O0", "-O2") for mode in ("lines", "vars")]


@pytest.mark.perf
@pytest.mark.parametrize("fixture,opt,mode", CASES)
def test_listings_match_perf(perf_bin, fixture, opt, mode):
    binary = str(build_fixture(fixture, opt))
    flag = "-L" if mode == "lines" else "-V"
    compared = 0
    for func in functions(binary):
        if (fixture, opt, mode, func) in KNOWN:
            continue
        theirs = subprocess.run([perf_bin, "probe", "-x", binary, flag, func], capture_output=True, text=True)
        ours = probectl(mode, "-x", binary, func)
        assert ours.returncode == 0, ours.stderr
        # perf also prints unnamed artificial variables as "(null)"; probectl leaves them out.
        expected = [ln for ln in theirs.stdout.splitlines() if "(null)" not in ln]
        assert ours.stdout.splitlines() == expected, func
        compared += 1
    assert compared >= 1


def test_constant_variable_is_listed_and_fetchable():
    binary = str(build_fixture("dwarf_inline", "-O2"))
    out = probectl("vars", "-x", binary, "process")
    assert "\t\tint\ttotal" in out.stdout.splitlines()
    (line,) = probectl("add", "-D", "-x", binary, "process total").stdout.splitlines()
    assert line.endswith(" total=\\0:s32")


def test_cold_split_function_is_listed():
    binary = str(build_fixture("dwarf_inline", "-O2"))
    out = probectl("vars", "-x", binary, "rare_path")
    assert out.returncode == 0 and out.stdout.startswith("Available variables at rare_path\n\t@<rare_path+0>")


def test_line_ranges_and_json():
    binary = str(build_fixture("dwarf_structs", "-O2"))
    ranged = probectl("lines", "-x", binary, "vla_sum:3-5").stdout.splitlines()
    assert ranged[0].startswith("<vla_sum@") and ranged[0].endswith("dwarf_structs.c:3>")
    assert [ln.split()[0] for ln in ranged[1:]] == ["3", "4", "5"]
    plus = probectl("lines", "-x", binary, "vla_sum:3+3").stdout.splitlines()
    assert plus == ranged
    data = json.loads(probectl("lines", "--json", "-x", binary, "vla_sum").stdout)
    assert data[0]["function"] == "vla_sum"
    assert [ln["relative"] for ln in data[0]["lines"] if ln["probeable"]][:2] == [0, 3]
    vars_json = json.loads(probectl("vars", "--json", "-x", binary, "vla_sum").stdout)
    assert vars_json["places"][0]["variables"] == [{"type": "int", "name": "n", "kind": "param"}]


def test_vars_on_a_tracepoint_points_to_fields():
    if os.geteuid() != 0:
        pytest.skip("tracepoints are listed from tracefs, which needs root")
    binary = str(build_fixture("dwarf_structs", "-O2"))
    out = probectl("vars", "-x", binary, "sched_switch")
    assert out.returncode == 1
    assert "sched_switch is a tracepoint (sched:sched_switch)" in out.stderr
    assert "probectl fields sched:sched_switch" in out.stderr
    # the GROUP:EVENT name gets the same pointer (it is no FUNC:LINE, and no grammar error)
    for name in ("sched:sched_switch", "syscalls:sys_enter_read"):
        out = probectl("vars", name)
        assert out.returncode == 1
        assert out.stderr.startswith(f"Error: {name.split(':')[1]} is a tracepoint ({name}), not a function\n")
        assert f"probectl fields {name}" in out.stderr
    assert "expected a line number" in probectl("vars", "no_such_group_xyz:no_such_event").stderr
