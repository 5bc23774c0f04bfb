"""Location expressions, call-frame information and fetch arguments.

Unit tests evaluate hand-assembled DWARF expressions; differential tests compare probectl's
fetch arguments with ``perf probe -D`` on the fixtures at -O0 and -O2. perf reads only the first
operation of a location expression ("TODO: handle more than 1 exprs" in convert_variable_location),
so wherever a location has more than one operation, perf's output is checked to be that first
operation's misreading and ours against the meaning of the whole expression instead.
"""
from __future__ import annotations

import re
import subprocess
from types import SimpleNamespace

import pytest

from probectl.debuginfo.dwarf import lines as L
from probectl.debuginfo.dwarf.cfi import CallFrames, CfaRule
from probectl.debuginfo.elf import ElfFile
from probectl.resolve.dwarf_fetch import expand_variables, fetch_variable
from probectl.debuginfo.dwarf.location import EvalContext, evaluate, expression_at, parse_expression
from probectl.debuginfo.place import Computed, Deref, Memory, Pieces, Reg, Register, Value
from probectl.errors import LocationError
from probectl.resolve.fetch_options import FetchOptions
from probectl.resolve.render import RenderOptions, register_name, render_memory, render_value
from probectl.debuginfo.dwarf.variables import best_scope, find_variable
from probectl.errors import VariableNotFound, VariableUnavailable
from probectl.spec import TypeSpec, Variable, parse_probe

from tests.test_dwarf import (WIDE_LEFT_OUT, fixture_bins, perf_oracle, probe_points, probectl_definitions,  # noqa: F401
                              render)

# The format of the units the hand-assembled expressions are in: 64-bit addresses, 32-bit DWARF 5.
STRUCTS = SimpleNamespace(address_size=8, offset_size=4, version=5)
OPTS = RenderOptions()


def ops(*raw: int):
    return parse_expression(bytes(raw), STRUCTS)


def fetch_of(place, opts=OPTS) -> str:
    if isinstance(place, Memory):
        return render_memory(place.address, opts)
    if isinstance(place, Register):
        return register_name(place.regno)
    return render_value(place.value, opts)


def cfa(reg: int, off: int):
    return lambda: Value(Reg(reg), off)


# --- expressions -------------------------------------------------------------------------------------


def test_register_names():
    assert [register_name(i) for i in (0, 1, 2, 3, 4, 5, 6, 7, 8, 15, 16)] == \
        ["%ax", "%dx", "%cx", "%bx", "%si", "%di", "%bp", "%sp", "%r8", "%r15", "%ip"]
    with pytest.raises(LocationError, match="SSE"):
        register_name(17)


@pytest.mark.parametrize("expr, expected", [
    ((0x55,), "%di"),  # DW_OP_reg5
    ((0x90, 0x0C), "%r12"),  # DW_OP_regx 12
    ((0x75, 0x08), "+8(%di)"),  # DW_OP_breg5 8: the object is in memory at %di+8
    ((0x77, 0x70), "-16(%sp)"),  # DW_OP_breg7 -16
    ((0x75, 0x00, 0x06), "+0(+0(%di))"),  # breg5 0; deref: the object's address is in memory
    ((0x75, 0x10, 0x06, 0x23, 0x08), "+8(+16(%di))"),  # breg5 16; deref; plus_uconst 8
    ((0x75, 0x00, 0x9F), "%di"),  # breg5 0; stack_value: the value is %di
    ((0x74, 0x08, 0x06, 0x9F), "+8(%si)"),  # breg4 8; deref; stack_value: the value is in memory
    ((0x33, 0x9F), "\\3"),  # lit3; stack_value
    ((0x11, 0x7F, 0x9F), "\\-1"),  # consts -1; stack_value
    ((0x9E, 0x04, 0x2A, 0x00, 0x00, 0x00), "\\42"),  # implicit_value 4 bytes
    ((0x50, 0x93, 0x08), "%ax"),  # reg0; piece 8 covering the whole 8-byte object
])
def test_expressions_the_kernel_can_read(expr, expected):
    place = evaluate(ops(*expr), EvalContext(object_size=8))
    assert fetch_of(place) == expected


