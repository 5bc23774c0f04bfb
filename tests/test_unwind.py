"""The CFI unwinder (``debuginfo/dwarf/unwind.py``) on real stacks: ``fixtures/unwind_target.c``, built at
-O2 without frame pointers, copies its own registers and 8 KiB of its stack at its deepest point (in a
leaf without a frame, DEPTH calls of recursion down) and prints the call path it took; the unwinder must
give exactly those frames, the return addresses the functions saw themselves, and go on through libc's
own CFI to ``_start``. Bad input (a truncated copy, registers that point nowhere, a binary without CFI,
damaged CFI expressions) ends the frames with an ``unknown`` one that says why, never a wrong frame or an
exception."""
from __future__ import annotations

import re
import struct
import subprocess
from pathlib import Path

import pytest

from probectl.debuginfo.dwarf.cfi import CallFrames
from probectl.debuginfo.dwarf.unwind import (CallFrameFiles, StackCopy, Unwinder, UserFrame, _evaluate,
                                             registers_from_perf)
from probectl.debuginfo.elf import ElfFile, find_debug_file
from probectl.script.symbols import UserSymbols
from probectl.tracedat.procmaps import Mapping, decode_proc_maps

from probectl.arch.x86_64 import ARCH as X86_64
from probectl.ringbuf import unwind_copies

from .helpers import build_fixture, run_sanitized, sanitized_driver

LIBC = "/usr/lib/x86_64-linux-gnu/libc.so.6"
_REGISTERS = {"ip": 16, "sp": 7, "bp": 6, "bx": 3, "r12": 12, "r13": 13, "r14": 14, "r15": 15}
NO_FRAME_POINTERS = ("-fomit-frame-pointer",)
NO_CFI = ("-fomit-frame-pointer", "-fno-asynchronous-unwind-tables", "-fno-unwind-tables")


class Snapshot:
    """One run of the fixture: its registers, stack copy, maps and what it says it did."""

    def __init__(self, binary: Path, tmp: Path, depth: int):
        out = tmp / f"stack-{depth}"
        text = subprocess.run([str(binary), str(out), str(depth)], capture_output=True, text=True,
                              check=True).stdout
        regs = re.search(r"^REGS (.*)$", text, re.M)
        assert regs, text
        self.registers = {_REGISTERS[k]: int(v, 16) for k, v in (kv.split("=") for kv in regs.group(1).split())}
        self.stack = StackCopy(self.registers[7], out.read_bytes())
        self.maps: list[Mapping] = decode_proc_maps(b"pid 1\n" + Path(f"{out}.maps").read_bytes())[1]
        self.names = re.findall(r"^EXPECT frame=(\S+)$", text, re.M)
        self.return_addresses = [int(a, 16) for a in re.findall(r"^EXPECT ra=(\S+)$", text, re.M)]
        self.binary = binary

    def unwind(self, registers=None, stack=None, files=None) -> list[UserFrame]:
        return Unwinder(self.maps, files).unwind(registers or self.registers, stack or self.stack)


def frame_names(snap: Snapshot, frames: list[UserFrame]) -> list[str]:
    """The functions of the frames by the symbol tables (a return address by its call instruction)."""
    symbols = UserSymbols({1: snap.maps})
    out = []
    for f in frames:
        if f.kind == "unknown":
            out.append("[unknown]")
            continue
        found = symbols.lookup(1, f.address - (f.kind == "return"))
        out.append(found[0] if found else f"?{f.address:x}")
    return out


@pytest.fixture(scope="module")
def target() -> Path:
    return build_fixture("unwind_target", "-O2", NO_FRAME_POINTERS)


