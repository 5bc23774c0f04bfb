"""Go programs (fixtures/go_target.go, built with Debian's go, optimised and not): FUNC%return as
uprobes on the function's return instructions with the results read from Go's result registers,
never a kernel return probe, and what cannot be made safe refused with the reason; event names made
from whole Go names. The live run (the program whose stack grows under the probe runs to its end) is
tests/live/test_go_programs.py.

objdump is the oracle of the return instructions and of the jumps out of a function, perf -D of the
entry probes' places and arguments.
"""
from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from probectl.arch import EM_AARCH64, for_machine
from probectl.arch.x86_insn import function_exits
from probectl.debuginfo.elf import ElfFile
from probectl.debuginfo.languages import is_go_program
from tests.helpers import build_fixture, build_go_fixture, fails, missing, probectl

GO_BUILDS = ["", "all=-N -l"]  # the default optimised build, and the unoptimised one


@pytest.fixture(scope="module", params=GO_BUILDS, ids=["optimised", "unoptimised"])
def go_binary(request) -> Path:
    return build_go_fixture("go_target", request.param)


@pytest.fixture(scope="module", params=["x86-64", "arm64"])
def go_binary_of_each_machine(request) -> Path:
    """The optimised build for this machine and for arm64 (Go cross-compiles by itself)."""
    return build_go_fixture("go_target", "", "arm64" if request.param == "arm64" else "")


def objdump_functions(path: Path) -> dict[str, list[tuple[int, str]]]:
    """objdump -d of ``path`` (binutils', or its AArch64 one for an arm64 file): each symbol's
    instructions as (address, text)."""
    arm64 = ElfFile(path).machine == EM_AARCH64
    objdump = shutil.which("aarch64-linux-gnu-objdump" if arm64 else "objdump")
    if not objdump:
        missing("aarch64-linux-gnu-objdump (apt binutils-aarch64-linux-gnu) is not installed" if arm64 else
                "objdump (apt binutils) is not installed")
    out = subprocess.run([objdump, "-d", "-w", "--no-show-raw-insn", str(path)], capture_output=True, text=True,
                         check=True).stdout
    functions: dict[str, list[tuple[int, str]]] = {}
    current: list[tuple[int, str]] = []
    for line in out.splitlines():
        m = re.match(r"([0-9a-f]+) <(.+)>:$", line)
        if m:
            current = functions.setdefault(m.group(2), [])
            continue
        m = re.match(r"\s+([0-9a-f]+):\t(.*)$", line)
        if m:
            current.append((int(m.group(1), 16), m.group(2).strip()))
    return functions


def test_exits_of_every_function_of_a_go_program_match_objdump(go_binary, go_binary_of_each_machine):
    """Every sized function symbol of the program (the runtime's too), x86-64's (decoded) and arm64's
    (read word by word): its returns and its direct jumps out of it are those objdump shows."""
    for binary in {go_binary, go_binary_of_each_machine}:
        check_exits_against_objdump(binary)


def check_exits_against_objdump(binary: Path) -> None:
    elf = ElfFile(binary)
    code_reader = for_machine(elf.machine).code()
    text = elf.section(".text")
    data = elf.section_data(".text")
    listed = objdump_functions(binary)
    checked = 0
    for sym in elf.functions():
        if not sym.size or sym.name not in listed or not text.addr <= sym.value < text.addr + text.size:
            continue
        code = data[sym.value - text.addr:sym.value - text.addr + sym.size]
        exits = code_reader.function_exits(code, sym.value)
        lines = [(a, t) for a, t in listed[sym.name] if a < sym.value + sym.size]
        want_returns = [a for a, t in lines if re.match(r"(rep[z ]\s*)?ret[q]?\b", t)]
        want_out = []
        for a, t in lines:
            m = re.match(r"(?:jmp|b)\s+([0-9a-f]+)\b", t)
            if m and not sym.value <= int(m.group(1), 16) < sym.value + sym.size:
                want_out.append(a)
        assert list(exits.returns) == want_returns, sym.name
        assert list(exits.jumps_out) == want_out, sym.name
        checked += 1
    assert checked > 1000  # (the runtime's functions are in every Go program)