def test_frame_base_from_cfa():
    # DW_OP_fbreg -20 under DW_AT_frame_base DW_OP_call_frame_cfa, with CFA = %sp+8 (at entry)
    # and CFA = %bp+16 (after push %rbp; mov %rsp,%rbp).
    for rule, expected in ((cfa(7, 8), "-12(%sp)"), (cfa(6, 16), "-4(%bp)")):
        base = evaluate(ops(0x9C), EvalContext(cfa=rule)).address
        place = evaluate(ops(0x91, 0x6C), EvalContext(frame_base=lambda b=base: b))
        assert fetch_of(place) == expected
    # A VLA at -O0: fbreg -48; deref.
    base = Value(Reg(6), 16)
    place = evaluate(ops(0x91, 0x50, 0x06), EvalContext(frame_base=lambda: base))
    assert fetch_of(place) == "+0(-32(%bp))"


def test_truncation_idioms_are_values_of_fewer_bits():
    # breg3 0; const1u 32; shl; const1u 32; shra; stack_value: (long)(int)%rbx
    place = evaluate(ops(0x73, 0x00, 0x08, 0x20, 0x24, 0x08, 0x20, 0x26, 0x9F), EvalContext())
    assert isinstance(place, Computed) and place.value == Value(Reg(3), 0, 32, True)
    assert render_value(place.value, OPTS) == "%bx"
    # breg0 0; const1u 0xff; and; stack_value: the low byte of %rax, zero-extended
    place = evaluate(ops(0x70, 0x00, 0x08, 0xFF, 0x1A, 0x9F), EvalContext())
    assert place.value == Value(Reg(0), 0, 8, False)


def test_entry_values_only_at_the_entry():
    expr = ops(0xA3, 0x01, 0x55, 0x9F)  # entry_value(reg5); stack_value
    assert fetch_of(evaluate(expr, EvalContext(at_entry=True))) == "%di"
    with pytest.raises(LocationError) as exc:
        evaluate(expr, EvalContext(at_entry=False))
    assert exc.value.reason == "entry_value" and "DW_OP_entry_value" in exc.value.message


@pytest.mark.parametrize("expr, reason", [
    ((0x75, 0x08, 0x9F), "computed"),  # breg5 8; stack_value: %di+8 is not a fetchable value
    ((0x77, 0x03, 0x09, 0xFC, 0x1A), "computed"),  # breg7 3; const1s -4; and (a VLA's aligned address)
    ((0x73, 0x00, 0x70, 0x00, 0x22, 0x9F), "computed"),  # breg3 0; breg0 0; plus; stack_value
    ((0x50, 0x93, 0x04, 0x51, 0x93, 0x04), "piece"),  # reg0; piece 4; reg1; piece 4
    ((0xF2, 0, 0, 0, 0, 0x00), "implicit_pointer"),  # GNU_implicit_pointer
    ((0x0E, 0, 0, 0, 0, 0, 0, 0, 0, 0xE0), "tls"),  # const8u; GNU_push_tls_address
    ((), "empty"),
])
def test_expressions_the_kernel_cannot_read(expr, reason):
    with pytest.raises(LocationError) as exc:
        fetch_of(evaluate(ops(*expr), EvalContext(object_size=8)))
    assert exc.value.reason == reason


def test_whole_eight_byte_pieces_are_pieces():
    """A Go string's location at entry (reg0; piece 8; reg3; piece 8), and a piece on the stack."""
    place = evaluate(ops(0x50, 0x93, 0x08, 0x53, 0x93, 0x08), EvalContext(object_size=16))
    assert place == Pieces((Value(Reg(0)), Value(Reg(3))))
    place = evaluate(ops(0x50, 0x93, 0x08, 0x77, 0x10, 0x93, 0x08), EvalContext(object_size=16))
    assert place == Pieces((Value(Reg(0)), Value(Deref(Value(Reg(7), 16)))))
    for refused in [(0x50, 0x93, 0x08, 0x93, 0x08),  # a piece with no location (optimized out)
                    (0x50, 0x93, 0x08, 0x53, 0x93, 0x08, 0x51)]:  # operations after the last piece
        with pytest.raises(LocationError) as exc:
            evaluate(ops(*refused), EvalContext(object_size=16))
        assert exc.value.reason == "piece"


