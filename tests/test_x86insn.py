"""The x86-64 instruction length decoder against objdump, and the probe-offset boundary check.

objdump is the oracle: every instruction start it prints for the code of real binaries (the fixture
programs at -O0/-O2, /usr/bin/bash, every code section of libc.so.6, windows of Debian's vmlinux) must
be one the decoder finds, block by block (objdump restarts at each symbol, and so do we, so padding
between functions is decoded too). A generated object file then puts every opcode of every map
(one-byte, 0F, 0F38, 0F3A, VEX, EVEX, XOP) behind the prefixes that change lengths and under ModRM
forms with and without SIB, displacements and register operands, one per symbol, and compares the
length of each with objdump's.

Two places where objdump shows something other than what the CPU executes are normalised, not skipped:
objdump prints an FWAIT (9B) and the x87 instruction after it as one line, and it prints a REX prefix
followed by a legacy prefix as a line of its own. The CPU executes FWAIT as an instruction of its own
(Intel SDM: "the processor executes each of these instructions separately"), and ignores such a REX
as part of the next instruction; the decoder follows the CPU.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.helpers import build_fixture, missing
from probectl.debuginfo.elf import ElfFile
from probectl.resolve.boundary import check_probe_offset
from probectl.arch.x86_insn import BoundaryError, check_boundary, insn_length, instruction_starts
from probectl.errors import InstructionDecodeError, ProbectlError, ResolveError

LIBC = Path(os.path.realpath("/lib/x86_64-linux-gnu/libc.so.6"))
BASH = Path("/usr/bin/bash")
FIXTURE_BUILDS = [("-O0", True), ("-O2", True), ("-O0", False), ("-O2", False)]

_HEADER = re.compile(r"([0-9a-f]+) <(.+)>:$")
_SECTION = "Disassembly of section "
_PREFIX_WORDS = re.compile(r"^((rex(\.[WRXB]+)?|data16|addr32|lock|repn?z|rep|[c-gs]s)\s*)+$")


@pytest.fixture(scope="module")
def objdump() -> str:
    path = shutil.which("objdump")
    if not path:
        missing("objdump (apt binutils) is not installed")
    return path


# --- objdump's view ------------------------------------------------------------------------------

@dataclass
class Block:
    """The code objdump disassembles from one symbol to the next: its instructions as (address, text)."""

    section: str
    address: int
    name: str
    lines: list[tuple[int, str]] = field(default_factory=list)
    starts: list[int] = field(default_factory=list)


def objdump_blocks(objdump: str, path: Path, *extra: str) -> list[Block]:
    """objdump -d -z -w of ``path``, as blocks; an FWAIT merged into the next x87 line is split off."""
    out = subprocess.run([objdump, "-d", "-z", "-w", *extra, str(path)], capture_output=True, text=True,
                         check=True).stdout
    blocks: list[Block] = []
    section = ""
    block = None
    for line in out.splitlines():
        parts = line.split("\t")
        if len(parts) >= 3 and parts[0].endswith(":"):
            address = int(parts[0][:-1], 16)
            text = "\t".join(parts[2:])
            raw = parts[1].split()
            block.lines.append((address, text))
            # "9b dd 38  fstsw (%rax)": the CPU runs the 9B (fwait) as an instruction of its own.
            waits = 0
            while len(raw) > waits + 1 and raw[waits] == "9b":
                block.starts.append(address + waits)
                waits += 1
            block.starts.append(address + waits)
            continue
        if line.startswith(_SECTION):
            section = line[len(_SECTION):-1]
            continue
        m = _HEADER.match(line)
        if m:
            block = Block(section, int(m.group(1), 16), m.group(2))
            blocks.append(block)
    return blocks


def _objdump_failed(text: str) -> bool:
    return "(bad)" in text or text.startswith(".byte") or bool(_PREFIX_WORDS.match(text))


@dataclass
class Comparison:
    path: Path
    instructions: int = 0
    code_bytes: int = 0
    seconds: float = 0.0
    blocks: int = 0
    mismatches: list[str] = field(default_factory=list)
    undecodable: list[str] = field(default_factory=list)  # objdump could not decode it either

    def summary(self) -> str:
        rate = self.code_bytes / self.seconds / 1e6 if self.seconds else 0.0
        return (f"{self.path}: {self.blocks} blocks, {self.instructions} instructions, "
                f"{self.code_bytes / 1e6:.2f} MB decoded in {self.seconds:.2f} s ({rate:.1f} MB/s, "
                f"{self.instructions / max(self.seconds, 1e-9) / 1e6:.2f} M instructions/s); "
                f"{len(self.mismatches)} mismatches, {len(self.undecodable)} blocks objdump cannot decode either")


def compare_with_objdump(objdump: str, path: Path, *extra: str, stop: int | None = None) -> Comparison:
    """Decode every block objdump shows for ``path`` (from its symbol to the next) and compare starts."""
    blocks = objdump_blocks(objdump, path, *extra)
    result = Comparison(path)
    with ElfFile(path) as elf:
        data = {}
        for i, block in enumerate(blocks):
            sec = elf.section(block.section)
            if block.section not in data:
                data[block.section] = memoryview(elf.section_data(block.section))
            end = sec.addr + sec.size
            if i + 1 < len(blocks) and blocks[i + 1].section == block.section:
                end = blocks[i + 1].address
            if stop is not None:
                end = min(end, stop)
            code = data[block.section][block.address - sec.addr:end - sec.addr]
            t0 = time.perf_counter()
            failed_at = None
            try:
                mine = instruction_starts(code, block.address)
            except InstructionDecodeError as exc:
                failed_at = block.address + exc.offset
                mine = instruction_starts(code[:exc.offset], block.address)
            result.seconds += time.perf_counter() - t0
            result.code_bytes += len(code)
            result.instructions += len(block.starts)
            result.blocks += 1
            if failed_at is None:
                if mine != block.starts:
                    result.mismatches.append(_describe_mismatch(block, mine))
                continue
            theirs = [a for a in block.starts if a < failed_at]
            rest = [text for a, text in block.lines if a >= failed_at]
            if mine == theirs and rest and any(_objdump_failed(t) for t in rest):
                result.undecodable.append(f"{block.name} at 0x{failed_at:x}: {rest[0]}")
            else:
                result.mismatches.append(_describe_mismatch(block, mine) + f" (we stop at 0x{failed_at:x})")
    return result


def _describe_mismatch(block: Block, mine: list[int]) -> str:
    diff = sorted(set(mine) ^ set(block.starts))
    first = diff[0] if diff else block.address
    near = [f"0x{a:x} {t}" for a, t in block.lines if abs(a - first) < 16]
    return (f"{block.section} {block.name}: first difference at 0x{first:x} "
            f"({'only ours' if first in mine else 'only objdump'}); objdump: {near}")


def _check(result: Comparison, allow_undecodable: bool = False) -> None:
    print("\n" + result.summary())
    for line in result.undecodable:
        print("  objdump cannot decode it either:", line)
    assert not result.mismatches, "\n".join(result.mismatches[:20])
    if not allow_undecodable:
        assert not result.undecodable, "\n".join(result.undecodable[:20])


# --- real binaries -------------------------------------------------------------------------------

@pytest.mark.parametrize("opt,pie", FIXTURE_BUILDS, ids=[f"{o}{'' if p else '-nopie'}" for o, p in FIXTURE_BUILDS])
def test_fixture_instruction_starts_match_objdump(objdump, opt, pie):
    for name in ("uprobe_target", "dwarf_structs", "dwarf_inline"):
        binary = build_fixture(name, opt=opt, pie=pie)
        result = compare_with_objdump(objdump, binary)
        assert result.instructions > 100
        _check(result)


def test_bash_instruction_starts_match_objdump(objdump):
    if not BASH.exists():
        missing(f"{BASH} does not exist")
    result = compare_with_objdump(objdump, BASH)
    assert result.code_bytes > 500_000
    _check(result)


def test_libc_instruction_starts_match_objdump(objdump):
    """All of libc's code (.plt, .text with its SSE/AVX2/AVX-512/EVEX string functions, the rest)."""
    if not LIBC.exists():
        missing(f"{LIBC} does not exist")
    result = compare_with_objdump(objdump, LIBC)
    with ElfFile(LIBC) as elf:
        assert result.code_bytes >= elf.section(".text").size
    _check(result)