def test_function_exits_by_hand():
    # push %rbp; test %rbx,%rbx; jne +1; ret; jmp rel32 to far away; rep ret; jmp *%rax; ret $8
    code = bytes.fromhex("55" "4885db" "7501" "c3" "e900100000" "f3c3" "ffe0" "c20800")
    exits = function_exits(code, 0x1000)
    assert exits.returns == (0x1000 + 6, 0x1000 + 12, 0x1000 + 16)
    assert exits.jumps_out == (0x1000 + 7,)
    assert exits.indirect_jumps == (0x1000 + 14,)


def test_function_exits_and_go_stack_checks_by_hand():
    from probectl.arch import a64_insn, x86_insn

    def words(*ws: int) -> bytes:
        return b"".join(w.to_bytes(4, "little") for w in ws)

    # ret; b +0x100 (out); br x1; b -4 (inside); retaa
    exits = a64_insn.function_exits(words(0xD65F03C0, 0x14000040, 0xD61F0020, 0x17FFFFFF, 0xD65F0BFF), 0x1000)
    assert exits.returns == (0x1000, 0x1010) and exits.jumps_out == (0x1004,) and exits.indirect_jumps == (0x1008,)
    # ldr x16,[x28,#16]; cmp sp,x16; b.ls +12 (word 5); ret; nop; then the block: mov x3,x30; bl far; b entry
    check = [0xF9400B90, 0xEB3063FF, 0x54000069, 0xD65F03C0, 0xD503201F, 0xAA1E03E3, 0x94001000]
    assert a64_insn.go_stack_check_end(words(*check, 0x17FFFFF9), 0x1000) == 0x100C
    assert a64_insn.go_stack_check_end(words(*check, 0x17FFFFFA), 0x1000) is None  # (back to +4, not the entry)
    assert a64_insn.go_stack_check_end(words(*check[:-1], 0xD503201F, 0x17FFFFF9), 0x1000) is None  # (no call)
    # cmp 0x10(%r14),%rsp; jbe +1 (to the block); ret; block: call rel32; jmp back to the entry
    x86 = bytes.fromhex("493b6610" "7601" "c3" "e800000000" "ebf2")
    assert x86_insn.go_stack_check_end(x86, 0x2000) == 0x2006
    assert x86_insn.go_stack_check_end(x86[:-2] + bytes.fromhex("ebf3"), 0x2000) is None  # (back to +1)
    assert x86_insn.go_stack_check_end(bytes.fromhex("493b6610" "7601" "c3" "90909090" "90" "ebf2"), 0x2000) is None


def test_go_programs_are_told_apart(go_binary):
    assert is_go_program(ElfFile(go_binary))
    assert not is_go_program(ElfFile(build_fixture("uprobe_target")))


def _ret_offsets(binary: Path, function: str) -> list[int]:
    """The file offsets of ``function``'s return instructions, by objdump (the binary is not PIE:
    vaddr - segment vaddr + segment offset)."""
    elf = ElfFile(binary)
    return [elf.vaddr_to_offset(a) for a, t in objdump_functions(binary)[function] if t.startswith("ret")]


def test_return_probes_are_uprobes_on_the_return_instructions(go_binary, go_binary_of_each_machine):
    """On x86-64 the results are in RAX, RBX, ...; on arm64 in R0, R1, ... (Go's register ABI)."""
    for binary in {go_binary, go_binary_of_each_machine}:
        check_return_probes(binary)