def test_globals_in_kprobe_and_uprobe_syntax():
    place = evaluate(ops(0x03, 0x10, 0x40, 0, 0, 0, 0, 0, 0), EvalContext(symbol_name="counter"))
    assert fetch_of(place) == "@counter+0"
    assert fetch_of(place, RenderOptions(symbol_base=0)) == "@+0x4010"
    deref = Memory(Value(__import__("probectl.debuginfo.place", fromlist=["Deref"]).Deref(place.address), 8))
    assert fetch_of(deref) == "+8(@counter+0)"


# --- call frames ---------------------------------------------------------------------------------------


def _readelf_cfa(binary) -> list[tuple[int, int, CfaRule]]:
    """(pc, end, rule) rows of `readelf --debug-dump=frames-interp`, for register+offset CFAs."""
    out = subprocess.run(["readelf", "--debug-dump=frames-interp", str(binary)], capture_output=True,
                         text=True).stdout
    regs = {"rax": 0, "rdx": 1, "rcx": 2, "rbx": 3, "rsi": 4, "rdi": 5, "rbp": 6, "rsp": 7}
    rows = []
    end = 0
    in_fde = False
    for line in out.splitlines():
        m = re.search(r"FDE .* pc=([0-9a-f]+)\.\.([0-9a-f]+)", line)
        if m:
            end = int(m.group(2), 16)
            in_fde = True
            continue
        if " CIE" in line or "ZERO terminator" in line:
            in_fde = False
        m = re.match(r"^([0-9a-f]{16}) (r[a-z0-9]+)([+-]\d+)", line)
        if in_fde and m and m.group(2) in regs:
            rows.append((int(m.group(1), 16), end, CfaRule(regs[m.group(2)], int(m.group(3)))))
    return rows


@pytest.mark.parametrize("opt", ["-O0", "-O2"])
def test_cfa_rules_match_readelf(fixture_bins, opt):
    binary = fixture_bins.path("dwarf_structs", opt)
    rows = _readelf_cfa(binary)
    assert len(rows) > 10
    frames = CallFrames.from_sections(ElfFile(binary), None)
    for i, (pc, end, rule) in enumerate(rows):
        assert frames.cfa_at(pc) == rule, hex(pc)
        # and at the row's last byte, where it still holds (before the next row of its FDE: rows
        # whose CFA is an expression are not listed, so the last listed one may not hold to the end)
        if i + 1 < len(rows) and rows[i + 1][1] == end:
            last = rows[i + 1][0] - 1
            assert frames.cfa_at(last) == rule, hex(last)
    assert frames.cfa_at(0) is None


@pytest.mark.parametrize("opt", ["-O0", "-O2"])
def test_debug_frame_cfa_rules_match_readelf(tmp_path, monkeypatch, opt):
    """Without .eh_frame for them (as in a vmlinux) the FDEs come from .debug_frame through its index by
    address: scanned the first time, read back from the cache the second; readelf agrees both times."""
    from tests.helpers import build_fixture
    from probectl.debuginfo.dwarf import cfi

    binary = build_fixture("dwarf_structs", opt, ("-fno-asynchronous-unwind-tables", "-fno-unwind-tables"))
    assert ElfFile(binary).section(".debug_frame") is not None  # (.eh_frame only has crt's _start)
    rows = _readelf_cfa(binary)
    assert len(rows) > 10
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    scans = []
    real_scan = cfi._scan_debug_frame
    monkeypatch.setattr(cfi, "_scan_debug_frame", lambda *a: scans.append(1) or real_scan(*a))
    debug_frame = ElfFile(binary).section_data(".debug_frame")
    for run in range(3):
        # (the .debug_frame given as a separate debug file's would be)
        frames = CallFrames.from_sections(ElfFile(binary), debug_frame, index_key=f"test-{opt}")
        for pc, end, rule in rows:
            assert frames.cfa_at(pc) == rule, hex(pc)
        assert frames.cfa_at(0) is None
        assert len(scans) == 1  # the second run read the index from the cache
    assert list((tmp_path / "probectl").glob("cfi-fdes-*"))


# --- fetch arguments against perf -----------------------------------------------------------------------

