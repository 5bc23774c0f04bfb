"""Differential tests: `probectl add -D` against `perf probe -D` for symbol-level definitions.

Both read the same binaries (fixtures built at test time, and the system libc); each pair of definition
lines must agree in kind, group, event, place and every fetch argument.
"""
from __future__ import annotations

import subprocess
import sys
from dataclasses import replace

import pytest

from probectl.events import EventDefinition

from tests.helpers import build_fixture, probectl

LIBC = "/usr/lib/x86_64-linux-gnu/libc.so.6"

FIXTURE_CASES = [
    "add_ints",
    "add_ints%return",
    "add_ints %di %si",
    "add_ints a=%di:s32 b=%si:s32",
    "add_ints%return $retval",
    "add_ints%return r=$retval:s32",
    "myev=add_ints%return",
    "grp:ev=scale_long %di:s64 %si:s64",
    "sum_record id=+0(%di):s32 value=+8(%di):s64 flags=+16(%di):u16 label=+0(+24(%di)):string",
    "count_char text=+0(%di):string ch=%si:s8",
    "hash_u64 seed=%di:x64",
    "pick_label%return +0($retval):string",
    "bump $comm $stack $stack2 \\12 \\\"imm\"",
    "mix_unsigned bits=%di:u32 arr=+0(%sp):x8[4] bf=+0(%sp):b3@2/32 neg=-8(%sp):s64",
    "sum_record +8(+0(%di)):u64 +u16(%di):x16 g=@+0x10:u32 @0x20",
    "bump c=$comm:string",
]
# Only at -O0 is +4 an instruction boundary in every function (push %rbp; mov %rsp,%rbp).
OFFSET_CASES = ["sum_record+4", "add_ints+4 %di", "add_ints+0x4 %si:s32"]

LIBC_CASES = [
    "malloc",
    "malloc size=%di:u64",
    "malloc%return $retval:x64",
    "free ptr=%di",
    "memcpy",  # an IFUNC with two versions: both are probed
    "memcpy\\@GLIBC_2.2.5",
    "printf fmt=+0(%di):string",
    "free +0(%di):x64",
]


def perf_definitions(perf_bin: str, binary: str, definition: str) -> list[EventDefinition]:
    out = subprocess.run([perf_bin, "probe", "-x", binary, "-D", definition],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    return [EventDefinition.parse(line) for line in out.stdout.splitlines() if line.strip()]


def probectl_definitions(binary: str, definition: str) -> list[EventDefinition]:
    out = probectl("add", "-x", binary, "-D", definition)
    return [EventDefinition.parse(line) for line in out.stdout.splitlines()]


def assert_same(ours: list[EventDefinition], perfs: list[EventDefinition]) -> None:
    """Equal definitions, except one deliberate difference: perf leaves a bare $retval untyped (the
    kernel then reads a u64, so a negative int shows as 0xfffffffe); probectl types it from the
    function's DWARF return type when there is debug info (values checked live)."""
    typed = []
    for o, p in zip(ours, perfs):
        args = tuple(pa if not (pa.fetch == "$retval" and not pa.type and oa.fetch == "$retval" and oa.type)
                     else replace(pa, type=oa.type) for oa, pa in zip(o.args, p.args))
        typed.append(replace(p, args=args))
    assert [d.render() for d in ours] == [d.render() for d in typed] + [d.render() for d in perfs[len(typed):]]


@pytest.mark.perf
@pytest.mark.parametrize("build", [("-O0", True), ("-O2", True), ("-O0", False)],
                         ids=["O0-pie", "O2-pie", "O0-nopie"])
@pytest.mark.parametrize("definition", FIXTURE_CASES + OFFSET_CASES)
def test_fixture_definitions_match_perf(perf_bin, build, definition):
    opt, pie = build
    if definition in OFFSET_CASES and opt != "-O0":
        pytest.skip("offset +4 is an instruction boundary only in -O0 prologues")
    binary = str(build_fixture("uprobe_target", opt, pie=pie))
    assert_same(probectl_definitions(binary, definition), perf_definitions(perf_bin, binary, definition))


@pytest.mark.perf
@pytest.mark.parametrize("definition", LIBC_CASES)
def test_libc_definitions_match_perf(perf_bin, definition):
    assert_same(probectl_definitions(LIBC, definition), perf_definitions(perf_bin, LIBC, definition))


def test_libc_by_short_name_is_the_same_file():
    assert probectl_definitions("libc", "malloc") == probectl_definitions(LIBC, "malloc")


def test_bare_symbol_version_is_accepted():
    """perf needs 'memcpy\\@GLIBC_2.2.5'; probectl also takes the unescaped form."""
    assert probectl_definitions(LIBC, "memcpy@GLIBC_2.2.5") == probectl_definitions(LIBC, "memcpy\\@GLIBC_2.2.5")


def test_global_symbol_fetch_uses_file_offset():
    """perf passes '@sym' through, which uprobes reject; probectl turns it into '@+OFFSET'."""
    from probectl.debuginfo.elf import ElfFile

    binary = build_fixture("uprobe_target", "-O2")
    elf = ElfFile(binary)
    (defn,) = probectl_definitions(str(binary), "add_ints g=@labels:x64")
    sym = [s for s in elf.symbols() if s.name == "labels"][0]
    func = [s for s in elf.functions() if s.name == "add_ints"][0]
    delta = func.value - elf.vaddr_to_offset(func.value)
    assert defn.args[0].fetch == f"@+0x{sym.value - delta:x}"


@pytest.mark.perf
def test_libc_ifunc_return_where_perf_fails(perf_bin):
    """perf 6.1 fails on 'strlen%return' with libc6-dbg installed ("Failed to add events");
    probectl puts the return probe at the same place as perf's entry probe."""
    entry = perf_definitions(perf_bin, LIBC, "strlen")
    (ret,) = probectl_definitions(LIBC, "strlen%return len=$retval:u64")
    assert ret.kind == "r" and ret.place == entry[0].place and ret.event == "strlen__return"


def test_argN_on_uprobe_entry_becomes_abi_register():
    """The kernel refuses $argN on uprobes ("$arg* can be used only on function entry or exit") and perf
    passes it through; probectl maps it to the x86-64 argument register at a function entry."""
    binary = str(build_fixture("uprobe_target", "-O2"))
    (defn,) = probectl_definitions(binary, "bump $arg1 s=$arg2:s32 $arg6")
    assert [a.render() for a in defn.args] == ["%di", "s=%si:s32", "%r9"]


def test_argN_off_entry_is_refused():
    binary = str(build_fixture("uprobe_target", "-O0"))
    for definition in ("bump+4 $arg1", "bump $arg7"):
        out = subprocess.run([sys.executable, "-m", "probectl", "add", "-x", binary, "-D", definition],
                             capture_output=True, text=True)
        assert out.returncode == 1 and "$arg" in out.stderr and "Traceback" not in out.stderr
