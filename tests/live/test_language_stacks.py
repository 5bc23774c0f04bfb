"""The user stacks of C++ and Rust programs name their functions as perf script does: demangled and
without their parameter lists (``shop::Cart::add``, a Rust path without its hash), in script's text,
JSON and folded stacks (and so in flame graphs). perf record on the same binaries is the oracle."""
from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from tests.helpers import added_probes, build_cxx_fixture, build_rust_fixture, probectl, require_tool

pytestmark = pytest.mark.root

G = f"plst{os.getpid()}"


def stack_names(text: str, binary: Path) -> list[tuple[str, ...]]:
    """Per event of ``perf script -F ip,sym,dso`` or ``probectl script`` text, the names of its frames
    in ``binary``, innermost first, without their offsets (a demangled name holds spaces)."""
    stacks: list[tuple[str, ...]] = []
    cur: list[str] | None = None
    for line in text.splitlines():
        frame = line.startswith("\t") and line.rstrip().endswith(")") and " (" in line
        if not frame:
            if cur is not None:
                stacks.append(tuple(cur))
            cur = None
            continue
        cur = [] if cur is None else cur
        head, dso = line.strip().rsplit(" (", 1)
        name = head.split(" ", 1)[1]
        if dso[:-1] == str(binary):
            cur.append(name.rsplit("+0x", 1)[0] if "+0x" in name else name)
    if cur is not None:
        stacks.append(tuple(cur))
    return stacks


def perf_stacks(tmp_path: Path, binary: Path, events: str, call_graph: str,
                *script_options: str) -> list[tuple[str, ...]]:
    """perf record's stacks of ``events`` (comma-separated) over a run of ``binary``."""
    perf = require_tool("perf", "apt linux-perf")
    data = tmp_path / "perf.data"
    subprocess.run([perf, "record", "-q", "-m", "4096", "--call-graph", call_graph, "-e", events, "-o", str(data),
                    "--", str(binary)], check=True, capture_output=True)
    return stack_names(subprocess.run([perf, "script", "-i", str(data), "-F", "ip,sym,dso", *script_options],
                                      check=True, capture_output=True, text=True).stdout, binary)


def test_a_cxx_programs_stacks_are_named_as_perf_names_them(live_tracefs, tmp_path):
    """shop::describe returns a std::string: its name keeps g++'s ABI tag, as perf script shows it."""
    binary = build_cxx_fixture("cxx_shop", "-O0")  # (frame pointers kept)
    with added_probes(binary, [f"{G}:add=shop::Cart::add", f"{G}:desc=shop::describe"], [G]):
        path = tmp_path / "cxx.dat"
        probectl("record", "-g", "-e", f"{G}:add", "-e", f"{G}:desc", "-o", str(path), "--", str(binary))
        ours = stack_names(probectl("script", "-i", str(path)).stdout, binary)
        theirs = perf_stacks(tmp_path, binary, f"{G}:add,{G}:desc", "fp")
        raw = stack_names(probectl("script", "-i", str(path), "--no-demangle").stdout, binary)
        theirs_raw = perf_stacks(tmp_path, binary, f"{G}:add,{G}:desc", "fp", "--no-demangle")
    assert len(ours) == 3 and ours == theirs
    assert ours[0][:2] == ("shop::Cart::add", "main") and ours[2][:2] == ("shop::describe[abi:cxx11]", "main")
    # (as the symbol table writes them, as perf script --no-demangle prints them)
    assert raw == theirs_raw and raw[0][0].startswith("_ZN4shop4Cart3add")
    raw_folded = probectl("script", "-i", str(path), "--format", "folded", "--no-demangle").stdout
    assert f";main;{raw[0][0]} 2" in raw_folded
    timeline = json.loads(probectl("script", "-i", str(path), "--format", "chrome-json", "--no-demangle").stdout)
    frames = [f for e in timeline["traceEvents"] for f in e.get("args", {}).get("stack", ())]
    assert any(f.startswith(raw[0][0]) for f in frames) and not any(f.startswith("shop::") for f in frames)
    events = [json.loads(line) for line in probectl("script", "-i", str(path), "--format", "json").stdout.splitlines()]
    assert events[0]["user_stack"][0] == "shop::Cart::add"
    folded = probectl("script", "-i", str(path), "--format", "folded").stdout
    assert ";main;shop::Cart::add 2" in folded and "_Z" not in folded


def test_a_rust_programs_stacks_are_named_by_their_paths(live_tracefs, tmp_path):
    """rustc keeps no frame pointers: both unwind from call-frame information."""
    binary = build_rust_fixture("rust_shop")
    with added_probes(binary, [f"{G}:add=rust_shop::shop::Cart::add"], [G]):
        path = tmp_path / "rust.dat"
        probectl("record", "-g", "-e", f"{G}:add", "-o", str(path), "--", str(binary))
        ours = stack_names(probectl("script", "-i", str(path)).stdout, binary)
        theirs = perf_stacks(tmp_path, binary, f"{G}:add", "dwarf")
    assert ours and ours[0][0] == "rust_shop::shop::Cart::add" and "rust_shop::main" in ours[0]
    # (perf's unwinding may stop early: its frames begin ours)
    assert all(mine[:len(perf)] == perf for mine, perf in zip(ours, theirs, strict=True))
    folded = probectl("script", "-i", str(path), "--format", "folded").stdout
    assert "rust_shop::main;rust_shop::shop::Cart::add " in folded and "_ZN" not in folded


def test_list_names_a_cxx_or_rust_probe_by_its_qualified_name(live_tracefs):
    """perf probe -l shows the mangled symbol (_ZN4shop4Cart3addEPKNS_4ItemEi@...); probectl list the
    name as written, which add takes back: the same place."""
    cxx = build_cxx_fixture("cxx_shop", "-O0")
    rust = build_rust_fixture("rust_shop")
    with added_probes(cxx, [f"{G}:a=shop::Cart::add", f"{G}:s=shop::Cart::scale<int>"], [G]):
        with added_probes(rust, [f"{G}r:r=rust_shop::shop::Cart::add"], [f"{G}r"]):
            listed = probectl("list", f"{G}:*", f"{G}r:*").stdout
    places = dict(re.findall(r"^\s+\S+:(\w+)\s+\(on (\S+) in ", listed, re.M))
    assert places["a"].startswith("shop::Cart::add@") and places["s"].startswith("shop::Cart::scale<int>@")
    assert places["r"].startswith("rust_shop::shop::Cart::add@")
    for event, binary, written in (("a", cxx, "shop::Cart::add"), ("r", rust, "rust_shop::shop::Cart::add")):
        again = probectl("add", "-D", "-x", str(binary), places[event]).stdout.split()[1]
        assert again == probectl("add", "-D", "-x", str(binary), written).stdout.split()[1]
