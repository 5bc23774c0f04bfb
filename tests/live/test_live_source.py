"""Live source-level probes: add with the CLI, run the fixture, compare each recorded value with EXPECT.

Every DWARF fixture case is probed through C expressions (member chains, strings, bitfields, structs
passed by value, VLAs, globals, inline instances, loop locals, static duplicates, typed return
values), the program runs once, and each argument's value in the events (read from a private tracefs
instance's text `trace`) must be the value the program printed on its `EXPECT func=F expr:type=value`
lines. Signed bitfields are fetched as unsigned bit ranges (`b5@4/32`): the value is sign-extended
with the width of the definition the kernel holds before comparing. Where a fixture prints no line
for a value (the argument of an inline instance inside a loop), the check recomputes it from printed
values with the fixture's own arithmetic, which the test spells out.

Each test adds its probes in one command under its own group (`ptsrc<pid>`), removes them with
`probectl del`, and leaves tracefs as it found it (the `live_tracefs` fixture checks).
"""
from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from probectl.events import EventDefinition

from tests.helpers import build_fixture, build_static_pair, probectl

GROUP = f"ptsrc{os.getpid()}"


# --- reading what the program printed and what the kernel recorded ---------------------------------


def expect_values(stdout: str) -> dict[str, dict[str, list[tuple[str, str]]]]:
    """func → expr → [(type, value)] in the order the program printed them."""
    out: dict[str, dict[str, list[tuple[str, str]]]] = {}
    for line in stdout.splitlines():
        if not line.startswith("EXPECT "):
            continue
        func = re.search(r"func=(\S+)", line).group(1)
        for expr, typ, value in re.findall(r'(\S+?):(\w+)=("[^"]*"|\S+)', line.split(" ", 2)[2]):
            out.setdefault(func, {}).setdefault(expr, []).append((typ, value))
    return out


def trace_events(text: str) -> list[tuple[str, int, dict[str, str]]]:
    """(event, probed address, {field: value}) of each event line of a `trace` file."""
    events = []
    for line in text.splitlines():
        m = re.search(r":\s+(\w+):\s+\((0x[0-9a-f]+)[^)]*\)\s*(.*)$", line)
        if line.startswith("#") or not m:
            continue
        fields = dict(re.findall(r'(\w+)=("[^"]*"|\S+)', m.group(3)))
        events.append((m.group(1), int(m.group(2), 16), fields))
    return events


class Recording:
    """The definitions the kernel holds for GROUP, the program's EXPECT values and the events."""

    def __init__(self, definitions: list[EventDefinition], stdout: str, events):
        self.types = {}
        for d in definitions:
            for arg in d.args:
                self.types[(d.event, arg.name)] = arg.type
        self.want = expect_values(stdout)
        self.events = events

    def of(self, event: str) -> list[dict[str, str]]:
        return [fields for name, _addr, fields in self.events if name == event]

    def expected(self, func: str, expr: str) -> tuple[str, str]:
        (only,) = self.want[func][expr]
        return only

    def number(self, event: str, field: str, value: str, signed: bool) -> int:
        """A recorded number; a bitfield of a signed C type is sign-extended to its width."""
        got = int(value, 0)
        m = re.match(r"b(\d+)@", self.types.get((event, field), ""))
        if m and signed and got >= 1 << (int(m.group(1)) - 1):
            got -= 1 << int(m.group(1))
        return got

    def check(self, event: str, func: str, fields: dict[str, str]) -> None:
        """The single `event`'s field → EXPECT expression of `func`, value by value."""
        (recorded,) = self.of(event)
        for field, expr in fields.items():
            typ, value = self.expected(func, expr)
            if typ == "string":
                assert recorded[field] == value, (event, field, expr)
            else:
                got = self.number(event, field, recorded[field], typ.startswith("s"))
                assert got == int(value), (event, field, expr, recorded[field], value)


def record(tracefs: Path, binary: Path, definitions: list[str], argv: tuple[str, ...] = ()) -> Recording:
    """Add the definitions with one `probectl add`, run the program with GROUP enabled in a private
    instance, and return what was recorded (the events are removed by the `group` fixture)."""
    probectl("add", "-x", str(binary), *definitions)
    held = [EventDefinition.parse(line) for line in (tracefs / "uprobe_events").read_text().splitlines()
            if line.startswith(("p:", "r:")) and f":{GROUP}/" in line]
    inst = tracefs / "instances" / f"ptsrc-{os.getpid()}"
    inst.mkdir()
    try:
        (inst / "events" / GROUP / "enable").write_text("1")
        out = subprocess.run([str(binary), *argv], capture_output=True, text=True, check=True)
        (inst / "tracing_on").write_text("0")
        text = (inst / "trace").read_text()
        (inst / "events" / GROUP / "enable").write_text("0")
    finally:
        inst.rmdir()
    return Recording(held, out.stdout, trace_events(text))