@pytest.mark.parametrize("depth", [1, 5, 40])
def test_unwinds_the_programs_frames_exactly(target, tmp_path, depth):
    snap = Snapshot(target, tmp_path, depth)
    frames = snap.unwind()
    program = len(snap.names)
    assert frame_names(snap, frames)[:program] == snap.names
    # every return address above the leaf's is the one the function saw itself, main's (in libc) included
    assert [f.address for f in frames[2:program + 1]] == snap.return_addresses
    assert [f.kind for f in frames[:program + 1]] == ["ip"] + ["return"] * program
    # libc's frames from libc's own CFI, then _start, whose CFI ends the stack: no [unknown]
    assert frames[-1].kind == "return" and frame_names(snap, frames)[-1] == "_start"
    assert all(f.kind != "unknown" for f in frames)


def test_the_leaf_keeps_no_frame(target, tmp_path):
    """The fixture's leaf is what the test says it is: its CFA is sp + 8 where the registers were
    taken, so its caller comes from the CFI alone (what perf's frame-pointer walk misses)."""
    snap = Snapshot(target, tmp_path, 1)
    with ElfFile(target) as elf:
        frames = CallFrames.from_sections(elf, None)
        leaf = elf.find_functions("leaf")[0]
        pc = snap.registers[16] - min(m.start - m.offset for m in snap.maps if m.path == str(target))
        assert leaf.value <= pc < leaf.value + leaf.size
        row = frames.row_at(pc)
    assert row is not None and row.cfa is not None and (row.cfa.register, row.cfa.offset) == (7, 8)
    assert Unwinder(snap.maps).caller(snap.registers, snap.stack) == snap.unwind()[1].address
    caller = Unwinder(snap.maps).caller(snap.registers, StackCopy(snap.registers[7], snap.stack.data[:8]))
    # (with only the word at sp, as a probe at a function's entry can fetch it: path_c's call of leaf)
    assert caller is not None and frame_names(snap, [UserFrame(caller, "return")]) == ["path_c"]


def test_libc_frames_are_named_from_its_debug_file(target, tmp_path):
    with ElfFile(LIBC) as libc:
        if find_debug_file(libc)[0] is None:
            pytest.skip("libc6-dbg is not installed")
    snap = Snapshot(target, tmp_path, 2)
    names = frame_names(snap, snap.unwind())
    after_main = names[len(snap.names):]
    assert after_main[0] == "__libc_start_call_main"
    assert after_main[-1] == "_start"


def test_a_truncated_copy_stops_with_unknown(target, tmp_path):
    snap = Snapshot(target, tmp_path, 5)
    full = snap.unwind()
    stops = []
    for size in range(0, len(snap.stack.data) + 1, 8):
        frames = snap.unwind(stack=StackCopy(snap.stack.sp, snap.stack.data[:size]))
        if frames == full:  # (the copy holds all the frames)
            continue
        assert frames[-1].kind == "unknown" and "outside the stack copy" in frames[-1].reason
        # everything before the stop is a frame of the full unwind, in order
        assert frames[:-1] == full[:len(frames) - 1]
        stops.append(len(frames) - 1)
    # (a copy cut anywhere in the frames stops at each of them)
    assert sorted(set(stops)) == list(range(1, len(full)))


def test_registers_that_point_nowhere(target, tmp_path):
    snap = Snapshot(target, tmp_path, 1)
    nowhere = {**snap.registers, 16: 0x1234}
    frames = snap.unwind(registers=nowhere)
    assert frames == [UserFrame(0x1234, "ip"), UserFrame(0x1234, "unknown", "0x1234 is in no mapped file")]
    # a stack pointer below the copy: the first saved value is outside it
    low = {**snap.registers, 7: snap.registers[7] - 0x100000}
    frames = snap.unwind(registers=low)
    assert [f.kind for f in frames] == ["ip", "unknown"] and "outside the stack copy" in frames[-1].reason
    assert snap.unwind(registers={7: 1})[-1] == UserFrame(0, "unknown", "the registers have no instruction pointer")
    # no stack pointer: the leaf's CFA cannot be computed
    frames = snap.unwind(registers={16: snap.registers[16]})
    assert frames[-1].kind == "unknown" and "%sp is not known" in frames[-1].reason