def test_libc_has_the_encodings_we_claim_to_cover(objdump):
    """The libc comparison is not vacuous: it holds VEX, EVEX and every ModRM/SIB/immediate shape."""
    if not LIBC.exists():
        missing(f"{LIBC} does not exist")
    text = subprocess.run([objdump, "-d", "-w", "-j", ".text", str(LIBC)], capture_output=True, text=True,
                          check=True).stdout
    firsts = re.findall(r"^ *[0-9a-f]+:\t((?:[0-9a-f]{2} )+)", text, re.M)
    escapes = {"c5": 0, "c4": 0, "62": 0}
    for raw in firsts:
        for b in raw.split():
            if b in escapes:
                escapes[b] += 1
            if not (b in ("66", "67", "f2", "f3", "f0", "2e", "3e", "26", "36", "64", "65")
                    or "40" <= b <= "4f"):
                break
    assert all(n > 1000 for n in escapes.values()), escapes
    assert re.search(r"%zmm\d+\{%k\d\}", text)  # AVX-512 with an opmask


def _vmlinux() -> Path:
    from vmtest.busybox_guest import find_kernel_dir
    kernel_dir = find_kernel_dir()
    if kernel_dir is None:
        missing("no kernel test data with a vmlinux (run tools/kernel-testdata.sh)")
    return kernel_dir / "vmlinux"