@pytest.fixture
def group(live_tracefs):
    yield live_tracefs
    probectl("del", f"{GROUP}:*", check=False)


def g(event: str, definition: str) -> str:
    return f"{GROUP}:{event}={definition}"


# --- dwarf_structs ----------------------------------------------------------------------------------

MEMBERS = {  # field → EXPECT expression of paint
    "scale": "scale", "id": "w->id", "depth": "w->depth", "name": "w->name", "label": "w->label",
    "ox": "w->origin.x", "cy": "w->corner->y", "p2x": "w->pts[2].x", "v3": "w->values[3]",
    "ival": "w->u.ival", "tag": "w->tag", "hi": "w->hi", "mode": "w->mode", "level": "w->level",
    "size": "w->size", "nid": "w->next->id", "serial": "w->serial", "sc": "w->sc", "uc": "w->uc",
    "ok": "w->ok",
}
BITS = {"ready": "w->fl.ready", "fmode": "w->fl.mode", "delta": "w->fl.delta", "big": "w->fl.big",
        "wide": "w->fl.wide"}
PACKED = {"head": "pb->head", "straddle": "pb->straddle", "high": "pb->high", "fdelta": "fl->delta"}
BY_VALUE = {"px": "p.x", "py": "p.y", "wid": "wv.id", "oy": "wv.origin.y", "m": "m"}
GLOBALS = {"counter": "counter", "big": "big_counter", "hidden": "hidden", "greeting": "greeting",
           "gbuf": "gbuf", "gid": "global_widget.id"}
CASTS = {"name": "string", "label": "string", "greeting": "string", "gbuf": "string"}


def args_of(fields: dict[str, str]) -> str:
    return " ".join(f"{f}={expr}" + (f":{CASTS[f]}" if f in CASTS else "") for f, expr in fields.items())


# Events of test_structs_values (also what tests/guest/test_qemu_arm64.py records on AArch64 builds).
STRUCTS_PROBES = [
    ("members", f"paint {args_of(MEMBERS)}"),
    ("bits", f"paint {args_of(BITS)}"),
    ("packed", f"check_bits {args_of(PACKED)}"),
    ("byval", f"by_value {args_of(BY_VALUE)}"),
    ("vla", "vla_sum n"),
    ("globals", f"use_globals {args_of(GLOBALS)}"),
    ("doubled", "paint;printf*doubled* doubled"),
    ("area", "paint;printf*area* area"),
    ("ret", "paint%return r=$retval"),
    ("gret", "use_globals%return $retval"),
]


def check_structs(rec: Recording, by_value: dict[str, str] = BY_VALUE) -> None:
    """STRUCTS_PROBES' values (``by_value``: the fields of the byval event, when it asks for fewer)."""
    rec.check("members", "paint", MEMBERS)
    rec.check("bits", "paint", BITS)
    rec.check("packed", "check_bits", PACKED)
    rec.check("byval", "by_value", by_value)
    rec.check("vla", "vla_sum", {"n": "n"})
    rec.check("globals", "use_globals", GLOBALS)
    rec.check("doubled", "paint", {"doubled": "doubled"})
    rec.check("area", "paint", {"area": "area"})
    rec.check("ret__return", "paint", {"r": "area"})  # paint returns area
    # use_globals returns counter + hidden after adding `add` (3) to both
    (gret,) = rec.of("gret__return")
    counter, hidden = (int(rec.expected("use_globals", e)[1]) for e in ("counter", "hidden"))
    assert int(gret["arg1"]) == counter + 3 + hidden + 3


@pytest.mark.root
@pytest.mark.parametrize("opt,extra", [("-O0", ()), ("-O2", ()), ("-O2", ("-gdwarf-4",))],
                         ids=["O0", "O2", "O2-dwarf4"])
def test_structs_values(group, opt, extra):
    """Member chains (->, ., [N]), strings (char array and char *), nested and pointer members,
    unions, anonymous members, enums (one negative), bitfields (DWARF 5 data_bit_offset and DWARF 4
    bit_offset, signed and unsigned, straddling in a packed struct), a struct passed by value (in a
    register at -O2), a VLA's length, globals (a static, a char pointer and a char array as
    strings), locals in a nested block, and the typed return value."""
    rec = record(group, build_fixture("dwarf_structs", opt, extra), [g(e, d) for e, d in STRUCTS_PROBES])
    check_structs(rec)