def _objcopy(binary: Path, out: Path, *args: str) -> Path:
    subprocess.run(["objcopy", *args, str(binary), str(out)], check=True)
    return out


def test_debug_frame_alone_and_in_a_debug_file(tmp_path):
    """Built without unwind tables, the program's CFI is the ``.debug_frame`` of its DWARF: in the
    binary, or in the debug file its ``.gnu_debuglink`` names once it is stripped."""
    binary = build_fixture("unwind_target", "-O2", NO_CFI)
    with ElfFile(binary) as elf:
        assert elf.section(".debug_frame") is not None
    snap = Snapshot(binary, tmp_path, 3)
    frames = snap.unwind()
    assert frame_names(snap, frames)[:len(snap.names)] == snap.names
    assert [f.address for f in frames[2:len(snap.names) + 1]] == snap.return_addresses
    split = tmp_path / "split"
    split.mkdir()
    debug = _objcopy(binary, split / "unwind_target.debug", "--only-keep-debug")
    stripped = _objcopy(binary, split / "unwind_target", "--strip-debug", f"--add-gnu-debuglink={debug}")
    with ElfFile(stripped) as elf:
        assert elf.section(".debug_frame") is None
    snap = Snapshot(stripped, tmp_path, 3)
    frames = snap.unwind()
    assert frame_names(snap, frames)[:len(snap.names)] == snap.names
    assert [f.address for f in frames[2:len(snap.names) + 1]] == snap.return_addresses


def test_a_binary_without_cfi_stops_at_once(tmp_path):
    binary = _objcopy(build_fixture("unwind_target", "-O2", NO_CFI), tmp_path / "no-cfi", "--strip-debug")
    snap = Snapshot(binary, tmp_path, 3)
    frames = snap.unwind()
    assert [f.kind for f in frames] == ["ip", "unknown"]
    assert frames[0].address == snap.registers[16]
    assert "no call-frame information" in frames[1].reason


def test_a_file_that_is_gone_or_not_elf(target, tmp_path):
    snap = Snapshot(target, tmp_path, 1)
    moved = [Mapping(m.start, m.end, m.offset, str(tmp_path / "gone") if m.path == str(target) else m.path, m.perms)
             for m in snap.maps]
    frames = Unwinder(moved).unwind(snap.registers, snap.stack)
    assert [f.kind for f in frames] == ["ip", "unknown"] and "cannot be read" in frames[1].reason
    junk = tmp_path / "junk"
    junk.write_bytes(b"\x7fELF" + b"\xff" * 100)
    damaged = [Mapping(m.start, m.end, m.offset, str(junk) if m.path == str(target) else m.path, m.perms)
               for m in snap.maps]
    frames = Unwinder(damaged, CallFrameFiles()).unwind(snap.registers, snap.stack)
    assert [f.kind for f in frames] == ["ip", "unknown"]


def test_the_frame_limit_is_said(target, tmp_path):
    snap = Snapshot(target, tmp_path, 40)
    frames = Unwinder(snap.maps, max_frames=10).unwind(snap.registers, snap.stack)
    assert len(frames) == 11 and frames[-1].kind == "unknown" and "limit of 10" in frames[-1].reason
    assert frames[:10] == snap.unwind()[:10]


