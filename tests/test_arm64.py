"""AArch64: the machine's facts (probectl/arch/aarch64.py) and definitions of AArch64 builds of the
fixtures (Debian's gcc-aarch64-linux-gnu, -O0 and -O2) against ``perf probe -D``, which reads
AArch64 files on this x86-64 machine.

The differential cases are test_source_probes.py's, the same definitions on the same sources, compared
the same way (its normalisation of perf's deliberate differences included). Where perf is wrong on
AArch64 the test says why and checks probectl against the file itself: a location list read by
pyelftools, an SDT note read by readelf. What perf writes and an AArch64 kernel refuses (an x86
register) or cannot enable (an offset between two instructions; tests/guest/test_qemu_arm64.py shows
both) is refused before anything is written, and so is any
write of an AArch64 definition on this x86-64 kernel. Live values need an AArch64 kernel (a guest):
not here.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from probectl.arch import EM_AARCH64, EM_X86_64, BoundaryError, for_machine, host, machine_name
from probectl.arch import aarch64, x86_64
from probectl.debuginfo.elf import ElfFile
from probectl.debuginfo.sdt import parse_operand
from probectl.errors import DebugInfoError
from probectl.debuginfo.dwarf.unwind import CallFrameFiles, StackCopy, Unwinder, registers_from_perf
from probectl.debuginfo.framepointers import keeps_frame_pointers
from probectl.tracedat.procmaps import decode_proc_maps

from tests.helpers import (BUILD_DIR, FIXTURES, TRACEFS, build_arm64_fixture, build_arm64_program, build_fixture,
                           fails, kernel_testdata, missing, probectl, require_tool)
from tests.test_kernel_definitions import AGREED, by_event, perf_kernel_definitions
from tests.test_source_probes import (FIXTURE_CASES, assert_same, normalized, ours, perfs)

ARM64 = aarch64.ARCH


# --- the machine's facts --------------------------------------------------------------------------


def test_machines_are_chosen_by_elf_machine():
    assert for_machine(EM_AARCH64) is ARM64 and ARM64.elf_machine == EM_AARCH64 == 183
    assert for_machine(EM_X86_64) is x86_64.ARCH and x86_64.ARCH.elf_machine == EM_X86_64 == 62
    assert for_machine(243) is None and machine_name(243) == "RISC-V" and machine_name(183) == "AArch64"
    assert machine_name(9999) == "machine 9999"
    assert host() is x86_64.ARCH or os.uname().machine != "x86_64"


def test_aarch64_registers():
    # AADWARF64: 0..30 X0..X30, 31 SP, 32 PC; perf's table names 30 %lr (the kernel takes both)
    assert [ARM64.register_name(n) for n in (0, 7, 19, 29, 30, 31, 32)] == \
        ["%x0", "%x7", "%x19", "%x29", "%lr", "%sp", "%pc"]
    assert ARM64.register_name(64) is None and 64 in ARM64.vector_registers  # V0
    assert ARM64.register_name(-1) is None and ARM64.register_name(128) is None
    # every name a DWARF location can produce is one the kernel's regoffset_table takes
    assert {r[1:] for r in ARM64.dwarf_registers if r} <= ARM64.kernel_registers
    assert {f"x{n}" for n in range(31)} | {"lr", "sp", "pc", "pstate"} == ARM64.kernel_registers
    assert not {"di", "si", "ax", "ip", "rax"} & ARM64.kernel_registers
    # AAPCS64: integer arguments in X0..X7; x86-64's facts are what they were
    assert [ARM64.register_name(r) for r in ARM64.argument_registers] == [f"%x{n}" for n in range(8)]
    assert [x86_64.ARCH.register_name(r) for r in x86_64.ARCH.argument_registers] == \
        ["%di", "%si", "%dx", "%cx", "%r8", "%r9"]
    assert ARM64.instruction_size == 4 and x86_64.ARCH.instruction_size == 0
    # perf's user registers (asm/perf_regs.h): X0..X30, SP, PC in DWARF order; callee-saved X19..X29
    assert ARM64.perf_regs_dwarf == tuple(range(33)) and ARM64.callee_saved == frozenset(range(19, 30))


def test_assembler_registers_of_sdt_operands():
    regs = ARM64.assembler_registers
    assert regs["x25"] == ("%x25", 0, 64) and regs["w3"] == ("%x3", 0, 32) and regs["sp"] == ("%sp", 0, 64)
    assert "rax" not in regs and "x31" not in regs


@pytest.mark.parametrize("text,kind,fields", [
    ("8@x25", "register", {"size": 8, "signed": False, "register": "x25"}),
    ("-4@w2", "register", {"size": 4, "signed": True, "register": "w2"}),
    ("-4@[x22, 20]", "memory", {"size": 4, "signed": True, "base": "x22", "displacement": 20}),
    ("-2@[sp]", "memory", {"size": 2, "base": "sp", "displacement": 0}),
    ("8@[x29, -16]", "memory", {"base": "x29", "displacement": -16}),
    ("8@[x0, #8]", "memory", {"base": "x0", "displacement": 8}),
    ("-4@5", "immediate", {"value": 5}),
    ("-4@-9", "immediate", {"value": -9}),
])
def test_aarch64_sdt_operands(text, kind, fields):
    op = parse_operand(text, EM_AARCH64)
    assert op.kind == kind
    for name, value in fields.items():
        assert getattr(op, name) == value, name


@pytest.mark.parametrize("text", ["-4@%esi", "8@-96(%rbp,%rax,8)", "8@[x31]", "8@[x1, x2]", "8@q0"])
def test_foreign_sdt_operands_are_errors(text):
    with pytest.raises(DebugInfoError, match="not AArch64 assembler syntax"):
        parse_operand(text, EM_AARCH64)


def test_misaligned_offsets_are_boundary_errors():
    ARM64.check_alignment("paint", 8)
    with pytest.raises(BoundaryError) as info:
        ARM64.check_alignment("paint", 6)
    assert (info.value.start, info.value.end) == (4, 8)
    x86_64.ARCH.check_alignment("paint", 3)  # (x86-64 decodes the code instead: tests/test_x86insn.py)


# --- AArch64 builds of the fixtures ---------------------------------------------------------------


def arm64_binary(name: str, opt: str) -> str:
    if name == "dwarf_static":
        return str(build_arm64_program(name, [FIXTURES / "dwarf_static_a.c", FIXTURES / "dwarf_static_b.c"], opt))
    return str(build_arm64_fixture(name, opt))


def test_the_cfi_numbers_registers_as_the_facts_do():
    """The compiler's own call-frame information (pyelftools reads it) names the return-address
    column and the stack pointer the CFA starts from: the DWARF numbers the facts give them."""
    from elftools.elf.elffile import ELFFile

    for arch, path in ((ARM64, arm64_binary("uprobe_target", "-O2")), (x86_64.ARCH, None)):
        if path is None:
            path = str(build_fixture("uprobe_target", "-O2"))
        with open(path, "rb") as f:
            elf = ELFFile(f)
            assert elf["e_machine"] == ("EM_AARCH64" if arch is ARM64 else "EM_X86_64")
            entries = elf.get_dwarf_info().EH_CFI_entries()
            cie = next(e for e in entries if type(e).__name__ == "CIE")
            assert cie["return_address_register"] == arch.return_address
            cfa = cie.get_decoded().table[0]["cfa"]
            assert cfa.reg == arch.stack_pointer


@pytest.mark.perf
@pytest.mark.parametrize("name,opt,definition", FIXTURE_CASES,
                         ids=[f"{n}{o}:{d}" for n, o, d in FIXTURE_CASES])
def test_fixture_definitions_match_perf(perf_bin, name, opt, definition):
    """test_source_probes' x86-64 cases, on AArch64 builds: member chains, globals, lines, lazy
    patterns, $params, $vars, %return $retval, inline instances, static functions, globs."""
    mine = assert_same(perf_bin, arm64_binary(name, opt), definition)
    registers = {r for d in mine for a in d.args for r in re.findall(r"%(\w+)", a.fetch)}
    assert registers <= ARM64.kernel_registers, "x86 register names in an AArch64 definition"


# At -O2 on AArch64 (where x86-64's build splits rare_path into a .cold part that perf cannot look up):
ARM64_O2 = ["rare_path code why:string", "rare_path:3 code", "rare_path%return $retval", "process;*square* c",
            "square", "clamp", "rare_path:5"]
# Symbol-level definitions, with AArch64's registers (test_perf_symbols.py's x86-64 ones)
SYMBOLS = [
    "add_ints", "add_ints%return", "add_ints %x0 %x1", "add_ints a=%x0:s32 b=%x1:s32", "add_ints%return r=$retval:s32",
    "sum_record id=+0(%x0):s32 value=+8(%x0):s64 flags=+16(%x0):u16 label=+0(+24(%x0)):string",
    "count_char text=+0(%x0):string ch=%x1:s8", "hash_u64 seed=%x0:x64", "pick_label%return +0($retval):string",
    "bump $comm $stack", "mix_unsigned bits=%x0:u32 arr=+0(%sp):x8[4] bf=+0(%sp):b3@2/32",
    "sum_record+4", "add_ints+4 %lr", "add_ints+0x4 %x0:s32",
]


@pytest.mark.perf
@pytest.mark.parametrize("definition", ARM64_O2)
def test_optimised_inline_fixture_matches_perf(perf_bin, definition):
    assert_same(perf_bin, arm64_binary("dwarf_inline", "-O2"), definition)


@pytest.mark.perf
@pytest.mark.parametrize("opt", ["-O0", "-O2"])
@pytest.mark.parametrize("definition", SYMBOLS)
def test_symbol_definitions_match_perf(perf_bin, opt, definition):
    assert_same(perf_bin, arm64_binary("uprobe_target", opt), definition)


@pytest.mark.perf
@pytest.mark.parametrize("opt", ["-O0", "-O2"])
def test_argn_are_the_aapcs64_argument_registers(perf_bin, opt):
    """uprobes read no $argN: probectl writes the argument registers, the ones perf's DWARF reading of
    the parameters gives at the -O2 entry (at -O0 perf skips the prologue, so the entry is compared)."""
    path = arm64_binary("uprobe_target", opt)
    (mine,), _ = ours(path, "add_ints $arg1 $arg2")
    assert [a.fetch for a in mine.args] == ["%x0", "%x1"]
    if opt == "-O2":
        (theirs,), _ = perfs(perf_bin, path, "add_ints a b")
        assert [a.fetch for a in theirs.args] == ["%x0", "%x1"] and theirs.place == mine.place
    out = fails("add", "-D", "-x", path, "add_ints $arg9")
    assert "not passed in a register on AArch64 (only $arg1..$arg8 are)" in out and "+8(%sp)" in out


@pytest.mark.perf
def test_an_inline_parameter_where_perf_writes_garbage(perf_bin):
    """square's v at its -O2 instance in process: perf writes an immediate, ``\\deade12d``, that the
    program never computes; the location list, read by pyelftools, says the value is in register 2
    there (an empty range with a location view: where the instance begins, after the clamp's
    ``csel w2``), which probectl writes (%x2)."""
    path = arm64_binary("dwarf_inline", "-O2")
    mine, _ = ours(path, "square v")
    theirs, _ = perfs(perf_bin, path, "square v")
    assert [d.place for d in mine] == [d.place for d in theirs]
    differing = [(m, t) for m, t in zip(mine, theirs) if m.render() != t.render()]
    for m, t in differing:
        assert t.args[0].fetch.startswith("\\") and m.args[0].fetch.startswith("%x")
        address = int(m.place.rsplit(":", 1)[1], 16)  # (PIE at 0: the file offset is the address)
        assert m.args[0].fetch == f"%x{_register_of_v(path, address)}"
    assert len(differing) <= 1


def _register_of_v(path: str, address: int) -> int:
    """The DW_OP_regN of the location-list entry of square's inlined ``v`` covering ``address``."""
    from elftools.dwarf.locationlists import BaseAddressEntry, LocationEntry
    from elftools.elf.elffile import ELFFile

    with open(path, "rb") as f:
        dwarf = ELFFile(f).get_dwarf_info()
        lists = dwarf.location_lists()
        for cu in dwarf.iter_CUs():
            cu_base = cu.get_top_DIE().attributes["DW_AT_low_pc"].value
            for die in cu.iter_DIEs():
                if die.tag != "DW_TAG_inlined_subroutine" or die.attributes.get("DW_AT_low_pc") is None:
                    continue
                if die.attributes["DW_AT_low_pc"].value != address:
                    continue
                for child in die.iter_children():
                    loc = child.attributes.get("DW_AT_location")
                    if child.tag != "DW_TAG_formal_parameter" or loc is None or loc.form != "DW_FORM_sec_offset":
                        continue
                    base = cu_base
                    for entry in lists.get_location_list_at_offset(loc.value, die=child):
                        if isinstance(entry, BaseAddressEntry):
                            base = entry.base_address
                        if not isinstance(entry, LocationEntry):
                            continue
                        offset = 0 if getattr(entry, "is_absolute", False) else base
                        begin, end = entry.begin_offset + offset, entry.end_offset + offset
                        # (an empty range is a location view: the value at that address's entry view,
                        # the one the inline instance starts at, DW_AT_GNU_entry_view)
                        if begin <= address < end or begin == end == address:
                            op = entry.loc_expr[0]
                            assert 0x50 <= op <= 0x6F, entry.loc_expr  # DW_OP_reg0..31
                            return op - 0x50
    raise AssertionError(f"no location of v at 0x{address:x}")