def check_return_probes(go_binary: Path) -> None:
    a, b = ("%x0", "%x1") if ElfFile(go_binary).machine == EM_AARCH64 else ("%ax", "%bx")
    out = probectl("add", "-D", "-x", str(go_binary), "gt:w=main.work%return $retval",
                   "gt:dm=main.divmod%return q r", "gt:neg=main.negate%return $retval")
    lines = out.stdout.split()
    defs = [line for line in out.stdout.splitlines() if line]
    assert lines and not any(d.startswith("r:") for d in defs), out.stdout
    by_event: dict[str, list[str]] = {}
    for d in defs:
        kind_event, place, *args = d.split()
        assert kind_event.startswith("p:gt/")
        by_event.setdefault(kind_event[5:], []).append((place, tuple(args)))
    for event, function, args in [("w__return", "main.work", (f"{a}:s64",)),
                                  ("dm__return", "main.divmod", (f"q={a}:s64", f"r={b}:s64")),
                                  ("neg__return", "main.negate", (f"{a}:s32",))]:
        places = by_event[event]
        assert [int(p.rsplit(":0x", 1)[1], 16) for p, _ in places] == _ret_offsets(go_binary, function)
        assert all(a == args for _, a in places)
    assert "not a kernel return probe" in out.stderr


def test_a_c_program_keeps_its_kernel_return_probe():
    binary = build_fixture("uprobe_target")
    out = probectl("add", "-D", "-x", str(binary), "add_ints%return $retval")
    assert out.stdout.startswith("r:"), out.stdout


@pytest.mark.parametrize("definition, message", [
    ("main.pair%return $retval", "the result ~r0 ([2]int) of main.pair is returned on the stack"),
    ("main.ratio%return $retval", "of main.ratio is returned in a floating-point register, which probe events "
                                  "cannot read"),
    ("main.divmod%return a", "'a' is not a result of main.divmod: at a Go return only the results are known "
                             "(results: q, r)"),
    ("main.divmod%return q.x", "main.divmod has no member x"),
    ("main.divmod%return q->x", "only its own members (RESULT.member) can be named"),
    ("main.main%return $retval", "main.main returns nothing"),
    ("main.divmod%return $params", "the arguments and locals are gone there"),
])
def test_what_cannot_be_read_at_a_go_return_is_refused(go_binary, definition, message):
    err = fails("add", "-D", "-x", str(go_binary), definition)
    assert message in err, err
    assert "Hint: " in err


def test_registers_and_the_comm_need_no_results(go_binary):
    out = probectl("add", "-D", "-x", str(go_binary), "main.work%return %bx:u64 $comm")
    assert all(line.split()[2:] == ["%bx:u64", "$comm"] for line in out.stdout.splitlines()), out.stdout



# -- Go names ----------------------------------------------------------------------------------------


def test_go_functions_get_distinct_event_names_from_their_whole_names(go_binary):
    out = probectl("add", "-D", "-x", str(go_binary), "main.(*Server).poll n", "main.(*Server).poll%return $retval",
                   "main.main.func1", "main.work", "main.divmod")
    events = [line.split()[0].split("/")[1] for line in out.stdout.splitlines()]
    assert events == [e for e in ("main_Server_poll", "main_Server_poll__return", "main_main_func1",
                                          "main_work", "main_divmod")]


def after_stack_check(instructions: list[tuple[int, str]], entry: int) -> int:
    """Where objdump shows a Go function's stack-bound check end: after the last conditional jump of
    its first instructions to a block that jumps back to the entry (``jmp ENTRY <FUNC>``) after calling
    runtime.morestack; the entry itself when it has none."""
    at = {address: k for k, (address, _text) in enumerate(instructions)}
    end = entry
    for k, (_address, text) in enumerate(instructions[:8]):
        m = re.match(r"(?:j(?!mp)\w+|b\.\w+)\s+([0-9a-f]+) ", text)
        if not m or int(m.group(1), 16) not in at:
            continue
        block = instructions[at[int(m.group(1), 16)]:]
        end_of_block = next(k for k, (_a, t) in enumerate(block) if re.match(r"(jmp|b|ret)\s", t + " "))
        calls = [t for _a, t in block[:end_of_block] if re.match(r"(call|bl)\s", t)]
        if re.match(rf"(jmp|b)\s+{entry:x} <", block[end_of_block][1]) and any("morestack" in t for t in calls):
            end = instructions[k + 1][0]
    return end


def test_go_entry_probes_equal_perfs_but_for_the_name_and_the_stack_check(go_binary, go_binary_of_each_machine):
    for binary in {go_binary, go_binary_of_each_machine}:
        check_entry_probes_against_perf(binary)