def test_cfa_expressions():
    """The PLT's CFA expression (rsp + 8, + 8 more past the push of the lazy stub's second half) and
    bad expressions: a value or a reason, never an exception."""
    plt = bytes([0x77, 0x08, 0x80, 0x00, 0x3F, 0x1A, 0x3B, 0x2A, 0x33, 0x24, 0x22])
    stack = StackCopy(0x1000, (0x1234).to_bytes(8, "little"))
    assert _evaluate(plt, {7: 0x1000, 16: 0x4020}, stack, None) == 0x1008
    assert _evaluate(plt, {7: 0x1000, 16: 0x402B}, stack, None) == 0x1010
    assert _evaluate(bytes([0x77, 0x00, 0x06]), {7: 0x1000}, stack, None) == 0x1234
    for bad in (b"", bytes([0x22]), bytes([0x77]), bytes([0x0E, 1, 2]), bytes([0x96]), bytes([0x77, 0x00, 0x23])):
        assert isinstance(_evaluate(bad, {7: 0x1000}, stack, None), str), bad
    assert "outside the stack copy" in _evaluate(bytes([0x77, 0x08, 0x06]), {7: 0x1000}, stack, None)
    assert "not known" in _evaluate(bytes([0x76, 0x00]), {7: 0x1000}, stack, None)


def test_perf_registers():
    """perf's sample_regs_user order (asm/perf_regs.h) to DWARF numbers: AX BX CX DX SI DI BP SP IP ..."""
    mask = (1 << 1) | (1 << 6) | (1 << 7) | (1 << 8) | (1 << 9) | (1 << 16) | (1 << 23)
    regs = registers_from_perf(mask, [11, 66, 77, 88, 99, 160, 230])
    assert regs == {3: 11, 6: 66, 7: 77, 16: 88, 8: 160, 15: 230}
    assert registers_from_perf(mask, [11]) == {3: 11}


def perf_script_user_stacks(perf_bin: str, data: Path) -> list[list[int]]:
    """Each sample's user frames as ``perf script --no-inline -F ip`` prints them (tests/perfdata.py)."""
    from .perfdata import perf_script_stacks

    return perf_script_stacks(subprocess.run([perf_bin, "script", "--no-inline", "-i", str(data), "-F", "ip"],
                                             capture_output=True, text=True, check=True).stdout)


def test_the_same_frames_as_perf_on_perfs_own_samples(perf_bin, tmp_path):
    """``perf record --call-graph dwarf`` of a program built without frame pointers (Debian's dd, and
    the ld.so and libc it runs in): probectl's unwinder, given each sample's registers and stack copy
    from the perf.data file, gives every frame perf script gives, address for address."""
    from .perfdata import file_addresses, read_perf_data, same_frames

    data = tmp_path / "perf.data"
    subprocess.run([perf_bin, "record", "-q", "-e", "cpu-clock", "-F", "4000", "--call-graph", "dwarf", "-o", str(data),
                    "--", "dd", "if=/dev/zero", "of=/dev/null", "bs=1", "count=200000"], capture_output=True, check=True)
    recorded = read_perf_data(data)
    theirs = perf_script_user_stacks(perf_bin, data)
    assert len(theirs) == len(recorded.samples)
    files, elves, compared = CallFrameFiles(), {}, 0
    for sample, perf_frames in zip(recorded.samples, theirs):
        regs = registers_from_perf(sample.regs_mask, sample.regs)
        if not sample.regs:
            continue
        unwinder = Unwinder(recorded.mappings.get(sample.pid, []), files)
        frames = unwinder.unwind(regs, StackCopy(regs[7], sample.stack))
        ours = file_addresses(unwinder, frames, elves)
        assert same_frames(ours, perf_frames), (ours, perf_frames)
        compared += bool(perf_frames) and ours[1]
    assert compared >= 20, compared