# --- funcs, lines, vars ---------------------------------------------------------------------------


@pytest.mark.perf
@pytest.mark.parametrize("fixture", ["dwarf_structs", "dwarf_inline"])
@pytest.mark.parametrize("opt", ["-O0", "-O2"])
def test_listings_match_perf(perf_bin, fixture, opt):
    """funcs (perf -F lists the data symbols too: only its functions are compared), lines (-L) and vars
    (-V) of every function of the AArch64 builds."""
    from probectl.debuginfo.elf import ElfFile

    path = arm64_binary(fixture, opt)
    functions = {s.name for s in ElfFile(path).functions()}
    perf_funcs = subprocess.run([perf_bin, "probe", "-x", path, "-F"], capture_output=True, text=True).stdout.split()
    assert probectl("funcs", "-x", path).stdout.split() == [n for n in perf_funcs if n in functions]
    compared = 0
    for func in sorted(n for n in functions if not n.startswith("_") and "." not in n and n not in
                       ("main", "frame_dummy", "register_tm_clones", "deregister_tm_clones", "call_weak_fn")):
        for mode, flag in (("lines", "-L"), ("vars", "-V")):
            theirs = subprocess.run([perf_bin, "probe", "-x", path, flag, func], capture_output=True, text=True)
            mine = probectl(mode, "-x", path, func, check=False)
            if mode == "vars" and "total" in mine.stdout and fixture == "dwarf_inline" and opt == "-O2":
                continue  # a constant (DW_OP_lit0): perf leaves it out, probectl fetches \0 (test_sourceview)
            assert mine.returncode == 0, mine.stderr
            expected = [ln for ln in theirs.stdout.splitlines() if "(null)" not in ln]
            assert mine.stdout.splitlines() == expected, (func, mode)
            compared += 1
    assert compared >= 4