def check_entry_probes_against_perf(go_binary: Path) -> None:
    """perf -D is the oracle of the argument (its event name is cut at the first '.'), and of the place
    but for the stack-bound check, which probectl's entry probe is after (objdump shows where it ends:
    a function that grows its stack starts again at its first byte); a function without one (a leaf,
    main.greet) is probed where perf probes it, and FUNC+0 is the first byte."""
    perf = shutil.which("perf")
    if not perf:
        missing("perf (linux-perf) is not installed")
    listed = objdump_functions(go_binary)
    compared = moved = 0
    for definition in ("main.(*Server).poll n", "main.divmod a b", "main.negate x", "main.work depth",
                       "main.greet s.len", "main.main", "main.work+0 depth"):
        theirs = subprocess.run([perf, "probe", "-x", str(go_binary), "-D", definition], capture_output=True,
                                text=True)
        if theirs.returncode != 0:
            continue
        compared += 1
        ours = probectl("add", "-D", "-x", str(go_binary), definition)
        function = definition.split()[0].split("+")[0]
        entry = min(a for a, _t in listed[function])
        want = entry if "+0" in definition else after_stack_check(listed[function], entry)
        moved += want != entry
        base = ElfFile(go_binary).vaddr_to_offset(entry) - entry  # (the places are file offsets)
        expected = [line.split()[1:] for line in theirs.stdout.splitlines()]
        for line in expected:
            line[0] = line[0].replace(f":0x{entry + base:x}", f":0x{want + base:x}")
        assert [line.split()[1:] for line in ours.stdout.splitlines()] == expected, definition
        assert ("stack-bound check" in ours.stderr) == (want != entry), ours.stderr
    assert compared >= 5 and moved >= 2


def test_functions_go_inlined_are_probed_where_perf_probes_them(go_binary):
    """Go inlines small functions everywhere and refers to their abstract DWARF by section offset
    (DW_FORM_ref_addr): each inline instance is probed, at perf's places (strings.(*Builder).WriteString,
    inlined six times in the optimised build, had none). perf -D of each name is the oracle."""
    from probectl.debuginfo.dwarf import DebugInfo

    perf = shutil.which("perf") or missing("perf (linux-perf) is not installed")
    debuginfo = DebugInfo.open(str(go_binary))
    abstract = sorted(name for name in debuginfo.function_names("strings.*") + debuginfo.function_names("fmt.*")
                      if not ElfFile(go_binary).find_functions(name))
    compared = inlined = 0
    for name in abstract[:25]:
        theirs = subprocess.run([perf, "probe", "-x", str(go_binary), "-D", name], capture_output=True, text=True)
        if theirs.returncode != 0 or not theirs.stdout.strip():
            continue
        ours = probectl("add", "-D", "-x", str(go_binary), name).stdout
        assert sorted(line.split()[1] for line in ours.splitlines()) == \
               sorted(line.split()[1] for line in theirs.stdout.splitlines()), name
        compared += 1
        inlined += len(ours.splitlines())
    if go_binary == build_go_fixture("go_target", ""):  # (optimised: "all=-N -l" inlines nothing)
        assert compared and inlined > compared  # (some inlined more than once)


