"""SDT (USDT) probes: notes read from fixtures built with <sys/sdt.h>, checked against readelf (the notes),
perf probe -D (places and arguments, where perf handles them); the programs' own values (live uprobes,
semaphores set through the kernel's reference counter) are checked in tests/live/test_sdt.py.

The fixture is usdt_target + libusdt_lib.so (fixtures/usdt_*.c): register, memory, constant, RIP-relative
and index-register operands, signed and unsigned sizes, semaphores in the program and in the library.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import struct
import subprocess
from pathlib import Path

import pytest

from tests.helpers import build_usdt, missing, probectl

from probectl.debuginfo.elf import ElfFile
from probectl.debuginfo.sdt import SdtOperand, parse_operand, read_sdt_notes
from probectl.errors import DebugInfoError


def readelf_notes(path: Path) -> list[tuple[str, str, int, int, str]]:
    """(provider, name, pc, semaphore, arguments) of every SDT note, as binutils' readelf -n prints them."""
    text = subprocess.run(["readelf", "-n", str(path)], capture_output=True, text=True, check=True).stdout
    notes = []
    for m in re.finditer(r"Provider: (\S+)\n\s+Name: (\S+)\n\s+Location: (0x[0-9a-f]+), Base: 0x[0-9a-f]+, "
                         r"Semaphore: (0x[0-9a-f]+)\n\s+Arguments: ?(.*)", text):
        notes.append((m.group(1), m.group(2), int(m.group(3), 16), int(m.group(4), 16), m.group(5).strip()))
    return notes


def note_tuples(path: Path) -> list[tuple[str, str, int, int, str]]:
    with ElfFile(path) as elf:
        return [(n.provider, n.name, n.address, n.semaphore, n.arguments) for n in read_sdt_notes(elf)]


@pytest.fixture(scope="module")
def usdt():
    return build_usdt()


# -- notes -----------------------------------------------------------------------------------------

def test_notes_are_what_readelf_shows(usdt):
    for path in usdt:
        assert note_tuples(path) == readelf_notes(path)
    names = {n[1]: n for n in note_tuples(usdt[0])}
    assert names["guarded"][3] != 0 and names["regs"][3] == 0


@pytest.mark.parametrize("path", ["/usr/bin/python3.11", "/lib/x86_64-linux-gnu/libstdc++.so.6",
                                  "/lib/x86_64-linux-gnu/libc.so.6"])
def test_system_files_notes_are_what_readelf_shows(path):
    """Debian 12's python3.11 (semaphores) and libstdc++ carry notes; its libc6 carries none (then: none)."""
    if not os.path.exists(path):
        pytest.skip(f"{path} is not installed")
    assert note_tuples(Path(path)) == readelf_notes(Path(path))


def test_prelinked_notes_move_with_stapsdt_base(usdt, tmp_path):
    """A file whose .stapsdt.base moved after linking (what prelink does) has its pcs and semaphores moved
    by the same amount: the copy here gets its section header's sh_addr moved by 0x1000."""
    copy = tmp_path / "prelinked"
    shutil.copy(usdt[0], copy)
    with ElfFile(copy) as elf:
        index = elf.section(".stapsdt.base").index
    data = bytearray(copy.read_bytes())
    (shoff,) = struct.unpack_from("<Q", data, 0x28)  # e_shoff of the ELF64 header
    field = shoff + index * 64 + 16  # sh_addr of that Elf64_Shdr
    (addr,) = struct.unpack_from("<Q", data, field)
    struct.pack_into("<Q", data, field, addr + 0x1000)
    copy.write_bytes(bytes(data))
    moved = note_tuples(copy)
    for (prov, name, pc, sem, args), new in zip(note_tuples(usdt[0]), moved):
        assert new == (prov, name, pc + 0x1000, sem + 0x1000 if sem else 0, args)


@pytest.mark.parametrize("text,expected", [
    ("-4@%esi", SdtOperand("-4@%esi", "register", 4, True, register="esi")),
    ("8@-8(%rbp)", SdtOperand("8@-8(%rbp)", "memory", 8, False, displacement=-8, base="rbp")),
    ("-4@$5", SdtOperand("-4@$5", "immediate", 4, True, value=5)),
    ("8@foo(%rip)", SdtOperand("8@foo(%rip)", "memory", 8, False, symbol="foo", base="rip")),
    ("8@foo+16(%rip)", SdtOperand("8@foo+16(%rip)", "memory", 8, False, displacement=16, symbol="foo", base="rip")),
    ("1@-96(%rbp,%rax,8)", SdtOperand("1@-96(%rbp,%rax,8)", "memory", 1, False, displacement=-96, base="rbp",
                                      index="rax", scale=8)),
    ("%rdi", SdtOperand("%rdi", "register", None, False, register="rdi")),
])
def test_operands(text, expected):
    assert parse_operand(text) == expected