@pytest.mark.vmlinux
def test_vmlinux_windows_match_objdump(objdump):
    """Kernel code: entry code (swapgs, sysret, iretq), control registers, the x87 check with fwait,
    the return thunks (an instruction cut by a symbol in its middle), 32-bit boot code objdump cannot
    decode in 64-bit mode either. The whole 15 MB .text is too slow for the suite; see the module doc."""
    vmlinux = _vmlinux()
    with ElfFile(vmlinux) as elf:
        symbols = {s.name: s for s in elf.symbols() if s.name and s.value}

    def window(first: str, last: str) -> Comparison:
        start, stop = symbols[first].value, symbols[last].value
        return compare_with_objdump(objdump, vmlinux, f"--start-address=0x{start:x}",
                                    f"--stop-address=0x{stop:x}", stop=stop)

    total_instructions = 0
    for first, last in [("_stext", "load_direct_gdt"), ("__entry_text_start", "__entry_text_end"),
                        ("srso_untrain_ret", "entry_untrain_ret"),
                        ("fpu__init_check_bugs", "fpu__get_fpstate_size")]:
        if first not in symbols or last not in symbols or symbols[last].value <= symbols[first].value:
            continue
        result = window(first, last)
        total_instructions += result.instructions
        _check(result, allow_undecodable=True)
    assert total_instructions > 10_000


# --- every opcode of every map, behind the prefixes that change lengths -------------------------

