"""AArch64 definitions live: Debian's arm64 cloud kernel booted in ``qemu-system-aarch64 -M virt``
(software emulation), uprobes on the AArch64 builds of the fixtures with the values they print.

probectl resolves the definitions here, on x86-64 (``add -D``, the definitions tests/test_arm64.py
compares with perf's); the busybox guest (vmtest/busybox_guest.py, ``machine=AARCH64_GUEST``) writes
them to its kernel, runs each program, and returns the trace. Each value recorded is checked against the
program's own ``EXPECT`` lines, with tests/live/test_live_source.py's checks of the same definitions
on x86-64: member chains, strings, bitfields, a struct by value, globals, line probes with locals,
inline instances (square's ``v`` at -O2, where perf writes a garbage immediate), static duplicates,
typed return values; and SDT operands, which perf on x86-64 does not read. The kernel is also the
oracle of what probectl refuses before writing: an offset between two instructions and an x86
register (refused when written), an offset between two instructions (taken, and then never enabled),
both of which perf writes. One boot serves the whole module (6 s from qemu's start to its exit, under
TCG on this machine). Kprobes on tcp_sendmsg show where the two NOPs of ftrace's patchable entry
leave room for a kprobe and for $argN, probectl's places and perf's.
"""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from probectl.events import EventDefinition

from tests.helpers import FIXTURES, build_arm64_fixture, build_arm64_program
from tests.live.test_live_source import (BY_VALUE, INLINE_O2_PROBES, RETVAL_PROBES, STATIC_PROBES, STRUCTS_PROBES,
                                         Recording, args_of, check_inline_o2, check_retval_and_members,
                                         check_square_o2, check_static, check_structs)
from tests.test_arm64 import build_arm64_usdt
from vmtest.busybox_guest import AARCH64_GUEST, GuestResult, parse_trace_line, run_in_guest

pytestmark = pytest.mark.qemu

# The dynamic loader and C library of Debian's cross toolchain (libc6-arm64-cross): the fixtures'
# AArch64 builds are dynamically linked PIE programs, as the x86-64 ones are.
CROSS_LIBS = Path("/usr/aarch64-linux-gnu/lib")
SDT_GROUP = "sdt_probectl"


class Program:
    """One AArch64 build in the guest, at /a64/TAG (its comm in the trace), with its definitions."""

    def __init__(self, tag: str, host_path: Path, probes: list[tuple[str, str]], argv: tuple[str, ...] = ()):
        self.tag, self.host_path, self.argv = tag, host_path, argv
        self.guest_path = f"/a64/{tag}"
        texts = [f"a64{tag}:{event}={definition}" for event, definition in probes]
        out = subprocess.run([sys.executable, "-m", "probectl", "add", "-D", "-x", str(host_path), *texts],
                             capture_output=True, text=True, check=True)
        self.definitions = [line.replace(str(host_path), self.guest_path) for line in out.stdout.splitlines()]


# by_value(struct point p, struct widget wv, enum mode m) at -O2: AAPCS64 passes the 200-byte wv by
# reference (its address in x1), and the prologue keeps it in x22 from +0x14 on; gcc's location of wv
# is DW_OP_breg22 for the whole function, so at the entry perf and probectl both read wv through an x22
# not yet set. The entry event asks for p and m; wv's members are read at line 4 (and at the entry by
# the byval_entry event, whose values test_a_parameter_by_reference_at_an_O2_entry looks at).
WV = {"wid": "wv.id", "oy": "wv.origin.y"}
ENTRY_BY_VALUE = {f: e for f, e in BY_VALUE.items() if f not in WV}
STRUCTS_O2_PROBES = [(e, f"by_value {args_of(ENTRY_BY_VALUE)}" if e == "byval" else d) for e, d in STRUCTS_PROBES] + [
    ("byval_line", f"by_value:4 {args_of(WV)}"), ("byval_entry", f"by_value {args_of(WV)}")]


def _programs() -> list[Program]:
    static = [FIXTURES / "dwarf_static_a.c", FIXTURES / "dwarf_static_b.c"]
    progs = [Program("s0", build_arm64_fixture("dwarf_structs", "-O0"), STRUCTS_PROBES),
             Program("s2", build_arm64_fixture("dwarf_structs", "-O2"), STRUCTS_O2_PROBES)]
    progs += [Program(f"u{o[-1]}", build_arm64_fixture("uprobe_target", o), RETVAL_PROBES, ("3",))
              for o in ("-O0", "-O2")]
    progs.append(Program("i2", build_arm64_fixture("dwarf_inline", "-O2"), [*INLINE_O2_PROBES, ("sq", "square v")]))
    progs += [Program(f"st{o[-1]}", build_arm64_program("dwarf_static", static, o), STATIC_PROBES)
              for o in ("-O0", "-O2")]
    return progs