def test_bad_operand_is_a_clear_error():
    with pytest.raises(DebugInfoError, match="not x86-64 assembler syntax"):
        parse_operand("4@[sp, 8]")


# -- definitions: perf probe -D is the oracle ------------------------------------------------------

@pytest.fixture(scope="module")
def perf_home(tmp_path_factory, usdt):
    """A private HOME whose ~/.debug build-id cache holds the fixtures (perf finds SDT notes only there)."""
    perf = shutil.which("perf")
    if not perf or subprocess.run([perf, "probe", "-h"], capture_output=True).returncode not in (0, 129):
        missing("perf (apt linux-perf) is not installed")
    home = tmp_path_factory.mktemp("perfhome")
    return home


def perf_definitions(home: Path, binary: Path, probe: str) -> list[str]:
    env = dict(os.environ, HOME=str(home))
    subprocess.run(["perf", "buildid-cache", "--add", str(binary)], env=env, check=True, capture_output=True)
    out = subprocess.run(["perf", "probe", "-x", str(binary), "-D", probe], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip().splitlines()


def probectl_definitions(binary: Path, probe: str) -> list[str]:
    return probectl("add", "-x", str(binary), "-D", probe).stdout.strip().splitlines()


@pytest.mark.parametrize("which,probe", [
    (0, "sdt_probectl:regs"), (0, "sdt_probectl:mem"), (0, "%sdt_probectl:guarded"), (0, "sdt_probectl:inlined"),
    (1, "sdt_probectl_lib:call"), (1, "sdt_probectl_lib:guarded"),
])
def test_definitions_equal_perfs(usdt, perf_home, which, probe):
    """Registers, stack memory, signed and unsigned sizes, semaphores as (REF_CTR_OFFSET), one name at two
    places: the same text."""
    assert probectl_definitions(usdt[which], probe) == perf_definitions(perf_home, usdt[which], probe)


@pytest.mark.parametrize("probe", ["sdt_probectl:constant", "sdt_probectl:global"])
def test_places_equal_perfs_where_perf_drops_the_arguments(usdt, perf_home, probe):
    """perf leaves out every argument of a probe with a constant or RIP-relative operand; the place is the
    same, and probectl fetches them (their values are checked live below)."""
    (ours,) = probectl_definitions(usdt[0], probe)
    (perfs,) = perf_definitions(perf_home, usdt[0], probe)
    assert ours.startswith(perfs + " arg1=")
    assert ours.split()[2:] == {"sdt_probectl:constant": ["arg1=\\5:s32", "arg2=\\-9:s32"]}.get(
        probe, ours.split()[2:])
    if probe == "sdt_probectl:global":
        assert re.fullmatch(r"arg1=@\+0x[0-9a-f]+:s64", ours.split()[2])


@pytest.mark.parametrize("path,probe", [("/lib/x86_64-linux-gnu/libstdc++.so.6", "sdt_libstdcxx:throw"),
                                        ("/lib/x86_64-linux-gnu/libstdc++.so.6", "sdt_libstdcxx:catch"),
                                        ("/usr/bin/python3.11", "sdt_python:gc__start"),
                                        ("/usr/bin/python3.11", "sdt_python:function__entry")])
def test_system_libraries_definitions_equal_perfs(perf_home, path, probe):
    if not os.path.exists(path):
        pytest.skip(f"{path} is not installed")
    assert probectl_definitions(Path(path), probe) == perf_definitions(perf_home, Path(path), probe)


def test_globs_named_arguments_and_casts(usdt):
    defs = probectl_definitions(usdt[0], "%probectl:[rm]e* arg2 low=arg1:x8")
    assert [d.split()[0] for d in defs] == ["p:sdt_probectl/regs", "p:sdt_probectl/mem"]
    assert defs[0].split()[2:] == ["arg2=%ax:u64", "low=%dx:x8"]
    assert defs[1].split()[2:] == ["arg2=-3(%bp):u8", "low=-2(%bp):x8"]
    named = probectl_definitions(usdt[0], "marks=%probectl:regs")
    assert named[0].startswith("p:sdt_probectl/marks ")


def test_errors(usdt):
    cases = [
        (["sdt_probectl:indexed arg1"], "cannot add an index register to a base"),
        (["sdt_probectl:regs arg3"], "sdt_probectl:regs has 2 argument(s), not arg3"),
        (["sdt_probectl:regz"], "did you mean"),
        (["sdt_probectl:regs %di"], "the arguments of an SDT probe are arg1, arg2"),
    ]
    for args, message in cases:
        out = probectl("add", "-x", str(usdt[0]), "-D", *args, check=False)
        assert out.returncode == 1 and out.stderr.startswith("Error: ") and "Traceback" not in out.stderr, out.stderr
        assert message in out.stderr, out.stderr
    whole = probectl("add", "-x", str(usdt[0]), "-D", "sdt_probectl:*")
    assert "sdt_probectl/indexed" in whole.stdout and "that argument is left out" in whole.stderr
    none = probectl("add", "-x", "/bin/true", "-D", "sdt_x:y", check=False)
    assert none.returncode == 1 and "has no SDT probes" in none.stderr
    kernel = probectl("add", "-D", "%probectl:regs", check=False)
    assert kernel.returncode == 1 and "give the binary with -x BINARY" in kernel.stderr


# -- listing ---------------------------------------------------------------------------------------

def test_funcs_sdt(usdt):
    lines = probectl("funcs", "--sdt", "-x", str(usdt[0])).stdout.splitlines()
    assert lines == ["sdt_probectl:regs", "sdt_probectl:mem", "sdt_probectl:constant", "sdt_probectl:global",
                     "sdt_probectl:inlined", "sdt_probectl:indexed", "sdt_probectl:guarded [semaphore]"]
    rows = json.loads(probectl("funcs", "--sdt", "--json", "-x", str(usdt[1]), "*:call").stdout)
    assert [(r["provider"], r["name"], r["arguments"]) for r in rows] == [("probectl_lib", "call",
                                                                          ["-4@%eax", "2@-2(%rbp)"])]
    inlined = json.loads(probectl("funcs", "--sdt", "--json", "-x", str(usdt[0]), "probectl:inlined").stdout)
    assert inlined[0]["addresses"] == [n[2] for n in readelf_notes(usdt[0]) if n[1] == "inlined"]
    assert len(inlined) == 1 and len(inlined[0]["addresses"]) == 2
    none = probectl("funcs", "--sdt", "-x", str(usdt[0]), "nothing*", check=False)
    assert none.returncode == 1 and "no SDT probe in" in none.stderr


def test_funcs_sdt_of_a_process_lists_every_mapped_file(usdt):
    proc = subprocess.Popen([str(usdt[0]), "--wait", "1"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().startswith("READY")
        lines = probectl("funcs", "--sdt", "-p", str(proc.pid)).stdout.splitlines()
    finally:
        proc.communicate("\n")
    assert f"{usdt[0]} sdt_probectl:regs" in lines
    assert f"{usdt[1]} sdt_probectl_lib:guarded [semaphore]" in lines
    gone = probectl("funcs", "--sdt", "-p", str(proc.pid), check=False)
    assert gone.returncode == 1 and f"there is no process {proc.pid}" in gone.stderr


def test_kernels_without_ref_ctr_or_immediates(usdt):
    """What an older kernel's tracefs README lacks (FetchOptions from it): a semaphore probe is an error,
    a constant operand is left out of an all-arguments probe and an error when asked for."""
    from probectl.errors import ResolveError
    from probectl.resolve import Resolver
    from probectl.resolve.fetch_options import FetchOptions
    from probectl.spec import parse_probe
    from probectl.target import Target

    old = Resolver(Target(kind="uprobe", path=usdt[0]), FetchOptions(ref_ctr=False, immediates=False))
    with pytest.raises(ResolveError, match="no reference counter"):
        old.resolve(parse_probe("sdt_probectl:guarded"))
    (point,) = old.resolve(parse_probe("sdt_probectl:constant"))
    assert point.args == () and "take no immediate values" in old.warnings[0]
    with pytest.raises(ResolveError, match="take no immediate values"):
        old.resolve(parse_probe("sdt_probectl:constant arg2"))


def test_a_stripped_binary_takes_its_globals_from_its_debug_file(usdt, tmp_path):
    """Notes survive strip, the symbol of a RIP-relative operand does not: it comes from the debug file
    (here found through .gnu_debuglink next to the binary)."""
    stripped = tmp_path / "usdt_target"
    subprocess.run(["objcopy", "--strip-all", str(usdt[0]), str(stripped)], check=True)
    out = probectl("add", "-D", "-x", str(stripped), "sdt_probectl:global arg1", check=False)
    assert out.returncode == 1 and "is in the symbol table of neither" in out.stderr
    debug = tmp_path / "usdt_target.debug"
    subprocess.run(["objcopy", "--only-keep-debug", str(usdt[0]), str(debug)], check=True)
    subprocess.run(["objcopy", "--strip-all", f"--add-gnu-debuglink={debug}", str(usdt[0]), str(stripped)],
                   check=True, cwd=tmp_path)
    with_debug = probectl_definitions(stripped, "sdt_probectl:global arg1")
    assert [d.split()[2:] for d in with_debug] == [d.split()[2:] for d in
                                                   probectl_definitions(usdt[0], "sdt_probectl:global arg1")]