# 66 changes imm16/32 (and rel16/32, moffs no), 67 changes moffs, REX.W imm32/64, F2/F3 are mandatory
# prefixes (0F 78: extrq/insertq take two imm8).
_PREFIXES = [b"", b"\x66", b"\x67", b"\x48", b"\x66\x48", b"\xf2", b"\xf3"]
# mod 00 reg 0 RIP+disp32; mod 01 reg 1 SIB disp8; mod 10 reg 2 SIB disp32; mod 11 reg 7 (C7 F8
# xbegin, C6 F8 xabort); mod 00 reg 3 SIB with no base (disp32); mod 00 reg 0 [rax].
_MODRMS = [b"\x05", b"\x4c\x24", b"\x94\x25", b"\xf8", b"\x1c\x25", b"\x00"]
_FILL = bytes(range(0x10, 0x20))  # displacement and immediate bytes: ignored by the length
_LEGACY = {0x26, 0x2E, 0x36, 0x3E, 0x64, 0x65, 0x66, 0x67, 0xF0, 0xF2, 0xF3}


def _rex_then_prefix(enc: bytes) -> bool:
    """A REX followed by another prefix: objdump prints the REX alone, the CPU ignores it."""
    for a, b in zip(enc, enc[1:]):
        if not (0x40 <= a <= 0x4F or a in _LEGACY):
            return False
        if 0x40 <= a <= 0x4F and (0x40 <= b <= 0x4F or b in _LEGACY):
            return True
    return False


def _encodings():
    """(map name, bytes) for the generated instructions."""
    for op in range(256):
        for prefix in _PREFIXES:
            for modrm in _MODRMS:
                one = prefix + bytes([op]) + modrm
                if prefix not in (b"", b"\x67") and op in (0xC4, 0xC5, 0x62):
                    # VEX/EVEX after REX/66/F2/F3 is #UD (SDM 2.3.2, 2.7.1); objdump decodes some of them.
                    with pytest.raises(InstructionDecodeError, match="prefix before"):
                        insn_length(one + _FILL)
                elif op != 0x9B and op != 0xD5 and not _rex_then_prefix(one):
                    # 9B: objdump joins fwait to an x87 op. D5 is undefined here, but APX's REX2
                    # prefix for objdump 2.42 and later.
                    yield "one-byte", one
                yield "0F", prefix + bytes([0x0F, op]) + modrm
                yield "0F38", prefix + bytes([0x0F, 0x38, op]) + modrm
                yield "0F3A", prefix + bytes([0x0F, 0x3A, op]) + modrm
    for op in range(256):
        for pp in range(4):
            for modrm in (b"\x05", b"\xc8"):
                for w in (0, 1):
                    yield "VEX", bytes([0xC5, 0xF8 | (w << 2) | pp, op]) + modrm
                    for mmmmm in (1, 2, 3):
                        yield "VEX", bytes([0xC4, 0xE0 | mmmmm, 0x78 | (w << 7) | (w << 2) | pp, op]) + modrm
                    for mmm in (1, 2, 3, 5, 6):
                        yield "EVEX", bytes([0x62, 0xF0 | mmm, 0x7C | (w << 7) | pp, 0x08 | (w << 6), op]) + modrm
                    if pp == 0:
                        for mmmmm in (8, 9, 10):
                            yield "XOP", bytes([0x8F, 0xE0 | mmmmm, 0x78 | (w << 7), op]) + modrm
    # Every ModRM byte, and every SIB byte under each mod, with both address sizes.
    for prefix in (b"", b"\x67"):
        for modrm in range(256):
            yield "ModRM/SIB", prefix + bytes([0x8B, modrm, 0x24])
        for mod in (0x04, 0x44, 0x84):
            for sib in range(256):
                yield "ModRM/SIB", prefix + bytes([0x8B, mod, sib])