@pytest.mark.root
@pytest.mark.parametrize("opt", ["-O0", "-O2"])
def test_an_absolute_address_reads_the_variables_of_its_function(group, opt):
    """`0xADDR w->id`: the variables of the DWARF function containing the address (at the address
    where probectl puts `paint w->id`), with the values the program printed."""
    from probectl.resolve import Resolver
    from probectl.spec import parse_probe
    from probectl.target import find_target

    binary = build_fixture("dwarf_structs", opt)
    (point,) = Resolver(find_target(str(binary))).resolve(parse_probe("paint w->id"))
    fields = {"id": "w->id", "scale": "scale", "name": "w->name", "ox": "w->origin.x"}
    rec = record(group, binary, [g("at", f"0x{point.address:x} {args_of(fields)}")])
    rec.check("at", "paint", fields)


@pytest.mark.root
def test_vla_element_and_block_locals_at_O0(group):
    """At -O0 the VLA's elements are read through the frame slot that holds its address
    (DW_OP_fbreg; DW_OP_deref), and locals of the loop's scope at a later line."""
    binary = build_fixture("dwarf_structs", "-O0")
    rec = record(group, binary, [g("vla", "vla_sum;printf*total* total a1=arr[1] n")])
    rec.check("vla", "vla_sum", {"total": "total", "a1": "arr[1]", "n": "n"})


# --- dwarf_inline -----------------------------------------------------------------------------------

DATA = [5, -3, 200, 7, 0, 12]  # process()'s input in dwarf_inline.c's main()


def clamp(v: int, lo: int, hi: int) -> int:
    return lo if v < lo else hi if v > hi else v


@pytest.mark.root
def test_inline_instances_and_loop_locals_at_O0(group):
    """square() is always_inline: its instances in process() (once per loop iteration) and in
    rare_path(); clamp() is out of line at -O0. Their arguments are not printed: process() prints
    the sum of square(clamp(item, 0, 100)), rare_path() its code, which is clamped to [1, 50]."""
    binary = build_fixture("dwarf_inline", "-O0")
    rec = record(group, binary, [
        g("sq", "square v"),
        g("cl", "clamp v lo hi"),
        g("loop", "process;*square* c total"),
        g("proc", "process data n"),
        g("rp", "rare_path code why:string"),
        g("rpret", "rare_path%return $retval"),
    ])
    total = int(rec.expected("process", "total")[1])
    code = int(rec.expected("rare_path", "code")[1])
    n = int(rec.expected("process", "n")[1])
    squares = [int(e["v"]) for e in rec.of("sq")]
    assert len(squares) == n + 1, "one event per inline instance execution"
    assert sum(v * v for v in squares[:n]) == total and squares[n] == code
    clamps = [(int(e["v"]), int(e["lo"]), int(e["hi"])) for e in rec.of("cl")]
    assert clamps == [(v, 0, 100) for v in DATA] + [(code, 1, 50)]
    # the line `total += square(c)` has two addresses (around the inlined square), both before the add
    places = {addr for name, addr, _ in rec.events if name == "loop"}
    assert len(places) == 2
    for place in places:
        loop = [(int(f["c"]), int(f["total"])) for name, addr, f in rec.events if name == "loop" and addr == place]
        assert [c for c, _ in loop] == [clamp(v, 0, 100) for v in DATA]
        running = 0
        for c, before in loop:
            assert before == running
            running += c * c
        assert running == total
    rec.check("proc", "process", {"n": "n"})
    (rp,) = rec.of("rp")
    assert int(rp["code"]) == code and rp["why_string"] == '"never"'  # main passes "never"
    (ret,) = rec.of("rpret__return")
    assert int(ret["arg1"]) == code * code + clamp(code, 1, 50)


# Events of test_inline_instance_and_loop_locals_at_O2 (and of the AArch64 guest's build).
INLINE_O2_PROBES = [
    ("cl", "clamp v lo hi"),
    ("loop", "dwarf_inline.c:41 total item"),
    ("rp", "rare_path code why:string"),
    ("rpret", "rare_path%return $retval"),
]


def check_inline_o2(rec: Recording) -> None:
    total = int(rec.expected("process", "total")[1])
    code = int(rec.expected("rare_path", "code")[1])
    assert [(int(e["v"]), int(e["lo"]), int(e["hi"])) for e in rec.of("cl")] == [(code, 1, 50)]
    loop = [(int(e["item"]), int(e["total"])) for e in rec.of("loop")]  # after `total += ...`
    assert [item for item, _ in loop] == DATA
    running = 0
    for item, after in loop:
        running += clamp(item, 0, 100) ** 2
        assert after == running
    assert running == total
    (rp,) = rec.of("rp")
    assert int(rp["code"]) == code and rp["why_string"] == '"never"'
    (ret,) = rec.of("rpret__return")
    assert int(ret["arg1"]) == code * code + clamp(code, 1, 50)