# --- SDT probes -----------------------------------------------------------------------------------


def build_arm64_usdt(opt: str) -> tuple[Path, Path]:
    """usdt_target linked with libusdt_lib.so for AArch64 (test_sdt's fixture): <sys/sdt.h> is Debian's
    (systemtap-sdt-dev), which the cross compiler does not search, so its two headers are copied beside."""
    gcc = require_tool("aarch64-linux-gnu-gcc", "gcc-aarch64-linux-gnu")
    headers = [Path("/usr/include/x86_64-linux-gnu/sys") / n for n in ("sdt.h", "sdt-config.h")]
    if not all(h.exists() for h in headers):
        missing("<sys/sdt.h> is missing (apt systemtap-sdt-dev)")
    import hashlib

    sources = [FIXTURES / n for n in ("usdt_lib.c", "usdt_target.c", "usdt_guarded.c")]
    ident = b"".join(src.read_bytes() for src in sources + headers) + opt.encode()
    out = BUILD_DIR / f"usdt-{opt.lstrip('-')}-aarch64-{hashlib.sha1(ident).hexdigest()[:12]}"
    program, library = out / "usdt_target", out / "libusdt_lib.so"
    if not program.exists():
        tmp = out.with_suffix(f".tmp{os.getpid()}")
        (tmp / "include" / "sys").mkdir(parents=True)
        for h in headers:
            shutil.copyfile(h, tmp / "include" / "sys" / h.name)
        flags = [opt, "-g", "-fno-omit-frame-pointer", "-isystem", str(tmp / "include")]
        subprocess.run([gcc, *flags, "-shared", "-fPIC", "-o", str(tmp / library.name), str(sources[0])], check=True)
        subprocess.run([gcc, *flags, "-o", str(tmp / program.name), *map(str, sources[1:]), f"-L{tmp}",
                        "-lusdt_lib"], check=True)
        try:
            tmp.rename(out)
        except OSError:
            shutil.rmtree(tmp, ignore_errors=True)
    return program, library