def test_every_opcode_length_matches_objdump(objdump, tmp_path):
    asm = shutil.which("as")
    if not asm:
        missing("as (apt binutils) is not installed")
    encodings = list(_encodings())
    source = [".text"]
    for i, (_, enc) in enumerate(encodings):
        source.append(f"e{i}: .byte {','.join(str(b) for b in enc + _FILL)}")
    (tmp_path / "e.s").write_text("\n".join(source) + "\n")
    subprocess.run([asm, "-o", str(tmp_path / "e.o"), str(tmp_path / "e.s")], check=True)
    out = subprocess.run([objdump, "-d", "-w", "-z", str(tmp_path / "e.o")], capture_output=True, text=True,
                         check=True).stdout
    # The first instruction of each symbol: its byte count and text.
    first: dict[int, tuple[int, str]] = {}
    current = None
    for line in out.splitlines():
        if line.endswith(">:"):
            current = int(line[line.index("<e") + 2:-2])
        elif current is not None and ":\t" in line:
            parts = line.split("\t")
            first[current] = (len(parts[1].split()), "\t".join(parts[2:]))
            current = None
    agree: dict[str, int] = {}
    objdump_bad: dict[str, int] = {}
    wrong = []
    for i, (kind, enc) in enumerate(encodings):
        length, text = first[i]
        if "(bad)" in text:
            objdump_bad[kind] = objdump_bad.get(kind, 0) + 1
            continue  # an undefined encoding: objdump's length means nothing
        try:
            mine = insn_length(enc + _FILL)
        except InstructionDecodeError as exc:
            wrong.append(f"{enc.hex(' ')}: objdump {length} bytes ({text}), we cannot: {exc.reason}")
            continue
        if mine != length:
            wrong.append(f"{enc.hex(' ')}: objdump {length} bytes ({text}), we {mine}")
        else:
            agree[kind] = agree.get(kind, 0) + 1
    print(f"\n{len(encodings)} encodings; same length as objdump: {agree}; undefined for objdump: {objdump_bad}")
    assert not wrong, f"{len(wrong)} differences:\n" + "\n".join(wrong[:40])
    minimum = {"one-byte": 5000, "0F": 5000, "0F38": 1000, "0F3A": 300, "VEX": 1500, "EVEX": 1500,
               "XOP": 100, "ModRM/SIB": 2000}
    assert all(agree.get(k, 0) >= n for k, n in minimum.items()), agree


# --- lengths of particular encodings (no oracle needed) ----------------------------------------

@pytest.mark.parametrize("hexbytes,length", [
    ("90", 1),
    ("66 2e 0f 1f 84 00 00 00 00 00", 10),           # nop padding
    ("66 66 2e 0f 1f 84 00 00 00 00 00", 11),
    ("0f 1f 44 00 00", 5),
    ("f3 0f 1e fa", 4),                              # endbr64
    ("cc", 1),
    ("48 b8 88 77 66 55 44 33 22 11", 10),           # movabs $imm64, %rax
    ("66 b8 34 12", 4),                              # mov $imm16, %ax
    ("b8 78 56 34 12", 5),
    ("a1 88 77 66 55 44 33 22 11", 9),               # mov moffs64, %eax
    ("67 a1 44 33 22 11", 6),                        # addr32: 4-byte moffs
    ("f6 05 00 00 00 00 01", 7),                     # testb $1, rip+0
    ("f6 15 00 00 00 00", 6),                        # notb rip+0: no immediate
    ("66 f7 c0 34 12", 5),                           # test $imm16, %ax
    ("48 f7 c0 78 56 34 12", 7),                     # test $imm32, %rax (sign-extended)
    ("e8 00 00 00 00", 5),
    ("c8 10 00 01", 4),                              # enter $16, $1
    ("c2 08 00", 3),
    ("c7 f8 00 00 00 00", 6),                        # xbegin
    ("c6 f8 ff", 3),                                 # xabort
    ("0f 20 d8", 3),                                 # mov %cr3, %rax (mod ignored)
    ("0f 22 04", 3),
    ("66 0f 78 c0 04 08", 6),                        # extrq $4, $8, %xmm0
    ("0f 78 c0", 3),                                 # vmread
    ("0f 0f c1 9e", 4),                              # 3DNow! pfadd
    ("c5 f8 77", 3),                                 # vzeroupper
    ("c4 e3 7d 18 c1 01", 6),                        # vinsertf128 $1
    ("62 f1 7c 48 10 44 24 01", 8),                  # vmovups 0x40(%rsp), %zmm0 (disp8*N)
    ("62 f3 7d 48 1e c1 04", 7),                     # vpcmpud $4 (map 3: imm8)
    ("62 f1 7d 48 72 e1 05", 7),                     # vpsrad $5 (map 1 group: imm8)
    ("62 f5 7c 48 58 c1", 6),                        # vaddph (FP16 map 5)
    ("8f e9 78 c1 c0", 5),                           # XOP vphaddbw (map 9)
    ("8f ea 78 10 c0 01 00 00 00", 9),               # XOP bextr $imm32 (map 0A)
    ("8f 00", 2),                                    # pop (%rax)
    ("9b", 1),                                       # fwait: an instruction of its own
    ("40 66 90", 3),                                 # REX ignored before a legacy prefix: one instruction
])
def test_lengths(hexbytes, length):
    code = bytes.fromhex(hexbytes)
    assert insn_length(code + b"\xcc" * 16) == length
    assert insn_length(code) == length