@pytest.mark.root
def test_inline_instance_and_loop_locals_at_O2(group):
    """At -O2 clamp() remains as an instance in rare_path() (its bounds are constants: immediates),
    and the loop's `total` and `item` live in registers and behind the advanced data pointer."""
    check_inline_o2(record(group, build_fixture("dwarf_inline", "-O2"), [g(e, d) for e, d in INLINE_O2_PROBES]))


# --- static duplicates ------------------------------------------------------------------------------


STATIC_PROBES = [
    ("both", "helper x"),
    ("onlyb", "helper@dwarf_static_b.c x"),
    ("reta", "helper@dwarf_static_a.c%return $retval"),
]


def check_static(rec: Recording) -> None:
    xa = int(rec.expected("helper@dwarf_static_a.c", "x")[1])
    xb = int(rec.expected("helper@dwarf_static_b.c", "x")[1])
    assert [int(e["x"]) for e in rec.of("both")] == [xa, xb]
    assert [int(e["x"]) for e in rec.of("onlyb")] == [xb]
    assert [int(e["arg1"]) for e in rec.of("reta__return")] == [(xa + 1) * 2]


@pytest.mark.root
@pytest.mark.parametrize("opt", ["-O0", "-O2"])
def test_static_duplicates(group, opt):
    """`helper` probes both static helpers (main calls helper(10), then helper_b_entry(20) calls the
    other one); `helper@dwarf_static_b.c` only the second; helper a returns (x + 1) * 2."""
    check_static(record(group, build_static_pair(opt), [g(e, d) for e, d in STATIC_PROBES]))


# --- typed return values and member chains of uprobe_target --------------------------------------


# Events of test_typed_retval_and_members, recorded from uprobe_target run with argument 3 (and of
# the AArch64 guest's builds).
RETVAL_PROBES = [
    ("add", "add_ints%return $retval"),
    ("scale", "scale_long%return r=$retval"),
    ("mix", "mix_unsigned%return $retval"),
    # perf and probectl pass `$retval:string` through, and the kernel refuses it ("String accepts
    # only memory argument"): the string is read through the returned pointer
    ("label", "pick_label%return s=+0($retval):string"),
    ("addcast", "add_ints%return r=$retval:s32"),
    ("rec", "sum_record id=rec->id value=rec->value flags=rec->flags label=rec->label:string"),
]


def check_retval_and_members(rec: Recording) -> None:
    want = rec.want
    assert rec.types[("add__return", "arg1")] == "s32" and rec.types[("scale__return", "r")] == "s64"
    assert [int(e["arg1"]) for e in rec.of("add__return")] == [int(v) for _, v in want["add_ints"]["ret"]]
    assert all(int(v) < 0 for _, v in want["add_ints"]["ret"])
    assert [int(e["r"]) for e in rec.of("addcast__return")] == [int(v) for _, v in want["add_ints"]["ret"]]
    assert [int(e["r"]) for e in rec.of("scale__return")] == [int(v) for _, v in want["scale_long"]["ret"]]
    assert [int(e["arg1"], 0) for e in rec.of("mix__return")] == [int(v) for _, v in want["mix_unsigned"]["ret"]]
    assert [e["s"] for e in rec.of("label__return")] == [v for _, v in want["pick_label"]["ret"]]
    for fields, i in zip(rec.of("rec"), range(3), strict=True):
        for field, expr in (("id", "rec->id@0"), ("value", "rec->value@8"), ("flags", "rec->flags@16"),
                            ("label", "rec->label@24")):
            typ, value = want["sum_record"][expr][i]
            got = fields[field] if typ == "string" else int(fields[field], 0)
            assert got == (value if typ == "string" else int(value)), (field, fields)


@pytest.mark.root
@pytest.mark.parametrize("opt", ["-O0", "-O2"])
def test_typed_retval_and_members(group, opt):
    """A bare `$retval` gets its type from DWARF (perf leaves it untyped, so a negative int would
    read as a large u64): add_ints and scale_long return negative numbers."""
    check_retval_and_members(record(group, build_fixture("uprobe_target", opt),
                                    [g(e, d) for e, d in RETVAL_PROBES], argv=("3",)))


def check_square_o2(rec: Recording) -> None:
    total = int(rec.expected("process", "total")[1])
    code = int(rec.expected("rare_path", "code")[1])
    values = [int(e["v"]) for e in rec.of("sq")]
    assert values == [clamp(v, 0, 100) for v in DATA] + [code]
    assert sum(v * v for v in values[:-1]) == total


@pytest.mark.root
def test_inline_instances_at_O2(group):
    """At -O2 square() is inlined in process() with DW_AT_entry_pc outside its ranges, and in
    rare_path(); each instance's `v` is what process() squares and rare_path()'s code."""
    check_square_o2(record(group, build_fixture("dwarf_inline", "-O2"), [g("sq", "square v")]))