# Definitions whose every argument perf converts correctly (single-operation locations).
AGREEING = {
    "dwarf_structs": [
        "paint w scale w->id w->depth w->corner->y w->name w->label:string w->name:string w->pts[1].y "
        "w->u.ival w->u.bytes[2] w->tag w->cookie w->hi w->values[3]:x w->corner[0].y w->mode w->level "
        "w->size w->serial w->sc w->uc w->ok w->ratio w->cv w->raw w->raw[1] w->origin w->next->name:string "
        "scale:u8 scale:x scale:s s=scale",
        "use_globals add counter big_counter hidden greeting greeting:string gbuf gbuf:string "
        "global_widget.id global_widget.name:string gptr->x",
        "check_bits pb fl pb->head",
        "by_value m wv.id wv.origin.y",
    ],
    "dwarf_inline": ["process data n", "rare_path code why:string code:x"],
}


BUILDS = [("-O0", ()), ("-O2", ()), ("-O2", ("-gdwarf-4",))]
BUILD_IDS = ["O0", "O2", "O2-dwarf4"]


@pytest.mark.perf
@pytest.mark.parametrize("opt, extra", BUILDS, ids=BUILD_IDS)
@pytest.mark.parametrize("fixture", sorted(AGREEING))
def test_fetch_arguments_match_perf(fixture_bins, perf_oracle, fixture, opt, extra):
    binary = fixture_bins.path(fixture, opt, extra)
    di = fixture_bins.di(fixture, opt, extra)
    compared = 0
    for definition in AGREEING[fixture]:
        theirs, err = perf_oracle.definitions(binary, definition)
        if not theirs and "Failed to find symbol" in err:
            continue  # perf cannot handle a function with a .cold part (rare_path at -O2)
        assert theirs, (definition, err)
        assert render(probectl_definitions(di, binary, definition)) == render(theirs), definition
        compared += 1
    assert compared


def _first_op_only(di, scope, address, name) -> bool:
    """True if perf's reading of ``name`` at ``address`` is the misreading of a multi-operation
    location (or a constant perf does not support): the only allowed reasons to differ."""
    var = find_variable(di, name, address, scope).die
    expr = expression_at(di, var, address)
    return expr is not None and (len(expr) > 1 or expr[0].op_name.startswith(("DW_OP_lit", "DW_OP_const")))


@pytest.mark.perf
@pytest.mark.parametrize("opt, extra", BUILDS, ids=BUILD_IDS)
@pytest.mark.parametrize("fixture", ["dwarf_structs", "dwarf_inline", "dwarf_static"])
def test_vars_at_every_line_match_perf_or_perf_misreads(fixture_bins, perf_oracle, fixture, opt, extra):
    """$vars at every probe-able line: the same arguments as perf, except where perf converted
    (or dropped) a variable whose location has several operations. The DWARF 4 build reads
    location lists from .debug_loc instead of .debug_loclists."""
    binary = fixture_bins.path(fixture, opt, extra)
    di = fixture_bins.di(fixture, opt, extra)
    elf = ElfFile(binary)
    same = differ = 0
    for name in sorted(di.name_index()):
        fns = di.find_functions(name)
        if len(fns) != 1 or not fns[0].ranges:
            continue
        fn = fns[0]
        for ln in L.probeable_lines(di, fn):
            rln = ln - fn.decl_line
            point = f"{name}:{rln}" if rln else name
            theirs, err = perf_oracle.definitions(binary, point + " $vars")
            try:
                points = probe_points(di, point)
            except L.LineSharedError:
                assert "sharing the address" in err or "Failed to find symbol" in err, err
                continue
            if not theirs:
                # perf gives up on the whole probe when one variable fails (an unnamed
                # artificial variable, a .cold function); nothing to compare.
                assert "Failed" in err or "Error" in err, err
                continue
            assert [off for off, _ in theirs] == [elf.vaddr_to_offset(a) for a, _ in points], point
            mine = probectl_definitions(di, binary, point + " $vars")
            for (address, scope), (_, margs), (_, pargs) in zip(points, mine, theirs):
                m = {a.name: a for a in margs}
                p = {a.name: a for a in pargs}
                for var in set(m) | set(p):
                    if m.get(var) == p.get(var):
                        same += 1
                        continue
                    if var in m and m[var].fetch == WIDE_LEFT_OUT:  # a struct probectl refuses to cut
                        assert p.get(var) is not None and p[var].type == "x64", (point, var, p.get(var))
                        continue
                    differ += 1
                    assert _first_op_only(di, scope, address, var), (point, var, m.get(var), p.get(var))
    # (545, 171, 134, 24, 11, 1 agreeing arguments with gcc 12; 24 VLA misreadings at -O0)
    assert same >= 1


