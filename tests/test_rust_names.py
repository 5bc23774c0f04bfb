"""Rust functions by their paths (fixtures/rust_shop.rs, rustc's legacy mangling): demangled without
the hash in funcs, probed by path with a &str's members fetched, an impl's methods with their
arguments; perf -D by the mangled name is the oracle. (Not yet: v0 mangling; see README.)"""
from __future__ import annotations

import shutil
import subprocess

import pytest

from probectl.debuginfo.elf import ElfFile
from tests.helpers import build_rust_fixture, missing, probectl


@pytest.fixture(scope="module")
def rshop():
    return build_rust_fixture("rust_shop")


def test_funcs_lists_paths_without_the_hash(rshop):
    listed = probectl("funcs", "-x", str(rshop), "rust_shop::*").stdout.splitlines()
    assert listed == ["rust_shop::main", "rust_shop::shop::Cart::add", "rust_shop::shop::label",
                      "rust_shop::shop::lookup"]


def test_a_path_probes_what_perf_probes_by_the_mangled_name(rshop):
    perf = shutil.which("perf")
    if not perf:
        missing("perf (linux-perf) is not installed")
    (mangled,) = [s.name for s in ElfFile(rshop).functions() if s.name.startswith("_ZN9rust_shop4shop6lookup17h")]
    theirs = subprocess.run([perf, "probe", "-x", str(rshop), "-D", f"{mangled} key.length"], capture_output=True,
                            text=True, check=True).stdout
    ours = probectl("add", "-D", "-x", str(rshop), "rust_shop::shop::lookup key.length").stdout
    assert [line.split()[2:] for line in ours.splitlines()] == [line.split()[2:] for line in theirs.splitlines()]
    assert ours.split()[0].endswith("/rust_shop_shop_lookup")
    # perf probes the entry, where key's place (the frame's stack slot, DW_OP_fbreg off %sp) is not
    # yet the frame's; probectl, as perf does in unoptimised C, the line after the prologue.
    (perf_place,), (our_place,) = ([int(line.split()[1].rsplit(":0x", 1)[1], 16) for line in out.splitlines()]
                                   for out in (theirs, ours))
    assert perf_place < our_place


def test_a_method_is_found_by_its_path(rshop):
    out = probectl("add", "-D", "-x", str(rshop), "rust_shop::shop::Cart::add")
    assert out.stdout.split()[0].endswith("/rust_shop_shop_Cart_add")


def test_a_methods_arguments_are_perfs_and_take_rusts_dot(rshop):
    """rustc defines an impl's methods inside their type's DIE (Cart's), where a DIE scanner that looks
    in namespaces alone does not find them; the arguments equal perf -D's by the mangled name (at the
    line after the prologue, as for lookup), and '.' reads through a reference as Rust writes it."""
    perf = shutil.which("perf")
    if not perf:
        missing("perf (linux-perf) is not installed")
    (mangled,) = [s.name for s in ElfFile(rshop).functions() if s.name.startswith("_ZN9rust_shop4shop4Cart3add17h")]
    chain = "qty it->id self->items self->owner"
    theirs = subprocess.run([perf, "probe", "-x", str(rshop), "-D", f"{mangled} {chain}"], capture_output=True,
                            text=True, check=True).stdout
    ours = probectl("add", "-D", "-x", str(rshop), f"rust_shop::shop::Cart::add {chain}").stdout
    assert [line.split()[2:] for line in ours.splitlines()] == [line.split()[2:] for line in theirs.splitlines()]
    dotted = probectl("add", "-D", "-x", str(rshop), "rust_shop::shop::Cart::add qty it.id self.items self.owner")
    assert dotted.stdout == ours
    listed = probectl("vars", "-x", str(rshop), "rust_shop::shop::Cart::add").stdout
    assert all(name in listed for name in ("\tself", "\tit", "\tqty")), listed


def test_legacy_demangling_equals_cxxfilt_without_the_hash(rshop):
    """binutils' c++filt (libiberty's Rust demangler) is the oracle; probectl leaves the hash out."""
    import re

    from probectl.debuginfo.demangle import demangle

    cxxfilt = shutil.which("c++filt")
    if not cxxfilt:
        missing("c++filt (binutils) is not installed")
    names = sorted({s.name for s in ElfFile(rshop).symbols() if re.search(r"17h[0-9a-f]{16}E", s.name)})
    theirs = subprocess.run([cxxfilt], input="\n".join(names), capture_output=True, text=True, check=True).stdout
    assert len(names) > 500
    assert [demangle(n) for n in names] == [re.sub(r"::h[0-9a-f]{16}$", "", t) for t in theirs.splitlines()]


def test_main_is_the_programs_own(rshop):
    """perf -D 'main' probes the Rust runtime's C main; probectl the program's rust_shop::main."""
    (own,) = [s.value for s in ElfFile(rshop).functions() if s.name.startswith("_ZN9rust_shop4main17h")]
    out = probectl("add", "-D", "-x", str(rshop), "main")
    (line,) = out.stdout.splitlines()
    assert line.split()[0].endswith("/rust_shop_main") and int(line.split()[1].rsplit(":0x", 1)[1], 16) == own
    assert "'main' of a Rust program is its own, rust_shop::main" in out.stderr