def _notes(path: Path) -> list[tuple[str, str, str]]:
    """(provider, name, arguments) of each SDT note, as binutils' readelf prints them."""
    text = subprocess.run(["readelf", "-n", str(path)], capture_output=True, text=True, check=True).stdout
    return re.findall(r"Provider: (\S+)\n\s+Name: (\S+)\n.*?Arguments: ([^\n]*)", text, re.S)


def _expected(operand: str) -> str:
    """The fetch of one AArch64 operand as binutils prints it: registers and [base, offset] only."""
    size, where = operand.split("@")
    typ = f"{'s' if size.startswith('-') else 'u'}{8 * abs(int(size))}"
    if m := re.fullmatch(r"[xw](\d+)", where):
        return f"%x{m.group(1)}:{typ}"
    if m := re.fullmatch(r"\[(sp|x\d+)(?:,\s*(-?\d+))?\]", where):
        off = int(m.group(2) or 0)
        return f"{'+' if off >= 0 else '-'}{abs(off)}(%{m.group(1)}):{typ}"
    if re.fullmatch(r"-?\d+", where):
        return f"\\{where}:{typ}"
    return ""  # (x86 text in a hand-written note: left out with a warning)


@pytest.mark.perf
@pytest.mark.parametrize("opt", ["-O0", "-O2"])
def test_sdt_probes(perf_bin, opt):
    """The places equal perf's. perf on x86-64 reads SDT operands with its x86 parser and writes no
    argument of an AArch64 note; probectl's are each note's operands as readelf prints them."""
    program, library = build_arm64_usdt(opt)
    for path, pattern in ((program, "sdt_probectl:*"), (library, "sdt_probectl_lib:*")):
        mine, err = ours(str(path), pattern)
        theirs, _ = perfs(perf_bin, str(path), pattern)
        assert [d.place for d in mine] == [d.place for d in theirs] and len(mine) >= 2
        assert all(not d.args for d in theirs)
        notes = [n for n in _notes(path) if f"sdt_{n[0]}:{n[1]}".startswith(pattern.rstrip("*"))]
        assert len(notes) == len(mine)
        for d, (_provider, _name, arguments) in zip(mine, notes):
            operands = re.findall(r"\S+@\[[^\]]*\]|\S+", arguments)
            assert [f"{a.fetch}:{a.type}" for a in d.args] == [e for e in map(_expected, operands) if e], arguments
        if path == program:
            assert "global_counter(%rip)" in err  # the fixture's x86 text, left out with a warning
    with_args = [d for d in ours(str(program), "sdt_probectl:mem")[0]]
    assert with_args and with_args[0].args, "the fixture's memory operands give arguments"