@pytest.mark.perf
def test_vla_is_read_through_its_pointer(fixture_bins, perf_oracle):
    """A VLA lives at DW_OP_fbreg N; DW_OP_deref: perf reads the frame slot holding the array's
    address as if it were the array (``arr=-48(%bp)``); the elements are behind it."""
    binary = fixture_bins.path("dwarf_structs", "-O0")
    di = fixture_bins.di("dwarf_structs", "-O0")
    theirs, _ = perf_oracle.definitions(binary, "vla_sum:9 arr arr[1]")
    (_, (parr, pelem)) = theirs[0]
    slot = parr.fetch
    (address, scope) = probe_points(di, "vla_sum:9")[0]
    # "+4(-48(%bp))": read the pointer at %bp-48, add 4, read the element.
    assert fetch_variable(di, scope, address, Variable("arr")).fetch == f"+0({slot})"
    r = fetch_variable(di, scope, address, parse_probe("x arr[1]").args[0].expr)
    assert (r.fetch, r.type) == (f"+4({slot})", "s32")
    assert pelem.fetch == f"{int(slot.split('(')[0]) + 4}({slot.split('(', 1)[1]}"  # perf: the slot + 4


def test_truncated_register_value(fixture_bins):
    """gcc describes ``long total`` holding an int as %rbx sign-extended from 32 bits; perf
    reads memory at %rbx (``+0(%bx):s64``); the value is %bx read as s32."""
    di = fixture_bins.di("dwarf_structs", "-O2")
    (fn,) = di.find_functions("main")
    for ln in L.probeable_lines(di, fn):
        try:
            points = L.function_line(di, fn, ln - fn.decl_line)
        except L.LineSharedError:
            continue
        for p in points:
            scope = best_scope(di, p.address, function="main")
            try:
                var = find_variable(di, "total", p.address, scope).die
            except VariableNotFound:
                continue
            expr = expression_at(di, var, p.address)
            if expr and [o.op_name for o in expr][1:] == ["DW_OP_const1u", "DW_OP_shl", "DW_OP_const1u",
                                                          "DW_OP_shra", "DW_OP_stack_value"]:
                r = fetch_variable(di, scope, p.address, Variable("total"))
                assert r.fetch == register_name(expr[0].op - 0x70) and r.type == "s32" and r.c_type == "long int"
                return
    pytest.skip("gcc did not emit the sign-extension idiom for 'total'")


def test_struct_in_a_register(fixture_bins):
    """A struct passed by value in %rdi: perf says "Structure on a register is not supported
    yet."; its members are bit ranges of the register."""
    di = fixture_bins.di("dwarf_structs", "-O2")
    (fn,) = di.find_functions("by_value")
    r = {m: fetch_variable(di, fn, fn.entry, parse_probe(f"x p.{m}").args[0].expr) for m in "xy"}
    assert (r["x"].fetch, r["x"].type, r["x"].signed) == ("%di", "s32", True)
    assert (r["y"].fetch, r["y"].type) == ("%di", "b32@32/64")


def test_optimized_out_variable_says_where_it_is_available(fixture_bins):
    di = fixture_bins.di("dwarf_structs", "-O2")
    (fn,) = di.find_functions("paint")
    with pytest.raises(VariableUnavailable) as exc:
        fetch_variable(di, fn, fn.entry, Variable("area"))
    err = exc.value
    assert err.name == "area" and err.reason == "optimized_out" and err.ranges and err.lines
    assert "optimized out" in err.message and "dwarf_structs.c:" in err.hint
    # ... and at the first of those lines it can be fetched.
    fname, line = err.lines[0]
    (point,) = [p for p in L.function_line(di, fn, line - fn.decl_line)][:1]
    assert fetch_variable(di, fn, point.address, Variable("area")).type == "s32"


def test_unknown_variable(fixture_bins):
    di = fixture_bins.di("dwarf_structs", "-O0")
    (fn,) = di.find_functions("paint")
    with pytest.raises(VariableNotFound, match="no variable 'nosuch' in paint"):
        fetch_variable(di, fn, fn.entry, Variable("nosuch"))