@pytest.mark.parametrize("hexbytes,reason", [
    ("06", "undefined in 64-bit mode"),
    ("d4 0a", "undefined in 64-bit mode"),
    ("0f 04", "undefined opcode 0f 04"),
    ("48 c5 f8 77", "prefix before VEX"),
    ("66 62 f1 7c 48 10 c0", "prefix before VEX or EVEX"),
    ("f3 8f e9 78 c1 c0", "prefix before XOP"),
    ("62 f1 78 48 10 c0", "fixed bit"),
    ("c4 e4 7d 18 c1 01", "VEX opcode map 4"),
    ("62 f4 7c 48 10 c0", "EVEX opcode map 4"),
    ("8f eb 78 10 c0", "XOP opcode map 11"),
    ("48 8b", "ends inside"),
    ("e8 00 00", "ends inside"),
    ("66 " * 15 + "90", "prefixes"),
    ("66 " * 11 + "48 b8 00 00 00 00 00 00 00 00", "more than the 15"),
])
def test_undecodable(hexbytes, reason):
    with pytest.raises(InstructionDecodeError, match=reason) as info:
        insn_length(bytes.fromhex(hexbytes))
    assert isinstance(info.value, ResolveError) and info.value.offset == 0


def test_instruction_starts_reports_where_it_stops():
    code = bytes.fromhex("55 48 89 e5 06 c3")
    with pytest.raises(InstructionDecodeError, match=r"0x1004 \(06 c3\)") as info:
        instruction_starts(code, 0x1000)
    assert info.value.offset == 4
    assert instruction_starts(code, 0x1000, end=4) == [0x1000, 0x1001]
    # The last instruction may run past ``end`` when the buffer holds it.
    assert instruction_starts(bytes.fromhex("55 e8 00 00 00 00"), 0, end=2) == [0, 1]


# --- the boundary check ---------------------------------------------------------------------------

ADD_INTS_O0 = bytes.fromhex("55 48 89 e5 89 7d fc 89 75 f8 8b 55 fc 8b 45 f8 01 d0 5d c3")


def test_check_boundary_message():
    check_boundary(ADD_INTS_O0, 7, "add_ints")
    with pytest.raises(BoundaryError) as info:
        check_boundary(ADD_INTS_O0, 8, "add_ints")
    err = info.value
    assert str(err) == ("add_ints+8 is inside the instruction at add_ints+7 (3 bytes); "
                        "the nearest instruction starts are +7 and +10")
    assert "add_ints+7 or add_ints+10" in err.hint
    assert (err.function, err.offset, err.start, err.end) == ("add_ints", 8, 7, 10)
    assert isinstance(err, ResolveError) and isinstance(err, ProbectlError)