def test_damaged_stacks_and_registers_never_raise(target, tmp_path):
    """Random words written over a real stack copy, random registers: the unwinder ends every time,
    with frames it could read or an unknown one, never an exception or more than its limit."""
    import random

    snap = Snapshot(target, tmp_path, 5)
    rng = random.Random(22)
    code = [m for m in snap.maps if m.path == str(target)]
    unwinder = Unwinder(snap.maps, max_frames=64)
    for _ in range(400):
        data = bytearray(snap.stack.data)
        for _ in range(rng.randrange(1, 20)):
            at = rng.randrange(0, max(1, len(data) - 8)) & ~7
            data[at:at + 8] = rng.choice([rng.getrandbits(64), rng.choice(code).start + rng.randrange(0x2000),
                                          snap.stack.sp + rng.randrange(-64, 9000)]).to_bytes(8, "little")
        regs = dict(snap.registers)
        if rng.random() < 0.3:
            regs[rng.choice(list(regs))] = rng.getrandbits(64)
        frames = unwinder.unwind(regs, StackCopy(regs.get(7, 0), bytes(data[:rng.randrange(0, len(data) + 1)])))
        assert 1 <= len(frames) <= 65
        assert all(f.kind == "return" for f in frames[1:-1])
        assert frames[-1].kind in ("return", "unknown", "ip")


def _perf_sample(snap: Snapshot, pid: int = 1) -> tuple[bytes, int]:
    """A PERF_RECORD_SAMPLE as ``record --call-graph dwarf`` asks for (identifier, tid, time, cpu,
    an empty callchain, the user registers, the stack copy) of the snapshot, and the register count."""
    order = [X86_64.perf_regs_dwarf[bit] for bit in range(64) if X86_64.perf_regs_unwind_mask >> bit & 1]
    regs = [snap.registers.get(dwarf, 0) for dwarf in order]
    copy = snap.stack.data
    body = struct.pack("<QIIQQQ", 7, pid, pid, 1000, 0, 0)
    body += struct.pack(f"<Q{len(regs)}Q", 2, *regs) + struct.pack("<Q", len(copy)) + copy + struct.pack("<Q", len(copy))
    return struct.pack("<IHH", 9, 0, 8 + len(body)) + body, len(regs)


@pytest.mark.parametrize("depth", [1, 5, 40])
def test_the_native_walk_gives_the_same_frames(target, tmp_path, depth):
    """native/unwind.c walks by the simple rules Unwinder.simple_rule gives (the CFA from sp or bp plus
    a constant, the return address and the frame pointer saved at the CFA plus one): the same
    addresses as this unwinder, the frames of libc's code included, with each address's rule asked once."""
    snap = Snapshot(target, tmp_path, depth)
    unwinder = Unwinder(snap.maps)
    want = [f.address for f in snap.unwind()]
    record, nregs = _perf_sample(snap)
    order = [X86_64.perf_regs_dwarf[bit] for bit in range(64) if X86_64.perf_regs_unwind_mask >> bit & 1]
    asked: list[tuple[int, int]] = []

    def rule_of(pid: int, address: int):
        asked.append((pid, address))
        return unwinder.simple_rule(address)

    index, pool, others = unwind_copies(record + record, [(7, 1, 4)], nregs, order.index(16), order.index(7),
                                        order.index(6), 127, rule_of)
    assert not others
    triples = struct.unpack(f"<{len(index) // 8}Q", index)
    addresses = struct.unpack(f"<{len(pool) // 8}Q", pool)
    assert triples == (0, 0, len(want), len(record), len(want), len(want))
    assert list(addresses) == want + want
    assert sorted(asked) == sorted({(1, want[0])} | {(1, a - 1) for a in want[1:]})  # (once each)
    # a limit the stack does not fit in: handed back, to be said by this unwinder
    _index, _pool, others = unwind_copies(record, [(7, 1, 4)], nregs, order.index(16), order.index(7),
                                          order.index(6), len(want) - 1, rule_of)
    assert [i for i, _sample in others] == [0]


def test_the_native_walk_under_sanitizers(tmp_path):
    """native/fuzz/unwind_fuzz.c: random stack copies and rules through uw_unwind() under ASan+UBSan."""
    exe = sanitized_driver(tmp_path, ["fuzz/unwind_fuzz.c", "unwind.c"])
    for seed in ("1", "2"):
        assert run_sanitized(exe, "20000", seed) == "ok 20000\n"