class Booted:
    """The guest's run: the result, and per program its output and its events."""

    def __init__(self, programs: list[Program], usdt: tuple[Path, Path], sdt_definitions: list[str],
                 refused: list[str], kernel: dict[str, str], result: GuestResult):
        self.programs = {p.tag: p for p in programs}
        self.usdt = usdt
        self.sdt_definitions = sdt_definitions
        self.refused = refused
        self.kernel = kernel
        self.result = result
        self.outputs: dict[str, str] = {}
        tag = None
        for line in result.workload_output.splitlines():
            m = re.fullmatch(r"== (\S+)", line)
            if m:
                tag = m.group(1)
                self.outputs[tag] = ""
            elif tag is not None:
                self.outputs[tag] += line + "\n"

    def recording(self, tag: str) -> Recording:
        events = [parse_trace_line(line) for line in self.result.trace_lines]
        mine = [(e.event, int(e.place.split()[0], 16), e.args) for e in events if e.comm == tag]
        # (as the kernel lists them: unnamed arguments named argN, as test_live_source reads them)
        defs = [EventDefinition.parse(d) for d in self.result.kprobe_events if f":a64{tag}/" in d]
        return Recording(defs, self.outputs[tag], mine)


@pytest.fixture(scope="module")
def booted(arm64_kernel_dir) -> Booted:
    programs = _programs()
    program, library = build_arm64_usdt("-O2")
    out = subprocess.run([sys.executable, "-m", "probectl", "add", "-D", "-x", str(program), "%probectl:*"],
                         capture_output=True, text=True, check=True)
    sdt_definitions = [line.replace(str(program), "/a64/sdt") for line in out.stdout.splitlines()]
    # What perf writes and probectl refuses, as raw lines: paint+2 (between two instructions) and an
    # x86 register; and paint+4, on the next instruction, which the kernel takes.
    paint = next(EventDefinition.parse(d) for d in programs[1].definitions if "/members " in d)
    base = int(paint.place.rsplit(":", 1)[1], 16)
    refused = [f"p:a64refused/between /a64/s2:0x{base + 2:x}", f"p:a64refused/x86reg /a64/s2:0x{base:x} %di"]
    taken = f"p:a64refused/next /a64/s2:0x{base + 4:x}"
    kernel = _kernel_lines(arm64_kernel_dir / "vmlinux")
    files = {p.guest_path: p.host_path.read_bytes() for p in programs}
    files["/a64/sdt"] = program.read_bytes()
    files[f"/a64/{library.name}"] = library.read_bytes()
    for lib in ("ld-linux-aarch64.so.1", "libc.so.6"):
        files[f"/lib/{lib}"] = (CROSS_LIBS / lib).read_bytes()
    workload = "".join(f"echo '== {p.tag}'\n{p.guest_path} {' '.join(p.argv)}\n" for p in programs)
    workload += "echo '== sdt'\nLD_LIBRARY_PATH=/a64 /a64/sdt 2\n"
    definitions = [d for p in programs for d in p.definitions] + sdt_definitions + refused + [taken]
    result = run_in_guest(arm64_kernel_dir, definitions + list(kernel.values()), workload, machine=AARCH64_GUEST,
                          files=files, events_file="dynamic_events", timeout=600)
    return Booted(programs, (program, library), sdt_definitions, refused, kernel, result)


def _kernel_lines(vmlinux: Path) -> dict[str, str]:
    """Kprobes on the guest's kernel around tcp_sendmsg's patchable entry (two NOPs): probectl's FUNC and
    FUNC $arg1 (tests/test_arm64.py: +8, and +0 for $argN), and what perf writes for the second (+8)
    and for FUNC-4 counted from its DWARF entry (+4, the NOP ftrace patches)."""
    out = subprocess.run([sys.executable, "-m", "probectl", "add", "-D", "-k", str(vmlinux), "a64k:entry=tcp_sendmsg",
                          "a64k:argn=tcp_sendmsg $arg1"], capture_output=True, text=True, check=True)
    entry, argn = out.stdout.splitlines()
    return {"entry": entry, "argn": argn, "perf_argn": "p:a64k/perf_argn tcp_sendmsg+8 $arg1",
            "ftrace_site": "p:a64k/ftrace_site tcp_sendmsg+4"}