def test_globals_in_uprobe_syntax(fixture_bins):
    binary = fixture_bins.path("dwarf_structs", "-O2")
    di = fixture_bins.di("dwarf_structs", "-O2")
    elf = ElfFile(binary)
    text = next(s for s in elf.segments if s.executable)
    base = text.vaddr - text.offset
    (fn,) = di.find_functions("use_globals")
    counter = next(s for s in elf.symbols() if s.name == "counter")
    r = fetch_variable(di, fn, fn.entry, Variable("counter"), symbol_base=base)
    assert r.fetch == f"@+0x{counter.value - base:x}" and r.type == "s32"
    r = fetch_variable(di, fn, fn.entry, Variable("greeting"), TypeSpec("string"), symbol_base=base)
    greeting = next(s for s in elf.symbols() if s.name == "greeting")
    assert r.fetch == f"+0(@+0x{greeting.value - base:x})" and r.default_name == "greeting_string"


@pytest.mark.perf
@pytest.mark.parametrize("opt", ["-O0", "-O2"])
def test_params_match_perf(fixture_bins, perf_oracle, opt):
    binary = fixture_bins.path("dwarf_structs", opt)
    di = fixture_bins.di("dwarf_structs", opt)
    for name in ("paint", "check_bits", "use_globals", "vla_sum"):
        theirs, err = perf_oracle.definitions(binary, f"{name} $params")
        assert render(probectl_definitions(di, binary, f"{name} $params")) == render(theirs), err
    (fn,) = di.find_functions("paint")
    assert expand_variables(di, fn, fn.entry, params_only=True) == ["w", "scale"]


def test_user_memory_dereferences(fixture_bins):
    """kprobe ``@user``: every read through a pointer is a user-memory read (``+u``), the
    register or stack holding the first pointer is not."""
    di = fixture_bins.di("dwarf_structs", "-O2")
    (fn,) = di.find_functions("paint")
    r = fetch_variable(di, fn, fn.entry, parse_probe("x w->corner->y").args[0].expr, user_access=True)
    assert r.fetch == "+u4(+u40(%di))"
    r = fetch_variable(di, fn, fn.entry, parse_probe("x w->label").args[0].expr, TypeSpec("string"),
                       user_access=True)
    assert r.fetch == "+u0(+u24(%di))"
    di0 = fixture_bins.di("dwarf_structs", "-O0")
    (fn0,) = di0.find_functions("paint")
    address = probe_points(di0, "paint")[0][0]
    r = fetch_variable(di0, fn0, address, parse_probe("x w->id").args[0].expr, user_access=True)
    assert r.fetch == "+u0(-40(%bp))"


CONSTANTS_C = """
volatile int sink;
__attribute__((noinline)) int f(int x)
{
	const int k = 42;
	int target = x * 3;
	int *p = &target;
	sink = x + k;
	sink = *p;
	return x;
}
int main(int argc, char **argv) { return f(argc); }
"""


@pytest.fixture(scope="module")
def constants_binary(tmp_path_factory):
    d = tmp_path_factory.mktemp("constants")
    (d / "constants.c").write_text(CONSTANTS_C)
    subprocess.run(["gcc", "-O2", "-g", "-o", str(d / "constants"), str(d / "constants.c")], check=True)
    return d / "constants"


@pytest.mark.perf
def test_constant_values_and_implicit_pointers(constants_binary, perf_oracle):
    from probectl.debuginfo.dwarf import DebugInfo

    di = DebugInfo(constants_binary)
    (fn,) = di.find_functions("f")
    theirs, err = perf_oracle.definitions(constants_binary, "f k x")
    assert render(probectl_definitions(di, constants_binary, "f k x")) == render(theirs), err
    with pytest.raises(VariableUnavailable, match="immediate"):
        fetch_variable(di, fn, fn.entry, Variable("k"), options=FetchOptions(immediates=False))
    # p = &target with target kept only in a register: DW_OP_implicit_pointer. perf: "Sorry, we
    # don't support this variable location yet."; we say why.
    from probectl.debuginfo.dwarf.location import location_entries

    address = location_entries(di, find_variable(di, "p", fn.entry, fn.die).die)[0].low
    with pytest.raises(VariableUnavailable) as exc:
        fetch_variable(di, fn, address, Variable("p"))
    assert exc.value.reason == "implicit_pointer" and "optimized out" in exc.value.message
    _, err = perf_oracle.definitions(constants_binary, f"f+{address - fn.entry} p")
    assert "don't support this variable location" in err
