"""Arrays of integers recorded live, read by trace-cmd: a C program's arrays of each size and sign
fetched whole (``b[0]:s8[4]`` ... ``u[0]:x32[4]``), a Go ``[]int`` and a Rust ``&Vec<u32>`` (a slice:
its first 16 elements and its hidden length). ``trace-cmd report`` prints the values the programs
printed in their EXPECT lines and probectl's ``script`` gives, where it printed every element as 0:
Linux 6.2 and later write such a field ``s64 q[]`` (no length), from which libtraceevent takes an
element size of 0, and the writer writes the length in; and where it printed an s8's or s16's -1 as
255 or 65535 (``%d`` of a number libtraceevent never sign-extends), and the writer writes ``%hhd``
and ``%hd`` (probectl.formats.for_libtraceevent).

trace-cmd prints a slice's 16 elements, the ones past its length too (it knows nothing of the hidden
``NAME__len``): the first ``NAME__len`` are compared. The offline tests: tests/test_tracedat.py
(test_trace_cmd_reads_a_probes_integer_arrays), tests/test_formats.py."""
from __future__ import annotations

import csv
import io
import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from tests.helpers import build_fixture, build_go_fixture, build_rust_fixture, probectl, require_tool
from tests.live.test_live_uprobes import expect_lines

GROUP = f"arrays{os.getpid()}"


@pytest.fixture
def cleanup_group(live_tracefs):
    yield live_tracefs
    probectl("del", f"{GROUP}:*", check=False)


def record(tmp_path: Path, binary: Path, *args: str) -> tuple[dict[str, list[dict[str, str]]], list[dict], list[dict]]:
    """Record GROUP's events over one run of ``binary``: its EXPECT lines, the events' fields as
    script's JSON gives them, and the arrays (``NAME={E,...}``) and other numbers (``NAME=N``) of
    each event line of ``trace-cmd report``."""
    out = tmp_path / "arrays.dat"
    run = probectl("record", "-e", f"{GROUP}:*", "-o", str(out), "--", str(binary), *args)
    script = [json.loads(line)["fields"] for line in probectl("script", "-i", str(out), "--format", "json").stdout.splitlines()]
    report = subprocess.run([require_tool("trace-cmd", "trace-cmd"), "report", str(out)], capture_output=True,
                            text=True, check=True).stdout
    printed = []
    for line in report.splitlines():
        if not re.search(r"\s\w+:\s+\(", line):  # ("comm-pid [cpu] ts: event: (ip) fields")
            continue
        fields: dict = {n: [int(e, 0) for e in v.split(",") if e] for n, v in re.findall(r"(\w+)=\{([^}]*)\}", line)}
        fields.update({n: int(v, 0) for n, v in re.findall(r"(\w+)=(-?(?:0x)?[0-9a-f]+)(?=\s|$)", line)})
        printed.append(fields)
    assert len(printed) == len(script), report
    return expect_lines(run.stdout), script, printed


def numbers(text: str) -> list[int]:
    return [int(x) for x in text.strip('"').split(",") if x]


@pytest.mark.root
@pytest.mark.tracecmd
def test_a_c_programs_arrays_of_each_size_and_sign(cleanup_group, tmp_path):
    """int_arrays' five arrays of 4 (and the unsigned one again as x32, printed in hex, and the first
    elements of the s8 and s16 ones as numbers of their own), twice: trace-cmd's values are the
    program's and script's."""
    binary = build_fixture("int_arrays")
    probectl("add", "-x", str(binary), f"{GROUP}:sum=sum_arrays b[0]:s8[4] h[0]:s16[4] w[0]:s32[4] q[0]:s64[4] "
             "u[0]:u32[4] x=u[0]:x32[4] b0=b[0] h0=h[0]")
    fmt = (cleanup_group / "events" / GROUP / "sum" / "format").read_text()
    assert "\tfield:s64 q[];\t" in fmt  # (the kernel's text, with no length: what trace-cmd read as zeros)
    want, script, printed = record(tmp_path, binary)
    calls = want["sum_arrays"]
    names = ("b", "h", "w", "q", "u")
    assert len(calls) == len(script) == 2
    for call, fields, theirs in zip(calls, script, printed):
        expected = {name: numbers(call[name]) for name in names}
        assert {name: fields[name] for name in names} == {name: theirs[name] for name in names} == expected
        assert fields["x"] == theirs["x"] == expected["u"]
        assert (fields["b0"], fields["h0"]) == (theirs["b0"], theirs["h0"]) == (expected["b"][0], expected["h"][0])
    # script's CSV holds each array whole in its cell, as its text prints it (it held the first element)
    cells = list(csv.DictReader(io.StringIO(
        probectl("script", "-i", str(tmp_path / "arrays.dat"), "--format", "csv").stdout)))
    for call, row in zip(calls, cells, strict=True):
        assert {name: row[name] for name in names} == {
            name: "{" + ",".join(map(str, numbers(call[name]))) + "}" for name in names}
        assert row["x"] == "{" + ",".join(map(hex, numbers(call["u"]))) + "}"


@pytest.mark.root
@pytest.mark.tracecmd
@pytest.mark.parametrize("language", ["go", "rust"])
def test_a_slices_elements(cleanup_group, tmp_path, language):
    """A Go []int (greet's xs: 0 to 3 elements) and a Rust &Vec<u32> (sum's values: 7, 8, 9): the first
    NAME__len elements trace-cmd prints are the program's and script's."""
    if language == "go":
        binary = build_go_fixture("go_target")
        probectl("add", "-x", str(binary), f"{GROUP}:greet=main.greet xs")
        want, script, printed = record(tmp_path, binary, "10")
        name, expected = "xs", [numbers(call["xs"]) for call in want["greet"]]
    else:
        binary = build_rust_fixture("rust_shop")
        probectl("add", "-x", str(binary), f"{GROUP}:sum=rust_shop::shop::sum values")
        want, script, printed = record(tmp_path, binary)
        name, expected = "values", [numbers(call["values"]) for call in want["sum"]]
    assert [fields[name] for fields in script] == expected
    assert [theirs[name][:theirs[f"{name}__len"]] for theirs in printed] == expected
    assert any(expected), "a slice with elements"