def test_the_guest_took_every_definition_probectl_wrote(booted):
    result = booted.result
    assert result.workload_status == 0, result.workload_output
    mine = [d for p in booted.programs.values() for d in p.definitions] + booted.sdt_definitions
    assert set(mine) <= set(result.accepted)
    assert all(p.tag in booted.outputs for p in booted.programs.values())


def test_what_probectl_refuses_the_kernel_refuses_or_cannot_enable(booted):
    """perf writes both (tests/test_arm64.py); probectl refuses them before writing. The kernel refuses
    the x86 register when the line is written; it takes paint+2, and then cannot enable it (the
    uprobe is registered on enable: -EINVAL), while paint+4 fires."""
    between, x86reg = booted.refused
    result = booted.result
    assert result.rejected[0] == x86reg
    error = result.errors[0]
    assert "Invalid register name" in error and "%di" in error
    assert between in result.accepted and result.enable_errors == ["a64refused/between: cannot enable"]
    (fired,) = [e for e in result.events() if e.event == "next"]
    assert fired.comm == "s2"


def test_kprobes_around_the_patchable_entry(booted):
    """probectl's tcp_sendmsg (+8, after ftrace's NOPs) and tcp_sendmsg $arg1 (+0) are taken; what perf
    writes for the second (+8: no longer the function's entry for the kernel) is refused, and so is a
    kprobe on the NOP ftrace patches (+4)."""
    result, kernel = booted.result, booted.kernel
    assert kernel["entry"].endswith(" tcp_sendmsg+8") and " tcp_sendmsg+0 " in kernel["argn"]
    assert kernel["entry"] in result.accepted and kernel["argn"] in result.accepted
    assert result.rejected[1:] == [kernel["perf_argn"], kernel["ftrace_site"]]
    assert "Invalid $-variable specified" in result.errors[1]
    assert "Failed to register probe event" in result.errors[2]


def test_structs_values(booted):
    check_structs(booted.recording("s0"))
    rec = booted.recording("s2")
    check_structs(rec, ENTRY_BY_VALUE)
    rec.check("byval_line", "by_value", WV)


def test_a_parameter_by_reference_at_an_O2_entry(booted):
    """What the entry of -O2 by_value reads of wv: perf's definition (+0(%x22)), which reads x22
    before the prologue sets it, and not the values the program printed (see WV above)."""
    (entry,) = [EventDefinition.parse(d) for d in booted.programs["s2"].definitions if "/byval_entry " in d]
    assert [a.fetch for a in entry.args] == ["+0(%x22)", "+36(%x22)"]
    rec = booted.recording("s2")
    (recorded,) = rec.of("byval_entry")
    assert (int(recorded["wid"]), int(recorded["oy"])) != \
        tuple(int(rec.expected("by_value", e)[1]) for e in WV.values())


@pytest.mark.parametrize("tag", ["u0", "u2"])
def test_typed_retval_and_members(booted, tag):
    check_retval_and_members(booted.recording(tag))


def test_inline_instances_and_loop_locals_at_O2(booted):
    rec = booted.recording("i2")
    check_inline_o2(rec)
    check_square_o2(rec)  # square's v where perf writes an immediate the program never computes


@pytest.mark.parametrize("tag", ["st0", "st2"])
def test_static_duplicates(booted, tag):
    check_static(booted.recording(tag))


def test_sdt_operands(booted):
    """The usdt fixture prints ``EXPECT sdt=NAME argN=VALUE``; every operand probectl reads (registers,
    ``[sp, N]`` memory, constants) has the printed value."""
    events = [parse_trace_line(line) for line in booted.result.trace_lines]
    recorded = [e for e in events if e.comm == "sdt"]
    want = [dict(re.findall(r"(\w+)=(\S+)", line)) for line in booted.outputs["sdt"].splitlines()
            if line.startswith("EXPECT sdt=")]
    assert recorded and want
    checked = 0
    for name in {e.event for e in recorded} & {w["sdt"] for w in want}:
        expected = [w for w in want if w["sdt"] == name]
        got = [e for e in recorded if e.event == name]
        assert len(got) == len(expected), name
        for e, w in zip(got, expected):
            for arg, value in e.args.items():
                assert int(value, 0) == int(w[arg], 0), (name, arg, e.args, w)
                checked += 1
    assert checked >= 8
