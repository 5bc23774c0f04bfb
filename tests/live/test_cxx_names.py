"""C++ functions probed by their qualified names record what the program got (fixtures/cxx_shop.cc
prints it in EXPECT lines), at -O0 and -O2: a method's arguments and members through a pointer, a
member of a base class through this (where perf fails), each overload, a template instance. The
offline tests are tests/test_cxx_names.py."""
from __future__ import annotations

import os
import subprocess

import pytest

from tests.helpers import build_cxx_fixture, probectl
from tests.live.test_live_uprobes import expect_lines, trace_events

GROUP = f"pcxx{os.getpid()}"


@pytest.fixture
def cleanup_group(live_tracefs):
    yield live_tracefs
    probectl("del", f"{GROUP}:*", check=False)


@pytest.mark.root
@pytest.mark.parametrize("opt", ["-O0", "-O2"])
def test_qualified_names_record_the_programs_values(cleanup_group, opt):
    tracefs = cleanup_group
    binary = build_cxx_fixture("cxx_shop", opt)
    probectl("add", "-x", str(binary), f"{GROUP}:add=shop::Cart::add it->id qty this->base_id this->owner",
             f"{GROUP}:one=shop::overloaded(int) x", f"{GROUP}:two=shop::overloaded(long, int) x y",
             f"{GROUP}:scale=shop::Cart::scale<long> x", f"{GROUP}:twice=shop::Cart::twice x",
             f"{GROUP}:get=shop::Box::get times", f"{GROUP}:describe=shop::describe id")
    inst = tracefs / "instances" / f"probectl-cxx-{os.getpid()}"
    inst.mkdir()
    try:
        (inst / "events" / GROUP / "enable").write_text("1")
        run = subprocess.run([str(binary), "3"], capture_output=True, text=True, check=True)
        (inst / "tracing_on").write_text("0")
        text = (inst / "trace").read_text()
        (inst / "events" / GROUP / "enable").write_text("0")
    finally:
        inst.rmdir()
    want = expect_lines(run.stdout)
    got: dict[str, list[dict[str, str]]] = {}
    for name, fields in trace_events(text):
        got.setdefault(name, []).append(fields)
    assert [(e["id"], e["qty"], e["base_id"], e["owner"]) for e in got["add"]] == \
           [(c["id"], c["qty"], c["base_id"], c["owner"]) for c in want["add"]]
    assert [e["x"] for e in got["one"]] == [c["x"] for c in want["overloaded(int)"]]
    assert [(e["x"], e["y"]) for e in got["two"]] == [(c["x"], c["y"]) for c in want["overloaded(long,int)"]]
    assert [e["x"] for e in got["scale"]] == ["3"]  # (the program prints the result, 3 * x)
    assert [e["x"] for e in got["twice"]] == [c["x"] for c in want["twice"]]  # (inlined everywhere: DWARF names it)
    assert [e["id"] for e in got["describe"]] == [c["id"] for c in want["describe"]]  # ([abi:cxx11], a .cold part)
    # (every instance of a class template's member, each its own event: get, get_1, ...; Box<short>'s
    # one call, its result unused, only at -O0: -O2 removes it)
    boxes = sorted(e["times"] for name, events in got.items() if name.startswith("get") for e in events)
    assert boxes == sorted([c["times"] for key in ("Box<int>::get", "Box<long>::get") for c in want[key]] +
                           (["1"] if opt == "-O0" else []))