# --- refused before anything is written -----------------------------------------------------------


@pytest.mark.perf
def test_what_perf_writes_and_the_kernel_refuses(perf_bin):
    path = arm64_binary("dwarf_structs", "-O0")
    # perf writes both
    assert perfs(perf_bin, path, "paint+2")[0] and perfs(perf_bin, path, "paint %di")[0]
    out = fails("add", "-D", "-x", path, "paint+2")
    assert "paint+2 is inside the instruction at paint+0 (4 bytes)" in out and "AArch64 instructions are 4 bytes" in out
    out = fails("add", "-D", "-x", path, "paint %di")
    assert "the kernel knows no register %di on AArch64" in out and "%x0..%x30" in out
    out = fails("add", "-D", "-x", arm64_binary("dwarf_structs", "-O2"), "paint w->id %ax")
    assert "%ax" in out
    # an offset on the 4-byte grid is taken, as perf writes it
    assert [d.render() for d in ours(path, "paint+8")[0]] == normalized(perfs(perf_bin, path, "paint+8")[0], [])


def test_an_arm64_program_is_not_written_on_this_kernel():
    if os.uname().machine != "x86_64":
        pytest.skip("the refusal is of a foreign machine's program: this test runs on x86-64")
    path = arm64_binary("dwarf_structs", "-O2")
    live = os.geteuid() == 0 and (TRACEFS / "uprobe_events").exists()
    commands = [["add", "-x", path, "paint w->id"], ["add", "-f", "-x", path, "paint"]]
    if live:  # (a traced run makes its instance first: root only)
        commands += [["trace", "-x", path, "paint w->id", "--", "true"],
                     ["hist", "paint w->id", "-x", path, "--key", "id", "--", "true"]]
    for args in commands:
        out = fails(*args)
        assert f"{path} is an AArch64 program, and this kernel runs on x86_64" in out
        assert "probectl add -D" in out
    if live:  # nothing of these runs is left (other sessions' events and instances may come and go)
        assert path not in (TRACEFS / "uprobe_events").read_text()
        assert not [d for d in os.listdir(TRACEFS / "instances") if d.startswith("probectl-")
                    and d.split("-")[1].isdigit() and not os.path.exists(f"/proc/{d.split('-')[1]}")]
    # -D shows them, as perf -D does
    assert probectl("add", "-D", "-x", path, "paint w->id").stdout.startswith("p:probe_dwarf_structs/paint ")