def test_a_long_qualified_name_is_cut_to_the_kernels_limit_and_stays_apart():
    from probectl.probes.naming import MAX_EVENT_NAME_LEN, qualified_event_name

    base = "github.com/prometheus/client_golang/prometheus.(*counter)."
    a, b = qualified_event_name(base + "AddWithExemplar"), qualified_event_name(base + "Add")
    assert a != b and a.endswith("_counter_AddWithExemplar") and b.endswith("_counter_Add")
    assert all(re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", n) and len(n + "__return_99") < MAX_EVENT_NAME_LEN for n in (a, b))
    assert qualified_event_name(base + "Add") == b  # (stable from run to run)
    assert qualified_event_name("main.(*Server).poll") == "main_Server_poll"


# -- strings and slices: values in several registers (DW_OP_piece) ----------------------------------


def test_members_of_a_string_and_a_slice_are_read_from_their_registers(go_binary):
    """greet(s string, xs []int): s in RAX, RBX, xs in RCX, RDI, RSI (Go's ABI); DWARF says so in
    pieces, which each member is read from."""
    out = probectl("add", "-D", "-x", str(go_binary), "main.greet s.str s.len xs.array xs.len xs.cap")
    (line,) = out.stdout.splitlines()
    fetches = [arg.split("=", 1)[1].split(":")[0] for arg in line.split()[2:]]
    assert fetches == ["%ax", "%bx", "%cx", "%di", "%si"]


def test_strings_and_slices_in_registers_are_their_text_and_elements(go_binary):
    """A Go string (pointer and length in %ax and %bx) is fetched as its text: the bytes from its
    pointer, with its length and first 64 bytes as hidden arguments the decoders cut it with (perf
    prints s=%ax:x64, "cut down to 64 bits"); a slice (%cx, %di, %si) as its first 16 elements, cut
    at its length, or as many as a cast says; an interface stays refused whole
    (tests/live/test_counted_strings.py records what the program prints)."""
    out = probectl("add", "-D", "-x", str(go_binary), "main.greet s xs", "four=main.greet xs:s32[4]")
    (first, second) = out.stdout.splitlines()
    assert first.split()[2:] == ["s=+0(%ax):string", "s__len=%bx:u64", "s__head=+0(%ax):u8[64]", "xs=+0(%cx):s64[16]",
                                 "xs__len=%di:u64"]
    assert second.split()[2:] == ["xs_s32_4_=+0(%cx):s32[4]", "xs_s32_4___len=%di:u64"]
    err = fails("add", "-D", "-x", str(go_binary), "main.greet xs:string")
    assert "cannot fetch 'xs' as a string" in err
    out = probectl("add", "-D", "-x", str(go_binary), "main.greet $params")
    names = [arg.split("=")[0] for arg in out.stdout.split()[2:]]
    assert "s" in names and "xs" in names, out.stdout
    listed = probectl("vars", "-x", str(go_binary), "main.greet").stdout
    assert re.search(r"struct string\ts\b", listed) and re.search(r"struct \[\]int\txs\b", listed), listed


def test_a_slice_of_structs_is_its_length_and_its_first_elements_members(go_binary):
    """spend(items []Item): the length in %bx, each scalar member of the first 4 elements read from the
    array's pointer in %ax at the element's size (16: id at 0, price at 8) as an argument of its own,
    which the decoders show as Go's %+v (tests/live/test_counted_strings.py); a cast is refused."""
    out = probectl("add", "-D", "-x", str(go_binary), "main.spend items").stdout
    args = out.split()[2:]
    assert args[0] == "items=%bx:u64"
    assert args[1:] == [f"items__e{i}_{m}=+{16 * i + off}(%ax):s64" for i in range(4) for m, off in (("id", 0),
                                                                                                     ("price", 8))]
    assert "no cast" in fails("add", "-D", "-x", str(go_binary), "main.spend items:s64[4]")



def test_lines_vars_and_relative_lines_take_go_names(go_binary):
    """perf's grammar reads a name with a '.' as a source file (``lines main.work``, ``main.work:3``:
    "no compilation unit has a source file of that name"); in a Go program it is the function. Go
    1.19's DWARF gives a function no DW_AT_decl_line: line 0 is the line its parameters are declared
    on. The fixture's source is the oracle of the lines, perf -D of the absolute line of the place."""
    source = (Path(__file__).parent.parent / "fixtures" / "go_target.go").read_text().splitlines()
    decl = {name: 1 + next(k for k, line in enumerate(source) if line.startswith(head))
            for name, head in (("main.work", "func work("), ("main.(*Server).poll", "func (s *Server) poll("))}
    for name, line in decl.items():
        listed = probectl("lines", "-x", str(go_binary), name).stdout.splitlines()
        # (a row: the relative line in 7 columns, or blanks for a line without code, 2 spaces, the text)
        assert listed[0].startswith(f"<{name}@") and listed[1][9:] == source[line - 1], listed
        numbered = [(row[:7], row[9:]) for row in listed[1:] if row[:7].strip().isdigit()]
        assert len(numbered) >= 2 and all(source[line + int(n) - 1] == text for n, text in numbered), listed
    perf = shutil.which("perf") or missing("perf (linux-perf) is not installed")
    ours = probectl("add", "-D", "-x", str(go_binary), "main.work:3").stdout.split()[1]
    theirs = subprocess.run([perf, "probe", "-x", str(go_binary), "-D", f"go_target.go:{decl['main.work'] + 3}"],
                            capture_output=True, text=True, check=True).stdout.split()[1]
    assert ours == theirs
    variables = probectl("vars", "-x", str(go_binary), "main.work:2").stdout
    assert variables.startswith("Available variables at main.work:2\n") and "depth" in variables
    # a file is still a file, and a name that is neither says so
    assert probectl("lines", "-x", str(go_binary), f"go_target.go:{decl['main.work']}").stdout.splitlines()[1][9:] \
        == source[decl["main.work"] - 1]
    err = fails("lines", "-x", str(go_binary), "main.nosuch")
    assert "no compilation unit has a source file of that name" in err


def test_generic_functions_are_named_as_go_names_them():
    """Go names an instantiation with its type arguments' shapes in brackets, which a probe point read
    as a glob's character class and matched with nothing; named without them, a generic function or
    method is each of its instantiations. The symbol table is the oracle of the places (objdump of
    where the stack-bound check ends); perf fails on every such name."""
    binary = build_go_fixture("go_generics")
    elf = ElfFile(binary)
    listed = objdump_functions(binary)
    place = {name: elf.vaddr_to_offset(after_stack_check(listed[name], min(a for a, _t in listed[name])))
             for name in ("main.Sum[go.shape.int_0]", "main.Sum[go.shape.float64_0]",
                          "main.(*Stack[go.shape.string_0]).Push")}

    def places(*definitions: str) -> list[tuple[str, int, tuple[str, ...]]]:
        out = probectl("add", "-D", "-x", str(binary), *definitions).stdout.splitlines()
        return [(line.split()[0].split("/")[1], int(line.split()[1].rsplit(":0x", 1)[1], 16), tuple(line.split()[2:]))
                for line in out]

    assert places("main.Sum[go.shape.int_0] xs") == [
        ("main_Sum_go_shape_int_0", place["main.Sum[go.shape.int_0]"], ("xs=+0(%bx):s64[16]", "xs__len=%cx:u64"))]
    assert sorted(places("main.Sum")) == sorted(places("main.Sum[*]")) == sorted(
        [("main_Sum_go_shape_int_0", place["main.Sum[go.shape.int_0]"], ()),
         ("main_Sum_go_shape_float64_0", place["main.Sum[go.shape.float64_0]"], ())])
    # a generic type's method, its string argument (of the string shape) fetched as its text
    ((event, at, args),) = places("main.(*Stack).Push v")
    assert event == "main_Stack_go_shape_string_0_Push" and at == place["main.(*Stack[go.shape.string_0]).Push"]
    assert args[0].endswith(":string") and args[1].startswith("v__len=")
    # one event name, arguments of two types: an event each (the kernel refuses a second type)
    assert [(e, a[0].rsplit(":", 1)[1]) for e, _at, a in places("gg:sum=main.Sum xs")] == \
           [("sum", "x64[16]"), ("sum_1", "s64[16]")]
    # a line of the generic function is a line of each instantiation, each place once
    lines = places("main.Sum:2")
    assert len(lines) == len({at for _e, at, _a in lines}) >= 2
    assert {e for e, _at, _a in lines} == {"main_Sum_go_shape_int_0_L2", "main_Sum_go_shape_float64_0_L2"}
    listing = probectl("lines", "-x", str(binary), "main.Sum").stdout
    assert "<main.Sum[go.shape.int_0]@" in listing and "<main.Sum[go.shape.float64_0]@" in listing
    assert "Go names an instantiation by the shapes of its type arguments: main.Sum[go.shape.float64_0], " \
        "main.Sum[go.shape.int_0] (main.Sum names them all)" in fails("add", "-D", "-x", str(binary), "main.Sum[int]")