def test_check_boundary_decode_error_names_the_function_offset():
    code = ADD_INTS_O0[:7] + b"\x06" + ADD_INTS_O0[8:]
    check_boundary(code, 7, "f")
    with pytest.raises(InstructionDecodeError, match=r"cannot decode the instruction at f\+7 .*f\+9") as info:
        check_boundary(code, 9, "f")
    assert info.value.offset == 7
    with pytest.raises(InstructionDecodeError, match=r"ends at \+20"):
        check_boundary(ADD_INTS_O0, 25, "f")


@pytest.mark.parametrize("opt", ["-O0", "-O2"])
def test_check_probe_offset_on_every_byte_of_the_fixture(objdump, opt):
    """Every offset of every function of the fixture: accepted exactly at objdump's starts, refused
    elsewhere with the instruction around it."""
    binary = build_fixture("uprobe_target", opt=opt)
    blocks = {b.name: b for b in objdump_blocks(objdump, binary)}
    with ElfFile(binary) as elf:
        functions = [s for s in elf.functions() if s.size and s.name in blocks]
        assert any(s.name == "add_ints" for s in functions)
        for sym in functions:
            starts = [a - sym.value for a in blocks[sym.name].starts if a < sym.value + sym.size]
            for offset in range(sym.size):
                if offset in starts:
                    check_probe_offset(elf, sym.name, sym.value, sym.size, offset)
                    continue
                with pytest.raises(BoundaryError) as info:
                    check_probe_offset(elf, sym.name, sym.value, sym.size, offset)
                before = max(s for s in starts if s < offset)
                after = min([s for s in starts if s > offset] or [sym.size])
                assert (info.value.start, info.value.end) == (before, after)


def test_the_brief_example_on_the_O0_fixture():
    binary = build_fixture("uprobe_target", "-O0")
    with ElfFile(binary) as elf:
        (sym,) = elf.find_functions("add_ints")
        with pytest.raises(BoundaryError, match=r"^add_ints\+8 is inside the instruction at add_ints\+\d+ "
                                                r"\(\d bytes\); the nearest instruction starts are \+\d+ and \+\d+$"):
            check_probe_offset(elf, "add_ints", sym.value, sym.size, 8)
        # Unknown size (an assembly symbol): read just enough.
        with pytest.raises(BoundaryError):
            check_probe_offset(elf, "add_ints", sym.value, 0, 8)


def test_check_probe_offset_skips_other_machines(tmp_path):
    binary = build_fixture("uprobe_target", "-O0")
    data = bytearray(binary.read_bytes())
    data[18:20] = (243).to_bytes(2, "little")  # EM_RISCV
    other = tmp_path / "riscv"
    other.write_bytes(bytes(data))
    with ElfFile(other) as elf:
        (sym,) = elf.find_functions("add_ints")
        check_probe_offset(elf, "add_ints", sym.value, sym.size, 8)  # no x86 decoding on a RISC-V file


def test_check_probe_offset_outside_the_file():
    binary = build_fixture("uprobe_target", "-O0")
    with ElfFile(binary) as elf:
        with pytest.raises(InstructionDecodeError, match="no loadable part"):
            check_probe_offset(elf, "nowhere", 0x7FFF_0000_0000, 16, 4)
        check_probe_offset(elf, "nowhere", 0x7FFF_0000_0000, 16, 0)  # offset 0 always starts one


def test_libc_sampled_functions_check_fast():
    """The resolver's per-probe cost: checking an offset reads and decodes only up to it."""
    if not LIBC.exists():
        missing(f"{LIBC} does not exist")
    with ElfFile(LIBC) as elf:
        functions = [s for s in elf.functions() if s.size > 64][:500]
        t0 = time.perf_counter()
        refused = 0
        for sym in functions:
            try:
                check_probe_offset(elf, sym.name, sym.value, sym.size, 33)
            except BoundaryError:
                refused += 1
        elapsed = time.perf_counter() - t0
    print(f"\n{len(functions)} libc functions checked at +33 in {elapsed * 1000:.1f} ms ({refused} refused)")
    assert 0 < refused < len(functions)