def test_aarch64_frame_pointers_are_seen():
    """``record -g`` copies the stacks of AArch64 code that keeps no frame records: the check looks for
    ``add x29, sp, #N`` among a function's first instructions (-O0 keeps them; -fomit-frame-pointer not)."""
    with ElfFile(build_arm64_fixture("dwarf_structs", "-O0")) as elf:
        assert keeps_frame_pointers(elf)
    omitted = build_arm64_program("dwarf_structs", [FIXTURES / "dwarf_structs.c"], "-O0", ("-fomit-frame-pointer",))
    with ElfFile(omitted) as elf:
        assert not keeps_frame_pointers(elf)


def test_an_aarch64_stack_is_unwound_from_its_cfi(tmp_path):
    """The CFI unwinder with AArch64's facts, on the arm64 build of uprobe_target (-O2): at the entry of
    sum_record, a leaf, the return address is still in x30 and the CFA is the stack pointer; main's row
    at its call says where it saved x30, whose value there carries a pointer-authentication signature in
    its top bits, stripped as the kernel strips it. (The registers and the stack are made here from the
    binary's own CFI and code: no AArch64 process runs on this machine; tests/guest/
    test_qemu_arm64_probectl.py unwinds real ones in the arm64 guest.)"""
    path = build_arm64_fixture("uprobe_target", "-O2")
    base = 0xAAAA_0000_0000
    with ElfFile(path) as elf:
        sym = {f.name: f.value for f in elf.functions()}
        main, callee = sym["main"], sym["sum_record"]
        code = elf.file_bytes(elf.vaddr_to_offset(main), 0x400, "main")
    call = next(main + i for i in range(0, len(code), 4)
                if (w := int.from_bytes(code[i:i + 4], "little")) >> 26 == 0b100101  # bl
                and main + i + ((w & 0x3FFFFFF) ^ 0x2000000) * 4 - 0x8000000 == callee)
    maps = decode_proc_maps(f"pid 1\n{base:x}-{base + 0x10000:x} r-xp 00000000 00:00 0 {path}\n".encode())[1]
    row = CallFrameFiles().get(str(path)).frames.row_at(call)
    assert row is not None and row.cfa is not None
    sp = 0x7FFF_F000_0000
    regs = {aarch64.PROGRAM_COUNTER: base + callee, aarch64.STACK_POINTER: sp, aarch64.LINK_REGISTER: base + call + 4,
            29: sp + 0x40}
    cfa = (sp if row.cfa.register == aarch64.STACK_POINTER else regs[row.cfa.register]) + row.cfa.offset
    saved_lr = row.rule(aarch64.LINK_REGISTER)
    assert saved_lr is not None and saved_lr.kind == "offset"
    caller = 0xFFFF_8000_1234  # (in no mapped file: the unwinding stops after it, saying so)
    stack = bytearray(0x1000)
    at = cfa + saved_lr.value - sp
    stack[at:at + 8] = (caller | 0x003A << 48).to_bytes(8, "little")  # signed: bits 48..63
    frames = Unwinder(maps, arch=aarch64.ARCH).unwind(regs, StackCopy(sp, bytes(stack)))
    assert [(f.address, f.kind) for f in frames[:3]] == [(base + callee, "ip"), (base + call + 4, "return"),
                                                         (caller, "return")]
    assert frames[3].kind == "unknown" and "in no mapped file" in frames[3].reason
    # perf's user registers of an arm64 sample are the DWARF numbers (X0..X30, SP, PC)
    assert registers_from_perf(aarch64.ARCH.perf_regs_unwind_mask, list(range(33)), aarch64.ARCH) == {
        n: n for n in range(33)}


# --- the arm64 kernel (its -dbg vmlinux, tools/kernel-testdata-arm64.sh) ------------------------------


@pytest.fixture(scope="module")
def arm64_vmlinux() -> Path:
    return kernel_testdata("vmlinux", script="kernel-testdata-arm64.sh")


# test_kernel_definitions' definitions (its x86 system call wrapper as arm64's; tcp_sendmsg_locked:12
# shares its address with another line in this build, which both tools refuse)
KERNEL_AGREED = [d for d in AGREED if not d.startswith(("__x64_", "tcp_sendmsg_locked:12"))] + ["__arm64_sys_getpid"]


@pytest.mark.vmlinux
@pytest.mark.perf
def test_kernel_definitions_match_perf(perf_bin, arm64_vmlinux, tmp_path):
    """Entries (after the two NOPs of ftrace's patchable entry, where DWARF's function begins), lines,
    locals, member chains, strings, .isra clones, return probes: perf's lines, but for $retval, which
    probectl types from DWARF (test_kernel_definitions says the same of x86-64)."""
    theirs = perf_kernel_definitions(arm64_vmlinux, KERNEL_AGREED, tmp_path)
    out = probectl("add", "-D", "-k", str(arm64_vmlinux), *(f"d{n}={d}" for n, d in enumerate(KERNEL_AGREED)))
    mine = by_event(out.stdout.splitlines())
    for n, definition in enumerate(KERNEL_AGREED):
        expected = [d.render() for d in theirs[f"d{n}"]]
        if definition == "tcp_sendmsg%return $retval":
            expected = [t.replace("$retval", "$retval:s32") for t in expected]
        assert sorted(d.render() for d in mine[f"d{n}"]) == sorted(expected), definition


@pytest.mark.vmlinux
def test_kernel_places_after_the_patchable_entry(arm64_vmlinux):
    """tcp_sendmsg begins with two NOPs (ftrace's); FUNC and FUNC+OFF count from after them, as perf
    counts (its DWARF entry), a return probe stays on the symbol, and $argN, which the kernel reads at
    a function's entry only (the symbol: arm64 adjusts no kprobe address), keeps it too: perf writes
    tcp_sendmsg+8 $arg1, which the kernel refuses (tests/guest/test_qemu_arm64_kprobes.py)."""
    with ElfFile(arm64_vmlinux) as elf:
        (sym,) = elf.find_functions("tcp_sendmsg")
        code = elf.file_bytes(elf.vaddr_to_offset(sym.value), 12, "tcp_sendmsg")
    assert code[:8] == aarch64.NOP * 2 and code[8:12] != aarch64.NOP
    out = probectl("add", "-D", "-k", str(arm64_vmlinux), "tcp_sendmsg", "w=tcp_sendmsg+4", "x=tcp_sendmsg %x0",
                   "y=tcp_sendmsg $arg1", "tcp_sendmsg%return").stdout.split("\n")
    assert [line.split()[1] for line in out if line] == \
        ["tcp_sendmsg+8", "tcp_sendmsg+12", "tcp_sendmsg+8", "tcp_sendmsg+0", "tcp_sendmsg+0"]
    assert "between them" in fails("add", "-D", "-k", str(arm64_vmlinux), "tcp_sendmsg+2")


@pytest.mark.vmlinux
@pytest.mark.perf
def test_perf_writes_argn_after_the_patchable_entry(perf_bin, arm64_vmlinux, tmp_path):
    """The line tests/guest/test_qemu_arm64.py gives the kernel as perf's, which it refuses."""
    out = subprocess.run([perf_bin, "probe", "-k", str(arm64_vmlinux), "-D", "a64k:perf_argn=tcp_sendmsg $arg1"],
                         capture_output=True, text=True, env=dict(os.environ, HOME=str(tmp_path)))
    assert out.stdout.strip() == "p:a64k/perf_argn tcp_sendmsg+8 $arg1", out.stderr


# --- BTF of the arm64 kernel: AAPCS64 ---------------------------------------------------------------


@pytest.fixture(scope="module")
def arm64_btf(arm64_vmlinux):
    from probectl.debuginfo.btf import load_kernel_btf

    return load_kernel_btf(arm64_vmlinux)


@pytest.mark.vmlinux
@pytest.mark.perf
def test_btf_entry_arguments_equal_perf(perf_bin, arm64_vmlinux, arm64_btf, tmp_path):
    """test_btf's definitions, placed by AAPCS64 from the arm64 kernel's BTF alone, equal perf's from its
    DWARF (at FUNC+8, after ftrace's NOPs, where the registers still hold the arguments; perf also lists
    inline copies, which BTF does not describe)."""
    from tests.test_btf import PERF_DEFINITIONS, _btf_args

    def perf(definition: str) -> str:
        return subprocess.run([perf_bin, "probe", "-k", str(arm64_vmlinux), "-D", definition], capture_output=True,
                              text=True, env=dict(os.environ, HOME=str(tmp_path))).stdout

    for definition in PERF_DEFINITIONS:
        function = definition.split()[0]
        # (FUNC+0 where the function has no patchable entry: a notrace one)
        theirs = [line.split() for line in perf(definition).splitlines()
                  if line.split()[1:2] in ([f"{function}+8"], [f"{function}+0"])]
        assert theirs and _btf_args(arm64_btf, definition) == theirs[0][2:], definition


@pytest.mark.vmlinux
@pytest.mark.perf
def test_btf_stack_and_reference_arguments(perf_bin, arm64_vmlinux, arm64_btf, tmp_path):
    """The ninth integer argument is at 0(%sp) (the return address is in %lr, not on the stack), as perf
    reads it from DWARF; a va_list (a 32-byte struct) is passed by reference, its address in the
    argument's register: at the entry perf's DWARF location (%x21, where the prologue keeps it later)
    does not hold it yet, %x2 does; a 4-byte struct by value is the low bits of its register."""
    from probectl.resolve.btf_fetch import btf_fetch, btf_retval
    from probectl.spec import parse_probe

    def fetched(function: str, expr: str):
        arg = parse_probe(f"{function} {expr}").args[0]
        return btf_fetch(arm64_btf, function, arg.expr, arg.type)

    def fetch(function: str, expr: str) -> str:
        return fetched(function, expr).fetch

    perf = subprocess.run([perf_bin, "probe", "-k", str(arm64_vmlinux), "-D", "__blk_add_trace cgid",
                           "-D", "audit_log_vformat args.__gr_offs"], capture_output=True, text=True,
                          env=dict(os.environ, HOME=str(tmp_path))).stdout.splitlines()
    assert perf[0].endswith(" cgid=+0(%sp):x64") and fetch("__blk_add_trace", "cgid") == "+0(%sp)"
    assert perf[1].endswith(" __gr_offs=+24(%x21):s32") and fetch("audit_log_vformat", "args.__gr_offs") == "+24(%x2)"
    kuid = fetched("from_kuid", "kuid.val")
    assert (kuid.fetch, kuid.type) == ("%x1", "x32")
    assert btf_retval(arm64_btf, "tcp_sendmsg").type == "s32"
